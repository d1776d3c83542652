//! GPUDirect RDMA read the way NCCL decides it (src/graph/paths.cc `ncclTopoCheckGdr`,
//! 2.4-2.29; nccl-model.md 4.7): per NIC, the driver must register GPU memory (nvidia-peermem
//! or DMA-BUF: `GPU Direct RDMA Disabled for HCA`); per GPU and NIC, their PCI distance must be
//! within NCCL_NET_GDR_LEVEL (default PXB: `distance 3 >= 2`, `distance 5 > 3`); per direction,
//! sends (GDR read) are off by default for GPUs before Ampere without NVLink (`read 0`). Each
//! connection without `/GDRDMA` is explained by the first rule its lines show; advice is only
//! for what the log shows.

use super::{Finding, LogInput, Report, Severity, quote, quote_some};
use crate::ReportExt;
use topo_evidence::nccllog::{Connection, Direction, Evidence, NcclLog};
use topo_model::message::Code;
use topo_vocab::PathType;

/// GPU-to-NIC path types through the CPU, beyond NCCL's default GPUDirect RDMA level (PXB).
const BEYOND_PXB: [PathType; 2] = [PathType::Phb, PathType::Sys];

fn lines<'a>(log: &'a NcclLog, all: &[&str]) -> Vec<&'a Evidence> {
    log.notable
        .iter()
        .filter(|e| all.iter().all(|w| e.text.contains(w)))
        .collect()
}

fn conns(l: &LogInput, cs: &[&Connection], n: usize) -> Vec<String> {
    quote_some(&l.name, cs.iter().map(|c| (c.line, c.text.as_str())), n)
}

/// Where the log says NCCL_NET_GDR_LEVEL was set.
fn level_set(l: &LogInput) -> Option<String> {
    l.log
        .env
        .get("NCCL_NET_GDR_LEVEL")
        .map(|(v, e)| format!("{} (value {v})", quote(&l.name, e.line, &e.text)))
}

pub fn run(l: &LogInput, r: &mut Report) {
    let log = l.log;
    let no_gdr: Vec<&Connection> = log
        .connections
        .iter()
        .filter(|c| c.transport.is_net() && !c.transport.is_socket() && !c.gdr)
        .collect();
    let any_gdr = log.connections.iter().any(|c| c.gdr);
    // NET/Socket never does GDR: its `Disabled for HCA 0 'lo'` says nothing about RDMA.
    let hca: Vec<&Evidence> = lines(log, &["GPU Direct RDMA Disabled for HCA"])
        .into_iter()
        .filter(|e| !e.text.contains("NET/Socket"))
        .collect();
    let distance: Vec<&Evidence> = lines(log, &["GPU Direct RDMA Disabled for GPU", "distance"]);
    let read0: Vec<&Evidence> = lines(log, &["GPU Direct RDMA Enabled", "read 0"]);
    if !hca.is_empty() {
        hca_disabled(l, &hca, &no_gdr, any_gdr, r);
        return;
    }
    if !distance.is_empty() {
        by_distance(l, &distance, &no_gdr, r);
        return;
    }
    // The graph's inter-node path type is the GPU-to-NIC path NCCL's GDR rule reads; it
    // matters only between nodes and not for sockets.
    let sockets = log.connections.iter().any(|c| c.transport.is_socket())
        || log
            .notable
            .iter()
            .any(|e| e.text.contains("Using network Socket"));
    let graph_far = log.graphs.iter().find(|g| {
        g.type_inter.is_some_and(|t| BEYOND_PXB.contains(&t))
            && !sockets
            && super::signatures::nodes(log) == super::signatures::Nodes::Many
    });
    if let Some(g) = graph_far.filter(|_| !any_gdr && level_set(l).is_none()) {
        let far = g.type_inter.map_or("", PathType::name);
        let mut ev = vec![quote(&l.name, g.evidence.line, &g.evidence.text)];
        ev.push(format!(
            "the graph's GPU-to-NIC path type is {}: beyond NCCL's default GPUDirect RDMA level (PXB: GPU and NIC under one PCIe switch), NCCL_NET_GDR_LEVEL not set",
            far
        ));
        ev.extend(
            lines(log, &["Topology detection : could not read"])
                .iter()
                .take(2)
                .map(|e| {
                    format!(
                        "{} (PCI link speed unreadable: a virtual machine's PCI tree)",
                        quote(&l.name, e.line, &e.text)
                    )
                }),
        );
        ev.extend(conns(l, &no_gdr, 2));
        r.add(
            Finding::new(Code::GdrDistance, format!("GPUDirect RDMA is off by NCCL's distance rule: the GPU reaches its NIC through {} (the CPU), beyond the default level PXB, so network data is staged through host memory", far))
            .evidence(ev)
            .fix("where the platform supports PCIe peer-to-peer through the CPU, allow it with NCCL_NET_GDR_LEVEL=PHB (or SYS) and measure; in a VM the emulated PCI tree sets this path: give NCCL the host's topology (NCCL_TOPO_FILE) instead; loading nvidia_peermem does not change this rule"),
        );
        return;
    }
    if no_gdr.is_empty() {
        return;
    }
    let sends_only = no_gdr.iter().all(|c| c.direction == Direction::Send);
    let recv_gdr = log
        .connections
        .iter()
        .any(|c| c.gdr && c.direction == Direction::Receive);
    if sends_only && (recv_gdr || !read0.is_empty()) {
        let mut ev = conns(l, &no_gdr, 2);
        ev.extend(quote_some(
            &l.name,
            log.connections
                .iter()
                .filter(|c| c.gdr && c.direction == Direction::Receive)
                .map(|c| (c.line, c.text.as_str())),
            1,
        ));
        ev.extend(
            read0
                .iter()
                .take(2)
                .map(|e| quote(&l.name, e.line, &e.text)),
        );
        r.add(
            Finding::new(Code::GdrReadOff, "sends go without GPUDirect RDMA while receives use it: NCCL's send-side default (GDR read is on only for Ampere-or-newer GPUs or NVLink-connected ones, NCCL_NET_GDR_READ), by design and not a fault")
            .evidence(ev)
            .fix("nothing to fix; NCCL_NET_GDR_READ=1 turns GDR on for sends where the platform's PCIe peer reads are fast (measure before keeping it)"),
        );
        return;
    }
    unexplained(l, &no_gdr, any_gdr, r);
}

fn hca_disabled(
    l: &LogInput,
    hca: &[&Evidence],
    no_gdr: &[&Connection],
    any_gdr: bool,
    r: &mut Report,
) {
    let mut ev = quote_some(&l.name, hca.iter().map(|e| (e.line, e.text.as_str())), 2);
    ev.extend(conns(l, no_gdr, 3));
    if let Some(s) = level_set(l) {
        ev.push(format!(
            "{s}: the level rule is not what turned it off, so this setting cannot turn it on"
        ));
    }
    let fix = if any_gdr {
        "other connections of this job do use GPUDirect RDMA, so the driver works on some nodes: compare those nodes' nvidia-peermem (`lsmod | grep nvidia_peermem`, /sys/kernel/mm/memory_peers/nv_mem) and DMA-BUF support with the failing ones"
    } else {
        "make the NIC able to register GPU memory: check nvidia-peermem is loaded and registered (`lsmod | grep nvidia_peermem`, /sys/kernel/mm/memory_peers/nv_mem exists) or use DMA-BUF (open kernel driver, Linux 5.12+, NCCL_DMABUF_ENABLE not 0); NCCL_NET_GDR_LEVEL cannot override this check"
    };
    r.add(
        Finding::new(Code::GdrUnavailable, "GPUDirect RDMA is disabled for the NIC itself (`GPU Direct RDMA Disabled for HCA`): the NIC driver cannot register GPU memory (nvidia-peermem not registered, no DMA-BUF), which NCCL_NET_GDR_LEVEL cannot override; network data is staged through host memory")
        .evidence(ev)
        .fix(fix),
    );
}

fn by_distance(l: &LogInput, distance: &[&Evidence], no_gdr: &[&Connection], r: &mut Report) {
    let mut ev = quote_some(
        &l.name,
        distance.iter().map(|e| (e.line, e.text.as_str())),
        2,
    );
    // `(distance 3 >= 2)` (2.4-2.5) or `(distance 5 > 3)`: the GPU-NIC distance, the level.
    let rule = distance[0]
        .text
        .split_once("(distance ")
        .map(|(_, r)| {
            r.trim_end_matches(|c: char| c == ')' || c.is_whitespace())
                .trim_end_matches(')')
        })
        .unwrap_or("");
    ev.push(match level_set(l) {
        Some(s) => format!("distance {rule}: the level in force is {s}"),
        None => format!(
            "distance {rule}: the level in force is NCCL's default (NCCL_NET_GDR_LEVEL not set): GPU and NIC under one PCIe switch"
        ),
    });
    ev.extend(conns(l, no_gdr, 2));
    r.add(
        Finding::new(Code::GdrDistance, "GPUDirect RDMA is off by NCCL's distance rule: the GPU and its NIC are farther apart on PCIe than NCCL_NET_GDR_LEVEL allows, so network data is staged through host memory")
        .evidence(ev)
        .fix("where the server supports PCIe peer-to-peer across that path (ask its vendor; servers not certified for GPUDirect often do not), raise the level: NCCL_NET_GDR_LEVEL=PHB (or 3 in the old numbering) and measure; otherwise put the NIC under the GPU's PCIe switch; loading nvidia_peermem does not change this rule"),
    );
}

/// NET without GDRDMA and no line saying why.
fn unexplained(l: &LogInput, no_gdr: &[&Connection], any_gdr: bool, r: &mut Report) {
    let log = l.log;
    let mut ev = conns(l, no_gdr, 3);
    // A host whose local pairs mix P2P and SHM is PCIe-based: its NICs are rarely under
    // each GPU's switch, and NCCL's defaults then leave GDR off.
    let pcie_host = super::signatures::mixed_local_pairs(log).is_some();
    if any_gdr {
        ev.push("other connections of this job use GPUDirect RDMA (`/GDRDMA`): the driver side works; these GPUs are farther from their NIC".into());
        r.add(
            Finding::at(Code::GdrDistance, Severity::Info, "some network connections use GPUDirect RDMA and others do not: NCCL enables it per GPU and NIC by their PCIe distance (NCCL_NET_GDR_LEVEL), so GPUs far from the NIC stage through host memory")
            .evidence(ev)
            .fix("nothing is broken; to use GDR on the far GPUs raise NCCL_NET_GDR_LEVEL where the platform supports it, or let NCCL start rings at the GPUs near the NIC (its default)"),
        );
        return;
    }
    if pcie_host {
        ev.push("the same host's GPUs mix P2P and SHM: a PCIe platform, where GPUs and NICs seldom share a switch".into());
        r.add(
            Finding::at(Code::GdrDistance, Severity::Info, "network connections without GPUDirect RDMA on a PCIe platform: NCCL's defaults enable GDR only for a GPU and NIC under one PCIe switch (NCCL_NET_GDR_LEVEL) and, before Ampere, not for sends, so this is expected")
            .evidence(ev)
            .fix("nothing to fix; NCCL_DEBUG_SUBSYS=INIT,NET prints NCCL's GDR decision per GPU; NCCL_NET_GDR_LEVEL=PHB allows it across the CPU where the platform supports it"),
        );
        return;
    }
    ev.push("the log does not show NCCL's GDR decision (`GPU Direct RDMA ... for HCA` or `... for GPU ... distance` lines; NCCL_DEBUG_SUBSYS=INIT,NET prints them)".into());
    r.add(
        Finding::new(Code::GdrUnavailable, "network transfers do not use GPUDirect RDMA: data is staged through host memory")
        .evidence(ev)
        .fix("rerun with NCCL_DEBUG_SUBSYS=INIT,NET to see which rule turned it off: `Disabled for HCA` means the driver (load nvidia_peermem, or DMA-BUF: kernel ≥ 5.12, open driver ≥ 515); `distance` means the PCIe path (NCCL_NET_GDR_LEVEL, or a NIC under the GPU's switch)"),
    );
}
