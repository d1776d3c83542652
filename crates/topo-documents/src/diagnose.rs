//! `topo diagnose`'s document (`topo.diagnose/v1`): the findings with their evidence and fix,
//! the log laid against the model (transports, counts), what was checked and skipped, and
//! nccl-tests results measured against the plan. Built by `topo_diagnose::diagnose`.

use crate::Finding;
use serde::{Deserialize, Serialize};
use topo_vocab::{Code, Severity, Transport};

/// A check that could not run, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub check: String,
    pub why: String,
}

/// One ordered rank pair: what the log shows against what the model expects.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransportRow {
    pub log: String,
    pub from: u32,
    pub to: u32,
    pub observed: Vec<Transport>,
    /// The model's transport, `None` when the pair is outside the modelled machine.
    pub expected: Option<Transport>,
    /// Observed and expected differ in kind (P2P, SHM, NET).
    pub differs: bool,
    /// The model's reason for its choice.
    pub reason: Option<String>,
}

impl TransportRow {
    /// `log P2P/CUMEM+SHM, model NET/IB`: what the log shows against the model, as the
    /// finding's evidence and the text report both print it.
    pub fn log_against_model(&self) -> String {
        let observed: Vec<String> = self.observed.iter().map(|x| x.to_string()).collect();
        let expected = self.expected.as_ref().map_or("-".into(), |x| x.to_string());
        format!("log {}, model {expected}", observed.join("+"))
    }
}

/// A logged count or structure against the model's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub log: String,
    pub what: String,
    pub observed: String,
    pub expected: String,
    pub differs: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    /// The topo that wrote the document (the crate version).
    pub topo_version: String,
    /// One sentence: the answer.
    pub verdict: String,
    /// The most severe finding's severity, `null` when there is none.
    pub worst: Option<Severity>,
    #[serde(
        serialize_with = "crate::finding::serialize_diagnosed",
        deserialize_with = "crate::finding::deserialize_diagnosed"
    )]
    pub findings: Vec<Finding>,
    pub transports: Vec<TransportRow>,
    pub comparisons: Vec<Comparison>,
    /// Checks that ran.
    pub checked: Vec<String>,
    pub skipped: Vec<Skipped>,
    /// What each log lacks (`log: no NCCL version line`).
    pub log_notes: Vec<String>,
    /// Per log, the NCCL version it names (or the range its wording implies), and where.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nccl_versions: Vec<String>,
    /// The NCCL version the plan was modelled for, and why.
    pub model: Option<String>,
    /// nccl-tests results measured against expected (`--nccl-tests`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<ResultsReport>,
}

impl Report {
    /// Whether a finding with this code was raised.
    pub fn has(&self, id: Code) -> bool {
        self.findings.iter().any(|f| f.code == id)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    InBand,
    Below,
    /// Below the band at one size whose neighbours are not (at the table's ends, only under
    /// 16 MB): a crossover the model places one size off, or the timing noise of one
    /// nccl-tests row (the first size, a scheduler hiccup), not a property of the machine.
    Isolated,
    Above,
    /// No band: no published result was measured under the run's conditions (the socket
    /// transport, changed channel counts), so the size is compared, not judged.
    NotJudged,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::InBand => "in band",
            Verdict::Below => "below band",
            Verdict::Isolated => "below band, isolated",
            Verdict::Above => "above band",
            Verdict::NotJudged => "not judged",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JudgedRow {
    pub bytes: u64,
    pub measured_busbw_gbps: f64,
    pub in_place_busbw_gbps: Option<f64>,
    pub expected_busbw_gbps: f64,
    /// The band; None where the plan has none (`Verdict::NotJudged`).
    pub low_gbps: Option<f64>,
    pub high_gbps: Option<f64>,
    /// NCCL's choice for the size (`NVLS/Simple`), as the model predicts it.
    pub choice: String,
    pub verdict: Verdict,
    /// measured / expected.
    pub ratio: f64,
    pub expected_basis: String,
    pub band_basis: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultsReport {
    pub name: String,
    pub program: Option<String>,
    pub collective: String,
    pub collective_basis: String,
    pub nranks: usize,
    pub nnodes: usize,
    pub machine: String,
    pub rows: Vec<JudgedRow>,
    /// Likely causes of a shortfall, most likely first (empty when every size is in band).
    pub causes: Vec<String>,
}
