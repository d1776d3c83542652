//! What Flight Recorder says: collectives not joined by every rank or joined with another
//! size or operation (the analyzer's `MatchState`s, `components/types.py`), and dumps' per
//! group progress. A rank with a trace but no entry for collective N did not make that call
//! while the others did: its program order differs (or it is stuck before the call). The
//! analyzer's "expected" entry is one rank's view, so both sides are reported with counts
//! (pytorch/pytorch#140563: most ranks were in the 1025-element all_reduce).

use super::model::{Acc, Cause, RankKind, Stuck, Suspect, Why, finding, rank_words};
use std::collections::BTreeMap;
use topo_evidence::hang::{FrCollective, FrPgStatus, Quote};
use topo_vocab::Code;

pub fn judge(colls: &[FrCollective], dumps: &[FrPgStatus], acc: &mut Acc) -> bool {
    for c in colls {
        collective(c, acc);
    }
    dumps_judge(dumps, acc)
}

fn suspect(group: Option<String>, ranks: Vec<u32>, why: Why, detail: String) -> Suspect {
    Suspect {
        ranks,
        rank_kind: RankKind::Trace,
        group,
        why,
        detail,
        node: None,
        gpu: None,
        pid: None,
        launcher: None,
    }
}

fn collective(c: &FrCollective, acc: &mut Acc) {
    let at: Vec<&Quote> = c.at.iter().collect();
    let op = c.op.clone().unwrap_or_else(|| "a collective".into());
    let seq = c.seq.map_or("?".into(), |s| s.to_string());
    let pg = c.pg.clone().unwrap_or_else(|| "its group".into());
    let stack = c
        .stack
        .last()
        .map(|s| format!(" (called at {})", s.rsplit(" at ").next().unwrap_or(s)))
        .unwrap_or_default();
    if !c.missing.is_empty() {
        let of = c.world.map(|w| format!(" of {w}")).unwrap_or_default();
        let title = format!(
            "{} never issued {pg} collective {seq} ({op}){stack} that the other ranks{of} issued: the ranks' collective sequences differ",
            rank_words(&c.missing)
        );
        acc.suspects.push(suspect(
            c.pg.clone(),
            c.missing.clone(),
            Why::NeverJoined,
            format!("no entry for collective {seq} ({op})"),
        ));
        let mut f = finding(
            Code::HangDesync,
            title.clone(),
            &at,
            "a mismatched collective count: the ranks that issued this call make one the others do not (or the missing ranks are stuck before it): the stack names the call; make every rank issue the same collectives in the same order",
        );
        f.evidence
            .extend(c.stack.iter().map(|s| format!("stack: {s}")));
        acc.findings.push(f);
        acc.claim(Cause::Desync, 80, title);
        acc.stuck.push(Stuck {
            source: "flight-recorder".into(),
            group: pg.clone(),
            seq: c.seq,
            op: c.op.clone(),
            ranks: c.missing.clone(),
            rank_kind: RankKind::Trace,
            summary: format!(
                "collective {seq} ({op}) missing on {}",
                rank_words(&c.missing)
            ),
        });
    }
    if !c.culprits.is_empty() {
        // Both sides, grouped by what each culprit had, against the analyzer's expectation.
        let mut sides: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for k in &c.culprits {
            let had = k
                .found
                .clone()
                .unwrap_or_else(|| "not shown (the line is cut)".into());
            sides
                .entry(format!("{}: {had}", k.error_type))
                .or_default()
                .push(k.rank);
        }
        let culprits: Vec<u32> = c.culprits.iter().map(|k| k.rank).collect();
        let expected = c
            .culprits
            .iter()
            .find_map(|k| k.expected.clone())
            .or(c.input_sizes.clone())
            .unwrap_or_else(|| "?".into());
        let others = c
            .world
            .map(|w| format!("{} other rank(s)", w.saturating_sub(culprits.len() as u32)))
            .unwrap_or_else(|| "the other ranks".into());
        let parts: Vec<String> = sides
            .iter()
            .map(|(k, r)| format!("{} with {k}", rank_words(r)))
            .collect();
        let title = format!(
            "{pg} collective {seq} ({op}): {} against {others} with {expected}; which side is out of step is not proven (the analyzer's expected entry is one rank's view)",
            parts.join("; ")
        );
        for (k, r) in &sides {
            acc.suspects.push(suspect(
                c.pg.clone(),
                r.clone(),
                Why::Mismatched,
                format!("{k}, the others {expected}"),
            ));
        }
        acc.findings.push(finding(Code::HangDesync, title.clone(), &at, "the ranks are in different collectives or sizes at this point: compare the code paths that issue this collective (the stack of each side, with TORCH_NCCL_TRACE_CPP_STACK/FR stacks) and which side issues the extra or reordered call"));
        acc.claim(Cause::Desync, 80, title);
    }
}

/// Dumps: per group, ranks whose last enqueued collective is below another rank's pending
/// one never issued it; no pending entry anywhere means nothing was stuck when they dumped.
fn dumps_judge(dumps: &[FrPgStatus], acc: &mut Acc) -> bool {
    let mut progress = false;
    let mut by_pg: BTreeMap<&str, Vec<&FrPgStatus>> = BTreeMap::new();
    for d in dumps {
        by_pg.entry(d.pg.as_str()).or_default().push(d);
        progress |= d.last_completed.unwrap_or(0) > 0;
    }
    for (pg, ds) in by_pg {
        let desc = ds
            .iter()
            .find_map(|d| d.desc.clone())
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        let name = format!("pg {pg}{desc}");
        let pending: Vec<&&FrPgStatus> = ds.iter().filter(|d| d.pending.is_some()).collect();
        let at: Vec<&Quote> = ds.iter().map(|d| &d.at).collect();
        if pending.is_empty() {
            let done = ds
                .iter()
                .filter_map(|d| d.last_completed)
                .max()
                .unwrap_or(-1);
            acc.claim(Cause::Healthy, 5, format!("Flight Recorder dump(s) of {name}: nothing pending (last completed collective {done})"));
            continue;
        }
        let top = pending
            .iter()
            .filter_map(|d| d.pending.as_ref())
            .map(|p| p.0)
            .max()
            .unwrap_or(0);
        let (_, op, sizes) = pending
            .iter()
            .filter_map(|d| d.pending.clone())
            .find(|p| p.0 == top)
            .unwrap_or_default();
        let behind: Vec<u32> = ds
            .iter()
            .filter(|d| d.last_enqueued.is_some_and(|e| e < top as i64))
            .filter_map(|d| d.rank)
            .collect();
        let waiting: Vec<u32> = pending
            .iter()
            .filter(|d| d.pending.as_ref().is_some_and(|p| p.0 == top))
            .filter_map(|d| d.rank)
            .collect();
        acc.stuck.push(Stuck {
            source: "flight-recorder".into(),
            group: name.clone(),
            seq: Some(top),
            op: Some(op.clone()),
            ranks: waiting.clone(),
            rank_kind: RankKind::Trace,
            summary: format!(
                "collective {top} ({op}, input sizes {sizes}) pending on {}",
                rank_words(&waiting)
            ),
        });
        if behind.is_empty() {
            acc.claim(
                Cause::Undetermined,
                19,
                format!(
                    "Flight Recorder: {name} collective {top} ({op}) pending on every dumped rank"
                ),
            );
            continue;
        }
        let title = format!(
            "{} of {name} never enqueued collective {top} ({op}) that {} wait in",
            rank_words(&behind),
            rank_words(&waiting)
        );
        acc.suspects.push(suspect(
            Some(name.clone()),
            behind.clone(),
            Why::NeverJoined,
            format!("last enqueued below {top}"),
        ));
        acc.findings.push(finding(Code::HangRankMissing, title.clone(), &at, "these ranks stopped issuing collectives on this group: take their stacks (py-spy dump) or read their dumps' last entries for the call they made instead"));
        acc.claim(Cause::RankMissing, 66, title);
    }
    progress
}
