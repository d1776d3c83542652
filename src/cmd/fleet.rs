//! `topo diagnose --fleet DIR`: a folder of snapshots (or any sources, one per host) grouped
//! by what the hosts are made of. The largest group is the reference; every other group is
//! named with its hosts and what differs from the reference, the golden-node check of a
//! cluster's burn-in. Collect them with `srun topo snapshot -o snaps/%h.tar.gz`.

use crate::cli::{DiagnoseArgs, DiagnoseFormat, FailOn};
use crate::error;
use crate::output::emit;
use crate::util::{Style, escape_document};
use anyhow::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use topo_model::inventory::{self, Facts};
use topo_source::SourceSpec;

/// The most entries a fleet folder may hold (a bound on the work a folder can cause).
const MAX_HOSTS: usize = 100_000;
/// Differences listed per group (the JSON has them all).
const SHOWN: usize = 12;

#[derive(Serialize)]
struct Row {
    fact: String,
    reference: Option<String>,
    here: Option<String>,
}

#[derive(Serialize)]
struct Group {
    fingerprint: String,
    hosts: Vec<String>,
    /// Against the reference group; empty for the reference itself.
    differences: Vec<Row>,
}

#[derive(Serialize)]
struct FleetDoc {
    schema: &'static str,
    topo_version: &'static str,
    folder: String,
    hosts: usize,
    /// The largest group first: the reference.
    groups: Vec<Group>,
    unreadable: Vec<Unreadable>,
}

#[derive(Serialize)]
struct Unreadable {
    host: String,
    error: String,
}

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

/// A host's name: its file name without the snapshot suffixes.
fn host_name(p: &Path) -> String {
    let n = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for suffix in [".tar.gz", ".tgz", ".xml", ".yaml", ".yml", ".txt", ".log"] {
        if let Some(s) = n.strip_suffix(suffix) {
            return s.to_string();
        }
    }
    n
}

/// One entry read: its facts' fingerprint, and the facts themselves only where its part of
/// the folder met that fingerprint first. Keeping every entry's facts held about 42 KB per
/// entry, 4.3 GB at the 100,000-entry bound (issue 45); now a fleet costs its groups' facts
/// and a fingerprint and a name per host.
type Read = std::result::Result<(u64, Option<Facts>), String>;

/// Every entry's facts (host 0 of each source), read in parallel by runs of entries.
fn read_all(paths: &[PathBuf]) -> Vec<Read> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(16);
    let chunk = paths.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = paths
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    let mut seen = std::collections::HashSet::new();
                    part.iter()
                        .map(|p| {
                            let spec = SourceSpec {
                                from: Some(p.clone()),
                                regular_only: true,
                                ..Default::default()
                            };
                            let f = topo_source::load(&spec)
                                .map(|t| inventory::host_facts(&t, 0))
                                .map_err(|e| format!("{e:#}"))?;
                            let fp = inventory::fingerprint(&f);
                            Ok((fp, seen.insert(fp).then_some(f)))
                        })
                        .collect::<Vec<Read>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

fn fleet(dir: &Path) -> Result<FleetDoc> {
    let paths = entries(dir)?;
    let facts = read_all(&paths);
    let mut groups: BTreeMap<u64, (Facts, Vec<String>)> = BTreeMap::new();
    let mut unreadable = vec![];
    for (p, f) in paths.iter().zip(facts) {
        match f {
            // The first entry of a fingerprint in folder order is the first of its run of
            // entries too, so it kept its facts.
            Ok((fp, facts)) => groups
                .entry(fp)
                .or_insert_with(|| (facts.unwrap_or_default(), vec![]))
                .1
                .push(host_name(p)),
            Err(e) => unreadable.push(Unreadable {
                host: host_name(p),
                error: e,
            }),
        }
    }
    let mut groups: Vec<(u64, (Facts, Vec<String>))> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.1.len().cmp(&a.1.1.len()).then(a.1.1.cmp(&b.1.1)));
    let reference = groups.first().map(|g| g.1.0.clone()).unwrap_or_default();
    let groups = groups
        .into_iter()
        .map(|(fp, (f, hosts))| Group {
            fingerprint: format!("{fp:016x}"),
            hosts,
            differences: inventory::diff(&reference, &f)
                .into_iter()
                .map(|d| Row {
                    fact: d.fact,
                    reference: d.a,
                    here: d.b,
                })
                .collect(),
        })
        .collect();
    Ok(FleetDoc {
        schema: "topo.fleet/v1",
        topo_version: env!("CARGO_PKG_VERSION"),
        folder: dir.display().to_string(),
        hosts: paths.len(),
        groups,
        unreadable,
    })
}

pub fn run(a: &DiagnoseArgs, dir: &Path, style: Style) -> Result<i32> {
    let doc = fleet(dir)?;
    let text = match a.format {
        DiagnoseFormat::Json => {
            let mut buf = Vec::new();
            topo_report::doc::json_to(&mut buf, &doc)?;
            String::from_utf8(buf)?
        }
        DiagnoseFormat::Text => escape_document(&render(&doc, style), style.color).into_owned(),
    };
    emit(a.output.as_ref(), &text)?;
    let outliers = doc.groups.len() > 1 || !doc.unreadable.is_empty();
    Ok(i32::from(outliers && a.fail_on == Some(FailOn::Warning)))
}

fn hosts_line(h: &[String]) -> String {
    let shown: Vec<&str> = h.iter().take(8).map(String::as_str).collect();
    let more = if h.len() > 8 {
        format!(" and {} more", h.len() - 8)
    } else {
        String::new()
    };
    format!("{}{more}", shown.join(", "))
}

fn render(d: &FleetDoc, style: Style) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}: {} host(s) in {} group(s) of identical hardware",
        style.bold("topo diagnose --fleet"),
        d.folder,
        d.hosts,
        d.groups.len()
    );
    for (i, g) in d.groups.iter().enumerate() {
        let what = if i == 0 { "reference" } else { "outlier" };
        let _ = writeln!(
            out,
            "\n{} {} ({} host(s), {}): {}",
            style.bold(what),
            i,
            g.hosts.len(),
            g.fingerprint,
            hosts_line(&g.hosts)
        );
        for r in g.differences.iter().take(SHOWN) {
            let v = |x: &Option<String>| x.clone().unwrap_or_else(|| "(none)".into());
            let _ = writeln!(
                out,
                "  {}: {} here, {} in the reference",
                r.fact,
                v(&r.here),
                v(&r.reference)
            );
        }
        if g.differences.len() > SHOWN {
            let _ = writeln!(
                out,
                "  ... {} more (--format json lists them)",
                g.differences.len() - SHOWN
            );
        }
    }
    for u in &d.unreadable {
        let _ = writeln!(
            out,
            "{} {}: {}",
            style.yellow("unreadable:"),
            u.host,
            u.error
        );
    }
    out
}
