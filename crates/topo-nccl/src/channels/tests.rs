//! Channel-count rules that changed in NCCL 2.29 and 2.30, each against the NCCL source that
//! sets it (checked with nccl-oracle at v2.29.7-1 and v2.30.7-1 on the built-in profiles).

use super::*;
use crate::analyze::Analysis;
use topo_model::Topology;
use topo_model::testing::hgx;

fn run(t: &Topology, env: &[(&str, &str)], version: &str) -> Analysis {
    crate::analyze::analyze_on_big_stack(t, env, version)
}

fn facts(n_nodes: usize, min_local_ranks: usize, min_net_bw: f32) -> NvlsTuningFacts {
    NvlsTuningFacts {
        n_nodes,
        min_local_ranks,
        min_net_bw,
        min_cc: 100,
    }
}

/// v2.30.7-1 src/transport/nvls.cc `ncclNvlsTuning` / `ncclNvlsTreeSm100Tuning`, branch by
/// branch.
#[test]
fn nvls_channels_of_2_30_follow_nodes_nic_bandwidth_and_ranks_per_node() {
    let p = ChannelParams::for_version(30);
    let at = |cc: u32, f: NvlsTuningFacts| {
        let f = NvlsTuningFacts {
            min_cc: cc.min(f.min_cc),
            ..f
        };
        nvls_tuned_channels(&p, 8, cc, f)
    };
    assert_eq!(at(90, facts(4, 8, 48.0)), 16, "sm90 keeps its 16");
    assert_eq!(at(100, facts(1, 8, 0.0)), 24, "one NVLink domain");
    assert_eq!(at(100, facts(2, 8, 48.0)), 32, "two nodes, 400G");
    assert_eq!(at(100, facts(4, 8, 48.0)), 24, "four nodes, 400G");
    assert_eq!(at(100, facts(4, 8, 96.0)), 24, "800G, 8 ranks a node");
    assert_eq!(at(100, facts(4, 16, 96.0)), 32, "800G, 16 ranks a node");
    assert_eq!(
        at(100, facts(4, 8, 25.0)),
        32,
        "slower NICs keep the default"
    );
    // The user's count wins over the tuning, then the CTA bounds clamp it.
    let mut q = p.clone();
    q.nvls_nchannels = Some(8);
    assert_eq!(nvls_tuned_channels(&q, 8, 100, facts(4, 8, 48.0)), 8);
    q.nvls_nchannels = None;
    q.max_ctas = 16;
    assert_eq!(nvls_tuned_channels(&q, 8, 100, facts(2, 8, 48.0)), 16);
    assert_eq!(nvls_tuned_channels(&p, 1, 100, facts(4, 1, 48.0)), 0);
    // An sm100 rank with an sm90 host in the job: its own default (32 across nodes), no
    // SM100 tuning, which needs minCompCap >= 100.
    let mixed = NvlsTuningFacts {
        min_cc: 90,
        ..facts(4, 8, 48.0)
    };
    assert_eq!(nvls_tuned_channels(&p, 8, 100, mixed), 32);
}

/// 2.30 at 4 nodes of 8 sm100 GPUs with 400G NICs behind PCIe Gen5: 24 NVLS channels where
/// 2.29 (nvls.cc `ncclNvlsInit`: 32 across nodes) has 32.
#[test]
fn sm100_at_four_nodes_runs_24_nvls_channels_from_2_30() {
    let t = hgx(8, 100).replicate(4);
    assert_eq!(run(&t, &[], "2.29").counts.nvls, 32);
    let a = run(&t, &[], "2.30");
    assert_eq!(a.counts.nvls, 24);
    assert_eq!(
        min_net_bw(&a.system, &a.paths, &net_policy(&a.channel_params)),
        48.0
    );
    // Two nodes keep 32 in both.
    assert_eq!(run(&hgx(8, 100).replicate(2), &[], "2.30").counts.nvls, 32);
}

/// v2.29.7-1 src/graph/paths.cc `NCCL_P2P_PER_CHANNEL_NET_BW` (default 14 GB/s):
/// divUp(48, 7) = 7, a power of two up: 8 channels per remote peer.
#[test]
fn p2p_per_channel_net_bw_is_read_from_2_29() {
    let t = hgx(8, 90).replicate(2);
    let env = [("NCCL_P2P_PER_CHANNEL_NET_BW", "7")];
    assert_eq!(run(&t, &[], "2.29").counts.p2p_per_peer, 4);
    let a = run(&t, &env, "2.29");
    assert_eq!(a.counts.p2p_per_peer, 8);
    assert!(
        a.env.notes("NCCL_P2P_PER_CHANNEL_NET_BW")[0].contains("8 p2p channels per peer"),
        "{:?}",
        a.env.notes("NCCL_P2P_PER_CHANNEL_NET_BW")
    );
    let old = run(&t, &env, "2.28");
    assert_eq!(old.counts.p2p_per_peer, 2);
    assert_eq!(
        old.env.notes("NCCL_P2P_PER_CHANNEL_NET_BW"),
        ["ignored: NCCL 2.28 does not read it (added in 2.29)"]
    );
}

/// v2.30.7-1 src/init.cc `NCCL_P2P_MAX_PEERS` -> `p2pMaxPeers`, used by paths.cc
/// `ncclTopoComputeP2pChannels`: 4 x divUp(16, 8) = 8 <= 16 keeps 4 channels per peer where
/// 64 ranks (4 x 8 > 16) halve them to 2.
#[test]
fn p2p_max_peers_is_read_from_2_30() {
    let t = hgx(8, 90).replicate(8);
    let env = [("NCCL_P2P_MAX_PEERS", "16")];
    assert_eq!(run(&t, &[], "2.30").counts.p2p_per_peer, 2);
    assert_eq!(run(&t, &env, "2.30").counts.p2p_per_peer, 4);
    let old = run(&t, &env, "2.29");
    assert_eq!(old.counts.p2p_per_peer, 2);
    assert_eq!(
        old.env.notes("NCCL_P2P_MAX_PEERS"),
        ["ignored: NCCL 2.29 does not read it (added in 2.30)"]
    );
    let low = run(&t, &[("NCCL_P2P_MAX_PEERS", "0")], "2.30");
    assert_eq!(low.counts.p2p_per_peer, 2);
    assert!(low.env.notes("NCCL_P2P_MAX_PEERS")[0].contains("0 or less"));
}

/// v2.29.2-1 src/graph/search.cc: `sm100SpeedArrayIntra` gained 45, so a B200 node's tree
/// settles at 45 GB/s a channel where 2.28 stepped down to 40.
#[test]
fn sm100_intra_speeds_gain_45_in_2_29() {
    let t = hgx(8, 100);
    let tree = |v: &str| run(&t, &[], v).graphs.tree.bw_intra;
    let (b28, b29, b30) = (tree("2.28"), tree("2.29"), tree("2.30"));
    assert_eq!(b29, b30);
    assert!(b28 < b29, "2.28 {b28} 2.29 {b29}");
}

/// v2.30.7-1 src/graph/topo.cc `ncclTopoGetMinNetBw`, called for every rank during init, fails
/// without a NET ("Could not find any local path from gpu 0 to net"): a 2.30 plan of a source
/// without NICs says so; 2.29 does not read NICs there.
#[test]
fn a_source_without_nics_is_flagged_from_2_30() {
    let t = topo_model::testing::hgx_board(&[0, 1, 2, 3], 90, |_| false, true);
    let codes = |v: &str| -> Vec<&'static str> {
        let a = run(&t, &[], v);
        crate::plan::messages_of(&a)
            .iter()
            .map(|m| m.code)
            .map(|c| c.name())
            .collect()
    };
    assert!(codes("2.30").contains(&"net-none"));
    assert!(!codes("2.29").contains(&"net-none"));
    let with_nics = run(&hgx(4, 90), &[], "2.30");
    assert!(
        !crate::plan::messages_of(&with_nics)
            .iter()
            .any(|m| m.code == "net-none")
    );
}

/// src/transport/nvls.cc `ncclNvlsInit` by version: 16 up to 2.24 (`NCCL_NVLS_NCHANNELS`'s
/// default), 32 on SM100 from v2.25.1-1 at any node count, 24 on SM100 inside one NVLink
/// domain from v2.27.3-1 (nccl-oracle 2.26.6: sweep seed 9, 12 sm100 GPUs, 32 NVLS channels).
#[test]
fn sm100_nvls_default_follows_the_version() {
    let at =
        |minor, cc, multi| nvls_default_channels(&ChannelParams::for_version(minor), 8, cc, multi);
    assert_eq!([at(24, 100, false), at(24, 100, true)], [16, 16]);
    assert_eq!([at(26, 100, false), at(26, 100, true)], [32, 32]);
    assert_eq!([at(27, 100, false), at(27, 100, true)], [24, 32]);
    assert_eq!([at(26, 90, false), at(28, 90, true)], [16, 16]);
}
