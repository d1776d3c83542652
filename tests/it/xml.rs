//! NCCL topology XML: the real files in fixtures/xml read into the model (what
//! fixtures/xml/README.md says a correct tool concludes), written back, and bad input.

use crate::util::topo as topo_cmd;
use petgraph::graph::NodeIndex;
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use topo_model::{LinkKind, NodeKind, NvlinkInfo, Topology};
use topo_source::ncclxml;

const TRUNCATED: &str = "nccl-tests-256-h200-baremetal-dump-TRUNCATED.xml";

fn fixture(name: &str) -> PathBuf {
    crate::util::fixture("fixtures/xml").join(name)
}

/// Every fixture that is a whole file.
fn loadable() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixture(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .filter(|p| !p.ends_with(TRUNCATED))
        .collect();
    v.sort();
    assert_eq!(v.len(), 8);
    v
}

fn load(name: &str) -> Topology {
    ncclxml::load_file(&fixture(name)).unwrap()
}

fn xml_of(path: &Path) -> String {
    let out = topo_cmd()
        .args(["xml", "--from"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// GPUs in NVML order with their bus ids.
fn gpu_busids(t: &Topology) -> Vec<String> {
    t.gpus()
        .iter()
        .map(|&g| t.gpu(g).unwrap().busid.to_string())
        .collect()
}

/// NVLink lanes each GPU declares (sum over its targets), in GPU order.
fn lanes(t: &Topology) -> Vec<u32> {
    t.gpus()
        .iter()
        .map(|&g| t.nvlinks(g).iter().map(|l| l.1).sum())
        .collect()
}

/// For each GPU (NVML order): the NICs hanging off the same PCI switch, named by their first
/// port, or by bus id when the file lists the NIC by PCI class only. Walks `parent`.
fn nics_sharing_switch(t: &Topology) -> Vec<Vec<String>> {
    t.gpus()
        .iter()
        .map(|&g| {
            let Some(sw) = t
                .node(g)
                .parent
                .filter(|&p| matches!(t.node(p).kind, NodeKind::PciSwitch(_)))
            else {
                return vec![];
            };
            t.nics()
                .filter(|&n| t.node(n).parent == Some(sw))
                .map(|n| nic_name(t, n))
                .collect()
        })
        .collect()
}

fn nic_name(t: &Topology, nic: NodeIndex) -> String {
    let ports: Vec<String> = t
        .children(nic)
        .into_iter()
        .filter_map(|c| t.net(c))
        .map(|n| n.name.clone())
        .collect();
    if ports.is_empty() {
        t.node(nic).busid().unwrap().to_string()
    } else {
        ports.join("+")
    }
}

fn numas(t: &Topology) -> Vec<i32> {
    t.gpus().iter().map(|&g| t.numa_of(g)).collect()
}

fn nvlink_unknown(t: &Topology) -> bool {
    t.gpus()
        .iter()
        .all(|&g| matches!(t.gpu(g).unwrap().nvlink, NvlinkInfo::Unknown(_)))
}

#[test]
fn every_whole_fixture_converts() {
    for f in loadable() {
        let x = xml_of(&f);
        assert!(
            x.starts_with("<system version=\"1\">\n  <cpu "),
            "{}",
            f.display()
        );
        assert!(x.ends_with("</system>\n"));
    }
}

#[test]
fn a_truncated_dump_is_not_written_as_a_topology_file() {
    let out = topo_cmd()
        .args(["xml", "--from"])
        .arg(fixture(TRUNCATED))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("the input is cut at line 53 column 1"),
        "{err}"
    );
    assert!(err.contains("hint: dump the topology again"), "{err}");
}

#[test]
fn a_truncated_dump_shows_its_complete_part_and_where_it_stops() {
    let out = topo_cmd()
        .args(["show", "--format", "json", "--from"])
        .arg(fixture(TRUNCATED))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        j["gpus"].as_array().unwrap().len(),
        3,
        "the GPUs before the cut"
    );
    let warnings = j["warnings"].to_string();
    assert!(
        warnings.contains(
            "line 53 column 1: the file is cut here, inside <nic> opened at line 52 column 9"
        ) && warnings.contains("unknown, not absent"),
        "{warnings}"
    );
}

#[test]
fn aws_p4d_comments_skeleton_two_gpus_per_nic() {
    let t = load("aws-p4d-24xl-topo.xml");
    assert_eq!(t.gpus().len(), 8);
    assert!(
        nvlink_unknown(&t),
        "skeleton: NVLink filled at run time, not 'none'"
    );
    assert_eq!(t.nvswitches().count(), 0);
    assert_eq!(t.nics().count(), 4);
    // No vendor or device id: each NIC beside the GPUs is one assumed port of unknown kind
    // (EFA, RoCE or Ethernet; the plugin that opens it at run time says which), issue 44.
    let nets: Vec<_> = t.nets().into_iter().map(|n| t.net(n).unwrap()).collect();
    assert_eq!(nets.len(), 4);
    assert!(
        nets.iter()
            .all(|x| x.assumed && x.name.starts_with("nic@") && x.speed_mbps.is_none())
    );
    assert_eq!(numas(&t), vec![0, 0, 0, 0, 1, 1, 1, 1]);
    // dev in bus-id order: 10:1c, 10:1d, 20:1c, ...
    assert_eq!(
        gpu_busids(&t)[..3],
        ["0000:10:1c.0", "0000:10:1d.0", "0000:20:1c.0"]
    );
    let share = nics_sharing_switch(&t);
    let expect = [
        "0000:10:1b.0",
        "0000:10:1b.0",
        "0000:20:1b.0",
        "0000:20:1b.0",
        "0000:90:1b.0",
        "0000:90:1b.0",
        "0000:a0:1b.0",
        "0000:a0:1b.0",
    ];
    for (s, e) in share.iter().zip(expect) {
        assert_eq!(s, &vec![format!("nic@{e}")]);
    }
    // "8 GT/s" is Gen3: 12 GB/s at x16
    let g0 = t.gpus()[0];
    assert_eq!(t.gpu(g0).unwrap().pcie.bw(), 12.0);
    assert!(t.warnings.iter().any(|w| w.contains("by PCI class only")));
}

#[test]
fn aws_p5_four_efa_per_gpu_under_one_cpu() {
    let t = load("aws-p5-48xl-topo.xml");
    assert_eq!(t.gpus().len(), 8);
    assert!(
        nvlink_unknown(&t),
        "no <nvlink> in a hand-written file is not 'no NVLink'"
    );
    assert_eq!(t.nvswitches().count(), 0);
    assert_eq!(t.nics().count(), 32);
    assert_eq!(t.nets().len(), 32);
    assert_eq!(t.cpus().count(), 1);
    assert_eq!(numas(&t), vec![0; 8]);
    let share = nics_sharing_switch(&t);
    assert!(share.iter().all(|s| s.len() == 4));
    assert_eq!(
        share[0],
        ["rdmap79s0", "rdmap80s0", "rdmap81s0", "rdmap82s0"]
    );
    assert_eq!(
        share[7],
        ["rdmap198s0", "rdmap199s0", "rdmap200s0", "rdmap201s0"]
    );
    for &g in &t.gpus() {
        let per_gpu: u64 = t
            .nics()
            .filter(|&n| t.node(n).parent == t.node(g).parent)
            .flat_map(|n| t.children(n))
            .filter_map(|c| t.net(c).and_then(|x| x.speed_mbps))
            .sum();
        assert_eq!(per_gpu, 400_000, "400 Gb/s per GPU");
        let gpu = t.gpu(g).unwrap();
        assert_eq!((gpu.sm, gpu.gdr), (Some(90), Some(true)));
        assert_eq!(gpu.pcie.bw(), 48.0);
    }
    let n10 = t.nets()[10];
    let net = t.net(n10).unwrap();
    assert_eq!(
        (net.dev, net.guid, net.maxconn, net.gdr),
        (10, Some(0x10), Some(1024), true)
    );
}

#[test]
fn azure_ndv4_skeleton_two_gpus_two_nics_per_numa() {
    let t = load("azure-ndv4-topo.xml");
    assert_eq!(t.gpus().len(), 8);
    assert!(
        nvlink_unknown(&t),
        "a tool must not report 'no NVLink' from this file"
    );
    assert_eq!(t.nvswitches().count(), 0);
    assert_eq!(t.nics().count(), 8);
    assert_eq!(t.cpus().count(), 4);
    assert_eq!(
        gpu_busids(&t),
        [
            "0001:00:00.0",
            "0002:00:00.0",
            "0003:00:00.0",
            "0004:00:00.0",
            "000b:00:00.0",
            "000c:00:00.0",
            "000d:00:00.0",
            "000e:00:00.0"
        ]
    );
    assert_eq!(numas(&t), vec![1, 1, 0, 0, 3, 3, 2, 2]);
    let share = nics_sharing_switch(&t);
    assert_eq!(share[0], ["hca@0101:00:00.0", "hca@0102:00:00.0"]);
    assert_eq!(share[2], ["hca@0103:00:00.0", "hca@0104:00:00.0"]);
    assert_eq!(share[4], ["hca@0105:00:00.0", "hca@0106:00:00.0"]);
    assert_eq!(share[6], ["hca@0107:00:00.0", "hca@0108:00:00.0"]);
    let why = match &t.gpu(t.gpus()[0]).unwrap().nvlink {
        NvlinkInfo::Unknown(r) => r.clone(),
        NvlinkInfo::Known => String::new(),
    };
    assert_eq!(why, ncclxml::SKELETON_NVLINK_REASON);
}

#[test]
fn azure_ndv5_rail_aligned_one_nic_per_gpu() {
    let t = load("azure-ndv5-topo.xml");
    assert_eq!(t.gpus().len(), 8);
    assert!(nvlink_unknown(&t));
    assert_eq!(t.nics().count(), 8);
    assert_eq!(numas(&t), vec![0, 0, 0, 0, 1, 1, 1, 1]);
    let share = nics_sharing_switch(&t);
    let expect = [
        "0101", "0102", "0103", "0104", "0105", "0106", "0107", "0108",
    ];
    for (s, e) in share.iter().zip(expect) {
        assert_eq!(s, &vec![format!("hca@{e}:00:00.0")]);
    }
    for &g in &t.gpus() {
        assert_eq!(t.gpu(g).unwrap().pcie.bw(), 48.0, "Gen5 x16");
    }
}

#[test]
fn ibm_h100_full_nvswitch_fabric_reversed_nic_numbering() {
    let t = load("ibm-cloud-gx3d-h100-topo.xml");
    assert_eq!(t.gpus().len(), 8);
    assert_eq!(lanes(&t), vec![18; 8]);
    let sw: Vec<String> = t
        .nvswitches()
        .map(|n| t.node(n).busid().unwrap().to_string())
        .collect();
    assert_eq!(sw.len(), 4);
    for b in [
        "0000:f3:00.0",
        "0000:f4:00.0",
        "0000:f5:00.0",
        "0000:f6:00.0",
    ] {
        assert!(sw.contains(&b.to_string()), "{sw:?}");
    }
    for &g in &t.gpus() {
        let mut per: Vec<u32> = t.nvlinks(g).iter().map(|l| l.1).collect();
        per.sort();
        assert_eq!(per, [4, 4, 5, 5]);
        let bw: f64 = t.nvlinks(g).iter().map(|l| l.2).sum();
        assert!((bw - 370.8).abs() < 1e-9);
        assert_eq!(t.gpu(g).unwrap().pcie.width, Some(0), "raw width kept");
    }
    assert_eq!(t.nics().count(), 8);
    assert_eq!(t.nets().len(), 8);
    let share = nics_sharing_switch(&t);
    for (i, s) in share.iter().enumerate() {
        assert_eq!(
            s,
            &vec![format!("mlx5_{}", 7 - i)],
            "GPU{i} pairs by switch, not by index"
        );
    }
    assert_eq!(numas(&t), vec![0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(t.host_count(), 1);
    assert_eq!(t.hosts[0].host_hash, Some(0xa5f31daa95182da8));
    let cpu0 = t.cpu(t.cpus().next().unwrap()).unwrap();
    assert_eq!(cpu0.cpus.as_deref(), Some("0-79"));
    assert_eq!((cpu0.family, cpu0.model), (Some(6), Some(143)));
    assert!(
        t.warnings.iter().any(|w| w.contains("link_width of 0")),
        "{:?}",
        t.warnings
    );
    // the TI bridge: 2.5 GT/s x1 as the file says it
    let bridge = t.node(t.gpus()[0]).parent.unwrap();
    let p = t.node(bridge).pcie().unwrap();
    assert_eq!(
        (p.speed.as_deref(), p.width),
        (Some("2.5 GT/s PCIe"), Some(1))
    );
}

#[test]
fn nccl_miner_two_a6000_with_an_nvlink_bridge() {
    let t = load("nccl-miner-2x-rtxa6000-nvlink-bridge.xml");
    let g = t.gpus();
    assert_eq!(g.len(), 2);
    assert_eq!(t.nvswitches().count(), 0);
    // NV4 between the two, each direction declared by its own GPU (tclass 0x030000, VGA class)
    assert_eq!(
        t.nvlinks(g[0])
            .iter()
            .map(|l| (l.0, l.1))
            .collect::<Vec<_>>(),
        [(g[1], 4)]
    );
    assert_eq!(
        t.nvlinks(g[1])
            .iter()
            .map(|l| (l.0, l.1))
            .collect::<Vec<_>>(),
        [(g[0], 4)]
    );
    assert!(
        (t.nvlinks(g[0])[0].2 - 48.0).abs() < 1e-9,
        "sm86: 12 GB/s per lane"
    );
    assert_eq!(numas(&t), vec![-1, -1]);
    // eno1 hangs off the CPU with no PCI location
    assert_eq!(t.nics().count(), 1);
    let nic = t.nics().next().unwrap();
    assert_eq!(t.node(nic).busid(), None);
    assert!(matches!(
        t.node(t.node(nic).parent.unwrap()).kind,
        NodeKind::Cpu(_)
    ));
    assert_eq!(nics_sharing_switch(&t), vec![Vec::<String>::new(); 2]);
    let net = t.net(t.nets()[0]).unwrap();
    assert_eq!(
        (net.name.as_str(), net.speed_mbps, net.guid),
        ("eno1", Some(10_000), Some(0))
    );
}

#[test]
fn panlichen_rtx3090_two_switchtec_switches_nic_near_gpus_4_to_7() {
    let t = load("panlichen-8x-rtx3090-switchtec.xml");
    assert_eq!(t.gpus().len(), 8);
    assert_eq!(lanes(&t), vec![0; 8]);
    assert!(
        t.gpus()
            .iter()
            .all(|&g| t.gpu(g).unwrap().nvlink == NvlinkInfo::Known),
        "an NCCL dump: no entry = no NVLink"
    );
    assert!(
        t.gpus()
            .iter()
            .all(|&g| t.gpu(g).unwrap().gdr == Some(false))
    );
    assert_eq!(t.nvswitches().count(), 0);
    assert_eq!(t.nics().count(), 1);
    assert_eq!(t.pci_switches().count(), 2);
    assert_eq!(numas(&t), vec![0, 0, 0, 0, 1, 1, 1, 1]);
    let share = nics_sharing_switch(&t);
    for (i, s) in share.iter().enumerate() {
        let expect: Vec<String> = if i >= 4 {
            vec!["mlx5_0".into()]
        } else {
            vec![]
        };
        assert_eq!(s, &expect, "GPU{i}");
    }
    let net = t.net(t.nets()[0]).unwrap();
    assert_eq!(
        (net.speed_mbps, net.gdr, net.maxconn),
        (Some(56_000), false, Some(262_144))
    );
}

#[test]
fn rwkv_rtx4090_gpus_on_different_numa_nodes() {
    let t = load("rwkvinllama-2x-rtx4090-cx4.xml");
    assert_eq!(t.gpus().len(), 2);
    assert_eq!(lanes(&t), vec![0, 0]);
    assert_eq!(t.nvswitches().count(), 0);
    assert_eq!(
        numas(&t),
        vec![3, 2],
        "different NUMA nodes: GPU pair path is SYS"
    );
    assert_eq!(t.nics().count(), 1, "one dual-port CX-4");
    assert_eq!(t.nets().len(), 2);
    let nic = t.nics().next().unwrap();
    assert_eq!(nic_name(&t, nic), "mlx5_0+mlx5_1");
    assert_eq!(t.numa_of(nic), 3);
    assert_eq!(
        nics_sharing_switch(&t),
        vec![Vec::<String>::new(); 2],
        "GPUs and NIC hang off the CPU"
    );
    assert!(
        t.gpus()
            .iter()
            .all(|&g| t.gpu(g).unwrap().gdr == Some(false))
    );
    assert!(t.nets().iter().all(|&n| !t.net(n).unwrap().gdr));
    // the two CPUs are linked to each other
    let cpus: Vec<NodeIndex> = t.cpus().collect();
    assert!(
        t.graph
            .edges_connecting(cpus[0], cpus[1])
            .any(|e| e.weight().kind == LinkKind::Sys)
    );
}

fn counts(t: &Topology) -> (usize, usize, usize, usize, usize, Vec<u32>) {
    (
        t.gpus().len(),
        t.nics().count(),
        t.nets().len(),
        t.nvswitches().count(),
        t.graph.edge_count(),
        lanes(t),
    )
}

#[test]
fn round_trip_is_stable_for_every_fixture() {
    let dir = tempfile::tempdir().unwrap();
    for f in loadable() {
        let first = xml_of(&f);
        let written = dir.path().join(f.file_name().unwrap());
        topo_cmd()
            .args(["xml", "--from"])
            .arg(&f)
            .arg("-o")
            .arg(&written)
            .assert()
            .success();
        assert_eq!(
            std::fs::read_to_string(&written).unwrap(),
            first,
            "-o writes what stdout shows"
        );
        let second = xml_of(&written);
        assert_eq!(
            first,
            second,
            "{}: read → write → read → write differs",
            f.display()
        );

        let a = ncclxml::load_file(&f).unwrap();
        let b = ncclxml::parse_str(&first, "written.xml").unwrap();
        assert_eq!(counts(&a), counts(&b), "{}", f.display());
        assert_eq!(
            topo_source::ncclxml::write(&a).unwrap(),
            topo_source::ncclxml::write(&a).unwrap()
        );
        assert_eq!(topo_source::ncclxml::write(&b).unwrap(), first);
    }
}

#[test]
fn written_xml_snapshots() {
    for (name, file) in [
        ("ibm_cloud_gx3d_h100", "ibm-cloud-gx3d-h100-topo.xml"),
        (
            "nccl_miner_2x_rtxa6000",
            "nccl-miner-2x-rtxa6000-nvlink-bridge.xml",
        ),
        ("azure_ndv4_skeleton", "azure-ndv4-topo.xml"),
    ] {
        insta::assert_snapshot!(name, xml_of(&fixture(file)));
    }
}

/// Runs `topo xml --from <path>` and checks the one-line error contract.
fn assert_bad_input(path: &Path, needle: &str) {
    let out = topo_cmd()
        .args(["xml", "--from"])
        .arg(path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", path.display());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains(needle), "{needle}: {err}");
    assert!(!err.contains("internal error"), "{err}");
}

#[test]
fn bad_input_is_one_error_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    assert_bad_input(&dir.path().join("missing.xml"), "no such file or directory");

    let empty = dir.path().join("empty.xml");
    std::fs::write(&empty, "").unwrap();
    assert_bad_input(&empty, "line 1 column 1: empty file");

    let v2 = dir.path().join("v2.xml");
    std::fs::write(
        &v2,
        "<system version=\"2\">\n  <cpu numaid=\"0\"/>\n</system>\n",
    )
    .unwrap();
    assert_bad_input(&v2, "<system version=\"2\"> is not supported");

    let garbage = dir.path().join("garbage.xml");
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&garbage, bytes).unwrap();
    assert_bad_input(&garbage, "cannot parse");

    let text_garbage = dir.path().join("text.xml");
    std::fs::write(&text_garbage, "NCCL INFO not an xml file\n").unwrap();
    assert_bad_input(&text_garbage, "line 1 column 1: expected '<', found 'N'");

    let no_system = dir.path().join("graph.xml");
    std::fs::write(&no_system, "<graphs version=\"1\"/>\n").unwrap();
    assert_bad_input(&no_system, "no <system> element");
}

#[test]
fn unreadable_file_is_one_line_with_path_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let e = ncclxml::load_file(&dir.path().join("nope.xml")).unwrap_err();
    let msg = topo_source::error::one_line(&e);
    assert!(
        msg.starts_with("cannot read ") && msg.ends_with("nope.xml: no such file or directory"),
        "{msg}"
    );
    let e = ncclxml::load_file(dir.path()).unwrap_err();
    assert!(topo_source::error::one_line(&e).ends_with("is a directory"));
}

/// A fixture with one mutation applied.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    Flip(usize, u8),
    Attr(usize, String),
}

fn mutate(text: &str, m: &Mutation) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    match m {
        Mutation::Truncate(at) => bytes.truncate(at % (bytes.len() + 1)),
        Mutation::Flip(at, b) => {
            let i = at % bytes.len();
            bytes[i] = *b;
        }
        Mutation::Attr(which, value) => {
            let starts: Vec<usize> = text.match_indices("=\"").map(|(i, _)| i + 2).collect();
            if let Some(&s) = starts.get(which % starts.len().max(1)) {
                let end = s + text[s..].find('"').unwrap_or(0);
                bytes.splice(s..end, value.bytes());
            }
        }
    }
    bytes
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::Flip(a, b)),
        (
            any::<usize>(),
            prop_oneof![
                Just(String::new()),
                Just("-1".to_string()),
                Just("0x".to_string()),
                Just("99999999999999999999999".to_string()),
                Just("fffffff:ff:ff.0".to_string()),
                Just("0000:00:00.0".to_string()),
                Just("&amp;&#xffffff;&".to_string()),
                Just("1e999".to_string()),
                "[ -!#-~]{0,16}",
            ]
        )
            .prop_map(|(a, v)| Mutation::Attr(a, v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    /// Damaged fixtures never panic: they load (and then write and re-read) or fail cleanly.
    #[test]
    fn damaged_fixtures_load_or_fail_cleanly(pick in 0usize..9, m in mutation()) {
        let mut files: Vec<PathBuf> = loadable();
        files.push(fixture(TRUNCATED));
        let path = &files[pick % files.len()];
        let text = std::fs::read_to_string(path).unwrap();
        let bytes = mutate(&text, &m);
        match ncclxml::tree::decode_utf8(&bytes) {
            Err(e) => prop_assert!(e.pos.line >= 1),
            Ok(s) => match ncclxml::parse_str(s, "fuzz.xml") {
                Ok(t) => {
                    let x = topo_source::ncclxml::write(&t).unwrap();
                    let again = ncclxml::parse_str(&x, "rewritten.xml");
                    prop_assert!(again.is_ok(), "written XML does not read back: {:?}\n{x}", again.err());
                    let y = topo_source::ncclxml::write(&again.unwrap()).unwrap();
                    prop_assert_eq!(y, x, "writing is not idempotent");
                }
                Err(e) => {
                    let msg = topo_source::error::one_line(&e);
                    prop_assert!(msg.starts_with("cannot parse fuzz.xml: line "), "{msg}");
                    prop_assert!(topo_source::error::kind(&e).is_some(), "{e:#}");
                }
            },
        }
    }
}

/// NCCL's own dumps (and the ndv4 skeleton) come back out byte for byte; the one difference
/// is `latency`, which NCCL ≤2.23 wrote as `%f` and 2.24+ writes as an integer.
#[test]
fn real_dumps_are_reproduced_byte_for_byte() {
    for file in [
        "ibm-cloud-gx3d-h100-topo.xml",
        "nccl-miner-2x-rtxa6000-nvlink-bridge.xml",
        "panlichen-8x-rtx3090-switchtec.xml",
        "rwkvinllama-2x-rtx4090-cx4.xml",
        "azure-ndv4-topo.xml",
    ] {
        let original = std::fs::read_to_string(fixture(file)).unwrap();
        let expected = original.replace("latency=\"0.000000\"", "latency=\"0\"");
        assert_eq!(xml_of(&fixture(file)), expected, "{file}");
    }
}

/// `--nodes 2` doubles the board; each copy keeps its own host_hash and reads back as a host.
#[test]
fn multi_host_topologies_write_one_cpu_per_numa_per_host() {
    let f = fixture("ibm-cloud-gx3d-h100-topo.xml");
    let out = topo_cmd()
        .args(["xml", "--nodes", "2", "--from"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success());
    let x = String::from_utf8(out.stdout).unwrap();
    let cpus: Vec<&str> = x.lines().filter(|l| l.starts_with("  <cpu ")).collect();
    assert_eq!(cpus.len(), 4);
    let hashes: std::collections::BTreeSet<&str> =
        cpus.iter().map(|l| l.split('"').nth(1).unwrap()).collect();
    assert_eq!(hashes.len(), 2, "{cpus:?}");
    let t = ncclxml::parse_str(&x, "two.xml").unwrap();
    assert_eq!(t.host_count(), 2);
    assert_eq!(t.gpus().len(), 16);
    assert_eq!(t.nvswitches().count(), 8);
    assert_eq!(lanes(&t), vec![18; 16]);
    assert_eq!(t.node(t.gpus()[8]).host, 1);
    assert_eq!(topo_source::ncclxml::write(&t).unwrap(), x);
}

/// Issue 44: every InfiniBand controller of a cloud skeleton becomes one IB port of unknown
/// speed on its own NIC, numbered in bus-id order; a file that lists its ports keeps them as
/// NCCL wrote them (its 0x0207 devices are NICs NCCL did open).
#[test]
fn skeleton_infiniband_controllers_become_ib_ports_of_unknown_speed() {
    for name in ["azure-ndv4-topo.xml", "azure-ndv5-topo.xml"] {
        let t = load(name);
        let nets = t.nets();
        assert_eq!(nets.len(), 8, "{name}");
        for (i, &n) in nets.iter().enumerate() {
            let x = t.net(n).unwrap();
            assert_eq!(x.dev, i as i32, "{name}");
            assert_eq!(x.name, format!("hca@010{}:00:00.0", i + 1), "{name}");
            assert_eq!(x.speed_mbps, None, "{name}: speed stays unknown");
            assert!(x.gdr_unstated, "{name}: GDR stays unknown");
        }
        assert!(
            t.warnings
                .iter()
                .any(|w| w.contains("assumed to be an IB HCA")),
            "{name}: {:?}",
            t.warnings
        );
    }
    for name in [
        "panlichen-8x-rtx3090-switchtec.xml",
        "rwkvinllama-2x-rtx4090-cx4.xml",
    ] {
        let t = load(name);
        assert!(
            t.nets()
                .iter()
                .all(|&n| !t.net(n).unwrap().name.starts_with("hca@")),
            "{name}"
        );
    }
}

/// The two ports of the fixture's ConnectX-4 card (one `<nic>`, as NCCL's dump lists them) are
/// one network device from NCCL 2.20 (its IB plugin, then from 2.21 `ncclTopoMakeVNics`): its
/// name joins the ports' and its speed is theirs summed. 2.19, `NCCL_NET_MERGE_LEVEL=LOC` and
/// `NCCL_IB_MERGE_NICS=0` keep them apart, and the Environment section says what each changed.
#[test]
fn ports_of_one_card_are_one_device_from_2_20() {
    let f = crate::util::fixture("fixtures/xml/rwkvinllama-2x-rtx4090-cx4.xml");
    let f = f.to_string_lossy();
    let ring_nets = |version: &str, env: &[&str]| -> (Vec<String>, serde_json::Value) {
        let mut args = vec!["--from", &f, "--nodes", "2"];
        for e in env {
            args.extend(["--env", e]);
        }
        let (doc, _) = crate::util::plan_doc_at(version, &args);
        let nets = doc["graphs"]["ring"]["nets"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c.as_array().unwrap().iter())
            .filter_map(|n| n.as_str().map(String::from))
            .collect();
        (nets, doc["env"].clone())
    };
    for version in ["2.20", "2.28"] {
        let (fused, _) = ring_nets(version, &[]);
        assert!(
            fused.iter().all(|n| n == "mlx5_0+mlx5_1"),
            "{version}: {fused:?}"
        );
    }
    let (old, _) = ring_nets("2.19", &[]);
    assert!(old.iter().all(|n| !n.contains('+')), "{old:?}");
    for (version, off) in [
        ("2.28", "NCCL_NET_MERGE_LEVEL=LOC"),
        ("2.28", "NCCL_IB_MERGE_NICS=0"),
        ("2.20", "NCCL_IB_MERGE_NICS=0"),
    ] {
        let (apart, env) = ring_nets(version, &[off]);
        assert!(apart.iter().all(|n| !n.contains('+')), "{off}: {apart:?}");
        assert_eq!(env[0]["status"], "changed", "{off}: {env}");
    }
}
