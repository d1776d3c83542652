//! PyTorch ProcessGroupNCCL watchdog lines, under any launcher's prefix. Phrasings by release
//! (`torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp`): the timeout line
//! `Watchdog caught collective operation timeout: WorkNCCL(SeqNum=.., OpType=.., ...)` (NumelIn
//! and NumelOut from 2.2); the progress line `Timeout at NCCL work: S, last enqueued NCCL work:
//! E, last completed NCCL work: C` (2.3), `Exception (either an error or timeout) detected by
//! watchdog at work: S, ...` (2.4-2.5), `failure detected by watchdog at work sequence id: S PG
//! status: last enqueued work: E, last completed work: C` (2.6+); the heartbeat monitor, the
//! Flight Recorder dump signal, and TORCH_NCCL_DESYNC_DEBUG's "didn't join" lines.
//!
//! `[rankG]:` in front is the global rank (torchrun's `--tee`/`--log-dir` prefix); `[Rank r]`
//! and `[PG ... Rank r]` inside the message are ranks within the process group. They are kept
//! apart: the global rank of PG 3's rank 1 may be 13.

use super::types::{PgRef, Quote, WatchdogEvent, WatchdogWhat};

/// What the previous watchdog line said about its rank, for a message a terminal wrapped
/// onto the next line (`... terminated \nwith exception: [Rank 6] Watchdog caught ...`).
#[derive(Default)]
pub struct Torch {
    last: Option<(usize, Ctx)>,
    /// The rank whose `Stack trace of the failed collective:` frames follow, and how many
    /// were taken.
    stack: Option<(Ctx, usize)>,
}

#[derive(Clone, Default)]
struct Ctx {
    global: Option<u32>,
    group: Option<u32>,
    pg: Option<PgRef>,
    prefix: Option<String>,
    time_s: Option<u64>,
}

/// The most frames kept of one stack trace.
const FRAMES_MAX: usize = 12;

/// `#3 train_step from /x/train.py:44` (after any prefix): the frame.
fn frame(line: &str) -> Option<&str> {
    let i = line.find('#')?;
    let f = &line[i..];
    let digits = f[1..].bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0 && f[1 + digits..].starts_with(' ') && f.contains(" from ")).then_some(f.trim_end())
}

/// Whether the line may be a watchdog line (one substring scan each).
pub fn wanted(line: &str) -> bool {
    line.contains("ProcessGroupNCCL")
        || line.contains("WorkNCCL(")
        || line.contains("Watchdog caught")
        || line.contains("didn't join collective")
}

impl Torch {
    /// The events of one line (a line can hold a timeout inside an exception message).
    pub fn line(&mut self, file: &str, n: usize, line: &str, out: &mut Vec<WatchdogEvent>) {
        if let Some((ctx, taken)) = self.stack.as_mut() {
            match frame(line) {
                Some(f) if *taken < FRAMES_MAX => {
                    *taken += 1;
                    out.push(WatchdogEvent {
                        global_rank: ctx.global,
                        group_rank: ctx.group,
                        pg: ctx.pg.clone(),
                        prefix: ctx.prefix.clone(),
                        time_s: ctx.time_s,
                        what: WatchdogWhat::StackFrame {
                            frame: f.to_string(),
                        },
                        at: Quote::new(file, n, line),
                    });
                    return;
                }
                Some(_) => return,
                None => self.stack = None,
            }
        }
        if !wanted(line) {
            return;
        }
        let q = Quote::new(file, n, line);
        let tagged = global_rank(line);
        let mut ctx = match (&tagged, &self.last) {
            (None, Some((prev, c))) if *prev + 1 == n && !line.contains("ProcessGroupNCCL.cpp") => {
                c.clone()
            }
            _ => Ctx::default(),
        };
        let mut msg = line;
        if let Some((g, at, end)) = tagged {
            ctx.global = Some(g);
            ctx.prefix = launcher_prefix(&line[..at]);
            msg = &line[end..];
        }
        if let Some(i) = msg.find("ProcessGroupNCCL.cpp") {
            ctx.time_s = glog_time(&msg[..i]).or(ctx.time_s);
            msg = msg[i..].split_once("] ").map_or("", |x| x.1);
        }
        if let Some((pg, group)) = pg_tag(msg) {
            if pg.is_some() {
                ctx.pg = pg;
            }
            ctx.group = group.or(ctx.group);
        }
        let before = out.len();
        for what in whats(msg) {
            let group = match &what {
                // `[Rank r]` of the timeout line: the group rank of its own tag.
                WatchdogWhat::Timeout { .. } => rank_in(msg, "Watchdog caught").or(ctx.group),
                _ => ctx.group,
            };
            out.push(WatchdogEvent {
                global_rank: ctx.global,
                group_rank: group,
                pg: ctx.pg.clone(),
                prefix: ctx.prefix.clone(),
                time_s: ctx.time_s,
                what,
                at: q.clone(),
            });
        }
        if msg.contains("Stack trace of the failed collective:") {
            self.stack = Some((ctx.clone(), 0));
        }
        if out.len() > before || line.contains("ProcessGroupNCCL") {
            self.last = Some((n, ctx));
        }
    }
}

/// `[rank12]:` (or `[rank12]`): the rank and where the tag starts and ends.
fn global_rank(line: &str) -> Option<(u32, usize, usize)> {
    let mut from = 0;
    while let Some(i) = line[from..].find("[rank") {
        let at = from + i;
        let rest = &line[at + 5..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && digits <= 9 && rest[digits..].starts_with(']') {
            let mut end = at + 5 + digits + 1;
            if line[end..].starts_with(':') {
                end += 1;
            }
            return rest[..digits].parse().ok().map(|g| (g, at, end));
        }
        from = at + 5;
    }
    None
}

/// What a launcher wrote before the rank tag, when it names something (a host or worker):
/// not a bare line number or timestamp, and without a stripped colour code's remains.
fn launcher_prefix(head: &str) -> Option<String> {
    let mut t = head.trim().trim_start_matches('\u{1b}');
    // `[36m`: a colour code, whole or where a paste lost its ESC.
    while let Some(rest) = t.strip_prefix('[') {
        match rest.split_once('m') {
            Some((code, after)) if code.bytes().all(|c| c.is_ascii_digit() || c == b';') => {
                t = after.trim_start().trim_start_matches('\u{1b}');
            }
            _ => break,
        }
    }
    t.bytes()
        .any(|c| c.is_ascii_alphabetic())
        .then(|| t.chars().take(120).collect())
}

/// `E626 05:14:36.393` of a glog prefix as seconds (the year is not printed).
fn glog_time(head: &str) -> Option<u64> {
    let i = head.rfind(['E', 'W', 'I', 'F'])?;
    let mut w = head[i + 1..].split_whitespace();
    let md = w.next()?;
    let hms = w.next()?;
    if md.len() != 4 || !md.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let month: u64 = md[..2].parse().ok()?;
    let day: u64 = md[2..].parse().ok()?;
    let mut parts = hms.split(':');
    let h: u64 = parts.next()?.parse().ok()?;
    let m: u64 = parts.next()?.parse().ok()?;
    let s: u64 = parts.next()?.split('.').next()?.parse().ok()?;
    // Only a real clock reading: a garbled one must not overflow the sum below.
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some(((month * 31 + day) * 24 + h) * 3600 + m * 60 + s)
}

/// `[PG ID 2 PG GUID 9(desc) Rank 7]`, `[PG 0 (default_pg) Rank 6]`, `[PG 1 Rank 1]` or
/// `[Rank 2]` at the start of the message: the group and the rank within it.
fn pg_tag(msg: &str) -> Option<(Option<PgRef>, Option<u32>)> {
    let t = msg.trim_start();
    let inner = t.strip_prefix('[')?.split(']').next()?;
    let (head, rank) = match inner.rsplit_once("Rank ") {
        Some((h, r)) => (h.trim(), r.trim().parse().ok()),
        None => (inner.trim(), None),
    };
    if head.is_empty() {
        return Some((None, rank));
    }
    let head = head.strip_prefix("PG ")?;
    let mut pg = PgRef::default();
    let (ids, desc) = match head.split_once('(') {
        Some((a, d)) => (a, Some(d.trim_end().trim_end_matches(')').to_string())),
        None => (head, None),
    };
    pg.desc = desc.filter(|d| !d.is_empty());
    let ids = ids.trim();
    if let Some(rest) = ids.strip_prefix("ID ") {
        let (id, guid) = match rest.split_once(" PG GUID ") {
            Some((a, b)) => (a.trim(), Some(b.trim().to_string())),
            None => (rest.trim(), None),
        };
        pg.id = Some(id.to_string());
        pg.guid = guid.filter(|g| !g.is_empty());
    } else {
        pg.id = Some(ids.to_string());
    }
    Some((Some(pg), rank))
}

/// `[Rank r]` just before `key`.
fn rank_in(msg: &str, key: &str) -> Option<u32> {
    let head = &msg[..msg.find(key)?];
    let i = head.rfind("[Rank ")?;
    head[i + 6..].split(']').next()?.trim().parse().ok()
}

/// The number after `key` (digits only; `-1` is not a sequence number).
fn num_after(s: &str, key: &str) -> Option<u64> {
    let i = s.find(key)? + key.len();
    let d: String = s[i..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    d.parse().ok()
}

/// `WorkNCCL(SeqNum=S, OpType=T, NumelIn=a, NumelOut=b, Timeout(ms)=X)` fields.
fn work_field<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let w = s.split_once("WorkNCCL(")?.1;
    let i = w.find(key)? + key.len();
    let v = w[i..].split([',', ')']).next()?.trim();
    (!v.is_empty()).then_some(v)
}

fn whats(msg: &str) -> Vec<WatchdogWhat> {
    let mut v = vec![];
    if msg.contains("Watchdog caught collective operation timeout")
        || msg.contains("timed out in blocking wait")
    {
        v.push(WatchdogWhat::Timeout {
            seq: work_field(msg, "SeqNum=").and_then(|x| x.parse().ok()),
            op: work_field(msg, "OpType=").map(str::to_string),
            numel_in: work_field(msg, "NumelIn=").and_then(|x| x.parse().ok()),
            numel_out: work_field(msg, "NumelOut=").and_then(|x| x.parse().ok()),
            ran_ms: num_after(msg, "ran for "),
        });
    }
    let progress = num_after(msg, "Timeout at NCCL work:")
        .or_else(|| num_after(msg, "detected by watchdog at work:"))
        .or_else(|| num_after(msg, "detected by watchdog at work sequence id:"));
    if let Some(seq) = progress {
        v.push(WatchdogWhat::Progress {
            seq,
            last_enqueued: num_after(msg, "last enqueued NCCL work:")
                .or_else(|| num_after(msg, "last enqueued work:")),
            last_completed: num_after(msg, "last completed NCCL work:")
                .or_else(|| num_after(msg, "last completed work:")),
        });
    }
    // 2.3-2.5 also print `Heartbeat monitor timed out!` when the watchdog stops beating.
    if msg.contains("Heartbeat monitor timed out") {
        v.push(WatchdogWhat::HeartbeatStuck { secs: None });
    }
    if msg.contains("watchdog got stuck for") {
        v.push(WatchdogWhat::HeartbeatStuck {
            secs: num_after(msg, "watchdog got stuck for"),
        });
    }
    if msg.contains("Observed flight recorder dump signal from another rank") {
        v.push(WatchdogWhat::DumpSignalObserved);
    }
    if msg.contains("Received a dump signal") {
        v.push(WatchdogWhat::DumpSignalFrom {
            from_rank: num_after(msg, "from ")
                .or_else(|| num_after(msg, "from  rank"))
                .or_else(|| num_after(msg, "from rank"))
                .map(|r| r as u32),
            last_enqueued: num_after(msg, "Last enqueued NCCL work:"),
            last_completed: num_after(msg, "last completed NCCL work:"),
        });
    }
    if let Some((head, tail)) = msg.split_once("didn't join collective #") {
        let rank = head
            .rfind('[')
            .and_then(|i| head[i + 1..].split(']').next())
            .and_then(|r| r.trim().parse().ok());
        if let (Some(rank), Some(seq)) = (rank, num_after(tail, "")) {
            v.push(WatchdogWhat::NotJoined { rank, seq });
        }
    }
    if let Some(e) = [
        "ncclRemoteError",
        "ncclSystemError",
        "ncclInternalError",
        "ncclUnhandledCudaError",
    ]
    .iter()
    .find(|e| msg.contains(*e))
    {
        v.push(WatchdogWhat::NcclError {
            error: e.to_string(),
        });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<WatchdogEvent> {
        let mut t = Torch::default();
        let mut out = vec![];
        for (i, l) in text.lines().enumerate() {
            t.line("f", i + 1, l, &mut out);
        }
        out
    }

    #[test]
    fn torch_global_and_group_ranks_stay_apart() {
        let e = read(
            " 2025-02-18 12:54 [rank13]:[E218 04:54:22.864535778 ProcessGroupNCCL.cpp:1795] [PG ID 11 PG GUID 119 Rank 1] Exception (either an error or timeout) detected by watchdog at work: 216, last enqueued NCCL work: 220, last completed NCCL work: 215.",
        );
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].global_rank, Some(13));
        assert_eq!(e[0].group_rank, Some(1));
        let pg = e[0].pg.as_ref().unwrap();
        assert_eq!(
            (pg.id.as_deref(), pg.guid.as_deref()),
            (Some("11"), Some("119"))
        );
        assert_eq!(
            e[0].what,
            WatchdogWhat::Progress {
                seq: 216,
                last_enqueued: Some(220),
                last_completed: Some(215)
            }
        );
        assert_eq!(e[0].prefix, None);
    }

    #[test]
    fn torch_prefixes_and_wrapped_lines() {
        let e = read(
            "dinov2-giant-nodes.cn-d003.nolog [stderr] [rank6]:[E909 09:55:35.239719860 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 6] Process group watchdog thread terminated \nwith exception: [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2070, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600022 \n",
        );
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].global_rank, Some(6));
        assert_eq!(
            e[0].prefix.as_deref(),
            Some("dinov2-giant-nodes.cn-d003.nolog [stderr]")
        );
        assert_eq!(
            e[0].pg.as_ref().unwrap().desc.as_deref(),
            Some("default_pg")
        );
        assert!(matches!(
            e[0].what,
            WatchdogWhat::Timeout {
                seq: Some(2070),
                ..
            }
        ));
        let ray = read(
            "\u{1b}[36m(RayWorkerWrapper pid=4009) [rank1]:[E ProcessGroupNCCL.cpp:1537] [PG 1 Rank 1] Timeout at NCCL work: 158046, last enqueued NCCL work: 158046, last completed NCCL work: 158045.",
        );
        assert_eq!(
            ray[0].prefix.as_deref(),
            Some("(RayWorkerWrapper pid=4009)")
        );
        assert_eq!(ray[0].pg.as_ref().unwrap().id.as_deref(), Some("1"));
        let mpi = read(
            "[1,3]<stdout>:[rank3]:[W101 01:02:03.4 ProcessGroupNCCL.cpp:1] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=BROADCAST, Timeout(ms)=1) ran for 2 milliseconds before timing out.",
        );
        assert_eq!(mpi[0].global_rank, Some(3));
        assert_eq!(mpi[0].prefix.as_deref(), Some("[1,3]<stdout>:"));
    }

    #[test]
    fn torch_stack_frames_follow_their_rank() {
        let e = read(
            "[rank5]:[E1 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0(default_pg) Rank 5] Stack trace of the failed collective: \n[rank5]:#0 all_reduce from /t/distributed_c10d.py:2501\n[rank5]:#1 <module> from /home/u/train.py:44\nother text\n#2 x from y:1\n",
        );
        let frames: Vec<&WatchdogWhat> = e.iter().map(|x| &x.what).collect();
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(
            frames[1],
            &WatchdogWhat::StackFrame {
                frame: "#1 <module> from /home/u/train.py:44".into()
            }
        );
        assert_eq!(e[1].global_rank, Some(5));
    }

    #[test]
    fn torch_dump_signal_and_desync_lines() {
        let e = read(
            "[rank2]:[E901 05:20:03.118859045 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 2] Received a dump signal due to a collective timeout from  rank 6 and we will try our best to dump the debug info. Last enqueued NCCL work: 460631, last completed NCCL work: 460630.This is",
        );
        assert_eq!(
            e[0].what,
            WatchdogWhat::DumpSignalFrom {
                from_rank: Some(6),
                last_enqueued: Some(460631),
                last_completed: Some(460630)
            }
        );
        let d = read(
            "[rank0]:[E ProcessGroupNCCL.cpp:1] [3] finished collective #5, but didn't join collective #6",
        );
        assert!(
            d.iter()
                .any(|x| x.what == WatchdogWhat::NotJoined { rank: 3, seq: 6 })
        );
    }
}
