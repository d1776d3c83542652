//! The NCCL model: a pure function of (topology, environment policy, NCCL version).
//! No I/O here: callers pass text or structs in and get structs out.

pub mod analyze;
pub mod channels;
pub mod connect;
pub mod differential;
pub mod env;
pub mod graph;
pub mod graphfile;
pub mod paths;
pub mod search;
pub mod system;
pub mod testgen;
pub mod transport;
pub mod tuning;
pub mod types;
pub mod version;
pub mod xml;
