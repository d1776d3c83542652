//! The engine on logs the model itself writes: a log that says what the model predicts
//! matches it, and one changed line is marked.

use super::*;
use topo_evidence::nccllog;
use topo_model::message::Code;
use topo_model::testing::hgx;
use topo_nccl::analyze::{Request, RuntimeFacts, analyze};
use topo_nccl::version::NcclVersion;

/// The INFO lines NCCL 2.28 would print for `topo` per the model: version, comm lines,
/// rank 0's ring line, channel counts, one connection line per pair.
fn model_log(topo: &topo_model::Topology) -> String {
    let a = analyze(&Request {
        topo,
        env: vec![],
        version: NcclVersion::parse("2.28").unwrap(),
        placement: Default::default(),
        facts: RuntimeFacts::default(),
    })
    .unwrap();
    let n = a.nranks;
    let mut s = String::from("h:1:1 [0] NCCL INFO NCCL version 2.28.3+cuda12.9\n");
    for r in 0..n {
        s += &format!(
            "h:{p}:{p} [{r}] NCCL INFO comm 0x1 rank {r} nRanks {n} nNodes 1 localRanks {n} localRank {r} MNNVL 0\n",
            p = 100 + r
        );
    }
    s += &format!("h:100:100 [0] NCCL INFO {}\n", a.counts.log_line());
    for t in &a.transports {
        s += &format!(
            "h:{}:9 [{}] NCCL INFO {}\n",
            100 + t.from,
            t.from_dev,
            t.info_line(0, 0)
        );
    }
    s
}

fn run(text: &str) -> Report {
    let topo = hgx(8, 90);
    let log = nccllog::parse(text);
    diagnose(&Input {
        logs: vec![LogInput {
            name: "m.log".into(),
            log: &log,
        }],
        topo: Some(&topo),
        ..Default::default()
    })
}

#[test]
fn a_log_of_what_the_model_predicts_matches_it() {
    let text = model_log(&hgx(8, 90));
    let r = run(&text);
    assert!(!r.comparisons.is_empty());
    assert!(
        r.comparisons.iter().all(|c| !c.differs),
        "{:?}",
        r.comparisons
    );
    assert_eq!(r.transports.len(), 56);
    assert!(
        r.transports.iter().all(|t| !t.differs),
        "{:?}",
        r.transports
    );
    // A log that shows no failure says what it shows, not "no problem found".
    let ids: Vec<_> = r.findings.iter().map(|f| f.code).collect();
    assert_eq!(ids, vec![Code::LogNoFailure], "{:?}", r.findings);
    assert!(
        r.verdict.starts_with("info: the log shows no NCCL failure"),
        "{}",
        r.verdict
    );
}

#[test]
fn one_changed_line_is_marked() {
    let text = model_log(&hgx(8, 90));
    let line = text
        .lines()
        .find(|l| l.contains("0[0] -> 1[1] via"))
        .unwrap();
    let changed = text.replace(
        line,
        "h:100:9 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
    );
    let changed = changed.replacen("24 coll", "12 coll", 1);
    let r = run(&changed);
    let row = r
        .transports
        .iter()
        .find(|t| (t.from, t.to) == (0, 1))
        .unwrap();
    assert!(row.differs);
    assert!(r.has(Code::TransportDiffersFromPlan));
    assert!(r.has(Code::P2pRefused));
    let coll = r
        .comparisons
        .iter()
        .find(|c| c.what == "coll channels")
        .unwrap();
    assert!(coll.differs, "{coll:?}");
}

#[test]
fn findings_of_one_id_merge_and_sort_by_severity() {
    let mut r = diagnose(&Input::default());
    r.findings = vec![
        Finding::new(Code::NvlinkMesh, "x"),
        Finding::at(Code::NvlinkDegraded, Severity::Warning, "y").evidence(["1".to_string()]),
        Finding::new(Code::NvlinkDegraded, "y2").evidence(["2".to_string()]),
    ];
    r.checked("something");
    finish(&mut r, false, &[]);
    assert_eq!(r.findings.len(), 2);
    assert_eq!(r.findings[0].code, Code::NvlinkDegraded);
    assert_eq!(r.findings[0].severity, Severity::Error);
    assert_eq!(r.findings[0].evidence, ["1", "2"]);
    assert_eq!(r.worst, Some(Severity::Error));
    assert!(r.verdict.starts_with("error: y"), "{}", r.verdict);
}

/// `n` jobs, one process each on one host, each with a WARN line: every job is judged
/// alone and raises its own warning.
fn many_jobs(n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        let p = 1000 + i;
        s.push_str(&format!(
            "box:{p}:{p} [0] NCCL INFO NCCL version 2.18.3+cuda12.2\n\
             box:{p}:{p} [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n\
             box:{p}:{p} [0] NCCL WARN job {i}: Cuda failure 'out of memory'\n"
        ));
    }
    s
}

fn diagnose_jobs(text: &str) -> (std::time::Duration, Report) {
    let named: Vec<(String, nccllog::NcclLog)> = nccllog::parse_jobs(text)
        .into_iter()
        .enumerate()
        .map(|(i, l)| (format!("m.log (job {})", i + 1), l))
        .collect();
    let t0 = std::time::Instant::now();
    let r = diagnose(&Input {
        logs: named
            .iter()
            .map(|(n, l)| LogInput {
                name: n.clone(),
                log: l,
            })
            .collect(),
        ..Default::default()
    });
    (t0.elapsed(), r)
}

/// A log of many jobs (issue 45: 40,000 jobs took 94 s and printed 22 MB): four times the
/// jobs cost under six times the time, and one finding keeps at most `MAX_EVIDENCE` lines
/// with a count of the rest.
#[test]
fn many_jobs_are_judged_in_linear_time_with_bounded_evidence() {
    let (small, large) = (many_jobs(400), many_jobs(1600));
    assert_eq!(nccllog::parse_jobs(&large).len(), 1600);
    // Interleaved, best of five: the machine is shared, and load comes in bursts.
    let (mut a, mut b) = (std::time::Duration::MAX, std::time::Duration::MAX);
    for _ in 0..5 {
        a = a.min(diagnose_jobs(&small).0);
        b = b.min(diagnose_jobs(&large).0);
    }
    assert!(
        b < a * 6 + std::time::Duration::from_millis(50),
        "{a:?} -> {b:?}"
    );
    let (_, r) = diagnose_jobs(&large);
    let f = r
        .findings
        .iter()
        .find(|f| f.code == Code::CudaOutOfMemory)
        .unwrap();
    assert_eq!(f.evidence.len(), crate::MAX_EVIDENCE + 1);
    // Every job's WARN line is its own evidence (1,600), beside the few the catalogue adds.
    let last = f.evidence.last().unwrap();
    let more: usize = last
        .strip_prefix("... and ")
        .and_then(|x| x.strip_suffix(" more evidence lines not shown"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{last}"));
    assert!((1536..1600).contains(&more), "{last}");
    assert_eq!(r.checked.len(), 1600);
}

/// A line of a megabyte is quoted cut, with the count of what was left out.
#[test]
fn a_long_line_is_quoted_cut() {
    let q = crate::quote("m.log", 3, &"x".repeat(1 << 20));
    assert!(q.len() < crate::report::QUOTE_BYTES + 64, "{}", q.len());
    assert!(q.ends_with(&format!(
        "... ({} more bytes)",
        (1 << 20) - crate::report::QUOTE_BYTES
    )));
}
