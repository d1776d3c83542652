//! NVLink fabric registration, which every view states alike (issue 24: one rule and one code
//! per fact). Before, show called GPUs "registered in one NVLink fabric" whatever the fabric
//! manager's state, diagnose alone said a state other than `completed` stops NVLink P2P and
//! NVLS, and plan said nothing.

use crate::message::{Code, Finding};
use crate::pcie_judge::label;
use crate::{HostId, Topology};
use petgraph::graph::NodeIndex;
use std::collections::BTreeMap;

/// Fabric verdicts over `gpus` (a host's, or a whole topology's), each host judged on its own
/// GPUs (two racks are two fabrics): GPUs whose fabric state is not `completed` (or whose
/// status is not `success`) are an error; a host where only some GPUs are registered, or not
/// all in one cluster and clique, a warning; every GPU of every host registered and ready, an
/// info naming the fabric. GPUs the source gives no fabric for are no claim.
pub fn verdicts(topo: &Topology, gpus: impl IntoIterator<Item = NodeIndex>) -> Vec<Finding> {
    let mut by_host: BTreeMap<HostId, Vec<NodeIndex>> = BTreeMap::new();
    for g in gpus {
        by_host.entry(topo.node(g).host).or_default().push(g);
    }
    let mut not_ready = vec![];
    let (mut partial, mut whole) = (vec![], vec![]);
    for gpus in by_host.values() {
        let fabrics: Vec<(NodeIndex, &crate::FabricInfo)> = gpus
            .iter()
            .filter_map(|&g| Some((g, topo.gpu(g)?.fabric.as_ref()?)))
            .collect();
        for (g, f) in &fabrics {
            if f.state != "completed" || f.status.as_deref().is_some_and(|s| s != "success") {
                let status = f.status.as_deref().map(|s| format!(", status {s}"));
                not_ready.push(format!(
                    "{}: fabric state {}{}",
                    label(topo, *g),
                    f.state,
                    status.unwrap_or_default()
                ));
            }
        }
        let Some((_, first)) = fabrics.first() else {
            continue;
        };
        let name = |f: &crate::FabricInfo| {
            format!(
                "cluster {} clique {} ({})",
                f.cluster_uuid, f.clique_id, f.state
            )
        };
        let one = fabrics
            .iter()
            .all(|(_, f)| f.cluster_uuid == first.cluster_uuid && f.clique_id == first.clique_id);
        if one && fabrics.len() == gpus.len() {
            whole.push(name(first));
        } else {
            partial.push(format!(
                "{} of {} GPUs registered in an NVLink fabric ({})",
                fabrics.len(),
                gpus.len(),
                name(first)
            ));
        }
    }
    let mut out = vec![];
    if !not_ready.is_empty() {
        out.push(not_ready_verdict(not_ready));
    }
    if let Some(first) = partial.first() {
        out.push(
            Finding::new(
                Code::NvlinkFabricPartial,
                match partial.len() {
                    1 => first.clone(),
                    n => format!("{first}, and on {} more host(s)", n - 1),
                },
            )
            .evidence(partial.clone()),
        );
    } else if let (Some(first), true) = (whole.first(), out.is_empty()) {
        out.push(
            Finding::new(
                Code::NvlinkFabric,
                format!("All GPUs registered in one NVLink fabric: {first}"),
            )
            .evidence(whole.clone()),
        );
    }
    out
}

/// A host stated to be part of a multi-node NVLink domain (a GB200/GB300 tray of an NVL72):
/// how many hosts of its size the domain holds, which NCCL's multi-node NVLink counts as one
/// node. `None` for a host without GPUs or without a stated domain.
pub fn domain_verdict(topo: &Topology, host: HostId, gpus: usize) -> Option<Finding> {
    let d = topo.hosts.get(host as usize)?.nvlink_domain.as_ref()?;
    if gpus == 0 {
        return None;
    }
    let hosts = (d.gpus as usize / gpus).max(1);
    Some(Finding::new(
        Code::NvlinkDomain,
        format!(
            "This host is one of {hosts} in a {}-GPU NVLink domain: NCCL's multi-node NVLink counts the hosts of one clique as one node (`topo plan --nodes {hosts}` plans the whole domain)",
            d.gpus
        ),
    ))
}

/// GPUs whose fabric state is not `completed`, one evidence line each (`GPU3 (0000:1b:00.0):
/// fabric state in progress`): the verdict for a topology's fabric facts, and for a live
/// host's NVML answers (diagnose's host checks) alike.
pub fn not_ready_verdict(evidence: Vec<String>) -> Finding {
    Finding::new(Code::FabricManagerNotReady, "the NVSwitch fabric is not ready: GPUs are not registered with the fabric manager, so NVLink P2P and NVLS are unavailable").evidence(evidence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Severity;
    use crate::testing::hgx;
    use crate::{FabricInfo, NodeKind};

    fn registered(t: &mut Topology, gpus: &[NodeIndex], state: &str) {
        for &g in gpus {
            if let NodeKind::Gpu(x) = &mut t.node_mut(g).kind {
                x.fabric = Some(FabricInfo {
                    cluster_uuid: "c".into(),
                    clique_id: 7,
                    state: state.into(),
                    status: Some("success".into()),
                });
            }
        }
    }

    fn codes(t: &Topology) -> Vec<(Code, Severity)> {
        verdicts(t, t.gpus())
            .into_iter()
            .map(|v| (v.code, v.severity))
            .collect()
    }

    #[test]
    fn ready_partial_and_not_ready() {
        let mut t = hgx(8, 90);
        assert!(codes(&t).is_empty(), "no fabric in the source: no claim");
        let gpus = t.gpus();
        registered(&mut t, &gpus, "completed");
        assert_eq!(codes(&t), [(Code::NvlinkFabric, Severity::Info)]);
        let mut half = hgx(8, 90);
        let g = half.gpus();
        registered(&mut half, &g[..4], "completed");
        assert_eq!(
            codes(&half),
            [(Code::NvlinkFabricPartial, Severity::Warning)]
        );
        // Registered but not ready: an error, and no "registered in one fabric" beside it.
        registered(&mut t, &gpus[..1], "in progress");
        assert_eq!(codes(&t), [(Code::FabricManagerNotReady, Severity::Error)]);
        assert!(verdicts(&t, t.gpus())[0].evidence[0].contains("fabric state in progress"));
    }

    #[test]
    fn each_host_is_its_own_fabric() {
        let mut t = hgx(8, 90);
        let gpus = t.gpus();
        registered(&mut t, &gpus, "completed");
        let two = t.replicate(2);
        // Each copy its own cluster (`replicate`): two fabrics, neither partial.
        assert_eq!(codes(&two), [(Code::NvlinkFabric, Severity::Info)]);
    }

    #[test]
    fn a_tray_of_a_stated_domain_is_one_of_its_hosts() {
        let mut t = hgx(4, 100);
        assert_eq!(domain_verdict(&t, 0, 4), None);
        t.hosts[0].nvlink_domain = Some(crate::NvlinkDomain { gpus: 72 });
        let v = domain_verdict(&t, 0, 4).unwrap();
        assert_eq!((v.code, v.severity), (Code::NvlinkDomain, Severity::Info));
        assert!(
            v.text.starts_with("This host is one of 18 in a 72-GPU"),
            "{}",
            v.text
        );
        assert_eq!(domain_verdict(&t, 0, 0), None);
    }
}
