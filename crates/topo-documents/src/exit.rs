//! The binary's exit codes, the other thing scripts rely on besides the documents.

/// The binary's exit status, as README's "Exit codes" table gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// A check the user asked for failed (`--fail-on`, wrong results, `--expect`).
    CheckFailed = 1,
    Usage = 2,
    /// CUDA, NVML, NCCL or verbs asked for and not loadable here.
    MissingRuntime = 3,
    /// A collective run that failed while running: a rank lost, a wait past its deadline, a
    /// rendezvous broken, a device error. Not the user's input, so not 2.
    RuntimeFault = 4,
    /// stdout is a pipe its reader closed (`topo show | head -1`): exit quietly with the
    /// status a shell reports for a command killed by SIGPIPE (128 + 13), as `cat` or `grep`
    /// would, so the reader's choice to stop is not an error message but a pipeline with
    /// `set -o pipefail` still sees that the output was not all read.
    BrokenPipe = 141,
    /// A panic: a bug in topo, reported as an `internal error` line with a hint to report it.
    /// 101, as Rust's own runtime exits for a panicking `main`.
    Internal = 101,
}

impl Exit {
    /// Every exit status but success, in README's order.
    pub const ALL: [Exit; 6] = [
        Exit::CheckFailed,
        Exit::Usage,
        Exit::MissingRuntime,
        Exit::RuntimeFault,
        Exit::Internal,
        Exit::BrokenPipe,
    ];

    pub fn code(self) -> i32 {
        self as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct() {
        let codes: std::collections::BTreeSet<i32> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes.len(), Exit::ALL.len());
    }
}
