//! Facts a user states about a machine that its source leaves out (`--gpu`, `--sm`,
//! `--nvlink`, `--nic-speed`, `--gdr`): a matrix or a cloud image's skeleton XML says nothing
//! of compute capability, NVLink or GPUDirect RDMA, and its users know them. A stated fact
//! fills what the source leaves unknown; where the source states something else it wins over
//! the source, and the note says so. Every note lands in the topology's
//! [`SourceInfo::stated`](crate::SourceInfo), which plans and documents carry.

use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;

use crate::bw::BwConstants;
use crate::{LinkKind, NodeKind, NvSwitch, NvlinkInfo, Topology};

/// A GPU model's facts that NCCL's model needs, from vendor documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuModel {
    /// The name `--gpu` takes (lowercase).
    pub key: &'static str,
    pub name: &'static str,
    pub sm: u32,
    /// NVLink lanes per GPU on the boards that have them (to the NVSwitches on SXM boards,
    /// over the bridges on PCIe cards); 0: no NVLink.
    pub nvlink_lanes: u32,
    /// How its NVLinks are wired on the usual board: NVSwitch, bridge pairs, or none.
    pub nvlink: NvlinkShape,
    /// PCI device id where one board is meant (it selects the driver's peer-access policy,
    /// `data/no-p2p-devices.txt`); `None` where the model comes in several.
    pub device: Option<u16>,
}

/// How a host's GPUs are joined by NVLink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvlinkShape {
    NvSwitch,
    /// Bridges joining GPUs two by two, in bus-id order.
    Pairs,
    None,
}

impl NvlinkShape {
    pub fn parse(s: &str) -> Option<NvlinkShape> {
        match s.to_ascii_lowercase().as_str() {
            "nvswitch" | "switch" => Some(NvlinkShape::NvSwitch),
            "pairs" | "bridge" | "bridges" => Some(NvlinkShape::Pairs),
            "none" | "no" | "off" => Some(NvlinkShape::None),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NvlinkShape::NvSwitch => "nvswitch",
            NvlinkShape::Pairs => "pairs",
            NvlinkShape::None => "none",
        }
    }
}

macro_rules! gpu {
    ($key:literal, $name:literal, $sm:literal, $lanes:literal, $shape:ident, $dev:expr) => {
        GpuModel {
            key: $key,
            name: $name,
            sm: $sm,
            nvlink_lanes: $lanes,
            nvlink: NvlinkShape::$shape,
            device: $dev,
        }
    };
}

/// The GPU models `--gpu` knows. Lanes: NVLink 2 (V100) 6 per GPU, NVLink 3 (A100) 12 on
/// SXM and over the PCIe card's three bridges, NVLink 4 (H100/H200) 18 on SXM and 12 over
/// the H100 PCIe/NVL bridges, NVLink 5 (B200/B300) 18; the A800/H800 export parts keep 8;
/// A40, A30, RTX A6000 and GeForce RTX 3090 bridges carry 4 NVLink 3 lanes (112.5 to 200
/// GB/s); the GeForce RTX 2080 Ti's bridge 2 NVLink 2 lanes (TU102's two x8 links, 100 GB/s
/// both ways; NVIDIA's Turing architecture whitepaper), which NCCL prices as Volta's
/// (`ncclTopoNVLinkBw`: every sm 7x GPU at SM70_NVLINK_BW; 2.6's VOLTA_NVLINK_WIDTH, 21, for
/// every GPU but sm 60); the V100 PCIe, T4, A10/A10G, L4, L40/L40S and the GeForce and RTX
/// Ada/Blackwell cards have none.
pub const GPU_MODELS: &[GpuModel] = &[
    gpu!("v100", "Tesla V100-SXM2", 70, 6, NvSwitch, None),
    gpu!("v100-pcie", "Tesla V100-PCIE", 70, 0, None, None),
    gpu!("t4", "Tesla T4", 75, 0, None, Some(0x1eb8)),
    gpu!("a100", "A100-SXM4", 80, 12, NvSwitch, None),
    gpu!("a100-pcie", "A100 PCIe", 80, 12, Pairs, None),
    gpu!("a800", "A800-SXM4", 80, 8, NvSwitch, None),
    gpu!("a30", "A30", 80, 4, Pairs, Some(0x20b7)),
    gpu!("a40", "A40", 86, 4, Pairs, None),
    gpu!("a10", "A10", 86, 0, None, Some(0x2236)),
    gpu!("a10g", "A10G", 86, 0, None, Some(0x2237)),
    gpu!("a6000", "RTX A6000", 86, 4, Pairs, None),
    gpu!("l40s", "L40S", 89, 0, None, None),
    gpu!("l40", "L40", 89, 0, None, None),
    gpu!("l4", "L4", 89, 0, None, None),
    gpu!("rtx6000-ada", "RTX 6000 Ada Generation", 89, 0, None, None),
    gpu!("rtx3090", "GeForce RTX 3090", 86, 4, Pairs, Some(0x2204)),
    gpu!("rtx4090", "GeForce RTX 4090", 89, 0, None, Some(0x2684)),
    gpu!("h100", "H100 SXM5 80GB", 90, 18, NvSwitch, Some(0x2330)),
    gpu!("h100-pcie", "H100 PCIe", 90, 12, Pairs, None),
    gpu!("h100-nvl", "H100 NVL", 90, 12, Pairs, None),
    gpu!("h800", "H800", 90, 8, NvSwitch, None),
    gpu!("h200", "H200", 90, 18, NvSwitch, Some(0x2335)),
    gpu!("h20", "H20", 90, 18, NvSwitch, None),
    gpu!("gh200", "GH200", 90, 18, NvSwitch, None),
    gpu!("b200", "B200", 100, 18, NvSwitch, Some(0x2901)),
    gpu!("gb200", "GB200", 100, 18, NvSwitch, None),
    gpu!("b300", "B300", 103, 18, NvSwitch, None),
    gpu!("gb300", "GB300", 103, 18, NvSwitch, None),
    gpu!("rtx5090", "GeForce RTX 5090", 120, 0, None, Some(0x2b85)),
    gpu!("rtx-pro-6000", "RTX PRO 6000 Blackwell", 120, 0, None, None),
    // Last, so that the hints listing models keep their order. Two PCI ids (0x1e04, 0x1e07
    // "Rev. A"; pci.ids): no one board is meant.
    gpu!("rtx2080ti", "GeForce RTX 2080 Ti", 75, 2, Pairs, None),
];

/// Other names a model goes by, squashed as [`squash`] leaves them: NVML's product names
/// (`NVIDIA RTX A6000`), board forms and vendors' shorthands. Keys and these are the only
/// names `--gpu` takes; nothing is matched by prefix, so a name is never taken for a near one.
const ALIASES: &[(&str, &str)] = &[
    ("rtxa6000", "a6000"),
    ("a6000ada", "rtx6000-ada"),
    ("rtx6000adageneration", "rtx6000-ada"),
    ("rtx6000ada", "rtx6000-ada"),
    ("rtxpro6000blackwell", "rtx-pro-6000"),
    ("rtxpro6000blackwellserveredition", "rtx-pro-6000"),
    ("rtxpro6000blackwellworkstationedition", "rtx-pro-6000"),
    ("rtxpro6000blackwellmaxqworkstationedition", "rtx-pro-6000"),
    ("h100nvlink", "h100"),
    ("2080ti", "rtx2080ti"),
];

/// A GPU name as the table keys it: lowercase, without spaces, `-`, `_`, the vendor and
/// product-line words (`NVIDIA`, `Tesla`, `GeForce`, `HGX`, `DGX`), the memory
/// (`80GB`, `144G`, `HBM3e`) and the SXM form factor (`SXM5`, and the `AC` NVML adds to a B300
/// SXM6), which no two models here differ by. `NVIDIA H100 80GB HBM3`, `h100-sxm` and `H100`
/// all read `h100`; `NVIDIA A100-PCIE-40GB` reads `a100pcie`.
fn squash(name: &str) -> String {
    let lower = name.to_ascii_lowercase().replace(['-', '_'], " ");
    let noise = |t: &str| {
        matches!(t, "nvidia" | "tesla" | "geforce" | "hgx" | "dgx" | "ac")
            || t.starts_with("hbm")
            || t.strip_prefix("sxm")
                .is_some_and(|d| d.chars().all(|c| c.is_ascii_digit()))
            || memory_size(t)
    };
    lower.split_whitespace().filter(|t| !noise(t)).collect()
}

/// `80gb`, `144g`, `48gb`: a memory size, not a model.
fn memory_size(t: &str) -> bool {
    let unit = t.trim_start_matches(|c: char| c.is_ascii_digit());
    unit.len() < t.len() && matches!(unit, "g" | "gb")
}

/// The model `--gpu` names: its key or another name it goes by, case, spacing, vendor words,
/// memory size and SXM form ignored (`H100`, `h100-sxm`, `H100 80GB HBM3`, `NVIDIA A10G`,
/// `rtx 4090`).
pub fn gpu_model(name: &str) -> Option<&'static GpuModel> {
    let want = squash(name);
    let key = ALIASES
        .iter()
        .find(|(alias, _)| *alias == want)
        .map(|(_, key)| *key);
    GPU_MODELS
        .iter()
        .find(|m| key.map_or_else(|| squash(m.key) == want, |k| m.key == k))
}

/// The model a PCI id suggests where a source states the id but no model: a guess (one id
/// can be several boards, and the table keys one board per id), for hints and for saying what
/// was assumed, never for a conclusion the source does not state.
pub fn model_by_pci_id(vendor: Option<u16>, device: Option<u16>) -> Option<&'static GpuModel> {
    if vendor != Some(0x10de) {
        return None;
    }
    GPU_MODELS
        .iter()
        .find(|m| m.device.is_some() && m.device == device)
}

/// The compute capability every GPU of the source states, when they agree on one.
fn one_sm(topo: &Topology) -> Option<u32> {
    let mut sms = topo
        .gpus()
        .into_iter()
        .filter_map(|n| topo.gpu(n).and_then(|g| g.sm));
    let first = sms.next()?;
    sms.all(|s| s == first).then_some(first)
}

/// NVLink lanes per GPU when only the compute capability is known (the SXM boards).
fn default_lanes(sm: u32) -> u32 {
    match sm {
        70..=79 => 6,
        80..=89 => 12,
        90..=99 => 18,
        100..=119 => 18,
        _ => 0,
    }
}

/// What the user stated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stated {
    pub gpu: Option<&'static GpuModel>,
    pub sm: Option<u32>,
    /// The shape and, when given (`nvswitch:18`), the lanes per GPU.
    pub nvlink: Option<(NvlinkShape, Option<u32>)>,
    pub nic_speed_mbps: Option<u64>,
    pub gdr: Option<bool>,
    /// Where the facts come from when not from flags (`profile dgx-h100`): notes say so.
    pub via: Option<String>,
}

impl Stated {
    pub fn is_empty(&self) -> bool {
        *self == Stated::default()
    }

    /// The facts of a reference machine (a profile) a source without them can borrow: its
    /// first GPU's model (by PCI id) or compute capability, its NVLink shape and lanes, its
    /// compute ports' speed and GPUDirect RDMA. The source keeps its own PCI layout.
    pub fn from_reference(r: &Topology, via: &str) -> Stated {
        let gpus = r.gpus();
        let first = gpus.first().and_then(|&n| Some((n, r.gpu(n)?)));
        let gpu = first.and_then(|(_, g)| {
            GPU_MODELS
                .iter()
                .find(|m| m.device.is_some() && m.device == g.device)
        });
        let nvlink = first.map(|(n, _)| {
            let links = r.nvlinks(n);
            let lanes: u32 = links.iter().map(|l| l.1).sum();
            let to_gpu = links.iter().any(|l| r.gpu(l.0).is_some());
            let shape = match (lanes, to_gpu) {
                (0, _) => NvlinkShape::None,
                (_, true) => NvlinkShape::Pairs,
                _ => NvlinkShape::NvSwitch,
            };
            (shape, (lanes > 0).then_some(lanes))
        });
        let nets: Vec<&crate::Net> = r.nets().into_iter().filter_map(|n| r.net(n)).collect();
        Stated {
            gpu,
            sm: first.and_then(|(_, g)| g.sm).filter(|_| gpu.is_none()),
            nvlink,
            nic_speed_mbps: nets.iter().filter_map(|x| x.speed_mbps).max(),
            gdr: nets.iter().find(|x| !x.gdr_unstated).map(|x| x.gdr),
            via: Some(via.to_string()),
        }
    }

    /// Apply to every host of `topo`; each fact applied is noted in its source info.
    pub fn apply(&self, topo: &mut Topology) {
        let mut notes = Vec::new();
        let sm = self.sm.or(self.gpu.map(|g| g.sm));
        if self.gpu.is_some() || sm.is_some() {
            notes.extend(self.apply_gpus(topo, sm));
            refresh_nvlink_bw(topo);
        }
        if let Some((shape, lanes)) = self.nvlink {
            // The source's own sm counts as much as a stated one (an NCCL XML gives it on
            // every GPU), so `--nvlink nvswitch` on an sm 90 file is 18 lanes, not none.
            let lanes = lanes
                .or(self.gpu.map(|g| g.nvlink_lanes))
                .unwrap_or_else(|| sm.or_else(|| one_sm(topo)).map_or(0, default_lanes));
            notes.push(apply_nvlink(topo, shape, lanes));
        }
        // A flag that changed nothing is said; a reference's fact that had nothing to fill is not.
        let keep =
            |(count, note): (usize, String)| (count > 0 || self.via.is_none()).then_some(note);
        if let Some(m) = self.nic_speed_mbps {
            let (count, note) = apply_nic_speed(topo, m);
            // Where the load already replaced the source's speeds (`netfacts`), a fill that
            // found no unknown speed is noise beside that note.
            if count > 0 || topo.source.nic_speed_override.is_none() {
                notes.extend(keep((count, note)));
            }
        }
        if let Some(v) = self.gdr {
            notes.extend(keep(apply_gdr(topo, v)));
        }
        let via = self.via.as_deref();
        topo.source
            .stated
            .extend(notes.into_iter().map(|n| match via {
                Some(v) => format!("{v}: {n}"),
                None => n,
            }));
    }

    fn apply_gpus(&self, topo: &mut Topology, sm: Option<u32>) -> Vec<String> {
        let (mut set, mut replaced) = (0usize, Vec::new());
        for n in topo.gpus() {
            let NodeKind::Gpu(g) = &mut topo.node_mut(n).kind else {
                continue;
            };
            if let Some(sm) = sm {
                if let Some(old) = g.sm.filter(|&s| s != 0 && s != sm) {
                    replaced.push(old);
                }
                g.sm = Some(sm);
            }
            if let Some(m) = self.gpu {
                g.name.get_or_insert_with(|| m.name.to_string());
                if g.device.is_none() && m.device.is_some() {
                    g.vendor = Some(0x10de);
                    g.device = m.device;
                }
            }
            set += 1;
        }
        let what = match (self.gpu, sm) {
            (Some(m), _) => format!("--gpu {}: {} (sm {})", m.key, m.name, m.sm),
            (None, Some(sm)) => format!("--sm {sm}"),
            (None, None) => return vec![],
        };
        let mut note = format!("{what} for {set} GPU(s)");
        if !replaced.is_empty() {
            replaced.sort_unstable();
            replaced.dedup();
            let olds: Vec<String> = replaced.iter().map(u32::to_string).collect();
            note.push_str(&format!(", over the source's sm {}", olds.join(", ")));
        }
        vec![note]
    }
}

/// NVLink bandwidth follows the lanes and the compute capability of the GPU that owns the
/// link (`ncclTopoNVLinkBw`), so links made before the stated `sm` are priced again.
fn refresh_nvlink_bw(topo: &mut Topology) {
    let c = BwConstants::default();
    let edges: Vec<_> = topo.graph.edge_indices().collect();
    for e in edges {
        let Some((a, b)) = topo.graph.edge_endpoints(e) else {
            continue;
        };
        if topo.graph[e].kind != LinkKind::NvLink {
            continue;
        }
        let sm = topo.gpu(a).or(topo.gpu(b)).and_then(|g| g.sm).unwrap_or(0);
        let l = &mut topo.graph[e];
        l.bw = l.lanes as f64 * c.nvlink_lane(sm);
    }
}

/// GPUs whose NVLink the source leaves unknown get the stated shape; GPUs whose links the
/// source enumerates keep them.
fn apply_nvlink(topo: &mut Topology, shape: NvlinkShape, lanes: u32) -> String {
    let mut done = 0usize;
    let mut kept = 0usize;
    for h in 0..topo.hosts.len() {
        let mut gpus: Vec<NodeIndex> = topo
            .gpus()
            .into_iter()
            .filter(|&n| topo.node(n).host as usize == h)
            .collect();
        gpus.sort_by_key(|&n| topo.gpu(n).map(|g| g.busid));
        let (unknown, known): (Vec<NodeIndex>, Vec<NodeIndex>) = gpus
            .into_iter()
            .partition(|&n| topo.gpu(n).is_some_and(|g| g.nvlink != NvlinkInfo::Known));
        kept += known.len();
        done += unknown.len();
        link_host(topo, &unknown, shape, lanes);
    }
    let mut note = format!(
        "--nvlink {}: {lanes} lane(s) per GPU for {done} GPU(s) whose NVLink the source left unknown",
        shape.name()
    );
    if shape == NvlinkShape::None {
        note = format!(
            "--nvlink none: no NVLink for {done} GPU(s) whose NVLink the source left unknown"
        );
    }
    if kept > 0 {
        note.push_str(&format!(
            "; {kept} GPU(s) keep the NVLinks the source lists"
        ));
    }
    note
}

fn link_host(topo: &mut Topology, gpus: &[NodeIndex], shape: NvlinkShape, lanes: u32) {
    for &g in gpus {
        if let NodeKind::Gpu(x) = &mut topo.node_mut(g).kind {
            x.nvlink = NvlinkInfo::Known;
        }
    }
    if lanes == 0 || gpus.len() < 2 {
        return;
    }
    match shape {
        NvlinkShape::NvSwitch => {
            let host = topo.node(gpus[0]).host;
            let sw = topo.add_node(host, None, NodeKind::NvSwitch(NvSwitch::default()));
            for &g in gpus {
                topo.add_nvlink(g, sw, lanes);
            }
        }
        NvlinkShape::Pairs => {
            for p in gpus.chunks_exact(2) {
                topo.add_nvlink(p[0], p[1], lanes);
                topo.add_nvlink(p[1], p[0], lanes);
            }
        }
        NvlinkShape::None => {}
    }
}

fn apply_nic_speed(topo: &mut Topology, mbps: u64) -> (usize, String) {
    let mut set = 0usize;
    for n in topo.nets() {
        if let NodeKind::Net(x) = &mut topo.node_mut(n).kind
            && x.speed_mbps.is_none()
        {
            x.speed_mbps = Some(mbps);
            let bw = x.bw();
            set += 1;
            // The port's NET links were priced from the missing speed when it was added
            // (`Topology::add_child`): without this the stated speed changes no plan.
            let edges: Vec<_> = topo
                .graph
                .edges_directed(n, petgraph::Direction::Outgoing)
                .chain(topo.graph.edges_directed(n, petgraph::Direction::Incoming))
                .filter(|e| e.weight().kind == LinkKind::Net)
                .map(|e| e.id())
                .collect();
            for e in edges {
                topo.graph[e].bw = bw;
            }
        }
    }
    let note = format!(
        "--nic-speed {} Gb/s for {set} network port(s) whose speed the source left unknown",
        mbps / 1000
    );
    (set, note)
}

fn apply_gdr(topo: &mut Topology, v: bool) -> (usize, String) {
    let mut set = 0usize;
    for n in topo.nets() {
        if let NodeKind::Net(x) = &mut topo.node_mut(n).kind
            && x.gdr_unstated
        {
            x.gdr = v;
            x.gdr_unstated = false;
            set += 1;
        }
    }
    for n in topo.gpus() {
        if let NodeKind::Gpu(g) = &mut topo.node_mut(n).kind
            && g.gdr.is_none()
        {
            g.gdr = Some(v);
        }
    }
    let note = format!(
        "--gdr {}: GPUDirect RDMA for {set} network port(s) whose source did not say",
        if v { "yes" } else { "no" }
    );
    (set, note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn gpu_names_are_found_loosely() {
        assert_eq!(gpu_model("H100").unwrap().sm, 90);
        assert_eq!(gpu_model("rtx 4090").unwrap().device, Some(0x2684));
        assert_eq!(gpu_model("RTX-PRO-6000").unwrap().sm, 120);
        assert_eq!(gpu_model("rtxpro6000").unwrap().key, "rtx-pro-6000");
        assert!(gpu_model("h1000").is_none());
    }

    #[test]
    fn models_are_found_by_the_names_users_and_nvml_give_them() {
        let key = |n: &str| gpu_model(n).map(|m| m.key);
        for (name, want) in [
            ("h100-sxm", "h100"),
            ("H100 80GB HBM3", "h100"),
            ("NVIDIA H100 80GB HBM3", "h100"),
            ("NVIDIA H100 PCIe", "h100-pcie"),
            ("NVIDIA H100 NVL", "h100-nvl"),
            ("NVIDIA A100-SXM4-80GB", "a100"),
            ("NVIDIA A100-PCIE-40GB", "a100-pcie"),
            ("A100 80GB PCIe", "a100-pcie"),
            ("Tesla V100-SXM2-32GB", "v100"),
            ("Tesla V100-PCIE-16GB", "v100-pcie"),
            ("Tesla T4", "t4"),
            ("a10g", "a10g"),
            ("NVIDIA A10G", "a10g"),
            ("NVIDIA A10", "a10"),
            ("NVIDIA A30", "a30"),
            ("NVIDIA L4", "l4"),
            ("NVIDIA L40S", "l40s"),
            ("NVIDIA RTX A6000", "a6000"),
            ("NVIDIA RTX 6000 Ada Generation", "rtx6000-ada"),
            ("NVIDIA GeForce RTX 4090", "rtx4090"),
            ("NVIDIA GeForce RTX 3090", "rtx3090"),
            ("RTX 3090", "rtx3090"),
            ("GeForce RTX 2080 Ti", "rtx2080ti"),
            ("NVIDIA GeForce RTX 2080 Ti", "rtx2080ti"),
            ("rtx-2080ti", "rtx2080ti"),
            ("2080 Ti", "rtx2080ti"),
            (
                "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                "rtx-pro-6000",
            ),
            ("NVIDIA GH200 480GB", "gh200"),
            ("NVIDIA GH200 144G HBM3e", "gh200"),
            ("NVIDIA B200", "b200"),
            ("NVIDIA B300 SXM6 AC", "b300"),
            ("NVIDIA H200", "h200"),
        ] {
            assert_eq!(key(name), Some(want), "{name}");
        }
        // Near names are not taken for one another.
        for name in [
            "NVIDIA A100",
            "a10x",
            "h20 nvl",
            "rtx 6000",
            "rtx 2080",
            "NVIDIA",
            "80GB",
            "",
        ] {
            let got = key(name);
            assert!(got.is_none() || name == "NVIDIA A100", "{name}: {got:?}");
        }
        assert_eq!(key("NVIDIA A100"), Some("a100"));
    }

    #[test]
    fn stated_facts_fill_unknowns_and_are_noted() {
        let mut t = testing::two_gpus_unknown_nvlink();
        let s = Stated {
            gpu: gpu_model("h100"),
            nvlink: Some((NvlinkShape::NvSwitch, None)),
            ..Default::default()
        };
        s.apply(&mut t);
        for n in t.gpus() {
            let g = t.gpu(n).unwrap();
            assert_eq!(g.sm, Some(90));
            assert_eq!(g.nvlink, NvlinkInfo::Known);
            assert_eq!(t.nvlinks(n).len(), 1);
            assert_eq!(t.nvlinks(n)[0].1, 18);
        }
        assert_eq!(t.source.stated.len(), 2, "{:?}", t.source.stated);
        assert!(t.source.stated[1].contains("18 lane(s) per GPU for 2 GPU(s)"));
    }

    /// `--nvlink nvswitch` alone on a file that gives each GPU's sm (AWS p5's XML, sm 90) takes
    /// that generation's lanes; it once gave 0 and the plan ran over PCIe.
    #[test]
    fn the_sources_own_sm_sets_the_lanes_of_a_stated_shape() {
        let mut t = testing::two_gpus_unknown_nvlink();
        for n in t.gpus() {
            if let NodeKind::Gpu(g) = &mut t.graph[n].kind {
                g.sm = Some(90);
            }
        }
        let s = Stated {
            nvlink: Some((NvlinkShape::NvSwitch, None)),
            ..Default::default()
        };
        s.apply(&mut t);
        for n in t.gpus() {
            assert_eq!(t.nvlinks(n)[0].1, 18);
        }
        assert!(t.source.stated[0].contains("18 lane(s) per GPU for 2 GPU(s)"));
    }

    #[test]
    fn a_speed_fill_after_an_override_says_nothing_of_zero_ports() {
        let speed = Stated {
            nic_speed_mbps: Some(200_000),
            ..Default::default()
        };
        // Every port's speed known: the fill sets none and says so...
        let mut t = testing::hgx(8, 90);
        speed.apply(&mut t);
        assert_eq!(
            t.source.stated,
            ["--nic-speed 200 Gb/s for 0 network port(s) whose speed the source left unknown"]
        );
        // ...unless the load already replaced the source's speeds (`netfacts`).
        let mut t = testing::hgx(8, 90);
        let facts = topo_vocab::FabricFacts {
            nic_speed_mbps: Some(200_000),
            ..Default::default()
        };
        let notes = crate::netfacts::apply(&mut t, &facts, None);
        t.source.stated.extend(notes);
        speed.apply(&mut t);
        assert_eq!(
            t.source.stated,
            ["--nic-speed 200 Gb/s overrides the source's 400 Gb/s on 8 compute port(s)"]
        );
    }

    #[test]
    fn a_reference_machine_lends_its_facts() {
        let r = testing::hgx(8, 90);
        let st = Stated::from_reference(&r, "profile hgx");
        assert_eq!(st.sm, Some(90));
        assert_eq!(st.nvlink, Some((NvlinkShape::NvSwitch, Some(18))));
        assert_eq!(st.nic_speed_mbps, Some(400_000));
        let mut t = testing::two_gpus_unknown_nvlink();
        st.apply(&mut t);
        assert!(
            t.source
                .stated
                .iter()
                .all(|s| s.starts_with("profile hgx: "))
        );
        let g = t.gpus();
        assert_eq!(t.nvlinks(g[0])[0].1, 18);
        let port = t.nets()[0];
        assert_eq!(t.net(port).unwrap().speed_mbps, Some(400_000));
        assert!(!t.net(port).unwrap().gdr_unstated);
    }

    #[test]
    fn a_stated_port_speed_prices_the_ports_net_links() {
        let r = testing::hgx(8, 90);
        let mut t = testing::two_gpus_unknown_nvlink();
        let port = t.nets()[0];
        if let NodeKind::Net(x) = &mut t.node_mut(port).kind {
            x.speed_mbps = None;
        }
        let net_bw = |t: &Topology| {
            t.graph
                .edges(port)
                .filter(|e| e.weight().kind == LinkKind::Net)
                .map(|e| e.weight().bw)
                .collect::<Vec<_>>()
        };
        Stated::from_reference(&r, "profile hgx").apply(&mut t);
        let bws = net_bw(&t);
        assert!(!bws.is_empty());
        assert!(bws.iter().all(|&b| b == 50.0), "{bws:?}");
    }

    #[test]
    fn pairs_join_gpus_two_by_two_and_none_clears_the_unknown() {
        let mut t = testing::two_gpus_unknown_nvlink();
        Stated {
            nvlink: Some((NvlinkShape::Pairs, Some(4))),
            ..Default::default()
        }
        .apply(&mut t);
        let g = t.gpus();
        assert_eq!(t.nvlinks(g[0]), vec![(g[1], 4, t.nvlinks(g[0])[0].2)]);
        let mut t = testing::two_gpus_unknown_nvlink();
        Stated {
            nvlink: Some((NvlinkShape::None, None)),
            ..Default::default()
        }
        .apply(&mut t);
        assert!(t.gpus().iter().all(|&n| t.nvlinks(n).is_empty()));
        assert!(t.source.stated[0].starts_with("--nvlink none"));
    }
}
