//! The library crates on real inputs together: sources feeding the NCCL model, where a unit
//! test of one crate would need another.

use topo_model::Topology;
use topo_nccl::analyze::{Analysis, Request, RuntimeFacts, analyze};
use topo_nccl::transport::RankPlacement;
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
    assert_eq!(cross.transport, "NET/IB");
    let local = a
        .transports
        .iter()
        .find(|p| p.from == 0 && p.to == 1)
        .unwrap();
    assert_eq!(local.transport, "P2P/CUMEM");
    assert!(!a.topo.warnings.iter().any(|w| w.contains("renumbered")));
    // GPU indices interleaved across the sockets: the plan's ranks follow the groups.
    let swapped = text
        .replacen(r#"<gpu dev="1""#, r#"<gpu dev="X""#, 1)
        .replacen(r#"<gpu dev="2""#, r#"<gpu dev="1""#, 1)
        .replacen(r#"<gpu dev="X""#, r#"<gpu dev="2""#, 1);
    let t2 = ncclxml::parse_str(&swapped, "interleaved").unwrap();
    let c = run(&t2, &[], "2.28");
    assert_eq!(c.nnodes, 2);
    assert!(
        c.topo
            .warnings
            .iter()
            .any(|w| w.contains("[0 2] [1 3]") && w.contains("renumbered"))
    );
    // With NCCL_NET_DISABLE_INTRA=1 SHM connects them again: one node.
    let b = run(&t, &[("NCCL_NET_DISABLE_INTRA", "1")], "2.28");
    assert_eq!(b.nnodes, 1);
}
