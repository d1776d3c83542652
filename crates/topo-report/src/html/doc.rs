//! The report's vocabulary, which every section reads and which reads none of them: what
//! the binary passes in ([`Input`], [`Provenance`]) and the writer that escapes text
//! ([`Html`]).

use crate::svg::plot::Panel;
use std::fmt::Write as _;
use topo_diagnose::Report as Diagnosis;
use topo_model::Topology;
use topo_nccl::plan::Plan;

/// One file the report was made from.
#[derive(Clone, Debug)]
pub struct InputFile {
    /// What it was given as: `--from`, `--nccl-log`, `--nccl-tests`, `--profile`.
    pub role: String,
    pub name: String,
    pub bytes: Option<u64>,
    /// SHA-256 of its bytes as read, in hex; `None` with `note` saying why (a folder, a pipe).
    pub sha256: Option<String>,
    pub note: Option<String>,
}

/// Where the report came from, as the binary knows it.
#[derive(Clone, Debug, Default)]
pub struct Provenance {
    pub topo_version: String,
    /// When the report was made (UTC, RFC 3339), from the binary's clock.
    pub generated: String,
    /// The command line, as typed (arguments are input too: escaped).
    pub command: String,
    pub inputs: Vec<InputFile>,
}

/// Everything the report shows; built by the binary.
pub struct Input<'a> {
    /// The machine judged; `None` where no source gave one (a log without a system block).
    pub topo: Option<&'a Topology>,
    pub plan: Option<&'a Plan>,
    /// The plan's busbw plot, with nccl-tests' measurements as measured series.
    pub panels: &'a [Panel],
    /// Why there is no plan, for the summary's "not checked".
    pub plan_note: Option<String>,
    pub diagnosis: &'a Diagnosis,
    pub provenance: &'a Provenance,
}

/// Lines of a finding's evidence shown before a count of the rest (a finding on 16,384
/// hosts carries a line from each).
pub(crate) const MAX_EVIDENCE: usize = 24;
/// Rows of any other list before a count of the rest.
pub(crate) const MAX_ROWS: usize = 200;

/// `s` as HTML text or a quoted attribute value: markup characters escaped, and controls no
/// document may carry written as visible escapes (the SVG writer's rule).
pub(crate) fn esc(s: &str) -> String {
    crate::svg::escape(s)
}

/// The document being written: raw markup is the renderer's own, text is escaped.
#[derive(Default)]
pub(crate) struct Html(pub(crate) String);

impl Html {
    pub fn raw(&mut self, s: &str) {
        self.0.push_str(s);
    }
    pub fn text(&mut self, s: &str) {
        self.0.push_str(&esc(s));
    }
    /// `<tag class="c">text</tag>`.
    pub fn el(&mut self, tag: &str, class: &str, text: &str) {
        if class.is_empty() {
            let _ = write!(self.0, "<{tag}>{}</{tag}>", esc(text));
        } else {
            let _ = write!(self.0, "<{tag} class=\"{class}\">{}</{tag}>", esc(text));
        }
    }
    /// A section with its id (unique: one per section kind) and heading.
    pub fn section(&mut self, id: &str, heading: &str) {
        let _ = write!(self.0, "<section id=\"{id}\">\n<h2>{}</h2>\n", esc(heading));
    }
    pub fn end_section(&mut self) {
        self.raw("</section>\n");
    }
    /// A table head row.
    pub fn head(&mut self, cols: &[&str]) {
        self.raw("<thead><tr>");
        for c in cols {
            self.el("th", "", c);
        }
        self.raw("</tr></thead>\n");
    }
    /// A row of text cells.
    pub fn row(&mut self, cells: &[String]) {
        self.raw("<tr>");
        for c in cells {
            self.el("td", "", c);
        }
        self.raw("</tr>\n");
    }
    /// A paragraph saying how many of `total` were left out after `shown`.
    pub fn more(&mut self, shown: usize, total: usize, what: &str) {
        if total > shown {
            self.el(
                "p",
                "h-more",
                &format!("… and {} more {what} not listed", total - shown),
            );
        }
    }
    /// An SVG the renderers drew, inline: its XML declaration dropped and its `<style>` rules
    /// scoped to `scope` (a class on the wrapping div), so a picture's `text{...}` does not
    /// restyle the other pictures or the page.
    pub fn svg(&mut self, scope: &str, doc: &str) {
        let body = match doc.find("<svg") {
            Some(i) => &doc[i..],
            None => return,
        };
        let _ = write!(self.0, "<div class=\"h-figure {scope}\">");
        match (body.find("<style>"), body.find("</style>")) {
            (Some(a), Some(b)) if a < b => {
                self.raw(&body[..a + "<style>".len()]);
                self.raw(&scope_css(&body[a + "<style>".len()..b], scope));
                self.raw(&body[b..]);
            }
            _ => self.raw(body),
        }
        self.raw("</div>\n");
    }
}

/// Every selector of `css` (flat rules, as the SVG writer's styles are) prefixed with
/// `.scope `.
pub(super) fn scope_css(css: &str, scope: &str) -> String {
    let mut out = String::with_capacity(css.len() * 2);
    for rule in css.split_inclusive('}') {
        let Some((sel, body)) = rule.split_once('{') else {
            out.push_str(rule);
            continue;
        };
        let scoped: Vec<String> = sel
            .split(',')
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(|s| format!(".{scope} {s}"))
            .collect();
        if scoped.is_empty() {
            out.push_str(rule);
            continue;
        }
        let _ = write!(out, "\n{}{{{body}", scoped.join(","));
    }
    out
}
