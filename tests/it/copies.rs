//! Copies of one machine (`--nodes`) are planned from the first copy's system, repeated
//! (issue 28): the system and the plan must be those of a build over every copy, on every
//! built-in profile and on generated machines (Broadcom switches, bare NICs, GUID-less ports).

use topo_model::{BwConstants, Topology};
use topo_nccl::system::System;

/// Everything the system says, host lists included.
fn whole(s: &System) -> String {
    let mut out = serde_json::to_string(s).unwrap();
    for h in 0..s.nhosts as u16 {
        out += &format!("\n{h}: {:?} {:?}", s.host_gpus(h), s.host_gpus_indexed(h));
    }
    out
}

/// The topology as copies and the same topology built host by host.
fn both_ways(t: Topology) -> (Topology, Topology) {
    assert!(t.copies().is_some());
    let mut each = t.clone();
    each.forget_copies();
    (t, each)
}

fn profile(name: &str) -> Topology {
    topo_source::profile::load_builtin(name).unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

#[test]
fn every_profiles_copies_have_the_system_built_over_all_of_them() {
    let c = BwConstants::default();
    for name in topo_source::profile::builtin_names() {
        let (copies, each) = both_ways(profile(name).replicate(3));
        let got = System::build(&copies, &c);
        assert_eq!(got.gpus.len(), 3 * profile(name).gpus().len(), "{name}");
        assert_eq!(whole(&got), whole(&System::build(&each, &c)), "{name}");
    }
}

#[test]
fn generated_machines_copies_have_the_system_built_over_all_of_them() {
    let c = BwConstants::default();
    let (mut bare, mut bcm) = (0, 0);
    for seed in 1..=80 {
        let m = topo_nccl::testgen::generate(seed);
        bare += usize::from(m.xml.contains("<nic>"));
        bcm += usize::from(m.xml.contains("0xc010") || m.xml.contains("0xc030"));
        let one = topo_source::ncclxml::parse_str(&m.xml, "generated").unwrap();
        let (copies, each) = both_ways(one.replicate(3));
        let got = System::build(&copies, &c);
        assert_eq!(whole(&got), whole(&System::build(&each, &c)), "seed {seed}");
    }
    // The seeds reach the cases whose ids are made again per copy, and flattened switches.
    assert!(
        bare > 0 && bcm > 0,
        "bare NICs {bare}, Broadcom switches {bcm}"
    );
}

fn plan_json(t: Topology) -> String {
    let req = crate::util::allreduce_request(vec![1 << 10, 1 << 20, 1 << 30]);
    let (plan, _) = topo_nccl::plan_owned(t, &req, Default::default()).unwrap();
    serde_json::to_string(&plan).unwrap()
}

#[test]
fn every_profiles_copies_plan_as_a_build_over_all_of_them() {
    for name in topo_source::profile::builtin_names() {
        let (copies, each) = both_ways(profile(name).replicate(2));
        assert_eq!(plan_json(copies), plan_json(each), "{name}");
    }
}
