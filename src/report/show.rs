//! `topo show`: summary, matrix, pci, paths and dot views; JSON/YAML documents.

use crate::cli::{DataFormat, ShowView};
use crate::model::Topology;
use crate::util::Style;
use anyhow::Result;

pub fn render(topo: &Topology, view: ShowView, format: DataFormat, style: Style) -> Result<String> {
    let _ = (topo, view, format, style);
    anyhow::bail!("show is not built yet")
}
