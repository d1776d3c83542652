//! The error this crate returns: what cannot be modelled or planned, and of which kind, so a
//! caller can word the fix in its own terms. Nothing here knows about a command line.

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// One line: `<what>: <why>`.
    pub message: String,
    pub kind: ErrorKind,
    /// Advice that holds whatever the caller is (accepted values, what to relax).
    pub help: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An NCCL version that is malformed or not modelled.
    Version,
    /// A value of the NCCL environment variable `name` that NCCL would refuse.
    Env { name: String },
    /// The topology has no GPU to plan for; `live` when it is the machine topo runs on.
    NoGpu { live: bool },
    /// NVLink is unknown for some GPUs, and every figure of a plan depends on it.
    NvlinkUnknown,
    /// A request the model cannot answer (an untuned collective, no algorithm left).
    Request,
    /// The built-in per-version data is inconsistent: a bug in topo.
    Data,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            message: message.into(),
            kind,
            help: None,
        }
    }

    pub fn help(mut self, help: impl Into<String>) -> Error {
        self.help = Some(help.into());
        self
    }

    pub(crate) fn data(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Data, message)
    }
}
