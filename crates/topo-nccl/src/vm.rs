//! What a virtual machine does to a topology, and what that does to the plan.
//!
//! Inside a VM NCCL reads the same sysfs the guest shows, so it plans with the guest's
//! artefacts: emulated bridges that report a 2.5 GT/s x1 link above a GPU and its NIC
//! (IBM Cloud gx3d, KVM hosts with pxb-pcie), Gen5 GPUs whose link reads 16 GT/s, empty
//! link speeds, NUMA ids of -1. topo's plan mirrors NCCL, so it keeps them too; this module
//! names each one and builds the same topology with the repairable ones repaired, so that a
//! differential run can say which of the plan's choices the VM caused.

use petgraph::graph::NodeIndex;
use std::collections::BTreeSet;
use topo_model::message::Code;
use topo_model::message::{Finding, Severity};
use topo_model::{NodeKind, PcieLink, Topology};

/// The link speed a GPU generation is built for, by SM: what a repaired GPU link gets.
fn native_speed(sm: u32) -> &'static str {
    match sm {
        0..=79 => "8.0 GT/s PCIe",
        80..=89 => "16.0 GT/s PCIe",
        _ => "32.0 GT/s PCIe",
    }
}

/// The artefacts found, by kind, with the nodes a repair changes.
#[derive(Debug, Default, Clone)]
pub struct Artefacts {
    /// Emulated bridges above GPUs or NICs, with the link a repair gives them.
    pub bridges: Vec<(NodeIndex, PcieLink)>,
    /// GPUs whose link is slower than their generation's, or empty, with the repaired link.
    pub gpu_links: Vec<(NodeIndex, PcieLink)>,
    /// CPUs with NUMA id -1 (nothing to repair: the real sockets are unknown).
    pub numa_unknown: usize,
}

impl Artefacts {
    pub fn repairable(&self) -> bool {
        !self.bridges.is_empty() || !self.gpu_links.is_empty()
    }

    /// Whether there is anything to say.
    pub fn any(&self) -> bool {
        self.repairable() || self.numa_unknown > 0
    }
}

/// Every VM artefact of `topo`.
pub fn find(topo: &Topology) -> Artefacts {
    let mut a = Artefacts::default();
    for n in topo.pci_switches() {
        // The emulated-bridge rule show and diagnose state too.
        if let Some(link) = topo_model::pcie_judge::virtual_bridge(topo, n) {
            a.bridges.push((n, link));
        }
    }
    for n in topo.gpus() {
        if let Some(link) = slow_gpu_link(topo, n) {
            a.gpu_links.push((n, link));
        }
    }
    a.numa_unknown = topo
        .cpus()
        .filter(|&c| topo.cpu(c).is_some_and(|c| c.numa < 0))
        .count();
    a
}

/// Whether `topo` has any VM artefact (`find(topo).any()`), each node asked alone: one
/// copy's nodes answer for its unchanged copies ([`Topology::asked_nodes`]).
pub fn found(topo: &Topology) -> bool {
    topo.asked_nodes()
        .into_iter()
        .any(|n| match &topo.node(n).kind {
            NodeKind::PciSwitch(_) => topo_model::pcie_judge::virtual_bridge(topo, n).is_some(),
            NodeKind::Gpu(_) => slow_gpu_link(topo, n).is_some(),
            NodeKind::Cpu(c) => c.numa < 0,
            _ => false,
        })
}

/// A Gen5-class GPU (SM 90 and later) linked at 16 GT/s or less, or any GPU with an empty
/// link speed (NCCL counts that as Gen3): the repaired link is its generation's at the
/// stated width.
fn slow_gpu_link(topo: &Topology, n: NodeIndex) -> Option<PcieLink> {
    let g = topo.gpu(n)?;
    let sm = g.sm?;
    let empty = g.pcie.speed.as_deref().is_some_and(|s| s.trim().is_empty());
    let slow = sm >= 90 && g.pcie.gts().is_some_and(|t| t <= 16.0);
    (empty || slow).then(|| PcieLink::new(Some(native_speed(sm)), g.pcie.width))
}

/// `topo` with the repairable artefacts repaired: each link set as the repair says, and the
/// PCI links to its parent given the new bandwidth (NCCL takes a link's bandwidth from the
/// child's attributes).
pub fn repaired(topo: &Topology, a: &Artefacts) -> Topology {
    let mut t = topo.clone();
    for (n, link) in a.bridges.iter().chain(&a.gpu_links) {
        let n = *n;
        let bw = link.bw();
        match &mut t.graph[n].kind {
            NodeKind::PciSwitch(p) => p.pcie = link.clone(),
            NodeKind::Gpu(g) => g.pcie = link.clone(),
            _ => continue,
        }
        let Some(parent) = t.graph[n].parent else {
            continue;
        };
        let edges: Vec<_> = t
            .graph
            .edges_connecting(parent, n)
            .chain(t.graph.edges_connecting(n, parent))
            .filter(|e| e.weight().kind == topo_model::LinkKind::Pci)
            .map(|e| petgraph::visit::EdgeRef::id(&e))
            .collect();
        for e in edges {
            t.graph[e].bw = bw;
        }
    }
    t
}

fn busids(topo: &Topology, nodes: &[(NodeIndex, PcieLink)]) -> String {
    let ids: BTreeSet<String> = nodes
        .iter()
        .filter_map(|(n, _)| topo.node(*n).busid().map(|b| b.to_string()))
        .collect();
    let shown: Vec<&str> = ids.iter().take(3).map(String::as_str).collect();
    let more = if ids.len() > 3 { ", ..." } else { "" };
    format!("{}{more}", shown.join(", "))
}

/// One message per kind of artefact: what it is, and what NCCL does with it.
pub fn messages(topo: &Topology, a: &Artefacts) -> Vec<Finding> {
    // The VM's tree is the judge's verdict, the one show and diagnose state too
    // (`topo_model::pcie_judge`: emulated bridges, width-0 links, a flattened tree).
    let mut m: Vec<Finding> = topo_model::pcie_judge::verdicts(topo, topo.graph.node_indices())
        .into_iter()
        .filter(|v| matches!(v.code, Code::VirtualizedTopology | Code::TopologyFlattened))
        .collect();
    // Counts over several hosts say so, as the other per-host facts do (`(on 2 hosts)`).
    let on_hosts = |nodes: &mut dyn Iterator<Item = NodeIndex>| {
        let hosts: BTreeSet<_> = nodes.map(|n| topo.node(n).host).collect();
        if hosts.len() > 1 {
            format!(" (on {} hosts)", hosts.len())
        } else {
            String::new()
        }
    };
    if !a.gpu_links.is_empty() {
        let hosts = on_hosts(&mut a.gpu_links.iter().map(|(n, _)| *n));
        m.push(Finding::new(Code::VmGpuLinkSlow, format!(
            "{} GPU(s){hosts} report a link slower than their generation's or an empty speed ({}): a virtual machine, a riser or a slower slot; NCCL takes the link as reported (an empty speed as Gen3)",
            a.gpu_links.len(),
            busids(topo, &a.gpu_links),
        )));
    }
    if a.numa_unknown > 0 {
        let hosts = on_hosts(
            &mut topo
                .cpus()
                .filter(|&c| topo.cpu(c).is_some_and(|c| c.numa < 0)),
        );
        m.push(Finding::new(Code::VmNumaUnknown, format!(
            "{} CPU domain(s){hosts} with NUMA id -1: the kernel reports no NUMA node (a VM that hides it, or a machine without NUMA); NCCL treats each as one CPU domain, and the plan cannot say what the real sockets would change",
            a.numa_unknown
        )));
    }
    m
}

/// The PCIe facts show and diagnose state (`topo_model::pcie_judge`) that the plan has not
/// said already: a VM's tree seen by its width-0 links or a hypervisor's bridge id, a
/// downtrained link (NCCL plans with the link's capability, so the plan is optimistic there),
/// a device behind a slower link. One code and severity per fact in every view.
pub fn pcie_messages(topo: &Topology, plan: &mut crate::plan::Plan) {
    for v in topo_model::pcie_judge::every_node(topo) {
        if plan.messages.iter().any(|m| m.code == v.code) {
            continue;
        }
        if v.severity >= Severity::Warning {
            plan.warnings.push(v.text.clone());
        }
        plan.messages.push(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::{Cpu, Gpu, LinkKind, PciSwitch};

    fn vm_box(bridge: PcieLink, gpu: PcieLink, sm: u32) -> (Topology, NodeIndex, NodeIndex) {
        let mut t = Topology::default();
        let cpu = t.add_node(0, None, NodeKind::Cpu(Cpu::default()));
        let br = t.add_child(
            cpu,
            NodeKind::PciSwitch(PciSwitch {
                busid: "0000:a1:00.0".parse().unwrap(),
                pcie: bridge,
                ..Default::default()
            }),
        );
        let mut g = Gpu::new("0000:a4:00.0".parse().unwrap(), 0);
        g.sm = Some(sm);
        g.pcie = gpu;
        let g = t.add_child(br, NodeKind::gpu(g));
        (t, br, g)
    }

    fn pci_bw(t: &Topology, a: NodeIndex, b: NodeIndex) -> f64 {
        t.graph
            .edges_connecting(a, b)
            .find(|e| e.weight().kind == LinkKind::Pci)
            .map(|e| e.weight().bw)
            .unwrap()
    }

    #[test]
    fn an_x1_bridge_above_a_gpu_is_repaired_to_the_gpu_link() {
        let (t, br, _) = vm_box(
            PcieLink::new(Some("2.5 GT/s PCIe"), Some(1)),
            PcieLink::new(Some("32.0 GT/s PCIe"), Some(0)),
            90,
        );
        let a = find(&t);
        assert_eq!(a.bridges.len(), 1);
        assert!(a.gpu_links.is_empty());
        let r = repaired(&t, &a);
        let cpu = r.graph[br].parent.unwrap();
        assert_eq!(pci_bw(&r, cpu, br), 48.0);
        assert_eq!(pci_bw(&r, br, cpu), 48.0);
        // NCCL prices 2.5 GT/s x1 at 0.1875 GB/s.
        assert!((pci_bw(&t, cpu, br) - 0.1875).abs() < 1e-9);
        assert_eq!(messages(&t, &a)[0].code, "virtualized-topology");
    }

    #[test]
    fn a_gen5_gpu_at_16_gts_is_repaired_to_32_and_a_gen4_one_is_left() {
        let fast_bridge = PcieLink::new(Some("32.0 GT/s PCIe"), Some(16));
        let (t, br, g) = vm_box(
            fast_bridge.clone(),
            PcieLink::new(Some("16.0 GT/s PCIe"), Some(16)),
            90,
        );
        let a = find(&t);
        assert!(a.bridges.is_empty());
        assert_eq!(a.gpu_links.len(), 1);
        assert_eq!(pci_bw(&repaired(&t, &a), br, g), 48.0);
        // An A100 (SM 80) at 16 GT/s is at its generation's speed.
        let (t, _, _) = vm_box(
            fast_bridge,
            PcieLink::new(Some("16.0 GT/s PCIe"), Some(16)),
            80,
        );
        assert!(!find(&t).repairable());
    }

    #[test]
    fn a_slow_bridge_with_nothing_fast_below_is_not_a_vm() {
        let (t, _, _) = vm_box(
            PcieLink::new(Some("2.5 GT/s PCIe"), Some(1)),
            PcieLink::new(Some("2.5 GT/s PCIe"), Some(1)),
            70,
        );
        assert!(find(&t).bridges.is_empty());
    }
}
