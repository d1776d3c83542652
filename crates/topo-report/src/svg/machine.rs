//! `topo show --format svg`: one panel per host. Each NUMA domain is a box holding its PCIe
//! tree (switches above the GPUs, NICs and other devices they carry); an NVSwitch fabric is
//! one block under the GPUs with one NVLink drop per GPU (not a line per GPU × chip); direct
//! NVLinks (bridges, meshes) are green arcs; NICs are coloured and labelled by rail (the
//! port's position on its host, which is what a rail-optimised fabric wires to one leaf);
//! pairs of NVLink-connected GPUs that NCCL would not connect over P2P (SHM or NET instead:
//! NVML reports P2P unsupported, a hidden fabric, ...) are red dashed arcs with the reason.
//!
//! The anomalies come from the model's transport choice with NCCL's defaults
//! (`topo_nccl::transport::select`), as `topo show` does not apply `--env`; `topo plan`
//! shows what a given environment changes.

use super::{Anchor, Svg, clip};
use crate::show::model::{Ctx, HostView, no_gpu_line, sorted_nvswitches};
use petgraph::graph::NodeIndex;
use std::collections::{BTreeMap, HashMap};
use topo_model::{BwConstants, LinkKind, NodeKind, PcieLink};
use topo_nccl::paths::{self, PathPolicy};
use topo_nccl::system::System;
use topo_nccl::transport::{self, TransportPolicy};

/// Hosts drawn; the rest are named in a line (a `--nodes 4096` what-if is one host repeated).
const MAX_HOSTS: usize = 4;
/// Anomaly sentences listed per host; the arcs are all drawn.
const MAX_NOTES: usize = 12;
const GAP: f64 = 14.0;
const ROW: f64 = 100.0;
const PAD: f64 = 16.0;
const NUMA_HEAD: f64 = 46.0;
const NUMA_GAP: f64 = 80.0;
const LINE: f64 = 15.0;
const RAILS: usize = 12;

const STYLE: &str = "
text{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;font-size:12px;fill:#222}
.title{font-size:18px;font-weight:bold}
.host{font-size:15px;font-weight:bold}
.b{font-weight:bold}
.small{font-size:11px;fill:#555}
.note{font-size:12px;fill:#555}
.warn{font-size:12px;fill:#c62828}
.numa{fill:#fbfcfd;stroke:#90a4ae;stroke-width:1.5;stroke-dasharray:6 4}
.sw{fill:#eceff1;stroke:#607d8b}
.gpu{fill:#e8f5e9;stroke:#2e7d32;stroke-width:1.5}
.gpu.bad{stroke:#d32f2f;stroke-width:3}
.dev{fill:#fafafa;stroke:#9e9e9e}
.nic{stroke-width:2}
.r0{fill:#e3f2fd;stroke:#1565c0}.r1{fill:#fff3e0;stroke:#ef6c00}
.r2{fill:#f3e5f5;stroke:#6a1b9a}.r3{fill:#e0f7fa;stroke:#00838f}
.r4{fill:#fce4ec;stroke:#ad1457}.r5{fill:#f1f8e9;stroke:#558b2f}
.r6{fill:#fffde7;stroke:#f9a825}.r7{fill:#efebe9;stroke:#4e342e}
.r8{fill:#e8eaf6;stroke:#283593}.r9{fill:#fbe9e7;stroke:#bf360c}
.r10{fill:#e0f2f1;stroke:#00695c}.r11{fill:#f9fbe7;stroke:#827717}
.pci{stroke:#78909c;stroke-width:1.5}
.sys{stroke:#546e7a;stroke-width:3}
.nvs{fill:#1565c0;stroke:#0d47a1}
.nvs-t{fill:white;font-weight:bold;font-size:13px}
.nvl{stroke:#1565c0;stroke-width:3}
.drop{stroke:#b0bec5;stroke-width:1;stroke-dasharray:2 3}
.bridge{fill:none;stroke:#2e7d32;stroke-width:3}
.anomaly{fill:none;stroke:#d32f2f;stroke-width:2;stroke-dasharray:6 3}
";

/// The whole picture: every view at once (`--view` has no SVG form; the command refuses one).
pub(crate) fn render(ctx: &Ctx) -> String {
    picture(ctx)
}

fn picture(ctx: &Ctx) -> String {
    let anomalies = anomalies(ctx);
    let mut svg = Svg::new();
    let mut y = 34.0;
    let head = title(ctx);
    // Wide enough for the title (18px bold: about 10.5px a character).
    let mut width: f64 = (2.0 * PAD + head.chars().count() as f64 * 10.5).max(640.0);
    svg.text(PAD, 24.0, "title", Anchor::Start, &head);
    for hv in ctx.hosts.iter().take(MAX_HOSTS) {
        let (w, h) = host_panel(ctx, hv, &anomalies, &mut svg, y);
        width = width.max(w);
        y += h + 24.0;
    }
    if ctx.hosts.len() > MAX_HOSTS {
        let more = ctx.hosts.len() - MAX_HOSTS;
        svg.text(
            PAD,
            y,
            "note",
            Anchor::Start,
            &format!("{more} more hosts not drawn (topo show --format json lists every host)"),
        );
        y += 20.0;
    }
    if let Some(c) = ctx.copies {
        svg.text(PAD, y, "note", Anchor::Start, &c.sentence());
        y += 20.0;
    }
    svg.finish(width, y + 8.0, STYLE)
}

fn title(ctx: &Ctx) -> String {
    let src = &ctx.topo.source;
    let origin = src
        .origin
        .as_deref()
        .map(|o| format!(" {}", clip(o, 80)))
        .unwrap_or_default();
    // Copies of one machine (`--nodes`) count whole, though one copy is drawn.
    let (hosts, gpus) = match ctx.copies.map(|c| c.doc()) {
        Some(d) => (d.hosts, d.gpus),
        None => (
            ctx.hosts.len(),
            ctx.hosts.iter().map(|h| h.gpus.len()).sum(),
        ),
    };
    format!(
        "topo show: {}{origin} · {hosts} host{} · {gpus} GPU{}",
        src.kind,
        if hosts == 1 { "" } else { "s" },
        if gpus == 1 { "" } else { "s" }
    )
}

/// A GPU pair NCCL would not connect over P2P though NVLink joins them.
struct Anomaly {
    a: NodeIndex,
    b: NodeIndex,
    transport: String,
    text: String,
}

/// Same-host anomalies from the model's transport choice, one per unordered pair (the first
/// direction found), keyed by host.
fn anomalies(ctx: &Ctx) -> BTreeMap<u16, Vec<Anomaly>> {
    let sys = System::build(ctx.topo, &BwConstants::default());
    let pp = PathPolicy::default();
    let paths = paths::compute(&sys, &pp);
    let pairs = transport::select(&sys, &paths, &pp, &TransportPolicy::default());
    let model = |rank: usize| sys.gpus.get(rank).and_then(|&i| sys.nodes[i].topo);
    let mut out: BTreeMap<u16, Vec<Anomaly>> = BTreeMap::new();
    for p in pairs.iter().filter(|p| !p.inter_node) {
        let (Some(text), Some(a), Some(b)) = (&p.anomaly, model(p.from), model(p.to)) else {
            continue;
        };
        let host = ctx.topo.node(a).host;
        let list = out.entry(host).or_default();
        if list.iter().any(|x| (x.a, x.b) == (b, a)) {
            continue;
        }
        list.push(Anomaly {
            a,
            b,
            transport: p.transport.to_string(),
            text: text.to_string(),
        });
    }
    out
}

/// A box in the PCIe tree and what hangs below it.
struct Item {
    node: NodeIndex,
    children: Vec<Item>,
    /// Width of the subtree.
    width: f64,
    /// Height of this node's own box.
    h: f64,
    /// Children drawn one under the other (a switch carrying one GPU and its NICs, as on
    /// HGX boards) rather than side by side: half the width, and the GPU last so that its
    /// NVLink drop runs clear of the boxes.
    stacked: bool,
}

/// Indent of stacked children, right of their bus line.
const INDENT: f64 = 18.0;
const STACK_GAP: f64 = 10.0;
/// From a stacking box's bottom to its first child's top.
const STACK_TOP: f64 = 24.0;

/// Nodes of a host that hang off nothing (skeleton sources): drawn in their own box.
fn orphans(ctx: &Ctx, hv: &HostView) -> Vec<NodeIndex> {
    let t = ctx.topo;
    let mut v: Vec<NodeIndex> = t
        .graph
        .node_indices()
        .filter(|&n| {
            let node = t.node(n);
            node.host == hv.host
                && node.parent.is_none()
                && !matches!(
                    node.kind,
                    NodeKind::Cpu(_) | NodeKind::NvSwitch(_) | NodeKind::Net(_)
                )
        })
        .collect();
    v.sort_by_key(|&n| (t.node(n).busid(), n));
    v
}

fn children(ctx: &Ctx, n: NodeIndex) -> Vec<NodeIndex> {
    let t = ctx.topo;
    let mut v: Vec<NodeIndex> = t
        .children(n)
        .into_iter()
        .filter(|&c| !matches!(t.node(c).kind, NodeKind::NvSwitch(_) | NodeKind::Net(_)))
        .collect();
    v.sort_by_key(|&c| (t.node(c).busid(), c));
    v
}

fn item(ctx: &Ctx, n: NodeIndex, depth: usize) -> Item {
    // The model's trees are at most a few levels deep; the bound only guards a cycle.
    let mut kids: Vec<Item> = if depth < 16 {
        children(ctx, n)
            .into_iter()
            .map(|c| item(ctx, c, depth + 1))
            .collect()
    } else {
        vec![]
    };
    let (own_w, h) = box_size(ctx, n);
    let is_gpu = |i: &Item| matches!(ctx.topo.node(i.node).kind, NodeKind::Gpu(_));
    let stacked = kids.len() > 1
        && kids.iter().all(|k| k.children.is_empty())
        && kids.iter().filter(|k| is_gpu(k)).count() <= 1;
    let width = if stacked {
        kids.sort_by_key(|k| is_gpu(k));
        kids.iter().map(|k| k.width + INDENT).fold(own_w, f64::max)
    } else {
        let sum =
            kids.iter().map(|k| k.width).sum::<f64>() + GAP * kids.len().saturating_sub(1) as f64;
        own_w.max(sum)
    };
    Item {
        node: n,
        width,
        children: kids,
        h,
        stacked,
    }
}

fn box_size(ctx: &Ctx, n: NodeIndex) -> (f64, f64) {
    match &ctx.topo.node(n).kind {
        NodeKind::Gpu(_) => (184.0, 4.0 * LINE + 12.0),
        NodeKind::Nic(_) => {
            let ports = ports(ctx, n).len().clamp(1, 3) as f64;
            (184.0, (1.0 + 2.0 * ports) * LINE + 12.0)
        }
        NodeKind::PciSwitch(_) => (150.0, 3.0 * LINE + 10.0),
        _ => (130.0, 2.0 * LINE + 10.0),
    }
}

fn ports(ctx: &Ctx, nic: NodeIndex) -> Vec<NodeIndex> {
    let t = ctx.topo;
    let mut v: Vec<NodeIndex> = t
        .children(nic)
        .into_iter()
        .filter(|&c| matches!(t.node(c).kind, NodeKind::Net(_)))
        .collect();
    v.sort_by_key(|&c| (ctx.index(c), c));
    v
}

/// Height of a subtree, its own box included.
fn tree_height(it: &Item) -> f64 {
    if it.stacked {
        let column: f64 = it.children.iter().map(|c| c.h + STACK_GAP).sum();
        return it.h + STACK_TOP + column - STACK_GAP;
    }
    it.children
        .iter()
        .map(|c| ROW + tree_height(c))
        .fold(it.h, f64::max)
}

/// Where each GPU box was drawn: its centre x and bottom y.
type Placed = HashMap<NodeIndex, (f64, f64)>;

/// One host: returns its width and height.
fn host_panel(
    ctx: &Ctx,
    hv: &HostView,
    anomalies: &BTreeMap<u16, Vec<Anomaly>>,
    svg: &mut Svg,
    y0: f64,
) -> (f64, f64) {
    let host = hv.host;
    let line = host_line(ctx, hv);
    // 15px bold: about 9px a character.
    let line_w = 2.0 * PAD + line.chars().count() as f64 * 9.0;
    svg.text(PAD, y0 + 16.0, "host", Anchor::Start, &line);
    let top = y0 + 28.0;
    // NUMA domains, then a box for devices the source placed under no CPU.
    let mut groups: Vec<(Option<NodeIndex>, Vec<Item>)> = hv
        .cpus
        .iter()
        .map(|&c| {
            (
                Some(c),
                children(ctx, c)
                    .into_iter()
                    .map(|n| item(ctx, n, 1))
                    .collect(),
            )
        })
        .collect();
    let lost = orphans(ctx, hv);
    if !lost.is_empty() {
        groups.push((None, lost.into_iter().map(|n| item(ctx, n, 1)).collect()));
    }
    let tree_h = groups
        .iter()
        .flat_map(|(_, items)| items.iter().map(tree_height))
        .fold(0.0, f64::max);
    let numa_h = NUMA_HEAD + tree_h + PAD;
    let bad: Vec<NodeIndex> = anomalies
        .get(&host)
        .map(|v| v.iter().flat_map(|a| [a.a, a.b]).collect())
        .unwrap_or_default();
    let mut placed = Placed::new();
    let mut x = PAD;
    let mut numa_boxes: Vec<(NodeIndex, f64, f64)> = vec![];
    for (cpu, items) in &groups {
        let inner: f64 =
            items.iter().map(|i| i.width).sum::<f64>() + GAP * items.len().saturating_sub(1) as f64;
        let w = (inner + 2.0 * PAD).max(300.0);
        svg.rect(x, top, w, numa_h, "numa", None);
        let (head, sub) = numa_heading(ctx, *cpu);
        svg.text(x + 10.0, top + 18.0, "b", Anchor::Start, &head);
        svg.text(x + 10.0, top + 34.0, "small", Anchor::Start, &sub);
        if items.is_empty() {
            svg.text(
                x + 10.0,
                top + 60.0,
                "note",
                Anchor::Start,
                "no PCI devices",
            );
        }
        let mut cx = x + (w - inner) / 2.0;
        for it in items {
            draw_item(ctx, it, cx, top + NUMA_HEAD, None, &bad, &mut placed, svg);
            cx += it.width + GAP;
        }
        if let Some(c) = cpu {
            numa_boxes.push((*c, x, w));
        }
        x += w + NUMA_GAP;
    }
    let width = x - NUMA_GAP + PAD;
    cpu_links(ctx, &numa_boxes, top, svg);
    let mut y = top + numa_h + 12.0;
    y = gpu_links(ctx, hv, &placed, anomalies.get(&host), y, width, svg);
    let (y, note_w) = notes(ctx, hv, anomalies.get(&host), y, svg);
    (width.max(note_w).max(line_w), y - y0)
}

fn host_line(ctx: &Ctx, hv: &HostView) -> String {
    let name = clip(&ctx.host_name(hv.host), 60);
    let mut models: Vec<String> = vec![];
    for &g in &hv.gpus {
        let m = ctx
            .topo
            .gpu(g)
            .and_then(gpu_model)
            .unwrap_or_else(|| "GPU".into());
        if !models.contains(&m) {
            models.push(m);
        }
    }
    let gpus = if hv.gpus.is_empty() {
        "no GPU".to_string()
    } else {
        format!("{} × {}", hv.gpus.len(), clip(&models.join(", "), 60))
    };
    let nics = hv.nets.len() + hv.bare_nics.len();
    format!(
        "{name} · {gpus} · {nics} network port{}",
        if nics == 1 { "" } else { "s" }
    )
}

fn numa_heading(ctx: &Ctx, cpu: Option<NodeIndex>) -> (String, String) {
    let Some(c) = cpu.and_then(|c| ctx.topo.cpu(c)) else {
        return (
            "No NUMA node known".into(),
            "the source places these devices under no CPU".into(),
        );
    };
    let head = if c.numa >= 0 {
        format!("NUMA {}", c.numa)
    } else {
        "NUMA ?".to_string()
    };
    let cpus = crate::show::model::cpu_list(c)
        .map(|l| format!("CPUs {}", clip(&l, 40)))
        .unwrap_or_else(|| "CPUs unknown".into());
    let arch = [c.vendor.as_deref(), c.arch.as_deref()]
        .into_iter()
        .flatten()
        .map(|s| clip(s, 24))
        .collect::<Vec<_>>()
        .join(" ");
    (head, format!("{cpus}  {arch}").trim_end().to_string())
}

/// `Gen5 x16 · 48 GB/s`.
fn pcie_text(l: &PcieLink) -> String {
    let generation = match l.gts() {
        Some(g) if (g - 2.5).abs() < 0.1 => "Gen1".to_string(),
        Some(g) if (g - 5.0).abs() < 0.1 => "Gen2".to_string(),
        Some(g) if (g - 8.0).abs() < 0.1 => "Gen3".to_string(),
        Some(g) if (g - 16.0).abs() < 0.1 => "Gen4".to_string(),
        Some(g) if (g - 32.0).abs() < 0.1 => "Gen5".to_string(),
        Some(g) if (g - 64.0).abs() < 0.1 => "Gen6".to_string(),
        Some(g) => format!("{g} GT/s"),
        None => "Gen?".to_string(),
    };
    let width = l
        .width
        .map(|w| format!("x{w}"))
        .unwrap_or_else(|| "x?".into());
    format!("{generation} {width} · {:.0} GB/s", l.bw())
}

#[allow(clippy::too_many_arguments)]
fn draw_item(
    ctx: &Ctx,
    it: &Item,
    x: f64,
    y: f64,
    parent: Option<(f64, f64)>,
    bad: &[NodeIndex],
    placed: &mut Placed,
    svg: &mut Svg,
) {
    let (w, _) = box_size(ctx, it.node);
    let bx = x + (it.width - w) / 2.0;
    if let Some((px, py)) = parent {
        svg.line(px, py, bx + w / 2.0, y, "pci");
    }
    draw_box(ctx, it.node, bx, y, w, it.h, bad, svg);
    if matches!(ctx.topo.node(it.node).kind, NodeKind::Gpu(_)) {
        placed.insert(it.node, (bx + w / 2.0, y + it.h));
    }
    if it.stacked {
        // A bus line down the column's left, a stub to each child: the `--view pci` tree.
        let cw = it.children.iter().map(|c| c.width).fold(0.0, f64::max) + INDENT;
        let left = x + (it.width - cw) / 2.0;
        let bus = left + INDENT / 2.0;
        let (mut cy, mut last) = (y + it.h + STACK_TOP, y + it.h + STACK_TOP);
        svg.line(bx + w / 2.0, y + it.h, bx + w / 2.0, y + it.h + 12.0, "pci");
        svg.line(bx + w / 2.0, y + it.h + 12.0, bus, y + it.h + 12.0, "pci");
        for c in &it.children {
            let mid = cy + c.h / 2.0;
            svg.line(bus, mid, left + INDENT, mid, "pci");
            draw_item(ctx, c, left + INDENT, cy, None, bad, placed, svg);
            last = mid;
            cy += c.h + STACK_GAP;
        }
        svg.line(bus, y + it.h + 12.0, bus, last, "pci");
        return;
    }
    let inner: f64 = it.children.iter().map(|c| c.width).sum::<f64>()
        + GAP * it.children.len().saturating_sub(1) as f64;
    let mut cx = x + (it.width - inner) / 2.0;
    for c in &it.children {
        draw_item(
            ctx,
            c,
            cx,
            y + ROW,
            Some((bx + w / 2.0, y + it.h)),
            bad,
            placed,
            svg,
        );
        cx += c.width + GAP;
    }
}

#[allow(clippy::too_many_arguments)]
fn draw_box(
    ctx: &Ctx,
    n: NodeIndex,
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    bad: &[NodeIndex],
    svg: &mut Svg,
) {
    let node = ctx.topo.node(n);
    let bus = node
        .busid()
        .map(|b| b.to_string())
        .unwrap_or_else(|| "no bus id".into());
    let (class, lines): (String, Vec<(String, &str)>) = match &node.kind {
        NodeKind::Gpu(g) => {
            let nv = ctx.nvlink(n);
            let link = match &nv.unknown {
                Some(_) => "NVLink unknown".to_string(),
                None if nv.lanes > 0 => format!("NVLink ×{} · {:.1} GB/s", nv.lanes, nv.bw),
                None => "no NVLink".to_string(),
            };
            let class = if bad.contains(&n) { "gpu bad" } else { "gpu" };
            (
                class.into(),
                vec![
                    (format!("{} (dev {})", ctx.label(n), g.dev), "b"),
                    (
                        clip(&gpu_model(g).unwrap_or_else(|| "unknown model".into()), 26),
                        "t",
                    ),
                    (bus.clone(), "small"),
                    (link, "small"),
                ],
            )
        }
        NodeKind::Nic(nic) => {
            let ps = ports(ctx, n);
            let rail = ps.first().map(|&p| ctx.index(p) % RAILS).unwrap_or(0);
            let mut lines = vec![];
            for &p in ps.iter().take(3) {
                if let Some(net) = ctx.topo.net(p) {
                    lines.push((
                        format!("{} · rail {}", clip(&net.name, 14), ctx.index(p)),
                        "b",
                    ));
                    lines.push((net_speed(net), "small"));
                }
            }
            if ps.len() > 3 {
                lines.push((format!("+{} more ports", ps.len() - 3), "small"));
            }
            if ps.is_empty() {
                lines.push(("NIC (no network port known)".into(), "b"));
            }
            let generation = pcie_text(&nic.pcie);
            let generation = generation.split(" · ").next().unwrap_or_default();
            lines.push((format!("{bus} · {generation}"), "small"));
            (format!("nic r{rail}"), lines)
        }
        NodeKind::PciSwitch(s) => (
            "sw".into(),
            vec![
                ("PCIe switch".into(), "b"),
                (bus.clone(), "small"),
                (pcie_text(&s.pcie), "small"),
            ],
        ),
        NodeKind::PciDevice(d) => (
            "dev".into(),
            vec![(clip(&device_kind(d), 18), "t"), (bus.clone(), "small")],
        ),
        _ => ("dev".into(), vec![(bus.clone(), "small")]),
    };
    svg.rect(x, y, w, h, &class, Some(&tip(ctx, n)));
    for (i, (s, c)) in lines.iter().enumerate() {
        svg.text(x + 8.0, y + 17.0 + i as f64 * LINE, c, Anchor::Start, s);
    }
}

/// The GPU's name, else the model its PCI ids name (as the other views say it).
fn gpu_model(g: &topo_model::Gpu) -> Option<String> {
    g.name
        .clone()
        .or_else(|| crate::show::pci::model_name(g.vendor, g.device).map(String::from))
}

fn net_speed(net: &topo_model::Net) -> String {
    let speed = net
        .speed_mbps
        .map(|m| format!("{} Gb/s", m / 1000))
        .unwrap_or_else(|| "speed unknown".into());
    let layer = match net.link_layer.as_deref() {
        Some(l) if l.eq_ignore_ascii_case("infiniband") => " IB".to_string(),
        Some(l) if l.eq_ignore_ascii_case("ethernet") => " RoCE/Ethernet".to_string(),
        Some(l) => format!(" {}", clip(l, 12)),
        None => String::new(),
    };
    // Unknown stays unknown: a source without `gdr` (a matrix, a skeleton XML) gets a `?`,
    // as show's table prints it, not the absence that reads as "no GDR".
    let gdr = if net.gdr {
        " · GDR"
    } else if net.gdr_unstated {
        " · GDR ?"
    } else {
        ""
    };
    format!("{speed}{layer}{gdr}")
}

fn device_kind(d: &topo_model::PciDevice) -> String {
    match d.class >> 8 {
        0x0108 => "NVMe".into(),
        0x0106 => "SATA".into(),
        0x0200 => "Ethernet".into(),
        0x0300 | 0x0302 => "display".into(),
        _ => d.driver.clone().unwrap_or_else(|| "PCI device".into()),
    }
}

/// The tooltip: the node's fuller description.
fn tip(ctx: &Ctx, n: NodeIndex) -> String {
    let node = ctx.topo.node(n);
    let bus = node.busid().map(|b| b.to_string()).unwrap_or_default();
    match &node.kind {
        NodeKind::Gpu(g) => {
            let nv = ctx.nvlink(n);
            let nvl = match &nv.unknown {
                Some(r) => format!("NVLink unknown: {r}"),
                None => format!("NVLink lanes {} ({:.1} GB/s)", nv.lanes, nv.bw),
            };
            let near = ctx
                .nearest_nic(n)
                .map(|(nic, p)| format!("; nearest NIC {} ({})", ctx.label(nic), p.ty))
                .unwrap_or_default();
            format!(
                "{} {} {bus}; {}; {nvl}{near}",
                ctx.label(n),
                gpu_model(g).unwrap_or_else(|| "GPU".into()),
                pcie_text(&g.pcie)
            )
        }
        NodeKind::PciSwitch(s) => format!("PCIe switch {bus}; {}", pcie_text(&s.pcie)),
        NodeKind::Nic(nic) => {
            let names: Vec<String> = ports(ctx, n)
                .iter()
                .filter_map(|&p| ctx.topo.net(p))
                .map(|p| format!("{} ({})", p.name, net_speed(p)))
                .collect();
            format!(
                "NIC {bus}; {}; ports: {}",
                pcie_text(&nic.pcie),
                names.join(", ")
            )
        }
        NodeKind::PciDevice(d) => format!("{} {bus}; {}", device_kind(d), pcie_text(&d.pcie)),
        _ => bus,
    }
}

/// Inter-socket links between neighbouring NUMA boxes.
fn cpu_links(ctx: &Ctx, boxes: &[(NodeIndex, f64, f64)], top: f64, svg: &mut Svg) {
    for w in boxes.windows(2) {
        let ((a, ax, aw), (b, bx, _)) = (w[0], w[1]);
        let bw: f64 = ctx
            .topo
            .graph
            .edges_connecting(a, b)
            .filter(|e| e.weight().kind == LinkKind::Sys)
            .map(|e| e.weight().bw)
            .fold(0.0, f64::max);
        if bw <= 0.0 {
            continue;
        }
        let y = top + 24.0;
        svg.line(ax + aw, y, bx, y, "sys");
        svg.text(
            (ax + aw + bx) / 2.0,
            y - 6.0,
            "small",
            Anchor::Middle,
            &sys_label(bw),
        );
    }
}

/// An inter-socket link's label. NCCL gives a CPU it does not know LOC_BW (5000 GB/s,
/// `ncclTopoGetInterCpuBw` in src/graph/topo.cc, 2.18-2.30): a placeholder, not a rate.
fn sys_label(bw: f64) -> String {
    if bw >= topo_model::BwConstants::default().loc {
        // The gap between the boxes fits only a short label.
        "bw unknown".into()
    } else {
        format!("{bw:.0} GB/s")
    }
}

/// Direct NVLink arcs, anomaly arcs and the NVSwitch block under the GPUs; returns the y
/// below them.
fn gpu_links(
    ctx: &Ctx,
    hv: &HostView,
    placed: &Placed,
    anomalies: Option<&Vec<Anomaly>>,
    y0: f64,
    width: f64,
    svg: &mut Svg,
) -> f64 {
    let t = ctx.topo;
    let mut direct: Vec<(NodeIndex, NodeIndex, u32)> = vec![];
    for &g in &hv.gpus {
        for (peer, lanes, _) in ctx.nvlink(g).peers {
            if g < peer || !t.nvlinks(peer).iter().any(|(p, _, _)| *p == g) {
                direct.push((g, peer, lanes));
            }
        }
    }
    let anomalies: &[Anomaly] = anomalies.map(|v| v.as_slice()).unwrap_or(&[]);
    let switches = sorted_nvswitches(ctx, hv.host);
    if direct.is_empty() && anomalies.is_empty() && switches.is_empty() {
        return y0;
    }
    let mut y = y0;
    let band = |y: f64, pairs: &mut dyn Iterator<Item = (NodeIndex, NodeIndex)>| -> f64 {
        let max = pairs
            .filter_map(|(a, b)| Some((placed.get(&a)?.0 - placed.get(&b)?.0).abs()))
            .fold(0.0, f64::max);
        y + (max / 6.0).clamp(20.0, 70.0) + 18.0
    };
    let direct_y = y;
    if !direct.is_empty() {
        y = band(y, &mut direct.iter().map(|d| (d.0, d.1)));
    }
    let anomaly_y = y;
    if !anomalies.is_empty() {
        y = band(y, &mut anomalies.iter().map(|a| (a.a, a.b)));
    }
    // GPU drops: down to the fabric block, or through the arc bands.
    let bottom = if switches.is_empty() { y - 14.0 } else { y };
    for &g in &hv.gpus {
        let Some(&(gx, gy)) = placed.get(&g) else {
            continue;
        };
        let s = ctx.nvlink(g);
        let class = if s.switch_lanes > 0 { "nvl" } else { "drop" };
        svg.line(gx, gy, gx, bottom, class);
        if s.switch_lanes > 0 {
            svg.text(
                gx + 5.0,
                bottom - 5.0,
                "small",
                Anchor::Start,
                &format!("×{}", s.switch_lanes),
            );
        }
    }
    let arc = |svg: &mut Svg, a: NodeIndex, b: NodeIndex, y: f64, class: &str, tip: &str| {
        if let (Some(&(ax, _)), Some(&(bx, _))) = (placed.get(&a), placed.get(&b)) {
            svg.arc(
                ax,
                bx,
                y,
                ((ax - bx).abs() / 6.0).clamp(20.0, 70.0),
                class,
                tip,
            );
        }
    };
    for &(a, b, lanes) in &direct {
        let tip = format!("{} ↔ {}: {lanes} NVLink lanes", ctx.label(a), ctx.label(b));
        arc(svg, a, b, direct_y, "bridge", &tip);
        if let (Some(&(ax, _)), Some(&(bx, _))) = (placed.get(&a), placed.get(&b)) {
            let depth = ((ax - bx).abs() / 6.0).clamp(20.0, 70.0);
            // A cubic dips three quarters of its control depth at the middle.
            let label = format!("NVLink ×{lanes}");
            svg.text(
                (ax + bx) / 2.0,
                direct_y + depth * 0.75 + 14.0,
                "small",
                Anchor::Middle,
                &label,
            );
        }
    }
    for an in anomalies {
        let tip = format!("{} → {}: {}", ctx.label(an.a), ctx.label(an.b), an.text);
        arc(svg, an.a, an.b, anomaly_y, "anomaly", &tip);
    }
    if !switches.is_empty() {
        let xs: Vec<f64> = hv
            .gpus
            .iter()
            .filter_map(|g| placed.get(g))
            .map(|p| p.0)
            .collect();
        let lo = xs
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
            .min(width / 2.0)
            - 60.0;
        let hi = xs
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
            .max(width / 2.0)
            + 60.0;
        let (lo, hi) = (lo.max(PAD), hi.min(width - PAD));
        svg.rect(
            lo,
            y,
            hi - lo,
            40.0,
            "nvs",
            Some(&fabric_tip(ctx, &switches)),
        );
        svg.text(
            (lo + hi) / 2.0,
            y + 25.0,
            "nvs-t",
            Anchor::Middle,
            &fabric_text(ctx, hv, &switches),
        );
        y += 40.0;
    }
    y + 18.0
}

fn fabric_text(ctx: &Ctx, hv: &HostView, switches: &[NodeIndex]) -> String {
    let per_gpu = hv
        .gpus
        .first()
        .map(|&g| ctx.nvlink(g))
        .map(|s| {
            format!(
                " · {} NVLinks per GPU, {:.1} GB/s",
                s.switch_lanes, s.switch_bw
            )
        })
        .unwrap_or_default();
    format!(
        "NVSwitch fabric · {} chip{}{per_gpu}",
        switches.len(),
        if switches.len() == 1 { "" } else { "s" }
    )
}

fn fabric_tip(ctx: &Ctx, switches: &[NodeIndex]) -> String {
    let ids: Vec<String> = switches
        .iter()
        .map(|&s| {
            ctx.topo
                .node(s)
                .busid()
                .map(|b| b.to_string())
                .unwrap_or_else(|| "hidden".into())
        })
        .collect();
    format!("NVSwitch chips: {}", ids.join(", "))
}

/// Longest line under the picture, in characters: the reason and fix must stay readable.
const NOTE_CHARS: usize = 220;
/// Average advance of a 12px sans-serif character, to size the picture to its notes.
const CHAR_W: f64 = 6.6;

/// The anomaly sentences, the no-GPU reason and unknown NVLinks, under the picture; returns
/// the y below them and the width they need.
fn notes(
    ctx: &Ctx,
    hv: &HostView,
    anomalies: Option<&Vec<Anomaly>>,
    mut y: f64,
    svg: &mut Svg,
) -> (f64, f64) {
    // Clear of the box above: y is a baseline.
    y += 6.0;
    let mut longest = 0;
    let mut line = |svg: &mut Svg, y: f64, class: &str, s: &str| {
        let s = clip(s, NOTE_CHARS);
        longest = longest.max(s.chars().count());
        svg.text(PAD, y, class, Anchor::Start, &s);
    };
    if hv.gpus.is_empty() {
        line(svg, y, "note", &no_gpu_line(ctx, hv.host));
        y += 18.0;
    }
    if let Some(reason) = hv.gpus.iter().find_map(|&g| ctx.nvlink(g).unknown) {
        line(svg, y, "note", &format!("NVLink unknown: {reason}"));
        y += 18.0;
    }
    // A VM's tree, as every view states it (`topo_model::pcie_judge`): the picture is the
    // hypervisor's, not the hardware's.
    for v in topo_model::pcie_judge::verdicts(ctx.topo, hv.nodes.iter().copied()) {
        if matches!(
            v.code,
            topo_model::message::Code::VirtualizedTopology
                | topo_model::message::Code::TopologyFlattened
        ) {
            line(svg, y, "warn", &format!("{}: {}", v.code, v.text));
            y += 16.0;
        }
    }
    let list: &[Anomaly] = anomalies.map(|v| v.as_slice()).unwrap_or(&[]);
    for an in list.iter().take(MAX_NOTES) {
        let s = format!(
            "{} → {}: {}: {}",
            ctx.label(an.a),
            ctx.label(an.b),
            an.transport,
            an.text
        );
        line(svg, y, "warn", &s);
        y += 16.0;
    }
    if list.len() > MAX_NOTES {
        let s = format!(
            "and {} more pairs (topo plan lists every transport)",
            list.len() - MAX_NOTES
        );
        line(svg, y, "warn", &s);
        y += 16.0;
    }
    (y, 2.0 * PAD + longest as f64 * CHAR_W)
}
