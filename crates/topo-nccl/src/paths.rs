//! Path types and bandwidths between nodes (`src/graph/paths.cc`), the P2P and GPUDirect RDMA
//! checks that decide how paths are rerouted, and PXN.
//!
//! Paths never cross hosts (NET nodes are leaves), so tables are kept per host: a 1024-GPU
//! what-if stays as cheap as 128 single machines.

use super::system::{GdrFact, LinkType, NodeType, System};
use super::types::PathType;
use replica::Replicas;
use serde::Serialize;
use std::collections::HashMap;
use table::{HostTable, KINDS, NO_COL, is_base, kind_slot};
pub use table::{Path, Paths};
use topo_model::{CpuArch, CpuVendor, HostId, P2pCaps};

mod replica;
mod table;

/// What the environment and version say about path post-processing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PathPolicy {
    /// NCCL minor version (2.`minor`): selects the version-specific rules.
    pub minor: u32,
    /// `NCCL_NVB_DISABLE=1`.
    pub nvb_disable: bool,
    /// `NCCL_P2P_DISABLE=1`.
    pub p2p_disable: bool,
    /// `NCCL_P2P_LEVEL`.
    pub p2p_level: Option<PathType>,
    /// `NCCL_PXN_DISABLE=1`.
    pub pxn_disable: bool,
    /// `NCCL_PXN_C2C`; `None` = version default.
    pub pxn_c2c: Option<bool>,
    /// `NCCL_NET_GDR_LEVEL`.
    pub gdr_level: Option<PathType>,
    /// `NCCL_NET_GDR_READ`; `None` = auto.
    pub gdr_read: Option<bool>,
    /// `NCCL_NET_GDR_C2C`; `None` = version default.
    pub gdr_c2c: Option<bool>,
    /// `NCCL_SHM_DISABLE=1`.
    pub shm_disable: bool,
    /// `NCCL_NET_DISABLE_INTRA=1`.
    pub net_disable_intra: bool,
    /// `NCCL_IGNORE_DISABLED_P2P` (0, 1, 2).
    pub ignore_disabled_p2p: u8,
    /// Every rank runs in its own container without shared IPC or /dev/shm: neither P2P nor
    /// SHM can connect local peers.
    pub isolated_ranks: bool,
    /// `MAXCHANNELS` of the version (channels scanned to find a NET's local GPU).
    pub max_channels: usize,
    /// `NCCL_P2P_USE_CUDA_MEMCPY=1`: copy engines cannot relay through another GPU.
    pub p2p_use_cuda_memcpy: bool,
}

impl Default for PathPolicy {
    fn default() -> Self {
        PathPolicy {
            minor: 28,
            nvb_disable: false,
            p2p_disable: false,
            p2p_level: None,
            pxn_disable: false,
            pxn_c2c: None,
            gdr_level: None,
            gdr_read: None,
            gdr_c2c: None,
            shm_disable: false,
            net_disable_intra: false,
            ignore_disabled_p2p: 0,
            isolated_ranks: false,
            max_channels: 64,
            p2p_use_cuda_memcpy: false,
        }
    }
}

impl PathPolicy {
    pub fn pxn_c2c(&self) -> bool {
        // NCCL_PXN_C2C default 0 in 2.27, 1 from 2.28.
        self.pxn_c2c.unwrap_or(self.minor >= 28)
    }
    pub fn gdr_c2c(&self) -> bool {
        // NCCL_NET_GDR_C2C default 0 in 2.26, 1 from 2.27.
        self.gdr_c2c.unwrap_or(self.minor >= 27)
    }
}

fn hop_type(l: LinkType) -> PathType {
    match l {
        LinkType::Loc | LinkType::Net => PathType::Loc,
        LinkType::Nvl => PathType::Nvl,
        LinkType::C2c => PathType::C2c,
        LinkType::Pci => PathType::Pix,
        LinkType::Sys => PathType::Sys,
    }
}

/// Computes every path and applies NCCL's post-processing (`ncclTopoComputePaths`): no-P2P
/// rerouting through the CPU, unreachable peers, P2C, PXN and no-GDR rerouting.
pub fn compute(sys: &System, policy: &PathPolicy) -> Paths {
    let mut paths = skeleton(sys);
    let replicas = Replicas::of(sys, &mut paths);
    search_paths(sys, policy, &mut paths, &replicas);
    post_process(sys, policy, &mut paths, &replicas);
    replicas.fill(sys, &mut paths);
    paths
}

/// Breadth-first widest paths towards every CPU, GPU, NET and NVSwitch (`ncclTopoSetPaths`),
/// before post-processing.
pub fn raw_paths(sys: &System, policy: &PathPolicy) -> Paths {
    let mut paths = skeleton(sys);
    let replicas = Replicas::of(sys, &mut paths);
    search_paths(sys, policy, &mut paths, &replicas);
    replicas.fill(sys, &mut paths);
    paths
}

/// Empty tables and the per-host node lists.
fn skeleton(sys: &System) -> Paths {
    let nh = sys
        .nodes
        .iter()
        .map(|n| n.host as usize + 1)
        .max()
        .unwrap_or(1);
    let mut col = vec![NO_COL; sys.nodes.len()];
    let mut bases = vec![0usize; nh];
    let host_of: Vec<HostId> = sys.nodes.iter().map(|n| n.host).collect();
    for (i, n) in sys.nodes.iter().enumerate() {
        let h = n.host as usize;
        if is_base(n.kind) {
            col[i] = bases[h];
            bases[h] += 1;
        }
    }
    // Tables are allocated once [`Replicas::of`] knows which hosts compute theirs.
    let hosts = bases
        .iter()
        .enumerate()
        .map(|(h, &nb)| HostTable {
            nb,
            table: Vec::new(),
            source: h,
            from: 0,
            to: 0,
            raw_bw: HashMap::new(),
        })
        .collect();
    let slots = (nh.max(sys.nhosts)) * KINDS;
    let mut by_host: Vec<Vec<usize>> = vec![Vec::new(); slots];
    for kind in [NodeType::Net, NodeType::Cpu, NodeType::Nvs] {
        let k = kind_slot(kind).expect("a listed type");
        for &t in sys.of_type(kind) {
            by_host[host_of[t] as usize * KINDS + k].push(t);
        }
    }
    // GPUs in NCCL's index order (the fused XML's), which is what `ncclTopoGetLocal` scans.
    for h in 0..sys.nhosts as HostId {
        let gpus: Vec<usize> = sys
            .host_gpus_indexed(h)
            .into_iter()
            .map(|r| sys.gpus[r])
            .collect();
        by_host[h as usize * KINDS] = gpus;
    }
    let mut net_pos = vec![None; sys.nodes.len()];
    for (i, &n) in sys.nets.iter().enumerate() {
        net_pos[n] = Some(i);
    }
    let mut host_ranks: Vec<Vec<usize>> = vec![Vec::new(); nh.max(sys.nhosts)];
    for (r, &g) in sys.gpus.iter().enumerate() {
        host_ranks[host_of[g] as usize].push(r);
    }
    Paths {
        col,
        host_of,
        hosts,
        net_local_gpu: vec![],
        by_host,
        net_pos,
        host_ranks,
    }
}

/// The breadth-first searches of [`raw_paths`], for the hosts that compute their tables.
fn search_paths(sys: &System, policy: &PathPolicy, paths: &mut Paths, replicas: &Replicas) {
    let loc_bw = 5000.0;
    let head_rule = policy.minor >= 30;
    let mut backs = Backs::new(sys);

    // Which BFS level last queued each node: `next.contains` made a CPU with 600 children
    // cost 600 × 600 per level (the same order, without the scan).
    let mut queued_at = vec![usize::MAX; sys.nodes.len()];
    let mut level = 0usize;
    // The search towards one base, by node: PCI switches and NICs need their paths only
    // while it runs, so the table takes the rows it keeps afterwards.
    let mut column: Vec<Option<Path>> = vec![None; sys.nodes.len()];
    let mut touched: Vec<usize> = vec![];
    for base in 0..sys.nodes.len() {
        if !is_base(sys.nodes[base].kind) || !replicas.computes(paths.host_of[base] as usize) {
            continue;
        }
        column[base] = Some(Path::local(base, loc_bw));
        touched.push(base);
        let mut frontier = vec![base];
        while !frontier.is_empty() {
            level += 1;
            let mut next: Vec<usize> = vec![];
            for &node in &frontier {
                // Taken out while its links are scanned (and put back after) rather than
                // copied with its route; no link leads back to the node itself (the system
                // drops self-links), and one that did could not improve on it.
                let Some(p_node) = column[node].take() else {
                    continue;
                };
                let nk = sys.nodes[node].kind;
                let has_back = backs.of(node);
                for (li, link) in sys.nodes[node].links.iter().enumerate() {
                    let rem = link.to;
                    if rem == node {
                        continue;
                    }
                    let rk = sys.nodes[rem].kind;
                    // A GPU is a leaf, except as the single relay of an NVB path.
                    if node != base
                        && nk == NodeType::Gpu
                        && (policy.nvb_disable
                            || link.kind != LinkType::Nvl
                            || rk != NodeType::Gpu
                            || p_node.hops > 1)
                    {
                        continue;
                    }
                    // The route is stored from `rem` towards the base: it needs the reverse link.
                    if !has_back[li] {
                        continue;
                    }
                    let bw = p_node.bw.min(link.bw);
                    let mut hop = hop_type(link.kind);
                    if nk == NodeType::Pci && rk == NodeType::Pci {
                        hop = PathType::Pxb;
                    }
                    if link.kind == LinkType::Pci && (nk == NodeType::Cpu || rk == NodeType::Cpu) {
                        hop = PathType::Phb;
                    }
                    if nk == NodeType::Gpu
                        && p_node.ty == PathType::Nvl
                        && hop == PathType::Nvl
                        && p_node.hops >= 1
                    {
                        hop = PathType::Nvb;
                    }
                    let ty = p_node.ty.max(hop);
                    let hops = p_node.hops + 1;
                    let better = match &column[rem] {
                        None => true,
                        Some(cur) if head_rule => {
                            // 2.30: better type first, then bandwidth, then hop count.
                            ty < cur.ty
                                || (ty == cur.ty
                                    && (bw > cur.bw || (bw == cur.bw && hops < cur.hops)))
                        }
                        // ≤2.29: shorter-or-unset and strictly more bandwidth.
                        Some(cur) => cur.hops > p_node.hops && cur.bw < bw,
                    };
                    if better {
                        let mut route = Vec::with_capacity(p_node.route.len() + 1);
                        route.push(rem);
                        route.extend_from_slice(&p_node.route);
                        let mut links = Vec::with_capacity(p_node.links.len() + 1);
                        links.push(link.kind);
                        links.extend_from_slice(&p_node.links);
                        if column[rem].is_none() {
                            touched.push(rem);
                        }
                        column[rem] = Some(Path {
                            ty,
                            bw,
                            hops,
                            route,
                            links,
                        });
                        if queued_at[rem] != level {
                            queued_at[rem] = level;
                            next.push(rem);
                        }
                    }
                }
                column[node] = Some(p_node);
            }
            frontier = next;
        }
        for n in touched.drain(..) {
            if let Some(p) = column[n].take()
                && is_base(sys.nodes[n].kind)
                && paths.host_of[n] == paths.host_of[base]
            {
                paths.set(n, base, p);
            }
        }
    }
}

/// For each link of a node (by position in its list), whether the far end links back with
/// the same kind; looked up once per node, because scanning the far end's links on every BFS
/// step made a CPU with 600 NIC children cost 600 × 600 per step. Found for the nodes the
/// searches reach only: with `--nodes` copies those are one copy's (and a changed copy's),
/// and finding them for all 16,384 hosts was a twentieth of a fault plan.
struct Backs<'a> {
    sys: &'a System,
    /// Each reached node's far ends as sorted (far end, kind) keys, searched by bisection (a
    /// hash set of every link cost more than the path searches of the 32,768-GPU plan it
    /// served).
    sorted: Vec<Option<Vec<(usize, u8)>>>,
    has: Vec<Option<Vec<bool>>>,
}

impl<'a> Backs<'a> {
    fn new(sys: &'a System) -> Backs<'a> {
        Backs {
            sys,
            sorted: vec![None; sys.nodes.len()],
            has: vec![None; sys.nodes.len()],
        }
    }

    fn of(&mut self, node: usize) -> &[bool] {
        let (sys, sorted) = (self.sys, &mut self.sorted);
        self.has[node].get_or_insert_with(|| {
            sys.nodes[node]
                .links
                .iter()
                .map(|l| {
                    let keys = sorted[l.to].get_or_insert_with(|| {
                        let mut v: Vec<(usize, u8)> = sys.nodes[l.to]
                            .links
                            .iter()
                            .map(|b| (b.to, b.kind as u8))
                            .collect();
                        v.sort_unstable();
                        v
                    });
                    keys.binary_search(&(node, l.kind as u8)).is_ok()
                })
                .collect()
        })
    }
}

/// Joins `from → via` and `via → to` (`addInterStep`). A GPU relay makes the path PXN; from
/// 2.27 a C2C leg joined with a PHB leg through a CPU makes it P2C.
fn inter_step(
    sys: &System,
    paths: &Paths,
    policy: &PathPolicy,
    from: usize,
    via: usize,
    to: usize,
) -> Option<Path> {
    let a = paths.get(from, via)?;
    let b = paths.get(via, to)?;
    let mut ty = a.ty.max(b.ty);
    if sys.nodes[via].kind == NodeType::Gpu {
        ty = PathType::Pxn;
    } else if sys.nodes[via].kind == NodeType::Cpu
        && policy.minor >= 27
        && ((a.ty == PathType::C2c && b.ty == PathType::Phb)
            || (a.ty == PathType::Phb && b.ty == PathType::C2c))
    {
        ty = PathType::P2c;
    }
    let mut route = a.route.clone();
    route.extend_from_slice(&b.route[1..]);
    let mut links = a.links.clone();
    links.extend_from_slice(&b.links);
    Some(Path {
        ty,
        bw: a.bw.min(b.bw),
        hops: a.hops + b.hops,
        route,
        links,
    })
}

/// Nodes of `kind` with the best path from `from`: maximum bandwidth, then minimum type
/// (`ncclTopoGetLocal`).
pub fn local_nodes(_sys: &System, paths: &Paths, from: usize, kind: NodeType) -> Vec<usize> {
    let cands: Vec<usize> = paths
        .same_host(from, kind)
        .iter()
        .copied()
        .filter(|&t| paths.get(from, t).is_some())
        .collect();
    let best_bw = cands.iter().map(|&t| paths.bw(from, t)).fold(0.0, f64::max);
    let at_bw: Vec<usize> = cands
        .into_iter()
        .filter(|&t| paths.bw(from, t) == best_bw)
        .collect();
    let best_ty = at_bw
        .iter()
        .map(|&t| paths.ty(from, t))
        .min()
        .unwrap_or(PathType::Dis);
    at_bw
        .into_iter()
        .filter(|&t| paths.ty(from, t) == best_ty)
        .collect()
}

/// Marks the GPU's NET paths P2C where the GPU reaches its CPU over C2C and the NET over that
/// CPU's PCIe (or the reverse). 2.27 and 2.28 mark every NET of the host (v2.28.9-1
/// src/graph/paths.cc, so a farther NIC such as a BlueField port becomes as attractive as the
/// GPU's own); 2.29 only the GPU's closest NETs (v2.29.2-1 paths.cc, "P2C is only set when
/// the NET is the closest to the GPU"). NCCL keeps a path already better than P2C.
fn mark_p2c(sys: &System, paths: &mut Paths, policy: &PathPolicy, gn: usize) {
    let Some(cpu) = local_cpu(sys, paths, gn) else {
        return;
    };
    let nets: Vec<usize> = if policy.minor <= 28 {
        paths
            .same_host(gn, NodeType::Net)
            .iter()
            .copied()
            .filter(|&n| paths.get(gn, n).is_some())
            .collect()
    } else {
        local_nodes(sys, paths, gn, NodeType::Net)
    };
    for n in nets {
        let (a, b) = (paths.ty(gn, cpu), paths.ty(n, cpu));
        if (a == PathType::C2c && b == PathType::Phb) || (a == PathType::Phb && b == PathType::C2c)
        {
            for (x, y) in [(gn, n), (n, gn)] {
                if let Some(mut p) = paths.get(x, y).cloned() {
                    p.ty = p.ty.min(PathType::P2c);
                    paths.set(x, y, p);
                }
            }
        }
    }
}

/// The CPU local to a node: among local CPUs the one with the fewest hops (`ncclGetLocalCpu`).
pub fn local_cpu(_sys: &System, paths: &Paths, node: usize) -> Option<usize> {
    // ncclGetLocalCpu (NCCL 2.28.9 src/graph/paths.cc): the fewest hops, the first of equally
    // close CPUs in CPU index order (the fused XML's); bandwidth and path type do not count.
    // A GPU whose NVLink peer sits on another CPU reaches that CPU in as many hops as its own
    // (seed 977 of the oracle sweep): NCCL keeps the CPU listed first.
    paths
        .same_host(node, NodeType::Cpu)
        .iter()
        .copied()
        .filter(|&c| paths.get(node, c).is_some_and(|p| p.hops > 0))
        .min_by_key(|&c| paths.get(node, c).map_or(u32::MAX, |p| p.hops))
}

fn mirror_bits(v: usize, pow2: usize) -> usize {
    let bits = pow2.trailing_zeros();
    let mut out = 0;
    for b in 0..bits {
        if v & (1 << b) != 0 {
            out |= 1 << (bits - 1 - b);
        }
    }
    out
}

/// The NET a GPU uses for `channel` (`ncclTopoGetLocalNet`, netsPerGpu by the AUTO policy).
pub fn local_net(
    sys: &System,
    paths: &Paths,
    policy: &PathPolicy,
    rank: usize,
    channel: usize,
) -> Option<usize> {
    net_for_channel(paths, policy, &gpu_nets(sys, paths, rank)?, channel)
}

/// A GPU's channel-0 NIC as NCCL picks it, with the NICs tied with it: the one rule show's
/// nearest NIC and the plan's NIC of each rank are both stated from.
#[derive(Clone, Debug, PartialEq)]
pub struct NicChoice {
    /// The NET NCCL's channel 0 uses (index into `System::nets`).
    pub net: usize,
    /// Every NET equally near the GPU (highest path bandwidth, then best path type,
    /// `ncclTopoGetLocal`), in NCCL's order; `net` is one of them.
    pub tied: Vec<usize>,
    /// The GPU's device index and the place among `tied` it maps to.
    pub dev: usize,
    pub place: usize,
    /// The device index was bit-mirrored (`mirrorBits`: the tie count is a power of two).
    pub mirrored: bool,
    /// How many of the tied NICs the GPU's channels take in turn (`netsPerGpu` of the AUTO
    /// policy: the tied NICs over the GPUs that share them, rounded up).
    pub nets_per_gpu: usize,
}

impl NicChoice {
    /// Why NCCL takes `net` among the tied NICs, or `None` without a tie. `name` names a NET
    /// (index into `System::nets`).
    pub fn tie_text(&self, name: impl Fn(usize) -> String) -> Option<String> {
        if self.tied.len() < 2 {
            return None;
        }
        let names: Vec<String> = self.tied.iter().map(|&x| name(x)).collect();
        let n = self.tied.len();
        let how = if self.mirrored {
            format!(
                "the GPU's device index {}, bit-mirrored over {n}, gives place {}",
                self.dev, self.place
            )
        } else {
            format!(
                "the GPU's device index {}, modulo {n}, gives place {}",
                self.dev, self.place
            )
        };
        let spread = if self.nets_per_gpu > 1 {
            format!(
                "NCCL spreads the GPU's channels over {} of them in turn, and channel 0",
                self.nets_per_gpu
            )
        } else {
            "NCCL's channel 0".to_string()
        };
        Some(format!(
            "a tie: {n} NICs are equally near ({}); {spread} takes {} because {how} (ncclTopoGetLocalNet, src/graph/topo.cc, NCCL 2.28)",
            names.join(", "),
            name(self.net)
        ))
    }
}

/// NCCL's channel-0 NIC of `rank` and the NICs tied with it (`ncclTopoGetLocalNet`).
pub fn nic_choice(
    sys: &System,
    paths: &Paths,
    policy: &PathPolicy,
    rank: usize,
) -> Option<NicChoice> {
    let g = gpu_nets(sys, paths, rank)?;
    let net = net_for_channel(paths, policy, &g, 0)?;
    let tied: Vec<usize> = g
        .nets
        .iter()
        .filter_map(|&x| paths.net_pos.get(x).copied().flatten())
        .collect();
    let dev = if policy.minor >= 30 {
        g.dev % g.gpus_of_net.max(1)
    } else {
        g.dev
    };
    let mirrored = g.nets.len().is_power_of_two();
    let place = if mirrored {
        mirror_bits(dev, g.nets.len())
    } else {
        dev
    } % g.nets.len().max(1);
    Some(NicChoice {
        net,
        tied,
        dev,
        place,
        mirrored,
        nets_per_gpu: g.nets.len().div_ceil(g.gpus_of_net.max(1)),
    })
}

/// What [`local_net`] needs of a GPU that does not depend on the channel: computed once, so
/// scanning channels does not search every NET again (with 600 NICs that was 600 NETs ×
/// channels × NETs).
struct GpuNets {
    nets: Vec<usize>,
    gpus_of_net: usize,
    dev: usize,
}

fn gpu_nets(sys: &System, paths: &Paths, rank: usize) -> Option<GpuNets> {
    let g = sys.gpus[rank];
    let nets = local_nodes(sys, paths, g, NodeType::Net);
    let first = *nets.first()?;
    let gpus_of_net = local_nodes(sys, paths, first, NodeType::Gpu).len();
    let dev = sys.nodes[g]
        .gpu
        .as_ref()
        .map(|a| a.dev.max(0) as usize)
        .unwrap_or(0);
    Some(GpuNets {
        nets,
        gpus_of_net,
        dev,
    })
}

fn net_for_channel(
    paths: &Paths,
    policy: &PathPolicy,
    g: &GpuNets,
    channel: usize,
) -> Option<usize> {
    let nets = &g.nets;
    let nets_per_gpu = nets.len().div_ceil(g.gpus_of_net.max(1));
    // 2.30 folds the device index onto the GPUs sharing the NIC first.
    let mut idx = if policy.minor >= 30 {
        g.dev % g.gpus_of_net.max(1)
    } else {
        g.dev
    };
    if nets.len().is_power_of_two() {
        idx = mirror_bits(idx, nets.len());
    }
    idx += channel % nets_per_gpu;
    // Indices into `System::nets`.
    let net_node = nets[idx % nets.len()];
    paths.net_pos.get(net_node).copied().flatten()
}

/// The GPU rank that owns a NET (`ncclTopoGetLocalGpu`): scanning channels, the first local
/// GPU whose channel NET is this one.
pub fn net_local_gpu(
    sys: &System,
    paths: &Paths,
    policy: &PathPolicy,
    net: usize,
) -> Option<usize> {
    let n = sys.nets[net];
    let cands: Vec<usize> = if policy.minor <= 18 {
        (0..sys.gpus.len())
            .filter(|&r| sys.gpu(r).host == sys.nodes[n].host)
            .collect()
    } else {
        local_nodes(sys, paths, n, NodeType::Gpu)
            .into_iter()
            .filter_map(|g| sys.nodes[g].gpu.as_ref().map(|a| a.rank))
            .collect()
    };
    // local_net depends on the channel only modulo netsPerGpu, which is at most the number of
    // NETs on this host: a GPU that reaches `net` on some channel reaches it on one below
    // that count, so scanning further finds nothing new (and cost O(MAXCHANNELS) per NET).
    let period = paths.same_host(n, NodeType::Net).len().max(1);
    let per_rank: Vec<(usize, GpuNets)> = cands
        .iter()
        .filter_map(|&r| Some((r, gpu_nets(sys, paths, r)?)))
        .collect();
    for c in 0..policy.max_channels.max(1).min(period) {
        for (r, g) in &per_rank {
            if net_for_channel(paths, policy, g, c) == Some(net) {
                return Some(*r);
            }
        }
    }
    None
}

/// Why P2P is (not) allowed between two GPUs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct P2pCheck {
    pub p2p: bool,
    /// P2P read (A100 NVLink) rather than write.
    pub read: bool,
    /// The relay GPU rank of an NVB path.
    pub intermediate: Option<usize>,
    pub path: PathType,
    /// The P2P level in force and where it came from.
    pub level: PathType,
    pub level_source: LevelSource,
    /// NVML reports P2P read or write as not OK for this pair (or its relay).
    pub nvml_blocked: bool,
    pub same_host: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LevelSource {
    /// NCCL's default for this CPU and GPU count.
    Default,
    /// `NCCL_P2P_LEVEL`.
    Env,
    /// `NCCL_P2P_DISABLE=1`.
    Disabled,
}

fn nvml_ok(caps: Option<&P2pCaps>) -> bool {
    match caps {
        Some(c) => c.read != Some(false) && c.write != Some(false),
        None => true,
    }
}

/// The default P2P level (`ncclTopoCheckP2p`, paths.cc): PXB from 2.23 (SYS on AMD x86 with at
/// most two GPUs); before 2.23 SYS, lowered to PXB on Intel x86, ARM and Zhaoxin.
pub fn default_p2p_level(sys: &System, host: HostId, minor: u32) -> PathType {
    default_p2p_level_with(sys, host, sys.host_gpus(host).len(), minor)
}

/// [`default_p2p_level`] for a host with `ngpus` GPUs (callers with [`Paths`] count them
/// without scanning every host).
fn default_p2p_level_with(sys: &System, host: HostId, ngpus: usize, minor: u32) -> PathType {
    let cpu = sys.host_cpu(host);
    let (arch, vendor) = cpu
        .map(|c| (c.arch, c.vendor))
        .unwrap_or((CpuArch::X86, CpuVendor::Other));
    if minor >= 23 {
        if arch == CpuArch::X86 && vendor == CpuVendor::Amd && ngpus <= 2 {
            PathType::Sys
        } else {
            PathType::Pxb
        }
    } else if arch == CpuArch::Arm
        || (arch == CpuArch::X86 && matches!(vendor, CpuVendor::Intel | CpuVendor::Zhaoxin))
    {
        PathType::Pxb
    } else {
        PathType::Sys
    }
}

/// `ncclTopoCheckP2p` for ranks `a` → `b` (paths.cc): level, NVB relay, NVML status, read mode.
pub fn check_p2p(sys: &System, paths: &Paths, policy: &PathPolicy, a: usize, b: usize) -> P2pCheck {
    let (ga, gb) = (sys.gpus[a], sys.gpus[b]);
    let host = sys.nodes[ga].host;
    let same_host = host == sys.nodes[gb].host;
    let (level, level_source) = if policy.p2p_disable {
        (PathType::Loc, LevelSource::Disabled)
    } else if let Some(l) = policy.p2p_level {
        (l, LevelSource::Env)
    } else {
        (
            default_p2p_level_with(
                sys,
                host,
                paths.same_host(ga, NodeType::Gpu).len(),
                policy.minor,
            ),
            LevelSource::Default,
        )
    };
    let mut out = P2pCheck {
        p2p: false,
        read: false,
        intermediate: None,
        path: PathType::Dis,
        level,
        level_source,
        nvml_blocked: false,
        same_host,
    };
    if !same_host || policy.isolated_ranks {
        return out;
    }
    let Some(path) = paths.get(ga, gb) else {
        return out;
    };
    out.path = path.ty;
    if path.ty == PathType::Nvb {
        out.intermediate = paths
            .interior(ga, gb)
            .find_map(|n| sys.nodes[n].gpu.as_ref().map(|g| g.rank));
    }
    out.p2p = path.ty <= level;
    if a != b && policy.ignore_disabled_p2p != 2 {
        let mut hops = vec![(a, b)];
        if let Some(m) = out.intermediate {
            hops = vec![(a, m), (m, b)];
        }
        let blocked = hops.iter().any(|&(x, y)| !nvml_ok(sys.p2p_caps(x, y)));
        if blocked {
            out.nvml_blocked = true;
            out.p2p = false;
        }
    }
    let sm = |g: usize| sys.nodes[g].gpu.as_ref().map(|x| x.sm).unwrap_or(0);
    out.read = path.ty == PathType::Nvl && sm(ga) == 80 && sm(gb) == 80;
    out
}

/// `ncclTopoCheckNet`: NET is preferred between two local GPUs when both reach some NET at
/// PXB or better with more bandwidth than their GPU↔GPU path.
pub fn net_faster(sys: &System, paths: &Paths, policy: &PathPolicy, a: usize, b: usize) -> bool {
    if policy.net_disable_intra {
        return false;
    }
    let (ga, gb) = (sys.gpus[a], sys.gpus[b]);
    let gg = paths.bw(ga, gb);
    let good = |g: usize| {
        paths.same_host(g, NodeType::Net).iter().any(|&n| {
            paths
                .get(g, n)
                .is_some_and(|p| p.ty <= PathType::Pxb && p.bw > gg)
        })
    };
    good(ga) && good(gb)
}

/// Result of the GPUDirect RDMA check for one GPU and NET.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GdrCheck {
    pub enabled: bool,
    pub distance: PathType,
    pub level: PathType,
    pub reason: String,
}

/// `ncclTopoCheckGdr` (paths.cc): both ends support GDR, read side rules, distance ≤ level.
pub fn check_gdr(
    sys: &System,
    paths: &Paths,
    policy: &PathPolicy,
    rank: usize,
    net: usize,
    read: bool,
) -> GdrCheck {
    let g = sys.gpus[rank];
    let n = sys.nets[net];
    let ga = sys.nodes[g].gpu.as_ref();
    let na = sys.nodes[n].net.as_ref();
    let mut distance = paths.ty(g, n);
    if distance == PathType::Pxn
        && let Some(relay) = paths
            .interior(g, n)
            .find(|&x| sys.nodes[x].kind == NodeType::Gpu)
    {
        distance = paths.ty(relay, n);
    }
    let default_level = if policy.minor >= 30 && policy.gdr_c2c() {
        PathType::P2c
    } else {
        PathType::Pxb
    };
    let level = policy.gdr_level.unwrap_or(default_level);
    let mk = |enabled: bool, reason: String| GdrCheck {
        enabled,
        distance,
        level,
        reason,
    };
    let fact = na.map_or(GdrFact::Stated, |x| x.gdr_fact);
    if !na.is_some_and(|x| x.gdr) {
        // Unknown stays unknown: a port listed without `gdr` is not a port without GDR.
        let why = if fact == GdrFact::Stated {
            "the NIC does not support GPUDirect RDMA (gdr=0)"
        } else {
            "GPUDirect RDMA unknown on the NIC (the source does not say; planned without it, as NCCL reads a <net> without gdr)"
        };
        return mk(false, why.into());
    }
    if !ga.is_some_and(|x| x.gdr) {
        return mk(
            false,
            "the GPU does not support GPUDirect RDMA (gdr=0)".into(),
        );
    }
    if read {
        if policy.gdr_read == Some(false) {
            return mk(
                false,
                "NCCL_NET_GDR_READ=0 disables GDR on the send side".into(),
            );
        }
        let sm = ga.map(|x| x.sm).unwrap_or(0);
        if policy.gdr_read.is_none() && sm < 80 {
            let host_gpus = sys.host_gpus(sys.nodes[g].host);
            let nvlinked = host_gpus.len() == 1
                || host_gpus
                    .iter()
                    .any(|&r| r != rank && paths.ty(sys.gpus[r], g) == PathType::Nvl);
            if !nvlinked {
                return mk(
                    false,
                    format!("GDR read is off by default on sm{sm} without an NVLink peer"),
                );
            }
        }
    }
    // 2.27–2.29 treat a P2C distance as C2C when NET_GDR_C2C is on.
    let eff = if (27..30).contains(&policy.minor) && distance == PathType::P2c && policy.gdr_c2c() {
        PathType::C2c
    } else {
        distance
    };
    if eff > level {
        return mk(
            false,
            format!("GPU→NIC distance {distance} exceeds the GDR level {level}"),
        );
    }
    let assumed = if fact == GdrFact::Assumed {
        " (support assumed: the source does not say; NCCL's IB plugin reports it where nvidia-peermem or DMA-BUF works, as on GPU cloud images)"
    } else {
        ""
    };
    mk(
        true,
        format!("GPU→NIC distance {distance} within the GDR level {level}{assumed}"),
    )
}

/// GPU ranks grouped into NCCL's domains (`ncclTopoTrimSystem`, paths.cc): GPUs of one host
/// joined by any path better than NET. GPUs that only reach each other through the network
/// (neither P2P nor SHM can connect them) end up in different domains, which NCCL then counts
/// as different nodes.
pub fn gpu_domains(sys: &System, paths: &Paths) -> Vec<Vec<usize>> {
    // ncclTopoTrimSystem (NCCL 2.28.9 src/graph/paths.cc) labels each GPU with the smallest
    // label among the GPUs before it that it reaches better than NET, in its GPU index order
    // (the fused XML's, not rank order); a rank keeps the GPUs of its own label. The labels
    // are not connected components: B joined to A and C joined to B only through a later
    // index can stay apart.
    let mut label = vec![(0, 0); sys.gpus.len()];
    for h in 0..sys.nhosts as HostId {
        let order = sys.host_gpus_indexed(h);
        for (i, &g) in order.iter().enumerate() {
            label[g] = (h, i);
            for &p in &order[..i] {
                if paths
                    .get(sys.gpus[g], sys.gpus[p])
                    .is_some_and(|x| x.ty < PathType::Net)
                {
                    label[g] = label[g].min(label[p]);
                }
            }
        }
    }
    // Nodes in the order of their lowest rank (init.cc's nodesFirstRank is filled in rank
    // order), each node's ranks ascending.
    let mut groups: Vec<Vec<usize>> = vec![];
    let mut index: HashMap<(HostId, usize), usize> = HashMap::new();
    for (r, &d) in label.iter().enumerate() {
        let i = *index.entry(d).or_insert_with(|| {
            groups.push(vec![]);
            groups.len() - 1
        });
        groups[i].push(r);
    }
    groups
}

/// The ranks of `host` in rank order (a copy: the caller changes `paths` meanwhile). Pairs
/// on different hosts have no GPU path to reroute, and scanning every rank for every rank
/// was quadratic in hosts.
fn peers(paths: &Paths, host: HostId) -> Vec<usize> {
    paths
        .host_ranks
        .get(host as usize)
        .cloned()
        .unwrap_or_default()
}

/// NCCL's post-processing of the raw paths, for the hosts that compute their tables (each
/// step reads and changes only pairs of one host).
fn post_process(sys: &System, policy: &PathPolicy, paths: &mut Paths, replicas: &Replicas) {
    let ng = sys.gpus.len();
    let computed = |paths: &Paths, node: usize| replicas.computes(paths.host_of[node] as usize);
    // 1. No P2P: divert GPU→GPU traffic through the destination GPU's local CPU.
    for g in 0..ng {
        let gn = sys.gpus[g];
        if !computed(paths, gn) {
            continue;
        }
        let Some(cpu) = local_cpu(sys, paths, gn) else {
            continue;
        };
        for p in peers(paths, sys.nodes[gn].host) {
            let pn = sys.gpus[p];
            if p == g {
                continue;
            }
            if !check_p2p(sys, paths, policy, p, g).p2p
                && let Some(np) = inter_step(sys, paths, policy, pn, cpu, gn)
            {
                paths.replace(pn, gn, np);
            }
        }
    }
    // 2. Peers neither P2P nor SHM can reach are only reachable through the network.
    for g in 0..ng {
        if !computed(paths, sys.gpus[g]) {
            continue;
        }
        for p in peers(paths, sys.nodes[sys.gpus[g]].host) {
            let (pn, gn) = (sys.gpus[p], sys.gpus[g]);
            if p == g {
                continue;
            }
            let nf = net_faster(sys, paths, policy, p, g);
            let c = check_p2p(sys, paths, policy, p, g);
            // p2pCanConnect answers for a path relayed through another GPU before it asks
            // whether the network would be faster (src/transport/p2p.cc, v2.18.5-1 to
            // v2.30.7-1): an NVB pair stays P2P unless copy engines must do the copy.
            let p2p = c.p2p
                && if c.intermediate.is_some() {
                    !policy.p2p_use_cuda_memcpy
                } else {
                    !nf
                };
            let shm = !policy.shm_disable && !policy.isolated_ranks && !nf;
            if !p2p
                && !shm
                && let Some(mut path) = paths.get(pn, gn).cloned()
            {
                path.ty = PathType::Net;
                paths.replace(pn, gn, path);
            }
        }
    }
    // 3. P2C (2.27+): a GPU on C2C whose NET sits behind the CPU's PCIe.
    if policy.minor >= 27 {
        for g in 0..ng {
            let gn = sys.gpus[g];
            if computed(paths, gn) {
                mark_p2c(sys, paths, policy, gn);
            }
        }
    }
    // 4. PXN and 5. no-GDR rerouting, per NET.
    for (ni, &n) in sys.nets.iter().enumerate() {
        if !computed(paths, n) {
            continue;
        }
        // The owner is computed once per NET: PXN only makes other GPUs' paths to this NET
        // worse than the owner's, so it cannot change during the loop.
        let owner = net_local_gpu(sys, paths, policy, ni);
        // Only this NET's host: scanning every rank for every NET was quadratic in hosts.
        let ranks = paths
            .host_ranks
            .get(sys.nodes[n].host as usize)
            .cloned()
            .unwrap_or_default();
        for g in ranks {
            let gn = sys.gpus[g];
            if sys.nodes[gn].host != sys.nodes[n].host {
                continue;
            }
            if !policy.pxn_disable
                && let Some(p) = owner.filter(|&p| p != g)
            {
                let pn = sys.gpus[p];
                let (pn_ty, pn_bw) = (paths.ty(pn, n), paths.bw(pn, n));
                let (gn_ty, gn_bw) = (paths.ty(gn, n), paths.bw(gn, n));
                let (limit, threshold, need_gdr) = if policy.minor >= 27 {
                    let lim = if policy.pxn_c2c() {
                        PathType::P2c
                    } else {
                        PathType::Pxb
                    };
                    (lim, PathType::Pxn, policy.minor >= 30)
                } else {
                    (PathType::Pxb, PathType::Pxb, false)
                };
                let gdr_ok = !need_gdr || check_gdr(sys, paths, policy, p, ni, true).enabled;
                if pn_ty <= limit
                    && gdr_ok
                    && paths.ty(pn, gn) <= PathType::Nvl
                    && (pn_bw > gn_bw || gn_ty > threshold)
                    && let Some(np) = inter_step(sys, paths, policy, gn, pn, n)
                {
                    paths.replace(gn, n, np);
                }
            }
            let reroute = policy.minor <= 18 || paths.ty(gn, n) < PathType::Phb;
            if reroute
                && !check_gdr(sys, paths, policy, g, ni, false).enabled
                && let Some(cpu) = local_cpu(sys, paths, gn)
            {
                if let Some(np) = inter_step(sys, paths, policy, n, cpu, gn) {
                    paths.replace(n, gn, np);
                }
                if let Some(np) = inter_step(sys, paths, policy, gn, cpu, n) {
                    paths.replace(gn, n, np);
                }
            }
        }
    }
    // The search's NET-local GPU is taken from the final paths, after the no-GDR detours
    // through the CPU (NCCL 2.28.9 src/graph/paths.cc precomputes `net.localGpu` at the end
    // of ncclTopoComputePaths; before 2.27.7 the search asked ncclTopoGetLocalGpu itself, on
    // the same final paths). The detours can change which NETs are a GPU's local ones.
    // Replicas' owners are copied from their source host (`Replicas::fill`).
    paths.net_local_gpu = (0..sys.nets.len())
        .map(|ni| {
            computed(paths, sys.nets[ni])
                .then(|| net_local_gpu(sys, paths, policy, ni))
                .flatten()
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::testing::hgx;
    use topo_model::{BwConstants, Topology};

    fn sys_of(t: &Topology) -> System {
        System::build(t, &BwConstants::default())
    }

    #[test]
    fn hgx_paths() {
        let t = hgx(8, 90);
        let s = sys_of(&t);
        let p = compute(&s, &PathPolicy::default());
        let (g0, g1) = (s.gpus[0], s.gpus[1]);
        let gg = p.get(g0, g1).unwrap();
        assert_eq!(gg.ty, PathType::Nvl);
        assert!((gg.bw - 370.8).abs() < 1e-9);
        assert_eq!(gg.hops, 2);
        // GPU0's own NIC is one switch away: PIX at Gen5 x16.
        let n0 = s.nets[0];
        assert_eq!(p.ty(g0, n0), PathType::Pix);
        assert_eq!(p.bw(g0, n0), 48.0);
        // GPU0 → NIC1 goes through GPU1 (PXN) because NIC1's owner has a PIX path.
        assert_eq!(p.ty(g0, s.nets[1]), PathType::Pxn);
        assert_eq!(p.bw(g0, s.nets[1]), 48.0);
        // NET → GPU direction is not changed by PXN: through the CPU.
        assert_eq!(p.ty(s.nets[1], g0), PathType::Phb);
        assert_eq!(p.net_local_gpu, (0..8).map(Some).collect::<Vec<_>>());
    }

    #[test]
    fn pxn_disabled_keeps_phb() {
        let t = hgx(8, 90);
        let s = sys_of(&t);
        let p = compute(
            &s,
            &PathPolicy {
                pxn_disable: true,
                ..Default::default()
            },
        );
        assert_eq!(p.ty(s.gpus[0], s.nets[1]), PathType::Phb);
    }

    #[test]
    fn p2p_level_and_disable() {
        let t = hgx(8, 90);
        let s = sys_of(&t);
        let pol = PathPolicy::default();
        let p = compute(&s, &pol);
        let c = check_p2p(&s, &p, &pol, 0, 1);
        assert!(c.p2p);
        assert_eq!(c.level, PathType::Pxb);
        assert!(!c.read);
        let dis = PathPolicy {
            p2p_disable: true,
            ..Default::default()
        };
        let p2 = compute(&s, &dis);
        let c2 = check_p2p(&s, &p2, &dis, 0, 1);
        assert!(!c2.p2p);
        assert_eq!(c2.level_source, LevelSource::Disabled);
        // Without P2P the GPU pair path goes through the CPU.
        assert_eq!(p2.ty(s.gpus[0], s.gpus[1]), PathType::Phb);
        assert_eq!(p2.bw(s.gpus[0], s.gpus[1]), 48.0);
        // NVLink A100 pairs read.
        let a = hgx(8, 80);
        let sa = sys_of(&a);
        let pa = compute(&sa, &pol);
        assert!(check_p2p(&sa, &pa, &pol, 0, 1).read);
    }

    /// Two sockets with two GPUs each and one NIC on socket 0 (`topo_model::testing::pcie_box`);
    /// `vendor` decides the default P2P level. Model 1 is Broadwell class (6 GB/s) on Intel.
    fn pcie_box(vendor: &str, gdr: bool) -> Topology {
        topo_model::testing::pcie_box(vendor, 25, 1, false, gdr)
    }

    #[test]
    fn pcie_box_paths_and_levels() {
        let t = pcie_box("GenuineIntel", true);
        let s = sys_of(&t);
        let pol = PathPolicy::default();
        let p = compute(&s, &pol);
        let g: Vec<usize> = s.gpus.clone();
        assert_eq!(p.ty(g[0], g[1]), PathType::Pix);
        assert_eq!(p.bw(g[0], g[1]), 24.0);
        // Across sockets P2P is above PXB: rerouted through the CPU, SYS.
        assert!(!check_p2p(&s, &p, &pol, 0, 2).p2p);
        assert_eq!(p.ty(g[0], g[2]), PathType::Sys);
        // Intel inter-socket bandwidth (model 1 is BDW class: 6 GB/s).
        assert_eq!(p.bw(g[0], g[2]), 6.0);
        // NIC path: GPUs on socket 0 PIX, socket 1 SYS, no GDR there → still SYS.
        assert_eq!(p.ty(g[0], s.nets[0]), PathType::Pix);
        assert_eq!(p.ty(g[2], s.nets[0]), PathType::Sys);
        // Before 2.23 Intel also got PXB; AMD got SYS.
        let amd = pcie_box("AuthenticAMD", true);
        let sa = sys_of(&amd);
        let old = PathPolicy {
            minor: 21,
            ..Default::default()
        };
        let pa = compute(&sa, &old);
        assert!(check_p2p(&sa, &pa, &old, 0, 2).p2p);
        let new = PathPolicy {
            minor: 28,
            ..Default::default()
        };
        let pn = compute(&sa, &new);
        assert!(!check_p2p(&sa, &pn, &new, 0, 2).p2p);
    }

    #[test]
    fn no_gdr_reroutes_through_cpu() {
        let t = pcie_box("GenuineIntel", false);
        let s = sys_of(&t);
        let pol = PathPolicy::default();
        let p = compute(&s, &pol);
        let c = check_gdr(&s, &p, &pol, 0, 0, false);
        assert!(!c.enabled);
        assert_eq!(p.ty(s.gpus[0], s.nets[0]), PathType::Phb);
        assert_eq!(p.ty(s.nets[0], s.gpus[0]), PathType::Phb);
    }

    #[test]
    fn shm_disable_with_p2p_off_makes_net() {
        let t = pcie_box("GenuineIntel", true);
        let s = sys_of(&t);
        let pol = PathPolicy {
            shm_disable: true,
            p2p_disable: true,
            ..Default::default()
        };
        let p = compute(&s, &pol);
        assert_eq!(p.ty(s.gpus[0], s.gpus[1]), PathType::Net);
    }

    #[test]
    fn mirror_bits_reverses() {
        assert_eq!(mirror_bits(1, 8), 4);
        assert_eq!(mirror_bits(3, 8), 6);
        assert_eq!(mirror_bits(0, 1), 0);
        assert_eq!(mirror_bits(1, 2), 1);
    }
}
