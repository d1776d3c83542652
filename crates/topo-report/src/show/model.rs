//! Show's view model: the topology split per host, stable labels (`GPU0`, `NIC0`, as
//! `nvidia-smi topo -m` numbers them), NCCL's path table, the nearest NIC and channel 0's
//! port. Every view and document reads it; it reads nothing of them.

use petgraph::Direction;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use topo_model::bw::{IntelClass, intel_class};
use topo_model::fast::HashMap;
use topo_model::{BwConstants, Cpu, CpuVendor, HostId, LinkKind, NodeKind, Topology};
use topo_nccl as nccl;
use topo_nccl::paths::{PathPolicy, Paths};
use topo_nccl::system::{NodeType, System};
use topo_nccl::types::PathType;

/// `render(i, host, out)` for every host in order, appended: from [`PARALLEL_HOSTS`] hosts
/// on, runs of hosts are rendered on the machine's cores (the text does not depend on how
/// many).
pub(crate) fn per_host(ctx: &Ctx, render: impl Fn(usize, &HostView, &mut String) + Sync) -> String {
    crate::util::concat_parallel(ctx.hosts.len(), PARALLEL_HOSTS, |i, out| {
        render(i, &ctx.hosts[i], out)
    })
}

/// Nodes from which per-node names are made on several cores.
pub(crate) const PARALLEL_NODES: usize = 1 << 14;

/// Hosts from which a view is rendered on several cores: one host takes well under a
/// millisecond, a thread about a tenth of one to start.
const PARALLEL_HOSTS: usize = 64;

/// NCCL's path from one model node to another: type and bandwidth (GB/s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PathInfo {
    pub ty: PathType,
    pub bw: f64,
    pub hops: u32,
    /// The GPU a PXN or NVB path relays through.
    pub via: Option<NodeIndex>,
}

/// One host's GPUs, network ports and NUMA nodes, in display order.
pub(crate) struct HostView {
    pub host: HostId,
    pub gpus: Vec<NodeIndex>,
    pub nets: Vec<NodeIndex>,
    /// NICs without a known network port (skeleton XML): matrix columns after the ports.
    pub bare_nics: Vec<NodeIndex>,
    pub cpus: Vec<NodeIndex>,
    /// Every node of the host, in graph order: what per-host scans walk instead of the graph.
    pub nodes: Vec<NodeIndex>,
}

impl HostView {
    /// Ports, then port-less NICs: the `NIC#` columns of the matrix.
    pub fn nic_columns(&self) -> Vec<NodeIndex> {
        self.nets.iter().chain(&self.bare_nics).copied().collect()
    }
}

pub(crate) use topo_model::nvlink_shape::NvlinkSummary;
pub(crate) use topo_model::pci_class::PciClass;

pub(crate) struct Ctx<'a> {
    pub topo: &'a Topology,
    pub hosts: Vec<HostView>,
    /// Position of a GPU or network port inside its host (`GPU3`, `NIC5`).
    pos: HashMap<NodeIndex, usize>,
    /// NCCL paths from GPUs to GPUs and network ports of the same host.
    /// Looked up, never walked: a hash map (half a million entries at 4,096 nodes).
    pub paths: HashMap<(NodeIndex, NodeIndex), PathInfo>,
    /// Per GPU, the network ports NCCL treats as local (`ncclTopoGetLocal`).
    local: HashMap<NodeIndex, Vec<NodeIndex>>,
    /// Per GPU, the network port NCCL uses for channel 0 (`ncclTopoGetLocalNet`).
    channel0: HashMap<NodeIndex, NodeIndex>,
    /// Per GPU, how many of its equally near ports NCCL's channels take in turn (`netsPerGpu`).
    spread: HashMap<NodeIndex, usize>,
    /// The number a GPU is shown with: its NVML index where every GPU of its host has a
    /// distinct one (what the JSON's `dev` and nvidia-smi say), else its position.
    number: HashMap<NodeIndex, usize>,
    /// Each network port's role (compute, storage, front-end), stated or inferred.
    pub roles: HashMap<NodeIndex, topo_model::RoleGuess>,
    /// nvidia-smi's connection classes (`topo_model::pci_class`).
    pub classes: topo_model::pci_class::PciClasses,
    /// Set when the topology shown is the first copy of a replicated one.
    pub copies: Option<super::copies::Replicas<'a>>,
}

impl<'a> Ctx<'a> {
    pub fn new(topo: &'a Topology) -> Ctx<'a> {
        // NCCL's system and paths need only the topology: built on a second core while this
        // one indexes the hosts (a fifth of `show` at 32,768 GPUs).
        std::thread::scope(|s| {
            let model = s.spawn(|| {
                let sys = System::build(topo, &BwConstants::default());
                let paths = nccl::paths::compute(&sys, &PathPolicy::default());
                (sys, paths)
            });
            let mut ctx = Ctx::hosts_only(topo);
            let (sys, paths) = model
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
            nccl_paths(&mut ctx, &sys, &paths);
            ctx
        })
    }

    /// Everything but NCCL's paths: hosts, positions, numbers, roles.
    fn hosts_only(topo: &'a Topology) -> Ctx<'a> {
        let nhosts = topo.host_count().max(topo.hosts.len()).max(1);
        let gpus = topo.gpus();
        let nets = topo.nets();
        let mut cpus: Vec<NodeIndex> = topo.cpus().collect();
        cpus.sort_by_key(|&c| {
            (
                topo.node(c).host,
                topo.cpu(c).map(|x| x.numa).unwrap_or(-1),
                c,
            )
        });
        let mut pos = HashMap::default();
        // Bucket nodes by host once: scanning the whole graph per host is quadratic in --nodes.
        let bucket = |v: &[NodeIndex]| -> Vec<Vec<NodeIndex>> {
            let mut out = vec![vec![]; nhosts];
            for &n in v {
                if let Some(b) = out.get_mut(topo.node(n).host as usize) {
                    b.push(n);
                }
            }
            out
        };
        let (mut gpus_by, mut nets_by, mut cpus_by) = (bucket(&gpus), bucket(&nets), bucket(&cpus));
        let bare_all: Vec<NodeIndex> = topo
            .nics()
            .filter(|&n| topo.children(n).is_empty())
            .collect();
        let mut bare_by = bucket(&bare_all);
        let all: Vec<NodeIndex> = topo.graph.node_indices().collect();
        let mut all_by = bucket(&all);
        let hosts: Vec<HostView> = (0..nhosts)
            .map(|h| {
                let host = h as HostId;
                let mut bare = std::mem::take(&mut bare_by[h]);
                bare.sort_by_key(|&n| (topo.node(n).busid(), n));
                let hv = HostView {
                    host,
                    gpus: std::mem::take(&mut gpus_by[h]),
                    nets: std::mem::take(&mut nets_by[h]),
                    bare_nics: bare,
                    cpus: std::mem::take(&mut cpus_by[h]),
                    nodes: std::mem::take(&mut all_by[h]),
                };
                for (i, &g) in hv.gpus.iter().enumerate() {
                    pos.insert(g, i);
                }
                for (i, n) in hv.nic_columns().into_iter().enumerate() {
                    pos.insert(n, i);
                }
                hv
            })
            .collect();
        let mut number = HashMap::default();
        let roles: HashMap<_, _> = topo.net_roles_all().into_iter().collect();
        for hv in &hosts {
            let devs: Vec<i32> = hv
                .gpus
                .iter()
                .map(|&g| topo.gpu(g).map_or(-1, |x| x.dev))
                .collect();
            let mut uniq = devs.clone();
            uniq.sort();
            uniq.dedup();
            let nvml = uniq.len() == devs.len() && devs.iter().all(|&d| d >= 0);
            for (i, (&g, &d)) in hv.gpus.iter().zip(&devs).enumerate() {
                number.insert(g, if nvml { d as usize } else { i });
            }
        }
        let classes = topo_model::pci_class::PciClasses::of(topo);
        Ctx {
            topo,
            hosts,
            pos,
            classes,
            paths: HashMap::default(),
            local: HashMap::default(),
            channel0: HashMap::default(),
            spread: HashMap::default(),
            number,
            roles,
            copies: None,
        }
    }

    /// The context of `shown`, the first copy of `whole` where `whole` is copies of one
    /// machine ([`Topology::first_copy`]).
    pub fn with_copies(mut self, whole: &'a Topology) -> Ctx<'a> {
        self.copies = super::copies::Replicas::of(whole);
        self
    }

    /// Whether the machine has several hosts, though only the first copy's may be listed.
    pub fn multi_host(&self) -> bool {
        self.hosts.len() > 1 || self.copies.is_some()
    }

    pub fn host_name(&self, h: HostId) -> String {
        self.topo
            .hosts
            .get(h as usize)
            .and_then(|x| x.name.clone())
            .unwrap_or_else(|| {
                if self.multi_host() {
                    format!("host{h}")
                } else {
                    "(unnamed)".to_string()
                }
            })
    }

    /// Index of a GPU or port inside its host.
    pub fn index(&self, n: NodeIndex) -> usize {
        self.pos.get(&n).copied().unwrap_or(0)
    }

    /// The number a GPU is shown with (its NVML index where known), a port's position.
    pub fn number(&self, n: NodeIndex) -> usize {
        self.number
            .get(&n)
            .copied()
            .unwrap_or_else(|| self.index(n))
    }

    /// A port's role; compute when unknown.
    pub fn role(&self, n: NodeIndex) -> topo_model::NetRole {
        self.roles
            .get(&n)
            .map_or(topo_model::NetRole::Compute, |r| r.role)
    }

    /// `GPU3`, `NIC5`, or the node's bus id / name for anything else.
    pub fn label(&self, n: NodeIndex) -> String {
        let node = self.topo.node(n);
        match &node.kind {
            NodeKind::Gpu(_) => format!("GPU{}", self.number(n)),
            NodeKind::Net(x) => x.name.clone(),
            NodeKind::Cpu(c) => format!("NUMA{}", c.numa),
            _ => node
                .busid()
                .map(|b| b.to_string())
                .unwrap_or_else(|| "?".to_string()),
        }
    }

    pub fn nvlink(&self, gpu: NodeIndex) -> NvlinkSummary {
        topo_model::nvlink_shape::summary(self.topo, gpu)
    }

    /// NVLink lanes between two GPUs as `nvidia-smi topo -m` counts them (`NV#`).
    pub fn nvlink_lanes_between(&self, a: NodeIndex, b: NodeIndex) -> u32 {
        topo_model::nvlink_shape::lanes_between(self.topo, a, b)
    }

    /// The NIC (PCI function) of a network port, or the node itself.
    pub fn pci_device(&self, n: NodeIndex) -> NodeIndex {
        self.topo.pci_device(n)
    }

    /// Bus id of a GPU, NIC or network port (its NIC's).
    pub fn busid(&self, n: NodeIndex) -> Option<topo_model::BusId> {
        self.topo.node(self.pci_device(n)).busid()
    }

    /// The NCCL path from `from` to `to` (same host), if computed.
    pub fn path(&self, from: NodeIndex, to: NodeIndex) -> Option<PathInfo> {
        self.paths.get(&(from, to)).copied()
    }

    /// The network ports NCCL treats as local to a GPU: highest path bandwidth, then best path
    /// type (`ncclTopoGetLocal`, src/graph/topo.cc); in plugin device order.
    pub fn local_nets(&self, gpu: NodeIndex) -> Vec<NodeIndex> {
        self.local.get(&gpu).cloned().unwrap_or_default()
    }

    /// The GPU's nearest compute port and the path to it: the one NCCL gives its channel 0
    /// when that is a compute port, else the compute port with the best path (bandwidth,
    /// then path type, then plugin order); any port when the host has no compute port.
    pub fn nearest_nic(&self, gpu: NodeIndex) -> Option<(NodeIndex, PathInfo)> {
        use topo_model::NetRole;
        let n = self
            .channel0
            .get(&gpu)
            .copied()
            .or_else(|| self.local_nets(gpu).first().copied());
        if let Some(n) = n
            && self.role(n) == NetRole::Compute
        {
            return Some((n, self.path(gpu, n)?));
        }
        let host = self.topo.node(gpu).host;
        let nets = &self.hosts.get(host as usize)?.nets;
        let best = |want: Option<NetRole>| {
            nets.iter()
                .filter(|&&x| want.is_none_or(|r| self.role(x) == r))
                .filter_map(|&x| self.path(gpu, x).map(|p| (x, p)))
                .min_by(|(_, a), (_, b)| b.bw.total_cmp(&a.bw).then(a.ty.cmp(&b.ty)))
        };
        best(Some(NetRole::Compute)).or_else(|| n.and_then(|n| Some((n, self.path(gpu, n)?))))
    }

    /// How many equally near ports the GPU's channels take in turn (1: channel 0's only).
    pub fn nets_per_gpu(&self, gpu: NodeIndex) -> usize {
        self.spread.get(&gpu).copied().unwrap_or(1)
    }

    /// The ports tied with the GPU's nearest NIC, where that is NCCL's channel-0 choice among
    /// several equally near ports (`ncclTopoGetLocal`): `None` without a tie.
    ///
    /// Where the source leaves GPUDirect RDMA unstated, the view is by PCI distance
    /// ([`Ctx::nearest_nic_shown`]), and so is the tie: the ports as near as the shown one. The
    /// plan's own NCCL paths assume no GPUDirect RDMA there, which puts every port of the
    /// socket at PHB; that is the plan's stated assumption, not a fact of the machine.
    pub fn nearest_tie(&self, gpu: NodeIndex) -> Option<Vec<NodeIndex>> {
        let (n, _) = self.nearest_nic(gpu)?;
        let (shown, _, _) = self.nearest_nic_shown(gpu)?;
        if let Some(tied) = self.pci_tie(gpu, shown) {
            return (tied.len() > 1).then_some(tied);
        }
        let local = self.local_nets(gpu);
        let chosen = self.channel0.get(&gpu) == Some(&n);
        (chosen && shown == n && local.len() > 1).then_some(local)
    }

    /// The ports as near by PCI class as `shown`, where its GPUDirect RDMA is unstated.
    fn pci_tie(&self, gpu: NodeIndex, shown: NodeIndex) -> Option<Vec<NodeIndex>> {
        let net = self.topo.net(shown)?;
        if !net.gdr_unstated || net.assumed {
            return None;
        }
        let class = pci_class(self, gpu, shown);
        let pool = self.shown_pool(gpu)?;
        Some(
            pool.into_iter()
                .filter(|&x| pci_class(self, gpu, x) == class)
                .collect(),
        )
    }

    /// The ports the PCI-distance view picks from: the host's compute ports, or every port
    /// where it has none.
    fn shown_pool(&self, gpu: NodeIndex) -> Option<Vec<NodeIndex>> {
        use topo_model::NetRole;
        let host = self.topo.node(gpu).host;
        let nets = &self.hosts.get(host as usize)?.nets;
        let compute: Vec<NodeIndex> = nets
            .iter()
            .copied()
            .filter(|&x| self.role(x) == NetRole::Compute)
            .collect();
        Some(if compute.is_empty() {
            nets.clone()
        } else {
            compute
        })
    }

    /// The nearest compute port as the views show it: [`Ctx::nearest_nic`] with its NCCL path
    /// type and bandwidth, except where the source leaves GPUDirect RDMA unstated (a matrix, a
    /// `<net>` without `gdr`). NCCL's path then depends on what its plugin finds at run time,
    /// so the port is the nearest by PCI distance (nvidia-smi's class) and no bandwidth is
    /// claimed.
    pub fn nearest_nic_shown(&self, gpu: NodeIndex) -> Option<(NodeIndex, String, Option<f64>)> {
        let (n, p) = self.nearest_nic(gpu)?;
        let net = self.topo.net(n);
        // A port topo assumed is priced the way NCCL's plugin answers at run time, so NCCL's
        // own choice stands for it as it does for a stated port (the plan's, `nic_choice`).
        if !net.is_some_and(|x| x.gdr_unstated && !x.assumed) {
            // A port of unknown speed makes the path's bandwidth NCCL's 10 Gb/s default.
            let bw = net.and_then(|x| x.speed_mbps).map(|_| p.bw);
            return Some((n, p.ty.to_string(), bw));
        }
        let pool = self.shown_pool(gpu)?;
        let best = pool
            .iter()
            .copied()
            .min_by_key(|&x| (pci_class(self, gpu, x), self.index(x)))?;
        let class = pci_class(self, gpu, best);
        // Among ports equally near, the one NCCL's channel 0 takes where it is one of them,
        // so a tie is shown as NCCL breaks it (and marked as a tie), not as the first port.
        let pick = Some(n)
            .filter(|&x| pool.contains(&x) && pci_class(self, gpu, x) == class)
            .unwrap_or(best);
        Some((pick, class.name().to_string(), None))
    }

    /// A name for every node, unique within its host: `GPU0`, `mlx5_0`, `NUMA1`, bus ids for
    /// other PCI functions, `NVSwitch 0000:05:00.0`. Used by the DOT graph and the JSON links.
    pub fn node_keys(&self) -> HashMap<NodeIndex, String> {
        self.node_key_list()
            .into_iter()
            .enumerate()
            .map(|(i, k)| (NodeIndex::new(i), k))
            .collect()
    }

    /// [`Ctx::node_keys`] as a list indexed by node index.
    pub fn node_key_list(&self) -> Vec<String> {
        let mut keys: Vec<String> =
            crate::util::map_parallel(self.topo.graph.node_count(), PARALLEL_NODES, |i| {
                self.key_base(NodeIndex::new(i))
            });
        // A repeated name gets ` #2`, ` #3` in graph order within its host; counted per host
        // (every node is in its host's `nodes`, in graph order) so the table stays small.
        let mut repeats = vec![];
        {
            let mut seen: HashMap<&str, usize> = HashMap::default();
            for hv in &self.hosts {
                seen.clear();
                for &n in &hv.nodes {
                    let count = seen.entry(keys[n.index()].as_str()).or_default();
                    *count += 1;
                    if *count > 1 {
                        repeats.push((n.index(), *count));
                    }
                }
            }
        }
        for (i, count) in repeats {
            keys[i] = format!("{} #{count}", keys[i]);
        }
        keys
    }

    /// A node's name before numbering repeats (see [`Ctx::node_keys`]).
    fn key_base(&self, n: NodeIndex) -> String {
        let node = self.topo.node(n);
        match &node.kind {
            NodeKind::Gpu(_) | NodeKind::Net(_) => self.label(n),
            NodeKind::Cpu(c) if c.numa >= 0 => format!("NUMA{}", c.numa),
            NodeKind::Cpu(_) => "NUMA?".to_string(),
            NodeKind::NvSwitch(s) => match s.busid {
                Some(b) => format!("NVSwitch {b}"),
                None => "NVSwitch".to_string(),
            },
            NodeKind::Nic(x) if x.busid.is_none() => "NIC".to_string(),
            _ => node.busid().map(|b| b.to_string()).unwrap_or_default(),
        }
    }

    pub fn numa(&self, n: NodeIndex) -> Option<i32> {
        let v = self.topo.numa_of(self.pci_device(n));
        (v >= 0).then_some(v)
    }
}

/// NCCL's paths with the default constants and environment (`nccl::paths::compute`): from
/// every GPU to the GPUs and network ports of its host, keyed by model node; plus each GPU's
/// local network ports and the one NCCL gives its channel 0.
fn nccl_paths(ctx: &mut Ctx, sys: &System, paths: &Paths) {
    let of: HashMap<NodeIndex, usize> = sys
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| matches!(n.kind, NodeType::Gpu | NodeType::Net))
        .filter_map(|(i, n)| n.topo.map(|t| (t, i)))
        .collect();
    let hosts = &ctx.hosts;
    let found = crate::util::map_parallel(hosts.len(), PARALLEL_HOSTS, |h| {
        host_nccl_paths(&hosts[h], sys, paths, &of)
    });
    ctx.paths.reserve(found.iter().map(|f| f.paths.len()).sum());
    for f in found {
        ctx.paths.extend(f.paths);
        ctx.local.extend(f.local);
        ctx.channel0.extend(f.channel0);
        ctx.spread.extend(f.spread);
    }
}

/// One host's share of [`nccl_paths`].
#[derive(Default)]
struct HostPaths {
    paths: Vec<((NodeIndex, NodeIndex), PathInfo)>,
    local: Vec<(NodeIndex, Vec<NodeIndex>)>,
    channel0: Vec<(NodeIndex, NodeIndex)>,
    spread: Vec<(NodeIndex, usize)>,
}

fn host_nccl_paths(
    hv: &HostView,
    sys: &System,
    paths: &Paths,
    of: &HashMap<NodeIndex, usize>,
) -> HostPaths {
    let policy = PathPolicy::default();
    let model = |i: usize| sys.nodes.get(i).and_then(|n| n.topo);
    let mut out = HostPaths::default();
    for &g in &hv.gpus {
        let Some(&sg) = of.get(&g) else { continue };
        for &t in hv.gpus.iter().chain(&hv.nets) {
            let Some(&st) = of.get(&t) else { continue };
            let Some(p) = paths.get(sg, st) else { continue };
            // The relay GPU of a PXN or NVB path.
            let via = paths
                .interior(sg, st)
                .find(|&i| sys.nodes.get(i).is_some_and(|n| n.kind == NodeType::Gpu))
                .and_then(model);
            let info = PathInfo {
                ty: p.ty,
                bw: p.bw,
                hops: p.hops,
                via,
            };
            out.paths.push(((g, t), info));
        }
        let local: Vec<NodeIndex> = nccl::paths::local_nodes(sys, paths, sg, NodeType::Net)
            .into_iter()
            .filter_map(model)
            .collect();
        out.local.push((g, local));
        let rank = sys.nodes[sg].gpu.as_ref().map(|a| a.rank);
        // The plan's rule (`nic_choice`): channel 0's NIC and how many the GPU spreads over.
        if let Some(c) = rank.and_then(|r| nccl::paths::nic_choice(sys, paths, &policy, r))
            && let Some(n) = sys.nets.get(c.net).and_then(|&i| model(i))
        {
            out.channel0.push((g, n));
            out.spread.push((g, c.nets_per_gpu));
        }
    }
    out
}

/// The sentence saying a host has no GPU, with the reason discovery gave
/// (`Host::gpu_discovery`), without repeating "no NVIDIA GPU" when the reason starts with it.
pub(crate) fn no_gpu_line(ctx: &Ctx, host: HostId) -> String {
    // Discovery gives a reason; a file, profile or snapshot without GPUs gives none, and NVML
    // has nothing to do with it.
    let Some(why) = ctx
        .topo
        .hosts
        .get(host as usize)
        .and_then(|h| h.gpu_discovery.clone())
    else {
        return "No GPU in the source: it lists none".to_string();
    };
    if why.to_ascii_lowercase().starts_with("no nvidia gpu") {
        let mut c = why.chars();
        c.next()
            .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
            .unwrap_or_default()
    } else {
        format!("No NVIDIA GPU or NVML library found: {why}")
    }
}

/// A host's NVSwitch chips ordered by bus id (hidden ones last).
pub(crate) fn sorted_nvswitches(ctx: &Ctx, host: HostId) -> Vec<NodeIndex> {
    let mut v: Vec<NodeIndex> = ctx
        .hosts
        .get(host as usize)
        .map(|hv| hv.nodes.as_slice())
        .unwrap_or_default()
        .iter()
        .copied()
        .filter(|&s| matches!(ctx.topo.node(s).kind, NodeKind::NvSwitch(_)))
        .collect();
    v.sort_by_key(|&s| {
        (
            ctx.topo.node(s).busid().is_none(),
            ctx.topo.node(s).busid(),
            s,
        )
    });
    v
}

/// `0,1,2,5` → `GPUs 0–2, 5`-style ranges over sorted indices.
pub(crate) fn ranges(v: &[usize]) -> String {
    let mut out: Vec<String> = vec![];
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        out.push(if end > start {
            format!("{start}–{end}")
        } else {
            start.to_string()
        });
        i += 1;
    }
    out.join(", ")
}

/// A CPU list (`0-3,8`) from NCCL's affinity mask (comma-separated 32-bit hex words, most
/// significant first, as in sysfs `cpumap`).
pub(crate) fn mask_to_cpulist(mask: &str) -> Option<String> {
    let words: Vec<&str> = mask.trim().split(',').collect();
    let mut cpus = vec![];
    for (k, w) in words.iter().rev().enumerate() {
        let v = u32::from_str_radix(w.trim(), 16).ok()?;
        for bit in 0..32 {
            if v & (1 << bit) != 0 {
                cpus.push(k * 32 + bit);
            }
        }
    }
    if cpus.is_empty() {
        return None;
    }
    Some(ranges(&cpus).replace('–', "-").replace(", ", ","))
}

/// A NUMA node's CPU list as ranges (`0-55,112-167`, as lscpu and nvidia-smi print it), from
/// `cpus` or the affinity mask. A source may spell every CPU out (`0,1,2,...`), which a
/// table then breaks mid-number. A list that is not one is shown as written, cut at
/// [`MAX_SHOWN_LIST`] bytes.
pub(crate) fn cpu_list(cpu: &topo_model::Cpu) -> Option<String> {
    match &cpu.cpus {
        Some(l) => Some(cut_list(&as_ranges(l).unwrap_or_else(|| l.clone()))),
        None => cpu.affinity.as_deref().and_then(mask_to_cpulist),
    }
}

/// CPU numbers a list may name: past it a list is shown as written.
const MAX_LISTED_CPUS: usize = 1 << 16;

/// The most bytes of a list shown as written: a 200,000-entry list once took show's text
/// summary 109 s to lay out (issue 45).
pub(crate) const MAX_SHOWN_LIST: usize = 1024;

fn cut_list(l: &str) -> String {
    if l.len() <= MAX_SHOWN_LIST {
        return l.to_string();
    }
    let mut end = MAX_SHOWN_LIST;
    while !l.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} more bytes)", &l[..end], l.len() - end)
}

/// `0,1,2,3,8-9` → `0-3,8-9`; `None` when `list` is not a CPU list (it is then shown as is).
/// Linear in the list whatever it repeats: CPUs are marked in a table of at most
/// [`MAX_LISTED_CPUS`], not collected and sorted.
fn as_ranges(list: &str) -> Option<String> {
    let mut seen: Vec<bool> = vec![];
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => (
                a.trim().parse::<usize>().ok()?,
                b.trim().parse::<usize>().ok()?,
            ),
            None => {
                let a = item.parse::<usize>().ok()?;
                (a, a)
            }
        };
        if b < a || b >= MAX_LISTED_CPUS {
            return None;
        }
        if seen.len() <= b {
            seen.resize(b + 1, false);
        }
        seen[a..=b].fill(true);
    }
    let cpus: Vec<usize> = (0..seen.len()).filter(|&i| seen[i]).collect();
    if cpus.is_empty() {
        return None;
    }
    Some(ranges(&cpus).replace('–', "-").replace(", ", ","))
}

// The cells of a table belong to the table layout (`fit`), which show's views use and which

/// `GenuineIntel family 6 model 143 (Sapphire Rapids class), x86_64`, or the model name.
pub(crate) fn cpu_model(cpu: &Cpu) -> String {
    let mut parts = vec![];
    if let Some(m) = &cpu.model_name {
        parts.push(m.trim().to_string());
    } else {
        let mut s = cpu
            .vendor
            .as_deref()
            .map(str::trim)
            .unwrap_or("unknown vendor")
            .to_string();
        if let Some(f) = cpu.family {
            s.push_str(&format!(" family {f}"));
        }
        if let Some(m) = cpu.model {
            s.push_str(&format!(" model {m}"));
        }
        if cpu.vendor_kind() == CpuVendor::Intel && cpu.family == Some(6) {
            s.push_str(match intel_class(cpu.model) {
                IntelClass::Erp => " (Emerald Rapids class)",
                IntelClass::Srp => " (Sapphire Rapids class)",
                IntelClass::Skl => " (Skylake class)",
                IntelClass::Bdw => " (Broadwell class)",
            });
        }
        parts.push(s);
    }
    if let Some(a) = &cpu.arch {
        parts.push(a.clone());
    }
    parts.join(", ")
}

/// GPUs with NVLinks to an NVSwitch chip, and their lane counts to it.
pub(crate) fn switch_gpus(ctx: &Ctx, s: NodeIndex) -> Vec<(NodeIndex, u32)> {
    let mut v: Vec<(NodeIndex, u32)> = ctx
        .topo
        .graph
        .edges_directed(s, Direction::Incoming)
        .filter(|e| e.weight().kind == LinkKind::NvLink && ctx.topo.gpu(e.source()).is_some())
        .map(|e| (e.source(), e.weight().lanes))
        .collect();
    v.sort_by_key(|&(g, _)| (ctx.number(g), g));
    v
}

/// The nvidia-smi connection class between two GPUs/NICs/ports of one host
/// (`topo_model::pci_class`).
pub(crate) fn pci_class(ctx: &Ctx, a: NodeIndex, b: NodeIndex) -> PciClass {
    ctx.classes.between(ctx.topo, a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::testing::hgx;

    #[test]
    fn cpu_lists_print_as_ranges() {
        let spelled: Vec<String> = (0..56).chain(112..168).map(|c| c.to_string()).collect();
        assert_eq!(as_ranges(&spelled.join(",")).unwrap(), "0-55,112-167");
        assert_eq!(as_ranges("8-9, 0,1,2,3").unwrap(), "0-3,8-9");
        assert_eq!(as_ranges("0-55,112-167").unwrap(), "0-55,112-167");
        for odd in ["", "x", "3-1", "0-99999999", "1,,a"] {
            assert_eq!(as_ranges(odd), None, "{odd}");
        }
    }

    /// A list of 200,000 entries (issue 45: 109 s in show's text summary) costs what its
    /// length does: four times the entries, under six times the time; shown at most
    /// `MAX_SHOWN_LIST` bytes.
    #[test]
    fn long_cpu_lists_cost_linear_time_and_show_cut() {
        let list = |n: usize| -> String {
            (0..n)
                .map(|i| (i % 60_000).to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let time = |l: &str| {
            let cpu = topo_model::Cpu {
                cpus: Some(l.to_string()),
                ..Default::default()
            };
            let t0 = std::time::Instant::now();
            let shown = cpu_list(&cpu).unwrap();
            let took = t0.elapsed();
            assert!(shown.len() <= MAX_SHOWN_LIST + 40, "{}", shown.len());
            took
        };
        let (small, large) = (list(50_000), list(200_000));
        // Interleaved, best of five: the machine is shared, and load comes in bursts.
        let (mut a, mut b) = (std::time::Duration::MAX, std::time::Duration::MAX);
        for _ in 0..5 {
            a = a.min(time(&small));
            b = b.min(time(&large));
        }
        assert!(
            b < a * 6 + std::time::Duration::from_millis(20),
            "{a:?} -> {b:?}"
        );
        let repeated = vec!["0-3"; 200_000].join(",");
        assert_eq!(as_ranges(&repeated).unwrap(), "0-3");
        let beyond: String = (60_000..260_000).map(|i| format!("{i},")).collect();
        let cpu = topo_model::Cpu {
            cpus: Some(beyond),
            ..Default::default()
        };
        let shown = cpu_list(&cpu).unwrap();
        assert!(
            shown.ends_with("more bytes)") && shown.len() < 1100,
            "{shown}"
        );
    }

    #[test]
    fn labels_and_nvlink_summary_on_hgx() {
        let t = hgx(8, 90);
        let ctx = Ctx::new(&t);
        let g = &ctx.hosts[0].gpus;
        assert_eq!(ctx.label(g[3]), "GPU3");
        let s = ctx.nvlink(g[0]);
        assert_eq!(s.lanes, 18);
        assert_eq!(s.switch_lanes, 18);
        assert_eq!(s.switches.len(), 4);
        assert!((s.bw - 370.8).abs() < 1e-9);
        assert_eq!(ctx.nvlink_lanes_between(g[0], g[7]), 18);
        let (nic, p) = ctx.nearest_nic(g[5]).unwrap();
        assert_eq!(ctx.label(nic), "mlx5_5");
        assert_eq!(p.ty, PathType::Pix);
        assert!((p.bw - 48.0).abs() < 1e-9);
    }

    #[test]
    fn cpu_masks_and_ranges() {
        assert_eq!(
            mask_to_cpulist("00000000,0000ffff").as_deref(),
            Some("0-15")
        );
        assert_eq!(
            mask_to_cpulist("ffffffff,00000000").as_deref(),
            Some("32-63")
        );
        assert_eq!(
            mask_to_cpulist("0000000f,000000f0").as_deref(),
            Some("4-7,32-35")
        );
        assert_eq!(mask_to_cpulist("zz"), None);
        assert_eq!(mask_to_cpulist("00000000"), None);
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0–2, 5, 7–8");
    }
}
