//! Host kernels: reduce and copy over every [`DataType`], written as plain slice loops over
//! fixed-width types so that LLVM vectorises them (see docs/runtime.md for the measured rates).
//!
//! Byte slices must be aligned to the element size (the runtime's buffers and FIFO scratch
//! are 64-byte aligned and offsets are whole elements); misaligned input panics in bytemuck.
use half::{bf16, f16};

use crate::types::{DataType, RedOp};

/// Elements per block when f16/bf16 go through f32.
const HALF_BLOCK: usize = 256;

trait Elem: Copy + bytemuck::Pod {
    fn op(op: RedOp, a: Self, b: Self) -> Self;
    fn div(self, n: usize) -> Self;
}

macro_rules! float_elem {
    ($t:ty) => {
        impl Elem for $t {
            #[inline(always)]
            fn op(op: RedOp, a: Self, b: Self) -> Self {
                match op {
                    RedOp::Sum | RedOp::Avg => a + b,
                    RedOp::Prod => a * b,
                    RedOp::Min => {
                        if b < a {
                            b
                        } else {
                            a
                        }
                    }
                    RedOp::Max => {
                        if b > a {
                            b
                        } else {
                            a
                        }
                    }
                }
            }
            #[inline(always)]
            fn div(self, n: usize) -> Self {
                self / n as $t
            }
        }
    };
}
macro_rules! int_elem {
    ($t:ty) => {
        impl Elem for $t {
            #[inline(always)]
            fn op(op: RedOp, a: Self, b: Self) -> Self {
                match op {
                    RedOp::Sum | RedOp::Avg => a.wrapping_add(b),
                    RedOp::Prod => a.wrapping_mul(b),
                    RedOp::Min => a.min(b),
                    RedOp::Max => a.max(b),
                }
            }
            #[inline(always)]
            fn div(self, n: usize) -> Self {
                self / n as $t
            }
        }
    };
}
float_elem!(f32);
float_elem!(f64);
int_elem!(i32);
int_elem!(i64);
int_elem!(u8);

/// `out[i] = a[i] op b[i]`, one monomorphic loop per operator so each vectorises.
#[inline(always)]
fn zip3<T: Elem>(op: RedOp, out: &mut [T], a: &[T], b: &[T]) {
    let n = out.len();
    let (a, b) = (&a[..n], &b[..n]);
    macro_rules! run {
        ($o:expr) => {
            for i in 0..n {
                out[i] = T::op($o, a[i], b[i]);
            }
        };
    }
    match op {
        RedOp::Sum | RedOp::Avg => run!(RedOp::Sum),
        RedOp::Prod => run!(RedOp::Prod),
        RedOp::Min => run!(RedOp::Min),
        RedOp::Max => run!(RedOp::Max),
    }
}

#[inline(always)]
fn acc2<T: Elem>(op: RedOp, acc: &mut [T], b: &[T]) {
    let n = acc.len();
    let b = &b[..n];
    macro_rules! run {
        ($o:expr) => {
            for i in 0..n {
                acc[i] = T::op($o, acc[i], b[i]);
            }
        };
    }
    match op {
        RedOp::Sum | RedOp::Avg => run!(RedOp::Sum),
        RedOp::Prod => run!(RedOp::Prod),
        RedOp::Min => run!(RedOp::Min),
        RedOp::Max => run!(RedOp::Max),
    }
}

fn half_zip<H: Copy + bytemuck::Pod>(
    op: RedOp,
    out: &mut [H],
    a: &[H],
    b: &[H],
    to: fn(&[H], &mut [f32]),
    from: fn(&[f32], &mut [H]),
) {
    let mut fa = [0f32; HALF_BLOCK];
    let mut fb = [0f32; HALF_BLOCK];
    for ((o, a), b) in out
        .chunks_mut(HALF_BLOCK)
        .zip(a.chunks(HALF_BLOCK))
        .zip(b.chunks(HALF_BLOCK))
    {
        let k = o.len();
        to(a, &mut fa[..k]);
        to(b, &mut fb[..k]);
        acc2(op, &mut fa[..k], &fb[..k]);
        from(&fa[..k], o);
    }
}

fn f16_to(s: &[f16], d: &mut [f32]) {
    use half::slice::HalfFloatSliceExt;
    s.convert_to_f32_slice(d);
}
fn f16_from(s: &[f32], d: &mut [f16]) {
    use half::slice::HalfFloatSliceExt;
    d.convert_from_f32_slice(s);
}
fn bf16_to(s: &[bf16], d: &mut [f32]) {
    use half::slice::HalfFloatSliceExt;
    s.convert_to_f32_slice(d);
}
fn bf16_from(s: &[f32], d: &mut [bf16]) {
    use half::slice::HalfFloatSliceExt;
    d.convert_from_f32_slice(s);
}

/// `out = a op b` over bytes of type `dt` (`out`, `a`, `b` the same length).
pub fn reduce(dt: DataType, op: RedOp, out: &mut [u8], a: &[u8], b: &[u8]) {
    use bytemuck::{cast_slice as c, cast_slice_mut as m};
    match dt {
        DataType::F32 => zip3::<f32>(op, m(out), c(a), c(b)),
        DataType::F64 => zip3::<f64>(op, m(out), c(a), c(b)),
        DataType::I32 => zip3::<i32>(op, m(out), c(a), c(b)),
        DataType::I64 => zip3::<i64>(op, m(out), c(a), c(b)),
        DataType::U8 => zip3::<u8>(op, out, a, b),
        DataType::F16 => half_zip::<f16>(op, m(out), c(a), c(b), f16_to, f16_from),
        DataType::Bf16 => half_zip::<bf16>(op, m(out), c(a), c(b), bf16_to, bf16_from),
    }
}

/// `acc = acc op b`.
pub fn reduce_acc(dt: DataType, op: RedOp, acc: &mut [u8], b: &[u8]) {
    use bytemuck::{cast_slice as c, cast_slice_mut as m};
    match dt {
        DataType::F32 => acc2::<f32>(op, m(acc), c(b)),
        DataType::F64 => acc2::<f64>(op, m(acc), c(b)),
        DataType::I32 => acc2::<i32>(op, m(acc), c(b)),
        DataType::I64 => acc2::<i64>(op, m(acc), c(b)),
        DataType::U8 => acc2::<u8>(op, acc, b),
        DataType::F16 | DataType::Bf16 => {
            // Through f32 in blocks; the copy of `acc` keeps the borrow checker simple.
            let mut tmp = [0u16; HALF_BLOCK];
            for (a, b) in acc.chunks_mut(2 * HALF_BLOCK).zip(b.chunks(2 * HALF_BLOCK)) {
                let t = &mut bytemuck::cast_slice_mut::<u16, u8>(&mut tmp)[..a.len()];
                t.copy_from_slice(a);
                reduce(dt, op, a, t, b);
            }
        }
    }
}

/// Copy (the standard library's memcpy, which is already vectorised).
pub fn copy(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

/// The operator's post-op on a finished reduction: Avg divides by `nranks`, others do nothing.
pub fn finish(dt: DataType, op: RedOp, buf: &mut [u8], nranks: usize) {
    if op != RedOp::Avg {
        return;
    }
    fn go<T: Elem>(b: &mut [T], n: usize) {
        for x in b {
            *x = x.div(n);
        }
    }
    use bytemuck::cast_slice_mut as m;
    match dt {
        DataType::F32 => go::<f32>(m(buf), nranks),
        DataType::F64 => go::<f64>(m(buf), nranks),
        DataType::I32 => go::<i32>(m(buf), nranks),
        DataType::I64 => go::<i64>(m(buf), nranks),
        DataType::U8 => go::<u8>(buf, nranks),
        DataType::F16 => {
            for x in bytemuck::cast_slice_mut::<u8, f16>(buf) {
                *x = f16::from_f32(x.to_f32() / nranks as f32);
            }
        }
        DataType::Bf16 => {
            for x in bytemuck::cast_slice_mut::<u8, bf16>(buf) {
                *x = bf16::from_f32(x.to_f32() / nranks as f32);
            }
        }
    }
}

/// Write element `i` of a buffer from an f64 value (test data; exact for small integers).
pub fn store(dt: DataType, buf: &mut [u8], i: usize, v: f64) {
    let s = dt.size();
    let b = &mut buf[i * s..(i + 1) * s];
    match dt {
        DataType::F32 => b.copy_from_slice(&(v as f32).to_ne_bytes()),
        DataType::F64 => b.copy_from_slice(&v.to_ne_bytes()),
        DataType::F16 => b.copy_from_slice(&f16::from_f64(v).to_ne_bytes()),
        DataType::Bf16 => b.copy_from_slice(&bf16::from_f64(v).to_ne_bytes()),
        DataType::I32 => b.copy_from_slice(&(v as i32).to_ne_bytes()),
        DataType::I64 => b.copy_from_slice(&(v as i64).to_ne_bytes()),
        DataType::U8 => b[0] = v as u8,
    }
}

/// Read element `i` as f64.
pub fn load(dt: DataType, buf: &[u8], i: usize) -> f64 {
    let s = dt.size();
    let b = &buf[i * s..(i + 1) * s];
    match dt {
        DataType::F32 => f32::from_ne_bytes(b.try_into().unwrap()) as f64,
        DataType::F64 => f64::from_ne_bytes(b.try_into().unwrap()),
        DataType::F16 => f16::from_ne_bytes(b.try_into().unwrap()).to_f64(),
        DataType::Bf16 => bf16::from_ne_bytes(b.try_into().unwrap()).to_f64(),
        DataType::I32 => i32::from_ne_bytes(b.try_into().unwrap()) as f64,
        DataType::I64 => i64::from_ne_bytes(b.try_into().unwrap()) as f64,
        DataType::U8 => b[0] as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(dt: DataType, vals: &[f64]) -> Vec<u8> {
        let mut b = vec![0u8; vals.len() * dt.size()];
        for (i, v) in vals.iter().enumerate() {
            store(dt, &mut b, i, *v);
        }
        b
    }

    #[test]
    fn every_type_and_op_reduces() {
        let a: Vec<f64> = (0..601).map(|i| (i % 7) as f64 + 1.0).collect();
        let b: Vec<f64> = (0..601).map(|i| (i % 5) as f64 + 1.0).collect();
        for dt in DataType::ALL {
            for op in RedOp::ALL {
                let (ba, bb) = (buf(dt, &a), buf(dt, &b));
                let mut out = vec![0u8; ba.len()];
                reduce(dt, op, &mut out, &ba, &bb);
                let mut acc = ba.clone();
                reduce_acc(dt, op, &mut acc, &bb);
                assert_eq!(acc, out, "{dt:?} {op:?}");
                finish(dt, op, &mut out, 2);
                for i in 0..a.len() {
                    let want = match op {
                        RedOp::Sum => a[i] + b[i],
                        RedOp::Prod => a[i] * b[i],
                        RedOp::Min => a[i].min(b[i]),
                        RedOp::Max => a[i].max(b[i]),
                        RedOp::Avg
                            if matches!(dt, DataType::I32 | DataType::I64 | DataType::U8) =>
                        {
                            ((a[i] + b[i]) / 2.0).floor()
                        }
                        RedOp::Avg => (a[i] + b[i]) / 2.0,
                    };
                    assert_eq!(load(dt, &out, i), want, "{dt:?} {op:?} at {i}");
                }
            }
        }
    }
}
