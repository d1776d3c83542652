//! Which transport NCCL uses between two ranks (`src/transport.cc`, `src/transport/*.cc`),
//! with the flavour NCCL prints, the INFO line it logs, a one-line reason, and an anomaly when
//! NVLink-connected GPUs end up on SHM or NET (the classic "SHM on an NVLink box" failure).
//!
//! NCCL tries P2P, then SHM, then NET for every connection, and takes the first whose
//! `canConnect` accepts (transport.cc `selectTransport`). The rules mirrored here are those of
//! 2.28.9 (`p2pCanConnect` in src/transport/p2p.cc, `shmCanConnect` in src/transport/shm.cc,
//! `canConnect` in src/transport/net.cc), with the version differences noted where they apply.
//!
//! Invisible peers (one GPU per process through `CUDA_VISIBLE_DEVICES`, one GPU per container):
//! `p2pCanConnect` (p2p.cc, same code 2.18.6 through 2.30.7) runs the topology check first
//! (`ncclTopoCheckP2p`: level, NVML status, same host hash and `/dev/shm`; the `/dev/shm` test
//! sat in `p2pCanConnect` itself up to 2.23), then the NET-is-faster check, and only then maps
//! both bus ids to CUDA devices. When either GPU is not visible it accepts P2P outright on any
//! build with CUDART >= 10.1 (every build of the versions modelled), skipping
//! `cudaDeviceCanAccessPeer` and the legacy-IPC probe. The acceptance is not limited to NVLink:
//! a PCIe pair within the P2P level is accepted the same way.
//!
//! Output size: all ordered pairs of ranks on each host, plus one inter-node entry per rank
//! (towards the rank with the same local index on the next host, the neighbour NCCL's rings
//! and trees connect on rail-aligned machines). Every rank reaches every other host through
//! the same NIC choice, so n² inter-node entries would repeat the same line; a 1024-GPU
//! what-if stays at 128 × 8² + 1024 entries.
//!
//! MNNVL: the trays of a clique arrive here fused into one host (mnnvl.rs), so their pairs are
//! checked as local NVLink pairs; `mnnvl::label_transports` then names them `P2P/MNNVL`.
//!
//! Not modelled: CollNet/NVLS connections, SHM copy-engine
//! modes (`SHM/CE/...`), the send/recv-only PXN choice of `ncclTopoGetNetDev` (peer-index
//! NIC); the NET of an inter-node entry is the rank's channel-0 local NET.

mod policy;
#[cfg(test)]
mod tests;
// The views over the selected pairs live beside the selection, not under its name: a child
// that uses the selection's types is not used back (tests/it/layout.rs).
pub mod view;

pub use policy::{RankPlacement, SourceNet, TransportPolicy};

use super::paths::{self, LevelSource, PathPolicy, Paths};
use super::system::System;
use super::types::PathType;
use serde::Serialize;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
pub use topo_vocab::{Net, P2p, Transport};

/// The P2P flavour NCCL picks once P2P is accepted (`p2pSendSetup`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum P2pFlavour {
    /// cuMem VMM buffers exported as file descriptors.
    Cumem,
    /// Legacy `cudaIpc*` handles.
    Ipc,
    /// Same process: device pointers used directly.
    Direct,
    /// Routed through the buffers of an intermediate GPU (NVB path).
    Indirect,
}

/// One connection NCCL could set up from `from` to `to`.
///
/// Kept small: one per ordered pair of ranks on a node, 4.67 million at 16,384 NVL72 trays.
/// The NET fields sit behind a box that pairs on one host rarely fill, and the texts are
/// shared (`Arc<str>`); serialised with every field flat, as before the box.
#[derive(Clone, Debug, PartialEq)]
pub struct PairTransport {
    pub from: usize,
    pub to: usize,
    /// NVML indices NCCL prints in brackets (`0[0] -> 1[1]`).
    pub from_dev: i32,
    pub to_dev: i32,
    /// The ranks are on different hosts (or NCCL counts them as different nodes).
    pub inter_node: bool,
    /// P2P read mode (`/read`).
    pub read: bool,
    /// Copy-engine P2P (`/CE`).
    pub ce: bool,
    /// GPU→GPU path type before NCCL reroutes refused P2P through the CPU; `None` across hosts.
    pub path: Option<PathType>,
    /// Contract name: `P2P/CUMEM`, `P2P/IPC`, `P2P/direct`, `P2P/indirect`, `SHM`, `NET/IB`,
    /// `NET/Socket`, or `NET/<plugin name>` for an external net plugin.
    pub transport: Transport,
    /// The relay rank of `P2P/indirect`.
    pub intermediate: Option<u32>,
    /// NET only: both ends' devices.
    pub net: Option<Box<NetEnds>>,
    /// How NCCL's INFO line ends: `via P2P/CUMEM/read`, `via SHM/direct/direct`,
    /// `[send] via NET/IB/1(1)/GDRDMA`. Shared like `reason`: a few distinct texts over
    /// millions of pairs (4.6 million at 16,384 NVL72 trays).
    pub log_form: Arc<str>,
    /// Why this transport and not a better one. Shared: the pairs of hosts alike have the
    /// same few reasons ([`Reasons`]), and a string each was 117 MB at 65,536 GPUs.
    pub reason: Arc<str>,
    /// Set when NVLink-connected GPUs do not use P2P (or only appear to), with the fix.
    pub anomaly: Option<Arc<str>>,
}

/// The NET side of a connection: the sender's NIC and the receiver's.
#[derive(Clone, Debug, PartialEq)]
pub struct NetEnds {
    /// The network name NCCL prints (`IB`, `Socket`, plugin name).
    pub name: String,
    /// Plugin device index of the sender's NIC and its name (`mlx5_3`).
    pub dev: i32,
    pub nic: Option<Arc<str>>,
    /// The sender GPU → NIC path type.
    pub nic_path: Option<PathType>,
    /// The PXN proxy rank that sends for `from`, when its NIC path is PXN.
    pub proxy: Option<usize>,
    /// GPUDirect RDMA on the send side (`/GDRDMA`) and forced PCIe mapping (`(PCI)`).
    pub gdr: bool,
    pub gdr_pci: bool,
    /// The receiver's NIC and GPUDirect RDMA on the receive side.
    pub recv_dev: i32,
    pub recv_gdr: bool,
    /// The receiver's line, `[receive] via NET/IB/0/GDRDMA`.
    pub log_form_recv: Arc<str>,
}

/// The document form of a pair (`topo plan --transports pairs`): every field flat.
#[derive(Serialize)]
struct PairWire<'a> {
    from: usize,
    to: usize,
    from_dev: i32,
    to_dev: i32,
    inter_node: bool,
    transport: &'a Transport,
    path: Option<PathType>,
    read: bool,
    ce: bool,
    intermediate: Option<u32>,
    net: Option<&'a str>,
    net_dev: Option<i32>,
    nic: Option<&'a str>,
    nic_path: Option<PathType>,
    proxy: Option<usize>,
    gdr: bool,
    gdr_pci: bool,
    recv_net_dev: Option<i32>,
    recv_gdr: bool,
    log_form: &'a str,
    log_form_recv: Option<&'a str>,
    reason: &'a str,
    anomaly: Option<&'a str>,
}

impl Serialize for PairTransport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let n = self.net.as_deref();
        PairWire {
            from: self.from,
            to: self.to,
            from_dev: self.from_dev,
            to_dev: self.to_dev,
            inter_node: self.inter_node,
            transport: &self.transport,
            path: self.path,
            read: self.read,
            ce: self.ce,
            intermediate: self.intermediate,
            net: n.map(|n| n.name.as_str()),
            net_dev: n.map(|n| n.dev),
            nic: n.and_then(|n| n.nic.as_deref()),
            nic_path: n.and_then(|n| n.nic_path),
            proxy: n.and_then(|n| n.proxy),
            gdr: self.gdr(),
            gdr_pci: n.is_some_and(|n| n.gdr_pci),
            recv_net_dev: n.map(|n| n.recv_dev),
            recv_gdr: n.is_some_and(|n| n.recv_gdr),
            log_form: &self.log_form,
            log_form_recv: n.map(|n| &*n.log_form_recv),
            reason: &self.reason,
            anomaly: self.anomaly.as_deref(),
        }
        .serialize(s)
    }
}

impl PairTransport {
    /// GPUDirect RDMA on the send side of a NET connection.
    pub fn gdr(&self) -> bool {
        self.net.as_ref().is_some_and(|n| n.gdr)
    }
    /// The sender's NIC of a NET connection (`mlx5_3`).
    pub fn nic(&self) -> Option<&str> {
        self.net.as_ref().and_then(|n| n.nic.as_deref())
    }
    /// The PXN proxy rank of a NET connection.
    pub fn proxy(&self) -> Option<usize> {
        self.net.as_ref().and_then(|n| n.proxy)
    }
    /// The INFO line NCCL logs for this connection (without the `host:pid:tid [dev] NCCL
    /// INFO` prefix). SHM lines carry no connection index.
    pub fn info_line(&self, channel: u32, conn_index: u32) -> String {
        let head = if self.transport.is_shm() {
            format!("Channel {channel:02}")
        } else {
            format!("Channel {channel:02}/{conn_index}")
        };
        format!(
            "{head} : {}[{}] -> {}[{}] {}",
            self.from, self.from_dev, self.to, self.to_dev, self.log_form
        )
    }

    /// The receiver's INFO line of a NET connection (printed as sender -> receiver).
    pub fn recv_info_line(&self, channel: u32, conn_index: u32) -> Option<String> {
        self.net.as_ref().map(|n| {
            format!(
                "Channel {channel:02}/{conn_index} : {}[{}] -> {}[{}] {}",
                self.from, self.from_dev, self.to, self.to_dev, n.log_form_recv
            )
        })
    }

    /// Short code for the matrix: `P2P`, `P2P/R`, `P2P/I`, `SHM`, `NET`, `!` for an anomaly.
    pub fn code(&self) -> &'static str {
        let flagged = self.anomaly.is_some();
        if self.transport.is_p2p() {
            match (self.intermediate.is_some(), self.read, flagged) {
                (true, _, false) => "P2P/I",
                (true, _, true) => "P2P/I!",
                (false, true, false) => "P2P/R",
                (false, true, true) => "P2P/R!",
                (false, false, false) => "P2P",
                (false, false, true) => "P2P!",
            }
        } else if self.transport.is_shm() {
            if flagged { "SHM!" } else { "SHM" }
        } else if flagged {
            "NET!"
        } else {
            "NET"
        }
    }
}

/// Why P2P refused a pair, and what fixes it when the pair has NVLink.
struct Refusal {
    why: String,
    fix: String,
    /// `ncclTopoCheckNet` preferred the network: SHM refuses too.
    net_faster: bool,
}

enum P2pOutcome {
    Accept {
        flavour: P2pFlavour,
        read: bool,
        ce: bool,
        intermediate: Option<usize>,
        why: String,
        invisible_peer: bool,
        /// The GPU→GPU path type.
        path: PathType,
    },
    Refuse(Refusal),
}

struct Ctx<'a> {
    sys: &'a System,
    paths: &'a Paths,
    /// Paths before the no-P2P rerouting: tells whether a pair is NVLink-connected.
    raw: OnceLock<Paths>,
    pp: PathPolicy,
    tp: &'a TransportPolicy,
    cumem: (bool, String),
    /// The network NCCL loads, and why.
    net: (Net, String),
    /// Each rank's send and receive side, made once: a host split per socket has a NET
    /// connection for half its pairs, 1.6 million at 16,384 hosts.
    /// A rank that takes its twin's side shares it (a copy each was 262,144 boxes).
    sides: Vec<[OnceLock<Arc<NetSide>>; 2]>,
    /// The sides' texts, shared: ranks at the same place on every host have the same ones.
    side_texts: std::sync::Mutex<Reasons>,
    /// Per rank: the rank at its place on the host whose path tables its host reads, whose
    /// NET sides are its own (empty, or the rank itself: none).
    twin: Vec<usize>,
}

/// Every connection NCCL could set up (see the module comment for which pairs), in order:
/// hosts' pairs by (from, to), then one inter-node entry per rank.
///
/// `paths` must come from `paths::compute(sys, path_policy)` where `path_policy.isolated_ranks`
/// agrees with `tp.placement.isolates_ranks()`; the placement's isolation is applied to the
/// checks here either way.
pub fn select(
    sys: &System,
    paths: &Paths,
    path_policy: &PathPolicy,
    tp: &TransportPolicy,
) -> Vec<PairTransport> {
    let mut ctx = Ctx::new(sys, paths, path_policy, tp);
    let nhosts = host_count(sys);
    let hosts: Vec<Vec<usize>> = (0..nhosts).map(|h| sys.host_gpus(h as u16)).collect();
    // Sized once: at 32,768 GPUs the list is 262,144 entries, and growing it by doubling
    // held up to twice that.
    let pairs: usize = hosts
        .iter()
        .map(|r| r.len() * r.len().saturating_sub(1))
        .sum();
    let inter: usize = if nhosts > 1 {
        hosts.iter().map(Vec::len).sum()
    } else {
        0
    };
    // A host whose path tables are an earlier host's repeats that host's pairs, as long as
    // no per-pair fact (a peer-access probe, keyed by rank) could tell the two apart.
    let sources: Vec<usize> = (0..nhosts)
        .map(|h| match tp.peer_access.is_empty() {
            true => paths.tables_of(h),
            false => h,
        })
        .collect();
    ctx.twin = twins(&hosts, &sources, sys.gpus.len());
    // Hosts are independent: at 32,768 GPUs their 229,376 pairs were a fifth of the plan's
    // time on one core. Each worker takes a contiguous run of hosts and the runs are joined
    // in host order, so the list is the same whatever the number of workers.
    select_on(&ctx, &hosts, &sources, pairs + inter, workers_for(pairs))
}

/// Per rank, the rank at its place on its host's source (`sources`: the host whose path
/// tables each host reads) where that source computes its own and has as many GPUs; else the
/// rank itself. A NET side reads only its host's tables and nodes, which a replica's equal
/// node by node (`paths::replica`), so the twin's side is the rank's: 16,384 hosts' inter-node
/// entries choose 16 sides instead of 262,144.
fn twins(hosts: &[Vec<usize>], sources: &[usize], nranks: usize) -> Vec<usize> {
    let mut twin: Vec<usize> = (0..nranks).collect();
    for (h, ranks) in hosts.iter().enumerate() {
        let s = sources.get(h).copied().unwrap_or(h);
        let Some(from) = hosts.get(s) else {
            continue;
        };
        if s == h || sources.get(s) != Some(&s) || from.len() != ranks.len() {
            continue;
        }
        for (&r, &t) in ranks.iter().zip(from) {
            if let Some(x) = twin.get_mut(r) {
                *x = t;
            }
        }
    }
    twin
}

/// Pairs a worker chooses in one round of [`select_on`] (a host is never split): a round's
/// threads cost a tenth of a millisecond to start, its pairs tens of milliseconds to choose,
/// and a round's lists wait beside the whole list, so they stay a few megabytes.
const ROUND_PAIRS_PER_WORKER: usize = 1 << 15;

fn pairs_of(ranks: &[usize]) -> usize {
    ranks.len() * ranks.len().saturating_sub(1)
}

/// `hosts` in consecutive runs of at least `per` pairs (the last may have fewer).
fn runs_of(hosts: &[Vec<usize>], per: usize) -> Vec<&[Vec<usize>]> {
    let (mut runs, mut start, mut pairs) = (vec![], 0, 0);
    for (i, ranks) in hosts.iter().enumerate() {
        pairs += pairs_of(ranks);
        if pairs >= per {
            runs.push(&hosts[start..=i]);
            (start, pairs) = (i + 1, 0);
        }
    }
    if start < hosts.len() {
        runs.push(&hosts[start..]);
    }
    runs
}

/// [`select`]'s list made by `workers` threads; a host `h` whose `sources[h]` is another
/// host of as many GPUs repeats that host's pairs on its own ranks ([`repeat`]).
fn select_on(
    ctx: &Ctx,
    hosts: &[Vec<usize>],
    sources: &[usize],
    capacity: usize,
    workers: usize,
) -> Vec<PairTransport> {
    let nhosts = hosts.len();
    // A host computes its own pairs unless an earlier host of as many GPUs, which computes
    // its own, is its source.
    let own = |h: usize| {
        let s = sources.get(h).copied().unwrap_or(h);
        s >= h || sources.get(s) != Some(&s) || hosts[s].len() != hosts[h].len()
    };
    let mut out = Vec::with_capacity(capacity);
    if (0..nhosts).all(own) {
        same_host_pairs(ctx, hosts, workers, &mut out);
    } else {
        let own: Vec<bool> = (0..nhosts).map(own).collect();
        repeated_host_pairs(ctx, hosts, sources, &own, workers, &mut out);
    }
    let mut shared = Reasons::default();
    if nhosts > 1 {
        for (h, ranks) in hosts.iter().enumerate() {
            let next = &hosts[(h + 1) % nhosts];
            for (i, &a) in ranks.iter().enumerate() {
                if let Some(&b) = next.get(i).or(next.first()) {
                    let mut p = ctx.net_pair(a, b, true, None);
                    shared.share_texts(&mut p);
                    out.push(p);
                }
            }
        }
    }
    out
}

/// [`same_host_pairs`] for the hosts that compute their own (`own`), and for each other host
/// its source's pairs repeated on its ranks ([`repeat`]), in host order.
fn repeated_host_pairs(
    ctx: &Ctx,
    hosts: &[Vec<usize>],
    sources: &[usize],
    own: &[bool],
    workers: usize,
    out: &mut Vec<PairTransport>,
) {
    let computing: Vec<usize> = (0..hosts.len()).filter(|&h| own[h]).collect();
    let lists: Vec<Vec<usize>> = computing.iter().map(|&h| hosts[h].clone()).collect();
    let mut computed = Vec::new();
    same_host_pairs(ctx, &lists, workers, &mut computed);
    let mut at = vec![0; hosts.len()];
    let mut next = 0;
    for &h in &computing {
        at[h] = next;
        next += pairs_of(&hosts[h]);
    }
    let mut pos = vec![0; hosts.iter().flatten().max().map_or(0, |&m| m + 1)];
    for ranks in hosts {
        for (i, &r) in ranks.iter().enumerate() {
            pos[r] = i;
        }
    }
    let mut shared = Reasons::default();
    for h in 0..hosts.len() {
        let s = if own[h] { h } else { sources[h] };
        let list = &computed[at[s]..at[s] + pairs_of(&hosts[s])];
        if s == h {
            out.extend_from_slice(list);
            continue;
        }
        let on = |r: usize| hosts[h][pos[r]];
        out.extend(
            list.iter()
                .map(|p| repeat(ctx, p, on, hosts[h].len(), &mut shared)),
        );
    }
}

/// Equal reasons as one shared string: a host's pairs have a few distinct reasons, and every
/// host alike has the same ones.
#[derive(Default)]
pub(crate) struct Reasons(HashSet<Arc<str>>);

impl Reasons {
    pub(crate) fn share(&mut self, reason: &str) -> Arc<str> {
        if let Some(r) = self.0.get(reason) {
            return r.clone();
        }
        let r: Arc<str> = reason.into();
        self.0.insert(r.clone());
        r
    }

    /// `p`'s reason and log form as shared strings.
    pub(crate) fn share_texts(&mut self, p: &mut PairTransport) {
        p.reason = self.share(&p.reason);
        p.log_form = self.share(&p.log_form);
    }
}

/// The pairs of every host in `hosts`, in host order, appended to `out` by `workers` threads.
fn same_host_pairs(ctx: &Ctx, hosts: &[Vec<usize>], workers: usize, out: &mut Vec<PairTransport>) {
    let host_pairs = |ranks: &[usize], out: &mut Vec<PairTransport>, shared: &mut Reasons| {
        for &a in ranks {
            for &b in ranks {
                if a != b {
                    let mut p = ctx.same_host(a, b, ranks.len());
                    shared.share_texts(&mut p);
                    out.push(p);
                }
            }
        }
    };
    if workers <= 1 {
        let mut shared = Reasons::default();
        for ranks in hosts {
            host_pairs(ranks, out, &mut shared);
        }
        return;
    }
    // In rounds of one run per worker, each run's list sized exactly: the lists wait beside
    // `out` only for one round (all of them at once, grown by doubling, were 520 MB beside a
    // 292 MB list for 4,096 NVL72 trays).
    let host_pairs = &host_pairs;
    for round in runs_of(hosts, ROUND_PAIRS_PER_WORKER).chunks(workers) {
        let parts: Vec<Vec<PairTransport>> = std::thread::scope(|s| {
            let handles: Vec<_> = round
                .iter()
                .map(|run| {
                    s.spawn(move || {
                        let pairs = run.iter().map(|r| pairs_of(r)).sum();
                        let mut part = Vec::with_capacity(pairs);
                        let mut shared = Reasons::default();
                        for ranks in run.iter() {
                            host_pairs(ranks, &mut part, &mut shared);
                        }
                        part
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        for part in parts {
            out.extend(part);
        }
    }
}

/// `p`, a pair of a host whose tables another host shares, as that host's pair: the same
/// choice on the ranks `on` maps to. A pair that names a third rank (an NVB relay, a PXN
/// proxy) is chosen again, since its text names that rank.
fn repeat(
    ctx: &Ctx,
    p: &PairTransport,
    on: impl Fn(usize) -> usize,
    local_ranks: usize,
    shared: &mut Reasons,
) -> PairTransport {
    if p.intermediate.is_some() || p.proxy().is_some() {
        let mut q = ctx.same_host(on(p.from), on(p.to), local_ranks);
        shared.share_texts(&mut q);
        return q;
    }
    PairTransport {
        from: on(p.from),
        to: on(p.to),
        ..p.clone()
    }
}

/// Threads worth starting for `pairs` same-host pairs: below a few thousand pairs a thread
/// costs more than it saves.
fn workers_for(pairs: usize) -> usize {
    if pairs < 4096 {
        return 1;
    }
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8)
}

fn host_count(sys: &System) -> usize {
    sys.gpus
        .iter()
        .map(|&g| sys.nodes[g].host as usize + 1)
        .max()
        .unwrap_or(0)
}

fn dev_of(sys: &System, rank: usize) -> i32 {
    sys.gpu(rank).gpu.as_ref().map(|g| g.dev).unwrap_or(-1)
}

/// Ranks in containers with different /dev/shm devices: NCCL's topology check refuses P2P.
fn isolated() -> Refusal {
    Refusal {
        why: "the ranks' containers have different /dev/shm devices, so \
                      ncclTopoCheckP2p refuses P2P"
            .into(),
        fix: "run the ranks of a host in one container that sees all its GPUs \
                      (or share /dev/shm and the IPC namespace between the containers)"
            .into(),
        net_faster: false,
    }
}

impl<'a> Ctx<'a> {
    fn new(
        sys: &'a System,
        paths: &'a Paths,
        path_policy: &PathPolicy,
        tp: &'a TransportPolicy,
    ) -> Ctx<'a> {
        let mut pp = path_policy.clone();
        pp.isolated_ranks |= tp.placement.isolates_ranks();
        Ctx {
            sys,
            paths,
            raw: OnceLock::new(),
            cumem: tp.cumem_enabled(),
            net: tp.net_name(!sys.nets.is_empty()),
            sides: (0..sys.gpus.len()).map(|_| Default::default()).collect(),
            side_texts: Default::default(),
            twin: Vec::new(),
            pp,
            tp,
        }
    }

    /// Computed only when some pair is refused P2P: accepted pairs keep their raw path.
    fn raw_ty(&self, a: usize, b: usize) -> PathType {
        self.raw
            .get_or_init(|| paths::raw_paths(self.sys, &self.pp))
            .ty(self.sys.gpus[a], self.sys.gpus[b])
    }

    fn nvlinked(&self, a: usize, b: usize) -> bool {
        matches!(self.raw_ty(a, b), PathType::Nvl | PathType::Nvb)
    }

    fn level_text(&self, level: PathType, src: LevelSource) -> String {
        match src {
            LevelSource::Env => format!("{level} (NCCL_P2P_LEVEL={level})"),
            LevelSource::Disabled => "LOC (NCCL_P2P_DISABLE=1)".into(),
            LevelSource::Default if self.pp.minor >= 23 => {
                format!("{level} (default since 2.23: PXB, SYS on AMD x86 with at most 2 GPUs)")
            }
            LevelSource::Default => {
                format!("{level} (2.18-2.22 default: SYS, PXB on Intel x86, ARM and Zhaoxin)")
            }
        }
    }

    /// `p2pCanConnect` (src/transport/p2p.cc, 2.28.9) for the sender `a` and receiver `b`,
    /// then the flavour `p2pSendSetup` picks. Each refusal in NCCL's order, then the accept.
    fn p2p(&self, a: usize, b: usize, local_ranks: usize) -> P2pOutcome {
        let tp = self.tp;
        if tp.placement.isolates_ranks() || self.pp.isolated_ranks {
            return P2pOutcome::Refuse(isolated());
        }
        let c = paths::check_p2p(self.sys, self.paths, &self.pp, a, b);
        if let Some(r) = self.driver_refusal(&c, a, b) {
            return P2pOutcome::Refuse(r);
        }
        if !c.p2p {
            return P2pOutcome::Refuse(self.level_refusal(&c, a, b));
        }
        if let Some(m) = c.intermediate {
            return self.indirect(&c, m);
        }
        if let Some(r) = self.net_refusal(&c, a, b) {
            return P2pOutcome::Refuse(r);
        }
        let visible = tp.peers_visible(local_ranks);
        if visible && let Some(r) = self.peer_refusal(a, b) {
            return P2pOutcome::Refuse(r);
        }
        self.accept(&c, visible)
    }

    /// A driver that refuses peer access (GeForce RTX 4090/5090): NCCL falls back to SHM.
    fn driver_refusal(&self, c: &paths::P2pCheck, a: usize, b: usize) -> Option<Refusal> {
        let (da, db) = (dev_of(self.sys, a), dev_of(self.sys, b));
        // p2pCanConnect asks cudaDeviceCanAccessPeer once the topology allows P2P (NCCL
        // 2.28.9 src/transport/p2p.cc): a driver that refuses peer access (GeForce RTX
        // 4090/5090) makes NCCL fall back to SHM.
        let refused = [a, b].into_iter().find_map(|r| {
            let why = self.sys.gpu(r).gpu.as_ref()?.no_p2p.clone()?;
            Some((dev_of(self.sys, r), why))
        });
        if c.p2p
            && let Some((dev, why)) = refused
        {
            return Some(Refusal {
                why: format!(
                    "GPU {dev}: {why}: cudaDeviceCanAccessPeer answers 0, so p2pCanConnect \
                     refuses P2P between GPU {da} and GPU {db}"
                ),
                fix: "a driver that allows peer access (then state it: profile `p2p: true` \
                      or --p2p on)"
                    .into(),
                net_faster: false,
            });
        }
        None
    }

    /// P2P refused by NVML or by the P2P level (environment or default).
    fn level_refusal(&self, c: &paths::P2pCheck, a: usize, b: usize) -> Refusal {
        let (da, db) = (dev_of(self.sys, a), dev_of(self.sys, b));
        let raw = self.raw_ty(a, b);
        if c.nvml_blocked {
            let abort = if raw <= PathType::Nvb && self.pp.ignore_disabled_p2p == 0 {
                " (on an NVLink pair NCCL aborts init unless NCCL_IGNORE_DISABLED_P2P=1)"
            } else {
                ""
            };
            return Refusal {
                why: format!(
                    "NVML reports P2P as not supported between GPU {da} and GPU {db}{abort}"
                ),
                fix: "check `nvidia-smi topo -p2p rw`, the driver and the fabric manager".into(),
                net_faster: false,
            };
        }
        let (why, fix) = match c.level_source {
            LevelSource::Disabled => (
                format!(
                    "NCCL_P2P_DISABLE=1 sets the P2P level to LOC, so P2P is refused \
                     for this {raw} pair"
                ),
                "unset NCCL_P2P_DISABLE".to_string(),
            ),
            LevelSource::Env => (
                format!(
                    "NCCL_P2P_LEVEL={} is below the path type {raw}, so P2P is refused",
                    c.level
                ),
                format!("unset NCCL_P2P_LEVEL (or set it to {raw} or higher)"),
            ),
            LevelSource::Default => (
                format!(
                    "path {raw} exceeds the P2P level {}, so P2P is refused",
                    self.level_text(c.level, c.level_source)
                ),
                format!("NCCL_P2P_LEVEL={raw} allows P2P on this path"),
            ),
        };
        Refusal {
            why,
            fix,
            net_faster: false,
        }
    }

    /// An NVB path through another GPU: P2P through that GPU's buffers.
    fn indirect(&self, c: &paths::P2pCheck, m: usize) -> P2pOutcome {
        let tp = self.tp;
        let level = self.level_text(c.level, c.level_source);
        let ce = tp.p2p_use_cuda_memcpy;
        if ce {
            return P2pOutcome::Refuse(Refusal {
                why: format!(
                    "NCCL_P2P_USE_CUDA_MEMCPY=1 cannot relay through the intermediate \
                     GPU of rank {m} that this NVB path needs"
                ),
                fix: "unset NCCL_P2P_USE_CUDA_MEMCPY".into(),
                net_faster: false,
            });
        }
        let read = tp.p2p_read_enable.unwrap_or(c.read);
        P2pOutcome::Accept {
            flavour: P2pFlavour::Indirect,
            read,
            ce: false,
            intermediate: Some(m),
            why: format!(
                "path NVB is within the P2P level {level}; it runs through the GPU of \
                 rank {m}, so P2P goes through that GPU's buffers{}",
                read_note(tp, read, c.read)
            ),
            invisible_peer: false,
            path: c.path,
        }
    }

    /// `ncclTopoCheckNet`: the network is faster than this pair's path.
    fn net_refusal(&self, c: &paths::P2pCheck, a: usize, b: usize) -> Option<Refusal> {
        let raw = c.path;
        if paths::net_faster(self.sys, self.paths, &self.pp, a, b) {
            let gg = self.paths.bw(self.sys.gpus[a], self.sys.gpus[b]);
            return Some(Refusal {
                why: format!(
                    "both GPUs reach a NIC at PXB or better faster than their {raw} path \
                     ({gg:.1} GB/s), so ncclTopoCheckNet prefers the network"
                ),
                fix: "NCCL_NET_DISABLE_INTRA=1 keeps local pairs off the network".into(),
                net_faster: true,
            });
        }
        None
    }

    /// What the CUDA runtime answers for visible peers: no peer access, no legacy IPC.
    fn peer_refusal(&self, a: usize, b: usize) -> Option<Refusal> {
        let tp = self.tp;
        let (da, db) = (dev_of(self.sys, a), dev_of(self.sys, b));
        let (cumem, cumem_why) = (&self.cumem.0, &self.cumem.1);
        if tp.peer_access.get(&(a, b)) == Some(&false) {
            return Some(Refusal {
                why: format!(
                    "cudaDeviceCanAccessPeer reports no peer access from GPU {da} to GPU \
                     {db} (\"Could not enable P2P\")"
                ),
                fix: "check the driver, IOMMU/ACS and virtualization settings \
                      (`nvidia-smi topo -p2p rw`)"
                    .into(),
                net_faster: false,
            });
        }
        if !cumem && tp.legacy_ipc == Some(false) {
            return Some(Refusal {
                why: format!(
                    "CUMEM is off ({cumem_why}) and legacy CUDA IPC is not supported \
                     (\"Legacy IPC not supported\", e.g. WSL)"
                ),
                fix: "enable CUMEM (NCCL_CUMEM_ENABLE=1 with a CUDA 12 driver)".into(),
                net_faster: false,
            });
        }
        None
    }

    /// The accepted pair's flavour (direct pointers, CUMEM, IPC), read mode and reason.
    fn accept(&self, c: &paths::P2pCheck, visible: bool) -> P2pOutcome {
        let tp = self.tp;
        let raw = c.path;
        let level = self.level_text(c.level, c.level_source);
        let ce = tp.p2p_use_cuda_memcpy;
        let (cumem, cumem_why) = (&self.cumem.0, &self.cumem.1);
        let same_process = tp.placement == RankPlacement::ProcessPerHost;
        let (flavour, how) = if same_process && !tp.p2p_direct_disable && !ce {
            (
                P2pFlavour::Direct,
                "both GPUs belong to one process, so peers use direct pointers".to_string(),
            )
        } else {
            let pre = if same_process && tp.p2p_direct_disable {
                "NCCL_P2P_DIRECT_DISABLE=1 turns direct pointers off; "
            } else if same_process {
                "copy-engine mode (NCCL_P2P_USE_CUDA_MEMCPY=1) turns direct pointers off; "
            } else {
                "ranks are separate processes; "
            };
            if *cumem {
                (P2pFlavour::Cumem, format!("{pre}CUMEM is on ({cumem_why})"))
            } else {
                (
                    P2pFlavour::Ipc,
                    format!("{pre}CUMEM is off ({cumem_why}), so legacy CUDA IPC is used"),
                )
            }
        };
        let read = if ce {
            false
        } else {
            tp.p2p_read_enable.unwrap_or(c.read)
        };
        let ce_note = if ce {
            "; NCCL_P2P_USE_CUDA_MEMCPY=1 copies with the copy engine (/CE), always writing"
        } else {
            ""
        };
        let vis_note = if visible {
            String::new()
        } else {
            format!(
                "; the peer GPU is not visible to this process{} and NCCL accepts it without \
                 cudaDeviceCanAccessPeer (p2p.cc, CUDA >= 10.1)",
                tp.cuda_visible_devices
                    .as_deref()
                    .map(|v| format!(" (CUDA_VISIBLE_DEVICES={v})"))
                    .unwrap_or_default()
            )
        };
        P2pOutcome::Accept {
            flavour,
            read,
            ce,
            intermediate: None,
            why: format!(
                "path {raw} is within the P2P level {level}; {how}{}{ce_note}{vis_note}",
                if ce {
                    String::new()
                } else {
                    read_note(tp, read, c.read)
                }
            ),
            invisible_peer: !visible,
            path: c.path,
        }
    }

    fn same_host(&self, a: usize, b: usize, local_ranks: usize) -> PairTransport {
        let tp = self.tp;
        if tp.placement.node_per_rank() {
            let raw = self.raw_ty(a, b);
            let why = "each container has its own host hash (no common NCCL_HOSTID), so NCCL \
                       treats the ranks as different nodes and only NET connects them"
                .to_string();
            let fix = "run the ranks of a host in one container that sees all its GPUs";
            let mut p = self.net_pair(a, b, true, Some(why.clone()));
            p.path = Some(raw);
            if self.nvlinked(a, b) {
                p.anomaly = Some(
                    format!(
                        "{} between NVLink-connected GPUs ({raw}) on one host \
                         (NVIDIA/nccl#1781): {why}; fix: {fix}",
                        p.transport
                    )
                    .into(),
                );
            }
            return p;
        }
        let refusal = match self.p2p(a, b, local_ranks) {
            P2pOutcome::Accept {
                flavour,
                read,
                ce,
                intermediate,
                why,
                invisible_peer,
                path,
            } => {
                return self.p2p_pair(
                    a,
                    b,
                    path,
                    (flavour, read, ce, intermediate),
                    why,
                    invisible_peer,
                );
            }
            P2pOutcome::Refuse(r) => r,
        };
        let raw = self.raw_ty(a, b);
        // shmCanConnect (src/transport/shm.cc): disabled, NET faster, other host, other /dev/shm.
        let net_faster =
            refusal.net_faster || paths::net_faster(self.sys, self.paths, &self.pp, a, b);
        let shm_refused = if self.pp.shm_disable {
            Some("NCCL_SHM_DISABLE=1 refuses SHM".to_string())
        } else if refusal.net_faster {
            Some("SHM declines for the same reason".to_string())
        } else if net_faster {
            Some(format!(
                "both GPUs reach a NIC at PXB or better faster than their GPU-GPU path \
                 ({:.1} GB/s), so ncclTopoCheckNet makes SHM decline and NET connect them",
                self.paths.bw(self.sys.gpus[a], self.sys.gpus[b])
            ))
        } else if self.pp.isolated_ranks {
            Some("SHM needs a common /dev/shm too".to_string())
        } else {
            None
        };
        let anomaly = |t: &str, cause: &str| {
            self.nvlinked(a, b).then(|| {
                format!(
                    "{t} between NVLink-connected GPUs ({raw}): {cause}; fix: {}",
                    refusal.fix
                )
                .into()
            })
        };
        match shm_refused {
            None => PairTransport {
                from_dev: dev_of(self.sys, a),
                to_dev: dev_of(self.sys, b),
                transport: Transport::Shm,
                path: Some(raw),
                log_form: if tp.minor >= 30 {
                    "via SHM/direct".into()
                } else {
                    "via SHM/direct/direct".into()
                },
                reason: format!(
                    "{}; SHM (through host memory) is used{}",
                    refusal.why,
                    if raw <= PathType::Nvb {
                        " although the GPUs are NVLink-connected"
                    } else {
                        ""
                    }
                )
                .into(),
                anomaly: anomaly("SHM", &refusal.why),
                ..empty(a, b)
            },
            Some(shm_why) => {
                let why = if net_faster {
                    format!("{}; {shm_why}", refusal.why)
                } else {
                    format!(
                        "{}; {shm_why}: NCCL drops the peer from the node's graph and \
                         connects it over the network",
                        refusal.why
                    )
                };
                let mut p = self.net_pair(a, b, false, Some(why.clone()));
                p.path = Some(raw);
                p.anomaly = anomaly(&p.transport.to_string(), &why);
                p
            }
        }
    }

    fn p2p_pair(
        &self,
        a: usize,
        b: usize,
        raw: PathType,
        (flavour, read, ce, intermediate): (P2pFlavour, bool, bool, Option<usize>),
        why: String,
        invisible_peer: bool,
    ) -> PairTransport {
        let r = if read { "/read" } else { "" };
        let c = if ce { "/CE" } else { "" };
        let (transport, log_form) = match flavour {
            P2pFlavour::Direct => (P2p::Direct, format!("via P2P/direct pointer{r}")),
            P2pFlavour::Cumem => (P2p::Cumem, format!("via P2P/CUMEM{r}{c}")),
            P2pFlavour::Ipc => (P2p::Ipc, format!("via P2P/IPC{r}{c}")),
            P2pFlavour::Indirect => {
                let m = intermediate.unwrap_or(a);
                (
                    P2p::Indirect,
                    format!("via P2P/indirect/{m}[{}]{r}", dev_of(self.sys, m)),
                )
            }
        };
        let transport = Transport::P2p(transport);
        let container = matches!(self.tp.placement, RankPlacement::ContainerPerGpu { .. });
        let anomaly = (invisible_peer && container).then(|| {
            format!(
                "{transport} is reported, but each container sees only its own GPU: NCCL \
                 accepts the invisible peer, yet mapping its buffers needs shared IPC and PID \
                 namespaces and all GPUs visible (NVIDIA/nccl#1781 saw no NVLink traffic); \
                 fix: run the ranks of a host in one container that sees all its GPUs"
            )
            .into()
        });
        PairTransport {
            from_dev: dev_of(self.sys, a),
            to_dev: dev_of(self.sys, b),
            transport,
            path: Some(raw),
            read,
            ce,
            intermediate: intermediate.map(|r| r as u32),
            log_form: log_form.into(),
            reason: why.into(),
            anomaly,
            ..empty(a, b)
        }
    }

    /// A NET connection `a → b`: the sender's NIC (PXN proxy, GDR read side) and the
    /// receiver's NIC (GDR write side), as `sendSetup`/`recvSetup` in src/transport/net.cc.
    fn net_pair(&self, a: usize, b: usize, inter: bool, why: Option<String>) -> PairTransport {
        let send = self.side(a, true);
        let recv = self.side(b, false);
        let transport = Transport::Net(self.net.0.clone());
        let reason = match why {
            Some(head) => format!("{head}; {}", send.reason).into(),
            None => send.inter_reason.clone(),
        };
        PairTransport {
            from_dev: dev_of(self.sys, a),
            to_dev: dev_of(self.sys, b),
            inter_node: inter,
            transport,
            net: Some(Box::new(NetEnds {
                name: self.net.0.name().to_string(),
                dev: send.dev,
                nic: send.nic.clone(),
                nic_path: send.nic_path,
                proxy: send.proxy,
                gdr: send.gdr,
                gdr_pci: send.gdr_pci,
                recv_dev: recv.dev,
                recv_gdr: recv.gdr,
                log_form_recv: recv.form.clone(),
            })),
            log_form: send.form.clone(),
            reason,
            ..empty(a, b)
        }
    }

    /// `rank`'s side of its NET connections, made on first use.
    fn side(&self, rank: usize, send: bool) -> &NetSide {
        self.shared_side(rank, send)
    }

    fn shared_side(&self, rank: usize, send: bool) -> &Arc<NetSide> {
        self.sides[rank][usize::from(!send)].get_or_init(|| {
            // A twin's side, unless a PXN relay names the twin's own host's rank.
            if let Some(&t) = self.twin.get(rank).filter(|&&t| t != rank) {
                let twin = self.shared_side(t, send);
                if twin.proxy.is_none() {
                    return Arc::clone(twin);
                }
            }
            let (mut side, why) = self.net_side(rank, send);
            let (name, net_why) = (&self.net.0, &self.net.1);
            let proxy = side.proxy.map(|p| format!("({p})")).unwrap_or_default();
            let gdr = if side.gdr { "/GDRDMA" } else { "" };
            let pci = if side.gdr_pci { "(PCI)" } else { "" };
            let dir = if send { "[send]" } else { "[receive]" };
            let form = format!(
                "{dir} via NET/{}/{}{proxy}{gdr}{pci}",
                name.name(),
                side.dev
            );
            let transport = Transport::Net(name.clone());
            let reason = format!("{transport} because {net_why}; {why}");
            let inter = format!("different hosts: only the network connects them; {reason}");
            let mut texts = self.side_texts.lock().unwrap_or_else(|e| e.into_inner());
            side.form = texts.share(&form);
            side.reason = texts.share(&reason);
            side.inter_reason = texts.share(&inter);
            Arc::new(side)
        })
    }

    /// `rank`'s NIC facts for one direction, and why that NIC and GDR mode.
    fn net_side(&self, rank: usize, send: bool) -> (NetSide, String) {
        let sys = self.sys;
        if self.net.0 == Net::Socket {
            // Socket devices are network interfaces, not the RDMA ports of the model: the
            // first interface NCCL_SOCKET_IFNAME selects is device 0.
            return (
                NetSide::default(),
                "sockets never use GPUDirect RDMA".into(),
            );
        }
        let Some(choice) = paths::nic_choice(sys, self.paths, &self.pp, rank) else {
            return (
                NetSide::default(),
                "no network device is local to this GPU".into(),
            );
        };
        let ni = choice.net;
        let g = sys.gpus[rank];
        let n = sys.nets[ni];
        let attrs = sys.nodes[n].net.as_ref();
        let nic: Option<Arc<str>> = attrs.map(|x| x.name.as_str().into());
        let dev = attrs.map(|x| x.dev).unwrap_or(ni as i32);
        let path = self.paths.get(g, n);
        let nic_path = path.map(|p| p.ty);
        // PXN (`ncclTopoGetNetDev`): a PXN path means the relay GPU's rank proxies the send.
        // One node per rank (containers) has no NVLink peer to relay through.
        let proxy = if send && !self.tp.placement.node_per_rank() {
            path.filter(|p| p.ty == PathType::Pxn).and_then(|_| {
                self.paths
                    .interior(g, n)
                    .find_map(|x| sys.nodes[x].gpu.as_ref().map(|a| a.rank))
            })
        } else {
            None
        };
        let gc = paths::check_gdr(sys, self.paths, &self.pp, rank, ni, send);
        let gdr_pci = gc.enabled && self.pci_mode(g, gc.distance);
        let mut name = nic
            .as_deref()
            .map_or_else(|| format!("NET {dev}"), String::from);
        // A fused NIC is named as one: its ports and their summed speed.
        if let Some(fused) = attrs.and_then(|x| topo_model::net_kind::fused_text(&x.name, None)) {
            name = format!("{name} ({fused})");
        }
        let side = if send { "sends on" } else { "receives on" };
        let mut why = match proxy {
            Some(p) => format!(
                "{side} {name} through PXN: the GPU of rank {p} relays over NVLink and its \
                 proxy sends"
            ),
            None => format!(
                "{side} {name}, the GPU's local NIC ({})",
                nic_path.map(|t| t.name()).unwrap_or("?")
            ),
        };
        let net_name = |i: usize| {
            sys.nodes[sys.nets[i]]
                .net
                .as_ref()
                .map_or_else(|| format!("NET {i}"), |x| x.name.clone())
        };
        if let Some(tie) = choice.tie_text(net_name) {
            why.push_str(&format!(", {tie}"));
        }
        if gc.enabled {
            why.push_str(&format!("; GPUDirect RDMA: {}", gc.reason));
            if gdr_pci {
                why.push_str(", mapped over PCIe because the GPU reaches its CPU over C2C");
            }
        } else {
            why.push_str(&format!("; no GPUDirect RDMA: {}", gc.reason));
        }
        let side = NetSide {
            dev,
            nic,
            nic_path,
            proxy,
            gdr: gc.enabled,
            gdr_pci,
            ..Default::default()
        };
        (side, why)
    }

    /// GDR "PCI" mode (`ncclTopoCheckGdr`, 2.27+): the GPU reaches its CPU over C2C but the NIC
    /// is not behind that C2C link (HEAD: distance not P2C; 2.27-2.29: not C2C, with P2C
    /// counted as C2C when NCCL_NET_GDR_C2C=1).
    fn pci_mode(&self, g: usize, distance: PathType) -> bool {
        if self.pp.minor < 27 {
            return false;
        }
        let c2c_cpu = paths::local_cpu(self.sys, self.paths, g)
            .is_some_and(|c| self.paths.ty(g, c) == PathType::C2c);
        if !c2c_cpu {
            return false;
        }
        if self.pp.minor >= 30 {
            distance != PathType::P2c
        } else {
            let eff = if distance == PathType::P2c && self.pp.gdr_c2c() {
                PathType::C2c
            } else {
                distance
            };
            eff != PathType::C2c
        }
    }
}

#[derive(Clone, Default)]
struct NetSide {
    dev: i32,
    nic: Option<Arc<str>>,
    nic_path: Option<PathType>,
    proxy: Option<usize>,
    gdr: bool,
    gdr_pci: bool,
    /// NCCL's `[send] via NET/IB/1(1)/GDRDMA` (or `[receive] …`) for this side.
    form: Arc<str>,
    /// The reason's tail (`NET/IB because …; sends on mlx5_0 …`), and the whole reason of
    /// an inter-node connection.
    reason: Arc<str>,
    inter_reason: Arc<str>,
}

fn read_note(tp: &TransportPolicy, read: bool, topo_read: bool) -> String {
    match tp.p2p_read_enable {
        Some(true) => "; NCCL_P2P_READ_ENABLE=1 forces P2P read".into(),
        Some(false) if topo_read => "; NCCL_P2P_READ_ENABLE=0 forces P2P write".into(),
        _ if read => "; P2P read because both GPUs are sm80 on an NVLink path".into(),
        _ => String::new(),
    }
}

fn empty(a: usize, b: usize) -> PairTransport {
    PairTransport {
        from: a,
        to: b,
        from_dev: -1,
        to_dev: -1,
        inter_node: false,
        transport: Transport::Undecided,
        path: None,
        read: false,
        ce: false,
        intermediate: None,
        net: None,
        log_form: "".into(),
        reason: "".into(),
        anomaly: None,
    }
}
