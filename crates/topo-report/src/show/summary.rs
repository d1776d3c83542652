//! The summary view: host, GPUs, NICs, NUMA nodes, switches, verdicts and warnings.

use super::model::{Ctx, HostView, cpu_model, ranges, switch_gpus};
use super::pci::{fmt_gbps, gen_width};
use crate::Style;
use crate::fit::{Cell, Paint, table};
use petgraph::Direction;
use petgraph::graph::NodeIndex;
use std::collections::BTreeMap;
use topo_model::message::Code;
use topo_model::message::{Finding, Severity};
use topo_model::{LinkKind, NodeKind, class};

/// The NVLink column of the GPU table: `18 → NVSwitch ×4 (370.8 GB/s)`.
pub(crate) fn nvlink_text(ctx: &Ctx, g: NodeIndex) -> String {
    // Grace-Hopper/Blackwell GPUs reach their CPU over C2C rather than NVLink.
    let (c2c_lanes, c2c_bw) = ctx
        .topo
        .graph
        .edges_directed(g, Direction::Outgoing)
        .filter(|e| e.weight().kind == LinkKind::C2c)
        .fold((0, 0.0), |(l, b), e| {
            (l + e.weight().lanes, b + e.weight().bw)
        });
    let c2c = (c2c_lanes > 0).then(|| format!("C2C {c2c_lanes} → CPU ({c2c_bw:.1} GB/s)"));
    let s = ctx.nvlink(g);
    let nv = if let Some(r) = s.unknown {
        format!("unknown ({r})")
    } else {
        let mut parts = vec![];
        if s.switch_lanes > 0 {
            let chips = if s.switches.len() > 1 {
                format!(" ×{}", s.switches.len())
            } else {
                String::new()
            };
            parts.push(format!("{} → NVSwitch{chips}", s.switch_lanes));
        }
        for (p, lanes, _) in &s.peers {
            parts.push(format!("{lanes} → {}", ctx.label(*p)));
        }
        if s.cpu_lanes > 0 {
            parts.push(format!("{} → CPU", s.cpu_lanes));
        }
        // Lanes to GPUs the source does not hold: stated, never "none" (nvlink-outside).
        let outside: Vec<String> = s
            .outside
            .iter()
            .map(|(t, lanes)| format!("{lanes} → GPU {t} (not in the source)"))
            .collect();
        let graphed = if parts.is_empty() {
            None
        } else if s.speed_known {
            Some(format!("{} ({:.1} GB/s)", parts.join(", "), s.bw))
        } else {
            // Lanes without a GPU generation: counted, not priced (the summary's NVLink
            // verdict says why).
            Some(format!("{} (speed unknown)", parts.join(", ")))
        };
        match (graphed, outside.is_empty()) {
            (None, true) => "none".to_string(),
            (Some(g), true) => g,
            (None, false) => outside.join(", "),
            (Some(g), false) => format!("{g}, {}", outside.join(", ")),
        }
    };
    match c2c {
        Some(c) if nv == "none" => c,
        Some(c) => format!("{nv}; {c}"),
        None => nv,
    }
}

fn gpu_numbers(ctx: &Ctx, v: &[NodeIndex]) -> String {
    let mut idx: Vec<usize> = v.iter().map(|&g| ctx.number(g)).collect();
    idx.sort();
    let word = if idx.len() == 1 { "GPU" } else { "GPUs" };
    format!("{word} {}", ranges(&idx))
}

/// Short conclusions a reader wants first, per host, being gathered, each with its code and severity (docs/codes.md).
#[derive(Default)]
pub(crate) struct Verdicts {
    out: Vec<Finding>,
}

impl Verdicts {
    fn say(&mut self, code: Code, severity: Severity, text: String) {
        self.out.push(Finding::at(code, severity, text));
    }
}

/// The summary's verdicts as text.
pub(crate) fn verdicts(ctx: &Ctx, hv: &HostView) -> Vec<String> {
    coded_verdicts(ctx, hv)
        .into_iter()
        .map(|m| m.text)
        .collect()
}

/// The summary's verdicts with their codes and severities.
pub(crate) fn coded_verdicts(ctx: &Ctx, hv: &HostView) -> Vec<Finding> {
    let mut out = Verdicts::default();
    let gpus = &hv.gpus;
    if gpus.is_empty() {
        out.say(
            Code::GpuNone,
            Severity::Info,
            super::model::no_gpu_line(ctx, hv.host),
        );
    } else {
        nvlink_verdicts(ctx, hv, &mut out);
        // Missing lanes and NVLS stated off: the rules plan and diagnose state too.
        for v in topo_model::nvlink_judge::verdicts(ctx.topo, hv.gpus.iter().copied()) {
            out.out.push(v);
        }
        for v in topo_model::nvls_judge::verdicts(ctx.topo, hv.nodes.iter().copied()) {
            out.out.push(v);
        }
        p2p_verdicts(ctx, hv, &mut out);
        nic_verdicts(ctx, hv, &mut out);
        numa_verdicts(ctx, hv, &mut out);
    }
    if !gpus.is_empty() && hv.nic_columns().is_empty() {
        network_absent(ctx, &mut out);
    }
    // PCIe facts: the rules plan and diagnose state too (`topo_model::pcie_judge`); the
    // evidence is in `--view pci`.
    for mut v in topo_model::pcie_judge::verdicts(ctx.topo, hv.nodes.iter().copied()) {
        v.text.push_str(" (see --view pci)");
        out.out.push(v);
    }
    problems_in_order(&mut out.out);
    out.out
}

/// The problems (warnings and errors) in the order plan and diagnose give them
/// (`topo_model::message::rank`), in the places problems hold: the descriptions (info) stay
/// where the summary puts them.
fn problems_in_order(all: &mut [Finding]) {
    let slots: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].severity > Severity::Info)
        .collect();
    let mut problems: Vec<Finding> = slots.iter().map(|&i| all[i].clone()).collect();
    topo_model::message::order(&mut problems);
    for (i, f) in slots.into_iter().zip(problems) {
        all[i] = f;
    }
}

/// The shape of the host's NVLink: the rule plan and diagnose state the problems of
/// (`topo_model::nvlink_shape`).
fn nvlink_verdicts(ctx: &Ctx, hv: &HostView, out: &mut Verdicts) {
    let shapes =
        topo_model::nvlink_shape::verdicts(ctx.topo, &hv.gpus, &ShowNames(ctx), &ctx.classes);
    for v in shapes {
        out.out.push(v);
    }
}

/// Peer access (a refusing driver, NVML's P2P answers where they say no), and NVLink fabric
/// registration (multi-node NVLink).
fn p2p_verdicts(ctx: &Ctx, hv: &HostView, out: &mut Verdicts) {
    // Peer access: the rule plan and diagnose state too (`topo_model::p2p_judge`).
    for v in topo_model::p2p_judge::verdicts(ctx.topo, hv.gpus.iter().copied()) {
        out.out.push(v);
    }
    // Fabric registration: the rule plan and diagnose state too (`topo_model::fabric_judge`).
    for v in topo_model::fabric_judge::verdicts(ctx.topo, hv.gpus.iter().copied()) {
        out.out.push(v);
    }
    if let Some(v) = topo_model::fabric_judge::domain_verdict(ctx.topo, hv.host, hv.gpus.len()) {
        out.out.push(v);
    }
}

/// How show names GPUs and NICs in the placement verdicts.
struct ShowNames<'a, 'b>(&'a Ctx<'b>);

impl topo_model::nic_judge::Names for ShowNames<'_, '_> {
    fn gpus(&self, gpus: &[NodeIndex]) -> String {
        gpu_numbers(self.0, gpus)
    }
    fn label(&self, n: NodeIndex) -> String {
        self.0.label(n)
    }
    fn position(&self, n: NodeIndex) -> usize {
        self.0.index(n)
    }
}

fn nic_verdicts(ctx: &Ctx, hv: &HostView, out: &mut Verdicts) {
    let cols = hv.nic_columns();
    if cols.is_empty() {
        return;
    }
    // Placement: the rule diagnose states too (`topo_model::nic_judge`).
    let host = topo_model::nic_judge::Host {
        gpus: &hv.gpus,
        nics: &cols,
        sockets: hv.cpus.len(),
    };
    for v in topo_model::nic_judge::verdicts(ctx.topo, &host, &ShowNames(ctx)) {
        out.out.push(v);
    }
    nic_port_verdicts(ctx, hv, out);
    gpu_bandwidth_verdict(ctx, hv, out);
}

/// What the source leaves unknown or absent about the host's ports: PCI-only NICs, ports
/// without GPUDirect RDMA, and ports whose GPUDirect RDMA the source does not state.
fn nic_port_verdicts(ctx: &Ctx, hv: &HostView, out: &mut Verdicts) {
    let said = |v: topo_model::message::Finding, out: &mut Verdicts| {
        out.out.push(v);
    };
    if let Some(v) = topo_model::ports_judge::pci_only(hv.bare_nics.len()) {
        said(v, out);
    }
    if let Some(v) = topo_model::nic_judge::fused_on(ctx.topo, &hv.nets) {
        said(v, out);
    }
    // GPUDirect RDMA: the rule plan and diagnose state too (`topo_model::net_judge`).
    for v in topo_model::net_judge::verdicts(ctx.topo, hv.nets.iter().copied()) {
        said(v, out);
    }
}

/// No NIC in the source (`topo_model::ports_judge::absent`).
fn network_absent(ctx: &Ctx, out: &mut Verdicts) {
    let v = topo_model::ports_judge::absent(ctx.topo);
    out.out.push(v);
}

/// Gb/s per GPU over the compute ports (`topo_model::ports_judge::compute_total`).
fn gpu_bandwidth_verdict(ctx: &Ctx, hv: &HostView, out: &mut Verdicts) {
    let role = |n: NodeIndex| ctx.role(n);
    let names = ShowNames(ctx);
    if let Some(v) =
        topo_model::ports_judge::compute_total(ctx.topo, hv.gpus.len(), &hv.nets, role, &names)
    {
        out.out.push(v);
    }
}

/// Which NUMA nodes the GPUs sit on: the rule is `topo_model::numa_judge`'s.
fn numa_verdicts(ctx: &Ctx, hv: &HostView, out: &mut Verdicts) {
    for v in topo_model::numa_judge::verdicts(ctx.topo, &hv.gpus, &ShowNames(ctx)) {
        out.out.push(v);
    }
}

fn host_line(ctx: &Ctx, hv: &HostView, style: Style) -> String {
    let h = ctx
        .topo
        .hosts
        .get(hv.host as usize)
        .cloned()
        .unwrap_or_default();
    let mut s = format!("{} {}", style.bold("Host"), ctx.host_name(hv.host));
    if let Some(k) = &h.kernel {
        s.push_str(&format!("  kernel {k}"));
    }
    if let Some(d) = &h.driver_version {
        s.push_str(&format!("  driver {d}"));
    }
    if let Some(c) = &h.cuda_driver_version {
        s.push_str(&format!("  CUDA {c}"));
    }
    let src = &ctx.topo.source;
    s.push_str(&format!("  source {}", src.kind));
    if let Some(o) = &src.origin {
        s.push_str(&format!(" ({o})"));
    }
    s.push('\n');
    for note in &src.stated {
        s.push_str(&format!("  {} {note}\n", style.bold("stated:")));
    }
    s
}

fn section(title: &str, n: usize, style: Style) -> String {
    format!("\n{}\n", style.bold(&format!("{title} ({n})")))
}

fn gpu_table(ctx: &Ctx, hv: &HostView, style: Style) -> String {
    let has_mem = hv
        .gpus
        .iter()
        .any(|&g| ctx.topo.gpu(g).is_some_and(|x| x.memory_bytes.is_some()));
    let mut header = vec!["GPU", "Bus id", "Name", "CC", "NUMA"];
    if has_mem {
        header.push("Memory");
    }
    header.extend(["NVLink", "Nearest NIC"]);
    // Tied NICs a GPU's channels take in turn are spread over, not a tie (`tie_notes`).
    let marks: std::collections::HashMap<NodeIndex, String> = hv
        .gpus
        .iter()
        .filter(|&&g| ctx.nearest_tie(g).is_some())
        .map(|&g| {
            let m = match ctx.nets_per_gpu(g) {
                k if k > 1 => format!(", 1 of {k}"),
                _ => ", tie".to_string(),
            };
            (g, m)
        })
        .collect();
    let rows: Vec<Vec<Cell>> = hv
        .gpus
        .iter()
        .map(|&g| {
            let x = ctx.topo.gpu(g);
            let mut r: Vec<Cell> = vec![
                ctx.number(g).to_string().into(),
                x.map(|x| x.busid.to_string()).unwrap_or_default().into(),
                gpu_name(x).into(),
                x.and_then(|x| x.sm)
                    .map(|sm| format!("{}.{}", sm / 10, sm % 10))
                    .unwrap_or_else(|| "?".into())
                    .into(),
                ctx.numa(g)
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "?".into())
                    .into(),
            ];
            if has_mem {
                r.push(
                    x.and_then(|x| x.memory_bytes)
                        .map(|b| format!("{} GiB", b >> 30))
                        .unwrap_or_else(|| "?".into())
                        .into(),
                );
            }
            let mut nv = nvlink_text(ctx, g);
            if nv.len() > 40 && nv.starts_with("unknown") {
                nv = "unknown (see note)".to_string();
            }
            let paint = if nv.starts_with("unknown") {
                Paint::Yellow
            } else {
                Paint::None
            };
            r.push(Cell::paint(nv, paint));
            let tie = marks.get(&g).map_or("", String::as_str);
            r.push(match ctx.nearest_nic_shown(g) {
                Some((n, ty, Some(bw))) => {
                    format!("{} ({ty}, {bw:.1} GB/s{tie})", ctx.label(n)).into()
                }
                Some((n, ty, None)) if ctx.topo.net(n).is_some_and(|x| x.gdr_unstated) => {
                    format!("{} ({ty}, GDR ?{tie})", ctx.label(n)).into()
                }
                Some((n, ty, None)) => format!("{} ({ty}, speed ?{tie})", ctx.label(n)).into(),
                None => "—".into(),
            });
            r
        })
        .collect();
    let mut out = table("  ", &header, &rows, style);
    let mut notes: Vec<String> = hv
        .gpus
        .iter()
        .filter_map(|&g| ctx.nvlink(g).unknown)
        .filter(|r| r.len() + "unknown ()".len() > 40)
        .collect();
    notes.dedup();
    for n in notes {
        out.push_str(&format!(
            "  {} NVLink unknown: {n}\n",
            style.yellow("note:")
        ));
    }
    for n in tie_notes(ctx, hv) {
        out.push_str(&format!("  {} {n}\n", style.yellow("note:")));
    }
    if hv.gpus.iter().any(|&g| name_guessed(ctx.topo.gpu(g))) {
        out.push_str(&format!(
            "  {} a name ending in ? is the PCI database's for the device id: the source states no model and no compute capability, and one id can be several boards\n",
            style.yellow("note:")
        ));
    }
    out
}

/// The Name cell: the source's name, else the PCI database's name for the device id, with a
/// `?` where nothing else in the source (a compute capability) backs it (issue 44: a guessed
/// model is shown as a guess).
fn gpu_name(x: Option<&topo_model::Gpu>) -> String {
    let Some(x) = x else { return "?".into() };
    if let Some(n) = &x.name {
        return n.clone();
    }
    match super::pci::model_name(x.vendor, x.device) {
        Some(m) if name_guessed(Some(x)) => format!("{m}?"),
        Some(m) => m.to_string(),
        None => "?".into(),
    }
}

/// Whether the Name cell is a guess: no name and no compute capability from the source, only
/// a device id the PCI database names.
fn name_guessed(x: Option<&topo_model::Gpu>) -> bool {
    x.is_some_and(|x| {
        x.name.is_none() && x.sm.is_none() && super::pci::model_name(x.vendor, x.device).is_some()
    })
}

/// The ties between equally near NICs, as notes: which GPUs share a tied set and which NIC
/// NCCL's channel 0 takes for each (the GPU's device index, bit-mirrored when the count is a
/// power of two), or, where a GPU has several NICs to itself, that NCCL spreads its channels
/// over them (ncclTopoGetLocalNet, src/graph/topo.cc, NCCL 2.28), the rule the plan states too.
/// Hosts where every GPU has its own tied set of one size get one note.
fn tie_notes(ctx: &Ctx, hv: &HostView) -> Vec<String> {
    // (the tied NICs, and each GPU sharing them with the NIC its channel 0 takes)
    type Group = (Vec<NodeIndex>, Vec<(NodeIndex, NodeIndex)>);
    let mut groups: Vec<Group> = vec![];
    for &g in &hv.gpus {
        let (Some(tied), Some((n, _, _))) = (ctx.nearest_tie(g), ctx.nearest_nic_shown(g)) else {
            continue;
        };
        match groups.iter_mut().find(|(t, _)| *t == tied) {
            Some((_, picks)) => picks.push((g, n)),
            None => groups.push((tied, vec![(g, n)])),
        }
    }
    const WHY: &str = "ncclTopoGetLocalNet, src/graph/topo.cc, NCCL 2.28";
    let names = |t: &[NodeIndex]| {
        t.iter()
            .map(|&x| ctx.label(x))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let own = groups
        .iter()
        .all(|(t, p)| p.len() == 1 && t.len() == groups[0].0.len());
    if groups.len() > 1 && own {
        let (t, p) = &groups[0];
        return vec![format!(
            "tie: each GPU has {} equally near NICs of its own (GPU {}: {}); NCCL spreads each GPU's channels over its {} in turn, channel 0 on the one the GPU's device index picks ({WHY})",
            t.len(),
            ctx.index(p[0].0),
            names(t),
            t.len()
        )];
    }
    groups
        .into_iter()
        .map(|(tied, picks)| {
            let gpus: Vec<String> = picks.iter().map(|&(g, _)| ctx.index(g).to_string()).collect();
            let takes: Vec<String> = picks
                .iter()
                .map(|&(g, n)| format!("{} for GPU {}", ctx.label(n), ctx.index(g)))
                .collect();
            let how = if tied.len().is_power_of_two() {
                "bit-mirrored"
            } else {
                "modulo the count"
            };
            let k = ctx.nets_per_gpu(picks[0].0);
            let spread = if k > 1 {
                format!("NCCL spreads each GPU's channels over {k} of them in turn; channel 0 takes")
            } else {
                "NCCL's channel 0 takes".to_string()
            };
            format!(
                "tie: {} NICs equally near GPU(s) {} ({}); {spread} {} (the GPU's device index, {how}, picks: {WHY})",
                tied.len(),
                gpus.join(", "),
                names(&tied),
                takes.join(", ")
            )
        })
        .collect()
}

fn nic_table(ctx: &Ctx, hv: &HostView, style: Style) -> String {
    let mut rows: Vec<Vec<Cell>> = hv
        .nets
        .iter()
        .filter_map(|&n| ctx.topo.net(n).map(|x| (n, x)))
        .map(|(n, x)| {
            vec![
                ctx.index(n).to_string().into(),
                x.name.clone().into(),
                ctx.busid(n)
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "—".into())
                    .into(),
                x.speed_mbps
                    .map(|m| format!("{} Gb/s", fmt_gbps(m)))
                    .unwrap_or_else(|| "?".into())
                    .into(),
                x.port.to_string().into(),
                x.link_layer.clone().unwrap_or_else(|| "—".into()).into(),
                match (x.gdr_unstated, x.gdr) {
                    (true, _) => Cell::paint("?", Paint::Yellow),
                    (false, true) => Cell::from("yes"),
                    (false, false) => Cell::paint("no", Paint::Yellow),
                },
                ctx.numa(n)
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "?".into())
                    .into(),
                x.netdev.clone().unwrap_or_else(|| "—".into()).into(),
                role_cell(ctx, n),
            ]
        })
        .collect();
    for &n in &hv.bare_nics {
        let mut r: Vec<Cell> = vec![
            ctx.index(n).to_string().into(),
            Cell::paint("(no port listed)", Paint::Dim),
            ctx.busid(n)
                .map(|b| b.to_string())
                .unwrap_or_default()
                .into(),
        ];
        r.extend(["?", "?", "?", "?"].map(Cell::from));
        r.push(
            ctx.numa(n)
                .map(|v| v.to_string())
                .unwrap_or_else(|| "?".into())
                .into(),
        );
        r.push("—".into());
        r.push("?".into());
        rows.push(r);
    }
    let mut out = table(
        "  ",
        &[
            "NIC",
            "Name",
            "Bus id",
            "Speed",
            "Port",
            "Link layer",
            "GDR",
            "NUMA",
            "Netdev",
            "Role",
        ],
        &rows,
        style,
    );
    let inferred = hv
        .nets
        .iter()
        .any(|n| ctx.roles.get(n).is_some_and(|r| !r.stated));
    if inferred {
        out.push_str(&format!(
            "  {} role inferred from the port (speed, link layer, name, place), not stated by the source; `--format json` says why\n",
            style.dim("*")
        ));
    }
    if let Some(text) = socket_interfaces(ctx, hv) {
        out.push_str(&format!("  {} {text}\n", style.yellow("note:")));
    }
    out
}

/// Which of the host's plain IP interfaces NCCL's sockets would take under the default
/// NCCL_SOCKET_IFNAME rule (`topo_nccl::ifaces`, the rule the plan applies), where the source
/// lists plain interfaces; show reads no environment, so the variable's own list is the plan's.
fn socket_interfaces(ctx: &Ctx, hv: &HostView) -> Option<String> {
    let mut plain = false;
    let names: Vec<&str> = hv
        .nets
        .iter()
        .filter_map(|&n| ctx.topo.net(n))
        .filter_map(|x| {
            plain |= x.socket;
            if x.socket {
                Some(x.name.as_str())
            } else {
                x.netdev.as_deref()
            }
        })
        .collect();
    plain.then(|| topo_nccl::ifaces::find_interfaces(&names, None).text())
}

/// `compute`, `storage*`: an inferred role is marked with `*` (the JSON says why).
fn role_cell(ctx: &Ctx, n: NodeIndex) -> Cell {
    match ctx.roles.get(&n) {
        Some(r) if r.stated => r.role.name().into(),
        Some(r) => Cell::paint(format!("{}*", r.role.name()), Paint::Dim),
        None => "?".into(),
    }
}

fn numa_table(ctx: &Ctx, hv: &HostView, style: Style) -> String {
    let rows: Vec<Vec<Cell>> = hv
        .cpus
        .iter()
        .filter_map(|&c| ctx.topo.cpu(c).map(|x| (c, x)))
        .map(|(c, x)| {
            let gpus: Vec<usize> = hv
                .gpus
                .iter()
                .filter(|&&g| ctx.topo.root_cpu(g) == Some(c))
                .map(|&g| ctx.number(g))
                .collect();
            let nics: Vec<String> = hv
                .nic_columns()
                .into_iter()
                .filter(|&n| ctx.topo.root_cpu(n) == Some(c))
                .map(|n| ctx.label(n))
                .collect();
            vec![
                (if x.numa >= 0 {
                    x.numa.to_string()
                } else {
                    "?".into()
                })
                .into(),
                super::model::cpu_list(x)
                    .unwrap_or_else(|| "?".into())
                    .into(),
                cpu_model(x).into(),
                (if gpus.is_empty() {
                    "—".to_string()
                } else {
                    ranges(&gpus)
                })
                .into(),
                (if nics.is_empty() {
                    "—".to_string()
                } else {
                    nics.join(", ")
                })
                .into(),
            ]
        })
        .collect();
    table("  ", &["NUMA", "CPUs", "CPU", "GPUs", "NICs"], &rows, style)
}

fn nvswitch_table(ctx: &Ctx, switches: &[NodeIndex], style: Style) -> String {
    // A switch without a bus id: NVML hides it on a live VM or container; a matrix or a log
    // never names one, which says nothing of a VM.
    let no_bus = match ctx.topo.source.kind {
        topo_model::SourceKind::Live | topo_model::SourceKind::Snapshot => "hidden (VM/container)",
        topo_model::SourceKind::NvidiaSmi => "not in a matrix",
        _ => "not in the source",
    };
    let rows: Vec<Vec<Cell>> = switches
        .iter()
        .map(|&s| {
            let gpus = switch_gpus(ctx, s);
            let mut lanes: Vec<u32> = gpus.iter().map(|g| g.1).collect();
            lanes.sort();
            lanes.dedup();
            let l: Vec<String> = lanes.iter().map(|x| x.to_string()).collect();
            vec![
                ctx.topo
                    .node(s)
                    .busid()
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| no_bus.into())
                    .into(),
                gpus.len().to_string().into(),
                l.join("/").into(),
            ]
        })
        .collect();
    table("  ", &["Bus id", "GPUs", "Lanes per GPU"], &rows, style)
}

/// What hangs directly below a PCIe switch, by the names the other tables use.
pub(crate) fn below(ctx: &Ctx, s: NodeIndex) -> Vec<String> {
    ctx.topo
        .children(s)
        .into_iter()
        .map(|k| match &ctx.topo.node(k).kind {
            NodeKind::Gpu(_) => ctx.label(k),
            NodeKind::Nic(x) => {
                let ports: Vec<String> = ctx
                    .topo
                    .children(k)
                    .into_iter()
                    .map(|p| ctx.label(p))
                    .collect();
                if ports.is_empty() {
                    x.busid
                        .map(|b| format!("NIC {b}"))
                        .unwrap_or_else(|| "NIC".into())
                } else {
                    ports.join("+")
                }
            }
            NodeKind::PciSwitch(p) => format!("switch {}", p.busid),
            NodeKind::PciDevice(d) => format!("{} {}", class::describe(d.class), d.busid),
            _ => ctx.label(k),
        })
        .collect()
}

fn pci_switch_table(ctx: &Ctx, switches: &[NodeIndex], style: Style) -> String {
    let rows: Vec<Vec<Cell>> = switches
        .iter()
        .filter_map(|&s| match &ctx.topo.node(s).kind {
            NodeKind::PciSwitch(p) => Some((s, p)),
            _ => None,
        })
        .map(|(s, p)| {
            let known = p.pcie.gts().is_some() && p.pcie.width.is_some_and(|w| w > 0);
            let gw = gen_width(p.pcie.speed.as_deref(), p.pcie.width);
            let link = if known {
                format!("{gw} {:.1} GB/s", p.pcie.bw())
            } else {
                format!("{gw} (NCCL assumes {:.1} GB/s)", p.pcie.bw())
            };
            let flagged = !super::pci::flags(ctx, s).is_empty();
            vec![
                p.busid.to_string().into(),
                Cell::paint(link, if flagged { Paint::Yellow } else { Paint::None }),
                ctx.numa(s)
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "?".into())
                    .into(),
                below(ctx, s).join(", ").into(),
            ]
        })
        .collect();
    table("  ", &["Bus id", "Link", "NUMA", "Below"], &rows, style)
}

fn other_devices(ctx: &Ctx, devs: &[NodeIndex], style: Style) -> String {
    if devs.len() > 12 {
        let mut by: BTreeMap<&str, usize> = BTreeMap::new();
        for &d in devs {
            if let NodeKind::PciDevice(x) = &ctx.topo.node(d).kind {
                *by.entry(class::describe(x.class)).or_default() += 1;
            }
        }
        let parts: Vec<String> = by.iter().map(|(k, v)| format!("{v} × {k}")).collect();
        return format!("  {} (see --view pci)\n", parts.join(", "));
    }
    let rows: Vec<Vec<Cell>> = devs
        .iter()
        .filter_map(|&d| match &ctx.topo.node(d).kind {
            NodeKind::PciDevice(x) => Some((d, x)),
            _ => None,
        })
        .map(|(d, x)| {
            let ids = match (x.vendor, x.device) {
                (Some(v), Some(dv)) => format!("{v:04x}:{dv:04x}"),
                _ => "?".into(),
            };
            let name = super::pci::model_name(x.vendor, x.device)
                .map(str::to_string)
                .or_else(|| x.vendor.and_then(super::pci::vendor_name))
                .unwrap_or_default();
            vec![
                x.busid.to_string().into(),
                class::describe(x.class).into(),
                ids.into(),
                name.into(),
                x.driver.clone().unwrap_or_else(|| "—".into()).into(),
                ctx.numa(d)
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "?".into())
                    .into(),
            ]
        })
        .collect();
    table(
        "  ",
        &["Bus id", "Class", "Ids", "Model", "Driver", "NUMA"],
        &rows,
        style,
    )
}

fn host_summary(ctx: &Ctx, hv: &HostView, style: Style) -> String {
    let mut out = host_line(ctx, hv, style);
    if hv.gpus.is_empty() {
        out.push_str(&format!(
            "\n{}\n",
            style.yellow(&super::model::no_gpu_line(ctx, hv.host))
        ));
    } else {
        out.push_str(&section("GPUs", hv.gpus.len(), style));
        out.push_str(&gpu_table(ctx, hv, style));
    }
    if !hv.nic_columns().is_empty() {
        out.push_str(&section("NICs", hv.nic_columns().len(), style));
        out.push_str(&nic_table(ctx, hv, style));
    }
    out.push_str(&section("NUMA nodes", hv.cpus.len(), style));
    out.push_str(&numa_table(ctx, hv, style));
    let nvs = super::model::sorted_nvswitches(ctx, hv.host);
    if !nvs.is_empty() {
        out.push_str(&section("NVSwitches", nvs.len(), style));
        out.push_str(&nvswitch_table(ctx, &nvs, style));
    }
    let sw: Vec<NodeIndex> = hv
        .nodes
        .iter()
        .copied()
        .filter(|&n| matches!(ctx.topo.node(n).kind, NodeKind::PciSwitch(_)))
        .collect();
    if !sw.is_empty() {
        out.push_str(&section("PCIe switches and bridges", sw.len(), style));
        out.push_str(&pci_switch_table(ctx, &sw, style));
    }
    let others: Vec<NodeIndex> = hv
        .nodes
        .iter()
        .copied()
        .filter(|n| matches!(ctx.topo.node(*n).kind, NodeKind::PciDevice(_)))
        .collect();
    if !others.is_empty() {
        out.push_str(&section("Other PCI devices", others.len(), style));
        out.push_str(&other_devices(ctx, &others, style));
    }
    // Without GPUs the first verdict repeats the line under the host header.
    let v: Vec<String> = verdicts(ctx, hv)
        .into_iter()
        .skip(usize::from(hv.gpus.is_empty()))
        .collect();
    if !v.is_empty() {
        out.push_str(&format!("\n{}\n", style.bold("Verdict")));
        for line in v {
            out.push_str(&format!("  • {line}\n"));
        }
    }
    out
}

pub(crate) fn render(ctx: &Ctx, style: Style) -> String {
    let mut out = super::model::per_host(ctx, |i, hv, out| {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&host_summary(ctx, hv, style));
    });
    if !ctx.topo.warnings.is_empty() {
        out.push_str(&format!("\n{}\n", style.bold("Warnings")));
        for w in crate::warnings::collapse_warnings(&ctx.topo.warnings) {
            out.push_str(&format!("  {} {w}\n", style.yellow("!")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use topo_model::testing::hgx;

    fn v(t: &topo_model::Topology) -> Vec<String> {
        let ctx = Ctx::new(t);
        verdicts(&ctx, &ctx.hosts[0])
    }

    #[test]
    fn hgx_verdicts() {
        let got = v(&hgx(8, 90));
        assert_eq!(
            got[0],
            "8 GPUs fully connected through NVSwitch, 18 NVLink lanes each (370.8 GB/s)"
        );
        assert_eq!(
            got[1],
            "GPU↔NIC rail-aligned 1:1: each GPU shares a PCIe switch with its own NIC"
        );
        assert!(
            got.contains(
                &"8 compute network ports with 3200 Gb/s in total: 400 Gb/s per GPU".to_string()
            ),
            "{got:?}"
        );
    }

    #[test]
    fn pcie_box_verdicts() {
        let got = v(&pcie_2socket());
        assert!(
            got[0].starts_with("No NVLink: GPU↔GPU traffic goes over PCIe (best PIX, worst SYS)"),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|l| l == "GPUs 3, 5 have no NIC behind their PCIe switch"),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|l| l.starts_with("GPUs 0–3 on NUMA 0, GPUs 4–5 on NUMA 1")
                    || l.contains("GPUs 0–3 on NUMA 0"))
        );
        assert!(
            got.iter()
                .any(|l| l.starts_with("1 PCIe link runs below its maximum speed")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|l| l.starts_with("1 PCIe link limited by a slower link above it")),
            "{got:?}"
        );
    }

    #[test]
    fn bridge_and_gpuless_verdicts() {
        let got = v(&nvlink_bridge());
        assert_eq!(got[0], "All 2 GPUs directly NVLinked: GPU0–GPU1 NV4");
        assert!(
            got.iter()
                .any(|l| l.starts_with("GPUDirect RDMA not available on eno1"))
        );
        let got = v(&gpuless());
        assert_eq!(
            got[0],
            "No NVIDIA GPU or NVML library found: libnvidia-ml.so.1 not found and no PCI device of vendor 0x10de"
        );
        let got = v(&unknown_nvlink());
        assert_eq!(
            got[0],
            "NVLink unknown for GPUs 0–1 (no NVML): the source cannot tell which NVLinks exist"
        );
    }

    #[test]
    fn unknown_nvlink_is_never_zero_lanes() {
        let t = unknown_nvlink();
        let ctx = Ctx::new(&t);
        let text = render(&ctx, Style::default());
        assert!(text.contains("unknown (no NVML)"), "{text}");
        assert!(!text.contains("none"), "{text}");
    }
}

#[cfg(test)]
mod rail_tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn portless_nics_still_give_the_rail_picture() {
        let t = two_rails(false);
        let ctx = Ctx::new(&t);
        let got = verdicts(&ctx, &ctx.hosts[0]);
        assert!(
            got.iter()
                .any(|l| l.starts_with("GPU↔NIC rail-aligned 1:1")),
            "{got:?}"
        );
        assert!(
            got.contains(&"2 NICs listed by PCI class only: port names, speeds and GPUDirect RDMA support are unknown".to_string()),
            "{got:?}"
        );
        assert!(
            !got.iter().any(|l| l.starts_with("No network ports")),
            "{got:?}"
        );
        let m = super::super::matrix::render(&ctx, Style::default());
        assert!(m.contains("GPU0     X      NODE    PIX     NODE"), "{m}");
        assert!(
            m.contains("  NIC1: 0000:22:00.0 (no network port listed)"),
            "{m}"
        );
    }

    #[test]
    fn crossed_numbering_is_spelled_out() {
        let t = two_rails(true);
        let ctx = Ctx::new(&t);
        let got = verdicts(&ctx, &ctx.hosts[0]);
        assert!(
            got.contains(&"GPU↔NIC rail-aligned 1:1: each GPU shares a PCIe switch with its own NIC (NIC numbering differs from GPU numbering: GPU0↔mlx5_1, GPU1↔mlx5_0)".to_string()),
            "{got:?}"
        );
        let (nic, p) = ctx.nearest_nic(ctx.hosts[0].gpus[0]).unwrap();
        assert_eq!(ctx.label(nic), "mlx5_1");
        assert_eq!(p.ty, topo_nccl::types::PathType::Pix);
    }

    #[test]
    fn vm_topology_is_one_verdict() {
        let t = vm_bridges();
        let ctx = Ctx::new(&t);
        let got = verdicts(&ctx, &ctx.hosts[0]);
        assert!(
            got.iter().any(|l| l.starts_with(
                "Virtual-machine PCIe topology (1 emulated bridge, 2 links of width 0)"
            )),
            "{got:?}"
        );
        assert!(
            !got.iter()
                .any(|l| l.contains("downtrained") || l.contains("slower link")),
            "{got:?}"
        );
    }
}

#[cfg(test)]
mod nvlink_shape_tests {
    use super::super::testing::*;
    use super::*;

    fn first_verdict(t: &topo_model::Topology) -> String {
        let ctx = Ctx::new(t);
        verdicts(&ctx, &ctx.hosts[0])[0].clone()
    }

    #[test]
    fn bridged_pairs_are_islands_and_a_connected_graph_is_a_mesh() {
        let mut t = pcie_2socket();
        let g = t.gpus();
        for (a, b) in [(0, 1), (2, 3), (4, 5)] {
            t.add_nvlink(g[a], g[b], 4);
            t.add_nvlink(g[b], g[a], 4);
        }
        assert_eq!(
            first_verdict(&t),
            "NVLink islands: GPUs 0–1; GPUs 2–3; GPUs 4–5 (GPU0–GPU1 NV4, GPU2–GPU3 NV4, GPU4–GPU5 NV4); \
             traffic between islands uses PCIe (best PXB, worst SYS), so a ring over all GPUs crosses PCIe"
        );
        for (a, b) in [(1, 2), (3, 4)] {
            t.add_nvlink(g[a], g[b], 2);
            t.add_nvlink(g[b], g[a], 2);
        }
        assert_eq!(
            first_verdict(&t),
            "NVLink mesh: 5 of 15 GPU pairs directly linked (GPU0–GPU1 NV4, GPU1–GPU2 NV2, GPU2–GPU3 NV4, \
             GPU3–GPU4 NV2, GPU4–GPU5 NV4), the rest use PCIe (best PXB, worst SYS); every GPU reaches the others over NVLink"
        );
    }
}

#[cfg(test)]
mod no_gpu_tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn the_reason_is_said_once() {
        let mut t = gpuless();
        t.hosts[0].gpu_discovery = Some("no NVIDIA GPU found: none in sysfs".into());
        let ctx = Ctx::new(&t);
        assert_eq!(
            super::super::model::no_gpu_line(&ctx, 0),
            "No NVIDIA GPU found: none in sysfs"
        );
        t.hosts[0].gpu_discovery = None;
        let ctx = Ctx::new(&t);
        assert_eq!(
            super::super::model::no_gpu_line(&ctx, 0),
            "No GPU in the source: it lists none"
        );
    }
}

#[cfg(test)]
mod p2p_c2c_tests {
    use super::*;
    use topo_model::testing::hgx;
    use topo_model::{FabricInfo, Link, P2pCaps};

    #[test]
    fn nvml_p2p_refusals_and_fabric_are_verdicts() {
        let mut t = hgx(2, 90);
        let g = t.gpus();
        let (a, b) = (t.gpu(g[0]).unwrap().busid, t.gpu(g[1]).unwrap().busid);
        let no = P2pCaps {
            read: Some(false),
            write: Some(false),
            nvlink: Some(false),
            atomics: None,
        };
        t.p2p.insert((0, a, b), no.clone());
        t.p2p.insert((0, b, a), no);
        for &x in &g {
            if let NodeKind::Gpu(gpu) = &mut t.node_mut(x).kind {
                gpu.fabric = Some(FabricInfo {
                    cluster_uuid: "c0ffee".into(),
                    clique_id: 7,
                    state: "completed".into(),
                    status: None,
                });
            }
        }
        let ctx = Ctx::new(&t);
        let v = verdicts(&ctx, &ctx.hosts[0]);
        assert!(
            v.iter().any(|l| l.starts_with("NVML reports no P2P read/write for 1 GPU pair (GPU0–GPU1)")),
            "{v:?}"
        );
        assert!(
            v.contains(
                &"All GPUs registered in one NVLink fabric: cluster c0ffee clique 7 (completed)"
                    .to_string()
            ),
            "{v:?}"
        );
    }

    #[test]
    fn c2c_shows_next_to_nvlink() {
        let mut t = hgx(1, 90);
        let g = t.gpus()[0];
        let cpu = t.cpus().next().unwrap();
        t.connect_both(
            g,
            cpu,
            Link {
                kind: LinkKind::C2c,
                bw: 90.0,
                lanes: 10,
            },
        );
        let ctx = Ctx::new(&t);
        assert_eq!(
            nvlink_text(&ctx, g),
            "18 → NVSwitch ×4 (370.8 GB/s); C2C 10 → CPU (90.0 GB/s)"
        );
    }
}
