//! `topo report` through the real binary: the HTML is strict (well-formed, nothing outside
//! it, unique ids), carries every section, shows exactly the findings `topo diagnose
//! --format json` prints for the same inputs, renders real logs and nccl-tests results from
//! ../shared/realdata, escapes hostile input and keeps its size at thousands of nodes.

use crate::util::{fixture, topo_clean_env};
use std::path::PathBuf;

/// What a strict reading of a report found.
struct Checked {
    ids: Vec<String>,
    /// `(code, severity, title)` per finding, in document order.
    findings: Vec<(String, String, String)>,
}

/// Reads the whole report with quick-xml (every element closed, attributes unescape, only
/// XML's predefined entities) and checks that nothing refers outside it and ids are unique.
fn check(doc: &str) -> Checked {
    use quick_xml::events::Event;
    assert!(doc.starts_with("<!DOCTYPE html>"));
    let lower = doc.to_ascii_lowercase();
    for banned in [
        "<script", "<link", "<iframe", "<object", "<embed", "<img", "@import",
    ] {
        assert!(!lower.contains(banned), "{banned} in the report");
    }
    for (i, _) in lower.match_indices("url(") {
        assert!(lower[i..].starts_with("url(#"), "url( leaves the document");
    }
    let mut r = quick_xml::Reader::from_str(doc);
    let mut out = Checked {
        ids: vec![],
        findings: vec![],
    };
    let (mut depth, mut in_title) = (0i32, false);
    let mut title = String::new();
    let mut finding: Option<(String, String)> = None;
    loop {
        match r.read_event() {
            Ok(Event::Start(e)) => {
                depth += 1;
                let (class, code) = attributes(&e, &mut out.ids);
                if code.is_some() {
                    finding = code;
                }
                in_title = class == "h-title";
            }
            Ok(Event::Empty(e)) => {
                attributes(&e, &mut out.ids);
            }
            Ok(Event::Text(t)) if in_title => {
                title.push_str(&t.xml_content(quick_xml::XmlVersion::Implicit1_0));
            }
            Ok(Event::GeneralRef(e)) => {
                let c = match &*e {
                    "lt" => '<',
                    "gt" => '>',
                    "amp" => '&',
                    "quot" => '"',
                    "apos" => '\'',
                    n => panic!("entity &{n};"),
                };
                if in_title {
                    title.push(c);
                }
            }
            Ok(Event::End(_)) => {
                depth -= 1;
                if in_title {
                    let (c, s) = finding.take().expect("a title inside a finding");
                    out.findings.push((c, s, std::mem::take(&mut title)));
                    in_title = false;
                }
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", r.buffer_position()),
        }
    }
    assert_eq!(depth, 0, "unclosed elements");
    let mut seen = std::collections::HashSet::new();
    for id in &out.ids {
        assert!(seen.insert(id.clone()), "id {id} twice");
    }
    for id in ["summary", "machine", "plan", "results", "log", "provenance"] {
        assert!(out.ids.iter().any(|x| x == id), "no section #{id}");
    }
    out
}

/// An element's class and its finding's `(data-code, data-severity)`; ids go to `ids`. A
/// `src` or `href` must stay in the document and no event handler may appear.
fn attributes(
    e: &quick_xml::events::BytesStart,
    ids: &mut Vec<String>,
) -> (String, Option<(String, String)>) {
    let mut class = String::new();
    let (mut code, mut sev) = (None, None);
    for a in e.attributes() {
        let a = a.expect("attribute parses");
        let k = a.key.as_ref().to_ascii_lowercase();
        let v = a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .expect("attribute value unescapes")
            .into_owned();
        if k == "src" || k.ends_with("href") {
            assert!(v.starts_with('#'), "{k}={v:?} leaves the document");
        }
        assert!(!k.starts_with("on"), "event handler {k}");
        match k.as_str() {
            "id" => ids.push(v),
            "class" => class = v,
            "data-code" => code = Some(v),
            "data-severity" => sev = Some(v),
            _ => {}
        }
    }
    (class, code.zip(sev))
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

/// ../shared/realdata beside the repository, when it is there.
fn realdata(rel: &str) -> Option<PathBuf> {
    let p = fixture("../shared/realdata").join(rel);
    if p.exists() {
        return Some(p);
    }
    eprintln!("skipped: {} is absent (the shared real data)", p.display());
    None
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
