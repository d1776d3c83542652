//! Launchers and rendezvous.
//!
//! * **threads**: N ranks as threads of this process ([`crate::verify::run_threads`]).
//! * **processes**: this process is rank 0 and starts N-1 copies of a program (the `topo`
//!   binary's hidden worker subcommand, which calls [`worker_main`]); they meet on an
//!   abstract Unix socket, present the job token, and receive the memfd of the shared arena
//!   with SCM_RIGHTS.
//! * **env**: ranks started by torchrun, Slurm or Open MPI ([`EnvInfo::detect`]). Ranks on one
//!   host meet the same way as processes; ranks on several hosts meet over TCP at
//!   MASTER_ADDR:MASTER_PORT and use the TCP transport.
//!
//! Every rendezvous has a deadline, checks the job token and the world size, and refuses and
//! logs anything else that connects while the job goes on.
use std::ffi::OsString;
use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Result, RuntimeError};
use crate::transport::Transport;
use crate::transport::shm::{Arena, ArenaShape, ShmTransport};
use crate::transport::tcp::TcpTransport;
use crate::verify::{
    Progress, VerifyReport, VerifyRequest, run_rank, run_rank_progress, run_threads_progress,
};

/// Environment variables of the processes launcher.
pub const ENV_SOCKET: &str = "TOPO_RT_SOCKET";
/// Rank of a worker process.
pub const ENV_RANK: &str = "TOPO_RT_RANK";
/// World size of a worker process.
pub const ENV_WORLD: &str = "TOPO_RT_WORLD";
/// Job token (also honoured in env mode, where it overrides the launcher's job id).
pub const ENV_TOKEN: &str = "TOPO_JOB_TOKEN";
/// `cuda` in a worker of `--backend cuda --launch processes` (the worker subcommand then
/// calls `cuda::procs::worker_main` instead of [`worker_main`]).
pub const ENV_BACKEND: &str = "TOPO_RT_BACKEND";
/// Force the TCP transport in env mode (`TOPO_TRANSPORT=tcp`).
pub const ENV_TRANSPORT: &str = "TOPO_TRANSPORT";

/// How to start the worker processes of `--launch processes`.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// The program (normally `std::env::current_exe()`).
    pub program: PathBuf,
    /// Its arguments (normally the hidden worker subcommand).
    pub args: Vec<OsString>,
    /// Extra environment for the workers.
    pub envs: Vec<(OsString, OsString)>,
}

/// How ranks are started.
#[derive(Debug, Clone)]
pub enum Launch {
    Threads,
    Processes(ProcessSpec),
    Env,
    /// Env when a launcher's variables are present, threads otherwise.
    Auto,
}

pub use crate::wire::{log_refusal, read_frame, write_frame};

#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    token: String,
    rank: usize,
    world: usize,
    pid: i32,
    /// TCP rendezvous only: the rank's data listener.
    data: Option<SocketAddr>,
}

#[derive(Debug, Serialize, Deserialize)]
enum Reply {
    Refused(String),
    Accepted,
}

#[derive(Debug, Serialize, Deserialize)]
struct Job {
    shape: Option<ArenaShape>,
    pids: Vec<i32>,
    addrs: Vec<SocketAddr>,
    request: VerifyRequest,
    launch: String,
}

/// What a rank learns from the environment of an existing launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvInfo {
    /// `torchrun`, `slurm`, `openmpi` or `topo`.
    pub launcher: &'static str,
    pub rank: usize,
    pub world: usize,
    pub local_rank: usize,
    /// Whether every rank runs on this host.
    pub single_host: bool,
    pub master_addr: String,
    pub master_port: u16,
    pub token: String,
}

/// Expand a Slurm host list: `gpu[01-04,07],cpu5` → gpu01 gpu02 gpu03 gpu04 gpu07 cpu5.
pub fn expand_nodelist(list: &str) -> Result<Vec<String>> {
    let bad =
        |why: &str| RuntimeError::Launch(format!("cannot read SLURM_JOB_NODELIST {list:?}: {why}"));
    let mut out = Vec::new();
    // Split on commas outside brackets.
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(bad("unbalanced ]"));
        }
    }
    if depth != 0 {
        return Err(bad("unbalanced ["));
    }
    parts.push(&list[start..]);
    for p in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        let mut hosts = vec![String::new()];
        let mut rest = p;
        while !rest.is_empty() {
            if let Some(open) = rest.find('[') {
                let close = rest[open..].find(']').ok_or_else(|| bad("unbalanced ["))? + open;
                let prefix = &rest[..open];
                let mut alts = Vec::new();
                for r in rest[open + 1..close].split(',') {
                    match r.split_once('-') {
                        Some((a, b)) => {
                            let (x, y): (u64, u64) = (
                                a.parse().map_err(|_| bad(a))?,
                                b.parse().map_err(|_| bad(b))?,
                            );
                            if y < x || y - x > 100_000 {
                                return Err(bad(r));
                            }
                            for v in x..=y {
                                alts.push(format!("{prefix}{v:0w$}", w = a.len()));
                            }
                        }
                        None => alts.push(format!("{prefix}{r}")),
                    }
                }
                hosts = hosts
                    .iter()
                    .flat_map(|h| alts.iter().map(move |a| format!("{h}{a}")))
                    .collect();
                rest = &rest[close + 1..];
            } else {
                hosts.iter_mut().for_each(|h| h.push_str(rest));
                rest = "";
            }
        }
        out.extend(hosts);
    }
    if out.is_empty() {
        return Err(bad("no hosts"));
    }
    Ok(out)
}

impl EnvInfo {
    /// Detect torchrun, Slurm or Open MPI from `var` (normally `std::env::var`), in that
    /// order; `Ok(None)` when none is present.
    pub fn detect(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<EnvInfo>> {
        let num = |k: &str| -> Result<Option<usize>> {
            var(k)
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .map_err(|_| RuntimeError::Launch(format!("{k}={v} is not a number")))
                })
                .transpose()
        };
        let port = |k: &str| -> Result<Option<u16>> {
            var(k)
                .map(|v| {
                    v.trim()
                        .parse::<u16>()
                        .map_err(|_| RuntimeError::Launch(format!("{k}={v} is not a port")))
                })
                .transpose()
        };
        let token_over = var(ENV_TOKEN);
        let info = if let (Some(rank), Some(world)) = (num("RANK")?, num("WORLD_SIZE")?) {
            let local_world = num("LOCAL_WORLD_SIZE")?;
            EnvInfo {
                launcher: "torchrun",
                rank,
                world,
                local_rank: num("LOCAL_RANK")?.unwrap_or(rank),
                single_host: local_world.is_none_or(|l| l == world),
                master_addr: var("MASTER_ADDR").unwrap_or_else(|| "127.0.0.1".into()),
                master_port: port("MASTER_PORT")?.ok_or_else(|| {
                    RuntimeError::Launch("torchrun: MASTER_PORT is not set".into())
                })?,
                token: token_over
                    .clone()
                    .or_else(|| var("TORCHELASTIC_RUN_ID"))
                    .unwrap_or_else(|| "torchrun".into()),
            }
        } else if let (Some(rank), Some(world)) = (num("SLURM_PROCID")?, num("SLURM_NTASKS")?) {
            let list = var("SLURM_STEP_NODELIST")
                .or_else(|| var("SLURM_JOB_NODELIST"))
                .ok_or_else(|| {
                    RuntimeError::Launch("Slurm: SLURM_JOB_NODELIST is not set".into())
                })?;
            let hosts = expand_nodelist(&list)?;
            let job = var("SLURM_JOB_ID").unwrap_or_else(|| "0".into());
            let jobn: u64 = job.parse().unwrap_or(0);
            EnvInfo {
                launcher: "slurm",
                rank,
                world,
                local_rank: num("SLURM_LOCALID")?.unwrap_or(0),
                single_host: hosts.len() == 1,
                master_addr: var("MASTER_ADDR").unwrap_or_else(|| hosts[0].clone()),
                master_port: match port("MASTER_PORT")? {
                    Some(p) => p,
                    None => 20000 + (jobn % 20000) as u16,
                },
                token: token_over.clone().unwrap_or_else(|| {
                    format!("slurm-{job}.{}", var("SLURM_STEP_ID").unwrap_or_default())
                }),
            }
        } else if let (Some(rank), Some(world)) =
            (num("OMPI_COMM_WORLD_RANK")?, num("OMPI_COMM_WORLD_SIZE")?)
        {
            let local_size = num("OMPI_COMM_WORLD_LOCAL_SIZE")?;
            let single = local_size.is_none_or(|l| l == world);
            let addr = var("MASTER_ADDR");
            if !single && addr.is_none() {
                return Err(RuntimeError::Launch(
                    "Open MPI across hosts: set MASTER_ADDR (and MASTER_PORT) to rank 0's host"
                        .into(),
                ));
            }
            EnvInfo {
                launcher: "openmpi",
                rank,
                world,
                local_rank: num("OMPI_COMM_WORLD_LOCAL_RANK")?.unwrap_or(rank),
                single_host: single,
                master_addr: addr.unwrap_or_else(|| "127.0.0.1".into()),
                master_port: port("MASTER_PORT")?.unwrap_or(29500),
                token: token_over
                    .clone()
                    .or_else(|| var("PMIX_NAMESPACE"))
                    .or_else(|| var("OMPI_MCA_ess_base_jobid"))
                    .unwrap_or_else(|| "openmpi".into()),
            }
        } else {
            return Ok(None);
        };
        if info.rank >= info.world {
            return Err(RuntimeError::Launch(format!(
                "{}: rank {} is not below world size {}",
                info.launcher, info.rank, info.world
            )));
        }
        Ok(Some(info))
    }
}

fn sanitize(token: &str) -> String {
    token
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect()
}

fn random_token() -> String {
    let mut b = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = f.read_exact(&mut b);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{:x}{}",
        t ^ std::process::id() as u128,
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    )
}

pub(crate) fn unix_name(token: &str) -> String {
    format!("topo-rt-{}", sanitize(token))
}

pub(crate) fn send_fd(s: &UnixStream, fd: &OwnedFd) -> Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    let fds = [fd.as_fd()];
    let mut space = [std::mem::MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    anc.push(SendAncillaryMessage::ScmRights(&fds));
    sendmsg(
        s,
        &[std::io::IoSlice::new(&[0x5a])],
        &mut anc,
        SendFlags::empty(),
    )
    .map_err(|e| RuntimeError::io("pass the shared segment (SCM_RIGHTS)", e))?;
    Ok(())
}

pub(crate) fn recv_fd(s: &UnixStream) -> Result<OwnedFd> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    let mut space = [std::mem::MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut anc = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8];
    recvmsg(
        s,
        &mut [std::io::IoSliceMut::new(&mut byte)],
        &mut anc,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| RuntimeError::io("receive the shared segment", e))?;
    for m in anc.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = m
            && let Some(fd) = fds.next()
        {
            return Ok(fd);
        }
    }
    Err(RuntimeError::Rendezvous(
        "rank 0 sent no shared segment".into(),
    ))
}

/// Check a hello against the job; `Err(reason)` to refuse it.
fn vet(h: &Hello, token: &str, world: usize, joined: &[bool]) -> std::result::Result<(), String> {
    if h.token != token {
        return Err("wrong job token".into());
    }
    if h.world != world {
        return Err(format!(
            "world size mismatch: rank 0 runs {world} ranks, rank {} expects {}",
            h.rank, h.world
        ));
    }
    if h.rank == 0 || h.rank >= world {
        return Err(format!("rank {} is not in 1..{world}", h.rank));
    }
    if joined[h.rank] {
        return Err(format!("rank {} joined twice", h.rank));
    }
    Ok(())
}

/// Children of the processes launcher, checked while waiting so that a worker that dies
/// before joining is reported at once.
fn check_children(children: &mut [(usize, Child)]) -> Result<()> {
    for (rank, c) in children.iter_mut() {
        if let Ok(Some(st)) = c.try_wait() {
            return Err(RuntimeError::PeerLost {
                rank: *rank,
                why: format!("its process exited before joining ({st})"),
            });
        }
    }
    Ok(())
}

/// Rank 0 of a one-host job: accept the other ranks on an abstract Unix socket, vetting each
/// (same user, job token, world size, rank not yet joined). Returns their streams in rank
/// order (`streams[i]` is rank `i + 1`) and every rank's pid; nothing has been replied yet.
pub(crate) fn accept_local(
    listener: &UnixListener,
    token: &str,
    world: usize,
    children: &mut [(usize, Child)],
    timeout: Duration,
) -> Result<(Vec<UnixStream>, Vec<i32>)> {
    let mut joined = vec![false; world];
    let mut pids = vec![0i32; world];
    pids[0] = std::process::id() as i32;
    let mut streams = Vec::new();
    let deadline = Instant::now() + timeout;
    listener
        .set_nonblocking(true)
        .map_err(|e| RuntimeError::io("listen for ranks", e))?;
    let me = rustix::process::getuid();
    while streams.len() + 1 < world {
        check_children(children)?;
        match listener.accept() {
            Ok((mut s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let cred = rustix::net::sockopt::socket_peercred(&s).ok();
                let from = cred.map_or("a local process".to_string(), |c| {
                    format!("pid {}", c.pid.as_raw_nonzero())
                });
                if cred.is_some_and(|c| c.uid != me) {
                    log_refusal(&from, "another user");
                    continue;
                }
                match read_frame::<Hello>(&mut s) {
                    Ok(h) => match vet(&h, token, world, &joined) {
                        Ok(()) => {
                            joined[h.rank] = true;
                            pids[h.rank] = h.pid;
                            streams.push((h.rank, s));
                        }
                        Err(why) => {
                            log_refusal(&from, &why);
                            let _ = write_frame(&mut s, &Reply::Refused(why));
                        }
                    },
                    Err(e) => log_refusal(&from, &e.to_string()),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    let missing: Vec<usize> = (1..world).filter(|&r| !joined[r]).collect();
                    return Err(RuntimeError::Timeout {
                        what: format!("ranks {missing:?} to join"),
                        secs: timeout.as_secs_f64(),
                    });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(RuntimeError::io("accept a rank", e)),
        }
    }
    streams.sort_by_key(|(r, _)| *r);
    Ok((streams.into_iter().map(|(_, s)| s).collect(), pids))
}

/// Tell a joined rank it is in ([`join_local`] waits for this).
pub(crate) fn accept_reply(s: &mut UnixStream) -> Result<()> {
    write_frame(s, &Reply::Accepted)
}

/// Rank 0 of a one-host job on the host backend: accept the other ranks, then pass them the
/// arena's memfd and the job.
fn local_leader(
    listener: &UnixListener,
    token: &str,
    req: &VerifyRequest,
    launch: &str,
    children: &mut [(usize, Child)],
    timeout: Duration,
) -> Result<(Arc<Arena>, Vec<i32>)> {
    let world = req.ranks;
    let shape = ArenaShape::new(world, req.nchannels.max(4), req.storage_bytes());
    let (arena, fd) = Arena::memfd(shape, &sanitize(token))?;
    let (mut streams, pids) = accept_local(listener, token, world, children, timeout)?;
    let job = Job {
        shape: Some(shape),
        pids: pids.clone(),
        addrs: vec![],
        request: req.clone(),
        launch: launch.into(),
    };
    for s in &mut streams {
        write_frame(s, &Reply::Accepted)?;
        send_fd(s, &fd)?;
        write_frame(s, &job)?;
    }
    Ok((arena, pids))
}

/// A non-zero rank of a one-host job: join rank 0 at the abstract socket `name`, present the
/// token, and wait to be accepted. The stream's read timeout is `timeout`.
pub(crate) fn join_local(
    name: &str,
    token: &str,
    rank: usize,
    world: usize,
    timeout: Duration,
) -> Result<UnixStream> {
    let addr = UnixAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| RuntimeError::io("socket name", e))?;
    let deadline = Instant::now() + timeout;
    let mut s = loop {
        match UnixStream::connect_addr(&addr) {
            Ok(s) => break s,
            Err(e) if Instant::now() > deadline => {
                return Err(RuntimeError::Timeout {
                    what: format!("rank 0 to listen ({e})"),
                    secs: timeout.as_secs_f64(),
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    s.set_read_timeout(Some(timeout))
        .map_err(|e| RuntimeError::io("socket timeout", e))?;
    write_frame(
        &mut s,
        &Hello {
            token: token.into(),
            rank,
            world,
            pid: std::process::id() as i32,
            data: None,
        },
    )?;
    match read_frame::<Reply>(&mut s)? {
        Reply::Refused(why) => Err(RuntimeError::Rendezvous(format!(
            "rank 0 refused rank {rank}: {why}"
        ))),
        Reply::Accepted => Ok(s),
    }
}

/// A non-zero rank of a one-host job on the host backend: join rank 0, map its arena.
fn local_member(
    name: &str,
    token: &str,
    rank: usize,
    world: usize,
    timeout: Duration,
) -> Result<(ShmTransport, Job)> {
    let mut s = join_local(name, token, rank, world, timeout)?;
    let fd = recv_fd(&s)?;
    let job: Job = read_frame(&mut s)?;
    let shape = job
        .shape
        .ok_or_else(|| RuntimeError::Rendezvous("no segment shape".into()))?;
    let arena = Arena::map_fd(&fd, shape, false)?;
    drop(fd);
    let pids: Vec<Option<i32>> = job.pids.iter().map(|&p| Some(p)).collect();
    let t = ShmTransport::new(
        arena,
        rank,
        &pids,
        Duration::from_secs_f64(job.request.timeout_s),
    )?;
    Ok((t, job))
}

pub(crate) fn bind_unix(name: &str) -> Result<UnixListener> {
    let addr = UnixAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| RuntimeError::io("socket name", e))?;
    UnixListener::bind_addr(&addr).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            RuntimeError::Rendezvous(format!(
                "another job already uses the rendezvous name {name:?} (job token in use)"
            ))
        } else {
            RuntimeError::io("bind the rendezvous socket", e)
        }
    })
}

/// `--launch processes`: this process is rank 0 and starts `req.ranks - 1` workers.
pub fn run_processes(req: &VerifyRequest, spec: &ProcessSpec) -> Result<VerifyReport> {
    run_processes_progress(req, spec, None)
}

/// [`run_processes`] reporting progress.
pub fn run_processes_progress(
    req: &VerifyRequest,
    spec: &ProcessSpec,
    progress: Progress,
) -> Result<VerifyReport> {
    let (token, name, listener) = job_socket()?;
    let timeout = Duration::from_secs_f64(req.timeout_s);
    let mut children = spawn_workers(req.ranks, spec, &name, &token, &[])?;
    let result = (|| {
        let (arena, pids) =
            local_leader(&listener, &token, req, "processes", &mut children, timeout)?;
        drop(listener);
        let pids: Vec<Option<i32>> = pids
            .iter()
            .enumerate()
            .map(|(r, &p)| (r != 0).then_some(p))
            .collect();
        let mut t = ShmTransport::new(arena, 0, &pids, timeout)?;
        let r = run_rank_progress(&mut t, req, "processes", progress);
        if r.is_err() {
            t.abort(0);
        }
        r
    })();
    let worker_err = reap(&mut children, timeout, result.is_ok());
    match result {
        Ok(Some(rep)) => match worker_err {
            Some(e) => Err(e),
            None => Ok(rep),
        },
        Ok(None) => Err(RuntimeError::Launch("rank 0 returned no report".into())),
        Err(e) => Err(e),
    }
}

/// A fresh job token, its rendezvous name and the bound listener.
pub(crate) fn job_socket() -> Result<(String, String, UnixListener)> {
    let token = random_token();
    let name = unix_name(&token);
    let listener = bind_unix(&name)?;
    Ok((token, name, listener))
}

/// Start ranks 1..world as worker processes that will join `name` with `token`.
pub(crate) fn spawn_workers(
    world: usize,
    spec: &ProcessSpec,
    name: &str,
    token: &str,
    extra: &[(&str, &str)],
) -> Result<Vec<(usize, Child)>> {
    let mut children = Vec::new();
    for r in 1..world {
        let child = Command::new(&spec.program)
            .args(&spec.args)
            .envs(spec.envs.iter().map(|(k, v)| (k, v)))
            .envs(extra.iter().copied())
            .env(ENV_SOCKET, name)
            .env(ENV_RANK, r.to_string())
            .env(ENV_WORLD, world.to_string())
            .env(ENV_TOKEN, token)
            .spawn();
        match child {
            Ok(c) => children.push((r, c)),
            Err(e) => {
                reap(&mut children, Duration::ZERO, false);
                return Err(RuntimeError::io(
                    format!("start worker {}", spec.program.display()),
                    e,
                ));
            }
        }
    }
    Ok(children)
}

/// Reap the workers: they finish (or notice the abort) on their own within `timeout` when
/// rank 0 succeeded, within 2 s otherwise; stragglers are killed. The first worker that
/// exited with a failure, as an error.
pub(crate) fn reap(
    children: &mut [(usize, Child)],
    timeout: Duration,
    ok: bool,
) -> Option<RuntimeError> {
    let deadline = Instant::now()
        + if ok {
            timeout
        } else {
            timeout.min(Duration::from_secs(2))
        };
    let mut worker_err = None;
    for (rank, c) in children.iter_mut() {
        loop {
            match c.try_wait() {
                Ok(Some(st)) => {
                    if !st.success() && worker_err.is_none() {
                        worker_err = Some(RuntimeError::PeerLost {
                            rank: *rank,
                            why: format!("its process exited with {st}"),
                        });
                    }
                    break;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
            }
        }
    }
    worker_err
}

/// Entry point of a worker process (the hidden `topo` worker subcommand calls this). Returns
/// `Ok(false)` when the process was not started as a worker.
pub fn worker_main() -> Result<bool> {
    let (Ok(name), Ok(rank), Ok(world), Ok(token)) = (
        std::env::var(ENV_SOCKET),
        std::env::var(ENV_RANK),
        std::env::var(ENV_WORLD),
        std::env::var(ENV_TOKEN),
    ) else {
        return Ok(false);
    };
    let rank: usize = rank
        .parse()
        .map_err(|_| RuntimeError::Launch(format!("{ENV_RANK}={rank}")))?;
    let world: usize = world
        .parse()
        .map_err(|_| RuntimeError::Launch(format!("{ENV_WORLD}={world}")))?;
    let (mut t, job) = local_member(&name, &token, rank, world, Duration::from_secs(30))?;
    let r = run_rank(&mut t, &job.request, &job.launch);
    if r.is_err() {
        t.abort(rank);
    }
    r.map(|_| true)
}

/// Rank 0 of a multi-host job: accept the others over TCP at `bind`.
fn tcp_leader(
    listener: TcpListener,
    token: &str,
    req: &VerifyRequest,
    my_data: SocketAddr,
    timeout: Duration,
) -> Result<Vec<SocketAddr>> {
    let world = req.ranks;
    let mut joined = vec![false; world];
    let mut addrs = vec![my_data; world];
    let mut streams = Vec::new();
    let deadline = Instant::now() + timeout;
    listener
        .set_nonblocking(true)
        .map_err(|e| RuntimeError::io("listen for ranks", e))?;
    while streams.len() + 1 < world {
        match listener.accept() {
            Ok((mut s, from)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                match read_frame::<Hello>(&mut s) {
                    Ok(h) => match vet(&h, token, world, &joined)
                        .and_then(|_| h.data.ok_or_else(|| "no data address".to_string()))
                    {
                        Ok(mut data) => {
                            if data.ip().is_unspecified() {
                                data.set_ip(from.ip());
                            }
                            joined[h.rank] = true;
                            addrs[h.rank] = data;
                            streams.push(s);
                        }
                        Err(why) => {
                            log_refusal(&from.to_string(), &why);
                            let _ = write_frame(&mut s, &Reply::Refused(why));
                        }
                    },
                    Err(e) => log_refusal(&from.to_string(), &e.to_string()),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    let missing: Vec<usize> = (1..world).filter(|&r| !joined[r]).collect();
                    return Err(RuntimeError::Timeout {
                        what: format!("ranks {missing:?} to join"),
                        secs: timeout.as_secs_f64(),
                    });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(RuntimeError::io("accept a rank", e)),
        }
    }
    let job = Job {
        shape: None,
        pids: vec![],
        addrs: addrs.clone(),
        request: req.clone(),
        launch: "env".into(),
    };
    for s in &mut streams {
        write_frame(s, &Reply::Accepted)?;
        write_frame(s, &job)?;
    }
    Ok(addrs)
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| RuntimeError::io(format!("resolve MASTER_ADDR {host}"), e))?
        .next()
        .ok_or_else(|| RuntimeError::Launch(format!("MASTER_ADDR {host} has no address")))
}

/// Run `req` as the rank described by `env` (torchrun, Slurm, Open MPI). Rank 0 returns the
/// report, the others `None`.
pub fn run_env(req: &VerifyRequest, env: &EnvInfo) -> Result<Option<VerifyReport>> {
    run_env_progress(req, env, None)
}

/// [`run_env`] reporting progress on rank 0.
pub fn run_env_progress(
    req: &VerifyRequest,
    env: &EnvInfo,
    progress: Progress,
) -> Result<Option<VerifyReport>> {
    let timeout = Duration::from_secs_f64(req.timeout_s);
    let tcp = std::env::var(ENV_TRANSPORT).is_ok_and(|v| v == "tcp");
    run_env_inner(req, env, !env.single_host || tcp, timeout, progress)
}

/// [`run_env`] with the transport choice explicit (`tcp`) — tests use it to run several
/// env-mode ranks as threads of one process.
pub fn run_env_with(
    req: &VerifyRequest,
    env: &EnvInfo,
    tcp: bool,
    timeout: Duration,
) -> Result<Option<VerifyReport>> {
    run_env_inner(req, env, tcp, timeout, None)
}

fn run_env_inner(
    req: &VerifyRequest,
    env: &EnvInfo,
    tcp: bool,
    timeout: Duration,
    progress: Progress,
) -> Result<Option<VerifyReport>> {
    if req.ranks != env.world && env.rank == 0 {
        return Err(RuntimeError::Launch(format!(
            "{} says world size {}, the request is for {} ranks",
            env.launcher, env.world, req.ranks
        )));
    }
    let mut req = req.clone();
    req.ranks = env.world;
    req.pin_cpus = false;
    if !tcp {
        let name = unix_name(&format!("{}-{}", env.token, env.master_port));
        if env.rank == 0 {
            let listener = bind_unix(&name)?;
            let (arena, pids) = local_leader(&listener, &env.token, &req, "env", &mut [], timeout)?;
            let pids: Vec<Option<i32>> = pids
                .iter()
                .enumerate()
                .map(|(r, &p)| (r != 0).then_some(p))
                .collect();
            let mut t = ShmTransport::new(arena, 0, &pids, timeout)?;
            let r = run_rank_progress(&mut t, &req, "env", progress);
            if r.is_err() {
                t.abort(0);
            }
            return r;
        }
        let (mut t, job) = local_member(&name, &env.token, env.rank, env.world, timeout)?;
        let r = run_rank(&mut t, &job.request, "env");
        if r.is_err() {
            t.abort(env.rank);
        }
        return r;
    }
    let master = resolve(&env.master_addr, env.master_port)?;
    if env.rank == 0 {
        let listener = TcpListener::bind(master).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                RuntimeError::Rendezvous(format!(
                    "port {} on {} is already in use (MASTER_PORT)",
                    env.master_port, env.master_addr
                ))
            } else {
                RuntimeError::io(format!("listen on {master}"), e)
            }
        })?;
        let data = TcpListener::bind(SocketAddr::new(master.ip(), 0))
            .map_err(|e| RuntimeError::io("listen for data", e))?;
        let data_addr = data
            .local_addr()
            .map_err(|e| RuntimeError::io("data address", e))?;
        let addrs = tcp_leader(listener, &env.token, &req, data_addr, timeout)?;
        let mut t =
            TcpTransport::connect(0, data, &addrs, &env.token, req.storage_bytes(), timeout)?;
        return run_rank_progress(&mut t, &req, "env", progress);
    }
    let deadline = Instant::now() + timeout;
    let mut s = loop {
        match TcpStream::connect_timeout(&master, Duration::from_secs(1)) {
            Ok(s) => break s,
            Err(e) if Instant::now() > deadline => {
                return Err(RuntimeError::Timeout {
                    what: format!("rank 0 at {master} ({e})"),
                    secs: timeout.as_secs_f64(),
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let local_ip: IpAddr = s
        .local_addr()
        .map_err(|e| RuntimeError::io("local address", e))?
        .ip();
    let data = TcpListener::bind(SocketAddr::new(local_ip, 0))
        .map_err(|e| RuntimeError::io("listen for data", e))?;
    let data_addr = data
        .local_addr()
        .map_err(|e| RuntimeError::io("data address", e))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| RuntimeError::io("socket timeout", e))?;
    write_frame(
        &mut s,
        &Hello {
            token: env.token.clone(),
            rank: env.rank,
            world: env.world,
            pid: std::process::id() as i32,
            data: Some(data_addr),
        },
    )?;
    match read_frame::<Reply>(&mut s)? {
        Reply::Refused(why) => {
            return Err(RuntimeError::Rendezvous(format!(
                "rank 0 refused rank {}: {why}",
                env.rank
            )));
        }
        Reply::Accepted => {}
    }
    let job: Job = read_frame(&mut s)?;
    let mut t = TcpTransport::connect(
        env.rank,
        data,
        &job.addrs,
        &env.token,
        job.request.storage_bytes(),
        timeout,
    )?;
    run_rank(&mut t, &job.request, "env")
}

/// Run a verify sweep with the chosen launcher. With `Env` (or `Auto` under a launcher),
/// ranks other than 0 return `Ok(None)` and should print nothing.
pub fn run_verify(req: &VerifyRequest, launch: &Launch) -> Result<Option<VerifyReport>> {
    run_verify_progress(req, launch, None)
}

/// [`run_verify`] calling `progress(rows_done, rows_total)` on rank 0 after each row (the
/// binary draws its progress bar from it when stderr is a terminal).
pub fn run_verify_progress(
    req: &VerifyRequest,
    launch: &Launch,
    progress: Progress,
) -> Result<Option<VerifyReport>> {
    match launch {
        Launch::Threads => run_threads_progress(req, progress).map(Some),
        Launch::Processes(spec) => run_processes_progress(req, spec, progress).map(Some),
        Launch::Env => {
            let env = EnvInfo::detect(&|k| std::env::var(k).ok())?
                .ok_or_else(|| RuntimeError::Launch("--launch env: no torchrun, Slurm or Open MPI variables (RANK/WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/SIZE)".into()))?;
            run_env_progress(req, &env, progress)
        }
        Launch::Auto => match EnvInfo::detect(&|k| std::env::var(k).ok())? {
            Some(env) => run_env_progress(req, &env, progress),
            None => run_threads_progress(req, progress).map(Some),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn slurm_nodelists_expand() {
        assert_eq!(
            expand_nodelist("gpu[01-04,07]").unwrap(),
            ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]
        );
        assert_eq!(
            expand_nodelist("a1,b[8-10],c").unwrap(),
            ["a1", "b8", "b9", "b10", "c"]
        );
        assert_eq!(
            expand_nodelist("r[1-2]n[3,5]").unwrap(),
            ["r1n3", "r1n5", "r2n3", "r2n5"]
        );
        assert_eq!(expand_nodelist("node007").unwrap(), ["node007"]);
        assert!(expand_nodelist("gpu[01-").is_err());
        assert!(expand_nodelist("gpu[4-2]").is_err());
    }

    fn detect(vars: &[(&str, &str)]) -> Result<Option<EnvInfo>> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        EnvInfo::detect(&move |k| m.get(k).cloned())
    }

    #[test]
    fn launchers_are_detected() {
        let t = detect(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("LOCAL_WORLD_SIZE", "2"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (t.launcher, t.rank, t.world, t.single_host, t.master_port),
            ("torchrun", 1, 4, false, 29500)
        );
        let s = detect(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_JOB_NODELIST", "gpu[01-04,07]"),
            ("SLURM_JOB_ID", "4242"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                s.launcher,
                s.rank,
                s.world,
                s.local_rank,
                s.master_addr.as_str(),
                s.single_host
            ),
            ("slurm", 3, 8, 1, "gpu01", false)
        );
        assert_eq!(s.master_port, 24242);
        let o = detect(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ("TOPO_JOB_TOKEN", "abc"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (o.launcher, o.single_host, o.token.as_str()),
            ("openmpi", true, "abc")
        );
        assert!(detect(&[]).unwrap().is_none());
        assert!(detect(&[("RANK", "5"), ("WORLD_SIZE", "4"), ("MASTER_PORT", "1")]).is_err());
        assert!(detect(&[("RANK", "x"), ("WORLD_SIZE", "4")]).is_err());
    }
}
