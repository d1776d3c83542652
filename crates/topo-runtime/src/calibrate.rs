//! Host calibration: measure the host backend's links and fit them ([`crate::hostmodel`]:
//! latency, cache-resident and memory-bound bandwidth, the knee between). The binary caches
//! the returned [`HostModel`] per host (e.g. as JSON under the user's cache directory).
//!
//! Every size is measured `repeats` sweeps of `iters` iterations and the fastest iteration
//! kept: other processes on a shared machine only ever slow a run down (a descheduled rank
//! holds its peer at the barrier), so the minimum is the estimate they disturb least, and a
//! few short repeats cost less than many long ones.
use std::time::{Duration, Instant};

use crate::error::{Result, RuntimeError};
pub use crate::hostmodel::{
    BANDWIDTH_MIN_BYTES, HostModel, HostModelExt, Link, LinkFit, LinkFitExt, LinkMode, PlacedPoint,
    Placement, REGIME_MIN_POINTS, SCHEMA, Traffic, fit, fit_mode, fit_placed, traffic,
    wants_another_sweep,
};
use crate::job::Job;
use crate::launch::{EnvInfo, Launch, ProcessSpec};
use crate::types::{Algorithm, Collective, Protocol};
use crate::verify::{VerifyReport, VerifyRequest};

/// What to calibrate.
#[derive(Debug, Clone)]
pub struct CalibrateRequest {
    /// Largest message, bytes (default 64 MiB).
    pub max_bytes: usize,
    /// Timed iterations per size.
    pub iters: usize,
    /// Sweeps per link; per size the fastest is kept.
    pub repeats: usize,
    /// How to start a second process: the shared-memory links are then fitted for
    /// processes as well as for threads; threads only when `None`.
    pub processes: Option<ProcessSpec>,
    /// Also fit TCP loopback.
    pub tcp: bool,
}

impl Default for CalibrateRequest {
    fn default() -> Self {
        CalibrateRequest {
            max_bytes: 64 << 20,
            iters: 5,
            repeats: 3,
            processes: None,
            tcp: true,
        }
    }
}

/// Per size, the fastest of several (bytes, µs) sweeps over the same sizes.
pub fn fastest(sweeps: &[Vec<(usize, f64)>]) -> Vec<(usize, f64)> {
    let mut out: Vec<(usize, f64)> = Vec::new();
    for sweep in sweeps {
        for &(s, t) in sweep {
            match out.iter_mut().find(|p| p.0 == s) {
                Some(p) => p.1 = p.1.min(t),
                None => out.push((s, t)),
            }
        }
    }
    out.sort_by_key(|p| p.0);
    out
}

/// The last-level cache of cpu0 from sysfs, bytes (the knee the fit tries first).
pub fn cache_bytes() -> Option<f64> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    let mut best: Option<(u32, f64)> = None;
    for e in dir.flatten().take(16) {
        let p = e.path();
        let read = |f: &str| std::fs::read_to_string(p.join(f)).ok();
        if read("type").is_some_and(|t| t.trim() == "Instruction") {
            continue;
        }
        let Some(level) = read("level").and_then(|l| l.trim().parse::<u32>().ok()) else {
            continue;
        };
        let Some(size) = read("size").and_then(|s| parse_cache_size(s.trim())) else {
            continue;
        };
        if best.is_none_or(|b| level > b.0) {
            best = Some((level, size));
        }
    }
    best.map(|b| b.1)
}

/// sysfs writes cache sizes as `32768K` (or `1M`).
fn parse_cache_size(s: &str) -> Option<f64> {
    let (num, mul) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1024.0),
        b'M' => (&s[..s.len() - 1], 1024.0 * 1024.0),
        _ => (s, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .map(|n| n * mul)
        .filter(|&b| b > 0.0)
}

fn sendrecv_points(rep: &VerifyReport) -> Vec<(usize, f64)> {
    rep.rows
        .iter()
        .filter(|r| r.bytes > 0)
        .map(|r| (r.bytes, r.out_of_place.time_us))
        .collect()
}

/// Each size's time with the placement verify's probes saw around it (mixed where none).
fn placed_points(rep: &VerifyReport) -> Vec<PlacedPoint> {
    rep.rows
        .iter()
        .filter(|r| r.bytes > 0)
        .map(|r| {
            let p = r.placement.unwrap_or(Placement::Mixed);
            (r.bytes, r.out_of_place.time_us, p)
        })
        .collect()
}

/// One-thread memcpy through the runtime's copy kernel, the fastest of the repeats per size.
fn copy_points(req: &CalibrateRequest) -> Vec<(usize, f64)> {
    let mut src = vec![1u8; req.max_bytes.max(8)];
    let mut dst = vec![0u8; req.max_bytes.max(8)];
    let mut sweeps = Vec::new();
    for _ in 0..req.repeats.max(1) {
        let mut pts = Vec::new();
        let mut s = 8;
        while s <= req.max_bytes.max(8) {
            crate::kernels::copy(&mut dst[..s], &src[..s]);
            let mut fastest = f64::INFINITY;
            for _ in 0..req.iters.max(1) {
                let start = Instant::now();
                crate::kernels::copy(&mut dst[..s], &src[..s]);
                std::hint::black_box(&mut dst);
                fastest = fastest.min(start.elapsed().as_secs_f64() * 1e6);
            }
            pts.push((s, fastest));
            src[0] = src[0].wrapping_add(1);
            s *= 2;
        }
        sweeps.push(pts);
    }
    fastest(&sweeps)
}

/// The calibration operation of each shared-memory link: 2 ranks, one collective, one
/// algorithm.
const SHM_OPS: [(Link, Collective, Algorithm); 3] = [
    (Link::ShmDirect, Collective::SendRecv, Algorithm::Direct),
    (
        Link::ShmDirectReduce,
        Collective::AllReduce,
        Algorithm::Direct,
    ),
    (Link::ShmFifo, Collective::SendRecv, Algorithm::Ring),
];

/// Measure and fit every link.
pub fn calibrate(req: &CalibrateRequest) -> Result<HostModel> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let hint = cache_bytes();
    let copy_op = Traffic {
        link: Link::Copy,
        latencies: 1.0,
        moved: 2.0,
        footprint: 2.0,
    };
    let base = VerifyRequest {
        ranks: 2,
        min_bytes: 8,
        max_bytes: req.max_bytes,
        step_factor: 2.0,
        iters: req.iters,
        warmup: 2,
        check: false,
        in_place: false,
        protocol: Some(Protocol::Simple),
        min_of_iters_below: BANDWIDTH_MIN_BYTES,
        // As verify binds its ranks by default (`--bind-to cpu`).
        pin_cpus: true,
        ..VerifyRequest::default()
    };
    // The two ranks' arena is the largest allocation; refuse before the copy buffers too.
    base.check_memory()?;
    let mut links = vec![fit(Link::Copy, copy_op, copy_points(req), hint)];
    let mut modes = vec![LinkMode::Threads];
    if req.processes.is_some() {
        modes.push(LinkMode::Processes);
    }
    for mode in modes {
        for (link, coll, algo) in SHM_OPS {
            let r = VerifyRequest {
                collectives: vec![coll],
                algorithm: Some(algo),
                ..base.clone()
            };
            let regime = if algo == Algorithm::Direct {
                base.shared_min_bytes
            } else {
                BANDWIDTH_MIN_BYTES
            };
            let sweeps = shm_sweeps(&r, req, mode, regime)?;
            let cross = if algo == Algorithm::Direct {
                cross_sweeps(&r, req, mode)?
            } else {
                Vec::new()
            };
            let op = traffic(coll, algo, 2, cpus, false);
            links.extend(fit_placed(link, mode, op, &sweeps, &cross, hint, regime));
        }
    }
    if req.tcp {
        links.push(tcp_fit(req, &base, cpus, hint)?);
    }
    Ok(HostModel {
        schema: SCHEMA.into(),
        topo_version: env!("CARGO_PKG_VERSION").into(),
        cpus,
        cache_bytes: hint,
        links,
        measured_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    })
}

/// `repeats` sweeps of `r` with the ranks started as `mode`, each point with the placement
/// it ran in; more sweeps, up to twice `repeats`, while a placement has too few points of
/// the `regime` for a fit of its own (the hypervisor moves the vCPUs while a run goes on)
/// or a size of it was measured only under load.
fn shm_sweeps(
    r: &VerifyRequest,
    req: &CalibrateRequest,
    mode: LinkMode,
    regime: usize,
) -> Result<Vec<Vec<PlacedPoint>>> {
    let mut sweeps = Vec::new();
    let repeats = req.repeats.max(1);
    let from = regime.max(BANDWIDTH_MIN_BYTES);
    let fittable = r.sizes()?.iter().filter(|&&s| s >= from).count() >= REGIME_MIN_POINTS;
    while sweeps.len() < repeats
        || (fittable && sweeps.len() < 2 * repeats && wants_another_sweep(&sweeps, regime))
    {
        sweeps.push(placed_points(&run_in(r, req, mode)?));
    }
    Ok(sweeps)
}

/// One verify run of `r` with the ranks started as `mode`.
fn run_in(r: &VerifyRequest, req: &CalibrateRequest, mode: LinkMode) -> Result<VerifyReport> {
    match (&req.processes, mode) {
        (Some(spec), LinkMode::Processes) => {
            one_report(Job::new(r, Launch::Processes(spec.clone())))
        }
        _ => one_report(Job::new(r, Launch::Threads)),
    }
}

/// The report of a job that always has one (threads or processes: this process is rank 0).
fn one_report(job: Job) -> Result<VerifyReport> {
    job.run()?
        .ok_or_else(|| RuntimeError::Launch("rank 0 returned no report".into()))
}

/// Largest size the static split is also measured at (16 MiB of buffers in the calibration
/// operation). A 2-rank AllGather runs the static split below 2 MiB, 6 MiB of buffers; with
/// more ranks its static sizes reach further, and past the last point its residual holds.
const CROSS_MAX_BYTES: usize = 4 << 20;

/// `repeats` sweeps of `r`'s DIRECT operation with the schedule each size does not run by
/// default: the dynamic shares from 256 KiB to below `shared_min_bytes`, the static split
/// from it to [`CROSS_MAX_BYTES`] (see [`crate::hostmodel::LinkFit::cross_points`]).
/// Five sizes a sweep, a few milliseconds each.
fn cross_sweeps(
    r: &VerifyRequest,
    req: &CalibrateRequest,
    mode: LinkMode,
) -> Result<Vec<Vec<PlacedPoint>>> {
    let boundary = r.shared_min_bytes.max(BANDWIDTH_MIN_BYTES);
    let dynamic = VerifyRequest {
        min_bytes: BANDWIDTH_MIN_BYTES,
        max_bytes: (boundary / 2).min(r.max_bytes),
        shared_min_bytes: 0,
        ..r.clone()
    };
    let split = VerifyRequest {
        min_bytes: boundary,
        max_bytes: CROSS_MAX_BYTES.min(r.max_bytes),
        shared_min_bytes: usize::MAX,
        ..r.clone()
    };
    let mut sweeps = Vec::new();
    for _ in 0..req.repeats.max(1) {
        let mut pts = Vec::new();
        for q in [&dynamic, &split] {
            if q.min_bytes > q.max_bytes {
                continue;
            }
            pts.extend(placed_points(&run_in(q, req, mode)?));
        }
        sweeps.push(pts);
    }
    Ok(sweeps)
}

/// Ring SendRecv between 2 threads over TCP loopback, up to 16 MiB.
fn tcp_fit(
    req: &CalibrateRequest,
    base: &VerifyRequest,
    cpus: usize,
    hint: Option<f64>,
) -> Result<LinkFit> {
    let r = VerifyRequest {
        collectives: vec![Collective::SendRecv],
        algorithm: Some(Algorithm::Ring),
        max_bytes: req.max_bytes.min(16 << 20),
        ..base.clone()
    };
    let mut sweeps = Vec::new();
    for _ in 0..req.repeats.max(1) {
        sweeps.push(sendrecv_points(&tcp_sweep(&r)?));
    }
    let op = traffic(Collective::SendRecv, Algorithm::Ring, 2, cpus, true);
    Ok(fit(Link::TcpLoopback, op, fastest(&sweeps), hint))
}

/// One sweep of `r` by 2 ranks (threads) meeting over TCP loopback.
fn tcp_sweep(r: &VerifyRequest) -> Result<VerifyReport> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| RuntimeError::io("find a free loopback port", e))?
        .port();
    let env = |rank| EnvInfo {
        launcher: "topo",
        rank,
        world: 2,
        local_rank: rank,
        single_host: true,
        master_addr: "127.0.0.1".into(),
        master_port: port,
        token: format!("calibrate-{port}"),
    };
    let out: Vec<Result<Option<VerifyReport>>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|rank| {
                let e = env(rank);
                s.spawn(move || {
                    Job::new(r, Launch::Env)
                        .as_rank(e)
                        .tcp(true)
                        .timeout(Duration::from_secs(30))
                        .run()
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(RuntimeError::Launch("calibration thread panicked".into()))
                })
            })
            .collect()
    });
    let mut rep = None;
    for o in out {
        if let Some(r) = o? {
            rep = Some(r);
        }
    }
    rep.ok_or_else(|| RuntimeError::Launch("no TCP calibration report".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostmodel::HostModelExt;

    #[test]
    fn fastest_keeps_the_minimum_per_size() {
        let a = vec![(8, 2.0), (64, 9.0)];
        let b = vec![(8, 3.0), (64, 4.0), (512, 7.0)];
        assert_eq!(fastest(&[a, b]), vec![(8, 2.0), (64, 4.0), (512, 7.0)]);
    }

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cache_size("32768K"), Some(32.0 * 1024.0 * 1024.0));
        assert_eq!(parse_cache_size("1M"), Some(1024.0 * 1024.0));
        assert_eq!(parse_cache_size("0K"), None);
        assert_eq!(parse_cache_size("big"), None);
    }

    #[test]
    fn calibrate_runs_on_threads() {
        let m = calibrate(&CalibrateRequest {
            max_bytes: 1 << 16,
            iters: 2,
            repeats: 1,
            processes: None,
            tcp: true,
        })
        .unwrap();
        // Copy, the three shared-memory links for threads (the pooled fits; the sweep stops
        // at 64 KiB, below any placement's own regime), TCP.
        assert_eq!(m.links.len(), 5);
        assert!(m.links[1..4].iter().all(|l| l.mode == LinkMode::Threads));
        assert!(m.links.iter().all(|l| l.placement.is_none()));
        assert!(m.links.iter().all(|l| l.alpha_us >= 0.0
            && l.beta_gbps > 0.0
            && l.beta_mem_gbps > 0.0
            && !l.points.is_empty()));
        for algo in [Algorithm::Ring, Algorithm::Direct] {
            let p = m.predict_us(
                Collective::AllReduce,
                algo,
                2,
                1 << 20,
                false,
                LinkMode::Processes,
            );
            assert!(p.unwrap() > 0.0);
        }
        let j = serde_json::to_string(&m).unwrap();
        assert!(j.contains("shm-direct-reduce"));
    }
}
