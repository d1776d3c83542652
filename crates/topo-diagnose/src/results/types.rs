//! What an nccl-tests judgement reads and writes: the measured rows, the run they came from,
//! and each size's verdict. Apart from the judge so the diagnosis' report can hold them
//! without the judge and the report using each other.

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

/// Each size's verdict, as the diagnosis' document carries it (`topo_documents::diagnose`).
pub use topo_documents::diagnose::{JudgedRow, ResultsReport, Verdict};
