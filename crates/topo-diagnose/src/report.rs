//! The diagnosis' vocabulary: a finding with its evidence and fix, the report that gathers
//! them, and the input every check reads. The checks use it; it uses none of them.

use crate::results::ResultsInput;
use std::collections::{BTreeMap, HashMap};
use topo_evidence::hostfacts::HostFacts;
use topo_evidence::nccllog::NcclLog;
use topo_model::Topology;

pub const SCHEMA: &str = topo_documents::schema::DIAGNOSE;

/// The one judge shape every command shares (`topo_model::message`).
pub use topo_model::message::{Finding, Severity};

/// The document's types (`topo.diagnose/v1`) are `topo_documents::diagnose`'s.
pub use topo_documents::diagnose::{Comparison, Report, Skipped, TransportRow};

/// One NCCL log and the name to quote it by.
pub struct LogInput<'a> {
    pub name: String,
    pub log: &'a NcclLog,
}

/// Everything a diagnosis looks at; all optional.
#[derive(Default)]
pub struct Input<'a> {
    pub logs: Vec<LogInput<'a>>,
    /// The machine: `--from`, `--profile`, the live machine, or a log's `=== System` block.
    pub topo: Option<&'a Topology>,
    /// Why there is no topology (or where it came from), for the report.
    pub topo_note: Option<String>,
    pub facts: Option<&'a HostFacts>,
    pub expect: Option<(&'a str, &'a Topology)>,
    /// Environment to model: the process's or snapshot's NCCL_* plus `--env`.
    pub env: BTreeMap<String, String>,
    /// NCCL version to model when no log names one.
    pub version: Option<String>,
    /// nccl-tests results with the plan rows of their sizes.
    pub results: Vec<(ResultsInput, Vec<topo_nccl::plan::Row>)>,
    /// nccl-tests runs that could not be judged, and why.
    pub results_skipped: Vec<Skipped>,
    /// Filled on first use: for each variable a launch command exports, the logs that export
    /// it, in order. Each log's checks look there instead of scanning every other log (a log
    /// of 1600 jobs took 15 times as long as one of 400; issue 45). Leave it default.
    pub launch_index: std::sync::OnceLock<HashMap<String, Vec<usize>>>,
}

impl Input<'_> {
    /// The logs other than `l` (by name) whose launch command exports `var`, in input order.
    pub(crate) fn exporters<'s>(
        &'s self,
        var: &str,
        l: &'s LogInput<'_>,
    ) -> impl Iterator<Item = &'s LogInput<'s>> + 's {
        let index = self.launch_index.get_or_init(|| {
            let mut m: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, o) in self.logs.iter().enumerate() {
                for k in o.log.launch_env.keys() {
                    m.entry(k.clone()).or_default().push(i);
                }
            }
            m
        });
        index
            .get(var)
            .into_iter()
            .flatten()
            .map(|&i| &self.logs[i])
            .filter(move |o| o.name != l.name)
    }
}

/// The most bytes of one input line an evidence quote holds: a 250 MB single-line log
/// must not print 250 MB of evidence (docs/input-limits.md).
pub const QUOTE_BYTES: usize = 512;

/// `name:line: text`, the evidence form of a log line, cut at [`QUOTE_BYTES`].
pub(crate) fn quote(name: &str, line: usize, text: &str) -> String {
    // Trimmed at both ends: a paste's prefixes come off with the spaces before NCCL's text.
    let text = text.trim();
    if text.len() <= QUOTE_BYTES {
        return format!("{name}:{line}: {text}");
    }
    let mut end = QUOTE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{name}:{line}: {}... ({} more bytes)",
        &text[..end],
        text.len() - end
    )
}

/// At most `n` quoted lines, then how many more there were.
pub(crate) fn quote_some<'a>(
    name: &str,
    lines: impl IntoIterator<Item = (usize, &'a str)>,
    n: usize,
) -> Vec<String> {
    let all: Vec<(usize, &str)> = lines.into_iter().collect();
    let mut out: Vec<String> = all
        .iter()
        .take(n)
        .map(|(l, t)| quote(name, *l, t))
        .collect();
    if all.len() > n {
        out.push(format!(
            "... and {} more such lines in {name}",
            all.len() - n
        ));
    }
    out
}

/// How the checks fill a report: the document is plain data, its builders are here.
pub(crate) trait ReportExt {
    fn add(&mut self, f: Finding);
    fn checked(&mut self, what: impl Into<String>);
    fn skip(&mut self, check: impl Into<String>, why: impl Into<String>);
}

impl ReportExt for Report {
    fn add(&mut self, f: Finding) {
        self.findings.push(f);
    }
    /// Duplicates are dropped once, by a hash set, when the report is finished.
    fn checked(&mut self, what: impl Into<String>) {
        self.checked.push(what.into());
    }
    fn skip(&mut self, check: impl Into<String>, why: impl Into<String>) {
        self.skipped.push(Skipped {
            check: check.into(),
            why: why.into(),
        });
    }
}
