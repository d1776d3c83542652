//! The verify sweep on GPUs: one host thread per rank (like nccl-tests `-g`), rank `r` on GPU
//! `r / ranks_per_gpu`, each rank's kernels on its own stream, timed with CUDA events, the
//! outputs checked on the device against the expected values the host backend uses.
use std::ffi::{CString, c_void};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use cudarc::driver::sys::{self, CUresult};
use cudarc::driver::{CudaContext, CudaStream, result};

use super::kernels::{self, CacheKey, THREADS};
use super::nccl::{self, Nccl};
use super::nvrtc::Nvrtc;
use super::pack::{self, Arena, DevArgs, DevConn, DevStep};
use super::peer::{self, CommMem, DevMem, HostMem};
use super::{Probe, drv, guarded};
use crate::error::{Result, RuntimeError};
use crate::schedule::{Layout, schedule};
use crate::transport::TransportKind;
use crate::types::{Collective, CollectivePlan, DataType, Reduction};
use crate::verify::{self, NcclRow, VerifyReport, VerifyRequest};

/// What the CUDA backend adds to a [`VerifyRequest`].
#[derive(Debug, Clone, Default)]
pub struct CudaOptions {
    /// Ranks sharing one GPU (`--ranks-per-gpu K`): rank r runs on GPU r / K.
    pub ranks_per_gpu: usize,
    /// `--compare nccl`: run NCCL's collective on the same sizes (one rank per GPU only).
    pub compare_nccl: bool,
    /// Measure the device-to-device copy ceiling on GPU 0 first.
    pub copy_ceiling: bool,
    /// Put the FIFOs in pinned host memory even where P2P works (`TOPO_CUDA_TRANSPORT=shm`).
    pub force_shm: bool,
    /// Process jobs: legacy IPC handles even where cuMem works (`TOPO_CUDA_TRANSPORT=ipc`).
    pub force_ipc: bool,
    /// How processes that share a GPU run (`sharing::prepare_mps`, decided before any
    /// context); the report says it.
    pub sharing: super::sharing::Sharing,
}

/// Forces a CUDA transport for measuring it: `shm` (pinned host memory FIFOs) or `ipc`
/// (legacy IPC handles); any other value forces nothing.
pub const ENV_CUDA_TRANSPORT: &str = "TOPO_CUDA_TRANSPORT";

impl CudaOptions {
    /// The options of `ranks_per_gpu`, `compare_nccl` and `copy_ceiling`, how ranks share a
    /// GPU (decided before the driver starts), with the transport `TOPO_CUDA_TRANSPORT`
    /// forces (read here alone).
    pub fn new(
        ranks_per_gpu: usize,
        compare_nccl: bool,
        copy_ceiling: bool,
        sharing: super::sharing::Sharing,
    ) -> CudaOptions {
        let forced = std::env::var(ENV_CUDA_TRANSPORT).unwrap_or_default();
        CudaOptions {
            ranks_per_gpu: ranks_per_gpu.max(1),
            compare_nccl,
            copy_ceiling,
            force_shm: forced == "shm",
            force_ipc: forced == "ipc",
            sharing,
        }
    }
}

fn check(r: CUresult, what: &str) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(RuntimeError::Device(format!("{what}: {r:?}")))
    }
}

/// One GPU's context and kernels.
pub(super) struct Gpu {
    pub(super) ordinal: usize,
    name: String,
    pub(super) ctx: Arc<CudaContext>,
    prim: sys::CUfunction,
    count_wrong: sys::CUfunction,
    copy: sys::CUfunction,
    module: sys::CUmodule,
    /// CTAs of the primitive kernel this GPU holds at once (occupancy x SMs).
    pub(super) resident_ctas: usize,
}

// SAFETY: CUDA driver handles (module, functions) may be used from any thread that has bound
// the context they belong to, which every user here does first.
unsafe impl Send for Gpu {}
// SAFETY: as above; the driver serialises what needs it.
unsafe impl Sync for Gpu {}

impl Drop for Gpu {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: loaded once by `Gpu::open`, unloaded once.
            unsafe {
                sys::cuModuleUnload(self.module);
            }
        }
    }
}

impl Gpu {
    pub(super) fn open(
        info: &super::GpuInfo,
        image: &[u8],
        op: Reduction,
        dt: DataType,
    ) -> Result<Gpu> {
        let ctx = CudaContext::new(info.ordinal).map_err(drv("cuDevicePrimaryCtxRetain"))?;
        ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))?;
        // SAFETY: `image` is a CUBIN NVRTC made for this device's architecture.
        let module = unsafe { result::module::load_data(image.as_ptr().cast()) }
            .map_err(drv("cuModuleLoadData"))?;
        let get = |name: &str| -> Result<sys::CUfunction> {
            let c = CString::new(name)
                .map_err(|_| RuntimeError::Device(format!("kernel name {name}")))?;
            // SAFETY: the module is loaded; the name is one the source defines.
            unsafe { result::module::get_function(module, c) }.map_err(drv("cuModuleGetFunction"))
        };
        let (prim, count_wrong, copy) = (
            get(&kernels::prim_kernel(op, dt))?,
            get("topo_count_wrong")?,
            get("topo_copy")?,
        );
        load_now(&[prim, count_wrong, copy])?;
        Ok(Gpu {
            ordinal: info.ordinal,
            name: info.name.clone(),
            resident_ctas: occupancy(prim)? * info.sms.max(1) as usize,
            prim,
            count_wrong,
            copy,
            ctx,
            module,
        })
    }
}

/// Load the kernels onto the device now. With lazy loading (the default from CUDA 12.2) the
/// first launch of a kernel may wait for the kernels already running, and those spin-wait
/// on ranks whose host threads would be stuck in that launch. cuFuncLoad is CUDA 12.4+.
fn load_now(fs: &[sys::CUfunction]) -> Result<()> {
    let mut v = 0;
    // SAFETY: writes one int.
    let r = unsafe { sys::cuDriverGetVersion(&mut v) };
    check(r, "cuDriverGetVersion")?;
    if v < 12040 {
        return Ok(());
    }
    for &f in fs {
        // SAFETY: `f` is a function of a loaded module in the current context.
        check(unsafe { sys::cuFuncLoad(f) }, "cuFuncLoad")?;
    }
    Ok(())
}

/// CTAs of `f` one SM holds at once at THREADS threads.
fn occupancy(f: sys::CUfunction) -> Result<usize> {
    let mut n = 0;
    // SAFETY: writes one int; `f` is loaded in the current context.
    let r =
        unsafe { sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut n, f, THREADS as i32, 0) };
    check(r, "cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
    Ok(n.max(0) as usize)
}

/// The driver feeds a context's streams through CUDA_DEVICE_MAX_CONNECTIONS hardware queues
/// (8 unless set, at most 32), and streams beyond that share one: a rank's kernel then waits
/// behind another rank's kernel that waits for it. One queue stays for the default stream.
/// Measured on an H200 (2026-12-04): 2 and 4 ranks per GPU ran every check; 8 stalled.
/// `sharing::prepare_queues` sets the variable before the context where it can; this is the
/// check, after, that the context got enough (the variable unset and the default too few
/// means it could not be set: refused, naming the value).
pub(super) fn check_connections(rpg: usize, var: Option<String>) -> Result<()> {
    use super::sharing::{Queues, queues};
    match queues(rpg, var.as_deref()) {
        Queues::Enough(_) => Ok(()),
        Queues::Set(n) => Err(RuntimeError::InvalidPlan(format!(
            "{rpg} ranks per GPU need {n} hardware queues and the driver gives 8: set CUDA_DEVICE_MAX_CONNECTIONS={n} (at most 32)"
        ))),
        Queues::Refuse(e) => Err(RuntimeError::InvalidPlan(e)),
    }
}

/// Ranks that share a GPU wait on each other inside their kernels, so all their CTAs must be
/// resident together; more would hang until the kernels' timeout.
pub(super) fn check_residency(resident: usize, rpg: usize, nch: usize) -> Result<()> {
    let need = rpg * nch;
    if rpg <= 1 || need <= resident {
        return Ok(());
    }
    Err(RuntimeError::InvalidPlan(format!(
        "{rpg} ranks x {nch} channels need {need} CTAs resident at once on one GPU, which holds {resident}: use --nchannels {} or fewer, or fewer --ranks-per-gpu",
        (resident / rpg).max(1)
    )))
}

/// What the ranks wait at between phases: threads of one process ([`Gate`]) or processes
/// (the socket barrier of [`super::exchange::Link`]). A failed rank breaks it for all.
pub(super) trait Barrier: Sync {
    fn wait(&self) -> Result<()>;
    fn fail(&self);
}

impl Barrier for Gate {
    fn wait(&self) -> Result<()> {
        Gate::wait(self)
    }
    fn fail(&self) {
        Gate::fail(self)
    }
}

impl Barrier for super::exchange::Link {
    fn wait(&self) -> Result<()> {
        self.barrier()
    }
    fn fail(&self) {
        super::exchange::Link::fail(self)
    }
}

/// A barrier for the rank threads that a failed rank can break (the others then return
/// instead of waiting forever), bounded by the request's timeout.
struct Gate {
    n: usize,
    state: Mutex<(usize, u64, bool)>,
    cv: Condvar,
    timeout: Duration,
}

impl Gate {
    fn new(n: usize, timeout: Duration) -> Gate {
        Gate {
            n,
            state: Mutex::new((0, 0, false)),
            cv: Condvar::new(),
            timeout,
        }
    }

    fn wait(&self) -> Result<()> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if g.2 {
            return Err(RuntimeError::Device("another rank failed".into()));
        }
        let generation = g.1;
        g.0 += 1;
        if g.0 == self.n {
            g.0 = 0;
            g.1 += 1;
            self.cv.notify_all();
            return Ok(());
        }
        let (g, to) = self
            .cv
            .wait_timeout_while(g, self.timeout, |g| g.1 == generation && !g.2)
            .unwrap_or_else(|e| e.into_inner());
        if g.2 {
            return Err(RuntimeError::Device("another rank failed".into()));
        }
        if to.timed_out() {
            return Err(RuntimeError::Timeout {
                what: "the other ranks' threads".into(),
                secs: self.timeout.as_secs_f64(),
            });
        }
        Ok(())
    }

    fn fail(&self) {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        g.2 = true;
        self.cv.notify_all();
    }
}

/// One (collective, size) of the sweep.
pub(super) struct Row {
    coll: Collective,
    count: usize,
    pub(super) plan: CollectivePlan,
    predicted: Option<f64>,
    forms: Vec<bool>,
}

/// Everything the ranks share: in a process job, each process's own view (its one GPU, the
/// other ranks' memory mapped here).
pub(super) struct Shared<'a> {
    pub(super) req: &'a VerifyRequest,
    /// The GPUs this process opened: rank r runs on `gpus[r / rpg - gpu_base]`.
    pub(super) gpus: &'a [Gpu],
    pub(super) gpu_base: usize,
    pub(super) rpg: usize,
    pub(super) rows: &'a [Row],
    pub(super) arena: &'a Arena,
    /// Rank r's data allocation (only the ranks this process runs are used).
    pub(super) data: Vec<u64>,
    /// Rank r's communication memory as this process addresses it.
    pub(super) comm: Vec<u64>,
    pub(super) abort: u64,
    pub(super) gate: &'a dyn Barrier,
    /// Whether the kernels publish flags at system scope (`DevArgs::sys_fence`).
    pub(super) sys_fence: bool,
}

/// System-scope fences where a peer is another GPU or the FIFOs are pinned host memory; GPU
/// scope when every rank of the job runs on one GPU with device-memory FIFOs (issue 47: the
/// fence no wider than the transport needs).
pub(super) fn needs_sys_fence(ngpu: usize, host_fifos: bool) -> bool {
    ngpu > 1 || host_fifos
}

/// `topo verify --backend cuda`: the whole sweep on this machine's GPUs.
pub(crate) fn run_verify_cuda(req: &VerifyRequest, opts: &CudaOptions) -> Result<VerifyReport> {
    let probe = super::probe()
        .map_err(|e| RuntimeError::Unsupported(format!("cuda backend unavailable: {e}")))?;
    guarded("cuda backend", || run(req, opts, &probe))
}

fn run(req: &VerifyRequest, opts: &CudaOptions, probe: &Probe) -> Result<VerifyReport> {
    let n = req.ranks;
    let rpg = opts.ranks_per_gpu.max(1);
    let ngpu = n.div_ceil(rpg);
    if n < 1 || ngpu > probe.gpus.len() {
        return Err(RuntimeError::InvalidPlan(format!(
            "{n} ranks at {rpg} per GPU need {ngpu} GPUs; this machine shows {}",
            probe.gpus.len()
        )));
    }
    let (gpus, mut notes) = open_gpus(req, probe, &probe.gpus[..ngpu])?;
    let transport = connect(&gpus, opts.force_shm)?;
    notes.push(format!(
        "{n} ranks, {rpg} per GPU, on {ngpu} GPU(s); transport {}",
        transport.name()
    ));
    notes.push(peer::pairs_note(n, rpg, transport));
    let rows = plan_rows(req)?;
    let nch = rows.iter().map(|r| r.plan.nchannels).max().unwrap_or(1);
    check_residency(gpus[0].resident_ctas, rpg, nch)?;
    check_connections(rpg, std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").ok())?;
    let arena = Arena::new(n, nch, req.storage_bytes());
    let mut data_mem = Vec::new();
    let mut comm_mem = Vec::new();
    for r in 0..n {
        let g = &gpus[r / rpg];
        g.ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))?;
        data_mem.push(DevMem::zeroed(arena.data_total)?);
        comm_mem.push(if transport == TransportKind::Shm {
            CommMem::Host(HostMem::zeroed(arena.comm_total)?)
        } else {
            CommMem::Device(DevMem::zeroed(arena.comm_total)?)
        });
    }
    let mut copy_gbps = None;
    if opts.copy_ceiling {
        let (note, gbps) = copy_ceiling(&gpus[0], req.max_bytes)?;
        notes.push(note);
        copy_gbps = Some(gbps);
    }
    let comm: Vec<u64> = comm_mem.iter().map(|c| c.ptr()).collect();
    let gate = Gate::new(n, Duration::from_secs_f64(req.timeout_s.max(1.0) * 2.0));
    let sh = Shared {
        req,
        gpus: &gpus,
        rpg,
        rows: &rows,
        arena: &arena,
        data: data_mem.iter().map(|d| d.ptr).collect(),
        abort: comm[0] + arena.abort_off as u64,
        comm,
        gpu_base: 0,
        gate: &gate,
        sys_fence: needs_sys_fence(ngpu, transport == TransportKind::Shm),
    };
    let per_rank: Vec<Result<Vec<Vec<f64>>>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|r| {
                let sh = &sh;
                s.spawn(move || {
                    let out = guarded("cuda rank", || rank_main(sh, r));
                    if out.is_err() {
                        sh.gate.fail();
                        raise_abort(sh);
                    }
                    out
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(RuntimeError::Device("a rank thread panicked".into())))
            })
            .collect()
    });
    // The first real failure, not the "another rank failed" of the others.
    let mut results = Vec::new();
    let mut first_err = None;
    for r in per_rank {
        match r {
            Ok(v) => results.push(v),
            Err(e) => {
                let secondary = e.to_string().contains("another rank failed");
                if first_err.is_none()
                    || (!secondary
                        && first_err.as_ref().is_some_and(|f: &RuntimeError| {
                            f.to_string().contains("another rank failed")
                        }))
                {
                    first_err = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let mut report = assemble(req, &rows, &results, transport, "threads", notes);
    if ngpu == 1
        && let Some(copy) = copy_gbps
    {
        with_ceiling(&mut report, copy, n);
    }
    if opts.compare_nccl {
        compare_nccl(req, &gpus, rpg, &rows, &mut report)?;
    }
    drop(data_mem);
    drop(comm_mem);
    Ok(report)
}

/// NVRTC, then the kernels compiled (or taken from the cache) and loaded on each of `infos`.
/// Also returns the notes saying which NVRTC, driver and GPUs.
pub(super) fn open_gpus(
    req: &VerifyRequest,
    probe: &Probe,
    infos: &[super::GpuInfo],
) -> Result<(Vec<Gpu>, Vec<String>)> {
    let nvrtc = Nvrtc::load()
        .map_err(|e| RuntimeError::Unsupported(format!("cuda backend unavailable: {e}")))?;
    let mut notes = vec![format!(
        "nvrtc {}.{} from {}; driver {}.{}",
        nvrtc.version.0,
        nvrtc.version.1,
        nvrtc.from.display(),
        probe.driver / 1000,
        (probe.driver % 1000) / 10
    )];
    let cache = kernels::cache_dir(&|k| std::env::var(k).ok());
    let mut gpus = Vec::new();
    for info in infos {
        let key = CacheKey {
            arch: info.arch,
            driver: probe.driver,
            nvrtc: nvrtc.version,
            source: kernels::source_hash(),
            op: req.op,
            dtype: req.dtype,
        };
        let (image, cached) =
            kernels::cubin(&nvrtc, &key, cache.as_deref()).map_err(RuntimeError::Device)?;
        notes.push(format!(
            "gpu {}: {} (sm_{}), kernels {}",
            info.ordinal,
            info.name,
            info.arch,
            if cached {
                "from the cache"
            } else {
                "compiled by nvrtc"
            }
        ));
        gpus.push(Gpu::open(info, &image, req.op, req.dtype)?);
    }
    Ok((gpus, notes))
}

/// Each row's copy ceiling in busbw, for `ranks` ranks that share one GPU whose copy rate is
/// `copy_gbps` (issue 47: the text prints it and measured busbw over it).
pub(super) fn with_ceiling(report: &mut VerifyReport, copy_gbps: f64, ranks: usize) {
    for r in &mut report.rows {
        r.ceiling_busbw_gbps = Some(super::model::ceiling_busbw(copy_gbps, r.collective, ranks));
    }
}

/// The report from every rank's per-row figures (`results[rank][row]`).
pub(super) fn assemble(
    req: &VerifyRequest,
    rows: &[Row],
    results: &[Vec<Vec<f64>>],
    transport: TransportKind,
    launch: &str,
    notes: Vec<String>,
) -> VerifyReport {
    let n = req.ranks;
    let mut out_rows = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let all: Vec<Vec<f64>> = results.iter().map(|v| v[i].clone()).collect();
        out_rows.push(verify::measured_row(
            req,
            row.coll,
            row.count,
            n,
            &row.plan,
            row.predicted,
            row.forms.len(),
            &all,
        ));
    }
    VerifyReport {
        backend: "cuda".into(),
        launch: launch.into(),
        transport,
        ranks: n,
        rows: out_rows,
        foreign_machine: req.foreign_machine.clone(),
        notes,
        nccl: Vec::new(),
    }
}

/// Peer access between every pair of GPUs in use, or SHM when a pair lacks it.
fn connect(gpus: &[Gpu], force_shm: bool) -> Result<TransportKind> {
    let mut pairs = Vec::new();
    for a in gpus {
        for b in gpus {
            if a.ordinal < b.ordinal || gpus.len() == 1 {
                pairs.push(peer::pair_caps(a.ordinal, b.ordinal)?);
            }
        }
    }
    let kind = peer::choose_job(&pairs, false, force_shm);
    if kind == TransportKind::CudaP2p {
        for a in gpus {
            a.ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))?;
            for b in gpus {
                if a.ordinal != b.ordinal {
                    peer::enable_peer_access(&b.ctx)?;
                }
            }
        }
    }
    Ok(kind)
}

/// The sweep's rows: the plan of each (collective, size), as the host backend picks them
/// (rings and trees only: DIRECT is the host's single-copy algorithm).
pub(super) fn plan_rows(req: &VerifyRequest) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let es = req.dtype.size();
    for &coll in &req.collectives {
        for bytes in req.sizes()? {
            let count = coll.count_for_size(bytes, req.ranks, es);
            let (plan, predicted) = verify::plan_for(req, coll, bytes, false)?;
            let mut forms = vec![false];
            if req.in_place && coll.has_in_place() {
                forms.push(true);
            }
            rows.push(Row {
                coll,
                count,
                plan,
                predicted,
                forms,
            });
        }
    }
    Ok(rows)
}

pub(super) fn raise_abort(sh: &Shared) {
    if sh.gpus[0].ctx.bind_to_thread().is_ok() {
        // SAFETY: the abort word is 4 bytes inside rank 0's communication allocation.
        unsafe {
            sys::cuMemsetD32_v2(sh.abort, 1, 1);
        }
    }
}

/// Launch `f` with one argument block per parameter.
///
/// # Safety
/// `params` match the kernel's parameters in number, order and size.
unsafe fn launch(
    f: sys::CUfunction,
    grid: u32,
    stream: &CudaStream,
    params: &mut [*mut c_void],
) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        result::launch_kernel(
            f,
            (grid, 1, 1),
            (THREADS, 1, 1),
            0,
            stream.cu_stream(),
            params,
        )
    }
    .map_err(drv("cuLaunchKernel"))
}

fn htod(dst: u64, bytes: &[u8]) -> Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    // SAFETY: `dst` has room for `bytes` (the arena layout guarantees it).
    unsafe { result::memcpy_htod_sync(dst, bytes) }.map_err(drv("cuMemcpyHtoD"))
}

/// Copies and status reads of a running rank go through its own stream: work on the legacy
/// default stream can share a hardware queue with another rank's spinning kernel and wait
/// behind it.
fn htod_on(stream: &CudaStream, dst: u64, bytes: &[u8]) -> Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    // SAFETY: `dst` has room for `bytes`; `bytes` outlives the synchronize below.
    unsafe { result::memcpy_htod_async(dst, bytes, stream.cu_stream()) }
        .map_err(drv("cuMemcpyHtoDAsync"))?;
    stream.synchronize().map_err(drv("cuStreamSynchronize"))
}

fn dtoh_on<const N: usize, T: Copy + Default>(stream: &CudaStream, src: u64) -> Result<[T; N]> {
    let mut v = [T::default(); N];
    // SAFETY: `src` holds N values of T; `v` outlives the synchronize below.
    unsafe { result::memcpy_dtoh_async(&mut v, src, stream.cu_stream()) }
        .map_err(drv("cuMemcpyDtoHAsync"))?;
    stream.synchronize().map_err(drv("cuStreamSynchronize"))?;
    Ok(v)
}

fn status(sh: &Shared, rank: usize, stream: &CudaStream) -> Result<()> {
    let st: [u32; 3] = dtoh_on(stream, sh.comm[rank] + sh.arena.status_off as u64)?;
    match pack::status_error(st, rank) {
        None => Ok(()),
        Some(e) => Err(RuntimeError::Device(e)),
    }
}

/// This rank's launch tables in one device allocation: steps, channel starts, receive and
/// send connections. Returns the allocation and the four addresses.
fn upload_tables(
    steps: &[DevStep],
    starts: &[u32],
    recv: &[DevConn],
    send: &[DevConn],
) -> Result<(DevMem, [u64; 4])> {
    let parts: [&[u8]; 4] = [
        bytes_of(steps),
        bytes_of(starts),
        bytes_of(recv),
        bytes_of(send),
    ];
    let mut offs = [0usize; 4];
    let mut at = 0;
    for (i, p) in parts.iter().enumerate() {
        offs[i] = at;
        at = (at + p.len()).div_ceil(64) * 64;
    }
    let mem = DevMem::zeroed(at)?;
    for (i, p) in parts.iter().enumerate() {
        htod(mem.ptr + offs[i] as u64, p)?;
    }
    let addr = offs.map(|o| mem.ptr + o as u64);
    Ok((mem, addr))
}

fn bytes_of<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: T is one of this module's repr(C) plain-data structs or u32: every byte is
    // initialised (no padding: their fields are laid out without gaps, see pack's tests).
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

/// One rank: every row, every form: fill, warm up, time, check. Returns per row
/// [seconds, wrong] for each form.
pub(super) fn rank_main(sh: &Shared, rank: usize) -> Result<Vec<Vec<f64>>> {
    let req = sh.req;
    let g = &sh.gpus[rank / sh.rpg - sh.gpu_base];
    g.ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))?;
    let stream = g.ctx.new_stream().map_err(drv("cuStreamCreate"))?;
    let ev0 = g
        .ctx
        .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(drv("cuEventCreate"))?;
    let ev1 = g
        .ctx
        .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(drv("cuEventCreate"))?;
    let (n, dt, es) = (req.ranks, req.dtype, req.dtype.size());
    let data = sh.data[rank];
    let storage = data + sh.arena.storage_off as u64;
    let timeout_ns = (req.timeout_s.max(0.1) * 1e9) as u64;
    let wrong_ptr = sh.comm[rank] + sh.arena.wrong_off as u64;
    let mut out = Vec::new();
    for row in sh.rows {
        let plan = &row.plan;
        let chunk = pack::chunk_elems(plan.protocol, plan.chunk_bytes, dt);
        let steps = schedule(plan, rank, row.count, chunk)?;
        let (recv_t, send_t) = sh.arena.conn_tables(rank, &sh.comm, plan.protocol);
        let mut local = Vec::new();
        for &in_place in &row.forms {
            let layout = Layout::new(row.coll, row.count, n, rank, in_place);
            let (dsteps, starts) = pack::pack_steps(&steps, &layout, dt, n, plan.nchannels)?;
            let mut starts_full = starts.clone();
            starts_full.resize(plan.nchannels + 1, *starts.last().unwrap_or(&0));
            let (_tables, [a_steps, a_starts, a_recv, a_send]) =
                upload_tables(&dsteps, &starts_full, &recv_t, &send_t)?;
            let mut args: DevArgs = sh.arena.args(
                sh.sys_fence,
                data,
                sh.comm[rank],
                sh.abort,
                plan.protocol,
                a_steps,
                a_starts,
                a_recv,
                a_send,
                timeout_ns,
            );
            let mut run_once = || -> Result<()> {
                let mut p = [(&mut args as *mut DevArgs).cast::<c_void>()];
                // SAFETY: the primitive kernels take one DevArgs by value.
                unsafe { launch(g.prim, plan.nchannels as u32, &stream, &mut p) }
            };
            let fill = filled(&layout, row.coll, dt, req.op, rank);
            htod_on(&stream, storage, &fill)?;
            sh.gate.wait()?;
            for _ in 0..req.warmup {
                run_once()?;
            }
            stream.synchronize().map_err(drv("cuStreamSynchronize"))?;
            status(sh, rank, &stream)?;
            sh.gate.wait()?;
            ev0.record(&stream).map_err(drv("cuEventRecord"))?;
            for _ in 0..req.iters.max(1) {
                run_once()?;
            }
            ev1.record(&stream).map_err(drv("cuEventRecord"))?;
            ev1.synchronize().map_err(drv("cuEventSynchronize"))?;
            status(sh, rank, &stream)?;
            let ms = ev0.elapsed_ms(&ev1).map_err(drv("cuEventElapsedTime"))? as f64;
            let secs = ms / 1e3 / req.iters.max(1) as f64;
            let mut wrong = 0u64;
            if req.check {
                sh.gate.wait()?;
                htod_on(&stream, storage, &fill)?;
                let want =
                    verify::expected(&layout, row.coll, dt, req.op, rank, n, req.root, row.count);
                if let Some(w) = &want {
                    htod_on(&stream, data + sh.arena.expect_off as u64, w)?;
                }
                sh.gate.wait()?;
                run_once()?;
                stream.synchronize().map_err(drv("cuStreamSynchronize"))?;
                status(sh, rank, &stream)?;
                if want.is_some() {
                    wrong = count_wrong_on_device(
                        g,
                        &stream,
                        storage + (layout.recv_off * es) as u64,
                        data + sh.arena.expect_off as u64,
                        layout.recv_len,
                        es,
                        wrong_ptr,
                    )?;
                }
            }
            local.push(secs);
            local.push(wrong as f64);
            sh.gate.wait()?;
        }
        out.push(local);
    }
    Ok(out)
}

/// The host's check pattern for this rank's buffers (the same values `--backend host` uses).
fn filled(layout: &Layout, coll: Collective, dt: DataType, op: Reduction, rank: usize) -> Vec<u8> {
    let bytes = layout.total * dt.size();
    let mut words = vec![0u64; bytes.div_ceil(8)];
    let buf = &mut bytemuck_bytes(&mut words)[..bytes];
    verify::fill(buf, layout, coll, dt, op, rank);
    buf.to_vec()
}

fn bytemuck_bytes(w: &mut [u64]) -> &mut [u8] {
    // SAFETY: u64 has no padding; the byte view covers exactly the same memory.
    unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr().cast(), w.len() * 8) }
}

/// `#wrong` on the device: elements of the receive buffer that differ from the expected.
#[allow(clippy::too_many_arguments)]
fn count_wrong_on_device(
    g: &Gpu,
    stream: &CudaStream,
    got: u64,
    want: u64,
    count: usize,
    es: usize,
    wrong_ptr: u64,
) -> Result<u64> {
    // SAFETY: 8 bytes at the #wrong word of this rank's communication allocation.
    let r = unsafe { sys::cuMemsetD32Async(wrong_ptr, 0, 2, stream.cu_stream()) };
    check(r, "cuMemsetD32Async")?;
    let (mut a, mut b, mut c, mut e, mut w) = (got, want, count as u64, es as u32, wrong_ptr);
    let mut p = [
        (&mut a as *mut u64).cast::<c_void>(),
        (&mut b as *mut u64).cast(),
        (&mut c as *mut u64).cast(),
        (&mut e as *mut u32).cast(),
        (&mut w as *mut u64).cast(),
    ];
    let grid = count.div_ceil(THREADS as usize).clamp(1, 1024) as u32;
    // SAFETY: topo_count_wrong(const u8*, const u8*, u64, u32, u64*).
    unsafe { launch(g.count_wrong, grid, stream, &mut p) }?;
    let v: [u64; 1] = dtoh_on(stream, wrong_ptr)?;
    Ok(v[0])
}

/// The device-to-device copy ceiling on one GPU: cuMemcpyDtoD and topo's own copy kernel
/// over the sweep's largest size (at least 64 MiB, at most 1 GiB), bytes copied per second.
pub(super) fn copy_ceiling(g: &Gpu, max_bytes: usize) -> Result<(String, f64)> {
    let bytes = max_bytes.clamp(64 << 20, 1 << 30) / 16 * 16;
    g.ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))?;
    let stream = g.ctx.new_stream().map_err(drv("cuStreamCreate"))?;
    let (src, dst) = (DevMem::zeroed(bytes)?, DevMem::zeroed(bytes)?);
    let ev0 = g
        .ctx
        .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(drv("cuEventCreate"))?;
    let ev1 = g
        .ctx
        .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(drv("cuEventCreate"))?;
    let iters = 10;
    let time = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        for _ in 0..3 {
            f()?;
        }
        ev0.record(&stream).map_err(drv("cuEventRecord"))?;
        for _ in 0..iters {
            f()?;
        }
        ev1.record(&stream).map_err(drv("cuEventRecord"))?;
        ev1.synchronize().map_err(drv("cuEventSynchronize"))?;
        let ms = ev0.elapsed_ms(&ev1).map_err(drv("cuEventElapsedTime"))? as f64;
        Ok(bytes as f64 * iters as f64 / (ms / 1e3) / 1e9)
    };
    let memcpy = time(&mut || {
        // SAFETY: both buffers hold `bytes`.
        unsafe { result::memcpy_dtod_async(dst.ptr, src.ptr, bytes, stream.cu_stream()) }
            .map_err(drv("cuMemcpyDtoDAsync"))
    })?;
    let (mut d, mut s, mut n16) = (dst.ptr, src.ptr, (bytes / 16) as u64);
    let kernel = time(&mut || {
        let mut p = [
            (&mut d as *mut u64).cast::<c_void>(),
            (&mut s as *mut u64).cast(),
            (&mut n16 as *mut u64).cast(),
        ];
        // SAFETY: topo_copy(uint4*, const uint4*, u64).
        unsafe { launch(g.copy, 1024, &stream, &mut p) }
    })?;
    let note = format!(
        "copy ceiling on gpu {} ({}): cuMemcpyDtoD {:.1} GB/s, topo_copy {:.1} GB/s ({} MiB, bytes copied per second, memory traffic is twice that)",
        g.ordinal,
        g.name,
        memcpy,
        kernel,
        bytes >> 20
    );
    Ok((note, memcpy))
}

/// `--compare nccl`: NCCL's collective on buffers of the same sizes, one rank per GPU, timed
/// the same way; a note says why when it cannot run.
fn compare_nccl(
    req: &VerifyRequest,
    gpus: &[Gpu],
    rpg: usize,
    rows: &[Row],
    report: &mut VerifyReport,
) -> Result<()> {
    if rpg > 1 {
        report.notes.push("--compare nccl: NCCL refuses two ranks on one GPU; the copy ceiling is the reference here".into());
        return Ok(());
    }
    let nccl = match Nccl::load() {
        Ok(l) => l,
        Err(e) => {
            report.notes.push(format!(
                "--compare nccl: {e} (set TOPO_NCCL to libnccl.so.2)"
            ));
            return Ok(());
        }
    };
    report.notes.push(format!(
        "nccl {} from {}",
        nccl::version_string(nccl.version),
        nccl.from.display()
    ));
    let devs: Vec<i32> = gpus.iter().map(|g| g.ordinal as i32).collect();
    let comms = nccl.init_all(&devs)?;
    let res = (|| -> Result<()> {
        let mut streams = Vec::new();
        let mut events = Vec::new();
        for g in gpus {
            g.ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))?;
            streams.push(g.ctx.new_stream().map_err(drv("cuStreamCreate"))?);
            events.push((
                g.ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(drv("cuEventCreate"))?,
                g.ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(drv("cuEventCreate"))?,
            ));
        }
        let raw: Vec<*mut c_void> = streams.iter().map(|s| s.cu_stream().cast()).collect();
        let n = gpus.len();
        let es = req.dtype.size();
        for (row, out) in rows.iter().zip(report.rows.clone()) {
            if !nccl::comparable(row.coll) {
                continue;
            }
            let (sl, rl) = row.coll.buffer_elems(row.count, n);
            let mut bufs = Vec::new();
            for g in gpus {
                g.ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))?;
                bufs.push((DevMem::zeroed(sl * es)?, DevMem::zeroed(rl * es)?));
            }
            let send: Vec<u64> = bufs.iter().map(|b| b.0.ptr).collect();
            let recv: Vec<u64> = bufs.iter().map(|b| b.1.ptr).collect();
            let go = || {
                nccl.enqueue(
                    row.coll, &comms, &raw, &send, &recv, row.count, req.dtype, req.op, req.root,
                )
            };
            for _ in 0..req.warmup {
                go()?;
            }
            for (i, (e0, _)) in events.iter().enumerate() {
                e0.record(&streams[i]).map_err(drv("cuEventRecord"))?;
            }
            for _ in 0..req.iters.max(1) {
                go()?;
            }
            let mut total = 0.0;
            for (i, (e0, e1)) in events.iter().enumerate() {
                e1.record(&streams[i]).map_err(drv("cuEventRecord"))?;
                e1.synchronize().map_err(drv("cuEventSynchronize"))?;
                total += e0.elapsed_ms(e1).map_err(drv("cuEventElapsedTime"))? as f64;
            }
            let secs = total / n as f64 / 1e3 / req.iters.max(1) as f64;
            let size = row.coll.size_bytes(row.count, n, es);
            let busbw = if secs > 0.0 {
                size as f64 / secs / 1e9 * row.coll.bus_factor(n)
            } else {
                0.0
            };
            report.nccl.push(NcclRow {
                collective: row.coll,
                bytes: size,
                time_us: secs * 1e6,
                busbw_gbps: busbw,
                ratio: if busbw > 0.0 {
                    out.out_of_place.busbw_gbps / busbw
                } else {
                    0.0
                },
            });
        }
        Ok(())
    })();
    nccl.destroy(&comms);
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_rank_releases_the_others() {
        let g = Arc::new(Gate::new(3, Duration::from_secs(5)));
        let g2 = g.clone();
        let h = std::thread::spawn(move || g2.wait());
        std::thread::sleep(Duration::from_millis(50));
        g.fail();
        assert!(
            h.join()
                .unwrap()
                .unwrap_err()
                .to_string()
                .contains("another rank failed")
        );
    }

    #[test]
    fn the_gate_opens_when_all_arrive_and_times_out_otherwise() {
        let g = Arc::new(Gate::new(2, Duration::from_millis(200)));
        let g2 = g.clone();
        let h = std::thread::spawn(move || g2.wait());
        g.wait().unwrap();
        h.join().unwrap().unwrap();
        let e = g.wait().unwrap_err();
        assert!(matches!(e, RuntimeError::Timeout { .. }), "{e}");
    }

    #[test]
    fn without_a_driver_the_backend_says_what_is_missing() {
        // On machines with a GPU this runs nothing.
        if super::super::loader::probe_driver().is_ok() {
            eprintln!("skipped: a CUDA driver is present here");
            return;
        }
        let e = run_verify_cuda(&VerifyRequest::default(), &CudaOptions::default()).unwrap_err();
        assert!(matches!(e, RuntimeError::Unsupported(_)));
        assert!(e.to_string().contains("libcuda.so.1 not found"), "{e}");
    }
}

#[cfg(test)]
mod residency_tests {
    use super::check_residency;

    #[test]
    fn fences_are_system_wide_only_off_this_gpu() {
        use super::needs_sys_fence;
        assert!(!needs_sys_fence(1, false));
        assert!(needs_sys_fence(1, true));
        assert!(needs_sys_fence(2, false));
    }

    #[test]
    fn ranks_sharing_a_gpu_must_fit_its_resident_ctas() {
        // An H200 at 2 CTAs per SM holds 264.
        assert!(check_residency(264, 8, 32).is_ok());
        let e = check_residency(264, 8, 64).unwrap_err().to_string();
        assert!(
            e.contains("512 CTAs") && e.contains("--nchannels 33"),
            "{e}"
        );
        // One rank per GPU never waits on a rank of its own GPU.
        assert!(check_residency(10, 1, 64).is_ok());
    }

    #[test]
    fn ranks_sharing_a_gpu_need_a_hardware_queue_each() {
        use super::check_connections;
        assert!(check_connections(4, None).is_ok());
        let e = check_connections(8, None).unwrap_err().to_string();
        assert!(e.contains("CUDA_DEVICE_MAX_CONNECTIONS=9"), "{e}");
        assert!(check_connections(8, Some("32".into())).is_ok());
        assert!(check_connections(31, Some("32".into())).is_ok());
        let e = check_connections(40, Some("32".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 31"), "{e}");
        assert!(check_connections(8, Some("junk".into())).is_err());
    }
}
