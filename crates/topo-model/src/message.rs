//! A verdict, warning or anomaly as the documents carry it: a stable `code` a monitoring rule
//! can match (every code and its meaning: docs/codes.md), a severity, and the text a person
//! reads. The text may change between versions; the code does not.

use serde::Serialize;
pub use topo_vocab::Code;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Message {
    pub code: Code,
    pub severity: Severity,
    pub text: String,
}

impl Message {
    pub fn new(code: Code, severity: Severity, text: impl Into<String>) -> Message {
        Message {
            code,
            severity,
            text: text.into(),
        }
    }
}

/// Code of a warning the source raised while reading its input (`Topology::warnings`): those
/// are free text about what the input could not say or had to repair, one code for all.
pub const SOURCE_WARNING: Code = Code::SourceWarning;

/// One fact over a set of nodes: its code, severity, a one-line summary and the evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub code: Code,
    pub severity: Severity,
    pub summary: String,
    /// One line per node it rests on (`GPU0 (0000:18:00.0): downtrained: running Gen4 x8,
    /// capable of Gen4 x16`).
    pub evidence: Vec<String>,
}
