//! Renderers: text views, JSON/YAML documents, DOT.

pub mod diagnose;
pub mod show;
