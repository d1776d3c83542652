//! Stated facts (issue 25, item 2): what a matrix or a cloud image's skeleton XML leaves out,
//! given on the command line, makes every real input plannable, and the plan says what it was
//! given.

use crate::util::{fixture, plan_doc, strs, topo_clean_env as topo};

/// Every real XML and matrix in fixtures/ with the facts its user would state (none where
/// the file carries them). The truncated dump is refused as malformed, by design.
const CASES: &[(&str, &[&str])] = &[
    (
        "fixtures/xml/aws-p4d-24xl-topo.xml",
        &["--gpu", "a100", "--nvlink", "nvswitch"],
    ),
    (
        "fixtures/xml/aws-p5-48xl-topo.xml",
        &["--gpu", "h100", "--nvlink", "nvswitch"],
    ),
    (
        "fixtures/xml/azure-ndv4-topo.xml",
        &["--gpu", "a100", "--nvlink", "nvswitch"],
    ),
    (
        "fixtures/xml/azure-ndv5-topo.xml",
        &["--gpu", "h100", "--nvlink", "nvswitch"],
    ),
    ("fixtures/xml/ibm-cloud-gx3d-h100-topo.xml", &[]),
    ("fixtures/xml/nccl-miner-2x-rtxa6000-nvlink-bridge.xml", &[]),
    ("fixtures/xml/panlichen-8x-rtx3090-switchtec.xml", &[]),
    ("fixtures/xml/rwkvinllama-2x-rtx4090-cx4.xml", &[]),
    (
        "fixtures/matrices/deepep-590-hgx-b300-cx8-bond.txt",
        &["--gpu", "b300", "--nic-speed", "400G", "--gdr", "yes"],
    ),
    (
        "fixtures/matrices/fastdeploy-8xa100-sxm4-40gb-4numa-3nic.txt",
        &["--gpu", "a100"],
    ),
    (
        "fixtures/matrices/nccl-557-2gpu-nvlink-bridge-nv3.txt",
        &["--sm", "86"],
    ),
    (
        "fixtures/matrices/nccl-tests-178-8xa100-pcie-nvlink-bridge-pairs.txt",
        &["--gpu", "a100-pcie"],
    ),
];

#[test]
fn every_real_xml_and_matrix_plans_with_the_facts_a_user_would_state() {
    for (file, facts) in CASES {
        let path = fixture(file);
        let mut args = vec!["--from", path.to_str().unwrap()];
        args.extend_from_slice(facts);
        let (p, _) = plan_doc(&args);
        let stated = p["source"]["stated"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let flags = facts.iter().filter(|f| f.starts_with("--")).count();
        let nvlink_and_gpu = facts.contains(&"--gpu") && facts.contains(&"--nvlink");
        assert!(
            stated.len() >= flags - usize::from(nvlink_and_gpu) && stated.len() <= flags,
            "{file}: {stated:?}"
        );
        for f in facts.iter().filter(|f| f.starts_with("--")) {
            assert!(
                stated.iter().any(|s| s.as_str().unwrap().starts_with(f)),
                "{file}: {f} not recorded in {stated:?}"
            );
        }
        assert!(p["channels"]["coll"].as_u64().unwrap() > 0, "{file}");
    }
}

#[test]
fn without_the_facts_a_skeleton_is_refused_with_the_flags_to_state_them() {
    let path = fixture("fixtures/xml/azure-ndv5-topo.xml");
    let out = topo()
        .args(["plan", "--from", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("NVLink is unknown"), "{e}");
    assert!(e.contains("--gpu h100 --nvlink nvswitch"), "{e}");
}

#[test]
fn a_stated_gpu_sets_sm_name_and_nvlink_bandwidth_in_show() {
    let path = fixture("fixtures/matrices/fastdeploy-8xa100-sxm4-40gb-4numa-3nic.txt");
    let out = topo()
        .args(["show", "--format", "json", "--gpu", "a100", "--from"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let g = &d["gpus"][0];
    assert_eq!(g["sm"], 80);
    assert_eq!(g["name"], "A100-SXM4");
    assert_eq!(g["nvlink"]["links"][0]["bw_gbps"], 240.0, "{g}");
}

#[test]
fn bad_stated_facts_are_one_clear_error() {
    for (args, want) in [
        (
            &["--gpu", "h1000"][..],
            "unknown GPU model 'h1000' (known: v100,",
        ),
        (
            &["--nvlink", "mesh"][..],
            "'mesh' is not nvswitch, pairs or none",
        ),
        (&["--nvlink", "pairs:40"][..], "'40' is not a lane count"),
        (
            &["--nic-speed", "fast"][..],
            "'fast' is not a speed in Gb/s",
        ),
        (&["--sm", "9"][..], "9"),
        (&["--gdr", "maybe"][..], "'maybe' is not on or off"),
    ] {
        let out = topo()
            .args(["plan", "--profile", "dgx-h100"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(want), "{args:?}: {e}");
    }
}

#[test]
fn an_unknown_gdr_plan_also_gives_the_outcome_with_gdr() {
    let path = fixture("fixtures/matrices/deepep-590-hgx-b300-cx8-bond.txt");
    let from = path.to_str().unwrap();
    let base = [
        "--from",
        from,
        "--gpu",
        "b300",
        "--nic-speed",
        "400",
        "--nodes",
        "2",
    ];
    let (p, _) = plan_doc(&base);
    let m = p["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["code"] == "net-gdr-unknown")
        .expect("the unknown GDR is a message");
    let t = m["text"].as_str().unwrap();
    assert!(
        t.contains("With GPUDirect RDMA on those ports: ") && t.contains("GDRDMA 0 -> 16"),
        "{t}"
    );
    let mut stated = base.to_vec();
    stated.extend(["--gdr", "yes"]);
    let (p, _) = plan_doc(&stated);
    assert!(
        !p["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["code"] == "net-gdr-unknown")
    );
}

#[test]
fn a_profile_lends_its_facts_to_a_file_that_keeps_its_layout() {
    let path = fixture("fixtures/matrices/fastdeploy-8xa100-sxm4-40gb-4numa-3nic.txt");
    let (p, _) = plan_doc(&["--from", path.to_str().unwrap(), "--profile", "dgx-a100"]);
    assert_eq!(p["source"]["kind"], "nvidia-smi");
    let stated = strs(&p["source"]["stated"]);
    assert!(
        stated.iter().all(|s| s.starts_with("profile dgx-a100: ")),
        "{stated:?}"
    );
    assert!(
        stated
            .iter()
            .any(|s| s.contains("(sm 80)") || s.contains("--sm 80")),
        "{stated:?}"
    );
    assert!(
        stated
            .iter()
            .any(|s| s.contains("--nic-speed 200 Gb/s for 3")),
        "{stated:?}"
    );
    assert_eq!(p["nranks"], 8);
}

#[test]
fn diagnose_takes_the_stated_facts_too() {
    let path = fixture("fixtures/xml/azure-ndv5-topo.xml");
    let run = |extra: &[&str]| -> serde_json::Value {
        let out = topo()
            .args(["diagnose", "--format", "json", "--from"])
            .arg(&path)
            .args(extra)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // NVLink unknown: the P2P model cannot run; stated, it does.
    let bare = run(&[]);
    assert!(bare["skipped"].to_string().contains("P2P paths"), "{bare}");
    let stated = run(&["--gpu", "h100", "--nvlink", "nvswitch"]);
    assert!(
        stated["checked"]
            .to_string()
            .contains("P2P paths and transports"),
        "{stated}"
    );
}
