//! Live discovery and snapshots: fixture machines, this machine, capture → replay, bad input.

use crate::util::topo as topo_cmd;
use petgraph::visit::EdgeRef;
use std::path::{Path, PathBuf};
use topo_model::{BusId, LinkKind, NodeKind, NvlinkInfo, Topology};
use topo_source::{SourceSpec, snapshot};

fn fixture(name: &str) -> PathBuf {
    crate::util::fixture("fixtures/snapshots").join(name)
}

fn load(path: &Path) -> Topology {
    topo_source::load(&SourceSpec {
        from: Some(path.to_path_buf()),
        ..Default::default()
    })
    .unwrap()
}

fn bus(s: &str) -> BusId {
    BusId::parse(s).unwrap()
}

/// Differences between two models (nodes, parents, edges, warnings, hosts, p2p), ignoring
/// where they came from (`source`). Empty when equal.
fn model_diff(a: &Topology, b: &Topology) -> Vec<String> {
    let mut d = Vec::new();
    if a.graph.node_count() != b.graph.node_count() {
        d.push(format!(
            "node count {} vs {}",
            a.graph.node_count(),
            b.graph.node_count()
        ));
    }
    for (x, y) in a.graph.node_indices().zip(b.graph.node_indices()) {
        if a.graph[x] != b.graph[y] {
            d.push(format!(
                "node {}: {:?} vs {:?}",
                x.index(),
                a.graph[x],
                b.graph[y]
            ));
        }
    }
    let edges = |t: &Topology| -> Vec<String> {
        t.graph
            .edge_references()
            .map(|e| {
                format!(
                    "{}->{} {:?}",
                    e.source().index(),
                    e.target().index(),
                    e.weight()
                )
            })
            .collect()
    };
    if edges(a) != edges(b) {
        d.push(format!("edges differ:\n{:?}\nvs\n{:?}", edges(a), edges(b)));
    }
    if a.warnings != b.warnings {
        d.push(format!("warnings {:?} vs {:?}", a.warnings, b.warnings));
    }
    if a.hosts != b.hosts {
        d.push(format!("hosts {:?} vs {:?}", a.hosts, b.hosts));
    }
    if a.p2p != b.p2p {
        d.push("p2p differs".into());
    }
    d
}

fn pci_link_bw(t: &Topology, n: petgraph::graph::NodeIndex) -> f64 {
    let p = t.node(n).parent.unwrap();
    t.graph
        .edges_connecting(p, n)
        .find(|e| e.weight().kind == LinkKind::Pci)
        .unwrap()
        .weight()
        .bw
}

#[test]
fn hgx_h100_fixture_discovers_the_whole_board() {
    let t = load(&fixture("hgx-h100-8gpu"));
    assert_eq!(t.source.kind, topo_model::SourceKind::Snapshot);
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let h = &t.hosts[0];
    assert_eq!(h.name.as_deref(), Some("hgx-h100-fixture"));
    assert_eq!(h.driver_version.as_deref(), Some("550.90.07"));
    assert_eq!(h.cuda_driver_version.as_deref(), Some("12.4"));
    assert_eq!(h.gpu_discovery, None);

    // Two NUMA nodes with their CPUs and NCCL's affinity masks.
    let cpus: Vec<_> = t.cpus().map(|c| t.cpu(c).unwrap().clone()).collect();
    assert_eq!(cpus.len(), 2);
    assert_eq!(cpus[0].numa, 0);
    assert_eq!(cpus[0].cpus.as_deref(), Some("0-79"));
    assert_eq!(
        cpus[0].affinity.as_deref(),
        Some("00000000,00000000,0000ffff,ffffffff,ffffffff")
    );
    assert_eq!(
        cpus[1].affinity.as_deref(),
        Some("ffffffff,ffffffff,ffff0000,00000000,00000000")
    );
    assert_eq!(cpus[0].vendor.as_deref(), Some("GenuineIntel"));
    assert_eq!((cpus[0].family, cpus[0].model), (Some(6), Some(143)));
    assert_eq!(cpus[0].arch.as_deref(), Some("x86_64"));

    // Eight H100s in NVML order, each 18 lanes to 4 NVSwitch chips (5/5/4/4).
    let gpus = t.gpus();
    assert_eq!(gpus.len(), 8);
    let want_bus = ["18", "2a", "3a", "4a", "5d", "9a", "ab", "ba"];
    for (i, &g) in gpus.iter().enumerate() {
        let gpu = t.gpu(g).unwrap();
        assert_eq!(gpu.dev, i as i32);
        assert_eq!(gpu.busid, bus(&format!("0000:{}:00.0", want_bus[i])));
        assert_eq!(gpu.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(gpu.sm, Some(90));
        assert_eq!(gpu.memory_bytes, Some(85520809984));
        assert_eq!(gpu.nvlink, NvlinkInfo::Known);
        assert_eq!(gpu.gdr, Some(true));
        assert_eq!(t.numa_of(g), if i < 4 { 0 } else { 1 });
        let mut lanes: Vec<(String, u32)> = t
            .nvlinks(g)
            .iter()
            .map(|&(to, l, _)| (t.node(to).busid().unwrap().to_string(), l))
            .collect();
        lanes.sort();
        assert_eq!(
            lanes,
            vec![
                ("0000:05:00.0".into(), 4),
                ("0000:06:00.0".into(), 5),
                ("0000:07:00.0".into(), 5),
                ("0000:08:00.0".into(), 4)
            ]
        );
        let bw: f64 = t.nvlinks(g).iter().map(|l| l.2).sum();
        assert!((bw - 370.8).abs() < 1e-9, "{bw}");
        // GPU link: Gen5 x16 (device and downstream port agree) = 48 GB/s.
        assert_eq!(gpu.pcie.speed.as_deref(), Some("32.0 GT/s PCIe"));
        assert_eq!(gpu.pcie.width, Some(16));
        assert_eq!(pci_link_bw(&t, g), 48.0);
    }
    // The NVSwitch chips are the sysfs functions, not extra hidden ones.
    let nvs: Vec<_> = t.nvswitches().collect();
    assert_eq!(nvs.len(), 4);
    for &n in &nvs {
        let NodeKind::NvSwitch(s) = &t.node(n).kind else {
            unreachable!()
        };
        assert_eq!(s.device, Some(0x22a3));
        assert!(s.busid.is_some());
    }

    // One Gen5 switch per GPU+NIC pair, as NCCL sees it: the upstream port, with downstream
    // and root ports folded away. The switch in front of the NVSwitch chips holds no endpoint
    // that NCCL or the PCI view needs, so it is not a node.
    let switches: Vec<_> = t.pci_switches().collect();
    assert_eq!(switches.len(), 8);
    for &g in &gpus {
        let sw = t.node(g).parent.unwrap();
        assert!(matches!(t.node(sw).kind, NodeKind::PciSwitch(_)));
        let kids = t.children(sw);
        assert_eq!(kids.len(), 2, "switch above GPU holds GPU + NIC");
        assert!(
            kids.iter()
                .any(|&k| matches!(t.node(k).kind, NodeKind::Nic(_)))
        );
        assert!(matches!(
            t.node(t.node(sw).parent.unwrap()).kind,
            NodeKind::Cpu(_)
        ));
    }

    // Eight ConnectX-7 ports, 400 Gb/s InfiniBand, rail-aligned with the GPUs.
    let nets = t.nets();
    assert_eq!(nets.len(), 8);
    assert_eq!(t.nics().count(), 8);
    for (i, &n) in nets.iter().enumerate() {
        let net = t.net(n).unwrap();
        assert_eq!(net.name, format!("mlx5_{i}"));
        assert_eq!(net.dev, i as i32);
        assert_eq!(net.speed_mbps, Some(400_000));
        assert_eq!(net.port, 1);
        assert!(net.gdr);
        assert_eq!(net.link_layer.as_deref(), Some("InfiniBand"));
        assert_eq!(net.state.as_deref(), Some("4: ACTIVE"));
        let nic = t.node(n).parent.unwrap();
        assert_eq!(
            t.node(nic).parent,
            t.node(gpus[i]).parent,
            "mlx5_{i} shares GPU {i}'s switch"
        );
    }
    assert_eq!(t.net(nets[0]).unwrap().guid, Some(0xa87c_b100_03e1_a258));
    assert_eq!(t.net(nets[0]).unwrap().netdev.as_deref(), Some("ibp25s0"));

    // Everything else is still in the PCI view: host bridge, NVMe, BMC VGA (not a GPU).
    let others: Vec<String> = t
        .graph
        .node_weights()
        .filter_map(|n| match &n.kind {
            NodeKind::PciDevice(d) => Some(format!("{} {:06x} {:?}", d.busid, d.class, d.driver)),
            _ => None,
        })
        .collect();
    assert_eq!(
        others,
        vec![
            "0000:00:00.0 060000 None".to_string(),
            "0000:01:00.0 010802 Some(\"nvme\")".to_string(),
            "0000:0a:00.0 030000 Some(\"ast\")".to_string()
        ]
    );
    // NVML P2P status for every ordered pair.
    assert_eq!(t.p2p.len(), 56);
    assert!(
        t.p2p
            .values()
            .all(|c| c.read == Some(true) && c.nvlink == Some(true))
    );
}

#[test]
fn pcie_fixture_has_no_nvlink_and_gen4_links() {
    let t = load(&fixture("pcie-8gpu"));
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let gpus = t.gpus();
    assert_eq!(gpus.len(), 8);
    assert_eq!(t.nvswitches().count(), 0);
    for &g in &gpus {
        let gpu = t.gpu(g).unwrap();
        assert_eq!(gpu.name.as_deref(), Some("NVIDIA L40S"));
        assert_eq!(gpu.sm, Some(89));
        assert!(t.nvlinks(g).is_empty());
        assert_eq!(gpu.nvlink, NvlinkInfo::Known);
        // Gen4 card behind a Gen5 port: min rule gives 16 GT/s, 24 GB/s.
        assert_eq!(gpu.pcie.speed.as_deref(), Some("16.0 GT/s PCIe"));
        assert_eq!(gpu.pcie.max_speed.as_deref(), Some("16.0 GT/s PCIe"));
        assert_eq!(pci_link_bw(&t, g), 24.0);
        assert_eq!(gpu.gdr, Some(false));
    }
    // Two GPUs per switch, two switches per socket.
    let switches: Vec<_> = t.pci_switches().collect();
    assert_eq!(switches.len(), 4);
    for &s in &switches {
        assert_eq!(t.children(s).len(), 2);
        assert!(t.children(s).iter().all(|&k| t.gpu(k).is_some()));
    }
    assert_eq!(gpus.iter().filter(|&&g| t.numa_of(g) == 0).count(), 4);
    // One 100 GbE NIC per socket, straight on a root port.
    let nets = t.nets();
    assert_eq!(nets.len(), 2);
    let names: Vec<_> = nets
        .iter()
        .map(|&n| t.net(n).unwrap().name.clone())
        .collect();
    assert_eq!(names, vec!["enp97s0", "enp225s0"]);
    for (i, &n) in nets.iter().enumerate() {
        let net = t.net(n).unwrap();
        assert_eq!(net.dev, i as i32);
        assert_eq!(net.speed_mbps, Some(100_000));
        assert!(!net.gdr);
        assert_eq!(net.link_layer, None);
        let nic = t.node(n).parent.unwrap();
        assert!(matches!(
            t.node(t.node(nic).parent.unwrap()).kind,
            NodeKind::Cpu(_)
        ));
    }
    assert_eq!(t.numa_of(nets[0]), 0);
    assert_eq!(t.numa_of(nets[1]), 1);
    // Cross-socket pairs: NVML says the chipset does not support P2P.
    let (a, b) = (t.gpu(gpus[0]).unwrap().busid, t.gpu(gpus[7]).unwrap().busid);
    assert_eq!(t.p2p[&(0, a, b)].read, Some(false));
    let c = t.gpu(gpus[1]).unwrap().busid;
    assert_eq!(t.p2p[&(0, a, c)].read, Some(true));
    // AMD inter-socket link.
    let sys: Vec<_> = t
        .graph
        .edge_weights()
        .filter(|e| e.kind == LinkKind::Sys)
        .collect();
    assert_eq!(sys.len(), 2);
    assert_eq!(sys[0].bw, 16.0);
}

#[test]
fn fixture_tree_without_nvml_json_degrades_to_sysfs_only() {
    // The same HGX tree read as a bare sysfs root, with nvml.json hidden: GPUs come from
    // sysfs, NVLink is unknown and the host says why.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("box");
    copy_tree(&fixture("hgx-h100-8gpu"), &root);
    std::fs::remove_file(root.join("nvml.json")).unwrap();
    std::fs::remove_file(root.join("meta.json")).unwrap();
    let t = topo_source::discover(&root).unwrap();
    assert_eq!(t.source.kind, topo_model::SourceKind::Live);
    assert_eq!(t.gpus().len(), 8);
    // Bus order stands in for the NVML index.
    let devs: Vec<i32> = t.gpus().iter().map(|&g| t.gpu(g).unwrap().dev).collect();
    assert_eq!(devs, (0..8).collect::<Vec<_>>());
    for &g in &t.gpus() {
        assert!(matches!(t.gpu(g).unwrap().nvlink, NvlinkInfo::Unknown(_)));
        assert!(t.nvlinks(g).is_empty());
        assert_eq!(t.gpu(g).unwrap().name, None);
    }
    let why = t.hosts[0].gpu_discovery.clone().unwrap();
    assert!(
        why.contains("GPUs found in sysfs only; NVLink and P2P status unknown"),
        "{why}"
    );
    // The sysfs NVSwitch functions are still there.
    assert_eq!(t.nvswitches().count(), 4);
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let ft = e.file_type().unwrap();
        let dst = to.join(e.file_name());
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &dst).unwrap();
        } else if ft.is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

#[test]
fn odd_sysfs_files_become_warnings() {
    let t = topo_source::discover(&fixture("odd-sysfs")).unwrap();
    let w = t.warnings.join("\n");
    assert!(
        w.contains("cannot read sys/bus/pci/devices/0000:00:04.0/class: is a directory"),
        "{w}"
    );
    assert!(
        w.contains("bad value 'zz' in sys/bus/pci/devices/0000:00:04.0/vendor"),
        "{w}"
    );
    assert!(
        w.contains("0000:98:00.0: numa_node is -1 (unknown); attached to NUMA node 0"),
        "{w}"
    );
    assert!(
        w.contains("0000:a1:00.0: no max_link_speed in sysfs"),
        "{w}"
    );
    assert!(w.contains("mlx5_1 port 1 is not active (1: DOWN)"), "{w}");
    // Still a full model: both GPUs, the active IB port, the Ethernet port.
    assert_eq!(t.gpus().len(), 2);
    let names: Vec<_> = t
        .nets()
        .iter()
        .map(|&n| t.net(n).unwrap().name.clone())
        .collect();
    assert_eq!(names, vec!["mlx5_0", "enp161s0"]);
    // Unknown speed: NCCL's Gen3 x16 default.
    let eth = t.node(t.nets()[1]).parent.unwrap();
    assert_eq!(pci_link_bw(&t, eth), 12.0);
    // No NVML recorded for a bare tree.
    assert!(
        t.hosts[0]
            .gpu_discovery
            .as_deref()
            .unwrap()
            .contains("no nvml.json")
    );
}

#[test]
fn this_machine_discovers_without_error() {
    let t = topo_source::discover(Path::new("/")).unwrap();
    assert_eq!(t.source.kind, topo_model::SourceKind::Live);
    // NUMA nodes: as many CPUs as sysfs lists node folders (or one of unknown id).
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("node"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(t.cpus().count(), nodes.max(1));
    // Every PCI function that is not a bridge is in the model.
    let endpoints = std::fs::read_dir("/sys/bus/pci/devices")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let class = std::fs::read_to_string(e.path().join("class")).unwrap_or_default();
            !class.trim().starts_with("0x0604")
        })
        .count();
    let in_model = t
        .graph
        .node_weights()
        .filter(|n| n.busid().is_some() && !matches!(n.kind, NodeKind::PciSwitch(_)))
        .count();
    assert_eq!(in_model, endpoints);
    assert!(endpoints > 0);
    let has_nvidia = std::path::Path::new("/proc/driver/nvidia/version").exists();
    if !has_nvidia && t.gpus().is_empty() {
        let why = t.hosts[0].gpu_discovery.clone().unwrap();
        assert!(why.starts_with("no NVIDIA GPU found"), "{why}");
        assert!(why.contains("NVML"), "{why}");
    }
}

#[test]
fn snapshot_of_this_machine_replays_to_the_same_model() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("box.tar.gz");
    let assert = topo_cmd()
        .args(["snapshot", "-o"])
        .arg(&out)
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(
        stderr.starts_with("captured ") && stderr.contains("KiB) to "),
        "{stderr}"
    );
    let live = topo_source::discover(Path::new("/")).unwrap();
    let replay = snapshot::load(&out).unwrap();
    assert_eq!(replay.source.kind, topo_model::SourceKind::Snapshot);
    let diff = model_diff(&live, &replay);
    assert!(diff.is_empty(), "{}", diff.join("\n"));

    // The folder form replays the same.
    let dir = tmp.path().join("box");
    topo_cmd()
        .args(["snapshot", "-o"])
        .arg(&dir)
        .assert()
        .success();
    assert!(dir.join("meta.json").is_file());
    let diff = model_diff(&live, &snapshot::load(&dir).unwrap());
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

#[test]
fn capture_of_a_fixture_round_trips() {
    // Capturing a snapshot folder (as --sysfs-root) keeps its NVML answer and symlinks.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("hgx.tgz");
    topo_cmd()
        .args(["snapshot", "-o"])
        .arg(&out)
        .arg("--sysfs-root")
        .arg(fixture("hgx-h100-8gpu"))
        .assert()
        .success();
    let a = load(&fixture("hgx-h100-8gpu"));
    let b = load(&out);
    let diff = model_diff(&a, &b);
    assert!(diff.is_empty(), "{}", diff.join("\n"));

    // Odd files survive capture as what they were: the folder-instead-of-file stays a folder,
    // the warnings replay identically.
    let odd = tmp.path().join("odd");
    topo_cmd()
        .args(["snapshot", "-o"])
        .arg(&odd)
        .arg("--sysfs-root")
        .arg(fixture("odd-sysfs"))
        .assert()
        .success();
    let a = topo_source::discover(&fixture("odd-sysfs")).unwrap();
    let b = load(&odd);
    assert!(!b.warnings.is_empty());
    let diff = model_diff(&a, &b);
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

#[test]
fn ci_vm_regression_snapshot() {
    // This CI machine captured once: a GPU-less VM with one NUMA node and virtio devices.
    let t = load(&fixture("ci-vm"));
    assert_eq!(t.gpus().len(), 0);
    assert_eq!(t.cpus().count(), 1);
    assert_eq!(
        t.cpu(t.cpus().next().unwrap()).unwrap().vendor.as_deref(),
        Some("AuthenticAMD")
    );
    let devices = t
        .graph
        .node_weights()
        .filter(|n| matches!(n.kind, NodeKind::PciDevice(_)))
        .count();
    // The virtio-net function is a plain device: its interface hangs off `virtio2`, so NCCL
    // attaches eth0 to the first CPU (src/graph/xml.cc, 2.28.9) and never reads that link.
    assert_eq!(devices, 6);
    let nets = t.nets();
    assert_eq!(nets.len(), 1);
    assert_eq!(t.net(nets[0]).unwrap().name, "eth0");
    let nic = t.node(nets[0]).parent.unwrap();
    assert!(matches!(&t.node(nic).kind, NodeKind::Nic(n) if n.busid.is_none()));
    assert!(matches!(
        t.node(t.node(nic).parent.unwrap()).kind,
        NodeKind::Cpu(_)
    ));
    assert_eq!(
        t.hosts[0].gpu_discovery.as_deref(),
        Some(
            "no NVIDIA GPU found: none in sysfs, and NVML not found (libnvidia-ml.so.1 could not be loaded)"
        )
    );
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
}

fn expect_exit2(path: &Path, needle: &str) {
    let out = topo_cmd()
        .args(["xml", "--from"])
        .arg(path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(needle), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_snapshots_exit_2_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    // Truncated archive: the first half of a real one.
    let good = tmp.path().join("good.tar.gz");
    topo_cmd()
        .args(["snapshot", "-o"])
        .arg(&good)
        .arg("--sysfs-root")
        .arg(fixture("pcie-8gpu"))
        .assert()
        .success();
    let bytes = std::fs::read(&good).unwrap();
    let cut = tmp.path().join("cut.tar.gz");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    expect_exit2(&cut, "truncated or corrupt archive");
    // Cut inside the gzip trailer: every tar entry is intact, the stream is not.
    std::fs::write(&cut, &bytes[..bytes.len() - 4]).unwrap();
    expect_exit2(&cut, "truncated or corrupt archive");
    // Random bytes named .tar.gz.
    let junk = tmp.path().join("junk.tar.gz");
    std::fs::write(
        &junk,
        (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    expect_exit2(&junk, "truncated or corrupt archive");
    // An empty folder is not a snapshot.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    expect_exit2(&empty, "not a topo snapshot (no meta.json)");
    // A snapshot whose nvml.json is damaged.
    let broken = tmp.path().join("broken");
    copy_tree(&fixture("pcie-8gpu"), &broken);
    std::fs::write(broken.join("nvml.json"), "{").unwrap();
    expect_exit2(&broken, "not NVML JSON");
}

#[test]
fn archive_entries_cannot_escape() {
    let tmp = tempfile::tempdir().unwrap();
    let evil = tmp.path().join("evil.tar.gz");
    {
        let f = std::fs::File::create(&evil).unwrap();
        let gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
        let mut b = tar::Builder::new(gz);
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "sys", "../../../../etc").unwrap();
        b.into_inner().unwrap().finish().unwrap();
    }
    expect_exit2(&evil, "points outside the snapshot");
}

#[test]
fn snapshot_into_a_non_empty_folder_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("x"), "x").unwrap();
    let out = topo_cmd()
        .args(["snapshot", "-o"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("folder exists and is not empty"));
}

/// The model as an indented PCI tree plus NVLinks, for reviewable snapshots.
fn describe(t: &Topology) -> String {
    fn label(t: &Topology, n: petgraph::graph::NodeIndex) -> String {
        let link = |p: Option<&topo_model::PcieLink>| {
            p.map(|l| {
                format!(
                    " [{} x{} = {} GB/s]",
                    l.speed.as_deref().unwrap_or("?"),
                    l.width.map(|w| w.to_string()).unwrap_or("?".into()),
                    l.bw()
                )
            })
            .unwrap_or_default()
        };
        let node = t.node(n);
        match &node.kind {
            NodeKind::Cpu(c) => format!(
                "CPU numa {} cpus {} {} {:?}/{:?}",
                c.numa,
                c.cpus.as_deref().unwrap_or("?"),
                c.vendor.as_deref().unwrap_or("?"),
                c.family,
                c.model
            ),
            NodeKind::PciSwitch(s) => format!(
                "switch {} {:04x}:{:04x}{}",
                s.busid,
                s.vendor.unwrap_or(0),
                s.device.unwrap_or(0),
                link(node.pcie())
            ),
            NodeKind::Gpu(g) => format!(
                "GPU {} dev {} {} sm {:?} gdr {:?}{}",
                g.busid,
                g.dev,
                g.name.as_deref().unwrap_or("?"),
                g.sm,
                g.gdr,
                link(node.pcie())
            ),
            NodeKind::Nic(x) => format!(
                "NIC {} class {:06x}{}",
                x.busid.map(|b| b.to_string()).unwrap_or("-".into()),
                x.class,
                link(node.pcie())
            ),
            NodeKind::Net(x) => format!(
                "NET {} dev {} port {} {:?} Mb/s gdr {} {:?} netdev {:?}",
                x.name, x.dev, x.port, x.speed_mbps, x.gdr, x.link_layer, x.netdev
            ),
            NodeKind::NvSwitch(s) => format!("NVSwitch {:?}", s.busid.map(|b| b.to_string())),
            NodeKind::PciDevice(d) => format!(
                "device {} class {:06x} driver {:?}",
                d.busid, d.class, d.driver
            ),
        }
    }
    fn walk(t: &Topology, n: petgraph::graph::NodeIndex, depth: usize, out: &mut String) {
        out.push_str(&format!("{}{}\n", "  ".repeat(depth), label(t, n)));
        for c in t.children(n) {
            walk(t, c, depth + 1, out);
        }
    }
    let mut out = String::new();
    for c in t.cpus() {
        walk(t, c, 0, &mut out);
    }
    for s in t.nvswitches() {
        out.push_str(&format!("{}\n", label(t, s)));
    }
    for g in t.gpus() {
        let mut l: Vec<String> = t
            .nvlinks(g)
            .iter()
            .map(|&(to, lanes, bw)| {
                format!(
                    "{} x{lanes} ({bw:.1} GB/s)",
                    t.node(to)
                        .busid()
                        .map(|b| b.to_string())
                        .unwrap_or("hidden".into())
                )
            })
            .collect();
        l.sort();
        if !l.is_empty() {
            out.push_str(&format!(
                "nvlink {}: {}\n",
                t.gpu(g).unwrap().busid,
                l.join(", ")
            ));
        }
    }
    let sys: Vec<String> = t
        .graph
        .edge_references()
        .filter(|e| e.weight().kind == LinkKind::Sys)
        .map(|e| format!("{} GB/s", e.weight().bw))
        .collect();
    out.push_str(&format!("sys links: {}\n", sys.join(", ")));
    out.push_str(&format!("gpu_discovery: {:?}\n", t.hosts[0].gpu_discovery));
    for w in &t.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

#[test]
fn fixture_models_read_as_expected() {
    insta::assert_snapshot!("hgx-h100-8gpu", describe(&load(&fixture("hgx-h100-8gpu"))));
    insta::assert_snapshot!("pcie-8gpu", describe(&load(&fixture("pcie-8gpu"))));
    insta::assert_snapshot!("ci-vm", describe(&load(&fixture("ci-vm"))));
    insta::assert_snapshot!(
        "odd-sysfs",
        describe(&topo_source::discover(&fixture("odd-sysfs")).unwrap())
    );
}

#[test]
fn an_archive_of_the_snapshot_folder_loads_too() {
    // `tar czf box.tgz box/` puts everything one level down; that is still a snapshot.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("box.tgz");
    {
        let f = std::fs::File::create(&out).unwrap();
        let gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        let mut b = tar::Builder::new(gz);
        b.follow_symlinks(false);
        b.append_dir_all("box", fixture("pcie-8gpu")).unwrap();
        b.into_inner().unwrap().finish().unwrap();
    }
    let diff = model_diff(&load(&fixture("pcie-8gpu")), &load(&out));
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]
    /// Damaged archives (cut anywhere, bytes flipped) never panic or hang: they load or fail
    /// with a usage error.
    #[test]
    fn damaged_archives_fail_cleanly(cut in 0usize..4000, flips in proptest::collection::vec((0usize..4000, 1u8..=255), 0..4)) {
        use std::sync::OnceLock;
        static GOOD: OnceLock<Vec<u8>> = OnceLock::new();
        let good = GOOD.get_or_init(|| {
            let tmp = tempfile::tempdir().unwrap();
            let out = tmp.path().join("g.tar.gz");
            snapshot::capture(&fixture("odd-sysfs"), &out).unwrap();
            std::fs::read(&out).unwrap()
        });
        let mut bytes = good.clone();
        bytes.truncate(cut.min(bytes.len()));
        for (at, x) in flips {
            if let Some(b) = bytes.get_mut(at) {
                *b ^= x;
            }
        }
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("d.tar.gz");
        std::fs::write(&p, &bytes).unwrap();
        if let Err(e) = snapshot::load(&p) {
            proptest::prop_assert!(topo_source::error::kind(&e).is_some(), "{e:#}");
        }
    }
}

/// The contract the issue names: `topo show --format json` of a snapshot replay equals the
/// live run, except for the `source` block that says where the topology came from.
#[test]
fn snapshot_replay_shows_the_same_json_as_the_live_run() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("box.tar.gz");
    topo_cmd()
        .arg("snapshot")
        .arg("-o")
        .arg(&archive)
        .assert()
        .success();
    let show = |from: Option<&Path>| -> serde_json::Value {
        let mut c = topo_cmd();
        c.args(["show", "--format", "json"]);
        if let Some(p) = from {
            c.arg("--from").arg(p);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let src = v.as_object_mut().unwrap().remove("source").unwrap();
        assert!(src["kind"].is_string());
        v
    };
    let live = show(None);
    let replay = show(Some(&archive));
    assert_eq!(live, replay);
    assert_eq!(live["schema"], "topo.show/v1");
}

/// The HGX fixture with `nvml.json` replaced by `nvml` (NVML's answer with the CUDA driver's
/// per-GPU attributes), in a temp folder.
fn hgx_with_nvml(nvml: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("box");
    copy_tree(&fixture("hgx-h100-8gpu"), &root);
    std::fs::write(root.join("nvml.json"), nvml).unwrap();
    (tmp, root)
}

fn plan_text(root: &Path) -> String {
    let out = topo_cmd()
        .args(["plan", "--from"])
        .arg(root)
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn cuda_driver_attributes_replay_into_the_model_and_the_plan() {
    // Synthetic (fixtures/synthetic/README.md): the HGX board whose driver offers neither
    // cuMem VMM nor multicast, as NVML + the CUDA driver would record it.
    let text = std::fs::read_to_string(
        crate::util::fixture("fixtures/synthetic").join("nvml-hgx-h100-no-cumem-no-multicast.json"),
    )
    .unwrap();
    let (_tmp, root) = hgx_with_nvml(&text);
    let t = load(&root);
    for (i, &g) in t.gpus().iter().enumerate() {
        let a = t
            .gpu(g)
            .unwrap()
            .cuda
            .clone()
            .expect("cuda attributes recorded");
        assert_eq!(a.ordinal, i as u32);
        assert_eq!(
            (a.vmm, a.multicast, a.unified_addressing),
            (Some(false), Some(false), Some(true))
        );
    }
    let nvls = t.hosts[0].nvls.clone().unwrap();
    assert!(!nvls.value);
    assert!(
        nvls.why
            .starts_with("CUDA driver: no multicast on 8 GPU(s)"),
        "{}",
        nvls.why
    );
    assert!(
        t.warnings
            .iter()
            .any(|w| w.contains("(P2P/IPC) instead of P2P/CUMEM")),
        "{:?}",
        t.warnings
    );
    let plan = plan_text(&root);
    assert!(plan.contains("P2P/IPC 56"), "{plan}");
    assert!(plan.contains("0 nvls channels"), "{plan}");
    assert!(
        plan.contains("CUMEM is off (auto: the GPU reports no virtual memory management support)"),
        "{plan}"
    );

    // The same box with every attribute supported: P2P/CUMEM, NVLS, no warning.
    let ok = text.replace("false", "true");
    let (_tmp2, root2) = hgx_with_nvml(&ok);
    let t2 = load(&root2);
    assert!(t2.hosts[0].nvls.is_none());
    assert!(!t2.warnings.iter().any(|w| w.contains("CUDA driver")));
    let plan2 = plan_text(&root2);
    assert!(plan2.contains("P2P/CUMEM 56"), "{plan2}");
    assert!(!plan2.contains(" 0 nvls channels"), "{plan2}");
}

#[test]
fn nvml_without_cuda_attributes_changes_nothing() {
    // Old snapshots (no `cuda` per GPU) keep NCCL's defaults: no fact, no warning.
    let t = load(&fixture("hgx-h100-8gpu"));
    assert!(t.gpus().iter().all(|&g| t.gpu(g).unwrap().cuda.is_none()));
    assert!(!t.warnings.iter().any(|w| w.contains("CUDA driver")));
}

#[test]
fn snapshot_to_dash_streams_the_archive_to_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let out = topo_cmd()
        .current_dir(tmp.path())
        .args(["snapshot", "-o", "-", "--sysfs-root"])
        .arg(fixture("hgx-h100-8gpu"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains(" to stdout"), "{err}");
    assert!(!tmp.path().join("-").exists());
    assert_eq!(out.stdout[..2], [0x1f, 0x8b]);
    let f = tmp.path().join("s.tar.gz");
    std::fs::write(&f, &out.stdout).unwrap();
    let diff = model_diff(&load(&fixture("hgx-h100-8gpu")), &load(&f));
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

#[test]
fn snapshot_redacts_secret_nccl_values_and_keeps_tuning() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("box.tar.gz");
    topo_cmd()
        .args(["snapshot", "-o"])
        .arg(&out)
        .env("NCCL_NET_AUTH_TOKEN", "tok-123")
        .env("NCCL_IB_HCA", "mlx5_0:1,mlx5_1:1")
        .env("NCCL_ALGO", "Ring")
        .env("NCCL_DEBUG_FILE", "https://user:pw@logs.example/x")
        .assert()
        .success();
    let env = &snapshot::load(&out).unwrap().hosts[0].env;
    assert_eq!(env["NCCL_NET_AUTH_TOKEN"], snapshot::REDACTED);
    assert_eq!(env["NCCL_DEBUG_FILE"], snapshot::REDACTED);
    assert_eq!(env["NCCL_IB_HCA"], "mlx5_0:1,mlx5_1:1");
    assert_eq!(env["NCCL_ALGO"], "Ring");
}

#[test]
fn h200_vm_xml_places_the_virtio_nic_as_nccl_dumped_it() {
    // NCCL 2.28.9's NCCL_TOPO_DUMP_FILE of this machine (bench/cuda/results/2026-12-04-h200/
    // gpu-check/nccl-topo.xml): `<cpu>` holds the GPU's `<pci>` and a bare `<nic>` with eth0,
    // whose sysfs device is `virtio2`, not a PCI function.
    let o = crate::util::topo()
        .args(["xml", "--from", "fixtures/snapshots/h200-vm"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let xml = String::from_utf8_lossy(&o.stdout);
    assert!(!xml.contains("0000:00:03.0"), "{xml}");
    assert!(
        xml.contains("</pci>\n    <nic>\n      <net name=\"eth0\""),
        "{xml}"
    );
    assert!(xml.contains("busid=\"0000:00:06.0\""), "{xml}");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
