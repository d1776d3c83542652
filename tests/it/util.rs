//! Helpers every test module uses: the binary under test and the fixtures.

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The `topo` binary with the variables that change its behaviour removed. The timeout only
/// turns a hang into a failure; no test asserts how fast anything is (bench/ does).
pub fn topo() -> Command {
    let mut c = Command::cargo_bin("topo").unwrap();
    c.env_remove("TOPO_SYSFS_ROOT")
        .env_remove("NO_COLOR")
        .env("TOPO_PCI_IDS", "none")
        .timeout(Duration::from_secs(300));
    c
}

/// `topo` with an empty environment but PATH, so NCCL_* variables of the machine running the
/// tests cannot reach a plan.
pub fn topo_clean_env() -> Command {
    let mut c = Command::cargo_bin("topo").unwrap();
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TOPO_PCI_IDS", "none")
        .timeout(Duration::from_secs(300));
    c
}

/// A path under the repository root (`fixtures/xml/x.xml`, `profiles/dgx-h100.yaml`).
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}
