//! `topo report`: one self-contained HTML file for a ticket. The summary (the machine in a
//! line, the diagnosis' findings, what could not be checked), the machine (show's SVG, the
//! nvidia-smi matrix, NIC rails, NUMA), NCCL's plan (transports per GPU pair, channels, rings
//! and trees, the per-size choice, the busbw plot), nccl-tests results against the expected
//! band, the log against the model, and provenance. The same shell (head, style, escaping,
//! provenance) writes `topo diff --format html` (`diff.rs`) and `topo diagnose --fleet
//! --format html` (`fleet.rs`) from the documents their JSON prints.
//!
//! Pure like every renderer: it takes the show context, the plan and the diagnosis the binary
//! built and writes into a `Write`. Nothing in the document refers outside it (inline CSS and
//! SVG, no script, font or request), so it opens offline from a mail attachment. Every string
//! that may come from an input goes through [`esc`]. The document is also well-formed XML
//! (void elements self-closed, only XML's predefined entities), so a strict XML reader checks
//! it in the tests. Its size does not grow with the node count: hosts are summarised by
//! class, GPU pairs are listed for the first host only, and long lists are cut with a count;
//! a fleet is summarised by its groups of identical hosts. A table wider than the page (a
//! matrix of 16 GPUs and their NICs) scrolls inside its own box (`h-wide`) and prints whole.

mod diff;
mod doc;
mod fleet;
mod machine;
mod nccl;
#[cfg(test)]
mod strict;
mod summary;
#[cfg(test)]
mod tests;
mod trees;

use doc::Html;
pub use doc::{Input, InputFile, Provenance};

/// Writes the report.
pub fn write(w: &mut dyn std::io::Write, input: &Input) -> crate::Result<()> {
    let mut h = Html::default();
    open(
        &mut h,
        &input.provenance.topo_version,
        &format!("topo report: {}", summary::machine_line(input)),
    );
    summary::render(&mut h, input);
    machine::render(&mut h, input);
    nccl::render(&mut h, input)?;
    summary::results(&mut h, input);
    summary::log(&mut h, input);
    summary::provenance(&mut h, input);
    close(h, w)
}

/// `topo diff A B --format html`: the document `topo diff --format json` prints, as a page.
pub fn diff(
    w: &mut dyn std::io::Write,
    d: &topo_diagnose::diff::Diff,
    p: &Provenance,
) -> crate::Result<()> {
    let title = format!("topo diff: {} against {}", d.b.arg, d.a.arg);
    page(w, &p.topo_version, &title, |h| diff::render(h, d, p))
}

/// `topo diagnose --fleet DIR --format html`: the document `--format json` prints, as a page.
pub fn fleet(
    w: &mut dyn std::io::Write,
    d: &topo_diagnose::fleet::Fleet,
    p: &Provenance,
) -> crate::Result<()> {
    let title = format!("topo fleet: {} ({} hosts)", d.folder, d.hosts);
    page(w, &p.topo_version, &title, |h| fleet::render(h, d, p))
}

/// One page of a document: the shared head, the document's body, the shared close.
fn page(
    w: &mut dyn std::io::Write,
    version: &str,
    title: &str,
    body: impl FnOnce(&mut Html),
) -> crate::Result<()> {
    let mut h = Html::default();
    open(&mut h, version, title);
    body(&mut h);
    close(h, w)
}

fn open(h: &mut Html, version: &str, title: &str) {
    h.raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n");
    h.raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n");
    h.raw("<meta name=\"generator\" content=\"topo ");
    h.text(version);
    h.raw("\"/>\n<title>");
    h.text(title);
    h.raw("</title>\n<style>");
    h.raw(CSS);
    h.raw("</style>\n</head>\n<body>\n");
}

fn close(mut h: Html, w: &mut dyn std::io::Write) -> crate::Result<()> {
    h.raw("</body>\n</html>\n");
    w.write_all(h.0.as_bytes())?;
    Ok(())
}

/// The page's own style. Its classes start with `h-` so the pictures' styles (scoped
/// anyway) and the page's never meet.
const CSS: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.5em;margin:0 0 .2em}
h2{font-size:1.25em;border-bottom:2px solid #ccd;padding-bottom:.2em;margin-top:1.6em}
h3{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.4em 0 1em;font-size:.9em}
th,td{border:1px solid #ccd;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#eef0f4}
code,pre,.h-mono{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:.88em}
pre{white-space:pre-wrap;word-break:break-all;background:#f6f7f9;padding:.5em;border:1px solid #e0e3e8}
.h-line{font-size:1.1em;margin:.2em 0 1em}
.h-finding{border-left:5px solid #999;padding:.3em .8em;margin:.6em 0;background:#fafbfc;break-inside:avoid}
.h-finding.h-error{border-color:#c62828}.h-finding.h-warning{border-color:#ef6c00}.h-finding.h-info{border-color:#1565c0}
.h-sev{font-weight:bold;text-transform:uppercase;font-size:.8em;margin-right:.5em}
.h-error .h-sev{color:#c62828}.h-warning .h-sev{color:#ef6c00}.h-info .h-sev{color:#1565c0}
.h-code{color:#555;font-size:.85em;margin-left:.5em}
.h-ev{margin:.3em 0;padding-left:1.2em}
.h-ev li{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:.82em;word-break:break-all}
.h-fix{margin:.3em 0}
.h-more,.h-note{color:#666;font-size:.9em}
.h-counts span{margin-right:1.2em}
.h-matrix td{text-align:center;font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:.85em}
.h-matrix th{text-align:center}
.h-nv{background:#c8e6c9}.h-pix{background:#e3f2fd}.h-pxb{background:#bbdefb}.h-phb{background:#fff3e0}
.h-node{background:#ffe0b2}.h-sys{background:#ffcdd2}.h-self{background:#eee}
.h-p2p{background:#c8e6c9}.h-shm{background:#fff9c4}.h-net{background:#bbdefb}.h-other{background:#eee}.h-bad{background:#ef9a9a;font-weight:bold}
.h-warnrow td{background:#fff3e0}.h-verdict{font-weight:bold}
.h-in{background:#e8f5e9}.h-below{background:#ffcdd2}.h-above{background:#e3f2fd}.h-isolated{background:#fff3e0}
.h-figure{overflow-x:auto;margin:.5em 0 1em}
.h-wide{overflow-x:auto;max-width:100%;margin:.4em 0 1em}
.h-wide table{margin:0}
.h-figure svg{max-width:100%;height:auto}
.h-legend span{display:inline-block;padding:0 .5em;margin-right:.4em;border:1px solid #ccd}
nav a{margin-right:1em}
@media print{body{max-width:none;margin:0}section{break-before:auto}.h-figure{overflow:visible}.h-wide{overflow:visible}.h-wide table{font-size:6.5pt}h2{break-after:avoid}nav{display:none}}
";
