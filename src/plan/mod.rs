//! The Plan: everything the analysis decided, serialisable, plus its exports.

use crate::cli::PlanArgs;
use crate::model::Topology;
use crate::util::Style;
use anyhow::Result;

pub fn run(
    topo: &Topology,
    args: &PlanArgs,
    env: &[(String, String)],
    style: Style,
) -> Result<String> {
    let _ = (topo, args, env, style);
    anyhow::bail!("plan is not built yet")
}
