//! `topo diagnose --hang`: the verdict first, then the suspects, the places, what each group
//! was stuck in, each finding with its evidence and fix, and what was read; or the
//! `topo.hang/v1` JSON document.

use crate::Style;
use crate::fit;
use std::fmt::Write;
use topo_diagnose::hang::{HangReport, RankKind, Suspect, ranges};

/// Suspects listed in the text (the JSON has them all).
const SHOWN: usize = 24;

pub fn json(r: &HangReport) -> String {
    crate::doc::json(r).unwrap_or_default()
}

fn kind_words(k: RankKind) -> &'static str {
    match k {
        RankKind::Global => "global",
        RankKind::Group => "in group",
        RankKind::Comm => "in comm",
        RankKind::Trace => "trace",
    }
}

fn suspect_line(s: &Suspect) -> String {
    let who = if s.ranks.is_empty() {
        "rank unknown".to_string()
    } else if s.ranks.len() == 1 {
        format!("rank {} ({})", s.ranks[0], kind_words(s.rank_kind))
    } else {
        format!("ranks {} ({})", ranges(&s.ranks), kind_words(s.rank_kind))
    };
    let mut at = vec![];
    if let Some(n) = &s.node {
        at.push(format!("node {n}"));
    }
    if let Some(g) = &s.gpu {
        at.push(format!("GPU {g}"));
    }
    if let Some(p) = s.pid {
        at.push(format!("pid {p}"));
    }
    if let Some(l) = &s.launcher {
        at.push(format!("from `{l}`"));
    }
    let group = s
        .group
        .as_deref()
        .map(|g| format!(" {g}"))
        .unwrap_or_default();
    let at = if at.is_empty() {
        String::new()
    } else {
        format!(" [{}]", at.join(", "))
    };
    let why = serde_json::to_value(s.why)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!("{who}{group}: {why}, {}{at}", s.detail)
}

pub fn text(r: &HangReport, style: Style) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}\n",
        style.bold(&format!("topo diagnose --hang: {}", r.verdict))
    );
    let cause = serde_json::to_value(r.cause)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let _ = writeln!(o, "Cause: {cause} ({})", r.cause.words());
    if !r.suspects.is_empty() {
        let _ = writeln!(o, "Suspects:");
        for s in r.suspects.iter().take(SHOWN) {
            let _ = writeln!(o, "  - {}", suspect_line(s));
        }
        if r.suspects.len() > SHOWN {
            let _ = writeln!(
                o,
                "  ... {} more (--format json lists them)",
                r.suspects.len() - SHOWN
            );
        }
    }
    if !r.places.is_empty() {
        let _ = writeln!(o, "Places:");
        for p in r.places.iter().take(SHOWN) {
            let _ = writeln!(o, "  - {} {}: {}", p.kind, p.name, p.why);
        }
        if r.places.len() > SHOWN {
            let _ = writeln!(
                o,
                "  ... {} more (--format json lists them)",
                r.places.len() - SHOWN
            );
        }
    }
    if !r.on_topology.is_empty() {
        let _ = writeln!(o, "On the machine:");
        for t in r.on_topology.iter().take(SHOWN) {
            let _ = writeln!(o, "  - {}: {}", t.subject, t.why);
        }
    }
    if !r.stuck.is_empty() {
        let _ = writeln!(o, "Stuck:");
        for s in r.stuck.iter().take(SHOWN) {
            let _ = writeln!(o, "  - {} ({})", s.summary, s.source);
        }
    }
    o.push('\n');
    crate::diagnose::findings_text(&r.findings, style, &mut o);
    let read: Vec<String> = r
        .inputs
        .iter()
        .map(|i| {
            let k = if i.kinds.is_empty() {
                "nothing recognised".to_string()
            } else {
                i.kinds.join(", ")
            };
            format!("{} ({} lines: {k})", i.name, i.lines)
        })
        .collect();
    if !read.is_empty() {
        let more = read.len().saturating_sub(8);
        let tail = if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        };
        let _ = writeln!(o, "Read: {}{tail}.", read[..read.len().min(8)].join("; "));
    }
    if !r.notes.is_empty() {
        let _ = writeln!(o, "Notes:");
        for n in &r.notes {
            let _ = writeln!(o, "  - {n}");
        }
    }
    fit::document(&o, style.width)
}
