//! The vocabulary shared by the NCCL model, the log reader, the diagnosis and the runtime:
//! collectives, algorithms, protocols, transports, path types, data types, reductions, nccl-tests' bus
//! factor and size strings, and the codes documents carry. No I/O and no dependencies (serde
//! behind a feature), so every crate can name these things the same way and match on them
//! instead of on their text.
#![forbid(unsafe_code)]

mod algorithm;
mod code;
mod collective;
mod data;
pub mod fabric;
mod path;
#[cfg(feature = "serde")]
mod serde_impl;
mod severity;
mod size;
mod transport;
mod unknown;

pub use algorithm::{Algorithm, Protocol};
pub use code::Code;
pub use collective::{Collective, bus_factor};
pub use data::{DataType, Reduction};
pub use fabric::{Fabric, FabricFacts};
pub use path::PathType;
#[cfg(feature = "serde")]
pub use serde_impl::{macro_name, nccl_tests_name, printed};
pub use severity::Severity;
pub use size::{parse_size, size_label};
pub use transport::{Net, P2p, Transport};
pub use unknown::Unknown;
