//! Renderers: text views, JSON/YAML documents, DOT, SVG pictures.

pub mod diagnose;
pub mod doc;
pub mod fit;
pub mod ordered;
pub mod plan;
pub mod show;
pub mod svg;
