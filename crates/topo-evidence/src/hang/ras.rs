//! NCCL RAS reports (`ncclras`, NCCL 2.24+): the text report, the JSON report (2.28.7+) and
//! monitor-mode events (2.29+). The layouts follow `src/ras/client_support.cc` of NVIDIA/nccl
//! (v2.26.2-1 to v2.30.7-1): before 2.26 a mismatch reads "collective operation counts",
//! from 2.26 "<Op> operation counts"; 2.30 widens the table columns but keeps their order.

use super::json::Json;
use super::types::{
    GroupWhat, PeerEvent, Place, ProcessState, Quote, RANKS_MAX, RankGroup, RasComm, RasGroup,
    RasProcess, RasRank, RasReport,
};

/// Where in a text report the reader is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Section {
    #[default]
    None,
    Job,
    Comms,
    Entries,
}

/// A text report being read line by line.
#[derive(Default)]
pub struct RasText {
    pub report: Option<RasReport>,
    section: Section,
    /// The job-level entry being read (`INCOMPLETE`, `DEAD`).
    job_state: Option<ProcessState>,
    /// The last `<n> ranks ...` group of the current communicator takes the `Rank R --` lines.
    in_comm: bool,
}

/// Whether a trimmed line starts a RAS report or one of its sections.
fn starts_report(t: &str) -> bool {
    (t.starts_with("NCCL version ") && t.contains(" compiled with CUDA"))
        || t == "Job summary"
        || t.starts_with("Communicators...")
        || (t.starts_with("Group ") && t.contains("Comms") && t.contains("Status"))
        || comm_header(t).is_some()
        || t == "Errors"
        || t == "Warnings"
        || t == "No communicator data collected!"
}

impl RasText {
    /// Reads one line (paste prefixes already off); returns a report that this line closed.
    pub fn line(&mut self, file: &str, n: usize, t: &str) -> Option<RasReport> {
        let t = t.trim();
        let mut closed = None;
        let new_banner = t.starts_with("NCCL version ") && t.contains(" compiled with CUDA");
        let restart = self.report.as_ref().is_some_and(|r| {
            new_banner
                || (t == "Job summary" && (self.section != Section::None || r.nodes.is_some()))
        });
        if restart {
            closed = self.report.take();
            *self = RasText::default();
        }
        if self.report.is_none() {
            if !starts_report(t) {
                return closed;
            }
            self.report = Some(RasReport {
                at: Some(Quote::new(file, n, t)),
                ..Default::default()
            });
        }
        let before = self.report.as_ref().map_or(0, |r| r.lines);
        self.body(file, n, t);
        if let Some(r) = self.report.as_mut()
            && r.lines == before
            && is_ras_line(t)
        {
            r.lines += 1;
        }
        closed
    }

    pub fn finish(&mut self) -> Option<RasReport> {
        self.report.take()
    }

    fn body(&mut self, file: &str, n: usize, t: &str) {
        let Some(r) = self.report.as_mut() else {
            return;
        };
        let q = || Quote::new(file, n, t);
        if let Some(v) = t.strip_prefix("NCCL version ") {
            r.version = v.split_whitespace().next().map(str::to_string);
        } else if t == "Job summary" {
            self.section = Section::Job;
        } else if t.starts_with("Communicators...") {
            self.section = Section::Comms;
        } else if t == "Errors" || t == "Warnings" {
            self.section = Section::Entries;
            self.job_state = None;
            self.in_comm = false;
        } else if t == "No communicator data collected!" {
            r.no_comm_data = true;
        } else if self.section == Section::Job {
            job_row(r, t);
        } else if let Some(g) = group_row(t, q()) {
            self.section = Section::Comms;
            r.groups.push(g);
        } else if let Some((label, hash, kind)) = comm_header(t) {
            self.section = Section::Entries;
            self.in_comm = true;
            self.job_state = None;
            r.comms.push(RasComm {
                label,
                hash,
                kind,
                at: Some(q()),
                ..Default::default()
            });
        } else if self.section == Section::Entries || self.section == Section::None {
            entry_line(self, t, q());
        }
    }
}

fn is_ras_line(t: &str) -> bool {
    t.starts_with("CUDA runtime version")
        || t.chars().all(|c| c == '=' || c.is_whitespace())
        || t.starts_with('#')
        || t.starts_with("Nodes")
        || t.starts_with("(total)")
}

/// `Job summary` rows: 5 numbers (nodes, processes per node, GPUs per process, processes,
/// GPUs) or, for a job of dissimilar nodes, its totals row of 3 (nodes, processes, GPUs).
fn job_row(r: &mut RasReport, t: &str) {
    let nums: Vec<u32> = t.split_whitespace().map_while(|w| w.parse().ok()).collect();
    if nums.len() != t.split_whitespace().count() {
        return;
    }
    r.lines += 1;
    match nums[..] {
        [nodes, _, _, procs, gpus] => {
            r.nodes = Some(nodes);
            r.processes = Some(procs);
            r.gpus = Some(gpus);
        }
        // Per-shape rows come first and the totals last: the last row of 3 wins.
        [nodes, procs, gpus] => {
            r.nodes = Some(nodes);
            r.processes = Some(procs);
            r.gpus = Some(gpus);
        }
        _ => {}
    }
}

/// `    0         1        32         8       256       256   RUNNING      OK`.
fn group_row(t: &str, at: Quote) -> Option<RasGroup> {
    let w: Vec<&str> = t.split_whitespace().collect();
    if w.len() != 8
        || !w[..6]
            .iter()
            .enumerate()
            .all(|(i, x)| i == 3 || x.parse::<u32>().is_ok())
    {
        return None;
    }
    let num = |i: usize| w[i].parse().unwrap_or(0);
    let upper = |s: &str| s.chars().all(|c| c.is_ascii_uppercase() || c == ',');
    if !upper(w[6]) || !upper(w[7]) {
        return None;
    }
    Some(RasGroup {
        group: num(0),
        comms: num(1),
        nodes_per_comm: num(2),
        ranks_per_node: w[3].to_string(),
        ranks_per_comm: num(4),
        ranks_in_group: num(5),
        status: w[6].to_string(),
        errors: w[7].to_string(),
        at,
    })
}

/// `#0-0 (27a079b828ff1a75) MISMATCH`, with anything a paste added after the kind.
fn comm_header(t: &str) -> Option<(String, String, String)> {
    let rest = t.strip_prefix('#')?;
    let (label, rest) = rest.split_once(' ')?;
    let (a, b) = label.split_once('-')?;
    if a.parse::<u32>().is_err() || b.parse::<u32>().is_err() {
        return None;
    }
    let rest = rest.trim_start().strip_prefix('(')?;
    let (hash, rest) = rest.split_once(')')?;
    if hash.is_empty() || !hash.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let kind = rest.split_whitespace().next()?;
    Some((format!("#{label}"), hash.to_string(), kind.to_string()))
}

/// The leading count of `26 ranks have ...`, `1 job process is ...`.
fn lead_num(t: &str) -> Option<u32> {
    t.split_whitespace().next()?.parse().ok()
}

fn entry_line(st: &mut RasText, t: &str, q: Quote) {
    let Some(r) = st.report.as_mut() else { return };
    match t {
        "DEAD" => {
            st.job_state = Some(ProcessState::Dead);
            st.in_comm = false;
            return;
        }
        "INCOMPLETE" => {
            st.job_state = Some(ProcessState::Unresponsive);
            st.in_comm = false;
            return;
        }
        "TIMEOUT" | "ERROR" | "MISMATCH" => {
            st.job_state = None;
            st.in_comm = false;
            return;
        }
        _ => {}
    }
    if let Some(rest) = t.strip_prefix("Encountered ") {
        r.gather_timeouts = lead_num(rest);
    } else if t.starts_with("Process ") && t.contains(" on node ") {
        if let Some(state) = st.job_state.filter(|_| !st.in_comm) {
            r.processes_listed.push(RasProcess {
                state,
                place: place_of(t),
                at: q,
            });
        }
    } else if let Some(c) = r.comms.last_mut().filter(|_| st.in_comm) {
        comm_line(c, t, q);
    }
}

fn push_group(c: &mut RasComm, what: GroupWhat, n: Option<u32>, q: Quote) {
    c.rank_groups.push(RankGroup {
        what,
        n,
        ranks: vec![],
        at: q,
    });
}

/// A body line of a communicator entry.
fn comm_line(c: &mut RasComm, t: &str, q: Quote) {
    if let Some(rest) = t.strip_prefix("Communicator ranks have different ") {
        let op = rest
            .strip_suffix(" operation counts")
            .map(|s| s.split_whitespace().next().unwrap_or(s).to_string());
        if op.is_some() {
            c.op = op;
        }
    } else if let Some(k) = t
        .split(" ranks have launched up to operation ")
        .nth(1)
        .or_else(|| t.split(" rank has launched up to operation ").nth(1))
    {
        let count = k.trim().parse().unwrap_or(0);
        push_group(c, GroupWhat::Launched { count }, lead_num(t), q);
    } else if t.contains(" ranks have not launched any operations")
        || t.contains(" rank has not launched any operations")
    {
        push_group(c, GroupWhat::NotLaunched, lead_num(t), q);
    } else if let Some(s) = t
        .split(" ranks have status ")
        .nth(1)
        .or_else(|| t.split(" rank has status ").nth(1))
    {
        let status = s.trim().to_string();
        push_group(c, GroupWhat::Status { status }, lead_num(t), q);
    } else if let Some(rest) = t.strip_prefix("Missing communicator data from ") {
        let what = GroupWhat::Missing {
            unresponsive: None,
            dead: None,
        };
        push_group(c, what, lead_num(rest), q);
    } else if let Some(rest) = t.strip_prefix("The missing rank") {
        missing_list(c, rest, q);
    } else if t.contains(" error(s) on ") || t.contains(" errors on ") || t.contains(" error on ") {
        let (kind, rest) = t.split_once(" on ").unwrap_or((t, ""));
        let error = kind.to_string();
        push_group(c, GroupWhat::Error { error }, lead_num(rest), q);
    } else if let Some(rest) = t.strip_prefix("Rank ") {
        rank_line(c, rest, q);
    }
}

/// `The missing rank: 21` or `The missing ranks: 3, 5`: ranks of the last Missing group.
fn missing_list(c: &mut RasComm, rest: &str, q: Quote) {
    let list = rest.split_once(':').map_or("", |x| x.1);
    if !matches!(c.rank_groups.last(), Some(g) if matches!(g.what, GroupWhat::Missing { .. })) {
        let what = GroupWhat::Missing {
            unresponsive: None,
            dead: None,
        };
        push_group(c, what, None, q);
    }
    if let Some(g) = c.rank_groups.last_mut() {
        for r in list.split([',', ' ']).filter_map(|x| x.trim().parse().ok()) {
            if g.ranks.len() < RANKS_MAX {
                g.ranks.push(RasRank {
                    rank: r,
                    place: Place::default(),
                    count: None,
                });
            }
        }
    }
}

/// `Rank R -- GPU ...`, `Rank R has launched up to operation K -- ...` (one-rank group) or
/// `Rank R reported <error> -- ...`.
fn rank_line(c: &mut RasComm, rest: &str, q: Quote) {
    let (head, tail) = rest.split_once(" -- ").unwrap_or((rest, ""));
    let mut words = head.split_whitespace();
    let Some(rank) = words.next().and_then(|w| w.parse::<u32>().ok()) else {
        return;
    };
    let place = place_of(tail);
    let rest_head: Vec<&str> = words.collect();
    let rest_head = rest_head.join(" ");
    let mut count = None;
    if let Some(k) = rest_head.strip_prefix("has launched up to operation ") {
        count = k.trim().parse().ok();
        push_group(
            c,
            GroupWhat::Launched {
                count: count.unwrap_or(0),
            },
            Some(1),
            q.clone(),
        );
    } else if rest_head.starts_with("has not launched") {
        push_group(c, GroupWhat::NotLaunched, Some(1), q.clone());
    } else if let Some(e) = rest_head.strip_prefix("reported ") {
        let joins_last =
            matches!(c.rank_groups.last(), Some(g) if matches!(g.what, GroupWhat::Error { .. }));
        if !joins_last {
            let error = e.trim().to_string();
            push_group(c, GroupWhat::Error { error }, None, q.clone());
        }
    }
    if c.rank_groups.is_empty() {
        let what = GroupWhat::Missing {
            unresponsive: None,
            dead: None,
        };
        push_group(c, what, None, q);
    }
    if let Some(g) = c.rank_groups.last_mut()
        && g.ranks.len() < RANKS_MAX
    {
        g.ranks.push(RasRank { rank, place, count });
    }
}

/// `GPU 5 managed by process 3487984 on node 172.16.64.213`,
/// `Process P on node H managing GPU G`, or a paste's `GPU 0, process 285, node 10.0.0.8`.
pub fn place_of(t: &str) -> Place {
    let mut p = Place::default();
    let after = |key: &str| -> Option<String> {
        let i = t.find(key)? + key.len();
        let w = t[i..].split([' ', ',']).find(|w| !w.is_empty())?;
        Some(w.trim_end_matches([',', ';']).to_string())
    };
    // `GPU 2 (NVML 3)`: both indices when they differ.
    let nvml = t
        .split_once("(NVML ")
        .and_then(|(_, n)| n.split(')').next());
    p.gpu = after("GPU ").map(|g| match nvml {
        Some(n) => format!("{g} (NVML {n})"),
        None => g,
    });
    p.pid = after("process ")
        .or_else(|| after("Process "))
        .and_then(|x| x.parse().ok());
    p.node = after("node ");
    p
}

// ---------------------------------------------------------------- JSON

fn json_place(v: &Json) -> Place {
    let dev = |k: &str| -> Option<String> {
        let x = v.get(k)?;
        x.u64().map(|n| n.to_string()).or_else(|| {
            let a: Vec<String> = x
                .arr()
                .iter()
                .filter_map(Json::u64)
                .map(|n| n.to_string())
                .collect();
            (!a.is_empty()).then(|| a.join(","))
        })
    };
    let cuda = dev("cuda_dev").or_else(|| dev("cuda_devs"));
    let nvml = dev("nvml_dev").or_else(|| dev("nvml_devs"));
    let gpu = match (cuda, nvml) {
        (Some(c), Some(n)) if c != n => Some(format!("{c} (NVML {n})")),
        (c, n) => c.or(n),
    };
    Place {
        node: v.get("host").and_then(Json::str).map(str::to_string),
        gpu,
        pid: v.get("pid").and_then(Json::u64),
    }
}

/// The JSON report (`ncclras -f json`), or `None` when `v` is not one.
pub fn from_json(v: &Json, q: Quote, missing_commas: usize) -> Option<RasReport> {
    let comms = v.get("communicators")?;
    let mut r = RasReport {
        at: Some(q.clone()),
        json: true,
        version: v
            .get("nccl_version")
            .and_then(Json::str)
            .map(str::to_string),
        gather_timeouts: v
            .get("ras")
            .and_then(|x| x.get("timeouts_count"))
            .and_then(Json::u64)
            .map(|n| n as u32),
        lines: 1,
        ..Default::default()
    };
    if missing_commas > 0 {
        r.repaired = Some(format!(
            "{missing_commas} missing comma(s) assumed: NCCL 2.28.7-2.28.9 print none after `nvml_dev` of a missing rank"
        ));
    }
    for (i, c) in comms.arr().iter().enumerate() {
        r.comms.push(json_comm(i, c, &q));
    }
    Some(r)
}

fn json_comm(i: usize, c: &Json, q: &Quote) -> RasComm {
    let mut comm = RasComm {
        label: format!("communicators[{i}]"),
        hash: c
            .get("hash")
            .and_then(Json::str)
            .unwrap_or("")
            .trim_start_matches("0x")
            .to_string(),
        kind: "OK".into(),
        size: c.get("size").and_then(Json::u64).map(|n| n as u32),
        at: Some(q.clone()),
        ..Default::default()
    };
    comm.at = Some(Quote::new(
        &q.file,
        q.line,
        &format!(
            "{}: hash 0x{}, size {}, {} rank(s) answered, {} missing",
            comm.label,
            comm.hash,
            comm.size.map_or("?".into(), |s| s.to_string()),
            c.get("ranks").map_or(0, |r| r.arr().len()),
            c.get("missing_ranks").map_or(0, |r| r.arr().len()),
        ),
    ));
    // Ranks grouped by their total launch count, as the text report groups them.
    let mut by_count: Vec<(u64, Vec<RasRank>)> = vec![];
    let mut errors: Vec<RasRank> = vec![];
    for rk in c
        .get("ranks")
        .map_or(&[][..], Json::arr)
        .iter()
        .take(RANKS_MAX)
    {
        let counts = rk.get("collective_counts").map_or(&[][..], Json::obj);
        let total: u64 = counts
            .iter()
            .filter_map(|(_, n)| n.u64())
            .fold(0, u64::saturating_add);
        let rank = RasRank {
            rank: rk.get("rank").and_then(Json::u64).unwrap_or(0) as u32,
            place: json_place(rk),
            count: Some(total),
        };
        let st = rk.get("status");
        let bad = st
            .and_then(|s| s.get("async_error"))
            .and_then(Json::u64)
            .unwrap_or(0)
            != 0
            || !matches!(
                st.and_then(|s| s.get("init_state")).and_then(Json::u64),
                Some(0 | 7) | None
            );
        if bad {
            errors.push(rank.clone());
        }
        match by_count.iter_mut().find(|(k, _)| *k == total) {
            Some((_, v)) => v.push(rank),
            None => by_count.push((total, vec![rank])),
        }
    }
    if by_count.len() > 1 {
        comm.kind = "MISMATCH".into();
    }
    for (count, ranks) in by_count {
        let what = if count == 0 {
            GroupWhat::NotLaunched
        } else {
            GroupWhat::Launched { count }
        };
        comm.rank_groups.push(RankGroup {
            what,
            n: Some(ranks.len() as u32),
            ranks,
            at: q.clone(),
        });
    }
    if !errors.is_empty() {
        comm.kind = join_kind(&comm.kind, "ERROR");
        comm.rank_groups.push(RankGroup {
            what: GroupWhat::Error {
                error: "init_state or async_error set".into(),
            },
            n: Some(errors.len() as u32),
            ranks: errors,
            at: q.clone(),
        });
    }
    for m in c
        .get("missing_ranks")
        .map_or(&[][..], Json::arr)
        .iter()
        .take(RANKS_MAX)
    {
        // The JSON has no useful line to quote: the entry itself, compact, stands for it.
        let at = Quote::new(
            &q.file,
            q.line,
            &format!("{} missing_ranks: {}", comm.label, m.compact()),
        );
        let st = m.get("status");
        let flag = |k: &str| st.and_then(|s| s.get(k)).and_then(Json::bool);
        comm.kind = join_kind(&comm.kind, "INCOMPLETE");
        comm.rank_groups.push(RankGroup {
            what: GroupWhat::Missing {
                unresponsive: flag("unresponsive"),
                dead: flag("considered_dead"),
            },
            n: Some(1),
            ranks: vec![RasRank {
                rank: m.get("rank").and_then(Json::u64).unwrap_or(0) as u32,
                place: json_place(m),
                count: None,
            }],
            at,
        });
    }
    comm
}

fn join_kind(k: &str, add: &str) -> String {
    if k == "OK" {
        add.to_string()
    } else if k.split(',').any(|x| x == add) {
        k.to_string()
    } else {
        format!("{k},{add}")
    }
}

/// A monitor-mode JSON event (`{"event": "PEER_DEAD", "peer": {...}}`).
pub fn event_from_json(v: &Json, q: Quote) -> Option<PeerEvent> {
    let event = v.get("event")?.str()?.to_string();
    Some(PeerEvent {
        event,
        time: v.get("timestamp").and_then(Json::str).map(str::to_string),
        place: v.get("peer").map(json_place).unwrap_or_default(),
        at: q,
    })
}

/// A monitor-mode text event: `[2025-12-19 13:07:07] PEER_DEAD: Process P on node H ...`.
pub fn event_from_text(t: &str, q: Quote) -> Option<PeerEvent> {
    let rest = t.trim().strip_prefix('[')?;
    let (time, rest) = rest.split_once("] ")?;
    let (event, body) = rest.split_once(": ")?;
    if event.is_empty() || !event.bytes().all(|c| c.is_ascii_uppercase() || c == b'_') {
        return None;
    }
    Some(PeerEvent {
        event: event.to_string(),
        time: Some(time.to_string()),
        place: place_of(body),
        at: q,
    })
}
