//! Built-in hardware profiles: each loads into the model with the shape its documentation
//! claims, `--nodes` replicates it, and bad profile files fail with one clear error line.

use assert_cmd::Command;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use std::fmt::Write as _;
use topo_model::{BwConstants, LinkKind, NodeKind, Topology};
use topo_nccl::system::{LinkType, System};
use topo_source::{SourceSpec, load, profile};

fn builtin(name: &str) -> Topology {
    load(&SourceSpec {
        profile: Some(name.into()),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

/// What each profile's description promises.
struct Expect {
    name: &'static str,
    gpus: usize,
    lanes_per_gpu: u32,
    nvswitch_chips: usize,
    nics: usize,
    ports: usize,
    numa: usize,
    gpu_pcie_bw: f64,
    /// NVLink GB/s per GPU in NCCL's system graph (default constants, 2.27+).
    nvl_bw_per_gpu: f64,
    /// GPUs whose nearest common PCI ancestor with some NIC is a PCI switch.
    gpus_sharing_switch_with_nic: usize,
}

const EXPECT: &[Expect] = &[
    Expect {
        name: "alcf-polaris",
        gpus: 4,
        lanes_per_gpu: 12,
        nvswitch_chips: 0,
        nics: 2,
        ports: 2,
        numa: 1,
        gpu_pcie_bw: 24.0,
        nvl_bw_per_gpu: 240.0,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "nrel-kestrel-h100",
        gpus: 4,
        lanes_per_gpu: 18,
        nvswitch_chips: 0,
        nics: 2,
        ports: 2,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 370.8,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "alps-gh200",
        gpus: 4,
        lanes_per_gpu: 18,
        nvswitch_chips: 0,
        nics: 4,
        ports: 4,
        numa: 4,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 370.8,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "aws-p4de",
        gpus: 8,
        lanes_per_gpu: 12,
        nvswitch_chips: 6,
        nics: 4,
        ports: 4,
        numa: 2,
        gpu_pcie_bw: 12.0,
        nvl_bw_per_gpu: 240.0,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "aws-p5en",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 4,
        nics: 16,
        ports: 16,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 370.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "aws-p6-b200",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 2,
        nics: 8,
        ports: 8,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 721.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "gcp-a3-high",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 4,
        nics: 4,
        ports: 4,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 370.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "pcie-2x-l40s",
        gpus: 2,
        lanes_per_gpu: 0,
        nvswitch_chips: 0,
        nics: 2,
        ports: 2,
        numa: 2,
        gpu_pcie_bw: 24.0,
        nvl_bw_per_gpu: 0.0,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "aws-p5",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 4,
        nics: 32,
        ports: 32,
        numa: 1,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 370.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "aws-p4d",
        gpus: 8,
        lanes_per_gpu: 12,
        nvswitch_chips: 6,
        nics: 4,
        ports: 4,
        numa: 2,
        gpu_pcie_bw: 12.0,
        nvl_bw_per_gpu: 240.0,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "azure-nd-h100-v5",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 4,
        nics: 8,
        ports: 8,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 370.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "azure-nd-h200-v5",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 4,
        nics: 8,
        ports: 8,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 370.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "hgx-b300",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 2,
        nics: 8,
        ports: 8,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 721.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "hgx-h800",
        gpus: 8,
        lanes_per_gpu: 8,
        nvswitch_chips: 4,
        nics: 8,
        ports: 8,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 164.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "gh200",
        gpus: 1,
        lanes_per_gpu: 0,
        nvswitch_chips: 0,
        nics: 1,
        ports: 1,
        numa: 1,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 0.0,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "4x-rtx5090",
        gpus: 4,
        lanes_per_gpu: 0,
        nvswitch_chips: 0,
        nics: 1,
        ports: 1,
        numa: 1,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 0.0,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "8x-rtx-pro-6000",
        gpus: 8,
        lanes_per_gpu: 0,
        nvswitch_chips: 0,
        nics: 4,
        ports: 4,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 0.0,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "pcie-8x-a100-nvbridge",
        gpus: 8,
        lanes_per_gpu: 12,
        nvswitch_chips: 0,
        nics: 2,
        ports: 2,
        numa: 2,
        gpu_pcie_bw: 24.0,
        nvl_bw_per_gpu: 240.0,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "pcie-8x-h100-nvbridge",
        gpus: 8,
        lanes_per_gpu: 12,
        nvswitch_chips: 0,
        nics: 2,
        ports: 2,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 247.2,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "pcie-8x-a40-nvbridge",
        gpus: 8,
        lanes_per_gpu: 4,
        nvswitch_chips: 0,
        nics: 2,
        ports: 2,
        numa: 2,
        gpu_pcie_bw: 24.0,
        nvl_bw_per_gpu: 48.0,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "dgx-h100",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 4,
        nics: 10,
        ports: 12,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 370.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "hgx-h200",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 4,
        nics: 8,
        ports: 8,
        numa: 4,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 370.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "dgx-a100",
        gpus: 8,
        lanes_per_gpu: 12,
        nvswitch_chips: 6,
        nics: 10,
        ports: 12,
        numa: 6,
        gpu_pcie_bw: 24.0,
        nvl_bw_per_gpu: 240.0,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "dgx-b200",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 2,
        nics: 8,
        ports: 8,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 721.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "gcp-a4",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 2,
        nics: 8,
        ports: 8,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 721.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "gcp-a3-mega",
        gpus: 8,
        lanes_per_gpu: 18,
        nvswitch_chips: 4,
        nics: 8,
        ports: 8,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 370.8,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "azure-nd-gb200-v6",
        gpus: 4,
        lanes_per_gpu: 18,
        nvswitch_chips: 1,
        nics: 4,
        ports: 4,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 721.8,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "gb200-nvl72",
        gpus: 4,
        lanes_per_gpu: 18,
        nvswitch_chips: 1,
        nics: 6,
        ports: 6,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 721.8,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "gb300-nvl72",
        gpus: 4,
        lanes_per_gpu: 18,
        nvswitch_chips: 1,
        nics: 6,
        ports: 6,
        numa: 2,
        gpu_pcie_bw: 48.0,
        nvl_bw_per_gpu: 721.8,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "pcie-8x-l40s",
        gpus: 8,
        lanes_per_gpu: 0,
        nvswitch_chips: 0,
        nics: 2,
        ports: 2,
        numa: 2,
        gpu_pcie_bw: 24.0,
        nvl_bw_per_gpu: 0.0,
        gpus_sharing_switch_with_nic: 4,
    },
    Expect {
        name: "dgx-v100",
        gpus: 8,
        lanes_per_gpu: 6,
        nvswitch_chips: 0,
        nics: 4,
        ports: 4,
        numa: 2,
        gpu_pcie_bw: 12.0,
        nvl_bw_per_gpu: 120.0,
        gpus_sharing_switch_with_nic: 8,
    },
    Expect {
        name: "2x-rtx2080ti-nvbridge",
        gpus: 2,
        lanes_per_gpu: 2,
        nvswitch_chips: 0,
        nics: 0,
        ports: 0,
        numa: 1,
        gpu_pcie_bw: 6.0,
        nvl_bw_per_gpu: 40.0,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "kalavai-rtx4090",
        gpus: 5,
        lanes_per_gpu: 0,
        nvswitch_chips: 0,
        nics: 0,
        ports: 0,
        numa: 1,
        gpu_pcie_bw: 24.0,
        nvl_bw_per_gpu: 0.0,
        gpus_sharing_switch_with_nic: 0,
    },
    Expect {
        name: "2x-rtx4090",
        gpus: 2,
        lanes_per_gpu: 0,
        nvswitch_chips: 0,
        nics: 1,
        ports: 2,
        numa: 2,
        gpu_pcie_bw: 24.0,
        nvl_bw_per_gpu: 0.0,
        gpus_sharing_switch_with_nic: 0,
    },
];

fn ancestors(t: &Topology, mut n: NodeIndex) -> Vec<NodeIndex> {
    let mut v = vec![n];
    while let Some(p) = t.node(n).parent {
        v.push(p);
        n = p;
    }
    v
}

/// True when `a` and `b` meet below the CPU, at a PCI switch.
fn share_switch(t: &Topology, a: NodeIndex, b: NodeIndex) -> bool {
    let up_b = ancestors(t, b);
    ancestors(t, a)
        .into_iter()
        .find(|x| up_b.contains(x))
        .is_some_and(|x| matches!(t.node(x).kind, NodeKind::PciSwitch(_)))
}

#[test]
fn every_builtin_is_covered_here() {
    let mut names: Vec<&str> = EXPECT.iter().map(|e| e.name).collect();
    names.sort();
    assert_eq!(names, profile::builtin_names());
}

#[test]
fn builtin_profiles_have_the_documented_shape() {
    for e in EXPECT {
        let t = builtin(e.name);
        let ctx = e.name;
        assert_eq!(t.source.kind, topo_model::SourceKind::Profile, "{ctx}");
        assert_eq!(t.source.origin.as_deref(), Some(e.name), "{ctx}");
        let gpus = t.gpus();
        assert_eq!(gpus.len(), e.gpus, "{ctx} gpus");
        assert_eq!(
            t.nvswitches().count(),
            e.nvswitch_chips,
            "{ctx} nvswitch chips"
        );
        assert_eq!(t.nics().count(), e.nics, "{ctx} nics");
        assert_eq!(t.nets().len(), e.ports, "{ctx} ports");
        assert_eq!(t.cpus().count(), e.numa, "{ctx} numa nodes");
        // NVML indices are 0..n in bus order unless the profile says otherwise.
        let devs: Vec<i32> = gpus.iter().map(|&g| t.gpu(g).unwrap().dev).collect();
        assert_eq!(devs, (0..e.gpus as i32).collect::<Vec<_>>(), "{ctx}");
        // Port devs are 0..n and unique.
        let mut net_devs: Vec<i32> = t.nets().iter().map(|&n| t.net(n).unwrap().dev).collect();
        net_devs.sort();
        assert_eq!(net_devs, (0..e.ports as i32).collect::<Vec<_>>(), "{ctx}");

        let sys = System::build(&t, &BwConstants::default());
        for &g in &gpus {
            let gpu = t.gpu(g).unwrap();
            let lanes: u32 = t.nvlinks(g).iter().map(|l| l.1).sum();
            assert_eq!(lanes, e.lanes_per_gpu, "{ctx} lanes of {}", gpu.busid);
            assert_eq!(gpu.pcie.bw(), e.gpu_pcie_bw, "{ctx} pcie of {}", gpu.busid);
            // The parent link carries the GPU's PCIe bandwidth in both directions.
            let parent = t.node(g).parent.unwrap();
            let up: Vec<f64> = t
                .graph
                .edges_connecting(g, parent)
                .filter(|x| x.weight().kind == LinkKind::Pci)
                .map(|x| x.weight().bw)
                .collect();
            assert_eq!(up, vec![e.gpu_pcie_bw], "{ctx}");
        }
        for r in 0..sys.gpus.len() {
            let nvl: f64 = sys
                .gpu(r)
                .links
                .iter()
                .filter(|l| l.kind == LinkType::Nvl)
                .map(|l| l.bw)
                .sum();
            assert!(
                (nvl - e.nvl_bw_per_gpu).abs() < 1e-6,
                "{ctx} rank {r}: nvlink {nvl}"
            );
        }
        assert_eq!(
            sys.nvs.len(),
            usize::from(e.nvswitch_chips > 0),
            "{ctx}: chips merge into one NVS"
        );
        let nics: Vec<NodeIndex> = t.nics().collect();
        let sharing = gpus
            .iter()
            .filter(|&&g| nics.iter().any(|&n| share_switch(&t, g, n)))
            .count();
        assert_eq!(
            sharing, e.gpus_sharing_switch_with_nic,
            "{ctx} gpus sharing a switch with a nic"
        );
    }
}

#[test]
fn rail_aligned_profiles_pair_gpu_i_with_mlx5_i() {
    for name in ["dgx-h100", "hgx-h200", "dgx-b200"] {
        let t = builtin(name);
        for (i, &g) in t.gpus().iter().enumerate() {
            let sw = t.node(g).parent.unwrap();
            let ports: Vec<String> = t
                .children(sw)
                .into_iter()
                .filter(|&c| matches!(t.node(c).kind, NodeKind::Nic(_)))
                .flat_map(|nic| t.children(nic))
                .filter_map(|p| t.net(p).map(|n| n.name.clone()))
                .collect();
            assert_eq!(ports, vec![format!("mlx5_{i}")], "{name} gpu {i}");
            let net = t
                .nets()
                .into_iter()
                .find(|&n| t.net(n).unwrap().name == format!("mlx5_{i}"))
                .unwrap();
            assert_eq!(t.net(net).unwrap().bw(), 50.0, "{name}: 400G port");
            assert_eq!(t.net(net).unwrap().dev, i as i32, "{name}");
        }
    }
}

#[test]
fn cpu_identity_drives_the_inter_socket_bandwidth() {
    // SYS bandwidth follows the source CPU: SPR 22, ERP 40, AMD 16, BDW 6 (nccl-model.md 3.4).
    for (name, bw) in [
        ("dgx-h100", 22.0),
        ("dgx-b200", 40.0),
        ("hgx-h200", 40.0),
        ("dgx-a100", 16.0),
        ("dgx-v100", 6.0),
    ] {
        let t = builtin(name);
        let sys: Vec<f64> = t
            .graph
            .edge_references()
            .filter(|e| e.weight().kind == LinkKind::Sys)
            .map(|e| e.weight().bw)
            .collect();
        let n = t.cpus().count();
        assert_eq!(sys.len(), n * (n - 1), "{name}");
        assert!(sys.iter().all(|&b| b == bw), "{name}: {sys:?}");
    }
}

#[test]
fn two_nodes_double_everything() {
    for name in ["dgx-h100", "dgx-v100"] {
        let one = builtin(name);
        let spec = SourceSpec {
            profile: Some(name.into()),
            nodes: Some(2),
            ..Default::default()
        };
        let two = load(&spec).unwrap();
        assert_eq!(two.host_count(), 2, "{name}");
        assert_eq!(two.gpus().len(), 2 * one.gpus().len(), "{name}");
        assert_eq!(two.nets().len(), 2 * one.nets().len(), "{name}");
        assert_eq!(two.nics().count(), 2 * one.nics().count(), "{name}");
        assert_eq!(two.cpus().count(), 2 * one.cpus().count(), "{name}");
        assert_eq!(
            two.nvswitches().count(),
            2 * one.nvswitches().count(),
            "{name}"
        );
        assert_eq!(
            two.pci_switches().count(),
            2 * one.pci_switches().count(),
            "{name}"
        );
        assert_eq!(two.graph.edge_count(), 2 * one.graph.edge_count(), "{name}");
        let names: Vec<Option<&str>> = two.hosts.iter().map(|h| h.name.as_deref()).collect();
        assert_eq!(
            names,
            vec![
                Some(format!("{name}-0").as_str()),
                Some(format!("{name}-1").as_str())
            ]
        );
        let hosts: Vec<u16> = two.gpus().iter().map(|&g| two.node(g).host).collect();
        let n = one.gpus().len();
        assert!(
            hosts[..n].iter().all(|&h| h == 0) && hosts[n..].iter().all(|&h| h == 1),
            "{name}: {hosts:?}"
        );
        // No link crosses hosts: the copies meet only through the network.
        for e in two.graph.edge_references() {
            assert_eq!(
                two.node(e.source()).host,
                two.node(e.target()).host,
                "{name}"
            );
        }
        // Bus ids resolve per host.
        let b0 = two.gpu(two.gpus()[0]).unwrap().busid;
        assert_eq!(two.find(1, b0), Some(two.gpus()[n]), "{name}");
        let sys = System::build(&two, &BwConstants::default());
        assert_eq!(sys.nhosts, 2);
        assert_eq!(
            sys.nvs.len(),
            usize::from(one.nvswitches().count() > 0) * 2,
            "{name}"
        );
        assert_eq!(two.source.origin.as_deref(), Some(name));
    }
}

#[test]
fn a_profile_file_loads_like_the_builtin() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.yaml");
    std::fs::write(&path, profile::builtin_text("dgx-a100").unwrap()).unwrap();
    let t = load(&SourceSpec {
        from: Some(path.clone()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(t.source.origin.as_deref(), Some(path.to_str().unwrap()));
    let body = |t: &Topology| dump(t).lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&t), body(&builtin("dgx-a100")));
    // A file without a .yaml suffix is sniffed as a profile too.
    let bare = dir.path().join("mine");
    std::fs::copy(&path, &bare).unwrap();
    assert_eq!(
        load(&SourceSpec {
            from: Some(bare),
            ..Default::default()
        })
        .unwrap()
        .gpus()
        .len(),
        8
    );
}

/// Runs `topo xml ARGS` and returns stderr, asserting exit 2 and exactly one `error:` line.
fn fails(args: &[&str]) -> String {
    let out = Command::cargo_bin("topo")
        .unwrap()
        .arg("xml")
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}");
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("error: ")).count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn unknown_profile_lists_the_available_ones() {
    let err = fails(&["--profile", "nope"]);
    assert!(err.starts_with("error: unknown profile 'nope'\n"), "{err}");
    assert!(
        err.contains("hint: available profiles: 2x-rtx2080ti-nvbridge, 2x-rtx4090, 4x-rtx5090, 8x-rtx-pro-6000, alcf-polaris, alps-gh200, aws-p4d"),
        "{err}"
    );
}

#[test]
fn malformed_yaml_names_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        &dir,
        "bad.yaml",
        "name: x\ncpu: {arch: x86_64}\nnuma:\n  - id: 0\n    gpus: [\"0000:11:00.0\"\n",
    );
    let err = fails(&["--from", &p]);
    assert!(
        err.starts_with(&format!(
            "error: cannot parse {p}: line 6 column 1: did not find expected"
        )),
        "{err}"
    );
}

#[test]
fn unknown_field_is_an_error_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let text = profile::builtin_text("dgx-b200")
        .unwrap()
        .replace("gdr: true}", "gpudirect: true}");
    let p = write(&dir, "typo.yaml", &text);
    let err = fails(&["--from", &p]);
    let line = text.lines().position(|l| l.contains("gpudirect")).unwrap() + 1;
    assert!(
        err.starts_with(&format!("error: cannot parse {p}: line {line} column ")),
        "{err}"
    );
    assert!(
        err.contains("defaults.gpu: unknown field `gpudirect`, expected one of"),
        "{err}"
    );
}

#[test]
fn nvlink_to_an_unknown_gpu_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let text = profile::builtin_text("dgx-v100")
        .unwrap()
        .replace("{a: 6, b: 7, lanes: 2}", "{a: 6, b: 8, lanes: 2}");
    let p = write(&dir, "nv.yaml", &text);
    let err = fails(&["--from", &p]);
    assert!(
        err.starts_with(&format!("error: invalid profile {p}: nvlink.pairs[15] names gpu index 8, but the gpus are 0..7\n")),
        "{err}"
    );
    let text = profile::builtin_text("dgx-v100").unwrap().replace(
        "{a: 6, b: 7, lanes: 2}",
        "{a: 6, b: \"0000:99:00.0\", lanes: 2}",
    );
    let p = write(&dir, "nv2.yaml", &text);
    assert!(
        fails(&["--from", &p]).contains("names 0000:99:00.0, which is not a gpu of this profile")
    );
}

#[test]
fn too_many_lanes_and_duplicate_bus_ids_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let text = profile::builtin_text("dgx-a100")
        .unwrap()
        .replace("lanes: [2, 2, 2, 2, 2, 2]", "lanes: [2, 2, 2, 2, 2, 3]");
    let p = write(&dir, "lanes.yaml", &text);
    let err = fails(&["--from", &p]);
    assert!(
        err.contains(
            "gpu 0000:07:00.0 has 13 nvlink lanes, more than the 12 an sm 80 gpu can have"
        ),
        "{err}"
    );
    let text = profile::builtin_text("hgx-h200")
        .unwrap()
        .replace("\"0000:2a:00.0\"", "\"0000:18:00.0\"");
    let p = write(&dir, "dup.yaml", &text);
    let err = fails(&["--from", &p]);
    assert!(
        err.contains("duplicate pci bus id 0000:18:00.0 (gpu 0000:18:00.0 and gpu 0000:18:00.0)"),
        "{err}"
    );
}

/// A compact, stable text form of the model for snapshot review: the PCI tree per CPU with
/// link bandwidths, then NVLink and SYS links.
fn dump(t: &Topology) -> String {
    fn id(v: Option<u16>) -> String {
        v.map(|x| format!("{x:04x}"))
            .unwrap_or_else(|| "----".into())
    }
    fn up_bw(t: &Topology, n: NodeIndex) -> String {
        let Some(p) = t.node(n).parent else {
            return String::new();
        };
        t.graph
            .edges_connecting(p, n)
            .map(|e| format!(" {:?}[{:.1}]", e.weight().kind, e.weight().bw))
            .collect::<Vec<_>>()
            .join("")
    }
    fn walk(t: &Topology, n: NodeIndex, depth: usize, out: &mut String) {
        let pad = "  ".repeat(depth);
        let line = match &t.node(n).kind {
            NodeKind::Cpu(c) => format!(
                "cpu numa {} cpus {} affinity {} {} {} {}/{}",
                c.numa,
                c.cpus.as_deref().unwrap_or("-"),
                c.affinity.as_deref().unwrap_or("-"),
                c.arch.as_deref().unwrap_or("-"),
                c.vendor.as_deref().unwrap_or("-"),
                c.family.unwrap_or(0),
                c.model.unwrap_or(0)
            ),
            NodeKind::PciSwitch(s) => format!(
                "switch {} {}:{} sub {}:{} {} x{}",
                s.busid,
                id(s.vendor),
                id(s.device),
                id(s.subsystem_vendor),
                id(s.subsystem_device),
                s.pcie.speed.as_deref().unwrap_or("-"),
                s.pcie.width.unwrap_or(0)
            ),
            NodeKind::Gpu(g) => format!(
                "gpu {} dev {} sm {} '{}' {} MiB class {:06x} {}:{} sub {}:{} gdr {} {} x{}",
                g.busid,
                g.dev,
                g.sm.unwrap_or(0),
                g.name.as_deref().unwrap_or("-"),
                g.memory_bytes.unwrap_or(0) >> 20,
                g.class,
                id(g.vendor),
                id(g.device),
                id(g.subsystem_vendor),
                id(g.subsystem_device),
                g.gdr.map(|x| x.to_string()).unwrap_or("-".into()),
                g.pcie.speed.as_deref().unwrap_or("-"),
                g.pcie.width.unwrap_or(0)
            ),
            NodeKind::Nic(x) => format!(
                "nic {} class {:06x} {}:{} sub {}:{} {} x{}",
                x.busid.map(|b| b.to_string()).unwrap_or("-".into()),
                x.class,
                id(x.vendor),
                id(x.device),
                id(x.subsystem_vendor),
                id(x.subsystem_device),
                x.pcie.speed.as_deref().unwrap_or("-"),
                x.pcie.width.unwrap_or(0)
            ),
            NodeKind::Net(x) => format!(
                "net {} dev {} port {} {} Mbit/s {} gdr {} guid {}",
                x.name,
                x.dev,
                x.port,
                x.speed_mbps.unwrap_or(0),
                x.link_layer.as_deref().unwrap_or("-"),
                x.gdr,
                x.guid.map(|g| format!("{g:#x}")).unwrap_or("-".into())
            ),
            NodeKind::PciDevice(d) => format!("device {} class {:06x}", d.busid, d.class),
            NodeKind::NvSwitch(s) => format!("nvswitch {:?}", s.busid),
        };
        let _ = writeln!(out, "{pad}{line}{}", up_bw(t, n));
        for c in t.children(n) {
            walk(t, c, depth + 1, out);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "source {} {}",
        t.source.kind,
        t.source.origin.as_deref().unwrap_or("-")
    );
    for (i, h) in t.hosts.iter().enumerate() {
        let _ = writeln!(out, "host {i} {}", h.name.as_deref().unwrap_or("-"));
    }
    for c in t.cpus() {
        walk(t, c, 0, &mut out);
    }
    for s in t.nvswitches() {
        if let NodeKind::NvSwitch(x) = &t.node(s).kind {
            let _ = writeln!(
                out,
                "nvswitch {} {}:{}",
                x.busid.map(|b| b.to_string()).unwrap_or("-".into()),
                id(x.vendor),
                id(x.device)
            );
        }
    }
    let label = |n: NodeIndex| match &t.node(n).kind {
        NodeKind::Gpu(g) => format!("gpu{}", g.dev),
        NodeKind::NvSwitch(s) => format!(
            "nvs {}",
            s.busid.map(|b| b.to_string()).unwrap_or("-".into())
        ),
        NodeKind::Cpu(c) => format!("numa{}", c.numa),
        _ => format!("{n:?}"),
    };
    for g in t.gpus() {
        let mut links: Vec<String> = t
            .nvlinks(g)
            .iter()
            .map(|&(to, lanes, bw)| format!("{} x{lanes} {bw:.1}", label(to)))
            .collect();
        links.sort();
        if !links.is_empty() {
            let _ = writeln!(out, "nvlink {} -> {}", label(g), links.join(", "));
        }
    }
    for e in t.graph.edge_references() {
        if matches!(e.weight().kind, LinkKind::Sys | LinkKind::C2c) {
            let _ = writeln!(
                out,
                "{:?} {} -> {} {:.1}",
                e.weight().kind,
                label(e.source()),
                label(e.target()),
                e.weight().bw
            );
        }
    }
    out
}

#[test]
fn snapshot_dgx_h100() {
    insta::assert_snapshot!(dump(&builtin("dgx-h100")));
}

#[test]
fn snapshot_dgx_v100() {
    insta::assert_snapshot!(dump(&builtin("dgx-v100")));
}

#[test]
fn the_rtx4090_profile_reproduces_its_nccl_dump() {
    // realdata topo-xml/rwkvinllama-2x-rtx4090-cx4.xml: <cpu numaid="3" affinity="c0c0"> first,
    // then numaid 2 / 3030; GPU 0 next to the dual-port NIC, GPU 1 alone.
    let t = builtin("2x-rtx4090");
    let cpus: Vec<(i32, Option<String>)> = t
        .cpus()
        .map(|c| (t.cpu(c).unwrap().numa, t.cpu(c).unwrap().affinity.clone()))
        .collect();
    assert_eq!(
        cpus,
        vec![(3, Some("c0c0".into())), (2, Some("3030".into()))]
    );
    let g = t.gpus();
    assert_eq!(t.numa_of(g[0]), 3);
    assert_eq!(t.numa_of(g[1]), 2);
    let gpu = t.gpu(g[0]).unwrap();
    assert_eq!(
        (gpu.class, gpu.gdr, gpu.sm),
        (0x030000, Some(false), Some(89))
    );
    let nets: Vec<(String, i32, u32, Option<u64>)> = t
        .nets()
        .iter()
        .map(|&n| {
            let x = t.net(n).unwrap();
            (x.name.clone(), x.dev, x.port, x.guid)
        })
        .collect();
    assert_eq!(
        nets,
        vec![
            ("mlx5_0".into(), 0, 1, Some(0x84c36d000390fe7c)),
            ("mlx5_1".into(), 1, 2, Some(0x84c36d000390fe7c))
        ]
    );
    let nic = t.nics().next().unwrap();
    match &t.node(nic).kind {
        NodeKind::Nic(n) => assert_eq!((n.class, n.pcie.bw()), (0x020700, 12.0)),
        _ => unreachable!(),
    }
}

#[test]
fn the_documented_example_loads_as_described() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/profiles.md")).unwrap();
    let section = doc.split("## An annotated example").nth(1).unwrap();
    let yaml = section
        .split("```yaml\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let t = profile::load_str(yaml, "docs/profiles.md", "example").unwrap();
    let g = t.gpus();
    assert_eq!(t.gpu(g[0]).unwrap().busid.to_string(), "0000:18:00.0");
    let devs: Vec<(String, i32)> = t
        .nets()
        .iter()
        .map(|&n| (t.net(n).unwrap().name.clone(), t.net(n).unwrap().dev))
        .collect();
    assert_eq!(devs, vec![("mlx5_0".into(), 0), ("mlx5_1".into(), 1)]);
    let sys: Vec<f64> = t
        .graph
        .edge_references()
        .filter(|e| e.weight().kind == LinkKind::Sys)
        .map(|e| e.weight().bw)
        .collect();
    assert_eq!(sys, vec![22.0, 22.0]);
    assert_eq!(t.nvlinks(g[0]).len(), 1);
    assert!((t.nvlinks(g[0])[0].2 - 82.4).abs() < 1e-9);
    assert_eq!(
        t.hosts[0].env.get("NCCL_IB_HCA").map(String::as_str),
        Some("mlx5_0,mlx5_1")
    );
}

#[test]
fn loading_is_deterministic() {
    let edges = |t: &Topology| -> Vec<String> {
        t.graph
            .edge_references()
            .map(|e| {
                format!(
                    "{:?}>{:?} {:?} {} {}",
                    e.source(),
                    e.target(),
                    e.weight().kind,
                    e.weight().bw,
                    e.weight().lanes
                )
            })
            .collect()
    };
    for name in profile::builtin_names() {
        let first = edges(&builtin(name));
        for _ in 0..5 {
            assert_eq!(edges(&builtin(name)), first, "{name}");
        }
    }
}

#[test]
fn nccl_paths_on_the_profiles() {
    use topo_nccl::paths::{PathPolicy, compute};
    use topo_nccl::types::PathType;
    // (profile, GPU0->GPU1, GPU0->mlx5_0)
    let cases = [
        ("dgx-h100", PathType::Nvl, PathType::Pix),
        ("hgx-h200", PathType::Nvl, PathType::Pix),
        ("dgx-b200", PathType::Nvl, PathType::Pix),
        // Two-level Broadcom Gen4 switches flatten into one, as NCCL does on a real DGX A100.
        ("dgx-a100", PathType::Nvl, PathType::Pix),
        ("dgx-v100", PathType::Nvl, PathType::Pix),
        ("pcie-8x-l40s", PathType::Pix, PathType::Pix),
        // realdata: each GPU on its own NUMA node, the NIC on the root complex.
        ("2x-rtx4090", PathType::Sys, PathType::Phb),
    ];
    for (name, gpu, nic) in cases {
        let t = builtin(name);
        let sys = System::build(&t, &BwConstants::default());
        let p = compute(&sys, &PathPolicy::default());
        let (g0, g1) = (sys.gpus[0], sys.gpus[1]);
        let net0 = *sys
            .nets
            .iter()
            .find(|&&n| sys.nodes[n].net.as_ref().unwrap().name == "mlx5_0")
            .unwrap();
        assert_eq!((p.ty(g0, g1), p.ty(g0, net0)), (gpu, nic), "{name}");
    }
}
