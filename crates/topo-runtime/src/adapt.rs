//! What verify runs, decided here rather than in the binary: another machine's plan turned
//! into the runtime's schedules, and this host's own rows priced by the calibrated model.
//!
//! The runtime depends on the vocabulary alone, so another machine's plan arrives as a
//! [`ForeignPlan`]: the fields of topo-nccl's `Plan` the schedule needs, copied by the
//! caller. The policy is this module's: which algorithm runs here for each of the plan's,
//! the chunk size, the channel count a GPU gets, how the launch decides the link a
//! prediction prices.

use crate::hostmodel::{HostModel, HostModelExt, LinkMode, Placement};
use crate::launch::{EnvInfo, Launch};
use crate::types::{Algorithm, Collective, CollectivePlan, Protocol, TreeNode};
use crate::verify::{PlannedRow, VerifyRequest};

/// The most one step of a plan's schedule moves: one of the 8 slots (`NCCL_STEPS`) of NCCL's
/// default 4 MiB Simple buffer (`DEFAULT_BUFFSIZE`), as [`CollectivePlan::host_default`]
/// uses; the protocol's FIFO clamps it.
pub const FOREIGN_CHUNK_BYTES: usize = 512 << 10;

/// Another machine's plan as the runtime reads it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ForeignPlan {
    /// How the machine is named in the report (`hgx-h200 (8 ranks on 1 node(s), NCCL 2.27
    /// plan)`).
    pub machine: String,
    pub nranks: usize,
    /// Ranks on the first node.
    pub ranks_per_node: usize,
    /// Ring order per channel.
    pub rings: Vec<Vec<usize>>,
    /// Per channel, its tree by rank; `None` for a channel whose tree the plan does not give
    /// for every rank.
    pub trees: Vec<Option<Vec<TreeNode>>>,
    /// The plan's choice per collective and size.
    pub rows: Vec<ForeignRow>,
}

/// One row of the plan's table: NCCL's choice for a collective at a size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ForeignRow {
    pub collective: Collective,
    pub bytes: usize,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    pub nchannels: usize,
}

/// The algorithm the host runtime runs for one the plan chose. NVLS, CollNet and PAT need
/// NVSwitch multicast, a network plugin or NCCL's PAT kernels: they run as rings over the
/// plan's own ring orders, which moves the same data.
pub fn run_here(planned: Algorithm) -> Algorithm {
    match planned {
        Algorithm::Tree => Algorithm::Tree,
        _ => Algorithm::Ring,
    }
}

/// Each row of the plan as a runtime schedule, its channels' rings and trees repeating where
/// the plan has fewer; a row is left out where the plan has no ring. No prediction: the plan's
/// times are the other machine's.
pub fn foreign_rows(p: &ForeignPlan) -> Vec<PlannedRow> {
    p.rows
        .iter()
        .filter_map(|row| foreign_row(p, row))
        .collect()
}

fn foreign_row(p: &ForeignPlan, row: &ForeignRow) -> Option<PlannedRow> {
    let nchannels = row.nchannels.max(1);
    let rings = (0..nchannels)
        .map(|c| p.rings.get(c % p.rings.len().max(1)).cloned())
        .collect::<Option<Vec<_>>>()?;
    let trees = (0..nchannels)
        .map(|c| p.trees.get(c % p.trees.len().max(1)).cloned().flatten())
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default();
    Some(PlannedRow {
        collective: row.collective,
        bytes: row.bytes,
        plan: CollectivePlan {
            collective: row.collective,
            algorithm: run_here(row.algorithm),
            protocol: row.protocol,
            nranks: p.nranks,
            ranks_per_node: p.ranks_per_node,
            nchannels,
            rings,
            trees,
            chunk_bytes: FOREIGN_CHUNK_BYTES,
            root: 0,
        },
        predicted_time_us: None,
        by_placement: vec![],
    })
}

/// Said once per run: which of the plan's algorithms run as Ring here, and why the predicted
/// column stays empty. Each line fits 80 columns: scripts and terminals read warnings whole.
pub fn substitution_notes(p: &ForeignPlan) -> Vec<String> {
    let mut swapped: Vec<&str> = p
        .rows
        .iter()
        .map(|r| r.algorithm)
        .filter(|&a| run_here(a) != a)
        .map(Algorithm::name)
        .collect();
    swapped.sort_unstable();
    swapped.dedup();
    let mut notes = vec![];
    if !swapped.is_empty() {
        notes.push(format!(
            "run here as Ring, the same data moved: {}",
            swapped.join(", ")
        ));
    }
    notes.push("no predicted times: the plan is another machine's (topo plan has them)".into());
    notes
}

/// What the runtime runs on this host when nothing is forced: a single copy through shared
/// memory, a ring over TCP; a forced tree only for AllReduce, as NCCL runs trees.
pub fn host_algorithm(forced: Option<Algorithm>, c: Collective, tcp: bool) -> Algorithm {
    match forced {
        Some(Algorithm::Tree) if c != Collective::AllReduce => Algorithm::Ring,
        Some(a) => a,
        None if tcp => Algorithm::Ring,
        None => Algorithm::Direct,
    }
}

/// Channels per rank on the CUDA backend when none is asked: the kernel model's choice
/// (`cuda::model::channels`, issue 47), the fewest channels whose modelled busbw reaches 0.8
/// of the copy ceiling with every rank's CTAs resident, on the GPU that needs the fewest
/// (`(name, SMs)` per GPU; 1 where no GPU says).
pub fn cuda_nchannels<'a>(
    gpus: impl IntoIterator<Item = (&'a str, u32)>,
    ranks_per_gpu: usize,
) -> usize {
    use crate::cuda::model;
    let k = ranks_per_gpu.max(1);
    gpus.into_iter()
        .map(|(name, sms)| model::channels(&model::COSTS, name, sms.max(1), k))
        .min()
        .unwrap_or(1)
}

/// Whether the ranks will talk over TCP: ranks a launcher started on several hosts (`env`),
/// or TCP forced.
pub fn over_tcp(env: Option<&EnvInfo>) -> bool {
    crate::launch::tcp_forced() || env.is_some_and(|e| !e.single_host)
}

/// Which calibration prices the run: ranks as threads of this process, or as processes
/// (started by topo or by a launcher; `Auto` is a launcher's when its variables were found).
pub fn link_mode(launch: &Launch, env: Option<&EnvInfo>) -> LinkMode {
    match launch {
        Launch::Threads => LinkMode::Threads,
        Launch::Processes(_) | Launch::Env => LinkMode::Processes,
        Launch::Auto if env.is_some() => LinkMode::Processes,
        Launch::Auto => LinkMode::Threads,
    }
}

/// One row per collective of `req` and size, each run by [`host_algorithm`] on
/// [`CollectivePlan::host_default`] and priced by the calibrated host `model` where given
/// (without it, the schedule alone: forced algorithms and protocols still hold).
pub fn host_rows(
    req: &VerifyRequest,
    model: Option<&HostModel>,
    tcp: bool,
    mode: LinkMode,
) -> crate::Result<Vec<PlannedRow>> {
    let sizes = req.sizes()?;
    let mut rows = Vec::with_capacity(req.collectives.len() * sizes.len());
    for &c in &req.collectives {
        let algo = host_algorithm(req.algorithm, c, tcp);
        let proto = req.protocol.unwrap_or(Protocol::Simple);
        for &b in &sizes {
            let plan = CollectivePlan::host_default(c, algo, proto, req.ranks, req.nchannels);
            let Some(model) = model else {
                rows.push(PlannedRow {
                    collective: c,
                    bytes: b,
                    plan,
                    predicted_time_us: None,
                    by_placement: Vec::new(),
                });
                continue;
            };
            let by_placement = Placement::FITTED
                .into_iter()
                .filter_map(|p| {
                    match model.predict_at(c, algo, req.ranks, b, tcp, mode, Some(p))? {
                        (t, Some(q)) if q == p => Some((p, t)),
                        _ => None,
                    }
                })
                .collect();
            rows.push(PlannedRow {
                collective: c,
                bytes: b,
                plan,
                // A checked model gives finite positive times; anything else is no prediction.
                predicted_time_us: model
                    .predict_us(c, algo, req.ranks, b, tcp, mode)
                    .filter(|t| t.is_finite() && *t > 0.0),
                by_placement,
            });
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::double_binary_tree;

    fn foreign(rows: Vec<ForeignRow>) -> ForeignPlan {
        let (t0, t1) = double_binary_tree(4);
        ForeignPlan {
            machine: "m".into(),
            nranks: 4,
            ranks_per_node: 4,
            rings: vec![vec![0, 1, 2, 3], vec![3, 2, 1, 0]],
            trees: vec![Some(t0), Some(t1)],
            rows,
        }
    }

    fn row(algorithm: Algorithm, nchannels: usize) -> ForeignRow {
        ForeignRow {
            collective: Collective::AllReduce,
            bytes: 1 << 20,
            algorithm,
            protocol: Protocol::Ll128,
            nchannels,
        }
    }

    #[test]
    fn a_plan_runs_as_rings_and_trees_over_its_own_orders() {
        let p = foreign(vec![
            row(Algorithm::Nvls, 3),
            row(Algorithm::Tree, 2),
            row(Algorithm::Pat, 0),
        ]);
        let rows = foreign_rows(&p);
        assert_eq!(rows.len(), 3);
        let nvls = &rows[0].plan;
        assert_eq!(nvls.algorithm, Algorithm::Ring);
        assert_eq!(nvls.protocol, Protocol::Ll128);
        assert_eq!(nvls.chunk_bytes, 512 * 1024);
        // Three channels over two rings: the first repeats.
        assert_eq!(
            nvls.rings,
            [p.rings[0].clone(), p.rings[1].clone(), p.rings[0].clone()]
        );
        assert_eq!(nvls.trees.len(), 3);
        nvls.validate().unwrap();
        assert_eq!(rows[1].plan.algorithm, Algorithm::Tree);
        rows[1].plan.validate().unwrap();
        // No channel count in the plan still runs one channel.
        assert_eq!(rows[2].plan.nchannels, 1);
        assert!(rows.iter().all(|r| r.predicted_time_us.is_none()));
        let notes = substitution_notes(&p);
        assert_eq!(notes[0], "run here as Ring, the same data moved: NVLS, PAT");
        assert!(notes.iter().all(|n| n.len() <= 80), "{notes:?}");
    }

    #[test]
    fn a_plan_without_rings_gives_no_rows_and_a_partial_tree_none() {
        let mut p = foreign(vec![row(Algorithm::Ring, 2)]);
        p.trees[1] = None;
        assert!(foreign_rows(&p)[0].plan.trees.is_empty());
        p.rings.clear();
        assert!(foreign_rows(&p).is_empty());
        let p = foreign(vec![row(Algorithm::Ring, 1)]);
        assert_eq!(substitution_notes(&p).len(), 1);
    }

    #[test]
    fn the_host_runs_direct_rings_over_tcp_and_trees_for_allreduce_only() {
        use Algorithm::*;
        assert_eq!(host_algorithm(None, Collective::AllGather, false), Direct);
        assert_eq!(host_algorithm(None, Collective::AllGather, true), Ring);
        assert_eq!(
            host_algorithm(Some(Tree), Collective::AllReduce, false),
            Tree
        );
        assert_eq!(
            host_algorithm(Some(Tree), Collective::Broadcast, false),
            Ring
        );
        assert_eq!(
            host_algorithm(Some(Direct), Collective::Reduce, true),
            Direct
        );
    }

    #[test]
    fn cuda_channels_are_the_kernel_model_s_on_the_neediest_gpu() {
        use crate::cuda::model::{COSTS, channels};
        let h200 = channels(&COSTS, "NVIDIA H200", 132, 2);
        assert_eq!(cuda_nchannels([("NVIDIA H200", 132)], 2), h200);
        // Fewer SMs on the second GPU: the smaller count of the two.
        let small = channels(&COSTS, "NVIDIA H200", 16, 2);
        assert!(small <= h200);
        assert_eq!(
            cuda_nchannels([("NVIDIA H200", 132), ("NVIDIA H200", 16)], 2),
            small
        );
        assert_eq!(cuda_nchannels([], 1), 1);
    }

    #[test]
    fn host_rows_cover_every_collective_and_size_without_a_model() {
        let req = VerifyRequest {
            ranks: 4,
            collectives: vec![Collective::AllReduce, Collective::Broadcast],
            min_bytes: 1024,
            max_bytes: 4096,
            step_factor: 2.0,
            algorithm: Some(Algorithm::Tree),
            protocol: Some(Protocol::Ll),
            nchannels: 2,
            ..VerifyRequest::default()
        };
        let rows = host_rows(&req, None, false, LinkMode::Threads).unwrap();
        assert_eq!(rows.len(), 6);
        assert_eq!(rows[0].plan.algorithm, Algorithm::Tree);
        assert_eq!(rows[3].plan.algorithm, Algorithm::Ring);
        assert!(rows.iter().all(|r| r.plan.protocol == Protocol::Ll));
        assert!(rows.iter().all(|r| r.predicted_time_us.is_none()));
        assert_eq!(rows[2].bytes, 4096);
    }

    #[test]
    fn the_launch_picks_the_link_a_prediction_prices() {
        assert_eq!(link_mode(&Launch::Threads, None), LinkMode::Threads);
        assert_eq!(link_mode(&Launch::Env, None), LinkMode::Processes);
        assert_eq!(link_mode(&Launch::Auto, None), LinkMode::Threads);
    }
}
