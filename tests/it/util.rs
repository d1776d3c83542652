//! Helpers every test module uses: the binary under test and the fixtures.

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod schema;

/// The `topo` binary with the variables that change its behaviour removed. The timeout only
/// turns a hang into a failure; no test asserts how fast anything is (bench/ does).
pub fn topo() -> Command {
    let mut c = Command::cargo_bin("topo").unwrap();
    c.env_remove("TOPO_SYSFS_ROOT")
        .env_remove("NO_COLOR")
        // Text fits COLUMNS when set: outputs under test are at the default width.
        .env_remove("COLUMNS")
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

/// The public data set beside the repository (`../shared/realdata`, which CI has): the path of
/// `rel` in it, or `None` with a note on stderr where it is absent, so a test can skip saying
/// why. Its files are read there, never copied into the repository.
pub fn realdata(rel: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/realdata")
        .join(rel);
    if p.exists() {
        return Some(p);
    }
    eprintln!(
        "skipped: {} is absent (../shared is not beside the repository)",
        p.display()
    );
    None
}

/// A corpus log by name: the repository's own (`fixtures/logs`), else the public thread logs of
/// `../shared/realdata/nccl-logs`; `None` (noted) where neither has it.
pub fn corpus_log(name: &str) -> Option<PathBuf> {
    let own = fixture(&format!("fixtures/logs/{name}"));
    if own.exists() {
        return Some(own);
    }
    realdata(&format!("nccl-logs/{name}"))
}

/// The schema file for a document's `schema` value: `topo.plan/v1` → `docs/schema/topo.plan.v1.json`.
pub fn schema_file(schema: &str) -> PathBuf {
    fixture(&format!("docs/schema/{}.json", schema.replace('/', ".")))
}

/// Panics unless `doc` validates against the schema its `schema` field names, and carries
/// this topo's version (docs/schema/README.md).
pub fn assert_valid(doc: &serde_json::Value, what: &str) {
    let name = doc["schema"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no `schema` field"));
    let path = schema_file(name);
    assert!(path.is_file(), "{what}: no schema file {}", path.display());
    let text = std::fs::read_to_string(&path).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let errors = schema::errors(&schema, doc);
    assert!(
        errors.is_empty(),
        "{what} does not match {}:\n{}",
        path.display(),
        errors.join("\n")
    );
    assert_eq!(
        doc["topo_version"],
        env!("CARGO_PKG_VERSION"),
        "{what}: topo_version"
    );
    assert_codes_listed(doc, what);
}

/// Every code a document carries (`messages[].code`, diagnose's `findings[].id`) is listed
/// in docs/codes.md, so a monitoring rule can look up what it means.
pub fn assert_codes_listed(doc: &serde_json::Value, what: &str) {
    static CODES: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let listed = CODES.get_or_init(|| std::fs::read_to_string(fixture("docs/codes.md")).unwrap());
    let empty = vec![];
    let items = |k: &str| doc[k].as_array().unwrap_or(&empty).clone();
    let codes = items("messages")
        .into_iter()
        .map(|m| m["code"].clone())
        .chain(items("findings").into_iter().map(|f| f["id"].clone()));
    for c in codes {
        let c = c.as_str().unwrap_or_default();
        assert!(
            listed.contains(&format!("| `{c}` |")),
            "{what}: code {c} is not in docs/codes.md"
        );
    }
}

/// `topo plan ARGS` under NCCL 2.28 as JSON, in an environment without the machine's NCCL_*
/// variables: the document and stderr.
pub fn plan_doc(args: &[&str]) -> (serde_json::Value, String) {
    plan_doc_at("2.28", args)
}

/// [`plan_doc`] under NCCL `version`.
pub fn plan_doc_at(version: &str, args: &[&str]) -> (serde_json::Value, String) {
    let out = topo_clean_env()
        .arg("plan")
        .args(["--nccl-version", version, "--format", "json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`plan_doc`] of 1 GiB with the per-pair transports.
pub fn plan_1g(args: &[&str]) -> (serde_json::Value, String) {
    let mut a = vec!["--transports", "pairs", "-b", "1G", "-e", "1G"];
    a.extend_from_slice(args);
    plan_doc(&a)
}

/// A JSON array of strings as `&str`s (panics on anything else: a test's assertion).
pub fn strs(v: &serde_json::Value) -> Vec<&str> {
    let items = v.as_array().unwrap_or_else(|| panic!("not an array: {v}"));
    items.iter().map(|s| s.as_str().unwrap()).collect()
}

/// An AllReduce plan request at NCCL 2.28 over `sizes`, one process per GPU, no environment.
pub fn allreduce_request(sizes: Vec<u64>) -> topo_nccl::plan::PlanRequest {
    topo_nccl::plan::PlanRequest {
        funcs: vec![topo_nccl::types::Collective::AllReduce],
        sizes,
        version: topo_nccl::version::NcclVersion::parse("2.28").unwrap(),
        version_source: "test".into(),
        placement: topo_nccl::transport::RankPlacement::ProcessPerGpu,
        env: vec![],
        env_origin: Default::default(),
        explain: false,
    }
}
