//! One call that runs the whole NCCL model in NCCL's init order: environment policy, system
//! graph, paths, graph search, channel counts, rings and trees, transports, cost table.
//!
//! Pure: the caller passes the environment (process variables merged with overrides), the
//! version and the runtime facts it read; nothing here reads the machine.

use super::channels::{self, ChannelCounts, ChannelParams};
use super::connect::Connection;
use super::env::EnvPolicy;
use super::paths::{self, PathPolicy, Paths};
use super::search::{self, Graphs, SearchParams, SpeedArrays};
use super::system::{NetPlugin, System};
use super::transport::{self, PairTransport, RankPlacement, TransportPolicy};
use super::tuning::{CostTable, TuningInput};
use super::types::PathType;
use super::version::{NcclVersion, VersionData};
use super::vnic::{Fusion, MergeLevel};
use crate::error::Result;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use topo_model::{BusId, HostId, Topology};
use topo_vocab::Net;

/// Facts about the machine's software that change NCCL's choices, read by the caller.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuntimeFacts {
    /// CUDA driver API version as NCCL logs it (`cudaDriverVersion 12040`).
    pub cuda_driver_version: Option<u32>,
}

pub struct Request<'a> {
    pub topo: &'a Topology,
    /// Environment in precedence order: later entries win (process first, then `--env`).
    pub env: Vec<(String, String)>,
    pub version: NcclVersion,
    pub placement: RankPlacement,
    pub facts: RuntimeFacts,
}

/// Everything the model decided.
pub struct Analysis {
    pub version: NcclVersion,
    pub data: VersionData,
    pub env: EnvPolicy,
    /// The topology as NCCL sees it (one host per GPU for per-GPU containers).
    pub topo: Topology,
    pub system: System,
    pub path_policy: PathPolicy,
    pub paths: Paths,
    pub search: SearchParams,
    pub graphs: Graphs,
    pub channel_params: ChannelParams,
    pub counts: ChannelCounts,
    pub connection: Connection,
    pub transport_policy: TransportPolicy,
    /// Every connection (see `transport::select`); `plan::build` moves them into the plan.
    pub transports: Vec<PairTransport>,
    pub costs: CostTable,
    pub nranks: usize,
    pub nnodes: usize,
    /// The launcher's rank of each rank of this analysis. A host that NCCL splits into
    /// several nodes is renumbered group by group here, while NCCL keeps the launcher's
    /// numbers (init.cc, NCCL 2.28.9: nodes are found from the ranks, ranks never move).
    /// The identity without a split.
    pub launcher_ranks: Vec<usize>,
    /// Multi-node NVLink, when NCCL turns it on: the cliques fused into one node each.
    pub mnnvl: Option<super::mnnvl::Mnnvl>,
    /// The launcher's host (tray) and NVML index of each rank, before any MNNVL fusion.
    pub trays: Vec<(HostId, i32)>,
    /// Pairs of a split host's node that NCCL 2.30 finds connected through a GPU of another
    /// node (launcher ranks `[a, b, relay]`): its init stops there ([`trimmed_relays`]).
    pub trimmed_relays: Vec<[usize; 3]>,
    /// Which IP interfaces NCCL's sockets take (`ifaces`), one sentence per distinct answer
    /// over the hosts; empty where the source lists no plain interface.
    /// The bool: none taken (NCCL's init fails there).
    pub socket_ifaces: Vec<(bool, String)>,
    /// Dissimilar hosts: each host's own view before AllGather3 (`hetero::views`); empty
    /// where the hosts are alike.
    pub hosts: Vec<super::hetero::HostView>,
    /// Every NCCL node's own p2p channels per peer, before 2.29 ([`node_p2p`]):
    /// NCCL does not reconcile them, so nodes that differ disagree on a send/recv's channels.
    pub node_p2p: Vec<(HostId, usize)>,
    /// The cost tables of dissimilar hosts whose ranks tune with other inputs than rank 0's
    /// (their own NVLS channels, their own CPU before 2.24), with the hosts that share each:
    /// NCCL does not reconcile the choices made from them ([`own_costs`]).
    pub host_costs: Vec<HostCosts>,
    /// Above two nodes, rank 0's cost table for the same machine cut to its first two nodes:
    /// the two-node bandwidth the measured layer bounds tree algorithms with
    /// (`measured::TwoNodes`). None on two nodes or fewer.
    pub two_node_costs: Option<CostTable>,
    /// Above one node where NVLS runs, NCCL node 0 alone, analysed as a one-node
    /// communicator: the rate the measured layer bounds NVLS and NVLSTree with (no
    /// hierarchical allreduce outruns its own node's, `measured::OneNode`). None otherwise.
    pub one_node: Option<Box<Analysis>>,
}

/// The cost table some dissimilar hosts tune with ([`own_costs`]).
pub struct HostCosts {
    /// The hosts that share it.
    pub hosts: Vec<HostId>,
    pub costs: CostTable,
    /// It was tuned with their own CPU, which differs from rank 0's host's (before 2.24).
    pub own_cpu: bool,
}

impl Analysis {
    /// The launcher's number of a rank of this analysis.
    pub fn launcher_rank(&self, r: usize) -> usize {
        self.launcher_ranks.get(r).copied().unwrap_or(r)
    }

    /// NCCL's print of graph `g` (`search::print_graph`) as this communicator logs it: ranks
    /// by the launcher's numbers.
    pub fn graph_lines(&self, g: &super::graph::Graph) -> Vec<String> {
        let name = |r| self.launcher_rank(r);
        super::search::print_graph(g, &self.system, &self.version, self.graphs.inter, &name)
    }

    /// The NETs each channel of `g` enters and leaves by, as its print names them.
    pub fn graph_net_ends(&self, g: &super::graph::Graph) -> Vec<Option<(String, String)>> {
        super::search::graph_net_ends(g, &self.system, &self.version, self.graphs.inter)
    }
}

/// `cudaDriverVersion` from a `12.4`-style string.
pub fn parse_cuda_version(s: &str) -> Option<u32> {
    let mut it = s.trim().split('.');
    let major: u32 = it.next()?.trim().parse().ok()?;
    let minor: u32 = it
        .next()
        .map(|m| m.trim().parse().unwrap_or(0))
        .unwrap_or(0);
    Some(major * 1000 + minor * 10)
}

fn speeds(v: &[f64]) -> Vec<f64> {
    v.to_vec()
}

/// The search inputs of `data` and `env`.
/// NCCL_MNNVL_RAIL_PER_HOST as the release reads it: only a crossNic=0 channel's way back
/// to a NET of another host of a fused MNNVL node changes (v2.28.9-1 src/graph/search.cc,
/// `ncclTopoSearchCheckNet`), so on any other job it is noted as changing nothing.
fn rail_per_host(
    env: &mut EnvPolicy,
    data: &VersionData,
    version: &NcclVersion,
    fused_trays: bool,
    nnodes: usize,
) -> bool {
    const VAR: &str = "NCCL_MNNVL_RAIL_PER_HOST";
    if env.mnnvl_rail_per_host != Some(true) {
        return false;
    }
    if !data.rules.reads_rail_per_host(version) {
        env.note_effect(
            VAR,
            format!("ignored: NCCL {version} does not read it (NCCL 2.28.7 and later do)"),
        );
        return false;
    }
    if !fused_trays || nnodes < 2 {
        let why = if fused_trays {
            "one NVLink clique holds every rank, so no channel uses the network"
        } else {
            "no NCCL node is fused from several hosts (MNNVL), so every NET of a node is on one host"
        };
        env.note_effect(
            VAR,
            format!("ignored here: it only lets a channel come back on another host's NIC in the same PCI slot; {why}"),
        );
    }
    true
}

pub fn search_params(
    data: &VersionData,
    env: &EnvPolicy,
    nvls: bool,
    collnet: bool,
) -> SearchParams {
    let mut p = SearchParams::for_version(data.minor());
    p.max_channels = data.max_channels as usize;
    let s = &data.speeds;
    p.speeds_sm80 = SpeedArrays {
        intra: speeds(&s.intra_sm80),
        inter: speeds(&s.inter_sm80),
    };
    p.speeds_sm90 = SpeedArrays {
        intra: speeds(&s.intra_sm90),
        inter: speeds(&s.inter_sm90),
    };
    p.speeds_sm100 = match (&s.intra_sm100, &s.inter_sm100) {
        (Some(a), Some(b)) => Some(SpeedArrays {
            intra: a.clone(),
            inter: b.clone(),
        }),
        _ => None,
    };
    p.cross_nic = env.cross_nic_or(data).clamp(0, 2) as u8;
    p.nvls_max_arity = data.max_nvls_arity as usize;
    p.collnet_direct_max_arity = data.max_direct_arity as usize;
    p.nvls_enabled = nvls;
    p.collnet_enabled = collnet;
    p
}

fn positive(v: Option<i64>) -> Option<usize> {
    v.filter(|&x| x > 0).map(|x| x as usize)
}

/// A CUDA driver attribute over the GPUs that recorded one (live discovery, snapshots):
/// false when any GPU lacks it, true when every GPU has it, `None` when unknown.
fn cuda_attr(
    topo: &topo_model::Topology,
    f: fn(&topo_model::CudaAttrs) -> Option<bool>,
) -> Option<bool> {
    // Whether any, or every, GPU has it: one copy's GPUs answer for its unchanged copies'.
    let vals: Vec<Option<bool>> = topo
        .asked_nodes()
        .into_iter()
        .filter_map(|g| topo.gpu(g))
        .map(|x| x.cuda.as_ref().and_then(f))
        .collect();
    if vals.contains(&Some(false)) {
        Some(false)
    } else if !vals.is_empty() && vals.iter().all(|v| *v == Some(true)) {
        Some(true)
    } else {
        None
    }
}

pub fn analyze(req: &Request) -> Result<Analysis> {
    let inputs = Inputs::of(req);
    with_one_node(analyze_in(Cow::Borrowed(req.topo), &inputs)?, &inputs)
}

/// [`analyze`] of a topology the caller gives up: it is used as is where nothing changes it
/// (no `CUDA_VISIBLE_DEVICES`, no per-GPU split) instead of being copied, which at 32,768
/// GPUs is over 100 MB.
pub fn analyze_owned(
    topo: Topology,
    env: &[(String, String)],
    version: NcclVersion,
    placement: &RankPlacement,
    facts: &RuntimeFacts,
) -> Result<Analysis> {
    let inputs = Inputs {
        env,
        version,
        placement,
        facts,
    };
    with_one_node(analyze_in(Cow::Owned(topo), &inputs)?, &inputs)
}

/// `a` with [`Analysis::one_node`]: above one node, where NVLS has channels, NCCL node 0 (host
/// 0 of the topology as NCCL sees it: the fused clique on multi-node NVLink) analysed alone with
/// the same settings. CUDA_VISIBLE_DEVICES is left out: NCCL's view already applied it. A node
/// that cannot be analysed alone gives no bound, not an error: the plan stands without it.
fn with_one_node(mut a: Analysis, req: &Inputs) -> Result<Analysis> {
    if a.nnodes <= 1 || a.counts.nvls == 0 {
        return Ok(a);
    }
    let Some(host) = a.system.gpus.first().map(|&g| a.system.nodes[g].host) else {
        return Ok(a);
    };
    let gpus: Vec<_> = a
        .topo
        .gpus()
        .into_iter()
        .filter(|&g| a.topo.node(g).host == host)
        .collect();
    let env: Vec<(String, String)> = req
        .env
        .iter()
        .filter(|(k, _)| k != "CUDA_VISIBLE_DEVICES")
        .cloned()
        .collect();
    let inputs = Inputs { env: &env, ..*req };
    let one = analyze_in(Cow::Owned(a.topo.split_gpus(&[gpus])), &inputs).ok();
    a.one_node = one.filter(|o| o.nnodes == 1).map(Box::new);
    Ok(a)
}

/// A [`Request`] without its topology.
struct Inputs<'a> {
    env: &'a [(String, String)],
    version: NcclVersion,
    placement: &'a RankPlacement,
    facts: &'a RuntimeFacts,
}

impl<'a> Inputs<'a> {
    fn of(req: &'a Request) -> Inputs<'a> {
        Inputs {
            env: &req.env,
            version: req.version,
            placement: &req.placement,
            facts: &req.facts,
        }
    }
}

fn analyze_in(given: Cow<'_, Topology>, req: &Inputs) -> Result<Analysis> {
    let data = VersionData::load(&req.version)?;
    let minor = data.minor();
    let mut env = EnvPolicy::from_env(req.env, &data)?;

    let alike = given.copies().is_some() || given.host_count() < 2;
    let mut topo = what_nccl_sees(given, req)?;
    let (hca, ib_none_selected) = select_ib_ports(&mut topo, &mut env);
    let transport_policy = transport_policy(&env, req, &topo, minor, ib_none_selected);
    let socket_net = uses_sockets(&transport_policy, &env);
    let (socket_dropped, socket_ifaces) = select_socket_ifaces(&topo, &mut env, socket_net);
    let keep_net =
        |n: &topo_model::Net| keeps_net(n, hca.as_ref(), socket_net.then_some(&socket_dropped));
    let merge = merge_level(&env, minor, socket_net, &transport_policy);
    let plugin = NetPlugin::new(&keep_net, merge);

    // Multi-node NVLink: the trays of one fabric clique become one NCCL node (mnnvl.rs).
    let trays = super::mnnvl::trays(&topo);
    let mnnvl = fuse_mnnvl(&mut topo, &env, &data, &transport_policy);
    let mut system = System::build_with(&topo, &data.bw, &plugin);
    let path_policy = path_policy(&env, &data, req);
    let mut paths = paths::compute(&system, &path_policy);

    // GPUs of one host that only the network connects form separate domains, which NCCL
    // counts as separate nodes (ranks are grouped into nodes by their ring's first GPU).
    let domains = paths::gpu_domains(&system, &paths);
    let hosts_with_gpus = nodes_with_gpus(&system);
    let mut split = Split::none(system.gpus.len());
    let mut relays = vec![];
    if domains.len() > hosts_with_gpus {
        if minor >= 30 {
            relays = trimmed_relays(&system, &paths, &domains);
        }
        split = split_domains(
            (&mut topo, &mut system, &mut paths),
            &domains,
            (&path_policy, &transport_policy),
            |t| System::build_with(t, &data.bw, &plugin),
        );
    }
    let Split {
        reasons: split_reasons,
        orig_host_of_part,
        launcher_ranks,
    } = split;
    let nranks = system.gpus.len();
    let nnodes = nodes_with_gpus(&system).max(1);
    if nnodes == 1 && !system.nets.is_empty() && !data.rules.has_system_inter(&req.version) {
        // Before v2.28.7-1 a single-node communicator loses its NETs in ncclTopoTrimSystem and
        // init computes the paths again (NCCL 2.27.7 src/init.cc, src/graph/paths.cc).
        system = System::build_with(&topo, &data.bw, &NetPlugin::NONE);
        paths = paths::compute(&system, &path_policy);
    }

    // NVLS needs multicast (nvls_supported); CollNet a plugin, assumed only on an explicit
    // NCCL_COLLNET_ENABLE=1. Every rank decides for its own domain; rank 0's is host 0.
    let (nvls_env, with_nvs) = (env.nvls_enable_or(&data), hosts_with_nvswitch(&system));
    let nvls_on = |h: HostId| nvls_supported(&topo, (&system, &with_nvs), nvls_env, minor, h);
    let nvls_enabled = nvls_on(0);
    let collnet_enabled = env.collnet_enable_or(&data) && nnodes >= 2;
    let mut search = search_params(&data, &env, nvls_enabled, collnet_enabled);
    search.inter_needs_nets = !data.rules.has_system_inter(&req.version);
    // ncclTopoSelectNets (NCCL 2.28.9 src/graph/search.cc): `nHosts > 1`, a system fused
    // from several trays, orders the start NETs GPU first.
    let fused_trays = mnnvl
        .as_ref()
        .and_then(|m| m.cliques.first())
        .is_some_and(|c| c.len() > 1);
    search.gpu_first_nets =
        fused_trays && data.rules.mnnvl_scatter_nets && env.mnnvl_scatter_nets != Some(false);
    let any_fused = mnnvl
        .as_ref()
        .is_some_and(|m| m.cliques.iter().any(|c| c.len() > 1));
    let rail_per_host = rail_per_host(&mut env, &data, &req.version, any_fused, nnodes);
    search.rail_per_host = rail_per_host;
    // `graphs` is rank 0's own search, which NCCL prints; `merged` what every rank runs with.
    let graphs = search::compute_all(&system, &paths, &search);
    let (merged, hosts) = reconcile(
        (&topo, &system, &paths),
        &graphs,
        alike,
        domains.len() > hosts_with_gpus,
        |h| {
            let mut p = search_params(&data, &env, nvls_on(h), collnet_enabled);
            p.rail_per_host = rail_per_host;
            p.inter_needs_nets = search.inter_needs_nets;
            p
        },
        nvls_on,
    );
    super::hetero::note_net_mismatch(&mut env, &hosts, &req.version);
    let channel_params = channel_params(
        &data,
        &env,
        &merged,
        nvls_enabled,
        collnet_enabled,
        hosts_with_gpus,
    );
    let counts = channels::comm_channels(&system, &paths, &merged, &channel_params);
    let node_p2p = node_p2p(&system, &paths, &channel_params, counts.coll);
    note_channel_effects(&mut env, &system, &paths, &merged, &channel_params, &counts);
    let connection = Connection::from_graphs(&system, &merged, &counts);

    let mut transports = transport::select(&system, &paths, &path_policy, &transport_policy);
    if mnnvl.is_some() {
        super::mnnvl::label_transports(&mut transports, &trays, &mut topo);
    }
    if !split_reasons.is_empty() {
        let parts = (&split_reasons, &orig_host_of_part[..]);
        relabel_split(&mut transports, parts, &system, &topo);
    }
    let (costs, host_costs, two_node_costs) = cost_tables(
        (&env, &data, collnet_enabled),
        (&system, &paths, &merged),
        (&channel_params, &counts),
        &hosts,
    );
    costs.apply_env_effects(&mut env);
    note_path_effects(&mut env, &system, &paths, &path_policy, &transports);
    Ok(Analysis {
        version: req.version,
        data,
        env,
        topo,
        system,
        path_policy,
        paths,
        search,
        graphs,
        channel_params,
        counts,
        connection,
        transport_policy,
        transports,
        costs,
        nranks,
        nnodes,
        launcher_ranks,
        mnnvl,
        trays,
        trimmed_relays: relays,
        socket_ifaces,
        hosts,
        node_p2p,
        host_costs,
        two_node_costs,
        one_node: None,
    })
}

/// Every NCCL node's own p2p channels per peer where NCCL keeps them per rank (before 2.29),
/// given the collective channel count; computed once per node whose path tables are its own
/// (a copy of another node keeps that node's count).
fn node_p2p(
    system: &System,
    paths: &Paths,
    params: &ChannelParams,
    coll: usize,
) -> Vec<(HostId, usize)> {
    let n = (coll, nodes_with_gpus(system).max(1));
    let mut own: Vec<Option<usize>> = vec![None; system.nhosts];
    let mut out = vec![];
    for h in (0..system.nhosts as HostId).filter(|&h| !system.host_gpus(h).is_empty()) {
        let src = paths.tables_of(h as usize).min(h as usize);
        let count = match own[src] {
            Some(c) => c,
            None => match channels::own_p2p_per_peer(system, paths, params, n, src as HostId) {
                Some(c) => c,
                None => return vec![],
            },
        };
        own[src] = Some(count);
        out.push((h, count));
    }
    out
}

/// Rank 0's cost table, those of dissimilar hosts that tune otherwise ([`own_costs`]) and,
/// above two nodes, rank 0's for its first two nodes alone ([`Analysis::two_node_costs`]).
fn cost_tables(
    (env, data, collnet_enabled): (&EnvPolicy, &VersionData, bool),
    (system, paths, merged): (&System, &Paths, &Graphs),
    (params, counts): (&ChannelParams, &ChannelCounts),
    hosts: &[super::hetero::HostView],
) -> (CostTable, Vec<HostCosts>, Option<CostTable>) {
    let input =
        |c: &ChannelCounts, own| tuning_input(env, data, (system, own), merged, c, collnet_enabled);
    let tune = |c: &ChannelCounts, own| CostTable::build(&input(c, own));
    let rank0_host = system.gpus.first().map_or(0, |&g| system.nodes[g].host);
    let others = own_costs(hosts, (system, paths, merged), params, &tune);
    let ti = input(counts, rank0_host);
    let two = (ti.nnodes > 2 && ti.local_ranks.len() >= 2).then(|| {
        // The same graphs and channels on two nodes: NCCL's node-count terms are the only
        // difference (nNodes, nRanks and the ranks per node, src/graph/tuning.cc).
        let mut t2 = ti.clone();
        t2.local_ranks.truncate(2);
        t2.nranks = t2.local_ranks.iter().sum();
        t2.nnodes = 2;
        CostTable::build(&t2)
    });
    (CostTable::build(&ti), others, two)
}

/// What a dissimilar host's ranks tune with beside the reconciled graphs: their own NVLS
/// channels (`ncclNvlsInit` from the rank's own GPU, src/transport/nvls.cc) and, before 2.24,
/// their own CPU (`ncclTopoCpuType`, src/graph/tuning.cc). Hosts that tune as rank 0's host
/// are left out; the others share one table per distinct set of inputs.
fn own_costs(
    hosts: &[super::hetero::HostView],
    (system, paths, merged): (&System, &Paths, &Graphs),
    params: &ChannelParams,
    tune: &dyn Fn(&ChannelCounts, HostId) -> CostTable,
) -> Vec<HostCosts> {
    type Key = (String, Option<(topo_model::CpuArch, topo_model::CpuVendor)>);
    // Counted once per distinct host part: a count reads every host.
    let mut counted: HashMap<channels::OwnChannelKey, (String, ChannelCounts)> = HashMap::new();
    let mut key = |h: HostId| {
        let (line, counts) = counted
            .entry(channels::own_channel_key(system, h))
            .or_insert_with_key(|&own| {
                let c = channels::comm_channels_own(system, paths, merged, params, own);
                (c.log_line(), c)
            })
            .clone();
        let cpu = (params.minor < 24)
            .then(|| system.host_cpu(h).map(|c| (c.arch, c.vendor)))
            .flatten();
        ((line, cpu), counts)
    };
    let Some(first) = system.gpus.first().map(|&g| system.nodes[g].host) else {
        return vec![];
    };
    let mine = key(first).0;
    let mut out: Vec<HostCosts> = vec![];
    let mut keys: Vec<Key> = vec![];
    for v in hosts.iter().filter(|v| v.host != first) {
        let (k, counts) = key(v.host);
        if k == mine {
            continue;
        }
        match keys.iter().position(|x| *x == k) {
            Some(i) => out[i].hosts.push(v.host),
            None => {
                out.push(HostCosts {
                    hosts: vec![v.host],
                    costs: tune(&counts, v.host),
                    own_cpu: k.1 != mine.1,
                });
                keys.push(k);
            }
        }
    }
    out
}

/// Hosts with at least one GPU: NCCL's nodes once a split host's parts are hosts.
fn nodes_with_gpus(system: &System) -> usize {
    (0..system.nhosts as u16)
        .filter(|&h| !system.host_gpus(h).is_empty())
        .count()
}

/// The topology NCCL's ranks see: CUDA_VISIBLE_DEVICES hides GPUs before NCCL sees any
/// (visible.rs), and containers with their own host hash each hold one GPU and every NIC of
/// the box.
fn what_nccl_sees(given: Cow<'_, Topology>, req: &Inputs) -> Result<Topology> {
    let (seen, note) = match super::visible::apply(&given, req.env)? {
        Some((t, note)) => (Cow::Owned(t), Some(note)),
        None => (given, None),
    };
    let mut topo = if req.placement.node_per_rank() {
        seen.split_per_gpu()
    } else {
        seen.into_owned()
    };
    if let Some(note) = note {
        topo.warn(note);
    }
    Ok(topo)
}

/// Multi-node NVLink: the trays of one fabric clique become one NCCL node (mnnvl.rs), or a
/// warning says why NCCL keeps them apart.
fn fuse_mnnvl(
    topo: &mut Topology,
    env: &EnvPolicy,
    data: &VersionData,
    transport_policy: &TransportPolicy,
) -> Option<super::mnnvl::Mnnvl> {
    let (cumem_on, cumem_why) = transport_policy.cumem_enabled();
    match super::mnnvl::decide(topo, env, data, (cumem_on, &cumem_why)) {
        super::mnnvl::Decision::On(m) => {
            *topo = topo.fuse_hosts(&m.cliques).0;
            Some(m)
        }
        super::mnnvl::Decision::Off(why) => {
            if let Some(w) = &why {
                topo.warn(format!(
                    "the hosts share an NVLink fabric but NCCL will not use multi-node NVLink: {w}; they talk over the network"
                ));
            }
            None
        }
    }
}

/// Per host, whether it has an NVSwitch: found once, as every dissimilar host asks
/// [`nvls_supported`] (issue 43).
fn hosts_with_nvswitch(system: &System) -> Vec<bool> {
    let mut with_nvs = vec![false; system.nhosts];
    for &n in &system.nvs {
        if let Some(x) = with_nvs.get_mut(system.nodes[n].host as usize) {
            *x = true;
        }
    }
    with_nvs
}

/// Whether host `h`'s ranks find NVLS support. NCCL_NVLS_ENABLE=1 forces nvlsSupport; the
/// default (2) asks the driver for multicast on the host's first GPU, which needs sm90+ and
/// an NVSwitch; without support NCCL searches no NVLS graph (no `Pattern 5` line), and forced
/// on a machine without NVSwitch the search runs and finds no channel. ncclNvlsInit
/// (src/transport/nvls.cc) runs after ncclTopoTrimSystem, so it counts the GPUs of the
/// rank's own domain: at least 2 in NCCL 2.28.9 and 2.29+ (`gpuCount < 2`), at least 3
/// before (`gpuCount <= 2`, 2.18 to 2.28.3).
fn nvls_supported(
    topo: &Topology,
    (system, with_nvs): (&System, &[bool]),
    nvls_env: i64,
    minor: u32,
    h: HostId,
) -> bool {
    let min_nvls_gpus = if minor >= 28 { 2 } else { 3 };
    let first_sm = system
        .host_gpus(h)
        .first()
        .and_then(|&r| system.gpu(r).gpu.as_ref())
        .map_or(0, |g| g.sm);
    // A stated fact (profile `host.nvls`, --nvls, NVML's fabric state or an old driver in a
    // snapshot) says whether the driver offers multicast at all.
    let stated = topo
        .hosts
        .get(h as usize)
        .and_then(|x| x.nvls.as_ref())
        .map(|f| f.value);
    let multicast = stated != Some(false)
        && (nvls_env == 1
            || (first_sm >= 90 && with_nvs.get(h as usize).copied().unwrap_or(false)));
    nvls_env != 0 && multicast && system.host_gpus(h).len() >= min_nvls_gpus
}

/// The pre-split reason and anomaly of each pair of GPUs in different parts of one host,
/// shared strings: a string each, hashed with SipHash, was a tenth of a plan at 16,384 hosts
/// split per socket.
type SplitReasons = topo_model::fast::HashMap<(HostId, BusId, BusId), (Arc<str>, Option<Arc<str>>)>;

/// A host split into NCCL nodes: the transport verdicts from before the split (what made the
/// parts separate), the physical host of each part, and the launcher's rank of each rank.
struct Split {
    reasons: SplitReasons,
    orig_host_of_part: Vec<HostId>,
    launcher_ranks: Vec<usize>,
}

impl Split {
    fn none(nranks: usize) -> Split {
        Split {
            reasons: SplitReasons::default(),
            orig_host_of_part: vec![],
            launcher_ranks: (0..nranks).collect(),
        }
    }
}

/// GPUs of one host that only the network connects form separate domains, which NCCL counts
/// as separate nodes: the topology split into one host per domain, the system rebuilt (each
/// part keeping the physical host's GPU index order) and its paths computed again.
fn split_domains(
    (topo, system, pth): (&mut Topology, &mut System, &mut paths::Paths),
    domains: &[Vec<usize>],
    (path_policy, transport_policy): (&PathPolicy, &TransportPolicy),
    rebuild: impl Fn(&Topology) -> System,
) -> Split {
    let mut reasons = SplitReasons::default();
    let mut part = vec![usize::MAX; system.gpus.len()];
    for (d, ranks) in domains.iter().enumerate() {
        for &r in ranks {
            part[r] = d;
        }
    }
    // Keep the pre-split verdicts: after the split the pairs are "different nodes", but
    // the user needs to know what made them so.
    let key = |sys: &System, r: usize| -> Option<(HostId, BusId)> {
        let n = sys.nodes[sys.gpus[r]].topo?;
        Some((sys.nodes[sys.gpus[r]].host, topo.gpu(n)?.busid))
    };
    for t in transport::select(system, pth, path_policy, transport_policy) {
        if part[t.from] == part[t.to] {
            continue;
        }
        if let (Some((h, a)), Some((_, b))) = (key(system, t.from), key(system, t.to)) {
            reasons.insert((h, a, b), (t.reason, t.anomaly));
        }
    }
    let orig_host_of_part: Vec<HostId> = domains.iter().map(|d| system.gpu(d[0]).host).collect();
    let groups: Vec<Vec<_>> = domains
        .iter()
        .map(|d| {
            d.iter()
                .filter_map(|&r| system.nodes[system.gpus[r]].topo)
                .collect()
        })
        .collect();
    let shown: Vec<String> = domains
        .iter()
        .map(|d| {
            format!(
                "[{}]",
                d.iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        })
        .collect();
    *topo = topo.split_gpus(&groups);
    // The split keeps each group's GPUs in rank order and numbers the groups in turn.
    let launcher_ranks: Vec<usize> = domains.iter().flatten().copied().collect();
    // Ranks are numbered node by node from here on; the plan maps rings, trees and graph
    // channels back to the launcher's numbers (which NCCL keeps), not the transport list.
    let contiguous = domains.iter().flatten().copied().eq(0..system.gpus.len());
    topo.warn(format!(
        "GPU groups {} reach each other only through the network: neither P2P nor SHM can \
         connect them (a NIC path is faster than the CPU link, ncclTopoCheckNet), so NCCL \
         treats each group as a node and uses NET between them{}",
        shown.join(" "),
        if contiguous {
            ""
        } else {
            "; rings, trees and graph channels keep the launcher's rank numbers (as NCCL does), the transport list numbers ranks group by group"
        }
    ));
    // Each part keeps the physical host's GPU index order (position in it, by the
    // launcher's rank), which the part's own fused order need not follow.
    let mut position = vec![usize::MAX; system.gpus.len()];
    for h in 0..system.nhosts as HostId {
        for (i, r) in system.host_gpus_indexed(h).into_iter().enumerate() {
            position[r] = i;
        }
    }
    *system = rebuild(topo);
    system.reorder_index(|r| launcher_ranks.get(r).map_or(usize::MAX, |&l| position[l]));
    *pth = paths::compute(system, path_policy);
    Split {
        reasons,
        orig_host_of_part,
        launcher_ranks,
    }
}

/// Channel parameters from the version, the environment (capped as parseCommConfig caps
/// them) and what the search found.
fn channel_params(
    data: &VersionData,
    env: &EnvPolicy,
    merged: &Graphs,
    nvls_enabled: bool,
    collnet_enabled: bool,
    hosts_with_gpus: usize,
) -> ChannelParams {
    let mut channel_params = ChannelParams::for_version(data.minor());
    channel_params.max_channels = data.max_channels as usize;
    channel_params.min_nchannels = positive(env.min_nchannels);
    channel_params.max_nchannels = positive(env.max_nchannels);
    if let Some(v) = positive(env.min_ctas) {
        channel_params.min_ctas = v;
    }
    if let Some(v) = positive(env.max_ctas) {
        channel_params.max_ctas = v;
    }
    // parseCommConfig (NCCL 2.28.9 src/init.cc): both capped at MAXCHANNELS, and a minimum
    // above the maximum is lowered to it ("minCTAs ... is larger than maxCTAs").
    let maxch = (data.max_channels as usize).max(1);
    channel_params.min_ctas = channel_params.min_ctas.min(maxch);
    channel_params.max_ctas = channel_params.max_ctas.min(maxch);
    channel_params.min_ctas = channel_params.min_ctas.min(channel_params.max_ctas);
    channel_params.nvls_support =
        nvls_enabled && merged.nvls.as_ref().is_some_and(|g| g.n_channels > 0);
    channel_params.nvls_nchannels = positive(env.nvls_nchannels);
    // ncclNvlsInit picks the SM100 channel count before nNodes is known, from the peers'
    // host hashes (NCCL 2.28.9 src/transport/nvls.cc): a host split into NCCL nodes by the
    // P2P/SHM checks is still one host there.
    channel_params.nvls_multi_host = Some(hosts_with_gpus > 1);
    channel_params.collnet_enabled = collnet_enabled;
    channel_params.nchannels_per_net_peer = positive(env.nchannels_per_net_peer);
    if let (Some(def), v) = (
        data.defaults.p2p_per_channel_net_bw,
        env.p2p_per_channel_net_bw,
    ) {
        channel_params.p2p_per_channel_net_bw = v.unwrap_or(def) as f64;
    }
    channel_params.p2p_max_peers = positive(env.p2p_max_peers);
    // ncclTopoComputeP2pChannels (NCCL 2.28.9 src/graph/paths.cc): p2pnChannels is nChannels
    // capped by the maximum, then raised to the minimum; MAXCHANNELS bounds both here.
    channel_params.max_p2p_nchannels = positive(env.max_p2p_nchannels).map(|v| v.min(maxch));
    if let Some(v) = positive(env.min_p2p_nchannels) {
        channel_params.min_p2p_nchannels = v.min(maxch);
    }
    channel_params.nvls_sm100_tuning = data.rules.nvls_sm100_tuning;
    channel_params.bw = data.bw.clone();
    channel_params
}

/// The inter-node transports of a split host keep the reason from before the split.
fn relabel_split(
    transports: &mut [transport::PairTransport],
    (split_reasons, orig_host_of_part): (&SplitReasons, &[HostId]),
    system: &System,
    topo: &Topology,
) {
    // One marked text per distinct reason, shared like the reasons themselves.
    let mut marked: topo_model::fast::HashMap<*const u8, Arc<str>> = Default::default();
    for t in transports.iter_mut().filter(|t| t.inter_node) {
        let ends = [t.from, t.to].map(|r| {
            let node = &system.nodes[system.gpus[r]];
            let busid = node.topo.and_then(|n| topo.gpu(n)).map(|g| g.busid);
            (orig_host_of_part.get(node.host as usize).copied(), busid)
        });
        if let [(Some(ha), Some(a)), (Some(hb), Some(b))] = ends
            && ha == hb
            && let Some((reason, anomaly)) = split_reasons.get(&(ha, a, b))
        {
            t.reason = (marked.entry(reason.as_ptr()))
                .or_insert_with(|| format!("{reason}{SPLIT_MARK}").into())
                .clone();
            t.anomaly = anomaly.clone();
        }
    }
}

/// `comm->cpuArch` and `cpuVendor`: from 2.22 the AllGather3 of every rank's first CPU, MIXED
/// where hosts differ (v2.22.3-1 src/init.cc, `NCCL_TOPO_CPU_ARCH_MIXED`); before, rank 0
/// tunes with its own host's CPU (`ncclTopoCpuType` in src/graph/tuning.cc), which is what
/// NVIDIA/nccl#1136 (ranks of mixed vendors choosing different algorithms) was about.
fn comm_cpu(ti: &mut TuningInput, (system, own): (&System, HostId), minor: u32) {
    let cpus: Vec<_> = (0..system.nhosts as HostId)
        .filter(|&h| !system.host_gpus(h).is_empty())
        .filter_map(|h| system.host_cpu(h))
        .map(|c| (c.arch, c.vendor))
        .collect();
    // The rank's own host's first CPU (ncclTopoCpuType reads `cpus->nodes[0]` of its system).
    let mine = system.host_cpu(own).map(|c| (c.arch, c.vendor));
    let Some((arch, vendor)) = mine.or_else(|| cpus.first().copied()) else {
        return;
    };
    ti.cpu_arch = arch;
    ti.cpu_vendor = vendor;
    if minor < 22 {
        return;
    }
    // MIXED matches none of the rules' x86, POWER, Intel or AMD tests; `Other` neither.
    if cpus.iter().any(|c| c.0 != arch) {
        ti.cpu_arch = topo_model::CpuArch::Other;
    }
    if cpus.iter().any(|c| c.1 != vendor) {
        ti.cpu_vendor = topo_model::CpuVendor::Other;
        ti.cpu_vendor_mixed = true;
        ti.local_cpu_vendor = Some(vendor);
    }
}

/// What the cost model reads: ranks per node, compute capabilities, CPU, graphs, channels.
fn tuning_input<'a>(
    env: &'a EnvPolicy,
    data: &'a VersionData,
    (system, own): (&System, HostId),
    merged: &Graphs,
    counts: &ChannelCounts,
    collnet_enabled: bool,
) -> TuningInput<'a> {
    let (nranks, nnodes) = (
        system.gpus.len(),
        (0..system.nhosts as u16)
            .filter(|&h| !system.host_gpus(h).is_empty())
            .count()
            .max(1),
    );
    let mut ti = TuningInput::new(env, data, nranks, nnodes);
    ti.local_ranks = (0..system.nhosts as u16)
        .map(|h| system.host_gpus(h).len())
        .filter(|&n| n > 0)
        .collect();
    ti.min_cc = system.min_sm();
    ti.max_cc = system.max_sm();
    comm_cpu(&mut ti, (system, own), data.minor());
    // After AllGather3 init sets the ring and tree graphs (and comm->nChannels) to the smaller
    // count, before tuning reads them: `comm->nChannels = treeGraph->nChannels =
    // ringGraph->nChannels = std::min(...)` (NCCL 2.18.5-1 to 2.30.7-1 src/init.cc). A tree
    // search that fell back below the ring's count lowers the ring's bandwidth too.
    let (mut ring, mut tree) = (merged.ring.clone(), merged.tree.clone());
    if tree.n_channels > 0 && ring.n_channels > 0 {
        let n = ring.n_channels.min(tree.n_channels);
        (ring.n_channels, tree.n_channels) = (n, n);
    }
    ti.ring = Some(ring);
    ti.tree = Some(tree);
    ti.max_tree_pattern = merged.max_tree_pattern;
    ti.collnet_chain = merged.collnet_chain.clone();
    ti.collnet_direct = merged.collnet_direct.clone();
    ti.nvls = merged.nvls.clone();
    ti.comm_channels = counts.coll;
    ti.algo_channels = counts.coll_algo;
    ti.nvls_channels = counts.nvls;
    ti.nvls_supported = counts.nvls > 0;
    ti.collnet_enabled = collnet_enabled;
    ti.collnet_heads = merged
        .collnet_direct
        .as_ref()
        .map(|g| g.n_channels)
        .unwrap_or(0);
    ti.has_nvswitch = !system.nvs.is_empty();
    ti
}

/// NCCL_IB_HCA: the IB plugin exports only the ports it selects, numbered from 0 in the order
/// it found them (ncclIbInitDevices, NVIDIA/nccl v2.28.9-1 src/transport/net_ib.cc). It applies
/// only when IB is the network (not under NCCL_IB_DISABLE=1 or NCCL_NET=Socket). The filter
/// in force, and whether it selected no port at all (NCCL then falls back to sockets).
fn select_ib_ports(
    topo: &mut Topology,
    env: &mut EnvPolicy,
) -> (Option<crate::env::HcaFilter>, bool) {
    // EFA, inferred from the devices with nothing stated, is the aws-ofi-nccl plugin's: a
    // loaded plugin comes before NCCL's IB transport, and NCCL_IB_HCA is that transport's.
    let efa = env.net.is_none()
        && topo.source.fabric.is_none()
        && matches!(source_net(topo), Some(crate::transport::SourceNet::Efa(_)));
    let ib_in_use = !env.ib_disable
        && !efa
        && env
            .net
            .as_deref()
            .is_none_or(|n| Net::from_nccl_net(n) == Net::Ib);
    let mut hca = env.ib_hca.clone().filter(|_| ib_in_use);
    let mut ib_none_selected = false;
    if let Some(h) = &hca {
        let nets = topo.nets();
        let total = nets.len();
        let kept = nets
            .iter()
            .filter(|&&n| topo.net(n).is_some_and(|x| hca_keeps(h, x)))
            .count();
        let unnamed = nets
            .iter()
            .filter(|&&n| topo.net(n).is_some_and(|x| x.assumed))
            .count();
        if unnamed > 0 {
            // The filter matches device names (`ncclParseStringList`/`matchIfList`,
            // src/misc/utils.cc, ncclIbInitDevices, src/transport/net_ib.cc, NCCL 2.28.9-1),
            // and an assumed port has none: whether it passes is unknown, so it is kept
            // rather than silently dropped.
            env.note_effect(
                "NCCL_IB_HCA",
                format!(
                    "cannot be checked against {unnamed} IB port(s) whose device names the source does not give (named hca@<bus id> here): the plan keeps them; NCCL opens only those whose verbs names (ibv_devices) match"
                ),
            );
        }
        if total > 0 && kept == 0 {
            // No IB device: NCCL falls back to the socket plugin, whose devices are the IP
            // interfaces, not IB ports; the ports stay in the system (the interfaces sit on
            // the same NICs) and the transport becomes NET/Socket.
            env.note_effect(
                "NCCL_IB_HCA",
                format!(
                    "selects none of the {total} IB port(s), so NCCL has no IB device and falls back to sockets"
                ),
            );
            ib_none_selected = true;
            hca = None;
        }
    }
    if let Some(h) = &hca {
        let nets = topo.nets();
        let total = nets.len();
        let mut next: HashMap<HostId, i32> = HashMap::new();
        let mut kept = 0;
        for n in nets {
            let host = topo.node(n).host;
            if let topo_model::NodeKind::Net(x) = &mut topo.node_mut(n).kind
                && hca_keeps(h, x)
            {
                let d = next.entry(host).or_insert(0);
                x.dev = *d;
                *d += 1;
                kept += 1;
            }
        }
        env.note_effect(
            "NCCL_IB_HCA",
            format!("selects {kept} of {total} IB port(s)"),
        );
    } else if env.ib_hca.is_some() && efa {
        env.note_effect(
            "NCCL_IB_HCA",
            "ignored: the ports are EFA (inferred from the source), which NCCL reaches through the aws-ofi-nccl plugin, not its IB transport",
        );
    } else if env.ib_hca.is_some() && !ib_in_use {
        env.note_effect(
            "NCCL_IB_HCA",
            "ignored: IB is not the network (NCCL_IB_DISABLE=1 or NCCL_NET)",
        );
    }
    (hca, ib_none_selected)
}

/// The interfaces NCCL's sockets take on each host (`crate::ifaces`), over the plain
/// interfaces the source lists and the IB ports' interfaces: the socket transport's devices
/// where the network is sockets, and the bootstrap's interface. The names of plain interfaces
/// it leaves out on some host (NCCL's socket plugin never lists them), and one sentence per
/// distinct answer. Nothing where the source lists no plain interface: which interfaces a
/// host has is then unknown.
fn select_socket_ifaces(
    topo: &Topology,
    env: &mut EnvPolicy,
    socket_net: bool,
) -> (std::collections::HashSet<String>, Vec<(bool, String)>) {
    let mut per_host: std::collections::BTreeMap<HostId, (Vec<&str>, Vec<&str>)> =
        Default::default();
    // An unchanged copy's hosts give the model copy's answers, which come before them: one
    // copy's ports stand for theirs (`Topology::asked_nets`).
    for n in topo.asked_nets() {
        let Some(x) = topo.net(n) else { continue };
        let e = per_host.entry(topo.node(n).host).or_default();
        if x.socket {
            e.0.push(x.name.as_str());
            e.1.push(x.name.as_str());
        } else if let Some(d) = x.netdev.as_deref() {
            e.1.push(d);
        }
    }
    let ifname = env.socket_ifname.clone();
    let (mut dropped, mut texts) = (std::collections::HashSet::new(), vec![]);
    for (plain, all) in per_host.values() {
        if plain.is_empty() {
            continue;
        }
        let pick =
            crate::ifaces::find_interfaces(all, ifname.as_ref().map(|(r, f)| (r.as_str(), f)));
        // Where none is taken NCCL's init fails (the text says so); the ports stay, so the
        // rest of the plan still has a network to describe.
        if plain.iter().any(|n| pick.kept.iter().any(|k| k == n)) {
            dropped.extend(
                plain
                    .iter()
                    .filter(|n| !pick.kept.iter().any(|k| k == *n))
                    .map(|n| n.to_string()),
            );
        }
        let mut text = pick.text();
        if socket_net {
            let used: Vec<&str> = plain
                .iter()
                .copied()
                .filter(|n| pick.kept.iter().any(|k| k == n))
                .collect();
            text.push_str(&format!(
                "; NET/Socket sends over {}",
                if used.is_empty() {
                    "none of the listed interfaces".to_string()
                } else {
                    used.join(", ")
                }
            ));
        }
        let entry = (pick.kept.is_empty(), text);
        if !texts.contains(&entry) {
            texts.push(entry);
        }
    }
    if ifname.is_some() {
        for (_, t) in &texts {
            env.note_effect("NCCL_SOCKET_IFNAME", t.clone());
        }
        if texts.is_empty() {
            env.note_effect(
                "NCCL_SOCKET_IFNAME",
                "the source lists no plain IP interface, so which interfaces it matches is unknown",
            );
        }
    }
    (dropped, texts)
}

/// Whether a port is a NET device of NCCL's: a plain interface only for the socket plugin
/// (`socket`: the interfaces `ncclFindInterfaces` left out, `crate::ifaces`), an IB port where
/// NCCL_IB_HCA keeps it.
/// Whether NCCL's network is its socket transport: no IB device, or IB turned off, or
/// NCCL_NET=Socket.
fn uses_sockets(t: &TransportPolicy, env: &EnvPolicy) -> bool {
    t.ib_available == Some(false)
        || env.ib_disable
        || (env.net.as_deref()).is_some_and(|n| Net::from_nccl_net(n) == Net::Socket)
}

/// How NIC fusion joins ports (`crate::vnic`): only NCCL's IB transport joins them, its
/// plugin itself in 2.20, NCCL's topology from 2.21 (NCCL_NET_MERGE_LEVEL, default PORT);
/// NCCL_IB_MERGE_NICS=0 makes the plugin refuse every join.
fn merge_level(env: &EnvPolicy, minor: u32, socket: bool, t: &TransportPolicy) -> Fusion {
    let ib = !socket && t.net_name(true).0 == Net::Ib;
    if minor < 20 || !ib || env.ib_merge_nics == Some(false) {
        return Fusion::Off;
    }
    if minor == 20 {
        return Fusion::Plugin;
    }
    Fusion::Level(env.net_merge_level.unwrap_or(MergeLevel::Port))
}

fn keeps_net(
    n: &topo_model::Net,
    hca: Option<&crate::env::HcaFilter>,
    socket: Option<&std::collections::HashSet<String>>,
) -> bool {
    if n.socket {
        return socket.is_some_and(|dropped| !dropped.contains(&n.name));
    }
    hca.is_none_or(|h| hca_keeps(h, n))
}

/// Whether NCCL_IB_HCA keeps a port: by its name and port number, except a port topo assumed,
/// whose device name is unknown, so the filter cannot be checked against it and it stays.
fn hca_keeps(h: &crate::env::HcaFilter, x: &topo_model::Net) -> bool {
    x.assumed || h.keeps(&x.name, i64::from(x.port))
}

/// Every port is a plain IP interface with no RDMA device behind it (a live host's `eth0`,
/// `bond0`): NCCL's IB plugin lists verbs devices only (ncclIbInitDevices, NVIDIA/nccl
/// v2.28.9-1 src/transport/net_ib.cc), so it finds none and NCCL takes the socket plugin.
fn only_plain_interfaces(topo: &Topology) -> bool {
    // One copy's ports answer for its unchanged copies' (`Topology::asked_nets`).
    let nets = topo.asked_nets();
    !nets.is_empty() && nets.iter().all(|&n| topo.net(n).is_some_and(|x| x.socket))
}

/// What the source's ports say of NCCL's network (`topo_model::net_kind`, the one rule):
/// EFA where some port is EFA and none is IB (an EFA host's front-end interface beside it
/// changes nothing, as the plugin comes first); unknown where every port is one topo assumed
/// without knowing its kind. Else nothing: the default choice stands.
fn source_net(topo: &Topology) -> Option<crate::transport::SourceNet> {
    use crate::transport::SourceNet;
    use topo_model::net_kind::{self, NetKind};
    // Every host alike is the usual case; the evidence is counted on the first host's ports,
    // which are among those of the hosts that answer for themselves (`Topology::asked_nets`).
    let mut nets = topo.asked_nets();
    if let Some(&first) = nets.first() {
        let host = topo.node(first).host;
        nets.retain(|&n| topo.node(n).host == host);
    }
    let calls: Vec<_> = nets
        .iter()
        .filter_map(|&n| net_kind::of_port(topo, n))
        .collect();
    let count = |k: NetKind| calls.iter().filter(|c| c.kind == k).count();
    let first = |k: NetKind| calls.iter().find(|c| c.kind == k).map(|c| c.why.clone());
    let efa = count(NetKind::Efa);
    if efa > 0 && count(NetKind::Ib) == 0 {
        let why = first(NetKind::Efa).unwrap_or_default();
        return Some(SourceNet::Efa(format!(
            "{why}, {efa} such port(s) per host"
        )));
    }
    // A reader marks a socket device `socket`; the properties behind that mark (port 0,
    // maxconn 65536) are the evidence worth naming, where the source has them.
    let by_properties = |n: petgraph::graph::NodeIndex| {
        let mut x = topo.net(n)?.clone();
        x.socket = false;
        Some(net_kind::classify(&x, None)).filter(|c| c.kind == NetKind::Socket)
    };
    let socket: Vec<_> = nets.iter().filter_map(|&n| by_properties(n)).collect();
    if !nets.is_empty() && socket.len() == nets.len() {
        return Some(SourceNet::Socket(socket[0].why.clone()));
    }
    let all_assumed = nets.iter().all(|&n| topo.net(n).is_some_and(|x| x.assumed));
    if !calls.is_empty() && all_assumed && count(NetKind::Unknown) == calls.len() {
        let why = first(NetKind::Unknown).unwrap_or_default();
        return Some(SourceNet::Unknown(format!(
            "{why}: {} port(s) per host assumed on network controllers the source gives by PCI class only",
            calls.len()
        )));
    }
    None
}

fn transport_policy(
    env: &EnvPolicy,
    req: &Inputs,
    topo: &Topology,
    minor: u32,
    ib_none_selected: bool,
) -> TransportPolicy {
    TransportPolicy {
        minor,
        cumem: env.cumem_enable.and_then(|v| {
            if v == -2 || v == -1 {
                None
            } else {
                Some(v > 0)
            }
        }),
        p2p_direct_disable: env.p2p_direct_disable,
        p2p_read_enable: env.p2p_read_enable,
        p2p_use_cuda_memcpy: env.p2p_use_cuda_memcpy,
        net: env.net.clone(),
        fabric: topo.source.fabric,
        ib_disable: env.ib_disable,
        placement: req.placement.clone(),
        cuda_visible_devices: env.cuda_visible_devices.as_ref().map(|v| v.join(",")),
        cuda_driver_version: req.facts.cuda_driver_version,
        ib_available: (ib_none_selected || only_plain_interfaces(topo)).then_some(false),
        source_net: source_net(topo),
        vmm_supported: cuda_attr(topo, |a| a.vmm),
        vmm_gdr_supported: cuda_attr(topo, |a| a.gdr_with_vmm),
        ..TransportPolicy::default()
    }
}

fn path_policy(env: &EnvPolicy, data: &VersionData, req: &Inputs) -> PathPolicy {
    PathPolicy {
        minor: data.minor(),
        nvb_disable: env.nvb_disable,
        p2p_disable: env.p2p_disable,
        p2p_level: env.p2p_level,
        pxn_disable: env.pxn_disable,
        pxn_c2c: Some(env.pxn_c2c_or(data)),
        gdr_level: env.net_gdr_level,
        gdr_read: env.net_gdr_read.filter(|&v| v >= 0).map(|v| v != 0),
        gdr_c2c: Some(env.net_gdr_c2c_or(data)),
        shm_disable: env.shm_disable,
        net_disable_intra: env.net_disable_intra,
        ignore_disabled_p2p: env.ignore_disabled_p2p.unwrap_or(0).clamp(0, 2) as u8,
        isolated_ranks: req.placement.isolates_ranks(),
        max_channels: data.max_channels as usize,
        p2p_use_cuda_memcpy: env.p2p_use_cuda_memcpy,
    }
}

/// The hosts (other than host 0) whose ranks run a search of their own: every node of a host
/// split into several (initTransportsRank, NCCL 2.28.9 src/init.cc, after
/// `ncclTopoTrimSystem`), and every host whose hardware differs from host 0's (each rank
/// searches its own host's topology, `ncclTopoCompute`) where the source holds several
/// hosts that are not copies of one (`alike` otherwise).
fn own_search_hosts(
    (topo, prints): (&Topology, &std::cell::OnceCell<Vec<u64>>),
    system: &System,
    split: bool,
    alike: bool,
) -> Vec<HostId> {
    let with_gpus = (1..system.nhosts as HostId).filter(|&h| !system.host_gpus(h).is_empty());
    if split {
        return with_gpus.collect();
    }
    if alike || system.nhosts < 2 {
        return vec![];
    }
    let prints = prints.get_or_init(|| topo.host_fingerprints());
    with_gpus
        .filter(|&h| prints.get(h as usize) != prints.first())
        .collect()
}

/// The other hosts' own searches ([`own_search_hosts`], under `params_of`) reconciled with
/// host 0's `graphs`, and each host's view for the findings (none for the parts of a split
/// host).
fn reconcile(
    (topo, system, paths): (&Topology, &System, &Paths),
    graphs: &Graphs,
    alike: bool,
    split: bool,
    params_of: impl Fn(HostId) -> SearchParams,
    nvls_on: impl Fn(HostId) -> bool,
) -> (Graphs, Vec<super::hetero::HostView>) {
    // Read by both the choice of hosts that search and their searches: one pass over the
    // machine, made once.
    let prints = std::cell::OnceCell::new();
    let own = &own_search_hosts((topo, &prints), system, split, alike);
    if own.is_empty() {
        return (graphs.clone(), vec![]);
    }
    if split {
        return (
            split_node_graphs(system, paths, graphs, own, params_of),
            vec![],
        );
    }
    let prints = prints.get_or_init(|| topo.host_fingerprints());
    let host_graphs = own_searches((prints, system, paths), own, &params_of);
    let merged = node_graphs(system, graphs, &host_graphs);
    let nvls: Vec<(HostId, bool)> = (0..system.nhosts as HostId)
        .filter(|&h| !system.host_gpus(h).is_empty())
        .map(|h| (h, nvls_on(h)))
        .collect();
    let views = super::hetero::views(topo, system, graphs, &host_graphs, &nvls);
    (merged, views)
}

/// Each other host's own search (`ncclTopoCompute` on its ranks). A host of the same
/// hardware (fingerprint), search parameters and rank layout as one searched before takes
/// that search with its ring and tree orders moved onto its own ranks, as a split node's copy
/// does in [`split_node_graphs`]: each search also reads every system node, so one search per
/// host grew with the square of the hosts (`plan --hosts` of 16,384 alternating dissimilar
/// hosts took 395 s; issue 45). What the reconciliation reads of the others' graphs is their
/// orders and AllGather3's per-graph figures, which such a copy shares.
fn own_searches(
    (prints, system, paths): (&[u64], &System, &Paths),
    own: &[HostId],
    params_of: &impl Fn(HostId) -> SearchParams,
) -> Vec<(HostId, Graphs)> {
    let mut first: HashMap<u64, usize> = HashMap::new();
    let mut out: Vec<(HostId, Graphs)> = Vec::with_capacity(own.len());
    for &h in own {
        let params = params_of(h);
        let key = prints.get(h as usize).copied();
        let copied = key.and_then(|k| first.get(&k)).and_then(|&i| {
            let (s, g) = &out[i];
            if params_of(*s) != params {
                return None;
            }
            let (ring, tree) = moved(system, *s, h, (&g.ring.intra, &g.tree.intra))?;
            let mut g = g.clone();
            g.ring.intra = ring;
            g.tree.intra = tree;
            Some(g)
        });
        let g = match copied {
            Some(g) => g,
            None => {
                if let Some(k) = key {
                    first.entry(k).or_insert(out.len());
                }
                search::compute_all_on(system, paths, &params, h)
            }
        };
        out.push((h, g));
    }
    out
}

/// The nodes of a host split into several, each searching its own domain, reconciled with
/// host 0's `graphs` as [`node_graphs`] does.
///
/// A node whose path tables are another's (`--nodes N` of one machine split per socket:
/// 32,768 parts at 16,384 hosts) finds that node's graphs on its own ranks, so it is searched
/// once and its orders moved onto the copy's ranks; each search also reads every system node
/// (`Links`), so searching every copy grew with the square of the hosts (45 s at 2,048).
fn split_node_graphs(
    system: &System,
    paths: &Paths,
    graphs: &Graphs,
    hosts: &[HostId],
    params_of: impl Fn(HostId) -> SearchParams,
) -> Graphs {
    // Per path-table source, the first node searched for it (host 0 is rank 0's search,
    // made with its own parameters, so it is never a copy's source here).
    let mut searched: HashMap<usize, HostId> = HashMap::new();
    let mut own: Vec<Graphs> = vec![];
    let mut merged_orders = vec![None; system.nhosts];
    merged_orders[0] = Some(orders_of(graphs));
    for &h in hosts {
        let params = params_of(h);
        let copied = searched.get(&paths.tables_of(h as usize)).and_then(|&s| {
            let orders = merged_orders[s as usize].as_ref()?;
            let same = params_of(s) == params;
            same.then(|| moved_orders(system, s, h, orders)).flatten()
        });
        let orders = match copied {
            Some(o) => o,
            None => {
                let g = search::compute_all_on(system, paths, &params, h);
                searched.entry(paths.tables_of(h as usize)).or_insert(h);
                let o = orders_of(&g);
                own.push(g);
                o
            }
        };
        merged_orders[h as usize] = Some(orders);
    }
    // A copy's graphs equal its source's in every field AllGather3 reduces.
    let mut merged = search::all_gather3(graphs, &own);
    merged.node_orders = merged_orders;
    merged
}

/// A node's own orders, tree pattern and ring crossNic, which Postset reads per node.
fn orders_of(g: &Graphs) -> search::NodeOrders {
    search::NodeOrders {
        ring: g.ring.intra.clone(),
        tree: g.tree.intra.clone(),
        tree_pattern: Some(g.tree.pattern),
        ring_cross_nic: g.ring.cross_nic,
    }
}

/// `orders` of node `s` on node `h`'s ranks, where `h` lists its GPUs in the same rank and
/// index order (position by position) as `s`; `None` when it does not.
fn moved_orders(
    system: &System,
    s: HostId,
    h: HostId,
    orders: &search::NodeOrders,
) -> Option<search::NodeOrders> {
    let (ring, tree) = moved(system, s, h, (&orders.ring, &orders.tree))?;
    Some(search::NodeOrders {
        ring,
        tree,
        tree_pattern: orders.tree_pattern,
        ring_cross_nic: orders.ring_cross_nic,
    })
}

/// Per channel, a node's GPUs in ring or tree order.
type Orders = Vec<Vec<usize>>;

/// The ring and tree orders of [`moved_orders`], read from wherever the caller keeps them.
/// Made once per host of a 16,384-host plan, so without copying the hosts' rank lists, and
/// with a rank's place found by subtraction where `s`'s ranks run on one after another.
fn moved(
    system: &System,
    s: HostId,
    h: HostId,
    (ring, tree): (&[Vec<usize>], &[Vec<usize>]),
) -> Option<(Orders, Orders)> {
    let (from, to) = (system.ranks_of(s), system.ranks_of(h));
    if from.len() != to.len() {
        return None;
    }
    let first = from.first().copied().unwrap_or(0);
    let runs_on = from.iter().enumerate().all(|(i, &r)| r == first + i);
    let pos: HashMap<usize, usize> = if runs_on {
        HashMap::new()
    } else {
        from.iter().enumerate().map(|(i, &r)| (r, i)).collect()
    };
    let map = |r: &usize| {
        let i = match runs_on {
            true => r.checked_sub(first).filter(|&i| i < from.len()),
            false => pos.get(r).copied(),
        };
        i.map(|i| to[i])
    };
    let (index_s, index_h) = (system.index_order_of(s), system.index_order_of(h));
    if index_s.len() != index_h.len()
        || !index_s.iter().zip(index_h).all(|(r, &x)| map(r) == Some(x))
    {
        return None;
    }
    let move_all = |chs: &[Vec<usize>]| -> Option<Orders> {
        chs.iter().map(|c| c.iter().map(map).collect()).collect()
    };
    Some((move_all(ring)?, move_all(tree)?))
}

/// AllGather3 over host 0's graphs and the other nodes' own searches (`search::all_gather3`);
/// each node that searched keeps its own ring and tree orders and tree pattern.
fn node_graphs(system: &System, graphs: &Graphs, own: &[(HostId, Graphs)]) -> Graphs {
    let mut merged = search::all_gather3(graphs, own.iter().map(|(_, g)| g));
    merged.node_orders = vec![None; system.nhosts];
    let host0 = std::iter::once((0, graphs));
    for (h, g) in host0.chain(own.iter().map(|(h, g)| (*h, g))) {
        merged.node_orders[h as usize] = Some(orders_of(g));
    }
    merged
}

/// Records what the channel-count variables changed: the channel line with the variable
/// against the line without it (everything else as set).
fn note_channel_effects(
    env: &mut EnvPolicy,
    sys: &System,
    paths: &Paths,
    graphs: &Graphs,
    params: &ChannelParams,
    counts: &ChannelCounts,
) {
    type Reset = fn(&mut ChannelParams, &ChannelParams);
    let knobs: [(&[&str], Reset); 10] = [
        (&["NCCL_MIN_NCHANNELS", "NCCL_MIN_NRINGS"], |p, _| {
            p.min_nchannels = None
        }),
        (&["NCCL_MAX_NCHANNELS", "NCCL_MAX_NRINGS"], |p, _| {
            p.max_nchannels = None
        }),
        (&["NCCL_MIN_CTAS"], |p, d| p.min_ctas = d.min_ctas),
        (&["NCCL_MAX_CTAS"], |p, d| p.max_ctas = d.max_ctas),
        (&["NCCL_NVLS_NCHANNELS"], |p, _| p.nvls_nchannels = None),
        (&["NCCL_NCHANNELS_PER_NET_PEER"], |p, _| {
            p.nchannels_per_net_peer = None
        }),
        (&["NCCL_P2P_PER_CHANNEL_NET_BW"], |p, d| {
            p.p2p_per_channel_net_bw = d.p2p_per_channel_net_bw
        }),
        (&["NCCL_P2P_MAX_PEERS"], |p, _| p.p2p_max_peers = None),
        (&["NCCL_MIN_P2P_NCHANNELS"], |p, d| {
            p.min_p2p_nchannels = d.min_p2p_nchannels
        }),
        (&["NCCL_MAX_P2P_NCHANNELS"], |p, _| {
            p.max_p2p_nchannels = None
        }),
    ];
    let defaults = ChannelParams::for_version(params.minor);
    for (vars, reset) in knobs {
        let Some(var) = vars.iter().find(|v| env.is_set(v)) else {
            continue;
        };
        let mut p = params.clone();
        reset(&mut p, &defaults);
        let without = channels::comm_channels(sys, paths, graphs, &p);
        if without.log_line() != counts.log_line() {
            env.note_effect(
                var,
                format!("{} (without it: {})", counts.log_line(), without.log_line()),
            );
        }
    }
}

/// Records what the P2P/SHM/GDR variables changed, in the words the plan's `env[]` shows.
/// Ends the reason of a pair that NCCL splits into different nodes of one host.
const SPLIT_MARK: &str = "; NCCL therefore counts the two GPUs as different nodes";

fn note_path_effects(
    env: &mut EnvPolicy,
    sys: &System,
    paths: &Paths,
    pol: &PathPolicy,
    pairs: &[PairTransport],
) {
    // Pairs of one physical host, including those NCCL split into different nodes.
    let local: Vec<&PairTransport> = pairs
        .iter()
        .filter(|p| !p.inter_node || p.reason.ends_with(SPLIT_MARK))
        .collect();
    let shm = local.iter().filter(|p| p.transport.is_shm()).count();
    let net = local.iter().filter(|p| p.transport.is_net()).count();
    let anomalies = local.iter().filter(|p| p.anomaly.is_some()).count();
    let total = local.len();
    let nvl_refused = format!(
        "{shm} of {total} GPU pairs within a host use SHM and {net} use NET{}",
        if anomalies > 0 {
            format!("; {anomalies} of them are NVLink-connected")
        } else {
            String::new()
        }
    );
    if env.is_set("NCCL_P2P_DISABLE") && pol.p2p_disable {
        env.note_effect("NCCL_P2P_DISABLE", format!("P2P level LOC: {nvl_refused}"));
    }
    if env.is_set("NCCL_P2P_LEVEL") && !pol.p2p_disable {
        let lvl = pol.p2p_level.map(|l| l.name()).unwrap_or("?");
        env.note_effect(
            "NCCL_P2P_LEVEL",
            format!("P2P allowed up to {lvl}: {nvl_refused}"),
        );
    }
    if env.is_set("NCCL_SHM_DISABLE") && pol.shm_disable {
        env.note_effect("NCCL_SHM_DISABLE", format!("SHM refused: {nvl_refused}"));
    }
    if env.is_set("NCCL_NET_GDR_LEVEL") {
        let gdr = pairs.iter().filter(|p| p.inter_node && p.gdr()).count();
        let inter = pairs.iter().filter(|p| p.inter_node).count();
        env.note_effect(
            "NCCL_NET_GDR_LEVEL",
            format!("GPUDirect RDMA on {gdr} of {inter} inter-node connections"),
        );
    }
    if env.is_set("NCCL_PXN_DISABLE") && pol.pxn_disable {
        let phb = sys
            .gpus
            .iter()
            .flat_map(|&g| sys.nets.iter().map(move |&n| (g, n)))
            .filter(|&(g, n)| paths.ty(g, n) >= PathType::Phb && paths.ty(g, n) < PathType::Net)
            .count();
        env.note_effect(
            "NCCL_PXN_DISABLE",
            format!("no PXN: {phb} GPU→NIC paths cross the CPU"),
        );
    }
    if let Some(f) = env.value("NCCL_TOPO_FILE").map(str::to_string) {
        env.note_effect(
            "NCCL_TOPO_FILE",
            format!("NCCL starts from this topology file; this plan uses the source topo was given (give topo {f} as its source to plan what NCCL will see)"),
        );
    }
    if env.is_set("NCCL_GRAPH_FILE") {
        env.note_effect(
            "NCCL_GRAPH_FILE",
            "NCCL loads its rings and trees from this file instead of searching; topo does not read it, so the graphs shown are NCCL's own search",
        );
    }
    if env.is_set("CUDA_VISIBLE_DEVICES") {
        env.note_effect(
            "CUDA_VISIBLE_DEVICES",
            "per-process visibility: NCCL still connects invisible peers with P2P (CUDA >= 10.1)",
        );
    }
}

/// The analysis of `topo` under `env` at `version` (CUDA driver 12.8), for tests: on a 64 MiB
/// stack, as the binary's main thread has, since the graph search recurses per GPU and
/// 2.30 gives each GPU a DEV node that holds its NVLinks, and `ncclTopoTrimSystem` removes the
/// GPUs of the other nodes of a split host but not their DEV nodes (v2.30.7-1
/// src/graph/paths.cc, src/graph/topo.cc `ncclTopoRemoveNode`). A path between two kept GPUs
/// can still relay through such a DEV (GPU-DEV-DEV-DEV-GPU); `ncclTopoCheckP2p` then asks for
/// the relay's rank in the trimmed system (`ncclTopoDevToRank`), finds none, and init fails
/// ("ncclTopoDevToRank could not find rank for nvml dev N"; nccl-oracle 2.30.7, sweep seed 143).
/// The pairs `[a, b, relay]` whose one-GPU relay is in another node, from the paths before the
/// split, which still route through it.
fn trimmed_relays(sys: &System, paths: &Paths, domains: &[Vec<usize>]) -> Vec<[usize; 3]> {
    let mut node_of = vec![usize::MAX; sys.gpus.len()];
    for (d, ranks) in domains.iter().enumerate() {
        for &r in ranks {
            node_of[r] = d;
        }
    }
    let rank_of = |n: usize| sys.nodes[n].gpu.as_ref().map(|g| g.rank);
    let mut out = vec![];
    for ranks in domains {
        for &a in ranks {
            for &b in ranks.iter().filter(|&&b| b != a) {
                let inner: Vec<usize> = paths.interior(sys.gpus[a], sys.gpus[b]).collect();
                if let [relay] = inner[..]
                    && let Some(r) = rank_of(relay)
                    && node_of.get(r) != Some(&node_of[a])
                {
                    out.push([a, b, r]);
                }
            }
        }
    }
    out
}

/// channel and a 16-GPU clique needs more than a test thread's 2 MiB in unoptimised builds.
#[cfg(test)]
pub(crate) fn analyze_on_big_stack(
    topo: &Topology,
    env: &[(&str, &str)],
    version: &str,
) -> Analysis {
    let req = Request {
        topo,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        version: NcclVersion::parse(version).unwrap(),
        placement: RankPlacement::ProcessPerGpu,
        facts: RuntimeFacts {
            cuda_driver_version: Some(12080),
        },
    };
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn_scoped(s, || analyze(&req).unwrap())
            .unwrap()
            .join()
            .unwrap()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{P2p, Transport};
    use topo_model::testing::hgx;

    fn run(topo: &Topology, env: &[(&str, &str)], version: &str) -> Analysis {
        let req = Request {
            topo,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            version: NcclVersion::parse(version).unwrap(),
            placement: RankPlacement::ProcessPerGpu,
            facts: RuntimeFacts {
                cuda_driver_version: Some(12040),
            },
        };
        analyze(&req).unwrap()
    }

    /// Issue 44: plain interfaces (no verbs device) are never IB ports; NCCL falls back to
    /// its socket plugin.
    #[test]
    fn plain_interfaces_only_mean_net_socket() {
        let mut t = hgx(8, 90).replicate(2);
        let inter = |a: &Analysis| -> Vec<Transport> {
            a.transports
                .iter()
                .filter(|p| p.inter_node)
                .map(|p| p.transport.clone())
                .collect()
        };
        let ib = run(&t, &[], "2.28");
        assert!(!inter(&ib).is_empty());
        assert!(
            inter(&ib)
                .iter()
                .all(|x| *x == Transport::Net(crate::transport::Net::Ib))
        );
        for n in t.nets() {
            if let topo_model::NodeKind::Net(x) = &mut t.node_mut(n).kind {
                x.socket = true;
            }
        }
        let plain = run(&t, &[], "2.28");
        assert!(
            inter(&plain)
                .iter()
                .all(|x| *x == Transport::Net(crate::transport::Net::Socket)),
            "{:?}",
            inter(&plain)
        );
    }

    /// An HGX whose ports are plain interfaces named `names` (the rest stay IB ports where
    /// `names` is shorter), on two hosts.
    fn interfaces(names: &[&str]) -> Topology {
        let mut t = hgx(8, 90);
        for (n, name) in t.nets().into_iter().zip(names) {
            if let topo_model::NodeKind::Net(x) = &mut t.node_mut(n).kind {
                x.socket = true;
                x.name = name.to_string();
            }
        }
        t.replicate(2)
    }

    fn system_nets(a: &Analysis) -> Vec<String> {
        let mut v: Vec<String> = a
            .system
            .nets
            .iter()
            .filter_map(|&i| a.system.nodes[i].net.as_ref().map(|x| x.name.clone()))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// ncclFindInterfaces (NVIDIA/nccl v2.28.9-1 src/misc/socket.cc): without
    /// NCCL_SOCKET_IFNAME, no `ib*` interface, so every interface but docker*/lo*/virbr*;
    /// veth* and cali* are not left out. Before, docker0 was a NET device of the plan.
    #[test]
    fn socket_plans_use_the_interfaces_nccl_finds() {
        let names = [
            "docker0", "eth0", "veth1", "cali2", "lo", "virbr0", "eth1", "eth2",
        ];
        let t = interfaces(&names);
        let a = run(&t, &[], "2.28");
        assert_eq!(system_nets(&a), ["cali2", "eth0", "eth1", "eth2", "veth1"]);
        assert_eq!(a.socket_ifaces.len(), 1, "{:?}", a.socket_ifaces);
        let (none, text) = &a.socket_ifaces[0];
        assert!(!none);
        assert!(
            text.contains("every interface but docker*, lo* and virbr*"),
            "{text}"
        );
        assert!(text.contains("the bootstrap uses eth0"), "{text}");
        assert!(text.contains("left out docker0, lo, virbr0"), "{text}");
        let d = run(&t, &[("NCCL_SOCKET_IFNAME", "docker")], "2.28");
        assert_eq!(system_nets(&d), ["docker0"]);
        assert!(d.env.notes("NCCL_SOCKET_IFNAME")[0].contains("kept docker0"));
        let x = run(&t, &[("NCCL_SOCKET_IFNAME", "^eth,veth,cali")], "2.28");
        assert_eq!(system_nets(&x), ["docker0", "lo", "virbr0"]);
        // Nothing matches: NCCL's init fails; the plan keeps the ports and warns.
        let f = run(&t, &[("NCCL_SOCKET_IFNAME", "=bond0")], "2.28");
        assert!(f.socket_ifaces[0].0);
        assert!(f.socket_ifaces[0].1.contains("init fails"));
    }

    /// With IB ports present NCCL's IB plugin is the network and lists verbs devices only
    /// (ncclIbInitDevices, net_ib.cc, NCCL 2.28.9-1): a plain interface beside them is no
    /// NET device, though the bootstrap may still use it.
    #[test]
    fn plain_interfaces_beside_ib_ports_are_not_net_devices() {
        let t = interfaces(&["eth0"]);
        let a = run(&t, &[], "2.28");
        let nets = system_nets(&a);
        assert!(!nets.contains(&"eth0".to_string()), "{nets:?}");
        assert_eq!(nets.len(), 7, "{nets:?}");
        assert!(a.socket_ifaces[0].1.contains("the bootstrap uses eth0"));
        assert!(
            a.transports
                .iter()
                .filter(|p| p.inter_node)
                .all(|p| p.transport == Transport::Net(crate::transport::Net::Ib))
        );
    }

    #[test]
    fn hgx_h100_reproduces_the_logged_channel_line() {
        let t = hgx(8, 90);
        let a = run(&t, &[], "2.28");
        assert_eq!(
            a.counts.log_line(),
            "24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer"
        );
        assert!(
            a.transports
                .iter()
                .filter(|p| !p.inter_node)
                .all(|p| p.transport == Transport::P2p(P2p::Cumem))
        );
    }

    /// NCCL_MIN_CTAS above NCCL_MAX_CTAS: NCCL lowers the minimum to the maximum (nccl-oracle,
    /// NCCL 2.28.9: `NCCL_MIN_CTAS=7 NCCL_MAX_CTAS=6` gives 6 coll channels, not 7).
    #[test]
    fn min_ctas_above_max_ctas_is_lowered_to_it() {
        let t = hgx(8, 90);
        let a = run(
            &t,
            &[("NCCL_MIN_CTAS", "32"), ("NCCL_MAX_CTAS", "8")],
            "2.28",
        );
        assert!(
            a.counts.log_line().starts_with("8 coll channels"),
            "{}",
            a.counts.log_line()
        );
    }

    #[test]
    fn p2p_disable_turns_nvlink_pairs_into_shm_with_the_variable_named() {
        let t = hgx(8, 90);
        let a = run(&t, &[("NCCL_P2P_DISABLE", "1")], "2.28");
        let local: Vec<_> = a.transports.iter().filter(|p| !p.inter_node).collect();
        assert!(local.iter().all(|p| p.transport == Transport::Shm));
        assert!(local.iter().all(|p| p.reason.contains("NCCL_P2P_DISABLE")));
        assert!(local.iter().all(|p| p.anomaly.is_some()));
        let e = a.env.effects();
        let ent = e.iter().find(|x| x.name == "NCCL_P2P_DISABLE").unwrap();
        assert!(
            ent.effect.as_deref().unwrap_or("").contains("56 of 56"),
            "{ent:?}"
        );
    }

    #[test]
    fn containers_with_own_host_hash_become_nodes() {
        let t = hgx(2, 90);
        let req = Request {
            topo: &t,
            env: vec![],
            version: NcclVersion::parse("2.27").unwrap(),
            placement: RankPlacement::ContainerPerGpu {
                common_host_id: false,
                shared_shm: false,
            },
            facts: RuntimeFacts::default(),
        };
        let a = analyze(&req).unwrap();
        assert_eq!(a.nnodes, 2);
        assert_eq!(a.nranks, 2);
        assert!(a.transports.iter().all(|p| p.transport.is_net()));
    }

    #[test]
    fn channel_variables_say_what_they_changed() {
        let t = hgx(8, 90);
        let a = run(&t, &[("NCCL_MAX_NCHANNELS", "8")], "2.28");
        assert_eq!(a.counts.coll, 8);
        let e = a.env.effects();
        let ent = e.iter().find(|x| x.name == "NCCL_MAX_NCHANNELS").unwrap();
        let effect = ent.effect.as_deref().unwrap_or("");
        assert!(effect.starts_with("8 coll channels"), "{effect}");
        assert!(effect.contains("without it: 24 coll channels"), "{effect}");
        // A value that changes nothing says nothing.
        let a = run(&t, &[("NCCL_MAX_NCHANNELS", "32")], "2.28");
        let e = a.env.effects();
        let ent = e.iter().find(|x| x.name == "NCCL_MAX_NCHANNELS").unwrap();
        assert!(ent.effect.is_none(), "{ent:?}");
    }

    #[test]
    fn file_variables_say_what_they_do() {
        let t = hgx(2, 90);
        let a = run(
            &t,
            &[("NCCL_TOPO_FILE", "/x.xml"), ("NCCL_GRAPH_FILE", "/g.xml")],
            "2.28",
        );
        let e = a.env.effects();
        let topo_file = e.iter().find(|x| x.name == "NCCL_TOPO_FILE").unwrap();
        assert!(
            topo_file
                .effect
                .as_deref()
                .unwrap()
                .contains("give topo /x.xml as its source")
        );
        let graph_file = e.iter().find(|x| x.name == "NCCL_GRAPH_FILE").unwrap();
        assert!(
            graph_file
                .effect
                .as_deref()
                .unwrap()
                .contains("instead of searching")
        );
    }

    #[test]
    fn cuda_versions_parse() {
        assert_eq!(parse_cuda_version("12.4"), Some(12040));
        assert_eq!(parse_cuda_version("11"), Some(11000));
        assert_eq!(parse_cuda_version("x"), None);
    }
}
