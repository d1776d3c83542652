//! SVG pictures: the machine (`topo show --format svg`, [`machine`]) and predicted busbw
//! against message size (`topo plan --format svg`, [`plot`]).
//!
//! Names in a topology come from files a user brings (NCCL XML, snapshots, profiles), so
//! every string that reaches the document goes through [`Svg`], which escapes it; the plot's
//! strings go through plotters' SVG backend, which escapes them too, after [`xml_safe`].

pub mod machine;
pub mod plot;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;

/// Characters XML 1.0 cannot carry at all, even escaped (C0 controls but tab, newline and
/// carriage return; U+FFFE, U+FFFF), written as `\x01`-style escapes; tab, newline and
/// carriage return become spaces, since a label is one line.
pub(crate) fn xml_safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\t' | '\n' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            '\u{7f}' => out.push_str("\\x7f"),
            '\u{fffe}' | '\u{ffff}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Text or an attribute value as XML: [`xml_safe`], then the five markup characters escaped.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in xml_safe(s).chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// At most `max` characters of `s`, with an ellipsis when cut (hostile names are long).
pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Where a text's x coordinate sits.
#[derive(Clone, Copy)]
pub(crate) enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn name(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// A small SVG writer. Class names and numbers are the writer's own; every string argument
/// that may come from input is escaped here.
pub(crate) struct Svg {
    body: String,
}

/// Coordinates rounded to a tenth of a pixel: stable text for snapshots.
fn n(x: f64) -> String {
    let v = (x * 10.0).round() / 10.0;
    if v == v.trunc() {
        format!("{}", v as i64)
    } else {
        format!("{v:.1}")
    }
}

impl Svg {
    pub fn new() -> Svg {
        Svg {
            body: String::new(),
        }
    }

    /// A rectangle; `tip` becomes a `<title>` (the browser's tooltip).
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, class: &str, tip: Option<&str>) {
        let _ = write!(
            self.body,
            r#"<rect class="{class}" x="{}" y="{}" width="{}" height="{}" rx="6""#,
            n(x),
            n(y),
            n(w),
            n(h)
        );
        match tip {
            Some(t) => {
                let _ = writeln!(self.body, "><title>{}</title></rect>", escape(t));
            }
            None => self.body.push_str("/>\n"),
        }
    }

    pub fn text(&mut self, x: f64, y: f64, class: &str, anchor: Anchor, s: &str) {
        let _ = writeln!(
            self.body,
            r#"<text class="{class}" x="{}" y="{}" text-anchor="{}">{}</text>"#,
            n(x),
            n(y),
            anchor.name(),
            escape(s)
        );
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, class: &str) {
        let _ = writeln!(
            self.body,
            r#"<line class="{class}" x1="{}" y1="{}" x2="{}" y2="{}"/>"#,
            n(x1),
            n(y1),
            n(x2),
            n(y2)
        );
    }

    /// A cubic curve from `(x1, y)` to `(x2, y)` that dips `depth` below `y`.
    pub fn arc(&mut self, x1: f64, x2: f64, y: f64, depth: f64, class: &str, tip: &str) {
        let _ = writeln!(
            self.body,
            r#"<path class="{class}" d="M {} {} C {} {} {} {} {} {}"><title>{}</title></path>"#,
            n(x1),
            n(y),
            n(x1),
            n(y + depth),
            n(x2),
            n(y + depth),
            n(x2),
            n(y),
            escape(tip)
        );
    }

    /// The document: size, the style sheet, a white background and the body.
    pub fn finish(self, width: f64, height: f64, style: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">"#,
            w = n(width),
            h = n(height)
        );
        let _ = writeln!(out, "<style>{style}</style>");
        let _ = writeln!(
            out,
            r#"<rect x="0" y="0" width="{}" height="{}" fill="white"/>"#,
            n(width),
            n(height)
        );
        out.push_str(&self.body);
        out.push_str("</svg>\n");
        out
    }
}

#[cfg(test)]
mod writer_tests {
    use super::*;

    #[test]
    fn escapes_markup_and_controls() {
        assert_eq!(
            escape("a<b>&\"'\u{1}\u{7f}\n\u{ffff}"),
            "a&lt;b&gt;&amp;&quot;&apos;\\x01\\x7f \\u{ffff}"
        );
        assert_eq!(clip("mlx5_0", 10), "mlx5_0");
        assert_eq!(clip("abcdefghijkl", 5), "abcd…");
        assert_eq!(n(1.25), "1.3");
        assert_eq!(n(3.0), "3");
    }

    #[test]
    fn writer_escapes_every_string() {
        let mut s = Svg::new();
        s.text(1.0, 2.0, "t", Anchor::Start, "</text><script>x</script>");
        s.rect(0.0, 0.0, 1.0, 1.0, "r", Some("\"><script>"));
        s.arc(0.0, 10.0, 5.0, 3.0, "a", "<b>");
        let doc = s.finish(10.0, 10.0, "");
        assert!(!doc.contains("<script"));
        assert!(doc.contains("&lt;/text&gt;&lt;script&gt;"));
    }
}
