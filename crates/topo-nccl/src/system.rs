//! NCCL's view of a topology (`ncclTopoSystem`, `src/graph/topo.cc`): GPU, PCI, NVS, CPU,
//! NIC and NET nodes with directed, bandwidth-carrying links, built from the hardware model
//! with one NCCL version's constants.
//!
//! Differences from the hardware model, all mirroring NCCL ≤2.29 (the GPU-centric graph;
//! 2.30's DEV layer changes hop counts, which the search adds itself (search.rs `dev_links`),
//! and the paths maxBw reads (search.rs `max_path_bw`), not path types or bandwidths for one
//! GPU per device): every NVSwitch chip of a host is merged into one NVS node and lane bandwidths add
//! up; PCI functions that are neither switches, GPUs nor NICs are dropped; two-level Broadcom
//! PEX switches are flattened; links are sorted by descending bandwidth.

use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use serde::Serialize;
use std::collections::BTreeMap;
use topo_model::fast::HashMap;
use topo_model::{BwConstants, HostId, LinkKind, NodeKind, P2pCaps, Topology};

use crate::vnic::{Fusion, Place};

type Places = std::collections::HashMap<NodeIndex, Place>;

/// The network devices a net plugin exports to NCCL: the ports `keep` accepts (NCCL_IB_HCA,
/// the socket interface rules), joined up to `merge` (NIC fusion, `crate::vnic`).
pub struct NetPlugin<'a> {
    pub keep: &'a dyn Fn(&topo_model::Net) -> bool,
    pub merge: Fusion,
}

impl<'a> NetPlugin<'a> {
    pub fn new(keep: &'a dyn Fn(&topo_model::Net) -> bool, merge: Fusion) -> NetPlugin<'a> {
        NetPlugin { keep, merge }
    }
}

impl NetPlugin<'static> {
    /// No network device at all (a single-node communicator trimmed of its NETs).
    pub const NONE: NetPlugin<'static> = NetPlugin {
        keep: &|_| false,
        merge: Fusion::Off,
    };
}

mod copies;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum NodeType {
    Gpu,
    Pci,
    Nvs,
    Cpu,
    Nic,
    Net,
}

impl NodeType {
    pub fn name(self) -> &'static str {
        match self {
            NodeType::Gpu => "GPU",
            NodeType::Pci => "PCI",
            NodeType::Nvs => "NVS",
            NodeType::Cpu => "CPU",
            NodeType::Nic => "NIC",
            NodeType::Net => "NET",
        }
    }
}

/// Link types (`LINK_*`); their path-type counterparts are used as hop types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum LinkType {
    Loc,
    Nvl,
    C2c,
    Pci,
    Sys,
    Net,
}

impl LinkType {
    pub fn name(self) -> &'static str {
        match self {
            LinkType::Loc => "LOC",
            LinkType::Nvl => "NVL",
            LinkType::C2c => "C2C",
            LinkType::Pci => "PCI",
            LinkType::Sys => "SYS",
            LinkType::Net => "NET",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SysLink {
    /// Index of the remote node in [`System::nodes`].
    pub to: usize,
    pub kind: LinkType,
    pub bw: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct GpuAttrs {
    pub dev: i32,
    /// Rank in the communicator: GPUs in (host, NVML index) order.
    pub rank: usize,
    pub sm: u32,
    pub gdr: bool,
    /// Why the driver refuses peer access to this GPU (`Gpu::peer_access`), if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_p2p: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CpuAttrs {
    pub numa: i32,
    pub arch: topo_model::CpuArch,
    pub vendor: topo_model::CpuVendor,
    pub model: Option<u32>,
}

/// Where a port's GPUDirect RDMA answer comes from. Unknown stays unknown in what the plan
/// says, whatever it had to price.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GdrFact {
    /// The source states it (`gdr` in the XML, a profile's `gdr`, a live scan, `--gdr`).
    #[default]
    Stated,
    /// The source lists the port without `gdr`: priced as NCCL's XML reader reads a missing
    /// attribute (0, topo.cc `ncclTopoAddNet`, NCCL 2.28.9-1).
    Unstated,
    /// A port topo assumed (a skeleton file's InfiniBand controller): priced as NCCL's IB
    /// plugin answers at run time on a GPU image (GPUDirect RDMA through nvidia-peermem or
    /// DMA-BUF, `ncclIbGdrSupport`/`ncclIbDmaBufSupport`, net_ib.cc, NCCL 2.28.9-1).
    Assumed,
}

#[derive(Clone, Debug, Serialize)]
pub struct NetAttrs {
    pub name: String,
    pub dev: i32,
    pub bw: f64,
    pub gdr: bool,
    /// Whether `gdr` is the source's word or the plan's assumption (`GdrFact`).
    #[serde(skip)]
    pub gdr_fact: GdrFact,
    pub coll: bool,
    pub guid: u64,
    pub port: u32,
    pub latency: f64,
    pub maxconn: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct SysNode {
    pub kind: NodeType,
    pub host: HostId,
    /// NCCL's local id: bus id for GPU/PCI/NVS/NIC, NUMA id for CPU, plugin dev for NET.
    pub id: u64,
    /// The hardware-model node this stands for (the first NVSwitch chip for a merged NVS).
    #[serde(skip)]
    pub topo: Option<NodeIndex>,
    pub links: Vec<SysLink>,
    pub gpu: Option<GpuAttrs>,
    pub cpu: Option<CpuAttrs>,
    pub net: Option<NetAttrs>,
}

impl SysNode {
    /// NCCL's printed name, `GPU/0-1b000` (2.21+ form).
    pub fn label(&self) -> String {
        let (sysid, local) = (self.id >> 56, self.id & ((1 << 56) - 1));
        format!(
            "{}/{:x}-{:x}",
            self.kind.name(),
            u64::from(self.host) + sysid,
            local
        )
    }
    pub fn link_to(&self, to: usize) -> Option<&SysLink> {
        self.links.iter().find(|l| l.to == to)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct System {
    pub nodes: Vec<SysNode>,
    /// GPU node indices in rank order.
    pub gpus: Vec<usize>,
    /// NET node indices in (host, dev) order.
    pub nets: Vec<usize>,
    pub cpus: Vec<usize>,
    pub nvs: Vec<usize>,
    pub nhosts: usize,
    /// NVML P2P answers per ordered rank pair, where the source had them.
    pub p2p: BTreeMap<(usize, usize), P2pCaps>,
    /// GPU ranks per host, filled at the end of [`System::build`]; `host_gpus` scanned every
    /// rank per call, which made multi-node what-ifs quadratic in the node count.
    #[serde(skip)]
    host_ranks: Vec<Vec<usize>>,
    /// GPU ranks per host in NCCL's GPU index order (`system->nodes[GPU]`), which is the
    /// order of the fused topology XML, not rank order; see [`nccl_gpu_order`].
    #[serde(skip)]
    index_order: Vec<Vec<usize>>,
}

/// Graph node (by index) -> system node or rank: `NONE` for the nodes NCCL drops.
const NONE: usize = usize::MAX;

impl System {
    pub fn gpu(&self, rank: usize) -> &SysNode {
        &self.nodes[self.gpus[rank]]
    }
    pub fn of_type(&self, t: NodeType) -> &[usize] {
        match t {
            NodeType::Gpu => &self.gpus,
            NodeType::Net => &self.nets,
            NodeType::Cpu => &self.cpus,
            NodeType::Nvs => &self.nvs,
            _ => &[],
        }
    }
    /// GPU ranks of one host, in rank order.
    pub fn host_gpus(&self, host: HostId) -> Vec<usize> {
        self.host_ranks
            .get(host as usize)
            .cloned()
            .unwrap_or_default()
    }
    /// [`System::host_gpus`] without a copy.
    pub(crate) fn ranks_of(&self, host: HostId) -> &[usize] {
        self.host_ranks
            .get(host as usize)
            .map_or(&[], Vec::as_slice)
    }
    /// [`System::host_gpus_indexed`] without a copy.
    pub(crate) fn index_order_of(&self, host: HostId) -> &[usize] {
        self.index_order
            .get(host as usize)
            .map_or(&[], Vec::as_slice)
    }
    /// GPU ranks of one host in NCCL's GPU index order: the order the graph search tries
    /// GPUs in and `ncclTopoGetLocal` lists them in (see [`nccl_gpu_order`]).
    pub fn host_gpus_indexed(&self, host: HostId) -> Vec<usize> {
        self.index_order
            .get(host as usize)
            .cloned()
            .unwrap_or_default()
    }
    /// Orders each host's GPUs as `rank_key` orders their ranks (smaller first). A host split
    /// into several nodes keeps the physical host's GPU index order: NCCL trims the fused
    /// XML of the whole host (`ncclTopoTrimSystem`), it does not fuse each part anew.
    pub fn reorder_index(&mut self, rank_key: impl Fn(usize) -> usize) {
        for order in &mut self.index_order {
            order.sort_by_key(|&r| rank_key(r));
        }
    }
    pub fn min_sm(&self) -> u32 {
        self.gpus
            .iter()
            .filter_map(|&g| self.nodes[g].gpu.as_ref().map(|a| a.sm))
            .min()
            .unwrap_or(0)
    }
    pub fn max_sm(&self) -> u32 {
        self.gpus
            .iter()
            .filter_map(|&g| self.nodes[g].gpu.as_ref().map(|a| a.sm))
            .max()
            .unwrap_or(0)
    }
    pub fn p2p_caps(&self, a: usize, b: usize) -> Option<&P2pCaps> {
        self.p2p.get(&(a, b))
    }
    /// The first CPU node (NCCL uses its arch/vendor for CPU-dependent rules).
    pub fn first_cpu(&self) -> Option<&CpuAttrs> {
        self.cpus.first().and_then(|&c| self.nodes[c].cpu.as_ref())
    }

    /// The first CPU of `host`: what that host's ranks read for their CPU rules, since each
    /// rank's system holds its own host only (`ncclTopoComputeCommCPU`, `ncclTopoCpuType`,
    /// NCCL 2.28.9 src/graph/topo.cc: `cpus->nodes[0]`). Dissimilar hosts can differ.
    ///
    /// CPUs are kept in host order (`cpu_order` sorts them, `compact` keeps the order), so
    /// the lookup is a binary search: it runs once per rank pair, and a scan made 16,384
    /// NVL72 trays take 42 s.
    pub fn host_cpu(&self, host: HostId) -> Option<&CpuAttrs> {
        let i = self.cpus.partition_point(|&c| self.nodes[c].host < host);
        self.cpus
            .get(i)
            .filter(|&&c| self.nodes[c].host == host)
            .and_then(|&c| self.nodes[c].cpu.as_ref())
            .or_else(|| self.first_cpu())
    }

    fn add(&mut self, node: SysNode) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Adds bandwidth to an existing (remote, type) link or creates it; keeps links sorted by
    /// descending bandwidth (`ncclTopoConnectNodes`).
    fn connect(&mut self, from: usize, to: usize, kind: LinkType, bw: f64) {
        let links = &mut self.nodes[from].links;
        if let Some(l) = links.iter_mut().find(|l| l.to == to && l.kind == kind) {
            l.bw += bw;
        } else {
            links.push(SysLink { to, kind, bw });
        }
        links.sort_by(|a, b| b.bw.partial_cmp(&a.bw).unwrap_or(std::cmp::Ordering::Equal));
    }

    /// Builds NCCL's system graph from the hardware model with `c`'s constants, every port a
    /// device of its own.
    pub fn build(topo: &Topology, c: &BwConstants) -> System {
        let plugin = NetPlugin {
            keep: &|_| true,
            merge: Fusion::Off,
        };
        System::build_with(topo, c, &plugin)
    }

    /// [`System::build`] with the network devices the net plugin exports: only the ports
    /// `plugin.keep` accepts (NCCL_IB_HCA), joined as NIC fusion joins them (`crate::vnic`).
    ///
    /// Copies of one machine (`--nodes`) build the first copy's system and repeat it: every
    /// step of the build reads one host at a time, so the copies' systems differ only in
    /// their numbers (issue 28: 16,384 copies of a host were a third of the plan's time).
    pub fn build_with(topo: &Topology, c: &BwConstants, plugin: &NetPlugin) -> System {
        match (topo.copies(), topo.first_copy()) {
            (Some(copies), Some(first)) => {
                System::build_each(&first, c, plugin).repeated(topo, &copies)
            }
            // Copies a fault changed a few of (`--without` on one host): the others are
            // still copies (issue 43: one faulted host of 16,384 built every host's own).
            // A fused host's system ids are its place among the fused hosts, which a copy
            // on its own would not have.
            _ => topo
                .copies_except()
                .filter(|_| topo.system_id.is_empty())
                .and_then(|(copies, changed)| {
                    let build = |t: &Topology| System::build_each(t, c, plugin);
                    System::with_exceptions(topo, (&copies, changed), &build)
                })
                .unwrap_or_else(|| System::build_each(topo, c, plugin)),
        }
    }

    /// [`System::build_with`] host by host, copies or not.
    fn build_each(topo: &Topology, c: &BwConstants, plugin: &NetPlugin) -> System {
        let mut sys = System {
            nodes: vec![],
            gpus: vec![],
            nets: vec![],
            cpus: vec![],
            nvs: vec![],
            nhosts: 1,
            p2p: BTreeMap::new(),
            host_ranks: Vec::new(),
            index_order: Vec::new(),
        };
        let g = &topo.graph;
        // Keys made once: a comparator reading the graph twice per comparison was a tenth of
        // this function at 32,768 GPUs. Keys are unique (the node closes them), so unstable
        // sorting orders as the stable sort did.
        let mut keyed: Vec<(HostId, u8, NodeIndex)> = g
            .node_indices()
            .map(|n| (g[n].host, kind_rank(&g[n].kind), n))
            .collect();
        keyed.sort_unstable();
        let order: Vec<NodeIndex> = keyed.into_iter().map(|(_, _, n)| n).collect();
        let gpu_nodes = topo.gpus();
        // Graph node (by index) -> rank, `NONE` for the nodes that are not GPUs.
        let mut rank_of: Vec<usize> = vec![NONE; topo.graph.node_count()];
        for (r, n) in gpu_nodes.iter().enumerate() {
            rank_of[n.index()] = r;
        }
        let fused = Fused::of(topo);
        let bare_nic = bare_nic_aliases(topo, &fused);
        let places = crate::vnic::places(topo, plugin.merge, plugin.keep);
        let mut map = sys.add_nodes(topo, (plugin.keep, &places), &order, &rank_of, &bare_nic);
        for (&n, rep) in &bare_nic {
            if map[rep.index()] != NONE {
                map[n.index()] = map[rep.index()];
            }
        }
        let mut gpus: Vec<(usize, usize)> = sys
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.gpu.as_ref().map(|a| (a.rank, i)))
            .collect();
        gpus.sort();
        sys.gpus = gpus.into_iter().map(|(_, i)| i).collect();
        // NCCL's NET index order is the fused XML's, which lists every network device of rank
        // 0's trimmed file in document order (later ranks add only their GPUs): the order the
        // source listed the ports in, not the plugin's device numbers (NCCL 2.28.9,
        // src/graph/topo.cc ncclTopoGetSystemFromXml). The search scans NETs in that order.
        sys.nets
            .sort_by_key(|&i| (sys.nodes[i].host, sys.nodes[i].topo, sys.nodes[i].id));
        sys.add_links(topo, c, &fused, (&map, &places), &bare_nic);
        sys.add_p2p(topo, &gpu_nodes);
        sys.flatten_bcm_switches(topo);
        sys.sort_up_links();
        sys.index_orders(topo, &fused, &rank_of);
        sys.cpu_order(&fused);
        sys
    }

    /// One system node per graph node NCCL keeps (one NVSwitch per host, no plain PCI
    /// devices, the NETs `keep_net` accepts); the map from graph node to system node.
    fn add_nodes(
        &mut self,
        topo: &Topology,
        (keep_net, places): (&dyn Fn(&topo_model::Net) -> bool, &Places),
        order: &[NodeIndex],
        rank_of: &[usize],
        bare_nic: &HashMap<NodeIndex, NodeIndex>,
    ) -> Vec<usize> {
        let sys = self;
        let g = &topo.graph;
        let mut map: Vec<usize> = vec![NONE; g.node_count()];
        let mut nvs_of_host: HashMap<HostId, usize> = HashMap::default();
        // A GPU whose file has no `<gpu>` gets its GPUDirect RDMA support from NCCL at run
        // time: the net plugin's answer (`gdrSupport` of the peer info, init.cc, filled into
        // the XML by topo.cc, NCCL 2.28.9-1). On a host whose ports topo assumed, the plan
        // prices that answer as it prices the ports' (`GdrFact::Assumed`).
        let assumed_gdr_hosts: std::collections::HashSet<HostId> = topo
            .nets()
            .into_iter()
            .filter(|&x| {
                topo.net(x)
                    .is_some_and(|y| y.assumed && y.gdr_unstated && y.gdr)
            })
            .map(|x| g[x].host)
            .collect();
        for &n in order {
            if bare_nic.contains_key(&n) {
                continue;
            }
            let node = &g[n];
            let host = node.host;
            sys.nhosts = sys.nhosts.max(host as usize + 1);
            // NCCL_TOPO_ID (src/graph/topo.h): a system fused from several hosts keeps each
            // host's ids apart with the host's system id in the top byte.
            let sysid = topo.system_id.get(&n).map_or(0, |&s| u64::from(s) << 56);
            let base = |kind, id: u64| SysNode {
                kind,
                host,
                id: id | sysid,
                topo: Some(n),
                links: vec![],
                gpu: None,
                cpu: None,
                net: None,
            };
            let idx = match &node.kind {
                NodeKind::Cpu(cpu) => {
                    let mut s = base(NodeType::Cpu, cpu.numa.max(0) as u64);
                    s.cpu = Some(CpuAttrs {
                        numa: cpu.numa,
                        arch: cpu.arch(),
                        vendor: cpu.vendor_kind(),
                        model: cpu.model,
                    });
                    let i = sys.add(s);
                    sys.cpus.push(i);
                    i
                }
                NodeKind::PciSwitch(p) => sys.add(base(NodeType::Pci, p.busid.0)),
                NodeKind::Gpu(gpu) => {
                    let mut s = base(NodeType::Gpu, gpu.busid.0);
                    s.gpu = Some(GpuAttrs {
                        dev: gpu.dev,
                        rank: rank_of[n.index()],
                        sm: gpu.sm.unwrap_or(0),
                        gdr: gpu.gdr.unwrap_or_else(|| assumed_gdr_hosts.contains(&host)),
                        no_p2p: {
                            let a = gpu.peer_access();
                            (!a.allowed).then_some(a.why)
                        },
                    });
                    sys.add(s)
                }
                NodeKind::NvSwitch(_) => {
                    if let Some(&i) = nvs_of_host.get(&host) {
                        map[n.index()] = i;
                        continue;
                    }
                    let i = sys.add(base(NodeType::Nvs, 0));
                    nvs_of_host.insert(host, i);
                    sys.nvs.push(i);
                    i
                }
                NodeKind::Nic(nic) => sys.add(base(NodeType::Nic, nic_id(nic, n))),
                NodeKind::Net(net) if !keep_net(net) => continue,
                NodeKind::Net(_) if places.get(&n) == Some(&Place::Member) => continue,
                NodeKind::Net(net) => {
                    let fused = match places.get(&n) {
                        Some(Place::Lead(f)) => Some(f),
                        _ => None,
                    };
                    let dev = fused.map_or(net.dev, |f| f.dev);
                    let mut s = base(NodeType::Net, dev.max(0) as u64);
                    s.net = Some(NetAttrs {
                        name: fused.map_or_else(|| net.name.clone(), |f| f.name.clone()),
                        dev,
                        bw: fused.map_or_else(|| net.bw(), |f| f.bw),
                        gdr: net.gdr,
                        gdr_fact: match (net.gdr_unstated, net.assumed) {
                            (false, _) => GdrFact::Stated,
                            (true, false) => GdrFact::Unstated,
                            (true, true) => GdrFact::Assumed,
                        },
                        coll: net.coll,
                        guid: net_guid(net, host),
                        port: net.port,
                        latency: net.latency,
                        maxconn: net.maxconn.unwrap_or(64),
                    });
                    let i = sys.add(s);
                    sys.nets.push(i);
                    i
                }
                NodeKind::PciDevice(_) => continue,
            };
            map[n.index()] = idx;
        }

        map
    }

    /// The links, in NCCL's creation order, with NCCL's bandwidth for each kind.
    fn add_links(
        &mut self,
        topo: &Topology,
        c: &BwConstants,
        fused: &Fused,
        (map, places): (&[usize], &Places),
        bare_nic: &HashMap<NodeIndex, NodeIndex>,
    ) {
        let sys = self;
        // A fused device's link to its card carries the ports' summed speed.
        let fused_bw = |n: NodeIndex| match places.get(&n) {
            Some(Place::Lead(f)) => Some(f.bw),
            _ => None,
        };
        for e in creation_order(topo, fused) {
            let (a, b) = (map[e.source().index()], map[e.target().index()]);
            if a == NONE || b == NONE {
                continue;
            }
            // A merged bare NIC keeps only the first one's link to its CPU.
            let merged = |n| bare_nic.contains_key(&n);
            if e.weight().kind == LinkKind::Pci && (merged(e.source()) || merged(e.target())) {
                continue;
            }
            let w = e.weight();
            let (kind, bw) = match w.kind {
                LinkKind::Pci => (LinkType::Pci, w.bw),
                LinkKind::Loc => (LinkType::Loc, c.loc),
                LinkKind::Net => {
                    let bw = fused_bw(e.target()).or_else(|| fused_bw(e.source()));
                    (LinkType::Net, bw.unwrap_or(w.bw))
                }
                LinkKind::C2c => (LinkType::C2c, w.bw),
                LinkKind::Sys => {
                    let bw = topo
                        .cpu(e.source())
                        .map(|cpu| cpu.sys_bw(c))
                        .unwrap_or(w.bw);
                    (LinkType::Sys, bw)
                }
                LinkKind::NvLink => {
                    // Lane bandwidth of the GPU that declares the link; for an NVSwitch → GPU
                    // edge that is the GPU at the far end.
                    let sm = topo
                        .gpu(e.source())
                        .or_else(|| topo.gpu(e.target()))
                        .and_then(|x| x.sm)
                        .unwrap_or(0);
                    (LinkType::Nvl, w.lanes as f64 * c.nvlink_lane(sm))
                }
            };
            if a == b {
                continue;
            }
            sys.connect(a, b, kind, bw);
        }
    }

    /// NVML's P2P answers per GPU pair, by rank.
    fn add_p2p(&mut self, topo: &Topology, gpu_nodes: &[NodeIndex]) {
        let sys = self;
        let rank_by_bus: HashMap<(HostId, topo_model::BusId), usize> = gpu_nodes
            .iter()
            .enumerate()
            .filter_map(|(r, &n)| topo.gpu(n).map(|g| ((g_host(topo, n), g.busid), r)))
            .collect();
        for ((h, a, b), caps) in &topo.p2p {
            if let (Some(&ra), Some(&rb)) = (rank_by_bus.get(&(*h, *a)), rank_by_bus.get(&(*h, *b)))
            {
                sys.p2p.insert((ra, rb), caps.clone());
            }
        }
    }

    /// Ranks per host, and each host's GPUs in NCCL's index order (the fused XML's).
    fn index_orders(&mut self, topo: &Topology, fused: &Fused, rank_of: &[usize]) {
        let sys = self;
        for r in 0..sys.gpus.len() {
            let h = sys.gpu(r).host as usize;
            if sys.host_ranks.len() <= h {
                sys.host_ranks.resize(h + 1, Vec::new());
            }
            sys.host_ranks[h].push(r);
        }
        sys.index_order = vec![Vec::new(); sys.host_ranks.len()];
        for (h, ranks) in sys.host_ranks.iter().enumerate() {
            let Some(tree) = fused.trees.get(h) else {
                sys.index_order[h] = ranks.clone();
                continue;
            };
            let mut order: Vec<usize> = gpu_order_of(topo, tree)
                .into_iter()
                .map(|n| rank_of[n.index()])
                .filter(|&r| r != NONE)
                .filter(|r| ranks.contains(r))
                .collect();
            // A GPU outside every CPU's tree keeps its rank position at the end.
            for &r in ranks {
                if !order.contains(&r) {
                    order.push(r);
                }
            }
            sys.index_order[h] = order;
        }
    }

    /// NCCL's CPU index order is the fused XML's too; `ncclGetLocalCpu` takes the first of
    /// equally close CPUs in it, and `ncclTopoComputeCommCPU` the first CPU.
    ///
    /// Positions are keyed by graph node: system indices move when Broadcom switches are
    /// flattened, and a map from before that gave every later host's CPUs their neighbours'
    /// places.
    fn cpu_order(&mut self, fused: &Fused) {
        let sys = self;
        let mut cpu_pos: HashMap<NodeIndex, usize> = HashMap::default();
        let hosts: std::collections::BTreeSet<HostId> =
            sys.cpus.iter().map(|&c| sys.nodes[c].host).collect();
        for h in hosts {
            let (Some(nodes), Some(tree)) =
                (fused.hosts.get(h as usize), fused.trees.get(h as usize))
            else {
                continue;
            };
            for (i, n) in cpu_order_of(nodes, tree).into_iter().enumerate() {
                cpu_pos.insert(n, i);
            }
        }
        let nodes = &sys.nodes;
        sys.cpus.sort_by_key(|&c| {
            let pos = nodes[c].topo.and_then(|n| cpu_pos.get(&n).copied());
            (nodes[c].host, pos.unwrap_or(usize::MAX))
        });
    }

    /// `ncclTopoSortSystem` (NCCL 2.28.9 src/graph/topo.cc, the last step of
    /// `ncclTopoGetSystemFromXml`): below every CPU, each node of the PCI tree moves its link
    /// towards its parent to the end of its list, after NVLinks and PCI down-links. The path
    /// search walks links in list order and keeps the first of equally good routes, so where
    /// NVLink and the PCI up-link have the same bandwidth (4 sm86 NVLinks, 48 GB/s, beside a
    /// Gen5 x16 link) the GPU-to-GPU paths go over NVLink, not through the CPU.
    fn sort_up_links(&mut self) {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack: Vec<(usize, Option<usize>)> =
            self.cpus.iter().rev().map(|&c| (c, None)).collect();
        while let Some((node, up)) = stack.pop() {
            if std::mem::replace(&mut seen[node], true) {
                continue;
            }
            let links = &mut self.nodes[node].links;
            if let Some(i) = up.and_then(|u| links.iter().position(|l| l.to == u)) {
                let l = links.remove(i);
                links.push(l);
            }
            let children: Vec<usize> = links
                .iter()
                .filter(|l| l.kind == LinkType::Pci && Some(l.to) != up)
                .map(|l| l.to)
                .collect();
            stack.extend(children.into_iter().rev().map(|c| (c, Some(node))));
        }
    }

    /// Two-level Broadcom PEX switches count as one (`ncclTopoFlattenBcmSwitches`): a Gen4
    /// (0x1000:0xc010, subsystem 0x1000:0xAxxx) or Gen5 (0xc030) switch absorbs child switches
    /// of the same kind; their downstream devices link to it directly.
    fn flatten_bcm_switches(&mut self, topo: &Topology) {
        let bcm_gen = |n: &SysNode| -> Option<u8> {
            let NodeKind::PciSwitch(p) = &topo.graph[n.topo?].kind else {
                return None;
            };
            match (p.vendor, p.device, p.subsystem_vendor, p.subsystem_device) {
                (Some(0x1000), Some(0xc010), Some(0x1000), Some(sd)) if sd & 0xf000 == 0xa000 => {
                    Some(4)
                }
                (Some(0x1000), Some(0xc030), Some(0x1000), Some(_)) => Some(5),
                _ => None,
            }
        };
        let switches: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].kind == NodeType::Pci && bcm_gen(&self.nodes[i]).is_some())
            .collect();
        let mut removed = vec![false; self.nodes.len()];
        for &p in &switches {
            if removed[p] {
                continue;
            }
            let pgen = bcm_gen(&self.nodes[p]);
            let children: Vec<usize> = self.nodes[p]
                .links
                .iter()
                .map(|l| l.to)
                .filter(|&ch| {
                    ch != p
                        && !removed[ch]
                        && self.nodes[ch].kind == NodeType::Pci
                        && bcm_gen(&self.nodes[ch]) == pgen
                        && self.is_below(ch, p, topo)
                })
                .collect();
            for ch in children {
                let grand: Vec<SysLink> = self.nodes[ch]
                    .links
                    .iter()
                    .filter(|l| l.to != p)
                    .cloned()
                    .collect();
                for l in grand {
                    // Re-point the grandchild to the parent switch, both directions.
                    let back = self.nodes[l.to].links.iter().find(|b| b.to == ch).cloned();
                    self.nodes[l.to].links.retain(|b| b.to != ch);
                    if let Some(b) = back {
                        self.connect(l.to, p, b.kind, b.bw);
                    }
                    self.connect(p, l.to, l.kind, l.bw);
                }
                self.nodes[p].links.retain(|l| l.to != ch);
                self.nodes[ch].links.clear();
                removed[ch] = true;
            }
        }
        if removed.iter().any(|&r| r) {
            self.compact(&removed);
        }
    }

    fn is_below(&self, child: usize, parent: usize, topo: &Topology) -> bool {
        match (self.nodes[child].topo, self.nodes[parent].topo) {
            (Some(c), Some(p)) => topo.graph[c].parent == Some(p),
            _ => false,
        }
    }

    fn compact(&mut self, removed: &[bool]) {
        let mut remap = vec![usize::MAX; self.nodes.len()];
        let mut next = 0;
        for (i, r) in removed.iter().enumerate() {
            if !r {
                remap[i] = next;
                next += 1;
            }
        }
        // In place: a second list grown by doubling held 46 MB beside the first at 32,768
        // GPUs (Broadcom switches on every host).
        let mut i = 0;
        self.nodes.retain_mut(|n| {
            let keep = !removed[i];
            i += 1;
            for l in n.links.iter_mut().filter(|_| keep) {
                l.to = remap[l.to];
            }
            keep
        });
        for v in [
            &mut self.gpus,
            &mut self.nets,
            &mut self.cpus,
            &mut self.nvs,
        ] {
            for x in v.iter_mut() {
                *x = remap[*x];
            }
        }
    }
}

/// NCCL's GPU index order on one host: the order of the GPUs in the topology XML that each
/// rank builds, not the rank order.
///
/// NCCL 2.28.9, `src/graph/topo.cc` `ncclTopoGetSystem`: every local rank loads the XML,
/// marks its own GPU and every network device it imports as kept, and `ncclTopoTrimXml`
/// (`src/graph/xml.cc`) drops each `<cpu>`/`<pci>`/`<nic>` branch without a kept node. The
/// trimmed XMLs are then fused in rank order (`ncclTopoFuseXml`): a node already present is
/// merged, a new one is appended after its siblings. `ncclTopoGetSystemFromXml` finally walks
/// the fused XML depth first, so GPU indices follow that walk. On a file that lists a CPU
/// holding only GPUs 2 and 3 (and NICs) before GPU 0's CPU, NCCL's GPU 0 is rank 2.
pub fn nccl_gpu_order(topo: &Topology, host: HostId) -> Vec<NodeIndex> {
    match HostNodes::of(topo).get(host as usize) {
        Some(h) => gpu_order_of(topo, &Walker::new(topo).fused_tree(h)),
        None => vec![],
    }
}

/// One host's nodes (graph order), CPUs and GPUs (`Topology::gpus` order), bucketed once so
/// that ordering every host's GPUs is linear in the graph, not hosts × nodes.
#[derive(Default)]
struct HostNodes {
    nodes: Vec<NodeIndex>,
    cpus: Vec<NodeIndex>,
    gpus: Vec<NodeIndex>,
}

impl HostNodes {
    fn of(topo: &Topology) -> Vec<HostNodes> {
        let g = &topo.graph;
        let mut out: Vec<HostNodes> = vec![];
        for n in g.node_indices() {
            let h = g[n].host as usize;
            if out.len() <= h {
                out.resize_with(h + 1, HostNodes::default);
            }
            out[h].nodes.push(n);
            if matches!(g[n].kind, NodeKind::Cpu(_)) {
                out[h].cpus.push(n);
            }
        }
        for n in topo.gpus() {
            let h = g[n].host as usize;
            if let Some(x) = out.get_mut(h) {
                x.gpus.push(n);
            }
        }
        out
    }
}

/// The fused XML of one host as parent -> children (`None`: the top level), each list in
/// the fused order: every rank's trimmed tree, in rank order, new nodes after their siblings.
type FusedTree = HashMap<Option<NodeIndex>, Vec<NodeIndex>>;

/// Every host's fused XML, built once per [`System::build_with`]: the GPU order, the CPU
/// order, bare-NIC merging and link creation order all read it (each rebuilt it, four walks
/// of every host, 18 % of the 32,768-GPU plan).
struct Fused {
    hosts: Vec<HostNodes>,
    trees: Vec<FusedTree>,
    /// Per graph node (by index): its position in a depth-first walk of its host's fused
    /// XML; nodes no rank keeps come after, in graph order.
    pos: Vec<usize>,
}

impl Fused {
    fn of(topo: &Topology) -> Fused {
        let hosts = HostNodes::of(topo);
        let trees = fused_trees(topo, &hosts);
        let mut pos = vec![usize::MAX; topo.graph.node_count()];
        let mut next = 0;
        for fused in &trees {
            let mut stack: Vec<NodeIndex> = fused
                .get(&None)
                .map(|v| v.iter().rev().copied().collect())
                .unwrap_or_default();
            while let Some(n) = stack.pop() {
                if pos[n.index()] == usize::MAX {
                    pos[n.index()] = next;
                    next += 1;
                }
                if let Some(ch) = fused.get(&Some(n)) {
                    stack.extend(ch.iter().rev().copied());
                }
            }
        }
        for p in pos.iter_mut().filter(|p| **p == usize::MAX) {
            *p = next;
            next += 1;
        }
        Fused { hosts, trees, pos }
    }

    fn at(&self, n: NodeIndex) -> usize {
        self.pos.get(n.index()).copied().unwrap_or(usize::MAX)
    }
}

/// Every host's fused tree. A host's walk reads only the topology (the walker's marks are
/// scratch), so at cluster scale the second half of the hosts is walked on another core by
/// a walker of its own, with the same trees as one walker makes.
fn fused_trees(topo: &Topology, hosts: &[HostNodes]) -> Vec<FusedTree> {
    let walk = |part: &[HostNodes]| -> Vec<FusedTree> {
        let mut walker = Walker::new(topo);
        part.iter().map(|h| walker.fused_tree(h)).collect()
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if hosts.len() < 256 || cores < 2 {
        return walk(hosts);
    }
    let (first, second) = hosts.split_at(hosts.len() / 2);
    std::thread::scope(|s| {
        let later = s.spawn(|| walk(second));
        let mut trees = walk(first);
        trees.extend(
            later
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e)),
        );
        trees
    })
}

fn gpu_order_of(topo: &Topology, fused: &FusedTree) -> Vec<NodeIndex> {
    let g = &topo.graph;
    let mut out = vec![];
    let mut stack: Vec<NodeIndex> = fused
        .get(&None)
        .map(|v| v.iter().rev().copied().collect())
        .unwrap_or_default();
    while let Some(n) = stack.pop() {
        if matches!(g[n].kind, NodeKind::Gpu(_)) {
            out.push(n);
        }
        if let Some(ch) = fused.get(&Some(n)) {
            stack.extend(ch.iter().rev().copied());
        }
    }
    out
}

/// The host's CPUs in NCCL's CPU index order: the fused XML's top level (see
/// [`nccl_gpu_order`]), then CPUs no rank keeps (no GPU, no network device), which NCCL's
/// trimmed files drop.
pub fn nccl_cpu_order(topo: &Topology, host: HostId) -> Vec<NodeIndex> {
    match HostNodes::of(topo).get(host as usize) {
        Some(h) => cpu_order_of(h, &Walker::new(topo).fused_tree(h)),
        None => vec![],
    }
}

fn cpu_order_of(host: &HostNodes, fused: &FusedTree) -> Vec<NodeIndex> {
    let mut out = fused.get(&None).cloned().unwrap_or_default();
    for &c in &host.cpus {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Scratch space for [`Walker::fused_tree`], sized to the graph once: sets of nodes as
/// stamps (a set is the nodes whose mark equals its stamp), so that a host's walk costs its
/// own nodes, not the graph's, and no set is copied per rank.
struct Walker<'a> {
    topo: &'a Topology,
    /// The host's network devices and their ancestors: stamp = host walk number.
    base: Vec<u32>,
    /// One rank's own GPU and its ancestors: stamp = rank walk number.
    own: Vec<u32>,
    /// The nodes already in the fused tree: stamp = host walk number.
    present: Vec<u32>,
    host_stamp: u32,
    rank_stamp: u32,
    /// `Topology::children` of the nodes walked so far (every rank walks the same tree).
    children: Vec<Option<Vec<NodeIndex>>>,
}

impl<'a> Walker<'a> {
    fn new(topo: &'a Topology) -> Walker<'a> {
        let n = topo.graph.node_count();
        Walker {
            topo,
            base: vec![0; n],
            own: vec![0; n],
            present: vec![0; n],
            host_stamp: 0,
            rank_stamp: 0,
            children: vec![None; n],
        }
    }

    /// Marks `n` and its ancestors (at most 256 levels) with `stamp` in `set`.
    fn mark(topo: &Topology, set: &mut [u32], stamp: u32, mut n: NodeIndex) {
        for _ in 0..256 {
            set[n.index()] = stamp;
            match topo.graph[n].parent {
                Some(p) => n = p,
                None => break,
            }
        }
    }

    fn fused_tree(&mut self, host: &HostNodes) -> FusedTree {
        let topo = self.topo;
        let g = &topo.graph;
        self.host_stamp += 1;
        let hs = self.host_stamp;
        // Everything each rank keeps besides its own GPU: the network devices (the oracle's
        // and NCCL's net plugins list the file's `<net>` elements) and their ancestors.
        for &n in &host.nodes {
            if matches!(g[n].kind, NodeKind::Net(_)) {
                Walker::mark(topo, &mut self.base, hs, n);
            }
        }
        let mut fused: FusedTree = HashMap::default();
        for &gpu in &host.gpus {
            self.rank_stamp += 1;
            let rs = self.rank_stamp;
            Walker::mark(topo, &mut self.own, rs, gpu);
            let kept = |w: &Walker, n: NodeIndex| w.base[n.index()] == hs || w.own[n.index()] == rs;
            // Depth-first over this rank's trimmed tree, appending what the fused one lacks.
            let mut stack: Vec<(Option<NodeIndex>, NodeIndex)> = host
                .cpus
                .iter()
                .rev()
                .filter(|&&n| kept(self, n))
                .map(|&n| (None, n))
                .collect();
            while let Some((parent, n)) = stack.pop() {
                if self.present[n.index()] != hs {
                    self.present[n.index()] = hs;
                    fused.entry(parent).or_default().push(n);
                }
                let children = self.children[n.index()].get_or_insert_with(|| topo.children(n));
                for &c in children.iter().rev() {
                    if self.base[c.index()] == hs || self.own[c.index()] == rs {
                        stack.push((Some(n), c));
                    }
                }
            }
        }
        fused
    }
}

/// Bare `<nic>` elements directly under a `<cpu>` (no PCI device of their own) that NCCL
/// merges into an earlier one of the same host, each mapped to that first one (in the fused
/// XML's order). `ncclTopoAddCpu` (NCCL 2.28.9, src/graph/topo.cc) gives such a NIC the id
/// `NCCL_TOPO_ID(systemId, NCCL_TOPO_LOCAL_NIC_ID(numaId, 0))`, whose local-id mask drops
/// the NUMA id: every bare NIC of a host gets the same id, so the first CPU's NIC node takes
/// the NETs of all of them and the others' CPUs get no NIC link.
fn bare_nic_aliases(topo: &Topology, fused: &Fused) -> HashMap<NodeIndex, NodeIndex> {
    let g = &topo.graph;
    let mut bare: Vec<NodeIndex> = g
        .node_indices()
        .filter(|&n| match &g[n].kind {
            NodeKind::Nic(nic) => {
                nic.busid.is_none()
                    && g[n]
                        .parent
                        .is_some_and(|p| matches!(g[p].kind, NodeKind::Cpu(_)))
            }
            _ => false,
        })
        .collect();
    bare.sort_by_key(|&n| (g[n].host, fused.at(n)));
    let mut first: HashMap<HostId, NodeIndex> = HashMap::default();
    let mut out = HashMap::default();
    for n in bare {
        match first.get(&g[n].host) {
            Some(&rep) => {
                out.insert(n, rep);
            }
            None => {
                first.insert(g[n].host, n);
            }
        }
    }
    out
}

/// The graph's links in the order NCCL creates them, as far as it decides a node's link
/// order: links keep their creation order among equal bandwidths (`ncclTopoConnectNodes`
/// sorts by bandwidth only) and the path search keeps the first of equally good routes.
/// `ncclTopoGetSystemFromXml` (NCCL 2.28.9, src/graph/topo.cc) walks the fused XML depth
/// first, connecting each PCI device and NIC to its parent as it goes (so a CPU's or
/// switch's PCI links follow the fused order, which is rank order, not the file's), then adds
/// the NVLinks GPU by GPU in that walk, then C2C and BCM switch links, and connects the
/// CPUs to each other last, in CPU index order.
fn creation_order<'a>(
    topo: &'a Topology,
    fused: &Fused,
) -> Vec<petgraph::graph::EdgeReference<'a, topo_model::Link>> {
    let g = &topo.graph;
    let at = |n: NodeIndex| fused.at(n);
    let mut edges: Vec<_> = g.edge_references().collect();
    // The keys are computed once per edge (a stable sort, so equal keys keep graph order).
    edges.sort_by_cached_key(|e| match e.weight().kind {
        LinkKind::Pci | LinkKind::Net => (0, at(e.target())),
        // A GPU's own NVLinks (and C2C links) keep the file's order; an NVSwitch's or CPU's
        // links to GPUs are made as the walk reaches each GPU.
        LinkKind::NvLink | LinkKind::C2c => {
            let step = if e.weight().kind == LinkKind::NvLink {
                1
            } else {
                2
            };
            match g[e.source()].kind {
                NodeKind::Gpu(_) => (step, at(e.source())),
                _ => (step, at(e.target())),
            }
        }
        // BCM `pcilink`s (`ncclTopoAddPciLinks`), then the CPUs (`ncclTopoConnectCpus`).
        LinkKind::Loc => (3, at(e.target())),
        LinkKind::Sys => (4, at(e.target())),
    });
    edges
}

/// A NIC's NCCL id: its bus id, or (a bare `<nic>`) its graph node.
fn nic_id(nic: &topo_model::Nic, n: NodeIndex) -> u64 {
    nic.busid.map(|b| b.0).unwrap_or(n.index() as u64)
}

/// A port's GUID, or one made of its host and device where the source gave none.
fn net_guid(net: &topo_model::Net, host: HostId) -> u64 {
    net.guid
        .unwrap_or(((host as u64) << 56) | net.dev.max(0) as u64)
}

fn g_host(topo: &Topology, n: NodeIndex) -> HostId {
    topo.graph[n].host
}

fn kind_rank(k: &NodeKind) -> u8 {
    match k {
        NodeKind::Cpu(_) => 0,
        NodeKind::PciSwitch(_) => 1,
        NodeKind::Gpu(_) => 2,
        NodeKind::NvSwitch(_) => 3,
        NodeKind::Nic(_) => 4,
        NodeKind::Net(_) => 5,
        NodeKind::PciDevice(_) => 6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::testing::hgx;

    #[test]
    fn fused_trees_walked_in_halves_are_one_walkers() {
        // 300 hosts: past the split's threshold.
        let t = hgx(8, 90).replicate(300);
        let hosts = HostNodes::of(&t);
        let mut one = Walker::new(&t);
        let want: Vec<FusedTree> = hosts.iter().map(|h| one.fused_tree(h)).collect();
        assert_eq!(fused_trees(&t, &hosts), want);
    }

    #[test]
    fn nvswitch_chips_merge_into_one_node() {
        let t = hgx(8, 90);
        let s = System::build(&t, &BwConstants::default());
        assert_eq!(s.nvs.len(), 1);
        assert_eq!(s.gpus.len(), 8);
        let g0 = &s.nodes[s.gpus[0]];
        let nvl = g0.links.iter().find(|l| l.kind == LinkType::Nvl).unwrap();
        assert!((nvl.bw - 370.8).abs() < 1e-9);
        let back = s.nodes[s.nvs[0]].link_to(s.gpus[0]).unwrap();
        assert!((back.bw - 370.8).abs() < 1e-9);
        // NVLink (370.8) sorts before the PCI up-link (48)
        assert_eq!(g0.links[0].kind, LinkType::Nvl);
        assert_eq!(g0.label(), "GPU/0-11000");
    }

    #[test]
    fn version_constants_apply() {
        let t = hgx(2, 90);
        let c = BwConstants {
            sm90_nvlink: 20.0,
            ..Default::default()
        };
        let s = System::build(&t, &c);
        let nvl = s.nodes[s.gpus[0]]
            .links
            .iter()
            .find(|l| l.kind == LinkType::Nvl)
            .unwrap();
        assert!((nvl.bw - 360.0).abs() < 1e-9);
    }
}
