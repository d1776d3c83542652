//! Typed inputs: what to run and how NCCL would run it.
use serde::{Deserialize, Serialize};

use crate::error::{Result, RuntimeError};

/// The most ranks a job may have: launchers, received jobs and arenas are checked against it.
pub const MAX_RANKS: usize = 4096;

// The vocabulary is shared with the NCCL model (topo-vocab), under its one name.
pub use topo_vocab::{Algorithm, Collective, DataType, Protocol, Reduction};

/// One rank's place in a tree of one channel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeNode {
    /// The parent rank, `None` at the root.
    pub parent: Option<usize>,
    /// Child ranks.
    pub children: Vec<usize>,
}

/// What NCCL would do for one collective at one size: the runtime's input.
///
/// The binary builds it from topo's plan (`rings[]`, `trees[]`, the chosen algorithm and
/// protocol, the channel count); [`CollectivePlan::host_default`] builds one without a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectivePlan {
    pub collective: Collective,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    /// Ranks in the job.
    pub nranks: usize,
    /// Ranks per node (informational on the host backend; trees are given per rank).
    pub ranks_per_node: usize,
    /// Channels; each has a ring and a tree.
    pub nchannels: usize,
    /// Ring order per channel: `rings[c]` is a permutation of `0..nranks`.
    pub rings: Vec<Vec<usize>>,
    /// Tree per channel: `trees[c][rank]`.
    pub trees: Vec<Vec<TreeNode>>,
    /// Largest piece one step moves, in bytes (NCCL's chunk size); clamped to what the
    /// protocol's FIFO can hold.
    pub chunk_bytes: usize,
    /// Root rank for Broadcast and Reduce.
    pub root: usize,
}

impl CollectivePlan {
    /// A plan for the host: identity rings (rotated per channel) and NCCL's double binary tree
    /// over ranks (even channels use tree 0, odd channels tree 1).
    pub fn host_default(
        collective: Collective,
        algorithm: Algorithm,
        protocol: Protocol,
        nranks: usize,
        nchannels: usize,
    ) -> CollectivePlan {
        let nchannels = nchannels.max(1);
        let rings = (0..nchannels)
            .map(|c| (0..nranks).map(|i| (i + c) % nranks.max(1)).collect())
            .collect();
        let (t0, t1) = double_binary_tree(nranks);
        let trees = (0..nchannels)
            .map(|c| if c % 2 == 0 { t0.clone() } else { t1.clone() })
            .collect();
        CollectivePlan {
            collective,
            algorithm,
            protocol,
            nranks,
            ranks_per_node: nranks,
            nchannels,
            rings,
            trees,
            chunk_bytes: 512 * 1024,
            root: 0,
        }
    }

    /// Check rings are permutations, trees consistent and rooted, and the root in range.
    pub fn validate(&self) -> Result<()> {
        let n = self.nranks;
        let bad = |m: String| Err(RuntimeError::InvalidPlan(m));
        if n == 0 {
            return bad("nranks is 0".into());
        }
        if self.nchannels == 0 {
            return bad("nchannels is 0".into());
        }
        if self.root >= n {
            return bad(format!("root {} not below nranks {n}", self.root));
        }
        if self.rings.len() < self.nchannels {
            return bad(format!(
                "{} rings for {} channels",
                self.rings.len(),
                self.nchannels
            ));
        }
        for (c, ring) in self.rings.iter().enumerate().take(self.nchannels) {
            let mut seen = vec![false; n];
            if ring.len() != n {
                return bad(format!("ring {c} has {} ranks, expected {n}", ring.len()));
            }
            for &r in ring {
                if r >= n || std::mem::replace(&mut seen[r], true) {
                    return bad(format!("ring {c} is not a permutation of 0..{n}"));
                }
            }
        }
        if self.algorithm == Algorithm::Tree {
            if self.trees.len() < self.nchannels {
                return bad(format!(
                    "{} trees for {} channels",
                    self.trees.len(),
                    self.nchannels
                ));
            }
            for (c, tree) in self.trees.iter().enumerate().take(self.nchannels) {
                validate_tree(tree, n)
                    .map_err(|m| RuntimeError::InvalidPlan(format!("tree of channel {c}: {m}")))?;
            }
        }
        match self.algorithm {
            Algorithm::Ring | Algorithm::Tree | Algorithm::Direct => Ok(()),
            a => Err(RuntimeError::Unsupported(format!(
                "algorithm {} needs hardware the host backend does not model",
                a.macro_name()
            ))),
        }
    }
}

fn validate_tree(tree: &[TreeNode], n: usize) -> std::result::Result<(), String> {
    if tree.len() != n {
        return Err(format!("{} nodes, expected {n}", tree.len()));
    }
    let roots: Vec<usize> = (0..n).filter(|&r| tree[r].parent.is_none()).collect();
    if roots.len() != 1 {
        return Err(format!("{} roots, expected 1", roots.len()));
    }
    for (r, node) in tree.iter().enumerate() {
        if let Some(p) = node.parent
            && (p >= n || !tree[p].children.contains(&r))
        {
            return Err(format!("rank {r}'s parent {p} does not list it as a child"));
        }
        for &c in &node.children {
            if c >= n || tree[c].parent != Some(r) {
                return Err(format!("rank {r}'s child {c} does not name it as parent"));
            }
        }
    }
    // Every rank reaches the root (no cycles): walk up at most n steps.
    for r in 0..n {
        let mut cur = r;
        let mut steps = 0;
        while let Some(p) = tree[cur].parent {
            cur = p;
            steps += 1;
            if steps > n {
                return Err(format!("cycle above rank {r}"));
            }
        }
    }
    Ok(())
}

/// NCCL's binary tree (`ncclGetBtree`) over `n` ranks: (parent, child0, child1) of `rank`.
fn btree(n: usize, rank: usize) -> (Option<usize>, Option<usize>, Option<usize>) {
    let mut bit = 1;
    while bit < n {
        if bit & rank != 0 {
            break;
        }
        bit <<= 1;
    }
    if rank == 0 {
        return (None, None, if n > 1 { Some(bit >> 1) } else { None });
    }
    let mut up = (rank ^ bit) | (bit << 1);
    if up >= n {
        up = rank ^ bit;
    }
    let mut lowbit = bit >> 1;
    let down0 = if lowbit == 0 {
        None
    } else {
        Some(rank - lowbit)
    };
    let mut down1 = if lowbit == 0 {
        None
    } else {
        Some(rank + lowbit)
    };
    while let Some(d) = down1 {
        if d < n {
            break;
        }
        lowbit >>= 1;
        down1 = if lowbit == 0 {
            None
        } else {
            Some(rank + lowbit)
        };
    }
    (Some(up), down0, down1)
}

/// NCCL's double binary tree (`ncclGetDtree`) over `n` ranks: tree 0 and its mirror (odd `n`)
/// or shift (even `n`).
pub fn double_binary_tree(n: usize) -> (Vec<TreeNode>, Vec<TreeNode>) {
    let node = |p: Option<usize>, a: Option<usize>, b: Option<usize>| TreeNode {
        parent: p,
        children: [a, b].into_iter().flatten().collect(),
    };
    let t0: Vec<TreeNode> = (0..n)
        .map(|r| {
            let (p, a, b) = btree(n, r);
            node(p, a, b)
        })
        .collect();
    let map: Box<dyn Fn(usize) -> usize> = if n % 2 == 1 {
        Box::new(move |r| n - 1 - r)
    } else {
        Box::new(move |r| (r + 1) % n)
    };
    let mut t1 = vec![TreeNode::default(); n];
    for r in 0..n {
        // Rank map(r) takes the place of r in tree 0.
        let (p, a, b) = btree(n, r);
        t1[map(r)] = node(p.map(&map), a.map(&map), b.map(&map));
    }
    (t0, t1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn double_binary_trees_are_valid() {
        for n in 1..=40 {
            let (a, b) = double_binary_tree(n);
            validate_tree(&a, n).unwrap();
            validate_tree(&b, n).unwrap();
        }
        let (t0, _) = double_binary_tree(8);
        assert_eq!(t0[0].children, vec![4]);
        assert_eq!(t0[4].children, vec![2, 6]);
    }

    #[test]
    fn invalid_rings_are_refused() {
        let mut p = CollectivePlan::host_default(
            Collective::AllReduce,
            Algorithm::Ring,
            Protocol::Simple,
            4,
            2,
        );
        p.validate().unwrap();
        p.rings[1] = vec![0, 1, 1, 3];
        assert!(p.validate().is_err());
    }
}
