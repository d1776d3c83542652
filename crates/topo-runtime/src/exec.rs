//! The executor: runs one rank's schedule over a transport, with the host kernels.
use crate::error::{Result, RuntimeError};
use crate::kernels;
use crate::schedule::{Buf, Layout, Step};
use crate::transport::Transport;
use crate::types::{Collective, DataType, Protocol, RedOp};

/// Bytes per block of a single-copy step (stays in L2 between the reduce and the copies).
const DIRECT_BLOCK: usize = 64 * 1024;
/// Single-copy steps at least this large write their outputs with non-temporal stores (the
/// outputs of a message this size leave the caches before anyone reads them).
const NT_BYTES: usize = 4 << 20;

/// What one collective call needs besides its steps.
#[derive(Debug, Clone, Copy)]
pub struct OpCtx {
    pub collective: Collective,
    pub dtype: DataType,
    pub op: RedOp,
    pub protocol: Protocol,
    pub count: usize,
    pub in_place: bool,
}

/// Per-rank executor state (scratch space for received pieces).
pub struct Executor {
    scratch: Vec<u64>,
    ins: Vec<*mut u8>,
    outs: Vec<*mut u8>,
}

impl Default for Executor {
    fn default() -> Self {
        Self::new()
    }
}

struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Executor {
    /// A fresh executor.
    pub fn new() -> Executor {
        Executor {
            scratch: Vec::new(),
            ins: Vec::new(),
            outs: Vec::new(),
        }
    }

    /// Elements per schedule step for this transport and protocol: half of a FIFO, capped by
    /// the plan's chunk size.
    pub fn chunk_elems(
        t: &dyn Transport,
        proto: Protocol,
        chunk_bytes: usize,
        dtype: DataType,
    ) -> usize {
        let half = t.fifo_bytes(proto) / 2;
        (chunk_bytes.clamp(t.piece_bytes(proto), half.max(64)) / dtype.size()).max(1)
    }

    /// Run `steps` for this rank. The buffers are in the transport's storage at the places
    /// [`Layout::new`] gives.
    pub fn run(&mut self, t: &mut dyn Transport, steps: &[Step], ctx: &OpCtx) -> Result<()> {
        let n = t.nranks();
        let rank = t.rank();
        let es = ctx.dtype.size();
        let (base, cap) = t.storage();
        let me = Layout::new(ctx.collective, ctx.count, n, rank, ctx.in_place);
        if me.total * es > cap {
            return Err(RuntimeError::InvalidPlan(format!(
                "buffers of {} bytes exceed the {cap} bytes of storage",
                me.total * es
            )));
        }
        let region = |layout: &Layout,
                      base: *mut u8,
                      buf: Buf,
                      off: usize,
                      count: usize|
         -> Result<Region> {
            let (start, limit) = match buf {
                Buf::Send => (layout.send_off, layout.send_len),
                Buf::Recv => (layout.recv_off, layout.recv_len),
            };
            if off + count > limit {
                return Err(RuntimeError::InvalidPlan(format!(
                    "step touches elements {off}..{} of a {limit}-element buffer",
                    off + count
                )));
            }
            // SAFETY: (start + off + count) * es <= total * es <= cap, checked above, so the
            // pointer stays inside this rank's storage.
            Ok(Region {
                // SAFETY: see above.
                ptr: unsafe { base.add((start + off) * es) },
                len: count * es,
            })
        };
        let piece = t.piece_bytes(ctx.protocol);
        let words = piece.max(DIRECT_BLOCK) / 8;
        if self.scratch.len() < words {
            self.scratch.resize(words, 0);
        }
        for step in steps {
            match step {
                Step::Barrier => t.barrier()?,
                Step::Prim(p) => {
                    if p.count == 0 {
                        continue;
                    }
                    let input = p
                        .input
                        .map(|l| region(&me, base, l.buf, l.off, p.count))
                        .transpose()?;
                    let output = p
                        .output
                        .map(|l| region(&me, base, l.buf, l.off, p.count))
                        .transpose()?;
                    let total = p.count * es;
                    let mut done = 0;
                    while done < total {
                        let len = piece.min(total - done);
                        let scratch =
                            &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.scratch)[..len];
                        // SAFETY: done + len <= region length; the schedule gives each region
                        // to one step at a time and never overlaps an input and an output
                        // partially (they are equal or disjoint), which is checked below
                        // before any mutable slice is made.
                        let inp = input.as_ref().map(|r| unsafe { r.ptr.add(done) });
                        // SAFETY: as above.
                        let out = output.as_ref().map(|r| unsafe { r.ptr.add(done) });
                        debug_assert!(
                            input
                                .iter()
                                .chain(output.iter())
                                .all(|r| done + len <= r.len)
                        );
                        // Where the value v ends up: 0 = scratch, 1 = output, 2 = input.
                        let mut at = 0;
                        if let Some(from) = p.recv_from {
                            t.recv(from, p.chan, ctx.protocol, scratch)?;
                            match (inp, out) {
                                (Some(i), Some(o)) if i == o => {
                                    // SAFETY: o is len bytes inside storage, not aliased by scratch.
                                    let o = unsafe { std::slice::from_raw_parts_mut(o, len) };
                                    kernels::reduce_acc(ctx.dtype, ctx.op, o, scratch);
                                    at = 1;
                                }
                                (Some(i), Some(o)) => {
                                    // SAFETY: i and o are disjoint len-byte ranges in storage.
                                    let (i, o) = unsafe {
                                        (
                                            std::slice::from_raw_parts(i, len),
                                            std::slice::from_raw_parts_mut(o, len),
                                        )
                                    };
                                    kernels::reduce(ctx.dtype, ctx.op, o, i, scratch);
                                    at = 1;
                                }
                                (Some(i), None) => {
                                    // SAFETY: i is len bytes inside storage.
                                    let i = unsafe { std::slice::from_raw_parts(i, len) };
                                    kernels::reduce_acc(ctx.dtype, ctx.op, scratch, i);
                                }
                                (None, Some(o)) => {
                                    // SAFETY: o is len bytes inside storage.
                                    let o = unsafe { std::slice::from_raw_parts_mut(o, len) };
                                    if !p.finish {
                                        kernels::copy(o, scratch);
                                        at = 1;
                                    }
                                }
                                (None, None) => {}
                            }
                        } else {
                            let i = inp.ok_or_else(|| {
                                RuntimeError::InvalidPlan(
                                    "step with neither input nor receive".into(),
                                )
                            })?;
                            at = 2;
                            if let Some(o) = out {
                                if o != i {
                                    // SAFETY: disjoint len-byte ranges in storage.
                                    let (i, o) = unsafe {
                                        (
                                            std::slice::from_raw_parts(i, len),
                                            std::slice::from_raw_parts_mut(o, len),
                                        )
                                    };
                                    kernels::copy(o, i);
                                }
                                at = 1;
                            } else if p.finish {
                                // SAFETY: i is len bytes inside storage.
                                scratch
                                    .copy_from_slice(unsafe { std::slice::from_raw_parts(i, len) });
                                at = 0;
                            }
                        }
                        if p.finish {
                            if at == 1 {
                                // SAFETY: the output range, len bytes in storage.
                                let o =
                                    unsafe { std::slice::from_raw_parts_mut(out.unwrap(), len) };
                                kernels::finish(ctx.dtype, ctx.op, o, n);
                            } else {
                                kernels::finish(ctx.dtype, ctx.op, scratch, n);
                                if let Some(o) = out {
                                    // SAFETY: the output range, len bytes in storage.
                                    kernels::copy(
                                        unsafe { std::slice::from_raw_parts_mut(o, len) },
                                        scratch,
                                    );
                                    at = 1;
                                }
                            }
                        }
                        if let Some(to) = p.send_to {
                            let v: &[u8] = match at {
                                // SAFETY: the output or input range, len bytes in storage.
                                1 => unsafe { std::slice::from_raw_parts(out.unwrap(), len) },
                                // SAFETY: as above.
                                2 => unsafe { std::slice::from_raw_parts(inp.unwrap(), len) },
                                _ => scratch,
                            };
                            t.send(to, p.chan, ctx.protocol, v)?;
                        }
                        done += len;
                    }
                }
                Step::Direct(d) => {
                    let (mut ins, mut outs) = (
                        std::mem::take(&mut self.ins),
                        std::mem::take(&mut self.outs),
                    );
                    ins.clear();
                    outs.clear();
                    for (list, locs) in [(&mut ins, &d.inputs), (&mut outs, &d.outputs)] {
                        for g in locs {
                            let b = t.peer_storage(g.rank).ok_or_else(|| {
                                RuntimeError::Unsupported(format!(
                                    "single-copy steps need every rank's memory mapped; the {} transport does not map rank {}",
                                    t.kind().name(),
                                    g.rank
                                ))
                            })?;
                            let l = Layout::new(ctx.collective, ctx.count, n, g.rank, ctx.in_place);
                            list.push(region(&l, b, g.buf, g.off, d.count)?.ptr);
                        }
                    }
                    let total = d.count * es;
                    let nt = total >= NT_BYTES;
                    let mut done = 0;
                    while done < total {
                        let len = DIRECT_BLOCK.min(total - done);
                        // SAFETY: every pointer addresses a region of `total` bytes (checked by
                        // `region` against that rank's layout); between the schedule's barriers
                        // this rank is the only one touching these output ranges, and inputs
                        // are either equal to an output or disjoint from all of them.
                        unsafe {
                            direct_block(ctx, n, &ins, &outs, done, len, nt, &mut self.scratch)
                        };
                        done += len;
                    }
                    if nt {
                        kernels::store_fence();
                    }
                    self.ins = ins;
                    self.outs = outs;
                }
            }
        }
        Ok(())
    }
}

/// Units of shared single-copy work.
const SHARED_UNIT: usize = 256 * 1024;

/// Input and output pointers of a single-copy step, bounds-checked against each rank's layout.
fn direct_ptrs(
    t: &dyn Transport,
    ctx: &OpCtx,
    d: &crate::schedule::Direct,
) -> Result<(Vec<*mut u8>, Vec<*mut u8>)> {
    let n = t.nranks();
    let es = ctx.dtype.size();
    let mut v = (Vec::new(), Vec::new());
    for (list, locs) in [(&mut v.0, &d.inputs), (&mut v.1, &d.outputs)] {
        for g in locs {
            let base = t.peer_storage(g.rank).ok_or_else(|| {
                RuntimeError::Unsupported(format!(
                    "the {} transport does not map rank {}",
                    t.kind().name(),
                    g.rank
                ))
            })?;
            let l = Layout::new(ctx.collective, ctx.count, n, g.rank, ctx.in_place);
            let (start, limit) = match g.buf {
                Buf::Send => (l.send_off, l.send_len),
                Buf::Recv => (l.recv_off, l.recv_len),
            };
            // Every rank's storage is as large as this rank's (one arena shape).
            let cap = t.peer_storage_len();
            if g.off + d.count > limit || l.total * es > cap {
                return Err(RuntimeError::InvalidPlan(format!(
                    "single-copy step outside rank {}'s buffers",
                    g.rank
                )));
            }
            // SAFETY: (start + off + count) * es <= total * es <= cap, checked above.
            list.push(unsafe { base.add((start + g.off) * es) });
        }
    }
    Ok(v)
}

impl Executor {
    /// Run a single-copy (DIRECT) collective with its work shared dynamically among the ranks
    /// ([`Transport::shared_work`]): `all[q]` is rank q's schedule. One barrier (every input
    /// ready), then units of 256 KiB taken by whichever rank is running, then a wait until
    /// every unit is done. `Ok(false)` when the transport cannot share work (use [`Executor::run`]).
    pub fn run_shared(
        &mut self,
        t: &mut dyn Transport,
        all: &[Vec<Step>],
        ctx: &OpCtx,
    ) -> Result<bool> {
        let n = t.nranks();
        let es = ctx.dtype.size();
        let mut steps = Vec::new();
        for sched in all {
            for s in sched {
                match s {
                    Step::Direct(d) => steps.push(d),
                    Step::Barrier => {}
                    Step::Prim(_) => return Ok(false),
                }
            }
        }
        let mut units: Vec<(usize, usize, usize)> = Vec::new();
        let mut ptrs = Vec::with_capacity(steps.len());
        for (i, d) in steps.iter().enumerate() {
            ptrs.push(direct_ptrs(&*t, ctx, d)?);
            let total = d.count * es;
            let mut off = 0;
            while off < total {
                let len = SHARED_UNIT.min(total - off);
                units.push((i, off, len));
                off += len;
            }
        }
        if self.scratch.len() < DIRECT_BLOCK / 8 {
            self.scratch.resize(DIRECT_BLOCK / 8, 0);
        }
        t.barrier()?;
        let scratch = &mut self.scratch;
        let mut work = |u: u64| {
            let (i, off, len) = units[u as usize];
            let (ins, outs) = &ptrs[i];
            // Streaming stores only when the step's outputs cannot stay in the caches.
            let nt = steps[i].count * es >= NT_BYTES;
            let mut done = 0;
            while done < len {
                let l = DIRECT_BLOCK.min(len - done);
                // SAFETY: direct_ptrs checked every range against its rank's layout; units
                // partition the steps' ranges, and the steps of different ranks write
                // disjoint outputs (the schedule's single-copy contract), so no two units
                // touch the same output bytes.
                unsafe { direct_block(ctx, n, ins, outs, off + done, l, nt, scratch) };
                done += l;
            }
        };
        t.shared_work(units.len() as u64, &mut work)
    }
}

/// One block of a single-copy step: v = reduce(inputs) written to outputs[0], then copied to
/// the other outputs.
///
/// # Safety
/// Each pointer plus `off + len` stays inside mapped storage; an output may equal an input
/// but not overlap it partially; outputs are distinct and nobody else accesses them meanwhile.
#[allow(clippy::too_many_arguments)]
unsafe fn direct_block(
    ctx: &OpCtx,
    n: usize,
    ins: &[*mut u8],
    outs: &[*mut u8],
    off: usize,
    len: usize,
    nt: bool,
    scratch: &mut [u64],
) {
    // SAFETY: caller's contract (every pointer + off + len is in bounds).
    let at = |p: *mut u8| unsafe { p.add(off) };
    let o0 = at(outs[0]);
    let disjoint = outs.iter().all(|&o| ins.iter().all(|&i| i != o));
    if ins.len() == 2 && outs.len() == 2 && disjoint && ctx.op != RedOp::Avg {
        // SAFETY: four distinct, non-overlapping len-byte ranges in bounds (caller's contract
        // plus the disjointness checked above).
        let (a, b, x, y) = unsafe {
            (
                std::slice::from_raw_parts(at(ins[0]), len),
                std::slice::from_raw_parts(at(ins[1]), len),
                std::slice::from_raw_parts_mut(o0, len),
                std::slice::from_raw_parts_mut(at(outs[1]), len),
            )
        };
        if nt {
            let tmp = &mut bytemuck::cast_slice_mut::<u64, u8>(scratch)[..len];
            kernels::reduce(ctx.dtype, ctx.op, tmp, a, b);
            kernels::copy_nt(x, tmp);
            kernels::copy_nt(y, tmp);
        } else {
            kernels::reduce_to2(ctx.dtype, ctx.op, x, y, a, b);
        }
        return;
    }
    if ins.len() == 1 {
        let i = at(ins[0]);
        for &o in outs {
            let o = at(o);
            if nt && o != i {
                // SAFETY: distinct, non-overlapping len-byte ranges (caller's contract).
                let (src, dst) = unsafe {
                    (
                        std::slice::from_raw_parts(i, len),
                        std::slice::from_raw_parts_mut(o, len),
                    )
                };
                kernels::copy_nt(dst, src);
                continue;
            }
            if o != i {
                // SAFETY: distinct, non-overlapping len-byte ranges (caller's contract).
                unsafe { std::ptr::copy_nonoverlapping(i, o, len) };
            }
        }
        return;
    }
    // v into outputs[0] (or scratch if outputs[0] is an input other than the first, so that
    // no input is overwritten before it is read).
    let aliased = ins[1..].iter().any(|&i| at(i) == o0);
    let tmp = &mut bytemuck::cast_slice_mut::<u64, u8>(scratch)[..len];
    {
        // SAFETY: inputs are len-byte ranges in bounds.
        let a = unsafe { std::slice::from_raw_parts(at(ins[0]), len) };
        // SAFETY: as above.
        let b = unsafe { std::slice::from_raw_parts(at(ins[1]), len) };
        if aliased || at(ins[0]) == o0 {
            kernels::reduce(ctx.dtype, ctx.op, tmp, a, b);
        } else {
            // SAFETY: o0 is disjoint from every input here.
            let o = unsafe { std::slice::from_raw_parts_mut(o0, len) };
            kernels::reduce(ctx.dtype, ctx.op, o, a, b);
        }
    }
    let in_tmp = aliased || at(ins[0]) == o0;
    for &i in &ins[2..] {
        // SAFETY: in bounds; when v is in outputs[0] it is disjoint from this input.
        let b = unsafe { std::slice::from_raw_parts(at(i), len) };
        if in_tmp {
            kernels::reduce_acc(ctx.dtype, ctx.op, tmp, b);
        } else {
            // SAFETY: as above.
            let o = unsafe { std::slice::from_raw_parts_mut(o0, len) };
            kernels::reduce_acc(ctx.dtype, ctx.op, o, b);
        }
    }
    let src: *const u8 = if in_tmp {
        kernels::finish(ctx.dtype, ctx.op, tmp, n);
        tmp.as_ptr()
    } else {
        // SAFETY: o0 in bounds, not aliased by any live slice.
        kernels::finish(
            ctx.dtype,
            ctx.op,
            unsafe { std::slice::from_raw_parts_mut(o0, len) },
            n,
        );
        o0
    };
    for &o in outs {
        let o = at(o);
        if !std::ptr::eq(o, src) {
            // SAFETY: distinct outputs of len bytes; src is scratch or outputs[0].
            unsafe { std::ptr::copy_nonoverlapping(src, o, len) };
        }
    }
}
