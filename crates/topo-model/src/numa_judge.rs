//! Which NUMA nodes a host's GPUs sit on (issue 24: one home for every judgement; the rule was
//! show's own). A GPU whose NUMA node the source leaves out is said to be unknown, and is not
//! counted as a node of its own (issue 25: an unknown fact is not a negative one).

use crate::Topology;
use crate::message::{Code, Finding};
use crate::nic_judge::Names;
use petgraph::graph::NodeIndex;
use std::collections::BTreeMap;

/// The `numa-span` verdict for one host's `gpus`: an info when they sit on two or more known
/// NUMA nodes (each rank should be bound to its GPU's node), naming the GPUs of each node and
/// those whose node is unknown. Nothing when the known GPUs share one node.
pub fn verdicts(topo: &Topology, gpus: &[NodeIndex], names: &impl Names) -> Vec<Finding> {
    let mut by: BTreeMap<i32, Vec<NodeIndex>> = BTreeMap::new();
    for &g in gpus {
        let numa = topo.numa_of(g);
        by.entry(if numa >= 0 { numa } else { -1 })
            .or_default()
            .push(g);
    }
    let unknown = by.remove(&-1);
    if by.len() < 2 {
        return vec![];
    }
    let mut parts: Vec<String> = by
        .iter()
        .map(|(numa, gs)| format!("{} on NUMA {numa}", names.gpus(gs)))
        .collect();
    if let Some(u) = &unknown {
        parts.push(format!(
            "{} on a NUMA node the source does not give",
            names.gpus(u)
        ));
    }
    let evidence: Vec<String> = by
        .iter()
        .flat_map(|(numa, gs)| gs.iter().map(move |&g| (g, numa.to_string())))
        .chain(
            unknown
                .iter()
                .flatten()
                .map(|&g| (g, "unknown".to_string())),
        )
        .map(|(g, numa)| format!("{}: NUMA {numa}", names.label(g)))
        .collect();
    vec![
        Finding::new(
            Code::NumaSpan,
            format!(
                "GPUs span {} NUMA nodes: {} (bind each rank to its GPU's node)",
                by.len(),
                parts.join(", ")
            ),
        )
        .evidence(evidence),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeKind;
    use crate::nic_judge::PlainNames;
    use crate::testing::{hgx, pcie_box};

    fn summary(t: &Topology) -> Option<String> {
        let gpus = t.gpus();
        verdicts(t, &gpus, &PlainNames(t)).pop().map(|v| v.text)
    }

    #[test]
    fn two_sockets_are_a_span_and_one_is_not() {
        let two = pcie_box("GenuineIntel", 6, 143, true, true);
        let s = summary(&two).expect("GPUs on both sockets");
        assert!(s.starts_with("GPUs span 2 NUMA nodes: "), "{s}");
        assert!(s.contains("on NUMA 0") && s.contains("on NUMA 1"), "{s}");
        let one = hgx(8, 90);
        let nodes: std::collections::BTreeSet<i32> =
            one.gpus().iter().map(|&g| one.numa_of(g)).collect();
        assert_eq!(summary(&one).is_some(), nodes.len() > 1);
    }

    #[test]
    fn an_unknown_node_is_not_a_node_of_its_own() {
        let mut t = pcie_box("GenuineIntel", 6, 143, true, true);
        // Socket 1's CPU without a NUMA id: its GPUs are on an unknown node.
        let cpus: Vec<_> = t.cpus().collect();
        if let NodeKind::Cpu(c) = &mut t.node_mut(cpus[1]).kind {
            c.numa = -1;
        }
        assert_eq!(summary(&t), None, "one known node and an unknown one");
    }
}
