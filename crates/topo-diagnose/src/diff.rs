//! `topo diff A B`'s document (`topo.diff/v1`): the hardware facts of host 0 of each side
//! compared (`topo_model::inventory`), and what they change in NCCL's plan, compared the way
//! the what-if compares (`topo_nccl::whatif::compare`). The binary loads both sides and plans
//! them; this puts the two together.

use serde::Serialize;
use topo_model::Topology;
use topo_model::inventory;
use topo_nccl::plan::Plan;

pub const SCHEMA: &str = topo_vocab::schema::DIFF;

/// One side as named on the command line.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    pub arg: String,
    pub kind: topo_model::SourceKind,
    pub hosts: usize,
}

impl Side {
    pub fn new(arg: &str, t: &Topology) -> Side {
        Side {
            arg: arg.to_string(),
            kind: t.source.kind,
            hosts: t.hosts.len(),
        }
    }
}

/// One fact that differs.
#[derive(Clone, Debug, Serialize)]
pub struct DiffRow {
    pub fact: String,
    pub a: Option<String>,
    pub b: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    pub schema: &'static str,
    pub topo_version: &'static str,
    pub a: Side,
    pub b: Side,
    /// Host 0 of each side, fact by fact.
    pub hardware: Vec<DiffRow>,
    pub nccl_version: String,
    /// What the differences change in the plan (B against A); empty: nothing.
    pub plan_changes: Vec<String>,
    /// Why the plans could not be compared, when they could not.
    pub plan_error: Option<String>,
}

impl Diff {
    /// Whether the two differ in hardware or in the plan (diff(1)'s exit 1).
    pub fn differ(&self) -> bool {
        !self.hardware.is_empty() || !self.plan_changes.is_empty()
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
        schema: SCHEMA,
        topo_version: env!("CARGO_PKG_VERSION"),
        a: Side::new(a, ta),
        b: Side::new(b, tb),
        hardware,
        nccl_version,
        plan_changes,
        plan_error,
    }
}
