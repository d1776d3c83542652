//! A host's hardware as a sorted list of named facts (`gpu 0 pcie = Gen5 x16`), for comparing
//! two machines (`topo diff`) and grouping a fleet by what its hosts are made of
//! (`topo diagnose --fleet`). A fact the source leaves out is `?`, so an unknown never reads
//! as a difference in value between two sources that both lack it, and names what one lacks.
//! Identities that differ on every host by design (host names, UUIDs, GUIDs, serials) are not
//! facts here.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use petgraph::graph::NodeIndex;

use crate::{HostId, NodeKind, NvlinkInfo, PcieLink, Topology, bw};

/// Facts by name, in name order.
pub type Facts = BTreeMap<String, String>;

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "?".to_string(), |x| x.to_string())
}

fn link(l: &PcieLink) -> String {
    let g = l
        .speed
        .as_deref()
        .and_then(bw::pcie_gts)
        .and_then(bw::pcie_generation)
        .map_or_else(|| "Gen?".to_string(), |g| format!("Gen{g}"));
    let w = l
        .width
        .filter(|&w| w > 0)
        .map_or_else(|| "x?".to_string(), |w| format!("x{w}"));
    // The running width, where narrower: a downtrained link. The running speed is left out,
    // since an idle GPU lowers it and hosts would split by their load.
    match l
        .cur_width
        .filter(|&c| l.width.is_some_and(|w| c > 0 && c < w))
    {
        Some(c) => format!("{g} {w} (x{c} now)"),
        None => format!("{g} {w}"),
    }
}

/// The facts of host `h` of `t`.
pub fn host_facts(t: &Topology, h: HostId) -> Facts {
    let mut f = Facts::new();
    if let Some(host) = t.hosts.get(h as usize) {
        f.insert("driver".into(), opt(host.driver_version.clone()));
        f.insert("cuda driver".into(), opt(host.cuda_driver_version.clone()));
        f.insert("kernel".into(), opt(host.kernel.clone()));
    }
    let mine = |n: &NodeIndex| t.node(*n).host == h;
    let mut gpus: Vec<NodeIndex> = t.gpus().into_iter().filter(mine).collect();
    gpus.sort_by_key(|&n| t.gpu(n).map(|g| (g.dev, g.busid)));
    f.insert("gpus".into(), gpus.len().to_string());
    for (i, &g) in gpus.iter().enumerate() {
        gpu_facts(t, g, i, &mut f);
    }
    let nets: Vec<NodeIndex> = t.nets().into_iter().filter(mine).collect();
    f.insert("network ports".into(), nets.len().to_string());
    for &n in &nets {
        net_facts(t, n, &mut f);
    }
    let cpus: Vec<NodeIndex> = t.cpus().filter(mine).collect();
    f.insert("numa nodes".into(), cpus.len().to_string());
    for &c in &cpus {
        if let Some(cpu) = t.cpu(c) {
            let model = cpu.model_name.clone().or_else(|| {
                Some(format!(
                    "{} family {} model {}",
                    cpu.vendor.clone()?,
                    cpu.family?,
                    cpu.model?
                ))
            });
            f.insert(format!("numa {} cpu", cpu.numa), opt(model));
        }
    }
    for n in t.graph.node_indices().filter(mine) {
        if let NodeKind::PciSwitch(p) = &t.node(n).kind {
            f.insert(format!("switch {} pcie", p.busid), link(&p.pcie));
        }
    }
    let nvs = t
        .graph
        .node_indices()
        .filter(|n| mine(n) && matches!(t.node(*n).kind, NodeKind::NvSwitch(_)))
        .count();
    f.insert("nvswitches".into(), nvs.to_string());
    f
}

fn gpu_facts(t: &Topology, n: NodeIndex, i: usize, f: &mut Facts) {
    let Some(g) = t.gpu(n) else { return };
    let k = |what: &str| format!("gpu {i} {what}");
    f.insert(k("model"), opt(g.name.clone()));
    f.insert(k("sm"), opt(g.sm));
    f.insert(k("bus id"), g.busid.to_string());
    f.insert(k("pcie"), link(&g.pcie));
    f.insert(k("numa"), numa(t, n));
    let nvlink = match &g.nvlink {
        NvlinkInfo::Unknown(_) => "?".to_string(),
        NvlinkInfo::Known => {
            let lanes: u32 = t.nvlinks(n).iter().map(|l| l.1).sum();
            format!("{lanes} lanes")
        }
    };
    f.insert(k("nvlink"), nvlink);
    f.insert(k("rail"), rail(t, n));
}

/// The network ports that share the GPU's PCIe switch (its rail), by name; `-` for none.
fn rail(t: &Topology, gpu: NodeIndex) -> String {
    let Some(sw) = t.node(gpu).parent else {
        return "-".into();
    };
    if !matches!(t.node(sw).kind, NodeKind::PciSwitch(_)) {
        return "-".into();
    }
    let below = |x: NodeIndex| {
        let mut cur = Some(x);
        while let Some(c) = cur {
            if c == sw {
                return true;
            }
            cur = t.node(c).parent;
        }
        false
    };
    let mut names: Vec<String> = t
        .nets()
        .into_iter()
        .filter(|&n| t.node(n).host == t.node(gpu).host && below(n))
        .filter_map(|n| t.net(n).map(|x| x.name.clone()))
        .collect();
    names.sort();
    if names.is_empty() {
        "-".into()
    } else {
        names.join(",")
    }
}

fn net_facts(t: &Topology, n: NodeIndex, f: &mut Facts) {
    let Some(x) = t.net(n) else { return };
    let k = |what: &str| format!("port {} {what}", x.name);
    f.insert(
        k("speed"),
        opt(x.speed_mbps.map(|m| format!("{} Gb/s", m / 1000))),
    );
    let gdr = if x.gdr_unstated {
        "?"
    } else if x.gdr {
        "yes"
    } else {
        "no"
    };
    f.insert(k("gdr"), gdr.into());
    f.insert(k("link layer"), opt(x.link_layer.clone()));
    f.insert(k("state"), opt(x.state.clone()));
    let nic = t.node(n).parent.and_then(|p| match &t.node(p).kind {
        NodeKind::Nic(nic) => Some(nic.pcie.clone()),
        _ => None,
    });
    f.insert(k("pcie"), nic.map_or_else(|| "?".into(), |l| link(&l)));
    f.insert(k("numa"), numa(t, n));
}

/// A device's NUMA node, `?` where the source has none.
fn numa(t: &Topology, n: NodeIndex) -> String {
    let numa = t.numa_of(n);
    if numa < 0 {
        "?".into()
    } else {
        numa.to_string()
    }
}

/// One difference between two fact lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub fact: String,
    /// `None`: the fact is absent on that side (a GPU or port it does not have).
    pub a: Option<String>,
    pub b: Option<String>,
}

/// The device a fact is about (`gpu 3`, `port mlx5_0`, `numa 1`), if any.
fn device(fact: &str) -> Option<&str> {
    let mut it = fact.match_indices(' ');
    let (_, _) = it.next()?;
    let (second, _) = it.next()?;
    ["gpu ", "port ", "numa ", "switch "]
        .iter()
        .any(|p| fact.starts_with(p))
        .then(|| &fact[..second])
}

/// Every fact whose value differs, or that one side lacks, in fact-name order; a device one
/// side lacks altogether is one line (`port mlx5_8`: `present` against none).
pub fn diff(a: &Facts, b: &Facts) -> Vec<Difference> {
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let has = |f: &Facts, dev: &str| f.keys().any(|k| device(k) == Some(dev));
    let mut out: Vec<Difference> = vec![];
    for k in names.into_iter().filter(|k| a.get(*k) != b.get(*k)) {
        if let Some(dev) = device(k) {
            let (in_a, in_b) = (has(a, dev), has(b, dev));
            if in_a != in_b {
                if out.last().is_none_or(|d| d.fact != dev) {
                    let present = |x: bool| x.then(|| "present".to_string());
                    out.push(Difference {
                        fact: dev.to_string(),
                        a: present(in_a),
                        b: present(in_b),
                    });
                }
                continue;
            }
        }
        out.push(Difference {
            fact: k.clone(),
            a: a.get(k).cloned(),
            b: b.get(k).cloned(),
        });
    }
    out
}

/// A hash of the facts: hosts with equal fingerprints are built alike.
pub fn fingerprint(f: &Facts) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    f.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn two_alike_hosts_have_no_difference_and_one_fingerprint() {
        let (a, b) = (testing::hgx(8, 90), testing::hgx(8, 90));
        let (fa, fb) = (host_facts(&a, 0), host_facts(&b, 0));
        assert!(diff(&fa, &fb).is_empty());
        assert_eq!(fingerprint(&fa), fingerprint(&fb));
        assert_eq!(fa["gpu 0 nvlink"], "18 lanes");
        assert_eq!(fa["gpu 0 pcie"], "Gen5 x16");
        assert_eq!(fa["gpu 0 rail"], "mlx5_0");
    }

    #[test]
    fn a_missing_nic_and_a_narrower_link_are_named() {
        let a = testing::hgx_board(&[0, 1], 90, |_| true, true);
        let mut b = testing::hgx_board(&[0, 1], 90, |d| d == 0, true);
        let g1 = b.gpus()[1];
        if let NodeKind::Gpu(g) = &mut b.node_mut(g1).kind {
            g.pcie.width = Some(8);
        }
        let d = diff(&host_facts(&a, 0), &host_facts(&b, 0));
        let names: Vec<&str> = d.iter().map(|x| x.fact.as_str()).collect();
        assert!(names.contains(&"gpu 1 pcie"), "{names:?}");
        let mut c = testing::hgx_board(&[0, 1], 90, |_| true, true);
        let g0 = c.gpus()[0];
        if let NodeKind::Gpu(g) = &mut c.node_mut(g0).kind {
            g.pcie.cur_width = Some(4);
        }
        assert_eq!(host_facts(&c, 0)["gpu 0 pcie"], "Gen5 x16 (x4 now)");
        assert!(names.contains(&"gpu 1 rail"), "{names:?}");
        assert!(names.contains(&"network ports"), "{names:?}");
        let port = d.iter().find(|x| x.fact == "port mlx5_1").unwrap();
        assert_eq!(
            (port.a.as_deref(), port.b.as_deref()),
            (Some("present"), None)
        );
        assert!(
            !names.iter().any(|n| n.starts_with("port mlx5_1 ")),
            "{names:?}"
        );
    }
}
