use super::*;
use crate::version::VersionData;

fn data(v: &str) -> VersionData {
    VersionData::for_version(v).unwrap().1
}

fn policy(d: &VersionData, pairs: &[(&str, &str)]) -> EnvPolicy {
    let vars: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    EnvPolicy::from_env(&vars, d).unwrap()
}

fn graph(
    id: GraphId,
    pattern: Pattern,
    nch: usize,
    intra: f64,
    inter: f64,
    ti: PathType,
    te: PathType,
) -> Graph {
    let mut g = Graph::empty(id, pattern);
    g.n_channels = nch;
    g.bw_intra = intra;
    g.bw_inter = inter;
    g.type_intra = ti;
    g.type_inter = te;
    g.same_channels = true;
    g
}

/// One HGX H100 board, single node (reference §5.8 / §7.9).
fn h100<'a>(env: &'a EnvPolicy, d: &'a VersionData) -> TuningInput<'a> {
    let mut i = TuningInput::new(env, d, 8, 1);
    i.min_cc = 90;
    i.max_cc = 90;
    i.ring = Some(graph(
        GraphId::Ring,
        Pattern::Ring,
        12,
        30.0,
        30.0,
        PathType::Nvl,
        PathType::Pix,
    ));
    i.tree = Some(graph(
        GraphId::Tree,
        Pattern::BalancedTree,
        12,
        30.0,
        30.0,
        PathType::Nvl,
        PathType::Pix,
    ));
    i.nvls = Some(graph(
        GraphId::Nvls,
        Pattern::Nvls,
        8,
        40.0,
        60.0,
        PathType::Nvl,
        PathType::Pix,
    ));
    i.comm_channels = 24;
    i.algo_channels = 24;
    i.nvls_channels = 16;
    i.nvls_supported = true;
    i.has_nvswitch = true;
    i
}

/// `nodes` × 8 H100 with one NDR NIC per GPU (NET between nodes), rings 16 × 24 GB/s.
fn h100_nodes<'a>(env: &'a EnvPolicy, d: &'a VersionData, nodes: usize) -> TuningInput<'a> {
    let mut i = TuningInput::new(env, d, 8 * nodes, nodes);
    i.min_cc = 90;
    i.max_cc = 90;
    i.ring = Some(graph(
        GraphId::Ring,
        Pattern::Ring,
        16,
        24.0,
        24.0,
        PathType::Nvl,
        PathType::Pxb,
    ));
    i.tree = Some(graph(
        GraphId::Tree,
        Pattern::BalancedTree,
        16,
        24.0,
        24.0,
        PathType::Nvl,
        PathType::Pxb,
    ));
    i.nvls = Some(graph(
        GraphId::Nvls,
        Pattern::Nvls,
        8,
        40.0,
        40.0,
        PathType::Nvl,
        PathType::Pxb,
    ));
    i.comm_channels = 32;
    i.algo_channels = 32;
    i.nvls_channels = 16;
    i.nvls_supported = true;
    i.has_nvswitch = true;
    i
}

fn cell(t: &CostTable, f: Collective, a: Algorithm, p: Protocol) -> (f64, f64) {
    let c = t.cell(f, a, p).unwrap();
    (c.lat_us, c.bw_or_zero())
}

fn assert_cell(t: &CostTable, f: Collective, a: Algorithm, p: Protocol, lat: f64, bw: f64) {
    let (l, b) = cell(t, f, a, p);
    assert!(
        (l - lat).abs() < 0.051 && (b - bw).abs() < 0.051,
        "{} {} {}: got {l:.2}/{b:.2}, want {lat}/{bw}; {}",
        f.name(),
        a.name(),
        p.name(),
        t.cell(f, a, p).unwrap().explanation()
    );
}

#[test]
fn worked_example_8x_h100_nccl_2_30() {
    let d = data("2.30");
    let env = policy(&d, &[]);
    let t = CostTable::build(&h100(&env, &d));
    let rows: &[(Algorithm, Protocol, f64, f64)] = &[
        (Algorithm::Tree, Protocol::Ll, 15.2, 43.6),
        (Algorithm::Tree, Protocol::Ll128, 31.5, 128.8),
        (Algorithm::Tree, Protocol::Simple, 64.4, 165.6),
        (Algorithm::Ring, Protocol::Ll, 15.0, 80.6),
        (Algorithm::Ring, Protocol::Ll128, 40.6, 189.3),
        (Algorithm::Ring, Protocol::Simple, 56.0, 205.7),
        (Algorithm::Nvls, Protocol::Simple, 25.0, 272.0),
    ];
    for (a, p, lat, bw) in rows {
        assert_cell(&t, Collective::AllReduce, *a, *p, *lat, *bw);
    }
    // Other functions: Ring only for Broadcast/Reduce, NVLS for AllGather/ReduceScatter.
    assert_cell(
        &t,
        Collective::Broadcast,
        Algorithm::Ring,
        Protocol::Ll,
        7.2,
        141.0,
    );
    assert_cell(
        &t,
        Collective::Broadcast,
        Algorithm::Ring,
        Protocol::Simple,
        11.8,
        360.0,
    );
    assert_cell(
        &t,
        Collective::AllGather,
        Algorithm::Ring,
        Protocol::Ll,
        10.8,
        161.1,
    );
    assert_cell(
        &t,
        Collective::AllGather,
        Algorithm::Ring,
        Protocol::Simple,
        32.2,
        411.4,
    );
    assert_cell(
        &t,
        Collective::AllGather,
        Algorithm::Nvls,
        Protocol::Simple,
        25.0,
        208.25,
    );
    // Disabled cells say why.
    let c = t
        .cell(Collective::AllReduce, Algorithm::NvlsTree, Protocol::Simple)
        .unwrap();
    assert_eq!(c.bw, None);
    assert!(
        c.reason()
            .unwrap()
            .contains("NVLSTree needs more than one node")
    );
    let c = t
        .cell(
            Collective::AllReduce,
            Algorithm::CollnetDirect,
            Protocol::Simple,
        )
        .unwrap();
    assert!(c.reason().unwrap().contains("CollNet is not enabled"));
    let c = t
        .cell(Collective::AllGather, Algorithm::Pat, Protocol::Simple)
        .unwrap();
    assert!(c.reason().unwrap().contains("one rank per node"));
    // Explanations carry the constants.
    let ex = t
        .cell(Collective::AllReduce, Algorithm::Ring, Protocol::Ll)
        .unwrap()
        .explanation();
    assert!(
        ex.contains("LL min(llMaxBw 141, 360 × 0.5) = 141")
            && ex.contains("algbw 141 × 8/14 = 80.6"),
        "{ex}"
    );
    // Threads and thresholds as the real logs show them.
    assert_eq!(render_thread_thresholds(&t), "8/8/64 | 64/8/64 | 512 | 512");
    assert_eq!(t.max_threads[Algorithm::Ring as usize], [512, 640, 512]);
    assert_eq!(t.max_threads[Algorithm::Pat as usize], [0, 0, 0]);
}

#[test]
fn tuning_log_layout() {
    let d = data("2.30");
    let env = policy(&d, &[]);
    let t = CostTable::build(&h100(&env, &d));
    let log = render_tuning_log(&t);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines.len(),
        3 * 8,
        "3 blocks of header + 3 lines + 5 functions"
    );
    assert_eq!(
        lines[0],
        "  Algorithm   |                            Tree                  |                            Ring                  |                   CollNetDirect                  |"
    );
    assert_eq!(
        lines[7],
        "    AllReduce |    15.2/  43.6 |    31.5/ 128.8 |    64.4/ 165.6 |    15.0/  80.6 |    40.6/ 189.3 |    56.0/ 205.7 |     5.6/   0.0 |     5.6/   0.0 |    44.0/   0.0 |"
    );
    assert_eq!(
        lines[16],
        "  Algorithm   |                             PAT                  |"
    );
    assert_eq!(
        lines[17].matches('|').count(),
        10,
        "protocol line always has 9 columns"
    );
    assert_eq!(
        lines[18],
        " Max NThreads |              0 |              0 |              0 |"
    );
    insta::assert_snapshot!("h100_single_node_2_30", log);
}

/// The real 2.29.7 TUNING table from the realdata excerpt: 2 ranks on 2 "nodes" (RTX 5090,
/// sm120, sockets, P2P/SHM off). Graph figures inferred from the table: ring 2 ch × 1.2 GB/s,
/// tree 2 ch × 2.4 GB/s with a TREE pattern, inter type beyond PXN.
#[test]
fn real_log_rtx5090_two_ranks_nccl_2_29() {
    let d = data("2.29");
    let env = policy(&d, &[("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1")]);
    let mut i = TuningInput::new(&env, &d, 2, 2);
    i.min_cc = 120;
    i.max_cc = 120;
    i.ring = Some(graph(
        GraphId::Ring,
        Pattern::Ring,
        2,
        1.2,
        1.2,
        PathType::Loc,
        PathType::Sys,
    ));
    i.tree = Some(graph(
        GraphId::Tree,
        Pattern::Tree,
        2,
        2.4,
        2.4,
        PathType::Loc,
        PathType::Sys,
    ));
    i.comm_channels = 4;
    i.algo_channels = 4;
    let t = CostTable::build(&i);
    let log = render_tuning_log(&t);
    let real =
        include_str!("../../../../fixtures/nccl/tuning/nccl-ebpf-rtx5090-2rank-tuning-table.txt");
    let want: Vec<String> = real
        .lines()
        .filter(|l| l.contains("NCCL INFO ") && l.contains('|'))
        .map(|l| l.split("NCCL INFO ").nth(1).unwrap().to_string())
        .collect();
    let got: Vec<&str> = log.lines().collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    // And the per-size choices of that log: Broadcast Ring LL up to 16 KiB, then Simple.
    let op = OpContext::default();
    for (bytes, proto) in [
        (1024u64, Protocol::Ll),
        (16384, Protocol::Ll),
        (32768, Protocol::Simple),
        (1 << 27, Protocol::Simple),
    ] {
        let c = t.select(Collective::Broadcast, bytes, &op).unwrap();
        assert_eq!((c.algo, c.proto), (Algorithm::Ring, proto), "{bytes}");
    }
}

#[test]
fn selection_on_the_h100_table_and_crossovers() {
    let d = data("2.30");
    let env = policy(&d, &[]);
    let t = CostTable::build(&h100(&env, &d));
    let op = OpContext::default();
    let mut picks = vec![];
    for k in 3..=33 {
        let bytes = 1u64 << k;
        let c = t.select(Collective::AllReduce, bytes, &op).unwrap();
        picks.push((bytes, c.algo, c.proto));
    }
    // small: an LL variant; large: NVLS
    assert_eq!(picks[0].2, Protocol::Ll);
    assert!(matches!(picks[0].1, Algorithm::Ring | Algorithm::Tree));
    assert_eq!(picks.last().unwrap().1, Algorithm::Nvls);
    let first_nvls = picks.iter().find(|p| p.1 == Algorithm::Nvls).unwrap().0;
    let last_ll = picks.iter().rev().find(|p| p.2 == Protocol::Ll).unwrap().0;
    // Crossovers with this model (reported): Ring LL up to 1 MiB, NVLS Simple from 2 MiB;
    // Ring LL128 and Tree never win on one H100 board.
    assert_eq!(last_ll, 1 << 20, "{picks:?}");
    assert_eq!(first_nvls, 2 << 20, "{picks:?}");
    assert!(
        picks
            .iter()
            .all(|p| (p.1, p.2) == (Algorithm::Ring, Protocol::Ll) || p.1 == Algorithm::Nvls),
        "{picks:?}"
    );
    // exact crossover: 15.0 + x/80571 = 25.0 + x/272000 → x ≈ 1.145 MB
    let (mut lo, mut hi) = (1u64 << 20, 2u64 << 20);
    while hi - lo > 1 {
        let m = (lo + hi) / 2;
        if t.select(Collective::AllReduce, m, &op).unwrap().algo == Algorithm::Nvls {
            hi = m
        } else {
            lo = m
        }
    }
    assert!((1_144_000..1_146_000).contains(&hi), "NVLS from {hi} B");
    // ties go to the earlier pair; considered is in scan order
    let c = t.select(Collective::AllReduce, 8, &op).unwrap();
    assert_eq!(
        c.considered.first().map(|x| (x.0, x.1)),
        Some((Algorithm::Tree, Protocol::Ll))
    );
    assert!(c.time_us <= c.considered.iter().map(|x| x.2).fold(f64::MAX, f64::min));
    // channels and threads per op
    let c = t.select(Collective::AllReduce, 1 << 30, &op).unwrap();
    assert_eq!(
        (c.nchannels, c.nthreads),
        (16, 640),
        "NVLS: nvlsChannels, 640 threads"
    );
    // AllGather: NVLS 208.25 GB/s (no algbw conversion) loses to Ring Simple 411.4
    let c = t.select(Collective::AllGather, 1 << 30, &op).unwrap();
    assert_eq!((c.algo, c.proto), (Algorithm::Ring, Protocol::Simple));
    let c = t.select(Collective::Broadcast, 1 << 30, &op).unwrap();
    assert_eq!(
        (c.algo, c.proto, c.nchannels, c.nthreads),
        (Algorithm::Ring, Protocol::Simple, 24, 544)
    );
    // Ring LL 8 B: channels drop to 1 (8 < 1 × 512 × 64), threads halve while a multiple of 128.
    let (nc, nt, _) = t.channels_threads(Algorithm::Ring, Protocol::Ll, 8);
    assert_eq!((nc, nt), (1, 96));
    let (nc, nt, _) = t.channels_threads(Algorithm::Ring, Protocol::Simple, 1 << 20);
    assert_eq!(
        (nc, nt),
        (24, 544),
        "1 MiB ≥ 24 × 512 × 64 → no reduction; +32 sync warp"
    );
    let (nc, _, _) = t.channels_threads(Algorithm::Ring, Protocol::Simple, 256 << 10);
    assert_eq!(nc, 8, "256 KiB / (512 × 64) = 8 channels");
    let (nc, nt, _) = t.channels_threads(Algorithm::Tree, Protocol::Ll, 4096);
    assert_eq!((nc, nt), (1, 640), "tree always 640 threads (2.22+)");
    // not tuned
    assert!(t.select(Collective::SendRecv, 8, &op).is_err());
}

#[test]
fn tree_correction_and_ring_plateau() {
    let d = data("2.30");
    let env = policy(&d, &[]);
    let t = CostTable::build(&h100_nodes(&env, &d, 2));
    let op = OpContext::default();
    // Tree AllReduce at 4 KiB: index log2(4096/64) = 6 → LL factor 0.7.
    let c = t
        .cell(Collective::AllReduce, Algorithm::Tree, Protocol::Ll)
        .unwrap();
    let want = c.lat_us + 4096.0 / (1000.0 * c.bw.unwrap() * 0.7);
    let got = t.select(Collective::AllReduce, 4096, &op).unwrap();
    let tree_ll = got
        .considered
        .iter()
        .find(|x| x.0 == Algorithm::Tree && x.1 == Protocol::Ll)
        .unwrap()
        .2;
    assert!((tree_ll - want).abs() < 1e-9);
    // Ring Simple multi-node: latency × 1.4 once bytes/(nChannels × nRanks) ≥ 64.
    let c = t
        .cell(Collective::AllReduce, Algorithm::Ring, Protocol::Simple)
        .unwrap();
    let bytes = 64 * 32 * 16;
    let want = c.lat_us * 1.4 + bytes as f64 / (1000.0 * c.bw.unwrap());
    let got = t.select(Collective::AllReduce, bytes, &op).unwrap();
    let ring_s = got
        .considered
        .iter()
        .find(|x| x.0 == Algorithm::Ring && x.1 == Protocol::Simple)
        .unwrap()
        .2;
    assert!((ring_s - want).abs() < 1e-9);
    let below = t.select(Collective::AllReduce, bytes - 1, &op).unwrap();
    let ring_s = below
        .considered
        .iter()
        .find(|x| x.0 == Algorithm::Ring && x.1 == Protocol::Simple)
        .unwrap()
        .2;
    assert!((ring_s - (c.lat_us + (bytes - 1) as f64 / (1000.0 * c.bw.unwrap()))).abs() < 1e-9);
}

#[test]
fn multi_node_2_and_16_nodes() {
    let d = data("2.30");
    let env = policy(&d, &[]);
    let t2 = CostTable::build(&h100_nodes(&env, &d, 2));
    let t16 = CostTable::build(&h100_nodes(&env, &d, 16));
    // NVLSTree exists from 2 nodes; multi-node NVLS needs CollNet.
    assert!(
        t2.bw(Collective::AllReduce, Algorithm::NvlsTree, Protocol::Simple)
            .is_some()
    );
    let c = t2
        .cell(Collective::AllReduce, Algorithm::Nvls, Protocol::Simple)
        .unwrap();
    assert!(
        c.reason()
            .unwrap()
            .contains("multi-node NVLS needs CollNet")
    );
    // NVLSTree 2 nodes: min(40 × 0.85 × 7/8 × 2 = 59.5, 2 × 40, cap 57.7) × 8 ch × 16/30
    assert_cell(
        &t2,
        Collective::AllReduce,
        Algorithm::NvlsTree,
        Protocol::Simple,
        25.0 + 2.0 * 20.9,
        57.7 * 8.0 * 16.0 / 30.0,
    );
    // 16 nodes: min(59.5, 40, 45.5) × 8 × 128/254; latency 25 + 2 × log2(16) × 20.9
    assert_cell(
        &t16,
        Collective::AllReduce,
        Algorithm::NvlsTree,
        Protocol::Simple,
        25.0 + 8.0 * 20.9,
        40.0 * 8.0 * 128.0 / 254.0,
    );
    // Ring latency with nInter = 2(nNodes−1), intra steps raised to the Intel net overhead.
    // llMaxBw multi-node, Intel: row 0 (39.0 for 2 nodes, 20.4 above)
    assert_cell(
        &t2,
        Collective::AllReduce,
        Algorithm::Ring,
        Protocol::Ll,
        6.6 + 28.0 * 1.0 + 2.0 * 2.7,
        39.0 * 16.0 / 30.0,
    );
    assert_cell(
        &t2,
        Collective::AllReduce,
        Algorithm::Ring,
        Protocol::Simple,
        8.4 + 28.0 * 3.4 + 2.0 * 14.0,
        384.0 * 16.0 / 30.0,
    );
    assert_cell(
        &t16,
        Collective::AllReduce,
        Algorithm::Ring,
        Protocol::Ll,
        6.6 + 224.0 * 1.0 + 30.0 * 2.7,
        20.4 * 128.0 / 254.0,
    );
    assert_cell(
        &t16,
        Collective::AllGather,
        Algorithm::Ring,
        Protocol::Simple,
        8.4 + 112.0 * 3.4 + 15.0 * 14.0,
        384.0 * 128.0 / 127.0,
    );
    // Tree: 2 × ((ppn−1) intra + log2(nNodes) inter)
    assert_cell(
        &t2,
        Collective::AllReduce,
        Algorithm::Tree,
        Protocol::Ll,
        6.8 + 2.0 * (7.0 * 0.6 + 5.0),
        39.0 * 0.5,
    );
    assert_cell(
        &t16,
        Collective::AllReduce,
        Algorithm::Tree,
        Protocol::Ll,
        6.8 + 2.0 * (7.0 * 0.6 + 4.0 * 5.0),
        20.4 * 0.5,
    );
    assert_cell(
        &t16,
        Collective::AllReduce,
        Algorithm::Tree,
        Protocol::Simple,
        8.4 + 2.0 * (7.0 * 4.0 + 4.0 * 14.0),
        353.28 * 0.5,
    );
    // AMD CPUs: llMaxBw row 1 and a 2 us net overhead
    let mut i = h100_nodes(&env, &d, 16);
    i.cpu_vendor = CpuVendor::Amd;
    let ta = CostTable::build(&i);
    assert_cell(
        &ta,
        Collective::AllReduce,
        Algorithm::Ring,
        Protocol::Ll,
        6.6 + 224.0 * 2.0 + 30.0 * 2.7,
        19.0 * 128.0 / 254.0,
    );
    // Large AllReduce: NVLSTree on 2 nodes (246.2 GB/s vs Tree 176.6); Tree Simple on 16
    // nodes, where NVLSTree drops to 161.3 GB/s.
    let c = t2
        .select(Collective::AllReduce, 1 << 30, &OpContext::default())
        .unwrap();
    assert_eq!(
        (c.algo, c.nchannels, c.nthreads),
        (Algorithm::NvlsTree, 16, 640)
    );
    let c = t16
        .select(Collective::AllReduce, 1 << 30, &OpContext::default())
        .unwrap();
    assert_eq!(
        (c.algo, c.proto, c.nchannels, c.nthreads),
        (Algorithm::Tree, Protocol::Simple, 32, 640)
    );
}

#[test]
fn env_overrides_in_the_table() {
    let d = data("2.30");
    let env = policy(
        &d,
        &[
            ("NCCL_ALGO", "^tree"),
            ("NCCL_PROTO", "allreduce:simple"),
            ("NCCL_NTHREADS", "100"),
        ],
    );
    let t = CostTable::build(&h100(&env, &d));
    let c = t
        .cell(Collective::AllReduce, Algorithm::Tree, Protocol::Simple)
        .unwrap();
    assert_eq!(c.reason().unwrap(), "NCCL_ALGO excludes Tree");
    let c = t
        .cell(Collective::AllReduce, Algorithm::Ring, Protocol::Ll)
        .unwrap();
    assert_eq!(c.reason().unwrap(), "NCCL_PROTO excludes LL");
    assert!(
        t.bw(Collective::Broadcast, Algorithm::Ring, Protocol::Ll)
            .is_some()
    );
    assert_eq!(
        t.max_threads[Algorithm::Ring as usize],
        [512, 640, 512],
        "100 is not a multiple of 32: max"
    );
    let mut env2 = env.clone();
    t.apply_env_effects(&mut env2);
    let fx = env2.effects();
    let get = |n: &str| {
        fx.iter()
            .find(|e| e.name == n)
            .and_then(|e| e.effect.clone())
            .unwrap_or_default()
    };
    assert!(get("NCCL_ALGO").contains("AllReduce Tree"), "{fx:?}");
    assert!(get("NCCL_PROTO").contains("AllReduce Ring LL"), "{fx:?}");
    assert!(
        get("NCCL_NTHREADS").contains("not a multiple of 32"),
        "{fx:?}"
    );
    let c = t
        .select(Collective::AllReduce, 8, &OpContext::default())
        .unwrap();
    assert_eq!(c.proto, Protocol::Simple);
    // nothing left
    let env = policy(&d, &[("NCCL_ALGO", "collnetdirect")]);
    let t = CostTable::build(&h100(&env, &d));
    let e = t
        .select(Collective::AllReduce, 8, &OpContext::default())
        .unwrap_err()
        .message;
    assert_eq!(
        e,
        "no algorithm/protocol available for allreduce (NCCL_ALGO=collnetdirect)"
    );
    // LL128 forced on a PCIe machine
    let env = policy(&d, &[("NCCL_PROTO", "LL128")]);
    let mut i = h100(&env, &d);
    i.ring = Some(graph(
        GraphId::Ring,
        Pattern::Ring,
        2,
        12.0,
        12.0,
        PathType::Pxb,
        PathType::Pix,
    ));
    let t = CostTable::build(&i);
    assert!(
        t.bw(Collective::AllReduce, Algorithm::Ring, Protocol::Ll128)
            .is_some()
    );
    assert!(
        t.env_effects
            .iter()
            .any(|(k, v)| k == "NCCL_PROTO" && v.contains("LL128 forced on"))
    );
}

#[test]
fn ll128_auto_reasons() {
    let d = data("2.30");
    let env = policy(&d, &[]);
    let mut i = h100(&env, &d);
    i.ring = Some(graph(
        GraphId::Ring,
        Pattern::Ring,
        1,
        12.0,
        12.0,
        PathType::Pxb,
        PathType::Pix,
    ));
    let t = CostTable::build(&i);
    let c = t
        .cell(Collective::AllReduce, Algorithm::Ring, Protocol::Ll128)
        .unwrap();
    assert_eq!(
        c.reason().unwrap(),
        "LL128 disabled: intra path type PXB > NVB"
    );
    assert_eq!(
        t.max_threads[Algorithm::Ring as usize][2],
        256,
        "ring 1 × 12 ≤ PCI_BW: 256 Simple threads"
    );
    let mut i = h100_nodes(&env, &d, 2);
    i.ring = Some(graph(
        GraphId::Ring,
        Pattern::Ring,
        2,
        12.0,
        12.0,
        PathType::Nvl,
        PathType::Phb,
    ));
    let t = CostTable::build(&i);
    let c = t
        .cell(Collective::AllReduce, Algorithm::Ring, Protocol::Ll128)
        .unwrap();
    assert_eq!(
        c.reason().unwrap(),
        "LL128 disabled: inter path type PHB > PXN"
    );
    // NCCL_LL128_C2C=0: back to PXB
    let env0 = policy(&d, &[("NCCL_LL128_C2C", "0")]);
    let mut i = h100_nodes(&env0, &d, 2);
    i.ring = Some(graph(
        GraphId::Ring,
        Pattern::Ring,
        2,
        12.0,
        12.0,
        PathType::Nvl,
        PathType::Pxn,
    ));
    let t = CostTable::build(&i);
    assert_eq!(
        t.cell(Collective::AllReduce, Algorithm::Ring, Protocol::Ll128)
            .unwrap()
            .reason()
            .unwrap(),
        "LL128 disabled: inter path type PXN > PXB"
    );
}

// ---- version differences, one test per documented change (§7) ----

fn single(v: &str, pairs: &[(&str, &str)], f: impl Fn(&mut TuningInput)) -> CostTable {
    let d = data(v);
    let env = policy(&d, pairs);
    let mut i = h100(&env, &d);
    f(&mut i);
    CostTable::build(&i)
}

fn multi(v: &str, nodes: usize, f: impl Fn(&mut TuningInput)) -> CostTable {
    let d = data(v);
    let env = policy(&d, &[]);
    let mut i = h100_nodes(&env, &d, nodes);
    f(&mut i);
    CostTable::build(&i)
}

#[test]
fn v_ring_ll_factor_quarter_third_then_half() {
    let small = |i: &mut TuningInput| {
        i.ring = Some(graph(
            GraphId::Ring,
            Pattern::Ring,
            2,
            20.0,
            20.0,
            PathType::Nvl,
            PathType::Pix,
        ))
    };
    let t18 = single("2.18", &[], small);
    let t21 = single("2.21", &[], small);
    assert_cell(
        &t18,
        Collective::AllReduce,
        Algorithm::Ring,
        Protocol::Ll,
        6.6 + 14.0 * 0.6,
        40.0 / 4.0 * 8.0 / 14.0,
    );
    assert_cell(
        &t18,
        Collective::Broadcast,
        Algorithm::Ring,
        Protocol::Ll,
        7.2,
        40.0 / 3.0,
    );
    assert_cell(
        &t21,
        Collective::AllReduce,
        Algorithm::Ring,
        Protocol::Ll,
        6.6 + 14.0 * 0.6,
        20.0 * 8.0 / 14.0,
    );
    assert_cell(
        &t21,
        Collective::Broadcast,
        Algorithm::Ring,
        Protocol::Ll,
        7.2,
        20.0,
    );
}

#[test]
fn v_hopper_ll_max_bw_87_7_then_141() {
    assert_cell(
        &single("2.18", &[], |_| {}),
        Collective::Broadcast,
        Algorithm::Ring,
        Protocol::Ll,
        7.2,
        87.7,
    );
    assert_cell(
        &single("2.21", &[], |_| {}),
        Collective::Broadcast,
        Algorithm::Ring,
        Protocol::Ll,
        7.2,
        141.0,
    );
}

#[test]
fn v_ring_ll128_low_ppn_factor_until_2_22() {
    // 2 nodes × 1 GPU: ppn 1 < 2 → 0.7 in 2.21, 0.92 in 2.23.
    let one = |i: &mut TuningInput| {
        i.nranks = 2;
        i.local_ranks = vec![1, 1];
    };
    let a = multi("2.21", 2, one);
    let b = multi("2.23", 2, one);
    let want = |f: f64| (384.0 * f).min(16.0 * 36.7);
    assert!(
        (cell(&a, Collective::Broadcast, Algorithm::Ring, Protocol::Ll128).1 - want(0.7)).abs()
            < 0.01
    );
    assert!(
        (cell(&b, Collective::Broadcast, Algorithm::Ring, Protocol::Ll128).1 - want(0.92)).abs()
            < 0.01
    );
}

#[test]
fn v_tree_simple_latency_28_then_4_and_base_8_4() {
    assert_cell(
        &single("2.21", &[], |_| {}),
        Collective::AllReduce,
        Algorithm::Tree,
        Protocol::Simple,
        2.0 * 7.0 * 28.0,
        165.6,
    );
    assert_cell(
        &single("2.23", &[], |_| {}),
        Collective::AllReduce,
        Algorithm::Tree,
        Protocol::Simple,
        64.4,
        165.6,
    );
    // 2.18: Tree Simple NVLink 4, base 0
    assert_cell(
        &single("2.18", &[], |_| {}),
        Collective::AllReduce,
        Algorithm::Tree,
        Protocol::Simple,
        56.0,
        165.6,
    );
}

#[test]
fn v_pat_added_in_2_23_factor_0_85_then_0_75() {
    // 4 nodes × 1 GPU: PAT auto on.
    let one = |i: &mut TuningInput| {
        i.nranks = 4;
        i.local_ranks = vec![1; 4];
    };
    let t21 = multi("2.21", 4, one);
    let t23 = multi("2.23", 4, one);
    let t24 = multi("2.24", 4, one);
    let t28 = multi("2.28", 4, one);
    assert!(!t21.algorithms.contains(&Algorithm::Pat));
    assert!(
        t21.cell(Collective::AllGather, Algorithm::Pat, Protocol::Simple)
            .unwrap()
            .reason()
            .unwrap()
            .contains("PAT does not exist in NCCL 2.21")
    );
    // busBw 16 × 24 = 384 (tree graph, bwInter above 2 nodes), no algbw conversion for AG
    let lat = 8.0 + 2.0 * 14.0 / 3.5 + 4.0 * 2.8;
    assert_cell(
        &t23,
        Collective::AllGather,
        Algorithm::Pat,
        Protocol::Simple,
        lat,
        384.0 * 0.85,
    );
    assert_cell(
        &t24,
        Collective::AllGather,
        Algorithm::Pat,
        Protocol::Simple,
        lat,
        384.0 * 0.75,
    );
    assert_cell(
        &t28,
        Collective::AllGather,
        Algorithm::Pat,
        Protocol::Simple,
        lat,
        384.0 * 0.75,
    );
    assert_eq!(
        render_tuning_log(&t21).lines().count(),
        16,
        "6 algorithms: 2 blocks"
    );
    assert_eq!(
        render_tuning_log(&t23).lines().count(),
        24,
        "7 algorithms: 3 blocks"
    );
    // PAT forced off
    let d = data("2.30");
    let env = policy(&d, &[("NCCL_PAT_ENABLE", "0")]);
    let mut i = h100_nodes(&env, &d, 4);
    one(&mut i);
    let t = CostTable::build(&i);
    assert!(
        t.cell(Collective::AllGather, Algorithm::Pat, Protocol::Simple)
            .unwrap()
            .reason()
            .unwrap()
            .contains("NCCL_PAT_ENABLE=0")
    );
}

#[test]
fn v_inter_latency_with_one_rank_per_node_uses_tree_from_2_23() {
    let one = |i: &mut TuningInput| {
        i.nranks = 2;
        i.local_ranks = vec![1, 1];
    };
    // AllGather ring, 2 ranks: 1 step, 1 inter step. Simple inter: Ring NET 14 vs Tree NET 14 (2.23)
    // → compare LL: Ring NET 2.7 (2.21) vs Tree NET 5.0 (2.23).
    assert_cell(
        &multi("2.21", 2, one),
        Collective::AllGather,
        Algorithm::Ring,
        Protocol::Ll,
        6.6 + 2.7,
        39.0 * 2.0,
    );
    assert_cell(
        &multi("2.23", 2, one),
        Collective::AllGather,
        Algorithm::Ring,
        Protocol::Ll,
        6.6 + 5.0,
        39.0 * 2.0,
    );
}

#[test]
fn v_ring_inter_steps_2_nnodes_until_2_22() {
    // 2 nodes × 8: nsteps 30; 2.21: nInter 4; 2.23: nInter 2.
    assert_cell(
        &multi("2.21", 2, |_| {}),
        Collective::AllReduce,
        Algorithm::Ring,
        Protocol::Ll,
        6.6 + 26.0 + 4.0 * 2.7,
        39.0 * 16.0 / 30.0,
    );
    assert_cell(
        &multi("2.23", 2, |_| {}),
        Collective::AllReduce,
        Algorithm::Ring,
        Protocol::Ll,
        6.6 + 28.0 + 2.0 * 2.7,
        39.0 * 16.0 / 30.0,
    );
}

#[test]
fn v_nvls_bandwidth_rules() {
    // single node AllReduce: 2.18 generic 8 × 40 × 5/6; 2.21 min(40, 60) × 8 × 5/6;
    // 2.28 efficiency 59.5 × 8 × 8/14.
    let t18 = single("2.18", &[], |_| {});
    let t21 = single("2.21", &[], |_| {});
    let t27 = single("2.27", &[], |_| {});
    let t28 = single("2.28", &[], |_| {});
    assert_cell(
        &t18,
        Collective::AllReduce,
        Algorithm::Nvls,
        Protocol::Simple,
        23.0,
        320.0 * 5.0 / 6.0,
    );
    assert_cell(
        &t21,
        Collective::AllReduce,
        Algorithm::Nvls,
        Protocol::Simple,
        25.0,
        320.0 * 5.0 / 6.0,
    );
    assert_cell(
        &t27,
        Collective::AllReduce,
        Algorithm::Nvls,
        Protocol::Simple,
        25.0,
        320.0 * 5.0 / 6.0,
    );
    assert_cell(
        &t28,
        Collective::AllReduce,
        Algorithm::Nvls,
        Protocol::Simple,
        25.0,
        272.0,
    );
    // AllGather: 2.18 not modelled; 2.21 min(40,60) × 8 × 5/6; 2.23 no conversion: 320;
    // 2.27 min(40 × 7/8, 54) × 8 = 280; 2.28 26.03 × 8.
    assert!(
        !t18.cell(Collective::AllGather, Algorithm::Nvls, Protocol::Simple)
            .unwrap()
            .evaluated
    );
    assert_cell(
        &t21,
        Collective::AllGather,
        Algorithm::Nvls,
        Protocol::Simple,
        25.0,
        320.0 * 5.0 / 6.0,
    );
    assert_cell(
        &single("2.23", &[], |_| {}),
        Collective::AllGather,
        Algorithm::Nvls,
        Protocol::Simple,
        25.0,
        320.0,
    );
    assert_cell(
        &t27,
        Collective::AllGather,
        Algorithm::Nvls,
        Protocol::Simple,
        25.0,
        280.0,
    );
    assert_cell(
        &t28,
        Collective::AllGather,
        Algorithm::Nvls,
        Protocol::Simple,
        25.0,
        208.25,
    );
    // 2.28: an NVLS graph with one channel is not modelled at all
    let t = single("2.28", &[], |i| {
        i.nvls = Some(graph(
            GraphId::Nvls,
            Pattern::Nvls,
            1,
            40.0,
            60.0,
            PathType::Nvl,
            PathType::Pix,
        ))
    });
    let c = t
        .cell(Collective::AllReduce, Algorithm::Nvls, Protocol::Simple)
        .unwrap();
    assert!(!c.evaluated && c.reason().unwrap().contains("at least 2 channels"));
    // NVLSTree: 2.18 0.7 × n/(2(n−1)); 2.21 min(bwI, bwE/2 above 2 nodes) × 5/6
    assert_cell(
        &multi("2.18", 4, |_| {}),
        Collective::AllReduce,
        Algorithm::NvlsTree,
        Protocol::Simple,
        23.0 + 6.0 * 19.0,
        8.0 * 40.0 * 0.7 * 4.0 / 6.0,
    );
    assert_cell(
        &multi("2.21", 4, |_| {}),
        Collective::AllReduce,
        Algorithm::NvlsTree,
        Protocol::Simple,
        25.0 + 4.0 * 14.0,
        8.0 * 20.0 * 5.0 / 6.0,
    );
}

#[test]
fn v_nvlstree_net_latency_14_then_20_9() {
    assert_cell(
        &multi("2.27", 2, |_| {}),
        Collective::AllReduce,
        Algorithm::NvlsTree,
        Protocol::Simple,
        25.0 + 2.0 * 14.0,
        8.0 * 40.0 * 5.0 / 6.0,
    );
    let t28 = multi("2.28", 2, |_| {});
    assert!(
        (cell(
            &t28,
            Collective::AllReduce,
            Algorithm::NvlsTree,
            Protocol::Simple
        )
        .0 - (25.0 + 2.0 * 20.9))
            .abs()
            < 1e-9
    );
}

#[test]
fn v_ll128_compute_capability_rules() {
    let cc = |min: u32, max: u32| {
        move |i: &mut TuningInput| {
            i.min_cc = min;
            i.max_cc = max;
        }
    };
    let ll128 = |t: &CostTable| {
        t.cell(Collective::AllReduce, Algorithm::Ring, Protocol::Ll128)
            .unwrap()
            .reason()
    };
    // sm86: an exact list until 2.26, any cc ≥ 70 from 2.27
    assert!(
        ll128(&single("2.23", &[], cc(86, 86)))
            .unwrap()
            .contains("86 not in 70, 80, 90")
    );
    assert!(
        ll128(&single("2.26", &[], cc(86, 86)))
            .unwrap()
            .contains("not in 70, 80, 90, 100, 120")
    );
    assert_eq!(ll128(&single("2.27", &[], cc(86, 86))), None);
    assert!(
        ll128(&single("2.27", &[], cc(61, 61)))
            .unwrap()
            .contains("61 < 70")
    );
    // sm100 from 2.25
    assert!(ll128(&single("2.24", &[], cc(100, 100))).is_some());
    assert_eq!(ll128(&single("2.25", &[], cc(100, 100))), None);
    // mixed Hopper/Blackwell: off until 2.29, on in 2.30
    assert!(
        ll128(&single("2.28", &[], cc(90, 100)))
            .unwrap()
            .contains("mixed compute capabilities 90/100")
    );
    assert_eq!(ll128(&single("2.30", &[], cc(90, 100))), None);
    // inter PXN on sm80: never; on sm90 with NCCL_LL128_C2C=0 (2.27+): PXB limit
    let pxn = |i: &mut TuningInput| {
        i.nnodes = 2;
        i.nranks = 16;
        i.local_ranks = vec![8, 8];
        i.ring = Some(graph(
            GraphId::Ring,
            Pattern::Ring,
            12,
            30.0,
            30.0,
            PathType::Nvl,
            PathType::Pxn,
        ));
    };
    assert_eq!(ll128(&single("2.26", &[], pxn)), None);
    assert_eq!(ll128(&single("2.27", &[], pxn)), None);
    assert!(
        ll128(&single("2.27", &[("NCCL_LL128_C2C", "0")], pxn))
            .unwrap()
            .contains("PXN > PXB")
    );
    assert!(
        ll128(&single("2.26", &[("NCCL_LL128_C2C", "0")], pxn)).is_none(),
        "2.26 does not read it"
    );
}

#[test]
fn v_blackwell_tables_from_2_25() {
    let bw = |i: &mut TuningInput| {
        i.min_cc = 100;
        i.max_cc = 100;
    };
    // single-node Ring LL: llMaxBw Hopper row 141 (2.24, cc 100 → index 2) vs Blackwell 282.
    assert_cell(
        &single("2.24", &[], bw),
        Collective::Broadcast,
        Algorithm::Ring,
        Protocol::Ll,
        7.2,
        141.0,
    );
    assert_cell(
        &single("2.25", &[], bw),
        Collective::Broadcast,
        Algorithm::Ring,
        Protocol::Ll,
        7.2,
        180.0,
    );
    // Ring LL128 per-channel caps: 73.4 (2.25–2.28 at 1 node) vs 40 (2.29+): 12 ch × 40 = 480 > 331.2
    assert_cell(
        &single("2.28", &[], bw),
        Collective::Broadcast,
        Algorithm::Ring,
        Protocol::Ll128,
        15.9,
        331.2,
    );
    let t29 = single("2.29", &[], |i| {
        bw(i);
        i.ring = Some(graph(
            GraphId::Ring,
            Pattern::Ring,
            12,
            60.0,
            60.0,
            PathType::Nvl,
            PathType::Pix,
        ));
    });
    assert_cell(
        &t29,
        Collective::Broadcast,
        Algorithm::Ring,
        Protocol::Ll128,
        15.9,
        480.0,
    );
}

#[test]
fn v_algorithm_sets_for_allgather() {
    let ev = |t: &CostTable, a: Algorithm| {
        t.cell(Collective::AllGather, a, Protocol::Simple)
            .unwrap()
            .evaluated
    };
    let t18 = single("2.18", &[], |_| {});
    let t19 = single("2.19", &[], |_| {});
    let t21 = single("2.21", &[], |_| {});
    assert!(
        ev(&t18, Algorithm::Ring)
            && !ev(&t18, Algorithm::Nvls)
            && !ev(&t18, Algorithm::CollnetDirect)
    );
    assert!(ev(&t19, Algorithm::Nvls) && !ev(&t19, Algorithm::CollnetDirect));
    assert!(ev(&t21, Algorithm::Nvls) && ev(&t21, Algorithm::CollnetDirect));
}

#[test]
fn v_collnet_direct_arity_latency_0_5_then_0_4() {
    let cn = |i: &mut TuningInput| {
        i.collnet_enabled = true;
        i.collnet_heads = 8;
        i.collnet_direct = Some(graph(
            GraphId::CollnetDirect,
            Pattern::CollnetDirect,
            8,
            24.0,
            24.0,
            PathType::Nvl,
            PathType::Pxb,
        ));
    };
    // 2 nodes × 8: 2 × (min(1,7) × intra + 7 × arity) + inter; NET CollNetDirect Simple 10.7 / 31
    let t18 = multi("2.18", 2, cn);
    let t21 = multi("2.21", 2, cn);
    assert!(
        (cell(
            &t18,
            Collective::AllReduce,
            Algorithm::CollnetDirect,
            Protocol::Simple
        )
        .0 - (2.0 * (8.0 + 3.5) + 10.7))
            .abs()
            < 1e-9
    );
    assert!(
        (cell(
            &t21,
            Collective::AllReduce,
            Algorithm::CollnetDirect,
            Protocol::Simple
        )
        .0 - (2.0 * (3.7 + 2.8) + 31.0))
            .abs()
            < 1e-9
    );
    // with CollNet, multi-node NVLS comes back
    assert!(
        t21.bw(Collective::AllReduce, Algorithm::Nvls, Protocol::Simple)
            .is_some()
    );
}

#[test]
fn v_no_algorithm_left_fallbacks() {
    let op = OpContext::default();
    // NCCL_ALGO=NVLS on a machine without an NVLS graph.
    let no_nvls = |i: &mut TuningInput| {
        i.nvls = None;
        i.nvls_supported = false;
    };
    // 2.22: Ring comes back (backup); 2.24: error
    let t22 = single("2.22", &[("NCCL_ALGO", "NVLS")], no_nvls);
    assert_eq!(
        t22.select(Collective::AllReduce, 1 << 20, &op)
            .unwrap()
            .algo,
        Algorithm::Ring
    );
    // 2.21 restores every Ring protocol, 2.22 only the enabled ones (LL128 auto is off on PCIe)
    let pcie = |i: &mut TuningInput| {
        no_nvls(i);
        i.ring = Some(graph(
            GraphId::Ring,
            Pattern::Ring,
            2,
            12.0,
            12.0,
            PathType::Pxb,
            PathType::Pix,
        ));
    };
    let t21 = single("2.21", &[("NCCL_ALGO", "NVLS")], pcie);
    assert!(
        t21.bw(Collective::AllReduce, Algorithm::Ring, Protocol::Ll128)
            .is_some()
    );
    let t22 = single("2.22", &[("NCCL_ALGO", "NVLS")], pcie);
    assert!(
        t22.bw(Collective::AllReduce, Algorithm::Ring, Protocol::Ll128)
            .is_none()
    );
    assert!(
        t22.bw(Collective::AllReduce, Algorithm::Ring, Protocol::Simple)
            .is_some()
    );
    let t24 = single("2.24", &[("NCCL_ALGO", "NVLS")], no_nvls);
    assert!(t24.select(Collective::AllReduce, 1 << 20, &op).is_err());
    // NCCL_ALGO=CollNetDirect without CollNet: ≤2.23 ignores it (Ring+Tree back)
    let t23 = single("2.23", &[("NCCL_ALGO", "CollNetDirect")], |_| {});
    assert!(
        t23.bw(Collective::AllReduce, Algorithm::Tree, Protocol::Simple)
            .is_some()
    );
    assert!(
        t23.bw(Collective::AllReduce, Algorithm::Nvls, Protocol::Simple)
            .is_none()
    );
    // 2.18: NCCL_ALGO never disables Ring for non-AllReduce
    let t18 = single("2.18", &[("NCCL_ALGO", "Tree")], |_| {});
    assert!(
        t18.bw(Collective::Broadcast, Algorithm::Ring, Protocol::Simple)
            .is_some()
    );
    assert!(
        t18.bw(Collective::AllReduce, Algorithm::Ring, Protocol::Simple)
            .is_none()
    );
    let t20 = single("2.20", &[("NCCL_ALGO", "Tree")], |_| {});
    assert!(t20.select(Collective::Broadcast, 1 << 20, &op).is_err());
}

#[test]
fn v_threads_and_channels_per_op() {
    let t18 = single("2.18", &[], |_| {});
    let t21 = single("2.21", &[], |_| {});
    let t22 = single("2.22", &[], |_| {});
    // 2.18 single loop: channels first, then threads in the same loop → same as split here
    assert_eq!(t18.channels_threads(Algorithm::Ring, Protocol::Ll, 8).0, 1);
    // Tree LL at 1 KiB: 1 channel, threads halved 512 → 128 (1024 < 1 × 256 × 8); 2.22+ forces 640
    assert_eq!(
        t21.channels_threads(Algorithm::Tree, Protocol::Ll, 1024).1,
        128
    );
    assert_eq!(
        t22.channels_threads(Algorithm::Tree, Protocol::Ll, 1024).1,
        640
    );
    // multi-node NVLS channels: min(nvlsChannels, nChannels) from 2.28
    let cn = |i: &mut TuningInput| {
        i.collnet_enabled = true;
        i.comm_channels = 8;
        i.algo_channels = 8;
    };
    let a = multi("2.27", 2, cn);
    let b = multi("2.28", 2, cn);
    assert_eq!(
        a.channels_threads(Algorithm::Nvls, Protocol::Simple, 1 << 30)
            .0,
        16
    );
    assert_eq!(
        b.channels_threads(Algorithm::Nvls, Protocol::Simple, 1 << 30)
            .0,
        8
    );
}

#[test]
fn v_nvlstree_size_correction_on_blackwell_x86_from_2_29() {
    let bw = |i: &mut TuningInput| {
        i.min_cc = 100;
        i.max_cc = 100;
    };
    let t28 = multi("2.28", 2, bw);
    let t29 = multi("2.29", 2, bw);
    let time = |t: &CostTable| {
        t.select(Collective::AllReduce, 1 << 20, &OpContext::default())
            .unwrap()
            .considered
            .iter()
            .find(|x| x.0 == Algorithm::NvlsTree)
            .unwrap()
            .2
    };
    let c = t28
        .cell(Collective::AllReduce, Algorithm::NvlsTree, Protocol::Simple)
        .unwrap();
    let base = c.lat_us + (1 << 20) as f64 / (1000.0 * c.bw.unwrap());
    assert!((time(&t28) - base).abs() < 1e-9);
    // log2(1 MiB / 64) = 14 → Simple factor 0.5
    let corrected = c.lat_us + (1 << 20) as f64 / (1000.0 * c.bw.unwrap() * 0.5);
    assert!((time(&t29) - corrected).abs() < 1e-9);
}

#[test]
fn busbw_factors_per_nccl_tests() {
    assert_eq!(busbw_factor(Collective::AllReduce, 8), 1.75);
    assert_eq!(busbw_factor(Collective::AllGather, 8), 0.875);
    assert_eq!(busbw_factor(Collective::ReduceScatter, 16), 15.0 / 16.0);
    assert_eq!(busbw_factor(Collective::AllToAll, 4), 0.75);
    assert_eq!(busbw_factor(Collective::Broadcast, 8), 1.0);
    assert_eq!(busbw_factor(Collective::SendRecv, 8), 1.0);
    assert_eq!(algbw_gbps(1_000_000, 10.0), 100.0);
    assert_eq!(busbw_gbps(Collective::AllReduce, 8, 1_000_000, 10.0), 175.0);
    // the model's ring conversion is the inverse: Ring Simple algbw × factor = busBw
    let d = data("2.30");
    let env = policy(&d, &[]);
    let t = CostTable::build(&h100(&env, &d));
    let bw = t
        .bw(Collective::AllReduce, Algorithm::Ring, Protocol::Simple)
        .unwrap();
    assert!((bw * busbw_factor(Collective::AllReduce, 8) - 360.0).abs() < 1e-9);
}

#[test]
fn single_rank_needs_no_algorithm() {
    let d = data("2.30");
    let env = policy(&d, &[]);
    let i = TuningInput::new(&env, &d, 1, 1);
    let t = CostTable::build(&i);
    let c = t
        .select(Collective::AllReduce, 1 << 20, &OpContext::default())
        .unwrap();
    assert_eq!(
        (c.algo, c.proto, c.time_us),
        (Algorithm::Ring, Protocol::Simple, 0.0)
    );
}

#[test]
fn enable_matrix_log_from_2_24() {
    let d = data("2.30");
    assert_eq!(render_enable_matrix(&policy(&d, &[]), &d), None);
    let m =
        render_enable_matrix(&policy(&d, &[("NCCL_PROTO", "^LL128;allreduce:LL128")]), &d).unwrap();
    let lines: Vec<&str> = m.lines().collect();
    assert_eq!(lines[0], "Enabled NCCL Func/Proto/Algo Matrix:");
    assert_eq!(
        lines[1],
        "     Function |       LL     LL128    Simple   |          Tree           Ring  CollNetDirect   CollNetChain           NVLS       NVLSTree            PAT  "
    );
    assert_eq!(
        lines[2],
        "    Broadcast |        1         0         1   |             1              1              1              1              1              1              1  "
    );
    assert!(lines[6].starts_with("    AllReduce |        0         1         0   |"));
    let d23 = data("2.23");
    assert_eq!(
        render_enable_matrix(&policy(&d23, &[("NCCL_ALGO", "ring")]), &d23),
        None
    );
}

#[test]
fn costs_for_the_plan_json() {
    let d = data("2.30");
    let env = policy(&d, &[]);
    let t = CostTable::build(&h100(&env, &d));
    let c = t.costs();
    let ar = &c["allreduce"];
    let ring_ll = ar["ring"]["ll"].unwrap();
    assert!((ring_ll.bw_gbps - 80.571).abs() < 0.001 && (ring_ll.lat_us - 15.0).abs() < 1e-9);
    assert_eq!(ar["nvlstree"]["simple"], None);
    assert_eq!(c["broadcast"]["tree"]["simple"], None);
    assert_eq!(ar.len(), 7);
    assert_eq!(c.len(), 5);
    let d21 = data("2.21");
    let env = policy(&d21, &[]);
    assert!(!CostTable::build(&h100(&env, &d21)).costs()["allreduce"].contains_key("pat"));
}
