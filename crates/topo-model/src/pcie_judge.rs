//! PCIe facts every view states alike: one rule and one code per fact (issue 24). `topo show`
//! (the PCI tree's flags and the summary), `topo plan` (its messages) and `topo diagnose` (its
//! findings) all take them from here, so a virtual machine's PCI tree or a downtrained link
//! reads the same in each, with the same severity.

use crate::bw::{pcie_bw, pcie_generation, pcie_gts};
pub use crate::message::Finding;
use crate::message::{Code, Severity};
use crate::{NodeKind, PcieLink, Topology};
use petgraph::graph::NodeIndex;
use serde::Serialize;

/// A virtual machine's emulated PCI tree.
pub const VIRTUAL: Code = Code::VirtualizedTopology;
/// A link running below the width or speed it is capable of.
pub const DOWNTRAINED: Code = Code::PcieDowntrained;
/// A device that can do more than the link above it gives.
pub const UPSTREAM_SLOWER: Code = Code::PcieUpstreamSlower;
/// A host whose GPUs and NICs all hang off one host bridge: a hypervisor's flattened tree.
pub const FLATTENED: Code = Code::TopologyFlattened;

/// The fewest GPUs a host needs before one host bridge for all of them reads as a
/// hypervisor's flattening: a workstation's two or three cards on the CPU's root ports are
/// PHB apart on bare metal, while no bare-metal server of four or more GPUs puts them and its
/// NICs behind one host bridge without a PCIe switch.
const FLAT_MIN_GPUS: usize = 4;
/// Above this many GPUs on one host the pairwise check is not run (linear work per input).
const FLAT_MAX_GPUS: usize = 256;

/// What to do about a VM's topology, from inside the guest: the host's tree is the cloud's
/// to give (Azure and AWS publish NCCL topology files for their GPU VMs).
pub const VM_FIX: &str = "ask the cloud provider for the host's NCCL topology file (Azure and AWS publish theirs for their GPU VMs) and set NCCL_TOPO_FILE to it in the guest (its bus ids must match the guest's); where you run the hypervisor, `topo snapshot` on the host and `topo xml --from host.tar.gz -o host-topo.xml` write one; until then read P2P, NVLink and NIC distances here as the hypervisor's view, not the hardware's";

/// A bridge whose own link is below this (GB/s, NCCL's PCI bandwidth) while a GPU or a NIC
/// below it links at least 4x faster is an emulated bridge: NCCL prices x1 Gen1 at 0.19 GB/s
/// and x1 Gen3 at 0.75; no GPU server puts an accelerator or its NIC behind such a link (a
/// BMC's VGA bridge is x1 Gen1 too, but has no GPU or NIC below it).
const VIRTUAL_BRIDGE_MAX_GBPS: f64 = 1.0;
/// PCI ids of bridges only hypervisors show: 104c:8232 is the XIO3130 switch QEMU emulates
/// (`x3130-upstream`/`xio3130-downstream`), which KVM guests put GPUs behind; 1b36:000c,
/// 1b36:0001 and 1b36:000e are QEMU's own PCIe root port, PCI-PCI bridge and PCIe-to-PCI
/// bridge (QEMU docs/specs/pci-ids.rst), a guest's "one root port per device"; 15ad:07a0 is
/// VMware's virtual PCIe root port.
const EMULATED_BRIDGE_IDS: [(u16, u16); 5] = [
    (0x104c, 0x8232),
    (0x1b36, 0x000c),
    (0x1b36, 0x0001),
    (0x1b36, 0x000e),
    (0x15ad, 0x07a0),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlagKind {
    Downtrained,
    UpstreamSlower,
    /// An emulated bridge: under 1 GB/s above a much faster GPU or NIC, or a hypervisor's id.
    VmBridge,
    /// A link reporting width 0.
    VmWidth0,
    /// A GPU placed as only a hypervisor places one: on a bus as a device other than 0.
    VmPlacement,
}

impl FlagKind {
    /// The code of the fact the flag is evidence of.
    pub fn code(self) -> Code {
        match self {
            FlagKind::Downtrained => DOWNTRAINED,
            FlagKind::UpstreamSlower => UPSTREAM_SLOWER,
            FlagKind::VmBridge | FlagKind::VmWidth0 | FlagKind::VmPlacement => VIRTUAL,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Flag {
    pub kind: FlagKind,
    pub text: String,
    /// A downtrained link that lost lanes (not only speed, which idle GPUs lower on purpose).
    #[serde(skip)]
    pub narrower: bool,
}

impl Flag {
    fn new(kind: FlagKind, text: String) -> Flag {
        Flag {
            kind,
            text,
            narrower: false,
        }
    }
}

/// `Gen4 x16` from a link, `?` parts where unknown.
pub fn gen_width(speed: Option<&str>, width: Option<u32>) -> String {
    let g = match speed.and_then(pcie_gts) {
        Some(gts) => match pcie_generation(gts) {
            Some(n) => format!("Gen{n}"),
            None => format!("{gts} GT/s"),
        },
        None => "Gen?".to_string(),
    };
    let w = width
        .map(|w| format!("x{w}"))
        .unwrap_or_else(|| "x?".to_string());
    format!("{g} {w}")
}

/// The link of an emulated bridge's fastest GPU or NIC below it, when `n` is one (see
/// [`VIRTUAL_BRIDGE_MAX_GBPS`]): what a repair gives the bridge.
pub fn virtual_bridge(topo: &Topology, n: NodeIndex) -> Option<PcieLink> {
    let own = topo.node(n).pcie()?;
    if own.bw() >= VIRTUAL_BRIDGE_MAX_GBPS {
        return None;
    }
    let fastest = topo
        .children(n)
        .into_iter()
        .filter(|&c| carries_gpu_or_nic(topo, c))
        .filter_map(|c| topo.node(c).pcie().cloned())
        .max_by(|x, y| x.bw().total_cmp(&y.bw()))?;
    (fastest.bw() > own.bw() * 4.0).then(|| PcieLink::new(fastest.speed.as_deref(), fastest.width))
}

fn carries_gpu_or_nic(topo: &Topology, n: NodeIndex) -> bool {
    let mut stack = vec![n];
    let mut seen = 0usize;
    while let Some(x) = stack.pop() {
        seen += 1;
        if seen > 4096 {
            return false;
        }
        if matches!(topo.node(x).kind, NodeKind::Gpu(_) | NodeKind::Nic(_)) {
            return true;
        }
        stack.extend(topo.children(x));
    }
    false
}

fn emulated_id(topo: &Topology, n: NodeIndex) -> Option<(u16, u16)> {
    let NodeKind::PciSwitch(s) = &topo.node(n).kind else {
        return None;
    };
    let id = (s.vendor?, s.device?);
    EMULATED_BRIDGE_IDS.contains(&id).then_some(id)
}

/// Whether `n` is an emulated bridge by either rule.
pub fn is_virtual_bridge(topo: &Topology, n: NodeIndex) -> bool {
    emulated_id(topo, n).is_some() || virtual_bridge(topo, n).is_some()
}

/// What is worth flagging on a node's PCIe link.
pub fn link_flags(topo: &Topology, n: NodeIndex) -> Vec<Flag> {
    let node = topo.node(n);
    let Some(l) = node.pcie() else { return vec![] };
    let mut out = vec![];
    if l.width == Some(0) {
        out.push(Flag::new(
            FlagKind::VmWidth0,
            "reports link width 0 (virtual machine); NCCL counts it as x16".into(),
        ));
    }
    if let Some(f) = vm_bridge_flag(topo, n, l) {
        out.push(f);
    }
    out.extend(vm_placement_flag(topo, node));
    out.extend(downtrained_flag(node, l));
    out.extend(upstream_flags(topo, n, l));
    out
}

fn vm_bridge_flag(topo: &Topology, n: NodeIndex, l: &PcieLink) -> Option<Flag> {
    let what = match (emulated_id(topo, n), virtual_bridge(topo, n)) {
        (_, Some(fast)) => format!(
            "a {} bridge ({:.2} GB/s) above a device linked at {} ({:.1} GB/s)",
            gen_width(l.speed.as_deref(), l.width),
            l.bw(),
            gen_width(fast.speed.as_deref(), fast.width),
            fast.bw()
        ),
        (Some((v, d)), None) => format!("PCI id {v:04x}:{d:04x}, a bridge QEMU/KVM guests show"),
        (None, None) => return None,
    };
    Some(Flag::new(
        FlagKind::VmBridge,
        format!(
            "emulated (VM) bridge: {what}; not real hardware, and NCCL still models paths through it at {:.2} GB/s",
            l.bw()
        ),
    ))
}

/// A discrete GPU is always device 0 of its bus: a PCIe link joins one port to one device,
/// so a GPU behind a root port or a switch port is `bb:00.f`. One at another device number
/// sits on a root bus, where a hypervisor puts passed-through devices (QEMU's i440fx, a
/// cloud's `0000:10:1c.0`) and a physical machine never puts a GPU. Only where the source
/// states the GPU's PCI ids (a dump or the machine itself): a hand-written file's bus ids are
/// whatever its author chose, and a matrix's are placeholders. Not on a profile: it is a
/// cloud's VM layout on purpose (aws-p4d), the reference a guest is compared with.
fn vm_placement_flag(topo: &Topology, node: &crate::Node) -> Option<Flag> {
    let NodeKind::Gpu(g) = &node.kind else {
        return None;
    };
    if topo.source.kind == crate::SourceKind::Profile {
        return None;
    }
    if g.device.is_none() || g.busid.is_placeholder() || g.busid.device() == 0 {
        return None;
    }
    Some(Flag::new(
        FlagKind::VmPlacement,
        format!(
            "a GPU at device {:#04x} of bus {:02x}: on a physical machine every GPU is device 0 behind its own port, only a hypervisor puts one on a root bus beside others",
            g.busid.device(),
            g.busid.bus()
        ),
    ))
}

/// Current link below what the device negotiated as its maximum.
fn downtrained_flag(node: &crate::Node, l: &PcieLink) -> Option<Flag> {
    if l.cur_speed.is_none() && l.cur_width.is_none() {
        return None;
    }
    let max_s = l.max_speed.as_deref().or(l.speed.as_deref());
    let max_w = l.max_width.or(l.width);
    let slower = match (
        l.cur_speed.as_deref().and_then(pcie_gts),
        max_s.and_then(pcie_gts),
    ) {
        (Some(c), Some(m)) => c + 0.01 < m,
        _ => false,
    };
    let narrower = matches!((l.cur_width, max_w), (Some(c), Some(m)) if c < m && c > 0);
    if !slower && !narrower {
        return None;
    }
    let idle = if matches!(node.kind, NodeKind::Gpu(_)) && !narrower {
        "; idle GPUs lower their link speed, so check again under load"
    } else {
        ""
    };
    Some(Flag {
        kind: FlagKind::Downtrained,
        text: format!(
            "downtrained: running {}, capable of {}{idle}",
            gen_width(l.cur_speed.as_deref(), l.cur_width),
            gen_width(max_s, max_w)
        ),
        narrower,
    })
}

/// The device can do more than the link NCCL uses (the minimum of device and port), or the
/// switch above it is linked more slowly (emulated bridges are flagged on their own).
fn upstream_flags(topo: &Topology, n: NodeIndex, l: &PcieLink) -> Vec<Flag> {
    let mut out = vec![];
    if let (Some(dev_s), Some(eff_s)) = (l.max_speed.as_deref(), l.speed.as_deref()) {
        let dev_bw = pcie_bw(Some(dev_s), l.max_width.or(l.width));
        if dev_bw > l.bw() + 1e-9 && l.width != Some(0) {
            out.push(Flag::new(
                FlagKind::UpstreamSlower,
                format!(
                    "the device can do {} ({:.1} GB/s) but its port gives {} ({:.1} GB/s)",
                    gen_width(Some(dev_s), l.max_width.or(l.width)),
                    dev_bw,
                    gen_width(Some(eff_s), l.width),
                    l.bw()
                ),
            ));
        }
    }
    if let Some(p) = topo.node(n).parent
        && !by_design(topo)
        && let NodeKind::PciSwitch(ps) = &topo.node(p).kind
        && !is_virtual_bridge(topo, p)
        && ps.pcie.speed.is_some()
        && ps.pcie.bw() + 1e-9 < l.bw()
    {
        out.push(Flag::new(
            FlagKind::UpstreamSlower,
            format!(
                "upstream switch {} is linked at {:.1} GB/s, below this device's {:.1} GB/s",
                ps.busid,
                ps.pcie.bw(),
                l.bw()
            ),
        ));
    }
    out
}

/// Whether the links are a profile's design as it stands: a profile is written from the
/// machine's documentation or its vendor's topology file (aws-p5's Gen4 x16 switches above
/// Gen5 GPUs are how the instance is built, and what NCCL sees there), so a slower switch
/// above a device is the machine, not something to fix on it. Facts stated or faults put
/// over it (`source.stated`) are judged as on any machine.
fn by_design(topo: &Topology) -> bool {
    topo.source.kind == crate::SourceKind::Profile && topo.source.stated.is_empty()
}

/// The PCIe verdicts over `nodes` (a host's, or a whole topology's), in a fixed order.
pub fn verdicts(topo: &Topology, nodes: impl IntoIterator<Item = NodeIndex>) -> Vec<Finding> {
    let (mut virt, mut down, mut up) = (vec![], vec![], vec![]);
    let (mut bridges, mut width0, mut placed, mut narrower) = (0, 0, 0, false);
    let (mut seen_gpus, mut seen_nics) = (vec![], vec![]);
    for n in nodes {
        match topo.node(n).kind {
            NodeKind::Gpu(_) => seen_gpus.push(n),
            NodeKind::Nic(_) => seen_nics.push(n),
            _ => {}
        }
        for f in link_flags(topo, n) {
            let line = format!("{}: {}", label(topo, n), f.text);
            match f.kind {
                FlagKind::VmBridge | FlagKind::VmWidth0 | FlagKind::VmPlacement => {
                    bridges += usize::from(f.kind == FlagKind::VmBridge);
                    width0 += usize::from(f.kind == FlagKind::VmWidth0);
                    placed += usize::from(f.kind == FlagKind::VmPlacement);
                    virt.push(line);
                }
                FlagKind::Downtrained => {
                    narrower |= f.narrower;
                    down.push(line);
                }
                FlagKind::UpstreamSlower => up.push(line),
            }
        }
    }
    let ported = root_ported(topo, &seen_gpus);
    if let Some((_, ev)) = &ported {
        virt.extend(ev.iter().cloned());
    }
    let ported = ported.map_or(0, |(n, _)| n);
    let mut out = vec![];
    if !virt.is_empty() {
        out.push(virtual_verdict([bridges, width0, placed, ported], virt));
    }
    out.extend(flattened(topo, &seen_gpus, &seen_nics));
    if !down.is_empty() {
        out.push(downtrained_verdict(narrower, down));
    }
    if !up.is_empty() {
        out.push(Finding::at(UPSTREAM_SLOWER, Severity::Warning, if up.len() == 1 {
                "1 PCIe link limited by a slower link above it: NCCL plans with the slower one"
                    .to_string()
            } else {
                format!(
                    "{} PCIe links limited by slower links above them: NCCL plans with the slower ones",
                    up.len()
                )
            }).evidence(up));
    }
    out
}

/// [`verdicts`] over every node of `topo`. Each verdict gathers what single nodes and
/// single hosts show, so where one copy answers for its unchanged copies
/// ([`Topology::standing`]) and shows nothing, those copies show nothing either and are not
/// asked.
pub fn every_node(topo: &Topology) -> Vec<Finding> {
    match topo.standing() {
        Some(s) if verdicts(topo, s.model_nodes()).is_empty() => verdicts(topo, s.asked_nodes()),
        _ => verdicts(topo, topo.graph.node_indices()),
    }
}

/// Hosts whose GPUs (at least [`FLAT_MIN_GPUS`]) and NICs all sit behind one PCIe host bridge
/// with no switch between any two of them (nvidia-smi's PHB for every GPU-GPU and GPU-NIC
/// pair), on one NUMA node: the tree a hypervisor gives its guest (QEMU/KVM's root bus), not
/// the host's. One finding over all such hosts, which every view selects.
pub fn flattened(topo: &Topology, gpus: &[NodeIndex], nics: &[NodeIndex]) -> Option<Finding> {
    use std::collections::BTreeMap;
    let mut by_host: BTreeMap<crate::HostId, (Vec<NodeIndex>, Vec<NodeIndex>)> = BTreeMap::new();
    for &g in gpus {
        by_host.entry(topo.node(g).host).or_default().0.push(g);
    }
    for &n in nics {
        if let Some(h) = by_host.get_mut(&topo.node(n).host) {
            h.1.push(n);
        }
    }
    let classes = crate::pci_class::PciClasses::of(topo);
    let phb =
        |a: NodeIndex, b: NodeIndex| classes.between(topo, a, b) == crate::pci_class::PciClass::Phb;
    let flat: Vec<(usize, usize)> = by_host
        .values()
        .filter(|(g, _)| (FLAT_MIN_GPUS..=FLAT_MAX_GPUS).contains(&g.len()))
        .filter(|(g, n)| {
            g.iter().enumerate().all(|(i, &a)| {
                g[i + 1..].iter().all(|&b| phb(a, b)) && n.iter().all(|&x| phb(a, x))
            })
        })
        .map(|(g, n)| (g.len(), n.len()))
        .collect();
    let &(g, n) = flat.first()?;
    let nics = match n {
        0 => String::new(),
        1 => " and the host's NIC".to_string(),
        n => format!(" and the host's {n} NICs"),
    };
    let tie = if n > 1 {
        "; every NIC is as near every GPU as any other (the nearest NIC is a tie)"
    } else {
        ""
    };
    let hosts = if flat.len() > 1 {
        format!(" (on {} hosts)", flat.len())
    } else {
        String::new()
    };
    // GPUDirect RDMA's default reach is PXB (ncclTopoCheckGdr, src/graph/paths.cc, NCCL
    // 2.28.9-1: netGdrLevel defaults to PATH_PXB), so PHB alone turns it off.
    let gdr = if n > 0 {
        "; PHB is beyond NCCL's default GPUDirect RDMA level (PXB), so NCCL stages network traffic through host memory unless NCCL_NET_GDR_LEVEL says otherwise"
    } else {
        ""
    };
    Some(
        Finding::new(FLATTENED, format!(
            "Flattened PCIe topology: all {g} GPUs{nics} hang off one PCIe host bridge with no switch between them (PHB for every pair) on one NUMA node, the view a hypervisor gives a virtual machine rather than the host's PCIe tree{tie}{gdr}; NCCL plans from this view{hosts}"
        ))
        .evidence(flat.iter().map(|(g, n)| format!("{g} GPUs, {n} NICs: PHB between every GPU pair and every GPU-NIC pair, no PCIe switch shared")))
        .fix(VM_FIX),
    )
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Hosts whose NVSwitch GPUs all hang straight off their CPU, none behind a PCIe switch (a
/// root port of its own each). NVSwitch GPUs without C2C sit on 8-GPU HGX/DGX baseboards
/// (V100, A100, H100, H200, B200, B300; the 4-GPU boards join their GPUs directly, without
/// NVSwitch), and those put every GPU behind a PCIe switch it shares with a NIC or another
/// GPU, so a bare-metal dump of one always shows switches, one rank's dump included; a KVM
/// guest given a root port per device (QEMU's q35 `pcie-root-port`, expander buses for its
/// NUMA nodes) shows none, and NCCL's dump skips the root ports (it starts a device's path at
/// the bridge two levels up, `ncclTopoGetXmlFromSys`, src/graph/xml.cc), so no emulated id is
/// left to see. Only where the tree was read (an NCCL dump with the GPUs' PCI ids, a snapshot,
/// the machine): a matrix places devices from its cells and a profile or a hand-written file
/// from its author. `(GPUs, evidence)` over every such host.
fn root_ported(topo: &Topology, gpus: &[NodeIndex]) -> Option<(usize, Vec<String>)> {
    use crate::SourceKind as K;
    if !matches!(topo.source.kind, K::Xml | K::Snapshot | K::Live) {
        return None;
    }
    let mut by_host: std::collections::BTreeMap<crate::HostId, Vec<NodeIndex>> = Default::default();
    for &g in gpus {
        by_host.entry(topo.node(g).host).or_default().push(g);
    }
    let on_cpu = |g: NodeIndex| {
        topo.node(g)
            .parent
            .is_some_and(|p| matches!(topo.node(p).kind, NodeKind::Cpu(_)))
    };
    // A Grace-attached GPU (GH200, GB200: C2C to its CPU) sits on the CPU's root port by
    // design, in a tray of at most 4; an MNNVL clique fused into one host has many of them.
    let c2c = |g: NodeIndex| {
        topo.gpu(g).is_some_and(|x| x.c2c.is_some())
            || topo
                .graph
                .edges_directed(g, petgraph::Direction::Outgoing)
                .any(|e| e.weight().kind == crate::LinkKind::C2c)
    };
    let stated = |g: NodeIndex| {
        topo.gpu(g)
            .is_some_and(|x| x.device.is_some() && !x.busid.is_placeholder())
            && !c2c(g)
            && topo
                .nvlinks(g)
                .iter()
                .any(|(to, _, _)| matches!(topo.node(*to).kind, NodeKind::NvSwitch(_)))
    };
    let (mut count, mut evidence) = (0, vec![]);
    for v in by_host.values() {
        if !v.iter().all(|&g| stated(g) && on_cpu(g)) {
            continue;
        }
        count += v.len();
        let which = match v.as_slice() {
            [one] => format!("1 NVSwitch GPU ({})", label(topo, *one)),
            [first, .., last] => format!(
                "{} NVSwitch GPUs ({} ... {})",
                v.len(),
                label(topo, *first),
                label(topo, *last)
            ),
            [] => continue,
        };
        evidence.push(format!(
            "{which}, none behind a PCIe switch: straight off the CPU on a root port of its own, where an 8-GPU NVSwitch baseboard puts every GPU behind a PCIe switch"
        ));
    }
    (count > 0).then_some((count, evidence))
}

/// The VM verdict from the counts of emulated bridges, width-0 links, GPUs placed on a root
/// bus and NVSwitch GPUs each on a root port of its own.
fn virtual_verdict(
    [bridges, width0, placed, ported]: [usize; 4],
    evidence: Vec<String>,
) -> Finding {
    let mut parts = vec![];
    if bridges > 0 {
        parts.push(plural(bridges, "emulated bridge", "emulated bridges"));
    }
    if width0 > 0 {
        parts.push(plural(width0, "link of width 0", "links of width 0"));
    }
    if placed > 0 {
        parts.push(plural(placed, "GPU on a root bus", "GPUs on a root bus"));
    }
    if ported > 0 {
        parts.push(plural(
            ported,
            "NVSwitch GPU on a root port of its own, not behind a PCIe switch",
            "NVSwitch GPUs each on a root port of its own, none behind a PCIe switch",
        ));
    }
    Finding::at(VIRTUAL, Severity::Warning, format!(
            "Virtual-machine PCIe topology ({}): these are not the real links, and NCCL's PCIe bandwidths from them are not real limits",
            parts.join(", ")
        )).evidence(evidence).fix(VM_FIX)
}

fn downtrained_verdict(narrower: bool, evidence: Vec<String>) -> Finding {
    let one = evidence.len() == 1;
    let (severity, summary) = if narrower {
        (
            Severity::Warning,
            format!(
                "{} trained to fewer lanes than {} support: that link's bandwidth is cut (NCCL plans with the full width)",
                plural(evidence.len(), "PCIe link", "PCIe links"),
                if one { "it can" } else { "they" }
            ),
        )
    } else {
        (
            Severity::Info,
            format!(
                "{} below {} maximum speed (idle GPUs lower it to save power; check again under load)",
                plural(evidence.len(), "PCIe link runs", "PCIe links run"),
                if one { "its" } else { "their" }
            ),
        )
    };
    Finding::at(DOWNTRAINED, severity, summary).evidence(evidence)
}

/// `GPU0 (0000:18:00.0)`, `NIC 0000:1a:00.0`, `bridge 0000:17:00.0`.
pub fn label(t: &Topology, n: NodeIndex) -> String {
    let node = t.node(n);
    let bus = node.busid().map(|b| format!("{b}")).unwrap_or_default();
    match &node.kind {
        NodeKind::Gpu(g) => format!("GPU{} ({bus})", g.dev),
        NodeKind::Nic(_) => format!("NIC {bus}"),
        NodeKind::PciSwitch(_) => format!("bridge {bus}"),
        _ => bus,
    }
}

#[cfg(test)]
mod tests;
