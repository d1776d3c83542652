//! The summary at the top (the machine in one line, the findings by severity with evidence
//! and fix, what could not be checked), the nccl-tests results against the expected band, the
//! log against the model, and provenance.

use super::doc::{Html, Input, MAX_EVIDENCE, MAX_ROWS, Provenance};
use crate::svg::clip;
use topo_diagnose::results::{ResultsReport, Verdict, gbps, size_label};
use topo_model::message::{Finding, Severity};

/// The machine in one line: source, hosts, GPUs, NCCL version modelled.
pub(super) fn machine_line(input: &Input) -> String {
    if let Some(p) = input.plan {
        let origin = p
            .source
            .origin
            .as_deref()
            .map(|o| format!(" {}", clip(o, 80)))
            .unwrap_or_default();
        return format!(
            "{}{origin} · {} node{} · {} × {} · NCCL {}",
            p.source.kind,
            p.nnodes,
            if p.nnodes == 1 { "" } else { "s" },
            p.nranks,
            clip(p.gpu.as_deref().unwrap_or("GPU"), 40),
            p.nccl_version
        );
    }
    match input.topo {
        Some(t) => {
            let origin = t
                .source
                .origin
                .as_deref()
                .map(|o| format!(" {}", clip(o, 80)))
                .unwrap_or_default();
            format!(
                "{}{origin} · {} host{} · {} GPU{}",
                t.source.kind,
                t.host_count().max(1),
                if t.host_count() > 1 { "s" } else { "" },
                t.gpus().len(),
                if t.gpus().len() == 1 { "" } else { "s" }
            )
        }
        None => "no machine: the inputs describe none".into(),
    }
}

fn sev_class(s: Severity) -> &'static str {
    match s {
        Severity::Error => "h-error",
        Severity::Warning => "h-warning",
        Severity::Info => "h-info",
    }
}

/// The heading, the table of contents, the verdict, the findings and what was not checked.
pub(super) fn render(h: &mut Html, input: &Input) {
    let d = input.diagnosis;
    h.raw("<header id=\"top\">\n");
    h.el("h1", "", "topo report");
    h.el("p", "h-line", &machine_line(input));
    h.raw("<nav>");
    for (id, name) in [
        ("summary", "Summary"),
        ("machine", "Machine"),
        ("plan", "NCCL plan"),
        ("results", "nccl-tests"),
        ("log", "NCCL log"),
        ("provenance", "Provenance"),
    ] {
        h.raw(&format!("<a href=\"#{id}\">{name}</a>"));
    }
    h.raw("</nav>\n</header>\n");
    h.section("summary", "Summary");
    h.el("p", "h-verdict", &d.verdict);
    h.raw("<p class=\"h-counts\">");
    for s in Severity::ALL.iter().rev() {
        let n = d.findings.iter().filter(|f| f.severity == *s).count();
        h.raw(&format!("<span class=\"{}\">", sev_class(*s)));
        h.text(&format!("{n} {}", s.name()));
        h.raw("</span>");
    }
    h.raw("</p>\n");
    // Most severe first; within a severity, the diagnosis' own order.
    let mut order: Vec<&Finding> = d.findings.iter().collect();
    order.sort_by_key(|f| std::cmp::Reverse(f.severity));
    h.raw("<div id=\"findings\">\n");
    for f in order {
        finding(h, f);
    }
    if d.findings.is_empty() {
        h.el("p", "h-note", "No findings.");
    }
    h.raw("</div>\n");
    not_checked(h, input);
    h.end_section();
}

/// One finding: severity, text, code, evidence, fix. The `data-` attributes carry the code and
/// severity as `topo diagnose --format json` spells them, for tools and tests.
fn finding(h: &mut Html, f: &Finding) {
    h.raw(&format!(
        "<div class=\"h-finding {}\" data-code=\"{}\" data-severity=\"{}\">\n",
        sev_class(f.severity),
        super::doc::esc(&f.code.to_string()),
        f.severity.name()
    ));
    h.raw("<p>");
    h.el("span", "h-sev", f.severity.name());
    h.el("span", "h-title", &f.text);
    h.el("span", "h-code", &f.code.to_string());
    h.raw("</p>\n");
    if !f.evidence.is_empty() {
        h.raw("<ul class=\"h-ev\">");
        for e in f.evidence.iter().take(MAX_EVIDENCE) {
            h.el("li", "", e);
        }
        h.raw("</ul>\n");
        h.more(MAX_EVIDENCE, f.evidence.len(), "evidence lines");
    }
    if !f.fix.is_empty() {
        h.raw("<p class=\"h-fix\"><b>Fix:</b> ");
        h.text(&f.fix);
        h.raw("</p>\n");
    }
    h.raw("</div>\n");
}

fn not_checked(h: &mut Html, input: &Input) {
    let d = input.diagnosis;
    let mut lines: Vec<String> = d
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.check, s.why))
        .collect();
    lines.extend(d.log_notes.iter().cloned());
    if let Some(n) = &input.plan_note {
        lines.push(format!("NCCL's plan: {n}"));
    }
    if input.topo.is_none() {
        lines.push("the machine: no source described it; pass --from or --profile".into());
    }
    h.el("h3", "", "Not checked");
    if lines.is_empty() {
        h.el("p", "h-note", "Every check ran.");
    } else {
        h.raw("<ul id=\"not-checked\">");
        for l in lines.iter().take(MAX_ROWS) {
            h.el("li", "", l);
        }
        h.raw("</ul>\n");
        h.more(MAX_ROWS, lines.len(), "items");
    }
    if !d.checked.is_empty() {
        h.el(
            "p",
            "h-note",
            &format!("Checked: {}.", d.checked.join("; ")),
        );
    }
}

fn verdict(v: Verdict) -> (&'static str, &'static str) {
    match v {
        Verdict::InBand => ("h-in", "in band"),
        Verdict::Below => ("h-below", "below"),
        Verdict::Isolated => ("h-isolated", "isolated dip"),
        Verdict::Above => ("h-above", "above"),
        Verdict::NotJudged => ("", "not judged"),
    }
}

/// nccl-tests: per size, measured against expected and its band (the plot of the plan
/// section carries the same points as crosses).
pub(super) fn results(h: &mut Html, input: &Input) {
    let d = input.diagnosis;
    h.section("results", "nccl-tests: measured against expected");
    if d.results.is_empty() {
        h.el(
            "p",
            "h-note",
            "No nccl-tests result was given (--nccl-tests FILE).",
        );
    }
    for r in &d.results {
        result_table(h, r);
    }
    h.end_section();
}

fn result_table(h: &mut Html, r: &ResultsReport) {
    h.el(
        "h3",
        "",
        &format!(
            "{} · {} · {} ranks on {} node{}",
            r.name,
            r.program.as_deref().unwrap_or(&r.collective),
            r.nranks,
            r.nnodes,
            if r.nnodes == 1 { "" } else { "s" }
        ),
    );
    h.el(
        "p",
        "h-note",
        &format!(
            "Judged against {}; collective from {}.",
            r.machine, r.collective_basis
        ),
    );
    h.raw("<table class=\"h-results\">");
    h.head(&[
        "size",
        "measured busbw GB/s",
        "expected GB/s",
        "band GB/s",
        "measured / expected",
        "verdict",
        "NCCL's choice",
    ]);
    h.raw("<tbody>\n");
    for row in r.rows.iter().take(MAX_ROWS) {
        let band = match (row.low_gbps, row.high_gbps) {
            (Some(l), Some(hi)) => format!("{}–{}", gbps(l), gbps(hi)),
            _ => "none".into(),
        };
        let (class, word) = verdict(row.verdict);
        h.raw("<tr>");
        for c in [
            size_label(row.bytes),
            gbps(row.measured_busbw_gbps),
            gbps(row.expected_busbw_gbps),
            band,
            format!("{:.2}", row.ratio),
        ] {
            h.el("td", "", &c);
        }
        h.raw(&format!(
            "<td class=\"{class}\" title=\"{}\">",
            super::doc::esc(&format!(
                "expected: {}; band: {}",
                row.expected_basis, row.band_basis
            ))
        ));
        h.text(word);
        h.raw("</td>");
        h.el("td", "", &row.choice);
        h.raw("</tr>\n");
    }
    h.raw("</tbody></table>\n");
    h.more(MAX_ROWS, r.rows.len(), "sizes");
    if !r.causes.is_empty() {
        h.el("h3", "", "Likely causes");
        h.raw("<ol>");
        for c in &r.causes {
            h.el("li", "", c);
        }
        h.raw("</ol>\n");
    }
}

/// The NCCL log beside the plan: each logged connection and count against the model's.
pub(super) fn log(h: &mut Html, input: &Input) {
    let d = input.diagnosis;
    h.section("log", "NCCL log against the model");
    if d.transports.is_empty() && d.comparisons.is_empty() {
        h.el(
            "p",
            "h-note",
            "No NCCL log line to compare (--nccl-log FILE with NCCL_DEBUG=INFO).",
        );
        h.end_section();
        return;
    }
    if !d.comparisons.is_empty() {
        h.el("h3", "", "What NCCL did, what topo expected");
        h.raw("<table class=\"h-compare\">");
        h.head(&["log", "what", "NCCL did", "topo expected", ""]);
        h.raw("<tbody>\n");
        for c in d.comparisons.iter().take(MAX_ROWS) {
            let mark = if c.differs { "differs" } else { "same" };
            h.row(&[
                c.log.clone(),
                c.what.clone(),
                c.observed.clone(),
                c.expected.clone(),
                mark.into(),
            ]);
        }
        h.raw("</tbody></table>\n");
        h.more(MAX_ROWS, d.comparisons.len(), "comparisons");
    }
    if !d.transports.is_empty() {
        h.el("h3", "", "Connections: logged against modelled");
        // The differing pairs first: those are the ones a reader looks for.
        let mut rows: Vec<_> = d.transports.iter().collect();
        rows.sort_by_key(|r| !r.differs);
        h.raw("<table class=\"h-compare\">");
        h.head(&[
            "log",
            "pair",
            "NCCL used",
            "topo expected",
            "",
            "model's reason",
        ]);
        h.raw("<tbody>\n");
        for r in rows.iter().take(MAX_ROWS) {
            let observed: Vec<String> = r.observed.iter().map(|x| x.to_string()).collect();
            h.raw(if r.differs {
                "<tr class=\"h-bad\">"
            } else {
                "<tr>"
            });
            for c in [
                r.log.clone(),
                format!("{} → {}", r.from, r.to),
                observed.join("+"),
                r.expected.as_ref().map_or("-".into(), |x| x.to_string()),
                (if r.differs { "differs" } else { "same" }).into(),
                r.reason.clone().unwrap_or_default(),
            ] {
                h.el("td", "", &c);
            }
            h.raw("</tr>\n");
        }
        h.raw("</tbody></table>\n");
        h.more(MAX_ROWS, rows.len(), "connections");
    }
    h.end_section();
}

/// topo's version, the NCCL version modelled and why, the inputs and their hashes, the time.
pub(super) fn provenance(h: &mut Html, input: &Input) {
    let nccl = match (input.plan, &input.diagnosis.model) {
        (Some(plan), _) => format!(
            "{} ({}){}",
            plan.nccl_version,
            plan.nccl_version_source,
            if plan.nccl_version_documented {
                ""
            } else {
                "; this version's data is inherited from an earlier one"
            }
        ),
        (None, Some(m)) => m.clone(),
        (None, None) => "none modelled".into(),
    };
    let mut rows = vec![("NCCL modelled".to_string(), nccl)];
    if let (Some(m), Some(_)) = (&input.diagnosis.model, input.plan) {
        rows.push(("NCCL for the log".into(), m.clone()));
    }
    page_provenance(h, input.provenance, &rows);
}

/// Every page's provenance: topo's version, the page's own `rows`, the time, the command
/// line and the inputs with their hashes.
pub(super) fn page_provenance(h: &mut Html, p: &Provenance, rows: &[(String, String)]) {
    h.section("provenance", "Provenance");
    h.raw("<table>");
    h.raw("<tbody>\n");
    h.row(&["topo".into(), p.topo_version.clone()]);
    for (k, v) in rows {
        h.row(&[k.clone(), v.clone()]);
    }
    h.row(&["made".into(), p.generated.clone()]);
    h.row(&["command".into(), p.command.clone()]);
    h.raw("</tbody></table>\n");
    h.el("h3", "", "Inputs");
    if p.inputs.is_empty() {
        h.el(
            "p",
            "h-note",
            "No file: the machine is a built-in profile or this host.",
        );
    } else {
        h.raw("<table class=\"h-inputs\">");
        h.head(&["given as", "file", "bytes", "SHA-256"]);
        h.raw("<tbody>\n");
        for f in p.inputs.iter().take(MAX_ROWS) {
            h.raw("<tr>");
            h.el("td", "", &f.role);
            h.el("td", "h-mono", &f.name);
            h.el("td", "", &f.bytes.map_or("-".into(), |b| b.to_string()));
            match (&f.sha256, &f.note) {
                (Some(s), _) => h.el("td", "h-mono", s),
                (None, Some(n)) => h.el("td", "h-note", n),
                (None, None) => h.el("td", "h-note", "not hashed"),
            }
            h.raw("</tr>\n");
        }
        h.raw("</tbody></table>\n");
        h.more(MAX_ROWS, p.inputs.len(), "inputs");
    }
    h.end_section();
}
