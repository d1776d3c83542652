//! `topo verify`: runs collectives with topo's runtime and prints measured against predicted.
//!
//! On this host the prediction is the calibrated host model (`topo calibrate`, cached per
//! host); with `--from`/`--profile` the schedule is that machine's plan (its rings, trees,
//! channels and rank count), run here to check it, and timings are this host's.

use crate::cli::{Backend, Compare, LaunchKind, VerifyArgs, VerifyFormat};
use crate::cmd::calibrate;
use crate::error::{self, Exit, Failure};
use crate::output::{emit, warn};
use crate::util::Style;
use anyhow::Result;
use std::io::IsTerminal;
use topo_nccl::plan::{Plan, Row};
use topo_runtime::calibrate::{HostModel, LinkMode, Placement};
use topo_runtime::job::Job;
use topo_runtime::launch::Launch;
use topo_runtime::verify::{PlannedRow, VerifyRequest};
use topo_runtime::{
    Algorithm, Collective, CollectivePlan, DataType, Protocol, Reduction, TreeNode,
};

pub fn run(a: &VerifyArgs, style: Style) -> Result<i32> {
    let cuda = choose_backend(a, style)?;
    let mut req = request(a)?;
    let foreign = !a.source.from.is_empty() || a.source.profile.is_some();
    let report = if let Some(probe) = cuda {
        let k = a.ranks_per_gpu.max(1);
        if a.ranks.is_none() {
            req.ranks = probe.gpus.len() * k;
        }
        if a.nchannels.is_none() {
            let sms = probe.gpus.iter().map(|g| g.sms).min().unwrap_or(2);
            req.nchannels = (sms as usize / k / 2).clamp(1, 32);
        }
        if foreign {
            plan_foreign(a, &mut req, style)?;
        }
        let transport = std::env::var("TOPO_CUDA_TRANSPORT").unwrap_or_default();
        let opts = topo_runtime::cuda::device::CudaOptions {
            ranks_per_gpu: a.ranks_per_gpu.max(1),
            compare_nccl: a.compare == Some(Compare::Nccl),
            copy_ceiling: a.copy_ceiling,
            force_shm: transport == "shm",
            force_ipc: transport == "ipc",
        };
        run_cuda(a, &mut req, &opts)?
    } else {
        let launch = launch(a.launch)?;
        // Under torchrun/srun/mpirun the launcher started the ranks: without --ranks the
        // world size is its, not this host's CPU count (the CUDA path does the same above).
        if a.ranks.is_none()
            && matches!(launch, Launch::Env | Launch::Auto)
            && let Some(e) = topo_runtime::launch::EnvInfo::detect(&|k| std::env::var(k).ok())?
        {
            req.ranks = e.world;
        }
        if foreign {
            plan_foreign(a, &mut req, style)?;
        }
        check_host_memory(&req, &launch)?;
        // Under a launcher only rank 0 prints, and a calibration before the rendezvous made
        // every rank of an empty cache measure at once (155 s for 2 ranks): rank 0 prices
        // the rows after the run, one calibration, and the others never calibrate.
        let after = !foreign && under_launcher(&launch)?;
        if !foreign {
            let model = if after {
                None
            } else {
                Some(calibrate::cached_or_measure(style)?)
            };
            plan_rows(&mut req, &launch, model.as_ref())?;
        }
        let mut report = run_with_progress(&req, &launch, a.format)?;
        if after && let Some(r) = report.as_mut() {
            req.plans.clear();
            plan_rows(
                &mut req,
                &launch,
                Some(&calibrate::cached_or_measure(style)?),
            )?;
            r.price(&req)?;
        }
        report
    };
    let Some(report) = report else {
        // A rank other than 0 under torchrun/srun/mpirun: rank 0 prints.
        return Ok(0);
    };
    let text = match a.format {
        VerifyFormat::Text => report.render_text_fit(style.width),
        VerifyFormat::Json => topo_report::doc::json(&report.to_json())?,
        VerifyFormat::NcclTests => report.render_nccl_tests(&nccl_tests_header(a)),
    };
    emit(None, &text)?;
    if report.wrong_total() > 0 {
        return Err(Failure::new(
            Exit::CheckFailed,
            format!("{} wrong results", report.wrong_total()),
        )
        .hint("a schedule or transport bug: rerun with -n 1 -w 0 on the failing size and report it")
        .into());
    }
    Ok(0)
}

/// What nccl-tests' run header says that the report does not hold.
fn nccl_tests_header(a: &VerifyArgs) -> topo_runtime::verify::nccl_tests::Header {
    topo_runtime::verify::nccl_tests::Header {
        step_factor: a.step_factor,
        warmup_iters: a.warmup,
        iters: a.iters,
        check: a.check != 0,
        hostname: crate::util::host_name(),
        pid: std::process::id(),
        topo_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// Which backend runs: `Some(gpus)` for CUDA, `None` for the host. `--backend cuda` without
/// a driver, a GPU or NVRTC is one error naming what is missing (exit 3); `auto` then says
/// why it runs the host backend. The CUDA backend's own options need it.
fn choose_backend(a: &VerifyArgs, style: Style) -> Result<Option<topo_runtime::cuda::Probe>> {
    let cuda_only = a.ranks_per_gpu != 1 || a.compare.is_some() || a.copy_ceiling;
    if a.backend == Backend::Host {
        if cuda_only {
            return Err(error::usage(
                "--ranks-per-gpu, --compare and --copy-ceiling belong to the cuda backend",
                "drop them, or run --backend cuda on a machine with a GPU",
            ));
        }
        return Ok(None);
    }
    let why = match cuda_ready() {
        Ok(gpus) => return Ok(Some(gpus)),
        Err(why) => why,
    };
    if a.backend == Backend::Cuda || cuda_only {
        return Err(Failure::new(
            Exit::MissingRuntime,
            format!("cuda backend unavailable: {why}"),
        )
        .hint(if why.contains("nvrtc") {
            "install NVRTC (the CUDA toolkit, or pip install nvidia-cuda-nvrtc-cu12) or point TOPO_NVRTC at libnvrtc.so.12/.13; or run --backend host"
        } else {
            "install the NVIDIA driver (and check CUDA_VISIBLE_DEVICES), or run --backend host"
        })
        .into());
    }
    if !why.contains(topo_runtime::cuda::loader::LIBCUDA) {
        // A driver is here but something else is missing: say so before running on the CPUs.
        warn(
            style,
            &format!("cuda backend unavailable ({why}); running the host backend"),
        );
    }
    Ok(None)
}

/// The CUDA sweep with the chosen launcher: threads of this process (one per rank), worker
/// processes (`--launch processes`), or the ranks of torchrun/srun/mpirun on one host
/// (`--launch env`, or `auto` under a launcher). Ranks other than 0 of `env` return `None`.
fn run_cuda(
    a: &VerifyArgs,
    req: &mut VerifyRequest,
    opts: &topo_runtime::cuda::device::CudaOptions,
) -> Result<Option<topo_runtime::verify::VerifyReport>> {
    let env = || topo_runtime::launch::EnvInfo::detect(&|k| std::env::var(k).ok());
    let env_info = match a.launch {
        LaunchKind::Threads | LaunchKind::Processes => None,
        LaunchKind::Auto => env()?,
        LaunchKind::Env => Some(env()?.ok_or_else(|| {
            error::usage(
                "--launch env: no torchrun, Slurm or Open MPI variables",
                "start topo under torchrun/srun/mpirun, or use --launch processes",
            )
        })?),
    };
    if let Some(e) = env_info {
        if a.ranks.is_none() {
            req.ranks = e.world;
        }
        return Ok(Job::new(req, Launch::Env)
            .cuda(opts.clone())
            .as_rank(e)
            .run()?);
    }
    let launch = if a.launch == LaunchKind::Processes {
        Launch::Processes(calibrate::worker_spec()?)
    } else {
        Launch::Threads
    };
    Ok(Job::new(req, launch).cuda(opts.clone()).run()?)
}

/// GPUs the CUDA backend can use: the driver, a GPU and NVRTC (probed before any cudarc call).
fn cuda_ready() -> std::result::Result<topo_runtime::cuda::Probe, String> {
    let p = topo_runtime::cuda::probe()?;
    topo_runtime::cuda::nvrtc::Nvrtc::load()?;
    Ok(p)
}

fn request(a: &VerifyArgs) -> Result<VerifyRequest> {
    let (min, max) = sizes(&a.min_bytes, &a.max_bytes, a.step_factor)?;
    let algorithm = opt_parse(
        a.algo.as_deref(),
        Algorithm::parse,
        "--algo",
        "ring, tree, direct",
    )?;
    if let Some(al) = algorithm
        && !matches!(al, Algorithm::Ring | Algorithm::Tree | Algorithm::Direct)
    {
        return Err(error::usage(
            format!(
                "--algo {}: the host backend runs ring, tree or direct",
                al.macro_name().to_lowercase()
            ),
            "NVLS, CollNet and PAT need NVSwitch multicast, a network plugin or NCCL's own kernels; topo plan models them",
        ));
    }
    let req = VerifyRequest {
        ranks: a.ranks.unwrap_or_else(default_ranks),
        collectives: collectives(&a.collective)?,
        dtype: parse_or(
            &a.dtype,
            DataType::parse,
            "-d",
            "float, double, half, bfloat16, int32, int64, uint8",
        )?,
        op: parse_or(&a.op, Reduction::parse, "-o", "sum, prod, min, max, avg")?,
        root: a.root,
        min_bytes: min,
        max_bytes: max,
        step_factor: a.step_factor as f64,
        iters: a.iters.max(1),
        warmup: a.warmup,
        check: a.check != 0,
        in_place: true,
        algorithm: opt_parse(
            a.algo.as_deref(),
            Algorithm::parse,
            "--algo",
            "ring, tree, direct",
        )?,
        protocol: opt_parse(
            a.proto.as_deref(),
            Protocol::from_name,
            "--proto",
            "simple, ll, ll128",
        )?,
        timeout_s: a.timeout,
        nchannels: a.nchannels.unwrap_or(1).clamp(1, 64),
        pin_cpus: a.bind_to == crate::cli::BindTo::Cpu,
        ..VerifyRequest::default()
    };
    req.validate()?;
    Ok(req)
}

/// Refuses, before calibrating or starting a rank, a host run whose ranks share an arena
/// this host cannot hold. Under a launcher the runtime sizes the arena from its world.
fn check_host_memory(req: &VerifyRequest, launch: &Launch) -> Result<()> {
    let under_launcher = match launch {
        Launch::Threads | Launch::Processes(_) => false,
        Launch::Env => true,
        Launch::Auto => {
            topo_runtime::launch::EnvInfo::detect(&|k| std::env::var(k).ok())?.is_some()
        }
    };
    if !under_launcher {
        req.check_memory()?;
    }
    Ok(())
}

/// This host's CPUs, at least 2 ranks (a collective needs a peer) and at most 8.
fn default_ranks() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8))
}

/// nccl-tests' `-b -e -f`, with a ceiling: every rank's buffers live in this host's memory.
fn sizes(min: &str, max: &str, factor: u64) -> Result<(usize, usize)> {
    let (lo, hi) = super::plan::size_bounds(min, max, factor)?;
    let cap = topo_runtime::verify::MAX_BUFFER_BYTES as u64;
    if hi > cap {
        let cap = crate::util::human_size(cap);
        return Err(error::usage(
            format!("-e {max}: more than {cap} per buffer"),
            format!("every rank's buffers live in this host's memory; pass -e {cap} or less"),
        ));
    }
    Ok((lo as usize, hi as usize))
}

fn collectives(s: &str) -> Result<Vec<Collective>> {
    if s.eq_ignore_ascii_case("all") {
        return Ok(Collective::RUN_ORDER.to_vec());
    }
    s.split(',')
        .map(|t| {
            Collective::parse(t.trim()).ok_or_else(|| {
                error::usage(
                    format!("unknown collective '{t}'"),
                    "use allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv, or all",
                )
            })
        })
        .collect()
}

fn parse_or<T>(s: &str, parse: fn(&str) -> Option<T>, flag: &str, accepted: &str) -> Result<T> {
    parse(s).ok_or_else(|| {
        error::usage(
            format!("{flag} {s}: unknown"),
            format!("use one of {accepted}"),
        )
    })
}

fn opt_parse<T>(
    s: Option<&str>,
    parse: fn(&str) -> Option<T>,
    flag: &str,
    accepted: &str,
) -> Result<Option<T>> {
    s.map(|s| parse_or(s, parse, flag, accepted)).transpose()
}

fn launch(k: LaunchKind) -> Result<Launch> {
    Ok(match k {
        LaunchKind::Auto => Launch::Auto,
        LaunchKind::Threads => Launch::Threads,
        LaunchKind::Env => Launch::Env,
        LaunchKind::Processes => Launch::Processes(calibrate::worker_spec()?),
    })
}

/// Whether a launcher (torchrun, srun, mpirun) started the ranks.
fn under_launcher(launch: &Launch) -> Result<bool> {
    Ok(match launch {
        Launch::Env => true,
        Launch::Auto => {
            topo_runtime::launch::EnvInfo::detect(&|k| std::env::var(k).ok())?.is_some()
        }
        Launch::Threads | Launch::Processes(_) => false,
    })
}

/// One plan row per collective and size, priced by the calibrated host `model` where given
/// (without it, the schedule alone: forced algorithms and protocols still hold).
fn plan_rows(req: &mut VerifyRequest, launch: &Launch, model: Option<&HostModel>) -> Result<()> {
    let tcp = over_tcp(launch)?;
    let mode = link_mode(launch)?;
    let sizes = req.sizes()?;
    for &c in &req.collectives {
        let algo = host_algorithm(req.algorithm, c, tcp);
        let proto = req.protocol.unwrap_or(Protocol::Simple);
        for &b in &sizes {
            let plan = CollectivePlan::host_default(c, algo, proto, req.ranks, req.nchannels);
            let Some(model) = model else {
                req.plans.push(PlannedRow {
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
            req.plans.push(PlannedRow {
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
    Ok(())
}

/// Which calibration prices the run: ranks as threads of this process, or as processes
/// (started by topo or by a launcher).
fn link_mode(launch: &Launch) -> Result<LinkMode> {
    Ok(match launch {
        Launch::Threads => LinkMode::Threads,
        Launch::Processes(_) | Launch::Env => LinkMode::Processes,
        Launch::Auto => {
            let env = topo_runtime::launch::EnvInfo::detect(&|k| std::env::var(k).ok())?;
            if env.is_some() {
                LinkMode::Processes
            } else {
                LinkMode::Threads
            }
        }
    })
}

/// Whether the ranks will talk over TCP: several hosts under a launcher, or forced.
fn over_tcp(launch: &Launch) -> Result<bool> {
    if topo_runtime::launch::tcp_forced() {
        return Ok(true);
    }
    if !matches!(launch, Launch::Env | Launch::Auto) {
        return Ok(false);
    }
    let env = topo_runtime::launch::EnvInfo::detect(&|k| std::env::var(k).ok())?;
    Ok(env.is_some_and(|e| !e.single_host))
}

/// What the runtime runs on this host when nothing is forced: single copy through shared
/// memory, ring over TCP; NCCL runs trees for AllReduce only.
fn host_algorithm(forced: Option<Algorithm>, c: Collective, tcp: bool) -> Algorithm {
    match forced {
        Some(Algorithm::Tree) if c != Collective::AllReduce => Algorithm::Ring,
        Some(a) => a,
        None if tcp => Algorithm::Ring,
        None => Algorithm::Direct,
    }
}

/// The plan of another machine (`--from`, `--profile`) as the runtime's schedule.
fn plan_foreign(a: &VerifyArgs, req: &mut VerifyRequest, style: Style) -> Result<()> {
    let mut topo = topo_source::load(&a.source.spec()?)?;
    a.source.apply_facts(&mut topo)?;
    a.source.apply_faults(&mut topo)?;
    let funcs: Vec<Collective> = req
        .collectives
        .iter()
        .copied()
        .filter(|c| c.is_tuned())
        .collect();
    let sizes: Vec<u64> = req.sizes()?.into_iter().map(|s| s as u64).collect();
    let overrides = a.source.env_overrides()?;
    let preq =
        super::plan::plain_request(&topo, funcs, sizes, a.nccl_version.as_deref(), &overrides)?;
    let plan = topo_nccl::plan(&topo, &preq, Default::default())?;
    if let Some(n) = a.ranks
        && n != plan.nranks
    {
        return Err(error::usage(
            format!(
                "--ranks {n}: the plan of this machine has {} ranks",
                plan.nranks
            ),
            "leave --ranks out with --from/--profile: the schedule is that machine's",
        ));
    }
    req.ranks = plan.nranks;
    req.foreign_machine = Some(describe(&topo, &plan));
    for row in &plan.table {
        if let Some(r) = planned_row(&plan, row) {
            req.plans.push(r);
        }
    }
    for note in substitution_notes(&plan) {
        warn(style, &note);
    }
    Ok(())
}

/// Said once per run: which of the plan's algorithms run as Ring here (over the plan's ring
/// orders: the same data; the host runtime has no multicast, network plugin or NCCL kernels),
/// and why the predicted column stays empty (the plan's times are the other machine's). Each
/// line fits 80 columns: scripts and terminals read warnings whole.
fn substitution_notes(plan: &Plan) -> Vec<String> {
    let mut swapped: Vec<&str> = plan
        .table
        .iter()
        .map(|r| r.algo)
        .filter(|a| !matches!(a, Algorithm::Ring | Algorithm::Tree))
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

fn describe(topo: &topo_model::Topology, plan: &Plan) -> String {
    let name = topo
        .source
        .origin
        .clone()
        .unwrap_or_else(|| topo.source.kind.to_string());
    format!(
        "{name} ({} ranks on {} node(s), NCCL {} plan)",
        plan.nranks, plan.nnodes, plan.nccl_version
    )
}

/// One row of the plan's table as a runtime schedule. Algorithms the host cannot run
/// (NVLS, CollNet, PAT need NVSwitch multicast, a network plugin or NCCL's PAT kernels) run
/// as rings over the plan's own ring orders, which checks the same data movement.
fn planned_row(plan: &Plan, row: &Row) -> Option<PlannedRow> {
    let collective = row.collective;
    let algorithm = match row.algo {
        Algorithm::Tree => Algorithm::Tree,
        _ => Algorithm::Ring,
    };
    let protocol = row.proto;
    let nchannels = row.nchannels.max(1);
    let rings = (0..nchannels)
        .map(|c| plan.rings.get(c % plan.rings.len().max(1)).cloned())
        .collect::<Option<Vec<_>>>()?;
    let trees = (0..nchannels)
        .map(|c| tree_of(plan, c))
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default();
    Some(PlannedRow {
        collective,
        bytes: row.bytes as usize,
        plan: CollectivePlan {
            collective,
            algorithm,
            protocol,
            nranks: plan.nranks,
            ranks_per_node: plan.ranks_per_node.first().copied().unwrap_or(plan.nranks),
            nchannels,
            rings,
            trees,
            chunk_bytes: 512 << 10,
            root: 0,
        },
        predicted_time_us: None,
        by_placement: vec![],
    })
}

/// The plan's tree of channel `c` (its channels repeat when there are fewer), by rank.
fn tree_of(plan: &Plan, c: usize) -> Option<Vec<TreeNode>> {
    let t = plan.trees.get(c % plan.trees.len().max(1))?;
    (0..plan.nranks)
        .map(|r| {
            Some(TreeNode {
                parent: usize::try_from(*t.up.get(r)?).ok(),
                children: (t.children(r)?.iter())
                    .filter_map(|&d| usize::try_from(d).ok())
                    .collect(),
            })
        })
        .collect()
}

/// Runs the sweep with a progress bar on stderr when it is a terminal and the output is text.
fn run_with_progress(
    req: &VerifyRequest,
    launch: &Launch,
    format: VerifyFormat,
) -> Result<Option<topo_runtime::verify::VerifyReport>> {
    let show = format == VerifyFormat::Text && std::io::stderr().is_terminal();
    if !show {
        return Ok(Job::new(req, launch.clone()).run()?);
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} sizes {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let tick = |done: usize, total: usize| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    };
    let out = Job::new(req, launch.clone()).progress(&tick).run();
    bar.finish_and_clear();
    Ok(out?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn req(args: &[&str]) -> VerifyRequest {
        let cli = crate::cli::Cli::try_parse_from(args).unwrap();
        let crate::cli::Command::Verify(a) = cli.command else {
            panic!("not verify: {args:?}");
        };
        request(&a).unwrap()
    }

    #[test]
    fn ranks_topo_starts_are_bound_unless_told_not_to() {
        assert!(req(&["topo", "verify"]).pin_cpus);
        assert!(req(&["topo", "verify", "--bind-to", "cpu"]).pin_cpus);
        assert!(!req(&["topo", "verify", "--bind-to", "none"]).pin_cpus);
        assert!(crate::cli::Cli::try_parse_from(["topo", "verify", "--bind-to", "core"]).is_err());
    }
}
