//! topo against NCCL's own graph code.
//!
//! 1. The three differences issue 13 found with `nccl-oracle` (NCCL 2.28.9's `src/graph/*.cc`
//!    built for the CPU), each pinned to NCCL's answer.
//! 2. The recorded corpus `fixtures/oracle/corpus.jsonl`: generated machines
//!    (`topo_nccl::testgen`) with NCCL's answers (see fixtures/README.md); topo must agree
//!    field by field except for the differences listed in [`EXPECTED`] (docs/differential.md
//!    says why each is there).

use crate::oracle_corpus::{Entry, analyze_machine};
use std::collections::BTreeMap;
use topo_nccl::analyze::{self, Analysis, Request, RuntimeFacts};
use topo_nccl::differential::{self, Check, Tally};
use topo_nccl::transport::RankPlacement;
use topo_nccl::version::NcclVersion;

fn plan(topo: &topo_model::Topology, env: &[(&str, &str)]) -> Analysis {
    analyze::analyze(&Request {
        topo,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        version: NcclVersion::parse("2.28").unwrap(),
        placement: RankPlacement::ProcessPerGpu,
        facts: RuntimeFacts::default(),
    })
    .unwrap()
}

fn xml_fixture(name: &str) -> topo_model::Topology {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/xml")
        .join(name);
    topo_source::ncclxml::load_file(&path).unwrap()
}

/// dgx-a100 lists NUMA 1 (GPUs 2, 3) before NUMA 3 (GPUs 0, 1): NCCL's GPU index 0 is rank
/// 2, so its search orders are `2 3 0 1 6 7 4 5` and its rings, rotated to rank 0,
/// `0 1 6 7 4 5 2 3` (nccl-oracle, NCCL 2.28.9).
#[test]
fn gpu_index_order_is_the_xml_order_not_the_rank_order() {
    let t = topo_source::profile::load_builtin("dgx-a100").unwrap();
    let a = plan(&t, &[]);
    assert_eq!(a.graphs.ring.intra[0], vec![2, 3, 0, 1, 6, 7, 4, 5]);
    assert_eq!(a.graphs.tree.intra[0], vec![2, 3, 0, 1, 6, 7, 4, 5]);
    assert_eq!(a.connection.ring(0).unwrap(), vec![0, 1, 6, 7, 4, 5, 2, 3]);
}

/// NCCL_P2P_DISABLE=1 on the IBM Cloud H100 box: NET beats SHM, NCCL splits the host into 8
/// one-GPU nodes, and ncclNvlsInit (fewer than 2 GPUs) leaves NVLS off: no NVLS graph.
#[test]
fn one_gpu_nodes_get_no_nvls_graph() {
    let t = xml_fixture("ibm-cloud-gx3d-h100-topo.xml");
    let a = plan(&t, &[("NCCL_P2P_DISABLE", "1")]);
    assert_eq!(a.nnodes, 8);
    assert!(a.graphs.nvls.as_ref().is_none_or(|g| g.n_channels == 0));
    assert_eq!(a.counts.nvls, 0);
    let a = plan(&t, &[]);
    assert_eq!(a.graphs.nvls.as_ref().map(|g| g.n_channels), Some(8));
}

/// NCCL_P2P_DISABLE=1 on dgx-b200: the split makes 2 nodes, but ncclNvlsInit chose the
/// single-host SM100 count (24) from the host hashes before nNodes was known.
#[test]
fn sm100_nvls_channels_follow_the_host_not_the_split() {
    let t = topo_source::profile::load_builtin("dgx-b200").unwrap();
    let a = plan(&t, &[("NCCL_P2P_DISABLE", "1")]);
    assert!(a.nnodes > 1);
    assert_eq!(a.counts.nvls, 24);
    // Two real hosts: the multi-node count.
    let a = plan(&t.replicate(2), &[]);
    assert_eq!(a.counts.nvls, 32);
}

/// NCCL_MAX_P2P_NCHANNELS and NCCL_MIN_P2P_NCHANNELS bound the send/recv channels
/// (`ncclTopoComputeP2pChannels`). nccl-oracle 2.28.9 on `topo xml --profile dgx-h100`,
/// `--nodes 2`, logs each line below; the fewer p2p channels also halve the channels per
/// remote peer (2 for 16 ranks unless they exceed 4 per p2p channel).
#[test]
fn p2p_channel_bounds_are_nccls() {
    let t = topo_source::profile::load_builtin("dgx-h100")
        .unwrap()
        .replicate(2);
    for (env, want) in [
        (&[][..], "16 p2p channels, 2 p2p channels per peer"),
        (
            &[("NCCL_MAX_P2P_NCHANNELS", "4")][..],
            "4 p2p channels, 1 p2p channels per peer",
        ),
        (
            &[("NCCL_MIN_P2P_NCHANNELS", "32")][..],
            "32 p2p channels, 2 p2p channels per peer",
        ),
        (
            &[
                ("NCCL_MAX_P2P_NCHANNELS", "4"),
                ("NCCL_NCHANNELS_PER_NET_PEER", "4"),
            ][..],
            "4 p2p channels, 4 p2p channels per peer",
        ),
        (
            &[
                ("NCCL_MAX_P2P_NCHANNELS", "2"),
                ("NCCL_MIN_P2P_NCHANNELS", "8"),
            ][..],
            "8 p2p channels, 2 p2p channels per peer",
        ),
    ] {
        let line = plan(&t, env).counts.log_line();
        assert!(line.ends_with(want), "{env:?}: {line}");
    }
}

/// A CPU's PCI links follow NCCL's fused XML (rank order), not the file's: NCCL 2.28.9's
/// `=== System` dump of pinned seed 147 lists CPU 0's GPUs `38000 (0)`, `36000 (3)`, `32000
/// (7)`, `31000 (10)` where the file has them the other way round. The path search keeps the
/// first of equally good routes, so the order picks the NVLink peer a GPU reaches the CPU
/// through (seed 147's ring channel 2).
#[test]
fn cpu_pci_links_follow_the_fused_xml_not_the_file() {
    let gpu = |bus: &str, dev: usize| {
        format!(
            r#"<pci busid="0000:{bus}:00.0" class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="{dev}" sm="89" rank="{dev}" gdr="1"/></pci>"#
        )
    };
    let xml = format!(
        r#"<system version="1"><cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">{}{}{}</cpu></system>"#,
        gpu("31", 2),
        gpu("36", 1),
        gpu("38", 0)
    );
    let t = topo_source::ncclxml::parse_str(&xml, "test").unwrap();
    let a = plan(&t, &[]);
    let sys = &a.system;
    let cpu = &sys.nodes[sys.cpus[0]];
    let order: Vec<u64> = cpu.links.iter().map(|l| sys.nodes[l.to].id).collect();
    assert_eq!(order, vec![0x38000, 0x36000, 0x31000]);
}

/// Bare `<nic>` elements on two CPUs of one host are one NIC to NCCL: `ncclTopoAddCpu`
/// (NCCL 2.28.9) ids such a NIC by the host alone (the NUMA id is masked off), so the first
/// CPU's NIC takes every bare NIC's NETs and the second CPU has none. A GPU on the second
/// CPU reaches its "own" bare NIC's NET across the CPUs (SYS), as NCCL's `=== System` dump
/// of pinned seed 998 shows (its NETs b and c, SYS from every GPU of rank 0's node).
#[test]
fn bare_nics_of_one_host_are_one_nic() {
    let cpu = |numa: u32, bus: &str, dev: usize, net: usize| {
        format!(
            r#"<cpu numaid="{numa}" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143"><pci busid="0000:{bus}:00.0" class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="{dev}" sm="90" rank="{dev}" gdr="1"/></pci><nic><net name="mlx5_{net}" dev="{net}" speed="400000" port="1" latency="0.000000" guid="0x{net}" maxconn="131072" gdr="1"/></nic></cpu>"#
        )
    };
    let xml = format!(
        r#"<system version="1">{}{}</system>"#,
        cpu(0, "18", 0, 0),
        cpu(1, "98", 1, 1)
    );
    let t = topo_source::ncclxml::parse_str(&xml, "test").unwrap();
    let a = plan(&t, &[]);
    let sys = &a.system;
    let nics = sys
        .nodes
        .iter()
        .filter(|n| n.kind == topo_nccl::system::NodeType::Nic)
        .count();
    assert_eq!(nics, 1);
    // GPU 1 (CPU 1) reaches NET 1 through CPU 0, where the merged NIC hangs.
    let net1 = sys.nets[1];
    let p = a.paths.get(sys.gpus[1], net1).unwrap();
    assert_eq!(p.ty, topo_nccl::types::PathType::Sys);
    let p = a.paths.get(sys.gpus[0], net1).unwrap();
    assert_eq!(p.ty, topo_nccl::types::PathType::Phb);
}

/// A GPU right under its CPU reaches it over PCI and over C2C; NCCL's GPU-to-GPU path
/// through that CPU holds the C2C links, and the search charges them. Two Grace Hopper GPUs
/// with 18 NVLinks each: at NCCL 2.28.9 (nccl-oracle) the C2C path (450 GB/s) beats NVLink
/// (370.8) and carries 14 ring channels at 30 GB/s; charged to the 24 GB/s PCI links topo
/// found one ring channel at 24.
#[test]
fn a_c2c_path_is_charged_on_the_c2c_links() {
    let gpu = |bus: &str, dev: usize| {
        format!(
            r#"<pci busid="0000:{bus}:00.0" class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" subsystem_device="0x16c1" link_speed="16.0 GT/s PCIe" link_width="16"><gpu dev="{dev}" sm="90" rank="{dev}" gdr="1"><nvlink target="0000:53:00.0" count="18" tclass="0x068000"/><c2c bw="45000" count="10"/></gpu></pci>"#
        )
    };
    let xml = format!(
        r#"<system version="1"><cpu numaid="0" affinity="0000ffff" arch="arm64" vendor="ARM" familyid="0" modelid="0">{}{}</cpu></system>"#,
        gpu("09", 0),
        gpu("0a", 1)
    );
    let t = topo_source::ncclxml::parse_str(&xml, "test").unwrap();
    let a = plan(&t, &[]);
    let line = |g: &topo_nccl::graph::Graph| a.graph_lines(g).remove(0);
    assert_eq!(
        line(&a.graphs.ring),
        "Pattern 4, crossNic 0, nChannels 14, bw 30.000000/30.000000, type C2C/PIX, sameChannels 1"
    );
    assert_eq!(
        line(&a.graphs.tree),
        "Pattern 1, crossNic 0, nChannels 14, bw 60.000000/50.000000, type C2C/PIX, sameChannels 0"
    );
    assert_eq!(
        a.counts.log_line(),
        "28 coll channels, 28 collnet channels, 16 nvls channels, 32 p2p channels, 2 p2p channels per peer"
    );
}

/// The same link choice on a P2C path (GPU over C2C to its CPU, then PCI to a NIC): two
/// GB200 NVL72 trays at NCCL 2.28.9 (nccl-oracle, the profile as `topo xml` writes it) get
/// 10 ring channels, which also enter and leave by the BlueField ports; charged to the
/// GPUs' PCI links topo found 8.
#[test]
fn gb200_trays_charge_c2c_on_their_p2c_paths() {
    let profile = topo_source::profile::load_builtin("gb200-nvl72").unwrap();
    let xml = topo_source::ncclxml::write(&profile).unwrap();
    let t = topo_source::ncclxml::parse_str(&xml, "test").unwrap();
    let a = plan(&t.replicate(2), &[]);
    let ring = a.graph_lines(&a.graphs.ring).remove(0);
    assert_eq!(
        ring,
        "Pattern 4, crossNic 0, nChannels 10, bw 24.000000/24.000000, type NVL/P2C, sameChannels 0"
    );
    assert_eq!(
        a.counts.log_line(),
        "20 coll channels, 20 collnet channels, 32 nvls channels, 32 p2p channels, 2 p2p channels per peer"
    );
}

type GraphOf = fn(&Analysis) -> Option<&topo_nccl::graph::Graph>;

fn ring(a: &Analysis) -> Option<&topo_nccl::graph::Graph> {
    Some(&a.graphs.ring)
}

fn nvls(a: &Analysis) -> Option<&topo_nccl::graph::Graph> {
    a.graphs.nvls.as_ref()
}

/// Asserts the first graph line of a generated machine (`topo_nccl::testgen`, the sweep's
/// seeds) as topo plans it at each version, on `nodes` nodes (`None`: the generator's count).
fn assert_graph_lines(seed: u64, nodes: Option<usize>, graph: GraphOf, want: &[(&str, &str)]) {
    let m = topo_nccl::testgen::generate(seed);
    for (version, line) in want {
        let a = analyze_machine(&m.xml, &m.env, nodes.unwrap_or(m.nodes), version).unwrap();
        let got = a.graph_lines(graph(&a).unwrap());
        assert_eq!(got[0], *line, "seed {seed} at {version}");
    }
}

/// Sweep seed 24: NCCL splits the host into nodes of 5 and 3 GPUs and keeps the launcher's
/// ranks, which releases before 2.27.5 print for graph GPUs. The stock nccl-oracle 2.26.6 on
/// this XML logs ` 0 : NET/0-7 GPU/4 GPU/0 GPU/2 GPU/6 GPU/7 NET/0-7`; topo printed the part's
/// own numbers (`GPU/2 GPU/0 GPU/1 GPU/3 GPU/4`) until the 2.26 dissimilar-host sweep.
#[test]
fn a_split_hosts_graph_names_the_launchers_ranks_before_2_27_5() {
    let m = topo_nccl::testgen::generate(24);
    let a = analyze_machine(&m.xml, &m.env, 1, "2.26").unwrap();
    assert!(a.nnodes > 1, "the host is split");
    let lines = a.graph_lines(&a.graphs.ring);
    assert_eq!(
        lines[1].trim(),
        "0 : NET/0-7 GPU/4 GPU/0 GPU/2 GPU/6 GPU/7 NET/0-7"
    );
}

/// Sweep seed 33 (8 sm90 GPUs on an NVSwitch, ARM CPUs, NCCL_P2P_DISABLE=1): the GPU paths
/// go through the CPU (3 GB/s), but 2.30 takes maxBw from the DEV nodes' paths, which keep
/// NVLink (370.8): its NVLS search starts at 50 and settles at 40/60 (nccl-oracle 2.30.7);
/// 2.29 starts at 3 and settles at 30/60.
#[test]
fn p2p_disabled_nvls_starts_from_the_nvlink_bandwidth_at_2_30() {
    assert_graph_lines(
        33,
        None,
        nvls,
        &[
            (
                "2.30",
                "Pattern 5, crossNic 0, nChannels 8, bw 40.000000/60.000000, type PHB/PIX, sameChannels 0",
            ),
            (
                "2.29",
                "Pattern 5, crossNic 0, nChannels 8, bw 30.000000/60.000000, type PHB/PIX, sameChannels 0",
            ),
        ],
    );
}

/// Sweep seed 5 (8 sm70 GPUs on a partial NVLink mesh, ARM, 2 nodes): 2.30 counts the
/// GPU-DEV links in a path's hops, three more on a PXN path than 2.29, one more on a direct
/// one; the PXB ring now has fewer hops than the PXN one at the same bandwidth and stays
/// (nccl-oracle 2.30.7: `NVL/PXB`; 2.29.7: `NVL/PXN`).
#[test]
fn pxn_paths_count_the_relay_gpu_dev_links_at_2_30() {
    assert_graph_lines(
        5,
        None,
        ring,
        &[
            (
                "2.30",
                "Pattern 4, crossNic 0, nChannels 4, bw 2.400000/2.400000, type NVL/PXB, sameChannels 0",
            ),
            (
                "2.29",
                "Pattern 4, crossNic 0, nChannels 4, bw 2.400000/2.400000, type NVL/PXN, sameChannels 0",
            ),
        ],
    );
}

/// Sweep seed 30 (2 PCIe sm75 GPUs on two Intel CPUs, 13 NICs of 50 Gb/s): NCCL splits the
/// host, one GPU a node. GPU 0 reaches its CPU at 12 GB/s and needs two 6.25 GB/s NICs, GPU 1
/// sits behind a x1 link (3 GB/s) and needs one. 2.29 and 2.30 take the fewest over every rank
/// (init.cc `allGather3Data[].p2pnChannelsPerPeer`): 1 channel per peer; up to 2.28 rank 0's
/// own count stands: 2 (nccl-oracle 2.26.6 to 2.30.7).
#[test]
fn p2p_channels_per_peer_are_the_fewest_over_every_rank_from_2_29() {
    let m = topo_nccl::testgen::generate(30);
    for (version, want) in [("2.28", 2), ("2.29", 1), ("2.30", 1)] {
        let a = analyze_machine(&m.xml, &m.env, m.nodes, version).unwrap();
        assert_eq!(a.nnodes, 2, "{version}: the host is split");
        assert_eq!(a.counts.p2p_per_peer, want, "{version}");
    }
}

/// Sweep seed 53 (4 PCIe sm89 GPUs on four ARM CPUs, NICs near GPUs 0, 2 and 3,
/// NCCL_P2P_LEVEL=0): GPUs 2 and 3 each have a NIC faster than the 6 GB/s between them, so
/// `ncclTopoCheckNet` holds that pair to the network (path NET) while NETs are in the system.
/// Up to v2.28.3-1 a single-node communicator loses its NETs in `ncclTopoTrimSystem` and the
/// paths are computed again (the pair is SYS, and the ring takes it: 0 2 3 1); from v2.28.7-1
/// the NETs stay (`system->inter = 0`) and the ring avoids the NET pair: 0 2 1 3
/// (nccl-oracle 2.26.6, 2.27.7 and 2.28.9).
#[test]
fn a_single_node_keeps_its_nets_from_2_28_7() {
    let m = topo_nccl::testgen::generate(53);
    for (version, want) in [
        ("2.26", [0, 2, 3, 1]),
        ("2.27", [0, 2, 3, 1]),
        ("2.28.3", [0, 2, 3, 1]),
        ("2.28", [0, 2, 1, 3]),
        ("2.30", [0, 2, 1, 3]),
    ] {
        let a = analyze_machine(&m.xml, &m.env, m.nodes, version).unwrap();
        assert_eq!(a.graphs.ring.intra[0], want, "{version}");
    }
}

/// Sweep seed 116 (2 sm90 GPUs behind x1 links, no NIC): no ring or tree fits, and from 2.29
/// the search's fallback picks NETs (`ncclTopoSelectNets`), which fails without any: NCCL's
/// own code stops ("Could not find any local path from gpu 0 to net", nccl-oracle 2.29.7 and
/// 2.30.7; 2.28.9 plans it). The plan says so from 2.29 (`net-none`), not at 2.28.
#[test]
fn a_search_fallback_without_nics_is_flagged_from_2_29() {
    let m = topo_nccl::testgen::generate(116);
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("116.xml");
    std::fs::write(&xml, &m.xml).unwrap();
    let xml = xml.to_string_lossy();
    for (version, flagged) in [("2.28", false), ("2.29", true), ("2.30", true)] {
        let a = analyze_machine(&m.xml, &m.env, m.nodes, version).unwrap();
        assert!(!a.graphs.fallbacks.is_empty(), "{version}");
        let out = crate::util::topo_clean_env()
            .args([
                "plan",
                "--from",
                &xml,
                "--nccl-version",
                version,
                "--format",
                "json",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{version}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let codes = crate::parity::severities(&doc, "messages", "code");
        assert_eq!(
            codes.contains_key("net-none"),
            flagged,
            "{version}: {codes:?}"
        );
    }
}

/// Sweep seed 143 (8 sm70/sm75 GPUs on a partial NVLink mesh, 2 nodes): NCCL splits each host,
/// GPU 7 apart. 2.30 keeps GPU 7's DEV node in the other node's trimmed topology; ranks 3 and 4
/// still reach each other through it, and `ncclTopoCheckP2p` cannot find its rank: init stops
/// (nccl-oracle 2.30.7: "ncclTopoDevToRank could not find rank for nvml dev 7"; 2.29.7 runs it).
#[test]
fn a_relay_through_a_split_off_gpu_stops_init_at_2_30() {
    let m = topo_nccl::testgen::generate(143);
    let a = analyze_machine(&m.xml, &m.env, m.nodes, "2.30").unwrap();
    assert_eq!(a.trimmed_relays.first(), Some(&[3, 4, 7]));
    let stops = topo_nccl::plan::init_stops(&a);
    assert_eq!(stops[0].code.name(), "nccl-init-fails");
    assert_eq!(stops[0].severity, topo_model::message::Severity::Error);
    let a = analyze_machine(&m.xml, &m.env, m.nodes, "2.29").unwrap();
    assert!(a.trimmed_relays.is_empty());
    assert!(topo_nccl::plan::init_stops(&a).is_empty());
}

/// Sweep seed 6 (4 sm80 GPUs on NVLink, no NIC) on 4 nodes: before v2.28.7-1 the search is
/// inter-node only where the host has NETs (`system->nodes[NET].count`), so each node is
/// searched as one (nccl-oracle 2.27.7: 6 channels at 20 GB/s over NVLink); from v2.28.7-1
/// `system->inter` says 4 nodes, nothing connects them, and the search falls back to the
/// simple order (2.28.9).
#[test]
fn nodes_without_nets_search_as_one_before_2_28_7() {
    assert_graph_lines(
        6,
        Some(4),
        ring,
        &[
            (
                "2.27",
                "Pattern 4, crossNic 0, nChannels 6, bw 20.000000/20.000000, type NVL/PIX, sameChannels 0",
            ),
            (
                "2.28",
                "Pattern 4, crossNic 0, nChannels 1, bw 0.100000/0.100000, type SYS/SYS, sameChannels 1",
            ),
        ],
    );
}

/// Sweep seed 75 (8 sm100 GPUs on a partial NVLink mesh, 16 NICs): NCCL splits the host;
/// rank 0's node searches a balanced tree, another node a TREE, and from 2.26 the tuning reads
/// the largest pattern over the ranks (`comm->maxTreePattern`, src/graph/tuning.cc: Tree × 0.85).
/// nccl-oracle 2.30.7's AllReduce Tree/LL cell: 1.235 GB/s (topo had 1.453).
#[test]
fn tree_bandwidth_reads_the_largest_tree_pattern_over_ranks() {
    use topo_nccl::types::{Algorithm, Collective, Protocol};
    let m = topo_nccl::testgen::generate(75);
    let a = analyze_machine(&m.xml, &m.env, m.nodes, "2.30").unwrap();
    assert!(a.nnodes > 1);
    assert_eq!(
        a.graphs.tree.pattern.number(),
        1,
        "rank 0's own tree is balanced"
    );
    let bw = a
        .costs
        .bw(Collective::AllReduce, Algorithm::Tree, Protocol::Ll)
        .unwrap();
    assert!((bw - 1.235).abs() < 0.001, "{bw}");
}

/// Host 0 of `oracle_sweep --hetero` seed 66 (2 sm70 GPUs on NVSwitch, 12 NICs), on 2 nodes:
/// its tree search falls back to 1 channel where the ring has 10, and init sets both graphs to
/// the smaller count before tuning (NCCL 2.28.9 src/init.cc). nccl-oracle 2.28.9's AllReduce
/// Ring cells: LL 0.04 and Simple 0.08 GB/s (topo had 0.4 and 0.8).
#[test]
fn ring_bandwidth_reads_the_channels_left_after_the_tree() {
    use topo_nccl::types::{Algorithm, Collective, Protocol};
    let xml = include_str!("../../fixtures/oracle/hetero-seed66-host0.xml");
    let a = analyze_machine(xml, &[], 2, "2.28").unwrap();
    assert_eq!(
        (a.graphs.ring.n_channels, a.graphs.tree.n_channels),
        (10, 1)
    );
    for (proto, want) in [(Protocol::Ll, 0.04), (Protocol::Simple, 0.08)] {
        let bw = a
            .costs
            .bw(Collective::AllReduce, Algorithm::Ring, proto)
            .unwrap();
        assert!((bw - want).abs() < 0.001, "{proto:?}: {bw}");
    }
}

/// Host 1 of `oracle_sweep --hetero` seed 90 (6 sm86 GPUs in an NVLink mesh over ARM
/// sockets, 9 NICs), on 2 nodes. GPUs 2 and 3 reach each other only over NVLink through
/// GPU 0 (NVB, 12 GB/s) while each has a 25 GB/s NIC: NCCL's P2P check returns for a relayed
/// path before it asks whether the network is faster (src/transport/p2p.cc, v2.18.5-1 to
/// v2.30.7-1), so the pair stays NVB and the ring below exists. nccl-oracle 2.26.6 to 2.30.7
/// all print it; topo had marked the pair NET and found a PXN ring instead.
#[test]
fn a_relayed_nvlink_pair_stays_p2p_when_the_network_is_faster() {
    let xml = include_str!("../../fixtures/oracle/hetero-seed90-host1.xml");
    let a = analyze_machine(xml, &[], 2, "2.28").unwrap();
    let log = a.graph_lines(&a.graphs.ring);
    assert_eq!(
        log[..2],
        [
            "Pattern 4, crossNic 0, nChannels 1, bw 12.000000/12.000000, type NVB/PIX, sameChannels 0",
            " 0 : NET/0-0 GPU/0-28000 GPU/0-22000 GPU/0-45000 GPU/0-14000 GPU/0-52000 GPU/0-2b000 NET/0-0"
        ]
    );
}

/// One corpus machine through topo: seed, summary, environment, and the checks (or why topo
/// refused the machine).
type Outcome = (
    u64,
    String,
    Vec<(String, String)>,
    Result<Vec<Check>, String>,
);

/// Differences between topo and NCCL's code that the corpus shows: (seed, check name as
/// `Check::name` prints it, kind). The kinds are explained in docs/differential.md ("Remaining
/// differences"): `split`, a host split into several nodes whose own search ends elsewhere
/// than NCCL's; `net`, the channel-to-NET assignment on two nodes;
/// `search`, a single-node search ending elsewhere. Regenerate with
/// `oracle_sweep --expected fixtures/oracle/corpus.jsonl`; the test fails when an entry no
/// longer differs, so the list stays exact.
const EXPECTED: &[(u64, &str, &str)] = &[];

#[test]
fn corpus_agrees_with_nccl_field_by_field() {
    let machines = check_corpus("corpus.jsonl", EXPECTED, |_| true);
    assert!(machines >= 200, "corpus has {machines} machines");
}

/// The other tags' corpus (`fixtures/oracle/corpus-versions.jsonl`): generated machines with
/// the answers of nccl-oracle at v2.26.6-1, v2.27.7-1, v2.29.7-1 and v2.30.7-1 on the
/// generator's 1 or 2 nodes, and at all five tags on 4 nodes; each entry is analysed at its
/// own version. No difference is expected.
#[test]
fn corpus_of_every_version_agrees_with_nccl_field_by_field() {
    let machines = check_corpus("corpus-versions.jsonl", &[], |_| true);
    assert!(machines >= 100, "corpus has {machines} machines");
}

/// Differences of [`pinned_sweep_machines_agree_with_nccl`]'s machines that remain, as
/// [`EXPECTED`] lists them for the corpus.
const EXPECTED_PINNED: &[(u64, &str, &str)] = &[];

/// The machines of the 1,000-machine sweep (bench/oracle) that differed from NCCL after
/// issue 13's first fixes, with NCCL 2.28.9's answers (`fixtures/oracle/pinned.jsonl`, made
/// by `oracle_sweep --corpus` on those seeds): each fix since makes some of them agree, and
/// [`EXPECTED_PINNED`] names the rest (docs/differential.md says why).
#[test]
fn pinned_sweep_machines_agree_with_nccl() {
    let machines = check_corpus("pinned.jsonl", EXPECTED_PINNED, |s| !HEAVY.contains(&s));
    assert_eq!(machines, 7);
}

/// Pinned machines whose search takes 200,000 to 2,000,000 steps (a few seconds each in a
/// release build, minutes in a debug one): run with `cargo test --test it -- --ignored`.
const HEAVY: &[u64] = &[147, 376, 477, 795, 998];

#[test]
#[ignore = "search-heavy: about a minute per machine in a debug build"]
fn pinned_heavy_sweep_machines_agree_with_nccl() {
    let machines = check_corpus("pinned.jsonl", EXPECTED_PINNED, |s| HEAVY.contains(&s));
    assert_eq!(machines, HEAVY.len());
}

/// Every machine of `fixtures/oracle/FILE` that `keep` accepts (by seed) through topo, every
/// field compared; fails on a difference not in `expected` and on an entry of `expected` that
/// agrees. Returns how many machines were compared.
fn check_corpus(file: &str, expected: &[(u64, &str, &str)], keep: fn(u64) -> bool) -> usize {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/oracle")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let entries: Vec<Entry> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &Entry| e.oracle.is_some() && keep(e.seed))
        .collect();
    let machines = entries.len();
    // Each machine on its own: spread them over the cores.
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(8);
    let results: Vec<Outcome> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let entries = &entries;
                // The search recurses per GPU and step: deep in a debug build.
                std::thread::Builder::new()
                    .stack_size(256 << 20)
                    .spawn_scoped(sc, move || {
                        entries
                            .iter()
                            .skip(t)
                            .step_by(threads)
                            .map(|e| {
                                let r = analyze_machine(&e.xml, &e.env, e.nodes, &e.version)
                                    .map(|a| differential::compare(e.oracle.as_ref().unwrap(), &a))
                                    .map_err(|err| format!("{err:#}"));
                                (e.seed, e.summary.clone(), e.env.clone(), r)
                            })
                            .collect::<Vec<_>>()
                    })
                    .unwrap()
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut tally = Tally::default();
    let mut unexpected = vec![];
    let mut seen_expected = BTreeMap::new();
    for (seed, summary, env, r) in results {
        let checks = match r {
            Ok(c) => c,
            Err(err) => {
                unexpected.push(format!("seed {seed}: topo refused: {err}"));
                continue;
            }
        };
        tally.add(&checks);
        for c in checks.iter().filter(|c| !c.equal) {
            let name = c.name();
            if let Some(x) = expected.iter().find(|x| x.0 == seed && x.1 == name) {
                seen_expected.insert((x.0, x.1), ());
                continue;
            }
            unexpected.push(format!(
                "seed {seed} ({summary}, env {env:?}): {name}\n  NCCL: {}\n  topo: {}",
                c.oracle, c.topo
            ));
        }
    }
    println!("{file}: {machines} machines: {}", tally.summary());
    let stale: Vec<_> = expected
        .iter()
        .filter(|x| keep(x.0) && !seen_expected.contains_key(&(x.0, x.1)))
        .collect();
    assert!(
        unexpected.is_empty(),
        "{} unexpected difference(s):\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    assert!(
        stale.is_empty(),
        "expected differences that now agree: {stale:?}"
    );
    machines
}
