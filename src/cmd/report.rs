//! `topo report`: the diagnosis, the machine it judged and NCCL's plan of it, written as one
//! self-contained HTML file (`topo_report::html`). The request building is diagnose's and
//! plan's own: the findings are the ones `topo diagnose --format json` prints for the same
//! inputs.

use crate::cli::{DiagnoseArgs, DiagnoseFormat, ReportArgs};
use crate::output::emit_with;
use anyhow::Result;
use std::path::Path;
use topo_model::Topology;
use topo_nccl::analyze::{self, RuntimeFacts};
use topo_nccl::plan::{Plan, PlanRequest};
use topo_nccl::transport::RankPlacement;
use topo_nccl::types::Collective;
use topo_nccl::version::NcclVersion;
use topo_report::html::{InputFile, Provenance};
use topo_report::svg::plot::{Panel, Series};

/// Files above this are listed without a hash: hashing reads them whole into memory.
const MAX_HASHED: u64 = 256 << 20;

pub fn run(a: &ReportArgs) -> Result<()> {
    let Some(output) = &a.output else {
        return Err(crate::error::usage(
            "topo report writes an HTML file and no -o was given",
            "add -o report.html (or -o - for standard output)",
        ));
    };
    let da = DiagnoseArgs {
        source: a.source.clone(),
        nccl_log: a.nccl_log.clone(),
        nccl_tests: a.nccl_tests.clone(),
        collective: a.collective.clone(),
        expect: None,
        fail_on: None,
        format: DiagnoseFormat::Json,
        fleet: None,
        hang: vec![],
        nccl_version: a.nccl_version.clone(),
        output: None,
    };
    let super::diagnose::Built {
        report: diagnosis,
        topo,
        named,
        ..
    } = super::diagnose::build(&da)?;
    let (plan, panels, plan_note) = match &topo {
        Some(t) => match planned(t, a, named.as_deref(), &diagnosis) {
            Ok((p, panels)) => (Some(p), panels, None),
            Err(e) => (None, vec![], Some(format!("{e:#}"))),
        },
        None => (None, vec![], Some("no machine to plan".to_string())),
    };
    let provenance = provenance(a);
    let input = topo_report::html::Input {
        topo: topo.as_ref(),
        plan: plan.as_ref(),
        panels: &panels,
        plan_note,
        diagnosis: &diagnosis,
        provenance: &provenance,
    };
    emit_with(Some(output), |w| {
        topo_report::html::write(w, &input).map_err(|e| match e {
            topo_report::Error::Io(io) => io,
            other => std::io::Error::other(other.to_string()),
        })
    })
}

/// The plan of `topo` for allreduce and every collective a result measured, nccl-tests'
/// default sweep (8 B to 8 GB by 2), and the plot with the measurements as crosses.
fn planned(
    topo: &Topology,
    a: &ReportArgs,
    named: Option<&str>,
    diagnosis: &topo_diagnose::Report,
) -> Result<(Plan, Vec<Panel>)> {
    let mut funcs = vec![Collective::AllReduce];
    for r in &diagnosis.results {
        if let Some(f) = Collective::parse(&r.collective).filter(|f| f.is_tuned())
            && !funcs.contains(&f)
        {
            funcs.push(f);
        }
    }
    let (version, version_source) = version(a.nccl_version.as_deref(), named)?;
    let overrides = a.source.env_overrides()?;
    let (env, env_origin) = super::plan::environment(topo, &overrides);
    let req = PlanRequest {
        funcs,
        sizes: (3..=33).map(|k| 1u64 << k).collect(),
        version,
        version_source,
        placement: RankPlacement::ProcessPerGpu,
        env,
        env_origin,
        explain: false,
    };
    let facts = RuntimeFacts {
        cuda_driver_version: topo
            .hosts
            .first()
            .and_then(|h| h.cuda_driver_version.as_deref())
            .and_then(analyze::parse_cuda_version),
    };
    let (analysis, plan) = topo_nccl::plan::analyzed_owned(topo.clone(), &req, facts)?;
    let mut panels = topo_report::svg::plot::panels(&analysis, &plan)?;
    crate::util::drop_aside(analysis);
    for r in &diagnosis.results {
        let Some(f) = Collective::parse(&r.collective) else {
            continue;
        };
        let Some(i) = plan.table.iter().position(|row| row.collective == f) else {
            continue;
        };
        // Panels follow the table's collectives in order of first appearance.
        let nth = plan.table[..i]
            .iter()
            .fold(vec![], |mut seen: Vec<Collective>, row| {
                if !seen.contains(&row.collective) {
                    seen.push(row.collective);
                }
                seen
            })
            .len();
        if let Some(p) = panels.get_mut(nth) {
            // The first result's band: it depends on the run's conditions, and two runs'
            // bands drawn as one outline would cross.
            if p.band.is_empty() {
                p.band = r
                    .rows
                    .iter()
                    .filter_map(|x| Some((x.bytes, x.low_gbps?, x.high_gbps?)))
                    .collect();
            }
            p.measured.push(Series {
                label: format!("measured: {}", r.name),
                points: r
                    .rows
                    .iter()
                    .map(|x| (x.bytes, x.measured_busbw_gbps))
                    .collect(),
            });
        }
    }
    Ok((plan, panels))
}

/// `--nccl-version`, else the version a log or result names (when topo models it), else
/// what `topo plan` assumes.
fn version(flag: Option<&str>, named: Option<&str>) -> Result<(NcclVersion, String)> {
    if flag.is_none()
        && let Some(v) = named
        && let Ok(n) = NcclVersion::parse(v)
    {
        return Ok((n, format!("the NCCL {v} the log or result names")));
    }
    super::plan::version_choice(flag)
}

fn provenance(a: &ReportArgs) -> Provenance {
    let mut inputs = vec![];
    for p in &a.source.from {
        inputs.push(input_file("--from", p));
    }
    if let Some(p) = &a.source.profile {
        inputs.push(InputFile {
            role: "--profile".into(),
            name: p.clone(),
            bytes: None,
            sha256: None,
            note: Some(format!("built into topo {}", env!("CARGO_PKG_VERSION"))),
        });
    }
    for p in &a.nccl_log {
        inputs.push(input_file("--nccl-log", p));
    }
    for p in &a.nccl_tests {
        inputs.push(input_file("--nccl-tests", p));
    }
    page_provenance(inputs)
}

/// What every HTML page says of where it came from: this topo, the time, the command line and
/// `inputs` (`topo report`, `topo diff --format html`, `topo diagnose --fleet --format html`).
pub(crate) fn page_provenance(inputs: Vec<InputFile>) -> Provenance {
    Provenance {
        topo_version: env!("CARGO_PKG_VERSION").into(),
        generated: topo_source::snapshot::utc_now(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        inputs,
    }
}

/// A file named on the command line: its size and SHA-256 as read now; a folder, stream or
/// unreadable file says so instead.
pub(crate) fn input_file(role: &str, p: &Path) -> InputFile {
    let mut f = InputFile {
        role: role.into(),
        name: p.display().to_string(),
        bytes: None,
        sha256: None,
        note: None,
    };
    if p.as_os_str() == "-" || topo_source::read::is_stream(p) {
        f.note = Some("a stream: read once, not hashed".into());
        return f;
    }
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => f.note = Some("a folder: not hashed".into()),
        Ok(m) if m.len() > MAX_HASHED => {
            f.bytes = Some(m.len());
            f.note = Some(format!("over {} MiB: not hashed", MAX_HASHED >> 20));
        }
        Ok(_) => match std::fs::read(p) {
            Ok(bytes) => {
                f.bytes = Some(bytes.len() as u64);
                let h = topo_runtime::sha256(&[&bytes]);
                f.sha256 = Some(h.iter().map(|x| format!("{x:02x}")).collect());
            }
            Err(e) => f.note = Some(format!("cannot read: {e}")),
        },
        Err(e) => f.note = Some(format!("cannot read: {e}")),
    }
    f
}
