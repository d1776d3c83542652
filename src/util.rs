//! Small shared helpers: size strings, output styling.

use std::io::IsTerminal;
pub use topo_source::escape::escape_controls;
use topo_source::escape::push_escaped;

pub use topo_vocab::parse_size;

/// Human size with binary units, as nccl-tests users read them (`1K`, `16M`, `1.5G`).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (m, u) in UNITS {
        if bytes >= m {
            let v = bytes as f64 / m as f64;
            return if bytes.is_multiple_of(m) {
                format!("{}{u}", bytes / m)
            } else {
                format!("{v:.1}{u}")
            };
        }
    }
    format!("{bytes}")
}

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
pub const DEFAULT_WIDTH: usize = 100;
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

/// ANSI styling that collapses to plain text when colour is off, and the width text fits.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    pub color: bool,
    /// Columns every line of a text view fits (see [`text_width`]).
    pub width: usize,
}

impl Default for Style {
    fn default() -> Style {
        Style {
            color: false,
            width: DEFAULT_WIDTH,
        }
    }
}

impl Style {
    /// The style for a file: no colour, the width of `COLUMNS` or the default.
    pub fn file() -> Style {
        Style {
            color: false,
            width: text_width(false),
        }
    }

    fn wrap(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    pub fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    pub fn green(&self, s: &str) -> String {
        self.wrap("32", s)
    }
    pub fn yellow(&self, s: &str) -> String {
        self.wrap("33", s)
    }
    pub fn red(&self, s: &str) -> String {
        self.wrap("31", s)
    }
    pub fn cyan(&self, s: &str) -> String {
        self.wrap("36", s)
    }
    pub fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
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

/// `f(i)` for every `i` in `0..n`, in order. From `min_parallel` items on, runs of
/// consecutive items go to the machine's cores (at most 8); the result does not depend on
/// how many there are.
pub fn map_parallel<R: Send>(
    n: usize,
    min_parallel: usize,
    f: impl Fn(usize) -> R + Sync,
) -> Vec<R> {
    let workers = cores();
    if n < min_parallel.max(2) || workers < 2 {
        return (0..n).map(f).collect();
    }
    let per = n.div_ceil(workers);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(per)
            .map(|start| s.spawn(move || (start..(start + per).min(n)).map(f).collect::<Vec<R>>()))
            .collect();
        let mut out = Vec::with_capacity(n);
        for h in handles {
            out.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        out
    })
}

/// `part(i, out)` for every `i` in `0..n`, appended in order. From `min_parallel` parts on,
/// runs of consecutive parts go to the machine's cores ([`map_parallel`]), each into a string
/// of its own: the text is the same whatever the number of cores.
pub fn concat_parallel(
    n: usize,
    min_parallel: usize,
    part: impl Fn(usize, &mut String) + Sync,
) -> String {
    if n < min_parallel.max(2) {
        let mut out = String::new();
        (0..n).for_each(|i| part(i, &mut out));
        return out;
    }
    let per = n.div_ceil(cores());
    map_parallel(n.div_ceil(per), 2, |run| {
        let mut out = String::new();
        (run * per..((run + 1) * per).min(n)).for_each(|i| part(i, &mut out));
        out
    })
    .concat()
}

/// Cores to spread work over: at most 8.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |c| c.get().min(8))
}

/// Frees `v` on a thread of its own, so the caller's next step (writing the document) runs
/// on one core while the other returns the memory: at 32,768 GPUs the analysis is some
/// 300 MB in millions of allocations. The process may exit first; the OS then takes it all.
pub fn drop_aside<T: Send + 'static>(v: T) {
    // Where no thread can be had, spawn drops the closure, and `v` with it, right here.
    let _ = std::thread::Builder::new()
        .name("topo-free".into())
        .spawn(move || drop(v));
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
    fn parallel_concatenation_keeps_the_order() {
        let part = |i: usize, out: &mut String| out.push_str(&format!("{i},"));
        let serial: String = (0..1000).map(|i| format!("{i},")).collect();
        assert_eq!(concat_parallel(1000, 1, part), serial);
        assert_eq!(concat_parallel(1000, 5000, part), serial);
        assert_eq!(concat_parallel(3, 1, part), "0,1,2,");
        assert_eq!(concat_parallel(0, 1, part), "");
        let serial: Vec<usize> = (0..1001).map(|i| i * i).collect();
        assert_eq!(map_parallel(1001, 1, |i| i * i), serial);
        assert_eq!(map_parallel(1001, 5000, |i| i * i), serial);
        assert!(map_parallel(0, 1, |i| i).is_empty());
    }

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

    #[test]
    fn human_sizes() {
        assert_eq!(human_size(8), "8");
        assert_eq!(human_size(1024), "1K");
        assert_eq!(human_size(1536), "1.5K");
        assert_eq!(human_size(16 << 20), "16M");
    }
}
