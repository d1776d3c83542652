//! `topo diagnose --hang`: which rank, which collective, which node or link, from the evidence
//! a hung job leaves (issue 46). Pure: [`judge`] takes what `topo_evidence::hang` read and
//! returns a [`HangReport`]. Each evidence kind has its judge (`ras`, `torch`, `fr`, `net`);
//! each makes claims of a cause with a strength, and the strongest claim is the verdict:
//! a local NIC fault over a dead process over an error over a desync over a missing rank, and
//! "all launched, stuck inside the transfer" only where RAS shows no rank missing.

mod fr;
mod model;
mod net;
mod place;
mod ras;
mod torch;

pub use model::{
    Cause, HangReport, OnTopology, Place, RankKind, SCHEMA, Stuck, Suspect, Why, ranges,
};
pub use place::place_on;

use crate::report::Finding;
use model::Acc;
use topo_evidence::hang::HangEvidence;

/// The most suspects a report lists (gaps are one suspect of many ranks; this bounds a
/// flood of RAS rank lines or network errors).
const SUSPECTS_MAX: usize = 10_000;

pub fn judge(ev: &HangEvidence) -> HangReport {
    let mut acc = Acc::default();
    let ras = ras::judge(&ev.ras, &mut acc);
    peer_events(ev, &mut acc);
    let torch = torch::judge(&ev.watchdog, ras.all_ok_ranks, &mut acc);
    let fr_progress = fr::judge(&ev.fr, &ev.fr_dumps, &mut acc);
    net::judge(
        &ev.net,
        ras.progress || torch.progress || fr_progress,
        &mut acc,
    );
    if ras.all_ok_ranks.is_some()
        && !torch.timeouts
        && acc.claims.iter().all(|c| c.cause == Cause::Healthy)
    {
        acc.notes.push("RAS counts are launch counts: a hang inside a transfer shows as OK too; a PyTorch timeout beside an all-OK report means every rank launched the operation".into());
    }
    finish(ev, acc)
}

/// Monitor-mode events (`ncclras -m`, 2.29+): a peer declared dead.
fn peer_events(ev: &HangEvidence, acc: &mut Acc) {
    for e in &ev.peer_events {
        if e.event != "PEER_DEAD" {
            continue;
        }
        let p = &e.place;
        let title = format!(
            "RAS monitor: process {} on node {} (GPU {}) died{}",
            p.pid.map_or("?".into(), |x| x.to_string()),
            p.node.as_deref().unwrap_or("?"),
            p.gpu.as_deref().unwrap_or("?"),
            e.time
                .as_deref()
                .map(|t| format!(" at {t}"))
                .unwrap_or_default()
        );
        acc.suspects.push(Suspect {
            ranks: vec![],
            rank_kind: RankKind::Comm,
            group: None,
            why: Why::Dead,
            detail: "PEER_DEAD".into(),
            node: p.node.clone(),
            gpu: p.gpu.clone(),
            pid: p.pid,
            launcher: None,
        });
        if let Some(n) = &p.node {
            acc.place(
                "node",
                n.clone(),
                format!("GPU {} process died", p.gpu.as_deref().unwrap_or("?")),
            );
        }
        acc.findings.push(model::finding(
            topo_vocab::Code::HangRankDead,
            title.clone(),
            &[&e.at],
            "read that process's own log and the node's dmesg (exit code, OOM killer, Xid); the other ranks wait for it until their timeout",
        ));
        acc.claim(Cause::RankDead, 90, title);
    }
}

fn finish(ev: &HangEvidence, mut acc: Acc) -> HangReport {
    let best = acc
        .claims
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.strength.cmp(&b.1.strength).then(b.0.cmp(&a.0)))
        .map(|(_, c)| c);
    let (cause, summary) = match best {
        Some(c) => (c.cause, c.summary.clone()),
        None => (Cause::NoEvidence, "nothing in the input(s) is a RAS report, a watchdog line, Flight Recorder output or an NCCL network error".into()),
    };
    let mut seen = std::collections::HashSet::new();
    let mut findings: Vec<Finding> = acc
        .findings
        .drain(..)
        .filter(|f| seen.insert((f.code, f.text.clone())))
        .collect();
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let worst = findings.first().map(|f| f.severity);
    let others = findings
        .iter()
        .filter(|f| f.severity > crate::report::Severity::Info && f.text != summary)
        .count();
    let verdict = if others > 0 && cause != Cause::Healthy {
        format!(
            "{}: {summary} (and {others} more finding{})",
            cause.words(),
            if others > 1 { "s" } else { "" }
        )
    } else {
        format!("{}: {summary}", cause.words())
    };
    let mut seen = std::collections::HashSet::new();
    let mut suspects: Vec<Suspect> = acc
        .suspects
        .into_iter()
        .filter(|s| seen.insert(s.clone()))
        .collect();
    // Where the evidence itself is known to be partial.
    let mut notes = ev.notes.clone();
    if suspects.len() > SUSPECTS_MAX {
        notes.push(format!(
            "{} suspects; the first {SUSPECTS_MAX} are listed",
            suspects.len()
        ));
        suspects.truncate(SUSPECTS_MAX);
    }
    if ev.dropped > 0 {
        notes.push(format!(
            "{} records past the reader's limit were not kept",
            ev.dropped
        ));
    }
    for r in &ev.ras {
        if let Some(why) = &r.repaired {
            notes.push(format!(
                "{}: RAS JSON repaired: {why}",
                r.at.as_ref().map_or("", |q| q.file.as_str())
            ));
        }
    }
    notes.extend(acc.notes);
    HangReport {
        schema: SCHEMA.into(),
        topo_version: env!("CARGO_PKG_VERSION").into(),
        verdict,
        cause,
        worst,
        suspects,
        places: acc.places,
        stuck: acc.stuck,
        findings,
        inputs: ev.inputs.clone(),
        notes,
        on_topology: vec![],
    }
}

#[cfg(test)]
mod tests;
