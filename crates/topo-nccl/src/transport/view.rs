//! What the plan shows of the transport choice: one compact matrix per host, counts per
//! transport, and NCCL's "Check P2P Type" flags.

use super::{PairTransport, RankPlacement, Transport, TransportPolicy};
use crate::paths::{self, PathPolicy, Paths};
use crate::system::System;
use serde::Serialize;
use std::collections::BTreeMap;

/// Codes used in [`HostMatrix`] cells.
pub const LEGEND: &str = "P2P = P2P write, P2P/R = P2P read, P2P/I = P2P through an \
intermediate GPU, SHM = shared host memory, NET = network; ! = NVLink-connected GPUs that do \
not get NVLink P2P (see the reasons)";

/// Rank × rank transport codes of one host (rows send, columns receive).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostMatrix {
    pub host: u16,
    pub ranks: Vec<usize>,
    /// `cells[i][j]` for `ranks[i] → ranks[j]`: `X` on the diagonal, `-` when not computed.
    pub cells: Vec<Vec<&'static str>>,
    pub anomalies: usize,
}

impl HostMatrix {
    /// Text like `nvidia-smi topo -m`: a header of ranks, one row per sending rank.
    pub fn render(&self) -> String {
        let head: Vec<String> = self.ranks.iter().map(|r| format!("GPU{r}")).collect();
        let w = self
            .cells
            .iter()
            .flatten()
            .map(|c| c.len())
            .chain(head.iter().map(String::len))
            .max()
            .unwrap_or(1)
            + 2;
        let mut out = format!("host {}\n{:w$}", self.host, "");
        for h in &head {
            out.push_str(&format!("{h:<w$}"));
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        for (h, row) in head.iter().zip(&self.cells) {
            out.push_str(&format!("{h:<w$}"));
            for c in row {
                out.push_str(&format!("{c:<w$}"));
            }
            out.truncate(out.trim_end().len());
            out.push('\n');
        }
        out
    }
}

/// One matrix per host from the pairs [`super::select`] returned.
pub fn matrices(sys: &System, pairs: &[PairTransport]) -> Vec<HostMatrix> {
    let nhosts = sys
        .gpus
        .iter()
        .map(|&g| sys.nodes[g].host as usize + 1)
        .max()
        .unwrap_or(0);
    let host_ranks: Vec<Vec<usize>> = (0..nhosts).map(|h| sys.host_gpus(h as u16)).collect();
    // Each host's cells by (position of from, position of to): a map keyed by rank pair
    // hashed 229,376 pairs at 32,768 GPUs. A later entry for a pair wins, as in a map.
    let mut pos = vec![0usize; sys.gpus.len()];
    for ranks in &host_ranks {
        for (i, &r) in ranks.iter().enumerate() {
            pos[r] = i;
        }
    }
    let mut by_pos: Vec<Vec<Option<&PairTransport>>> = host_ranks
        .iter()
        .map(|r| vec![None; r.len() * r.len()])
        .collect();
    for p in pairs {
        let h = sys.gpu(p.from).host as usize;
        if h == sys.gpu(p.to).host as usize {
            let n = host_ranks[h].len();
            by_pos[h][pos[p.from] * n + pos[p.to]] = Some(p);
        }
    }
    host_ranks
        .into_iter()
        .zip(by_pos)
        .enumerate()
        .map(|(h, (ranks, cells_of))| {
            let n = ranks.len();
            let mut anomalies = 0;
            let cells = (0..n)
                .map(|i| {
                    (0..n)
                        .map(|j| {
                            if i == j {
                                return "X";
                            }
                            match cells_of[i * n + j] {
                                Some(p) => {
                                    anomalies += usize::from(p.anomaly.is_some());
                                    p.code()
                                }
                                None => "-",
                            }
                        })
                        .collect()
                })
                .collect();
            HostMatrix {
                host: h as u16,
                ranks,
                cells,
                anomalies,
            }
        })
        .collect()
}

/// Counts per transport (contract names) and of the suffixes that matter.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TransportSummary {
    pub counts: BTreeMap<Transport, usize>,
    pub read: usize,
    pub gdr: usize,
    pub pxn: usize,
    pub anomalies: usize,
}

impl TransportSummary {
    /// `P2P/CUMEM 56, NET/IB 16 (GDRDMA 16, PXN 0), 0 anomalies`.
    pub fn render(&self) -> String {
        let mut parts: Vec<String> = self
            .counts
            .iter()
            .map(|(k, v)| {
                if k.is_net() {
                    format!("{k} {v} (GDRDMA {}, PXN {})", self.gdr, self.pxn)
                } else if k.is_p2p() && self.read > 0 {
                    format!("{k} {v} (read {})", self.read)
                } else {
                    format!("{k} {v}")
                }
            })
            .collect();
        parts.push(format!(
            "{} anomal{}",
            self.anomalies,
            if self.anomalies == 1 { "y" } else { "ies" }
        ));
        parts.join(", ")
    }
}

pub fn summary(pairs: &[PairTransport]) -> TransportSummary {
    let mut s = TransportSummary::default();
    // Counted by runs of one transport: neighbouring pairs mostly share theirs, and a map
    // entry (a clone and a search) per pair was a fiftieth of a 16,384-node plan.
    for run in pairs.chunk_by(|a, b| a.transport == b.transport) {
        *s.counts.entry(run[0].transport.clone()).or_default() += run.len();
    }
    for p in pairs {
        s.read += usize::from(p.read);
        s.gdr += usize::from(p.gdr());
        s.pxn += usize::from(p.proxy().is_some());
        s.anomalies += usize::from(p.anomaly.is_some());
    }
    s
}

/// NCCL's "Check P2P Type" flags for one node (`ncclTransportCheckP2pType`, src/transport.cc).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct P2pTypeCheck {
    /// The ranks NCCL counts as local to each other (one host, or one rank per container
    /// without a common host id).
    pub ranks: Vec<usize>,
    /// 2.27+: every local pair passes `ncclTopoCheckP2p` without an intermediate GPU.
    /// 2.24-2.26 (`intraNodeP2pSupport`): every local pair passes P2P `canConnect`.
    pub is_all_direct_p2p: bool,
    /// Some pair of local ranks shares a process.
    pub direct_mode: bool,
    /// 2.28+: every local pair has CUDA P2P (NVML read and write OK), whatever the level.
    pub is_all_cuda_p2p: Option<bool>,
    /// The INFO line as the version prints it; `None` before 2.24.
    pub log_line: Option<String>,
}

/// The flags per node. Versions: 2.24-2.26 `intraNodeP2pSupport %d directMode %d` (rank 0),
/// 2.27 `isAllDirectP2p %d directMode %d` (rank 0), 2.28+ `... isAllCudaP2p %d` (all ranks).
/// Up to 2.27 a node with one rank reports no P2P support; from 2.28 it reports 1. (2.28.3
/// still printed the 2.27 form; the three-flag form is that of 2.28.7 and later.)
pub fn check_p2p_type(
    sys: &System,
    paths: &Paths,
    path_policy: &PathPolicy,
    tp: &TransportPolicy,
) -> Vec<P2pTypeCheck> {
    p2p_type_checks(sys, paths, path_policy, tp, usize::MAX)
}

/// [`check_p2p_type`] of the first node only: the line a plan prints (rank 0's), without
/// checking every pair of 16,384 other nodes.
pub fn check_p2p_type_first(
    sys: &System,
    paths: &Paths,
    path_policy: &PathPolicy,
    tp: &TransportPolicy,
) -> Option<P2pTypeCheck> {
    p2p_type_checks(sys, paths, path_policy, tp, 1).pop()
}

fn p2p_type_checks(
    sys: &System,
    paths: &Paths,
    path_policy: &PathPolicy,
    tp: &TransportPolicy,
    nodes: usize,
) -> Vec<P2pTypeCheck> {
    let ctx = super::Ctx::new(sys, paths, path_policy, tp);
    let minor = tp.minor;
    let nhosts = sys
        .gpus
        .iter()
        .map(|&g| sys.nodes[g].host as usize + 1)
        .max()
        .unwrap_or(0);
    let groups: Vec<Vec<usize>> = if tp.placement.node_per_rank() {
        (0..sys.gpus.len()).take(nodes).map(|r| vec![r]).collect()
    } else {
        (0..nhosts)
            .take(nodes)
            .map(|h| sys.host_gpus(h as u16))
            .collect()
    };
    let isolated = ctx.pp.isolated_ranks;
    groups
        .into_iter()
        .map(|ranks| {
            let mut all_direct = true;
            let mut all_cuda = true;
            for (i, &a) in ranks.iter().enumerate() {
                for &b in &ranks[i + 1..] {
                    let ok = if minor <= 26 {
                        matches!(ctx.p2p(a, b, ranks.len()), super::P2pOutcome::Accept { .. })
                    } else {
                        let c = paths::check_p2p(sys, paths, &ctx.pp, a, b);
                        !isolated && c.p2p && c.intermediate.is_none()
                    };
                    all_direct &= ok;
                    // cudaDeviceCanAccessPeer answers 0 where the driver refuses peer
                    // access (GeForce RTX 4090/5090; `Gpu::peer_access`).
                    let no_peer = [a, b]
                        .iter()
                        .any(|&r| sys.gpu(r).gpu.as_ref().is_some_and(|g| g.no_p2p.is_some()));
                    let cuda = !isolated
                        && !no_peer
                        && (ctx.pp.ignore_disabled_p2p == 2
                            || sys
                                .p2p_caps(a, b)
                                .is_none_or(|c| c.read != Some(false) && c.write != Some(false)));
                    all_cuda &= cuda;
                }
            }
            if ranks.len() <= 1 && minor <= 27 {
                all_direct = false;
            }
            let direct_mode = tp.placement == RankPlacement::ProcessPerHost && ranks.len() >= 2;
            let (d, m, c) = (
                u8::from(all_direct),
                u8::from(direct_mode),
                u8::from(all_cuda),
            );
            let log_line = match minor {
                0..=23 => None,
                24..=26 => Some(format!(
                    "Check P2P Type intraNodeP2pSupport {d} directMode {m}"
                )),
                27 => Some(format!("Check P2P Type isAllDirectP2p {d} directMode {m}")),
                _ => Some(format!(
                    "Check P2P Type isAllDirectP2p {d} directMode {m} isAllCudaP2p {c}"
                )),
            };
            P2pTypeCheck {
                ranks,
                is_all_direct_p2p: all_direct,
                direct_mode,
                is_all_cuda_p2p: (minor >= 28).then_some(all_cuda),
                log_line,
            }
        })
        .collect()
}
