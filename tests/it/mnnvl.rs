//! GB200/GB300 NVL72 through the binary: a "node" of `--nodes` is one OS host (a tray of 4
//! GPUs, NVIDIA/nccl#1604); 18 trays fill one 72-GPU NVLink domain, 36 are two domains joined
//! by InfiniBand. The rules are NCCL 2.28.9's multi-node NVLink (crates/topo-nccl/src/mnnvl.rs).

use super::util::topo_clean_env;
use serde_json::Value;

fn plan_json(args: &[&str]) -> Value {
    super::util::plan_doc(args).0
}

fn channel_line(v: &Value) -> &str {
    v["channels"]["log_line"].as_str().unwrap()
}

fn algo_at(v: &Value, bytes: u64) -> String {
    v["table"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["bytes"].as_u64() == Some(bytes))
        .map(|r| r["algo"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no row for {bytes} in {}", v["table"]))
}

/// Two trays of one rack: one NCCL node of 8 local ranks, P2P/MNNVL between every pair, the
/// single-domain Blackwell NVLS count (24), NVLS for large AllReduce.
#[test]
fn two_trays_are_one_nccl_node() {
    let v = plan_json(&[
        "--profile",
        "gb200-nvl72",
        "--nodes",
        "2",
        "-b",
        "1K",
        "-e",
        "1G",
        "-f",
        "1024",
    ]);
    assert_eq!(
        (v["nranks"].as_u64(), v["nnodes"].as_u64()),
        (Some(8), Some(1))
    );
    assert_eq!(v["mnnvl"]["hosts"], 2);
    assert_eq!(v["mnnvl"]["clique_size"], 8);
    assert_eq!(
        channel_line(&v),
        "32 coll channels, 32 collnet channels, 24 nvls channels, 32 p2p channels, 32 p2p channels per peer"
    );
    let kinds: Vec<&str> = v["transports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["transport"].as_str().unwrap())
        .collect();
    assert!(
        !kinds.is_empty() && kinds.iter().all(|&k| k == "P2P/MNNVL"),
        "{kinds:?}"
    );
    assert!(
        v["log"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "MNNVL 1 cliqueId 7ffe cliqueSize 8 cliqueRank 0")
    );
    assert_eq!(algo_at(&v, 1 << 10), "Ring");
    assert_eq!(algo_at(&v, 1 << 30), "NVLS");
}

/// 18 trays fill the rack: still one node, now of 72 ranks, NVLS spanning all of them.
#[test]
fn a_full_rack_is_one_node_of_72() {
    let v = plan_json(&[
        "--profile",
        "gb200-nvl72",
        "--nodes",
        "18",
        "-b",
        "1G",
        "-e",
        "1G",
    ]);
    assert_eq!(
        (v["nranks"].as_u64(), v["nnodes"].as_u64()),
        (Some(72), Some(1))
    );
    assert!(
        channel_line(&v).contains(" 24 nvls channels"),
        "{}",
        channel_line(&v)
    );
    assert_eq!(algo_at(&v, 1 << 30), "NVLS");
}

/// 36 trays are two racks: two NCCL nodes of 72 joined by NET/IB, the multi-domain NVLS count
/// (32), NVLS no longer the large-AllReduce choice.
#[test]
fn two_racks_are_two_nodes_over_the_network() {
    let v = plan_json(&[
        "--profile",
        "gb200-nvl72",
        "--nodes",
        "36",
        "-b",
        "1G",
        "-e",
        "1G",
    ]);
    assert_eq!(
        (v["nranks"].as_u64(), v["nnodes"].as_u64()),
        (Some(144), Some(2))
    );
    assert_eq!(v["mnnvl"]["cliques"].as_array().unwrap().len(), 2);
    assert!(
        channel_line(&v).contains(" 32 nvls channels"),
        "{}",
        channel_line(&v)
    );
    let net = v["transports"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["transport"].as_str().unwrap().starts_with("NET/IB"));
    assert!(net);
    assert_ne!(algo_at(&v, 1 << 30), "NVLS");
}

/// Twenty racks are expected at no more than half the rate of two (measured.rs `tree_bound`):
/// NCCL 2.26 gives NVLSTree the same bandwidth on 2 and 20 domains, where the double binary
/// tree doubles each domain's network bytes above two; CoreWeave measured 820 and 406 GB/s.
#[test]
fn twenty_racks_are_held_to_half_the_rate_of_two() {
    let row = |nodes: &str| -> Value {
        let args = [
            "--profile",
            "gb200-nvl72",
            "--nodes",
            nodes,
            "-b",
            "16G",
            "-e",
            "16G",
        ];
        super::util::plan_doc_at("2.26", &args).0["table"][0].clone()
    };
    let (two, twenty) = (row("36"), row("360"));
    assert_eq!(twenty["algo"].as_str(), Some("NVLSTree"));
    let time = |r: &Value| r["expected_time_us"].as_f64().unwrap();
    assert!(time(&twenty) >= 2.0 * time(&two), "{twenty} against {two}");
    let basis = twenty["expected_basis"].as_str().unwrap();
    assert!(basis.contains("above two nodes"), "{basis}");
    // NCCL's own figure for 20 racks is above two racks' expected rate.
    assert!(twenty["time_us"].as_f64().unwrap() < time(&two));
}

/// NCCL_MNNVL_ENABLE=0: the trays are two nodes again and talk over InfiniBand.
#[test]
fn mnnvl_enable_0_brings_the_network_back() {
    let v = plan_json(&[
        "--profile",
        "gb200-nvl72",
        "--nodes",
        "2",
        "-b",
        "1G",
        "-e",
        "1G",
        "--env",
        "NCCL_MNNVL_ENABLE=0",
    ]);
    assert_eq!(v["nnodes"], 2);
    assert!(v.get("mnnvl").is_none());
    assert!(
        channel_line(&v).contains(" 32 nvls channels"),
        "{}",
        channel_line(&v)
    );
}

/// GB300 NVL72 follows the same rules with its 800G ConnectX-8 ports.
#[test]
fn gb300_two_trays_are_one_node() {
    let v = plan_json(&[
        "--profile",
        "gb300-nvl72",
        "--nodes",
        "2",
        "-b",
        "1G",
        "-e",
        "1G",
    ]);
    assert_eq!(v["nnodes"], 1);
    assert_eq!(v["mnnvl"]["clique_size"], 8);
}

/// The plan text of two GB200 trays, read by eye: the MNNVL line, one node, P2P/MNNVL.
#[test]
fn snapshot_gb200_nvl72_2_nodes() {
    let out = topo_clean_env()
        .args([
            "plan",
            "--profile",
            "gb200-nvl72",
            "--nodes",
            "2",
            "--nccl-version",
            "2.28",
            "-b",
            "8",
            "-e",
            "1G",
            "-f",
            "8",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stdout));
}

/// `topo show` of a tray: one NVSwitch block, the fabric registration, the NIC roles.
#[test]
fn show_renders_one_nvswitch_domain() {
    let out = topo_clean_env()
        .args(["show", "--profile", "gb200-nvl72"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("NVSwitches (1)"), "{s}");
    assert!(s.contains("one NVLink fabric"), "{s}");
    assert!(s.contains("storage"), "{s}");
}

/// NCCL_MNNVL_RAIL_PER_HOST (read by NCCL 2.28.7+ in ncclTopoSearchCheckNet) only matters for
/// a network channel of a node fused from several trays: the what-if says why it changed
/// nothing here, and that 2.28.3 does not read it at all.
#[test]
fn rail_per_host_says_why_it_changes_nothing() {
    let effect = |version: &str, profile: &str, nodes: &str| {
        let out = topo_clean_env()
            .args(["plan", "--profile", profile, "--nodes", nodes])
            .args([
                "--env",
                "NCCL_MNNVL_RAIL_PER_HOST=1",
                "-b",
                "1G",
                "-e",
                "1G",
            ])
            .args(["--nccl-version", version, "--format", "json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let e = v["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "NCCL_MNNVL_RAIL_PER_HOST")
            .unwrap_or_else(|| panic!("{}", v["env"]))
            .clone();
        e["effect"].as_str().unwrap().to_string()
    };
    let one_rack = effect("2.28", "gb200-nvl72", "2");
    assert!(
        one_rack.starts_with("changed nothing in this plan: ignored here"),
        "{one_rack}"
    );
    assert!(
        one_rack.contains("one NVLink clique holds every rank"),
        "{one_rack}"
    );
    let old = effect("2.28.3", "gb200-nvl72", "2");
    assert!(old.contains("NCCL 2.28.3 does not read it"), "{old}");
    let h100 = effect("2.28", "dgx-h100", "2");
    assert!(
        h100.contains("no NCCL node is fused from several hosts"),
        "{h100}"
    );
}
