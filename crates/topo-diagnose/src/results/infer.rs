//! What an nccl-tests result says about its run, and the plan it is judged against: the
//! collective (the flag, the program, else the columns), the rank count (`ranks.rs`), the
//! settings it ran with (NCCL's own lines, the launch command, `-J`'s environment, then
//! `--env`), the NCCL version, and the plan of the same collective at the measured sizes on
//! the machine. The binary reads the files and names the machine; everything else is here.

use super::ranks::{self, RankReading};
use super::types::{Measured, RefusedRow, ResultsInput};
use crate::{Finding, Skipped};
use topo_evidence::nccllog::NcclLog;
use topo_evidence::nccltests::{self, Results, Test};
use topo_model::Topology;
use topo_model::message::Code;
use topo_nccl::env::HcaFilter;
use topo_nccl::plan::{PlanRequest, Row as PlanRow};
use topo_nccl::transport::RankPlacement;
use topo_nccl::version::{DEFAULT_VERSION, NcclVersion};
use topo_vocab::Collective;

/// The tests judged from one file at most (a burn-in log can hold hundreds).
pub const MAX_JUDGED: usize = 32;

/// One file read: its name, its results and the NCCL lines mixed into it.
pub struct ResultsFile {
    pub name: String,
    pub results: Results,
    pub logs: Vec<(String, NcclLog)>,
}

/// What the command line asks of the judgement, parsed at the edge.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// `--collective`, for a table that does not name its program.
    pub collective: Option<Collective>,
    /// `--nccl-version`.
    pub nccl_version: Option<NcclVersion>,
    /// `--env`, which wins over the result's own settings.
    pub env: Vec<(String, String)>,
}

/// Why a result cannot be judged: a usage error (what, and the fix) or the model's own.
#[derive(Debug)]
pub enum Refusal {
    Usage { message: String, hint: String },
    Plan(topo_nccl::Error),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Usage { message, .. } => f.write_str(message),
            Refusal::Plan(e) => write!(f, "{e}"),
        }
    }
}

fn usage(message: impl Into<String>, hint: impl Into<String>) -> Refusal {
    Refusal::Usage {
        message: message.into(),
        hint: hint.into(),
    }
}

/// The machine a result names when the user gave none: the GPU of its rank lines, on as many
/// nodes as they name hosts.
pub struct Inferred {
    pub profile: String,
    pub nodes: usize,
    /// How, in words, for the report.
    pub how: String,
}

/// The machine of the first test with rank lines; `profile_for` maps a GPU name to a
/// built-in profile.
pub fn inferred_machine(
    files: &[ResultsFile],
    profile_for: impl Fn(&str) -> Option<String>,
) -> Result<Inferred, Refusal> {
    let test = files
        .iter()
        .flat_map(|f| &f.results.tests)
        .find(|t| !t.ranks.is_empty())
        .ok_or_else(|| {
            usage(
                "--nccl-tests: the result has no `# Rank ... device ...` lines to tell the machine from",
                "pass the machine it ran on: --profile NAME [--nodes N] or --from SNAPSHOT|XML",
            )
        })?;
    if !complete(test) {
        let shown = test.ranks.iter().map(|r| r.rank as usize + 1).max();
        let total = ranks::read(test, program_collective(test)).count.or(shown);
        return Err(usage(
            format!(
                "--nccl-tests: the rank lines are an excerpt ({} of {} ranks), so the hosts cannot be counted",
                test.ranks.len(),
                total.unwrap_or(0)
            ),
            "pass the machine it ran on: --profile NAME --nodes N or --from SNAPSHOT|XML",
        ));
    }
    let gpu = &test.ranks[0].gpu;
    let profile = profile_for(gpu).ok_or_else(|| {
        usage(
            format!("--nccl-tests: no built-in profile describes a machine of '{gpu}'"),
            "pass the machine it ran on: --profile NAME [--nodes N] or --from SNAPSHOT|XML (topo show --profile list)",
        )
    })?;
    let mut hosts: Vec<&str> = test.ranks.iter().map(|r| r.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let how = format!(
        "profile {profile} x {} node(s), inferred from '{gpu}' on {} host(s) in the rank lines (pass --profile or --from for the real machine)",
        hosts.len(),
        hosts.len()
    );
    Ok(Inferred {
        profile,
        nodes: hosts.len(),
        how,
    })
}

/// The runs to judge with the plan rows of their sizes, and the runs that cannot be judged.
pub type Judgeable = (Vec<(ResultsInput, Vec<PlanRow>)>, Vec<Skipped>);

/// Every test of every file, judged against `topo`. In a file of several tests, one topo
/// cannot judge (a collective it does not model, a rank count not the machine's) is listed
/// as not checked and the others are judged; a file of one such test is an error.
pub fn inputs(
    files: &[ResultsFile],
    topo: &Topology,
    machine: &str,
    req: &Request,
) -> Result<Judgeable, Refusal> {
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
                skipped.push(Skipped {
                    check: format!("{}: tests after the first {MAX_JUDGED}", f.name),
                    why: format!("{} tests in one file; judge them in parts", tests.len()),
                });
                break;
            }
            match one(f, t, topo, machine, req) {
                Ok(x) => out.push(x),
                Err(e) if tests.len() > 1 => skipped.push(Skipped {
                    check: format!(
                        "{}: {}",
                        f.name,
                        t.program
                            .as_deref()
                            .unwrap_or("a test without a program name")
                    ),
                    why: e.to_string(),
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
    req: &Request,
) -> Result<(ResultsInput, Vec<PlanRow>), Refusal> {
    if t.rows.is_empty() {
        // Every row refused: nothing to plan, the judge names them.
        let nranks = ranks::read(t, program_collective(t))
            .count
            .unwrap_or(topo.gpus().len());
        return Ok((refused_only(f, t, nranks, topo, machine), vec![]));
    }
    let (patched, repaired) = sizes_from_count(t);
    let t = &patched;
    let (func, basis) = collective(t, req.collective)?;
    let reading = ranks::read(t, Some(func));
    let mut notes: Vec<Finding> = size_note(f, &repaired).into_iter().collect();
    let mut env = settings(f, t, topo, req);
    notes.extend(foreign_hca(f, topo, machine, &mut env, req));
    let mut sizes: Vec<u64> = t.rows.iter().map(|r| r.bytes).filter(|b| *b > 0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let (plan, version_source) =
        plan_dropping_bad_values(f, topo, func, sizes, &mut env, req, &mut notes)?;
    // Where the result's own sources disagree, a machine of one of their counts settles it.
    let nranks = match reading.count {
        Some(_) if !reading.conflicts.is_empty() && reading.stated.contains(&plan.nranks) => {
            plan.nranks
        }
        Some(n) => n,
        None => plan.nranks,
    };
    notes.splice(0..0, disagreement(f, &reading, nranks));
    if plan.nranks != nranks {
        return Err(usage(
            format!(
                "--nccl-tests {}: the result has {nranks} ranks ({}), the machine judged against ({machine}) {}",
                f.name, reading.basis, plan.nranks
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
        machine: format!("{machine}; NCCL {} ({version_source})", plan.nccl_version),
        rows: t.rows.iter().map(|r| measured(r, nranks)).collect(),
        out_of_bounds: t.out_of_bounds,
        refused: refused_rows(t),
        env,
        notes,
    };
    Ok((input, plan.table))
}

/// The plan of the run; a value of the result's own settings NCCL would refuse (prose's
/// `NCCL_PROTO=Simple.` trimmed or not) is left out with a warning instead of stopping the
/// whole diagnosis. `--env`'s values are the user's and stay errors.
fn plan_dropping_bad_values(
    f: &ResultsFile,
    topo: &Topology,
    func: Collective,
    sizes: Vec<u64>,
    env: &mut Vec<(String, String)>,
    req: &Request,
    notes: &mut Vec<Finding>,
) -> Result<(topo_nccl::plan::Plan, String), Refusal> {
    let (version, version_source) = version(f, req.nccl_version);
    // Each pass drops one variable, so this ends.
    loop {
        let pr = request(
            topo,
            func,
            sizes.clone(),
            version,
            &version_source,
            env.clone(),
        );
        match topo_nccl::plan(topo, &pr, Default::default()) {
            Ok(p) => return Ok((p, version_source)),
            Err(e) => {
                let topo_nccl::ErrorKind::Env { name } = &e.kind else {
                    return Err(Refusal::Plan(e));
                };
                let from_run = env.iter().any(|(k, _)| k == name);
                if !from_run || req.env.iter().any(|(k, _)| k == name) {
                    return Err(Refusal::Plan(e));
                }
                let values: Vec<String> = env
                    .iter()
                    .filter(|(k, _)| k == name)
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                env.retain(|(k, _)| k != name);
                notes.push(
                    Finding::new(
                        Code::NcclTestsSettingIgnored,
                        format!(
                            "{}: {} is not a value NCCL takes ({}); judged without it",
                            f.name,
                            values.last().cloned().unwrap_or_default(),
                            e.message
                        ),
                    )
                    .evidence(values)
                    .fix(format!(
                        "if the run had {name} set, pass its value with --env {name}=VALUE"
                    )),
                );
            }
        }
    }
}

/// Sources of the rank count that disagree, as a warning: the judgement goes on with the
/// most direct one.
fn disagreement(f: &ResultsFile, r: &RankReading, n: usize) -> Option<Finding> {
    if r.conflicts.is_empty() {
        return None;
    }
    let (basis, others) = if Some(n) == r.count {
        (r.basis.clone(), r.conflicts.join("; "))
    } else {
        (
            "the machine judged against has that many, and a source says so".to_string(),
            std::iter::once(r.basis.clone())
                .chain(r.conflicts.iter().cloned())
                .collect::<Vec<_>>()
                .join("; "),
        )
    };
    Some(
        Finding::new(
            Code::NcclTestsRanksDisagree,
            format!(
                "{}: the result's rank count is unclear: judged as {n} ranks ({basis}), but {others}",
                f.name,
            ),
        )
        .fix("pass the whole output of the run (every rank line), or check the command: a table from another run pasted under a header gives this"),
    )
}

/// An NCCL_IB_HCA of the result that selects none of a profile's NICs: the run named its own
/// machine's devices, which the profile names otherwise. On the machine itself NCCL would
/// fall back to sockets (ncclIbInitDevices, NVIDIA/nccl v2.28.9-1 src/transport/net_ib.cc);
/// a profile's fabric is the stated one, so the filter is dropped, and said so.
fn foreign_hca(
    f: &ResultsFile,
    topo: &Topology,
    machine: &str,
    env: &mut Vec<(String, String)>,
    req: &Request,
) -> Option<Finding> {
    if topo.source.kind != topo_model::SourceKind::Profile
        || req.env.iter().any(|(k, _)| k == "NCCL_IB_HCA")
    {
        return None;
    }
    let value = env
        .iter()
        .rev()
        .find(|(k, _)| k == "NCCL_IB_HCA")
        .map(|(_, v)| v.clone())?;
    let filter = HcaFilter::parse(&value);
    let nets = topo.nets();
    let names: Vec<String> = nets
        .iter()
        .filter_map(|&n| topo.net(n).map(|x| x.name.clone()))
        .collect();
    let kept = nets.iter().any(|&n| {
        topo.net(n)
            .is_some_and(|x| filter.keeps(&x.name, i64::from(x.port)))
    });
    if names.is_empty() || kept {
        return None;
    }
    env.retain(|(k, _)| k != "NCCL_IB_HCA");
    let mut shown: Vec<String> = names.clone();
    shown.sort_unstable();
    shown.dedup();
    shown.truncate(8);
    Some(
        Finding::new(
            Code::NcclTestsSettingIgnored,
            format!(
                "{}: NCCL_IB_HCA={value} names none of the NICs of {machine} ({}): judged with the machine's own NICs, not as the socket fallback NCCL would take on a machine without them",
                f.name,
                shown.join(", ")
            ),
        )
        .fix("pass the machine the test ran on (--from its snapshot), or --env NCCL_IB_HCA with the profile's NIC names"),
    )
}

/// The collective: `--collective`, else the program name (the table's or its command's),
/// else what the columns imply (nccl-tests prints the per-rank count for the
/// gather/scatter family, the whole for the others; a root for rooted ones).
fn collective(t: &Test, flag: Option<Collective>) -> Result<(Collective, String), Refusal> {
    if let Some(c) = flag {
        return Ok((c, "--collective".into()));
    }
    let program = t
        .program
        .as_deref()
        .or_else(|| t.launch.as_ref()?.program.as_deref());
    if let Some(p) = program {
        return match nccltests::collective_of_program(p).and_then(Collective::parse) {
            Some(c) => Ok((c, format!("program {p}"))),
            None => Err(usage(
                format!("--nccl-tests: {p} is not a collective topo models"),
                "judge allreduce, allgather, reducescatter, broadcast, reduce, alltoall or sendrecv results",
            )),
        };
    }
    Ok(from_columns(t))
}

/// The collective a program name gives, for reading ranks before the columns are judged.
fn program_collective(t: &Test) -> Option<Collective> {
    let p = t
        .program
        .as_deref()
        .or_else(|| t.launch.as_ref()?.program.as_deref())?;
    nccltests::collective_of_program(p).and_then(Collective::parse)
}

/// From the first row with a non-zero count: size = count x element size x ranks for the
/// gather family, count x element size for the others. A size-0 row says nothing (0 = 0 x
/// anything), so it is passed over.
fn from_columns(t: &Test) -> (Collective, String) {
    let row = t
        .rows
        .iter()
        .find(|r| r.count > 0 && r.bytes > 0 && r.elem_bytes.is_some())
        .or(t.rows.first());
    let Some(r) = row else {
        return (Collective::AllReduce, "columns: no rows".into());
    };
    let unit = r.count.saturating_mul(r.elem_bytes.unwrap_or(1));
    let per_rank = unit > 0 && r.bytes > unit && r.bytes % unit == 0;
    let rooted = r.root.is_some_and(|x| x >= 0);
    let (c, why) = match (rooted, per_rank, r.reduces) {
        (true, _, Some(false)) => (Collective::Broadcast, "a root, no reduction"),
        (true, _, _) => (Collective::Reduce, "a root, a reduction"),
        (false, true, Some(false)) => (
            Collective::AllGather,
            "per-rank count, no reduction; alltoall looks the same (--collective)",
        ),
        (false, true, Some(true)) => (Collective::ReduceScatter, "per-rank count, a reduction"),
        (false, true, None) => (
            Collective::AllGather,
            "per-rank count, no redop column; reducescatter looks the same (--collective)",
        ),
        (false, false, _) => (
            Collective::AllReduce,
            "whole count, no root; sendrecv looks the same (--collective)",
        ),
    };
    (c, format!("columns: {why}"))
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
        notes: vec![],
    }
}

/// The size a row was measured at. Its size column, its count x type and its printed algbw x
/// time each state it; where the size column alone disagrees with the other two, which agree
/// (nccl#340's transcription: 65536 B beside 8192 floats, 1.98 GB/s in 16.57 us), the two
/// that agree are read. nccl-tests prints algbw as count x type size / time for the
/// whole-count collectives (src/all_reduce.cu `AllReduceGetBw`, 2.x); a gather's size is
/// its size column over its time, so its rows never get here.
fn size_from_count(r: &nccltests::Row) -> Option<u64> {
    let s = r.out_of_place.as_ref().or(r.in_place.as_ref())?;
    let unit = r.count.checked_mul(r.elem_bytes?)?;
    let column_agrees = super::sense::algbw_is(r.bytes, s.time_us, s.algbw_gbps);
    (unit > 0
        && unit != r.bytes
        && !column_agrees
        && super::sense::algbw_is(unit, s.time_us, s.algbw_gbps))
    .then_some(unit)
}

/// The test with each row's size as [`size_from_count`] reads it, and the rows it changed.
fn sizes_from_count(t: &Test) -> (Test, Vec<(nccltests::Row, u64)>) {
    let mut out = t.clone();
    let mut repaired = vec![];
    for r in &mut out.rows {
        if let Some(unit) = size_from_count(r) {
            repaired.push((r.clone(), unit));
            r.bytes = unit;
        }
    }
    (out, repaired)
}

/// The rows judged at count x type rather than their size column, named.
fn size_note(f: &ResultsFile, repaired: &[(nccltests::Row, u64)]) -> Option<Finding> {
    let (first, unit) = repaired.first()?;
    let evidence: Vec<String> = repaired
        .iter()
        .take(4)
        .map(|(r, u)| format!("{}: read at {u} B", crate::quote(&f.name, r.line, &r.text)))
        .chain((repaired.len() > 4).then(|| format!("and {} more rows", repaired.len() - 4)))
        .collect();
    Some(
        Finding::new(
            Code::NcclTestsSizeFromCount,
            format!(
                "{}: {} {} size column disagree{} with the row's own count x type and printed algbw, which agree (line {}: {} B printed, {} x {} B = {unit} B); judged at count x type",
                f.name,
                repaired.len(),
                if repaired.len() == 1 { "row's" } else { "rows'" },
                if repaired.len() == 1 { "s" } else { "" },
                first.line,
                first.bytes,
                first.count,
                first.elem_bytes.unwrap_or(0),
            ),
        )
        .evidence(evidence)
        .fix("pass the run's output as nccl-tests printed it: a size column that disagrees with its count was edited or mis-transcribed"),
    )
}

/// One row as the judge reads it. A largest-error column (nccl-tests before 2.13) counts the
/// size wrong where the error passes nccl-tests' own bound for its type and ranks, as its
/// `CheckData` did: a healthy float run prints `5e-07` and is not corrupt.
fn measured(r: &nccltests::Row, nranks: usize) -> Measured {
    let main = r.out_of_place.as_ref().or(r.in_place.as_ref());
    let allowed = nccltests::max_error_allowed(&r.dtype, nranks);
    let wrong = [&r.out_of_place, &r.in_place]
        .iter()
        .filter_map(|s| {
            let s = s.as_ref()?;
            s.wrong
                .or_else(|| s.max_error.map(|e| u64::from(e > allowed)))
        })
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

/// The settings the run had, later entries winning: NCCL's `set by environment` lines and
/// the launch command in the paste, the settings the result's own lines give (its commands,
/// `-J`'s environment), then `--env`. GPUs the rank lines did not use are hidden from the
/// plan with CUDA_VISIBLE_DEVICES.
fn settings(f: &ResultsFile, t: &Test, topo: &Topology, req: &Request) -> Vec<(String, String)> {
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
    env.extend(req.env.iter().cloned());
    env
}

/// Whether the rank lines name every rank, so hosts and devices can be counted from them.
fn complete(t: &Test) -> bool {
    let top = t.ranks.iter().map(|r| r.rank as usize + 1).max();
    !t.ranks_excerpt && top == Some(t.ranks.len())
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
    func: Collective,
    sizes: Vec<u64>,
    version: NcclVersion,
    version_source: &str,
    run_env: Vec<(String, String)>,
) -> PlanRequest {
    let mut env: Vec<(String, String)> = vec![];
    if topo.source.kind == topo_model::SourceKind::Profile
        && let Some(h) = topo.hosts.first()
    {
        env.extend(h.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    env.extend(run_env);
    PlanRequest {
        funcs: vec![func],
        sizes,
        version,
        version_source: version_source.to_string(),
        placement: RankPlacement::ProcessPerGpu,
        env,
        env_origin: Default::default(),
        explain: false,
    }
}

/// `--nccl-version`, else the NCCL the result or its log names, else the version topo
/// models by default, said as such: the result ran elsewhere, so the NCCL installed where
/// topo runs says nothing about it.
fn version(f: &ResultsFile, flag: Option<NcclVersion>) -> (NcclVersion, String) {
    if let Some(v) = flag {
        return (v, "--nccl-version".into());
    }
    let named = f
        .results
        .nccl_version
        .clone()
        .or_else(|| f.logs.iter().find_map(|(_, l)| l.version.clone()));
    match named {
        Some(v) => match NcclVersion::parse(&v) {
            Ok(n) => (n, format!("the NCCL {v} the result names")),
            Err(_) => (
                DEFAULT_VERSION,
                format!(
                    "the result ran NCCL {v}, which topo does not model; judged with {DEFAULT_VERSION}"
                ),
            ),
        },
        None => (
            DEFAULT_VERSION,
            format!(
                "the result names no NCCL version, so it is unknown: modelled with topo's default, {DEFAULT_VERSION}; pass --nccl-version for the one it ran"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_evidence::nccltests::parse;

    fn file(text: &str) -> ResultsFile {
        ResultsFile {
            name: "r.txt".into(),
            results: parse(text).unwrap(),
            logs: vec![],
        }
    }

    #[test]
    fn a_size_0_first_row_does_not_make_it_reducescatter() {
        let f = file(
            "\
           0             0     float     sum      -1     0.27    0.00    0.00      0     0.18    0.00    0.00      0
        1024           256     float     sum      -1    20.51    0.05    0.09      0    20.12    0.05    0.09      0
",
        );
        let (c, why) = collective(&f.results.tests[0], None).unwrap();
        assert_eq!(c, Collective::AllReduce, "{why}");
        let g = file(
            "\
           0             0     float    none      -1     0.27    0.00    0.00      0     0.18    0.00    0.00      0
        1024            16     float    none      -1    28.39    0.04    0.03      0    28.07    0.04    0.03      0
",
        );
        assert_eq!(
            collective(&g.results.tests[0], None).unwrap().0,
            Collective::AllGather
        );
    }

    #[test]
    fn the_program_of_the_launch_command_names_the_collective() {
        let f = file(
            "\
#  ./all_gather_perf -b 8 -e 128M -f 2 -g 2
        1024           128     float    none      -1    20.51    0.05    0.04      0    20.12    0.05    0.04      0
",
        );
        let (c, why) = collective(&f.results.tests[0], None).unwrap();
        assert_eq!(
            (c, why.as_str()),
            (Collective::AllGather, "program all_gather_perf")
        );
    }

    #[test]
    fn an_unnamed_version_is_unknown_and_the_modelled_one_is_said() {
        let f = file(
            "        1024           256     float     sum      -1    20.51    0.05    0.09      0    20.12    0.05    0.09      0\n",
        );
        let (v, why) = version(&f, None);
        assert_eq!(v, DEFAULT_VERSION);
        assert!(why.contains("names no NCCL version"), "{why}");
        assert!(
            why.contains(&format!("modelled with topo's default, {DEFAULT_VERSION}")),
            "{why}"
        );
        assert!(!why.contains("libnccl"), "{why}");
    }

    /// nccl-tests before 2.13 printed the largest error, not a count: `5e-07` on a float run
    /// is healthy; over nccl-tests' bound (1e-5 per peer for float) it is wrong.
    #[test]
    fn an_error_column_is_judged_by_its_magnitude() {
        let f = file(
            "\
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
        1024           256     float     sum    56.74    0.02    0.03  5e-07    56.42    0.02    0.04  5e-07
        2048           512     float     sum    60.48    0.03    0.07  9e-04    61.71    0.03    0.06  5e-07
",
        );
        let rows = &f.results.tests[0].rows;
        let m: Vec<Option<u64>> = rows.iter().map(|r| measured(r, 32).wrong).collect();
        assert_eq!(m, [Some(0), Some(1)]);
        // The bound grows with the peers whose values are summed.
        assert_eq!(measured(&rows[1], 128).wrong, Some(0));
    }

    /// nccl#340's rows: the size column is twice count x 4 B, and count x 4 B over the time is
    /// the printed algbw, so the row is read at count x type; a gather's size column is its
    /// algbw x time, and a row whose every figure agrees, are left as printed.
    #[test]
    fn only_a_size_column_alone_against_the_row_is_replaced() {
        let f = file(
            "\
       65536          8192   float    16.57    1.98    1.98  0e+00    13.83    2.37    2.37  0e+00
        1024            16     float    none      -1    28.39    0.04    0.03      0    28.07    0.04    0.03      0
        1024           256     float     sum      -1    20.51    0.05    0.09      0    20.12    0.05    0.09      0
",
        );
        let rows = &f.results.tests[0].rows;
        let got: Vec<Option<u64>> = rows.iter().map(size_from_count).collect();
        assert_eq!(got, [Some(32768), None, None]);
    }
}
