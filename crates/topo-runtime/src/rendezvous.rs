//! One rendezvous for every launcher and backend: rank 0 accepts the other ranks on a
//! [`Listener`] (an abstract Unix socket on one host, TCP across hosts) in one loop against
//! one deadline; each connection is vetted the same way (the peer's uid where Unix gives it,
//! the hello's world size and rank, the job token proved by challenge and response in
//! [`crate::auth`]), and a rank that proves the token twice fails the job naming both
//! connections. A joining rank's side ([`introduce`]) is one function too.
//!
//! The host and CUDA launchers differ only in what rank 0 sends after the rendezvous.
use std::fmt::Display;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Result, RuntimeError};
use crate::wire::{Timed, log_refusal, read_frame_by, write_frame};

/// How long one connecting peer may take to send its hello and prove the token, within the
/// job's deadline: a stranger that connects and stays silent delays the others this long at
/// most.
pub(crate) const HELLO_WAIT: Duration = Duration::from_secs(2);

/// A joining rank's first frame.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Hello {
    /// The joining rank's nonce for the token handshake ([`crate::auth`]): the token itself
    /// never travels.
    pub(crate) nonce: String,
    pub(crate) rank: usize,
    pub(crate) world: usize,
    pub(crate) pid: i32,
    /// TCP rendezvous only: the rank's data listener.
    pub(crate) data: Option<SocketAddr>,
}

/// Rank 0's last word to a joining rank.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Reply {
    Refused(String),
    Accepted,
}

/// What one non-blocking accept found.
pub(crate) enum Incoming<S, F> {
    /// Nothing pending.
    Idle,
    /// A connection closed unread (another user's, or an interrupted accept).
    Dropped,
    Peer(S, F),
}

/// A rendezvous listener: Unix (peers of this user only) or TCP (anyone who can reach it,
/// so the token handshake is all that keeps strangers out).
pub(crate) trait Listener {
    /// Sent to the thread that vets it, and back.
    type Stream: Timed + Write + Send + 'static;
    /// How a peer is named in logs and errors.
    type From: Display + Clone + Send + 'static;
    /// Put the listener in non-blocking mode for [`accept_by`].
    fn nonblocking(&self) -> std::io::Result<()>;
    fn poll(&self) -> std::io::Result<Incoming<Self::Stream, Self::From>>;
    /// What the transport needs from a hello beyond the rank and the token.
    fn check(&self, _h: &Hello) -> std::result::Result<(), String> {
        Ok(())
    }
}

impl Listener for UnixListener {
    type Stream = UnixStream;
    type From = String;

    fn nonblocking(&self) -> std::io::Result<()> {
        self.set_nonblocking(true)
    }

    fn poll(&self) -> std::io::Result<Incoming<UnixStream, String>> {
        match self.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                Ok(match same_user(&s, rustix::process::getuid()) {
                    Some(from) => Incoming::Peer(s, from),
                    None => Incoming::Dropped,
                })
            }
            Err(e) => idle_or(e),
        }
    }
}

impl Listener for TcpListener {
    type Stream = TcpStream;
    type From = SocketAddr;

    fn nonblocking(&self) -> std::io::Result<()> {
        self.set_nonblocking(true)
    }

    fn poll(&self) -> std::io::Result<Incoming<TcpStream, SocketAddr>> {
        match self.accept() {
            Ok((s, from)) => {
                s.set_nonblocking(false)?;
                Ok(Incoming::Peer(s, from))
            }
            Err(e) => idle_or(e),
        }
    }

    fn check(&self, h: &Hello) -> std::result::Result<(), String> {
        h.data.map(|_| ()).ok_or_else(|| "no data address".into())
    }
}

fn idle_or<S, F>(e: std::io::Error) -> std::io::Result<Incoming<S, F>> {
    match e.kind() {
        std::io::ErrorKind::WouldBlock => Ok(Incoming::Idle),
        std::io::ErrorKind::Interrupted => Ok(Incoming::Dropped),
        _ => Err(e),
    }
}

/// Accept one connection on a non-blocking `listener` before `deadline` (`None` past it),
/// calling `tick` between polls (the processes launcher checks its children there). `what`
/// names the accept in an error.
pub(crate) fn accept_by<L: Listener>(
    listener: &L,
    deadline: Instant,
    tick: &mut dyn FnMut() -> Result<()>,
    what: &str,
) -> Result<Option<(L::Stream, L::From)>> {
    loop {
        tick()?;
        match listener.poll().map_err(|e| RuntimeError::io(what, e))? {
            Incoming::Peer(s, from) => return Ok(Some((s, from))),
            Incoming::Dropped => {}
            Incoming::Idle if Instant::now() >= deadline => return Ok(None),
            Incoming::Idle => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// A rank that joined: its stream, where it came from and what it said.
pub(crate) struct Joined<S, F> {
    pub(crate) stream: S,
    pub(crate) from: F,
    pub(crate) hello: Hello,
}

/// The most connections vetted at once: past it a new connection waits in the listen queue
/// until one of them is done (at most [`HELLO_WAIT`]).
const MAX_VETTING: usize = 256;

/// A connection vetted by its own thread: the peer and what its vetting proved, or `None`
/// when refused.
type Vetted<S, F, T> = (S, F, Option<T>);

/// How one connection is vetted on its own thread before the instant given (the job's
/// deadline or [`HELLO_WAIT`] from its accept, whichever comes first): `Some` with what it
/// proved, `None` when it is refused (the vetter logs why).
pub(crate) type Vetter<S, F, T> =
    std::sync::Arc<dyn Fn(&mut S, &F, Instant) -> Option<T> + Send + Sync>;

/// The one accept loop of every listener that strangers can reach (rank 0's rendezvous and
/// each rank's data mesh): accept connections on `listener` before `deadline`, vet each on
/// a thread of its own with its own [`HELLO_WAIT`] (at most [`MAX_VETTING`] at once), and
/// hand what passed to `take` in this thread, until `take` says it has everything (`true`).
/// Vetting one at a time let ten silent connections, 2 s each, spend a job's whole timeout
/// (issue 45): now a stranger without the token costs the job nothing but a thread for 2 s.
/// `Ok(false)` when the deadline passed first; `what` names the accept in an error.
pub(crate) fn vet_each<L: Listener, T: Send + 'static>(
    listener: &L,
    deadline: Instant,
    tick: &mut dyn FnMut() -> Result<()>,
    what: &str,
    vet: Vetter<L::Stream, L::From, T>,
    take: &mut dyn FnMut(L::Stream, L::From, T) -> Result<bool>,
) -> Result<bool> {
    listener
        .nonblocking()
        .map_err(|e| RuntimeError::io(what, e))?;
    let (tx, rx) = std::sync::mpsc::channel::<Vetted<L::Stream, L::From, T>>();
    let mut vetting = 0usize;
    loop {
        tick()?;
        let mut busy = false;
        if vetting < MAX_VETTING {
            match listener.poll().map_err(|e| RuntimeError::io(what, e))? {
                Incoming::Peer(s, from) => {
                    busy = true;
                    vetting += 1;
                    let by = deadline.min(Instant::now() + HELLO_WAIT);
                    let (tx, vet) = (tx.clone(), vet.clone());
                    std::thread::spawn(move || {
                        let mut s = s;
                        let got = vet(&mut s, &from, by);
                        // The accepts may be over: then nobody listens, and the stream closes.
                        let _ = tx.send((s, from, got));
                    });
                }
                Incoming::Dropped => busy = true,
                Incoming::Idle => {}
            }
        }
        while let Ok((s, from, got)) = rx.try_recv() {
            busy = true;
            vetting -= 1;
            if let Some(got) = got
                && take(s, from, got)?
            {
                return Ok(true);
            }
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        if !busy {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Rank 0: accept ranks 1..world before `timeout` runs out through [`vet_each`], each
/// vetted by [`admit`], then by the listener's own check. Returns the ranks in rank order;
/// nothing has been replied yet (rank 0 sends [`Reply::Accepted`] and the job once it has
/// everyone).
pub(crate) fn gather<L: Listener>(
    listener: &L,
    token: &str,
    world: usize,
    timeout: Duration,
    tick: &mut dyn FnMut() -> Result<()>,
) -> Result<Vec<Joined<L::Stream, L::From>>> {
    let deadline = Instant::now() + timeout;
    let mut joined: Vec<Option<Joined<L::Stream, L::From>>> = (0..world).map(|_| None).collect();
    if world <= 1 {
        return Ok(Vec::new());
    }
    let token: std::sync::Arc<str> = token.into();
    let vet: Vetter<L::Stream, L::From, Hello> =
        std::sync::Arc::new(move |s, from, by| admit(s, &from.to_string(), &token, world, by));
    let mut count = 1;
    let done = vet_each(
        listener,
        deadline,
        tick,
        "accept a rank",
        vet,
        &mut |mut s, from, h| {
            if let Some(first) = &joined[h.rank] {
                let _ = write_frame(&mut s, &Reply::Refused("rank joined twice".into()));
                return Err(twice(h.rank, &first.from, &from));
            }
            if let Err(why) = listener.check(&h) {
                refuse(&mut s, &from.to_string(), why);
                return Ok(false);
            }
            let rank = h.rank;
            joined[rank] = Some(Joined {
                stream: s,
                from,
                hello: h,
            });
            count += 1;
            Ok(count >= world)
        },
    )?;
    if !done {
        let missing: Vec<usize> = (1..world).filter(|&r| joined[r].is_none()).collect();
        return Err(RuntimeError::Timeout {
            what: format!("ranks {missing:?} to join"),
            secs: timeout.as_secs_f64(),
        });
    }
    Ok(joined.into_iter().flatten().collect())
}

/// Read a connecting rank's hello, vet it against a job of `world` ranks and run rank 0's
/// half of the token handshake, all before `by`. `None` when the peer is refused (logged,
/// and told why when it said hello).
pub(crate) fn admit<S: Timed + Write>(
    s: &mut S,
    from: &str,
    token: &str,
    world: usize,
    by: Instant,
) -> Option<Hello> {
    let h = match read_frame_by::<Hello>(s, by, 4096) {
        Ok(h) => h,
        Err(e) => {
            log_refusal(from, &e.to_string());
            return None;
        }
    };
    match vet(&h, world).and_then(|_| crate::auth::lead(s, token, (h.rank, world), &h.nonce, by)) {
        Ok(()) => Some(h),
        Err(why) => {
            refuse(s, from, why);
            None
        }
    }
}

/// Log a refusal and tell the peer.
pub(crate) fn refuse<S: Write>(s: &mut S, from: &str, why: String) {
    log_refusal(from, &why);
    let _ = write_frame(s, &Reply::Refused(why));
}

/// A hello's claims against the job, before the token handshake; `Err(reason)` to refuse it.
fn vet(h: &Hello, world: usize) -> std::result::Result<(), String> {
    if h.world != world {
        return Err(format!(
            "world size mismatch: rank 0 runs {world} ranks, rank {} expects {}",
            h.rank, h.world
        ));
    }
    if h.rank == 0 || h.rank >= world {
        return Err(format!("rank {} is not in 1..{world}", h.rank));
    }
    Ok(())
}

/// Two connections proved the token for one rank: one of them is a stranger that knows it,
/// and running with it could give wrong results.
pub(crate) fn twice(rank: usize, first: &dyn Display, then: &dyn Display) -> RuntimeError {
    RuntimeError::Rendezvous(format!(
        "rank {rank} joined twice, from {first} and from {then}: a stranger knows the job token; set TOPO_JOB_TOKEN to a secret shared by the job's ranks"
    ))
}

/// A joining rank's side on a connected stream: its hello, its half of the token handshake
/// (rank 0 proves the token first), and rank 0's reply, all before `deadline`. `whom` names
/// the listener in errors.
pub(crate) fn introduce<S: Timed + Write>(
    s: &mut S,
    token: &str,
    (rank, world): (usize, usize),
    data: Option<SocketAddr>,
    deadline: Instant,
    whom: &str,
) -> Result<()> {
    let nonce = crate::auth::nonce()?;
    write_frame(
        s,
        &Hello {
            nonce: nonce.clone(),
            rank,
            world,
            pid: std::process::id() as i32,
            data,
        },
    )?;
    crate::auth::join(s, token, (rank, world), &nonce, deadline, whom)?;
    match read_frame_by::<Reply>(s, deadline, 4096)? {
        Reply::Refused(why) => Err(RuntimeError::Rendezvous(format!(
            "rank 0 refused rank {rank}: {why}"
        ))),
        Reply::Accepted => Ok(()),
    }
}

/// The peer's pid as text when it runs as user `me`; `None` (logged) when it is another
/// user or its credentials cannot be read: nothing is read from or sent to it.
fn same_user(s: &UnixStream, me: rustix::process::Uid) -> Option<String> {
    match rustix::net::sockopt::socket_peercred(s) {
        Ok(c) if c.uid == me => Some(format!("pid {}", c.pid.as_raw_nonzero())),
        Ok(c) => {
            log_refusal(
                &format!("pid {}", c.pid.as_raw_nonzero()),
                &format!(
                    "it runs as uid {}, this job as uid {}",
                    c.uid.as_raw(),
                    me.as_raw()
                ),
            );
            None
        }
        Err(e) => {
            log_refusal(
                "a local process",
                &format!("its credentials cannot be read: {e}"),
            );
            None
        }
    }
}

/// A joining rank's check of whoever listens on the rendezvous name, before it says hello:
/// on one host the name is guessable (it comes from the launcher's job id), and a process of
/// another user that bound it first would otherwise take part in the handshake and hand
/// this rank its own memory and job.
pub(crate) fn check_listener(s: &UnixStream, name: &str) -> Result<()> {
    let me = rustix::process::getuid();
    let c = rustix::net::sockopt::socket_peercred(s)
        .map_err(|e| RuntimeError::io("read the rendezvous listener's credentials", e))?;
    if c.uid != me {
        return Err(RuntimeError::Rendezvous(format!(
            "the rendezvous name {name:?} is held by uid {} (pid {}), not by this user (uid {}): another user's process took it; set TOPO_JOB_TOKEN to a secret shared by the job's ranks",
            c.uid.as_raw(),
            c.pid.as_raw_nonzero(),
            me.as_raw()
        )));
    }
    Ok(())
}
