//! Text sources read whole: NCCL logs and `nvidia-smi topo -m` pastes. The readers
//! ([`super::nccllog`], [`super::smimatrix`]) are pure; this file does their I/O and bounds it.

use super::{nccllog, read, smimatrix};
use crate::error::{self, ErrorKind};
use anyhow::Result;
use std::path::Path;
use topo_model::Topology;

/// The file as text. Binary content (NUL bytes) is refused; other invalid UTF-8 is replaced,
/// since hostnames and paths in logs are not always UTF-8.
pub fn read_text(path: &Path, what: &str) -> Result<String> {
    let bytes = read::file(path, read::TEXT).map_err(|e| {
        let kind = match e {
            read::ReadError::TooLarge(_) => ErrorKind::TextTooLarge,
            _ => ErrorKind::TextFile,
        };
        error::fail(kind, format!("cannot read {}: {e}", path.display()))
    })?;
    if bytes.contains(&0) {
        return Err(error::fail(
            ErrorKind::TextFile,
            format!("cannot read {}: binary data, not a {what}", path.display()),
        ));
    }
    // Valid UTF-8 (the usual case) is taken as is: a 100 MB log is not copied.
    Ok(String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
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
    let log = nccllog::parse(&text);
    let origin = Some(path.display().to_string());
    nccllog::system::topology(&log, origin.clone())
        .or_else(|| nccllog::system::implied_topology(&log, origin))
        .ok_or_else(|| {
            error::fail(
                ErrorKind::LogWithoutTopology,
                format!(
                    "cannot read {}: the NCCL log has no `=== System` block and no Init lines with bus ids, so no topology",
                    path.display()
                ),
            )
        })
}

/// `--from matrix.txt`.
pub fn load_matrix(path: &Path) -> Result<Topology> {
    let text = read_text(path, "nvidia-smi matrix")?;
    let m = smimatrix::parse(&text).map_err(|why| {
        error::fail(
            ErrorKind::SmiMatrix,
            format!(
                "cannot read {}: not an nvidia-smi topo -m matrix: {why}",
                path.display()
            ),
        )
    })?;
    Ok(smimatrix::topology(&m, Some(path.display().to_string())))
}
