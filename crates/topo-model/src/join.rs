//! Dissimilar hosts (issue 28): one topology per host, joined in node order. NCCL runs each
//! rank's search on its own host's topology, so a joined topology keeps every host's own
//! facts; only names and host hashes change where two hosts would otherwise share them.

use crate::{Host, HostId, NodeKind, Topology};
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};

impl Topology {
    /// The hosts of `parts` in order, each part's hosts after the previous part's. Parts
    /// that are all the same machine become [`Topology::replicate`] of the first, so that
    /// identical hosts stay cheap and plan exactly as `--nodes` does. `None` for no parts.
    pub fn join(parts: &[Topology]) -> Option<Topology> {
        let first = parts.first()?;
        if parts.iter().all(|p| p.same_machine(first)) {
            return Some(first.replicate(parts.len()));
        }
        let mut out = Topology::new(joined_source(parts));
        out.hosts.clear();
        let many = parts.len() > 1;
        for (i, part) in parts.iter().enumerate() {
            let base = out.hosts.len() as HostId;
            // `add_node` grows `hosts`; the part's own facts replace the defaults.
            out.append(part, base);
            for w in &part.warnings {
                out.warn(if many {
                    format!("host {}: {w}", part_name(part, i))
                } else {
                    w.clone()
                });
            }
        }
        out.distinct_host_names();
        Some(out)
    }

    /// The same machine: the same nodes, links, host facts and NVML answers, in the same
    /// order (what [`Topology::replicate`] would copy).
    fn same_machine(&self, other: &Topology) -> bool {
        self.hosts == other.hosts
            && self.p2p == other.p2p
            && self.graph.node_count() == other.graph.node_count()
            && self.graph.edge_count() == other.graph.edge_count()
            && self
                .graph
                .node_weights()
                .zip(other.graph.node_weights())
                .all(|(a, b)| a == b)
            && self
                .graph
                .edge_references()
                .zip(other.graph.edge_references())
                .all(|(a, b)| {
                    a.source() == b.source() && a.target() == b.target() && a.weight() == b.weight()
                })
    }

    /// Adds `part`'s nodes, links and NVML answers with its hosts numbered from `base`: what
    /// [`Topology::join`] and each copy of [`Topology::replicate`] add. Returns the new index
    /// of each of `part`'s nodes, in `part`'s order.
    pub(crate) fn append_graph(&mut self, part: &Topology, base: HostId) -> Vec<NodeIndex> {
        let map: Vec<NodeIndex> = part
            .graph
            .node_indices()
            .map(|idx| {
                let node = &part.graph[idx];
                self.add_node(base + node.host, None, node.kind.clone())
            })
            .collect();
        for idx in part.graph.node_indices() {
            let parent = part.graph[idx].parent.map(|p| map[p.index()]);
            self.graph[map[idx.index()]].parent = parent;
        }
        for e in part.graph.edge_references() {
            self.graph.add_edge(
                map[e.source().index()],
                map[e.target().index()],
                e.weight().clone(),
            );
        }
        for ((h, a, b), caps) in &part.p2p {
            self.p2p.insert((base + h, *a, *b), caps.clone());
        }
        map
    }

    /// [`Topology::append_graph`] and `part`'s host facts, its hosts numbered from `base`.
    fn append(&mut self, part: &Topology, base: HostId) {
        self.append_graph(part, base);
        let hosts = part.host_count().max(part.hosts.len());
        for h in 0..hosts {
            let slot = base as usize + h;
            while self.hosts.len() <= slot {
                self.hosts.push(Host::default());
            }
            self.hosts[slot] = part.hosts.get(h).cloned().unwrap_or_default();
        }
    }

    /// Hosts that share a name or host hash (two snapshots of one machine, two XMLs without
    /// names) get `-N` and a changed hash, as [`Topology::replicate`] gives its copies: NCCL
    /// tells nodes apart by host hash.
    fn distinct_host_names(&mut self) {
        let mut names = HashSet::new();
        let mut hashes = HashSet::new();
        for (i, host) in self.hosts.iter_mut().enumerate() {
            let name = host.name.clone().unwrap_or_else(|| "node".to_string());
            host.name = Some(if names.contains(&name) || host.name.is_none() {
                format!("{name}-{i}")
            } else {
                name
            });
            names.insert(host.name.clone().unwrap_or_default());
            if let Some(h) = host.host_hash {
                let mut v = h;
                while hashes.contains(&v) {
                    v ^= i as u64 + 1;
                    v = v.rotate_left(1);
                }
                host.host_hash = Some(v);
                hashes.insert(v);
            }
        }
    }

    /// A fingerprint of each host's hardware as the graph search sees it: its nodes in order
    /// (kind and facts) and links, in one pass over the graph. Equal for copies of one
    /// machine; hosts whose fingerprints differ may reach different search results.
    ///
    /// Copies of one machine that faults left alone ([`Topology::copies_except`]) are hashed
    /// once: an unchanged copy's hosts have the first unchanged copy's fingerprints (the
    /// `Debug` text of every node was a tenth of a plan with one faulted host of 16,384).
    pub fn host_fingerprints(&self) -> Vec<u64> {
        let n = self.host_count().max(self.hosts.len());
        let Some((c, changed)) = self.copies_except() else {
            return self.fingerprints_of(n, |_| true);
        };
        let Some(model) = (0..c.count).find(|k| !changed.contains(k)) else {
            return self.fingerprints_of(n, |_| true);
        };
        let per = c.per_copy.max(1);
        let copy_of = |h: usize| h / per;
        let mut out =
            self.fingerprints_of(n, |h| copy_of(h) == model || changed.contains(&copy_of(h)));
        for h in 0..n {
            if copy_of(h) < c.count && !changed.contains(&copy_of(h)) && copy_of(h) != model {
                out[h] = out[model * per + h % per];
            }
        }
        out
    }

    /// [`Topology::host_fingerprints`] of the hosts `want` names (of `n`); the others' are
    /// left unhashed (0).
    fn fingerprints_of(&self, n: usize, want: impl Fn(usize) -> bool) -> Vec<u64> {
        use std::collections::hash_map::DefaultHasher;
        let wanted: Vec<bool> = (0..n).map(&want).collect();
        let mut hashers: Vec<DefaultHasher> = (0..n).map(|_| DefaultHasher::new()).collect();
        let mut local = vec![0usize; self.graph.node_count()];
        let mut next = vec![0usize; n];
        for idx in self.graph.node_indices() {
            let node = &self.graph[idx];
            let h = node.host as usize;
            local[idx.index()] = next[h];
            next[h] += 1;
            if wanted[h] {
                hash_debug(&mut hashers[h], &without_fabric(&node.kind));
            }
        }
        for e in self.graph.edge_references() {
            let (a, b) = (e.source(), e.target());
            let h = self.graph[a].host as usize;
            if wanted[h] && self.graph[b].host as usize == h {
                (local[a.index()], local[b.index()]).hash(&mut hashers[h]);
                hash_debug(&mut hashers[h], e.weight());
            }
        }
        hashers
            .into_iter()
            .zip(wanted)
            .map(|(h, w)| if w { h.finish() } else { 0 })
            .collect()
    }
}

/// The node's kind without the NVLink fabric's cluster, which [`Topology::replicate`] varies
/// per domain and the search within a host does not read.
fn without_fabric(kind: &NodeKind) -> NodeKind {
    let mut k = kind.clone();
    if let NodeKind::Gpu(g) = &mut k {
        g.fabric = None;
    }
    k
}

/// Feeds a value's `Debug` text to a hasher without building the string (the kinds hold
/// floats, which have no `Hash`).
fn hash_debug(h: &mut impl Hasher, v: &impl std::fmt::Debug) {
    struct W<'a, H: Hasher>(&'a mut H);
    impl<H: Hasher> std::fmt::Write for W<'_, H> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.write(s.as_bytes());
            Ok(())
        }
    }
    let _ = std::fmt::write(&mut W(h), format_args!("{v:?}"));
}

fn part_name(part: &Topology, i: usize) -> String {
    part.hosts
        .first()
        .and_then(|h| h.name.clone())
        .or_else(|| part.source.origin.clone())
        .unwrap_or_else(|| format!("{i}"))
}

/// One source for the joined hosts: their kind where all share it (else `hosts`), every
/// origin in order, every stated fact.
fn joined_source(parts: &[Topology]) -> crate::SourceInfo {
    let kind = &parts[0].source.kind;
    let same = parts.iter().all(|p| &p.source.kind == kind);
    let origins: Vec<String> = parts
        .iter()
        .map(|p| {
            p.source
                .origin
                .clone()
                .unwrap_or_else(|| p.source.kind.to_string())
        })
        .collect();
    crate::SourceInfo {
        kind: if same {
            *kind
        } else {
            crate::SourceKind::Hosts
        },
        origin: Some(origins.join(", ")),
        // Facts stated once per host (`--nics` over a host list) are said once.
        stated: {
            let mut seen = std::collections::HashSet::new();
            parts
                .iter()
                .flat_map(|p| p.source.stated.iter())
                .filter(|s| seen.insert(s.as_str()))
                .cloned()
                .collect()
        },
        cut: parts.iter().find_map(|p| p.source.cut.clone()),
        // One fabric between hosts: the one every host states, else none.
        fabric: parts[0]
            .source
            .fabric
            .filter(|f| parts.iter().all(|p| p.source.fabric == Some(*f))),
        nic_speed_override: parts.iter().find_map(|p| p.source.nic_speed_override),
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::hgx;
    use crate::*;
    use std::collections::HashSet;

    #[test]
    fn copies_a_fault_left_alone_share_the_first_ones_fingerprints() {
        for faults in [
            &["nic:mlx5_3@2"][..],
            &["nvlink:GPU1"],
            &["gpu:4@3", "nic:mlx5_0@1"],
        ] {
            let mut t = hgx(8, 90).replicate(5);
            let faults: Vec<_> = faults
                .iter()
                .map(|f| faults::parse_without(f).unwrap())
                .collect();
            faults::apply_all(&mut t, &faults).unwrap();
            assert!(t.copies_except().is_some());
            let mut each = t.clone();
            each.forget_copies();
            let prints = t.host_fingerprints();
            assert_eq!(prints, each.host_fingerprints(), "{faults:?}");
            let (_, changed) = t.copies_except().unwrap();
            let alike: HashSet<u64> = (0..5)
                .filter(|k| !changed.contains(k))
                .map(|k| prints[k])
                .collect();
            assert_eq!(alike.len(), 1, "{faults:?}");
            assert!(changed.iter().all(|&k| !alike.contains(&prints[k])));
        }
    }

    #[test]
    fn identical_hosts_join_as_replicas() {
        let t = hgx(8, 90);
        let j = Topology::join(&[t.clone(), t.clone()]).unwrap();
        assert_eq!(j.copies().map(|c| c.count), Some(2));
        let r = t.replicate(2);
        assert_eq!(j.hosts, r.hosts);
        assert_eq!(j.graph.node_count(), r.graph.node_count());
    }

    #[test]
    fn different_hosts_keep_their_own_facts_in_order() {
        let a = hgx(8, 90);
        let b = hgx(4, 80);
        let j = Topology::join(&[a.clone(), b.clone()]).unwrap();
        assert!(j.copies().is_none());
        assert_eq!(j.host_count(), 2);
        assert_eq!(j.gpus().len(), 12);
        let sm_of = |h: HostId| -> Vec<u32> {
            j.gpus()
                .into_iter()
                .filter(|&g| j.node(g).host == h)
                .filter_map(|g| j.gpu(g).and_then(|x| x.sm))
                .collect()
        };
        assert_eq!(sm_of(0), vec![90; 8]);
        assert_eq!(sm_of(1), vec![80; 4]);
        let names: Vec<_> = j.hosts.iter().map(|h| h.name.clone()).collect();
        assert_ne!(names[0], names[1], "{names:?}");
        let g = j.gpus()[9];
        assert_eq!(j.find(1, j.node(g).busid().unwrap()), Some(g));
        let prints = j.host_fingerprints();
        assert_ne!(prints[0], prints[1]);
        assert_eq!(a.host_fingerprints()[0], prints[0]);
        let r = a.replicate(3).host_fingerprints();
        assert!(r.iter().all(|&p| p == prints[0]), "{r:?}");
    }

    #[test]
    fn shared_names_and_hashes_are_told_apart() {
        let mut a = hgx(2, 90);
        a.hosts[0].name = Some("n".into());
        a.hosts[0].host_hash = Some(7);
        let mut b = hgx(2, 80);
        b.hosts[0] = a.hosts[0].clone();
        let j = Topology::join(&[a, b]).unwrap();
        assert_eq!(j.hosts[0].name.as_deref(), Some("n"));
        assert_eq!(j.hosts[1].name.as_deref(), Some("n-1"));
        assert_ne!(j.hosts[0].host_hash, j.hosts[1].host_hash);
        assert!(Topology::join(&[]).is_none());
    }
}
