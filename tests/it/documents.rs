//! The types of `topo_documents` ARE the documents (issue 42 item 4): each document the binary
//! writes, read into its type and written back, is the same JSON value. A field the type lacks,
//! names otherwise or fills with a default the writer leaves out shows here as a difference at
//! its path; a document the type cannot read fails to parse.

use crate::util::{fixture, realdata, topo};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::Path;
use topo_documents::{calibrate, diagnose, diff, fleet, hang, snapshot, verify};

/// The first path at which `a` and `b` differ, `None` where they are equal.
fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.keys()
                .chain(y.keys())
                .find_map(|k| match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => first_difference(p, q, &format!("{at}/{k}")),
                    (p, q) => Some(format!("{at}/{k}: {p:?} against {q:?}")),
                })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{at}/{i}"))),
        _ => (a != b).then(|| format!("{at}: {a} against {b}")),
    }
}

/// `text` read as `T` and written back gives the value `text` holds; returns that value.
fn round_trip<T: Serialize + DeserializeOwned>(what: &str, text: &[u8]) -> Value {
    let doc: Value =
        serde_json::from_slice(text).unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
    let typed: T = serde_json::from_slice(text)
        .unwrap_or_else(|e| panic!("{what}: not read by its type: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    if let Some(d) = first_difference(&doc, &back, "") {
        panic!("{what}: written back differs at {d}");
    }
    doc
}

/// The JSON `topo ARGS` prints (any exit status: a failed check still prints its document).
fn stdout(args: &[&str]) -> Vec<u8> {
    let out = topo().args(args).output().unwrap();
    assert!(
        !out.stdout.is_empty(),
        "{args:?}: no output: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn the_round_trip_catches_a_field_the_type_drops() {
    #[derive(Serialize, serde::Deserialize)]
    struct Short {
        schema: String,
    }
    let r = std::panic::catch_unwind(|| {
        round_trip::<Short>("short", br#"{"schema":"x","more":1}"#);
    });
    assert!(r.is_err(), "a dropped field went unnoticed");
}

#[test]
fn diagnose_documents_read_back() {
    let snap = fixture("fixtures/snapshots/hgx-h100-8gpu");
    let log =
        fixture("fixtures/logs/nccl-tests-319-hgx-h100-2x8-nccl2.26.2-transports-EXCERPT.log");
    let v = round_trip::<diagnose::Report>(
        "diagnose --from --nccl-log",
        &stdout(&[
            "diagnose",
            "--format",
            "json",
            "--from",
            snap.to_str().unwrap(),
            "--nccl-log",
            log.to_str().unwrap(),
        ]),
    );
    assert!(!v["findings"].as_array().unwrap().is_empty(), "{v}");
    assert!(!v["transports"].as_array().unwrap().is_empty(), "{v}");
    let v = round_trip::<diagnose::Report>(
        "diagnose --nccl-tests",
        &stdout(&[
            "diagnose",
            "--format",
            "json",
            "--nccl-tests",
            "fixtures/fidelity/h100-2x8-ib-default-issue290.txt",
        ]),
    );
    assert!(
        !v["results"][0]["rows"].as_array().unwrap().is_empty(),
        "{v}"
    );
}

#[test]
fn diff_and_fleet_documents_read_back() {
    let v = round_trip::<diff::Diff>(
        "diff",
        &stdout(&["diff", "--format", "json", "dgx-h100", "hgx-h200"]),
    );
    assert!(!v["hardware"].as_array().unwrap().is_empty(), "{v}");
    let dir = tempfile::tempdir().unwrap();
    for (name, from) in [
        ("a.xml", "fixtures/xml/aws-p5-48xl-topo.xml"),
        ("b.xml", "fixtures/xml/aws-p5-48xl-topo.xml"),
        ("c.xml", "fixtures/xml/azure-ndv4-topo.xml"),
    ] {
        std::fs::copy(fixture(from), dir.path().join(name)).unwrap();
    }
    std::fs::write(dir.path().join("d.xml"), "not a topology").unwrap();
    let v = round_trip::<fleet::Fleet>(
        "fleet",
        &stdout(&[
            "diagnose",
            "--format",
            "json",
            "--fleet",
            dir.path().to_str().unwrap(),
        ]),
    );
    assert_eq!(v["groups"].as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn hang_documents_read_back() {
    let (Some(ras), Some(net), Some(watchdog)) = (
        realdata(
            "hangs/nccl-ras-docs-text-incomplete-rank21-unresponsive-node213-gpu5-EXCERPT.txt",
        ),
        realdata(
            "hangs/nccl-1710-cx7-mlx5_0-local-access-violation-node201-peer-status9-node023-EXCERPT.log",
        ),
        realdata(
            "hangs/torchtune-1165-1x4-watchdog-allgather-seq15037-ranks1-3-rank0-silent-EXCERPT.log",
        ),
    ) else {
        return;
    };
    for inputs in [vec![&ras, &net], vec![&watchdog]] {
        let mut args = vec!["diagnose", "--format", "json"];
        for p in &inputs {
            args.extend(["--hang", p.to_str().unwrap()]);
        }
        round_trip::<hang::HangReport>("diagnose --hang", &stdout(&args));
    }
}

#[test]
fn verify_and_calibrate_documents_read_back() {
    let cache = crate::verify::shared_cache();
    let out = topo()
        .env("XDG_CACHE_HOME", cache)
        .args([
            "verify", "--format", "json", "-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v = round_trip::<verify::VerifyJson>("verify", &out.stdout);
    assert!(!v["results"].as_array().unwrap().is_empty(), "{v}");
    // What `topo calibrate` measured for the tests above, as its cache holds it.
    let dir = cache.join("topo");
    let mut read = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("calibration-") && name.ends_with(".json") {
            round_trip::<calibrate::HostModel>(&name, &std::fs::read(e.path()).unwrap());
            read += 1;
        }
    }
    assert!(read > 0, "no calibration in {}", dir.display());
}

#[test]
fn snapshot_documents_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("box.tar.gz");
    let out = topo()
        .args(["snapshot", "--sysfs-root"])
        .arg(fixture("fixtures/snapshots/hgx-h100-8gpu"))
        .arg("-o")
        .arg(&archive)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let folder = dir.path().join("unpacked");
    std::fs::create_dir(&folder).unwrap();
    let f = std::fs::File::open(&archive).unwrap();
    tar::Archive::new(flate2::read::GzDecoder::new(f))
        .unpack(&folder)
        .unwrap();
    let read = |name: &str| std::fs::read(Path::new(&folder).join(name)).unwrap();
    round_trip::<snapshot::Meta>("meta.json", &read("meta.json"));
    if folder.join("nvml.json").exists() {
        round_trip::<snapshot::NvmlReport>("nvml.json", &read("nvml.json"));
    }
}
