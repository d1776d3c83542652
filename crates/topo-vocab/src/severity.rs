//! How much a finding matters: one scale for every document and command.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    /// Every severity, lowest first.
    pub const ALL: &[Severity] = &[Severity::Info, Severity::Warning, Severity::Error];

    pub const fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }

    /// The severity printed as `name` (`--fail-on warning`).
    pub fn from_name(name: &str) -> Option<Severity> {
        Severity::ALL.iter().copied().find(|s| s.name() == name)
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
