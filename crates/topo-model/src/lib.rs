//! The topology model: one directed graph of a machine (or several) that every source fills
//! and every analysis reads.
//!
//! The model is the *hardware* view: each NVSwitch chip, each PCI function, each network port
//! is its own node. NCCL's own, coarser view (one merged NVSwitch, no unrelated PCI devices,
//! per-version bandwidth constants) is derived from it by `nccl::system`.
//!
//! Every physical link is stored as two directed edges, except an NVLink declared by one GPU
//! towards a peer GPU, which NCCL also treats as one-directional (`ncclTopoConnectNodes` from
//! the declaring GPU's `<nvlink>` entry only).

#![forbid(unsafe_code)]

pub mod busid;
pub mod copies;
mod join;
/// Maps for the hot loops of a 32,768-GPU analysis: foldhash, randomly seeded per process
/// like std's SipHash (keys come from files a user brings), hashes several times faster.
/// Build them with `default()` or `collect()`; iteration order means nothing, as with std's.
pub mod fast {
    pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
    pub type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
}
pub mod bw;
pub mod fabric_judge;
pub mod faults;
pub mod inventory;
pub mod message;
pub mod net_judge;
pub mod net_kind;
pub mod netfacts;
pub mod nic_judge;
pub mod numa_judge;
pub mod nvlink_judge;
pub mod nvlink_shape;
pub mod nvls_judge;
pub mod p2p_judge;
pub mod pci_class;
pub mod pcie_judge;
pub mod ports_judge;
pub mod stated;

pub use busid::{BusId, BusIdError};
pub use bw::{BwConstants, CpuArch, CpuVendor};

use petgraph::Direction;
use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Index of a host (system) inside a multi-node topology; 0 for a single machine.
pub type HostId = u16;

/// PCIe link of a device towards its parent, as NCCL sees it plus what the device reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PcieLink {
    /// The `link_speed` string NCCL uses (XML attribute, or the minimum of the device's and its
    /// upstream port's `max_link_speed` in sysfs). `None` when unknown.
    pub speed: Option<String>,
    /// The `link_width` NCCL uses; `Some(0)` is what virtual machines report (counts as 16).
    pub width: Option<u32>,
    /// What the device itself reports as its maximum (sysfs `max_link_*`), when read live.
    pub max_speed: Option<String>,
    pub max_width: Option<u32>,
    /// The negotiated link right now (sysfs `current_link_*`), when read live.
    pub cur_speed: Option<String>,
    pub cur_width: Option<u32>,
}

impl PcieLink {
    pub fn new(speed: Option<&str>, width: Option<u32>) -> PcieLink {
        PcieLink {
            speed: speed.map(str::to_string),
            width,
            ..Default::default()
        }
    }
    /// Bandwidth in GB/s as NCCL computes it from `speed`/`width`.
    pub fn bw(&self) -> f64 {
        bw::pcie_bw(self.speed.as_deref(), self.width)
    }
    pub fn gts(&self) -> Option<f64> {
        self.speed.as_deref().and_then(bw::pcie_gts)
    }
}

/// A NUMA domain with its CPUs (NCCL's `<cpu>`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cpu {
    /// NUMA node id; -1 when unknown.
    pub numa: i32,
    /// CPU list as in sysfs `cpulist` (`0-47,96-143`), when known.
    pub cpus: Option<String>,
    /// CPU mask as NCCL writes it (`affinity`, comma-separated 32-bit hex words).
    pub affinity: Option<String>,
    /// `x86_64`, `arm64`, `ppc64`.
    pub arch: Option<String>,
    /// CPUID vendor string: `GenuineIntel`, `AuthenticAMD`, `CentaurHauls`, `  Shanghai  `.
    pub vendor: Option<String>,
    pub family: Option<u32>,
    pub model: Option<u32>,
    /// Human model name from /proc/cpuinfo, when read live.
    pub model_name: Option<String>,
    /// NCCL's `host_hash`, when the source had one.
    pub host_hash: Option<u64>,
}

/// A machine architecture name (`uname -m`, Rust's, or NCCL's) in NCCL's spelling: `aarch64`
/// is `arm64`, `powerpc64`/`ppc64le` are `ppc64`; anything else is kept.
pub fn nccl_arch(name: &str) -> String {
    match name.trim() {
        "aarch64" | "arm64" => "arm64".into(),
        "powerpc64" | "powerpc64le" | "ppc64le" | "ppc64" => "ppc64".into(),
        other => other.into(),
    }
}

impl Cpu {
    /// NCCL's reading of `arch` (v2.28.9-1 src/graph/topo.cc `kvDictCpuArch` through
    /// `kvConvertToInt`, a prefix match): anything but `x86_64`, `arm64` or `ppc64`, Linux's
    /// `aarch64` included, is an unknown CPU to NCCL. Sources that read the machine store
    /// NCCL's spelling ([`nccl_arch`]).
    pub fn arch(&self) -> CpuArch {
        match self.arch.as_deref() {
            Some(a) if a.starts_with("x86_64") => CpuArch::X86,
            Some(a) if a.starts_with("arm64") => CpuArch::Arm,
            Some(a) if a.starts_with("ppc64") => CpuArch::Power,
            // NCCL requires arch; a file without it is most likely an x86 box.
            None => CpuArch::X86,
            _ => CpuArch::Other,
        }
    }
    /// The inter-socket bandwidth NCCL gives links from this CPU (`BwConstants::sys_bw`).
    pub fn sys_bw(&self, c: &BwConstants) -> f64 {
        c.sys_bw(self.arch(), self.vendor_kind(), self.family, self.model)
    }

    pub fn vendor_kind(&self) -> CpuVendor {
        match self.vendor.as_deref().map(str::trim) {
            Some("GenuineIntel") => CpuVendor::Intel,
            Some("AuthenticAMD") | Some("HygonGenuine") => CpuVendor::Amd,
            Some("CentaurHauls") | Some("Shanghai") => CpuVendor::Zhaoxin,
            _ => CpuVendor::Other,
        }
    }
}

/// A PCIe switch port or bridge (NCCL node type PCI).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PciSwitch {
    pub busid: BusId,
    pub class: u32,
    pub vendor: Option<u16>,
    pub device: Option<u16>,
    pub subsystem_vendor: Option<u16>,
    pub subsystem_device: Option<u16>,
    pub pcie: PcieLink,
}

/// NVLink knowledge for a GPU: whether the source could tell which links exist.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", content = "reason", rename_all = "lowercase")]
pub enum NvlinkInfo {
    /// Links were enumerated (zero links is a real answer).
    Known,
    /// The source cannot say (no NVML, skeleton XML); the string says why.
    Unknown(String),
}

/// GPU fabric (NVLink multi-node) registration, where the driver reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FabricInfo {
    pub cluster_uuid: String,
    pub clique_id: u32,
    pub state: String,
    pub status: Option<String>,
}

/// What the CUDA driver says about one GPU: plain data a snapshot records (`nvml.json`).
pub use topo_documents::snapshot::CudaAttrs;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct C2cInfo {
    /// Per-link bandwidth in MB/s as NVML reports it.
    pub bw_mbps: u64,
    pub count: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub busid: BusId,
    /// NVML device index (`dev` in NCCL XML); -1 when unknown.
    pub dev: i32,
    pub name: Option<String>,
    /// Compute capability × 10 (+ minor): 90 for H100.
    pub sm: Option<u32>,
    pub memory_bytes: Option<u64>,
    pub uuid: Option<String>,
    /// GPUDirect RDMA support (`gdr` attribute); `None` when the source does not say.
    pub gdr: Option<bool>,
    /// NCCL rank recorded in a dumped XML, if any.
    pub rank: Option<i32>,
    pub class: u32,
    pub vendor: Option<u16>,
    pub device: Option<u16>,
    pub subsystem_vendor: Option<u16>,
    pub subsystem_device: Option<u16>,
    pub pcie: PcieLink,
    pub nvlink: NvlinkInfo,
    pub c2c: Option<C2cInfo>,
    pub fabric: Option<FabricInfo>,
    /// Whether the driver lets this GPU reach its peers over PCIe/NVLink (what
    /// `cudaDeviceCanAccessPeer` answers), where the source states it (a profile's `p2p`,
    /// `--p2p`); `None`: ask [`Gpu::peer_access`], which knows the device ids whose drivers
    /// refuse it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p2p: Option<bool>,
    /// The CUDA driver's attributes of this GPU (live discovery and snapshots only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaAttrs>,
    /// NVLinks the source states to GPUs it does not hold (one rank's dump, a trimmed file):
    /// the lanes exist, NCCL's graph leaves them out (no node to join), and neither "no
    /// NVLink" nor SHM may be concluded from their absence in the graph.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvlink_outside: Vec<OutsideNvlink>,
}

/// NVLink lanes from a GPU to a GPU the source names but does not hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutsideNvlink {
    pub target: BusId,
    pub lanes: u32,
}

/// PCI device ids (NVIDIA, 0x10de) whose current drivers refuse peer access between two
/// boards, with the source: `data/no-p2p-devices.txt`.
const NO_P2P_DEVICES: &str = include_str!("../data/no-p2p-devices.txt");

/// The device ids of [`NO_P2P_DEVICES`] with their names.
pub fn no_p2p_devices() -> &'static [(u16, &'static str)] {
    // Parsed once: every GPU asks, and 32,768 parses were 3 % of a 4,096-node plan.
    static TABLE: std::sync::OnceLock<Vec<(u16, &'static str)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(parse_no_p2p_devices)
}

fn parse_no_p2p_devices() -> Vec<(u16, &'static str)> {
    NO_P2P_DEVICES
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            let (id, name) = l.split_once(char::is_whitespace)?;
            let id = u16::from_str_radix(id.trim_start_matches("0x"), 16).ok()?;
            Some((id, name.trim()))
        })
        .collect()
}

/// Peer access of a GPU and where the answer came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerAccess {
    pub allowed: bool,
    /// `stated by the source`, `GeForce RTX 4090 (0x2684): its driver refuses peer access`.
    pub why: String,
}

impl Gpu {
    /// Whether peer access is allowed: the stated fact, else refused for the device ids of
    /// the built-in table, else allowed (NCCL's own check decides then).
    pub fn peer_access(&self) -> PeerAccess {
        if let Some(allowed) = self.p2p {
            let why = if allowed {
                "peer access stated as supported".to_string()
            } else {
                "peer access stated as refused by the driver".to_string()
            };
            return PeerAccess { allowed, why };
        }
        let listed = (self.vendor == Some(0x10de))
            .then_some(self.device)
            .flatten()
            .and_then(|d| no_p2p_devices().iter().copied().find(|&(id, _)| id == d));
        match listed {
            Some((id, name)) => PeerAccess {
                allowed: false,
                why: format!("{name} ({id:#06x}): its driver refuses peer access between boards"),
            },
            None => PeerAccess {
                allowed: true,
                why: String::new(),
            },
        }
    }

    pub fn new(busid: BusId, dev: i32) -> Gpu {
        Gpu {
            busid,
            dev,
            name: None,
            sm: None,
            memory_bytes: None,
            uuid: None,
            gdr: None,
            rank: None,
            class: 0x030200,
            vendor: Some(0x10de),
            device: None,
            subsystem_vendor: None,
            subsystem_device: None,
            pcie: PcieLink::default(),
            nvlink: NvlinkInfo::Known,
            c2c: None,
            fabric: None,
            p2p: None,
            cuda: None,
            nvlink_outside: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NvSwitch {
    /// `None` when the switch is hidden (VM/container: NVML reports an all-`f` id).
    pub busid: Option<BusId>,
    pub vendor: Option<u16>,
    pub device: Option<u16>,
}

/// A physical NIC (a PCI function grouping one or more network ports).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Nic {
    /// `None` for a NIC with no PCI location (NCCL attaches it to the CPU).
    pub busid: Option<BusId>,
    pub class: u32,
    pub vendor: Option<u16>,
    pub device: Option<u16>,
    pub subsystem_vendor: Option<u16>,
    pub subsystem_device: Option<u16>,
    pub pcie: PcieLink,
}

/// A network device (port) as a net plugin exports it (`<net>`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Net {
    /// Plugin device name: `mlx5_0`, `eth0`, `rdmap79s0`.
    pub name: String,
    /// Plugin device index.
    pub dev: i32,
    /// Port speed in Mbit/s.
    pub speed_mbps: Option<u64>,
    pub port: u32,
    pub guid: Option<u64>,
    pub gdr: bool,
    /// The source did not say whether the port has GPUDirect RDMA (no `gdr` attribute or
    /// field): `gdr` holds the default NCCL's XML reader uses (0), and at run time NCCL
    /// asks its net plugin instead, so the plan's no-GDR answer is an assumption. A port topo
    /// `assumed` holds the IB plugin's usual answer on a GPU image instead (1): NCCL reads no
    /// file for it, only the plugin.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gdr_unstated: bool,
    pub coll: bool,
    /// Extra latency in us added to inter-node latency.
    pub latency: f64,
    pub maxconn: Option<u32>,
    /// `InfiniBand`, `Ethernet` (IB devices), or `None` (plain netdev / unknown).
    pub link_layer: Option<String>,
    /// Port state as sysfs says it (`4: ACTIVE`, `up`).
    pub state: Option<String>,
    /// Network interface bound to this port, if any.
    pub netdev: Option<String>,
    /// What the port is for, where the source states it (a profile's `role`); otherwise
    /// [`Topology::net_roles`] infers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<NetRole>,
    /// The source shows NCCL reaching this port through its Socket transport (a plain
    /// interface with no RDMA device, or a log that says `Using network Socket`): its traffic
    /// goes through host memory by design, so GPUDirect RDMA is not a question for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub socket: bool,
    /// No source listed this port: topo assumed it (an InfiniBand controller of a skeleton
    /// file, which NCCL's IB plugin opens at run time); a written topology file leaves it out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub assumed: bool,
}

/// What a network port carries on a GPU server. NCCL does not know (it uses every port its
/// plugin lists, unless `NCCL_IB_HCA`/`NCCL_SOCKET_IFNAME` say otherwise); it decides what a
/// reader should count as the GPUs' network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetRole {
    /// The GPU fabric: the ports collectives run over.
    Compute,
    /// Storage network ports (a DGX's dual-port storage CX-7s).
    Storage,
    /// Management, front-end and container ports (100 GbE uplinks, docker0, Calico).
    FrontEnd,
}

impl NetRole {
    pub fn name(self) -> &'static str {
        match self {
            NetRole::Compute => "compute",
            NetRole::Storage => "storage",
            NetRole::FrontEnd => "front-end",
        }
    }
}

/// A port's role and how it was decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RoleGuess {
    pub role: NetRole,
    /// The source said so (profile `role`), rather than topo inferring it.
    pub stated: bool,
    /// Why, in a few words: `stated in the profile`, `docker0: a container interface`.
    pub why: String,
}

/// Interface name prefixes of container, overlay and VPN networks: never the GPU fabric.
const VIRTUAL_IFACES: [&str; 16] = [
    "docker",
    "veth",
    "cali",
    "flannel",
    "cni",
    "virbr",
    "br-",
    "tunl",
    "vxlan",
    "weave",
    "kube-",
    "cilium",
    "tailscale",
    "wg",
    "lo",
    "cloudflarewarp",
];

fn virtual_iface(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    VIRTUAL_IFACES
        .iter()
        .any(|p| n.starts_with(p) && (*p != "lo" || n == "lo"))
}

impl Net {
    pub fn bw(&self) -> f64 {
        bw::net_bw(self.speed_mbps)
    }
}

/// Any other PCI function (storage, management NIC without a net plugin device, …): shown in
/// the PCI tree, ignored by NCCL.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PciDevice {
    pub busid: BusId,
    pub class: u32,
    pub vendor: Option<u16>,
    pub device: Option<u16>,
    pub driver: Option<String>,
    pub pcie: PcieLink,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NodeKind {
    Cpu(Cpu),
    PciSwitch(PciSwitch),
    /// Boxed: a GPU's facts are twice the size of any other node's, and every node of a
    /// 131,072-GPU cluster was as large as a GPU (368 bytes) for it.
    Gpu(Box<Gpu>),
    NvSwitch(NvSwitch),
    Nic(Nic),
    Net(Net),
    PciDevice(PciDevice),
}

impl NodeKind {
    /// A GPU node.
    pub fn gpu(g: Gpu) -> NodeKind {
        NodeKind::Gpu(Box::new(g))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub host: HostId,
    /// The node this one hangs off in the PCI tree (CPU for root devices, NIC for a port);
    /// `None` for CPUs and NVSwitches.
    pub parent: Option<NodeIndex>,
    pub kind: NodeKind,
}

impl Node {
    pub fn busid(&self) -> Option<BusId> {
        match &self.kind {
            NodeKind::PciSwitch(p) => Some(p.busid),
            NodeKind::Gpu(g) => Some(g.busid),
            NodeKind::NvSwitch(s) => s.busid,
            NodeKind::Nic(n) => n.busid,
            NodeKind::PciDevice(d) => Some(d.busid),
            NodeKind::Cpu(_) | NodeKind::Net(_) => None,
        }
    }
    pub fn pcie(&self) -> Option<&PcieLink> {
        match &self.kind {
            NodeKind::PciSwitch(p) => Some(&p.pcie),
            NodeKind::Gpu(g) => Some(&g.pcie),
            NodeKind::Nic(n) => Some(&n.pcie),
            NodeKind::PciDevice(d) => Some(&d.pcie),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// Local: BCM `pcilink` between switches.
    Loc,
    NvLink,
    C2c,
    Pci,
    /// Inter-socket link between two CPUs of one host.
    Sys,
    /// NIC ↔ network port.
    Net,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub kind: LinkKind,
    /// GB/s with the default constants (NCCL 2.27+); `nccl::system` recomputes per version.
    pub bw: f64,
    /// NVLink or C2C lane count; 0 for other kinds.
    pub lanes: u32,
}

/// One machine's identity and software, as far as the source knows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub name: Option<String>,
    pub host_hash: Option<u64>,
    pub kernel: Option<String>,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub nvml_version: Option<String>,
    /// NCCL_* and CUDA_VISIBLE_DEVICES captured with the machine (snapshot) or the process.
    pub env: BTreeMap<String, String>,
    /// Why GPUs or NVLink could not be fully discovered (no NVML, …); empty when fine.
    pub gpu_discovery: Option<String>,
    /// NVLS multicast availability where the source states it: `Some(false, why)` for a box
    /// whose driver reports no multicast (H800 configurations, no fabric manager, a CUDA
    /// driver before 12.1); `None`: NCCL's own rule decides (sm 90+ with an NVSwitch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvls: Option<FactNote>,
    /// The multi-node NVLink domain this host's GPUs sit in (GB200/GB300 NVL72: one rack of 18
    /// trays), where the source states it; `--nodes` fills domains tray by tray.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_domain: Option<NvlinkDomain>,
}

/// A multi-node NVLink domain: the GPUs of several hosts behind one NVSwitch fabric, each
/// GPU registered with the fabric manager under the domain's cluster UUID and a clique id
/// (what NVML's `nvmlDeviceGetGpuFabricInfoV` reports, [`FabricInfo`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvlinkDomain {
    /// GPUs in the whole domain (72 for an NVL72 rack).
    pub gpus: u32,
}

/// A yes/no hardware fact with where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactNote {
    pub value: bool,
    /// `stated in the profile`, `NVML fabric state: not started (no fabric manager)`.
    pub why: String,
}

/// NVML's answer for one ordered GPU pair (`nvmlDeviceGetP2PStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct P2pCaps {
    pub read: Option<bool>,
    pub write: Option<bool>,
    pub nvlink: Option<bool>,
    pub atomics: Option<bool>,
}

/// What a topology was read from; plain data, so the documents that print it hold it.
pub use topo_documents::SourceKind;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceInfo {
    pub kind: SourceKind,
    /// File, folder or profile name the topology came from.
    pub origin: Option<String>,
    /// Facts the user stated over the source (`--gpu`, `--sm`, `--nvlink`, `--nic-speed`,
    /// `--gdr`), one note each: what was applied, to how many devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stated: Vec<String>,
    /// Where a cut file stops (`line 53 column 1`): the topology is the part before it, and
    /// devices after it are unknown rather than absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
    /// The fabric between nodes where a flag or profile stated it (`netfacts::apply`): NCCL's
    /// NET then runs over that fabric's transport. `None`: not stated, NCCL's default choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<topo_vocab::Fabric>,
    /// `--nic-speed` replaced a speed the source stated (`netfacts::apply`), as data for the
    /// fill of unknown speeds that follows (`stated`); the note in `stated` says it in words.
    #[serde(skip)]
    pub nic_speed_override: Option<SpeedOverride>,
}

/// `--nic-speed` over ports whose source stated another speed: the stated speed, the largest
/// speed it replaced and on how many compute ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpeedOverride {
    pub mbps: u64,
    pub was_mbps: u64,
    pub ports: usize,
}

impl std::fmt::Display for SpeedOverride {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--nic-speed {} Gb/s overrides the source's {} Gb/s on {} compute port(s)",
            self.mbps / 1000,
            self.was_mbps / 1000,
            self.ports
        )
    }
}

/// Copies of one machine after faults changed some of them (issue 43: `--without` on one of
/// 16,384 hosts made the whole machine dissimilar hosts, 3x the healthy plan). The other
/// copies are still the layout [`Topology::replicate`] made, so the analysis can build one of
/// them and repeat it, and build only the changed ones on their own.
#[derive(Clone, Debug)]
pub(crate) struct Changed {
    pub(crate) copies: Copies,
    /// The copies a fault changed (their hosts' nodes or links), or whose links a removal
    /// reordered (a removed edge's slot takes the graph's last edge).
    pub(crate) changed: std::collections::BTreeSet<usize>,
    /// The edge count after the last change: a later change that adds or removes links
    /// ends the record, as [`Topology::copies`] checks the counts.
    pub(crate) edges: usize,
}

/// How [`Topology::replicate`] laid the topology out: `count` copies of its first
/// `per_copy` hosts. Copy `c` holds hosts `c * per_copy ..` and nodes `c * nodes ..`, each
/// the counterpart of the first copy's node `c * nodes` places before it. Copies differ only
/// in their hosts' names and host hashes and, for GPUs registered with an NVLink fabric, in
/// the fabric's cluster UUID (one per NVLink domain, [`Topology::cluster_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Copies {
    pub count: usize,
    pub per_copy: usize,
    pub nodes: usize,
    pub edges: usize,
}

/// The most devices of one kind (GPUs, NICs, ports, PCI switches, CPUs) one host may hold:
/// NCCL's own capacity per node type (`NCCL_TOPO_MAX_NODES`, 640 since 2.29). Larger hosts
/// cannot be real, and path tables grow with the square of a host's size (a 10 MB XML with
/// 60 000 GPUs would need tens of GB). The readers refuse more; a log's `=== System` dump is
/// bounded by it.
pub const MAX_PER_HOST: usize = 640;

/// The most distinct source warnings a topology keeps ([`Topology::warn`]).
pub const MAX_WARNINGS: usize = 512;

#[derive(Clone, Debug, Default)]
pub struct Topology {
    pub graph: DiGraph<Node, Link>,
    pub hosts: Vec<Host>,
    /// NVML P2P status per ordered pair of GPU bus ids on one host.
    pub p2p: BTreeMap<(HostId, BusId, BusId), P2pCaps>,
    pub warnings: Vec<String>,
    pub source: SourceInfo,
    /// A host fused from several (an MNNVL clique, [`Topology::fuse_hosts`]): each node's
    /// position among the fused hosts, NCCL's system id of the node (`NCCL_TOPO_ID_SYSTEM_ID`).
    /// Empty otherwise.
    pub system_id: HashMap<NodeIndex, HostId>,
    /// Looked up only, never walked, so a fast hash: SipHash over a million nodes was a
    /// tenth of replicating 16,384 hosts.
    by_busid: fast::HashMap<(HostId, BusId), NodeIndex>,
    /// Set by [`Topology::replicate`], read through [`Topology::copies`].
    copies: Option<Copies>,
    /// Copies some of which a fault changed, read through [`Topology::copies_except`].
    changed: Option<Changed>,
}

impl Topology {
    pub fn new(source: SourceInfo) -> Topology {
        Topology {
            source,
            hosts: vec![Host::default()],
            ..Default::default()
        }
    }

    /// The source's warnings as documents carry them (`messages[]`).
    pub fn warning_messages(&self) -> impl Iterator<Item = message::Finding> + '_ {
        self.warnings
            .iter()
            .map(|w| message::Finding::new(message::SOURCE_WARNING, w))
    }

    /// Record a source warning once. At most [`MAX_WARNINGS`] distinct ones are kept (then a
    /// last line says more were dropped), so the duplicate check stays a bounded scan however
    /// many a hostile input provokes.
    pub fn warn(&mut self, msg: impl Into<String>) {
        if self.warnings.len() > MAX_WARNINGS {
            return;
        }
        let m = msg.into();
        if self.warnings.contains(&m) {
            return;
        }
        if self.warnings.len() == MAX_WARNINGS {
            self.warnings.push(format!(
                "more than {MAX_WARNINGS} distinct warnings about this source; the rest are not shown"
            ));
        } else {
            self.warnings.push(m);
        }
    }

    pub fn node(&self, n: NodeIndex) -> &Node {
        &self.graph[n]
    }
    pub fn node_mut(&mut self, n: NodeIndex) -> &mut Node {
        &mut self.graph[n]
    }

    pub fn find(&self, host: HostId, busid: BusId) -> Option<NodeIndex> {
        self.by_busid.get(&(host, busid)).copied()
    }

    /// Adds a node without links; registers its bus id for lookups.
    pub fn add_node(
        &mut self,
        host: HostId,
        parent: Option<NodeIndex>,
        kind: NodeKind,
    ) -> NodeIndex {
        let node = Node { host, parent, kind };
        let busid = node.busid();
        let idx = self.graph.add_node(node);
        if let Some(b) = busid {
            self.by_busid.entry((host, b)).or_insert(idx);
        }
        while self.hosts.len() <= host as usize {
            self.hosts.push(Host::default());
        }
        idx
    }

    /// Adds `kind` under `parent` and links the two with a PCI link in both directions whose
    /// bandwidth comes from the child's PCIe link (NCCL: the child element's link attributes).
    /// A NIC port (`Net`) is linked to its NIC with a NET link instead.
    pub fn add_child(&mut self, parent: NodeIndex, kind: NodeKind) -> NodeIndex {
        let host = self.graph[parent].host;
        let parent_is_cpu = matches!(self.graph[parent].kind, NodeKind::Cpu(_));
        let link = match &kind {
            NodeKind::Net(n) => Link {
                kind: LinkKind::Net,
                bw: n.bw(),
                lanes: 0,
            },
            // A NIC without a PCI location sits on the CPU at LOC bandwidth.
            NodeKind::Nic(n) if n.busid.is_none() && parent_is_cpu => Link {
                kind: LinkKind::Pci,
                bw: BwConstants::default().loc,
                lanes: 0,
            },
            other => Link {
                kind: LinkKind::Pci,
                bw: match other {
                    NodeKind::PciSwitch(p) => p.pcie.bw(),
                    NodeKind::Gpu(g) => g.pcie.bw(),
                    NodeKind::Nic(n) => n.pcie.bw(),
                    NodeKind::PciDevice(d) => d.pcie.bw(),
                    _ => BwConstants::default().loc,
                },
                lanes: 0,
            },
        };
        let idx = self.add_node(host, Some(parent), kind);
        self.connect_both(parent, idx, link);
        idx
    }

    pub fn connect(&mut self, from: NodeIndex, to: NodeIndex, link: Link) -> EdgeIndex {
        // NCCL adds bandwidth when the same (remote, type) link is declared again.
        if let Some(e) = self
            .graph
            .edges_connecting(from, to)
            .find(|e| e.weight().kind == link.kind)
            .map(|e| e.id())
        {
            let w = &mut self.graph[e];
            w.bw += link.bw;
            w.lanes += link.lanes;
            return e;
        }
        self.graph.add_edge(from, to, link)
    }

    pub fn connect_both(&mut self, a: NodeIndex, b: NodeIndex, link: Link) {
        self.connect(a, b, link.clone());
        self.connect(b, a, link);
    }

    /// Declares `lanes` NVLinks from `gpu` to `target` with the default lane bandwidth of the
    /// GPU's generation. Towards an NVSwitch or CPU both directions are created; towards a
    /// peer GPU only this one (the peer's own declaration makes the reverse).
    pub fn add_nvlink(&mut self, gpu: NodeIndex, target: NodeIndex, lanes: u32) {
        let sm = match &self.graph[gpu].kind {
            NodeKind::Gpu(g) => g.sm.unwrap_or(0),
            _ => 0,
        };
        let link = Link {
            kind: LinkKind::NvLink,
            bw: lanes as f64 * BwConstants::default().nvlink_lane(sm),
            lanes,
        };
        if matches!(self.graph[target].kind, NodeKind::Gpu(_)) {
            self.connect(gpu, target, link);
        } else {
            self.connect_both(gpu, target, link);
        }
    }

    /// Connects every pair of CPUs of the same host with SYS links (`ncclTopoConnectCpus`).
    /// Call once after all CPUs exist; existing SYS links are replaced.
    pub fn connect_cpus(&mut self) {
        self.graph.retain_edges(|g, e| g[e].kind != LinkKind::Sys);
        let cpus: Vec<NodeIndex> = self.cpus().collect();
        let c = BwConstants::default();
        for &a in &cpus {
            for &b in &cpus {
                if a == b || self.graph[a].host != self.graph[b].host {
                    continue;
                }
                let bw = match &self.graph[a].kind {
                    NodeKind::Cpu(cpu) => cpu.sys_bw(&c),
                    _ => unreachable!(),
                };
                self.graph.add_edge(
                    a,
                    b,
                    Link {
                        kind: LinkKind::Sys,
                        bw,
                        lanes: 0,
                    },
                );
            }
        }
    }

    fn nodes_where<'a>(
        &'a self,
        f: impl Fn(&NodeKind) -> bool + 'a,
    ) -> impl Iterator<Item = NodeIndex> + 'a {
        self.graph
            .node_indices()
            .filter(move |&n| f(&self.graph[n].kind))
    }

    pub fn cpus(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        self.nodes_where(|k| matches!(k, NodeKind::Cpu(_)))
    }

    /// GPUs in a stable order: host, then NVML index, then bus id.
    ///
    /// Keys are made once and the node index breaks ties, so an unstable sort orders as a
    /// stable one: reading the graph twice per comparison made this a twentieth of a plan's
    /// time at 131,072 GPUs, where several stages ask for the list.
    pub fn gpus(&self) -> Vec<NodeIndex> {
        self.gpus_among(self.graph.node_indices())
    }

    /// The GPUs among `nodes`, in [`Topology::gpus`]' order.
    pub fn gpus_among(&self, nodes: impl Iterator<Item = NodeIndex>) -> Vec<NodeIndex> {
        let mut keyed: Vec<_> = nodes
            .filter_map(|n| {
                let node = &self.graph[n];
                match &node.kind {
                    NodeKind::Gpu(g) => Some((node.host, g.dev, g.busid, n)),
                    _ => None,
                }
            })
            .collect();
        keyed.sort_unstable();
        keyed.into_iter().map(|k| k.3).collect()
    }

    /// Network ports in a stable order: host, then plugin device index, then name.
    pub fn nets(&self) -> Vec<NodeIndex> {
        self.nets_among(self.graph.node_indices())
    }

    /// The network ports among `nodes`, in [`Topology::nets`]' order.
    pub fn nets_among(&self, nodes: impl Iterator<Item = NodeIndex>) -> Vec<NodeIndex> {
        let mut v: Vec<NodeIndex> = nodes
            .filter(|&n| matches!(self.graph[n].kind, NodeKind::Net(_)))
            .collect();
        // Borrowed keys: cloning the name per comparison dominated at 32k ports.
        v.sort_by(|&a, &b| {
            let key = |n: NodeIndex| match &self.graph[n].kind {
                NodeKind::Net(x) => (self.graph[n].host, x.dev, x.name.as_str()),
                _ => unreachable!(),
            };
            key(a).cmp(&key(b))
        });
        v
    }

    pub fn nics(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        self.nodes_where(|k| matches!(k, NodeKind::Nic(_)))
    }
    pub fn nvswitches(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        self.nodes_where(|k| matches!(k, NodeKind::NvSwitch(_)))
    }
    pub fn pci_switches(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        self.nodes_where(|k| matches!(k, NodeKind::PciSwitch(_)))
    }

    pub fn gpu(&self, n: NodeIndex) -> Option<&Gpu> {
        match &self.graph[n].kind {
            NodeKind::Gpu(g) => Some(g),
            _ => None,
        }
    }
    pub fn net(&self, n: NodeIndex) -> Option<&Net> {
        match &self.graph[n].kind {
            NodeKind::Net(x) => Some(x),
            _ => None,
        }
    }
    pub fn cpu(&self, n: NodeIndex) -> Option<&Cpu> {
        match &self.graph[n].kind {
            NodeKind::Cpu(c) => Some(c),
            _ => None,
        }
    }

    /// Children in the PCI tree (nodes whose `parent` is `n`), in insertion order.
    pub fn children(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut v: Vec<NodeIndex> = self
            .graph
            .neighbors_directed(n, Direction::Outgoing)
            .filter(|&c| self.graph[c].parent == Some(n))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The PCI device of a GPU, NIC or network port: a port's NIC, else the node itself.
    pub fn pci_device(&self, n: NodeIndex) -> NodeIndex {
        match self.graph[n].kind {
            NodeKind::Net(_) => self.graph[n].parent.unwrap_or(n),
            _ => n,
        }
    }

    /// `n` and its PCI ancestors up to and including the CPU, nearest first.
    pub fn pci_chain(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut v = vec![n];
        let mut cur = n;
        while let Some(p) = self.graph[cur].parent {
            if v.contains(&p) || v.len() > 64 {
                break;
            }
            v.push(p);
            cur = p;
        }
        v
    }

    /// The lowest node that has both `a` and `b` below (or is one of them).
    pub fn common_ancestor(&self, a: NodeIndex, b: NodeIndex) -> Option<NodeIndex> {
        let cb = self.pci_chain(b);
        self.pci_chain(a).into_iter().find(|x| cb.contains(x))
    }

    /// The CPU (NUMA domain) at the root of `n`'s PCI chain.
    pub fn root_cpu(&self, mut n: NodeIndex) -> Option<NodeIndex> {
        for _ in 0..64 {
            if matches!(self.graph[n].kind, NodeKind::Cpu(_)) {
                return Some(n);
            }
            n = self.graph[n].parent?;
        }
        None
    }

    /// NUMA id of the CPU above `n`, or -1.
    pub fn numa_of(&self, n: NodeIndex) -> i32 {
        self.root_cpu(n)
            .and_then(|c| self.cpu(c))
            .map(|c| c.numa)
            .unwrap_or(-1)
    }

    /// PCI switches above `n`, nearest first (the CPU not included).
    fn switches_above(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut out = vec![];
        let mut cur = self.graph[n].parent;
        for _ in 0..64 {
            let Some(c) = cur else { break };
            if matches!(self.graph[c].kind, NodeKind::PciSwitch(_)) {
                out.push(c);
            }
            cur = self.graph[c].parent;
        }
        out
    }

    /// The role of every network port of `host`, stated or inferred: a stated `role` wins;
    /// container, overlay and VPN interfaces (`docker0`, `cali*`, `veth*`, ...) are
    /// front-end; a port slower than the host's fastest is front-end (a 100 GbE uplink beside
    /// 400G rails); when some of the fastest ports share a PCIe switch with a GPU, those of
    /// the same speed that do not are storage (a DGX's storage CX-7s on the CPU's root
    /// ports); the rest are compute.
    pub fn net_roles(&self, host: HostId) -> BTreeMap<NodeIndex, RoleGuess> {
        let of_host = |v: Vec<NodeIndex>| -> Vec<NodeIndex> {
            v.into_iter()
                .filter(|&n| self.graph[n].host == host)
                .collect()
        };
        self.roles_of(&of_host(self.nets()), &of_host(self.gpus()))
    }

    /// [`Topology::net_roles`] of every host at once: one pass over the graph instead of
    /// one per host (which made `topo show --nodes N` quadratic in N).
    pub fn net_roles_all(&self) -> BTreeMap<NodeIndex, RoleGuess> {
        let nhosts = self.host_count().max(self.hosts.len());
        let bucket = |v: Vec<NodeIndex>| {
            let mut out: Vec<Vec<NodeIndex>> = vec![vec![]; nhosts];
            for n in v {
                if let Some(b) = out.get_mut(self.graph[n].host as usize) {
                    b.push(n);
                }
            }
            out
        };
        let (nets, gpus) = (bucket(self.nets()), bucket(self.gpus()));
        nets.iter()
            .zip(&gpus)
            .flat_map(|(n, g)| self.roles_of(n, g))
            .collect()
    }

    /// The roles of one host's ports `nets`, given that host's GPUs.
    fn roles_of(&self, nets: &[NodeIndex], gpus: &[NodeIndex]) -> BTreeMap<NodeIndex, RoleGuess> {
        let is_virtual = |n: NodeIndex| {
            self.net(n).is_some_and(|x| {
                virtual_iface(&x.name) || x.netdev.as_deref().is_some_and(virtual_iface)
            })
        };
        let speed = |n: NodeIndex| self.net(n).and_then(|x| x.speed_mbps).filter(|&s| s > 0);
        let fastest = nets
            .iter()
            .filter(|&&n| !is_virtual(n))
            .filter_map(|&n| speed(n))
            .max();
        let gpu_switches: std::collections::HashSet<NodeIndex> =
            gpus.iter().flat_map(|&g| self.switches_above(g)).collect();
        let near_gpu = |n: NodeIndex| {
            let nic = self.graph[n].parent.unwrap_or(n);
            self.switches_above(nic)
                .iter()
                .chain(std::iter::once(&nic))
                .any(|s| gpu_switches.contains(s))
        };
        let fast_near = nets
            .iter()
            .filter(|&&n| !is_virtual(n) && speed(n) == fastest && near_gpu(n))
            .count();
        let guess = |role, why: String| RoleGuess {
            role,
            stated: false,
            why,
        };
        let gbps = |s: u64| format!("{} Gb/s", s / 1000);
        nets.iter()
            .map(|&n| {
                let x = self.net(n).expect("nets() holds ports");
                let g = if let Some(role) = x.role {
                    RoleGuess {
                        role,
                        stated: true,
                        why: "stated by the source".to_string(),
                    }
                } else if is_virtual(n) {
                    let name = x.netdev.as_deref().filter(|d| virtual_iface(d));
                    guess(
                        NetRole::FrontEnd,
                        format!("{}: a container or virtual interface", name.unwrap_or(&x.name)),
                    )
                } else if let (Some(s), Some(f)) = (speed(n), fastest)
                    && s < f
                {
                    guess(
                        NetRole::FrontEnd,
                        format!("{} is slower than the fastest ports ({})", gbps(s), gbps(f)),
                    )
                } else if fast_near > 0 && speed(n) == fastest && !near_gpu(n) {
                    guess(
                        NetRole::Storage,
                        format!(
                            "shares no PCIe switch with a GPU, while {fast_near} port{} of its speed do",
                            if fast_near == 1 { "" } else { "s" }
                        ),
                    )
                } else if speed(n).is_none() {
                    guess(NetRole::Compute, "speed unknown".to_string())
                } else {
                    guess(NetRole::Compute, "the host's fastest ports".to_string())
                };
                (n, g)
            })
            .collect()
    }

    /// Outgoing NVLink links of a GPU: (target, lanes, bw).
    pub fn nvlinks(&self, gpu: NodeIndex) -> Vec<(NodeIndex, u32, f64)> {
        self.graph
            .edges_directed(gpu, Direction::Outgoing)
            .filter(|e| e.weight().kind == LinkKind::NvLink)
            .map(|e| (e.target(), e.weight().lanes, e.weight().bw))
            .collect()
    }

    pub fn host_count(&self) -> usize {
        let max = self
            .graph
            .node_weights()
            .map(|n| n.host as usize + 1)
            .max()
            .unwrap_or(1);
        max.max(1)
    }

    /// The topology repeated `n` times as hosts 0..n behind their NICs (what-if for `n` nodes).
    /// Host names get a `-<i>` suffix; warnings are kept once.
    pub fn replicate(&self, n: usize) -> Topology {
        if n <= 1 {
            return self.clone();
        }
        let per = self.host_count();
        let mut out = Topology::new(self.source.clone());
        out.hosts.clear();
        out.warnings = self.warnings.clone();
        // Sized once: growing by doubling kept up to twice the graph (and a copy while it
        // moved) at 4,096 copies.
        out.graph.reserve_exact_nodes(n * self.graph.node_count());
        out.graph.reserve_exact_edges(n * self.graph.edge_count());
        out.by_busid.reserve(n * self.by_busid.len());
        for copy in 0..n {
            let base = (copy * per) as HostId;
            // Indexed by the original node's index: a copy's nodes are added in order.
            let map = out.append_graph(self, base);
            out.place_in_nvlink_domain(self, copy, base, &map);
            for (h, host) in self.hosts.iter().enumerate() {
                let mut host = host.clone();
                let name = host.name.clone().unwrap_or_else(|| "node".to_string());
                host.name = Some(format!("{name}-{copy}"));
                host.host_hash = host.host_hash.map(|x| x ^ (copy as u64 + 1));
                let slot = base as usize + h;
                while out.hosts.len() <= slot {
                    out.hosts.push(Host::default());
                }
                out.hosts[slot] = host;
            }
        }
        out.copies = Some(Copies {
            count: n,
            per_copy: per,
            nodes: self.graph.node_count(),
            edges: self.graph.edge_count(),
        });
        out
    }
}

impl Topology {
    /// Copy `copy` of `orig` (its hosts from `base` on): a host in a multi-node NVLink domain
    /// fills the domain before the next one starts, so with 4-GPU trays of a 72-GPU domain
    /// copies 0-17 share the first domain's cluster UUID and 18-35 get the second's. A domain
    /// is one fabric (one cluster UUID); the clique id stays as stated. A host that states no
    /// domain is a machine of its own: every copy gets its own fabric.
    fn place_in_nvlink_domain(
        &mut self,
        orig: &Topology,
        copy: usize,
        base: HostId,
        added: &[NodeIndex],
    ) {
        for (h, host) in orig.hosts.iter().enumerate() {
            let gpus = orig
                .gpus()
                .into_iter()
                .filter(|&g| orig.graph[g].host as usize == h)
                .count()
                .max(1);
            let per_domain = host
                .nvlink_domain
                .as_ref()
                .map_or(1, |d| (d.gpus as usize / gpus).max(1));
            let domain = copy / per_domain;
            if domain == 0 {
                continue;
            }
            let host_id = base + h as HostId;
            for &n in added {
                if self.graph[n].host != host_id {
                    continue;
                }
                if let NodeKind::Gpu(g) = &mut self.graph[n].kind
                    && let Some(f) = &mut g.fabric
                {
                    f.cluster_uuid = format!("{}-{domain}", f.cluster_uuid);
                }
            }
        }
    }

    /// The hosts of each group merged into one host (hosts renumbered in group order; a host
    /// in no group keeps a host of its own after them): NCCL's view of a multi-node NVLink
    /// clique, whose ranks fuse their topologies into one system (`ncclTopoGetSystem`, NCCL
    /// 2.28.9 src/graph/topo.cc). Nothing new is linked: each tray keeps its own CPUs and PCI
    /// tree, and the trays meet only where their GPUs' NVLinks reach the NVSwitch. GPU indices
    /// of later trays move up past the earlier trays' so that ranks stay in tray order. NET GUIDs
    /// left unset are given per original host, so two trays' first ports stay two NICs.
    /// Returns the topology and, per new host, the original hosts it holds.
    pub fn fuse_hosts(&self, groups: &[Vec<HostId>]) -> (Topology, Vec<Vec<HostId>>) {
        let n = self.host_count();
        let mut members: Vec<Vec<HostId>> =
            groups.iter().filter(|g| !g.is_empty()).cloned().collect();
        let mut grouped = vec![false; n];
        for g in &members {
            for &h in g {
                if let Some(x) = grouped.get_mut(h as usize) {
                    *x = true;
                }
            }
        }
        for (h, done) in grouped.iter().enumerate() {
            if !done {
                members.push(vec![h as HostId]);
            }
        }
        let mut new_of = vec![0 as HostId; n];
        for (i, g) in members.iter().enumerate() {
            for &h in g {
                if let Some(x) = new_of.get_mut(h as usize) {
                    *x = i as HostId;
                }
            }
        }
        // Ranks follow (host, GPU index): a fused host keeps its trays' ranks in tray order by
        // numbering each tray's GPUs after the previous trays' (NCCL's own ranks never move).
        // Each host's highest GPU index, in one pass: a scan of every GPU per tray was most
        // of a 16,384-tray plan (910 NVL72 racks: 108 s).
        let mut top: Vec<Option<i32>> = vec![None; n];
        for node in self.graph.node_weights() {
            if let (NodeKind::Gpu(g), Some(t)) = (&node.kind, top.get_mut(node.host as usize)) {
                *t = Some(t.map_or(g.dev.max(0), |x| x.max(g.dev.max(0))));
            }
        }
        let mut dev_offset = vec![0i32; n];
        for g in members.iter().filter(|g| g.len() > 1) {
            let mut next = 0i32;
            for &h in g {
                dev_offset[h as usize] = next;
                next += top[h as usize].map_or(0, |t| t + 1);
            }
        }
        let mut out = self.clone();
        // Fused hosts are not the copies --nodes made.
        out.forget_copies();
        for idx in out.graph.node_indices().collect::<Vec<_>>() {
            let node = &mut out.graph[idx];
            let orig = node.host;
            if let NodeKind::Gpu(g) = &mut node.kind {
                g.dev += dev_offset[orig as usize];
            }
            let group = &members[new_of[orig as usize] as usize];
            if group.len() > 1
                && let Some(pos) = group.iter().position(|&h| h == orig)
            {
                out.system_id.insert(idx, pos as HostId);
            }
            node.host = new_of.get(orig as usize).copied().unwrap_or(orig);
            if let NodeKind::Net(net) = &mut node.kind
                && net.guid.is_none()
            {
                net.guid = Some(((orig as u64) << 56) | net.dev.max(0) as u64);
            }
        }
        out.hosts = members
            .iter()
            .map(|g| {
                let mut h = self.hosts.get(g[0] as usize).cloned().unwrap_or_default();
                if g.len() > 1 {
                    let names: Vec<String> = g
                        .iter()
                        .map(|&x| {
                            self.hosts
                                .get(x as usize)
                                .and_then(|h| h.name.clone())
                                .unwrap_or_else(|| format!("host{x}"))
                        })
                        .collect();
                    h.name = Some(format!("{}..{}", names[0], names[names.len() - 1]));
                }
                h
            })
            .collect();
        // NVML's pair answers are keyed by bus id, which the trays of a clique share.
        out.p2p = self
            .p2p
            .iter()
            .filter(|((h, _, _), _)| members[new_of[*h as usize] as usize].len() == 1)
            .map(|((h, a, b), c)| ((new_of[*h as usize], *a, *b), c.clone()))
            .collect();
        // Bus ids repeat across a clique's trays: lookups by bus id find the first tray's.
        out.by_busid.clear();
        for idx in out.graph.node_indices() {
            if let Some(b) = out.graph[idx].busid() {
                out.by_busid.entry((out.graph[idx].host, b)).or_insert(idx);
            }
        }
        (out, members)
    }

    /// The topology with only the GPUs in `keep` (every other device stays, on its host):
    /// what a job sees under `CUDA_VISIBLE_DEVICES`. NVLinks to dropped GPUs go with them.
    pub fn retain_gpus(&self, keep: &std::collections::HashSet<NodeIndex>) -> Topology {
        let mut out = Topology::new(self.source.clone());
        out.hosts = self.hosts.clone();
        out.warnings = self.warnings.clone();
        let mut map: HashMap<NodeIndex, NodeIndex> = HashMap::new();
        for idx in self.graph.node_indices() {
            let node = &self.graph[idx];
            if !matches!(node.kind, NodeKind::Gpu(_)) || keep.contains(&idx) {
                map.insert(idx, out.add_node(node.host, None, node.kind.clone()));
            }
        }
        for (&old, &new) in &map {
            out.graph[new].parent = self.graph[old].parent.and_then(|p| map.get(&p).copied());
        }
        for e in self.graph.edge_references() {
            if let (Some(&a), Some(&b)) = (map.get(&e.source()), map.get(&e.target())) {
                out.graph.add_edge(a, b, e.weight().clone());
            }
        }
        out.p2p = self.p2p.clone();
        out
    }

    /// Every GPU on a host of its own that still holds every non-GPU device of the original
    /// host: what NCCL sees when each GPU runs in a container with its own host hash
    /// (one node per rank, NVIDIA/nccl#1781). GPU order is kept.
    pub fn split_per_gpu(&self) -> Topology {
        let groups: Vec<Vec<NodeIndex>> = self.gpus().into_iter().map(|g| vec![g]).collect();
        self.split_gpus(&groups)
    }

    /// One host per group of GPUs (each group from a single host), each holding the group's
    /// GPUs and every non-GPU device of the group's original host. Hosts are numbered in
    /// group order and named `<host>-<suffix><i>`.
    pub fn split_gpus(&self, groups: &[Vec<NodeIndex>]) -> Topology {
        let mut out = Topology::new(self.source.clone());
        out.hosts.clear();
        out.warnings = self.warnings.clone();
        // Each part reads only its own host's nodes, edges and P2P answers, gathered once:
        // scanning the whole machine per part was quadratic (32,768 parts of 16,384 hosts).
        let nhosts = self.hosts.len().max(1);
        let mut nodes: Vec<Vec<NodeIndex>> = vec![vec![]; nhosts];
        for n in self.graph.node_indices() {
            let h = self.graph[n].host as usize;
            if h >= nodes.len() {
                nodes.resize(h + 1, vec![]);
            }
            nodes[h].push(n);
        }
        let mut edges: Vec<Vec<EdgeIndex>> = vec![vec![]; nodes.len()];
        for e in self.graph.edge_references() {
            let (a, b) = (self.graph[e.source()].host, self.graph[e.target()].host);
            if a == b {
                edges[a as usize].push(e.id());
            }
        }
        type HostP2p<'a> = HashMap<HostId, Vec<(BusId, BusId, &'a P2pCaps)>>;
        let mut p2p: HostP2p = HashMap::new();
        for (&(h, a, b), caps) in &self.p2p {
            p2p.entry(h).or_default().push((a, b, caps));
        }
        for (i, group) in groups.iter().enumerate() {
            let Some(&first) = group.first() else {
                continue;
            };
            let host = self.graph[first].host;
            let base = i as HostId;
            // The group's GPUs and every other device of its host, in index order.
            let mut map: HashMap<NodeIndex, NodeIndex> = HashMap::new();
            for &n in &nodes[host as usize] {
                let node = &self.graph[n];
                if group.contains(&n) || !matches!(node.kind, NodeKind::Gpu(_)) {
                    map.insert(n, out.add_node(base, None, node.kind.clone()));
                }
            }
            for (&old, &new) in &map {
                out.graph[new].parent = self.graph[old].parent.and_then(|p| map.get(&p).copied());
            }
            for &e in &edges[host as usize] {
                let (a, b) = self.graph.edge_endpoints(e).expect("an edge of the graph");
                if let (Some(&a), Some(&b)) = (map.get(&a), map.get(&b)) {
                    out.graph.add_edge(a, b, self.graph[e].clone());
                }
            }
            let mut h = self.hosts.get(host as usize).cloned().unwrap_or_default();
            h.name = Some(format!(
                "{}-part{}",
                h.name.clone().unwrap_or_else(|| "node".into()),
                i
            ));
            while out.hosts.len() <= i {
                out.hosts.push(Host::default());
            }
            out.hosts[i] = h;
            for &(a, b, caps) in p2p.get(&host).into_iter().flatten() {
                out.p2p.insert((base, a, b), caps.clone());
            }
        }
        out.copies = self
            .copies()
            .filter(|c| periodic(groups, c))
            .map(|c| Copies {
                count: c.count,
                per_copy: groups.len() / c.count,
                nodes: out.graph.node_count() / c.count,
                edges: out.graph.edge_count() / c.count,
            });
        out
    }
}

/// Whether every copy is split as the first one is: its groups, in order, are the first
/// copy's groups moved by its place. The parts of copies are then copies too.
fn periodic(groups: &[Vec<NodeIndex>], c: &Copies) -> bool {
    let per = groups.len() / c.count;
    groups.len() % c.count == 0
        && groups.iter().enumerate().all(|(i, g)| {
            let (k, first) = (i / per, &groups[i % per]);
            g.len() == first.len()
                && g.iter()
                    .zip(first)
                    .all(|(a, b)| a.index() == b.index() + k * c.nodes)
        })
}

/// PCI class helpers (class codes as 24-bit values, `0x030200`).
pub mod class {
    pub const BRIDGE: u32 = 0x060400;
    pub const NVSWITCH: u32 = 0x068000;
    pub const IB: u32 = 0x020700;
    pub const ETHERNET: u32 = 0x020000;

    pub fn is_gpu(c: u32) -> bool {
        c >> 16 == 0x03
    }
    pub fn is_network(c: u32) -> bool {
        c >> 16 == 0x02
    }
    pub fn is_bridge(c: u32) -> bool {
        c >> 8 == 0x0604
    }
    pub fn is_nvswitch(c: u32) -> bool {
        c >> 8 == 0x0680 && c & 0xff == 0
    }
    /// Short human name for the PCI tree view.
    pub fn describe(c: u32) -> &'static str {
        match c >> 8 {
            0x0604 => "PCI bridge",
            0x0300 => "VGA controller",
            0x0302 => "3D controller",
            0x0200 => "Ethernet controller",
            0x0207 => "InfiniBand controller",
            0x0680 => "Bridge",
            0x0108 => "NVMe controller",
            0x0106 => "SATA controller",
            0x0100 => "SCSI controller",
            0x0c03 => "USB controller",
            0x0600 => "Host bridge",
            0x0601 => "ISA bridge",
            0x0801 => "DMA controller",
            0x0880 => "System peripheral",
            0x1200 => "Processing accelerator",
            0x0280 => "Network controller",
            0x0500 => "RAM memory",
            _ => "PCI device",
        }
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod testing {
    //! Small machines built in code for unit tests of every layer.
    use super::*;

    /// Two GPUs behind one CPU whose NVLink and compute capability the source left unknown
    /// (a skeleton XML), with one IB port of unknown speed and GPUDirect RDMA.
    pub fn two_gpus_unknown_nvlink() -> Topology {
        let mut t = Topology::new(SourceInfo {
            kind: crate::SourceKind::Test,
            ..Default::default()
        });
        let cpu = t.add_node(0, None, NodeKind::Cpu(Cpu::default()));
        for d in 0..2 {
            let mut g = Gpu::new(BusId::new(0, 0x10 + d as u8, 0, 0), d);
            g.nvlink = NvlinkInfo::Unknown("skeleton".into());
            t.add_child(cpu, NodeKind::gpu(g));
        }
        let nic = t.add_child(cpu, NodeKind::Nic(Nic::default()));
        t.add_child(
            nic,
            NodeKind::Net(Net {
                name: "mlx5_0".into(),
                gdr_unstated: true,
                ..Default::default()
            }),
        );
        t
    }

    /// One socket, `n` GPUs of compute capability `sm` each behind its own Gen5 switch with
    /// one 400G IB NIC, all GPUs with 18 NVLinks to 4 NVSwitch chips (5/5/4/4), as on HGX H100.
    pub fn hgx(n: usize, sm: u32) -> Topology {
        let devs: Vec<i32> = (0..n as i32).collect();
        hgx_board(&devs, sm, |_| true, true)
    }

    /// An HGX-like board: the GPUs `devs` (NVML indices) each behind its own Gen5 switch, all
    /// on one socket, 18 NVLinks each to four NVSwitch chips; a 400G NIC (numbered in order)
    /// next to the GPUs for which `nic_on(dev)` holds, with GPUDirect RDMA `gdr`.
    pub fn hgx_board(devs: &[i32], sm: u32, nic_on: impl Fn(i32) -> bool, gdr: bool) -> Topology {
        let mut t = Topology::new(SourceInfo {
            kind: crate::SourceKind::Test,
            origin: None,
            ..Default::default()
        });
        let cpu = t.add_node(
            0,
            None,
            NodeKind::Cpu(Cpu {
                numa: 0,
                arch: Some("x86_64".into()),
                vendor: Some("GenuineIntel".into()),
                family: Some(6),
                model: Some(143),
                ..Default::default()
            }),
        );
        let switches: Vec<NodeIndex> = (0..4u8)
            .map(|i| {
                t.add_node(
                    0,
                    None,
                    NodeKind::NvSwitch(NvSwitch {
                        busid: Some(BusId::new(0, 0x05 + i, 0, 0)),
                        ..Default::default()
                    }),
                )
            })
            .collect();
        let gen5 = PcieLink::new(Some("32.0 GT/s PCIe"), Some(16));
        let mut nic_dev = 0;
        for &d in devs {
            let bus = 0x10 + (d as u8) * 0x10;
            let sw = t.add_child(
                cpu,
                NodeKind::PciSwitch(PciSwitch {
                    busid: BusId::new(0, bus, 0, 0),
                    class: class::BRIDGE,
                    pcie: gen5.clone(),
                    ..Default::default()
                }),
            );
            let mut g = Gpu::new(BusId::new(0, bus + 1, 0, 0), d);
            g.sm = Some(sm);
            g.gdr = Some(true);
            g.pcie = gen5.clone();
            let gi = t.add_child(sw, NodeKind::gpu(g));
            for (k, &s) in switches.iter().enumerate() {
                t.add_nvlink(gi, s, if k < 2 { 5 } else { 4 });
            }
            if nic_on(d) {
                let nic = t.add_child(
                    sw,
                    NodeKind::Nic(Nic {
                        busid: Some(BusId::new(0, bus + 2, 0, 0)),
                        class: class::IB,
                        pcie: gen5.clone(),
                        ..Default::default()
                    }),
                );
                t.add_child(
                    nic,
                    NodeKind::Net(Net {
                        name: format!("mlx5_{nic_dev}"),
                        dev: nic_dev,
                        speed_mbps: Some(400_000),
                        port: 1,
                        gdr,
                        ..Default::default()
                    }),
                );
                nic_dev += 1;
            }
        }
        t.connect_cpus();
        t
    }

    /// Two sockets (CPU `vendor`, `family`, `model`), one Gen4 switch per socket with two sm89
    /// GPUs each, no NVLink; a 200G IB NIC in socket 0's switch, and in socket 1's too when
    /// `nic_per_socket`; GPUs and NICs with GPUDirect RDMA `gdr`.
    pub fn pcie_box(
        vendor: &str,
        family: u32,
        model: u32,
        nic_per_socket: bool,
        gdr: bool,
    ) -> Topology {
        let mut t = Topology::new(SourceInfo::default());
        let gen4 = PcieLink::new(Some("16.0 GT/s PCIe"), Some(16));
        for s in 0..2u8 {
            let cpu = t.add_node(
                0,
                None,
                NodeKind::Cpu(Cpu {
                    numa: s as i32,
                    arch: Some("x86_64".into()),
                    vendor: Some(vendor.into()),
                    family: Some(family),
                    model: Some(model),
                    ..Default::default()
                }),
            );
            let sw = t.add_child(
                cpu,
                NodeKind::PciSwitch(PciSwitch {
                    busid: BusId::new(0, 0x10 + s * 0x40, 0, 0),
                    class: class::BRIDGE,
                    pcie: gen4.clone(),
                    ..Default::default()
                }),
            );
            for k in 0..2u8 {
                let mut g = Gpu::new(BusId::new(0, 0x11 + s * 0x40 + k, 0, 0), (s * 2 + k) as i32);
                g.sm = Some(89);
                g.gdr = Some(gdr);
                g.pcie = gen4.clone();
                t.add_child(sw, NodeKind::gpu(g));
            }
            if s == 0 || nic_per_socket {
                let nic = t.add_child(
                    sw,
                    NodeKind::Nic(Nic {
                        busid: Some(BusId::new(0, 0x18 + s * 0x40, 0, 0)),
                        class: class::IB,
                        pcie: gen4.clone(),
                        ..Default::default()
                    }),
                );
                t.add_child(
                    nic,
                    NodeKind::Net(Net {
                        name: format!("mlx5_{s}"),
                        dev: s as i32,
                        speed_mbps: Some(200_000),
                        gdr,
                        ..Default::default()
                    }),
                );
            }
        }
        t.connect_cpus();
        t
    }

    /// Shape of [`two_sockets_two_switches`]: two Intel sockets, two PCIe switches per socket,
    /// two GPUs per switch, an IB NIC in the switches listed.
    pub struct SwitchBox {
        /// Intel family-6 model of both CPUs (decides the inter-socket bandwidth).
        pub cpu_model: u32,
        pub link: &'static str,
        pub sm: u32,
        /// NIC bus number relative to its switch's.
        pub nic_offset: u8,
        pub nic_mbps: u64,
        pub nic_port: u32,
        /// Switches (0, 1 on socket 0; 2, 3 on socket 1) that hold a NIC `mlx5_<switch>`.
        pub nic_switches: Vec<u8>,
    }

    /// The machine `spec` describes, and its GPUs in NVML index order.
    pub fn two_sockets_two_switches(spec: &SwitchBox) -> (Topology, Vec<NodeIndex>) {
        let mut t = Topology::new(SourceInfo {
            kind: crate::SourceKind::Test,
            origin: None,
            ..Default::default()
        });
        let link = PcieLink::new(Some(spec.link), Some(16));
        let mut gpus = vec![];
        for s in 0..2u8 {
            let cpu = t.add_node(
                0,
                None,
                NodeKind::Cpu(Cpu {
                    numa: s as i32,
                    arch: Some("x86_64".into()),
                    vendor: Some("GenuineIntel".into()),
                    family: Some(6),
                    model: Some(spec.cpu_model),
                    ..Default::default()
                }),
            );
            for w in 0..2u8 {
                let bus = 0x10 + s * 0x80 + w * 0x40;
                let sw = t.add_child(
                    cpu,
                    NodeKind::PciSwitch(PciSwitch {
                        busid: BusId::new(0, bus, 0, 0),
                        class: class::BRIDGE,
                        pcie: link.clone(),
                        ..Default::default()
                    }),
                );
                for k in 0..2u8 {
                    let mut g =
                        Gpu::new(BusId::new(0, bus + 1 + k, 0, 0), (s * 4 + w * 2 + k) as i32);
                    g.sm = Some(spec.sm);
                    g.gdr = Some(true);
                    g.pcie = link.clone();
                    gpus.push(t.add_child(sw, NodeKind::gpu(g)));
                }
                let switch = s * 2 + w;
                if !spec.nic_switches.contains(&switch) {
                    continue;
                }
                let nic = t.add_child(
                    sw,
                    NodeKind::Nic(Nic {
                        busid: Some(BusId::new(0, bus + spec.nic_offset, 0, 0)),
                        class: class::IB,
                        pcie: link.clone(),
                        ..Default::default()
                    }),
                );
                t.add_child(
                    nic,
                    NodeKind::Net(Net {
                        name: format!("mlx5_{switch}"),
                        dev: switch as i32,
                        speed_mbps: Some(spec.nic_mbps),
                        port: spec.nic_port,
                        gdr: true,
                        ..Default::default()
                    }),
                );
            }
        }
        t.connect_cpus();
        (t, gpus)
    }

    #[test]
    fn hgx_builder_shapes() {
        let t = hgx(8, 90);
        assert_eq!(t.gpus().len(), 8);
        assert_eq!(t.nets().len(), 8);
        let g0 = t.gpus()[0];
        let lanes: u32 = t.nvlinks(g0).iter().map(|l| l.1).sum();
        assert_eq!(lanes, 18);
        let bw: f64 = t.nvlinks(g0).iter().map(|l| l.2).sum();
        assert!((bw - 370.8).abs() < 1e-9);
        assert_eq!(t.numa_of(g0), 0);
        let r = t.replicate(2);
        assert_eq!(r.gpus().len(), 16);
        assert_eq!(r.host_count(), 2);
        assert_eq!(r.node(r.gpus()[8]).host, 1);
        let s = t.split_per_gpu();
        assert_eq!(s.gpus().len(), 8);
        assert_eq!(s.host_count(), 8);
        assert_eq!(s.nets().len(), 64);
        assert!(
            s.gpus()
                .iter()
                .enumerate()
                .all(|(i, &g)| s.node(g).host as usize == i)
        );
        // NVLinks to the NVSwitch chips survive; links to other GPUs cannot exist.
        let lanes: u32 = s.nvlinks(s.gpus()[3]).iter().map(|l| l.1).sum();
        assert_eq!(lanes, 18);
    }

    #[test]
    fn net_roles_all_is_every_hosts_net_roles() {
        let mut t = hgx(8, 90);
        // One slower port, so the roles are not all alike.
        let n = t.nets()[5];
        if let NodeKind::Net(x) = &mut t.node_mut(n).kind {
            x.speed_mbps = Some(100_000);
        }
        let r = t.replicate(3);
        let per_host: BTreeMap<NodeIndex, RoleGuess> =
            (0..3).flat_map(|h| r.net_roles(h)).collect();
        assert_eq!(per_host.len(), 24);
        assert_eq!(r.net_roles_all(), per_host);
    }
}

#[cfg(test)]
mod cpu_arch_tests {
    use super::*;

    fn arch_of(a: Option<&str>) -> CpuArch {
        Cpu {
            arch: a.map(String::from),
            ..Default::default()
        }
        .arch()
    }

    /// NCCL matches `x86_64`, `arm64` and `ppc64` as prefixes (topo.cc `kvDictCpuArch`); Linux's
    /// `aarch64` is an unknown CPU to it, so sources store NCCL's spelling.
    #[test]
    fn cpu_arch_is_read_as_nccl_reads_it() {
        assert_eq!(arch_of(Some("x86_64")), CpuArch::X86);
        assert_eq!(arch_of(Some("arm64")), CpuArch::Arm);
        assert_eq!(arch_of(Some("ppc64")), CpuArch::Power);
        assert_eq!(arch_of(Some("aarch64")), CpuArch::Other);
        assert_eq!(arch_of(None), CpuArch::X86);
        assert_eq!(nccl_arch("aarch64"), "arm64");
        assert_eq!(nccl_arch("powerpc64le"), "ppc64");
        assert_eq!(nccl_arch("x86_64"), "x86_64");
    }
}

#[cfg(test)]
mod warn_tests {
    use super::*;

    #[test]
    fn warnings_are_kept_once_and_capped() {
        let mut t = Topology::new(SourceInfo::default());
        t.warn("a");
        t.warn("a");
        assert_eq!(t.warnings, ["a"]);
        for i in 0..5000 {
            t.warn(format!("w{i}"));
        }
        assert_eq!(t.warnings.len(), MAX_WARNINGS + 1);
        assert!(t.warnings[MAX_WARNINGS].contains("the rest are not shown"));
    }
}
