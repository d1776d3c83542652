//! Renderers: text views, JSON/YAML documents, DOT.

pub mod show;
