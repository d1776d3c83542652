//! Kernel throughput: `out = a op b` over cache-resident (32 KiB) and DRAM (64 MiB) buffers,
//! GB/s of bytes read and written (3 x size per call).
use std::time::Instant;

use topo_runtime::kernels;
use topo_runtime::{DataType, Reduction};

fn main() {
    for size in [32 << 10, 64 << 20] {
        let a = vec![0u64; size / 8];
        let b = vec![0u64; size / 8];
        let mut o = vec![0u64; size / 8];
        let (a8, b8) = (
            bytemuck::cast_slice::<u64, u8>(&a),
            bytemuck::cast_slice::<u64, u8>(&b),
        );
        for dt in DataType::ALL {
            for op in [Reduction::Sum, Reduction::Max] {
                let reps = (1usize << 31) / size;
                let o8 = bytemuck::cast_slice_mut::<u64, u8>(&mut o);
                kernels::reduce(dt, op, o8, a8, b8);
                let t = Instant::now();
                for _ in 0..reps {
                    kernels::reduce(dt, op, std::hint::black_box(&mut *o8), a8, b8);
                }
                let gbs = (3 * size * reps) as f64 / t.elapsed().as_secs_f64() / 1e9;
                println!(
                    "{:>9} {:>8} {:>4}  {:7.1} GB/s",
                    size,
                    dt.name(),
                    op.name(),
                    gbs
                );
            }
        }
    }
}
