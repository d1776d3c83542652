//! Renderers: text views, JSON/YAML documents, DOT.

pub mod diagnose;
pub mod doc;
pub mod plan;
pub mod show;
