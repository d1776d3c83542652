//! The runtime's error type: lowercase fragments with context.
use thiserror::Error;

/// Everything that can go wrong below the CLI.
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// The plan handed in is inconsistent (rings not a permutation, trees broken, ...).
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
    /// The plan asks for something the host backend does not run.
    #[error("not supported on the host backend: {0}")]
    Unsupported(String),
    /// A peer rank disappeared (process exited, socket closed, thread panicked).
    #[error("lost rank {rank}: {why}")]
    PeerLost { rank: usize, why: String },
    /// Waiting for a peer took longer than the configured timeout.
    #[error("timed out after {secs:.1} s waiting for {what}")]
    Timeout { what: String, secs: f64 },
    /// Rendezvous failed (wrong token, world size mismatch, port in use, ...).
    #[error("rendezvous: {0}")]
    Rendezvous(String),
    /// The launcher environment is missing or inconsistent.
    #[error("launch: {0}")]
    Launch(String),
    /// A CUDA driver, NVRTC or NCCL call failed, or a kernel reported a failure.
    #[error("cuda: {0}")]
    Device(String),
    /// The request needs more memory than the host may give it (checked before allocating).
    #[error("{0}")]
    TooLarge(String),
    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl RuntimeError {
    /// Wrap an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: impl Into<std::io::Error>) -> Self {
        RuntimeError::Io {
            context: context.into(),
            source: source.into(),
        }
    }
}

/// Result alias for the crate.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
