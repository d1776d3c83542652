//! Text sources read whole: NCCL logs and `nvidia-smi topo -m` pastes. The readers
//! ([`topo_evidence::nccllog`], [`super::smimatrix`]) are pure; this file does their I/O and bounds it.

use super::{read, smimatrix};
use crate::error::{self, ErrorKind};
use anyhow::Result;
use std::path::Path;
use topo_evidence::nccllog;
use topo_model::Topology;

/// The file as text: a regular file, `-` (standard input) or a pipe (`<(kubectl logs ...)`),
/// all capped alike. Binary content (NUL bytes) is refused; other invalid UTF-8 is replaced,
/// since hostnames and paths in logs are not always UTF-8.
pub fn read_text(path: &Path, what: &str) -> Result<String> {
    let name = crate::stream_name(path);
    let bytes = read::stream(path, read::TEXT).map_err(|e| {
        let kind = match e {
            read::ReadError::TooLarge(_) => ErrorKind::TextTooLarge,
            _ => ErrorKind::TextFile,
        };
        if read::is_stdin(path) && matches!(e, read::ReadError::NotRegular(_)) {
            return error::fail(
                kind,
                format!("cannot read {name}: it is a terminal; pipe the {what} in (`kubectl logs POD | topo ... -`)"),
            );
        }
        error::fail(kind, format!("cannot read {name}: {e}"))
    })?;
    if bytes.contains(&0) {
        return Err(error::fail(
            ErrorKind::TextFile,
            format!("cannot read {name}: binary data, not a {what}"),
        ));
    }
    // Valid UTF-8 (the usual case) is taken as is: a 100 MB log is not copied.
    Ok(String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// The most bytes all the logs of one command may hold together: one log's own cap. Each log
/// is parsed and kept at once, so three 200 MB logs, each within its cap, took 2.2 GB.
pub const TOTAL_TEXT: u64 = read::TEXT.bytes;

/// Refuses a set of text files whose sizes add up past [`TOTAL_TEXT`], before any is read.
/// A file whose size the file system does not report counts 0 here; [`read_text`]'s own cap
/// still bounds it, and [`TextBudget::take`] counts what it really held.
pub fn check_total<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Result<()> {
    let mut budget = TextBudget::default();
    for p in paths {
        // A pipe's size is unknown until read; `take` counts it then.
        if read::is_stream(p) {
            continue;
        }
        let size = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        budget.take(p, size)?;
    }
    Ok(())
}

/// Bytes of text read so far across several files, against [`TOTAL_TEXT`].
#[derive(Default)]
pub struct TextBudget(u64);

impl TextBudget {
    /// Counts `bytes` more from `path`; `Err` once the total passes [`TOTAL_TEXT`].
    pub fn take(&mut self, path: &Path, bytes: u64) -> Result<()> {
        self.0 = self.0.saturating_add(bytes);
        if self.0 > TOTAL_TEXT {
            return Err(error::fail(
                ErrorKind::TextTooLarge,
                format!(
                    "cannot read {}: the logs together hold more than {} MiB, the most read at once; pass fewer or shorter logs",
                    path.display(),
                    TOTAL_TEXT >> 20
                ),
            ));
        }
        Ok(())
    }
}

/// Whether text looks like an NCCL log (any NCCL INFO/WARN line or a `=== System` block).
pub fn looks_like_log(text: &str) -> bool {
    text.contains(" NCCL INFO") || text.contains(" NCCL WARN") || text.contains("=== System")
}

/// Whether text looks like `nvidia-smi topo -m` (a line that starts with GPU0 and names
/// another column).
pub fn looks_like_matrix(text: &str) -> bool {
    text.lines().any(|l| {
        let mut t = l.split_whitespace();
        t.next() == Some("GPU0") && t.any(|x| x == "GPU1" || x == "CPU" || x == "NIC0" || x == "X")
    })
}

/// `--from job.log`: the `=== System` block, else the GPUs the Init lines name.
pub fn load_log(path: &Path) -> Result<Topology> {
    let text = read_text(path, "NCCL log")?;
    log_topology(&text, &path.display().to_string())
}

fn log_topology(text: &str, origin: &str) -> Result<Topology> {
    let log = nccllog::parse(text);
    let o = Some(origin.to_string());
    nccllog::system::topology(&log, o.clone())
        .or_else(|| nccllog::system::implied_topology(&log, o))
        .ok_or_else(|| {
            error::fail(
                ErrorKind::LogWithoutTopology,
                format!(
                    "cannot read {origin}: the NCCL log has no `=== System` block and no Init lines with bus ids, so no topology"
                ),
            )
        })
}

/// `--from matrix.txt`.
pub fn load_matrix(path: &Path) -> Result<Topology> {
    let text = read_text(path, "nvidia-smi matrix")?;
    matrix_topology(&text, &path.display().to_string())
}

fn matrix_topology(text: &str, origin: &str) -> Result<Topology> {
    let m = smimatrix::parse(text).map_err(|why| {
        error::fail(
            ErrorKind::SmiMatrix,
            format!("cannot read {origin}: not an nvidia-smi topo -m matrix: {why}"),
        )
    })?;
    Ok(smimatrix::topology(&m, Some(origin.to_string())))
}

/// A source read from standard input or a pipe (`--from -`), told apart by its content: an
/// NCCL log, an nvidia-smi matrix or an NCCL topology XML. Snapshots and profiles are
/// recognised by their file, so they must be passed as one.
pub fn load_text(text: &str, origin: &str) -> Result<Topology> {
    if looks_like_log(text) {
        return log_topology(text, origin);
    }
    if looks_like_matrix(text) {
        return matrix_topology(text, origin);
    }
    if text.trim_start().starts_with('<') {
        return crate::ncclxml::parse_str(text, origin);
    }
    Err(error::fail(
        ErrorKind::TextFile,
        format!(
            "cannot read {origin}: neither an NCCL log, an nvidia-smi topo -m matrix nor an NCCL topology XML; pass a snapshot or a profile as a file"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_together_past_the_cap_are_refused() {
        let mut b = TextBudget::default();
        let p = Path::new("c.log");
        assert!(b.take(p, 200 << 20).is_ok());
        let e = b.take(p, 200 << 20).unwrap_err().to_string();
        assert!(
            e.contains("c.log: the logs together hold more than 256 MiB"),
            "{e}"
        );
    }
}
