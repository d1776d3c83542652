//! Live discovery: sysfs/procfs under a root, plus NVML for GPUs.
//!
//! `discover(root)` reads the tree with [`sysfs::scan`], builds the hardware model with
//! [`build`], then applies NVML: the live driver when `root` is `/`, otherwise the recorded
//! `nvml.json` beside the tree (a snapshot; no file means no NVML on that machine).

use super::nvml::{self, NvmlReport};
use super::sysfs::{self, PciFunction, Scan, Sysfs};
use anyhow::Result;
use petgraph::graph::NodeIndex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use topo_model::{
    BusId, Cpu, Gpu, Net, Nic, NodeKind, NvSwitch, NvlinkInfo, PciDevice, PciSwitch, PcieLink,
    SourceInfo, Topology, bw, class,
};

/// What discovery needs besides the sysfs tree.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// NVML's answer, or why there is none.
    pub nvml: Result<NvmlReport, String>,
    /// `x86_64`, `arm64`, `ppc64` (NCCL's spelling).
    pub arch: String,
    /// NCCL_* and CUDA_VISIBLE_DEVICES.
    pub env: BTreeMap<String, String>,
}

/// The running binary's architecture in NCCL's spelling (`ncclTopoGetXmlFromCpu`).
pub fn host_arch() -> String {
    topo_model::nccl_arch(std::env::consts::ARCH)
}

/// NCCL_* and CUDA_VISIBLE_DEVICES from this process.
pub fn process_env() -> BTreeMap<String, String> {
    std::env::vars()
        .filter(|(k, _)| k.starts_with("NCCL_") || k == "CUDA_VISIBLE_DEVICES")
        .collect()
}

/// True when `root` is the real file-system root, the only case where live NVML is asked.
pub fn is_system_root(root: &Path) -> bool {
    std::fs::canonicalize(root).is_ok_and(|c| c == Path::new("/"))
}

/// Discovery over an open tree (the capture reuses `fs` to learn which files were read).
pub fn discover_with(fs: &Sysfs, inputs: Inputs) -> Topology {
    let scan = sysfs::scan(fs);
    let mut topo = build(&scan, &inputs.arch);
    if let Some(h) = topo.hosts.first_mut() {
        h.env = inputs.env;
    }
    finish_gpus(&mut topo, &inputs.nvml);
    topo.connect_cpus();
    topo
}

/// Applies NVML (or records why it is missing) and says what GPU discovery could not do.
fn finish_gpus(topo: &mut Topology, nvml: &Result<NvmlReport, String>) {
    let sysfs_gpus = topo.gpus().len();
    let note = match nvml {
        Ok(r) => {
            nvml::apply(r, topo);
            if r.gpus.is_empty() && sysfs_gpus == 0 {
                Some("no NVIDIA GPU found: NVML reports no devices".to_string())
            } else if r.gpus.is_empty() {
                Some(format!(
                    "NVML reports no GPUs although sysfs lists {sysfs_gpus}: NVLink and P2P status unknown"
                ))
            } else {
                None
            }
        }
        Err(reason) if sysfs_gpus == 0 => {
            Some(format!("no NVIDIA GPU found: none in sysfs, and {reason}"))
        }
        Err(reason) => {
            for n in topo.gpus() {
                if let NodeKind::Gpu(g) = &mut topo.node_mut(n).kind {
                    g.nvlink = NvlinkInfo::Unknown(reason.clone());
                }
            }
            Some(format!(
                "{reason}: GPUs found in sysfs only; NVLink and P2P status unknown"
            ))
        }
    };
    if let Some(h) = topo.hosts.first_mut() {
        h.gpu_discovery = note;
    }
}

/// A port as NCCL's net plugins would export it, before it is placed in the tree.
struct PortPlan {
    pci: BusId,
    net: Net,
    /// NCCL places the port under the first CPU, not its PCI function (a virtio interface).
    at_cpu: bool,
}

/// Network devices in NCCL's plugin order: IB devices (natural name order, `mlx5_2` before
/// `mlx5_10`, as the kernel registers them; active ports only, as the IB plugin skips ports that
/// are not ACTIVE) first, then plain network interfaces in natural name order. Which plugin NCCL loads decides the real numbering; with both IB devices and plain
/// interfaces present, this order is an approximation (NCCL uses one transport or the other).
fn plan_ports(scan: &Scan, warnings: &mut Vec<String>) -> Vec<PortPlan> {
    let gdr = scan.host.gdr();
    let mut out = Vec::new();
    let mut ib: Vec<&sysfs::IbDevice> = scan.ib.iter().collect();
    ib.sort_by_key(|d| natural_key(&d.name));
    let owned: BTreeSet<&str> = ib
        .iter()
        .flat_map(|d| d.netdevs.iter().map(String::as_str))
        .collect();
    for d in &ib {
        let Some(pci) = d.pci else {
            warnings.push(format!("{}: no PCI device behind it; left out", d.name));
            continue;
        };
        for p in &d.ports {
            if !p.is_active() {
                warnings.push(format!(
                    "{} port {} is not active ({}): NCCL's IB plugin skips it",
                    d.name,
                    p.num,
                    p.state.as_deref().unwrap_or("in an unknown state")
                ));
                continue;
            }
            // The interface on this port: by dev_port when the function has several.
            let netdev = scan
                .net
                .iter()
                .filter(|i| d.netdevs.contains(&i.name))
                .find(|i| i.dev_port.map(|x| x + 1) == Some(p.num) || d.netdevs.len() == 1)
                .map(|i| i.name.clone());
            out.push(PortPlan {
                pci,
                net: Net {
                    name: d.name.clone(),
                    dev: out.len() as i32,
                    speed_mbps: p.rate_mbps,
                    port: p.num,
                    guid: d.node_guid,
                    gdr,
                    link_layer: p.link_layer.clone(),
                    state: p.state.clone(),
                    netdev,
                    ..Default::default()
                },
                at_cpu: false,
            });
        }
    }
    let mut plain: Vec<&sysfs::NetInterface> = scan
        .net
        .iter()
        .filter(|i| i.pci.is_some() && !owned.contains(i.name.as_str()))
        .collect();
    plain.sort_by_key(|i| natural_key(&i.name));
    for i in plain {
        let (Some(pci), false) = (i.pci, i.operstate.as_deref() == Some("down")) else {
            continue;
        };
        out.push(PortPlan {
            pci,
            net: Net {
                name: i.name.clone(),
                dev: out.len() as i32,
                speed_mbps: i.speed_mbps,
                port: 0,
                state: i.operstate.clone(),
                netdev: Some(i.name.clone()),
                socket: true,
                ..Default::default()
            },
            at_cpu: i.behind_bus,
        });
    }
    out
}

/// Ports whose device is not a PCI function (virtio): one NIC without a PCI location under
/// the first CPU, as NCCL builds it (src/graph/xml.cc `ncclTopoFillNet`, 2.28.9).
fn attach_to_first_cpu(t: &mut Topology, cpus: &[(i32, NodeIndex)], nets: Vec<Net>) {
    let Some(&(_, cpu)) = cpus.first() else {
        return;
    };
    if nets.is_empty() {
        return;
    }
    let nic = t.add_child(
        cpu,
        NodeKind::Nic(Nic {
            busid: None,
            class: 0x020000,
            ..Default::default()
        }),
    );
    for net in nets {
        t.add_child(nic, NodeKind::Net(net));
    }
}

/// Sort key that orders digit runs by value: `mlx5_2` < `mlx5_10`, `enp97s0` < `enp225s0`.
fn natural_key(name: &str) -> Vec<(String, Option<u64>)> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in name.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                out.push((
                    std::mem::take(&mut text),
                    Some(digits.parse().unwrap_or(u64::MAX)),
                ));
                digits.clear();
            }
            text.push(c);
        }
    }
    out.push((text, digits.parse().ok()));
    out
}

/// `link_speed`/`link_width` as NCCL ≤2.29 fills them from sysfs: the smaller of the device's
/// and its upstream port's maximum (`ncclTopoGetXmlFromSys`, src/graph/xml.cc). A value that
/// does not parse loses to one that does.
fn pcie_of(f: &PciFunction, scan: &Scan) -> PcieLink {
    let up = f.upstream_port().and_then(|b| scan.pci.get(&b));
    let dev_speed = f.max_link_speed.as_deref();
    let port_speed = up.and_then(|u| u.max_link_speed.as_deref());
    let gts = |s: Option<&str>| s.and_then(bw::pcie_gts).unwrap_or(f64::MAX);
    let speed = match (dev_speed, port_speed) {
        (d, Some(p)) if gts(Some(p)) < gts(d) => Some(p),
        (Some(d), _) => Some(d),
        (None, p) => p,
    };
    let width = match (f.max_link_width, up.and_then(|u| u.max_link_width)) {
        (Some(d), Some(p)) => Some(d.min(p)),
        (d, p) => d.or(p),
    };
    PcieLink {
        speed: speed.map(str::to_string),
        width,
        max_speed: f.max_link_speed.clone(),
        max_width: f.max_link_width,
        cur_speed: f.cur_link_speed.clone(),
        cur_width: f.cur_link_width,
    }
}

fn is_nvidia(f: &PciFunction) -> bool {
    f.vendor == Some(0x10de)
}
fn is_gpu(f: &PciFunction) -> bool {
    is_nvidia(f) && f.class.is_some_and(class::is_gpu)
}
fn is_nvswitch(f: &PciFunction) -> bool {
    is_nvidia(f) && f.class.is_some_and(|c| c >> 8 == 0x0680)
}
fn is_bridge(f: &PciFunction) -> bool {
    f.class.is_some_and(class::is_bridge)
}

/// Builds the hardware model from a scan (host 0, source kind `live`); NVML is applied after.
pub fn build(scan: &Scan, arch: &str) -> Topology {
    let mut t = Topology::new(SourceInfo {
        kind: topo_model::SourceKind::Live,
        origin: None,
        ..Default::default()
    });
    let mut warnings = scan.warnings.clone();
    let cpus = add_cpus(&mut t, scan, arch);
    let ports = plan_ports(scan, &mut warnings);
    let mut nets_of: BTreeMap<BusId, Vec<Net>> = BTreeMap::new();
    let mut at_cpu = vec![];
    for p in ports {
        if p.at_cpu {
            at_cpu.push(p.net);
        } else {
            nets_of.entry(p.pci).or_default().push(p.net);
        }
    }
    let nic_functions: BTreeSet<BusId> = scan
        .ib
        .iter()
        .filter_map(|d| d.pci)
        .chain(
            scan.net
                .iter()
                .filter(|i| !i.behind_bus)
                .filter_map(|i| i.pci),
        )
        .chain(nets_of.keys().copied())
        .collect();
    let tree = PciTree::new(scan);
    let b = Builder {
        scan,
        // GPUs without NVML are numbered in bus order, which is how NVML enumerates them.
        gpu_order: tree
            .in_tree
            .iter()
            .copied()
            .filter(|b| scan.pci.get(b).is_some_and(is_gpu))
            .collect(),
        gdr: scan.host.gdr(),
        nic_functions,
    };
    for r in &tree.roots {
        let Some(cpu) = root_cpu(scan, r, &cpus, &mut warnings) else {
            continue;
        };
        b.add_subtree(&mut t, &tree, (*r, cpu), &mut nets_of, &mut warnings);
    }
    for (b, nets) in nets_of {
        warnings.push(format!(
            "{b}: PCI function of {} is missing from sysfs; left out",
            nets[0].name
        ));
    }
    attach_to_first_cpu(&mut t, &cpus, at_cpu);
    for f in scan.pci.values().filter(|f| is_nvswitch(f)) {
        t.add_node(
            0,
            None,
            NodeKind::NvSwitch(NvSwitch {
                busid: Some(f.busid),
                vendor: f.vendor,
                device: f.device,
            }),
        );
    }
    if let Some(h) = t.hosts.first_mut() {
        h.name = scan.host.hostname.clone();
        h.kernel = scan.host.kernel.clone();
        h.driver_version = scan.host.nvidia_driver.clone();
    }
    for w in warnings {
        t.warn(w);
    }
    t
}

/// One CPU node per NUMA node; a machine without NUMA information gets one of unknown id.
fn add_cpus(t: &mut Topology, scan: &Scan, arch: &str) -> Vec<(i32, NodeIndex)> {
    let numa: Vec<(i32, Option<&sysfs::NumaNode>)> = if scan.numa.is_empty() {
        vec![(-1, None)]
    } else {
        scan.numa.iter().map(|n| (n.id, Some(n))).collect()
    };
    let mut cpus: Vec<(i32, NodeIndex)> = Vec::new();
    for (id, n) in numa {
        let cpu = Cpu {
            numa: id,
            cpus: n.and_then(|n| n.cpulist.clone()),
            affinity: n.and_then(|n| n.cpumap.clone()),
            arch: Some(arch.to_string()),
            vendor: scan.cpu.vendor.clone(),
            family: scan.cpu.family,
            model: scan.cpu.model,
            model_name: scan.cpu.model_name.clone(),
            host_hash: None,
        };
        cpus.push((id, t.add_node(0, None, NodeKind::Cpu(cpu))));
    }

    cpus
}

/// The tree: every endpoint (not a bridge, not an NVSwitch) plus the chain of NCCL parents
/// above it. Downstream and root ports NCCL's walk skips are not nodes; their maximum link
/// speed enters the child's link through the min rule.
struct PciTree {
    in_tree: BTreeSet<BusId>,
    children: BTreeMap<BusId, Vec<BusId>>,
    roots: Vec<BusId>,
}

impl PciTree {
    fn new(scan: &Scan) -> PciTree {
        let mut in_tree: BTreeSet<BusId> = BTreeSet::new();
        for f in scan
            .pci
            .values()
            .filter(|f| !is_bridge(f) && !is_nvswitch(f))
        {
            let mut cur = Some(f.busid);
            let mut guard = 0;
            while let Some(b) = cur {
                if !in_tree.insert(b) || guard > 64 {
                    break;
                }
                guard += 1;
                cur = scan
                    .pci
                    .get(&b)
                    .and_then(|x| x.nccl_parent)
                    .filter(|p| scan.pci.contains_key(p));
            }
        }
        let parent_of = |b: &BusId| {
            scan.pci
                .get(b)
                .and_then(|x| x.nccl_parent)
                .filter(|p| in_tree.contains(p))
        };
        let mut children: BTreeMap<BusId, Vec<BusId>> = BTreeMap::new();
        let mut roots: Vec<BusId> = Vec::new();
        for b in &in_tree {
            match parent_of(b) {
                Some(p) => children.entry(p).or_default().push(*b),
                None => roots.push(*b),
            }
        }
        PciTree {
            in_tree,
            children,
            roots,
        }
    }
}

/// The CPU node a root of the tree hangs under: its NUMA node's, else the first (with a
/// warning when that is a guess).
fn root_cpu(
    scan: &Scan,
    r: &BusId,
    cpus: &[(i32, NodeIndex)],
    warnings: &mut Vec<String>,
) -> Option<NodeIndex> {
    let f = scan.pci.get(r)?;
    let cpu = match f
        .numa_node
        .and_then(|n| cpus.iter().find(|(id, _)| *id == n))
    {
        Some(&(_, c)) => c,
        None => {
            // Never empty: one CPU node is made even without NUMA information.
            let &(first_id, first) = cpus.first()?;
            if cpus.len() > 1 || f.numa_node.is_some() {
                let what = match f.numa_node {
                    Some(n) => {
                        format!("numa_node {n} has no NUMA node in sys/devices/system/node")
                    }
                    None => "numa_node is -1 (unknown)".to_string(),
                };
                warnings.push(format!(
                    "{}: {what}; attached to NUMA node {first_id}",
                    f.busid
                ));
            }
            first
        }
    };
    Some(cpu)
}

/// What the PCI nodes of a scan are made from.
struct Builder<'a> {
    scan: &'a Scan,
    gpu_order: Vec<BusId>,
    gdr: bool,
    nic_functions: BTreeSet<BusId>,
}

impl Builder<'_> {
    /// The subtree under `root`, depth first, children in bus order.
    fn add_subtree(
        &self,
        t: &mut Topology,
        tree: &PciTree,
        root: (BusId, NodeIndex),
        nets_of: &mut BTreeMap<BusId, Vec<Net>>,
        warnings: &mut Vec<String>,
    ) {
        let scan = self.scan;
        let mut stack = vec![root];
        while let Some((b, parent)) = stack.pop() {
            let Some(f) = scan.pci.get(&b) else { continue };
            let kids = tree.children.get(&b).cloned().unwrap_or_default();
            let kind = self.kind(f, !kids.is_empty());
            let relevant = matches!(
                kind,
                NodeKind::PciSwitch(_) | NodeKind::Gpu(_) | NodeKind::Nic(_)
            );
            if relevant
                && f.max_link_speed.is_none()
                && f.upstream_port()
                    .is_none_or(|u| scan.pci.get(&u).is_none_or(|x| x.max_link_speed.is_none()))
            {
                warnings.push(format!(
                    "{b}: no max_link_speed in sysfs; NCCL assumes PCIe Gen3 (12 GB/s at x16) for this link"
                ));
            }
            let is_nic = matches!(kind, NodeKind::Nic(_));
            let n = t.add_child(parent, kind);
            if is_nic {
                for net in nets_of.remove(&b).unwrap_or_default() {
                    t.add_child(n, NodeKind::Net(net));
                }
            }
            // Reverse so children are created in bus order.
            for k in kids.into_iter().rev() {
                stack.push((k, n));
            }
        }
    }

    /// A bridge or a function with children is a switch; then GPU, NIC, other device.
    fn kind(&self, f: &PciFunction, has_children: bool) -> NodeKind {
        let (scan, b) = (self.scan, f.busid);
        let pcie = pcie_of(f, scan);
        if is_bridge(f) || has_children {
            NodeKind::PciSwitch(PciSwitch {
                busid: b,
                class: f.class.unwrap_or(class::BRIDGE),
                vendor: f.vendor,
                device: f.device,
                subsystem_vendor: f.subsystem_vendor,
                subsystem_device: f.subsystem_device,
                pcie,
            })
        } else if is_gpu(f) {
            let dev = self.gpu_order.iter().position(|x| *x == b).unwrap_or(0) as i32;
            let mut g = Gpu::new(b, dev);
            g.class = f.class.unwrap_or(0x030200);
            g.vendor = f.vendor;
            g.device = f.device;
            g.subsystem_vendor = f.subsystem_vendor;
            g.subsystem_device = f.subsystem_device;
            g.gdr = Some(self.gdr);
            g.pcie = pcie;
            NodeKind::gpu(g)
        } else if self.nic_functions.contains(&b) {
            NodeKind::Nic(Nic {
                busid: Some(b),
                class: f.class.unwrap_or(class::ETHERNET),
                vendor: f.vendor,
                device: f.device,
                subsystem_vendor: f.subsystem_vendor,
                subsystem_device: f.subsystem_device,
                pcie,
            })
        } else {
            NodeKind::PciDevice(PciDevice {
                busid: b,
                class: f.class.unwrap_or(0),
                vendor: f.vendor,
                device: f.device,
                driver: f.driver.clone(),
                pcie,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn func(b: &str, parent: Option<&str>, up: Option<&str>) -> PciFunction {
        PciFunction {
            busid: BusId::parse(b).unwrap(),
            ancestors: up
                .map(|u| vec![BusId::parse(u).unwrap()])
                .unwrap_or_default(),
            nccl_parent: parent.map(|p| BusId::parse(p).unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn link_is_the_minimum_of_device_and_upstream_port() {
        let mut scan = Scan::default();
        let mut port = func("0000:17:00.0", None, None);
        port.max_link_speed = Some("16.0 GT/s PCIe".into());
        port.max_link_width = Some(8);
        let mut dev = func("0000:18:00.0", None, Some("0000:17:00.0"));
        dev.max_link_speed = Some("32.0 GT/s PCIe".into());
        dev.max_link_width = Some(16);
        scan.pci.insert(port.busid, port);
        let l = pcie_of(&dev, &scan);
        assert_eq!(l.speed.as_deref(), Some("16.0 GT/s PCIe"));
        assert_eq!(l.width, Some(8));
        assert_eq!(l.max_speed.as_deref(), Some("32.0 GT/s PCIe"));
        assert_eq!(l.bw(), 12.0);
        // No upstream information: the device's own maximum.
        let l = pcie_of(&dev, &Scan::default());
        assert_eq!(l.speed.as_deref(), Some("32.0 GT/s PCIe"));
        assert_eq!(l.width, Some(16));
    }

    #[test]
    fn natural_order_of_device_names() {
        let mut v = vec![
            "mlx5_10", "mlx5_2", "mlx5_0", "enp225s0", "enp97s0", "eth0", "eth",
        ];
        v.sort_by_key(|s| natural_key(s));
        assert_eq!(
            v,
            vec![
                "enp97s0", "enp225s0", "eth", "eth0", "mlx5_0", "mlx5_2", "mlx5_10"
            ]
        );
    }

    #[test]
    fn no_numa_information_gives_one_cpu_of_unknown_id() {
        let t = build(&Scan::default(), "x86_64");
        let cpus: Vec<_> = t.cpus().collect();
        assert_eq!(cpus.len(), 1);
        assert_eq!(t.cpu(cpus[0]).unwrap().numa, -1);
    }
}
