//! `topo diagnose --fleet DIR`'s document (`topo.fleet/v1`): hosts grouped by the fingerprint
//! of their hardware facts, the largest group first as the reference, each other group with
//! what differs from it. Built by `topo_diagnose::fleet::group`.

use serde::{Deserialize, Serialize};

/// One fact that differs from the reference group.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub fact: String,
    pub reference: Option<String>,
    pub here: Option<String>,
}

/// Hosts with the same facts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Group {
    pub fingerprint: String,
    pub hosts: Vec<String>,
    /// Against the reference group; empty for the reference itself.
    pub differences: Vec<Row>,
}

/// An entry that could not be read as a source.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Unreadable {
    pub host: String,
    pub error: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fleet {
    pub schema: String,
    pub topo_version: String,
    pub folder: String,
    pub hosts: usize,
    /// The largest group first: the reference.
    pub groups: Vec<Group>,
    pub unreadable: Vec<Unreadable>,
}

impl Fleet {
    /// Whether any host stands out: a second group or an entry that could not be read.
    pub fn has_outliers(&self) -> bool {
        self.groups.len() > 1 || !self.unreadable.is_empty()
    }
}
