//! `topo diff A B`: the hardware differences between two machines (any two sources), and
//! what they change in NCCL's plan. Exit 0 when alike, 1 when they differ, like diff(1).

use crate::cli::{DiffArgs, DiffFormat};
use crate::error;
use crate::output::emit;
use crate::util::{Style, escape_document};
use anyhow::Result;
use serde::Serialize;
use std::fmt::Write as _;
use topo_model::Topology;
use topo_model::inventory::{self, Difference};
use topo_nccl::analyze::RuntimeFacts;
use topo_nccl::plan::PlanRequest;
use topo_nccl::types::Func;
use topo_source::SourceSpec;

#[derive(Serialize)]
struct Side {
    arg: String,
    kind: topo_model::SourceKind,
    hosts: usize,
}

#[derive(Serialize)]
struct DiffRow {
    fact: String,
    a: Option<String>,
    b: Option<String>,
}

#[derive(Serialize)]
struct DiffDoc {
    schema: &'static str,
    topo_version: &'static str,
    a: Side,
    b: Side,
    /// Host 0 of each side, fact by fact.
    hardware: Vec<DiffRow>,
    nccl_version: String,
    /// What the differences change in the plan (B against A); empty: nothing.
    plan_changes: Vec<String>,
    /// Why the plans could not be compared, when they could not.
    plan_error: Option<String>,
}

/// A source named on the command line: a file or folder, `profile:NAME` or a built-in
/// profile name, or `live` for this machine.
fn spec(arg: &str, nodes: Option<usize>) -> Result<SourceSpec> {
    crate::cli::check_nodes(nodes)?;
    if arg == "live" {
        return Ok(SourceSpec {
            nodes,
            ..Default::default()
        });
    }
    let s = topo_source::hosts::parse_source(arg).map_err(|e| {
        error::usage(
            e.message,
            "pass two sources: files or folders (XML, snapshot, matrix, profile YAML), profile:NAME, or live",
        )
    })?;
    Ok(SourceSpec { nodes, ..s })
}

fn request(topo: &Topology, a: &DiffArgs) -> Result<PlanRequest> {
    let sizes = (10..=33).map(|p| 1u64 << p).collect();
    let v = a.nccl_version.as_deref();
    super::plan::plain_request(topo, vec![Func::AllReduce], sizes, v, &[])
}

/// The plans of both sides compared, or why they cannot be.
fn plan_changes(
    ta: &Topology,
    tb: &Topology,
    a: &DiffArgs,
) -> (String, Vec<String>, Option<String>) {
    let plan = |t: &Topology| -> Result<topo_nccl::plan::Plan> {
        let req = request(t, a)?;
        Ok(topo_nccl::plan(t, &req, RuntimeFacts::default())?)
    };
    match (plan(ta), plan(tb)) {
        (Ok(pa), Ok(pb)) => {
            let v = pa.nccl_version.clone();
            (v, topo_nccl::whatif::compare(&pa, &pb), None)
        }
        (Err(e), _) => (
            String::new(),
            vec![],
            Some(format!("A cannot be planned: {e:#}")),
        ),
        (_, Err(e)) => (
            String::new(),
            vec![],
            Some(format!("B cannot be planned: {e:#}")),
        ),
    }
}

pub fn run(a: &DiffArgs, style: Style) -> Result<i32> {
    let ta = topo_source::load(&spec(&a.a, a.nodes)?)?;
    let tb = topo_source::load(&spec(&a.b, a.nodes)?)?;
    let side = |arg: &str, t: &Topology| Side {
        arg: arg.to_string(),
        kind: t.source.kind,
        hosts: t.hosts.len(),
    };
    let hardware: Vec<Difference> = inventory::diff(
        &inventory::host_facts(&ta, 0),
        &inventory::host_facts(&tb, 0),
    );
    let (nccl_version, plan_changes, plan_error) = plan_changes(&ta, &tb, a);
    let doc = DiffDoc {
        schema: "topo.diff/v1",
        topo_version: env!("CARGO_PKG_VERSION"),
        a: side(&a.a, &ta),
        b: side(&a.b, &tb),
        hardware: hardware
            .into_iter()
            .map(|d| DiffRow {
                fact: d.fact,
                a: d.a,
                b: d.b,
            })
            .collect(),
        nccl_version,
        plan_changes,
        plan_error,
    };
    let differ = !doc.hardware.is_empty() || !doc.plan_changes.is_empty();
    let text = match a.format {
        DiffFormat::Json => {
            let mut buf = Vec::new();
            topo_report::doc::json_to(&mut buf, &doc)?;
            String::from_utf8(buf)?
        }
        DiffFormat::Text => escape_document(&render(&doc, style), style.color).into_owned(),
    };
    emit(a.output.as_ref(), &text)?;
    Ok(i32::from(differ))
}

fn render(d: &DiffDoc, style: Style) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} A = {} ({}), B = {} ({})",
        style.bold("topo diff"),
        d.a.arg,
        d.a.kind,
        d.b.arg,
        d.b.kind
    );
    if d.a.hosts > 1 || d.b.hosts > 1 {
        let _ = writeln!(
            out,
            "note: hosts 0 of each side are compared ({} and {} hosts)",
            d.a.hosts, d.b.hosts
        );
    }
    let _ = writeln!(out, "\n{} ({})", style.bold("Hardware"), d.hardware.len());
    if d.hardware.is_empty() {
        let _ = writeln!(out, "  no difference in the facts both sources give");
    }
    let cell = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
    let w = d.hardware.iter().map(|r| r.fact.len()).max().unwrap_or(0);
    let wa = d
        .hardware
        .iter()
        .map(|r| cell(&r.a).len())
        .max()
        .unwrap_or(0);
    for r in &d.hardware {
        let _ = writeln!(out, "  {:w$}  {:wa$}  {}", r.fact, cell(&r.a), cell(&r.b));
    }
    let _ = writeln!(
        out,
        "\n{} (NCCL {}, AllReduce 1 KiB to 8 GiB, B against A)",
        style.bold("Plan"),
        d.nccl_version
    );
    match &d.plan_error {
        Some(e) => {
            let _ = writeln!(out, "  not compared: {e}");
        }
        None if d.plan_changes.is_empty() => {
            let _ = writeln!(
                out,
                "  the same channels, transports, NICs, choices and predicted times"
            );
        }
        None => {
            for c in &d.plan_changes {
                let _ = writeln!(out, "  {c}");
            }
        }
    }
    out
}
