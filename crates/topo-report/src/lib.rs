//! topo's renderers: text views, JSON/YAML documents, DOT and SVG pictures, one module per
//! document. Each takes what the analysis computed and a [`Style`] and returns text (or
//! writes a document into a writer); none reads a file, the environment or a terminal, and
//! none exits: the binary picks the renderer, the width and colour, and where output goes.
#![forbid(unsafe_code)]

pub mod diagnose;
pub mod diff;
pub mod doc;
pub mod fit;
pub mod fleet;
pub mod hang;
pub mod html;
mod layout;
mod options;
pub mod ordered;
pub mod plan;
pub mod show;
pub mod svg;
pub mod util;
pub mod warnings;

pub use options::{DEFAULT_WIDTH, ShowView, Style};

/// What a renderer can fail at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A document could not be encoded (a JSON or YAML serializer's error).
    #[error("cannot encode the document: {0}")]
    Encode(String),
    /// The plot library could not draw.
    #[error("cannot draw the plot: {0}")]
    Plot(String),
    /// Writing the output failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T> = std::result::Result<T, Error>;
