//! `topo diff`'s document (`topo_diagnose::diff::Diff`, `topo.diff/v1`) as text and JSON; its
//! HTML is `html::diff`.

use crate::Style;
use std::fmt::Write as _;
use topo_diagnose::diff::Diff;

pub fn json(d: &Diff) -> crate::Result<String> {
    let mut buf = Vec::new();
    crate::doc::json_to(&mut buf, d)?;
    String::from_utf8(buf).map_err(|e| crate::Error::Encode(e.to_string()))
}

/// A missing value, as every view of a diff prints it.
pub(crate) fn cell(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "(none)".into())
}

/// What the plans were compared on, as the text and the HTML say it.
pub(crate) const PLAN_BASIS: &str = "AllReduce 1 KiB to 8 GiB, B against A";
/// The plan comparison found nothing.
pub(crate) const PLAN_SAME: &str =
    "the same channels, transports, NICs, choices and predicted times";
/// The hardware comparison found nothing.
pub(crate) const HW_SAME: &str = "no difference in the facts both sources give";

pub fn text(d: &Diff, style: Style) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} A = {} ({}), B = {} ({})",
        style.bold("topo diff"),
        d.a.arg,
        d.a.kind,
        d.b.arg,
        d.b.kind
    );
    if d.a.hosts > 1 || d.b.hosts > 1 {
        let _ = writeln!(
            out,
            "note: hosts 0 of each side are compared ({} and {} hosts)",
            d.a.hosts, d.b.hosts
        );
    }
    let _ = writeln!(out, "\n{} ({})", style.bold("Hardware"), d.hardware.len());
    if d.hardware.is_empty() {
        let _ = writeln!(out, "  {HW_SAME}");
    }
    let w = d.hardware.iter().map(|r| r.fact.len()).max().unwrap_or(0);
    let wa = d
        .hardware
        .iter()
        .map(|r| cell(&r.a).len())
        .max()
        .unwrap_or(0);
    for r in &d.hardware {
        let _ = writeln!(out, "  {:w$}  {:wa$}  {}", r.fact, cell(&r.a), cell(&r.b));
    }
    let _ = writeln!(
        out,
        "\n{} (NCCL {}, {PLAN_BASIS})",
        style.bold("Plan"),
        d.nccl_version
    );
    match &d.plan_error {
        Some(e) => {
            let _ = writeln!(out, "  not compared: {e}");
        }
        None if d.plan_changes.is_empty() => {
            let _ = writeln!(out, "  {PLAN_SAME}");
        }
        None => {
            for c in &d.plan_changes {
                let _ = writeln!(out, "  {c}");
            }
        }
    }
    out
}
