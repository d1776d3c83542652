//! Scenario tests of the search, channel counts and connections on machines built in
//! code, checked against the reference's worked example and real NCCL logs.

use super::*;
use crate::channels::{self, ChannelCounts, ChannelParams};
use crate::connect::Connection;
use topo_model::testing::hgx;
use topo_model::{BwConstants, Topology};

pub(crate) struct Plan {
    pub sys: System,
    pub graphs: Graphs,
    pub counts: ChannelCounts,
    pub conn: Connection,
}

pub(crate) fn plan_with(
    t: &Topology,
    c: &BwConstants,
    sp: &SearchParams,
    cp: &ChannelParams,
) -> Plan {
    let sys = System::build(t, c);
    let pol = PathPolicy {
        minor: sp.minor,
        max_channels: sp.max_channels,
        ..Default::default()
    };
    let paths = paths::compute(&sys, &pol);
    let graphs = compute_all(&sys, &paths, sp);
    let counts = channels::comm_channels(&sys, &paths, &graphs, cp);
    let conn = Connection::from_graphs(&sys, &graphs, &counts);
    Plan {
        sys,
        graphs,
        counts,
        conn,
    }
}

pub(crate) fn plan(t: &Topology, minor: u32) -> Plan {
    plan_with(
        t,
        &BwConstants::default(),
        &SearchParams::for_version(minor),
        &ChannelParams::for_version(minor),
    )
}

/// An HGX A100 board: like `hgx(n, 80)` but 12 NVLink lanes per GPU (3 to each of the 4
/// switch chips here), 240 GB/s.
pub(crate) fn hgx_a100(n: usize) -> Topology {
    let mut t = hgx(n, 80);
    for e in t.graph.edge_weights_mut() {
        if e.kind == topo_model::LinkKind::NvLink {
            e.lanes = 3;
            e.bw = 60.0;
        }
    }
    t
}

/// A PCIe-only server: 2 Intel sockets, 2 Gen4 switches per socket, 2 GPUs (sm80, no
/// NVLink) per switch, one 200G NIC per switch.
pub(crate) fn pcie_box() -> Topology {
    use topo_model::testing::{SwitchBox, two_sockets_two_switches};
    let spec = SwitchBox {
        cpu_model: 0x55,
        link: "16.0 GT/s PCIe",
        sm: 80,
        nic_offset: 3,
        nic_mbps: 200_000,
        nic_port: 1,
        nic_switches: vec![0, 1, 2, 3],
    };
    two_sockets_two_switches(&spec).0
}

/// One sm90 GPU per host behind a PCIe switch with a plain Ethernet NIC (NET/Socket,
/// speed unknown: NCCL's 10 Gb/s default).
pub(crate) fn one_gpu_socket_host() -> Topology {
    use topo_model::*;
    let mut t = Topology::new(SourceInfo {
        kind: topo_model::SourceKind::Test,
        origin: None,
        ..Default::default()
    });
    let cpu = t.add_node(
        0,
        None,
        NodeKind::Cpu(Cpu {
            numa: 0,
            arch: Some("x86_64".into()),
            vendor: Some("GenuineIntel".into()),
            family: Some(6),
            model: Some(143),
            ..Default::default()
        }),
    );
    let gen5 = PcieLink::new(Some("32.0 GT/s PCIe"), Some(16));
    let sw = t.add_child(
        cpu,
        NodeKind::PciSwitch(PciSwitch {
            busid: BusId::new(0, 0x10, 0, 0),
            class: class::BRIDGE,
            pcie: gen5.clone(),
            ..Default::default()
        }),
    );
    let mut g = Gpu::new(BusId::new(0, 0x11, 0, 0), 0);
    g.sm = Some(90);
    g.pcie = gen5.clone();
    t.add_child(sw, NodeKind::gpu(g));
    let nic = t.add_child(
        cpu,
        NodeKind::Nic(Nic {
            busid: Some(BusId::new(0, 0x40, 0, 0)),
            class: class::ETHERNET,
            pcie: PcieLink::new(Some("8.0 GT/s PCIe"), Some(8)),
            ..Default::default()
        }),
    );
    t.add_child(
        nic,
        NodeKind::Net(Net {
            name: "eth0".into(),
            dev: 0,
            speed_mbps: None,
            port: 0,
            gdr: false,
            ..Default::default()
        }),
    );
    t.connect_cpus();
    t
}

fn lines(p: &Plan, g: &Graph, minor: u32) -> Vec<String> {
    let v = NcclVersion {
        major: 2,
        minor,
        patch: None,
    };
    print_graph(g, &p.sys, &v, p.graphs.inter, &|r| r)
}

const H100_LINE: &str = "24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer";

/// §5.8: one HGX H100 board. Ring: 60 GB/s fits 6 channels (each ring crosses every
/// GPU↔NVSwitch link once per direction, 6 × 60 = 360 ≤ 370.8); lower speeds are not
/// strictly better; duplication gives 12 × 30. Tree 12 × 30 (30 is the first speed with
/// 12 × s ≤ 370.8 × 8/7). Postset doubles 12 → 24.
#[test]
fn hgx_h100_single_node_is_the_worked_example() {
    for minor in [21, 23, 27, 28, 29, 30] {
        let p = plan(&hgx(8, 90), minor);
        let ring = lines(&p, &p.graphs.ring, minor);
        assert_eq!(
            ring[0],
            "Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1",
            "2.{minor}"
        );
        assert_eq!(ring.len(), 13);
        // GPUs print by rank up to v2.27.3-1, by system and bus id from v2.27.5-1.
        let want = if minor >= 27 {
            " 0 : GPU/0-11000 GPU/0-21000 GPU/0-31000 GPU/0-41000 GPU/0-51000 GPU/0-61000 GPU/0-71000 GPU/0-81000"
        } else {
            " 0 : GPU/0 GPU/1 GPU/2 GPU/3 GPU/4 GPU/5 GPU/6 GPU/7"
        };
        assert_eq!(ring[1], want, "2.{minor}");
        let tree = lines(&p, &p.graphs.tree, minor);
        assert_eq!(
            tree[0],
            "Pattern 1, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1"
        );
        // NVLS: 8 heads at 40 GB/s intra (9 × 40 ≤ 370.8 per NVSwitch link with the head
        // counted twice), bwInter raised to 60 in pass 2.
        let nvls = lines(&p, p.graphs.nvls.as_ref().unwrap(), minor);
        assert_eq!(
            nvls[0],
            "Pattern 5, crossNic 0, nChannels 8, bw 40.000000/60.000000, type NVL/PIX, sameChannels 0"
        );
        let head = if minor >= 27 {
            " 1 : GPU/0-21000"
        } else {
            // Up to v2.27.3-1 the rest of the channel's GPU slots print too.
            " 1 : GPU/1 GPU/0 GPU/0 GPU/0 GPU/0 GPU/0 GPU/0 GPU/0"
        };
        assert_eq!(nvls[2], head);
        assert_eq!(p.counts.log_line(), H100_LINE, "2.{minor}");
        assert_eq!(p.counts.search, 12);
        assert_eq!(p.conn.ring(0).unwrap(), (0..8).collect::<Vec<_>>());
        assert_eq!(p.conn.ring(23).unwrap(), (0..8).collect::<Vec<_>>());
        assert_eq!(
            p.graphs.system_line(),
            "=== System : maxBw 370.8 totalBw 370.8 ==="
        );
        assert!(p.graphs.fallbacks.is_empty());
    }
}

#[test]
fn hgx_h100_log_lines() {
    let p = plan(&hgx(8, 90), 28);
    let ch = p.conn.channel_lines(28);
    assert_eq!(ch.len(), 24);
    assert_eq!(ch[0], "Channel 00/24 : 0 1 2 3 4 5 6 7");
    assert_eq!(ch[23], "Channel 23/24 : 0 1 2 3 4 5 6 7");
    let old = p.conn.channel_lines(22);
    assert_eq!(old[0], "Channel 00/24 :    0   1   2   3   4   5   6   7");
    let rings = p.conn.ring_lines(0);
    assert_eq!(rings[3], "Ring 03 : 7 -> 0 -> 1");
    assert_eq!(p.conn.ring_lines(7)[0], "Ring 00 : 6 -> 7 -> 0");
    let trees = p.conn.trees_line(0);
    assert!(trees.starts_with("Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1"));
    assert!(trees.ends_with("[23] 1/-1/-1->0->-1"));
    assert!(p.conn.trees_line(7).starts_with("Trees [0] -1/-1/-1->7->6"));
    assert!(p.conn.trees_line(3).starts_with("Trees [0] 4/-1/-1->3->2"));
    assert_eq!(
        p.conn.tree_anchor_lines(0)[..2],
        [
            "Tree 0 : -1 -> 0 -> 1/-1/-1",
            "Tree 12 : -1 -> 0 -> 1/-1/-1"
        ]
    );
    // Single node: no NVLS head lines.
    assert!(p.conn.nvls_head_lines().is_empty());
}

/// 8×A100 on NVSwitch (12 lanes, 240 GB/s): 6 × 40 fills the links, duplication gives
/// 12 × 20, so 24 coll channels; no NVLS below sm90.
#[test]
fn hgx_a100_gives_24_channels() {
    let p = plan(&hgx_a100(8), 28);
    assert_eq!(
        lines(&p, &p.graphs.ring, 28)[0],
        "Pattern 4, crossNic 0, nChannels 12, bw 20.000000/20.000000, type NVL/PIX, sameChannels 1"
    );
    assert_eq!(p.graphs.tree.n_channels, 12);
    assert_eq!(p.graphs.nvls.as_ref().unwrap().n_channels, 0);
    assert_eq!(
        p.counts.log_line(),
        "24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer"
    );
}

/// 2.18 on sm90 with 20.0 GB/s lanes (360 GB/s): 6 × 60 = 360 reaches totalBw at once;
/// 2.18 duplicates after pass 2 → 12 × 30; the tree fits 12 × 30; 24 channels. p2p: 2.18
/// per-peer needs min(24, 2 × 360/20 = 36) = 24 → 32. The 2.18 log line has no collnet.
#[test]
fn nccl_2_18_on_sm90() {
    let c = BwConstants {
        sm90_nvlink: 20.0,
        ..Default::default()
    };
    let p = plan_with(
        &hgx(8, 90),
        &c,
        &SearchParams::for_version(18),
        &ChannelParams {
            bw: c.clone(),
            ..ChannelParams::for_version(18)
        },
    );
    assert_eq!(p.graphs.max_bw, 360.0);
    assert_eq!(
        lines(&p, &p.graphs.ring, 18)[0],
        "Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1"
    );
    // ≤2.20 printed GPUs by rank.
    assert!(lines(&p, &p.graphs.ring, 18)[1].starts_with(" 0 : GPU/0 GPU/1"));
    assert_eq!(p.graphs.tree.n_channels, 12);
    assert_eq!(
        p.counts.log_line(),
        "24 coll channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer"
    );
    assert_eq!(
        p.conn.channel_lines(18)[0],
        "Channel 00/24 :    0   1   2   3   4   5   6   7"
    );
}

/// PCIe-only, 2 Intel (Skylake, QPI 10 GB/s) sockets × 2 Gen4 switches × 2 GPUs, a 200G
/// NIC per switch. Derivation (2.28):
/// * P2P level PXB: GPUs on different switches are not P2P; across sockets the path
///   (10 GB/s over QPI) is slower than each GPU's PIX path to its NIC (24 GB/s), so
///   NCCL marks it NET (`ncclTopoCheckNet`). Max intra type is therefore NET.
/// * Ring: maxBw = totalBw = 24 (Gen4 x16). Any ring crosses the QPI link once per
///   direction, so a channel needs the QPI link at its speed: nothing fits above 10
///   GB/s; typeIntra escalates to NET and one channel at 10 GB/s is found. Lower speeds
///   are not strictly better (2 × 5 = 10). No duplication (< 25 GB/s).
/// * Tree: pinned to 1 channel, also 10 GB/s.
/// * Channels: 1 → postset 2; p2p min(2, 2) = 2 per peer (PCIe peers need 2).
#[test]
fn pcie_only_box() {
    let p = plan(&pcie_box(), 28);
    assert_eq!(
        lines(&p, &p.graphs.ring, 28)[0],
        "Pattern 4, crossNic 0, nChannels 1, bw 10.000000/10.000000, type NET/PIX, sameChannels 1"
    );
    assert_eq!(p.graphs.tree.n_channels, 1);
    assert_eq!(p.graphs.tree.bw_intra, 10.0);
    assert_eq!(
        p.counts.log_line(),
        "2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer"
    );
    assert_eq!(
        p.conn.channel_lines(28)[1],
        "Channel 01/02 : 0 1 2 3 4 5 6 7"
    );
    assert!(p.graphs.fallbacks.is_empty());
}

/// The same box on 2 nodes: the inter-node search bounds the intra type by the worst
/// GPU→NET type (SYS), but cross-socket GPU pairs are NET, and every order of 8 GPUs has a
/// cross-socket neighbour pair: no ring or tree exists, and NCCL falls back to one
/// channel in index order at 0.1 GB/s (and says so).
#[test]
fn pcie_only_box_two_nodes_falls_back() {
    let p = plan(&pcie_box().replicate(2), 28);
    assert_eq!(
        lines(&p, &p.graphs.ring, 28)[0],
        "Pattern 4, crossNic 0, nChannels 1, bw 0.100000/0.100000, type SYS/SYS, sameChannels 1"
    );
    assert_eq!(
        p.graphs.fallback_lines(),
        [
            "Could not find a path for pattern 4, falling back to simple order",
            "Could not find a path for pattern 1, falling back to simple order"
        ]
    );
    assert_eq!(p.counts.coll, 2);
    assert_eq!(
        p.conn.channel_lines(28)[0],
        "Channel 00/02 :  0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15"
    );
}

/// 2 × HGX H100 with one 400G NIC per GPU behind the GPU's Gen5 switch (2.28).
/// * maxBw = 48 (GPU→NET limited by Gen5 x16), start speed 48 (inter sm90 array).
/// * Ring with crossNic 0 must come back to the start NIC; only the NIC's own GPU reaches
///   it at PIX, so nothing is found until typeInter reaches PXN (7 channels, the PXN
///   return loads the NVSwitch links). crossNic=2 at PIX then lets each channel leave by
///   the last GPU's own NIC: 8 channels × 48 = 384 ≥ totalBw → done. 48 < 50 on sm90
///   with > 4 channels: no duplication.
/// * Tree: balanced trees need GPU g−1 to return to GPU g's NIC (PXN) → after
///   sameChannels, sm90 retries plain TREE: 8 chains × 48, perfect.
/// * Channels: 8 → postset 16 → the sm90 multi-node doubling needs < 16: stays 16. It
///   would give 32 only if the ring search stopped at 4 or fewer channels of > 45 GB/s,
///   or if the start speed were below 48 (e.g. a NIC or GPU on a slower PCIe link: at
///   45 GB/s 8 channels are below totalBw, so the search goes on to 16 × 24 = 384, and
///   postset gives 32) — that is the "16 vs 32 depends on PCIe" of the reference.
/// * p2p: 16; per peer (2.28): remote peers need max(netCountByBw = 0 for a PCIe
///   GPU, 2) = 2.
#[test]
fn hgx_h100_two_nodes() {
    let p = plan(&hgx(8, 90).replicate(2), 28);
    // Same search inputs as the real 2 × 8 H200 log of nccl-tests#256 (one 400G NIC and one
    // GPU per switch, 18 NVLinks): `=== System : maxBw 48.0 totalBw 370.8 ===`.
    assert_eq!(
        p.graphs.system_line(),
        "=== System : maxBw 48.0 totalBw 370.8 ==="
    );
    let ring = lines(&p, &p.graphs.ring, 28);
    assert_eq!(
        ring[0],
        "Pattern 4, crossNic 2, nChannels 8, bw 48.000000/48.000000, type NVL/PIX, sameChannels 0"
    );
    assert_eq!(
        ring[1],
        " 0 : NET/0-0 GPU/0-11000 GPU/0-81000 GPU/0-71000 GPU/0-61000 GPU/0-51000 GPU/0-41000 GPU/0-31000 GPU/0-21000 NET/0-1"
    );
    assert_eq!(
        ring[2],
        " 1 : NET/0-1 GPU/0-21000 GPU/0-31000 GPU/0-41000 GPU/0-51000 GPU/0-61000 GPU/0-71000 GPU/0-81000 GPU/0-11000 NET/0-0"
    );
    let tree = lines(&p, &p.graphs.tree, 28);
    assert_eq!(
        tree[0],
        "Pattern 3, crossNic 0, nChannels 8, bw 48.000000/48.000000, type NVL/PIX, sameChannels 0"
    );
    assert!(tree[1].ends_with("GPU/0-81000 NET/0-0"));
    assert_eq!(
        p.counts.log_line(),
        "16 coll channels, 16 collnet channels, 16 nvls channels, 16 p2p channels, 2 p2p channels per peer"
    );
    // 2.21–2.22: crossNic=2 may not change rails, so rings come back through the first
    // GPU's NIC by PXN; 8 × 45 (each GPU's NVSwitch link carries 8 × 45 ≤ 370.8) beats
    // 7 × 48.
    let p21 = plan(&hgx(8, 90).replicate(2), 21);
    assert_eq!(
        lines(&p21, &p21.graphs.ring, 21)[0],
        "Pattern 4, crossNic 0, nChannels 8, bw 45.000000/45.000000, type NVL/PXN, sameChannels 0"
    );
    // 2.21 prints GPUs by rank and NETs by their hex id.
    assert!(lines(&p21, &p21.graphs.ring, 21)[1].ends_with("GPU/1 NET/0"));
    assert_eq!(p21.counts.coll, 16);
    // 2.29+: remote peers need max(1 NIC, ceil(48 / 14)) = 4.
    assert_eq!(plan(&hgx(8, 90).replicate(2), 29).counts.p2p_per_peer, 4);
    // crossNic=2 rings alternate NICs: node 1 runs the pair's other channel.
    let ch = p.conn.channel_lines(28);
    assert_eq!(
        ch[0],
        "Channel 00/16 :  0  7  6  5  4  3  2  1  9 10 11 12 13 14 15  8"
    );
    assert_eq!(
        ch[1],
        "Channel 01/16 :  0  8 15 14 13 12 11 10  9  1  2  3  4  5  6  7"
    );
    assert_eq!(ch[8][5..], ch[0][5..].replace("00/16", "08/16")[..]);
    // Rank 0 is the tree anchor of channel 0 (TREE: parent and both children on T[0]).
    assert!(
        p.conn
            .trees_line(0)
            .starts_with("Trees [0] 1/8/-1->0->-1 [1] -1/-1/-1->0->7")
    );
    assert_eq!(
        p.conn.tree_anchor_lines(0)[..2],
        ["Tree 0 : -1 -> 0 -> 1/8/-1", "Tree 8 : 8 -> 0 -> 1/-1/-1"]
    );
    assert_eq!(p.conn.nvls_head_lines()[0], "NVLS Head  0:  0  8");
    // Rank 0 heads NVLS channel 0 on node 0 (down slot 16 + 1 + 0); node 1's head 8 is its
    // child in tree 0 and its parent in tree 1.
    let nodes = crate::connect::Nodes::of(&p.sys);
    assert_eq!(
        p.conn.nvls_trees_line(0, &nodes).unwrap(),
        "NVLS Trees : 17/8/-1->0->-1 17/-1/-1->0->8"
    );
    assert_eq!(
        p.conn.nvls_trees_line(9, &nodes).unwrap(),
        "NVLS Trees : 18/-1/-1->9->1 18/1/-1->9->-1"
    );
    assert_eq!(p.conn.nvls_head_lines().len(), 8);
    let nvls = lines(&p, p.graphs.nvls.as_ref().unwrap(), 28);
    assert_eq!(nvls[1], " 0 : NET/0-0 GPU/0-11000 NET/0-0");
}

/// Real log (nccl-tests#319, 2 × HGX H100 with 8 rail-aligned CX-7, NCCL 2.26.2,
/// `nccl-tests-319-hgx-h100-2x8-nccl2.26.2-transports-EXCERPT.log`): its inter-node ring
/// hops `Channel cc/0 : a[x] -> b[y] [send|receive] via NET/…/<nic>` for channels 0–15.
/// The excerpt holds only some ranks' lines; every hop it shows is one of ours, with the
/// same NIC, and channels 8–15 repeat 0–7 as postset doubling says.
#[test]
fn real_log_h100_two_nodes_ring_hops() {
    let p = plan(&hgx(8, 90).replicate(2), 26);
    assert_eq!(p.counts.coll, 16);
    // (channel, from, to, nic) as logged.
    let logged = [
        (0, 1, 9, 1),
        (1, 9, 1, 1),
        (2, 10, 2, 2),
        (2, 3, 11, 3),
        (3, 11, 3, 3),
        (3, 2, 10, 2),
        (4, 12, 4, 4),
        (4, 5, 13, 5),
        (5, 13, 5, 5),
        (5, 4, 12, 4),
        (6, 14, 6, 6),
        (6, 7, 15, 7),
        (7, 15, 7, 7),
        (7, 6, 14, 6),
    ];
    for (c, from, to, nic) in logged {
        for ch in [c, c + 8] {
            let s = p.conn.channel_src[ch];
            assert_eq!(
                p.conn.next[s][from], to as i64,
                "channel {ch}: {from} -> {to}"
            );
            // The sender leaves through the NIC of its own GPU (rail-aligned).
            assert_eq!(from % 8, nic);
        }
    }
    // The ring graph says which NET each channel's last GPU uses.
    assert_eq!(p.graphs.ring.inter[0], (0, 1));
    assert_eq!(p.graphs.ring.inter[2], (2, 3));
}

/// 2 × HGX A100 (NVSwitch, one NIC per GPU). A balanced tree needs GPU g−1 to reach GPU
/// g's NIC in both directions: GPU→NET is PXN but NET→GPU stays PHB, and tree patterns
/// check the reverse path too. 2.25–2.28 bound typeInter by the worst GPU→NET type
/// (PXN) and sm80 gets no TREE retry, so the tree search fails and falls back to one
/// channel: 2 coll channels. This is the A100 regression reported on 2.25/2.26
/// (NVIDIA/nccl#1748, NVIDIA-NeMo/Run#266: "Could not find a path for pattern 1, falling
/// back to simple order"); 2.18–2.24 allowed up to SYS, and 2.29 forces SYS below sm90.
#[test]
fn a100_two_nodes_tree_search_by_version() {
    let t = hgx_a100(8).replicate(2);
    let p = plan(&t, 28);
    assert_eq!(
        p.graphs.fallback_lines(),
        ["Could not find a path for pattern 1, falling back to simple order"]
    );
    assert_eq!(
        lines(&p, &p.graphs.ring, 28)[0],
        "Pattern 4, crossNic 0, nChannels 10, bw 24.000000/24.000000, type NVL/PXN, sameChannels 0"
    );
    assert_eq!(p.counts.coll, 2);
    for (minor, bw) in [(24, "20.000000"), (29, "24.000000")] {
        let p = plan(&t, minor);
        assert!(p.graphs.fallbacks.is_empty(), "2.{minor}");
        assert_eq!(
            lines(&p, &p.graphs.tree, minor)[0],
            format!(
                "Pattern 1, crossNic 0, nChannels 10, bw {bw}/{bw}, type NVL/PHB, sameChannels 0"
            )
        );
        assert_eq!(p.counts.coll, 20);
    }
}

#[test]
fn hgx_h100_sixteen_nodes() {
    let p = plan(&hgx(8, 90).replicate(16), 28);
    assert_eq!(p.graphs.ring.n_channels, 8);
    assert_eq!(p.graphs.ring.cross_nic, 2);
    assert_eq!(p.graphs.ring.type_inter, PathType::Pix);
    assert_eq!(p.graphs.tree.n_channels, 8);
    // 2.28 per peer: 2 × 128 ranks > 4 × 16 → halve to 1.
    assert_eq!(
        p.counts.log_line(),
        "16 coll channels, 16 collnet channels, 16 nvls channels, 16 p2p channels, 1 p2p channels per peer"
    );
    let ring = p.conn.ring(0).unwrap();
    assert_eq!(ring.len(), 128);
    // 2.23+: width of "127"; the 28th rank ends exactly at 127 characters, where NCCL
    // stops without an ellipsis.
    let ch = &p.conn.channel_lines(28)[0];
    assert_eq!(ch.len(), 127);
    assert!(ch.starts_with("Channel 00/16 :   0   7   6"));
    assert!(ch.ends_with(" 25  26  27  28"));
    assert_eq!(p.conn.nvls_head_lines()[0].split_whitespace().count(), 19);
}

/// Inputs the search cannot use still give an answer, never a panic.
#[test]
fn degenerate_inputs() {
    use topo_model::*;
    // No GPU at all.
    let mut t = Topology::new(SourceInfo::default());
    t.add_node(0, None, NodeKind::Cpu(Cpu::default()));
    let p = plan(&t, 28);
    assert_eq!(p.conn.n_ranks, 0);
    assert!(
        p.conn
            .channel_lines(28)
            .iter()
            .all(|l| l.starts_with("Channel"))
    );
    // Two hosts without any NIC: no inter-node channel exists, NCCL's fallback applies.
    let mut t = hgx(2, 90);
    let mut nets: Vec<_> = t.nets();
    nets.sort_by(|a, b| b.cmp(a));
    for n in nets {
        t.graph.remove_node(n);
    }
    let p = plan(&t.replicate(2), 28);
    assert_eq!(p.graphs.ring.n_channels, 1);
    assert_eq!(p.graphs.fallbacks.len(), 2);
    assert_eq!(p.conn.ring(0).map(|r| r.len()), Some(4));
    // From 2.28.7 the print shows the NET ends of any multi-host graph, here the zeroed
    // slots (nccl-oracle 2.28.9: ` 0 : NET/0-0 GPU/... NET/0-0`); 2.27 prints none.
    let l28 = &lines(&p, &p.graphs.ring, 28)[1];
    assert!(
        l28.starts_with(" 0 : NET/0-0 GPU/") && l28.ends_with(" NET/0-0"),
        "{l28}"
    );
    let l27 = &lines(&p, &p.graphs.ring, 27)[1];
    assert!(!l27.contains("NET"), "{l27}");
    // 2.30 marks the fallback's network side as missing.
    let p = plan(&t.replicate(2), 30);
    assert_eq!(
        lines(&p, &p.graphs.ring, 30)[0],
        "Pattern 4, crossNic 0, nChannels 1, bw 0.100000/0.000000, type SYS/DIS, sameChannels 1"
    );
}

/// A 1024-GPU what-if: the search runs on one host, connect is linear in ranks (its speed
/// is measured in bench/scale, not here).
#[test]
fn thousand_gpus_plan() {
    let p = plan(&hgx(8, 90).replicate(128), 28);
    assert_eq!(p.conn.n_ranks, 1024);
    assert_eq!(p.conn.n_nodes, 128);
    assert_eq!(p.counts.coll, 16);
    assert_eq!(p.conn.ring(5).map(|r| r.len()), Some(1024));
    assert!(p.conn.trees_line(0).len() <= 1027);
}

/// Real log (NVIDIA/nccl#1781, NCCL 2.27.5): 2 H20 of an NVSwitch board in one
/// communicator. NCCL logged `24 coll channels, 24 collnet channels, 0 nvls channels, 32
/// p2p channels, 32 p2p channels per peer` (multicast unavailable in those pods: NVLS
/// off) and the tree line below: 6 chains 0→1, then 6 chains 1→0 (the sameChannels=0
/// search starts from every GPU), doubled to 24.
#[test]
fn real_log_two_h20_on_nvswitch() {
    let cp = ChannelParams {
        nvls_support: false,
        ..ChannelParams::for_version(27)
    };
    let p = plan_with(
        &hgx(2, 90),
        &BwConstants::default(),
        &SearchParams::for_version(27),
        &cp,
    );
    assert_eq!(
        p.counts.log_line(),
        "24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer"
    );
    let mut want0 = String::from("Trees");
    let mut want1 = String::from("Trees");
    for c in 0..24 {
        if c % 12 < 6 {
            want0.push_str(&format!(" [{c}] 1/-1/-1->0->-1"));
            want1.push_str(&format!(" [{c}] -1/-1/-1->1->0"));
        } else {
            want0.push_str(&format!(" [{c}] -1/-1/-1->0->1"));
            want1.push_str(&format!(" [{c}] 0/-1/-1->1->-1"));
        }
    }
    assert_eq!(p.conn.trees_line(0), want0);
    assert_eq!(p.conn.trees_line(1), want1);
    assert_eq!(p.conn.channel_lines(27)[5], "Channel 05/24 : 0 1");
}

/// Real log (NVIDIA/nccl#1781, first log, 2.27.5): the same GPUs in two pods seen as two
/// hosts of 1 GPU each over NET/Socket. NCCL logged `Channel 00/02 : 0 1`,
/// `Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1` on rank 0 and `2 coll channels, 2
/// collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer`. The
/// pods' PCIe layout is not in the log; any 1-GPU host whose NIC reports no speed
/// (10 Gb/s → one 1.2 GB/s channel) gives these lines.
#[test]
fn real_log_two_pods_over_socket() {
    let p = plan(&one_gpu_socket_host().replicate(2), 27);
    assert_eq!(
        lines(&p, &p.graphs.ring, 27)[0],
        "Pattern 4, crossNic 0, nChannels 1, bw 1.200000/1.200000, type LOC/PHB, sameChannels 1"
    );
    assert_eq!(
        p.counts.log_line(),
        "2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer"
    );
    assert_eq!(
        p.conn.channel_lines(27),
        ["Channel 00/02 : 0 1", "Channel 01/02 : 0 1"]
    );
    assert_eq!(
        p.conn.trees_line(0),
        "Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1"
    );
    assert_eq!(
        p.conn.trees_line(1),
        "Trees [0] -1/-1/-1->1->0 [1] 0/-1/-1->1->-1"
    );
}

#[test]
fn env_clamps_and_collnet() {
    let cp = ChannelParams {
        max_nchannels: Some(8),
        min_nchannels: Some(20),
        ..ChannelParams::for_version(28)
    };
    let p = plan_with(
        &hgx(8, 90),
        &BwConstants::default(),
        &SearchParams::for_version(28),
        &cp,
    );
    // Max first (24 → 8), then copies up to the minimum (20).
    assert_eq!(p.counts.coll, 20);
    assert_eq!(p.counts.copy_map[8..12], [0, 1, 2, 3]);
    assert_eq!(p.counts.p2p, 32);
    // 2.20–2.27 copy channels up to the NVLS count; operations start from them from 2.22
    // (src/enqueue.cc `nc = comm->nChannels`), from the channels before the copies in 2.20
    // and 2.21 (`comm->collChannels`).
    for (minor, algo) in [(21, 4), (26, 16)] {
        let cp = ChannelParams {
            max_nchannels: Some(4),
            ..ChannelParams::for_version(minor)
        };
        let p = plan_with(
            &hgx(8, 90),
            &BwConstants::default(),
            &SearchParams::for_version(minor),
            &cp,
        );
        assert_eq!(p.counts.coll_algo, algo, "2.{minor}");
        assert_eq!(p.counts.coll, 16, "2.{minor}");
    }
    // A single GPU: every ring channel is free (LOC), so the search fills MAXCHANNELS/2
    // at the top speed; no NVLS with fewer than 2 GPUs.
    let p = plan(&hgx(1, 90), 28);
    assert_eq!(p.graphs.ring.n_channels, 32);
    assert_eq!(p.graphs.ring.bw_intra, 60.0);
    assert_eq!(p.counts.coll, 64);
    assert_eq!(p.counts.nvls, 0);
}

/// AllGather3 (NCCL 2.28.9 src/init.cc): the fewest channels, the lowest bandwidths and
/// `sameChannels`, the worst path types and the largest `crossNic` win; a graph another node
/// did not search (no NVLS there) counts as empty and turns NVLS off.
#[test]
fn all_gather3_takes_the_worst_of_every_node() {
    let mut a = Graph::empty(GraphId::Ring, Pattern::Ring);
    a.n_channels = 4;
    a.bw_intra = 20.0;
    a.bw_inter = 12.0;
    a.type_intra = PathType::Nvl;
    let mut b = a.clone();
    b.n_channels = 1;
    b.bw_intra = 24.0;
    b.bw_inter = 6.0;
    b.type_intra = PathType::Phb;
    b.cross_nic = 2;
    b.same_channels = false;
    let graphs = |g: &Graph, nvls: Option<Graph>| Graphs {
        ring: g.clone(),
        tree: g.clone(),
        collnet_chain: None,
        collnet_direct: None,
        nvls,
        max_bw: 0.0,
        total_bw: 0.0,
        inter: true,
        fallbacks: vec![],
        search_steps: 0,
        node_orders: vec![],
        max_tree_pattern: g.pattern.number(),
    };
    let mut nvls = Graph::empty(GraphId::Nvls, Pattern::Nvls);
    nvls.n_channels = 16;
    let m = all_gather3(&graphs(&a, Some(nvls)), &[graphs(&b, None)]);
    assert_eq!(m.ring.n_channels, 1);
    assert_eq!((m.ring.bw_intra, m.ring.bw_inter), (20.0, 6.0));
    assert_eq!(m.ring.type_intra, PathType::Phb);
    assert_eq!(m.ring.cross_nic, 2);
    assert!(!m.ring.same_channels);
    assert_eq!(m.nvls.map(|g| g.n_channels), Some(0));
}

/// A Grace Hopper pair: an ARM CPU with two sm90 GPUs right under it (Gen4 x16, 24 GB/s),
/// each with a 450 GB/s C2C link to that CPU and 18 NVLinks to one NVSwitch, as the XML
/// `<gpu>` with `<c2c bw="45000" count="10"/>` reads.
fn grace_hopper_pair() -> Topology {
    use topo_model::*;
    let mut t = Topology::new(SourceInfo {
        kind: topo_model::SourceKind::Test,
        ..Default::default()
    });
    let cpu = t.add_node(
        0,
        None,
        NodeKind::Cpu(Cpu {
            numa: 0,
            arch: Some("arm64".into()),
            vendor: Some("ARM".into()),
            ..Default::default()
        }),
    );
    let nvs = t.add_node(
        0,
        None,
        NodeKind::NvSwitch(NvSwitch {
            busid: Some(BusId::new(0, 0x53, 0, 0)),
            ..Default::default()
        }),
    );
    for d in 0..2 {
        let mut g = Gpu::new(BusId::new(0, 0x09 + d as u8, 0, 0), d);
        g.sm = Some(90);
        g.gdr = Some(true);
        g.pcie = PcieLink::new(Some("16.0 GT/s PCIe"), Some(16));
        let gi = t.add_child(cpu, NodeKind::gpu(g));
        t.add_nvlink(gi, nvs, 18);
        let c2c = Link {
            kind: LinkKind::C2c,
            bw: 450.0,
            lanes: 10,
        };
        t.connect_both(gi, cpu, c2c);
    }
    t
}

/// A GPU right under its CPU has two links to it, PCI and C2C. The GPU-to-GPU path over the
/// CPU is C2C (450 GB/s, better than NVLink's 370.8 in 2.28), and NCCL's path holds the C2C
/// links (`ncclTopoSetPaths` keeps the link it came over), so the search charges those:
/// nccl-oracle at NCCL 2.28.9 finds 14 ring channels at 30 GB/s of type C2C. Charging the
/// first link to the CPU, the 24 GB/s PCI one, left topo with 1 channel.
#[test]
fn a_c2c_path_charges_the_c2c_links_not_the_pci_ones() {
    let t = grace_hopper_pair();
    let sys = System::build(&t, &BwConstants::default());
    let pol = PathPolicy {
        minor: 28,
        ..Default::default()
    };
    let paths = paths::compute(&sys, &pol);
    let ctx = Ctx::new(&sys, &paths, &SearchParams::for_version(28), 0);
    let p = ctx.gg(0, 1).unwrap();
    assert_eq!((p.ty, p.bw), (PathType::C2c, 450.0));
    let hop_bw = |ctx: &Ctx| -> Vec<f32> {
        let p = ctx.gg(0, 1).unwrap();
        p.hops.iter().map(|h| ctx.link_bw[h.link]).collect()
    };
    assert_eq!(hop_bw(&ctx), vec![450.0, 450.0]);
    // 2.18 took the first link to the next node whatever its kind: the PCI one here.
    let old = Ctx::new(&sys, &paths, &SearchParams::for_version(18), 0);
    assert_eq!(hop_bw(&old), vec![24.0, 450.0]);
    let ring = plan(&t, 28).graphs.ring;
    assert_eq!((ring.n_channels, ring.bw_intra), (14, 30.0));
    assert_eq!(ring.type_intra, PathType::C2c);
}

/// NCCL_P2P_DISABLE=1 sends every GPU-to-GPU path through the CPU. 2.29 takes maxBw from
/// those paths; 2.30 from the DEV nodes' paths, which keep NVLink (v2.30.7-1
/// src/graph/search.cc `ncclTopoSearchInit`): nccl-oracle at 2.30.7 prints maxBw 370.8 on
/// sweep seed 33 (8 sm90 GPUs on an NVSwitch, P2P disabled), 2.29.7 prints 3.0.
#[test]
fn p2p_disabled_max_bw_keeps_nvlink_from_2_30() {
    let sys = System::build(&hgx(8, 90), &BwConstants::default());
    let max_bw = |minor: u32, p2p_disable: bool| {
        let pol = PathPolicy {
            minor,
            p2p_disable,
            ..Default::default()
        };
        let paths = paths::compute(&sys, &pol);
        Ctx::new(&sys, &paths, &SearchParams::for_version(minor), 0).max_bw
    };
    let nvlink = max_bw(30, false);
    assert_eq!(max_bw(30, true), nvlink);
    assert_eq!(max_bw(29, false), nvlink);
    // 2.29: the PCIe Gen5 path through the CPU.
    assert_eq!(max_bw(29, true), 48.0);
}

/// 2.30's paths count the GPU-DEV links: two more hops GPU to GPU, one more GPU to
/// NVSwitch, three more on a PXN path (joined at the relay GPU); 2.29 counts the hops.
#[test]
fn dev_layer_adds_to_the_hop_count_from_2_30() {
    let sys = System::build(&hgx(8, 90), &BwConstants::default());
    for (minor, gg_extra, nvs_extra) in [(29, 0, 0), (30, 2, 1)] {
        let pol = PathPolicy {
            minor,
            ..Default::default()
        };
        let paths = paths::compute(&sys, &pol);
        let ctx = Ctx::new(&sys, &paths, &SearchParams::for_version(minor), 0);
        let gg = ctx.gg(0, 1).unwrap();
        assert_eq!(gg.count, gg.hops.len() + gg_extra);
        let gs = ctx.g_nvs[0].as_ref().unwrap();
        assert_eq!(gs.count, gs.hops.len() + nvs_extra);
        let sg = ctx.nvs_g[0].as_ref().unwrap();
        assert_eq!(sg.count, sg.hops.len() + nvs_extra);
    }
    assert_eq!(dev_links(true, false, PathType::Pxn), 3);
    assert_eq!(dev_links(true, false, PathType::Pxb), 1);
    assert_eq!(dev_links(false, true, PathType::Phb), 1);
}
