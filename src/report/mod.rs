//! Renderers: text views, JSON/YAML documents, DOT.

pub mod diagnose;
pub mod plan;
pub mod show;
