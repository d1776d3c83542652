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
