//! nvidia-smi's connection classes between two PCI devices of one host (PIX, PXB, PHB, NODE,
//! SYS), as `topo show`'s matrix prints them and the NVLink judgement ([`crate::nvlink_shape`])
//! names the PCIe between GPUs with. One rule, used by every view.

use crate::{HostId, NodeKind, Topology};
use petgraph::graph::NodeIndex;
use serde::Serialize;
use std::collections::HashSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum PciClass {
    #[serde(rename = "PIX")]
    Pix,
    #[serde(rename = "PXB")]
    Pxb,
    #[serde(rename = "PHB")]
    Phb,
    #[serde(rename = "NODE")]
    Node,
    #[serde(rename = "SYS")]
    Sys,
}

impl PciClass {
    pub fn name(self) -> &'static str {
        match self {
            PciClass::Pix => "PIX",
            PciClass::Pxb => "PXB",
            PciClass::Phb => "PHB",
            PciClass::Node => "NODE",
            PciClass::Sys => "SYS",
        }
    }
}

/// What the classes need to know about the whole topology, found once: the flat hosts.
#[derive(Clone, Debug, Default)]
pub struct PciClasses {
    /// Hosts without NUMA information: no PCI switch or bridge (every device hangs off its
    /// CPU) and CPUs with NUMA id -1, as a VM's NCCL XML lists them; nothing tells one host
    /// bridge from another there.
    flat: HashSet<HostId>,
}

impl PciClasses {
    pub fn of(topo: &Topology) -> PciClasses {
        PciClasses::among(topo, topo.graph.node_indices())
    }

    /// [`PciClasses::of`] as far as the hosts of `nodes` go: where those are every node of
    /// their hosts, those hosts' classes are the same as in [`PciClasses::of`].
    pub fn among(topo: &Topology, nodes: impl Iterator<Item = NodeIndex>) -> PciClasses {
        let mut with_switch: HashSet<HostId> = HashSet::new();
        let mut numa_known: HashSet<HostId> = HashSet::new();
        for n in nodes {
            let node = topo.node(n);
            match &node.kind {
                NodeKind::PciSwitch(_) => {
                    with_switch.insert(node.host);
                }
                NodeKind::Cpu(c) if c.numa >= 0 => {
                    numa_known.insert(node.host);
                }
                _ => {}
            }
        }
        let hosts = topo.host_count().max(topo.hosts.len()).max(1);
        let flat = (0..hosts as HostId)
            .filter(|h| !with_switch.contains(h) && !numa_known.contains(h))
            .collect();
        PciClasses { flat }
    }

    /// Whether `host` is flat (see [`PciClasses::flat`]).
    pub fn is_flat(&self, host: HostId) -> bool {
        self.flat.contains(&host)
    }

    /// The class between two GPUs, NICs or ports of one host (a port counts as its NIC).
    pub fn between(&self, topo: &Topology, a: NodeIndex, b: NodeIndex) -> PciClass {
        let (a, b) = (topo.pci_device(a), topo.pci_device(b));
        if a == b {
            // Two ports of one NIC.
            return PciClass::Pix;
        }
        let Some(lca) = topo.common_ancestor(a, b) else {
            return PciClass::Sys;
        };
        if let NodeKind::Cpu(_) = topo.node(lca).kind {
            // A flat host lists no root ports: its devices' bus numbers are the ports'
            // secondary buses, not host bridges, and nvidia-smi says PHB there, as NCCL's
            // paths do.
            return if self.is_flat(topo.node(a).host)
                || host_bridge(topo, a) == host_bridge(topo, b)
            {
                PciClass::Phb
            } else {
                PciClass::Node
            };
        }
        let switches_below = |x: NodeIndex| {
            topo.pci_chain(x)
                .into_iter()
                .skip(1)
                .take_while(|&y| y != lca)
                .filter(|&y| matches!(topo.node(y).kind, NodeKind::PciSwitch(_)))
                .count()
        };
        let at_lca = usize::from(matches!(topo.node(lca).kind, NodeKind::PciSwitch(_)));
        if switches_below(a) + switches_below(b) + at_lca <= 1 {
            PciClass::Pix
        } else {
            PciClass::Pxb
        }
    }
}

/// The host bridge a device reaches its CPU through, identified by the root bus of the
/// device's top-level ancestor (the node right below the CPU): root ports of one host bridge
/// share its bus number, while NCCL-style trees that start at a switch's upstream port give
/// every port its own bus. `None` when the top-level node has no bus id.
fn host_bridge(topo: &Topology, n: NodeIndex) -> Option<(u32, u8)> {
    let c = topo.pci_chain(n);
    let top = c
        .iter()
        .rev()
        .find(|&&x| !matches!(topo.node(x).kind, NodeKind::Cpu(_)))?;
    topo.node(*top).busid().map(|b| (b.domain(), b.bus()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{hgx, pcie_box};

    #[test]
    fn switch_mates_are_pix_and_sockets_apart_sys() {
        let t = pcie_box("Intel", 25, 1, false, false);
        let c = PciClasses::of(&t);
        let g = t.gpus();
        assert_eq!(c.between(&t, g[0], g[1]), PciClass::Pix);
        assert_eq!(c.between(&t, g[0], g[2]), PciClass::Sys);
        let net = t.nets()[0];
        assert_eq!(c.between(&t, net, t.pci_device(net)), PciClass::Pix);
        assert!(!c.is_flat(0));
    }

    #[test]
    fn root_ports_of_one_cpu_are_node_and_a_gpus_own_nic_pix() {
        // Each HGX GPU sits behind its own switch, every switch on its own root bus.
        let t = hgx(8, 90);
        let c = PciClasses::of(&t);
        let g = t.gpus();
        assert_eq!(c.between(&t, g[0], g[1]), PciClass::Node);
        assert_eq!(c.between(&t, g[0], t.nets()[0]), PciClass::Pix);
        assert_eq!(c.between(&t, g[1], t.nets()[0]), PciClass::Node);
    }
}
