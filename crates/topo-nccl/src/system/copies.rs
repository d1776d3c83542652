//! The system of `--nodes` copies of one machine, made from the first copy's.
//!
//! Every step of [`System::build_each`] reads one host at a time (its fused XML, its links,
//! its Broadcom switches, its CPU order), and the copies are laid out one after another
//! ([`Topology::replicate`]): copy `k`'s graph nodes, hosts and ranks follow copy `k - 1`'s,
//! and so do its system nodes, since they are made in (host, kind) order. Copy `k`'s system
//! is therefore the first copy's with every number moved by `k` copies; only the ids NCCL
//! makes of a node's place (a bare NIC's, a GUID-less port's) are made again.

use super::{System, net_guid, nic_id};
use petgraph::graph::NodeIndex;
use topo_model::{Copies, HostId, NodeKind, Topology};

/// What one copy adds to each kind of number.
#[derive(Clone, Copy)]
struct Step {
    sys: usize,
    graph: usize,
    hosts: usize,
    ranks: usize,
}

impl System {
    /// `self` (the first copy's system) repeated for every copy of `topo`.
    pub(super) fn repeated(self, topo: &Topology, c: &Copies) -> System {
        let step = Step {
            sys: self.nodes.len(),
            graph: c.nodes,
            hosts: c.per_copy,
            ranks: self.gpus.len(),
        };
        let mut out = System {
            nodes: Vec::with_capacity(step.sys * c.count),
            gpus: Vec::with_capacity(step.ranks * c.count),
            nets: Vec::with_capacity(self.nets.len() * c.count),
            cpus: Vec::with_capacity(self.cpus.len() * c.count),
            nvs: Vec::with_capacity(self.nvs.len() * c.count),
            nhosts: (c.count - 1) * step.hosts + self.nhosts,
            p2p: Default::default(),
            host_ranks: Vec::new(),
            index_order: Vec::new(),
        };
        for k in 0..c.count {
            out.add_copy(&self, topo, step, k);
        }
        out.host_ranks = per_host(&self.host_ranks, step, c.count);
        out.index_order = per_host(&self.index_order, step, c.count);
        out
    }

    fn add_copy(&mut self, one: &System, topo: &Topology, step: Step, k: usize) {
        for node in &one.nodes {
            let mut n = node.clone();
            n.host += (k * step.hosts) as HostId;
            n.topo = n.topo.map(|t| NodeIndex::new(t.index() + k * step.graph));
            for l in &mut n.links {
                l.to += k * step.sys;
            }
            if let Some(g) = &mut n.gpu {
                g.rank += k * step.ranks;
            }
            match n.topo.map(|t| &topo.graph[t].kind) {
                Some(NodeKind::Nic(nic)) => n.id = nic_id(nic, n.topo.unwrap_or_default()),
                Some(NodeKind::Net(port)) => {
                    if let Some(a) = &mut n.net {
                        a.guid = net_guid(port, n.host);
                    }
                }
                _ => {}
            }
            self.nodes.push(n);
        }
        let moved = |v: &[usize]| v.iter().map(|&i| i + k * step.sys).collect::<Vec<_>>();
        self.gpus.extend(moved(&one.gpus));
        self.nets.extend(moved(&one.nets));
        self.cpus.extend(moved(&one.cpus));
        self.nvs.extend(moved(&one.nvs));
        let r = k * step.ranks;
        self.p2p.extend(
            one.p2p
                .iter()
                .map(|(&(a, b), caps)| ((a + r, b + r), caps.clone())),
        );
    }
}

/// A per-host list of ranks for every copy: hosts without GPUs in the middle get empty
/// lists, as a build over all copies makes, and the list ends at the last copy's last
/// host with GPUs.
fn per_host(one: &[Vec<usize>], step: Step, count: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::with_capacity((count - 1) * step.hosts + one.len());
    for k in 0..count {
        for h in 0..step.hosts {
            if k + 1 == count && h >= one.len() {
                break;
            }
            let ranks = one.get(h).map(Vec::as_slice).unwrap_or_default();
            out.push(ranks.iter().map(|&r| r + k * step.ranks).collect());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::BwConstants;
    use topo_model::testing::hgx;

    /// Everything a system holds, the private per-host lists included.
    fn whole(s: &System) -> String {
        format!(
            "{}\n{:?}\n{:?}",
            serde_json::to_string(s).unwrap(),
            s.host_ranks,
            s.index_order
        )
    }

    fn built_both_ways(t: &Topology) -> (System, System) {
        assert!(t.copies().is_some());
        let mut each = t.clone();
        each.forget_copies();
        let c = BwConstants::default();
        (System::build(t, &c), System::build(&each, &c))
    }

    #[test]
    fn copies_repeat_the_first_ones_system() {
        let t = hgx(8, 90).replicate(5);
        let (repeated, each) = built_both_ways(&t);
        assert_eq!(repeated.gpus.len(), 40);
        assert_eq!(whole(&repeated), whole(&each));
    }
}
