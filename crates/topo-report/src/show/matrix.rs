//! The `nvidia-smi topo -m` matrix: GPU and NIC rows, connection classes from the PCI tree.
//!
//! Classes follow NVML's topology levels (`NVML_TOPOLOGY_SINGLE/MULTIPLE/HOSTBRIDGE/NODE/
//! SYSTEM`), computed from the model's PCI tree, not from NCCL's paths: PIX and PXB count the
//! PCIe switches between the two devices, PHB/NODE/SYS say what they cross above them.

use super::model::{Ctx, HostView, pci_class};
use crate::Style;
use crate::fit::{Cell, Paint};
use petgraph::graph::NodeIndex;
use serde::Serialize;
use topo_model::NodeKind;

/// One matrix cell: `X`, `NV#`, or the PCI class.
pub(crate) fn cell(ctx: &Ctx, a: NodeIndex, b: NodeIndex) -> String {
    if a == b {
        return " X ".to_string();
    }
    let both_gpus = matches!(ctx.topo.node(a).kind, NodeKind::Gpu(_))
        && matches!(ctx.topo.node(b).kind, NodeKind::Gpu(_));
    if both_gpus {
        let nv = ctx.nvlink_lanes_between(a, b);
        if nv > 0 {
            return format!("NV{nv}");
        }
    }
    pci_class(ctx, a, b).name().to_string()
}

/// The CPU list and NUMA id shown in the affinity columns of a GPU row.
pub(crate) fn affinity(ctx: &Ctx, gpu: NodeIndex) -> (String, String) {
    let cpu = ctx.topo.root_cpu(gpu).and_then(|c| ctx.topo.cpu(c));
    let cpus = cpu
        .and_then(super::model::cpu_list)
        .unwrap_or_else(|| "N/A".to_string());
    let numa = cpu
        .filter(|c| c.numa >= 0)
        .map(|c| c.numa.to_string())
        .unwrap_or_else(|| "N/A".to_string());
    (cpus, numa)
}

pub(crate) const LEGEND: &str = "Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
";

/// Lays rows out the way nvidia-smi's tab-separated output looks on a terminal: every column
/// starts on the tab stop (8 columns) after the widest cell of the previous column. Spaces,
/// not tabs, so the layout survives any pager or paste.
fn tab_layout(rows: &[Vec<(String, Paint)>], style: Style) -> String {
    let ncol = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut starts = vec![0usize; ncol + 1];
    for c in 0..ncol {
        let w = rows
            .iter()
            .filter_map(|r| r.get(c))
            .map(|x| x.0.chars().count())
            .max()
            .unwrap_or(0);
        starts[c + 1] = (starts[c] + w) / 8 * 8 + 8;
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        let mut col = 0;
        for (c, (text, paint)) in r.iter().enumerate() {
            if col < starts[c] {
                line.push_str(&" ".repeat(starts[c] - col));
                col = starts[c];
            }
            // Paint only the visible part, so trimming works the same with colour.
            let core = text.trim();
            let lead = &text[..text.len() - text.trim_start().len()];
            let trail = &text[lead.len() + core.len()..];
            line.push_str(lead);
            line.push_str(&paint.apply(style, core));
            line.push_str(trail);
            col += text.chars().count();
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn paint_for(cell: &str) -> Paint {
    match cell {
        " X " => Paint::Dim,
        c if c.starts_with("NV") => Paint::Green,
        "PIX" | "PXB" => Paint::Cyan,
        "SYS" => Paint::Yellow,
        _ => Paint::None,
    }
}

fn host_matrix(ctx: &Ctx, hv: &HostView, style: Style, compact: bool) -> String {
    let mut rows: Vec<Vec<(String, Paint)>> = vec![];
    let devices: Vec<NodeIndex> = hv.gpus.iter().copied().chain(hv.nic_columns()).collect();
    let mut header: Vec<(String, Paint)> = vec![(String::new(), Paint::None)];
    for &d in &devices {
        header.push((row_label(ctx, d), Paint::Bold));
    }
    if !hv.gpus.is_empty() && !compact {
        for h in ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"] {
            header.push((h.to_string(), Paint::Bold));
        }
    }
    rows.push(header);
    for &a in &devices {
        let mut row = vec![(row_label(ctx, a), Paint::Bold)];
        for &b in &devices {
            let c = cell(ctx, a, b);
            let p = paint_for(&c);
            row.push((c, p));
        }
        if matches!(ctx.topo.node(a).kind, NodeKind::Gpu(_)) && !compact {
            let (cpus, numa) = affinity(ctx, a);
            row.push((cpus, Paint::None));
            row.push((numa, Paint::None));
            // GPU memory exposed as its own NUMA node (C2C systems); the model does not record it.
            row.push(("N/A".to_string(), Paint::None));
        }
        rows.push(row);
    }
    let mut out = if compact {
        compact_tail(ctx, hv, &rows, style)
    } else {
        full_tail(hv, ctx, &rows, style)
    };
    let unknown: Vec<(usize, String)> = hv
        .gpus
        .iter()
        .enumerate()
        .filter_map(|(i, &g)| ctx.nvlink(g).unknown.map(|r| (i, r)))
        .collect();
    if !unknown.is_empty() {
        let idx: Vec<usize> = unknown.iter().map(|u| u.0).collect();
        let mut reasons: Vec<&str> = unknown.iter().map(|u| u.1.as_str()).collect();
        reasons.dedup();
        out.push_str(&format!(
            "\n{} NVLink unknown for {} {} ({}): GPU pairs show their PCIe class only; NVLink may still exist.\n",
            style.yellow("Note:"),
            if idx.len() == 1 { "GPU" } else { "GPUs" },
            super::model::ranges(&idx),
            reasons.join("; ")
        ));
    }
    out
}

/// nvidia-smi's own layout: tab stops, the legends as nvidia-smi prints them.
fn full_tail(hv: &HostView, ctx: &Ctx, rows: &[Vec<(String, Paint)>], style: Style) -> String {
    let mut out = tab_layout(rows, style);
    out.push('\n');
    out.push_str(LEGEND);
    let nics = hv.nic_columns();
    if !nics.is_empty() {
        out.push_str("\nNIC Legend:\n\n");
        for (i, &n) in nics.iter().enumerate() {
            let note = if hv.bare_nics.contains(&n) {
                " (no network port listed)"
            } else {
                ""
            };
            out.push_str(&format!("  NIC{i}: {}{note}\n", ctx.label(n)));
        }
    }
    out
}

/// The compact layout: the matrix in blocks of whole columns one space apart, the affinity
/// columns as their own table, the legends wrapped; every line fits `style.width`.
fn compact_tail(ctx: &Ctx, hv: &HostView, rows: &[Vec<(String, Paint)>], style: Style) -> String {
    use crate::fit;
    let cells: Vec<Vec<Cell>> = rows
        .iter()
        .map(|r| r.iter().map(|(t, p)| Cell::paint(t.trim(), *p)).collect())
        .collect();
    let mut out = fit::column_blocks("", &cells, 1, &[], 1, style);
    if !hv.gpus.is_empty() {
        let aff: Vec<Vec<Cell>> = hv
            .gpus
            .iter()
            .map(|&g| {
                let (cpus, numa) = affinity(ctx, g);
                vec![
                    Cell::paint(row_label(ctx, g), Paint::Bold),
                    cpus.into(),
                    numa.into(),
                    "N/A".into(),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&fit::table(
            "",
            &["", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"],
            &aff,
            style,
        ));
    }
    out.push('\n');
    let mut legend = String::from(LEGEND);
    let nics = hv.nic_columns();
    if !nics.is_empty() {
        legend.push_str("\nNIC Legend:\n\n");
        for (i, &n) in nics.iter().enumerate() {
            let note = if hv.bare_nics.contains(&n) {
                " (no network port listed)"
            } else {
                ""
            };
            legend.push_str(&format!("  NIC{i}: {}{note}\n", ctx.label(n)));
        }
    }
    for line in legend.lines() {
        // Continuations sit under the meaning, after `NAME = `.
        let cont = line.find(" = ").map(|i| i + 3).unwrap_or(4);
        let body = line.trim_start();
        let lead = &line[..line.len() - body.len()];
        for l in fit::wrap_prefixed(lead, &" ".repeat(cont), body, style.width) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}

pub(crate) fn row_label(ctx: &Ctx, n: NodeIndex) -> String {
    match ctx.topo.node(n).kind {
        NodeKind::Gpu(_) => format!("GPU{}", ctx.number(n)),
        _ => format!("NIC{}", ctx.index(n)),
    }
}

pub(crate) fn render(ctx: &Ctx, style: Style) -> String {
    render_layout(ctx, style, false)
}

/// `--view matrix --compact`: the same cells in a layout that fits the terminal.
pub(crate) fn render_compact(ctx: &Ctx, style: Style) -> String {
    render_layout(ctx, style, true)
}

fn render_layout(ctx: &Ctx, style: Style, compact: bool) -> String {
    super::model::per_host(ctx, |_, hv, out| {
        if ctx.multi_host() {
            out.push_str(&format!(
                "{}\n",
                style.bold(&format!("Host {}: {}", hv.host, ctx.host_name(hv.host)))
            ));
        }
        if hv.gpus.is_empty() && hv.nic_columns().is_empty() {
            out.push_str(&format!(
                "{}. No network ports either.\n",
                super::model::no_gpu_line(ctx, hv.host)
            ));
        } else {
            if hv.gpus.is_empty() {
                out.push_str(&format!(
                    "{}; showing network ports only.\n\n",
                    super::model::no_gpu_line(ctx, hv.host)
                ));
            }
            out.push_str(&host_matrix(ctx, hv, style, compact));
        }
        if ctx.multi_host() {
            out.push('\n');
        }
    })
}

/// The matrix as data: row/column labels and cells, per host.
#[derive(Serialize)]
pub(crate) struct MatrixDoc {
    pub host: u16,
    pub labels: Vec<String>,
    pub cells: Vec<Vec<String>>,
    pub cpu_affinity: Vec<Option<String>>,
    pub numa_affinity: Vec<Option<i32>>,
    pub nic_legend: Vec<NicLegend>,
}

#[derive(Serialize)]
pub(crate) struct NicLegend {
    pub label: String,
    pub name: String,
}

pub(crate) fn doc(ctx: &Ctx) -> Vec<MatrixDoc> {
    ctx.hosts
        .iter()
        .map(|hv| {
            let devices: Vec<NodeIndex> = hv.gpus.iter().copied().chain(hv.nic_columns()).collect();
            MatrixDoc {
                host: hv.host,
                labels: devices.iter().map(|&d| row_label(ctx, d)).collect(),
                cells: devices
                    .iter()
                    .map(|&a| {
                        devices
                            .iter()
                            .map(|&b| cell(ctx, a, b).trim().to_string())
                            .collect()
                    })
                    .collect(),
                cpu_affinity: hv
                    .gpus
                    .iter()
                    .map(|&g| {
                        ctx.topo
                            .root_cpu(g)
                            .and_then(|c| ctx.topo.cpu(c))
                            .and_then(super::model::cpu_list)
                    })
                    .collect(),
                numa_affinity: hv.gpus.iter().map(|&g| ctx.numa(g)).collect(),
                nic_legend: hv
                    .nic_columns()
                    .into_iter()
                    .map(|n| NicLegend {
                        label: row_label(ctx, n),
                        name: ctx.label(n),
                    })
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use topo_model::testing::hgx;

    fn cell_by_label(ctx: &Ctx, a: &str, b: &str) -> String {
        let hv = &ctx.hosts[0];
        let find = |l: &str| -> NodeIndex {
            hv.gpus
                .iter()
                .chain(&hv.nets)
                .copied()
                .find(|&n| row_label(ctx, n) == l)
                .unwrap()
        };
        cell(ctx, find(a), find(b)).trim().to_string()
    }

    #[test]
    fn hgx_cells() {
        let t = hgx(8, 90);
        let ctx = Ctx::new(&t);
        assert_eq!(cell_by_label(&ctx, "GPU0", "GPU7"), "NV18");
        assert_eq!(cell_by_label(&ctx, "GPU0", "GPU0"), "X");
        assert_eq!(cell_by_label(&ctx, "GPU3", "NIC3"), "PIX");
        // different switches, different root buses below one CPU
        assert_eq!(cell_by_label(&ctx, "GPU3", "NIC4"), "NODE");
        assert_eq!(cell_by_label(&ctx, "NIC0", "NIC1"), "NODE");
    }

    #[test]
    fn pcie_two_socket_cells() {
        let t = pcie_2socket();
        let ctx = Ctx::new(&t);
        assert_eq!(cell_by_label(&ctx, "GPU0", "GPU1"), "PIX");
        assert_eq!(cell_by_label(&ctx, "GPU0", "GPU2"), "PXB");
        assert_eq!(cell_by_label(&ctx, "GPU0", "GPU3"), "PHB");
        assert_eq!(cell_by_label(&ctx, "GPU0", "GPU4"), "SYS");
        assert_eq!(cell_by_label(&ctx, "GPU0", "NIC0"), "PXB");
        assert_eq!(cell_by_label(&ctx, "GPU4", "NIC1"), "PIX");
        assert_eq!(cell_by_label(&ctx, "GPU5", "NIC1"), "NODE");
    }

    #[test]
    fn nvlink_bridge_pair() {
        let t = nvlink_bridge();
        let ctx = Ctx::new(&t);
        assert_eq!(cell_by_label(&ctx, "GPU0", "GPU1"), "NV4");
        assert_eq!(cell_by_label(&ctx, "GPU1", "GPU0"), "NV4");
        assert_eq!(cell_by_label(&ctx, "GPU0", "NIC0"), "NODE");
    }

    #[test]
    fn layout_matches_nvidia_smi_columns() {
        let t = hgx(8, 90);
        let ctx = Ctx::new(&t);
        let out = render(&ctx, Style::default());
        let lines: Vec<&str> = out.lines().collect();
        // Same column starts as a real `nvidia-smi topo -m` on 8 GPUs + 8 NICs.
        assert!(
            lines[0].starts_with("        GPU0    GPU1    GPU2"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with("GPU0     X      NV18    NV18"),
            "{}",
            lines[1]
        );
        assert!(lines[0].contains("NIC7    CPU Affinity    NUMA Affinity   GPU NUMA ID"));
        assert!(out.contains("\nNIC Legend:\n\n  NIC0: mlx5_0\n"));
        assert!(!out.contains('\x1b'));
    }

    #[test]
    fn unknown_nvlink_is_noted() {
        let t = unknown_nvlink();
        let ctx = Ctx::new(&t);
        let out = render(&ctx, Style::default());
        assert!(
            out.contains("NVLink unknown for GPUs 0–1 (no NVML)"),
            "{out}"
        );
    }
}
