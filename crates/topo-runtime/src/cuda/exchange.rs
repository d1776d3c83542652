//! The socket protocol of a multi-process CUDA job, after the launcher's rendezvous: every
//! rank's communication memory handed to every other rank, a barrier, and the results
//! gathered on rank 0. It runs as a star through rank 0 over the rendezvous streams (one per
//! other rank), so it needs no GPU and is tested with memfds.
//!
//! * **Exchange**: each rank sends rank 0 an [`Export`] frame (with the job token) and, for
//!   cuMem and SHM, the file descriptor after it (SCM_RIGHTS); rank 0 checks them and sends each
//!   rank the table of all exports followed by the other ranks' descriptors in rank order.
//! * **Barrier**: one byte each way (`b` arrive, `g` go, `x` a rank failed).
//! * **Gather**: each rank sends `r` and a frame of its per-row figures.
//!
//! The exchange and the gather each run against one deadline (a peer that sends a byte at a
//! time cannot stretch them); a barrier waits at most the job's timeout; a closed stream is
//! the peer's death, named by rank.
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Result, RuntimeError};
use crate::launch::{recv_fd, send_fd};
#[cfg(test)]
use crate::wire::read_frame;
use crate::wire::{MAX_FRAME, read_frame_by, write_frame};

/// Largest communication allocation a peer may announce (bounds what an import maps).
const MAX_EXPORT: usize = 1 << 40;

/// How a rank's communication memory reaches the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Export {
    /// A cuMem VMM allocation of `bytes` on GPU `gpu`; its POSIX fd follows the frame.
    CuMem { bytes: usize, gpu: usize },
    /// The legacy IPC handle (64 bytes) of a `cuMemAlloc` buffer of `bytes`.
    Ipc { handle: Vec<u8>, bytes: usize },
    /// Pinned host memory: a memfd of `bytes`, which follows the frame.
    Shm { bytes: usize },
}

impl Export {
    /// Whether a file descriptor travels with it.
    pub fn has_fd(&self) -> bool {
        matches!(self, Export::CuMem { .. } | Export::Shm { .. })
    }

    fn bytes(&self) -> usize {
        match self {
            Export::CuMem { bytes, .. } | Export::Ipc { bytes, .. } | Export::Shm { bytes } => {
                *bytes
            }
        }
    }

    /// A peer's export, checked before anything is mapped from it.
    fn vet(&self, rank: usize) -> Result<()> {
        let bad = |why: String| {
            Err(RuntimeError::Rendezvous(format!(
                "rank {rank} offered unusable memory: {why}"
            )))
        };
        if self.bytes() == 0 || self.bytes() > MAX_EXPORT {
            return bad(format!("{} bytes", self.bytes()));
        }
        if let Export::Ipc { handle, .. } = self
            && handle.len() != 64
        {
            return bad(format!("an IPC handle of {} bytes, not 64", handle.len()));
        }
        Ok(())
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Offer {
    token: String,
    rank: usize,
    export: Export,
}

#[derive(Debug, Serialize, Deserialize)]
struct Table {
    token: String,
    exports: Vec<Export>,
}

/// A peer's memory as received: what it is and, for cuMem and SHM, its descriptor.
#[derive(Debug)]
pub struct Received {
    pub export: Export,
    pub fd: Option<OwnedFd>,
}

fn lost<'a>(
    s: &UnixStream,
    rank: usize,
    during: &'a str,
) -> impl Fn(RuntimeError) -> RuntimeError + 'a {
    let secs = s
        .read_timeout()
        .ok()
        .flatten()
        .map_or(0.0, |d| d.as_secs_f64());
    move |e| match e {
        RuntimeError::Io { source, .. }
            if matches!(
                source.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            RuntimeError::Timeout {
                what: format!("rank {rank} during {during}"),
                secs,
            }
        }
        e => RuntimeError::PeerLost {
            rank,
            why: format!("its process went away during {during} ({e})"),
        },
    }
}

/// One phase of the protocol bounded by one deadline: an error past it is a timeout, one
/// before it the peer's death.
#[derive(Clone, Copy)]
struct Phase {
    deadline: Instant,
    secs: f64,
    during: &'static str,
}

impl Phase {
    fn new(timeout: Duration, during: &'static str) -> Phase {
        Phase {
            deadline: Instant::now() + timeout,
            secs: timeout.as_secs_f64(),
            during,
        }
    }

    fn fault(self, rank: usize) -> impl Fn(RuntimeError) -> RuntimeError {
        move |e| {
            if Instant::now() >= self.deadline {
                RuntimeError::Timeout {
                    what: format!("rank {rank} during {}", self.during),
                    secs: self.secs,
                }
            } else {
                RuntimeError::PeerLost {
                    rank,
                    why: format!("its process went away during {} ({e})", self.during),
                }
            }
        }
    }

    fn read<T: serde::de::DeserializeOwned>(self, mut s: &UnixStream, rank: usize) -> Result<T> {
        read_frame_by(&mut s, self.deadline, MAX_FRAME).map_err(self.fault(rank))
    }

    /// One byte from `rank` (the gather's marker), within the phase.
    fn byte(self, s: &UnixStream, rank: usize) -> Result<u8> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .map_err(|e| RuntimeError::io("socket timeout", e))?;
        read_byte(s, rank).map_err(|e| match e {
            RuntimeError::PeerLost { .. } => e,
            e => self.fault(rank)(e),
        })
    }

    /// Receive one descriptor from `rank`; a closed stream (no descriptor) is its death.
    fn recv_fd(self, s: &UnixStream, rank: usize) -> Result<OwnedFd> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .map_err(|e| RuntimeError::io("socket timeout", e))?;
        recv_fd(s).map_err(self.fault(rank))
    }
}

/// Rank 0: gather the export of every other rank (`streams[i]` is rank `i + 1`), then send
/// each the whole table and the others' descriptors. Returns every rank's entry; rank 0's
/// own has no descriptor (it has the memory itself). The whole exchange takes at most
/// `timeout`.
pub fn lead(
    streams: &mut [UnixStream],
    token: &str,
    mine: Export,
    my_fd: Option<&OwnedFd>,
    timeout: Duration,
) -> Result<Vec<Received>> {
    let phase = Phase::new(timeout, "the handle exchange");
    let mut got = vec![Received {
        export: mine,
        fd: None,
    }];
    for (i, s) in streams.iter_mut().enumerate() {
        let rank = i + 1;
        let o: Offer = phase.read(s, rank)?;
        if o.token != token {
            return Err(RuntimeError::Rendezvous(format!(
                "rank {rank} presented the wrong job token in the handle exchange"
            )));
        }
        if o.rank != rank {
            return Err(RuntimeError::Rendezvous(format!(
                "the stream of rank {rank} offered memory as rank {}",
                o.rank
            )));
        }
        o.export.vet(rank)?;
        let fd = if o.export.has_fd() {
            Some(phase.recv_fd(s, rank)?)
        } else {
            None
        };
        got.push(Received {
            export: o.export,
            fd,
        });
    }
    let table = Table {
        token: token.into(),
        exports: got.iter().map(|r| r.export.clone()).collect(),
    };
    for (i, s) in streams.iter_mut().enumerate() {
        let to = i + 1;
        write_frame(s, &table).map_err(lost(s, to, "the handle exchange"))?;
        for (r, entry) in got.iter().enumerate() {
            if r == to || !entry.export.has_fd() {
                continue;
            }
            let fd = if r == 0 { my_fd } else { entry.fd.as_ref() };
            let fd = fd.ok_or_else(|| {
                RuntimeError::Rendezvous(format!("no descriptor to pass for rank {r}"))
            })?;
            send_fd(s, fd).map_err(lost(s, to, "the handle exchange"))?;
        }
    }
    Ok(got)
}

/// Rank `rank` (not 0): offer this rank's memory to rank 0 and receive every rank's.
/// The own entry comes back without a descriptor. The whole exchange takes at most `timeout`.
pub fn follow(
    s: &mut UnixStream,
    token: &str,
    (rank, world): (usize, usize),
    mine: Export,
    my_fd: Option<&OwnedFd>,
    timeout: Duration,
) -> Result<Vec<Received>> {
    let phase = Phase::new(timeout, "the handle exchange");
    let offer = Offer {
        token: token.into(),
        rank,
        export: mine.clone(),
    };
    write_frame(s, &offer).map_err(lost(s, 0, "the handle exchange"))?;
    if mine.has_fd() {
        let fd = my_fd.ok_or_else(|| {
            RuntimeError::Rendezvous("this rank's memory has no descriptor to pass".into())
        })?;
        send_fd(s, fd).map_err(lost(s, 0, "the handle exchange"))?;
    }
    let t: Table = phase.read(s, 0)?;
    if t.token != token {
        return Err(RuntimeError::Rendezvous(
            "rank 0 answered with another job's token".into(),
        ));
    }
    if t.exports.len() != world || t.exports[rank] != mine {
        return Err(RuntimeError::Rendezvous(format!(
            "rank 0's table has {} entries for a world of {world}, or not this rank's",
            t.exports.len()
        )));
    }
    let mut out = Vec::new();
    for (r, export) in t.exports.into_iter().enumerate() {
        export.vet(r)?;
        let fd = if r != rank && export.has_fd() {
            Some(phase.recv_fd(s, 0)?)
        } else {
            None
        };
        out.push(Received { export, fd });
    }
    Ok(out)
}

/// The streams of a process job, for its barrier and the final gather.
pub enum Link {
    /// Rank 0: `streams[i]` is rank `i + 1`.
    Leader(Vec<UnixStream>),
    /// Any other rank: its stream to rank 0.
    Member(UnixStream),
}

impl Link {
    /// Reads on every stream give up after `timeout`.
    pub fn with_timeout(self, timeout: Duration) -> Result<Link> {
        let set = |s: &UnixStream| {
            s.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
                .map_err(|e| RuntimeError::io("socket timeout", e))
        };
        match &self {
            Link::Leader(v) => v.iter().try_for_each(set)?,
            Link::Member(s) => set(s)?,
        }
        Ok(self)
    }

    /// Wait until every rank has arrived; an error when one failed, died, or took too long.
    pub fn barrier(&self) -> Result<()> {
        match self {
            Link::Leader(v) => {
                for (i, s) in v.iter().enumerate() {
                    match read_byte(s, i + 1)? {
                        b'b' => {}
                        b'x' => {
                            self.fail();
                            return Err(RuntimeError::Device(format!(
                                "another rank failed (rank {})",
                                i + 1
                            )));
                        }
                        c => return Err(stray(i + 1, c)),
                    }
                }
                for (i, mut s) in v.iter().enumerate() {
                    s.write_all(b"g")
                        .map_err(|e| lost(s, i + 1, "a barrier")(RuntimeError::io("send", e)))?;
                }
                Ok(())
            }
            Link::Member(s) => {
                let mut w = s;
                w.write_all(b"b")
                    .map_err(|e| lost(s, 0, "a barrier")(RuntimeError::io("send", e)))?;
                match read_byte(s, 0)? {
                    b'g' => Ok(()),
                    b'x' => Err(RuntimeError::Device("another rank failed".into())),
                    c => Err(stray(0, c)),
                }
            }
        }
    }

    /// Tell the others this rank failed (best effort: they may be gone already).
    pub fn fail(&self) {
        match self {
            Link::Leader(v) => {
                for mut s in v {
                    let _ = s.write_all(b"x");
                }
            }
            Link::Member(s) => {
                let mut w = s;
                let _ = w.write_all(b"x");
            }
        }
    }

    /// A non-zero rank: send its per-row figures to rank 0 (exactly, as f64 bits).
    pub fn send_result(&self, rows: &[Vec<f64>]) -> Result<()> {
        let Link::Member(s) = self else {
            return Ok(());
        };
        let bits: Vec<Vec<u64>> = rows
            .iter()
            .map(|r| r.iter().map(|x| x.to_bits()).collect())
            .collect();
        let mut w = s;
        w.write_all(b"r")
            .map_err(|e| lost(s, 0, "the result")(RuntimeError::io("send", e)))?;
        write_frame(&mut w, &bits).map_err(lost(s, 0, "the result"))
    }

    /// Rank 0: the figures of ranks 1.., in rank order.
    pub fn gather(&self) -> Result<Vec<Vec<Vec<f64>>>> {
        let Link::Leader(v) = self else {
            return Ok(Vec::new());
        };
        let timeout = v
            .first()
            .and_then(|s| s.read_timeout().ok().flatten())
            .unwrap_or(Duration::from_secs(60));
        let phase = Phase::new(timeout, "the result");
        let mut out = Vec::new();
        for (i, s) in v.iter().enumerate() {
            match phase.byte(s, i + 1)? {
                b'r' => {}
                b'x' => {
                    return Err(RuntimeError::Device(format!(
                        "another rank failed (rank {})",
                        i + 1
                    )));
                }
                c => return Err(stray(i + 1, c)),
            }
            let bits: Vec<Vec<u64>> = phase.read(s, i + 1)?;
            out.push(
                bits.into_iter()
                    .map(|r| r.into_iter().map(f64::from_bits).collect())
                    .collect(),
            );
        }
        Ok(out)
    }
}

fn read_byte(s: &UnixStream, rank: usize) -> Result<u8> {
    let mut b = [0u8];
    let mut r = s;
    match r.read(&mut b) {
        Ok(0) => Err(RuntimeError::PeerLost {
            rank,
            why: "its process closed the connection".into(),
        }),
        Ok(_) => Ok(b[0]),
        Err(e) => Err(lost(s, rank, "a barrier")(RuntimeError::io("receive", e))),
    }
}

fn stray(rank: usize, c: u8) -> RuntimeError {
    RuntimeError::Rendezvous(format!(
        "rank {rank} sent byte {c:#04x} where a barrier was expected"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom};

    fn memfd(text: &[u8]) -> OwnedFd {
        let fd = rustix::fs::memfd_create("topo-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        let mut f = std::fs::File::from(fd);
        f.write_all(text).unwrap();
        f.into()
    }

    fn text_of(fd: OwnedFd) -> String {
        let mut f = std::fs::File::from(fd);
        f.seek(SeekFrom::Start(0)).unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        s
    }

    const SECS5: Duration = Duration::from_secs(5);

    fn ipc(b: u8) -> Export {
        Export::Ipc {
            handle: vec![b; 64],
            bytes: 4096,
        }
    }

    /// A job of `world` ranks as threads over socket pairs: rank 0 leads, the others follow,
    /// each with `exports[r]` (memfds standing in for the driver's descriptors).
    fn run_exchange(
        exports: Vec<Export>,
        token_of: impl Fn(usize) -> String,
    ) -> Vec<Result<Vec<Received>>> {
        let world = exports.len();
        let mut lead_side = Vec::new();
        let mut follow_side = Vec::new();
        for _ in 1..world {
            let (a, b) = UnixStream::pair().unwrap();
            a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            lead_side.push(a);
            follow_side.push(b);
        }
        std::thread::scope(|sc| {
            let mut hs = Vec::new();
            for (i, mut s) in follow_side.into_iter().enumerate() {
                let r = i + 1;
                let e = exports[r].clone();
                let tok = token_of(r);
                hs.push(sc.spawn(move || {
                    let fd = e.has_fd().then(|| memfd(format!("rank{r}").as_bytes()));
                    follow(&mut s, &tok, (r, world), e, fd.as_ref(), SECS5)
                }));
            }
            let e0 = exports[0].clone();
            let fd0 = e0.has_fd().then(|| memfd(b"rank0"));
            let mut res = vec![lead(&mut lead_side, &token_of(0), e0, fd0.as_ref(), SECS5)];
            drop(lead_side);
            res.extend(hs.into_iter().map(|h| h.join().unwrap()));
            res
        })
    }

    #[test]
    fn every_rank_receives_every_other_ranks_descriptor() {
        let ex = vec![
            Export::CuMem {
                bytes: 2 << 20,
                gpu: 0,
            },
            ipc(7),
            Export::Shm { bytes: 8192 },
        ];
        let res = run_exchange(ex.clone(), |_| "tok".into());
        for (me, r) in res.into_iter().enumerate() {
            let got = r.unwrap();
            assert_eq!(got.len(), 3);
            for (peer, g) in got.into_iter().enumerate() {
                assert_eq!(g.export, ex[peer]);
                match g.fd {
                    Some(fd) => {
                        assert_ne!(peer, me, "no descriptor of its own");
                        assert_eq!(text_of(fd), format!("rank{peer}"));
                    }
                    None => assert!(peer == me || !ex[peer].has_fd()),
                }
            }
        }
    }

    #[test]
    fn exports_serialise_and_round_trip() {
        for e in [
            Export::CuMem {
                bytes: 1 << 21,
                gpu: 3,
            },
            ipc(0xab),
            Export::Shm { bytes: 4096 },
        ] {
            let mut buf = Vec::new();
            write_frame(&mut buf, &e).unwrap();
            let back: Export = read_frame(&mut buf.as_slice()).unwrap();
            assert_eq!(back, e);
        }
        assert!(!ipc(1).has_fd());
        assert!(Export::Shm { bytes: 1 }.has_fd());
        let short = Export::Ipc {
            handle: vec![0; 10],
            bytes: 4096,
        };
        assert!(short.vet(2).unwrap_err().to_string().contains("not 64"));
        assert!(Export::Shm { bytes: 0 }.vet(1).is_err());
        assert!(
            Export::Shm {
                bytes: MAX_EXPORT + 1
            }
            .vet(1)
            .is_err()
        );
    }

    #[test]
    fn a_wrong_token_is_refused_by_name() {
        let res = run_exchange(vec![ipc(1), ipc(2)], |r| {
            if r == 1 { "other".into() } else { "tok".into() }
        });
        let e = res[0].as_ref().unwrap_err().to_string();
        assert!(e.contains("rank 1 presented the wrong job token"), "{e}");
        // The follower sees rank 0 go away instead of waiting forever.
        assert!(res[1].is_err());
    }

    #[test]
    fn a_peer_dying_mid_exchange_is_a_clear_error_not_a_hang() {
        let (mut a, b) = UnixStream::pair().unwrap();
        a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Rank 1 announces a cuMem export, then dies before its descriptor.
        let mut w = &b;
        write_frame(
            &mut w,
            &Offer {
                token: "tok".into(),
                rank: 1,
                export: Export::CuMem {
                    bytes: 4096,
                    gpu: 0,
                },
            },
        )
        .unwrap();
        drop(b);
        let e = lead(std::slice::from_mut(&mut a), "tok", ipc(0), None, SECS5).unwrap_err();
        assert!(matches!(e, RuntimeError::PeerLost { rank: 1, .. }), "{e}");
        assert!(e.to_string().contains("handle exchange"), "{e}");
        // Rank 0 dying before its table: the follower says so.
        let (mut c, d) = UnixStream::pair().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        drop(d);
        let e = follow(&mut c, "tok", (1, 2), ipc(1), None, SECS5).unwrap_err();
        assert!(matches!(e, RuntimeError::PeerLost { rank: 0, .. }), "{e}");
    }

    #[test]
    fn a_silent_peer_times_out() {
        let (mut a, _b) = UnixStream::pair().unwrap();
        let t = Duration::from_millis(100);
        let e = lead(std::slice::from_mut(&mut a), "tok", ipc(0), None, t).unwrap_err();
        assert!(matches!(e, RuntimeError::Timeout { .. }), "{e}");
    }

    #[test]
    fn a_dripping_peer_cannot_stretch_the_exchange() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let drip = std::thread::spawn(move || {
            let mut w = &b;
            // A 200-byte offer, one byte every 50 ms: 10 s in all, far past the deadline.
            let _ = w.write_all(&200u32.to_le_bytes());
            for _ in 0..200 {
                std::thread::sleep(Duration::from_millis(50));
                if w.write_all(b" ").is_err() {
                    return;
                }
            }
        });
        let t = Duration::from_millis(300);
        let e = lead(std::slice::from_mut(&mut a), "tok", ipc(0), None, t).unwrap_err();
        assert!(matches!(e, RuntimeError::Timeout { .. }), "{e}");
        drop(a);
        drip.join().unwrap();
    }

    fn links(world: usize) -> (Link, Vec<Link>) {
        let (mut l, mut m) = (Vec::new(), Vec::new());
        for _ in 1..world {
            let (a, b) = UnixStream::pair().unwrap();
            l.push(a);
            m.push(
                Link::Member(b)
                    .with_timeout(Duration::from_secs(5))
                    .unwrap(),
            );
        }
        (
            Link::Leader(l)
                .with_timeout(Duration::from_secs(5))
                .unwrap(),
            m,
        )
    }

    #[test]
    fn the_barrier_and_gather_cross_processes_streams() {
        let (lead, members) = links(3);
        std::thread::scope(|sc| {
            let hs: Vec<_> = members
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    sc.spawn(move || {
                        m.barrier()?;
                        m.barrier()?;
                        m.send_result(&[vec![1.5 + i as f64, 0.0], vec![f64::MAX]])
                    })
                })
                .collect();
            lead.barrier().unwrap();
            lead.barrier().unwrap();
            let got = lead.gather().unwrap();
            assert_eq!(got.len(), 2);
            assert_eq!(got[1], vec![vec![2.5, 0.0], vec![f64::MAX]]);
            for h in hs {
                h.join().unwrap().unwrap();
            }
        });
    }

    #[test]
    fn a_failed_or_dead_rank_breaks_the_barrier() {
        let (lead, members) = links(3);
        members[1].fail();
        std::thread::scope(|sc| {
            // Rank 1 arrives; rank 0 then meets rank 2's failure and tells rank 1.
            let h = sc.spawn(|| members[0].barrier());
            let e = lead.barrier().unwrap_err().to_string();
            assert!(e.contains("another rank failed"), "{e}");
            let e = h.join().unwrap().unwrap_err().to_string();
            assert!(e.contains("another rank failed"), "{e}");
        });
        let (lead, mut members) = links(2);
        drop(members.pop());
        let e = lead.barrier().unwrap_err();
        assert!(matches!(e, RuntimeError::PeerLost { rank: 1, .. }), "{e}");
    }
}
