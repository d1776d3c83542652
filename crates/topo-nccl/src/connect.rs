//! Rings, trees and NVLS heads built from the graphs (`src/graph/connect.cc`, `trees.cc`,
//! `rings.cc`, NCCL 2.28.9), and their log lines.
//!
//! NCCL builds them per rank after an all-gather; here every rank's view is built at once.
//! Hosts of a replicated topology share host 0's graphs: the k-th GPU of node n plays the
//! role of host 0's k-th GPU (a node with a different GPU count keeps its own index order).
//! Everything is linear in ranks × channels, so a 1024-GPU what-if stays cheap.

use super::channels::ChannelCounts;
use super::graph::Graph;
use super::search::{Graphs, NodeOrders};
use super::system::System;
use super::types::Pattern;
use serde::Serialize;
use std::borrow::Cow;

/// Ranks per node, nodes numbered in order of their lowest rank (`firstRanks`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Nodes {
    pub ranks: Vec<Vec<usize>>,
    /// Node index of each rank.
    pub node_of: Vec<usize>,
}

impl Nodes {
    pub fn of(sys: &System) -> Nodes {
        let mut ranks: Vec<Vec<usize>> = (0..sys.nhosts as u16)
            .map(|h| sys.host_gpus(h))
            .filter(|v| !v.is_empty())
            .collect();
        ranks.sort_by_key(|v| v.first().copied().unwrap_or(usize::MAX));
        let mut node_of = vec![0; sys.gpus.len()];
        for (n, rs) in ranks.iter().enumerate() {
            for &r in rs {
                if let Some(x) = node_of.get_mut(r) {
                    *x = n;
                }
            }
        }
        Nodes { ranks, node_of }
    }
    pub fn count(&self) -> usize {
        self.ranks.len()
    }
    pub fn n_ranks(&self) -> usize {
        self.node_of.len()
    }
    /// Maps a host-0 rank order onto node `n`.
    fn map(&self, order: &[usize], n: usize) -> Vec<usize> {
        let Some(base) = self.ranks.first() else {
            return vec![];
        };
        let own = &self.ranks[n];
        if own.len() != base.len() {
            return own.clone();
        }
        order
            .iter()
            .filter_map(|r| base.iter().position(|x| x == r).map(|k| own[k]))
            .collect()
    }
}

/// One rank's tree links in one channel (`struct ncclTree`): -1 when absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TreeLinks {
    pub up: i64,
    pub down: [i64; 3],
}

impl Default for TreeLinks {
    fn default() -> Self {
        TreeLinks {
            up: -1,
            down: [-1; 3],
        }
    }
}

/// Parent and children of `rank` in NCCL's binary tree over `n` (`ncclGetBtree`, trees.cc):
/// (up, down0, down1, childType).
pub fn btree(n: i64, rank: i64) -> (i64, i64, i64, i64) {
    let mut bit = 1i64;
    while bit < n {
        if bit & rank != 0 {
            break;
        }
        bit <<= 1;
    }
    if rank == 0 {
        let d1 = if n > 1 { bit >> 1 } else { -1 };
        return (-1, -1, d1, 0);
    }
    let mut up = (rank ^ bit) | (bit << 1);
    if up >= n {
        up = rank ^ bit;
    }
    let child_type = if rank < up { 0 } else { 1 };
    let mut lowbit = bit >> 1;
    let down0 = if lowbit == 0 { -1 } else { rank - lowbit };
    let mut down1 = if lowbit == 0 { -1 } else { rank + lowbit };
    // Shrinks the second child until it exists (the loop re-checks the same value first).
    while down1 >= n {
        down1 = if lowbit == 0 { -1 } else { rank + lowbit };
        lowbit >>= 1;
    }
    (up, down0, down1, child_type)
}

/// One node's place in both trees of the double binary tree (`ncclGetDtree`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Dtree {
    pub up: [i64; 2],
    pub down0: [i64; 2],
    pub down1: [i64; 2],
    pub child_type: [i64; 2],
}

/// Tree 0 is the binary tree; tree 1 mirrors it (even `n`) or shifts it by one (odd `n`).
pub fn dtree(n: i64, rank: i64) -> Dtree {
    let (u0, a0, b0, t0) = btree(n, rank);
    let (u1, a1, b1, t1) = if n % 2 == 1 {
        let shifted = (rank - 1 + n) % n;
        let (u, d0, d1, t) = btree(n, shifted);
        let f = |x: i64| if x == -1 { -1 } else { (x + 1) % n };
        (f(u), f(d0), f(d1), t)
    } else {
        let (u, d0, d1, t) = btree(n, n - 1 - rank);
        let f = |x: i64| if x == -1 { -1 } else { n - 1 - x };
        (f(u), f(d0), f(d1), t)
    };
    Dtree {
        up: [u0, u1],
        down0: [a0, a1],
        down1: [b0, b1],
        child_type: [t0, t1],
    }
}

fn push_down(t: &mut TreeLinks, r: i64) {
    if let Some(slot) = t.down.iter_mut().find(|d| **d < 0) {
        *slot = r;
    }
}

/// The communicator's rings and trees (every rank's view).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Connection {
    pub n_ranks: usize,
    pub n_nodes: usize,
    /// Channels when rings and trees are connected (min of ring and tree graphs).
    pub n_search: usize,
    /// Final channels (the communicator's `nChannels`).
    pub n_channels: usize,
    /// For each final channel, the connected channel (0..2×n_search) it is a copy of.
    pub channel_src: Vec<usize>,
    /// Per connected channel (0..2×n_search), per rank.
    pub prev: Vec<Vec<i64>>,
    pub next: Vec<Vec<i64>>,
    pub trees: Vec<Vec<TreeLinks>>,
    /// The `Tree %d : …` lines printed while connecting trees, in print order: the rank,
    /// the channel and its links as they stood then. Written out only for the rank asked
    /// ([`Connection::tree_anchor_lines`]): formatting every rank's was a twentieth of a
    /// 16,384-node plan, which prints rank 0's.
    pub tree_anchors: Vec<(usize, usize, TreeLinks)>,
    /// NVLS heads: `heads[h][node]`.
    pub nvls_heads: Vec<Vec<usize>>,
    /// Approximate tree depth (`nRanks/nNodes - 1 + log2i(nNodes)`).
    pub tree_depth: usize,
}

/// NVLS heads: per node, the first GPU of each NVLS channel, deduplicated; the minimum head
/// count over nodes is kept.
fn nvls_heads(nodes: &Nodes, nvls: Option<&Graph>) -> Vec<Vec<usize>> {
    let Some(g) = nvls.filter(|g| g.n_channels > 0) else {
        return vec![];
    };
    let mut base: Vec<usize> = vec![];
    for order in &g.intra {
        if let Some(&h) = order.first()
            && !base.contains(&h)
        {
            base.push(h);
        }
    }
    let per_node: Vec<Vec<usize>> = (0..nodes.count())
        .map(|node| nodes.map(&base, node))
        .collect();
    let min_heads = per_node.iter().map(Vec::len).min().unwrap_or(0);
    (0..min_heads)
        .map(|h| per_node.iter().map(|v| v[h]).collect())
        .collect()
}

/// Which nodes swap the channels of each pair: crossNic=2 rings alternate NICs on odd nodes,
/// by each node's own crossNic (`allTopoRanks[r]->crossNicRing`, NCCL 2.28.9
/// src/graph/connect.cc); a node without a search of its own is a copy of host 0.
fn cross_swaps<'a>(
    ring: &Graph,
    node_orders: &[Option<NodeOrders>],
    own: impl Iterator<Item = Option<&'a NodeOrders>>,
    n: usize,
) -> Vec<bool> {
    let base = node_orders
        .first()
        .and_then(Option::as_ref)
        .map_or(ring.cross_nic, |o| o.ring_cross_nic);
    own.enumerate()
        .map(|(node, o)| {
            let cross = o.map_or(base, |o| o.ring_cross_nic);
            cross == 2 && n.is_multiple_of(2) && node % 2 == 1
        })
        .collect()
}

/// Connects rings, trees and NVLS heads (`ncclTopoPreset` + `ncclTopoPostset`). `ring`,
/// `tree` and `nvls` are host 0's reconciled graphs; `counts` says how many channels exist and
/// which connected channel each is a copy of.
pub fn connect(
    sys: &System,
    ring: &Graph,
    tree: &Graph,
    nvls: Option<&Graph>,
    counts: &ChannelCounts,
    node_orders: &[Option<NodeOrders>],
) -> Connection {
    let nodes = Nodes::of(sys);
    // A node that searched on its own (ncclTopoPreset, NCCL 2.28.9 src/graph/connect.cc,
    // reads each rank's own graph) keeps its orders; others take host 0's, mapped.
    let own = |node: usize| {
        let host = sys.gpu(*nodes.ranks[node].first()?).host;
        node_orders.get(host as usize)?.as_ref()
    };
    let nr = nodes.n_ranks();
    let nn = nodes.count();
    let n = counts.search.min(ring.intra.len()).min(tree.intra.len());
    let mut prev = vec![vec![-1i64; nr]; 2 * n];
    let mut next = vec![vec![-1i64; nr]; 2 * n];
    let mut trees = vec![vec![TreeLinks::default(); nr]; 2 * n];
    let mut anchors = vec![];

    // Preset: per node and channel, the intra-node ring and chain.
    // ring_recv/send[c][node], tree anchors [c][node].
    let mut recv = vec![vec![0usize; nn]; n];
    let mut send = vec![vec![0usize; nn]; n];
    let mut ttp = vec![vec![0usize; nn]; n];
    let mut ttc0 = vec![vec![0usize; nn]; n];
    let mut ttc1 = vec![vec![0usize; nn]; n];
    let swaps = cross_swaps(ring, node_orders, (0..nn).map(&own), n);
    for node in 0..nn {
        let swap = swaps[node];
        for c in 0..n {
            let src = if swap { c ^ 1 } else { c };
            // A node's own orders are read in place (a copy per node and channel was most
            // of this at 16,384 nodes that each searched).
            let r: Cow<[usize]> = match own(node) {
                Some(o) => Cow::Borrowed(o.ring.get(src).map_or(&[], Vec::as_slice)),
                None => Cow::Owned(nodes.map(&ring.intra[src], node)),
            };
            if let (Some(&first), Some(&last)) = (r.first(), r.last()) {
                recv[c][node] = first;
                send[c][node] = last;
            }
            for (i, &rk) in r.iter().enumerate() {
                prev[c][rk] = if i == 0 { -1 } else { r[i - 1] as i64 };
                next[c][rk] = r.get(i + 1).map(|&x| x as i64).unwrap_or(-1);
            }
            let t: Cow<[usize]> = match own(node) {
                Some(o) => Cow::Borrowed(o.tree.get(c).map_or(&[], Vec::as_slice)),
                None => Cow::Owned(nodes.map(&tree.intra[c], node)),
            };
            if t.is_empty() {
                continue;
            }
            let pattern = own(node)
                .and_then(|o| o.tree_pattern)
                .unwrap_or(tree.pattern);
            let c0 = if pattern == Pattern::Tree { 0 } else { 1 };
            let c1 = if pattern == Pattern::SplitTree { 1 } else { 0 };
            ttp[c][node] = t[0];
            ttc0[c][node] = *t.get(c0).unwrap_or(&t[0]);
            ttc1[c][node] = *t.get(c1).unwrap_or(&t[0]);
            for (i, &rk) in t.iter().enumerate() {
                let tl = &mut trees[c][rk];
                tl.up = if i == 0 { -1 } else { t[i - 1] as i64 };
                tl.down[0] = t.get(i + 1).map(|&x| x as i64).unwrap_or(-1);
                trees[c + n][rk] = *tl;
            }
        }
    }
    // connectRings.
    for c in 0..n {
        for node in 0..nn {
            let pn = (node + nn - 1) % nn;
            let nx = (node + 1) % nn;
            prev[c][recv[c][node]] = send[c][pn] as i64;
            next[c][send[c][node]] = recv[c][nx] as i64;
        }
        prev[c + n] = prev[c].clone();
        next[c + n] = next[c].clone();
    }
    // connectTrees.
    let depth =
        (nr / nn.max(1)).saturating_sub(1) + (usize::BITS - 1 - nn.max(1).leading_zeros()) as usize;
    for node in 0..nn {
        let d = dtree(nn as i64, node as i64);
        for c in 0..n {
            let (p, a, b) = (ttp[c][node], ttc0[c][node], ttc1[c][node]);
            for (t, ch) in [(0usize, c), (1usize, c + n)] {
                if d.up[t] >= 0 {
                    let u = d.up[t] as usize;
                    let target = if d.child_type[t] == 0 {
                        ttc0[c][u]
                    } else {
                        ttc1[c][u]
                    };
                    trees[ch][p].up = target as i64;
                }
                if d.down0[t] >= 0 {
                    push_down(&mut trees[ch][a], ttp[c][d.down0[t] as usize] as i64);
                }
                if d.down1[t] >= 0 {
                    push_down(&mut trees[ch][b], ttp[c][d.down1[t] as usize] as i64);
                }
            }
        }
        // The anchors print their links once both trees are set.
        for c in 0..n {
            let mut seen = vec![];
            for rk in [ttp[c][node], ttc0[c][node], ttc1[c][node]] {
                if seen.contains(&rk) {
                    continue;
                }
                seen.push(rk);
                for ch in [c, c + n] {
                    anchors.push((rk, ch, trees[ch][rk]));
                }
            }
        }
    }
    let nvls_heads = nvls_heads(&nodes, nvls);
    let channel_src = counts
        .copy_map
        .iter()
        .map(|&s| s.min((2 * n).saturating_sub(1)))
        .collect();
    Connection {
        n_ranks: nr,
        n_nodes: nn,
        n_search: n,
        n_channels: counts.coll,
        channel_src,
        prev,
        next,
        trees,
        tree_anchors: anchors,
        nvls_heads,
        tree_depth: depth,
    }
}

impl Connection {
    /// [`connect`] with the graphs of a search.
    pub fn from_graphs(sys: &System, graphs: &Graphs, counts: &ChannelCounts) -> Connection {
        connect(
            sys,
            &graphs.ring,
            &graphs.tree,
            graphs.nvls.as_ref(),
            counts,
            &graphs.node_orders,
        )
    }

    fn src(&self, c: usize) -> Option<usize> {
        self.channel_src.get(c).copied()
    }

    /// The ring of final channel `c` as rank 0 walks it (`ncclBuildRings`); `None` when the
    /// ring does not close over every rank.
    pub fn ring(&self, c: usize) -> Option<Vec<usize>> {
        let s = self.src(c)?;
        let next = self.next.get(s)?;
        let mut out = Vec::with_capacity(self.n_ranks);
        let mut seen = vec![false; self.n_ranks];
        let mut cur = 0usize;
        for _ in 0..self.n_ranks {
            if *seen.get(cur)? {
                return None;
            }
            seen[cur] = true;
            out.push(cur);
            cur = usize::try_from(*next.get(cur)?).ok()?;
        }
        (cur == 0).then_some(out)
    }

    /// `Channel %02d/%02d :` lines printed by rank 0 (§10 row 10): 2.23+ pads ranks to the
    /// width of nRanks−1 and cuts the line at 127 characters with `...`; ≤2.22 prints
    /// ` %3d` for at most 20 ranks.
    pub fn channel_lines(&self, minor: u32) -> Vec<String> {
        (0..self.n_channels)
            .map(|c| {
                let ring = self.ring(c).unwrap_or_default();
                channel_line(c, self.n_channels, &ring, self.n_ranks, minor)
            })
            .collect()
    }

    /// `Ring %02d : prev -> rank -> next` for every channel of `rank` (GRAPH).
    pub fn ring_lines(&self, rank: usize) -> Vec<String> {
        self.ring_lines_named(rank, &[])
    }

    /// [`Self::ring_lines`] with every rank `r` printed as `names[r]` (where `names` has it).
    pub fn ring_lines_named(&self, rank: usize, names: &[usize]) -> Vec<String> {
        let name = |r: i64| match usize::try_from(r).ok().and_then(|r| names.get(r)) {
            Some(&n) => n as i64,
            None => r,
        };
        (0..self.n_channels)
            .filter_map(|c| {
                let s = self.src(c)?;
                Some(format!(
                    "Ring {:02} : {} -> {} -> {}",
                    c,
                    name(*self.prev.get(s)?.get(rank)?),
                    name(rank as i64),
                    name(*self.next.get(s)?.get(rank)?)
                ))
            })
            .collect()
    }

    /// The tree links of `rank` in final channel `c`.
    pub fn tree(&self, c: usize, rank: usize) -> Option<TreeLinks> {
        self.trees.get(self.src(c)?)?.get(rank).copied()
    }

    /// `Trees [0] d0/d1/d2->rank->up …` (INIT), cut like NCCL's 1023-byte buffer.
    pub fn trees_line(&self, rank: usize) -> String {
        self.trees_line_named(rank, &[])
    }

    /// [`Self::trees_line`] with every rank `r` printed as `names[r]` (where `names` has it):
    /// the launcher's numbers of a host split into several nodes.
    pub fn trees_line_named(&self, rank: usize, names: &[usize]) -> String {
        let name = |r: i64| match usize::try_from(r).ok().and_then(|r| names.get(r)) {
            Some(&n) => n as i64,
            None => r,
        };
        let mut body = String::new();
        for c in 0..self.n_channels {
            if let Some(t) = self.tree(c, rank) {
                body.push_str(&format!(
                    " [{}] {}/{}/{}->{}->{}",
                    c,
                    name(t.down[0]),
                    name(t.down[1]),
                    name(t.down[2]),
                    name(rank as i64),
                    name(t.up)
                ));
            }
        }
        body.truncate(1022);
        format!("Trees{body}")
    }

    /// `Tree %d : up -> rank -> d0/d1/d2` lines of `rank` (only the node's tree anchors).
    pub fn tree_anchor_lines(&self, rank: usize) -> Vec<String> {
        self.tree_anchors
            .iter()
            .filter(|a| a.0 == rank)
            .map(|&(rk, ch, t)| {
                format!(
                    "Tree {} : {} -> {} -> {}/{}/{}",
                    ch, t.up, rk, t.down[0], t.down[1], t.down[2]
                )
            })
            .collect()
    }

    /// `NVLS Head %2d:` lines printed by node 0 when there are several nodes.
    pub fn nvls_head_lines(&self) -> Vec<String> {
        if self.n_nodes <= 1 {
            return vec![];
        }
        self.nvls_heads
            .iter()
            .enumerate()
            .map(|(h, heads)| {
                let mut l = format!("NVLS Head {h:2}:");
                for r in heads.iter().take(20) {
                    l.push_str(&format!(" {r:2}"));
                }
                l
            })
            .collect()
    }
}

impl Connection {
    /// `NVLS Trees : d0/d1/d2->rank->up d0/d1/d2->rank->up` (channels 0 and 1) of `rank` in a
    /// multi-node communicator with NVLS (`connectNvls`): the NVLS heads of the nodes form
    /// the same double binary tree as the collective trees; `down[0]` is the rank's own NVLS
    /// head slot (`nRanks + 1 + headRank`).
    pub fn nvls_trees_line(&self, rank: usize, nodes: &Nodes) -> Option<String> {
        if self.n_nodes <= 1 || self.nvls_heads.is_empty() {
            return None;
        }
        let node = *nodes.node_of.get(rank)?;
        let head_rank = self
            .nvls_heads
            .iter()
            .position(|h| h.get(node) == Some(&rank))
            .map(|h| h as i64)
            .unwrap_or(-1);
        let down = (self.n_ranks as i64) + 1 + head_rank;
        let d = dtree(self.n_nodes as i64, node as i64);
        let mut up = [-1i64; 2];
        let mut d0 = [-1i64; 2];
        let mut d1 = [-1i64; 2];
        if let Some(heads) = self.nvls_heads.iter().find(|h| h.get(node) == Some(&rank)) {
            let at = |x: i64| {
                usize::try_from(x)
                    .ok()
                    .and_then(|i| heads.get(i))
                    .map(|&r| r as i64)
                    .unwrap_or(-1)
            };
            for t in 0..2 {
                up[t] = at(d.up[t]);
                d0[t] = at(d.down0[t]);
                d1[t] = at(d.down1[t]);
            }
        }
        let part = |t: usize| {
            let mut tdown = [down, -1, -1];
            let mut ix = 1;
            if d0[t] != -1 {
                tdown[ix] = d0[t];
                ix += 1;
            }
            if d1[t] != -1 {
                tdown[ix] = d1[t];
            }
            format!(
                "{}/{}/{}->{}->{}",
                tdown[0], tdown[1], tdown[2], rank, up[t]
            )
        };
        Some(format!("NVLS Trees : {} {}", part(0), part(1)))
    }
}

/// One `Channel %02d/%02d :` line in the format of NCCL 2.`minor` (`dumpLine`, rings.cc).
pub fn channel_line(c: usize, total: usize, ring: &[usize], n_ranks: usize, minor: u32) -> String {
    if minor <= 22 {
        // Prefix copied on at most 15 characters, then " %3d" at 4-character steps.
        let prefix = format!("Channel {c:02}/{total:02} : ");
        let mut line: String = prefix.chars().take(15).collect();
        while line.len() < prefix.len() {
            line.push(' ');
        }
        for r in ring.iter().take(20) {
            line.push_str(&format!(" {r:3}"));
        }
        return line;
    }
    let width = n_ranks.saturating_sub(1).to_string().len();
    let mut line = format!("Channel {c:02}/{total:02} :");
    for r in ring {
        if line.len() >= 127 {
            break;
        }
        line.push_str(&format!(" {r:width$}"));
    }
    if line.len() >= 128 {
        line.truncate(124);
        line.push_str("...");
    } else {
        line.truncate(127);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent_children(n: i64) -> Vec<(i64, i64, i64, i64, i64, i64)> {
        (0..n)
            .map(|r| {
                let d = dtree(n, r);
                (
                    d.up[0], d.down0[0], d.down1[0], d.up[1], d.down0[1], d.down1[1],
                )
            })
            .collect()
    }

    /// Double binary trees checked by hand from the bit rules (trees.cc).
    #[test]
    fn double_binary_trees() {
        // 2 nodes: tree 0 rooted at 0, tree 1 (mirror) rooted at 1.
        assert_eq!(
            parent_children(2),
            [(-1, -1, 1, 1, -1, -1), (0, -1, -1, -1, -1, 0)]
        );
        // 3 nodes: tree 0 = 0 → 2 → 1; tree 1 = shift by one: 1 → 0 → 2.
        assert_eq!(
            parent_children(3),
            [
                (-1, -1, 2, 1, 2, -1),
                (2, -1, -1, -1, -1, 0),
                (0, 1, -1, 0, -1, -1)
            ]
        );
        // 4 nodes: tree 0 = 0 → 2 → {1, 3}; tree 1 = mirror: 3 → 1 → {2, 0}.
        assert_eq!(
            parent_children(4),
            [
                (-1, -1, 2, 1, -1, -1),
                (2, -1, -1, 3, 2, 0),
                (0, 1, 3, 1, -1, -1),
                (2, -1, -1, -1, -1, 1)
            ]
        );
        // 16 nodes: 0 → 8 → {4, 12}, 12 → {10, 14}, 14 → {13, 15}; tree 1 mirrored.
        let t = parent_children(16);
        assert_eq!(t[0], (-1, -1, 8, 1, -1, -1));
        assert_eq!(t[8], (0, 4, 12, 9, -1, -1));
        assert_eq!(t[12], (8, 10, 14, 13, -1, -1));
        assert_eq!(t[14], (12, 13, 15, 13, -1, -1));
        assert_eq!(t[15], (14, -1, -1, -1, -1, 7));
        assert_eq!(t[7], (6, -1, -1, 15, 11, 3));
        assert_eq!(t[4], (8, 2, 6, 5, -1, -1));
        // Child types: smaller than the parent → 0.
        assert_eq!(dtree(16, 4).child_type[0], 0);
        assert_eq!(dtree(16, 12).child_type[0], 1);
        // 1 node: alone.
        assert_eq!(parent_children(1), [(-1, -1, -1, -1, -1, -1)]);
    }

    #[test]
    fn channel_line_formats() {
        let ring: Vec<usize> = (0..64).collect();
        let l = channel_line(3, 32, &ring, 64, 28);
        assert_eq!(l.len(), 127);
        assert!(l.starts_with("Channel 03/32 :  0  1  2"));
        // 36 ranks fill 123 characters; the 37th passes 128, so NCCL keeps 124 and adds "...".
        assert!(l.ends_with(" 34 35 ..."));
        let l = channel_line(3, 32, &ring, 64, 22);
        assert!(l.starts_with("Channel 03/32 :    0   1"));
        assert!(l.ends_with("  19"));
        assert_eq!(channel_line(0, 2, &[0, 1], 2, 27), "Channel 00/02 : 0 1");
    }
}
