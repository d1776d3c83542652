//! The machine-readable contract (docs/schema/): every JSON document topo writes validates
//! against the schema its `schema` field names. This module walks every insta snapshot in
//! the repository, so a new JSON snapshot is checked without being listed; the test modules
//! that run the binary for a document (plan, verify, calibrate, diagnose, show) also pass
//! what they parse through `util::assert_valid`.

use crate::util::{assert_valid, fixture, schema_file, topo};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn snap_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name();
        if name == "target" || name == ".git" || name == "fuzz" {
            continue;
        }
        if p.is_dir() {
            snap_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "snap") {
            out.push(p);
        }
    }
}

/// The body of an insta `.snap` file: what follows its `---` header.
fn snap_body(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("---\n") else {
        return text;
    };
    rest.find("\n---\n").map_or(rest, |i| &rest[i + 5..])
}

#[test]
fn every_json_snapshot_validates_against_its_schema() {
    let root = fixture("");
    let mut files = vec![];
    for d in ["src", "crates", "tests"] {
        snap_files(&root.join(d), &mut files);
    }
    files.sort();
    let mut checked = vec![];
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let Ok(v) = serde_json::from_str::<Value>(snap_body(&text)) else {
            continue;
        };
        let Some(obj) = v.as_object() else { continue };
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        let Some(schema) = obj.get("schema").and_then(Value::as_str) else {
            panic!("{rel}: a JSON snapshot without a `schema` field: snapshot whole documents");
        };
        assert_valid(&v, &rel);
        checked.push(schema.to_string());
    }
    // Today's JSON snapshots: show (unit and integration) and diagnose. A walk that finds
    // none has stopped looking.
    for s in ["topo.show/v1", "topo.diagnose/v1", "topo.hang/v1"] {
        assert!(
            checked.iter().any(|c| c == s),
            "no {s} snapshot found in {files:?}"
        );
    }
}

#[test]
fn every_schema_file_is_named_by_the_readme_and_compiles() {
    let dir = fixture("docs/schema");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".json") {
            continue;
        }
        n += 1;
        assert!(
            readme.contains(&name),
            "docs/schema/README.md does not list {name}"
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap();
        let id = v["$id"].as_str().unwrap_or_default();
        assert_eq!(id, name, "{name}: `$id` is the file name");
        let doc = v["properties"]["schema"]["const"].as_str().unwrap();
        assert_eq!(schema_file(doc), e.path(), "{name} describes {doc}");
        assert_eq!(
            v["properties"]["topo_version"]["type"], "string",
            "{name} has topo_version"
        );
    }
    assert_eq!(
        n, 10,
        "show, plan, verify, diagnose, calibrate, snapshot, diff, fleet, profiles, hang"
    );
}

/// The validator is not a rubber stamp: a document that breaks its schema fails.
#[test]
fn a_document_that_breaks_the_schema_is_refused() {
    let out = topo()
        .args(["show", "--profile", "dgx-h100", "--format", "json"])
        .output()
        .unwrap();
    let good: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&good, "dgx-h100");
    type Break = fn(&mut Value);
    let cases: [(&str, Break); 4] = [
        ("unknown field", |v| v["extra"] = Value::Bool(true)),
        ("missing field", |v| {
            v["gpus"][0].as_object_mut().unwrap().remove("busid");
        }),
        ("wrong type", |v| v["gpus"][0]["sm"] = "90".into()),
        ("wrong path type", |v| {
            v["paths"][0]["type"] = "NVLINK".into()
        }),
    ];
    for (what, break_it) in cases {
        let mut bad = good.clone();
        break_it(&mut bad);
        let r = std::panic::catch_unwind(|| assert_valid(&bad, what));
        assert!(r.is_err(), "{what}: accepted");
    }
}

/// The snapshot's `meta.json` is a contract too: the committed fixtures and a fresh capture.
#[test]
fn snapshot_meta_validates() {
    for s in ["ci-vm", "hgx-h100-8gpu", "pcie-8gpu"] {
        let p = fixture(&format!("fixtures/snapshots/{s}/meta.json"));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_valid(&v, &p.display().to_string());
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("snap");
    let o = topo()
        .args(["snapshot", "--sysfs-root"])
        .arg(fixture("fixtures/snapshots/hgx-h100-8gpu"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    assert_valid(&v, "fresh snapshot");
    assert_eq!(v["topo_version"], env!("CARGO_PKG_VERSION"));
}

fn json_out(args: &[&str]) -> Value {
    let out = crate::util::topo_clean_env().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v, &format!("{args:?}"));
    v
}

fn texts(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().or(x["text"].as_str()).unwrap().to_string())
        .collect()
}

/// show v1 readers keep `verdicts[]` and `warnings[]` as strings; `messages[]` is the same
/// lines in the same order, each with a code.
#[test]
fn show_messages_are_the_verdicts_then_the_warnings() {
    let m = fixture("fixtures/matrices/fastdeploy-8xa100-sxm4-40gb-4numa-3nic.txt");
    let m = m.to_string_lossy();
    let v = json_out(&["show", "--from", &m, "--format", "json"]);
    let mut want = texts(&v["verdicts"]);
    want.extend(texts(&v["warnings"]));
    assert!(
        !v["warnings"].as_array().unwrap().is_empty(),
        "a matrix source warns"
    );
    let got = texts(&v["messages"]);
    assert_eq!(got, want);
    let m = v["messages"].as_array().unwrap();
    let last = m.last().unwrap();
    assert_eq!(last["code"], "source-warning");
    assert_eq!(last["severity"], "warning");
}

/// A transport anomaly is one message per kind, counting the pairs; v1's `warnings[]` does
/// not gain it.
#[test]
fn plan_anomalies_are_coded_and_counted() {
    let v = json_out(&[
        "plan",
        "--profile",
        "dgx-h100",
        "--nccl-version",
        "2.28",
        "-b",
        "1M",
        "-e",
        "1M",
        "--env",
        "NCCL_P2P_DISABLE=1",
        "--format",
        "json",
        "--transports",
        "pairs",
    ]);
    let m = v["messages"].as_array().unwrap();
    let shm: Vec<&Value> = m.iter().filter(|x| x["code"] == "shm-on-nvlink").collect();
    assert_eq!(shm.len(), 1, "{m:?}");
    assert_eq!(shm[0]["severity"], "warning");
    let text = shm[0]["text"].as_str().unwrap();
    // P2P off splits the box into two groups of four that only the network joins (NCCL's
    // ncclTopoCheckNet): SHM inside each group, NET between them.
    assert!(
        text.starts_with("24 rank pair(s), e.g. 0 -> 1: SHM between NVLink"),
        "{text}"
    );
    let counted: usize = m
        .iter()
        .filter(|x| ["shm-on-nvlink", "net-on-nvlink"].contains(&x["code"].as_str().unwrap()))
        .map(|x| {
            let t = x["text"].as_str().unwrap();
            t[..t.find(' ').unwrap()].parse::<usize>().unwrap()
        })
        .sum();
    let anomalies = v["transport_pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| !t["anomaly"].is_null())
        .count();
    assert!(anomalies > 24, "{anomalies}");
    assert_eq!(counted, anomalies, "{m:?}");
    assert!(
        texts(&v["warnings"])
            .iter()
            .all(|w| !w.contains("NVLink-connected"))
    );
}

/// The vocabulary's schema ids (`topo_documents::schema`) and docs/schema/ name the same
/// documents: a version bumped in one place and not the other fails here. `topo.nvml/v1` is
/// the NVML part a snapshot carries, described by the snapshot's schema.
#[test]
fn every_schema_id_has_its_schema_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    let mut ids: Vec<String> = topo_documents::schema::ALL
        .iter()
        .filter(|id| **id != topo_documents::schema::NVML)
        .map(|id| format!("{}.json", id.replace('/', ".")))
        .collect();
    ids.sort();
    assert_eq!(files, ids);
}
