//! Built-in profiles against the public dumps they were written from: the fields a dump
//! determines (GPU and NIC bus ids, NUMA placement, GPU/NIC path types, NVLink counts, NIC
//! speed) must come out the same from the profile and from the dump.

use crate::util::{fixture, topo};
use serde_json::Value;
use std::collections::BTreeSet;

fn show(args: &[&str]) -> String {
    let out = topo().arg("show").args(args).output().unwrap();
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

/// `nvidia-smi topo -m` cells of the GPU rows (GPU and NIC columns) with the row and column
/// names, from a paste or from `topo show --view matrix`.
fn matrix_cells(text: &str) -> BTreeSet<(String, String, String)> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("GPU0"));
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let cols: Vec<&str> = header
        .into_iter()
        .take_while(|h| h.starts_with("GPU") || h.starts_with("NIC"))
        .collect();
    let mut cells = BTreeSet::new();
    for l in lines.take_while(|l| l.starts_with("GPU")) {
        let f: Vec<&str> = l.split_whitespace().collect();
        for (c, v) in cols.iter().zip(&f[1..]) {
            cells.insert((f[0].to_string(), c.to_string(), v.to_string()));
        }
    }
    assert!(!cells.is_empty(), "no matrix in {text}");
    cells
}

fn same_matrix(profile: &str, paste: &str) {
    let dump = std::fs::read_to_string(fixture(paste)).unwrap();
    let ours = show(&["--profile", profile, "--view", "matrix"]);
    let theirs = matrix_cells(&dump);
    // A paste without NIC rows says nothing about NICs: compare the columns it has.
    let cols: BTreeSet<&String> = theirs.iter().map(|c| &c.1).collect();
    let ours: BTreeSet<_> = matrix_cells(&ours)
        .into_iter()
        .filter(|c| cols.contains(&c.1))
        .collect();
    assert_eq!(ours, theirs, "{profile} against {paste}");
}

#[test]
fn hgx_b300_reproduces_the_deepep_590_matrix() {
    same_matrix(
        "hgx-b300",
        "fixtures/matrices/deepep-590-hgx-b300-cx8-bond.txt",
    );
    let t = json(&["--profile", "hgx-b300"]);
    for g in t["gpus"].as_array().unwrap() {
        assert_eq!(g["sm"], 103);
        assert_eq!(g["nvlink_lanes"], 18);
    }
}

#[test]
fn pcie_a100_pairs_reproduce_the_nccl_tests_178_matrix() {
    same_matrix(
        "pcie-8x-a100-nvbridge",
        "fixtures/matrices/nccl-tests-178-8xa100-pcie-nvlink-bridge-pairs.txt",
    );
}

/// What an XML dump fixes: GPU bus ids with their NUMA node and PCIe link, NIC bus ids
/// (with speed and GDR where the dump has a `<net>`), and which GPU/NIC pairs share a switch.
fn xml_facts(t: &Value, with_nets: bool) -> Vec<String> {
    let mut v = vec![];
    for g in t["gpus"].as_array().unwrap() {
        v.push(format!(
            "gpu {} numa {} pcie {}x{}",
            g["busid"], g["numa"], g["pcie"]["generation"], g["pcie"]["width"]
        ));
    }
    let mut name_bus = std::collections::HashMap::new();
    for n in t["nics"].as_array().unwrap() {
        let name = n["name"].as_str().or(n["busid"].as_str()).unwrap();
        name_bus.insert(name.to_string(), n["busid"].clone());
        let net = if with_nets {
            format!(" {} Gb/s gdr {}", n["speed_gbps"], n["gdr"])
        } else {
            String::new()
        };
        v.push(format!("nic {} numa {}{net}", n["busid"], n["numa"]));
    }
    let bus = |name: &Value| {
        let n = name.as_str().unwrap();
        let gpu = n.strip_prefix("GPU").and_then(|i| i.parse::<usize>().ok());
        match gpu {
            Some(i) => t["gpus"][i]["busid"].to_string(),
            None => name_bus.get(n).map_or(format!("{name}"), |b| b.to_string()),
        }
    };
    // Skeleton files have NICs without a <net>, so no GPU/NIC paths: the switches' members
    // say which GPU shares a switch with which NIC.
    for sw in t["pci_switches"].as_array().unwrap() {
        let mut kids: Vec<String> = sw["children"].as_array().unwrap().iter().map(bus).collect();
        kids.sort();
        v.push(format!(
            "switch {} numa {} gen {} x{}: {kids:?}",
            sw["busid"], sw["numa"], sw["link_generation"], sw["link_width"]
        ));
    }
    for p in t["paths"].as_array().unwrap() {
        // Beyond the GPU's own switch the path depends on NVLink (PXN), which the dumps leave
        // to NCCL's run-time detection: compare the switch-local pairs, where both must agree.
        let to = p["to"].as_str().unwrap();
        let local = matches!(p["type"].as_str(), Some("PIX" | "PXB"));
        if with_nets && !to.starts_with("GPU") && local {
            v.push(format!(
                "{} -> {}: {}",
                bus(&p["from"]),
                bus(&p["to"]),
                p["type"]
            ));
        }
    }
    v.sort();
    v
}

fn same_xml(profile: &str, xml: &str, with_nets: bool) {
    let ours = json(&["--profile", profile]);
    let dump = json(&["--from", fixture(xml).to_str().unwrap()]);
    let (a, b) = (xml_facts(&ours, with_nets), xml_facts(&dump, with_nets));
    assert!(a.len() > 8, "{profile}: {a:?}");
    assert_eq!(a, b, "{profile} against {xml}");
}

#[test]
fn aws_p5_reproduces_aws_ofi_nccl_topology_file() {
    same_xml("aws-p5", "fixtures/xml/aws-p5-48xl-topo.xml", true);
    let t = json(&["--profile", "aws-p5"]);
    assert_eq!(t["nics"].as_array().unwrap().len(), 32);
}

#[test]
fn aws_p4d_reproduces_aws_ofi_nccl_topology_file() {
    same_xml("aws-p4d", "fixtures/xml/aws-p4d-24xl-topo.xml", false);
}

#[test]
fn azure_nd_v5_profiles_reproduce_the_azhpc_topology_file() {
    for p in ["azure-nd-h100-v5", "azure-nd-h200-v5"] {
        same_xml(p, "fixtures/xml/azure-ndv5-topo.xml", false);
    }
}

#[test]
fn profile_list_prints_every_builtin_with_its_description() {
    let text = show(&["--profile", "list"]);
    let names = topo_source::profile::builtin_names();
    assert_eq!(text.lines().count(), names.len(), "{text}");
    for (line, name) in text.lines().zip(&names) {
        let (n, d) = line.split_once("  ").unwrap();
        assert_eq!(n, *name);
        assert!(d.trim().len() > 20, "{line}");
    }
    let j = json(&["--profile", "LIST"]);
    crate::util::assert_valid(&j, "topo show --profile list --format json");
    assert_eq!(j["profiles"].as_array().unwrap().len(), names.len());
    assert_eq!(j["profiles"][0]["name"], names[0]);
}

#[test]
fn completions_offer_every_profile_name() {
    let out = topo().args(["completions", "bash"]).output().unwrap();
    let script = String::from_utf8(out.stdout).unwrap();
    for n in topo_source::profile::builtin_names() {
        assert!(script.contains(n), "bash completion lacks {n}");
    }
}

/// `(bus number, GPU name)` of each `# Rank` line of an nccl-tests result, as all_reduce_perf
/// prints them (`device 0 [0x1a] NVIDIA GeForce RTX 4090`).
fn rank_gpus(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| l.trim_start_matches(['#', ' ']).starts_with("Rank"))
        .filter_map(|l| {
            let (_, tail) = l.split_once("[0x")?;
            let (bus, name) = tail.split_once(']')?;
            Some((bus.to_ascii_lowercase(), name.trim().to_string()))
        })
        .collect()
}

/// The profiles written from the shared results' own words (issue 43) hold the GPUs those
/// results ran on: each rank line's bus number and name is the profile's GPU at the NVML
/// index the result's `--env CUDA_VISIBLE_DEVICES` in bench/fidelity/sources.yaml names (read
/// in place; skipped when the shared set is absent).
#[test]
fn rtx_box_profiles_hold_the_gpus_their_results_print() {
    for (result, profile, visible) in [
        (
            "nccl-tests/repos/kalavai-rtx4090-1x2-pcie-docker-allreduce.txt",
            "kalavai-rtx4090",
            [0, 1],
        ),
        (
            "nccl-tests/repos/kalavai-rtx4090-1x2-pcie-k8s-allreduce.txt",
            "kalavai-rtx4090",
            [0, 4],
        ),
        (
            "nccl-tests/threads/nccl-340-rtx2080ti-1x2-nvlink-bridge-allreduce-EXCERPT.txt",
            "2x-rtx2080ti-nvbridge",
            [0, 1],
        ),
    ] {
        let Some(path) = crate::util::realdata(result) else {
            continue;
        };
        let ranks = rank_gpus(&std::fs::read_to_string(path).unwrap());
        assert_eq!(ranks.len(), 2, "{result}");
        let t = json(&["--profile", profile]);
        let gpus = t["gpus"].as_array().unwrap();
        for ((bus, name), dev) in ranks.iter().zip(visible) {
            let g = &gpus[dev];
            assert_eq!(g["dev"], dev, "{profile}");
            assert_eq!(
                g["busid"].as_str().unwrap(),
                format!("0000:{bus}:00.0"),
                "{result} rank on {bus}"
            );
            assert_eq!(g["name"].as_str(), Some(name.as_str()), "{result}");
        }
        // Both state what their thread and manifest say of the link between the two.
        let lanes: Vec<u64> = visible
            .iter()
            .map(|&d| gpus[d]["nvlink"]["lanes"].as_u64().unwrap())
            .collect();
        let want = if profile == "2x-rtx2080ti-nvbridge" {
            2
        } else {
            0
        };
        assert_eq!(lanes, [want, want], "{profile}");
    }
}

/// nccl#340's desktop as its thread states it: PCIe 3.0 x8 each, one i5-9400F socket
/// (Coffee Lake: CPUID family 6 model 158), the bridge's 2 lanes at NCCL's sm 7x rate.
#[test]
fn the_rtx2080ti_profile_states_its_thread() {
    let t = json(&["--profile", "2x-rtx2080ti-nvbridge"]);
    for g in t["gpus"].as_array().unwrap() {
        assert_eq!(g["sm"], 75);
        assert_eq!(
            (&g["pcie"]["generation"], &g["pcie"]["width"]),
            (&3.into(), &8.into())
        );
        assert_eq!(g["nvlink"]["bw_gbps"], 40.0);
    }
    let numa = t["numa"].as_array().unwrap();
    assert_eq!(numa.len(), 1, "{numa:?}");
    let text = show(&["--profile", "2x-rtx2080ti-nvbridge"]);
    assert!(text.contains("family 6 model 158"), "{text}");
    // A seated bridge is what its board gives: no degraded-NVLink verdict.
    assert!(!text.contains("fewer NVLinks"), "{text}");
}
