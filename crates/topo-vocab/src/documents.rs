//! What scripts rely on besides the codes: every document's schema id (the `schema` field of
//! its JSON) and the binary's exit codes, in one place so a version bump or a new code is
//! one change that docs/schema/ and README's table are checked against (issue 42 item 4).

/// The schema id of each document topo writes or reads. A breaking change to a document bumps
/// its version here and adds `docs/schema/<name>.v<N>.json`.
pub mod schema {
    pub const SHOW: &str = "topo.show/v1";
    pub const PLAN: &str = "topo.plan/v3";
    pub const DIAGNOSE: &str = "topo.diagnose/v1";
    pub const HANG: &str = "topo.hang/v1";
    pub const DIFF: &str = "topo.diff/v1";
    pub const FLEET: &str = "topo.fleet/v1";
    pub const VERIFY: &str = "topo.verify/v1";
    pub const CALIBRATE: &str = "topo.calibrate/v3";
    pub const SNAPSHOT: &str = "topo.snapshot/v1";
    pub const NVML: &str = "topo.nvml/v1";
    pub const PROFILES: &str = "topo.profiles/v1";

    /// Every id above, for the tests that hold docs/schema/ to them.
    pub const ALL: [&str; 11] = [
        SHOW, PLAN, DIAGNOSE, HANG, DIFF, FLEET, VERIFY, CALIBRATE, SNAPSHOT, NVML, PROFILES,
    ];
}

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
    fn schema_ids_are_unique_and_versioned() {
        let mut seen = std::collections::BTreeSet::new();
        for id in schema::ALL {
            assert!(seen.insert(id), "{id} twice");
            let (name, v) = id.split_once("/v").expect(id);
            assert!(
                name.starts_with("topo.") && v.parse::<u32>().is_ok(),
                "{id}"
            );
        }
    }

    #[test]
    fn exit_codes_are_distinct() {
        let codes: std::collections::BTreeSet<i32> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes.len(), Exit::ALL.len());
    }
}
