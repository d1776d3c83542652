//! NVLink lanes that are missing, which every view states alike (issue 24: one rule and one
//! code per fact): `topo show` (the summary), `topo plan` (its messages) and `topo diagnose`
//! (its findings) take them from here. Before, show called an NVSwitch host with uneven lanes
//! `nvswitch-lanes-uneven` (a warning) while diagnose called it `nvlink-degraded` (an error),
//! and diagnose counted a GPU whose NVLinks the source could not enumerate as having none.

use crate::message::{Code, Finding, Severity};
use crate::{NodeKind, NvlinkInfo, Topology};
use petgraph::graph::NodeIndex;

/// The NVLink verdicts over the GPUs among `nodes` (a host's, or a whole topology's), in a
/// fixed order: lanes missing against the host's other GPUs (an error), else a bridged pair
/// with fewer links than a bridge gives (a warning). GPUs whose NVLinks are unknown are left
/// out: unknown is not "none".
pub fn verdicts(topo: &Topology, nodes: impl IntoIterator<Item = NodeIndex>) -> Vec<Finding> {
    let hosts = by_host(topo, nodes);
    let many = hosts.len() > 1;
    let (mut short, mut bridged) = (vec![], vec![]);
    for gpus in hosts.values() {
        short.extend(missing_lanes(topo, gpus, many));
        bridged.extend(short_bridges(topo, gpus, many));
    }
    finding(short, bridged)
}

/// [`verdicts`] of every GPU of `topo`. Where one copy answers for its unchanged copies
/// ([`Topology::standing`]) and its hosts find nothing, those copies find nothing either and
/// are not asked: at 16,384 hosts, asking each was a thirtieth of a plan.
pub fn every_gpu(topo: &Topology) -> Vec<Finding> {
    let Some(s) = topo.standing() else {
        return verdicts(topo, topo.gpus());
    };
    let hosts = by_host(topo, topo.gpus_among(s.asked_nodes()));
    // `verdicts`' `many` over every host: each asked host counts for those it answers for.
    let many = hosts
        .keys()
        .map(|&h| s.stands_for(h as usize))
        .sum::<usize>()
        > 1;
    let (mut short, mut bridged) = (vec![], vec![]);
    for (&h, gpus) in &hosts {
        let (sh, br) = (
            missing_lanes(topo, gpus, many),
            short_bridges(topo, gpus, many),
        );
        if s.stands_for(h as usize) > 1 && !(sh.is_empty() && br.is_empty()) {
            return verdicts(topo, topo.gpus());
        }
        short.extend(sh);
        bridged.extend(br);
    }
    finding(short, bridged)
}

/// GPUs of known NVLink among `nodes`, by host.
fn by_host(
    topo: &Topology,
    nodes: impl IntoIterator<Item = NodeIndex>,
) -> std::collections::BTreeMap<crate::HostId, Vec<NodeIndex>> {
    // By host id, holding only the hosts asked about: show asks once per host.
    let mut hosts: std::collections::BTreeMap<crate::HostId, Vec<NodeIndex>> = Default::default();
    for n in nodes {
        let Some(g) = topo.gpu(n) else { continue };
        if matches!(g.nvlink, NvlinkInfo::Unknown(_)) {
            continue;
        }
        hosts.entry(topo.node(n).host).or_default().push(n);
    }
    hosts
}

/// The one finding of the GPUs with missing lanes, else of the short bridges.
fn finding(short: Vec<(String, String)>, bridged: Vec<String>) -> Vec<Finding> {
    if !short.is_empty() {
        let named: Vec<&str> = short.iter().map(|(n, _)| n.as_str()).take(4).collect();
        let more = if short.len() > 4 { ", ..." } else { "" };
        return vec![Finding::new(Code::NvlinkDegraded, format!(
                "NVLink lanes are missing on {}{more}: links are down or not detected, so those GPUs get less NVLink bandwidth",
                named.join(", ")
            )).evidence(short.into_iter().map(|(_, e)| e))];
    }
    if !bridged.is_empty() {
        return vec![
            Finding::at(
                Code::NvlinkDegraded,
                Severity::Warning,
                "fewer NVLinks than a bridge gives: a bridge is probably only partly connected",
            )
            .evidence(bridged),
        ];
    }
    vec![]
}

/// `GPU3`, or `host 2 GPU3` in a topology of several hosts.
fn name(topo: &Topology, g: NodeIndex, many: bool) -> String {
    let dev = topo.gpu(g).map_or(0, |x| x.dev);
    if many {
        format!("host {} GPU{dev}", topo.node(g).host)
    } else {
        format!("GPU{dev}")
    }
}

/// GPUs with fewer NVLink lanes than the host's best: (`GPU3 (12 of 18)`, evidence line). A
/// GPU without any is counted only beside GPUs with 12 or more (a PCIe card beside a bridged
/// pair has none by design).
fn missing_lanes(topo: &Topology, gpus: &[NodeIndex], many: bool) -> Vec<(String, String)> {
    let lanes: Vec<(NodeIndex, u32)> = gpus
        .iter()
        .map(|&g| {
            // Lanes to GPUs outside the source are lanes the GPU has, not missing ones.
            let outside: u32 = topo
                .gpu(g)
                .map_or(0, |x| x.nvlink_outside.iter().map(|o| o.lanes).sum());
            (
                g,
                topo.nvlinks(g).iter().map(|x| x.1).sum::<u32>() + outside,
            )
        })
        .collect();
    let max = lanes.iter().map(|x| x.1).max().unwrap_or(0);
    lanes
        .into_iter()
        .filter(|&(_, n)| max > 0 && n < max && (n > 0 || max >= 12))
        .map(|(g, n)| {
            let who = name(topo, g, many);
            let ev = format!(
                "{}: {n} NVLink lanes, other GPUs have {max}",
                crate::pcie_judge::label(topo, g)
            );
            (format!("{who} ({n} of {max})"), ev)
        })
        .collect()
}

/// Links one NVLink bridge gives a GPU's board, with the board's name where it is not the 4
/// of the NVLink 3 and 4 PCIe cards (A40, RTX A6000, RTX 3090, A100/H100 PCIe, which take up
/// to three bridges of 4): a GeForce RTX 2080 Ti's bridge carries 2 (the model table in
/// `stated.rs`). `None` for a Turing board the source does not name: its bridges carry 1
/// (RTX 2080, 2070 Super) or 2 (RTX 2080 Ti, TITAN RTX), so a short one cannot be told.
fn bridge_links(topo: &Topology, g: NodeIndex) -> Option<(u32, Option<&'static str>)> {
    let gpu = topo.gpu(g)?;
    let model = gpu.name.as_deref().and_then(crate::stated::gpu_model);
    match model {
        Some(m) if m.nvlink == crate::stated::NvlinkShape::Pairs && m.nvlink_lanes < 4 => {
            Some((m.nvlink_lanes, Some(m.name)))
        }
        None if gpu.sm == Some(75) => None,
        _ => Some((4, None)),
    }
}

/// Pairs joined only to each other, by fewer links than one NVLink bridge gives their board.
fn short_bridges(topo: &Topology, gpus: &[NodeIndex], many: bool) -> Vec<String> {
    let is_gpu = |n: NodeIndex| matches!(topo.node(n).kind, NodeKind::Gpu(_));
    let peers = |g: NodeIndex| -> Vec<(NodeIndex, u32, f64)> {
        topo.nvlinks(g)
            .into_iter()
            .filter(|x| is_gpu(x.0))
            .collect()
    };
    let mut out = vec![];
    for &g in gpus {
        if let [(p, l, _)] = peers(g)[..]
            && g < p
            && peers(p).len() == 1
            && let Some((gives, board)) = bridge_links(topo, g)
            && l < gives
        {
            let (a, b) = (name(topo, g, many), name(topo, p, many));
            out.push(match board {
                Some(board) => format!(
                    "{a} and {b}: NV{l} over a bridge; a {board} bridge gives {gives} links"
                ),
                None => format!(
                    "{a} and {b}: NV{l} over a bridge; NVLink bridges give 4 links (12 for A100 PCIe with 3 bridges)"
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::hgx;

    #[test]
    fn a_gpu_with_lanes_down_is_an_error_and_an_unknown_one_is_not_counted() {
        let mut t = hgx(4, 90);
        assert!(verdicts(&t, t.graph.node_indices()).is_empty());
        let g1 = t.gpus()[1];
        let e = t
            .graph
            .edges(g1)
            .find(|e| e.weight().kind == crate::LinkKind::NvLink);
        let e = e.map(|e| petgraph::visit::EdgeRef::id(&e)).unwrap();
        t.graph[e].lanes = 1;
        let v = verdicts(&t, t.graph.node_indices());
        assert_eq!(v.len(), 1);
        assert_eq!(
            (v[0].code, v[0].severity),
            (Code::NvlinkDegraded, Severity::Error)
        );
        assert!(v[0].text.contains("GPU1 ("), "{}", v[0].text);
        if let NodeKind::Gpu(g) = &mut t.graph[g1].kind {
            g.nvlink = NvlinkInfo::Unknown("no NVML".into());
        }
        assert!(verdicts(&t, t.graph.node_indices()).is_empty());
    }

    /// Two GPUs of `name` (sm `sm`) on one CPU, joined only by a bridge of `lanes` links.
    fn bridged_pair(name: Option<&str>, sm: u32, lanes: u32) -> Topology {
        let mut t = Topology::new(crate::SourceInfo::default());
        let cpu = t.add_node(0, None, NodeKind::Cpu(crate::Cpu::default()));
        let gpus: Vec<NodeIndex> = (0..2u8)
            .map(|d| {
                let mut g = crate::Gpu::new(crate::BusId::new(0, 1 + d, 0, 0), d.into());
                g.name = name.map(String::from);
                g.sm = Some(sm);
                g.nvlink = NvlinkInfo::Known;
                t.add_child(cpu, NodeKind::gpu(g))
            })
            .collect();
        t.add_nvlink(gpus[0], gpus[1], lanes);
        t.add_nvlink(gpus[1], gpus[0], lanes);
        t
    }

    #[test]
    fn a_bridge_is_short_against_what_its_board_gives() {
        let says = |t: &Topology| {
            verdicts(t, t.graph.node_indices())
                .into_iter()
                .flat_map(|f| f.evidence)
                .collect::<Vec<_>>()
        };
        // An RTX 2080 Ti's bridge carries 2 links (nccl#340's machine once reseated): seated,
        // nothing to say; one link, as with its bridge half in, short against its own 2.
        let name = Some("GeForce RTX 2080 Ti");
        assert!(says(&bridged_pair(name, 75, 2)).is_empty());
        assert_eq!(
            says(&bridged_pair(name, 75, 1)),
            ["GPU0 and GPU1: NV1 over a bridge; a GeForce RTX 2080 Ti bridge gives 2 links"]
        );
        // A Turing board nobody names may be one whose bridge carries 1: not claimed.
        assert!(says(&bridged_pair(None, 75, 1)).is_empty());
        // The NVLink 3 cards' bridges give 4, named or not.
        for name in [None, Some("NVIDIA RTX A6000")] {
            let got = says(&bridged_pair(name, 86, 2));
            assert_eq!(got.len(), 1, "{name:?}");
            assert!(got[0].contains("NVLink bridges give 4 links"), "{got:?}");
            assert!(says(&bridged_pair(name, 86, 4)).is_empty(), "{name:?}");
        }
    }
}
