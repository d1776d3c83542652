//! NCCL's tuning model: per function × algorithm × protocol a latency (us) and an algorithm
//! bandwidth (GB/s), computed once per communicator from the reconciled graphs
//! (`ncclTopoTuneModel`, src/graph/tuning.cc), and the per-operation choice of algorithm,
//! protocol, channels and threads (`ncclTopoGetAlgoTime`, `topoGetAlgoInfo`, src/enqueue.cc).
//!
//! Which variant of each rule applies comes from `VersionData::rules`; every constant from
//! `VersionData::tuning`. Each cell keeps the steps that produced its figures (`--explain`).

use crate::env::EnvPolicy;
use crate::error::{Error, ErrorKind, Result};
use crate::graph::Graph;
use crate::types::{Algorithm, Collective, GraphId, PathType, Pattern, Protocol};
use crate::version::{
    AlgbwSkip, ChannelThreadLoop, CollnetAgRsRule, HwLatency, Ll128InterRule, Ll128MixedCcRule,
    NvlsAlgbwRatio, NvlsBwRule, NvlsLatencyRule, PerAlgo, RingBackup, RingInterStepsRule,
    RingLlFactor, Rules, TreePatternSource, TuningTables, VersionData,
};
use serde::Serialize;
use topo_model::{CpuArch, CpuVendor};

/// Everything the tuning model depends on (reference §12: nothing else matters).
#[derive(Clone, Debug)]
pub struct TuningInput<'a> {
    pub nranks: usize,
    pub nnodes: usize,
    /// Ranks on each node (`nodeRanks[n].localRanks`).
    pub local_ranks: Vec<usize>,
    pub min_cc: u32,
    pub max_cc: u32,
    /// Architecture and vendor of the first CPU (`comm->cpuArch`, `cpuVendor`).
    pub cpu_arch: CpuArch,
    pub cpu_vendor: CpuVendor,
    /// Ranks disagree on the CPU vendor (`NCCL_TOPO_CPU_VENDOR_MIXED`, 2.24+).
    pub cpu_vendor_mixed: bool,
    /// Rank 0's own CPU vendor where it differs from `cpu_vendor` (hosts of mixed vendors):
    /// before 2.24 the llMaxBw row reads the local CPU (`ncclTopoCpuType`, v2.23.4-1
    /// src/graph/tuning.cc), not the communicator's.
    pub local_cpu_vendor: Option<CpuVendor>,
    /// Reconciled graphs (min/max over ranks, §5.7); `None` = not computed (0 channels).
    pub ring: Option<Graph>,
    pub tree: Option<Graph>,
    pub collnet_chain: Option<Graph>,
    pub collnet_direct: Option<Graph>,
    pub nvls: Option<Graph>,
    /// Communicator channel count after §5.7 (`comm->nChannels`).
    pub comm_channels: usize,
    /// `comm->maxTreePattern` (`Graphs::max_tree_pattern`); 0: the tree graph's own.
    pub max_tree_pattern: u32,
    /// Channels a Ring or Tree operation starts from ([`crate::channels::ChannelCounts::coll_algo`]).
    pub algo_channels: usize,
    /// `comm->nvlsChannels`.
    pub nvls_channels: usize,
    /// `comm->nvlsSupport`.
    pub nvls_supported: bool,
    /// CollNet usable (`config.collnetEnable` / `collNetSupport`).
    pub collnet_enabled: bool,
    /// [2.30] the CollNet plugin supports the chain algorithm.
    pub collnet_chain_supported: bool,
    /// CollNet heads per node (`collNetHeadsNum`, `collnetDirect.nHeads`).
    pub collnet_heads: usize,
    /// The CollNet plugin implements iallgather / ireducescatter.
    pub collnet_allgather: bool,
    pub collnet_reducescatter: bool,
    /// An NVSwitch is present (`ncclTopoGetNvsCount > 0`).
    pub has_nvswitch: bool,
    /// The network device is host-side (PAT auto needs it; device-offload networks do not).
    pub net_device_host: bool,
    /// NCCL built with CUDA 11.8 (disables Ring LL128 AllReduce on 2 Hopper ranks).
    pub cuda_11_8: bool,
    pub env: &'a EnvPolicy,
    pub data: &'a VersionData,
}

impl<'a> TuningInput<'a> {
    /// A communicator of `nranks` ranks spread evenly over `nnodes` nodes, no graphs yet.
    pub fn new(
        env: &'a EnvPolicy,
        data: &'a VersionData,
        nranks: usize,
        nnodes: usize,
    ) -> TuningInput<'a> {
        let nnodes = nnodes.max(1);
        TuningInput {
            nranks,
            nnodes,
            local_ranks: vec![nranks / nnodes; nnodes],
            min_cc: 0,
            max_cc: 0,
            cpu_arch: CpuArch::X86,
            cpu_vendor: CpuVendor::Intel,
            cpu_vendor_mixed: false,
            local_cpu_vendor: None,
            ring: None,
            tree: None,
            collnet_chain: None,
            collnet_direct: None,
            nvls: None,
            comm_channels: 0,
            max_tree_pattern: 0,
            algo_channels: 0,
            nvls_channels: 0,
            nvls_supported: false,
            collnet_enabled: false,
            collnet_chain_supported: true,
            collnet_heads: 0,
            collnet_allgather: false,
            collnet_reducescatter: false,
            has_nvswitch: false,
            net_device_host: true,
            cuda_11_8: false,
            env,
            data,
        }
    }

    /// The graph an algorithm runs on (NVLSTree on the NVLS graph, PAT on the tree graph); an
    /// absent graph reads like NCCL's zeroed one.
    pub fn graph(&self, a: Algorithm) -> Graph {
        let (g, id, pat) = match a {
            Algorithm::Tree | Algorithm::Pat => (&self.tree, GraphId::Tree, Pattern::BalancedTree),
            // Direct is the host runtime's, not NCCL's: no graph of its own.
            Algorithm::Ring | Algorithm::Direct => (&self.ring, GraphId::Ring, Pattern::Ring),
            Algorithm::CollnetDirect => (
                &self.collnet_direct,
                GraphId::CollnetDirect,
                Pattern::CollnetDirect,
            ),
            Algorithm::CollnetChain => (&self.collnet_chain, GraphId::CollnetChain, Pattern::Tree),
            Algorithm::Nvls | Algorithm::NvlsTree => (&self.nvls, GraphId::Nvls, Pattern::Nvls),
        };
        g.clone().unwrap_or_else(|| {
            let mut e = Graph::empty(id, pat);
            e.type_inter = PathType::Loc;
            e
        })
    }

    fn max_local_ranks(&self) -> usize {
        self.local_ranks
            .iter()
            .copied()
            .max()
            .unwrap_or(self.nranks)
    }
}

/// One function × algorithm × protocol.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Cell {
    /// NCCL computed this combination (otherwise it prints 0.0/0.0).
    pub evaluated: bool,
    /// Latency in us, as NCCL stores it (also for disabled cells).
    pub lat_us: f64,
    /// Algorithm bandwidth from the model, before the enable rules (GB/s).
    pub model_bw: f64,
    /// Usable algorithm bandwidth; `None` when disabled or zero.
    pub bw: Option<f64>,
    /// Why the combination cannot be used.
    pub disabled: Vec<String>,
    /// The rules and constants behind the figures.
    pub explain: Vec<String>,
}

impl Cell {
    /// Bandwidth NCCL prints and uses (0 when disabled).
    pub fn bw_or_zero(&self) -> f64 {
        self.bw.unwrap_or(0.0)
    }
    pub fn explanation(&self) -> String {
        self.explain.join("; ")
    }
    pub fn reason(&self) -> Option<String> {
        if self.disabled.is_empty() {
            None
        } else {
            Some(self.disabled.join("; "))
        }
    }
}

/// The communicator's cost table plus what selection needs.
#[derive(Clone, Debug, Serialize)]
pub struct CostTable {
    pub version: String,
    pub nranks: usize,
    pub nnodes: usize,
    pub max_local_ranks: usize,
    pub min_cc: u32,
    pub cpu_x86: bool,
    /// Algorithms of this version, in index order.
    pub algorithms: Vec<Algorithm>,
    /// `[func][algo][proto]`, functions in `Collective::TUNED` order.
    cells: Vec<Cell>,
    /// `maxThreads[algo][proto]`.
    pub max_threads: [[u32; 3]; 7],
    /// `threadThresholds[algo][proto]`.
    pub thread_thresholds: [[u64; 3]; 7],
    pub comm_channels: usize,
    pub algo_channels: usize,
    pub nvls_channels: usize,
    pub nvls_supported: bool,
    pub collnet_enabled: bool,
    pub collnet_heads: usize,
    pub max_nvls_arity: usize,
    pub max_direct_arity: usize,
    pub max_colls_per_batch: u32,
    pub warp: u32,
    pub max_nthreads: u32,
    pub tree_correction: [Vec<f64>; 3],
    pub tree_correction_len: usize,
    pub nvls_tree_correction: bool,
    pub nvls_multinode_channels_min: bool,
    pub channel_thread_loop: ChannelThreadLoop,
    pub tree_full_threads: bool,
    /// The `NCCL_ALGO`/`NCCL_PROTO` settings, for the "no algorithm" error.
    pub algo_env: Option<String>,
    pub proto_env: Option<String>,
    /// (variable, decision) pairs for `EnvPolicy::note_effect`.
    pub env_effects: Vec<(String, String)>,
}

fn fidx(f: Collective) -> Option<usize> {
    Collective::TUNED.iter().position(|x| *x == f)
}

fn log2i(n: u64) -> i64 {
    if n == 0 {
        -1
    } else {
        63 - n.leading_zeros() as i64
    }
}

fn r1(x: f64) -> String {
    format!("{x:.1}")
}

fn r2(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() {
        "0".into()
    } else {
        s.to_string()
    }
}

/// `getNthreads` (tuning.cc): a user value must be a multiple of the warp size and within
/// [min, max]; otherwise NCCL logs it and clamps.
fn nthreads(user: Option<i64>, min: u32, max: u32, def: u32, warp: u32) -> (u32, Option<String>) {
    match user {
        Some(n) if n > 0 => {
            let n = n as u64;
            if !n.is_multiple_of(warp as u64) {
                (
                    max,
                    Some(format!("{n} is not a multiple of {warp}: NCCL uses {max}")),
                )
            } else if n > max as u64 {
                (max, Some(format!("{n} above the maximum: NCCL uses {max}")))
            } else if n < min as u64 {
                (min, Some(format!("{n} below the minimum: NCCL uses {min}")))
            } else {
                (n as u32, None)
            }
        }
        _ => (def, None),
    }
}

impl CostTable {
    /// Builds the table (`ncclTopoTuneModel`).
    pub fn build(inp: &TuningInput) -> CostTable {
        let d = inp.data;
        let t = &d.tuning;
        let r = &d.rules;
        let mt = &t.max_threads;
        let mut env_effects: Vec<(String, String)> = vec![];

        // Threads per block.
        let ring = inp.graph(Algorithm::Ring);
        let ring_bw = ring.bw_intra * ring.n_channels as f64;
        let simple_def = if ring_bw <= mt.pci_bw {
            mt.simple_low_bw
        } else {
            mt.simple
        };
        let (ring_simple, w1) = nthreads(
            inp.env.nthreads,
            2 * mt.warp,
            mt.simple,
            simple_def,
            mt.warp,
        );
        let (tree_simple, _) =
            nthreads(inp.env.nthreads, 2 * mt.warp, mt.simple, mt.simple, mt.warp);
        let (ll, w2) = nthreads(inp.env.nthreads, 2 * mt.warp, mt.ll, mt.ll, mt.warp);
        let (ll128, w3) = nthreads(
            inp.env.ll128_nthreads,
            mt.ll128 / 4,
            mt.ll128,
            mt.ll128,
            mt.warp,
        );
        let mut max_threads = [[0u32; 3]; 7];
        max_threads[Algorithm::Ring as usize] = [ll, ll128, ring_simple];
        max_threads[Algorithm::Tree as usize] = [ll, ll128, tree_simple];
        for a in [
            Algorithm::CollnetDirect,
            Algorithm::CollnetChain,
            Algorithm::Nvls,
            Algorithm::NvlsTree,
        ] {
            max_threads[a as usize][2] = mt.max;
        }
        if inp.env.nthreads.is_some() {
            let w = w1.or(w2).unwrap_or_else(|| "ok".into());
            env_effects.push((
                "NCCL_NTHREADS".into(),
                format!("max threads Ring Simple {ring_simple}, Tree Simple {tree_simple}, LL {ll} ({w})"),
            ));
        }
        if inp.env.ll128_nthreads.is_some() {
            let w = w3.unwrap_or_else(|| "ok".into());
            env_effects.push((
                "NCCL_LL128_NTHREADS".into(),
                format!("max threads LL128 {ll128} ({w})"),
            ));
        }

        // Thread thresholds.
        let th = &t.thread_thresholds;
        let mut thread_thresholds = [[th.ll, th.ll128, th.simple]; 7];
        thread_thresholds[Algorithm::Ring as usize][0] *= inp.nranks.max(1) as u64;
        thread_thresholds[Algorithm::CollnetDirect as usize][2] = th.collnet_simple;
        thread_thresholds[Algorithm::CollnetChain as usize][2] = th.collnet_simple;
        if let Some(u) = inp.env.thread_thresholds {
            for (i, v) in u.iter().enumerate() {
                if *v >= 0 {
                    thread_thresholds[i / 3][i % 3] = *v as u64;
                }
            }
            let tt = thread_thresholds;
            env_effects.push((
                "NCCL_THREAD_THRESHOLDS".into(),
                format!(
                    "threadThresholds {}/{}/{} | {}/{}/{}",
                    tt[0][0], tt[0][1], tt[0][2], tt[1][0], tt[1][1], tt[1][2]
                ),
            ));
        }

        let mut table = CostTable {
            version: d.version.clone(),
            nranks: inp.nranks,
            nnodes: inp.nnodes,
            max_local_ranks: inp.max_local_ranks(),
            min_cc: inp.min_cc,
            cpu_x86: inp.cpu_arch == CpuArch::X86,
            algorithms: d.algorithms().to_vec(),
            cells: vec![Cell::default(); 5 * 7 * 3],
            max_threads,
            thread_thresholds,
            comm_channels: inp.comm_channels,
            algo_channels: inp.algo_channels,
            nvls_channels: inp.nvls_channels,
            nvls_supported: inp.nvls_supported,
            collnet_enabled: inp.collnet_enabled,
            collnet_heads: inp.collnet_heads,
            max_nvls_arity: d.max_nvls_arity as usize,
            max_direct_arity: d.max_direct_arity as usize,
            max_colls_per_batch: d.max_colls_per_batch.max(1),
            warp: mt.warp,
            max_nthreads: mt.max,
            tree_correction: [
                t.tree_correction.ll.clone(),
                t.tree_correction.ll128.clone(),
                t.tree_correction.simple.clone(),
            ],
            tree_correction_len: t.tree_correction_len,
            nvls_tree_correction: r.nvls_tree_correction_sm100_x86,
            nvls_multinode_channels_min: r.nvls_multinode_channels_min,
            channel_thread_loop: r.channel_thread_loop,
            tree_full_threads: r.tree_full_threads,
            algo_env: inp.env.algo.clone(),
            proto_env: inp.env.proto.clone(),
            env_effects,
        };
        if inp.nranks <= 1 {
            for c in table.cells.iter_mut() {
                c.disabled.push("a single rank needs no algorithm".into());
            }
            return table;
        }
        let missing: Vec<Algorithm> = Algorithm::ALL
            .iter()
            .copied()
            .filter(|a| !table.algorithms.contains(a))
            .collect();
        for a in missing {
            for fi in 0..5 {
                for p in Protocol::ALL {
                    table.cell_mut(fi, a, p).disabled.push(format!(
                        "{} does not exist in NCCL {}",
                        a.name(),
                        d.version
                    ));
                }
            }
        }
        table.model(inp);
        table.enable(inp);
        table
    }

    pub fn cell(&self, f: Collective, a: Algorithm, p: Protocol) -> Option<&Cell> {
        let fi = fidx(f)?;
        self.cells.get(fi * 21 + a as usize * 3 + p as usize)
    }

    fn cell_mut(&mut self, fi: usize, a: Algorithm, p: Protocol) -> &mut Cell {
        &mut self.cells[fi * 21 + a as usize * 3 + p as usize]
    }

    /// Usable algorithm bandwidth (GB/s) of a combination.
    pub fn bw(&self, f: Collective, a: Algorithm, p: Protocol) -> Option<f64> {
        self.cell(f, a, p).and_then(|c| c.bw)
    }

    /// Latency (us) of a usable combination.
    pub fn lat(&self, f: Collective, a: Algorithm, p: Protocol) -> Option<f64> {
        self.cell(f, a, p)
            .filter(|c| c.bw.is_some())
            .map(|c| c.lat_us)
    }

    /// The plan's `costs` object: collective → algorithm → protocol → `{bw_gbps, lat_us}`, or
    /// `None` where disabled (CLI names: `allreduce`, `nvlstree`, `ll128`).
    pub fn costs(&self) -> Costs {
        let mut out = Costs::new();
        for f in Collective::TUNED {
            let per_algo = out.entry(f.cli_name()).or_default();
            for a in &self.algorithms {
                let per_proto = per_algo.entry(a.cli_name()).or_default();
                for p in Protocol::ALL {
                    let c = self.cell(f, *a, p).and_then(|c| {
                        c.bw.map(|bw| Cost {
                            bw_gbps: bw,
                            lat_us: c.lat_us,
                        })
                    });
                    per_proto.insert(p.cli_name(), c);
                }
            }
        }
        out
    }

    /// Applies the (variable, effect) notes to the policy that produced this table.
    pub fn apply_env_effects(&self, env: &mut EnvPolicy) {
        for (k, v) in &self.env_effects {
            env.note_effect(k, v.clone());
        }
    }

    /// The bandwidth and latency model (first half of `ncclTopoTuneModel`, tuning.cc): per
    /// (collective, algorithm, protocol) the cell's algorithm bandwidth and latency, or why
    /// NCCL does not evaluate it.
    fn model(&mut self, inp: &TuningInput) {
        let m = Model::new(self, inp);
        for (fi, f) in Collective::TUNED.iter().copied().enumerate() {
            for a in inp.data.algorithms().iter().copied() {
                let g = inp.graph(a);
                for p in Protocol::ALL {
                    let site = Site::new(&m, f, a, p, &g);
                    let cell = self.cell_mut(fi, a, p);
                    if let Some(why) = m.not_evaluated(&site) {
                        cell.disabled.push(why);
                        continue;
                    }
                    let mut ex: Vec<String> = vec![];
                    match m.bandwidth(&site, &mut ex) {
                        Ok(bw) => cell.model_bw = bw,
                        Err(why) => {
                            cell.disabled.push(why);
                            continue;
                        }
                    }
                    let (lat, lx) = m.latency(&site);
                    ex.push(lx);
                    cell.evaluated = true;
                    cell.lat_us = lat;
                    cell.explain = ex;
                }
            }
        }
    }

    /// `ncclPatEnable`: (enabled, why not).
    fn pat_enabled(&self, inp: &TuningInput) -> (bool, String) {
        let d = inp.data;
        if !d.rules.pat_available {
            return (false, format!("PAT does not exist in NCCL {}", d.version));
        }
        if inp.min_cc < 60 {
            return (false, "PAT needs compute capability ≥ 6.0".into());
        }
        let e = inp.env.pat_enable_or(d);
        if e != 2 {
            return (e != 0, "PAT disabled by NCCL_PAT_ENABLE=0".into());
        }
        if inp.nnodes != inp.nranks {
            return (false, "PAT (auto) needs exactly one rank per node".into());
        }
        if !inp.net_device_host {
            return (
                false,
                "PAT (auto) does not support network device offload".into(),
            );
        }
        (true, String::new())
    }

    /// Enable/disable rules and user overrides (second half of `ncclTopoTuneModel`).
    fn enable(&mut self, inp: &TuningInput) {
        let d = inp.data;
        let r = &d.rules;
        let env = inp.env;
        let proto_en = env.enable.proto;
        let algos = d.algorithms().to_vec();
        let (algo_en, forced) = Self::forced_off(inp);
        let mut user_algo: Vec<String> = vec![];
        let mut user_proto: Vec<String> = vec![];
        let mut ll128_fx: Vec<String> = vec![];
        let mut pat_user = false;
        // Ring protocols that resolved to off (user or LL128 auto), per function: the 2.22–2.23
        // Ring backup does not bring those back.
        let mut ring_proto_off = [[false; 3]; 5];
        for (fi, f) in Collective::TUNED.iter().copied().enumerate() {
            for a in algos.iter().copied() {
                for p in Protocol::ALL {
                    let pi = p as usize;
                    let mut why: Vec<String> = vec![];
                    // Which of the reasons are the user's own NCCL_PROTO / NCCL_ALGO.
                    let (mut by_proto, mut by_algo) = (false, false);
                    let pe = proto_en[fi][pi];
                    if pe == 0 {
                        why.push(format!("NCCL_PROTO excludes {}", p.name()));
                        by_proto = true;
                    }
                    if pe == 2 && p == Protocol::Ll128 {
                        let reasons = self.ll128_auto(inp, f, a);
                        if a == Algorithm::Ring && !reasons.is_empty() {
                            ring_proto_off[fi][pi] = true;
                        }
                        why.extend(reasons);
                    } else if p == Protocol::Ll128 && pe == 1 && env.proto.is_some() {
                        let reasons = self.ll128_auto(inp, f, a);
                        if !reasons.is_empty()
                            && self.cell(f, a, p).is_some_and(|c| c.model_bw > 0.0)
                        {
                            ll128_fx.push(format!(
                                "LL128 forced on {} {} ({})",
                                f.name(),
                                a.name(),
                                reasons.join(", ")
                            ));
                        }
                    }
                    let ring_kept = r.ring_never_disabled_non_allreduce
                        && a == Algorithm::Ring
                        && f != Collective::AllReduce;
                    if algo_en[fi][a as usize] == 0 && !ring_kept {
                        let forced_why = forced[fi]
                            .iter()
                            .find(|(x, _)| *x == a)
                            .map(|(_, w)| w.clone());
                        match forced_why {
                            Some(w) => why.push(w),
                            None => {
                                why.push(format!("NCCL_ALGO excludes {}", a.name()));
                                by_algo = true;
                            }
                        }
                    }
                    let cell = self.cell_mut(fi, a, p);
                    let had_bw = cell.evaluated && cell.model_bw > 0.0;
                    if had_bw {
                        if by_algo {
                            user_algo.push(format!("{} {}", f.name(), a.name()));
                        }
                        if by_proto {
                            user_proto.push(format!("{} {} {}", f.name(), a.name(), p.name()));
                        }
                    }
                    if a == Algorithm::Pat && env.pat_enable.is_some() && cell.evaluated {
                        pat_user = true;
                    }
                    if !cell.evaluated {
                        cell.bw = None;
                        continue;
                    }
                    if why.is_empty() && cell.model_bw <= 0.0 {
                        why.push(model_zero_reason(&inp.graph(a), a));
                    }
                    cell.bw = if why.is_empty() {
                        Some(cell.model_bw)
                    } else {
                        None
                    };
                    cell.disabled = why;
                }
            }
            self.ring_backup(r, fi, algos.len(), &proto_en[fi], &ring_proto_off[fi]);
        }
        self.enable_effects(
            inp,
            EnableSeen {
                user_algo,
                user_proto,
                ll128_fx,
                pat_user,
            },
        );
    }

    /// NCCL_ALGO's matrix with what the machine rules out (NVLSTree on one node, CollNet
    /// without CollNet, CollNetDirect without NVSwitch), and why, per function.
    fn forced_off(inp: &TuningInput) -> (AlgoMatrix, Vec<Vec<(Algorithm, String)>>) {
        let r = &inp.data.rules;
        let mut algo_en = inp.env.enable.algo;
        let mut forced: Vec<Vec<(Algorithm, String)>> = vec![vec![]; 5];
        for (fi, row) in algo_en.iter_mut().enumerate() {
            let mut off = |a: Algorithm, why: String, row: &mut [u8; 7]| {
                row[a as usize] = 0;
                forced[fi].push((a, why));
            };
            if inp.nnodes == 1 {
                off(
                    Algorithm::NvlsTree,
                    "NVLSTree needs more than one node".into(),
                    row,
                );
            }
            if !inp.collnet_enabled {
                off(
                    Algorithm::CollnetDirect,
                    "CollNet is not enabled".into(),
                    row,
                );
                off(
                    Algorithm::CollnetChain,
                    "CollNet is not enabled".into(),
                    row,
                );
                if inp.nnodes > 1 {
                    off(Algorithm::Nvls, "multi-node NVLS needs CollNet".into(), row);
                }
                if r.collnet_forced_fallback
                    && row[Algorithm::Ring as usize] == 0
                    && row[Algorithm::Tree as usize] == 0
                    && row[Algorithm::Nvls as usize] == 0
                    && row[Algorithm::NvlsTree as usize] == 0
                {
                    // NCCL_ALGO asked for CollNet only: NCCL ignores it and brings Ring and Tree back.
                    row[Algorithm::Ring as usize] = 1;
                    row[Algorithm::Tree as usize] = 1;
                }
            }
            if inp.collnet_enabled && r.collnet_chain_support_check && !inp.collnet_chain_supported
            {
                off(
                    Algorithm::CollnetChain,
                    "CollNetChain is not supported by the CollNet plugin".into(),
                    row,
                );
            }
            if !inp.has_nvswitch {
                off(
                    Algorithm::CollnetDirect,
                    "CollNetDirect needs an NVSwitch".into(),
                    row,
                );
            }
        }

        (algo_en, forced)
    }

    /// [2.21–2.23] a function with nothing left gets Ring back (all protocols, or those not
    /// turned off, by version).
    fn ring_backup(
        &mut self,
        r: &Rules,
        fi: usize,
        nalgos: usize,
        proto_on: &[u8; 3],
        ring_proto_off: &[bool; 3],
    ) {
        if r.ring_backup != RingBackup::None {
            let any = (0..nalgos)
                .any(|ai| (0..3).any(|pi| self.cells[fi * 21 + ai * 3 + pi].bw.is_some()));
            if !any {
                for p in Protocol::ALL {
                    let pi = p as usize;
                    let keep = r.ring_backup == RingBackup::AllProtocols
                        || (proto_on[pi] != 0 && !ring_proto_off[pi]);
                    let c = self.cell_mut(fi, Algorithm::Ring, p);
                    if keep && c.evaluated && c.model_bw > 0.0 {
                        c.bw = Some(c.model_bw);
                        c.disabled.clear();
                        c.explain
                            .push("restored: no other algorithm left (Ring backup)".into());
                    }
                }
            }
        }
    }

    /// What NCCL_ALGO, NCCL_PROTO, NCCL_PAT_ENABLE and NCCL_LL128_C2C did to the table.
    fn enable_effects(&mut self, inp: &TuningInput, seen: EnableSeen) {
        let EnableSeen {
            user_algo,
            user_proto,
            ll128_fx,
            pat_user,
        } = seen;
        let (d, env) = (inp.data, inp.env);
        if !user_algo.is_empty() {
            self.env_effects.push((
                "NCCL_ALGO".into(),
                format!("disables {}", summarize(&user_algo)),
            ));
        }
        if !user_proto.is_empty() {
            self.env_effects.push((
                "NCCL_PROTO".into(),
                format!("disables {}", summarize(&user_proto)),
            ));
        }
        for e in ll128_fx.into_iter().take(1) {
            self.env_effects.push(("NCCL_PROTO".into(), e));
        }
        if pat_user {
            let (on, why) = self.pat_enabled(inp);
            self.env_effects.push((
                "NCCL_PAT_ENABLE".into(),
                if on {
                    "PAT enabled for AllGather/ReduceScatter".into()
                } else {
                    why
                },
            ));
        }
        if env.ll128_c2c.is_some() && inp.min_cc >= 90 {
            self.env_effects.push((
                "NCCL_LL128_C2C".into(),
                format!(
                    "LL128 allowed up to {} inter-node",
                    if env.ll128_c2c_or(d) { "PXN" } else { "PXB" }
                ),
            ));
        }
    }

    /// Why LL128 "auto" resolves to off for this (function, algorithm); empty when on.
    fn ll128_auto(&self, inp: &TuningInput, f: Collective, a: Algorithm) -> Vec<String> {
        let d = inp.data;
        let r = &d.rules;
        let g = inp.graph(a);
        let mut why = vec![];
        let max_inter = match r.ll128_inter_rule {
            Ll128InterRule::PxbOrPxnSm90 => {
                if inp.min_cc >= 90 {
                    PathType::Pxn
                } else {
                    PathType::Pxb
                }
            }
            Ll128InterRule::Ll128C2c => {
                if inp.env.ll128_c2c_or(d) && inp.min_cc >= 90 {
                    PathType::Pxn
                } else {
                    PathType::Pxb
                }
            }
        };
        if g.type_inter > max_inter {
            why.push(format!(
                "LL128 disabled: inter path type {} > {}",
                g.type_inter, max_inter
            ));
        }
        if g.type_intra > PathType::Nvb {
            why.push(format!(
                "LL128 disabled: intra path type {} > NVB",
                g.type_intra
            ));
        }
        let mixed_ok = match r.ll128_mixed_cc_rule {
            Ll128MixedCcRule::Equal => inp.min_cc == inp.max_cc,
            Ll128MixedCcRule::EqualOrSm90 => inp.min_cc == inp.max_cc || inp.min_cc >= 90,
        };
        if !mixed_ok {
            why.push(format!(
                "LL128 disabled: mixed compute capabilities {}/{}",
                inp.min_cc, inp.max_cc
            ));
        }
        match &r.ll128_cc_rule {
            Some(list) if !list.contains(&inp.min_cc) => {
                let l: Vec<String> = list.iter().map(|c| c.to_string()).collect();
                why.push(format!(
                    "LL128 disabled: compute capability {} not in {}",
                    inp.min_cc,
                    l.join(", ")
                ));
            }
            None if inp.min_cc < r.ll128_min_cc => {
                why.push(format!(
                    "LL128 disabled: compute capability {} < {}",
                    inp.min_cc, r.ll128_min_cc
                ));
            }
            _ => {}
        }
        if inp.min_cc == 90
            && inp.cuda_11_8
            && f == Collective::AllReduce
            && a == Algorithm::Ring
            && inp.nranks == 2
        {
            why.push("LL128 disabled: Ring AllReduce on 2 Hopper ranks with CUDA 11.8".into());
        }
        why
    }
}

/// One usable cell of the plan's `costs`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Cost {
    pub bw_gbps: f64,
    pub lat_us: f64,
}

pub type Costs = std::collections::BTreeMap<
    &'static str,
    std::collections::BTreeMap<
        &'static str,
        std::collections::BTreeMap<&'static str, Option<Cost>>,
    >,
>;

fn model_zero_reason(g: &Graph, a: Algorithm) -> String {
    if g.n_channels == 0 {
        format!("no {} graph (0 channels)", a.name())
    } else {
        format!("{} bandwidth model gives 0", a.name())
    }
}

fn summarize(items: &[String]) -> String {
    let mut v: Vec<&String> = items.iter().collect();
    v.dedup();
    if v.len() > 6 {
        format!(
            "{} and {} more",
            v[..6]
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            v.len() - 6
        )
    } else {
        v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
    }
}

/// Per-operation facts that filter algorithms at enqueue time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpContext {
    /// Operations aggregated per channel in the group (`numPipeOps`); 1 for a lone collective.
    pub num_pipe_ops: usize,
    /// The (op, datatype) can use NVLS (Sum/MinMax on ints/fp16/bf16, Sum on fp32/fp64).
    pub nvls_op: bool,
    /// The CollNet plugin supports the (op, datatype).
    pub collnet_op: bool,
    /// ReduceScatter with a scaling op (average / PreMulSum): no PAT.
    pub scaling_op: bool,
    /// FP8 datatype (Ring deprioritised above 8 ranks, 2.24+).
    pub fp8: bool,
}

impl Default for OpContext {
    fn default() -> Self {
        OpContext {
            num_pipe_ops: 1,
            nvls_op: true,
            collnet_op: true,
            scaling_op: false,
            fp8: false,
        }
    }
}

/// What NCCL picks for one collective.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Choice {
    pub func: Collective,
    pub bytes: u64,
    pub algo: Algorithm,
    pub proto: Protocol,
    /// Predicted time (us).
    pub time_us: f64,
    /// Algorithm bandwidth used in the time (after size correction), GB/s.
    pub bw: f64,
    /// Latency used in the time (after the Ring plateau factor), us.
    pub lat_us: f64,
    /// Channels (upper bound, `nMaxChannels`) and threads per block.
    pub nchannels: usize,
    pub nthreads: u32,
    /// Every usable (algorithm, protocol) with its time, in NCCL's scan order.
    pub considered: Vec<(Algorithm, Protocol, f64)>,
    /// Combinations not usable for this operation, with why.
    pub rejected: Vec<(Algorithm, Protocol, String)>,
    pub explain: Vec<String>,
}

impl CostTable {
    /// The algorithm, protocol, channels and threads NCCL picks for `bytes` (NCCL's nBytes:
    /// the whole buffer, count × nRanks × type size for AllGather/ReduceScatter, which is also
    /// the nccl-tests size column).
    pub fn select(&self, func: Collective, bytes: u64, op: &OpContext) -> Result<Choice> {
        let Some(fi) = fidx(func) else {
            return Err(Error::new(
                ErrorKind::Request,
                format!("{} is not a tuned collective", func.cli_name()),
            )
            .help("NCCL runs it as point-to-point operations; use a collective like allreduce"));
        };
        let _ = fi;
        let mut considered = vec![];
        let mut rejected = vec![];
        let mut explain = vec![];
        if self.nranks <= 1 {
            return Ok(Choice {
                func,
                bytes,
                algo: Algorithm::Ring,
                proto: Protocol::Simple,
                time_us: 0.0,
                bw: 0.0,
                lat_us: 0.0,
                nchannels: self.comm_channels.max(1),
                nthreads: self.max_threads[Algorithm::Ring as usize][2],
                considered: vec![(Algorithm::Ring, Protocol::Simple, 0.0)],
                rejected,
                explain: vec!["a single rank: a copy".into()],
            });
        }
        let mut best: Option<(Algorithm, Protocol, f64, f64, f64)> = None;
        for a in self.algorithms.iter().copied() {
            let skip = self.op_filter(func, a, op);
            for p in Protocol::ALL {
                let Some(cell) = self.cell(func, a, p) else {
                    continue;
                };
                if let Some(w) = &skip {
                    if cell.bw.is_some() {
                        rejected.push((a, p, w.clone()));
                    }
                    continue;
                }
                let Some(mut bw) = cell.bw else {
                    if cell.evaluated {
                        rejected.push((a, p, cell.reason().unwrap_or_default()));
                    }
                    continue;
                };
                let mut lat = cell.lat_us;
                let log_size = log2i(bytes >> 6);
                let pi = p as usize;
                let corr = |bw: &mut f64, len: usize, what: &str, ex: &mut Vec<String>| {
                    if log_size >= 0 && (log_size as usize) < len {
                        let c = self.tree_correction[pi]
                            .get(log_size as usize)
                            .copied()
                            .unwrap_or(1.0);
                        *bw *= c;
                        ex.push(format!(
                            "{what} {} {}: size correction × {c}",
                            a.name(),
                            p.name()
                        ));
                    }
                };
                let mut ex = vec![];
                if a == Algorithm::Tree && func == Collective::AllReduce {
                    corr(&mut bw, self.tree_correction_len, "tree", &mut ex);
                }
                if a == Algorithm::NvlsTree
                    && func == Collective::AllReduce
                    && self.nvls_tree_correction
                    && self.min_cc >= 100
                    && self.cpu_x86
                {
                    corr(&mut bw, self.tree_correction_len + 1, "NVLSTree", &mut ex);
                }
                if a == Algorithm::Ring
                    && p == Protocol::Simple
                    && self.nnodes > 1
                    && func == Collective::AllReduce
                    && self.comm_channels > 0
                    && bytes / (self.comm_channels as u64 * self.nranks as u64) >= 64
                {
                    let f = if self.min_cc < 80 { 1.9 } else { 1.4 };
                    lat *= f;
                    ex.push(format!("Ring Simple multi-node plateau: latency × {f}"));
                }
                let n = op.num_pipe_ops.max(1) as u64;
                let lat_count = if a == Algorithm::Ring {
                    n
                } else {
                    n.div_ceil(self.max_colls_per_batch as u64)
                };
                let mut time = lat * lat_count as f64 + bytes as f64 / (1000.0 * bw);
                if op.fp8 && a == Algorithm::Ring && self.nranks > 8 {
                    time *= 1024.0;
                }
                considered.push((a, p, time));
                if best.is_none_or(|b| time < b.2) {
                    best = Some((a, p, time, bw, lat));
                    explain = ex;
                }
            }
        }
        let Some((algo, proto, time_us, bw, lat_us)) = best else {
            let mut set = vec![];
            if let Some(v) = &self.algo_env {
                set.push(format!("NCCL_ALGO={v}"));
            }
            if let Some(v) = &self.proto_env {
                set.push(format!("NCCL_PROTO={v}"));
            }
            return Err(Error::new(
                ErrorKind::Request,
                format!(
                    "no algorithm/protocol available for {}{}",
                    func.cli_name(),
                    if set.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", set.join(", "))
                    }
                ),
            )
            .help("relax NCCL_ALGO / NCCL_PROTO"));
        };
        let (nchannels, nthreads, mut cex) = self.channels_threads(algo, proto, bytes);
        explain.push(format!(
            "time {} = lat {} + {} B / (1000 × {} GB/s)",
            r2(time_us),
            r2(lat_us),
            bytes,
            r2(bw)
        ));
        explain.append(&mut cex);
        Ok(Choice {
            func,
            bytes,
            algo,
            proto,
            time_us,
            bw,
            lat_us,
            nchannels,
            nthreads,
            considered,
            rejected,
            explain,
        })
    }

    /// Enqueue-time filters (`updateCollCostTable`): why `a` cannot run this operation.
    fn op_filter(&self, func: Collective, a: Algorithm, op: &OpContext) -> Option<String> {
        let collnet = matches!(a, Algorithm::CollnetDirect | Algorithm::CollnetChain);
        if collnet && !(self.collnet_enabled && op.collnet_op) {
            return Some("CollNet does not support this operation".into());
        }
        if collnet && self.max_local_ranks > self.max_direct_arity + 1 {
            return Some(format!(
                "{} supports at most {} local ranks",
                a.name(),
                self.max_direct_arity + 1
            ));
        }
        if matches!(a, Algorithm::Nvls | Algorithm::NvlsTree) {
            let nvls_ok = self.nvls_supported && (op.nvls_op || func == Collective::AllGather);
            if !nvls_ok {
                return Some("NVLS does not support this operation".into());
            }
            if func != Collective::AllReduce && self.max_local_ranks > self.max_nvls_arity {
                return Some(format!(
                    "NVLS {} supports at most {} local ranks",
                    func.name(),
                    self.max_nvls_arity
                ));
            }
        }
        if a == Algorithm::Nvls && !self.collnet_enabled && self.nnodes > 1 {
            return Some("multi-node NVLS needs CollNet".into());
        }
        if a == Algorithm::Pat && func == Collective::ReduceScatter && op.scaling_op {
            return Some("PAT ReduceScatter does not support scaling ops".into());
        }
        None
    }

    /// Channels and threads for one operation (`topoGetAlgoInfo`).
    pub fn channels_threads(
        &self,
        a: Algorithm,
        p: Protocol,
        bytes: u64,
    ) -> (usize, u32, Vec<String>) {
        let mut ex = vec![];
        let mut nc = self.algo_channels.max(1) as u64;
        let mut nt = self.max_threads[a as usize][p as usize] as u64;
        let mut th = self.thread_thresholds[a as usize][p as usize];
        let b = bytes;
        match a {
            Algorithm::CollnetDirect => {
                let heads = self.collnet_heads.max(1) as u64;
                let mut sw = 16u64;
                let mut flag = true;
                while sw >= 1 && flag {
                    loop {
                        flag = b < nc * nt * heads * th;
                        if !(flag && nc > sw) {
                            break;
                        }
                        if nc == sw + sw / 2 {
                            th /= 2;
                        }
                        nc -= 1;
                    }
                    sw /= 2;
                }
                ex.push(format!("CollNetDirect channels {nc}"));
            }
            Algorithm::Nvls | Algorithm::NvlsTree => {
                nc = self.nvls_channels.max(1) as u64;
                if self.nvls_multinode_channels_min && self.nnodes > 1 && a == Algorithm::Nvls {
                    nc = nc.min(self.comm_channels.max(1) as u64);
                }
                ex.push(format!("NVLS channels {nc}"));
            }
            _ => match self.channel_thread_loop {
                ChannelThreadLoop::Single => {
                    while b < nc * nt * th {
                        if nc >= 2 {
                            nc -= 1;
                        } else if nt.is_multiple_of(128) {
                            nt /= 2;
                        } else {
                            break;
                        }
                    }
                }
                ChannelThreadLoop::Split => {
                    while b < nc * nt * th && nc >= 2 {
                        nc -= 1;
                    }
                }
            },
        }
        if self.channel_thread_loop == ChannelThreadLoop::Split
            && !matches!(
                a,
                Algorithm::Nvls | Algorithm::NvlsTree | Algorithm::CollnetDirect
            )
        {
            while b < nc * nt * th && nt.is_multiple_of(128) && nt > 0 {
                nt /= 2;
            }
        }
        if !matches!(
            a,
            Algorithm::CollnetDirect | Algorithm::Nvls | Algorithm::NvlsTree
        ) {
            ex.push(format!(
                "channels {nc} (threshold {th} B/thread × {nt} threads per channel)"
            ));
        }
        let w = self.warp as u64;
        if p == Protocol::Simple {
            if a == Algorithm::Ring {
                nt += w;
            }
            if a == Algorithm::Tree {
                nt += 4 * w;
            }
        }
        if nt / w < 3 {
            nt = 3 * w;
        }
        if self.tree_full_threads && matches!(a, Algorithm::Tree | Algorithm::Pat) {
            nt = self.max_nthreads as u64;
        }
        ex.push(format!("{nt} threads"));
        (nc as usize, nt as u32, ex)
    }
}

/// nccl-tests bus-bandwidth factor (§8), the runtime's too.
pub use topo_vocab::bus_factor as busbw_factor;

/// nccl-tests algbw in GB/s: size column / time.
pub fn algbw_gbps(bytes: u64, time_us: f64) -> f64 {
    if time_us <= 0.0 {
        0.0
    } else {
        bytes as f64 / (time_us * 1000.0)
    }
}

/// nccl-tests busbw in GB/s.
pub fn busbw_gbps(func: Collective, nranks: usize, bytes: u64, time_us: f64) -> f64 {
    algbw_gbps(bytes, time_us) * busbw_factor(func, nranks)
}

/// The TUNING table exactly as NCCL logs it (rank 0, `NCCL_DEBUG_SUBSYS=TUNING`), without the
/// `host:pid:tid [dev] NCCL INFO ` prefix; one line per log line.
pub fn render_tuning_log(t: &CostTable) -> String {
    let algos = &t.algorithms;
    let mut out = String::new();
    let nblocks = algos.len().div_ceil(3);
    let fmt = |v: f64| v as f32;
    for block in 0..nblocks {
        let in_block: Vec<Algorithm> = (0..3)
            .filter_map(|i| algos.get(block * 3 + i).copied())
            .collect();
        let mut line = String::from("  Algorithm   |");
        for a in &in_block {
            line += &format!(" {:>14}   {:>14}   {:>14} |", "", a.name(), "");
        }
        out += &line;
        out.push('\n');
        let mut line = String::from("  Protocol    |");
        for _ in 0..3 {
            for p in Protocol::ALL {
                line += &format!(" {:>14} |", p.name());
            }
        }
        out += &line;
        out.push('\n');
        let mut line = String::from(" Max NThreads |");
        for a in &in_block {
            for p in Protocol::ALL {
                line += &format!(" {:>14} |", t.max_threads[*a as usize][p as usize]);
            }
        }
        out += &line;
        out.push('\n');
        for f in Collective::TUNED {
            let mut line = format!("{:>13} |", f.name());
            for a in &in_block {
                for p in Protocol::ALL {
                    let (lat, bw) = t
                        .cell(f, *a, p)
                        .map(|c| (if c.evaluated { c.lat_us } else { 0.0 }, c.bw_or_zero()))
                        .unwrap_or((0.0, 0.0));
                    line += &format!("{:8.1}/{:6.1} |", fmt(lat), fmt(bw));
                }
            }
            out += &line;
            out.push('\n');
        }
    }
    out
}

/// The `Enabled NCCL Func/Proto/Algo Matrix:` block NCCL 2.24+ logs when NCCL_ALGO or
/// NCCL_PROTO is set (user settings before topology rules; LL128 2 = auto), without the log
/// prefix; `None` when neither is set or the version does not print it.
pub fn render_enable_matrix(env: &EnvPolicy, data: &VersionData) -> Option<String> {
    use crate::version::AlgoProtoGrammar;
    if data.rules.algo_proto_grammar != AlgoProtoGrammar::PerFunction
        || (env.algo.is_none() && env.proto.is_none())
    {
        return None;
    }
    let algos = data.algorithms();
    let mut out = String::from("Enabled NCCL Func/Proto/Algo Matrix:\n     Function | ");
    for p in Protocol::ALL {
        out += &format!("{:>8}  ", p.name());
    }
    out += " | ";
    for a in algos {
        out += &format!("{:>13}  ", a.name());
    }
    out.push('\n');
    for f in Collective::TUNED {
        out += &format!("{:>13} | ", f.name());
        for p in Protocol::ALL {
            out += &format!("{:>8}  ", env.enable.proto(f, p));
        }
        out += " | ";
        for a in algos {
            out += &format!("{:>13}  ", env.enable.algo(f, *a));
        }
        out.push('\n');
    }
    Some(out)
}

/// The `threadThresholds` INIT line's values (`8/8/64 | 64/8/64 | 512 | 512`).
pub fn render_thread_thresholds(t: &CostTable) -> String {
    let x = &t.thread_thresholds;
    format!(
        "{}/{}/{} | {}/{}/{} | {} | {}",
        x[0][0], x[0][1], x[0][2], x[1][0], x[1][1], x[1][2], x[2][2], x[3][2]
    )
}

/// Per function, per algorithm: 0 off, 1 on, 2 auto (NCCL's `algoEnable`).
type AlgoMatrix = [[u8; 7]; 5];

/// What the enable pass saw that the environment caused, for the plan's `env[]` notes.
struct EnableSeen {
    user_algo: Vec<String>,
    user_proto: Vec<String>,
    ll128_fx: Vec<String>,
    pat_user: bool,
}

/// What every cell of the model reads: NCCL's per-version tables at this machine's compute
/// capability and node count, looked up once (`ncclTopoTuneModel`'s locals).
struct Model<'a> {
    inp: &'a TuningInput<'a>,
    d: &'a VersionData,
    t: &'a TuningTables,
    r: &'a Rules,
    nranks: usize,
    nnodes: usize,
    ppn: f64,
    ppn_i: f64,
    ll_max: f64,
    ch_tree: f64,
    ch_ring_ll128: f64,
    ch_tree_ll128: f64,
    ch_nvls_tree: Option<f64>,
    nvls_eff: f64,
    hw: HwLatency,
    pat_on: (bool, String),
    net_overhead: (f64, String),
}

/// One cell: the collective, algorithm and protocol, and the graph it runs on.
struct Site<'g> {
    f: Collective,
    a: Algorithm,
    p: Protocol,
    pi: usize,
    g: &'g Graph,
    nch: f64,
    nsteps: f64,
    ag_rs: bool,
    collnet: bool,
}

impl<'g> Site<'g> {
    fn new(m: &Model, f: Collective, a: Algorithm, p: Protocol, g: &'g Graph) -> Site<'g> {
        let nranks = m.nranks;
        let nsteps = match f {
            Collective::AllReduce => 2 * (nranks - 1),
            Collective::AllGather | Collective::ReduceScatter => nranks - 1,
            _ => nranks,
        } as f64;
        Site {
            f,
            a,
            p,
            pi: p as usize,
            g,
            nch: g.n_channels as f64,
            nsteps,
            ag_rs: matches!(f, Collective::AllGather | Collective::ReduceScatter),
            collnet: matches!(a, Algorithm::CollnetDirect | Algorithm::CollnetChain),
        }
    }
}

impl<'a> Model<'a> {
    fn new(table: &mut CostTable, inp: &'a TuningInput<'a>) -> Model<'a> {
        let d: &'a VersionData = inp.data;
        let t = &d.tuning;
        let r = &d.rules;
        let nranks = inp.nranks;
        let nnodes = inp.nnodes;
        let ppn = nranks as f64 / nnodes as f64;
        let ppn_i = (nranks / nnodes) as f64;
        let cc = t.cc_index(inp.min_cc);
        let index2 = if nnodes <= 2 { nnodes - 1 } else { 2 };
        let amd_like = if r.ll_max_bw_mixed_vendor {
            inp.cpu_vendor == CpuVendor::Amd || inp.cpu_vendor_mixed
        } else {
            inp.local_cpu_vendor.unwrap_or(inp.cpu_vendor) == CpuVendor::Amd
        };
        let index1 = if nnodes == 1 {
            cc
        } else if amd_like {
            1
        } else {
            0
        };
        let pick = |rows: &Vec<[f64; 3]>, i: usize| {
            rows.get(i)
                .or(rows.last())
                .map(|r| r[index2])
                .unwrap_or(0.0)
        };
        let ll_max = pick(&t.ll_max_bw, index1);
        let ch_tree = pick(&t.per_ch_max_tree_bw, cc);
        let ch_ring_ll128 = pick(&t.per_ch_max_ring_ll128_bw, cc);
        let ch_tree_ll128 = pick(&t.per_ch_max_tree_ll128_bw, cc);
        let ch_nvls_tree = t.per_ch_max_nvls_tree_bw.as_ref().map(|v| pick(v, cc));
        let nvls_eff = t
            .nvls_efficiency
            .as_ref()
            .and_then(|v| v.get(cc).copied())
            .unwrap_or(0.0);
        let mut hw = t.hw_latency.clone();
        if inp.cpu_arch == CpuArch::Power {
            // De-penalise Tree Simple on POWER: PCI Tree Simple takes Ring's value.
            hw.pci.tree[2] = hw.pci.ring[2];
        }
        let pat_on = table.pat_enabled(inp);
        let net_overhead = match inp.env.net_overhead {
            Some(ns) => (ns as f64 * 0.001, format!("NCCL_NET_OVERHEAD {ns} ns")),
            None => match (inp.cpu_arch, inp.cpu_vendor) {
                (CpuArch::X86, CpuVendor::Intel) => (1.0, "x86 Intel 1.0".into()),
                (CpuArch::X86, CpuVendor::Amd) => (2.0, "x86 AMD 2.0".into()),
                _ => (1.0, "default 1.0".into()),
            },
        };
        if inp.env.net_overhead.is_some() && nnodes > 1 {
            table.env_effects.push((
                "NCCL_NET_OVERHEAD".into(),
                format!(
                    "ring latency net overhead {:.3} us per step",
                    net_overhead.0
                ),
            ));
        }

        Model {
            inp,
            d,
            t,
            r,
            nranks,
            nnodes,
            ppn,
            ppn_i,
            ll_max,
            ch_tree,
            ch_ring_ll128,
            ch_tree_ll128,
            ch_nvls_tree,
            nvls_eff,
            hw,
            pat_on,
            net_overhead,
        }
    }

    /// Why NCCL does not evaluate this cell, if it does not.
    fn not_evaluated(&self, s: &Site) -> Option<String> {
        let (f, a, p) = (s.f, s.a, s.p);
        let evaluated_for_func = match f {
            Collective::Broadcast | Collective::Reduce => a == Algorithm::Ring,
            Collective::AllGather | Collective::ReduceScatter => self.r.ag_rs_algos.contains(&a),
            _ => a != Algorithm::Pat,
        };
        if !evaluated_for_func {
            return Some(format!(
                "NCCL {} does not model {} for {}",
                self.d.version,
                a.name(),
                f.name()
            ));
        }
        if matches!(a, Algorithm::Nvls | Algorithm::NvlsTree) && p != Protocol::Simple {
            return Some(format!("{} runs Simple only", a.name()));
        }
        if s.ag_rs && a == Algorithm::Pat && (p != Protocol::Simple || !self.pat_on.0) {
            return Some(if p != Protocol::Simple {
                "PAT runs Simple only".to_string()
            } else {
                self.pat_on.1.clone()
            });
        }
        None
    }

    /// The cell's algorithm bandwidth (GB/s), each step explained; `Err` when NCCL disables
    /// the cell on the way.
    fn bandwidth(&self, s: &Site, ex: &mut Vec<String>) -> std::result::Result<f64, String> {
        let (a, g, nnodes) = (s.a, s.g, self.nnodes);
        let mut bw = if nnodes <= 2 || s.collnet {
            g.bw_intra
        } else {
            g.bw_inter
        };
        ex.push(format!(
            "{} graph {} ch × {} GB/s ({})",
            a.name(),
            g.n_channels,
            r2(bw),
            if nnodes <= 2 || s.collnet {
                "bwIntra"
            } else {
                "bwInter, > 2 nodes"
            }
        ));
        if matches!(a, Algorithm::Nvls | Algorithm::NvlsTree) {
            bw = self.nvls_channel_bw(s, bw, ex)?;
        }
        let mut bus = s.nch * bw;
        ex.push(format!(
            "busBw {} ch × {} = {}",
            g.n_channels,
            r2(bw),
            r2(bus)
        ));
        bus = self.refine(s, bus, ex);
        bus = self.collnet_bus(s, bus, bw, ex);
        Ok(self.algbw(s, bus, ex))
    }

    /// NVLS and NVLS Tree: the per-channel bandwidth by the version's rule.
    fn nvls_channel_bw(
        &self,
        s: &Site,
        mut bw: f64,
        ex: &mut Vec<String>,
    ) -> std::result::Result<f64, String> {
        let (f, a, g, r, nnodes, ppn, nch) = (s.f, s.a, s.g, self.r, self.nnodes, self.ppn, s.nch);
        let (nvls_eff, ch_nvls_tree) = (self.nvls_eff, self.ch_nvls_tree);
        if matches!(a, Algorithm::Nvls | Algorithm::NvlsTree) {
            let tree = a == Algorithm::NvlsTree;
            match r.nvls_bw_rule {
                NvlsBwRule::V2_18 => {}
                NvlsBwRule::V2_21 | NvlsBwRule::V2_27 => {
                    if !tree && (f == Collective::AllReduce || r.nvls_bw_rule == NvlsBwRule::V2_21)
                    {
                        bw = g.bw_intra.min(g.bw_inter);
                        ex.push(format!(
                            "per-channel min(bwIntra {}, bwInter {}) = {}",
                            r2(g.bw_intra),
                            r2(g.bw_inter),
                            r2(bw)
                        ));
                    } else if !tree {
                        let i = g.bw_intra * (ppn - 1.0) / ppn;
                        bw = i.min(g.bw_inter * 0.9);
                        ex.push(format!(
                            "per-channel min(bwIntra {} × (ppn−1)/ppn, 0.9 × bwInter {}) = {}",
                            r2(g.bw_intra),
                            r2(g.bw_inter),
                            r2(bw)
                        ));
                    } else {
                        let e = if nnodes <= 2 {
                            g.bw_inter
                        } else {
                            g.bw_inter / 2.0
                        };
                        bw = g.bw_intra.min(e);
                        ex.push(format!(
                            "per-channel min(bwIntra {}, {}) = {}",
                            r2(g.bw_intra),
                            r2(e),
                            r2(bw)
                        ));
                    }
                }
                NvlsBwRule::V2_28 => {
                    if g.n_channels < 2 {
                        return Err(format!(
                            "{} needs at least 2 channels (graph has {})",
                            a.name(),
                            g.n_channels
                        ));
                    }
                    let mut intra = g.bw_intra * nvls_eff * (nch - 1.0) / nch;
                    let mut s = format!(
                        "intra {} × eff {} × {}/{}",
                        r2(g.bw_intra),
                        r2(nvls_eff),
                        g.n_channels - 1,
                        g.n_channels
                    );
                    if f == Collective::AllReduce {
                        intra *= 2.0;
                        s += " × 2";
                    } else {
                        intra *= (ppn - 1.0) / ppn;
                        s += " × (ppn−1)/ppn";
                    }
                    let inter = g.bw_inter * if nnodes <= 2 && tree { 2.0 } else { 1.0 };
                    bw = intra.min(inter);
                    let mut m = format!("per-channel min({s} = {}, inter {}", r2(intra), r2(inter));
                    if tree {
                        let cap = ch_nvls_tree.unwrap_or(f64::MAX);
                        bw = bw.min(cap);
                        m += &format!(", perChMaxNVLSTreeBw {}", r2(cap));
                    }
                    ex.push(format!("{m}) = {}", r2(bw)));
                }
            }
        }
        Ok(bw)
    }

    /// The per-protocol and per-pattern refinements of the bus bandwidth, in NCCL's order.
    fn refine(&self, s: &Site, mut bus: f64, ex: &mut Vec<String>) -> f64 {
        let (f, a, p, g, r, nnodes, ppn, nch) =
            (s.f, s.a, s.p, s.g, self.r, self.nnodes, self.ppn, s.nch);
        let (ll_max, ch_ring_ll128, ch_tree, ch_tree_ll128) = (
            self.ll_max,
            self.ch_ring_ll128,
            self.ch_tree,
            self.ch_tree_ll128,
        );
        if a == Algorithm::Ring && p == Protocol::Ll {
            let fac = match r.ring_ll_factor {
                RingLlFactor::Half => 0.5,
                RingLlFactor::QuarterOrThird => {
                    if nnodes > 1 || matches!(f, Collective::AllReduce | Collective::Reduce) {
                        0.25
                    } else {
                        1.0 / 3.0
                    }
                }
            };
            let v = (bus * fac).min(ll_max);
            ex.push(format!(
                "LL min(llMaxBw {}, {} × {}) = {}",
                r2(ll_max),
                r2(bus),
                r2(fac),
                r2(v)
            ));
            bus = v;
        }
        if a == Algorithm::Ring && p == Protocol::Ll128 {
            let fac = match r.ring_ll128_low_ppn_factor {
                Some(x) if ppn < 2.0 => x,
                _ => 0.92,
            };
            let cap = nch * ch_ring_ll128;
            let v = (bus * fac).min(cap);
            ex.push(format!(
                "LL128 min({} × {}, {} ch × perChMaxRingLL128Bw {}) = {}",
                r2(bus),
                r2(fac),
                g.n_channels,
                r2(ch_ring_ll128),
                r2(v)
            ));
            bus = v;
        }
        let tree_rules = a == Algorithm::Tree
            && (!r.tree_correction_allreduce_only || f == Collective::AllReduce);
        if tree_rules {
            let cap = nch * ch_tree;
            let v = (bus * 0.92).min(cap);
            ex.push(format!(
                "tree min({} × 0.92, {} ch × perChMaxTreeBw {}) = {}",
                r2(bus),
                g.n_channels,
                r2(ch_tree),
                r2(v)
            ));
            bus = v;
        }
        if a == Algorithm::Tree && p == Protocol::Ll {
            let v = (bus / 3.8).min(ll_max);
            ex.push(format!(
                "LL min({} / 3.8, llMaxBw {}) = {}",
                r2(bus),
                r2(ll_max),
                r2(v)
            ));
            bus = v;
        }
        if a == Algorithm::Tree && p == Protocol::Ll128 {
            let (fac, fs) = if nnodes == 1 {
                (7.0 / 9.0, "7/9")
            } else {
                (120.0 / 128.0, "120/128")
            };
            let cap = nch * ch_tree_ll128;
            let v = (bus * fac).min(cap);
            ex.push(format!(
                "LL128 min({} × {fs}, {} ch × perChMaxTreeLL128Bw {}) = {}",
                r2(bus),
                g.n_channels,
                r2(ch_tree_ll128),
                r2(v)
            ));
            bus = v;
        }
        let tree_pattern = match r.tree_pattern_source {
            TreePatternSource::MaxOverRanks if self.inp.max_tree_pattern > 0 => {
                self.inp.max_tree_pattern
            }
            _ => g.pattern.number(),
        };
        if a == Algorithm::Tree && tree_pattern == Pattern::Tree.number() {
            bus *= 0.85;
            let src = match r.tree_pattern_source {
                TreePatternSource::OwnGraph => "tree graph",
                TreePatternSource::MaxOverRanks => "max tree pattern over ranks",
            };
            ex.push(format!(
                "× 0.85 ({src} is TREE, not balanced) = {}",
                r2(bus)
            ));
        }
        if a == Algorithm::Pat {
            let fac = r.pat_bw_factor.unwrap_or(1.0);
            bus *= fac;
            ex.push(format!("PAT × {} = {}", r2(fac), r2(bus)));
        }
        bus
    }

    /// CollNet's bus bandwidth, and the multi-node AllGather/ReduceScatter gates of 2.27+.
    fn collnet_bus(&self, s: &Site, mut bus: f64, bw: f64, ex: &mut Vec<String>) -> f64 {
        let (f, a, p, g, r, nnodes, ppn, nch, ag_rs, collnet) = (
            s.f,
            s.a,
            s.p,
            s.g,
            self.r,
            self.nnodes,
            self.ppn,
            s.nch,
            s.ag_rs,
            s.collnet,
        );
        let inp = self.inp;
        if collnet && p != Protocol::Simple {
            bus = 0.0;
            ex.push(format!("{} runs Simple only: 0", a.name()));
        }
        if a == Algorithm::CollnetDirect && p == Protocol::Simple {
            if ag_rs {
                match r.collnet_ag_rs_rule {
                    CollnetAgRsRule::V2_27 => {
                        bus = ppn * g.bw_intra.min(g.bw_inter * 0.9);
                        ex.push(format!(
                            "ppn {} × min(bwIntra {}, 0.9 × bwInter {}) = {}",
                            r2(ppn),
                            r2(g.bw_intra),
                            r2(g.bw_inter),
                            r2(bus)
                        ));
                    }
                    _ => {
                        bus = ppn * bw;
                        let heads = inp.collnet_heads as f64;
                        let plugin = if f == Collective::AllGather {
                            inp.collnet_allgather
                        } else {
                            inp.collnet_reducescatter
                        };
                        if nnodes > 1 && (!plugin || ppn > heads) {
                            bus = 0.0;
                            ex.push(format!(
                                "multi-node {} needs CollNet plugin support and 1:1 GPU:NIC: 0",
                                f.name()
                            ));
                        }
                        let w = (ppn - 1.0) / 7.0;
                        bus *= w * 0.85 + (1.0 - w) * 0.95;
                        ex.push(format!(
                            "ppn × bw × efficiency {} = {}",
                            r2(w * 0.85 + (1.0 - w) * 0.95),
                            r2(bus)
                        ));
                    }
                }
            } else if g.n_channels == 0 {
                bus = 0.0;
            } else {
                let mut fac = ppn / nch;
                fac -= (fac - 1.0) / 2.0;
                bus /= fac;
                ex.push(format!("/ GPU:NIC factor {} = {}", r2(fac), r2(bus)));
                if inp.min_cc >= 90 {
                    bus *= 0.85;
                    ex.push(format!("× 0.85 (sm90+) = {}", r2(bus)));
                }
            }
        }
        if r.collnet_ag_rs_rule == CollnetAgRsRule::V2_27
            && matches!(a, Algorithm::Nvls | Algorithm::CollnetDirect)
            && p == Protocol::Simple
            && ag_rs
            && nnodes > 1
        {
            let plugin = if f == Collective::AllGather {
                inp.collnet_allgather
            } else {
                inp.collnet_reducescatter
            };
            let why = if !plugin {
                Some(format!(
                    "multi-node {} {} needs a CollNet plugin with {}",
                    a.name(),
                    f.name(),
                    f.name()
                ))
            } else if !inp.collnet_enabled {
                Some(format!(
                    "multi-node {} {} needs CollNet",
                    a.name(),
                    f.name()
                ))
            } else if inp.local_ranks.iter().any(|&l| l > inp.collnet_heads) {
                Some(format!(
                    "multi-node {} {} needs ≤ {} local ranks (CollNet heads)",
                    a.name(),
                    f.name(),
                    inp.collnet_heads
                ))
            } else {
                None
            };
            if let Some(w) = why {
                bus = 0.0;
                ex.push(format!("{w}: 0"));
            }
        }
        bus
    }

    /// Bus bandwidth to algorithm bandwidth.
    fn algbw(&self, s: &Site, bus: f64, ex: &mut Vec<String>) -> f64 {
        let (f, a, r, nnodes, nranks, nsteps, ag_rs) = (
            s.f,
            s.a,
            self.r,
            self.nnodes,
            self.nranks,
            s.nsteps,
            s.ag_rs,
        );
        let skip = match r.algbw_skip {
            AlgbwSkip::None => false,
            AlgbwSkip::CollnetDirectAgRs => a == Algorithm::CollnetDirect && ag_rs,
            AlgbwSkip::NonRingAgRs => a != Algorithm::Ring && ag_rs,
        };
        let mut algbw = bus;
        if skip {
            ex.push(format!("{} keeps bus bandwidth: {}", f.name(), r2(bus)));
        } else {
            let ring_like = format!("{nranks}/{}", nsteps as usize);
            let (ratio, rs) = match a {
                Algorithm::Ring => (nranks as f64 / nsteps, ring_like),
                Algorithm::Nvls | Algorithm::NvlsTree => match r.nvls_algbw_ratio {
                    NvlsAlgbwRatio::RingLike => (nranks as f64 / nsteps, ring_like),
                    NvlsAlgbwRatio::FiveSixths => (5.0 / 6.0, "5/6".into()),
                    NvlsAlgbwRatio::V2_18 => {
                        if a == Algorithm::Nvls {
                            (5.0 / 6.0, "5/6".into())
                        } else if nnodes > 1 {
                            let n = nnodes as f64;
                            (
                                0.7 * n / (2.0 * (n - 1.0)),
                                format!("0.7 × {nnodes}/(2 × {})", nnodes - 1),
                            )
                        } else {
                            (0.0, "0 (one node)".into())
                        }
                    }
                },
                _ => (0.5, "0.5".into()),
            };
            algbw = bus * ratio;
            ex.push(format!("algbw {} × {rs} = {}", r2(bus), r1(algbw)));
        }
        algbw
    }

    /// The cell's latency (us) and its explanation line.
    fn latency(&self, s: &Site) -> (f64, String) {
        let (f, a, p, pi, g) = (s.f, s.a, s.p, s.pi, s.g);
        let (t, r, hw, nnodes, nranks, ppn, ppn_i, ag_rs) = (
            self.t,
            self.r,
            &self.hw,
            self.nnodes,
            self.nranks,
            self.ppn,
            self.ppn_i,
            s.ag_rs,
        );
        let intra_hw = if g.type_intra == PathType::Nvl {
            &hw.nvlink
        } else {
            &hw.pci
        };
        let hw_name = if g.type_intra == PathType::Nvl {
            "NVLink"
        } else {
            "PCI"
        };
        let (hw_a, hw_a_name) = if nnodes == 1 {
            (intra_hw, hw_name)
        } else {
            (&hw.net, "NET")
        };
        let base = t.base_latency.get(a)[pi];
        let mut lat = base;
        let intra_lat = intra_hw.get(a)[pi];
        let ppn1 = r.inter_latency_ppn1_tree && ppn == 1.0;
        let mut inter_lat = if ppn1 {
            hw.net.tree[pi]
        } else {
            hw.net.get(a)[pi]
        };
        inter_lat += g.latency_inter;
        if p == Protocol::Simple {
            inter_lat += g.latency_inter;
        }
        let inter_s = format!(
            "interLat {}{}",
            r2(inter_lat),
            if ppn1 { " (NET Tree, 1 rank/node)" } else { "" }
        );
        let mut lx = format!("lat base {}", r2(base));
        match a {
            Algorithm::Ring => {
                let (l, lxr) =
                    self.ring_latency(s, (hw_a, hw_a_name), intra_lat, (inter_lat, &inter_s));
                lat += l;
                lx += &lxr;
            }
            Algorithm::Tree => {
                if !r.tree_correction_allreduce_only || f == Collective::AllReduce {
                    let l2 = log2i(nnodes as u64) as f64;
                    lat += 2.0 * ((ppn_i - 1.0) * intra_lat + l2 * inter_lat);
                    lx += &format!(
                        " + 2 × ({} × intraLat {} + log2({nnodes}) {} × {})",
                        ppn_i - 1.0,
                        r2(intra_lat),
                        l2,
                        inter_s
                    );
                }
            }
            Algorithm::CollnetDirect => {
                let ar = r.collnet_direct_arity_latency;
                lat += 2.0 * ((ppn_i - 1.0).min(1.0) * intra_lat + (ppn_i - 1.0) * ar) + inter_lat;
                lx += &format!(
                    " + 2 × (min(1, {}) × {} + {} × {}) + {}",
                    ppn_i - 1.0,
                    r2(intra_lat),
                    ppn_i - 1.0,
                    r2(ar),
                    inter_s
                );
            }
            Algorithm::CollnetChain => {
                lat += 2.0 * (ppn_i - 1.0) * intra_lat + inter_lat;
                lx += &format!(" + 2 × {} × {} + {}", ppn_i - 1.0, r2(intra_lat), inter_s);
            }
            Algorithm::Nvls => match r.nvls_latency_rule {
                NvlsLatencyRule::V2_19 => {
                    lat = intra_lat;
                    lx = format!("lat intraLat {}", r2(intra_lat));
                    if nnodes > 1 {
                        lat += inter_lat;
                        lx += &format!(" + {inter_s}");
                    }
                }
                NvlsLatencyRule::V2_18 => {
                    if nnodes > 1 {
                        lat += hw.net.nvls[pi];
                        lx += &format!(" + NET {}", r2(hw.net.nvls[pi]));
                    }
                }
            },
            Algorithm::NvlsTree => match r.nvls_latency_rule {
                NvlsLatencyRule::V2_19 => {
                    let l2 = log2i(nnodes as u64) as f64;
                    lat += intra_lat + 2.0 * l2 * inter_lat;
                    lx += &format!(" + intraLat {} + 2 × {l2} × {}", r2(intra_lat), inter_s);
                }
                NvlsLatencyRule::V2_18 => {
                    lat += 2.0 * (nnodes as f64 - 1.0) * hw.net.nvls_tree[pi];
                    lx += &format!(" + 2 × {} × NET {}", nnodes - 1, r2(hw.net.nvls_tree[pi]));
                }
            },
            Algorithm::Pat => {
                if ag_rs {
                    let l2 = log2i(nnodes as u64) as f64;
                    lat += l2 * (inter_lat / 3.5) + nranks as f64 * 2.8;
                    lx += &format!(" + {l2} × {} / 3.5 + {nranks} × 2.8", inter_s);
                }
            }
            // The host runtime's algorithm: NCCL adds nothing for it.
            Algorithm::Direct => {}
        }
        lx += &format!(" = {}", r1(lat));
        (lat, lx)
    }

    /// Ring's latency terms: one step per rank, intra-node steps at the intra latency (raised
    /// to the net overhead on several nodes), inter-node steps at the inter latency.
    fn ring_latency(
        &self,
        s: &Site,
        (hw_a, hw_a_name): (&PerAlgo, &str),
        mut intra_lat: f64,
        (inter_lat, inter_s): (f64, &str),
    ) -> (f64, String) {
        let (f, p, pi, g, r, nnodes, nsteps) = (s.f, s.p, s.pi, s.g, self.r, self.nnodes, s.nsteps);
        let net_overhead = &self.net_overhead;
        let mut lat = 0.0;
        let mut lx = String::new();
        let l = hw_a.ring[pi];
        if matches!(f, Collective::Broadcast | Collective::Reduce) {
            if g.same_channels {
                lat += l;
                lx += &format!(" + {hw_a_name} {} (sameChannels)", r2(l));
            } else {
                let l = if p == Protocol::Simple {
                    hw_a.tree[2]
                } else {
                    l
                };
                lat += nsteps * l;
                lx += &format!(" + {} steps × {hw_a_name} {}", nsteps as usize, r2(l));
            }
        } else {
            let mut ovh = 0.0;
            if nnodes > 1 {
                ovh = net_overhead.0 * if p == Protocol::Simple { 3.0 } else { 1.0 };
            }
            let raised = ovh > intra_lat;
            intra_lat = intra_lat.max(ovh);
            let ninter = match r.ring_latency_ninter_rule {
                RingInterStepsRule::V2_23 => {
                    if nnodes == 1 {
                        0
                    } else if f == Collective::AllReduce {
                        2 * (nnodes - 1)
                    } else {
                        nnodes - 1
                    }
                }
                RingInterStepsRule::V2_18 => {
                    if f == Collective::AllReduce {
                        if nnodes > 1 { 2 * nnodes } else { 0 }
                    } else {
                        nnodes - 1
                    }
                }
            } as f64;
            lat += (nsteps - ninter) * intra_lat + ninter * inter_lat;
            lx += &format!(
                " + {} intra steps × {}{} + {} inter steps × {}",
                (nsteps - ninter) as i64,
                r2(intra_lat),
                if raised {
                    format!(" (net overhead {})", net_overhead.1)
                } else {
                    String::new()
                },
                ninter as i64,
                inter_s
            );
        }
        (lat, lx)
    }
}

#[cfg(test)]
mod tests;
