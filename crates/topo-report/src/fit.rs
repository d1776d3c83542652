//! Fitting text to the width a [`Style`] carries: lines wrapped at spaces with a continuation
//! indent (never inside a word, so no number is ever cut), tables laid out by comfy-table
//! (wide text cells wrap), and matrices split into blocks of columns that repeat the row
//! labels.
//!
//! A line's length for fitting is its UTF-8 length in bytes ([`fit_len`]), not its columns:
//! a `→` or `│` is one column but three bytes, so such lines wrap a few columns early, and in
//! exchange byte-counting tools (`awk 'length > 100'` with mawk, `cut -b`) agree that every
//! line fits. Alignment inside tables still counts columns ([`visible_width`]).

use crate::Style;
use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table};

/// Colour of a cell in a rendered table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Paint {
    #[default]
    None,
    Bold,
    Green,
    Yellow,
    Cyan,
    Dim,
}

impl Paint {
    pub fn apply(self, style: Style, s: &str) -> String {
        match self {
            Paint::None => s.to_string(),
            Paint::Bold => style.bold(s),
            Paint::Green => style.green(s),
            Paint::Yellow => style.yellow(s),
            Paint::Cyan => style.cyan(s),
            Paint::Dim => style.dim(s),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Cell {
    pub text: String,
    pub paint: Paint,
}

impl Cell {
    pub fn new(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            paint: Paint::None,
        }
    }
    pub fn paint(text: impl Into<String>, paint: Paint) -> Cell {
        Cell {
            text: text.into(),
            paint,
        }
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::new(s)
    }
}
impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::new(s)
    }
}

/// Columns a line takes on a terminal: characters, not counting SGR colour sequences.
pub fn visible_width(s: &str) -> usize {
    measure(s, |_| 1)
}

/// The length a line is fitted by: UTF-8 bytes, not counting SGR colour sequences or the
/// colour marks of [`table`].
pub fn fit_len(s: &str) -> usize {
    measure(s, char::len_utf8)
}

/// The sum of `weight` over the characters of `s` that print: SGR colour sequences and the
/// colour marks of [`table`] count nothing.
fn measure(s: &str, weight: impl Fn(char) -> usize) -> usize {
    let mut n = 0;
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b'
            && let Some(body) = rest.strip_prefix("\x1b[")
        {
            let k = body
                .bytes()
                .take_while(|b| b.is_ascii_digit() || *b == b';')
                .count();
            if body.as_bytes().get(k) == Some(&b'm') {
                rest = &body[k + 1..];
                continue;
            }
        }
        if !is_marker(c) {
            n += weight(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    n
}

/// `text` laid out after `first` and then after `cont` on every further line, broken at
/// spaces so that each line fits `width` where a word allows. A word longer than a line is
/// broken only after a `/` (a long path), never elsewhere: without one it stands alone on
/// its line rather than being cut.
pub fn wrap_prefixed(first: &str, cont: &str, text: &str, width: usize) -> Vec<String> {
    let mut out = vec![];
    let mut cur = first.to_string();
    let mut cur_w = fit_len(first);
    let cont_w = fit_len(cont);
    let room = width.saturating_sub(cont_w).max(1);
    let mut fresh = true;
    for word in text.split(' ') {
        if fresh && word.is_empty() {
            continue;
        }
        for (k, piece) in path_pieces(word, room).into_iter().enumerate() {
            let glued = k > 0;
            let w = fit_len(piece);
            let sep = usize::from(!fresh && !glued);
            if !fresh && cur_w + sep + w > width {
                out.push(cur.trim_end().to_string());
                cur = cont.to_string();
                cur_w = cont_w;
                fresh = true;
                if piece.is_empty() {
                    continue;
                }
            }
            if !fresh && !glued {
                cur.push(' ');
                cur_w += 1;
            }
            cur.push_str(piece);
            cur_w += w;
            fresh = false;
        }
    }
    out.push(cur.trim_end().to_string());
    out
}

/// `word` whole, or, when it is longer than `room` and holds a `/`, in pieces that each end
/// at a `/` (the last one excepted) and are as long as `room` allows.
fn path_pieces(word: &str, room: usize) -> Vec<&str> {
    if fit_len(word) <= room || !word.contains('/') {
        return vec![word];
    }
    let mut out = vec![];
    let mut start = 0;
    let mut cut = None;
    for (i, c) in word.char_indices() {
        if c == '/' {
            let end = i + 1;
            if fit_len(&word[start..end]) > room
                && let Some(k) = cut
            {
                out.push(&word[start..k]);
                start = k;
            }
            cut = Some(end);
        }
    }
    if let Some(k) = cut
        && k > start
        && fit_len(&word[start..]) > room
    {
        out.push(&word[start..k]);
        start = k;
    }
    out.push(&word[start..]);
    out.retain(|p| !p.is_empty());
    out
}

/// One line fitted to `width`: its own indent on the first line, that indent plus `extra`
/// spaces on the continuation lines.
pub fn wrap(line: &str, width: usize, extra: usize) -> Vec<String> {
    if fit_len(line) <= width {
        return vec![line.to_string()];
    }
    let body = line.trim_start_matches(' ');
    let lead = line.len() - body.len();
    let cont = " ".repeat((lead + extra).min(width / 2));
    wrap_prefixed(&" ".repeat(lead), &cont, body, width)
}

/// Every line of `text` fitted to `width` (continuations indented 4 more than their line).
/// Lines are fitted on their own, so a long text (a summary of thousands of hosts) is cut
/// at line ends into pieces fitted on the machine's cores.
pub fn document(text: &str, width: usize) -> String {
    let pieces = line_pieces(text, DOCUMENT_PIECE_BYTES);
    crate::util::concat_parallel(pieces.len(), 2, |i, out| {
        if i > 0 {
            out.push('\n');
        }
        document_lines(pieces[i], width, out);
    })
}

/// Below this a document is fitted on one core.
const DOCUMENT_PIECE_BYTES: usize = 1 << 20;

/// `text` cut at newlines (dropped) into pieces of about `bytes`; `text` is the pieces
/// joined with newlines.
fn line_pieces(text: &str, bytes: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.len() > bytes {
        // A newline byte is always a whole character in UTF-8: cutting there is safe.
        let Some(cut) = rest.as_bytes()[bytes..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| bytes + i)
        else {
            break;
        };
        pieces.push(&rest[..cut]);
        rest = &rest[cut + 1..];
    }
    pieces.push(rest);
    pieces
}

fn document_lines(text: &str, width: usize, out: &mut String) {
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&wrap(line, width, 4).join("\n"));
    }
}

/// Zero-width marks (Unicode default-ignorable, so comfy-table measures them as nothing)
/// that stand for a cell's colour while comfy-table lays the table out; replaced by the
/// escape sequences afterwards. Only written when colour is on.
const END: char = '\u{2060}';
fn mark(p: Paint) -> Option<char> {
    match p {
        Paint::None => None,
        Paint::Bold => Some('\u{2061}'),
        Paint::Green => Some('\u{2062}'),
        Paint::Yellow => Some('\u{2063}'),
        Paint::Cyan => Some('\u{2064}'),
        Paint::Dim => Some('\u{206A}'),
    }
}
fn is_marker(c: char) -> bool {
    c == END || matches!(c, '\u{2061}'..='\u{2064}' | '\u{206A}')
}

fn marked(c: &Cell, style: Style) -> String {
    let text: String = c.text.chars().filter(|&ch| !is_marker(ch)).collect();
    match mark(c.paint) {
        Some(m) if style.color && !text.is_empty() => format!("{m}{text}{END}"),
        _ => text,
    }
}

/// The marks of [`marked`] turned into colour, one line at a time: a colour a wrapped cell
/// carries onto its next line starts again there.
fn paint_marks(line: &str, style: Style) -> String {
    if !line.chars().any(is_marker) {
        return line.to_string();
    }
    let mut out = String::new();
    let mut open: Option<Paint> = None;
    let mut span = String::new();
    for ch in line.chars() {
        let p = match ch {
            '\u{2061}' => Some(Paint::Bold),
            '\u{2062}' => Some(Paint::Green),
            '\u{2063}' => Some(Paint::Yellow),
            '\u{2064}' => Some(Paint::Cyan),
            '\u{206A}' => Some(Paint::Dim),
            _ => None,
        };
        if let Some(p) = p {
            out.push_str(&std::mem::take(&mut span));
            open = Some(p);
        } else if ch == END {
            if let Some(p) = open.take() {
                out.push_str(&p.apply(style, &std::mem::take(&mut span)));
            }
        } else {
            span.push(ch);
        }
    }
    match open {
        Some(p) => out.push_str(&p.apply(style, &span)),
        None => out.push_str(&span),
    }
    out
}

/// A left-aligned table with two spaces between columns, through comfy-table, fitted to
/// `style.width`: columns of short single words (numbers, bus ids) keep their width, longer
/// text cells wrap at spaces. Trailing spaces are trimmed.
pub fn table(indent: &str, header: &[&str], rows: &[Vec<Cell>], style: Style) -> String {
    table_aligned(indent, header, rows, &[], style)
}

/// [`table`] with the columns listed in `right` aligned right (numbers).
///
/// The layout is a pure function of its arguments and most of a cluster's hosts show the
/// same tables (the same GPUs, NICs and switches under the same names), so each thread keeps
/// the last layouts it made, keyed by every argument: at 4,096 hosts the summary lays out a
/// table once instead of 4,096 times.
pub fn table_aligned(
    indent: &str,
    header: &[&str],
    rows: &[Vec<Cell>],
    right: &[usize],
    style: Style,
) -> String {
    let spec = Spec::new(indent, header, rows, right, style);
    let key = spec.key();
    let hit = LAYOUTS.with(|m| m.borrow().get(&key).cloned());
    if let Some(out) = hit {
        return out;
    }
    let out = spec.fitted();
    LAYOUTS.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= LAYOUTS_KEPT {
            m.clear();
        }
        m.insert(key, out.clone());
    });
    out
}

/// Layouts a thread keeps: a host's summary has a handful of tables.
const LAYOUTS_KEPT: usize = 64;

thread_local! {
    static LAYOUTS: std::cell::RefCell<std::collections::HashMap<String, String>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// The arguments of [`table_aligned`].
#[derive(Clone, Copy)]
struct Spec<'a> {
    indent: &'a str,
    header: &'a [&'a str],
    rows: &'a [Vec<Cell>],
    right: &'a [usize],
    style: Style,
}

impl<'a> Spec<'a> {
    fn new(
        indent: &'a str,
        header: &'a [&'a str],
        rows: &'a [Vec<Cell>],
        right: &'a [usize],
        style: Style,
    ) -> Spec<'a> {
        Spec {
            indent,
            header,
            rows,
            right,
            style,
        }
    }

    /// Every field in one string: each text prefixed by its length and each list by its
    /// count, so two different tables never share a key whatever their cells hold.
    fn key(&self) -> String {
        use std::fmt::Write as _;
        let mut k = String::with_capacity(256);
        let text = |k: &mut String, t: &str| {
            let _ = write!(k, "{}:", t.len());
            k.push_str(t);
        };
        let _ = write!(
            k,
            "{} {} {:?} ",
            self.style.width, self.style.color, self.right
        );
        text(&mut k, self.indent);
        let _ = write!(k, "h{}", self.header.len());
        self.header.iter().for_each(|h| text(&mut k, h));
        let _ = write!(k, "r{}", self.rows.len());
        for r in self.rows {
            let _ = write!(k, "c{}", r.len());
            for c in r {
                let _ = write!(k, "{:?}", c.paint);
                text(&mut k, &c.text);
            }
        }
        k
    }

    fn fitted(&self) -> String {
        let style = self.style;
        // comfy-table fits columns; a line with multi-byte characters is longer in bytes, so
        // lay out again a little narrower until every line fits (see the module comment).
        let mut width = style.width;
        let mut out = String::new();
        for _ in 0..6 {
            out = layout(self, width);
            let over = out.lines().map(fit_len).max().unwrap_or(0);
            if over <= style.width || width <= 8 {
                break;
            }
            width = width.saturating_sub(over - style.width).max(8);
        }
        out
    }
}

/// One layout of `spec` by comfy-table at `width`.
fn layout(spec: &Spec, width: usize) -> String {
    let Spec {
        indent,
        header,
        rows,
        right,
        style,
    } = *spec;
    let ncol = header
        .len()
        .max(rows.iter().map(|r| r.len()).max().unwrap_or(0));
    if ncol == 0 {
        return String::new();
    }
    let mut t = Table::new();
    t.load_style(comfy_table::presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(u16::try_from(width).unwrap_or(u16::MAX));
    if !header.is_empty() {
        let h: Vec<String> = header
            .iter()
            .map(|h| marked(&Cell::paint(*h, Paint::Bold), style))
            .collect();
        t.set_header(h);
    }
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| marked(c, style)).collect();
        t.add_row(cells);
    }
    let lead = u16::try_from(visible_width(indent)).unwrap_or(0);
    for i in 0..ncol {
        let col_cells = rows
            .iter()
            .filter_map(|r| r.get(i))
            .map(|c| c.text.as_str());
        let all: Vec<&str> = header
            .get(i)
            .copied()
            .into_iter()
            .chain(col_cells)
            .collect();
        // A column of single words up to 20 characters (ids, numbers, names) never wraps,
        // so nothing in it is ever split.
        let rigid = all
            .iter()
            .all(|s| !s.contains(' ') && visible_width(s) <= 20)
            || all.iter().all(|s| visible_width(s) <= 10);
        if let Some(c) = t.column_mut(i) {
            c.set_padding((
                if i == 0 { lead } else { 0 },
                if i + 1 < ncol { 2 } else { 0 },
            ));
            if rigid {
                c.set_constraint(ColumnConstraint::ContentWidth);
            }
            if right.contains(&i) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    let mut out = String::new();
    for l in t.lines() {
        out.push_str(paint_marks(&l, style).trim_end());
        out.push('\n');
    }
    out
}

/// Cells laid out in aligned columns without wrapping: the layout for matrices, whose
/// cells must stay whole. `right` columns align right; `gap` spaces separate columns.
pub fn grid(indent: &str, rows: &[Vec<Cell>], right: &[usize], gap: usize, style: Style) -> String {
    let ncol = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut w = vec![0usize; ncol];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(visible_width(&c.text));
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut s = String::from(indent);
        for (i, c) in r.iter().enumerate() {
            let pad = w[i].saturating_sub(visible_width(&c.text));
            let text = if c.text.is_empty() {
                String::new()
            } else {
                c.paint.apply(style, &c.text)
            };
            if right.contains(&i) {
                s.push_str(&" ".repeat(pad));
                s.push_str(&text);
            } else {
                s.push_str(&text);
                s.push_str(&" ".repeat(pad));
            }
            if i + 1 < r.len() {
                s.push_str(&" ".repeat(gap));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    }
    out
}

/// Per column, the bytes it adds to a line in [`grid`]: its width in columns plus the most
/// extra bytes a cell's multi-byte characters carry.
pub fn fit_widths(rows: &[Vec<Cell>]) -> Vec<usize> {
    let ncol = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut w = vec![0usize; ncol];
    let mut extra = vec![0usize; ncol];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            let cols = visible_width(&c.text);
            w[i] = w[i].max(cols);
            extra[i] = extra[i].max(fit_len(&c.text) - cols);
        }
    }
    w.iter().zip(extra).map(|(a, b)| a + b).collect()
}

/// Splits a matrix (`rows[0]` the header) into blocks of whole columns so that each block
/// fits `style.width`: the first `keep` columns (row labels) repeat in every block, and
/// blocks are separated by a blank line. One block when it all fits.
pub fn column_blocks(
    indent: &str,
    rows: &[Vec<Cell>],
    keep: usize,
    right: &[usize],
    gap: usize,
    style: Style,
) -> String {
    let w = fit_widths(rows);
    let fixed: usize = fit_len(indent) + w.iter().take(keep).map(|x| x + gap).sum::<usize>();
    let mut blocks: Vec<Vec<usize>> = vec![];
    let mut cur: Vec<usize> = vec![];
    let mut used = fixed;
    for (i, &wi) in w.iter().enumerate().skip(keep) {
        if !cur.is_empty() && used + wi > style.width {
            blocks.push(std::mem::take(&mut cur));
            used = fixed;
        }
        cur.push(i);
        used += wi + gap;
    }
    if !cur.is_empty() || blocks.is_empty() {
        blocks.push(cur);
    }
    let mut out = String::new();
    for (b, cols) in blocks.iter().enumerate() {
        if b > 0 {
            out.push('\n');
        }
        let sel: Vec<usize> = (0..keep).chain(cols.iter().copied()).collect();
        let part: Vec<Vec<Cell>> = rows
            .iter()
            .map(|r| {
                sel.iter()
                    .map(|&i| r.get(i).cloned().unwrap_or_default())
                    .collect()
            })
            .collect();
        let right: Vec<usize> = sel
            .iter()
            .enumerate()
            .filter(|(_, c)| right.contains(c))
            .map(|(i, _)| i)
            .collect();
        out.push_str(&grid(indent, &part, &right, gap, style));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_remembered_layout_is_the_layout_of_the_same_table() {
        use crate::fit::Paint;
        let style = Style {
            color: false,
            width: 60,
        };
        let rows = |t: &str| {
            vec![
                vec![Cell::new("GPU0"), Cell::new(t)],
                vec![Cell::new("GPU1"), Cell::paint(t, Paint::Bold)],
            ]
        };
        for t in [
            "NVL",
            "a long cell that wraps across the narrow width of the table",
            "",
        ] {
            let rows = rows(t);
            let fresh = Spec::new("  ", &["GPU", "Path"], &rows, &[], style).fitted();
            assert_eq!(
                table_aligned("  ", &["GPU", "Path"], &rows, &[], style),
                fresh
            );
            // From the memo this time.
            assert_eq!(
                table_aligned("  ", &["GPU", "Path"], &rows, &[], style),
                fresh
            );
        }
        // Tables that differ only in where their text is cut, or in a cell's paint or the
        // alignment, have different keys.
        let one = vec![vec![Cell::new("ab"), Cell::new("c")]];
        let two = vec![vec![Cell::new("a"), Cell::new("bc")]];
        assert_ne!(
            Spec::new("", &[], &one, &[], style).key(),
            Spec::new("", &[], &two, &[], style).key()
        );
        let bold = vec![vec![Cell::paint("ab", Paint::Bold), Cell::new("c")]];
        assert_ne!(
            Spec::new("", &[], &one, &[], style).key(),
            Spec::new("", &[], &bold, &[], style).key()
        );
        assert_ne!(
            Spec::new("", &[], &one, &[1], style).key(),
            Spec::new("", &[], &one, &[], style).key()
        );
        assert_ne!(
            Spec::new("", &["ab", "c"], &[], &[], style).key(),
            Spec::new("", &["a", "bc"], &[], &[], style).key()
        );
    }

    #[test]
    fn a_document_cut_into_pieces_is_fitted_like_one() {
        let line =
            "GPU0 ↔ NIC0: a long line of words that has to wrap at the width of eighty columns";
        let text: String = (0..40).map(|i| format!("{i} {line}\n\n")).collect();
        let mut whole = String::new();
        document_lines(&text, 40, &mut whole);
        for bytes in [1, 7, 100, 333, 1 << 20] {
            let pieces = line_pieces(&text, bytes);
            assert_eq!(pieces.join("\n"), text, "{bytes}");
            let mut cut = String::new();
            for (i, p) in pieces.iter().enumerate() {
                if i > 0 {
                    cut.push('\n');
                }
                document_lines(p, 40, &mut cut);
            }
            assert_eq!(cut, whole, "{bytes}");
        }
        assert_eq!(document(&text, 40), whole);
    }

    use super::*;

    fn st(width: usize) -> Style {
        Style {
            color: false,
            width,
        }
    }

    #[test]
    fn lines_wrap_at_spaces_with_an_indent_and_keep_words_whole() {
        let line = "  Channel 00/02 : 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17";
        let w = wrap(line, 30, 4);
        assert!(w.iter().all(|l| l.len() <= 30), "{w:?}");
        assert!(w[1].starts_with("      ") && !w[1].starts_with("       "));
        let words: Vec<&str> = w.iter().flat_map(|l| l.split_whitespace()).collect();
        assert_eq!(words, line.split_whitespace().collect::<Vec<_>>());
        assert_eq!(wrap("short", 30, 4), vec!["short"]);
        // A word longer than the width is left whole.
        let long = format!("  {} x", "9".repeat(40));
        assert_eq!(wrap(&long, 20, 4)[0], format!("  {}", "9".repeat(40)));
    }

    #[test]
    fn long_paths_break_after_a_slash() {
        let text = "read (/work/wt/termfit/fixtures/matrices/fastdeploy-8xa100-sxm4-40gb.txt) ok";
        let w = wrap_prefixed("  ", "    ", text, 40);
        assert!(w.iter().all(|l| l.len() <= 40), "{w:?}");
        let joined: String = w.iter().map(|l| l.trim()).collect::<Vec<_>>().join("");
        assert_eq!(joined.replace(' ', ""), text.replace(' ', ""));
        // Without a slash a long word stays whole.
        let n = "9".repeat(50);
        assert_eq!(wrap_prefixed("", "  ", &n, 40), vec![n.clone()]);
        assert_eq!(path_pieces("a/b", 40), vec!["a/b"]);
    }

    #[test]
    fn colour_takes_no_width() {
        let s = Style {
            color: true,
            width: 100,
        };
        assert_eq!(visible_width(&s.red("abc")), 3);
        assert_eq!(visible_width("→ ×"), 3);
        assert_eq!(fit_len("→ ×"), 6);
        assert_eq!(fit_len(&s.red("→")), 3);
    }

    #[test]
    fn tables_align_wrap_and_colour_without_moving_columns() {
        let rows = vec![
            vec!["0".into(), "a b c d e f g h i j k l".into()],
            vec![Cell::paint("10", Paint::Green), "z".into()],
        ];
        let t = table("  ", &["N", "Text"], &rows, st(100));
        assert_eq!(t, "  N   Text\n  0   a b c d e f g h i j k l\n  10  z\n");
        let narrow = table("  ", &["N", "Text"], &rows, st(14));
        assert!(narrow.lines().all(|l| l.len() <= 14), "{narrow}");
        let arrows = vec![vec!["0".into(), "a → b → c → d → e".into()]];
        let a = table("", &["N", "Text"], &arrows, st(14));
        assert!(a.lines().all(|l| l.len() <= 14), "{a}");
        assert!(narrow.lines().count() > 3);
        let col = table(
            "  ",
            &["N", "Text"],
            &rows,
            Style {
                color: true,
                width: 100,
            },
        );
        assert!(col.contains("\x1b[32m10\x1b[0m"), "{col:?}");
        let plain: String = col.lines().map(|l| format!("{}\n", strip(l))).collect();
        assert_eq!(plain, t);
    }

    fn strip(s: &str) -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("\x1b[") {
            out.push_str(&rest[..i]);
            let after = &rest[i..];
            rest = &after[after.find('m').unwrap() + 1..];
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn matrices_split_into_blocks_that_repeat_row_labels() {
        let rows: Vec<Vec<Cell>> = (0..3)
            .map(|r| {
                (0..10)
                    .map(|c| {
                        Cell::new(if c == 0 {
                            format!("R{r}")
                        } else {
                            format!("C{c:02}")
                        })
                    })
                    .collect()
            })
            .collect();
        let one = column_blocks("", &rows, 1, &[], 2, st(100));
        assert_eq!(one.lines().count(), 3);
        let split = column_blocks("", &rows, 1, &[], 2, st(20));
        assert!(split.lines().all(|l| l.chars().count() <= 20), "{split}");
        assert_eq!(split.matches("R1").count(), split.split("\n\n").count());
        for c in 1..10 {
            assert_eq!(split.matches(&format!("C{c:02}")).count(), 3);
        }
    }
}
