//! `topo diagnose --hang FILE|DIR|-`: reads what a hung job left (RAS reports, watchdog logs,
//! Flight Recorder output, network errors), bounded like every text input, and judges it
//! (`topo_diagnose::hang`). A folder is read as one file per rank, its files in name order.

use crate::cli::DiagnoseArgs;
use crate::error;
use crate::util::Style;
use anyhow::Result;
use std::path::{Path, PathBuf};
use topo_source::{hang, read, textfile};

/// The most files a `--hang` folder may hold: one per rank of a large job, with room.
const MAX_FILES: usize = 65_536;

pub fn run(a: &DiagnoseArgs, style: Style) -> Result<i32> {
    // The machine to place the verdict on: one source, every node taken to be like it.
    let machine = if a.source.from.is_empty() && a.source.profile.is_none() {
        None
    } else {
        let spec = a.source.spec()?;
        if spec.from.as_ref().is_some_and(|p| read::is_stdin(p)) {
            return Err(error::usage(
                "--hang places its verdict on a machine read from a file, not standard input",
                "pass --from a snapshot, NCCL XML or profile file, or --profile NAME",
            ));
        }
        let name = match (&spec.from, &spec.profile) {
            (Some(f), _) => super::diagnose_logs::short_name(f),
            (None, Some(p)) => format!("profile {p}"),
            _ => String::new(),
        };
        let topo = anyhow::Context::context(
            topo_source::load(&spec),
            "cannot read the machine to place the hang on",
        )?;
        Some((topo, name))
    };
    super::diagnose_logs::check_stdin_once(a.hang.iter().map(PathBuf::as_path))?;
    let files = files(&a.hang)?;
    textfile::check_total(files.iter().map(|(p, _)| p.as_path()))?;
    let mut budget = textfile::TextBudget::default();
    let mut ev = hang::HangEvidence::default();
    for (p, name) in &files {
        let text = textfile::read_text(p, "hang log").map_err(|e| pickled(p).unwrap_or(e))?;
        budget.take(p, text.len() as u64)?;
        hang::read(name, &text, &mut ev);
    }
    let mut report = topo_diagnose::hang::judge(&ev);
    if let Some((topo, name)) = &machine {
        topo_diagnose::hang::place_on(&mut report, topo, name);
    }
    let nothing = (report.cause == topo_diagnose::hang::Cause::NoEvidence)
        .then(|| "the input holds no hang evidence topo reads".to_string());
    super::diagnose::emit_and_gate(
        a,
        style,
        |st| topo_report::hang::text(&report, st),
        || topo_report::hang::json(&report),
        (report.worst, nothing),
    )
}

/// Every file to read with the name its lines are quoted by: a file as given, a folder's
/// regular files (not hidden, not its subfolders) as `folder/file`.
fn files(paths: &[PathBuf]) -> Result<Vec<(PathBuf, String)>> {
    let mut out = vec![];
    for p in paths {
        if read::is_stream(p) || !p.is_dir() {
            out.push((p.clone(), super::diagnose_logs::short_name(p)));
            continue;
        }
        let rd = std::fs::read_dir(p).map_err(|e| {
            error::usage(
                format!("cannot read the folder {}: {e}", p.display()),
                "pass --hang a folder of per-rank logs, or the files themselves",
            )
        })?;
        let mut v = vec![];
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !e.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            v.push((
                e.path(),
                format!("{}/{name}", super::diagnose_logs::short_name(p)),
            ));
            if v.len() > MAX_FILES {
                return Err(error::usage(
                    format!(
                        "the folder {} holds more than {MAX_FILES} files",
                        p.display()
                    ),
                    "pass a folder of at most 65536 per-rank logs, or concatenate them",
                ));
            }
        }
        if v.is_empty() {
            return Err(error::usage(
                format!("the folder {} holds no files", p.display()),
                "pass --hang the folder the per-rank logs were written to",
            ));
        }
        v.sort();
        out.extend(v);
    }
    Ok(out)
}

/// A pickled Flight Recorder dump (protocol 2+ starts with 0x80) is binary: say what to do.
fn pickled(p: &Path) -> Option<anyhow::Error> {
    use std::io::Read;
    if read::is_stream(p) {
        return None;
    }
    let mut first = [0u8; 1];
    std::fs::File::open(p).ok()?.read_exact(&mut first).ok()?;
    (first[0] == 0x80).then(|| {
        error::usage(
            format!("cannot read {}: a pickled Flight Recorder dump, which topo does not unpickle", p.display()),
            "dump JSON instead (torch._C._distributed_c10d._dump_nccl_trace_json) or pass the fr_trace analyzer's output (python -m torch.distributed.flight_recorder.fr_trace DIR)",
        )
    })
}
