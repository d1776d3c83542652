//! Small shared helpers of the commands: terminal width and colour, output escaping, host
//! name. Text styling, size strings and the parallel helpers are the renderers' (`topo_report`).

use std::io::IsTerminal;
pub use topo_source::escape::escape_controls;
use topo_source::escape::push_escaped;

pub use topo_report::util::{drop_aside, human_size};
pub use topo_report::{DEFAULT_WIDTH, Style};
pub use topo_vocab::parse_size;

/// Whether to colour output: `always`/`never` win; `auto` colours only a terminal and
/// respects `NO_COLOR` (any non-empty value).
pub fn use_color(choice: &str) -> bool {
    match choice {
        "always" => true,
        "never" => false,
        _ => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::io::stdout().is_terminal()
        }
    }
}

/// The width text views fit when nothing says otherwise (stdout is a file or a pipe).
/// Below this no table or matrix can be laid out legibly; a smaller `COLUMNS` is raised to it.
pub const MIN_WIDTH: usize = 40;

/// The width text output fits: `COLUMNS` when set to a number, else the terminal's width
/// when stdout is a terminal, else [`DEFAULT_WIDTH`]. `to_terminal` is false when the text
/// goes to a file (`-o`), whose width is then `COLUMNS` or the default.
pub fn text_width(to_terminal: bool) -> usize {
    let columns = std::env::var("COLUMNS").ok();
    let tty = || {
        (to_terminal && std::io::stdout().is_terminal())
            .then(|| terminal_size::terminal_size_of(std::io::stdout()))
            .flatten()
            .map(|(w, _)| usize::from(w.0))
    };
    pick_width(columns.as_deref(), tty)
}

/// The width messages on stderr fit where stderr is a terminal (`None` elsewhere: there each
/// message stays one line, as the CLI contract promises scripts): `COLUMNS`, else the
/// terminal's width.
pub fn stderr_width() -> Option<usize> {
    let err = std::io::stderr();
    err.is_terminal().then(|| {
        let tty =
            || terminal_size::terminal_size_of(std::io::stderr()).map(|(w, _)| usize::from(w.0));
        pick_width(std::env::var("COLUMNS").ok().as_deref(), tty)
    })
}

fn pick_width(columns: Option<&str>, tty: impl FnOnce() -> Option<usize>) -> usize {
    columns
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&w| w > 0)
        .or_else(tty)
        .filter(|&w| w > 0)
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// The style for a file: no colour, the width of `COLUMNS` or the default.
pub fn file_style() -> Style {
    Style {
        color: false,
        width: text_width(false),
    }
}

/// A whole text document (a view, a plan) made safe for a terminal, as a last line of
/// defence behind [`escape_controls`] on the values themselves: line breaks and tabs stay,
/// and with `color` on so do topo's own SGR colour codes (`ESC [ digits m`); every other
/// control character, and every bidirectional control, is escaped.
pub fn escape_document(text: &str, color: bool) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| topo_source::escape::needs_escape(c) && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b'
            && color
            && let Some(n) = sgr_len(rest)
        {
            out.push_str(&rest[..n]);
            rest = &rest[n..];
            continue;
        }
        if unsafe_char(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out.into()
}

/// Length of a colour code `ESC [ [0-9;]* m` at the start of `s`, the only sequence [`Style`]
/// writes.
fn sgr_len(s: &str) -> Option<usize> {
    let body = s.strip_prefix("\x1b[")?;
    let n = body
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b';')
        .count();
    (body.as_bytes().get(n) == Some(&b'm')).then_some(2 + n + 1)
}

/// For a value whose life ends as the process does: skips freeing it piece by piece, which
/// the OS does at once when the process exits (the same choice rustc makes for its
/// compilation session). Use only for what a command holds after its output is written.
pub fn release_at_exit<T>(v: T) {
    std::mem::forget(v);
}

/// This host's name (the kernel's), `localhost` when it cannot be read: `%h` in snapshot's
/// `-o`, the calibration cache's file name, the rank lines of `verify --format nccl-tests`.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible() {
        assert_eq!(escape_controls("mlx5_0"), "mlx5_0");
        assert_eq!(
            escape_controls("a\x1b]0;pwned\x07b\nerror: x\r\t\x7f\u{9b}2J"),
            "a\\x1b]0;pwned\\x07b\\nerror: x\\r\\t\\x7f\\u{9b}2J"
        );
        assert_eq!(escape_controls("é \\x1b"), "é \\x1b");
    }

    #[test]
    fn documents_keep_lines_and_their_own_colours() {
        let red = Style {
            color: true,
            ..Style::default()
        }
        .red("x");
        let doc = format!("{red}\n\tnot\x1b[2Jthis\x1b]0;t\x07\n");
        assert_eq!(
            escape_document(&doc, true),
            "\x1b[31mx\x1b[0m\n\tnot\\x1b[2Jthis\\x1b]0;t\\x07\n"
        );
        assert_eq!(escape_document(&red, false), "\\x1b[31mx\\x1b[0m");
        assert_eq!(escape_document("a\nb\n", false), "a\nb\n");
        assert_eq!(
            escape_document("gpu\u{202e}0\u{2069}\n", false),
            "gpu\\u{202e}0\\u{2069}\n"
        );
    }

    #[test]
    fn width_from_columns_then_terminal_then_default() {
        assert_eq!(pick_width(Some("132"), || Some(80)), 132);
        assert_eq!(pick_width(Some(" 90 "), || None), 90);
        assert_eq!(pick_width(Some("wide"), || Some(80)), 80);
        assert_eq!(pick_width(Some("0"), || None), DEFAULT_WIDTH);
        assert_eq!(pick_width(None, || Some(211)), 211);
        assert_eq!(pick_width(None, || None), DEFAULT_WIDTH);
        assert_eq!(pick_width(Some("10"), || None), MIN_WIDTH);
    }

    #[test]
    fn sizes_like_nccl_tests() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("1K").unwrap(), 1024);
        assert_eq!(parse_size("16M").unwrap(), 16 << 20);
        assert_eq!(parse_size("4G").unwrap(), 4 << 30);
        assert_eq!(parse_size("4g").unwrap(), 4 << 30);
        assert_eq!(parse_size("2KiB").unwrap(), 2048);
        for bad in [
            "",
            "K",
            "1X",
            "-1",
            "1.5M",
            "99999999999999999999",
            "16777216T",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
