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
use std::collections::{BTreeMap, BTreeSet};
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
        let kinds = kinds_of(&self, topo, 0);
        for k in 0..c.count {
            let at = Step {
                sys: k * step.sys,
                graph: k * step.graph,
                hosts: k * step.hosts,
                ranks: k * step.ranks,
            };
            out.add_copy(&self, &kinds, at);
        }
        out.host_ranks = per_host(&self.host_ranks, step, c.count);
        out.index_order = per_host(&self.index_order, step, c.count);
        out
    }

    /// `topo`'s system where it is copies of which faults changed a few (`changed`): one
    /// unchanged copy's system repeated and each changed copy's own, each built on its copy
    /// alone ([`Topology::copy_at`]) and laid at its place, as [`System::repeated`] does;
    /// the changed copies move the later copies' system nodes and ranks by what they lost.
    /// `None` where every copy changed.
    pub(super) fn with_exceptions(
        topo: &Topology,
        (c, changed): (&Copies, &BTreeSet<usize>),
        build: &dyn Fn(&Topology) -> System,
    ) -> Option<System> {
        let model = (0..c.count).find(|k| !changed.contains(k))?;
        let one = build(&topo.copy_at(c, model));
        let own: BTreeMap<usize, System> = changed
            .iter()
            .filter(|&&k| k < c.count)
            .map(|&k| (k, build(&topo.copy_at(c, k))))
            .collect();
        let of = |k: usize| own.get(&k).unwrap_or(&one);
        let one_kinds = kinds_of(&one, topo, model * c.nodes);
        let own_kinds: BTreeMap<usize, Vec<Option<&NodeKind>>> = own
            .iter()
            .map(|(&k, part)| (k, kinds_of(part, topo, k * c.nodes)))
            .collect();
        let mut out = System {
            nodes: Vec::with_capacity(one.nodes.len() * c.count),
            gpus: Vec::with_capacity(one.gpus.len() * c.count),
            nets: Vec::with_capacity(one.nets.len() * c.count),
            cpus: Vec::with_capacity(one.cpus.len() * c.count),
            nvs: Vec::with_capacity(one.nvs.len() * c.count),
            nhosts: (c.count - 1) * c.per_copy + of(c.count - 1).nhosts,
            p2p: Default::default(),
            host_ranks: Vec::new(),
            index_order: Vec::new(),
        };
        let mut at = Step {
            sys: 0,
            graph: 0,
            hosts: 0,
            ranks: 0,
        };
        for k in 0..c.count {
            let part = of(k);
            at.graph = k * c.nodes;
            at.hosts = k * c.per_copy;
            out.add_copy(part, own_kinds.get(&k).unwrap_or(&one_kinds), at);
            // Hosts without GPUs keep their empty lists, as a build over every copy makes.
            for h in 0..c.per_copy {
                let moved = |v: &[Vec<usize>]| -> Vec<usize> {
                    let ranks = v.get(h).map(Vec::as_slice).unwrap_or_default();
                    ranks.iter().map(|&r| r + at.ranks).collect()
                };
                out.host_ranks.push(moved(&part.host_ranks));
                out.index_order.push(moved(&part.index_order));
            }
            at.sys += part.nodes.len();
            at.ranks += part.gpus.len();
        }
        // The lists end at the last host with GPUs.
        while out.host_ranks.last().is_some_and(Vec::is_empty) {
            out.host_ranks.pop();
            out.index_order.pop();
        }
        Some(out)
    }

    /// `one` laid at `at`: every number moved by `at`'s, the ids NCCL makes of a node's
    /// place made again from `kinds` ([`kinds_of`]), which every copy laid from `one` shares.
    fn add_copy(&mut self, one: &System, kinds: &[Option<&NodeKind>], at: Step) {
        for (node, kind) in one.nodes.iter().zip(kinds) {
            let mut n = node.clone();
            n.host += at.hosts as HostId;
            n.topo = n.topo.map(|t| NodeIndex::new(t.index() + at.graph));
            for l in &mut n.links {
                l.to += at.sys;
            }
            if let Some(g) = &mut n.gpu {
                g.rank += at.ranks;
            }
            match kind {
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
        let moved = |v: &[usize]| v.iter().map(|&i| i + at.sys).collect::<Vec<_>>();
        self.gpus.extend(moved(&one.gpus));
        self.nets.extend(moved(&one.nets));
        self.cpus.extend(moved(&one.cpus));
        self.nvs.extend(moved(&one.nvs));
        let r = at.ranks;
        self.p2p.extend(
            one.p2p
                .iter()
                .map(|(&(a, b), caps)| ((a + r, b + r), caps.clone())),
        );
    }
}

/// The hardware kind of each node of `one` whose ids are made of its place (NICs and ports),
/// read on the copy whose graph nodes start at `graph_at`. Every copy laid from `one` has the
/// same kinds node for node (an unchanged copy is as [`Topology::replicate`] made it, a changed
/// one is laid from its own system), so they are read once and not in each of 16,384 copies,
/// scattered over the whole graph.
fn kinds_of<'t>(one: &System, topo: &'t Topology, graph_at: usize) -> Vec<Option<&'t NodeKind>> {
    one.nodes
        .iter()
        .map(|n| {
            let kind = &topo.graph[NodeIndex::new(n.topo?.index() + graph_at)].kind;
            matches!(kind, NodeKind::Nic(_) | NodeKind::Net(_)).then_some(kind)
        })
        .collect()
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

    /// `faults` on copies of an HGX board: the system built with exceptions and the one
    /// built host by host.
    fn faulted_both_ways(copies: usize, faults: &[&str]) -> (System, System) {
        let mut t = hgx(8, 90).replicate(copies);
        let faults: Vec<_> = faults
            .iter()
            .map(|f| topo_model::faults::parse_without(f).unwrap())
            .collect();
        topo_model::faults::apply_all(&mut t, &faults).unwrap();
        assert!(t.copies().is_none() && t.copies_except().is_some());
        let mut each = t.clone();
        each.forget_copies();
        assert!(each.copies_except().is_none());
        let c = BwConstants::default();
        (System::build(&t, &c), System::build(&each, &c))
    }

    #[test]
    fn copies_with_a_faulted_one_build_as_every_host_does() {
        for faults in [
            &["nic:mlx5_7"][..],
            &["nic:mlx5_2@3"],
            &["gpu:5@1"],
            &["gpu:0", "gpu:7@4"],
            // NVLinks removed: the last copy's last links move into their slots.
            &["nvlink:GPU3@2"],
            &["nic:mlx5_0@0", "nvlink:1@4", "gpu:2@2"],
        ] {
            let (with, each) = faulted_both_ways(5, faults);
            assert_eq!(whole(&with), whole(&each), "{faults:?}");
        }
        // Every copy changed: built host by host.
        let all = ["nic:mlx5_1@0", "nic:mlx5_1@1", "nic:mlx5_1@2"];
        let (with, each) = faulted_both_ways(3, &all);
        assert_eq!(whole(&with), whole(&each));
        assert_eq!(with.gpus.len(), 24);
    }

    #[test]
    fn copies_repeat_the_first_ones_system() {
        let t = hgx(8, 90).replicate(5);
        let (repeated, each) = built_both_ways(&t);
        assert_eq!(repeated.gpus.len(), 40);
        assert_eq!(whole(&repeated), whole(&each));
    }
}
