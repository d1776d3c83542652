//! `topo diff A B`: the hardware differences between two machines (any two sources), and
//! what they change in NCCL's plan. Both sides are loaded and planned here;
//! `topo_diagnose::diff` compares them (`topo.diff/v1`) and `topo_report::{diff, html}` write
//! it. Exit 0 when alike, 1 when they differ, like diff(1).

use crate::cli::{DiffArgs, DiffFormat};
use crate::error;
use crate::output::emit;
use crate::util::{Style, escape_document};
use anyhow::Result;
use topo_model::Topology;
use topo_nccl::analyze::RuntimeFacts;
use topo_nccl::plan::{Plan, PlanRequest};
use topo_report::html::InputFile;
use topo_source::SourceSpec;
use topo_vocab::Collective;

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
    super::plan::plain_request(topo, vec![Collective::AllReduce], sizes, v, &[])
}

/// One side's plan, or why it has none.
fn plan(t: &Topology, a: &DiffArgs) -> std::result::Result<Plan, String> {
    let planned = || -> Result<Plan> {
        let req = request(t, a)?;
        Ok(topo_nccl::plan(t, &req, RuntimeFacts::default())?)
    };
    planned().map_err(|e| format!("{e:#}"))
}

pub fn run(a: &DiffArgs, style: Style) -> Result<i32> {
    let sa = spec(&a.a, a.nodes)?;
    let ta = topo_source::load(&sa)?;
    let sb = spec(&a.b, a.nodes)?;
    let tb = topo_source::load(&sb)?;
    let plans = match plan(&ta, a) {
        Ok(pa) => (Ok(pa), plan(&tb, a)),
        // B is not planned when A cannot be: the document names A's reason only.
        Err(e) => (Err(e), Err(String::new())),
    };
    let doc = topo_diagnose::diff::build((&a.a, &ta), (&a.b, &tb), plans);
    let text = match a.format {
        DiffFormat::Json => topo_report::diff::json(&doc)?,
        DiffFormat::Text => {
            escape_document(&topo_report::diff::text(&doc, style), style.color).into_owned()
        }
        DiffFormat::Html => {
            let inputs = vec![input(&a.a, &sa, "A"), input(&a.b, &sb, "B")];
            let mut buf = Vec::new();
            topo_report::html::diff(&mut buf, &doc, &super::report::page_provenance(inputs))?;
            String::from_utf8(buf)?
        }
    };
    emit(a.output.as_ref(), &text)?;
    Ok(i32::from(doc.differ()))
}

/// A side as an input of the page: a file with its hash, or the profile or machine it names.
fn input(arg: &str, s: &SourceSpec, role: &str) -> InputFile {
    match (&s.from, &s.profile) {
        (Some(p), _) => super::report::input_file(role, p),
        (None, name) => InputFile {
            role: role.into(),
            name: arg.into(),
            bytes: None,
            sha256: None,
            note: Some(match name {
                Some(_) => format!("built into topo {}", env!("CARGO_PKG_VERSION")),
                None => "this machine, read live".into(),
            }),
        },
    }
}
