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
