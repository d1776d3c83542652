//! Launchers, shared by the host and CUDA backends (run through [`crate::job::Job`]).
//!
//! * **threads**: N ranks as threads of this process.
//! * **processes**: this process is rank 0 and starts N-1 copies of a program (the `topo`
//!   binary's hidden worker subcommand, which calls [`worker_main`]); they meet on an
//!   abstract Unix socket, prove the job token (`auth`: challenge and response, the token
//!   never sent), and receive the memfd of the shared arena with SCM_RIGHTS.
//! * **env**: ranks started by torchrun, Slurm or Open MPI ([`EnvInfo::detect`]). Ranks on one
//!   host meet the same way as processes; ranks on several hosts meet over TCP at
//!   MASTER_ADDR:MASTER_PORT and use the TCP transport.
//!
//! Every launcher meets through `crate::rendezvous`: one deadline, the job token and the
//! world size checked, anything else that connects refused and logged while the job goes on.
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
use crate::rendezvous::{self, Reply};
use crate::transport::Transport;
use crate::transport::shm::{Arena, ArenaShape, ShmTransport};
use crate::transport::tcp::TcpTransport;
use crate::verify::{Progress, VerifyReport, VerifyRequest, run_rank};

/// Environment variables of the processes launcher.
pub const ENV_SOCKET: &str = "TOPO_RT_SOCKET";
/// Rank of a worker process.
pub const ENV_RANK: &str = "TOPO_RT_RANK";
/// World size of a worker process.
pub const ENV_WORLD: &str = "TOPO_RT_WORLD";
/// Job token (also honoured in env mode, where it overrides the launcher's job id).
pub const ENV_TOKEN: &str = "TOPO_JOB_TOKEN";
/// `cuda` in a worker of `--backend cuda --launch processes` ([`worker_main`] then runs the
/// CUDA backend's rank).
pub const ENV_BACKEND: &str = "TOPO_RT_BACKEND";
/// Force the TCP transport in env mode (`TOPO_TRANSPORT=tcp`).
pub const ENV_TRANSPORT: &str = "TOPO_TRANSPORT";

/// Whether `TOPO_TRANSPORT=tcp` forces the ranks onto TCP: read here alone, so the binary and
/// the launcher agree on what the variable means.
pub fn tcp_forced() -> bool {
    std::env::var(ENV_TRANSPORT).is_ok_and(|v| v == "tcp")
}

/// Timeout of a worker of `--launch processes` (rank 0's `--timeout`, which bounds the
/// timeout of the job it receives).
pub const ENV_TIMEOUT: &str = "TOPO_RT_TIMEOUT";

/// The most ranks a job may have (a launcher's world size and a received job are checked
/// against it before anything is sized from them); defined beside the job's types so the
/// transports can check it too.
pub use crate::types::MAX_RANKS;
/// The most hosts a Slurm host list may expand to.
pub const MAX_HOSTS: usize = 65_536;
/// The largest message size a received job may ask for (each rank then holds twice this).
pub const MAX_JOB_BYTES: usize = 1 << 36;
/// The most sizes a received job's sweep may have.
const MAX_SIZES: usize = 100_000;
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

pub use crate::wire::{log_refusal, read_frame, read_frame_by, write_frame};

#[derive(Debug, Serialize, Deserialize)]
struct Assignment {
    shape: Option<ArenaShape>,
    pids: Vec<i32>,
    addrs: Vec<SocketAddr>,
    request: VerifyRequest,
    launch: String,
    /// TCP rendezvous only: chosen by rank 0 at random; every data connection presents it,
    /// so a stranger that knows only the (guessable) job token cannot join the mesh.
    #[serde(default)]
    nonce: String,
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
    count_nodelist(&parts).map_err(|why| bad(&why))?;
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

/// How many hosts `parts` (a host list split on its top-level commas) expand to, counted with
/// checked arithmetic before anything is expanded: `a[0-99999]b[0-99999]` is 20 bytes and
/// ten billion names. An error past [`MAX_HOSTS`].
fn count_nodelist(parts: &[&str]) -> std::result::Result<usize, String> {
    let too_many = || format!("it names more than {MAX_HOSTS} hosts, topo's limit");
    let mut total = 0usize;
    for p in parts {
        let mut n = 1usize;
        let mut rest = *p;
        while let Some(open) = rest.find('[') {
            let Some(close) = rest[open..].find(']').map(|c| c + open) else {
                break; // the expansion reports the unbalanced bracket
            };
            let mut alts = 0usize;
            for r in rest[open + 1..close].split(',') {
                let k = match r.split_once('-') {
                    Some((a, b)) => match (a.parse::<u64>(), b.parse::<u64>()) {
                        (Ok(x), Ok(y)) if y >= x => (y - x).saturating_add(1),
                        _ => 1, // the expansion reports the bad range
                    },
                    None => 1,
                };
                alts = usize::try_from(k)
                    .ok()
                    .and_then(|k| alts.checked_add(k))
                    .ok_or_else(too_many)?;
            }
            n = n.checked_mul(alts).ok_or_else(too_many)?;
            rest = &rest[close + 1..];
        }
        total = total.checked_add(n).ok_or_else(too_many)?;
        if total > MAX_HOSTS {
            return Err(too_many());
        }
    }
    Ok(total)
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
        if info.world == 0 || info.world > MAX_RANKS {
            return Err(RuntimeError::Launch(format!(
                "{}: world size {} is outside 1 to {MAX_RANKS}, topo's limit",
                info.launcher, info.world
            )));
        }
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

/// A job token or mesh nonce: the time and pid (unique on this host) and 128 random bits
/// from the kernel, read the way the token handshake reads its nonces.
fn random_token() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let random = crate::auth::nonce().unwrap_or_default();
    format!("{:x}{random}", t ^ std::process::id() as u128)
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

/// Rank 0 of a one-host job: accept the other ranks on an abstract Unix socket
/// ([`rendezvous::gather`]), checking `children` while waiting. Returns their streams in rank
/// order (`streams[i]` is rank `i + 1`) and every rank's pid; nothing has been replied yet.
pub(crate) fn accept_local(
    listener: &UnixListener,
    token: &str,
    world: usize,
    children: &mut [(usize, Child)],
    timeout: Duration,
) -> Result<(Vec<UnixStream>, Vec<i32>)> {
    let joined = rendezvous::gather(listener, token, world, timeout, &mut || {
        check_children(children)
    })?;
    let mut pids = vec![std::process::id() as i32];
    pids.extend(joined.iter().map(|j| j.hello.pid));
    Ok((joined.into_iter().map(|j| j.stream).collect(), pids))
}

/// Tell a joined rank it is in ([`join_local`] waits for this).
pub(crate) fn accept_reply(s: &mut UnixStream) -> Result<()> {
    write_frame(s, &Reply::Accepted)
}

/// Rank 0 of a one-host job on the host backend, once the others joined (`streams[i]` is
/// rank `i + 1`): pass them the arena's memfd and the job, and run rank 0 on the arena.
pub(crate) fn lead_shm(
    mut streams: Vec<UnixStream>,
    pids: &[i32],
    (req, launch): (&VerifyRequest, &str),
    token: &str,
    timeout: Duration,
    progress: Progress,
) -> Result<Option<VerifyReport>> {
    let shape = req.arena_shape(req.ranks);
    let (arena, fd) = Arena::memfd(shape, &sanitize(token))?;
    let job = Assignment {
        shape: Some(shape),
        pids: pids.to_vec(),
        addrs: vec![],
        request: req.clone(),
        launch: launch.into(),
        nonce: String::new(),
    };
    for s in &mut streams {
        write_frame(s, &Reply::Accepted)?;
        send_fd(s, &fd)?;
        write_frame(s, &job)?;
    }
    let pids: Vec<Option<i32>> = pids
        .iter()
        .enumerate()
        .map(|(r, &p)| (r != 0).then_some(p))
        .collect();
    let mut t = ShmTransport::new(arena, 0, &pids, timeout)?;
    let r = run_rank(&mut t, req, launch, progress);
    if r.is_err() {
        t.abort(0);
    }
    r
}

/// A non-zero rank of a one-host job on the host backend, once rank 0 accepted it: map the
/// arena it sends and run this rank.
pub(crate) fn follow_shm(
    s: UnixStream,
    deadline: Instant,
    (rank, world): (usize, usize),
    timeout: Duration,
) -> Result<()> {
    let (mut t, job) = receive_arena(s, deadline, rank, world, timeout)?;
    let r = run_rank(&mut t, &job.request, &job.launch, None);
    if r.is_err() {
        t.abort(rank);
    }
    r.map(|_| ())
}

/// A non-zero rank of a one-host job: join rank 0 at the abstract socket `name`, present the
/// token, and wait to be accepted. Returns the stream and the join's deadline (the stream's
/// read timeout is the time left to it).
pub(crate) fn join_local(
    name: &str,
    token: &str,
    rank: usize,
    world: usize,
    timeout: Duration,
) -> Result<(UnixStream, Instant)> {
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
    rendezvous::check_listener(&s, name)?;
    let whom = format!("the listener on {name:?}");
    rendezvous::introduce(&mut s, token, (rank, world), None, deadline, &whom)?;
    let left = deadline.saturating_duration_since(Instant::now());
    s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
        .map_err(|e| RuntimeError::io("socket timeout", e))?;
    Ok((s, deadline))
}

/// A non-zero rank of a one-host job on the host backend: join rank 0, map its arena.
/// `timeout` is this rank's own: it bounds the join and the job's timeout.
#[cfg(test)]
fn local_member(
    name: &str,
    token: &str,
    rank: usize,
    world: usize,
    timeout: Duration,
) -> Result<(ShmTransport, Assignment)> {
    let (s, deadline) = join_local(name, token, rank, world, timeout)?;
    receive_arena(s, deadline, rank, world, timeout)
}

/// The arena and job rank 0 sends a joined rank, checked against this rank's own view.
fn receive_arena(
    mut s: UnixStream,
    deadline: Instant,
    rank: usize,
    world: usize,
    timeout: Duration,
) -> Result<(ShmTransport, Assignment)> {
    let fd = recv_fd(&s)?;
    let mut job: Assignment = read_frame_by(&mut s, deadline, crate::wire::MAX_FRAME)?;
    vet_request(&mut job.request, world, timeout)?;
    let shape = job
        .shape
        .ok_or_else(|| RuntimeError::Rendezvous("no segment shape".into()))?;
    let own = job.request.arena_shape(world);
    if shape != own || job.pids.len() != world {
        return Err(RuntimeError::Rendezvous(format!(
            "rank 0's job does not match its request: segment {shape:?} ({} pids), this rank computes {own:?} for {world} ranks",
            job.pids.len()
        )));
    }
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

/// Check a job received from rank 0 before anything is sized or waited on from it: the
/// world size, every size and count within the runtime's limits (checked arithmetic), each
/// plan consistent, and its timeout finite and no longer than this rank's own `timeout`
/// (to which it is clamped).
pub(crate) fn vet_request(req: &mut VerifyRequest, world: usize, timeout: Duration) -> Result<()> {
    let bad = |why: String| Err(RuntimeError::Rendezvous(format!("rank 0's job: {why}")));
    if req.ranks != world {
        return bad(format!(
            "{} ranks, this rank was started for {world}",
            req.ranks
        ));
    }
    if !req.timeout_s.is_finite() || req.timeout_s <= 0.0 {
        return bad(format!("timeout of {} s", req.timeout_s));
    }
    req.timeout_s = req.timeout_s.min(timeout.as_secs_f64());
    if req.max_bytes > MAX_JOB_BYTES || req.min_bytes > req.max_bytes {
        return bad(format!(
            "sizes {} to {} bytes (at most {MAX_JOB_BYTES})",
            req.min_bytes, req.max_bytes
        ));
    }
    if !(1..=64).contains(&req.nchannels) || req.root >= world {
        return bad(format!("{} channels, root {}", req.nchannels, req.root));
    }
    if req.collectives.is_empty()
        || req.collectives.len() > 64
        || req.iters.checked_add(req.warmup).is_none()
    {
        return bad(format!(
            "{} collectives, {} iterations",
            req.collectives.len(),
            req.iters
        ));
    }
    if !req.step_factor.is_finite() || count_sizes(req) > MAX_SIZES {
        return bad(format!(
            "size factor {} (more than {MAX_SIZES} sizes)",
            req.step_factor
        ));
    }
    for row in &req.plans {
        if row.plan.nranks != world {
            return bad(format!("a plan for {} ranks", row.plan.nranks));
        }
        row.plan.validate()?;
    }
    Ok(())
}

/// The sizes of `req`'s sweep, counted up to one past [`MAX_SIZES`] (a factor just above 1
/// would otherwise make billions).
fn count_sizes(req: &VerifyRequest) -> usize {
    let (mut s, mut n) = (req.min_bytes as f64, 1);
    while n <= MAX_SIZES && req.min_bytes != req.max_bytes {
        s = (s * req.step_factor).max(s + 1.0);
        if s > req.max_bytes as f64 {
            break;
        }
        n += 1;
    }
    n
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

/// Rank 0 of `--launch processes` on either backend: start ranks 1.. as workers (`extra`
/// added to their environment), accept them within `wait`, run `lead` with their streams,
/// their pids and the job token, then reap the workers (given `linger` to finish when rank 0
/// succeeded). One error for the job, in the words of the rank it is about.
pub(crate) fn with_workers<T>(
    req: &VerifyRequest,
    spec: &ProcessSpec,
    extra: &[(&str, &str)],
    (wait, linger): (Duration, Duration),
    lead: impl FnOnce(Vec<UnixStream>, Vec<i32>, &str) -> Result<T>,
) -> Result<T> {
    let (token, name, listener) = job_socket()?;
    let secs = req.timeout_s.to_string();
    let mut env = vec![(ENV_TIMEOUT, secs.as_str())];
    env.extend_from_slice(extra);
    let mut children = spawn_workers(req.ranks, spec, &name, &token, &env)?;
    let result = accept_local(&listener, &token, req.ranks, &mut children, wait).and_then(
        |(streams, pids)| {
            drop(listener);
            lead(streams, pids, &token)
        },
    );
    reap(&mut children, linger, result.is_ok()).outcome(result)
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
            // Rank 0 speaks for the job: a worker's error becomes part of its one line
            // (see `reap`) instead of one line per rank.
            .stderr(std::process::Stdio::piped())
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

/// What the workers left behind: the first that failed, and each one's own error line.
pub(crate) struct Reaped {
    failed: Option<RuntimeError>,
    said: Vec<(usize, String)>,
}

impl Reaped {
    /// The job's outcome from rank 0's: one error for the job, naming the rank it is about
    /// with that rank's own words when it said any.
    pub(crate) fn outcome<T>(self, rank0: Result<T>) -> Result<T> {
        let e = match (rank0, self.failed) {
            (Ok(v), None) => return Ok(v),
            (Ok(_), Some(e)) | (Err(e), _) => e,
        };
        Err(match e {
            RuntimeError::PeerLost { rank, why } => {
                match self.said.iter().find(|(r, _)| *r == rank) {
                    Some((_, msg)) => RuntimeError::PeerLost {
                        rank,
                        why: format!("{why}; it said: {msg}"),
                    },
                    None => RuntimeError::PeerLost { rank, why },
                }
            }
            e => e,
        })
    }
}

/// A worker's stderr once it exited (at most 64 KiB): its `error:` line, and whatever else
/// it printed, which goes on to this process's stderr.
fn worker_said(c: &mut Child) -> Option<String> {
    let mut text = String::new();
    c.stderr
        .take()?
        .take(64 << 10)
        .read_to_string(&mut text)
        .ok()?;
    let mut said = None;
    for line in text.lines() {
        match line.strip_prefix("error: ") {
            Some(m) if said.is_none() => said = Some(m.to_string()),
            Some(_) => {}
            None if said.is_none() => eprintln!("{line}"),
            None => {} // the error's hint: rank 0's error carries its own
        }
    }
    said
}

/// Reap the workers: they finish (or notice the abort) on their own within `timeout` when
/// rank 0 succeeded, within 2 s otherwise; stragglers are killed.
pub(crate) fn reap(children: &mut [(usize, Child)], timeout: Duration, ok: bool) -> Reaped {
    let deadline = Instant::now()
        + if ok {
            timeout
        } else {
            timeout.min(Duration::from_secs(2))
        };
    let mut out = Reaped {
        failed: None,
        said: Vec::new(),
    };
    for (rank, c) in children.iter_mut() {
        loop {
            match c.try_wait() {
                Ok(Some(st)) => {
                    if !st.success() && out.failed.is_none() {
                        out.failed = Some(RuntimeError::PeerLost {
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
        if let Some(m) = worker_said(c) {
            out.said.push((*rank, m));
        }
    }
    out
}

/// A worker's own timeout: rank 0's `--timeout` from [`ENV_TIMEOUT`] (30 s without it).
pub(crate) fn worker_timeout() -> Result<Duration> {
    match std::env::var(ENV_TIMEOUT) {
        Err(_) => Ok(Duration::from_secs(30)),
        Ok(v) => v
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite() && *t > 0.0 && *t <= 1e6)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| RuntimeError::Launch(format!("{ENV_TIMEOUT}={v} is not a timeout"))),
    }
}

// The trait lives with the launchers that drive it, so that the job builder and the CUDA
// backend both use the launchers and the launchers use neither.
/// What differs between the host and CUDA backends: how the ranks' memory is allocated and
/// connected once they have met, and how a rank runs. Starting, meeting and reaping the ranks
/// is shared.
pub(crate) trait Backend {
    /// Extra environment of its worker processes (which backend they are).
    fn worker_env(&self) -> &'static [(&'static str, &'static str)];
    /// The end of the env rendezvous name, so that a host job and a CUDA job of one launcher
    /// never meet.
    fn tag(&self) -> &'static str;
    /// How long a rank waits for the rendezvous, for a job of timeout `own`.
    fn join_wait(&self, own: Duration) -> Duration;
    /// How long rank 0 gives its workers to finish once it is done.
    fn linger(&self, own: Duration) -> Duration;
    /// Rank 0's checks before anyone is started or accepted.
    fn preflight(&self, _req: &VerifyRequest) -> Result<()> {
        Ok(())
    }
    /// Whether ranks placed as `env` says meet and talk over TCP (`forced` by the caller);
    /// an error when this backend cannot run them.
    fn over_tcp(&self, env: &EnvInfo, forced: Option<bool>) -> Result<bool>;
    /// Every rank as a thread of this process.
    fn threads(&self, req: &VerifyRequest, progress: Progress) -> Result<VerifyReport>;
    /// Rank 0 once the others joined (`streams[i]` is rank `i + 1`, nothing replied yet):
    /// allocate, hand the others the job and the memory, run rank 0, report.
    fn lead(
        &self,
        streams: Vec<UnixStream>,
        pids: &[i32],
        job: (&VerifyRequest, &str),
        token: &str,
        own: Duration,
        progress: Progress,
    ) -> Result<VerifyReport>;
    /// Any other rank once it joined: receive the job, connect to the others' memory, run.
    fn follow(
        &self,
        s: UnixStream,
        deadline: Instant,
        rank: (usize, usize),
        token: &str,
        own: Duration,
    ) -> Result<()>;
}

/// A worker process of `backend` (`job::worker_main` picks it): joins rank 0 and follows.
/// Returns `Ok(false)` when the process was not started as a worker.
pub(crate) fn worker_main(backend: &dyn Backend) -> Result<bool> {
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
    if world == 0 || world > MAX_RANKS || rank >= world {
        return Err(RuntimeError::Launch(format!(
            "{ENV_RANK}={rank} {ENV_WORLD}={world}: not a rank of 1 to {MAX_RANKS}"
        )));
    }
    let own = worker_timeout()?;
    let (s, deadline) = join_local(&name, &token, rank, world, backend.join_wait(own))?;
    backend.follow(s, deadline, (rank, world), &token, own)?;
    Ok(true)
}

/// Rank 0 of a multi-host job: accept the others over TCP ([`rendezvous::gather`]: a rank
/// that arrives twice fails the job, naming both addresses). Returns the data addresses, the
/// job's nonce and where each rank came from.
fn tcp_leader(
    listener: &TcpListener,
    token: &str,
    req: &VerifyRequest,
    my_data: SocketAddr,
    timeout: Duration,
) -> Result<(Vec<SocketAddr>, String, Vec<Option<SocketAddr>>)> {
    let world = req.ranks;
    let joined = rendezvous::gather(listener, token, world, timeout, &mut || Ok(()))?;
    let mut froms: Vec<Option<SocketAddr>> = vec![None; world];
    let mut addrs = vec![my_data; world];
    let mut streams = Vec::new();
    for j in joined {
        let rank = j.hello.rank;
        // `Listener::check` refused hellos without a data address.
        let mut data = j.hello.data.unwrap_or(my_data);
        if data.ip().is_unspecified() {
            data.set_ip(j.from.ip());
        }
        froms[rank] = Some(j.from);
        addrs[rank] = data;
        streams.push(j.stream);
    }
    let nonce = random_token();
    let job = Assignment {
        shape: None,
        pids: vec![],
        addrs: addrs.clone(),
        request: req.clone(),
        launch: "env".into(),
        nonce: nonce.clone(),
    };
    for s in &mut streams {
        write_frame(s, &Reply::Accepted)?;
        write_frame(s, &job)?;
    }
    Ok((addrs, nonce, froms))
}

/// Rank 0's watch on the rendezvous port while the job runs: a hello with the job's token
/// for a rank that already joined means a stranger joined in its place (or is trying to);
/// the job then fails at its end instead of reporting what it measured with the stranger.
struct LateWatch {
    stop: Arc<std::sync::atomic::AtomicBool>,
    seen: Arc<std::sync::Mutex<Option<RuntimeError>>>,
    thread: std::thread::JoinHandle<()>,
}

impl LateWatch {
    fn start(listener: TcpListener, token: String, froms: Vec<Option<SocketAddr>>) -> LateWatch {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = Arc::new(std::sync::Mutex::new(None));
        let (st, sn) = (stop.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(std::sync::atomic::Ordering::Acquire) {
                let by = Instant::now() + Duration::from_millis(50);
                let Ok(Some((mut s, from))) =
                    rendezvous::accept_by(&listener, by, &mut || Ok(()), "accept a rank")
                else {
                    continue;
                };
                let by = Instant::now() + rendezvous::HELLO_WAIT;
                let Some(h) = rendezvous::admit(&mut s, &from.to_string(), &token, froms.len(), by)
                else {
                    continue;
                };
                let first = froms[h.rank].unwrap_or(from);
                let e = rendezvous::twice(h.rank, &first, &from);
                rendezvous::refuse(&mut s, &from.to_string(), e.to_string());
                sn.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(e);
            }
        });
        LateWatch { stop, seen, thread }
    }

    /// Stop watching; the duplicate it saw, if any.
    fn finish(self) -> Option<RuntimeError> {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        let _ = self.thread.join();
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| RuntimeError::io(format!("resolve MASTER_ADDR {host}"), e))?
        .next()
        .ok_or_else(|| RuntimeError::Launch(format!("MASTER_ADDR {host} has no address")))
}

/// Rank `env.rank` of a job whose ranks meet over TCP at MASTER_ADDR:MASTER_PORT (across
/// hosts, or forced): rank 0 gathers the others and watches the port for duplicates while
/// the job runs. Rank 0 returns the report, the others `None`.
pub(crate) fn run_tcp(
    req: &VerifyRequest,
    env: &EnvInfo,
    timeout: Duration,
    progress: Progress,
) -> Result<Option<VerifyReport>> {
    let master = resolve(&env.master_addr, env.master_port)?;
    if env.rank != 0 {
        return tcp_member(req, env, master, timeout);
    }
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
    let (addrs, nonce, froms) = tcp_leader(&listener, &env.token, req, data_addr, timeout)?;
    let watch = LateWatch::start(listener, env.token.clone(), froms);
    let r = TcpTransport::connect(0, data, &addrs, &nonce, req.storage_bytes(), timeout)
        .and_then(|mut t| run_rank(&mut t, req, "env", progress));
    match watch.finish() {
        Some(e) => Err(e),
        None => r,
    }
}

/// A rank other than 0 of a multi-host job: join rank 0 at `master` over TCP, check the job
/// it sends like a one-host rank does, and run it on the TCP mesh. Over TCP nobody's
/// credentials can be checked: whoever listens at MASTER_PORT receives this rank's hello,
/// must then prove the job token before this rank proves it (see docs/runtime.md), and what
/// it sends back is bounded and validated before use.
fn tcp_member(
    req: &VerifyRequest,
    env: &EnvInfo,
    master: SocketAddr,
    timeout: Duration,
) -> Result<Option<VerifyReport>> {
    let deadline = Instant::now() + timeout;
    let mut s = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(
            &master,
            left.clamp(Duration::from_millis(1), Duration::from_secs(1)),
        ) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => {
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
    let whom = format!("the listener at {master}");
    rendezvous::introduce(
        &mut s,
        &env.token,
        (env.rank, env.world),
        Some(data_addr),
        deadline,
        &whom,
    )?;
    let mut job: Assignment = read_frame_by(&mut s, deadline, crate::wire::MAX_FRAME)?;
    vet_request(
        &mut job.request,
        env.world,
        Duration::from_secs_f64(req.timeout_s),
    )?;
    if job.addrs.len() != env.world || job.nonce.len() < 16 {
        return Err(RuntimeError::Rendezvous(format!(
            "rank 0's job: {} data addresses for {} ranks, or no nonce",
            job.addrs.len(),
            env.world
        )));
    }
    let mut t = TcpTransport::connect(
        env.rank,
        data,
        &job.addrs,
        &job.nonce,
        job.request.storage_bytes(),
        Duration::from_secs_f64(job.request.timeout_s),
    )?;
    run_rank(&mut t, &job.request, "env", None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rendezvous::Hello;
    use std::collections::HashMap;
    use std::io::Write;

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

    #[test]
    fn nodelists_are_counted_before_they_are_expanded() {
        // Expanded, the first list would be 10^10 names: refused, it was counted instead.
        let e = expand_nodelist("a[0-99999]b[0-99999]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 65536 hosts"), "{e}");
        let e = expand_nodelist("a[0-18446744073709551615]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("65536"), "{e}");
        assert_eq!(expand_nodelist("n[0-65535]").unwrap().len(), 65_536);
        assert!(expand_nodelist("n[0-65535],x").is_err());
    }

    #[test]
    fn launcher_world_sizes_beyond_the_limit_are_refused() {
        for w in ["4294967296", "0", "4097"] {
            let e = detect(&[("RANK", "0"), ("WORLD_SIZE", w), ("MASTER_PORT", "1")])
                .unwrap_err()
                .to_string();
            assert!(e.contains("outside 1 to 4096"), "{e}");
        }
    }

    fn good_request() -> VerifyRequest {
        VerifyRequest {
            max_bytes: 1 << 16,
            ..VerifyRequest::default()
        }
    }

    #[test]
    fn hostile_jobs_are_refused_and_timeouts_clamped() {
        let own = Duration::from_secs(5);
        let mut r = good_request();
        r.timeout_s = 1e9;
        vet_request(&mut r, 2, own).unwrap();
        assert_eq!(r.timeout_s, 5.0);
        type Edit = fn(&mut VerifyRequest);
        let bad: [(Edit, &str); 8] = [
            (|r| r.timeout_s = f64::INFINITY, "timeout"),
            (|r| r.timeout_s = f64::NAN, "timeout"),
            (|r| r.max_bytes = 1 << 62, "sizes"),
            (|r| r.ranks = 3, "started for 2"),
            (|r| r.nchannels = 1 << 40, "channels"),
            (|r| r.root = 7, "root"),
            (
                |r| {
                    r.max_bytes = 1 << 30;
                    r.step_factor = 1.000_000_001;
                },
                "sizes",
            ),
            (|r| r.iters = usize::MAX, "iterations"),
        ];
        for (edit, what) in bad {
            let mut r = good_request();
            edit(&mut r);
            let e = vet_request(&mut r, 2, own).expect_err(what).to_string();
            assert!(
                e.contains("rank 0's job") && e.contains(what),
                "{what}: {e}"
            );
        }
    }

    /// Rank 0 played by a thread of the same user that sends `job` with a real segment of
    /// `real` shape; what the joining rank makes of it.
    fn join_fake_leader(real: ArenaShape, job: Assignment) -> Result<(ShmTransport, Assignment)> {
        let name = unix_name(&format!(
            "fake-leader-{}-{}",
            std::process::id(),
            random_token()
        ));
        let listener = bind_unix(&name).unwrap();
        let leader = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let h: Hello = read_frame(&mut s).unwrap();
            let by = Instant::now() + Duration::from_secs(3);
            crate::auth::lead(&mut s, "t", (1, 2), &h.nonce, by).unwrap();
            let (_arena, fd) = Arena::memfd(real, "fake").unwrap();
            write_frame(&mut s, &Reply::Accepted).unwrap();
            send_fd(&s, &fd).unwrap();
            write_frame(&mut s, &job).unwrap();
            // Hold the segment until the member has looked at it.
            let _ = s.read(&mut [0u8; 1]);
        });
        let r = local_member(&name, "t", 1, 2, Duration::from_secs(3));
        let out = r.map(|(t, j)| {
            drop(t);
            j
        });
        leader.join().unwrap();
        out.map(|j| {
            let s = j.shape.unwrap();
            (
                ShmTransport::new(
                    Arena::anonymous(s).unwrap(),
                    1,
                    &[None, None],
                    Duration::from_secs(1),
                )
                .unwrap(),
                j,
            )
        })
    }

    #[test]
    fn a_wrapping_arena_shape_from_rank_0_is_refused() {
        let req = good_request();
        let real = req.arena_shape(2);
        let mk = |shape, request| Assignment {
            shape: Some(shape),
            pids: vec![1, 1],
            addrs: vec![],
            request,
            launch: "env".into(),
            nonce: String::new(),
        };
        let wrap = ArenaShape {
            storage_bytes: usize::MAX - (2 << 20) + 1,
            ..real
        };
        let e = join_fake_leader(real, mk(wrap, req.clone()))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("does not match"), "{e}");
        let mut huge = req.clone();
        huge.max_bytes = 1 << 62;
        let e = join_fake_leader(real, mk(real, huge))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("sizes"), "{e}");
        let mut slow = req.clone();
        slow.timeout_s = 1e300;
        let (_, j) = join_fake_leader(real, mk(real, slow)).unwrap();
        assert_eq!(j.request.timeout_s, 3.0);
    }

    /// The stranger of the cross-user tests: this test binary re-run as uid 65534, which
    /// binds or connects to the abstract name in `TOPO_TEST_STRANGER` (`bind:NAME` prints
    /// how many bytes the first connection sent; `connect:NAME:TOKEN` sends a rank 1 hello).
    #[test]
    #[ignore = "run by the cross-user tests as another user"]
    fn stranger_child() {
        let Ok(what) = std::env::var("TOPO_TEST_STRANGER") else {
            return;
        };
        if let Some(name) = what.strip_prefix("bind:") {
            let l = bind_unix(name).unwrap();
            println!("bound");
            l.set_nonblocking(true).unwrap();
            let Ok(Some(mut s)) = accept_unix_by(&l, Instant::now() + Duration::from_secs(5))
            else {
                println!("got no connection");
                return;
            };
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got);
            println!("got {} bytes", got.len());
        } else if let Some(rest) = what.strip_prefix("connect:") {
            let (name, token) = rest.split_once(':').unwrap();
            let addr = UnixAddr::from_abstract_name(name.as_bytes()).unwrap();
            let mut s = UnixStream::connect_addr(&addr).unwrap();
            let _ = token;
            let h = Hello {
                nonce: "0".repeat(32),
                rank: 1,
                world: 2,
                pid: 1,
                data: None,
            };
            // Rank 0 may refuse and close before the hello is written (EPIPE): what counts is
            // that nothing comes back.
            let _ = write_frame(&mut s, &h);
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got);
            println!("got {} bytes", got.len());
        }
    }

    /// The stranger as uid 65534, or `None` (said on stderr) when this user cannot switch.
    fn stranger(what: &str) -> Option<std::process::Child> {
        use std::os::unix::process::CommandExt;
        if !rustix::process::getuid().is_root() {
            eprintln!("skipped: the cross-user case needs root to run a process as uid 65534");
            return None;
        }
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "launch::tests::stranger_child",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("TOPO_TEST_STRANGER", what)
            .uid(65534)
            .gid(65534)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        Some(child)
    }

    fn wait_line(c: &mut std::process::Child, want: &str) -> String {
        use std::io::BufRead;
        let out = c.stdout.as_mut().unwrap();
        let mut r = std::io::BufReader::new(out);
        let mut all = String::new();
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            all.push_str(&line);
            // The harness prints the test's name on the same line before its output.
            if let Some(at) = line.find(want) {
                return line[at..].trim().to_string();
            }
            line.clear();
        }
        panic!("the stranger never said {want:?}: {all}");
    }

    #[test]
    fn a_joining_rank_sends_nothing_to_another_users_listener() {
        let name = unix_name(&format!("squat-{}", random_token()));
        let Some(mut c) = stranger(&format!("bind:{name}")) else {
            return;
        };
        wait_line(&mut c, "bound");
        let e = join_local(&name, "secret-token", 1, 2, Duration::from_secs(3))
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("held by uid 65534") && e.contains("TOPO_JOB_TOKEN"),
            "{e}"
        );
        assert_eq!(wait_line(&mut c, "got"), "got 0 bytes");
        let _ = c.wait();
    }

    #[test]
    fn rank_0_refuses_another_users_hello_unread() {
        let token = random_token();
        let name = unix_name(&token);
        let listener = bind_unix(&name).unwrap();
        let Some(mut c) = stranger(&format!("connect:{name}:{token}")) else {
            return;
        };
        let e = accept_local(&listener, &token, 2, &mut [], Duration::from_millis(1500))
            .expect_err("the stranger is not rank 1")
            .to_string();
        assert!(e.contains("ranks [1] to join"), "{e}");
        drop(listener);
        assert_eq!(wait_line(&mut c, "got"), "got 0 bytes");
        let _ = c.wait();
    }

    fn accept_unix_by(l: &UnixListener, deadline: Instant) -> std::io::Result<Option<UnixStream>> {
        while Instant::now() < deadline {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    return Ok(Some(s));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// A rank's hello and its half of the token handshake (which fails, unseen here, when
    /// `token` is not the leader's).
    fn tcp_hello(addr: SocketAddr, token: &str, rank: usize, world: usize) -> TcpStream {
        let mut s = TcpStream::connect(addr).unwrap();
        let nonce = crate::auth::nonce().unwrap();
        let h = Hello {
            nonce: nonce.clone(),
            rank,
            world,
            pid: 1,
            data: Some("127.0.0.1:9".parse().unwrap()),
        };
        write_frame(&mut s, &h).unwrap();
        let by = Instant::now() + Duration::from_secs(3);
        let _ = crate::auth::join(&mut s, token, (rank, world), &nonce, by, "test");
        s
    }

    #[test]
    fn a_joining_rank_never_sends_the_token_to_a_listener_that_cannot_prove_it() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let squatter = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut got = vec![0u8; 4];
            s.read_exact(&mut got).unwrap();
            got.resize(
                4 + u32::from_le_bytes(got[..4].try_into().unwrap()) as usize,
                0,
            );
            s.read_exact(&mut got[4..]).unwrap();
            let fake = crate::auth::Challenge::Prove {
                nonce: "ab".repeat(16),
                proof: "00".repeat(32),
            };
            write_frame(&mut s, &fake).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let _ = s.read_to_end(&mut got);
            got
        });
        let env = EnvInfo {
            launcher: "torchrun",
            rank: 1,
            world: 2,
            local_rank: 0,
            single_host: false,
            master_addr: "127.0.0.1".into(),
            master_port: addr.port(),
            token: "s3cret-job-token".into(),
        };
        let e = tcp_member(&good_request(), &env, addr, Duration::from_secs(3))
            .expect_err("the squatter is refused")
            .to_string();
        assert!(e.contains("does not know the job token"), "{e}");
        let got = String::from_utf8_lossy(&squatter.join().unwrap()).into_owned();
        assert!(
            got.contains("\"rank\":1") && !got.contains("s3cret"),
            "{got}"
        );
    }

    #[test]
    fn a_member_with_the_wrong_token_is_refused_and_the_real_rank_joins() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let req = VerifyRequest {
            ranks: 2,
            ..good_request()
        };
        let lead =
            std::thread::spawn(move || tcp_leader(&l, "tok", &req, addr, Duration::from_secs(3)));
        let _wrong = tcp_hello(addr, "guess", 1, 2);
        let mut real = tcp_hello(addr, "tok", 1, 2);
        let (addrs, _, froms) = lead.join().unwrap().unwrap();
        assert_eq!(froms[1], Some(real.local_addr().unwrap()));
        assert_eq!(addrs[1], "127.0.0.1:9".parse().unwrap());
        real.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let reply: Reply = read_frame(&mut real).unwrap();
        assert!(matches!(reply, Reply::Accepted));
    }

    #[test]
    fn a_dripping_tcp_peer_cannot_hold_rank_0_past_its_timeout() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = stop.clone();
        // Several drippers, one after another: each alone would stay within its hello wait.
        let drip = std::thread::spawn(move || {
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(mut s) = TcpStream::connect(addr) else {
                    return;
                };
                let _ = s.write_all(&100u32.to_le_bytes());
                for _ in 0..30 {
                    std::thread::sleep(Duration::from_millis(100));
                    if st.load(std::sync::atomic::Ordering::Relaxed) || s.write_all(b" ").is_err() {
                        break;
                    }
                }
            }
        });
        let req = VerifyRequest {
            ranks: 2,
            ..good_request()
        };
        // Without the job's deadline rank 0 would wait on drippers forever: the channel's
        // timeout only turns that hang into a failure.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(tcp_leader(&l, "tok", &req, addr, Duration::from_secs(1)));
        });
        let r = rx.recv_timeout(Duration::from_secs(60));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        drip.join().unwrap();
        let e = r.expect("rank 0 ignored its deadline").unwrap_err();
        assert!(e.to_string().contains("ranks [1] to join"), "{e}");
    }

    /// Ten connections that send nothing cost rank 0 no more than one `HELLO_WAIT` all
    /// together: they are vetted at once, each on its own deadline (issue 45: one at a time,
    /// 2 s each, they spent a 15 s timeout).
    #[test]
    fn silent_connections_do_not_spend_the_job_s_timeout() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let req = VerifyRequest {
            ranks: 2,
            ..good_request()
        };
        let t0 = Instant::now();
        let lead =
            std::thread::spawn(move || tcp_leader(&l, "tok", &req, addr, Duration::from_secs(6)));
        let silent: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(200));
        let _real = tcp_hello(addr, "tok", 1, 2);
        let r = lead.join().unwrap();
        assert!(r.is_ok(), "{:?}", r.err().map(|e| e.to_string()));
        assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
        drop(silent);
    }

    #[test]
    fn a_rank_that_joins_twice_over_tcp_fails_the_job_naming_both() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let req = VerifyRequest {
            ranks: 3,
            ..good_request()
        };
        let lead = std::thread::spawn(move || {
            tcp_leader(&l, "torchrun", &req, addr, Duration::from_secs(3))
        });
        let stranger = tcp_hello(addr, "torchrun", 1, 3);
        std::thread::sleep(Duration::from_millis(100));
        let mut real = tcp_hello(addr, "torchrun", 1, 3);
        let e = lead.join().unwrap().unwrap_err().to_string();
        let (a, b) = (stranger.local_addr().unwrap(), real.local_addr().unwrap());
        assert!(
            e.contains("rank 1 joined twice")
                && e.contains(&a.to_string())
                && e.contains(&b.to_string()),
            "{e}"
        );
        real.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let reply: Reply = read_frame(&mut real).unwrap();
        assert!(matches!(reply, Reply::Refused(_)));
    }

    #[test]
    fn a_late_duplicate_fails_the_job_at_its_end() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let first: SocketAddr = "10.0.0.1:5".parse().unwrap();
        let w = LateWatch::start(l, "tok".into(), vec![None, Some(first)]);
        // A wrong token is only logged.
        drop(tcp_hello(addr, "other", 1, 2));
        let mut s = tcp_hello(addr, "tok", 1, 2);
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let reply: Reply = read_frame(&mut s).unwrap();
        assert!(matches!(reply, Reply::Refused(_)));
        let e = w.finish().expect("the duplicate is kept").to_string();
        assert!(e.contains("rank 1 joined twice, from 10.0.0.1:5"), "{e}");
    }
}
