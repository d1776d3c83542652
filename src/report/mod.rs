//! Renderers: text views, JSON/YAML documents, DOT.

pub mod plan;
pub mod show;
