//! topo's measured-behaviour layer: what nccl-tests would measure for NCCL's choice.
//!
//! NCCL's cost model (`tuning.rs`, NCCL's own constants and formulas) ranks algorithm × protocol
//! pairs; its time leaves out launch overheads and pipeline ramp-up, so it is 1.5-3x fast at
//! small and mid sizes against published nccl-tests tables. This layer keeps the choice (algorithm,
//! protocol, channels, and NCCL's bandwidth `bw` for it) and replaces the time by
//! `lat_us + lat_node_us × steps(nodes) + tb / bw_efficiency + ramp × sqrt(tb)`,
//! `tb = bytes / (1000 × bw)` being NCCL's own bandwidth term in us and `steps` the network steps
//! of NCCL's latency model, with the constants fitted per (GPU generation, collective, algorithm,
//! protocol, one node or several, fabric between nodes) to the published results in
//! `fixtures/fidelity/` and the shared set (`bench/fidelity/sources.yaml`) by
//! `bench/fidelity/fit.py`. The constants are data (`data/measured.yaml`), each rule naming the
//! results and rank counts it came from, and the band is per fabric and basis. A choice no
//! rule matches, a rank count more than 2x from the rule's, or a size more than 4x below the
//! smallest one of a rule fitted only from 16 MB up takes the pooled level (`Pooled`: NCCL's
//! time plus latencies fitted over every source of its collective and protocol) where one is
//! fitted, else keeps NCCL's time, and says which. Tree algorithms above two nodes are held to
//! at most half the rate a two-node rule measured (`tree_bound`).

use crate::tuning::Choice;
use crate::types::{Algorithm, Collective, Protocol};
use serde::Deserialize;
use std::sync::OnceLock;
use topo_vocab::Fabric;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    arch: String,
    collective: Collective,
    /// By NCCL's printed name (`NVLSTree`), as the data file and the basis text write it.
    #[serde(deserialize_with = "algo_by_name")]
    algo: Algorithm,
    proto: Protocol,
    nodes: String,
    /// The fabric between nodes (`ib`, `roce`, `efa`, ...); one-node rules are `ib`, the key
    /// every rule had before fabrics were told apart, and are looked up without it.
    #[serde(default = "ib")]
    fabric: String,
    lat_us: f64,
    /// Latency per network step of NCCL's model (`steps`), where a rule's results span
    /// several node counts; 0 otherwise.
    #[serde(default)]
    lat_node_us: f64,
    bw_efficiency: f64,
    /// Coefficient of sqrt(NCCL's bandwidth term in us): the pipeline ramp of mid sizes.
    ramp: f64,
    points: usize,
    sizes: String,
    /// The rank counts of the fitted results (`"lo-hi"`).
    ranks: String,
    from: Vec<String>,
}

/// The spread a healthy measurement shows around the expected value: measured busbw /
/// expected busbw within `lo..=hi`, from leave-one-source-out residuals (`fit.py`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BandRow {
    /// `any` (one node: no fabric) or the fabric between nodes.
    #[serde(default = "any")]
    fabric: String,
    /// `rule` (a rule gave the expected time) or `nccl` (NCCL's own time).
    basis: String,
    /// `small` (<= 64 KB), `mid`, `large` (>= 16 MB).
    sizes: String,
    lo: f64,
    hi: f64,
    points: usize,
    sources: usize,
    how: String,
}

/// The fallback where no rule of the cell covers a size: NCCL's time plus latencies fitted over
/// every source of one collective and protocol, one node or several (GPU generations,
/// algorithms and fabrics pooled, NCCL's bandwidth kept). Fitted only where two sources or more
/// have points (`fit.py`, `pooled_from`): one machine's latency pooled is what did not carry
/// over to another.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pooled {
    collective: Collective,
    proto: Protocol,
    nodes: String,
    /// Added once per call (launch and synchronisation nccl-tests sees, NCCL's model does not).
    lat_us: f64,
    /// Added per network step of NCCL's latency model (`steps`).
    net_step_us: f64,
    /// Added per intra-node step of NCCL's latency model (`intra_steps`).
    intra_step_us: f64,
    /// The network plugin whose fabrics alone the level was fitted on (`libfabric`: see
    /// [`plugin_of`]); such a level comes before the one of every fabric.
    #[serde(default)]
    plugin: Option<String>,
    /// Added times sqrt(NCCL's bandwidth term, us): the pipeline ramp-up of mid sizes, fitted
    /// only on a plugin's level (0 elsewhere).
    #[serde(default)]
    ramp: f64,
    points: usize,
    sizes: String,
    /// The sources (threads, repositories, sites) it was fitted on.
    from: Vec<String>,
}

/// The network plugin NCCL reaches a fabric through, where its software path rather than the
/// wire sets the latency and ramp of mid sizes: the aws-ofi-nccl plugin over libfabric, with
/// its EFA provider (AWS) and its CXI provider (HPE Slingshot). `fit.py` `PLUGIN_FAMILY`.
fn plugin_of(fabric: &str) -> Option<&'static str> {
    let fabric: Fabric = fabric.parse().ok()?;
    matches!(fabric, Fabric::Efa | Fabric::Slingshot).then_some("libfabric")
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rules {
    rules: Vec<Rule>,
    #[serde(default)]
    pooled: Vec<Pooled>,
    bands: Vec<BandRow>,
}

/// The band of an expected value: a measured busbw from `lo` to `hi` times the expected one is
/// what healthy published results showed when their own source was left out of the fit.
#[derive(Clone, Debug, PartialEq)]
pub struct Band {
    pub lo: f64,
    pub hi: f64,
    /// Where the band comes from, in words.
    pub basis: String,
}

fn ib() -> String {
    "ib".into()
}

fn any() -> String {
    "any".into()
}

/// The network steps of NCCL's latency model for `nnodes` nodes (src/graph/tuning.cc,
/// `ncclTopoTuneModel`, NCCL 2.23-2.28): a ring allreduce crosses the network 2(n-1) times and
/// other ring collectives n-1; Tree and NVLSTree 2 log2(n) (NCCL's `log2i`, the floor); NVLS
/// and CollNet one hop; none on one node. `bench/fidelity/fit.py` counts the same.
fn steps(algo: Algorithm, func: Collective, nnodes: usize) -> f64 {
    if nnodes <= 1 {
        return 0.0;
    }
    let log2i = (usize::BITS - 1 - nnodes.leading_zeros()) as f64;
    match algo {
        Algorithm::Ring if func == Collective::AllReduce => 2.0 * (nnodes - 1) as f64,
        Algorithm::Ring => (nnodes - 1) as f64,
        Algorithm::Tree | Algorithm::NvlsTree => 2.0 * log2i,
        _ => 1.0,
    }
}

/// The intra-node steps of NCCL's latency model (src/graph/tuning.cc, `ncclTopoTuneModel`,
/// NCCL 2.23-2.28): a ring allreduce takes 2(nRanks-1) steps of which 2(nNodes-1) cross the
/// network, other ring collectives nRanks-1 of which nNodes-1; Tree 2(ppn-1) (`intraLat`
/// times ppn-1, up and down); NVLS, NVLSTree and CollNet one. `fit.py` counts the same.
fn intra_steps(algo: Algorithm, func: Collective, nranks: usize, nnodes: usize) -> f64 {
    let nodes = nnodes.max(1);
    let intra = nranks.saturating_sub(nodes) as f64;
    match algo {
        Algorithm::Ring if func == Collective::AllReduce => 2.0 * intra,
        Algorithm::Ring => intra,
        Algorithm::Tree => 2.0 * ((nranks / nodes).max(1) - 1) as f64,
        _ => 1.0,
    }
}

fn size_range(bytes: u64) -> &'static str {
    if bytes <= 64 << 10 {
        "small"
    } else if bytes >= 16 << 20 {
        "large"
    } else {
        "mid"
    }
}

/// The band of a fabric (`any` on one node), basis (`rule`, `pooled`, `nccl`) and size range.
fn band(basis: &str, bytes: u64, fabric: &str) -> Band {
    let sizes = size_range(bytes);
    match data()
        .bands
        .iter()
        .find(|b| b.fabric == fabric && b.basis == basis && b.sizes == sizes)
    {
        Some(b) => Band {
            lo: b.lo,
            hi: b.hi,
            // A band taken from elsewhere says its own counts in `how`; this cell's would
            // read as the band's.
            basis: format!(
                "{}, {}, {} sizes, expected from {}",
                if b.how == "held-out points" {
                    format!("held-out points: {} of {} sources", b.points, b.sources)
                } else {
                    b.how.clone()
                },
                if fabric == "any" {
                    "one node".to_string()
                } else {
                    format!("{fabric} between nodes")
                },
                sizes,
                match basis {
                    "rule" => "a fitted rule",
                    "pooled" => "NCCL's time with the pooled latencies",
                    _ => "NCCL's time",
                }
            ),
        },
        None => Band {
            lo: 0.5,
            hi: 1.5,
            basis: format!(
                "no published result for the {fabric} fabric and no held-out data: +-50%"
            ),
        },
    }
}

/// A rule fitted only from LAT_FITTED_BELOW up (its latency is NCCL's, not a measured one) is
/// applied from a quarter of its smallest fitted size up: below that its ramp term is an
/// extrapolation (the GB200 NVL72 rules are fitted from 512 MB, where NCCL makes the same NVLS
/// choice down to 8 bytes), and the plan keeps NCCL's time instead. Rules fitted on small
/// sizes extrapolate downwards: the time is flat there.
const BELOW_FITTED: u64 = 4;
const LAT_FITTED_BELOW: u64 = 16 << 20;
/// A rule applies to rank counts within a factor RANK_SPAN of those it was fitted on: the
/// pipeline ramp of a 72-GPU NVLS rack is no measure of an 8-GPU one.
const RANK_SPAN: usize = 2;

impl Pooled {
    /// Applied from a quarter of its smallest fitted size up where that is >= 16 MB (then it
    /// has seen no latency), like a rule.
    fn covers(&self, bytes: u64) -> bool {
        self.sizes
            .split_once('-')
            .and_then(|(lo, _)| lo.parse::<u64>().ok())
            .is_some_and(|lo| lo < LAT_FITTED_BELOW || bytes.saturating_mul(BELOW_FITTED) >= lo)
    }
}

/// The pooled level for a choice, where one is fitted and covers its size: over several nodes
/// through a network plugin, the plugin's level first; else the level of every fabric.
fn pooled_for(c: &Choice, nnodes: usize, fabric: &str) -> Option<&'static Pooled> {
    let nodes = if nnodes > 1 { "multi" } else { "single" };
    let plugin = plugin_of(fabric).filter(|_| nnodes > 1);
    let level = |plugin: Option<&str>| {
        data().pooled.iter().find(|p| {
            p.collective == c.func
                && p.proto == c.proto
                && p.nodes == nodes
                && p.plugin.as_deref() == plugin
        })
    };
    plugin
        .and_then(|x| level(Some(x)))
        .or_else(|| level(None))
        .filter(|p| p.covers(c.bytes))
}

impl Rule {
    /// `tb` is NCCL's bandwidth term of the time (bytes / bw), us.
    fn time_us(&self, tb: f64, steps: f64) -> f64 {
        self.lat_us + self.lat_node_us * steps + tb / self.bw_efficiency + self.ramp * tb.sqrt()
    }

    /// The smallest size the rule was fitted on (`sizes: "lo-hi"`).
    fn min_bytes(&self) -> Option<u64> {
        self.sizes.split_once('-')?.0.parse().ok()
    }

    /// The rank counts it was fitted on (`ranks: "lo-hi"`).
    fn rank_range(&self) -> Option<(usize, usize)> {
        let (lo, hi) = self.ranks.split_once('-')?;
        Some((lo.parse().ok()?, hi.parse().ok()?))
    }

    fn covers(&self, bytes: u64, nranks: usize) -> bool {
        let size_ok = self
            .min_bytes()
            .is_some_and(|lo| lo < LAT_FITTED_BELOW || bytes.saturating_mul(BELOW_FITTED) >= lo);
        let ranks_ok = self
            .rank_range()
            .is_some_and(|(lo, hi)| nranks * RANK_SPAN >= lo && nranks <= hi * RANK_SPAN);
        size_ok && ranks_ok
    }
}

fn algo_by_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Algorithm, D::Error> {
    let s = String::deserialize(d)?;
    Algorithm::from_name(&s)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown algorithm {s}")))
}

fn data() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| {
        // Embedded and checked by the unit tests below: a malformed file fails them, not a user.
        yaml_serde::from_str(include_str!("../data/measured.yaml"))
            .expect("data/measured.yaml parses")
    })
}

fn rules() -> &'static [Rule] {
    &data().rules
}

/// The expected (measured-behaviour) time of a choice and where its constants came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    pub time_us: f64,
    /// What gave the time: `rule` (a fitted rule of the cell), `pooled` (NCCL's time with the
    /// pooled latencies) or `nccl` (NCCL's own), the basis of its band.
    pub kind: &'static str,
    /// The rule applied (`sm90 allreduce NVLS/Simple one node: ...`), or why none was.
    pub basis: String,
    /// None where no published result was measured under the plan's conditions: a
    /// measurement there can be compared, not judged.
    pub band: Option<Band>,
    /// Why there is no band, when there is none.
    pub no_band: Option<String>,
}

/// Channel and CTA settings: every published result behind the rules ran NCCL's defaults,
/// and none measures what a changed count does (more CTAs than NCCL's model gains).
const CHANNEL_SETTINGS: [&str; 9] = [
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_CTAS",
    "NCCL_MAX_CTAS",
    "NCCL_NCHANNELS_PER_NET_PEER",
    "NCCL_MIN_P2P_NCHANNELS",
    "NCCL_MAX_P2P_NCHANNELS",
    "NCCL_NTHREADS",
    "NCCL_BUFFSIZE",
];

/// Where a plan leaves the conditions every result in `fixtures/fidelity/` was measured
/// under: between nodes over InfiniBand or RoCE (the socket transport copies through host
/// memory at a fraction of the line rate NCCL tunes with), at NCCL's default channels and
/// CTAs. `settings` are the `NCCL_*` variables the plan was given with their values,
/// `socket_connections` the pairs that go over NET/Socket.
pub fn outside_fits(settings: &[(String, String)], socket_connections: usize) -> Vec<String> {
    let mut out: Vec<String> = settings
        .iter()
        .filter(|(k, _)| CHANNEL_SETTINGS.contains(&k.as_str()))
        .map(|(k, v)| {
            format!("{k}={v} (every published result ran NCCL's default channels and CTAs)")
        })
        .collect();
    if socket_connections > 0 {
        out.push(format!(
            "NET/Socket for {socket_connections} connection(s) (every published multi-node result ran over InfiniBand or RoCE)"
        ));
    }
    out
}

/// NCCL's bandwidth for the plan's algorithm and protocol on two nodes of the same machine (the
/// communicator cut to its first two nodes, NCCL's own model, same size correction), for the
/// bound on tree algorithms above two nodes ([`tree_bound`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TwoNodes {
    pub nranks: usize,
    /// GB/s, as [`Choice::bw`].
    pub bw: f64,
}

/// What the expected value of a plan depends on besides NCCL's choice.
#[derive(Clone, Copy, Debug)]
pub struct Conditions<'a> {
    /// The GPUs' compute capability as NCCL reads it (90 for H100).
    pub sm: u32,
    /// NCCL's node count and the communicator's rank count.
    pub nnodes: usize,
    pub nranks: usize,
    /// The fabric between nodes, by the fabric vocabulary's names (`ib`, `roce`, `efa`,
    /// `slingshot`, `tcpx`, `tcpxo`, `socket`); unused on one node.
    pub fabric: &'a str,
    /// Above two nodes: the same choice's bandwidth on two nodes, where the plan has it.
    pub two_nodes: Option<TwoNodes>,
    /// Above one node, for an NVLS or NVLSTree choice: NCCL's choice for the same size on
    /// node 0 alone, where the plan has it ([`one_node_bound`]).
    pub one_node: Option<OneNode<'a>>,
}

/// NCCL's choice on NCCL node 0 alone for the size of a multi-node NVLS or NVLSTree choice,
/// and that communicator's rank count.
#[derive(Clone, Copy, Debug)]
pub struct OneNode<'a> {
    pub choice: &'a Choice,
    pub nranks: usize,
}

/// `outside` lists where the plan leaves the fitted conditions (`outside_fits`): no rule
/// applies there and the value has no band. Tree algorithms above two nodes are held to half
/// the rate a two-node rule of the machine measured ([`tree_bound`]).
pub fn expected(c: &Choice, at: Conditions, outside: &[String]) -> Expected {
    let e = expected_here(c, at, outside);
    if !outside.is_empty() {
        return e;
    }
    let e = match tree_bound(c, at) {
        Some(b) if b.time_us > e.time_us => b,
        _ => e,
    };
    match one_node_bound(c, at) {
        Some(b) if b.time_us > e.time_us => b,
        _ => e,
    }
}

/// NVLS and NVLSTree above one node: at least the time NCCL node 0 alone takes for the same
/// size. Both reduce within a node through NVLink SHARP (NVLS reduce-scatter, then the network
/// or nothing, then NVLS all-gather: src/device/all_reduce.h, NCCL 2.18-2.28), so every node
/// does the whole of a one-node allreduce of the same bytes, and the communicator can be no
/// faster than its own node alone. NCCL's model does not see it: on two GB200 NVL72 racks
/// under NCCL 2.26 it gives NVLSTree 1,197 GB/s at 16 GB, above one rack's 864, where two racks
/// measured 820 (CoreWeave). The one-node time is the expected value of NCCL's own choice on
/// node 0 alone (rule, pooled level or NCCL's time, as that node would be planned); its band is
/// the multi-node fabric's for that basis, where `fit.py` puts its held-out residuals.
fn one_node_bound(c: &Choice, at: Conditions) -> Option<Expected> {
    let one = at.one_node.filter(|_| at.nnodes > 1)?;
    if !matches!(c.algo, Algorithm::Nvls | Algorithm::NvlsTree) {
        return None;
    }
    let alone = Conditions {
        nnodes: 1,
        nranks: one.nranks,
        two_nodes: None,
        one_node: None,
        ..at
    };
    let e = expected_here(one.choice, alone, &[]);
    Some(Expected {
        time_us: e.time_us,
        kind: e.kind,
        band: Some(band(e.kind, c.bytes, at.fabric)),
        no_band: None,
        basis: format!(
            "{} {}/{} over {} nodes: at most one node's rate (NVLS reduces within each \
             node, so no node outruns its own allreduce): node 0 alone, {} ranks, as NCCL \
             plans it there, {}/{}: {}",
            c.func.cli_name(),
            c.algo.name(),
            c.proto.name(),
            at.nnodes,
            one.nranks,
            one.choice.algo.name(),
            one.choice.proto.name(),
            e.basis
        ),
    })
}

/// The rule of the cell of `c` (GPU generation, collective, algorithm, protocol, one node or
/// several, fabric between nodes), whether or not it covers the size and rank count.
fn rule_of(c: &Choice, sm: u32, nnodes: usize, fabric: &str) -> Option<&'static Rule> {
    let arch = format!("sm{sm}");
    let nodes = if nnodes > 1 { "multi" } else { "single" };
    rules().iter().find(|r| {
        r.arch == arch
            && r.collective == c.func
            && r.algo == c.algo
            && r.proto == c.proto
            && r.nodes == nodes
            && (nnodes <= 1 || r.fabric == fabric)
    })
}

/// Tree and NVLSTree above two nodes: at most half the rate a rule fitted on two nodes of the
/// machine alone measured. NCCL's double binary tree (src/graph/trees.cc, `ncclGetDtree`,
/// NCCL 2.18-2.28) over more than two nodes makes every node an inner node of one tree and a
/// leaf of the other, so each node's network sends and receives twice the bytes it does on two
/// nodes (2S each way against S: on two nodes each tree is one edge). NCCL's model halves only
/// bwInter, and only for NVLSTree (src/graph/tuning.cc, `ncclTopoTuneModel`, NCCL 2.21-2.28:
/// min(bwIntra, nNodes <= 2 ? bwInter : bwInter / 2)), which binds nothing where bwIntra is the
/// smaller, as on GB200 NVL72 (20 against 40 GB/s per channel): measured, NVLSTree goes from
/// 820 GB/s on 2 racks to 406-433 on 20, and on B200 from 720 on 2 nodes to 388-390 on 4 to 64
/// (Tree 339 to 192-196). The bound is the two-node rule at NCCL's two-node bandwidth with its
/// bandwidth term doubled and its latency and pipeline ramp, one level of the tree on two nodes,
/// times the tree's depth: NCCL's network steps grow as 2 log2(n) (tuning.cc), log2(n) times
/// the two-node count. It applies only where NCCL's model gives the choice the same bandwidth
/// above two nodes as on two: where its bandwidth drops (bwInter halved and binding, or Tree
/// going from bwIntra to bwInter), the doubling is in NCCL's figure already, which the rule
/// scales, and bounding again would count it twice. A rule whose results span several node
/// counts carries its own scaling and is left as it is; without a two-node rule NCCL's own
/// figure stands (its two-node rate is a model, not a measurement of the machine's network).
fn tree_bound(c: &Choice, at: Conditions) -> Option<Expected> {
    if at.nnodes <= 2 || !matches!(c.algo, Algorithm::Tree | Algorithm::NvlsTree) {
        return None;
    }
    let two = at
        .two_nodes
        .filter(|t| t.bw > 0.0 && c.bw >= t.bw * (1.0 - 1e-9))?;
    let r = rule_of(c, at.sm, 2, at.fabric)
        .filter(|r| r.covers(c.bytes, two.nranks))
        .filter(|r| r.rank_range().is_some_and(|(_, hi)| hi <= two.nranks))?;
    let tb2 = c.bytes as f64 / (1000.0 * two.bw);
    let steps2 = steps(c.algo, c.func, 2);
    let depth = steps(c.algo, c.func, at.nnodes) / steps2;
    let level = r.lat_us + r.lat_node_us * steps2 + r.ramp * tb2.sqrt();
    Some(Expected {
        time_us: 2.0 * tb2 / r.bw_efficiency + depth * level,
        kind: "rule",
        band: Some(band("rule", c.bytes, at.fabric)),
        no_band: None,
        basis: format!(
            "{} {} {}/{} above two nodes over {}: at most half the two-node rate (a double \
             binary tree over more than two nodes carries twice a node's two-node bytes): the \
             two-node rule's bandwidth term x 2 at NCCL's two-node {} GB/s (efficiency {}), its \
             latency {} us and ramp {} x {depth} (the tree's depth, log2 of {} nodes) (fitted on \
             {} sizes {} at {} ranks of {})",
            r.arch,
            r.collective.cli_name(),
            r.algo.name(),
            r.proto.name(),
            at.fabric,
            (two.bw * 1000.0).round() / 1000.0,
            r.bw_efficiency,
            r.lat_us,
            r.ramp,
            at.nnodes,
            r.points,
            r.sizes,
            r.ranks,
            r.from.join(", ")
        ),
    })
}

fn expected_here(c: &Choice, at: Conditions, outside: &[String]) -> Expected {
    let Conditions {
        sm,
        nnodes,
        nranks,
        fabric,
        ..
    } = at;
    let band_fabric = if nnodes > 1 { fabric } else { "any" };
    if !outside.is_empty() {
        let why = format!(
            "no published result was measured under {}",
            outside.join(", ")
        );
        return Expected {
            time_us: c.time_us,
            kind: "nccl",
            basis: format!("NCCL's time: {why}"),
            band: None,
            no_band: Some(format!(
                "no band: {why}; a measurement can be compared with NCCL's time, not judged"
            )),
        };
    }
    let arch = format!("sm{sm}");
    let hit = rule_of(c, sm, nnodes, fabric);
    let where_ = if nnodes > 1 {
        format!("several nodes over {fabric}")
    } else {
        "one node".to_string()
    };
    match hit {
        Some(r) if c.bw > 0.0 && r.covers(c.bytes, nranks) => Expected {
            time_us: r.time_us(
                c.bytes as f64 / (1000.0 * c.bw),
                steps(c.algo, c.func, nnodes),
            ),
            kind: "rule",
            band: Some(band("rule", c.bytes, band_fabric)),
            no_band: None,
            basis: format!(
                "{} {} {}/{} {}: lat {} us{}, bandwidth x {}, ramp {} (fitted on {} sizes {} at {} ranks of {})",
                r.arch,
                r.collective.cli_name(),
                r.algo.name(),
                r.proto.name(),
                where_,
                r.lat_us,
                if r.lat_node_us > 0.0 {
                    format!(
                        " + {} us x {} network steps",
                        r.lat_node_us,
                        steps(c.algo, c.func, nnodes)
                    )
                } else {
                    String::new()
                },
                r.bw_efficiency,
                r.ramp,
                r.points,
                r.sizes,
                r.ranks,
                r.from.join(", ")
            ),
        },
        Some(r) => {
            let why = format!(
                "the {arch} {} {}/{} rule on {where_} is fitted on sizes {} at {} ranks only",
                c.func.cli_name(),
                c.algo.name(),
                c.proto.name(),
                r.sizes,
                r.ranks
            );
            fallback(c, at, band_fabric, why)
        }
        None => {
            let why = format!(
                "no published result calibrates {arch} {} {}/{} on {where_}",
                c.func.cli_name(),
                c.algo.name(),
                c.proto.name()
            );
            fallback(c, at, band_fabric, why)
        }
    }
}

/// Where no rule of the cell covers the choice (`why`): the pooled level of its collective and
/// protocol where one is fitted, else NCCL's time.
fn fallback(c: &Choice, at: Conditions, band_fabric: &str, why: String) -> Expected {
    let Some(p) = pooled_for(c, at.nnodes, at.fabric).filter(|_| c.bw > 0.0) else {
        return Expected {
            time_us: c.time_us,
            kind: "nccl",
            band: Some(band("nccl", c.bytes, band_fabric)),
            no_band: None,
            basis: format!("NCCL's time: {why}"),
        };
    };
    let (net, intra) = (
        steps(c.algo, c.func, at.nnodes),
        intra_steps(c.algo, c.func, at.nranks, at.nnodes),
    );
    // NCCL's own latency and bandwidth terms, as fit.py adds the pooled latencies to them.
    let tb = c.bytes as f64 / (1000.0 * c.bw);
    let nccl = c.lat_us + tb;
    let mut terms = vec![];
    if p.lat_us > 0.0 {
        terms.push(format!("{} us", p.lat_us));
    }
    if p.net_step_us > 0.0 {
        terms.push(format!("{} us x {net} network steps", p.net_step_us));
    }
    if p.intra_step_us > 0.0 {
        terms.push(format!("{} us x {intra} intra-node steps", p.intra_step_us));
    }
    if p.ramp > 0.0 {
        terms.push(format!("{} x sqrt(tb) ramp", p.ramp));
    }
    let added = if terms.is_empty() {
        " (the level adds no latency at these sizes)".to_string()
    } else {
        format!(" + {}", terms.join(" + "))
    };
    Expected {
        time_us: nccl
            + p.lat_us
            + p.net_step_us * net
            + p.intra_step_us * intra
            + p.ramp * tb.sqrt(),
        kind: "pooled",
        band: Some(band("pooled", c.bytes, band_fabric)),
        no_band: None,
        basis: format!(
            "NCCL's time{added}, the {} {} latencies pooled over {} sizes of {} sources{} ({}), \
             since {why}",
            c.func.cli_name(),
            c.proto.name(),
            p.points,
            p.from.len(),
            p.plugin
                .as_deref()
                .map(|x| format!(" of the fabrics NCCL reaches through its {x} plugin"))
                .unwrap_or_default(),
            p.from.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Algorithm, Collective, Protocol};

    fn at(sm: u32, nnodes: usize, nranks: usize) -> Conditions<'static> {
        Conditions {
            sm,
            nnodes,
            nranks,
            fabric: "ib",
            two_nodes: None,
            one_node: None,
        }
    }

    fn choice(algo: Algorithm, proto: Protocol, bytes: u64, lat_us: f64, bw: f64) -> Choice {
        Choice {
            func: Collective::AllReduce,
            bytes,
            algo,
            proto,
            time_us: lat_us + bytes as f64 / (1000.0 * bw),
            bw,
            lat_us,
            nchannels: 16,
            nthreads: 512,
            considered: vec![],
            rejected: vec![],
            explain: vec![],
        }
    }

    #[test]
    fn every_rule_is_complete_and_physical() {
        assert!(!rules().is_empty());
        for r in rules() {
            assert!(r.arch.starts_with("sm"), "{r:?}");
            assert!(r.nodes == "single" || r.nodes == "multi", "{r:?}");
            assert!(r.lat_us.is_finite() && r.lat_us >= 0.0, "{r:?}");
            assert!(
                r.bw_efficiency.is_finite() && r.bw_efficiency > 0.0,
                "{r:?}"
            );
            assert!(r.ramp.is_finite() && r.ramp >= 0.0, "{r:?}");
            assert!(r.points > 0 && !r.from.is_empty(), "{r:?}");
            assert!(r.min_bytes().is_some(), "{r:?}");
            assert!(
                r.rank_range().is_some_and(|(lo, hi)| 0 < lo && lo <= hi),
                "{r:?}"
            );
        }
    }

    #[test]
    fn every_basis_and_size_range_has_a_band_around_one() {
        for ruled in [true, false] {
            for bytes in [8, 1 << 20, 1 << 30] {
                let b = band(if ruled { "rule" } else { "nccl" }, bytes, "any");
                assert!(0.0 < b.lo && b.lo < 1.0 && 1.0 < b.hi, "{b:?}");
                assert!(!b.basis.starts_with("no held-out"), "{b:?}");
            }
        }
        // Expected values from NCCL's own time are looser than fitted ones: they are 1.5-3x
        // optimistic at small and mid sizes.
        assert!(band("nccl", 1 << 20, "any").lo < band("rule", 1 << 20, "any").lo);
        // A band of the cell's own points counts them; one taken from elsewhere says its own
        // counts once (the cell's would read as the band's).
        for b in &data().bands {
            let text = band(&b.basis, size_bytes(&b.sizes), &b.fabric).basis;
            let own = b.how == "held-out points";
            assert_eq!(text.starts_with("held-out points: "), own, "{text}");
            assert!(text.matches("held-out points").count() <= 1, "{text}");
        }
    }

    /// A size in the range `band` names (`small`, `mid`, `large`).
    fn size_bytes(range: &str) -> u64 {
        match range {
            "small" => 8,
            "mid" => 1 << 20,
            _ => 1 << 30,
        }
    }

    #[test]
    fn a_rule_is_not_extrapolated_far_below_its_fitted_sizes() {
        let r = rules()
            .iter()
            .find(|r| r.min_bytes().is_some_and(|lo| lo >= 16 << 20))
            .expect("a rule fitted only at large sizes");
        let (algo, proto) = (r.algo, r.proto);
        let sm: u32 = r.arch.trim_start_matches("sm").parse().unwrap();
        let nnodes = if r.nodes == "multi" { 2 } else { 1 };
        let (lo, ranks) = (r.min_bytes().unwrap(), r.rank_range().unwrap().0);
        let cond = Conditions {
            fabric: &r.fabric,
            ..at(sm, nnodes, ranks)
        };
        let mut small = choice(algo, proto, lo / 8, 25.0, 500.0);
        small.func = r.collective;
        let e = expected(&small, cond, &[]);
        // Not the rule: NCCL's time, or the pooled level where one covers the size.
        assert!(!e.basis.starts_with(&r.arch), "{}", e.basis);
        assert!(e.basis.contains("is fitted on sizes"), "{}", e.basis);
        let fitted = choice(algo, proto, lo, 25.0, 500.0);
        assert!(expected(&fitted, cond, &[]).basis.contains("fitted on"));
        assert_ne!(expected(&fitted, cond, &[]).time_us, fitted.time_us);
    }

    #[test]
    fn a_rule_applies_only_near_the_rank_counts_it_was_fitted_on() {
        let r = rules()
            .iter()
            .find(|r| r.arch == "sm90" && r.algo == Algorithm::Nvls && r.nodes == "single")
            .expect("an H100 NVLS rule");
        let (lo, hi) = r.rank_range().unwrap();
        let c = choice(Algorithm::Nvls, Protocol::Simple, 1 << 30, 25.0, 272.0);
        assert_ne!(expected(&c, at(90, 1, lo), &[]).time_us, c.time_us);
        let far = expected(&c, at(90, 1, hi * RANK_SPAN + 1), &[]);
        assert!(!far.basis.starts_with("sm90"), "{}", far.basis);
        assert!(far.basis.contains("ranks only"), "{}", far.basis);
    }

    #[test]
    fn a_rule_replaces_nccls_latency_and_scales_its_bandwidth() {
        let r = rules()
            .iter()
            .find(|r| r.arch == "sm90" && r.algo == Algorithm::Nvls && r.nodes == "single")
            .expect("an H100 NVLS rule");
        let c = choice(Algorithm::Nvls, Protocol::Simple, 1 << 30, 25.0, 272.0);
        let e = expected(&c, at(90, 1, 8), &[]);
        let tb = (1u64 << 30) as f64 / (1000.0 * 272.0);
        let want = r.lat_us + tb / r.bw_efficiency + r.ramp * tb.sqrt();
        assert_eq!(steps(Algorithm::Nvls, Collective::AllReduce, 1), 0.0);
        assert!((e.time_us - want).abs() < 1e-9, "{e:?}");
        assert!(e.basis.contains("fitted on"), "{}", e.basis);
    }

    /// The two-rack GB200 NVL72 NVLSTree rule: fitted on two NVLink domains (144 ranks) alone.
    fn two_rack_rule() -> &'static Rule {
        rules()
            .iter()
            .find(|r| r.arch == "sm100" && r.algo == Algorithm::NvlsTree && r.nodes == "multi")
            .expect("the sm100 NVLSTree rule of two racks")
    }

    #[test]
    fn a_tree_above_two_nodes_is_held_to_half_the_two_node_rate() {
        let r = two_rack_rule();
        let (_, two_ranks) = r.rank_range().unwrap();
        // NCCL 2.26 gives NVLSTree the same 533 GB/s on 2 and on 20 domains (bwIntra binds).
        let c = choice(
            Algorithm::NvlsTree,
            Protocol::Simple,
            16 << 30,
            137.0,
            533.333,
        );
        let two = expected(&c, at(100, 2, two_ranks), &[]);
        assert!(two.basis.contains("fitted on"), "{}", two.basis);
        let free = Conditions {
            two_nodes: None,
            ..at(100, 20, 10 * two_ranks)
        };
        let bound = Conditions {
            two_nodes: Some(TwoNodes {
                nranks: two_ranks,
                bw: 533.333,
            }),
            ..free
        };
        // Without the bound 20 domains are expected faster than two (NCCL's figure, pooled).
        assert!(expected(&c, free, &[]).time_us < two.time_us);
        let e = expected(&c, bound, &[]);
        assert!(e.time_us >= 2.0 * two.time_us, "{e:?} against {two:?}");
        let tb2 = (16u64 << 30) as f64 / (1000.0 * 533.333);
        let level = r.lat_us + r.ramp * tb2.sqrt();
        let want = 2.0 * tb2 / r.bw_efficiency + 4.0 * level;
        assert!((e.time_us - want).abs() < 1e-6, "{e:?}");
        assert!(e.basis.contains("above two nodes"), "{}", e.basis);
        assert!(e.band.is_some());
        // On three nodes the tree is no deeper than on two: the bandwidth term alone doubles.
        let three = Conditions {
            nnodes: 3,
            nranks: 3 * two_ranks / 2,
            ..bound
        };
        let want = 2.0 * tb2 / r.bw_efficiency + level;
        assert!((expected(&c, three, &[]).time_us - want).abs() < 1e-6);
    }

    /// Two GB200 NVL72 racks under NCCL 2.26's figure for NVLSTree (533 GB/s, above one
    /// rack's NVLS) are held to one rack's expected time; with one rack faster than that, or
    /// for a Ring choice, nothing changes.
    #[test]
    fn nvls_over_several_nodes_is_no_faster_than_one_node_alone() {
        let rack = rules()
            .iter()
            .find(|r| r.arch == "sm100" && r.algo == Algorithm::Nvls && r.nodes == "single")
            .expect("the one-rack sm100 NVLS rule");
        let (_, rack_ranks) = rack.rank_range().unwrap();
        let bytes = 8u64 << 30;
        let one = choice(Algorithm::Nvls, Protocol::Simple, bytes, 25.0, 533.333);
        let alone = expected(&one, at(100, 1, rack_ranks), &[]);
        assert!(alone.basis.contains("fitted on"), "{}", alone.basis);
        // Two racks as no rule calibrates them (another fabric): NCCL's figure, faster.
        let c = choice(Algorithm::NvlsTree, Protocol::Simple, bytes, 137.0, 533.333);
        let free = Conditions {
            fabric: "roce",
            ..at(100, 2, 2 * rack_ranks)
        };
        assert!(expected(&c, free, &[]).time_us < alone.time_us);
        let bound = Conditions {
            one_node: Some(OneNode {
                choice: &one,
                nranks: rack_ranks,
            }),
            ..free
        };
        let e = expected(&c, bound, &[]);
        assert_eq!(e.time_us, alone.time_us);
        assert_eq!(e.kind, "rule");
        assert!(e.basis.contains("at most one node's rate"), "{}", e.basis);
        assert!(e.band.is_some());
        // A ring is not bounded so; nor is anything where node 0 alone is the slower.
        let ring = Choice {
            algo: Algorithm::Ring,
            ..c.clone()
        };
        assert_eq!(expected(&ring, bound, &[]), expected(&ring, free, &[]));
        let fast = choice(Algorithm::Nvls, Protocol::Simple, bytes, 25.0, 5000.0);
        let quick = Conditions {
            one_node: Some(OneNode {
                choice: &fast,
                nranks: rack_ranks,
            }),
            ..free
        };
        assert_eq!(expected(&c, quick, &[]), expected(&c, free, &[]));
    }

    #[test]
    fn the_tree_bound_leaves_rings_two_nodes_and_rules_of_several_node_counts_alone() {
        let r = two_rack_rule();
        let (_, two_ranks) = r.rank_range().unwrap();
        let two_nodes = Some(TwoNodes {
            nranks: two_ranks,
            bw: 533.333,
        });
        let same = |c: &Choice, cond: Conditions| {
            let free = Conditions {
                two_nodes: None,
                ..cond
            };
            assert_eq!(expected(c, cond, &[]), expected(c, free, &[]));
        };
        let tree = choice(
            Algorithm::NvlsTree,
            Protocol::Simple,
            1 << 30,
            137.0,
            533.333,
        );
        let ring = choice(Algorithm::Ring, Protocol::Simple, 1 << 30, 137.0, 533.333);
        let twenty = Conditions {
            two_nodes,
            ..at(100, 20, 10 * two_ranks)
        };
        same(&ring, twenty);
        same(
            &tree,
            Conditions {
                nnodes: 2,
                nranks: two_ranks,
                ..twenty
            },
        );
        // Where NCCL's own bandwidth drops above two nodes, the doubling is in it already.
        same(
            &tree,
            Conditions {
                two_nodes: Some(TwoNodes {
                    nranks: two_ranks,
                    bw: 2.0 * 533.333,
                }),
                ..twenty
            },
        );
        // Outside the fitted conditions nothing is bounded (and there is no band).
        let e = expected(&tree, twenty, &outside_fits(&[], 8));
        assert_eq!(e.time_us, tree.time_us);
        // A rule whose results span node counts (Polaris Tree/Simple over Slingshot, 8 to 540
        // nodes) carries its own node scaling.
        let wide = rules()
            .iter()
            .find(|r| {
                r.algo == Algorithm::Tree
                    && r.nodes == "multi"
                    && r.rank_range().is_some_and(|(lo, hi)| hi > 4 * lo)
            })
            .expect("a Tree rule over several node counts");
        let (lo, _) = wide.rank_range().unwrap();
        let sm: u32 = wide.arch.trim_start_matches("sm").parse().unwrap();
        let mut c = choice(Algorithm::Tree, wide.proto, 1 << 20, 30.0, 20.0);
        c.func = wide.collective;
        let cond = Conditions {
            fabric: &wide.fabric,
            two_nodes: Some(TwoNodes {
                nranks: lo,
                bw: 40.0,
            }),
            ..at(sm, 16, 8 * lo)
        };
        same(&c, cond);
    }

    #[test]
    fn no_rule_keeps_nccls_time_and_says_so() {
        let mut c = choice(Algorithm::Ring, Protocol::Simple, 1 << 20, 10.0, 100.0);
        // No published result of any machine measures reducescatter: no pooled level either.
        c.func = Collective::ReduceScatter;
        let e = expected(&c, at(75, 1, 8), &[]);
        assert_eq!(e.time_us, c.time_us);
        assert!(
            e.basis.starts_with("NCCL's time: no published result"),
            "{}",
            e.basis
        );
    }

    #[test]
    fn channel_settings_and_the_socket_transport_are_outside_every_fit() {
        let env = |k: &str, v: &str| (k.to_string(), v.to_string());
        let given = [
            env("NCCL_MIN_CTAS", "24"),
            env("NCCL_IB_HCA", "mlx5_0"),
            env("NCCL_NET_GDR_LEVEL", "2"),
        ];
        let out = outside_fits(&given, 0);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].starts_with("NCCL_MIN_CTAS=24"), "{out:?}");
        assert!(outside_fits(&given[1..], 0).is_empty());
        let socket = outside_fits(&[], 16);
        assert!(socket[0].starts_with("NET/Socket for 16"), "{socket:?}");
    }

    #[test]
    fn outside_the_fits_no_rule_applies_and_there_is_no_band() {
        let c = choice(Algorithm::Nvls, Protocol::Simple, 1 << 30, 25.0, 272.0);
        assert!(expected(&c, at(90, 1, 8), &[]).band.is_some());
        let e = expected(&c, at(90, 1, 8), &outside_fits(&[], 8));
        assert_eq!(e.time_us, c.time_us);
        assert!(e.band.is_none());
        assert!(e.basis.contains("NET/Socket"), "{}", e.basis);
        assert!(e.no_band.unwrap().starts_with("no band:"));
    }

    /// The pooled allreduce Simple level that `pick` accepts; the data must have one.
    fn allreduce_simple(pick: impl Fn(&&Pooled) -> bool) -> &'static Pooled {
        data()
            .pooled
            .iter()
            .filter(|p| p.collective == Collective::AllReduce && p.proto == Protocol::Simple)
            .find(pick)
            .expect("a pooled allreduce Simple level of that kind")
    }

    #[test]
    fn without_a_rule_the_pooled_latencies_are_added_to_nccls_time() {
        // sm75 has no rule; allreduce Simple on several nodes has a pooled level.
        let p = allreduce_simple(|p| p.nodes == "multi" && p.plugin.is_none());
        assert!(p.from.len() >= 2, "{p:?}");
        let c = choice(Algorithm::Ring, Protocol::Simple, 1 << 20, 10.0, 100.0);
        let e = expected(&c, at(75, 4, 32), &[]);
        let want = c.time_us + p.lat_us + p.net_step_us * 6.0 + p.intra_step_us * 56.0;
        assert!((e.time_us - want).abs() < 1e-9, "{e:?} against {want}");
        assert!(e.basis.contains("pooled over"), "{}", e.basis);
        assert!(e.band.unwrap().basis.contains("pooled latencies"));
    }

    #[test]
    fn a_plugins_fabrics_take_the_plugins_level_with_its_ramp() {
        let p = allreduce_simple(|p| p.plugin.as_deref() == Some("libfabric"));
        let c = choice(Algorithm::Ring, Protocol::Simple, 1 << 20, 10.0, 100.0);
        let efa = Conditions {
            fabric: "efa",
            ..at(75, 4, 32)
        };
        let e = expected(&c, efa, &[]);
        let tb = (1u64 << 20) as f64 / (1000.0 * 100.0);
        let want = c.time_us
            + p.lat_us
            + p.net_step_us * 6.0
            + p.intra_step_us * 56.0
            + p.ramp * tb.sqrt();
        assert!((e.time_us - want).abs() < 1e-9, "{e:?} against {want}");
        assert!(e.basis.contains("libfabric plugin"), "{}", e.basis);
        // InfiniBand, and one node, keep the level of every fabric.
        let ib = expected(&c, at(75, 4, 32), &[]);
        assert!(!ib.basis.contains("plugin"), "{}", ib.basis);
    }

    #[test]
    fn every_pooled_level_is_physical_and_from_two_sources() {
        for p in &data().pooled {
            assert!(p.nodes == "single" || p.nodes == "multi", "{p:?}");
            for v in [p.lat_us, p.net_step_us, p.intra_step_us, p.ramp] {
                assert!(v.is_finite() && v >= 0.0, "{p:?}");
            }
            // Only a plugin's level fits a ramp, and only over several nodes.
            assert!(p.ramp == 0.0 || p.plugin.is_some(), "{p:?}");
            assert!(p.plugin.is_none() || p.nodes == "multi", "{p:?}");
            assert!(p.points > 0 && p.from.len() >= 2, "{p:?}");
            assert!(p.covers(u64::MAX), "{p:?}");
        }
    }

    #[test]
    fn intra_node_steps_follow_nccls_latency_model() {
        assert_eq!(
            intra_steps(Algorithm::Ring, Collective::AllReduce, 8, 1),
            14.0
        );
        assert_eq!(
            intra_steps(Algorithm::Ring, Collective::AllReduce, 32, 4),
            56.0
        );
        assert_eq!(
            intra_steps(Algorithm::Ring, Collective::AllGather, 32, 4),
            28.0
        );
        assert_eq!(
            intra_steps(Algorithm::Tree, Collective::AllReduce, 32, 4),
            14.0
        );
        assert_eq!(
            intra_steps(Algorithm::Nvls, Collective::AllReduce, 8, 1),
            1.0
        );
    }

    #[test]
    fn network_steps_follow_nccls_latency_model() {
        assert_eq!(steps(Algorithm::Ring, Collective::AllReduce, 1), 0.0);
        assert_eq!(steps(Algorithm::Ring, Collective::AllReduce, 8), 14.0);
        assert_eq!(steps(Algorithm::Ring, Collective::AllGather, 8), 7.0);
        assert_eq!(steps(Algorithm::Tree, Collective::AllReduce, 540), 18.0);
        assert_eq!(steps(Algorithm::NvlsTree, Collective::AllReduce, 2), 2.0);
        assert_eq!(steps(Algorithm::Nvls, Collective::AllReduce, 4), 1.0);
    }

    #[test]
    fn a_multi_node_rule_applies_only_to_its_fabric() {
        let r = rules()
            .iter()
            .find(|r| r.nodes == "multi" && r.fabric != "ib" && r.min_bytes() < Some(16 << 20))
            .expect("a multi-node rule fitted on another fabric");
        let sm: u32 = r.arch.trim_start_matches("sm").parse().unwrap();
        let ranks = r.rank_range().unwrap().0;
        let mut c = choice(r.algo, r.proto, r.min_bytes().unwrap(), 25.0, 100.0);
        c.func = r.collective;
        let on = Conditions {
            fabric: &r.fabric,
            ..at(sm, 2, ranks)
        };
        assert!(expected(&c, on, &[]).basis.contains("fitted on"));
        let ib = expected(&c, at(sm, 2, ranks), &[]);
        assert!(
            !ib.basis.contains(&format!("over {}", r.fabric)),
            "{}",
            ib.basis
        );
        // One node has no fabric: the one-node band, whatever the fabric.
        let one = Conditions {
            fabric: "efa",
            ..at(90, 1, 8)
        };
        let b = expected(
            &choice(Algorithm::Nvls, Protocol::Simple, 1 << 30, 25.0, 272.0),
            one,
            &[],
        );
        assert!(b.band.unwrap().basis.contains("one node"));
    }

    #[test]
    fn a_fabric_without_published_results_has_a_wide_band_that_says_so() {
        let tcpx = Conditions {
            fabric: "tcpx",
            ..at(90, 2, 16)
        };
        let c = choice(Algorithm::Ring, Protocol::Simple, 1 << 30, 25.0, 100.0);
        let b = expected(&c, tcpx, &[]).band.unwrap();
        assert!(
            b.basis.contains("no published result for this fabric"),
            "{}",
            b.basis
        );
        let ib = expected(&c, at(90, 2, 16), &[]).band.unwrap();
        assert!(b.lo < ib.lo && b.hi >= ib.hi, "{b:?} against {ib:?}");
    }
}
