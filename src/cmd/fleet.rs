//! `topo diagnose --fleet DIR`: a folder of snapshots (or any sources), one per host, grouped
//! by what the hosts are made of. The folder is listed here; `topo_source::hosts::read_facts`
//! reads each entry, `topo_diagnose::fleet` groups them (`topo.fleet/v1`) and
//! `topo_report::{fleet, html}` write it. Collect them with
//! `srun topo snapshot -o snaps/%h.tar.gz`.

use crate::cli::{DiagnoseArgs, DiagnoseFormat, FailOn};
use crate::error;
use crate::output::emit;
use crate::util::{Style, escape_document};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// The most entries a fleet folder may hold (a bound on the work a folder can cause).
const MAX_HOSTS: usize = 100_000;

fn entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).map_err(|e| {
        error::usage(
            format!("cannot read the fleet folder {}: {e}", dir.display()),
            "pass --fleet a folder of snapshots (topo snapshot -o snaps/%h.tar.gz on each host)",
        )
    })?;
    let mut v = vec![];
    for e in rd.flatten() {
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        v.push(e.path());
        if v.len() > MAX_HOSTS {
            return Err(error::usage(
                format!(
                    "the fleet folder {} holds more than {MAX_HOSTS} entries",
                    dir.display()
                ),
                "split the fleet into folders of at most 100000 hosts",
            ));
        }
    }
    v.sort();
    Ok(v)
}

pub fn run(a: &DiagnoseArgs, dir: &Path, style: Style) -> Result<i32> {
    let paths = entries(dir)?;
    let reads = topo_source::hosts::read_facts(&paths);
    let names = paths.iter().map(|p| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let doc = topo_diagnose::fleet::group(dir.display().to_string(), names.zip(reads));
    let text = match a.format {
        DiagnoseFormat::Json => topo_report::fleet::json(&doc)?,
        DiagnoseFormat::Text => {
            escape_document(&topo_report::fleet::text(&doc, style), style.color).into_owned()
        }
        DiagnoseFormat::Html => {
            let mut buf = Vec::new();
            topo_report::html::fleet(&mut buf, &doc, &super::report::page_provenance(vec![]))?;
            String::from_utf8(buf)?
        }
    };
    emit(a.output.as_ref(), &text)?;
    Ok(i32::from(
        doc.has_outliers() && a.fail_on == Some(FailOn::Warning),
    ))
}
