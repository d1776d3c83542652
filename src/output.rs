//! Where output goes: stdout or the `-o` file, and one-line notes on stderr.

use crate::error::{self, Exit, io_reason};
use crate::util::Style;
use anyhow::Result;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// `eprintln!` that ignores a failed write: with stderr a closed pipe, `eprintln!` panics,
/// and the panic hook's own message then panics again and aborts the process.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

/// Writes `text` to the file (whole or not at all, see `topo_source::atomic`) or stdout. A closed stdout pipe (`topo show | head`) is not an error.
pub fn emit(output: Option<&PathBuf>, text: &str) -> Result<()> {
    match output {
        Some(p) => topo_source::atomic::write_file(p, |w| w.write_all(text.as_bytes())).map_err(|e| {
            error::usage(
                format!("cannot write {}: {}", p.display(), io_reason(&e)),
                "pass -o a file in a folder that exists and is writable, or leave -o out for stdout",
            )
        }),
        None => {
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                Err(e) => Err(error::Failure::new(
                    Exit::Usage,
                    format!("cannot write to stdout: {}", io_reason(&e)),
                )
                .into()),
                Ok(()) => Ok(()),
            }
        }
    }
}

/// The style for stderr: colour only where stderr itself is a terminal.
pub fn stderr_style(style: Style) -> Style {
    Style {
        color: style.color && std::io::stderr().is_terminal(),
    }
}

/// A `warning:` line on stderr.
pub fn warn(style: Style, text: &str) {
    say!("{} {text}", stderr_style(style).yellow("warning:"));
}

/// Topology warnings on stderr, for commands whose output has no place for them.
pub fn print_warnings(topo: &topo_model::Topology, style: Style) {
    for w in &topo.warnings {
        warn(style, w);
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
