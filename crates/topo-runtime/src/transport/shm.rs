//! Memory every rank maps: threads share an anonymous mapping, processes a memfd.
//!
//! The memfd has no name in any file system: nothing appears in /dev/shm, so a crash leaves
//! nothing behind (the memory goes when the last process holding it exits). It is created
//! mode 0600 by rank 0 and passed to the other local ranks over a Unix socket with
//! SCM_RIGHTS (by the processes launcher).
//!
//! Layout: a control block (abort word, one barrier word per rank), then one FIFO per
//! (source, destination, channel), then each rank's buffer storage.
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use memmap2::{MmapMut, MmapOptions};

use super::{Transport, TransportKind};
use crate::error::{Result, RuntimeError};
use crate::protocol::{FifoEnd, FifoHeader, Health, NSLOTS, Waiter, slot_payload};
use crate::types::Protocol;

const MAGIC: u64 = 0x746f_706f_7274_3031; // "toport01"
const FIFO_HDR: usize = 1024;
/// Where the per-rank barrier words start in the control block.
const CTRL_WORDS: usize = 1024;
const PAGE: usize = 4096;
const HUGE: usize = 2 << 20;

fn align(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// The arena's shape: every rank computes the same offsets from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArenaShape {
    pub nranks: usize,
    /// FIFO channels per (source, destination) pair.
    pub channels: usize,
    /// Bytes per FIFO slot.
    pub slot_bytes: usize,
    /// Buffer storage per rank, in bytes.
    pub storage_bytes: usize,
}

impl ArenaShape {
    /// A shape with the default slot size (32 KiB).
    pub fn new(nranks: usize, channels: usize, storage_bytes: usize) -> ArenaShape {
        ArenaShape {
            nranks,
            channels: channels.max(1),
            slot_bytes: 32 * 1024,
            storage_bytes: align(storage_bytes.max(PAGE), PAGE),
        }
    }
    fn ctrl_bytes(&self) -> usize {
        align(CTRL_WORDS + 128 * self.nranks, PAGE)
    }
    fn fifo_bytes(&self) -> usize {
        FIFO_HDR + NSLOTS as usize * self.slot_bytes
    }
    fn fifo_off(&self, src: usize, dst: usize, ch: usize) -> usize {
        self.ctrl_bytes() + ((src * self.nranks + dst) * self.channels + ch) * self.fifo_bytes()
    }
    fn storage_off(&self, rank: usize) -> usize {
        let start = align(self.fifo_off(self.nranks, 0, 0), HUGE);
        start + rank * align(self.storage_bytes, HUGE)
    }
    /// Total bytes of the arena.
    pub fn total(&self) -> usize {
        self.storage_off(self.nranks)
    }

    /// Check a shape received from another process: every count within the runtime's
    /// limits and every offset computed without overflow. The total, or why not.
    pub fn checked_total(&self) -> std::result::Result<usize, String> {
        if self.nranks == 0 || self.nranks > crate::types::MAX_RANKS {
            return Err(format!(
                "{} ranks (1 to {})",
                self.nranks,
                crate::types::MAX_RANKS
            ));
        }
        if self.channels == 0 || self.channels > MAX_CHANNELS {
            return Err(format!("{} channels (1 to {MAX_CHANNELS})", self.channels));
        }
        if !(1024..=1 << 20).contains(&self.slot_bytes) || !self.slot_bytes.is_multiple_of(128) {
            return Err(format!("{}-byte FIFO slots", self.slot_bytes));
        }
        if self.storage_bytes == 0 || !self.storage_bytes.is_multiple_of(PAGE) {
            return Err(format!("{} bytes of storage per rank", self.storage_bytes));
        }
        let n = self.nranks;
        let calc = || -> Option<usize> {
            let ctrl = checked_align(CTRL_WORDS.checked_add(n.checked_mul(128)?)?, PAGE)?;
            let fifo = FIFO_HDR.checked_add((NSLOTS as usize).checked_mul(self.slot_bytes)?)?;
            let fifos = n
                .checked_mul(n)?
                .checked_mul(self.channels)?
                .checked_mul(fifo)?;
            let start = checked_align(ctrl.checked_add(fifos)?, HUGE)?;
            let per = checked_align(self.storage_bytes, HUGE)?;
            let total = start.checked_add(n.checked_mul(per)?)?;
            // mmap offsets are i64 and isize bounds any slice of the mapping.
            (total <= isize::MAX as usize).then_some(total)
        };
        calc().ok_or_else(|| {
            format!(
                "{} bytes of storage per rank overflow the arena",
                self.storage_bytes
            )
        })
    }
}

/// The most FIFO channels per pair of ranks an arena may have.
pub const MAX_CHANNELS: usize = 256;

fn checked_align(x: usize, a: usize) -> Option<usize> {
    Some(x.checked_add(a - 1)? / a * a)
}

#[repr(C)]
struct Ctrl {
    magic: AtomicU64,
    /// 0, or 1 + the rank whose loss aborted the job.
    abort: CachePadded<AtomicU64>,
    /// Shared work: units claimed and units finished, cumulative over the job.
    claimed: CachePadded<AtomicU64>,
    finished: CachePadded<AtomicU64>,
}

/// Maps every page of `map` into this process's page table now. Each process that maps a
/// memfd faults its pages separately, and a dynamic share can touch a page of a peer's
/// buffer for the first time in any iteration: left to demand paging, the first sizes of a
/// sweep paid thousands of minor faults inside their timed loop (out-of-place AllReduce
/// between 2 processes ran 1.8-2.3x slower at 1 MiB than the in-place run that followed it on
/// the same, by then mapped, pages). MADV_POPULATE_WRITE (Linux 5.14) does it in one call;
/// older kernels get one atomic no-op write per page, which changes no byte a peer may
/// already be using.
fn prefault(map: &MmapMut) {
    if map.advise(memmap2::Advice::PopulateWrite).is_err() {
        touch_pages(map);
    }
}

/// One atomic no-op write per page of `map`.
fn touch_pages(map: &MmapMut) {
    let base = map.as_ptr();
    for off in (0..map.len()).step_by(PAGE) {
        // SAFETY: `off` is inside the mapping; the byte is only touched atomically, and
        // `fetch_or(0)` leaves its value as it was.
        unsafe { &*(base.add(off) as *const std::sync::atomic::AtomicU8) }
            .fetch_or(0, Ordering::Relaxed);
    }
}

/// An arena that passed `VerifyRequest::check_memory` but that this host will not map (a
/// memory limit below MemAvailable: `ulimit -v`, a container's): a request this host cannot
/// run, exit 2 like an arena past the limit, not a fault of a run (exit 4), since no rank
/// has run anything yet (issue 45).
fn unmapped(shape: &ArenaShape, e: &std::io::Error) -> RuntimeError {
    let why = if e.raw_os_error() == Some(rustix::io::Errno::NOMEM.raw_os_error()) {
        "this process may not have that much memory (a limit such as ulimit -v or a container's is below it)".to_string()
    } else {
        e.to_string()
    };
    RuntimeError::TooLarge(format!(
        "cannot map the {:.1} MiB shared arena of {} ranks: {why}",
        shape.total() as f64 / (1u64 << 20) as f64,
        shape.nranks
    ))
}

/// An arena mapping, shared by the rank threads of one process.
pub struct Arena {
    _map: MmapMut,
    base: *mut u8,
    shape: ArenaShape,
}

// SAFETY: the arena is plain shared memory; every cross-rank access goes through the
// protocols in crate::protocol (atomics with stated orderings) or through single-copy steps
// separated by barriers.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

impl Arena {
    /// An anonymous arena for ranks that are threads of this process.
    pub fn anonymous(shape: ArenaShape) -> Result<Arc<Arena>> {
        let map = MmapMut::map_anon(shape.total()).map_err(|e| unmapped(&shape, &e))?;
        Ok(Arc::new(Arena::init(map, shape, true)))
    }

    /// A memfd arena (rank 0 of a local job): the fd to pass to the other local ranks.
    pub fn memfd(shape: ArenaShape, job: &str) -> Result<(Arc<Arena>, OwnedFd)> {
        use rustix::fs::{MemfdFlags, memfd_create};
        let fd = memfd_create(format!("topo-{job}"), MemfdFlags::CLOEXEC)
            .map_err(|e| RuntimeError::io("memfd_create", e))?;
        rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(0o600))
            .map_err(|e| RuntimeError::io("fchmod memfd 0600", e))?;
        rustix::fs::ftruncate(&fd, shape.total() as u64)
            .map_err(|e| RuntimeError::io(format!("size memfd to {} bytes", shape.total()), e))?;
        let arena = Arena::map_fd(&fd, shape, true)?;
        Ok((arena, fd))
    }

    /// Map a memfd received from rank 0.
    pub fn map_fd(fd: &impl AsFd, shape: ArenaShape, init: bool) -> Result<Arc<Arena>> {
        let want = shape.checked_total().map_err(|why| {
            RuntimeError::Rendezvous(format!("the job's shared segment has {why}"))
        })?;
        let file = File::from(
            fd.as_fd()
                .try_clone_to_owned()
                .map_err(|e| RuntimeError::io("dup memfd", e))?,
        );
        let len = file
            .metadata()
            .map_err(|e| RuntimeError::io("stat memfd", e))?
            .len() as usize;
        if len != want {
            return Err(RuntimeError::Rendezvous(format!(
                "shared segment is {len} bytes, this rank expected {want}"
            )));
        }
        // SAFETY: the memfd is private to this job (no name, mode 0600) and its size is fixed
        // above; the mapping is only accessed through the protocols documented on Arena.
        let map = unsafe { MmapOptions::new().len(len).map_mut(&file) }
            .map_err(|e| unmapped(&shape, &e))?;
        let arena = Arena::init(map, shape, init);
        if arena.ctrl().magic.load(Ordering::Acquire) != MAGIC {
            return Err(RuntimeError::Rendezvous(
                "shared segment is not initialised".into(),
            ));
        }
        Ok(Arc::new(arena))
    }

    fn init(mut map: MmapMut, shape: ArenaShape, init: bool) -> Arena {
        let base = map.as_mut_ptr();
        let _ = map.advise(memmap2::Advice::HugePage);
        prefault(&map);
        let arena = Arena {
            _map: map,
            base,
            shape,
        };
        if init {
            arena.ctrl().magic.store(MAGIC, Ordering::Release);
        }
        arena
    }

    fn ctrl(&self) -> &Ctrl {
        // SAFETY: offset 0 of a page-aligned mapping of at least ctrl_bytes; Ctrl is atomics.
        unsafe { &*(self.base as *const Ctrl) }
    }

    fn arrive(&self, rank: usize) -> &AtomicU64 {
        // SAFETY: the barrier words follow the control header at CTRL_WORDS + 128 * rank,
        // inside ctrl_bytes; 128-byte aligned, accessed only atomically.
        unsafe { &*(self.base.add(CTRL_WORDS + 128 * rank) as *const AtomicU64) }
    }

    fn done(&self, rank: usize) -> &AtomicU64 {
        // SAFETY: the word after rank's barrier word, in the same 128-byte line.
        unsafe { &*(self.base.add(CTRL_WORDS + 128 * rank + 8) as *const AtomicU64) }
    }

    /// The arena's shape.
    pub fn shape(&self) -> ArenaShape {
        self.shape
    }

    /// Mark the job as failed because of `rank`.
    pub fn abort(&self, rank: usize) {
        let _ = self.ctrl().abort.compare_exchange(
            0,
            rank as u64 + 1,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }
}

/// Health of a shared-memory job: the abort word and, for processes, a pidfd per peer.
struct ShmHealth {
    arena: Arc<Arena>,
    pidfds: Vec<Option<OwnedFd>>,
    /// Each peer process's pid (`None` for this rank and for threads).
    pids: Vec<Option<i32>>,
}

/// Whether process `pid` is stopped (SIGSTOP, SIGTSTP or a tracer): state `T` or `t` in
/// /proc/PID/stat, the field after the command name's closing parenthesis.
fn is_stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
        st.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "T" || state == "t")
    })
}

const STOPPED: &str = "its process is stopped (SIGSTOP or a debugger) and made no progress";

impl Health for ShmHealth {
    fn stalled(&self) -> Option<RuntimeError> {
        let rank = self.pids.iter().position(|p| p.is_some_and(is_stopped))?;
        // The other ranks then name the same rank instead of the one each waits on.
        self.arena.abort(rank);
        Some(RuntimeError::PeerLost {
            rank,
            why: STOPPED.into(),
        })
    }

    fn check(&self) -> Result<()> {
        let a = self.arena.ctrl().abort.load(Ordering::Acquire);
        if a != 0 {
            let rank = a as usize - 1;
            // Whichever rank noticed first, every rank gives the same cause for a stopped one.
            let stopped = self
                .pids
                .get(rank)
                .copied()
                .flatten()
                .is_some_and(is_stopped);
            return Err(RuntimeError::PeerLost {
                rank,
                why: if stopped {
                    STOPPED
                } else {
                    "the job was aborted"
                }
                .into(),
            });
        }
        for (rank, fd) in self.pidfds.iter().enumerate() {
            let Some(fd) = fd else { continue };
            let mut pfd = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
            let ready = rustix::event::poll(
                &mut pfd,
                Some(&rustix::event::Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                }),
            )
            .unwrap_or(0);
            if ready > 0 && self.arena.done(rank).load(Ordering::Acquire) == 0 {
                self.arena.abort(rank);
                return Err(RuntimeError::PeerLost {
                    rank,
                    why: "its process exited".into(),
                });
            }
        }
        Ok(())
    }
}

/// A rank's view of a shared-memory arena.
pub struct ShmTransport {
    kind: TransportKind,
    rank: usize,
    arena: Arc<Arena>,
    tx: Vec<FifoEnd>,
    rx: Vec<FifoEnd>,
    epoch: u64,
    health: ShmHealth,
    timeout: Duration,
    spin: u32,
    work_base: u64,
}

impl ShmTransport {
    /// Rank `rank`'s endpoint. `pids[r]` is rank r's process id when ranks are processes
    /// (the rank's own entry and threads mode: `None`). Only one endpoint per rank may exist.
    pub fn new(
        arena: Arc<Arena>,
        rank: usize,
        pids: &[Option<i32>],
        timeout: Duration,
    ) -> Result<ShmTransport> {
        let s = arena.shape;
        let mut tx = Vec::new();
        let mut rx = Vec::new();
        for peer in 0..s.nranks {
            for ch in 0..s.channels {
                for (list, src, dst) in [(&mut tx, rank, peer), (&mut rx, peer, rank)] {
                    let off = s.fifo_off(src, dst, ch);
                    // SAFETY: offsets are inside the arena, 1024-aligned for the header and
                    // followed by NSLOTS slots; one producer end (tx of src) and one consumer
                    // end (rx of dst) exist per FIFO because each rank builds only its own.
                    list.push(unsafe {
                        FifoEnd::new(
                            arena.base.add(off) as *const FifoHeader,
                            arena.base.add(off + FIFO_HDR),
                            s.slot_bytes,
                        )
                    });
                }
            }
        }
        let mut pidfds = Vec::new();
        for (r, pid) in pids.iter().enumerate() {
            pidfds.push(match pid {
                Some(pid) if r != rank => {
                    let pid = rustix::process::Pid::from_raw(*pid).ok_or_else(|| {
                        RuntimeError::Rendezvous(format!("rank {r} sent pid {pid}"))
                    })?;
                    Some(
                        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
                            .map_err(|e| RuntimeError::PeerLost {
                                rank: r,
                                why: format!("pidfd_open: {e}"),
                            })?,
                    )
                }
                _ => None,
            });
        }
        let kind = if pids.iter().any(Option::is_some) {
            TransportKind::Shm
        } else {
            TransportKind::InProcess
        };
        let epoch = arena.arrive(rank).load(Ordering::Acquire);
        // Every rank on a CPU of its own: spin long before yielding (like MPI's busy polling);
        // more ranks than CPUs: yield early so that the rank holding the data gets to run.
        let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
        let spin = if s.nranks <= cpus { 1 << 14 } else { 128 };
        let work_base = arena.ctrl().claimed.load(Ordering::Acquire);
        Ok(ShmTransport {
            work_base,
            spin,
            kind,
            rank,
            health: ShmHealth {
                arena: arena.clone(),
                pidfds,
                pids: (0..pids.len())
                    .map(|r| if r == rank { None } else { pids[r] })
                    .collect(),
            },
            arena,
            tx,
            rx,
            epoch,
            timeout,
        })
    }
}

impl Transport for ShmTransport {
    fn kind(&self) -> TransportKind {
        self.kind
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn nranks(&self) -> usize {
        self.arena.shape.nranks
    }
    fn piece_bytes(&self, proto: Protocol) -> usize {
        slot_payload(proto, self.arena.shape.slot_bytes)
    }
    fn fifo_bytes(&self, proto: Protocol) -> usize {
        NSLOTS as usize * self.piece_bytes(proto)
    }
    fn send(&mut self, peer: usize, chan: usize, proto: Protocol, data: &[u8]) -> Result<()> {
        let ch = self.arena.shape.channels;
        let mut w =
            Waiter::new(&self.health, self.timeout, "a peer to drain its fifo").spin(self.spin);
        self.tx[peer * ch + chan % ch].send(proto, data, &mut w)
    }
    fn recv(&mut self, peer: usize, chan: usize, proto: Protocol, out: &mut [u8]) -> Result<()> {
        let ch = self.arena.shape.channels;
        let mut w = Waiter::new(&self.health, self.timeout, "data from a peer").spin(self.spin);
        self.rx[peer * ch + chan % ch].recv(proto, out, &mut w)
    }
    fn barrier(&mut self) -> Result<()> {
        self.epoch += 1;
        // Release: everything this rank wrote before the barrier is visible to a rank that
        // Acquire-loads our arrival word below.
        self.arena
            .arrive(self.rank)
            .store(self.epoch, Ordering::Release);
        let mut w =
            Waiter::new(&self.health, self.timeout, "every rank at a barrier").spin(self.spin);
        for r in 0..self.nranks() {
            while self.arena.arrive(r).load(Ordering::Acquire) < self.epoch {
                w.snooze()?;
            }
        }
        Ok(())
    }
    fn storage(&mut self) -> (*mut u8, usize) {
        (
            self.peer_storage(self.rank).expect("own storage"),
            self.arena.shape.storage_bytes,
        )
    }
    fn peer_storage_len(&self) -> usize {
        self.arena.shape.storage_bytes
    }
    fn peer_storage(&self, rank: usize) -> Option<*mut u8> {
        // SAFETY: storage_off(rank) + storage_bytes <= total for rank < nranks.
        (rank < self.nranks())
            .then(|| unsafe { self.arena.base.add(self.arena.shape.storage_off(rank)) })
    }
    fn abort(&self, rank: usize) {
        self.arena.abort(rank);
    }
    fn shared_work(&mut self, units: u64, work: &mut dyn FnMut(u64)) -> Result<bool> {
        let ctrl = self.arena.ctrl();
        let (base, end) = (self.work_base, self.work_base + units);
        // Claim units until none is left. Every rank passes the same `units` in the same
        // order, and a rank only starts the next collective after a barrier that every rank
        // reaches after leaving this loop, so the cumulative counter stays in step.
        let mut c = ctrl.claimed.load(Ordering::Relaxed);
        while c < end {
            match ctrl
                .claimed
                .compare_exchange_weak(c, c + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    work(c - base);
                    crate::kernels::store_fence();
                    // Release: the unit's outputs are visible to whoever Acquires `finished`.
                    ctrl.finished.fetch_add(1, Ordering::Release);
                    c = ctrl.claimed.load(Ordering::Relaxed);
                }
                Err(now) => c = now,
            }
        }
        let mut w = Waiter::new(
            &self.health,
            self.timeout,
            "the other ranks' share of a collective",
        )
        .spin(self.spin);
        while ctrl.finished.load(Ordering::Acquire) < end {
            w.snooze()?;
        }
        self.work_base = end;
        Ok(true)
    }
    fn close(&mut self) {
        self.arena.done(self.rank).store(1, Ordering::Release);
    }
}

/// Transports for `nranks` threads of this process.
pub fn in_process(shape: ArenaShape, timeout: Duration) -> Result<Vec<ShmTransport>> {
    let nranks = shape.nranks;
    let arena = Arena::anonymous(shape)?;
    let none = vec![None; nranks];
    (0..nranks)
        .map(|r| ShmTransport::new(arena.clone(), r, &none, timeout))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefaulting_keeps_every_byte_a_peer_wrote() {
        let shape = ArenaShape::new(2, 1, 3 * PAGE + 17);
        let (arena, fd) = Arena::memfd(shape, "prefault-test").unwrap();
        let len = shape.total();
        // SAFETY: the test's own arena; nothing else maps it.
        let bytes = unsafe { std::slice::from_raw_parts_mut(arena.base, len) };
        for (i, b) in bytes.iter_mut().enumerate().skip(PAGE) {
            *b = (i % 251) as u8;
        }
        let peer = Arena::map_fd(&fd, shape, false).unwrap();
        touch_pages(&peer._map);
        // SAFETY: as above; the peer mapping shows the same pages.
        let seen = unsafe { std::slice::from_raw_parts(peer.base, len) };
        assert!(
            seen.iter()
                .enumerate()
                .skip(PAGE)
                .all(|(i, &b)| b == (i % 251) as u8)
        );
        assert_eq!(peer.ctrl().magic.load(Ordering::Acquire), MAGIC);
    }

    #[test]
    fn received_shapes_that_wrap_or_exceed_limits_are_refused() {
        let good = ArenaShape::new(2, 4, 1 << 20);
        assert_eq!(good.checked_total(), Ok(good.total()));
        let (_arena, fd) = Arena::memfd(good, "shape-test").unwrap();
        for bad in [
            ArenaShape {
                storage_bytes: usize::MAX - (2 << 20) + 1,
                ..good
            },
            ArenaShape {
                storage_bytes: 1 << 63,
                ..good
            },
            ArenaShape {
                storage_bytes: 4095,
                ..good
            },
            ArenaShape {
                nranks: 1 << 40,
                ..good
            },
            ArenaShape { nranks: 0, ..good },
            ArenaShape {
                channels: 1 << 20,
                ..good
            },
            ArenaShape {
                slot_bytes: usize::MAX / 2,
                ..good
            },
        ] {
            assert!(bad.checked_total().is_err(), "{bad:?}");
            let e = Arena::map_fd(&fd, bad, false)
                .err()
                .expect("refused")
                .to_string();
            assert!(e.contains("shared segment has"), "{e}");
        }
        // A consistent shape that is not the segment's size is refused too.
        let other = ArenaShape::new(2, 4, 8 << 20);
        assert!(Arena::map_fd(&fd, other, false).is_err());
    }

    #[test]
    fn a_stopped_peer_process_is_named_when_a_wait_times_out() {
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::STOP,
        )
        .unwrap();
        let t0 = std::time::Instant::now();
        while !is_stopped(pid) && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let shape = ArenaShape::new(3, 1, PAGE);
        let arena = Arena::anonymous(shape).unwrap();
        let mut t = ShmTransport::new(
            arena.clone(),
            0,
            &[None, None, Some(pid)],
            Duration::from_millis(200),
        )
        .unwrap();
        // Rank 0 waits on rank 1 (a thread that never sends); rank 2's process is stopped.
        let mut b = [0u8; 8];
        let e = t
            .recv(1, 0, Protocol::Simple, &mut b)
            .unwrap_err()
            .to_string();
        let _ = child.kill();
        let _ = child.wait();
        assert!(e.contains("rank 2") && e.contains("stopped"), "{e}");
        assert_eq!(arena.ctrl().abort.load(Ordering::Acquire), 3);
    }
}
