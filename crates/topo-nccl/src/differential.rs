//! Field-by-field comparison of topo's analysis with NCCL's own answer for the same machine
//! (`nccl-oracle`, NCCL's `src/graph/*.cc` built for the CPU; see docs/differential.md).
//! Pure: the oracle's answer comes in as data, already read by the caller.

use crate::analyze::Analysis;
use crate::graph::Graph;
use crate::types::Pattern;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the oracle printed for one machine, reduced to the compared fields.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OracleAnswer {
    /// `ring`, `tree`, `nvls`: rank 0's search result.
    pub graphs: BTreeMap<String, OracleGraph>,
    /// `N coll channels, ...` line.
    pub channels: String,
    /// Ring orders after `ncclTopoPostset`, one per channel.
    pub rings: Vec<Vec<usize>>,
    /// Rank 0's `Trees [0] ...` line.
    pub trees: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OracleGraph {
    /// False when NCCL did not search the graph (NVLS without support).
    pub computed: bool,
    /// `Pattern ..., crossNic ..., nChannels ..., bw .../..., type .../..., sameChannels ...`.
    pub line: String,
    /// GPU ranks per channel (NVLS: the head only).
    pub channels: Vec<Vec<usize>>,
}

impl OracleAnswer {
    /// Reduces the oracle's `--json` document to the compared fields.
    pub fn from_oracle_json(v: &serde_json::Value) -> Option<OracleAnswer> {
        let mut graphs = BTreeMap::new();
        for name in GRAPHS {
            let Some(g) = v.get("graphs").and_then(|g| g.get(name)) else {
                continue;
            };
            let computed = g.get("computed").and_then(|c| c.as_bool()).unwrap_or(false);
            graphs.insert(
                name.to_string(),
                OracleGraph {
                    computed,
                    line: if computed {
                        g.get("line")?.as_str()?.to_string()
                    } else {
                        String::new()
                    },
                    channels: if computed {
                        serde_json::from_value(g.get("channels")?.clone()).ok()?
                    } else {
                        vec![]
                    },
                },
            );
        }
        Some(OracleAnswer {
            graphs,
            channels: v.get("channels")?.get("log_line")?.as_str()?.to_string(),
            rings: serde_json::from_value(v.get("rings")?.clone()).ok()?,
            trees: v.get("trees_line")?.as_str()?.to_string(),
        })
    }
}

/// The compared graphs, in NCCL's search order.
pub const GRAPHS: [&str; 3] = ["ring", "tree", "nvls"];

/// The compared fields; a graph's line and channel orders count once per graph.
pub const FIELDS: [&str; 5] = [
    "graph lines",
    "channel orders",
    "channel line",
    "rings",
    "trees",
];

/// One compared item of one machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// One of [`FIELDS`].
    pub field: &'static str,
    /// `ring`, `tree`, `nvls` for graph fields, empty otherwise.
    pub graph: &'static str,
    pub equal: bool,
    pub oracle: String,
    pub topo: String,
}

impl Check {
    /// `field` or `field (graph)`: the name an expected difference is listed under.
    pub fn name(&self) -> String {
        if self.graph.is_empty() {
            self.field.to_string()
        } else {
            format!("{} ({})", self.field, self.graph)
        }
    }
}

fn topo_graph<'a>(a: &'a Analysis, name: &str) -> Option<&'a Graph> {
    match name {
        "ring" => Some(&a.graphs.ring),
        "tree" => Some(&a.graphs.tree),
        // NCCL prints the NVLS graph whenever it searched one, even without channels.
        _ => a.graphs.nvls.as_ref(),
    }
}

fn orders(g: &Graph) -> Vec<Vec<usize>> {
    g.intra
        .iter()
        .take(g.n_channels)
        .map(|c| {
            if g.pattern == Pattern::Nvls {
                c.iter().take(1).copied().collect()
            } else {
                c.clone()
            }
        })
        .collect()
}

/// Rank lists in the launcher's numbers, which NCCL prints (see `Analysis::launcher_ranks`).
fn launcher(a: &Analysis, v: Vec<Vec<usize>>) -> Vec<Vec<usize>> {
    v.into_iter()
        .map(|c| c.into_iter().map(|r| a.launcher_rank(r)).collect())
        .collect()
}

fn show(v: &[Vec<usize>]) -> String {
    v.iter()
        .map(|c| {
            c.iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Compares topo's analysis with the oracle's answer, field by field (as the oracle's
/// `compare.py` does).
pub fn compare(o: &OracleAnswer, a: &Analysis) -> Vec<Check> {
    let mut out = vec![];
    for name in GRAPHS {
        let og = o.graphs.get(name);
        let tg = topo_graph(a, name);
        let oline = match og {
            Some(g) if g.computed => g.line.clone(),
            _ => "(not searched)".to_string(),
        };
        let tline = tg
            .and_then(|g| a.graph_lines(g).into_iter().next())
            .unwrap_or_else(|| "(not searched)".to_string());
        out.push(Check {
            field: FIELDS[0],
            graph: name,
            equal: oline == tline,
            oracle: oline,
            topo: tline,
        });
        if let (Some(og), Some(tg)) = (og.filter(|g| g.computed), tg) {
            let (x, y) = (og.channels.clone(), launcher(a, orders(tg)));
            out.push(Check {
                field: FIELDS[1],
                graph: name,
                equal: x == y,
                oracle: show(&x),
                topo: show(&y),
            });
        }
    }
    let line = a.counts.log_line();
    out.push(Check {
        field: FIELDS[2],
        graph: "",
        equal: o.channels == line,
        oracle: o.channels.clone(),
        topo: line,
    });
    let conn = &a.connection;
    let rings = launcher(
        a,
        (0..conn.n_channels).filter_map(|c| conn.ring(c)).collect(),
    );
    out.push(Check {
        field: FIELDS[3],
        graph: "",
        equal: o.rings == rings,
        oracle: show(&o.rings),
        topo: show(&rings),
    });
    let trees = conn.trees_line_named(0, &a.launcher_ranks);
    out.push(Check {
        field: FIELDS[4],
        graph: "",
        equal: o.trees == trees,
        oracle: o.trees.clone(),
        topo: trees,
    });
    out
}

/// Agreement per field over many machines.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Tally {
    /// Per field: (equal, compared).
    pub fields: BTreeMap<&'static str, (usize, usize)>,
}

impl Tally {
    pub fn add(&mut self, checks: &[Check]) {
        for c in checks {
            let e = self.fields.entry(c.field).or_default();
            e.1 += 1;
            if c.equal {
                e.0 += 1;
            }
        }
    }
    /// `graph lines 600/600, channel orders ...`, in [`FIELDS`] order.
    pub fn summary(&self) -> String {
        FIELDS
            .iter()
            .map(|f| {
                let (e, n) = self.fields.get(f).copied().unwrap_or_default();
                format!("{f} {e}/{n}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}
