//! The `topo.show/v1` document behind `--format json|yaml`, for every view.
//!
//! Contract fields (docs/show.md, shared cli-contract): `gpus[]`, `nics[]`, `numa[]`,
//! `nvswitches[]`, `pci_switches[]`, `paths[]`, `warnings[]`. Numbers are numbers, unknown
//! is null, bandwidths are rounded to 0.1 GB/s as the document is written (`report::doc`). Views
//! add their own section (`matrix`, `pci_tree`, `nodes`) next to the common fields.

use super::matrix::{self, MatrixDoc};
use super::model::{Ctx, HostView};
use super::pci::{self, Flag, PciNode};
use crate::Error;
use crate::ShowView;
use crate::doc::{JsonObject, items_to, json_value_to};
use petgraph::graph::{EdgeIndex, NodeIndex};
use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::Range;
use topo_model::bw::{pcie_generation, pcie_gts};
use topo_model::message::Finding;
use topo_model::{BwConstants, C2cInfo, FabricInfo, LinkKind, NodeKind, PcieLink, class};

pub const SCHEMA: &str = topo_documents::schema::SHOW;

#[derive(Serialize)]
struct Doc<'a> {
    schema: &'static str,
    topo_version: &'static str,
    view: &'static str,
    source: SourceDoc,
    /// Every host; with `copies`, the sections below list the first copy's hosts only.
    hosts: Vec<HostDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    copies: Option<super::copies::CopiesDoc>,
    gpus: Vec<GpuDoc>,
    nics: Vec<NicDoc>,
    numa: Vec<NumaDoc>,
    nvswitches: Vec<NvSwitchDoc>,
    pci_switches: Vec<PciSwitchDoc>,
    pci_devices: Vec<PciDeviceDoc>,
    /// Written as it is encoded: one entry per GPU and same-host target, the largest section.
    paths: PathsDoc<'a>,
    p2p: Vec<P2pDoc>,
    /// Written as it is encoded, like `paths`.
    links: LinksDoc<'a>,
    verdicts: Vec<String>,
    warnings: Vec<String>,
    /// `verdicts` and `warnings` again, each with its code and severity (docs/codes.md).
    messages: Vec<Finding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    matrix: Option<Vec<MatrixDoc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pci_tree: Option<Vec<PciNode>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<Vec<NodeDoc>>,
}

#[derive(Serialize)]
struct SourceDoc {
    kind: topo_model::SourceKind,
    origin: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    stated: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cut: Option<String>,
}

#[derive(Serialize)]
struct HostDoc {
    index: u16,
    name: Option<String>,
    kernel: Option<String>,
    driver_version: Option<String>,
    cuda_driver_version: Option<String>,
    nvml_version: Option<String>,
    gpu_discovery: Option<String>,
    env: BTreeMap<String, String>,
    /// The host of the first copy this one copies (`--nodes`): its devices are that host's.
    #[serde(skip_serializing_if = "Option::is_none")]
    copy_of: Option<u16>,
    /// With copies: the NVLink fabric cluster this host's GPUs are registered in, the one
    /// fact besides the name in which a copy differs from its original.
    #[serde(skip_serializing_if = "Option::is_none")]
    nvlink_cluster: Option<String>,
}

#[derive(Serialize)]
struct PcieDoc {
    speed_gts: Option<f64>,
    generation: Option<u32>,
    width: Option<u32>,
    /// Null when the link's speed or width is unknown: a figure would be NCCL's assumption.
    bw_gbps: Option<f64>,
    /// What NCCL assigns the link (unknown speed counts as Gen3, unknown width as x16).
    nccl_bw_gbps: f64,
    max_speed_gts: Option<f64>,
    max_width: Option<u32>,
    cur_speed_gts: Option<f64>,
    cur_width: Option<u32>,
    flags: Vec<Flag>,
}

fn pcie_doc(ctx: &Ctx, n: NodeIndex, l: &PcieLink) -> PcieDoc {
    let gts = |s: &Option<String>| s.as_deref().and_then(pcie_gts);
    PcieDoc {
        speed_gts: gts(&l.speed),
        generation: gts(&l.speed).and_then(pcie_generation),
        width: l.width,
        bw_gbps: (gts(&l.speed).is_some() && l.width.is_some_and(|w| w > 0)).then(|| l.bw()),
        nccl_bw_gbps: l.bw(),
        max_speed_gts: gts(&l.max_speed),
        max_width: l.max_width,
        cur_speed_gts: gts(&l.cur_speed),
        cur_width: l.cur_width,
        flags: pci::flags(ctx, n),
    }
}

#[derive(Serialize)]
struct NvlinkTarget {
    to: String,
    kind: &'static str,
    lanes: u32,
    bw_gbps: f64,
}

#[derive(Serialize)]
struct NvlinkDoc {
    /// `known` or `unknown`.
    state: &'static str,
    reason: Option<String>,
    lanes: Option<u32>,
    bw_gbps: Option<f64>,
    links: Vec<NvlinkTarget>,
}

#[derive(Serialize)]
struct GpuDoc {
    index: usize,
    host: u16,
    dev: Option<i32>,
    busid: String,
    name: Option<String>,
    /// Model from the PCI ids when the source gave no name (`H100 SXM5 80GB`).
    model: Option<String>,
    sm: Option<u32>,
    numa: Option<i32>,
    cpu_affinity: Option<String>,
    nvlink_lanes: Option<u32>,
    nvswitch: Option<bool>,
    nearest_nic: Option<String>,
    nic_path: Option<String>,
    nic_bw_gbps: Option<f64>,
    local_nics: Vec<String>,
    memory_bytes: Option<u64>,
    uuid: Option<String>,
    gdr: Option<bool>,
    vendor: Option<String>,
    device: Option<String>,
    pcie: PcieDoc,
    nvlink: NvlinkDoc,
    c2c: Option<C2cInfo>,
    fabric: Option<FabricInfo>,
}

#[derive(Serialize)]
struct NicDoc {
    index: usize,
    host: u16,
    /// `null` for a NIC listed without a network port (skeleton XML); so are the port fields.
    name: Option<String>,
    busid: Option<String>,
    dev: Option<i32>,
    speed_gbps: Option<f64>,
    bw_gbps: Option<f64>,
    port: Option<u32>,
    gdr: Option<bool>,
    coll: Option<bool>,
    numa: Option<i32>,
    link_layer: Option<String>,
    netdev: Option<String>,
    state: Option<String>,
    /// Hex string: a 64-bit GUID does not survive a JSON number in most readers.
    guid: Option<String>,
    vendor: Option<String>,
    device: Option<String>,
    model: Option<String>,
    /// GPUs that share a PCIe switch with this port (PIX or PXB).
    near_gpus: Vec<String>,
    pcie: Option<PcieDoc>,
    /// `compute`, `storage`, `front-end`; `null` for a NIC without a port.
    role: Option<topo_model::NetRole>,
    /// Whether the source stated the role, and why it was inferred otherwise.
    role_stated: Option<bool>,
    role_why: Option<String>,
}

#[derive(Serialize)]
struct NumaDoc {
    id: Option<i32>,
    host: u16,
    cpus: Option<String>,
    arch: Option<String>,
    vendor: Option<String>,
    family: Option<u32>,
    model: Option<u32>,
    model_name: Option<String>,
    /// NCCL's bandwidth for links from this CPU to the other sockets (GB/s).
    sys_bw_gbps: f64,
    gpus: Vec<String>,
    nics: Vec<String>,
}

#[derive(Serialize)]
struct SwitchGpu {
    gpu: String,
    lanes: u32,
}

#[derive(Serialize)]
struct NvSwitchDoc {
    busid: Option<String>,
    host: u16,
    vendor: Option<String>,
    device: Option<String>,
    gpus: Vec<SwitchGpu>,
}

#[derive(Serialize)]
struct PciSwitchDoc {
    busid: String,
    host: u16,
    numa: Option<i32>,
    link_speed_gts: Option<f64>,
    link_generation: Option<u32>,
    link_width: Option<u32>,
    bw_gbps: f64,
    vendor: Option<String>,
    device: Option<String>,
    model: Option<String>,
    children: Vec<String>,
    flags: Vec<Flag>,
}

#[derive(Serialize)]
struct PciDeviceDoc {
    busid: String,
    host: u16,
    numa: Option<i32>,
    class: String,
    class_name: &'static str,
    vendor: Option<String>,
    device: Option<String>,
    model: Option<String>,
    driver: Option<String>,
}

#[derive(Serialize)]
struct PathDoc<'a> {
    host: u16,
    from: &'a str,
    to: &'a str,
    #[serde(rename = "type")]
    ty: &'static str,
    bw_gbps: f64,
    hops: u32,
    /// The GPU a PXN or NVB path relays through.
    via: Option<&'a str>,
}

/// `paths[]`, produced while it is written: from every GPU to its host's other GPUs and
/// network ports, in display order.
struct PathsDoc<'a> {
    ctx: &'a Ctx<'a>,
    names: &'a Names,
    hosts: &'a [HostView],
}

impl Serialize for PathsDoc<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(path_docs(self.ctx, self.names, self.hosts))
    }
}

/// The `paths[]` entries of `hosts`.
fn path_docs<'a>(
    ctx: &'a Ctx,
    names: &'a Names,
    hosts: &'a [HostView],
) -> impl Iterator<Item = PathDoc<'a>> + 'a {
    let gpus = hosts.iter().flat_map(move |hv| {
        hv.gpus
            .iter()
            .filter(|&&g| ctx.topo.gpu(g).is_some())
            .map(move |&g| (hv, g))
    });
    gpus.flat_map(move |(hv, g)| {
        hv.gpus
            .iter()
            .chain(&hv.nets)
            .filter(move |&&t| t != g)
            .filter_map(move |&t| {
                let p = ctx.path(g, t)?;
                Some(PathDoc {
                    host: hv.host,
                    from: names.label(g),
                    to: names.label(t),
                    ty: p.ty.name(),
                    bw_gbps: p.bw,
                    hops: p.hops,
                    via: p.via.map(|v| names.label(v)),
                })
            })
    })
}

/// `links[]`, made while it is written ([`links`]).
struct LinksDoc<'a> {
    ctx: &'a Ctx<'a>,
    names: &'a Names,
}

impl Serialize for LinksDoc<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        links(self.ctx, self.names).serialize(s)
    }
}

/// Every node's label ([`Ctx::label`]) and unique key ([`Ctx::node_keys`]), made once:
/// the document names nodes hundreds of thousands of times at thousands of nodes.
struct Names {
    labels: Vec<String>,
    keys: Vec<String>,
}

impl Names {
    fn new(ctx: &Ctx) -> Names {
        Names {
            labels: crate::util::map_parallel(
                ctx.topo.graph.node_count(),
                super::model::PARALLEL_NODES,
                |i| ctx.label(NodeIndex::new(i)),
            ),
            keys: ctx.node_key_list(),
        }
    }
    fn label(&self, n: NodeIndex) -> &str {
        self.labels.get(n.index()).map_or("", String::as_str)
    }
    fn key(&self, n: NodeIndex) -> &str {
        self.keys.get(n.index()).map_or("", String::as_str)
    }
}

#[derive(Serialize)]
struct P2pDoc {
    host: u16,
    from: String,
    to: String,
    read: Option<bool>,
    write: Option<bool>,
    nvlink: Option<bool>,
    atomics: Option<bool>,
}

#[derive(Serialize)]
struct LinkDoc<'a> {
    host: u16,
    from: &'a str,
    to: &'a str,
    kind: &'static str,
    lanes: Option<u32>,
    bw_gbps: f64,
}

#[derive(Serialize)]
struct NodeDoc {
    id: String,
    host: u16,
    kind: &'static str,
    numa: Option<i32>,
    busid: Option<String>,
}

fn hex16(v: Option<u16>) -> Option<String> {
    v.map(|x| format!("0x{x:04x}"))
}

fn opt_numa(v: i32) -> Option<i32> {
    (v >= 0).then_some(v)
}

fn kind_name(k: &NodeKind) -> &'static str {
    match k {
        NodeKind::Cpu(_) => "numa",
        NodeKind::PciSwitch(_) => "pci_switch",
        NodeKind::Gpu(_) => "gpu",
        NodeKind::NvSwitch(_) => "nvswitch",
        NodeKind::Nic(_) => "nic",
        NodeKind::Net(_) => "port",
        NodeKind::PciDevice(_) => "pci_device",
    }
}

fn build<'a>(ctx: &'a Ctx<'a>, names: &'a Names, view: ShowView) -> Doc<'a> {
    let topo = ctx.topo;
    let all = &ctx.hosts;
    let verdicts: Vec<Finding> = all
        .iter()
        .flat_map(|hv| super::summary::coded_verdicts(ctx, hv))
        .collect();
    Doc {
        schema: SCHEMA,
        topo_version: env!("CARGO_PKG_VERSION"),
        view: view_name(view),
        source: source_doc(ctx),
        hosts: host_docs(ctx),
        copies: ctx.copies.map(|c| c.doc()),
        gpus: all.iter().flat_map(|hv| gpu_docs(ctx, names, hv)).collect(),
        nics: all.iter().flat_map(|hv| nic_docs(ctx, names, hv)).collect(),
        numa: all
            .iter()
            .flat_map(|hv| numa_docs(ctx, names, hv))
            .collect(),
        nvswitches: all
            .iter()
            .flat_map(|hv| nvswitch_docs(ctx, names, hv))
            .collect(),
        pci_switches: pci_switch_docs(ctx, names),
        pci_devices: pci_device_docs(ctx),
        paths: PathsDoc {
            ctx,
            names,
            hosts: all,
        },
        p2p: p2p_docs(ctx, names),
        links: LinksDoc { ctx, names },
        verdicts: verdicts.iter().map(|m| m.text.clone()).collect(),
        warnings: topo.warnings.clone(),
        messages: verdicts
            .into_iter()
            .chain(topo.warning_messages())
            .collect(),
        matrix: (view == ShowView::Matrix).then(|| matrix::doc(ctx)),
        pci_tree: (view == ShowView::Pci).then(|| pci::doc(ctx)),
        nodes: (view == ShowView::Dot).then(|| node_docs(ctx, names)),
    }
}

fn view_name(view: ShowView) -> &'static str {
    match view {
        ShowView::Summary => "summary",
        ShowView::Matrix => "matrix",
        ShowView::Pci => "pci",
        ShowView::Paths => "paths",
        ShowView::Dot => "dot",
    }
}

fn source_doc(ctx: &Ctx) -> SourceDoc {
    SourceDoc {
        kind: ctx.topo.source.kind,
        origin: ctx.topo.source.origin.clone(),
        stated: ctx.topo.source.stated.clone(),
        cut: ctx.topo.source.cut.clone(),
    }
}

fn host_docs(ctx: &Ctx) -> Vec<HostDoc> {
    let (topo, count) = match ctx.copies {
        Some(c) => (c.whole, c.hosts()),
        None => (ctx.topo, ctx.hosts.len()),
    };
    (0..count)
        .map(|i| {
            let h = topo.hosts.get(i).cloned().unwrap_or_default();
            HostDoc {
                index: i as u16,
                name: h.name,
                kernel: h.kernel,
                driver_version: h.driver_version,
                cuda_driver_version: h.cuda_driver_version,
                nvml_version: h.nvml_version,
                gpu_discovery: h.gpu_discovery,
                env: h.env,
                copy_of: ctx.copies.and_then(|c| c.copy_of(i)),
                nvlink_cluster: ctx.copies.and_then(|c| c.cluster(i)).map(String::from),
            }
        })
        .collect()
}

/// One host's `gpus[]`.
fn gpu_docs(ctx: &Ctx, names: &Names, hv: &HostView) -> Vec<GpuDoc> {
    let topo = ctx.topo;
    let key = |n: NodeIndex| names.key(n).to_string();
    let mut gpus = Vec::with_capacity(hv.gpus.len());
    for &g in &hv.gpus {
        let Some(x) = topo.gpu(g) else { continue };
        let nv = ctx.nvlink(g);
        let known = nv.unknown.is_none();
        let nearest = ctx.nearest_nic_shown(g);
        let links = topo
            .nvlinks(g)
            .into_iter()
            .map(|(to, lanes, bw)| NvlinkTarget {
                to: key(to),
                kind: match topo.node(to).kind {
                    NodeKind::NvSwitch(_) => "nvswitch",
                    NodeKind::Gpu(_) => "gpu",
                    _ => "cpu",
                },
                lanes,
                bw_gbps: bw,
            })
            .collect();
        gpus.push(GpuDoc {
            index: ctx.index(g),
            host: hv.host,
            dev: (x.dev >= 0).then_some(x.dev),
            busid: x.busid.to_string(),
            name: x.name.clone(),
            model: pci::model_name(x.vendor, x.device).map(str::to_string),
            sm: x.sm,
            numa: ctx.numa(g),
            cpu_affinity: topo
                .root_cpu(g)
                .and_then(|c| topo.cpu(c))
                .and_then(super::model::cpu_list),
            nvlink_lanes: known.then_some(nv.lanes),
            nvswitch: known.then_some(nv.switch_lanes > 0),
            nearest_nic: nearest
                .as_ref()
                .map(|(n, _, _)| names.label(*n).to_string()),
            nic_path: nearest.as_ref().map(|(_, ty, _)| ty.clone()),
            nic_bw_gbps: nearest.as_ref().and_then(|(_, _, bw)| *bw),
            local_nics: ctx
                .local_nets(g)
                .into_iter()
                .map(|n| names.label(n).to_string())
                .collect(),
            memory_bytes: x.memory_bytes,
            uuid: x.uuid.clone(),
            gdr: x.gdr,
            vendor: hex16(x.vendor),
            device: hex16(x.device),
            pcie: pcie_doc(ctx, g, &x.pcie),
            nvlink: NvlinkDoc {
                state: if known { "known" } else { "unknown" },
                reason: nv.unknown.clone(),
                lanes: known.then_some(nv.lanes),
                bw_gbps: (known && nv.speed_known).then_some(nv.bw),
                links,
            },
            c2c: x.c2c.clone(),
            fabric: x.fabric.clone(),
        });
    }
    gpus
}

/// One host's `nics[]`: its network ports, then NICs without a known port.
fn nic_docs(ctx: &Ctx, names: &Names, hv: &HostView) -> Vec<NicDoc> {
    let topo = ctx.topo;
    let mut nics = Vec::with_capacity(hv.nets.len() + hv.bare_nics.len());
    for &n in &hv.nets {
        let Some(x) = topo.net(n) else { continue };
        let nic = topo.node(n).parent.map(|p| topo.node(p));
        let (vendor, device, pcie) = match nic.map(|p| &p.kind) {
            Some(NodeKind::Nic(c)) => (
                c.vendor,
                c.device,
                c.busid
                    .is_some()
                    .then(|| pcie_doc(ctx, ctx.pci_device(n), &c.pcie)),
            ),
            _ => (None, None, None),
        };
        nics.push(NicDoc {
            index: ctx.index(n),
            host: hv.host,
            name: Some(x.name.clone()),
            busid: ctx.busid(n).map(|b| b.to_string()),
            dev: Some(x.dev),
            speed_gbps: x.speed_mbps.map(|m| m as f64 / 1000.0),
            // Unknown speed or GDR stays null: NCCL's defaults (10 Gb/s, no GDR) are what the
            // plan assumes, not what the source says.
            bw_gbps: x.speed_mbps.map(|_| x.bw()),
            port: Some(x.port),
            gdr: (!x.gdr_unstated).then_some(x.gdr),
            coll: Some(x.coll),
            numa: ctx.numa(n),
            link_layer: x.link_layer.clone(),
            netdev: x.netdev.clone(),
            state: x.state.clone(),
            guid: x.guid.map(|g| format!("0x{g:016x}")),
            vendor: hex16(vendor),
            device: hex16(device),
            model: pci::model_name(vendor, device).map(str::to_string),
            near_gpus: near_gpus(ctx, names, hv, n),
            pcie,
            role: ctx.roles.get(&n).map(|r| r.role),
            role_stated: ctx.roles.get(&n).map(|r| r.stated),
            role_why: ctx.roles.get(&n).map(|r| r.why.clone()),
        });
    }
    for &n in &hv.bare_nics {
        let NodeKind::Nic(c) = &topo.node(n).kind else {
            continue;
        };
        nics.push(NicDoc {
            index: ctx.index(n),
            host: hv.host,
            name: None,
            busid: c.busid.map(|b| b.to_string()),
            dev: None,
            speed_gbps: None,
            bw_gbps: None,
            port: None,
            gdr: None,
            coll: None,
            numa: ctx.numa(n),
            link_layer: None,
            netdev: None,
            state: None,
            guid: None,
            vendor: hex16(c.vendor),
            device: hex16(c.device),
            model: pci::model_name(c.vendor, c.device).map(str::to_string),
            near_gpus: near_gpus(ctx, names, hv, n),
            pcie: c.busid.is_some().then(|| pcie_doc(ctx, n, &c.pcie)),
            role: None,
            role_stated: None,
            role_why: None,
        });
    }
    nics
}

/// The GPUs of `hv` at most a PCIe switch hierarchy (PXB) away from NIC `n`.
fn near_gpus(ctx: &Ctx, names: &Names, hv: &HostView, n: NodeIndex) -> Vec<String> {
    hv.gpus
        .iter()
        .filter(|&&g| super::model::pci_class(ctx, g, n) <= super::model::PciClass::Pxb)
        .map(|&g| names.label(g).to_string())
        .collect()
}

/// One host's `numa[]`.
fn numa_docs(ctx: &Ctx, names: &Names, hv: &HostView) -> Vec<NumaDoc> {
    let topo = ctx.topo;
    hv.cpus
        .iter()
        .filter_map(|&c| topo.cpu(c).map(|x| (c, x)))
        .map(|(c, x)| NumaDoc {
            id: opt_numa(x.numa),
            host: hv.host,
            cpus: super::model::cpu_list(x),
            arch: x.arch.clone(),
            vendor: x.vendor.as_deref().map(|v| v.trim().to_string()),
            family: x.family,
            model: x.model,
            model_name: x.model_name.clone(),
            sys_bw_gbps: x.sys_bw(&BwConstants::default()),
            gpus: hv
                .gpus
                .iter()
                .filter(|&&g| topo.root_cpu(g) == Some(c))
                .map(|&g| names.label(g).to_string())
                .collect(),
            nics: hv
                .nic_columns()
                .into_iter()
                .filter(|&n| topo.root_cpu(n) == Some(c))
                .map(|n| names.label(n).to_string())
                .collect(),
        })
        .collect()
}

/// One host's `nvswitches[]`.
fn nvswitch_docs(ctx: &Ctx, names: &Names, hv: &HostView) -> Vec<NvSwitchDoc> {
    let topo = ctx.topo;
    super::model::sorted_nvswitches(ctx, hv.host)
        .into_iter()
        .filter_map(|s| match &topo.node(s).kind {
            NodeKind::NvSwitch(x) => Some((s, x)),
            _ => None,
        })
        .map(|(s, x)| NvSwitchDoc {
            busid: x.busid.map(|b| b.to_string()),
            host: topo.node(s).host,
            vendor: hex16(x.vendor),
            device: hex16(x.device),
            gpus: super::model::switch_gpus(ctx, s)
                .into_iter()
                .map(|(g, lanes)| SwitchGpu {
                    gpu: names.label(g).to_string(),
                    lanes,
                })
                .collect(),
        })
        .collect()
}

/// `pci_switches[]`, in graph order.
fn pci_switch_docs(ctx: &Ctx, names: &Names) -> Vec<PciSwitchDoc> {
    let topo = ctx.topo;
    let key = |n: NodeIndex| names.key(n).to_string();
    topo.pci_switches()
        .filter_map(|s| match &topo.node(s).kind {
            NodeKind::PciSwitch(p) => Some((s, p)),
            _ => None,
        })
        .map(|(s, p)| {
            let gts = p.pcie.gts();
            PciSwitchDoc {
                busid: p.busid.to_string(),
                host: topo.node(s).host,
                numa: ctx.numa(s),
                link_speed_gts: gts,
                link_generation: gts.and_then(pcie_generation),
                link_width: p.pcie.width,
                bw_gbps: p.pcie.bw(),
                vendor: hex16(p.vendor),
                device: hex16(p.device),
                model: pci::model_name(p.vendor, p.device).map(str::to_string),
                children: topo.children(s).into_iter().map(key).collect(),
                flags: pci::flags(ctx, s),
            }
        })
        .collect()
}

/// `pci_devices[]`, in graph order.
fn pci_device_docs(ctx: &Ctx) -> Vec<PciDeviceDoc> {
    let topo = ctx.topo;
    topo.graph
        .node_indices()
        .filter_map(|n| match &topo.node(n).kind {
            NodeKind::PciDevice(d) => Some((n, d)),
            _ => None,
        })
        .map(|(n, d)| PciDeviceDoc {
            busid: d.busid.to_string(),
            host: topo.node(n).host,
            numa: ctx.numa(n),
            class: format!("0x{:06x}", d.class),
            class_name: class::describe(d.class),
            vendor: hex16(d.vendor),
            device: hex16(d.device),
            model: pci::model_name(d.vendor, d.device).map(str::to_string),
            driver: d.driver.clone(),
        })
        .collect()
}

/// `p2p[]`: the source's P2P status per GPU pair.
fn p2p_docs(ctx: &Ctx, names: &Names) -> Vec<P2pDoc> {
    let topo = ctx.topo;
    let gpu_label = |h: u16, b: topo_model::BusId| -> String {
        topo.find(h, b)
            .filter(|&n| topo.gpu(n).is_some())
            .map(|n| names.label(n).to_string())
            .unwrap_or_else(|| b.to_string())
    };
    topo.p2p
        .iter()
        .map(|((h, a, b), c)| P2pDoc {
            host: *h,
            from: gpu_label(*h, *a),
            to: gpu_label(*h, *b),
            read: c.read,
            write: c.write,
            nvlink: c.nvlink,
            atomics: c.atomics,
        })
        .collect()
}

/// `nodes[]` of `--view dot`.
fn node_docs(ctx: &Ctx, names: &Names) -> Vec<NodeDoc> {
    let topo = ctx.topo;
    topo.graph
        .node_indices()
        .map(|n| NodeDoc {
            id: names.key(n).to_string(),
            host: topo.node(n).host,
            kind: kind_name(&topo.node(n).kind),
            numa: ctx.numa(n),
            busid: topo.node(n).busid().map(|b| b.to_string()),
        })
        .collect()
}

/// Every physical link once: PCIe parent→child, NVLink/C2C from the GPU, SYS and LOC once
/// per CPU/switch pair, NIC→port.
fn links<'a>(ctx: &Ctx, names: &'a Names) -> Vec<LinkDoc<'a>> {
    let g = &ctx.topo.graph;
    let mut out = tree_links(ctx, names, 0..g.node_count());
    out.extend(graph_links(ctx, names, 0..g.edge_count()));
    out
}

/// The PCIe (and NIC→port) links of the nodes numbered `nodes`, each to its parent.
fn tree_links<'a>(ctx: &Ctx, names: &'a Names, nodes: Range<usize>) -> Vec<LinkDoc<'a>> {
    let topo = ctx.topo;
    let link = |n: NodeIndex| {
        let node = topo.node(n);
        let p = node.parent?;
        let (kind, bw) = match &node.kind {
            NodeKind::Net(x) => ("net", x.bw()),
            // The model's own edge: a NIC without PCI location sits on the CPU at LOC bandwidth.
            _ => (
                "pcie",
                topo.graph
                    .edges_connecting(p, n)
                    .find(|e| e.weight().kind == LinkKind::Pci)
                    .map(|e| e.weight().bw)
                    .or_else(|| node.pcie().map(|l| l.bw()))
                    .unwrap_or(BwConstants::default().loc),
            ),
        };
        Some(LinkDoc::new(names, node.host, (p, n), kind, None, bw))
    };
    nodes.map(NodeIndex::new).filter_map(link).collect()
}

/// The NVLink, C2C, SYS and LOC links among the graph's edges numbered `edges`.
fn graph_links<'a>(ctx: &Ctx, names: &'a Names, edges: Range<usize>) -> Vec<LinkDoc<'a>> {
    let topo = ctx.topo;
    let link = |e: EdgeIndex| {
        let (a, b) = topo.graph.edge_endpoints(e)?;
        let w = topo.graph.edge_weight(e)?;
        let an = &topo.node(a).kind;
        let kind = match w.kind {
            LinkKind::NvLink => matches!(an, NodeKind::Gpu(_)).then_some("nvlink"),
            LinkKind::C2c => matches!(an, NodeKind::Gpu(_)).then_some("c2c"),
            LinkKind::Sys => (a < b).then_some("sys"),
            LinkKind::Loc => (a < b).then_some("loc"),
            LinkKind::Pci | LinkKind::Net => None,
        }?;
        let lanes = matches!(w.kind, LinkKind::NvLink | LinkKind::C2c).then_some(w.lanes);
        Some(LinkDoc::new(
            names,
            topo.node(a).host,
            (a, b),
            kind,
            lanes,
            w.bw,
        ))
    };
    edges.map(EdgeIndex::new).filter_map(link).collect()
}

impl<'a> LinkDoc<'a> {
    fn new(
        names: &'a Names,
        host: u16,
        (from, to): (NodeIndex, NodeIndex),
        kind: &'static str,
        lanes: Option<u32>,
        bw_gbps: f64,
    ) -> LinkDoc<'a> {
        LinkDoc {
            host,
            from: names.key(from),
            to: names.key(to),
            kind,
            lanes,
            bw_gbps,
        }
    }
}

pub(crate) fn json(ctx: &Ctx, view: ShowView) -> crate::Result<String> {
    let names = Names::new(ctx);
    crate::doc::json(&build(ctx, &names, view))
        .map_err(|e| Error::Encode(format!("the show document as json: {e}")))
}

/// [`json`], written to `w` as it is encoded, for `topo show` (which exits after it): the
/// document is cut into jobs ([`Job`]: a small field, or a run of hosts, nodes or edges of
/// a large one) that the machine's cores build and encode while this thread writes them in
/// order ([`crate::ordered`]), so at 32,768 GPUs neither core idles and only a few
/// jobs' bytes wait in memory.
pub(crate) fn json_to(
    ctx: &Ctx,
    view: ShowView,
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    use crate::ordered;
    let names = Names::new(ctx);
    let plan = JobPlan::new(ctx);
    let jobs = plan.jobs(view);
    let mut o = JsonObject::start(w)?;
    let written = ordered::run(
        jobs.len(),
        // One job per section below 64 hosts: a few dozen, not worth threads.
        ordered::workers(plan.runs.len(), 2),
        WINDOW_JOBS,
        |k, buf| plan.encode(&jobs[k], &names, view, buf),
        |k, bytes| jobs[k].write(&mut o, bytes),
    )
    .and_then(|()| o.end());
    // Freed beside the writer, which the caller is about to finish.
    crate::util::drop_aside(names);
    written
}

/// Jobs a worker may run ahead of the writer: each is at most [`RUN_HOSTS`] hosts of one
/// section (about a megabyte), so a few dozen megabytes wait at most.
const WINDOW_JOBS: usize = 32;

/// Hosts (or nodes and edges, [`RUN_HOSTS`] hosts' worth) in one job of a large section.
const RUN_HOSTS: usize = 64;

/// One piece of the streamed document, in document order.
#[derive(Clone, Debug)]
enum Job {
    /// A field encoded whole.
    Field(&'static str),
    Open(&'static str),
    /// A run of hosts (`gpus`, `nics`, `numa`, `nvswitches`, `paths`, `verdicts`,
    /// `messages`) or of node or edge numbers (`links`) of an array field.
    Items(&'static str, Range<usize>),
    Close,
}

impl Job {
    fn write(&self, o: &mut JsonObject, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Job::Field(key) => o.raw(key, bytes),
            Job::Open(key) => o.array_start(key),
            Job::Items(..) => o.array_piece(bytes),
            Job::Close => o.array_end(),
        }
    }
}

/// What the jobs share: the runs they are cut into, and the verdicts, which two fields
/// list (made once per run of hosts, by whichever job needs them first).
struct JobPlan<'a> {
    ctx: &'a Ctx<'a>,
    runs: Vec<Range<usize>>,
    verdicts: Vec<std::sync::OnceLock<Vec<Finding>>>,
}

impl<'a> JobPlan<'a> {
    fn new(ctx: &'a Ctx<'a>) -> JobPlan<'a> {
        let runs = cut(ctx.hosts.len(), RUN_HOSTS);
        let verdicts = runs.iter().map(|_| std::sync::OnceLock::new()).collect();
        JobPlan {
            ctx,
            runs,
            verdicts,
        }
    }

    /// The document's fields in [`Doc`]'s order.
    fn jobs(&self, view: ShowView) -> Vec<Job> {
        let g = &self.ctx.topo.graph;
        let per = |n: usize| (n / self.runs.len().max(1)).max(1);
        let mut jobs = vec![];
        for key in ["schema", "topo_version", "view", "source", "hosts"] {
            jobs.push(Job::Field(key));
        }
        if self.ctx.copies.is_some() {
            jobs.push(Job::Field("copies"));
        }
        let array = |jobs: &mut Vec<Job>, key, runs: Vec<Range<usize>>| {
            jobs.push(Job::Open(key));
            jobs.extend(runs.into_iter().map(|r| Job::Items(key, r)));
            jobs.push(Job::Close);
        };
        for key in ["gpus", "nics", "numa", "nvswitches"] {
            array(&mut jobs, key, self.runs.clone());
        }
        for key in ["pci_switches", "pci_devices"] {
            jobs.push(Job::Field(key));
        }
        array(&mut jobs, "paths", self.runs.clone());
        jobs.push(Job::Field("p2p"));
        jobs.push(Job::Open("links"));
        let tree = cut(g.node_count(), per(g.node_count()));
        jobs.extend(tree.into_iter().map(|r| Job::Items("tree_links", r)));
        let edges = cut(g.edge_count(), per(g.edge_count()));
        jobs.extend(edges.into_iter().map(|r| Job::Items("graph_links", r)));
        jobs.push(Job::Close);
        array(&mut jobs, "verdicts", self.runs.clone());
        jobs.push(Job::Field("warnings"));
        jobs.push(Job::Open("messages"));
        jobs.extend(self.runs.iter().map(|r| Job::Items("messages", r.clone())));
        jobs.push(Job::Items("warning_messages", 0..1));
        jobs.push(Job::Close);
        let view_field = match view {
            ShowView::Matrix => Some("matrix"),
            ShowView::Pci => Some("pci_tree"),
            ShowView::Dot => Some("nodes"),
            _ => None,
        };
        jobs.extend(view_field.map(Job::Field));
        jobs
    }

    fn run_verdicts(&self, run: &Range<usize>) -> &[Finding] {
        let i = run.start / RUN_HOSTS.max(1);
        self.verdicts[i].get_or_init(|| {
            self.ctx.hosts[run.clone()]
                .iter()
                .flat_map(|hv| super::summary::coded_verdicts(self.ctx, hv))
                .collect()
        })
    }

    fn encode(
        &self,
        job: &Job,
        names: &Names,
        view: ShowView,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        match job {
            Job::Field(key) => self.field(key, names, view, buf),
            Job::Items(key, r) => self.items(key, r, names, buf),
            Job::Open(_) | Job::Close => Ok(()),
        }
    }

    fn field(
        &self,
        key: &str,
        names: &Names,
        view: ShowView,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let ctx = self.ctx;
        match key {
            "schema" => json_value_to(buf, SCHEMA),
            "topo_version" => json_value_to(buf, env!("CARGO_PKG_VERSION")),
            "view" => json_value_to(buf, view_name(view)),
            "source" => json_value_to(buf, &source_doc(ctx)),
            "hosts" => json_value_to(buf, &host_docs(ctx)),
            "copies" => json_value_to(buf, &ctx.copies.map(|c| c.doc())),
            "pci_switches" => json_value_to(buf, &pci_switch_docs(ctx, names)),
            "pci_devices" => json_value_to(buf, &pci_device_docs(ctx)),
            "p2p" => json_value_to(buf, &p2p_docs(ctx, names)),
            "warnings" => json_value_to(buf, &ctx.topo.warnings),
            "matrix" => json_value_to(buf, &matrix::doc(ctx)),
            "pci_tree" => json_value_to(buf, &pci::doc(ctx)),
            "nodes" => json_value_to(buf, &node_docs(ctx, names)),
            _ => Err(std::io::Error::other(format!("no show field {key}"))),
        }
    }

    fn items(
        &self,
        key: &str,
        r: &Range<usize>,
        names: &Names,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let ctx = self.ctx;
        let hosts = || ctx.hosts[r.clone()].iter();
        match key {
            "gpus" => items_to(buf, hosts().flat_map(|hv| gpu_docs(ctx, names, hv))),
            "nics" => items_to(buf, hosts().flat_map(|hv| nic_docs(ctx, names, hv))),
            "numa" => items_to(buf, hosts().flat_map(|hv| numa_docs(ctx, names, hv))),
            "nvswitches" => items_to(buf, hosts().flat_map(|hv| nvswitch_docs(ctx, names, hv))),
            "paths" => items_to(buf, path_docs(ctx, names, &ctx.hosts[r.clone()])),
            "tree_links" => items_to(buf, tree_links(ctx, names, r.clone())),
            "graph_links" => items_to(buf, graph_links(ctx, names, r.clone())),
            "verdicts" => items_to(buf, self.run_verdicts(r).iter().map(|m| &m.text)),
            "messages" => items_to(buf, self.run_verdicts(r)),
            "warning_messages" => items_to(buf, ctx.topo.warning_messages()),
            _ => Err(std::io::Error::other(format!("no show array {key}"))),
        }
    }
}

/// `0..n` in runs of `per` (the last may be shorter).
fn cut(n: usize, per: usize) -> Vec<Range<usize>> {
    (0..n)
        .step_by(per.max(1))
        .map(|a| a..(a + per.max(1)).min(n))
        .collect()
}

pub(crate) fn yaml(ctx: &Ctx, view: ShowView) -> crate::Result<String> {
    let names = Names::new(ctx);
    let s = crate::doc::yaml(&build(ctx, &names, view))
        .map_err(|e| Error::Encode(format!("the show document as yaml: {e}")))?;
    Ok(quote_busids(&s))
}

/// YAML 1.1 readers (PyYAML) take a plain `0000:03:00.0` for a sexagesimal number; quote
/// every plain scalar that looks like a bus id (hex digits, colons and dots with a colon).
fn quote_busids(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len() + 64);
    // Indent of the key that opened a literal block (`key: |-`): its lines are text.
    let mut block: Option<usize> = None;
    for line in yaml.lines() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        if let Some(b) = block {
            if body.is_empty() || indent.len() > b {
                out.push_str(line);
                out.push('\n');
                continue;
            }
            block = None;
        }
        if body.ends_with('|') || body.ends_with("|-") || body.ends_with("|+") {
            block = Some(indent.len());
        }
        let mut rest = body;
        let mut prefix = String::from(indent);
        while let Some(r) = rest.strip_prefix("- ") {
            prefix.push_str("- ");
            rest = r;
        }
        let (head, value) = match rest.find(": ") {
            Some(i) if !rest.starts_with(['\'', '"']) => (&rest[..i + 2], &rest[i + 2..]),
            _ => ("", rest),
        };
        let looks_like_busid = value.contains(':')
            && !value.is_empty()
            && value
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
        if looks_like_busid {
            out.push_str(&format!("{prefix}{head}'{value}'\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use topo_model::testing::hgx;

    fn doc(t: &topo_model::Topology, view: ShowView) -> serde_json::Value {
        let ctx = Ctx::new(t);
        serde_json::from_str(&json(&ctx, view).unwrap()).unwrap()
    }

    #[test]
    fn the_streamed_document_is_the_documents_bytes_in_every_view() {
        // json_to lists Doc's fields by hand (to encode two of them on another core): a
        // field added to Doc but not there would vanish from `topo show --format json`.
        let t = hgx(8, 90).replicate(3);
        let ctx = Ctx::new(&t);
        for view in [
            ShowView::Summary,
            ShowView::Matrix,
            ShowView::Pci,
            ShowView::Paths,
            ShowView::Dot,
        ] {
            let mut out = vec![];
            json_to(&ctx, view, &mut out).unwrap();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                json(&ctx, view).unwrap(),
                "{view:?}"
            );
        }
    }

    #[test]
    fn the_document_encoded_on_every_core_is_the_same_bytes() {
        // Three runs of hosts: json_to's jobs go to worker threads (one run stays on one
        // thread), and the writer puts their pieces together.
        let t = hgx(8, 90).replicate(2 * RUN_HOSTS + 3);
        let ctx = Ctx::new(&t);
        assert_eq!(JobPlan::new(&ctx).runs.len(), 3);
        let mut out = vec![];
        json_to(&ctx, ShowView::Summary, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            json(&ctx, ShowView::Summary).unwrap()
        );
    }

    #[test]
    fn contract_fields_on_hgx() {
        let d = doc(&hgx(8, 90), ShowView::Summary);
        assert_eq!(d["schema"], "topo.show/v1");
        let g0 = &d["gpus"][0];
        assert_eq!(g0["index"], 0);
        assert_eq!(g0["busid"], "0000:11:00.0");
        assert_eq!(g0["sm"], 90);
        assert_eq!(g0["numa"], 0);
        assert_eq!(g0["nvlink_lanes"], 18);
        assert_eq!(g0["nvswitch"], true);
        assert_eq!(g0["nearest_nic"], "mlx5_0");
        assert_eq!(g0["nic_path"], "PIX");
        assert_eq!(g0["name"], serde_json::Value::Null);
        let n3 = &d["nics"][3];
        assert_eq!(n3["name"], "mlx5_3");
        assert_eq!(n3["busid"], "0000:42:00.0");
        assert_eq!(n3["speed_gbps"], 400.0);
        assert_eq!(n3["gdr"], true);
        assert_eq!(n3["link_layer"], serde_json::Value::Null);
        assert_eq!(d["numa"][0]["id"], 0);
        assert_eq!(d["numa"][0]["vendor"], "GenuineIntel");
        assert_eq!(d["nvswitches"].as_array().unwrap().len(), 4);
        let sw = &d["pci_switches"][0];
        assert_eq!(sw["busid"], "0000:10:00.0");
        assert_eq!(sw["link_speed_gts"], 32.0);
        assert_eq!(sw["link_width"], 16);
        assert_eq!(sw["children"], serde_json::json!(["GPU0", "0000:12:00.0"]));
        let p = d["paths"].as_array().unwrap();
        // 8 GPUs × (7 peers + 8 NICs)
        assert_eq!(p.len(), 8 * 15);
        let g0g1 = p
            .iter()
            .find(|x| x["from"] == "GPU0" && x["to"] == "GPU1")
            .unwrap();
        assert_eq!(g0g1["type"], "NVL");
        // 18 NVLinks x 20.6 GB/s, summed in f64 as NCCL sums them.
        assert!((g0g1["bw_gbps"].as_f64().unwrap() - 370.8).abs() < 1e-9);
        assert!(d["warnings"].as_array().unwrap().is_empty());
    }

    #[test]
    fn unknowns_are_null_never_na() {
        let d = doc(&unknown_nvlink(), ShowView::Summary);
        assert_eq!(d["gpus"][0]["nvlink_lanes"], serde_json::Value::Null);
        assert_eq!(d["gpus"][0]["nvswitch"], serde_json::Value::Null);
        assert_eq!(d["gpus"][0]["nvlink"]["state"], "unknown");
        assert_eq!(d["gpus"][0]["nvlink"]["reason"], "no NVML");
        assert_eq!(d["gpus"][0]["nearest_nic"], serde_json::Value::Null);
        let text = json(&Ctx::new(&unknown_nvlink()), ShowView::Matrix).unwrap();
        assert!(!text.contains("N/A"));
    }

    #[test]
    fn views_add_their_section() {
        let t = pcie_2socket();
        assert!(doc(&t, ShowView::Matrix)["matrix"][0]["cells"][0][4] == "SYS");
        assert_eq!(
            doc(&t, ShowView::Pci)["pci_tree"][1]["children"][0]["busid"],
            "0000:80:01.0"
        );
        assert!(doc(&t, ShowView::Dot)["nodes"].as_array().unwrap().len() > 10);
        assert!(doc(&t, ShowView::Summary).get("matrix").is_none());
    }

    #[test]
    fn yaml_quotes_busids_and_has_no_tags() {
        let y = yaml(&Ctx::new(&pcie_2socket()), ShowView::Summary).unwrap();
        assert!(y.contains("busid: '0000:02:00.0'"), "{y}");
        assert!(
            y.contains("- '0000:04:00.0'") || y.contains("children:\n  - GPU0"),
            "{y}"
        );
        assert!(!y.contains(" !"), "{y}");
        let v: yaml_serde::Value = yaml_serde::from_str(&y).unwrap();
        assert_eq!(v["schema"].as_str(), Some("topo.show/v1"));
        assert_eq!(
            quote_busids("w: |-\n  line one\n  0000:05:00.0\nc: 0000:06:00.0\n"),
            "w: |-\n  line one\n  0000:05:00.0\nc: '0000:06:00.0'\n"
        );
        assert_eq!(
            quote_busids("a: 0000:03:00.0\n- 0000:04:00.0\nb: x:y\n"),
            "a: '0000:03:00.0'\n- '0000:04:00.0'\nb: x:y\n"
        );
    }

    #[test]
    fn output_is_deterministic() {
        let t = hgx(8, 90);
        let a = json(&Ctx::new(&t), ShowView::Dot).unwrap();
        let b = json(&Ctx::new(&t), ShowView::Dot).unwrap();
        assert_eq!(a, b);
    }
}
