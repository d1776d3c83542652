//! Transport choice on machines built in code, and the real logs of
//! /work/shared/realdata/nccl-logs reproduced where their topology can be built.

use super::view::{P2pTypeCheck, check_p2p_type, check_p2p_type_first, matrices, summary};
use super::*;
use crate::paths::PathPolicy;
use topo_model::testing::hgx;
use topo_model::testing::hgx_board as board;
use topo_model::{BwConstants, P2pCaps, Topology};

struct Run {
    sys: System,
    paths: Paths,
    pp: PathPolicy,
    tp: TransportPolicy,
    pairs: Vec<PairTransport>,
}

fn run(t: &Topology, mut pp: PathPolicy, tp: TransportPolicy) -> Run {
    let sys = System::build(t, &BwConstants::default());
    pp.isolated_ranks |= tp.placement.isolates_ranks();
    let paths = paths::compute(&sys, &pp);
    let pairs = select(&sys, &paths, &pp, &tp);
    Run {
        sys,
        paths,
        pp,
        tp,
        pairs,
    }
}

#[test]
fn several_workers_list_what_one_lists() {
    // Hosts joined in host order: runs of 2 and 3 hosts over 5 give one worker's list.
    let r = run(
        &hgx(8, 90).replicate(5),
        PathPolicy::default(),
        TransportPolicy::default(),
    );
    let ctx = Ctx::new(&r.sys, &r.paths, &r.pp, &r.tp);
    let hosts: Vec<Vec<usize>> = (0..5).map(|h| r.sys.host_gpus(h)).collect();
    let own: Vec<usize> = (0..5).collect();
    let one = select_on(&ctx, &hosts, &own, 0, 1);
    assert_eq!(one, r.pairs);
    for workers in [2, 3, 8] {
        assert_eq!(
            select_on(&ctx, &hosts, &own, 0, workers),
            one,
            "{workers} workers"
        );
    }
}

/// A rank on a host that reads another's path tables takes its twin's NET sides: the list
/// is the one every rank choosing its own sides gives, PXN (which names a rank) included.
#[test]
fn twins_sides_are_the_sides_each_rank_chooses() {
    let mut pxn = 0;
    let eight = [0, 1, 2, 3, 4, 5, 6, 7];
    for t in [
        hgx(8, 90).replicate(4),
        board(&eight, 90, |d| d < 4, true).replicate(3),
        dgx1_v100().replicate(3),
    ] {
        let r = run(&t, PathPolicy::default(), TransportPolicy::default());
        let n = t.host_count();
        let hosts: Vec<Vec<usize>> = (0..n).map(|h| r.sys.host_gpus(h as u16)).collect();
        let sources: Vec<usize> = (0..n).map(|h| r.paths.tables_of(h)).collect();
        let twin = twins(&hosts, &sources, r.sys.gpus.len());
        assert!(twin.iter().enumerate().any(|(r, &t)| r != t), "{sources:?}");
        // A context of its own, without twins: every side chosen by its rank.
        let ctx = Ctx::new(&r.sys, &r.paths, &r.pp, &r.tp);
        let own: Vec<usize> = (0..n).collect();
        assert_eq!(select_on(&ctx, &hosts, &own, 0, 1), r.pairs);
        pxn += r.pairs.iter().filter(|p| p.proxy().is_some()).count();
    }
    assert!(pxn > 0);
}

/// A host whose path tables repeat an earlier host's repeats its pairs: the list is the one
/// every host computing its own gives, NVB relays (which name a rank) and PXN included.
#[test]
fn repeated_hosts_list_what_computing_hosts_list() {
    let mut relays = 0;
    for t in [hgx(8, 90).replicate(4), dgx1_v100().replicate(3)] {
        for pp in [
            PathPolicy::default(),
            PathPolicy {
                p2p_level: Some(PathType::Nvl),
                ..PathPolicy::default()
            },
        ] {
            let r = run(&t, pp, TransportPolicy::default());
            let ctx = Ctx::new(&r.sys, &r.paths, &r.pp, &r.tp);
            let n = t.host_count();
            let hosts: Vec<Vec<usize>> = (0..n).map(|h| r.sys.host_gpus(h as u16)).collect();
            let sources: Vec<usize> = (0..n).map(|h| r.paths.tables_of(h)).collect();
            assert!(sources[1..].iter().all(|&s| s == 0), "{sources:?}");
            let own: Vec<usize> = (0..n).collect();
            for workers in [1, 2] {
                assert_eq!(
                    select_on(&ctx, &hosts, &sources, 0, workers),
                    select_on(&ctx, &hosts, &own, 0, workers)
                );
            }
            assert_eq!(r.pairs, select_on(&ctx, &hosts, &own, 0, 1));
            relays += r.pairs.iter().filter(|p| p.intermediate.is_some()).count();
        }
    }
    assert!(relays > 0, "no NVB relay was repeated");
}

impl Run {
    fn pair(&self, a: usize, b: usize) -> &PairTransport {
        self.pairs
            .iter()
            .find(|p| p.from == a && p.to == b)
            .unwrap_or_else(|| panic!("no pair {a}->{b}"))
    }
    fn p2p_type(&self) -> Vec<P2pTypeCheck> {
        check_p2p_type(&self.sys, &self.paths, &self.pp, &self.tp)
    }
}

/// Two Intel Sapphire Rapids sockets, two sm89 GPUs per socket's switch, no NVLink; a 200G
/// NIC on socket 0, and on socket 1 too when `nic_per_socket`.
fn pcie_box(nic_per_socket: bool) -> Topology {
    topo_model::testing::pcie_box("GenuineIntel", 6, 143, nic_per_socket, true)
}

/// DGX-1 with 8 V100 (sm70): hybrid cube-mesh NVLink (6 links per GPU, doubled on some
/// pairs), two Intel sockets, two PCIe switches per socket with two GPUs and one 100G IB NIC
/// each. Assumed from the public DGX-1V block diagram: the issue does not include a topology.
fn dgx1_v100() -> Topology {
    dgx1_v100_nics(&[0, 1, 2, 3])
}

/// [`dgx1_v100`] with IB NICs only in the PCIe switches listed (0, 1 on socket 0; 2, 3 on 1).
fn dgx1_v100_nics(nic_switches: &[u8]) -> Topology {
    use topo_model::testing::{SwitchBox, two_sockets_two_switches};
    let spec = SwitchBox {
        cpu_model: 79,
        link: "8.0 GT/s PCIe",
        sm: 70,
        nic_offset: 8,
        nic_mbps: 100_000,
        nic_port: 0,
        nic_switches: nic_switches.to_vec(),
    };
    let (mut t, gpus) = two_sockets_two_switches(&spec);
    let links = [
        (0, 1, 1),
        (0, 2, 1),
        (0, 3, 2),
        (0, 4, 2),
        (1, 2, 2),
        (1, 3, 1),
        (1, 5, 2),
        (2, 3, 2),
        (2, 6, 1),
        (3, 7, 1),
        (4, 5, 1),
        (4, 6, 1),
        (4, 7, 2),
        (5, 6, 2),
        (5, 7, 1),
        (6, 7, 2),
    ];
    for (a, b, n) in links {
        t.add_nvlink(gpus[a], gpus[b], n);
        t.add_nvlink(gpus[b], gpus[a], n);
    }
    t
}

fn all_pairs_on_host(r: &Run) -> Vec<&PairTransport> {
    r.pairs.iter().filter(|p| !p.inter_node).collect()
}

#[test]
fn hgx_single_host_table() {
    struct Case {
        name: &'static str,
        sm: u32,
        pp: PathPolicy,
        tp: TransportPolicy,
        transport: Transport,
        log: &'static str,
        anomaly: bool,
        reason: &'static str,
    }
    let tp = |f: fn(&mut TransportPolicy)| {
        let mut t = TransportPolicy::default();
        f(&mut t);
        t
    };
    let pp = |f: fn(&mut PathPolicy)| {
        let mut p = PathPolicy::default();
        f(&mut p);
        p
    };
    let cases = [
        Case {
            name: "H100, one process per GPU",
            sm: 90,
            pp: PathPolicy::default(),
            tp: TransportPolicy::default(),
            transport: Transport::P2p(P2p::Cumem),
            log: "via P2P/CUMEM",
            anomaly: false,
            reason: "CUMEM is on (auto (2.19+)",
        },
        Case {
            name: "NCCL_CUMEM_ENABLE=0",
            sm: 90,
            pp: PathPolicy::default(),
            tp: tp(|t| t.cumem = Some(false)),
            transport: Transport::P2p(P2p::Ipc),
            log: "via P2P/IPC",
            anomaly: false,
            reason: "NCCL_CUMEM_ENABLE=0",
        },
        Case {
            name: "2.18 default",
            sm: 90,
            pp: pp(|p| p.minor = 18),
            tp: tp(|t| t.minor = 18),
            transport: Transport::P2p(P2p::Ipc),
            log: "via P2P/IPC",
            anomaly: false,
            reason: "off by default in 2.18",
        },
        Case {
            name: "CUDA 11.8 driver, auto",
            sm: 90,
            pp: PathPolicy::default(),
            tp: tp(|t| t.cuda_driver_version = Some(11080)),
            transport: Transport::P2p(P2p::Ipc),
            log: "via P2P/IPC",
            anomaly: false,
            reason: "11.8 is older than 12.0",
        },
        Case {
            name: "all GPUs in one process",
            sm: 90,
            pp: PathPolicy::default(),
            tp: tp(|t| t.placement = RankPlacement::ProcessPerHost),
            transport: Transport::P2p(P2p::Direct),
            log: "via P2P/direct pointer",
            anomaly: false,
            reason: "one process",
        },
        Case {
            name: "one process, NCCL_P2P_DIRECT_DISABLE=1",
            sm: 90,
            pp: PathPolicy::default(),
            tp: tp(|t| {
                t.placement = RankPlacement::ProcessPerHost;
                t.p2p_direct_disable = true
            }),
            transport: Transport::P2p(P2p::Cumem),
            log: "via P2P/CUMEM",
            anomaly: false,
            reason: "NCCL_P2P_DIRECT_DISABLE=1",
        },
        Case {
            name: "A100 reads",
            sm: 80,
            pp: PathPolicy::default(),
            tp: TransportPolicy::default(),
            transport: Transport::P2p(P2p::Cumem),
            log: "via P2P/CUMEM/read",
            anomaly: false,
            reason: "both GPUs are sm80",
        },
        Case {
            name: "A100, NCCL_P2P_READ_ENABLE=0",
            sm: 80,
            pp: PathPolicy::default(),
            tp: tp(|t| t.p2p_read_enable = Some(false)),
            transport: Transport::P2p(P2p::Cumem),
            log: "via P2P/CUMEM",
            anomaly: false,
            reason: "NCCL_P2P_READ_ENABLE=0",
        },
        Case {
            name: "A100, copy engine",
            sm: 80,
            pp: PathPolicy::default(),
            tp: tp(|t| t.p2p_use_cuda_memcpy = true),
            transport: Transport::P2p(P2p::Cumem),
            log: "via P2P/CUMEM/CE",
            anomaly: false,
            reason: "NCCL_P2P_USE_CUDA_MEMCPY=1",
        },
        Case {
            name: "H100, NCCL_P2P_READ_ENABLE=1",
            sm: 90,
            pp: PathPolicy::default(),
            tp: tp(|t| t.p2p_read_enable = Some(true)),
            transport: Transport::P2p(P2p::Cumem),
            log: "via P2P/CUMEM/read",
            anomaly: false,
            reason: "NCCL_P2P_READ_ENABLE=1",
        },
        Case {
            name: "NCCL_P2P_DISABLE=1",
            sm: 90,
            pp: pp(|p| p.p2p_disable = true),
            tp: TransportPolicy::default(),
            transport: Transport::Shm,
            log: "via SHM/direct/direct",
            anomaly: true,
            reason: "NCCL_P2P_DISABLE=1 sets the P2P level to LOC, so P2P is refused for this \
                     NVL pair; SHM (through host memory) is used although the GPUs are \
                     NVLink-connected",
        },
        Case {
            name: "NCCL_P2P_DISABLE=1 on 2.30",
            sm: 90,
            pp: pp(|p| {
                p.p2p_disable = true;
                p.minor = 30
            }),
            tp: tp(|t| t.minor = 30),
            transport: Transport::Shm,
            log: "via SHM/direct",
            anomaly: true,
            reason: "NCCL_P2P_DISABLE=1",
        },
        Case {
            name: "NCCL_P2P_LEVEL=LOC",
            sm: 90,
            pp: pp(|p| p.p2p_level = Some(PathType::Loc)),
            tp: TransportPolicy::default(),
            transport: Transport::Shm,
            log: "via SHM/direct/direct",
            anomaly: true,
            reason: "NCCL_P2P_LEVEL=LOC is below the path type NVL",
        },
        Case {
            name: "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1",
            sm: 90,
            pp: pp(|p| {
                p.p2p_disable = true;
                p.shm_disable = true
            }),
            tp: TransportPolicy::default(),
            transport: Transport::Net(Net::Ib),
            log: "[send] via NET/IB/",
            anomaly: true,
            reason: "NCCL_SHM_DISABLE=1 refuses SHM",
        },
    ];
    for c in cases {
        let r = run(&hgx(8, c.sm), c.pp, c.tp);
        let local = all_pairs_on_host(&r);
        assert_eq!(local.len(), 56, "{}", c.name);
        for p in local {
            assert_eq!(p.transport, c.transport, "{}: {}->{}", c.name, p.from, p.to);
            if c.log.ends_with('/') {
                assert!(p.log_form.starts_with(c.log), "{}: {}", c.name, p.log_form);
            } else {
                assert_eq!(&*p.log_form, c.log, "{}", c.name);
            }
            assert_eq!(
                p.anomaly.is_some(),
                c.anomaly,
                "{}: {:?}",
                c.name,
                p.anomaly
            );
            assert!(p.reason.contains(c.reason), "{}: {}", c.name, p.reason);
            assert_eq!(p.path, Some(PathType::Nvl), "{}", c.name);
        }
        assert!(r.pairs.iter().all(|p| !p.inter_node), "{}", c.name);
    }
}

#[test]
fn anomaly_names_the_fix() {
    let r = run(
        &hgx(8, 90),
        PathPolicy {
            p2p_disable: true,
            ..Default::default()
        },
        TransportPolicy::default(),
    );
    let a = r.pair(0, 1).anomaly.as_deref().unwrap();
    assert!(
        a.starts_with("SHM between NVLink-connected GPUs (NVL)"),
        "{a}"
    );
    assert!(a.ends_with("fix: unset NCCL_P2P_DISABLE"), "{a}");
    assert_eq!(r.pair(0, 1).code(), "SHM!");
    let lvl = run(
        &hgx(8, 90),
        PathPolicy {
            p2p_level: Some(PathType::Loc),
            ..Default::default()
        },
        TransportPolicy::default(),
    );
    assert!(
        lvl.pair(3, 2)
            .anomaly
            .as_deref()
            .unwrap()
            .ends_with("fix: unset NCCL_P2P_LEVEL (or set it to NVL or higher)")
    );
    // SHM and P2P off: the peer is dropped and reached through the sender's own NIC.
    let net = run(
        &hgx(8, 90),
        PathPolicy {
            p2p_disable: true,
            shm_disable: true,
            ..Default::default()
        },
        TransportPolicy::default(),
    );
    let p = net.pair(3, 5);
    assert_eq!(&*p.log_form, "[send] via NET/IB/3/GDRDMA");
    assert_eq!(
        p.net.as_ref().map(|n| &*n.log_form_recv),
        Some("[receive] via NET/IB/5/GDRDMA")
    );
    assert!(!p.inter_node);
    assert!(p.reason.contains("NCCL_P2P_DISABLE=1"), "{}", p.reason);
    assert!(
        p.anomaly
            .as_deref()
            .unwrap()
            .starts_with("NET/IB between NVLink")
    );
}

#[test]
fn pcie_box_cross_socket_shm_without_anomaly() {
    let r = run(
        &pcie_box(false),
        PathPolicy::default(),
        TransportPolicy::default(),
    );
    // Same switch: PIX within the default level PXB.
    let same = r.pair(0, 1);
    assert_eq!(same.transport, Transport::P2p(P2p::Cumem));
    assert_eq!(same.path, Some(PathType::Pix));
    assert!(same.anomaly.is_none());
    // Across sockets: SYS exceeds PXB, SHM, and no NVLink so nothing anomalous.
    for (a, b) in [(0, 2), (0, 3), (1, 2), (3, 1), (2, 0)] {
        let p = r.pair(a, b);
        assert_eq!(p.transport, Transport::Shm, "{a}->{b}");
        assert_eq!(p.path, Some(PathType::Sys));
        assert!(p.anomaly.is_none());
        assert!(
            p.reason.starts_with(
                "path SYS exceeds the P2P level PXB (default since 2.23: PXB, SYS on AMD x86 \
                 with at most 2 GPUs), so P2P is refused; SHM"
            ),
            "{}",
            p.reason
        );
    }
    // NCCL_P2P_LEVEL=SYS lets the cross-socket pairs use P2P.
    let sys_level = run(
        &pcie_box(false),
        PathPolicy {
            p2p_level: Some(PathType::Sys),
            ..Default::default()
        },
        TransportPolicy::default(),
    );
    assert_eq!(sys_level.pair(0, 3).transport, Transport::P2p(P2p::Cumem));
    assert!(sys_level.pair(0, 3).reason.contains("NCCL_P2P_LEVEL=SYS"));
    // 2.21 on Intel: the default was already PXB.
    let old = run(
        &pcie_box(false),
        PathPolicy {
            minor: 21,
            ..Default::default()
        },
        TransportPolicy {
            minor: 21,
            ..Default::default()
        },
    );
    assert!(old.pair(0, 2).reason.contains("2.18-2.22 default"));
}

#[test]
fn pcie_box_matrix_and_summary() {
    let r = run(
        &pcie_box(false),
        PathPolicy::default(),
        TransportPolicy::default(),
    );
    let m = matrices(&r.sys, &r.pairs);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].anomalies, 0);
    insta::assert_snapshot!("pcie_box_matrix", m[0].render());
    let s = summary(&r.pairs);
    assert_eq!(s.counts.get(&Transport::P2p(P2p::Cumem)), Some(&4));
    assert_eq!(s.counts.get(&Transport::Shm), Some(&8));
    assert_eq!(s.render(), "P2P/CUMEM 4, SHM 8, 0 anomalies");
}

#[test]
fn net_faster_than_cross_socket_path() {
    // Each socket's switch has a 200G NIC (24 GB/s PIX) and the SPR inter-socket link is 22
    // GB/s: ncclTopoCheckNet prefers the network for cross-socket pairs.
    let r = run(
        &pcie_box(true),
        PathPolicy::default(),
        TransportPolicy::default(),
    );
    let p = r.pair(0, 2);
    assert_eq!(p.transport, Transport::Net(Net::Ib));
    assert_eq!(&*p.log_form, "[send] via NET/IB/0/GDRDMA");
    assert_eq!(
        p.net.as_ref().map(|n| &*n.log_form_recv),
        Some("[receive] via NET/IB/1/GDRDMA")
    );
    assert!(p.reason.contains("ncclTopoCheckNet"), "{}", p.reason);
    assert!(p.anomaly.is_none());
    assert_eq!(r.pair(0, 1).transport, Transport::P2p(P2p::Cumem));
    // NCCL_NET_DISABLE_INTRA=1 keeps them on SHM.
    let off = run(
        &pcie_box(true),
        PathPolicy {
            net_disable_intra: true,
            ..Default::default()
        },
        TransportPolicy::default(),
    );
    assert_eq!(off.pair(0, 2).transport, Transport::Shm);
}

#[test]
fn containers_per_gpu_issue_1781() {
    let own_host = RankPlacement::ContainerPerGpu {
        common_host_id: false,
        shared_shm: false,
    };
    let r = run(
        &hgx(8, 90),
        PathPolicy::default(),
        TransportPolicy {
            placement: own_host.clone(),
            ..Default::default()
        },
    );
    for p in all_pairs_on_host(&r) {
        assert_eq!(p.transport, Transport::Net(Net::Ib));
        assert_eq!(&*p.log_form, format!("[send] via NET/IB/{}/GDRDMA", p.from));
        assert!(p.inter_node);
        assert!(p.reason.contains("own host hash"), "{}", p.reason);
        assert!(p.anomaly.as_deref().unwrap().contains("NVIDIA/nccl#1781"));
    }
    let sock = run(
        &hgx(8, 90),
        PathPolicy::default(),
        TransportPolicy {
            placement: own_host.clone(),
            net: Some("Socket".into()),
            ..Default::default()
        },
    );
    let p = sock.pair(0, 1);
    assert_eq!(p.transport, Transport::Net(Net::Socket));
    assert_eq!(&*p.log_form, "[send] via NET/Socket/0");
    assert!(!p.gdr());
    assert!(
        p.reason.contains("NCCL_NET=Socket selects it"),
        "{}",
        p.reason
    );
    let no_ib = run(
        &hgx(8, 90),
        PathPolicy::default(),
        TransportPolicy {
            placement: own_host,
            ib_available: Some(false),
            ..Default::default()
        },
    );
    assert_eq!(no_ib.pair(2, 7).transport, Transport::Net(Net::Socket));
    assert!(no_ib.pair(2, 7).reason.contains("no IB device"));
    // One host id but separate /dev/shm: P2P and SHM refuse, the peer is reached over NET.
    let iso = run(
        &hgx(8, 90),
        PathPolicy::default(),
        TransportPolicy {
            placement: RankPlacement::ContainerPerGpu {
                common_host_id: true,
                shared_shm: false,
            },
            ..Default::default()
        },
    );
    let p = iso.pair(1, 0);
    assert_eq!(p.transport, Transport::Net(Net::Ib));
    assert!(!p.inter_node);
    assert!(p.reason.contains("different /dev/shm"), "{}", p.reason);
    assert!(p.anomaly.as_deref().unwrap().contains("one container"));
    let t = iso.p2p_type();
    assert_eq!(t.len(), 1);
    assert_eq!(
        t[0].log_line.as_deref(),
        Some("Check P2P Type isAllDirectP2p 0 directMode 0 isAllCudaP2p 0")
    );
}

#[test]
fn two_nodes_rail_aligned() {
    let r = run(
        &hgx(8, 90).replicate(2),
        PathPolicy::default(),
        TransportPolicy::default(),
    );
    assert_eq!(r.pairs.len(), 2 * 56 + 16);
    let inter: Vec<_> = r.pairs.iter().filter(|p| p.inter_node).collect();
    assert_eq!(inter.len(), 16);
    for p in inter {
        assert_eq!(p.to, (p.from + 8) % 16);
        let dev = p.from % 8;
        assert_eq!(p.transport, Transport::Net(Net::Ib));
        assert_eq!(p.net.as_ref().map(|n| n.dev), Some(dev as i32));
        assert_eq!(p.nic(), Some(format!("mlx5_{dev}").as_str()));
        assert_eq!(p.net.as_ref().and_then(|n| n.nic_path), Some(PathType::Pix));
        assert_eq!(p.proxy(), None);
        assert_eq!(&*p.log_form, format!("[send] via NET/IB/{dev}/GDRDMA"));
        assert_eq!(
            p.net.as_ref().map(|n| &*n.log_form_recv),
            Some(format!("[receive] via NET/IB/{dev}/GDRDMA").as_str())
        );
        assert!(p.reason.starts_with("different hosts"), "{}", p.reason);
        assert!(
            p.reason.contains("within the GDR level PXB"),
            "{}",
            p.reason
        );
        assert!(p.anomaly.is_none());
    }
    // The per-pair document (`--transports pairs`) keeps every NET field flat, as before the
    // NET fields moved behind a box; a P2P pair writes them as null or false.
    let net = serde_json::to_value(r.pairs.iter().find(|p| p.inter_node).unwrap()).unwrap();
    let flat = [
        ("net", serde_json::json!("IB")),
        ("net_dev", 0.into()),
        ("nic", "mlx5_0".into()),
        ("nic_path", "PIX".into()),
        ("proxy", serde_json::Value::Null),
        ("gdr", true.into()),
        ("gdr_pci", false.into()),
        ("recv_net_dev", 0.into()),
        ("recv_gdr", true.into()),
        ("log_form_recv", "[receive] via NET/IB/0/GDRDMA".into()),
    ];
    for (k, v) in &flat {
        assert_eq!(&net[k], v, "{k} in {net}");
    }
    let p2p = serde_json::to_value(&r.pairs[0]).unwrap();
    assert_eq!(p2p.as_object().unwrap().len(), 23, "{p2p}");
    assert!(p2p["net"].is_null() && p2p["log_form_recv"].is_null() && p2p["gdr"] == false);
    let s = summary(&r.pairs);
    assert_eq!(s.counts.get(&Transport::P2p(P2p::Cumem)), Some(&112));
    assert_eq!(s.counts.get(&Transport::Net(Net::Ib)), Some(&16));
    assert_eq!((s.gdr, s.pxn, s.anomalies), (16, 0, 0));
    assert_eq!(matrices(&r.sys, &r.pairs).len(), 2);
}

#[test]
fn pxn_proxies_for_gpus_without_a_nic() {
    // NICs only next to GPUs 0-3: GPUs 4-7 reach them through an NVLink peer (PXN).
    let t = board(&[0, 1, 2, 3, 4, 5, 6, 7], 90, |d| d < 4, true).replicate(2);
    let r = run(&t, PathPolicy::default(), TransportPolicy::default());
    for (rank, nic) in [(0usize, 0i32), (1, 1), (2, 2), (3, 3)] {
        let p = r.pair(rank, rank + 8);
        assert_eq!(p.proxy(), None);
        assert_eq!(&*p.log_form, format!("[send] via NET/IB/{nic}/GDRDMA"));
    }
    // The local NET index is the NVML index bit-mirrored over the 4 NICs: 4→0, 5→2, 6→1, 7→3.
    for (rank, nic) in [(4usize, 0i32), (5, 2), (6, 1), (7, 3)] {
        let p = r.pair(rank, rank + 8);
        assert_eq!(
            p.net.as_ref().and_then(|n| n.nic_path),
            Some(PathType::Pxn),
            "rank {rank}"
        );
        assert_eq!(p.proxy(), Some(nic as usize), "rank {rank}");
        assert_eq!(p.net.as_ref().map(|n| n.dev), Some(nic));
        assert_eq!(
            &*p.log_form,
            format!("[send] via NET/IB/{nic}({nic})/GDRDMA")
        );
        assert!(
            p.reason.contains("through PXN: the GPU of rank"),
            "{}",
            p.reason
        );
        assert!(p.gdr());
    }
    assert_eq!(summary(&r.pairs).pxn, 8);
    // NCCL_PXN_DISABLE=1: the GPU's own path through the CPU, no proxy, no GDR (PHB > PXB).
    let off = run(
        &t,
        PathPolicy {
            pxn_disable: true,
            ..Default::default()
        },
        TransportPolicy::default(),
    );
    let p = off.pair(4, 12);
    assert_eq!(p.proxy(), None);
    assert_eq!(p.net.as_ref().and_then(|n| n.nic_path), Some(PathType::Phb));
    assert!(!p.gdr());
    assert!(
        p.reason.contains("exceeds the GDR level PXB"),
        "{}",
        p.reason
    );
}

#[test]
fn nics_without_gdr() {
    let t = board(&[0, 1, 2, 3], 90, |_| true, false).replicate(2);
    let r = run(&t, PathPolicy::default(), TransportPolicy::default());
    let p = r.pair(2, 6);
    assert_eq!(p.transport, Transport::Net(Net::Ib));
    // Without GDR every GPU→NIC path is rerouted through the CPU (PHB, same bandwidth), so
    // all four NICs are "local" and the NVML index is bit-mirrored over them: 2 → NIC 1.
    assert_eq!(p.net.as_ref().and_then(|n| n.nic_path), Some(PathType::Phb));
    assert_eq!(&*p.log_form, "[send] via NET/IB/1");
    assert_eq!(
        p.net.as_ref().map(|n| &*n.log_form_recv),
        Some("[receive] via NET/IB/1")
    );
    assert!(!p.gdr() && !p.net.as_ref().is_some_and(|n| n.recv_gdr));
    assert!(
        p.reason
            .contains("no GPUDirect RDMA: the NIC does not support GPUDirect RDMA (gdr=0)"),
        "{}",
        p.reason
    );
}

#[test]
fn cuda_visibility_peer_access_and_legacy_ipc() {
    // One GPU per process (CUDA_VISIBLE_DEVICES=3): invisible peers are still accepted.
    let r = run(
        &hgx(8, 90),
        PathPolicy::default(),
        TransportPolicy {
            cuda_visible_devices: Some("3".into()),
            ..Default::default()
        },
    );
    let p = r.pair(0, 1);
    assert_eq!(p.transport, Transport::P2p(P2p::Cumem));
    assert!(p.reason.contains("CUDA_VISIBLE_DEVICES=3"), "{}", p.reason);
    assert!(p.reason.contains("CUDA >= 10.1"));
    assert!(p.anomaly.is_none());
    // Visible peers are asked cudaDeviceCanAccessPeer.
    let mut tp = TransportPolicy::default();
    tp.peer_access.insert((0, 1), false);
    let r = run(&hgx(8, 90), PathPolicy::default(), tp);
    assert_eq!(r.pair(0, 1).transport, Transport::Shm);
    assert!(r.pair(0, 1).reason.contains("cudaDeviceCanAccessPeer"));
    assert!(r.pair(0, 1).anomaly.is_some());
    assert_eq!(r.pair(1, 0).transport, Transport::P2p(P2p::Cumem));
    // No CUMEM and no legacy IPC (WSL).
    let r = run(
        &hgx(2, 90),
        PathPolicy::default(),
        TransportPolicy {
            cumem: Some(false),
            legacy_ipc: Some(false),
            ..Default::default()
        },
    );
    assert_eq!(r.pair(0, 1).transport, Transport::Shm);
    assert!(
        r.pair(0, 1)
            .anomaly
            .as_deref()
            .unwrap()
            .ends_with("fix: enable CUMEM (NCCL_CUMEM_ENABLE=1 with a CUDA 12 driver)")
    );
}

#[test]
fn nvml_disabled_p2p() {
    let mut t = hgx(2, 90);
    let (a, b) = (t.gpus()[0], t.gpus()[1]);
    let (ba, bb) = (t.gpu(a).unwrap().busid, t.gpu(b).unwrap().busid);
    t.p2p.insert(
        (0, ba, bb),
        P2pCaps {
            read: Some(false),
            write: Some(true),
            ..Default::default()
        },
    );
    let r = run(&t, PathPolicy::default(), TransportPolicy::default());
    let p = r.pair(0, 1);
    assert_eq!(p.transport, Transport::Shm);
    assert!(p.reason.contains("NVML reports P2P as not supported"));
    assert!(p.reason.contains("NCCL aborts init"), "{}", p.reason);
    assert!(p.anomaly.is_some());
    assert_eq!(r.pair(1, 0).transport, Transport::P2p(P2p::Cumem));
    let t2 = r.p2p_type();
    assert_eq!(
        t2[0].log_line.as_deref(),
        Some("Check P2P Type isAllDirectP2p 0 directMode 0 isAllCudaP2p 0")
    );
}

/// The plan's line is the first node's: checking that node alone gives the same flags as
/// checking every node.
#[test]
fn the_first_nodes_p2p_type_is_the_first_of_all_nodes() {
    for t in [hgx(8, 90).replicate(3), dgx1_v100().replicate(2)] {
        let r = run(&t, PathPolicy::default(), TransportPolicy::default());
        let all = r.p2p_type();
        assert_eq!(all.len(), t.host_count());
        let first = check_p2p_type_first(&r.sys, &r.paths, &r.pp, &r.tp);
        assert_eq!(first.as_ref(), all.first());
        assert!(first.is_some_and(|c| c.log_line.is_some()));
    }
}

#[test]
fn check_p2p_type_per_version() {
    let cases: [(u32, RankPlacement, bool, Option<&str>); 6] = [
        (
            28,
            RankPlacement::ProcessPerGpu,
            false,
            Some("Check P2P Type isAllDirectP2p 1 directMode 0 isAllCudaP2p 1"),
        ),
        (
            28,
            RankPlacement::ProcessPerHost,
            false,
            Some("Check P2P Type isAllDirectP2p 1 directMode 1 isAllCudaP2p 1"),
        ),
        (
            30,
            RankPlacement::ProcessPerGpu,
            true,
            Some("Check P2P Type isAllDirectP2p 0 directMode 0 isAllCudaP2p 1"),
        ),
        (
            27,
            RankPlacement::ProcessPerGpu,
            false,
            Some("Check P2P Type isAllDirectP2p 1 directMode 0"),
        ),
        (
            25,
            RankPlacement::ProcessPerGpu,
            true,
            Some("Check P2P Type intraNodeP2pSupport 0 directMode 0"),
        ),
        (23, RankPlacement::ProcessPerGpu, false, None),
    ];
    for (minor, placement, p2p_disable, line) in cases {
        let r = run(
            &hgx(8, 90),
            PathPolicy {
                minor,
                p2p_disable,
                ..Default::default()
            },
            TransportPolicy {
                minor,
                placement,
                ..Default::default()
            },
        );
        let t = r.p2p_type();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].ranks.len(), 8);
        assert_eq!(t[0].log_line.as_deref(), line, "2.{minor}");
        assert_eq!(t[0].is_all_cuda_p2p.is_some(), minor >= 28);
    }
    // One GPU: no P2P support up to 2.27, 1 from 2.28.
    for (minor, d) in [(27, 0), (28, 1)] {
        let r = run(
            &hgx(1, 90),
            PathPolicy::default(),
            TransportPolicy {
                minor,
                ..Default::default()
            },
        );
        assert!(
            r.p2p_type()[0]
                .log_line
                .as_deref()
                .unwrap()
                .contains(&format!("isAllDirectP2p {d}"))
        );
    }
}

#[test]
fn v100_nvb_pairs_go_indirect() {
    // DGX-1V: GPU 3 and GPU 4 have no direct NVLink; the best path relays through GPU 0.
    let r = run(
        &dgx1_v100(),
        PathPolicy::default(),
        TransportPolicy::default(),
    );
    let p = r.pair(3, 4);
    assert_eq!(p.path, Some(PathType::Nvb));
    assert_eq!(p.transport, Transport::P2p(P2p::Indirect));
    assert_eq!(p.intermediate, Some(0));
    assert_eq!(&*p.log_form, "via P2P/indirect/0[0]");
    assert_eq!(p.code(), "P2P/I");
    assert_eq!(r.pair(2, 3).transport, Transport::P2p(P2p::Cumem));
    // The relay makes isAllDirectP2p 0.
    assert!(
        r.p2p_type()[0]
            .log_line
            .as_deref()
            .unwrap()
            .starts_with("Check P2P Type isAllDirectP2p 0")
    );
    // Copy-engine mode cannot relay: SHM, flagged.
    let ce = run(
        &dgx1_v100(),
        PathPolicy::default(),
        TransportPolicy {
            p2p_use_cuda_memcpy: true,
            ..Default::default()
        },
    );
    assert_eq!(ce.pair(3, 4).transport, Transport::Shm);
    assert!(ce.pair(3, 4).anomaly.is_some());
}

/// Checks every `... via ...` INFO line of a real log against the line the model predicts for
/// that connection; returns how many lines were checked.
fn check_log(r: &Run, log: &str) -> usize {
    let mut n = 0;
    for line in log.lines() {
        let Some((_, msg)) = line.split_once("NCCL INFO ") else {
            continue;
        };
        let msg = msg.trim_end();
        if !msg.contains(" via ") {
            continue;
        }
        let (head, rest) = msg.split_once(" : ").unwrap();
        let chan = head.strip_prefix("Channel ").unwrap();
        let (ch, conn) = match chan.split_once('/') {
            Some((c, k)) => (c.parse().unwrap(), k.parse().unwrap()),
            None => (chan.parse().unwrap(), 0),
        };
        let (a, rest) = rest.split_once(" -> ").unwrap();
        let rank = |s: &str| s.split('[').next().unwrap().parse::<usize>().unwrap();
        let (a, b) = (rank(a), rank(rest));
        let p = r.pair(a, b);
        let predicted = if msg.contains("[receive]") {
            p.recv_info_line(ch, conn).unwrap()
        } else {
            p.info_line(ch, conn)
        };
        assert_eq!(predicted, msg);
        n += 1;
    }
    n
}

// ---- Real logs (/work/shared/realdata/nccl-logs) ----

/// nccl-tests-166-v100-sxm2-2x8-shm-due-to-env: 2 nodes × 8 V100-SXM2 (NVLink), nccl-tests
/// `-g 8` (one process per node: the ranks of a node share a pid), P2P disabled through the
/// environment. Assumed: DGX-1V NVLink wiring (the issue has no topology), NCCL 2.18 (2023),
/// P2P disabled (maintainer: "you disabled P2P as you set NCCL_P2P_LEVEL"), and one IB NIC,
/// on socket 0: with a NIC next to every GPU pair, ncclTopoCheckNet would put the
/// cross-socket hops (3 → 4: 6 GB/s QPI against a 12 GB/s NIC) on NET, not the SHM the log
/// shows (see `v100_with_p2p_off_cross_socket_goes_net`).
#[test]
fn real_v100_shm_due_to_env() {
    let r = run(
        &dgx1_v100_nics(&[0]).replicate(2),
        PathPolicy {
            minor: 18,
            p2p_disable: true,
            ..Default::default()
        },
        TransportPolicy {
            minor: 18,
            placement: RankPlacement::ProcessPerHost,
            ..Default::default()
        },
    );
    // Lines as logged: `Channel 13 : 10[2] -> 11[3] via SHM/direct/direct` and friends.
    for (ch, a, b, line) in [
        (
            13,
            10,
            11,
            "Channel 13 : 10[2] -> 11[3] via SHM/direct/direct",
        ),
        (11, 3, 4, "Channel 11 : 3[3] -> 4[4] via SHM/direct/direct"),
        (10, 1, 2, "Channel 10 : 1[1] -> 2[2] via SHM/direct/direct"),
        (
            12,
            14,
            15,
            "Channel 12 : 14[6] -> 15[7] via SHM/direct/direct",
        ),
    ] {
        let p = r.pair(a, b);
        assert_eq!(p.info_line(ch, 0), line);
        assert!(p.anomaly.is_some(), "{a}->{b}");
    }
    let m = matrices(&r.sys, &r.pairs);
    assert_eq!(m[0].anomalies, 56);
    let log = include_str!(
        "../../../../fixtures/transport/nccl-tests-166-v100-sxm2-2x8-shm-due-to-env-EXCERPT.log"
    );
    assert_eq!(check_log(&r, log), 16);
    // Without the variable the same pairs get NVLink P2P through direct pointers.
    let fixed = run(
        &dgx1_v100_nics(&[0]).replicate(2),
        PathPolicy {
            minor: 18,
            ..Default::default()
        },
        TransportPolicy {
            minor: 18,
            placement: RankPlacement::ProcessPerHost,
            ..Default::default()
        },
    );
    assert_eq!(
        fixed.pair(10, 11).info_line(13, 0),
        "Channel 13/0 : 10[2] -> 11[3] via P2P/direct pointer"
    );
}

/// The two ranks of NVIDIA/nccl#1781: H20 GPUs 0 and 2 of an NVSwitch box, one per pod.
fn h20_two_pods() -> Topology {
    board(&[0, 2], 90, |_| true, true)
}

/// nccl-1781-h20-cross-pod-net-socket: pods without a common host id, no IB device inside the
/// pods (assumed: the log shows sockets and no NCCL_NET line). The log's `intraNodeP2pSupport`
/// and hex affinity masks are the 2.24-2.26 forms, so 2.26 is modelled.
#[test]
fn real_h20_cross_pod_net_socket() {
    let r = run(
        &h20_two_pods(),
        PathPolicy {
            minor: 26,
            ..Default::default()
        },
        TransportPolicy {
            minor: 26,
            placement: RankPlacement::ContainerPerGpu {
                common_host_id: false,
                shared_shm: false,
            },
            ib_available: Some(false),
            ..Default::default()
        },
    );
    assert_eq!(
        r.pair(0, 1).info_line(0, 0),
        "Channel 00/0 : 0[0] -> 1[2] [send] via NET/Socket/0"
    );
    assert_eq!(
        r.pair(1, 0).recv_info_line(1, 0).as_deref(),
        Some("Channel 01/0 : 1[2] -> 0[0] [receive] via NET/Socket/0")
    );
    assert!(r.pair(0, 1).anomaly.is_some());
    let log = include_str!("../../../../fixtures/transport/nccl-1781-h20-cross-pod-net-socket.log");
    assert_eq!(check_log(&r, log), 8);
    let t = r.p2p_type();
    assert_eq!(t.len(), 2);
    for c in t {
        assert_eq!(
            c.log_line.as_deref(),
            Some("Check P2P Type intraNodeP2pSupport 0 directMode 0")
        );
    }
}

/// nccl-1781-h20-cross-pod-hostid-p2p-cumem: the same pods with NCCL_HOSTID set; the log shows
/// P2P/CUMEM, so the pods shared /dev/shm (NCCL compares its device before P2P). 2.27 forms.
#[test]
fn real_h20_cross_pod_hostid_p2p_cumem() {
    let r = run(
        &h20_two_pods(),
        PathPolicy {
            minor: 27,
            ..Default::default()
        },
        TransportPolicy {
            minor: 27,
            placement: RankPlacement::ContainerPerGpu {
                common_host_id: true,
                shared_shm: true,
            },
            ..Default::default()
        },
    );
    assert_eq!(
        r.pair(1, 0).info_line(0, 0),
        "Channel 00/0 : 1[2] -> 0[0] via P2P/CUMEM"
    );
    assert_eq!(
        r.pair(0, 1).info_line(2, 0),
        "Channel 02/0 : 0[0] -> 1[2] via P2P/CUMEM"
    );
    let a = r.pair(0, 1).anomaly.as_deref().unwrap();
    assert!(a.contains("sees only its own GPU"), "{a}");
    let log =
        include_str!("../../../../fixtures/transport/nccl-1781-h20-cross-pod-hostid-p2p-cumem.log");
    assert_eq!(check_log(&r, log), 48);
    assert_eq!(
        r.p2p_type()[0].log_line.as_deref(),
        Some("Check P2P Type isAllDirectP2p 1 directMode 0")
    );
}

/// nccl-tests-319-hgx-h100-2x8-nccl2.26.2-transports: 2 × HGX H100 with 8 rail-aligned NICs,
/// one process per GPU, an external net plugin named "NCCL RDMA Plugin v8".
#[test]
fn real_hgx_h100_2x8_transports() {
    let r = run(
        &hgx(8, 90).replicate(2),
        PathPolicy {
            minor: 26,
            ..Default::default()
        },
        TransportPolicy {
            minor: 26,
            net: Some("NCCL RDMA Plugin v8".into()),
            ..Default::default()
        },
    );
    assert_eq!(
        r.pair(8, 9).info_line(2, 0),
        "Channel 02/0 : 8[0] -> 9[1] via P2P/CUMEM"
    );
    assert_eq!(
        r.pair(0, 7).info_line(0, 0),
        "Channel 00/0 : 0[0] -> 7[7] via P2P/CUMEM"
    );
    assert_eq!(
        r.pair(1, 9).info_line(0, 0),
        "Channel 00/0 : 1[1] -> 9[1] [send] via NET/NCCL RDMA Plugin v8/1/GDRDMA"
    );
    assert_eq!(
        r.pair(9, 1).recv_info_line(1, 0).as_deref(),
        Some("Channel 01/0 : 9[1] -> 1[1] [receive] via NET/NCCL RDMA Plugin v8/1/GDRDMA")
    );
    assert_eq!(
        r.pair(14, 6).info_line(6, 0),
        "Channel 06/0 : 14[6] -> 6[6] [send] via NET/NCCL RDMA Plugin v8/6/GDRDMA"
    );
    assert_eq!(
        r.pair(1, 9).transport,
        Transport::Net(Net::Plugin("NCCL RDMA Plugin v8".into()))
    );
    let log = include_str!(
        "../../../../fixtures/transport/nccl-tests-319-hgx-h100-2x8-nccl2.26.2-transports-EXCERPT.log"
    );
    assert_eq!(check_log(&r, log), 164);
}

#[test]
fn matrix_marks_anomalies() {
    let r = run(
        &hgx(4, 80),
        PathPolicy {
            p2p_disable: true,
            ..Default::default()
        },
        TransportPolicy::default(),
    );
    let m = &matrices(&r.sys, &r.pairs)[0];
    assert_eq!(m.anomalies, 12);
    assert_eq!(m.cells[0][0], "X");
    assert_eq!(m.cells[0][1], "SHM!");
    let ok = run(
        &hgx(4, 80),
        PathPolicy::default(),
        TransportPolicy::default(),
    );
    let m = &matrices(&ok.sys, &ok.pairs)[0];
    assert_eq!(m.cells[2][3], "P2P/R");
    insta::assert_snapshot!("hgx4_a100_matrix", m.render());
}

#[test]
fn v100_with_p2p_off_cross_socket_goes_net() {
    // DGX-1V with its four NICs: once P2P is off the 3 → 4 hop crosses the BDW QPI (6 GB/s)
    // while both GPUs reach a NIC at PIX (12 GB/s), so NET wins over SHM.
    let r = run(
        &dgx1_v100(),
        PathPolicy {
            p2p_disable: true,
            ..Default::default()
        },
        TransportPolicy::default(),
    );
    let p = r.pair(3, 4);
    assert_eq!(p.transport, Transport::Net(Net::Ib));
    // sm70 sends with GDR only when the GPU has an NVLink peer, and with P2P off the GPU
    // paths are rerouted through the CPU, so ncclTopoCheckGdr sees none: no GDRDMA on send.
    assert_eq!(&*p.log_form, "[send] via NET/IB/1");
    assert_eq!(
        p.net.as_ref().map(|n| &*n.log_form_recv),
        Some("[receive] via NET/IB/2/GDRDMA")
    );
    assert!(p.reason.contains("ncclTopoCheckNet"), "{}", p.reason);
    assert!(
        p.reason.contains("sm70 without an NVLink peer"),
        "{}",
        p.reason
    );
    assert!(p.anomaly.is_some());
    assert_eq!(r.pair(2, 3).transport, Transport::Shm);
}
