//! TCP between hosts: a full mesh with several sockets per peer (channel `c` uses socket
//! `c % sockets`), like NCCL's NET/Socket. Every connection opens with the job's nonce (chosen
//! by rank 0 at random and sent only to the ranks it accepted), so a stranger on a data port
//! is refused and logged while the job goes on; the accepts share the job's one deadline.
//!
//! Each socket has a receiver thread that drains it into a queue in user space (NCCL's proxy
//! thread plays this part): a rank that is blocked sending never stops its own socket from
//! being read, so schedules that send a whole chunk before receiving (ring step 0) cannot
//! deadlock on the kernel's socket buffers, whatever the message size. The queue is bounded
//! (twice the rank's storage and some slack: no schedule has more than one buffer in flight
//! on a socket), so a peer that sends what nobody asked for fails the job instead of filling
//! memory.
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Transport, TransportKind};
use crate::error::{Result, RuntimeError};
use crate::rendezvous::{Vetter, vet_each};
use crate::types::Protocol;
use crate::wire::{log_refusal, read_frame_by, write_frame};

/// Sockets per peer.
pub const SOCKETS_PER_PEER: usize = 2;
const PIECE: usize = 256 * 1024;

#[derive(Serialize, Deserialize)]
struct Hello {
    /// The job's nonce.
    token: String,
    rank: usize,
    socket: usize,
}

/// Bytes received on one socket and not yet taken, filled by its receiver thread.
#[derive(Default)]
struct Inbox {
    data: VecDeque<u8>,
    /// Set when the socket reached EOF or failed.
    closed: Option<String>,
}

struct Rx {
    inbox: Mutex<Inbox>,
    ready: Condvar,
    /// The most bytes the queue may hold.
    cap: usize,
}

fn spawn_reader(mut s: TcpStream, rx: Arc<Rx>) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let r = s.read(&mut buf);
            let mut inbox = rx.inbox.lock().unwrap_or_else(|e| e.into_inner());
            match r {
                Ok(0) => inbox.closed = Some("it closed its connection".into()),
                Ok(k) if inbox.data.len() + k > rx.cap => {
                    inbox.closed = Some(format!(
                        "it sent more than {} bytes nobody received (not this job's protocol)",
                        rx.cap
                    ))
                }
                Ok(k) => inbox.data.extend(&buf[..k]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => inbox.closed = Some(format!("its socket failed: {e}")),
            }
            let done = inbox.closed.is_some();
            drop(inbox);
            rx.ready.notify_all();
            if done {
                return;
            }
        }
    });
}

/// The bytes one socket's queue may hold for a rank with `storage_bytes` of buffers.
fn inbox_cap(storage_bytes: usize) -> usize {
    storage_bytes.saturating_mul(2).saturating_add(16 << 20)
}

/// Accept the data connections of the ranks below `rank` into `socks`, each presenting the
/// job's nonce `token`, all before `deadline`, through the rendezvous's accept loop
/// ([`vet_each`]): each connection's hello is read on a thread of its own within
/// [`HELLO_WAIT`](crate::rendezvous::HELLO_WAIT), so strangers that connect and stay silent cannot spend the job's timeout.
fn accept_lower(
    listener: &TcpListener,
    rank: usize,
    token: &str,
    deadline: Instant,
    timeout: Duration,
    socks: &mut [Vec<Option<TcpStream>>],
) -> Result<()> {
    let mut want = rank * SOCKETS_PER_PEER;
    if want == 0 {
        return Ok(());
    }
    let token: Arc<str> = token.into();
    let vet: Vetter<TcpStream, SocketAddr, (usize, usize)> =
        Arc::new(
            move |st, from, by| match read_frame_by::<Hello>(st, by, 4096) {
                Ok(h) if *h.token == *token && h.rank < rank && h.socket < SOCKETS_PER_PEER => {
                    Some((h.rank, h.socket))
                }
                Ok(_) => {
                    log_refusal(
                        &from.to_string(),
                        "wrong job token or rank on a data connection",
                    );
                    None
                }
                Err(e) => {
                    log_refusal(&from.to_string(), &e.to_string());
                    None
                }
            },
        );
    let done = vet_each(
        listener,
        deadline,
        &mut || Ok(()),
        "accept a data connection",
        vet,
        &mut |st, from, (r, k)| {
            if socks[r][k].is_some() {
                log_refusal(&from.to_string(), "a second data connection for one socket");
                return Ok(false);
            }
            st.set_read_timeout(Some(timeout))
                .map_err(|e| RuntimeError::io("set socket timeout", e))?;
            socks[r][k] = Some(st);
            want -= 1;
            Ok(want == 0)
        },
    )?;
    if !done {
        let missing: Vec<usize> = (0..rank)
            .filter(|&r| socks[r].iter().any(Option::is_none))
            .collect();
        return Err(RuntimeError::Timeout {
            what: format!("data connections from ranks {missing:?}"),
            secs: timeout.as_secs_f64(),
        });
    }
    Ok(())
}

/// A rank's TCP endpoint.
pub struct TcpTransport {
    rank: usize,
    nranks: usize,
    socks: Vec<Vec<Option<TcpStream>>>,
    rx: Vec<Vec<Option<Arc<Rx>>>>,
    storage: Vec<u64>,
    timeout: Duration,
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        // Wake the receiver threads (their reads return) so they exit.
        for s in self.socks.iter().flatten().flatten() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// A failed write to `rank`, after `waited`: a peer that stops reading fills the socket and
/// the write times out, which says how long it really waited (it once said 0.0 s after 33).
fn lost(rank: usize, e: std::io::Error, waited: Duration) -> RuntimeError {
    use std::io::ErrorKind::*;
    match e.kind() {
        WouldBlock | TimedOut => RuntimeError::Timeout {
            what: format!("rank {rank} to read what this rank sends"),
            secs: waited.as_secs_f64(),
        },
        _ => RuntimeError::PeerLost {
            rank,
            why: format!("its socket failed: {e}"),
        },
    }
}

impl TcpTransport {
    /// Connect the mesh. `listener` is this rank's data listener (its address was sent to
    /// every peer through the rendezvous); `addrs[r]` is rank r's; `token` is the job's
    /// nonce; `timeout` bounds the whole mesh's set-up.
    pub fn connect(
        rank: usize,
        listener: TcpListener,
        addrs: &[SocketAddr],
        token: &str,
        storage_bytes: usize,
        timeout: Duration,
    ) -> Result<TcpTransport> {
        let n = addrs.len();
        let deadline = Instant::now() + timeout;
        let mut socks: Vec<Vec<Option<TcpStream>>> = (0..n)
            .map(|_| (0..SOCKETS_PER_PEER).map(|_| None).collect())
            .collect();
        // Connect to higher ranks (their listeners exist already: the backlog holds us).
        for (peer, addr) in addrs.iter().enumerate().skip(rank + 1) {
            for (s, slot) in socks[peer].iter_mut().enumerate() {
                let mut st = loop {
                    match TcpStream::connect_timeout(addr, Duration::from_secs(1)) {
                        Ok(st) => break st,
                        Err(e) if Instant::now() > deadline => {
                            return Err(RuntimeError::PeerLost {
                                rank: peer,
                                why: format!("cannot connect to {addr}: {e}"),
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                };
                st.set_read_timeout(Some(timeout))
                    .map_err(|e| RuntimeError::io("set socket timeout", e))?;
                write_frame(
                    &mut st,
                    &Hello {
                        token: token.into(),
                        rank,
                        socket: s,
                    },
                )?;
                *slot = Some(st);
            }
        }
        accept_lower(&listener, rank, token, deadline, timeout, &mut socks)?;
        let mut rx: Vec<Vec<Option<Arc<Rx>>>> = Vec::new();
        for peer in &socks {
            let mut row = Vec::new();
            for s in peer {
                row.push(match s {
                    Some(s) => {
                        let _ = s.set_nodelay(true);
                        let _ = s.set_read_timeout(None);
                        let _ = s.set_write_timeout(Some(timeout));
                        let r = Arc::new(Rx {
                            inbox: Mutex::default(),
                            ready: Condvar::new(),
                            cap: inbox_cap(storage_bytes),
                        });
                        let clone = s
                            .try_clone()
                            .map_err(|e| RuntimeError::io("clone a socket", e))?;
                        spawn_reader(clone, r.clone());
                        Some(r)
                    }
                    None => None,
                });
            }
            rx.push(row);
        }
        let mut storage = Vec::new();
        storage
            .try_reserve_exact(storage_bytes.div_ceil(8))
            .map_err(|_| {
                RuntimeError::Launch(format!("cannot allocate {storage_bytes} bytes of buffers"))
            })?;
        storage.resize(storage_bytes.div_ceil(8), 0u64);
        Ok(TcpTransport {
            rank,
            nranks: n,
            socks,
            rx,
            storage,
            timeout,
        })
    }

    fn sock(&mut self, peer: usize, chan: usize) -> &mut TcpStream {
        self.socks[peer][chan % SOCKETS_PER_PEER]
            .as_mut()
            .expect("connected mesh")
    }
}

impl Transport for TcpTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Tcp
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn nranks(&self) -> usize {
        self.nranks
    }
    fn piece_bytes(&self, _proto: Protocol) -> usize {
        PIECE
    }
    fn fifo_bytes(&self, _proto: Protocol) -> usize {
        4 * PIECE
    }
    fn send(&mut self, peer: usize, chan: usize, _proto: Protocol, data: &[u8]) -> Result<()> {
        let t0 = Instant::now();
        self.sock(peer, chan)
            .write_all(data)
            .map_err(|e| lost(peer, e, t0.elapsed()))
    }
    fn recv(&mut self, peer: usize, chan: usize, _proto: Protocol, out: &mut [u8]) -> Result<()> {
        let rx = self.rx[peer][chan % SOCKETS_PER_PEER]
            .as_ref()
            .expect("connected mesh");
        let deadline = Instant::now() + self.timeout;
        let mut inbox = rx.inbox.lock().unwrap_or_else(|e| e.into_inner());
        while inbox.data.len() < out.len() {
            if let Some(why) = &inbox.closed {
                return Err(RuntimeError::PeerLost {
                    rank: peer,
                    why: why.clone(),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(RuntimeError::Timeout {
                    what: format!("data from rank {peer}"),
                    secs: self.timeout.as_secs_f64(),
                });
            }
            inbox = rx
                .ready
                .wait_timeout(inbox, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let n = out.len();
        let (a, b) = inbox.data.as_slices();
        let k = a.len().min(n);
        out[..k].copy_from_slice(&a[..k]);
        out[k..].copy_from_slice(&b[..n - k]);
        inbox.data.drain(..n);
        Ok(())
    }
    fn barrier(&mut self) -> Result<()> {
        // Dissemination barrier over socket 0.
        let n = self.nranks;
        let mut k = 1;
        while k < n {
            let (to, from) = ((self.rank + k) % n, (self.rank + n - k) % n);
            self.send(to, 0, Protocol::Simple, &[1])?;
            let mut b = [0u8];
            self.recv(from, 0, Protocol::Simple, &mut b)?;
            k *= 2;
        }
        Ok(())
    }
    fn storage(&mut self) -> (*mut u8, usize) {
        let len = self.storage.len() * 8;
        (self.storage.as_mut_ptr() as *mut u8, len)
    }
    fn peer_storage_len(&self) -> usize {
        self.storage.len() * 8
    }
    fn peer_storage(&self, rank: usize) -> Option<*mut u8> {
        let _ = rank;
        None
    }
    fn abort(&self, _rank: usize) {
        // Peers notice the closed sockets when this rank exits.
    }
}

#[cfg(test)]
mod lost_tests {
    use super::*;

    /// A write that timed out says how long it waited, not 0.0 s (issue 45).
    #[test]
    fn a_timed_out_write_says_how_long_it_waited() {
        let e = lost(
            3,
            std::io::Error::from(std::io::ErrorKind::WouldBlock),
            Duration::from_secs(33),
        );
        let RuntimeError::Timeout { secs, what } = &e else {
            panic!("{e:?}");
        };
        assert_eq!(*secs, 33.0);
        assert!(what.contains("rank 3"), "{what}");
        assert!(e.to_string().contains("33"), "{e}");
    }
}

#[cfg(test)]
mod accept_tests {
    use super::*;
    use crate::rendezvous::HELLO_WAIT;

    /// Ten strangers that connect to a rank's data listener first and send nothing do not
    /// stop the real peer's sockets from joining within the job's timeout: their hellos are
    /// awaited concurrently (one at a time, 2 s each, spent 20 s against a 4 s timeout).
    #[test]
    fn silent_strangers_do_not_spend_the_mesh_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let silent: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let real: Vec<TcpStream> = (0..SOCKETS_PER_PEER)
            .map(|socket| {
                let mut st = TcpStream::connect(addr).unwrap();
                let hello = Hello {
                    token: "nonce".into(),
                    rank: 0,
                    socket,
                };
                write_frame(&mut st, &hello).unwrap();
                st
            })
            .collect();
        let timeout = Duration::from_secs(4);
        let t0 = Instant::now();
        let mut socks: Vec<Vec<Option<TcpStream>>> = (0..2).map(|_| vec![None, None]).collect();
        accept_lower(&listener, 1, "nonce", t0 + timeout, timeout, &mut socks).unwrap();
        assert!(socks[0].iter().all(Option::is_some));
        assert!(
            t0.elapsed() < HELLO_WAIT + Duration::from_secs(1),
            "{:?}",
            t0.elapsed()
        );
        drop((silent, real));
    }

    /// A stranger with the wrong nonce, and a second connection for a socket already taken,
    /// are refused while the real ones join.
    #[test]
    fn wrong_nonce_and_duplicate_sockets_are_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let send = |token: &str, socket: usize| {
            let mut st = TcpStream::connect(addr).unwrap();
            let hello = Hello {
                token: token.into(),
                rank: 0,
                socket,
            };
            write_frame(&mut st, &hello).unwrap();
            st
        };
        let keep = [send("guess", 0), send("nonce", 0), send("nonce", 0)];
        let timeout = Duration::from_secs(3);
        let mut socks: Vec<Vec<Option<TcpStream>>> = (0..2).map(|_| vec![None, None]).collect();
        let e = accept_lower(
            &listener,
            1,
            "nonce",
            Instant::now() + timeout,
            timeout,
            &mut socks,
        )
        .unwrap_err();
        assert!(e.to_string().contains("ranks [0]"), "{e}");
        assert!(socks[0][0].is_some() && socks[0][1].is_none());
        drop(keep);
    }
}
