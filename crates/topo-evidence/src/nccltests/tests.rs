use super::*;

const H100_2X8: &str =
    include_str!("../../../../fixtures/fidelity/h100-2x8-ib-default-issue290.txt");
const H200_2X8: &str =
    include_str!("../../../../fixtures/fidelity/h200-2x8-baremetal-issue256.txt");
const A100_ROWS: &str = include_str!("../../../../fixtures/fidelity/a100-3x8-ib-4nic-issue119.txt");

/// nccl-tests 2.19 text: version line, program, bus ids with a domain.
const V219: &str = "\
# nccl-tests version 2.19.6 nccl-headers=22903 nccl-library=22907
# Collective test starting: all_gather_perf
# nThread 1 nGpus 8 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1234 on      box-1 device  0 [0000:18:00] NVIDIA H200
#  Rank  1 Group  0 Pid   1234 on      box-1 device  1 [0000:2a:00] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024           128     float    none      -1    20.51    0.05    0.04      0    20.12    0.05    0.04      0
        2048           256     float    none      -1    20.80    0.10    0.09      0    20.33    0.10    0.09      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.065
#
";

#[test]
fn a_2_19_run_gives_program_versions_ranks_and_both_groups() {
    let r = parse(V219).unwrap();
    assert_eq!(r.tests_version.as_deref(), Some("2.19.6"));
    assert_eq!(r.nccl_version.as_deref(), Some("2.29.7"));
    let t = &r.tests[0];
    assert_eq!(t.program.as_deref(), Some("all_gather_perf"));
    assert_eq!(t.params.as_ref().unwrap().ngpus, 8);
    assert_eq!(t.params.as_ref().unwrap().iters, Some(20));
    assert_eq!(t.ranks.len(), 2);
    assert_eq!(t.ranks[1].bus, "0000:2a:00");
    assert_eq!(t.ranks[1].gpu, "NVIDIA H200");
    assert_eq!(t.rows.len(), 2);
    let row = &t.rows[1];
    assert_eq!((row.bytes, row.count, row.root), (2048, 256, Some(-1)));
    assert_eq!(row.out_of_place.as_ref().unwrap().time_us, 20.80);
    assert_eq!(row.in_place.as_ref().unwrap().busbw_gbps, 0.09);
    assert_eq!(row.in_place.as_ref().unwrap().wrong, Some(0));
    assert_eq!(t.avg_busbw_gbps, Some(0.065));
    assert_eq!(t.out_of_bounds, Some(0));
}

#[test]
fn srun_prefixes_rank_lines_and_na_checks_are_read() {
    let r = parse(H100_2X8).unwrap();
    let t = &r.tests[0];
    assert_eq!(t.ranks.len(), 16);
    assert_eq!(t.ranks[8].host, "node007");
    assert_eq!(t.ranks[0].gpu, "NVIDIA H100 80GB HBM3");
    let first = &t.rows[0];
    assert_eq!(first.bytes, 8388608);
    assert_eq!(first.out_of_place.as_ref().unwrap().busbw_gbps, 73.04);
    assert_eq!(first.out_of_place.as_ref().unwrap().wrong, None);
    assert_eq!(first.in_place.as_ref().unwrap().busbw_gbps, 87.38);
}

#[test]
fn a_command_line_before_the_header_and_rows_without_a_header_are_read() {
    let r = parse(H200_2X8).unwrap();
    assert_eq!(r.tests.len(), 1);
    assert_eq!(r.tests[0].ranks.len(), 16);
    let rows = parse(A100_ROWS).unwrap().tests[0].rows.clone();
    assert_eq!(rows.len(), 6);
    assert_eq!(rows[0].root, Some(-1));
    assert_eq!(rows[0].out_of_place.as_ref().unwrap().busbw_gbps, 95.75);
}

#[test]
fn old_layouts_without_root_or_group_are_read() {
    let old = "\
# nThread 1 nGpus 8 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  27463 on dgx1 device  0 [0x06] Tesla V100-SXM2-16GB
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2   float     sum    33.45    0.00    0.00  1e-07    33.10    0.00    0.00  1e-07
          16             4   float     sum    33.60    0.00    0.00  1e-07    33.36    0.00    0.00  1e-07
";
    let r = parse(old).unwrap();
    let t = &r.tests[0];
    assert_eq!(t.ranks[0].gpu, "Tesla V100-SXM2-16GB");
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.rows[0].root, None);
    assert_eq!(t.rows[1].out_of_place.as_ref().unwrap().time_us, 33.60);
    assert_eq!(t.rows[1].in_place.as_ref().unwrap().time_us, 33.36);
    // `error` is the largest error (before nccl-tests 2.13), a magnitude, not a `#wrong` count.
    let s = t.rows[0].out_of_place.as_ref().unwrap();
    assert_eq!((s.wrong, s.max_error), (None, Some(1e-7)));
}

/// Without a header, a figure in (0, 1) where `#wrong` goes is the error column: `%g` prints
/// every count as a whole number.
#[test]
fn an_error_magnitude_is_not_read_as_a_count() {
    let row = "        1024           256     float     sum    56.74    0.02    0.03  5e-07    56.42    0.02    0.04  5e-07\n";
    let s = parse(row).unwrap().tests[0].rows[0]
        .out_of_place
        .clone()
        .unwrap();
    assert_eq!((s.wrong, s.max_error), (None, Some(5e-7)));
    let counted = "        1024           256     float     sum    56.74    0.02    0.03      3    56.42    0.02    0.04      0\n";
    let s = parse(counted).unwrap().tests[0].rows[0]
        .out_of_place
        .clone()
        .unwrap();
    assert_eq!((s.wrong, s.max_error), (Some(3), None));
}

#[test]
fn several_tests_in_one_file_are_kept_apart() {
    let two = format!(
        "{V219}{}",
        V219.replace("all_gather_perf", "reduce_scatter_perf")
    );
    let r = parse(&two).unwrap();
    assert_eq!(r.tests.len(), 2);
    assert_eq!(r.tests[1].program.as_deref(), Some("reduce_scatter_perf"));
    assert_eq!(r.tests[1].rows.len(), 2);
    assert_eq!(r.tests[1].ranks.len(), 2);
    // Without the `Collective test starting` lines the run header starts a test.
    let old = two
        .lines()
        .filter(|l| !l.contains("Collective test") && !l.contains("nccl-tests version"))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(parse(&old).unwrap().tests.len(), 2);
}

#[test]
fn pasted_prefixes_crlf_and_colours_give_the_same_results() {
    let clean = parse(V219).unwrap();
    let messy: String = V219
        .lines()
        .enumerate()
        .map(|(i, l)| match i % 3 {
            0 => format!("[1,0]<stdout>:{l}\r\n"),
            1 => format!("\x1b[32m{l}\x1b[0m\r\n"),
            _ => format!("0: {l}\n"),
        })
        .collect();
    let r = parse(&messy).unwrap();
    assert_eq!(r.tests[0].rows, clean.tests[0].rows);
    assert_eq!(r.tests[0].ranks, clean.tests[0].ranks);
}

#[test]
fn the_json_of_dash_j_is_read() {
    let json = r#"{"version":1,"start_time":"2026-01-01 00:00:00","args":["./build/all_reduce_perf","-b","8"],
      "env":["PATH=/bin","NCCL_ALGO=Ring","NCCL_DEBUG=INFO"],"nccl_version":22807,
      "config":{"nthreads":1,"ngpus":1,"minimum_bytes":8,"maximum_bytes":16,"step_factor":2,"warmup_iters":5,"iterations":20},
      "devices":[{"rank":0,"group":0,"pid":1,"hostname":"h1","device":0,"device_hex":"0000:18:00","device_info":"NVIDIA H100 80GB HBM3"}],
      "results":[{"size":8,"count":2,"type":"float","redop":"sum","root":"    -1",
        "out_of_place":{"time":10.5,"alg_bw":0.0,"bus_bw":0.0,"nwrong":0.0},
        "in_place":{"time":10.2,"alg_bw":0.0,"bus_bw":0.0,"nwrong":null},"actual_iterations":20,"experiment_name":"x"}],
      "out_of_bounds":{"count":0,"okay":true},"average_bus_bandwidth":{"bandwidth":0.0,"okay":"unchecked"}}"#;
    let r = parse(json).unwrap();
    assert_eq!(r.nccl_version.as_deref(), Some("2.28.7"));
    assert_eq!(
        r.env,
        vec![
            ("NCCL_ALGO".into(), "Ring".into()),
            ("NCCL_DEBUG".into(), "INFO".into())
        ]
    );
    let t = &r.tests[0];
    assert_eq!(
        collective_of_program(t.program.as_deref().unwrap()),
        Some("allreduce")
    );
    assert_eq!(t.ranks[0].gpu, "NVIDIA H100 80GB HBM3");
    assert_eq!(t.rows[0].root, Some(-1));
    assert_eq!(t.rows[0].out_of_place.as_ref().unwrap().wrong, Some(0));
    assert_eq!(t.rows[0].in_place.as_ref().unwrap().wrong, None);
    // nccl-tests writes a nan figure as the string "nan" and counts as doubles.
    let bad = parse(&json.replace(
        r#""bus_bw":0.0,"nwrong":0.0"#,
        r#""bus_bw":"nan","nwrong":0.0"#,
    ))
    .unwrap();
    assert!(bad.tests[0].refused[0].why.contains("busbw nan"), "{bad:?}");
    let wrong = parse(&json.replace(r#""nwrong":0.0"#, r#""nwrong":1073741824.000000"#)).unwrap();
    assert_eq!(
        wrong.tests[0].rows[0].out_of_place.as_ref().unwrap().wrong,
        Some(1_073_741_824)
    );
}

#[test]
fn what_is_not_a_result_is_refused_with_a_reason() {
    assert!(
        parse("hello\nworld\n")
            .unwrap_err()
            .contains("no nccl-tests result rows")
    );
    assert!(
        parse("{ not json")
            .unwrap_err()
            .contains("not nccl-tests JSON")
    );
    assert!(parse("").is_err());
}

#[test]
fn version_codes_of_both_eras() {
    assert_eq!(version_of_code(22703).as_deref(), Some("2.27.3"));
    assert_eq!(version_of_code(2708).as_deref(), Some("2.7.8"));
    assert_eq!(version_of_code(12), None);
}

#[test]
fn rows_are_bounded() {
    let row = "        1024           256     float     sum      -1    20.51    0.05    0.09      0    20.12    0.05    0.09      0\n";
    let r = parse(&row.repeat(MAX_ROWS + 10)).unwrap();
    assert_eq!(r.rows(), MAX_ROWS);
    assert!(r.missing[0].contains("not read"));
}

proptest::proptest! {
    #[test]
    fn any_text_is_read_without_panicking(s in "(?s).{0,400}") {
        let _ = parse(&s);
    }

    #[test]
    fn any_row_like_line_is_read_without_panicking(
        toks in proptest::collection::vec("(-?[0-9]{1,6}(\\.[0-9]{1,2})?|float|sum|N/A|#wrong|e-07)", 0..16)
    ) {
        let _ = parse(&toks.join(" "));
    }
}

/// nccl-tests writes `#wrong` with `%6g` and its figures with `getFloatStr` (src/util.cu,
/// 2.19.6): counts past a million and figures past the column read in exponent form.
#[test]
fn counts_and_figures_read_as_nccl_tests_prints_them() {
    assert_eq!(wrong_count("0"), Ok(Some(0)));
    assert_eq!(wrong_count("N/A"), Ok(None));
    assert_eq!(wrong_count("1.07374e+09"), Ok(Some(1_073_740_000)));
    assert_eq!(wrong_count("1e+06"), Ok(Some(1_000_000)));
    assert!(wrong_count("-1").is_err());
    assert!(wrong_count("nan").is_err());
    let text = V219.replace(
        "20.80    0.10    0.09      0    20.33",
        "1.2e+07    0.10    0.09  1.07374e+09    20.33",
    );
    let r = parse(&text).unwrap();
    let s = r.tests[0].rows[1].out_of_place.clone().unwrap();
    assert_eq!((s.time_us, s.wrong), (1.2e7, Some(1_073_740_000)));
}

/// A row of nan, inf, negatives, a zero time or an impossible size is refused with why,
/// never dropped without a word.
#[test]
fn impossible_figures_are_refused_aloud() {
    let row = "20.51    0.05    0.04      0";
    for (bad, why) in [
        ("nan    0.05    0.04      0", "time nan is not a finite"),
        ("20.51    inf    0.04      0", "algbw inf is not a finite"),
        (
            "20.51    0.05    -0.04      0",
            "busbw -0.04 is not a finite",
        ),
        ("0.00    0.05    0.04      0", "time 0.00 us is outside"),
        ("20.51    0.05    0.04     -1", "#wrong -1 is not a count"),
    ] {
        let r = parse(&V219.replace(row, bad)).unwrap();
        let t = &r.tests[0];
        assert_eq!(t.rows.len(), 1, "{bad}");
        assert_eq!(t.refused.len(), 1, "{bad}");
        assert_eq!(t.refused[0].line, 12);
        assert!(t.refused[0].why.contains(why), "{}", t.refused[0].why);
    }
    let huge = V219.replace("        1024           128", "18446744073709551615  128");
    let r = parse(&huge).unwrap();
    assert!(
        r.tests[0].refused[0]
            .why
            .contains("more than any GPU holds")
    );
    // Every row refused is still a result: the judge names them.
    let all_nan = V219
        .replace(row, "nan nan nan 0")
        .replace("20.80    0.10    0.09      0", "nan nan nan 0");
    assert_eq!(parse(&all_nan).unwrap().tests[0].refused.len(), 2);
}

/// 131,072 rank lines took 26 s when each was checked against the kept ones (issue 45):
/// four times the lines cost under six times the time.
#[test]
fn rank_lines_are_read_in_linear_time() {
    let text = |n: usize| {
        let mut s = String::from("# Collective test starting: all_reduce_perf\n");
        for r in 0..n {
            s.push_str(&format!(
                "#  Rank {r:6} Group  0 Pid {r:6} on node{:05} device {} [0000:18:00] NVIDIA H100\n",
                r / 8,
                r % 8
            ));
        }
        s.push_str("        1024           256     float     sum      -1    20.51    0.05    0.10      0    20.12    0.05    0.10      0\n");
        s
    };
    let best = |t: &str| {
        let t0 = std::time::Instant::now();
        let r = parse(t).unwrap();
        let took = t0.elapsed();
        assert!(r.tests[0].ranks.len() >= 8192);
        took
    };
    let (small, large) = (text(8192), text(32768));
    // Interleaved, best of five: the machine is shared, and load comes in bursts.
    let (mut a, mut b) = (std::time::Duration::MAX, std::time::Duration::MAX);
    for _ in 0..5 {
        a = a.min(best(&small));
        b = b.min(best(&large));
    }
    assert!(
        b < a * 6 + std::time::Duration::from_millis(20),
        "{a:?} -> {b:?}"
    );
}

/// CR-only line endings are lines.
#[test]
fn cr_only_line_endings_are_lines() {
    let r = parse(&V219.replace('\n', "\r")).unwrap();
    assert_eq!(r.tests[0].rows.len(), 2);
    assert_eq!(r.tests[0].ranks.len(), 2);
}

/// nccl#340's transcription dropped the redop column: the figures start right after the type,
/// not one column later.
#[test]
fn a_row_without_its_redop_column_is_read_from_the_figure_on() {
    let text = "\
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
           8             2   float     sum     7.18    0.00    0.00  0e+00     7.02    0.00    0.00  0e+00
       65536          8192   float    16.57    1.98    1.98  0e+00    13.83    2.37    2.37  0e+00
";
    let t = &parse(text).unwrap().tests[0];
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.rows[0].reduces, Some(true));
    let r = &t.rows[1];
    assert_eq!((r.redop.as_str(), r.reduces), ("", None));
    assert_eq!(r.out_of_place.as_ref().unwrap().time_us, 16.57);
    assert_eq!(r.out_of_place.as_ref().unwrap().busbw_gbps, 1.98);
    assert_eq!(r.in_place.as_ref().unwrap().time_us, 13.83);
    assert_eq!(r.elem_bytes, Some(4));
}

/// nccl#527: one 1 GiB row per instance count under a `p4dn` column is several runs, one per
/// row; a condensed row whose rest is not an nccl-tests row is refused.
#[test]
fn a_condensed_table_of_several_runs_is_read_as_one_run_per_row() {
    let text = "\
 p4dn        size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
   1   1073741824     268435456     float     sum   8142.6  131.87  230.77  2e-07   8141.2  131.89  230.81  2e-07
   2   1073741824     268435456     float     sum    35215   30.49   57.17  4e-07    35198   30.51   57.20  4e-07
";
    let r = parse(text).unwrap();
    assert_eq!(r.tests.len(), 2);
    let row = &r.tests[1].rows[0];
    assert_eq!((row.bytes, row.line), (1 << 30, 3));
    assert_eq!(row.out_of_place.as_ref().unwrap().busbw_gbps, 57.17);
    assert!(r.missing[0].contains("each row read as a run of its own"));
    let err = parse("   1   1073741824     268435456     float     sum   fast\n").unwrap_err();
    assert!(
        err.starts_with("line 1: a row with `1` before its size"),
        "{err}"
    );
    assert!(err.contains("condensed from several runs"), "{err}");
}

/// A README that shows five rank lines of 128 and `...`; the launch command before the
/// table belongs to it; SkyPilot's prefix hides neither.
#[test]
fn cut_rank_lists_launch_commands_and_ray_prefixes_are_kept() {
    let cut = "\
#   Rank  0 Pid     33 on w-0 device  0 [0x27] NVIDIA A100-SXM4-80GB
#   Rank  1 Pid     34 on w-0 device  1 [0x2a] NVIDIA A100-SXM4-80GB
...
           8             2     float     sum    57.89    0.00    0.00  5e-07    57.63    0.00    0.00  7e-07
";
    let t = &parse(cut).unwrap().tests[0];
    assert!(t.ranks_excerpt);
    assert_eq!(t.ranks.len(), 2);
    let launched = "\
$ mpirun -np 16 -x NCCL_ALGO=Ring, -x NCCL_IB_HCA=mlx5_0,mlx5_1 ./all_reduce_perf -b 8 -e 8G -g 1
(head, rank=0, pid=3808) [1,0]<stdout>:#  Rank  0 Group  0 Pid   7774 on head device  0 [0000:8f:00] NVIDIA H200
(head, rank=0, pid=3808) [1,0]<stdout>:           8             2     float     sum      -1    12.90    0.00    0.00      0    12.87    0.00    0.00      0
";
    let r = parse(launched).unwrap();
    let t = &r.tests[0];
    assert_eq!(t.ranks.len(), 1);
    assert!(!t.ranks_excerpt);
    let l = t.launch.as_ref().unwrap();
    assert_eq!((l.line, l.ranks()), (1, Some(16)));
    assert_eq!(l.program.as_deref(), Some("all_reduce_perf"));
    assert_eq!(
        r.env,
        [
            ("NCCL_ALGO".to_string(), "Ring".to_string()),
            ("NCCL_IB_HCA".to_string(), "mlx5_0,mlx5_1".to_string())
        ]
    );
}
