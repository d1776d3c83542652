//! `topo diagnose --fleet`'s document (`topo_diagnose::fleet::Fleet`, `topo.fleet/v1`) as text
//! and JSON; its HTML is `html::fleet`.

use crate::Style;
use std::fmt::Write as _;
use topo_diagnose::fleet::Fleet;

/// Differences listed per group (the JSON has them all).
const SHOWN: usize = 12;

pub fn json(d: &Fleet) -> crate::Result<String> {
    let mut buf = Vec::new();
    crate::doc::json_to(&mut buf, d)?;
    String::from_utf8(buf).map_err(|e| crate::Error::Encode(e.to_string()))
}

/// The first hosts of a group and a count of the rest.
pub(crate) fn hosts_line(h: &[String], shown: usize) -> String {
    let first: Vec<&str> = h.iter().take(shown).map(String::as_str).collect();
    let more = if h.len() > shown {
        format!(" and {} more", h.len() - shown)
    } else {
        String::new()
    };
    format!("{}{more}", first.join(", "))
}

/// What the reference group is called, and every other one.
pub(crate) fn role(i: usize) -> &'static str {
    if i == 0 { "reference" } else { "outlier" }
}

pub fn text(d: &Fleet, style: Style) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}: {} host(s) in {} group(s) of identical hardware",
        style.bold("topo diagnose --fleet"),
        d.folder,
        d.hosts,
        d.groups.len()
    );
    for (i, g) in d.groups.iter().enumerate() {
        let _ = writeln!(
            out,
            "\n{} {} ({} host(s), {}): {}",
            style.bold(role(i)),
            i,
            g.hosts.len(),
            g.fingerprint,
            hosts_line(&g.hosts, 8)
        );
        for r in g.differences.iter().take(SHOWN) {
            let _ = writeln!(
                out,
                "  {}: {} here, {} in the reference",
                r.fact,
                crate::diff::cell(&r.here),
                crate::diff::cell(&r.reference)
            );
        }
        if g.differences.len() > SHOWN {
            let _ = writeln!(
                out,
                "  ... {} more (--format json lists them)",
                g.differences.len() - SHOWN
            );
        }
    }
    for u in &d.unreadable {
        let _ = writeln!(
            out,
            "{} {}: {}",
            style.yellow("unreadable:"),
            u.host,
            u.error
        );
    }
    out
}
