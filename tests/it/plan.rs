//! `topo plan` end to end: the real binary on built-in profiles and real topology files, with
//! the environment cleared of NCCL_* variables (only PATH is kept) so the host cannot leak into
//! the results. Every test passes `--nccl-version` except the one about the default version.
//!
//! Expected figures come from the reference's worked examples (nccl-model.md 5.8, 7.3, 7.4, 7.9)
//! and its per-version tables; each assertion says which rule it checks.

use crate::util::{fixture, topo_clean_env as topo};
use serde_json::Value;
use std::path::PathBuf;
use topo_source::{SourceSpec, load, profile};

const V: &str = "2.28";

/// Runs `topo plan ARGS`, expects success, returns stdout.
fn plan(args: &[&str]) -> String {
    let out = topo().arg("plan").args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "topo plan {args:?} failed ({:?}):\n{stderr}",
        out.status.code()
    );
    stdout
}

fn plan_json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    // The per-pair listing too: most checks here are about single connections.
    a.extend(["--format", "json", "--transports", "pairs"]);
    let s = plan(&a);
    let v = serde_json::from_str(&s).unwrap_or_else(|e| panic!("{args:?}: bad JSON: {e}\n{s}"));
    crate::util::assert_valid(&v, &format!("topo plan {args:?}"));
    v
}

/// `topo plan ARGS --format json` with the default `--transports classes`.
fn plan_json_classes(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    serde_json::from_str(&plan(&a)).unwrap()
}

#[test]
fn transports_are_grouped_by_class_and_cover_every_pair_once() {
    let args = ["--profile", "dgx-h100", "--nodes", "3", "--nccl-version", V];
    let j = plan_json_classes(&args);
    assert!(j.get("transport_pairs").is_none(), "pairs only on request");
    let reasons = j["reasons"].as_array().unwrap();
    let uniq: std::collections::BTreeSet<&str> =
        reasons.iter().map(|r| r.as_str().unwrap()).collect();
    assert_eq!(uniq.len(), reasons.len(), "each reason once");
    let pairs = plan_json(&args);
    let listing = pairs["transport_pairs"].as_array().unwrap();
    let mut covered = std::collections::BTreeMap::new();
    for c in j["transports"].as_array().unwrap() {
        let ps = c["pairs"].as_array().unwrap();
        assert_eq!(u(&c["count"]) as usize, ps.len());
        let reason = reasons[u(&c["reason"]) as usize].as_str().unwrap();
        for p in ps {
            let key = (u(&p[0]), u(&p[1]));
            assert!(covered.insert(key, (c, reason)).is_none(), "{key:?} twice");
        }
    }
    assert_eq!(covered.len(), listing.len());
    for t in listing {
        let (c, reason) = covered[&(u(&t["from"]), u(&t["to"]))];
        assert_eq!(t["transport"], c["transport"]);
        assert_eq!(t["path"], c["path"]);
        assert_eq!(t["nic"], c["nic"]);
        assert_eq!(t["anomaly"], c["anomaly"]);
        assert_eq!(t["reason"].as_str().unwrap(), reason);
    }
    // Identical hosts add pairs to the classes, not classes: the document grows with the
    // GPUs, and the reasons are stated once however many hosts there are.
    let more = plan_json_classes(&["--profile", "dgx-h100", "--nodes", "6", "--nccl-version", V]);
    assert_eq!(
        more["transports"].as_array().unwrap().len(),
        j["transports"].as_array().unwrap().len()
    );
    assert_eq!(more["reasons"], j["reasons"]);
}

/// Runs `topo plan ARGS`, expects exit 2 with one `error:` line and one `hint:` line.
fn plan_err(args: &[&str]) -> String {
    let out = topo().arg("plan").args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "topo plan {args:?}:\n{stderr}");
    assert!(out.stdout.is_empty(), "{args:?} wrote to stdout on error");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{args:?}: want error + hint:\n{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(lines[1].starts_with("hint: "), "{stderr}");
    stderr
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// Equal as the document can say it: GB/s are written rounded to 0.1, us to 0.01.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.1
}

/// `costs[func][algo][proto]` as (bw_gbps, lat_us), None when disabled.
fn cost(j: &Value, func: &str, algo: &str, proto: &str) -> Option<(f64, f64)> {
    let c = &j["costs"][func][algo][proto];
    if c.is_null() {
        return None;
    }
    Some((f(&c["bw_gbps"]), f(&c["lat_us"])))
}

fn table_choices(j: &Value) -> Vec<(u64, String, String)> {
    j["table"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                u(&r["bytes"]),
                r["algo"].as_str().unwrap().to_string(),
                r["proto"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

const H100_LINE: &str = "24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer";

// ---------------------------------------------------------------------------------------------
// 1. The headline: 8 GPUs on NVSwitch.

#[test]
fn hgx_h200_and_dgx_h100_reproduce_the_logged_channel_line() {
    for p in ["hgx-h200", "dgx-h100"] {
        let text = plan(&[
            "--profile",
            p,
            "--nccl-version",
            V,
            "-b",
            "8",
            "-e",
            "1G",
            "-f",
            "8",
        ]);
        assert!(text.contains(H100_LINE), "{p}:\n{text}");
        // Reference 5.8: ring 12 x 30 GB/s, duplicated by the postset to 24 identical rings.
        assert!(
            text.contains("Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1"),
            "{p}"
        );
        assert!(text.contains("Channel 00-23/24 : 0 1 2 3 4 5 6 7"), "{p}");
        // AllReduce: an LL variant for small sizes, NVLS for large, and the crossover is named.
        let small = text
            .lines()
            .find(|l| l.trim_start().starts_with("8 "))
            .unwrap();
        assert!(small.contains(" LL "), "{p}: {small}");
        let large = text
            .lines()
            .find(|l| l.trim_start().starts_with("1073741824 "))
            .unwrap();
        assert!(
            large.contains("NVLS") && large.contains("Simple"),
            "{large}"
        );
        assert!(
            text.contains("crossover: Ring/LL -> NVLS/Simple at 1144836 B (1.1M)"),
            "{p}:\n{text}"
        );
    }
}

#[test]
fn hgx_h200_json_has_every_contract_field_with_the_right_types() {
    let j = plan_json(&[
        "--profile",
        "hgx-h200",
        "--nccl-version",
        V,
        "-b",
        "8",
        "-e",
        "1G",
        "-f",
        "8",
    ]);
    assert_eq!(j["schema"], "topo.plan/v3");
    assert_eq!(j["nccl_version"], "2.28");
    assert_eq!(u(&j["nranks"]), 8);
    assert_eq!(u(&j["nnodes"]), 1);
    let ch = &j["channels"];
    for (k, want) in [
        ("coll", 24),
        ("nvls", 16),
        ("collnet", 24),
        ("p2p", 32),
        ("p2p_per_peer", 32),
    ] {
        assert_eq!(u(&ch[k]), want, "channels.{k}");
    }
    for g in ["ring", "tree", "nvls", "collnet"] {
        assert!(j["graphs"].get(g).is_some(), "graphs.{g} missing");
    }
    // CollNet needs a plugin and several nodes: null, not absent.
    assert!(j["graphs"]["collnet"].is_null());
    for g in ["ring", "tree", "nvls"] {
        let gr = &j["graphs"][g];
        for k in ["pattern", "type_intra", "type_inter"] {
            assert!(gr[k].is_string(), "graphs.{g}.{k}");
        }
        for k in ["nchannels", "bw_intra", "bw_inter"] {
            assert!(gr[k].is_number(), "graphs.{g}.{k}");
        }
        assert!(gr["channels"].is_array(), "graphs.{g}.channels");
    }
    assert_eq!(j["graphs"]["ring"]["pattern"], "ring");
    assert_eq!(u(&j["graphs"]["ring"]["nchannels"]), 12);
    assert!(close(f(&j["graphs"]["ring"]["bw_intra"]), 30.0));
    assert_eq!(j["graphs"]["ring"]["type_intra"], "NVL");
    assert_eq!(j["graphs"]["tree"]["pattern"], "balanced_tree");
    // NVLS graph: one head per GPU, 40 GB/s intra, 60 inter after pass 2 (reference 5.8).
    assert_eq!(u(&j["graphs"]["nvls"]["nchannels"]), 8);
    assert!(close(f(&j["graphs"]["nvls"]["bw_intra"]), 40.0));
    assert!(close(f(&j["graphs"]["nvls"]["bw_inter"]), 60.0));
    assert_eq!(j["graphs"]["nvls"]["channels"][3], serde_json::json!([3]));

    let rings = j["rings"].as_array().unwrap();
    assert_eq!(rings.len(), 24);
    assert!(
        rings
            .iter()
            .all(|r| r == &serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7]))
    );
    let trees = j["trees"].as_array().unwrap();
    assert_eq!(trees.len(), 24);
    // A chain inside one node: rank 0 is the root with child 1.
    assert_eq!(trees[0]["up"][0], -1);
    assert_eq!(trees[0]["up"][1], 0);
    assert_eq!(trees[0]["down"].as_array().unwrap().len(), 3 * 8);
    let down0 = &trees[0]["down"].as_array().unwrap()[..3];
    assert_eq!(down0, &[1, -1, -1].map(serde_json::Value::from)[..]);

    let tr = j["transport_pairs"].as_array().unwrap();
    assert_eq!(tr.len(), 56);
    for t in tr {
        assert!(t["from"].is_u64() && t["to"].is_u64());
        assert_eq!(t["transport"], "P2P/CUMEM");
        assert!(t["reason"].as_str().unwrap().contains("NVL"), "{t}");
    }

    // Reference 7.9: the AllReduce row of NCCL's TUNING table on an 8-GPU Hopper board.
    for (algo, proto, bw, lat) in [
        ("tree", "ll", 43.6, 15.2),
        ("tree", "ll128", 128.8, 31.5),
        ("tree", "simple", 165.6, 64.4),
        ("ring", "ll", 80.6, 15.0),
        ("ring", "ll128", 189.3, 40.6),
        ("ring", "simple", 205.7, 56.0),
        ("nvls", "simple", 272.0, 25.0),
    ] {
        let (b, l) = cost(&j, "allreduce", algo, proto).unwrap();
        assert!(close(b, bw) && close(l, lat), "{algo}/{proto}: {b}/{l}");
    }
    // Disabled cells are null: CollNet without a plugin, NVLS LL, NVLSTree on one node, and
    // Tree for AllGather (Ring, NVLS, CollNetDirect, PAT only).
    assert!(j["costs"]["allreduce"]["collnetdirect"]["simple"].is_null());
    assert!(j["costs"]["allreduce"]["nvls"]["ll"].is_null());
    assert!(j["costs"]["allreduce"]["nvlstree"]["simple"].is_null());
    assert!(j["costs"]["allgather"]["tree"]["simple"].is_null());

    let table = j["table"].as_array().unwrap();
    assert_eq!(table.len(), 10);
    for r in table {
        assert_eq!(r["collective"], "allreduce");
        assert!(r["bytes"].is_u64());
        assert!(r["algo"].is_string() && r["proto"].is_string());
        assert!(r["nchannels"].is_u64());
        for k in ["time_us", "algbw_gbps", "busbw_gbps"] {
            assert!(r[k].is_f64(), "table.{k} = {}", r[k]);
        }
        // busbw = algbw x 2(n-1)/n for AllReduce (nccl-tests), each rounded to 0.1 GB/s.
        assert!((f(&r["busbw_gbps"]) - f(&r["algbw_gbps"]) * 14.0 / 8.0).abs() < 0.15);
    }
    let last = table.last().unwrap();
    assert_eq!(u(&last["bytes"]), 1 << 30);
    assert_eq!(last["algo"], "NVLS");
    assert_eq!(u(&last["nchannels"]), 16);
    // time = 25 us + 1 GiB / (1000 x 272 GB/s)
    assert!((f(&last["time_us"]) - (25.0 + (1u64 << 30) as f64 / 272_000.0)).abs() < 0.01);
    assert!(
        j["env"].as_array().unwrap().is_empty(),
        "no NCCL_* variable was set"
    );
}

#[test]
fn dgx_a100_gives_24_coll_channels_and_no_nvls() {
    // 12 NVLink lanes x 20 GB/s = 240 GB/s per GPU: ring 6 x 40, duplicated to 12 x 20, tree
    // 12 x 20, postset doubles to 24 (reference 5.8, last line). The 6 NVSwitch chips merge
    // into one NVS node and the storage NICs do not enter a single-node search.
    let j = plan_json(&[
        "--profile",
        "dgx-a100",
        "--nccl-version",
        V,
        "-b",
        "1M",
        "-e",
        "1M",
    ]);
    assert_eq!(
        j["channels"]["log_line"],
        "24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer"
    );
    assert_eq!(u(&j["graphs"]["ring"]["nchannels"]), 12);
    assert!(close(f(&j["graphs"]["ring"]["bw_intra"]), 20.0));
    assert_eq!(u(&j["graphs"]["tree"]["nchannels"]), 12);
    // sm80 has no NVLS: no graph, every NVLS cell null.
    assert!(j["graphs"]["nvls"].is_null());
    assert!(cost(&j, "allreduce", "nvls", "simple").is_none());
    // Ampere reads P2P buffers over NVLink.
    assert!(
        j["transport_pairs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["read"] == true)
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Every fixture and profile produces a plan.

fn xml_fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixture("fixtures/xml"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .filter(|p| !p.to_string_lossy().contains("TRUNCATED"))
        .collect();
    v.sort();
    assert!(v.len() >= 8, "{v:?}");
    v
}

/// Skeleton files (GPUs by PCI class only, or a hand-written `<gpu>` without `<nvlink>`) leave
/// NVLink to NCCL's run-time detection; a plan of the file alone would be a PCIe-only machine.
const NVLINK_UNKNOWN: &[&str] = &[
    "aws-p4d-24xl-topo.xml",
    "aws-p5-48xl-topo.xml",
    "azure-ndv4-topo.xml",
    "azure-ndv5-topo.xml",
];

fn check_plan(j: &Value, what: &str, nodes: usize) {
    assert_eq!(u(&j["nnodes"]), nodes as u64, "{what}");
    let nranks = u(&j["nranks"]) as usize;
    assert!(nranks >= nodes, "{what}");
    assert!(u(&j["channels"]["coll"]) >= 1, "{what}");
    assert_eq!(
        j["rings"].as_array().unwrap().len() as u64,
        u(&j["channels"]["coll"]),
        "{what}"
    );
    for r in j["rings"].as_array().unwrap() {
        let mut ranks: Vec<u64> = r.as_array().unwrap().iter().map(u).collect();
        ranks.sort();
        assert_eq!(
            ranks,
            (0..nranks as u64).collect::<Vec<_>>(),
            "{what}: a ring visits every rank once"
        );
    }
    let table = j["table"].as_array().unwrap();
    assert!(!table.is_empty(), "{what}");
    for r in table {
        assert!(
            // One rank (gh200 on one node) moves nothing: NCCL's single-rank path is a copy.
            (nranks == 1 || f(&r["time_us"]) > 0.0) && f(&r["busbw_gbps"]) >= 0.0,
            "{what}"
        );
    }
    let inter = j["transport_pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["inter_node"] == true)
        .count();
    assert_eq!(
        inter > 0,
        nodes > 1,
        "{what}: NET between nodes exactly when there are several"
    );
}

#[test]
fn every_xml_fixture_plans_or_fails_clearly() {
    for p in xml_fixtures() {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let path = p.to_string_lossy().into_owned();
        if NVLINK_UNKNOWN.contains(&name.as_str()) {
            let e = plan_err(&["--from", &path, "--nccl-version", V]);
            assert!(
                e.contains("NVLink is unknown for 8 of 8 GPU(s)"),
                "{name}: {e}"
            );
            assert!(e.contains("NCCL") && e.contains("--profile"), "{e}");
            continue;
        }
        for nodes in [1usize, 2, 16] {
            let n = nodes.to_string();
            let j = plan_json(&[
                "--from",
                &path,
                "--nodes",
                &n,
                "--nccl-version",
                V,
                "-b",
                "1M",
                "-e",
                "1M",
            ]);
            check_plan(&j, &format!("{name} x{nodes}"), nodes);
        }
    }
    // A cut dump plans the part before the cut, and says where the file stops.
    let j = plan_json(&[
        "--from",
        &fixture("fixtures/xml/nccl-tests-256-h200-baremetal-dump-TRUNCATED.xml").to_string_lossy(),
        "--nccl-version",
        V,
    ]);
    assert_eq!(j["source"]["cut"], "line 53 column 1", "{}", j["source"]);
    assert!(
        j["warnings"].to_string().contains("the file is cut here"),
        "{}",
        j["warnings"]
    );
}

#[test]
fn every_builtin_profile_plans_on_1_2_and_16_nodes() {
    let names = profile::builtin_names();
    assert!(names.len() >= 7, "{names:?}");
    for p in names {
        for nodes in [1usize, 2, 16] {
            let n = nodes.to_string();
            let j = plan_json(&[
                "--profile",
                p,
                "--nodes",
                &n,
                "--nccl-version",
                V,
                "-b",
                "1M",
                "-e",
                "1M",
            ]);
            // NVL72 trays fill one 72-GPU NVLink domain: NCCL counts each domain's clique
            // as one node (MNNVL, docs/plan.md), so up to 18 trays are one node.
            // 8x-rtx-pro-6000: a 400G NIC on every switch beats the inter-socket link, so
            // NCCL (ncclTopoCheckNet) plans each socket's 4 GPUs as a node (docs/profiles.md).
            let nccl_nodes = if p.ends_with("-nvl72") || p == "azure-nd-gb200-v6" {
                (nodes * 4).div_ceil(72)
            } else if p == "8x-rtx-pro-6000" {
                nodes * 2
            } else {
                nodes
            };
            check_plan(&j, &format!("{p} x{nodes}"), nccl_nodes);
            let per_node = u(&j["nranks"]) as usize / nccl_nodes;
            assert_eq!(
                j["ranks_per_node"].as_array().unwrap().len(),
                nccl_nodes,
                "{p} x{nodes}"
            );
            // gh200 is one superchip: one GPU per node.
            let min = if p == "gh200" { 1 } else { 2 };
            assert!(per_node >= min, "{p}");
        }
    }
}

/// Captured machines (`topo snapshot`) in fixtures/snapshots: a plan where the capture has
/// GPUs with known NVLink, a clear refusal where it has none.
#[test]
fn every_snapshot_fixture_plans_or_fails_clearly() {
    let dir = fixture("fixtures/snapshots");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        let s = p.to_string_lossy().into_owned();
        if !(p.is_dir() || s.ends_with(".tar.gz") || s.ends_with(".tgz")) {
            continue;
        }
        let Ok(t) = load(&SourceSpec {
            from: Some(p.clone()),
            ..Default::default()
        }) else {
            continue;
        };
        let gpus = t.gpus();
        if gpus.is_empty() {
            let e = plan_err(&["--from", &s, "--nccl-version", V]);
            assert!(e.contains("no GPU"), "{s}: {e}");
        } else if gpus.iter().any(|&g| {
            matches!(
                t.gpu(g).map(|x| &x.nvlink),
                Some(topo_model::NvlinkInfo::Unknown(_))
            )
        }) {
            let e = plan_err(&["--from", &s, "--nccl-version", V]);
            assert!(e.contains("NVLink is unknown"), "{s}: {e}");
        } else {
            for nodes in [1usize, 2] {
                let n = nodes.to_string();
                let j = plan_json(&[
                    "--from",
                    &s,
                    "--nodes",
                    &n,
                    "--nccl-version",
                    V,
                    "-b",
                    "1M",
                    "-e",
                    "1M",
                ]);
                check_plan(&j, &format!("{s} x{nodes}"), nodes);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Snapshots of the text plan (short size range). Read them: they are checked by eye too.

fn snap_args<'a>(src: &'a [&'a str]) -> Vec<&'a str> {
    let mut a = src.to_vec();
    a.extend(["--nccl-version", V, "-b", "8", "-e", "1G", "-f", "8"]);
    a
}

#[test]
fn snapshot_hgx_h200_1_node() {
    insta::assert_snapshot!(plan(&snap_args(&["--profile", "hgx-h200"])));
}

#[test]
fn snapshot_hgx_h200_2_nodes() {
    insta::assert_snapshot!(plan(&snap_args(&["--profile", "hgx-h200", "--nodes", "2"])));
}

#[test]
fn snapshot_hgx_h200_16_nodes() {
    insta::assert_snapshot!(plan(&snap_args(&[
        "--profile",
        "hgx-h200",
        "--nodes",
        "16"
    ])));
}

#[test]
fn snapshot_dgx_a100() {
    insta::assert_snapshot!(plan(&snap_args(&["--profile", "dgx-a100"])));
}

#[test]
fn snapshot_pcie_8x_l40s() {
    insta::assert_snapshot!(plan(&snap_args(&["--profile", "pcie-8x-l40s"])));
}

#[test]
fn snapshot_rtx4090_pair_xml() {
    // A path relative to the package root (the tests' working directory): the heading wraps
    // at the width, so an absolute path would make the layout depend on the checkout's place.
    let text = plan(&snap_args(&[
        "--from",
        "fixtures/xml/rwkvinllama-2x-rtx4090-cx4.xml",
    ]));
    insta::assert_snapshot!(text);
}

#[test]
fn snapshot_rtxa6000_nvlink_pair_xml() {
    // Relative to the package root, so the wrapped heading does not depend on the checkout.
    let text = plan(&snap_args(&[
        "--from",
        "fixtures/xml/nccl-miner-2x-rtxa6000-nvlink-bridge.xml",
    ]));
    insta::assert_snapshot!(text);
}

#[test]
fn snapshot_ibm_cloud_h100_xml() {
    // A real NCCL dump of a virtualised 8 x H100 (x1 bridges, width 0): NVLink known.
    // Relative to the package root, so the wrapped heading does not depend on the checkout.
    let text = plan(&snap_args(&[
        "--from",
        "fixtures/xml/ibm-cloud-gx3d-h100-topo.xml",
    ]));
    insta::assert_snapshot!(text);
}

#[test]
fn snapshot_aws_p4d_xml_is_refused() {
    // Relative to the package root, so the wrapped error does not depend on the checkout.
    let e = plan_err(&[
        "--from",
        "fixtures/xml/aws-p4d-24xl-topo.xml",
        "--nccl-version",
        V,
    ]);
    insta::assert_snapshot!(e);
}

// ---------------------------------------------------------------------------------------------
// 3. Environment what-ifs.

#[test]
fn p2p_disable_and_p2p_level_loc_refuse_nvlink_p2p_and_say_why() {
    for (env, var) in [
        ("NCCL_P2P_DISABLE=1", "NCCL_P2P_DISABLE"),
        ("NCCL_P2P_LEVEL=LOC", "NCCL_P2P_LEVEL"),
    ] {
        let args = [
            "--profile",
            "hgx-h200",
            "--nccl-version",
            V,
            "-b",
            "1M",
            "-e",
            "1M",
            "--env",
            env,
        ];
        let j = plan_json(&args);
        let tr = j["transport_pairs"].as_array().unwrap();
        // No pair keeps P2P. Pairs go SHM, or NET where both GPUs reach a PIX NIC (50 GB/s)
        // faster than their GPU-GPU path now routed through the CPU (ncclTopoCheckNet);
        // GPUs only NET connects fall into different NCCL domains, which NCCL counts as
        // nodes (init.cc numbers nodes by each ring's first GPU).
        assert!(j["nnodes"].as_u64().unwrap() > 1, "{env}");
        let shm = tr.iter().filter(|t| t["transport"] == "SHM").count();
        let net = tr.iter().filter(|t| t["transport"] == "NET/IB").count();
        assert_eq!(shm + net, tr.len(), "{env}");
        assert!(net > 0, "{env}");
        assert!(shm > 0, "{env}");
        for t in tr {
            let why = t["reason"].as_str().unwrap();
            assert!(why.contains(var), "{env}: {why}");
            assert!(
                t["anomaly"].is_string(),
                "{env}: NVLink pair off P2P is an anomaly"
            );
        }
        let e = j["env"].as_array().unwrap();
        let ent = e.iter().find(|x| x["name"] == var).unwrap();
        let effect = ent["effect"].as_str().unwrap();
        assert!(
            effect.contains(&format!(
                "{shm} of {} GPU pairs within a host use SHM and {net} use NET",
                tr.len()
            )),
            "{effect}"
        );
        let text = plan(&args);
        assert!(
            text.contains("anomaly: SHM between NVLink-connected GPUs"),
            "{text}"
        );
        assert!(text.contains(&format!("{env}: ")), "{text}");
    }
}

#[test]
fn pcie_gpus_across_sockets_use_shm_without_an_anomaly() {
    let j = plan_json(&[
        "--profile",
        "pcie-8x-l40s",
        "--nccl-version",
        V,
        "-b",
        "1M",
        "-e",
        "1M",
    ]);
    let tr = j["transport_pairs"].as_array().unwrap();
    let shm: Vec<&Value> = tr.iter().filter(|t| t["transport"] == "SHM").collect();
    assert_eq!(shm.len(), 40);
    for t in &shm {
        let why = t["reason"].as_str().unwrap();
        assert!(why.contains("exceeds the P2P level PXB"), "{why}");
        assert!(matches!(t["path"].as_str(), Some("PHB" | "SYS")), "{t}");
        assert!(t["anomaly"].is_null());
    }
    // GPU pairs under one PCIe switch keep P2P.
    assert_eq!(
        tr.iter().filter(|t| t["transport"] == "P2P/CUMEM").count(),
        8
    );
    assert!(tr.iter().all(|t| t["anomaly"].is_null()));
    // ... as far as a profile can tell: NCCL also asks NVML, which a profile cannot answer.
    let w = j["warnings"].as_array().unwrap();
    assert!(
        w.iter().any(|x| x
            .as_str()
            .unwrap()
            .starts_with("P2P over PCIe for 8 GPU pair(s) assumes")),
        "{w:?}"
    );
}

#[test]
fn rtx4090_pair_gets_p2p_by_the_rules_with_the_nvml_caveat() {
    // Two GPUs on different NUMA nodes of an AMD host: 2.23+ sets the P2P level to SYS for AMD
    // CPUs with at most 2 GPUs, so the topology rules allow P2P over SYS (2.18-2.22: SYS by
    // default on AMD). The RTX 4090's driver refuses peer access (the built-in table, issue
    // 10), so NCCL falls back to SHM; stated otherwise (--p2p on), the rules give P2P and the
    // plan says it rests on the driver allowing it.
    let p = fixture("fixtures/xml/rwkvinllama-2x-rtx4090-cx4.xml");
    for v in ["2.18", "2.28"] {
        let args = [
            "--from",
            &p.to_string_lossy(),
            "--nccl-version",
            v,
            "-b",
            "1M",
            "-e",
            "1M",
        ];
        let j = plan_json(&args);
        let tr = j["transport_pairs"].as_array().unwrap();
        assert_eq!(tr.len(), 2);
        for t in tr {
            assert_eq!(t["transport"], "SHM", "{v}: {t}");
            assert!(
                t["reason"]
                    .as_str()
                    .unwrap()
                    .contains("GeForce RTX 4090 (0x2684)"),
                "{t}"
            );
        }
        let mut on = args.to_vec();
        on.extend(["--p2p", "on"]);
        let j = plan_json(&on);
        for t in j["transport_pairs"].as_array().unwrap() {
            assert_eq!(t["path"], "SYS");
            assert!(
                t["transport"].as_str().unwrap().starts_with("P2P/"),
                "{v}: {t}"
            );
            assert!(
                t["reason"]
                    .as_str()
                    .unwrap()
                    .contains("within the P2P level SYS"),
                "{t}"
            );
        }
        let w = j["warnings"].as_array().unwrap();
        assert!(
            w.iter().any(|x| x.as_str().unwrap().contains("RTX 4090")),
            "{w:?}"
        );
    }
    // NVLink boxes need no such caveat.
    let j = plan_json(&[
        "--profile",
        "hgx-h200",
        "--nccl-version",
        V,
        "-b",
        "1M",
        "-e",
        "1M",
    ]);
    assert!(j["warnings"].as_array().unwrap().is_empty());
}

#[test]
fn container_per_gpu_turns_every_pair_into_net() {
    let j = plan_json(&[
        "--profile",
        "hgx-h200",
        "--nccl-version",
        V,
        "-b",
        "1M",
        "-e",
        "1M",
        "--placement",
        "container-per-gpu",
    ]);
    assert_eq!(u(&j["nnodes"]), 8, "each container has its own host hash");
    let tr = j["transport_pairs"].as_array().unwrap();
    assert!(!tr.is_empty());
    assert!(
        tr.iter()
            .all(|t| t["transport"].as_str().unwrap().starts_with("NET"))
    );
}

#[test]
fn algo_and_proto_restrict_the_choices() {
    let base = [
        "--profile",
        "hgx-h200",
        "--nccl-version",
        V,
        "-b",
        "8",
        "-e",
        "1G",
        "-f",
        "8",
    ];
    for extra in [&["--env", "NCCL_ALGO=ring"][..], &["--algo", "ring"][..]] {
        let mut a = base.to_vec();
        a.extend(extra);
        let j = plan_json(&a);
        let c = table_choices(&j);
        assert!(c.iter().all(|(_, al, _)| al == "Ring"), "{extra:?}: {c:?}");
        // Large sizes fall back from NVLS to Ring Simple.
        assert_eq!(c.last().unwrap().2, "Simple");
        assert!(cost(&j, "allreduce", "nvls", "simple").is_none());
        let e = j["env"].as_array().unwrap();
        assert!(
            e.iter()
                .any(|x| x["name"] == "NCCL_ALGO" && x["effect"].is_string()),
            "{e:?}"
        );
    }
    let mut a = base.to_vec();
    a.extend(["--proto", "simple"]);
    let j = plan_json(&a);
    let c = table_choices(&j);
    assert!(c.iter().all(|(_, _, p)| p == "Simple"), "{c:?}");
    // NVLS Simple has the lowest Simple latency (25 us against Ring 56, Tree 64.4) and the
    // highest bandwidth: it wins everywhere.
    assert!(c.iter().all(|(_, a, _)| a == "NVLS"), "{c:?}");
}

#[test]
fn channel_variables_cap_channels_and_say_so() {
    let j = plan_json(&[
        "--profile",
        "hgx-h200",
        "--nccl-version",
        V,
        "-b",
        "1G",
        "-e",
        "1G",
        "--env",
        "NCCL_MAX_NCHANNELS=8",
        "--algo",
        "ring",
    ]);
    assert_eq!(u(&j["channels"]["coll"]), 8);
    assert_eq!(
        u(&j["table"][0]["nchannels"]),
        8,
        "Ring at 1 GiB runs on every coll channel"
    );
    let e = j["env"].as_array().unwrap();
    let ent = e
        .iter()
        .find(|x| x["name"] == "NCCL_MAX_NCHANNELS")
        .unwrap();
    assert!(
        ent["effect"]
            .as_str()
            .unwrap()
            .contains("without it: 24 coll channels"),
        "{ent}"
    );
}

#[test]
fn bad_nccl_algo_exits_2_naming_the_variable() {
    let e = plan_err(&[
        "--profile",
        "hgx-h200",
        "--nccl-version",
        V,
        "--env",
        "NCCL_ALGO=bogus",
    ]);
    assert!(e.contains("NCCL_ALGO") && e.contains("bogus"), "{e}");
}

#[test]
fn an_algorithm_the_topology_cannot_run_says_why() {
    let e = plan_err(&[
        "--profile",
        "hgx-h200",
        "--nccl-version",
        V,
        "--algo",
        "nvlstree",
    ]);
    assert!(
        e.contains("no algorithm/protocol available for allreduce"),
        "{e}"
    );
    assert!(e.contains("NVLSTree needs more than one node"), "{e}");
    let e = plan_err(&[
        "--profile",
        "dgx-a100",
        "--nccl-version",
        V,
        "--algo",
        "nvls",
    ]);
    assert!(e.contains("NVLS"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// 4. Versions: exactly the documented differences.

fn h200(version: &str) -> Value {
    plan_json(&[
        "--profile",
        "hgx-h200",
        "--nccl-version",
        version,
        "-b",
        "1M",
        "-e",
        "1M",
        "--collective",
        "all",
    ])
}

#[test]
fn nccl_versions_change_exactly_what_the_reference_says() {
    let vs = ["2.18", "2.21", "2.23", "2.27", "2.28", "2.30"];
    let js: Vec<Value> = vs.iter().map(|v| h200(v)).collect();
    for (v, j) in vs.iter().zip(&js) {
        assert_eq!(j["nccl_version"], *v);
        // Reference 5.8: identical channels for 2.18-2.30 (2.18 NVLink 20.0 x 18 = 360 GB/s
        // still fits 6 rings at 60, duplicated to 12 x 30).
        assert_eq!(u(&j["channels"]["coll"]), 24, "{v}");
        assert_eq!(u(&j["channels"]["nvls"]), 16, "{v}");
        assert_eq!(u(&j["graphs"]["ring"]["nchannels"]), 12, "{v}");
        assert!(close(f(&j["graphs"]["ring"]["bw_intra"]), 30.0), "{v}");
        // Unchanged in every version: Ring LL128/Simple and the tree bandwidths.
        let (b, l) = cost(j, "allreduce", "ring", "simple").unwrap();
        assert!(
            close(b, 205.7) && close(l, 56.0),
            "{v}: ring simple {b}/{l}"
        );
        assert!(
            close(cost(j, "allreduce", "ring", "ll128").unwrap().0, 189.3),
            "{v}"
        );
        assert!(
            close(cost(j, "allreduce", "tree", "simple").unwrap().0, 165.6),
            "{v}"
        );
    }
    let by = |v: &str| &js[vs.iter().position(|x| *x == v).unwrap()];

    // 2.18 log line has no collnet count.
    assert_eq!(
        by("2.18")["channels"]["log_line"],
        "24 coll channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer"
    );
    // Ring LL: 2.18-2.20 busBw x 1/4 for AllReduce and llMaxBw Hopper row 87.7 -> 87.7 x 8/14;
    // from 2.21 x 0.5 and 141 -> 80.6. AllGather: 2.18 x 1/3 -> min(87.7, 120) x 8/7.
    assert!(close(
        cost(by("2.18"), "allreduce", "ring", "ll").unwrap().0,
        87.7 * 8.0 / 14.0
    ));
    assert!(close(
        cost(by("2.21"), "allreduce", "ring", "ll").unwrap().0,
        80.57
    ));
    assert!(close(
        cost(by("2.18"), "allgather", "ring", "ll").unwrap().0,
        87.7 * 8.0 / 7.0
    ));
    // Tree Simple latency: 2.18 base 0 + 2 x 7 x 4.0; 2.19-2.22 hw 28 -> 392; 2.23+ 8.4 + 56.
    let tree_lat = |v: &str| cost(by(v), "allreduce", "tree", "simple").unwrap().1;
    assert!(close(tree_lat("2.18"), 56.0));
    assert!(close(tree_lat("2.21"), 392.0));
    for v in ["2.23", "2.27", "2.28", "2.30"] {
        assert!(close(tree_lat(v), 64.4), "{v}");
    }
    // PAT exists from 2.23 (a seventh algorithm in the cost table; unusable here: it needs one
    // rank per node).
    for v in ["2.18", "2.21"] {
        assert!(by(v)["costs"]["allgather"].get("pat").is_none(), "{v}");
    }
    for v in ["2.23", "2.27", "2.28", "2.30"] {
        assert!(by(v)["costs"]["allgather"].get("pat").is_some(), "{v}");
        assert!(
            by(v)["costs"]["allgather"]["pat"]["simple"].is_null(),
            "{v}"
        );
    }
    // NVLS AllReduce: 2.18 latency base 23; 2.21-2.27 min(bwIntra 40, bwInter 60) x 8 heads x 5/6
    // = 266.7; 2.28+ 40 x 0.85 x 7/8 x 2 = 59.5 -> x 8 x 8/14 = 272.0.
    let nvls = |v: &str| cost(by(v), "allreduce", "nvls", "simple").unwrap();
    assert!(close(nvls("2.18").0, 266.67) && close(nvls("2.18").1, 23.0));
    for v in ["2.21", "2.23", "2.27"] {
        assert!(
            close(nvls(v).0, 266.67) && close(nvls(v).1, 25.0),
            "{v}: {:?}",
            nvls(v)
        );
    }
    for v in ["2.28", "2.30"] {
        assert!(close(nvls(v).0, 272.0) && close(nvls(v).1, 25.0), "{v}");
    }
    // NVLS AllGather: none in 2.18; 2.21 x 5/6 = 266.7; 2.23-2.26 no bus->alg conversion for
    // non-Ring AllGather (320); 2.27 min(40 x 7/8, 60 x 0.9) x 8 = 280; 2.28 with the 0.85
    // efficiency and (nCh-1)/nCh: 208.25.
    assert!(cost(by("2.18"), "allgather", "nvls", "simple").is_none());
    for (v, bw) in [
        ("2.21", 266.67),
        ("2.23", 320.0),
        ("2.27", 280.0),
        ("2.28", 208.25),
        ("2.30", 208.25),
    ] {
        assert!(
            close(cost(by(v), "allgather", "nvls", "simple").unwrap().0, bw),
            "{v}"
        );
    }
    // And the choice follows: at 1 MiB AllReduce 2.21's Tree Simple latency (392 us) never wins.
    let row = |v: &str, func: &str| {
        by(v)["table"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["collective"] == func)
            .map(|r| {
                format!(
                    "{}/{}",
                    r["algo"].as_str().unwrap(),
                    r["proto"].as_str().unwrap()
                )
            })
            .unwrap()
    };
    for v in vs {
        assert_ne!(row(v, "allreduce"), "Tree/Simple", "{v}");
    }
}

#[test]
fn pat_exists_from_2_23_and_needs_one_rank_per_node() {
    // One container per GPU: 8 nodes of one rank, where PAT's auto mode turns it on.
    let args = |v: &'static str| {
        vec![
            "--profile",
            "hgx-h200",
            "--nccl-version",
            v,
            "--placement",
            "container-per-gpu",
            "--collective",
            "allgather",
            "-b",
            "8",
            "-e",
            "8",
        ]
    };
    // Tree graph 2 ch x 24 GB/s = 48: PAT x 0.85 in 2.23, x 0.75 later; latency 8 + log2(8) x
    // 14 / 3.5 + 8 x 2.8 = 42.4 us.
    for (v, bw) in [
        ("2.23", 40.8),
        ("2.27", 36.0),
        ("2.28", 36.0),
        ("2.30", 36.0),
    ] {
        let j = plan_json(&args(v));
        let (b, l) = cost(&j, "allgather", "pat", "simple").unwrap_or_else(|| panic!("{v}"));
        assert!(close(b, bw) && close(l, 42.4), "{v}: {b}/{l}");
    }
    let j = plan_json(&args("2.21"));
    assert!(j["costs"]["allgather"].get("pat").is_none());
}

// ---------------------------------------------------------------------------------------------
// 5. Output formats.

fn csv_rows(csv: &str) -> Vec<Vec<String>> {
    csv.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn tuner_csv_is_what_the_example_plugin_reads() {
    let args = [
        "--profile",
        "hgx-h200",
        "--nodes",
        "2",
        "--nccl-version",
        V,
        "--collective",
        "all",
        "-b",
        "8",
        "-e",
        "1G",
    ];
    let mut a = args.to_vec();
    a.extend(["--format", "tuner-csv"]);
    let csv = plan(&a);
    assert!(
        csv.starts_with("# topo plan: NCCL 2.28 model, 16 ranks on 2 node(s)"),
        "{csv}"
    );
    assert!(csv.contains(
        "# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff\n"
    ));
    assert!(csv.contains("NCCL_TUNER_CONFIG_FILE"));
    let rows = csv_rows(&csv);
    let j = plan_json(&args);
    let table = j["table"].as_array().unwrap();
    // Consecutive sizes with one choice are merged.
    assert!(
        rows.len() < table.len(),
        "{} rows for {} sizes",
        rows.len(),
        table.len()
    );
    let algos = [
        "tree",
        "ring",
        "collnet_direct",
        "collnet_chain",
        "nvls",
        "nvls_tree",
        "pat",
    ];
    let mut seen_nvls_tree = false;
    for func in [
        "broadcast",
        "reduce",
        "allgather",
        "reducescatter",
        "allreduce",
    ] {
        let fr: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == func).collect();
        assert!(!fr.is_empty(), "{func}");
        // Contiguous ranges from 0 to the largest size_t: the example plugin caps NCCL at one
        // channel for any size it has no row for.
        assert_eq!(fr[0][1], "0");
        assert_eq!(fr.last().unwrap()[2], u64::MAX.to_string());
        for w in fr.windows(2) {
            let hi: u64 = w[0][2].parse().unwrap();
            let lo: u64 = w[1][1].parse().unwrap();
            assert_eq!(lo, hi + 1, "{func}: {:?} then {:?}", w[0], w[1]);
            assert_ne!(
                (&w[0][3], &w[0][4], &w[0][5]),
                (&w[1][3], &w[1][4], &w[1][5]),
                "not merged"
            );
        }
        for r in &fr {
            assert_eq!(r.len(), 10, "{r:?}");
            assert!(algos.contains(&r[3].as_str()), "{r:?}");
            assert!(["ll", "ll128", "simple"].contains(&r[4].as_str()), "{r:?}");
            assert!(
                r[5].parse::<u32>().unwrap() >= 1,
                "explicit channels, never -1"
            );
            assert_eq!((r[6].as_str(), r[7].as_str()), ("2", "16"));
            assert_eq!((r[8].as_str(), r[9].as_str()), ("-1", "-1"));
            seen_nvls_tree |= r[3] == "nvls_tree";
        }
        // Each row matches the plan's choice at the sizes it covers.
        for t in table.iter().filter(|t| t["collective"] == func) {
            let b = u(&t["bytes"]);
            let r = fr
                .iter()
                .find(|r| r[1].parse::<u64>().unwrap() <= b && b <= r[2].parse::<u64>().unwrap())
                .unwrap();
            assert_eq!(
                r[3].replace('_', ""),
                t["algo"].as_str().unwrap().to_lowercase()
            );
            assert_eq!(r[4], t["proto"].as_str().unwrap().to_lowercase());
            assert_eq!(r[5], t["nchannels"].to_string());
        }
    }
    // Where the algorithm or protocol changes, a row starts at the exact crossover.
    let cross = j["crossovers"].as_array().unwrap();
    assert!(!cross.is_empty());
    for c in cross {
        let func = c["collective"].as_str().unwrap();
        let at = u(&c["bytes"]).to_string();
        assert!(
            rows.iter().any(|r| r[0] == func && r[1] == at),
            "{func}: no row starts at the crossover {at}\n{csv}"
        );
    }
    // Multi-node H200 AllReduce picks NVLSTree for large sizes: the plugin spells it nvls_tree
    // (it would read "nvlstree" as ring).
    assert!(seen_nvls_tree, "{csv}");
}

#[test]
fn nccl_graph_is_well_formed_graph_xml() {
    let xml = plan(&[
        "--profile",
        "hgx-h200",
        "--nodes",
        "2",
        "--nccl-version",
        V,
        "--format",
        "nccl-graph",
    ]);
    let mut r = quick_xml::Reader::from_str(&xml);
    let mut graphs = vec![];
    let mut depth = 0i32;
    let mut channels = 0;
    let mut nets = 0;
    loop {
        match r.read_event() {
            Ok(quick_xml::events::Event::Start(e)) => {
                depth += 1;
                match e.name().as_ref() {
                    "graph" => {
                        let attr = |k: &str| {
                            e.attributes()
                                .flatten()
                                .find(|a| a.key.as_ref() == k)
                                .map(|a| a.value.to_string())
                                .unwrap_or_default()
                        };
                        graphs.push((attr("id"), attr("pattern"), attr("nchannels")));
                    }
                    "channel" => channels += 1,
                    _ => {}
                }
            }
            Ok(quick_xml::events::Event::Empty(e)) if e.name().as_ref() == "net" => nets += 1,
            Ok(quick_xml::events::Event::End(_)) => depth -= 1,
            Ok(quick_xml::events::Event::Eof) => break,
            Err(e) => panic!("bad XML at {}: {e}\n{xml}", r.buffer_position()),
            _ => {}
        }
    }
    assert_eq!(depth, 0);
    assert!(xml.starts_with("<graphs version=\"1\">"), "{xml}");
    // id 0 ring (pattern 4), id 1 tree; 8 channels each on 2 nodes, entering and leaving by NET.
    assert!(
        graphs.contains(&("0".into(), "4".into(), "8".into())),
        "{graphs:?}"
    );
    assert!(
        graphs.iter().any(|g| g.0 == "1" && g.2 == "8"),
        "{graphs:?}"
    );
    assert!(channels >= 16);
    assert!(nets >= 32, "{nets} net elements");
}

#[test]
fn yaml_parses_to_the_same_document_as_json() {
    let args = [
        "--profile",
        "dgx-a100",
        "--nccl-version",
        V,
        "-b",
        "1K",
        "-e",
        "1M",
        "-f",
        "32",
    ];
    let mut a = args.to_vec();
    a.extend(["--format", "yaml"]);
    let y: Value = yaml_serde::from_str(&plan(&a)).unwrap();
    let j = plan_json(&args);
    assert_eq!(y["schema"], "topo.plan/v3");
    crate::util::assert_valid(&y, "plan as YAML");
    assert_eq!(y["channels"], j["channels"]);
    assert_eq!(y["rings"], j["rings"]);
    assert_eq!(
        y["table"].as_array().unwrap().len(),
        j["table"].as_array().unwrap().len()
    );
}

#[test]
fn output_file_gets_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    let p = path.to_string_lossy().into_owned();
    let out = plan(&[
        "--profile",
        "hgx-h200",
        "--nccl-version",
        V,
        "-e",
        "1M",
        "--format",
        "json",
        "-o",
        &p,
    ]);
    assert!(out.is_empty(), "nothing on stdout with -o");
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(j["schema"], "topo.plan/v3");
    // Text written to a file has no colour escapes even with --color always.
    let tpath = dir.path().join("plan.txt");
    let t = tpath.to_string_lossy().into_owned();
    topo()
        .args([
            "--color",
            "always",
            "plan",
            "--profile",
            "hgx-h200",
            "--nccl-version",
            V,
            "-e",
            "1M",
            "-o",
            &t,
        ])
        .assert()
        .success();
    let text = std::fs::read_to_string(&tpath).unwrap();
    assert!(text.contains(H100_LINE) && !text.contains('\x1b'));
}

#[test]
fn explain_traces_figures_to_rules_and_constants() {
    let text = plan(&[
        "--profile",
        "hgx-h200",
        "--nccl-version",
        V,
        "-b",
        "1M",
        "-e",
        "1M",
        "--explain",
    ]);
    assert!(text.contains("Cost cells (rule and constants behind each usable figure)"));
    assert!(
        text.contains("LL min(llMaxBw 141, 360 × 0.5) = 141"),
        "{text}"
    );
    assert!(text.contains("LL128 min(360 × 0.92, 12 ch × perChMaxRingLL128Bw 36.7) = 331.2"));
    assert!(text.contains("runner-up: "));
    assert!(text.contains("Predicted NCCL INFO lines"));
    assert!(
        text.contains("threadThresholds 8/8/64 | 64/8/64 | 512 | 512"),
        "{text}"
    );
    // The JSON carries the same traces.
    let j = plan_json(&[
        "--profile",
        "hgx-h200",
        "--nccl-version",
        V,
        "-b",
        "1M",
        "-e",
        "1M",
    ]);
    let lines = j["costs_explain"]["allreduce"]["ring"]["ll128"]
        .as_array()
        .unwrap();
    assert!(
        lines.iter().any(|l| l.as_str().unwrap().contains("0.92")),
        "{lines:?}"
    );
    assert!(
        j["table"][0]["explain"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().starts_with("time "))
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Bad input.

#[test]
fn bad_input_exits_2_with_one_error_and_a_hint() {
    let base = ["--profile", "hgx-h200", "--nccl-version", V];
    let cases: &[(&[&str], &str)] = &[
        (&["--collective", "bogus"], "unknown collective 'bogus'"),
        (
            &["--collective", "alltoall"],
            "alltoall has no NCCL cost model: NCCL runs it as point-to-point sends and receives",
        ),
        (&["-b", "1X"], "-b: "),
        (&["-b", "1G", "-e", "8"], "-b 1G is larger than -e 8"),
        (&["--placement", "weird"], "unknown placement 'weird'"),
        (&["--nodes", "0"], "--nodes must be at least 1"),
        (&["--env", "NOEQUALS"], "bad --env 'NOEQUALS'"),
    ];
    for (extra, want) in cases {
        let mut a = base.to_vec();
        a.extend(*extra);
        let e = plan_err(&a);
        assert!(e.contains(want), "{extra:?}: {e}");
    }
    let e = plan_err(&["--profile", "hgx-h200", "--nccl-version", "2.10"]);
    assert!(e.contains("2.10"), "{e}");
    let e = plan_err(&["--profile", "no-such-box", "--nccl-version", V]);
    assert!(e.contains("unknown profile 'no-such-box'"), "{e}");
}

#[test]
fn a_topology_without_gpus_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nogpu.xml");
    std::fs::write(
        &p,
        r#"<system version="1">
  <cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:01:00.0" class="0x020000" vendor="0x15b3" device="0x101b" link_speed="8.0 GT/s PCIe" link_width="16">
      <nic>
        <net name="mlx5_0" dev="0" speed="100000" port="1" guid="0x1" maxconn="131072" gdr="0"/>
      </nic>
    </pci>
  </cpu>
</system>
"#,
    )
    .unwrap();
    let e = plan_err(&["--from", &p.to_string_lossy(), "--nccl-version", V]);
    assert!(e.contains("the topology has no GPU to plan for"), "{e}");
}

/// The one test without `--nccl-version`: with the environment cleared there is no
/// LD_LIBRARY_PATH, so unless the system has libnccl in its default path the plan says it
/// falls back to 2.28 and why.
#[test]
fn default_version_says_where_it_came_from() {
    let text = plan(&["--profile", "hgx-h200", "-b", "1M", "-e", "1M"]);
    // The version line, joined again where it wrapped at the width.
    let mut head = text.lines().skip(1).take_while(|l| !l.is_empty());
    let mut line = head.next().unwrap().to_string();
    for l in head.take_while(|l| l.starts_with("    ")) {
        line = format!("{line} {}", l.trim());
    }
    let line = line.as_str();
    if line.contains("(found ") {
        assert!(line.starts_with("NCCL 2."), "{line}");
    } else {
        assert!(line.starts_with("NCCL 2.28 (default: "), "{line}");
        assert!(line.contains("no NCCL library could be loaded"), "{line}");
        assert!(
            line.contains("2.28 is what current PyTorch bundles"),
            "{line}"
        );
    }
}

#[test]
fn a_choice_that_changes_and_reverts_between_two_sizes_is_found() {
    // 2 x HGX H200, AllReduce: Tree/LL at 128K and Tree/LL128 at 256K, but in between the tree
    // correction factors let Ring/LL win for a while.
    let j = plan_json(&[
        "--profile",
        "hgx-h200",
        "--nodes",
        "2",
        "--nccl-version",
        V,
        "-b",
        "128K",
        "-e",
        "256K",
    ]);
    let c = table_choices(&j);
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].1.as_str(), c[0].2.as_str()), ("Tree", "LL"));
    assert_eq!((c[1].1.as_str(), c[1].2.as_str()), ("Tree", "LL128"));
    let x: Vec<(u64, String, String)> = j["crossovers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                u(&c["bytes"]),
                c["from"].as_str().unwrap().into(),
                c["to"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        x,
        vec![
            (203895, "Tree/LL".into(), "Ring/LL".into()),
            (244816, "Ring/LL".into(), "Tree/LL128".into())
        ]
    );
}

/// The JSON carries the model's numbers exactly (issue 27): every cost cell and every row's
/// times and bandwidths are written as the library's f64 (shortest round-trip form), not a
/// rounding of them. Checked on the text: serde_json's default parser may be 1 ulp off.
#[test]
fn json_numbers_are_the_models_f64() {
    let out = crate::util::topo_clean_env()
        .args([
            "plan",
            "--nccl-version",
            "2.28",
            "--format",
            "json",
            "--profile",
            "dgx-h100",
        ])
        .args(["--nodes", "2", "-b", "1K", "-e", "1G", "-f", "32"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let topo = topo_source::profile::load_builtin("dgx-h100")
        .unwrap()
        .replicate(2);
    let req = crate::util::allreduce_request(vec![1 << 10, 32 << 10, 1 << 20, 32 << 20, 1 << 30]);
    let (plan, _) = topo_nccl::plan_owned(topo, &req, Default::default()).unwrap();
    let written = |k: &str, v: f64| format!("\"{k}\": {}", serde_json::to_string(&v).unwrap());
    let cells = serde_json::to_value(&plan.costs).unwrap();
    let mut checked = 0;
    let mut unround = 0;
    for (_, algos) in cells.as_object().unwrap() {
        for (_, protos) in algos.as_object().unwrap() {
            for (_, cell) in protos.as_object().unwrap() {
                for k in ["bw_gbps", "lat_us"] {
                    // `to_value` keeps the f64 itself (no text in between).
                    let Some(v) = cell[k].as_f64() else { continue };
                    assert!(text.contains(&written(k, v)), "{k} {v}");
                    checked += 1;
                    unround += usize::from((v * 100.0).fract() != 0.0);
                }
            }
        }
    }
    for r in &plan.table {
        for (k, v) in [
            ("time_us", r.time_us),
            ("busbw_gbps", r.busbw_gbps),
            ("expected_time_us", r.expected_time_us),
            ("expected_busbw_gbps", r.expected_busbw_gbps),
        ] {
            assert!(text.contains(&written(k, v)), "{k} {v} at {}", r.bytes);
            checked += 1;
            unround += usize::from((v * 100.0).fract() != 0.0);
        }
    }
    assert!(checked > 40, "{checked}");
    // Not a test that cannot fail: the model's figures are not multiples of 0.01.
    assert!(unround > 0);
}

/// A port without a speed: the plan assumes NCCL's slow default and says what the same
/// machine plans like at 400 Gb/s; `--nic-speed` then prices the ports (it once set the speed
/// and left the network links at the default, changing no plan).
#[test]
fn an_unknown_port_speed_gives_both_outcomes_and_a_stated_speed_counts() {
    let dir = tempfile::tempdir().unwrap();
    let xml = topo()
        .args(["xml", "--profile", "dgx-h100"])
        .output()
        .unwrap();
    let text = String::from_utf8(xml.stdout).unwrap();
    let no_speed: String = text
        .split(' ')
        .filter(|w| {
            !(w.starts_with("speed=\"") && w[7..].starts_with(|c: char| c.is_ascii_digit()))
        })
        .collect::<Vec<_>>()
        .join(" ");
    assert!(!no_speed.contains(" speed=\"4"), "speeds left");
    let path = dir.path().join("h100-no-speed.xml");
    std::fs::write(&path, no_speed).unwrap();
    let p = path.to_string_lossy().into_owned();
    let base = ["--from", p.as_str(), "--nodes", "2", "-b", "1G", "-e", "1G"];
    let j = plan_json(&base);
    let m = j["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["code"] == "net-speed-unknown")
        .expect("net-speed-unknown");
    let text = m["text"].as_str().unwrap();
    assert!(text.contains("With 400 Gb/s on those ports: "), "{text}");
    assert!(text.contains("allreduce 1G: "), "{text}");
    let slow = j["table"][0]["busbw_gbps"].as_f64().unwrap();
    let stated = plan_json(&[&base[..], &["--nic-speed", "400"]].concat());
    let fast = stated["table"][0]["busbw_gbps"].as_f64().unwrap();
    assert!(fast > 10.0 * slow, "{slow} -> {fast}");
}

/// A host NCCL splits per socket, repeated: parts 1 and 2 are searched (part 0 is rank 0's own
/// search) and every later part reuses the earlier part of its kind, with the orders moved
/// onto its own ranks (analyze.rs `split_node_graphs`).
/// Moved wrongly, a ring or tree would name another part's ranks; so every ring visits each
/// rank once, and each part's stretch of a ring and its tree links are the first part's of
/// its kind shifted by the part's first rank.
#[test]
fn split_copies_take_their_source_orders_on_their_own_ranks() {
    let j = plan_json_classes(&["--profile", "8x-rtx-pro-6000", "--nodes", "5"]);
    let per: Vec<u64> = j["ranks_per_node"]
        .as_array()
        .unwrap()
        .iter()
        .map(u)
        .collect();
    assert_eq!(per, vec![4; 10], "two parts of 4 GPUs per host");
    let n = u(&j["nranks"]) as usize;
    for ring in j["rings"].as_array().unwrap() {
        let r: Vec<usize> = ring
            .as_array()
            .unwrap()
            .iter()
            .map(|x| u(x) as usize)
            .collect();
        let mut sorted = r.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (0..n).collect::<Vec<_>>(),
            "a ring visits every rank once"
        );
        for (k, part) in r.chunks(4).enumerate() {
            let base = part.iter().min().unwrap();
            let first = &r[(k % 2) * 4..(k % 2) * 4 + 4];
            let first_base = first.iter().min().unwrap();
            let shifted: Vec<usize> = first.iter().map(|x| x - first_base + base).collect();
            assert_eq!(part, shifted.as_slice(), "part {k} of ring {r:?}");
        }
    }
    for t in j["trees"].as_array().unwrap() {
        let down = t["down"].as_array().unwrap();
        assert_eq!(t["up"].as_array().unwrap().len(), n);
        assert_eq!(down.len(), 3 * n);
        for i in 0..n {
            // Inside its part, a rank's tree child is the same position of the first part of
            // its kind as the source's (links to other parts are the cross-node tree's).
            let down0 = down[3 * i].as_i64().unwrap();
            let src_down0 = down[3 * (i % 8)].as_i64().unwrap();
            if down0 >= 0 && (down0 as usize) / 4 == i / 4 {
                assert_eq!(down0 - (i / 8 * 8) as i64, src_down0, "tree {t} rank {i}");
            }
        }
    }
}

/// Issue 44: a cloud skeleton's HCAs (PCI class 0x0207, no `<nic>`) are the IB devices NCCL
/// opens on that VM, so two Azure NDv5 nodes talk NET/IB over 8 rails with NVLS, not
/// NET/Socket on 2 channels; the plan states the assumption and that the speed is unknown,
/// and `--nic-speed` fills it in.
#[test]
fn azure_ndv5_skeleton_hcas_are_ib_of_unknown_speed() {
    let path = fixture("fixtures/xml/azure-ndv5-topo.xml");
    let p = path.to_str().unwrap();
    let base = [
        "--from",
        p,
        "--gpu",
        "h100",
        "--nvlink",
        "nvswitch",
        "--nodes",
        "2",
        "--nccl-version",
        V,
    ];
    let j = plan_json(&base);
    let nets: Vec<(&str, &str)> = j["transports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            t["transport"]
                .as_str()
                .is_some_and(|t| t.starts_with("NET/"))
        })
        .map(|t| (t["transport"].as_str().unwrap(), t["nic"].as_str().unwrap()))
        .collect();
    assert_eq!(nets.len(), 8, "{}", j["transports"]);
    let mut hcas: Vec<&str> = nets
        .iter()
        .map(|&(t, nic)| {
            assert_eq!(t, "NET/IB");
            nic
        })
        .collect();
    hcas.sort();
    hcas.dedup();
    assert_eq!(hcas.len(), 8, "one rail per GPU: {hcas:?}");
    assert!(u(&j["channels"]["nvls"]) > 0, "{}", j["channels"]);
    assert!(u(&j["channels"]["coll"]) > 2, "{}", j["channels"]);
    let warnings = j["warnings"].to_string();
    assert!(
        warnings.contains("8 InfiniBand controller(s) (PCI class 0x0207) have no <nic> entry"),
        "{warnings}"
    );
    assert!(warnings.contains("speed (unknown"), "{warnings}");
    assert!(
        j["messages"].to_string().contains("net-speed-unknown"),
        "{}",
        j["messages"]
    );
    let mut stated = base.to_vec();
    stated.extend(["--nic-speed", "400"]);
    let s = plan_json(&stated);
    assert!(
        !s["messages"].to_string().contains("net-speed-unknown"),
        "{}",
        s["messages"]
    );
}

/// The profiles for the shared nccl-tests machines (issue 43): what `topo show` and a
/// two-node `topo plan` say of each, fabric and NICs included. Read them.
#[test]
fn snapshot_fabric_profiles() {
    for p in [
        "alcf-polaris",
        "nrel-kestrel-h100",
        "alps-gh200",
        "aws-p4de",
        "aws-p5en",
        "aws-p6-b200",
        "gcp-a3-high",
        "pcie-2x-l40s",
    ] {
        let out = topo()
            .args(["show", "--profile", p])
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{p}");
        insta::assert_snapshot!(
            format!("show_{p}"),
            String::from_utf8_lossy(&out.stdout).into_owned()
        );
        let mut args = vec!["--profile", p, "--nodes", "2"];
        if p == "pcie-2x-l40s" {
            args.extend(["--nic-speed", "100", "--fabric", "roce"]);
        }
        insta::assert_snapshot!(format!("plan_{p}"), plan(&snap_args(&args)));
    }
}

/// Stated facts over a profile: fewer GPUs and NICs, a slower NIC, another fabric; each
/// said once in the plan, and the plan follows them.
#[test]
fn stated_node_facts_change_the_plan_and_say_so() {
    let j = plan_json(&[
        "--profile",
        "dgx-h100",
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--nics",
        "2",
        "--nic-speed",
        "200",
        "--fabric",
        "efa",
        "-b",
        "1G",
        "-e",
        "1G",
    ]);
    let stated = j["source"]["stated"].to_string();
    for want in [
        "--gpus-per-node 4: 4 of 8 GPU(s) per node in use",
        "--nics 2: 2 of 4 compute port(s) kept per node (mlx5_0, mlx5_1)",
        "--nic-speed 200 Gb/s overrides the source's 400 Gb/s on 2 compute port(s)",
        "fabric efa: NCCL's network is NET/Libfabric, 75 us per network step",
    ] {
        assert!(stated.contains(want), "{want}: {stated}");
    }
    assert!(!stated.contains("for 0 network port(s)"), "{stated}");
    assert_eq!(j["source"]["fabric"], "efa");
    assert_eq!(j["nranks"], 8, "{}", j["nranks"]);
    let text = j.to_string();
    assert!(text.contains("NET/Libfabric"));
    // Fewer, slower NICs: the same plan without them is faster at 1G.
    let healthy = plan_json(&[
        "--profile",
        "dgx-h100",
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "-b",
        "1G",
        "-e",
        "1G",
    ]);
    let bw = |p: &Value| p["table"][0]["busbw_gbps"].as_f64().unwrap();
    assert!(bw(&j) < bw(&healthy), "{} vs {}", bw(&j), bw(&healthy));
    // A bad count is one clear error.
    let out = topo()
        .args(["plan", "--profile", "dgx-h100", "--gpus-per-node", "9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--gpus-per-node 9: the source has 8 GPU(s) per node"),
        "{err}"
    );
    let out = topo()
        .args(["plan", "--profile", "dgx-h100", "--fabric", "omnipath"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown fabric 'omnipath'"));
}

/// Issue 44: plan and show name the same NIC for every GPU of the Azure NDv5 skeleton, by one
/// rule (NCCL's channel-0 NIC, `topo_nccl::paths::nic_choice`). Its HCAs' GPUDirect RDMA is
/// unknown: the plan prices it as NCCL's IB plugin answers on a GPU image and says so, never
/// "gdr=0"; `--gdr no` gives the other outcome, where every NIC on a CPU is equally far and
/// the plan names the tie and NCCL's pick. Before, the plan priced gdr=0 and sent GPU1 over
/// hca@0103 (PHB) while show named hca@0102 (PIX). NCCL_IB_HCA cannot be checked against the
/// assumed names, so it keeps them instead of falling back to sockets.
#[test]
fn azure_ndv5_plan_and_show_agree_on_each_gpus_nic() {
    let path = fixture("fixtures/xml/azure-ndv5-topo.xml");
    let p = path.to_str().unwrap();
    let base = [
        "--from",
        p,
        "--gpu",
        "h100",
        "--nvlink",
        "nvswitch",
        "--nodes",
        "2",
        "--nccl-version",
        V,
    ];
    let nic_of = |j: &Value| -> Vec<(u64, String)> {
        let mut v: Vec<(u64, String)> = j["transports"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| {
                t["transport"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("NET/"))
            })
            .flat_map(|t| {
                let nic = t["nic"].as_str().unwrap().to_string();
                t["pairs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| u(&p[0]))
                    .filter(|&r| r < 8)
                    .map(move |r| (r, nic.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let j = plan_json(&base);
    let plan_nics = nic_of(&j);
    let out = topo()
        .args(["show", "--from", p, "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    let show_nics: Vec<(u64, String)> = s["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                u(&g["index"]),
                g["nearest_nic"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(plan_nics, show_nics);
    assert_eq!(plan_nics[1].1, "hca@0102:00:00.0");
    let reasons = j["reasons"].to_string();
    assert!(!reasons.contains("gdr=0"), "{reasons}");
    assert!(reasons.contains("support assumed"), "{reasons}");
    let messages = j["messages"].to_string();
    assert!(
        messages.contains("the plan assumed it does, as NCCL's IB plugin"),
        "{messages}"
    );
    assert!(
        messages.contains("Without GPUDirect RDMA on those ports"),
        "{messages}"
    );

    let mut no_gdr = base.to_vec();
    no_gdr.extend(["--gdr", "no"]);
    let n = plan_json(&no_gdr);
    let tie = n["reasons"].to_string();
    assert!(tie.contains("a tie: 4 NICs are equally near"), "{tie}");
    assert!(tie.contains("bit-mirrored over 4, gives place 2"), "{tie}");

    let mut hca = base.to_vec();
    hca.extend(["--env", "NCCL_IB_HCA=mlx5"]);
    let h = plan_json(&hca);
    assert_eq!(nic_of(&h), plan_nics, "the filter drops no assumed HCA");
    assert!(
        h.to_string()
            .contains("cannot be checked against 16 IB port(s)"),
        "{}",
        h["env"]
    );
}

/// NCCL_BUFFSIZE leaves the published conditions only where it is not NCCL's own default:
/// 1 MiB on an ARM host (GH200) under 2.18, 4 MiB on every CPU from 2.19 (`computeBuffSizes`,
/// src/init.cc, v2.18.6-1 and v2.19.4-1).
#[test]
fn the_buffer_size_default_follows_the_cpu_and_the_version() {
    for (version, size, default) in [
        ("2.18", "1048576", true),
        ("2.18", "4194304", false),
        ("2.19", "4194304", true),
        ("2.19", "1048576", false),
    ] {
        let env = format!("NCCL_BUFFSIZE={size}");
        let doc = plan_json(&[
            "--profile",
            "gh200",
            "--nodes",
            "2",
            "--nccl-version",
            version,
            "--env",
            &env,
            "-b",
            "1M",
            "-e",
            "1M",
        ]);
        let basis = doc["table"][0]["expected_band_basis"].as_str().unwrap();
        assert_eq!(
            !basis.contains("NCCL_BUFFSIZE"),
            default,
            "{version} {env}: {basis}"
        );
    }
}
