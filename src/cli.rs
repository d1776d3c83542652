//! Command-line definitions and dispatch. Parsing only: every command's work is in the library.

use crate::error::{self, Exit};
use crate::source::SourceSpec;
use crate::util::{Style, escape_controls, escape_document, use_color};
use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// `eprintln!` that ignores a failed write: with stderr a closed pipe, `eprintln!` panics,
/// and the panic hook's own message then panics again and aborts the process.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

#[derive(Parser, Debug)]
#[command(
    name = "topo",
    version,
    about = "How are the GPUs in this box connected, what will NCCL do on it, and how fast should a collective be",
    propagate_version = true
)]
pub struct Cli {
    /// Colour output: auto (terminal only, honours NO_COLOR), always, never.
    #[arg(long, global = true, default_value = "auto", value_parser = ["auto", "always", "never"])]
    pub color: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show the machine: GPUs, NVLink/NVSwitch, PCIe tree, NUMA, NICs.
    Show(ShowArgs),
    /// What NCCL will do: paths, transports, channels, rings/trees, algorithm and protocol per size.
    Plan(PlanArgs),
    /// Write NCCL_TOPO_FILE-compatible topology XML.
    Xml(XmlArgs),
    /// Capture this machine (sysfs, NVML answers, environment) for offline use.
    Snapshot(SnapshotArgs),
}

/// Where the topology comes from (shared by show, plan, xml).
#[derive(Args, Debug, Clone, Default)]
pub struct SourceArgs {
    /// An NCCL topology XML, a snapshot (folder or .tar.gz from `topo snapshot`) or a profile YAML.
    #[arg(long, value_name = "PATH")]
    pub from: Option<PathBuf>,
    /// A built-in hardware profile (dgx-h100, hgx-h200, dgx-a100, dgx-b200, pcie-8x-l40s, ...).
    #[arg(long, value_name = "NAME", conflicts_with = "from")]
    pub profile: Option<String>,
    /// Replicate the node N times behind its NICs (what-if for N nodes; at most 4096).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub nodes: Option<usize>,
    /// An environment setting the analysis should assume (repeatable), e.g. NCCL_P2P_DISABLE=1.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Read sysfs/procfs under this folder instead of / (live discovery only).
    #[arg(long, value_name = "DIR", env = "TOPO_SYSFS_ROOT", hide = true, value_parser = sysfs_root)]
    pub sysfs_root: Option<PathBuf>,
}

/// `--sysfs-root` / `TOPO_SYSFS_ROOT`: an empty value (`TOPO_SYSFS_ROOT=`) means unset, as
/// for most environment switches, instead of clap's "a value is required for --sysfs-root".
fn sysfs_root(s: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(s))
}

/// An empty root path counts as none: read this machine.
fn non_empty(p: &Option<PathBuf>) -> Option<PathBuf> {
    p.clone().filter(|p| !p.as_os_str().is_empty())
}

impl SourceArgs {
    pub fn spec(&self) -> Result<SourceSpec> {
        if let Some(0) = self.nodes {
            return Err(error::usage(
                "--nodes must be at least 1",
                "pass --nodes 2 for two nodes",
            ));
        }
        if let Some(n) = self.nodes
            && n > crate::source::MAX_NODES
        {
            return Err(error::usage(
                format!(
                    "--nodes {n}: at most {} nodes are modelled",
                    crate::source::MAX_NODES
                ),
                format!("pass --nodes {} or fewer", crate::source::MAX_NODES),
            ));
        }
        Ok(SourceSpec {
            from: self.from.clone(),
            profile: self.profile.clone(),
            nodes: self.nodes,
            sysfs_root: non_empty(&self.sysfs_root),
            escape_text: false,
        })
    }

    /// `--env` settings parsed into (key, value) pairs.
    pub fn env_overrides(&self) -> Result<Vec<(String, String)>> {
        self.env
            .iter()
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
                _ => Err(error::usage(
                    format!("bad --env '{kv}': expected KEY=VALUE"),
                    "for example --env NCCL_P2P_LEVEL=NVL",
                )),
            })
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ShowView {
    Summary,
    Matrix,
    Pci,
    Paths,
    Dot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DataFormat {
    Text,
    Json,
    Yaml,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[arg(long, value_enum, default_value = "summary")]
    pub view: ShowView,
    #[arg(long, value_enum, default_value = "text")]
    pub format: DataFormat,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    Text,
    Json,
    Yaml,
    TunerCsv,
    NcclGraph,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv, or all.
    #[arg(long, default_value = "allreduce")]
    pub collective: String,
    /// Algorithms to consider, NCCL_ALGO grammar (auto = all): ring, tree, nvls, nvlstree, collnetdirect, collnetchain, pat.
    #[arg(long, default_value = "auto")]
    pub algo: String,
    /// Protocols to consider, NCCL_PROTO grammar (auto = all): ll, ll128, simple.
    #[arg(long, default_value = "auto")]
    pub proto: String,
    /// Smallest message size (nccl-tests syntax: 8, 1K, 16M, 4G).
    #[arg(
        short = 'b',
        long = "minbytes",
        default_value = "8",
        allow_hyphen_values = true
    )]
    pub min_bytes: String,
    /// Largest message size.
    #[arg(
        short = 'e',
        long = "maxbytes",
        default_value = "8G",
        allow_hyphen_values = true
    )]
    pub max_bytes: String,
    /// Multiplication factor between sizes.
    #[arg(
        short = 'f',
        long = "stepfactor",
        default_value = "2",
        allow_hyphen_values = true
    )]
    pub step_factor: u64,
    /// NCCL version to model (2.18 … 2.30); default: the NCCL found on this machine, else 2.28.
    #[arg(long, value_name = "V")]
    pub nccl_version: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: PlanFormat,
    /// How ranks map to processes: process-per-gpu (torchrun), process-per-host (one process,
    /// all GPUs), container-per-gpu (own host hash), container-per-gpu-hostid (common
    /// NCCL_HOSTID, private /dev/shm), container-per-gpu-shared (common host id and /dev/shm).
    #[arg(long, default_value = "process-per-gpu")]
    pub placement: String,
    /// Trace every figure to the rule and constant that produced it.
    #[arg(long)]
    pub explain: bool,
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct XmlArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// Output: a .tar.gz file, or a folder when the path ends with '/' or has no .tar.gz/.tgz suffix.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        default_value = "topo-snapshot.tar.gz"
    )]
    pub output: PathBuf,
    /// Read sysfs/procfs under this folder instead of / (for tests).
    #[arg(long, value_name = "DIR", env = "TOPO_SYSFS_ROOT", hide = true, value_parser = sysfs_root)]
    pub sysfs_root: Option<PathBuf>,
}

/// Writes `text` to the file or stdout. Output that does not all reach stdout is an error:
/// a closed stdout or a full disk is one `error:` line (exit 2); a reader that closed the
/// pipe early exits quietly with SIGPIPE's status (see [`Exit::BrokenPipe`]).
pub fn emit(output: Option<&PathBuf>, text: &str) -> Result<()> {
    use crate::source::io_reason;
    match output {
        Some(p) => std::fs::write(p, text).map_err(|e| {
            error::usage(
                format!("cannot write {}: {}", p.display(), io_reason(&e)),
                "pass -o a file in a folder that exists and is writable, or leave -o out for stdout",
            )
        }),
        None => {
            if STDOUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(stdout_failure("it is closed"));
            }
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
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

/// Whether stdout was closed when topo started (`topo show >&-`), looked at once before
/// anything is opened. Rust's runtime puts `/dev/null` on a closed standard descriptor at
/// start-up, so the output would vanish with exit 0; it opens it read-write, while a shell's
/// `> /dev/null` opens it write-only, which tells the two apart (Linux `/proc`).
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn note_closed_stdout() {
    use std::os::fd::AsFd;
    // Duplicating a descriptor fails (EBADF) exactly when it is not open.
    let closed = std::io::stdout().as_fd().try_clone_to_owned().is_err()
        || (std::fs::read_link("/proc/self/fd/1").is_ok_and(|p| p == Path::new("/dev/null"))
            && std::fs::read_to_string("/proc/self/fdinfo/1")
                .is_ok_and(|info| opened_read_write(&info)));
    STDOUT_CLOSED.store(closed, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `/proc/self/fdinfo/N` text says the descriptor is open read-write (`flags:` is
/// octal; O_ACCMODE is 3 and O_RDWR 2).
fn opened_read_write(fdinfo: &str) -> bool {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|flags| flags & 3 == 2)
}

pub fn run(cli: Cli) -> Result<i32> {
    let style = Style {
        color: use_color(&cli.color),
    };
    match cli.command {
        Command::Show(a) => {
            // show and xml describe hardware and do not apply --env, but a malformed one is
            // still a mistake worth stopping on.
            warn_unused_env("show", &a.source.env_overrides()?, style);
            let mut spec = a.source.spec()?;
            spec.escape_text = a.format == DataFormat::Text;
            let topo = crate::source::load(&spec)?;
            let style = if a.output.is_some() {
                Style::default()
            } else {
                style
            };
            let text = crate::report::show::render(&topo, a.view, a.format, style)?;
            let text = match a.format {
                DataFormat::Text => escape_document(&text, style.color),
                _ => text.as_str().into(),
            };
            emit(a.output.as_ref(), &text)?;
        }
        Command::Xml(a) => {
            warn_unused_env("xml", &a.source.env_overrides()?, style);
            let topo = crate::source::load(&a.source.spec()?)?;
            print_warnings(&topo, style);
            if topo.gpus().is_empty() {
                // A GPU-less NCCL_TOPO_FILE is valid XML but rarely what was meant.
                let style = Style {
                    color: style.color && std::io::stderr().is_terminal(),
                };
                say!(
                    "{} the topology has no GPU, so the XML lists none (NCCL adds GPUs it finds at run time)",
                    style.yellow("warning:")
                );
            }
            let text = crate::nccl::xml::write(&topo)?;
            // XML 1.0 allows no control characters but tab and line breaks; escaping the
            // others keeps the file valid and a terminal showing it safe.
            emit(a.output.as_ref(), &escape_document(&text, false))?;
        }
        Command::Snapshot(a) => {
            let root = non_empty(&a.sysfs_root).unwrap_or_else(|| PathBuf::from("/"));
            let summary = crate::source::snapshot::capture(&root, &a.output)?;
            say!("{}", escape_controls(&summary));
        }
        Command::Plan(a) => {
            let mut spec = a.source.spec()?;
            spec.escape_text = a.format == PlanFormat::Text;
            let topo = crate::source::load(&spec)?;
            let env = a.source.env_overrides()?;
            let style = if a.output.is_some() {
                Style::default()
            } else {
                style
            };
            let text = crate::plan::run(&topo, &a, &env, style)?;
            let text = match a.format {
                PlanFormat::Text => escape_document(&text, style.color),
                _ => text.as_str().into(),
            };
            emit(a.output.as_ref(), &text)?;
        }
    }
    Ok(0)
}

/// Says that `--env` was given to a command that describes hardware and does not apply it.
fn warn_unused_env(cmd: &str, env: &[(String, String)], style: Style) {
    if env.is_empty() {
        return;
    }
    let style = Style {
        color: style.color && std::io::stderr().is_terminal(),
    };
    let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    say!(
        "{} topo {cmd} describes the hardware and does not apply --env ({}); topo plan does",
        style.yellow("warning:"),
        escape_controls(&keys.join(", "))
    );
}

/// Topology warnings on stderr, for commands whose output has no place for them.
fn print_warnings(topo: &crate::model::Topology, style: Style) {
    let style = Style {
        color: style.color && std::io::stderr().is_terminal(),
    };
    for w in &topo.warnings {
        say!("{} {}", style.yellow("warning:"), escape_controls(w));
    }
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
            let sub = std::env::args()
                .skip(1)
                .find(|a| ["show", "plan", "xml", "snapshot"].contains(&a.as_str()));
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
pub fn main_entry() -> i32 {
    note_closed_stdout();
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
            let (line, hint) = clap_error_lines(&e.render().to_string());
            say!("{}", escape_controls(&line));
            say!("hint: {}", escape_controls(&hint));
            return Exit::Usage as i32;
        }
    };
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(Ok(code)) => code,
        Ok(Err(err)) => {
            let (exit, hint) = error::classify(&err);
            if exit == Exit::BrokenPipe {
                return exit as i32;
            }
            // The one place errors reach the user: file names and values quoted from input
            // are escaped here, so none can forge a line or drive the terminal.
            say!("error: {}", escape_controls(&error::one_line(&err)));
            if let Some(h) = hint {
                say!("hint: {}", escape_controls(&h));
            }
            exit as i32
        }
        Err(_) => 101,
    }
}
