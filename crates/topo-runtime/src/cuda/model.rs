//! A model of topo's primitive kernel (issue 47 item 2): what one channel moves per second
//! from the per-piece handshake and the piece size, what the GPU's memory allows the ranks
//! that share it (the copy ceiling), and from the two the piece size and channel count the
//! CUDA backend uses. Pure: the figures come from [`COSTS`] and [`GPUS`], each with where it
//! came from, so a new measurement changes a table row, not the code.
//!
//! A channel is `GROUPS` warp groups, each with one piece in flight (kernels/collective.cu,
//! "Pipelining"). One piece of `P` bytes on one group takes the handshake `h` (wait for the
//! flag, fence, post) plus `P / b`, `b` the group's copy rate: its threads' loads in flight
//! over the load latency (Little's law). So a channel moves `GROUPS * P / (h + P / b)`
//! bytes per second, and a ring's busbw is the sum over a rank's channels (each piece of a
//! rank crosses one connection once).
use crate::types::Collective;

use super::kernels::{GROUPS, THREADS};

/// The kernel's costs, and where each figure comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelCosts {
    /// Wait, fence and post per piece (µs).
    pub handshake_us: f64,
    /// Latency of a 16-byte global load under load (µs).
    pub load_latency_us: f64,
    /// Bytes one thread keeps in flight in Simple (16-byte vectors x the unroll of 4-byte
    /// types in `simple_loop`).
    pub thread_bytes_in_flight: f64,
    pub basis: &'static str,
}

/// The costs the choices use. The handshake is the first GPU run's (one H200, 2026-12-04,
/// bench/cuda/results/2026-12-04-h200/diag): one CTA of 512 threads per channel moved 5.7 GB/s
/// of busbw in 128 KiB pieces, 23 µs a piece; its copy at 512 x 64 B in flight over 1 µs is
/// 4 µs of that, so the handshake (512 threads fencing at system scope, a block barrier, the
/// flags) was ~19 µs. The pipelined kernel fences once per piece at GPU scope, so 19 µs is an
/// upper bound until bench/cuda/pipeline.sh measures it again (its per-channel figures refit
/// this row). The 1 µs load latency is an assumption of the same order as HBM's loaded latency.
pub const COSTS: KernelCosts = KernelCosts {
    handshake_us: 19.0,
    load_latency_us: 1.0,
    thread_bytes_in_flight: 64.0,
    basis: "H200 2026-12-04: 23 us per 128 KiB piece on one 512-thread CTA, less 4 us of copy",
};

/// A GPU's device-to-device copy rate (cuMemcpyDtoD, bytes copied per second: HBM moves
/// twice that), measured, and where.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuCopy {
    /// Matched against the driver's device name.
    pub name: &'static str,
    pub copy_gbps: f64,
    pub sms: u32,
    pub basis: &'static str,
}

/// Measured copy rates. A GPU not listed is scaled from the first row by its SM count.
pub const GPUS: &[GpuCopy] = &[GpuCopy {
    name: "H200",
    copy_gbps: 2076.0,
    sms: 132,
    basis: "bench/cuda/results/2026-12-04-h200/recheck: cuMemcpyDtoD 2076 GB/s at 256 MiB",
}];

/// The share of the copy ceiling the choices aim at (issue 47's goal for Simple).
pub const TARGET: f64 = 0.80;

/// Simple's piece sizes to choose from: a slot holds one piece, and a rank holds 8 slots per
/// (peer, channel), so 512 KiB (NCCL's Simple step: its 4 MiB buffer over NCCL_STEPS 8,
/// src/include/device.h 2.19-2.28) is the largest.
pub const PIECES: [u32; 3] = [128 << 10, 256 << 10, 512 << 10];

/// HBM bytes read and written per busbw byte, per rank, by the primitive: a ring AllReduce
/// step reads the received slot and the input and writes the output and the next slot on
/// half its steps, 1.5 + 1.5 on average (bench/cuda/README.md's arithmetic); the others copy
/// one received byte to the output and on, 1 + 1.
pub fn hbm_bytes_per_busbw_byte(c: Collective) -> f64 {
    match c {
        Collective::AllReduce => 3.0,
        _ => 2.0,
    }
}

/// One warp group's copy rate in Simple (GB/s).
pub fn group_copy_gbps(k: &KernelCosts) -> f64 {
    (THREADS / GROUPS) as f64 * k.thread_bytes_in_flight / (k.load_latency_us * 1e3)
}

/// What one channel moves per second with `piece` bytes per piece (GB/s).
pub fn channel_gbps(k: &KernelCosts, piece: u32) -> f64 {
    let copy_us = piece as f64 / (group_copy_gbps(k) * 1e3);
    GROUPS as f64 * piece as f64 / ((k.handshake_us + copy_us) * 1e3)
}

/// The share of a piece's time spent copying rather than in the handshake.
pub fn piece_efficiency(k: &KernelCosts, piece: u32) -> f64 {
    let copy_us = piece as f64 / (group_copy_gbps(k) * 1e3);
    copy_us / (k.handshake_us + copy_us)
}

/// Simple's piece: the smallest of [`PIECES`] that spends at least [`TARGET`] of its time
/// copying, else the largest.
pub fn simple_piece(k: &KernelCosts) -> u32 {
    PIECES
        .iter()
        .copied()
        .find(|&p| piece_efficiency(k, p) >= TARGET)
        .unwrap_or(PIECES[PIECES.len() - 1])
}

/// The device-to-device copy rate of a GPU named `name` with `sms` SMs (GB/s), and whether it
/// was measured (else scaled by SMs from the first row of [`GPUS`]).
pub fn copy_gbps(name: &str, sms: u32) -> (f64, bool) {
    if let Some(g) = GPUS.iter().find(|g| name.contains(g.name)) {
        return (g.copy_gbps, true);
    }
    let g = &GPUS[0];
    (g.copy_gbps * sms as f64 / g.sms as f64, false)
}

/// The busbw at which `ranks_on_gpu` ranks of `c` on one GPU move as many HBM bytes as a copy
/// at `copy_gbps` does (2 bytes per byte copied): the copy ceiling in busbw.
pub fn ceiling_busbw(copy_gbps: f64, c: Collective, ranks_on_gpu: usize) -> f64 {
    2.0 * copy_gbps / (hbm_bytes_per_busbw_byte(c) * ranks_on_gpu.max(1) as f64)
}

/// The most channels a rank may have: every CTA of the ranks on a GPU resident at once, at
/// the 2 CTAs per SM the primitive is built for (`kernels::MIN_CTAS`), and at most 64
/// (`--nchannels`' bound).
pub fn max_channels(sms: u32, ranks_on_gpu: usize) -> usize {
    let resident = sms as usize * super::kernels::MIN_CTAS as usize;
    (resident / ranks_on_gpu.max(1)).clamp(1, 64)
}

/// Channels per rank for `ranks_on_gpu` ranks on a GPU of `sms` SMs named `name`: the fewest
/// whose modelled busbw reaches [`TARGET`] of the AllReduce copy ceiling, within
/// [`max_channels`].
pub fn channels(k: &KernelCosts, name: &str, sms: u32, ranks_on_gpu: usize) -> usize {
    let (copy, _) = copy_gbps(name, sms);
    let want = TARGET * ceiling_busbw(copy, Collective::AllReduce, ranks_on_gpu);
    let per = channel_gbps(k, simple_piece(k));
    ((want / per).ceil() as usize).clamp(1, max_channels(sms, ranks_on_gpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_run_is_what_the_costs_say() {
        // One group of 512 threads (the old kernel) at 128 KiB: ~5.7 GB/s per channel.
        let old = KernelCosts { ..COSTS };
        let copy_us = 131072.0 / (512.0 * old.thread_bytes_in_flight / 1e3) / 1e3;
        let per_us = old.handshake_us + copy_us;
        let gbps = 131072.0 / (per_us * 1e3);
        assert!((gbps - 5.7).abs() < 0.2, "{gbps}");
        // The ratio the README states: 2 ranks at 179 GB/s against 2076 GB/s copies.
        let r = 179.0 / ceiling_busbw(2076.0, Collective::AllReduce, 2);
        assert!((r - 0.26).abs() < 0.005, "{r}");
    }

    #[test]
    fn pieces_grow_until_the_handshake_is_paid_for() {
        // 19 us of handshake against 8.2 GB/s per group: 512 KiB copies 77% of the time,
        // the largest there is.
        assert_eq!(simple_piece(&COSTS), 512 << 10);
        // A 2 us handshake is paid for by 128 KiB.
        let fast = KernelCosts {
            handshake_us: 2.0,
            ..COSTS
        };
        assert_eq!(simple_piece(&fast), 128 << 10);
        assert!(piece_efficiency(&fast, 128 << 10) >= TARGET);
        // More bytes per piece never lowers a channel's rate.
        let mut last = 0.0;
        for p in PIECES {
            let g = channel_gbps(&COSTS, p);
            assert!(g > last);
            last = g;
        }
    }

    #[test]
    fn channels_reach_the_target_within_residency() {
        let per = channel_gbps(&COSTS, simple_piece(&COSTS));
        for k in [1, 2, 4, 8] {
            let n = channels(&COSTS, "NVIDIA H200", 132, k);
            let ceiling = ceiling_busbw(2076.0, Collective::AllReduce, k);
            assert!(
                n as f64 * per >= TARGET * ceiling || n == max_channels(132, k),
                "{k}"
            );
            assert!(
                n == 1 || (n - 1) as f64 * per < TARGET * ceiling,
                "{k}: not the fewest"
            );
            assert!(n * k <= 264, "{k}: {n} channels cannot all be resident");
        }
        // Two ranks on an H200 need about 22 channels of ~25 GB/s for 0.8 of 692 GB/s.
        assert_eq!(channels(&COSTS, "NVIDIA H200", 132, 2), 22);
        // A GPU not in the table is scaled by its SMs and said to be.
        let (c, measured) = copy_gbps("NVIDIA H100 80GB HBM3", 66);
        assert!(!measured && (c - 1038.0).abs() < 1.0, "{c}");
        assert!(copy_gbps("NVIDIA H200", 132).1);
        assert_eq!(max_channels(132, 8), 33);
        assert_eq!(max_channels(132, 1), 64);
    }

    #[test]
    fn every_collective_has_a_traffic_factor() {
        for c in Collective::ALL {
            let f = hbm_bytes_per_busbw_byte(c);
            assert!((2.0..=3.0).contains(&f), "{c:?}");
        }
    }
}
