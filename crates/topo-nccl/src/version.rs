//! NCCL versions and the per-version data the model reads: bandwidth constants, search speed
//! arrays, tuning tables, channel defaults and the switches that say which variant of a rule a
//! version uses. Rules live in code (`nccl::tuning`, `nccl::search`, …); WHICH variant applies,
//! and every constant, lives in `profiles/nccl/<version>.yaml`.
//!
//! Each YAML file either stands alone or names the file it `inherits` and lists only what
//! changed, so the files read like NCCL's own change log. Versions read in detail for the
//! reference (2.18, 2.21, 2.23, 2.27, 2.28, 2.30) are `documented: true`; the others carry the
//! nearest earlier documented version's data plus the changes spot-checked in the sources, and
//! say so in `note`.

use crate::error::{Error, ErrorKind, Result};
use crate::types::{Algorithm, PathType};
use serde::{Deserialize, Serialize};
use std::fmt;
use topo_model::BwConstants;

/// An NCCL release, as users write it: `2.28`, `2.28.9`, `2.28.9-1`, `v2.28.9-1`, `2.29.7+cuda12.9`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct NcclVersion {
    pub major: u32,
    pub minor: u32,
    /// `None` when only `major.minor` was given.
    pub patch: Option<u32>,
}

/// Minor versions of NCCL 2 the model knows.
pub const SUPPORTED_MINORS: [u32; 13] = [18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30];

/// The version the model assumes when nothing else is known.
pub const DEFAULT_VERSION: NcclVersion = NcclVersion {
    major: 2,
    minor: 28,
    patch: None,
};

fn supported_list() -> String {
    SUPPORTED_MINORS
        .iter()
        .map(|m| format!("2.{m}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl NcclVersion {
    pub fn new(major: u32, minor: u32, patch: Option<u32>) -> NcclVersion {
        NcclVersion {
            major,
            minor,
            patch,
        }
    }

    /// Parses and checks that the version is supported.
    /// Whether this release includes a change first released in `since` (`2.27.5`). A version
    /// given without a patch stands for the release the data describes (the minor's last
    /// checked tag), which includes it when its minor does.
    pub fn includes(&self, since: &str) -> bool {
        let Ok(s) = NcclVersion::parse(since) else {
            return false;
        };
        (self.major, self.minor) > (s.major, s.minor)
            || (self.minor == s.minor && self.patch.is_none_or(|p| p >= s.patch.unwrap_or(0)))
    }

    pub fn parse(s: &str) -> Result<NcclVersion> {
        let bad = |why: &str| {
            Error::new(ErrorKind::Version, format!("bad nccl version '{s}': {why}")).help(format!(
                "use MAJOR.MINOR[.PATCH[-BUILD]], one of {}",
                supported_list()
            ))
        };
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        // Build suffixes NCCL prints: `-1` (package build), `+cuda12.9` (CUDA flavour).
        let t = t.split(['+', '-']).next().unwrap_or("");
        let parts: Vec<&str> = t.split('.').collect();
        if parts.len() < 2 || parts.len() > 3 {
            return Err(bad("expected MAJOR.MINOR or MAJOR.MINOR.PATCH"));
        }
        let num = |p: &str| -> Result<u32> {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(&format!("'{p}' is not a number")));
            }
            p.parse::<u32>()
                .map_err(|_| bad(&format!("'{p}' is too large")))
        };
        let major = num(parts[0])?;
        let minor = num(parts[1])?;
        let patch = match parts.get(2) {
            Some(p) => Some(num(p)?),
            None => None,
        };
        let v = NcclVersion {
            major,
            minor,
            patch,
        };
        if major != 2 || !SUPPORTED_MINORS.contains(&minor) {
            return Err(Error::new(
                ErrorKind::Version,
                format!(
                    "unsupported nccl version {v}: supported versions are {}",
                    supported_list()
                ),
            ));
        }
        Ok(v)
    }

    /// `2.30` (the data key).
    pub fn short(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }
}

impl fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.patch {
            Some(p) => write!(f, "{}.{}.{}", self.major, self.minor, p),
            None => write!(f, "{}.{}", self.major, self.minor),
        }
    }
}

/// GB/s per channel tried by the graph search, best first (`search.cc`, `speedArray*`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedArrays {
    /// min compute capability < 90
    pub intra_sm80: Vec<f64>,
    pub inter_sm80: Vec<f64>,
    /// min compute capability 90..99 (and ≥ 100 before 2.25)
    pub intra_sm90: Vec<f64>,
    pub inter_sm90: Vec<f64>,
    /// min compute capability ≥ 100, from 2.25 on
    pub intra_sm100: Option<Vec<f64>>,
    pub inter_sm100: Option<Vec<f64>>,
}

impl SpeedArrays {
    /// The array the search starts from for this minimum compute capability.
    pub fn for_cc(&self, min_cc: u32, inter: bool) -> &[f64] {
        let sm100 = if inter {
            &self.inter_sm100
        } else {
            &self.intra_sm100
        };
        match (min_cc, sm100) {
            (c, Some(a)) if c >= 100 => a,
            (c, _) if c >= 90 => {
                if inter {
                    &self.inter_sm90
                } else {
                    &self.intra_sm90
                }
            }
            _ => {
                if inter {
                    &self.inter_sm80
                } else {
                    &self.intra_sm80
                }
            }
        }
    }
}

/// One value per protocol: LL, LL128, Simple.
pub type PerProto = [f64; 3];

/// One row per algorithm (`[LL, LL128, Simple]`); `pat` is absent before 2.23.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerAlgo {
    pub tree: PerProto,
    pub ring: PerProto,
    pub collnet_direct: PerProto,
    pub collnet_chain: PerProto,
    pub nvls: PerProto,
    pub nvls_tree: PerProto,
    pub pat: Option<PerProto>,
}

impl PerAlgo {
    pub fn get(&self, a: Algorithm) -> PerProto {
        match a {
            Algorithm::Tree => self.tree,
            Algorithm::Ring => self.ring,
            Algorithm::CollnetDirect => self.collnet_direct,
            Algorithm::CollnetChain => self.collnet_chain,
            Algorithm::Nvls => self.nvls,
            Algorithm::NvlsTree => self.nvls_tree,
            Algorithm::Pat => self.pat.unwrap_or([0.0; 3]),
            // The host runtime's algorithm: NCCL has no figures for it.
            Algorithm::Direct => [0.0; 3],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HwLatency {
    pub nvlink: PerAlgo,
    pub pci: PerAlgo,
    pub net: PerAlgo,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeCorrection {
    pub ll: Vec<f64>,
    pub ll128: Vec<f64>,
    pub simple: Vec<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadThresholds {
    pub ll: u64,
    pub ll128: u64,
    pub simple: u64,
    /// CollNet direct/chain Simple.
    pub collnet_simple: u64,
}

/// Thread counts per block (`NCCL_*_MAX_NTHREADS`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxThreads {
    pub simple: u32,
    /// Ring Simple when ring bwIntra × nChannels ≤ `pci_bw`.
    pub simple_low_bw: u32,
    pub ll: u32,
    pub ll128: u32,
    /// `NCCL_MAX_NTHREADS` (CollNet, NVLS; Tree and PAT per operation).
    pub max: u32,
    /// Warp size and the GB/s threshold of the low-bandwidth rule (`PCI_BW`).
    pub warp: u32,
    pub pci_bw: f64,
}

/// `src/graph/tuning.cc` tables.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuningTables {
    pub base_latency: PerAlgo,
    pub hw_latency: HwLatency,
    /// `llMaxBws[index1][index2]`: rows by compute-capability index (single node) or CPU
    /// vendor (multi-node), columns 1 node / 2 nodes / more.
    pub ll_max_bw: Vec<[f64; 3]>,
    /// `[ccIndex][index2]`, ccIndex 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell (2.25+).
    pub per_ch_max_ring_ll128_bw: Vec<[f64; 3]>,
    pub per_ch_max_tree_ll128_bw: Vec<[f64; 3]>,
    pub per_ch_max_tree_bw: Vec<[f64; 3]>,
    /// 2.28+.
    pub per_ch_max_nvls_tree_bw: Option<Vec<[f64; 3]>>,
    /// 2.28+, per ccIndex.
    pub nvls_efficiency: Option<Vec<f64>>,
    /// Index 0 = 64 B, doubling; `tree_correction_len` entries are used.
    pub tree_correction: TreeCorrection,
    pub tree_correction_len: usize,
    pub thread_thresholds: ThreadThresholds,
    pub max_threads: MaxThreads,
}

impl TuningTables {
    /// Compute-capability index: Blackwell only exists where the tables have a fourth row.
    pub fn cc_index(&self, min_cc: u32) -> usize {
        let rows = self.per_ch_max_tree_bw.len();
        let idx = match min_cc {
            c if c >= 100 => 3,
            c if c >= 90 => 2,
            c if c >= 80 => 1,
            _ => 0,
        };
        idx.min(rows.saturating_sub(1))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvlsChannels {
    /// `NCCL_NVLS_NCHANNELS` default on SM90 (and everything before 2.27).
    pub sm90: u32,
    /// SM100+ defaults, 2.27+ (before: same as `sm90`).
    pub sm100_single_node: u32,
    pub sm100_multi_node: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Buffers {
    pub ll: u64,
    pub ll128: u64,
    pub simple: u64,
    /// Simple buffer on ARM CPUs where it differs (2.18: 1 MiB).
    pub simple_arm: Option<u64>,
    /// `NCCL_STEPS`.
    pub steps: u32,
}

/// Defaults of environment variables that changed between versions; `None` where the variable
/// does not exist in that version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvDefaults {
    /// `NCCL_CUMEM_ENABLE`: 0 off, -2 auto.
    pub cumem_enable: i64,
    pub net_gdr_c2c: Option<i64>,
    pub pxn_c2c: Option<i64>,
    pub ll128_c2c: Option<i64>,
    pub pat_enable: Option<i64>,
    /// `NCCL_NCHANNELS_PER_NET_PEER`: -1 = auto.
    pub nchannels_per_net_peer: i64,
    /// `NCCL_P2P_PER_CHANNEL_NET_BW` in GB/s (2.29+); `None`: this version does not read it.
    pub p2p_per_channel_net_bw: Option<i64>,
    /// `NCCL_P2P_MAX_PEERS` (2.30+; -1: the communicator size); `None`: not read.
    pub p2p_max_peers: Option<i64>,
    pub cross_nic: i64,
    pub nvls_enable: i64,
    pub collnet_enable: i64,
}

/// Ring LL bus-bandwidth factor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RingLlFactor {
    /// [2.18–2.20] 1/4 multi-node or AllReduce/Reduce, else 1/3.
    QuarterOrThird,
    /// [2.21+] 1/2.
    Half,
}

/// How NVLS/NVLSTree per-channel bandwidth is derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvlsBwRule {
    /// Generic rule (bwIntra/bwInter by node count).
    V2_18,
    /// NVLS min(bwIntra, bwInter); NVLSTree min(bwIntra, bwInter or bwInter/2 above 2 nodes).
    V2_21,
    /// As 2.21, AllGather/ReduceScatter NVLS min(bwIntra × (ppn−1)/ppn, 0.9 × bwInter).
    V2_27,
    /// Efficiency model: bwIntra × eff × (nCh−1)/nCh (×2 AllReduce), needs ≥ 2 channels.
    V2_28,
}

/// Which functions skip the bus → algorithm bandwidth conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlgbwSkip {
    /// Every evaluated cell is converted.
    None,
    /// [2.21–2.22] CollNetDirect AllGather/ReduceScatter keep bus bandwidth.
    CollnetDirectAgRs,
    /// [2.23+] every non-Ring AllGather/ReduceScatter keeps bus bandwidth.
    NonRingAgRs,
}

/// Bus → algorithm ratio for NVLS and NVLSTree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvlsAlgbwRatio {
    /// [2.18] NVLS 5/6, NVLSTree 0.7 × nNodes / (2 (nNodes − 1)).
    V2_18,
    /// [2.19–2.27] 5/6 for both.
    FiveSixths,
    /// [2.28+] nRanks / nsteps, like Ring.
    RingLike,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvlsLatencyRule {
    /// NVLS: base + NET if multi-node; NVLSTree: + 2 (nNodes−1) NET.
    V2_18,
    /// NVLS: intra (+ inter); NVLSTree: + intra + 2 log2(nNodes) inter.
    V2_19,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollnetAgRsRule {
    /// CollNetDirect not evaluated for AllGather/ReduceScatter.
    None,
    /// ppn × bw × (0.95…0.85 interpolated), 1:1 GPU:NIC.
    V2_21,
    /// ppn × min(bwIntra, 0.9 bwInter); NVLS and CollNetDirect multi-node AG/RS need CollNet.
    V2_27,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RingInterStepsRule {
    /// AllReduce 2·nNodes, others nNodes−1.
    V2_18,
    /// AllReduce 2(nNodes−1), others nNodes−1; 0 on one node.
    V2_23,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ll128InterRule {
    /// inter ≤ PXB, or ≤ PXN on min cc ≥ 90.
    PxbOrPxnSm90,
    /// `NCCL_LL128_C2C` (default 1) and min cc ≥ 90: ≤ PXN; else ≤ PXB.
    Ll128C2c,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ll128MixedCcRule {
    Equal,
    /// [2.30] equal, or min cc ≥ 90.
    EqualOrSm90,
}

/// What a function left with no algorithm at all falls back to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RingBackup {
    /// Nothing: selection fails.
    None,
    /// [2.21] Ring's modelled bandwidths come back, every protocol.
    AllProtocols,
    /// [2.22–2.23] Ring's bandwidths come back for the protocols that are enabled.
    EnabledProtocols,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlgoProtoGrammar {
    /// One list, optional leading `^`, unknown tokens ignored.
    SingleList,
    /// `list[;func:list]*`, unknown tokens are errors.
    PerFunction,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelThreadLoop {
    /// One loop: reduce channels, then threads.
    Single,
    /// Reduce channels, then (not NVLS/CollNetDirect) threads.
    Split,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum P2pDefaultLevelRule {
    /// SYS, lowered to PXB on ARM, Intel and Zhaoxin.
    V2_18,
    /// PXB; SYS on AMD x86 with ≤ 2 GPUs.
    V2_23,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathRenumbering {
    /// No C2C, no P2C.
    V2_18,
    /// C2C inserted.
    V2_26,
    /// P2C inserted.
    V2_27,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TreePatternSource {
    /// This rank's tree graph pattern.
    OwnGraph,
    /// Max over ranks (`maxTreePattern`, 2.26+).
    MaxOverRanks,
}

/// Which variant of each version-dependent rule applies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Algorithms NCCL knows (6 before 2.23, PAT added in 2.23); also the TUNING table width.
    pub num_algorithms: usize,
    pub ring_ll_factor: RingLlFactor,
    /// [≤2.22] Ring LL128 factor when ppn < 2 (0.92 otherwise).
    pub ring_ll128_low_ppn_factor: Option<f64>,
    /// [2.23+] Tree refinements, latency and size correction apply to AllReduce only.
    pub tree_correction_allreduce_only: bool,
    pub tree_pattern_source: TreePatternSource,
    /// Algorithms evaluated for AllGather/ReduceScatter.
    pub ag_rs_algos: Vec<Algorithm>,
    pub pat_available: bool,
    pub pat_bw_factor: Option<f64>,
    pub nvls_bw_rule: NvlsBwRule,
    pub algbw_skip: AlgbwSkip,
    pub nvls_algbw_ratio: NvlsAlgbwRatio,
    pub nvls_latency_rule: NvlsLatencyRule,
    pub collnet_ag_rs_rule: CollnetAgRsRule,
    /// CollNetDirect arity serialisation latency per extra local rank (us).
    pub collnet_direct_arity_latency: f64,
    /// [2.23+] with one rank per node the inter-node latency is Tree's.
    pub inter_latency_ppn1_tree: bool,
    pub ring_latency_ninter_rule: RingInterStepsRule,
    /// [2.24+] a mixed CPU vendor counts as AMD for llMaxBw.
    pub ll_max_bw_mixed_vendor: bool,
    pub ll128_inter_rule: Ll128InterRule,
    /// Compute capabilities LL128 is enabled on by default (exact match); `None`: any ≥ `ll128_min_cc`.
    pub ll128_cc_rule: Option<Vec<u32>>,
    pub ll128_min_cc: u32,
    pub ll128_mixed_cc_rule: Ll128MixedCcRule,
    /// [2.21–2.23] a function left without any algorithm gets Ring back.
    pub ring_backup: RingBackup,
    /// [≤2.23] CollNet unsupported and the user disabled Ring, Tree, NVLS and NVLSTree: Ring and
    /// Tree come back.
    pub collnet_forced_fallback: bool,
    /// [2.18] NCCL_ALGO never disables Ring for functions other than AllReduce.
    pub ring_never_disabled_non_allreduce: bool,
    pub algo_proto_grammar: AlgoProtoGrammar,
    /// [2.30] CollNetChain disabled when the chain is unsupported.
    pub collnet_chain_support_check: bool,
    /// [2.29+] NVLSTree AllReduce on cc ≥ 100 and x86 uses the tree size correction.
    pub nvls_tree_correction_sm100_x86: bool,
    /// [2.28+] multi-node NVLS runs on min(nvlsChannels, nChannels).
    pub nvls_multinode_channels_min: bool,
    /// [2.30+] NVLS channels chosen after the rank exchange from nNodes (not host hashes),
    /// and on SM100 across nodes from the local rank count and the GPU-to-NIC bandwidth.
    pub nvls_sm100_tuning: bool,
    pub channel_thread_loop: ChannelThreadLoop,
    /// [2.22+] Tree always runs 640 threads (PAT too, where it exists).
    pub tree_full_threads: bool,
    pub p2p_default_level_rule: P2pDefaultLevelRule,
    pub path_renumbering: PathRenumbering,
    /// [2.20+] multi-node NVLink: ranks of one fabric clique on several hosts fuse into one
    /// NCCL node (`ncclMnnvlCheck`, src/mnnvl.cc).
    pub mnnvl: bool,
    /// [2.27+] on a system fused from several hosts the search orders NETs GPU first
    /// (`ncclTopoPrefNetsGpuFirst`, src/graph/search.cc, NCCL_MNNVL_SCATTER_NETS_ENABLE).
    pub mnnvl_scatter_nets: bool,
    /// The first release that reads NCCL_MNNVL_RAIL_PER_HOST (`ncclTopoSearchCheckNet`,
    /// src/graph/search.cc: v2.28.7-1; absent from v2.28.3-1 and earlier), `None` before it.
    pub mnnvl_rail_per_host_since: Option<String>,
    /// The first release with `system->inter`, set by `ncclTopoTrimSystem` from the rank count
    /// (v2.28.7-1 src/graph/paths.cc). Before it a single-node communicator lost every NET there
    /// (init computed the paths again without them, so no GPU pair is held to the network by
    /// `ncclTopoCheckNet`), and the search took "inter-node" to mean "has NETs"
    /// (src/graph/search.cc `system->nodes[NET].count`), so several nodes without any NET
    /// were searched as one. `None`: not at any release.
    pub system_inter_since: Option<String>,
}

impl Rules {
    /// Whether release `v` reads NCCL_MNNVL_RAIL_PER_HOST. A version given without a patch
    /// stands for the release the data describes, which reads it when its minor does.
    pub fn reads_rail_per_host(&self, v: &NcclVersion) -> bool {
        released_by(self.mnnvl_rail_per_host_since.as_deref(), v)
    }

    /// Whether release `v` has `system->inter` (see [`Rules::system_inter_since`]).
    pub fn has_system_inter(&self, v: &NcclVersion) -> bool {
        released_by(self.system_inter_since.as_deref(), v)
    }
}

fn released_by(since: Option<&str>, v: &NcclVersion) -> bool {
    since.is_some_and(|s| v.includes(s))
}

/// Everything version-specific the model reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionData {
    /// `2.30`.
    pub version: String,
    /// Read in detail for the reference (exact); otherwise derived, see `note`.
    pub documented: bool,
    /// Where the values come from.
    pub source: String,
    /// What is known to be approximate for this version.
    pub note: Option<String>,
    pub bw: BwConstants,
    pub max_channels: u32,
    pub max_nvls_arity: u32,
    pub max_direct_arity: u32,
    pub speeds: SpeedArrays,
    pub tuning: TuningTables,
    pub nvls_channels: NvlsChannels,
    /// Bytes each operation counts at least per channel (CBD, 2.22+).
    pub min_traffic_per_channel: Option<u64>,
    /// Collectives per work batch (`latCount` divisor for non-Ring algorithms).
    pub max_colls_per_batch: u32,
    pub buffers: Buffers,
    pub defaults: EnvDefaults,
    pub rules: Rules,
}

const FILES: [(&str, &str); 13] = [
    ("2.18", include_str!("../data/2.18.yaml")),
    ("2.19", include_str!("../data/2.19.yaml")),
    ("2.20", include_str!("../data/2.20.yaml")),
    ("2.21", include_str!("../data/2.21.yaml")),
    ("2.22", include_str!("../data/2.22.yaml")),
    ("2.23", include_str!("../data/2.23.yaml")),
    ("2.24", include_str!("../data/2.24.yaml")),
    ("2.25", include_str!("../data/2.25.yaml")),
    ("2.26", include_str!("../data/2.26.yaml")),
    ("2.27", include_str!("../data/2.27.yaml")),
    ("2.28", include_str!("../data/2.28.yaml")),
    ("2.29", include_str!("../data/2.29.yaml")),
    ("2.30", include_str!("../data/2.30.yaml")),
];

/// Keys every file states itself rather than inheriting.
const OWN_KEYS: [&str; 4] = ["version", "documented", "source", "note"];

fn raw_value(key: &str, depth: usize) -> Result<yaml_serde::Value> {
    use yaml_serde::Value;
    let text = FILES
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, t)| *t)
        .ok_or_else(|| Error::data(format!("no nccl data file for {key}")))?;
    let mut v: Value = yaml_serde::from_str(text)
        .map_err(|e| Error::data(format!("cannot parse data/{key}.yaml: {e}")))?;
    let map = v
        .as_mapping_mut()
        .ok_or_else(|| Error::data(format!("data/{key}.yaml: not a mapping")))?;
    let parent = map.remove("inherits");
    let Some(parent) = parent else { return Ok(v) };
    let parent = parent
        .as_str()
        .ok_or_else(|| {
            Error::data(format!(
                "data/{key}.yaml: inherits must be a version string"
            ))
        })?
        .to_string();
    if depth > FILES.len() {
        return Err(Error::data(format!("data/{key}.yaml: inheritance cycle")));
    }
    let mut base = raw_value(&parent, depth + 1)?;
    if let Some(b) = base.as_mapping_mut() {
        for k in OWN_KEYS {
            b.remove(k);
        }
    }
    merge(&mut base, v);
    Ok(base)
}

/// Deep merge of mappings; anything else (numbers, lists) is replaced.
fn merge(base: &mut yaml_serde::Value, over: yaml_serde::Value) {
    use yaml_serde::Value;
    match (base, over) {
        (Value::Mapping(b), Value::Mapping(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

impl VersionData {
    /// The data for a supported version (`NcclVersion::parse` checked it).
    pub fn load(v: &NcclVersion) -> Result<VersionData> {
        let key = v.short();
        let value = raw_value(&key, 0)?;
        let d: VersionData = yaml_serde::from_value(value)
            .map_err(|e| Error::data(format!("data/{key}.yaml: bad nccl data: {e}")))?;
        if d.version != key {
            return Err(Error::data(format!(
                "data/{key}.yaml says version {}",
                d.version
            )));
        }
        Ok(d)
    }

    /// Parse and load in one go.
    pub fn for_version(s: &str) -> Result<(NcclVersion, VersionData)> {
        let v = NcclVersion::parse(s)?;
        let d = VersionData::load(&v)?;
        Ok((v, d))
    }

    pub fn minor(&self) -> u32 {
        self.version
            .split('.')
            .nth(1)
            .and_then(|m| m.parse().ok())
            .unwrap_or(0)
    }

    /// Algorithms of this version in NCCL's index order.
    pub fn algorithms(&self) -> &'static [Algorithm] {
        &Algorithm::ALL[..self.rules.num_algorithms.min(Algorithm::ALL.len())]
    }

    /// Path-type names NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL accept (LOC up to SYS).
    pub fn level_names(&self) -> Vec<PathType> {
        PathType::ALL
            .iter()
            .copied()
            .filter(|p| *p <= PathType::Sys)
            .filter(|p| {
                !matches!(
                    (p, self.rules.path_renumbering),
                    (PathType::C2c, PathRenumbering::V2_18)
                        | (
                            PathType::P2c,
                            PathRenumbering::V2_18 | PathRenumbering::V2_26
                        )
                )
            })
            .collect()
    }

    /// Default NVLS channel count for this machine (`NCCL_NVLS_NCHANNELS` unset).
    pub fn nvls_channels_default(&self, min_cc: u32, nnodes: usize) -> u32 {
        let c = &self.nvls_channels;
        match (min_cc >= 100, nnodes > 1) {
            (true, false) => c.sm100_single_node,
            (true, true) => c.sm100_multi_node,
            _ => c.sm90,
        }
    }

    /// A line saying how exact this version's data is.
    pub fn provenance(&self) -> String {
        match (&self.note, self.documented) {
            (_, true) => format!("NCCL {}: {}", self.version, self.source),
            (Some(n), false) => format!("NCCL {}: {} ({n})", self.version, self.source),
            (None, false) => format!("NCCL {}: {}", self.version, self.source),
        }
    }
}

/// The constants and rules that differ between two versions' data, one line per leaf
/// (`rules.nvls_bw_rule: "v2_27" -> "v2_28"`), sources and notes left out.
pub fn data_changes(a: &VersionData, b: &VersionData) -> Vec<String> {
    let (Ok(x), Ok(y)) = (serde_json::to_value(a), serde_json::to_value(b)) else {
        return vec![];
    };
    let mut out = vec![];
    diff_values("", &x, &y, &mut out);
    out.retain(|l| {
        !["version:", "source:", "note:", "documented:"]
            .iter()
            .any(|k| l.starts_with(k))
    });
    out
}

fn diff_values(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                let null = Value::Null;
                diff_values(
                    &p,
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        _ if a != b => out.push(format!("{path}: {a} -> {b}")),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
