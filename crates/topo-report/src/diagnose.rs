//! The report as text that reads as an answer (verdict first, then each finding with its
//! evidence and fix, the log against the model, what could not be checked) or as the
//! `topo.diagnose/v1` JSON document.

use crate::Style;
use crate::fit;
use crate::fit::Cell;
use std::collections::BTreeMap;
use std::fmt::Write;
use topo_diagnose::{Finding, Report, Severity, TransportRow};

pub fn json(r: &Report) -> String {
    crate::doc::json(r).unwrap_or_default()
}

fn tag(s: Severity, style: Style) -> String {
    match s {
        Severity::Error => style.red("ERROR"),
        Severity::Warning => style.yellow("WARNING"),
        Severity::Info => "INFO".to_string(),
    }
}

/// Findings as every diagnosis' text prints them (`topo diagnose`, `--hang`): the tagged
/// code and text, the evidence, the fix, a blank line after each.
pub(crate) fn findings_text(fs: &[Finding], style: Style, o: &mut String) {
    for f in fs {
        let _ = writeln!(o, "{} {}: {}", tag(f.severity, style), f.code, f.text);
        if !f.evidence.is_empty() {
            let _ = writeln!(o, "  evidence:");
            for e in &f.evidence {
                let _ = writeln!(o, "    {e}");
            }
        }
        if !f.fix.is_empty() {
            let _ = writeln!(o, "  fix: {}", f.fix);
        }
        o.push('\n');
    }
}

pub fn text(r: &Report, style: Style) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}\n",
        style.bold(&format!("topo diagnose: {}", r.verdict))
    );
    for v in &r.nccl_versions {
        let _ = writeln!(o, "NCCL version read: {v}");
    }
    if !r.nccl_versions.is_empty() {
        o.push('\n');
    }
    findings_text(&r.findings, style, &mut o);
    results(r, &mut o);
    comparisons(r, &mut o);
    transports(r, &mut o, style);
    if !r.checked.is_empty() {
        let _ = writeln!(o, "Checked: {}.", r.checked.join("; "));
    }
    if !r.skipped.is_empty() {
        let _ = writeln!(o, "Not checked:");
        for s in &r.skipped {
            let _ = writeln!(o, "  - {}: {}", s.check, s.why);
        }
    }
    if !r.log_notes.is_empty() {
        let _ = writeln!(o, "Missing from the log(s):");
        for n in &r.log_notes {
            let _ = writeln!(o, "  - {n}");
        }
    }
    // Findings, evidence (log lines quoted whole) and fixes wrap between words.
    fit::document(&o, style.width)
}

/// Each nccl-tests run: measured against expected per size, then the likely causes.
fn results(r: &Report, o: &mut String) {
    use topo_diagnose::results::{gbps, size_label};
    for x in &r.results {
        let _ = writeln!(
            o,
            "Measured against expected: {} ({}, {}), {} ranks on {} node(s); machine: {}",
            x.name, x.collective, x.collective_basis, x.nranks, x.nnodes, x.machine
        );
        let _ = writeln!(
            o,
            "  {:>8} {:>9} {:>9} {:>17}  {:<16} verdict",
            "size", "busbw", "expected", "band", "NCCL's choice"
        );
        for j in &x.rows {
            let _ = writeln!(
                o,
                "  {:>8} {:>9} {:>9} {:>17}  {:<16} {} ({:+.0}%)",
                size_label(j.bytes),
                gbps(j.measured_busbw_gbps),
                gbps(j.expected_busbw_gbps),
                match j.low_gbps.zip(j.high_gbps) {
                    Some((lo, hi)) => format!("{}-{}", gbps(lo), gbps(hi)),
                    None => "-".into(),
                },
                j.choice,
                j.verdict.name(),
                (j.ratio - 1.0) * 100.0
            );
        }
        if let Some(j) = x.rows.first() {
            let _ = writeln!(o, "  band: {}", j.band_basis);
        }
        if !x.causes.is_empty() {
            let _ = writeln!(o, "  likely causes, most likely first:");
            for (i, c) in x.causes.iter().enumerate() {
                let _ = writeln!(o, "    {}. {c}", i + 1);
            }
        }
        o.push('\n');
    }
}

fn comparisons(r: &Report, o: &mut String) {
    if r.comparisons.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "Log against the model ({}):",
        r.model.as_deref().unwrap_or("NCCL model")
    );
    let _ = writeln!(o, "  {:<24} {:>12} {:>12}", "", "log", "model");
    for c in &r.comparisons {
        let mark = if c.differs { "  !" } else { "" };
        let _ = writeln!(
            o,
            "  {:<24} {:>12} {:>12}{mark}",
            c.what, c.observed, c.expected
        );
    }
    o.push('\n');
}

fn transports(r: &Report, o: &mut String, style: Style) {
    let Some(first) = r.transports.first().map(|t| t.log.clone()) else {
        return;
    };
    let rows: Vec<&TransportRow> = r.transports.iter().filter(|t| t.log == first).collect();
    let ranks: Vec<u32> = {
        let mut v: Vec<u32> = rows.iter().flat_map(|t| [t.from, t.to]).collect();
        v.sort();
        v.dedup();
        v
    };
    let _ = writeln!(
        o,
        "Transports in {first} (row sends to column; ! = another kind than the model predicts):"
    );
    if ranks.len() <= 16 {
        let cells: BTreeMap<(u32, u32), String> = rows
            .iter()
            .map(|t| {
                let obs: Vec<String> = t.observed.iter().map(|x| x.family()).collect();
                let mut s = obs.join("+");
                if t.differs {
                    s.push('!');
                }
                ((t.from, t.to), s)
            })
            .collect();
        let mut grid: Vec<Vec<Cell>> = vec![
            std::iter::once(format!("{:>5}", ""))
                .chain(ranks.iter().map(|c| format!("{c:>6}")))
                .map(Cell::new)
                .collect(),
        ];
        for a in &ranks {
            let mut row = vec![Cell::new(format!("{a:>5}"))];
            for b in &ranks {
                let cell = if a == b {
                    "X".to_string()
                } else {
                    cells.get(&(*a, *b)).cloned().unwrap_or_else(|| ".".into())
                };
                row.push(Cell::new(format!("{cell:>6}")));
            }
            grid.push(row);
        }
        // Wider than the terminal (16 ranks): blocks of columns, each with the row ranks.
        let all: Vec<usize> = (0..=ranks.len()).collect();
        o.push_str(&fit::column_blocks("  ", &grid, 1, &all, 1, style));
    } else {
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for t in &rows {
            for x in &t.observed {
                *kinds.entry(x.to_string()).or_default() += 1;
            }
        }
        for (k, n) in kinds {
            let _ = writeln!(o, "  {k}: {n} rank pair(s)");
        }
    }
    let differing: Vec<&&TransportRow> = rows.iter().filter(|t| t.differs).collect();
    for t in differing.iter().take(10) {
        let _ = writeln!(
            o,
            "  ! {} -> {}: {}: {}",
            t.from,
            t.to,
            t.log_against_model(),
            t.reason.as_deref().unwrap_or("")
        );
    }
    if differing.len() > 10 {
        let _ = writeln!(o, "  ... and {} more", differing.len() - 10);
    }
    o.push('\n');
}
