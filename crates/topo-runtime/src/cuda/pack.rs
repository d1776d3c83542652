//! What the host hands the kernels, in the kernels' own layout: steps, connections, launch
//! arguments, and where everything lives in a rank's device memory. All pure (addresses are
//! plain integers here), so all of it is tested without a GPU.
use crate::error::{Result, RuntimeError};
use crate::schedule::{Buf, Layout, Loc, Step};
use crate::types::{DataType, Protocol};

// Warp groups per channel CTA: a step holds one piece for each, at most `SLOTS`.
use super::kernels::GROUPS;

/// `TOPO_NONE` in the kernel: no input or no output.
pub const NONE: u64 = u64::MAX;

/// One primitive step (`DevStep` in kernels/collective.cu).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DevStep {
    pub count: u64,
    pub in_off: u64,
    pub out_off: u64,
    pub recv_from: i32,
    pub send_to: i32,
    pub flags: u32,
    pub pad: u32,
}

/// One direction of one (peer, channel) connection (`DevConn`): the FIFO, and the first of
/// its `nslots` tail flags (Simple: a piece's data is in its slot) and head flags (the slot
/// was consumed). One flag per slot because a channel's warp groups finish pieces out of
/// order (kernels/collective.cu, "Pipelining").
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DevConn {
    pub fifo: u64,
    pub tail: u64,
    pub head: u64,
}

/// The kernel's one argument (`DevArgs`), passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DevArgs {
    pub steps: u64,
    pub chan_start: u64,
    pub base: u64,
    pub recv: u64,
    pub send: u64,
    pub recv_seq: u64,
    pub send_seq: u64,
    pub status: u64,
    pub abort: u64,
    pub timeout_ns: u64,
    pub nch: u32,
    pub nranks: u32,
    pub proto: u32,
    pub nslots: u32,
    pub slot_bytes: u32,
    pub piece_bytes: u32,
    /// 1 when a flag must be published at system scope: a peer on another GPU or FIFOs in
    /// host memory; 0 when every rank is on this GPU (GPU scope suffices).
    pub sys_fence: u32,
    pub pad: u32,
}

/// FIFO geometry of one protocol: slots per connection, bytes per slot, data bytes per slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fifo {
    pub nslots: u32,
    pub slot_bytes: u32,
    pub piece_bytes: u32,
}

/// Slots per connection (NCCL_STEPS in NCCL's src/include/device.h: 8). A power of two: the
/// kernel takes a piece's slot with a mask.
pub const SLOTS: u32 = 8;

impl Fifo {
    /// Simple: slots of data, the piece `cuda::model::simple_piece` computes from the
    /// kernel's costs (at most NCCL's 4 MiB buffer / 8 steps, 512 KiB). LL: 16-byte lines
    /// carrying 8 bytes. LL128: 128-byte lines carrying 120 (NCCL's NCCL_LL128_LINEELEMS x 8
    /// of 16 x 8).
    pub fn of(p: Protocol) -> Fifo {
        match p {
            Protocol::Simple => {
                let piece = super::model::simple_piece(&super::model::COSTS);
                Fifo {
                    nslots: SLOTS,
                    slot_bytes: piece,
                    piece_bytes: piece,
                }
            }
            Protocol::Ll => Fifo {
                nslots: SLOTS,
                slot_bytes: 16 << 10,
                piece_bytes: 8 << 10,
            },
            Protocol::Ll128 => Fifo {
                nslots: SLOTS,
                slot_bytes: 1024 * 128,
                piece_bytes: 1024 * 120,
            },
        }
    }

    /// Data bytes a connection holds.
    pub fn data_bytes(&self) -> usize {
        self.nslots as usize * self.piece_bytes as usize
    }

    /// FIFO bytes of one connection.
    pub fn bytes(&self) -> usize {
        self.nslots as usize * self.slot_bytes as usize
    }
}

/// The kernel's protocol code.
pub fn proto_code(p: Protocol) -> u32 {
    match p {
        Protocol::Simple => 0,
        Protocol::Ll => 1,
        Protocol::Ll128 => 2,
    }
}

/// Elements per schedule step: half of a FIFO's data (the schedule needs two chunks in
/// flight per connection), capped by the plan's chunk size, but at least one piece per warp
/// group (`GROUPS`: a step of fewer pieces leaves groups idle, and the pipeline is the
/// groups'); the host executor's `Executor::chunk_elems` has the same rule with one slot.
pub fn chunk_elems(p: Protocol, chunk_bytes: usize, dt: DataType) -> usize {
    let f = Fifo::of(p);
    let half = f.data_bytes() / 2;
    let groups = (GROUPS as usize * f.piece_bytes as usize).min(half);
    (chunk_bytes.clamp(groups, half) / dt.size()).max(1)
}

/// A rank's steps in the kernels' form: grouped by channel (each channel's order kept),
/// `chan_start[c]..chan_start[c + 1]` the steps of channel `c`.
pub fn pack_steps(
    steps: &[Step],
    layout: &Layout,
    dt: DataType,
    nranks: usize,
    nch: usize,
) -> Result<(Vec<DevStep>, Vec<u32>)> {
    let es = dt.size() as u64;
    let mut per: Vec<Vec<DevStep>> = vec![Vec::new(); nch];
    for s in steps {
        let p = match s {
            Step::Prim(p) => p,
            Step::Direct(_) | Step::Barrier => {
                return Err(RuntimeError::Unsupported(
                    "the cuda backend runs ring and tree schedules (DIRECT is the host's single-copy algorithm)".into(),
                ));
            }
        };
        if p.count == 0 {
            continue;
        }
        let chan = per.get_mut(p.chan).ok_or_else(|| {
            RuntimeError::InvalidPlan(format!("step on channel {} of {nch}", p.chan))
        })?;
        let off = |l: Option<Loc>| -> Result<u64> {
            let Some(l) = l else { return Ok(NONE) };
            let (start, len) = match l.buf {
                Buf::Send => (layout.send_off, layout.send_len),
                Buf::Recv => (layout.recv_off, layout.recv_len),
            };
            if l.off + p.count > len {
                return Err(RuntimeError::InvalidPlan(format!(
                    "step touches elements {}..{} of a {len}-element buffer",
                    l.off,
                    l.off + p.count
                )));
            }
            Ok((start + l.off) as u64 * es)
        };
        let peer = |q: Option<usize>| -> Result<i32> {
            match q {
                None => Ok(-1),
                Some(q) if q < nranks => Ok(q as i32),
                Some(q) => Err(RuntimeError::InvalidPlan(format!(
                    "peer {q} of {nranks} ranks"
                ))),
            }
        };
        chan.push(DevStep {
            count: p.count as u64,
            in_off: off(p.input)?,
            out_off: off(p.output)?,
            recv_from: peer(p.recv_from)?,
            send_to: peer(p.send_to)?,
            flags: p.finish as u32,
            pad: 0,
        });
    }
    let mut starts = vec![0u32];
    let mut all = Vec::new();
    for c in per {
        all.extend(c);
        starts.push(all.len() as u32);
    }
    Ok((all, starts))
}

/// Where things live in one rank's two allocations, in bytes from each base. The data
/// allocation (always device memory) holds the buffers and the expected output for the
/// check. The communication allocation (device memory for P2P, pinned host memory for SHM)
/// holds, per protocol, the incoming FIFOs (one per (peer, channel)), their tail counters, the
/// head counters of this rank's outgoing connections and the piece counters of both
/// directions; then the status, abort and #wrong words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arena {
    pub nranks: usize,
    /// Channel stride of every per-connection table.
    pub nch: usize,
    pub storage_off: usize,
    pub storage_bytes: usize,
    pub expect_off: usize,
    pub data_total: usize,
    pub proto: [ProtoArea; 3],
    pub status_off: usize,
    /// The abort word (only rank 0's is used; every rank polls it).
    pub abort_off: usize,
    pub wrong_off: usize,
    pub comm_total: usize,
}

/// One protocol's part of the communication allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtoArea {
    pub fifo: Fifo,
    pub fifo_off: usize,
    pub tail_off: usize,
    pub head_off: usize,
    pub recv_seq_off: usize,
    pub send_seq_off: usize,
}

fn align(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

impl Arena {
    /// The layout for `nranks` ranks, `nch` channels and `storage_bytes` of buffers.
    pub fn new(nranks: usize, nch: usize, storage_bytes: usize) -> Arena {
        let conns = nranks * nch;
        let storage_off = 0;
        let expect_off = align(storage_bytes, 4096);
        let data_total = align(expect_off + storage_bytes, 4096);
        let mut at = 0;
        let proto = [Protocol::Simple, Protocol::Ll, Protocol::Ll128].map(|p| {
            let fifo = Fifo::of(p);
            let fifo_off = at;
            at = align(at + conns * fifo.bytes(), 4096);
            let mut table = |per_conn: usize| {
                let o = at;
                at = align(at + conns * per_conn * 8, 256);
                o
            };
            let slots = fifo.nslots as usize;
            ProtoArea {
                fifo,
                fifo_off,
                tail_off: table(slots),
                head_off: table(slots),
                recv_seq_off: table(1),
                send_seq_off: table(1),
            }
        });
        let status_off = at;
        let abort_off = at + 16;
        let wrong_off = at + 32;
        let comm_total = align(at + 64, 4096);
        Arena {
            nranks,
            nch,
            storage_off,
            storage_bytes,
            expect_off,
            data_total,
            proto,
            status_off,
            abort_off,
            wrong_off,
            comm_total,
        }
    }

    fn area(&self, p: Protocol) -> &ProtoArea {
        &self.proto[proto_code(p) as usize]
    }

    fn conn(&self, peer: usize, chan: usize) -> usize {
        peer * self.nch + chan
    }

    /// The connections of `rank` under `p`, given every rank's communication base as this
    /// rank sees it: (receive side, send side), each indexed by `peer * nch + chan`.
    pub fn conn_tables(
        &self,
        rank: usize,
        comm: &[u64],
        p: Protocol,
    ) -> (Vec<DevConn>, Vec<DevConn>) {
        let a = self.area(p);
        let me = comm[rank];
        let fifo_of = |owner: u64, from: usize, c: usize| {
            owner + (a.fifo_off + self.conn(from, c) * a.fifo.bytes()) as u64
        };
        let slots = a.fifo.nslots as usize;
        let table = |owner: u64, off: usize, peer: usize, c: usize| {
            owner + (off + self.conn(peer, c) * slots * 8) as u64
        };
        let mut recv = Vec::with_capacity(self.nranks * self.nch);
        let mut send = Vec::with_capacity(self.nranks * self.nch);
        for (q, &peer) in comm.iter().enumerate().take(self.nranks) {
            for c in 0..self.nch {
                recv.push(DevConn {
                    fifo: fifo_of(me, q, c),
                    tail: table(me, a.tail_off, q, c),
                    head: table(peer, a.head_off, rank, c),
                });
                send.push(DevConn {
                    fifo: fifo_of(peer, rank, c),
                    tail: table(peer, a.tail_off, rank, c),
                    head: table(me, a.head_off, q, c),
                });
            }
        }
        (recv, send)
    }

    /// The launch arguments of a rank whose allocations are at `data` and `comm` (tables
    /// and steps already uploaded at the given addresses); `sys_fence` as [`DevArgs`] says.
    #[allow(clippy::too_many_arguments)]
    pub fn args(
        &self,
        sys_fence: bool,
        data: u64,
        comm: u64,
        abort: u64,
        p: Protocol,
        steps: u64,
        chan_start: u64,
        recv: u64,
        send: u64,
        timeout_ns: u64,
    ) -> DevArgs {
        let a = self.area(p);
        DevArgs {
            steps,
            chan_start,
            base: data + self.storage_off as u64,
            recv,
            send,
            recv_seq: comm + a.recv_seq_off as u64,
            send_seq: comm + a.send_seq_off as u64,
            status: comm + self.status_off as u64,
            abort,
            timeout_ns,
            nch: self.nch as u32,
            nranks: self.nranks as u32,
            proto: proto_code(p),
            nslots: a.fifo.nslots,
            slot_bytes: a.fifo.slot_bytes,
            piece_bytes: a.fifo.piece_bytes,
            sys_fence: sys_fence as u32,
            pad: 0,
        }
    }
}

/// What the kernel's status words say (code, channel, step).
pub fn status_error(status: [u32; 3], rank: usize) -> Option<String> {
    match status[0] {
        0 => None,
        1 => Some(format!(
            "rank {rank}: a kernel wait timed out on channel {} at step {} (a peer never sent or never freed a slot)",
            status[1], status[2]
        )),
        2 => Some(format!("rank {rank}: stopped because another rank failed")),
        c => Some(format!("rank {rank}: kernel status {c}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::schedule;
    use crate::types::{Algorithm, Collective, CollectivePlan};
    use std::mem::{offset_of, size_of};

    #[test]
    fn structs_match_the_kernel_source() {
        // kernels/collective.cu states these sizes next to each struct.
        assert_eq!(size_of::<DevStep>(), 40);
        assert_eq!(size_of::<DevConn>(), 24);
        assert_eq!(size_of::<DevArgs>(), 112);
        assert_eq!(offset_of!(DevArgs, timeout_ns), 72);
        assert_eq!(offset_of!(DevArgs, nch), 80);
        assert_eq!(offset_of!(DevArgs, piece_bytes), 100);
        assert_eq!(offset_of!(DevArgs, sys_fence), 104);
        let src = super::super::kernels::SOURCES[0].1;
        assert!(src.contains("`cuda::pack::DevStep` (40 bytes)"));
        assert!(src.contains("`cuda::pack::DevConn` (24 bytes)"));
        assert!(src.contains("`cuda::pack::DevArgs` (112 bytes)"));
        // The slot of a piece is a mask; every slot can hold a group's piece.
        assert!(SLOTS.is_power_of_two() && GROUPS <= SLOTS);
        assert!(src.contains(&format!("#define TOPO_GROUPS {GROUPS}\n")));
        assert_eq!(super::super::kernels::THREADS % (GROUPS * 32), 0);
    }

    #[test]
    fn pieces_hold_whole_elements_and_lines() {
        for p in [Protocol::Simple, Protocol::Ll, Protocol::Ll128] {
            let f = Fifo::of(p);
            assert_eq!(f.piece_bytes % 8, 0);
            assert_eq!(f.slot_bytes % 128, 0);
            for dt in DataType::ALL {
                let c = chunk_elems(p, 512 << 10, dt) * dt.size();
                assert!(2 * c <= f.data_bytes(), "{p:?} {dt:?}");
                assert!(c >= f.piece_bytes as usize - dt.size());
                // Every warp group has a piece of each step.
                assert!(c + dt.size() > GROUPS as usize * f.piece_bytes as usize - dt.size());
            }
        }
        assert_eq!(
            Fifo::of(Protocol::Ll).piece_bytes * 2,
            Fifo::of(Protocol::Ll).slot_bytes
        );
        assert_eq!(
            Fifo::of(Protocol::Ll128).slot_bytes / 128 * 120,
            Fifo::of(Protocol::Ll128).piece_bytes
        );
    }

    #[test]
    fn ring_allreduce_packs_per_channel_in_order() {
        let n = 4;
        let plan = CollectivePlan::host_default(
            Collective::AllReduce,
            Algorithm::Ring,
            Protocol::Simple,
            n,
            2,
        );
        let count = 1000;
        let chunk = 64;
        let steps = schedule(&plan, 1, count, chunk).unwrap();
        let layout = Layout::new(Collective::AllReduce, count, n, 1, false);
        let (dev, starts) = pack_steps(&steps, &layout, DataType::F32, n, 2).unwrap();
        assert_eq!(starts.len(), 3);
        assert_eq!(*starts.last().unwrap() as usize, dev.len());
        // Same steps, same order within a channel, counts and peers carried over.
        let prims: Vec<_> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Prim(p) if p.count > 0 => Some(p),
                _ => None,
            })
            .collect();
        for c in 0..2 {
            let mine: Vec<_> = prims.iter().filter(|p| p.chan == c).collect();
            let packed = &dev[starts[c] as usize..starts[c + 1] as usize];
            assert_eq!(mine.len(), packed.len());
            for (p, d) in mine.iter().zip(packed) {
                assert_eq!(d.count as usize, p.count);
                assert_eq!(d.recv_from, p.recv_from.map_or(-1, |q| q as i32));
                assert_eq!(d.send_to, p.send_to.map_or(-1, |q| q as i32));
                assert_eq!(d.flags, p.finish as u32);
                if let Some(l) = p.input {
                    let start = if l.buf == Buf::Send {
                        layout.send_off
                    } else {
                        layout.recv_off
                    };
                    assert_eq!(d.in_off as usize, (start + l.off) * 4);
                } else {
                    assert_eq!(d.in_off, NONE);
                }
                assert!(
                    d.out_off == NONE
                        || d.out_off as usize + d.count as usize * 4 <= layout.total * 4
                );
            }
        }
    }

    #[test]
    fn direct_schedules_are_refused_with_a_reason() {
        let plan = CollectivePlan::host_default(
            Collective::AllReduce,
            Algorithm::Direct,
            Protocol::Simple,
            2,
            1,
        );
        let steps = schedule(&plan, 0, 100, 50).unwrap();
        let layout = Layout::new(Collective::AllReduce, 100, 2, 0, false);
        let e = pack_steps(&steps, &layout, DataType::F32, 2, 1).unwrap_err();
        assert!(e.to_string().contains("ring and tree"), "{e}");
    }

    #[test]
    fn connections_pair_up_across_ranks() {
        let n = 3;
        let nch = 2;
        let a = Arena::new(n, nch, 1 << 20);
        let bases: Vec<u64> = (0..n as u64)
            .map(|r| 0x1000_0000_0000 + r * (1 << 36))
            .collect();
        for p in [Protocol::Simple, Protocol::Ll, Protocol::Ll128] {
            let tables: Vec<_> = (0..n).map(|r| a.conn_tables(r, &bases, p)).collect();
            for s in 0..n {
                for d in 0..n {
                    for c in 0..nch {
                        let send = tables[s].1[d * nch + c];
                        let recv = tables[d].0[s * nch + c];
                        // The sender writes where the receiver reads, and both count on
                        // the same tail and head words.
                        assert_eq!(send.fifo, recv.fifo);
                        assert_eq!(send.tail, recv.tail);
                        assert_eq!(send.head, recv.head);
                        // The FIFO is in the receiver's arena, the head in the sender's.
                        let inside =
                            |x: u64, r: usize| x >= bases[r] && x < bases[r] + a.comm_total as u64;
                        assert!(inside(recv.fifo, d) && inside(recv.tail, d));
                        assert!(inside(send.head, s));
                        // Each connection has one tail and one head flag per slot, the last
                        // of them inside the arena too.
                        let last = (SLOTS as u64 - 1) * 8;
                        assert!(inside(recv.tail + last, d) && inside(send.head + last, s));
                    }
                }
            }
        }
        // Regions do not overlap and stay inside the arena.
        assert!(a.expect_off >= a.storage_bytes && a.expect_off + a.storage_bytes <= a.data_total);
        let mut spans = vec![];
        for pa in &a.proto {
            spans.push((pa.fifo_off, n * nch * pa.fifo.bytes()));
            for o in [pa.tail_off, pa.head_off] {
                spans.push((o, n * nch * pa.fifo.nslots as usize * 8));
            }
            for o in [pa.recv_seq_off, pa.send_seq_off] {
                spans.push((o, n * nch * 8));
            }
        }
        spans.push((a.status_off, 64));
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "{w:?}");
        }
        assert!(spans.last().map(|s| s.0 + s.1).unwrap() <= a.comm_total);
        assert_eq!(a.storage_off % 4096, 0);
        assert_eq!(a.expect_off % 4096, 0);
    }

    #[test]
    fn args_point_into_the_rank_arena() {
        let a = Arena::new(2, 1, 4096);
        let g = a.args(
            false,
            0x10000,
            0x40000,
            0x20000,
            Protocol::Ll,
            1,
            2,
            3,
            4,
            5,
        );
        assert_eq!(g.sys_fence, 0);
        assert_eq!(
            a.args(true, 0, 0, 0, Protocol::Ll, 1, 2, 3, 4, 5).sys_fence,
            1
        );
        assert_eq!(g.base, 0x10000 + a.storage_off as u64);
        assert_eq!(g.recv_seq, 0x40000 + a.proto[1].recv_seq_off as u64);
        assert_eq!(g.proto, 1);
        assert_eq!(g.piece_bytes, Fifo::of(Protocol::Ll).piece_bytes);
        assert_eq!(g.status, 0x40000 + a.status_off as u64);
        assert_eq!(g.abort, 0x20000);
        assert!(status_error([1, 0, 7], 3).unwrap().contains("step 7"));
        assert_eq!(status_error([0, 0, 0], 0), None);
    }
}
