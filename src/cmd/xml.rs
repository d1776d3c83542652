//! `topo xml`: NCCL_TOPO_FILE-compatible topology XML.

use crate::cli::XmlArgs;
use crate::output::{emit, print_warnings, warn, warn_unused_env};
use crate::request::{Hosts, Request};
use crate::util::{Style, escape_document};
use anyhow::Result;

pub fn run(a: &XmlArgs, style: Style) -> Result<()> {
    let req = Request::build(&a.source, Hosts::One)?;
    warn_unused_env("xml", &req.env, style);
    let topo = req.load(false, false)?.topo;
    print_warnings(&topo, style);
    if let Some(at) = &topo.source.cut {
        // NCCL takes a topology file as the whole machine: the devices after the cut would
        // vanish from its view, so the part that show and plan can read is not written.
        return Err(crate::error::usage(
            format!(
                "the input is cut at {at}: a topology file written from it would hide every device after the cut from NCCL"
            ),
            "dump the topology again (NCCL_TOPO_DUMP_FILE, or topo xml on the machine); topo show and topo plan read the part before the cut",
        ));
    }
    if topo.gpus().is_empty() {
        // A GPU-less NCCL_TOPO_FILE is valid XML but rarely what was meant.
        warn(
            style,
            "the topology has no GPU, so the XML lists none (NCCL adds GPUs it finds at run time)",
        );
    }
    let text = topo_source::write_nccl_xml(&topo)?;
    // XML 1.0 allows no control characters but tab and line breaks; escaping the others
    // keeps the file valid and a terminal showing it safe.
    emit(a.output.as_ref(), &escape_document(&text, false))
}
