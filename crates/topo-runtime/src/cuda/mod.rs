//! The CUDA backend: topo's schedules run by GPU kernels over peer memory.
//!
//! Nothing here is linked against CUDA: cudarc's `dynamic-loading` resolves the driver API at
//! run time, and NVRTC and NCCL are opened by [`loader`] (and bound by hand) so that a missing
//! library is an error naming it rather than cudarc's panic. [`probe`] is the only door: it
//! opens libcuda.so.1 before any cudarc call, and every cudarc call after it runs inside
//! `catch_unwind` (cudarc panics on a symbol an old driver lacks).
//!
//! * [`loader`]: where the libraries are looked for (`TOPO_NVRTC`, `TOPO_NCCL`, toolkit, wheels).
//! * [`nvrtc`]: compiling `kernels/*.cu` for the device's `sm_XY`.
//! * [`kernels`]: the embedded sources, entry-point names, the CUBIN cache.
//! * [`sass`]: cuobjdump's listings of a CUBIN read, and the rules the hot kernels keep (no GPU).
//! * [`model`]: the kernel's throughput from its handshake and piece size; the piece and
//!   channel choice, the copy ceiling in busbw (pure, its figures in tables).
//! * [`sharing`]: ranks sharing a GPU: the hardware queue count set before the context, MPS
//!   used or started for process jobs, or time slices, and the report's line saying which.
//! * `emulate` (tests only): the kernel's pipelined walker as CPU threads over real schedules.
//! * [`pack`]: steps, connections, launch arguments and memory layout in the kernels' form (pure).
//! * [`device`]: the verify sweep on GPUs: one thread per rank, `--ranks-per-gpu K`, CUDA events.
//! * [`peer`]: how ranks reach each other's memory: P2P in one process, cuMem VMM exported as
//!   a POSIX fd over a Unix socket, legacy IPC handles, pinned host memory (SHM).
//! * [`exchange`]: the socket protocol of process jobs (memory handed over, barrier, gather).
//! * [`procs`]: process jobs (`--launch processes`, `--launch env` on one host), one rank each.
//! * [`nccl`]: NCCL opened at run time for `--compare nccl`.
pub mod device;
#[cfg(test)]
mod emulate;
pub mod exchange;
pub mod kernels;
pub mod loader;
pub mod model;
pub mod nccl;
pub mod nvrtc;
pub mod pack;
pub mod peer;
pub mod procs;
pub mod sass;
pub mod sharing;

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::{Result, RuntimeError};

/// What [`probe`] found: the driver's version and the GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// `cuDriverGetVersion` (12080 for 12.8).
    pub driver: i32,
    pub gpus: Vec<GpuInfo>,
}

/// One GPU as the driver reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    /// Compute capability as XY (90 for 9.0).
    pub arch: i32,
    /// Streaming multiprocessors (how many CTAs run at once).
    pub sms: i32,
}

/// Run `f`, turning a cudarc panic into an error.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            Err(RuntimeError::Device(format!("{what}: {msg}")))
        }
    }
}

/// A driver error as the runtime's error.
pub(crate) fn drv(what: &str) -> impl Fn(cudarc::driver::DriverError) -> RuntimeError + '_ {
    move |e| RuntimeError::Device(format!("{what}: {e:?}"))
}

/// Whether the CUDA backend can run here: the driver library loads, initialises, and sees at
/// least one GPU. The error is one line naming what is missing.
pub fn probe() -> std::result::Result<Probe, String> {
    loader::probe_driver()?;
    guarded("cuda driver", || {
        use cudarc::driver::{CudaContext, result};
        result::init().map_err(drv("cuInit"))?;
        let driver = driver_version()?;
        let n = CudaContext::device_count().map_err(drv("cuDeviceGetCount"))?;
        let mut gpus = Vec::new();
        for i in 0..n.max(0) as usize {
            let dev = result::device::get(i as i32).map_err(drv("cuDeviceGet"))?;
            let name = result::device::get_name(dev).map_err(drv("cuDeviceGetName"))?;
            use cudarc::driver::sys::CUdevice_attribute as A;
            let attr = |a| {
                // SAFETY: plain attribute queries on a valid device handle.
                unsafe { result::device::get_attribute(dev, a) }
                    .map_err(drv("cuDeviceGetAttribute"))
            };
            let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
            let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
            gpus.push(GpuInfo {
                ordinal: i,
                name,
                arch: major * 10 + minor,
                sms: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            });
        }
        Ok(Probe { driver, gpus })
    })
    .map_err(|e| match e {
        RuntimeError::Device(m) if m.contains("CUDA_ERROR_NO_DEVICE") => {
            "no CUDA GPU is visible (the driver loads, but cuInit found no device)".to_string()
        }
        e => e.to_string(),
    })
    .and_then(|p| {
        if p.gpus.is_empty() {
            Err("no CUDA GPU is visible (CUDA_VISIBLE_DEVICES?)".to_string())
        } else {
            Ok(p)
        }
    })
}

/// `cuDriverGetVersion`.
pub(crate) fn driver_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: writes one int.
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        return Err(RuntimeError::Device(format!("cuDriverGetVersion: {r:?}")));
    }
    Ok(v)
}
