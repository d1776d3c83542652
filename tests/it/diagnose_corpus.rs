//! Every real log of fixtures/logs through `topo diagnose`: its first finding (code and the
//! cause in its title) is the thread's conclusion, as recorded in fixtures/logs/conclusions.json
//! (39 logs of public threads copied from ../shared/realdata/nccl-logs, issue 49).

use crate::util::{fixture, topo_clean_env};
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
        for l in c["logs"].as_array().unwrap() {
            args.push("--nccl-log".into());
            args.push(
                fixture(&format!("fixtures/logs/{}", l.as_str().unwrap()))
                    .display()
                    .to_string(),
            );
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
    // Every real log of the folder is in the table.
    for e in std::fs::read_dir(fixture("fixtures/logs")).unwrap() {
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
