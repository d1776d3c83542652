//! What NCCL RAS reports say about a hang. RAS counts are *launch* counts sampled on the host
//! (`src/ras/collectives.cc`), so: one operation of skew in one query is normal; a spread that
//! does not move between queries is a stuck or diverged communicator; equal counts with a
//! PyTorch timeout mean every rank launched the operation and it is stuck inside the transfer
//! (issue NVIDIA/nccl#1730). RAS itemises only the smaller groups (at most 25% of the ranks
//! and 10 of them; verbose: under 50%), so the listed ranks may be the ones *ahead*.

use super::model::{Acc, Cause, RankKind, Suspect, Why, finding, rank_words};
use topo_evidence::hang::{GroupWhat, ProcessState, RasComm, RasRank, RasReport};
use topo_vocab::Code;

/// What the RAS reports say, for the other judges.
#[derive(Default)]
pub struct RasSays {
    /// The largest communicator every report shows all RUNNING and OK (its rank count).
    pub all_ok_ranks: Option<u32>,
    /// Some rank has launched an operation (the job made progress once).
    pub progress: bool,
}

pub fn judge(reports: &[RasReport], acc: &mut Acc) -> RasSays {
    let mut says = RasSays::default();
    for (i, r) in reports.iter().enumerate() {
        let bad = consistency(r, acc);
        processes(r, acc);
        for c in &r.comms {
            if bad.contains(&c.label) {
                continue;
            }
            says.progress |= c
                .rank_groups
                .iter()
                .any(|g| matches!(g.what, GroupWhat::Launched { count } if count > 0));
            let again = reports[i + 1..]
                .iter()
                .flat_map(|x| &x.comms)
                .find(|x| x.hash == c.hash && !c.hash.is_empty());
            comm(r, c, again, acc);
        }
        table(r, &mut says, acc);
    }
    says
}

fn comm_name(c: &RasComm) -> String {
    format!("comm {} ({})", c.hash, c.label)
}

fn suspect(c: &RasComm, rk: &RasRank, why: Why, detail: String) -> Suspect {
    Suspect {
        ranks: vec![rk.rank],
        rank_kind: RankKind::Comm,
        group: Some(comm_name(c)),
        why,
        detail,
        node: rk.place.node.clone(),
        gpu: rk.place.gpu.clone(),
        pid: rk.place.pid,
        launcher: None,
    }
}

/// `node H GPU G process P` of a rank, or of a process.
fn where_words(p: &topo_evidence::hang::Place) -> String {
    let mut w = vec![];
    if let Some(n) = &p.node {
        w.push(format!("node {n}"));
    }
    if let Some(g) = &p.gpu {
        w.push(format!("GPU {g}"));
    }
    if let Some(pid) = p.pid {
        w.push(format!("process {pid}"));
    }
    if w.is_empty() {
        "place not given".into()
    } else {
        w.join(", ")
    }
}

/// Sanity checks of a report (NVIDIA/nccl#1762: 2.27 `VERBOSE STATUS` could print a corrupt
/// report): a communicator missing more ranks than it has, a rank number past its size, a
/// group row of empty communicators with errors. Returns the labels not to trust.
fn consistency(r: &RasReport, acc: &mut Acc) -> Vec<String> {
    let mut bad = vec![];
    let mut why = vec![];
    let mut at = vec![];
    for c in &r.comms {
        let group: Option<u32> = c
            .label
            .trim_start_matches('#')
            .split('-')
            .next()
            .and_then(|g| g.parse().ok());
        let row = r.groups.iter().find(|g| Some(g.group) == group);
        let size = c.size.or(row.map(|g| g.ranks_per_comm));
        let Some(size) = size else { continue };
        let most = c.rank_groups.iter().filter_map(|g| g.n).max().unwrap_or(0);
        let top = c
            .rank_groups
            .iter()
            .flat_map(|g| &g.ranks)
            .map(|x| x.rank)
            .max();
        if most > size || top.is_some_and(|t| t >= size) {
            bad.push(c.label.clone());
            at.extend(c.at.iter());
            let what = if most > size {
                format!("counts {most} ranks")
            } else {
                format!("names rank {}", top.unwrap_or(0))
            };
            why.push(format!(
                "{} ({}) {what} in a communicator of {size}",
                c.label, c.hash
            ));
        }
    }
    for g in &r.groups {
        if g.ranks_per_comm == 0 && g.errors != "OK" {
            at.push(&g.at);
            why.push(format!(
                "group {} is {} communicator(s) of 0 ranks with {} {}",
                g.group, g.comms, g.status, g.errors
            ));
        }
    }
    if !why.is_empty() {
        let f = finding(
            Code::HangRasInconsistent,
            format!("the RAS report contradicts itself: {}", why.join("; ")),
            &at,
            "do not trust the inconsistent parts; NCCL 2.27's VERBOSE STATUS could corrupt reports (NVIDIA/nccl#1762, fixed later): query again with a newer NCCL, and read only the consistent entries",
        );
        acc.findings.push(f);
    }
    bad
}

/// Job-level `INCOMPLETE` and `DEAD` processes, tied to the communicator rank RAS names for
/// the same process (by pid; or the one missing rank when one process is listed).
fn processes(r: &RasReport, acc: &mut Acc) {
    let missing: Vec<(&RasComm, &RasRank)> = r
        .comms
        .iter()
        .flat_map(|c| {
            c.rank_groups
                .iter()
                .filter(|g| matches!(g.what, GroupWhat::Missing { .. }))
                .flat_map(move |g| g.ranks.iter().map(move |x| (c, x)))
        })
        .collect();
    let one = r.processes_listed.len() == 1 && missing.len() == 1;
    let by_pid: std::collections::HashMap<u64, &(&RasComm, &RasRank)> = missing
        .iter()
        .filter_map(|m| Some((m.1.place.pid?, m)))
        .collect();
    let mut more = 0;
    for (i, p) in r.processes_listed.iter().enumerate() {
        let tied = p
            .place
            .pid
            .and_then(|pid| by_pid.get(&pid).copied())
            .or(if one { missing.first() } else { None });
        let rank = tied.map(|(c, x)| format!("rank {} of {}", x.rank, comm_name(c)));
        let who = rank
            .clone()
            .unwrap_or_else(|| "its rank is not in the report".into());
        let (code, why, cause, strength, state) = match p.state {
            ProcessState::Dead => (
                Code::HangRankDead,
                Why::Dead,
                Cause::RankDead,
                90,
                "dead (unreachable by RAS)",
            ),
            ProcessState::Unresponsive => (
                Code::HangRankMissing,
                Why::Unresponsive,
                Cause::RankMissing,
                65,
                "unresponsive (RAS gets no data from it)",
            ),
        };
        let place = topo_evidence::hang::Place {
            pid: None,
            ..p.place.clone()
        };
        let title = format!(
            "process {} on {} is {state}: {who}",
            p.place.pid.map_or("?".into(), |x| x.to_string()),
            where_words(&place)
        );
        let mut at = vec![&p.at];
        if let Some((c, _)) = tied {
            at.extend(c.at.as_ref());
        }
        let fix = match p.state {
            ProcessState::Dead => {
                "the process exited or its host is gone: read its own log (exit code, Xid, OOM killer in dmesg) on that node; the other ranks wait for it until their timeout"
            }
            ProcessState::Unresponsive => {
                "the process is stopped or hung outside NCCL (or slow to answer): take a stack (py-spy dump --pid, gdb) on that node; RAS declares it dead after about 60 s if it never answers"
            }
        };
        if i < FINDINGS_MAX {
            acc.findings.push(finding(code, title.clone(), &at, fix));
        } else {
            more += 1;
        }
        acc.suspects.push(Suspect {
            ranks: tied.map(|(_, x)| vec![x.rank]).unwrap_or_default(),
            rank_kind: RankKind::Comm,
            group: tied.map(|(c, _)| comm_name(c)),
            why,
            detail: format!("process {state}"),
            node: p.place.node.clone(),
            gpu: p.place.gpu.clone(),
            pid: p.place.pid,
            launcher: None,
        });
        if let Some(n) = &p.place.node {
            acc.place(
                "node",
                n.clone(),
                format!(
                    "{} (GPU {}) {state}",
                    rank.unwrap_or_else(|| "a process".into()),
                    p.place.gpu.as_deref().unwrap_or("?")
                ),
            );
        }
        acc.claim(cause, strength, title);
    }
    if more > 0 {
        let title =
            format!("{more} more job process(es) are dead or unresponsive (each is a suspect)");
        acc.findings.push(finding(
            Code::HangRankMissing,
            title,
            &[],
            "see the suspects: one node for all of them points at the node, many nodes at the job",
        ));
    }
}

/// Findings of one kind in one report, one per rank or process; the rest are counted in one
/// more finding and every one stays a suspect.
const FINDINGS_MAX: usize = 16;

/// One communicator entry: missing ranks, count mismatches, status mismatches, errors.
fn comm(r: &RasReport, c: &RasComm, again: Option<&RasComm>, acc: &mut Acc) {
    let listed: std::collections::HashSet<u64> = r
        .processes_listed
        .iter()
        .filter_map(|p| p.place.pid)
        .collect();
    let mut shown = 0;
    for g in &c.rank_groups {
        match &g.what {
            GroupWhat::Missing { unresponsive, dead } => {
                for rk in &g.ranks {
                    // Already judged with its job-level process line.
                    if rk.place.pid.is_some_and(|p| listed.contains(&p))
                        || (rk.place.pid.is_none() && r.processes_listed.len() == 1)
                    {
                        continue;
                    }
                    let is_dead = *dead == Some(true);
                    let state = if is_dead {
                        "dead"
                    } else if *unresponsive == Some(true) {
                        "unresponsive"
                    } else {
                        "missing"
                    };
                    let title = format!(
                        "rank {} of comm {} is {state}: {}",
                        rk.rank,
                        c.hash,
                        where_words(&rk.place)
                    );
                    let (code, why, cause, strength) = if is_dead {
                        (Code::HangRankDead, Why::Dead, Cause::RankDead, 90)
                    } else {
                        (
                            Code::HangRankMissing,
                            Why::Unresponsive,
                            Cause::RankMissing,
                            65,
                        )
                    };
                    let at: Vec<_> = c.at.iter().chain([&g.at]).collect();
                    shown += 1;
                    if shown == FINDINGS_MAX + 1 {
                        let t = format!(
                            "more ranks of comm {} have no RAS data (each is a suspect)",
                            c.hash
                        );
                        acc.findings.push(finding(
                            Code::HangRankMissing,
                            t,
                            &at,
                            "see the suspects for their nodes and GPUs",
                        ));
                    }
                    if shown <= FINDINGS_MAX {
                        acc.findings.push(finding(code, title.clone(), &at, "RAS has no data from this rank: its process is stopped, hung outside NCCL or gone; take a stack (py-spy dump) or read its log on that node"));
                    }
                    acc.suspects
                        .push(suspect(c, rk, why, format!("no RAS data ({state})")));
                    if let Some(n) = &rk.place.node {
                        acc.place(
                            "node",
                            n.clone(),
                            format!(
                                "rank {} (GPU {}) {state}",
                                rk.rank,
                                rk.place.gpu.as_deref().unwrap_or("?")
                            ),
                        );
                    }
                    acc.claim(cause, strength, title);
                }
                if g.ranks.is_empty() && r.processes_listed.is_empty() {
                    let n = g.n.map_or("some".into(), |n| n.to_string());
                    let title = format!(
                        "comm {} is missing data from {n} rank(s), not itemised in the excerpt",
                        c.hash
                    );
                    acc.findings.push(finding(
                        Code::HangRankMissing,
                        title.clone(),
                        &[&g.at],
                        "run ncclras -v to list the missing ranks",
                    ));
                    acc.claim(Cause::RankMissing, 60, title);
                }
            }
            GroupWhat::Error { error } => {
                let title = format!(
                    "{} of comm {} reported {error}",
                    rank_words(&g.ranks.iter().map(|x| x.rank).collect::<Vec<_>>()),
                    c.hash
                );
                acc.findings.push(finding(Code::HangRankError, title.clone(), &[&g.at], "an NCCL error on these ranks (often a remote process error: the rank that failed first is elsewhere): read these ranks' NCCL WARN lines for the peer they name"));
                for rk in &g.ranks {
                    acc.suspects.push(suspect(c, rk, Why::Error, error.clone()));
                }
                acc.claim(Cause::RankError, 85, title);
            }
            _ => {}
        }
    }
    counts(c, again, acc);
    status(c, acc);
}

/// `N ranks have launched up to operation K` groups: who is ahead, who behind, by how much.
fn counts(c: &RasComm, again: Option<&RasComm>, acc: &mut Acc) {
    let launched = |x: &RasComm| -> Vec<(u64, Option<u32>, Vec<RasRank>)> {
        x.rank_groups
            .iter()
            .filter_map(|g| match g.what {
                GroupWhat::Launched { count } => Some((count, g.n, g.ranks.clone())),
                GroupWhat::NotLaunched => Some((0, g.n, g.ranks.clone())),
                _ => None,
            })
            .collect()
    };
    let now = launched(c);
    if now.len() < 2 {
        return;
    }
    let hi = now.iter().map(|g| g.0).max().unwrap_or(0);
    let lo = now.iter().map(|g| g.0).min().unwrap_or(0);
    let spread = hi - lo;
    let op = c.op.clone().unwrap_or_else(|| "collective".into());
    let frozen = again.map(|a| {
        let mut x: Vec<u64> = launched(a).iter().map(|g| g.0).collect();
        let mut y: Vec<u64> = now.iter().map(|g| g.0).collect();
        x.sort_unstable();
        y.sort_unstable();
        x == y
    });
    let mut parts = vec![];
    for (count, n, ranks) in &now {
        let who = if ranks.is_empty() {
            format!("{} rank(s) (not itemised)", n.unwrap_or(0))
        } else {
            let nodes: Vec<&str> = ranks
                .iter()
                .filter_map(|x| x.place.node.as_deref())
                .collect();
            let mut nodes = nodes;
            nodes.dedup();
            let on = if nodes.len() == 1 {
                format!(" on {}", nodes[0])
            } else {
                String::new()
            };
            format!(
                "{}{on}",
                rank_words(&ranks.iter().map(|x| x.rank).collect::<Vec<_>>())
            )
        };
        parts.push(format!("{who} at {count}"));
        for rk in ranks {
            let (why, d) = if *count < hi {
                (
                    Why::Behind,
                    format!(
                        "launched up to {op} {count}, {} behind the furthest",
                        hi - count
                    ),
                )
            } else {
                (
                    Why::Ahead,
                    format!("launched up to {op} {count}, furthest ahead"),
                )
            };
            acc.suspects.push(suspect(c, rk, why, d));
        }
    }
    let what = format!(
        "comm {}: {op} launch counts differ by {spread} ({})",
        c.hash,
        parts.join("; ")
    );
    let at: Vec<_> =
        c.at.iter()
            .chain(c.rank_groups.iter().map(|g| &g.at))
            .collect();
    // How many ranks each end holds: RAS itemises only the smaller groups, so the listed
    // ranks may be the ones ahead (`rasCountIsOutlier`, src/ras/client_support.cc).
    let size = |g: &(u64, Option<u32>, Vec<RasRank>)| g.1.unwrap_or(g.2.len() as u32);
    let lo_n: u64 = now
        .iter()
        .filter(|g| g.0 == lo)
        .map(|g| u64::from(size(g)))
        .sum();
    let hi_n: u64 = now
        .iter()
        .filter(|g| g.0 == hi)
        .map(|g| u64::from(size(g)))
        .sum();
    let shape = if now.len() >= 3 {
        Shape::Spread
    } else if lo_n <= hi_n {
        Shape::Behind
    } else {
        Shape::Ahead
    };
    let still = if frozen == Some(true) {
        "unchanged across queries"
    } else {
        "in one query"
    };
    match (frozen, spread, shape) {
        (Some(false), _, _) => {
            acc.findings.push(finding(
                Code::HangRasMismatch,
                format!("{what}; the counts moved between queries"),
                &at,
                "the job is progressing: RAS samples launch counts while ranks race; no action",
            ));
            acc.claim(
                Cause::TransientMismatch,
                15,
                format!("{what}, moving between queries"),
            );
        }
        (None, 0..=1, _) => {
            let title = format!(
                "{what} in one query: normal while ranks race, a hang only if it does not move"
            );
            acc.findings.push(finding(Code::HangRasMismatch, title.clone(), &at, "query RAS again (ncclras) a few seconds later: if the counts are unchanged, the ranks behind never launched the next operation and are the ones to look at"));
            acc.claim(Cause::TransientMismatch, 15, title);
        }
        (_, _, Shape::Spread) | (_, _, Shape::Ahead) => {
            let title = format!(
                "{what}, {still}: the ranks diverged in program order (one issues or skips a collective the others do not)"
            );
            acc.findings.push(finding(Code::HangDesync, title.clone(), &at, "the ranks run different sequences of collectives on this communicator: compare the code paths of the ranks furthest ahead and behind (data-dependent branches, a collective under an `if rank == ...`, early exits); take Flight Recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE) to see which call differs; this is not a hardware fault"));
            let strength = match (frozen, shape) {
                (Some(true), _) => 82,
                (_, Shape::Spread) => 78,
                _ => 70,
            };
            acc.claim(Cause::Desync, strength, title);
        }
        (Some(true), _, Shape::Behind) => {
            let title = format!(
                "{what}, {still}: the ranks behind never launched operation {}",
                lo.saturating_add(1)
            );
            acc.findings.push(finding(Code::HangRankMissing, title.clone(), &at, "the ranks behind are stuck before their next collective on this communicator (a rank-specific code path, data loading, a hung process): take their stacks (py-spy dump) on their nodes"));
            acc.claim(Cause::RankMissing, 66, title);
        }
        (None, _, Shape::Behind) => {
            let title = format!(
                "{what}, {still}: the ranks behind are stragglers (slow, or stuck before their next collective)"
            );
            acc.findings.push(finding(Code::HangRasMismatch, title.clone(), &at, "query RAS again: a gap that grows or stays means the ranks behind are stuck outside NCCL (take their stacks); a gap that closes is a slow rank (data loading, a throttled GPU)"));
            acc.claim(Cause::RankMissing, 60, title);
        }
    }
}

/// How launch counts split: several values, a minority behind, or a minority ahead.
#[derive(Clone, Copy)]
enum Shape {
    Spread,
    Behind,
    Ahead,
}

/// `Communicator ranks have different status`: a teardown caught half-way.
fn status(c: &RasComm, acc: &mut Acc) {
    let groups: Vec<(&str, Option<u32>, &Vec<RasRank>)> = c
        .rank_groups
        .iter()
        .filter_map(|g| match &g.what {
            GroupWhat::Status { status } => Some((status.as_str(), g.n, &g.ranks)),
            _ => None,
        })
        .collect();
    if groups.len() < 2 {
        return;
    }
    let ending = groups
        .iter()
        .any(|g| matches!(g.0, "FINALIZE" | "UNKNOWN" | "NOCOMM" | "ABORT"));
    let words: Vec<String> = groups
        .iter()
        .map(|(s, n, _)| format!("{} {s}", n.map_or("?".into(), |n| n.to_string())))
        .collect();
    let running: Vec<&RasRank> = groups
        .iter()
        .filter(|g| g.0 == "RUNNING")
        .flat_map(|g| g.2.iter())
        .collect();
    let mut title = format!(
        "comm {}: ranks in different states ({})",
        c.hash,
        words.join(", ")
    );
    if ending && !running.is_empty() {
        title.push_str(&format!(
            "; {} yet to finalize",
            rank_words(&running.iter().map(|x| x.rank).collect::<Vec<_>>())
        ));
        for rk in running {
            acc.suspects.push(suspect(
                c,
                rk,
                Why::NotFinalized,
                "still RUNNING while the others left or finalize".into(),
            ));
        }
    }
    let at: Vec<_> = c.at.iter().collect();
    if ending {
        acc.findings.push(finding(Code::HangRasTeardown, title.clone(), &at, "a communicator being destroyed (ranks leave one by one): ignore it if it clears on the next query; if it stays, the RUNNING ranks never called ncclCommFinalize/Destroy"));
        acc.claim(Cause::Teardown, 10, title);
    } else {
        acc.findings.push(finding(
            Code::HangRasMismatch,
            title.clone(),
            &at,
            "query RAS again: ranks that stay in another state are the ones to look at",
        ));
        acc.claim(Cause::TransientMismatch, 14, title);
    }
}

/// The `Communicators...` table alone (an excerpt without the entries): its Errors column.
fn table(r: &RasReport, says: &mut RasSays, acc: &mut Acc) {
    if r.groups.is_empty() {
        if r.comms.is_empty() && r.processes_listed.is_empty() && r.nodes.is_some() {
            acc.claim(
                Cause::Healthy,
                5,
                format!(
                    "RAS job summary: {} process(es) on {} node(s), nothing wrong reported",
                    r.processes.unwrap_or(0),
                    r.nodes.unwrap_or(0)
                ),
            );
        }
        if r.json && r.comms.iter().all(|c| c.kind == "OK") {
            says.all_ok_ranks = says
                .all_ok_ranks
                .max(r.comms.iter().filter_map(|c| c.size).max());
        }
        return;
    }
    let all_ok = r
        .groups
        .iter()
        .all(|g| g.errors == "OK" && g.status == "RUNNING");
    let shape: Vec<String> = r
        .groups
        .iter()
        .map(|g| {
            format!(
                "group {}: {} comm(s) x {} ranks, {}/{}",
                g.group, g.comms, g.ranks_per_comm, g.status, g.errors
            )
        })
        .collect();
    if all_ok {
        says.all_ok_ranks = says
            .all_ok_ranks
            .max(r.groups.iter().map(|g| g.ranks_per_comm).max());
        let procs = match (r.processes, r.nodes) {
            (Some(p), Some(n)) => format!("{p} process(es) on {n} node(s), "),
            _ => String::new(),
        };
        acc.claim(
            Cause::Healthy,
            5,
            format!("RAS: {procs}{}", shape.join("; ")),
        );
        return;
    }
    if !r.comms.is_empty() || !r.processes_listed.is_empty() {
        return;
    }
    for g in r.groups.iter().filter(|g| g.errors != "OK") {
        let title = format!(
            "RAS group {} ({} comm(s) x {} ranks, {}) reports {} without details in the excerpt",
            g.group, g.comms, g.ranks_per_comm, g.status, g.errors
        );
        if g.errors.contains("INCOMPLETE") || g.errors.contains("ERROR") {
            acc.findings.push(finding(Code::HangRankMissing, title.clone(), &[&g.at], "read the Errors section of the same report (ncclras -v) for the ranks and processes"));
            acc.claim(Cause::RankMissing, 55, title);
        } else if g.status == "FINALIZE" || g.status == "NOCOMM" {
            acc.findings.push(finding(
                Code::HangRasTeardown,
                title.clone(),
                &[&g.at],
                "a communicator being torn down: ignore it if it clears",
            ));
            acc.claim(Cause::Teardown, 10, title);
        } else {
            acc.findings.push(finding(Code::HangRasMismatch, format!("{title}: usually transient, query again"), &[&g.at], "query RAS again a few seconds later: a MISMATCH that does not change means a stuck communicator; read the Warnings section for its ranks"));
            acc.claim(Cause::TransientMismatch, 15, title);
        }
    }
}
