//! The engine over every real log in fixtures/logs: pasted through launchers and terminals it
//! finds the same as clean, and no `!` of a comparison stands without a finding.

use super::*;
use proptest::prelude::*;
use topo_evidence::nccllog;

const LOGS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/logs");
/// The public thread logs beside the repository (CI has them; they are never copied in).
const REALDATA_LOGS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/realdata/nccl-logs"
);

/// The corpus folders: the repository's logs, and the public ones where they are present.
pub(crate) fn log_dirs() -> Vec<std::fs::ReadDir> {
    let mut dirs = vec![std::fs::read_dir(LOGS).unwrap()];
    match std::fs::read_dir(REALDATA_LOGS) {
        Ok(d) => dirs.push(d),
        Err(_) => {
            eprintln!("skipped: {REALDATA_LOGS} is absent (../shared is not beside the repository)")
        }
    }
    dirs
}

/// Every `.log` file of the fixtures, with its text.
fn fixture_logs() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = log_dirs()
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    assert!(out.len() >= 8, "{} logs", out.len());
    out
}

fn report(name: &str, text: &str, topo: Option<&topo_model::Topology>) -> Report {
    let log = nccllog::parse(text);
    diagnose(&Input {
        logs: vec![LogInput {
            name: name.into(),
            log: &log,
        }],
        topo,
        ..Default::default()
    })
}

/// What a user's paste adds to a line: launcher prefixes, a kubectl timestamp, colour, CRLF.
fn mangle(text: &str, seed: u64) -> String {
    const PREFIXES: [&str; 7] = [
        "",
        "[1,0]<stdout>:",
        "0: ",
        "[rank0]: ",
        "rank3: ",
        "2024-05-01T12:00:00.123456789Z ",
        "[default1]:",
    ];
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = String::with_capacity(text.len() * 2);
    for line in text.lines() {
        let r = next();
        out += PREFIXES[(r % 7) as usize];
        if r & 0x100 != 0 {
            out += PREFIXES[((r >> 16) % 7) as usize];
        }
        match (r >> 24) % 3 {
            0 => out += line,
            1 => out += &format!("\x1b[32m{line}\x1b[0m"),
            _ => out += &line.replacen("NCCL INFO", "\x1b[1;34mNCCL INFO\x1b[0m", 1),
        }
        out += if r & 0x200 != 0 { "\r\n" } else { "\n" };
    }
    if !text.ends_with('\n') {
        out.pop();
        if out.ends_with('\r') {
            out.pop();
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn pasted_logs_give_the_findings_of_the_clean_log(seed in any::<u64>()) {
        for (name, text) in fixture_logs() {
            let clean = report(&name, &text, None);
            let pasted = report(&name, &mangle(&text, seed), None);
            prop_assert_eq!(&clean.findings, &pasted.findings, "{}", name);
            prop_assert_eq!(&clean.comparisons, &pasted.comparisons, "{}", name);
            prop_assert_eq!(&clean.log_notes, &pasted.log_notes, "{}", name);
        }
    }
}

#[test]
fn the_mangled_text_is_really_mangled() {
    let (_, text) = &fixture_logs()[0];
    let m = mangle(text, 7);
    assert!(m.contains("\r\n") && m.contains("\x1b[") && m.contains("<stdout>:"));
    assert_ne!(report("a", text, None).findings, vec![]);
}

/// How many comparison or transport rows differ over `logs` against `machine`, asserting
/// that each comes with a warning that names it.
fn bangs_on(logs: &[(String, String)], machine: Option<&topo_model::Topology>) -> usize {
    let mut bangs = 0;
    for (name, text) in logs {
        let r = report(name, text, machine);
        let cmp = r.comparisons.iter().any(|c| c.differs);
        let tr = r.transports.iter().any(|t| t.differs);
        let warned = |id: &str| {
            r.findings
                .iter()
                .any(|f| f.code == id && f.severity >= Severity::Warning)
        };
        if cmp {
            bangs += 1;
            assert!(warned("log-differs-from-plan"), "{name}: {:?}", r.findings);
        }
        if tr {
            bangs += 1;
            assert!(warned("transport-differs-from-plan"), "{name}");
        }
        if cmp || tr {
            assert!(
                !r.verdict.starts_with("no problem"),
                "{name}: {}",
                r.verdict
            );
        }
    }
    bangs
}

/// Each fixture log alone and against every machine profile: a comparison or transport row
/// marked as differing always comes with a warning (or worse) that names it.
#[test]
fn no_bang_in_a_comparison_without_a_finding() {
    let mut machines: Vec<Option<topo_model::Topology>> = vec![None];
    for p in [
        "dgx-h100",
        "dgx-v100",
        "dgx-a100",
        "hgx-h200",
        "2x-rtx4090",
        "pcie-8x-l40s",
    ] {
        machines.push(Some(topo_source::profile::load_builtin(p).unwrap()));
    }
    // One thread per machine: each log is planned against each, and alone this test was
    // most of the crate's test time.
    let logs = fixture_logs();
    let bangs: usize = std::thread::scope(|s| {
        let per_machine: Vec<_> = machines
            .iter()
            .map(|m| s.spawn(|| bangs_on(&logs, m.as_ref())))
            .collect();
        per_machine.into_iter().map(|h| h.join().unwrap()).sum()
    });
    // The corpus does exercise it: logs laid against machines they did not run on.
    assert!(bangs > 0);
}
