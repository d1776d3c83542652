//! Graphviz DOT of the model: a cluster per host and per NUMA node, PCIe edges labelled with
//! generation and width, NVLink edges with lanes and GB/s. Nodes and edges come out in model
//! order, so the same topology gives the same bytes.

use super::model::Ctx;
use super::pci::gen_width;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use std::collections::HashMap;
use topo_model::{LinkKind, NodeKind};

fn q(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn node_line(ctx: &Ctx, n: NodeIndex, id: &str, indent: &str) -> String {
    let node = ctx.topo.node(n);
    let (label, attrs) = match &node.kind {
        NodeKind::Cpu(c) => {
            let cpus = super::model::cpu_list(c)
                .map(|l| format!("\\nCPUs {l}"))
                .unwrap_or_default();
            let numa = if c.numa >= 0 {
                c.numa.to_string()
            } else {
                "?".to_string()
            };
            (
                format!("CPU / NUMA {numa}{cpus}"),
                "shape=box3d, fillcolor=\"#f2f2f2\"",
            )
        }
        NodeKind::PciSwitch(p) => (
            format!("PCIe switch\\n{}", p.busid),
            "fillcolor=\"#eeeeee\"",
        ),
        NodeKind::Gpu(g) => {
            let name = g
                .name
                .clone()
                .or_else(|| super::pci::model_name(g.vendor, g.device).map(str::to_string))
                .unwrap_or_else(|| "GPU".into());
            (
                format!("{}\\n{name}\\n{}", ctx.label(n), g.busid),
                "fillcolor=\"#d9f2b3\"",
            )
        }
        NodeKind::NvSwitch(s) => {
            let b = s
                .busid
                .map(|b| b.to_string())
                .unwrap_or_else(|| "hidden".into());
            (
                format!("NVSwitch\\n{b}"),
                "shape=hexagon, fillcolor=\"#b3e08a\"",
            )
        }
        NodeKind::Nic(x) => {
            let b = x
                .busid
                .map(|b| b.to_string())
                .unwrap_or_else(|| "no PCI location".into());
            (format!("NIC\\n{b}"), "fillcolor=\"#cde4f7\"")
        }
        NodeKind::Net(x) => {
            let speed = x
                .speed_mbps
                .map(|m| format!("\\n{} Gb/s", super::pci::fmt_gbps(m)))
                .unwrap_or_default();
            (
                format!("{}{speed}", x.name),
                "shape=ellipse, fillcolor=\"#cde4f7\"",
            )
        }
        NodeKind::PciDevice(d) => (
            format!("{}\\n{}", topo_model::class::describe(d.class), d.busid),
            "fillcolor=\"#ffffff\", fontcolor=\"#666666\"",
        ),
    };
    format!(
        "{indent}{} [label={}, {attrs}];\n",
        q(id),
        q(&label).replace("\\\\n", "\\n")
    )
}

pub(crate) fn render(ctx: &Ctx) -> String {
    let topo = ctx.topo;
    let keys = ctx.node_keys();
    let id = |n: NodeIndex| -> String {
        let k = keys.get(&n).cloned().unwrap_or_default();
        if ctx.multi_host() {
            format!("h{}/{k}", topo.node(n).host)
        } else {
            k
        }
    };
    let mut out = String::from("digraph topo {\n");
    out.push_str("  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11];\n");
    out.push_str(
        "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n",
    );
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=9];\n");
    // Which NUMA cluster each node belongs in (its root CPU), or the host cluster.
    let mut in_cpu: HashMap<NodeIndex, Vec<NodeIndex>> = HashMap::new();
    let mut loose: HashMap<u16, Vec<NodeIndex>> = HashMap::new();
    for n in topo.graph.node_indices() {
        match topo.root_cpu(n) {
            Some(c) => in_cpu.entry(c).or_default().push(n),
            None => loose.entry(topo.node(n).host).or_default().push(n),
        }
    }
    for hv in &ctx.hosts {
        out.push_str(&format!(
            "  subgraph {} {{\n",
            q(&format!("cluster_h{}", hv.host))
        ));
        out.push_str(&format!("    label={};\n", q(&ctx.host_name(hv.host))));
        for &c in &hv.cpus {
            let numa = topo.cpu(c).map(|x| x.numa).unwrap_or(-1);
            out.push_str(&format!(
                "    subgraph {} {{\n",
                q(&format!("cluster_h{}_numa{}", hv.host, c.index()))
            ));
            out.push_str(&format!(
                "      label={};\n",
                q(&if numa >= 0 {
                    format!("NUMA {numa}")
                } else {
                    "NUMA ?".to_string()
                })
            ));
            for &n in in_cpu.get(&c).map(|v| v.as_slice()).unwrap_or(&[]) {
                out.push_str(&node_line(ctx, n, &id(n), "      "));
            }
            out.push_str("    }\n");
        }
        for &n in loose.get(&hv.host).map(|v| v.as_slice()).unwrap_or(&[]) {
            out.push_str(&node_line(ctx, n, &id(n), "    "));
        }
        out.push_str("  }\n");
    }
    // PCIe tree edges, parent to child, once each.
    for n in topo.graph.node_indices() {
        let node = topo.node(n);
        let Some(p) = node.parent else { continue };
        let attrs = match &node.kind {
            NodeKind::Net(x) => {
                format!(
                    "label={}, style=dashed, arrowhead=none",
                    q(&format!("port {}", x.port))
                )
            }
            _ => match node.pcie().filter(|_| node.busid().is_some()) {
                Some(l) => {
                    let label = format!(
                        "{}\\n{:.1} GB/s",
                        gen_width(l.speed.as_deref(), l.width),
                        l.bw()
                    );
                    format!("label={}", q(&label).replace("\\\\n", "\\n"))
                }
                None => String::new(),
            },
        };
        out.push_str(&format!("  {} -> {} [{attrs}];\n", q(&id(p)), q(&id(n))));
    }
    // NVLink, C2C, inter-CPU and switch-local links, once per pair.
    for e in topo.graph.edge_references() {
        let (a, b, w) = (e.source(), e.target(), e.weight());
        let (an, bn) = (&topo.node(a).kind, &topo.node(b).kind);
        let label = |name: &str| -> String {
            let lanes = if w.lanes > 0 {
                format!(" ×{}", w.lanes)
            } else {
                String::new()
            };
            q(&format!("{name}{lanes}\\n{:.1} GB/s", w.bw)).replace("\\\\n", "\\n")
        };
        let line = match w.kind {
            LinkKind::NvLink => {
                let emit = match (an, bn) {
                    (NodeKind::Gpu(_), NodeKind::Gpu(_)) => {
                        // One-directional declarations: draw the pair once, from the lower index,
                        // or from whichever side declared it when only one did.
                        a < b
                            || !topo
                                .graph
                                .edges_connecting(b, a)
                                .any(|x| x.weight().kind == LinkKind::NvLink)
                    }
                    (NodeKind::Gpu(_), _) => true,
                    _ => false,
                };
                emit.then(|| {
                    format!(
                        "  {} -> {} [label={}, dir=none, color=\"#76b900\", penwidth=2];\n",
                        q(&id(a)),
                        q(&id(b)),
                        label("NVLink")
                    )
                })
            }
            LinkKind::C2c => matches!(an, NodeKind::Gpu(_)).then(|| {
                format!(
                    "  {} -> {} [label={}, dir=none, color=\"#76b900\"];\n",
                    q(&id(a)),
                    q(&id(b)),
                    label("C2C")
                )
            }),
            LinkKind::Sys => (a < b).then(|| {
                format!(
                    "  {} -> {} [label={}, dir=none, style=dashed, constraint=false];\n",
                    q(&id(a)),
                    q(&id(b)),
                    label("SYS")
                )
            }),
            LinkKind::Loc => (a < b).then(|| {
                format!(
                    "  {} -> {} [label={}, dir=none, style=dotted];\n",
                    q(&id(a)),
                    q(&id(b)),
                    label("LOC")
                )
            }),
            LinkKind::Pci | LinkKind::Net => None,
        };
        if let Some(l) = line {
            out.push_str(&l);
        }
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use topo_model::testing::hgx;

    #[test]
    fn hgx_dot_has_clusters_and_labelled_links() {
        let t = hgx(2, 90);
        let ctx = Ctx::new(&t);
        let d = render(&ctx);
        assert!(d.starts_with("digraph topo {\n"));
        assert!(d.contains("subgraph \"cluster_h0_numa0\""));
        assert!(
            d.contains("\"GPU0\" -> \"NVSwitch 0000:05:00.0\" [label=\"NVLink ×5\\n103.0 GB/s\""),
            "{d}"
        );
        assert!(
            d.contains("\"0000:10:00.0\" -> \"GPU0\" [label=\"Gen5 x16\\n48.0 GB/s\"]"),
            "{d}"
        );
        assert_eq!(d.matches(" -> ").count(), 2 * 4 + 2 * 4);
        assert_eq!(render(&ctx), d);
    }

    #[test]
    fn direct_nvlink_pair_drawn_once() {
        let t = nvlink_bridge();
        let d = render(&Ctx::new(&t));
        assert_eq!(d.matches("NVLink ×4").count(), 1, "{d}");
    }
}
