//! Every text view fits the width: `COLUMNS` (80, 100, 160) over every built-in profile, one
//! node and `--nodes 2` / `--nodes 16`, every `topo show` view but the nvidia-smi matrix
//! (which keeps nvidia-smi's layout; `--compact` is checked instead) and DOT (a format),
//! every section of `topo plan`, and `topo diagnose`; then every fixture source, NVL72 racks,
//! `verify`, `calibrate`, `snapshot`, `--help` and errors (`everything_else_fits`,
//! `errors_fit_a_terminal`). A line's length is counted in bytes,
//! as `awk 'length > 100'` counts it, so multi-byte characters cannot hide an overflow.

use crate::util::{fixture, topo};

const WIDTHS: [usize; 3] = [80, 100, 160];

fn profiles() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixture("profiles"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".yaml"))
                .map(str::to_string)
        })
        .collect();
    v.sort();
    assert!(v.len() >= 7, "{v:?}");
    v
}

/// The lines of `topo args` (with `COLUMNS=width`) longer than `width` bytes.
fn too_long(args: &[&str], width: usize) -> Vec<String> {
    let out = topo()
        .env("COLUMNS", width.to_string())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success() || out.status.code() == Some(1),
        "topo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.is_empty(), "topo {args:?} printed nothing");
    text.lines()
        .filter(|l| l.len() > width)
        .map(|l| format!("{:>4} {l}", l.len()))
        .collect()
}

fn check(args: &[&str], width: usize, failures: &mut Vec<String>) {
    let long = too_long(args, width);
    if !long.is_empty() {
        failures.push(format!(
            "COLUMNS={width} topo {}:\n{}",
            args.join(" "),
            long.join("\n")
        ));
    }
}

fn views_fit(profile: &str) {
    let mut failures = vec![];
    for nodes in ["1", "2", "16"] {
        for w in WIDTHS {
            for view in [
                &["--view", "summary"][..],
                &["--view", "pci"],
                &["--view", "paths"],
                &["--view", "matrix", "--compact"],
            ] {
                let mut args = vec!["show", "--profile", profile, "--nodes", nodes];
                args.extend(view);
                check(&args, w, &mut failures);
            }
            // Every plan section: all collectives, --explain's cells and INFO lines, and an
            // environment section.
            let args = [
                "plan",
                "--profile",
                profile,
                "--nodes",
                nodes,
                "--collective",
                "all",
                "--explain",
                "--env",
                "NCCL_P2P_LEVEL=SYS",
                // Eight sizes: the table's layout, not its length, is under test.
                "-e",
                "128M",
                "-f",
                "16",
            ];
            check(&args, w, &mut failures);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn profiles_a_to_d_fit() {
    for p in profiles().iter().filter(|p| p.as_str() < "dgx-h") {
        views_fit(p);
    }
}

#[test]
fn profiles_d_to_h_fit() {
    for p in profiles()
        .iter()
        .filter(|p| p.as_str() >= "dgx-h" && p.as_str() < "hgx")
    {
        views_fit(p);
    }
}

#[test]
fn profiles_h_to_z_fit() {
    for p in profiles().iter().filter(|p| p.as_str() >= "hgx") {
        views_fit(p);
    }
}

#[test]
fn diagnose_fits() {
    let mut failures = vec![];
    let logs: Vec<String> = std::fs::read_dir(fixture("fixtures/logs"))
        .unwrap()
        .flatten()
        .map(|e| e.path().display().to_string())
        .filter(|p| p.ends_with(".log"))
        .collect();
    assert!(!logs.is_empty());
    // The real threads' logs keep their long names (one word of up to 90 characters, which no
    // layout can wrap): each is read under a short one, as the test is of topo's layout.
    let tmp = tempfile::tempdir().unwrap();
    let logs: Vec<String> = logs
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let short = tmp.path().join(format!("log{i}.log"));
            std::fs::copy(l, &short).unwrap();
            short.display().to_string()
        })
        .collect();
    for w in WIDTHS {
        for l in &logs {
            check(&["diagnose", "--nccl-log", l], w, &mut failures);
        }
        check(
            &["diagnose", "--profile", "dgx-h100", "--expect", "hgx-h200"],
            w,
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The width check must be able to fail: the nvidia-smi matrix keeps nvidia-smi's layout.
#[test]
fn the_full_matrix_keeps_nvidia_smis_width() {
    assert!(!too_long(&["show", "--profile", "dgx-a100", "--view", "matrix"], 100).is_empty());
}

#[test]
fn columns_is_honoured() {
    let lines = |w: &str| {
        let out = topo()
            .env("COLUMNS", w)
            .args(["show", "--profile", "dgx-a100"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().lines().count()
    };
    // The GPU table's rows wrap at 80 and stay one line each at 200.
    assert!(
        lines("80") > lines("200"),
        "{} {}",
        lines("80"),
        lines("200")
    );
    let plan = |w: &str| {
        let out = topo()
            .env("COLUMNS", w)
            .args(["plan", "--profile", "dgx-a100", "--nodes", "2"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let count = |text: &str, start: &str| {
        text.lines()
            .filter(|l| l.trim_start().starts_with(start))
            .count()
    };
    // Wide enough for every channel on one Trees line and every algorithm in one block;
    // at 80, one algorithm per block.
    let wide = plan("400");
    assert_eq!(count(&wide, "Trees ["), 1, "{wide}");
    assert_eq!(count(&wide, "Algorithm"), 1, "{wide}");
    let narrow = plan("80");
    assert!(count(&narrow, "Trees [") > 2, "{narrow}");
    assert!(count(&narrow, "Algorithm") > 3, "{narrow}");
}

#[test]
fn compact_belongs_to_the_matrix() {
    let out = topo()
        .args(["show", "--profile", "dgx-a100", "--compact"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--compact applies to --view matrix"), "{err}");
}

/// The lines of `topo args` longer than `width` bytes on stdout and, for what is not an
/// `error:`/`hint:` line (one line each off a terminal, as the CLI contract says; see
/// [`errors_fit_a_terminal`]), on stderr; any exit status.
fn too_long_any(args: &[&str], width: usize, cache: &std::path::Path) -> Vec<String> {
    let out = topo()
        .env("COLUMNS", width.to_string())
        .env("XDG_CACHE_HOME", cache)
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !text.is_empty() || !err.is_empty(),
        "topo {args:?} printed nothing"
    );
    let stderr_notes = err
        .lines()
        .filter(|l| !l.starts_with("error: ") && !l.starts_with("hint: "));
    text.lines()
        .chain(stderr_notes)
        .filter(|l| l.len() > width)
        .map(|l| format!("{:>4} {l}", l.len()))
        .collect()
}

/// Everything the profile tests above do not run, at 100 and 80 columns: every fixture
/// source (topology XMLs, snapshots, a log with a system dump, nvidia-smi matrices) through
/// every `show` view, `plan` and `diagnose`; NVL72 racks (`--nodes 2` and 18; 36, two racks,
/// takes minutes in a debug build and is left to the audit in the report) and 64 DGX H100
/// nodes; `diagnose` of every log; `verify` on the host runtime with its flags; `calibrate`;
/// `snapshot`; `--help` of every command; refusals and usage errors (their stderr notes).
/// Refused inputs count too: what they print must fit.
#[test]
fn everything_else_fits() {
    let cache = crate::verify::shared_cache();
    let dir = tempfile::tempdir().unwrap();
    let fx = |d: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(fixture(d))
            .unwrap()
            .flatten()
            .map(|e| e.path().display().to_string())
            .filter(|p| !p.ends_with("README.md") && !p.ends_with(".py"))
            .collect();
        v.sort();
        v
    };
    let mut sources: Vec<String> = vec![];
    for d in [
        "fixtures/xml",
        "fixtures/snapshots",
        "fixtures/matrices",
        "fixtures/synthetic",
    ] {
        sources.extend(fx(d).into_iter().filter(|p| !p.ends_with(".json")));
    }
    sources.push(
        fixture("fixtures/logs/nccl-tests-256-h200-vm-pxb-system-graph.log")
            .display()
            .to_string(),
    );
    assert!(sources.len() >= 15, "{sources:?}");
    // Read under short names: the thread logs' own names are single words longer than 80.
    let logs: Vec<String> = fx("fixtures/logs")
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let ext = l.rsplit_once('.').map_or("", |x| x.1);
            let short = dir.path().join(format!("log{i}.{ext}"));
            std::fs::copy(l, &short).unwrap();
            short.display().to_string()
        })
        .collect();
    let snap = dir.path().join("snap.tar.gz").display().to_string();
    let mut runs: Vec<Vec<String>> = vec![];
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for s in &sources {
        for view in ["summary", "pci", "paths"] {
            runs.push(v(&["show", "--from", s, "--view", view]));
        }
        runs.push(v(&["show", "--from", s, "--view", "matrix", "--compact"]));
        runs.push(v(&[
            "plan",
            "--from",
            s,
            "--collective",
            "all",
            "--explain",
            "-e",
            "128M",
            "-f",
            "16",
        ]));
        runs.push(v(&["diagnose", "--from", s]));
    }
    for n in ["2", "18"] {
        runs.push(v(&["plan", "--profile", "gb200-nvl72", "--nodes", n]));
        runs.push(v(&["show", "--profile", "gb200-nvl72", "--nodes", n]));
        runs.push(v(&[
            "show",
            "--profile",
            "gb200-nvl72",
            "--nodes",
            n,
            "--view",
            "paths",
        ]));
    }
    runs.push(v(&[
        "plan",
        "--profile",
        "dgx-h100",
        "--nodes",
        "64",
        "-e",
        "128M",
        "-f",
        "16",
    ]));
    runs.push(v(&[
        "show",
        "--profile",
        "dgx-h100",
        "--nodes",
        "64",
        "--view",
        "paths",
    ]));
    runs.push(v(&[
        "plan",
        "--profile",
        "dgx-h100",
        "--env",
        "NCCL_P2P_LEVL=NVL",
        "--env",
        "NCCL_IB_QPS_PER_CONNECTION=2",
        "--env",
        "NCCL_MNNVL_RAIL_PER_HOST=1",
    ]));
    for l in &logs {
        runs.push(v(&["diagnose", "--nccl-log", l]));
        runs.push(v(&["diagnose", "--profile", "dgx-h100", "--nccl-log", l]));
    }
    let small = ["-b", "8", "-e", "64K", "-f", "64", "-n", "1", "-w", "1"];
    for extra in [
        &[
            "--collective",
            "allreduce",
            "--launch",
            "threads",
            "--ranks",
            "4",
        ][..],
        &["--collective", "all", "--ranks", "3"],
        &[
            "--collective",
            "allreduce",
            "--launch",
            "processes",
            "--ranks",
            "2",
        ],
        &["--profile", "dgx-h100"],
        &[
            "--collective",
            "broadcast",
            "--ranks",
            "4",
            "-r",
            "1",
            "-d",
            "half",
        ],
        &[
            "--collective",
            "allreduce",
            "--ranks",
            "4",
            "-o",
            "max",
            "-c",
            "0",
        ],
        &[
            "--collective",
            "allreduce",
            "--ranks",
            "2",
            "--compare",
            "nccl",
        ],
        &["--backend", "cuda"],
    ] {
        let mut a = v(&["verify"]);
        a.extend(v(extra));
        a.extend(v(&small));
        runs.push(a);
    }
    runs.push(v(&["calibrate", "-e", "64K", "-n", "1", "-r", "1"]));
    runs.push(v(&["snapshot", "-o", &snap]));
    for c in [
        "show",
        "plan",
        "xml",
        "snapshot",
        "diagnose",
        "verify",
        "calibrate",
        "completions",
        "man",
        "help",
    ] {
        runs.push(v(&[c, "--help"]));
    }
    runs.push(v(&["--help"]));
    runs.push(v(&["help", "plan"]));
    let mut failures = vec![];
    for w in [100, 80] {
        for a in &runs {
            let args: Vec<&str> = a.iter().map(String::as_str).collect();
            let long = too_long_any(&args, w, cache);
            if !long.is_empty() {
                failures.push(format!(
                    "COLUMNS={w} topo {}:\n{}",
                    args.join(" "),
                    long.join("\n")
                ));
            }
        }
        let _ = std::fs::remove_file(&snap);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// On a terminal, errors, hints and warnings wrap to its width (two-space continuation);
/// off a terminal each stays the one line scripts read. The terminal is `script`'s pty.
#[test]
fn errors_fit_a_terminal() {
    let bin = assert_cmd::cargo::cargo_bin("topo");
    let xml = fixture("fixtures/xml/azure-ndv4-topo.xml");
    let cases = [
        format!("{} plan --from {}", bin.display(), xml.display()),
        format!("{} plan --profile nope", bin.display()),
        format!(
            "{} plan --profile dgx-h100 --nccl-version 3.1",
            bin.display()
        ),
        format!("{} verify --ranks 0", bin.display()),
        format!("{} diagnose --nccl-log /no/such/file.log", bin.display()),
    ];
    for w in [100usize, 80] {
        for c in &cases {
            let out = std::process::Command::new("script")
                .args(["-qec", c, "/dev/null"])
                .env("COLUMNS", w.to_string())
                .env("TOPO_PCI_IDS", "none")
                .output()
                .expect("script (util-linux) runs the command on a pty");
            let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
            assert!(text.contains("error: "), "{c}: {text}");
            let long: Vec<&str> = text.lines().filter(|l| l.len() > w).collect();
            assert!(long.is_empty(), "COLUMNS={w} {c}:\n{}", long.join("\n"));
        }
    }
    // Off a terminal: one `error:` and one `hint:` line, however long.
    let out = topo()
        .env("COLUMNS", "80")
        .args(["plan", "--from", xml.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].len() > 80,
        "{err}"
    );
    assert!(lines[1].starts_with("hint: "), "{err}");
}
