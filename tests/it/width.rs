//! Every text view fits the width: `COLUMNS` (80, 100, 160) over every built-in profile, one
//! node and `--nodes 2` / `--nodes 16`, every `topo show` view but the nvidia-smi matrix
//! (which keeps nvidia-smi's layout; `--compact` is checked instead) and DOT (a format),
//! every section of `topo plan`, and `topo diagnose`. A line's length is counted in bytes,
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
