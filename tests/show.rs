//! `topo show` through the real binary.
//!
//! The live tests run on whatever machine runs the suite; CI and the development boxes have
//! no NVIDIA GPU, so they check that show degrades to NUMA/PCI/NIC information and says why.
//! A machine with GPUs skips only the "no GPU" wording.

use assert_cmd::Command;

fn topo() -> Command {
    let mut c = Command::cargo_bin("topo").unwrap();
    c.env_remove("NO_COLOR");
    c
}

fn stdout(args: &[&str]) -> String {
    let out = topo().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "topo {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn has_nvidia_gpu() -> bool {
    std::fs::read_dir("/sys/bus/pci/devices")
        .map(|d| {
            d.flatten().any(|e| {
                std::fs::read_to_string(e.path().join("vendor")).is_ok_and(|v| v.trim() == "0x10de")
                    && std::fs::read_to_string(e.path().join("class"))
                        .is_ok_and(|c| c.trim().starts_with("0x03"))
            })
        })
        .unwrap_or(false)
}

#[test]
fn live_summary_says_why_there_is_no_gpu() {
    let out = stdout(&["show"]);
    assert!(out.contains("NUMA nodes ("), "{out}");
    if !has_nvidia_gpu() {
        assert!(
            out.contains("No NVIDIA GPU or NVML library found: "),
            "{out}"
        );
        assert!(!out.contains("GPUs ("), "{out}");
    }
}

#[test]
fn live_json_is_one_document_with_the_contract_fields() {
    let out = stdout(&["show", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid json");
    assert_eq!(v["schema"], "topo.show/v1");
    for k in [
        "gpus",
        "nics",
        "numa",
        "nvswitches",
        "pci_switches",
        "paths",
        "warnings",
    ] {
        assert!(v[k].is_array(), "{k} missing: {out}");
    }
    assert!(!v["numa"].as_array().unwrap().is_empty());
    if !has_nvidia_gpu() {
        assert!(v["gpus"].as_array().unwrap().is_empty());
        assert!(v["hosts"][0]["gpu_discovery"].is_string(), "{out}");
    }
    assert!(!out.contains("\"N/A\""));
}

#[test]
fn live_yaml_parses_and_every_view_runs() {
    let y = stdout(&["show", "--format", "yaml"]);
    let v: yaml_serde::Value = yaml_serde::from_str(&y).expect("valid yaml");
    assert_eq!(v["schema"].as_str(), Some("topo.show/v1"));
    for view in ["summary", "matrix", "pci", "paths", "dot"] {
        let text = stdout(&["show", "--view", view]);
        assert!(!text.is_empty(), "{view}");
        let j = stdout(&["show", "--view", view, "--format", "json"]);
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["view"], view);
    }
    assert!(stdout(&["show", "--view", "dot"]).starts_with("digraph topo {"));
    assert!(stdout(&["show", "--view", "pci"]).contains("NUMA "));
}

#[test]
fn piped_and_no_color_output_has_no_escape_sequences() {
    // Piped (not a terminal): auto means no colour.
    let piped = stdout(&["show"]);
    assert!(!piped.contains('\x1b'));
    let out = topo()
        .env("NO_COLOR", "1")
        .args(["show", "--view", "pci"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\x1b'));
    // Forcing colour does colour, so the checks above can fail.
    let forced = stdout(&["--color", "always", "show"]);
    assert!(forced.contains("\x1b["), "{forced}");
    let never = stdout(&["--color", "never", "show", "--view", "matrix"]);
    assert!(!never.contains('\x1b'));
}

#[test]
fn output_file_is_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("show.txt");
    topo()
        .args(["--color", "always", "show", "-o"])
        .arg(&f)
        .assert()
        .success();
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(text.contains("NUMA nodes ("));
    assert!(!text.contains('\x1b'));
}

#[test]
fn bad_view_is_a_usage_error() {
    topo()
        .args(["show", "--view", "bogus"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("bogus"));
    topo().args(["show", "--format", "xml"]).assert().code(2);
}
