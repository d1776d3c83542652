//! Where output goes: stdout or the `-o` file, and one-line notes on stderr.

use crate::error::{self, Exit, io_reason};
use crate::util::{Style, escape_controls};
use anyhow::Result;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// `eprintln!` that ignores a failed write: with stderr a closed pipe, `eprintln!` panics,
/// and the panic hook's own message then panics again and aborts the process.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

/// Writes `text` to the file (whole or not at all, see `topo_source::atomic`) or stdout.
/// Output that does not all reach stdout is an error: a closed stdout or a full disk is one
/// `error:` line (exit 2); a reader that closed the pipe early exits quietly with SIGPIPE's
/// status (see [`Exit::BrokenPipe`]).
pub fn emit(output: Option<&PathBuf>, text: &str) -> Result<()> {
    emit_with(output, |w| w.write_all(text.as_bytes()))
}

/// [`emit`] for output written piece by piece (a large JSON document streamed as it is
/// encoded, never held whole in memory): `fill` writes into a buffered writer.
pub fn emit_with(
    output: Option<&PathBuf>,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    match output.filter(|p| p.as_os_str() != "-") {
        Some(p) => topo_source::atomic::write_file(p, |w| {
            let mut w = std::io::BufWriter::with_capacity(1 << 16, w);
            fill(&mut w)?;
            w.flush()
        })
        .map_err(|e| {
            error::usage(
                format!("cannot write {}: {}", p.display(), io_reason(&e)),
                "pass -o a file in a folder that exists and is writable, or leave -o out for stdout",
            )
        }),
        None => {
            if STDOUT_CLOSED.load(Ordering::Relaxed) {
                return Err(stdout_failure("it is closed"));
            }
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            match fill(&mut out).and_then(|_| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    Err(error::Failure::new(Exit::BrokenPipe, "stdout: broken pipe").into())
                }
                Err(e) => Err(stdout_failure(&io_reason(&e))),
                Ok(()) => Ok(()),
            }
        }
    }
}

fn stdout_failure(why: &str) -> anyhow::Error {
    error::Failure::new(Exit::Usage, format!("cannot write to stdout: {why}")).into()
}

/// Whether stdout was closed when topo started (`topo show >&-`). Rust's runtime puts
/// `/dev/null` on a closed standard descriptor before `main`, read-write, just as a parent
/// discarding output does (Python's `subprocess.DEVNULL`, CI runners, service managers), so
/// nothing seen from `main` tells the two apart: [`probe_stdout`] looks before the runtime
/// does. A discarded stdout is written and the output vanishes with exit 0; a closed one is
/// an error, since the output would vanish where the caller expected it.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Runs from `.init_array`, which the loader calls before the runtime's start-up code.
#[cfg(target_os = "linux")]
extern "C" fn probe_stdout() {
    // SAFETY: F_GETFD on any number only reads descriptor flags; -1 (EBADF) means closed.
    if unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1 {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static PROBE_STDOUT: extern "C" fn() = probe_stdout;

/// Also catches a stdout closed where the constructor did not run (another platform).
pub fn note_closed_stdout() {
    use std::os::fd::AsFd;
    // Duplicating a descriptor fails (EBADF) exactly when it is not open.
    if std::io::stdout().as_fd().try_clone_to_owned().is_err() {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// `prefix text` on stderr: wrapped to the terminal's width with a two-space indent where
/// stderr is a terminal, one line elsewhere (scripts read `error:`, `hint:` and `warning:`
/// lines whole, see the CLI contract).
pub fn say_fitted(prefix: &str, text: &str) {
    match crate::util::stderr_width() {
        Some(width) => {
            for line in topo_report::fit::wrap_prefixed(&format!("{prefix} "), "  ", text, width) {
                say!("{line}");
            }
        }
        None => say!("{prefix} {text}"),
    }
}

/// The style for stderr: colour only where stderr itself is a terminal.
pub fn stderr_style(style: Style) -> Style {
    Style {
        color: style.color && std::io::stderr().is_terminal(),
        ..style
    }
}

/// A `warning:` line on stderr.
pub fn warn(style: Style, text: &str) {
    say_fitted(
        &stderr_style(style).yellow("warning:"),
        &escape_controls(text),
    );
}

/// Topology warnings on stderr, for commands whose output has no place for them.
pub fn print_warnings(topo: &topo_model::Topology, style: Style) {
    for w in topo_report::warnings::collapse_warnings(&topo.warnings) {
        warn(style, &w);
    }
}

/// Says that `--env` was given to a command that describes hardware and does not apply it.
pub fn warn_unused_env(cmd: &str, env: &[(String, String)], style: Style) {
    if env.is_empty() {
        return;
    }
    let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    warn(
        style,
        &format!(
            "topo {cmd} describes the hardware and does not apply --env ({}); topo plan does",
            keys.join(", ")
        ),
    );
}
