//! Renderers: text views, JSON/YAML documents, DOT.

pub mod diagnose;
pub mod fit;
pub mod plan;
pub mod show;
