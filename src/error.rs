//! Errors that reach the user: one line, an exit code, and where it helps a hint.
//!
//! The libraries return typed errors that say what kind of input was wrong; this is the only
//! place that words the fix in terms of topo's flags, and that decides exit codes: every code
//! but 0 is an [`Exit`], and README.md's "Exit codes" states each (a test holds the two equal).

use std::fmt;
use topo_nccl::ErrorKind as NcclKind;
use topo_source::ErrorKind as SourceKind;

pub use topo_source::error::{io_reason, one_line};

/// The exit codes live with the documents (`topo_documents::Exit`).
pub use topo_documents::Exit;

/// An error the binary itself raises (a bad flag value), with its exit code and hint.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl Failure {
    pub fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            message: message.into(),
            hint: None,
        }
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = Some(hint.into());
        self
    }
}

/// Bad usage or unreadable input (exit 2), with a hint line.
pub fn usage(message: impl Into<String>, hint: impl Into<String>) -> anyhow::Error {
    Failure::new(Exit::Usage, message).hint(hint).into()
}

/// What the user sees for an error: exit code, the `error:` line and the optional hint.
pub struct Report {
    pub exit: Exit,
    pub line: String,
    pub hint: Option<String>,
}

/// The first typed error in the chain decides the exit code and hint.
pub fn report(err: &anyhow::Error) -> Report {
    let line = one_line(err);
    for cause in err.chain() {
        if let Some(f) = cause.downcast_ref::<Failure>() {
            return Report {
                exit: f.exit,
                line,
                hint: f.hint.clone(),
            };
        }
        if let Some(e) = cause.downcast_ref::<topo_source::Error>() {
            return source_report(e, line);
        }
        if let Some(e) = cause.downcast_ref::<topo_runtime::RuntimeError>() {
            return Report {
                exit: runtime_exit(e),
                line,
                hint: runtime_hint(e).map(str::to_string),
            };
        }
        if let Some(e) = cause.downcast_ref::<topo_nccl::Error>() {
            return Report {
                exit: Exit::Usage,
                line,
                hint: nccl_hint(e),
            };
        }
    }
    Report {
        exit: Exit::Usage,
        line,
        hint: None,
    }
}

fn source_report(e: &topo_source::Error, line: String) -> Report {
    let (line, hint) = match e.kind {
        SourceKind::Replication { nodes, max_nodes } => (
            format!("--nodes {nodes}: {line}"),
            Some(format!("pass --nodes {max_nodes} or fewer")),
        ),
        kind => (line, source_hint(kind)),
    };
    Report {
        exit: Exit::Usage,
        line,
        hint,
    }
}

fn source_hint(kind: SourceKind) -> Option<String> {
    let s = match kind {
        SourceKind::Input => {
            "pass --from an NCCL topology XML, a snapshot folder or .tar.gz, or a profile YAML"
        }
        SourceKind::NotAFile => "save the input to a file first and pass --from that file",
        SourceKind::NcclXml => {
            "pass an NCCL topology XML (the format of NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE)"
        }
        SourceKind::CutFile => {
            "copy the file again whole, or dump it again on the machine (NCCL_TOPO_DUMP_FILE, or topo xml there)"
        }
        SourceKind::ProfileFile => "pass --from a profile YAML file",
        SourceKind::ProfileSchema => "see docs/profiles.md for the profile schema",
        SourceKind::UnknownProfile => {
            return Some(format!(
                "available profiles: {}; or pass your own file with --from FILE.yaml",
                topo_source::profile::builtin_names().join(", ")
            ));
        }
        SourceKind::Snapshot => "pass --from a folder or .tar.gz made by `topo snapshot`",
        SourceKind::TextFile => {
            "pass a text file: an NCCL_DEBUG=INFO log or `nvidia-smi topo -m` output"
        }
        SourceKind::TextTooLarge => "cut the log to the init part (up to `Init COMPLETE`)",
        SourceKind::LogWithoutTopology => {
            "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH, or use `topo diagnose --nccl-log` for the log and --from for the machine"
        }
        SourceKind::SmiMatrix => {
            "paste the whole output of `nvidia-smi topo -m`, header line (GPU0 GPU1 ...) included"
        }
        SourceKind::SysfsRoot => {
            "set TOPO_SYSFS_ROOT (or --sysfs-root) to a folder holding sys/ and proc/, or unset it to read this machine"
        }
        SourceKind::SnapshotOutput => "pass -o a new folder name, or a name ending in .tar.gz",
        SourceKind::SnapshotWrite => {
            "pass -o a path in a folder that exists and is writable, with room to spare"
        }
        SourceKind::HostTooLarge => {
            "pass a topology of one real machine (NCCL_TOPO_MAX_NODES is 640 in NCCL 2.29+)"
        }
        SourceKind::TooManyGpus => "pass a topology of fewer hosts",
        SourceKind::TooMuchWork => "pass a topology of one real machine",
        _ => return None,
    };
    Some(s.to_string())
}

/// A fault of the run itself exits 4; a request or launcher environment that cannot run
/// (a bad plan, a size past the limits, a launcher's variables) is bad input, 2.
fn runtime_exit(e: &topo_runtime::RuntimeError) -> Exit {
    use topo_runtime::RuntimeError as R;
    match e {
        R::PeerLost { .. } | R::Timeout { .. } | R::Rendezvous(_) | R::Device(_) | R::Io { .. } => {
            Exit::RuntimeFault
        }
        _ => Exit::Usage,
    }
}

fn runtime_hint(e: &topo_runtime::RuntimeError) -> Option<&'static str> {
    use topo_runtime::RuntimeError as R;
    Some(match e {
        R::Unsupported(_) => "the host backend runs --algo ring, tree or direct",
        R::PeerLost { .. } => {
            "a rank exited or was killed (check its output and dmesg for the OOM killer), then rerun"
        }
        R::Timeout { .. } => {
            "check that every rank was started (--ranks, WORLD_SIZE, SLURM_NTASKS) and can reach MASTER_ADDR, or raise --timeout"
        }
        R::Rendezvous(_) => {
            "every rank needs the same MASTER_ADDR:MASTER_PORT, world size and job token (TOPO_JOB_TOKEN or the launcher's job id)"
        }
        R::Launch(_) => {
            "run under torchrun, srun or mpirun for --launch env, or use --launch threads"
        }
        R::TooLarge(_) => {
            "pass a smaller -e, or fewer --ranks or --nchannels (each rank holds two buffers of -e bytes)"
        }
        R::Device(_) => {
            "a CUDA call or kernel failed: rerun the failing size with -n 1 -w 0 (and CUDA_LAUNCH_BLOCKING=1) and report the line above"
        }
        _ => return None,
    })
}

fn nccl_hint(e: &topo_nccl::Error) -> Option<String> {
    if let Some(h) = &e.help {
        return Some(h.clone());
    }
    let s = match &e.kind {
        NcclKind::Version => "pick the closest supported version with --nccl-version".to_string(),
        NcclKind::Env { name } => {
            format!("fix or unset {name} (or override it with --env {name}=...)")
        }
        NcclKind::NoGpu { live: true } => "on a machine without GPUs, plan a profile (--profile dgx-h100) or a captured machine (--from box.tar.gz)".to_string(),
        NcclKind::NoGpu { live: false } => "plan a profile (--profile dgx-h100), or pass --from a snapshot or XML of a machine with GPUs".to_string(),
        NcclKind::NvlinkUnknown => "state what the source leaves out (--gpu h100 --nvlink nvswitch, or --sm 90 --nvlink pairs:4), or plan the machine itself (topo plan there, or topo snapshot it and pass --from the snapshot), an XML NCCL dumped there (NCCL_TOPO_DUMP_FILE), or a profile with the same GPUs (--profile dgx-a100, dgx-h100)".to_string(),
        _ => return None,
    };
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// README.md's "Exit codes" paragraph names exactly 0 and the codes of [`Exit`].
    #[test]
    fn readme_states_every_exit_code() {
        let all = [
            Exit::CheckFailed,
            Exit::Usage,
            Exit::MissingRuntime,
            Exit::RuntimeFault,
            Exit::BrokenPipe,
            Exit::Internal,
        ];
        // A new variant does not compile here until it is in `all` above.
        for e in all {
            match e {
                Exit::CheckFailed
                | Exit::Usage
                | Exit::MissingRuntime
                | Exit::RuntimeFault
                | Exit::BrokenPipe
                | Exit::Internal => {}
            }
        }
        let mut codes: Vec<i32> = all.iter().map(|&e| e as i32).collect();
        codes.push(0);
        codes.sort();
        let readme = include_str!("../README.md");
        let para = readme
            .split("\nExit codes: ")
            .nth(1)
            .and_then(|t| t.split("\n\n").next())
            .expect("README.md has an \"Exit codes: \" paragraph");
        let mut stated: Vec<i32> = para
            .split(|c: char| c.is_whitespace() || ",;()".contains(c))
            .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()))
            .map(|w| w.parse().unwrap())
            .collect();
        stated.sort();
        stated.dedup();
        assert_eq!(
            stated, codes,
            "README.md's exit codes against src/error.rs's Exit"
        );
    }

    #[test]
    fn library_errors_get_their_hints_here() {
        let e = anyhow::Error::from(topo_nccl::Error::new(
            NcclKind::Env {
                name: "NCCL_P2P_LEVEL".into(),
            },
            "bad NCCL_P2P_LEVEL='x': expected a level",
        ));
        let r = report(&e);
        assert_eq!(r.exit, Exit::Usage);
        assert_eq!(
            r.hint.as_deref(),
            Some("fix or unset NCCL_P2P_LEVEL (or override it with --env NCCL_P2P_LEVEL=...)")
        );
        let e = anyhow::Error::from(topo_source::Error::new(
            SourceKind::Replication {
                nodes: 5000,
                max_nodes: 4096,
            },
            "5000 nodes of 8 GPUs is 40000 GPUs, more than the 32768 topo models",
        ));
        let r = report(&e);
        assert!(r.line.starts_with("--nodes 5000: 5000 nodes"));
        assert_eq!(r.hint.as_deref(), Some("pass --nodes 4096 or fewer"));
    }
}
