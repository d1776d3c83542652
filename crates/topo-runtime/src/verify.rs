//! The verify engine: an nccl-tests style sweep over sizes, run by every rank, with results
//! gathered on rank 0; a text renderer in nccl-tests' columns and the `topo.verify/v1` JSON.
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::{Result, RuntimeError};
use crate::exec::{Executor, OpCtx};
use crate::hostmodel::Placement;
use crate::kernels;
use crate::schedule::{Layout, schedule};
use crate::transport::{Transport, TransportKind};
use crate::types::{Algorithm, Collective, CollectivePlan, DataType, Protocol, Reduction};

/// nccl-tests' layout of a report; it uses the report's types and is not used back.
pub mod nccl_tests;
mod text;

/// A plan row handed in by the caller: how NCCL would run `collective` at `bytes`, and what
/// the model predicts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedRow {
    pub collective: Collective,
    pub bytes: usize,
    pub plan: CollectivePlan,
    pub predicted_time_us: Option<f64>,
    /// The prediction of each placement calibration fitted (`predicted_time_us` is the
    /// pooled one): verify prices the size with the one of the placement it measures.
    #[serde(default)]
    pub by_placement: Vec<(Placement, f64)>,
}

/// A whole verify sweep (nccl-tests' options).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerifyRequest {
    /// Ranks (world size).
    pub ranks: usize,
    /// Collectives to run, in order (`--collective all` is [`Collective::RUN_ORDER`]).
    pub collectives: Vec<Collective>,
    /// `-d`
    pub dtype: DataType,
    /// `-o`
    pub op: Reduction,
    /// `-r`: root of Broadcast and Reduce.
    pub root: usize,
    /// `-b`, `-e` in bytes, `-f`.
    pub min_bytes: usize,
    pub max_bytes: usize,
    pub step_factor: f64,
    /// `-n`, `-w`
    pub iters: usize,
    pub warmup: usize,
    /// `-c`: check results (`#wrong`).
    pub check: bool,
    /// Run the in-place form too (nccl-tests does by default).
    pub in_place: bool,
    /// `--algo`, `--proto`: force what the plan would choose.
    pub algorithm: Option<Algorithm>,
    pub protocol: Option<Protocol>,
    /// Channels when no plan row gives them.
    pub nchannels: usize,
    /// Plan rows from topo's model (may be empty).
    pub plans: Vec<PlannedRow>,
    /// Seconds a rank waits for a peer before failing.
    pub timeout_s: f64,
    /// Set when the plan is for another machine: timings are this host's.
    pub foreign_machine: Option<String>,
    /// Pin rank r (thread or process) to the r-th allowed CPU when the ranks fit on the
    /// allowed CPUs, as mpirun's `--bind-to core` does. Unpinned, the two processes of a
    /// `--launch processes` job sometimes ran their first size on one CPU (the scheduler
    /// put the worker where rank 0 was): each wait then lasted a spin budget before the
    /// other rank got the CPU, and 1 MiB AllReduce took 550-700 µs instead of 70-100 in
    /// about 3 runs of 10 on the 2-vCPU Xeon VM (`sched_getcpu` in both ranks, per
    /// iteration; bench/verify/README.md). Ignored for `--launch env`: the launcher binds
    /// its ranks, and a global rank says nothing of this host's CPUs.
    #[serde(default)]
    pub pin_cpus: bool,
    /// DIRECT collectives of at least this many bytes per rank share their work dynamically
    /// among the ranks (see `Executor::run_shared`); `usize::MAX` turns that off.
    #[serde(default = "default_shared_min")]
    pub shared_min_bytes: usize,
    /// Below this many bytes, report each rank's fastest iteration instead of the mean
    /// (calibration's latency points: a rank descheduled by another process slows some
    /// iterations of a few microseconds, rarely all); 0 never does. Larger sizes are timed
    /// as verify times them, one clock around the loop, so the fit predicts what verify
    /// measures.
    #[serde(default)]
    pub min_of_iters_below: usize,
}

fn default_shared_min() -> usize {
    1 << 20
}

impl Default for VerifyRequest {
    fn default() -> Self {
        VerifyRequest {
            ranks: 2,
            collectives: vec![Collective::AllReduce],
            dtype: DataType::F32,
            op: Reduction::Sum,
            root: 0,
            min_bytes: 8,
            max_bytes: 32 << 20,
            step_factor: 2.0,
            iters: 20,
            warmup: 5,
            check: true,
            in_place: true,
            algorithm: None,
            protocol: None,
            nchannels: 1,
            plans: Vec::new(),
            timeout_s: 30.0,
            foreign_machine: None,
            pin_cpus: false,
            shared_min_bytes: default_shared_min(),
            min_of_iters_below: 0,
        }
    }
}

impl VerifyRequest {
    /// The sizes of the sweep, in bytes.
    pub fn sizes(&self) -> Result<Vec<usize>> {
        if self.min_bytes > self.max_bytes {
            return Err(RuntimeError::InvalidPlan(format!(
                "minimum size {} above maximum {}",
                self.min_bytes, self.max_bytes
            )));
        }
        if self.step_factor <= 1.0 && self.min_bytes != self.max_bytes {
            return Err(RuntimeError::InvalidPlan(format!(
                "size factor {} is not above 1",
                self.step_factor
            )));
        }
        let mut v = vec![self.min_bytes];
        let mut s = self.min_bytes as f64;
        loop {
            s = (s * self.step_factor).max(s + 1.0);
            if s > self.max_bytes as f64 || self.min_bytes == self.max_bytes {
                break;
            }
            v.push(s as usize);
        }
        Ok(v)
    }

    /// Bytes of buffer storage each rank needs (saturating: [`Self::check_memory`] refuses
    /// a request whose sizes overflow before anything is sized from them).
    pub fn storage_bytes(&self) -> usize {
        self.max_bytes.saturating_mul(2).saturating_add(4096)
    }

    /// The shared arena that threads or processes of one host map for this request on
    /// `world` ranks: FIFOs for every ordered pair of ranks and at least
    /// [`ARENA_MIN_CHANNELS`] channels, then each rank's storage. Both launchers and the
    /// memory check size it here, so the check and the mapping cannot disagree.
    pub fn arena_shape(&self, world: usize) -> crate::transport::shm::ArenaShape {
        crate::transport::shm::ArenaShape::new(
            world,
            self.nchannels.max(ARENA_MIN_CHANNELS),
            self.storage_bytes(),
        )
    }

    /// Bytes of [`Self::arena_shape`] on this request's ranks, counted with checked
    /// arithmetic (`ArenaShape::checked_total`); `None` when it overflows or the shape is
    /// past the runtime's limits. Every byte is touched up front (prefault).
    pub fn arena_bytes(&self) -> Option<u64> {
        // Buffers past the cap would overflow the shape's own rounding before it is checked.
        if self.max_bytes > MAX_BUFFER_BYTES || self.ranks > crate::types::MAX_RANKS {
            return None;
        }
        let total = self.arena_shape(self.ranks).checked_total().ok()?;
        u64::try_from(total).ok()
    }

    /// Refuses a request no run can honour (no ranks or channels, a timeout that is not a
    /// positive number of seconds up to a day) before anything is sized from it.
    pub fn validate(&self) -> Result<()> {
        if self.ranks == 0 {
            return Err(RuntimeError::InvalidPlan(
                "0 ranks: a job has at least 1".into(),
            ));
        }
        if self.nchannels == 0 {
            return Err(RuntimeError::InvalidPlan("0 channels".into()));
        }
        if self.timeout_s > MAX_TIMEOUT_S {
            return Err(RuntimeError::InvalidPlan(format!(
                "timeout of {} s is more than a day",
                self.timeout_s
            )));
        }
        checked_timeout(self.timeout_s).map(|_| ())
    }

    /// Refuses, before anything is allocated, a request whose buffers exceed
    /// [`MAX_BUFFER_BYTES`] or whose arena exceeds [`memory_limit`]; the error names the
    /// memory it would need and the limit.
    pub fn check_memory(&self) -> Result<u64> {
        if self.max_bytes > MAX_BUFFER_BYTES {
            return Err(RuntimeError::TooLarge(format!(
                "{} bytes per buffer is more than the limit of {}",
                self.max_bytes,
                gib(MAX_BUFFER_BYTES as u64)
            )));
        }
        let (limit, basis) = memory_limit();
        let need = self.arena_bytes();
        match need {
            Some(need) if need <= limit => Ok(need),
            _ => Err(RuntimeError::TooLarge(format!(
                "{} ranks x {} channels with {} buffers need {} of shared memory, above the limit of {} ({basis})",
                self.ranks,
                self.nchannels.max(ARENA_MIN_CHANNELS),
                gib(self.max_bytes as u64),
                need.map_or("more than this machine can address".to_string(), gib),
                gib(limit)
            ))),
        }
    }
}

/// The largest message `topo verify` and `topo calibrate` size buffers for: each rank holds
/// two of them (send and receive) in this host's memory.
pub const MAX_BUFFER_BYTES: usize = 16 << 30;
/// The longest timeout a request may give, one day.
pub const MAX_TIMEOUT_S: f64 = 86_400.0;
/// The arena has at least this many FIFO channels per pair (as both launchers size it).
pub const ARENA_MIN_CHANNELS: usize = 4;
/// The limit when /proc/meminfo cannot be read.
const FALLBACK_LIMIT_BYTES: u64 = 16 << 30;

/// The most memory an arena may take: three quarters of MemAvailable (the rest for the
/// kernel, page tables and everything else on the host), else 16 GiB; and a phrase saying
/// which.
pub fn memory_limit() -> (u64, &'static str) {
    let avail = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| mem_available(&t));
    match avail {
        Some(b) => (b / 4 * 3, "3/4 of this host's MemAvailable"),
        None => (FALLBACK_LIMIT_BYTES, "16 GiB, /proc/meminfo unreadable"),
    }
}

/// `MemAvailable:` of /proc/meminfo, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

fn gib(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// One measured form (out-of-place or in-place).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// Wrong elements summed over ranks (`None` without `-c`).
    pub wrong: Option<u64>,
}

/// One size of one collective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyRow {
    pub collective: Collective,
    pub bytes: usize,
    pub count: usize,
    #[serde(rename = "type")]
    pub dtype: DataType,
    pub redop: Option<Reduction>,
    /// -1 for collectives without a root.
    pub root: i64,
    pub algo: Algorithm,
    pub proto: Protocol,
    pub nchannels: usize,
    pub out_of_place: Measured,
    pub in_place: Option<Measured>,
    pub predicted_time_us: Option<f64>,
    pub predicted_busbw_gbps: Option<f64>,
    /// The two ranks' cache-to-cache latency (ns) right before and right after the
    /// out-of-place measurement (2 ranks sharing memory only).
    #[serde(default)]
    pub c2c_ns: Option<(f64, f64)>,
    /// The placement those probes tell.
    #[serde(default)]
    pub placement: Option<Placement>,
    /// The placement of the fit that priced the prediction (`None`: every placement pooled).
    #[serde(default)]
    pub priced_as: Option<Placement>,
    /// The CUDA backend with every rank on one GPU and `--copy-ceiling`: the busbw at which
    /// the ranks move as many bytes of the GPU's memory as the measured copy does
    /// (`cuda::model::ceiling_busbw`); the text prints it and measured busbw over it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_busbw_gbps: Option<f64>,
}

/// The sweep's result, on rank 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    pub backend: String,
    pub launch: String,
    pub transport: TransportKind,
    pub ranks: usize,
    pub rows: Vec<VerifyRow>,
    pub foreign_machine: Option<String>,
    /// Lines said before the table (the CUDA backend: GPUs, NVRTC, the copy ceiling).
    #[serde(default)]
    pub notes: Vec<String>,
    /// `--compare nccl`: NCCL's figures for the same rows.
    #[serde(default)]
    pub nccl: Vec<NcclRow>,
}

impl VerifyReport {
    /// Price rows measured before `req` had predictions: a `--launch env` job's rank 0
    /// calibrates after the run, not every rank before the rendezvous (issue 45). The rows
    /// are the sweep's (collective by collective, size by size, as [`run_rank`] makes them);
    /// each takes its plan row's prediction, and where the run probed the ranks' placement,
    /// that placement's.
    pub fn price(&mut self, req: &VerifyRequest) -> Result<()> {
        let n = self.ranks;
        let sizes = req.sizes()?;
        let keys = req
            .collectives
            .iter()
            .flat_map(|&c| sizes.iter().map(move |&b| (c, b)));
        for (row, (c, b)) in self.rows.iter_mut().zip(keys) {
            let Some(p) = req.plans.iter().find(|p| p.collective == c && p.bytes == b) else {
                continue;
            };
            row.priced_as = None;
            row.predicted_time_us = p.predicted_time_us;
            row.predicted_busbw_gbps = p
                .predicted_time_us
                .filter(|&t| t > 0.0)
                .map(|t| row.bytes as f64 / (t * 1e-6) / 1e9 * c.bus_factor(n));
            if let Some(c2c) = row.c2c_ns {
                row.place(c2c, &p.by_placement, n);
            }
        }
        Ok(())
    }

    /// nccl-tests' `# Avg bus bandwidth`: the mean busbw over every measured form of every row.
    pub fn avg_busbw_gbps(&self) -> f64 {
        let v: Vec<f64> = self
            .rows
            .iter()
            .flat_map(|r| {
                std::iter::once(r.out_of_place.busbw_gbps).chain(r.in_place.map(|m| m.busbw_gbps))
            })
            .collect();
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    }

    /// Wrong elements over the whole sweep.
    pub fn wrong_total(&self) -> u64 {
        self.rows
            .iter()
            .flat_map(|r| std::iter::once(r.out_of_place.wrong).chain(r.in_place.map(|m| m.wrong)))
            .flatten()
            .sum()
    }
}

pub(crate) fn plan_for(
    req: &VerifyRequest,
    coll: Collective,
    bytes: usize,
    direct_ok: bool,
) -> Result<(CollectivePlan, Option<f64>)> {
    let rows: Vec<&PlannedRow> = req.plans.iter().filter(|p| p.collective == coll).collect();
    let pick = rows
        .iter()
        .filter(|p| p.bytes <= bytes)
        .max_by_key(|p| p.bytes)
        .or_else(|| rows.iter().min_by_key(|p| p.bytes));
    let (mut plan, predicted) = match pick {
        Some(p) => (
            p.plan.clone(),
            if p.bytes == bytes {
                p.predicted_time_us
            } else {
                None
            },
        ),
        None => {
            let algo = if direct_ok {
                Algorithm::Direct
            } else {
                Algorithm::Ring
            };
            (
                CollectivePlan::host_default(
                    coll,
                    algo,
                    Protocol::Simple,
                    req.ranks,
                    req.nchannels,
                ),
                None,
            )
        }
    };
    if plan.nranks != req.ranks {
        return Err(RuntimeError::InvalidPlan(format!(
            "the plan is for {} ranks, the job has {}",
            plan.nranks, req.ranks
        )));
    }
    plan.collective = coll;
    plan.root = req.root;
    if let Some(a) = req.algorithm {
        plan.algorithm = a;
    }
    if let Some(p) = req.protocol {
        plan.protocol = p;
    }
    if plan.algorithm == Algorithm::Tree && coll != Collective::AllReduce {
        // NCCL runs trees for AllReduce only.
        plan.algorithm = Algorithm::Ring;
    }
    if plan.algorithm == Algorithm::Tree && plan.trees.len() < plan.nchannels {
        let d = CollectivePlan::host_default(
            coll,
            Algorithm::Tree,
            plan.protocol,
            plan.nranks,
            plan.nchannels,
        );
        plan.trees = d.trees;
    }
    if plan.algorithm == Algorithm::Direct && !direct_ok {
        return Err(RuntimeError::Unsupported(
            "algorithm DIRECT needs ranks that map each other's memory (threads or processes on one host)".into(),
        ));
    }
    plan.validate()?;
    Ok((plan, predicted))
}

/// The per-placement predictions of the plan row of `coll` at exactly `bytes`.
fn placed_predictions(
    req: &VerifyRequest,
    coll: Collective,
    bytes: usize,
) -> Vec<(Placement, f64)> {
    req.plans
        .iter()
        .find(|p| p.collective == coll && p.bytes == bytes)
        .map(|p| p.by_placement.clone())
        .unwrap_or_default()
}

/// Input value of element `i` on rank `r`: small integers, so every reduction is exact in
/// every type (sums stay below 256 for up to 85 ranks, products are at most 4).
fn input_value(coll: Collective, op: Reduction, r: usize, i: usize) -> f64 {
    if !coll.reduces() {
        return ((r * 7 + i) % 11) as f64;
    }
    match op {
        Reduction::Sum | Reduction::Avg => ((r + i) % 4) as f64,
        Reduction::Prod => {
            if (r + i).is_multiple_of(7) {
                2.0
            } else {
                1.0
            }
        }
        Reduction::Min | Reduction::Max => ((r * 3 + i) % 5) as f64,
    }
}

fn fold(op: Reduction, n: usize, f: impl Fn(usize) -> f64) -> f64 {
    let mut a = f(0);
    for r in 1..n {
        let b = f(r);
        a = match op {
            Reduction::Sum | Reduction::Avg => a + b,
            Reduction::Prod => a * b,
            Reduction::Min => a.min(b),
            Reduction::Max => a.max(b),
        };
    }
    a
}

/// Fill this rank's send buffer with the check pattern and its receive buffer with a marker.
pub(crate) fn fill(
    storage: &mut [u8],
    layout: &Layout,
    coll: Collective,
    dt: DataType,
    op: Reduction,
    rank: usize,
) {
    let es = dt.size();
    let recv = &mut storage[layout.recv_off * es..(layout.recv_off + layout.recv_len) * es];
    for i in 0..layout.recv_len {
        kernels::store(dt, recv, i, 99.0);
    }
    let send = &mut storage[layout.send_off * es..(layout.send_off + layout.send_len) * es];
    for i in 0..layout.send_len {
        kernels::store(dt, send, i, input_value(coll, op, rank, i));
    }
}

/// What this rank's receive buffer must hold after the collective (`None`: nothing is
/// defined there, as on a Reduce's non-root ranks).
#[allow(clippy::too_many_arguments)]
pub(crate) fn expected(
    layout: &Layout,
    coll: Collective,
    dt: DataType,
    op: Reduction,
    rank: usize,
    n: usize,
    root: usize,
    count: usize,
) -> Option<Vec<u8>> {
    if coll == Collective::Reduce && rank != root {
        return None;
    }
    let es = dt.size();
    let bytes = layout.recv_len * es;
    // u64 words: the typed views in `kernels` need the element's alignment.
    let mut words = vec![0u64; bytes.div_ceil(8)];
    let want = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes];
    let reduce_at = |j: usize| fold(op, n, |q| input_value(coll, op, q, j));
    for j in 0..layout.recv_len {
        let v = match coll {
            Collective::AllReduce | Collective::Reduce => reduce_at(j),
            Collective::ReduceScatter => reduce_at(rank * count + j),
            Collective::AllGather => input_value(coll, op, j / count, j % count),
            Collective::Broadcast => input_value(coll, op, root, j),
            Collective::AllToAll => input_value(coll, op, j / count, rank * count + j % count),
            Collective::SendRecv => input_value(coll, op, (rank + n - 1) % n, j),
        };
        kernels::store(dt, want, j, v);
    }
    if coll.reduces() {
        kernels::finish(dt, op, want, n);
    }
    Some(want.to_vec())
}

/// Count wrong elements of this rank's output.
#[allow(clippy::too_many_arguments)]
fn count_wrong(
    storage: &[u8],
    layout: &Layout,
    coll: Collective,
    dt: DataType,
    op: Reduction,
    rank: usize,
    n: usize,
    root: usize,
    count: usize,
) -> u64 {
    let es = dt.size();
    let Some(want) = expected(layout, coll, dt, op, rank, n, root, count) else {
        return 0;
    };
    let recv = &storage[layout.recv_off * es..(layout.recv_off + layout.recv_len) * es];
    want.chunks(es)
        .zip(recv.chunks(es))
        .filter(|(a, b)| a != b)
        .count() as u64
}

/// Gather `vals` from every rank on rank 0 (one small message per rank).
fn gather(t: &mut dyn Transport, vals: &[f64]) -> Result<Option<Vec<Vec<f64>>>> {
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let (rank, n) = (t.rank(), t.nranks());
    if rank != 0 {
        t.send(0, 0, Protocol::Simple, &bytes)?;
        return Ok(None);
    }
    let mut all = vec![vals.to_vec()];
    let mut buf = vec![0u8; bytes.len()];
    for r in 1..n {
        t.recv(r, 0, Protocol::Simple, &mut buf)?;
        all.push(
            buf.chunks(8)
                .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
                .collect(),
        );
    }
    Ok(Some(all))
}

/// Pin the calling thread to the `rank`-th allowed CPU (best effort).
/// The calling thread bound to one CPU for a run; dropping it gives the thread back the CPUs
/// it had. Rank 0 of `--launch processes` is the caller's own thread, which goes on to start
/// the workers of the next run (calibration sweeps one link after another), and a child
/// inherits its CPU set: kept bound, the second processes sweep ran both ranks on CPU 0
/// (`shm-direct-reduce` for processes fitted at half speed with an 8 µs latency, predict run
/// `093147Z`).
struct Bound(Option<rustix::thread::CpuSet>);

impl Bound {
    /// Rank `rank` of `nranks` on the rank-th CPU this thread may use, when the ranks fit.
    /// More ranks than CPUs are left to the scheduler, which can move a rank off a CPU
    /// another rank is busy on; two ranks bound to one CPU could not.
    fn to_rank_cpu(rank: usize, nranks: usize) -> Bound {
        use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
        let Ok(allowed) = sched_getaffinity(None) else {
            return Bound(None);
        };
        let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
            .filter(|&c| allowed.is_set(c))
            .collect();
        if cpus.is_empty() || nranks > cpus.len() {
            return Bound(None);
        }
        let mut set = CpuSet::new();
        set.set(cpus[rank % cpus.len()]);
        match sched_setaffinity(None, &set) {
            Ok(()) => Bound(Some(allowed)),
            Err(_) => Bound(None),
        }
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        if let Some(before) = &self.0 {
            let _ = rustix::thread::sched_setaffinity(None, before);
        }
    }
}

/// Progress of a sweep on rank 0: (rows done, rows in all). For a progress bar on a terminal.
pub type Progress<'a> = Option<&'a (dyn Fn(usize, usize) + Sync)>;

/// Run the sweep as one rank. Every rank calls this with the same request; rank 0 gets the
/// report and calls `progress` after each row.
pub(crate) fn run_rank(
    t: &mut dyn Transport,
    req: &VerifyRequest,
    launch: &str,
    progress: Progress,
) -> Result<Option<VerifyReport>> {
    let total_rows = req.collectives.len() * req.sizes()?.len();
    let n = t.nranks();
    if n != req.ranks {
        return Err(RuntimeError::Rendezvous(format!(
            "world size {n} but the request is for {}",
            req.ranks
        )));
    }
    let rank = t.rank();
    let _bound = if req.pin_cpus {
        Bound::to_rank_cpu(rank, req.ranks)
    } else {
        Bound(None)
    };
    let direct_ok = (0..n).all(|r| t.peer_storage(r).is_some());
    // The placement of two ranks is one number; of more, a matrix the barrier cannot tell.
    let probe = direct_ok && n == 2;
    let dt = req.dtype;
    let mut exec = Executor::new();
    let mut rows = Vec::new();
    for &coll in &req.collectives {
        for bytes in req.sizes()? {
            let mut prepared = Prepared::new(&*t, req, coll, bytes, direct_ok)?;
            let count = prepared.count;
            let mut forms = vec![false];
            if req.in_place && coll.has_in_place() {
                forms.push(true);
            }
            let mut local = Vec::new();
            let mut c2c = (0.0, 0.0);
            for &in_place in &forms {
                let ctx = prepared.ctx(req, coll, in_place);
                let layout = Layout::new(coll, count, n, rank, in_place);
                let (base, cap) = t.storage();
                {
                    // SAFETY: storage is this rank's own `cap` bytes; no step is running.
                    let storage = unsafe { std::slice::from_raw_parts_mut(base, cap) };
                    fill(storage, &layout, coll, dt, req.op, rank);
                }
                if probe && !in_place {
                    c2c.0 = probe_c2c(t)?;
                }
                for _ in 0..req.warmup {
                    prepared.run(t, &mut exec, &ctx)?;
                }
                t.barrier()?;
                let secs = if bytes < req.min_of_iters_below {
                    let mut fastest = f64::INFINITY;
                    for _ in 0..req.iters.max(1) {
                        let start = Instant::now();
                        prepared.run(t, &mut exec, &ctx)?;
                        fastest = fastest.min(start.elapsed().as_secs_f64());
                    }
                    fastest
                } else {
                    // One clock read around the loop: per-iteration reads would cost more
                    // than an 8-byte collective.
                    let start = Instant::now();
                    for _ in 0..req.iters {
                        prepared.run(t, &mut exec, &ctx)?;
                    }
                    start.elapsed().as_secs_f64() / req.iters.max(1) as f64
                };
                if probe && !in_place {
                    c2c.1 = probe_c2c(t)?;
                }
                let mut wrong = 0.0;
                if req.check {
                    t.barrier()?;
                    {
                        // SAFETY: as above; every rank passed the barrier, so no peer is
                        // still writing into this rank's buffers.
                        let storage = unsafe { std::slice::from_raw_parts_mut(base, cap) };
                        fill(storage, &layout, coll, dt, req.op, rank);
                    }
                    t.barrier()?;
                    prepared.run(t, &mut exec, &ctx)?;
                    t.barrier()?;
                    // SAFETY: as above.
                    let storage = unsafe { std::slice::from_raw_parts(base, cap) };
                    wrong =
                        count_wrong(storage, &layout, coll, dt, req.op, rank, n, req.root, count)
                            as f64;
                }
                local.push(secs);
                local.push(wrong);
                t.barrier()?;
            }
            if let Some(all) = gather(t, &local)? {
                if let Some(p) = progress {
                    p(rows.len() + 1, total_rows);
                }
                let (plan, predicted) = (&prepared.plan, prepared.predicted);
                let mut row = measured_row(req, coll, count, n, plan, predicted, forms.len(), &all);
                if probe {
                    row.place(c2c, &placed_predictions(req, coll, bytes), n);
                }
                rows.push(row);
            }
        }
    }
    t.close();
    Ok((rank == 0).then(|| VerifyReport {
        backend: "host".into(),
        launch: launch.into(),
        transport: t.kind(),
        ranks: n,
        rows,
        foreign_machine: req.foreign_machine.clone(),
        notes: Vec::new(),
        nccl: Vec::new(),
    }))
}

/// One (collective, size) made runnable on this rank: its plan, this rank's steps and, for
/// a single-copy collective large enough to share its work dynamically, every rank's.
struct Prepared {
    plan: CollectivePlan,
    predicted: Option<f64>,
    count: usize,
    steps: Vec<crate::schedule::Step>,
    all: Option<Vec<Vec<crate::schedule::Step>>>,
    shared: bool,
}

impl Prepared {
    fn new(
        t: &dyn Transport,
        req: &VerifyRequest,
        coll: Collective,
        bytes: usize,
        direct_ok: bool,
    ) -> Result<Prepared> {
        let (n, rank, es) = (t.nranks(), t.rank(), req.dtype.size());
        let count = coll.count_for_size(bytes, n, es);
        let (plan, predicted) = plan_for(req, coll, bytes, direct_ok)?;
        let chunk = Executor::chunk_elems(t, plan.protocol, plan.chunk_bytes, req.dtype);
        let steps = schedule(&plan, rank, count, chunk)?;
        let all = if plan.algorithm == Algorithm::Direct && count * es >= req.shared_min_bytes {
            Some(
                (0..n)
                    .map(|q| schedule(&plan, q, count, chunk))
                    .collect::<Result<Vec<_>>>()?,
            )
        } else {
            None
        };
        let shared = all.is_some();
        Ok(Prepared {
            plan,
            predicted,
            count,
            steps,
            all,
            shared,
        })
    }

    /// One call of the collective: the dynamic shares where the transport offers them, else
    /// this rank's own steps (from then on).
    fn run(&mut self, t: &mut dyn Transport, exec: &mut Executor, ctx: &OpCtx) -> Result<()> {
        if self.shared {
            if exec.run_shared(t, self.all.as_deref().unwrap_or_default(), ctx)? {
                return Ok(());
            }
            self.shared = false;
        }
        exec.run(t, &self.steps, ctx)
    }

    fn ctx(&self, req: &VerifyRequest, coll: Collective, in_place: bool) -> OpCtx {
        OpCtx {
            collective: coll,
            dtype: req.dtype,
            op: req.op,
            protocol: self.plan.protocol,
            count: self.count,
            in_place,
        }
    }
}

/// One report row from every rank's (seconds, wrong) per form: times averaged over ranks,
/// wrong elements summed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn measured_row(
    req: &VerifyRequest,
    coll: Collective,
    count: usize,
    n: usize,
    plan: &CollectivePlan,
    predicted: Option<f64>,
    nforms: usize,
    all: &[Vec<f64>],
) -> VerifyRow {
    let es = req.dtype.size();
    let size = coll.size_bytes(count, n, es);
    let measured = |k: usize| {
        let time = all.iter().map(|v| v[2 * k]).sum::<f64>() / n as f64;
        let algbw = if time > 0.0 {
            size as f64 / time / 1e9
        } else {
            0.0
        };
        Measured {
            time_us: time * 1e6,
            algbw_gbps: algbw,
            busbw_gbps: algbw * coll.bus_factor(n),
            wrong: req
                .check
                .then(|| all.iter().map(|v| v[2 * k + 1]).sum::<f64>() as u64),
        }
    };
    VerifyRow {
        collective: coll,
        bytes: size,
        count,
        dtype: req.dtype,
        redop: coll.reduces().then_some(req.op),
        root: if coll.rooted() { req.root as i64 } else { -1 },
        algo: plan.algorithm,
        proto: plan.protocol,
        nchannels: plan.nchannels,
        out_of_place: measured(0),
        in_place: (nforms > 1).then(|| measured(1)),
        predicted_time_us: predicted,
        predicted_busbw_gbps: predicted
            .filter(|&p| p > 0.0)
            .map(|p| size as f64 / (p * 1e-6) / 1e9 * coll.bus_factor(n)),
        c2c_ns: None,
        placement: None,
        priced_as: None,
        ceiling_busbw_gbps: None,
    }
}

impl VerifyRow {
    /// Record the placement probes and price the row with the prediction of the placement
    /// they tell, where `planned` has one; else the pooled prediction stays.
    pub fn place(&mut self, c2c: (f64, f64), planned: &[(Placement, f64)], n: usize) {
        let p = crate::hostmodel::placement(c2c.0, c2c.1);
        self.c2c_ns = Some(c2c);
        self.placement = Some(p);
        if let Some(&(q, t)) = planned.iter().find(|x| x.0 == p && x.1 > 0.0) {
            self.priced_as = Some(q);
            self.predicted_time_us = Some(t);
            self.predicted_busbw_gbps =
                Some(self.bytes as f64 / (t * 1e-6) / 1e9 * self.collective.bus_factor(n));
        }
    }
}

/// Back-to-back barriers per probe group, and groups per probe.
const PROBE_BARRIERS: usize = 20;
const PROBE_GROUPS: usize = 5;

/// The ranks' cache-to-cache latency, ns: the median over [`PROBE_GROUPS`] groups of
/// back-to-back barriers of the time of one. A shared-memory barrier between 2 ranks is one
/// cache line written by each rank and read by the other, both at once, so one barrier takes
/// one one-way line transfer (plus a few ns of loop): the quantity `membw -c` measures with
/// a ping-pong (bench/peers). Every rank calls it. 100 barriers: 5-30 µs on a quiet host; a
/// fixed count, not a time, because the ranks must agree on it without talking, and under
/// load each barrier can wait out another process's time slice (0.5 ms measured on the
/// 2-vCPU VM), so a probe then costs up to about 50 ms.
fn probe_c2c(t: &mut dyn Transport) -> Result<f64> {
    t.barrier()?;
    let mut v = Vec::with_capacity(PROBE_GROUPS);
    for _ in 0..PROBE_GROUPS {
        let start = Instant::now();
        for _ in 0..PROBE_BARRIERS {
            t.barrier()?;
        }
        v.push(start.elapsed().as_secs_f64() * 1e9 / PROBE_BARRIERS as f64);
    }
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

pub use topo_documents::verify::{JsonForm, JsonRow, NcclRow, VerifyJson};

impl VerifyReport {
    /// The `topo.verify/v1` document.
    pub fn to_json(&self) -> VerifyJson {
        let colls: std::collections::BTreeSet<&str> =
            self.rows.iter().map(|r| r.collective.cli_name()).collect();
        VerifyJson {
            schema: topo_documents::schema::VERIFY.into(),
            topo_version: env!("CARGO_PKG_VERSION").into(),
            backend: self.backend.clone(),
            launch: self.launch.clone(),
            transport: self.transport.name().into(),
            ranks: self.ranks,
            collective: if colls.len() == 1 {
                colls.into_iter().next().unwrap().into()
            } else {
                "all".into()
            },
            results: self
                .rows
                .iter()
                .map(|r| JsonRow {
                    collective: r.collective,
                    bytes: r.bytes,
                    count: r.count,
                    dtype: r.dtype,
                    redop: r.redop,
                    root: r.root,
                    algo: r.algo,
                    proto: r.proto,
                    nchannels: r.nchannels,
                    time_us: r.out_of_place.time_us,
                    algbw_gbps: r.out_of_place.algbw_gbps,
                    busbw_gbps: r.out_of_place.busbw_gbps,
                    wrong: r.out_of_place.wrong,
                    in_place: r.in_place.map(|m| JsonForm {
                        time_us: m.time_us,
                        algbw_gbps: m.algbw_gbps,
                        busbw_gbps: m.busbw_gbps,
                        wrong: m.wrong,
                    }),
                    predicted_time_us: r.predicted_time_us,
                    predicted_busbw_gbps: r.predicted_busbw_gbps,
                    ratio: r
                        .predicted_time_us
                        .filter(|&p| p > 0.0)
                        .map(|p| r.out_of_place.time_us / p),
                    placement: r.placement,
                    c2c_ns: r.c2c_ns.map(|(a, b)| [a.round(), b.round()]),
                    predicted_for: r
                        .placement
                        .and(r.predicted_time_us)
                        .map(|_| r.priced_as.map_or("pooled", |p| p.name()).into()),
                    ceiling_busbw_gbps: r.ceiling_busbw_gbps,
                    ceiling_ratio: r
                        .ceiling_busbw_gbps
                        .filter(|&c| c > 0.0)
                        .map(|c| r.out_of_place.busbw_gbps / c),
                })
                .collect(),
            avg_busbw_gbps: self.avg_busbw_gbps(),
            wrong_total: self.wrong_total(),
            note: {
                let mut v: Vec<String> = self
                    .foreign_machine
                    .iter()
                    .map(|m| format!("schedule of {m} run on this host: the timings are this host's, not that machine's"))
                    .collect();
                v.extend(self.notes.iter().cloned());
                (!v.is_empty()).then(|| v.join("; "))
            },
            nccl: self.nccl.clone(),
        }
    }

    /// How many rows of `min_bytes` and more have a measured out-of-place busbw within
    /// `tolerance` of the predicted one: (within, rows with a prediction, the measured /
    /// predicted busbw furthest from 1). `None` without such rows.
    pub fn model_agreement(&self, min_bytes: usize, tolerance: f64) -> Option<(usize, usize, f64)> {
        let ratios: Vec<f64> = self
            .rows
            .iter()
            .filter(|r| r.bytes >= min_bytes)
            .filter_map(|r| {
                let p = r.predicted_busbw_gbps.filter(|&p| p > 0.0)?;
                Some(r.out_of_place.busbw_gbps / p)
            })
            .collect();
        let worst = ratios
            .iter()
            .copied()
            .max_by(|a, b| (a - 1.0).abs().total_cmp(&(b - 1.0).abs()))?;
        let within = ratios
            .iter()
            .filter(|&&q| (q - 1.0).abs() <= tolerance)
            .count();
        Some((within, ratios.len(), worst))
    }
}

/// The sizes the model's agreement line counts, and its tolerance (issue: within 25 % from
/// 1 MB up).
pub const MODEL_MIN_BYTES: usize = 1 << 20;
pub const MODEL_TOLERANCE: f64 = 0.25;

/// Run `req` with N threads in this process (the default launcher).
pub(crate) fn run_threads(req: &VerifyRequest, progress: Progress) -> Result<VerifyReport> {
    req.validate()?;
    req.check_memory()?;
    let timeout = checked_timeout(req.timeout_s)?;
    let ts = crate::transport::shm::in_process(req.arena_shape(req.ranks), timeout)?;
    run_ranks(
        ts.into_iter()
            .map(|t| Box::new(t) as Box<dyn Transport>)
            .collect(),
        req,
        "threads",
        progress,
    )
}

/// `Duration::from_secs_f64` panics on NaN, infinities, negatives and overflow.
pub fn checked_timeout(secs: f64) -> Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| RuntimeError::InvalidPlan(format!("timeout of {secs} s")))
}

/// Run `req` on a set of transports, one thread each; the root cause of a failure is
/// returned (not a secondary "aborted" error).
pub(crate) fn run_ranks(
    ts: Vec<Box<dyn Transport>>,
    req: &VerifyRequest,
    launch: &str,
    progress: Progress,
) -> Result<VerifyReport> {
    let results: Vec<Result<Option<VerifyReport>>> = std::thread::scope(|s| {
        let handles: Vec<_> = ts
            .into_iter()
            .map(|mut t| {
                s.spawn(move || {
                    let rank = t.rank();
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_rank(
                            &mut *t,
                            req,
                            launch,
                            if rank == 0 { progress } else { None },
                        )
                    }))
                    .unwrap_or_else(|_| {
                        Err(RuntimeError::PeerLost {
                            rank,
                            why: "its thread panicked".into(),
                        })
                    });
                    if r.is_err() {
                        t.abort(rank);
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                h.join().unwrap_or_else(|_| {
                    Err(RuntimeError::PeerLost {
                        rank: i,
                        why: "its thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    let mut report = None;
    let mut first_err = None;
    for r in results {
        match r {
            Ok(Some(rep)) => report = Some(rep),
            Ok(None) => {}
            Err(e) => {
                let secondary = matches!(&e, RuntimeError::PeerLost { why, .. } if why == "the job was aborted");
                if first_err.is_none()
                    || (!secondary
                        && matches!(&first_err, Some(RuntimeError::PeerLost { why, .. }) if why == "the job was aborted"))
                {
                    first_err = Some(e);
                }
            }
        }
    }
    match (first_err, report) {
        (Some(e), _) => Err(e),
        (None, Some(r)) => Ok(r),
        (None, None) => Err(RuntimeError::Launch("rank 0 returned no report".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed_cpus() -> Vec<usize> {
        use rustix::thread::{CpuSet, sched_getaffinity};
        let set = sched_getaffinity(None).unwrap();
        (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect()
    }

    #[test]
    fn the_arena_estimate_covers_the_shape_it_stands_for() {
        for (ranks, nchannels, max_bytes) in
            [(1, 1, 8), (2, 4, 1 << 20), (8, 7, 3 << 20), (3, 64, 5)]
        {
            let req = VerifyRequest {
                ranks,
                nchannels,
                max_bytes,
                ..VerifyRequest::default()
            };
            let shape = req.arena_shape(ranks);
            assert_eq!(
                req.arena_bytes().unwrap(),
                shape.total() as u64,
                "{ranks} {nchannels} {max_bytes}"
            );
            assert!(shape.channels >= ARENA_MIN_CHANNELS.max(nchannels));
        }
        let huge = VerifyRequest {
            ranks: usize::MAX,
            ..VerifyRequest::default()
        };
        assert_eq!(huge.arena_bytes(), None);
    }

    #[test]
    fn requests_past_the_limits_are_refused_before_allocating() {
        let req = |ranks, nchannels, max_bytes| VerifyRequest {
            ranks,
            nchannels,
            max_bytes,
            ..VerifyRequest::default()
        };
        // 4096 ranks need 4096^2 x 64 FIFOs of 257 KiB: about 270 TiB.
        let e = req(4096, 64, 8).check_memory().unwrap_err().to_string();
        assert!(
            e.contains("4096 ranks x 64 channels") && e.contains("limit of"),
            "{e}"
        );
        let e = req(2, 1, usize::MAX)
            .check_memory()
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than the limit of 16.0 GiB"), "{e}");
        assert!(req(usize::MAX, 1, 8).check_memory().is_err());
        assert!(req(2, 1, 1 << 20).check_memory().is_ok());
        assert!(req(0, 1, 8).validate().is_err());
        assert!(req(2, 0, 8).validate().is_err());
        for t in [f64::NAN, f64::INFINITY, -1.0, 0.0, 1e30, 86_401.0] {
            let r = VerifyRequest {
                timeout_s: t,
                ..VerifyRequest::default()
            };
            assert!(r.validate().is_err(), "{t}");
        }
        assert!(VerifyRequest::default().validate().is_ok());
    }

    #[test]
    fn mem_available_is_read_in_bytes() {
        let t = "MemTotal:       8000000 kB\nMemAvailable:    4000000 kB\n";
        assert_eq!(mem_available(t), Some(4_096_000_000));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn a_rank_is_bound_to_a_cpu_of_its_own_only_when_the_ranks_fit_and_for_the_run_only() {
        // On a thread of its own, so that a failure leaves the harness's threads alone.
        std::thread::spawn(|| {
            let cpus = allowed_cpus();
            {
                let _b = Bound::to_rank_cpu(1, cpus.len() + 1);
                assert_eq!(allowed_cpus(), cpus, "more ranks than CPUs: left alone");
            }
            {
                let _b = Bound::to_rank_cpu(1, cpus.len());
                assert_eq!(allowed_cpus(), [cpus[1 % cpus.len()]]);
            }
            // The next run's workers inherit this thread's CPUs: all of them again.
            assert_eq!(allowed_cpus(), cpus);
        })
        .join()
        .unwrap();
    }

    fn req(ranks: usize, colls: Vec<Collective>, dt: DataType, op: Reduction) -> VerifyRequest {
        VerifyRequest {
            ranks,
            collectives: colls,
            dtype: dt,
            op,
            min_bytes: 0,
            max_bytes: 70_000,
            step_factor: 7.0,
            iters: 2,
            warmup: 1,
            ..VerifyRequest::default()
        }
    }

    #[test]
    fn every_collective_algorithm_and_protocol_is_right_with_threads() {
        for n in [1, 2, 3, 8] {
            for algo in [Algorithm::Ring, Algorithm::Tree, Algorithm::Direct] {
                for proto in [Protocol::Simple, Protocol::Ll, Protocol::Ll128] {
                    if algo == Algorithm::Direct && proto != Protocol::Simple {
                        continue;
                    }
                    let mut r = req(
                        n,
                        Collective::RUN_ORDER.to_vec(),
                        DataType::F32,
                        Reduction::Sum,
                    );
                    r.algorithm = Some(algo);
                    r.protocol = Some(proto);
                    r.nchannels = 2;
                    r.root = n - 1;
                    let rep = run_threads(&r, None).unwrap();
                    assert_eq!(
                        rep.wrong_total(),
                        0,
                        "n={n} {algo:?} {proto:?}\n{}",
                        rep.render_text()
                    );
                    assert!(rep.rows.iter().all(|r| r.out_of_place.wrong == Some(0)));
                }
            }
        }
    }

    #[test]
    fn every_dtype_and_op_is_right_with_threads() {
        for dt in DataType::ALL {
            for op in Reduction::ALL {
                let mut r = req(
                    3,
                    vec![
                        Collective::AllReduce,
                        Collective::ReduceScatter,
                        Collective::Reduce,
                    ],
                    dt,
                    op,
                );
                r.min_bytes = 1;
                r.max_bytes = 5000;
                r.step_factor = 13.0;
                for algo in [Algorithm::Ring, Algorithm::Direct] {
                    r.algorithm = Some(algo);
                    let rep = run_threads(&r, None).unwrap();
                    assert_eq!(
                        rep.wrong_total(),
                        0,
                        "{dt:?} {op:?} {algo:?}\n{}",
                        rep.render_text()
                    );
                }
            }
        }
    }

    #[test]
    fn two_ranks_sharing_memory_are_probed_and_priced_by_their_placement() {
        let mut r = req(
            2,
            vec![Collective::AllReduce],
            DataType::F32,
            Reduction::Sum,
        );
        r.min_bytes = 1 << 10;
        r.max_bytes = 1 << 10;
        let plan = CollectivePlan::host_default(
            Collective::AllReduce,
            Algorithm::Direct,
            Protocol::Simple,
            2,
            1,
        );
        // Every placement but loaded has a prediction: whatever the probes see (even
        // load on a busy CI machine), the row is priced by the matching one.
        r.plans = vec![PlannedRow {
            collective: Collective::AllReduce,
            bytes: 1 << 10,
            plan,
            predicted_time_us: Some(9.0),
            by_placement: vec![(Placement::Near, 1.0), (Placement::Far, 3.0)],
        }];
        let rep = run_threads(&r, None).unwrap();
        let row = &rep.rows[0];
        let (before, after) = row.c2c_ns.unwrap();
        assert!(before > 0.0 && after > 0.0, "{:?}", row.c2c_ns);
        let p = row.placement.unwrap();
        assert_eq!(p, crate::hostmodel::placement(before, after));
        let want = match p {
            Placement::Near => (Some(p), 1.0),
            Placement::Far => (Some(p), 3.0),
            _ => (None, 9.0),
        };
        assert_eq!(
            (row.priced_as, row.predicted_time_us),
            (want.0, Some(want.1))
        );
        let j = serde_json::to_value(rep.to_json()).unwrap();
        assert_eq!(j["results"][0]["placement"], p.name());
        assert_eq!(j["results"][0]["c2c_ns"].as_array().unwrap().len(), 2);
        let priced = want.0.map_or("pooled", |q| q.name());
        assert_eq!(j["results"][0]["predicted_for"], priced);
        // Three ranks: no one latency to probe, nothing recorded, the pooled prediction.
        let mut r3 = r.clone();
        r3.ranks = 3;
        r3.plans.clear();
        let rep = run_threads(&r3, None).unwrap();
        assert_eq!((rep.rows[0].c2c_ns, rep.rows[0].placement), (None, None));
        let j = serde_json::to_value(rep.to_json()).unwrap();
        assert!(j["results"][0].get("placement").is_none());
    }

    /// A 2-rank DIRECT AllReduce float32 row: out-of-place `time_us` at `busbw`, and the
    /// (time, busbw) predicted.
    fn direct_allreduce(
        bytes: usize,
        time_us: f64,
        busbw: f64,
        predicted: Option<(f64, f64)>,
    ) -> VerifyRow {
        VerifyRow {
            collective: Collective::AllReduce,
            bytes,
            count: bytes / 4,
            dtype: DataType::F32,
            redop: Some(Reduction::Sum),
            root: -1,
            algo: Algorithm::Direct,
            proto: Protocol::Simple,
            nchannels: 1,
            out_of_place: Measured {
                time_us,
                algbw_gbps: busbw,
                busbw_gbps: busbw,
                wrong: Some(0),
            },
            in_place: None,
            predicted_time_us: predicted.map(|p| p.0),
            predicted_busbw_gbps: predicted.map(|p| p.1),
            c2c_ns: None,
            placement: None,
            priced_as: None,
            ceiling_busbw_gbps: None,
        }
    }

    /// Rows measured unpriced (a launcher job's rank 0 calibrates after the run) take their
    /// plan row's prediction in sweep order, and a probed row its placement's.
    #[test]
    fn rows_are_priced_after_the_run_in_sweep_order() {
        let mut r = req(
            2,
            vec![Collective::AllReduce],
            DataType::F32,
            Reduction::Sum,
        );
        (r.min_bytes, r.max_bytes, r.step_factor) = (1 << 20, 2 << 20, 2.0);
        let plan = CollectivePlan::host_default(
            Collective::AllReduce,
            Algorithm::Direct,
            Protocol::Simple,
            2,
            1,
        );
        for (b, t) in [(1 << 20, 80.0), (2 << 20, 160.0)] {
            r.plans.push(PlannedRow {
                collective: Collective::AllReduce,
                bytes: b,
                plan: plan.clone(),
                predicted_time_us: Some(t),
                by_placement: vec![(Placement::Near, t / 2.0)],
            });
        }
        let mut probed = direct_allreduce(2 << 20, 100.0, 10.0, None);
        probed.c2c_ns = Some((40.0, 45.0));
        let mut rep = VerifyReport {
            backend: "host".into(),
            launch: "env".into(),
            transport: TransportKind::InProcess,
            ranks: 2,
            rows: vec![direct_allreduce(1 << 20, 100.0, 10.0, None), probed],
            foreign_machine: None,
            notes: vec![],
            nccl: vec![],
        };
        rep.price(&r).unwrap();
        assert_eq!(rep.rows[0].predicted_time_us, Some(80.0));
        assert_eq!(rep.rows[0].priced_as, None);
        let b = rep.rows[0].predicted_busbw_gbps.unwrap();
        assert!((b - (1 << 20) as f64 / 80e-6 / 1e9).abs() < 1e-9, "{b}");
        assert_eq!(
            (rep.rows[1].priced_as, rep.rows[1].predicted_time_us),
            (Some(Placement::Near), Some(80.0))
        );
    }

    #[test]
    fn a_placement_without_its_own_prediction_keeps_the_pooled_one() {
        let mut row = direct_allreduce(1 << 20, 100.0, 10.5, Some((80.0, 13.1)));
        let near_only = [(Placement::Near, 50.0)];
        let mut far = row.clone();
        far.place((250.0, 260.0), &near_only, 2);
        assert_eq!(far.placement, Some(Placement::Far));
        assert_eq!((far.priced_as, far.predicted_time_us), (None, Some(80.0)));
        row.place((40.0, 45.0), &near_only, 2);
        assert_eq!(
            (row.priced_as, row.predicted_time_us),
            (Some(Placement::Near), Some(50.0))
        );
        // busbw of 1 MiB in 50 µs, AllReduce on 2 ranks (bus factor 1).
        let b = row.predicted_busbw_gbps.unwrap();
        assert!((b - (1 << 20) as f64 / 50e-6 / 1e9).abs() < 1e-9, "{b}");
        let text = VerifyReport {
            backend: "host".into(),
            launch: "threads".into(),
            transport: TransportKind::InProcess,
            ranks: 2,
            rows: vec![row, far],
            foreign_machine: None,
            notes: vec![],
            nccl: vec![],
        }
        .render_text();
        let cols = |r: &str| r.split_whitespace().last().unwrap().to_string();
        let rows: Vec<String> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(cols)
            .collect();
        assert_eq!(rows, ["near", "far*"], "{text}");
        assert!(
            text.contains("calibration measured too little in the far placement"),
            "{text}"
        );
    }

    #[test]
    fn text_and_json_follow_the_contract() {
        let mut r = req(
            2,
            vec![Collective::AllReduce],
            DataType::F32,
            Reduction::Sum,
        );
        r.plans = vec![PlannedRow {
            collective: Collective::AllReduce,
            bytes: 0,
            plan: CollectivePlan::host_default(
                Collective::AllReduce,
                Algorithm::Ring,
                Protocol::Ll,
                2,
                1,
            ),
            predicted_time_us: Some(1.0),
            by_placement: vec![],
        }];
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let prog = |done: usize, total: usize| {
            assert!(done <= total);
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        let rep = run_threads(&r, Some(&prog)).unwrap();
        assert_eq!(
            calls.load(std::sync::atomic::Ordering::Relaxed),
            rep.rows.len()
        );
        let text = rep.render_text();
        assert!(
            text.lines()
                .last()
                .unwrap()
                .starts_with("# Avg bus bandwidth")
        );
        assert!(text.contains("RING"));
        let j = serde_json::to_value(rep.to_json()).unwrap();
        assert_eq!(j["schema"], "topo.verify/v1");
        for k in [
            "bytes",
            "count",
            "type",
            "redop",
            "root",
            "algo",
            "proto",
            "time_us",
            "algbw_gbps",
            "busbw_gbps",
            "wrong",
            "predicted_time_us",
            "predicted_busbw_gbps",
        ] {
            assert!(j["results"][0].get(k).is_some(), "missing {k}");
        }
        assert_eq!(j["results"][0]["predicted_time_us"], 1.0);
        assert!(j["avg_busbw_gbps"].is_number());
    }

    #[test]
    fn large_single_copy_messages_use_streaming_stores_and_stay_right() {
        let mut r = req(
            2,
            vec![
                Collective::AllReduce,
                Collective::AllGather,
                Collective::Broadcast,
            ],
            DataType::F32,
            Reduction::Sum,
        );
        r.min_bytes = 8 << 20;
        r.max_bytes = (8 << 20) + 4;
        r.algorithm = Some(Algorithm::Direct);
        r.iters = 1;
        r.warmup = 0;
        let rep = run_threads(&r, None).unwrap();
        assert_eq!(rep.wrong_total(), 0, "{}", rep.render_text());
    }

    #[test]
    fn shared_single_copy_work_is_right_for_every_collective() {
        for n in [1, 2, 3, 8] {
            for op in [Reduction::Sum, Reduction::Avg] {
                let mut r = req(n, Collective::RUN_ORDER.to_vec(), DataType::F32, op);
                r.algorithm = Some(Algorithm::Direct);
                r.shared_min_bytes = 0;
                r.root = n / 2;
                r.max_bytes = 600_000;
                let rep = run_threads(&r, None).unwrap();
                assert_eq!(rep.wrong_total(), 0, "n={n} {op:?}\n{}", rep.render_text());
            }
        }
    }

    #[test]
    fn sizes_follow_b_e_f() {
        let r = VerifyRequest {
            min_bytes: 8,
            max_bytes: 64,
            step_factor: 2.0,
            ..VerifyRequest::default()
        };
        assert_eq!(r.sizes().unwrap(), vec![8, 16, 32, 64]);
        let r = VerifyRequest {
            min_bytes: 8,
            max_bytes: 8,
            ..VerifyRequest::default()
        };
        assert_eq!(r.sizes().unwrap(), vec![8]);
    }

    #[test]
    fn model_agreement_counts_rows_from_1_mib_within_the_tolerance() {
        let row = |bytes: usize, busbw: f64, pred: Option<f64>| {
            direct_allreduce(bytes, 1.0, busbw, pred.map(|b| (1.0, b)))
        };
        let mut rep = VerifyReport {
            backend: "host".into(),
            launch: "threads".into(),
            transport: TransportKind::InProcess,
            ranks: 2,
            rows: vec![
                row(8, 0.01, Some(5.0)),       // below 1 MiB: not counted
                row(1 << 20, 10.0, Some(8.5)), // 1.18: within
                row(2 << 20, 6.0, Some(8.5)),  // 0.71: outside
                row(4 << 20, 10.0, None),      // no prediction: not counted
                row(8 << 20, 7.0, Some(9.0)),  // 0.78: within
            ],
            foreign_machine: None,
            notes: vec![],
            nccl: vec![],
        };
        let (within, total, worst) = rep.model_agreement(1 << 20, 0.25).unwrap();
        assert_eq!((within, total), (2, 3));
        assert!((worst - 6.0 / 8.5).abs() < 1e-12);
        assert!(
            rep.render_text()
                .contains("# Model: 2 of 3 rows >= 1 MiB within 25%")
        );
        assert!(
            rep.render_text()
                .lines()
                .last()
                .unwrap()
                .starts_with("# Avg bus")
        );
        rep.rows.retain(|r| r.bytes < 1 << 20);
        assert!(rep.model_agreement(1 << 20, 0.25).is_none());
        assert!(!rep.render_text().contains("# Model"));
    }
}
