//! Line-by-line recognisers. Each is a cheap prefix or substring test first, so a 100 MB log
//! is read in one pass without regular expressions.

use super::dump::SystemCollector;
use super::evidence::{Evidence, Prefix};
use super::log::{
    ChannelCounts, Connection, Direction, GraphLine, InitTiming, NcclLog, P2pDisabled,
    QUOTED_PER_KIND, RankInfo, TreeLink, TuningCell, TuningChoice,
};
use super::paste;
use std::collections::BTreeMap;
use topo_vocab::{Algorithm, Collective, Net, P2p, Protocol, Transport};

/// Reads a whole log as one job. Never fails: unknown lines are skipped, and what is missing
/// is noted.
pub fn parse(text: &str) -> NcclLog {
    parse_jobs_with(text, false).pop().unwrap_or_default()
}

/// Reads a file that may hold several jobs (a rerun appended, two runs pasted one after the
/// other): a new job starts at an `NCCL version` line once the current job has connected
/// (channel counts or transport lines) and the line names another version, or comes from a
/// new process on a host the job has already seen. Every process prints the version line
/// before it connects, so the processes of one job never split it; nodes' logs pasted one
/// after the other stay one job. Line numbers stay the file's.
pub fn parse_jobs(text: &str) -> Vec<NcclLog> {
    parse_jobs_with(text, true)
}

fn parse_jobs_with(text: &str, split: bool) -> Vec<NcclLog> {
    let mut jobs = vec![];
    let mut log = NcclLog::default();
    let mut st = State::default();
    let mut last = "";
    for (i, raw) in paste::lines(text).enumerate() {
        let n = i + 1;
        last = raw;
        let cleaned = paste::clean(raw);
        let (first, glued) = match paste::glued_at(&cleaned) {
            Some(at) => (&cleaned[..at], Some(&cleaned[at..])),
            None => (&cleaned[..], None),
        };
        if split && starts_new_job(&log, &st, first) {
            finish_job(&mut log, &mut st, text, "");
            jobs.push(std::mem::take(&mut log));
        }
        log.total_lines = n;
        one_line(&mut log, &mut st, n, first, false);
        if let Some(g) = glued {
            one_line(&mut log, &mut st, n, g, true);
        }
    }
    finish_job(&mut log, &mut st, text, last);
    jobs.push(log);
    jobs
}

fn finish_job(log: &mut NcclLog, st: &mut State, text: &str, last: &str) {
    let done = std::mem::take(st);
    log.system = done.system.finish(&mut log.missing);
    finish(log, text, last);
}

/// Whether `line` opens another job than the one being read (see [`parse_jobs`]).
fn starts_new_job(log: &NcclLog, st: &State, line: &str) -> bool {
    // Cheap first: almost no line is a version line, and a job that has not connected yet
    // cannot end.
    let connected = log.channels.is_some() || !log.connections.is_empty();
    if !connected || !line.contains("NCCL version ") {
        return false;
    }
    let Some((p, _, msg)) = split_line(line) else {
        return false;
    };
    let Some(v) = msg.trim_start().strip_prefix("NCCL version ") else {
        return false;
    };
    let v = v.split(['+', ' ']).next().unwrap_or(v).trim();
    let other_version = log.version.as_deref().is_some_and(|old| old != v);
    // Logs of the nodes of one job are often pasted one after the other: a process of a new
    // host is the same job; a new process on a host already seen is a rerun.
    let new_pid_on_known_host = st
        .processes
        .get(p.host)
        .is_some_and(|pids| !pids.contains(&p.pid));
    other_version || (p.pid.is_some() && new_pid_on_known_host)
}

fn note_process(st: &mut State, p: &Prefix) {
    match st.processes.get_mut(p.host) {
        Some(pids) => {
            pids.insert(p.pid);
        }
        None => {
            st.processes
                .insert(p.host.to_string(), std::iter::once(p.pid).collect());
        }
    }
}

/// One line (or the tail of two glued lines, whose host word is unreliable).
fn one_line(log: &mut NcclLog, st: &mut State, n: usize, line: &str, glued: bool) {
    let Some((mut prefix, level, msg)) = split_line(line) else {
        // A `=== System` block pasted without NCCL's prefixes (re-indented by hand).
        if st.system.feed(&Prefix::default(), line, n, line) {
            log.nccl_lines += 1;
            return;
        }
        other_line(log, line, n);
        return;
    };
    if glued {
        prefix.host = "";
    }
    log.nccl_lines += 1;
    note_host(log, st, prefix.host);
    if !prefix.host.is_empty() || prefix.pid.is_some() {
        note_process(st, &prefix);
    }
    if level == Level::Warn {
        p2p_disabled(log, msg, n, line, true);
        log.warnings.push(ev(n, line));
        return;
    }
    if st.system.feed(&prefix, msg, n, line) {
        return;
    }
    info(log, st, &prefix, msg, n, line);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Info,
    Warn,
}

#[derive(Default)]
struct State {
    system: SystemCollector,
    /// TUNING block header: algorithm and protocol per column.
    /// A column whose name is none of NCCL's is `None`, and its cells are skipped.
    tuning_algos: Vec<Option<Algorithm>>,
    tuning_protos: Vec<Option<Protocol>>,
    hosts_seen: std::collections::HashSet<String>,
    /// Connection lines kept with their text, per (transport, GDR).
    quoted: std::collections::HashMap<Transport, [usize; 2]>,
    /// The pids of every process that printed a line of this job, per host (looked up by
    /// `&str` on every line, so no allocation once a process is known).
    /// A set: a log of one host's many processes looks each up once per line.
    processes: std::collections::HashMap<String, std::collections::HashSet<Option<u64>>>,
    /// The first `cudaDriverVersion` line is kept for quoting, not every rank's.
    driver_line_kept: bool,
}

/// The most bytes of a line kept as evidence: a launch command is a few KiB, and a log of one
/// 250 MB line once kept (and printed) all of it several times (issue 45).
pub const EVIDENCE_BYTES: usize = 16 << 10;

fn ev(line: usize, text: &str) -> Evidence {
    if text.len() <= EVIDENCE_BYTES {
        return Evidence {
            line,
            text: text.to_string(),
        };
    }
    let mut end = EVIDENCE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Evidence {
        line,
        text: format!("{}... ({} more bytes)", &text[..end], text.len() - end),
    }
}

fn note_host(log: &mut NcclLog, st: &mut State, host: &str) {
    if !host.is_empty() && !st.hosts_seen.contains(host) {
        st.hosts_seen.insert(host.to_string());
        log.hosts.push(host.to_string());
    }
}

/// `[timestamp] host:pid:tid [dev] NCCL INFO msg`, or `... [dev] file.cc:123 NCCL WARN msg`;
/// pasted without the prefix, `NCCL INFO msg` or a bare message NCCL alone writes.
fn split_line(line: &str) -> Option<(Prefix<'_>, Level, &str)> {
    let padded = |p: usize| if p == 0 { 9 } else { 10 };
    let (head, level, msg) = if let Some(p) = marker(line, "NCCL INFO") {
        (&line[..p], Level::Info, &line[p + padded(p)..])
    } else if let Some(p) = marker(line, "NCCL WARN") {
        (&line[..p], Level::Warn, &line[p + padded(p)..])
    } else if is_bare_message(line.trim_start()) {
        return Some((Prefix::default(), Level::Info, line.trim_start()));
    } else {
        return None;
    };
    Some((prefix(head), level, msg.strip_prefix(' ').unwrap_or(msg)))
}

/// Where ` NCCL INFO` is (the space's offset), or 0 when the line starts with the marker.
fn marker(line: &str, what: &str) -> Option<usize> {
    if line.starts_with(what) {
        return Some(0);
    }
    let p = line.find(what)?;
    (p > 0 && line.as_bytes()[p - 1] == b' ').then(|| p - 1)
}

/// Messages pasted without NCCL's prefix that no other program prints: the transport, ring,
/// tree and channel lines, the version and NVLS lines.
fn is_bare_message(t: &str) -> bool {
    const STARTS: [&str; 10] = [
        "NCCL version ",
        "Trees [",
        "NVLS Head",
        "NVLS multicast support is",
        "Check P2P Type",
        "P2P is disabled between",
        "comm 0x",
        "Connected all rings",
        "Connected all trees",
        "cudaDriverVersion ",
    ];
    if STARTS.iter().any(|s| t.starts_with(s)) {
        return true;
    }
    let numbered = |w: &str| {
        t.strip_prefix(w).is_some_and(|r| {
            let r = r.trim_start();
            r.starts_with(|c: char| c.is_ascii_digit()) && r.contains(" : ")
        })
    };
    numbered("Channel ") || numbered("Ring ") || t.contains(" coll channels, ")
}

fn prefix(head: &str) -> Prefix<'_> {
    // An optional `[2024-01-01 10:00:00] ` timestamp comes first.
    let head = match head.strip_prefix('[') {
        Some(rest) if head.contains("] ") && !head.starts_with("[Rank") => {
            rest.split_once("] ").map(|x| x.1).unwrap_or(head)
        }
        _ => head,
    };
    let mut it = head.split_whitespace();
    let who = it.next().unwrap_or("");
    let dev = it
        .next()
        .and_then(|d| d.strip_prefix('['))
        .and_then(|d| d.strip_suffix(']'))
        .and_then(|d| d.parse().ok());
    let mut parts = who.rsplitn(3, ':');
    let (tid, pid, host) = (parts.next(), parts.next(), parts.next());
    match host {
        Some(h) => Prefix {
            host: h,
            pid: pid.and_then(|p| p.parse().ok()),
            tid: tid.and_then(|t| t.parse().ok()),
            dev,
        },
        None => Prefix {
            host: "",
            dev,
            ..Default::default()
        },
    }
}

fn info(log: &mut NcclLog, st: &mut State, p: &Prefix, msg: &str, n: usize, line: &str) {
    let t = msg.trim_start();
    if let Some(v) = t.strip_prefix("NCCL version ") {
        if log.version.is_none() || log.version_from_text {
            let (num, build) = v.split_once('+').unwrap_or((v, ""));
            let num = num.split(' ').next().unwrap_or(num);
            log.version = Some(num.trim().to_string());
            log.version_line = Some(ev(n, line));
            log.version_from_text = false;
            log.cuda_build = cuda_build(build);
        }
    } else if let Some(v) = t.strip_prefix("cudaDriverVersion ") {
        log.cuda_driver_version = v.trim().parse().ok();
        if !st.driver_line_kept {
            st.driver_line_kept = true;
            log.notable.push(ev(n, line));
        }
    } else if t.starts_with("Channel ") || t.starts_with("Ring ") {
        channel_line(log, st, t, n, line);
        if let Some(c) = log.connections.last_mut()
            && c.line == n
        {
            c.pid = p.pid;
        }
    } else if let Some(rest) = t.strip_prefix("Trees") {
        trees(
            log,
            rest,
            line.trim_end().len() >= super::log::NCCL_LINE_MAX,
        );
    } else if t.starts_with("Tree ") {
        // Multi-node tree anchors: evidence enough through `Trees`; nothing to keep.
    } else if let Some(rest) = t.strip_prefix("NVLS Head") {
        // Every rank prints every head: keep one row per head index.
        let (idx, list) = rest.split_once(':').unwrap_or(("", ""));
        if let Ok(idx) = idx.trim().parse::<u32>() {
            let heads = list
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            log.nvls_heads.entry(idx).or_insert(heads);
        }
    } else if t.starts_with("P2P is disabled between") {
        p2p_disabled(log, t, n, line, false);
    } else if t.starts_with("GPU/") && t.contains(" :") && t.contains('(') {
        path_line(log, t, n, line);
    } else if t.starts_with("CollNet ") || t.starts_with("Coll ") {
        log.collnet.push(ev(n, line));
    } else if t.starts_with("NVLS multicast support is") {
        log.nvls_support.push((!t.contains(" not "), ev(n, line)));
    } else if let Some(rest) = t.strip_prefix("Check P2P Type") {
        for (k, v) in pairs(rest) {
            if let Ok(v) = v.parse() {
                log.p2p_type.insert(k.to_string(), v);
            }
        }
        log.p2p_type_line.get_or_insert_with(|| ev(n, line));
    } else if t.contains(" coll channels,") {
        channel_counts(log, t, n, line);
    } else if t.starts_with("Init timings") {
        init_timing(log, t, n, line);
    } else if t.contains(" set by environment to ") {
        let (k, v) = t.split_once(" set by environment to ").unwrap_or((t, ""));
        log.env
            .entry(k.trim().to_string())
            .or_insert_with(|| (v.trim().trim_end_matches('.').to_string(), ev(n, line)));
    } else if t.starts_with("Pattern ") {
        graph_line(log, t, n, line);
    } else if t.contains(" Bytes -> Algo ") {
        tuning_choice(log, t, n);
    } else if t.contains('|') && tuning_line(log, st, t) {
    } else if t.contains("comm 0x") || t.contains(" nRanks ") || t.contains(" nranks ") {
        rank_line(log, p, t, n, line);
    } else if is_notable(t) {
        log.notable.push(ev(n, line));
    }
}

fn is_notable(t: &str) -> bool {
    const KEYS: [&str; 20] = [
        "P2P is disabled between",
        "No device found",
        "Using network",
        "GPU Direct RDMA",
        "DMA-BUF",
        "NET/IB : Using",
        "NET/Socket : Using",
        "MNNVL busId",
        "Could not enable P2P",
        // What the signature catalogue of topo-diagnose reads beside the WARNs.
        "Bootstrap : Using",
        "P2P plugin",
        "Loaded net plugin",
        "Failed to initialize NET plugin",
        "dlvsym failed",
        "Topology detection : could not read",
        "Could not get speed from",
        "NVLS",
        "ncclMaxSharedMem",
        "Using non-device net plugin",
        "NET plugin",
    ];
    KEYS.iter().any(|k| t.contains(k))
}

/// `key value` pairs of a whitespace-separated message (`isAllDirectP2p 1 directMode 0`).
fn pairs(s: &str) -> Vec<(&str, &str)> {
    let toks: Vec<&str> = s.split_whitespace().collect();
    toks.windows(2).map(|w| (w[0], w[1])).collect()
}

fn value<T: std::str::FromStr>(toks: &[&str], key: &str) -> Option<T> {
    toks.windows(2)
        .find(|w| w[0] == key)
        .and_then(|w| w[1].trim_end_matches(',').parse().ok())
}

fn rank_line(log: &mut NcclLog, p: &Prefix, t: &str, n: usize, line: &str) {
    let toks: Vec<&str> = t.split_whitespace().collect();
    let Some(rank) = value::<u32>(&toks, "rank") else {
        return;
    };
    let r = log.ranks.entry(rank).or_insert_with(|| RankInfo {
        rank,
        ..Default::default()
    });
    if !p.host.is_empty() {
        r.host.get_or_insert_with(|| p.host.to_string());
    }
    if r.pid.is_none() {
        r.pid = p.pid;
    }
    let nranks = value(&toks, "nranks").or_else(|| value(&toks, "nRanks"));
    r.nranks = r.nranks.or(nranks);
    if let Some(nn) = value(&toks, "nNodes") {
        r.nnodes = Some(nn);
        r.local_ranks = value(&toks, "localRanks");
        r.local_rank = value(&toks, "localRank");
        r.mnnvl = value(&toks, "MNNVL");
        r.comm_line.get_or_insert_with(|| ev(n, line));
    }
    if let Some(d) = value(&toks, "cudaDev") {
        r.cuda_dev = Some(d);
        r.nvml_dev = value(&toks, "nvmlDev").or(r.nvml_dev);
        let bus = toks
            .windows(2)
            .find(|w| w[0] == "busId")
            .and_then(|w| u64::from_str_radix(w[1].trim_start_matches("0x"), 16).ok());
        r.busid = bus.or(r.busid);
        if t.contains("Init COMPLETE") {
            r.init_complete = true;
        }
        r.init_line.get_or_insert_with(|| ev(n, line));
    }
}

/// `a[x]` → (a, x, bus): x is the CUDA or NVML device (2.4, 2.18+) or, from 2.5 to 2.17,
/// the bus id in hex (`0[1b000]`), kept as device -1 and as the bus id. NCCL 2.3/2.4 NET lines
/// have a bare rank (`0`).
fn rank_dev(s: &str) -> Option<(u32, i32, Option<u64>)> {
    let Some((r, d)) = s.split_once('[') else {
        return Some((s.parse().ok()?, -1, None));
    };
    let d = d.trim_end_matches(']');
    let (dev, bus) = match d.parse::<i32>() {
        Ok(v) if d.len() < 4 => (v, None),
        _ if d.bytes().all(|c| c.is_ascii_hexdigit()) => (-1, u64::from_str_radix(d, 16).ok()),
        _ => return None,
    };
    Some((r.parse().ok()?, dev, bus))
}

/// `P2P is disabled between connected GPUs 4 and 7` (INFO, a PCIe pair) or `... between
/// NVLINK connected GPUs 4 and 7` (WARN, init fails): NCCL 2.12+, graph/paths.cc.
fn p2p_disabled(log: &mut NcclLog, t: &str, n: usize, line: &str, warn: bool) {
    let Some(rest) = t.split_once("P2P is disabled between ").map(|x| x.1) else {
        return;
    };
    let nvlink = rest.starts_with("NVLINK");
    let nums: Vec<i32> = rest
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|x| x.parse().ok())
        .take(2)
        .collect();
    let (a, b) = match nums[..] {
        [a, b] => (a, b),
        _ => (-1, -1),
    };
    log.p2p_disabled.push(P2pDisabled {
        nvlink: nvlink || warn,
        gpus: (a, b),
        evidence: ev(n, line),
    });
}

/// A row of the GRAPH path table: `GPU/1B000 : GPU/1B000 (0/5000.0/LOC) GPU/3D000 (2/24.0/NVL)`.
fn path_line(log: &mut NcclLog, t: &str, n: usize, line: &str) {
    // 2.19+ print `GPU/1B000 :GPU/...` (no space after the colon).
    let (from, rest) = t.split_once(" :").unwrap_or(("", ""));
    let from = from.trim();
    for cell in rest.split(')') {
        let Some((to, spec)) = cell.trim().split_once(" (") else {
            continue;
        };
        if !to.starts_with("GPU/") || to == from {
            continue;
        }
        // The third field is the path type as NCCL prints it (`topoPathTypeStr`, topo.cc);
        // anything else is not one.
        if let Ok(kind) = spec.rsplit('/').next().unwrap_or("").trim().parse() {
            log.gpu_paths.entry(kind).or_insert_with(|| ev(n, line));
        }
    }
}

fn channel_line(log: &mut NcclLog, st: &mut State, t: &str, n: usize, line: &str) {
    let Some((head, body)) = t.split_once(" : ") else {
        return;
    };
    let mut nums = head.split_whitespace().nth(1).unwrap_or("").split('/');
    let Some(channel) = nums.next().and_then(|c| c.parse::<u32>().ok()) else {
        return;
    };
    let second: Option<u32> = nums.next().and_then(|c| c.parse().ok());
    if body.contains(" via ") {
        connection(log, st, (channel, second), body, (n, line));
    } else if t.starts_with("Ring ") && body.contains("->") {
        let r: Vec<u32> = body
            .split("->")
            .filter_map(|x| x.trim().parse().ok())
            .collect();
        if let [prev, me, next] = r[..] {
            log.ring_links.insert((channel, me), (prev, next));
        }
    } else if t.starts_with("Channel ") || t.starts_with("Ring ") {
        // Rank 0's ring order (`Ring 00 : 0 1 2 3` before 2.4); the line is cut at 128 characters with `...` in 2.23+.
        let order: Vec<u32> = body
            .split_whitespace()
            .map_while(|x| x.parse().ok())
            .collect();
        if !order.is_empty() {
            log.rings.entry(channel).or_insert(order);
            if second.is_some() {
                log.ring_channels = second;
            }
        }
    }
}

fn connection(
    log: &mut NcclLog,
    st: &mut State,
    (channel, conn_index): (u32, Option<u32>),
    body: &str,
    (n, line): (usize, &str),
) {
    let (pair, via) = body.split_once(" via ").unwrap_or((body, ""));
    let mut toks = pair.split_whitespace();
    let from = toks.next().and_then(rank_dev);
    let _arrow = toks.next();
    let to = toks.next().and_then(rank_dev);
    let dir = match toks.next() {
        Some("[send]") => Direction::Send,
        Some("[receive]") => Direction::Receive,
        _ => Direction::Both,
    };
    let (Some((from, from_dev, from_busid)), Some((to, to_dev, to_busid))) = (from, to) else {
        return;
    };
    let detail = via.trim();
    let (transport, net_dev) = transport_name(detail);
    let gdr = detail.contains("GDRDMA");
    let kept = {
        let k = st.quoted.entry(transport.clone()).or_insert([0, 0]);
        k[usize::from(gdr)] += 1;
        k[usize::from(gdr)]
    };
    let text = if kept <= QUOTED_PER_KIND {
        line.to_string()
    } else {
        String::new()
    };
    log.connections.push(Connection {
        channel,
        conn_index,
        from,
        from_dev,
        to,
        to_dev,
        from_busid,
        to_busid,
        direction: dir,
        gdr,
        transport,
        net_dev,
        line: n,
        pid: None,
        text,
    });
}

/// The contract's transport name for what follows `via`, and the NET device index.
pub fn transport_name(via: &str) -> (Transport, Option<i32>) {
    let v = via.trim();
    if v.starts_with("direct shared memory") || v.starts_with("SHM") {
        return (Transport::Shm, None);
    }
    if let Some(rest) = v.strip_prefix("P2P/") {
        let kind = rest.split(['/', ' ']).next().unwrap_or(rest);
        let p2p = match kind {
            "CUMEM" => P2p::Cumem,
            "IPC" => P2p::Ipc,
            "direct" => P2p::Direct,
            "indirect" => P2p::Indirect,
            "MNNVL" => P2p::Mnnvl,
            _ => P2p::Unnamed,
        };
        return (Transport::P2p(p2p), None);
    }
    if let Some(rest) = v.strip_prefix("NET/") {
        // `NET/<plugin name, may hold spaces>/<dev>[(proxy)][/GDRDMA][/Shared]`: the device
        // is the first all-digit component after the name.
        let parts: Vec<&str> = rest.split('/').collect();
        let at = parts
            .iter()
            .position(|p| {
                let d = p.split('(').next().unwrap_or("");
                !d.is_empty() && d.chars().all(|c| c.is_ascii_digit())
            })
            .unwrap_or(parts.len().min(1));
        let name = parts[..at.max(1).min(parts.len())].join("/");
        let dev = parts
            .get(at)
            .and_then(|d| d.split('(').next())
            .and_then(|d| d.parse().ok());
        return (Transport::Net(Net::from_name(&name)), dev);
    }
    if v.starts_with("CollNet") || v.starts_with("COLLNET") {
        return (Transport::CollNet, None);
    }
    (Transport::parse(v.split('/').next().unwrap_or(v)), None)
}

fn trees(log: &mut NcclLog, rest: &str, cut: bool) {
    // ` [0] 1/-1/-1->0->-1 [1] ...`; a cut line's last entry is partial and skipped below.
    let mut rank = None;
    for chunk in rest.split('[').skip(1) {
        let Some((c, spec)) = chunk.split_once(']') else {
            continue;
        };
        let Ok(channel) = c.trim().parse::<u32>() else {
            continue;
        };
        // 2.8+: `d0/d1/d2->me->up`; 2.5-2.7 add `|up->me->d0/d1/d2` (the second tree);
        // 2.4: `up->me->d0/d1/d2`.
        let first = spec.trim().split('|').next().unwrap_or("");
        let parts: Vec<&str> = first.split("->").collect();
        let [a, me, b] = parts[..] else {
            continue;
        };
        let (downs, up) = if b.contains('/') && !a.contains('/') {
            (b, a)
        } else {
            (a, b)
        };
        let d: Vec<i32> = downs.split('/').filter_map(|x| x.parse().ok()).collect();
        let (Ok(me), Ok(up)) = (me.trim().parse::<i32>(), up.trim().parse::<i32>()) else {
            continue;
        };
        let down = [
            *d.first().unwrap_or(&-1),
            *d.get(1).unwrap_or(&-1),
            *d.get(2).unwrap_or(&-1),
        ];
        rank = Some(me.max(0) as u32);
        log.trees
            .entry(me.max(0) as u32)
            .or_default()
            .push(TreeLink {
                channel,
                down,
                rank: me,
                up,
            });
    }
    if let (true, Some(r)) = (cut, rank) {
        log.trees_cut.insert(r);
    }
}

fn channel_counts(log: &mut NcclLog, t: &str, n: usize, line: &str) {
    // Numbers in order, each followed by its label.
    let mut coll = None;
    let mut collnet = None;
    let mut nvls = None;
    let mut p2p = None;
    let mut per_peer = None;
    for part in t.split(',') {
        let part = part.trim();
        let Some((num, label)) = part.split_once(' ') else {
            continue;
        };
        let Ok(v) = num.parse::<u32>() else {
            continue;
        };
        match label.trim() {
            "coll channels" => coll = Some(v),
            "collnet channels" => collnet = Some(v),
            "nvls channels" => nvls = Some(v),
            "p2p channels" => p2p = Some(v),
            "p2p channels per peer" => per_peer = Some(v),
            _ => {}
        }
    }
    if log.channels.is_none()
        && let (Some(coll), Some(p2p), Some(pp)) = (coll, p2p, per_peer)
    {
        log.channels = Some(ChannelCounts {
            coll,
            collnet,
            nvls,
            p2p,
            p2p_per_peer: pp,
            evidence: ev(n, line),
        });
    }
}

fn init_timing(log: &mut NcclLog, t: &str, n: usize, line: &str) {
    let toks: Vec<&str> = t.split_whitespace().collect();
    let total = value::<f64>(&toks, "total").unwrap_or(0.0);
    let mut parts = BTreeMap::new();
    if let Some((_, inner)) = t.split_once('(') {
        for kv in inner.trim_end_matches(')').split(',') {
            if let Some((k, v)) = kv.trim().split_once(' ')
                && let Ok(v) = v.trim().trim_end_matches(')').parse()
            {
                parts.insert(k.to_string(), v);
            }
        }
    }
    log.init_timings.push(InitTiming {
        rank: value(&toks, "rank"),
        total_s: total,
        parts,
        evidence: ev(n, line),
    });
}

fn graph_line(log: &mut NcclLog, t: &str, n: usize, line: &str) {
    let toks: Vec<&str> = t.split([' ', ',']).filter(|s| !s.is_empty()).collect();
    let bw = toks
        .windows(2)
        .find(|w| w[0] == "bw")
        .map(|w| w[1])
        .unwrap_or("0/0");
    let ty = toks
        .windows(2)
        .find(|w| w[0] == "type")
        .map(|w| w[1])
        .unwrap_or("/");
    let (bi, be) = bw.split_once('/').unwrap_or((bw, "0"));
    let (ti, te) = ty.split_once('/').unwrap_or((ty, ""));
    log.graphs.push(GraphLine {
        pattern: value(&toks, "Pattern").unwrap_or(0),
        nchannels: value(&toks, "nChannels").unwrap_or(0),
        bw_intra: bi.parse().unwrap_or(0.0),
        bw_inter: be.parse().unwrap_or(0.0),
        type_intra: ti.parse().ok(),
        type_inter: te.parse().ok(),
        evidence: ev(n, line),
    });
}

fn tuning_choice(log: &mut NcclLog, t: &str, n: usize) {
    let (func, rest) = t.split_once(':').unwrap_or(("", t));
    let toks: Vec<&str> = rest.split_whitespace().collect();
    let bytes = toks.first().and_then(|b| b.parse().ok()).unwrap_or(0);
    let word = |key: &str| toks.windows(2).find(|w| w[0] == key).map(|w| w[1]);
    // 2.24+ print names (`RING`, and `NVLS` or `Simple` as NCCL's tables spell them); 2.21 to
    // 2.23 print NCCL's indices (enqueue.cc), whose order `ALL` keeps.
    let algorithm = word("Algo").and_then(|a| {
        a.parse::<usize>().ok().map_or_else(
            || Algorithm::parse(a).or_else(|| tuning_algorithm(a)),
            |i| Algorithm::ALL.get(i).copied(),
        )
    });
    let protocol = word("proto").and_then(|p| {
        p.parse::<usize>()
            .ok()
            .map_or_else(|| Protocol::from_name(p), |i| Protocol::ALL.get(i).copied())
    });
    let (Some(algorithm), Some(protocol)) = (algorithm, protocol) else {
        return;
    };
    log.tuning_choices.push(TuningChoice {
        function: Collective::parse(func.trim()),
        bytes,
        algorithm,
        protocol,
        line: n,
    });
}

/// An algorithm as the TUNING table names its columns: NCCL's printed names, and 2.7 to
/// 2.11's `CollNet`, which 2.12 split into CollNetDirect (its old self) and CollNetChain
/// (src/graph/tuning.cc).
fn tuning_algorithm(name: &str) -> Option<Algorithm> {
    if name.eq_ignore_ascii_case("CollNet") {
        return Some(Algorithm::CollnetDirect);
    }
    Algorithm::from_name(name)
}

/// TUNING table lines: the 2.2x block layout (`Algorithm |`, `Protocol |`, rows) and the old
/// single-header layout (`Latency/AlgBw | Tree/ LL | ...`). Returns whether the line was one.
fn tuning_line(log: &mut NcclLog, st: &mut State, t: &str) -> bool {
    let cols: Vec<&str> = t.split('|').map(str::trim).collect();
    let head = cols.first().copied().unwrap_or("");
    let cells = &cols[1..];
    match head {
        "Algorithm" => {
            st.tuning_algos = cells
                .iter()
                .filter(|c| !c.is_empty())
                .flat_map(|c| std::iter::repeat_n(tuning_algorithm(c), 3))
                .collect();
            st.tuning_protos.clear();
        }
        "Protocol" => {
            st.tuning_protos = cells
                .iter()
                .filter(|c| !c.is_empty())
                .map(|c| Protocol::from_name(c))
                .collect();
        }
        "Latency/AlgBw" => {
            let (a, p): (Vec<_>, Vec<_>) = cells
                .iter()
                .filter_map(|c| c.split_once('/'))
                .map(|(a, p)| (tuning_algorithm(a.trim()), Protocol::from_name(p)))
                .unzip();
            st.tuning_algos = a;
            st.tuning_protos = p;
        }
        "Max NThreads" => {}
        _ => {
            if st.tuning_algos.is_empty() || !cells.iter().any(|c| c.contains('/')) {
                return false;
            }
            // A row of a function NCCL's table does not have is no row of the table.
            let Some(function) = Collective::parse(head) else {
                return true;
            };
            for (i, c) in cells.iter().enumerate() {
                let (Some(Some(algorithm)), Some(Some(protocol))) =
                    (st.tuning_algos.get(i), st.tuning_protos.get(i))
                else {
                    continue;
                };
                let Some((l, b)) = c.split_once('/') else {
                    continue;
                };
                let (Ok(l), Ok(b)) = (l.trim().parse(), b.trim().parse()) else {
                    continue;
                };
                log.tuning.push(TuningCell {
                    function,
                    algorithm: *algorithm,
                    protocol: *protocol,
                    lat_us: l,
                    bw_gbps: b,
                });
            }
        }
    }
    true
}

/// Says what the excerpt lacks, so conclusions can be hedged.
fn finish(log: &mut NcclLog, text: &str, last: &str) {
    let m = &mut log.missing;
    if log.nccl_lines == 0 {
        m.push("no NCCL INFO or WARN line: not an NCCL_DEBUG=INFO log".into());
        return;
    }
    if log.version.is_none() {
        m.push("no `NCCL version` line (the excerpt starts after init): version unknown".into());
    }
    if log.ranks.values().all(|r| r.nnodes.is_none()) {
        m.push(
            "no `comm ... nNodes ... localRanks` line: node and local rank counts unknown".into(),
        );
    }
    if log.channels.is_none() {
        m.push("no channel counts line (`N coll channels, ...`)".into());
    }
    if !log.ranks.is_empty() && !log.ranks.values().any(|r| r.init_complete) {
        m.push("no `Init COMPLETE` line: init may not have finished".into());
    }
    if !text.ends_with('\n') && !last.is_empty() && split_line(&paste::clean(last)).is_none() {
        m.push(format!(
            "last line cut short: `{}`",
            last.chars().take(60).collect::<String>()
        ));
    }
}

/// `cuda12.4` after the `+` of a version line, as CUDA's integer (12040).
fn cuda_build(s: &str) -> Option<u32> {
    let v = s.trim().strip_prefix("cuda")?;
    let (major, minor) = v.split_once('.').unwrap_or((v, "0"));
    let minor = minor.split(|c: char| !c.is_ascii_digit()).next()?;
    Some(major.parse::<u32>().ok()? * 1000 + minor.parse::<u32>().ok()? * 10)
}

/// A version named outside NCCL's own line: PyTorch's `NCCL error in: ..., NCCL version
/// 2.26.2` and vLLM's `vLLM is using nccl==2.20.5`; NCCL's own line wins when it comes.
fn text_version(log: &mut NcclLog, line: &str, n: usize) {
    if log.version.is_some() {
        return;
    }
    let at = line
        .find("NCCL version ")
        .map(|i| i + "NCCL version ".len())
        .or_else(|| line.find("nccl==").map(|i| i + "nccl==".len()));
    let Some(at) = at else { return };
    let v: String = line[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    if v.split('.').count() >= 2 && !v.ends_with('.') {
        log.version = Some(v);
        log.version_line = Some(ev(n, line));
        log.version_from_text = true;
    }
}

/// Lines NCCL did not write: launch commands and nccl-tests headers pasted with the log.
fn other_line(log: &mut NcclLog, line: &str, n: usize) {
    if line.contains("NCCL version ") || line.contains("nccl==") {
        text_version(log, line, n);
    }
    let t = line.trim_start_matches(['#', ' ']);
    if let Some(rest) = t.strip_prefix("Rank ") {
        // `Rank  0 Group  0 Pid  39964 on     ubuntu device  0 [0x00] Tesla V100-SXM2-32GB`
        let rank = rest.split_whitespace().next().and_then(|r| r.parse().ok());
        let name = rest.split_once("] ").map(|x| x.1.trim().to_string());
        if let (Some(rank), Some(name)) = (rank, name) {
            log.devices.push((rank, name, ev(n, line)));
        }
        return;
    }
    if !line.contains("NCCL_") {
        return;
    }
    let toks: Vec<&str> = line.split_whitespace().collect();
    for (i, tok) in toks.iter().enumerate() {
        let after_x =
            i > 0 && (toks[i - 1] == "-x" || toks[i - 1] == "--env" || toks[i - 1] == "export");
        let tok = tok.trim_matches(['"', '\'', ';']);
        // A sentence's punctuation after a value (`NCCL_ALGO=Ring,`) is not part of it.
        let (name, val) = match tok.split_once('=') {
            Some((k, v)) => (
                k,
                Some(v.trim_end_matches(['.', ',', ':', ')']).to_string()),
            ),
            None if after_x => (tok, None),
            None => continue,
        };
        if name.starts_with("NCCL_")
            && name.len() > 5
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            log.launch_env
                .entry(name.to_string())
                .or_insert_with(|| (val, ev(n, line)));
        }
    }
}
