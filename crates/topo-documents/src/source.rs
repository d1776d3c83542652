//! What a topology was read from, as the documents name it (`source.kind` of show and plan,
//! `a.kind`/`b.kind` of diff). Plain data: the model judges by it (`topo_model` re-exports it).

use serde::{Deserialize, Serialize};

/// What a topology was read from: judged as a value (a profile's layout is by design, a live
/// machine's facts are measured), printed as documents name it (`source.kind`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// This machine, through sysfs, procfs and NVML.
    Live,
    /// A `topo snapshot` archive or folder.
    Snapshot,
    /// An NCCL topology XML (`NCCL_TOPO_DUMP_FILE`, `topo xml`).
    Xml,
    /// An `nvidia-smi topo -m` matrix.
    NvidiaSmi,
    /// A hardware profile (`--profile`).
    Profile,
    /// The `=== System` dump of an NCCL_DEBUG=INFO log.
    NcclLog,
    /// Dissimilar hosts joined from sources of different kinds.
    Hosts,
    /// A machine built in code by a test.
    Test,
    /// Not stated (a topology built without a source).
    #[default]
    Unknown,
}

impl SourceKind {
    pub const fn name(self) -> &'static str {
        match self {
            SourceKind::Live => "live",
            SourceKind::Snapshot => "snapshot",
            SourceKind::Xml => "xml",
            SourceKind::NvidiaSmi => "nvidia-smi",
            SourceKind::Profile => "profile",
            SourceKind::NcclLog => "nccl-log",
            SourceKind::Hosts => "hosts",
            SourceKind::Test => "test",
            SourceKind::Unknown => "unknown",
        }
    }

    /// Whether the source lists every device of the host (a scan of it, or a profile), so a
    /// device it does not name is absent; a matrix lists only what nvidia-smi sees, and an
    /// XML or a log may be cut, so there a missing device is unknown.
    pub const fn lists_every_device(self) -> bool {
        matches!(
            self,
            SourceKind::Live | SourceKind::Snapshot | SourceKind::Profile
        )
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
