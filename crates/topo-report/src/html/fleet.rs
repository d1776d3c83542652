//! `topo diagnose --fleet DIR --format html`: the `topo.fleet/v1` document as a page. The
//! groups of identical hardware (the host classes) in one table, each outlier group with what
//! differs from the reference, the entries that could not be read, and provenance. Its size
//! follows the number of groups shown, not the hosts: a group lists its first hosts and a
//! count, and long lists are cut with a count (the JSON has everything).

use super::doc::{Html, MAX_ROWS, Provenance};
use crate::diff::cell;
use crate::fleet::{hosts_line, role};
use topo_diagnose::fleet::{Fleet, Group};

/// Hosts named in a group's row of the summary table.
const HOSTS_IN_ROW: usize = 8;
/// Hosts named above an outlier group's differences.
const HOSTS_IN_GROUP: usize = 64;
/// Outlier groups whose differences are written out.
const GROUPS_DETAILED: usize = 32;

pub(super) fn render(h: &mut Html, d: &Fleet, p: &Provenance) {
    h.raw("<header id=\"top\">\n");
    h.el("h1", "", "topo diagnose --fleet");
    h.el(
        "p",
        "h-line",
        &format!(
            "{} · {} host{} in {} group{} of identical hardware",
            d.folder,
            d.hosts,
            if d.hosts == 1 { "" } else { "s" },
            d.groups.len(),
            if d.groups.len() == 1 { "" } else { "s" }
        ),
    );
    h.raw("<nav>");
    for (id, name) in [
        ("summary", "Summary"),
        ("outliers", "Outliers"),
        ("unreadable", "Unreadable"),
        ("provenance", "Provenance"),
    ] {
        h.raw(&format!("<a href=\"#{id}\">{name}</a>"));
    }
    h.raw("</nav>\n</header>\n");
    summary(h, d);
    outliers(h, d);
    unreadable(h, d);
    let folder = super::doc::InputFile {
        role: "--fleet".into(),
        name: d.folder.clone(),
        bytes: None,
        sha256: None,
        note: Some(format!("a folder of {} entries: not hashed", d.hosts)),
    };
    let mut p = p.clone();
    p.inputs.push(folder);
    super::summary::page_provenance(h, &p, &[]);
}

fn summary(h: &mut Html, d: &Fleet) {
    h.section("summary", "Summary");
    h.el("p", "h-verdict", &verdict(d));
    if d.groups.is_empty() {
        h.end_section();
        return;
    }
    h.el("h3", "", "Groups of identical hardware");
    h.raw("<div class=\"h-wide\"><table class=\"h-groups\" id=\"groups\">");
    h.head(&[
        "group",
        "",
        "hosts",
        "fingerprint",
        "differences",
        "first hosts",
    ]);
    h.raw("<tbody>\n");
    for (i, g) in d.groups.iter().enumerate().take(MAX_ROWS) {
        h.raw(if i == 0 {
            "<tr>"
        } else {
            "<tr class=\"h-warnrow\">"
        });
        for c in [
            i.to_string(),
            role(i).to_string(),
            g.hosts.len().to_string(),
            g.fingerprint.clone(),
            g.differences.len().to_string(),
            hosts_line(&g.hosts, HOSTS_IN_ROW),
        ] {
            h.el("td", "", &c);
        }
        h.raw("</tr>\n");
    }
    h.raw("</tbody></table></div>\n");
    h.more(MAX_ROWS, d.groups.len(), "groups");
    h.end_section();
}

/// The fleet in a sentence: its outliers, or that its hosts are alike, and what could not
/// be read.
fn verdict(d: &Fleet) -> String {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let hosts: usize = d.groups.iter().map(|g| g.hosts.len()).sum();
    let mut parts = vec![];
    match d.groups.len() {
        0 => {}
        1 => parts.push(format!("{} alike", plural(hosts, "host", "hosts"))),
        g => parts.push(format!(
            "{} in {} differ from the reference ({})",
            plural(hosts - d.groups[0].hosts.len(), "host", "hosts"),
            plural(g - 1, "outlier group", "outlier groups"),
            plural(d.groups[0].hosts.len(), "host", "hosts")
        )),
    }
    if !d.unreadable.is_empty() {
        parts.push(format!(
            "{} could not be read",
            plural(d.unreadable.len(), "entry", "entries")
        ));
    }
    if parts.is_empty() {
        return "The folder holds no entry.".into();
    }
    let mut s = parts.join("; ");
    s[..1].make_ascii_uppercase();
    s.push('.');
    s
}

fn outliers(h: &mut Html, d: &Fleet) {
    h.section("outliers", "Outliers against the reference");
    if d.groups.len() < 2 {
        h.el("p", "h-note", "No outlier group.");
    }
    for (i, g) in d.groups.iter().enumerate().skip(1).take(GROUPS_DETAILED) {
        group(h, i, g);
    }
    h.more(
        GROUPS_DETAILED,
        d.groups.len().saturating_sub(1),
        "outlier groups detailed (--format json lists them)",
    );
    h.end_section();
}

fn group(h: &mut Html, i: usize, g: &Group) {
    h.el(
        "h3",
        "",
        &format!(
            "outlier {i}: {} host{} ({})",
            g.hosts.len(),
            if g.hosts.len() == 1 { "" } else { "s" },
            g.fingerprint
        ),
    );
    h.el("p", "h-mono", &hosts_line(&g.hosts, HOSTS_IN_GROUP));
    h.raw(&format!(
        "<div class=\"h-wide\"><table class=\"h-diff\" id=\"group-{i}\">"
    ));
    h.head(&["fact", "here", "in the reference"]);
    h.raw("<tbody>\n");
    for r in g.differences.iter().take(MAX_ROWS) {
        h.row(&[r.fact.clone(), cell(&r.here), cell(&r.reference)]);
    }
    h.raw("</tbody></table></div>\n");
    h.more(MAX_ROWS, g.differences.len(), "differences");
}

fn unreadable(h: &mut Html, d: &Fleet) {
    h.section(
        "unreadable",
        &format!("Unreadable entries ({})", d.unreadable.len()),
    );
    if d.unreadable.is_empty() {
        h.el("p", "h-note", "Every entry was read.");
        h.end_section();
        return;
    }
    h.raw("<div class=\"h-wide\"><table class=\"h-unreadable\" id=\"unreadable-entries\">");
    h.head(&["host", "why"]);
    h.raw("<tbody>\n");
    for u in d.unreadable.iter().take(MAX_ROWS) {
        h.row(&[u.host.clone(), u.error.clone()]);
    }
    h.raw("</tbody></table></div>\n");
    h.more(MAX_ROWS, d.unreadable.len(), "unreadable entries");
    h.end_section();
}
