//! topo's embedded collective runtime.
//!
//! The crate takes typed values (never CLI types): a [`CollectivePlan`] says what NCCL would do
//! (algorithm, protocol, channels, rings, trees, chunk size), [`schedule::schedule`] turns it
//! into per-rank step lists, a [`transport::Transport`] moves the bytes, a launcher
//! ([`launch`]) starts the ranks, and [`job::Job::run`] runs an nccl-tests style sweep and
//! returns typed rows, a text renderer and the `topo.verify/v1` JSON struct.
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod adapt;
mod auth;
pub mod calibrate;
pub mod cuda;
pub mod error;
pub mod exec;
pub mod hostmodel;
pub mod job;
pub mod kernels;
pub mod launch;
pub mod protocol;
mod rendezvous;
pub mod schedule;
pub mod transport;
pub mod types;
pub mod verify;
mod wire;

/// The rendezvous' SHA-256 (checked against FIPS 180's examples), also what `topo report`
/// fingerprints its inputs with: one implementation, no hashing crate.
pub use auth::sha256;
pub use error::{Result, RuntimeError};
pub use types::*;
