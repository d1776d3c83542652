//! Every published nccl-tests result of the shared set judged by the real binary (issue 43).
//!
//! Table-driven from `bench/fidelity/sources.yaml`, reading each result in place under
//! `../shared/realdata/nccl-tests/` (skipped, saying so, when the shared set is absent): a
//! result its source calls healthy must come out in band or above (`nccl-tests-in-band`), a
//! degraded one below it (`nccl-tests-below-band`, with its causes). An entry marked
//! `xfail: <kind>: <reason>` is a result topo cannot judge right yet, for a reason another
//! change fixes (`read`: the reading of the run; `fabric`: a machine or fabric that cannot be
//! stated) or that no change can (`data`: the published excerpt lacks the rows): the test
//! checks it still fails that way, so that it is noticed, and the mark removed, when it passes.

use crate::util::{realdata, topo_clean_env};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Index {
    results: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    file: String,
    topo: String,
    health: String,
    expect: String,
    #[serde(default)]
    collective: Option<String>,
    /// For an `xfail`: words of the error or of a finding that show it fails for its reason.
    #[serde(default)]
    fails_with: Option<String>,
}

/// What the binary said of one result: its nccl-tests verdict codes and every finding's
/// title, or the error line.
#[derive(Debug)]
enum Said {
    Verdict(Vec<String>, String),
    Refused(String),
}

impl Said {
    fn text(&self) -> &str {
        match self {
            Said::Verdict(_, t) | Said::Refused(t) => t,
        }
    }
}

fn index() -> Vec<Entry> {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/fidelity/sources.yaml"),
    )
    .unwrap();
    let idx: Index = yaml_serde::from_str(&text).unwrap();
    idx.results
}

fn judge(path: &std::path::Path, e: &Entry) -> Said {
    let mut cmd = topo_clean_env();
    cmd.arg("diagnose").arg("--nccl-tests").arg(path);
    cmd.args(e.topo.split_whitespace());
    if let Some(c) = &e.collective {
        cmd.args(["--collective", c]);
    }
    let o = cmd.args(["--format", "json"]).output().unwrap();
    if o.stdout.is_empty() {
        return Said::Refused(String::from_utf8_lossy(&o.stderr).trim().to_string());
    }
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let findings = doc["findings"].as_array().unwrap();
    let codes = findings
        .iter()
        .filter_map(|f| f["id"].as_str())
        .filter(|id| id.starts_with("nccl-tests-"))
        .map(String::from)
        .collect();
    let titles = findings
        .iter()
        .filter_map(|f| f["title"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    Said::Verdict(codes, titles)
}

/// Whether `said` is what the source's verdict asks for.
fn right(health: &str, said: &Said) -> bool {
    let Said::Verdict(codes, _) = said else {
        return false;
    };
    let has = |c: &str| codes.iter().any(|x| x == c);
    match health {
        "healthy" => has("nccl-tests-in-band") && !has("nccl-tests-below-band"),
        "degraded" => has("nccl-tests-below-band"),
        // No verdict to hold it to: judged at all is all that is asked.
        _ => !codes.is_empty(),
    }
}

#[test]
fn every_published_result_is_judged_as_its_source_says() {
    let entries = index();
    assert!(entries.len() >= 50, "{} entries", entries.len());
    let mut wrong = vec![];
    let mut now_passing = vec![];
    let mut judged = 0;
    for e in &entries {
        let Some(path) = realdata(&format!("nccl-tests/{}", e.file)) else {
            continue;
        };
        let said = judge(&path, e);
        judged += 1;
        let ok = right(&e.health, &said);
        match e.expect.strip_prefix("xfail: ") {
            None if !ok => wrong.push(format!("{} ({}): {said:?}", e.file, e.health)),
            Some(why) if ok => now_passing.push(format!(
                "{}: judged right now; remove `xfail: {why}`",
                e.file
            )),
            Some(why) => {
                let words = e.fails_with.as_deref().unwrap_or("");
                if !said.text().contains(words) {
                    now_passing.push(format!(
                        "{}: still wrong, but no longer for `{why}` (no `{words}` in {said:?})",
                        e.file
                    ));
                }
            }
            _ => {}
        }
    }
    if judged == 0 {
        eprintln!("skipped: no result of bench/fidelity/sources.yaml is present");
        return;
    }
    assert!(
        wrong.is_empty(),
        "judged against their sources' verdict:\n{}",
        wrong.join("\n")
    );
    assert!(now_passing.is_empty(), "{}", now_passing.join("\n"));
}

#[test]
fn every_index_entry_states_what_the_test_needs() {
    for e in index() {
        assert!(
            ["healthy", "degraded", "unstated"].contains(&e.health.as_str()),
            "{}: health {}",
            e.file,
            e.health
        );
        assert!(
            e.expect == "judged"
                || e.expect.starts_with("xfail: read: ")
                || e.expect.starts_with("xfail: fabric: ")
                || e.expect.starts_with("xfail: data: "),
            "{}: expect `{}`",
            e.file,
            e.expect
        );
        assert!(e.topo.contains("--profile"), "{}: {}", e.file, e.topo);
        assert_eq!(
            e.expect.starts_with("xfail"),
            e.fails_with.as_ref().is_some_and(|w| !w.is_empty()),
            "{}: an xfail names the words it fails with (fails_with), and only an xfail",
            e.file
        );
    }
}
