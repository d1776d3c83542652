//! What PyTorch's watchdog lines say: per process group, the collective each rank is stuck in
//! (SeqNum, OpType, sizes), how far each rank's host ran ahead (last enqueued) and which ranks
//! never reported. A rank whose last enqueued work is below the stuck one never entered it
//! (the rationale of pytorch/pytorch#118582); ranks that entered and enqueued more are waiting
//! for someone. `[rankG]` is the global rank, `[PG .. Rank r]` the rank within the group: for
//! the default group they are the same numbers, for any other group only `r` is compared.

use super::model::{Acc, Cause, RankKind, Stuck, Suspect, Why, finding, ranges, rank_words};
use std::collections::BTreeMap;
use topo_evidence::hang::{PgRef, Quote, WatchdogEvent, WatchdogWhat};
use topo_vocab::Code;

/// One rank's reports in one process group.
#[derive(Default)]
struct Row<'a> {
    global: Option<u32>,
    group: Option<u32>,
    seq: Option<u64>,
    op: Option<String>,
    numel_in: Option<u64>,
    enq: Option<u64>,
    done: Option<u64>,
    launcher: Option<String>,
    time: Option<u64>,
    stuck_secs: Option<Option<u64>>,
    observed_signal: bool,
    /// `Stack trace of the failed collective:` frames, innermost first.
    stack: Vec<&'a str>,
    quotes: Vec<&'a Quote>,
}

impl Row<'_> {
    /// The first frame outside PyTorch's own files: where the program called the collective.
    fn call_site(&self) -> Option<&str> {
        self.stack
            .iter()
            .find(|f| !f.contains("/torch/") && !f.contains("\\torch\\"))
            .or(self.stack.last())
            .copied()
    }
}

impl Row<'_> {
    /// The rank in the group's numbering (for the default group, the global rank).
    fn rank(&self, default: bool) -> Option<u32> {
        if default {
            self.global.or(self.group)
        } else {
            self.group.or(self.global)
        }
    }
}

struct Pg<'a> {
    name: String,
    default: bool,
    rows: Vec<Row<'a>>,
    first_timeouts: Vec<u32>,
}

fn pg_key(p: &PgRef) -> String {
    p.guid.clone().or(p.id.clone()).unwrap_or_default()
}

fn pg_name(p: &PgRef) -> String {
    let mut s = format!("PG {}", p.id.as_deref().unwrap_or("?"));
    if let Some(g) = &p.guid {
        s.push_str(&format!(" GUID {g}"));
    }
    if let Some(d) = &p.desc {
        s.push_str(&format!(" ({d})"));
    }
    s
}

fn is_default(p: &PgRef) -> bool {
    p.desc.as_deref() == Some("default_pg")
        || (p.id.as_deref() == Some("0") && matches!(p.guid.as_deref(), None | Some("0")))
}

/// Who wrote a line: the global rank, else the group rank within one file.
type Who<'a> = (Option<u32>, Option<u32>, &'a str);

fn who(e: &WatchdogEvent) -> Who<'_> {
    match e.global_rank {
        Some(g) => (Some(g), None, ""),
        None => (None, e.group_rank, e.at.file.as_str()),
    }
}

/// The group of an event with none printed: the same rank's group for the same work, else
/// the rank's only group, else the only group in the evidence. `index` holds each rank's
/// events that name their group.
fn group_of<'a>(
    e: &'a WatchdogEvent,
    index: &BTreeMap<Who<'a>, Vec<(Option<u64>, &'a PgRef)>>,
    only: Option<&'a PgRef>,
) -> Option<&'a PgRef> {
    if let Some(p) = &e.pg {
        return Some(p);
    }
    let seq = seq_of(&e.what);
    let mine = index.get(&who(e)).map_or(&[][..], Vec::as_slice);
    mine.iter()
        .find(|x| seq.is_some() && x.0 == seq)
        .map(|x| x.1)
        .or_else(|| {
            let first = mine.first()?.1;
            mine.iter()
                .all(|x| pg_key(x.1) == pg_key(first))
                .then_some(first)
        })
        .or(only)
}

fn seq_of(w: &WatchdogWhat) -> Option<u64> {
    match w {
        WatchdogWhat::Timeout { seq, .. } => *seq,
        WatchdogWhat::Progress { seq, .. } => Some(*seq),
        _ => None,
    }
}

/// A rank's row in a group: its global rank, else its group rank.
type RowKey = (Option<u32>, Option<u32>);

fn groups(all: &[WatchdogEvent]) -> Vec<Pg<'_>> {
    let mut distinct: BTreeMap<String, &PgRef> = BTreeMap::new();
    for e in all {
        if let Some(p) = &e.pg {
            distinct.entry(pg_key(p)).or_insert(p);
        }
    }
    let only = if distinct.len() == 1 {
        distinct.values().next().copied()
    } else {
        None
    };
    let mut index: BTreeMap<Who, Vec<(Option<u64>, &PgRef)>> = BTreeMap::new();
    for e in all {
        if let Some(p) = &e.pg {
            index.entry(who(e)).or_default().push((seq_of(&e.what), p));
        }
    }
    let mut pgs: Vec<Pg> = vec![];
    // A process group's rows, and each rank's row, found through small maps: linear overall.
    let mut pg_at: BTreeMap<String, usize> = BTreeMap::new();
    let mut row_at: BTreeMap<(usize, RowKey), usize> = BTreeMap::new();
    for e in all {
        let pg = group_of(e, &index, only);
        let key = pg.map(pg_key).unwrap_or_else(|| "?".into());
        let pi = *pg_at.entry(key).or_insert_with(|| {
            pgs.push(Pg {
                name: pg.map_or("process group not printed".into(), pg_name),
                default: pg.is_some_and(is_default),
                rows: vec![],
                first_timeouts: vec![],
            });
            pgs.len() - 1
        });
        let p = &mut pgs[pi];
        let id = if e.global_rank.is_some() {
            (e.global_rank, None)
        } else {
            (None, e.group_rank)
        };
        let ri = *row_at.entry((pi, id)).or_insert_with(|| {
            p.rows.push(Row {
                global: e.global_rank,
                ..Default::default()
            });
            p.rows.len() - 1
        });
        let row = &mut p.rows[ri];
        // The rank a `[PG .. Rank r]` tag names is the group's own; a bare `[Rank r]` only
        // stands in until one is seen.
        row.group = if e.pg.is_some() {
            e.group_rank.or(row.group)
        } else {
            row.group.or(e.group_rank)
        };
        row.launcher = row.launcher.take().or(e.prefix.clone());
        row.time = row.time.or(e.time_s);
        row.quotes.push(&e.at);
        if let WatchdogWhat::StackFrame { frame } = &e.what {
            row.stack.push(frame);
            continue;
        }
        merge(row, &e.what, &mut p.first_timeouts);
    }
    pgs
}

fn merge(row: &mut Row, w: &WatchdogWhat, first: &mut Vec<u32>) {
    match w {
        WatchdogWhat::Timeout {
            seq, op, numel_in, ..
        } => {
            if row.seq.is_none() || row.seq == *seq {
                row.seq = row.seq.or(*seq);
                row.op = row.op.take().or(op.clone());
                row.numel_in = row.numel_in.or(*numel_in);
            }
        }
        WatchdogWhat::Progress {
            seq,
            last_enqueued,
            last_completed,
        } => {
            if row.seq.is_none() || row.seq == Some(*seq) {
                row.seq = Some(*seq);
                row.enq = row.enq.or(*last_enqueued);
                row.done = row.done.or(*last_completed);
            }
        }
        WatchdogWhat::HeartbeatStuck { secs } => row.stuck_secs = Some(*secs),
        WatchdogWhat::DumpSignalObserved => row.observed_signal = true,
        WatchdogWhat::DumpSignalFrom {
            from_rank,
            last_enqueued,
            last_completed,
        } => {
            first.extend(from_rank);
            row.enq = row.enq.or(*last_enqueued);
            row.done = row.done.or(*last_completed);
        }
        WatchdogWhat::NotJoined { .. }
        | WatchdogWhat::NcclError { .. }
        | WatchdogWhat::StackFrame { .. } => {}
    }
}

/// What the watchdog lines say, for the verdict.
pub struct TorchSays {
    pub timeouts: bool,
    pub progress: bool,
}

pub fn judge(all: &[WatchdogEvent], ras_all_ok: Option<u32>, acc: &mut Acc) -> TorchSays {
    let pgs = groups(all);
    let mut says = TorchSays {
        timeouts: false,
        progress: all.iter().any(|e| match &e.what {
            WatchdogWhat::Progress { last_completed, .. } => last_completed.unwrap_or(0) > 0,
            WatchdogWhat::Timeout { seq, .. } => seq.unwrap_or(0) > 1,
            _ => false,
        }),
    };
    let mut stuck_ops: Vec<(String, Option<String>, Option<u64>, bool)> = vec![];
    for pg in &pgs {
        if let Some((op, t, gaps)) = one_group(pg, ras_all_ok, acc) {
            says.timeouts = true;
            stuck_ops.push((pg.name.clone(), op, t, pg.default && !gaps.is_empty()));
        }
        heartbeat(pg, acc);
    }
    not_joined(all, acc);
    concurrent(&stuck_ops, acc);
    if !says.timeouts {
        signal_only(&pgs, acc);
    }
    says
}

fn suspect(
    pg: &Pg,
    ranks: Vec<u32>,
    why: Why,
    detail: String,
    launcher: Option<String>,
) -> Suspect {
    Suspect {
        ranks,
        rank_kind: if pg.default {
            RankKind::Global
        } else {
            RankKind::Group
        },
        group: Some(pg.name.clone()),
        why,
        detail,
        node: None,
        gpu: None,
        pid: None,
        launcher,
    }
}

/// Ops whose every rank passes the same element count (so a difference is a desync); the
/// all-to-all, gather and scatter family may differ by design.
fn sizes_agree(op: &str) -> bool {
    let o = op.trim_start_matches('_');
    [
        "ALLREDUCE",
        "BROADCAST",
        "REDUCE",
        "ALLGATHER",
        "REDUCE_SCATTER",
        "ALLGATHER_BASE",
        "REDUCE_SCATTER_BASE",
    ]
    .contains(&o)
}

/// One process group: returns its stuck op, the time of its timeouts and the ranks that did
/// not report, when some rank timed out in it.
fn one_group(
    pg: &Pg,
    ras_all_ok: Option<u32>,
    acc: &mut Acc,
) -> Option<(Option<String>, Option<u64>, Vec<u32>)> {
    let with_seq: Vec<&Row> = pg.rows.iter().filter(|r| r.seq.is_some()).collect();
    if with_seq.is_empty() {
        return None;
    }
    // The seq most ranks are stuck at (the lowest on a tie).
    let mut by_seq: BTreeMap<u64, usize> = BTreeMap::new();
    for r in &with_seq {
        *by_seq.entry(r.seq.unwrap_or(0)).or_default() += 1;
    }
    let s = by_seq
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|x| *x.0)?;
    let at_s: Vec<&Row> = with_seq
        .iter()
        .copied()
        .filter(|r| r.seq == Some(s))
        .collect();
    let op = at_s.iter().find_map(|r| r.op.clone());
    let op_words = op.clone().unwrap_or_else(|| "a collective".into());
    let rank = |r: &Row| r.rank(pg.default);
    let reporters: Vec<u32> = at_s.iter().filter_map(|r| rank(r)).collect();
    let mut seen: std::collections::BTreeSet<u32> = pg.rows.iter().filter_map(rank).collect();
    seen.extend(pg.first_timeouts.iter().filter(|_| pg.default));
    let all_q: Vec<&Quote> = at_s.iter().flat_map(|r| r.quotes.iter().copied()).collect();
    let mut notes = vec![];
    // Entered or not, and how far ahead the host ran.
    let mut never = vec![];
    for r in pg.rows.iter() {
        let (Some(e), Some(x)) = (r.enq, rank(r)) else {
            continue;
        };
        if e < s {
            never.push((x, e, r));
        }
    }
    let ahead: Vec<(u32, u64)> = at_s
        .iter()
        .filter_map(|r| Some((rank(r)?, r.enq?.checked_sub(s)?)))
        .collect();
    if let Some(max) = ahead.iter().map(|a| a.1).max() {
        notes.push(if max == 0 {
            "none enqueued anything after it".to_string()
        } else {
            let most: Vec<u32> = ahead.iter().filter(|a| a.1 == max).map(|a| a.0).collect();
            format!("{} enqueued {max} more after it", rank_words(&most))
        });
    }
    if !pg.first_timeouts.is_empty() {
        notes.push(format!(
            "first to time out: {}",
            rank_words(&pg.first_timeouts)
        ));
    }
    let desync = desync_at(pg, s, &at_s, &all_q, acc) | call_sites(pg, s, &at_s, acc);
    // Other seqs in the same group: behind or ahead by how many.
    for r in with_seq.iter().filter(|r| r.seq != Some(s)) {
        let Some(x) = rank(r) else { continue };
        let q = r.seq.unwrap_or(0);
        let (why, d) = if q < s {
            (
                Why::Behind,
                format!("timed out at seq {q}, {} behind", s - q),
            )
        } else {
            (Why::Ahead, format!("timed out at seq {q}, {} ahead", q - s))
        };
        acc.suspects
            .push(suspect(pg, vec![x], why, d, r.launcher.clone()));
    }
    let base = format!(
        "{} {op_words} seq {s} timed out on {}",
        pg.name,
        rank_words(&reporters)
    );
    acc.stuck.push(Stuck {
        source: "watchdog".into(),
        group: pg.name.clone(),
        seq: Some(s),
        op: op.clone(),
        ranks: reporters.clone(),
        rank_kind: if pg.default {
            RankKind::Global
        } else {
            RankKind::Group
        },
        summary: if notes.is_empty() {
            base.clone()
        } else {
            format!("{base}; {}", notes.join("; "))
        },
    });
    for r in &at_s {
        if let (Some(l), Some(x)) = (&r.launcher, rank(r)) {
            acc.place(
                "launcher",
                l.clone(),
                format!("rank {x} timed out in {op_words} seq {s}"),
            );
        }
    }
    // Ranks that never enqueued it: they did not join.
    for (x, e, r) in &never {
        let title = format!(
            "rank {x} of {} never enqueued {op_words} seq {s} (its last enqueued work is {e}) while {} wait in it",
            pg.name,
            rank_words(&reporters)
        );
        acc.suspects.push(suspect(
            pg,
            vec![*x],
            Why::NeverJoined,
            format!("last enqueued {e} < {s}"),
            r.launcher.clone(),
        ));
        acc.findings.push(finding(Code::HangRankMissing, title.clone(), &r.quotes, "this rank stopped issuing collectives before the others: take its stack (py-spy dump) to see where it is; the usual causes are a rank-specific code path (checkpoint save, data loading, an exception caught and ignored) or a dead process"));
        acc.claim(Cause::RankMissing, 66, title);
    }
    let time = at_s.iter().find_map(|r| r.time);
    let ctx = Ctx {
        pg,
        s,
        op_words: &op_words,
        base: &base,
        notes: &notes,
        reporters: &reporters,
        all_q: &all_q,
    };
    let gaps = silent_or_stuck(&ctx, &seen, never.is_empty() && !desync, ras_all_ok, acc);
    Some((op, time, gaps))
}

/// What the claims of a stuck group read.
struct Ctx<'x, 'a> {
    pg: &'x Pg<'a>,
    s: u64,
    op_words: &'x str,
    base: &'x str,
    notes: &'x [String],
    reporters: &'x [u32],
    all_q: &'x [&'a Quote],
}

/// The timeout itself, then: RAS says all launched (stuck inside), or ranks below the
/// highest seen did not report, or every rank in the evidence reported it. Returns the gaps.
fn silent_or_stuck(
    c: &Ctx,
    seen: &std::collections::BTreeSet<u32>,
    plain: bool,
    ras_all_ok: Option<u32>,
    acc: &mut Acc,
) -> Vec<u32> {
    let (pg, s, op_words, base, notes, reporters, all_q) =
        (c.pg, c.s, c.op_words, c.base, c.notes, c.reporters, c.all_q);
    // Ranks that did not report it at all (only the ones below the highest seen are known).
    // A rank number past any job's size (a garbled line) names no gaps: the work stays
    // bounded by the ranks a job can have.
    let max = seen
        .iter()
        .next_back()
        .copied()
        .filter(|m| (*m as usize) < topo_evidence::hang::RANKS_MAX);
    let gaps: Vec<u32> = max.map_or(vec![], |m| (0..=m).filter(|x| !seen.contains(x)).collect());
    let timeout_title = format!(
        "{base}{}",
        if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        }
    );
    acc.findings.push(finding(Code::HangCollectiveTimeout, timeout_title, all_q, "the ranks that timed out entered this collective and waited; the cause is a rank that never joined it, or a transfer stuck inside NCCL: add every rank's log, an ncclras report and Flight Recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT=1)"));
    if let Some(n) = ras_all_ok {
        let title = format!(
            "{base}, while NCCL RAS shows every rank of its {n}-rank communicator launched the same operations: all ranks are inside the collective and the transfer does not finish"
        );
        acc.findings.push(finding(Code::HangStuckInTransfer, title.clone(), all_q, "no rank is missing: look at the network and GPUs of the ranks that timed out and their peers (NET/IB errors and port counters, Xid errors in dmesg, NCCL_DEBUG=INFO around the timeout); a missing rank would show as a RAS MISMATCH or INCOMPLETE"));
        acc.claim(Cause::StuckInTransfer, 35, title);
        return vec![];
    }
    if !gaps.is_empty() && plain {
        let kind = if pg.default {
            ""
        } else {
            " (ranks within the group)"
        };
        let title = format!(
            "{} of {}{kind} did not report {op_words} seq {s} while {} timed out in it",
            rank_words(&gaps),
            pg.name,
            rank_words(reporters)
        );
        acc.suspects.push(suspect(
            pg,
            gaps.clone(),
            Why::NotReported,
            format!("no timeout or progress line for seq {s} in the evidence"),
            None,
        ));
        acc.findings.push(finding(Code::HangRankSilent, title.clone(), all_q, "if these ranks are in the job and their logs are complete, they never reached this collective: read their logs or take their stacks (py-spy dump); if their logs were left out, add them"));
        acc.claim(Cause::RankSilent, 40, title);
    } else if plain {
        let title = format!(
            "{base}: every rank in the evidence ({}) reported it, so the rank that did not join, if any, is not in the evidence",
            ranges(reporters)
        );
        acc.claim(Cause::Undetermined, 20, title);
    }
    gaps
}

/// The call sites of the ranks' stacks at the stuck seq: the same collective number reached
/// from different lines of the program is a desync (one rank in a checkpoint's barrier, the
/// others in the training step). Whether they differ; each site is quoted either way.
fn call_sites(pg: &Pg, s: u64, at_s: &[&Row], acc: &mut Acc) -> bool {
    let mut sites: Vec<(&str, Vec<u32>)> = vec![];
    for r in at_s {
        let (Some(site), Some(x)) = (r.call_site(), r.rank(pg.default)) else {
            continue;
        };
        let room = sites.len() < 16;
        match sites.iter_mut().find(|(f, _)| *f == site) {
            Some((_, v)) => v.push(x),
            None if room => sites.push((site, vec![x])),
            None => {}
        }
    }
    if sites.is_empty() {
        return false;
    }
    sites.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    let words: Vec<String> = sites
        .iter()
        .map(|(f, v)| format!("{} at {f}", rank_words(v)))
        .collect();
    if sites.len() == 1 {
        acc.notes
            .push(format!("{} seq {s} was called from {}", pg.name, words[0]));
        return false;
    }
    let title = format!(
        "{} seq {s} was reached from different lines of the program ({})",
        pg.name,
        words.join("; ")
    );
    for (f, v) in sites.iter().skip(1) {
        acc.suspects.push(suspect(
            pg,
            v.clone(),
            Why::Mismatched,
            format!("called from {f}"),
            None,
        ));
    }
    let q: Vec<&Quote> = at_s.iter().flat_map(|r| r.quotes.iter().copied()).collect();
    acc.findings.push(finding(Code::HangDesync, title.clone(), &q, "the ranks are in different collectives that happen to have the same number: make every rank issue the same collectives in the same order (a collective inside a rank-dependent branch, such as checkpoint saving on rank 0, is the usual cause)"));
    acc.claim(Cause::Desync, 80, title);
    true
}

/// Another op or element count at the same seq: a desync. Whether one was found.
fn desync_at(pg: &Pg, s: u64, at_s: &[&Row], all_q: &[&Quote], acc: &mut Acc) -> bool {
    let mut ops: Vec<(&str, Option<u64>, Vec<u32>)> = vec![];
    for r in at_s.iter().filter(|r| r.op.is_some()) {
        let o = r.op.as_deref().unwrap_or("?");
        let n = if sizes_agree(o) { r.numel_in } else { None };
        match ops
            .iter_mut()
            .find(|x| x.0 == o && (x.1 == n || x.1.is_none() || n.is_none()))
        {
            Some(x) => x.2.extend(r.rank(pg.default)),
            None => ops.push((o, n, r.rank(pg.default).into_iter().collect())),
        }
    }
    if ops.len() > 1 {
        ops.sort_by_key(|x| std::cmp::Reverse(x.2.len()));
        let parts: Vec<String> = ops
            .iter()
            .map(|(o, n, r)| {
                format!(
                    "{} in {o}{}",
                    rank_words(r),
                    n.map_or(String::new(), |n| format!(" of {n} elements"))
                )
            })
            .collect();
        let title = format!(
            "{} seq {s}: ranks are in different collectives or sizes ({})",
            pg.name,
            parts.join("; ")
        );
        for (o, _, r) in ops.iter().skip(1) {
            acc.suspects.push(suspect(
                pg,
                r.clone(),
                Why::Mismatched,
                format!("in {o} at seq {s}, the others in {}", ops[0].0),
                None,
            ));
        }
        acc.findings.push(finding(Code::HangDesync, title.clone(), all_q, "the ranks called collectives in another order or with other sizes: compare their code paths at this step (Flight Recorder dumps name the call)"));
        acc.claim(Cause::Desync, 80, title);
    }
    ops.len() > 1
}

/// `watchdog got stuck for N seconds`: the watchdog thread itself is blocked (a CUDA or NCCL
/// call that does not return, or the GIL), so the GPU or driver of that rank is suspect too.
fn heartbeat(pg: &Pg, acc: &mut Acc) {
    let rows: Vec<&Row> = pg.rows.iter().filter(|r| r.stuck_secs.is_some()).collect();
    if rows.is_empty() {
        return;
    }
    let ranks: Vec<u32> = rows.iter().filter_map(|r| r.rank(pg.default)).collect();
    let secs = rows.iter().filter_map(|r| r.stuck_secs.flatten()).max();
    let title = format!(
        "the watchdog of {} in {} got stuck{}: a CUDA or NCCL call there does not return",
        rank_words(&ranks),
        pg.name,
        secs.map_or(String::new(), |s| format!(" for {s} s"))
    );
    let q: Vec<&Quote> = rows.iter().flat_map(|r| r.quotes.iter().copied()).collect();
    acc.suspects.push(suspect(
        pg,
        ranks,
        Why::WatchdogStuck,
        "watchdog thread blocked (CUDA/driver call or GIL)".into(),
        None,
    ));
    acc.findings.push(finding(Code::HangWatchdogStuck, title, &q, "check the GPU and driver of these ranks (Xid errors in dmesg, nvidia-smi responsiveness); a Python thread holding the GIL inside a CUDA call does the same"));
}

/// TORCH_NCCL_DESYNC_DEBUG's `[r] finished collective #K, but didn't join collective #K+1`.
fn not_joined(all: &[WatchdogEvent], acc: &mut Acc) {
    for e in all {
        if let WatchdogWhat::NotJoined { rank, seq } = e.what {
            let title = format!(
                "rank {rank} finished collective #{} but never joined #{seq} (PyTorch desync report)",
                seq.saturating_sub(1)
            );
            acc.suspects.push(Suspect {
                ranks: vec![rank],
                rank_kind: RankKind::Group,
                group: e.pg.as_ref().map(pg_name),
                why: Why::NeverJoined,
                detail: format!("did not join collective #{seq}"),
                node: None,
                gpu: None,
                pid: None,
                launcher: None,
            });
            acc.findings.push(finding(Code::HangRankMissing, title.clone(), &[&e.at], "this rank is elsewhere in its program: take its stack (py-spy dump) and compare its code path with the others'"));
            acc.claim(Cause::RankMissing, 66, title);
        }
    }
}

/// Several process groups timing out together in different operations: two threads using
/// communicators at once, or ranks issuing collectives of two groups in different orders
/// (NVIDIA/nccl#1610). Not claimed when a rank of the default group is silent (then a dead
/// or stuck rank explains every group).
fn concurrent(stuck: &[(String, Option<String>, Option<u64>, bool)], acc: &mut Acc) {
    if stuck.len() < 2 || stuck.iter().any(|x| x.3) {
        return;
    }
    let mut ops: Vec<&str> = stuck.iter().filter_map(|x| x.1.as_deref()).collect();
    ops.sort_unstable();
    ops.dedup();
    let times: Vec<u64> = stuck.iter().filter_map(|x| x.2).collect();
    let together = match (times.iter().min(), times.iter().max()) {
        (Some(a), Some(b)) => b - a <= 120,
        _ => true,
    };
    if ops.len() < 2 || !together {
        return;
    }
    let parts: Vec<String> = stuck
        .iter()
        .map(|(g, o, _, _)| format!("{g} in {}", o.as_deref().unwrap_or("?")))
        .collect();
    let title = format!(
        "{} process groups timed out together in different operations ({})",
        stuck.len(),
        parts.join("; ")
    );
    acc.findings.push(finding(Code::HangConcurrentUse, title.clone(), &[], "NCCL needs one order of collectives per rank across communicators that share GPUs, and one thread at a time per communicator: check for collectives issued from two threads (or streams without ordering) and for groups whose calls are ordered differently on different ranks; the logs alone cannot prove the threading"));
    acc.claim(Cause::ConcurrentUse, 50, title);
}

/// Dump-signal lines without any timeout of their own: the rank that timed out first is
/// outside the evidence.
fn signal_only(pgs: &[Pg], acc: &mut Acc) {
    for pg in pgs {
        let observed: Vec<u32> = pg
            .rows
            .iter()
            .filter(|r| r.observed_signal)
            .filter_map(|r| r.rank(pg.default))
            .collect();
        if observed.is_empty() && pg.first_timeouts.is_empty() {
            continue;
        }
        let first = if pg.first_timeouts.is_empty() {
            "the rank that timed out first is not in the evidence".to_string()
        } else {
            format!("{} timed out first", rank_words(&pg.first_timeouts))
        };
        let q: Vec<&Quote> = pg
            .rows
            .iter()
            .flat_map(|r| r.quotes.iter().copied())
            .collect();
        let title = format!(
            "{} of {} received a Flight Recorder dump signal from another rank's timeout; {first}",
            rank_words(&observed),
            pg.name
        );
        acc.findings.push(finding(Code::HangCollectiveTimeout, title.clone(), &q, "find the line `Received a dump signal due to a collective timeout from rank R` or the `Watchdog caught collective operation timeout` lines of the first rank to time out, and add those logs"));
        acc.claim(Cause::Undetermined, 18, title);
    }
}
