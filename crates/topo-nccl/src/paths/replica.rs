//! Hosts whose path tables are an earlier host's: `--nodes 4096` replicates one machine, and
//! computing 4,096 identical tables was most of the path time at 32,768 GPUs (copying them
//! after, 140 MB and a tenth of the plan's time). A replica reads its source's table and
//! moves the routes onto its own nodes as they are read ([`Paths::route`]).
//!
//! A host copies another's tables only when everything its paths depend on is equal, node
//! by node at the same offset in the host's block of system nodes: node types, GPU and NET
//! attributes, every link (far end, type, bandwidth), the per-host node lists the searches
//! scan, the rank order and NVML's P2P answers. Paths never leave a host whose links all
//! stay inside it, so such a host's tables (and NCCL's post-processing of them, which reads
//! only the host's own pairs) are a function of exactly that. Any other host is computed.

use super::table::{KINDS, Paths};
use crate::system::{LinkType, NodeType, System};
use std::collections::HashMap;

/// Which hosts compute their tables and which copy whose.
pub(super) struct Replicas {
    /// Per host: the host whose tables it copies, itself when it computes them.
    source: Vec<usize>,
    /// Per host: the first system node of its block (only meaningful for shapeable hosts).
    start: Vec<usize>,
}

impl Replicas {
    /// Every host computes its own tables (the reference the tests compare copies with).
    #[cfg(test)]
    fn every_host(sys: &System, paths: &mut Paths) -> Replicas {
        let r = Replicas::of(sys, paths);
        let r = Replicas {
            source: (0..r.source.len()).collect(),
            start: r.start,
        };
        r.alloc_tables(paths);
        r
    }

    /// Decides which hosts compute their tables and allocates those tables.
    pub(super) fn of(sys: &System, paths: &mut Paths) -> Replicas {
        let r = Replicas::decide(sys, paths);
        r.alloc_tables(paths);
        r
    }

    fn alloc_tables(&self, paths: &mut Paths) {
        for (h, t) in paths.hosts.iter_mut().enumerate() {
            if self.computes(h) && t.table.len() != t.nb * t.nb {
                t.table = vec![None; t.nb * t.nb];
            }
        }
    }

    fn decide(sys: &System, paths: &Paths) -> Replicas {
        let nh = paths.hosts.len();
        let blocks = host_blocks(sys, nh);
        let mut rank_pos = vec![usize::MAX; sys.gpus.len()];
        for ranks in &paths.host_ranks {
            for (i, &r) in ranks.iter().enumerate() {
                rank_pos[r] = i;
            }
        }
        let mut first: HashMap<Vec<u64>, usize> = HashMap::new();
        let mut source: Vec<usize> = (0..nh).collect();
        let mut start = vec![0; nh];
        for h in 0..nh {
            let Some((s, len)) = blocks[h] else {
                continue;
            };
            start[h] = s;
            if let Some(shape) = shape(sys, paths, &rank_pos, h, s, len) {
                source[h] = *first.entry(shape).or_insert(h);
            }
        }
        Replicas { source, start }
    }

    /// Whether host `h` computes its own tables.
    pub(super) fn computes(&self, h: usize) -> bool {
        self.source.get(h).is_none_or(|&s| s == h)
    }

    /// Points every replica at its source host's table and copies its NET owners.
    pub(super) fn fill(&self, sys: &System, paths: &mut Paths) {
        for h in 0..self.source.len() {
            let r = self.source[h];
            if r == h {
                continue;
            }
            debug_assert_eq!(paths.hosts[h].nb, paths.hosts[r].nb);
            let t = &mut paths.hosts[h];
            (t.source, t.from, t.to) = (r, self.start[r], self.start[h]);
            t.table = Vec::new();
        }
        if paths.net_local_gpu.len() != sys.nets.len() {
            return;
        }
        for (ni, &n) in sys.nets.iter().enumerate() {
            let h = paths.host_of[n] as usize;
            let r = self.source[h];
            if r == h {
                continue;
            }
            let ref_node = n - self.start[h] + self.start[r];
            let owner = paths.net_pos[ref_node]
                .and_then(|rn| paths.net_local_gpu[rn])
                .and_then(|rank| {
                    let i = paths.host_ranks[r].iter().position(|&x| x == rank)?;
                    paths.host_ranks[h].get(i).copied()
                });
            paths.net_local_gpu[ni] = owner;
        }
    }
}

/// Per host, its system nodes as one block `(start, len)`, or `None` when they are not
/// contiguous (then the host is computed).
fn host_blocks(sys: &System, nh: usize) -> Vec<Option<(usize, usize)>> {
    let mut first = vec![usize::MAX; nh];
    let mut count = vec![0usize; nh];
    let mut last = vec![0usize; nh];
    for (i, n) in sys.nodes.iter().enumerate() {
        let h = n.host as usize;
        first[h] = first[h].min(i);
        last[h] = i;
        count[h] += 1;
    }
    (0..nh)
        .map(|h| (count[h] > 0 && last[h] + 1 - first[h] == count[h]).then(|| (first[h], count[h])))
        .collect()
}

fn kind_code(k: NodeType) -> u64 {
    match k {
        NodeType::Gpu => 1,
        NodeType::Pci => 2,
        NodeType::Nvs => 3,
        NodeType::Cpu => 4,
        NodeType::Nic => 5,
        NodeType::Net => 6,
    }
}

fn link_code(k: LinkType) -> u64 {
    match k {
        LinkType::Loc => 1,
        LinkType::Nvl => 2,
        LinkType::C2c => 3,
        LinkType::Pci => 4,
        LinkType::Sys => 5,
        LinkType::Net => 6,
    }
}

fn tri(v: Option<bool>) -> u64 {
    match v {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    }
}

/// Everything host `h`'s paths depend on, with nodes as offsets in its block and ranks as
/// positions in its rank list; `None` when a link or list leaves the block.
fn shape(
    sys: &System,
    paths: &Paths,
    rank_pos: &[usize],
    h: usize,
    s: usize,
    len: usize,
) -> Option<Vec<u64>> {
    let off = |x: usize| (x >= s && x < s + len).then(|| (x - s) as u64);
    let mut w: Vec<u64> = vec![len as u64];
    for node in &sys.nodes[s..s + len] {
        w.push(kind_code(node.kind));
        match &node.gpu {
            Some(g) => w.extend([
                1,
                *rank_pos.get(g.rank)? as u64,
                g.dev as i64 as u64,
                u64::from(g.sm),
                u64::from(g.gdr),
            ]),
            None => w.push(0),
        }
        match &node.net {
            Some(n) => w.extend([
                1,
                n.dev as i64 as u64,
                n.bw.to_bits(),
                u64::from(n.gdr),
                u64::from(n.coll),
                u64::from(n.port),
                n.latency.to_bits(),
                u64::from(n.maxconn),
            ]),
            None => w.push(0),
        }
        match &node.cpu {
            Some(c) => w.extend([1, c.numa as i64 as u64]),
            None => w.push(0),
        }
        w.push(node.links.len() as u64);
        for l in &node.links {
            w.extend([off(l.to)?, link_code(l.kind), l.bw.to_bits()]);
        }
    }
    for k in 0..KINDS {
        let list = paths
            .by_host
            .get(h * KINDS + k)
            .map_or(&[][..], Vec::as_slice);
        w.push(list.len() as u64);
        for &x in list {
            w.push(off(x)?);
        }
    }
    let ranks = paths.host_ranks.get(h).map_or(&[][..], Vec::as_slice);
    w.push(ranks.len() as u64);
    for &r in ranks {
        w.push(off(sys.gpus[r])?);
    }
    if !sys.p2p.is_empty() {
        for &a in ranks {
            for &b in ranks {
                match sys.p2p_caps(a, b) {
                    Some(c) => {
                        w.extend([1, tri(c.read), tri(c.write), tri(c.nvlink), tri(c.atomics)])
                    }
                    None => w.push(0),
                }
            }
        }
    }
    Some(w)
}

#[cfg(test)]
mod tests {
    use super::super::{PathPolicy, post_process, search_paths, skeleton};
    use super::*;
    use topo_model::testing::{hgx, pcie_box};
    use topo_model::{BwConstants, Topology};

    /// Paths with the hosts' tables copied (as `compute` does) and with every host computed.
    fn both(sys: &System, policy: &PathPolicy) -> (Paths, Paths, Replicas) {
        let run = |every: bool| {
            let mut p = skeleton(sys);
            let r = if every {
                Replicas::every_host(sys, &mut p)
            } else {
                Replicas::of(sys, &mut p)
            };
            search_paths(sys, policy, &mut p, &r);
            post_process(sys, policy, &mut p, &r);
            r.fill(sys, &mut p);
            (p, r)
        };
        let (shared, r) = run(false);
        let (full, _) = run(true);
        (shared, full, r)
    }

    fn same(a: &Paths, b: &Paths, sys: &System) {
        assert_eq!(a.net_local_gpu, b.net_local_gpu);
        for x in 0..sys.nodes.len() {
            for y in 0..sys.nodes.len() {
                let key = |p: &Paths| {
                    let path = p.get(x, y).map(|q| (q.ty, q.bw, q.hops));
                    (path, p.route(x, y).map(Iterator::collect::<Vec<_>>))
                };
                assert_eq!(key(a), key(b), "path {x} -> {y}");
            }
        }
    }

    fn system(t: &Topology) -> System {
        System::build(t, &BwConstants::default())
    }

    #[test]
    fn identical_hosts_copy_the_first_hosts_tables() {
        let sys = system(&hgx(8, 90).replicate(4));
        for policy in [
            PathPolicy::default(),
            PathPolicy {
                p2p_disable: true,
                ..PathPolicy::default()
            },
            PathPolicy {
                minor: 30,
                ..PathPolicy::default()
            },
        ] {
            let (shared, full, r) = both(&sys, &policy);
            assert_eq!(r.source, vec![0, 0, 0, 0]);
            same(&shared, &full, &sys);
        }
    }

    #[test]
    fn a_host_that_differs_computes_its_own() {
        let mut sys = system(&pcie_box_pair());
        // Host 1's first link gets another bandwidth: it is no copy of host 0.
        let h1 = (0..sys.nodes.len())
            .find(|&i| sys.nodes[i].host == 1)
            .unwrap();
        let i = (h1..sys.nodes.len())
            .find(|&i| !sys.nodes[i].links.is_empty())
            .unwrap();
        sys.nodes[i].links[0].bw += 1.0;
        let (shared, full, r) = both(&sys, &PathPolicy::default());
        assert_eq!(r.source[1], 1);
        assert_eq!(r.source[2], 0);
        same(&shared, &full, &sys);
    }

    fn pcie_box_pair() -> Topology {
        // No GPUDirect RDMA: the NET paths are rerouted through the CPU (post-processing).
        pcie_box("Intel", 25, 1, false, false).replicate(3)
    }
}
