//! `oracle_sweep --hetero`: jobs whose hosts differ (issue 28 item 1), through the multi-host
//! oracle (bench/oracle/multihost, `--node-xml` per host) and through a reference, compared
//! field by field per job.
//!
//! References: `--topo BIN` runs `topo plan --from A.xml --from B.xml ...` (one `--from` per
//! host, in node order); `--self-check` makes every host of a job the same file and compares
//! `--node-xml A` (once per node) with the stock form `--nodes N A`, which must be equal in
//! every field and byte for byte; `--against-homogeneous` compares each dissimilar job with
//! `--nodes N` on its first host, i.e. shows which fields the dissimilarity changes.
//!
//! Hosts come from `testgen::generate(seed)` (the first host, whose NCCL variables the whole
//! job shares) and one variant of it per further node: one thing changed (one NIC fewer, no
//! NVLink, another CPU vendor, another SM, slower PCIe, slower NICs) or another generated host.

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use topo_nccl::testgen::{self, Rng};

/// What a job is compared with.
pub enum Reference {
    Topo(PathBuf),
    SelfCheck,
    Homogeneous,
}

pub struct HeteroArgs {
    pub oracle: PathBuf,
    pub reference: Reference,
    pub seed: u64,
    pub count: u64,
    pub work: PathBuf,
    pub version: String,
    pub show: Option<u64>,
    pub report: Option<PathBuf>,
    /// Every host of a job the first one (`--identical`; implied by `--self-check`).
    pub identical: bool,
    /// Take the oracle's answer an earlier run left in `work` for the same host files
    /// (`--reuse`).
    pub reuse: bool,
}

/// One communicator: a host XML per node, in node order.
pub struct Job {
    pub hosts: Vec<String>,
    pub env: Vec<(String, String)>,
    /// `base (summary) + change, ...`.
    pub summary: String,
}

const CHANGES: [&str; 7] = [
    "one NIC fewer",
    "no NVLink",
    "other CPU vendor",
    "other SM",
    "slower PCIe",
    "slower NICs",
    "other host",
];

/// Replaces the value of `key="..."` on every line that `pick` accepts.
fn set_attr(
    xml: &str,
    key: &str,
    pick: impl Fn(&str) -> bool,
    f: impl Fn(&str) -> String,
) -> String {
    let pat = format!(" {key}=\"");
    let mut out = String::with_capacity(xml.len());
    for line in xml.lines() {
        match line.find(&pat) {
            Some(i) if pick(line) => {
                let start = i + pat.len();
                let end = start + line[start..].find('"').unwrap_or(0);
                out.push_str(&line[..start]);
                out.push_str(&f(&line[start..end]));
                out.push_str(&line[end..]);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

fn attr_of<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!(" {key}=\"");
    let start = line.find(&pat)? + pat.len();
    Some(&line[start..start + line[start..].find('"')?])
}

/// `base` with one change; `None` when the change does not apply (e.g. no NIC to remove).
fn vary(base: &str, change: &str, seed: u64, k: u64) -> Option<String> {
    let out = match change {
        "one NIC fewer" => {
            // The NCCL device with the highest number goes, as when one port is down. A host
            // keeps at least one: without any, NCCL would use its socket NIC, which the file
            // cannot describe.
            let devs: Vec<i64> = base
                .lines()
                .filter(|l| l.trim_start().starts_with("<net "))
                .filter_map(|l| attr_of(l, "dev")?.parse::<i64>().ok())
                .collect();
            if devs.len() < 2 {
                return None;
            }
            let last = *devs.iter().max()?;
            let mut out = String::new();
            for l in base.lines() {
                let is_last = l.trim_start().starts_with("<net ")
                    && attr_of(l, "dev").and_then(|d| d.parse::<i64>().ok()) == Some(last);
                if !is_last {
                    out.push_str(l);
                    out.push('\n');
                }
            }
            out
        }
        "no NVLink" => {
            let mut out = String::new();
            for l in base
                .lines()
                .filter(|l| !l.trim_start().starts_with("<nvlink"))
            {
                out.push_str(l);
                out.push('\n');
            }
            out
        }
        "other CPU vendor" => {
            let is_cpu = |l: &str| l.trim_start().starts_with("<cpu ");
            let intel = base
                .lines()
                .any(|l| is_cpu(l) && l.contains("GenuineIntel"));
            let (arch, vendor, family, model) = if intel {
                ("x86_64", "AuthenticAMD", "25", "17")
            } else {
                ("x86_64", "GenuineIntel", "6", "143")
            };
            let x = set_attr(base, "arch", is_cpu, |_| arch.into());
            let x = set_attr(&x, "vendor", is_cpu, |_| vendor.into());
            let x = set_attr(&x, "familyid", is_cpu, |_| family.into());
            set_attr(&x, "modelid", is_cpu, |_| model.into())
        }
        "other SM" => {
            // Neighbouring generations, as a job spanning an old and a new partition would.
            set_attr(
                base,
                "sm",
                |l| l.trim_start().starts_with("<gpu "),
                |v| {
                    match v {
                        "70" => "80",
                        "75" | "86" | "89" => "80",
                        "80" => "90",
                        "90" => "100",
                        _ => "90",
                    }
                    .into()
                },
            )
        }
        "slower PCIe" => set_attr(
            base,
            "link_speed",
            |_| true,
            |v| match v {
                "64.0 GT/s PCIe" => "32.0 GT/s PCIe".into(),
                "32.0 GT/s PCIe" => "16.0 GT/s PCIe".into(),
                "16.0 GT/s PCIe" => "8.0 GT/s PCIe".into(),
                other => other.into(),
            },
        ),
        "slower NICs" => set_attr(
            base,
            "speed",
            |l| l.trim_start().starts_with("<net "),
            |v| (v.parse::<u64>().unwrap_or(100_000) / 2).to_string(),
        ),
        _ => {
            // Another generated host; a few draws until one has GPUs and differs in count or SM.
            for i in 0..8u64 {
                let m = testgen::generate(
                    seed.wrapping_mul(7919)
                        .wrapping_add(1_000_003 * (k + 1) + i),
                );
                if m.xml.contains("<gpu ") && m.xml != base {
                    return Some(m.xml);
                }
            }
            return None;
        }
    };
    (out != base).then_some(out)
}

/// The job of a seed: 2 nodes most of the time, 3 sometimes.
pub fn generate_job(seed: u64, identical: bool) -> Job {
    let base = testgen::generate(seed);
    let mut r = Rng::new(seed ^ 0x4e7e_7000_0000_0028);
    let nodes = if r.chance(0.3) { 3 } else { 2 };
    let mut hosts = vec![base.xml.clone()];
    // The generator's own node count (` x2`) does not apply here.
    let mut summary = base.summary.trim_end_matches(" x2").to_string();
    for k in 1..nodes {
        if identical {
            hosts.push(base.xml.clone());
            continue;
        }
        // Mostly a single change against the first host; the rest a wholly other host.
        let mut change = r.pick(&CHANGES);
        let mut xml = vary(&base.xml, change, seed, k as u64);
        if xml.is_none() {
            change = "other host";
            xml = vary(&base.xml, change, seed, k as u64);
        }
        let Some(xml) = xml else {
            continue;
        };
        let _ = write!(summary, " + node {k}: {change}");
        hosts.push(xml);
    }
    if identical {
        let _ = write!(summary, " x{nodes} identical");
    }
    Job {
        hosts,
        env: base.env.clone(),
        summary,
    }
}

/// The compared fields of one answer, from the oracle's or from topo's JSON.
#[derive(Debug, Default)]
pub struct Norm {
    /// graph -> (line, GPU ranks per channel, channel lines); `None` when not searched.
    graphs: BTreeMap<String, Option<(String, Value, Vec<String>)>>,
    channel_line: String,
    rings: Value,
    trees: String,
    /// `coll algo proto` -> (latency us, bandwidth GB/s); `None` when disabled.
    cells: BTreeMap<String, Option<(f64, f64)>>,
    /// (coll, bytes) -> (algo, proto, nchannels, time us).
    choices: BTreeMap<(String, u64), (String, String, i64, f64)>,
}

const COLLS: [&str; 5] = [
    "broadcast",
    "reduce",
    "allgather",
    "reducescatter",
    "allreduce",
];
const ALGOS: [&str; 7] = [
    "Tree",
    "Ring",
    "CollNetDirect",
    "CollNetChain",
    "NVLS",
    "NVLSTree",
    "PAT",
];
const PROTOS: [&str; 3] = ["LL", "LL128", "Simple"];

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn choice_rows(v: Option<&Value>) -> BTreeMap<(String, u64), (String, String, i64, f64)> {
    let mut out = BTreeMap::new();
    for r in v.and_then(Value::as_array).into_iter().flatten() {
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let key = (
            s("collective"),
            r.get("bytes").and_then(Value::as_u64).unwrap_or(0),
        );
        let row = (
            s("algo"),
            s("proto"),
            r.get("nchannels").and_then(Value::as_i64).unwrap_or(-1),
            r.get("time_us").and_then(Value::as_f64).unwrap_or(f64::NAN),
        );
        out.insert(key, row);
    }
    out
}

impl Norm {
    pub fn from_oracle(v: &Value) -> Norm {
        let mut n = Norm::default();
        for g in ["ring", "tree", "nvls"] {
            let og = v.get("graphs").and_then(|x| x.get(g));
            let computed =
                og.and_then(|x| x.get("computed")).and_then(Value::as_bool) == Some(true);
            n.graphs.insert(
                g.into(),
                og.filter(|_| computed).map(|x| {
                    let line = x
                        .get("line")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let ch = x.get("channels").cloned().unwrap_or(Value::Null);
                    (line, ch, strings(x.get("log")))
                }),
            );
        }
        let s = |p: &[&str]| {
            let mut x = Some(v);
            for k in p {
                x = x.and_then(|y| y.get(k));
            }
            x.and_then(Value::as_str).unwrap_or("(none)").to_string()
        };
        n.channel_line = s(&["channels", "log_line"]);
        n.rings = v.get("rings").cloned().unwrap_or(Value::Null);
        n.trees = s(&["trees_line"]);
        let cells = v.get("tuning").and_then(|t| t.get("cells"));
        for c in COLLS {
            for a in ALGOS {
                for (pi, p) in PROTOS.iter().enumerate() {
                    let cell = cells
                        .and_then(|x| x.get(c))
                        .and_then(|x| x.get(a))
                        .and_then(|x| x.get(pi));
                    let lat = cell.and_then(|x| x.get(0)).and_then(Value::as_f64);
                    let bw = cell.and_then(|x| x.get(1)).and_then(Value::as_f64);
                    if let (Some(lat), Some(bw)) = (lat, bw) {
                        n.cells
                            .insert(format!("{c} {a} {p}"), (bw != 0.0).then_some((lat, bw)));
                    }
                }
            }
        }
        n.choices = choice_rows(v.get("algo_table"));
        n
    }

    pub fn from_topo(v: &Value) -> Norm {
        let mut n = Norm::default();
        for g in ["ring", "tree", "nvls"] {
            let tg = v
                .get("graphs")
                .and_then(|x| x.get(g))
                .filter(|x| !x.is_null());
            n.graphs.insert(
                g.into(),
                tg.map(|x| {
                    let log = strings(x.get("log"));
                    let line = log.first().cloned().unwrap_or_default();
                    let ch = x.get("channels").cloned().unwrap_or(Value::Null);
                    (line, ch, log)
                }),
            );
        }
        n.channel_line = v
            .get("channels")
            .and_then(|c| c.get("log_line"))
            .and_then(Value::as_str)
            .unwrap_or("(none)")
            .to_string();
        n.rings = v.get("rings").cloned().unwrap_or(Value::Null);
        n.trees = strings(v.get("log"))
            .into_iter()
            .find(|l| l.starts_with("Trees"))
            .unwrap_or_else(|| "(none)".into());
        if let Some(costs) = v.get("costs") {
            for c in COLLS {
                for a in ALGOS {
                    for p in PROTOS {
                        let t = costs
                            .get(c)
                            .and_then(|x| x.get(a.to_lowercase()))
                            .and_then(|x| x.get(p.to_lowercase()))
                            .filter(|x| !x.is_null());
                        let lat = t.and_then(|x| x.get("lat_us")).and_then(Value::as_f64);
                        let bw = t.and_then(|x| x.get("bw_gbps")).and_then(Value::as_f64);
                        let cell = match (lat, bw) {
                            (Some(l), Some(b)) if b != 0.0 => Some((l, b)),
                            _ => None,
                        };
                        n.cells.insert(format!("{c} {a} {p}"), cell);
                    }
                }
            }
        }
        n.choices = choice_rows(v.get("table"));
        n
    }
}

/// Equal to 1e-3 relative, or within half of the last digit the oracle prints (as compare.py).
fn close(a: f64, b: f64, printed: f64) -> bool {
    (a - b).abs() <= (1e-3 * a.abs().max(b.abs()).max(1e-6)).max(printed / 2.0 + 1e-9)
}

/// One compared field of one job: equal items of all, and the first differences.
#[derive(Debug)]
pub struct FieldCheck {
    pub field: String,
    pub equal: usize,
    pub total: usize,
    pub first: Vec<String>,
}

fn check(field: &str, pairs: Vec<(String, bool, String)>) -> FieldCheck {
    let total = pairs.len();
    let equal = pairs.iter().filter(|p| p.1).count();
    let first = pairs
        .into_iter()
        .filter(|p| !p.1)
        .take(3)
        .map(|(what, _, d)| format!("{what}: {d}"))
        .collect();
    FieldCheck {
        field: field.into(),
        equal,
        total,
        first,
    }
}

/// Field by field: `o` is the oracle's answer, `t` the reference's.
pub fn compare(o: &Norm, t: &Norm) -> Vec<FieldCheck> {
    let mut out = vec![];
    for g in ["ring", "tree", "nvls"] {
        let og = o.graphs.get(g).cloned().flatten();
        let tg = t.graphs.get(g).cloned().flatten();
        let line = |x: &Option<(String, Value, Vec<String>)>| {
            x.as_ref()
                .map_or("(not searched)".to_string(), |y| y.0.clone())
        };
        // An unsearched NVLS graph and one searched without channels are the same answer.
        let empty = |x: &Option<(String, Value, Vec<String>)>| {
            x.as_ref().is_none_or(|y| {
                y.1.as_array().is_some_and(Vec::is_empty) && y.0.contains("nChannels 0")
            })
        };
        let same_line =
            line(&og) == line(&tg) || (og.is_none() && empty(&tg)) || (tg.is_none() && empty(&og));
        out.push(check(
            &format!("graph line ({g})"),
            vec![(
                g.into(),
                same_line,
                format!("oracle {} | ref {}", line(&og), line(&tg)),
            )],
        ));
        if let (Some(a), Some(b)) = (&og, &tg) {
            out.push(check(
                &format!("channel orders ({g})"),
                vec![(
                    g.into(),
                    a.1 == b.1,
                    format!("oracle {} | ref {}", a.1, b.1),
                )],
            ));
            let n = a.2.len().max(b.2.len());
            let pairs = (0..n)
                .map(|i| {
                    let x = a.2.get(i).cloned().unwrap_or_else(|| "(none)".into());
                    let y = b.2.get(i).cloned().unwrap_or_else(|| "(none)".into());
                    (
                        format!("line {i}"),
                        x == y,
                        format!("oracle `{x}` | ref `{y}`"),
                    )
                })
                .collect();
            out.push(check(&format!("channel lines ({g})"), pairs));
        }
    }
    out.push(check(
        "channel line",
        vec![(
            "channels".into(),
            o.channel_line == t.channel_line,
            format!("oracle `{}` | ref `{}`", o.channel_line, t.channel_line),
        )],
    ));
    out.push(check(
        "rings",
        vec![(
            "rings".into(),
            o.rings == t.rings,
            format!("oracle {} | ref {}", o.rings, t.rings),
        )],
    ));
    out.push(check(
        "trees",
        vec![(
            "trees".into(),
            o.trees == t.trees,
            format!("oracle `{}` | ref `{}`", o.trees, t.trees),
        )],
    ));
    if !o.cells.is_empty() {
        let pairs = o
            .cells
            .iter()
            .map(|(k, oc)| {
                let tc = t.cells.get(k).copied().flatten();
                let eq = match (oc, tc) {
                    (None, None) => true,
                    (Some((l1, b1)), Some((l2, b2))) => close(*l1, l2, 0.1) && close(*b1, b2, 0.1),
                    _ => false,
                };
                (k.clone(), eq, format!("oracle {oc:?} | ref {tc:?}"))
            })
            .collect();
        out.push(check("tuning cells", pairs));
    }
    if !o.choices.is_empty() {
        let pairs = o
            .choices
            .iter()
            .map(|(k, oc)| {
                let tc = t.choices.get(k);
                let eq = tc.is_some_and(|tc| {
                    (&oc.0, &oc.1, oc.2) == (&tc.0, &tc.1, tc.2) && close(oc.3, tc.3, 0.01)
                });
                (
                    format!("{} {} B", k.0, k.1),
                    eq,
                    format!("oracle {oc:?} | ref {tc:?}"),
                )
            })
            .collect();
        out.push(check("per-size choices", pairs));
    }
    out
}

fn clean_env(cmd: &mut Command, env: &[(String, String)]) {
    for (k, _) in std::env::vars() {
        if k.starts_with("NCCL_") || k.starts_with("ORACLE_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("NCCL_DEBUG", "WARN");
    for (k, v) in env {
        cmd.env(k, v);
    }
}

/// The oracle's JSON (`Ok`), or why there is none. A JSON with an `error` field is `Ok`.
fn run_oracle(
    oracle: &Path,
    args: &[String],
    json: &Path,
    env: &[(String, String)],
) -> Result<Value, String> {
    let _ = std::fs::remove_file(json);
    let mut cmd = Command::new(oracle);
    cmd.arg("--json").arg(json).args(args);
    clean_env(&mut cmd, env);
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run oracle: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    match std::fs::read_to_string(json)
        .ok()
        .and_then(|s| serde_json::from_str::<Value>(&s).ok())
    {
        Some(v) => Ok(v),
        None => Err(text
            .lines()
            .rev()
            .find(|l| l.contains("ERROR"))
            .or_else(|| text.lines().last())
            .unwrap_or("no output")
            .chars()
            .take(200)
            .collect()),
    }
}

/// The codes of a plan's findings about dissimilar hosts (`hosts-*`), once each.
fn host_codes(plan: &Value) -> Vec<String> {
    let mut codes: Vec<String> = plan
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("code").and_then(Value::as_str))
        .filter(|c| c.starts_with("hosts-"))
        .map(String::from)
        .collect();
    codes.sort();
    codes.dedup();
    codes
}

fn run_topo(
    topo: &Path,
    files: &[PathBuf],
    version: &str,
    env: &[(String, String)],
) -> Result<Value, String> {
    let mut cmd = Command::new(topo);
    cmd.arg("plan");
    for f in files {
        cmd.arg("--from").arg(f);
    }
    cmd.args([
        "--nccl-version",
        version,
        "--format",
        "json",
        "--collective",
        "all",
    ]);
    cmd.args(["-b", "8", "-e", "16G", "-f", "2"]);
    for (k, v) in env {
        cmd.arg("--env").arg(format!("{k}={v}"));
    }
    let out = cmd.output().map_err(|e| format!("cannot run topo: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        return Err(err
            .lines()
            .next()
            .unwrap_or("topo failed")
            .chars()
            .take(200)
            .collect());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("topo json: {e}"))
}

/// What a hetero sweep has met so far, job by job.
#[derive(Default)]
struct Sweep {
    /// One line per compared job.
    lines: String,
    /// field -> (jobs with it equal, jobs compared, seeds where it differs).
    per_field: BTreeMap<String, (usize, usize, Vec<u64>)>,
    compared: usize,
    differing: usize,
    bytes_equal: usize,
    refused: BTreeMap<String, Vec<u64>>,
    warned: BTreeMap<String, Vec<u64>>,
    found: BTreeMap<String, Vec<u64>>,
}

pub fn run(a: &HeteroArgs) {
    std::fs::create_dir_all(&a.work).expect("work folder");
    let identical = a.identical || matches!(a.reference, Reference::SelfCheck);
    let seeds: Vec<u64> = match a.show {
        Some(s) => vec![s],
        None => (a.seed..a.seed + a.count).collect(),
    };
    let mut sweep = Sweep::default();
    for &seed in &seeds {
        sweep.job(a, seed, identical);
    }
    let text = sweep.head(a, &seeds) + &sweep.lines;
    print!("{text}");
    if let Some(p) = &a.report {
        std::fs::write(p, &text).expect("write report");
    }
}

/// Writes a job's host files; returns their paths and whether every one was already there
/// with the same text.
fn write_hosts(a: &HeteroArgs, seed: u64, job: &Job, identical: bool) -> (Vec<PathBuf>, bool) {
    let mut files = vec![];
    // An earlier answer is only reused for the very same files.
    let mut same_files = true;
    for (n, x) in job.hosts.iter().enumerate() {
        // Identical hosts share one path, as `--nodes N` names one file.
        let p = a
            .work
            .join(format!("{seed}-h{}.xml", if identical { 0 } else { n }));
        same_files &= std::fs::read_to_string(&p).ok().as_deref() == Some(x.as_str());
        std::fs::write(&p, x).expect("write xml");
        files.push(p);
    }
    (files, same_files)
}

impl Sweep {
    /// Generates, runs and compares the job of one seed.
    fn job(&mut self, a: &HeteroArgs, seed: u64, identical: bool) {
        let job = generate_job(seed, identical);
        let (files, same_files) = write_hosts(a, seed, &job, identical);
        let mut oargs: Vec<String> = vec![];
        for f in &files {
            oargs.push("--node-xml".into());
            oargs.push(f.display().to_string());
        }
        let ojson = a.work.join(format!("{seed}.oracle.json"));
        let earlier = (a.reuse && same_files)
            .then(|| std::fs::read_to_string(&ojson).ok())
            .flatten()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        let answer = match earlier {
            Some(v) => Ok(v),
            None => run_oracle(&a.oracle, &oargs, &ojson, &job.env),
        };
        let o = match answer {
            Ok(v) => v,
            Err(e) => {
                self.refuse(format!("oracle: {e}"), seed);
                return;
            }
        };
        if let Some(e) = o.get("error").and_then(Value::as_str) {
            self.refuse(format!("oracle (NCCL stops): {e}"), seed);
            return;
        }
        for w in strings(o.get("warnings")) {
            let key = w.split(':').next().unwrap_or(&w).to_string();
            self.warned.entry(key).or_default().push(seed);
        }
        let reference = match self.reference(a, seed, &files, &job.env, &ojson) {
            Ok(n) => n,
            Err(e) => {
                self.refuse(format!("reference: {e}"), seed);
                return;
            }
        };
        self.compared += 1;
        let checks = compare(&Norm::from_oracle(&o), &reference);
        let diffs = self.record_checks(a, seed, &checks);
        if !diffs.is_empty() {
            self.differing += 1;
        }
        let _ = writeln!(
            self.lines,
            "seed {seed} ({} nodes: {}): {}",
            files.len(),
            job.summary,
            if diffs.is_empty() {
                "all fields equal".to_string()
            } else {
                diffs.join(", ")
            }
        );
    }

    fn refuse(&mut self, why: String, seed: u64) {
        self.refused.entry(why).or_default().push(seed);
    }

    /// The reference's answer for a job whose oracle answer is at `ojson`: topo's plan, or the
    /// oracle's `--nodes N` on the first host (with `--self-check`, also whether the two JSON
    /// files are byte for byte equal).
    fn reference(
        &mut self,
        a: &HeteroArgs,
        seed: u64,
        files: &[PathBuf],
        env: &[(String, String)],
        ojson: &Path,
    ) -> Result<Norm, String> {
        match &a.reference {
            Reference::Topo(bin) => run_topo(bin, files, &a.version, env).map(|v| {
                // topo's findings about dissimilar hosts, beside the oracle's warnings.
                for code in host_codes(&v) {
                    self.found.entry(code).or_default().push(seed);
                }
                Norm::from_topo(&v)
            }),
            Reference::SelfCheck | Reference::Homogeneous => {
                let rjson = a.work.join(format!("{seed}.nodes.json"));
                let args = vec![
                    "--nodes".to_string(),
                    files.len().to_string(),
                    files[0].display().to_string(),
                ];
                run_oracle(&a.oracle, &args, &rjson, env).map(|v| {
                    if matches!(a.reference, Reference::SelfCheck) {
                        let same = std::fs::read(ojson).ok() == std::fs::read(&rjson).ok();
                        let e = self.per_field.entry("json bytes".into()).or_default();
                        e.1 += 1;
                        if same {
                            e.0 += 1;
                            self.bytes_equal += 1;
                        } else {
                            e.2.push(seed);
                        }
                    }
                    Norm::from_oracle(&v)
                })
            }
        }
    }

    /// Counts each field of one job (printing them with `--show`); returns the fields that
    /// differ, with their counts.
    fn record_checks(&mut self, a: &HeteroArgs, seed: u64, checks: &[FieldCheck]) -> Vec<String> {
        let mut diffs = vec![];
        for c in checks {
            let e = self.per_field.entry(c.field.clone()).or_default();
            e.1 += 1;
            if c.equal == c.total {
                e.0 += 1;
            } else {
                e.2.push(seed);
                diffs.push(format!("{} ({}/{} equal)", c.field, c.equal, c.total));
            }
            if a.show.is_some() {
                println!(
                    "{} {} {}/{}",
                    if c.equal == c.total { "same" } else { "DIFF" },
                    c.field,
                    c.equal,
                    c.total
                );
                for d in &c.first {
                    println!("    {d}");
                }
            }
        }
        diffs
    }

    /// The report's head: what was compared with what, counts, and fields, refusals,
    /// warnings and findings by seed.
    fn head(&self, a: &HeteroArgs, seeds: &[u64]) -> String {
        let mut head = String::new();
        let what = match &a.reference {
            Reference::Topo(b) => format!("topo ({})", b.display()),
            Reference::SelfCheck => {
                "the oracle's --nodes N on the same file (identical hosts)".into()
            }
            Reference::Homogeneous => "the oracle's --nodes N on the first host".into(),
        };
        let _ = writeln!(
            head,
            "NCCL {}; dissimilar-host jobs against {what}",
            a.version
        );
        let _ = writeln!(
            head,
            "seeds {}..{}: {} compared ({} with a difference), refused {}",
            seeds.first().copied().unwrap_or(a.seed),
            seeds.last().copied().unwrap_or(a.seed) + 1,
            self.compared,
            self.differing,
            self.refused.values().map(Vec::len).sum::<usize>()
        );
        if matches!(a.reference, Reference::SelfCheck) {
            let _ = writeln!(
                head,
                "json byte-identical: {} of {}",
                self.bytes_equal, self.compared
            );
        }
        let _ = writeln!(head, "jobs with the field equal:");
        for (f, (e, n, s)) in &self.per_field {
            let _ = writeln!(head, "  {f}: {e}/{n} {:?}", &s[..s.len().min(10)]);
        }
        for (label, seeds) in [
            ("refused", &self.refused),
            ("oracle warning", &self.warned),
            ("topo finding", &self.found),
        ] {
            for (k, v) in seeds {
                let _ = writeln!(head, "{label}: {k}: {} {:?}", v.len(), &v[..v.len().min(8)]);
            }
        }
        head
    }
}
