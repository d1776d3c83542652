//! `topo report` through the real binary: the HTML is strict (well-formed, nothing outside
//! it, unique ids), carries every section, shows exactly the findings `topo diagnose
//! --format json` prints for the same inputs, renders real logs and nccl-tests results from
//! ../shared/realdata, escapes hostile input and keeps its size at thousands of nodes.

use crate::util::{fixture, realdata, topo_clean_env};

#[path = "../../crates/topo-report/src/html/strict.rs"]
pub(crate) mod strict;
use strict::Checked;

/// The strict reading, and every section of a full report present.
fn check(doc: &str) -> Checked {
    let out = strict::check(doc);
    for id in ["summary", "machine", "plan", "results", "log", "provenance"] {
        assert!(out.ids.iter().any(|x| x == id), "no section #{id}");
    }
    out
}

/// `topo report ARGS -o FILE`, checked, and the document.
fn report(args: &[&str]) -> (String, Checked) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.html");
    let out = topo_clean_env()
        .arg("report")
        .args(args)
        .arg("-o")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "topo report {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "nothing on stdout with -o");
    let doc = std::fs::read_to_string(&path).unwrap();
    let c = check(&doc);
    (doc, c)
}

/// `(id, severity, title)` of `topo diagnose ARGS --format json`.
fn diagnosed(args: &[&str]) -> Vec<(String, String, String)> {
    let out = topo_clean_env()
        .arg("diagnose")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap().to_string();
            (s("id"), s("severity"), s("title"))
        })
        .collect()
}

fn same_findings(args: &[&str]) -> (String, Checked) {
    let (doc, c) = report(args);
    let mut got = c.findings.clone();
    let mut want = diagnosed(args);
    got.sort();
    want.sort();
    assert_eq!(got, want, "report and diagnose disagree on {args:?}");
    (doc, c)
}

#[test]
fn a_profile_with_a_real_nccl_tests_result() {
    let Some(res) = realdata("nccl-tests/nccl-tests-290-h100-2x8-ib-default.txt") else {
        return;
    };
    let res = res.to_string_lossy().into_owned();
    let args = [
        "--profile",
        "dgx-h100",
        "--nodes",
        "2",
        "--nccl-tests",
        &res,
    ];
    let (doc, c) = same_findings(&args);
    assert!(!c.findings.is_empty(), "the run is below its band");
    // Measured against expected per size, and the measurements on the plot.
    assert!(doc.contains("<table class=\"h-results\">"));
    assert!(doc.matches("<td class=\"h-below\"").count() >= 5);
    assert!(doc.contains("measured: nccl-tests-290-h100-2x8-ib-default.txt"));
    assert!(doc.contains("expected band (healthy machines)"));
    assert_eq!(doc.matches("<polygon").count(), 1, "the band, once");
    // The machine and the plan: 8 GPUs and 8 NICs in nvidia-smi's layout, the pair matrix.
    assert!(doc.contains("<table class=\"h-matrix\" id=\"matrix-0\">"));
    assert!(doc.contains("NV18 (nvidia-smi); NCCL path NVL"));
    assert!(doc.contains("<table class=\"h-matrix h-pairs\">"));
    // Channel 0's ring of 16 ranks, two of its edges across the network.
    assert!(doc.contains("<div class=\"h-figure h-ring\">"));
    assert_eq!(doc.matches("<line class=\"inter\"").count(), 2);
    // Provenance: the result's hash as sha256sum prints it.
    let bytes = std::fs::read(&res).unwrap();
    let hex: String = topo_runtime::sha256(&[&bytes])
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    assert!(doc.contains(&hex));
}

#[test]
fn a_real_log_beside_the_plan() {
    let Some(log) =
        realdata("nccl-logs/nccl-tests-319-hgx-h100-2x8-nccl2.26.2-transports-EXCERPT.log")
    else {
        return;
    };
    let log = log.to_string_lossy().into_owned();
    let (doc, _) = same_findings(&["--profile", "dgx-h100", "--nodes", "2", "--nccl-log", &log]);
    assert!(doc.contains("Connections: logged against modelled"));
    // The version the log was compared at, beside the plan's.
    assert!(doc.contains("<td>NCCL for the log</td>"));
}

/// Every real log renders, alone (the machine from its system block or Init lines, else
/// none) and with the same findings as diagnose.
#[test]
fn every_real_log_renders() {
    let Some(dir) = realdata("nccl-logs") else {
        return;
    };
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "log") {
            continue;
        }
        same_findings(&["--nccl-log", &p.to_string_lossy()]);
    }
}

/// Without ../shared: the repository's own log fixtures.
#[test]
fn fixture_logs_render() {
    for f in [
        "fixtures/logs/synthetic-h100-nvls-unavailable.log",
        "fixtures/logs/nccl-tests-256-h200-vm-pxb-system-graph.log",
    ] {
        same_findings(&["--nccl-log", &fixture(f).to_string_lossy()]);
    }
}

/// A crafted log and file name cannot add markup: every string is escaped.
#[test]
fn hostile_log_and_file_name_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let name = dir.path().join("<script>alert(1)<\\script>\"'.log");
    std::fs::write(
        &name,
        "host<b>:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n\
         host<b>:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC</td><script>x</script>\n\
         host<b>:1:1 [0] NCCL WARN <img src=http://evil/x onerror=alert(1)>\n",
    )
    .unwrap();
    let (doc, _) = same_findings(&[
        "--profile",
        "dgx-h100",
        "--nccl-log",
        &name.to_string_lossy(),
    ]);
    assert!(doc.contains("&lt;script&gt;alert(1)&lt;\\script&gt;&quot;&apos;.log"));
}

/// 2,048 nodes read like two: hosts by class, pairs of the first node, lists cut.
#[test]
fn size_is_bounded_at_thousands_of_nodes() {
    let (small, _) = report(&["--profile", "dgx-h100", "--nodes", "2"]);
    let (large, _) = report(&["--profile", "dgx-h100", "--nodes", "2048"]);
    assert!(
        large.len() < small.len() + small.len() / 4,
        "{} bytes at 2,048 nodes, {} at 2",
        large.len(),
        small.len()
    );
}

#[test]
fn an_output_file_is_required() {
    let out = topo_clean_env()
        .args(["report", "--profile", "dgx-h100"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error:") && err.contains("-o report.html"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 2, "{err}");
}

/// Headless Chromium, where one is installed (Debian's `chromium`; CI installs it when it can,
/// and this test says so when it skips): the report loads with no console error, the DOM
/// holds every section, and a screenshot at 1280 px is not blank.
#[test]
fn chromium_renders_the_report() {
    let Some(chrome) = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|b| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(b))
                    .find(|p| p.is_file())
            })
        })
    else {
        eprintln!("skipped: no chromium on PATH (Debian: apt-get install -y chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let out = topo_clean_env()
        .args(["report", "--profile", "dgx-h100", "--nodes", "2", "-o"])
        .arg(&html)
        .output()
        .unwrap();
    assert!(out.status.success());
    let url = format!("file://{}", html.display());
    let base = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1280,2400",
    ];
    let dom = std::process::Command::new(&chrome)
        .args(base)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let text = String::from_utf8_lossy(&dom.stdout);
    for id in ["summary", "machine", "plan", "results", "log", "provenance"] {
        assert!(
            text.contains(&format!("id=\"{id}\"")),
            "no #{id} in the DOM"
        );
    }
    let err = String::from_utf8_lossy(&dom.stderr);
    assert!(
        !err.contains("CONSOLE") && !err.contains("Uncaught"),
        "console: {err}"
    );
    let png = dir.path().join("r.png");
    let shot = std::process::Command::new(&chrome)
        .args(base)
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    // A blank 1280x2400 page compresses to a few kB; the report's tables and pictures do not.
    let size = std::fs::metadata(&png).unwrap().len();
    assert!(size > 40_000, "screenshot of {size} bytes: blank?");
}
