//! `topo show` statements that used to mislead (issue 10, item 4): storage, front-end and
//! container ports counted as the GPUs' network, a GPU's nearest NIC picked among front-end
//! ports, GPU numbers that were positions where the JSON has NVML indices, unnamed new GPUs,
//! and a flat (VM) topology shown NODE in the matrix where nvidia-smi and the summary say PHB.

use crate::util::topo;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn show(args: &[&str]) -> String {
    // Wide enough that no verdict wraps: these tests read whole sentences.
    let out = topo()
        .arg("show")
        .args(args)
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    serde_json::from_str(&show(&a)).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Two H100s behind one switch each with a 400G IB port, plus a 100 GbE front-end port and
/// docker0 (both with GDR off) on the CPU: a box as NCCL's XML lists it.
fn frontend_box(dev_base: u32) -> String {
    let gpu = |bus: &str, dev: u32| {
        format!(
            r#"<pci busid="{bus}" class="0x030200" vendor="0x10de" device="0x2901" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="{dev}" sm="100" rank="{dev}" gdr="1"/></pci>"#
        )
    };
    let nic = |bus: &str, name: &str, dev: u32, speed: u32| {
        format!(
            r#"<pci busid="{bus}" class="0x020700" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16"><nic><net name="{name}" dev="{dev}" speed="{speed}" port="1" gdr="1"/></nic></pci>"#
        )
    };
    let sw = |bus: &str, inner: String| {
        format!(
            r#"<pci busid="{bus}" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">{inner}</pci>"#
        )
    };
    format!(
        r#"<system version="1"><cpu numaid="0" affinity="ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">{}{}<pci busid="0000:50:00.0" class="0x020000" vendor="0x15b3" device="0x101d" link_speed="16.0 GT/s PCIe" link_width="16"><nic><net name="mlx5_2" dev="2" speed="100000" port="1" gdr="0"/></nic></pci><nic><net name="docker0" dev="3" speed="10000" port="0" gdr="0"/></nic></cpu></system>"#,
        sw(
            "0000:10:00.0",
            gpu("0000:11:00.0", dev_base) + &nic("0000:12:00.0", "mlx5_0", 0, 400000)
        ),
        sw(
            "0000:20:00.0",
            gpu("0000:21:00.0", dev_base + 1) + &nic("0000:22:00.0", "mlx5_1", 1, 400000)
        ),
    )
}

#[test]
fn storage_ports_are_not_counted_per_gpu() {
    let out = show(&["--profile", "dgx-h100"]);
    assert!(
        out.contains(
            "8 compute network ports with 3200 Gb/s in total: 400 Gb/s per GPU; not counted: \
             4 storage (mlx5_8, mlx5_9, mlx5_10, mlx5_11)"
        ),
        "{out}"
    );
    let v = json(&["--profile", "dgx-h100"]);
    let nics = v["nics"].as_array().unwrap();
    let role = |name: &str| {
        nics.iter()
            .find(|n| n["name"] == name)
            .map(|n| (n["role"].clone(), n["role_stated"].clone()))
            .unwrap()
    };
    assert_eq!(role("mlx5_0"), ("compute".into(), false.into()));
    assert_eq!(role("mlx5_8"), ("storage".into(), true.into()));
}

#[test]
fn frontend_and_container_ports_are_named_and_not_nearest() {
    let dir = tempfile::tempdir().unwrap();
    let xml = write(dir.path(), "box.xml", &frontend_box(0));
    let f = xml.to_str().unwrap();
    let out = show(&["--from", f]);
    assert!(
        out.contains(
            "2 compute network ports with 800 Gb/s in total: 400 Gb/s per GPU; not counted: \
             2 front-end (mlx5_2, docker0)"
        ),
        "{out}"
    );
    let v = json(&["--from", f]);
    for g in v["gpus"].as_array().unwrap() {
        let near = g["nearest_nic"].as_str().unwrap();
        assert!(near == "mlx5_0" || near == "mlx5_1", "{g}");
    }
    let nics = v["nics"].as_array().unwrap();
    let docker = nics.iter().find(|n| n["name"] == "docker0").unwrap();
    assert_eq!(docker["role"], "front-end");
    assert!(docker["role_why"].as_str().unwrap().contains("container"));
    let eth = nics.iter().find(|n| n["name"] == "mlx5_2").unwrap();
    assert!(
        eth["role_why"].as_str().unwrap().contains("slower"),
        "{eth}"
    );
}

#[test]
fn gpu_numbers_are_nvml_indices_and_b200_is_named() {
    let dir = tempfile::tempdir().unwrap();
    // The GPUs of ranks 4 and 5 (NVML indices 4, 5), as a dump of a partial job lists them.
    let xml = write(dir.path(), "half.xml", &frontend_box(4));
    let f = xml.to_str().unwrap();
    let out = show(&["--from", f]);
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("0000:11:00.0") || l.contains("0000:21:00.0"))
        .filter(|l| l.contains("B200"))
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows[0].trim_start().starts_with("4 "), "{out}");
    assert!(rows[1].trim_start().starts_with("5 "), "{out}");
    let v = json(&["--from", f]);
    assert_eq!(v["gpus"][0]["dev"], 4);
    assert_eq!(v["gpus"][0]["model"], "B200");
    let m = show(&["--from", f, "--view", "matrix"]);
    assert!(m.lines().any(|l| l.starts_with("GPU4 ")), "{m}");
}

#[test]
fn flat_topology_matrix_says_phb_as_the_summary_does() {
    let f = crate::util::fixture("fixtures/xml/nccl-miner-2x-rtxa6000-nvlink-bridge.xml");
    let f = f.to_str().unwrap();
    let m = show(&["--from", f, "--view", "matrix"]);
    let row: Vec<&str> = m
        .lines()
        .find(|l| l.starts_with("GPU0"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row[1..4], ["X", "NV4", "PHB"], "{m}");
    let s = show(&["--from", f]);
    assert!(s.contains("eno1 (PHB"), "{s}");
}
