//! Hang evidence reader (issue 46): text in, [`HangEvidence`] out, no I/O. One input may mix
//! the formats a hung job leaves behind: NCCL RAS reports (`ras`), PyTorch ProcessGroupNCCL
//! watchdog lines (`torch`), Flight Recorder analyzer output and dumps (`fr`) and NCCL network
//! errors (`net`). Each line goes through every recogniser that a cheap substring test lets
//! in, after the paste cleaning the NCCL log reader uses ([`crate::nccllog::paste`]); a
//! document that opens with `{` is read as JSON (RAS, its monitor events, an FR dump).
//! Linear in the input; records and quoted text are capped (`types`).

mod fr;
pub mod json;
mod net;
mod ras;
mod torch;
mod types;

pub use types::*;

use crate::nccllog::paste;

/// Reads one input into `ev`. `name` quotes its lines (and gives an FR dump its rank when it
/// ends in one, as `nccl_trace_rank_3` does).
pub fn read(name: &str, text: &str, ev: &mut HangEvidence) {
    let before = counts(ev);
    let mut summary = InputSummary {
        name: name.to_string(),
        ..Default::default()
    };
    match json_start(text) {
        Some((line, at)) => read_json(name, line, &text[at..], ev, &mut summary),
        None => read_lines(name, text, ev, &mut summary),
    }
    let after = counts(ev);
    let kinds = [
        ("ras", after.0 > before.0 || after.1 > before.1),
        ("watchdog", after.2 > before.2),
        ("flight-recorder", after.3 > before.3),
        ("net-error", after.4 > before.4),
    ];
    for (k, yes) in kinds {
        if yes && !summary.kinds.iter().any(|x| x == k) {
            summary.kinds.push(k.to_string());
        }
    }
    if summary.kinds.is_empty() {
        ev.notes.push(format!(
            "{name}: no hang evidence recognised (RAS report, watchdog lines, Flight Recorder output, NCCL network errors)"
        ));
    }
    ev.inputs.push(summary);
}

fn counts(ev: &HangEvidence) -> (usize, usize, usize, usize, usize) {
    (
        ev.ras.len(),
        ev.peer_events.len(),
        ev.watchdog.len(),
        ev.fr.len() + ev.fr_dumps.len(),
        ev.net.len(),
    )
}

/// Where a JSON document starts: the first line that is not blank, a shell prompt or the RAS
/// server's `OK`, when it opens with `{`. Its 1-based line and byte offset.
fn json_start(text: &str) -> Option<(usize, usize)> {
    let mut off = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        let t = l.trim();
        if t.is_empty() || t == "OK" || t.starts_with("$ ") {
            off += l.len();
            continue;
        }
        return t.starts_with('{').then_some((i + 1, off));
    }
    None
}

/// The rank a dump file's name ends in (`nccl_trace_rank_12`, `trace_3.json`).
fn rank_of_name(name: &str) -> Option<u32> {
    let stem = name.trim_end_matches(".json").trim_end_matches(".txt");
    let digits: String = stem
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let lower = stem.to_ascii_lowercase();
    (!digits.is_empty() && (lower.contains("rank") || lower.contains("trace")))
        .then(|| digits.parse().ok())
        .flatten()
}

fn read_json(name: &str, line: usize, text: &str, ev: &mut HangEvidence, s: &mut InputSummary) {
    s.lines = text.lines().count();
    let parsed = json::parse_all(text);
    let q = Quote::new(name, line, text.lines().next().unwrap_or(""));
    for v in &parsed.values {
        if let Some(r) = ras::from_json(v, q.clone(), parsed.missing_commas) {
            if ev.room(ev.ras.len()) {
                ev.ras.push(r);
            }
        } else if let Some(e) = ras::event_from_json(v, q.clone()) {
            if ev.room(ev.peer_events.len()) {
                ev.peer_events.push(e);
            }
        } else {
            let dumps = fr::dump_from_json(v, rank_of_name(name), &q);
            if ev.room(ev.fr_dumps.len()) {
                ev.fr_dumps.extend(dumps);
            }
        }
    }
    if let Some(e) = parsed.error {
        ev.notes.push(format!(
            "{name}: JSON read up to where it breaks ({e}); what came before is used"
        ));
    }
}

/// The line up to [`LINE_MAX`] bytes (at a character boundary).
fn capped(l: &str) -> &str {
    if l.len() <= LINE_MAX {
        return l;
    }
    let mut end = LINE_MAX;
    while !l.is_char_boundary(end) {
        end -= 1;
    }
    &l[..end]
}

fn read_lines(name: &str, text: &str, ev: &mut HangEvidence, s: &mut InputSummary) {
    let mut rt = ras::RasText::default();
    let mut tt = torch::Torch::default();
    let mut ft = fr::FrText::default();
    let mut wd = vec![];
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        s.lines = n;
        let raw = capped(raw);
        tt.line(name, n, raw, &mut wd);
        if wd.len() > 1024 {
            push_watchdog(ev, &mut wd);
        }
        let mut clean = paste::clean(raw);
        if clean.trim_start().starts_with("RAS Monitor Mode")
            && !s.kinds.iter().any(|k| k == "ras-monitor")
        {
            s.kinds.push("ras-monitor".into());
        }
        if clean.contains("](http") {
            clean = std::borrow::Cow::Owned(net::strip_links(&clean));
        }
        if net::wanted(&clean)
            && let Some(e) = net::read(name, n, &clean)
            && ev.room(ev.net.len())
        {
            ev.net.push(e);
        }
        if let Some(e) = ras::event_from_text(&clean, Quote::new(name, n, &clean))
            && ev.room(ev.peer_events.len())
        {
            ev.peer_events.push(e);
            continue;
        }
        if let Some(r) = rt.line(name, n, &clean) {
            push_ras(ev, r);
        }
        if let Some(c) = ft.line(name, n, &clean)
            && ev.room(ev.fr.len())
        {
            ev.fr.push(c);
        }
    }
    push_watchdog(ev, &mut wd);
    if let Some(r) = rt.finish() {
        push_ras(ev, r);
    }
    if let Some(c) = ft.finish()
        && ev.room(ev.fr.len())
    {
        ev.fr.push(c);
    }
}

fn push_watchdog(ev: &mut HangEvidence, wd: &mut Vec<WatchdogEvent>) {
    for e in wd.drain(..) {
        if ev.room(ev.watchdog.len()) {
            ev.watchdog.push(e);
        }
    }
}

/// A RAS report with something in it (a lone `Errors` header of another program is not one).
fn push_ras(ev: &mut HangEvidence, r: RasReport) {
    let empty = r.version.is_none()
        && r.nodes.is_none()
        && r.groups.is_empty()
        && r.comms.is_empty()
        && r.processes_listed.is_empty()
        && !r.no_comm_data
        && r.gather_timeouts.is_none();
    if !empty && ev.room(ev.ras.len()) {
        ev.ras.push(r);
    }
}

#[cfg(test)]
mod tests;
