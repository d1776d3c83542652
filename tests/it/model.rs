//! The library crates on real inputs together: sources feeding the NCCL model, where a unit
//! test of one crate would need another.

use topo_model::Topology;
use topo_nccl::analyze::{Analysis, Request, RuntimeFacts, analyze};
use topo_nccl::transport::{Net, P2p, RankPlacement, Transport};
use topo_nccl::version::NcclVersion;
use topo_source::ncclxml;

fn run(topo: &Topology, env: &[(&str, &str)], version: &str) -> Analysis {
    let req = Request {
        topo,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        version: NcclVersion::parse(version).unwrap(),
        placement: RankPlacement::ProcessPerGpu,
        facts: RuntimeFacts {
            cuda_driver_version: Some(12040),
        },
    };
    analyze(&req).unwrap()
}

#[test]
fn gpus_only_the_network_connects_become_nodes() {
    // Two sockets, two GPUs and one 200G NIC per socket: the cross-socket CPU link
    // (Skylake class, 10 GB/s) is slower than each GPU's 24 GB/s path to its NIC.
    let text = include_str!("../../fixtures/synthetic/two-socket-nic-per-socket.xml");
    let t = ncclxml::parse_str(text, "two-socket").unwrap();
    let a = run(&t, &[], "2.28");
    assert_eq!(a.nranks, 4);
    assert_eq!(a.nnodes, 2);
    assert!(a.topo.warnings.iter().any(|w| w.contains("[0 1] [2 3]")));
    let cross = a
        .transports
        .iter()
        .find(|p| p.from == 0 && p.to == 2)
        .unwrap();
    assert_eq!(cross.transport, Transport::Net(Net::Ib));
    let local = a
        .transports
        .iter()
        .find(|p| p.from == 0 && p.to == 1)
        .unwrap();
    assert_eq!(local.transport, Transport::P2p(P2p::Cumem));
    assert!(!a.topo.warnings.iter().any(|w| w.contains("renumbered")));
    // GPU indices interleaved across the sockets: the plan's ranks follow the groups.
    let swapped = text
        .replacen(r#"<gpu dev="1""#, r#"<gpu dev="X""#, 1)
        .replacen(r#"<gpu dev="2""#, r#"<gpu dev="1""#, 1)
        .replacen(r#"<gpu dev="X""#, r#"<gpu dev="2""#, 1);
    let t2 = ncclxml::parse_str(&swapped, "interleaved").unwrap();
    let mut c = run(&t2, &[], "2.28");
    assert_eq!(c.nnodes, 2);
    assert!(
        c.topo
            .warnings
            .iter()
            .any(|w| w.contains("[0 2] [1 3]") && w.contains("launcher's rank numbers"))
    );
    // The plan prints rings, trees and graph channels in the launcher's numbers, as NCCL
    // does: each node's two ranks (0 2 and 1 3) are ring neighbours, and the tree of rank 0
    // reaches rank 2 inside its node.
    let req = crate::util::allreduce_request(vec![1 << 20]);
    let plan = topo_nccl::plan::build(&mut c, &req).unwrap();
    let neighbours = |ring: &[usize], a: usize, b: usize| {
        let n = ring.len();
        (0..n).any(|i| {
            let (x, y) = (ring[i], ring[(i + 1) % n]);
            (x, y) == (a, b) || (x, y) == (b, a)
        })
    };
    assert!(!plan.rings.is_empty());
    for ring in &plan.rings {
        assert!(neighbours(ring, 0, 2) && neighbours(ring, 1, 3), "{ring:?}");
    }
    assert!(
        plan.graphs
            .ring
            .channels
            .iter()
            .all(|c| c.len() == 2 && c.contains(&0) && c.contains(&2)),
        "{:?}",
        plan.graphs.ring.channels
    );
    let tree = &plan.trees[0];
    assert!(
        tree.up[0] == 2 || tree.children(0).unwrap().contains(&2),
        "{tree:?}"
    );
    assert!(
        plan.log
            .iter()
            .any(|l| l.starts_with("Ring 00 : ") && l.contains("-> 0 ->"))
    );
    // With NCCL_NET_DISABLE_INTRA=1 SHM connects them again: one node.
    let b = run(&t, &[("NCCL_NET_DISABLE_INTRA", "1")], "2.28");
    assert_eq!(b.nnodes, 1);
}
