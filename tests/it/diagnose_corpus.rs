//! Every real log through `topo diagnose`: its first finding (code and the cause in its title)
//! is the thread's conclusion, as recorded in fixtures/logs/conclusions.json (issue 49). The
//! logs of public threads are read from ../shared/realdata/nccl-logs, the repository's own
//! from fixtures/logs; a case whose log is absent is skipped, saying so.

use crate::util::{corpus_log, fixture, realdata, topo_clean_env};
use serde_json::Value;

#[test]
fn each_corpus_log_gives_its_threads_conclusion_first() {
    let table: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("fixtures/logs/conclusions.json")).unwrap(),
    )
    .unwrap();
    let cases = table["cases"].as_array().unwrap();
    let mut misses = vec![];
    for c in cases {
        let mut args = vec!["diagnose".to_string(), "--format".into(), "json".into()];
        let logs: Option<Vec<_>> = c["logs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| corpus_log(l.as_str().unwrap()))
            .collect();
        let Some(logs) = logs else { continue };
        for l in logs {
            args.push("--nccl-log".into());
            args.push(l.display().to_string());
        }
        args.extend(
            c["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string()),
        );
        let o = topo_clean_env().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {o:?}");
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let top = v["findings"][0]["id"].as_str().map(str::to_string);
        let title = v["findings"][0]["title"].as_str().unwrap_or("");
        let want = c["top"].as_str().map(str::to_string);
        let cause = c["cause"].as_str().unwrap();
        if top != want || !title.contains(cause) {
            misses.push(format!(
                "{}: got {top:?} `{title}`, thread says {want:?} with `{cause}`",
                c["logs"][0]
            ));
        }
        // A log never reads "no problem found": it says what it shows instead.
        assert!(
            !v["verdict"].as_str().unwrap().starts_with("no problem"),
            "{args:?}"
        );
    }
    // Every real log of both folders is in the table.
    let dirs = [Some(fixture("fixtures/logs")), realdata("nccl-logs")];
    for e in dirs
        .iter()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
    {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".log") && !name.starts_with("synthetic-") {
            assert!(
                cases.iter().any(|c| c["logs"][0] == name.as_str()),
                "{name} has no row in conclusions.json"
            );
        }
    }
    assert!(misses.is_empty(), "{misses:#?}");
}
