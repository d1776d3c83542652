//! The PCI tree per NUMA node (like `lspci -tv` / `lstopo`), with what people look for:
//! class, ids and model, link generation and width, NCCL's bandwidth for the link, and flags
//! for downtrained links, slower upstream links and virtual-machine artefacts.

use super::model::{Ctx, HostView};
use crate::Style;
use petgraph::graph::NodeIndex;
use serde::Serialize;
use std::sync::OnceLock;
use topo_model::bw::{pcie_generation, pcie_gts};
use topo_model::{NodeKind, PcieLink, class};
use topo_source::pciids::PciNames;

/// Where the caller's PCI ID database comes from. topo-report reads no file and no
/// environment (issue 42): the binary names its reader (`topo_source::pciids::names`: the
/// system's pci.ids or `TOPO_PCI_IDS`), called only when a name is first needed; without one,
/// as in unit tests, names come from the embedded subset, so snapshots do not depend on the
/// machine's pci.ids.
static PCI_NAMES: OnceLock<fn() -> &'static PciNames> = OnceLock::new();

/// Use `names` for vendor and device names from now on; a second call changes nothing.
pub fn use_pci_names(names: fn() -> &'static PciNames) {
    let _ = PCI_NAMES.set(names);
}

fn pci_names() -> &'static PciNames {
    PCI_NAMES
        .get()
        .map_or_else(topo_source::pciids::embedded_names, |names| names())
}

/// The vendor's short name from the PCI ID database.
pub(crate) fn vendor_name(v: u16) -> Option<String> {
    pci_names().vendor(v)
}

/// The device's model name from the PCI ID database: `H100 SXM5 80GB`, `B200`, `ConnectX-7`.
pub(crate) fn model_name(vendor: Option<u16>, device: Option<u16>) -> Option<&'static str> {
    pci_names().device(vendor?, device?)
}

pub(crate) use topo_model::pcie_judge::{Flag, gen_width};

/// `Gen4 x16 (16 GT/s) 24.0 GB/s` — the link NCCL uses and its bandwidth.
pub(crate) fn link_text(l: &PcieLink) -> String {
    if l.speed.is_none() && l.width.is_none() {
        return format!("link unknown (NCCL assumes Gen3 x16, {:.1} GB/s)", l.bw());
    }
    let gts = l.gts().map(|g| format!(" ({g} GT/s)")).unwrap_or_default();
    format!(
        "{}{gts} {:.1} GB/s",
        gen_width(l.speed.as_deref(), l.width),
        l.bw()
    )
}

/// What is worth flagging on a node's PCIe link: the one rule of `topo_model::pcie_judge`,
/// which plan and diagnose state too.
pub(crate) fn flags(ctx: &Ctx, n: NodeIndex) -> Vec<Flag> {
    topo_model::pcie_judge::link_flags(ctx.topo, n)
}

/// One line describing a node in the tree.
pub(crate) fn describe(ctx: &Ctx, n: NodeIndex) -> String {
    let node = ctx.topo.node(n);
    let ids = |v: Option<u16>, d: Option<u16>| match (v, d) {
        (Some(v), Some(d)) => format!(" [{v:04x}:{d:04x}]"),
        (Some(v), None) => format!(" [{v:04x}]"),
        _ => String::new(),
    };
    let named = |v: Option<u16>, d: Option<u16>| -> String {
        match (model_name(v, d), v.and_then(vendor_name)) {
            (Some(m), Some(vn)) => format!(" {vn} {m}"),
            (Some(m), None) => format!(" {m}"),
            (None, Some(vn)) => format!(" {vn}"),
            (None, None) => String::new(),
        }
    };
    match &node.kind {
        NodeKind::Cpu(c) => format!("NUMA {}", c.numa),
        NodeKind::PciSwitch(p) => format!(
            "{}  {}{}{}  {}",
            p.busid,
            class::describe(p.class),
            ids(p.vendor, p.device),
            named(p.vendor, p.device),
            link_text(&p.pcie)
        ),
        NodeKind::Gpu(g) => {
            let name = g
                .name
                .clone()
                .map(|x| format!(" {x}"))
                .unwrap_or_else(|| named(g.vendor, g.device));
            format!(
                "{}  {}  {}{}{}  {}",
                g.busid,
                ctx.label(n),
                class::describe(g.class),
                ids(g.vendor, g.device),
                name,
                link_text(&g.pcie)
            )
        }
        NodeKind::Nic(x) => {
            let b = x
                .busid
                .map(|b| b.to_string())
                .unwrap_or_else(|| "(no PCI location)".into());
            let what = if x.busid.is_none() && x.class == 0 {
                "NIC attached to the CPU"
            } else {
                class::describe(x.class)
            };
            format!(
                "{b}  {}{}{}  {}",
                what,
                ids(x.vendor, x.device),
                named(x.vendor, x.device),
                if x.busid.is_some() {
                    link_text(&x.pcie)
                } else {
                    String::new()
                }
            )
            .trim_end()
            .to_string()
        }
        NodeKind::Net(x) => {
            let mut s = format!("{}  NIC{}  port {}", x.name, ctx.index(n), x.port);
            if let Some(m) = x.speed_mbps {
                s.push_str(&format!("  {} Gb/s", fmt_gbps(m)));
            }
            if let Some(ll) = &x.link_layer {
                s.push_str(&format!("  {ll}"));
            }
            s.push_str(match (x.gdr_unstated, x.gdr) {
                (true, _) => "  GDR ?",
                (false, true) => "  GDR",
                (false, false) => "  no GDR",
            });
            if let Some(nd) = &x.netdev {
                s.push_str(&format!("  netdev {nd}"));
            }
            if let Some(st) = &x.state {
                s.push_str(&format!("  state {st}"));
            }
            s
        }
        NodeKind::NvSwitch(s) => {
            let b = s
                .busid
                .map(|b| b.to_string())
                .unwrap_or_else(|| "hidden".into());
            format!("{b}  NVSwitch{}", ids(s.vendor, s.device))
        }
        NodeKind::PciDevice(d) => {
            let link = if d.pcie.speed.is_some() || d.pcie.width.is_some() {
                format!("  {}", link_text(&d.pcie))
            } else {
                String::new()
            };
            let drv = d
                .driver
                .as_ref()
                .map(|x| format!("  ({x})"))
                .unwrap_or_default();
            format!(
                "{}  {}{}{}{link}{drv}",
                d.busid,
                class::describe(d.class),
                ids(d.vendor, d.device),
                named(d.vendor, d.device)
            )
        }
    }
}

/// Mbit/s as Gb/s without a needless `.0` (`400`, `2.5`).
pub(crate) fn fmt_gbps(mbps: u64) -> String {
    topo_model::ports_judge::gbps(mbps)
}

/// Children in `lspci -t` order: by bus id, ports of a NIC by port number.
pub(crate) fn sorted_children(ctx: &Ctx, n: NodeIndex) -> Vec<NodeIndex> {
    let mut kids = ctx.topo.children(n);
    kids.sort_by_key(|&k| {
        let node = ctx.topo.node(k);
        let port = ctx.topo.net(k).map(|x| (x.port, x.name.clone()));
        (node.busid(), port, k)
    });
    kids
}

fn tree(ctx: &Ctx, n: NodeIndex, prefix: &str, out: &mut String, style: Style, depth: usize) {
    let kids = sorted_children(ctx, n);
    for (i, &k) in kids.iter().enumerate() {
        let last = i + 1 == kids.len();
        let (branch, cont) = if last {
            ("└── ", "    ")
        } else {
            ("├── ", "│   ")
        };
        let paint = |t: &str| match ctx.topo.node(k).kind {
            NodeKind::Gpu(_) => style.green(t),
            NodeKind::Nic(_) | NodeKind::Net(_) => style.cyan(t),
            _ => t.to_string(),
        };
        let sub = format!("{prefix}{cont}");
        // Continuation lines keep the tree's lines and sit under the device's text.
        let below = if sorted_children(ctx, k).is_empty() {
            "    "
        } else {
            "│   "
        };
        let first = format!("{prefix}{branch}");
        let more = format!("{sub}{below}");
        for l in tree_lines(&first, &more, &describe(ctx, k), style.width) {
            out.push_str(&paint_tail(&l, &first, &more, paint));
            out.push('\n');
        }
        for f in flags(ctx, k) {
            let first = format!("{sub}! ");
            let more = format!("{sub}{below}  ");
            for l in tree_lines(&first, &more, &f.text, style.width) {
                out.push_str(&paint_tail(&l, &first, &more, |t| style.yellow(t)));
                out.push('\n');
            }
        }
        if depth < 32 {
            tree(ctx, k, &sub, out, style, depth + 1);
        }
    }
}

/// A device's text after its tree prefix, broken between its fields (two spaces apart)
/// where it would pass `width`, and between words only inside a field too long for a line.
fn tree_lines(first: &str, more: &str, text: &str, width: usize) -> Vec<String> {
    use crate::fit::{fit_len, wrap_prefixed};
    let mut lines: Vec<String> = vec![first.to_string()];
    for field in text.split("  ") {
        let cur = lines.last_mut().expect("never empty");
        let start = cur.as_str() == first || cur.as_str() == more;
        let sep = if start { "" } else { "  " };
        if fit_len(cur) + sep.len() + fit_len(field) <= width {
            cur.push_str(sep);
            cur.push_str(field);
            continue;
        }
        let head = if start { cur.clone() } else { more.to_string() };
        if !start {
            lines.push(more.to_string());
        }
        let mut parts = wrap_prefixed(&head, more, field, width);
        let last = lines.last_mut().expect("never empty");
        *last = parts.remove(0);
        lines.extend(parts);
    }
    lines
}

/// `line` with the part after its tree prefix (`first` or `more`) painted.
fn paint_tail(line: &str, first: &str, more: &str, paint: impl Fn(&str) -> String) -> String {
    for p in [first, more] {
        if let Some(t) = line.strip_prefix(p) {
            return format!("{p}{}", paint(t));
        }
    }
    paint(line)
}

pub(crate) fn cpu_heading(ctx: &Ctx, c: NodeIndex) -> String {
    let Some(cpu) = ctx.topo.cpu(c) else {
        return String::new();
    };
    let numa = if cpu.numa >= 0 {
        format!("NUMA {}", cpu.numa)
    } else {
        "NUMA ?".to_string()
    };
    let mut s = numa;
    if let Some(l) = super::model::cpu_list(cpu) {
        s.push_str(&format!("  CPUs {l}"));
    }
    s.push_str(&format!("  {}", super::model::cpu_model(cpu)));
    s
}

fn host_tree(ctx: &Ctx, hv: &HostView, style: Style) -> String {
    let mut out = String::new();
    for &c in &hv.cpus {
        out.push_str(&style.bold(&cpu_heading(ctx, c)));
        out.push('\n');
        tree(ctx, c, "", &mut out, style, 0);
        out.push('\n');
    }
    let switches = super::model::sorted_nvswitches(ctx, hv.host);
    if !switches.is_empty() {
        out.push_str(&style.bold("NVSwitches (reached over NVLink, not PCIe)"));
        out.push('\n');
        for (i, &s) in switches.iter().enumerate() {
            let branch = if i + 1 == switches.len() {
                "└── "
            } else {
                "├── "
            };
            let gpus = super::model::switch_gpus(ctx, s);
            let lanes: Vec<String> = gpus
                .iter()
                .map(|(g, l)| format!("{}×{l}", ctx.label(*g)))
                .collect();
            let text = format!("{}  NVLink lanes: {}", describe(ctx, s), lanes.join(" "));
            let more = if i + 1 == switches.len() {
                "        "
            } else {
                "│       "
            };
            for l in tree_lines(branch, more, &text, style.width) {
                out.push_str(&l);
                out.push('\n');
            }
        }
        out.push('\n');
    }
    let orphans: Vec<NodeIndex> = hv
        .nodes
        .iter()
        .copied()
        .filter(|&n| {
            let node = ctx.topo.node(n);
            node.host == hv.host
                && node.parent.is_none()
                && !matches!(node.kind, NodeKind::Cpu(_) | NodeKind::NvSwitch(_))
        })
        .collect();
    if !orphans.is_empty() {
        out.push_str(&style.bold("Not attached to a NUMA node"));
        out.push('\n');
        for &o in &orphans {
            out.push_str(&format!("    {}\n", describe(ctx, o)));
            tree(ctx, o, "    ", &mut out, style, 0);
        }
        out.push('\n');
    }
    out
}

pub(crate) fn render(ctx: &Ctx, style: Style) -> String {
    let mut out = super::model::per_host(ctx, |_, hv, out| {
        if ctx.multi_host() {
            out.push_str(&style.bold(&format!("Host {}: {}", hv.host, ctx.host_name(hv.host))));
            out.push_str("\n\n");
        }
        out.push_str(&host_tree(ctx, hv, style));
    });
    let note = "GB/s is the bandwidth NCCL assigns to the link (width × per-lane rate; unknown speed counts as Gen3, width 0 as x16).";
    for l in crate::fit::wrap(note, style.width, 4) {
        out.push_str(&l);
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// The tree as data, for `--view pci --format json`.
#[derive(Serialize)]
pub(crate) struct PciNode {
    pub kind: &'static str,
    pub label: String,
    pub busid: Option<String>,
    pub class: Option<String>,
    pub vendor: Option<String>,
    pub device: Option<String>,
    pub model: Option<String>,
    pub link_speed_gts: Option<f64>,
    pub link_generation: Option<u32>,
    pub link_width: Option<u32>,
    pub bw_gbps: Option<f64>,
    pub max_link_speed_gts: Option<f64>,
    pub max_link_width: Option<u32>,
    pub cur_link_speed_gts: Option<f64>,
    pub cur_link_width: Option<u32>,
    pub flags: Vec<Flag>,
    pub children: Vec<PciNode>,
}

pub(crate) fn doc_node(ctx: &Ctx, n: NodeIndex, depth: usize) -> PciNode {
    let node = ctx.topo.node(n);
    let (kind, class_code, vendor, device, model) = match &node.kind {
        NodeKind::Cpu(_) => ("numa", None, None, None, None),
        NodeKind::PciSwitch(p) => (
            "pci_switch",
            Some(p.class),
            p.vendor,
            p.device,
            model_name(p.vendor, p.device).map(str::to_string),
        ),
        NodeKind::Gpu(g) => (
            "gpu",
            Some(g.class),
            g.vendor,
            g.device,
            g.name
                .clone()
                .or_else(|| model_name(g.vendor, g.device).map(str::to_string)),
        ),
        NodeKind::Nic(x) => (
            "nic",
            Some(x.class),
            x.vendor,
            x.device,
            model_name(x.vendor, x.device).map(str::to_string),
        ),
        NodeKind::Net(_) => ("port", None, None, None, None),
        NodeKind::NvSwitch(s) => (
            "nvswitch",
            None,
            s.vendor,
            s.device,
            model_name(s.vendor, s.device).map(str::to_string),
        ),
        NodeKind::PciDevice(d) => (
            "pci_device",
            Some(d.class),
            d.vendor,
            d.device,
            model_name(d.vendor, d.device).map(str::to_string),
        ),
    };
    let l = node.pcie();
    let gts = |s: Option<&String>| s.and_then(|x| pcie_gts(x));
    PciNode {
        kind,
        label: match &node.kind {
            NodeKind::Gpu(_) | NodeKind::Net(_) | NodeKind::Cpu(_) => ctx.label(n),
            k => class_code
                .map(class::describe)
                .unwrap_or(if matches!(k, NodeKind::NvSwitch(_)) {
                    "NVSwitch"
                } else {
                    ""
                })
                .to_string(),
        },
        busid: node.busid().map(|b| b.to_string()),
        class: class_code.map(|c| format!("0x{c:06x}")),
        vendor: vendor.map(|v| format!("0x{v:04x}")),
        device: device.map(|d| format!("0x{d:04x}")),
        model,
        link_speed_gts: l.and_then(|l| gts(l.speed.as_ref())),
        link_generation: l
            .and_then(|l| gts(l.speed.as_ref()))
            .and_then(pcie_generation),
        link_width: l.and_then(|l| l.width),
        bw_gbps: l.map(|l| l.bw()),
        max_link_speed_gts: l.and_then(|l| gts(l.max_speed.as_ref())),
        max_link_width: l.and_then(|l| l.max_width),
        cur_link_speed_gts: l.and_then(|l| gts(l.cur_speed.as_ref())),
        cur_link_width: l.and_then(|l| l.cur_width),
        flags: flags(ctx, n),
        children: if depth < 32 {
            sorted_children(ctx, n)
                .into_iter()
                .map(|k| doc_node(ctx, k, depth + 1))
                .collect()
        } else {
            vec![]
        },
    }
}

pub(crate) fn doc(ctx: &Ctx) -> Vec<PciNode> {
    ctx.hosts
        .iter()
        .flat_map(|hv| hv.cpus.iter().map(|&c| doc_node(ctx, c, 0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use topo_model::pcie_judge::FlagKind;

    #[test]
    fn flags_downtrained_and_upstream_limits() {
        let t = pcie_2socket();
        let ctx = Ctx::new(&t);
        let g = &ctx.hosts[0].gpus;
        let f3 = flags(&ctx, g[3]);
        assert_eq!(f3.len(), 1, "{f3:?}");
        assert_eq!(f3[0].kind, FlagKind::Downtrained);
        assert!(
            f3[0]
                .text
                .starts_with("downtrained: running Gen1 x16, capable of Gen4 x16")
        );
        let f5 = flags(&ctx, g[5]);
        assert_eq!(f5.len(), 1, "{f5:?}");
        assert_eq!(f5[0].kind, FlagKind::UpstreamSlower);
        assert!(
            f5[0].text.contains("Gen5 x16 (48.0 GB/s)"),
            "{}",
            f5[0].text
        );
        assert!(flags(&ctx, g[0]).is_empty());
    }

    #[test]
    fn vm_artefacts_are_named_not_blamed() {
        let t = vm_bridges();
        let ctx = Ctx::new(&t);
        let g0 = ctx.hosts[0].gpus[0];
        let br = t.node(g0).parent.unwrap();
        let fb = flags(&ctx, br);
        assert_eq!(fb.len(), 1);
        assert_eq!(fb[0].kind, FlagKind::VmBridge);
        assert!(fb[0].text.contains("0.19 GB/s"), "{}", fb[0].text);
        let fg = flags(&ctx, g0);
        assert_eq!(fg.len(), 1, "{fg:?}");
        assert_eq!(fg[0].kind, FlagKind::VmWidth0);
    }

    #[test]
    fn link_texts() {
        assert_eq!(
            link_text(&PcieLink::new(Some("32.0 GT/s PCIe"), Some(16))),
            "Gen5 x16 (32 GT/s) 48.0 GB/s"
        );
        assert_eq!(
            link_text(&PcieLink::new(None, None)),
            "link unknown (NCCL assumes Gen3 x16, 12.0 GB/s)"
        );
        assert_eq!(link_text(&PcieLink::new(None, Some(8))), "Gen? x8 6.0 GB/s");
        assert_eq!(fmt_gbps(400_000), "400");
        assert_eq!(fmt_gbps(2_500), "2.5");
    }
}
