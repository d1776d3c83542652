//! Dispatch: one module per subcommand turns its flags into library requests and renders the
//! answer; this module runs the one asked for and turns failures into the contract's one-line
//! errors and exit codes.

mod calibrate;
mod diagnose;
mod diagnose_logs;
mod diagnose_results;
mod diff;
mod fleet;
mod hang;
mod meta;
mod plan;
mod report;
mod show;
mod snapshot;
mod verify;
mod xml;

use crate::cli::{Cli, Command};
use crate::error::{self, Exit};
use crate::output::say;
use crate::util::{Style, escape_controls, use_color};
use anyhow::Result;
use clap::{CommandFactory, Parser};

pub fn run(cli: Cli) -> Result<i32> {
    topo_source::atomic::install_signal_cleanup();
    let style = Style {
        color: use_color(&cli.color),
        width: crate::util::text_width(true),
    };
    match &cli.command {
        Command::Show(a) => show::run(a, style)?,
        Command::Plan(a) => plan::run(a, style)?,
        Command::Xml(a) => xml::run(a, style)?,
        Command::Snapshot(a) => snapshot::run(a)?,
        Command::Diagnose(a) => match &a.fleet {
            Some(dir) => return fleet::run(a, dir, style),
            None if a.format == crate::cli::DiagnoseFormat::Html => {
                return Err(crate::error::usage(
                    "topo diagnose --format html is for --fleet DIR",
                    "for one machine, write the page with topo report -o report.html (same inputs)",
                ));
            }
            None if !a.hang.is_empty() => return hang::run(a, style),
            None => return diagnose::run(a, style),
        },
        Command::Diff(a) => return diff::run(a, style),
        Command::Report(a) => report::run(a)?,
        Command::Verify(a) => return verify::run(a, style),
        Command::Calibrate(a) => calibrate::run(a, style)?,
        Command::Worker => worker()?,
        Command::Completions(a) => meta::completions(a)?,
        Command::Man(a) => meta::man(a)?,
        Command::Help(a) => meta::help(a)?,
    }
    Ok(0)
}

/// A rank process of `topo verify --launch processes`: runs its part and exits.
fn worker() -> Result<()> {
    // Which backend the worker runs is in its environment (`TOPO_RT_BACKEND`).
    if topo_runtime::job::worker_main()? {
        return Ok(());
    }
    Err(error::usage(
        "topo worker runs a rank of topo verify --launch processes",
        "run topo verify --launch processes instead",
    ))
}

/// The subcommands clap knows, for naming the one a failed command line was meant for.
fn subcommand_names() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect()
}

/// Clap's multi-line usage error as the contract's `error:` line and a `hint:` line: its
/// suggestion or list of possible values when it has one, else where the options are listed.
fn clap_error_lines(rendered: &str) -> (String, String) {
    let mut lines = rendered.lines().map(str::trim);
    let first = lines.next().unwrap_or("error: bad arguments").to_string();
    let mut hint: Option<String> = None;
    let mut usage: Option<String> = None;
    for l in lines {
        if let Some(tip) = l.strip_prefix("tip: ") {
            hint.get_or_insert_with(|| tip.to_string());
        } else if let Some(values) = l
            .strip_prefix("[possible values: ")
            .and_then(|v| v.strip_suffix(']'))
        {
            hint.get_or_insert_with(|| format!("possible values: {values}"));
        } else if let Some(u) = l.strip_prefix("Usage: ") {
            // `topo show [OPTIONS]`: the command words before the first placeholder.
            let cmd: Vec<&str> = u
                .split_whitespace()
                .take_while(|w| !w.starts_with(['[', '<', '-']))
                .collect();
            usage = Some(cmd.join(" "));
        }
    }
    let hint = hint.unwrap_or_else(|| {
        let cmd = usage.unwrap_or_else(|| {
            let names = subcommand_names();
            let sub = std::env::args()
                .skip(1)
                .find(|a| names.iter().any(|n| n == a));
            match sub {
                Some(s) => format!("topo {s}"),
                None => "topo".into(),
            }
        });
        format!("run '{cmd} --help' for the options")
    });
    (first, hint)
}

/// Parses arguments, runs, prints errors as one line, and returns the exit code.
/// `TOPO_READ_TIMEOUT` (seconds): how long a pipe or FIFO input may take to reach its end
/// (docs/input-limits.md); the library's default otherwise.
fn stream_deadline_from_env() -> anyhow::Result<()> {
    let Some(v) = std::env::var_os("TOPO_READ_TIMEOUT") else {
        return Ok(());
    };
    let secs = v
        .to_str()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
        .ok_or_else(|| {
            error::usage(
                format!(
                    "TOPO_READ_TIMEOUT={}: not a number of seconds",
                    v.to_string_lossy()
                ),
                "set it to a number of seconds above 0 and at most 86400, or unset it",
            )
        })?;
    topo_source::read::set_stream_deadline(std::time::Duration::from_secs_f64(secs));
    Ok(())
}

pub fn main_entry() -> i32 {
    crate::output::note_closed_stdout();
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        say!("error: internal error: {}{at}", escape_controls(&msg));
        say!("hint: this is a bug in topo; please report it with the command line that caused it");
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            {
                let _ = e.print();
                return if e.use_stderr() {
                    Exit::Usage as i32
                } else {
                    0
                };
            }
            // A vocabulary flag's own line and hint, as the command's other errors read.
            if let Some(bad) =
                std::error::Error::source(&e).and_then(|s| s.downcast_ref::<crate::cli::BadValue>())
            {
                crate::output::say_fitted("error:", &escape_controls(&bad.line));
                crate::output::say_fitted("hint:", &escape_controls(&bad.hint));
                return Exit::Usage as i32;
            }
            let (line, hint) = clap_error_lines(&e.render().to_string());
            let line = escape_controls(&line);
            match line.strip_prefix("error: ") {
                Some(rest) => crate::output::say_fitted("error:", rest),
                None => say!("{line}"),
            }
            crate::output::say_fitted("hint:", &escape_controls(&hint));
            return Exit::Usage as i32;
        }
    };
    if let Err(err) = stream_deadline_from_env() {
        let r = error::report(&err);
        crate::output::say_fitted("error:", &escape_controls(&r.line));
        if let Some(h) = r.hint {
            crate::output::say_fitted("hint:", &escape_controls(&h));
        }
        return r.exit as i32;
    }
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(code)) => code,
        Ok(Err(err)) => {
            let r = error::report(&err);
            if r.exit == Exit::BrokenPipe {
                return r.exit as i32;
            }
            // The one place errors reach the user: file names and values quoted from input
            // are escaped here, so none can forge a line or drive the terminal.
            crate::output::say_fitted("error:", &escape_controls(&r.line));
            if let Some(h) = r.hint {
                crate::output::say_fitted("hint:", &escape_controls(&h));
            }
            r.exit as i32
        }
        Err(_) => Exit::Internal as i32,
    }
}
