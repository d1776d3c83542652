//! NVLS (NVLink SHARP multicast) stated off for a host, which every view states alike (issue
//! 24): before, only `topo plan` said so; show and diagnose said nothing of a host the source
//! or `--nvls off` says has no multicast.

use crate::message::{Code, Finding, Severity};
use crate::{NodeKind, Topology};
use petgraph::graph::NodeIndex;
use std::collections::BTreeSet;

/// The hosts of `nodes` (a host's nodes, or a whole topology's) whose NVLS the source states
/// off, as one verdict: a warning where such a host has NVSwitch chips (NCCL would build NVLS
/// channels there), else an info. Linear in `nodes`: show asks once per host.
pub fn verdicts(topo: &Topology, nodes: impl IntoIterator<Item = NodeIndex>) -> Vec<Finding> {
    let (mut hosts, mut with_switch) = (BTreeSet::new(), BTreeSet::new());
    for n in nodes {
        let node = topo.node(n);
        hosts.insert(node.host);
        if matches!(node.kind, NodeKind::NvSwitch(_)) {
            with_switch.insert(node.host);
        }
    }
    let mut off = vec![];
    let mut switched = false;
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
    vec![
        Finding::at(
            Code::NvlsUnavailable,
            if switched {
                Severity::Warning
            } else {
                Severity::Info
            },
            format!("NVLS off on {on} ({why}): no multicast, so NCCL builds no NVLS channels"),
        )
        .evidence(off.iter().map(|(n, w)| format!("{n}: NVLS off ({w})"))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FactNote;
    use crate::testing::hgx;

    #[test]
    fn nvls_stated_off_is_a_warning_on_nvswitch_hosts() {
        let mut t = hgx(8, 90).replicate(2);
        let all: Vec<NodeIndex> = t.graph.node_indices().collect();
        assert!(verdicts(&t, all.clone()).is_empty());
        for h in &mut t.hosts {
            h.nvls = Some(FactNote {
                value: false,
                why: "--nvls off".into(),
            });
        }
        let v = verdicts(&t, all.clone());
        assert_eq!(
            (v[0].code, v[0].severity),
            (Code::NvlsUnavailable, Severity::Warning)
        );
        assert!(
            v[0].text.starts_with("NVLS off on 2 hosts"),
            "{}",
            v[0].text
        );
        let second: Vec<NodeIndex> = all.into_iter().filter(|&n| t.node(n).host == 1).collect();
        let v = verdicts(&t, second);
        assert_eq!((v[0].evidence.len(), v[0].severity), (1, Severity::Warning));
    }
}
