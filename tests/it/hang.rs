//! `topo diagnose --hang` (issue 46): the binary on hang evidence: files, folders of per-rank
//! logs, standard input; text and `topo.hang/v1` JSON; `--fail-on`; bad input refused.
//! The per-sample verdicts are tested in `crates/topo-diagnose/src/hang/tests.rs`.

use crate::util::{assert_valid, fixture, topo};

use serde_json::Value;

const WATCHDOG: &str = "../shared/realdata/hangs/torchtune-1165-1x4-watchdog-allgather-seq15037-ranks1-3-rank0-silent-EXCERPT.log";
const RAS_TEXT: &str = "../shared/realdata/hangs/nccl-ras-docs-text-incomplete-rank21-unresponsive-node213-gpu5-EXCERPT.txt";
const RAS_JSON: &str = "../shared/realdata/hangs/ncclras-json-2.28.9-ray-1node-2gpu-rank1-unresponsive-invalid-json-missing-comma.json";
const NET: &str = "../shared/realdata/hangs/nccl-1710-cx7-mlx5_0-local-access-violation-node201-peer-status9-node023-EXCERPT.log";
const FR: &str =
    "../shared/realdata/hangs/fr-trace-tutorial-1x2-rank1-missing-allreduce-collective5.txt";
const RAS_OK_TIMEOUT: &str = "../shared/realdata/hangs/nccl-1730-32x8-ras-2.26.2-ok-while-pytorch-watchdog-allreduce-timeout-rank118-EXCERPT.log";
const HEALTHY: &str = "../shared/realdata/hangs/nccl-ras-example-2.30.7-2x4-healthy-verbose.txt";

/// The hang samples are read in ../shared/realdata/hangs (never copied in); without it the
/// tests that need them skip, saying so.
fn samples() -> bool {
    crate::util::realdata("hangs").is_some()
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Out {
    let o = topo().args(args).current_dir(fixture("")).output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn json(args: &[&str]) -> Value {
    let mut a = vec!["diagnose"];
    a.extend(args);
    a.extend(["--format", "json"]);
    let o = run(&a);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_valid(&v, &args.join(" "));
    v
}

#[test]
fn hang_text_reads_as_an_answer() {
    if !samples() {
        return;
    }
    let o = run(&["diagnose", "--hang", WATCHDOG]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    insta::assert_snapshot!("hang_watchdog_text", o.stdout);
}

#[test]
fn hang_json_document_validates() {
    if !samples() {
        return;
    }
    let v = json(&["--hang", RAS_JSON]);
    insta::assert_json_snapshot!("hang_ras_json", v);
    for f in [WATCHDOG, RAS_TEXT, NET, FR, RAS_OK_TIMEOUT, HEALTHY] {
        let v = json(&["--hang", f]);
        assert!(v["verdict"].as_str().is_some_and(|s| !s.is_empty()), "{f}");
    }
}

#[test]
fn hang_several_inputs_merge() {
    if !samples() {
        return;
    }
    let v = json(&["--hang", RAS_TEXT, "--hang", NET]);
    // The local HCA fault outranks the unresponsive process; both are findings.
    assert_eq!(v["cause"], "network-fault");
    let ids: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert!(
        ids.contains(&"hang-rank-missing") && ids.contains(&"hang-network-fault"),
        "{ids:?}"
    );
    assert_eq!(v["inputs"].as_array().unwrap().len(), 2);
}

#[test]
fn hang_fail_on_follows_the_worst_finding() {
    if !samples() {
        return;
    }
    assert_eq!(
        run(&["diagnose", "--hang", RAS_TEXT, "--fail-on", "error"]).code,
        1
    );
    assert_eq!(
        run(&["diagnose", "--hang", HEALTHY, "--fail-on", "warning"]).code,
        0
    );
    // A silent rank is a warning: not an error.
    assert_eq!(
        run(&["diagnose", "--hang", WATCHDOG, "--fail-on", "error"]).code,
        0
    );
    assert_eq!(
        run(&["diagnose", "--hang", WATCHDOG, "--fail-on", "warning"]).code,
        1
    );
}

/// A gate that read no hang evidence fails (issue 45's rule for every diagnosis): text with no
/// RAS, watchdog, Flight Recorder or network line is not a healthy job.
#[test]
fn hang_fail_on_fails_where_nothing_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("kubectl.txt");
    std::fs::write(&f, "error: pods \"trainer-0\" not found\n").unwrap();
    let o = run(&[
        "diagnose",
        "--hang",
        f.to_str().unwrap(),
        "--fail-on",
        "error",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("--fail-on: the input holds no hang evidence topo reads"),
        "{}",
        o.stderr
    );
    // Without the gate the answer is printed and the exit is 0.
    let o = run(&["diagnose", "--hang", f.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

/// A folder of per-rank logs with mixed launcher prefixes, and the same job on stdin.
#[test]
fn hang_folder_of_rank_logs_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let mut all = String::new();
    for g in 0..64u32 {
        if g == 37 {
            continue;
        }
        let prefix = if g % 2 == 0 {
            format!("[rank{g}]:")
        } else {
            format!("[1,{g}]<stdout>:[rank{g}]:")
        };
        let text = format!(
            "{prefix}[E0101 00:10:00.1 ProcessGroupNCCL.cpp:632] [Rank {g}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.\r\n{prefix}[E0101 00:10:00.1 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID 0(default_pg) Rank {g}]  failure detected by watchdog at work sequence id: 12 PG status: last enqueued work: 13, last completed work: 11\r\n"
        );
        std::fs::write(dir.path().join(format!("rank{g:02}.log")), &text).unwrap();
        all.push_str(&text);
    }
    let v = json(&["--hang", dir.path().to_str().unwrap()]);
    assert_eq!(v["cause"], "rank-silent", "{}", v["verdict"]);
    assert!(
        v["verdict"]
            .as_str()
            .unwrap()
            .starts_with("rank(s) did not report: rank 37 of PG 0"),
        "{}",
        v["verdict"]
    );
    assert_eq!(v["inputs"].as_array().unwrap().len(), 63);
    let out = topo()
        .args(["diagnose", "--hang", "-", "--format", "json"])
        .write_stdin(all)
        .output()
        .unwrap();
    let w: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(w["verdict"], v["verdict"]);
}

#[test]
fn hang_bad_input_is_one_clear_error() {
    if !samples() {
        return;
    }
    let o = run(&["diagnose", "--hang", "no/such/file.log"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.starts_with("error: cannot read no/such/file.log"),
        "{}",
        o.stderr
    );
    let dir = tempfile::tempdir().unwrap();
    let pkl = dir.path().join("nccl_trace_rank_0");
    std::fs::write(&pkl, b"\x80\x04\x95\x00\x00\x00").unwrap();
    let o = run(&["diagnose", "--hang", pkl.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("a pickled Flight Recorder dump"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("hint: "), "{}", o.stderr);
    let o = run(&[
        "diagnose",
        "--hang",
        WATCHDOG,
        "--profile",
        "no-such-machine",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    let o = run(&["diagnose", "--hang", "-", "--hang", "-"]);
    assert_eq!(o.code, 2);
    let empty = tempfile::tempdir().unwrap();
    let o = run(&["diagnose", "--hang", empty.path().to_str().unwrap()]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("holds no files"), "{}", o.stderr);
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
}

/// Every sample of ../shared/realdata/hangs through the binary: a valid document, exit 0.
#[test]
fn every_realdata_hang_sample_gives_a_valid_document() {
    let dir = fixture("../shared/realdata/hangs");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: {} is absent", dir.display());
        return;
    };
    let mut n = 0;
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "md") {
            continue;
        }
        let v = json(&["--hang", p.to_str().unwrap()]);
        // The monitor's banner alone is recognised and carries nothing.
        let banner = p.to_string_lossy().contains("monitor-text-banner");
        assert_eq!(v["cause"] == "no-evidence", banner, "{}", p.display());
        n += 1;
    }
    assert!(n >= 38, "{n} samples");
}

/// `--profile`/`--from`: the suspect GPU and NIC on the machine, and who shares the NIC.
#[test]
fn hang_verdict_placed_on_a_machine() {
    if !samples() {
        return;
    }
    // AWS p4d: one EFA device per pair of GPUs behind one PCIe switch; GPU 5 pairs with 4.
    let v = json(&["--hang", RAS_TEXT, "--profile", "aws-p4d"]);
    let t = &v["on_topology"][0];
    assert_eq!(t["gpu"], 5, "{t}");
    assert_eq!(t["gpus_sharing"], serde_json::json!([4, 5]), "{t}");
    assert!(
        t["why"].as_str().unwrap().contains("shared with GPU(s) 4"),
        "{t}"
    );
    let o = run(&["diagnose", "--hang", NET, "--profile", "dgx-h100"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .contains("node201: mlx5_0: mlx5_0 is the closest NIC of GPU(s) 0"),
        "{}",
        o.stdout
    );
    // Without a machine the document has no such field.
    assert!(json(&["--hang", RAS_TEXT]).get("on_topology").is_none());
}
