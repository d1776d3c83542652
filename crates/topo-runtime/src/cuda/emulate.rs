//! A CPU emulation of the primitive kernel's protocol (kernels/collective.cu, `run_steps` and
//! `one_piece`), for the tests: no GPU runs in CI, so the pipelined walker's state machine
//! (warp groups taking a step's pieces in turn, a tail and a head flag per slot, the step's
//! meeting point where the piece counters move on) runs here as threads over the real
//! schedules and `pack_steps`' steps, one thread per (rank, channel, group), and the outputs
//! are checked. It mirrors the kernel's logic line for line, not its memory model: a deadlock
//! or a slot overwritten before it was read shows up here; a missing fence does not.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use super::kernels::GROUPS;
use super::pack::{DevStep, NONE};

/// One direction of one (sender, receiver, channel) connection.
struct Conn {
    slots: Vec<Mutex<Vec<u8>>>,
    tail: Vec<AtomicU64>,
    head: Vec<AtomicU64>,
}

/// A job's shared state: `conn[(src * n + dst) * nch + c]`, each rank's buffer, and each
/// rank's piece counters per (peer, channel) in both directions.
pub struct World {
    n: usize,
    nch: usize,
    nslots: usize,
    piece: usize,
    conn: Vec<Conn>,
    pub mem: Vec<Mutex<Vec<u8>>>,
    recv_seq: Vec<Vec<AtomicU64>>,
    send_seq: Vec<Vec<AtomicU64>>,
    failed: AtomicBool,
}

impl World {
    pub fn new(n: usize, nch: usize, nslots: usize, piece: usize, mem_bytes: usize) -> World {
        let conn = (0..n * n * nch)
            .map(|_| Conn {
                slots: (0..nslots).map(|_| Mutex::new(vec![0; piece])).collect(),
                tail: (0..nslots).map(|_| AtomicU64::new(0)).collect(),
                head: (0..nslots).map(|_| AtomicU64::new(0)).collect(),
            })
            .collect();
        let counters = || {
            (0..n)
                .map(|_| (0..n * nch).map(|_| AtomicU64::new(0)).collect())
                .collect()
        };
        World {
            n,
            nch,
            nslots,
            piece,
            conn,
            mem: (0..n).map(|_| Mutex::new(vec![0; mem_bytes])).collect(),
            recv_seq: counters(),
            send_seq: counters(),
            failed: AtomicBool::new(false),
        }
    }

    fn link(&self, src: usize, dst: usize, c: usize) -> &Conn {
        &self.conn[(src * self.n + dst) * self.nch + c]
    }

    /// Spin until `f` holds, or fail the job after 20 s (a deadlock).
    fn wait(&self, f: impl Fn() -> bool) -> bool {
        let t = Instant::now();
        while !f() {
            if self.failed.load(Ordering::Relaxed) || t.elapsed() > Duration::from_secs(20) {
                self.failed.store(true, Ordering::Relaxed);
                return false;
            }
            std::thread::yield_now();
        }
        true
    }

    /// One launch: every rank's packed steps (`steps[rank]`, `starts[rank]`), i32 sums.
    /// Returns false when a wait gave up.
    pub fn launch(&self, steps: &[Vec<DevStep>], starts: &[Vec<u32>]) -> bool {
        std::thread::scope(|s| {
            for r in 0..self.n {
                for c in 0..self.nch {
                    let bar = std::sync::Arc::new(Barrier::new(GROUPS as usize));
                    for g in 0..GROUPS as usize {
                        let bar = bar.clone();
                        let (st, range) = (&steps[r], starts[r][c]..starts[r][c + 1]);
                        s.spawn(move || {
                            self.walk(r, c, g, &st[range.start as usize..range.end as usize], &bar)
                        });
                    }
                }
            }
        });
        !self.failed.load(Ordering::Relaxed)
    }

    /// `run_steps` for group `g` of rank `r`'s channel `c`.
    fn walk(&self, r: usize, c: usize, g: usize, steps: &[DevStep], bar: &Barrier) {
        for st in steps {
            let bytes = st.count as usize * 4;
            let pieces = bytes.div_ceil(self.piece);
            let ri = (st.recv_from >= 0).then(|| st.recv_from as usize * self.nch + c);
            let si = (st.send_to >= 0).then(|| st.send_to as usize * self.nch + c);
            let rbase = ri.map_or(0, |i| self.recv_seq[r][i].load(Ordering::Acquire));
            let sbase = si.map_or(0, |i| self.send_seq[r][i].load(Ordering::Acquire));
            let mut k = g;
            while k < pieces && !self.failed.load(Ordering::Relaxed) {
                if !self.piece(r, c, st, (rbase, sbase), k) {
                    break;
                }
                k += GROUPS as usize;
            }
            bar.wait();
            if g == 0 {
                if let Some(i) = si {
                    self.send_seq[r][i].store(sbase + pieces as u64, Ordering::Release);
                }
                if let Some(i) = ri {
                    self.recv_seq[r][i].store(rbase + pieces as u64, Ordering::Release);
                }
            }
            bar.wait();
            if self.failed.load(Ordering::Relaxed) {
                return;
            }
        }
    }

    /// `one_piece`: credit, data, copy with the i32 sum, post.
    fn piece(
        &self,
        r: usize,
        c: usize,
        st: &DevStep,
        (rbase, sbase): (u64, u64),
        k: usize,
    ) -> bool {
        let ns = self.nslots as u64;
        let done = k * self.piece;
        let len = (st.count as usize * 4 - done).min(self.piece);
        let (rseq, sseq) = (rbase + k as u64, sbase + k as u64);
        let (rslot, sslot) = ((rseq % ns) as usize, (sseq % ns) as usize);
        let from = (st.recv_from >= 0).then(|| self.link(st.recv_from as usize, r, c));
        let to = (st.send_to >= 0).then(|| self.link(r, st.send_to as usize, c));
        if let Some(t) = to
            && sseq >= ns
            && !self.wait(|| t.head[sslot].load(Ordering::Acquire) > sseq - ns)
        {
            return false;
        }
        if let Some(f) = from
            && !self.wait(|| f.tail[rslot].load(Ordering::Acquire) > rseq)
        {
            return false;
        }
        let mut v = vec![0u8; len];
        let mut have = false;
        if let Some(f) = from {
            v.copy_from_slice(&f.slots[rslot].lock().unwrap()[..len]);
            have = true;
        }
        let mut mem = self.mem[r].lock().unwrap();
        if st.in_off != NONE {
            let at = st.in_off as usize + done;
            for (i, w) in v.chunks_mut(4).enumerate() {
                let x = i32::from_le_bytes(mem[at + 4 * i..at + 4 * i + 4].try_into().unwrap());
                let y = if have {
                    i32::from_le_bytes((&*w).try_into().unwrap())
                } else {
                    0
                };
                w.copy_from_slice(&x.wrapping_add(y).to_le_bytes());
            }
        }
        if st.out_off != NONE {
            let at = st.out_off as usize + done;
            mem[at..at + len].copy_from_slice(&v);
        }
        drop(mem);
        if let Some(t) = to {
            t.slots[sslot].lock().unwrap()[..len].copy_from_slice(&v);
            t.tail[sslot].store(sseq + 1, Ordering::Release);
        }
        if let Some(f) = from {
            f.head[rslot].store(rseq + 1, Ordering::Release);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::pack::pack_steps;
    use crate::schedule::{Layout, schedule};
    use crate::types::{Algorithm, Collective, CollectivePlan, DataType, Protocol};

    /// Ring AllReduce, AllGather and ReduceScatter through the pipelined walker, twice over
    /// the same FIFOs (the piece counters carry over between launches), with small pieces
    /// so every slot wraps many times: every output is the expected one, nothing deadlocks.
    #[test]
    fn the_pipelined_walker_delivers_every_piece_once() {
        let (n, nch, piece, nslots) = (3, 2, 64, 8);
        // A step is GROUPS pieces at most (half of the 8 slots), as `pack::chunk_elems` says.
        let chunk = GROUPS as usize * piece / 4;
        for coll in [
            Collective::AllReduce,
            Collective::AllGather,
            Collective::ReduceScatter,
        ] {
            let count = 1000 + 7;
            let layouts: Vec<Layout> = (0..n)
                .map(|r| Layout::new(coll, count, n, r, false))
                .collect();
            let bytes = layouts[0].total * 4;
            let w = World::new(n, nch, nslots, piece, bytes);
            let plan =
                CollectivePlan::host_default(coll, Algorithm::Ring, Protocol::Simple, n, nch);
            let (mut steps, mut starts) = (vec![], vec![]);
            for (r, layout) in layouts.iter().enumerate() {
                let s = schedule(&plan, r, count, chunk).unwrap();
                let (d, st) = pack_steps(&s, layout, DataType::I32, n, nch).unwrap();
                let mut full = st.clone();
                full.resize(nch + 1, *st.last().unwrap());
                steps.push(d);
                starts.push(full);
            }
            for round in 0..2 {
                for (r, l) in layouts.iter().enumerate() {
                    let mut m = w.mem[r].lock().unwrap();
                    m.fill(0);
                    for i in 0..l.send_len {
                        let v = (r * 100_000 + i + round * 7) as i32;
                        m[(l.send_off + i) * 4..(l.send_off + i) * 4 + 4]
                            .copy_from_slice(&v.to_le_bytes());
                    }
                }
                assert!(
                    w.launch(&steps, &starts),
                    "{coll:?} round {round}: a wait gave up"
                );
                for (r, l) in layouts.iter().enumerate() {
                    let m = w.mem[r].lock().unwrap();
                    let got = |i: usize| {
                        i32::from_le_bytes(
                            m[(l.recv_off + i) * 4..(l.recv_off + i) * 4 + 4]
                                .try_into()
                                .unwrap(),
                        )
                    };
                    let input = |q: usize, i: usize| (q * 100_000 + i + round * 7) as i32;
                    for i in 0..l.recv_len {
                        let want = match coll {
                            Collective::AllReduce => (0..n).map(|q| input(q, i)).sum::<i32>(),
                            Collective::AllGather => input(i / count, i % count),
                            _ => (0..n).map(|q| input(q, r * l.recv_len + i)).sum::<i32>(),
                        };
                        assert_eq!(got(i), want, "{coll:?} round {round} rank {r} element {i}");
                    }
                }
            }
        }
    }
}
