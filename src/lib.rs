//! topo: how the GPUs in a box are connected, what NCCL will do on it, and how fast a
//! collective should be.
//!
//! Pipeline: `source` → [`model::Topology`] → `nccl` (pure analysis) → `plan` →
//! `report` / XML / tuner CSV. See docs/ARCHITECTURE.md.

pub mod cli;
pub mod error;
pub mod model;
pub mod nccl;
pub mod output;
pub mod plan;
pub mod report;
pub mod source;
pub mod util;
