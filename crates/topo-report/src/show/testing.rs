//! Small machines for the show views' tests, besides `model::testing::hgx`.

use topo_model::*;

fn cpu(
    t: &mut Topology,
    numa: i32,
    cpus: &str,
    vendor: &str,
    model: u32,
) -> petgraph::graph::NodeIndex {
    t.add_node(
        0,
        None,
        NodeKind::Cpu(Cpu {
            numa,
            cpus: Some(cpus.to_string()),
            arch: Some("x86_64".into()),
            vendor: Some(vendor.into()),
            family: Some(if vendor == "AuthenticAMD" { 25 } else { 6 }),
            model: Some(model),
            ..Default::default()
        }),
    )
}

fn switch(busid: &str, speed: &str, width: u32) -> NodeKind {
    NodeKind::PciSwitch(PciSwitch {
        busid: BusId::parse(busid).unwrap(),
        class: class::BRIDGE,
        pcie: PcieLink::new(Some(speed), Some(width)),
        ..Default::default()
    })
}

fn gpu(busid: &str, dev: i32, name: &str, device: u16, sm: u32, speed: &str) -> Gpu {
    let mut g = Gpu::new(BusId::parse(busid).unwrap(), dev);
    g.name = Some(name.into());
    g.device = Some(device);
    g.sm = Some(sm);
    g.gdr = Some(true);
    g.pcie = PcieLink::new(Some(speed), Some(16));
    g
}

fn nic(busid: &str, device: u16, speed: &str, width: u32) -> NodeKind {
    NodeKind::Nic(Nic {
        busid: Some(BusId::parse(busid).unwrap()),
        class: class::IB,
        vendor: Some(0x15b3),
        device: Some(device),
        pcie: PcieLink::new(Some(speed), Some(width)),
        ..Default::default()
    })
}

fn net(name: &str, dev: i32, gbps: u64, layer: Option<&str>, gdr: bool) -> NodeKind {
    NodeKind::Net(Net {
        name: name.into(),
        dev,
        speed_mbps: Some(gbps * 1000),
        port: 1,
        gdr,
        link_layer: layer.map(str::to_string),
        ..Default::default()
    })
}

fn host(t: &mut Topology, name: &str) {
    t.hosts[0].name = Some(name.into());
    t.hosts[0].kernel = Some("6.8.0-60-generic".into());
    t.hosts[0].driver_version = Some("570.133.20".into());
}

/// Two Sapphire Rapids sockets, six PCIe-only L40S and two ConnectX-6, no NVLink:
/// NUMA 0: root port 00:01.0 → switch 01:00.0 → GPU0, GPU1 and switch 04:00.0 → GPU2, mlx5_0;
///         root port 00:03.0 → GPU3 (link downtrained to 2.5 GT/s); an NVMe drive on 0a:00.0.
/// NUMA 1: root port 80:01.0 → switch 81:00.0 → GPU4, mlx5_1; root port c0:01.0 → GPU5 (a
///         Gen5 card held to Gen4 by its port).
pub fn pcie_2socket() -> Topology {
    let mut t = Topology::new(SourceInfo {
        kind: topo_model::SourceKind::Test,
        origin: None,
        ..Default::default()
    });
    host(&mut t, "pcie-box");
    let gen4 = "16.0 GT/s PCIe";
    let c0 = cpu(&mut t, 0, "0-31,64-95", "GenuineIntel", 143);
    let c1 = cpu(&mut t, 1, "32-63,96-127", "GenuineIntel", 143);
    let l40s = |b: &str, dev: i32| gpu(b, dev, "NVIDIA L40S", 0x26b9, 89, gen4);
    let rp_a = t.add_child(c0, switch("0000:00:01.0", gen4, 16));
    let s1 = t.add_child(rp_a, switch("0000:01:00.0", gen4, 16));
    t.add_child(s1, NodeKind::gpu(l40s("0000:02:00.0", 0)));
    t.add_child(s1, NodeKind::gpu(l40s("0000:03:00.0", 1)));
    let s2 = t.add_child(s1, switch("0000:04:00.0", gen4, 16));
    t.add_child(s2, NodeKind::gpu(l40s("0000:05:00.0", 2)));
    let n0 = t.add_child(s2, nic("0000:06:00.0", 0x101b, gen4, 16));
    t.add_child(n0, net("mlx5_0", 0, 200, Some("InfiniBand"), true));
    let rp_b = t.add_child(c0, switch("0000:00:03.0", gen4, 16));
    let mut g3 = l40s("0000:07:00.0", 3);
    g3.pcie.max_speed = Some(gen4.into());
    g3.pcie.max_width = Some(16);
    g3.pcie.cur_speed = Some("2.5 GT/s PCIe".into());
    g3.pcie.cur_width = Some(16);
    t.add_child(rp_b, NodeKind::gpu(g3));
    t.add_child(
        c0,
        NodeKind::PciDevice(PciDevice {
            busid: BusId::parse("0000:0a:00.0").unwrap(),
            class: 0x010802,
            vendor: Some(0x144d),
            device: Some(0xa80a),
            driver: Some("nvme".into()),
            pcie: PcieLink::new(Some(gen4), Some(4)),
        }),
    );
    let rp_c = t.add_child(c1, switch("0000:80:01.0", gen4, 16));
    let s3 = t.add_child(rp_c, switch("0000:81:00.0", gen4, 16));
    t.add_child(s3, NodeKind::gpu(l40s("0000:82:00.0", 4)));
    let n1 = t.add_child(s3, nic("0000:83:00.0", 0x101b, gen4, 16));
    t.add_child(n1, net("mlx5_1", 1, 200, Some("InfiniBand"), true));
    let rp_d = t.add_child(c1, switch("0000:c0:01.0", gen4, 16));
    let mut g5 = l40s("0000:c1:00.0", 5);
    g5.pcie.max_speed = Some("32.0 GT/s PCIe".into());
    g5.pcie.max_width = Some(16);
    t.add_child(rp_d, NodeKind::gpu(g5));
    t.connect_cpus();
    t
}

/// Two RTX A6000 joined by a 4-lane NVLink bridge on one AMD socket, each on its own root
/// port, and a 10 GbE port without RDMA.
pub fn nvlink_bridge() -> Topology {
    let mut t = Topology::new(SourceInfo {
        kind: topo_model::SourceKind::Test,
        origin: None,
        ..Default::default()
    });
    host(&mut t, "bridge-box");
    let gen4 = "16.0 GT/s PCIe";
    let c0 = cpu(&mut t, 0, "0-47", "AuthenticAMD", 1);
    let a6000 = |b: &str, dev: i32| gpu(b, dev, "NVIDIA RTX A6000", 0x2230, 86, gen4);
    let g0 = t.add_child(c0, NodeKind::gpu(a6000("0000:21:00.0", 0)));
    let g1 = t.add_child(c0, NodeKind::gpu(a6000("0000:41:00.0", 1)));
    t.add_nvlink(g0, g1, 4);
    t.add_nvlink(g1, g0, 4);
    let n = t.add_child(
        c0,
        NodeKind::Nic(Nic {
            busid: Some(BusId::parse("0000:c2:00.0").unwrap()),
            class: class::ETHERNET,
            vendor: Some(0x8086),
            device: Some(0x1563),
            pcie: PcieLink::new(Some("8.0 GT/s PCIe"), Some(8)),
            ..Default::default()
        }),
    );
    t.add_child(n, net("eno1", 0, 10, None, false));
    t.connect_cpus();
    t
}

/// A VM with no GPU: one socket, a virtio disk and one Ethernet port, and the reason live
/// discovery gives for the missing GPUs.
pub fn gpuless() -> Topology {
    let mut t = Topology::new(SourceInfo {
        kind: topo_model::SourceKind::Test,
        origin: None,
        ..Default::default()
    });
    host(&mut t, "cpu-box");
    t.hosts[0].driver_version = None;
    t.hosts[0].gpu_discovery =
        Some("libnvidia-ml.so.1 not found and no PCI device of vendor 0x10de".into());
    let c0 = cpu(&mut t, 0, "0-1", "AuthenticAMD", 1);
    t.add_child(
        c0,
        NodeKind::PciDevice(PciDevice {
            busid: BusId::parse("0000:00:04.0").unwrap(),
            class: 0x010000,
            vendor: Some(0x1af4),
            device: Some(0x1004),
            driver: Some("virtio-pci".into()),
            pcie: PcieLink::default(),
        }),
    );
    let n = t.add_child(
        c0,
        NodeKind::Nic(Nic {
            busid: Some(BusId::parse("0000:00:05.0").unwrap()),
            class: class::ETHERNET,
            vendor: Some(0x1af4),
            device: Some(0x1000),
            ..Default::default()
        }),
    );
    t.add_child(n, net("eth0", 0, 25, None, false));
    t.connect_cpus();
    t
}

/// Two H100 from a skeleton source that cannot tell NVLinks.
pub fn unknown_nvlink() -> Topology {
    let mut t = Topology::new(SourceInfo {
        kind: topo_model::SourceKind::Test,
        origin: None,
        ..Default::default()
    });
    host(&mut t, "skeleton");
    let gen5 = "32.0 GT/s PCIe";
    let c0 = cpu(&mut t, 0, "0-63", "GenuineIntel", 143);
    for (i, b) in ["0000:18:00.0", "0000:2a:00.0"].iter().enumerate() {
        let mut g = gpu(b, i as i32, "NVIDIA H100 80GB HBM3", 0x2330, 90, gen5);
        g.nvlink = NvlinkInfo::Unknown("no NVML".into());
        t.add_child(c0, NodeKind::gpu(g));
    }
    t.connect_cpus();
    t
}

/// A cloud VM like IBM's gx3d H100 profile: an emulated 2.5 GT/s x1 bridge holding a GPU and
/// a NIC virtual function that both report width 0.
pub fn vm_bridges() -> Topology {
    let mut t = Topology::new(SourceInfo {
        kind: topo_model::SourceKind::Test,
        origin: None,
        ..Default::default()
    });
    host(&mut t, "vm");
    let c0 = cpu(&mut t, 0, "0-79", "GenuineIntel", 143);
    let br = t.add_child(
        c0,
        NodeKind::PciSwitch(PciSwitch {
            busid: BusId::parse("0000:01:00.0").unwrap(),
            class: class::BRIDGE,
            vendor: Some(0x104c),
            device: Some(0x8232),
            pcie: PcieLink::new(Some("2.5 GT/s PCIe"), Some(1)),
            ..Default::default()
        }),
    );
    let mut g = gpu(
        "0000:02:00.0",
        0,
        "NVIDIA H100 80GB HBM3",
        0x2330,
        90,
        "32.0 GT/s PCIe",
    );
    g.pcie.width = Some(0);
    t.add_child(br, NodeKind::gpu(g));
    let n = t.add_child(br, nic("0000:03:00.0", 0x101e, "32.0 GT/s PCIe", 0));
    t.add_child(n, net("mlx5_0", 0, 200, Some("InfiniBand"), true));
    t.connect_cpus();
    t
}

/// Two GPUs, each behind its own switch with a NIC, as a skeleton XML lists them: NICs by PCI
/// class only (no ports). With `ports`, the NICs get ports numbered against the GPUs
/// (GPU0's NIC is mlx5_1), as on IBM's gx3d.
pub fn two_rails(ports: bool) -> Topology {
    let mut t = Topology::new(SourceInfo {
        kind: topo_model::SourceKind::Test,
        origin: None,
        ..Default::default()
    });
    host(&mut t, "rails");
    let gen5 = "32.0 GT/s PCIe";
    let c0 = cpu(&mut t, 0, "0-63", "GenuineIntel", 143);
    for i in 0..2u8 {
        let sw = t.add_child(
            c0,
            switch(&format!("0000:{:02x}:00.0", 0x10 + 0x10 * i), gen5, 16),
        );
        let mut g = gpu(
            &format!("0000:{:02x}:00.0", 0x11 + 0x10 * i),
            i as i32,
            "NVIDIA H100 80GB HBM3",
            0x2330,
            90,
            gen5,
        );
        g.nvlink = NvlinkInfo::Unknown("skeleton file".into());
        t.add_child(sw, NodeKind::gpu(g));
        let n = t.add_child(
            sw,
            nic(
                &format!("0000:{:02x}:00.0", 0x12 + 0x10 * i),
                0x1021,
                gen5,
                16,
            ),
        );
        if ports {
            let dev = 1 - i as i32;
            t.add_child(
                n,
                net(&format!("mlx5_{dev}"), dev, 400, Some("InfiniBand"), true),
            );
        }
    }
    t.connect_cpus();
    t
}
