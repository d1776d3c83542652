//! What hang evidence says, as data: the records each reader produces and the bounds every
//! reader keeps. A leaf: the readers use it, it uses none of them.

use serde::Serialize;

/// The longest line a reader looks at; the rest of a longer line is ignored (a watchdog line
/// is about 400 bytes, a RAS line under 200; a 1 MB "line" is a binary or a broken paste).
pub const LINE_MAX: usize = 16 << 10;
/// The longest text kept from a line as evidence.
pub const QUOTE_MAX: usize = 240;
/// The most records of one kind kept from all the inputs together; past it they are counted
/// in [`HangEvidence::dropped`] (4,096 ranks print a few lines each; a flood is not needed).
pub const RECORDS_MAX: usize = 200_000;
/// The most ranks one RAS rank group or analyzer set may list.
pub const RANKS_MAX: usize = 1 << 17;

/// A line kept as evidence: the input's name, its 1-based line and its text (capped).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Quote {
    pub file: String,
    pub line: usize,
    pub text: String,
}

impl Quote {
    pub fn new(file: &str, line: usize, text: &str) -> Quote {
        let t = text.trim();
        let mut end = t.len().min(QUOTE_MAX);
        while !t.is_char_boundary(end) {
            end -= 1;
        }
        let cut = if end < t.len() { " ..." } else { "" };
        Quote {
            file: file.to_string(),
            line,
            text: format!("{}{cut}", &t[..end]),
        }
    }
}

impl std::fmt::Display for Quote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.text)
    }
}

/// Where a rank runs, as RAS or a log prefix names it; each part unknown when not given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Place {
    pub node: Option<String>,
    pub gpu: Option<String>,
    pub pid: Option<u64>,
}

// ---------------------------------------------------------------- NCCL RAS

/// One NCCL RAS report (`ncclras`, text or JSON), or the part of it an excerpt holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RasReport {
    pub at: Option<Quote>,
    pub json: bool,
    /// `NCCL version X` of the banner, or `nccl_version` of the JSON.
    pub version: Option<String>,
    pub nodes: Option<u32>,
    pub processes: Option<u32>,
    pub gpus: Option<u32>,
    /// Rows of the `Communicators...` table, one per group of similar communicators.
    pub groups: Vec<RasGroup>,
    /// `No communicator data collected!`
    pub no_comm_data: bool,
    /// Job-level entries: processes missing data (`INCOMPLETE`) or `DEAD`.
    pub processes_listed: Vec<RasProcess>,
    /// `Encountered N communication timeout(s) while gathering`.
    pub gather_timeouts: Option<u32>,
    pub comms: Vec<RasComm>,
    /// Lines of a RAS report the reader recognised, for the "what was read" list.
    pub lines: usize,
    /// The JSON was invalid and repaired (NCCL 2.28.7-2.28.9 omit a comma after `nvml_dev`).
    pub repaired: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RasGroup {
    pub group: u32,
    pub comms: u32,
    pub nodes_per_comm: u32,
    pub ranks_per_node: String,
    pub ranks_per_comm: u32,
    pub ranks_in_group: u32,
    pub status: String,
    pub errors: String,
    pub at: Quote,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProcessState {
    /// RAS gets no data from it (stopped, hung or just gone): `INCOMPLETE`, `unresponsive`.
    Unresponsive,
    /// Unreachable for about a minute: `DEAD`, `considered_dead`, `PEER_DEAD`.
    Dead,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RasProcess {
    pub state: ProcessState,
    pub place: Place,
    pub at: Quote,
}

/// One communicator entry of the Errors or Warnings section (`#0-0 (hash) KIND`), or one
/// communicator of the JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RasComm {
    /// `#0-0`, or the JSON's index.
    pub label: String,
    pub hash: String,
    /// `MISMATCH`, `INCOMPLETE`, `ERROR` (comma-joined when several); `OK` from JSON.
    pub kind: String,
    pub size: Option<u32>,
    /// The operation whose counts differ (`AllReduce`, or `collective` before 2.26).
    pub op: Option<String>,
    pub rank_groups: Vec<RankGroup>,
    pub at: Option<Quote>,
}

/// What a group of ranks of a communicator shares in a RAS report.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum GroupWhat {
    /// `N ranks have launched up to operation K`.
    Launched { count: u64 },
    /// `N ranks have not launched any operations`.
    NotLaunched,
    /// `N ranks have status S`.
    Status { status: String },
    /// `Missing communicator data from N rank(s)`: no data from these ranks.
    Missing {
        unresponsive: Option<bool>,
        dead: Option<bool>,
    },
    /// `Rank R reported <error>`, `Asynchronous error(s) on N rank(s)`.
    Error { error: String },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankGroup {
    pub what: GroupWhat,
    /// How many ranks the report says share it (its listed ranks may be fewer).
    pub n: Option<u32>,
    pub ranks: Vec<RasRank>,
    pub at: Quote,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RasRank {
    pub rank: u32,
    pub place: Place,
    /// Its own launch count where the line gives one.
    pub count: Option<u64>,
}

/// `ncclras -m` (monitor mode, 2.29+): a peer event, text or JSON.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeerEvent {
    pub event: String,
    pub time: Option<String>,
    pub place: Place,
    pub at: Quote,
}

// ---------------------------------------------------------------- PyTorch watchdog

/// A process group as ProcessGroupNCCL names it: `[PG ID 2 PG GUID 9(desc) Rank 7]`,
/// `[PG 1 (desc) Rank 1]`; the rank in it is the rank within the group.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PgRef {
    pub id: Option<String>,
    pub guid: Option<String>,
    pub desc: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum WatchdogWhat {
    /// `Watchdog caught collective operation timeout: WorkNCCL(SeqNum=S, OpType=T, ...)`.
    Timeout {
        seq: Option<u64>,
        op: Option<String>,
        numel_in: Option<u64>,
        numel_out: Option<u64>,
        ran_ms: Option<u64>,
    },
    /// The watchdog's progress line: stuck at work S, last enqueued E, last completed C.
    Progress {
        seq: u64,
        last_enqueued: Option<u64>,
        last_completed: Option<u64>,
    },
    /// `watchdog got stuck for N seconds`: the watchdog thread itself is blocked.
    HeartbeatStuck { secs: Option<u64> },
    /// `Observed flight recorder dump signal from another rank`.
    DumpSignalObserved,
    /// `Received a dump signal due to a collective timeout from rank R`.
    DumpSignalFrom {
        from_rank: Option<u32>,
        last_enqueued: Option<u64>,
        last_completed: Option<u64>,
    },
    /// `TORCH_NCCL_DESYNC_DEBUG`: `[r] finished collective #K, but didn't join collective #K+1`.
    NotJoined { rank: u32, seq: u64 },
    /// An NCCL error surfaced by PyTorch (`ncclRemoteError`, `ncclSystemError`, ...).
    NcclError { error: String },
    /// A frame of `Stack trace of the failed collective:` (`#0 all_reduce from file:line`),
    /// printed by PyTorch 2.5+ when the Flight Recorder is on.
    StackFrame { frame: String },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WatchdogEvent {
    /// `[rankG]:`, the global rank; `None` when the launcher printed no such prefix.
    pub global_rank: Option<u32>,
    /// `[Rank r]` or the PG tag's rank: the rank within the process group.
    pub group_rank: Option<u32>,
    pub pg: Option<PgRef>,
    /// What the launcher wrote before the rank tag (a host, a worker name, `[1,3]<stdout>`).
    pub prefix: Option<String>,
    /// `MMDD HH:MM:SS` of the glog prefix, as seconds within a year (for "at the same time").
    pub time_s: Option<u64>,
    pub what: WatchdogWhat,
    pub at: Quote,
}

// ---------------------------------------------------------------- Flight Recorder

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Culprit {
    pub rank: u32,
    pub error_type: String,
    pub expected: Option<String>,
    pub found: Option<String>,
}

/// One collective the Flight Recorder analyzer (`fr_trace`, its `-j` view or the debug
/// server's tables) found not joined by every rank, or joined with another shape.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FrCollective {
    /// The analyzer's collective number (`collective_seq_id`).
    pub seq: Option<u64>,
    /// `group info: 0:default_pg`, a group id.
    pub pg: Option<String>,
    pub op: Option<String>,
    pub missing: Vec<u32>,
    pub culprits: Vec<Culprit>,
    pub input_sizes: Option<String>,
    pub world: Option<u32>,
    pub state: Option<String>,
    pub stack: Vec<String>,
    pub at: Option<Quote>,
}

/// One process group's progress in one rank's Flight Recorder dump.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FrPgStatus {
    /// The dump's rank, from its file name (`<prefix><global rank>`), when it has one.
    pub rank: Option<u32>,
    pub pg: String,
    pub desc: Option<String>,
    pub last_enqueued: Option<i64>,
    pub last_started: Option<i64>,
    pub last_completed: Option<i64>,
    /// The first entry of this group not completed: its seq, op and input sizes.
    pub pending: Option<(u64, String, String)>,
    pub entries: usize,
    pub version: Option<String>,
    pub at: Quote,
}

// ---------------------------------------------------------------- NCCL network errors

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum NetWhat {
    /// `Got completion (from peer P) with error|status=N ... vendor err V`.
    Completion {
        status: Option<u32>,
        vendor_err: Option<u32>,
        peer: Option<String>,
        direction: Option<String>,
    },
    /// `Got async event : <event>` (`port error`, `local catastrophic error`, ...).
    AsyncEvent { event: String },
    /// `collective mismatch error, local size A remote size B`.
    SizeMismatch {
        peer: Option<String>,
        local: Option<u64>,
        remote: Option<u64>,
    },
    /// A socket transport failure: `Connection closed by remote peer`, `Call to recv failed`.
    Socket { peer: Option<String>, error: String },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetError {
    /// NCCL's `host:pid:tid [dev]` prefix: the host, process and CUDA device.
    pub host: Option<String>,
    pub pid: Option<u64>,
    pub dev: Option<u32>,
    /// The HCA and port (`mlx5_0:1`) where the line names one.
    pub hca: Option<String>,
    /// `ncclRemoteError` and the like around it, when PyTorch surfaced it.
    pub surfaced: bool,
    pub what: NetWhat,
    pub at: Quote,
}

// ---------------------------------------------------------------- all of it

/// Everything read from the hang inputs, in input order.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HangEvidence {
    pub inputs: Vec<InputSummary>,
    pub ras: Vec<RasReport>,
    pub peer_events: Vec<PeerEvent>,
    pub watchdog: Vec<WatchdogEvent>,
    pub fr: Vec<FrCollective>,
    pub fr_dumps: Vec<FrPgStatus>,
    pub net: Vec<NetError>,
    /// Records past [`RECORDS_MAX`], not kept.
    pub dropped: usize,
    /// What a reader could not use (`name: why`).
    pub notes: Vec<String>,
}

/// What one input held: the hang document's (`topo_documents::hang`).
pub use topo_documents::hang::InputSummary;

impl HangEvidence {
    /// Whether one more record of a kind that already holds `len` fits; counts it if not.
    pub fn room(&mut self, len: usize) -> bool {
        if len < RECORDS_MAX {
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}
