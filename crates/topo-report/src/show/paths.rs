//! The paths view: NCCL's path type and bandwidth from each GPU to every GPU and NIC of its
//! host, the table NCCL prints per node at INFO/GRAPH level, laid out as a matrix.

use super::model::{Ctx, HostView};
use crate::Style;
use crate::fit::{Cell, Paint};
use std::collections::{BTreeMap, BTreeSet};
use topo_nccl::types::PathType;

fn meaning(t: PathType) -> &'static str {
    match t {
        PathType::Loc => "same device",
        PathType::Nvl => "NVLink, direct or through NVSwitch",
        PathType::Nvb => "NVLink through one intermediate GPU",
        PathType::C2c => "GPU to CPU over C2C",
        PathType::Pix => "at most one PCIe switch",
        PathType::Pxb => "several PCIe switches, no host bridge",
        PathType::P2c => "GPU over C2C to the CPU, then PCIe to the NIC",
        PathType::Pxn => "NVLink to a peer GPU, then that GPU's PCIe path to the NIC",
        PathType::Phb => "through a PCIe host bridge (the CPU)",
        PathType::Sys => "across the inter-socket link",
        PathType::Net => {
            "through the network: NCCL uses the NICs (no P2P/SHM, or the NICs are faster)"
        }
        PathType::Dis => "disconnected",
    }
}

fn paint(t: PathType) -> Paint {
    match t {
        PathType::Loc => Paint::Dim,
        PathType::Nvl | PathType::Nvb | PathType::C2c => Paint::Green,
        PathType::Pix | PathType::Pxb | PathType::P2c | PathType::Pxn => Paint::Cyan,
        PathType::Phb => Paint::None,
        PathType::Sys | PathType::Net | PathType::Dis => Paint::Yellow,
    }
}

fn host_paths(ctx: &Ctx, hv: &HostView, style: Style) -> String {
    let cols: Vec<_> = hv.gpus.iter().chain(&hv.nets).copied().collect();
    let mut header: Vec<String> = vec![String::new()];
    header.extend(cols.iter().map(|&c| ctx.label(c)));
    let mut seen = BTreeSet::new();
    // (target, relay GPU, type) → source GPUs, so a full PXN fabric stays readable.
    let mut relays = BTreeMap::new();
    let rows: Vec<Vec<Cell>> = hv
        .gpus
        .iter()
        .map(|&g| {
            let mut r = vec![Cell::paint(ctx.label(g), Paint::Bold)];
            for &c in &cols {
                r.push(match ctx.path(g, c) {
                    Some(p) if c == g => {
                        seen.insert(p.ty);
                        Cell::paint(p.ty.name(), paint(p.ty))
                    }
                    Some(p) => {
                        seen.insert(p.ty);
                        if let Some(v) = p.via {
                            relays
                                .entry((ctx.index(c), c, v, p.ty))
                                .or_insert_with(Vec::new)
                                .push(ctx.index(g));
                        }
                        Cell::paint(format!("{} {:.1}", p.ty, p.bw), paint(p.ty))
                    }
                    None => Cell::paint("—", Paint::Dim),
                });
            }
            r
        })
        .collect();
    // Too wide for the terminal: blocks of whole columns, each repeating the GPU labels.
    let mut grid: Vec<Vec<Cell>> = vec![
        header
            .iter()
            .map(|h| Cell::paint(h.as_str(), Paint::Bold))
            .collect(),
    ];
    grid.extend(rows);
    let mut out = crate::fit::column_blocks("", &grid, 1, &[], 2, style);
    if !relays.is_empty() {
        out.push_str("\nRelayed paths:\n");
        for ((_, to, via, ty), from) in relays {
            let word = if from.len() == 1 { "GPU" } else { "GPUs" };
            out.push_str(&format!(
                "  {word} {} → {}: {ty} via {}\n",
                super::model::ranges(&from),
                ctx.label(to),
                ctx.label(via)
            ));
        }
    }
    if !hv.gpus.is_empty() && !hv.nets.is_empty() {
        out.push_str("\nNIC used for channel 0:\n");
        for &g in &hv.gpus {
            if let Some((n, p)) = ctx.nearest_nic(g) {
                let local: Vec<String> = ctx.local_nets(g).iter().map(|&x| ctx.label(x)).collect();
                out.push_str(&format!(
                    "  {} → {} ({}, {:.1} GB/s; local NICs: {})\n",
                    ctx.label(g),
                    ctx.label(n),
                    p.ty,
                    p.bw,
                    local.join(", ")
                ));
            }
        }
    }
    out.push_str("\nLegend:\n\n");
    for t in seen {
        out.push_str(&format!("  {:<4} = {}\n", t.name(), meaning(t)));
    }
    out
}

pub(crate) fn render(ctx: &Ctx, style: Style) -> String {
    let mut out = String::from(
        "NCCL paths from each GPU (row) to each GPU and NIC (column): type and bandwidth in GB/s\n\
         (NCCL 2.28 rules, default environment; a row is what that GPU's rank sees).\n\n",
    );
    out.push_str(&super::model::per_host(ctx, |_, hv, out| {
        if ctx.multi_host() {
            out.push_str(&style.bold(&format!("Host {}: {}", hv.host, ctx.host_name(hv.host))));
            out.push('\n');
        }
        if hv.gpus.is_empty() {
            out.push_str("No GPUs: NCCL computes no paths on this host.\n");
        } else {
            out.push_str(&host_paths(ctx, hv, style));
        }
        out.push('\n');
    }));
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use topo_model::testing::hgx;

    #[test]
    fn hgx_paths_table() {
        let t = hgx(8, 90);
        let out = render(
            &Ctx::new(&t),
            Style {
                width: 1000,
                ..Style::default()
            },
        );
        let row0 = out.lines().find(|l| l.starts_with("GPU0")).unwrap();
        let cells: Vec<&str> = row0
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(cells[..3], ["GPU0", "LOC", "NVL 370.8"], "{row0}");
        // Own NIC over the shared switch; the others through the GPU that owns them (PXN).
        assert_eq!(cells[9], "PIX 48.0", "{row0}");
        assert_eq!(cells[10], "PXN 48.0", "{row0}");
        assert!(
            out.contains("  GPUs 0, 2–7 → mlx5_1: PXN via GPU1\n"),
            "{out}"
        );
        assert!(
            out.contains("  GPU5 → mlx5_5 (PIX, 48.0 GB/s; local NICs: mlx5_5)"),
            "{out}"
        );
        assert!(out.contains("  NVL  = NVLink, direct or through NVSwitch"));
    }

    #[test]
    fn pcie_paths_cross_sockets() {
        let t = pcie_2socket();
        let ctx = Ctx::new(&t);
        let g = &ctx.hosts[0].gpus;
        // Both GPUs have a NIC within PXB that is faster (24 GB/s) than the Sapphire Rapids
        // inter-socket link (22 GB/s), so NCCL sends between them over the network
        // (ncclTopoCheckNet, src/graph/paths.cc).
        assert_eq!(ctx.path(g[0], g[4]).unwrap().ty, PathType::Net);
        assert_eq!(ctx.path(g[4], g[5]).unwrap().ty, PathType::Phb);
        assert_eq!(ctx.path(g[0], g[1]).unwrap().ty, PathType::Pix);
        assert_eq!(ctx.path(g[0], g[2]).unwrap().ty, PathType::Pxb);
    }

    #[test]
    fn no_gpus_no_paths() {
        let t = gpuless();
        let out = render(
            &Ctx::new(&t),
            Style {
                width: 1000,
                ..Style::default()
            },
        );
        assert!(out.contains("No GPUs: NCCL computes no paths on this host."));
    }
}
