//! The `=== System : maxBw … totalBw … ===` block (NCCL_DEBUG_SUBSYS=GRAPH) as the log
//! prints it: one [`SysLine`] per node line, gathered per process while the log is read.

use super::evidence::{Evidence, Prefix};
use serde::Serialize;

/// One node line of the dump.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SysLine {
    /// Indentation column of the line (0 for a CPU root).
    pub indent: usize,
    /// Link type and bandwidth towards the parent (`PCI`, 0.2); `None` for a root CPU.
    pub link: Option<(String, f64)>,
    /// `CPU`, `PCI`, `GPU`, `NIC`, `NET`, `NVS`.
    pub kind: String,
    pub sys: u64,
    pub id: u64,
    /// The parenthesised part (`104c823200000000`, `8`, `0/d4f9.../1/50.000000`).
    pub extra: String,
    pub evidence: Evidence,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SystemDump {
    pub header: Evidence,
    pub max_bw: Option<f64>,
    pub total_bw: Option<f64>,
    pub nodes: Vec<SysLine>,
    pub complete: bool,
    /// Whether the block went past [`MAX_DUMP_LINES`] and the rest was ignored.
    #[serde(skip)]
    pub overflow: bool,
}

/// The most node lines of a `=== System` block kept: six kinds of at most
/// [`topo_model::MAX_PER_HOST`] each for one host, twice over. Each line is a child whose link
/// NCCL's model checks against its parent's others, so an unbounded block was quadratic
/// (4 MiB took 5.9 s); a real 8-GPU dump has about 50 lines.
pub const MAX_DUMP_LINES: usize = 12 * topo_model::MAX_PER_HOST;

/// Gathers the first `=== System` block of one process, skipping other ranks' interleaved
/// lines.
#[derive(Default)]
pub(super) struct SystemCollector {
    key: Option<(String, Option<u64>)>,
    dump: Option<SystemDump>,
    done: bool,
}

impl SystemCollector {
    /// Whether the line belonged to the block being collected.
    pub fn feed(&mut self, p: &Prefix, msg: &str, n: usize, line: &str) -> bool {
        if self.done {
            return false;
        }
        let t = msg.trim();
        let Some(key) = &self.key else {
            return self.start(p, t, n, line);
        };
        if key.0 != p.host || key.1 != p.pid {
            return false;
        }
        if t.starts_with("====") {
            self.done = true;
            if let Some(d) = &mut self.dump {
                d.complete = true;
            }
            return true;
        }
        match node_line(msg, n, line) {
            Some(node) => {
                if let Some(d) = &mut self.dump {
                    if d.nodes.len() == MAX_DUMP_LINES {
                        d.overflow = true;
                        self.done = true;
                        return true;
                    }
                    d.nodes.push(node);
                }
                true
            }
            None => false,
        }
    }

    /// The `=== System` header line starts the block of its process.
    fn start(&mut self, p: &Prefix, t: &str, n: usize, line: &str) -> bool {
        let Some(rest) = t.strip_prefix("=== System") else {
            return self.start_partial(p, t, n, line);
        };
        let toks: Vec<&str> = rest.split_whitespace().collect();
        let num = |k: &str| {
            toks.windows(2)
                .find(|w| w[0] == k)
                .and_then(|w| w[1].parse().ok())
        };
        self.dump = Some(SystemDump {
            header: Evidence {
                line: n,
                text: line.to_string(),
            },
            max_bw: num("maxBw"),
            total_bw: num("totalBw"),
            nodes: vec![],
            complete: false,
            overflow: false,
        });
        self.key = Some((p.host.to_string(), p.pid));
        true
    }

    /// An excerpt that starts inside the block: its first root line (`CPU/0 (1/1/2)`) opens
    /// a partial dump, header unknown.
    fn start_partial(&mut self, p: &Prefix, t: &str, n: usize, line: &str) -> bool {
        if !t.starts_with("CPU/") {
            return false;
        }
        let Some(node) = node_line(t, n, line).filter(|x| x.link.is_none()) else {
            return false;
        };
        self.dump = Some(SystemDump {
            header: Evidence {
                line: n,
                text: line.to_string(),
            },
            max_bw: None,
            total_bw: None,
            nodes: vec![node],
            complete: false,
            overflow: false,
        });
        self.key = Some((p.host.to_string(), p.pid));
        true
    }

    pub fn finish(self, missing: &mut Vec<String>) -> Option<SystemDump> {
        let d = self.dump?;
        if d.overflow {
            missing.push(format!(
                "the `=== System` block has more than {MAX_DUMP_LINES} device lines: the rest is ignored"
            ));
        } else if !d.complete {
            missing.push(
                "the `=== System` block is cut short: the topology from it is partial".into(),
            );
        }
        Some(d)
    }
}

/// `+ PCI[0.2] - PCI/0-65000 (104c823200000000)` or `CPU/0-0 (1/2/-1)`.
fn node_line(msg: &str, n: usize, line: &str) -> Option<SysLine> {
    let indent = msg.len() - msg.trim_start().len();
    let t = msg.trim();
    let (link, node) = match t.strip_prefix("+ ") {
        Some(rest) => {
            let (l, node) = rest.split_once(" - ")?;
            let (ty, bwv) = l.split_once('[')?;
            let bwv: f64 = bwv.trim_end_matches(']').parse().ok()?;
            (Some((ty.to_string(), bwv)), node)
        }
        None => (None, t),
    };
    let (name, extra) = match node.split_once(' ') {
        Some((a, b)) => (a, b.trim().trim_start_matches('(').trim_end_matches(')')),
        None => (node, ""),
    };
    let (kind, ids) = name.split_once('/')?;
    if !matches!(kind, "CPU" | "PCI" | "GPU" | "NIC" | "NET" | "NVS") {
        return None;
    }
    let (sys, id) = match ids.split_once('-') {
        Some((s, i)) => (
            u64::from_str_radix(s, 16).ok()?,
            u64::from_str_radix(i, 16).ok()?,
        ),
        None => (0, u64::from_str_radix(ids, 16).ok()?),
    };
    Some(SysLine {
        indent,
        link,
        kind: kind.to_string(),
        sys,
        id,
        extra: extra.to_string(),
        evidence: Evidence {
            line: n,
            text: line.to_string(),
        },
    })
}
