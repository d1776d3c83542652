//! One test per MNNVL rule of NCCL 2.28.9 (src/init.cc, src/mnnvl.cc, src/graph/topo.cc,
//! src/transport/p2p.cc, src/transport/nvls.cc, src/graph/search.cc).

use super::*;
use crate::analyze::{Analysis, RuntimeFacts};
use crate::transport::RankPlacement;
use crate::tuning::OpContext;
use crate::types::{Algorithm, Collective};
use crate::version::NcclVersion;
use topo_model::testing::hgx;
use topo_model::{FabricInfo, NvlinkDomain};

/// A GB200-like tray: 4 sm100 GPUs on NVSwitch, one 400G NIC each, registered in a fabric
/// whose domain holds `domain` GPUs; `n` trays as `--nodes n` makes them.
fn trays(n: usize, domain: u32, state: &str) -> Topology {
    let mut t = hgx(4, 100);
    t.hosts[0].nvlink_domain = Some(NvlinkDomain { gpus: domain });
    for g in t.gpus() {
        if let NodeKind::Gpu(x) = &mut t.graph[g].kind {
            x.fabric = Some(FabricInfo {
                cluster_uuid: "3143b15bc2cd192b.28cc9b5473fb5b93".into(),
                clique_id: 0x7ffe,
                state: state.into(),
                status: Some("success".into()),
            });
        }
    }
    t.replicate(n)
}

fn run_on(t: &Topology, env: &[(&str, &str)], version: &str) -> Analysis {
    crate::analyze::analyze_on_big_stack(t, env, version)
}

fn run(n: usize, domain: u32, env: &[(&str, &str)]) -> Analysis {
    run_on(&trays(n, domain, "completed"), env, "2.28")
}

fn algo_at(a: &Analysis, bytes: u64) -> Algorithm {
    a.costs
        .select(Collective::AllReduce, bytes, &OpContext::default())
        .unwrap()
        .algo
}

/// ncclMnnvlCheck + ncclTopoGetSystem: two trays of one clique fuse into one node of 8 local
/// ranks (nNodes counts distinct ring starts, one per clique).
#[test]
fn trays_of_one_clique_are_one_node() {
    let a = run(2, 72, &[]);
    let m = a.mnnvl.as_ref().expect("MNNVL on");
    assert_eq!(m.cliques, vec![vec![0, 1]]);
    assert_eq!(m.clique_size, 8);
    assert_eq!((a.nranks, a.nnodes), (8, 1));
    // Ranks keep the launcher's order, tray by tray.
    assert_eq!(a.connection.ring(0).unwrap(), (0..8).collect::<Vec<_>>());
}

/// ncclTopoCheckP2p with MNNVL: GPUs of different trays in one clique are P2P over NVLink, and
/// p2p.cc prints every cuMem connection of the communicator as P2P/MNNVL with each tray's own
/// NVML index.
#[test]
fn trays_of_one_clique_use_p2p_over_nvlink() {
    let a = run(2, 72, &[]);
    assert!(
        a.transports
            .iter()
            .all(|p| p.transport == Transport::P2p(P2p::Mnnvl)),
        "{:?}",
        a.transports[0]
    );
    let cross = a
        .transports
        .iter()
        .find(|p| p.from == 0 && p.to == 4)
        .unwrap();
    assert_eq!(cross.path, Some(crate::types::PathType::Nvl));
    assert!(
        cross
            .reason
            .contains("different hosts of one NVLink clique"),
        "{}",
        cross.reason
    );
    assert_eq!((cross.from_dev, cross.to_dev), (0, 0));
    assert!(
        cross.log_form.starts_with("via P2P/MNNVL"),
        "{}",
        cross.log_form
    );
}

/// Fused trays are one system with one NVSwitch node, the trays' nodes told apart by their
/// system id as NCCL prints them (GPU/1-... for the second tray).
#[test]
fn fused_trays_share_one_nvswitch() {
    let a = run(2, 72, &[]);
    assert_eq!(a.system.nvs.len(), 1);
    let labels: Vec<String> = a
        .system
        .gpus
        .iter()
        .map(|&g| a.system.nodes[g].label())
        .collect();
    assert_eq!(labels[0], "GPU/0-11000");
    assert_eq!(labels[4], "GPU/1-11000");
}

/// Trays of different NVLink domains (cluster UUIDs) are different nodes joined by NET.
#[test]
fn trays_of_different_domains_use_the_network() {
    // A domain of 8 GPUs: trays 0-1 and 2-3.
    let a = run(4, 8, &[]);
    let m = a.mnnvl.as_ref().unwrap();
    assert_eq!(m.cliques, vec![vec![0, 1], vec![2, 3]]);
    assert_eq!((a.nranks, a.nnodes), (16, 2));
    let inter: Vec<_> = a.transports.iter().filter(|p| p.inter_node).collect();
    assert!(!inter.is_empty());
    assert!(inter.iter().all(|p| p.transport.is_net()));
    // Inside each clique the trays still talk P2P/MNNVL.
    assert!(
        a.transports
            .iter()
            .filter(|p| !p.inter_node)
            .all(|p| p.transport == Transport::P2p(P2p::Mnnvl))
    );
}

/// nvls.cc: on Blackwell NVLS uses 24 channels when one clique holds every rank and 32 when
/// the job spans cliques (clique.size < nRanks).
#[test]
fn nvls_channels_follow_the_clique_not_the_host_count() {
    assert_eq!(run(2, 72, &[]).counts.nvls, 24);
    assert_eq!(run(4, 8, &[]).counts.nvls, 32);
    // Without MNNVL two trays are two nodes: NCCL's multi-node count.
    assert_eq!(run(2, 72, &[("NCCL_MNNVL_ENABLE", "0")]).counts.nvls, 32);
}

/// init.cc: NCCL_MNNVL_ENABLE=0 skips the check, so every tray is its own node over NET.
#[test]
fn mnnvl_enable_0_keeps_trays_apart() {
    let a = run(2, 72, &[("NCCL_MNNVL_ENABLE", "0")]);
    assert!(a.mnnvl.is_none());
    assert_eq!(a.nnodes, 2);
    assert!(
        a.transports
            .iter()
            .filter(|p| p.inter_node)
            .all(|p| p.transport.is_net())
    );
    assert!(
        a.topo
            .warnings
            .iter()
            .any(|w| w.contains("NCCL_MNNVL_ENABLE=0"))
    );
}

/// init.cc: the check runs only when P2P is allowed (ncclGetUserP2pLevel != 0); mnnvl.cc: it
/// needs cuMem.
#[test]
fn p2p_disabled_or_cumem_off_turn_mnnvl_off() {
    for env in [
        [("NCCL_P2P_DISABLE", "1")],
        [("NCCL_P2P_LEVEL", "LOC")],
        [("NCCL_CUMEM_ENABLE", "0")],
    ] {
        let a = run(2, 72, &env);
        assert!(a.mnnvl.is_none(), "{env:?}");
        assert_eq!(a.nnodes, 2, "{env:?}");
    }
}

/// mnnvl.cc: every rank's fabric registration must be complete.
#[test]
fn incomplete_fabric_registration_turns_mnnvl_off() {
    let t = trays(2, 72, "in_progress");
    let a = run_on(&t, &[], "2.28");
    assert!(a.mnnvl.is_none());
    assert_eq!(a.nnodes, 2);
    assert!(
        a.topo.warnings.iter().any(|w| w.contains("in_progress")),
        "{:?}",
        a.topo.warnings
    );
}

/// fillInfo (init.cc): NCCL_MNNVL_UUID replaces every rank's cluster UUID, so two domains
/// become one clique; NCCL_MNNVL_CLIQUE_ID splits one domain's trays by the given id only when
/// the ids differ (all ranks share the environment, so here it changes nothing).
#[test]
fn uuid_and_clique_overrides() {
    let a = run(4, 8, &[("NCCL_MNNVL_UUID", "5")]);
    assert_eq!(a.mnnvl.as_ref().unwrap().cliques, vec![vec![0, 1, 2, 3]]);
    assert_eq!(a.nnodes, 1);
    let b = run(2, 72, &[("NCCL_MNNVL_CLIQUE_ID", "3")]);
    assert_eq!(b.mnnvl.as_ref().unwrap().clique_id, 3);
    assert_eq!(b.nnodes, 1);
}

/// MNNVL arrived in 2.20 (data/2.20.yaml `mnnvl`): 2.19 keeps trays apart.
#[test]
fn nccl_2_19_predates_mnnvl() {
    let a = run_on(&trays(2, 72, "completed"), &[], "2.19");
    assert!(a.mnnvl.is_none());
    assert_eq!(a.nnodes, 2);
}

/// One tray alone never asks the question (nNodes == 1).
#[test]
fn one_tray_is_a_plain_nvswitch_node() {
    let a = run(1, 72, &[]);
    assert!(a.mnnvl.is_none());
    assert!(
        a.transports
            .iter()
            .all(|p| p.transport == Transport::P2p(P2p::Cumem))
    );
    assert!(
        a.topo
            .warnings
            .iter()
            .all(|w| !w.contains("multi-node NVLink"))
    );
}

/// tuning.cc runs on nNodes: inside one clique large AllReduce is single-node NVLS; across
/// cliques the network enters and NVLS becomes NVLSTree or Ring at large sizes.
#[test]
fn algorithm_choice_follows_clique_count() {
    let one = run(2, 72, &[]);
    assert_eq!(algo_at(&one, 1 << 30), Algorithm::Nvls);
    let two = run(4, 8, &[]);
    assert_ne!(algo_at(&two, 1 << 30), Algorithm::Nvls);
}

/// search.cc ncclTopoSelectNets: GPU-first NET order on a system fused from several hosts
/// (2.27+, NCCL_MNNVL_SCATTER_NETS_ENABLE=1 by default); channel-first otherwise.
#[test]
fn fused_systems_order_nets_gpu_first() {
    let a = run(4, 8, &[]);
    assert!(a.search.gpu_first_nets);
    let off = run(4, 8, &[("NCCL_MNNVL_SCATTER_NETS_ENABLE", "0")]);
    assert!(!off.search.gpu_first_nets);
    assert!(!run(1, 72, &[]).search.gpu_first_nets);
    let old = run_on(&trays(4, 8, "completed"), &[], "2.26");
    assert!(!old.search.gpu_first_nets);
}

/// `--nodes` of a host that states no NVLink domain makes separate machines, each its own
/// fabric: NCCL's clique of rank 0 is its own host's GPUs, so nothing is fused.
#[test]
fn hosts_without_a_domain_are_separate_fabrics() {
    let mut t = trays(1, 72, "completed");
    t.hosts[0].nvlink_domain = None;
    let a = run_on(&t.replicate(2), &[], "2.28");
    assert_eq!(a.nnodes, 2);
    assert_eq!(a.mnnvl.as_ref().unwrap().cliques, vec![vec![0], vec![1]]);
    assert!(
        a.transports
            .iter()
            .filter(|p| p.inter_node)
            .all(|p| p.transport.is_net())
    );
}

/// Trays of 4 GPUs with one NIC each (on GPU 0), two trays per clique: a ring leaving by
/// one tray's NIC may come back by a tray-mate's NIC in the same PCI slot only under
/// NCCL_MNNVL_RAIL_PER_HOST=1.
fn one_nic_trays(n: usize) -> Topology {
    let mut t = topo_model::testing::hgx_board(&[0, 1, 2, 3], 100, |d| d == 0, true);
    t.hosts[0].nvlink_domain = Some(NvlinkDomain { gpus: 8 });
    for g in t.gpus() {
        if let NodeKind::Gpu(x) = &mut t.graph[g].kind {
            x.fabric = Some(FabricInfo {
                cluster_uuid: "3143b15bc2cd192b.28cc9b5473fb5b93".into(),
                clique_id: 0x7ffe,
                state: "completed".into(),
                status: Some("success".into()),
            });
        }
    }
    t.replicate(n)
}

const RAIL: (&str, &str) = ("NCCL_MNNVL_RAIL_PER_HOST", "1");

/// search.cc ncclTopoSearchCheckNet (2.28.7+): with crossNic=0 a channel comes back by a NET
/// of the same rail; between hosts of a fused system NCCL_MNNVL_RAIL_PER_HOST=1 makes the
/// rail the NIC's PCI slot instead of its GUID, so the ring may return by the other tray's
/// NIC in that slot (reached over PXN, a closer path type than the own tray's PHB NIC).
#[test]
fn rail_per_host_lets_rings_return_by_a_tray_mates_nic() {
    let t = one_nic_trays(4);
    let off = run_on(&t, &[], "2.28");
    let on = run_on(&t, &[RAIL], "2.28");
    assert!(on.search.rail_per_host && !off.search.rail_per_host);
    let host_of = |a: &Analysis, net: usize| a.system.nodes[a.system.nets[net]].id >> 56;
    let ring = |a: &Analysis| a.graphs.ring.inter.clone();
    assert_eq!(off.graphs.ring.cross_nic, 0);
    assert!(ring(&off).iter().all(|&(s, e)| s == e), "{:?}", ring(&off));
    assert_ne!(ring(&on), ring(&off));
    for &(s, e) in &ring(&on) {
        // Same slot (each tray has one NIC), the other tray of the clique.
        assert_ne!(host_of(&on, s), host_of(&on, e), "{:?}", ring(&on));
    }
    // Trees must come back by their start NET ("trees are symmetric"): unchanged.
    assert_eq!(on.graphs.tree.inter, off.graphs.tree.inter);
}

/// The variable arrived in v2.28.7-1 (absent from v2.28.3-1 src/graph/search.cc): older
/// releases ignore it, and the plan says so.
#[test]
fn rail_per_host_is_read_from_2_28_7() {
    let t = one_nic_trays(4);
    for (v, reads) in [
        ("2.27", false),
        ("2.28.3", false),
        ("2.28.7", true),
        ("2.28", true),
        ("2.29.2", true),
    ] {
        let a = run_on(&t, &[RAIL], v);
        assert_eq!(a.search.rail_per_host, reads, "{v}");
        let notes = a.env.notes("NCCL_MNNVL_RAIL_PER_HOST");
        assert_eq!(
            notes.iter().any(|n| n.contains("does not read it")),
            !reads,
            "{v}: {notes:?}"
        );
    }
    let old = run_on(&t, &[RAIL], "2.28.3");
    assert_eq!(
        old.graphs.ring.inter,
        run_on(&t, &[], "2.28.3").graphs.ring.inter
    );
}

/// Without a fused node whose channels use the network the check never compares NETs of two
/// hosts, so the plan names the variable as changing nothing and why.
#[test]
fn rail_per_host_is_noted_as_idle_without_fused_network_channels() {
    let one_clique = run_on(&one_nic_trays(2), &[RAIL], "2.28");
    assert_eq!(one_clique.nnodes, 1);
    let n = one_clique.env.notes("NCCL_MNNVL_RAIL_PER_HOST");
    assert!(
        n.iter()
            .any(|x| x.contains("one NVLink clique holds every rank")),
        "{n:?}"
    );
    let mut plain = trays(1, 72, "completed");
    plain.hosts[0].nvlink_domain = None;
    let two = run_on(&plain.replicate(2), &[RAIL], "2.28");
    let n = two.env.notes("NCCL_MNNVL_RAIL_PER_HOST");
    assert!(
        n.iter().any(|x| x.contains("no NCCL node is fused")),
        "{n:?}"
    );
    let fused = run_on(&one_nic_trays(4), &[RAIL], "2.28");
    assert!(fused.env.notes("NCCL_MNNVL_RAIL_PER_HOST").is_empty());
}

/// The what-if names the ring's changed NETs (the NIC set and channel counts stay the same,
/// so without the graph comparison it would read "changed nothing").
#[test]
fn rail_per_host_what_if_names_the_moved_nets() {
    let t = one_nic_trays(4);
    let plan = |env: &[(&str, &str)]| {
        let req = crate::plan::PlanRequest {
            funcs: vec![Collective::AllReduce],
            sizes: vec![1 << 30],
            version: NcclVersion::parse("2.28").unwrap(),
            version_source: "test".into(),
            placement: RankPlacement::ProcessPerGpu,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            env_origin: Default::default(),
            explain: false,
        };
        let facts = RuntimeFacts {
            cuda_driver_version: Some(12080),
        };
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn_scoped(s, || crate::plan::analyzed(&t, &req, facts).unwrap().1)
                .unwrap()
                .join()
                .unwrap()
        })
    };
    let changes = crate::whatif::compare(&plan(&[]), &plan(&[RAIL]));
    assert!(
        changes.iter().any(|c| c.starts_with("ring graph NETs: ")),
        "{changes:?}"
    );
}

/// Above two NVLink domains the analysis keeps NCCL's cost table of the same machine on two of
/// them, which the measured layer bounds tree algorithms with (measured.rs `tree_bound`): it is
/// the table a run on two domains tunes with.
#[test]
fn the_two_node_costs_are_those_of_two_domains() {
    use crate::types::Protocol;
    let four = run(8, 8, &[]);
    let two = run(4, 8, &[]);
    assert_eq!((four.nnodes, two.nnodes), (4, 2));
    let t2 = four.two_node_costs.as_ref().expect("kept above two nodes");
    assert_eq!((t2.nranks, t2.nnodes), (two.nranks, two.nnodes));
    let f = Collective::AllReduce;
    for a in [Algorithm::NvlsTree, Algorithm::Tree, Algorithm::Ring] {
        assert_eq!(
            t2.bw(f, a, Protocol::Simple),
            two.costs.bw(f, a, Protocol::Simple),
            "{a:?}"
        );
    }
    assert!(two.two_node_costs.is_none());
}
