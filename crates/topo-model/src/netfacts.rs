//! The fabric between nodes, stated by a flag or a profile, laid onto the topology's network
//! ports: how many of them carry the GPUs' traffic (`--nics`), their speed (`--nic-speed`,
//! which overrides a source's speed as well as filling a missing one), the latency the
//! fabric's net plugin reports, sockets, SHARP. Every host gets the same change, so copies
//! of one machine stay copies and the work is one pass over the ports.

use crate::{LinkKind, NetRole, NodeKind, SpeedOverride, Topology};
use petgraph::Direction;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use topo_vocab::{Fabric, FabricFacts};

/// What a node is stated to have beyond its source: GPUs in use and the fabric. Applied to
/// the source before `--nodes` copies it, so the work is per machine, not per node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFacts {
    pub fabric: FabricFacts,
    /// `--gpus-per-node N`: each host keeps its first N GPUs (NVML order); the others are
    /// left out as if absent (a 4-GPU node stated on an 8-GPU profile).
    pub gpus: Option<u32>,
}

impl NodeFacts {
    pub fn is_empty(&self) -> bool {
        *self == NodeFacts::default()
    }
}

/// [`NodeFacts`] onto `t`: the GPUs first, then the fabric ([`apply`]). `Err` when a host
/// has fewer GPUs than stated.
pub fn apply_node(
    t: &mut Topology,
    facts: &NodeFacts,
    via: Option<&str>,
) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    if let Some(n) = facts.gpus {
        notes.push(keep_gpus(t, n)?);
    }
    notes.extend(apply(t, &facts.fabric, via));
    Ok(notes)
}

fn keep_gpus(t: &mut Topology, n: u32) -> Result<String, String> {
    let nhosts = t.host_count().max(t.hosts.len()).max(1);
    let mut per_host: Vec<Vec<i32>> = vec![vec![]; nhosts];
    for g in t.gpus() {
        let h = t.node(g).host as usize;
        if let (Some(v), Some(x)) = (per_host.get_mut(h), t.gpu(g)) {
            v.push(x.dev);
        }
    }
    let had = per_host.iter().map(Vec::len).max().unwrap_or(0);
    if let Some(few) = per_host.iter().map(Vec::len).filter(|&c| c > 0).min()
        && (few as u32) < n
    {
        return Err(format!(
            "--gpus-per-node {n}: the source has {few} GPU(s) per node; pass {few} or fewer"
        ));
    }
    let mut faults = Vec::new();
    for (h, devs) in per_host.iter_mut().enumerate() {
        devs.sort_unstable();
        for &d in devs.iter().skip(n as usize) {
            faults.push(crate::faults::Fault::Gpu {
                gpu: d,
                host: h as crate::HostId,
            });
        }
    }
    crate::faults::apply_all(t, &faults).map_err(|(_, e)| e)?;
    Ok(format!(
        "--gpus-per-node {n}: {n} of {had} GPU(s) per node in use, the others left out"
    ))
}

/// Lay `facts` onto every host of `t`. `via` names where they come from (`profile aws-p5en`)
/// when not from flags. Returns one note per fact that changed something, as the plan's
/// `stated:` lines print them.
pub fn apply(t: &mut Topology, facts: &FabricFacts, via: Option<&str>) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(n) = facts.nics {
        let (compute, all) = ports_of_hosts(t);
        notes.push(keep_nics(t, &compute, &all, n as usize));
    }
    let (compute, _) = ports_of_hosts(t);
    if let Some(mbps) = facts.nic_speed_mbps
        && let Some(o) = set_speed(t, &compute, mbps)
    {
        notes.push(o.to_string());
        t.source.nic_speed_override = Some(o);
    }
    if let Some(f) = facts.fabric {
        t.source.fabric = Some(f);
        notes.push(fabric_note(f, facts));
    }
    let latency = facts.latency().filter(|&l| l > 0.0);
    let socket = facts.fabric == Some(Fabric::Socket);
    let sharp = facts.sharp == Some(true);
    if latency.is_some() || socket || sharp {
        for &p in compute.iter().flatten() {
            if let NodeKind::Net(x) = &mut t.node_mut(p).kind {
                if let Some(l) = latency {
                    x.latency = l;
                }
                if socket {
                    x.socket = true;
                    x.gdr = false;
                }
                if sharp {
                    x.coll = true;
                }
            }
        }
    }
    match via {
        Some(v) => notes.into_iter().map(|n| format!("{v}: {n}")).collect(),
        None => notes,
    }
}

/// The ports that carry GPU traffic, per host in NCCL's device order: every port with the
/// compute role (stated or inferred); where a host has none, all its ports. Then every port
/// of each host.
fn ports_of_hosts(t: &Topology) -> (Vec<Vec<NodeIndex>>, Vec<Vec<NodeIndex>>) {
    let roles = t.net_roles_all();
    let nhosts = t.host_count().max(t.hosts.len()).max(1);
    let mut all: Vec<Vec<NodeIndex>> = vec![vec![]; nhosts];
    let mut compute: Vec<Vec<NodeIndex>> = vec![vec![]; nhosts];
    for n in t.nets() {
        let h = t.node(n).host as usize;
        let (Some(a), Some(c)) = (all.get_mut(h), compute.get_mut(h)) else {
            continue;
        };
        a.push(n);
        if roles.get(&n).is_none_or(|r| r.role == NetRole::Compute) {
            c.push(n);
        }
    }
    let compute = compute
        .into_iter()
        .zip(&all)
        .map(|(c, a)| if c.is_empty() { a.clone() } else { c })
        .collect();
    (compute, all)
}

/// `--nics N`: each host keeps its first `n` compute ports (NCCL's device order, the NICs
/// nearest the GPUs on the machines profiles describe); every other port is unplugged,
/// storage ports too, which NCCL's IB plugin would otherwise list beside them.
fn keep_nics(
    t: &mut Topology,
    compute: &[Vec<NodeIndex>],
    all: &[Vec<NodeIndex>],
    n: usize,
) -> String {
    let first: Vec<&Vec<NodeIndex>> = compute.iter().filter(|c| !c.is_empty()).collect();
    let had = first.first().map_or(0, |c| c.len());
    let names: Vec<String> = first
        .first()
        .map(|c| {
            c.iter()
                .take(n)
                .filter_map(|&p| t.net(p).map(|x| x.name.clone()))
                .collect()
        })
        .unwrap_or_default();
    let mut dropped = 0usize;
    for (keep, ports) in compute.iter().zip(all) {
        let keep: crate::fast::HashSet<NodeIndex> = keep.iter().take(n).copied().collect();
        for &p in ports.iter().filter(|p| !keep.contains(p)) {
            crate::faults::unplug_port(t, p);
            dropped += 1;
        }
    }
    if had < n {
        return format!(
            "--nics {n}: the source has {had} compute port(s) per node, all kept ({})",
            names.join(", ")
        );
    }
    format!(
        "--nics {n}: {n} of {had} compute port(s) kept per node ({}), {dropped} other port(s) removed in all",
        names.join(", ")
    )
}

/// `--nic-speed` over a source that states a speed: the compute ports' speed is replaced
/// (where the source left it unknown, [`crate::stated`] fills it, as the flag always did).
/// `None` when no port's stated speed differed.
fn set_speed(t: &mut Topology, compute: &[Vec<NodeIndex>], mbps: u64) -> Option<SpeedOverride> {
    let mut overridden = 0usize;
    let mut was: Option<u64> = None;
    for &n in compute.iter().flatten() {
        let NodeKind::Net(x) = &mut t.node_mut(n).kind else {
            continue;
        };
        match x.speed_mbps {
            Some(s) if s != mbps => {
                overridden += 1;
                was = was.max(Some(s));
            }
            _ => continue,
        }
        x.speed_mbps = Some(mbps);
        let bw = x.bw();
        // The NET links were priced from the old speed when the port was added.
        let edges: Vec<_> = t
            .graph
            .edges_directed(n, Direction::Outgoing)
            .chain(t.graph.edges_directed(n, Direction::Incoming))
            .filter(|e| e.weight().kind == LinkKind::Net)
            .map(|e| e.id())
            .collect();
        for e in edges {
            t.graph[e].bw = bw;
        }
    }
    (overridden > 0).then(|| SpeedOverride {
        mbps,
        was_mbps: was.unwrap_or(0),
        ports: overridden,
    })
}

fn fabric_note(f: Fabric, facts: &FabricFacts) -> String {
    let net = f.net_name().unwrap_or("IB");
    let lat = match facts.latency() {
        Some(l) if l > 0.0 => format!(", {l} us per network step as its plugin reports"),
        Some(_) => String::new(),
        None => ", the plugin's own latency unknown (NCCL's constants alone)".to_string(),
    };
    let sharp = match facts.sharp {
        Some(true) => ", SHARP (CollNet) available",
        Some(false) => ", no SHARP",
        None => "",
    };
    format!("fabric {f}: NCCL's network is NET/{net}{lat}{sharp}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn ports(t: &Topology) -> Vec<(String, Option<u64>, f64)> {
        t.nets()
            .into_iter()
            .filter_map(|n| t.net(n).map(|x| (x.name.clone(), x.speed_mbps, x.latency)))
            .collect()
    }

    #[test]
    fn nics_keep_the_first_ports_of_every_copy_and_copies_stay() {
        let t = testing::hgx(8, 90).replicate(3);
        let before = ports(&t).len();
        assert_eq!(before, 24, "{:?}", ports(&t));
        let mut k = t.clone();
        let facts = FabricFacts {
            nics: Some(2),
            ..Default::default()
        };
        let notes = apply(&mut k, &facts, None);
        assert_eq!(ports(&k).len(), 6);
        assert!(
            notes[0].starts_with("--nics 2: 2 of 8 compute port(s) kept per node"),
            "{notes:?}"
        );
        assert!(k.copies().is_some(), "every copy changed alike");
    }

    #[test]
    fn speed_overrides_compute_ports_and_says_so() {
        let mut t = testing::hgx(8, 90);
        let facts = FabricFacts {
            nic_speed_mbps: Some(200_000),
            ..Default::default()
        };
        let notes = apply(&mut t, &facts, None);
        assert!(ports(&t).iter().all(|p| p.1 == Some(200_000)));
        assert_eq!(
            notes,
            vec!["--nic-speed 200 Gb/s overrides the source's 400 Gb/s on 8 compute port(s)"]
        );
        assert_eq!(
            t.source.nic_speed_override,
            Some(SpeedOverride {
                mbps: 200_000,
                was_mbps: 400_000,
                ports: 8
            })
        );
        // The same speed again replaces nothing, and says nothing.
        let mut same = testing::hgx(8, 90);
        let facts = FabricFacts {
            nic_speed_mbps: Some(400_000),
            ..Default::default()
        };
        assert!(apply(&mut same, &facts, None).is_empty());
        assert_eq!(same.source.nic_speed_override, None);
    }

    #[test]
    fn a_plugin_fabric_sets_its_latency_and_sockets_their_flag() {
        let mut t = testing::hgx(8, 90);
        let facts = FabricFacts {
            fabric: Some(Fabric::Efa),
            ..Default::default()
        };
        let notes = apply(&mut t, &facts, Some("profile x"));
        assert!(ports(&t).iter().all(|p| p.2 == 75.0));
        assert_eq!(t.source.fabric, Some(Fabric::Efa));
        assert!(notes[0].starts_with("profile x: fabric efa: NCCL's network is NET/Libfabric"));
        let mut s = testing::hgx(8, 90);
        apply(
            &mut s,
            &FabricFacts {
                fabric: Some(Fabric::Socket),
                ..Default::default()
            },
            None,
        );
        assert!(s.nets().iter().all(|&n| s.net(n).is_some_and(|x| x.socket)));
    }
}
