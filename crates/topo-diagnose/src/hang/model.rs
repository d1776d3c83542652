//! The hang verdict's vocabulary: the `topo.hang/v1` document, the suspects and places it
//! names, the claims each evidence kind makes, and each code's severity. A leaf: the judges
//! write into [`Acc`], the verdict reads it.

use crate::report::{Finding, Severity};
use serde::Serialize;
use topo_evidence::hang::{InputSummary, Quote};
use topo_vocab::Code;

pub const SCHEMA: &str = topo_vocab::schema::HANG;

/// The class of cause, strongest evidence first (docs/diagnose.md, "Hang triage").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
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

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Place {
    #[serde(rename = "kind")]
    pub kind: &'static str,
    pub name: String,
    pub why: String,
}

/// What one communicator or process group was stuck in.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stuck {
    pub source: &'static str,
    pub group: String,
    pub seq: Option<u64>,
    pub op: Option<String>,
    /// The ranks that reported it (in `rank_kind` numbering).
    pub ranks: Vec<u32>,
    pub rank_kind: RankKind,
    pub summary: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HangReport {
    pub schema: &'static str,
    pub topo_version: &'static str,
    /// One sentence: the answer.
    pub verdict: String,
    pub cause: Cause,
    pub worst: Option<Severity>,
    pub suspects: Vec<Suspect>,
    pub places: Vec<Place>,
    pub stuck: Vec<Stuck>,
    #[serde(serialize_with = "topo_model::message::serialize_diagnosed")]
    pub findings: Vec<Finding>,
    pub inputs: Vec<InputSummary>,
    pub notes: Vec<String>,
    /// The suspects placed on the machine `--from`/`--profile` gave (absent without one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on_topology: Vec<OnTopology>,
}

/// A suspect GPU or NIC on the machine: the NICs behind its PCIe switch and the GPUs whose
/// ranks share them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OnTopology {
    pub subject: String,
    /// Its NVML index, where the evidence names a GPU.
    pub gpu: Option<i32>,
    pub nics: Vec<String>,
    pub gpus_sharing: Vec<i32>,
    pub why: String,
}

/// One judge's reading of the cause, ranked against the others by `strength`.
pub struct Claim {
    pub cause: Cause,
    pub strength: u8,
    pub summary: String,
}

/// What the judges have found so far.
#[derive(Default)]
pub struct Acc {
    pub claims: Vec<Claim>,
    pub findings: Vec<Finding>,
    pub suspects: Vec<Suspect>,
    pub places: Vec<Place>,
    pub stuck: Vec<Stuck>,
    pub notes: Vec<String>,
    /// The places already named (kind, name): each once, found without a scan.
    place_keys: std::collections::HashSet<(&'static str, String)>,
}

impl Acc {
    pub fn claim(&mut self, cause: Cause, strength: u8, summary: impl Into<String>) {
        self.claims.push(Claim {
            cause,
            strength,
            summary: summary.into(),
        });
    }
    pub fn place(&mut self, kind: &'static str, name: impl Into<String>, why: impl Into<String>) {
        let name = name.into();
        if self.place_keys.insert((kind, name.clone())) {
            self.places.push(Place {
                kind,
                name,
                why: why.into(),
            });
        }
    }
}

/// A finding of a hang code, at the severity the code table gives it.
pub fn finding(code: Code, title: impl Into<String>, evidence: &[&Quote], fix: &str) -> Finding {
    Finding::new(code, title)
        .evidence(quotes(evidence.iter().copied()))
        .fix(fix)
}

/// At most six quoted lines, then how many more (each line once; only the six are written
/// out, so a finding over thousands of ranks costs a hash per line).
pub fn quotes<'a>(q: impl IntoIterator<Item = &'a Quote>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = vec![];
    let mut more = 0;
    for x in q {
        if !seen.insert((x.file.as_str(), x.line, x.text.as_str())) {
            continue;
        }
        if out.len() < 6 {
            out.push(x.to_string());
        } else {
            more += 1;
        }
    }
    if more > 0 {
        out.push(format!("... and {more} more such lines"));
    }
    out
}

/// `0-2,4,6-9`: ranks as ranges (sorted, each once), at most 12 runs then a count.
pub fn ranges(ranks: &[u32]) -> String {
    let mut v = ranks.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut runs: Vec<(u32, u32)> = vec![];
    for r in v {
        match runs.last_mut() {
            Some((_, hi)) if hi.checked_add(1) == Some(r) => *hi = r,
            _ => runs.push((r, r)),
        }
    }
    let shown: Vec<String> = runs
        .iter()
        .take(12)
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    let rest: u64 = runs
        .iter()
        .skip(12)
        .map(|(a, b)| u64::from(b - a) + 1)
        .sum();
    if rest > 0 {
        format!("{} and {rest} more", shown.join(","))
    } else {
        shown.join(",")
    }
}

/// `rank 3` or `ranks 0-2,5`.
pub fn rank_words(ranks: &[u32]) -> String {
    let mut v = ranks.to_vec();
    v.sort_unstable();
    v.dedup();
    if v.len() == 1 {
        format!("rank {}", v[0])
    } else {
        format!("ranks {}", ranges(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compress_and_cap() {
        assert_eq!(ranges(&[6, 0, 1, 2, 4, 5, 4]), "0-2,4-6");
        assert_eq!(rank_words(&[3]), "rank 3");
        let odd: Vec<u32> = (0..40).map(|i| i * 2).collect();
        assert_eq!(ranges(&odd), "0,2,4,6,8,10,12,14,16,18,20,22 and 28 more");
    }
}
