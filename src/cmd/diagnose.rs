//! `topo diagnose`: reads what the user has (the machine, a snapshot, a file, NCCL logs, a
//! reference) through `topo-source`, runs the pure engine in `topo-diagnose`, and renders.

use crate::cli::{DiagnoseArgs, DiagnoseFormat, FailOn};
use crate::error;
use crate::output::emit;
use crate::request::{Hosts, Request};
use crate::util::Style;
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use topo_diagnose::{self as diagnose, Input, LogInput, Severity};
use topo_model::Topology;
use topo_source::{self as source, FromKind, hostfacts, live, nccllog, read, textfile};

struct Loaded {
    logs: Vec<(String, nccllog::NcclLog)>,
    results: Vec<super::diagnose_results::ResultsFile>,
    /// The machine the results are judged against, in words.
    machine: String,
    topo: Option<Topology>,
    topo_note: Option<String>,
    facts: Option<hostfacts::HostFacts>,
    env: BTreeMap<String, String>,
}

/// Runs the command; the exit code follows `--fail-on`.
pub fn run(a: &DiagnoseArgs, style: Style) -> Result<i32> {
    let Built {
        report,
        nothing_checked,
        ..
    } = build(a)?;
    emit_and_gate(
        a,
        style,
        |st| topo_report::diagnose::text(&report, st),
        || topo_report::diagnose::json(&report),
        (report.worst, nothing_checked),
    )
}

/// Writes a diagnosis (`--format`, `-o`) and returns the exit code `--fail-on` gives: 1 where
/// a finding reaches the threshold, and an error where the input checked nothing, since a
/// gate passes only on what it checked. One gate for every kind of diagnosis.
pub(crate) fn emit_and_gate(
    a: &DiagnoseArgs,
    style: Style,
    text: impl Fn(Style) -> String,
    json: impl Fn() -> String,
    (worst, nothing_checked): (Option<Severity>, Option<String>),
) -> Result<i32> {
    let style = if a.output.is_some() {
        crate::util::file_style()
    } else {
        style
    };
    let out = match a.format {
        DiagnoseFormat::Text => {
            crate::util::escape_document(&text(style), style.color).into_owned()
        }
        // HTML is --fleet's, refused for the others before they read anything (`cmd::run`).
        DiagnoseFormat::Json | DiagnoseFormat::Html => json(),
    };
    emit(a.output.as_ref(), &out)?;
    let threshold = match a.fail_on {
        Some(FailOn::Error) => Severity::Error,
        Some(FailOn::Warning) => Severity::Warning,
        None => return Ok(0),
    };
    if let Some(why) = nothing_checked {
        return Err(error::Failure::new(
            error::Exit::CheckFailed,
            format!("--fail-on: {why}; a gate passes only on what it checked"),
        )
        .hint("pass the output of a run with NCCL_DEBUG=INFO (check the command that made it did not fail), a machine (--from, --profile), an nccl-tests result or the hang evidence (RAS, watchdog lines, Flight Recorder output)")
        .into());
    }
    Ok(i32::from(worst.is_some_and(|w| w >= threshold)))
}

/// A diagnosis and what was judged: `topo report` shows the same findings beside that
/// machine and its plan.
pub(crate) struct Built {
    pub report: diagnose::Report,
    /// The machine the diagnosis judged.
    pub topo: Option<Topology>,
    /// The NCCL version the first log or result that names one names.
    pub named: Option<String>,
    /// Why a gate would have checked nothing (`--fail-on` fails then).
    pub nothing_checked: Option<String>,
}

/// The diagnosis of what `a` names.
pub(crate) fn build(a: &DiagnoseArgs) -> Result<Built> {
    let loaded = load(a)?;
    let named = loaded
        .results
        .iter()
        .find_map(|r| r.results.nccl_version.clone())
        .or_else(|| loaded.logs.iter().find_map(|(_, l)| l.version.clone()));
    let (results, results_skipped) = match (&loaded.topo, loaded.results.is_empty()) {
        (Some(t), false) => {
            super::diagnose_results::inputs(&loaded.results, t, &loaded.machine, a)?
        }
        _ => (vec![], vec![]),
    };
    let expect = match &a.expect {
        Some(e) => Some((e.clone(), load_expect(e)?)),
        None => None,
    };
    let input = Input {
        logs: loaded
            .logs
            .iter()
            .map(|(n, l)| LogInput {
                name: n.clone(),
                log: l,
            })
            .collect(),
        topo: loaded.topo.as_ref(),
        topo_note: loaded.topo_note.clone(),
        facts: loaded.facts.as_ref(),
        expect: expect.as_ref().map(|(n, t)| (n.as_str(), t)),
        env: loaded.env.clone(),
        version: a.nccl_version.clone(),
        results,
        results_skipped,
        ..Default::default()
    };
    let report = diagnose::diagnose(&input);
    drop(input);
    let nothing_checked = checked_nothing(&loaded, &report);
    Ok(Built {
        report,
        topo: loaded.topo,
        named,
        nothing_checked,
    })
}

/// Why a gate checked nothing: a log that holds no NCCL line (empty, a launcher's error
/// text, a FIFO whose writer left), or no check at all. A gate passes on evidence only.
fn checked_nothing(loaded: &Loaded, report: &diagnose::Report) -> Option<String> {
    let empty = loaded
        .logs
        .iter()
        .find(|(_, l)| l.is_empty() && l.launch_env.is_empty() && l.devices.is_empty());
    if let Some((name, _)) = empty {
        return Some(format!(
            "{name} holds no NCCL INFO or WARN line, so nothing in it was checked"
        ));
    }
    report
        .checked
        .is_empty()
        .then(|| "nothing could be checked".to_string())
}

fn load(a: &DiagnoseArgs) -> Result<Loaded> {
    let source = Request::build(&a.source, Hosts::One)?;
    let overrides: BTreeMap<String, String> = source.env.iter().cloned().collect();
    let spec = source.spec().clone();
    // Every log is parsed and kept at once: their total is bounded, not only each one.
    let named = a
        .nccl_log
        .iter()
        .chain(&a.nccl_tests)
        .chain(spec.from.as_ref());
    super::diagnose_logs::check_stdin_once(named.map(PathBuf::as_path))?;
    textfile::check_total(a.nccl_log.iter().chain(&a.nccl_tests).map(PathBuf::as_path))?;
    let mut budget = textfile::TextBudget::default();
    let mut logs = super::diagnose_logs::read_all(&a.nccl_log, &mut budget)?;
    let mut results = vec![];
    for p in &a.nccl_tests {
        let f = super::diagnose_results::read(p, &mut budget)?;
        logs.extend(f.logs.iter().cloned());
        results.push(f);
    }
    // A result judged alone is judged against the machine it names, not this host.
    let (spec, machine) = if !results.is_empty() && spec.from.is_none() && spec.profile.is_none() {
        let (inferred, how) = super::diagnose_results::inferred_spec(&results)?;
        // The stated node facts hold for the inferred machine as for a named one.
        let node = a.source.node_facts();
        (source::SourceSpec { node, ..inferred }, how)
    } else {
        let m = machine_words(&spec);
        (spec, m)
    };
    let mut out = Loaded {
        results,
        machine,
        logs: vec![],
        topo: None,
        topo_note: None,
        facts: None,
        env: overrides.clone(),
    };
    if let Some(from) = spec.from.as_ref().filter(|p| read::is_stream(p)) {
        let (from_logs, topo) = super::diagnose_logs::from_stream(from, &mut budget)?;
        logs.splice(0..0, from_logs);
        out.topo = Some(topo);
    } else if let Some(from) = &spec.from {
        // A log passed as the source is a log to diagnose as well.
        if from.is_file() && source::sniff(from)? == FromKind::NcclLog {
            logs.splice(0..0, super::diagnose_logs::read_log(from, &mut budget)?);
        }
        out.topo = Some(anyhow::Context::context(
            source::load(&spec),
            "cannot diagnose --from",
        )?);
        if let Some(f) = snapshot_facts(from)? {
            out.env = merged(&f.env, &overrides);
            out.facts = Some(f);
        }
    } else if spec.profile.is_some() {
        out.topo = Some(source::load(&spec)?);
    } else if !logs.is_empty() {
        // The log alone: its `=== System` block, else what its Init lines imply.
        let origin = logs.iter().find(|(_, l)| l.system.is_some());
        out.topo = origin
            .and_then(|(n, l)| nccllog::system::topology(l, Some(n.clone())))
            .or_else(|| {
                logs.iter()
                    .find_map(|(n, l)| nccllog::system::implied_topology(l, Some(n.clone())))
            });
        if out.topo.is_none() {
            out.topo_note = Some("the log has no `=== System` block or Init lines with bus ids; pass --from or --profile for the machine it ran on".into());
        }
    } else {
        let root = spec
            .sysfs_root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/"));
        out.topo = Some(source::discover(&root)?);
        let system = live::is_system_root(&root);
        let env = (system || !root.join("meta.json").exists())
            .then(|| hostfacts::relevant_env(std::env::vars()));
        let nvml = system.then(source::nvml::query);
        let f = hostfacts::read(&root, env, nvml);
        out.env = merged(&f.env, &overrides);
        out.facts = Some(f);
    }
    // Stated facts, a profile lent to a file, --p2p/--nvls, failed parts: the machine the
    // findings judge is the one the flags describe, as for show and plan.
    if let Some(t) = out.topo.as_mut() {
        source.state(t)?;
    }
    out.logs = logs;
    Ok(out)
}

/// The source as the user named it, for the results' report.
fn machine_words(spec: &source::SourceSpec) -> String {
    let nodes = spec
        .nodes
        .map(|n| format!(" x {n} node(s)"))
        .unwrap_or_default();
    match (&spec.from, &spec.profile) {
        (Some(f), Some(p)) => format!("{} with profile {p}{nodes}", f.display()),
        (Some(f), None) => format!("{}{nodes}", f.display()),
        (None, Some(p)) => format!("profile {p}{nodes}"),
        (None, None) => "this machine".into(),
    }
}

/// The host facts a snapshot recorded, from its folder or, read into memory the same way,
/// from its archive: an archive is diagnosed like its folder. `None` for other sources.
fn snapshot_facts(from: &std::path::Path) -> Result<Option<hostfacts::HostFacts>> {
    if from.is_dir() {
        return Ok(Some(hostfacts::read(from, None, None)));
    }
    if !from.is_file() || source::sniff(from)? != FromKind::Snapshot {
        return Ok(None);
    }
    let mem = topo_source::archive::load(from)
        .map_err(|why| anyhow::anyhow!("cannot read snapshot {}: {why}", from.display()))?;
    let mut f = hostfacts::read_tree(&mem, None, None);
    f.root = from.display().to_string();
    Ok(Some(f))
}

/// The NCCL part of the machine's environment, then `--env`.
fn merged(
    env: &BTreeMap<String, String>,
    overrides: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = env
        .iter()
        .filter(|(k, _)| k.starts_with("NCCL_") || *k == "CUDA_VISIBLE_DEVICES")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    m.extend(overrides.clone());
    m
}

fn load_expect(e: &str) -> Result<Topology> {
    let path = Path::new(e);
    if path.exists() {
        return source::load(&source::SourceSpec {
            from: Some(path.to_path_buf()),
            ..Default::default()
        })
        .map_err(|err| anyhow::Error::from(err).context(format!("cannot read --expect {e}")));
    }
    source::profile::load_builtin(e).map_err(|err| {
        if error::report(&err).hint.is_some() {
            err.context(format!("--expect {e}"))
        } else {
            error::usage(
                format!("--expect {e}: neither a file nor a built-in profile"),
                "pass a profile name (dgx-h100, hgx-h200, ...) or a snapshot folder/.tar.gz",
            )
        }
    })
}
