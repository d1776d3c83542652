//! `topo verify --format json`'s document (`topo.verify/v1`): the sweep's measured rows with
//! their predictions, and `--compare nccl`'s NCCL figures. Built by
//! `topo_runtime::verify::VerifyReport::to_json`.

use serde::{Deserialize, Serialize};
use topo_vocab::{Algorithm, Collective, DataType, Protocol, Reduction};

/// Where the hypervisor (or the scheduler) put the two ranks' CPUs, as the ranks' own
/// cache-to-cache latency tells it: on cores that share a last-level cache (`near`), on cores
/// that do not (`far`), one then the other (`mixed`: the placement changed during the
/// measurement), or not running at once (`loaded`: another process held a CPU, so the probe
/// measured the scheduler's time slices, not the hardware). On this kind of 2-vCPU VM the
/// hypervisor moves the vCPUs while a run goes on (bench/verify/README.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    Near,
    Far,
    Mixed,
    Loaded,
}

impl Placement {
    pub const FITTED: [Placement; 2] = [Placement::Near, Placement::Far];

    pub fn name(self) -> &'static str {
        match self {
            Placement::Near => "near",
            Placement::Far => "far",
            Placement::Mixed => "mixed",
            Placement::Loaded => "loaded",
        }
    }
}

/// `topo.verify/v1` form of one measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JsonForm {
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    pub wrong: Option<u64>,
}

/// One row of `topo.verify/v1` `results[]` (out-of-place figures at the top level, as the
/// contract lists them; the in-place figures nested).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JsonRow {
    pub collective: Collective,
    pub bytes: usize,
    pub count: usize,
    #[serde(rename = "type", with = "topo_vocab::nccl_tests_name")]
    pub dtype: DataType,
    pub redop: Option<Reduction>,
    pub root: i64,
    #[serde(with = "topo_vocab::macro_name")]
    pub algo: Algorithm,
    #[serde(with = "topo_vocab::macro_name")]
    pub proto: Protocol,
    pub nchannels: usize,
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    pub wrong: Option<u64>,
    pub in_place: Option<JsonForm>,
    pub predicted_time_us: Option<f64>,
    pub predicted_busbw_gbps: Option<f64>,
    /// measured time / predicted time.
    pub ratio: Option<f64>,
    /// `near`, `far` or `mixed`: where the two ranks' CPUs were during the out-of-place
    /// measurement (absent where it is not probed: other than 2 ranks sharing memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// The probes' one-way cache-to-cache latency before and after it, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c2c_ns: Option<[f64; 2]>,
    /// The placement of the calibration fit that priced the prediction; `pooled` where
    /// calibration has no fit of that placement (it never saw it, or the row is mixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_for: Option<String>,
    /// The CUDA backend, every rank on one GPU, `--copy-ceiling`: the copy ceiling in busbw
    /// (`cuda::model::ceiling_busbw`) and measured busbw over it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_busbw_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_ratio: Option<f64>,
}

/// `topo verify --format json` (`topo.verify/v1`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerifyJson {
    pub schema: String,
    /// The topo that measured it (the crate version).
    #[serde(default)]
    pub topo_version: String,
    pub backend: String,
    pub launch: String,
    pub transport: String,
    pub ranks: usize,
    /// The collective, or `all` when several ran.
    pub collective: String,
    pub results: Vec<JsonRow>,
    pub avg_busbw_gbps: f64,
    pub wrong_total: u64,
    pub note: Option<String>,
    /// `--compare nccl` (absent otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nccl: Vec<NcclRow>,
}

/// NCCL's measurement of one row, for `--compare nccl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NcclRow {
    pub collective: Collective,
    pub bytes: usize,
    pub time_us: f64,
    pub busbw_gbps: f64,
    /// topo's busbw / NCCL's (out-of-place).
    pub ratio: f64,
}
