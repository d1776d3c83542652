//! GPU peer access, which every view states alike (issue 24: one rule and one code per fact):
//! `topo show` (the summary), `topo plan` (its messages) and `topo diagnose` (its findings)
//! take it from here. Before, the same GeForce pair was `p2p-refused-by-driver` in plan,
//! `gpu-no-p2p-support` in diagnose (by a rule of its own) and nothing in show.
//!
//! Two facts with their own evidence: a GPU whose driver refuses peer access
//! ([`crate::Gpu::peer_access`]: stated, or a device id of the sourced table), and a pair for
//! which NVML answers that P2P reads or writes do not work.

use crate::message::{Code, Finding};
use crate::{HostId, Topology};
use petgraph::graph::NodeIndex;
use std::collections::{BTreeMap, BTreeSet};

/// How to say that a driver allows peer access after all, for `p2p-refused-by-driver`.
pub const STATE_P2P: &str =
    "if this driver allows peer access, say so with --p2p on or the profile's `p2p: true`";

/// The peer-access verdicts over the GPUs among `nodes` (a host's, or a whole topology's):
/// GPUs whose driver refuses peer access (one verdict per reason), then pairs NVML refuses.
pub fn verdicts(topo: &Topology, nodes: impl IntoIterator<Item = NodeIndex>) -> Vec<Finding> {
    let mut refused: BTreeMap<String, (BTreeSet<i32>, BTreeSet<HostId>)> = BTreeMap::new();
    let mut hosts = BTreeSet::new();
    for n in nodes {
        let Some(g) = topo.gpu(n) else { continue };
        let host = topo.node(n).host;
        hosts.insert(host);
        let access = g.peer_access();
        if !access.allowed {
            let e = refused.entry(access.why).or_default();
            e.0.insert(g.dev);
            e.1.insert(host);
        }
    }
    let mut out: Vec<Finding> = refused
        .into_iter()
        .map(|(why, (devs, on))| refused_verdict(why, devs, on))
        .collect();
    out.extend(nvml_denied(topo, &hosts));
    out
}

fn refused_verdict(why: String, devs: BTreeSet<i32>, hosts: BTreeSet<HostId>) -> Finding {
    let list: Vec<String> = devs.iter().map(|d| d.to_string()).collect();
    let on = if hosts.len() > 1 {
        format!(" on {} hosts", hosts.len())
    } else {
        String::new()
    };
    Finding::new(
        Code::P2pRefusedByDriver,
        format!(
            "P2P refused for GPU {}{on} ({why}): NCCL connects them through SHM (host memory)",
            list.join(", ")
        ),
    )
    .evidence(devs.iter().map(|d| format!("GPU{d}: {why}")))
}

/// Pairs of GPUs on `hosts` for which NVML answers that P2P reads or writes do not work
/// (NCCL needs both: NVIDIA/nccl v2.28.9-1 src/graph/paths.cc, `ncclTopoCheckP2p`).
fn nvml_denied(topo: &Topology, hosts: &BTreeSet<HostId>) -> Option<Finding> {
    let gpu = |h: HostId, b: crate::BusId| -> String {
        topo.find(h, b)
            .and_then(|n| topo.gpu(n))
            .map_or_else(|| b.to_string(), |g| format!("GPU{}", g.dev))
    };
    let no = |x: Option<bool>| x == Some(false);
    // Per host, a range of the map: show asks once per host, and a scan of every host's
    // pairs each time was quadratic in hosts.
    let (lo, hi) = (crate::BusId(0), crate::BusId(u64::MAX));
    let pairs: Vec<((HostId, crate::BusId, crate::BusId), String)> = hosts
        .iter()
        .flat_map(|&h| topo.p2p.range((h, lo, lo)..=(h, hi, hi)))
        .filter(|((_, a, b), c)| a < b && (no(c.read) || no(c.write)))
        .map(|(&(h, a, b), c)| {
            let what = match (no(c.read), no(c.write)) {
                (true, true) => "read and write",
                (true, false) => "read",
                _ => "write",
            };
            (
                (h, a, b),
                format!("host {h}: NVML reports no P2P {what} between {a} and {b}"),
            )
        })
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len();
    let mut named: Vec<String> = pairs
        .iter()
        .take(6)
        .map(|((h, a, b), _)| format!("{}–{}", gpu(*h, *a), gpu(*h, *b)))
        .collect();
    if n > 6 {
        named.push("…".into());
    }
    Some(Finding::new(Code::P2pDenied, format!(
            "NVML reports no P2P read/write for {n} GPU pair{} ({}): NCCL will not use P2P there (check ACS/IOMMU settings, or the GPU SKU)",
            if n == 1 { "" } else { "s" },
            named.join(", ")
        )).evidence(pairs.into_iter().map(|(_, e)| e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::hgx;
    use crate::{BusId, NodeKind, P2pCaps};

    #[test]
    fn a_listed_board_is_refused_once_per_reason_and_nvml_pairs_are_named() {
        let mut t = hgx(2, 90);
        assert!(verdicts(&t, t.graph.node_indices()).is_empty());
        for g in t.gpus() {
            if let NodeKind::Gpu(x) = &mut t.graph[g].kind {
                x.device = Some(0x2684);
            }
        }
        let mut t = t.replicate(3);
        let v = verdicts(&t, t.graph.node_indices());
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].code, Code::P2pRefusedByDriver);
        assert!(
            v[0].text
                .starts_with("P2P refused for GPU 0, 1 on 3 hosts (GeForce RTX 4090 (0x2684)"),
            "{}",
            v[0].text
        );
        let caps = P2pCaps {
            read: Some(false),
            write: Some(true),
            ..Default::default()
        };
        t.p2p.insert((0, BusId(1), BusId(2)), caps);
        let v = verdicts(&t, t.graph.node_indices());
        assert_eq!(v[1].code, Code::P2pDenied);
        assert!(
            v[1].evidence[0].contains("no P2P read between"),
            "{:?}",
            v[1].evidence
        );
    }
}
