//! `topo verify`: runs collectives with topo's runtime and prints measured against predicted.
//!
//! On this host the prediction is the calibrated host model (`topo calibrate`, cached per
//! host); with `--from`/`--profile` the schedule is that machine's plan (its rings, trees,
//! channels and rank count), run here to check it, and timings are this host's. What runs
//! for a plan, and how this host's rows are priced, is `topo_runtime::adapt`'s; this module
//! reads the flags once ([`Verify::build`]), chooses the backend and launcher, and prints.

use crate::cli::{Backend, BindTo, Compare, LaunchKind, VerifyArgs, VerifyFormat};
use crate::cmd::calibrate;
use crate::error::{self, Exit, Failure};
use crate::output::{emit, warn};
use crate::request::{Hosts, Request};
use crate::util::Style;
use anyhow::Result;
use std::io::IsTerminal;
use topo_nccl::plan::Plan;
use topo_runtime::adapt::{self, ForeignPlan, ForeignRow};
use topo_runtime::cuda::device::CudaOptions;
use topo_runtime::cuda::sharing::{self, Sharing};
use topo_runtime::job::Job;
use topo_runtime::launch::{EnvInfo, Launch};
use topo_runtime::verify::{VerifyReport, VerifyRequest, nccl_tests};
use topo_runtime::{Collective, TreeNode};

/// What the flags ask, read once at the entry; nothing below it reads the flags.
struct Verify {
    /// The sweep; its `ranks` are `--ranks` or this host's default until [`world`] decides.
    req: VerifyRequest,
    /// `--ranks` as given.
    ranks: Option<usize>,
    /// `--nchannels` as given.
    nchannels: Option<usize>,
    backend: Backend,
    launch: LaunchKind,
    /// `--ranks-per-gpu`, `--compare nccl`, `--copy-ceiling`: the CUDA backend's own.
    ranks_per_gpu: usize,
    compare_nccl: bool,
    copy_ceiling: bool,
    /// `--from`/`--profile`: the machine whose plan runs here.
    foreign: Option<Request>,
    nccl_version: Option<String>,
    format: VerifyFormat,
    header: nccl_tests::Header,
}

impl Verify {
    /// The one reading of the flags: the sweep (sizes bounded by what one host holds, checked
    /// as the runtime will), the backend's and launcher's choices, the other machine's source.
    fn build(a: &VerifyArgs) -> Result<Verify> {
        let (min, max) = sizes(&a.min_bytes, &a.max_bytes, a.step_factor)?;
        let req = VerifyRequest {
            ranks: a.ranks.unwrap_or_else(default_ranks),
            collectives: a.collective.0.clone(),
            dtype: a.dtype,
            op: a.op,
            root: a.root,
            min_bytes: min,
            max_bytes: max,
            step_factor: a.step_factor as f64,
            iters: a.iters.max(1),
            warmup: a.warmup,
            check: a.check != 0,
            in_place: true,
            algorithm: a.algo,
            protocol: a.proto,
            timeout_s: a.timeout,
            nchannels: a.nchannels.unwrap_or(1).clamp(1, 64),
            pin_cpus: a.bind_to == BindTo::Cpu,
            ..VerifyRequest::default()
        };
        req.validate()?;
        let named = !a.source.from.is_empty() || a.source.profile.is_some();
        Ok(Verify {
            req,
            ranks: a.ranks,
            nchannels: a.nchannels,
            backend: a.backend,
            launch: a.launch,
            ranks_per_gpu: a.ranks_per_gpu.max(1),
            compare_nccl: a.compare == Some(Compare::Nccl),
            copy_ceiling: a.copy_ceiling,
            foreign: named
                .then(|| Request::build(&a.source, Hosts::One))
                .transpose()?,
            nccl_version: a.nccl_version.clone(),
            format: a.format,
            header: nccl_tests::Header {
                step_factor: a.step_factor,
                warmup_iters: a.warmup,
                iters: a.iters,
                check: a.check != 0,
                hostname: crate::util::host_name(),
                pid: std::process::id(),
                topo_version: env!("CARGO_PKG_VERSION").into(),
            },
        })
    }

    /// Options only the CUDA backend takes.
    fn cuda_only(&self) -> bool {
        self.ranks_per_gpu != 1 || self.compare_nccl || self.copy_ceiling
    }
}

pub fn run(a: &VerifyArgs, style: Style) -> Result<i32> {
    let mut v = Verify::build(a)?;
    // A launcher's variables are read once, and only where the launch may be a launcher's.
    let env = match v.launch {
        LaunchKind::Auto | LaunchKind::Env => {
            topo_runtime::launch::EnvInfo::detect(&|k| std::env::var(k).ok())?
        }
        LaunchKind::Threads | LaunchKind::Processes => None,
    };
    // Before the CUDA driver starts (issue 47 item 4): the hardware queues ranks sharing a
    // GPU as threads need, and MPS for processes that share one (the driver reads both when
    // it initialises). The MPS server this run starts, if any, lives until the run ends.
    let (sharing, _mps, queue_note) = prepare_sharing(&v, env.is_some())?;
    let cuda = choose_backend(&v, style)?;
    let report = match cuda {
        Some(probe) => {
            let mut report = run_cuda(&mut v, &probe, env, sharing, style)?;
            if let (Some(r), Some(n)) = (report.as_mut(), queue_note) {
                r.notes.insert(0, n);
            }
            report
        }
        None => run_host(&mut v, env, style)?,
    };
    let Some(report) = report else {
        // A rank other than 0 under torchrun/srun/mpirun: rank 0 prints.
        return Ok(0);
    };
    let text = match v.format {
        VerifyFormat::Text => report.render_text_fit(style.width),
        VerifyFormat::Json => topo_report::doc::json(&report.to_json())?,
        VerifyFormat::NcclTests => report.render_nccl_tests(&v.header),
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

/// The world size, decided once: another machine's plan sets its own (`--ranks` must agree,
/// checked where it is planned); else `--ranks`; else a launcher's world; else the CUDA
/// GPUs times `--ranks-per-gpu`, or this host's CPUs. On the CUDA backend a launcher's world
/// goes before the plan's, as the ranks it started are the ranks there are.
fn world(v: &Verify, env: Option<&EnvInfo>, plan: Option<usize>, gpus: Option<usize>) -> usize {
    let launched = env.map(|e| e.world);
    match gpus {
        None => plan.or(v.ranks).or(launched).unwrap_or_else(default_ranks),
        Some(g) => v.ranks.or(launched).or(plan).unwrap_or(g * v.ranks_per_gpu),
    }
}

/// The host backend, with the launcher the flags name.
fn run_host(v: &mut Verify, env: Option<EnvInfo>, style: Style) -> Result<Option<VerifyReport>> {
    let launch = launch(v.launch)?;
    let foreign = foreign_plan(v, style)?;
    v.req.ranks = world(v, env.as_ref(), foreign.as_ref().map(|p| p.nranks), None);
    let under_launcher = match launch {
        Launch::Env => true,
        Launch::Auto => env.is_some(),
        Launch::Threads | Launch::Processes(_) => false,
    };
    // Under a launcher the runtime sizes the arena from its world.
    if !under_launcher {
        v.req.check_memory()?;
    }
    let (tcp, mode) = (
        adapt::over_tcp(env.as_ref()),
        adapt::link_mode(&launch, env.as_ref()),
    );
    // Under a launcher only rank 0 prints, and a calibration before the rendezvous made
    // every rank of an empty cache measure at once (155 s for 2 ranks): rank 0 prices the
    // rows after the run, one calibration, and the others never calibrate.
    let after = foreign.is_none() && under_launcher;
    v.req.plans = match &foreign {
        Some(p) => {
            v.req.foreign_machine = Some(p.machine.clone());
            adapt::foreign_rows(p)
        }
        None if after => adapt::host_rows(&v.req, None, tcp, mode)?,
        None => {
            let model = calibrate::cached_or_measure(style)?;
            adapt::host_rows(&v.req, Some(&model), tcp, mode)?
        }
    };
    let job = match env {
        Some(e) => Job::new(&v.req, Launch::Env).as_rank(e),
        None => Job::new(&v.req, launch),
    };
    let mut report = run_with_progress(job, v.format)?;
    if after && let Some(r) = report.as_mut() {
        let model = calibrate::cached_or_measure(style)?;
        v.req.plans = adapt::host_rows(&v.req, Some(&model), tcp, mode)?;
        r.price(&v.req)?;
    }
    Ok(report)
}

/// The CUDA sweep with the chosen launcher: threads of this process (one per rank), worker
/// processes (`--launch processes`), or the ranks of torchrun/srun/mpirun on one host
/// (`--launch env`, or `auto` under a launcher). Ranks other than 0 of `env` return `None`.
fn run_cuda(
    v: &mut Verify,
    probe: &topo_runtime::cuda::Probe,
    env: Option<EnvInfo>,
    sharing: Sharing,
    style: Style,
) -> Result<Option<VerifyReport>> {
    if v.nchannels.is_none() {
        let gpus = probe.gpus.iter().map(|g| (g.name.as_str(), g.sms as u32));
        v.req.nchannels = adapt::cuda_nchannels(gpus, v.ranks_per_gpu);
    }
    let foreign = foreign_plan(v, style)?;
    if v.launch == LaunchKind::Env && env.is_none() {
        return Err(error::usage(
            "--launch env: no torchrun, Slurm or Open MPI variables",
            "start topo under torchrun/srun/mpirun, or use --launch processes",
        ));
    }
    let nranks = foreign.as_ref().map(|p| p.nranks);
    v.req.ranks = world(v, env.as_ref(), nranks, Some(probe.gpus.len()));
    if let Some(p) = &foreign {
        v.req.foreign_machine = Some(p.machine.clone());
        v.req.plans = adapt::foreign_rows(p);
    }
    let opts = CudaOptions::new(v.ranks_per_gpu, v.compare_nccl, v.copy_ceiling, sharing);
    if let Some(e) = env {
        return Ok(Job::new(&v.req, Launch::Env).cuda(opts).as_rank(e).run()?);
    }
    let launch = if v.launch == LaunchKind::Processes {
        Launch::Processes(calibrate::worker_spec()?)
    } else {
        Launch::Threads
    };
    Ok(Job::new(&v.req, launch).cuda(opts).run()?)
}

/// How ranks will share a GPU, decided before the driver starts: `CUDA_DEVICE_MAX_CONNECTIONS`
/// set (or the run refused) for threads, MPS used or started for processes (not under a
/// launcher, whose other ranks topo does not start). Nothing for the host backend or one rank
/// per GPU.
fn prepare_sharing(
    v: &Verify,
    launched: bool,
) -> Result<(Sharing, Option<sharing::MpsServer>, Option<String>)> {
    let rpg = v.ranks_per_gpu;
    if v.backend == Backend::Host || rpg < 2 {
        return Ok((Sharing::Alone, None, None));
    }
    let processes = match v.launch {
        LaunchKind::Threads => false,
        LaunchKind::Processes | LaunchKind::Env => true,
        LaunchKind::Auto => launched,
    };
    let note = sharing::prepare_queues(rpg, !processes)?;
    let (s, server) = sharing::prepare_mps(processes, rpg, v.launch == LaunchKind::Processes);
    Ok((s, server, note))
}

/// Which backend runs: `Some(gpus)` for CUDA, `None` for the host. `--backend cuda` without
/// a driver, a GPU or NVRTC is one error naming what is missing (exit 3); `auto` then says
/// why it runs the host backend. The CUDA backend's own options need it.
fn choose_backend(v: &Verify, style: Style) -> Result<Option<topo_runtime::cuda::Probe>> {
    if v.backend == Backend::Host {
        if v.cuda_only() {
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
    if v.backend == Backend::Cuda || v.cuda_only() {
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

/// GPUs the CUDA backend can use: the driver, a GPU and NVRTC (probed before any cudarc call).
fn cuda_ready() -> std::result::Result<topo_runtime::cuda::Probe, String> {
    let p = topo_runtime::cuda::probe()?;
    topo_runtime::cuda::nvrtc::Nvrtc::load()?;
    Ok(p)
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

fn launch(k: LaunchKind) -> Result<Launch> {
    Ok(match k {
        LaunchKind::Auto => Launch::Auto,
        LaunchKind::Threads => Launch::Threads,
        LaunchKind::Env => Launch::Env,
        LaunchKind::Processes => Launch::Processes(calibrate::worker_spec()?),
    })
}

/// The plan of another machine (`--from`, `--profile`), as the runtime reads it, with the
/// notes said once per run; `None` on this host.
fn foreign_plan(v: &Verify, style: Style) -> Result<Option<ForeignPlan>> {
    let Some(source) = &v.foreign else {
        return Ok(None);
    };
    let topo = source.load(false, false)?.topo;
    let funcs: Vec<Collective> = (v.req.collectives.iter().copied())
        .filter(|c| c.is_tuned())
        .collect();
    let sizes: Vec<u64> = v.req.sizes()?.into_iter().map(|s| s as u64).collect();
    let version = v.nccl_version.as_deref();
    let preq = super::plan::plain_request(&topo, funcs, sizes, version, &source.env)?;
    let plan = topo_nccl::plan(&topo, &preq, Default::default())?;
    if let Some(n) = v.ranks
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
    let foreign = runtime_view(&topo, &plan);
    for note in adapt::substitution_notes(&foreign) {
        warn(style, &note);
    }
    Ok(Some(foreign))
}

/// The fields of `plan` the runtime's schedule reads, copied into its own types (the runtime
/// does not depend on the model).
fn runtime_view(topo: &topo_model::Topology, plan: &Plan) -> ForeignPlan {
    let name = topo
        .source
        .origin
        .clone()
        .unwrap_or_else(|| topo.source.kind.to_string());
    ForeignPlan {
        machine: format!(
            "{name} ({} ranks on {} node(s), NCCL {} plan)",
            plan.nranks, plan.nnodes, plan.nccl_version
        ),
        nranks: plan.nranks,
        ranks_per_node: plan.ranks_per_node.first().copied().unwrap_or(plan.nranks),
        rings: plan.rings.clone(),
        trees: (plan.trees.iter())
            .map(|t| {
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
            })
            .collect(),
        rows: (plan.table.iter())
            .map(|r| ForeignRow {
                collective: r.collective,
                bytes: r.bytes as usize,
                algorithm: r.algo,
                protocol: r.proto,
                nchannels: r.nchannels,
            })
            .collect(),
    }
}

/// Runs the sweep with a progress bar on stderr when it is a terminal and the output is text.
fn run_with_progress(job: Job, format: VerifyFormat) -> Result<Option<VerifyReport>> {
    let show = format == VerifyFormat::Text && std::io::stderr().is_terminal();
    if !show {
        return Ok(job.run()?);
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
    let out = job.progress(&tick).run();
    bar.finish_and_clear();
    Ok(out?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn verify(args: &[&str]) -> Verify {
        let cli = crate::cli::Cli::try_parse_from(args).unwrap();
        let crate::cli::Command::Verify(a) = cli.command else {
            panic!("not verify: {args:?}");
        };
        Verify::build(&a).unwrap()
    }

    #[test]
    fn ranks_topo_starts_are_bound_unless_told_not_to() {
        assert!(verify(&["topo", "verify"]).req.pin_cpus);
        assert!(verify(&["topo", "verify", "--bind-to", "cpu"]).req.pin_cpus);
        assert!(
            !verify(&["topo", "verify", "--bind-to", "none"])
                .req
                .pin_cpus
        );
        assert!(crate::cli::Cli::try_parse_from(["topo", "verify", "--bind-to", "core"]).is_err());
    }

    #[test]
    fn the_flags_are_read_once_into_typed_values() {
        let v = verify(&[
            "topo",
            "verify",
            "--algo",
            "tree",
            "--proto",
            "ll128",
            "-d",
            "half",
            "-o",
            "max",
            "--collective",
            "all",
        ]);
        assert_eq!(v.req.algorithm, Some(topo_runtime::Algorithm::Tree));
        assert_eq!(v.req.protocol, Some(topo_runtime::Protocol::Ll128));
        assert_eq!(v.req.dtype, topo_runtime::DataType::F16);
        assert_eq!(v.req.op, topo_runtime::Reduction::Max);
        assert_eq!(v.req.collectives, Collective::RUN_ORDER);
        assert!(v.foreign.is_none() && !v.cuda_only());
        let v = verify(&["topo", "verify", "--profile", "dgx-h100", "--ranks", "8"]);
        assert!(v.foreign.is_some());
    }

    #[test]
    fn the_world_is_decided_in_one_place() {
        let v = verify(&["topo", "verify", "--ranks", "3"]);
        assert_eq!(world(&v, None, None, None), 3);
        // Another machine's plan sets the host's world; a launcher's goes first on CUDA.
        assert_eq!(world(&v, None, Some(8), None), 8);
        let v = verify(&["topo", "verify", "--ranks-per-gpu", "2"]);
        assert_eq!(world(&v, None, None, Some(4)), 8);
        assert_eq!(world(&v, None, Some(16), Some(4)), 16);
        let v = verify(&["topo", "verify"]);
        assert_eq!(world(&v, None, None, None), default_ranks());
    }
}
