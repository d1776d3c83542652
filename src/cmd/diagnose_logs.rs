//! The NCCL logs `topo diagnose` reads: files, `-` (standard input) and pipes such as
//! `<(kubectl logs POD)`, each cut into the jobs it holds, all within one byte budget.

use crate::error;
use anyhow::Result;
use std::path::{Path, PathBuf};
use topo_model::Topology;
use topo_source::{self as source, nccllog, read, textfile};

pub type Log = (String, nccllog::NcclLog);

/// The name a log is quoted by: its file name, `stdin` for `-`.
pub fn short_name(p: &Path) -> String {
    if read::is_stdin(p) {
        return "stdin".into();
    }
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// Standard input can be read once: `-` twice (two `--nccl-log -`, or with `--from -`) is
/// a usage error, not a silently empty second log.
pub fn check_stdin_once<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Result<()> {
    if paths.into_iter().filter(|p| read::names_stdin(p)).count() > 1 {
        return Err(error::usage(
            "standard input (`-`) is named twice",
            "pipe one log in with `-` and pass the others as files",
        ));
    }
    Ok(())
}

/// One file's jobs: `name`, or `name (job 2)` from the second on, so each is judged alone.
fn jobs(name: &str, text: &str) -> Vec<Log> {
    let all = nccllog::parse_jobs(text);
    let several = all.len() > 1;
    all.into_iter()
        .enumerate()
        .map(|(i, l)| {
            let n = if several && i > 0 {
                format!("{name} (job {})", i + 1)
            } else {
                name.to_string()
            };
            (n, l)
        })
        .collect()
}

pub fn read_log(p: &Path, budget: &mut textfile::TextBudget) -> Result<Vec<Log>> {
    let text = textfile::read_text(p, "NCCL log")?;
    budget.take(p, text.len() as u64)?;
    Ok(jobs(&short_name(p), &text))
}

/// `--from -` or `--from <(cmd)`: read once; a log is also a log to diagnose.
pub fn from_stream(p: &Path, budget: &mut textfile::TextBudget) -> Result<(Vec<Log>, Topology)> {
    let text = textfile::read_text(p, "topology source")?;
    budget.take(p, text.len() as u64)?;
    let topo = anyhow::Context::context(
        textfile::load_text(&text, &source::stream_name(p)),
        "cannot diagnose --from",
    )?;
    let logs = if textfile::looks_like_log(&text) {
        jobs(&short_name(p), &text)
    } else {
        vec![]
    };
    Ok((logs, topo))
}

/// Every `--nccl-log`, in order.
pub fn read_all(paths: &[PathBuf], budget: &mut textfile::TextBudget) -> Result<Vec<Log>> {
    let mut logs = vec![];
    for p in paths {
        logs.extend(read_log(p, budget)?);
    }
    Ok(logs)
}
