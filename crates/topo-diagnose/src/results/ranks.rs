//! How many ranks an nccl-tests run had, from everything the result says: the rank lines,
//! the header's `nThread T nGpus G`, the launch command (`-np`, `-N`, `-g`), the gather
//! family's size per count, and busbw/algbw, which is the collective's bus factor (nccl-tests
//! src/*.cu `GetBw`, 2.19.6: 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter
//! and all-to-all), so it tells n. Rank lines cut short (`...` after Rank 4, or only the last
//! rank shown) are a lower bound, not the count. Sources that disagree are named.

use super::sense::half_ulp;
use topo_evidence::nccltests::Test;
use topo_vocab::Collective;

/// What the result says about its rank count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankReading {
    /// The count, from the most direct source that gives one exactly.
    pub count: Option<usize>,
    /// Where it came from (`the 16 rank lines`, `busbw/algbw = 1.9844`).
    pub basis: String,
    /// Sources that say otherwise, in words; empty when they agree.
    pub conflicts: Vec<String>,
    /// Every count a source states (exact ones, and the top of rank lines cut short, which a
    /// README often shows alone as the last rank): where the sources disagree, a machine of
    /// one of these counts is the user's answer to which is right.
    pub stated: Vec<usize>,
}

/// One source's say: exactly `n`, or at least `n`.
struct Say {
    n: usize,
    exact: bool,
    /// The top of rank lines cut short.
    cut: bool,
    what: String,
}

/// Reads the rank count of `t`, run as `coll` when known.
pub fn read(t: &Test, coll: Option<Collective>) -> RankReading {
    let says: Vec<Say> = [
        from_lines(t),
        from_launch(t),
        from_counts(t, coll),
        from_ratio(t, coll),
        from_header(t),
    ]
    .into_iter()
    .flatten()
    .collect();
    let Some(best) = says.iter().find(|s| s.exact) else {
        return RankReading::default();
    };
    let stated = says
        .iter()
        .filter(|s| s.exact || s.cut)
        .map(|s| s.n)
        .collect();
    let conflicts = says
        .iter()
        .filter(|s| if s.exact { s.n != best.n } else { s.n > best.n })
        .map(|s| s.what.clone())
        .collect();
    RankReading {
        count: Some(best.n),
        basis: best.what.clone(),
        conflicts,
        stated,
    }
}

/// Complete rank lines count exactly; cut ones (`...` after them, or gaps) bound from below.
fn from_lines(t: &Test) -> Option<Say> {
    let top = t.ranks.iter().map(|r| r.rank as usize + 1).max()?;
    let complete = top == t.ranks.len() && !t.ranks_excerpt;
    Some(if complete {
        Say {
            n: top,
            exact: true,
            cut: false,
            what: format!("the {top} rank lines say {top}"),
        }
    } else {
        Say {
            n: top,
            exact: false,
            cut: true,
            what: format!(
                "the rank lines are an excerpt ({} shown, up to rank {})",
                t.ranks.len(),
                top - 1
            ),
        }
    })
}

/// The command's processes times the GPUs each drives (the header's `nThread x nGpus` where
/// printed, else the command's `-t x -g`).
fn from_launch(t: &Test) -> Option<Say> {
    let l = t.launch.as_ref()?;
    let procs = l.procs.or_else(|| Some(l.nodes? * l.per_node?))?;
    let per = match &t.params {
        Some(p) => u64::from(p.nthreads.max(1)) * u64::from(p.ngpus.max(1)),
        None => l.gpus.unwrap_or(1).max(1) * l.threads.unwrap_or(1).max(1),
    };
    let n = usize::try_from(procs.checked_mul(per)?).ok()?;
    Some(Say {
        n,
        exact: n > 0,
        cut: false,
        what: format!("the launch command (line {}) says {n}", l.line),
    })
}

/// The header's `nThread x nGpus` is one process's ranks: a lower bound on the run's.
fn from_header(t: &Test) -> Option<Say> {
    let p = t.params.as_ref()?;
    let per = (p.nthreads.max(1) as usize).checked_mul(p.ngpus.max(1) as usize)?;
    Some(Say {
        n: per,
        exact: false,
        cut: false,
        what: format!("the header's nThread x nGpus says {per} per process"),
    })
}

/// The gather family prints the count per rank and the size of all ranks' data: size over
/// count and element size is the rank count.
fn from_counts(t: &Test, coll: Option<Collective>) -> Option<Say> {
    let per_rank = matches!(
        coll?,
        Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll
    );
    if !per_rank {
        return None;
    }
    let r = t
        .rows
        .iter()
        .find(|r| r.count > 0 && r.elem_bytes.is_some())?;
    let unit = r.count.checked_mul(r.elem_bytes?)?;
    (r.bytes % unit == 0).then(|| {
        let n = (r.bytes / unit) as usize;
        Say {
            n,
            exact: n > 0,
            cut: false,
            what: format!("size / (count x element size) says {n}"),
        }
    })
}

/// busbw / algbw of every row, intersected: the one rank count whose bus factor lies within
/// the printed rounding of all of them.
fn from_ratio(t: &Test, coll: Option<Collective>) -> Option<Say> {
    let coll = coll?;
    let (mut lo, mut hi) = (f64::NEG_INFINITY, f64::INFINITY);
    let mut used = 0;
    for g in t
        .rows
        .iter()
        .flat_map(|r| [&r.out_of_place, &r.in_place])
        .flatten()
    {
        let (a, b) = (g.algbw_gbps, g.busbw_gbps);
        if a < 1.0 || b < 1.0 {
            continue;
        }
        let (ua, ub) = (half_ulp(a, 6), half_ulp(b, 6));
        lo = lo.max((b - ub) / (a + ua));
        hi = hi.min((b + ub) / (a - ua));
        used += 1;
    }
    if used == 0 || lo > hi {
        return None;
    }
    // The bus factor is k(n-1)/n: n = k / (k - factor), increasing in the factor.
    let k = match coll {
        Collective::AllReduce => 2.0,
        Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => 1.0,
        _ => return None,
    };
    let n_of = |f: f64| if f >= k { f64::INFINITY } else { k / (k - f) };
    let (n_lo, n_hi) = (n_of(lo).ceil(), n_of(hi).floor());
    let unique = n_lo == n_hi && n_lo >= 1.0;
    unique.then(|| Say {
        n: n_lo as usize,
        exact: true,
        cut: false,
        what: format!(
            "busbw/algbw ({:.4}, the bus factor of {} on n ranks) says {}",
            (lo + hi) / 2.0,
            coll.cli_name(),
            n_lo
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_evidence::nccltests::parse;

    /// A README's run of 128 ranks that shows the first five rank lines, then `...`
    /// (CoreWeave's nccl-tests README, 2022).
    const CUT: &str = "\
# nThread 1 nGpus 1 minBytes 4 maxBytes 2147483648 step: 2(factor) warmup iters: 50 iters: 50 validation: 1
#
# Using devices
#   Rank  0 Pid     33 on nccl-test-128-worker-0 device  0 [0x27] NVIDIA A100-SXM4-80GB
#   Rank  1 Pid     34 on nccl-test-128-worker-0 device  1 [0x2a] NVIDIA A100-SXM4-80GB
#   Rank  2 Pid     35 on nccl-test-128-worker-0 device  2 [0x51] NVIDIA A100-SXM4-80GB
#   Rank  3 Pid     36 on nccl-test-128-worker-0 device  3 [0x57] NVIDIA A100-SXM4-80GB
#   Rank  4 Pid     37 on nccl-test-128-worker-0 device  4 [0x9e] NVIDIA A100-SXM4-80GB
...
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
   536870912     134217728     float     sum    25775   20.83   41.33  2e-06    25779   20.83   41.33  2e-06
  1073741824     268435456     float     sum    46911   22.89   45.42  2e-06    46889   22.90   45.44  2e-06
  2147483648     536870912     float     sum    95238   22.55   44.74  2e-06    95289   22.54   44.72  2e-06
";

    #[test]
    fn an_excerpted_rank_list_is_a_bound_not_the_count() {
        let r = parse(CUT).unwrap();
        let t = &r.tests[0];
        assert!(t.ranks_excerpt);
        // Five rank lines and `...`: not 5 ranks. At 128 ranks busbw's four figures cannot
        // tell 127 from 129, so nothing in the result counts them, and the machine's count
        // is taken (`--profile dgx-a100 --nodes 16` is accepted, tests/it/nccl_tests_corpus.rs).
        let got = read(t, Some(Collective::AllReduce));
        assert_eq!(got.count, None, "{got:?}");
        assert!(got.conflicts.is_empty(), "{got:?}");
    }

    #[test]
    fn the_bus_factor_counts_where_the_figures_tell_n_apart() {
        // nccl-tests#252, 2 nodes x 4 H100, no rank lines: busbw/algbw 1.75 is 2(n-1)/n on 8.
        let text = "\
   536870912     134217728     float     sum      -1    10052   53.41   93.46      0   9676.9   55.48   97.09      0
  1073741824     268435456     float     sum      -1    20079   53.48   93.58      0    19265   55.74   97.54      0
";
        let got = read(&parse(text).unwrap().tests[0], Some(Collective::AllReduce));
        assert_eq!(got.count, Some(8), "{got:?}");
        assert!(got.basis.contains("busbw/algbw"), "{got:?}");
    }

    #[test]
    fn the_command_line_counts_and_a_disagreement_is_named() {
        let text = "\
$ mpirun --hostfile hosts.txt -x NCCL_ALGO=Tree -np 2 ./all_reduce_perf -b 2M -e 16G -f 2 -n 10 -g 1
     2097152        524288     float     sum      -1    113.2   18.53   18.53      0    93.35   22.46   22.46      0
";
        let r = parse(text).unwrap();
        let got = read(&r.tests[0], Some(Collective::AllReduce));
        assert_eq!(got.count, Some(2), "{got:?}");
        assert!(got.basis.contains("launch command (line 1)"), "{got:?}");
        // The same rows under a command that claims 16 ranks: busbw = algbw is 2 ranks.
        let wrong = text.replace("-np 2", "-np 16");
        let got = read(
            &parse(&wrong).unwrap().tests[0],
            Some(Collective::AllReduce),
        );
        assert_eq!(got.count, Some(16));
        assert_eq!(got.conflicts.len(), 1, "{got:?}");
        assert!(got.conflicts[0].contains("says 2"), "{got:?}");
    }

    #[test]
    fn the_gather_family_counts_from_size_and_count() {
        let text = "\
    134217728        524288     float    none      -1   3150.1   42.61   41.94      0   3142.4   42.71   42.04      0
";
        let r = parse(text).unwrap();
        let got = read(&r.tests[0], Some(Collective::AllGather));
        assert_eq!(got.count, Some(64), "{got:?}");
    }
}
