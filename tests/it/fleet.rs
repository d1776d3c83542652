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
