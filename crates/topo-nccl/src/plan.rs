//! The Plan: everything the analysis decided for one machine, environment and NCCL version,
//! as one serialisable document (`topo.plan/v3`), plus its exports (tuner CSV, NCCL graph XML),
//! each written only when asked.
//! Pure: the caller gathers the request (flags, process environment, installed NCCL) and
//! renders the result.

use crate::analyze::{self, Analysis, Request, RuntimeFacts};
use crate::env::EnvEntry;
use crate::error::{Error, ErrorKind, Result};
use crate::graph::Graph;
use crate::measured;
use crate::transport::view::{self as transport_view, TransportSummary};
use crate::transport::{PairTransport, RankPlacement, Transport};
use crate::tuning::{self, Choice, Costs, OpContext};
use crate::types::{Algorithm, Collective, PathType, Protocol};
use crate::version::NcclVersion;
use serde::Serialize;
use std::collections::BTreeMap;
use topo_model::message::Code;
use topo_model::message::{Finding, Severity};
use topo_model::stated::{GpuModel, NvlinkShape};
use topo_model::{SourceInfo, SourceKind, Topology};
use topo_vocab::Fabric;

/// What the user asked for, parsed and checked.
#[derive(Clone, Debug)]
pub struct PlanRequest {
    pub funcs: Vec<Collective>,
    pub sizes: Vec<u64>,
    pub version: NcclVersion,
    pub version_source: String,
    pub placement: RankPlacement,
    pub env: Vec<(String, String)>,
    /// Variables whose value in force came from the source rather than the process or
    /// `--env` (a profile's `host.env`), with that origin.
    pub env_origin: BTreeMap<String, String>,
    pub explain: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Channels {
    pub coll: usize,
    pub nvls: usize,
    pub collnet: usize,
    pub p2p: usize,
    pub p2p_per_peer: usize,
    /// The line NCCL logs at init.
    pub log_line: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct GraphOut {
    /// `ring`, `balanced_tree`, `split_tree`, `tree`, `nvls`, `collnet_direct`.
    pub pattern: String,
    /// NCCL's numeric pattern (`Pattern 4` in its log).
    pub pattern_id: u32,
    pub nchannels: usize,
    pub bw_intra: f64,
    pub bw_inter: f64,
    pub type_intra: PathType,
    pub type_inter: PathType,
    pub same_channels: bool,
    pub cross_nic: u8,
    /// GPU ranks of one node per channel, in order (NVLS: the head).
    pub channels: Vec<Vec<usize>>,
    /// NET names entering and leaving each channel (inter-node graphs).
    pub nets: Vec<(String, String)>,
    /// NCCL's graph print.
    pub log: Vec<String>,
    /// Per channel, the first and last NET the print names (`None`: it names none); what the
    /// what-if compares, so that it never reads the printed lines back.
    #[serde(skip)]
    pub net_ends: Vec<Option<(String, String)>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Graphs {
    pub ring: GraphOut,
    pub tree: GraphOut,
    pub nvls: Option<GraphOut>,
    pub collnet: Option<GraphOut>,
    pub collnet_direct: Option<GraphOut>,
}

/// One channel's tree, a column per field indexed by rank: one record per rank and channel
/// was most of the document at 131,072 GPUs (297 MB of 344 on 9,288 AWS p5 nodes).
#[derive(Clone, Debug, Serialize)]
pub struct TreeOut {
    pub channel: usize,
    /// `up[r]`: rank r's parent, -1 for a root.
    pub up: Vec<i64>,
    /// `down[3r..3r + 3]`: rank r's children (NCCL_MAX_TREE_ARITY is 3), -1 for none.
    pub down: Vec<i64>,
}

impl TreeOut {
    /// Rank `r`'s children, -1 for none.
    pub fn children(&self, r: usize) -> Option<&[i64]> {
        self.down.get(3 * r..3 * r + 3)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub collective: Collective,
    pub bytes: u64,
    /// Elements per rank as nccl-tests prints `count` (float32).
    pub count: u64,
    #[serde(serialize_with = "topo_vocab::printed")]
    pub algo: Algorithm,
    pub proto: Protocol,
    pub nchannels: usize,
    pub nthreads: u32,
    /// NCCL's cost-model time, what NCCL selects by (not a measurement).
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// What nccl-tests would measure for this choice: NCCL's time corrected by topo's
    /// measured-behaviour layer (`measured.rs`), and where its constants came from.
    pub expected_time_us: f64,
    pub expected_busbw_gbps: f64,
    pub expected_basis: String,
    /// The busbw band a healthy machine measures in (`measured.rs`, leave-one-source-out);
    /// None where no published result was measured under the plan's conditions.
    pub expected_busbw_low_gbps: Option<f64>,
    pub expected_busbw_high_gbps: Option<f64>,
    pub expected_band_basis: String,
    /// The runner-up and by how much it lost.
    pub runner_up: Option<String>,
    pub explain: Vec<String>,
}

/// One line of the tuner CSV: sizes `min..=max` of one collective get one choice.
#[derive(Clone, Debug, PartialEq)]
pub struct TunerRow {
    pub collective: Collective,
    pub min: u64,
    pub max: u64,
    pub algo: Algorithm,
    pub proto: Protocol,
    pub nchannels: usize,
}

/// The first size at which the choice changes.
#[derive(Clone, Debug, Serialize)]
pub struct Crossover {
    pub collective: String,
    pub bytes: u64,
    pub from: String,
    pub to: String,
}

/// The MNNVL decision in the document: which hosts NCCL fused into which node.
#[derive(Clone, Debug, Serialize)]
pub struct MnnvlOut {
    /// Hosts the launcher runs on.
    pub hosts: usize,
    /// Per NCCL node, the launcher's hosts it holds.
    pub cliques: Vec<Vec<usize>>,
    /// GPUs in rank 0's clique and its clique id (NVML's, or NCCL_MNNVL_CLIQUE_ID's).
    pub clique_size: usize,
    pub clique_id: u32,
}

/// What failed or degraded parts change in a plan.
#[derive(Clone, Debug, Serialize)]
pub struct FaultEffects {
    /// How many parts were failed or degraded.
    pub parts: usize,
    /// Against the healthy machine, as `whatif::compare` words it; empty: nothing changes.
    pub changes: Vec<String>,
}

/// The same machine and request planned for another NCCL version.
#[derive(Clone, Debug, Serialize)]
pub struct Against {
    /// The other version (`2.27`).
    pub nccl_version: String,
    /// What differs in the plan, one line each (channels, transports, NICs, the choice and
    /// predicted time per collective and size), as `whatif::compare` words it; empty: nothing.
    pub changes: Vec<String>,
    /// The per-version constants and rules that differ (`tuning.base_latency.pat: [...] ->
    /// [...]`): the data behind the changes.
    pub data_changes: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub schema: &'static str,
    /// `--against V`: what changes in this plan under another NCCL version, and the version
    /// data that differs between the two.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<Against>,
    /// `--without`/`--degrade`: what the failed and degraded parts (listed in
    /// `source.stated`) change against the healthy machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<FaultEffects>,
    /// The topo that wrote the document (the crate version).
    pub topo_version: &'static str,
    pub nccl_version: String,
    /// Why this version: the flag, the library found on the machine, or the default.
    pub nccl_version_source: String,
    /// Whether the version's data was read from NCCL's source in full (else inherited).
    pub nccl_version_documented: bool,
    pub source: SourceInfo,
    pub nranks: usize,
    pub nnodes: usize,
    pub ranks_per_node: Vec<usize>,
    /// Multi-node NVLink, when NCCL turns it on: several hosts counted as one node each clique.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mnnvl: Option<MnnvlOut>,
    pub placement: String,
    pub gpu: Option<String>,
    pub channels: Channels,
    pub graphs: Graphs,
    /// Rank order per collective channel.
    pub rings: Vec<Vec<usize>>,
    pub trees: Vec<TreeOut>,
    /// Every connection, one entry per pair: what the renderers and the what-if compare read.
    /// The document carries it only on request (`transport_pairs`), grouped otherwise.
    #[serde(skip)]
    pub transports: Vec<PairTransport>,
    /// The connections grouped by class, serialised as `transports`: linear in the GPUs and
    /// each reason stated once.
    #[serde(rename = "transports")]
    pub transport_classes: Vec<TransportClass>,
    /// Each distinct reason text once; `TransportClass::reason` indexes it.
    pub reasons: Vec<String>,
    /// The per-pair listing, only when asked for (`topo plan --transports pairs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport_pairs: Option<Vec<PairTransport>>,
    pub transport_summary: TransportSummary,
    /// `Check P2P Type …` as NCCL logs it on this version, where it does.
    pub p2p_type: Option<String>,
    pub costs: Costs,
    /// Rule and constants behind each usable cost cell: `costs_explain[func][algo][proto]`.
    pub costs_explain: BTreeMap<String, BTreeMap<String, BTreeMap<String, Vec<String>>>>,
    /// Why each unusable cell is unusable.
    pub costs_disabled: BTreeMap<String, BTreeMap<String, BTreeMap<String, Vec<String>>>>,
    pub table: Vec<Row>,
    pub crossovers: Vec<Crossover>,
    pub env: Vec<EnvEntry>,
    /// NCCL INFO lines this plan predicts (channels, rings, trees, thresholds).
    pub log: Vec<String>,
    pub warnings: Vec<String>,
    /// `warnings` again with codes and severities, plus one line per kind of transport
    /// anomaly (docs/codes.md).
    pub messages: Vec<Finding>,
    #[serde(skip)]
    pub explain: bool,
    #[serde(skip)]
    pub tuning_log: String,
    #[serde(skip)]
    pub transport_matrix: TransportMatrices,
    /// Exact size ranges of each (algorithm, protocol, channels) choice, for the tuner CSV.
    #[serde(skip)]
    pub tuner_rows: Vec<TunerRow>,
    /// The graphs as NCCL's graph file lists them (host 0's devices), for [`graph_xml`].
    #[serde(skip)]
    pub graph_file: crate::graphfile::GraphFile,
}

/// Every connection with the same transport, path type, reason, sending NIC and anomaly.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TransportClass {
    pub transport: Transport,
    /// GPU→GPU path type; `None` across hosts.
    pub path: Option<PathType>,
    /// Index into `Plan::reasons`.
    pub reason: usize,
    /// The NIC every pair of the class sends on (the same name on every host), `None` for
    /// P2P and SHM.
    pub nic: Option<String>,
    /// Set when NVLink-connected GPUs do not use P2P (or only appear to), with the fix.
    pub anomaly: Option<String>,
    pub count: usize,
    /// `[from, to]` ranks, in the order of the per-pair listing.
    pub pairs: Vec<[usize; 2]>,
}

/// Groups `pairs` into classes (in order of first appearance) and the distinct reasons (in
/// the same order): linear in the pairs, with a hash lookup per pair.
pub fn transport_classes(pairs: &[PairTransport]) -> (Vec<TransportClass>, Vec<String>) {
    use topo_model::fast::HashMap;
    let mut reasons: Vec<String> = vec![];
    let mut reason_of: HashMap<&str, usize> = HashMap::default();
    let mut classes: Vec<TransportClass> = vec![];
    type Key<'a> = (
        &'a Transport,
        Option<PathType>,
        usize,
        Option<&'a str>,
        Option<&'a str>,
    );
    let mut class_of: HashMap<Key, usize> = HashMap::default();
    // Reasons are shared strings: hashing the address first skips hashing a sentence per
    // pair (a tenth of this function's time at a million pairs); equal texts behind
    // different addresses still meet in `reason_of`.
    let mut reason_at: HashMap<*const u8, usize> = HashMap::default();
    for t in pairs {
        let reason = *reason_at.entry(t.reason.as_ptr()).or_insert_with(|| {
            *reason_of.entry(&*t.reason).or_insert_with(|| {
                reasons.push(t.reason.to_string());
                reasons.len() - 1
            })
        });
        let key = (&t.transport, t.path, reason, t.nic(), t.anomaly.as_deref());
        let i = *class_of.entry(key).or_insert_with(|| {
            classes.push(TransportClass {
                transport: t.transport.clone(),
                path: t.path,
                reason,
                nic: t.nic().map(String::from),
                anomaly: t.anomaly.as_deref().map(String::from),
                count: 0,
                pairs: vec![],
            });
            classes.len() - 1
        });
        let c = &mut classes[i];
        c.count += 1;
        c.pairs.push([t.from, t.to]);
    }
    (classes, reasons)
}

fn pattern_name(g: &Graph) -> &'static str {
    use crate::types::Pattern::*;
    match g.pattern {
        BalancedTree => "balanced_tree",
        SplitTree => "split_tree",
        Tree => "tree",
        Ring => "ring",
        Nvls => "nvls",
        CollnetDirect => "collnet_direct",
    }
}

fn graph_out(a: &Analysis, g: &Graph) -> GraphOut {
    let net_name = |i: usize| {
        a.system
            .nets
            .get(i)
            .and_then(|&n| a.system.nodes[n].net.as_ref())
            .map(|x| x.name.clone())
            .unwrap_or_default()
    };
    GraphOut {
        pattern: pattern_name(g).into(),
        pattern_id: g.pattern.number(),
        nchannels: g.n_channels,
        bw_intra: g.bw_intra,
        bw_inter: g.bw_inter,
        type_intra: g.type_intra,
        type_inter: g.type_inter,
        same_channels: g.same_channels,
        cross_nic: g.cross_nic,
        // NVLS channels hold their head GPU only; the rest of NCCL's per-channel array is unused.
        channels: if g.pattern == crate::types::Pattern::Nvls {
            g.intra
                .iter()
                .map(|c| c.iter().take(1).copied().collect())
                .collect()
        } else {
            g.intra.clone()
        }
        .into_iter()
        .map(|c| c.into_iter().map(|r| a.launcher_rank(r)).collect())
        .collect(),
        nets: g
            .inter
            .iter()
            .map(|&(x, y)| (net_name(x), net_name(y)))
            .collect(),
        log: a.graph_lines(g),
        net_ends: a.graph_net_ends(g),
    }
}

/// Whether an optional graph (NVLS, CollNet) is one NCCL uses: without channels (no NVSwitch
/// multicast, no CollNet) NCCL disables the algorithm, so the plan shows null.
fn searched(g: &Graph) -> bool {
    g.n_channels > 0
}

fn label(a: Algorithm, p: Protocol) -> String {
    format!("{}/{}", a.name(), p.name())
}

/// nccl-tests' per-rank element count for a float32 buffer of `bytes`.
fn count_of(f: Collective, bytes: u64, nranks: usize) -> u64 {
    let elems = bytes / 4;
    match f {
        Collective::AllGather | Collective::ReduceScatter => elems / nranks.max(1) as u64,
        _ => elems,
    }
}

/// The fabric between the plan's nodes, whose `name()` keys `data/measured.yaml`: the socket
/// transport where NCCL uses it (an `NCCL_NET=Socket` or no usable NIC outranks whatever the
/// machine has); else the fabric stated by flag, profile or the result's environment (the
/// topology's `source.fabric`, laid on by `netfacts`); only where nothing is stated, the guess
/// from the network ports ([`guess_fabric`]).
fn fabric_of(a: &Analysis) -> Fabric {
    if a.transports.iter().any(|t| t.transport.is_socket()) {
        return Fabric::Socket;
    }
    a.topo
        .source
        .fabric
        .unwrap_or_else(|| guess_fabric(&a.topo))
}

/// The fabric the ports suggest where none is stated, the one place topo guesses it: EFA
/// devices (`topo_model::net_kind`: `rdmap*`/`efa*` names, Amazon EFA PCI ids), Slingshot CXI `cxi*`/`hsn*`; InfiniBand where any port runs it,
/// RoCE where every port with a stated link layer is Ethernet (a machine's storage and
/// front-end ports are often Ethernet beside InfiniBand compute rails); else InfiniBand.
///
/// Only the hosts that answer for themselves are read ([`Topology::asked_nodes`]): an
/// unchanged copy's ports repeat the model copy's, which come first in node order, so the
/// first EFA or Slingshot port and the link layers seen are the same.
fn guess_fabric(t: &Topology) -> Fabric {
    let (mut ib, mut ethernet) = (false, false);
    for n in t.asked_nodes() {
        if let topo_model::NodeKind::Net(net) = &t.graph[n].kind {
            let name = net.name.as_str();
            if topo_model::net_kind::of_port(t, n)
                .is_some_and(|c| c.kind == topo_model::net_kind::NetKind::Efa)
            {
                return Fabric::Efa;
            }
            if name.starts_with("cxi") || name.starts_with("hsn") {
                return Fabric::Slingshot;
            }
            match net.link_layer.as_deref() {
                Some(l) if l.eq_ignore_ascii_case("ethernet") => ethernet = true,
                Some(l) if l.eq_ignore_ascii_case("infiniband") => ib = true,
                _ => {}
            }
        }
    }
    if ethernet && !ib {
        Fabric::Roce
    } else {
        Fabric::Ib
    }
}

/// Where this plan leaves the conditions of the published results (`measured::outside_fits`).
/// A setting at NCCL's own default leaves nothing: the run is NCCL's default run.
fn fit_departures(a: &Analysis, req: &PlanRequest) -> Vec<String> {
    let socket = a
        .transports
        .iter()
        .filter(|t| t.transport.is_socket())
        .count();
    let given: Vec<(String, String)> = req
        .env
        .iter()
        .filter(|(k, _)| !at_nccl_default(a, k))
        .cloned()
        .collect();
    measured::outside_fits(&given, socket)
}

/// Whether the plan's value of `key` is the one NCCL takes when it is unset. NCCL_BUFFSIZE: 4
/// MiB, 1 MiB on an ARM host in 2.18 (`computeBuffSizes`, src/init.cc, v2.18.6-1; 2.19 dropped
/// the ARM case), read from the host of rank 0 as NCCL reads its own.
fn at_nccl_default(a: &Analysis, key: &str) -> bool {
    let b = &a.data.buffers;
    let arm = a
        .system
        .host_cpu(0)
        .is_some_and(|c| c.arch == topo_model::CpuArch::Arm);
    let simple = b.simple_arm.filter(|_| arm).unwrap_or(b.simple);
    match key {
        "NCCL_BUFFSIZE" => a.env.buffsize == i64::try_from(simple).ok(),
        _ => false,
    }
}

/// The choice's bandwidth on two nodes of the same machine: NCCL's two-node figure for its
/// algorithm and protocol, with the size correction the choice carries (the ratio of the
/// choice's bandwidth to its table's, which depends on the size only).
fn two_nodes(a: &Analysis, c: &Choice) -> Option<measured::TwoNodes> {
    let two = a.two_node_costs.as_ref()?;
    let here = a.costs.bw(c.func, c.algo, c.proto).filter(|&b| b > 0.0)?;
    let there = two.bw(c.func, c.algo, c.proto)?;
    Some(measured::TwoNodes {
        nranks: two.nranks,
        bw: c.bw * there / here,
    })
}

/// For a multi-node NVLS or NVLSTree choice, NCCL's choice for the same size on node 0 alone
/// ([`Analysis::one_node`]), which the measured layer bounds it with.
fn one_node_choice(a: &Analysis, c: &Choice, op: &OpContext) -> Option<Choice> {
    if !matches!(c.algo, Algorithm::Nvls | Algorithm::NvlsTree) {
        return None;
    }
    a.one_node.as_ref()?.costs.select(c.func, c.bytes, op).ok()
}

/// `sm` is the system's smallest compute capability, found once for every row (a scan of
/// 131,072 GPUs per planned size was a twentieth of a 16,384-node plan).
fn row(
    a: &Analysis,
    (c, one): (&Choice, Option<&Choice>),
    (fabric, sm): (Fabric, u32),
    outside: &[String],
) -> Row {
    let busbw = tuning::busbw_gbps(c.func, a.nranks, c.bytes, c.time_us);
    let at = measured::Conditions {
        sm,
        nnodes: a.nnodes,
        nranks: a.nranks,
        fabric: fabric.name(),
        two_nodes: two_nodes(a, c),
        one_node: one
            .zip(a.one_node.as_ref())
            .map(|(choice, o)| measured::OneNode {
                choice,
                nranks: o.nranks,
            }),
    };
    let expected = measured::expected(c, at, outside);
    let expected_busbw = tuning::busbw_gbps(c.func, a.nranks, c.bytes, expected.time_us);
    let runner_up = c
        .considered
        .iter()
        .filter(|(al, p, _)| !(*al == c.algo && *p == c.proto))
        .min_by(|x, y| x.2.partial_cmp(&y.2).unwrap_or(std::cmp::Ordering::Equal))
        .map(|(al, p, t)| {
            format!(
                "{} {:.1} us (+{:.0}%)",
                label(*al, *p),
                t,
                (t / c.time_us - 1.0) * 100.0
            )
        });
    Row {
        collective: c.func,
        bytes: c.bytes,
        count: count_of(c.func, c.bytes, a.nranks),
        algo: c.algo,
        proto: c.proto,
        nchannels: c.nchannels,
        nthreads: c.nthreads,
        time_us: c.time_us,
        algbw_gbps: tuning::algbw_gbps(c.bytes, c.time_us),
        busbw_gbps: busbw,
        expected_busbw_gbps: expected_busbw,
        expected_busbw_low_gbps: expected.band.as_ref().map(|b| expected_busbw * b.lo),
        expected_busbw_high_gbps: expected.band.as_ref().map(|b| expected_busbw * b.hi),
        expected_band_basis: match expected.band {
            Some(b) => b.basis,
            None => expected.no_band.unwrap_or_default(),
        },
        expected_time_us: expected.time_us,
        expected_basis: expected.basis,
        runner_up,
        explain: c.explain.clone(),
    }
}

/// The runs of one (algorithm, protocol, channels) choice for `f`, with exact boundaries:
/// between two planned sizes whose choices differ, bisection finds each size where the
/// choice changes (channel counts step several times between sizes far apart). The first run
/// starts at 0 and the last ends at `u64::MAX`, so the rows cover every size.
fn tuner_runs(a: &Analysis, f: Collective, sizes: &[u64], op: &OpContext) -> Result<Vec<TunerRow>> {
    let key = |b: u64| -> Result<(Algorithm, Protocol, usize)> {
        let c = select(a, f, b, op)?;
        Ok((c.algo, c.proto, c.nchannels))
    };
    let mut rows = vec![];
    let Some(&first) = sizes.first() else {
        return Ok(rows);
    };
    let row = |min: u64, max: u64, k: (Algorithm, Protocol, usize)| TunerRow {
        collective: f,
        min,
        max,
        algo: k.0,
        proto: k.1,
        nchannels: k.2,
    };
    let mut cur = key(first)?;
    let mut start = 0;
    let mut lo = first;
    for &hi in sizes.iter().skip(1) {
        let at_hi = key(hi)?;
        // key(lo) == cur throughout; each change moves lo forward, so this ends.
        while at_hi != cur {
            let (mut l, mut h) = (lo, hi);
            while h - l > 1 {
                let m = l + (h - l) / 2;
                if key(m)? == cur { l = m } else { h = m }
            }
            rows.push(row(start, h - 1, cur));
            start = h;
            cur = key(h)?;
            lo = h;
        }
        lo = hi;
    }
    rows.push(row(start, u64::MAX, cur));
    Ok(rows)
}

/// Why no (algorithm, protocol) is left for `f`, beyond the user's NCCL_ALGO/NCCL_PROTO:
/// the rules that turned off the combinations the user did allow.
fn unusable_reasons(a: &Analysis, f: Collective) -> String {
    let mut out: Vec<String> = vec![];
    for &al in a.data.algorithms() {
        if a.env.enable.algo(f, al) == 0 {
            continue;
        }
        let mut why: Vec<&str> = vec![];
        for p in Protocol::ALL {
            if a.env.enable.proto(f, p) == 0 {
                continue;
            }
            let Some(cell) = a.costs.cell(f, al, p) else {
                continue;
            };
            for w in &cell.disabled {
                if !why.contains(&w.as_str()) {
                    why.push(w);
                }
            }
        }
        if !why.is_empty() {
            out.push(format!("{}: {}", al.name(), why.join(", ")));
        }
    }
    out.join("; ")
}

/// `CostTable::select`, with the reasons behind a "no algorithm" error.
fn select(a: &Analysis, f: Collective, bytes: u64, op: &OpContext) -> Result<Choice> {
    a.costs.select(f, bytes, op).map_err(|e| {
        let why = unusable_reasons(a, f);
        if why.is_empty() {
            return e;
        }
        Error {
            message: format!("{}: {why}", e.message),
            ..e
        }
    })
}

/// The plan document of `a`. The per-pair transports move from the analysis into the plan
/// (`a.transports` is empty afterwards): at 32,768 GPUs a second copy is hundreds of MB.
pub fn build(a: &mut Analysis, req: &PlanRequest) -> Result<Plan> {
    // What the plan says of the transport list (classes, counts, anomalies, the per-host
    // matrices) needs nothing else the plan computes: made on a second core meanwhile
    // (7 % of a 32,768-GPU plan).
    let mut plan = std::thread::scope(|s| {
        let shared = &*a;
        let views = s.spawn(move || TransportViews::of(shared));
        build_with(shared, req, move || {
            views
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e))
        })
    })?;
    plan.transports = std::mem::take(&mut a.transports);
    Ok(plan)
}

/// Everything the plan derives from the transport list.
struct TransportViews {
    classes: Vec<TransportClass>,
    reasons: Vec<String>,
    summary: TransportSummary,
    messages: Vec<Finding>,
    matrix: TransportMatrices,
}

/// What the text view shows of the per-node transport matrices: the first node's, and
/// whether the others' cells are the same (rendering all 16,384 was a tenth of a
/// 131,072-GPU plan).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TransportMatrices {
    /// The first node's matrix as text (`transport_view::HostMatrix::render`).
    pub first: Option<String>,
    /// Nodes after the first, and whether all their cells equal the first's.
    pub others: usize,
    pub identical: bool,
}

impl TransportMatrices {
    fn of(m: &[transport_view::HostMatrix]) -> TransportMatrices {
        let Some(first) = m.first() else {
            return TransportMatrices::default();
        };
        TransportMatrices {
            first: Some(first.render()),
            others: m.len() - 1,
            identical: m.iter().all(|x| x.cells == first.cells),
        }
    }
}

impl TransportViews {
    /// The counts alone, which is what [`crate::whatif::compare`] reads of the views.
    fn summary_only(a: &Analysis) -> TransportViews {
        TransportViews {
            classes: vec![],
            reasons: vec![],
            summary: transport_view::summary(&a.transports),
            messages: vec![],
            matrix: TransportMatrices::default(),
        }
    }

    fn of(a: &Analysis) -> TransportViews {
        let (classes, reasons) = transport_classes(&a.transports);
        TransportViews {
            classes,
            reasons,
            summary: transport_view::summary(&a.transports),
            messages: messages_of(a),
            matrix: TransportMatrices::of(&transport_view::matrices(&a.system, &a.transports)),
        }
    }
}

/// [`build`] but for the transport list itself, which the caller moves in.
fn build_with(
    a: &Analysis,
    req: &PlanRequest,
    views: impl FnOnce() -> TransportViews,
) -> Result<Plan> {
    let sys = &a.system;
    let (table, crossovers, tuner_rows) = choices(a, req)?;
    let (rings, trees) = rings_and_trees(a);
    let (costs_explain, costs_disabled) = cost_notes(a);
    let p2p_check =
        transport_view::check_p2p_type_first(sys, &a.paths, &a.path_policy, &a.transport_policy);
    let p2p_type = p2p_check.and_then(|c| c.log_line);
    let log = init_log(a, p2p_type.as_deref());
    let TransportViews {
        classes: transport_classes,
        reasons,
        summary: transport_summary,
        messages,
        matrix: transport_matrix,
    } = views();
    let mut plan = Plan {
        against: None,
        faults: None,
        schema: topo_documents::schema::PLAN,
        topo_version: env!("CARGO_PKG_VERSION"),
        nccl_version: a.version.short(),
        nccl_version_source: req.version_source.clone(),
        nccl_version_documented: a.data.documented,
        source: a.topo.source.clone(),
        nranks: a.nranks,
        nnodes: a.nnodes,
        ranks_per_node: (0..sys.nhosts as u16)
            .map(|h| sys.host_gpus(h).len())
            .filter(|&n| n > 0)
            .collect(),
        mnnvl: a.mnnvl.as_ref().map(|m| MnnvlOut {
            hosts: m.cliques.iter().map(Vec::len).sum(),
            cliques: m
                .cliques
                .iter()
                .map(|c| c.iter().map(|&h| h as usize).collect())
                .collect(),
            clique_size: m.clique_size,
            clique_id: m.clique_id,
        }),
        placement: req.placement.describe().into(),
        gpu: gpu_name(a),
        channels: Channels {
            coll: a.counts.coll,
            nvls: a.counts.nvls,
            collnet: a.counts.collnet,
            p2p: a.counts.p2p,
            p2p_per_peer: a.counts.p2p_per_peer,
            log_line: a.counts.log_line(),
        },
        graphs: graphs_out(a),
        rings,
        trees,
        transports: vec![],
        transport_classes,
        reasons,
        transport_pairs: None,
        transport_summary,
        p2p_type,
        costs: a.costs.costs(),
        costs_explain,
        costs_disabled,
        table,
        crossovers,
        env: a.env.effects(),
        log,
        warnings: vec![],
        messages,
        explain: req.explain,
        tuning_log: tuning::render_tuning_log(&a.costs),
        transport_matrix,
        tuner_rows,
        graph_file: crate::graphfile::GraphFile::of(&a.graphs, sys, a.data.minor()),
    };
    plan.messages
        .extend(choice_findings(a, &req.funcs, &req.sizes));
    // v1's `warnings[]` as before: the source's and the plan's, without the anomalies.
    plan.warnings = plan
        .messages
        .iter()
        .filter(|m| !ANOMALIES.contains(&m.code))
        .map(|m| m.text.clone())
        .collect();
    Ok(plan)
}

/// The per-size table, every change of choice at its exact size, and the tuner rows.
fn choices(a: &Analysis, req: &PlanRequest) -> Result<(Vec<Row>, Vec<Crossover>, Vec<TunerRow>)> {
    let op = OpContext::default();
    let outside = fit_departures(a, req);
    let fabric = fabric_of(a);
    let sm = a.system.min_sm();
    let mut table = vec![];
    let mut crossovers = vec![];
    let mut tuner_rows = vec![];
    for &f in &req.funcs {
        let runs = tuner_runs(a, f, &req.sizes, &op)?;
        // Every change of algorithm or protocol between the runs, at its exact size (several
        // may fall between two planned sizes).
        for w in runs.windows(2) {
            if (w[0].algo, w[0].proto) != (w[1].algo, w[1].proto) {
                crossovers.push(Crossover {
                    collective: f.cli_name().into(),
                    bytes: w[1].min,
                    from: label(w[0].algo, w[0].proto),
                    to: label(w[1].algo, w[1].proto),
                });
            }
        }
        tuner_rows.extend(runs);
        for &b in &req.sizes {
            let c = select(a, f, b, &op)?;
            let one = one_node_choice(a, &c, &op);
            table.push(row(a, (&c, one.as_ref()), (fabric, sm), &outside));
        }
    }

    Ok((table, crossovers, tuner_rows))
}

/// Rings and trees in the launcher's rank numbers, which NCCL keeps on a host it splits into
/// several nodes (`Analysis::launcher_ranks`); the identity otherwise.
fn rings_and_trees(a: &Analysis) -> (Vec<Vec<usize>>, Vec<TreeOut>) {
    let conn = &a.connection;
    let named = |r: i64| match usize::try_from(r) {
        Ok(r) => a.launcher_rank(r) as i64,
        Err(_) => r,
    };
    let rings: Vec<Vec<usize>> = (0..conn.n_channels)
        .filter_map(|c| conn.ring(c))
        .map(|ring| ring.into_iter().map(|r| a.launcher_rank(r)).collect())
        .collect();
    let trees: Vec<TreeOut> = (0..conn.n_channels)
        .map(|c| {
            let mut t = TreeOut {
                channel: c,
                up: vec![-1; a.nranks],
                down: vec![-1; 3 * a.nranks],
            };
            for r in 0..a.nranks {
                let Some(links) = conn.tree(c, r) else {
                    continue;
                };
                let at = a.launcher_rank(r);
                if let Some(up) = t.up.get_mut(at) {
                    *up = named(links.up);
                }
                if let Some(down) = t.down.get_mut(3 * at..3 * at + 3) {
                    down.copy_from_slice(&links.down.map(named));
                }
            }
            t
        })
        .collect();

    (rings, trees)
}

/// Per-cell notes of the cost table: how each usable cell's figures came about, and why the
/// others are off.
fn cost_notes(a: &Analysis) -> (CellNotes, CellNotes) {
    let mut costs_explain: CellNotes = BTreeMap::new();
    let mut costs_disabled = costs_explain.clone();
    for f in Collective::TUNED {
        for &al in a.data.algorithms() {
            for p in Protocol::ALL {
                let Some(cell) = a.costs.cell(f, al, p) else {
                    continue;
                };
                let slot = if cell.bw.is_some() {
                    &mut costs_explain
                } else {
                    &mut costs_disabled
                };
                let lines = if cell.bw.is_some() {
                    cell.explain.clone()
                } else {
                    cell.disabled.clone()
                };
                if lines.is_empty() {
                    continue;
                }
                slot.entry(f.cli_name().into())
                    .or_default()
                    .entry(al.cli_name().into())
                    .or_default()
                    .insert(p.cli_name().into(), lines);
            }
        }
    }

    (costs_explain, costs_disabled)
}

/// (collective, algorithm, protocol) to lines of text.
type CellNotes = BTreeMap<String, BTreeMap<String, BTreeMap<String, Vec<String>>>>;

/// The lines NCCL logs at init for this plan, in its order.
fn init_log(a: &Analysis, p2p_type: Option<&str>) -> Vec<String> {
    let conn = &a.connection;
    let mut log = vec![];
    if let Some(m) = &a.mnnvl {
        // ncclMnnvlCheck (NCCL 2.28.9 src/mnnvl.cc), rank 0's line.
        log.push(format!(
            "MNNVL 1 cliqueId {:x} cliqueSize {} cliqueRank 0",
            m.clique_id, m.clique_size
        ));
    }
    log.extend(a.graphs.fallback_lines());
    let always = |g: &Graph| std::ptr::eq(g, &a.graphs.ring) || std::ptr::eq(g, &a.graphs.tree);
    for g in a.graphs.iter().filter(|g| always(g) || searched(g)) {
        log.extend(a.graph_lines(g));
    }
    log.extend((0..conn.n_channels).map(|c| {
        let ring: Vec<usize> = conn.ring(c).unwrap_or_default();
        let ring: Vec<usize> = ring.into_iter().map(|r| a.launcher_rank(r)).collect();
        crate::connect::channel_line(c, conn.n_channels, &ring, conn.n_ranks, a.data.minor())
    }));
    log.extend(conn.ring_lines_named(0, &a.launcher_ranks));
    log.push(conn.trees_line_named(0, &a.launcher_ranks));
    log.extend(conn.tree_anchor_lines(0));
    log.extend(conn.nvls_head_lines());
    if let Some(l) = p2p_type {
        log.push(l.to_string());
    }
    log.push(format!(
        "threadThresholds {}",
        tuning::render_thread_thresholds(&a.costs)
    ));
    log.push(a.counts.log_line());

    log
}

/// `H100 SXM5 80GB (sm90)`: the first GPU's name and compute capability.
fn gpu_name(a: &Analysis) -> Option<String> {
    let sys = &a.system;
    sys.gpus
        .first()
        .and_then(|&g| sys.nodes[g].topo)
        .and_then(|n| a.topo.gpu(n))
        .map(|g| {
            let name = g.name.clone().unwrap_or_else(|| "GPU".into());
            match g.sm {
                Some(sm) => format!("{name} (sm{sm})"),
                None => name,
            }
        })
}

/// The searched graphs; NVLS and CollNet only where NCCL builds channels for them.
fn graphs_out(a: &Analysis) -> Graphs {
    Graphs {
        ring: graph_out(a, &a.graphs.ring),
        tree: graph_out(a, &a.graphs.tree),
        nvls: a
            .graphs
            .nvls
            .as_ref()
            .filter(|g| searched(g))
            .map(|g| graph_out(a, g)),
        collnet: a
            .graphs
            .collnet_chain
            .as_ref()
            .filter(|g| searched(g))
            .map(|g| graph_out(a, g)),
        collnet_direct: a
            .graphs
            .collnet_direct
            .as_ref()
            .filter(|g| searched(g))
            .map(|g| graph_out(a, g)),
    }
}

/// Algorithm names as the example tuner plugin parses them (`parseAlgorithm` in
/// plugins/tuner/example/plugin.c); it reads any other name, `nvlstree` included, as ring.
fn tuner_algo_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::Tree => "tree",
        Algorithm::Ring => "ring",
        Algorithm::CollnetDirect => "collnet_direct",
        Algorithm::CollnetChain => "collnet_chain",
        Algorithm::Nvls => "nvls",
        Algorithm::NvlsTree => "nvls_tree",
        Algorithm::Pat => "pat",
        // The host runtime's; the plugin would read it as ring, as any unknown name.
        Algorithm::Direct => "direct",
    }
}

/// Where NCCL's init asks for a NET and fails without one ("Could not find any local path from
/// gpu 0 to net", src/graph/topo.cc `ncclTopoGetLocalNet`): 2.30 asks every rank for its
/// smallest GPU-to-NIC bandwidth (v2.30.7-1 src/init.cc -> `ncclTopoGetMinNetBw`); from 2.29 a
/// search that falls back to the simple order picks NETs for it (v2.29.2-1 src/graph/search.cc
/// `ncclTopoCompute` -> `ncclTopoSelectNets`). A real job's network plugin adds the NICs it
/// finds, so a source without NICs is planned as given, and the plan says what NCCL needs.
fn no_net_warning(a: &Analysis, w: &mut Vec<Finding>) {
    if !a.system.nets.is_empty() || a.system.gpus.is_empty() {
        return;
    }
    let minor = a.data.minor();
    let why = if minor >= 30 {
        "NCCL 2.30 needs at least one network device at init"
    } else if minor == 29 && !a.graphs.fallbacks.is_empty() {
        "NCCL 2.29's search finds no path here and its fallback needs a network device"
    } else {
        return;
    };
    w.push(Finding::new(Code::NetNone, format!("the source lists no NIC: {why} (InfiniBand, or an interface of the socket transport, which its network plugin adds to the topology) and fails with \"Could not find any local path from gpu 0 to net\" without one; this plan assumes none is used"),
    ));
}

/// NCCL 2.30 stops at init on a split host whose nodes reach each other through a GPU of
/// another node (`Analysis::trimmed_relays`).
fn trimmed_relay_error(a: &Analysis, w: &mut Vec<Finding>) {
    let Some([x, y, relay]) = a.trimmed_relays.first() else {
        return;
    };
    let more = match a.trimmed_relays.len() - 1 {
        0 => String::new(),
        n => format!(" (and {n} more pair(s))"),
    };
    w.push(Finding::new(Code::NcclInitFails, format!("NCCL {} stops at init here: it splits the host into nodes, and ranks {x} and {y} reach each other over NVLink through GPU rank {relay} of another node{more}, whose rank its trimmed topology no longer knows (\"ncclTopoDevToRank could not find rank for nvml dev\"); NCCL 2.29 and earlier run it as planned here", a.version),
    ));
}

/// What says NCCL's own init stops on this topology, or needs what the source leaves out to
/// go on (`net-none`, `nccl-init-fails`); the differential sweep holds these against the
/// machines nccl-oracle refuses.
pub fn init_stops(a: &Analysis) -> Vec<Finding> {
    let mut w = vec![];
    no_net_warning(a, &mut w);
    trimmed_relay_error(a, &mut w);
    w
}

/// What dissimilar hosts decide apart (`hetero::findings`).
pub fn host_findings(a: &Analysis) -> Vec<Finding> {
    super::hetero::findings(&super::hetero::Reconciled {
        hosts: &a.hosts,
        version: a.version,
        minor: a.data.minor(),
        nranks: a.nranks,
        nnodes: a.nnodes,
        search_channels: a.counts.search,
        nvls_channels: a.counts.nvls,
        ignore_net_mismatch: a.env.value("NCCL_IGNORE_NET_MISMATCH"),
        node_p2p: &a.node_p2p,
        node_name: &|h| super::hetero::host_name(&a.topo, h),
    })
}

/// Where dissimilar hosts' own cost tables choose otherwise than rank 0's at the planned
/// sizes (`hetero::choice_findings`).
pub(crate) fn choice_findings(a: &Analysis, funcs: &[Collective], sizes: &[u64]) -> Vec<Finding> {
    let others: Vec<super::hetero::OwnTable> = a
        .host_costs
        .iter()
        .map(|x| super::hetero::OwnTable {
            names: x
                .hosts
                .iter()
                .map(|&h| super::hetero::host_name(&a.topo, h))
                .collect(),
            costs: &x.costs,
            own_cpu: x.own_cpu,
        })
        .collect();
    super::hetero::choice_findings(&a.costs, &others, a.version, (funcs, sizes))
}

/// The source's warnings, what the plan had to assume, and the transport anomalies.
pub(crate) fn messages_of(a: &Analysis) -> Vec<Finding> {
    let mut w: Vec<Finding> = a.topo.warning_messages().collect();
    // ncclTopoCheckP2p also asks NVML whether P2P works (paths.cc, 2.18+); a file or profile
    // cannot say, so P2P over PCIe is an assumption there. GeForce boards (RTX 4090) answer no.
    let pcie_p2p = a
        .transports
        .iter()
        .filter(|t| !t.inter_node && t.transport.is_p2p())
        .filter(|t| {
            t.path
                .is_some_and(|p| !matches!(p, PathType::Nvl | PathType::Nvb | PathType::C2c))
        })
        .count();
    let socket = a
        .transports
        .iter()
        .filter(|t| t.transport.is_socket())
        .count();
    if socket > 0 {
        // The socket plugin reports each interface's link speed (ncclNetSocketGetSpeed,
        // NVIDIA/nccl v2.28.9-1 src/transport/net_socket.cc) and NCCL tunes with it; which
        // interfaces it picks are known only where the source lists them (`socket-interfaces`).
        let ifaces = if a.socket_ifaces.is_empty() {
            ", and the interfaces it uses (NCCL_SOCKET_IFNAME) are not modelled"
        } else {
            ""
        };
        w.push(Finding::new(Code::NetSocketSpeed, format!(
            "NET/Socket for {socket} connection(s): predicted times use the network ports' line rate, as NCCL's own tuning does, without GPUDirect RDMA; the socket transport copies through host memory and usually reaches far less{ifaces}"
        )));
    }
    // Which interfaces NCCL's sockets take (`crate::ifaces`): NET/Socket's and the bootstrap's.
    for (none, text) in &a.socket_ifaces {
        let sev = if *none {
            Severity::Warning
        } else {
            Severity::Info
        };
        w.push(Finding::at(Code::SocketInterfaces, sev, text.clone()));
    }
    hardware_fact_warnings(a, &mut w);
    w.extend(init_stops(a));
    w.extend(host_findings(a));
    incomplete_net_warnings(a, &mut w);
    gdr_warnings(a, &mut w);
    // NIC placement problems, as show and diagnose state them (`topo_model::nic_judge`).
    for v in topo_model::nic_judge::every_host(
        &a.topo,
        &topo_model::nic_judge::PlainNames(&a.topo),
        true,
    ) {
        w.push(v);
    }
    w.extend(topo_model::nic_judge::fused(&a.topo));
    // Missing NVLink lanes, as show and diagnose state them (`topo_model::nvlink_judge`);
    // fabric registration problems (`topo_model::fabric_judge`), likewise.
    let fabric = topo_model::fabric_judge::verdicts(&a.topo, a.topo.gpus())
        .into_iter()
        .filter(|v| v.severity >= Severity::Warning);
    for v in topo_model::nvlink_judge::every_gpu(&a.topo)
        .into_iter()
        .chain(fabric)
    {
        w.push(v);
    }
    if a.topo.p2p.is_empty() && pcie_p2p > 0 {
        w.push(Finding::new(Code::P2pAssumed, format!(
            "P2P over PCIe for {pcie_p2p} GPU pair(s) assumes the driver allows it: the source has no NVML P2P status; where NVML reports P2P unsupported (GeForce boards such as the RTX 4090, some VMs) NCCL uses SHM instead"
        )));
    }
    w.extend(anomalies(&a.transports));
    w
}

const ANOMALIES: [Code; 3] = [Code::ShmOnNvlink, Code::NetOnNvlink, Code::P2pPeerInvisible];

/// One message per kind of transport anomaly: how many rank pairs, and the first pair's
/// explanation (the plan's `transports[]` has every pair's).
fn anomalies(ts: &[PairTransport]) -> Vec<Finding> {
    // By name, the order the documents have always listed them in.
    let mut by: BTreeMap<(&'static str, Code), (usize, &PairTransport)> = BTreeMap::new();
    for t in ts {
        if t.anomaly.is_none() {
            continue;
        }
        let code = if t.transport.is_shm() {
            ANOMALIES[0]
        } else if t.transport.is_net() {
            ANOMALIES[1]
        } else {
            ANOMALIES[2]
        };
        by.entry((code.name(), code)).or_insert((0, t)).0 += 1;
    }
    by.into_iter()
        .map(|((_, code), (n, t))| {
            let why = t.anomaly.as_deref().unwrap_or_default();
            let text = format!("{n} rank pair(s), e.g. {} -> {}: {why}", t.from, t.to);
            Finding::at(code, Severity::Warning, text)
        })
        .collect()
}

/// Network ports without a speed: NCCL's net plugin reports the speed at run time; the plan
/// used the XML reader's default (`bw::net_bw` of no speed), which can send a GPU's traffic to
/// the wrong port.
fn incomplete_net_warnings(a: &Analysis, w: &mut Vec<Finding>) {
    let Some((n, list)) = port_names(a, |x| x.speed_mbps.is_none_or(|s| s == 0)) else {
        return;
    };
    let assumed = topo_model::bw::net_bw(None);
    w.push(Finding::new(Code::NetSpeedUnknown, format!(
        "{n} network port name(s) without a speed ({list}): NCCL's net plugin reports it at run time; the plan assumed {assumed:.2} GB/s ({:.0} Gb/s) for them, so NIC choices and inter-node times there are guesses",
        assumed * 8.0
    )));
}

/// The distinct names of the network ports `pick` selects: how many, and the first four
/// listed (`mlx5_0, mlx5_1, ...`); `None` when there are none.
fn port_names(a: &Analysis, pick: impl Fn(&topo_model::Net) -> bool) -> Option<(usize, String)> {
    let names: std::collections::BTreeSet<&str> = a
        .topo
        .asked_nets()
        .into_iter()
        .filter_map(|n| a.topo.net(n))
        .filter(|x| pick(x))
        .map(|x| x.name.as_str())
        .collect();
    if names.is_empty() {
        return None;
    }
    let shown: Vec<&str> = names.iter().take(4).copied().collect();
    let more = if names.len() > 4 { ", ..." } else { "" };
    Some((names.len(), format!("{}{more}", shown.join(", "))))
}

/// Among the ports whose GPUDirect RDMA the source leaves unstated: whether some are ports
/// topo assumed (priced with it), and whether some are listed ports (priced without it).
pub(crate) fn gdr_unknown_kinds(topo: &topo_model::Topology) -> (bool, bool) {
    let (mut assumed, mut listed) = (false, false);
    for n in topo.asked_nets() {
        if let Some(x) = topo.net(n).filter(|x| x.gdr_unstated) {
            if x.assumed {
                assumed = true;
            } else {
                listed = true;
            }
        }
    }
    (assumed, listed)
}

/// How the plan priced GPUDirect RDMA on ports topo assumed (a skeleton file's InfiniBand
/// controllers): as NCCL's IB plugin answers on a GPU image (`ncclIbGdrSupport`,
/// `ncclIbDmaBufSupport`, net_ib.cc, NCCL 2.28.9-1), with NCCL's own per-GPU distance rule.
const ASSUMED_GDR: &str = "the plan assumed it does, as NCCL's IB plugin reports it where nvidia-peermem or DMA-BUF works (GPU cloud images ship them), and NCCL then uses it for each GPU whose NIC is within NCCL_NET_GDR_LEVEL";

/// The ports' GPUDirect RDMA as show and diagnose state it (`topo_model::net_judge`). An
/// unstated one is what NCCL's net plugin says at run time (topo.cc, NCCL 2.28: a `<net>`
/// without `gdr` gets the plugin's answer); the plan took the XML reader's default of none.
fn gdr_warnings(a: &Analysis, w: &mut Vec<Finding>) {
    // The ports' distinct names, which one copy's ports give for its unchanged copies'.
    let nets = a.topo.asked_nets();
    for v in topo_model::net_judge::verdicts(&a.topo, nets) {
        let text = if v.code == Code::NetGdrUnknown {
            let (assumed, listed) = gdr_unknown_kinds(&a.topo);
            let priced = match (assumed, listed) {
                (true, false) => ASSUMED_GDR,
                (true, true) => {
                    "the plan assumed it does on the ports topo assumed (as NCCL's IB plugin reports it where nvidia-peermem or DMA-BUF works) and does not on the listed ones"
                }
                _ => "the plan assumed it does not",
            };
            let fix = if (assumed, listed) == (true, false) {
                "--gdr no states where it does not"
            } else {
                topo_model::net_judge::STATE_GDR
            };
            format!("{}; {priced}: {fix}", v.text)
        } else {
            v.text
        };
        w.push(Finding { text, ..v });
    }
}

/// The stated or built-in hardware facts that changed the plan: GPUs whose driver refuses
/// peer access, hosts without NVLS multicast.
fn hardware_fact_warnings(a: &Analysis, w: &mut Vec<Finding>) {
    // Peer access as show and diagnose state it (`topo_model::p2p_judge`).
    for v in topo_model::p2p_judge::verdicts(&a.topo, a.topo.gpus()) {
        let text = if v.code == Code::P2pRefusedByDriver {
            format!("{}; {}", v.text, topo_model::p2p_judge::STATE_P2P)
        } else {
            v.text
        };
        w.push(Finding { text, ..v });
    }
    // NVLS stated off, as show and diagnose state it (`topo_model::nvls_judge`); NVLink
    // islands, as show and diagnose state them (`topo_model::nvlink_shape`).
    let islands = topo_model::nvlink_shape::problems(&a.topo);
    for v in topo_model::nvls_judge::verdicts(&a.topo, a.topo.graph.node_indices())
        .into_iter()
        .chain(islands)
    {
        w.push(v);
    }
}

/// NCCL's example tuner plugin CSV
/// (`collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff`,
/// NVIDIA/nccl `plugins/tuner/example`): one line per run of sizes with the same choice,
/// bounded where the choice really changes (`tuner_runs`). The rows of a collective run from 0
/// to the largest size_t because the example plugin answers every call it finds no row for
/// with one channel (it sets `*nChannels = 1` before matching, and NCCL takes any non-zero
/// answer as the channel cap); for the same reason the channel count is always written out
/// (its `-1` "keep NCCL's default" also leaves that 1 in place) and numPipeOps is `-1`, so
/// collectives NCCL aggregates in a group (numPipeOps > 1) still match.
pub fn tuner_csv(plan: &Plan) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# topo plan: NCCL {} model, {} ranks on {} node(s); sizes are NCCL's nBytes (nccl-tests size column)\n",
        plan.nccl_version, plan.nranks, plan.nnodes
    ));
    out.push_str("# load with NCCL_TUNER_PLUGIN=<path to libnccl-tuner-example.so> NCCL_TUNER_CONFIG_FILE=<this file>\n");
    out.push_str("# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff\n");
    for r in &plan.tuner_rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},-1,-1\n",
            r.collective.cli_name(),
            r.min,
            r.max,
            tuner_algo_name(r.algo),
            r.proto.cli_name(),
            r.nchannels,
            plan.nnodes,
            plan.nranks
        ));
    }
    out
}

/// The NCCL graph file (`NCCL_GRAPH_FILE`) of the plan's graphs, written when asked for
/// (`topo plan --format nccl-graph`).
pub fn graph_xml(plan: &Plan) -> String {
    plan.graph_file.xml()
}

/// A plan needs to know which GPUs NVLink joins: paths, transports, graphs, channel counts and
/// the cost table all follow from it. Skeleton topology files (Azure, AWS) leave NVLink for
/// NCCL to detect at run time, so planning them as they stand would describe a PCIe-only
/// machine that does not exist (SHM between H100s); refuse and say what to plan instead.
fn refuse_unknown_nvlink(topo: &Topology) -> Result<()> {
    // The usual answer without putting the GPUs in order (131,072 of them at 16,384 hosts).
    let known = |g: &topo_model::Gpu| matches!(g.nvlink, topo_model::NvlinkInfo::Known);
    if gpu_facts(topo).all(known) {
        return Ok(());
    }
    let gpus = topo.gpus();
    let unknown: Vec<&str> = gpus
        .iter()
        .filter_map(|&n| topo.gpu(n))
        .filter_map(|g| match &g.nvlink {
            topo_model::NvlinkInfo::Unknown(why) => Some(why.as_str()),
            topo_model::NvlinkInfo::Known => None,
        })
        .collect();
    let Some(why) = unknown.first() else {
        return Ok(());
    };
    let origin = source_name(topo);
    Err(Error::new(
        ErrorKind::NvlinkUnknown,
        format!(
            "cannot plan {origin}: NVLink is unknown for {} ({why}), and every figure of a plan depends on it",
            gpus_of(topo, unknown.len(), gpus.len())
        ),
    )
    .help(stating_hint(topo)))
}

/// The GPU model the source names or implies, and how: a product name it states is the
/// model; a PCI device id is only a clue (one id can be several boards), so a hint built on it
/// says so.
fn named_model(topo: &Topology) -> Option<(&'static GpuModel, bool)> {
    let gpus: Vec<&topo_model::Gpu> = topo.gpus().iter().filter_map(|&n| topo.gpu(n)).collect();
    let by_name = gpus
        .iter()
        .find_map(|g| g.name.as_deref().and_then(topo_model::stated::gpu_model));
    if let Some(m) = by_name {
        return Some((m, true));
    }
    let m = gpus
        .iter()
        .find_map(|g| topo_model::stated::model_by_pci_id(g.vendor, g.device))?;
    Some((m, false))
}

/// What to state for a source that leaves NVLink or the compute capability out, fitted to
/// what the source does say: the model it names, the model its PCI device id suggests, or,
/// with no clue, the flags and an example of each NVLink shape.
fn stating_hint(topo: &Topology) -> String {
    let rest = "or plan the machine itself (topo plan there, or topo snapshot it and pass --from the snapshot), an XML NCCL dumped there (NCCL_TOPO_DUMP_FILE), or a profile with the same GPUs (topo show --profile list)";
    match named_model(topo) {
        Some((m, named)) => {
            let flags = format!("--gpu {} --nvlink {}", m.key, m.nvlink.name());
            let basis = if named {
                format!("the source names {}", m.name)
            } else {
                format!(
                    "if these are {} GPUs, as their PCI device id suggests; the id alone does not prove the board",
                    m.name
                )
            };
            format!("state what the source leaves out ({flags}: {basis}), {rest}")
        }
        None => match (known_nvlink(topo), known_sm(topo)) {
            // A matrix: NVLink stated, the model not; name the models its NVLink fits.
            (Some((shape, lanes)), _) => format!(
                "state the GPU model or its compute capability (--gpu MODEL or --sm N; the source gives the NVLink, {}), {rest}",
                fitting_models(shape, lanes)
            ),
            // A file with `sm` but no NVLink (aws-p5's): only the NVLink is missing.
            (None, Some(sm)) => format!(
                "state how NVLink joins the GPUs (the source gives sm {sm}): {}, {rest}",
                nvlink_examples(sm)
            ),
            (None, None) => format!(
                "state what the source leaves out: the GPU model and how NVLink joins the GPUs (--gpu h100 --nvlink nvswitch on an HGX board, --gpu a100-pcie --nvlink pairs for bridged cards, --gpu l40s --nvlink none without NVLink; or --sm 90 --nvlink pairs:4), {rest}"
            ),
        },
    }
}

/// The NVLink every GPU's source states, as the model table words it: the shape and the
/// most lanes a GPU has; `None` where any GPU's NVLink is unknown.
fn known_nvlink(topo: &Topology) -> Option<(NvlinkShape, u32)> {
    let mut out = (NvlinkShape::None, 0);
    for n in topo.gpus() {
        let s = topo_model::nvlink_shape::summary(topo, n);
        if s.unknown.is_some() {
            return None;
        }
        let shape = if s.switch_lanes > 0 {
            NvlinkShape::NvSwitch
        } else if !s.peers.is_empty() {
            NvlinkShape::Pairs
        } else {
            NvlinkShape::None
        };
        if s.lanes >= out.1 {
            out = (shape, s.lanes);
        }
    }
    Some(out)
}

/// The compute capability the source gives every GPU, where it gives one to all alike.
fn known_sm(topo: &Topology) -> Option<u32> {
    let mut sms = topo
        .gpus()
        .into_iter()
        .map(|n| topo.gpu(n).and_then(|g| g.sm));
    let first = sms.next()??;
    sms.all(|s| s == Some(first)).then_some(first)
}

/// `--gpu` keys whose usual board has this NVLink (the same lanes where any has them, else
/// the same shape), as a clause of the hint.
fn fitting_models(shape: NvlinkShape, lanes: u32) -> String {
    let same_shape: Vec<&GpuModel> = topo_model::stated::GPU_MODELS
        .iter()
        .filter(|m| m.nvlink == shape)
        .collect();
    let exact: Vec<&&GpuModel> = same_shape
        .iter()
        .filter(|m| shape == NvlinkShape::None || m.nvlink_lanes == lanes)
        .collect();
    let keys: Vec<&str> = if exact.is_empty() {
        same_shape.iter().map(|m| m.key).collect()
    } else {
        exact.iter().map(|m| m.key).collect()
    };
    let what = match shape {
        NvlinkShape::NvSwitch => format!("{lanes} lanes per GPU to NVSwitch"),
        NvlinkShape::Pairs => format!("{lanes} lanes to peer GPUs"),
        NvlinkShape::None => "none".to_string(),
    };
    let shown: Vec<&str> = keys.iter().take(8).copied().collect();
    let more = if keys.len() > shown.len() {
        ", ..."
    } else {
        ""
    };
    format!("{what}, which fits --gpu {}{more}", shown.join(", "))
}

/// How to state NVLink for GPUs of compute capability `sm`: the shape of each model of that
/// generation the table knows, else one example per shape.
fn nvlink_examples(sm: u32) -> String {
    let of_sm: Vec<String> = topo_model::stated::GPU_MODELS
        .iter()
        .filter(|m| m.sm == sm)
        .map(|m| format!("--nvlink {} on {}", m.nvlink.name(), m.name))
        .collect();
    if of_sm.is_empty() {
        return "--nvlink nvswitch, --nvlink pairs or --nvlink none".to_string();
    }
    let shown: Vec<&str> = of_sm.iter().take(6).map(String::as_str).collect();
    let more = if of_sm.len() > shown.len() {
        ", ..."
    } else {
        ""
    };
    format!("{}{more}", shown.join(", "))
}

/// Where the topology came from, as a refusal names it: the file, else the kind of source.
fn source_name(topo: &Topology) -> String {
    topo.source
        .origin
        .clone()
        .unwrap_or_else(|| topo.source.kind.to_string())
}

/// `some` of `all` GPUs, counted per node where the topology is copies of one machine
/// (`--nodes 2`: "8 of 8 GPU(s) per node x 2 nodes (16 GPUs)", not "16 of 16", which reads as
/// one node's count), and over the hosts where it joins several.
fn gpus_of(topo: &Topology, some: usize, all: usize) -> String {
    match topo.copies() {
        Some(c) if c.count > 1 && some.is_multiple_of(c.count) && all.is_multiple_of(c.count) => {
            format!(
                "{} of {} GPU(s) per node x {} nodes ({all} GPUs)",
                some / c.count,
                all / c.count,
                c.count
            )
        }
        _ if topo.host_count() > 1 => {
            format!("{some} of {all} GPU(s) over {} hosts", topo.host_count())
        }
        _ => format!("{some} of {all} GPU(s)"),
    }
}

/// The compute capability decides NVLink bandwidth, the speed arrays of the search and the
/// cost table; NCCL reads it from the CUDA driver at run time (`ncclTopoFillGpu`), so a file
/// whose `<gpu>` lacks `sm` (a hand-trimmed XML with only `dev`) is refused the way a file
/// without NVLink information is, rather than planned as an sm 0 GPU.
fn refuse_unknown_sm(topo: &Topology) -> Result<()> {
    if gpu_facts(topo).all(|g| g.sm.is_some_and(|s| s != 0)) {
        return Ok(());
    }
    let gpus = topo.gpus();
    let unknown = gpus
        .iter()
        .filter_map(|&n| topo.gpu(n))
        .filter(|g| g.sm.is_none_or(|s| s == 0))
        .count();
    if unknown == 0 {
        return Ok(());
    }
    let origin = source_name(topo);
    Err(Error::new(
        ErrorKind::NvlinkUnknown,
        format!(
            "cannot plan {origin}: {} have no compute capability (sm), which NCCL reads from the CUDA driver at run time and which sets NVLink bandwidth, the search's speeds and the cost table",
            gpus_of(topo, unknown, gpus.len())
        ),
    )
    .help(stating_hint(topo)))
}

/// Every GPU's facts, in no particular order.
fn gpu_facts(topo: &Topology) -> impl Iterator<Item = &topo_model::Gpu> {
    topo.graph.node_indices().filter_map(|n| topo.gpu(n))
}

/// Refuses a topology without GPUs, naming which source was empty (the caller words the fix).
fn refuse_no_gpu(topo: &Topology) -> Result<()> {
    if gpu_facts(topo).next().is_some() {
        return Ok(());
    }
    let (why, live) = match (topo.source.kind, &topo.source.origin) {
        (SourceKind::Live, _) | (_, None) => ("this machine has no NVIDIA GPU".to_string(), true),
        (kind, Some(origin)) => (
            format!(
                "the {} {origin} lists none",
                if kind == SourceKind::Xml {
                    "XML file"
                } else {
                    kind.name()
                }
            ),
            false,
        ),
    };
    Err(Error::new(
        ErrorKind::NoGpu { live },
        format!("the topology has no GPU to plan for: {why}"),
    ))
}

/// The whole model for one request: analysis in NCCL's init order, then the plan document.
/// The analysis and the plan document for one request, before the environment's effects are
/// worked out (`crate::plan` adds them, see `whatif`).
pub fn analyzed(
    topo: &Topology,
    req: &PlanRequest,
    facts: RuntimeFacts,
) -> Result<(Analysis, Plan)> {
    refuse_no_gpu(topo)?;
    refuse_unknown_nvlink(topo)?;
    refuse_unknown_sm(topo)?;
    let analysis = analyze::analyze(&Request {
        topo,
        env: req.env.clone(),
        version: req.version,
        placement: req.placement.clone(),
        facts,
    })?;
    let mut analysis = analysis;
    let plan = build(&mut analysis, req)?;
    Ok((analysis, plan))
}

/// [`analyzed`] of a topology the caller gives up (see [`analyze::analyze_owned`]).
pub fn analyzed_owned(
    topo: Topology,
    req: &PlanRequest,
    facts: RuntimeFacts,
) -> Result<(Analysis, Plan)> {
    refuse_no_gpu(&topo)?;
    refuse_unknown_nvlink(&topo)?;
    refuse_unknown_sm(&topo)?;
    let mut analysis = analyze::analyze_owned(topo, &req.env, req.version, &req.placement, &facts)?;
    let plan = build(&mut analysis, req)?;
    Ok((analysis, plan))
}

/// The plan of a machine `topo` another plan is compared with ([`crate::whatif::compare`]):
/// what the comparison reads (channels, graphs, rings, transports and their counts, the
/// per-size table) made as [`analyzed_owned`] makes it, without what it does not read (the
/// findings about the hardware, the transport classes and matrices, the environment's
/// effects): at 16,384 hosts those are a second per plan, and the healthy machine of a fault
/// plan is never shown. Not a plan to render. The analysis comes back for the caller to free
/// when it suits, as [`crate::plan_owned`]'s.
pub fn compared_owned(
    topo: Topology,
    req: &PlanRequest,
    facts: RuntimeFacts,
) -> Result<(Plan, Analysis)> {
    refuse_no_gpu(&topo)?;
    refuse_unknown_nvlink(&topo)?;
    refuse_unknown_sm(&topo)?;
    let mut a = analyze::analyze_owned(topo, &req.env, req.version, &req.placement, &facts)?;
    let mut plan = build_with(&a, req, || TransportViews::summary_only(&a))?;
    plan.transports = std::mem::take(&mut a.transports);
    Ok((plan, a))
}

#[cfg(test)]
mod hint_tests {
    use super::stating_hint;
    use topo_model::{NodeKind, Topology};

    fn with(f: impl Fn(&mut topo_model::Gpu)) -> Topology {
        let mut t = topo_model::testing::hgx(2, 90);
        for n in t.gpus() {
            if let NodeKind::Gpu(g) = &mut t.node_mut(n).kind {
                f(g);
            }
        }
        t
    }

    #[test]
    fn the_hint_fits_what_the_source_says() {
        let named = stating_hint(&with(|g| g.name = Some("NVIDIA L40S".into())));
        assert!(
            named.contains("--gpu l40s --nvlink none: the source names L40S"),
            "{named}"
        );
        let by_id = stating_hint(&with(|g| {
            g.name = None;
            g.device = Some(0x2335);
        }));
        assert!(
            by_id.contains("--gpu h200 --nvlink nvswitch: if these are H200 GPUs"),
            "{by_id}"
        );
        let none = stating_hint(&with(|g| {
            g.name = None;
            g.device = None;
            g.sm = None;
            g.nvlink = topo_model::NvlinkInfo::Unknown("x".into());
        }));
        assert!(
            none.contains("--gpu l40s --nvlink none without NVLink"),
            "{none}"
        );
        // A matrix: NVLink given (18 lanes to NVSwitch), the model not: only the model is
        // asked for, with the models that NVLink fits.
        let matrix = stating_hint(&with(|g| {
            g.name = None;
            g.device = None;
            g.sm = None;
        }));
        assert!(
            matrix.contains("(--gpu MODEL or --sm N; the source gives the NVLink, 18 lanes per GPU to NVSwitch, which fits --gpu h100, "),
            "{matrix}"
        );
        assert!(!matrix.contains("--nvlink"), "{matrix}");
        // sm given, NVLink not (aws-p5's file): only NVLink is asked for, by that generation.
        let p5 = stating_hint(&with(|g| {
            g.name = None;
            g.device = None;
            g.nvlink = topo_model::NvlinkInfo::Unknown("x".into());
        }));
        assert!(
            p5.contains("state how NVLink joins the GPUs (the source gives sm 90): --nvlink nvswitch on H100 SXM5 80GB, --nvlink pairs on H100 PCIe"),
            "{p5}"
        );
        assert!(!p5.contains("--gpu l40s"), "{p5}");
    }
}

#[cfg(test)]
mod fabric_tests {
    use super::{fabric_of, guess_fabric};
    use crate::analyze::{Analysis, Request, RuntimeFacts, analyze};
    use crate::transport::RankPlacement;
    use crate::version::NcclVersion;
    use topo_model::testing::hgx;
    use topo_model::{NodeKind, Topology};
    use topo_vocab::Fabric;

    fn analysis(t: &Topology) -> Analysis {
        analyze(&Request {
            topo: t,
            env: Default::default(),
            version: NcclVersion::parse("2.28").unwrap(),
            placement: RankPlacement::ProcessPerGpu,
            facts: RuntimeFacts {
                cuda_driver_version: Some(12040),
            },
        })
        .unwrap()
    }

    fn name_ports(t: &mut Topology, prefix: &str) {
        for (i, n) in t.nets().into_iter().enumerate() {
            if let NodeKind::Net(x) = &mut t.node_mut(n).kind {
                x.name = format!("{prefix}{i}");
            }
        }
    }

    #[test]
    fn a_stated_fabric_outranks_what_the_ports_suggest() {
        let mut t = hgx(8, 90);
        name_ports(&mut t, "cxi");
        assert_eq!(guess_fabric(&t), Fabric::Slingshot);
        assert_eq!(fabric_of(&analysis(&t)), Fabric::Slingshot);
        t.source.fabric = Some(Fabric::Efa);
        assert_eq!(fabric_of(&analysis(&t)), Fabric::Efa, "stated: not guessed");
    }

    #[test]
    fn copies_with_a_fault_guess_as_every_host_does() {
        // One EFA port among Slingshot ones: which comes first decides, and the fault takes
        // host 0's EFA port away, so host 0 answers for itself and the others by copy 1.
        let mut t = hgx(8, 90);
        name_ports(&mut t, "cxi");
        let first = t.nets()[0];
        if let NodeKind::Net(x) = &mut t.node_mut(first).kind {
            x.name = "rdmap0".into();
        }
        for (fault, copies) in [
            (None, 3),
            (Some("nic:rdmap0@0"), 3),
            (Some("nic:rdmap0@1"), 3),
        ] {
            let mut r = t.replicate(copies);
            if let Some(f) = fault {
                let f = topo_model::faults::parse_without(f).unwrap();
                topo_model::faults::apply_all(&mut r, &[f]).unwrap();
                assert!(r.standing().is_some(), "{fault:?}");
            }
            let mut each = r.clone();
            each.forget_copies();
            assert!(each.standing().is_none());
            assert_eq!(guess_fabric(&r), guess_fabric(&each), "{fault:?}");
        }
    }

    #[test]
    fn nothing_stated_is_guessed_from_the_ports() {
        let mut t = hgx(8, 90);
        assert_eq!(fabric_of(&analysis(&t)), guess_fabric(&t));
        name_ports(&mut t, "rdmap");
        assert_eq!(fabric_of(&analysis(&t)), Fabric::Efa);
    }
}
