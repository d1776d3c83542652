//! `topo verify`: the host runtime run through the real binary, checked element by element.

use crate::util::topo;
use serde_json::Value;

/// The calibration cache these tests share, filled once per run by a small `topo calibrate`
/// (up to 1 MiB, one repeat): verify's own first-use calibration measures to 64 MiB three
/// times in both launch modes, which a debug build on a loaded 2-core machine takes minutes
/// over, and every test would race to do it.
pub(crate) fn shared_cache() -> &'static std::path::Path {
    static CACHE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| {
        let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("xdg-cache");
        let out = topo()
            .env("XDG_CACHE_HOME", &cache)
            .args(["calibrate", "-e", "1M", "-n", "2", "-r", "1"])
            .output()
            .unwrap();
        assert!(out.status.success(), "calibrate: {out:?}");
        cache
    })
}

/// `topo verify` with the calibration cache shared by these tests, wide enough for
/// nccl-tests' one line per size (the rows are read by column; the fitted blocks of a
/// narrower width are checked in `width.rs`).
fn verify(args: &[&str]) -> std::process::Output {
    let cache = shared_cache();
    topo()
        .env("XDG_CACHE_HOME", cache)
        .env("COLUMNS", "200")
        .arg("verify")
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = verify(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "verify {args:?}: {err}");
    String::from_utf8(out.stdout).unwrap()
}

/// Every data row's `#wrong` columns (out-of-place and in-place) are 0.
fn assert_all_right(text: &str) {
    let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(!rows.is_empty(), "{text}");
    for r in rows {
        let cols: Vec<&str> = r.split_whitespace().collect();
        assert_eq!(cols[8], "0", "out-of-place wrong: {r}");
        if cols[12] != "N/A" {
            assert_eq!(cols[12], "0", "in-place wrong: {r}");
        }
    }
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("# Avg bus bandwidth"),
        "{text}"
    );
}

#[test]
fn every_collective_on_eight_threads_is_right_at_odd_sizes() {
    let text = ok(&[
        "--collective",
        "all",
        "--ranks",
        "8",
        "--launch",
        "threads",
        "-b",
        "1",
        "-e",
        "300K",
        "-f",
        "7",
        "-n",
        "2",
        "-w",
        "1",
    ]);
    assert_all_right(&text);
    for c in [
        "allreduce",
        "allgather",
        "reducescatter",
        "broadcast",
        "reduce",
        "alltoall",
        "sendrecv",
    ] {
        assert!(text.contains(&format!("# collective: {c}")), "{c}: {text}");
    }
}

#[test]
fn processes_mode_is_right_and_leaves_nothing_in_dev_shm() {
    let before = std::fs::read_dir("/dev/shm")
        .map(|d| d.count())
        .unwrap_or(0);
    let text = ok(&[
        "--collective",
        "allreduce,allgather",
        "--ranks",
        "3",
        "--launch",
        "processes",
        "-b",
        "5",
        "-e",
        "1M",
        "-f",
        "13",
        "-n",
        "2",
        "-w",
        "1",
        "-d",
        "bfloat16",
        "-o",
        "max",
    ]);
    assert_all_right(&text);
    assert!(text.contains("bfloat16"), "{text}");
    let after = std::fs::read_dir("/dev/shm")
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(after <= before, "segments left in /dev/shm");
}

#[test]
fn forced_algorithms_and_protocols_are_right() {
    for (algo, proto) in [
        ("ring", "ll"),
        ("ring", "ll128"),
        ("tree", "simple"),
        ("tree", "ll"),
    ] {
        let text = ok(&[
            "--ranks", "4", "--algo", algo, "--proto", proto, "-b", "3", "-e", "100K", "-f", "11",
            "-n", "1", "-w", "0", "-d", "half",
        ]);
        assert_all_right(&text);
        assert!(text.contains(&algo.to_uppercase()), "{algo}: {text}");
    }
}

#[test]
fn json_is_the_contract_document() {
    let out = ok(&[
        "--format", "json", "-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "topo.verify/v1");
    crate::util::assert_valid(&v, "topo verify --format json");
    for k in [
        "backend",
        "launch",
        "ranks",
        "collective",
        "results",
        "avg_busbw_gbps",
    ] {
        assert!(!v[k].is_null(), "{k} missing: {v}");
    }
    let r = &v["results"][0];
    for k in [
        "bytes",
        "count",
        "type",
        "redop",
        "root",
        "algo",
        "proto",
        "time_us",
        "algbw_gbps",
        "busbw_gbps",
        "wrong",
        "predicted_time_us",
        "predicted_busbw_gbps",
    ] {
        assert!(r.get(k).is_some(), "results[].{k} missing: {r}");
    }
    assert!(r["predicted_time_us"].is_number(), "no prediction: {r}");
}

#[test]
fn two_ranks_say_their_placement_and_which_fit_priced_them() {
    let args = [
        "--ranks", "2", "-b", "1K", "-e", "64K", "-f", "8", "-n", "2", "-w", "1",
    ];
    let json: Vec<&str> = ["--format", "json"].into_iter().chain(args).collect();
    let v: Value = serde_json::from_str(&ok(&json)).unwrap();
    crate::util::assert_valid(&v, "topo verify --format json");
    for r in v["results"].as_array().unwrap() {
        let place = r["placement"].as_str().unwrap();
        assert!(["near", "far", "mixed", "loaded"].contains(&place), "{r}");
        let c2c: Vec<f64> = r["c2c_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert!(c2c.len() == 2 && c2c.iter().all(|&x| x > 0.0), "{r}");
        // The shared calibration stops at 1 MiB, below any placement's own regime: every
        // row is priced by the pooled fit.
        assert_eq!(r["predicted_for"], "pooled", "{r}");
    }
    let text = ok(&args);
    assert_all_right(&text);
    for r in text.lines().filter(|l| !l.starts_with('#')) {
        let place = r.split_whitespace().last().unwrap();
        let bare = place.trim_end_matches('*');
        assert!(["near", "far", "mixed", "loaded"].contains(&bare), "{r}");
    }
    assert!(
        text.contains("# place: the ranks' cache-to-cache latency"),
        "{text}"
    );
    // Eight ranks: no single latency to probe.
    let v: Value = serde_json::from_str(&ok(&[
        "--format", "json", "--ranks", "8", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0",
    ]))
    .unwrap();
    assert!(v["results"][0].get("placement").is_none(), "{v}");
}

#[test]
fn another_machines_schedule_runs_here_and_says_whose_timings_these_are() {
    let text = ok(&[
        "--profile",
        "dgx-h100",
        "-b",
        "1K",
        "-e",
        "256K",
        "-f",
        "16",
        "-n",
        "1",
        "-w",
        "0",
    ]);
    assert_all_right(&text);
    assert!(
        text.contains("8 ranks") || text.contains(", 8 ranks"),
        "{text}"
    );
    assert!(text.contains("dgx-h100"), "{text}");
    let out = verify(&["--profile", "dgx-h100", "--ranks", "4"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: --ranks 4: the plan of this machine has 8 ranks"),
        "{err}"
    );
}

#[test]
fn cuda_backend_without_a_driver_exits_3() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return;
    }
    let out = verify(&["--backend", "cuda"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: cuda backend unavailable: "),
        "{err}"
    );
    assert!(err.contains("\nhint: "), "{err}");
}

#[test]
fn cuda_options_without_a_driver_name_what_is_missing() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return;
    }
    // The CUDA backend's own options ask for it: exit 3 naming the library, not a host run.
    for args in [
        vec!["--ranks-per-gpu", "2"],
        vec!["--compare", "nccl"],
        vec!["--backend", "cuda", "--copy-ceiling"],
        vec!["--backend", "cuda", "--launch", "processes"],
        vec!["--backend", "cuda", "--launch", "env"],
    ] {
        let out = verify(&args);
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("error: cuda backend unavailable: libcuda.so.1 not found\nhint: "),
            "{args:?}: {err}"
        );
    }
    // With the host backend they are a usage error.
    let out = verify(&["--backend", "host", "--ranks-per-gpu", "2"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bad_options_are_one_error_and_exit_2() {
    for (args, want) in [
        (vec!["-d", "float8"], "error: -d float8: unknown"),
        (vec!["-o", "xor"], "error: -o xor: unknown"),
        (
            vec!["--collective", "gather"],
            "error: unknown collective 'gather'",
        ),
        (vec!["-b", "1Q"], "error: -b: "),
        (
            vec!["--algo", "nvls"],
            "error: --algo nvls: the host backend runs ring, tree or direct\nhint: ",
        ),
    ] {
        let out = verify(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with(want), "{args:?}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{err}"
        );
    }
}

#[test]
fn calibrate_reports_every_link() {
    let cache = tempfile::tempdir().unwrap();
    let out = topo()
        .env("XDG_CACHE_HOME", cache.path())
        .args([
            "calibrate",
            "-e",
            "1M",
            "-n",
            "2",
            "-r",
            "1",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "topo.calibrate/v3");
    crate::util::assert_valid(&v, "topo calibrate --format json");
    let links: Vec<String> = v["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            format!(
                "{} {}",
                l["link"].as_str().unwrap(),
                l["mode"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        links,
        [
            "copy any",
            "shm-direct threads",
            "shm-direct-reduce threads",
            "shm-fifo threads",
            "shm-direct processes",
            "shm-direct-reduce processes",
            "shm-fifo processes",
            "tcp-loopback any"
        ]
    );
    for l in v["links"].as_array().unwrap() {
        let (c, m) = (
            l["beta_gbps"].as_f64().unwrap(),
            l["beta_mem_gbps"].as_f64().unwrap(),
        );
        assert!(c > 0.0 && m > 0.0 && m <= c * 1.000001, "{l}");
        assert!(l["knee_bytes"].as_f64().unwrap() > 0.0, "{l}");
        // The DIRECT links also measured the other schedule: the dynamic shares at 256 and
        // 512 KiB, the static split at 1 MiB (the sweep stops there).
        let cross: Vec<u64> = l["cross_points"]
            .as_array()
            .map(|a| a.iter().map(|p| p[0].as_u64().unwrap()).collect())
            .unwrap_or_default();
        let direct = l["link"].as_str().unwrap().starts_with("shm-direct");
        let want: &[u64] = if direct {
            &[256 << 10, 512 << 10, 1 << 20]
        } else {
            &[]
        };
        assert_eq!(cross, want, "{l}");
    }
    assert!(
        std::fs::read_dir(cache.path().join("topo"))
            .unwrap()
            .count()
            == 1
    );
}

#[test]
fn another_machines_nvls_says_once_what_runs_instead_and_why_no_prediction() {
    let out = verify(&[
        "--profile",
        "dgx-h100",
        "-b",
        "4M",
        "-e",
        "8M",
        "-n",
        "1",
        "-w",
        "0",
    ]);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("here as Ring")).collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(notes[0].contains("NVLS"), "{err}");
    assert!(
        err.contains("no predicted time: the plan predicts"),
        "{err}"
    );
}
