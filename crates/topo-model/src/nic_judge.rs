//! Where a host's NICs sit against its GPUs, which `topo show` (the summary) and `topo
//! diagnose` (its findings) state alike (issue 24): before, show said `nic-missing`,
//! `nic-numa-remote` or `nic-none-near` by one rule and diagnose `rail-misaligned` by another.
//! The rule is here; each view only names the GPUs and NICs its own way ([`Names`]).
//!
//! A NIC is near a GPU when they share a PCIe switch: their lowest common ancestor is not a
//! CPU (nvidia-smi's PIX or PXB; PHB, NODE and SYS cross the CPU).

use crate::message::{Code, Finding, Severity};
use crate::{NodeKind, Topology};
use petgraph::graph::NodeIndex;
use std::collections::BTreeMap;

/// How a view names what the verdicts mention.
pub trait Names {
    /// `GPU 3`, `GPUs 4–7`: GPUs as the view numbers them.
    fn gpus(&self, gpus: &[NodeIndex]) -> String;
    /// `GPU0`, `mlx5_7`.
    fn label(&self, n: NodeIndex) -> String;
    /// A GPU's or NIC's position in the view (pairings that cross the numbering are named).
    fn position(&self, n: NodeIndex) -> usize;
}

/// Names for documents without a view model of their own (plan, diagnose): a GPU with its
/// bus id, `GPU3 (0000:1b:00.0)`; a port by its name.
pub struct PlainNames<'a>(pub &'a Topology);

impl Names for PlainNames<'_> {
    fn gpus(&self, gpus: &[NodeIndex]) -> String {
        let names: Vec<String> = gpus.iter().map(|&g| self.label(g)).collect();
        names.join(", ")
    }
    fn label(&self, n: NodeIndex) -> String {
        match self.0.net(n) {
            Some(x) => x.name.clone(),
            None => crate::pcie_judge::label(self.0, n),
        }
    }
    fn position(&self, n: NodeIndex) -> usize {
        n.index()
    }
}

/// One host's GPUs and NIC columns (network ports, then NICs without a known port), and how
/// many CPU sockets it has.
pub struct Host<'a> {
    pub gpus: &'a [NodeIndex],
    pub nics: &'a [NodeIndex],
    pub sockets: usize,
}

/// Whether `a` and `b` (GPUs, NICs or ports) share a PCIe switch.
pub fn near(topo: &Topology, a: NodeIndex, b: NodeIndex) -> bool {
    let (a, b) = (topo.pci_device(a), topo.pci_device(b));
    a == b
        || topo
            .common_ancestor(a, b)
            .is_some_and(|lca| !matches!(topo.node(lca).kind, NodeKind::Cpu(_)))
}

fn c2c_attached(topo: &Topology, g: NodeIndex) -> bool {
    topo.graph
        .edges_directed(g, petgraph::Direction::Outgoing)
        .any(|e| e.weight().kind == crate::LinkKind::C2c)
}

fn numa(topo: &Topology, n: NodeIndex) -> Option<i32> {
    let v = topo.numa_of(topo.pci_device(n));
    (v >= 0).then_some(v)
}

/// The placement verdicts of one host: how GPUs and NICs pair (info) or which GPUs lack a
/// near NIC (warnings), and GPUs on a socket without any NIC.
pub fn verdicts(topo: &Topology, host: &Host, names: &impl Names) -> Vec<Finding> {
    // A fused device without a bus id hangs off a CPU for want of a PCI parent: where its
    // ports sit is not in the source, so no placement verdict rests on it.
    let placed: Vec<NodeIndex> = host
        .nics
        .iter()
        .copied()
        .filter(|&n| !unplaced_fused(topo, n))
        .collect();
    let host = &Host {
        gpus: host.gpus,
        nics: &placed,
        sockets: host.sockets,
    };
    if host.nics.is_empty() || host.gpus.is_empty() {
        return vec![];
    }
    // NCCL's Socket transport copies through host memory whatever the PCIe layout: where
    // every port is one, NIC placement changes nothing.
    let by_socket = |&n: &NodeIndex| matches!(&topo.node(n).kind, NodeKind::Net(x) if x.socket);
    if host.nics.iter().all(by_socket) {
        return vec![];
    }
    // GPUs on C2C (Grace Hopper, Grace Blackwell) reach the CPU's NICs over C2C by design
    // (NCCL's P2C paths, NVIDIA/nccl v2.28.9-1 src/graph/paths.cc): no PCIe switch to share.
    if host.gpus.iter().all(|&g| c2c_attached(topo, g)) {
        return vec![];
    }
    // GPUs whose NUMA node has no NIC at all; said once, not again as "no NIC on its switch".
    let nic_numas: Vec<i32> = host.nics.iter().filter_map(|&n| numa(topo, n)).collect();
    let lonely: Vec<NodeIndex> = if host.sockets > 1 && !nic_numas.is_empty() {
        let far = |g: &NodeIndex| numa(topo, *g).is_some_and(|x| !nic_numas.contains(&x));
        host.gpus.iter().copied().filter(far).collect()
    } else {
        vec![]
    };
    let per_gpu: Vec<(NodeIndex, Vec<NodeIndex>)> = host
        .gpus
        .iter()
        .map(|&g| {
            (
                g,
                host.nics
                    .iter()
                    .copied()
                    .filter(|&n| near(topo, g, n))
                    .collect(),
            )
        })
        .collect();
    let mut out = vec![pairing(&per_gpu, &lonely, host, names)]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
    out.extend(socket(topo, &lonely, names));
    out
}

/// A fused NIC the source gives no bus id: its ports' PCIe places are unknown.
fn unplaced_fused(topo: &Topology, n: NodeIndex) -> bool {
    topo.net(n)
        .is_some_and(|x| crate::net_kind::fused_ports(&x.name).is_some())
        && topo.node(topo.pci_device(n)).busid().is_none()
}

/// Fused NICs among `nets` (`nic-fused`, info): a device NCCL made of several ports (named
/// `mlx5_0+mlx5_1`, [`crate::net_kind::fused_ports`]) is one NET device to NCCL, with the
/// ports' speeds summed, not an unknown device of that name. Each name once.
pub fn fused_on(topo: &Topology, nets: &[NodeIndex]) -> Option<Finding> {
    fused_among(topo, nets, true)
}

/// [`fused_on`] with or without the ports of one card listed apart (`cards`): those concern
/// the plan's NIC choice, which show and plan describe; diagnose states only a device the
/// source itself names fused.
fn fused_among(topo: &Topology, nets: &[NodeIndex], cards: bool) -> Option<Finding> {
    let mut seen: BTreeMap<&str, (Option<u64>, bool)> = BTreeMap::new();
    for &n in nets {
        if let Some(net) = topo.net(n)
            && crate::net_kind::fused_ports(&net.name).is_some()
        {
            let unplaced = unplaced_fused(topo, n);
            seen.entry(net.name.as_str())
                .or_insert((net.speed_mbps, unplaced));
        }
    }
    let cards = if cards {
        fusable_cards(topo, nets)
    } else {
        vec![]
    };
    if seen.is_empty() && cards.is_empty() {
        return None;
    }
    let mut said: Vec<String> = seen
        .iter()
        .filter_map(|(name, (speed, unplaced))| {
            let t = crate::net_kind::fused_text(name, *speed)?;
            let place = if *unplaced {
                " (the source gives it no bus id, so where its ports sit on PCIe is unknown)"
            } else {
                ""
            };
            Some(format!("{name} is {t}{place}"))
        })
        .collect();
    let listed = said.len();
    said.extend(cards.iter().map(|(card, ports, speed)| {
        let sum = match speed {
            Some(m) if m.is_multiple_of(1000) => format!(", {} Gb/s", m / 1000),
            Some(m) => format!(", {} Gb/s", *m as f64 / 1000.0),
            None => String::new(),
        };
        format!(
            "{} are ports of one card ({card}), which NCCL 2.20 and later fuse at run time into one device, {}{sum} (their speeds summed), where both are up with one link layer; the source lists the physical ports (as NCCL's own dump does), and the plan joins them as NCCL does (its IB transport, from 2.20)",
            ports.join(" and "),
            ports.join("+"),
        )
    }));
    if listed == 0 {
        let text = format!(
            "{}: NCCL_NET_MERGE_LEVEL (default PORT: the ports of one card) decides the fusion; NCCL_NET_MERGE_LEVEL=LOC or NCCL_IB_MERGE_NICS=0 keeps them apart",
            said.join("; ")
        );
        return Some(
            Finding::new(Code::NicFused, text)
                .evidence(said)
                .fix("none needed; NCCL_NET_MERGE_LEVEL=LOC (or NCCL_IB_MERGE_NICS=0) keeps the ports apart where each must be its own device"),
        );
    }
    // NCCL 2.20's IB plugin joins a card's ports (ncclIbFindMatchingDev, net_ib.cc); from 2.21
    // NCCL_NET_MERGE_LEVEL does (default PORT: the ports of one card), ncclTopoMakeVNics in
    // src/graph/topo.cc, and LOC turns it off.
    let text = format!(
        "{}: NCCL merged those ports into one network device (NCCL_NET_MERGE_LEVEL, default PORT: the ports of one card) and sends over it as one NIC; NCCL_NET_MERGE_LEVEL=LOC keeps them apart",
        said.join("; ")
    );
    Some(
        Finding::new(Code::NicFused, text)
            .evidence(said)
            .fix("none needed; NCCL_NET_MERGE_LEVEL=LOC (or NCCL_IB_MERGE_NICS=0) keeps the ports apart where each must be its own device"),
    )
}

/// IB ports that share a card (one `<nic>`, or PCI functions of one device), which NCCL 2.21
/// and later fuse into one device by default: `ncclTopoGetPath` gives them PATH_PORT, within
/// the default NCCL_NET_MERGE_LEVEL (src/graph/topo.cc, `ncclTopoAutoMerge`), and the IB
/// plugin's `makeVDevice` joins their names with `+` and sums their speeds. NCCL dumps the
/// physical ports (it runs detection once with them for the dump), so a dump lists them apart.
/// `(card, ports, summed speed in Mb/s where every port states one)`, one per host's card.
fn fusable_cards(topo: &Topology, nets: &[NodeIndex]) -> Vec<(String, Vec<String>, Option<u64>)> {
    // A host fused from several (an MNNVL clique) holds the same bus ids once per system.
    type Card = (crate::HostId, Option<crate::HostId>, String);
    let mut cards: BTreeMap<Card, Vec<NodeIndex>> = BTreeMap::new();
    for &n in nets {
        let Some(net) = topo.net(n) else { continue };
        let ib = crate::net_kind::of_port(topo, n)
            .is_some_and(|k| k.kind == crate::net_kind::NetKind::Ib);
        if !ib || crate::net_kind::fused_ports(&net.name).is_some() {
            continue;
        }
        let dev = topo.pci_device(n);
        let card = match topo.node(dev).busid() {
            Some(b) => format!("{:04x}:{:02x}:{:02x}", b.domain(), b.bus(), b.device()),
            None => continue,
        };
        let system = topo.system_id.get(&dev).copied();
        cards
            .entry((topo.node(n).host, system, card))
            .or_default()
            .push(n);
    }
    let mut out: Vec<(String, Vec<String>, Option<u64>)> = vec![];
    let mut seen = std::collections::BTreeSet::new();
    for ((_, _, card), ports) in cards {
        if ports.len() < 2 {
            continue;
        }
        let names: Vec<String> = ports
            .iter()
            .filter_map(|&n| topo.net(n).map(|x| x.name.clone()))
            .collect();
        let speed = ports
            .iter()
            .map(|&n| topo.net(n).and_then(|x| x.speed_mbps))
            .sum::<Option<u64>>();
        // The same card on every copy of a host is said once.
        if seen.insert((card.clone(), names.clone())) {
            out.push((card, names, speed));
        }
    }
    out
}

/// [`fused_on`] over every port of the topology (plan). The ports of the hosts that answer
/// for themselves ([`Topology::asked_nets`]) say it all: an unchanged copy's ports and cards
/// repeat the model copy's, which come before them, and each name and card is said once.
pub fn fused(topo: &Topology) -> Option<Finding> {
    fused_among(topo, &topo.asked_nets(), true)
}

/// The devices the source itself names fused, over every port (diagnose).
pub fn fused_named(topo: &Topology) -> Option<Finding> {
    fused_among(topo, &topo.nets(), false)
}

/// [`verdicts`] for every host of `topo` (plan and diagnose): the same verdict on several hosts
/// (replicated machines) once, with the number of hosts, keeping info verdicts out when
/// `problems_only`. A host of an unchanged copy ([`Topology::standing`]) repeats the model
/// copy's host's verdicts: at 16,384 hosts, judging each was a tenth of a plan.
pub fn every_host(topo: &Topology, names: &impl Names, problems_only: bool) -> Vec<Finding> {
    let n = topo.host_count();
    let standing = topo.standing();
    let asked = |x: NodeIndex| standing.as_ref().is_none_or(|s| s.asks(x));
    let bucket = |v: Vec<NodeIndex>| -> Vec<Vec<NodeIndex>> {
        let mut out = vec![vec![]; n];
        for x in v {
            if let Some(b) = out.get_mut(topo.node(x).host as usize) {
                b.push(x);
            }
        }
        out
    };
    let (gpus, nets) = match &standing {
        Some(s) => (
            topo.gpus_among(s.asked_nodes()),
            topo.nets_among(s.asked_nodes()),
        ),
        None => (topo.gpus(), topo.nets()),
    };
    let (gpus, nets) = (bucket(gpus), bucket(nets));
    // NICs without a known port (a skeleton XML) are columns too, after the ports.
    let bare = bucket(
        topo.nics()
            .filter(|&x| asked(x) && topo.children(x).is_empty())
            .collect(),
    );
    let cpus = bucket(topo.cpus().filter(|&x| asked(x)).collect());
    let mut merged = crate::message::OnHosts::default();
    let mut answers: std::collections::HashMap<usize, Vec<Finding>> = Default::default();
    for h in 0..n {
        let by = standing.as_ref().map_or(h, |s| s.answered_by(h));
        if let Some(vs) = answers.get(&by).filter(|_| by != h) {
            for v in vs {
                merged.add(v.clone(), 1);
            }
            continue;
        }
        let nics: Vec<NodeIndex> = nets[h].iter().chain(&bare[h]).copied().collect();
        let host = Host {
            gpus: &gpus[h],
            nics: &nics,
            sockets: cpus[h].len(),
        };
        let vs: Vec<Finding> = verdicts(topo, &host, names)
            .into_iter()
            .filter(|v| !problems_only || v.severity >= Severity::Warning)
            .collect();
        if standing.is_some() {
            answers.insert(h, vs.clone());
        }
        for v in vs {
            merged.add(v, 1);
        }
    }
    merged.into_findings()
}

fn has(n: usize) -> &'static str {
    if n == 1 { "has" } else { "have" }
}

fn their(n: usize) -> &'static str {
    if n == 1 { "its" } else { "their" }
}

/// How GPUs and NICs pair under PCIe switches, or which GPUs have none of their own.
fn pairing(
    per_gpu: &[(NodeIndex, Vec<NodeIndex>)],
    lonely: &[NodeIndex],
    host: &Host,
    names: &impl Names,
) -> Option<Finding> {
    let mut per_nic: BTreeMap<NodeIndex, Vec<NodeIndex>> = BTreeMap::new();
    for (g, ns) in per_gpu {
        for &n in ns {
            per_nic.entry(n).or_default().push(*g);
        }
    }
    let all_have = per_gpu.iter().all(|(_, ns)| !ns.is_empty());
    let k = per_gpu.first().map(|(_, ns)| ns.len()).unwrap_or(0);
    let m = per_nic.values().next().map(|v| v.len()).unwrap_or(0);
    let regular = all_have
        && per_gpu.iter().all(|(_, ns)| ns.len() == k)
        && per_nic.values().all(|v| v.len() == m);
    let info = |code, text: String| Some(Finding::at(code, Severity::Info, text));
    match (regular, k, m) {
        (true, 1, 1) => info(Code::NicRailAligned, rail_aligned(per_gpu, names)),
        (true, _, 1) => info(
            Code::NicPerGpu,
            format!("Each GPU has {k} NICs of its own behind its PCIe switch (1:{k})"),
        ),
        (true, 1, _) => info(
            Code::NicShared,
            format!("{m} GPUs share each NIC behind a PCIe switch ({m}:1)"),
        ),
        (true, _, _) => info(
            Code::NicMixed,
            format!(
                "Each GPU shares a PCIe switch with {k} NICs and each NIC with {m} GPUs ({} GPUs, {} NICs)",
                host.gpus.len(),
                per_nic.len()
            ),
        ),
        (false, _, _) => missing(per_gpu, lonely, host, names),
    }
}

/// 1:1, and the pairs when they do not follow the numbering (IBM gx3d: GPU0 ↔ mlx5_7).
fn rail_aligned(per_gpu: &[(NodeIndex, Vec<NodeIndex>)], names: &impl Names) -> String {
    let mut line =
        "GPU↔NIC rail-aligned 1:1: each GPU shares a PCIe switch with its own NIC".to_string();
    let crossed = per_gpu.iter().any(|(g, ns)| {
        ns.first()
            .is_some_and(|&n| names.position(n) != names.position(*g))
    });
    if crossed {
        let pairs: Vec<String> = per_gpu
            .iter()
            .filter_map(|(g, ns)| {
                ns.first()
                    .map(|&n| format!("{}↔{}", names.label(*g), names.label(n)))
            })
            .collect();
        line.push_str(&format!(
            " (NIC numbering differs from GPU numbering: {})",
            pairs.join(", ")
        ));
    }
    line
}

/// No NIC near any GPU, or GPUs (not already on a NIC-less socket) without one of their own.
fn missing(
    per_gpu: &[(NodeIndex, Vec<NodeIndex>)],
    lonely: &[NodeIndex],
    host: &Host,
    names: &impl Names,
) -> Option<Finding> {
    let without: Vec<NodeIndex> = per_gpu
        .iter()
        .filter(|(g, ns)| ns.is_empty() && !lonely.contains(g))
        .map(|(g, _)| *g)
        .collect();
    if per_gpu.iter().all(|(_, ns)| ns.is_empty()) {
        let text = "No NIC shares a PCIe switch with a GPU: GPU↔NIC traffic goes through the CPU";
        let ev = format!(
            "{} NIC(s), {} GPU(s): no pair under one PCIe switch",
            host.nics.len(),
            host.gpus.len()
        );
        return Some(Finding::new(Code::NicNoneNear, text).evidence(vec![ev]));
    }
    if without.is_empty() {
        return None;
    }
    let n = without.len();
    let text = format!(
        "{} {} no NIC behind {} PCIe switch",
        names.gpus(&without),
        has(n),
        their(n)
    );
    let ev: Vec<String> = without
        .iter()
        .map(|&g| format!("{}: no NIC under its PCIe switch", names.label(g)))
        .collect();
    Some(Finding::new(Code::NicMissing, text).evidence(ev))
}

/// GPUs on a socket without any NIC.
fn socket(topo: &Topology, lonely: &[NodeIndex], names: &impl Names) -> Option<Finding> {
    if lonely.is_empty() {
        return None;
    }
    let mut ns: Vec<i32> = lonely.iter().filter_map(|&g| numa(topo, g)).collect();
    ns.sort();
    ns.dedup();
    let list: Vec<String> = ns.iter().map(|x| x.to_string()).collect();
    let n = lonely.len();
    let text = format!(
        "{} {} no NIC on {} socket (NUMA {}): {} network traffic crosses the inter-socket link or goes through a peer GPU (PXN)",
        names.gpus(lonely),
        has(n),
        their(n),
        list.join(", "),
        their(n)
    );
    let ev: Vec<String> = lonely
        .iter()
        .map(|&g| {
            format!(
                "{}: NUMA {}, which has no NIC",
                names.label(g),
                numa(topo, g).unwrap_or(-1)
            )
        })
        .collect();
    Some(Finding::new(Code::NicNumaRemote, text).evidence(ev))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::hgx;

    #[test]
    fn an_hgx_board_is_rail_aligned_and_raises_no_problem() {
        let t = hgx(8, 90).replicate(2);
        let names = PlainNames(&t);
        let all = every_host(&t, &names, false);
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].code, Code::NicRailAligned);
        assert!(all[0].text.ends_with("(on 2 hosts)"), "{}", all[0].text);
        assert!(every_host(&t, &names, true).is_empty());
        let (g, n) = (t.gpus()[0], t.nets()[0]);
        assert!(near(&t, g, n));
        assert!(
            !near(&t, g, t.nets()[7]),
            "GPU0 and the last port share only the CPU"
        );
    }

    #[test]
    fn gpus_on_c2c_get_no_placement_verdict() {
        let mut t = hgx(8, 90);
        let (gpus, nets) = (t.gpus(), t.nets());
        let one_nic = [nets[0]];
        let host = Host {
            gpus: &gpus,
            nics: &one_nic,
            sockets: 1,
        };
        let v = verdicts(&t, &host, &PlainNames(&t));
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].code, Code::NicMissing);
        let cpu = t.root_cpu(gpus[0]).unwrap();
        for &g in &gpus {
            let link = crate::Link {
                kind: crate::LinkKind::C2c,
                bw: 40.0,
                lanes: 10,
            };
            t.connect_both(g, cpu, link);
        }
        assert!(verdicts(&t, &host, &PlainNames(&t)).is_empty());
    }
}

#[cfg(test)]
mod fused_tests {
    use super::*;
    use crate::testing::hgx;

    /// The fused-device finding of copies, some of them faulted, is the one every host's
    /// ports give: it asks the hosts that answer for themselves only.
    #[test]
    fn copies_with_a_fault_say_what_every_host_does() {
        let mut t = hgx(8, 90);
        for (i, n) in t.nets().into_iter().take(2).enumerate() {
            if let NodeKind::Net(x) = &mut t.node_mut(n).kind {
                x.name = format!("mlx5_{}+mlx5_{}", 2 * i, 2 * i + 1);
                x.speed_mbps = Some(400_000 * (i as u64 + 1));
            }
        }
        for fault in [
            None,
            Some("nic:mlx5_0+mlx5_1@0"),
            Some("nic:mlx5_2+mlx5_3@2"),
        ] {
            let mut r = t.replicate(4);
            if let Some(f) = fault {
                let f = crate::faults::parse_without(f).unwrap();
                crate::faults::apply_all(&mut r, &[f]).unwrap();
                assert!(r.standing().is_some(), "{fault:?}");
            }
            let mut each = r.clone();
            each.forget_copies();
            let (copies, every) = (fused(&r), fused(&each));
            assert!(copies.is_some(), "{fault:?}");
            assert_eq!(copies, every, "{fault:?}");
        }
    }
}
