//! The executor: runs one rank's schedule over a transport, with the host kernels.
use crate::error::{Result, RuntimeError};
use crate::kernels;
use crate::schedule::{Buf, Direct, Layout, Prim, Step};
use crate::transport::Transport;
use crate::types::{Collective, DataType, Protocol, Reduction};

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
    pub op: Reduction,
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
        let es = ctx.dtype.size();
        let (base, cap) = t.storage();
        let me = Layout::new(
            ctx.collective,
            ctx.count,
            t.nranks(),
            t.rank(),
            ctx.in_place,
        );
        if me.total * es > cap {
            return Err(RuntimeError::InvalidPlan(format!(
                "buffers of {} bytes exceed the {cap} bytes of storage",
                me.total * es
            )));
        }
        let piece = t.piece_bytes(ctx.protocol);
        let words = piece.max(DIRECT_BLOCK) / 8;
        if self.scratch.len() < words {
            self.scratch.resize(words, 0);
        }
        for step in steps {
            match step {
                Step::Barrier => t.barrier()?,
                Step::Prim(p) => self.prim(t, p, ctx, Mine { layout: &me, base }, piece)?,
                Step::Direct(d) => self.direct(t, d, ctx)?,
            }
        }
        Ok(())
    }

    /// A point-to-point step, one transport piece at a time.
    fn prim(
        &mut self,
        t: &mut dyn Transport,
        p: &Prim,
        ctx: &OpCtx,
        me: Mine,
        piece: usize,
    ) -> Result<()> {
        if p.count == 0 {
            return Ok(());
        }
        let es = ctx.dtype.size();
        let at = |l: Option<crate::schedule::Loc>| {
            l.map(|l| region(me.layout, me.base, l.buf, l.off, p.count, es))
                .transpose()
        };
        let (input, output) = (at(p.input)?, at(p.output)?);
        let total = p.count * es;
        let mut done = 0;
        while done < total {
            let len = piece.min(total - done);
            debug_assert!(
                input
                    .iter()
                    .chain(output.iter())
                    .all(|r| done + len <= r.len)
            );
            // The schedule gives each region to one step at a time and never overlaps an input
            // and an output partially (they are equal or disjoint), so the pieces alias
            // nothing but as `Piece` describes.
            let pc = Piece {
                // SAFETY: done + len <= region length.
                inp: input.as_ref().map(|r| unsafe { r.ptr.add(done) }),
                // SAFETY: as above.
                out: output.as_ref().map(|r| unsafe { r.ptr.add(done) }),
                len,
            };
            let scratch = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.scratch)[..len];
            prim_piece(t, p, ctx, &pc, scratch)?;
            done += len;
        }
        Ok(())
    }

    /// A single-copy step: every input and output mapped, reduced block by block.
    fn direct(&mut self, t: &mut dyn Transport, d: &Direct, ctx: &OpCtx) -> Result<()> {
        let n = t.nranks();
        let es = ctx.dtype.size();
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
                list.push(region(&l, b, g.buf, g.off, d.count, es)?.ptr);
            }
        }
        let total = d.count * es;
        let nt = total >= NT_BYTES;
        let mut done = 0;
        while done < total {
            let len = DIRECT_BLOCK.min(total - done);
            // SAFETY: every pointer addresses a region of `total` bytes (checked by `region`
            // against that rank's layout); between the schedule's barriers this rank is the
            // only one touching these output ranges, and inputs are either equal to an output
            // or disjoint from all of them.
            unsafe { direct_block(ctx, n, &ins, &outs, done, len, nt, &mut self.scratch) };
            done += len;
        }
        if nt {
            kernels::store_fence();
        }
        self.ins = ins;
        self.outs = outs;
        Ok(())
    }
}

/// This rank's buffers: its layout and where its storage starts.
#[derive(Clone, Copy)]
struct Mine<'a> {
    layout: &'a Layout,
    base: *mut u8,
}

/// `count` elements at `off` of one buffer of a rank whose storage starts at `base`, checked
/// against that rank's layout.
fn region(
    layout: &Layout,
    base: *mut u8,
    buf: Buf,
    off: usize,
    count: usize,
    es: usize,
) -> Result<Region> {
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
    Ok(Region {
        // SAFETY: (start + off + count) * es <= total * es <= the storage's capacity, which
        // the callers check against this layout, so the pointer stays inside that storage.
        ptr: unsafe { base.add((start + off) * es) },
        len: count * es,
    })
}

/// One piece of a point-to-point step: `len` bytes at `inp` and `out` (each inside storage,
/// equal or disjoint, never aliasing the scratch piece).
struct Piece {
    inp: Option<*mut u8>,
    out: Option<*mut u8>,
    len: usize,
}

/// Where a piece's value ends up before it is sent.
#[derive(Clone, Copy, PartialEq)]
enum At {
    Scratch,
    Output,
    Input,
}

impl Piece {
    /// SAFETY (callers): `inp` is set and not written while the slice lives.
    unsafe fn inp(&self) -> &[u8] {
        // SAFETY: `inp` addresses `len` bytes inside storage.
        unsafe { std::slice::from_raw_parts(self.inp.expect("an input"), self.len) }
    }
}

/// The piece's output as a slice.
/// SAFETY (callers): `pc.out` is set and no other slice of that range is alive.
unsafe fn out_mut<'a>(pc: &Piece) -> &'a mut [u8] {
    let o: *mut u8 = pc.out.expect("an output");
    // SAFETY: `out` addresses `len` bytes inside storage, unaliased (the caller's promise).
    unsafe { std::slice::from_raw_parts_mut(o, pc.len) }
}

fn prim_piece(
    t: &mut dyn Transport,
    p: &Prim,
    ctx: &OpCtx,
    pc: &Piece,
    scratch: &mut [u8],
) -> Result<()> {
    let mut at = match p.recv_from {
        Some(from) => {
            t.recv(from, p.chan, ctx.protocol, scratch)?;
            // SAFETY: the piece's ranges are as `Piece` says.
            unsafe { combine_received(p, ctx, pc, scratch) }
        }
        // SAFETY: as above.
        None => unsafe { take_input(p, pc, scratch)? },
    };
    if p.finish {
        // SAFETY: as above.
        at = unsafe { finish_piece(ctx, t.nranks(), pc, scratch, at) };
    }
    if let Some(to) = p.send_to {
        let v: &[u8] = match at {
            // SAFETY: the output or input range, len bytes in storage, not written while sent.
            At::Output => unsafe { std::slice::from_raw_parts(pc.out.expect("an output"), pc.len) },
            // SAFETY: as above.
            At::Input => unsafe { pc.inp() },
            At::Scratch => scratch,
        };
        t.send(to, p.chan, ctx.protocol, v)?;
    }
    Ok(())
}

/// Reduces (or copies) a received piece into place.
/// SAFETY (callers): the piece's ranges are as [`Piece`] says.
unsafe fn combine_received(p: &Prim, ctx: &OpCtx, pc: &Piece, scratch: &mut [u8]) -> At {
    match (pc.inp, pc.out) {
        (Some(i), Some(o)) if i == o => {
            // SAFETY: o is len bytes inside storage, not aliased by scratch.
            kernels::reduce_acc(ctx.dtype, ctx.op, unsafe { out_mut(pc) }, scratch);
            At::Output
        }
        (Some(_), Some(_)) => {
            // SAFETY: i and o are disjoint len-byte ranges in storage.
            let (i, o) = unsafe { (pc.inp(), out_mut(pc)) };
            kernels::reduce(ctx.dtype, ctx.op, o, i, scratch);
            At::Output
        }
        (Some(_), None) => {
            // SAFETY: i is len bytes inside storage.
            kernels::reduce_acc(ctx.dtype, ctx.op, scratch, unsafe { pc.inp() });
            At::Scratch
        }
        (None, Some(_)) if !p.finish => {
            // SAFETY: o is len bytes inside storage.
            kernels::copy(unsafe { out_mut(pc) }, scratch);
            At::Output
        }
        _ => At::Scratch,
    }
}

/// A piece that starts from this rank's own input.
/// SAFETY (callers): the piece's ranges are as [`Piece`] says.
unsafe fn take_input(p: &Prim, pc: &Piece, scratch: &mut [u8]) -> Result<At> {
    let i = pc
        .inp
        .ok_or_else(|| RuntimeError::InvalidPlan("step with neither input nor receive".into()))?;
    Ok(match pc.out {
        Some(o) => {
            if o != i {
                // SAFETY: disjoint len-byte ranges in storage.
                let (i, o) = unsafe { (pc.inp(), out_mut(pc)) };
                kernels::copy(o, i);
            }
            At::Output
        }
        None if p.finish => {
            // SAFETY: i is len bytes inside storage.
            scratch.copy_from_slice(unsafe { pc.inp() });
            At::Scratch
        }
        None => At::Input,
    })
}

/// The operator's post-op (Avg divides by `n`) where the value is, then into the output.
/// SAFETY (callers): the piece's ranges are as [`Piece`] says.
unsafe fn finish_piece(ctx: &OpCtx, n: usize, pc: &Piece, scratch: &mut [u8], at: At) -> At {
    if at == At::Output {
        // SAFETY: the output range, len bytes in storage.
        kernels::finish(ctx.dtype, ctx.op, unsafe { out_mut(pc) }, n);
        return At::Output;
    }
    kernels::finish(ctx.dtype, ctx.op, scratch, n);
    if pc.out.is_some() {
        // SAFETY: the output range, len bytes in storage.
        kernels::copy(unsafe { out_mut(pc) }, scratch);
        return At::Output;
    }
    at
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
    if ins.len() == 2 && outs.len() == 2 && disjoint && ctx.op != Reduction::Avg {
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
