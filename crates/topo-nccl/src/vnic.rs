//! NIC fusion: the IB ports NCCL 2.20 and later join into one network device.
//!
//! 2.20's IB plugin joins the ports of one card itself (one PCI device, one system GUID, one
//! link layer; `ncclIbFindMatchingDev`, src/transport/net_ib.cc, v2.20.5-1): its devices are the
//! joined ones, numbered in the order it made them. From 2.21 NCCL's topology does it:
//! NCCL's IB plugin lists every active verbs port as a device; NCCL then groups the ports that
//! lie within NCCL_NET_MERGE_LEVEL of each other (default PORT: the ports of one card) and asks
//! the plugin to make one virtual device of each group (`ncclTopoMakeVNics`,
//! `ncclTopoAutoMerge` and `ncclTopoGetPath` in src/graph/topo.cc; `ncclIbMakeVDeviceInternal`
//! in src/transport/net_ib, NVIDIA/nccl v2.21-v2.30). The virtual device takes the first
//! port's place and properties, the ports' names joined with `+` and their speeds summed; the
//! ports themselves leave the system. A dump (`NCCL_TOPO_DUMP_FILE`) lists the physical ports,
//! so a source that came from one needs this step to see the devices NCCL searches over.

use std::collections::HashMap;

use petgraph::graph::NodeIndex;
use topo_model::{HostId, NodeKind, Topology};

/// How close two ports must be to be joined, as NCCL orders the answers of its XML path
/// (`ncclTopoGetPath`): LOC < PORT < PIX < PXB < P2C/PXN < PHB < SYS; a failed join is DIS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum MergeLevel {
    Loc,
    Port,
    Pix,
    Pxb,
    /// P2C and PXN: above PXB and below PHB, so they join what PXB joins.
    Pxn,
    Phb,
    Sys,
    Dis,
}

impl MergeLevel {
    /// NCCL_NET_MERGE_LEVEL's names (`nicPathKvList`, src/graph/topo.cc): PORT and the
    /// path types from LOC to SYS other than the NVLink and C2C ones.
    pub fn parse(s: &str) -> Option<MergeLevel> {
        use topo_vocab::PathType as P;
        if s == "PORT" {
            return Some(MergeLevel::Port);
        }
        Some(match P::from_name(s)? {
            P::Loc => MergeLevel::Loc,
            P::Pix => MergeLevel::Pix,
            P::Pxb => MergeLevel::Pxb,
            P::P2c | P::Pxn => MergeLevel::Pxn,
            P::Phb => MergeLevel::Phb,
            P::Sys => MergeLevel::Sys,
            _ => return None,
        })
    }
}

/// How NCCL joins a host's IB ports, by version and settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fusion {
    /// No port joins another: 2.18-2.19, another transport, NCCL_NET_MERGE_LEVEL=LOC or
    /// NCCL_IB_MERGE_NICS=0.
    Off,
    /// 2.20: the IB plugin joins the ports of one card with one GUID and link layer.
    Plugin,
    /// 2.21 and later: NCCL's topology joins the ports within the level.
    Level(MergeLevel),
}

/// What fusion does to one port.
#[derive(Clone, Debug, PartialEq)]
pub enum Place {
    /// The first port of a group: it stands for the virtual device.
    Lead(Fused),
    /// Another port of a group: NCCL no longer lists it.
    Member,
}

/// A virtual device: its name, plugin index and bandwidth (GB/s, the ports' summed).
#[derive(Clone, Debug, PartialEq)]
pub struct Fused {
    pub name: String,
    pub dev: i32,
    pub bw: f64,
}

/// At most this many ports make one device (NCCL_NET_MAX_DEVS_PER_NIC, src/include/net.h).
const MAX_DEVS_PER_NIC: usize = 4;
/// The IB plugin's limit on physical ports (MAX_IB_DEVS, src/transport/net_ib).
const MAX_IB_DEVS: usize = 32;

/// The places of the ports that fusion changes, keyed by port node; a port it leaves alone
/// has none. `exported` is the plugin's list (NCCL_IB_HCA already applied).
pub fn places(
    topo: &Topology,
    fusion: Fusion,
    exported: &dyn Fn(&topo_model::Net) -> bool,
) -> HashMap<NodeIndex, Place> {
    let mut out = HashMap::new();
    for ports in ports_by_plugin(topo, exported) {
        match fusion {
            Fusion::Off | Fusion::Level(MergeLevel::Loc) => return out,
            Fusion::Plugin => fuse_in_plugin(topo, &ports, &mut out),
            Fusion::Level(level) => fuse_host(topo, level, &ports, &mut out),
        }
    }
    out
}

/// 2.20's IB plugin over one host's ports, in its order: a port joins the first device made
/// of a port of its card with its GUID and link layer (while that has fewer than four), else
/// makes a device of its own. Where some device joins several, every device is renumbered in
/// the order the plugin made them, as the plugin lists them.
fn fuse_in_plugin(topo: &Topology, ports: &[NodeIndex], out: &mut HashMap<NodeIndex, Place>) {
    let ports = &ports[..ports.len().min(MAX_IB_DEVS)];
    let mut devices: Vec<Vec<NodeIndex>> = vec![];
    for &p in ports {
        let joins = devices.iter_mut().find(|d| {
            d.len() < MAX_DEVS_PER_NIC
                && distance(topo, d[0], p, MergeLevel::Port) == MergeLevel::Port
                && same_guid(topo, d[0], p)
                && one_layer(topo, &[d[0], p], &[0, 1])
        });
        match joins {
            Some(d) => d.push(p),
            None => devices.push(vec![p]),
        }
    }
    if devices.iter().all(|d| d.len() == 1) {
        return;
    }
    for (k, d) in devices.iter().enumerate() {
        out.insert(d[0], Place::Lead(fused(topo, d, k)));
        for &m in &d[1..] {
            out.insert(m, Place::Member);
        }
    }
}

/// Whether two ports have one system GUID, where the source states both.
fn same_guid(topo: &Topology, a: NodeIndex, b: NodeIndex) -> bool {
    let guid = |x: NodeIndex| topo.net(x).and_then(|n| n.guid);
    match (guid(a), guid(b)) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

/// Each host's IB ports in the plugin's order (device index, then the source's order). A
/// host fused from several trays keeps each tray apart, as each process made its own.
fn ports_by_plugin(
    topo: &Topology,
    exported: &dyn Fn(&topo_model::Net) -> bool,
) -> Vec<Vec<NodeIndex>> {
    let mut by: std::collections::BTreeMap<(HostId, Option<HostId>), Vec<NodeIndex>> =
        Default::default();
    for n in topo.nets() {
        let Some(net) = topo.net(n) else { continue };
        let ib = topo_model::net_kind::of_port(topo, n)
            .is_some_and(|k| k.kind == topo_model::net_kind::NetKind::Ib);
        if !ib || net.socket || !exported(net) || !active(net) {
            continue;
        }
        let nic = topo.pci_device(n);
        let key = (topo.node(n).host, topo.system_id.get(&nic).copied());
        by.entry(key).or_default().push(n);
    }
    by.into_values()
        .map(|mut v| {
            v.sort_by_key(|&n| (topo.net(n).map_or(i32::MAX, |x| x.dev), n));
            v
        })
        .collect()
}

/// NCCL's IB plugin lists only ACTIVE ports; one the source says is down is no device.
fn active(net: &topo_model::Net) -> bool {
    net.state.as_deref().is_none_or(|s| {
        let s = s.to_ascii_lowercase();
        s.contains("active") || s == "up"
    })
}

/// `ncclTopoAutoMerge` over one host's ports: the first unplaced port takes every unplaced
/// port within `level` of it (at most four); a group whose link layers differ is refused by
/// the plugin, and NCCL then keeps those pairs apart and starts over.
fn fuse_host(
    topo: &Topology,
    level: MergeLevel,
    ports: &[NodeIndex],
    out: &mut HashMap<NodeIndex, Place>,
) {
    // The IB plugin lists at most MAX_IB_DEVS ports (src/transport/net_ib): the rest are no
    // devices to fuse, and the bound keeps a hostile source's work small.
    let ports = &ports[..ports.len().min(MAX_IB_DEVS)];
    let n = ports.len();
    let mut dist: Vec<MergeLevel> = (0..n * n)
        .map(|k| distance(topo, ports[k / n], ports[k % n], level))
        .collect();
    if !dist.iter().any(|&d| d > MergeLevel::Loc && d <= level) {
        return;
    }
    let mut placed = vec![false; n];
    let mut groups: Vec<Vec<usize>> = vec![];
    let mut i = 0;
    // Bounded: every restart marks at least one pair DIS for good, and a pass is n steps.
    let mut budget = (n * n + 1) * (n + 1);
    while i < n && budget > 0 {
        budget -= 1;
        if placed[i] {
            i += 1;
            continue;
        }
        let mut group = vec![i];
        placed[i] = true;
        for j in 0..n {
            if group.len() == MAX_DEVS_PER_NIC {
                break;
            }
            if j != i && !placed[j] && dist[i * n + j] <= level {
                group.push(j);
                placed[j] = true;
            }
        }
        if group.len() > 1 && !one_layer(topo, ports, &group) {
            placed[i] = false;
            for &j in &group[1..] {
                placed[j] = false;
                dist[i * n + j] = MergeLevel::Dis;
                dist[j * n + i] = MergeLevel::Dis;
            }
            // NCCL resets its index to 0 and its loop then steps to 1.
            i = 1;
            continue;
        }
        if group.len() > 1 {
            groups.push(group);
        }
        i += 1;
    }
    for (k, g) in groups.iter().enumerate() {
        let members: Vec<NodeIndex> = g.iter().map(|&x| ports[x]).collect();
        out.insert(members[0], Place::Lead(fused(topo, &members, n + k)));
        for &m in &members[1..] {
            out.insert(m, Place::Member);
        }
    }
}

/// Whether the plugin accepts the group: every port of one link layer, where stated.
fn one_layer(topo: &Topology, ports: &[NodeIndex], group: &[usize]) -> bool {
    let mut layers = group
        .iter()
        .filter_map(|&x| topo.net(ports[x]).and_then(|n| n.link_layer.as_deref()));
    match layers.next() {
        Some(first) => layers.all(|l| l.eq_ignore_ascii_case(first)),
        None => true,
    }
}

/// The virtual device of `members`: the plugin numbers virtual devices after the physical
/// ones, in the order it made them (`ncclTopoProcessNet`).
fn fused(topo: &Topology, members: &[NodeIndex], dev: usize) -> Fused {
    let nets: Vec<&topo_model::Net> = members.iter().filter_map(|&m| topo.net(m)).collect();
    Fused {
        name: nets
            .iter()
            .map(|x| x.name.as_str())
            .collect::<Vec<_>>()
            .join("+"),
        dev: i32::try_from(dev).unwrap_or(i32::MAX),
        bw: nets.iter().map(|x| x.bw()).sum(),
    }
}

/// NCCL's XML path between two ports (`ncclTopoGetPath`): PORT for ports of one card (one
/// `<nic>`, or PCI functions of one device), PIX under one PCIe switch, PXB further down one
/// switch tree, PHB under one CPU, else SYS. Past PORT it is worked out only where `level`
/// reaches further (the default joins only the ports of one card).
fn distance(topo: &Topology, a: NodeIndex, b: NodeIndex, level: MergeLevel) -> MergeLevel {
    if a == b {
        return MergeLevel::Loc;
    }
    let (na, nb) = (topo.pci_device(a), topo.pci_device(b));
    if na == nb || (card(topo, na).is_some() && card(topo, na) == card(topo, nb)) {
        return MergeLevel::Port;
    }
    if level <= MergeLevel::Port {
        return MergeLevel::Sys;
    }
    let Some(common) = topo.common_ancestor(na, nb) else {
        return MergeLevel::Sys;
    };
    match &topo.node(common).kind {
        NodeKind::Cpu(_) => MergeLevel::Phb,
        NodeKind::PciSwitch(_) => {
            let below = |x: NodeIndex| topo.node(x).parent == Some(common);
            if below(na) && below(nb) {
                MergeLevel::Pix
            } else {
                MergeLevel::Pxb
            }
        }
        _ => MergeLevel::Sys,
    }
}

/// A NIC's card: its bus id without the function.
fn card(topo: &Topology, nic: NodeIndex) -> Option<(u32, u8, u8)> {
    match &topo.node(nic).kind {
        NodeKind::Nic(x) => x.busid.map(|b| (b.domain(), b.bus(), b.device())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::{BusId, Net, Nic, PciSwitch, class};

    /// An HGX board with two GPUs (ports mlx5_0, mlx5_1) and, under the CPU, the cards
    /// `cards`: each card's bus number and its ports' (name, link layer).
    /// A card: its bus number and its ports' (name, link layer).
    type Card<'a> = (u8, &'a [(&'a str, Option<&'a str>)]);

    fn board(cards: &[Card]) -> Topology {
        let mut t = topo_model::testing::hgx(2, 90);
        let cpu = cpu_of(&t);
        let mut dev = 2;
        for &(bus, ports) in cards {
            let nic = t.add_child(cpu, nic_at(bus, 0));
            for &(name, layer) in ports {
                t.add_child(nic, port(name, dev, layer));
                dev += 1;
            }
        }
        t
    }

    fn cpu_of(t: &Topology) -> NodeIndex {
        t.graph
            .node_indices()
            .find(|&n| matches!(t.node(n).kind, NodeKind::Cpu(_)))
            .unwrap()
    }

    fn nic_at(bus: u8, function: u8) -> NodeKind {
        NodeKind::Nic(Nic {
            busid: Some(BusId::new(0, bus, 0, function)),
            class: class::IB,
            ..Default::default()
        })
    }

    fn port(name: &str, dev: i32, layer: Option<&str>) -> NodeKind {
        NodeKind::Net(Net {
            name: name.into(),
            dev,
            speed_mbps: Some(200_000),
            port: 1,
            link_layer: layer.map(String::from),
            ..Default::default()
        })
    }

    fn named(t: &Topology, p: &HashMap<NodeIndex, Place>) -> Vec<(String, Place)> {
        let mut v: Vec<(String, Place)> = p
            .iter()
            .map(|(&n, x)| (t.net(n).unwrap().name.clone(), x.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    fn all(_: &topo_model::Net) -> bool {
        true
    }

    #[test]
    fn ports_of_one_card_become_one_device_after_the_physical_ones() {
        let t = board(&[(0x61, &[("mlx5_2", None), ("mlx5_3", None)])]);
        let got = named(&t, &places(&t, Fusion::Level(MergeLevel::Port), &all));
        let lead = Fused {
            name: "mlx5_2+mlx5_3".into(),
            dev: 4,
            bw: 50.0,
        };
        assert_eq!(
            got,
            vec![
                ("mlx5_2".into(), Place::Lead(lead)),
                ("mlx5_3".into(), Place::Member)
            ]
        );
        assert!(places(&t, Fusion::Level(MergeLevel::Loc), &all).is_empty());
        assert_eq!(MergeLevel::parse("PORT"), Some(MergeLevel::Port));
        assert_eq!(MergeLevel::parse("P2C"), Some(MergeLevel::Pxn));
        assert_eq!(MergeLevel::parse("NVL"), None);
        assert_eq!(MergeLevel::parse("port"), None);
    }

    #[test]
    fn the_2_20_plugin_joins_one_cards_ports_of_one_guid_and_renumbers_its_devices() {
        let mut t = board(&[(0x61, &[("mlx5_2", None), ("mlx5_3", None)])]);
        let got = named(&t, &places(&t, Fusion::Plugin, &all));
        let dev = |name: &str| match &got.iter().find(|(n, _)| n == name).unwrap().1 {
            Place::Lead(f) => (f.name.clone(), f.dev),
            Place::Member => (String::new(), -1),
        };
        assert_eq!(dev("mlx5_0"), ("mlx5_0".into(), 0));
        assert_eq!(dev("mlx5_2"), ("mlx5_2+mlx5_3".into(), 2));
        assert_eq!(dev("mlx5_3"), (String::new(), -1));
        // Ports of one card whose system GUIDs differ are two devices to the plugin.
        for (k, n) in t.nets().into_iter().enumerate() {
            if let NodeKind::Net(x) = &mut t.node_mut(n).kind {
                x.guid = Some(k as u64);
            }
        }
        assert!(places(&t, Fusion::Plugin, &all).is_empty());
        assert!(places(&t, Fusion::Off, &all).is_empty());
    }

    #[test]
    fn cards_apart_join_only_at_a_level_that_reaches_them() {
        let mut t = topo_model::testing::hgx(1, 90);
        let cpu = cpu_of(&t);
        let sw = t.add_child(
            cpu,
            NodeKind::PciSwitch(PciSwitch {
                busid: BusId::new(0, 0x70, 0, 0),
                class: class::BRIDGE,
                ..Default::default()
            }),
        );
        for (k, bus) in [0x71u8, 0x72].into_iter().enumerate() {
            let nic = t.add_child(sw, nic_at(bus, 0));
            t.add_child(nic, port(&format!("mlx5_{}", k + 1), k as i32 + 1, None));
        }
        assert!(places(&t, Fusion::Level(MergeLevel::Port), &all).is_empty());
        let pix = named(&t, &places(&t, Fusion::Level(MergeLevel::Pix), &all));
        assert_eq!(pix.len(), 2, "{pix:?}");
        // mlx5_0 sits under the GPU's switch: CPU apart from the two, so PHB joins it too.
        let phb = named(&t, &places(&t, Fusion::Level(MergeLevel::Phb), &all));
        match &phb[0].1 {
            Place::Lead(f) => assert_eq!(f.name, "mlx5_0+mlx5_1+mlx5_2"),
            x => panic!("{x:?}"),
        }
    }

    #[test]
    fn functions_of_one_device_are_one_card_and_the_plugin_list_bounds_the_join() {
        let mut t = topo_model::testing::hgx(1, 90);
        let cpu = cpu_of(&t);
        for f in 0..2u8 {
            let nic = t.add_child(cpu, nic_at(0x61, f));
            t.add_child(
                nic,
                port(&format!("mlx5_{}", f + 1), i32::from(f) + 1, None),
            );
        }
        assert_eq!(places(&t, Fusion::Level(MergeLevel::Port), &all).len(), 2);
        // A port NCCL_IB_HCA leaves out is no device, so nothing is left to join.
        let only_first = |n: &topo_model::Net| n.name != "mlx5_2";
        assert!(places(&t, Fusion::Level(MergeLevel::Port), &only_first).is_empty());
    }

    #[test]
    fn the_plugin_refuses_mixed_link_layers_and_joins_four_at_most() {
        let t = board(&[(
            0x61,
            &[("mlx5_2", Some("InfiniBand")), ("mlx5_3", Some("Ethernet"))],
        )]);
        assert!(places(&t, Fusion::Level(MergeLevel::Port), &all).is_empty());
        let ports: Vec<(String, Option<&str>)> =
            (2..7).map(|k| (format!("mlx5_{k}"), None)).collect();
        let refs: Vec<(&str, Option<&str>)> = ports.iter().map(|(a, b)| (a.as_str(), *b)).collect();
        let t = board(&[(0x61, &refs)]);
        let got = named(&t, &places(&t, Fusion::Level(MergeLevel::Port), &all));
        let leads: Vec<&Fused> = got
            .iter()
            .filter_map(|(_, p)| match p {
                Place::Lead(f) => Some(f),
                Place::Member => None,
            })
            .collect();
        assert_eq!(leads.len(), 1, "{got:?}");
        assert_eq!(leads[0].name, "mlx5_2+mlx5_3+mlx5_4+mlx5_5");
        assert_eq!(got.len(), 4, "the fifth port stays a device of its own");
    }

    #[test]
    fn the_system_has_one_net_of_the_summed_speed() {
        use crate::system::{NetPlugin, System};
        let t = board(&[(0x61, &[("mlx5_2", None), ("mlx5_3", None)])]);
        let nets = |merge| {
            let plugin = NetPlugin {
                keep: &all,
                merge: Fusion::Level(merge),
            };
            let s = System::build_with(&t, &topo_model::BwConstants::default(), &plugin);
            let mut v: Vec<(String, f64)> = s
                .nets
                .iter()
                .map(|&i| {
                    let a = s.nodes[i].net.as_ref().unwrap();
                    (a.name.clone(), a.bw)
                })
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        assert_eq!(nets(MergeLevel::Loc).len(), 4);
        let fused = nets(MergeLevel::Port);
        assert_eq!(fused.len(), 3, "{fused:?}");
        assert!(fused.contains(&("mlx5_2+mlx5_3".into(), 50.0)), "{fused:?}");
    }
}
