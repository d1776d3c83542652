//! Dissimilar hosts (issue 28): `topo plan --from A --from B` and `--hosts FILE`, one source
//! per host, against `--nodes`, and a test per finding about decisions the hosts reach.

use crate::util::{assert_valid, fixture, plan_doc, plan_doc_at, strs, topo_clean_env};
use serde_json::Value;

/// The plan's messages with a `hosts-*` or `nccl-init-fails` code: (code, severity, text).
fn host_messages(doc: &Value) -> Vec<(String, String, String)> {
    doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            let c = m["code"].as_str().unwrap_or("");
            c.starts_with("hosts-") || c == "nccl-init-fails"
        })
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
            (s("code"), s("severity"), s("text"))
        })
        .collect()
}

fn message<'a>(msgs: &'a [(String, String, String)], code: &str) -> &'a (String, String, String) {
    msgs.iter()
        .find(|m| m.0 == code)
        .unwrap_or_else(|| panic!("no {code} in {msgs:?}"))
}

fn without_source(mut doc: Value) -> Value {
    doc.as_object_mut().unwrap().remove("source");
    doc
}

#[test]
fn identical_hosts_plan_as_nodes() {
    for src in ["profile:dgx-h100", "fixtures/xml/aws-p5-48xl-topo.xml"] {
        let path = fixture(src.trim_start_matches("profile:"));
        let src = if src.starts_with("profile:") {
            src.to_string()
        } else {
            path.to_string_lossy().into_owned()
        };
        let facts = ["--gpu", "h100", "--nvlink", "nvswitch"];
        let (joined, _) = plan_doc(&[&["--from", &src, "--from", &src][..], &facts].concat());
        let (nodes, _) = plan_doc(&[&["--from", &src, "--nodes", "2"][..], &facts].concat());
        assert_valid(&joined, "two identical hosts");
        assert_eq!(
            without_source(joined.clone()),
            without_source(nodes),
            "{src}"
        );
        assert!(host_messages(&joined).is_empty(), "{src}: alike hosts");
    }
}

#[test]
fn hosts_without_nvls_turn_it_off_everywhere() {
    let (doc, _) = plan_doc(&["--from", "profile:dgx-h100", "--from", "profile:dgx-a100"]);
    assert_valid(&doc, "h100 + a100");
    assert_eq!(doc["nranks"], 16);
    assert_eq!(doc["nnodes"], 2);
    assert_eq!(doc["channels"]["nvls"], 0, "AllGather3 takes the A100's 0");
    let msgs = host_messages(&doc);
    let m = message(&msgs, "hosts-nvls-differ");
    assert_eq!(m.1, "warning");
    assert!(
        m.2.contains("NVLS on dgx-h100, none on dgx-a100"),
        "{}",
        m.2
    );
    // Alone, the H100 host builds NVLS channels.
    let (alone, _) = plan_doc(&["--from", "profile:dgx-h100", "--nodes", "2"]);
    assert!(alone["channels"]["nvls"].as_u64().unwrap() > 0);
}

#[test]
fn mixed_cpu_vendors_by_version() {
    let args = |v: &'static str| {
        let (doc, _) = plan_doc_at(
            v,
            &["--from", "profile:dgx-h100", "--from", "profile:dgx-a100"],
        );
        let m = message(&host_messages(&doc), "hosts-cpu-differ").clone();
        (m.1, m.2)
    };
    let (sev, text) = args("2.21");
    assert_eq!(sev, "warning");
    assert!(
        text.contains("not reconciled") && text.contains("#1136"),
        "{text}"
    );
    let (sev, text) = args("2.23");
    assert_eq!(sev, "warning");
    assert!(
        text.contains("partly reconciled") && text.contains("llMaxBw"),
        "{text}"
    );
    let (sev, text) = args("2.28");
    assert_eq!(sev, "info");
    assert!(
        text.contains("MIXED") && text.contains("x86/amd (dgx-a100)"),
        "{text}"
    );
}

#[test]
fn different_nics_keep_the_smallest_channel_count() {
    let (doc, _) = plan_doc(&[
        "--from",
        "profile:dgx-h100",
        "--from",
        "profile:pcie-8x-l40s",
    ]);
    let msgs = host_messages(&doc);
    let m = message(&msgs, "hosts-nics-differ");
    assert_eq!(m.1, "warning");
    assert!(m.2.contains("8 (dgx-h100), 1 (pcie-8x-l40s)"), "{}", m.2);
    assert!(m.2.contains("unknown"), "{}", m.2);
    // 2 coll channels: the L40S host's one ring channel, doubled.
    assert_eq!(doc["channels"]["coll"], 2);
}

#[test]
fn net_mismatch_stops_nccl_2_30_only_when_asked() {
    let run = |env: &[&str]| {
        let hosts = ["--from", "profile:dgx-h100", "--from", "profile:hgx-h800"];
        let (doc, _) = plan_doc_at("2.30", &[&hosts[..], env].concat());
        let effect = doc["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "NCCL_IGNORE_NET_MISMATCH")
            .map(|e| e["effect"].as_str().unwrap_or("").to_string());
        (host_messages(&doc), effect)
    };
    let (msgs, _) = run(&[]);
    let m = message(&msgs, "hosts-nics-differ");
    assert!(
        m.2.contains("NCCL_IGNORE_NET_MISMATCH=1") && m.2.contains("#2428"),
        "{}",
        m.2
    );
    assert!(msgs.iter().all(|m| m.0 != "nccl-init-fails"), "{msgs:?}");
    let (msgs, effect) = run(&["--env", "NCCL_IGNORE_NET_MISMATCH=0"]);
    assert_eq!(message(&msgs, "nccl-init-fails").1, "error");
    let effect = effect.expect("the variable's env entry");
    assert!(effect.contains("NCCL stops at init"), "{effect}");
}

#[test]
fn nodes_of_different_gpu_counts() {
    let (doc, _) = plan_doc(&["--from", "profile:dgx-h100", "--from", "profile:gh200"]);
    assert_valid(&doc, "h100 + gh200");
    assert_eq!(doc["nranks"], 9);
    assert_eq!(doc["nnodes"], 2);
    let m = message(&host_messages(&doc), "hosts-gpus-differ").clone();
    assert_eq!(m.1, "info");
    assert!(m.2.contains("8 (dgx-h100), 1 (gh200)"), "{}", m.2);
    // Every rank is on the ring once.
    let ring = doc["rings"][0].as_array().expect("rings[0]");
    let mut ranks: Vec<u64> = ring.iter().filter_map(Value::as_u64).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, (0..9).collect::<Vec<u64>>());
}

#[test]
fn hosts_of_different_sm() {
    let (doc, _) = plan_doc(&["--from", "profile:dgx-h100", "--from", "profile:dgx-a100"]);
    let m = message(&host_messages(&doc), "hosts-sm-differ").clone();
    assert_eq!(m.1, "info");
    assert!(m.2.contains("sm90 (dgx-h100), sm80 (dgx-a100)"), "{}", m.2);
    // Hopper and Blackwell both with NVLS: channel counts NCCL does not reconcile.
    let (doc, _) = plan_doc(&["--from", "profile:dgx-b200", "--from", "profile:dgx-h100"]);
    let msgs = host_messages(&doc);
    assert!(
        msgs.iter()
            .any(|m| m.0 == "hosts-sm-differ" && m.1 == "warning" && m.2.contains("nvlsChannels")),
        "{msgs:?}"
    );
}

#[test]
fn a_host_list_names_sources_relative_to_itself() {
    let dir = tempfile::tempdir().unwrap();
    let xml = fixture("fixtures/xml/aws-p5-48xl-topo.xml");
    std::fs::copy(&xml, dir.path().join("p5.xml")).unwrap();
    let list = dir.path().join("hosts.txt");
    std::fs::write(
        &list,
        "# rack 1\np5.xml\nprofile:dgx-h100   # the golden node\n",
    )
    .unwrap();
    let list = list.to_string_lossy().into_owned();
    let (doc, _) = plan_doc(&["--hosts", &list, "--gpu", "h100", "--nvlink", "nvswitch"]);
    assert_valid(&doc, "a host list");
    assert_eq!(doc["source"]["kind"], "hosts", "an XML and a profile");
    assert_eq!(doc["nnodes"], 2);
    assert_eq!(doc["nranks"], 16);
    assert!(
        doc["source"]["origin"]
            .as_str()
            .unwrap()
            .contains("dgx-h100")
    );
}

#[test]
fn several_sources_where_one_is_read_fail_with_one_line() {
    for args in [
        vec![
            "plan",
            "--from",
            "profile:dgx-h100",
            "--from",
            "profile:dgx-a100",
            "--nodes",
            "2",
        ],
        vec![
            "show",
            "--from",
            "profile:dgx-h100",
            "--from",
            "profile:dgx-a100",
        ],
        vec![
            "plan",
            "--from",
            "profile:dgx-h100",
            "--from",
            "profile:nope",
        ],
    ] {
        let out = topo_clean_env().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error")).count(),
            1,
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// An odd node whose own search finds no crossNic=2 solution keeps its ring channels in order
/// (`ncclTopoPostset` swaps by each rank's own `crossNicRing`, NCCL 2.28.9
/// src/graph/connect.cc): a DGX H100 and a copy with 200G NICs, rings as nccl-oracle 2.28.9
/// `--node-xml` prints them (bench/hetero).
#[test]
fn an_odd_node_alternates_rings_by_its_own_cross_nic() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.xml");
    let out = topo_clean_env()
        .args(["xml", "--profile", "dgx-h100", "-o"])
        .arg(&a)
        .output()
        .unwrap();
    assert!(out.status.success());
    let xml = std::fs::read_to_string(&a).unwrap();
    let b = dir.path().join("b.xml");
    std::fs::write(&b, xml.replace("speed=\"400000\"", "speed=\"200000\"")).unwrap();
    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    // The oracle's plugin fuses no ports (`NCCL_IB_MERGE_NICS=0` with the IB plugin): the
    // DGX's dual-port storage cards stay two devices each, as there.
    let (doc, _) = plan_doc(&["--from", &a, "--from", &b, "--env", "NCCL_IB_MERGE_NICS=0"]);
    let ring = |c: usize| -> Vec<u64> {
        doc["rings"][c]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_u64)
            .collect()
    };
    assert_eq!(
        ring(0),
        [0, 7, 6, 5, 4, 3, 2, 1, 8, 15, 14, 13, 12, 11, 10, 9]
    );
    assert_eq!(
        ring(1),
        [0, 9, 8, 15, 14, 13, 12, 11, 10, 1, 2, 3, 4, 5, 6, 7]
    );
}

#[test]
fn a_port_lost_on_one_of_two_dissimilar_hosts_is_planned_as_nccls_code_does() {
    // NCCL's own code on the two hosts (bench/oracle/multihost, 2.28.9-1, 2026-12-04):
    //   topo xml --profile dgx-h100 -o a.xml
    //   topo xml --profile hgx-h200 --without nic:mlx5_2 -o c.xml
    //   nccl-oracle --node-xml a.xml --node-xml c.xml
    // prints `28 coll channels, 28 collnet channels, 16 nvls channels, 32 p2p channels,
    // 2 p2p channels per peer` (the healthy pair: 16 coll, 16 p2p): the host with 7 ports
    // searches 7 rings over PXN and AllGather3 keeps them.
    let (doc, _) = plan_doc_at(
        "2.28",
        &[
            "--from",
            "profile:dgx-h100",
            "--from",
            "profile:hgx-h200",
            "--without",
            "nic:mlx5_2@1",
        ],
    );
    assert_valid(&doc, "h100 + h200 without mlx5_2 on host 1");
    assert_eq!(
        doc["channels"]["log_line"],
        "28 coll channels, 28 collnet channels, 16 nvls channels, 32 p2p channels, 2 p2p channels per peer"
    );
    let changes = strs(&doc["faults"]["changes"]);
    assert_eq!(
        changes[0],
        "channels: coll 16 -> 28, collnet 16 -> 28, p2p 16 -> 32"
    );
    assert!(changes.contains(&"transports: PXN 0 -> 1"), "{changes:?}");
    // A host that is not in the list is one error line, not a silent healthy plan.
    let out = topo_clean_env()
        .args([
            "plan",
            "--from",
            "profile:dgx-h100",
            "--from",
            "profile:hgx-h200",
        ])
        .args(["--without", "nic:mlx5_2@2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("there is no host 2 (2 hosts)"), "{err}");
}

/// Hopper beside Blackwell with NVLS: each rank sets NVLS channels from its own GPU, so the
/// sizes NVLS serves run on different channel counts per host (the multi-host oracle's
/// `inconsistent per-size choices` on such jobs, bench/oracle/results-hetero-2.28.md).
#[test]
fn hosts_choosing_differently_per_size_are_an_error() {
    let (doc, _) = plan_doc(&["--from", "profile:dgx-b200", "--from", "profile:dgx-h100"]);
    let m = message(&host_messages(&doc), "hosts-choices-differ").clone();
    assert_eq!(m.1, "error");
    assert!(
        m.2.contains("dgx-h100 tune with 16 NVLS channels (rank 0: 32"),
        "{}",
        m.2
    );
    assert!(m.2.contains("AllReduce at "), "{}", m.2);
    // Alike GPUs: one cost table for every rank.
    let (doc, _) = plan_doc(&["--from", "profile:dgx-h100", "--from", "profile:hgx-h200"]);
    assert!(
        !host_messages(&doc)
            .iter()
            .any(|m| m.0 == "hosts-choices-differ")
    );
}

/// Job 51 of the 2.28 dissimilar-host sweep (fixtures/oracle/hetero-seed51-host*.xml): NCCL
/// splits the third host into two nodes, whose ranks keep 1 p2p channel per peer where the
/// other nodes keep 2; nccl-oracle 2.28.9 warns "inconsistent channel counts: rank 8 (node
/// 2, localRanks 2) differs from rank 0". From 2.29 the minimum over all ranks is kept.
#[test]
fn split_nodes_keeping_other_p2p_channel_counts_are_named() {
    let host = |i: usize| {
        fixture(&format!("fixtures/oracle/hetero-seed51-host{i}.xml"))
            .to_string_lossy()
            .into_owned()
    };
    let (h0, h1, h2) = (host(0), host(1), host(2));
    let mut args = vec!["--from", &h0, "--from", &h1, "--from", &h2];
    // NCCL_IB_MERGE_NICS=0: the oracle's plugin fuses no ports.
    for e in [
        "NCCL_MAX_NCHANNELS=9",
        "NCCL_MAX_CTAS=20",
        "NCCL_CROSS_NIC=0",
        "NCCL_IB_MERGE_NICS=0",
    ] {
        args.extend(["--env", e]);
    }
    let (doc, _) = plan_doc(&args);
    assert_eq!(doc["ranks_per_node"], serde_json::json!([4, 4, 2, 2]));
    let m = message(&host_messages(&doc), "hosts-p2p-channels-differ").clone();
    assert_eq!(m.1, "warning");
    assert!(
        m.2.contains("2 (node-0-part0, node-1-part1), 1 (node-2-part2, node-2-part3)"),
        "{}",
        m.2
    );
    let (doc, _) = plan_doc_at("2.29", &args);
    assert!(
        !host_messages(&doc)
            .iter()
            .any(|m| m.0 == "hosts-p2p-channels-differ")
    );
}

/// Alternating dissimilar hosts are searched once per kind of host, not once per host (issue
/// 45: 16,384 of them took 395 s, identical ones 13.6 s): four times the hosts, under six
/// times the time, and within a small factor of as many identical hosts.
#[test]
fn alternating_dissimilar_hosts_plan_in_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let list_of = |n: usize, other: &str| {
        let p = dir.path().join(format!("hosts-{n}-{other}.txt"));
        let lines: String = (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    "profile:dgx-h100\n".to_string()
                } else {
                    format!("profile:{other}\n")
                }
            })
            .collect();
        std::fs::write(&p, lines).unwrap();
        p
    };
    let run = |p: &std::path::Path| {
        let t0 = std::time::Instant::now();
        let out = crate::util::topo_clean_env()
            .args(["plan", "--format", "json", "--hosts"])
            .arg(p)
            .output()
            .unwrap();
        let took = t0.elapsed();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        took
    };
    let list = |n: usize| list_of(n, "dgx-a100");
    let (small, large, same) = (list(128), list(512), list_of(512, "dgx-h100"));
    let (mut a, mut b, mut c) = (
        std::time::Duration::MAX,
        std::time::Duration::MAX,
        std::time::Duration::MAX,
    );
    for _ in 0..2 {
        a = a.min(run(&small));
        b = b.min(run(&large));
        c = c.min(run(&same));
    }
    assert!(b < a * 6, "{a:?} -> {b:?}");
    // Each host's own search once made 512 alternating hosts cost 40 times 512 identical ones.
    assert!(b < c * 6, "alternating {b:?}, identical {c:?}");
}
