//! Differential sweep: random machines (`topo_nccl::testgen`) through NCCL's own graph code
//! (`nccl-oracle`, see ../shared/tools/nccl-oracle and docs/differential.md) and through topo,
//! compared field by field. Driven by `bench/oracle/run.sh`.
//!
//!     oracle_sweep --oracle BIN --seed S --count N --work DIR
//!                  [--corpus OUT.jsonl --corpus-count M --corpus-max-steps T]
//!                  [--report OUT.md] [--show SEED]
//!                  [--reuse] [--nccl-version 2.XX] [--nodes N]
//!     oracle_sweep --expected CORPUS.jsonl   (prints tests/it/oracle.rs's EXPECTED list)
//!     oracle_sweep --hetero --oracle MULTI_BIN --seed S --count N --work DIR
//!                  [--topo TOPO_BIN | --self-check | --against-homogeneous] [--identical]
//!                  [--nccl-version 2.XX] [--report OUT.md] [--show SEED] [--reuse]
//!                  (jobs of 2 or 3 different hosts, see hetero.rs and bench/oracle/multihost)
//!
//! Writes each machine's XML and the oracle's JSON under DIR, prints the agreement per field
//! and the differences grouped by kind (most machines first), and each machine's topo time
//! (ms) and search steps in DIR/topo-times.txt. `--corpus` records the first M compared
//! machines whose graph search takes at most T steps (default 40,000; XML, environment, the
//! oracle's compared fields) as JSON lines for
//! `tests/it/oracle.rs`. `--show SEED` prints every check of one machine. `--reuse` takes the
//! oracle's answer left in DIR by an earlier run for the same XML instead of running it again.
//! `--nccl-version` is the version topo models (default 2.28); it must be the oracle's tag.
//! `--nodes N` runs every machine on N nodes instead of the generator's count (give each
//! version and node count its own DIR: `--reuse` keys answers by the XML alone).

mod hetero;
#[path = "../../tests/it/oracle_corpus.rs"]
mod support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use support::{Entry, analyze_machine};
use topo_nccl::differential::{self, OracleAnswer, Tally};
use topo_nccl::testgen;

struct Args {
    oracle: PathBuf,
    seed: u64,
    count: u64,
    work: PathBuf,
    corpus: Option<PathBuf>,
    corpus_count: u64,
    corpus_max_steps: u64,
    report: Option<PathBuf>,
    show: Option<u64>,
    reuse: bool,
    expected: Option<PathBuf>,
    version: String,
    nodes: Option<usize>,
    hetero: bool,
    topo: Option<PathBuf>,
    self_check: bool,
    against_homogeneous: bool,
    identical: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        oracle: PathBuf::from("/tmp/nccl-oracle-build/nccl-oracle"),
        seed: 1,
        count: 1000,
        work: std::env::temp_dir().join("topo-oracle-sweep"),
        corpus: None,
        corpus_count: 200,
        corpus_max_steps: 40_000,
        report: None,
        show: None,
        reuse: false,
        expected: None,
        version: "2.28".into(),
        nodes: None,
        hetero: false,
        topo: None,
        self_check: false,
        against_homogeneous: false,
        identical: false,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let val = v.get(i + 1).cloned().unwrap_or_default();
        match v[i].as_str() {
            "--oracle" => a.oracle = val.into(),
            "--seed" => a.seed = val.parse().expect("--seed N"),
            "--count" => a.count = val.parse().expect("--count N"),
            "--work" => a.work = val.into(),
            "--corpus" => a.corpus = Some(val.into()),
            "--corpus-count" => a.corpus_count = val.parse().expect("--corpus-count N"),
            "--corpus-max-steps" => a.corpus_max_steps = val.parse().expect("--corpus-max-steps N"),
            "--report" => a.report = Some(val.into()),
            "--show" => a.show = Some(val.parse().expect("--show SEED")),
            "--nccl-version" => a.version = val,
            "--nodes" => a.nodes = Some(val.parse().expect("--nodes N")),
            "--expected" => a.expected = Some(val.into()),
            "--topo" => a.topo = Some(val.into()),
            "--reuse" | "--hetero" | "--self-check" | "--against-homogeneous" | "--identical" => {
                match v[i].as_str() {
                    "--reuse" => a.reuse = true,
                    "--identical" => a.identical = true,
                    "--hetero" => a.hetero = true,
                    "--self-check" => a.self_check = true,
                    _ => a.against_homogeneous = true,
                }
                i += 1;
                continue;
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    a
}

/// Runs the oracle on one machine; `Err` carries its last error line.
fn run_oracle(
    oracle: &Path,
    xml: &Path,
    json: &Path,
    m: &testgen::GenMachine,
) -> Result<OracleAnswer, String> {
    let _ = std::fs::remove_file(json);
    let mut cmd = Command::new(oracle);
    cmd.arg("--nodes")
        .arg(m.nodes.to_string())
        .arg("--no-tuning")
        .arg("--json")
        .arg(json)
        .arg(xml);
    for (k, _) in std::env::vars() {
        if k.starts_with("NCCL_") || k.starts_with("ORACLE_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("NCCL_DEBUG", "WARN");
    for (k, v) in &m.env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run oracle: {e}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let parsed = std::fs::read_to_string(json)
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok());
    match parsed.as_ref().and_then(OracleAnswer::from_oracle_json) {
        Some(a) if out.status.success() => Ok(a),
        _ => Err(text
            .lines()
            .rev()
            .find(|l| l.contains("ERROR") || l.contains("WARN"))
            .or_else(|| text.lines().last())
            .unwrap_or("no output")
            .chars()
            .take(200)
            .collect()),
    }
}

/// `--expected CORPUS`: prints the `EXPECTED` entries of tests/it/oracle.rs for a corpus.
fn print_expected(path: &Path) {
    let text = std::fs::read_to_string(path).expect("read corpus");
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let e: Entry = serde_json::from_str(line).expect("corpus line");
        let Some(answer) = &e.oracle else {
            continue;
        };
        let Ok(a) = analyze_machine(&e.xml, &e.env, e.nodes, &e.version) else {
            println!("    // seed {}: topo refused", e.seed);
            continue;
        };
        let kind = support::difference_kind(&e, &a);
        for c in differential::compare(answer, &a)
            .iter()
            .filter(|c| !c.equal)
        {
            println!("    ({}, \"{}\", \"{kind}\"),", e.seed, c.name());
        }
    }
}

fn main() {
    let args = parse_args();
    if let Some(p) = &args.expected {
        print_expected(p);
        return;
    }
    if args.hetero {
        run_hetero(&args);
        return;
    }
    std::fs::create_dir_all(&args.work).expect("work folder");
    let t0 = Instant::now();
    let seeds: Vec<u64> = match args.show {
        Some(s) => vec![s],
        None => (args.seed..args.seed + args.count).collect(),
    };
    let mut sweep = Sweep::default();
    for &seed in &seeds {
        sweep.machine(&args, seed);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let r = sweep.report(&args, &seeds, elapsed);
    print!("{r}");
    if let Some(p) = &args.report {
        std::fs::write(p, &r).expect("write report");
    }
    std::fs::write(args.work.join("topo-times.txt"), &sweep.times).expect("write times");
    if let Some(p) = &args.corpus {
        std::fs::write(p, &sweep.corpus).expect("write corpus");
    }
}

/// `--hetero`: jobs of dissimilar hosts (hetero.rs).
fn run_hetero(args: &Args) {
    let reference = match (&args.topo, args.self_check, args.against_homogeneous) {
        (Some(t), false, false) => hetero::Reference::Topo(t.clone()),
        (None, true, false) => hetero::Reference::SelfCheck,
        (None, false, true) => hetero::Reference::Homogeneous,
        _ => panic!("--hetero takes one of --topo BIN, --self-check, --against-homogeneous"),
    };
    hetero::run(&hetero::HeteroArgs {
        oracle: args.oracle.clone(),
        reference,
        seed: args.seed,
        count: args.count,
        work: args.work.clone(),
        version: args.version.clone(),
        show: args.show,
        report: args.report.clone(),
        identical: args.identical,
        reuse: args.reuse,
    });
}

/// What a sweep has met so far, machine by machine.
#[derive(Default)]
struct Sweep {
    tally: Tally,
    machines: usize,
    oracle_refused: BTreeMap<String, Vec<u64>>,
    // Machines NCCL's code stops on that topo says it stops on (by topo's code), that topo
    // plans without saying so, and machines NCCL runs that topo says it stops on.
    stops_said: BTreeMap<&'static str, Vec<u64>>,
    stops_unsaid: Vec<u64>,
    stops_wrong: BTreeMap<&'static str, Vec<u64>>,
    topo_refused: BTreeMap<String, Vec<u64>>,
    // difference kind -> seeds
    kinds: BTreeMap<String, Vec<u64>>,
    machines_differing: usize,
    by_kind: BTreeMap<&'static str, Vec<u64>>,
    corpus: String,
    corpus_n: u64,
    times: String,
    oracle_time: f64,
    topo_time: f64,
}

/// Writes the machine's XML to `xml` and says whether the oracle's answer an earlier run left
/// at `json` is for the same XML (`--reuse`).
fn write_machine(args: &Args, m: &testgen::GenMachine, xml: &Path, json: &Path) -> bool {
    // The oracle's answer depends only on the machine (the generator is deterministic): an
    // answer left by an earlier run for the same XML is reused, so rerunning the comparison
    // after a change to topo costs topo's time only.
    let cached =
        args.reuse && std::fs::read_to_string(xml).is_ok_and(|old| old == m.xml) && json.exists();
    std::fs::write(xml, &m.xml).expect("write xml");
    cached
}

/// The answer an earlier run left at `json`.
fn cached_answer(json: &Path) -> Result<OracleAnswer, String> {
    std::fs::read_to_string(json)
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .as_ref()
        .and_then(OracleAnswer::from_oracle_json)
        .ok_or_else(|| "unreadable cached answer".to_string())
}

impl Sweep {
    /// Generates, runs and compares the machine of one seed.
    fn machine(&mut self, args: &Args, seed: u64) {
        let mut m = testgen::generate(seed);
        if let Some(n) = args.nodes {
            m.nodes = n;
        }
        let xml = args.work.join(format!("{seed}.xml"));
        let json = args.work.join(format!("{seed}.oracle.json"));
        let cached = write_machine(args, &m, &xml, &json);
        let t = Instant::now();
        let answer = if cached {
            cached_answer(&json)
        } else {
            run_oracle(&args.oracle, &xml, &json, &m)
        };
        self.oracle_time += t.elapsed().as_secs_f64();
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                self.oracle_stopped(args, seed, &m, &e);
                return;
            }
        };
        self.machines += 1;
        let t = Instant::now();
        let a = match analyze_machine(&m.xml, &m.env, m.nodes, &args.version) {
            Ok(a) => a,
            Err(e) => {
                let msg = format!("{e:#}");
                self.topo_refused
                    .entry(msg.chars().take(120).collect())
                    .or_default()
                    .push(seed);
                return;
            }
        };
        if let Some(w) = topo_nccl::plan::init_stops(&a).first() {
            self.stops_wrong
                .entry(w.code.name())
                .or_default()
                .push(seed);
        }
        let checks = differential::compare(&answer, &a);
        let took = t.elapsed().as_secs_f64();
        self.topo_time += took;
        let steps = a.graphs.search_steps;
        let _ = writeln!(self.times, "{seed} {:.1} {steps}", took * 1e3);
        // The corpus runs in CI in a debug build, where a search that takes topo 50 ms here
        // takes half a second: it keeps machines whose search is short (`--corpus-max-steps`,
        // counted by the search itself, so the choice does not depend on the machine's load).
        if args.corpus.is_some()
            && self.corpus_n < args.corpus_count
            && steps <= args.corpus_max_steps
        {
            self.corpus_n += 1;
            let e = entry(args, seed, &m, m.xml.clone(), &answer);
            self.corpus
                .push_str(&serde_json::to_string(&e).expect("json"));
            self.corpus.push('\n');
        }
        self.tally.add(&checks);
        if self.record_checks(args, seed, &checks) {
            self.machines_differing += 1;
            let e = entry(args, seed, &m, String::new(), &answer);
            self.by_kind
                .entry(support::difference_kind(&e, &a))
                .or_default()
                .push(seed);
        }
        if args.show.is_some() {
            println!(
                "seed {seed}: {}; env {:?}; xml {}",
                m.summary,
                m.env,
                xml.display()
            );
        }
    }

    /// NCCL's own code stopped on the machine (`e` says why): does topo say it would?
    fn oracle_stopped(&mut self, args: &Args, seed: u64, m: &testgen::GenMachine, e: &str) {
        let key = e.split(':').next_back().unwrap_or(e).trim().to_string();
        self.oracle_refused.entry(key).or_default().push(seed);
        let said = analyze_machine(&m.xml, &m.env, m.nodes, &args.version).map(|a| {
            topo_nccl::plan::init_stops(&a)
                .first()
                .map(|w| w.code.name())
        });
        match said {
            Ok(Some(code)) => self.stops_said.entry(code).or_default().push(seed),
            _ => self.stops_unsaid.push(seed),
        }
        if args.show.is_some() {
            println!("oracle refused: {e}");
        }
    }

    /// Counts the differing fields of one machine (printing every check with `--show`);
    /// true when any differs.
    fn record_checks(&mut self, args: &Args, seed: u64, checks: &[differential::Check]) -> bool {
        let mut differs = false;
        for c in checks {
            if args.show.is_some() {
                println!(
                    "{} {}\n  oracle: {}\n  topo:   {}",
                    if c.equal { "same" } else { "DIFF" },
                    c.name(),
                    c.oracle,
                    c.topo
                );
            }
            if !c.equal {
                differs = true;
                self.kinds.entry(c.name()).or_default().push(seed);
            }
        }
        differs
    }

    /// The sweep's report: counts, agreement, time, then the differences and refusals by kind.
    fn report(&self, args: &Args, seeds: &[u64], elapsed: f64) -> String {
        let mut r = String::new();
        let nodes = args
            .nodes
            .map_or("the generator's".to_string(), |n| n.to_string());
        let _ = writeln!(r, "NCCL {}; nodes: {nodes}", args.version);
        let _ = writeln!(
            r,
            "seeds {}..{}: {} generated, {} compared ({} with a difference), oracle refused {}, topo refused {}",
            seeds.first().copied().unwrap_or(args.seed),
            seeds.first().copied().unwrap_or(args.seed) + seeds.len() as u64,
            seeds.len(),
            self.machines,
            self.machines_differing,
            self.oracle_refused.values().map(Vec::len).sum::<usize>(),
            self.topo_refused.values().map(Vec::len).sum::<usize>(),
        );
        let _ = writeln!(r, "agreement: {}", self.tally.summary());
        let _ = writeln!(
            r,
            "time: {elapsed:.1} s in all (oracle {:.1} s, topo analysis and comparison {:.1} s)",
            self.oracle_time, self.topo_time
        );
        let _ = writeln!(
            r,
            "machines with a difference by kind (docs/differential.md):"
        );
        for (k, v) in &self.by_kind {
            let _ = writeln!(r, "  kind {k}: {} {:?}", v.len(), &v[..v.len().min(12)]);
        }
        let mut by_count: Vec<(&String, &Vec<u64>)> = self.kinds.iter().collect();
        by_count.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        let _ = writeln!(r, "differences by kind (machines, first seeds):");
        for (k, v) in by_count {
            let _ = writeln!(r, "  {k}: {} {:?}", v.len(), &v[..v.len().min(8)]);
        }
        self.report_stops(&mut r);
        r
    }

    /// The refusals, and where topo and NCCL disagree on whether NCCL stops.
    fn report_stops(&self, r: &mut String) {
        for (what, map) in [
            ("oracle refused", &self.oracle_refused),
            ("topo refused", &self.topo_refused),
        ] {
            for (k, v) in map {
                let _ = writeln!(r, "{what}: {k}: {} {:?}", v.len(), &v[..v.len().min(8)]);
            }
        }
        for (k, v) in &self.stops_said {
            let _ = writeln!(
                r,
                "  where NCCL stops, topo says so ({k}): {} {:?}",
                v.len(),
                &v[..v.len().min(8)]
            );
        }
        if !self.stops_unsaid.is_empty() {
            let n = self.stops_unsaid.len();
            let _ = writeln!(
                r,
                "  where NCCL stops, topo does not say so: {n} {:?}",
                &self.stops_unsaid[..n.min(8)]
            );
        }
        for (k, v) in &self.stops_wrong {
            let _ = writeln!(
                r,
                "topo says NCCL stops ({k}) where it runs: {} {:?}",
                v.len(),
                &v[..v.len().min(8)]
            );
        }
    }
}

/// A corpus entry for a compared machine (`xml` empty where only its kind is wanted).
fn entry(
    args: &Args,
    seed: u64,
    m: &testgen::GenMachine,
    xml: String,
    answer: &OracleAnswer,
) -> Entry {
    Entry {
        seed,
        summary: m.summary.clone(),
        nodes: m.nodes,
        env: m.env.clone(),
        xml,
        oracle: Some(answer.clone()),
        error: None,
        version: args.version.clone(),
    }
}
