//! Small helpers of the renderers: size strings as nccl-tests users read them, and work split
//! over the machine's cores with output that does not depend on how many there are.

/// Human size with binary units, as nccl-tests users read them (`1K`, `16M`, `1.5G`).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (m, u) in UNITS {
        if bytes >= m {
            let v = bytes as f64 / m as f64;
            return if bytes.is_multiple_of(m) {
                format!("{}{u}", bytes / m)
            } else {
                format!("{v:.1}{u}")
            };
        }
    }
    format!("{bytes}")
}

/// `f(i)` for every `i` in `0..n`, in order. From `min_parallel` items on, runs of
/// consecutive items go to the machine's cores (at most 8); the result does not depend on
/// how many there are.
pub fn map_parallel<R: Send>(
    n: usize,
    min_parallel: usize,
    f: impl Fn(usize) -> R + Sync,
) -> Vec<R> {
    let workers = cores();
    if n < min_parallel.max(2) || workers < 2 {
        return (0..n).map(f).collect();
    }
    let per = n.div_ceil(workers);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(per)
            .map(|start| s.spawn(move || (start..(start + per).min(n)).map(f).collect::<Vec<R>>()))
            .collect();
        let mut out = Vec::with_capacity(n);
        for h in handles {
            out.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        out
    })
}

/// `part(i, out)` for every `i` in `0..n`, appended in order. From `min_parallel` parts on,
/// runs of consecutive parts go to the machine's cores ([`map_parallel`]), each into a string
/// of its own: the text is the same whatever the number of cores.
pub fn concat_parallel(
    n: usize,
    min_parallel: usize,
    part: impl Fn(usize, &mut String) + Sync,
) -> String {
    if n < min_parallel.max(2) {
        let mut out = String::new();
        (0..n).for_each(|i| part(i, &mut out));
        return out;
    }
    let per = n.div_ceil(cores());
    map_parallel(n.div_ceil(per), 2, |run| {
        let mut out = String::new();
        (run * per..((run + 1) * per).min(n)).for_each(|i| part(i, &mut out));
        out
    })
    .concat()
}

/// Cores to spread work over: at most 8.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |c| c.get().min(8))
}

/// Frees `v` on a thread of its own, so the caller's next step (writing the document) runs
/// on one core while the other returns the memory: at 32,768 GPUs the analysis is some
/// 300 MB in millions of allocations. The process may exit first; the OS then takes it all.
pub fn drop_aside<T: Send + 'static>(v: T) {
    // Where no thread can be had, spawn drops the closure, and `v` with it, right here.
    let _ = std::thread::Builder::new()
        .name("topo-free".into())
        .spawn(move || drop(v));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_concatenation_keeps_the_order() {
        let part = |i: usize, out: &mut String| out.push_str(&format!("{i},"));
        let serial: String = (0..1000).map(|i| format!("{i},")).collect();
        assert_eq!(concat_parallel(1000, 1, part), serial);
        assert_eq!(concat_parallel(1000, 5000, part), serial);
        assert_eq!(concat_parallel(3, 1, part), "0,1,2,");
        assert_eq!(concat_parallel(0, 1, part), "");
        let serial: Vec<usize> = (0..1001).map(|i| i * i).collect();
        assert_eq!(map_parallel(1001, 1, |i| i * i), serial);
        assert_eq!(map_parallel(1001, 5000, |i| i * i), serial);
        assert!(map_parallel(0, 1, |i| i).is_empty());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_size(8), "8");
        assert_eq!(human_size(1024), "1K");
        assert_eq!(human_size(1536), "1.5K");
        assert_eq!(human_size(16 << 20), "16M");
    }
}
