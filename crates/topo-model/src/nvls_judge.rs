//! NVLS (NVLink SHARP multicast) stated off for a host, which every view states alike (issue
//! 24): before, only `topo plan` said so; show and diagnose said nothing of a host the source
//! or `--nvls off` says has no multicast.

use crate::message::{Code, Severity, Verdict};
use crate::{HostId, Topology};

/// The hosts among `hosts` whose NVLS the source states off, as one verdict: a warning where
/// the host has NVSwitch chips (NCCL would build NVLS channels there), else an info.
pub fn verdicts(topo: &Topology, hosts: impl IntoIterator<Item = HostId>) -> Vec<Verdict> {
    let mut off = vec![];
    let mut switched = false;
    let with_switch: std::collections::BTreeSet<HostId> =
        topo.nvswitches().map(|s| topo.node(s).host).collect();
    for h in hosts {
        let Some(host) = topo.hosts.get(h as usize) else {
            continue;
        };
        let Some(f) = host.nvls.as_ref().filter(|f| !f.value) else {
            continue;
        };
        let name = host.name.clone().unwrap_or_else(|| format!("host {h}"));
        switched |= with_switch.contains(&h);
        off.push((name, f.why.clone()));
    }
    let Some((first, why)) = off.first() else {
        return vec![];
    };
    let on = match off.len() {
        1 => first.clone(),
        n => format!("{n} hosts ({first}, ...)"),
    };
    vec![Verdict {
        code: Code::NvlsUnavailable,
        severity: if switched {
            Severity::Warning
        } else {
            Severity::Info
        },
        summary: format!("NVLS off on {on} ({why}): no multicast, so NCCL builds no NVLS channels"),
        evidence: off
            .iter()
            .map(|(n, w)| format!("{n}: NVLS off ({w})"))
            .collect(),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FactNote;
    use crate::testing::hgx;

    #[test]
    fn nvls_stated_off_is_a_warning_on_nvswitch_hosts() {
        let mut t = hgx(8, 90).replicate(2);
        assert!(verdicts(&t, [0, 1]).is_empty());
        for h in &mut t.hosts {
            h.nvls = Some(FactNote {
                value: false,
                why: "--nvls off".into(),
            });
        }
        let v = verdicts(&t, [0, 1]);
        assert_eq!(
            (v[0].code, v[0].severity),
            (Code::NvlsUnavailable, Severity::Warning)
        );
        assert!(
            v[0].summary.starts_with("NVLS off on 2 hosts"),
            "{}",
            v[0].summary
        );
        assert_eq!(verdicts(&t, [1])[0].evidence.len(), 1);
    }
}
