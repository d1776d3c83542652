//! The machine: show's SVG drawing, the GPU/NIC matrix in nvidia-smi's layout with NCCL's
//! path type and bandwidth on each cell's hover, the NIC rails and the NUMA nodes. Hosts of
//! one hardware class are shown once, with their count (a cluster is a few classes).

use super::doc::{Html, Input, MAX_ROWS};
use crate::show::matrix;
use crate::show::model::{Ctx, HostView};
use petgraph::graph::NodeIndex;
use std::collections::HashMap;
use topo_model::NodeKind;

/// Host classes shown in full; the rest are counted.
const MAX_CLASSES: usize = 8;

pub(super) fn render(h: &mut Html, input: &Input) {
    h.section("machine", "The machine");
    let Some(topo) = input.topo else {
        h.el("p", "h-note", "No machine: pass --from or --profile.");
        h.end_section();
        return;
    };
    h.el("h3", "", "Drawing");
    h.svg("h-machine", &crate::show::svg(topo));
    crate::show::with_ctx(topo, |ctx| {
        if let Some(c) = ctx.copies {
            h.el("p", "h-note", &c.sentence());
        }
        let classes = host_classes(ctx);
        for (i, (first, hosts)) in classes.iter().take(MAX_CLASSES).enumerate() {
            let hv = &ctx.hosts[*first];
            let name = if ctx.multi_host() {
                format!(
                    "host {}{}",
                    ctx.host_name(hv.host),
                    if hosts.len() > 1 {
                        format!(" and {} more alike", hosts.len() - 1)
                    } else {
                        String::new()
                    }
                )
            } else {
                String::new()
            };
            host(h, ctx, hv, i, &name);
        }
        if classes.len() > MAX_CLASSES {
            h.el(
                "p",
                "h-more",
                &format!(
                    "… and {} more host classes not shown",
                    classes.len() - MAX_CLASSES
                ),
            );
        }
    });
    h.end_section();
}

/// Hosts grouped by their matrix (labels and cells): the first host of each class and every
/// host in it, in first-met order.
fn host_classes(ctx: &Ctx) -> Vec<(usize, Vec<usize>)> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<(usize, Vec<usize>)> = vec![];
    for (i, hv) in ctx.hosts.iter().enumerate() {
        let devs = devices(hv);
        let mut key = String::new();
        for &a in &devs {
            key.push_str(&ctx.label(a));
            key.push('|');
            for &b in &devs {
                key.push_str(matrix::cell(ctx, a, b).trim());
                key.push(',');
            }
        }
        match index.get(&key) {
            Some(&c) => out[c].1.push(i),
            None => {
                index.insert(key, out.len());
                out.push((i, vec![i]));
            }
        }
    }
    out
}

fn devices(hv: &HostView) -> Vec<NodeIndex> {
    hv.gpus.iter().copied().chain(hv.nic_columns()).collect()
}

fn cell_class(cell: &str) -> &'static str {
    match cell {
        "X" => "h-self",
        "PIX" => "h-pix",
        "PXB" => "h-pxb",
        "PHB" => "h-phb",
        "NODE" => "h-node",
        "SYS" => "h-sys",
        c if c.starts_with("NV") => "h-nv",
        _ => "",
    }
}

/// The hover text of a matrix cell: nvidia-smi's class and NCCL's path (type, bandwidth,
/// hops, the relay GPU), which the two tools can disagree on.
fn cell_title(ctx: &Ctx, a: NodeIndex, b: NodeIndex, cell: &str) -> String {
    let (la, lb) = (matrix::row_label(ctx, a), matrix::row_label(ctx, b));
    let mut t = format!("{la} ↔ {lb}: {cell} (nvidia-smi)");
    match ctx.path(a, b).or_else(|| ctx.path(b, a)) {
        Some(p) => {
            t.push_str(&format!(
                "; NCCL path {}, {} GB/s, {} hop{}",
                p.ty,
                topo_diagnose::results::gbps(p.bw),
                p.hops,
                if p.hops == 1 { "" } else { "s" }
            ));
            if let Some(v) = p.via {
                t.push_str(&format!(" via {}", matrix::row_label(ctx, v)));
            }
        }
        None => t.push_str("; NCCL path: none computed"),
    }
    t
}

fn host(h: &mut Html, ctx: &Ctx, hv: &HostView, class: usize, name: &str) {
    let devs = devices(hv);
    let heading = if name.is_empty() {
        "GPU/NIC matrix (nvidia-smi topo -m)".to_string()
    } else {
        format!("GPU/NIC matrix (nvidia-smi topo -m): {name}")
    };
    h.el("h3", "", &heading);
    h.raw(&format!(
        "<div class=\"h-wide\"><table class=\"h-matrix\" id=\"matrix-{class}\"><thead><tr><th></th>"
    ));
    for &d in &devs {
        h.el("th", "", &matrix::row_label(ctx, d));
    }
    h.raw("<th>CPU Affinity</th><th>NUMA Affinity</th></tr></thead>\n<tbody>\n");
    for &a in &devs {
        h.raw("<tr>");
        h.el("th", "", &matrix::row_label(ctx, a));
        for &b in &devs {
            let cell = matrix::cell(ctx, a, b).trim().to_string();
            h.raw(&format!(
                "<td class=\"{}\" title=\"{}\">",
                cell_class(&cell),
                super::doc::esc(&cell_title(ctx, a, b, &cell))
            ));
            h.text(&cell);
            h.raw("</td>");
        }
        if matches!(ctx.topo.node(a).kind, NodeKind::Gpu(_)) {
            let (cpus, numa) = matrix::affinity(ctx, a);
            h.el("td", "", &cpus);
            h.el("td", "", &numa);
        } else {
            h.raw("<td></td><td></td>");
        }
        h.raw("</tr>\n");
    }
    h.raw("</tbody></table></div>\n");
    h.raw("<p class=\"h-legend\">");
    for (c, t) in [
        ("h-nv", "NV#: bonded NVLinks"),
        ("h-pix", "PIX: one PCIe bridge"),
        ("h-pxb", "PXB: several PCIe bridges"),
        ("h-phb", "PHB: a host bridge"),
        ("h-node", "NODE: host bridges in a NUMA node"),
        ("h-sys", "SYS: across NUMA nodes"),
    ] {
        h.el("span", c, t);
    }
    h.raw("</p>\n");
    rails(h, ctx, hv);
    numa(h, ctx, hv);
}

/// The network ports: name, speed, role, GPUDirect RDMA, NUMA, and the GPUs that have it as
/// their nearest (the rail).
fn rails(h: &mut Html, ctx: &Ctx, hv: &HostView) {
    let nics = hv.nic_columns();
    if nics.is_empty() {
        h.el("p", "h-note", "No network port.");
        return;
    }
    let mut nearest: HashMap<NodeIndex, Vec<String>> = HashMap::new();
    for &g in &hv.gpus {
        if let Some((n, ty, bw)) = ctx.nearest_nic_shown(g) {
            let bw = bw.map_or(String::new(), |b| {
                format!(", {} GB/s", topo_diagnose::results::gbps(b))
            });
            nearest
                .entry(n)
                .or_default()
                .push(format!("{} ({ty}{bw})", matrix::row_label(ctx, g)));
        }
    }
    h.el("h3", "", "NIC rails");
    h.raw("<table class=\"h-rails\">");
    h.head(&[
        "NIC",
        "device",
        "speed",
        "link",
        "role",
        "GPUDirect RDMA",
        "NUMA",
        "nearest to",
    ]);
    h.raw("<tbody>\n");
    for &n in nics.iter().take(MAX_ROWS) {
        let net = ctx.topo.net(n);
        let role = ctx.roles.get(&n).map_or_else(
            || ctx.role(n).name().to_string(),
            |r| format!("{} ({})", r.role.name(), r.why),
        );
        h.row(&[
            matrix::row_label(ctx, n),
            ctx.label(n),
            net.and_then(|x| x.speed_mbps)
                .map_or("unknown".into(), |s| format!("{} Gb/s", s / 1000)),
            net.and_then(|x| x.link_layer.clone())
                .unwrap_or_else(|| "unknown".into()),
            role,
            net.map_or("unknown".into(), |x| {
                if x.gdr_unstated {
                    "unknown".into()
                } else if x.gdr {
                    "yes".into()
                } else {
                    "no".into()
                }
            }),
            ctx.numa(n).map_or("unknown".into(), |x| x.to_string()),
            nearest.get(&n).map_or(String::new(), |v| v.join(", ")),
        ]);
    }
    h.raw("</tbody></table>\n");
    h.more(MAX_ROWS, nics.len(), "ports");
}

/// NUMA nodes with their CPUs, GPUs and ports.
fn numa(h: &mut Html, ctx: &Ctx, hv: &HostView) {
    if hv.cpus.is_empty() {
        return;
    }
    h.el("h3", "", "NUMA");
    h.raw("<table class=\"h-numa\">");
    h.head(&["NUMA node", "CPUs", "GPUs", "NICs"]);
    h.raw("<tbody>\n");
    for &c in &hv.cpus {
        let Some(cpu) = ctx.topo.cpu(c) else {
            continue;
        };
        let on = |n: &NodeIndex| ctx.topo.root_cpu(*n) == Some(c);
        let gpus: Vec<String> = hv
            .gpus
            .iter()
            .filter(|n| on(n))
            .map(|&g| matrix::row_label(ctx, g))
            .collect();
        let nics: Vec<String> = hv
            .nic_columns()
            .iter()
            .filter(|n| on(n))
            .map(|&n| format!("{} {}", matrix::row_label(ctx, n), ctx.label(n)))
            .collect();
        h.row(&[
            if cpu.numa >= 0 {
                cpu.numa.to_string()
            } else {
                "unknown".into()
            },
            crate::show::model::cpu_list(cpu).unwrap_or_else(|| "unknown".into()),
            gpus.join(", "),
            nics.join(", "),
        ]);
    }
    h.raw("</tbody></table>\n");
}
