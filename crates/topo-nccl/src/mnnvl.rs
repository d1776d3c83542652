//! Multi-node NVLink (MNNVL): whether NCCL joins the hosts of one NVLink fabric clique into
//! one node, and which hosts it joins (GB200/GB300 NVL72: up to 18 trays of 4 GPUs).
//!
//! The rules mirror NCCL 2.28.9: `initTransportsRank` (src/init.cc) runs `ncclMnnvlCheck`
//! (src/mnnvl.cc) when the ranks span more than one host, `NCCL_MNNVL_ENABLE` is not 0 and
//! P2P is not disabled, or always with `NCCL_MNNVL_ENABLE=1`. The check needs cuMem, every
//! rank's fabric registration completed and a non-zero cluster UUID; a rank's clique is every
//! rank with the same cluster UUID and clique id (`fillInfo` lets `NCCL_MNNVL_UUID` and
//! `NCCL_MNNVL_CLIQUE_ID` replace NVML's, `-2` meaning one clique per rack), and MNNVL is on
//! when that clique holds more than one rank. `ncclTopoGetSystem` (src/graph/topo.cc) then
//! fuses the clique's topologies into one system with one NVSwitch, so NCCL counts each
//! clique as one node (nNodes is the number of distinct ring starts) with the clique's ranks
//! as local ranks, P2P runs over NVLink between trays (`P2P/MNNVL`, src/transport/p2p.cc),
//! NVLS spans the clique and uses the single-domain channel count when one clique holds every
//! rank (src/transport/nvls.cc). In the fused system's search, `NCCL_MNNVL_RAIL_PER_HOST=1`
//! (2.28.7+, `ncclTopoSearchCheckNet` in src/graph/search.cc) lets a crossNic=0 channel come
//! back by another host's NIC in the same PCI slot (search.rs `check_net`).
//!
//! Not modelled: the IMEX channel check (a working fabric-handle export is assumed; NCCL
//! stops with "MNNVL ... is available but not working" otherwise), health masks, and
//! cross-clique P2P (`NCCL_MNNVL_CROSS_CLIQUE`, 2.29+).

use super::env::EnvPolicy;
use super::version::VersionData;
use crate::transport::{P2p, Transport};
use std::collections::HashMap;
use std::sync::Arc;
use topo_model::{HostId, NodeKind, Topology};

/// NCCL's decision for a job.
#[derive(Clone, Debug, PartialEq)]
pub struct Mnnvl {
    /// Each fused NCCL node: the original hosts (trays) of one clique, in host order.
    pub cliques: Vec<Vec<HostId>>,
    /// GPUs in rank 0's clique (`cliqueSize` in NCCL's `MNNVL 1 cliqueId ... cliqueSize` line).
    pub clique_size: usize,
    /// Rank 0's clique id as NCCL prints it.
    pub clique_id: u32,
}

/// The outcome: MNNVL on, or off with the reason (`None` when the question never arises, a
/// single host without `NCCL_MNNVL_ENABLE=1`).
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    On(Mnnvl),
    Off(Option<String>),
}

/// Rank 0's MNNVL decision for `topo` (hosts as the launcher sees them). `cumem` is NCCL's
/// cuMem decision with its reason.
pub fn decide(
    topo: &Topology,
    env: &EnvPolicy,
    data: &VersionData,
    cumem: (bool, &str),
) -> Decision {
    let gpus = topo.gpus();
    let mut hosts: Vec<HostId> = gpus.iter().map(|&g| topo.graph[g].host).collect();
    hosts.dedup();
    hosts.sort_unstable();
    hosts.dedup();
    let enable = env.mnnvl_enable.unwrap_or(2);
    let p2p_off = env.p2p_disable || env.p2p_level == Some(super::types::PathType::Loc);
    let asked = (hosts.len() > 1 && enable != 0 && !p2p_off) || enable == 1;
    let has_fabric = gpus
        .iter()
        .any(|&g| topo.gpu(g).is_some_and(|x| x.fabric.is_some()));
    if !asked {
        return Decision::Off((hosts.len() > 1 && has_fabric).then(|| {
            if enable == 0 {
                "NCCL_MNNVL_ENABLE=0".to_string()
            } else {
                "P2P is disabled (NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC)".to_string()
            }
        }));
    }
    if !data.rules.mnnvl {
        return Decision::Off(Some(format!(
            "NCCL {} predates multi-node NVLink (2.20)",
            data.version
        )));
    }
    if !cumem.0 {
        return Decision::Off(Some(format!(
            "MNNVL needs cuMem, which is off ({})",
            cumem.1
        )));
    }
    // (cluster UUID, clique id) of every rank, with the overrides of `fillInfo`.
    let mut keys: Vec<(HostId, String, u32)> = Vec::with_capacity(gpus.len());
    for &g in &gpus {
        let host = topo.graph[g].host;
        let Some(f) = topo.gpu(g).and_then(|x| x.fabric.as_ref()) else {
            return Decision::Off(
                has_fabric.then(|| "a GPU reports no NVLink fabric registration".into()),
            );
        };
        if f.state != "completed" {
            return Decision::Off(Some(format!(
                "a GPU's fabric registration is {} (NCCL needs every rank completed)",
                f.state
            )));
        }
        let uuid = match env.mnnvl_uuid {
            Some(v) if v != -1 => format!("{v:x}"),
            _ => f.cluster_uuid.clone(),
        };
        if uuid
            .trim_matches(|c: char| c == '0' || c == '.' || c == '-')
            .is_empty()
        {
            return Decision::Off(Some("a GPU reports a zero fabric cluster UUID".into()));
        }
        let clique = match env.mnnvl_clique_id {
            // One clique per rack: here a rack is one fabric, so the UUID alone decides.
            Some(-2) => 0,
            Some(v) if v != -1 => v as u32,
            _ => f.clique_id,
        };
        keys.push((host, uuid, clique));
    }
    let Some((_, uuid0, clique0)) = keys.first().cloned() else {
        return Decision::Off(None);
    };
    let clique_size = keys
        .iter()
        .filter(|(_, u, c)| *u == uuid0 && *c == clique0)
        .count();
    if clique_size <= 1 {
        return Decision::Off(Some("rank 0's clique holds no other rank".into()));
    }
    let mut groups: Vec<((String, u32), Vec<HostId>)> = vec![];
    for (host, uuid, clique) in keys {
        let key = (uuid, clique);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, hs)) => {
                if !hs.contains(&host) {
                    hs.push(host);
                }
            }
            None => groups.push((key, vec![host])),
        }
    }
    let cliques: Vec<Vec<HostId>> = groups.into_iter().map(|(_, h)| h).collect();
    let mut seen = std::collections::HashSet::new();
    if cliques.iter().flatten().any(|h| !seen.insert(*h)) {
        return Decision::Off(Some(
            "one host's GPUs sit in different cliques, which topo does not model".into(),
        ));
    }
    Decision::On(Mnnvl {
        cliques,
        clique_size,
        clique_id: clique0,
    })
}

/// The host (tray) and NVML index of every rank, read before any fusion.
pub fn trays(topo: &Topology) -> Vec<(HostId, i32)> {
    topo.gpus()
        .into_iter()
        .filter_map(|g| match &topo.graph[g].kind {
            NodeKind::Gpu(x) => Some((topo.graph[g].host, x.dev)),
            _ => None,
        })
        .collect()
}

/// NCCL's names for the connections of an MNNVL communicator: with `comm->MNNVL` set every
/// cuMem P2P connection prints `P2P/MNNVL` (p2pSendSetup, NCCL 2.28.9 src/transport/p2p.cc),
/// including those inside a tray, and the buffers travel as fabric handles. A pair of
/// different trays that is not on P2P is beyond this model (SHM needs one host, and NCCL's
/// P2P check accepts every clique pair on NVLink), so it is named in a warning.
/// Each process sees its own tray's GPUs, so NCCL prints the tray's NVML index in brackets.
pub fn label_transports(
    pairs: &mut [super::transport::PairTransport],
    trays: &[(HostId, i32)],
    topo: &mut Topology,
) {
    let mut odd = 0;
    let mut shared = super::transport::Reasons::default();
    // The pairs share a few reason and log texts (transport::Reasons); each is relabelled
    // once, keyed by its allocation (the original kept alive beside it so the address cannot
    // be reused): per pair, the new text and its hashing were 4.6 million strings at 16,384
    // trays.
    type Relabelled = HashMap<(usize, bool), (Arc<str>, Arc<str>)>;
    let mut reasons: Relabelled = HashMap::new();
    let mut logs: Relabelled = HashMap::new();
    let key = |t: &Arc<str>, cross: bool| (Arc::as_ptr(t) as *const u8 as usize, cross);
    for p in pairs.iter_mut() {
        if let Some(&(_, d)) = trays.get(p.from) {
            p.from_dev = d;
        }
        if let Some(&(_, d)) = trays.get(p.to) {
            p.to_dev = d;
        }
        if p.inter_node {
            continue;
        }
        let tray = |r: usize| trays.get(r).map(|t| t.0);
        let cross = tray(p.from) != tray(p.to);
        if p.transport == Transport::P2p(P2p::Cumem) {
            p.transport = Transport::P2p(P2p::Mnnvl);
            let log = logs.entry(key(&p.log_form, false)).or_insert_with(|| {
                let new = p.log_form.replacen("P2P/CUMEM", "P2P/MNNVL", 1);
                (p.log_form.clone(), shared.share(&new))
            });
            p.log_form = log.1.clone();
            let reason = reasons.entry(key(&p.reason, cross)).or_insert_with(|| {
                let new = if cross {
                    format!(
                        "the GPUs are on different hosts of one NVLink clique (MNNVL): P2P over the NVSwitch fabric with fabric handles; {}",
                        p.reason
                    )
                } else {
                    format!(
                        "{}; MNNVL names every cuMem P2P connection of the communicator P2P/MNNVL",
                        p.reason
                    )
                };
                (p.reason.clone(), shared.share(&new))
            });
            p.reason = reason.1.clone();
        } else if cross {
            odd += 1;
        }
    }
    if odd > 0 {
        topo.warn(format!(
            "{odd} GPU pair(s) on different hosts of one NVLink clique are not on P2P; NCCL would need the network for them, which this plan does not model"
        ));
    }
}

#[cfg(test)]
mod tests;
