//! Hardware profiles: YAML descriptions of reference machines (profiles/*.yaml).

use crate::model::Topology;
use anyhow::Result;
use std::path::Path;

pub fn load_builtin(name: &str) -> Result<Topology> {
    let _ = name;
    anyhow::bail!("profiles are not built yet")
}

pub fn load_file(path: &Path) -> Result<Topology> {
    let _ = path;
    anyhow::bail!("profiles are not built yet")
}
