//! What shape a host's NVLink has: all through NVSwitch, every pair direct, a mesh, islands
//! joined by PCIe, none, or unknown. One rule and one code per shape (issue 24): `topo show`
//! states every shape in its summary; `topo plan` and `topo diagnose` state the ones that are
//! problems (islands, unknown) from here too. Uneven or missing lanes are
//! [`crate::nvlink_judge`]'s.

use crate::message::{Code, Finding, Severity};
use crate::nic_judge::Names;
use crate::pci_class::{PciClass, PciClasses};
use crate::{LinkKind, NodeKind, NvlinkInfo, Topology};
use petgraph::graph::NodeIndex;
use std::collections::BTreeMap;

/// What to do about NVLinks to GPUs outside the source (`nvlink-outside`).
pub const OUTSIDE_FIX: &str = "dump the topology from a job that uses every GPU of the node (NCCL_TOPO_DUMP_FILE; NCCL 2.21 and later fuse the ranks' views into one file), or topo snapshot the machine";

/// What an NVLink's bandwidth is said as where the GPU generation is unknown.
pub const SPEED_UNKNOWN: &str = "speed unknown: the source names no GPU model";

/// What a GPU's NVLinks reach, summed over the model's per-chip links.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NvlinkSummary {
    /// `Some(reason)` when the source could not enumerate NVLinks.
    pub unknown: Option<String>,
    pub lanes: u32,
    pub bw: f64,
    pub switch_lanes: u32,
    pub switch_bw: f64,
    /// NVSwitch chips reached, with lanes to each, in model order.
    pub switches: Vec<(NodeIndex, u32)>,
    /// Peer GPUs reached directly: (gpu, lanes, bw).
    pub peers: Vec<(NodeIndex, u32, f64)>,
    /// Lanes to GPUs the source names but does not hold (counted in `lanes`, not in `bw`:
    /// NCCL's graph has no node to join them to).
    pub outside: Vec<(crate::BusId, u32)>,
    pub cpu_lanes: u32,
    /// Whether the bandwidths rest on a known GPU generation (its compute capability, stated
    /// or read): NCCL prices a lane by it, so without it the lanes are known and their speed
    /// is not (a matrix's NV4 may be 4 lanes of any NVLink generation).
    pub speed_known: bool,
}

/// [`NvlinkSummary`] of one GPU.
pub fn summary(topo: &Topology, gpu: NodeIndex) -> NvlinkSummary {
    let mut s = NvlinkSummary {
        speed_known: topo.gpu(gpu).is_some_and(|g| g.sm.is_some_and(|x| x > 0)),
        ..Default::default()
    };
    if let Some(g) = topo.gpu(gpu) {
        if let NvlinkInfo::Unknown(reason) = &g.nvlink {
            s.unknown = Some(reason.clone());
        }
        for o in &g.nvlink_outside {
            s.lanes += o.lanes;
            s.outside.push((o.target, o.lanes));
        }
    }
    for (to, lanes, bw) in topo.nvlinks(gpu) {
        s.lanes += lanes;
        s.bw += bw;
        match &topo.node(to).kind {
            NodeKind::NvSwitch(_) => {
                s.switch_lanes += lanes;
                s.switch_bw += bw;
                s.switches.push((to, lanes));
            }
            NodeKind::Gpu(_) => s.peers.push((to, lanes, bw)),
            _ => s.cpu_lanes += lanes,
        }
    }
    s
}

/// NVLink lanes between two GPUs as `nvidia-smi topo -m` counts them (`NV#`): direct lanes, or
/// through NVSwitch the smaller of the two GPUs' switch lane counts.
pub fn lanes_between(topo: &Topology, a: NodeIndex, b: NodeIndex) -> u32 {
    let direct = |x: NodeIndex, y: NodeIndex| -> u32 {
        topo.graph
            .edges_connecting(x, y)
            .filter(|e| e.weight().kind == LinkKind::NvLink)
            .map(|e| e.weight().lanes)
            .sum()
    };
    let d = direct(a, b).max(direct(b, a));
    if d > 0 {
        return d;
    }
    let (sa, sb) = (summary(topo, a).switch_lanes, summary(topo, b).switch_lanes);
    if sa > 0 && sb > 0 { sa.min(sb) } else { 0 }
}

/// The shape of one host's NVLink (`gpus`: that host's GPUs, in the view's order): unknown
/// GPUs first (a warning), then the shape of the GPUs whose NVLinks are known.
pub fn verdicts(
    topo: &Topology,
    gpus: &[NodeIndex],
    names: &impl Names,
    classes: &PciClasses,
) -> Vec<Finding> {
    let sums: Vec<(NodeIndex, NvlinkSummary)> =
        gpus.iter().map(|&g| (g, summary(topo, g))).collect();
    let unknown: Vec<NodeIndex> = sums
        .iter()
        .filter(|(_, s)| s.unknown.is_some())
        .map(|(g, _)| *g)
        .collect();
    let mut out = vec![];
    if !unknown.is_empty() {
        let mut reasons: Vec<String> = sums.iter().filter_map(|(_, s)| s.unknown.clone()).collect();
        reasons.sort();
        reasons.dedup();
        out.push(
            Finding::new(
                Code::NvlinkUnknown,
                format!(
                    "NVLink unknown for {} ({}): the source cannot tell which NVLinks exist",
                    names.gpus(&unknown),
                    reasons.join("; ")
                ),
            )
            .evidence(reasons),
        );
        if unknown.len() == gpus.len() {
            return out;
        }
    }
    let known: Vec<&(NodeIndex, NvlinkSummary)> =
        sums.iter().filter(|(_, s)| s.unknown.is_none()).collect();
    let outside = outside_verdict(topo, &known, names);
    let any_outside = outside.is_some();
    out.extend(outside);
    if gpus.len() == 1 {
        return out;
    }
    if let Some(v) = nvswitch(&known) {
        out.extend(v);
        return out;
    }
    let shape = direct_shape(topo, gpus, names, classes);
    // With lanes to GPUs the file lacks, "no NVLink" and "islands joined by PCIe" speak of a
    // machine the file does not hold (the missing GPUs may be what joins them).
    if !(any_outside && matches!(shape.code, Code::NvlinkNone | Code::NvlinkIslands)) {
        out.push(shape);
    }
    out
}

/// GPUs with NVLinks to GPUs the source names but does not hold (`nvlink-outside`): the
/// file is part of a machine, so its NVLink is more than the graph shows. NCCL drops such a
/// link too (`ncclTopoAddNvLinks`, src/graph/topo.cc, v2.28.9-1: no node for the target).
fn outside_verdict(
    topo: &Topology,
    known: &[&(NodeIndex, NvlinkSummary)],
    names: &impl Names,
) -> Option<Finding> {
    let with: Vec<&(NodeIndex, NvlinkSummary)> = known
        .iter()
        .copied()
        .filter(|(_, s)| !s.outside.is_empty())
        .collect();
    if with.is_empty() {
        return None;
    }
    let mut evidence = vec![];
    let mut targets = std::collections::BTreeSet::new();
    let mut lanes = 0;
    for (g, s) in &with {
        for (t, l) in &s.outside {
            lanes += l;
            targets.insert(*t);
            let gpu = topo
                .gpu(*g)
                .map_or_else(String::new, |x| format!("GPU{} ({})", x.dev, x.busid));
            evidence.push(format!(
                "{gpu}: {l} NVLink lanes to GPU {t}, which the source does not hold"
            ));
        }
    }
    let gpus: Vec<NodeIndex> = with.iter().map(|(g, _)| *g).collect();
    let text = format!(
        "{} {} NVLink to {} GPU{} outside the source ({lanes} lane{} in all): the source holds part of the machine (one rank's dump or a trimmed file); the lanes are real but NCCL's graph of this file leaves them out, so the machine has more NVLink than this view shows",
        names.gpus(&gpus),
        if gpus.len() == 1 { "has" } else { "have" },
        targets.len(),
        if targets.len() == 1 { "" } else { "s" },
        if lanes == 1 { "" } else { "s" },
    );
    Some(
        Finding::new(Code::NvlinkOutside, text)
            .evidence(evidence)
            .fix(OUTSIDE_FIX),
    )
}

/// Every GPU with known NVLinks on NVSwitch: the same lanes everywhere is `nvswitch-full`
/// (uneven lanes are [`crate::nvlink_judge`]'s, so nothing is said here). `None` when some
/// GPU reaches its peers otherwise.
fn nvswitch(known: &[&(NodeIndex, NvlinkSummary)]) -> Option<Option<Finding>> {
    if known.is_empty() || known.iter().any(|(_, s)| s.switch_lanes == 0) {
        return None;
    }
    let min = known.iter().map(|(_, s)| s.switch_lanes).min().unwrap_or(0);
    let max = known.iter().map(|(_, s)| s.switch_lanes).max().unwrap_or(0);
    let bw = known
        .iter()
        .map(|(_, s)| s.switch_bw)
        .fold(f64::INFINITY, f64::min);
    let speed = if known.iter().all(|(_, s)| s.speed_known) {
        format!("{bw:.1} GB/s")
    } else {
        SPEED_UNKNOWN.to_string()
    };
    Some((min == max).then(|| {
        Finding::new(
            Code::NvswitchFull,
            format!(
                "{} GPUs fully connected through NVSwitch, {min} NVLink lanes each ({speed})",
                known.len()
            ),
        )
    }))
}

/// The pairs of a host without NVSwitch: each pair NVLinked (with its lanes) or over PCIe
/// (with its class), and the islands NVLink joins (union-find over host positions).
struct Pairs {
    linked: Vec<String>,
    lanes: Vec<u32>,
    pcie: Vec<PciClass>,
    islands: Vec<Vec<NodeIndex>>,
}

fn pairs(topo: &Topology, gpus: &[NodeIndex], names: &impl Names, c: &PciClasses) -> Pairs {
    fn root(v: &mut [usize], mut x: usize) -> usize {
        while v[x] != x {
            v[x] = v[v[x]];
            x = v[x];
        }
        x
    }
    let mut island: Vec<usize> = (0..gpus.len()).collect();
    let (mut linked, mut lanes, mut pcie) = (vec![], vec![], vec![]);
    for (i, &a) in gpus.iter().enumerate() {
        for (j, &b) in gpus.iter().enumerate().skip(i + 1) {
            let nv = lanes_between(topo, a, b);
            if nv > 0 {
                linked.push(format!("{}–{} NV{nv}", names.label(a), names.label(b)));
                lanes.push(nv);
                let (ra, rb) = (root(&mut island, i), root(&mut island, j));
                island[ra] = rb;
            } else {
                pcie.push(c.between(topo, a, b));
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<NodeIndex>> = BTreeMap::new();
    for (i, &g) in gpus.iter().enumerate() {
        groups.entry(root(&mut island, i)).or_default().push(g);
    }
    let mut islands: Vec<Vec<NodeIndex>> = groups.into_values().collect();
    islands.sort_by_key(|v| v.iter().map(|&g| names.position(g)).min());
    Pairs {
        linked,
        lanes,
        pcie,
        islands,
    }
}

/// `PHB`, or `best PIX, worst SYS`.
fn span(v: &[PciClass]) -> String {
    match (v.iter().min(), v.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => lo.name().to_string(),
        (Some(lo), Some(hi)) => format!("best {}, worst {}", lo.name(), hi.name()),
        _ => String::new(),
    }
}

/// Direct NVLink pairs (bridges, hybrid cube mesh) or none at all.
fn direct_shape(
    topo: &Topology,
    gpus: &[NodeIndex],
    names: &impl Names,
    c: &PciClasses,
) -> Finding {
    let p = pairs(topo, gpus, names, c);
    let n = gpus.len();
    // Few pairs are worth naming; a mesh is summarised by its lane range.
    let detail = if p.linked.len() <= 6 {
        p.linked.join(", ")
    } else {
        let lo = p.lanes.iter().min().copied().unwrap_or(0);
        let hi = p.lanes.iter().max().copied().unwrap_or(0);
        if lo == hi {
            format!("NV{lo} each")
        } else {
            format!("NV{lo}–NV{hi}")
        }
    };
    let pcie = span(&p.pcie);
    if p.linked.is_empty() {
        let text = format!("No NVLink: GPU↔GPU traffic goes over PCIe ({pcie})");
        return Finding::new(Code::NvlinkNone, text);
    }
    if p.pcie.is_empty() {
        let text = format!("All {n} GPUs directly NVLinked: {detail}");
        return Finding::new(Code::NvlinkAllDirect, text);
    }
    if p.islands.len() == 1 {
        let text = format!(
            "NVLink mesh: {} of {} GPU pairs directly linked ({detail}), the rest use PCIe ({pcie}); every GPU reaches the others over NVLink",
            p.linked.len(),
            n * (n - 1) / 2
        );
        return Finding::new(Code::NvlinkMesh, text).evidence(p.linked);
    }
    let named: Vec<String> = p.islands.iter().map(|v| names.gpus(v)).collect();
    let text = format!(
        "NVLink islands: {} ({detail}); traffic between islands uses PCIe ({pcie}), so a ring over all GPUs crosses PCIe",
        named.join("; ")
    );
    Finding::new(Code::NvlinkIslands, text).evidence(p.linked)
}

/// GPUs by NVML index, for documents without a view model (plan, diagnose): `GPU3`,
/// `GPUs 0–3, 6`.
pub struct DevNames<'a>(pub &'a Topology);

impl Names for DevNames<'_> {
    fn gpus(&self, gpus: &[NodeIndex]) -> String {
        let mut devs: Vec<i32> = gpus
            .iter()
            .filter_map(|&g| self.0.gpu(g))
            .map(|g| g.dev)
            .collect();
        devs.sort_unstable();
        let mut runs: Vec<(i32, i32)> = vec![];
        for d in devs {
            match runs.last_mut() {
                Some((_, hi)) if *hi + 1 == d => *hi = d,
                _ => runs.push((d, d)),
            }
        }
        let text: Vec<String> = runs
            .iter()
            .map(|&(lo, hi)| {
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}–{hi}")
                }
            })
            .collect();
        let word = if gpus.len() == 1 { "GPU" } else { "GPUs" };
        format!("{word} {}", text.join(", "))
    }
    fn label(&self, n: NodeIndex) -> String {
        self.0.gpu(n).map_or_else(
            || format!("node {}", n.index()),
            |g| format!("GPU{}", g.dev),
        )
    }
    fn position(&self, n: NodeIndex) -> usize {
        self.0.gpu(n).map_or(usize::MAX, |g| g.dev.max(0) as usize)
    }
}

/// [`verdicts`] for every host, the problems only (plan and diagnose), GPUs named by
/// [`DevNames`]: the same verdict on several hosts once, with the number of hosts. Copies of
/// one machine are judged once.
pub fn problems(topo: &Topology) -> Vec<Finding> {
    let names = DevNames(topo);
    let (hosts, copies) = match topo.copies() {
        Some(c) => (c.per_copy, c.count),
        None => (topo.host_count(), 1),
    };
    // One copy's hosts answer for its unchanged copies' (`Topology::standing`): at 16,384
    // hosts with a fault on one, judging each was a fortieth of a plan.
    let standing = topo.standing();
    let (gpus, classes) = match &standing {
        Some(s) => (
            topo.gpus_among(s.asked_nodes()),
            PciClasses::among(topo, s.asked_nodes()),
        ),
        None => (topo.gpus(), PciClasses::of(topo)),
    };
    let mut by_host = vec![vec![]; hosts];
    for g in gpus {
        if let Some(v) = by_host.get_mut(topo.node(g).host as usize) {
            v.push(g);
        }
    }
    let mut merged = crate::message::OnHosts::default();
    let mut answers: std::collections::HashMap<usize, Vec<Finding>> = Default::default();
    for (h, gpus) in by_host.iter().enumerate() {
        let by = standing.as_ref().map_or(h, |s| s.answered_by(h));
        let found = match answers.get(&by) {
            Some(vs) if by != h => vs.clone(),
            _ if gpus.is_empty() => continue,
            _ => {
                let vs: Vec<Finding> = verdicts(topo, gpus, &names, &classes)
                    .into_iter()
                    .filter(|v| v.severity >= Severity::Warning)
                    .collect();
                if standing.is_some() {
                    answers.insert(h, vs.clone());
                }
                vs
            }
        };
        for v in found {
            merged.add(v, copies);
        }
    }
    merged.into_findings()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{hgx, pcie_box, two_gpus_unknown_nvlink};

    fn codes(v: &[Finding]) -> Vec<(Code, Severity)> {
        v.iter().map(|v| (v.code, v.severity)).collect()
    }

    fn shape(t: &Topology) -> Vec<Finding> {
        verdicts(t, &t.gpus(), &DevNames(t), &PciClasses::of(t))
    }

    #[test]
    fn each_shape_has_its_code() {
        let t = hgx(8, 90);
        assert_eq!(codes(&shape(&t)), [(Code::NvswitchFull, Severity::Info)]);
        let t = pcie_box("Intel", 25, 1, false, false);
        let v = shape(&t);
        assert_eq!(codes(&v), [(Code::NvlinkNone, Severity::Info)]);
        assert!(v[0].text.contains("best PIX, worst SYS"), "{}", v[0].text);
        let t = two_gpus_unknown_nvlink();
        assert_eq!(
            codes(&shape(&t)),
            [(Code::NvlinkUnknown, Severity::Warning)]
        );
    }

    #[test]
    fn bridged_pairs_are_islands_until_a_link_joins_them() {
        let mut t = pcie_box("Intel", 25, 1, false, false);
        let g = t.gpus();
        for (a, b) in [(0, 1), (2, 3)] {
            t.add_nvlink(g[a], g[b], 4);
            t.add_nvlink(g[b], g[a], 4);
        }
        let v = shape(&t);
        assert_eq!(codes(&v), [(Code::NvlinkIslands, Severity::Warning)]);
        assert!(
            v[0].text.starts_with("NVLink islands: GPUs 0–1; GPUs 2–3"),
            "{}",
            v[0].text
        );
        assert_eq!(v[0].evidence, ["GPU0–GPU1 NV4", "GPU2–GPU3 NV4"]);
        t.add_nvlink(g[1], g[2], 2);
        t.add_nvlink(g[2], g[1], 2);
        assert_eq!(codes(&shape(&t)), [(Code::NvlinkMesh, Severity::Info)]);
    }

    #[test]
    fn problems_leave_infos_out_and_judge_copies_once() {
        assert!(problems(&hgx(8, 90).replicate(3)).is_empty());
        let mut t = pcie_box("Intel", 25, 1, false, false);
        let g = t.gpus();
        t.add_nvlink(g[0], g[1], 4);
        t.add_nvlink(g[1], g[0], 4);
        let v = problems(&t.replicate(5));
        assert_eq!(codes(&v), [(Code::NvlinkIslands, Severity::Warning)]);
        assert!(v[0].text.ends_with("(on 5 hosts)"), "{}", v[0].text);
    }
}
