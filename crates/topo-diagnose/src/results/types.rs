//! What an nccl-tests judgement reads and writes: the measured rows, the run they came from,
//! and each size's verdict. Apart from the judge so the diagnosis' report can hold them
//! without the judge and the report using each other.

use serde::Serialize;
use topo_model::message::Finding;

/// One measured size.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub bytes: u64,
    /// Out-of-place time and busbw (what nccl-tests users quote), in-place when only that
    /// was printed. The verdict goes by the time: busbw is printed to 0.01 GB/s, which is
    /// 0.00 at small sizes.
    pub time_us: f64,
    pub busbw_gbps: f64,
    pub in_place_busbw_gbps: Option<f64>,
    /// `#wrong` of either column, when checked.
    pub wrong: Option<u64>,
    /// The input line, for quoting.
    pub line: usize,
    pub text: String,
    /// Each printed `time` (us), `algbw` and `busbw` (GB/s) group of the row, out-of-place
    /// first: what the sense checks recompute.
    pub groups: Vec<[f64; 3]>,
}

/// A row the reader refused for its figures (nan, a negative time), with why.
#[derive(Clone, Debug, PartialEq)]
pub struct RefusedRow {
    pub line: usize,
    pub text: String,
    pub why: String,
}

/// One nccl-tests run and what it ran on.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultsInput {
    /// The file as quoted (`all_reduce.txt`, `stdin`).
    pub name: String,
    pub program: Option<String>,
    pub collective: String,
    /// How the collective was known (`program all_reduce_perf`, `columns: ...`).
    pub collective_basis: String,
    pub nranks: usize,
    pub nnodes: usize,
    /// The machine judged against, and how it was chosen.
    pub machine: String,
    pub rows: Vec<Measured>,
    pub out_of_bounds: Option<u64>,
    /// Rows the reader refused; the judge names them and fails.
    pub refused: Vec<RefusedRow>,
    /// Settings the run had (`NCCL_ALGO=Ring`), from the file or `--env`.
    pub env: Vec<(String, String)>,
    /// What reading the run found unclear (rank counts that disagree, a setting left out),
    /// reported before the verdict.
    pub notes: Vec<Finding>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
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

#[derive(Clone, Debug, PartialEq, Serialize)]
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

#[derive(Clone, Debug, PartialEq, Serialize)]
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
