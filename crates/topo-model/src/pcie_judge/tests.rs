use super::*;
use crate::{Cpu, Gpu, PciSwitch};

/// CPU -> bridge (`bridge` link, `ids`) -> GPU (`gpu` link).
fn one(
    bridge: PcieLink,
    ids: Option<(u16, u16)>,
    gpu: PcieLink,
) -> (Topology, NodeIndex, NodeIndex) {
    let mut t = Topology::default();
    let cpu = t.add_node(0, None, NodeKind::Cpu(Cpu::default()));
    let br = t.add_child(
        cpu,
        NodeKind::PciSwitch(PciSwitch {
            busid: "0000:a1:00.0".parse().unwrap(),
            pcie: bridge,
            vendor: ids.map(|x| x.0),
            device: ids.map(|x| x.1),
            ..Default::default()
        }),
    );
    let mut g = Gpu::new("0000:a4:00.0".parse().unwrap(), 0);
    g.pcie = gpu;
    let gn = t.add_child(br, NodeKind::gpu(g));
    (t, br, gn)
}

fn link(speed: &str, width: u32) -> PcieLink {
    PcieLink::new(Some(speed), Some(width))
}

fn codes(t: &Topology) -> Vec<(Code, Severity)> {
    verdicts(t, t.graph.node_indices())
        .into_iter()
        .map(|v| (v.code, v.severity))
        .collect()
}

#[test]
fn a_slow_bridge_above_a_gpu_is_a_vm_and_a_bmc_bridge_is_not() {
    let (t, br, _) = one(link("2.5 GT/s PCIe", 1), None, link("32.0 GT/s PCIe", 16));
    assert!(is_virtual_bridge(&t, br));
    assert_eq!(codes(&t), vec![(VIRTUAL, Severity::Warning)]);
    // The same x1 Gen1 bridge with only a slow device below (a BMC's VGA): real hardware.
    let (t, br, _) = one(link("2.5 GT/s PCIe", 1), None, link("2.5 GT/s PCIe", 1));
    assert!(!is_virtual_bridge(&t, br));
    assert!(codes(&t).is_empty());
}

#[test]
fn a_hypervisor_bridge_id_or_width_0_is_a_vm_whatever_the_speeds() {
    let (t, _, _) = one(
        link("32.0 GT/s PCIe", 16),
        Some((0x104c, 0x8232)),
        link("32.0 GT/s PCIe", 16),
    );
    assert_eq!(codes(&t), vec![(VIRTUAL, Severity::Warning)]);
    let (t, _, _) = one(link("32.0 GT/s PCIe", 16), None, link("32.0 GT/s PCIe", 0));
    let v = verdicts(&t, t.graph.node_indices());
    assert_eq!(v[0].code, VIRTUAL);
    assert!(v[0].text.contains("1 link of width 0"), "{}", v[0].text);
}

#[test]
fn lost_lanes_are_a_warning_a_lower_speed_only_information() {
    let mut gpu = link("32.0 GT/s PCIe", 16);
    gpu.cur_width = Some(8);
    gpu.cur_speed = Some("32.0 GT/s PCIe".into());
    let (t, _, _) = one(link("32.0 GT/s PCIe", 16), None, gpu);
    assert_eq!(codes(&t), vec![(DOWNTRAINED, Severity::Warning)]);
    let mut gpu = link("32.0 GT/s PCIe", 16);
    gpu.cur_width = Some(16);
    gpu.cur_speed = Some("2.5 GT/s PCIe".into());
    let (t, _, _) = one(link("32.0 GT/s PCIe", 16), None, gpu);
    let v = verdicts(&t, t.graph.node_indices());
    assert_eq!((v[0].code, v[0].severity), (DOWNTRAINED, Severity::Info));
    assert!(
        v[0].evidence[0].contains("idle GPUs"),
        "{:?}",
        v[0].evidence
    );
}

#[test]
fn a_slower_switch_above_is_its_own_fact() {
    let (t, _, _) = one(link("16.0 GT/s PCIe", 16), None, link("32.0 GT/s PCIe", 16));
    assert_eq!(codes(&t), vec![(UPSTREAM_SLOWER, Severity::Warning)]);
}

/// aws-p5's Gen4 switches above Gen5 GPUs are the profile's layout, by design: no finding
/// (issue 43); the same profile with a stated fault over it is judged again.
#[test]
fn a_profile_s_own_slower_switch_is_not_a_finding() {
    let (mut t, _, _) = one(link("16.0 GT/s PCIe", 16), None, link("32.0 GT/s PCIe", 16));
    t.source.kind = crate::SourceKind::Profile;
    assert_eq!(codes(&t), vec![]);
    t.source
        .stated
        .push("degraded pcie:0000:01:00.0 to gen4x16".into());
    assert_eq!(codes(&t), vec![(UPSTREAM_SLOWER, Severity::Warning)]);
}

/// `gpus` GPUs and one NIC hanging straight off one CPU of NUMA id -1 (a VM's NCCL XML), or
/// each GPU under a switch of its own when `switches`.
fn one_root(gpus: u8, switches: bool) -> Topology {
    let mut t = Topology::default();
    let cpu = t.add_node(
        0,
        None,
        NodeKind::Cpu(Cpu {
            numa: -1,
            ..Default::default()
        }),
    );
    for i in 0..gpus {
        let parent = if switches {
            t.add_child(
                cpu,
                NodeKind::PciSwitch(PciSwitch {
                    busid: format!("0000:{:02x}:00.0", 0x10 + i).parse().unwrap(),
                    pcie: link("16.0 GT/s PCIe", 16),
                    ..Default::default()
                }),
            )
        } else {
            cpu
        };
        let g = Gpu::new(
            format!("0000:{:02x}:00.0", 0x20 + i).parse().unwrap(),
            i as i32,
        );
        t.add_child(parent, NodeKind::gpu(g));
    }
    t.add_child(
        cpu,
        NodeKind::Nic(crate::Nic {
            busid: Some("0000:30:00.0".parse().unwrap()),
            ..Default::default()
        }),
    );
    t
}

#[test]
fn four_gpus_and_a_nic_behind_one_host_bridge_are_a_flattened_vm() {
    let t = one_root(4, false);
    let v = verdicts(&t, t.graph.node_indices());
    let f = v.iter().find(|v| v.code == FLATTENED).unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.text.contains("all 4 GPUs and the host's NIC"),
        "{}",
        f.text
    );
    assert!(f.fix.contains("NCCL_TOPO_FILE"));
    // A workstation's two or three cards on the CPU's root ports are real hardware.
    let t = one_root(3, false);
    assert!(codes(&t).iter().all(|(c, _)| *c != FLATTENED));
    // GPUs under switches of their own are a real tree.
    let t = one_root(4, true);
    assert!(codes(&t).iter().all(|(c, _)| *c != FLATTENED));
}

/// A guest that gives each device a root port of its own (QEMU's pcie-root-port, 1b36:000c)
/// or puts GPUs on its root bus (device numbers other than 0) is a VM; a physical machine's
/// GPUs at device 0 behind real root ports are not.
#[test]
fn a_guest_s_root_ports_or_root_bus_gpus_are_a_vm_and_bare_metal_is_not() {
    let fast = || link("32.0 GT/s PCIe", 16);
    let (t, br, _) = one(fast(), Some((0x1b36, 0x000c)), fast());
    assert!(is_virtual_bridge(&t, br));
    assert_eq!(codes(&t), vec![(VIRTUAL, Severity::Warning)]);
    let (t, _, _) = one(fast(), Some((0x8086, 0x347a)), fast());
    assert!(codes(&t).is_empty());
    let root_bus = |bus: &str, device: Option<u16>, kind: crate::SourceKind| {
        let mut t = Topology::default();
        t.source.kind = kind;
        let cpu = t.add_node(0, None, NodeKind::Cpu(Cpu::default()));
        let mut g = Gpu::new(bus.parse().unwrap(), 0);
        g.device = device;
        g.pcie = fast();
        t.add_child(cpu, NodeKind::gpu(g));
        t
    };
    let t = root_bus("0000:00:05.0", Some(0x2330), crate::SourceKind::Xml);
    let v = verdicts(&t, t.graph.node_indices());
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].code, VIRTUAL);
    assert!(v[0].text.contains("1 GPU on a root bus"), "{}", v[0].text);
    assert_eq!(v[0].fix, VM_FIX);
    // Device 0: a physical machine's. No PCI ids (a hand-written file) or a profile: not judged.
    assert!(
        codes(&root_bus(
            "0000:18:00.0",
            Some(0x2330),
            crate::SourceKind::Xml
        ))
        .is_empty()
    );
    assert!(codes(&root_bus("0000:10:1c.0", None, crate::SourceKind::Xml)).is_empty());
    assert!(
        codes(&root_bus(
            "0000:10:1c.0",
            Some(0x20b0),
            crate::SourceKind::Profile
        ))
        .is_empty()
    );
}
