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

/// One `error:` line, exit 2, no panic or abort: what a bad flag must give.
fn assert_refused(args: &[&str], want: &str) {
    let cache = tempfile::tempdir().unwrap();
    let out = topo()
        .env("XDG_CACHE_HOME", cache.path())
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{args:?}: {err}"
    );
    // Long lines are wrapped to the width: compare with the words joined again.
    let flat = err.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(want), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}");
}

#[test]
fn numeric_flags_out_of_range_are_one_error_and_exit_2() {
    let host = ["verify", "--backend", "host"];
    for (flag, value, want) in [
        ("--timeout", "nan", "above 0 and at most 86400"),
        ("--timeout", "inf", "above 0 and at most 86400"),
        ("--timeout", "1e30", "above 0 and at most 86400"),
        ("--timeout", "-1", "above 0 and at most 86400"),
        ("--timeout", "0", "above 0 and at most 86400"),
        ("--ranks", "0", "outside 1 to 4096"),
        ("--ranks", "18446744073709551615", "outside 1 to 4096"),
        ("--ranks", "99999999999999999999", "not a whole number"),
        ("--nchannels", "0", "outside 1 to 64"),
        ("--nchannels", "1000", "outside 1 to 64"),
        ("--ranks-per-gpu", "0", "outside 1 to 64"),
        ("--maxbytes", "1T", "pass -e 16G or less"),
        ("--maxbytes", "18446744073709551615", "pass -e 16G or less"),
        ("--maxbytes", "99999999999999999999", "too large"),
    ] {
        // `--timeout=-1`: as two words clap takes -1 for a flag (also exit 2).
        let joined = format!("{flag}={value}");
        let mut args = host.to_vec();
        args.push(&joined);
        assert_refused(&args, want);
    }
    for value in ["1T", "18446744073709551615", "17G"] {
        assert_refused(&["calibrate", "-e", value], "pass -e 16G or less");
    }
}

#[test]
fn an_arena_this_host_cannot_hold_is_refused_before_anything_runs() {
    // 4096 ranks x 64 channels: FIFOs for every pair, about 270 TiB; 128 ranks of two
    // 16 GiB buffers: 4 TiB. Refused before calibrating or mapping anything.
    for args in [
        ["--ranks", "4096", "--nchannels", "64"],
        ["--ranks", "128", "-e", "16G"],
    ] {
        for launch in ["threads", "processes"] {
            let mut a = vec!["verify", "--backend", "host", "--launch", launch];
            a.extend(args);
            assert_refused(&a, "of shared memory, above the limit of");
        }
    }
}

#[test]
fn a_fifo_at_the_calibration_cache_path_is_left_alone() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("topo");
    std::fs::create_dir(&dir).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let fifo = dir.join(format!("calibration-{}.json", host.trim()));
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let out = topo()
        .env("XDG_CACHE_HOME", cache.path())
        .args(["calibrate", "-e", "64K", "-n", "1", "-r", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let flat = err.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&format!(
            "not caching the calibration in {}",
            fifo.display()
        )) && flat.contains("a fifo"),
        "{err}"
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
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

/// README's `torchrun --nproc-per-node 4 topo verify --launch env` and `mpirun -np 4 topo
/// verify --launch env`, without `--ranks`, on a host whose CPU count (what `--ranks`
/// defaults to) is not the launcher's world size: every rank is a real process of the
/// binary with the launcher's variables, and the world size is the launcher's.
fn launcher_job(vars: impl Fn(usize, usize) -> Vec<(&'static str, String)>) {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
    let world = if cpus == 4 { 3 } else { 4 };
    let cache = shared_cache();
    let ranks: Vec<_> = (0..world)
        .map(|r| {
            let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("topo"));
            c.args([
                "verify", "--launch", "env", "-b", "1K", "-e", "64K", "-f", "8",
            ])
            .args(["-n", "1", "-w", "0", "--timeout", "20"])
            .env("XDG_CACHE_HOME", cache)
            .env("COLUMNS", "200")
            .env_remove("TOPO_JOB_TOKEN")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
            for (k, v) in vars(r, world) {
                c.env(k, v);
            }
            c.spawn().unwrap()
        })
        .collect();
    let outs: Vec<_> = ranks
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for (r, o) in outs.iter().enumerate() {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "rank {r} of {world}: {err}");
        if r > 0 {
            assert!(o.stdout.is_empty(), "rank {r} printed");
        }
    }
    let text = String::from_utf8_lossy(&outs[0].stdout);
    assert!(text.contains(&format!("{world} ranks")), "{text}");
    assert_all_right(&text);
}

fn test_port(salt: u32) -> String {
    (20000 + (std::process::id() * 7 + salt) % 20000).to_string()
}

#[test]
fn readme_torchrun_line_takes_the_launchers_world_size() {
    let port = test_port(1);
    let id = format!("it-{}-torchrun", std::process::id());
    launcher_job(|r, world| {
        vec![
            ("RANK", r.to_string()),
            ("LOCAL_RANK", r.to_string()),
            ("WORLD_SIZE", world.to_string()),
            ("LOCAL_WORLD_SIZE", world.to_string()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.clone()),
            ("TORCHELASTIC_RUN_ID", id.clone()),
        ]
    });
}

#[test]
fn readme_mpirun_line_takes_the_launchers_world_size() {
    let port = test_port(2);
    let ns = format!("it-{}-ompi", std::process::id());
    launcher_job(|r, world| {
        vec![
            ("OMPI_COMM_WORLD_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_LOCAL_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_SIZE", world.to_string()),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", world.to_string()),
            ("MASTER_PORT", port.clone()),
            ("PMIX_NAMESPACE", ns.clone()),
        ]
    });
}

/// The worker processes of `parent` (their /proc/PID/stat's parent field).
fn children_of(parent: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(st) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = st
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_stopped_worker_is_named_in_one_error_line_for_the_job() {
    let cache = shared_cache();
    let job = std::process::Command::new(assert_cmd::cargo::cargo_bin("topo"))
        .args(["verify", "--launch", "processes", "--ranks", "3"])
        .args([
            "-b",
            "64K",
            "-e",
            "64K",
            "-n",
            "100000000",
            "-w",
            "0",
            "--timeout",
            "2",
        ])
        .env("XDG_CACHE_HOME", cache)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let workers = loop {
        let w = children_of(job.id());
        if w.len() == 2 || t0.elapsed() > std::time::Duration::from_secs(20) {
            break w;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(workers.len(), 2, "the job's workers");
    // Let them join and start the sweep, then stop the last one.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let last = *workers.iter().max().unwrap();
    let stop = std::process::Command::new("kill")
        .args(["-STOP", &last.to_string()])
        .status()
        .unwrap();
    assert!(stop.success());
    let out = job.wait_with_output().unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &last.to_string()])
        .status();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("rank 2") && errors[0].contains("stopped"),
        "{err}"
    );
}

/// Finding 1 of issue 23 through the binary: another user (uid 65534) starts "rank 0" of a
/// job with the default torchrun token first, so it holds the rendezvous name; the real
/// rank 1 must stop at once with one error naming that uid, and send it nothing.
#[test]
fn an_env_rank_refuses_a_rendezvous_held_by_another_user() {
    use std::os::unix::process::CommandExt;
    let root = std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:\t0\t")));
    if !root {
        eprintln!("skipped: the cross-user case needs root to run a process as uid 65534");
        return;
    }
    let port = test_port(3);
    let env = |r: usize| {
        vec![
            ("RANK", r.to_string()),
            ("LOCAL_RANK", r.to_string()),
            ("WORLD_SIZE", "2".to_string()),
            ("LOCAL_WORLD_SIZE", "2".to_string()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.clone()),
        ]
    };
    let cache = shared_cache();
    let mut squatter = std::process::Command::new(assert_cmd::cargo::cargo_bin("topo"));
    squatter
        .args([
            "verify",
            "--launch",
            "env",
            "-b",
            "1K",
            "-e",
            "1K",
            "--timeout",
            "8",
        ])
        .env("XDG_CACHE_HOME", cache)
        .env_remove("TOPO_JOB_TOKEN")
        .env_remove("TORCHELASTIC_RUN_ID")
        .envs(env(0))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .uid(65534)
        .gid(65534);
    let mut squatter = squatter.spawn().unwrap();
    // Its name exists once it listens (abstract names are listed in /proc/net/unix).
    let name = format!("@topo-rt-torchrun-{port}");
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string("/proc/net/unix")
        .unwrap()
        .contains(&name)
    {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "the squatter never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("topo"))
        .args([
            "verify",
            "--launch",
            "env",
            "-b",
            "1K",
            "-e",
            "1K",
            "--timeout",
            "5",
        ])
        .env("XDG_CACHE_HOME", cache)
        .env_remove("TOPO_JOB_TOKEN")
        .env_remove("TORCHELASTIC_RUN_ID")
        .envs(env(1))
        .output()
        .unwrap();
    let _ = squatter.kill();
    let _ = squatter.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains("held by uid 65534"), "{err}");
}

#[test]
fn another_machines_nvls_says_once_what_runs_instead_and_why_no_prediction() {
    // 2M and 4M: the smallest sizes NCCL runs as NVLS on this machine (from 1.1M), two so
    // that the note is seen to come once, not per size.
    let out = verify(&[
        "--profile",
        "dgx-h100",
        "-b",
        "2M",
        "-e",
        "4M",
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
        err.contains("no predicted times: the plan is another machine's"),
        "{err}"
    );
}

/// A run that fails while running (here: rank 1 never joins) exits 4, apart from bad input (2).
#[test]
fn a_runtime_fault_exits_4() {
    let port = test_port(4);
    let out = crate::util::topo_clean_env()
        .args([
            "verify",
            "--launch",
            "env",
            "-b",
            "1K",
            "-e",
            "1K",
            "--timeout",
            "1",
        ])
        .env("XDG_CACHE_HOME", shared_cache())
        .envs([
            ("RANK", "0"),
            ("LOCAL_RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", port.as_str()),
            ("TOPO_JOB_TOKEN", "exit-4-test"),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("ranks [1] to join"), "{err}");
}

/// An arena within 3/4 of MemAvailable that this process may not map (here `ulimit -v`
/// 512 MiB against a 1 GiB arena) is a request this host cannot run: exit 2 with one error
/// naming the arena and a hint, as for an arena past the limit (it exited 4, a fault of
/// the run, with the OS error twice).
#[test]
fn an_arena_the_host_will_not_map_exits_2() {
    let bin = assert_cmd::cargo::cargo_bin("topo");
    // Without the limit the arena must pass the memory check (3/4 of MemAvailable), or
    // this test says nothing about mapping.
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let avail_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    if avail_kib < 2 << 20 {
        eprintln!(
            "skipped: this host has under 2 GiB MemAvailable, a 1 GiB arena is refused before mapping"
        );
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("sh")
        .args(["-c", "ulimit -v 524288 && exec \"$0\" \"$@\""])
        .arg(&bin)
        .args([
            "verify",
            "--backend",
            "host",
            "--launch",
            "threads",
            "--profile",
            "dgx-h100",
            "-b",
            "64M",
            "-e",
            "64M",
            "-n",
            "1",
            "-w",
            "0",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TOPO_PCI_IDS", "none")
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("cannot map the") && errors[0].contains("shared arena of 8 ranks"),
        "{err}"
    );
    assert!(errors[0].contains("ulimit -v"), "{err}");
    assert!(err.contains("hint: pass a smaller -e"), "{err}");
}

/// Under a launcher only rank 0 calibrates, after the run: a rank whose cache is empty
/// joins at once and leaves its cache empty, and rank 0's rows still carry predictions
/// (every rank calibrated before the rendezvous, 155 s for 2 ranks on an empty cache,
/// and here rank 0 gave up waiting for rank 1 after 20 s).
#[test]
fn under_a_launcher_only_rank_0_calibrates_after_the_run() {
    let port = test_port(5);
    let empty = tempfile::tempdir().unwrap();
    let spawn = |r: usize, cache: &std::path::Path| {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("topo"))
            .args([
                "verify", "--launch", "env", "-b", "1K", "-e", "4K", "-f", "4",
            ])
            .args(["-n", "1", "-w", "0", "--timeout", "20", "--format", "json"])
            .env("XDG_CACHE_HOME", cache)
            .envs([
                ("RANK", r.to_string()),
                ("LOCAL_RANK", r.to_string()),
                ("WORLD_SIZE", "2".into()),
                ("LOCAL_WORLD_SIZE", "2".into()),
                ("MASTER_ADDR", "127.0.0.1".into()),
                ("MASTER_PORT", port.clone()),
                (
                    "TOPO_JOB_TOKEN",
                    format!("calibrate-once-{}", std::process::id()),
                ),
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let lead = spawn(0, shared_cache());
    let mut member = spawn(1, empty.path());
    let out = lead.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(0) {
        let _ = member.kill();
        let _ = member.wait();
        panic!("rank 0: {err}");
    }
    let m = member.wait_with_output().unwrap();
    assert_eq!(
        m.status.code(),
        Some(0),
        "rank 1: {}",
        String::from_utf8_lossy(&m.stderr)
    );
    assert!(m.stdout.is_empty(), "rank 1 printed");
    assert!(
        !empty.path().join("topo").exists(),
        "rank 1 calibrated: {:?}",
        std::fs::read_dir(empty.path()).unwrap().count()
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = j["results"].as_array().unwrap();
    assert!(!rows.is_empty(), "{j}");
    for r in rows {
        assert!(
            r["predicted_time_us"].as_f64().is_some_and(|t| t > 0.0),
            "{r}"
        );
        assert!(r["ratio"].as_f64().is_some(), "{r}");
    }
}
