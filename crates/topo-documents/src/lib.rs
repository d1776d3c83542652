//! What scripts rely on: the machine-readable documents topo writes, as plain data that
//! serializes to the document and deserializes back from it, each with its schema id, and the
//! binary's exit codes (issue 42 item 4, in the manner of nextest-metadata). A script or a
//! test reads a document typed through these types, and a change to a document is a change to
//! this crate, which `docs/schema/` and README's exit-code table are checked against.
//!
//! Only serde and the vocabulary: no model, no reader, no renderer. The crates that build a
//! document fill these types (their builders and the judgements behind them stay there) and
//! re-export them where they used to live.
//!
//! Not here yet: `topo.show/v1` (topo-report's `show/doc.rs` streams it from borrowed views) and
//! `topo.plan/v3` (topo-nccl's `Plan` is the domain object and the document at once).
#![forbid(unsafe_code)]

pub mod calibrate;
pub mod diagnose;
pub mod diff;
pub mod exit;
pub mod finding;
pub mod fleet;
pub mod hang;
pub mod schema;
pub mod snapshot;
pub mod source;
pub mod verify;

pub use exit::Exit;
pub use finding::Finding;
pub use source::SourceKind;
