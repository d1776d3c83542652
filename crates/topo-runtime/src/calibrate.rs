//! Host calibration: fit latency and bandwidth (alpha, beta: `t = alpha + bytes / beta`) for
//! the host backend's links, and predict collective times from the fit. The binary caches
//! the returned [`HostModel`] per host (e.g. as JSON under the user's cache directory).
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Result, RuntimeError};
use crate::launch::{EnvInfo, ProcessSpec, run_env_with, run_processes};
use crate::types::{Algorithm, Collective, Protocol};
use crate::verify::{VerifyReport, VerifyRequest, run_threads};

/// A host link the runtime uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Link {
    /// memcpy inside one process (one thread).
    Copy,
    /// Single-copy access to another rank's mapped buffer (the DIRECT algorithm).
    ShmDirect,
    /// Shared-memory FIFOs (ring and tree steps: copy in, copy out).
    ShmFifo,
    /// TCP over loopback.
    TcpLoopback,
}

/// One fitted link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkFit {
    pub link: Link,
    /// Latency in microseconds.
    pub alpha_us: f64,
    /// Bandwidth in GB/s (1e9 bytes per second).
    pub beta_gbps: f64,
    /// Measured (bytes, microseconds) the fit came from.
    pub points: Vec<(usize, f64)>,
    /// Largest relative error of the fit over the points of 1 MB and above.
    pub max_rel_err_1mb: f64,
}

impl LinkFit {
    /// Predicted time of moving `bytes` over this link once.
    pub fn time_us(&self, bytes: usize) -> f64 {
        self.alpha_us + bytes as f64 / (self.beta_gbps * 1e3)
    }
}

/// The calibrated host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostModel {
    pub schema: String,
    /// The topo that measured it (the crate version); absent in caches from before 0.1.
    #[serde(default)]
    pub topo_version: String,
    pub links: Vec<LinkFit>,
    /// Seconds since the epoch when measured.
    pub measured_at: u64,
}

/// What to calibrate.
#[derive(Debug, Clone)]
pub struct CalibrateRequest {
    /// Largest message, bytes (default 64 MiB).
    pub max_bytes: usize,
    /// Timed iterations per size.
    pub iters: usize,
    /// How to start a second process for the shared-memory links; threads when `None`.
    pub processes: Option<ProcessSpec>,
    /// Also fit TCP loopback.
    pub tcp: bool,
}

impl Default for CalibrateRequest {
    fn default() -> Self {
        CalibrateRequest {
            max_bytes: 64 << 20,
            iters: 10,
            processes: None,
            tcp: true,
        }
    }
}

/// Least-squares fit of `t = a + s * b`, weighted by 1/t so that small and large sizes count
/// alike (relative error). Returns (alpha_us, beta_gbps).
pub fn fit(points: &[(usize, f64)]) -> (f64, f64) {
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(s, t) in points {
        let w = 1.0 / (t * t).max(1e-12);
        let x = s as f64;
        sw += w;
        sx += w * x;
        sy += w * t;
        sxx += w * x * x;
        sxy += w * x * t;
    }
    let det = sw * sxx - sx * sx;
    if det.abs() < 1e-30 {
        return (sy / sw.max(1e-30), f64::INFINITY);
    }
    let b = (sw * sxy - sx * sy) / det;
    let a = (sy - b * sx) / sw;
    let beta = if b > 0.0 {
        1.0 / (b * 1e3)
    } else {
        f64::INFINITY
    };
    (a.max(0.0), beta)
}

fn link_fit(link: Link, points: Vec<(usize, f64)>) -> LinkFit {
    let (alpha_us, beta_gbps) = fit(&points);
    let mut f = LinkFit {
        link,
        alpha_us,
        beta_gbps,
        points,
        max_rel_err_1mb: 0.0,
    };
    f.max_rel_err_1mb = f
        .points
        .iter()
        .filter(|p| p.0 >= 1 << 20)
        .map(|&(s, t)| ((f.time_us(s) - t) / t).abs())
        .fold(0.0, f64::max);
    f
}

fn sizes(max: usize) -> Vec<usize> {
    let mut v = vec![8usize];
    while v.last().unwrap() * 4 <= max {
        v.push(v.last().unwrap() * 4);
    }
    v
}

fn sendrecv_points(rep: &VerifyReport) -> Vec<(usize, f64)> {
    rep.rows
        .iter()
        .filter(|r| r.bytes > 0)
        .map(|r| (r.bytes, r.out_of_place.time_us))
        .collect()
}

/// Measure and fit every link.
pub fn calibrate(req: &CalibrateRequest) -> Result<HostModel> {
    let mut links = Vec::new();
    // Copy inside one process.
    let mut src = vec![1u8; req.max_bytes.max(8)];
    let mut dst = vec![0u8; req.max_bytes.max(8)];
    let mut pts = Vec::new();
    for s in sizes(req.max_bytes) {
        crate::kernels::copy(&mut dst[..s], &src[..s]);
        let start = Instant::now();
        for _ in 0..req.iters {
            crate::kernels::copy(&mut dst[..s], &src[..s]);
            std::hint::black_box(&mut dst);
        }
        pts.push((s, start.elapsed().as_secs_f64() * 1e6 / req.iters as f64));
        src[0] = src[0].wrapping_add(1);
    }
    links.push(link_fit(Link::Copy, pts));
    let base = VerifyRequest {
        ranks: 2,
        collectives: vec![Collective::SendRecv],
        min_bytes: 8,
        max_bytes: req.max_bytes,
        step_factor: 4.0,
        iters: req.iters,
        warmup: 2,
        check: false,
        in_place: false,
        ..VerifyRequest::default()
    };
    for (link, algo) in [
        (Link::ShmDirect, Algorithm::Direct),
        (Link::ShmFifo, Algorithm::Ring),
    ] {
        let r = VerifyRequest {
            algorithm: Some(algo),
            protocol: Some(Protocol::Simple),
            ..base.clone()
        };
        let rep = match &req.processes {
            Some(spec) => run_processes(&r, spec)?,
            None => run_threads(&r)?,
        };
        links.push(link_fit(link, sendrecv_points(&rep)));
    }
    if req.tcp {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| RuntimeError::io("find a free loopback port", e))?
            .port();
        let r = VerifyRequest {
            algorithm: Some(Algorithm::Ring),
            max_bytes: req.max_bytes.min(16 << 20),
            ..base.clone()
        };
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
                    let (r, e) = (&r, env(rank));
                    s.spawn(move || run_env_with(r, &e, true, Duration::from_secs(30)))
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
        let rep = rep.ok_or_else(|| RuntimeError::Launch("no TCP calibration report".into()))?;
        links.push(link_fit(Link::TcpLoopback, sendrecv_points(&rep)));
    }
    Ok(HostModel {
        schema: "topo.calibrate/v1".into(),
        topo_version: env!("CARGO_PKG_VERSION").into(),
        links,
        measured_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    })
}

impl HostModel {
    /// The fit of one link.
    pub fn link(&self, link: Link) -> Option<&LinkFit> {
        self.links.iter().find(|l| l.link == link)
    }

    /// Predicted time (µs) of `collective` at nccl-tests `bytes` on `nranks` host ranks with
    /// `algorithm`, from the calibrated links: DIRECT moves every rank's 1/n share of each
    /// input and output once between two barriers; ring and tree steps go through the FIFOs
    /// (per step: one FIFO transfer of the step's bytes); TCP uses the loopback fit.
    pub fn predict_us(
        &self,
        collective: Collective,
        algorithm: Algorithm,
        nranks: usize,
        bytes: usize,
        tcp: bool,
    ) -> Option<f64> {
        let n = nranks.max(1) as f64;
        let b = bytes as f64;
        if algorithm == Algorithm::Direct {
            let d = self.link(Link::ShmDirect)?;
            // Data each rank touches, in units of one SendRecv of the same size.
            // Every collective reads about `bytes` and writes about `bytes` per rank, like one
            // single-copy SendRecv of that size; AllReduce adds a second barrier.
            let barriers = if collective == Collective::AllReduce {
                2.0
            } else {
                1.0
            };
            return Some(barriers * d.alpha_us + b / (d.beta_gbps * 1e3));
        }
        let l = if tcp {
            self.link(Link::TcpLoopback)?
        } else {
            self.link(Link::ShmFifo)?
        };
        let steps = match (collective, algorithm) {
            (Collective::AllReduce, Algorithm::Tree) => 2.0 * n.log2().ceil().max(1.0),
            (Collective::AllReduce, _) => 2.0 * (n - 1.0),
            (Collective::Broadcast | Collective::Reduce, _) => n - 1.0,
            (Collective::SendRecv, _) => 1.0,
            _ => n - 1.0,
        };
        let per_step = match (collective, algorithm) {
            (Collective::AllReduce, Algorithm::Tree)
            | (Collective::Broadcast | Collective::Reduce | Collective::SendRecv, _) => b,
            (Collective::AllReduce, _)
            | (Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll, _) => {
                b / n
            }
        };
        // Pipelined steps: latency per step, bandwidth once per byte moved per step.
        Some(steps * l.alpha_us + steps * per_step / (l.beta_gbps * 1e3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_alpha_and_beta() {
        let pts: Vec<(usize, f64)> = sizes(64 << 20)
            .into_iter()
            .map(|s| (s, 2.0 + s as f64 / 10e3))
            .collect();
        let (a, b) = fit(&pts);
        assert!((a - 2.0).abs() < 1e-6, "{a}");
        assert!((b - 10.0).abs() < 1e-6, "{b}");
        let f = link_fit(Link::Copy, pts);
        assert!(f.max_rel_err_1mb < 1e-9);
    }

    #[test]
    fn calibrate_runs_on_threads() {
        let m = calibrate(&CalibrateRequest {
            max_bytes: 1 << 16,
            iters: 2,
            processes: None,
            tcp: true,
        })
        .unwrap();
        assert_eq!(m.links.len(), 4);
        assert!(
            m.links
                .iter()
                .all(|l| l.alpha_us >= 0.0 && l.beta_gbps > 0.0 && !l.points.is_empty())
        );
        assert!(
            m.predict_us(Collective::AllReduce, Algorithm::Ring, 2, 1 << 20, false)
                .unwrap()
                > 0.0
        );
        let j = serde_json::to_string(&m).unwrap();
        assert!(j.contains("shm-direct"));
    }
}
