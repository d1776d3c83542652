//! The error this crate's public functions return: what is wrong with an input, and what kind
//! of input it was. Callers word the fix in their own terms (flags, file names); nothing here
//! knows about a command line.

use std::fmt;

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// One line: `<what failed>: <why>`, with the context it was reached through.
    pub message: String,
    pub kind: ErrorKind,
}

/// What was being read or written when it failed, which decides the fix a caller suggests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A path given as a source that cannot be read, or is of no kind topo reads.
    Input,
    /// A source path that is neither a regular file nor a folder (a device, a FIFO).
    NotAFile,
    /// An NCCL topology XML that cannot be read or parsed.
    NcclXml,
    /// A file cut before anything usable (a topology XML that stops before its first GPU).
    CutFile,
    /// A profile YAML file that cannot be read.
    ProfileFile,
    /// A profile that does not parse or does not follow the schema.
    ProfileSchema,
    /// A built-in profile name that does not exist (the profile module lists the names).
    UnknownProfile,
    /// A text source (NCCL log, nvidia-smi matrix) that cannot be read or is binary.
    TextFile,
    /// A text source larger than any worth reading whole.
    TextTooLarge,
    /// An NCCL log with neither a `=== System` block nor Init lines naming bus ids.
    LogWithoutTopology,
    /// Text that is not an `nvidia-smi topo -m` matrix.
    SmiMatrix,
    /// A snapshot that cannot be read.
    Snapshot,
    /// The sysfs root given for discovery or capture is not a folder.
    SysfsRoot,
    /// The place a snapshot should be written to cannot take it.
    SnapshotOutput,
    /// Writing a snapshot failed (permissions, a full disk).
    SnapshotWrite,
    /// One host with more devices of a kind than one NCCL node can hold.
    HostTooLarge,
    /// A topology whose NCCL path tables (device pairs per host) exceed the work budget.
    TooMuchWork,
    /// More GPUs in all than topo models.
    TooManyGpus,
    /// Replicating the topology `nodes` times would exceed the GPU or work budget;
    /// `max_nodes` fit.
    Replication { nodes: usize, max_nodes: usize },
    /// Anything else, such as an I/O failure while writing.
    Other,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            message: message.into(),
            kind,
        }
    }
}

/// Inside the crate errors travel as `anyhow` chains (for `context`); a typed [`Error`] in the
/// chain keeps its kind, and the chain's text becomes the message.
impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Error {
        let kind = e
            .chain()
            .find_map(|c| c.downcast_ref::<Error>())
            .map_or(ErrorKind::Other, |t| t.kind);
        Error {
            message: one_line(&e),
            kind,
        }
    }
}

/// The kind of the typed error an `anyhow` chain carries, if any: `None` means the error is
/// not about the input (a bug, or an I/O failure while writing).
pub fn kind(err: &anyhow::Error) -> Option<ErrorKind> {
    err.chain()
        .find_map(|c| c.downcast_ref::<Error>())
        .map(|e| e.kind)
}

/// A typed error as an `anyhow` chain link, for code inside the crate.
pub(crate) fn fail(kind: ErrorKind, message: impl Into<String>) -> anyhow::Error {
    Error::new(kind, message).into()
}

/// An error chain as one line: `outer: inner: innermost`, newlines folded. I/O errors read
/// like the rest (`no such file or directory`, not `No such file or directory (os error 2)`).
pub fn one_line(err: &anyhow::Error) -> String {
    let s = err
        .chain()
        .map(|cause| match cause.downcast_ref::<std::io::Error>() {
            Some(e) => io_reason(e),
            None => cause.to_string(),
        })
        .collect::<Vec<_>>()
        .join(": ");
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Longest excerpt of a file an error message quotes.
pub const MAX_EXCERPT_CHARS: usize = 40;

/// `msg` with every `"..."` excerpt a parser quoted (serde's `invalid type: string "..."`)
/// cut to [`MAX_EXCERPT_CHARS`] and its control and bidi characters escaped: an error may
/// show where a file went wrong, never whole lines of it.
pub fn short_quotes(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(512));
    let mut parts = msg.split('"');
    if let Some(first) = parts.next() {
        out.push_str(first);
    }
    for (i, part) in parts.enumerate() {
        out.push('"');
        // Odd pieces are inside quotes (a stray last quote leaves an unclosed one: cut too).
        if i % 2 == 0 && part.chars().count() > MAX_EXCERPT_CHARS {
            let cut: String = part.chars().take(MAX_EXCERPT_CHARS).collect();
            out.push_str(&crate::escape::escape_controls(&cut));
            out.push('…');
        } else {
            out.push_str(&crate::escape::escape_controls(part));
        }
    }
    out
}

/// `std::io::Error` text without the "(os error N)" tail, lowercase like every other message.
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => {
            let s = e.to_string();
            s.split(" (os error").next().unwrap_or(&s).to_lowercase()
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn quoted_excerpts_are_short_and_escaped() {
        let line = format!("root:$6${}:19000:0:99999:7:::", "s".repeat(90));
        let msg = format!("invalid type: string \"{line}\", expected struct Profile");
        let short = short_quotes(&msg);
        assert_eq!(
            short,
            format!(
                "invalid type: string \"{}…\", expected struct Profile",
                &line[..40]
            )
        );
        assert_eq!(
            short_quotes("unknown field \"a\u{202e}b\""),
            "unknown field \"a\\u{202e}b\""
        );
        assert_eq!(short_quotes("no quotes"), "no quotes");
    }

    #[test]
    fn io_errors_read_like_the_rest() {
        let io = std::io::Error::from_raw_os_error(28);
        let err = Err::<(), _>(io)
            .context("cannot write x.tar.gz")
            .unwrap_err();
        assert_eq!(
            one_line(&err),
            "cannot write x.tar.gz: no space left on device"
        );
        let err = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::NotFound))
            .context("cannot read a.xml");
        assert_eq!(
            one_line(&err),
            "cannot read a.xml: no such file or directory"
        );
        let err = anyhow::anyhow!("line 1\n  more").context("outer");
        assert_eq!(one_line(&err), "outer: line 1 more");
    }

    #[test]
    fn a_typed_error_keeps_its_kind_through_context() {
        let e = fail(ErrorKind::Snapshot, "bad meta").context("cannot read x.tar.gz");
        let e = Error::from(e);
        assert_eq!(e.kind, ErrorKind::Snapshot);
        assert_eq!(e.message, "cannot read x.tar.gz: bad meta");
    }
}
