//! From graphs to the communicator's channel counts (§5.7–5.9): collective channels after
//! reconciliation, postset doubling and clamps, NVLS channels, and p2p channels per
//! communicator and per peer (`init.cc`, `connect.cc` `ncclTopoPostset`, `paths.cc`
//! `ncclTopoComputeP2pChannels`, `transport/nvls.cc` `ncclNvlsInit`; NCCL 2.28.9 with the
//! listed version differences).

use super::paths::{self, PathPolicy, Paths};
use super::search::Graphs;
use super::system::{NodeType, System};
use super::types::PathType;
use serde::Serialize;
use topo_model::{BwConstants, HostId};

/// Version data and environment that decide channel counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChannelParams {
    /// NCCL minor version (2.`minor`).
    pub minor: u32,
    /// `MAXCHANNELS`: 32 up to 2.24, 64 from 2.25.
    pub max_channels: usize,
    /// `NCCL_MIN_NCHANNELS` (legacy `NCCL_MIN_NRINGS`).
    pub min_nchannels: Option<usize>,
    /// `NCCL_MAX_NCHANNELS` (legacy `NCCL_MAX_NRINGS`).
    pub max_nchannels: Option<usize>,
    /// Communicator config `minCTAs` / `maxCTAs` (`NCCL_MIN_CTAS` / `NCCL_MAX_CTAS`): default
    /// 1 and `MAXCHANNELS`.
    pub min_ctas: usize,
    pub max_ctas: usize,
    /// NVLS multicast usable (`NCCL_NVLS_ENABLE` and driver/GPU support). The NVLS graph must
    /// also have found heads.
    pub nvls_support: bool,
    /// `NCCL_NVLS_NCHANNELS` (≤2.26) or the `nvlsCTAs` config (2.27+); `None` = default.
    pub nvls_nchannels: Option<usize>,
    /// Whether some peer has another host hash (`ncclNvlsInit`'s SM100 multi-node test, made
    /// before nNodes is known); `None`: more than one node.
    pub nvls_multi_host: Option<bool>,
    /// CollNet usable (`NCCL_COLLNET_ENABLE=1` with a plugin).
    pub collnet_enabled: bool,
    /// `NCCL_COLLNET_NODE_THRESHOLD` (default 2).
    pub collnet_node_threshold: usize,
    /// The network does device-side unpack (TCPX/devmem): 2.27+ doubles small channel counts.
    pub unpack_net: bool,
    /// `NCCL_UNPACK_DOUBLE_NCHANNELS` (default on).
    pub unpack_double: bool,
    /// `NCCL_NCHANNELS_PER_NET_PEER` / config `nChannelsPerNetPeer`.
    pub nchannels_per_net_peer: Option<usize>,
    /// `NCCL_MIN_P2P_NCHANNELS` (1) and `NCCL_MAX_P2P_NCHANNELS` (`MAXCHANNELS`).
    pub min_p2p_nchannels: usize,
    pub max_p2p_nchannels: Option<usize>,
    /// `NCCL_P2P_PER_CHANNEL_NET_BW` (2.29+, 14 GB/s).
    pub p2p_per_channel_net_bw: f64,
    /// `NCCL_P2P_MAX_PEERS` (2.30+, capped to the communicator size); `None`: every rank.
    pub p2p_max_peers: Option<usize>,
    /// 2.30+ `ncclNvlsTuning`: NVLS channels from nNodes, and on SM100 across nodes from the
    /// smallest local rank count and GPU-to-NIC bandwidth.
    pub nvls_sm100_tuning: bool,
    /// The version's link constants (NVLink lane bandwidth for p2p channels per peer).
    pub bw: BwConstants,
}

impl ChannelParams {
    /// Defaults of NCCL 2.`minor` with no environment set.
    pub fn for_version(minor: u32) -> ChannelParams {
        let max = if minor >= 25 { 64 } else { 32 };
        ChannelParams {
            minor,
            max_channels: max,
            min_nchannels: None,
            max_nchannels: None,
            min_ctas: 1,
            max_ctas: max,
            nvls_support: true,
            nvls_nchannels: None,
            nvls_multi_host: None,
            collnet_enabled: false,
            collnet_node_threshold: 2,
            unpack_net: false,
            unpack_double: true,
            nchannels_per_net_peer: None,
            min_p2p_nchannels: 1,
            max_p2p_nchannels: None,
            p2p_per_channel_net_bw: 14.0,
            p2p_max_peers: None,
            nvls_sm100_tuning: minor >= 30,
            bw: BwConstants::default(),
        }
    }
}

/// The communicator's channel counts, as NCCL logs them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChannelCounts {
    /// NCCL minor version, for the log format.
    pub minor: u32,
    /// `nChannels` at connect time: min of the ring and tree graphs (after reconciliation).
    pub search: usize,
    /// Collective channels (`comm->nChannels`, the value logged as "coll channels").
    pub coll: usize,
    /// Channels a Ring or Tree operation starts from: `collChannels` in 2.20 and 2.21 (the
    /// channels copied up to the NVLS count not counted), `nChannels` from 2.22
    /// (src/enqueue.cc `topoGetAlgoInfo`: `int nc = comm->collChannels` at v2.21.5-1,
    /// `comm->nChannels` at v2.22.3-1). Equals `coll` otherwise.
    pub coll_algo: usize,
    /// The "collnet channels" value of the log: `coll` (2.21+), the CollNet channel count or
    /// 0 (2.20), absent before.
    pub collnet: usize,
    pub nvls: usize,
    pub p2p: usize,
    pub p2p_per_peer: usize,
    /// For every collective channel, the connected channel (0..2×search) it copies.
    pub copy_map: Vec<usize>,
}

impl ChannelCounts {
    /// `24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p
    /// channels per peer` (2.20+), without the collnet part before 2.20.
    pub fn log_line(&self) -> String {
        if self.minor >= 20 {
            format!(
                "{} coll channels, {} collnet channels, {} nvls channels, {} p2p channels, {} p2p channels per peer",
                self.coll, self.collnet, self.nvls, self.p2p, self.p2p_per_peer
            )
        } else {
            format!(
                "{} coll channels, {} nvls channels, {} p2p channels, {} p2p channels per peer",
                self.coll, self.nvls, self.p2p, self.p2p_per_peer
            )
        }
    }
}

fn pow2_up(x: usize) -> usize {
    x.max(1).next_power_of_two()
}

/// `copyChannels`: channels `start..end` copy channels `0..end-start`.
fn copy_channels(map: &mut Vec<usize>, start: usize, end: usize) -> usize {
    map.truncate(start);
    for c in start..end {
        let v = map.get(c - start).copied().unwrap_or(0);
        map.push(v);
    }
    start.max(end)
}

/// NVLS channels (`ncclNvlsInit`) before the graph is known: 0 without support or with fewer
/// than two local GPUs.
pub fn nvls_default_channels(
    params: &ChannelParams,
    local_gpus: usize,
    cc: u32,
    multi_node: bool,
) -> usize {
    if !params.nvls_support || local_gpus < 2 {
        return 0;
    }
    // src/transport/nvls.cc `ncclNvlsInit`: 16 up to 2.24; from v2.25.1-1 32 on SM100; from
    // v2.27.3-1 24 on SM100 inside one NVLink domain.
    let def = match (params.minor, cc >= 100) {
        (25.., true) if params.minor < 27 || multi_node => 32,
        (27.., true) => 24,
        _ => 16,
    };
    let n = params.nvls_nchannels.unwrap_or(def);
    n.min(params.max_ctas).max(params.min_ctas)
}

/// What 2.30's `ncclNvlsTuning` reads of the communicator after the rank exchange.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NvlsTuningFacts {
    /// `comm->nNodes`.
    pub n_nodes: usize,
    /// `comm->minLocalRanks`.
    pub min_local_ranks: usize,
    /// `comm->minNetBw`: the smallest GPU-to-NIC path bandwidth over the ranks' channel NICs
    /// (`ncclTopoGetMinNetBw`), 0 without a NIC.
    pub min_net_bw: f32,
    /// `comm->minCompCap`: the SM100 multi-node tuning needs every rank at sm100+, while the
    /// default count reads the rank's own compute capability (hosts can differ).
    pub min_cc: u32,
}

/// NVLS channels of NCCL 2.30 (v2.30.7-1 src/transport/nvls.cc `ncclNvlsTuning` and
/// `ncclNvlsTreeSm100Tuning`): the architecture default by node count, on SM100 across nodes
/// adjusted by NIC bandwidth and ranks per node, then the user's count, then the CTA clamp.
pub fn nvls_tuned_channels(
    params: &ChannelParams,
    local_gpus: usize,
    cc: u32,
    facts: NvlsTuningFacts,
) -> usize {
    if !params.nvls_support || local_gpus < 2 {
        return 0;
    }
    let multi = facts.n_nodes > 1;
    let mut n = match (cc >= 100, multi) {
        (true, true) => 32,
        (true, false) => 24,
        _ => 16,
    };
    if facts.min_cc >= 100 && multi {
        let (nic, ppn) = (facts.min_net_bw, facts.min_local_ranks);
        if facts.n_nodes == 2 && nic >= 48.0 {
            n = 32;
        } else if nic >= 96.0 {
            n = if ppn <= 8 { 24 } else { 32 };
        } else if nic >= 48.0 {
            n = 24;
        }
    }
    let n = params.nvls_nchannels.unwrap_or(n);
    n.min(params.max_ctas).max(params.min_ctas)
}

/// `ncclTopoGetMinNetBw` (v2.30.7-1 src/graph/topo.cc), taken over every rank as the rank
/// exchange does: for each GPU, its channel NICs until the first repeats, the smallest path
/// bandwidth; 0 when a GPU has no NIC.
pub fn min_net_bw(sys: &System, paths: &Paths, policy: &PathPolicy) -> f32 {
    let per_rank = (0..sys.gpus.len()).map(|rank| {
        let g = sys.gpus[rank];
        channel_nets(sys, paths, policy, rank)
            .into_iter()
            .map(|net| paths.bw(g, sys.nets[net]) as f32)
            .reduce(f32::min)
            .unwrap_or(0.0)
    });
    per_rank.reduce(f32::min).unwrap_or(0.0)
}

/// A rank's NETs channel by channel (`ncclTopoGetLocalNet`) until the first one comes back.
fn channel_nets(sys: &System, paths: &Paths, policy: &PathPolicy, rank: usize) -> Vec<usize> {
    let mut nets: Vec<usize> = vec![];
    for c in 0..policy.max_channels.max(1) {
        match paths::local_net(sys, paths, policy, rank, c) {
            Some(net) if nets.first() != Some(&net) => nets.push(net),
            _ => break,
        }
    }
    nets
}

/// Channel counts of a communicator over every GPU of `sys` (one rank per GPU).
pub fn comm_channels(
    sys: &System,
    paths: &Paths,
    graphs: &Graphs,
    params: &ChannelParams,
) -> ChannelCounts {
    comm_channels_of(sys, paths, graphs, params, 0)
}

/// [`comm_channels`] as the ranks of host `own` count them: NVLS channels follow the rank's
/// own GPU, which dissimilar hosts do not share.
pub fn comm_channels_of(
    sys: &System,
    paths: &Paths,
    graphs: &Graphs,
    params: &ChannelParams,
    own: HostId,
) -> ChannelCounts {
    comm_channels_own(sys, paths, graphs, params, own_channel_key(sys, own))
}

/// All that [`comm_channels_of`] reads of its host: the host's rank count and its first
/// rank's SM (`comm->compCap`; none when the host has no GPU). Hosts with equal
/// keys count alike, so a caller asking for every host of a cluster counts once per key:
/// each count reads every host (nodes, SMs, NICs), and once per host grew with the square
/// of the hosts (issue 43: one host with a NIC lost, 16,384 nodes, 125 s).
pub fn own_channel_key(sys: &System, own: HostId) -> OwnChannelKey {
    let local = sys.host_gpus(own);
    // `ncclNvlsInit` and 2.30's `ncclNvlsTuning` start from the rank's own GPU
    // (`comm->compCap`, src/transport/nvls.cc); dissimilar hosts can differ.
    let cc_own = local
        .first()
        .and_then(|&r| sys.gpu(r).gpu.as_ref())
        .map(|g| g.sm);
    OwnChannelKey {
        local_ranks: local.len(),
        cc_own,
    }
}

/// A host's part in its channel counts ([`own_channel_key`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OwnChannelKey {
    local_ranks: usize,
    cc_own: Option<u32>,
}

/// [`comm_channels_of`] for a host whose part is `own`.
pub fn comm_channels_own(
    sys: &System,
    paths: &Paths,
    graphs: &Graphs,
    params: &ChannelParams,
    own: OwnChannelKey,
) -> ChannelCounts {
    let minor = params.minor;
    let maxch = params.max_channels.max(1);
    let n_ranks = sys.gpus.len();
    let n_nodes = (0..sys.nhosts as u16)
        .filter(|&h| !sys.host_gpus(h).is_empty())
        .count()
        .max(1);
    let cc_min = sys.min_sm();
    let OwnChannelKey {
        local_ranks,
        cc_own,
    } = own;
    let cc_own = cc_own.unwrap_or(cc_min);

    // Reconciled graphs: identical on every host, so the min/max over ranks is the graph.
    let search = graphs.tree.n_channels.min(graphs.ring.n_channels);
    let collnet_ok = params.collnet_enabled
        && graphs
            .collnet_chain
            .as_ref()
            .is_some_and(|g| g.n_channels > 0)
        && n_nodes >= params.collnet_node_threshold;
    let nvls_graph = graphs.nvls.as_ref().is_some_and(|g| g.n_channels > 0);
    let nvls = if !nvls_graph {
        0
    } else if params.nvls_sm100_tuning {
        let facts = NvlsTuningFacts {
            n_nodes,
            min_local_ranks: min_local_ranks(sys),
            min_net_bw: min_net_bw(sys, paths, &net_policy(params)),
            min_cc: cc_min,
        };
        nvls_tuned_channels(params, local_ranks, cc_own, facts)
    } else {
        nvls_default_channels(
            params,
            local_ranks,
            cc_own,
            params.nvls_multi_host.unwrap_or(n_nodes > 1),
        )
    };

    // Postset: channels c and c + n share rings and trees.
    let mut map: Vec<usize> = (0..2 * search).collect();
    let mut n = (2 * search).min(maxch);
    map.truncate(n);
    if collnet_ok
        && let Some(chain) = &graphs.collnet_chain
        && chain.bw_intra > chain.bw_inter
        && n_ranks > n_nodes
    {
        n = copy_channels(&mut map, n, maxch.min(n + n / 2));
    }
    let sm90 = if minor >= 25 {
        cc_min >= 90
    } else {
        cc_min == 90
    };
    let small = if minor <= 20 { 2 * n <= maxch } else { n < 16 };
    if sm90 && n_nodes > 1 && graphs.ring.bw_intra > 45.0 && small {
        n = copy_channels(&mut map, n, 2 * n);
    }
    if minor >= 27 && params.unpack_net && params.unpack_double && n_nodes > 1 && n < 16 {
        n = copy_channels(&mut map, n, 2 * n);
    }
    // NCCL_MAX_NCHANNELS then NCCL_MIN_NCHANNELS (copies).
    let max_env = params.max_nchannels.unwrap_or(maxch).clamp(1, maxch);
    let min_env = params.min_nchannels.unwrap_or(0).min(maxch);
    n = n.min(max_env).min(params.max_ctas.max(1));
    map.truncate(n);
    n = copy_channels(&mut map, n, min_env.max(params.min_ctas));
    let before_nvls_copies = n;
    if (20..=27).contains(&minor) && n < nvls {
        n = copy_channels(&mut map, n, nvls);
    }
    let coll_algo = if minor <= 21 { before_nvls_copies } else { n };
    map.truncate(n);

    let collnet = if minor >= 21 || (minor == 20 && collnet_ok) {
        n
    } else {
        0
    };
    let (p2p, p2p_per_peer) = p2p_channels(sys, paths, params, n, n_nodes);
    ChannelCounts {
        minor,
        search,
        coll: n,
        coll_algo,
        collnet,
        nvls,
        p2p,
        p2p_per_peer,
        copy_map: map,
    }
}

/// `ncclTopoComputeP2pChannels` (and 2.29+ `…PerPeer`): (p2pnChannels, p2pnChannelsPerPeer).
pub fn p2p_channels(
    sys: &System,
    paths: &Paths,
    params: &ChannelParams,
    n_channels: usize,
    n_nodes: usize,
) -> (usize, usize) {
    let hosts = per_peer_hosts(sys, paths, params.minor);
    p2p_channels_of(sys, paths, params, (n_channels, n_nodes), &hosts)
}

/// The `p2pnChannelsPerPeer` host `h`'s ranks compute for themselves: before 2.29 each rank
/// keeps its own (v2.28.9-1 src/graph/paths.cc `ncclTopoComputeP2pChannels` reads only its
/// node's GPUs); `None` from 2.29, where init takes the minimum over every rank.
pub fn own_p2p_per_peer(
    sys: &System,
    paths: &Paths,
    params: &ChannelParams,
    (n_channels, n_nodes): (usize, usize),
    h: HostId,
) -> Option<usize> {
    (params.minor < 29).then(|| p2p_channels_of(sys, paths, params, (n_channels, n_nodes), &[h]).1)
}

/// [`p2p_channels`] with the per-peer minimum taken over the GPUs of `hosts`.
fn p2p_channels_of(
    sys: &System,
    paths: &Paths,
    params: &ChannelParams,
    (n_channels, n_nodes): (usize, usize),
    hosts: &[HostId],
) -> (usize, usize) {
    let minor = params.minor;
    let maxch = params.max_channels.max(1);
    let n_ranks = sys.gpus.len();
    let mut p2pn = n_channels.min(params.max_p2p_nchannels.unwrap_or(maxch));
    p2pn = p2pn.max(params.min_p2p_nchannels);
    let policy = net_policy(params);

    // Requirement of local GPU `g` towards a remote rank: the same for every remote rank.
    let remote = |g: usize| -> usize {
        if let Some(v) = params.nchannels_per_net_peer {
            return v;
        }
        if minor <= 18 {
            return 2;
        }
        if minor >= 29 {
            let (count, bw) = net_count_by_bw_229(sys, paths, &policy, g);
            return if count > 0 {
                count.max((bw as usize).div_ceil(params.p2p_per_channel_net_bw.max(1.0) as usize))
            } else {
                2
            };
        }
        let count = net_count_by_bw_221(sys, paths, g);
        let mut m = 2usize;
        while m * n_ranks > p2pn * 4 && m > 1 {
            m /= 2;
        }
        count.max(m)
    };
    // Requirement of GPU `g` towards a peer on its own host.
    let local = |g: usize, r: usize| -> usize {
        let Some(p) = paths.get(sys.gpus[r], sys.gpus[g]) else {
            return 2;
        };
        if p.ty == PathType::Nvl || (minor >= 30 && p.ty == PathType::Nvb) {
            let sm = sys.gpu(g).gpu.as_ref().map_or(0, |a| a.sm);
            let lane = params.bw.nvlink_lane(sm) as f32;
            return 2 * (((p.bw as f32) / lane) as usize).max(1);
        }
        2
    };

    let mut per_peer = if minor >= 29 { maxch } else { p2pn };
    for &h in hosts {
        let peers = sys.host_gpus(h);
        for &g in &peers {
            for &r in peers.iter().filter(|&&r| r != g) {
                per_peer = per_peer.min(local(g, r));
            }
            if peers.len() < n_ranks {
                per_peer = per_peer.min(remote(g));
            }
        }
    }
    let mut per_peer = pow2_up(per_peer);
    let p2pn = pow2_up(p2pn);
    if minor >= 29 && n_nodes > 1 && params.nchannels_per_net_peer.is_none() {
        // The network is the bottleneck: fit every peer within one round of p2p work, 8 peers
        // a batch (NCCL_MAX_DEV_WORK_P2P_PER_BATCH). 2.30 counts `p2pMaxPeers` peers
        // (NCCL_P2P_MAX_PEERS, capped to the communicator: v2.30.7-1 src/init.cc and
        // src/graph/paths.cc `ncclTopoComputeP2pChannels`); 2.29 every rank.
        let peers = params.p2p_max_peers.map_or(n_ranks, |p| p.min(n_ranks));
        while per_peer * peers.div_ceil(8) > p2pn && per_peer > 1 {
            per_peer /= 2;
        }
    } else {
        per_peer = per_peer.min(p2pn);
    }
    (p2pn, per_peer)
}

/// The hosts whose GPUs' requirements set `p2pnChannelsPerPeer`. Up to 2.28 a rank takes the
/// minimum over the GPUs of its own node (v2.28.9-1 src/graph/paths.cc
/// `ncclTopoComputeP2pChannels`): host 0's. From 2.29 each rank asks for its own GPU and init
/// takes the minimum over every rank (v2.29.7-1 src/init.cc, `allGather3Data[].p2pnChannelsPerPeer`),
/// so a host that differs, such as the other part of a host NCCL splits, counts. A host that
/// replicates another asks the same.
fn per_peer_hosts(sys: &System, paths: &Paths, minor: u32) -> Vec<HostId> {
    if minor < 29 {
        return vec![0];
    }
    (0..sys.nhosts)
        .filter(|&h| paths.tables_of(h) == h)
        .map(|h| h as HostId)
        .collect()
}

/// The path rules channel NICs are chosen with (`ncclTopoGetLocalNet`).
fn net_policy(params: &ChannelParams) -> PathPolicy {
    PathPolicy {
        minor: params.minor,
        max_channels: params.max_channels.max(1),
        ..Default::default()
    }
}

/// `comm->minLocalRanks`: the fewest GPUs on a host that has any.
fn min_local_ranks(sys: &System) -> usize {
    (0..sys.nhosts as u16)
        .map(|h| sys.host_gpus(h).len())
        .filter(|&n| n > 0)
        .min()
        .unwrap_or(0)
}

/// 2.21–2.28 `getLocalNetCountByBw`: local NETs summed until their bandwidth reaches the
/// GPU's direct link to a CPU (none for a GPU behind PCIe switches: count 0).
fn net_count_by_bw_221(sys: &System, paths: &Paths, rank: usize) -> usize {
    let g = sys.gpus[rank];
    let gpu_bw = sys.nodes[g]
        .links
        .iter()
        .filter(|l| sys.nodes[l.to].kind == NodeType::Cpu)
        .map(|l| l.bw as f32)
        .next_back()
        .unwrap_or(0.0);
    let nets = paths::local_nodes(sys, paths, g, NodeType::Net);
    let mut total = 0.0f32;
    let mut count = 0;
    for n in nets {
        if total >= gpu_bw {
            break;
        }
        total += paths.bw(g, n) as f32;
        count += 1;
    }
    count
}

/// 2.29+ `getLocalNetCountByBw`: the GPU's channel NETs until one repeats or their summed
/// bandwidth reaches the GPU's path bandwidth to its CPU.
fn net_count_by_bw_229(
    sys: &System,
    paths: &Paths,
    policy: &PathPolicy,
    rank: usize,
) -> (usize, f32) {
    let g = sys.gpus[rank];
    let gpu_bw = paths::local_cpu(sys, paths, g)
        .map(|c| paths.bw(g, c) as f32)
        .unwrap_or(0.0);
    let mut total = 0.0f32;
    let mut count = 0;
    for net in channel_nets(sys, paths, policy, rank) {
        total += paths.bw(g, sys.nets[net]) as f32;
        count += 1;
        if total >= gpu_bw {
            break;
        }
    }
    (count, total)
}

/// Whether every GPU pair of host 0 is NVLink-connected (`ncclTopoPathAllNVLink`).
pub fn all_nvlink(sys: &System, paths: &Paths) -> bool {
    let local = sys.host_gpus(0);
    local.iter().all(|&a| {
        local
            .iter()
            .all(|&b| a == b || paths.ty(sys.gpus[a], sys.gpus[b]) < PathType::Pix)
    })
}

#[cfg(test)]
mod tests;
