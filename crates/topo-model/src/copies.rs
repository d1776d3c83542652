//! What `--nodes` made: copies of one machine. A view of a replicated topology can show the
//! first copy and say how many there are, instead of paying for every copy (issue 28:
//! 131,072 GPUs are 16,384 copies of one 8-GPU host).

use crate::{Changed, Copies, HostId, NodeKind, Topology};
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use std::collections::BTreeSet;

impl Topology {
    /// How the topology repeats, where it is copies of one machine that nothing changed
    /// since [`Topology::replicate`] made them: a change to some hosts only (a fault) calls
    /// [`Topology::forget_copies`], and one that adds or removes nodes or links is caught here.
    pub fn copies(&self) -> Option<Copies> {
        self.copies.filter(|c| {
            c.count > 1
                && self.graph.node_count() == c.count * c.nodes
                && self.graph.edge_count() == c.count * c.edges
                && self.hosts.len() == c.count * c.per_copy
        })
    }

    /// The hosts are no longer all alike (a part failed on one of them).
    pub fn forget_copies(&mut self) {
        self.copies = None;
        self.changed = None;
    }

    /// Copies of one machine some of which faults changed: the layout [`Topology::replicate`]
    /// made and the copies that are no longer like the others. `None` where the topology was
    /// not copies, or where something else added or removed nodes or links since. Every copy
    /// not listed is, node for node and link for link in the same order, as it was made.
    pub fn copies_except(&self) -> Option<(Copies, &BTreeSet<usize>)> {
        let ch = self.changed.as_ref()?;
        let c = ch.copies;
        (self.graph.node_count() == c.count * c.nodes
            && self.graph.edge_count() == ch.edges
            && self.hosts.len() == c.count * c.per_copy)
            .then_some((c, &ch.changed))
    }

    /// Before a fault changes some hosts: the topology is no longer copies of one machine,
    /// and the record of which copies changed starts (or goes on, where it still holds).
    pub(crate) fn begin_change(&mut self) {
        let kept = match self.copies() {
            Some(copies) => Some(Changed {
                copies,
                changed: BTreeSet::new(),
                edges: self.graph.edge_count(),
            }),
            None => self
                .copies_except()
                .is_some()
                .then(|| self.changed.take())
                .flatten(),
        };
        self.copies = None;
        self.changed = kept;
    }

    /// The copy holding `host` changes (between [`Topology::begin_change`] and
    /// [`Topology::end_change`]).
    pub(crate) fn mark_changed(&mut self, host: HostId) {
        if let Some(ch) = &mut self.changed {
            ch.changed.insert(host as usize / ch.copies.per_copy.max(1));
        }
    }

    /// After the change: the links it left.
    pub(crate) fn end_change(&mut self) {
        let edges = self.graph.edge_count();
        if let Some(ch) = &mut self.changed {
            ch.edges = edges;
        }
    }

    /// The first copy as a topology of its own: the same node indices, hosts, names and
    /// facts as in `self`. `None` unless the topology is copies ([`Topology::copies`]).
    pub fn first_copy(&self) -> Option<Topology> {
        let c = self.copies()?;
        Some(self.copy_at(&c, 0))
    }

    /// Copy `k` of `c` as a topology of its own, moved to the first copy's place: its nodes
    /// at the first copy's indices, its hosts numbered from 0, its links and P2P answers
    /// in the order `self` holds them ([`Topology::first_copy`] for `k` = 0).
    pub fn copy_at(&self, c: &Copies, k: usize) -> Topology {
        let (node0, host0) = (k * c.nodes, (k * c.per_copy) as HostId);
        let mut out = Topology::new(self.source.clone());
        out.hosts = self.hosts[k * c.per_copy..(k + 1) * c.per_copy].to_vec();
        out.warnings = self.warnings.clone();
        out.graph.reserve_exact_nodes(c.nodes);
        out.graph.reserve_exact_edges(c.edges);
        let mine = node0..node0 + c.nodes;
        let local = |n: NodeIndex| NodeIndex::new(n.index() - node0);
        for i in mine.clone() {
            let n = &self.graph[NodeIndex::new(i)];
            let idx = out.add_node(n.host.saturating_sub(host0), None, n.kind.clone());
            out.graph[idx].parent = n.parent.filter(|p| mine.contains(&p.index())).map(local);
        }
        for e in self.graph.edge_references() {
            if mine.contains(&e.source().index()) && mine.contains(&e.target().index()) {
                out.graph
                    .add_edge(local(e.source()), local(e.target()), e.weight().clone());
            }
        }
        let from = (host0, Default::default(), Default::default());
        let to = (
            host0 + c.per_copy as HostId,
            Default::default(),
            Default::default(),
        );
        out.p2p = self
            .p2p
            .range(from..to)
            .map(|(&(h, a, b), v)| ((h - host0, a, b), v.clone()))
            .collect();
        out
    }

    /// Where the topology is copies of one machine ([`Topology::copies`]), or copies that
    /// faults changed a few of ([`Topology::copies_except`]): which hosts answer a question
    /// asked of each host alone (a judge of its own nodes) for the others. `None` otherwise.
    pub fn standing(&self) -> Option<Standing> {
        if let Some(c) = self.copies() {
            return Some(Standing {
                copies: c,
                model: 0,
                changed: BTreeSet::new(),
            });
        }
        let (c, changed) = self.copies_except()?;
        let model = (0..c.count).find(|k| !changed.contains(k))?;
        Some(Standing {
            copies: c,
            model,
            changed: changed.clone(),
        })
    }

    /// The nodes a yes-or-no question asked of each node alone needs asking of: every node,
    /// or where [`Topology::standing`] says one copy answers for its unchanged copies, that
    /// copy's and the changed ones'.
    pub fn asked_nodes(&self) -> Vec<NodeIndex> {
        match self.standing() {
            Some(s) => s.asked_nodes().collect(),
            None => self.graph.node_indices().collect(),
        }
    }

    /// The network ports of the hosts that answer for themselves ([`Topology::standing`]),
    /// in [`Topology::nets`]' order: enough for a question of which ports there are (their
    /// distinct names, whether any lacks a fact), since an unchanged copy's ports repeat the
    /// model copy's, which comes before it.
    pub fn asked_nets(&self) -> Vec<NodeIndex> {
        match self.standing() {
            Some(s) => self.nets_among(s.asked_nodes()),
            None => self.nets(),
        }
    }

    /// The NVLink fabric cluster UUID of `host`'s GPUs where they share one (`None` for a
    /// host whose GPUs are registered with no fabric, or with several).
    pub fn cluster_of(&self, host: HostId) -> Option<&str> {
        let mut uuids = self.graph.node_weights().filter(|n| n.host == host);
        self.cluster_among(&mut uuids)
    }

    /// [`Topology::cluster_of`] for copy `copy` of host `host` of the first copy, found
    /// among that copy's nodes alone (a host lookup in a 131,072-GPU topology walks them all).
    pub fn cluster_of_copy(&self, c: &Copies, copy: usize, host: HostId) -> Option<&str> {
        let nodes = (copy * c.nodes..(copy + 1) * c.nodes).map(NodeIndex::new);
        let want = (copy * c.per_copy) as HostId + host;
        let mut of_host = nodes.map(|i| &self.graph[i]).filter(|n| n.host == want);
        self.cluster_among(&mut of_host)
    }

    fn cluster_among<'a>(
        &'a self,
        nodes: &mut dyn Iterator<Item = &'a crate::Node>,
    ) -> Option<&'a str> {
        let mut found: Option<&str> = None;
        for n in nodes {
            let NodeKind::Gpu(g) = &n.kind else { continue };
            let uuid = g.fabric.as_ref()?.cluster_uuid.as_str();
            if found.is_some_and(|f| f != uuid) {
                return None;
            }
            found = Some(uuid);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::hgx;
    use crate::*;

    #[test]
    fn replicate_records_its_copies_and_the_first_is_the_machine() {
        let t = hgx(8, 90);
        assert_eq!(t.copies(), None);
        let r = t.replicate(4);
        let c = r.copies().unwrap();
        assert_eq!((c.count, c.per_copy), (4, 1));
        assert_eq!(c.nodes, t.graph.node_count());
        let first = r.first_copy().unwrap();
        assert_eq!(first.graph.node_count(), t.graph.node_count());
        assert_eq!(first.graph.edge_count(), t.graph.edge_count());
        assert_eq!(first.hosts[0].name, r.hosts[0].name);
        for (a, b) in first.graph.node_indices().zip(r.graph.node_indices()) {
            assert_eq!(first.graph[a].kind, r.graph[b].kind);
            assert_eq!(first.graph[a].parent, r.graph[b].parent);
        }
        let g = first.gpus()[3];
        assert_eq!(first.find(0, first.node(g).busid().unwrap()), Some(g));
        assert_eq!(first.p2p.len(), t.p2p.len());
        assert!(first.copies().is_none());
    }

    /// Every judge that lets one copy answer for its unchanged copies says what asking every
    /// host says: copies with faults on some, none, and on a machine whose every copy is
    /// judged (a lane down and a NIC missing before `--nodes`).
    #[test]
    fn one_copy_answers_for_its_unchanged_copies_as_each_would() {
        use crate::faults::{apply, parse_degrade, parse_without};
        use crate::{nic_judge, nvlink_judge, nvlink_shape, pcie_judge};
        let mut odd = crate::testing::hgx_board(&[0, 1, 2, 3], 90, |d| d != 2, false);
        apply(&mut odd, &parse_degrade("nvlink:GPU1=6").unwrap()).unwrap();
        let cases = [
            (hgx(8, 90), vec![]),
            (hgx(8, 90), vec!["w nic:mlx5_7", "d nvlink:GPU1=6@2"]),
            (hgx(8, 90), vec!["w gpu:5@3", "w nvlink:GPU3@1"]),
            (odd.clone(), vec![]),
            (odd, vec!["w nic:mlx5_0@2", "d nvlink:GPU0=12@0"]),
        ];
        let (mut judged, mut found) = (0, 0);
        for (machine, faults) in cases {
            let mut t = machine.replicate(5);
            for f in &faults {
                let fault = match f.split_once(' ').unwrap() {
                    ("w", x) => parse_without(x).unwrap(),
                    (_, x) => parse_degrade(x).unwrap(),
                };
                apply(&mut t, &fault).unwrap();
            }
            let mut every = t.clone();
            every.forget_copies();
            assert!(every.standing().is_none());
            if t.standing().is_none() {
                // A fault that adds or removes nodes leaves no copies to answer for others.
                continue;
            }
            let names = |t: &Topology, v: Vec<NodeIndex>| -> Vec<String> {
                let mut n: Vec<String> = vec![];
                for x in v.iter().filter_map(|&x| t.net(x)) {
                    if !n.contains(&x.name) {
                        n.push(x.name.clone());
                    }
                }
                n
            };
            let pn = |t| nic_judge::every_host(t, &nic_judge::PlainNames(t), true);
            assert_eq!(pn(&t), pn(&every), "{faults:?}");
            let all = |t| nic_judge::every_host(t, &nic_judge::PlainNames(t), false);
            assert_eq!(all(&t), all(&every), "{faults:?}");
            judged += 1;
            found += usize::from(!pn(&t).is_empty() && !nvlink_judge::every_gpu(&t).is_empty());
            assert_eq!(
                nvlink_judge::every_gpu(&t),
                nvlink_judge::verdicts(&every, every.gpus())
            );
            assert_eq!(
                nvlink_shape::problems(&t),
                nvlink_shape::problems(&every),
                "{faults:?}"
            );
            assert_eq!(
                pcie_judge::every_node(&t),
                pcie_judge::every_node(&every),
                "{faults:?}"
            );
            assert_eq!(names(&t, t.asked_nets()), names(&every, every.nets()));
            let asked: Vec<NodeIndex> = t.asked_nodes();
            assert!(asked.len() < every.asked_nodes().len(), "{faults:?}");
        }
        assert!(judged >= 4 && found >= 2, "{judged} {found}");
    }

    #[test]
    fn a_change_to_some_hosts_ends_the_copies() {
        let r = hgx(8, 90).replicate(3);
        let mut lost = r.clone();
        let e = lost.graph.edge_indices().next_back().unwrap();
        lost.graph.remove_edge(e);
        assert!(lost.copies().is_none(), "a link removed on the last copy");
        let mut forgot = r.clone();
        forgot.forget_copies();
        assert!(forgot.first_copy().is_none());
        assert!(hgx(8, 90).replicate(1).copies().is_none());
    }

    #[test]
    fn copies_split_alike_stay_copies() {
        let r = hgx(8, 90).replicate(3);
        let c = r.copies().unwrap();
        let gpus = r.gpus();
        let halves: Vec<Vec<_>> = gpus.chunks(4).map(<[_]>::to_vec).collect();
        let split = r.split_gpus(&halves);
        let s = split
            .copies()
            .expect("each copy split in the same two halves");
        assert_eq!((s.count, s.per_copy), (3, 2));
        assert_eq!(s.nodes * 3, split.graph.node_count());
        assert_eq!(split.first_copy().unwrap().gpus().len(), 8);
        // The last copy split otherwise: the parts are not copies.
        let mut odd = halves.clone();
        let moved = odd[5].remove(0);
        odd[4].push(moved);
        assert!(r.split_gpus(&odd).copies().is_none());
        assert_eq!(c.count, 3);
    }

    #[test]
    fn each_copy_has_its_domains_cluster() {
        let mut t = hgx(4, 100);
        for g in t.gpus() {
            if let NodeKind::Gpu(x) = &mut t.node_mut(g).kind {
                x.fabric = Some(FabricInfo {
                    cluster_uuid: "c".into(),
                    clique_id: 1,
                    state: "completed".into(),
                    status: None,
                });
            }
        }
        t.hosts[0].nvlink_domain = Some(NvlinkDomain { gpus: 8 });
        let r = t.replicate(4);
        let c = r.copies().unwrap();
        let of = |copy| r.cluster_of_copy(&c, copy, 0).map(String::from);
        assert_eq!(
            [of(0), of(1), of(2), of(3)],
            [
                Some("c".to_string()),
                Some("c".to_string()),
                Some("c-1".to_string()),
                Some("c-1".to_string())
            ]
        );
        assert_eq!(r.cluster_of(2), Some("c-1"));
        assert_eq!(hgx(8, 90).cluster_of(0), None);
    }
}

/// Which hosts of copies stand for which ([`Topology::standing`]): a host of an unchanged
/// copy is, node by node, the model copy's host at its place (the same kinds, facts and
/// links, its node and host numbers moved by whole copies), so a question asked of that
/// host's own nodes has the model host's answer; a changed copy's hosts answer for
/// themselves.
#[derive(Clone, Debug)]
pub struct Standing {
    copies: Copies,
    model: usize,
    changed: BTreeSet<usize>,
}

impl Standing {
    /// The host whose answer `host`'s is: itself, or the model copy's host at its place.
    pub fn answered_by(&self, host: usize) -> usize {
        let per = self.copies.per_copy.max(1);
        let k = host / per;
        if k == self.model || self.changed.contains(&k) || k >= self.copies.count {
            host
        } else {
            self.model * per + host % per
        }
    }

    /// How many hosts `host`'s answer stands for: the unchanged copies' for a host of the
    /// model copy, 1 for a host of a changed copy, none for the others.
    pub fn stands_for(&self, host: usize) -> usize {
        let k = host / self.copies.per_copy.max(1);
        if k == self.model {
            let changed = self.changed.iter().filter(|&&c| c < self.copies.count);
            self.copies.count - changed.count()
        } else {
            usize::from(self.changed.contains(&k) || k >= self.copies.count)
        }
    }

    /// Whether node `n` is one of a host that answers for itself.
    pub fn asks(&self, n: NodeIndex) -> bool {
        let k = n.index() / self.copies.nodes.max(1);
        k == self.model || self.changed.contains(&k) || k >= self.copies.count
    }

    /// The model copy's nodes, in index order.
    pub fn model_nodes(&self) -> impl Iterator<Item = NodeIndex> + use<> {
        let nodes = self.copies.nodes;
        (self.model * nodes..(self.model + 1) * nodes).map(NodeIndex::new)
    }

    /// The nodes of the hosts that answer for themselves, in index order.
    pub fn asked_nodes(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        let nodes = self.copies.nodes;
        std::iter::once(self.model)
            .chain(
                self.changed
                    .iter()
                    .copied()
                    .filter(|&k| k < self.copies.count),
            )
            .collect::<BTreeSet<usize>>()
            .into_iter()
            .flat_map(move |k| (k * nodes..(k + 1) * nodes).map(NodeIndex::new))
    }
}
