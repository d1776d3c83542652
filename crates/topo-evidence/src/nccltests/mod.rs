//! nccl-tests results as users have them: the text every `*_perf` binary prints (nccl-tests
//! 2.0 to 2.19, with or without the `root` column, several tests in one file, pasted with
//! launcher prefixes, CRLF or colours) and the JSON file of `-J` (2.19).
//!
//! Layouts mirrored (nccl-tests src/common.cu and src/util.cu, 2.19.6): the run header
//! `# nThread T nGpus G minBytes B maxBytes B step: F(factor) warmup iters: W iters: N ...`,
//! `# Collective test starting: all_reduce_perf` (2.17+), one `#  Rank R Group G Pid P on HOST
//! device D [BUS] NAME` line per rank (`Group` from 2.7, `[0000:18:00]` bus ids from 2.17,
//! `[0x18]` before), the two column-header rows, one row per size with the out-of-place and
//! in-place `time algbw busbw #wrong` groups, and the footer (`# Out of bounds values`,
//! `# Avg bus bandwidth`). NCCL INFO lines mixed in are left to the log reader.

use crate::nccllog::paste;
use serde::Serialize;
use topo_vocab::{DataType, Reduction};

pub mod launch;
pub use launch::Launch;

/// The most result rows and tests one input may hold: nccl-tests prints at most 64 sizes per
/// factor-2 sweep, so this leaves room for step sweeps while bounding the work a file causes.
pub const MAX_ROWS: usize = 4096;
pub const MAX_TESTS: usize = 256;
/// The most settings kept from a text's lines (each `-x NCCL_X=...` of its commands and prose).
pub const MAX_SETTINGS: usize = 1024;
/// The most rank lines kept per test (a 131,072-GPU job prints one per rank).
pub const MAX_RANK_LINES: usize = 1 << 17;
/// The largest `size` a row may state: 16 TiB, far above any GPU's memory (nccl-tests'
/// buffers live in it), so a larger one is a corrupted or forged row.
pub const MAX_BYTES: u64 = 1 << 44;
/// The longest time a row may state, in microseconds (a day): one iteration of one size.
pub const MAX_TIME_US: f64 = 86_400e6;

const DTYPES: [&str; 11] = [
    "float", "half", "bfloat16", "double", "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "f8e4m3",
];

/// One `time algbw busbw #wrong` group.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// `None` where nccl-tests printed `N/A` (no data check, `-c 0`), and where the column is
    /// the largest error rather than a count ([`Sample::max_error`]).
    pub wrong: Option<u64>,
    /// The `error` column of nccl-tests before 2.13 (src/common.cu up to 2.12: the largest
    /// difference from the expected values, printed `%5.0le`, so `5e-07`): a magnitude, which
    /// the judge holds to nccl-tests' own bound for the type and rank count, never a count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_error: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub bytes: u64,
    pub count: u64,
    pub dtype: String,
    pub redop: String,
    /// Bytes per element of `dtype`, parsed where it is read; `None` for a name nccl-tests
    /// does not print.
    pub elem_bytes: Option<u64>,
    /// Whether the row reduces (`sum`, `max`, ...: `Some(true)`; `none`: `Some(false)`);
    /// `None` where the row has no redop column (a transcription that dropped it).
    pub reduces: Option<bool>,
    /// `None` in nccl-tests before the `root` column (2.0-2.1) and in JSON where unparsable.
    pub root: Option<i64>,
    pub out_of_place: Option<Sample>,
    pub in_place: Option<Sample>,
    /// The input line (1-based) the row came from, and its text, for quoting.
    pub line: usize,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankLine {
    pub rank: u32,
    pub host: String,
    pub device: u32,
    pub bus: String,
    pub gpu: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Params {
    pub nthreads: u32,
    pub ngpus: u32,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub iters: Option<u32>,
}

/// One `*_perf` run: its header, ranks and table.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Test {
    /// `all_reduce_perf`, from the `Collective test starting` line or the JSON's argv[0].
    pub program: Option<String>,
    pub params: Option<Params>,
    pub ranks: Vec<RankLine>,
    pub rows: Vec<Row>,
    /// Rows shaped like results whose figures nccl-tests cannot print (nan, inf, a negative
    /// or zero time, a size past [`MAX_BYTES`]): kept apart, with why, so a judge can refuse
    /// them aloud instead of them vanishing.
    pub refused: Vec<Refused>,
    pub avg_busbw_gbps: Option<f64>,
    pub out_of_bounds: Option<u64>,
    /// The rank lines are an excerpt: a `...` line follows them (a README that shows the first
    /// ranks of 128), so they do not count the ranks or hosts.
    pub ranks_excerpt: bool,
    /// The launch command of the run: the last one before the test's first line.
    pub launch: Option<Launch>,
    /// The line (1-based) the test starts on.
    pub first_line: usize,
}

/// A row refused for its figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Refused {
    pub line: usize,
    pub text: String,
    pub why: String,
}

/// What a file held.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Results {
    /// `2.17.1` from `# nccl-tests version 2.17.1 nccl-headers=... nccl-library=...`.
    pub tests_version: Option<String>,
    /// The NCCL the tests ran with (`nccl-library=22703` or the JSON's `nccl_version`).
    pub nccl_version: Option<String>,
    pub tests: Vec<Test>,
    /// `NCCL_*` and `CUDA_VISIBLE_DEVICES` from the JSON's `env` list, or given on the text's
    /// lines (`-x NCCL_ALGO=Ring` in a command, `export`, prose), in order.
    pub env: Vec<(String, String)>,
    /// What was dropped or could not be read, in words.
    pub missing: Vec<String>,
}

impl Results {
    pub fn rows(&self) -> usize {
        self.tests.iter().map(|t| t.rows.len()).sum()
    }
    /// Rows read and rows refused: what the [`MAX_ROWS`] bound counts.
    fn all_rows(&self) -> usize {
        self.tests
            .iter()
            .map(|t| t.rows.len() + t.refused.len())
            .sum()
    }
}

/// nccl-tests' program name to topo's collective name; `None` for tests topo does not model
/// (alltoallv, gather, scatter, hypercube).
pub fn collective_of_program(p: &str) -> Option<&'static str> {
    let base = p.rsplit('/').next().unwrap_or(p);
    let stem = base.strip_suffix("_perf").unwrap_or(base);
    Some(match stem {
        "all_reduce" => "allreduce",
        "all_gather" => "allgather",
        "reduce_scatter" => "reducescatter",
        "broadcast" => "broadcast",
        "reduce" => "reduce",
        "alltoall" => "alltoall",
        "sendrecv" => "sendrecv",
        _ => return None,
    })
}

/// `22703` (NCCL_VERSION_CODE from 2.9 on) to `2.27.3`; older codes are 1000-based.
pub fn version_of_code(code: u64) -> Option<String> {
    if code >= 20900 {
        Some(format!(
            "{}.{}.{}",
            code / 10000,
            (code % 10000) / 100,
            code % 100
        ))
    } else if code >= 2000 {
        Some(format!(
            "{}.{}.{}",
            code / 1000,
            (code % 1000) / 100,
            code % 100
        ))
    } else {
        None
    }
}

/// Reads text or JSON; `Err` says why the input is not nccl-tests output at all.
pub fn parse(text: &str) -> Result<Results, String> {
    let r = if text.trim_start().starts_with('{') {
        parse_json(text)?
    } else {
        parse_text(text)?
    };
    if r.all_rows() == 0 {
        return Err(
            "no nccl-tests result rows (`size count type redop ... busbw` lines) found".into(),
        );
    }
    Ok(r)
}

fn parse_text(text: &str) -> Result<Results, String> {
    let mut r = Results::default();
    let mut cols: Option<Columns> = None;
    let mut ranks = RanksSeen::default();
    let mut launches: Vec<Launch> = vec![];
    let mut lines = paste::lines(text).enumerate();
    while let Some((i, raw)) = lines.next() {
        let cleaned = paste::clean(raw.trim_start());
        let line = cleaned.trim();
        settings(&mut r, line);
        if launch::is_command(line) && launches.len() < launch::MAX_LAUNCHES {
            let cmd = continued(&mut r, line, &mut lines);
            launches.push(launch::read(
                cmd.trim_start_matches(['#', '>', '$', ' ']),
                i + 1,
            ));
        }
        if let Some(body) = line.strip_prefix('#') {
            header_line(&mut r, &mut cols, &mut ranks, body.trim());
        } else if is_ellipsis(line) {
            mark_excerpt(&mut r);
        } else if let Some((first, rest)) = condensed(line) {
            // One row per run (nccl#527: one 1 GiB row per instance count): each row that
            // reads as nccl-tests' own is a run of its own, whose rank count its busbw/algbw
            // says; a row that does not is refused, as a table nccl-tests never printed.
            let Some(Ok(row)) = data_row(rest, cols.as_ref(), i + 1) else {
                return Err(format!(
                    "line {}: a row with `{first}` before its size, a column nccl-tests does not print, whose rest is not an nccl-tests row: a table condensed from several runs is not one nccl-tests run; pass each run's output as nccl-tests printed it",
                    i + 1
                ));
            };
            condensed_run(&mut r, row);
        } else if let Some(row) = data_row(line, cols.as_ref(), i + 1) {
            push_row(&mut r, row);
        }
        if let Some(t) = r.tests.last_mut().filter(|t| t.first_line == 0) {
            t.first_line = i + 1;
        }
    }
    attach_launches(&mut r, launches);
    Ok(r)
}

/// A command continued with `\` on the next lines, joined; their settings are read too.
fn continued<'a>(
    r: &mut Results,
    first: &str,
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
) -> String {
    let mut cmd = first.to_string();
    for _ in 0..launch::MAX_CONTINUED {
        let Some(head) = cmd.strip_suffix('\\') else {
            break;
        };
        cmd = head.to_string();
        let Some((_, raw)) = lines.next() else { break };
        let next = paste::clean(raw.trim_start());
        settings(r, next.trim());
        cmd.push(' ');
        cmd.push_str(next.trim());
    }
    cmd
}

fn settings(r: &mut Results, line: &str) {
    for kv in launch::settings(line) {
        if r.env.len() >= MAX_SETTINGS {
            note(
                r,
                format!("more than {MAX_SETTINGS} settings: the rest are not read"),
            );
            return;
        }
        r.env.push(kv);
    }
}

/// Each test's launch: the last command before its first line (several tests of one script
/// share the command that ran them).
fn attach_launches(r: &mut Results, launches: Vec<Launch>) {
    let mut k = 0;
    for t in &mut r.tests {
        while k < launches.len() && launches[k].line < t.first_line {
            k += 1;
        }
        t.launch = k.checked_sub(1).map(|j| launches[j].clone());
    }
}

/// `...` or `…` alone on a line (a `#` line's body too): something was left out here.
fn is_ellipsis(body: &str) -> bool {
    let b = body.trim();
    !b.is_empty() && b.chars().all(|c| c == '.' || c == '…') && (b.len() >= 3 || b == "…")
}

/// Rank lines followed by `...` before any row: the list is an excerpt.
fn mark_excerpt(r: &mut Results) {
    if let Some(t) = r.tests.last_mut()
        && !t.ranks.is_empty()
        && t.rows.is_empty()
    {
        t.ranks_excerpt = true;
    }
}

/// The first column of a row that has numbers before its size (`1 1073741824 268435456
/// float sum ...`), and the row from its size on: a user's table of several runs, one per row.
fn condensed(line: &str) -> Option<(&str, &str)> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    let i = toks.iter().position(|t| DTYPES.contains(t))?;
    if i <= 2 || !toks[..i].iter().all(|t| t.parse::<u64>().is_ok()) {
        return None;
    }
    // The row from its size on: after the leading figures and the blanks that follow them.
    let mut rest = line.trim_start();
    for _ in 0..i - 2 {
        rest = rest.split_once(char::is_whitespace)?.1.trim_start();
    }
    Some((toks[0], rest))
}

/// A row of a condensed table as a run of its own: a test holding that one row, said so.
fn condensed_run(r: &mut Results, row: Row) {
    note(
        r,
        "a table condensed from several runs (a column before the size): each row read as a run of its own".into(),
    );
    if r.all_rows() >= MAX_ROWS || r.tests.len() >= MAX_TESTS {
        push_row(r, Ok(row));
        return;
    }
    let fresh = r.tests.last().is_some_and(|t| t.rows.is_empty());
    if !fresh {
        r.tests.push(Test::default());
    }
    current(r).rows.push(row);
}

fn current(r: &mut Results) -> &mut Test {
    if r.tests.is_empty() {
        r.tests.push(Test::default());
    }
    r.tests.last_mut().expect("one test pushed above")
}

/// A new test starts at its first header line once the current one has rows.
fn start_test(r: &mut Results) -> bool {
    if r.tests.last().is_some_and(|t| t.rows.is_empty()) {
        return true;
    }
    if r.tests.len() >= MAX_TESTS {
        note(
            r,
            format!("more than {MAX_TESTS} tests: the rest are not read"),
        );
        return false;
    }
    r.tests.push(Test::default());
    true
}

fn note(r: &mut Results, what: String) {
    if !r.missing.contains(&what) {
        r.missing.push(what);
    }
}

fn push_row(r: &mut Results, row: Result<Row, Refused>) {
    if r.all_rows() >= MAX_ROWS {
        note(
            r,
            format!("more than {MAX_ROWS} result rows: the rest are not read"),
        );
        return;
    }
    match row {
        Ok(row) => current(r).rows.push(row),
        Err(x) => current(r).refused.push(x),
    }
}

/// (test, rank) pairs already kept: a hash set, where a scan of the kept lines made 131,072
/// rank lines take 26 s (issue 45).
type RanksSeen = std::collections::HashSet<(usize, u32)>;

fn header_line(r: &mut Results, cols: &mut Option<Columns>, ranks: &mut RanksSeen, body: &str) {
    if let Some(rest) = body.strip_prefix("nccl-tests version ") {
        tests_version_line(r, rest);
    } else if let Some(p) = body.strip_prefix("Collective test starting:") {
        if start_test(r) {
            current(r).program = Some(p.trim().to_string());
        }
    } else if body.starts_with("nThread ") {
        let params = params_line(body);
        let t = current(r);
        let fresh = t.rows.is_empty() && t.params.is_none();
        if fresh || start_test(r) {
            current(r).params = params;
        }
    } else if body.starts_with("Rank ") {
        rank_line(r, ranks, body);
    } else if is_ellipsis(body) {
        mark_excerpt(r);
    } else if let Some(c) = Columns::from_header(body) {
        *cols = Some(c);
    } else if let Some(v) = body.strip_prefix("Avg bus bandwidth") {
        current(r).avg_busbw_gbps = after_colon(v).and_then(|s| s.parse().ok());
    } else if let Some(v) = body.strip_prefix("Out of bounds values") {
        current(r).out_of_bounds = after_colon(v)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok());
    }
}

fn after_colon(s: &str) -> Option<&str> {
    Some(s.split_once(':')?.1.trim())
}

fn tests_version_line(r: &mut Results, rest: &str) {
    let mut words = rest.split_whitespace();
    r.tests_version = words.next().map(str::to_string);
    for w in words {
        if let Some(code) = w.strip_prefix("nccl-library=") {
            r.nccl_version = code.parse().ok().and_then(version_of_code);
        }
    }
}

/// `nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 ...`
fn params_line(body: &str) -> Option<Params> {
    let w: Vec<&str> = body.split_whitespace().collect();
    let after = |key: &str| -> Option<u64> {
        let i = w.iter().position(|x| *x == key)?;
        w.get(i + 1)?.parse().ok()
    };
    let iters = w
        .windows(2)
        .zip(w.iter().skip(2))
        .find(|(pair, _)| pair[0] != "warmup" && pair[1] == "iters:")
        .and_then(|(_, v)| v.parse().ok());
    Some(Params {
        nthreads: after("nThread")? as u32,
        ngpus: after("nGpus")? as u32,
        min_bytes: after("minBytes")?,
        max_bytes: after("maxBytes")?,
        iters,
    })
}

/// `Rank  0 Group  0 Pid 291005 on node005 device  0 [0x18] NVIDIA H100 80GB HBM3`; `Group`
/// is absent before nccl-tests 2.7.
fn rank_line(r: &mut Results, seen: &mut RanksSeen, body: &str) {
    let Some(line) = parse_rank(body) else {
        return;
    };
    current(r);
    let test = r.tests.len() - 1;
    let t = current(r);
    if t.ranks.len() < MAX_RANK_LINES && seen.insert((test, line.rank)) {
        t.ranks.push(line);
    }
}

fn parse_rank(body: &str) -> Option<RankLine> {
    let (head, tail) = body.split_once('[')?;
    let (bus, gpu) = tail.split_once(']')?;
    let w: Vec<&str> = head.split_whitespace().collect();
    let after = |key: &str| -> Option<&str> {
        let i = w.iter().position(|x| *x == key)?;
        w.get(i + 1).copied()
    };
    Some(RankLine {
        rank: after("Rank")?.parse().ok()?,
        host: after("on")?.to_string(),
        device: after("device")?.parse().ok()?,
        bus: bus.trim().to_string(),
        gpu: gpu.trim().to_string(),
    })
}

/// Where the numbers of a data row are, from the column-header row when the paste has it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Columns {
    root: bool,
    /// The last figure of each group is `error` (the largest error, nccl-tests 2.0-2.12), not
    /// `#wrong` (a count, from 2.13: nccl-tests commit 51af557, "Resync with NCCL 2.13").
    error: bool,
}

impl Columns {
    /// `size count type redop root time algbw busbw #wrong time algbw busbw #wrong`.
    fn from_header(body: &str) -> Option<Columns> {
        let w: Vec<&str> = body.split_whitespace().collect();
        (w.first() == Some(&"size") && w.contains(&"busbw")).then(|| Columns {
            root: w.contains(&"root"),
            error: w.contains(&"error") && !w.contains(&"#wrong"),
        })
    }
}

/// A row shaped like nccl-tests' (size, count, a type, a reduction, number groups): `Ok`
/// when its figures are ones nccl-tests prints, `Err` naming the figure when not.
fn data_row(line: &str, cols: Option<&Columns>, lineno: usize) -> Option<Result<Row, Refused>> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    let i = toks.iter().position(|t| DTYPES.contains(t))?;
    if i < 2 {
        return None;
    }
    let bytes: u64 = toks[i - 2].parse().ok()?;
    let count: u64 = toks[i - 1].parse().ok()?;
    // A transcription that dropped the redop column has a figure where the name goes: the
    // groups start there, not one column later (nccl#340's rows read as 6,599 GB/s).
    let printed = toks.get(i + 1)?.parse::<f64>().is_err();
    let (redop, rest) = if printed {
        (toks[i + 1].to_string(), &toks[i + 2..])
    } else {
        (String::new(), &toks[i + 1..])
    };
    // Without a header, a root column makes the groups after redop odd in number.
    let has_root = cols.map_or(rest.len() % 4 == 1, |c| c.root);
    let (root, groups) = if has_root {
        (rest.first()?.parse().ok(), rest.get(1..)?)
    } else {
        (None, rest)
    };
    let refuse = |why: String| Refused {
        line: lineno,
        text: line.to_string(),
        why,
    };
    let first = groups.get(..4)?;
    // Without a header, a figure strictly between 0 and 1 cannot be a count: the error column.
    let error = cols.map_or_else(|| is_magnitude(first[3]), |c| c.error);
    let out_of_place = sample(first, error);
    let in_place = groups
        .get(4..8)
        .map(|g| sample(g, error))
        .unwrap_or(Ok(None));
    // Nothing number-like at all: not a result row (a line of prose that names a type).
    if out_of_place.is_err() && !first.iter().any(|t| t.parse::<f64>().is_ok()) {
        return None;
    }
    let (out_of_place, in_place) = match (out_of_place, in_place) {
        (Ok(o), Ok(p)) => (o, p),
        (Err(why), _) | (_, Err(why)) => return Some(Err(refuse(why))),
    };
    if out_of_place.is_none() && in_place.is_none() {
        return None;
    }
    if bytes > MAX_BYTES {
        return Some(Err(refuse(format!(
            "a size of {bytes} bytes, more than any GPU holds ({MAX_BYTES})"
        ))));
    }
    Some(Ok(Row {
        bytes,
        count,
        dtype: toks[i].to_string(),
        elem_bytes: elem_bytes(toks[i]),
        reduces: printed.then(|| reduces(&redop)).flatten(),
        redop,
        root,
        out_of_place,
        in_place,
        line: lineno,
        text: line.to_string(),
    }))
}

/// Bytes per element of an nccl-tests type name (src/common.cu `test_typenames`, 2.17): the
/// vocabulary's types, and the few nccl-tests prints that topo's runtime does not run.
pub fn elem_bytes(name: &str) -> Option<u64> {
    if let Some(d) = DataType::parse(name) {
        return Some(d.size() as u64);
    }
    match name {
        "int8" | "f8e4m3" | "f8e5m2" => Some(1),
        "uint32" => Some(4),
        "uint64" => Some(8),
        _ => None,
    }
}

/// Whether an nccl-tests redop name reduces (src/common.cu `test_opnames`: `sum`, `prod`,
/// `max`, `min`, `avg`, `mulsum`; `none` for the tests without a reduction).
pub fn reduces(name: &str) -> Option<bool> {
    if name == "none" {
        return Some(false);
    }
    (Reduction::parse(name).is_some() || name == "mulsum" || name == "premulsum").then_some(true)
}

/// One `time algbw busbw #wrong` group as nccl-tests prints it (src/util.cu
/// `writeBenchmarkLineBody`, 2.19.6: `getFloatStr` figures, which turn to `1.2e+07` when
/// wide, and `#wrong` with `%6g`, so a large count reads `1.07374e+09`). `Ok(None)` for a
/// group not measured (`N/A` throughout, as `topo verify` prints an in-place it did not
/// run); `Err` names a figure nccl-tests cannot print. `error`: the last figure is the largest
/// error (before nccl-tests 2.13), not a count.
fn sample(g: &[&str], error: bool) -> Result<Option<Sample>, String> {
    if g.iter().all(|t| *t == "N/A") {
        return Ok(None);
    }
    let num = |what: &str, s: &str| -> Result<f64, String> {
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            Ok(_) => Err(format!("{what} {s} is not a finite non-negative number")),
            Err(_) => Err(format!("{what} '{}' is not a number", cut(s))),
        }
    };
    let time_us = num("time", g[0])?;
    if time_us <= 0.0 || time_us > MAX_TIME_US {
        return Err(format!(
            "time {} us is outside what one iteration can take (above 0, at most a day)",
            g[0]
        ));
    }
    let (wrong, max_error) = if error && g[3] != "N/A" {
        (None, Some(num("error", g[3])?))
    } else {
        (wrong_count(g[3])?, None)
    };
    Ok(Some(Sample {
        time_us,
        algbw_gbps: num("algbw", g[1])?,
        busbw_gbps: num("busbw", g[2])?,
        wrong,
        max_error,
    }))
}

/// A figure in (0, 1): `%g` prints a count as a whole number, so this is an error magnitude.
fn is_magnitude(s: &str) -> bool {
    s.parse::<f64>().is_ok_and(|v| v > 0.0 && v < 1.0)
}

/// The largest error nccl-tests 2.0-2.12 let pass for a type (src/common.cu `DeltaMaxValue`,
/// times `nranks - 1` in `CheckData`): over it, the size counted as wrong.
pub fn max_error_allowed(dtype: &str, nranks: usize) -> f64 {
    let per_rank = match DataType::parse(dtype) {
        Some(DataType::F16 | DataType::Bf16) => 1e-2,
        Some(DataType::F32) => 1e-5,
        Some(DataType::F64) => 1e-12,
        _ => 1e-200,
    };
    per_rank * nranks.saturating_sub(1).max(1) as f64
}

/// `#wrong`: `N/A` when not checked (`-c 0`), else a count, written by `%g` (`1.07374e+09`
/// is over a billion wrong values, rounded up so no count reads as zero).
pub fn wrong_count(s: &str) -> Result<Option<u64>, String> {
    if s == "N/A" {
        return Ok(None);
    }
    if let Ok(n) = s.parse::<u64>() {
        return Ok(Some(n));
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v.ceil() as u64)),
        Ok(_) => Err(format!("#wrong {s} is not a count")),
        Err(_) => Err(format!("#wrong '{}' is not a count", cut(s))),
    }
}

/// A token of a refused row as quoted in its reason: at most 24 characters.
fn cut(s: &str) -> String {
    let mut out: String = s.chars().take(24).collect();
    if out.len() < s.len() {
        out.push_str("...");
    }
    out
}

fn parse_json(text: &str) -> Result<Results, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not nccl-tests JSON: {e}"))?;
    let mut r = Results {
        nccl_version: v["nccl_version"].as_u64().and_then(version_of_code),
        ..Default::default()
    };
    if let Some(env) = v["env"].as_array() {
        r.env = env
            .iter()
            .filter_map(|e| e.as_str()?.split_once('='))
            .filter(|(k, _)| k.starts_with("NCCL_") || *k == "CUDA_VISIBLE_DEVICES")
            .map(|(k, val)| (k.to_string(), val.to_string()))
            .collect();
    }
    let mut t = Test {
        program: v["args"][0].as_str().map(str::to_string),
        params: json_params(&v["config"]),
        ranks: json_ranks(&v["devices"]),
        avg_busbw_gbps: v["average_bus_bandwidth"]["bandwidth"].as_f64(),
        out_of_bounds: v["out_of_bounds"]["count"].as_u64(),
        ..Default::default()
    };
    for (i, row) in v["results"].as_array().into_iter().flatten().enumerate() {
        if t.rows.len() + t.refused.len() >= MAX_ROWS {
            note(
                &mut r,
                format!("more than {MAX_ROWS} result rows: the rest are not read"),
            );
            break;
        }
        match json_row(row, i + 1) {
            Some(Ok(row)) => t.rows.push(row),
            Some(Err(x)) => t.refused.push(x),
            None => {}
        }
    }
    r.tests.push(t);
    Ok(r)
}

fn json_params(c: &serde_json::Value) -> Option<Params> {
    Some(Params {
        nthreads: c["nthreads"].as_u64()? as u32,
        ngpus: c["ngpus"].as_u64()? as u32,
        min_bytes: c["minimum_bytes"].as_u64()?,
        max_bytes: c["maximum_bytes"].as_u64()?,
        iters: c["iterations"].as_u64().map(|n| n as u32),
    })
}

fn json_ranks(d: &serde_json::Value) -> Vec<RankLine> {
    d.as_array()
        .into_iter()
        .flatten()
        .take(MAX_RANK_LINES)
        .filter_map(|x| {
            Some(RankLine {
                rank: x["rank"].as_u64()? as u32,
                host: x["hostname"].as_str()?.to_string(),
                device: x["device"].as_u64()? as u32,
                bus: x["device_hex"].as_str().unwrap_or("").to_string(),
                gpu: x["device_info"].as_str().unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// A figure of a `-J` group: nccl-tests writes a number, or the string `"nan"`.
fn json_figure(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn json_row(x: &serde_json::Value, n: usize) -> Option<Result<Row, Refused>> {
    let side = |s: &serde_json::Value| -> Result<Option<Sample>, String> {
        if s.is_null() || !s.is_object() {
            return Ok(None);
        }
        let time = json_figure(&s["time"]).or_else(|| json_figure(&s["cpu_time"]));
        let figs = [time, json_figure(&s["alg_bw"]), json_figure(&s["bus_bw"])];
        let [Some(t), Some(a), Some(b)] = figs else {
            return Ok(None);
        };
        let wrong = json_figure(&s["nwrong"]).unwrap_or_else(|| "N/A".into());
        sample(&[&t, &a, &b, &wrong], false)
    };
    let text = format!("results[{}]", n - 1);
    let refuse = |why: String| Refused {
        line: n,
        text: text.clone(),
        why,
    };
    let (out_of_place, in_place) = match (side(&x["out_of_place"]), side(&x["in_place"])) {
        (Ok(o), Ok(p)) => (o, p),
        (Err(why), _) | (_, Err(why)) => return Some(Err(refuse(why))),
    };
    if out_of_place.is_none() && in_place.is_none() {
        return None;
    }
    let bytes = x["size"].as_u64().unwrap_or(0);
    if bytes > MAX_BYTES {
        return Some(Err(refuse(format!(
            "a size of {bytes} bytes, more than any GPU holds ({MAX_BYTES})"
        ))));
    }
    Some(Ok(Row {
        bytes,
        count: x["count"].as_u64().unwrap_or(0),
        dtype: x["type"].as_str().unwrap_or("").to_string(),
        elem_bytes: x["type"].as_str().and_then(elem_bytes),
        reduces: x["redop"].as_str().and_then(reduces),
        redop: x["redop"].as_str().unwrap_or("").to_string(),
        root: x["root"].as_str().and_then(|s| s.trim().parse().ok()),
        out_of_place,
        in_place,
        line: n,
        text,
    }))
}

#[cfg(test)]
mod tests;
