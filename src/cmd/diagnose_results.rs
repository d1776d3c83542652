//! `topo diagnose --nccl-tests FILE`: reads nccl-tests output (text or `-J` JSON, `-` and
//! pipes too), works out the machine it ran on when no source is given, plans the same
//! collective at the measured sizes with the settings the run had, and hands both to the
//! judge in `topo-diagnose` (`results.rs`).

use crate::error;
use anyhow::Result;
use std::path::Path;
use topo_diagnose::results::{Measured, RefusedRow, ResultsInput};
use topo_model::Topology;
use topo_nccl::plan::{PlanRequest, Row as PlanRow};
use topo_nccl::transport::RankPlacement;
use topo_nccl::types::Func;
use topo_nccl::version::NcclVersion;
use topo_source::nccltests::{self, Results, Test};
use topo_source::{SourceSpec, nccllog, textfile};

/// The tests judged from one file at most (a burn-in log can hold hundreds).
const MAX_JUDGED: usize = 32;

/// One file read: its name, its results and the NCCL lines mixed into it.
pub struct ResultsFile {
    pub name: String,
    pub results: Results,
    pub logs: Vec<super::diagnose_logs::Log>,
}

pub fn read(p: &Path, budget: &mut textfile::TextBudget) -> Result<ResultsFile> {
    let text = textfile::read_text(p, "nccl-tests result")?;
    budget.take(p, text.len() as u64)?;
    let name = super::diagnose_logs::short_name(p);
    let results = nccltests::parse(&text).map_err(|why| {
        error::usage(
            format!("cannot read --nccl-tests {}: {why}", p.display()),
            "pass the output of an nccl-tests binary (all_reduce_perf ...), as printed or as its -J JSON file",
        )
    })?;
    // NCCL_DEBUG=INFO lines in the same output are a log of the same run.
    let logs = nccllog::parse_jobs(&text)
        .into_iter()
        .filter(|l| l.nccl_lines > 0)
        .map(|l| (name.clone(), l))
        .collect();
    Ok(ResultsFile {
        name,
        results,
        logs,
    })
}

/// The machine to judge against when the user gave none: the profile of the GPU the rank
/// lines name, with as many nodes as they name hosts.
pub fn inferred_spec(files: &[ResultsFile]) -> Result<(SourceSpec, String)> {
    let test = files
        .iter()
        .flat_map(|f| &f.results.tests)
        .find(|t| !t.ranks.is_empty())
        .ok_or_else(|| {
            error::usage(
                "--nccl-tests: the result has no `# Rank ... device ...` lines to tell the machine from",
                "pass the machine it ran on: --profile NAME [--nodes N] or --from SNAPSHOT|XML",
            )
        })?;
    if !complete(test) {
        return Err(error::usage(
            format!(
                "--nccl-tests: the rank lines are an excerpt ({} of {} ranks), so the hosts cannot be counted",
                test.ranks.len(),
                rank_count(test).unwrap_or(0)
            ),
            "pass the machine it ran on: --profile NAME --nodes N or --from SNAPSHOT|XML",
        ));
    }
    let ranks = test.ranks.as_slice();
    let gpu = &ranks[0].gpu;
    let profile = topo_source::profile::for_gpu_name(gpu).ok_or_else(|| {
        error::usage(
            format!("--nccl-tests: no built-in profile describes a machine of '{gpu}'"),
            "pass the machine it ran on: --profile NAME [--nodes N] or --from SNAPSHOT|XML (topo show --profile list)",
        )
    })?;
    let mut hosts: Vec<&str> = ranks.iter().map(|r| r.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let spec = SourceSpec {
        profile: Some(profile.to_string()),
        nodes: Some(hosts.len()),
        ..Default::default()
    };
    let how = format!(
        "profile {profile} x {} node(s), inferred from '{gpu}' on {} host(s) in the rank lines (pass --profile or --from for the real machine)",
        hosts.len(),
        hosts.len()
    );
    Ok((spec, how))
}

/// The runs to judge with the plan rows of their sizes, and the runs that cannot be judged.
type Judgeable = (
    Vec<(ResultsInput, Vec<PlanRow>)>,
    Vec<topo_diagnose::Skipped>,
);

/// Every test of every file, judged against `topo`. In a file of several tests, one topo
/// cannot judge (a collective it does not model, a rank count not the machine's) is listed
/// as not checked and the others are judged; a file of one such test is an error.
pub fn inputs(
    files: &[ResultsFile],
    topo: &Topology,
    machine: &str,
    a: &crate::cli::DiagnoseArgs,
) -> Result<Judgeable> {
    let (mut out, mut skipped) = (vec![], vec![]);
    for f in files {
        let tests: Vec<&Test> = f
            .results
            .tests
            .iter()
            .filter(|t| !t.rows.is_empty() || !t.refused.is_empty())
            .collect();
        for (i, t) in tests.iter().enumerate() {
            if i >= MAX_JUDGED {
                skipped.push(topo_diagnose::Skipped {
                    check: format!("{}: tests after the first {MAX_JUDGED}", f.name),
                    why: format!("{} tests in one file; judge them in parts", tests.len()),
                });
                break;
            }
            match one(f, t, topo, machine, a) {
                Ok(x) => out.push(x),
                Err(e) if tests.len() > 1 => skipped.push(topo_diagnose::Skipped {
                    check: format!(
                        "{}: {}",
                        f.name,
                        t.program
                            .as_deref()
                            .unwrap_or("a test without a program name")
                    ),
                    why: format!("{e:#}"),
                }),
                Err(e) => return Err(e),
            }
        }
    }
    Ok((out, skipped))
}

fn one(
    f: &ResultsFile,
    t: &Test,
    topo: &Topology,
    machine: &str,
    a: &crate::cli::DiagnoseArgs,
) -> Result<(ResultsInput, Vec<PlanRow>)> {
    let nranks = rank_count(t).unwrap_or(topo.gpus().len());
    if t.rows.is_empty() {
        // Every row refused: nothing to plan, the judge names them.
        return Ok((refused_only(f, t, nranks, topo, machine), vec![]));
    }
    let (func, basis) = collective(t, nranks, a.collective.as_deref())?;
    let env = settings(f, t, topo, a)?;
    let mut sizes: Vec<u64> = t.rows.iter().map(|r| r.bytes).filter(|b| *b > 0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let req = request(topo, func, sizes, f, a, env.clone())?;
    let plan = topo_nccl::plan(topo, &req, Default::default())?;
    if plan.nranks != nranks {
        return Err(error::usage(
            format!(
                "--nccl-tests {}: the result has {nranks} ranks, the machine judged against ({machine}) {}",
                f.name, plan.nranks
            ),
            "pass the machine the test ran on with --profile/--from and --nodes, or CUDA_VISIBLE_DEVICES through --env",
        ));
    }
    let input = ResultsInput {
        name: f.name.clone(),
        program: t.program.clone(),
        collective: func.cli_name().to_string(),
        collective_basis: basis,
        nranks,
        nnodes: plan.nnodes,
        machine: format!(
            "{machine}; NCCL {} ({})",
            plan.nccl_version, req.version_source
        ),
        rows: t.rows.iter().map(measured).collect(),
        out_of_bounds: t.out_of_bounds,
        refused: refused_rows(t),
        env,
    };
    Ok((input, plan.table))
}

fn refused_rows(t: &Test) -> Vec<RefusedRow> {
    t.refused
        .iter()
        .map(|x| RefusedRow {
            line: x.line,
            text: x.text.clone(),
            why: x.why.clone(),
        })
        .collect()
}

/// A test whose every row was refused, for the judge to name them.
fn refused_only(
    f: &ResultsFile,
    t: &Test,
    nranks: usize,
    topo: &Topology,
    machine: &str,
) -> ResultsInput {
    let collective = t
        .program
        .as_deref()
        .and_then(nccltests::collective_of_program)
        .unwrap_or("unknown");
    ResultsInput {
        name: f.name.clone(),
        program: t.program.clone(),
        collective: collective.to_string(),
        collective_basis: "program name, every row refused".into(),
        nranks,
        nnodes: topo.hosts.len().max(1),
        machine: machine.to_string(),
        rows: vec![],
        out_of_bounds: t.out_of_bounds,
        refused: refused_rows(t),
        env: vec![],
    }
}

fn measured(r: &nccltests::Row) -> Measured {
    let main = r.out_of_place.as_ref().or(r.in_place.as_ref());
    let wrong = [&r.out_of_place, &r.in_place]
        .iter()
        .filter_map(|s| s.as_ref()?.wrong)
        .max();
    Measured {
        bytes: r.bytes,
        time_us: main.map_or(0.0, |s| s.time_us),
        busbw_gbps: main.map_or(0.0, |s| s.busbw_gbps),
        in_place_busbw_gbps: r
            .out_of_place
            .as_ref()
            .and(r.in_place.as_ref())
            .map(|s| s.busbw_gbps),
        wrong,
        line: r.line,
        text: r.text.clone(),
        groups: [&r.out_of_place, &r.in_place]
            .into_iter()
            .flatten()
            .map(|s| [s.time_us, s.algbw_gbps, s.busbw_gbps])
            .collect(),
    }
}

/// The collective: `--collective`, else the program name, else what the columns imply
/// (nccl-tests prints the per-rank count for the gather/scatter family, the whole for the
/// others; a root for rooted ones).
fn collective(t: &Test, nranks: usize, flag: Option<&str>) -> Result<(Func, String)> {
    if let Some(c) = flag {
        let f = Func::parse(c).ok_or_else(|| {
            error::usage(
                format!("--collective {c}: not a collective"),
                "use allreduce, allgather, reducescatter, broadcast, reduce, alltoall or sendrecv",
            )
        })?;
        return Ok((f, "--collective".into()));
    }
    if let Some(p) = &t.program {
        return match nccltests::collective_of_program(p).and_then(Func::parse) {
            Some(f) => Ok((f, format!("program {p}"))),
            None => Err(error::usage(
                format!("--nccl-tests: {p} is not a collective topo models"),
                "judge allreduce, allgather, reducescatter, broadcast, reduce, alltoall or sendrecv results",
            )),
        };
    }
    let r = &t.rows[0];
    let per_rank = r
        .count
        .saturating_mul(dtype_bytes(&r.dtype))
        .saturating_mul(nranks as u64)
        == r.bytes
        && nranks > 1;
    let rooted = r.root.is_some_and(|x| x >= 0);
    let none = r.redop == "none";
    let (f, why) = match (rooted, per_rank, none) {
        (true, _, true) => (Func::Broadcast, "a root, no reduction"),
        (true, _, false) => (Func::Reduce, "a root, a reduction"),
        (false, true, true) => (
            Func::AllGather,
            "per-rank count, no reduction; alltoall looks the same (--collective)",
        ),
        (false, true, false) => (Func::ReduceScatter, "per-rank count, a reduction"),
        (false, false, _) => (
            Func::AllReduce,
            "whole count, no root; sendrecv looks the same (--collective)",
        ),
    };
    Ok((f, format!("columns: {why}")))
}

fn dtype_bytes(t: &str) -> u64 {
    match t {
        "double" | "int64" | "uint64" => 8,
        "float" | "int32" | "uint32" => 4,
        "half" | "bfloat16" => 2,
        _ => 1,
    }
}

/// The settings the run had, later entries winning: NCCL's `set by environment` lines and
/// the launch command in the paste, the JSON's environment, then `--env`. GPUs the rank
/// lines did not use are hidden from the plan with CUDA_VISIBLE_DEVICES.
fn settings(
    f: &ResultsFile,
    t: &Test,
    topo: &Topology,
    a: &crate::cli::DiagnoseArgs,
) -> Result<Vec<(String, String)>> {
    let mut env: Vec<(String, String)> = vec![];
    for (_, log) in &f.logs {
        for (k, (v, _)) in &log.launch_env {
            if let Some(v) = v {
                env.push((k.clone(), v.clone()));
            }
        }
        env.extend(log.env.iter().map(|(k, (v, _))| (k.clone(), v.clone())));
    }
    env.extend(f.results.env.iter().cloned());
    if let Some(visible) = visible_devices(t, topo) {
        env.push(("CUDA_VISIBLE_DEVICES".into(), visible));
    }
    env.extend(a.source.env_overrides()?);
    Ok(env)
}

/// The ranks the rank lines imply: an excerpt may hold only the last one (`Rank 71`).
fn rank_count(t: &Test) -> Option<usize> {
    t.ranks.iter().map(|r| r.rank as usize + 1).max()
}

/// Whether the rank lines name every rank, so hosts and devices can be counted from them.
fn complete(t: &Test) -> bool {
    rank_count(t) == Some(t.ranks.len())
}

/// `0,1,2,3` when the rank lines of the first host use fewer GPUs than a host has.
fn visible_devices(t: &Test, topo: &Topology) -> Option<String> {
    if !complete(t) {
        return None;
    }
    let host = &t.ranks.first()?.host;
    let mut devs: Vec<u32> = t
        .ranks
        .iter()
        .filter(|r| &r.host == host)
        .map(|r| r.device)
        .collect();
    devs.sort_unstable();
    devs.dedup();
    let per_host = topo.gpus().len() / topo.hosts.len().max(1);
    (devs.len() < per_host).then(|| {
        devs.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// The plan request of a recorded run: its own settings, not this process's environment.
fn request(
    topo: &Topology,
    func: Func,
    sizes: Vec<u64>,
    f: &ResultsFile,
    a: &crate::cli::DiagnoseArgs,
    run_env: Vec<(String, String)>,
) -> Result<PlanRequest> {
    let (version, version_source) = version(f, a.nccl_version.as_deref())?;
    let mut env: Vec<(String, String)> = vec![];
    if topo.source.kind == topo_model::SourceKind::Profile
        && let Some(h) = topo.hosts.first()
    {
        env.extend(h.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    env.extend(run_env);
    Ok(PlanRequest {
        funcs: vec![func],
        sizes,
        version,
        version_source,
        placement: RankPlacement::ProcessPerGpu,
        env,
        env_origin: Default::default(),
        explain: false,
    })
}

/// `--nccl-version`, else the NCCL the result or its log names, else what `plan` assumes.
fn version(f: &ResultsFile, flag: Option<&str>) -> Result<(NcclVersion, String)> {
    if let Some(v) = flag {
        return Ok((NcclVersion::parse(v)?, "--nccl-version".into()));
    }
    let named = f
        .results
        .nccl_version
        .clone()
        .or_else(|| f.logs.iter().find_map(|(_, l)| l.version.clone()));
    if let Some(v) = named {
        return Ok(match NcclVersion::parse(&v) {
            Ok(n) => (n, format!("the NCCL {v} the result names")),
            Err(_) => (
                topo_nccl::version::DEFAULT_VERSION,
                format!(
                    "the result ran NCCL {v}, which topo does not model; judged with {}",
                    topo_nccl::version::DEFAULT_VERSION
                ),
            ),
        });
    }
    super::plan::version_choice(None)
}
