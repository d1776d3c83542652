//! `topo diff A B`'s document (`topo.diff/v1`): the hardware facts of host 0 of each side
//! compared (`topo_model::inventory`), and what they change in NCCL's plan, compared the way
//! the what-if compares (`topo_nccl::whatif::compare`). The binary loads both sides and plans
//! them; this puts the two together.

use topo_model::Topology;
use topo_model::inventory;
use topo_nccl::plan::Plan;

pub const SCHEMA: &str = topo_documents::schema::DIFF;

pub use topo_documents::diff::{Diff, DiffRow, Side};

/// The side named `arg` on the command line, read as `t`.
pub fn side(arg: &str, t: &Topology) -> Side {
    Side {
        arg: arg.to_string(),
        kind: t.source.kind,
        hosts: t.hosts.len(),
    }
}

/// The document of sides `a` and `b` (named as given) with their plans, or why each could not
/// be planned.
pub fn build(
    (a, ta): (&str, &Topology),
    (b, tb): (&str, &Topology),
    plans: (Result<Plan, String>, Result<Plan, String>),
) -> Diff {
    let hardware = inventory::diff(&inventory::host_facts(ta, 0), &inventory::host_facts(tb, 0))
        .into_iter()
        .map(|d| DiffRow {
            fact: d.fact,
            a: d.a,
            b: d.b,
        })
        .collect();
    let (nccl_version, plan_changes, plan_error) = match plans {
        (Ok(pa), Ok(pb)) => (
            pa.nccl_version.clone(),
            topo_nccl::whatif::compare(&pa, &pb),
            None,
        ),
        (Err(e), _) => (
            String::new(),
            vec![],
            Some(format!("A cannot be planned: {e}")),
        ),
        (_, Err(e)) => (
            String::new(),
            vec![],
            Some(format!("B cannot be planned: {e}")),
        ),
    };
    Diff {
        schema: SCHEMA.into(),
        topo_version: env!("CARGO_PKG_VERSION").into(),
        a: side(a, ta),
        b: side(b, tb),
        hardware,
        nccl_version,
        plan_changes,
        plan_error,
    }
}
