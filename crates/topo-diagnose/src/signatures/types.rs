//! The catalogue's vocabulary: a signature, its causes, and what a cause's test reads. The
//! table and the matcher use it; it uses neither.

use crate::Severity;
use topo_evidence::nccllog::{Evidence, NcclLog};
use topo_model::message::Code;

/// How many nodes the job spans, as far as the log says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nodes {
    One,
    Many,
    Unknown,
}

/// What a cause's test may look at: the log and the lines the signature matched.
pub struct Ctx<'a> {
    pub log: &'a NcclLog,
    pub nodes: Nodes,
    pub lines: &'a [&'a Evidence],
}

impl Ctx<'_> {
    /// Whether any matched line contains `s`.
    pub fn matched(&self, s: &str) -> bool {
        self.lines.iter().any(|e| e.text.contains(s))
    }
    /// Whether any INFO line kept for quoting (or any WARN) contains `s`.
    pub fn logged(&self, s: &str) -> bool {
        self.log
            .notable
            .iter()
            .chain(&self.log.warnings)
            .any(|e| e.text.contains(s))
    }
    /// Whether NCCL logged the variable as set (`NCCL_X set by environment to v`).
    pub fn env_is(&self, var: &str, val: &str) -> bool {
        self.log.env.get(var).is_some_and(|(v, _)| v == val)
    }
    /// The version as (minor, patch) when the log names a 2.x version.
    pub fn minor_patch(&self) -> Option<(u32, u32)> {
        let v = self.log.version.as_deref()?;
        let mut it = v.split('.');
        (it.next()? == "2").then_some(())?;
        let minor = it.next()?.parse().ok()?;
        let patch = it.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        Some((minor, patch))
    }
}

/// One cause of a signature: when it applies, what it means and what to do.
pub struct Cause {
    /// A short name tests and docs use (`fm-restarted`).
    pub id: &'static str,
    /// The evidence that tells this cause from the others, in words (docs).
    pub tells: &'static str,
    pub applies: fn(&Ctx) -> bool,
    pub severity: Severity,
    pub title: &'static str,
    pub fix: &'static str,
    /// Where the fix does not apply (docs; also said in the fix where it matters).
    pub not_for: &'static str,
}

/// The level NCCL prints a signature at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Warn,
    Info,
    /// Either: an INFO line and the WARN it leads to name the same cause.
    Any,
}

/// One message NCCL prints.
pub struct Signature {
    pub code: Code,
    /// The NCCL source file that prints it (paths as of the versions named).
    pub source: &'static str,
    pub level: Level,
    /// The message as NCCL formats it (printf style), for the docs.
    pub message: &'static str,
    /// Words every matching line contains.
    pub all: &'static [&'static str],
    /// Words of which a matching line contains at least one (none: no such condition).
    pub any: &'static [&'static str],
    pub versions: &'static str,
    pub meaning: &'static str,
    /// In order: the first that applies is the finding; the last applies always.
    pub causes: &'static [Cause],
}

impl Signature {
    pub fn matches(&self, text: &str) -> bool {
        let level_ok = match self.level {
            Level::Warn => text.contains("NCCL WARN"),
            Level::Info => !text.contains("NCCL WARN"),
            Level::Any => true,
        };
        level_ok
            && self.all.iter().all(|w| text.contains(w))
            && (self.any.is_empty() || self.any.iter().any(|w| text.contains(w)))
    }
}
