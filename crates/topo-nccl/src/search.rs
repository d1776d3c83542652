//! NCCL's channel search (`src/graph/search.cc`): for one pattern, the set of channels (GPU
//! orders, and NETs when inter-node) that the links can carry at the highest per-channel
//! bandwidth, found by a budgeted depth-first search with link bandwidth bookkeeping.
//!
//! The implementation follows NCCL 2.28.9 (`ncclTopoCompute`, `ncclTopoSearchRec*`,
//! `ncclTopoFollowPath`, `ncclTopoCompareGraphs`, `ncclTopoDupChannels`), with the version
//! differences of 2.18–2.27 and 2.29+ that the reference lists switched on `minor`.
//!
//! Scope: NCCL searches on one rank's system, which for a (non-MNNVL) multi-node job holds
//! only that rank's host. Hosts of a what-if (`Topology::replicate`) are identical, so the
//! search runs once, on host 0's GPUs and NETs, and every host uses the same channels.
//! Bandwidths are kept as `f32` like NCCL's `float`s, so rounding and the printed `%f` values
//! match (45.1 prints as `45.099998`).

use super::graph::Graph;
use super::paths::{self, PathPolicy, Paths};
use super::system::{LinkType, NodeType, System};
use super::types::{GraphId, PathType, Pattern};
use super::version::NcclVersion;
use serde::Serialize;
use std::rc::Rc;
use topo_model::{CpuArch, CpuVendor, HostId};

/// Per-channel speeds (GB/s) tried by the search, best first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpeedArrays {
    /// Single-node searches.
    pub intra: Vec<f64>,
    /// Multi-node searches.
    pub inter: Vec<f64>,
}

/// Everything the search needs from the NCCL version and the environment. Later the
/// integrator fills it from the per-version data; [`SearchParams::for_version`] holds the
/// reference's values (§5.1–5.4) meanwhile.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchParams {
    /// NCCL minor version (2.`minor`).
    pub minor: u32,
    /// `MAXCHANNELS`: 32 up to 2.24, 64 from 2.25. The ring search may use half of it.
    pub max_channels: usize,
    /// Speed arrays for min compute capability < 90.
    pub speeds_sm80: SpeedArrays,
    /// Speed arrays for min compute capability 90 (and ≥ 100 before 2.25).
    pub speeds_sm90: SpeedArrays,
    /// Speed arrays for min compute capability ≥ 100; `None` before 2.25.
    pub speeds_sm100: Option<SpeedArrays>,
    /// `NCCL_CROSS_NIC` (0 never, 1 always, 2 = try same NIC first; default 2).
    pub cross_nic: u8,
    /// `NCCL_MAX_NVLS_ARITY`: 8 in 2.18, 32 from 2.21. Caps NVLS heads.
    pub nvls_max_arity: usize,
    /// `NCCL_MAX_DIRECT_ARITY` (7): CollNet direct has at most arity + 1 heads.
    pub collnet_direct_max_arity: usize,
    /// CollNet (SHARP) usable (`NCCL_COLLNET_ENABLE=1` and a CollNet plugin): the CollNet
    /// chain and direct graphs are computed.
    pub collnet_enabled: bool,
    /// NVLS usable (`NCCL_NVLS_ENABLE` and multicast support on the GPU): the NVLS graph is
    /// searched (it still needs an NVSwitch and min compute capability ≥ 90).
    pub nvls_enabled: bool,
    /// Global step budget: 5×2^16 in 2.18–2.20, 2^19 from 2.21.
    pub global_timeout: i64,
    /// Step budget of one attempt (2^14), and with `sameChannels` (2^8).
    pub timeout: i64,
    pub timeout_same_channels: i64,
    /// Step budget of the "PCI order" first try of an inter-node channel (2^10).
    pub timeout_pci_order: i64,
    /// The system fuses several hosts (an MNNVL clique, 2.27+): the channel start tries NETs
    /// "GPU first" (NCCL_MNNVL_SCATTER_NETS_ENABLE, default 1).
    pub gpu_first_nets: bool,
    /// NCCL_MNNVL_RAIL_PER_HOST=1 where the release reads it (2.28.7+): a crossNic=0 channel
    /// may come back on another host's NET of the same PCI slot and port.
    pub rail_per_host: bool,
    /// Before v2.28.7-1 the search is inter-node only where the host has NETs
    /// (`system->nodes[NET].count`, [`crate::version::Rules::system_inter_since`]): nodes
    /// without any are searched one by one as a single node.
    pub inter_needs_nets: bool,
}

/// `ncclTopoPrefNetsChannelFirst` (NCCL 2.28.9 src/graph/search.cc) for all GPUs: each GPU's
/// channel→NET sequence in turn, first appearance kept.
fn channel_first(per_gpu: &[Vec<usize>]) -> Vec<usize> {
    let mut out = vec![];
    for &n in per_gpu.iter().flatten() {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// `ncclTopoPrefNetsGpuFirst` (NCCL 2.28.9 src/graph/search.cc, used when `nHosts > 1`):
/// channel 0's NET of every GPU, then channel 1's, and so on, so that the channels of a
/// clique fused from several trays start on every tray's NICs rather than on the first
/// GPU's.
fn gpu_first(per_gpu: &[Vec<usize>]) -> Vec<usize> {
    let mut out = vec![];
    let longest = per_gpu.iter().map(Vec::len).max().unwrap_or(0);
    for c in 0..longest {
        for &n in per_gpu.iter().filter_map(|seq| seq.get(c)) {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

fn v(xs: &[f64]) -> Vec<f64> {
    xs.to_vec()
}

impl SearchParams {
    /// The reference's values for NCCL 2.`minor` (speed arrays of §5.2, budgets of §5.4).
    pub fn for_version(minor: u32) -> SearchParams {
        let sm80 = SpeedArrays {
            intra: v(&[
                40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
            ]),
            inter: v(&[
                48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
                2.4, 1.2, 0.24, 0.12,
            ]),
        };
        let sm90 = if minor <= 20 {
            // search.cc 2.18: no 50 / 11 (intra) and no 22 (inter).
            SpeedArrays {
                intra: v(&[60.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0]),
                inter: v(&[
                    48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
                    0.24, 0.12,
                ]),
            }
        } else {
            SpeedArrays {
                intra: v(&[
                    60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0,
                ]),
                inter: v(&[
                    48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
                    2.4, 1.2, 0.24, 0.12,
                ]),
            }
        };
        let sm100 = match minor {
            0..=24 => None,
            25 | 26 => Some(SpeedArrays {
                intra: v(&[90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0]),
                inter: sm90.inter.clone(),
            }),
            27..=29 => Some(SpeedArrays {
                intra: v(&[
                    90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0,
                ]),
                inter: v(&[
                    96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0,
                    3.0, 2.4, 1.2, 0.24, 0.12,
                ]),
            }),
            _ => Some(SpeedArrays {
                intra: v(&[
                    90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0,
                ]),
                inter: v(&[
                    96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0,
                    12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12,
                ]),
            }),
        };
        SearchParams {
            minor,
            max_channels: if minor >= 25 { 64 } else { 32 },
            speeds_sm80: sm80,
            speeds_sm90: sm90,
            speeds_sm100: sm100,
            cross_nic: 2,
            nvls_max_arity: if minor >= 21 { 32 } else { 8 },
            collnet_direct_max_arity: 7,
            collnet_enabled: false,
            nvls_enabled: true,
            global_timeout: if minor >= 21 { 1 << 19 } else { 5 << 16 },
            timeout: 1 << 14,
            timeout_same_channels: 1 << 8,
            timeout_pci_order: 1 << 10,
            gpu_first_nets: false,
            rail_per_host: false,
            inter_needs_nets: minor < 28,
        }
    }

    fn speeds(&self, cc_min: u32, inter: bool) -> Vec<f32> {
        let arr = if cc_min >= 100 {
            self.speeds_sm100.as_ref().unwrap_or(&self.speeds_sm90)
        } else if cc_min >= 90 {
            &self.speeds_sm90
        } else {
            &self.speeds_sm80
        };
        let s = if inter { &arr.inter } else { &arr.intra };
        let out: Vec<f32> = s.iter().map(|&x| x as f32).collect();
        if out.is_empty() { vec![0.12] } else { out }
    }

    fn path_policy(&self) -> PathPolicy {
        PathPolicy {
            minor: self.minor,
            max_channels: self.max_channels,
            ..Default::default()
        }
    }
}

/// The graphs NCCL computes at init (§5.1), for host 0 (every host of a replicated topology
/// uses the same ones).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Graphs {
    pub ring: Graph,
    pub tree: Graph,
    /// Computed when CollNet is enabled.
    pub collnet_chain: Option<Graph>,
    pub collnet_direct: Option<Graph>,
    /// Computed when NVLS is enabled (empty when the search does not apply).
    pub nvls: Option<Graph>,
    /// `=== System : maxBw … totalBw … ===` inputs of the search.
    pub max_bw: f64,
    pub total_bw: f64,
    /// Whether the search ran in its inter-node form (more than one host).
    pub inter: bool,
    /// Patterns whose search found nothing and fell back to one channel in index order.
    pub fallbacks: Vec<Pattern>,
    /// Search steps over all graphs (`ncclTopoSearchRecGpu` calls within the time budget):
    /// what the search cost, independent of the machine running it.
    #[serde(skip)]
    pub search_steps: u64,
    /// Per host, that host's own ring and tree orders where it searched on its own (a host
    /// NCCL splits into nodes: each node's ranks search their own domain); `None` (or
    /// missing) where host 0's orders are mapped onto it.
    #[serde(skip)]
    pub node_orders: Vec<Option<NodeOrders>>,
    /// The largest tree pattern over the nodes' own searches (`comm->maxTreePattern`, the
    /// AllGather3 maximum of v2.26+ src/init.cc): a split host's other node can search a
    /// TREE where rank 0's is balanced, and the tuning reads this one.
    #[serde(skip)]
    pub max_tree_pattern: u32,
}

/// One node's own ring and tree channel orders (ranks), from its own search, and its own
/// tree pattern: `ncclTopoPreset` picks a rank's tree children by its own graph's pattern
/// (NCCL 2.28.9 src/graph/connect.cc), which differs between hosts of different sm.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeOrders {
    pub ring: Vec<Vec<usize>>,
    pub tree: Vec<Vec<usize>>,
    pub tree_pattern: Option<Pattern>,
    /// The node's own ring `crossNic`: `ncclTopoPostset` alternates an odd node's rings by
    /// it, not by the AllGather3 maximum (`allTopoRanks[r]->crossNicRing`, NCCL 2.28.9
    /// src/graph/connect.cc).
    pub ring_cross_nic: u8,
}

impl Graphs {
    /// `=== System : maxBw %2.1f totalBw %2.1f ===` (the header of the system print).
    pub fn system_line(&self) -> String {
        format!(
            "=== System : maxBw {:.1} totalBw {:.1} ===",
            self.max_bw, self.total_bw
        )
    }

    /// The fallback lines NCCL logs (INFO in 2.30, WARN before).
    pub fn fallback_lines(&self) -> Vec<String> {
        self.fallbacks
            .iter()
            .map(|p| {
                format!(
                    "Could not find a path for pattern {}, falling back to simple order",
                    p.number()
                )
            })
            .collect()
    }

    /// The graphs in NCCL's print order: ring, tree, CollNet chain, CollNet direct, NVLS.
    pub fn iter(&self) -> impl Iterator<Item = &Graph> {
        [Some(&self.ring), Some(&self.tree)]
            .into_iter()
            .chain([
                self.collnet_chain.as_ref(),
                self.collnet_direct.as_ref(),
                self.nvls.as_ref(),
            ])
            .flatten()
    }
}

/// Computes every graph in NCCL's order: ring, tree (channels pinned to the ring's),
/// CollNet chain and direct, NVLS (`initTransportsRank`, init.cc).
pub fn compute_all(sys: &System, paths: &Paths, params: &SearchParams) -> Graphs {
    compute_all_on(sys, paths, params, 0)
}

/// [`compute_all`] as the ranks of `host` run it: the search over that host's GPUs.
pub fn compute_all_on(sys: &System, paths: &Paths, params: &SearchParams, host: HostId) -> Graphs {
    let ctx = Ctx::new(sys, paths, params, host);
    let mut fallbacks = vec![];
    let (ring, fb) = ctx.compute_full(params, GraphId::Ring, 1, params.max_channels / 2);
    if fb {
        fallbacks.push(ring.pattern);
    }
    let rc = ring.n_channels;
    let (tree, fb) = ctx.compute_full(params, GraphId::Tree, rc, rc);
    if fb {
        fallbacks.push(tree.pattern);
    }
    let (collnet_chain, collnet_direct) = if params.collnet_enabled {
        (
            Some(ctx.compute(params, GraphId::CollnetChain, rc, rc)),
            Some(ctx.compute(params, GraphId::CollnetDirect, 1, params.max_channels)),
        )
    } else {
        (None, None)
    };
    let nvls = params
        .nvls_enabled
        .then(|| ctx.compute(params, GraphId::Nvls, 1, params.max_channels));
    let max_tree_pattern = tree.pattern.number();
    Graphs {
        ring,
        tree,
        collnet_chain,
        collnet_direct,
        nvls,
        max_bw: ctx.max_bw as f64,
        total_bw: ctx.total_bw as f64,
        inter: ctx.inter,
        fallbacks,
        search_steps: ctx.steps.get(),
        node_orders: vec![],
        max_tree_pattern,
    }
}

/// The AllGather3 reduction of the graphs (NCCL 2.28.9 src/init.cc, after
/// `ncclTopoPreset`): every rank takes the minimum channel count, `sameChannels` and
/// bandwidths and the maximum path types and `crossNic` over all ranks' graphs. `nodes`
/// are the other nodes' own searches; a graph a node did not search (NVLS without support
/// there, CollNet) counts as an empty one, as NCCL's zeroed `ncclTopoGraph`.
pub fn all_gather3<'a>(own: &Graphs, nodes: impl IntoIterator<Item = &'a Graphs>) -> Graphs {
    let mut out = own.clone();
    for n in nodes {
        out.max_tree_pattern = out.max_tree_pattern.max(n.tree.pattern.number());
        reduce(&mut out.ring, Some(&n.ring));
        reduce(&mut out.tree, Some(&n.tree));
        for (g, o) in [
            (&mut out.nvls, &n.nvls),
            (&mut out.collnet_chain, &n.collnet_chain),
            (&mut out.collnet_direct, &n.collnet_direct),
        ] {
            if let Some(g) = g.as_mut() {
                reduce(g, o.as_ref());
            }
        }
    }
    out
}

fn reduce(g: &mut Graph, o: Option<&Graph>) {
    let Some(o) = o else {
        g.n_channels = 0;
        g.same_channels = false;
        g.bw_intra = 0.0;
        g.bw_inter = 0.0;
        return;
    };
    g.n_channels = g.n_channels.min(o.n_channels);
    g.same_channels &= o.same_channels;
    g.bw_intra = g.bw_intra.min(o.bw_intra);
    g.bw_inter = g.bw_inter.min(o.bw_inter);
    g.type_intra = g.type_intra.max(o.type_intra);
    g.type_inter = g.type_inter.max(o.type_inter);
    g.cross_nic = g.cross_nic.max(o.cross_nic);
}

/// Computes one graph with NCCL's default channel bounds for `id` (§5.1); the tree and
/// CollNet chain bounds come from `ring_channels`.
pub fn compute_graph(
    sys: &System,
    paths: &Paths,
    params: &SearchParams,
    id: GraphId,
    ring_channels: usize,
) -> Graph {
    let ctx = Ctx::new(sys, paths, params, 0);
    let (min, max) = match id {
        GraphId::Ring => (1, params.max_channels / 2),
        GraphId::Tree | GraphId::CollnetChain => (ring_channels, ring_channels),
        GraphId::Nvls | GraphId::CollnetDirect => (1, params.max_channels),
    };
    ctx.compute(params, id, min, max)
}

/// The graph print (INFO GRAPH, §5.6): header then one line per channel, with the node names
/// of release `v` (src/graph/search.cc `ncclTopoPrintGraph`): GPUs by rank up to v2.27.3-1,
/// by system and bus id (`GPU/0-1b000`) from v2.27.5-1; NETs by decimal id up to 2.20, by the
/// hex id with its system id in the top byte in 2.21 and 2.22, as `NET/0-1` from 2.23.
/// From v2.28.7-1 the NET ends are printed whenever the communicator spans hosts (`inter`),
/// also for a channel without a NIC (a host with none): its zeroed slot reads `NET/0-0`.
///
/// `rank_name` gives a rank's number in the communicator: NCCL keeps the launcher's ranks on a
/// host it splits into nodes, where the analysis numbers them part by part
/// (`Analysis::launcher_rank`).
pub fn print_graph(
    g: &Graph,
    sys: &System,
    v: &NcclVersion,
    inter: bool,
    rank_name: &dyn Fn(usize) -> usize,
) -> Vec<String> {
    let mut out = vec![format!(
        "Pattern {}, crossNic {}, nChannels {}, bw {:.6}/{:.6}, type {}/{}, sameChannels {}",
        g.pattern.number(),
        g.cross_nic,
        g.n_channels,
        g.bw_intra,
        g.bw_inter,
        g.type_intra.name(),
        g.type_inter.name(),
        u8::from(g.same_channels)
    )];
    let gpu_ids = v.includes("2.27.5");
    let label = |node: usize| -> String {
        let n = &sys.nodes[node];
        match n.kind {
            NodeType::Gpu if !gpu_ids => {
                format!("GPU/{}", n.gpu.as_ref().map_or(0, |a| rank_name(a.rank)))
            }
            _ => node_label(sys, v, node),
        }
    };
    let ends = NetEnds::new(g, sys, v, inter);
    let end = |line: &mut String, net: Option<usize>| {
        if let Some(l) = ends.label(net) {
            line.push(' ');
            line.push_str(&l);
        }
    };
    for c in 0..g.n_channels {
        let mut line = format!("{c:2} :");
        let inter = g.inter.get(c);
        end(&mut line, inter.map(|e| e.0));
        if let Some(order) = g.intra.get(c) {
            for &r in order {
                if let Some(&gn) = sys.gpus.get(r) {
                    line.push(' ');
                    line.push_str(&label(gn));
                }
                if g.id == GraphId::Nvls {
                    break;
                }
            }
            // An NVLS channel holds its head only; up to v2.27.3-1 the print went on over the
            // rest of the channel's (zeroed) GPU slots, rank 0 each.
            if g.id == GraphId::Nvls && !gpu_ids {
                let head_host = order.first().map(|&r| sys.gpu(r).host).unwrap_or(0);
                let ngpus = sys.host_gpus(head_host).len();
                line.push_str(&" GPU/0".repeat(ngpus.saturating_sub(1)));
            }
        }
        end(&mut line, inter.map(|e| e.1));
        out.push(line);
    }
    out
}

/// A node as NCCL's graph print names it, GPUs by their node label (a NET's name changed
/// with the version: its index to 2.20, the host-tagged hex id in 2.21 and 2.22, then the
/// node's label).
fn node_label(sys: &System, v: &NcclVersion, node: usize) -> String {
    let n = &sys.nodes[node];
    match n.kind {
        NodeType::Net if v.minor <= 20 => format!("NET/{}", n.id),
        NodeType::Net if v.minor <= 22 => {
            let local = n.id & ((1 << 56) - 1);
            format!(
                "NET/{:x}",
                ((u64::from(n.host) + (n.id >> 56)) << 56) | local
            )
        }
        _ => n.label(),
    }
}

/// The NETs a graph's channels enter and leave by, named as [`print_graph`] prints them.
struct NetEnds<'a> {
    sys: &'a System,
    v: &'a NcclVersion,
    /// From 2.28.7 an inter-node graph's channel without a NET of its own prints its zeroed
    /// slot, `NET/0-0`.
    zeroed_ends: bool,
    /// The host of the graph's first GPU: a rank's system holds its own host's NICs only.
    host: Option<HostId>,
}

impl<'a> NetEnds<'a> {
    fn new(g: &Graph, sys: &'a System, v: &'a NcclVersion, inter: bool) -> NetEnds<'a> {
        let host = g
            .intra
            .first()
            .and_then(|o| o.first())
            .and_then(|&r| sys.gpus.get(r))
            .map(|&gn| sys.nodes[gn].host);
        NetEnds {
            sys,
            v,
            zeroed_ends: inter && v.includes("2.28.7"),
            host,
        }
    }

    /// The printed name of the NET at index `net` of `System::nets`, where the print has one.
    fn label(&self, net: Option<usize>) -> Option<String> {
        let own = |n: &usize| self.host.is_none_or(|h| self.sys.nodes[*n].host == h);
        match net.and_then(|x| self.sys.nets.get(x)).filter(|n| own(n)) {
            Some(&n) => Some(node_label(self.sys, self.v, n)),
            None if self.zeroed_ends => Some("NET/0-0".into()),
            None => None,
        }
    }
}

/// Per channel of `g`, the first and last NET its print names (one NET printed: both ends),
/// `None` for a channel whose print names none; what the what-if compares.
pub fn graph_net_ends(
    g: &Graph,
    sys: &System,
    v: &NcclVersion,
    inter: bool,
) -> Vec<Option<(String, String)>> {
    let ends = NetEnds::new(g, sys, v, inter);
    (0..g.n_channels)
        .map(|c| {
            let e = g.inter.get(c);
            let first = ends.label(e.map(|e| e.0));
            let last = ends.label(e.map(|e| e.1));
            match (first, last) {
                (Some(a), Some(b)) => Some((a, b)),
                (Some(a), None) | (None, Some(a)) => Some((a.clone(), a)),
                (None, None) => None,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Search context: host 0's GPUs and NETs, paths as link lists, mutable link bandwidths.

#[derive(Clone, Debug)]
struct Hop {
    link: usize,
    rev: Option<usize>,
    pci: bool,
    /// Entering a GPU with compute capability < 80 (reverse charge of bw/8 from non-GPUs).
    to_old_gpu: bool,
    /// NVLink into a POWER CPU (full reverse charge).
    to_power_nvl: bool,
}

#[derive(Clone, Debug)]
struct SPath {
    ty: PathType,
    bw: f32,
    hops: Vec<Hop>,
    /// NCCL's `path->count`, what the search adds to `nHops`: the hops, plus from 2.30 the
    /// links to and from DEV nodes (see [`dev_links`]).
    count: usize,
    /// PHB path crossing an Intel x86 CPU: PCI links are charged 6/5 when it starts at a GPU.
    intel_phb: bool,
    /// Neither a PCI surcharge nor a reverse charge on any hop: the search's common case,
    /// charged by a shorter loop.
    plain: bool,
}

/// The local id of the NIC a NET port belongs to (its PCI bus id when the NIC has one); the
/// port's GUID when no NIC is linked, as NCCL falls back to the GUID without a PCI parent.
fn nic_slot(sys: &System, net: usize) -> u64 {
    let n = &sys.nodes[net];
    n.links
        .iter()
        .find(|l| sys.nodes[l.to].kind == NodeType::Nic)
        .map(|l| sys.nodes[l.to].id & ((1 << 56) - 1))
        .or_else(|| n.net.as_ref().map(|x| x.guid))
        .unwrap_or(n.id)
}

#[derive(Clone, Debug)]
struct NetInfo {
    /// Index into `System::nets`.
    sys_idx: usize,
    bw: f32,
    asic: u64,
    port: u32,
    /// The host's system id in a fused MNNVL system (`NCCL_TOPO_ID_SYSTEM_ID`).
    sysid: u64,
    /// `NCCL_TOPO_ID_LOCAL_ID` of the NET's id: its device number.
    local_id: u64,
    /// Which PCI slot the port sits in: `net.pciId`, NCCL's hash of the NIC's bus id
    /// (`ncclTopoAddNet`, v2.28.9-1 src/graph/topo.cc); the NIC node's id here.
    pci: u64,
    latency: f64,
    coll: bool,
    /// Local GPU index that owns this NET (`net.localGpu`).
    local_gpu: Option<usize>,
    /// GPUs with the best path from this NET (`ncclTopoGetLocal(NET, n, GPU)`), and whether
    /// that path exists at all.
    local_gpus: Vec<usize>,
}

/// Link ids flattened over the whole system, and the search's view of a path over them.
struct Links<'a> {
    sys: &'a System,
    paths: &'a Paths,
    /// First link id of each node.
    offset: Vec<usize>,
    bw: Vec<f32>,
    /// A hop takes the first link of the kind the path search came over (2.19+); 2.18 took
    /// the first link to the next node whatever its kind (`ncclTopoSetPaths`, NVIDIA/nccl
    /// v2.18.6-1 and v2.19.4-1 src/graph/paths.cc).
    typed_hops: bool,
    /// 2.30+: paths count the GPU-DEV links ([`dev_links`]).
    dev_layer: bool,
}

/// The links 2.30's DEV layer adds to a path's hop count (v2.30.7-1 src/graph/topo.cc links
/// each GPU to its DEV node with a LOC link, and src/graph/paths.cc `ncclTopoSetPaths` routes
/// GPU paths through it): one for a GPU at either end, and two more for a PXN path, which
/// `addInterStep` joins at the relay GPU itself (GPU -> relay GPU, then relay GPU -> NET).
/// An NVB path crosses the relay's DEV node, not its GPU, and adds nothing more.
fn dev_links(from_gpu: bool, to_gpu: bool, ty: PathType) -> usize {
    usize::from(from_gpu) + usize::from(to_gpu) + if ty == PathType::Pxn { 2 } else { 0 }
}

impl<'a> Links<'a> {
    fn new(sys: &'a System, paths: &'a Paths, minor: u32) -> Links<'a> {
        let mut offset = Vec::with_capacity(sys.nodes.len());
        let mut bw = Vec::new();
        for n in &sys.nodes {
            offset.push(bw.len());
            bw.extend(n.links.iter().map(|l| l.bw as f32));
        }
        Links {
            sys,
            paths,
            offset,
            bw,
            typed_hops: minor >= 19,
            dev_layer: minor >= 30,
        }
    }

    /// The path from `from` to `to` as hops over link ids with the charges search.cc applies
    /// along it; None where NCCL has no usable path.
    fn path(&self, from: usize, to: usize) -> Option<SPath> {
        let p = self.paths.get(from, to)?;
        if p.ty >= PathType::Dis && from != to {
            return None;
        }
        let route = self.paths.route(from, to)?;
        let kinds = self.paths.link_kinds(from, to)?;
        let mut hops = Vec::with_capacity(route.len().saturating_sub(1));
        let mut intel = false;
        for ((a, b), &kind) in route.clone().zip(route.skip(1)).zip(kinds) {
            let (hop, via_intel) = self.hop(a, b, kind)?;
            intel |= via_intel;
            hops.push(hop);
        }
        let intel_phb = intel && p.ty == PathType::Phb;
        let is_gpu = |n: usize| self.sys.nodes[n].kind == NodeType::Gpu;
        let count = hops.len()
            + if self.dev_layer && from != to {
                dev_links(is_gpu(from), is_gpu(to), p.ty)
            } else {
                0
            };
        Some(SPath {
            ty: p.ty,
            bw: p.bw as f32,
            count,
            plain: !intel_phb && hops.iter().all(|h| !h.to_old_gpu && !h.to_power_nvl),
            hops,
            intel_phb,
        })
    }

    /// The hop from `a` to `b` over the first link of `kind` (of any kind before 2.19) with a
    /// matching reverse: the link NCCL's path holds, a GPU's C2C link to its CPU rather than
    /// its PCI one on a C2C path. Also whether it enters an Intel x86 CPU.
    fn hop(&self, a: usize, b: usize, kind: LinkType) -> Option<(Hop, bool)> {
        let sys = self.sys;
        let li = sys.nodes[a].links.iter().position(|l| {
            l.to == b
                && (l.kind == kind || !self.typed_hops)
                && sys.nodes[b]
                    .links
                    .iter()
                    .any(|r| r.to == a && r.kind == l.kind)
        })?;
        let l = &sys.nodes[a].links[li];
        let rev = sys.nodes[b]
            .links
            .iter()
            .position(|r| r.to == a && r.kind == l.kind)
            .map(|ri| self.offset[b] + ri);
        let bn = &sys.nodes[b];
        let to_old_gpu =
            bn.kind == NodeType::Gpu && bn.gpu.as_ref().map(|x| x.sm).unwrap_or(0) < 80;
        let cpu = bn.cpu.as_ref();
        let to_power_nvl = bn.kind == NodeType::Cpu
            && cpu.is_some_and(|c| c.arch == CpuArch::Power)
            && l.kind == LinkType::Nvl;
        let intel = bn.kind == NodeType::Cpu
            && cpu.is_some_and(|c| c.arch == CpuArch::X86 && c.vendor == CpuVendor::Intel);
        let hop = Hop {
            link: self.offset[a] + li,
            rev,
            pci: l.kind == LinkType::Pci,
            to_old_gpu,
            to_power_nvl,
        };
        Some((hop, intel))
    }

    /// A GPU's PCI up-link and the matching down-link.
    fn gpu_pci(&self, g: usize) -> Option<(usize, usize)> {
        let sys = self.sys;
        sys.nodes[g]
            .links
            .iter()
            .enumerate()
            .filter(|(_, l)| l.kind == LinkType::Pci)
            .find_map(|(li, l)| {
                let back = sys.nodes[l.to].links.iter().position(|b| b.to == g)?;
                Some((self.offset[g] + li, self.offset[l.to] + back))
            })
    }
}

/// The host's NET ports as the search sees them (`nets_used`: indices into `System::nets`).
fn net_infos(
    sys: &System,
    paths: &Paths,
    nets_used: &[usize],
    ranks: &[usize],
    gnodes: &[usize],
) -> Vec<NetInfo> {
    let local_of_rank = |r: usize| ranks.iter().position(|&x| x == r);
    nets_used
        .iter()
        .map(|&ni| {
            let node = sys.nets[ni];
            let a = sys.nodes[node].net.as_ref();
            NetInfo {
                sys_idx: ni,
                bw: a.map(|x| x.bw as f32).unwrap_or(0.0),
                asic: a.map(|x| x.guid).unwrap_or(ni as u64),
                port: a.map(|x| x.port).unwrap_or(0),
                sysid: sys.nodes[node].id >> 56,
                local_id: sys.nodes[node].id & ((1 << 56) - 1),
                pci: nic_slot(sys, node),
                latency: a.map(|x| x.latency).unwrap_or(0.0),
                coll: a.is_some_and(|x| x.coll),
                local_gpu: paths
                    .net_local_gpu
                    .get(ni)
                    .copied()
                    .flatten()
                    .and_then(local_of_rank),
                local_gpus: paths::local_nodes(sys, paths, node, NodeType::Gpu)
                    .into_iter()
                    .filter_map(|g| gnodes.iter().position(|&x| x == g))
                    .collect(),
            }
        })
        .collect()
}

/// `ncclTopoPrefNetsChannelFirst` (2.28): per GPU the channel→NET sequence until it repeats.
fn preferred_nets(
    sys: &System,
    paths: &Paths,
    params: &SearchParams,
    ranks: &[usize],
    nets: &[NetInfo],
) -> Vec<Vec<usize>> {
    let policy = params.path_policy();
    let net_local = |sys_idx: usize| nets.iter().position(|n| n.sys_idx == sys_idx);
    ranks
        .iter()
        .map(|&r| {
            let mut seq: Vec<usize> = vec![];
            for c in 0..params.max_channels.max(1) {
                let Some(n) = paths::local_net(sys, paths, &policy, r, c).and_then(net_local)
                else {
                    break;
                };
                if !seq.is_empty() && seq[0] == n {
                    break;
                }
                seq.push(n);
            }
            seq
        })
        .collect()
}

#[derive(Clone, Debug)]
struct Ctx {
    inter: bool,
    ngpus: usize,
    /// Global ranks of host 0's GPUs, in NCCL's GPU index order.
    ranks: Vec<usize>,
    cc_min: u32,
    nets: Vec<NetInfo>,
    /// Total NETs of host 0 (crossNic needs more than one).
    nets_in_system: usize,
    has_nvs: bool,
    link_bw: Vec<f32>,
    /// `gg[i]` exists and has at least one hop (a next-GPU candidate).
    gg_linked: Vec<bool>,
    gg: Vec<Option<SPath>>,
    gn: Vec<Option<SPath>>,
    ng: Vec<Option<SPath>>,
    g_nvs: Vec<Option<SPath>>,
    nvs_g: Vec<Option<SPath>>,
    /// Per GPU, its PCI up-link and the matching down-link (link ids).
    gpu_pci_links: Vec<Option<(usize, usize)>>,
    /// Per GPU: preferred NETs ("channel first", §4.9), for the return-to-NET step.
    pref_nets: Vec<Vec<usize>>,
    /// Preferred NETs of all GPUs, for the channel start.
    pref_nets_all: Vec<usize>,
    amd_cpu: bool,
    max_bw: f32,
    total_bw: f32,
    min_type_intra: PathType,
    max_type_intra: PathType,
    min_type_inter: PathType,
    max_type_inter: PathType,
    split_nvlink: bool,
    /// Search steps of every graph computed from this context (cost of the search).
    steps: std::cell::Cell<u64>,
}

const LOC_BW: f32 = 5000.0;

/// `getTotalBw`: the larger of a GPU's PCI up-link and its summed NVLink bandwidth.
fn gpu_total_bw(sys: &System, gnode: usize) -> f32 {
    let mut nvl = 0.0f32;
    let mut pci = 0.0f32;
    for l in &sys.nodes[gnode].links {
        match l.kind {
            LinkType::Nvl => nvl += l.bw as f32,
            LinkType::Pci => pci = l.bw as f32,
            _ => {}
        }
    }
    pci.max(nvl)
}

impl Ctx {
    fn new(sys: &System, paths: &Paths, params: &SearchParams, host: HostId) -> Ctx {
        let has_nets = || sys.nets.iter().any(|&n| sys.nodes[n].host == host);
        let inter = sys.nhosts > 1 && (!params.inter_needs_nets || has_nets());
        // NCCL's GPU index order, which is what the search iterates over (not rank order).
        let ranks: Vec<usize> = sys.host_gpus_indexed(host);
        let ngpus = ranks.len();
        let gnodes: Vec<usize> = ranks.iter().map(|&r| sys.gpus[r]).collect();
        let cc: Vec<u32> = gnodes
            .iter()
            .map(|&g| sys.nodes[g].gpu.as_ref().map(|a| a.sm).unwrap_or(0))
            .collect();
        let cc_min = cc.iter().copied().min().unwrap_or(0);

        let links = Links::new(sys, paths, params.minor);
        let make = |from: usize, to: usize| links.path(from, to);

        let mut gg = Vec::with_capacity(ngpus * ngpus);
        for &a in &gnodes {
            for &b in &gnodes {
                gg.push(make(a, b));
            }
        }
        let net_idx: Vec<usize> = (0..sys.nets.len())
            .filter(|&i| sys.nodes[sys.nets[i]].host == host)
            .collect();
        let nets_in_system = net_idx.len();
        let nets_used: Vec<usize> = if inter { net_idx } else { vec![] };
        let mut gn = Vec::with_capacity(ngpus * nets_used.len());
        for &a in &gnodes {
            for &ni in &nets_used {
                gn.push(make(a, sys.nets[ni]));
            }
        }
        let mut ng = Vec::with_capacity(ngpus * nets_used.len());
        for &ni in &nets_used {
            for &b in &gnodes {
                ng.push(make(sys.nets[ni], b));
            }
        }
        let nvs = sys.nvs.iter().copied().find(|&n| sys.nodes[n].host == host);
        let g_nvs: Vec<Option<SPath>> = gnodes
            .iter()
            .map(|&g| nvs.and_then(|s| make(g, s)))
            .collect();
        let nvs_g: Vec<Option<SPath>> = gnodes
            .iter()
            .map(|&g| nvs.and_then(|s| make(s, g)))
            .collect();
        let nets = net_infos(sys, paths, &nets_used, &ranks, &gnodes);
        let ends: Vec<usize> = if inter {
            nets_used.iter().map(|&ni| sys.nets[ni]).collect()
        } else {
            gnodes.clone()
        };
        let pref_nets = if inter {
            preferred_nets(sys, paths, params, &ranks, &nets)
        } else {
            vec![vec![]; ngpus]
        };
        let pref_nets_all = if params.gpu_first_nets {
            gpu_first(&pref_nets)
        } else {
            channel_first(&pref_nets)
        };
        let gpu_pci_links = gnodes.iter().map(|&g| links.gpu_pci(g)).collect();
        let amd_cpu = sys
            .host_cpu(host)
            .is_some_and(|c| c.arch == CpuArch::X86 && c.vendor == CpuVendor::Amd);

        let mut ctx = Ctx {
            inter,
            ngpus,
            ranks,
            cc_min,
            nets,
            nets_in_system,
            has_nvs: nvs.is_some(),
            link_bw: links.bw,
            gg_linked: gg
                .iter()
                .map(|p| p.as_ref().is_some_and(|p| !p.hops.is_empty()))
                .collect(),
            gg,
            gn,
            ng,
            g_nvs,
            nvs_g,
            gpu_pci_links,
            pref_nets,
            pref_nets_all,
            amd_cpu,
            max_bw: 0.0,
            total_bw: 0.0,
            min_type_intra: PathType::Loc,
            max_type_intra: PathType::Sys,
            min_type_inter: PathType::Pix,
            max_type_inter: PathType::Sys,
            split_nvlink: false,
            steps: std::cell::Cell::new(0),
        };
        ctx.init_bw(sys, paths, params.minor, &gnodes, &ends);
        ctx.init_types(params);
        ctx.split_nvlink = ctx.compute_split_nvlink();
        ctx
    }

    fn gg(&self, a: usize, b: usize) -> Option<&SPath> {
        self.gg.get(a * self.ngpus + b).and_then(|p| p.as_ref())
    }
    fn gn(&self, g: usize, n: usize) -> Option<&SPath> {
        self.gn
            .get(g * self.nets.len() + n)
            .and_then(|p| p.as_ref())
    }
    fn ng(&self, n: usize, g: usize) -> Option<&SPath> {
        self.ng.get(n * self.ngpus + g).and_then(|p| p.as_ref())
    }

    /// `ncclTopoSearchInit`: maxBw (best path to a NET, or to another GPU) and totalBw (max of
    /// the PCI up-link and the summed NVLink bandwidth of a GPU). `ends`: the system nodes of
    /// the host's NETs (`gn` columns) when the search spans nodes, else of its GPUs (`gg`).
    fn init_bw(
        &mut self,
        sys: &System,
        paths: &Paths,
        minor: u32,
        gnodes: &[usize],
        ends: &[usize],
    ) {
        if !self.inter && self.ngpus == 1 {
            self.max_bw = LOC_BW;
            self.total_bw = LOC_BW;
            return;
        }
        let mut max_bw = 0.0f32;
        let mut total = 0.0f32;
        for (g, &gnode) in gnodes.iter().enumerate() {
            max_bw = max_bw.max(self.max_path_bw(paths, minor, g, gnode, ends));
            total = total.max(gpu_total_bw(sys, gnode));
        }
        self.max_bw = max_bw;
        self.total_bw = total;
    }

    /// `getMaxBw` for GPU `g`: its best path to one of `ends`. From 2.30 NCCL asks the GPU's
    /// DEV node (v2.30.7-1 src/graph/search.cc `ncclTopoSearchInit` loops over
    /// `nodes[DEV]`, reading `paths[DEV]` or `paths[NET]`), whose paths
    /// `ncclTopoComputePaths` never reroutes: the no-P2P detour through the CPU, PXN and the
    /// no-GDR detour rewrite GPU paths only (v2.30.7-1 src/graph/paths.cc). So 2.30 takes
    /// the breadth-first search's bandwidth; with NCCL_P2P_DISABLE=1 the NVLink one.
    fn max_path_bw(
        &self,
        paths: &Paths,
        minor: u32,
        g: usize,
        gnode: usize,
        ends: &[usize],
    ) -> f32 {
        let mut best = 0.0f32;
        for (i, &end) in ends.iter().enumerate() {
            let p = if self.inter {
                self.gn(g, i)
            } else {
                self.gg(g, i)
            };
            let Some(p) = p.filter(|p| !p.hops.is_empty()) else {
                continue;
            };
            let bw = if minor >= 30 {
                paths.raw_bw(gnode, end) as f32
            } else {
                p.bw
            };
            best = best.max(bw);
        }
        best
    }

    /// Type bounds of §5.2, per version.
    fn init_types(&mut self, params: &SearchParams) {
        let minor = params.minor;
        if minor <= 24 {
            // 2.18–2.24: intra from NVL (LOC for one GPU), inter from PIX, both up to SYS;
            // the intra bound is the current typeInter when NETs exist.
            self.min_type_intra = if self.ngpus == 1 {
                PathType::Loc
            } else {
                PathType::Nvl
            };
            self.max_type_intra = PathType::Sys;
            self.min_type_inter = PathType::Pix;
            self.max_type_inter = PathType::Sys;
            return;
        }
        // ncclTopoGetGpuMinPath / MaxPath (paths.cc 2.25+).
        let (mut lo, mut hi) = (PathType::Sys, PathType::Loc);
        let mut any = false;
        for a in 0..self.ngpus {
            for b in 0..self.ngpus {
                if a == b {
                    continue;
                }
                let t = self.gg(a, b).map(|p| p.ty).unwrap_or(PathType::Dis);
                lo = lo.min(t);
                hi = hi.max(t);
                any = true;
            }
        }
        if any {
            self.min_type_intra = lo;
            self.max_type_intra = hi;
        } else {
            self.min_type_intra = PathType::Loc;
            self.max_type_intra = PathType::Sys;
        }
        if self.inter {
            let (mut lo, mut hi) = (PathType::Sys, PathType::Loc);
            for g in 0..self.ngpus {
                for n in 0..self.nets.len() {
                    let t = self.gn(g, n).map(|p| p.ty).unwrap_or(PathType::Dis);
                    lo = lo.min(t);
                    hi = hi.max(t);
                }
            }
            self.min_type_inter = lo;
            self.max_type_inter = hi;
            // 2.29+: Ampere balanced trees may need to come back through PHB/SYS.
            if minor >= 29 && self.cc_min < 90 {
                self.max_type_inter = PathType::Sys;
            }
            self.max_type_intra = self.max_type_inter;
        }
    }

    /// `ncclTopoSplitNvLink`: exactly two NVLink domains of more than one GPU.
    fn compute_split_nvlink(&self) -> bool {
        let n = self.ngpus;
        let mut dom: Vec<usize> = (0..n).collect();
        for g in 0..n {
            let d = dom[g];
            for (p, slot) in dom.iter_mut().enumerate().skip(g + 1) {
                if self.gg(g, p).is_some_and(|x| x.ty == PathType::Nvl) {
                    *slot = d;
                }
            }
        }
        let mut count = vec![0usize; n];
        for &d in &dom {
            count[d] += 1;
        }
        count.iter().filter(|&&c| c > 1).count() == 2
    }

    fn compute(&self, params: &SearchParams, id: GraphId, min_ch: usize, max_ch: usize) -> Graph {
        self.compute_full(params, id, min_ch, max_ch).0
    }

    fn compute_full(
        &self,
        params: &SearchParams,
        id: GraphId,
        min_ch: usize,
        max_ch: usize,
    ) -> (Graph, bool) {
        let pattern = match id {
            GraphId::Ring => Pattern::Ring,
            GraphId::Tree => Pattern::BalancedTree,
            GraphId::CollnetChain => Pattern::Tree,
            GraphId::Nvls => Pattern::Nvls,
            GraphId::CollnetDirect => Pattern::CollnetDirect,
        };
        let collnet = matches!(id, GraphId::CollnetChain | GraphId::CollnetDirect);
        let mut s = Search {
            ctx: self.clone(),
            link_bw: self.link_bw.clone(),
            params,
            tmp: GState::new(self.ngpus, params.max_channels.max(max_ch)),
            save: GState::new(self.ngpus, 0),
            steps: 0,
            net_order: vec![None; (self.ngpus + 1) * PathType::ALL.len()],
        };
        let st = s.run(pattern, collnet, min_ch, max_ch);
        self.steps.set(self.steps.get() + s.steps);
        (st.to_graph(id, &s.ctx), st.fallback)
    }
}

// ---------------------------------------------------------------------------------------
// Graph under construction (`ncclTopoGraph`).

/// What `run` carries between the tries of its search loop.
struct Tries {
    speeds: Vec<f32>,
    /// The speed being tried, an index into `speeds`.
    si: usize,
    /// What is left of the global search budget.
    global: i64,
    pass: u8,
    retry_cross: u8,
    /// Channel capacity of the working graph.
    cap: usize,
}

#[derive(Clone, Debug)]
struct GState {
    pattern: Pattern,
    cross_nic: u8,
    collnet: bool,
    n_channels: usize,
    min_channels: usize,
    max_channels: usize,
    bw_intra: f32,
    bw_inter: f32,
    latency_inter: f64,
    type_intra: PathType,
    type_inter: PathType,
    same_channels: bool,
    n_hops: i32,
    /// `intra[c * ngpus + step]` = local GPU index.
    intra: Vec<usize>,
    /// `inter[c * 2 + {0,1}]` = local NET index.
    inter: Vec<usize>,
    /// Per GPU, bit c set while the GPU is used in channel c.
    used: Vec<u64>,
    /// Nothing was found: the "simple order" fallback.
    fallback: bool,
}

impl GState {
    fn new(ngpus: usize, cap: usize) -> GState {
        GState {
            pattern: Pattern::Ring,
            cross_nic: 0,
            collnet: false,
            n_channels: 0,
            min_channels: 0,
            max_channels: 0,
            bw_intra: 0.0,
            bw_inter: 0.0,
            latency_inter: 0.0,
            type_intra: PathType::Loc,
            type_inter: PathType::Pix,
            same_channels: true,
            n_hops: 0,
            intra: vec![0; cap.max(1) * ngpus.max(1)],
            inter: vec![0; cap.max(1) * 2],
            used: vec![0; ngpus],
            fallback: false,
        }
    }

    fn to_graph(&self, id: GraphId, ctx: &Ctx) -> Graph {
        let ng = ctx.ngpus;
        let nch = self.n_channels;
        Graph {
            id,
            pattern: self.pattern,
            cross_nic: self.cross_nic,
            n_channels: nch,
            bw_intra: self.bw_intra as f64,
            bw_inter: self.bw_inter as f64,
            latency_inter: self.latency_inter,
            type_intra: self.type_intra,
            type_inter: self.type_inter,
            same_channels: self.same_channels,
            intra: (0..nch)
                .map(|c| {
                    (0..ng)
                        .map(|i| {
                            let g = self.intra.get(c * ng + i).copied().unwrap_or(0);
                            ctx.ranks.get(g).copied().unwrap_or(g)
                        })
                        .collect()
                })
                .collect(),
            inter: if ctx.inter {
                (0..nch)
                    .map(|c| {
                        let m = |k: usize| {
                            let n = self.inter.get(c * 2 + k).copied().unwrap_or(0);
                            ctx.nets.get(n).map(|x| x.sys_idx).unwrap_or(0)
                        };
                        (m(0), m(1))
                    })
                    .collect()
            } else {
                vec![]
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum From {
    None,
    Gpu(usize),
    Net(usize),
    Nvs,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum To {
    Gpu(usize),
    Net(usize),
    Nvs,
}

const FORCED_PCI: u8 = 1;
const FORCED_REPLAY: u8 = 2;

fn round1000(x: f32) -> f32 {
    round_half_away(x * 1000.0) / 1000.0
}

/// `f32::round` (half away from zero) without the libm call it becomes on baseline x86-64,
/// where the search's bandwidth accounting spends a measurable share of its time. Exact:
/// below 2^23 the integer part converts losslessly and the fraction subtracts exactly;
/// from 2^23 on (and for NaN and infinities) every f32 is already integral.
#[inline]
fn round_half_away(y: f32) -> f32 {
    if y.is_nan() || y.abs() >= 8_388_608.0 {
        return y;
    }
    let t = (y as i32) as f32;
    let d = y - t;
    let r = if d >= 0.5 {
        t + 1.0
    } else if d <= -0.5 {
        t - 1.0
    } else {
        t
    };
    // Keeps the sign of a zero result, as round(-0.3) is -0.0.
    r.copysign(y)
}

struct Search<'a> {
    ctx: Ctx,
    /// Remaining bandwidth per link while the search charges paths (starts as `ctx.link_bw`).
    link_bw: Vec<f32>,
    params: &'a SearchParams,
    tmp: GState,
    save: GState,
    /// Search steps taken (one per `ncclTopoSearchRecGpu` call that had budget left).
    steps: u64,
    /// `select_nets` per (GPU or none, `type_inter`): the answer reads only paths and
    /// preferences, which a search never changes, and the search asks for it at every NET
    /// step (more than half of a search's time when it was recomputed).
    net_order: Vec<Option<Rc<[usize]>>>,
}

impl Ctx {
    #[inline(always)]
    fn path(&self, from: From, to: To) -> Option<&SPath> {
        match (from, to) {
            (From::Gpu(a), To::Gpu(b)) => self.gg(a, b),
            (From::Gpu(a), To::Net(n)) => self.gn(a, n),
            (From::Net(n), To::Gpu(b)) => self.ng(n, b),
            (From::Gpu(a), To::Nvs) => self.g_nvs.get(a)?.as_ref(),
            (From::Nvs, To::Gpu(b)) => self.nvs_g.get(b)?.as_ref(),
            _ => None,
        }
    }

    /// The reverse path's type (it matters for tree patterns), looked up only when needed.
    fn rev_ty(&self, from: From, to: To) -> Option<PathType> {
        let rev = match (from, to) {
            (From::Gpu(a), To::Gpu(b)) => self.gg(b, a),
            (From::Gpu(a), To::Net(n)) => self.ng(n, a),
            (From::Net(n), To::Gpu(b)) => self.gn(b, n),
            (From::Gpu(a), To::Nvs) => self.nvs_g.get(a)?.as_ref(),
            (From::Nvs, To::Gpu(b)) => self.g_nvs.get(b)?.as_ref(),
            _ => None,
        };
        rev.map(|r| r.ty)
    }
}

/// `followPath`: charges `bw` on the first `max_steps` links; returns how many succeeded.
#[inline(always)]
fn follow(link_bw: &mut [f32], p: &SPath, start_gpu: bool, max_steps: usize, bw: f32) -> usize {
    if p.plain {
        // No reverse charges and no PCI surcharge: every hop takes `bw`.
        for (step, hop) in p.hops.iter().take(max_steps).enumerate() {
            let Some(l) = link_bw.get_mut(hop.link) else {
                return step;
            };
            if *l < bw {
                return step;
            }
            *l = round1000(*l - bw);
        }
        return max_steps.min(p.hops.len());
    }
    let pci_bw = if p.intel_phb && start_gpu {
        bw * 6.0 / 5.0
    } else {
        bw
    };
    for (step, hop) in p.hops.iter().take(max_steps).enumerate() {
        let fw = if hop.pci { pci_bw } else { bw };
        let mut rev_bw = 0.0f32;
        if hop.to_old_gpu && !start_gpu {
            rev_bw += fw / 8.0;
        }
        if hop.to_power_nvl {
            rev_bw += fw;
        }
        let lbw = link_bw[hop.link];
        let rev_short = rev_bw != 0.0 && hop.rev.is_none_or(|r| link_bw[r] < rev_bw);
        if lbw < fw || rev_short {
            return step;
        }
        link_bw[hop.link] = round1000(lbw - fw);
        if rev_bw != 0.0
            && let Some(r) = hop.rev
        {
            link_bw[r] = round1000(link_bw[r] - rev_bw);
        }
    }
    max_steps.min(p.hops.len())
}

/// `a` is a worse path type than `b`. The derived comparison is a call per use in an
/// unoptimised build, and `charge` makes several per search step.
#[inline(always)]
fn worse(a: PathType, b: PathType) -> bool {
    a as u8 > b as u8
}

/// The body of `ncclTopoFollowPath`: the number of hops charged, or None (nothing charged).
/// A free function over the search's parts, so the path stays borrowed from the context
/// while the link bandwidths change (the search runs this hundreds of thousands of times).
#[inline(always)]
fn charge(
    ctx: &Ctx,
    tmp: &GState,
    link_bw: &mut [f32],
    from: From,
    to: To,
    mult: f32,
) -> Option<usize> {
    let p = ctx.path(from, to)?;
    let intra = matches!(from, From::Gpu(_) | From::Nvs) && matches!(to, To::Gpu(_) | To::Nvs);
    let (bw, ty) = if intra {
        (tmp.bw_intra, tmp.type_intra)
    } else {
        (tmp.bw_inter, tmp.type_inter)
    };
    if !worse(PathType::Dis, p.ty) {
        return None;
    }
    if mult == 1.0 && worse(p.ty, ty) {
        return None;
    }
    if mult == 1.0
        && matches!(
            tmp.pattern,
            Pattern::BalancedTree | Pattern::Tree | Pattern::SplitTree
        )
        && ctx.rev_ty(from, to).is_none_or(|r| worse(r, ty))
    {
        return None;
    }
    let bw = bw * mult;
    let start_gpu = matches!(from, From::Gpu(_));
    let n = p.hops.len();
    let step = follow(link_bw, p, start_gpu, n, bw);
    if step < n {
        follow(link_bw, p, start_gpu, step, -bw);
        return None;
    }
    Some(p.count)
}

impl Search<'_> {
    /// `ncclTopoFollowPath`: charges (mult > 0) or credits (mult < 0) one path with the
    /// graph's intra or inter bandwidth; returns false when the path is unusable.
    #[inline(always)]
    fn follow_path(&mut self, from: From, to: To, mult: f32) -> bool {
        if from == From::None {
            return true;
        }
        match charge(&self.ctx, &self.tmp, &mut self.link_bw, from, to, mult) {
            Some(n) => {
                self.tmp.n_hops = (self.tmp.n_hops as f32 + mult * n as f32) as i32;
                true
            }
            None => false,
        }
    }

    fn replay_gpu(&self, step: i64) -> Option<usize> {
        let ng = self.ctx.ngpus;
        if self.tmp.n_channels == 0 {
            return None;
        }
        let idx = (self.tmp.n_channels - 1) as i64 * ng as i64 + step + 1;
        self.tmp.intra.get(usize::try_from(idx).ok()?).copied()
    }

    /// `ncclTopoSelectNets`: preferred NETs first, then any NET within `type_inter`.
    fn select_nets(&mut self, gpu: Option<usize>) -> Rc<[usize]> {
        let slot = gpu.map_or(0, |g| g + 1) * PathType::ALL.len() + self.tmp.type_inter as usize;
        if let Some(nets) = self.net_order.get(slot).and_then(Option::as_ref) {
            return nets.clone();
        }
        let nets: Rc<[usize]> = self.compute_nets(gpu).into();
        if let Some(s) = self.net_order.get_mut(slot) {
            *s = Some(nets.clone());
        }
        nets
    }

    fn compute_nets(&self, gpu: Option<usize>) -> Vec<usize> {
        let c = &self.ctx;
        let mut nets: Vec<usize> = match gpu {
            Some(g) => c.pref_nets.get(g).cloned().unwrap_or_default(),
            None => c.pref_nets_all.clone(),
        };
        let type_inter = self.tmp.type_inter;
        for t in PathType::ALL
            .iter()
            .copied()
            .take_while(|&t| t <= type_inter)
        {
            for g in 0..c.ngpus {
                if gpu.is_some_and(|x| x != g) {
                    continue;
                }
                for n in 0..c.nets.len().min(self.params.max_channels) {
                    if c.gn(g, n).map(|p| p.ty).unwrap_or(PathType::Dis) == t && !nets.contains(&n)
                    {
                        nets.push(n);
                    }
                }
            }
        }
        nets
    }

    /// `ncclTopoSearchCheckNet`: may the channel return to NET `n`?
    fn check_net(&self, start: usize, n: usize, step: usize) -> bool {
        let t = &self.tmp;
        let c = &self.ctx;
        let same_rail = |a: usize, b: usize| {
            let (x, y) = (&c.nets[a], &c.nets[b]);
            // NCCL_MNNVL_RAIL_PER_HOST (v2.28.9-1 src/graph/search.cc, ncclTopoSearchCheckNet):
            // between hosts of a fused system a rail is a PCI slot, not a NIC GUID.
            let key = if self.params.rail_per_host && x.sysid != y.sysid {
                (x.pci, y.pci)
            } else {
                (x.asic, y.asic)
            };
            key.0 == key.1 && x.port == y.port
        };
        if t.pattern == Pattern::Tree && n != start {
            return false;
        }
        if self.params.minor <= 22 {
            // 2.18–2.22: only crossNic=1 may change rail; 2.21–2.22 also make odd channels
            // come back to the previous channel's start NET whenever crossNic is set.
            if t.cross_nic != 1 && !same_rail(n, start) {
                return false;
            }
            if self.params.minor >= 21
                && t.cross_nic != 0
                && t.n_channels & 1 == 1
                && n != t.inter[(t.n_channels - 1) * 2]
            {
                return false;
            }
        } else if t.pattern == Pattern::Ring && t.cross_nic == 2 {
            // 2.23+: crossNic=2 rings pair channels: odd ones come back where the previous
            // one started.
            if t.n_channels & 1 == 1 && n != t.inter[(t.n_channels - 1) * 2] {
                return false;
            }
        } else if t.cross_nic == 0 && !same_rail(n, start) {
            return false;
        }
        if t.pattern == Pattern::BalancedTree && step != 0 && n != t.inter[t.n_channels * 2 + 1] {
            return false;
        }
        true
    }

    fn compare(&self) -> bool {
        let g = &self.tmp;
        let r = &self.save;
        if g.n_channels < g.min_channels {
            return false;
        }
        let gch = g.n_channels as f32;
        let rch = r.n_channels as f32;
        if g.pattern == Pattern::Nvls {
            let more = g.n_channels > r.n_channels && g.n_channels <= self.ctx.ngpus;
            // 2.21+ also prefers more aggregate inter bandwidth.
            return more || (self.params.minor >= 21 && gch * g.bw_inter > rch * r.bw_inter);
        }
        // 2.18–2.20 gave a 15% bonus to graphs not crossing NICs.
        let target = if self.params.minor <= 20 {
            1.0 - (r.cross_nic as f32 - g.cross_nic as f32) * 0.15
        } else {
            1.0
        };
        let a = gch * g.bw_intra;
        let b = rch * r.bw_intra * target;
        if a > b {
            return true;
        }
        if a < b {
            return false;
        }
        g.pattern == r.pattern && g.cross_nic == r.cross_nic && g.n_hops < r.n_hops
    }

    fn search_params(&self) -> (i64, i64) {
        let ng = self.ctx.ngpus as i64;
        if self.ctx.inter {
            let btn = match self.tmp.pattern {
                Pattern::Ring => ng - 1,
                Pattern::SplitTree => 1,
                _ => 0,
            };
            (btn, -1)
        } else {
            let btf = if self.tmp.pattern == Pattern::Ring {
                ng - 1
            } else {
                -1
            };
            (-1, btf)
        }
    }

    fn rec(&mut self, time: &mut i64) {
        let (btn, btf) = self.search_params();
        if self.ctx.inter {
            self.rec_net(btn, btf, time);
            return;
        }
        if self.tmp.pattern == Pattern::Nvls {
            let g = self.tmp.n_channels;
            if g < self.ctx.ngpus {
                self.try_gpu(0, btn, btf, 0, time, From::None, g);
            }
            return;
        }
        if self.tmp.n_channels == 0 {
            self.try_gpu(0, btn, btf, FORCED_PCI, time, From::None, 0);
        } else if let Some(g) = self.replay_gpu(-1) {
            self.try_gpu(0, btn, btf, FORCED_REPLAY, time, From::None, g);
        }
        if !self.tmp.same_channels || self.tmp.n_channels == 0 {
            for g in 0..self.ctx.ngpus {
                self.try_gpu(0, btn, btf, 0, time, From::None, g);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn try_gpu(
        &mut self,
        step: usize,
        btn: i64,
        btf: i64,
        forced: u8,
        time: &mut i64,
        from: From,
        g: usize,
    ) {
        if g >= self.ctx.ngpus {
            return;
        }
        let flag = 1u64.checked_shl(self.tmp.n_channels as u32).unwrap_or(0);
        if self.follow_path(from, To::Gpu(g), 1.0) {
            self.tmp.used[g] ^= flag;
            self.rec_gpu(Some(g), step, btn, btf, forced, time);
            self.tmp.used[g] ^= flag;
            self.follow_path(from, To::Gpu(g), -1.0);
        }
    }

    fn rec_net(&mut self, btn: i64, btf: i64, time: &mut i64) {
        let bw = (self.tmp.bw_inter as i32) as f32;
        let nets = self.select_nets(None);
        let count = nets.len();
        let mut found = false;
        let head_pattern = matches!(self.tmp.pattern, Pattern::Nvls | Pattern::CollnetDirect);
        for i in 0..count {
            if head_pattern && found {
                break;
            }
            let n = if self.params.minor >= 21 {
                nets[(self.tmp.n_channels + i) % count]
            } else {
                nets[i]
            };
            let net = self.ctx.nets[n].clone();
            if self.tmp.collnet && !net.coll {
                continue;
            }
            if self.ctx.nets[n].bw < bw {
                continue;
            }
            // Odd channels of a crossNic ring start where the previous one ended (2.23+:
            // rings with crossNic=2; 2.21–2.22: any pattern with crossNic set).
            let pair_rule = match self.params.minor {
                0..=20 => false,
                21 | 22 => self.tmp.cross_nic != 0,
                _ => self.tmp.pattern == Pattern::Ring && self.tmp.cross_nic == 2,
            };
            if pair_rule
                && self.tmp.n_channels & 1 == 1
                && n != self.tmp.inter[(self.tmp.n_channels - 1) * 2 + 1]
            {
                continue;
            }
            let nc = self.tmp.n_channels;
            self.tmp.inter[nc * 2] = n;
            self.tmp.latency_inter = net.latency;
            self.debit_net(&net, bw);
            if head_pattern && self.params.minor <= 20 {
                // 2.18: the head is the local GPU of the nChannels-th NET, reached without
                // charging the NET path.
                if nc < count
                    && let Some(gpu) = self.ctx.nets[nets[nc]].local_gpu
                {
                    self.try_gpu(0, btn, btf, 0, time, From::None, gpu);
                }
            } else if head_pattern {
                if nc < count
                    && let Some(gpu) = net.local_gpu
                {
                    let ng = self.ctx.ngpus;
                    let dup = (0..nc).any(|gc| self.tmp.intra[gc * ng] == gpu);
                    if !dup {
                        self.try_gpu(0, btn, btf, 0, time, From::Net(n), gpu);
                        found = true;
                    }
                }
            } else if self.params.minor <= 26 {
                self.rec_net_start_legacy(n, bw, btn, btf, time);
            } else if nc > 0 && self.tmp.same_channels {
                if let Some(g) = self.replay_gpu(-1) {
                    self.try_gpu(0, btn, btf, FORCED_REPLAY, time, From::Net(n), g);
                }
            } else {
                if nc == 0 && !self.ctx.has_nvs {
                    // PCI order first, on a small private budget (search.cc).
                    let mut t = self.params.timeout_pci_order;
                    self.try_gpu(0, btn, btf, FORCED_PCI, &mut t, From::Net(n), 0);
                    if t == -1 {
                        *time = -1;
                    }
                }
                if let Some(lg) = net.local_gpu {
                    self.try_gpu(0, btn, btf, 0, time, From::Net(n), lg);
                }
                if net.local_gpus.is_empty() {
                    // NCCL skips the bandwidth credit here too (`continue` before it).
                    continue;
                }
                for &g in &net.local_gpus {
                    if Some(g) == net.local_gpu {
                        continue;
                    }
                    self.try_gpu(0, btn, btf, 0, time, From::Net(n), g);
                }
            }
            self.debit_net(&net, -bw);
        }
    }

    /// First GPU of an inter-node channel before 2.27: replay the previous channel, then (for
    /// the first channel or without sameChannels) the PCI order and the GPUs closest to the
    /// NET (max bandwidth, then fewest hops), rotated by the channel index (2.21–2.26) or
    /// those with PCI bandwidth left first (2.18–2.20).
    fn rec_net_start_legacy(&mut self, n: usize, bw: f32, btn: i64, btf: i64, time: &mut i64) {
        let nc = self.tmp.n_channels;
        let ng = self.ctx.ngpus;
        if nc > 0
            && let Some(g) = self.replay_gpu(-1)
        {
            self.try_gpu(0, btn, btf, FORCED_REPLAY, time, From::Net(n), g);
        }
        if nc != 0 && self.tmp.same_channels {
            return;
        }
        if nc == 0 && (self.params.minor <= 20 || !self.ctx.has_nvs) {
            let mut t = self.params.timeout_pci_order;
            self.try_gpu(0, btn, btf, FORCED_PCI, &mut t, From::Net(n), 0);
            if t == -1 {
                *time = -1;
            }
        }
        let mut max_bw = 0.0f32;
        let mut min_hops = usize::MAX;
        for g in 0..ng {
            let (pbw, hops) = self
                .ctx
                .ng(n, g)
                .map(|p| (p.bw, p.hops.len()))
                .unwrap_or((0.0, 0));
            if pbw > max_bw {
                max_bw = pbw;
                min_hops = hops;
            } else if pbw == max_bw && hops > 0 && hops < min_hops {
                min_hops = hops;
            }
        }
        if max_bw < bw {
            return;
        }
        let best = |s: &Self, g: usize| {
            s.ctx
                .ng(n, g)
                .is_some_and(|p| p.bw == max_bw && p.hops.len() == min_hops)
        };
        if self.params.minor <= 20 {
            for pass in 0..2 {
                for g in 0..ng {
                    let used = if self.gpu_pci_bw(g) > 0 { 0 } else { 1 };
                    if best(self, g) && used == pass {
                        self.try_gpu(0, btn, btf, 0, time, From::Net(n), g);
                    }
                }
            }
        } else {
            for i in 0..ng {
                let g = (nc + i) % ng;
                if best(self, g) {
                    self.try_gpu(0, btn, btf, 0, time, From::Net(n), g);
                }
            }
        }
    }

    /// `gpuPciBw`: what is left of a GPU's PCI link (min of both directions), truncated.
    fn gpu_pci_bw(&self, g: usize) -> i32 {
        match self.ctx.gpu_pci_links.get(g).copied().flatten() {
            Some((up, down)) => self.link_bw[up].min(self.link_bw[down]) as i32,
            None => -1,
        }
    }

    fn debit_net(&mut self, net: &NetInfo, bw: f32) {
        for m in self.ctx.nets.iter_mut() {
            if m.asic == net.asic && m.port == net.port {
                m.bw -= bw;
            }
        }
    }

    fn rec_gpu(
        &mut self,
        gpu: Option<usize>,
        step: usize,
        btn: i64,
        btf: i64,
        forced: u8,
        time: &mut i64,
    ) {
        if *time <= 0 {
            return;
        }
        *time -= 1;
        self.steps += 1;
        let ng = self.ctx.ngpus;
        if step == ng {
            self.tmp.n_channels += 1;
            if self.compare() {
                self.save = self.tmp.clone();
                if self.tmp.n_channels == self.tmp.max_channels {
                    *time = -1;
                }
            }
            if self.tmp.n_channels < self.tmp.max_channels {
                self.rec(time);
            }
            self.tmp.n_channels -= 1;
            return;
        }
        let Some(g) = gpu else { return };
        let nc = self.tmp.n_channels;
        self.tmp.intra[nc * ng + step] = g;
        if step as i64 == btn {
            if self.ctx.inter {
                let start = self.tmp.inter[nc * 2];
                let nets = self.select_nets(Some(g));
                for &n in nets.iter() {
                    if !self.check_net(start, n, step) {
                        continue;
                    }
                    let mut next_btn = -1;
                    let save_bw = self.tmp.bw_inter;
                    let balanced = self.tmp.pattern == Pattern::BalancedTree;
                    if balanced {
                        if step == 0 {
                            next_btn = 1;
                        }
                        self.tmp.bw_inter /= 2.0;
                    }
                    let ok = self.follow_path(From::Gpu(g), To::Net(n), 1.0);
                    self.tmp.bw_inter = save_bw;
                    if ok {
                        self.tmp.inter[nc * 2 + 1] = n;
                        self.rec_gpu(Some(g), step, next_btn, btf, forced, time);
                        if balanced {
                            self.tmp.bw_inter /= 2.0;
                        }
                        self.follow_path(From::Gpu(g), To::Net(n), -1.0);
                        self.tmp.bw_inter = save_bw;
                    }
                }
            }
        } else if self.tmp.pattern == Pattern::Nvls {
            self.try_nvls(g, time);
        } else if self.tmp.pattern == Pattern::CollnetDirect {
            self.try_collnet_direct(g, time);
        } else if step + 1 < ng {
            // Candidates live on the stack unless the full sort is needed (no NVSwitch).
            let mut few = [0usize; 2];
            let many: Vec<usize>;
            let next: &[usize] = match forced {
                FORCED_PCI => {
                    few[0] = step + 1;
                    &few[..1]
                }
                FORCED_REPLAY => match self.replay_gpu(step as i64) {
                    Some(h) => {
                        few[0] = h;
                        &few[..1]
                    }
                    None => &[],
                },
                _ if self.ctx.has_nvs => {
                    let k = self.nvs_neighbours(g, &mut few);
                    &few[..k]
                }
                _ => {
                    let sort_net = if btn == -1 {
                        0
                    } else if btn == step as i64 + 1 {
                        1
                    } else {
                        -1
                    };
                    many = self.next_gpu_sort(g, sort_net);
                    &many
                }
            };
            for &h in next {
                self.try_gpu(step + 1, btn, btf, forced, time, From::Gpu(g), h);
            }
        } else if step as i64 == btf {
            let p = self.tmp.intra[nc * ng];
            if self.follow_path(From::Gpu(g), To::Gpu(p), 1.0) {
                self.rec_gpu(Some(p), step + 1, btn, -1, forced, time);
                self.follow_path(From::Gpu(g), To::Gpu(p), -1.0);
            }
        } else {
            self.rec_gpu(Some(g), ng, -1, -1, forced, time);
        }
    }

    /// `ncclTopoSearchNextGpuSort` without an NVSwitch: candidate next GPUs, best first
    /// (`nvs_neighbours` is the NVSwitch case).
    fn next_gpu_sort(&self, g: usize, sort_net: i32) -> Vec<usize> {
        let c = &self.ctx;
        let ng = c.ngpus;
        let flag = 1u64.checked_shl(self.tmp.n_channels as u32).unwrap_or(0);
        let net = (sort_net != 0).then(|| self.tmp.inter[self.tmp.n_channels * 2]);
        // (g, startIndex, intraNhops, intraBw, interNhops, interPciBw, interBw)
        let mut scores: Vec<(usize, usize, usize, i32, usize, i32, i32)> = vec![];
        for i in 1..ng {
            let h = (g + i) % ng;
            let Some(p) = c.gg(g, h) else { continue };
            if p.hops.is_empty() || self.tmp.used[h] & flag != 0 {
                continue;
            }
            let (inh, ipci, ibw) = match net.and_then(|n| c.ng(n, h)) {
                Some(np) => (np.hops.len(), self.gpu_pci_bw(h), np.bw as i32),
                None if net.is_some() => (0, self.gpu_pci_bw(h), 0),
                None => (0, 0, 0),
            };
            scores.push((h, i, p.hops.len(), p.bw as i32, inh, ipci, ibw));
        }
        scores.sort_by(|a, b| {
            b.6.cmp(&a.6)
                .then(b.5.cmp(&a.5))
                .then(a.4.cmp(&b.4))
                .then(b.3.cmp(&a.3))
                .then(a.2.cmp(&b.2))
                .then(a.1.cmp(&b.1))
        });
        let all_same_intra = scores
            .first()
            .is_none_or(|f| scores.iter().all(|s| s.3 == f.3 && s.2 == f.2));
        if sort_net == -1 && all_same_intra {
            scores.iter().rev().map(|s| s.0).collect()
        } else {
            scores.iter().map(|s| s.0).collect()
        }
    }

    /// `ncclTopoSearchNextGpuSort` with an NVSwitch: NCCL moves the index neighbours to the
    /// front of the sorted list and keeps only those, so the result depends only on which of
    /// them are candidates and the sort is skipped (the ring search spends most of its time
    /// here). Each neighbour found is inserted at the front, so the last one of the
    /// pattern's order comes first. Writes them to `out`; returns how many.
    #[inline]
    fn nvs_neighbours(&self, g: usize, out: &mut [usize; 2]) -> usize {
        let c = &self.ctx;
        let ng = c.ngpus;
        let flag = 1u64.checked_shl(self.tmp.n_channels as u32).unwrap_or(0);
        let candidate = |h: usize| {
            h != g
                && c.gg_linked.get(g * ng + h).copied().unwrap_or(false)
                && self.tmp.used.get(h).is_some_and(|u| u & flag == 0)
        };
        // `(g ± 1) mod ng` without the divisions (g < ng here: try_gpu checked it).
        let prev = if g == 0 { ng.saturating_sub(1) } else { g - 1 };
        let nxt = if g + 1 >= ng { 0 } else { g + 1 };
        let (a, b) = match self.tmp.pattern {
            Pattern::Ring => (nxt, Some(prev)),
            Pattern::SplitTree | Pattern::BalancedTree => (prev, Some(nxt)),
            _ => (nxt, None),
        };
        let mut k = 0;
        if let Some(b) = b.filter(|&b| b != a && candidate(b)) {
            out[k] = b;
            k += 1;
        }
        if candidate(a) {
            out[k] = a;
            k += 1;
        }
        k
    }

    fn try_nvls(&mut self, g: usize, time: &mut i64) {
        let ng = self.ctx.ngpus;
        let mult = |d: usize| if d == g { 2.0 } else { 1.0 };
        let mut d0 = 0;
        let mut ok;
        loop {
            ok = self.follow_path(From::Nvs, To::Gpu(d0), mult(d0));
            if !ok {
                break;
            }
            d0 += 1;
            if d0 >= ng {
                break;
            }
        }
        if ok {
            let mut d1 = 0;
            loop {
                ok = self.follow_path(From::Gpu(d1), To::Nvs, mult(d1));
                if !ok {
                    break;
                }
                d1 += 1;
                if d1 >= ng {
                    break;
                }
            }
            if ok {
                self.rec_gpu(None, ng, -1, -1, 0, time);
            }
            while d1 > 0 {
                d1 -= 1;
                self.follow_path(From::Gpu(d1), To::Nvs, -mult(d1));
            }
        }
        while d0 > 0 {
            d0 -= 1;
            self.follow_path(From::Nvs, To::Gpu(d0), -mult(d0));
        }
    }

    fn try_collnet_direct(&mut self, g: usize, time: &mut i64) {
        let ng = self.ctx.ngpus;
        let mul = 1.0 / (ng as f32 - 1.0);
        let mut fwd = 0;
        let mut ok;
        loop {
            ok = self.follow_path(From::Gpu(g), To::Gpu(fwd), mul);
            if !ok {
                break;
            }
            fwd += 1;
            if fwd >= ng {
                break;
            }
        }
        if ok {
            let mut bwd = 0;
            loop {
                ok = self.follow_path(From::Gpu(bwd), To::Gpu(g), mul);
                if !ok {
                    break;
                }
                bwd += 1;
                if bwd >= ng {
                    break;
                }
            }
            if ok {
                let nc = self.tmp.n_channels;
                let mut step = 1;
                for idx in 0..ng {
                    if idx != g {
                        self.tmp.intra[nc * ng + step] = idx;
                        step += 1;
                    }
                }
                self.rec_gpu(None, ng, -1, -1, 0, time);
            }
            while bwd > 0 {
                bwd -= 1;
                self.follow_path(From::Gpu(bwd), To::Gpu(g), -mul);
            }
        }
        while fwd > 0 {
            fwd -= 1;
            self.follow_path(From::Gpu(g), To::Gpu(fwd), -mul);
        }
    }

    /// `ncclTopoDupChannels`.
    fn dup_channels(&mut self) {
        let s = &mut self.save;
        let ng = self.ctx.ngpus;
        if s.n_channels == 0 || s.pattern == Pattern::Nvls || s.bw_intra < 25.0 {
            return;
        }
        if self.ctx.cc_min > 80 && s.bw_intra < 50.0 && s.n_channels > 4 {
            return;
        }
        let n = s.n_channels;
        let dup = (n * 2).min(s.max_channels);
        if dup <= n {
            return;
        }
        let need = dup * ng;
        if s.intra.len() < need {
            s.intra.resize(need, 0);
        }
        if s.inter.len() < dup * 2 {
            s.inter.resize(dup * 2, 0);
        }
        for i in 0..(dup - n) * ng {
            s.intra[n * ng + i] = s.intra[i];
        }
        for i in 0..(dup - n) * 2 {
            s.inter[n * 2 + i] = s.inter[i];
        }
        let f = dup.div_ceil(n) as f32;
        s.bw_intra /= f;
        s.bw_inter /= f;
        s.n_channels = dup;
    }

    /// `ncclTopoCompute` (search.cc, 2.18-2.30): set the graph up, search from the fastest
    /// speed that can fit, relax the constraints in NCCL's order until a solution holds (pass
    /// 1), then try faster speeds with the channel count found (pass 2); fall back to one
    /// channel in index order when nothing was found.
    fn run(&mut self, pattern0: Pattern, collnet: bool, min_ch: usize, max_ch: usize) -> GState {
        let (graph, retry_cross) = self.initial_graph(pattern0, collnet, min_ch, max_ch);
        let Some(retry_cross) = retry_cross else {
            return graph;
        };
        let mut t = self.first_try(&graph, retry_cross);
        loop {
            let p = self.params;
            let mut time = if self.tmp.same_channels {
                p.timeout_same_channels
            } else {
                p.timeout
            };
            self.tmp.n_channels = 0;
            t.global -= time;
            self.rec(&mut time);
            let done =
                time == -1 || self.save.n_channels as f32 * self.save.bw_inter >= self.ctx.total_bw;
            if !done && t.pass == 1 && self.relax(&mut t, &graph, time) {
                continue;
            }
            if t.pass == 1 {
                time = -1;
                self.second_pass(&mut t);
            }
            if time != 0 && t.si > 0 && self.speed_up(&mut t) {
                continue;
            }
            break;
        }
        if self.save.n_channels == 0 && !collnet && self.save.pattern != Pattern::Nvls {
            self.fallback();
        }
        if self.params.minor <= 20 {
            self.dup_channels();
        }
        self.save.clone()
    }

    /// The graph before the search (search.cc `ncclTopoCompute`'s preamble), and the crossNic
    /// value to retry with; None for a graph NCCL returns unsearched (NVLS without NVSwitch or
    /// before Hopper, no channel allowed).
    fn initial_graph(
        &self,
        pattern0: Pattern,
        collnet: bool,
        min_ch: usize,
        max_ch: usize,
    ) -> (GState, Option<u8>) {
        let minor = self.params.minor;
        let mut graph = GState::new(self.ctx.ngpus, 0);
        graph.pattern = pattern0;
        graph.collnet = collnet;
        graph.min_channels = min_ch;
        graph.max_channels = max_ch;
        let (cross_nic, retry_cross) = self.cross_nic_policy(pattern0);
        graph.cross_nic = if minor > 20 && cross_nic == 1 { 1 } else { 0 };
        graph.type_intra = self.ctx.min_type_intra;
        graph.type_inter = self.ctx.min_type_inter;
        graph.same_channels = pattern0 != Pattern::Nvls;
        if pattern0 == Pattern::Nvls && (!self.ctx.has_nvs || self.ctx.cc_min < 90) {
            return (graph, None);
        }
        self.channel_limits(&mut graph);
        if graph.max_channels == 0 {
            return (graph, None);
        }
        (graph, Some(retry_cross))
    }

    /// NCCL_CROSS_NIC as the search applies it, and the value a failed search retries with:
    /// only patterns that use NETs at both ends and only with several NETs (2.18-2.20 retried
    /// with 1 whenever it was non-zero, 2.21+ only when it is 2).
    fn cross_nic_policy(&self, pattern0: Pattern) -> (u8, u8) {
        let minor = self.params.minor;
        let tri_pattern = matches!(
            pattern0,
            Pattern::Ring | Pattern::BalancedTree | Pattern::SplitTree
        );
        // NETs visible to the search: 2.28+ keeps NET nodes for single-node communicators.
        let nets_seen = if self.ctx.inter || minor >= 28 {
            self.ctx.nets_in_system
        } else {
            0
        };
        let cross_nic = if nets_seen > 1 && tri_pattern {
            self.params.cross_nic
        } else {
            0
        };
        let retry = if minor <= 20 {
            u8::from(cross_nic != 0)
        } else if cross_nic == 2 {
            2
        } else {
            0
        };
        (cross_nic, retry)
    }

    /// The channel bounds of a pattern: NVLS and CollNet Direct arities (2.21+), a single GPU
    /// as a tree, NVLS on one node at its maximum, two rings at least on a split NVLink
    /// domain (2.26+).
    fn channel_limits(&self, graph: &mut GState) {
        let (p, ng) = (self.params, self.ctx.ngpus);
        let pattern0 = graph.pattern;
        if p.minor >= 21 {
            if pattern0 == Pattern::Nvls {
                graph.max_channels = p.nvls_max_arity.min(ng);
            }
            if pattern0 == Pattern::CollnetDirect {
                graph.max_channels = (p.collnet_direct_max_arity + 1).min(ng);
            }
        }
        if ng == 1 && pattern0 != Pattern::Ring {
            graph.pattern = Pattern::Tree;
        }
        if !self.ctx.inter && pattern0 == Pattern::Nvls {
            if p.minor <= 20 {
                graph.min_channels = ng;
                graph.max_channels = ng;
            } else {
                graph.min_channels = graph.max_channels;
            }
        }
        if p.minor >= 26
            && graph.pattern == Pattern::Ring
            && self.ctx.split_nvlink
            && graph.max_channels >= 2
            && graph.min_channels == 1
        {
            graph.min_channels = 2;
        }
    }

    /// The first speed to try: the fastest no faster than the fastest path and that the
    /// minimum channel count can carry within the system's total bandwidth (a tree's total
    /// scaled by n/(n-1): 2.18-2.20 also scaled a single GPU's ring, to infinity).
    fn first_try(&mut self, graph: &GState, retry_cross: u8) -> Tries {
        let p = self.params;
        let ng = self.ctx.ngpus;
        let speeds = p.speeds(self.ctx.cc_min, self.ctx.inter);
        let mut total_bw = self.ctx.total_bw;
        let scale = if p.minor <= 20 {
            ng == 1 || graph.pattern != Pattern::Ring
        } else {
            ng > 1 && graph.pattern != Pattern::Ring
        };
        if scale {
            total_bw *= ng as f32 / (ng as f32 - 1.0);
        }
        let mut si = 0;
        while (speeds[si] > self.ctx.max_bw || speeds[si] * graph.min_channels as f32 > total_bw)
            && si < speeds.len() - 1
        {
            si += 1;
        }
        self.save = graph.clone();
        self.tmp = graph.clone();
        let cap = p.max_channels.max(graph.max_channels);
        self.tmp.intra = vec![0; cap * ng.max(1)];
        self.tmp.inter = vec![0; cap * 2];
        self.tmp.used = vec![0; ng];
        self.tmp.bw_intra = speeds[si];
        self.tmp.bw_inter = speeds[si];
        Tries {
            speeds,
            si,
            global: p.global_timeout,
            pass: 1,
            retry_cross,
            cap,
        }
    }

    /// Pass 1 after a try that found no complete solution: the next relaxation in NCCL's
    /// order (different channels, the tree pattern on Hopper+, a farther intra-node path type,
    /// a farther inter-node one, crossNic, a slower speed). True to search again; false when
    /// none is left or the global budget ran out with a solution in hand.
    fn relax(&mut self, t: &mut Tries, graph: &GState, time: i64) -> bool {
        let p = self.params;
        // Different channels (not through AMD CPUs at SYS, 2.21+).
        let amd_block = p.minor >= 21 && self.ctx.amd_cpu && self.tmp.type_intra == PathType::Sys;
        if self.tmp.same_channels && !amd_block {
            self.tmp.same_channels = false;
            return true;
        }
        self.tmp.same_channels = graph.same_channels;
        if time != -1 {
            t.global += time;
        } else {
            t.global = p.global_timeout;
        }
        if t.global < 0 && self.save.n_channels > 0 {
            return false;
        }
        if self.ctx.cc_min >= 90 && self.tmp.pattern == Pattern::BalancedTree {
            self.tmp.pattern = Pattern::Tree;
            return true;
        }
        self.tmp.pattern = self.save.pattern;
        if self.relax_path_types() || self.relax_cross_nic(t, graph) {
            return true;
        }
        self.relax_speed(t)
    }

    /// A farther intra-node path type, then a farther inter-node one (up to PXN while a
    /// solution exists), each back to its minimum once exhausted.
    fn relax_path_types(&mut self) -> bool {
        let ctx = &self.ctx;
        let max_intra = if ctx.inter {
            self.tmp.type_inter
        } else {
            ctx.max_type_intra
        };
        if self.tmp.type_intra < max_intra
            && (self.save.n_channels == 0 || self.tmp.type_intra < self.save.type_intra)
        {
            self.tmp.type_intra = self.tmp.type_intra.next();
            if self.tmp.type_intra < PathType::Dis {
                return true;
            }
        }
        self.tmp.type_intra = ctx.min_type_intra;
        if ctx.inter
            && self.tmp.type_inter < ctx.max_type_inter
            && (self.save.n_channels == 0
                || self.tmp.type_inter < self.save.type_inter
                || self.tmp.type_inter < PathType::Pxn)
        {
            self.tmp.type_inter = self.tmp.type_inter.next();
            if self.tmp.type_inter < PathType::Dis {
                return true;
            }
        }
        self.tmp.type_inter = ctx.min_type_inter;
        false
    }

    /// crossNic once, when NCCL_CROSS_NIC asks for the retry (2.23+: rings and balanced trees
    /// only).
    fn relax_cross_nic(&mut self, t: &Tries, graph: &GState) -> bool {
        let cross_ok = self.params.minor <= 22
            || matches!(self.save.pattern, Pattern::Ring | Pattern::BalancedTree);
        if t.retry_cross != 0 && self.tmp.cross_nic == 0 && cross_ok {
            self.tmp.cross_nic = t.retry_cross;
            return true;
        }
        self.tmp.cross_nic = graph.cross_nic;
        false
    }

    /// The next slower speed while it is more than 0.49 of the solution's; else back to the
    /// fastest allowed speed, and the search is done.
    fn relax_speed(&mut self, t: &mut Tries) -> bool {
        if t.si < t.speeds.len() - 1
            && (self.save.n_channels == 0 || t.speeds[t.si + 1] / self.save.bw_inter > 0.49)
        {
            t.si += 1;
            self.set_speed(t.speeds[t.si]);
            return true;
        }
        t.si = 0;
        while t.speeds[t.si] > self.ctx.max_bw && t.si < t.speeds.len() - 1 {
            t.si += 1;
        }
        self.set_speed(t.speeds[t.si]);
        false
    }

    fn set_speed(&mut self, bw: f32) {
        self.tmp.bw_intra = bw;
        self.tmp.bw_inter = bw;
    }

    /// The end of pass 1: duplicate the channels (2.21+), restart from the solution at its
    /// own speed with its channel count as the minimum.
    fn second_pass(&mut self, t: &mut Tries) {
        let ng = self.ctx.ngpus;
        if self.params.minor >= 21 {
            self.dup_channels();
        }
        self.tmp = self.save.clone();
        self.tmp.intra.resize(t.cap * ng.max(1), 0);
        self.tmp.inter.resize(t.cap * 2, 0);
        self.tmp.used = vec![0; ng];
        t.si = 0;
        while t.speeds[t.si] > self.save.bw_inter && t.si < t.speeds.len() - 1 {
            t.si += 1;
        }
        self.set_speed(t.speeds[t.si]);
        self.tmp.min_channels = self.save.n_channels;
        t.pass = 2;
    }

    /// Pass 2: a faster speed with the channels found. 2.21+: rings raise both speeds, NVLS
    /// the inter-node one at a fixed channel count, other patterns the intra-node one while
    /// it is under twice the inter-node one; before 2.21 rings were not tried faster.
    fn speed_up(&mut self, t: &mut Tries) -> bool {
        let (save, tmp) = (&self.save, &mut self.tmp);
        if self.params.minor >= 21 {
            if save.pattern == Pattern::Ring {
                t.si -= 1;
                self.set_speed(t.speeds[t.si]);
                return true;
            }
            if save.pattern == Pattern::Nvls
                && tmp.bw_inter == save.bw_inter
                && tmp.bw_inter < tmp.bw_intra * 2.0
            {
                tmp.min_channels = save.n_channels;
                tmp.max_channels = save.n_channels;
                t.si -= 1;
                tmp.bw_inter = t.speeds[t.si];
                return true;
            }
        } else if save.pattern == Pattern::Ring {
            return false;
        }
        if tmp.bw_intra == save.bw_intra && tmp.bw_intra < tmp.bw_inter * 2.0 {
            t.si -= 1;
            tmp.bw_intra = t.speeds[t.si];
            return true;
        }
        false
    }

    /// No solution: one channel in index order at 0.1 GB/s (logged as "Could not find a path
    /// for pattern %d, falling back to simple order"); 2.30 takes the first preferred NET of
    /// GPU 0 and of the last GPU, or no NET at all.
    fn fallback(&mut self) {
        let (ng, inter) = (self.ctx.ngpus, self.ctx.inter);
        let s = &mut self.save;
        if s.intra.len() < ng {
            s.intra.resize(ng, 0);
        }
        for i in 0..ng {
            s.intra[i] = i;
        }
        if s.inter.len() < 2 {
            s.inter.resize(2, 0);
        }
        // Before 2.30 the fallback leaves the channel's NET ids zeroed: id 0, the NET of
        // device 0 (NCCL 2.28.9 src/graph/search.cc), not the first NET in index order.
        let id0 = self
            .ctx
            .nets
            .iter()
            .position(|n| n.local_id == 0 && n.sysid == 0);
        s.inter[0] = id0.unwrap_or(0);
        s.inter[1] = id0.unwrap_or(0);
        s.bw_intra = 0.1;
        s.bw_inter = 0.1;
        s.type_intra = PathType::Sys;
        s.type_inter = PathType::Sys;
        if self.params.minor >= 30 {
            let first = |g: usize| self.ctx.pref_nets.get(g).and_then(|v| v.first().copied());
            match (first(0), first(ng.saturating_sub(1))) {
                (Some(a), Some(b)) => {
                    s.inter[0] = a;
                    s.inter[1] = b;
                }
                _ if !inter && self.ctx.nets_in_system > 0 => {}
                _ => {
                    s.bw_inter = 0.0;
                    s.type_inter = PathType::Dis;
                }
            }
        }
        s.n_channels = 1;
        s.fallback = true;
    }
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod round_tests {
    use super::round_half_away;

    #[test]
    fn round_half_away_is_f32_round() {
        let same = |y: f32| {
            let (a, b) = (round_half_away(y), y.round());
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{y}: {a} vs {b}"
            );
        };
        for y in [
            0.0,
            -0.0,
            0.3,
            -0.3,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            0.49999997,
            -0.49999997,
            8388607.5,
            -8388607.5,
            8388608.0,
            16777217.0,
            1e30,
            -1e30,
            f32::MAX,
            f32::MIN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
            1e-45,
        ] {
            same(y);
        }
        // A stride through every bit pattern: all exponents, both signs.
        let mut bits = 0u32;
        while let Some(next) = bits.checked_add(4093) {
            same(f32::from_bits(bits));
            bits = next;
        }
        // The bandwidth arithmetic the search does: GB/s with three decimals.
        for i in -400_000..400_000 {
            same(i as f32 * 0.1 + 0.05);
            same(i as f32 / 1000.0 * 1000.0);
        }
    }
}
