//! What one job's log says: ranks, connections, channels, graphs, tuning, and what the excerpt
//! left out.

use super::dump::SystemDump;
use super::evidence::Evidence;
use serde::Serialize;
use std::collections::BTreeMap;
use topo_vocab::{Algorithm, Collective, PathType, Protocol, Transport};

/// The longest log line NCCL prints: its logger formats into a 1024-byte buffer and drops
/// the rest (src/debug.cc, 2.18.5-1 to 2.30.7-1). A line this long may have been cut.
pub const NCCL_LINE_MAX: usize = 1023;

/// One rank as its Init START/COMPLETE and `comm ... nNodes` lines describe it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RankInfo {
    pub rank: u32,
    pub host: Option<String>,
    pub pid: Option<u64>,
    pub cuda_dev: Option<i32>,
    pub nvml_dev: Option<i32>,
    /// NCCL's packed bus id as logged (`busId 1b000`).
    pub busid: Option<u64>,
    pub nranks: Option<u32>,
    pub nnodes: Option<u32>,
    pub local_ranks: Option<u32>,
    pub local_rank: Option<u32>,
    pub mnnvl: Option<u32>,
    pub init_complete: bool,
    /// The `comm ... nNodes ... localRanks` line, when present.
    pub comm_line: Option<Evidence>,
    /// The Init START or COMPLETE line that gave the devices.
    pub init_line: Option<Evidence>,
}

/// Whether a transport line is the sender's or the receiver's (NET prints both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Send,
    Receive,
    /// P2P and SHM lines carry no direction.
    Both,
}

/// One `Channel NN/C : a[x] -> b[y] via ...` line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Connection {
    pub channel: u32,
    /// 0: collectives, 1: send/recv; `None` for SHM lines (they carry none).
    pub conn_index: Option<u32>,
    pub from: u32,
    pub from_dev: i32,
    pub to: u32,
    pub to_dev: i32,
    /// The bus ids NCCL 2.5 to 2.17 print in the brackets instead of a device (`0[1b000]`),
    /// which place a rank's GPU where its Init line is cut off.
    pub from_busid: Option<u64>,
    pub to_busid: Option<u64>,
    pub direction: Direction,
    /// Contract name: `P2P/CUMEM`, `P2P/IPC`, `P2P/direct`, `P2P/indirect`, `P2P/MNNVL`, `SHM`,
    /// `NET/IB`, `NET/Socket`, `NET/<plugin>`, `COLLNET`.
    pub transport: Transport,
    /// NET: the plugin device index, GPUDirect RDMA.
    pub net_dev: Option<i32>,
    pub gdr: bool,
    pub line: usize,
    /// The process that printed it (`host:pid`), for telling one process driving several
    /// GPUs from one process per GPU when Init lines are cut off.
    pub pid: Option<u64>,
    /// The line as written, for quoting; kept for the first [`QUOTED_PER_KIND`] lines of each
    /// transport (with or without GPUDirect RDMA) only, empty after: a 100 MB log has a
    /// million of them and a finding quotes three.
    pub text: String,
}

/// How many connection lines of one kind keep their text.
pub const QUOTED_PER_KIND: usize = 32;

/// The communicator channel counts line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChannelCounts {
    pub coll: u32,
    pub collnet: Option<u32>,
    pub nvls: Option<u32>,
    pub p2p: u32,
    pub p2p_per_peer: u32,
    pub evidence: Evidence,
}

/// NCCL found P2P refused by the driver between two GPUs it sees as connected.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct P2pDisabled {
    /// The WARN form: the pair is NVLink-connected (NCCL then fails init).
    pub nvlink: bool,
    /// The two device indices, -1 when the line was cut.
    pub gpus: (i32, i32),
    pub evidence: Evidence,
}

/// One `Trees [c] d0/d1/d2->me->up` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TreeLink {
    pub channel: u32,
    pub down: [i32; 3],
    pub rank: i32,
    pub up: i32,
}

/// One computed graph (`Pattern 4, crossNic 0, nChannels 12, bw 30/30, type NVL/PIX, ...`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GraphLine {
    pub pattern: u32,
    pub nchannels: u32,
    pub bw_intra: f64,
    pub bw_inter: f64,
    /// The `type INTRA/INTER` path types; `None` where the line names none NCCL prints.
    pub type_intra: Option<PathType>,
    pub type_inter: Option<PathType>,
    pub evidence: Evidence,
}

/// One cell of the TUNING table: latency (us) and algorithm bandwidth (GB/s).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuningCell {
    pub function: Collective,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub lat_us: f64,
    pub bw_gbps: f64,
}

/// A per-collective choice (`AllReduce: 1048576 Bytes -> Algo NVLS proto Simple ...`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuningChoice {
    /// `None` where the line does not name it (2.21 and 2.22 print the size first).
    pub function: Option<Collective>,
    pub bytes: u64,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub line: usize,
}

/// `Init timings` of one rank, in seconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InitTiming {
    pub rank: Option<u32>,
    pub total_s: f64,
    pub parts: BTreeMap<String, f64>,
    pub evidence: Evidence,
}

/// Everything the log said.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NcclLog {
    /// `2.27.5` from `NCCL version 2.27.5+cuda12.9`.
    pub version: Option<String>,
    pub version_line: Option<Evidence>,
    /// The version came from another program's text (a traceback, vLLM's banner), not
    /// NCCL's own version line.
    pub version_from_text: bool,
    /// The CUDA NCCL was built for, from `+cuda12.4` (12040), CUDA's integer form.
    pub cuda_build: Option<u32>,
    pub cuda_driver_version: Option<u32>,
    /// Hosts in order of first appearance (the prefix's host part).
    pub hosts: Vec<String>,
    pub ranks: BTreeMap<u32, RankInfo>,
    /// `Check P2P Type` flags (`isAllDirectP2p`, `intraNodeP2pSupport`, `directMode`, ...).
    pub p2p_type: BTreeMap<String, i64>,
    pub p2p_type_line: Option<Evidence>,
    pub channels: Option<ChannelCounts>,
    /// Rank order per channel from rank 0's `Channel NN/MM : 0 1 2 ...` lines.
    pub rings: BTreeMap<u32, Vec<u32>>,
    /// The `MM` of those lines: the channel count rank 0 announced.
    pub ring_channels: Option<u32>,
    /// `Ring NN : prev -> me -> next` (GRAPH) per (channel, rank).
    pub ring_links: BTreeMap<(u32, u32), (u32, u32)>,
    pub trees: BTreeMap<u32, Vec<TreeLink>>,
    /// Ranks whose `Trees` line NCCL cut at its log line limit ([`NCCL_LINE_MAX`]): their
    /// tree channel count is at least the entries read, not exactly that.
    pub trees_cut: std::collections::BTreeSet<u32>,
    /// `NVLS Head N: h h ...` rows, one per head index (every rank prints them all).
    pub nvls_heads: BTreeMap<u32, Vec<i32>>,
    /// `P2P is disabled between (NVLINK) connected GPUs a and b` lines.
    pub p2p_disabled: Vec<P2pDisabled>,
    /// GPU-to-GPU path types of the GRAPH path table (`NVL`, `NVB`, `PIX`, `PXB`, `PHB`,
    /// `SYS`, ...), each with the first row that shows it.
    pub gpu_paths: BTreeMap<PathType, Evidence>,
    /// `CollNet NN/C : r [send] via COLLNET/...` lines (`Coll NN :` in 2.6-2.8).
    pub collnet: Vec<Evidence>,
    /// `NVLS multicast support is (not) available on dev N` per line.
    pub nvls_support: Vec<(bool, Evidence)>,
    pub graphs: Vec<GraphLine>,
    pub connections: Vec<Connection>,
    pub tuning: Vec<TuningCell>,
    pub tuning_choices: Vec<TuningChoice>,
    pub init_timings: Vec<InitTiming>,
    /// `NCCL_X set by environment to Y`, first per variable.
    pub env: BTreeMap<String, (String, Evidence)>,
    /// NCCL_* variables a launch command or script in the paste exports (`mpirun -x NCCL_X`,
    /// `export NCCL_X=1`, `NCCL_X=1 ./app`); the value is `None` for a bare `-x NAME`.
    pub launch_env: BTreeMap<String, (Option<String>, Evidence)>,
    /// nccl-tests `#  Rank  0 Group  0 Pid 1 on host device  0 [0x00] <GPU name>` lines.
    pub devices: Vec<(u32, String, Evidence)>,
    /// `NCCL WARN` lines.
    pub warnings: Vec<Evidence>,
    /// Lines worth quoting in a diagnosis that have no field of their own (`P2P is disabled
    /// between connected GPUs`, `NET/IB : No device found`, `Using network Socket`, GDR lines).
    pub notable: Vec<Evidence>,
    /// The `=== System` block (first complete one, one rank's lines only).
    pub system: Option<SystemDump>,
    /// Lines with an NCCL INFO/WARN marker, and lines in all.
    pub nccl_lines: usize,
    pub total_lines: usize,
    /// What the excerpt lacks, in words (`no NCCL version line`, `last line cut short`).
    pub missing: Vec<String>,
}

impl NcclLog {
    /// The distinct ranks any line mentions, for logs without Init lines.
    pub fn nranks(&self) -> Option<u32> {
        let from_init = self.ranks.values().filter_map(|r| r.nranks).max();
        from_init.or_else(|| {
            let m = self
                .connections
                .iter()
                .flat_map(|c| [c.from, c.to])
                .chain(self.ranks.keys().copied())
                .max()?;
            Some(m + 1)
        })
    }

    pub fn nnodes(&self) -> Option<u32> {
        self.ranks.values().filter_map(|r| r.nnodes).max()
    }

    /// Observed transports per ordered rank pair, in first-seen order of names.
    pub fn transport_pairs(&self) -> BTreeMap<(u32, u32), Vec<Transport>> {
        let mut out: BTreeMap<(u32, u32), Vec<Transport>> = BTreeMap::new();
        for c in &self.connections {
            let v = out.entry((c.from, c.to)).or_default();
            if !v.contains(&c.transport) {
                v.push(c.transport.clone());
            }
        }
        out
    }

    /// The GPU-to-GPU path types of [`NcclLog::gpu_paths`] in the order of their names, as
    /// the diagnosis lists them.
    pub fn gpu_paths_by_name(&self) -> Vec<(PathType, &Evidence)> {
        let mut v: Vec<(PathType, &Evidence)> =
            self.gpu_paths.iter().map(|(k, e)| (*k, e)).collect();
        v.sort_by_key(|(k, _)| k.name());
        v
    }

    /// Whether the GRAPH path table joins any two GPUs by NVLink (directly or through a GPU).
    pub fn gpu_paths_nvlink(&self) -> bool {
        self.gpu_paths
            .keys()
            .any(|k| matches!(k, PathType::Nvl | PathType::Nvb))
    }

    /// True when the reader found nothing NCCL wrote.
    pub fn is_empty(&self) -> bool {
        self.nccl_lines == 0 && self.system.is_none()
    }
}
