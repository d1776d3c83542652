//! Unknown stays unknown (issue 25): over every fixture of every source kind (matrices,
//! trimmed, skeleton and VM XMLs, NCCL logs, snapshots, profiles), each verdict `show` states
//! rests on facts the document itself holds as known: a verdict never turns a fact the
//! source leaves out into a "no".

use crate::util::{fixture, topo_clean_env as topo};
use serde_json::Value;

/// Every source file or folder among the fixtures that `show` reads.
fn sources() -> Vec<String> {
    let mut out = vec![];
    for dir in [
        "fixtures/matrices",
        "fixtures/xml",
        "fixtures/synthetic",
        "fixtures/logs",
    ] {
        for e in std::fs::read_dir(fixture(dir)).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".md") || name.ends_with(".json") || name.contains("TRUNCATED") {
                continue;
            }
            out.push(p.to_string_lossy().into_owned());
        }
    }
    for e in std::fs::read_dir(fixture("fixtures/snapshots")).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.push(p.to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

fn all(v: &Value, key: &str) -> Vec<Value> {
    v[key].as_array().cloned().unwrap_or_default()
}

/// Why the verdict `code` is not supported by the document's own facts, if it is not.
fn unsupported(code: &str, text: &str, d: &Value) -> Option<String> {
    let gpus = all(d, "gpus");
    let nics = all(d, "nics");
    let nvlink_known = gpus.iter().all(|g| g["nvlink"]["state"] == "known");
    match code {
        "nvswitch-full" | "nvlink-none" | "nvlink-all-direct" | "nvlink-mesh"
        | "nvlink-islands"
            if !nvlink_known =>
        {
            Some("an NVLink verdict while some GPU's NVLink is unknown".into())
        }
        "gdr-unavailable" if !nics.iter().any(|n| n["gdr"] == false) => {
            Some("GPUDirect RDMA said unavailable, but no port's gdr is known false".into())
        }
        "network-none"
            if !matches!(
                d["source"]["kind"].as_str(),
                Some("live" | "snapshot" | "profile")
            ) =>
        {
            Some("no network stated from a source that can leave ports out".into())
        }
        "network-total"
            if nics.iter().any(|n| n["speed_gbps"].is_null()) && !text.contains("unknown") =>
        {
            Some("a network total over ports of unknown speed".into())
        }
        "numa-span" if gpus.iter().any(|g| g["numa"].is_null()) => {
            Some("NUMA placement stated while some GPU's NUMA node is unknown".into())
        }
        _ => None,
    }
}

/// A nearest-NIC bandwidth needs the port's speed and GPUDirect RDMA to be known.
fn nearest_nic_claims(d: &Value) -> Vec<String> {
    let nics = all(d, "nics");
    let mut bad = vec![];
    for g in all(d, "gpus") {
        let Some(name) = g["nearest_nic"].as_str() else {
            continue;
        };
        if g["nic_bw_gbps"].is_null() {
            continue;
        }
        let nic = nics.iter().find(|n| n["name"] == name);
        if nic.is_some_and(|n| n["speed_gbps"].is_null() || n["gdr"].is_null()) {
            bad.push(format!(
                "GPU{} → {name}: a bandwidth from an unknown speed or GDR",
                g["index"]
            ));
        }
    }
    bad
}

/// What a source kind never states must be null in the document: a matrix carries no GPU
/// model, compute capability, port speed or GPUDirect RDMA.
fn kind_claims(d: &Value) -> Vec<String> {
    let mut bad = vec![];
    if d["source"]["kind"] == "nvidia-smi" && d["source"]["stated"].is_null() {
        for n in all(d, "nics") {
            for k in ["gdr", "speed_gbps", "bw_gbps"] {
                if !n[k].is_null() {
                    bad.push(format!("NIC {}: {k} {} from a matrix", n["index"], n[k]));
                }
            }
        }
        for g in all(d, "gpus") {
            for k in ["sm", "name", "nic_bw_gbps"] {
                if !g[k].is_null() {
                    bad.push(format!("GPU {}: {k} {} from a matrix", g["index"], g[k]));
                }
            }
        }
    }
    bad
}

#[test]
fn the_checker_catches_a_negative_made_from_an_unknown() {
    let d = serde_json::json!({
        "source": {"kind": "nvidia-smi"},
        "gpus": [{"index": 0, "nvlink": {"state": "unknown"}, "numa": null,
                  "nearest_nic": "mlx5_0", "nic_bw_gbps": 1.2, "sm": null, "name": null}],
        "nics": [{"index": 0, "name": "mlx5_0", "gdr": false, "speed_gbps": null, "bw_gbps": 1.25}],
    });
    assert!(unsupported("nvlink-none", "", &d).is_some());
    assert!(unsupported("numa-span", "", &d).is_some());
    assert!(unsupported("network-none", "", &d).is_some());
    assert!(unsupported("network-total", "400 Gb/s in total", &d).is_some());
    assert_eq!(nearest_nic_claims(&d).len(), 1);
    assert_eq!(kind_claims(&d).len(), 3, "{:?}", kind_claims(&d));
    let mut ok = d.clone();
    ok["nics"][0]["gdr"] = Value::Null;
    assert!(unsupported("gdr-unavailable", "", &ok).is_some());
}

#[test]
fn no_show_verdict_states_a_fact_its_source_leaves_unknown() {
    let mut failures = vec![];
    let mut read = 0;
    for src in sources() {
        let out = topo()
            .args(["show", "--format", "json", "--from", &src])
            .output()
            .unwrap();
        if !out.status.success() {
            // A log without a `=== System` block or Init lines is no machine; nothing shown.
            continue;
        }
        read += 1;
        let d: Value = serde_json::from_slice(&out.stdout).unwrap();
        for m in all(&d, "messages") {
            let (code, text) = (m["code"].as_str().unwrap(), m["text"].as_str().unwrap());
            if let Some(why) = unsupported(code, text, &d) {
                failures.push(format!("{src}: {code}: {why}: {text}"));
            }
        }
        failures.extend(
            nearest_nic_claims(&d)
                .into_iter()
                .map(|b| format!("{src}: {b}")),
        );
        failures.extend(kind_claims(&d).into_iter().map(|b| format!("{src}: {b}")));
    }
    assert!(read >= 15, "only {read} sources were read");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A shared NCCL dump trimmed by hand as users trim them (issue 44): every `<nvlink>` and
/// every `sm` removed, so the GPU model is only what the PCI device id suggests. `None` where
/// the shared data is absent.
fn trimmed(rel: &str, dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let real = crate::util::realdata(rel)?;
    let text = std::fs::read_to_string(real).unwrap();
    let cut: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("<nvlink"))
        .map(|l| {
            let mut l = l.to_string();
            while let Some(at) = l.find(" sm=\"") {
                let end = l[at + 5..].find('"').map_or(l.len(), |e| at + 5 + e + 1);
                l.replace_range(at..end, "");
            }
            l + "\n"
        })
        .collect();
    assert!(!cut.contains("<nvlink") && !cut.contains(" sm=\""));
    let path = dir.join(rel.rsplit('/').next().unwrap());
    std::fs::write(&path, cut).unwrap();
    Some(path)
}

/// The trimmed file's GPU model is a guess from the PCI id: no view concludes a negative from
/// it ("No NVLink", SHM for the GPU pairs, P2P too far), each says NVLink is unknown, show
/// marks the name as a guess, and the plan's refusal names the guess as one.
#[test]
fn a_hand_trimmed_dump_gives_no_negative_from_a_guessed_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for rel in [
        "topo-xml/ibm-cloud-gx3d-h100-topo.xml",
        "topo-xml/nccl-tests-256-h200-baremetal-dump-TRUNCATED.xml",
    ] {
        let Some(path) = trimmed(rel, dir.path()) else {
            continue;
        };
        let src = path.to_string_lossy().into_owned();
        let run = |args: &[&str]| topo().args(args).args(["--from", &src]).output().unwrap();
        let show = run(&["show", "--format", "json"]);
        assert!(show.status.success(), "{rel}");
        let show: Value = serde_json::from_slice(&show.stdout).unwrap();
        let diag = run(&["diagnose", "--format", "json"]);
        let diag: Value = serde_json::from_slice(&diag.stdout).unwrap();
        let said: Vec<(String, String)> = all(&show, "messages")
            .iter()
            .map(|m| {
                (
                    m["code"].as_str().unwrap().into(),
                    m["text"].as_str().unwrap().into(),
                )
            })
            .chain(all(&diag, "findings").iter().map(|f| {
                (
                    f["id"].as_str().unwrap().into(),
                    f["title"].as_str().unwrap().into(),
                )
            }))
            .collect();
        for (code, text) in &said {
            assert!(
                ![
                    "nvlink-none",
                    "p2p-path-too-far",
                    "p2p-refused",
                    "shm-pcie-path"
                ]
                .contains(&code.as_str()),
                "{rel}: {code}: {text}"
            );
            assert!(
                !text.contains("No NVLink") && !text.contains("SHM"),
                "{rel}: {text}"
            );
        }
        let guessed = |list: &str, code: &str, text: &str, doc: &Value| {
            all(doc, list).iter().any(|m| {
                m[code] == "nvlink-unknown" && m[text].as_str().unwrap().contains("a guess")
            })
        };
        assert!(guessed("messages", "code", "text", &show), "{rel}: {show}");
        assert!(guessed("findings", "id", "title", &diag), "{rel}: {diag}");
        let text = run(&["show"]);
        let text = String::from_utf8(text.stdout).unwrap();
        assert!(
            text.contains("GB?") && text.contains("a name ending in ?"),
            "{text}"
        );
        let plan = run(&["plan", "--nodes", "2"]);
        let err = String::from_utf8(plan.stderr).unwrap();
        assert_eq!(plan.status.code(), Some(2), "{err}");
        assert!(err.contains("as their PCI device id suggests"), "{err}");
        checked += 1;
    }
    if checked == 0 {
        eprintln!("skipped: no shared XML to trim");
    }
}
