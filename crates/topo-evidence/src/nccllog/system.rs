//! The model a `=== System : maxBw … totalBw … ===` block (NCCL_DEBUG_SUBSYS=GRAPH, read by
//! `dump`) stands for, or that a log's other lines imply.
//!
//! NCCL prints its own topology tree (`ncclTopoPrint`, src/graph/topo.cc): one line per node,
//! indented by depth, `+ <LINK>[<bw>] - <TYPE>/<sys>-<id hex> (<extra>)`. That is NCCL's
//! coarse view: bandwidths are exact but GPU models, PCIe generations and NVML indices are
//! absent, so the rebuilt topology says so in its warnings.

pub use super::dump::{MAX_DUMP_LINES, SysLine, SystemDump};
use super::log::NcclLog;
use petgraph::graph::NodeIndex;
use std::collections::HashMap;
use topo_model::{
    BusId, Cpu, Gpu, HostId, Link, LinkKind, Net, Nic, NodeKind, NvSwitch, NvlinkInfo, PciSwitch,
    PcieLink, SourceInfo, Topology, bw, class,
};

/// The PCIe generation and width whose NCCL bandwidth is closest to `gbps`, so per-version
/// recomputation and `show --view pci` say something close to what the dump printed.
fn pcie_for(gbps: f64) -> PcieLink {
    let mut best = (f64::MAX, 3, 16);
    for g in 1..=6 {
        for w in [1, 2, 4, 8, 16] {
            let b = bw::pcie_bw(bw::pcie_speed_string(g), Some(w));
            let d = (b - gbps).abs();
            if d < best.0 {
                best = (d, g, w);
            }
        }
    }
    PcieLink::new(bw::pcie_speed_string(best.1), Some(best.2))
}

/// The compute capability whose per-lane NVLink rate divides `gbps` into whole lanes.
fn sm_for_nvlink(gbps: f64) -> Option<(u32, u32)> {
    let c = topo_model::BwConstants::default();
    for sm in [90, 100, 80, 86, 70] {
        let lane = c.nvlink_lane(sm);
        let lanes = (gbps / lane).round();
        if lanes >= 1.0 && (lanes * lane - gbps).abs() < 0.05 * lane {
            return Some((sm, lanes as u32));
        }
    }
    None
}

fn cpu_of(extra: &str, numa: u64) -> Cpu {
    let v: Vec<i64> = extra.split('/').filter_map(|x| x.parse().ok()).collect();
    let arch = match v.first() {
        Some(2) => "ppc64",
        Some(3) => "arm64",
        _ => "x86_64",
    };
    let vendor = match v.get(1) {
        Some(1) => Some("GenuineIntel"),
        Some(2) => Some("AuthenticAMD"),
        Some(3) => Some("CentaurHauls"),
        _ => None,
    };
    let (family, model, model_name) = match (v.get(1), v.get(2)) {
        (Some(&vendor), Some(&class)) => cpu_class(vendor, class),
        _ => (None, None, None),
    };
    Cpu {
        numa: numa as i32,
        arch: Some(arch.into()),
        vendor: vendor.map(str::to_string),
        family,
        model,
        model_name,
        ..Default::default()
    }
}

/// The dump's third number is NCCL's CPU class code (`NCCL_TOPO_CPU_MODEL_*`, src/include/
/// graph.h, 2.28), not a CPUID model: Intel 1 BDW, 2 SKL, 3 SRP, 4 ERP; Zhaoxin 1 Yongfeng.
/// Returns a CPUID family and model of that class (the lowest model NCCL puts in it, so the
/// analysis classifies it the same way) and a name that says only the class is known.
fn cpu_class(vendor: i64, class: i64) -> (Option<u32>, Option<u32>, Option<String>) {
    let (family, model, name) = match (vendor, class) {
        (1, 1) => (6, 0x4f, "Intel, NCCL class BDW (before Skylake-SP)"),
        (1, 2) => (6, 0x55, "Intel, NCCL class SKL (Skylake-SP to Ice Lake)"),
        (1, 3) => (6, 0x8f, "Intel, NCCL class SRP (Sapphire Rapids)"),
        (1, 4) => (6, 0xcf, "Intel, NCCL class ERP (Emerald Rapids or newer)"),
        (3, 1) => (7, 0x5b, "Zhaoxin, NCCL class Yongfeng"),
        _ => return (None, None, None),
    };
    (Some(family), Some(model), Some(name.to_string()))
}

/// `vendor device subvendor subdevice` from the 64-bit composite NCCL prints for PCI nodes.
fn pci_ids(extra: &str) -> (Option<u16>, Option<u16>) {
    match u64::from_str_radix(extra.trim(), 16) {
        Ok(v) if v != 0 => (Some((v >> 48) as u16), Some((v >> 32) as u16)),
        _ => (None, None),
    }
}

struct Builder<'a> {
    t: Topology,
    hosts: HashMap<u64, HostId>,
    cpus: HashMap<(HostId, u64), NodeIndex>,
    nvs: HashMap<HostId, NodeIndex>,
    gpus: HashMap<(HostId, u64), NodeIndex>,
    pending_nvl: Vec<(NodeIndex, HostId, u64, f64)>,
    gdr: bool,
    /// NCCL said it uses its Socket transport (`Using network Socket`, `via NET/Socket`).
    socket: bool,
    log: &'a NcclLog,
}

/// The topology a `=== System` dump describes (`None` without a dump).
pub fn topology(log: &NcclLog, origin: Option<String>) -> Option<Topology> {
    let dump = log.system.as_ref()?;
    let mut b = Builder {
        t: Topology::new(SourceInfo {
            kind: topo_model::SourceKind::NcclLog,
            origin,
            ..Default::default()
        }),
        hosts: HashMap::new(),
        cpus: HashMap::new(),
        nvs: HashMap::new(),
        gpus: HashMap::new(),
        pending_nvl: vec![],
        gdr: log.connections.iter().any(|c| c.gdr),
        socket: log.connections.iter().any(|c| c.transport.is_socket())
            || log
                .notable
                .iter()
                .any(|e| e.text.contains("Using network Socket")),
        log,
    };
    let mut stack: Vec<(usize, Option<NodeIndex>)> = vec![];
    for line in &dump.nodes {
        // NCCL prints a CPU's `+` children at the CPU's own column: a `+` line counts one
        // column deeper than where it starts.
        let indent = line.indent + usize::from(line.link.is_some());
        while stack.last().is_some_and(|&(i, _)| i >= indent) {
            stack.pop();
        }
        let parent = stack.last().and_then(|&(_, p)| p);
        let idx = b.add(line, parent);
        stack.push((indent, idx));
    }
    b.resolve_nvlinks();
    b.t.connect_cpus();
    b.t.warn(format!(
        "rebuilt from NCCL's `=== System` dump (line {}): GPU models, PCIe generations and NVML indices are not in it; GPU dev numbers are ranks",
        dump.header.line
    ));
    if dump.overflow {
        b.t.warn(format!(
            "the `=== System` block has more than {MAX_DUMP_LINES} device lines: only the first {MAX_DUMP_LINES} are modelled"
        ));
    } else if !dump.complete {
        b.t.warn("the `=== System` block is cut short: devices after the cut are missing");
    }
    Some(b.t)
}

impl Builder<'_> {
    fn host(&mut self, sys: u64) -> HostId {
        let next = self.hosts.len() as HostId;
        let h = *self.hosts.entry(sys).or_insert(next);
        if let Some(host) = self.t.hosts.get_mut(h as usize)
            && host.name.is_none()
        {
            host.name = self.log.hosts.get(h as usize).cloned();
        }
        h
    }

    fn add(&mut self, l: &SysLine, parent: Option<NodeIndex>) -> Option<NodeIndex> {
        let host = self.host(l.sys);
        let (ty, bwv) = l.link.clone().unwrap_or_default();
        match (l.kind.as_str(), parent) {
            ("CPU", None) => Some(self.cpu(host, l)),
            // `+ SYS[..] - CPU/..` under a CPU: connect_cpus makes those links.
            ("CPU", Some(_)) => None,
            ("NVS", Some(p)) => {
                let s = self.nvswitch(host);
                let lanes = self.lanes(p, bwv);
                self.t.add_nvlink(p, s, lanes);
                None
            }
            ("GPU", Some(p)) if ty == "NVL" => {
                self.pending_nvl.push((p, host, l.id, bwv));
                None
            }
            (_, Some(p)) if ty == "PCI" => Some(self.pci_child(p, l, bwv)),
            ("NET", Some(p)) => Some(self.net(p, l)),
            _ => None,
        }
    }

    fn cpu(&mut self, host: HostId, l: &SysLine) -> NodeIndex {
        if let Some(&c) = self.cpus.get(&(host, l.id)) {
            return c;
        }
        let c = self
            .t
            .add_node(host, None, NodeKind::Cpu(cpu_of(&l.extra, l.id)));
        self.cpus.insert((host, l.id), c);
        c
    }

    fn nvswitch(&mut self, host: HostId) -> NodeIndex {
        if let Some(&s) = self.nvs.get(&host) {
            return s;
        }
        let s = self
            .t
            .add_node(host, None, NodeKind::NvSwitch(NvSwitch::default()));
        self.nvs.insert(host, s);
        s
    }

    /// NVLink lanes for `gbps` from GPU `gpu`, setting the GPU's sm when the rate tells it.
    fn lanes(&mut self, gpu: NodeIndex, gbps: f64) -> u32 {
        let Some((sm, lanes)) = sm_for_nvlink(gbps) else {
            return 1;
        };
        if let NodeKind::Gpu(g) = &mut self.t.node_mut(gpu).kind
            && g.sm.is_none()
        {
            g.sm = Some(sm);
        }
        lanes
    }

    fn pci_child(&mut self, parent: NodeIndex, l: &SysLine, gbps: f64) -> NodeIndex {
        let host = self.t.node(parent).host;
        let busid = BusId(l.id);
        let pcie = pcie_for(gbps);
        let kind = match l.kind.as_str() {
            "GPU" => {
                let mut g = Gpu::new(busid, self.gpus.len() as i32);
                g.rank = l.extra.trim().parse().ok();
                g.pcie = pcie;
                g.gdr = Some(self.gdr);
                g.nvlink = NvlinkInfo::Known;
                NodeKind::gpu(g)
            }
            "NIC" => NodeKind::Nic(Nic {
                busid: Some(busid),
                class: class::IB,
                pcie,
                ..Default::default()
            }),
            _ => {
                let (vendor, device) = pci_ids(&l.extra);
                NodeKind::PciSwitch(PciSwitch {
                    busid,
                    class: class::BRIDGE,
                    vendor,
                    device,
                    pcie,
                    ..Default::default()
                })
            }
        };
        let idx = self.t.add_node(host, Some(parent), kind);
        let link = Link {
            kind: LinkKind::Pci,
            bw: gbps,
            lanes: 0,
        };
        self.t.connect_both(parent, idx, link);
        if l.kind == "GPU" {
            self.gpus.insert((host, l.id), idx);
        }
        idx
    }

    /// `NET/0-c (coll/guid/port/bw)`.
    fn net(&mut self, parent: NodeIndex, l: &SysLine) -> NodeIndex {
        let f: Vec<&str> = l.extra.split('/').collect();
        let gbps: f64 = f.get(3).and_then(|x| x.parse().ok()).unwrap_or(0.0);
        self.t.add_child(
            parent,
            NodeKind::Net(Net {
                name: format!("net{}", l.id),
                dev: l.id as i32,
                speed_mbps: Some((gbps * 8000.0).round() as u64),
                port: f.get(2).and_then(|x| x.parse().ok()).unwrap_or(1),
                guid: f.get(1).and_then(|x| u64::from_str_radix(x, 16).ok()),
                gdr: self.gdr,
                // A dump alone does not say; the NET connection lines do.
                gdr_unstated: !self.log.connections.iter().any(|c| c.transport.is_net()),
                socket: self.socket,
                coll: f.first() == Some(&"1"),
                ..Default::default()
            }),
        )
    }

    fn resolve_nvlinks(&mut self) {
        for (from, host, id, gbps) in std::mem::take(&mut self.pending_nvl) {
            if let Some(&to) = self.gpus.get(&(host, id)) {
                let lanes = self.lanes(from, gbps);
                self.t.add_nvlink(from, to, lanes);
            }
        }
    }
}

/// What a log without a `=== System` block implies: per host, the GPUs its ranks used (bus
/// ids from the Init lines, and from the P2P and SHM lines of NCCL 2.5 to 2.17 for a rank
/// whose Init line the excerpt lacks), NVLink unknown. GPUs whose NVML index the log does not
/// print (Init lines before `nvmlDev` was added) are numbered in bus-id order, as NVML numbers
/// them, and a warning says so.
pub fn implied_topology(log: &NcclLog, origin: Option<String>) -> Option<Topology> {
    let placed = implied_gpus(log);
    if placed.is_empty() {
        return None;
    }
    let mut t = Topology::new(SourceInfo {
        kind: topo_model::SourceKind::NcclLog,
        origin,
        ..Default::default()
    });
    let mut cpus: HashMap<String, NodeIndex> = HashMap::new();
    let mut unnumbered: Vec<NodeIndex> = vec![];
    for p in placed {
        let next = cpus.len() as HostId;
        let cpu = *cpus.entry(p.host.clone()).or_insert_with(|| {
            let c = t.add_node(
                next,
                None,
                NodeKind::Cpu(Cpu {
                    numa: -1,
                    ..Default::default()
                }),
            );
            t.hosts[next as usize].name = Some(p.host.clone());
            c
        });
        let busid = BusId(p.busid);
        if t.find(t.node(cpu).host, busid).is_some() {
            continue;
        }
        let mut g = Gpu::new(busid, p.nvml_dev.unwrap_or(-1));
        g.rank = Some(p.rank as i32);
        g.nvlink = NvlinkInfo::Unknown("an NCCL log without a `=== System` block".into());
        let n = t.add_child(cpu, NodeKind::gpu(g));
        if p.nvml_dev.is_none() {
            unnumbered.push(n);
        }
    }
    number_in_bus_order(&mut t, &unnumbered);
    t.connect_cpus();
    t.warn("the log has no `=== System` block (NCCL_DEBUG_SUBSYS=GRAPH): only the GPUs its ranks used are known, not how they connect");
    if !unnumbered.is_empty() {
        t.warn(format!(
            "the log gives no NVML index for {} GPU(s) (its Init lines print `cudaDev N busId X` without `nvmlDev`): numbered in bus-id order among the GPUs the log names, as NVML numbers a host's GPUs",
            unnumbered.len()
        ));
    }
    Some(t)
}

/// A GPU a log's lines place on a host.
struct Placed {
    host: String,
    busid: u64,
    rank: u32,
    nvml_dev: Option<i32>,
}

/// The GPUs of the ranks whose Init lines give a bus id, then those of ranks an intra-host
/// connection line names by bus id (NCCL 2.5 to 2.17 print `0[1b000] -> 1[3d000] via P2P/IPC`
/// or `... via direct shared memory`): such a rank is on its peer's host. A log with no Init
/// bus id at all implies no topology (its ranks' hosts are unknown).
fn implied_gpus(log: &NcclLog) -> Vec<Placed> {
    let mut out: Vec<Placed> = log
        .ranks
        .values()
        .filter_map(|r| {
            Some(Placed {
                host: r.host.clone().unwrap_or_default(),
                busid: r.busid?,
                rank: r.rank,
                nvml_dev: r.nvml_dev,
            })
        })
        .collect();
    if out.is_empty() {
        return out;
    }
    let mut host_of: HashMap<u32, String> = out.iter().map(|p| (p.rank, p.host.clone())).collect();
    for c in &log.connections {
        if !(c.transport.is_p2p() || c.transport.is_shm()) {
            continue;
        }
        for (rank, busid, peer) in [(c.from, c.from_busid, c.to), (c.to, c.to_busid, c.from)] {
            let Some(busid) = busid else { continue };
            if host_of.contains_key(&rank) {
                continue;
            }
            let Some(host) = host_of.get(&peer).cloned() else {
                continue;
            };
            host_of.insert(rank, host.clone());
            out.push(Placed {
                host,
                busid,
                rank,
                nvml_dev: log.ranks.get(&rank).and_then(|r| r.nvml_dev),
            });
        }
    }
    out
}

/// Numbers `gpus` (NVML index unknown) per host in bus-id order, with the numbers no other
/// GPU of the host holds, so no view names a GPU "-1".
fn number_in_bus_order(t: &mut Topology, gpus: &[NodeIndex]) {
    let mut by_host: std::collections::BTreeMap<HostId, Vec<NodeIndex>> = Default::default();
    for &n in gpus {
        by_host.entry(t.node(n).host).or_default().push(n);
    }
    // One pass over every GPU, not one per host: a log of thousands of hosts stays linear.
    let mut used: HashMap<HostId, std::collections::HashSet<i32>> = HashMap::new();
    for n in t.gpus() {
        if let Some(g) = t.gpu(n).filter(|g| g.dev >= 0) {
            used.entry(t.node(n).host).or_default().insert(g.dev);
        }
    }
    for (host, mut v) in by_host {
        v.sort_by_key(|&n| t.gpu(n).map(|g| g.busid));
        let used = used.remove(&host).unwrap_or_default();
        let mut free = (0..).filter(|d| !used.contains(d));
        for n in v {
            let dev = free.next().unwrap_or(-1);
            if let NodeKind::Gpu(g) = &mut t.node_mut(n).kind {
                g.dev = dev;
            }
        }
    }
}

#[cfg(test)]
mod cpu_tests {
    use super::*;

    #[test]
    fn the_dump_cpu_model_is_nccls_class_code_not_a_cpuid_model() {
        let c = cpu_of("1/1/2", 0);
        assert_eq!(c.vendor.as_deref(), Some("GenuineIntel"));
        assert_eq!((c.family, c.model), (Some(6), Some(0x55)));
        assert!(c.model_name.unwrap().contains("SKL"));
        assert_eq!(
            topo_model::bw::intel_class(c.model),
            topo_model::bw::IntelClass::Skl
        );
        let amd = cpu_of("1/2/-1", 1);
        assert_eq!((amd.model, amd.model_name), (None, None));
        assert_eq!(cpu_of("1/1/4", 0).model, Some(0xcf));
    }
}
