//! GPUDirect RDMA facts of the network ports, which every view states alike (issue 24: one
//! rule and one code per fact): `topo show` (the summary), `topo plan` (its messages) and
//! `topo diagnose` (its findings) take them from here, with the same code and severity.
//!
//! A port's GPUDirect RDMA is stated (`gdr` in the XML, a profile's `gdr`, a live scan) or
//! left out by the source; a port left out is unknown, never "no" (NCCL's net plugin answers
//! at run time).

use crate::message::{Code, Finding};
use crate::{NodeKind, Topology};
use petgraph::graph::NodeIndex;

/// The GPUDirect RDMA verdicts over the ports among `nodes` (a host's, or a whole
/// topology's), in a fixed order: stated unavailable, then unknown.
pub fn verdicts(topo: &Topology, nodes: impl IntoIterator<Item = NodeIndex>) -> Vec<Finding> {
    let (mut off, mut unknown) = (vec![], vec![]);
    for n in nodes {
        let NodeKind::Net(x) = &topo.node(n).kind else {
            continue;
        };
        if x.socket {
            // NCCL's Socket transport never reads GPU memory directly: nothing to fix.
            continue;
        }
        let list = if x.gdr_unstated {
            &mut unknown
        } else if !x.gdr {
            &mut off
        } else {
            continue;
        };
        if !list.contains(&x.name) {
            list.push(x.name.clone());
        }
    }
    let mut out = vec![];
    if !off.is_empty() {
        out.push(Finding::new(Code::GdrUnavailable, format!(
                "GPUDirect RDMA not available on {}: NCCL stages that traffic through host memory",
                off.join(", ")
            )).evidence(off
                .iter()
                .map(|p| format!("{p}: the source states no GPUDirect RDMA"))));
    }
    if !unknown.is_empty() {
        out.push(Finding::new(Code::NetGdrUnknown, format!(
                "GPUDirect RDMA unknown on {}: the source does not say; NCCL's net plugin finds out at run time (nvidia-peermem or DMA-BUF), and without it that traffic is staged through host memory",
                unknown.join(", ")
            )).evidence(unknown.iter().map(|p| format!("{p}: the source does not say whether it has GPUDirect RDMA"))));
    }
    out
}

/// How to state a port's GPUDirect RDMA where it works, for a `net-gdr-unknown` verdict.
pub const STATE_GDR: &str =
    "state gdr=\"1\" (XML), `gdr: true` (profile) or --gdr yes where it works";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::hgx;

    fn with_gdr(gdr: bool, unstated: bool) -> Topology {
        let mut t = hgx(2, 90);
        for n in t.nets() {
            if let NodeKind::Net(x) = &mut t.graph[n].kind {
                (x.gdr, x.gdr_unstated) = (gdr, unstated);
            }
        }
        t
    }

    #[test]
    fn stated_off_unknown_and_on_are_three_answers() {
        let all = |t: &Topology| verdicts(t, t.graph.node_indices());
        let off = all(&with_gdr(false, false));
        assert_eq!(off.len(), 1);
        assert_eq!(off[0].code, Code::GdrUnavailable);
        assert!(
            off[0]
                .text
                .starts_with("GPUDirect RDMA not available on mlx5_0, mlx5_1"),
            "{}",
            off[0].text
        );
        let unknown = all(&with_gdr(false, true));
        assert_eq!(unknown.len(), 1);
        assert_eq!(unknown[0].code, Code::NetGdrUnknown);
        assert_eq!(unknown[0].evidence.len(), 2);
        assert!(all(&with_gdr(true, false)).is_empty());
    }

    #[test]
    fn a_port_name_on_many_hosts_is_listed_once() {
        let t = with_gdr(false, true).replicate(4);
        let v = verdicts(&t, t.graph.node_indices());
        assert_eq!(v[0].evidence.len(), 2, "{:?}", v[0].evidence);
    }
}
