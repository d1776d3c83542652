//! `topo show`: summary, matrix, pci, paths and dot views; JSON/YAML documents; the SVG
//! picture. One exporter per format: [`text`], [`json`] and [`json_writer`], [`yaml`], [`svg`].
//!
//! Every view reads the same [`Ctx`]: the topology split per host, stable labels (`GPU0`,
//! `NIC0`, as `nvidia-smi topo -m` numbers them) and NCCL's path table. The text views and
//! the `topo.show/v1` document are built from it, so the JSON always carries what the text
//! shows.

mod copies;
mod doc;
mod dot;
pub(crate) mod matrix;
pub(crate) mod model;
mod paths;
pub(crate) mod pci;
pub use pci::use_pci_names;
mod summary;
#[cfg(test)]
mod testing;

use crate::Result;
use crate::ShowView;
use crate::Style;
use model::Ctx;
use std::borrow::Cow;
use topo_model::Topology;

/// `f` on the context every view reads: built on the first copy of a topology that is
/// copies of one machine (`--nodes`), which the context then names, else on the topology.
pub(crate) fn with_ctx<R>(topo: &Topology, f: impl FnOnce(&Ctx) -> R) -> R {
    let shown = topo.first_copy().map_or(Cow::Borrowed(topo), Cow::Owned);
    f(&Ctx::new(&shown).with_copies(topo))
}

/// One of the text views, fitted to `style`; `compact` asks for the matrix view's narrow
/// layout.
pub fn text(topo: &Topology, view: ShowView, style: Style, compact: bool) -> String {
    with_ctx(topo, |ctx| text_of(ctx, view, style, compact))
}

fn text_of(ctx: &Ctx, view: ShowView, style: Style, compact: bool) -> String {
    let note = ctx.copies.map(|c| c.sentence());
    let text = match view {
        // nvidia-smi's layout, as wide as nvidia-smi's; DOT is a format, not a view.
        ShowView::Matrix if !compact => {
            let text = matrix::render(ctx, style);
            return match note {
                Some(n) => format!("{text}\n{n}\n"),
                None => text,
            };
        }
        ShowView::Dot => {
            let text = dot::render(ctx);
            return match note {
                Some(n) => format!("// {n}\n{text}"),
                None => text,
            };
        }
        ShowView::Matrix => matrix::render_compact(ctx, style),
        ShowView::Summary => summary::render(ctx, style),
        ShowView::Pci => pci::render(ctx, style),
        ShowView::Paths => paths::render(ctx, style),
    };
    let text = match note {
        Some(n) => format!("{text}\n{}\n", style.dim(&n)),
        None => text,
    };
    // Lines the views could not lay out themselves (headings, prose) wrap.
    crate::fit::document(&text, style.width)
}

/// The `topo.show/v1` document as JSON, whole (see [`json_writer`] for large machines).
pub fn json(topo: &Topology, view: ShowView) -> Result<String> {
    with_ctx(topo, |ctx| doc::json(ctx, view))
}

/// The `topo.show/v1` document as YAML.
pub fn yaml(topo: &Topology, view: ShowView) -> Result<String> {
    with_ctx(topo, |ctx| doc::yaml(ctx, view))
}

/// The machine as an SVG picture: every view at once (of the first copy where `topo` is
/// copies of one machine: the picture of one host is the picture of all).
pub fn svg(topo: &Topology) -> String {
    with_ctx(topo, crate::svg::machine::render)
}

/// The `topo.show/v1` JSON document of `topo`, as a writer that encodes it into its output
/// piece by piece (hundreds of megabytes at thousands of hosts, never held whole). The
/// analysis runs in the writer.
pub fn json_writer<'a>(
    topo: &'a Topology,
    view: ShowView,
) -> impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + 'a {
    move |w| with_ctx(topo, |ctx| doc::json_to(ctx, view, w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::testing::hgx;

    /// Colour only adds escape sequences: stripped, the text is the plain text.
    #[test]
    fn colour_never_moves_a_column() {
        let t = hgx(4, 90);
        for view in [
            ShowView::Summary,
            ShowView::Matrix,
            ShowView::Pci,
            ShowView::Paths,
        ] {
            let plain = text(&t, view, Style::default(), false);
            let colour = Style {
                color: true,
                ..Style::default()
            };
            let col = text(&t, view, colour, false);
            assert!(col.contains("\x1b["), "{view:?}");
            let mut stripped = String::new();
            let mut rest = col.as_str();
            while let Some(i) = rest.find("\x1b[") {
                stripped.push_str(&rest[..i]);
                let after = &rest[i..];
                let end = after.find('m').unwrap();
                rest = &after[end + 1..];
            }
            stripped.push_str(rest);
            assert_eq!(stripped, plain, "{view:?}");
            assert!(!plain.contains('\x1b'));
        }
    }

    #[test]
    fn tables_align_and_trim() {
        let t = crate::fit::table(
            "",
            &["A", "Bee"],
            &[vec!["xx".into(), "y".into()]],
            Style::default(),
        );
        assert_eq!(t, "A   Bee\nxx  y\n");
    }
}

#[cfg(test)]
mod snapshots {
    //! Every view of every test machine, text and JSON, as reviewed snapshots.
    use super::testing::*;
    use super::*;
    use topo_model::testing::hgx;

    fn all(name: &str, t: &Topology) {
        for (view, vname) in [
            (ShowView::Summary, "summary"),
            (ShowView::Matrix, "matrix"),
            (ShowView::Pci, "pci"),
            (ShowView::Dot, "dot"),
            (ShowView::Paths, "paths"),
        ] {
            let text = super::text(t, view, Style::default(), false);
            insta::assert_snapshot!(format!("{name}_{vname}"), text);
        }
        let json = super::json(t, ShowView::Summary).unwrap();
        insta::assert_snapshot!(format!("{name}_json"), json);
    }

    #[test]
    fn hgx_h100() {
        all("hgx8", &hgx(8, 90));
    }
    #[test]
    fn pcie_two_socket() {
        all("pcie2s", &pcie_2socket());
    }
    #[test]
    fn nvlink_bridge_pair() {
        all("bridge", &nvlink_bridge());
    }
    #[test]
    fn no_gpu() {
        all("gpuless", &gpuless());
    }
    #[test]
    fn skeleton_unknown_nvlink() {
        all("unknown_nvlink", &unknown_nvlink());
    }
    #[test]
    fn vm() {
        all("vm", &vm_bridges());
    }
}
