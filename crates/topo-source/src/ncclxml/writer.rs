//! Writer for NCCL topology XML: what `NCCL_TOPO_FILE` accepts, laid out the way NCCL's
//! `NCCL_TOPO_DUMP_FILE` writer lays it out (`ncclTopoDumpXmlToFile`, `src/graph/xml.cc`, all
//! versions): no prolog, two spaces of indentation per level, attributes in the order NCCL
//! creates them, elements without children self-closing, ids as `0x` hex.
//!
//! The model is the hardware view; the file is NCCL's. So PCI functions NCCL would trim
//! (`PciDevice`) are left out (their children, if any, move up one level so no GPU or NIC is
//! lost), NVSwitch chips appear only as `<nvlink>` targets, and a GPU the source knew by PCI
//! class only is written as a bare `<pci>`: inventing `dev`/`sm` there would stop NCCL from
//! filling the real values at run time (it never overwrites an attribute present in the file).
//!
//! Host identity: every `<cpu>` carries `host_hash` when the model knows one; a multi-host
//! topology gets distinct made-up hashes where it does not, so the hosts stay apart when the
//! file is read back. (NCCL 2.27+ overwrites `host_hash` with the local host's when it loads a
//! file, so a multi-host file is for tools, not for NCCL_TOPO_FILE.)

use anyhow::Result;
use petgraph::Direction;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use std::collections::{HashMap, HashSet};
use topo_model::{HostId, LinkKind, Net, NodeKind, NvlinkInfo, PcieLink, Topology, class};

/// What NVML reports for an NVSwitch a VM or container cannot see; NCCL writes it as-is.
const HIDDEN_NVSWITCH: &str = "fffffff:ff:ff.0";
const TCLASS_NVSWITCH: &str = "0x068000";
const TCLASS_CPU: &str = "0x068001";
/// Bounds the walk down the PCI tree should a source ever produce a parent cycle.
const MAX_DEPTH: usize = 64;

struct El {
    name: &'static str,
    attrs: Vec<(&'static str, String)>,
    children: Vec<El>,
}

impl El {
    fn new(name: &'static str) -> El {
        El {
            name,
            attrs: Vec::new(),
            children: Vec::new(),
        }
    }
    fn attr(mut self, key: &'static str, value: impl ToString) -> El {
        self.attrs.push((key, value.to_string()));
        self
    }
    fn opt(self, key: &'static str, value: Option<impl ToString>) -> El {
        match value {
            Some(v) => self.attr(key, v),
            None => self,
        }
    }
}

/// Writes the topology as NCCL topology XML.
pub fn write(topo: &Topology) -> Result<String> {
    let w = Writer {
        topo,
        hashes: host_hashes(topo),
    };
    let mut system = El::new("system").attr("version", 1);
    // Each host's CPUs and parentless devices, bucketed in one pass in graph order: scanning
    // the graph per host made `--nodes N` quadratic (57 s for 2,048 nodes).
    let n = topo.host_count();
    let (mut cpus, mut roots) = (vec![Vec::new(); n], vec![Vec::new(); n]);
    for v in topo.graph.node_indices() {
        let node = topo.node(v);
        let Some((c, r)) = cpus
            .get_mut(node.host as usize)
            .zip(roots.get_mut(node.host as usize))
        else {
            continue;
        };
        match node.kind {
            NodeKind::Cpu(_) => c.push(v),
            NodeKind::NvSwitch(_) => {}
            _ if node.parent.is_none() => r.push(v),
            _ => {}
        }
    }
    for (host, (cpus, roots)) in cpus.into_iter().zip(roots).enumerate() {
        for cpu in cpus {
            system.children.push(w.cpu(cpu));
        }
        if let Some(orphans) = w.orphans(host as HostId, &roots) {
            system.children.push(orphans);
        }
    }
    let mut out = String::new();
    render(&system, 0, &mut out);
    Ok(out)
}

/// The `host_hash` each host is written with (`None`: single host without one).
fn host_hashes(topo: &Topology) -> Vec<Option<u64>> {
    let n = topo.host_count();
    // One pass over the CPUs: looking them up per host made `--nodes N` cubic in N.
    let mut from_cpus: Vec<Option<u64>> = vec![None; n];
    for c in topo.cpus() {
        let h = topo.node(c).host as usize;
        if let (Some(slot @ None), Some(x)) = (
            from_cpus.get_mut(h),
            topo.cpu(c).and_then(|cpu| cpu.host_hash),
        ) {
            *slot = Some(x);
        }
    }
    let known: Vec<Option<u64>> = (0..n)
        .map(|h| topo.hosts.get(h).and_then(|x| x.host_hash).or(from_cpus[h]))
        .collect();
    if n <= 1 {
        return vec![known.first().copied().flatten()];
    }
    let mut out: Vec<Option<u64>> = Vec::with_capacity(n);
    let mut taken: HashSet<u64> = HashSet::new();
    // How many hosts still to come know each hash: a made-up hash must not take one of them.
    let mut later: HashMap<u64, usize> = HashMap::new();
    for x in known.iter().flatten() {
        *later.entry(*x).or_default() += 1;
    }
    for (h, k) in known.iter().enumerate() {
        if let Some(x) = k
            && let Some(c) = later.get_mut(x)
        {
            *c -= 1;
        }
        let mut v = k.filter(|x| !taken.contains(x));
        if v.is_none() {
            // "topo" in ASCII in the high bytes, the host index below: readable and distinct.
            let mut x = 0x746f_706f_0000_0000u64 | h as u64;
            while taken.contains(&x) || later.get(&x).is_some_and(|&c| c > 0) {
                x = x.wrapping_add(0x1_0000);
            }
            v = Some(x);
        }
        if let Some(x) = v {
            taken.insert(x);
        }
        out.push(v);
    }
    out
}

struct Writer<'a> {
    topo: &'a Topology,
    hashes: Vec<Option<u64>>,
}

impl Writer<'_> {
    fn hash_of(&self, host: HostId) -> Option<String> {
        self.hashes
            .get(host as usize)
            .copied()
            .flatten()
            .map(|h| format!("{h:#x}"))
    }

    fn cpu(&self, n: NodeIndex) -> El {
        let node = self.topo.node(n);
        // host_hash first: NCCL's detection creates a <cpu> with host_hash, then numaid
        // (ncclTopoGetXmlFromSys, src/graph/xml.cc, 2.21+), as every real dump shows.
        let mut el = El::new("cpu").opt("host_hash", self.hash_of(node.host));
        if let Some(c) = self.topo.cpu(n) {
            el = el
                .attr("numaid", c.numa)
                .opt("affinity", c.affinity.as_ref())
                .opt("arch", c.arch.as_ref())
                .opt("vendor", c.vendor.as_ref())
                .opt("familyid", c.family)
                .opt("modelid", c.model);
        }
        el.children = self.children(n, 0);
        el
    }

    /// Devices with no place in a PCI tree (a source that did not know their CPU) go under an
    /// unknown-NUMA `<cpu>`, as NCCL attaches a GPU it cannot place.
    /// `roots`: the host's parentless nodes other than CPUs and NVSwitch chips, in graph order.
    fn orphans(&self, host: HostId, roots: &[NodeIndex]) -> Option<El> {
        let t = self.topo;
        let mut el = El::new("cpu")
            .opt("host_hash", self.hash_of(host))
            .attr("numaid", -1);
        for &n in roots {
            match &t.node(n).kind {
                NodeKind::Cpu(_) | NodeKind::NvSwitch(_) => {}
                NodeKind::Net(net) => {
                    let mut nic = El::new("nic");
                    nic.children.push(self.net(net));
                    el.children.push(nic);
                }
                _ => el.children.extend(self.device(n, 0)),
            }
        }
        (!el.children.is_empty()).then_some(el)
    }

    fn children(&self, n: NodeIndex, depth: usize) -> Vec<El> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        self.topo
            .children(n)
            .into_iter()
            .flat_map(|c| self.device(c, depth + 1))
            .collect()
    }

    /// The element(s) for one device node: usually one, none for nodes NCCL has no element
    /// for, the hoisted children of a trimmed PCI function.
    fn device(&self, n: NodeIndex, depth: usize) -> Vec<El> {
        let t = self.topo;
        match &t.node(n).kind {
            NodeKind::PciSwitch(p) => {
                let mut el = pci(
                    &p.busid.to_string(),
                    p.class,
                    [p.vendor, p.device, p.subsystem_vendor, p.subsystem_device],
                    &p.pcie,
                );
                el.children = self.children(n, depth);
                el.children.extend(self.pcilinks(n));
                vec![el]
            }
            NodeKind::Gpu(g) => {
                let mut el = pci(
                    &g.busid.to_string(),
                    g.class,
                    [g.vendor, g.device, g.subsystem_vendor, g.subsystem_device],
                    &g.pcie,
                );
                let skeleton = class::is_gpu(g.class)
                    && matches!(g.nvlink, NvlinkInfo::Unknown(_))
                    && g.sm.is_none()
                    && g.rank.is_none()
                    && g.gdr.is_none();
                if !skeleton {
                    let mut gpu = El::new("gpu")
                        .opt("dev", (g.dev >= 0).then_some(g.dev))
                        .opt("sm", g.sm)
                        .opt("rank", g.rank)
                        .opt("gdr", g.gdr.map(u8::from));
                    gpu.children = self.nvlinks(n);
                    if let Some(c) = &g.c2c {
                        gpu.children
                            .push(El::new("c2c").attr("bw", c.bw_mbps).attr("count", c.count));
                    }
                    el.children.push(gpu);
                }
                el.children.extend(self.children(n, depth));
                vec![el]
            }
            NodeKind::Nic(nic) => {
                let nets: Vec<El> = t
                    .children(n)
                    .into_iter()
                    .filter_map(|c| t.net(c))
                    .filter(|net| !net.assumed)
                    .map(|net| self.net(net))
                    .collect();
                let mut nic_el = El::new("nic");
                nic_el.children = nets;
                match nic.busid {
                    Some(b) => {
                        let mut el = pci(
                            &b.to_string(),
                            nic.class,
                            [
                                nic.vendor,
                                nic.device,
                                nic.subsystem_vendor,
                                nic.subsystem_device,
                            ],
                            &nic.pcie,
                        );
                        // A portless NIC is written bare, as in vendor skeleton files, when its
                        // class says "network"; otherwise an empty <nic/> keeps it a NIC.
                        if !nic_el.children.is_empty() || !class::is_network(nic.class) {
                            el.children.push(nic_el);
                        }
                        let others = t.children(n).into_iter().filter(|&c| t.net(c).is_none());
                        el.children
                            .extend(others.flat_map(|c| self.device(c, depth + 1)));
                        vec![el]
                    }
                    None if nic_el.children.is_empty() => Vec::new(),
                    None => vec![nic_el],
                }
            }
            NodeKind::PciDevice(_) => self.children(n, depth),
            NodeKind::Cpu(_) | NodeKind::NvSwitch(_) | NodeKind::Net(_) => Vec::new(),
        }
    }

    fn net(&self, net: &Net) -> El {
        El::new("net")
            .attr("name", &net.name)
            .attr("dev", net.dev)
            .opt("speed", net.speed_mbps)
            .attr("port", net.port)
            .attr("latency", latency(net.latency))
            .opt("guid", net.guid.map(|g| format!("{g:#x}")))
            .opt("maxconn", net.maxconn)
            // An unstated gdr stays unstated: written as 0, NCCL would no longer ask its
            // plugin and would run without GPUDirect RDMA.
            .opt("gdr", (!net.gdr_unstated).then_some(u8::from(net.gdr)))
            .opt("coll", net.coll.then_some(1))
    }

    /// A GPU's `<nvlink>` entries in the order they were declared.
    fn nvlinks(&self, gpu: NodeIndex) -> Vec<El> {
        let t = self.topo;
        let mut edges: Vec<_> = t
            .graph
            .edges_directed(gpu, Direction::Outgoing)
            .filter(|e| e.weight().kind == LinkKind::NvLink && e.weight().lanes > 0)
            .collect();
        edges.sort_by_key(|e| e.id());
        edges
            .into_iter()
            .filter_map(|e| {
                let count = e.weight().lanes;
                let (target, tclass) = match &t.node(e.target()).kind {
                    NodeKind::NvSwitch(s) => (
                        Some(
                            s.busid
                                .map(|b| b.to_string())
                                .unwrap_or_else(|| HIDDEN_NVSWITCH.to_string()),
                        ),
                        TCLASS_NVSWITCH.to_string(),
                    ),
                    // NCCL tells a GPU peer by a tclass starting with 0x03.
                    NodeKind::Gpu(peer) => {
                        let c = if class::is_gpu(peer.class) {
                            peer.class
                        } else {
                            0x030200
                        };
                        (Some(peer.busid.to_string()), format!("{c:#08x}"))
                    }
                    // NCCL connects a CPU-class entry to the GPU's own CPU whatever the target.
                    NodeKind::Cpu(_) => (None, TCLASS_CPU.to_string()),
                    _ => return None,
                };
                Some(
                    El::new("nvlink")
                        .opt("target", target)
                        .attr("count", count)
                        .attr("tclass", tclass),
                )
            })
            .collect()
    }

    fn pcilinks(&self, sw: NodeIndex) -> Vec<El> {
        let t = self.topo;
        let mut edges: Vec<_> = t
            .graph
            .edges_directed(sw, Direction::Outgoing)
            .filter(|e| {
                e.weight().kind == LinkKind::Loc
                    && matches!(t.node(e.target()).kind, NodeKind::PciSwitch(_))
            })
            .collect();
        edges.sort_by_key(|e| e.id());
        edges
            .into_iter()
            .filter_map(|e| t.node(e.target()).busid())
            .map(|b| El::new("pcilink").attr("target", b))
            .collect()
    }
}

fn pci(busid: &str, class: u32, ids: [Option<u16>; 4], pcie: &PcieLink) -> El {
    let hex4 = |v: Option<u16>| v.map(|x| format!("{x:#06x}"));
    El::new("pci")
        .attr("busid", busid)
        .attr("class", format!("{class:#08x}"))
        .opt("vendor", hex4(ids[0]))
        .opt("device", hex4(ids[1]))
        .opt("subsystem_vendor", hex4(ids[2]))
        .opt("subsystem_device", hex4(ids[3]))
        // NCCL writes these empty when unknown, and needs them present to load the file.
        .attr("link_speed", pcie.speed.as_deref().unwrap_or(""))
        .attr(
            "link_width",
            pcie.width.map(|w| w.to_string()).unwrap_or_default(),
        )
}

/// NCCL 2.24+ writes `latency` as an integer; a fractional value keeps its fraction.
fn latency(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn escape(v: &str) -> String {
    if !v.contains(['&', '<', '>', '"']) {
        return v.to_string();
    }
    v.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn render(el: &El, depth: usize, out: &mut String) {
    for _ in 0..depth {
        out.push_str("  ");
    }
    out.push('<');
    out.push_str(el.name);
    for (k, v) in &el.attrs {
        out.push(' ');
        out.push_str(k);
        out.push_str("=\"");
        out.push_str(&escape(v));
        out.push('"');
    }
    if el.children.is_empty() {
        out.push_str("/>\n");
        return;
    }
    out.push_str(">\n");
    for c in &el.children {
        render(c, depth + 1, out);
    }
    for _ in 0..depth {
        out.push_str("  ");
    }
    out.push_str("</");
    out.push_str(el.name);
    out.push_str(">\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::testing::hgx;

    #[test]
    fn hgx_board_writes_like_an_nccl_dump() {
        let t = hgx(2, 90);
        let x = write(&t).unwrap();
        let expected = r#"<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:11:00.0" class="0x030200" vendor="0x10de" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" gdr="1">
          <nvlink target="0000:05:00.0" count="5" tclass="0x068000"/>
          <nvlink target="0000:06:00.0" count="5" tclass="0x068000"/>
          <nvlink target="0000:07:00.0" count="4" tclass="0x068000"/>
          <nvlink target="0000:08:00.0" count="4" tclass="0x068000"/>
        </gpu>
      </pci>
      <pci busid="0000:12:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16">
        <nic>
          <net name="mlx5_0" dev="0" speed="400000" port="1" latency="0" gdr="1"/>
        </nic>
      </pci>
    </pci>
"#;
        assert!(x.starts_with(expected), "{x}");
        assert!(x.ends_with("  </cpu>\n</system>\n"));
    }

    #[test]
    fn replicated_hosts_get_distinct_hashes() {
        let t = hgx(1, 90).replicate(3);
        let x = write(&t).unwrap();
        let hashes: Vec<&str> = x
            .lines()
            .filter_map(|l| l.split("host_hash=\"").nth(1))
            .collect();
        assert_eq!(hashes.len(), 3);
        assert_ne!(hashes[0], hashes[1]);
        assert_ne!(hashes[1], hashes[2]);
    }

    #[test]
    fn values_are_escaped_and_numbers_formatted() {
        assert_eq!(escape("a\"<b>&"), "a&quot;&lt;b&gt;&amp;");
        assert_eq!(latency(0.0), "0");
        assert_eq!(latency(1.5), "1.5");
        let el = El::new("a").attr("x", 1);
        let mut out = String::new();
        render(&el, 2, &mut out);
        assert_eq!(out, "    <a x=\"1\"/>\n");
    }
}
