//! Host kernels: reduce and copy over every [`DataType`], written as plain slice loops over
//! fixed-width types so that LLVM vectorises them (see docs/runtime.md for the measured rates).
//!
//! Byte slices must be aligned to the element size (the runtime's buffers and FIFO scratch
//! are 64-byte aligned and offsets are whole elements); misaligned input panics in bytemuck.
use half::{bf16, f16};

use crate::types::{DataType, Reduction};

/// Elements per block of the in-place f16/bf16 reduction.
const HALF_BLOCK: usize = 256;

trait Elem: Copy + bytemuck::Pod {
    fn op(op: Reduction, a: Self, b: Self) -> Self;
    fn div(self, n: usize) -> Self;
}

macro_rules! float_elem {
    ($t:ty) => {
        impl Elem for $t {
            #[inline(always)]
            fn op(op: Reduction, a: Self, b: Self) -> Self {
                match op {
                    Reduction::Sum | Reduction::Avg => a + b,
                    Reduction::Prod => a * b,
                    Reduction::Min => {
                        if b < a {
                            b
                        } else {
                            a
                        }
                    }
                    Reduction::Max => {
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
            fn op(op: Reduction, a: Self, b: Self) -> Self {
                match op {
                    Reduction::Sum | Reduction::Avg => a.wrapping_add(b),
                    Reduction::Prod => a.wrapping_mul(b),
                    Reduction::Min => a.min(b),
                    Reduction::Max => a.max(b),
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
fn zip3<T: Elem>(op: Reduction, out: &mut [T], a: &[T], b: &[T]) {
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
        Reduction::Sum | Reduction::Avg => run!(Reduction::Sum),
        Reduction::Prod => run!(Reduction::Prod),
        Reduction::Min => run!(Reduction::Min),
        Reduction::Max => run!(Reduction::Max),
    }
}

#[inline(always)]
fn acc2<T: Elem>(op: Reduction, acc: &mut [T], b: &[T]) {
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
        Reduction::Sum | Reduction::Avg => run!(Reduction::Sum),
        Reduction::Prod => run!(Reduction::Prod),
        Reduction::Min => run!(Reduction::Min),
        Reduction::Max => run!(Reduction::Max),
    }
}

#[inline(always)]
fn bf16_to_f32(x: u16) -> f32 {
    f32::from_bits((x as u32) << 16)
}

/// Round to nearest even; NaN stays NaN (quiet bit set).
#[inline(always)]
fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    let rounded = (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16;
    if x.is_nan() {
        ((b >> 16) as u16) | 0x40
    } else {
        rounded
    }
}

/// bf16 through f32 in one fused loop that LLVM vectorises (shifts, adds, selects); built
/// for AVX2 as well and picked at run time.
fn bf16_zip(op: Reduction, out: &mut [u16], a: &[u16], b: &[u16]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { bf16_zip_avx2(op, out, a, b) };
    }
    bf16_zip_generic(op, out, a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn bf16_zip_avx2(op: Reduction, out: &mut [u16], a: &[u16], b: &[u16]) {
    bf16_zip_generic(op, out, a, b)
}

#[inline(always)]
fn bf16_zip_generic(op: Reduction, out: &mut [u16], a: &[u16], b: &[u16]) {
    let n = out.len();
    let (a, b) = (&a[..n], &b[..n]);
    macro_rules! run {
        ($o:expr) => {
            for i in 0..n {
                out[i] = f32_to_bf16(f32::op($o, bf16_to_f32(a[i]), bf16_to_f32(b[i])));
            }
        };
    }
    match op {
        Reduction::Sum | Reduction::Avg => run!(Reduction::Sum),
        Reduction::Prod => run!(Reduction::Prod),
        Reduction::Min => run!(Reduction::Min),
        Reduction::Max => run!(Reduction::Max),
    }
}

/// f16 with the F16C conversions, 8 lanes at a time (runtime-detected; x86-64 only).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
fn f16_zip_f16c(op: Reduction, out: &mut [u16], a: &[u16], b: &[u16]) {
    use std::arch::x86_64::*;
    let n = out.len();
    let (a, b) = (&a[..n], &b[..n]);
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n, so each 16-byte unaligned load/store stays inside the slices.
        unsafe {
            let va = _mm256_cvtph_ps(_mm_loadu_si128(a.as_ptr().add(i) as *const __m128i));
            let vb = _mm256_cvtph_ps(_mm_loadu_si128(b.as_ptr().add(i) as *const __m128i));
            let v = match op {
                Reduction::Sum | Reduction::Avg => _mm256_add_ps(va, vb),
                Reduction::Prod => _mm256_mul_ps(va, vb),
                Reduction::Min => _mm256_min_ps(vb, va),
                Reduction::Max => _mm256_max_ps(vb, va),
            };
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
            _mm_storeu_si128(out.as_mut_ptr().add(i) as *mut __m128i, h);
        }
        i += 8;
    }
    f16_zip_scalar(op, &mut out[i..], &a[i..], &b[i..]);
}

fn f16_zip_scalar(op: Reduction, out: &mut [u16], a: &[u16], b: &[u16]) {
    for i in 0..out.len() {
        let (x, y) = (f16::from_bits(a[i]).to_f32(), f16::from_bits(b[i]).to_f32());
        out[i] = f16::from_f32(f32::op(op, x, y)).to_bits();
    }
}

fn f16_zip(op: Reduction, out: &mut [u16], a: &[u16], b: &[u16]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has AVX and F16C (checked just above).
        return unsafe { f16_zip_f16c(op, out, a, b) };
    }
    f16_zip_scalar(op, out, a, b)
}

/// `out = a op b` over bytes of type `dt` (`out`, `a`, `b` the same length).
pub fn reduce(dt: DataType, op: Reduction, out: &mut [u8], a: &[u8], b: &[u8]) {
    use bytemuck::{cast_slice as c, cast_slice_mut as m};
    match dt {
        DataType::F32 => zip3::<f32>(op, m(out), c(a), c(b)),
        DataType::F64 => zip3::<f64>(op, m(out), c(a), c(b)),
        DataType::I32 => zip3::<i32>(op, m(out), c(a), c(b)),
        DataType::I64 => zip3::<i64>(op, m(out), c(a), c(b)),
        DataType::U8 => zip3::<u8>(op, out, a, b),
        DataType::F16 => f16_zip(op, m(out), c(a), c(b)),
        DataType::Bf16 => bf16_zip(op, m(out), c(a), c(b)),
    }
}

#[inline(always)]
fn zip3x2<T: Elem>(op: Reduction, o0: &mut [T], o1: &mut [T], a: &[T], b: &[T]) {
    let n = o0.len();
    let (o1, a, b) = (&mut o1[..n], &a[..n], &b[..n]);
    macro_rules! run {
        ($o:expr) => {
            for i in 0..n {
                let v = T::op($o, a[i], b[i]);
                o0[i] = v;
                o1[i] = v;
            }
        };
    }
    match op {
        Reduction::Sum | Reduction::Avg => run!(Reduction::Sum),
        Reduction::Prod => run!(Reduction::Prod),
        Reduction::Min => run!(Reduction::Min),
        Reduction::Max => run!(Reduction::Max),
    }
}

/// `o0 = o1 = a op b` in one pass (the two-rank single-copy AllReduce). No post-op.
pub fn reduce_to2(dt: DataType, op: Reduction, o0: &mut [u8], o1: &mut [u8], a: &[u8], b: &[u8]) {
    use bytemuck::{cast_slice as c, cast_slice_mut as m};
    match dt {
        DataType::F32 => zip3x2::<f32>(op, m(o0), m(o1), c(a), c(b)),
        DataType::F64 => zip3x2::<f64>(op, m(o0), m(o1), c(a), c(b)),
        DataType::I32 => zip3x2::<i32>(op, m(o0), m(o1), c(a), c(b)),
        DataType::I64 => zip3x2::<i64>(op, m(o0), m(o1), c(a), c(b)),
        DataType::U8 => zip3x2::<u8>(op, o0, o1, a, b),
        DataType::F16 | DataType::Bf16 => {
            reduce(dt, op, o0, a, b);
            o1.copy_from_slice(o0);
        }
    }
}

/// `acc = acc op b`.
pub fn reduce_acc(dt: DataType, op: Reduction, acc: &mut [u8], b: &[u8]) {
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

/// Copy with non-temporal stores (x86-64: SSE2 `movntdq`, always present): for outputs that
/// will not be read again soon, so the stores do not first read the lines into the cache.
/// Call [`store_fence`] before publishing the data to another rank.
pub fn copy_nt(dst: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let n = dst.len();
        let src = &src[..n];
        let head = dst.as_ptr().align_offset(16).min(n);
        dst[..head].copy_from_slice(&src[..head]);
        let end = head + (n - head) / 16 * 16;
        let mut i = head;
        while i < end {
            // SAFETY: i + 16 <= end <= n for both slices; the destination is 16-byte aligned
            // (head aligned it), the source load is unaligned.
            unsafe {
                let v = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
                _mm_stream_si128(dst.as_mut_ptr().add(i) as *mut __m128i, v);
            }
            i += 16;
        }
        dst[end..].copy_from_slice(&src[end..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

/// Order earlier non-temporal stores before later stores (the barrier's Release store does
/// not order them on x86).
pub fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no memory-safety preconditions (SSE is baseline on x86-64).
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// The operator's post-op on a finished reduction: Avg divides by `nranks`, others do nothing.
pub fn finish(dt: DataType, op: Reduction, buf: &mut [u8], nranks: usize) {
    if op != Reduction::Avg {
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
            for op in Reduction::ALL {
                let (ba, bb) = (buf(dt, &a), buf(dt, &b));
                let mut out = vec![0u8; ba.len()];
                reduce(dt, op, &mut out, &ba, &bb);
                let mut acc = ba.clone();
                reduce_acc(dt, op, &mut acc, &bb);
                assert_eq!(acc, out, "{dt:?} {op:?}");
                let (mut x, mut y) = (vec![0u8; ba.len()], vec![0u8; ba.len()]);
                reduce_to2(dt, op, &mut x, &mut y, &ba, &bb);
                assert_eq!((&x, &y), (&out, &out), "{dt:?} {op:?}");
                for skip in [0, 1, 3] {
                    let mut z = vec![0u8; ba.len()];
                    copy_nt(&mut z[skip..], &out[skip..]);
                    store_fence();
                    assert_eq!(&z[skip..], &out[skip..]);
                }
                finish(dt, op, &mut out, 2);
                for i in 0..a.len() {
                    let want = match op {
                        Reduction::Sum => a[i] + b[i],
                        Reduction::Prod => a[i] * b[i],
                        Reduction::Min => a[i].min(b[i]),
                        Reduction::Max => a[i].max(b[i]),
                        Reduction::Avg
                            if matches!(dt, DataType::I32 | DataType::I64 | DataType::U8) =>
                        {
                            ((a[i] + b[i]) / 2.0).floor()
                        }
                        Reduction::Avg => (a[i] + b[i]) / 2.0,
                    };
                    assert_eq!(load(dt, &out, i), want, "{dt:?} {op:?} at {i}");
                }
            }
        }
    }
}
