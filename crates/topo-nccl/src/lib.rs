//! The NCCL model: a pure function of (topology, environment policy, NCCL version).
//! No I/O here: callers pass text or structs in and get structs out.

#![forbid(unsafe_code)]

pub mod analyze;
pub mod channels;
pub mod connect;
#[cfg(any(test, feature = "testing"))]
pub mod differential;
pub mod env;
pub mod error;
pub mod graph;
pub mod graphfile;
pub mod hetero;
pub mod ifaces;
pub mod measured;
pub mod mnnvl;
pub mod paths;
pub mod plan;
pub mod search;
pub mod system;
#[cfg(any(test, feature = "testing"))]
pub mod testgen;
pub mod transport;
pub mod tuning;
pub mod types;
pub mod version;
pub mod visible;
pub mod vm;
pub mod vnic;
pub mod whatif;

pub use error::{Error, ErrorKind, Result};

/// The plan for one request, with the effect of each environment variable worked out by a
/// differential run without it ([`whatif`]): the entry point callers use.
pub fn plan(
    topo: &topo_model::Topology,
    req: &plan::PlanRequest,
    facts: analyze::RuntimeFacts,
) -> Result<plan::Plan> {
    let (analysis, mut p) = plan::analyzed(topo, req, facts.clone())?;
    whatif::env_effects(topo, req, &facts, &analysis, &mut p);
    whatif::vm_effects(topo, req, &facts, &mut p);
    whatif::unknown_effects(topo, req, &facts, &mut p);
    vm::pcie_messages(topo, &mut p);
    ordered(&mut p);
    Ok(p)
}

/// The plan's messages in the order every view gives findings (`topo_model::message::rank`:
/// severity, then the cause before its symptoms, the generic last), and its v1 `warnings[]`
/// in the order of the messages they repeat.
fn ordered(p: &mut plan::Plan) {
    topo_model::message::order(&mut p.messages);
    let at: std::collections::HashMap<&str, usize> = p
        .messages
        .iter()
        .enumerate()
        .rev()
        .map(|(i, m)| (m.text.as_str(), i))
        .collect();
    let mut warnings = std::mem::take(&mut p.warnings);
    warnings.sort_by_key(|w| at.get(w.as_str()).copied().unwrap_or(usize::MAX));
    p.warnings = warnings;
}

/// [`plan`] of a topology the caller gives up, so the analysis need not copy it (over 100 MB
/// at 32,768 GPUs). With variables in the environment the what-if runs need the topology as
/// given, and so does the run on a VM topology with its artefacts repaired ([`vm`]) or with
/// the GPUDirect RDMA or port speed its source leaves unstated ([`whatif::unknown_effects`]):
/// then this is
/// [`plan`].
///
/// The analysis comes back too, when the plan was made from it alone, for the caller to free
/// when it suits: at 32,768 GPUs freeing it takes as long as writing a tenth of the plan.
pub fn plan_owned(
    topo: topo_model::Topology,
    req: &plan::PlanRequest,
    facts: analyze::RuntimeFacts,
) -> Result<(plan::Plan, Option<analyze::Analysis>)> {
    if !req.env.is_empty()
        || vm::found(&topo)
        || whatif::gdr_unknown(&topo)
        || whatif::speed_unknown(&topo)
    {
        return Ok((plan(&topo, req, facts)?, None));
    }
    let (analysis, mut p) = plan::analyzed_owned(topo, req, facts.clone())?;
    // An empty environment has no effects to work out: no differential run reads the topology.
    debug_assert!(p.env.is_empty());
    whatif::env_effects(&analysis.topo, req, &facts, &analysis, &mut p);
    vm::pcie_messages(&analysis.topo, &mut p);
    ordered(&mut p);
    Ok((p, Some(analysis)))
}
