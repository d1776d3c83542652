//! Failed and degraded parts as what-ifs (`--without`, `--degrade`): a node with a dead NVLink,
//! a lost NIC, a GPU off the bus, a PCIe link trained down, NVLink lanes lost. Each changes the
//! topology the way the failure changes what NCCL finds at init: a removed GPU or port becomes
//! a plain PCI function (NCCL ignores those), a removed NVLink is gone, a degraded link keeps
//! fewer lanes or a slower width with its bandwidth priced again.

use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;

use crate::bw::{self, BwConstants};
use crate::{BusId, HostId, LinkKind, NodeKind, PciDevice, PcieLink, Topology};

/// One failed or degraded part, on one host.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Every NVLink of the GPU with this NVML index.
    Nvlink { gpu: i32, host: HostId },
    /// A network port by name (`mlx5_2`).
    Nic { name: String, host: HostId },
    /// The GPU with this NVML index.
    Gpu { gpu: i32, host: HostId },
    /// The PCIe link of the device at this bus id, at this generation and width.
    Pcie {
        busid: BusId,
        generation: u32,
        width: u32,
        host: HostId,
    },
    /// The GPU keeps this many NVLink lanes in all.
    Lanes { gpu: i32, lanes: u32, host: HostId },
}

fn gpu_index(s: &str) -> Option<i32> {
    let s = s.trim();
    s.strip_prefix("GPU")
        .or_else(|| s.strip_prefix("gpu"))
        .unwrap_or(s)
        .parse()
        .ok()
        .filter(|&i: &i32| i >= 0)
}

/// `THING@HOST` → (THING, host index; 0 when not given).
fn split_host(s: &str) -> Result<(&str, HostId), String> {
    match s.rsplit_once('@') {
        Some((a, h)) => h
            .parse()
            .map(|h| (a, h))
            .map_err(|_| format!("'{h}' is not a host index (@0, @1, ...)")),
        None => Ok((s, 0)),
    }
}

/// `--without nvlink:GPU3|nic:mlx5_2|gpu:5[@HOST]`.
pub fn parse_without(s: &str) -> Result<Fault, String> {
    let (s, host) = split_host(s)?;
    let bad = || format!("'{s}' is not nvlink:GPU<N>, nic:<port> or gpu:<N>");
    let (kind, what) = s.split_once(':').ok_or_else(bad)?;
    match kind {
        "nvlink" => Ok(Fault::Nvlink {
            gpu: gpu_index(what).ok_or_else(bad)?,
            host,
        }),
        "gpu" => Ok(Fault::Gpu {
            gpu: gpu_index(what).ok_or_else(bad)?,
            host,
        }),
        "nic" if !what.is_empty() => Ok(Fault::Nic {
            name: what.to_string(),
            host,
        }),
        _ => Err(bad()),
    }
}

/// `--degrade pcie:<busid>=gen<G>x<W>|nvlink:GPU<N>=<lanes>[@HOST]`.
pub fn parse_degrade(s: &str) -> Result<Fault, String> {
    let (s, host) = split_host(s)?;
    let bad = || format!("'{s}' is not pcie:<bus id>=gen<G>x<W> or nvlink:GPU<N>=<lanes>");
    let (kind, rest) = s.split_once(':').ok_or_else(bad)?;
    let (what, value) = rest.rsplit_once('=').ok_or_else(bad)?;
    match kind {
        "pcie" => {
            let busid = BusId::parse(what).map_err(|_| bad())?;
            let v = value.to_ascii_lowercase();
            let (g, w) = v
                .strip_prefix("gen")
                .and_then(|x| x.split_once('x'))
                .ok_or_else(bad)?;
            let (generation, width) =
                (g.parse().map_err(|_| bad())?, w.parse().map_err(|_| bad())?);
            if !(1..=6).contains(&generation) || ![1, 2, 4, 8, 16, 32].contains(&width) {
                return Err(format!(
                    "'{value}': generation 1 to 6, width 1, 2, 4, 8, 16 or 32"
                ));
            }
            Ok(Fault::Pcie {
                busid,
                generation,
                width,
                host,
            })
        }
        "nvlink" => Ok(Fault::Lanes {
            gpu: gpu_index(what).ok_or_else(bad)?,
            lanes: value.parse().map_err(|_| bad())?,
            host,
        }),
        _ => Err(bad()),
    }
}

fn find_gpu(t: &Topology, gpu: i32, host: HostId) -> Result<NodeIndex, String> {
    let mut on_host: Vec<NodeIndex> = t
        .gpus()
        .into_iter()
        .filter(|&n| t.node(n).host == host)
        .collect();
    on_host.sort_by_key(|&n| t.gpu(n).map(|g| (g.dev, g.busid)));
    pick_gpu(t, &on_host, gpu, host)
}

/// The GPU a fault names, by NVML index (else position) on the machine as the source gave
/// it: its bus id, the identity every later step keeps.
fn gpu_target(f: &Fault) -> Option<(i32, HostId)> {
    match f {
        Fault::Nvlink { gpu, host } | Fault::Gpu { gpu, host } | Fault::Lanes { gpu, host, .. } => {
            Some((*gpu, *host))
        }
        Fault::Nic { .. } | Fault::Pcie { .. } => None,
    }
}

/// Every host's GPUs in NVML order and ports by name, built in one pass before any fault
/// applies: a scan of the machine per fault made `--without` on each of N hosts cost N
/// scans of N hosts (issue 43: 53 s at 128 nodes).
#[derive(Default)]
struct Index {
    gpus: crate::fast::HashMap<HostId, Vec<NodeIndex>>,
    ports: crate::fast::HashMap<(HostId, String), Vec<NodeIndex>>,
}

impl Index {
    /// Of the hosts `faults` name only: a fault on one host of 16,384 indexed every host's
    /// GPUs and ports (a name copied per port), a twentieth of the fault plan.
    fn of(t: &Topology, faults: &[Fault]) -> Index {
        let hosts = t.hosts.len().max(1);
        let (mut gpu_hosts, mut port_hosts) = (vec![false; hosts], vec![false; hosts]);
        for f in faults {
            let (marks, host) = match (f, gpu_target(f)) {
                (Fault::Nic { host, .. }, _) => (&mut port_hosts, *host),
                (_, Some((_, host))) => (&mut gpu_hosts, host),
                _ => continue,
            };
            if let Some(m) = marks.get_mut(host as usize) {
                *m = true;
            }
        }
        let named = |marks: &[bool], host: HostId| marks.get(host as usize) == Some(&true);
        let mut idx = Index::default();
        for n in t.graph.node_indices() {
            let host = t.node(n).host;
            match &t.node(n).kind {
                NodeKind::Gpu(_) if named(&gpu_hosts, host) => {
                    idx.gpus.entry(host).or_default().push(n)
                }
                NodeKind::Net(x) if named(&port_hosts, host) => {
                    idx.ports.entry((host, x.name.clone())).or_default().push(n)
                }
                _ => {}
            }
        }
        for v in idx.gpus.values_mut() {
            v.sort_by_key(|&n| t.gpu(n).map(|g| (g.dev, g.busid)));
        }
        idx
    }
}

/// `host`'s GPU `gpu` among `on_host` (NVML order): by index, else by position.
fn pick_gpu(
    t: &Topology,
    on_host: &[NodeIndex],
    gpu: i32,
    host: HostId,
) -> Result<NodeIndex, String> {
    on_host
        .iter()
        .copied()
        .find(|&n| t.gpu(n).is_some_and(|g| g.dev == gpu))
        .or_else(|| {
            usize::try_from(gpu)
                .ok()
                .and_then(|i| on_host.get(i).copied())
        })
        .ok_or_else(|| format!("host {host} has no GPU {gpu} ({} GPUs)", on_host.len()))
}

/// Applies every fault in order, each GPU named by index resolved to its bus id on the
/// untouched machine first. Resolving as each applies would let `gpu:0` twice remove GPU 1
/// (the index gone, position takes the next), and `--without gpu:3` then a degrade of GPU 3
/// degrade GPU 4. A fault naming a GPU an earlier fault removed is refused. `Err` carries
/// the position of the fault that failed and why. Linear in the machine plus the faults.
pub fn apply_all(t: &mut Topology, faults: &[Fault]) -> Result<Vec<String>, (usize, String)> {
    let idx = Index::of(t, faults);
    let mut targets: Vec<Option<BusId>> = Vec::with_capacity(faults.len());
    for (i, f) in faults.iter().enumerate() {
        targets.push(match gpu_target(f) {
            Some((gpu, host)) if (host as usize) < t.hosts.len().max(1) => {
                let on_host = idx.gpus.get(&host).map_or(&[][..], Vec::as_slice);
                let g = pick_gpu(t, on_host, gpu, host).map_err(|e| (i, e))?;
                t.gpu(g).map(|x| x.busid)
            }
            _ => None,
        });
    }
    let mut notes = Vec::with_capacity(faults.len());
    for (i, (f, bus)) in faults.iter().zip(targets).enumerate() {
        if let (Some(bus), Some((gpu, host))) = (bus, gpu_target(f))
            && t.find(host, bus).and_then(|n| t.gpu(n)).is_none()
        {
            return Err((
                i,
                format!("GPU {gpu} on host {host} ({bus}) was removed by an earlier fault"),
            ));
        }
        let note = match f {
            Fault::Nic { name, host } if (*host as usize) < t.hosts.len().max(1) => {
                // As `apply_at`: the hosts are no longer copies of one machine.
                t.begin_change();
                t.mark_changed(*host);
                let ports = idx
                    .ports
                    .get(&(*host, name.clone()))
                    .map_or(&[][..], Vec::as_slice);
                let note = drop_ports(t, ports, name, *host);
                t.end_change();
                note
            }
            _ => apply_at(t, f, bus),
        };
        notes.push(note.map_err(|e| (i, e))?);
    }
    Ok(notes)
}

/// The GPU at `bus` on `host`, else the one `gpu` names.
fn gpu_at(t: &Topology, gpu: i32, host: HostId, bus: Option<BusId>) -> Result<NodeIndex, String> {
    match bus {
        Some(b) => t
            .find(host, b)
            .filter(|&n| t.gpu(n).is_some())
            .ok_or_else(|| format!("host {host} has no GPU at {b}")),
        None => find_gpu(t, gpu, host),
    }
}

/// Apply `f` to `t`; the note says what was done, the error why it could not be.
pub fn apply(t: &mut Topology, f: &Fault) -> Result<String, String> {
    apply_at(t, f, None)
}

/// [`apply`] with the GPU already resolved to its bus id.
fn apply_at(t: &mut Topology, f: &Fault, bus: Option<BusId>) -> Result<String, String> {
    // A part fails on one host: the others stay as they were, so the hosts are no longer
    // copies of one machine, but copies with one exception.
    t.begin_change();
    t.mark_changed(host_of(f));
    let note = change(t, f, bus);
    t.end_change();
    note
}

/// [`apply_at`]'s change itself.
fn change(t: &mut Topology, f: &Fault, bus: Option<BusId>) -> Result<String, String> {
    if !matches!(f, Fault::Pcie { .. }) && host_of(f) as usize >= t.hosts.len().max(1) {
        return Err(format!(
            "there is no host {} ({} hosts)",
            host_of(f),
            t.hosts.len()
        ));
    }
    match f {
        Fault::Nvlink { gpu, host } => {
            let g = gpu_at(t, *gpu, *host, bus)?;
            let n = drop_nvlinks(t, g);
            Ok(format!(
                "without the NVLinks of GPU {gpu} on host {host} ({n} links)"
            ))
        }
        Fault::Gpu { gpu, host } => {
            let g = gpu_at(t, *gpu, *host, bus)?;
            drop_nvlinks(t, g);
            let Some(x) = t.gpu(g).cloned() else {
                unreachable!("find_gpu finds GPUs")
            };
            t.node_mut(g).kind = NodeKind::PciDevice(PciDevice {
                busid: x.busid,
                class: x.class,
                vendor: x.vendor,
                device: x.device,
                driver: None,
                pcie: x.pcie,
            });
            Ok(format!(
                "without GPU {gpu} on host {host} ({}): as if it fell off the bus",
                x.busid
            ))
        }
        Fault::Nic { name, host } => drop_port(t, name, *host),
        Fault::Pcie {
            busid,
            generation,
            width,
            host,
        } => degrade_pcie(t, *busid, *generation, *width, *host),
        Fault::Lanes { gpu, lanes, host } => {
            let g = gpu_at(t, *gpu, *host, bus)?;
            degrade_lanes(t, g, *lanes)?;
            Ok(format!(
                "GPU {gpu} on host {host} keeps {lanes} NVLink lane(s)"
            ))
        }
    }
}

fn host_of(f: &Fault) -> HostId {
    match f {
        Fault::Nvlink { host, .. }
        | Fault::Nic { host, .. }
        | Fault::Gpu { host, .. }
        | Fault::Pcie { host, .. }
        | Fault::Lanes { host, .. } => *host,
    }
}

/// Remove every NVLink edge from or to `g`; the number of links the GPU had.
fn drop_nvlinks(t: &mut Topology, g: NodeIndex) -> usize {
    let n = t.nvlinks(g).len();
    let edges: Vec<_> = t
        .graph
        .edges_directed(g, petgraph::Direction::Outgoing)
        .chain(t.graph.edges_directed(g, petgraph::Direction::Incoming))
        .filter(|e| e.weight().kind == LinkKind::NvLink)
        .map(|e| e.id())
        .collect();
    remove_edges(t, edges);
    n
}

/// Remove `edges` as `retain_edges` would (highest index first, each swap-remove filling
/// its slot from the end), so the graph comes out the same, at the cost of these edges'
/// endpoints rather than a pass over every edge of the machine.
fn remove_edges(t: &mut Topology, mut edges: Vec<petgraph::graph::EdgeIndex>) {
    edges.sort_unstable_by(|a, b| b.cmp(a));
    edges.dedup();
    for e in edges {
        // The last edge moves into `e`'s slot: its host's links are no longer in the order
        // the copies share.
        let last = petgraph::graph::EdgeIndex::new(t.graph.edge_count().saturating_sub(1));
        if last != e
            && let Some((from, _)) = t.graph.edge_endpoints(last)
        {
            let host = t.graph[from].host;
            t.mark_changed(host);
        }
        t.graph.remove_edge(e);
    }
}

fn drop_port(t: &mut Topology, name: &str, host: HostId) -> Result<String, String> {
    let ports: Vec<NodeIndex> = t
        .nets()
        .into_iter()
        .filter(|&n| t.node(n).host == host && t.net(n).is_some_and(|x| x.name == name))
        .collect();
    drop_ports(t, &ports, name, host)
}

/// Unplug `ports` (the ports of `host` named `name`, as found before earlier faults); an
/// error listing the host's ports when none of them is still a port.
fn drop_ports(
    t: &mut Topology,
    ports: &[NodeIndex],
    name: &str,
    host: HostId,
) -> Result<String, String> {
    let live: Vec<NodeIndex> = ports
        .iter()
        .copied()
        .filter(|&n| t.net(n).is_some_and(|x| x.name == name))
        .collect();
    if live.is_empty() {
        let names: Vec<String> = t
            .nets()
            .into_iter()
            .filter(|&n| t.node(n).host == host)
            .filter_map(|n| t.net(n).map(|x| x.name.clone()))
            .collect();
        return Err(format!(
            "host {host} has no network port {name} (it has {})",
            names.join(", ")
        ));
    }
    for &p in &live {
        unplug_port(t, p);
    }
    Ok(format!("without network port {name} on host {host}"))
}

/// The port `p` as a PCI function with no net plugin device behind it: NCCL no longer
/// lists it, while the node and its links stay (so copies of one machine stay copies when
/// every copy loses the same port).
pub(crate) fn unplug_port(t: &mut Topology, p: NodeIndex) {
    let nic = t.node(p).parent;
    let busid = nic.and_then(|n| t.node(n).busid()).unwrap_or(BusId(0));
    t.node_mut(p).kind = NodeKind::PciDevice(PciDevice {
        busid,
        class: crate::class::IB,
        vendor: None,
        device: None,
        driver: None,
        pcie: PcieLink::default(),
    });
}

fn pcie_mut(k: &mut NodeKind) -> Option<&mut PcieLink> {
    match k {
        NodeKind::Gpu(g) => Some(&mut g.pcie),
        NodeKind::Nic(n) => Some(&mut n.pcie),
        NodeKind::PciSwitch(s) => Some(&mut s.pcie),
        NodeKind::PciDevice(d) => Some(&mut d.pcie),
        _ => None,
    }
}

fn degrade_pcie(
    t: &mut Topology,
    busid: BusId,
    generation: u32,
    width: u32,
    host: HostId,
) -> Result<String, String> {
    let n = t
        .find(host, busid)
        .ok_or_else(|| format!("host {host} has no PCI device {busid}"))?;
    let speed = match generation {
        1 => "2.5 GT/s PCIe",
        2 => "5.0 GT/s PCIe",
        3 => "8.0 GT/s PCIe",
        4 => "16.0 GT/s PCIe",
        5 => "32.0 GT/s PCIe",
        _ => "64.0 GT/s PCIe",
    };
    let Some(l) = pcie_mut(&mut t.node_mut(n).kind) else {
        return Err(format!("{busid} has no PCIe link of its own"));
    };
    l.speed = Some(speed.into());
    l.width = Some(width);
    l.cur_speed = Some(speed.into());
    l.cur_width = Some(width);
    let new_bw = bw::pcie_bw(Some(speed), Some(width));
    if let Some(p) = t.node(n).parent {
        let edges: Vec<_> = t
            .graph
            .edges_connecting(n, p)
            .chain(t.graph.edges_connecting(p, n))
            .filter(|e| e.weight().kind == LinkKind::Pci)
            .map(|e| e.id())
            .collect();
        for e in edges {
            t.graph[e].bw = new_bw;
        }
    }
    Ok(format!(
        "PCIe link of {busid} on host {host} at Gen{generation} x{width} ({new_bw:.1} GB/s)"
    ))
}

/// Take lanes off the GPU's widest NVLinks until `lanes` are left, both directions of each.
fn degrade_lanes(t: &mut Topology, g: NodeIndex, lanes: u32) -> Result<(), String> {
    let links = t.nvlinks(g);
    let total: u32 = links.iter().map(|l| l.1).sum();
    if lanes >= total {
        return Err(format!(
            "the GPU has {total} NVLink lane(s), not more than {lanes}"
        ));
    }
    let mut cut: Vec<(NodeIndex, u32)> = links.iter().map(|l| (l.0, l.1)).collect();
    let mut left = total;
    while left > lanes {
        let i = (0..cut.len())
            .max_by_key(|&i| (cut[i].1, std::cmp::Reverse(i)))
            .unwrap_or(0);
        cut[i].1 -= 1;
        left -= 1;
    }
    let sm = t.gpu(g).and_then(|x| x.sm).unwrap_or(0);
    let lane_bw = BwConstants::default().nvlink_lane(sm);
    for (to, l) in cut {
        let edges: Vec<_> = t
            .graph
            .edges_connecting(g, to)
            .chain(t.graph.edges_connecting(to, g))
            .filter(|e| e.weight().kind == LinkKind::NvLink)
            .map(|e| e.id())
            .collect();
        for e in edges {
            t.graph[e].lanes = l;
            t.graph[e].bw = l as f64 * lane_bw;
        }
    }
    let gone: Vec<_> = t
        .graph
        .edges_directed(g, petgraph::Direction::Outgoing)
        .chain(t.graph.edges_directed(g, petgraph::Direction::Incoming))
        .filter(|e| e.weight().kind == LinkKind::NvLink && e.weight().lanes == 0)
        .map(|e| e.id())
        .collect();
    remove_edges(t, gone);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn specs_parse_and_bad_ones_say_the_grammar() {
        assert_eq!(
            parse_without("nvlink:GPU3"),
            Ok(Fault::Nvlink { gpu: 3, host: 0 })
        );
        assert_eq!(parse_without("gpu:5@1"), Ok(Fault::Gpu { gpu: 5, host: 1 }));
        assert_eq!(
            parse_without("nic:mlx5_2"),
            Ok(Fault::Nic {
                name: "mlx5_2".into(),
                host: 0
            })
        );
        assert_eq!(
            parse_degrade("pcie:0000:1b:00.0=gen4x8"),
            Ok(Fault::Pcie {
                busid: BusId::parse("0000:1b:00.0").unwrap(),
                generation: 4,
                width: 8,
                host: 0
            })
        );
        assert_eq!(
            parse_degrade("nvlink:GPU2=12"),
            Ok(Fault::Lanes {
                gpu: 2,
                lanes: 12,
                host: 0
            })
        );
        assert!(
            parse_without("disk:sda")
                .unwrap_err()
                .contains("nvlink:GPU<N>")
        );
        assert!(
            parse_degrade("pcie:0000:1b:00.0=gen9x3")
                .unwrap_err()
                .contains("generation 1 to 6")
        );
        assert!(parse_without("gpu:1@x").unwrap_err().contains("host index"));
    }

    #[test]
    fn each_fault_changes_the_model() {
        let mut t = testing::hgx(8, 90);
        apply(&mut t, &Fault::Nvlink { gpu: 3, host: 0 }).unwrap();
        let g3 = find_gpu(&t, 3, 0).unwrap();
        assert!(t.nvlinks(g3).is_empty());
        apply(
            &mut t,
            &Fault::Lanes {
                gpu: 2,
                lanes: 12,
                host: 0,
            },
        )
        .unwrap();
        let g2 = find_gpu(&t, 2, 0).unwrap();
        assert_eq!(t.nvlinks(g2).iter().map(|l| l.1).sum::<u32>(), 12);
        apply(&mut t, &Fault::Gpu { gpu: 5, host: 0 }).unwrap();
        assert_eq!(t.gpus().len(), 7);
        apply(
            &mut t,
            &Fault::Nic {
                name: "mlx5_1".into(),
                host: 0,
            },
        )
        .unwrap();
        assert_eq!(t.nets().len(), 7);
        let g0 = find_gpu(&t, 0, 0).unwrap();
        let bus = t.gpu(g0).unwrap().busid;
        apply(
            &mut t,
            &Fault::Pcie {
                busid: bus,
                generation: 4,
                width: 8,
                host: 0,
            },
        )
        .unwrap();
        assert_eq!(t.gpu(g0).unwrap().pcie.width, Some(8));
        let e = apply(
            &mut t,
            &Fault::Lanes {
                gpu: 1,
                lanes: 40,
                host: 0,
            },
        )
        .unwrap_err();
        assert!(e.contains("has 18 NVLink lane(s)"), "{e}");
        assert!(
            apply(&mut t, &Fault::Gpu { gpu: 9, host: 0 })
                .unwrap_err()
                .contains("no GPU 9")
        );
        assert!(
            apply(
                &mut t,
                &Fault::Nic {
                    name: "eth9".into(),
                    host: 0
                }
            )
            .unwrap_err()
            .contains("mlx5_0")
        );
    }

    /// A GPU named twice is the same GPU both times: once removed, it is refused, never
    /// the next one by position (issue 45).
    #[test]
    fn faults_name_parts_by_identity_in_order() {
        let t0 = testing::hgx(8, 90);
        let bus = |t: &Topology, i: i32| t.gpu(find_gpu(t, i, 0).unwrap()).unwrap().busid;
        let (b1, b4) = (bus(&t0, 1), bus(&t0, 4));
        let mut t = t0.clone();
        let gpu0 = Fault::Gpu { gpu: 0, host: 0 };
        let e = apply_all(&mut t, &[gpu0.clone(), gpu0]).unwrap_err();
        assert_eq!(e.0, 1);
        assert!(
            e.1.contains("GPU 0 on host 0") && e.1.contains("removed by an earlier fault"),
            "{}",
            e.1
        );
        let mut t = t0.clone();
        let e = apply_all(
            &mut t,
            &[
                Fault::Gpu { gpu: 3, host: 0 },
                Fault::Lanes {
                    gpu: 3,
                    lanes: 4,
                    host: 0,
                },
            ],
        )
        .unwrap_err();
        assert_eq!(e.0, 1);
        assert!(e.1.contains("GPU 3"), "{}", e.1);
        // Apart, GPU 1 and GPU 4 are untouched by faults on others.
        let mut t = t0.clone();
        let notes = apply_all(
            &mut t,
            &[
                Fault::Gpu { gpu: 0, host: 0 },
                Fault::Lanes {
                    gpu: 3,
                    lanes: 4,
                    host: 0,
                },
            ],
        )
        .unwrap();
        assert_eq!(notes.len(), 2);
        let g1 = t
            .gpus()
            .into_iter()
            .find(|&n| t.gpu(n).unwrap().busid == b1)
            .unwrap();
        let g4 = t
            .gpus()
            .into_iter()
            .find(|&n| t.gpu(n).unwrap().busid == b4)
            .unwrap();
        assert_eq!(t.nvlinks(g1).iter().map(|l| l.1).sum::<u32>(), 18);
        assert_eq!(t.nvlinks(g4).iter().map(|l| l.1).sum::<u32>(), 18);
    }
}
