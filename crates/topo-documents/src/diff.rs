//! `topo diff A B`'s document (`topo.diff/v1`): host 0 of each side fact by fact, and what the
//! differences change in NCCL's plan. Built by `topo_diagnose::diff::build`.

use crate::SourceKind;
use serde::{Deserialize, Serialize};

/// One side as named on the command line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Side {
    pub arg: String,
    pub kind: SourceKind,
    pub hosts: usize,
}

/// One fact that differs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DiffRow {
    pub fact: String,
    pub a: Option<String>,
    pub b: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Diff {
    pub schema: String,
    pub topo_version: String,
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
