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

/// Verdicts gathered host by host (plan and diagnose judge every host): the same verdict (code
/// and summary) on several hosts is said once, with its evidence from each and ` (on N
/// hosts)`.
#[derive(Default)]
pub struct OnHosts(Vec<(Verdict, usize)>);

impl OnHosts {
    /// `v`, found on `hosts` hosts (a replicated machine's copies count as many).
    pub fn add(&mut self, v: Verdict, hosts: usize) {
        let same = self
            .0
            .iter_mut()
            .find(|(m, _)| m.code == v.code && m.summary == v.summary);
        match same {
            Some((m, count)) => {
                *count += hosts;
                m.evidence.extend(v.evidence);
            }
            None => self.0.push((v, hosts)),
        }
    }

    pub fn into_verdicts(self) -> Vec<Verdict> {
        self.0
            .into_iter()
            .map(|(mut v, count)| {
                if count > 1 {
                    v.summary.push_str(&format!(" (on {count} hosts)"));
                }
                v
            })
            .collect()
    }
}

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

impl Verdict {
    pub fn new(code: Code, severity: Severity, summary: String, evidence: Vec<String>) -> Verdict {
        Verdict {
            code,
            severity,
            summary,
            evidence,
        }
    }
}
