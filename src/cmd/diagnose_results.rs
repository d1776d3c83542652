//! `topo diagnose --nccl-tests FILE`: reads nccl-tests output (text or `-J` JSON, `-` and
//! pipes too) and hands it, with the flags parsed, to `topo-diagnose`
//! (`results/infer.rs`), which works out the run and plans it, and to its judge
//! (`results.rs`). The binary reads files and maps a GPU name to a built-in profile.

use crate::error;
use anyhow::Result;
use std::path::Path;
use topo_diagnose::results::infer::{self, Judgeable, Refusal, Request};
use topo_model::Topology;
use topo_nccl::version::NcclVersion;
use topo_source::{SourceSpec, nccllog, nccltests, textfile};
use topo_vocab::Collective;

pub use infer::ResultsFile;

pub fn read(p: &Path, budget: &mut textfile::TextBudget) -> Result<ResultsFile> {
    let text = textfile::read_text(p, "nccl-tests result")?;
    budget.take(p, text.len() as u64)?;
    let name = super::diagnose_logs::short_name(p);
    let results = nccltests::parse(&text).map_err(|why| {
        error::usage(
            format!("cannot read --nccl-tests {}: {why}", p.display()),
            "pass the output of an nccl-tests binary (all_reduce_perf ...), as printed or as its -J JSON file",
        )
    })?;
    // NCCL_DEBUG=INFO lines in the same output are a log of the same run.
    let logs = nccllog::parse_jobs(&text)
        .into_iter()
        .filter(|l| l.nccl_lines > 0)
        .map(|l| (name.clone(), l))
        .collect();
    Ok(ResultsFile {
        name,
        results,
        logs,
    })
}

/// The machine to judge against when the user gave none: the profile of the GPU the rank
/// lines name, with as many nodes as they name hosts.
pub fn inferred_spec(files: &[ResultsFile]) -> Result<(SourceSpec, String)> {
    let m = infer::inferred_machine(files, |gpu| {
        topo_source::profile::for_gpu_name(gpu).map(str::to_string)
    })
    .map_err(refusal)?;
    let spec = SourceSpec {
        profile: Some(m.profile),
        nodes: Some(m.nodes),
        ..Default::default()
    };
    Ok((spec, m.how))
}

/// Every test of every file, with the plan rows it is judged against.
pub fn inputs(
    files: &[ResultsFile],
    topo: &Topology,
    machine: &str,
    a: &crate::cli::DiagnoseArgs,
) -> Result<Judgeable> {
    let req = Request {
        collective: a.collective.as_deref().map(collective).transpose()?,
        nccl_version: a
            .nccl_version
            .as_deref()
            .map(NcclVersion::parse)
            .transpose()?,
        env: a.source.env_overrides()?,
    };
    infer::inputs(files, topo, machine, &req).map_err(refusal)
}

fn collective(c: &str) -> Result<Collective> {
    Collective::parse(c).ok_or_else(|| {
        error::usage(
            format!("--collective {c}: not a collective"),
            "use allreduce, allgather, reducescatter, broadcast, reduce, alltoall or sendrecv",
        )
    })
}

fn refusal(e: Refusal) -> anyhow::Error {
    match e {
        Refusal::Usage { message, hint } => error::usage(message, hint),
        Refusal::Plan(e) => e.into(),
    }
}
