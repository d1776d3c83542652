//! `topo snapshot`: capture this machine for offline use.

use crate::cli::{SnapshotArgs, non_empty};
use crate::error;
use crate::output::say;
use anyhow::Result;
use std::path::PathBuf;

pub fn run(a: &SnapshotArgs) -> Result<()> {
    let root = non_empty(&a.sysfs_root).unwrap_or_else(|| PathBuf::from("/"));
    let output = with_host_name(&a.output, &crate::util::host_name());
    let summary = topo_source::capture_snapshot(&root, &output).map_err(|e| {
        if e.kind == topo_source::ErrorKind::SysfsRoot {
            error::usage(
                e.message,
                "set TOPO_SYSFS_ROOT (or --sysfs-root) to a folder holding sys/ and proc/, or unset it to capture this machine",
            )
        } else {
            e.into()
        }
    })?;
    say!("{}", crate::util::escape_controls(&summary));
    Ok(())
}

/// `%h` in the output path becomes the host name, so one command line run on every node of a
/// job (`srun topo snapshot -o snaps/%h.tar.gz`) writes one file per host. A name is kept to
/// the characters a file name can safely hold.
fn with_host_name(p: &std::path::Path, host: &str) -> PathBuf {
    let s = p.to_string_lossy();
    if !s.contains("%h") {
        return p.to_path_buf();
    }
    let safe: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = if safe.starts_with('.') {
        format!("_{safe}")
    } else {
        safe
    };
    PathBuf::from(s.replace("%h", &safe))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_h_becomes_a_safe_host_name() {
        let p = std::path::Path::new("snaps/%h.tar.gz");
        assert_eq!(
            with_host_name(p, "gpu-07"),
            PathBuf::from("snaps/gpu-07.tar.gz")
        );
        assert_eq!(
            with_host_name(p, "../x/y"),
            PathBuf::from("snaps/_.._x_y.tar.gz")
        );
        let plain = std::path::Path::new("box.tar.gz");
        assert_eq!(with_host_name(plain, "gpu-07"), PathBuf::from("box.tar.gz"));
    }
}
