//! Golden-node checks (issue 28, item 4): `topo diff A B` between any two sources, and
//! `topo diagnose --fleet DIR` grouping a folder of snapshots by identical hardware.

use crate::util::{fixture, topo_clean_env as topo};
use serde_json::Value;
use std::path::Path;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            copy_dir(&src, &dst);
        } else if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// The HGX H100 snapshot with GPU 0's link running at x8.
fn downtrained(to: &Path) {
    copy_dir(&fixture("fixtures/snapshots/hgx-h100-8gpu"), to);
    let w = to.join(
        "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/current_link_width",
    );
    assert!(w.exists(), "{}", w.display());
    std::fs::write(w, "8\n").unwrap();
}

#[test]
fn diff_names_the_hardware_difference_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad");
    downtrained(&bad);
    let good = fixture("fixtures/snapshots/hgx-h100-8gpu");
    let out = topo()
        .args(["diff", "--format", "json"])
        .arg(&good)
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::util::assert_valid(&d, "topo diff --format json");
    let hw = d["hardware"].as_array().unwrap();
    assert_eq!(hw.len(), 1, "{hw:?}");
    assert_eq!(hw[0]["fact"], "gpu 0 pcie");
    assert_eq!(hw[0]["b"], "Gen5 x16 (x8 now)");
    let same = topo()
        .args(["diff", "profile:dgx-h100", "dgx-h100"])
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(0));
    let text = String::from_utf8_lossy(&same.stdout);
    assert!(text.contains("no difference"), "{text}");
}

#[test]
fn diff_of_two_profiles_shows_what_the_plan_changes() {
    let out = topo()
        .args([
            "diff",
            "dgx-h100",
            "dgx-b200",
            "--nodes",
            "2",
            "--nccl-version",
            "2.28",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(
        t.contains("gpu 0 sm") && t.contains("90") && t.contains("100"),
        "{t}"
    );
    assert!(
        t.contains("Plan (NCCL 2.28") && t.contains("allreduce"),
        "{t}"
    );
    let zero = topo()
        .args(["diff", "dgx-h100", "dgx-h100", "--nodes", "0"])
        .output()
        .unwrap();
    assert_eq!(zero.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&zero.stderr).contains("--nodes must be at least 1"));
    let bad = topo()
        .args(["diff", "dgx-h100", "no-such-thing"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let e = String::from_utf8_lossy(&bad.stderr);
    assert!(
        e.contains("no-such-thing: no such file, folder or built-in profile"),
        "{e}"
    );
}

#[test]
fn a_fleet_is_grouped_and_its_outliers_named() {
    let dir = tempfile::tempdir().unwrap();
    let hgx = fixture("fixtures/snapshots/hgx-h100-8gpu");
    for n in ["node1", "node2", "node3"] {
        copy_dir(&hgx, &dir.path().join(n));
    }
    downtrained(&dir.path().join("node4"));
    copy_dir(
        &fixture("fixtures/snapshots/pcie-8gpu"),
        &dir.path().join("node5"),
    );
    std::fs::write(dir.path().join("node6.tar.gz"), "not an archive").unwrap();
    let out = topo()
        .args(["diagnose", "--format", "json", "--fleet"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::util::assert_valid(&d, "topo diagnose --fleet --format json");
    let g = d["groups"].as_array().unwrap();
    assert_eq!(g.len(), 3);
    assert_eq!(
        g[0]["hosts"],
        serde_json::json!(["node1", "node2", "node3"])
    );
    assert!(g[0]["differences"].as_array().unwrap().is_empty());
    assert_eq!(g[1]["hosts"], serde_json::json!(["node4"]));
    assert_eq!(g[1]["differences"][0]["fact"], "gpu 0 pcie");
    assert_eq!(g[2]["hosts"], serde_json::json!(["node5"]));
    assert_eq!(d["unreadable"][0]["host"], "node6");
    let fail = topo()
        .args(["diagnose", "--fail-on", "warning", "--fleet"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(fail.status.code(), Some(1));
    let t = String::from_utf8_lossy(&fail.stdout);
    assert!(
        t.contains("outlier 1 (1 host(s)") && t.contains("node4"),
        "{t}"
    );
}

/// Issue 24, item 4: a snapshot keeps what diagnose's offline checks read (/dev/shm's mount
/// line, the kernel modules, the bridges' config space), only the /dev/shm line of the mount
/// table, and its archive is diagnosed exactly like its folder.
#[test]
fn a_snapshot_archive_is_diagnosed_like_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    copy_dir(&fixture("fixtures/snapshots/hgx-h100-8gpu"), &root);
    std::fs::write(
        root.join("proc/mounts"),
        "nfs.example:/secret /data nfs rw 0 0\ntmpfs /dev/shm tmpfs rw,size=65536k 0 0\n",
    )
    .unwrap();
    std::fs::write(
        root.join("proc/modules"),
        "nvidia_peermem 16384 0 - Live 0x0\n",
    )
    .unwrap();
    let archive = dir.path().join("box.tar.gz");
    let out = topo()
        .args(["snapshot", "--sysfs-root"])
        .arg(&root)
        .arg("-o")
        .arg(&archive)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folder = dir.path().join("unpacked");
    std::fs::create_dir(&folder).unwrap();
    let f = std::fs::File::open(&archive).unwrap();
    tar::Archive::new(flate2::read::GzDecoder::new(f))
        .unpack(&folder)
        .unwrap();
    let mounts = std::fs::read_to_string(folder.join("proc/mounts")).unwrap();
    assert_eq!(mounts.trim(), "tmpfs /dev/shm tmpfs rw,size=65536k 0 0");
    let doc = |from: &Path| -> Value {
        let out = topo()
            .args(["diagnose", "--format", "json", "--from"])
            .arg(from)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (a, b) = (doc(&archive), doc(&folder));
    for k in ["findings", "checked", "skipped"] {
        // The same facts; only the source's name differs.
        let x = a[k].to_string().replace(archive.to_str().unwrap(), "SRC");
        let y = b[k].to_string().replace(folder.to_str().unwrap(), "SRC");
        assert_eq!(x, y, "{k}");
    }
    let skipped = a["skipped"].to_string();
    assert!(
        !skipped.contains("/dev/shm size") && !skipped.contains("GPUDirect RDMA"),
        "{skipped}"
    );
}

/// A fleet's cost follows its entries: four times the hosts, under six times the time; the
/// hosts of one build share one group (and one copy of its facts).
#[test]
fn a_fleet_is_read_in_linear_time() {
    let yaml = topo_source::profile::builtin_text("dgx-h100").unwrap();
    let folder = |n: usize| {
        let d = tempfile::tempdir().unwrap();
        for i in 0..n {
            std::fs::write(d.path().join(format!("node{i:04}.yaml")), yaml).unwrap();
        }
        d
    };
    let run = |d: &Path| {
        let t0 = std::time::Instant::now();
        let out = topo()
            .args(["diagnose", "--format", "json", "--fleet"])
            .arg(d)
            .output()
            .unwrap();
        let took = t0.elapsed();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["groups"].as_array().unwrap().len(), 1, "{doc}");
        took
    };
    let (small, large) = (folder(100), folder(400));
    let (mut a, mut b) = (std::time::Duration::MAX, std::time::Duration::MAX);
    for _ in 0..3 {
        a = a.min(run(small.path()));
        b = b.min(run(large.path()));
    }
    assert!(b < a * 6, "{a:?} -> {b:?}");
}

/// The text and JSON of `topo diff` and `topo diagnose --fleet`, byte for byte: written
/// before their documents moved out of the binary (issue 42 item 1), they hold the move to
/// the same output.
#[test]
fn diff_and_fleet_outputs_are_stable() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet");
    let hgx = fixture("fixtures/snapshots/hgx-h100-8gpu");
    for n in ["node1", "node2", "node3"] {
        copy_dir(&hgx, &fleet.join(n));
    }
    downtrained(&fleet.join("node4"));
    copy_dir(
        &fixture("fixtures/snapshots/pcie-8gpu"),
        &fleet.join("node5"),
    );
    std::fs::write(fleet.join("node6.tar.gz"), "not an archive").unwrap();
    let run = |args: &[&str]| {
        let out = topo().current_dir(dir.path()).args(args).output().unwrap();
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    for (name, args) in [
        ("fleet_text", vec!["diagnose", "--fleet", "fleet"]),
        (
            "fleet_json",
            vec!["diagnose", "--fleet", "fleet", "--format", "json"],
        ),
        ("diff_hw_text", vec!["diff", "fleet/node1", "fleet/node4"]),
        (
            "diff_hw_json",
            vec!["diff", "fleet/node1", "fleet/node4", "--format", "json"],
        ),
        (
            "diff_profiles_text",
            vec![
                "diff",
                "dgx-h100",
                "dgx-b200",
                "--nodes",
                "2",
                "--nccl-version",
                "2.28",
            ],
        ),
        (
            "diff_unplanned_text",
            vec!["diff", "fleet/node5", "dgx-h100", "--nccl-version", "1.0"],
        ),
    ] {
        insta::assert_snapshot!(name, run(&args));
    }
}

use crate::report::strict;

/// Rows of the table `id` in a strict reading.
fn table(c: &strict::Checked, id: &str) -> Vec<Vec<String>> {
    c.rows
        .iter()
        .filter(|(t, _)| t == id)
        .map(|(_, r)| r.clone())
        .collect()
}

/// `topo ARGS --format json` and `--format html -o FILE` in `dir`: the document, the page
/// and its strict reading; both exit alike.
fn json_and_html(dir: &Path, args: &[&str]) -> (Value, String, strict::Checked) {
    let run = |format: &[&str]| {
        let out = topo()
            .current_dir(dir)
            .args(args)
            .args(format)
            .output()
            .unwrap();
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{args:?} {format:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let json = run(&["--format", "json"]);
    let page = dir.join("page.html");
    let html = run(&["--format", "html", "-o", page.to_str().unwrap()]);
    assert_eq!(json.status.code(), html.status.code(), "{args:?}");
    let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
    let text = std::fs::read_to_string(&page).unwrap();
    std::fs::remove_file(&page).unwrap();
    let c = strict::check(&text);
    (doc, text, c)
}

fn shown(v: &Value) -> String {
    v.as_str().unwrap_or("(none)").to_string()
}

/// `topo diff --format html`: every differing fact and plan change of the JSON, in its order.
#[test]
fn diff_html_agrees_with_its_json() {
    let dir = tempfile::tempdir().unwrap();
    let (d, page, c) = json_and_html(
        dir.path(),
        &[
            "diff",
            "pcie-8x-l40s",
            "dgx-h100",
            "--nodes",
            "2",
            "--nccl-version",
            "2.28",
        ],
    );
    let want: Vec<Vec<String>> = d["hardware"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| vec![shown(&r["fact"]), shown(&r["a"]), shown(&r["b"])])
        .collect();
    assert!(want.len() > 10);
    assert_eq!(table(&c, "hardware-facts"), want);
    let changes = d["plan_changes"].as_array().unwrap();
    assert!(!changes.is_empty());
    for ch in changes {
        let t = ch
            .as_str()
            .unwrap()
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('\'', "&apos;")
            .replace('"', "&quot;");
        assert!(page.contains(&format!("<li>{t}</li>")), "{t}");
    }
    for id in ["summary", "hardware", "plan", "provenance"] {
        assert!(c.ids.iter().any(|x| x == id), "no #{id}");
    }
    assert!(page.contains("built into topo"), "the profiles as inputs");
}

/// `topo diagnose --fleet --format html` on a folder whose entries are named with markup: the
/// groups, each outlier's differences and the unreadable entries are the JSON's, escaped.
#[test]
fn fleet_html_agrees_with_its_json_and_escapes_names() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fl<b>eet");
    let hgx = fixture("fixtures/snapshots/hgx-h100-8gpu");
    for n in ["<script>alert(1)<", "node&amp;2", "n\"o'de3"] {
        copy_dir(&hgx, &fleet.join(n));
    }
    downtrained(&fleet.join("<td><img src=x onerror=alert(1)>"));
    let yaml = topo_source::profile::builtin_text("dgx-b200").unwrap();
    std::fs::write(fleet.join("b200<i>.yaml"), yaml).unwrap();
    std::fs::write(fleet.join("<svg onload=alert(1)>.tar.gz"), "not an archive").unwrap();
    let (d, page, c) = json_and_html(dir.path(), &["diagnose", "--fleet", "fl<b>eet"]);
    let groups = d["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 3);
    let rows: Vec<Vec<String>> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let hosts: Vec<&str> = g["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h.as_str().unwrap())
                .collect();
            vec![
                i.to_string(),
                (if i == 0 { "reference" } else { "outlier" }).to_string(),
                hosts.len().to_string(),
                shown(&g["fingerprint"]),
                g["differences"].as_array().unwrap().len().to_string(),
                hosts.join(", "),
            ]
        })
        .collect();
    assert_eq!(table(&c, "groups"), rows);
    for (i, g) in groups.iter().enumerate().skip(1) {
        let want: Vec<Vec<String>> = g["differences"]
            .as_array()
            .unwrap()
            .iter()
            .take(200)
            .map(|r| vec![shown(&r["fact"]), shown(&r["here"]), shown(&r["reference"])])
            .collect();
        assert_eq!(table(&c, &format!("group-{i}")), want);
    }
    let bad: Vec<Vec<String>> = d["unreadable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| vec![shown(&u["host"]), shown(&u["error"])])
        .collect();
    assert_eq!(bad.len(), 1);
    assert_eq!(table(&c, "unreadable-entries"), bad);
    assert!(page.contains("&lt;td&gt;&lt;img src=x onerror=alert(1)&gt;"));
    assert!(page.contains("fl&lt;b&gt;eet"));
    assert!(page.contains("node&amp;amp;2"));
}

/// A fleet of 1,200 hosts reads like one of 12: hosts by class, names cut with a count.
#[test]
fn fleet_html_size_is_bounded() {
    let h100 = topo_source::profile::builtin_text("dgx-h100").unwrap();
    let b200 = topo_source::profile::builtin_text("dgx-b200").unwrap();
    let page = |n: usize| {
        let dir = tempfile::tempdir().unwrap();
        let fleet = dir.path().join("f");
        std::fs::create_dir(&fleet).unwrap();
        for i in 0..n {
            let yaml = if i % 4 == 3 { b200 } else { h100 };
            std::fs::write(fleet.join(format!("node{i:05}.yaml")), yaml).unwrap();
        }
        std::fs::write(fleet.join("zz.tar.gz"), "not an archive").unwrap();
        let (d, page, _) = json_and_html(dir.path(), &["diagnose", "--fleet", "f"]);
        assert_eq!(d["groups"].as_array().unwrap().len(), 2);
        assert_eq!(d["hosts"], n + 1);
        page
    };
    let (small, large) = (page(12), page(1200));
    assert!(large.contains("and 892 more"), "the reference's names cut");
    assert!(
        large.len() < small.len() + small.len() / 4,
        "{} bytes at 1,200 hosts, {} at 12",
        large.len(),
        small.len()
    );
}

#[test]
fn html_without_a_fleet_points_at_topo_report() {
    let out = topo()
        .args(["diagnose", "--profile", "dgx-h100", "--format", "html"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error:") && err.contains("--fleet") && err.contains("topo report"),
        "{err}"
    );
}
