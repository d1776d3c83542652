//! What a log line is quoted as, and what its `host:pid:tid [dev]` prefix says.

use serde::Serialize;

/// A log line kept as evidence: 1-based line number and the text as written.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    pub line: usize,
    pub text: String,
}

/// What the `host:pid:tid [dev]` prefix of a line says (borrowed: one per line of a big log).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Prefix<'a> {
    pub host: &'a str,
    pub pid: Option<u64>,
    pub tid: Option<u64>,
    pub dev: Option<i32>,
}
