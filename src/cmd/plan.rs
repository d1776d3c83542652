//! `topo plan`: turns flags and the process environment into a [`PlanRequest`], asks the
//! model, and renders the plan. The only place a plan touches the outside world: the process
//! environment and the probe for an installed NCCL.

use crate::cli::{PlanArgs, PlanFormat, TransportListing};
use crate::error;
use crate::output::{emit, emit_with};
use crate::progress::Progress;
use crate::request::{Hosts, Machine, Request};
use crate::util::{Style, escape_document, parse_size};
use anyhow::Result;
use topo_model::Topology;
use topo_nccl::analyze::{self, RuntimeFacts};
use topo_nccl::plan::PlanRequest;
use topo_nccl::transport::RankPlacement;
use topo_nccl::types::Collective;
use topo_nccl::version::{DEFAULT_VERSION, NcclVersion};

pub fn run(a: &PlanArgs, style: Style) -> Result<()> {
    let progress = Progress::start("topo plan: modelling");
    let req = Request::build(&a.source, Hosts::Several)?;
    let machine = req.load(a.format == PlanFormat::Text, true)?;
    let style = if a.output.is_some() {
        crate::util::file_style()
    } else {
        style
    };
    let text = match render(machine, &req, a, style)? {
        Rendered::Json(plan) => {
            drop(progress);
            let written = emit_with(a.output.as_ref(), |w| topo_report::doc::json_to(w, &*plan));
            crate::util::release_at_exit(plan);
            return written;
        }
        Rendered::Text(text) => text,
    };
    let text = match a.format {
        PlanFormat::Text => escape_document(&text, style.color),
        _ => text.as_str().into(),
    };
    drop(progress);
    emit(a.output.as_ref(), &text)
}

/// A rendered plan; JSON is encoded while it is written (tens of megabytes at thousands of
/// nodes), so it stays the plan until then.
enum Rendered {
    Text(String),
    Json(Box<topo_nccl::plan::Plan>),
}

/// The request the flags, `--env` overrides and process environment describe.
fn request(a: &PlanArgs, overrides: &[(String, String)], topo: &Topology) -> Result<PlanRequest> {
    let funcs = a.collective.0.clone();
    let sizes = sizes(&a.min_bytes, &a.max_bytes, a.step_factor)?;
    let (version, version_source) = version_choice(a.nccl_version.as_deref())?;
    let placement = placement_of(&a.placement)?;
    let (mut env, env_origin) = environment(topo, overrides);
    // `--algo`/`--proto` are NCCL_ALGO/NCCL_PROTO under another name, and their grammar is the
    // planned version's (one list before 2.24, `func:list` entries from it; PAT from 2.23), so
    // they are parsed once, with that version, where the environment is: `topo_nccl::env`
    // (`parse_list`, NCCL 2.28's `parseList` of src/graph/tuning.cc) turns them into NCCL's
    // enable matrix per function, algorithm and protocol, and everything below compares those.
    if !a.algo.eq_ignore_ascii_case("auto") {
        env.push(("NCCL_ALGO".into(), a.algo.clone()));
    }
    if !a.proto.eq_ignore_ascii_case("auto") {
        env.push(("NCCL_PROTO".into(), a.proto.clone()));
    }
    Ok(PlanRequest {
        funcs,
        sizes,
        version,
        version_source,
        placement,
        env,
        env_origin,
        explain: a.explain,
    })
}

fn render(machine: Machine, source: &Request, a: &PlanArgs, style: Style) -> Result<Rendered> {
    let Machine { topo, healthy } = machine;
    let req = request(a, &source.env, &topo)?;
    let facts = RuntimeFacts {
        cuda_driver_version: topo
            .hosts
            .first()
            .and_then(|h| h.cuda_driver_version.as_deref())
            .and_then(analyze::parse_cuda_version),
    };
    if a.format == PlanFormat::Svg {
        // The plot needs every (algorithm, protocol)'s time per size, which only the
        // analysis holds; the variables' what-if effects are not drawn, so skip that run.
        let (analysis, plan) = topo_nccl::plan::analyzed_owned(topo, &req, facts)?;
        let panels = topo_report::svg::plot::panels(&analysis, &plan)?;
        let title = topo_report::svg::plot::title(&plan);
        return Ok(Rendered::Text(topo_report::svg::plot::render(
            &title, &panels,
        )?));
    }
    let other = a.against.as_ref().map(|_| topo.clone());
    let (mut plan, analysis) = topo_nccl::plan_owned(topo, &req, facts.clone())?;
    if let Some(a) = analysis {
        crate::util::drop_aside(a);
    }
    if let (Some(v), Some(topo)) = (&a.against, other) {
        plan.against = Some(against(&plan, &topo, &req, facts.clone(), v)?);
    }
    if let Some(h) = healthy {
        // Owned and its analysis dropped aside, as the plan's own: a borrowed machine is
        // copied first, and a 16,384-host analysis takes most of a second to free. Only what
        // the comparison reads is made of it: the healthy machine's findings are not shown.
        let (base, analysis) = topo_nccl::plan::compared_owned(h, &req, facts)?;
        crate::util::drop_aside(analysis);
        plan.faults = Some(topo_nccl::plan::FaultEffects {
            parts: source.failed_parts(),
            changes: topo_nccl::whatif::compare(&base, &plan),
        });
        // Its million transports freed beside the writing, as its analysis is.
        crate::util::drop_aside(base);
    }
    if a.transports == TransportListing::Pairs {
        plan.transport_pairs = Some(plan.transports.clone());
    }
    Ok(Rendered::Text(match a.format {
        PlanFormat::Text => topo_report::plan::render(&plan, style),
        PlanFormat::Json => return Ok(Rendered::Json(Box::new(plan))),
        PlanFormat::Yaml => topo_report::doc::yaml(&plan)?,
        PlanFormat::TunerCsv => topo_nccl::plan::tuner_csv(&plan),
        PlanFormat::NcclGraph => topo_nccl::plan::graph_xml(&plan),
        PlanFormat::Svg => unreachable!("drawn above"),
    }))
}

/// A plain request for another command's plan of `topo` (verify's schedule, diff's
/// comparison): one process per GPU, the NCCL version from the flag or the machine, the
/// machine's environment under `overrides`.
pub(crate) fn plain_request(
    topo: &Topology,
    funcs: Vec<Collective>,
    sizes: Vec<u64>,
    nccl_version: Option<&str>,
    overrides: &[(String, String)],
) -> Result<PlanRequest> {
    let (version, version_source) = version_choice(nccl_version)?;
    let (env, env_origin) = environment(topo, overrides);
    Ok(PlanRequest {
        funcs,
        sizes,
        version,
        version_source,
        placement: RankPlacement::ProcessPerGpu,
        env,
        env_origin,
        explain: false,
    })
}

/// The same request planned for NCCL `v`, compared with `plan`.
fn against(
    plan: &topo_nccl::plan::Plan,
    topo: &Topology,
    req: &PlanRequest,
    facts: RuntimeFacts,
    v: &str,
) -> Result<topo_nccl::plan::Against> {
    use topo_nccl::version::{VersionData, data_changes};
    let mut other_req = req.clone();
    other_req.version = NcclVersion::parse(v)?;
    other_req.version_source = "--against".into();
    let other = topo_nccl::plan(topo, &other_req, facts)?;
    let (da, db) = (
        VersionData::load(&req.version)?,
        VersionData::load(&other_req.version)?,
    );
    Ok(topo_nccl::plan::Against {
        nccl_version: other_req.version.short(),
        changes: topo_nccl::whatif::compare(plan, &other),
        data_changes: data_changes(&da, &db),
    })
}

fn placement_of(s: &str) -> Result<RankPlacement> {
    Ok(match s {
        "process-per-gpu" => RankPlacement::ProcessPerGpu,
        "process-per-host" => RankPlacement::ProcessPerHost,
        "container-per-gpu" => RankPlacement::ContainerPerGpu {
            common_host_id: false,
            shared_shm: false,
        },
        "container-per-gpu-hostid" => RankPlacement::ContainerPerGpu {
            common_host_id: true,
            shared_shm: false,
        },
        "container-per-gpu-shared" => RankPlacement::ContainerPerGpu {
            common_host_id: true,
            shared_shm: true,
        },
        other => {
            return Err(error::usage(
                format!("unknown placement '{other}'"),
                "use process-per-gpu, process-per-host, container-per-gpu, container-per-gpu-hostid or container-per-gpu-shared",
            ));
        }
    })
}

const SIZE_HINT: &str =
    "sizes are numbers with an optional K, M, G or T suffix, like nccl-tests: -b 8 -e 8G";

/// `-b`, `-e` and `-f` as nccl-tests reads them (shared by plan and verify): both sizes
/// parse, the first is not above the second, and the factor steps.
pub(crate) fn size_bounds(min: &str, max: &str, factor: u64) -> Result<(u64, u64)> {
    let lo = parse_size(min).map_err(|e| error::usage(format!("-b: {e}"), SIZE_HINT))?;
    let hi = parse_size(max).map_err(|e| error::usage(format!("-e: {e}"), SIZE_HINT))?;
    if lo > hi {
        return Err(error::usage(
            format!("-b {min} is larger than -e {max}"),
            SIZE_HINT,
        ));
    }
    if factor < 2 && lo != hi {
        return Err(error::usage(
            format!("-f {factor}: the step factor must be at least 2"),
            "use -f 2",
        ));
    }
    Ok((lo, hi))
}

/// Sizes from `min` to `max` multiplying by `factor`, as nccl-tests steps them.
fn sizes(min: &str, max: &str, factor: u64) -> Result<Vec<u64>> {
    let (lo, hi) = size_bounds(min, max, factor)?;
    if lo == 0 {
        return Err(error::usage("-b must be at least 1 byte", SIZE_HINT));
    }
    let mut v = vec![];
    let mut s = lo;
    while s <= hi {
        v.push(s);
        if v.len() > 4096 {
            return Err(error::usage(
                "too many sizes (more than 4096)",
                "raise -f or narrow -b/-e",
            ));
        }
        match s.checked_mul(factor) {
            Some(n) if n > s => s = n,
            _ => break,
        }
    }
    Ok(v)
}

/// Which NCCL version to model: the flag, else the library on this machine, else the default.
pub(crate) fn version_choice(flag: Option<&str>) -> Result<(NcclVersion, String)> {
    if let Some(v) = flag {
        return Ok((NcclVersion::parse(v)?, "--nccl-version".into()));
    }
    match topo_source::nccl_lib::detect() {
        Ok(d) => match NcclVersion::parse(&d.version) {
            Ok(v) => Ok((v, format!("found {} ({})", d.library, d.version))),
            Err(_) => Ok((
                DEFAULT_VERSION,
                format!(
                    "{} reports NCCL {}, which topo does not model; using {DEFAULT_VERSION}, what current PyTorch bundles",
                    d.library, d.version
                ),
            )),
        },
        Err(e) => Ok((
            DEFAULT_VERSION,
            format!("default: {e}; {DEFAULT_VERSION} is what current PyTorch bundles"),
        )),
    }
}

/// The environment a plan assumes, and where each variable came from: a profile's
/// `host.env` describes the machine's configuration, so it applies first, and the process
/// environment and `--env` win over it.
pub(crate) fn environment(
    topo: &Topology,
    overrides: &[(String, String)],
) -> (
    Vec<(String, String)>,
    std::collections::BTreeMap<String, String>,
) {
    let mut env: Vec<(String, String)> = vec![];
    let mut env_origin = std::collections::BTreeMap::new();
    if topo.source.kind == topo_model::SourceKind::Profile
        && let Some(h) = topo.hosts.first()
    {
        for (k, v) in &h.env {
            env.push((k.clone(), v.clone()));
            env_origin.insert(k.clone(), "profile host.env".to_string());
        }
    }
    let later: Vec<(String, String)> = process_env()
        .into_iter()
        .chain(overrides.iter().cloned())
        .collect();
    for (k, _) in &later {
        env_origin.remove(k);
    }
    env.extend(later);
    (env, env_origin)
}

/// The NCCL-related part of the process environment.
fn process_env() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("NCCL_") || k == "CUDA_VISIBLE_DEVICES")
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_steps() {
        assert_eq!(sizes("8", "64", 2).unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(sizes("1K", "1K", 1).unwrap(), vec![1024]);
        assert!(sizes("0", "8", 2).is_err());
        assert!(sizes("64", "8", 2).is_err());
        assert!(sizes("8", "64", 1).is_err());
        assert!(sizes("8", "1Q", 2).is_err());
    }
}
