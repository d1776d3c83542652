//! The graph XML NCCL reads from `NCCL_GRAPH_FILE` and writes to `NCCL_GRAPH_DUMP_FILE`
//! (§2.7; `ncclTopoGetXmlFromGraphs`, search.cc, and `ncclTopoDumpXmlRec`, xml.cc), so a user
//! can pin the rings and trees topo predicts.

use super::graph::Graph;
use super::search::Graphs;
use super::system::System;
use super::types::{GraphId, PathType, Pattern};

/// `%g` of a C `float` promoted to double (6 significant digits, trailing zeros removed).
pub fn fmt_g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() {
            "0".into()
        } else {
            format!("{v}")
        };
    }
    let e = v.abs().log10().floor() as i32;
    if !(-4..6).contains(&e) {
        let s = format!("{:.5e}", v);
        // Rust writes `1.00000e7`; C writes `1e+07`.
        let (m, x) = s.split_once('e').unwrap_or((&s, "0"));
        let m = strip(m);
        let x: i32 = x.parse().unwrap_or(0);
        return format!("{m}e{}{:02}", if x < 0 { '-' } else { '+' }, x.abs());
    }
    let decimals = (5 - e).max(0) as usize;
    strip(&format!("{v:.decimals$}"))
}

fn strip(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// `%#lx`: `0` for zero, `0x…` otherwise.
fn hex(v: u64) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// The graph-file dictionary has no C2C; NCCL itself could not write it.
fn type_name(t: PathType) -> &'static str {
    t.name()
}

fn empty(id: GraphId, pattern: Pattern) -> Graph {
    let mut g = Graph::empty(id, pattern);
    g.type_intra = PathType::Loc;
    g.type_inter = PathType::Loc;
    g.same_channels = false;
    g
}

/// What the graph file lists, as data: each graph's attributes and, per channel, its devices
/// in order. Gathered with the plan (a copy of host 0's few channels), written out as XML
/// only when asked ([`GraphFile::xml`], `topo plan --format nccl-graph`), as the tuner CSV is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GraphFile {
    graphs: Vec<FileGraph>,
    /// NCCL's minor version: how devices are printed.
    minor: u32,
}

#[derive(Clone, Debug, PartialEq)]
struct FileGraph {
    head: Graph,
    /// Per channel, the devices the file names in order.
    channels: Vec<Vec<Device>>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Device {
    Net(u64),
    Gpu { dev: u64, rank: usize },
}

/// The graphs as NCCL dumps them: ring, tree, CollNet direct, CollNet chain, NVLS (graphs
/// that were not computed appear empty, as in NCCL's dump). Devices are those of host 0.
pub fn write(graphs: &Graphs, sys: &System, minor: u32) -> String {
    GraphFile::of(graphs, sys, minor).xml()
}

impl GraphFile {
    /// The file's content for `graphs` on `sys`, in [`write`]'s order.
    pub fn of(graphs: &Graphs, sys: &System, minor: u32) -> GraphFile {
        let collnet_direct = graphs
            .collnet_direct
            .clone()
            .unwrap_or_else(|| empty(GraphId::CollnetDirect, Pattern::CollnetDirect));
        let collnet_chain = graphs
            .collnet_chain
            .clone()
            .unwrap_or_else(|| empty(GraphId::CollnetChain, Pattern::Tree));
        let nvls = graphs
            .nvls
            .clone()
            .unwrap_or_else(|| empty(GraphId::Nvls, Pattern::Nvls));
        let list = [
            &graphs.ring,
            &graphs.tree,
            &collnet_direct,
            &collnet_chain,
            &nvls,
        ];
        GraphFile {
            graphs: list
                .into_iter()
                .map(|g| FileGraph::of(g, sys, graphs.inter))
                .collect(),
            minor,
        }
    }

    /// The file as NCCL writes it (`ncclTopoDumpXmlRec`, xml.cc).
    pub fn xml(&self) -> String {
        let mut out = String::from("<graphs version=\"1\">\n");
        for g in &self.graphs {
            g.write(&mut out, self.minor);
        }
        out.push_str("</graphs>\n");
        out
    }
}

impl FileGraph {
    fn of(g: &Graph, sys: &System, inter: bool) -> FileGraph {
        let net_dev = |i: usize| -> u64 {
            let Some(n) = sys.nets.get(i).map(|&n| &sys.nodes[n]) else {
                return 0;
            };
            n.net.as_ref().map(|a| a.dev.max(0) as u64).unwrap_or(n.id)
        };
        let channels = (0..g.n_channels)
            .map(|c| {
                let mut devs = vec![];
                let ends = g.inter.get(c).copied().filter(|_| inter);
                if let Some((a, _)) = ends {
                    devs.push(Device::Net(net_dev(a)));
                }
                for &r in g.intra.get(c).map(Vec::as_slice).unwrap_or(&[]) {
                    let dev = sys
                        .gpus
                        .get(r)
                        .and_then(|&n| sys.nodes[n].gpu.as_ref())
                        .map(|a| a.dev.max(0) as u64)
                        .unwrap_or(r as u64);
                    devs.push(Device::Gpu { dev, rank: r });
                    if g.id == GraphId::Nvls {
                        break;
                    }
                }
                if let Some((_, b)) = ends {
                    devs.push(Device::Net(net_dev(b)));
                }
                devs
            })
            .collect();
        let mut head = g.clone();
        // The channels above hold all the file needs of them.
        head.intra = vec![];
        head.inter = vec![];
        FileGraph { head, channels }
    }

    fn write(&self, out: &mut String, minor: u32) {
        let g = &self.head;
        let head = format!(
            "  <graph id=\"{}\" pattern=\"{}\" crossnic=\"{}\" nchannels=\"{}\" speedintra=\"{}\" speedinter=\"{}\" latencyinter=\"{}\" typeintra=\"{}\" typeinter=\"{}\" samechannels=\"{}\"",
            g.id as u32,
            g.pattern.number(),
            g.cross_nic,
            g.n_channels,
            fmt_g(g.bw_intra),
            fmt_g(g.bw_inter),
            fmt_g(g.latency_inter),
            type_name(g.type_intra),
            type_name(g.type_inter),
            u8::from(g.same_channels)
        );
        out.push_str(&head);
        if g.n_channels == 0 {
            out.push_str("/>\n");
            return;
        }
        out.push_str(">\n");
        // 2.21 on print device numbers in hex (`%#lx`).
        let num = |dev: u64| {
            if minor >= 21 {
                hex(dev)
            } else {
                dev.to_string()
            }
        };
        for devs in &self.channels {
            out.push_str("    <channel>\n");
            for d in devs {
                out.push_str("      ");
                match *d {
                    Device::Net(dev) => out.push_str(&format!("<net dev=\"{}\"/>", num(dev))),
                    // 2.30 writes each GPU's rank too.
                    Device::Gpu { dev, rank } if minor >= 30 => {
                        out.push_str(&format!("<gpu dev=\"{}\" rank=\"{rank}\"/>", num(dev)))
                    }
                    Device::Gpu { dev, .. } => {
                        out.push_str(&format!("<gpu dev=\"{}\"/>", num(dev)))
                    }
                }
                out.push('\n');
            }
            out.push_str("    </channel>\n");
        }
        out.push_str("  </graph>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::tests::plan;
    use topo_model::testing::hgx;

    #[test]
    fn single_node_graph_file() {
        let p = plan(&hgx(8, 90), 28);
        let xml = write(&p.graphs, &p.sys, 28);
        assert!(xml.starts_with("<graphs version=\"1\">\n  <graph id=\"0\" pattern=\"4\" crossnic=\"0\" nchannels=\"12\" speedintra=\"30\" speedinter=\"30\" latencyinter=\"0\" typeintra=\"NVL\" typeinter=\"PIX\" samechannels=\"1\">"));
        insta::assert_snapshot!("graphfile_hgx_h100_single_node", xml);
    }

    #[test]
    fn two_node_graph_file() {
        let p = plan(&hgx(8, 90).replicate(2), 28);
        let xml = write(&p.graphs, &p.sys, 28);
        assert!(xml.contains(
            "<channel>\n      <net dev=\"0\"/>\n      <gpu dev=\"0\"/>\n      <gpu dev=\"0x7\"/>"
        ));
        insta::assert_snapshot!("graphfile_hgx_h100_two_nodes", xml);
        // 2.30 writes the rank too; ≤2.20 decimal device numbers.
        assert!(write(&p.graphs, &p.sys, 30).contains("<gpu dev=\"0x7\" rank=\"7\"/>"));
        assert!(write(&p.graphs, &p.sys, 18).contains("<gpu dev=\"7\"/>"));
    }

    #[test]
    fn printf_g_matches_c() {
        assert_eq!(fmt_g(30.0), "30");
        assert_eq!(fmt_g(45.1f32 as f64), "45.1");
        assert_eq!(fmt_g(17.5), "17.5");
        assert_eq!(fmt_g(0.1f32 as f64), "0.1");
        assert_eq!(fmt_g(0.0), "0");
        assert_eq!(fmt_g(0.24f32 as f64), "0.24");
        assert_eq!(fmt_g(1234567.0), "1.23457e+06");
        assert_eq!(hex(0), "0");
        assert_eq!(hex(7), "0x7");
    }
}
