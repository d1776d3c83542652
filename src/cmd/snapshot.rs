//! `topo snapshot`: capture this machine for offline use.

use crate::cli::{SnapshotArgs, non_empty};
use crate::error;
use crate::output::say;
use anyhow::Result;
use std::path::PathBuf;

pub fn run(a: &SnapshotArgs) -> Result<()> {
    let root = non_empty(&a.sysfs_root).unwrap_or_else(|| PathBuf::from("/"));
    let summary = topo_source::capture_snapshot(&root, &a.output).map_err(|e| {
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
