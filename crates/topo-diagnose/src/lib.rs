//! `topo diagnose`: why NCCL does what it does on a machine, from the machine, the environment
//! and NCCL logs.
//!
//! Pure: the caller reads files and the machine (through `source`) and passes the results in
//! [`Input`]; [`diagnose`] returns a [`Report`] of findings, each with a stable id, the
//! evidence that proves it and the fix, plus the log-against-plan comparison and the list of
//! checks that could not run. Rendering is topo-report's (`crates/topo-report/src/diagnose.rs`).

#![forbid(unsafe_code)]

mod compare;
pub mod diff;
mod expect;
pub mod fleet;
pub mod hang;
mod hostchecks;
mod logchecks;
mod logfacts;
mod loggdr;
mod logversion;
pub mod results;
pub mod signatures;
mod topochecks;
mod vars;

mod report;
pub use report::{
    Comparison, Finding, Input, LogInput, Report, SCHEMA, Severity, Skipped, TransportRow,
};
pub(crate) use report::{ReportExt, quote, quote_some};
use topo_model::message::Code;

/// Runs every check that its inputs allow.
pub fn diagnose(input: &Input) -> Report {
    let mut r = Report {
        schema: SCHEMA.into(),
        topo_version: env!("CARGO_PKG_VERSION").into(),
        verdict: String::new(),
        worst: None,
        findings: vec![],
        transports: vec![],
        comparisons: vec![],
        checked: vec![],
        skipped: vec![],
        log_notes: vec![],
        nccl_versions: vec![],
        model: None,
        results: vec![],
    };
    // Codes the checks of a topology implied by a log raised (ranked after the log's own).
    let mut from_log_topology = vec![];
    for l in &input.logs {
        logchecks::run(l, input, &mut r);
        for m in &l.log.missing {
            r.log_notes.push(format!("{}: {m}", l.name));
        }
    }
    match input.topo {
        Some(t) => {
            let before = r.findings.len();
            topochecks::run(t, input, &mut r);
            // A topology the log itself implies (its dump, its Init lines) restates the log:
            // its findings come after what the log's lines say.
            if t.source.kind == topo_model::SourceKind::NcclLog {
                from_log_topology = r.findings[before..].iter().map(|f| f.code).collect();
            }
        }
        None => r.skipped.push(Skipped {
            check: "topology checks and log against plan".into(),
            why: input
                .topo_note
                .clone()
                .unwrap_or_else(|| "no machine to check".into()),
        }),
    }
    match input.facts {
        Some(f) => hostchecks::run(f, input, &mut r),
        None => r.skipped.push(Skipped {
            check: "live checks (environment, ACS, IOMMU, NVLink, fabric, MIG, /dev/shm, GPUDirect RDMA)".into(),
            why: "the source is a file, not a machine or a snapshot folder".into(),
        }),
    }
    vars::run(input, &mut r);
    compare::differences(&mut r);
    compare::count_differences(&mut r);
    if let (Some(topo), Some((name, want))) = (input.topo, input.expect) {
        expect::run(topo, name, want, &mut r);
    }
    // Last: the causes of a shortfall are the findings above.
    for (res, plan) in &input.results {
        let judged = results::judge(res, plan, &mut r);
        r.results.push(judged);
    }
    r.skipped.extend(input.results_skipped.iter().cloned());
    let logs = input.logs.iter().any(|l| !l.log.is_empty());
    if logs {
        r.nccl_versions = input
            .logs
            .iter()
            .filter(|l| !l.log.is_empty())
            .map(|l| format!("{}: {}", l.name, logversion::read(l.log)))
            .collect();
        no_failure(input, &mut r, &from_log_topology);
    }
    finish(&mut r, logs, &from_log_topology);
    r
}

/// Where a finding stands among those of its severity when logs were read: the cause first,
/// then its symptoms, then the rest; noise goes last whatever its severity (issue 49).
fn rank(c: Code, sev: Severity) -> (bool, std::cmp::Reverse<Severity>, u8) {
    // What a source's reader assumed qualifies the other findings; it causes nothing.
    let noise = matches!(c, Code::NvlinkUnknown | Code::SourceWarning)
        || (c == Code::UnknownNcclVariable && sev == Severity::Info);
    // Lines harmless where they stand (no IB device on one node) come after everything else.
    let benign = sev == Severity::Info
        && matches!(
            c,
            Code::SocketOnLoopback | Code::IbNoDevice | Code::IbVerbsMissing
        );
    let tier = if benign {
        4
    } else if signatures::CATALOGUE
        .iter()
        .any(|s| s.code == c && s.level == signatures::Level::Warn)
    {
        0
    } else {
        match c {
            Code::DriverOlderThanCuda
            | Code::NcclWarning
            | Code::P2pDisabledByEnv
            | Code::P2pDisabledNvlink
            | Code::RanksOnSeparateHosts
            | Code::SingleGpuVisible
            | Code::NvlsRequestedUnavailable
            | Code::SocketOnLoopback
            | Code::VirtualizedTopology
            | Code::TopologyFlattened => 0,
            Code::GdrUnavailable
            | Code::GdrDistance
            | Code::GdrReadOff
            | Code::ShmPciePath
            | Code::P2pDisabledPcie => 1,
            Code::LogNoFailure => 2,
            _ => 3,
        }
    };
    (noise, std::cmp::Reverse(sev), tier)
}

/// Logs that show no failure: say what they show and that the cause of what was reported is
/// not in them, rather than "no problem found" (issue 49).
fn no_failure(input: &Input, r: &mut Report, from_log_topology: &[Code]) {
    // Info findings that explain what the log shows (an expected SHM, GDR off by design).
    const EXPLAINS: [Code; 6] = [
        Code::P2pDisabledPcie,
        Code::ShmPciePath,
        Code::GdrReadOff,
        Code::GdrDistance,
        Code::NvlsUnavailable,
        Code::DriverOlderThanCuda,
    ];
    let failed = r.findings.iter().any(|f| {
        let (noise, _, tier) = rank(f.code, f.severity);
        let echo = from_log_topology.contains(&f.code) && tier >= 3;
        !noise && !echo && (f.severity > Severity::Info || EXPLAINS.contains(&f.code))
    });
    if failed {
        return;
    }
    let mut ev = vec![];
    for l in input.logs.iter().filter(|l| !l.log.is_empty()) {
        ev.push(format!("{}: {}", l.name, logversion::shows(l.log)));
    }
    r.add(
        Finding::new(Code::LogNoFailure, "the log shows no NCCL failure and no misconfiguration topo knows: what it shows is listed below; the cause of a reported hang, error or slowness is not in it")
        .evidence(ev)
        .fix("capture the failure itself: NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH for the topology) from every rank up to the error or hang, and the framework's own error; `topo diagnose` on the machine adds its live checks"),
    );
}

/// The most evidence lines one finding keeps; the rest are counted in one more line, so a
/// log of many jobs cannot print megabytes of evidence (docs/input-limits.md).
pub const MAX_EVIDENCE: usize = 64;

/// Findings of one code merged into one (several logs or checks may raise the same): the
/// highest severity, evidence once each and at most [`MAX_EVIDENCE`] lines, first-raised
/// order. Hash sets, not `Vec::contains`: a log of 40,000 jobs raises a finding per job, and
/// comparing each evidence line with every kept one took minutes (issue 45).
fn merge(findings: Vec<Finding>) -> Vec<Finding> {
    use std::collections::{HashMap, HashSet};
    let mut merged: Vec<Finding> = vec![];
    let mut at: HashMap<Code, usize> = HashMap::new();
    let mut seen: Vec<HashSet<String>> = vec![];
    let mut left_out: Vec<usize> = vec![];
    for mut f in findings {
        let evidence = std::mem::take(&mut f.evidence);
        let i = *at.entry(f.code).or_insert_with(|| {
            merged.push(f.clone());
            seen.push(HashSet::new());
            left_out.push(0);
            merged.len() - 1
        });
        let m = &mut merged[i];
        m.severity = m.severity.max(f.severity);
        for e in evidence {
            if seen[i].contains(&e) {
                continue;
            }
            if m.evidence.len() < MAX_EVIDENCE {
                seen[i].insert(e.clone());
                m.evidence.push(e);
            } else {
                seen[i].insert(e);
                left_out[i] += 1;
            }
        }
    }
    for (m, n) in merged.iter_mut().zip(left_out) {
        if n > 0 {
            m.evidence
                .push(format!("... and {n} more evidence lines not shown"));
        }
    }
    merged
}

/// Merges findings of one code, sorts them (by severity; with logs, the cause before its
/// symptoms and noise last) and writes the verdict.
fn finish(r: &mut Report, logs: bool, later: &[Code]) {
    let mut merged = merge(std::mem::take(&mut r.findings));
    let mut kept = std::collections::HashSet::new();
    r.checked.retain(|c| kept.insert(c.clone()));
    if logs {
        merged.sort_by_key(|f| {
            let (noise, sev, tier) = rank(f.code, f.severity);
            let echo = later.contains(&f.code) && tier >= 3;
            (noise || echo, sev, tier)
        });
    } else {
        // The order show and plan give the same findings (`topo_model::message::rank`).
        topo_model::message::order(&mut merged);
    }
    r.findings = merged;
    r.worst = r.findings.iter().map(|f| f.severity).max();
    r.verdict = match r.findings.first() {
        Some(f) if logs && f.severity == Severity::Info => format!("info: {}", f.text),
        Some(f) if f.severity > Severity::Info => {
            let more = r
                .findings
                .iter()
                .filter(|x| x.severity > Severity::Info)
                .count()
                - 1;
            let tail = if more > 0 {
                format!(
                    " (and {more} more problem{})",
                    if more > 1 { "s" } else { "" }
                )
            } else {
                String::new()
            };
            format!("{}: {}{tail}", f.severity.name(), f.text)
        }
        _ if r.checked.is_empty() => "nothing could be checked".into(),
        _ => "no problem found in what could be checked".into(),
    };
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod corpus_tests;
