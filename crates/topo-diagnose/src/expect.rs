//! This machine against a reference (`--expect PROFILE|SNAPSHOT`): GPUs and NICs present,
//! NVLink lanes, PCIe generation and width, NUMA placement, GPU–NIC pairing. Host 0 of each;
//! GPUs are matched in NVML index order.

use super::{Finding, Report, Severity};
use crate::ReportExt;
use petgraph::graph::NodeIndex;
use topo_model::message::Code;
use topo_model::{NodeKind, Topology, bw};

fn host0_gpus(t: &Topology) -> Vec<NodeIndex> {
    let mut g: Vec<NodeIndex> = t
        .gpus()
        .into_iter()
        .filter(|&g| t.node(g).host == 0)
        .collect();
    g.sort_by_key(|&n| t.gpu(n).map(|x| x.dev).unwrap_or(i32::MAX));
    g
}

fn lanes(t: &Topology, g: NodeIndex) -> u32 {
    t.nvlinks(g).iter().map(|x| x.1).sum()
}

/// Generation and width the link runs at: the negotiated values when known.
fn link(t: &Topology, g: NodeIndex) -> (Option<u32>, Option<u32>) {
    let Some(p) = t.node(g).pcie() else {
        return (None, None);
    };
    let speed = p.cur_speed.as_deref().or(p.speed.as_deref());
    let gen_ = speed.and_then(bw::pcie_gts).and_then(bw::pcie_generation);
    (gen_, p.cur_width.or(p.width).filter(|&w| w > 0))
}

/// Whether a NIC shares a PCIe switch with the GPU (same rail).
fn has_rail(t: &Topology, g: NodeIndex) -> bool {
    let up = |n: NodeIndex| {
        let mut v = vec![];
        let mut cur = t.node(n).parent;
        while let Some(p) = cur {
            if matches!(t.node(p).kind, NodeKind::Cpu(_)) || v.len() > 64 {
                break;
            }
            v.push(p);
            cur = t.node(p).parent;
        }
        v
    };
    let mine = up(g);
    t.nics()
        .filter(|&n| t.node(n).host == t.node(g).host)
        .any(|n| up(n).iter().any(|a| mine.contains(a)))
}

pub fn run(have: &Topology, name: &str, want: &Topology, r: &mut Report) {
    r.checked(format!("against the reference {name}"));
    let (hg, wg) = (host0_gpus(have), host0_gpus(want));
    let count = |t: &Topology| t.nets().iter().filter(|&&n| t.node(n).host == 0).count();
    let mut missing = vec![];
    if hg.len() < wg.len() {
        missing.push(format!("{} GPUs, {name} has {}", hg.len(), wg.len()));
    }
    if count(have) < count(want) {
        missing.push(format!(
            "{} network ports, {name} has {}",
            count(have),
            count(want)
        ));
    }
    if !missing.is_empty() {
        r.add(
            Finding::new(Code::DeviceMissing, format!("devices are missing compared with {name}"),
            )
            .evidence(missing)
            .fix("check `nvidia-smi -L`, `lspci | grep -i nvidia`, `ibdev2netdev`: a device that fell off the bus needs a reset or service"),
        );
    }
    let (mut nvl, mut pcie, mut numa, mut rail) = (vec![], vec![], vec![], vec![]);
    for (i, (&h, &w)) in hg.iter().zip(&wg).enumerate() {
        let (lh, lw) = (lanes(have, h), lanes(want, w));
        if lh < lw {
            nvl.push(format!("GPU{i}: {lh} NVLink lanes, {name} has {lw}"));
        }
        let ((gh, wh), (gw, ww)) = (link(have, h), link(want, w));
        if let (Some(a), Some(b)) = (gh, gw)
            && a < b
        {
            pcie.push(format!("GPU{i}: PCIe Gen{a}, {name} has Gen{b}"));
        }
        if let (Some(a), Some(b)) = (wh, ww)
            && a < b
        {
            pcie.push(format!("GPU{i}: PCIe x{a}, {name} has x{b}"));
        }
        let (nh, nw) = (have.numa_of(h), want.numa_of(w));
        if nh != nw && nh >= 0 && nw >= 0 {
            numa.push(format!("GPU{i}: NUMA node {nh}, {name} has {nw}"));
        }
        if has_rail(want, w) && !has_rail(have, h) {
            rail.push(format!(
                "GPU{i}: no NIC under its PCIe switch, {name} has one"
            ));
        }
    }
    let mut add = |id: Code, sev: Severity, title: String, ev: Vec<String>, fix: &str| {
        if !ev.is_empty() {
            r.add(Finding::at(id, sev, title).evidence(ev).fix(fix));
        }
    };
    add(
        Code::NvlinkDegraded,
        Severity::Error,
        format!("NVLink lanes are missing compared with {name}"),
        nvl,
        "check `nvidia-smi nvlink -s`; reset the GPU or have the board serviced",
    );
    add(
        topo_model::pcie_judge::DOWNTRAINED,
        Severity::Error,
        format!("PCIe links are slower or narrower than on {name}"),
        pcie,
        "reseat the card, check BIOS slot settings; `lspci -vv` LnkSta against LnkCap",
    );
    add(
        Code::NumaMismatch,
        Severity::Warning,
        format!("GPUs sit on other NUMA nodes than on {name}"),
        numa,
        "check the BIOS NUMA settings (NPS, sub-NUMA clustering) against the reference",
    );
    add(
        Code::RailMisaligned,
        Severity::Warning,
        format!("GPU–NIC pairing differs from {name}"),
        rail,
        "cable and slot NICs as on the reference: one NIC under each GPU's PCIe switch",
    );
}
