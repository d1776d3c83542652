//! One way to run a verify sweep: a [`Job`] is a request, how its ranks start ([`Launch`]:
//! threads, worker processes, or the ranks of torchrun, Slurm or Open MPI) and which backend
//! moves the bytes (host memory, or CUDA with [`Job::cuda`]), with one [`Job::run`].
//!
//! The launchers are shared by both backends: workers are started and reaped by
//! `launch::with_workers`, every rank meets rank 0 through `crate::rendezvous`, and only
//! what happens after the rendezvous differs, behind the `Backend` trait.
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::cuda::device::CudaOptions;
use crate::error::{Result, RuntimeError};
use crate::launch::{self, Backend, EnvInfo, Launch};
use crate::verify::{Progress, VerifyReport, VerifyRequest};

/// A verify sweep ready to run; see the module's documentation.
pub struct Job<'a> {
    req: &'a VerifyRequest,
    launch: Launch,
    cuda: Option<CudaOptions>,
    env: Option<EnvInfo>,
    tcp: Option<bool>,
    timeout: Option<Duration>,
    progress: Progress<'a>,
}

impl<'a> Job<'a> {
    /// `req` with its ranks started as `launch`, on the host backend.
    pub fn new(req: &'a VerifyRequest, launch: Launch) -> Job<'a> {
        Job {
            req,
            launch,
            cuda: None,
            env: None,
            tcp: None,
            timeout: None,
            progress: None,
        }
    }

    /// Run on the CUDA backend.
    pub fn cuda(mut self, opts: CudaOptions) -> Self {
        self.cuda = Some(opts);
        self
    }

    /// Call `f(rows_done, rows_total)` on rank 0 after each row (host backend).
    pub fn progress(mut self, f: &'a (dyn Fn(usize, usize) + Sync)) -> Self {
        self.progress = Some(f);
        self
    }

    /// Run as this rank of a launcher's job instead of reading the environment (the launch
    /// is then env whatever was asked).
    pub fn as_rank(mut self, env: EnvInfo) -> Self {
        self.env = Some(env);
        self
    }

    /// Whether env-launched ranks meet and talk over TCP (host backend); by default when they
    /// span hosts or `TOPO_TRANSPORT=tcp`.
    pub fn tcp(mut self, yes: bool) -> Self {
        self.tcp = Some(yes);
        self
    }

    /// This rank's own timeout for the rendezvous and the transport of a process or env job
    /// (the request's by default).
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }

    /// Run the sweep. Rank 0 (and every thread or process job) returns the report; the other
    /// ranks of an env job return `None` and should print nothing.
    pub fn run(&self) -> Result<Option<VerifyReport>> {
        let backend: Box<dyn Backend> = match &self.cuda {
            Some(o) => Box::new(crate::cuda::procs::Cuda(o.clone())),
            None => Box::new(Host),
        };
        let b = &*backend;
        let env = match (&self.env, &self.launch) {
            (Some(e), _) => Some(e.clone()),
            (None, Launch::Env) => Some(EnvInfo::detect(&|k| std::env::var(k).ok())?.ok_or_else(|| RuntimeError::Launch("--launch env: no torchrun, Slurm or Open MPI variables (RANK/WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/SIZE)".into()))?),
            (None, Launch::Auto) => EnvInfo::detect(&|k| std::env::var(k).ok())?,
            (None, _) => None,
        };
        if let Some(env) = env {
            return self.run_env(b, &env);
        }
        let Launch::Processes(spec) = &self.launch else {
            return b.threads(self.req, self.progress).map(Some);
        };
        let req = self.req;
        let own = self.own()?;
        b.preflight(req)?;
        let waits = (b.join_wait(own), b.linger(own));
        launch::with_workers(req, spec, b.worker_env(), waits, |streams, pids, token| {
            b.lead(
                streams,
                &pids,
                (req, "processes"),
                token,
                own,
                self.progress,
            )
        })
        .map(Some)
    }

    /// This rank's own timeout.
    fn own(&self) -> Result<Duration> {
        match self.timeout {
            Some(t) => Ok(t),
            None => crate::verify::checked_timeout(self.req.timeout_s),
        }
    }

    /// Rank `env.rank` of a job started by a launcher: on one host the ranks meet on an
    /// abstract Unix socket named after the launcher's job, across hosts over TCP.
    fn run_env(&self, b: &dyn Backend, env: &EnvInfo) -> Result<Option<VerifyReport>> {
        let tcp = b.over_tcp(env, self.tcp)?;
        if env.rank == 0 && self.req.ranks != env.world {
            return Err(RuntimeError::Launch(format!(
                "{} says world size {}, the request is for {} ranks",
                env.launcher, env.world, self.req.ranks
            )));
        }
        let own = self.own()?;
        let mut req = self.req.clone();
        req.ranks = env.world;
        // The launcher placed the ranks; binding them again could stack them on one CPU.
        req.pin_cpus = false;
        if tcp {
            return launch::run_tcp(&req, env, own, self.progress);
        }
        let name = launch::unix_name(&format!("{}-{}{}", env.token, env.master_port, b.tag()));
        let wait = b.join_wait(own);
        let (rank, world, token) = (env.rank, env.world, env.token.as_str());
        if rank == 0 {
            b.preflight(&req)?;
            let listener = launch::bind_unix(&name)?;
            let (streams, pids) = launch::accept_local(&listener, token, world, &mut [], wait)?;
            drop(listener);
            return b
                .lead(streams, &pids, (&req, "env"), token, own, self.progress)
                .map(Some);
        }
        let (s, deadline) = launch::join_local(&name, token, rank, world, wait)?;
        b.follow(s, deadline, (rank, world), token, own)?;
        Ok(None)
    }
}

/// The host backend: shared memory on one host (one memfd arena), TCP across hosts.
struct Host;

impl Backend for Host {
    fn worker_env(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    fn tag(&self) -> &'static str {
        ""
    }

    fn join_wait(&self, own: Duration) -> Duration {
        own
    }

    fn linger(&self, own: Duration) -> Duration {
        own
    }

    fn over_tcp(&self, env: &EnvInfo, forced: Option<bool>) -> Result<bool> {
        Ok(forced.unwrap_or_else(|| !env.single_host || launch::tcp_forced()))
    }

    fn threads(&self, req: &VerifyRequest, progress: Progress) -> Result<VerifyReport> {
        crate::verify::run_threads(req, progress)
    }

    fn lead(
        &self,
        streams: Vec<UnixStream>,
        pids: &[i32],
        job: (&VerifyRequest, &str),
        token: &str,
        own: Duration,
        progress: Progress,
    ) -> Result<VerifyReport> {
        launch::lead_shm(streams, pids, job, token, own, progress)?
            .ok_or_else(|| RuntimeError::Launch("rank 0 returned no report".into()))
    }

    fn follow(
        &self,
        s: UnixStream,
        deadline: Instant,
        rank: (usize, usize),
        _token: &str,
        own: Duration,
    ) -> Result<()> {
        launch::follow_shm(s, deadline, rank, own)
    }
}

/// Entry point of a worker process of either backend (the hidden `topo` worker subcommand
/// calls this). Returns `Ok(false)` when the process was not started as a worker.
pub fn worker_main() -> Result<bool> {
    launch::worker_main(worker_backend().as_ref())
}

/// The backend a worker process was started for ([`launch::ENV_BACKEND`]).
pub(crate) fn worker_backend() -> Box<dyn Backend> {
    if std::env::var(launch::ENV_BACKEND).is_ok_and(|b| b == "cuda") {
        Box::new(crate::cuda::procs::Cuda(CudaOptions::default()))
    } else {
        Box::new(Host)
    }
}
