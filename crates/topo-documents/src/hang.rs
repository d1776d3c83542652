//! `topo diagnose --hang`'s document (`topo.hang/v1`): the cause, the suspect ranks and the
//! places the evidence points at, what each communicator was stuck in, the findings and the
//! inputs read. Built by `topo_diagnose::hang::judge`.

use crate::Finding;
use serde::{Deserialize, Serialize};
use topo_vocab::Severity;

/// The class of cause, strongest evidence first (docs/diagnose.md, "Hang triage").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// An HCA or link fault localised to a port or host, or transfer errors between two ends.
    NetworkFault,
    /// A process RAS declared dead, or a peer that closed its connections.
    RankDead,
    /// A rank reported an NCCL error (RAS `Asynchronous error`, `init_state`).
    RankError,
    /// Ranks diverged in program order: another collective, size or count.
    Desync,
    /// The transport's retries ran out before any collective completed: the two NICs never
    /// talked (on RoCE, the GID index or traffic class; a routing or filtering fault).
    NetworkFirstUse,
    /// Ranks that never joined (RAS: no data from them; watchdog: never enqueued it).
    RankMissing,
    /// Several communicators stuck at once with different operations.
    ConcurrentUse,
    /// Ranks did not report the collective the others time out in (weak: an excerpt may
    /// hold only some ranks' lines).
    RankSilent,
    /// Every rank launched the operation (RAS counts equal) and it never finished.
    StuckInTransfer,
    /// A collective timed out; the evidence does not say who is missing.
    Undetermined,
    /// RAS counts one operation apart in one query: normal while the job runs.
    TransientMismatch,
    /// Communicators being finalized: not a hang unless it stays.
    Teardown,
    /// The evidence shows a healthy job.
    Healthy,
    /// Nothing recognised.
    NoEvidence,
}

impl Cause {
    pub fn words(self) -> &'static str {
        match self {
            Cause::NetworkFault => "network fault",
            Cause::RankDead => "a rank died",
            Cause::RankError => "a rank reported an NCCL error",
            Cause::Desync => "desync (ranks diverged in program order)",
            Cause::NetworkFirstUse => "network path or configuration fault at first use",
            Cause::RankMissing => "rank(s) never joined",
            Cause::ConcurrentUse => "possible concurrent use of communicators",
            Cause::RankSilent => "rank(s) did not report",
            Cause::StuckInTransfer => "all ranks launched it, stuck inside the transfer",
            Cause::Undetermined => "a collective timed out, cause not in the evidence",
            Cause::TransientMismatch => "transient RAS mismatch",
            Cause::Teardown => "communicator teardown in progress",
            Cause::Healthy => "no hang",
            Cause::NoEvidence => "no hang evidence",
        }
    }
}

/// Whose numbering a suspect's ranks are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RankKind {
    /// `[rankG]`: the job's global rank.
    Global,
    /// The rank within a PyTorch process group (`[PG .. Rank r]`).
    Group,
    /// The rank within an NCCL communicator (RAS).
    Comm,
    /// The rank as the Flight Recorder analyzer numbers it (global).
    Trace,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Why {
    NeverJoined,
    Mismatched,
    Dead,
    Unresponsive,
    Error,
    Behind,
    Ahead,
    NotReported,
    WatchdogStuck,
    NotFinalized,
    NetworkEndpoint,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Suspect {
    /// Empty when only the process is known (a dead process with no communicator data).
    pub ranks: Vec<u32>,
    pub rank_kind: RankKind,
    /// The communicator or process group they are suspects in.
    pub group: Option<String>,
    pub why: Why,
    pub detail: String,
    pub node: Option<String>,
    pub gpu: Option<String>,
    pub pid: Option<u64>,
    /// What the launcher wrote before the rank's lines (a host or worker name).
    pub launcher: Option<String>,
}

/// A node, GPU, NIC, link or peer address the evidence points at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    #[serde(rename = "kind")]
    pub kind: String,
    pub name: String,
    pub why: String,
}

/// What one communicator or process group was stuck in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stuck {
    pub source: String,
    pub group: String,
    pub seq: Option<u64>,
    pub op: Option<String>,
    /// The ranks that reported it (in `rank_kind` numbering).
    pub ranks: Vec<u32>,
    pub rank_kind: RankKind,
    pub summary: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HangReport {
    pub schema: String,
    pub topo_version: String,
    /// One sentence: the answer.
    pub verdict: String,
    pub cause: Cause,
    pub worst: Option<Severity>,
    pub suspects: Vec<Suspect>,
    pub places: Vec<Place>,
    pub stuck: Vec<Stuck>,
    #[serde(
        serialize_with = "crate::finding::serialize_diagnosed",
        deserialize_with = "crate::finding::deserialize_diagnosed"
    )]
    pub findings: Vec<Finding>,
    pub inputs: Vec<InputSummary>,
    pub notes: Vec<String>,
    /// The suspects placed on the machine `--from`/`--profile` gave (absent without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_topology: Vec<OnTopology>,
}

/// A suspect GPU or NIC on the machine: the NICs behind its PCIe switch and the GPUs whose
/// ranks share them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OnTopology {
    pub subject: String,
    /// Its NVML index, where the evidence names a GPU.
    pub gpu: Option<i32>,
    pub nics: Vec<String>,
    pub gpus_sharing: Vec<i32>,
    pub why: String,
}

/// What one input held, for the report's list of inputs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputSummary {
    pub name: String,
    pub lines: usize,
    /// The kinds of evidence found (`ras`, `watchdog`, `flight-recorder`, `net-error`).
    pub kinds: Vec<String>,
}
