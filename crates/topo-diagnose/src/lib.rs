//! `topo diagnose`: why NCCL does what it does on a machine, from the machine, the environment
//! and NCCL logs.
//!
//! Pure: the caller reads files and the machine (through `source`) and passes the results in
//! [`Input`]; [`diagnose`] returns a [`Report`] of findings, each with a stable id, the
//! evidence that proves it and the fix, plus the log-against-plan comparison and the list of
//! checks that could not run. Rendering is the binary's (`src/report/diagnose.rs`).

#![forbid(unsafe_code)]

mod compare;
mod expect;
pub mod hang;
mod hostchecks;
mod logchecks;
mod logfacts;
pub mod results;
mod topochecks;
mod vars;

mod report;
pub use report::{
    Comparison, Finding, Input, LogInput, Report, SCHEMA, Severity, Skipped, TransportRow,
};
pub(crate) use report::{quote, quote_some};

/// Runs every check that its inputs allow.
pub fn diagnose(input: &Input) -> Report {
    let mut r = Report {
        schema: SCHEMA,
        topo_version: env!("CARGO_PKG_VERSION"),
        verdict: String::new(),
        worst: None,
        findings: vec![],
        transports: vec![],
        comparisons: vec![],
        checked: vec![],
        skipped: vec![],
        log_notes: vec![],
        model: None,
        results: vec![],
    };
    for l in &input.logs {
        logchecks::run(l, input, &mut r);
        for m in &l.log.missing {
            r.log_notes.push(format!("{}: {m}", l.name));
        }
    }
    match input.topo {
        Some(t) => topochecks::run(t, input, &mut r),
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
    finish(&mut r);
    r
}

/// Merges findings of one id (several logs or checks may raise the same), sorts by severity,
/// and writes the verdict.
fn finish(r: &mut Report) {
    let mut merged: Vec<Finding> = vec![];
    for f in r.findings.drain(..) {
        match merged.iter_mut().find(|m| m.id == f.id) {
            Some(m) => {
                m.severity = m.severity.max(f.severity);
                for e in f.evidence {
                    if !m.evidence.contains(&e) {
                        m.evidence.push(e);
                    }
                }
            }
            None => merged.push(f),
        }
    }
    merged.sort_by_key(|f| std::cmp::Reverse(f.severity));
    r.findings = merged;
    r.worst = r.findings.first().map(|f| f.severity);
    r.verdict = match r.findings.first() {
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
            format!("{}: {}{tail}", f.severity.name(), f.title)
        }
        _ if r.checked.is_empty() => "nothing could be checked".into(),
        _ => "no problem found in what could be checked".into(),
    };
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod corpus_tests;
