//! Errors that reach the user: one line, an exit code, and where it helps a hint.
//!
//! Library code returns `anyhow::Result` with context; a [`Failure`] anywhere in the chain
//! decides the exit code (contract: 1 check failed, 2 bad usage or unreadable input,
//! 3 missing runtime component). Anything else exits 2.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    CheckFailed = 1,
    Usage = 2,
    MissingRuntime = 3,
    /// stdout is a pipe its reader closed (`topo show | head -1`): exit quietly with the
    /// status a shell reports for a command killed by SIGPIPE (128 + 13), as `cat` or `grep`
    /// would, so the reader's choice to stop is not an error message but a pipeline with
    /// `set -o pipefail` still sees that the output was not all read.
    BrokenPipe = 141,
}

#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl Failure {
    pub fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            message: message.into(),
            hint: None,
        }
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = Some(hint.into());
        self
    }
}

/// Bad usage or unreadable input (exit 2), with a hint line.
pub fn usage(message: impl Into<String>, hint: impl Into<String>) -> anyhow::Error {
    Failure::new(Exit::Usage, message).hint(hint).into()
}

/// The exit code and optional hint an error chain carries.
pub fn classify(err: &anyhow::Error) -> (Exit, Option<String>) {
    for cause in err.chain() {
        if let Some(f) = cause.downcast_ref::<Failure>() {
            return (f.exit, f.hint.clone());
        }
    }
    (Exit::Usage, None)
}

/// The error chain as one line: `outer: inner: innermost`, newlines folded. I/O errors read
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

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

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
}
