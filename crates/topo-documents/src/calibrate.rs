//! `topo calibrate --format json`'s document (`topo.calibrate/v3`), also the calibration cache
//! verify prices its predictions from: per host link, the fitted latency, bandwidths and
//! knee with the measured points. Measured and priced by `topo_runtime::hostmodel`.

use crate::verify::Placement;
use serde::{Deserialize, Serialize};

/// A host link the runtime uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Link {
    /// memcpy inside one process (one thread).
    Copy,
    /// Single-copy access to other ranks' mapped buffers, copy kernel (DIRECT AllGather,
    /// Broadcast, AlltoAll, SendRecv).
    ShmDirect,
    /// Single-copy access, reduce kernel: each element read from every input, reduced, and
    /// written to every output (DIRECT AllReduce, Reduce, ReduceScatter).
    ShmDirectReduce,
    /// Shared-memory FIFOs (ring and tree steps: copy in, copy out).
    ShmFifo,
    /// TCP over loopback.
    TcpLoopback,
}

/// How the ranks that used a link were started. Threads of one process and separate
/// processes run the same kernels over the same byte counts at different speeds on the same
/// host (process-shared mappings, and peers that sleep in another address space and wake
/// later), so the shared-memory links are fitted once per mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkMode {
    /// Measured one way and used for every launch (copy, TCP loopback).
    #[default]
    Any,
    Threads,
    Processes,
}

/// One fitted link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkFit {
    pub link: Link,
    /// The launch mode it was measured in.
    #[serde(default)]
    pub mode: LinkMode,
    /// The placement its points were all measured in; absent for the fit of every point,
    /// whatever the placement (the fastest per size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// Latency of the calibration operation, microseconds.
    pub alpha_us: f64,
    /// Bandwidth while the footprint fits in the cache, GB/s (1e9 bytes/s) of bytes one
    /// worker reads plus writes.
    pub beta_gbps: f64,
    /// Bandwidth once the footprint is twice the knee or more (memory-bound), same unit.
    pub beta_mem_gbps: f64,
    /// Footprint (bytes of all ranks' buffers) up to which the cache holds it.
    pub knee_bytes: f64,
    /// The calibration operation's traffic per byte (`topo_runtime::hostmodel::traffic`).
    pub moved_per_byte: f64,
    pub footprint_per_byte: f64,
    /// Measured (bytes, microseconds): per size the fastest of the repeats.
    pub points: Vec<(usize, f64)>,
    /// Largest relative error of the fit over the points of 1 MiB and above.
    pub max_rel_err_1mb: f64,
    /// Sizes from here on are the regime the bandwidths above were fitted on; 0 when one
    /// regime covers every size.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub regime_min_bytes: usize,
    /// The one bandwidth of the sizes from 256 KiB up to `regime_min_bytes` (a DIRECT
    /// link's static split), same unit as `beta_gbps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below_regime_gbps: Option<f64>,
    /// Measured (bytes, µs) with the DIRECT schedule that the size does not run in the
    /// calibration operation: the dynamic shares below `regime_min_bytes`, the static split
    /// from it. A collective whose block is a fraction of its size (AllGather,
    /// ReduceScatter, AlltoAll) runs the static split at footprints the calibration
    /// operation reaches only with the dynamic one, and the reverse; these points give
    /// the runtime's `residual` the other schedule's error at those footprints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross_points: Vec<(usize, f64)>,
}

fn is_zero(x: &usize) -> bool {
    *x == 0
}

/// The calibrated host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostModel {
    pub schema: String,
    /// The topo (crate version) that measured it.
    #[serde(default)]
    pub topo_version: String,
    /// CPUs the ranks ran on when measured.
    pub cpus: usize,
    /// Last-level cache from sysfs, bytes (the knee tried first).
    pub cache_bytes: Option<f64>,
    pub links: Vec<LinkFit>,
    /// Seconds since the epoch when measured.
    pub measured_at: u64,
}
