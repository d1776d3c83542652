//! Schedules: a [`CollectivePlan`] becomes, for each rank, the ordered list of steps it runs.
//!
//! One pure generator serves every backend. Steps are NCCL's primitives in one shape
//! ([`Prim`]: optionally receive, optionally combine with a local input, optionally write a
//! local output, optionally send the value on) plus, for ranks that map each other's buffers,
//! single-copy [`Direct`] steps between [`Step::Barrier`]s.
//!
//! Channels run one after another on a rank (channel 0's steps, then channel 1's), so every
//! channel is a self-contained collective over its own FIFOs. A FIFO must hold at least two
//! chunks (`chunk_elems`) for the ring and point-to-point schedules to be deadlock-free; the
//! executor sizes chunks to half of a FIFO.
use crate::error::Result;
use crate::types::{Algorithm, Collective, CollectivePlan};

/// Which of a rank's two buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Buf {
    Send,
    Recv,
}

/// A place in this rank's buffers, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub buf: Buf,
    pub off: usize,
}

/// A place in any rank's buffers (single-copy steps), in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GLoc {
    pub rank: usize,
    pub buf: Buf,
    pub off: usize,
}

/// NCCL's generic primitive: `v = recv (op) input` (either alone when the other is absent),
/// then `output = v` and/or `send(v)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prim {
    pub chan: usize,
    pub count: usize,
    pub recv_from: Option<usize>,
    pub input: Option<Loc>,
    pub output: Option<Loc>,
    pub send_to: Option<usize>,
    /// This step completes the reduction: apply the operator's post-op (Avg divides by nranks).
    pub finish: bool,
}

/// Single copy: `v = inputs[0] (op) inputs[1] ...`, written to every output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Direct {
    pub count: usize,
    pub inputs: Vec<GLoc>,
    pub outputs: Vec<GLoc>,
    pub finish: bool,
}

/// One step of a rank's schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Prim(Prim),
    Direct(Direct),
    /// Every rank reaches this point before any goes on.
    Barrier,
}

/// Where the send and receive buffers sit in one rank's storage, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub send_off: usize,
    pub send_len: usize,
    pub recv_off: usize,
    pub recv_len: usize,
    /// Elements of storage the rank needs.
    pub total: usize,
}

impl Layout {
    /// NCCL's in-place aliasing: AllGather's input is the rank's block of the output,
    /// ReduceScatter's output is the rank's block of the input, the others share one buffer.
    pub fn new(
        coll: Collective,
        count: usize,
        nranks: usize,
        rank: usize,
        in_place: bool,
    ) -> Layout {
        let (s, r) = coll.buffer_elems(count, nranks);
        if !in_place || !coll.has_in_place() {
            return Layout {
                send_off: 0,
                send_len: s,
                recv_off: s,
                recv_len: r,
                total: s + r,
            };
        }
        match coll {
            Collective::AllGather => Layout {
                send_off: rank * count,
                send_len: s,
                recv_off: 0,
                recv_len: r,
                total: r,
            },
            Collective::ReduceScatter => Layout {
                send_off: 0,
                send_len: s,
                recv_off: rank * count,
                recv_len: r,
                total: s,
            },
            _ => Layout {
                send_off: 0,
                send_len: s,
                recv_off: 0,
                recv_len: r,
                total: s.max(r),
            },
        }
    }

    /// Offset in storage of a buffer position.
    pub fn at(&self, buf: Buf, off: usize) -> usize {
        match buf {
            Buf::Send => self.send_off + off,
            Buf::Recv => self.recv_off + off,
        }
    }
}

/// Split `total` into `parts` near-equal pieces: (offset, len) of piece `i`.
fn split(total: usize, parts: usize, i: usize) -> (usize, usize) {
    let base = total / parts;
    let extra = total % parts;
    let off = i * base + i.min(extra);
    (off, base + usize::from(i < extra))
}

/// Pieces of at most `chunk` elements covering `len` elements from `off`.
fn pieces(off: usize, len: usize, chunk: usize) -> impl Iterator<Item = (usize, usize)> {
    let chunk = chunk.max(1);
    (0..len.div_ceil(chunk)).map(move |i| (off + i * chunk, chunk.min(len - i * chunk)))
}

fn loc(buf: Buf, off: usize) -> Option<Loc> {
    Some(Loc { buf, off })
}

/// The steps `rank` runs for `count` elements (nccl-tests' count column) under `plan`.
/// `chunk_elems` bounds one step's elements (half of a FIFO). For SendRecv, rank r sends to
/// r+1 and receives from r-1, as nccl-tests does.
pub fn schedule(
    plan: &CollectivePlan,
    rank: usize,
    count: usize,
    chunk_elems: usize,
) -> Result<Vec<Step>> {
    plan.validate()?;
    let n = plan.nranks;
    let chunk = chunk_elems.max(1);
    let mut steps = Vec::new();
    if count == 0 {
        return Ok(steps);
    }
    let coll = plan.collective;
    if plan.algorithm == Algorithm::Direct {
        direct(coll, n, rank, plan.root, count, &mut steps);
        return Ok(steps);
    }
    let nch = plan.nchannels;
    if matches!(coll, Collective::AllToAll | Collective::SendRecv) {
        p2p(coll, n, rank, nch, count, chunk, &mut steps);
        return Ok(steps);
    }
    if n == 1 {
        // Only a local copy (with the post-op for reductions).
        for (off, len) in pieces(0, count, chunk) {
            steps.push(p(
                0,
                len,
                None,
                loc(Buf::Send, off),
                loc(Buf::Recv, off),
                None,
                coll.reduces(),
            ));
        }
        return Ok(steps);
    }
    for c in 0..nch {
        let r = RingStep::new(plan, c, rank, count, chunk);
        match (coll, plan.algorithm) {
            (Collective::AllReduce, Algorithm::Tree) => tree_allreduce(&r, &mut steps),
            (Collective::AllReduce, _) => ring_allreduce(&r, &mut steps),
            (Collective::AllGather, _) => ring_allgather(&r, &mut steps),
            (Collective::ReduceScatter, _) => ring_reducescatter(&r, &mut steps),
            (Collective::Broadcast, _) => ring_broadcast(&r, &mut steps),
            (Collective::Reduce, _) => ring_reduce(&r, &mut steps),
            (Collective::AllToAll | Collective::SendRecv, _) => unreachable!("handled above"),
        }
    }
    Ok(steps)
}

fn p(
    chan: usize,
    count: usize,
    recv_from: Option<usize>,
    input: Option<Loc>,
    output: Option<Loc>,
    send_to: Option<usize>,
    finish: bool,
) -> Step {
    Step::Prim(Prim {
        chan,
        count,
        recv_from,
        input,
        output,
        send_to,
        finish,
    })
}

/// One rank's place on one channel: its ring neighbours and the channel's share of the data.
struct RingStep<'a> {
    plan: &'a CollectivePlan,
    chan: usize,
    n: usize,
    rank: usize,
    count: usize,
    chunk: usize,
    ring: &'a [usize],
    pos: usize,
    next: usize,
    prev: usize,
    /// The channel's elements: `len` from `off`.
    off: usize,
    len: usize,
}

impl<'a> RingStep<'a> {
    fn new(plan: &'a CollectivePlan, c: usize, rank: usize, count: usize, chunk: usize) -> Self {
        let n = plan.nranks;
        let ring = &plan.rings[c];
        let pos = ring
            .iter()
            .position(|&r| r == rank)
            .expect("validated ring");
        let (off, len) = split(count, plan.nchannels, c);
        RingStep {
            plan,
            chan: c,
            n,
            rank,
            count,
            chunk,
            ring,
            pos,
            next: ring[(pos + 1) % n],
            prev: ring[(pos + n - 1) % n],
            off,
            len,
        }
    }

    /// ringRanks[k]: the rank k places after this one on the ring.
    fn at(&self, k: usize) -> usize {
        self.ring[(self.pos + k) % self.n]
    }
}

/// AllReduce on a tree: reduce up (each child's partial folded in, the last forwarded), then
/// broadcast down.
fn tree_allreduce(r: &RingStep, steps: &mut Vec<Step>) {
    let (c, chunk, rank) = (r.chan, r.chunk, r.rank);
    let (coff, clen) = (r.off, r.len);
    let node = &r.plan.trees[c][rank];
    for (off, len) in pieces(coff, clen, chunk) {
        // Reduce up: fold each child's partial into the output, forward the last.
        let mut acc = Buf::Send;
        if node.children.is_empty() {
            steps.push(p(
                c,
                len,
                None,
                loc(Buf::Send, off),
                None,
                node.parent,
                false,
            ));
        }
        for (i, &child) in node.children.iter().enumerate() {
            let last = i + 1 == node.children.len();
            let (out, send) = if last && node.parent.is_some() {
                (None, node.parent)
            } else {
                (loc(Buf::Recv, off), None)
            };
            let finish = last && node.parent.is_none();
            steps.push(p(c, len, Some(child), loc(acc, off), out, send, finish));
            acc = Buf::Recv;
        }
        // Broadcast down.
        let mut kids = node.children.iter();
        match node.parent {
            Some(parent) => {
                let first = kids.next().copied();
                steps.push(p(
                    c,
                    len,
                    Some(parent),
                    None,
                    loc(Buf::Recv, off),
                    first,
                    false,
                ));
            }
            None if node.children.is_empty() => {
                steps.push(p(
                    c,
                    len,
                    None,
                    loc(Buf::Send, off),
                    loc(Buf::Recv, off),
                    None,
                    true,
                ));
            }
            None => {}
        }
        for &k in kids {
            steps.push(p(c, len, None, loc(Buf::Recv, off), None, Some(k), false));
        }
    }
}

/// AllReduce on a ring: loops of n chunks; chunk k of a loop is reduced fully at ring
/// position k, then travels once more around.
fn ring_allreduce(r: &RingStep, steps: &mut Vec<Step>) {
    let (c, n, chunk, pos, next, prev) = (r.chan, r.n, r.chunk, r.pos, r.next, r.prev);
    let (coff, clen) = (r.off, r.len);
    let loop_elems = chunk * n;
    let mut lo = 0;
    while lo < clen {
        let llen = loop_elems.min(clen - lo);
        let ck = |k: usize| {
            let (o, l) = split(llen, n, k % n);
            (coff + lo + o, l)
        };
        let (o, l) = ck(pos + n - 1);
        steps.push(p(c, l, None, loc(Buf::Send, o), None, Some(next), false));
        for j in 2..n {
            let (o, l) = ck(pos + n - j);
            steps.push(p(
                c,
                l,
                Some(prev),
                loc(Buf::Send, o),
                None,
                Some(next),
                false,
            ));
        }
        let (o, l) = ck(pos);
        steps.push(p(
            c,
            l,
            Some(prev),
            loc(Buf::Send, o),
            loc(Buf::Recv, o),
            Some(next),
            true,
        ));
        for j in 1..n - 1 {
            let (o, l) = ck(pos + n - j);
            steps.push(p(
                c,
                l,
                Some(prev),
                None,
                loc(Buf::Recv, o),
                Some(next),
                false,
            ));
        }
        let (o, l) = ck(pos + 1);
        steps.push(p(c, l, Some(prev), None, loc(Buf::Recv, o), None, false));
        lo += llen;
    }
}

/// AllGather on a ring: each rank's block travels n - 1 hops.
fn ring_allgather(r: &RingStep, steps: &mut Vec<Step>) {
    let (c, n, count, chunk, rank, next, prev) =
        (r.chan, r.n, r.count, r.chunk, r.rank, r.next, r.prev);
    let (coff, clen) = (r.off, r.len);
    let rr = |k: usize| r.at(k);

    for (off, len) in pieces(coff, clen, chunk) {
        let blk = |r: usize| r * count + off;
        steps.push(p(
            c,
            len,
            None,
            loc(Buf::Send, off),
            loc(Buf::Recv, blk(rank)),
            Some(next),
            false,
        ));
        for j in 1..n - 1 {
            steps.push(p(
                c,
                len,
                Some(prev),
                None,
                loc(Buf::Recv, blk(rr(n - j))),
                Some(next),
                false,
            ));
        }
        steps.push(p(
            c,
            len,
            Some(prev),
            None,
            loc(Buf::Recv, blk(rr(1))),
            None,
            false,
        ));
    }
}

/// ReduceScatter on a ring: each block is reduced along n - 1 hops and lands on its rank.
fn ring_reducescatter(r: &RingStep, steps: &mut Vec<Step>) {
    let (c, n, count, chunk, rank, next, prev) =
        (r.chan, r.n, r.count, r.chunk, r.rank, r.next, r.prev);
    let (coff, clen) = (r.off, r.len);
    let rr = |k: usize| r.at(k);

    for (off, len) in pieces(coff, clen, chunk) {
        let blk = |r: usize| r * count + off;
        steps.push(p(
            c,
            len,
            None,
            loc(Buf::Send, blk(rr(n - 1))),
            None,
            Some(next),
            false,
        ));
        for j in 2..n {
            steps.push(p(
                c,
                len,
                Some(prev),
                loc(Buf::Send, blk(rr(n - j))),
                None,
                Some(next),
                false,
            ));
        }
        steps.push(p(
            c,
            len,
            Some(prev),
            loc(Buf::Send, blk(rank)),
            loc(Buf::Recv, off),
            None,
            true,
        ));
    }
}

/// Broadcast on a ring from the root: every rank forwards to the next until the one before
/// the root.
fn ring_broadcast(r: &RingStep, steps: &mut Vec<Step>) {
    let (c, chunk, rank, next, prev) = (r.chan, r.chunk, r.rank, r.next, r.prev);
    let (coff, clen) = (r.off, r.len);
    let root = r.plan.root;
    for (off, len) in pieces(coff, clen, chunk) {
        if rank == root {
            steps.push(p(
                c,
                len,
                None,
                loc(Buf::Send, off),
                loc(Buf::Recv, off),
                Some(next),
                false,
            ));
        } else if next == root {
            steps.push(p(
                c,
                len,
                Some(prev),
                None,
                loc(Buf::Recv, off),
                None,
                false,
            ));
        } else {
            steps.push(p(
                c,
                len,
                Some(prev),
                None,
                loc(Buf::Recv, off),
                Some(next),
                false,
            ));
        }
    }
}

/// Reduce on a ring to the root: partials start after the root and end on it.
fn ring_reduce(r: &RingStep, steps: &mut Vec<Step>) {
    let (c, chunk, rank, next, prev) = (r.chan, r.chunk, r.rank, r.next, r.prev);
    let (coff, clen) = (r.off, r.len);
    let root = r.plan.root;
    for (off, len) in pieces(coff, clen, chunk) {
        if prev == root {
            steps.push(p(
                c,
                len,
                None,
                loc(Buf::Send, off),
                None,
                Some(next),
                false,
            ));
        } else if rank == root {
            steps.push(p(
                c,
                len,
                Some(prev),
                loc(Buf::Send, off),
                loc(Buf::Recv, off),
                None,
                true,
            ));
        } else {
            steps.push(p(
                c,
                len,
                Some(prev),
                loc(Buf::Send, off),
                None,
                Some(next),
                false,
            ));
        }
    }
}

/// AlltoAll and SendRecv over point-to-point channels: peers at distance k use channel k % nch.
fn p2p(
    coll: Collective,
    n: usize,
    rank: usize,
    nch: usize,
    count: usize,
    chunk: usize,
    steps: &mut Vec<Step>,
) {
    let prim = |chan, count, recv_from, input, output, send_to| {
        Step::Prim(Prim {
            chan,
            count,
            recv_from,
            input,
            output,
            send_to,
            finish: false,
        })
    };
    if coll == Collective::SendRecv {
        let (to, from) = ((rank + 1) % n, (rank + n - 1) % n);
        for (off, len) in pieces(0, count, chunk) {
            if n == 1 {
                steps.push(prim(
                    0,
                    len,
                    None,
                    loc(Buf::Send, off),
                    loc(Buf::Recv, off),
                    None,
                ));
            } else {
                steps.push(prim(0, len, None, loc(Buf::Send, off), None, Some(to)));
                steps.push(prim(0, len, Some(from), None, loc(Buf::Recv, off), None));
            }
        }
        return;
    }
    for (off, len) in pieces(0, count, chunk) {
        steps.push(prim(
            0,
            len,
            None,
            loc(Buf::Send, rank * count + off),
            loc(Buf::Recv, rank * count + off),
            None,
        ));
        for k in 1..n {
            let (to, from) = ((rank + k) % n, (rank + n - k) % n);
            let chan = k % nch;
            steps.push(prim(
                chan,
                len,
                None,
                loc(Buf::Send, to * count + off),
                None,
                Some(to),
            ));
            steps.push(prim(
                chan,
                len,
                Some(from),
                None,
                loc(Buf::Recv, from * count + off),
                None,
            ));
        }
    }
}

/// Single-copy schedules for ranks that map every buffer: barrier, each rank does its share,
/// barrier.
fn direct(
    coll: Collective,
    n: usize,
    rank: usize,
    root: usize,
    count: usize,
    steps: &mut Vec<Step>,
) {
    let g = |rank, buf, off| GLoc { rank, buf, off };
    let all = |buf: Buf, off: usize| (0..n).map(|q| g(q, buf, off)).collect::<Vec<_>>();
    steps.push(Step::Barrier);
    let d = |count, inputs, outputs, finish| {
        Step::Direct(Direct {
            count,
            inputs,
            outputs,
            finish,
        })
    };
    match coll {
        Collective::AllReduce | Collective::Reduce => {
            let (off, len) = split(count, n, rank);
            if len > 0 {
                let outs = if coll == Collective::AllReduce {
                    all(Buf::Recv, off)
                } else {
                    vec![g(root, Buf::Recv, off)]
                };
                steps.push(d(len, all(Buf::Send, off), outs, true));
            }
        }
        Collective::ReduceScatter => {
            steps.push(d(
                count,
                all(Buf::Send, rank * count),
                vec![g(rank, Buf::Recv, 0)],
                true,
            ));
        }
        Collective::AllGather => {
            for q in 0..n {
                steps.push(d(
                    count,
                    vec![g(q, Buf::Send, 0)],
                    vec![g(rank, Buf::Recv, q * count)],
                    false,
                ));
            }
        }
        Collective::Broadcast => {
            steps.push(d(
                count,
                vec![g(root, Buf::Send, 0)],
                vec![g(rank, Buf::Recv, 0)],
                false,
            ));
        }
        Collective::AllToAll => {
            for q in 0..n {
                steps.push(d(
                    count,
                    vec![g(q, Buf::Send, rank * count)],
                    vec![g(rank, Buf::Recv, q * count)],
                    false,
                ));
            }
        }
        Collective::SendRecv => {
            let from = (rank + n - 1) % n;
            steps.push(d(
                count,
                vec![g(from, Buf::Send, 0)],
                vec![g(rank, Buf::Recv, 0)],
                false,
            ));
        }
    }
    steps.push(Step::Barrier);
}

#[cfg(test)]
pub(crate) mod sim {
    //! A simulator: runs every rank's steps over bounded FIFOs on integer data and returns each
    //! rank's storage, or reports a deadlock.
    use super::*;
    use std::collections::{HashMap, VecDeque};

    /// Run `n` ranks; `reduce` combines two values; `post` is the finishing post-op.
    pub fn run(
        plan: &CollectivePlan,
        count: usize,
        chunk: usize,
        in_place: bool,
        inputs: &[Vec<i64>],
        reduce: fn(i64, i64) -> i64,
        post: &dyn Fn(i64) -> i64,
    ) -> std::result::Result<Vec<(Layout, Vec<i64>)>, String> {
        let n = plan.nranks;
        let scheds: Vec<Vec<Step>> = (0..n)
            .map(|r| schedule(plan, r, count, chunk).unwrap())
            .collect();
        let mut mem: Vec<(Layout, Vec<i64>)> = (0..n)
            .map(|r| {
                let l = Layout::new(plan.collective, count, n, r, in_place);
                let mut v = vec![-777; l.total];
                v[l.send_off..l.send_off + l.send_len].copy_from_slice(&inputs[r]);
                (l, v)
            })
            .collect();
        let cap = 2 * chunk.max(1);
        let mut fifos: HashMap<(usize, usize, usize), VecDeque<Vec<i64>>> = HashMap::new();
        let mut pc = vec![0usize; n];
        let mut at_barrier = vec![false; n];
        loop {
            let mut progressed = false;
            for r in 0..n {
                while pc[r] < scheds[r].len() {
                    match &scheds[r][pc[r]] {
                        Step::Barrier => {
                            at_barrier[r] = true;
                            break;
                        }
                        Step::Direct(d) => {
                            let mut v = vec![0i64; d.count];
                            for (i, src) in d.inputs.iter().enumerate() {
                                let (l, m) = &mem[src.rank];
                                let base = l.at(src.buf, src.off);
                                assert!(
                                    src.off + d.count
                                        <= if src.buf == Buf::Send {
                                            l.send_len
                                        } else {
                                            l.recv_len
                                        }
                                );
                                for e in 0..d.count {
                                    v[e] = if i == 0 {
                                        m[base + e]
                                    } else {
                                        reduce(v[e], m[base + e])
                                    };
                                }
                            }
                            if d.finish {
                                v.iter_mut().for_each(|x| *x = post(*x));
                            }
                            for dst in &d.outputs {
                                let (l, m) = &mut mem[dst.rank];
                                let base = l.at(dst.buf, dst.off);
                                m[base..base + d.count].copy_from_slice(&v);
                            }
                        }
                        Step::Prim(s) => {
                            if s.count == 0 {
                                pc[r] += 1;
                                continue;
                            }
                            if let Some(from) = s.recv_from
                                && fifos.get(&(from, r, s.chan)).is_none_or(|q| q.is_empty())
                            {
                                break;
                            }
                            if let Some(to) = s.send_to {
                                let used: usize = fifos
                                    .get(&(r, to, s.chan))
                                    .map_or(0, |q| q.iter().map(Vec::len).sum());
                                if used + s.count > cap {
                                    break;
                                }
                            }
                            let (l, m) = &mut mem[r];
                            let mut v: Option<Vec<i64>> = s.input.map(|i| {
                                let b = l.at(i.buf, i.off);
                                m[b..b + s.count].to_vec()
                            });
                            if let Some(from) = s.recv_from {
                                let got = fifos
                                    .get_mut(&(from, r, s.chan))
                                    .unwrap()
                                    .pop_front()
                                    .unwrap();
                                assert_eq!(got.len(), s.count, "message size mismatch at rank {r}");
                                v = Some(match v {
                                    Some(a) => {
                                        a.iter().zip(&got).map(|(x, y)| reduce(*y, *x)).collect()
                                    }
                                    None => got,
                                });
                            }
                            let mut v = v.expect("step with neither input nor recv");
                            if s.finish {
                                v.iter_mut().for_each(|x| *x = post(*x));
                            }
                            if let Some(o) = s.output {
                                let b = l.at(o.buf, o.off);
                                m[b..b + s.count].copy_from_slice(&v);
                            }
                            if let Some(to) = s.send_to {
                                fifos.entry((r, to, s.chan)).or_default().push_back(v);
                            }
                        }
                    }
                    pc[r] += 1;
                    progressed = true;
                }
            }
            if at_barrier.iter().all(|&b| b)
                || (at_barrier.iter().any(|&b| b)
                    && (0..n).all(|r| at_barrier[r] || pc[r] == scheds[r].len()))
            {
                if at_barrier.iter().all(|&b| b) {
                    for r in 0..n {
                        at_barrier[r] = false;
                        pc[r] += 1;
                    }
                    continue;
                }
                return Err("barrier not reached by every rank".into());
            }
            if (0..n).all(|r| pc[r] == scheds[r].len()) {
                if fifos.values().any(|q| !q.is_empty()) {
                    return Err("messages left in a fifo".into());
                }
                return Ok(mem);
            }
            if !progressed {
                return Err(format!("deadlock at pcs {pc:?}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Protocol, TreeNode};
    use proptest::prelude::*;

    fn expected(
        coll: Collective,
        n: usize,
        count: usize,
        root: usize,
        inputs: &[Vec<i64>],
        red: fn(i64, i64) -> i64,
        post: &dyn Fn(i64) -> i64,
    ) -> Vec<Option<Vec<i64>>> {
        let fold = |f: &dyn Fn(usize) -> i64| -> i64 {
            let mut a = f(0);
            for r in 1..n {
                a = red(a, f(r));
            }
            post(a)
        };
        (0..n)
            .map(|r| match coll {
                Collective::AllReduce => {
                    Some((0..count).map(|i| fold(&|q| inputs[q][i])).collect())
                }
                Collective::Reduce => {
                    (r == root).then(|| (0..count).map(|i| fold(&|q| inputs[q][i])).collect())
                }
                Collective::ReduceScatter => Some(
                    (0..count)
                        .map(|i| fold(&|q| inputs[q][r * count + i]))
                        .collect(),
                ),
                Collective::AllGather => Some(
                    (0..n * count)
                        .map(|i| inputs[i / count][i % count])
                        .collect(),
                ),
                Collective::Broadcast => Some(inputs[root].clone()),
                Collective::AllToAll => Some(
                    (0..n * count)
                        .map(|i| inputs[i / count][r * count + i % count])
                        .collect(),
                ),
                Collective::SendRecv => Some(inputs[(r + n - 1) % n].clone()),
            })
            .collect()
    }

    fn check(
        plan: &CollectivePlan,
        count: usize,
        chunk: usize,
        in_place: bool,
        seed: i64,
    ) -> std::result::Result<(), String> {
        let n = plan.nranks;
        let coll = plan.collective;
        let inputs: Vec<Vec<i64>> = (0..n)
            .map(|r| {
                let (s, _) = coll.buffer_elems(count, n);
                (0..s)
                    .map(|i| ((r as i64 * 31 + i as i64 * 7 + seed) % 13) - 6)
                    .collect()
            })
            .collect();
        type Case<'a> = (fn(i64, i64) -> i64, &'a dyn Fn(i64) -> i64);
        let cases: [Case; 2] = [(|a, b| a + b, &|x| x * 3), (|a, b| a.max(b), &|x| x)];
        for (red, post) in cases {
            let out = sim::run(plan, count, chunk, in_place, &inputs, red, post)?;
            let want = expected(coll, n, count, plan.root, &inputs, red, post);
            for r in 0..n {
                if let Some(w) = &want[r] {
                    let (l, m) = &out[r];
                    let got = &m[l.recv_off..l.recv_off + l.recv_len];
                    if got != &w[..] {
                        return Err(format!("rank {r}: got {got:?}, want {w:?}"));
                    }
                }
            }
        }
        Ok(())
    }

    fn random_tree(n: usize, seed: u64) -> Vec<TreeNode> {
        // Each rank > 0 in a shuffled order hangs below an earlier one.
        let mut order: Vec<usize> = (0..n).collect();
        let mut s = seed;
        for i in (1..n).rev() {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            order.swap(i, (s >> 33) as usize % (i + 1));
        }
        let mut t = vec![TreeNode::default(); n];
        for i in 1..n {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let p = order[(s >> 33) as usize % i];
            t[order[i]].parent = Some(p);
            t[p].children.push(order[i]);
        }
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
        #[test]
        fn every_schedule_computes_its_collective(
            coll_i in 0usize..7,
            algo_i in 0usize..3,
            n in 1usize..=9,
            count in prop_oneof![Just(0usize), Just(1), Just(2), Just(3), Just(7), Just(13), Just(31), Just(97), 0usize..200],
            nch in 1usize..=4,
            chunk in prop_oneof![Just(1usize), Just(2), Just(5), Just(64), 1usize..40],
            in_place in any::<bool>(),
            root_seed in any::<u64>(),
            shuffle in any::<bool>(),
        ) {
            let coll = Collective::RUN_ORDER[coll_i];
            let algo = [Algorithm::Ring, Algorithm::Tree, Algorithm::Direct][algo_i];
            let mut plan = CollectivePlan::host_default(coll, algo, Protocol::Simple, n, nch);
            plan.root = (root_seed as usize) % n;
            if shuffle {
                for (c, ring) in plan.rings.iter_mut().enumerate() {
                    let mut s = root_seed.wrapping_add(c as u64);
                    for i in (1..n).rev() {
                        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        ring.swap(i, (s >> 33) as usize % (i + 1));
                    }
                }
                for (c, tree) in plan.trees.iter_mut().enumerate() {
                    *tree = random_tree(n, root_seed ^ c as u64);
                }
            }
            check(&plan, count, chunk, in_place, root_seed as i64 % 5).map_err(|e| TestCaseError::fail(format!("{coll:?} {algo:?} n={n} count={count} nch={nch} chunk={chunk} in_place={in_place}: {e}")))?;
        }
    }

    #[test]
    fn ring_allreduce_has_2n_minus_2_steps_per_loop() {
        let plan = CollectivePlan::host_default(
            Collective::AllReduce,
            Algorithm::Ring,
            Protocol::Simple,
            5,
            1,
        );
        let sends = |count| {
            let s = schedule(&plan, 2, count, 2).unwrap();
            let sends = s
                .iter()
                .filter(|s| matches!(s, Step::Prim(p) if p.send_to.is_some()))
                .count();
            let recvs = s
                .iter()
                .filter(|s| matches!(s, Step::Prim(p) if p.recv_from.is_some()))
                .count();
            assert_eq!(sends, recvs);
            sends
        };
        assert_eq!(sends(10), 2 * (5 - 1));
        assert_eq!(sends(20), 2 * 2 * (5 - 1));
    }

    #[test]
    fn unsupported_algorithms_are_refused() {
        let plan = CollectivePlan::host_default(
            Collective::AllReduce,
            Algorithm::Nvls,
            Protocol::Simple,
            4,
            1,
        );
        assert!(schedule(&plan, 0, 10, 4).is_err());
    }
}
