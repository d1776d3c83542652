//! The per-host path tables and how a path is read from them (a replica host reads its
//! source's table through its own nodes).

use crate::system::{LinkType, NodeType};
use crate::types::PathType;
use serde::Serialize;
use std::collections::HashMap;
use topo_model::HostId;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Path {
    pub ty: PathType,
    /// Bottleneck bandwidth, GB/s.
    pub bw: f64,
    pub hops: u32,
    /// System node indices from the source to the destination, both included, in the nodes
    /// of the host whose table holds the path: read it through [`Paths::route`], which moves
    /// a replica host's shared path onto its own nodes.
    pub(super) route: Vec<usize>,
    /// The kind of link each hop takes (`links[i]`: `route[i]` to `route[i + 1]`). Two nodes
    /// can have parallel links, a GPU's PCI and C2C links to its CPU: NCCL's path holds the
    /// link itself, from 2.19 the first one of the kind the search came over
    /// (`ncclTopoSetPaths`, NVIDIA/nccl v2.28.9-1 src/graph/paths.cc), and the graph search
    /// charges that one.
    pub(super) links: Vec<LinkType>,
}

impl Path {
    pub(super) fn local(node: usize, loc_bw: f64) -> Path {
        Path {
            ty: PathType::Loc,
            bw: loc_bw,
            hops: 0,
            route: vec![node],
            links: vec![],
        }
    }
}

/// Per-host path tables.
#[derive(Clone, Debug)]
pub struct Paths {
    /// Row and column of each system node inside its host's table; `NO_COL` for the nodes
    /// paths are never computed from or towards (see [`is_base`]).
    pub(super) col: Vec<usize>,
    pub(super) host_of: Vec<HostId>,
    pub(super) hosts: Vec<HostTable>,
    /// Per NET: the GPU rank that "owns" it (`ncclTopoGetLocalGpu`), if any.
    pub net_local_gpu: Vec<Option<usize>>,
    /// Per (host, type): that host's nodes in `System::of_type` order. Paths never cross
    /// hosts, so searches for a nearest node look only here; scanning every host instead
    /// made `--nodes N` quadratic in N.
    /// Indexed by `host * KINDS + kind_slot(type)`.
    pub(super) by_host: Vec<Vec<usize>>,
    /// Per system node: its index in `System::nets`, if it is a NET.
    pub(super) net_pos: Vec<Option<usize>>,
    /// GPU ranks of each host, in rank order.
    pub(super) host_ranks: Vec<Vec<usize>>,
}

/// The node types [`Paths::same_host`] lists, one slot each.
pub(super) const KINDS: usize = 4;

pub(super) fn kind_slot(k: NodeType) -> Option<usize> {
    match k {
        NodeType::Gpu => Some(0),
        NodeType::Net => Some(1),
        NodeType::Cpu => Some(2),
        NodeType::Nvs => Some(3),
        NodeType::Pci | NodeType::Nic => None,
    }
}

#[derive(Clone, Debug)]
pub(super) struct HostTable {
    /// The host's path ends (rows, and columns per row).
    pub(super) nb: usize,
    /// `table[col(from) * nb + col(to)]`; empty for a replica, which reads its source's.
    pub(super) table: Vec<Option<Path>>,
    /// The host whose table this host's paths are: itself, or the identical host it
    /// replicates ([`super::replica`]); sharing instead of copying kept 140 MB of copies out of a
    /// 4,096-host plan.
    pub(super) source: usize,
    /// The first system node of the source's block and of this host's: a shared route's
    /// node `x` is `x - from + to` here.
    pub(super) from: usize,
    pub(super) to: usize,
    /// The breadth-first search's bandwidth of each entry post-processing replaced, by
    /// table index (see [`Paths::raw_bw`]).
    pub(super) raw_bw: HashMap<usize, f64>,
}

pub(super) const NO_COL: usize = usize::MAX;

/// The node types NCCL computes paths towards (`ncclTopoComputePaths`, NVIDIA/nccl v2.28.9-1
/// src/graph/paths.cc: CPUs, GPUs, NETs, NVSwitches). Paths are only asked for between
/// those: the table keeps no row or column for PCI switches and NICs, which would be 64 %
/// of an HGX host's table (their paths are needed only while each search runs).
pub(super) fn is_base(k: NodeType) -> bool {
    matches!(
        k,
        NodeType::Cpu | NodeType::Gpu | NodeType::Net | NodeType::Nvs
    )
}

impl Paths {
    pub fn get(&self, from: usize, to: usize) -> Option<&Path> {
        let h = self.host_of[from];
        if h != self.host_of[to] {
            return None;
        }
        let (r, c) = (self.col[from], self.col[to]);
        if r == NO_COL || c == NO_COL {
            return None;
        }
        let t = &self.hosts[self.hosts[h as usize].source];
        t.table.get(r * t.nb + c)?.as_ref()
    }

    /// The host whose path tables host `h` reads: itself, or an earlier host it replicates
    /// (the same devices, links, attributes and rank order at the same offsets,
    /// [`super::replica`]).
    pub fn tables_of(&self, h: usize) -> usize {
        self.hosts.get(h).map_or(h, |t| t.source)
    }

    /// The system nodes of the path `from -> to`, both ends included.
    pub fn route(
        &self,
        from: usize,
        to: usize,
    ) -> Option<impl ExactSizeIterator<Item = usize> + Clone + '_> {
        let p = self.get(from, to)?;
        let t = &self.hosts[self.host_of[from] as usize];
        let (f, to) = (t.from, t.to);
        Some(p.route.iter().map(move |&x| x - f + to))
    }

    /// The kind of link each hop of the path `from -> to` takes, in route order.
    pub fn link_kinds(&self, from: usize, to: usize) -> Option<&[LinkType]> {
        self.get(from, to).map(|p| p.links.as_slice())
    }

    /// The nodes strictly between the ends of the path `from -> to` (a PXN or NVB relay).
    pub fn interior(&self, from: usize, to: usize) -> impl Iterator<Item = usize> + '_ {
        let route = self.route(from, to);
        let inner = route.as_ref().map_or(0, |r| r.len().saturating_sub(2));
        route.into_iter().flatten().skip(1).take(inner)
    }

    /// Path type, `DIS` when there is no path (different hosts, disconnected).
    pub fn ty(&self, from: usize, to: usize) -> PathType {
        self.get(from, to).map(|p| p.ty).unwrap_or(PathType::Dis)
    }

    pub fn bw(&self, from: usize, to: usize) -> f64 {
        self.get(from, to).map(|p| p.bw).unwrap_or(0.0)
    }

    /// The nodes of `kind` on the host of `node`, in `System::of_type` order.
    pub fn same_host(&self, node: usize, kind: NodeType) -> &[usize] {
        kind_slot(kind)
            .and_then(|k| self.by_host.get(self.host_of[node] as usize * KINDS + k))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Bandwidth of the path `from -> to` as the breadth-first search found it, before
    /// post-processing (no-P2P, PXN and no-GDR detours) replaced it; 0 without a path.
    pub fn raw_bw(&self, from: usize, to: usize) -> f64 {
        let Some(p) = self.get(from, to) else {
            return 0.0;
        };
        let t = &self.hosts[self.hosts[self.host_of[from] as usize].source];
        let i = self.col[from] * t.nb + self.col[to];
        t.raw_bw.get(&i).copied().unwrap_or(p.bw)
    }

    /// Post-processing's [`Paths::set`]: the first replacement of a path keeps the search's
    /// bandwidth for [`Paths::raw_bw`].
    pub(super) fn replace(&mut self, from: usize, to: usize, p: Path) {
        if let Some(old) = self.get(from, to).map(|o| o.bw) {
            let h = self.host_of[from] as usize;
            let i = self.col[from] * self.hosts[h].nb + self.col[to];
            self.hosts[h].raw_bw.entry(i).or_insert(old);
        }
        self.set(from, to, p);
    }

    pub(super) fn set(&mut self, from: usize, to: usize, p: Path) {
        let h = self.host_of[from] as usize;
        let nb = self.hosts[h].nb;
        let (r, c) = (self.col[from], self.col[to]);
        debug_assert!(r != NO_COL && c != NO_COL, "a path NCCL never computes");
        if r != NO_COL && c != NO_COL {
            self.hosts[h].table[r * nb + c] = Some(p);
        }
    }
}
