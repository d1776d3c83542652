//! `topo diff A B --format html`: the `topo.diff/v1` document as a page. The hardware facts
//! that differ, what they change in NCCL's plan, and provenance; the same rows and lines the
//! JSON carries, in the same order.

use super::doc::{Html, MAX_ROWS, Provenance};
use crate::diff::{HW_SAME, PLAN_BASIS, PLAN_SAME, cell};
use topo_diagnose::diff::Diff;

pub(super) fn render(h: &mut Html, d: &Diff, p: &Provenance) {
    h.raw("<header id=\"top\">\n");
    h.el("h1", "", "topo diff");
    h.el(
        "p",
        "h-line",
        &format!(
            "A = {} ({}) · B = {} ({})",
            d.a.arg, d.a.kind, d.b.arg, d.b.kind
        ),
    );
    h.raw("<nav>");
    for (id, name) in [
        ("summary", "Summary"),
        ("hardware", "Hardware"),
        ("plan", "NCCL plan"),
        ("provenance", "Provenance"),
    ] {
        h.raw(&format!("<a href=\"#{id}\">{name}</a>"));
    }
    h.raw("</nav>\n</header>\n");
    h.section("summary", "Summary");
    let verdict = if d.differ() {
        format!(
            "A and B differ: {} hardware fact{}, {} change{} in NCCL's plan.",
            d.hardware.len(),
            if d.hardware.len() == 1 { "" } else { "s" },
            d.plan_changes.len(),
            if d.plan_changes.len() == 1 { "" } else { "s" }
        )
    } else if d.plan_error.is_some() {
        "The hardware facts both sources give are alike; the plans were not compared.".into()
    } else {
        "A and B are alike: the same hardware facts and the same plan.".into()
    };
    h.el("p", "h-verdict", &verdict);
    if d.a.hosts > 1 || d.b.hosts > 1 {
        h.el(
            "p",
            "h-note",
            &format!(
                "Host 0 of each side is compared ({} and {} hosts).",
                d.a.hosts, d.b.hosts
            ),
        );
    }
    h.end_section();
    hardware(h, d);
    plan(h, d);
    super::summary::page_provenance(h, p, &[("NCCL modelled".into(), nccl(d))]);
}

fn nccl(d: &Diff) -> String {
    if d.nccl_version.is_empty() {
        "none: the plans were not compared".into()
    } else {
        d.nccl_version.clone()
    }
}

/// One row per differing fact, A's value beside B's.
fn hardware(h: &mut Html, d: &Diff) {
    h.section("hardware", &format!("Hardware ({})", d.hardware.len()));
    if d.hardware.is_empty() {
        h.el("p", "h-note", HW_SAME);
        h.end_section();
        return;
    }
    h.raw("<div class=\"h-wide\"><table class=\"h-diff\" id=\"hardware-facts\">");
    h.head(&["fact", "A", "B"]);
    h.raw("<tbody>\n");
    for r in d.hardware.iter().take(MAX_ROWS) {
        h.row(&[r.fact.clone(), cell(&r.a), cell(&r.b)]);
    }
    h.raw("</tbody></table></div>\n");
    h.more(
        MAX_ROWS,
        d.hardware.len(),
        "facts (--format json lists them)",
    );
    h.end_section();
}

/// What the differences change in NCCL's plan, B against A.
fn plan(h: &mut Html, d: &Diff) {
    h.section("plan", "NCCL's plan");
    if d.plan_error.is_none() {
        h.el("p", "", &format!("NCCL {}, {PLAN_BASIS}.", d.nccl_version));
    }
    match &d.plan_error {
        Some(e) => h.el("p", "h-note", &format!("Not compared: {e}")),
        None if d.plan_changes.is_empty() => h.el("p", "h-note", PLAN_SAME),
        None => {
            h.raw("<ul id=\"plan-changes\">");
            for c in d.plan_changes.iter().take(MAX_ROWS) {
                h.el("li", "", c);
            }
            h.raw("</ul>\n");
            h.more(
                MAX_ROWS,
                d.plan_changes.len(),
                "changes (--format json lists them)",
            );
        }
    }
    h.end_section();
}
