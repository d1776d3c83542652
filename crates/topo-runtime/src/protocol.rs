//! NCCL's three protocols over a FIFO in shared memory (threads or processes), and waiting.
//!
//! A FIFO has one producer and one consumer and [`NSLOTS`] slots of `slot_bytes`. The consumer
//! publishes `head` (slots consumed); the producer may fill slot `k` once `head > k - NSLOTS`.
//!
//! * **Simple**: the producer copies a message into a slot, stores its length, then publishes
//!   `tail = k + 1` with a *Release* store; the consumer *Acquire*-loads `tail`, so the slot's
//!   bytes written before the Release are visible to it. After copying out, the consumer
//!   stores `head` with *Release*, which orders its reads before the producer's next
//!   overwrite (the producer *Acquire*-loads `head`).
//! * **LL** (low latency): 8-byte lines, 4 bytes of data and a 4-byte flag (the slot's use
//!   number `k + 1`), written as one 64-bit atomic store. Data and flag live in one atomic
//!   word, so a *Relaxed* load that sees the flag also sees the data: no fence, no `tail`.
//!   Half of the bytes moved are flags.
//! * **LL128**: 128-byte lines whose last 8 bytes are the flag. The host does not store 128
//!   bytes atomically (GPUs do, per warp), so the producer writes the 15 data words *Relaxed*
//!   and then the flag with *Release*; the consumer *Acquire*-loads the flag and then reads
//!   the data words. 120 of every 128 bytes are data.
//!
//! Waiting ([`Waiter`]) spins briefly, then yields, then sleeps in growing steps (up to
//! 200 µs), so 8 ranks on 2 cores still progress; it checks for an abort (a lost rank) and the
//! timeout on the way.
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::error::{Result, RuntimeError};
use crate::types::Protocol;

/// Slots per FIFO.
pub const NSLOTS: u64 = 8;

/// Shared header of one FIFO.
#[repr(C)]
pub struct FifoHeader {
    /// Slots consumed (written by the consumer).
    pub head: CachePadded<AtomicU64>,
    /// Slots published (written by the producer; Simple only).
    pub tail: CachePadded<AtomicU64>,
    /// Message length per slot (Simple only; published by `tail`).
    pub lens: CachePadded<[AtomicU32; NSLOTS as usize]>,
}

/// Bytes of payload one slot carries under `proto` when a slot has `slot_bytes`.
pub fn slot_payload(proto: Protocol, slot_bytes: usize) -> usize {
    let raw = match proto {
        Protocol::Simple => slot_bytes,
        Protocol::Ll => slot_bytes / 8 * 4,
        Protocol::Ll128 => slot_bytes / 128 * 120,
    };
    raw / 64 * 64
}

/// Something the waiting loop asks whether to give up: a lost rank or an abort.
pub trait Health {
    /// `Err` when the job cannot complete (a peer died, another rank aborted).
    fn check(&self) -> Result<()>;
    /// Asked once a wait has run out of time: the rank that stopped making progress, when
    /// this health can tell (a peer process that is stopped), rather than the peer waited on,
    /// which may itself be waiting on that rank.
    fn stalled(&self) -> Option<RuntimeError> {
        None
    }
}

/// Spin, then yield, then sleep; check health and the deadline every so often.
pub struct Waiter<'a> {
    health: &'a dyn Health,
    spin: u32,
    timeout: Duration,
    what: &'a str,
    start: Option<Instant>,
    iter: u32,
}

impl<'a> Waiter<'a> {
    /// A waiter for one condition.
    pub fn new(health: &'a dyn Health, timeout: Duration, what: &'a str) -> Self {
        Waiter {
            health,
            spin: 128,
            timeout,
            what,
            start: None,
            iter: 0,
        }
    }

    /// Spin this many times before yielding (long when every rank has a CPU of its own).
    pub fn spin(mut self, spin: u32) -> Self {
        self.spin = spin.max(1);
        self
    }

    /// Call when the condition is false; returns an error when waiting must stop.
    #[inline]
    pub fn snooze(&mut self) -> Result<()> {
        self.iter += 1;
        if self.iter < self.spin {
            std::hint::spin_loop();
            return Ok(());
        }
        if self.iter.is_multiple_of(64) || self.iter == self.spin {
            let start = *self.start.get_or_insert_with(Instant::now);
            self.health.check()?;
            let waited = start.elapsed();
            if waited > self.timeout {
                if let Some(e) = self.health.stalled() {
                    return Err(e);
                }
                return Err(RuntimeError::Timeout {
                    what: self.what.to_string(),
                    secs: waited.as_secs_f64(),
                });
            }
            if waited > Duration::from_millis(20) {
                let us = (waited.as_micros() as u64 / 100).clamp(20, 200);
                std::thread::sleep(Duration::from_micros(us));
                return Ok(());
            }
        }
        std::thread::yield_now();
        Ok(())
    }
}

/// One end of a FIFO in mapped memory. The producer and the consumer each keep their own
/// `count` (slots they have produced or consumed).
pub struct FifoEnd {
    hdr: *const FifoHeader,
    slots: *mut u8,
    slot_bytes: usize,
    count: u64,
}

// SAFETY: the pointers address a mapping that outlives the transport holding this end (the
// transport keeps the mapping alive), and the FIFO protocol above is what makes concurrent
// access from two threads or processes well defined.
unsafe impl Send for FifoEnd {}

impl FifoEnd {
    /// # Safety
    /// `hdr` must point to a zero-initialised or previously used `FifoHeader` and `slots` to
    /// `NSLOTS * slot_bytes` bytes, both 64-byte aligned, valid for as long as this end lives,
    /// and only one producer end and one consumer end may exist per FIFO.
    pub unsafe fn new(hdr: *const FifoHeader, slots: *mut u8, slot_bytes: usize) -> FifoEnd {
        FifoEnd {
            hdr,
            slots,
            slot_bytes,
            count: 0,
        }
    }

    fn hdr(&self) -> &FifoHeader {
        // SAFETY: valid and aligned for the lifetime of self (constructor contract); all
        // fields are atomics, so shared references across processes are fine.
        unsafe { &*self.hdr }
    }

    fn slot(&self, k: u64) -> *mut u8 {
        // SAFETY: k % NSLOTS < NSLOTS, so the offset stays inside the slot area.
        unsafe { self.slots.add((k % NSLOTS) as usize * self.slot_bytes) }
    }

    fn words(&self, k: u64) -> &[AtomicU64] {
        // SAFETY: the slot is slot_bytes long and 64-byte aligned; AtomicU64 has the layout
        // of u64 and every access to these words goes through atomics.
        unsafe { std::slice::from_raw_parts(self.slot(k) as *const AtomicU64, self.slot_bytes / 8) }
    }

    /// Send one message of at most `slot_payload(proto, slot_bytes)` bytes.
    pub fn send(&mut self, proto: Protocol, data: &[u8], w: &mut Waiter) -> Result<()> {
        let k = self.count;
        debug_assert!(data.len() <= slot_payload(proto, self.slot_bytes));
        // Wait for the consumer to free slot k (Acquire pairs with its Release of head).
        while self.hdr().head.load(Ordering::Acquire) + NSLOTS <= k {
            w.snooze()?;
        }
        let flag = (k + 1) as u32 as u64;
        match proto {
            Protocol::Simple => {
                // SAFETY: the slot has slot_bytes >= data.len() bytes and the consumer is
                // not reading it (head says it is free).
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.slot(k), data.len()) };
                self.hdr().lens[(k % NSLOTS) as usize].store(data.len() as u32, Ordering::Relaxed);
                // Release: the bytes and the length above become visible with the tail.
                self.hdr().tail.store(k + 1, Ordering::Release);
            }
            Protocol::Ll => {
                let words = self.words(k);
                for (i, c) in data.chunks(4).enumerate() {
                    let mut v = [0u8; 4];
                    v[..c.len()].copy_from_slice(c);
                    // One atomic word carries data and flag: Relaxed suffices.
                    words[i].store(
                        u32::from_ne_bytes(v) as u64 | (flag << 32),
                        Ordering::Relaxed,
                    );
                }
            }
            Protocol::Ll128 => {
                let words = self.words(k);
                for (l, c) in data.chunks(120).enumerate() {
                    let line = &words[l * 16..l * 16 + 16];
                    for (i, wd) in c.chunks(8).enumerate() {
                        let mut v = [0u8; 8];
                        v[..wd.len()].copy_from_slice(wd);
                        line[i].store(u64::from_ne_bytes(v), Ordering::Relaxed);
                    }
                    // Release: the line's data words are visible before its flag.
                    line[15].store(flag, Ordering::Release);
                }
            }
        }
        self.count += 1;
        Ok(())
    }

    /// Receive one message of exactly `out.len()` bytes.
    pub fn recv(&mut self, proto: Protocol, out: &mut [u8], w: &mut Waiter) -> Result<()> {
        let k = self.count;
        let flag = (k + 1) as u32 as u64;
        match proto {
            Protocol::Simple => {
                // Acquire pairs with the producer's Release of tail.
                while self.hdr().tail.load(Ordering::Acquire) <= k {
                    w.snooze()?;
                }
                let len = self.hdr().lens[(k % NSLOTS) as usize].load(Ordering::Relaxed) as usize;
                if len != out.len() {
                    return Err(RuntimeError::InvalidPlan(format!(
                        "message of {len} bytes where {} were expected (schedules disagree)",
                        out.len()
                    )));
                }
                // SAFETY: the producer published this slot (tail) and does not touch it until
                // we advance head; out.len() <= slot_bytes.
                unsafe { std::ptr::copy_nonoverlapping(self.slot(k), out.as_mut_ptr(), len) };
            }
            Protocol::Ll => {
                let words = self.words(k);
                for (i, c) in out.chunks_mut(4).enumerate() {
                    let v = loop {
                        let v = words[i].load(Ordering::Relaxed);
                        if v >> 32 == flag {
                            break v;
                        }
                        w.snooze()?;
                    };
                    c.copy_from_slice(&(v as u32).to_ne_bytes()[..c.len()]);
                }
            }
            Protocol::Ll128 => {
                let words = self.words(k);
                for (l, c) in out.chunks_mut(120).enumerate() {
                    let line = &words[l * 16..l * 16 + 16];
                    // Acquire pairs with the producer's Release of the flag word.
                    while line[15].load(Ordering::Acquire) != flag {
                        w.snooze()?;
                    }
                    for (i, wd) in c.chunks_mut(8).enumerate() {
                        let v = line[i].load(Ordering::Relaxed).to_ne_bytes();
                        wd.copy_from_slice(&v[..wd.len()]);
                    }
                }
            }
        }
        self.count += 1;
        // Release: our reads of the slot happen before the producer reuses it.
        self.hdr().head.store(self.count, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fine;
    impl Health for Fine {
        fn check(&self) -> Result<()> {
            Ok(())
        }
    }

    #[repr(C, align(4096))]
    struct Mem([u8; 4096 + 8 * 1024]);

    #[test]
    fn every_protocol_streams_messages_between_threads() {
        for proto in [Protocol::Simple, Protocol::Ll, Protocol::Ll128] {
            let mut mem = Box::new(Mem([0; 4096 + 8 * 1024]));
            let base = mem.0.as_mut_ptr();
            let slot = 1024;
            let pay = slot_payload(proto, slot);
            // SAFETY: the header fits in the first 4096 bytes, the slots follow; one producer
            // and one consumer are made, and `mem` outlives both threads (scope).
            let (mut tx, mut rx) = unsafe {
                (
                    FifoEnd::new(base as *const FifoHeader, base.add(4096), slot),
                    FifoEnd::new(base as *const FifoHeader, base.add(4096), slot),
                )
            };
            let msgs: Vec<Vec<u8>> = (0..100)
                .map(|i| (0..(i * 37) % pay + 1).map(|j| (i + j) as u8).collect())
                .collect();
            std::thread::scope(|s| {
                let m = &msgs;
                s.spawn(move || {
                    for msg in m {
                        let mut w = Waiter::new(&Fine, Duration::from_secs(30), "test");
                        tx.send(proto, msg, &mut w).unwrap();
                    }
                });
                for msg in &msgs {
                    let mut out = vec![0; msg.len()];
                    let mut w = Waiter::new(&Fine, Duration::from_secs(30), "test");
                    rx.recv(proto, &mut out, &mut w).unwrap();
                    assert_eq!(&out, msg, "{proto:?}");
                }
            });
            drop(mem);
        }
    }
}
