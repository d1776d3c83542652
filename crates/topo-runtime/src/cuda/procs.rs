//! Multi-process CUDA jobs: `--launch processes` (rank 0 starts the others as `topo worker`)
//! and `--launch env` on one host (ranks started by torchrun, srun or mpirun). Each process
//! is one rank on GPU `rank / ranks_per_gpu`; the ranks meet through the launcher's
//! rendezvous, hand each other their communication memory ([`super::exchange`]: cuMem fds,
//! IPC handles or SHM memfds), map the peers' memory here, and run the same kernels as the
//! threads backend: the FIFO flags live in that peer-mapped memory, so the kernels cannot
//! tell processes from threads. Rank 0 gathers the figures and reports.
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::device::{self, CudaOptions, Gpu, Shared};
use super::exchange::{self, Export, Link, Received};
use super::pack::Arena;
use super::peer::{self, DevMem, IpcMapped, ShmSeg, Vmm};
use super::{Probe, guarded};
use crate::error::{Result, RuntimeError};
use crate::launch::Backend;
use crate::launch::{self, EnvInfo};
use crate::transport::TransportKind;
use crate::verify::{Progress, VerifyReport, VerifyRequest};
use crate::wire::{read_frame_by, write_frame};

/// What rank 0 tells the others after the rendezvous.
#[derive(Debug, Serialize, Deserialize)]
struct ProcJob {
    request: VerifyRequest,
    ranks_per_gpu: usize,
    force_shm: bool,
    force_ipc: bool,
    launch: String,
}

/// How long the exchange may wait for a peer: its NVRTC compile comes first.
fn exchange_timeout(req: &VerifyRequest) -> Duration {
    Duration::from_secs_f64(req.timeout_s.max(1.0) + 120.0)
}

/// How long a barrier may wait: the slowest rank's timed loop of the largest size.
fn barrier_timeout(req: &VerifyRequest) -> Duration {
    Duration::from_secs_f64(req.timeout_s.max(1.0) * 2.0 + 30.0)
}

fn unavailable(e: String) -> RuntimeError {
    RuntimeError::Unsupported(format!("cuda backend unavailable: {e}"))
}

/// Enough GPUs for `n` ranks at `rpg` per GPU.
fn check_gpus(probe: &Probe, n: usize, rpg: usize) -> Result<()> {
    let ngpu = n.div_ceil(rpg.max(1));
    if n < 2 || ngpu > probe.gpus.len() {
        return Err(RuntimeError::InvalidPlan(format!(
            "{n} ranks at {rpg} per GPU need {ngpu} GPUs (and a process job 2 ranks or more); this machine shows {}",
            probe.gpus.len()
        )));
    }
    Ok(())
}

/// The CUDA backend of a [`crate::job::Job`]: threads of this process drive every GPU, or
/// each process is one rank and the ranks hand each other their GPU memory after the
/// rendezvous.
pub(crate) struct Cuda(pub(crate) CudaOptions);

impl Backend for Cuda {
    fn worker_env(&self) -> &'static [(&'static str, &'static str)] {
        &[(launch::ENV_BACKEND, "cuda")]
    }

    fn tag(&self) -> &'static str {
        "-cuda"
    }

    /// The exchange that follows waits this long too: each rank's NVRTC compile comes first.
    fn join_wait(&self, own: Duration) -> Duration {
        own.max(Duration::from_secs(1)) + Duration::from_secs(120)
    }

    fn linger(&self, own: Duration) -> Duration {
        own.max(Duration::from_secs(1)) * 2 + Duration::from_secs(30)
    }

    fn preflight(&self, req: &VerifyRequest) -> Result<()> {
        let probe = super::probe().map_err(unavailable)?;
        check_gpus(&probe, req.ranks, self.0.ranks_per_gpu)
    }

    fn over_tcp(&self, env: &EnvInfo, _forced: Option<bool>) -> Result<bool> {
        if !env.single_host {
            return Err(RuntimeError::Unsupported(format!(
                "cuda backend across hosts: {} ranks span several hosts and topo has no GPU network transport (InfiniBand verbs is not built); run on one host, or --backend host",
                env.launcher
            )));
        }
        Ok(false)
    }

    fn threads(&self, req: &VerifyRequest, _progress: Progress) -> Result<VerifyReport> {
        device::run_verify_cuda(req, &self.0)
    }

    fn lead(
        &self,
        streams: Vec<UnixStream>,
        _pids: &[i32],
        (req, launch_name): (&VerifyRequest, &str),
        token: &str,
        _own: Duration,
        _progress: Progress,
    ) -> Result<VerifyReport> {
        lead(streams, req, &self.0, token, launch_name)
    }

    fn follow(
        &self,
        s: UnixStream,
        deadline: Instant,
        (rank, world): (usize, usize),
        token: &str,
        own: Duration,
    ) -> Result<()> {
        follow(s, deadline, own, token, rank, world)
    }
}

/// Rank 0: accept the others, send them the job, run rank 0, gather, report.
fn lead(
    mut streams: Vec<UnixStream>,
    req: &VerifyRequest,
    opts: &CudaOptions,
    token: &str,
    launch_name: &str,
) -> Result<VerifyReport> {
    let job = ProcJob {
        request: req.clone(),
        ranks_per_gpu: opts.ranks_per_gpu.max(1),
        force_shm: opts.force_shm,
        force_ipc: opts.force_ipc,
        launch: launch_name.into(),
    };
    for s in &mut streams {
        s.set_read_timeout(Some(exchange_timeout(req)))
            .map_err(|e| RuntimeError::io("socket timeout", e))?;
        launch::accept_reply(s)?;
        write_frame(s, &job)?;
    }
    let (mine, link, extra) = run_rank(&job, opts.copy_ceiling, token, 0, Side::Leader(streams))?;
    let mut results = vec![mine];
    results.extend(link.gather()?);
    let (transport, notes) = extra.unwrap_or((TransportKind::CudaCuMem, Vec::new()));
    let rows = device::plan_rows(req)?;
    let mut rep = device::assemble(req, &rows, &results, transport, launch_name, notes);
    if let Some(n) = super::sharing::sharing_note(opts.ranks_per_gpu.max(1), &opts.sharing) {
        rep.notes.push(n);
    }
    if opts.compare_nccl {
        rep.notes.push(
            "--compare nccl: runs with --launch threads (one process drives NCCL on every GPU)"
                .into(),
        );
    }
    Ok(rep)
}

/// Any rank but 0: read the job (checked like the host backend's, its timeout clamped to
/// this rank's own `own`), run this rank, send the figures.
fn follow(
    mut s: UnixStream,
    deadline: Instant,
    own: Duration,
    token: &str,
    rank: usize,
    world: usize,
) -> Result<()> {
    let mut job: ProcJob = read_frame_by(&mut s, deadline, crate::wire::MAX_FRAME)?;
    launch::vet_request(&mut job.request, world, own)?;
    if !(1..=world).contains(&job.ranks_per_gpu) {
        return Err(RuntimeError::Rendezvous(format!(
            "rank 0's job: {} ranks per GPU",
            job.ranks_per_gpu
        )));
    }
    s.set_read_timeout(Some(exchange_timeout(&job.request)))
        .map_err(|e| RuntimeError::io("socket timeout", e))?;
    let (mine, link, _) = run_rank(&job, false, token, rank, Side::Member(s))?;
    link.send_result(&mine)
}

/// The streams before the exchange (it needs them mutable; the barrier then shares them).
enum Side {
    Leader(Vec<UnixStream>),
    Member(UnixStream),
}

/// What rank 0 adds to the report: the job's transport and the notes.
type Extra = Option<(TransportKind, Vec<String>)>;

/// A peer's memory mapped in this process, kept until the rank is done.
#[allow(dead_code)] // held for their Drop (unmap, close, unregister)
enum Mapped {
    CuMem(Vmm),
    Ipc(IpcMapped),
    Shm(ShmSeg),
}

/// This rank's own communication memory and what to tell the peers about it.
#[allow(dead_code)] // held for their Drop
enum Own {
    CuMem(Vmm),
    Ipc(DevMem),
    Shm(ShmSeg),
}

impl Own {
    fn ptr(&self) -> u64 {
        match self {
            Own::CuMem(v) => v.ptr,
            Own::Ipc(d) => d.ptr,
            Own::Shm(s) => s.ptr,
        }
    }
}

/// Allocate this rank's communication memory for `kind` on GPU `gpu` (its context bound).
fn allocate(
    kind: TransportKind,
    gpu: usize,
    bytes: usize,
    token: &str,
) -> Result<(Own, Export, Option<OwnedFd>)> {
    Ok(match kind {
        TransportKind::CudaCuMem => {
            let v = Vmm::create(gpu, bytes).map_err(|e| {
                RuntimeError::Device(format!(
                    "{e} (cuMem VMM refused here: TOPO_CUDA_TRANSPORT=ipc uses legacy IPC handles)"
                ))
            })?;
            let fd = v.export_fd()?;
            let ex = Export::CuMem {
                bytes: v.bytes,
                gpu,
            };
            (Own::CuMem(v), ex, Some(fd))
        }
        TransportKind::CudaIpc => {
            let d = DevMem::zeroed(bytes)?;
            let handle = peer::ipc_handle(&d)?.to_vec();
            let ex = Export::Ipc {
                handle,
                bytes: d.bytes,
            };
            (Own::Ipc(d), ex, None)
        }
        _ => {
            let (seg, fd) = ShmSeg::create(bytes, &token.chars().take(32).collect::<String>())?;
            let ex = Export::Shm { bytes: seg.bytes };
            (Own::Shm(seg), ex, Some(fd))
        }
    })
}

/// Map a peer's memory here, for GPU `gpu`.
fn import(r: &Received, gpu: usize, rank: usize) -> Result<Mapped> {
    let need_fd = || {
        r.fd.as_ref().ok_or_else(|| {
            RuntimeError::Rendezvous(format!("rank {rank}'s memory came without its descriptor"))
        })
    };
    let ctx = |e: RuntimeError| RuntimeError::Device(format!("map rank {rank}'s memory: {e}"));
    Ok(match &r.export {
        Export::CuMem { bytes, .. } => {
            Mapped::CuMem(Vmm::import(need_fd()?, *bytes, gpu).map_err(ctx)?)
        }
        Export::Ipc { handle, .. } => {
            let h: [u8; 64] = handle
                .as_slice()
                .try_into()
                .map_err(|_| RuntimeError::Rendezvous(format!("rank {rank}'s IPC handle")))?;
            Mapped::Ipc(IpcMapped::open(&h).map_err(ctx)?)
        }
        Export::Shm { bytes } => Mapped::Shm(ShmSeg::map(need_fd()?, *bytes).map_err(ctx)?),
    })
}

fn mapped_ptr(m: &Mapped) -> u64 {
    match m {
        Mapped::CuMem(v) => v.ptr,
        Mapped::Ipc(i) => i.ptr,
        Mapped::Shm(s) => s.ptr,
    }
}

/// Run one rank of a process job; on failure the others are told (socket and abort word).
fn run_rank(
    job: &ProcJob,
    copy_ceiling: bool,
    token: &str,
    rank: usize,
    side: Side,
) -> Result<(Vec<Vec<f64>>, Link, Extra)> {
    // A failure before the link exists closes the streams, which the others see at once.
    guarded("cuda rank", || {
        rank_body(job, copy_ceiling, token, rank, side)
    })
}

fn rank_body(
    job: &ProcJob,
    copy_ceiling: bool,
    token: &str,
    rank: usize,
    mut side: Side,
) -> Result<(Vec<Vec<f64>>, Link, Extra)> {
    let req = &job.request;
    let (n, rpg) = (req.ranks, job.ranks_per_gpu.max(1));
    let my_gpu = rank / rpg;
    let probe = super::probe().map_err(unavailable)?;
    check_gpus(&probe, n, rpg)?;
    let ngpu = n.div_ceil(rpg);
    let (gpus, mut notes) = device::open_gpus(req, &probe, &probe.gpus[my_gpu..=my_gpu])?;
    let g: &Gpu = &gpus[0];
    let mut pairs = Vec::new();
    for a in 0..ngpu {
        for b in a..ngpu {
            if a != b || ngpu == 1 {
                pairs.push(peer::pair_caps(a, b)?);
            }
        }
    }
    let kind = peer::choose_processes(&pairs, job.force_shm, job.force_ipc);
    let rows = device::plan_rows(req)?;
    let nch = rows.iter().map(|r| r.plan.nchannels).max().unwrap_or(1);
    let arena = Arena::new(n, nch, req.storage_bytes());
    g.ctx
        .bind_to_thread()
        .map_err(super::drv("cuCtxSetCurrent"))?;
    let (own, export, fd) = allocate(kind, my_gpu, arena.comm_total, token)?;
    let wait = barrier_timeout(req);
    let got = match &mut side {
        Side::Leader(v) => exchange::lead(v, token, export, fd.as_ref(), wait)?,
        Side::Member(s) => exchange::follow(s, token, (rank, n), export, fd.as_ref(), wait)?,
    };
    drop(fd);
    let mut mapped = Vec::new();
    let mut comm = vec![0u64; n];
    for (r, rec) in got.iter().enumerate() {
        if r == rank {
            comm[r] = own.ptr();
            continue;
        }
        let m = import(rec, my_gpu, r)?;
        comm[r] = mapped_ptr(&m);
        mapped.push(m);
    }
    drop(got);
    let data_mem = DevMem::zeroed(arena.data_total)?;
    let mut data = vec![0u64; n];
    data[rank] = data_mem.ptr;
    let link = match side {
        Side::Leader(v) => Link::Leader(v),
        Side::Member(s) => Link::Member(s),
    }
    .with_timeout(barrier_timeout(req))?;
    // Everyone has mapped everyone's memory before any kernel touches it.
    link.barrier()?;
    if copy_ceiling && rank == 0 {
        notes.push(device::copy_ceiling(g, req.max_bytes)?.0);
    }
    let sh = Shared {
        req,
        gpus: &gpus,
        gpu_base: my_gpu,
        rpg,
        rows: &rows,
        arena: &arena,
        data,
        abort: comm[0] + arena.abort_off as u64,
        comm,
        gate: &link,
        sys_fence: device::needs_sys_fence(ngpu, kind == TransportKind::Shm),
    };
    let out = guarded("cuda rank", || device::rank_main(&sh, rank));
    let mine = match out {
        Ok(v) => v,
        Err(e) => {
            device::raise_abort(&sh);
            link.fail();
            return Err(e);
        }
    };
    drop(sh);
    notes.push(format!(
        "{n} ranks as {n} processes, {rpg} per GPU, on {ngpu} GPU(s); transport {}",
        kind.name()
    ));
    notes.push(peer::pairs_note(n, rpg, kind));
    // How processes that share a GPU ran (MPS or time slices) is rank 0's to say: it
    // decided before any context (`sharing::prepare_mps`); `lead` adds the line.
    drop(data_mem);
    drop(mapped);
    drop(own);
    let extra = (rank == 0).then_some((kind, notes));
    Ok((mine, link, extra))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Job;
    use crate::launch::{Launch, ProcessSpec};

    #[test]
    fn a_process_job_needs_two_ranks_and_enough_gpus() {
        let p = Probe {
            driver: 13000,
            gpus: vec![super::super::GpuInfo {
                ordinal: 0,
                name: "GPU".into(),
                arch: 90,
                sms: 132,
            }],
        };
        assert!(check_gpus(&p, 2, 2).is_ok());
        let e = check_gpus(&p, 2, 1).unwrap_err().to_string();
        assert!(e.contains("need 2 GPUs") && e.contains("shows 1"), "{e}");
        assert!(check_gpus(&p, 1, 1).is_err());
    }

    #[test]
    fn the_job_crosses_the_socket_intact() {
        let job = ProcJob {
            request: VerifyRequest {
                ranks: 4,
                ..VerifyRequest::default()
            },
            ranks_per_gpu: 2,
            force_shm: false,
            force_ipc: true,
            launch: "processes".into(),
        };
        let mut buf = Vec::new();
        write_frame(&mut buf, &job).unwrap();
        let back: ProcJob = crate::wire::read_frame(&mut buf.as_slice()).unwrap();
        assert_eq!(back.request.ranks, 4);
        assert_eq!(back.ranks_per_gpu, 2);
        assert!(back.force_ipc && !back.force_shm);
    }

    #[test]
    fn env_ranks_across_hosts_are_refused_before_touching_a_gpu() {
        let env = EnvInfo {
            launcher: "slurm",
            rank: 1,
            world: 4,
            local_rank: 1,
            single_host: false,
            master_addr: "gpu01".into(),
            master_port: 20001,
            token: "slurm-7.0".into(),
        };
        let req = VerifyRequest {
            ranks: 4,
            ..VerifyRequest::default()
        };
        let e = Job::new(&req, Launch::Env)
            .cuda(CudaOptions::default())
            .as_rank(env)
            .run()
            .unwrap_err();
        assert!(matches!(e, RuntimeError::Unsupported(_)), "{e}");
        assert!(e.to_string().contains("span several hosts"), "{e}");
    }

    #[test]
    fn without_a_driver_processes_fail_cleanly() {
        if super::super::loader::probe_driver().is_ok() {
            eprintln!("skipped: a CUDA driver is present here");
            return;
        }
        let spec = ProcessSpec {
            program: "/bin/false".into(),
            args: vec![],
            envs: vec![],
        };
        let req = VerifyRequest {
            ranks: 2,
            ..VerifyRequest::default()
        };
        let e = Job::new(&req, Launch::Processes(spec))
            .cuda(CudaOptions::default())
            .run()
            .unwrap_err();
        assert!(matches!(e, RuntimeError::Unsupported(_)), "{e}");
        assert!(e.to_string().contains("libcuda.so.1 not found"), "{e}");
    }
}
