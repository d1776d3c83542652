//! PyTorch Flight Recorder: the analyzer's text (`torchfrtrace` / `python -m
//! torch.distributed.flight_recorder.fr_trace`, PyTorch 2.5+, `components/builder.py` and
//! `components/types.py`), its `-j` side-by-side entries, the TorchComms debug server's
//! `Collectives` table, and dumps as JSON (`_dump_nccl_trace_json`) or as Python prints them
//! (tuples), read with the tolerant JSON reader. Pickled dumps are binary and refused by the
//! text reader before they get here.

use super::json::Json;
use super::types::{Culprit, FrCollective, FrPgStatus, Quote, RANKS_MAX};

/// The analyzer's text, line by line.
#[derive(Default)]
pub struct FrText {
    pub cur: Option<FrCollective>,
    in_stack: bool,
    /// `-j`: the column starts of `Rank N` headers, their ranks and entry counts per column.
    table: Option<JTable>,
    /// The debug server's `--- Collectives ---` table: the column of `missing_ranks`.
    db: bool,
}

struct JTable {
    ranks: Vec<u32>,
    starts: Vec<usize>,
    /// Each column's entries, first row first (operation names only).
    cols: Vec<Vec<String>>,
    at: Quote,
}

/// Whether a line starts or continues analyzer output.
fn starts(t: &str) -> bool {
    t.starts_with("Not all ranks joining collective")
        || (t.starts_with("Collective ") && t.contains(" errors"))
        || t == "--- Collectives ---"
}

impl FrText {
    /// Reads one line; returns the collective this line closed, if any.
    pub fn line(&mut self, file: &str, n: usize, raw: &str) -> Option<FrCollective> {
        let t = raw.trim();
        if let Some(done) = self.table_line(file, n, raw) {
            return Some(done);
        }
        if starts(t) || (t.starts_with("Rank ") && is_rank_header(t)) {
            let closed = self.finish();
            if t == "--- Collectives ---" {
                self.db = true;
            } else if t.starts_with("Rank ") {
                self.table = Some(header(raw, Quote::new(file, n, raw)));
            } else {
                self.cur = Some(FrCollective {
                    seq: head_seq(t),
                    at: Some(Quote::new(file, n, t)),
                    ..Default::default()
                });
            }
            return closed;
        }
        if self.db {
            return self.db_row(file, n, t);
        }
        let c = self.cur.as_mut()?;
        if self.in_stack && raw.starts_with([' ', '\t']) && t.contains(" at ") {
            if c.stack.len() < 8 {
                c.stack.push(t.to_string());
            }
            return None;
        }
        self.in_stack = false;
        field(c, t, &mut self.in_stack);
        None
    }

    /// The collective being read, and a finished `-j` table, at the end of the input.
    pub fn finish(&mut self) -> Option<FrCollective> {
        self.in_stack = false;
        if let Some(t) = self.table.take() {
            return table_gap(t);
        }
        self.cur.take()
    }

    fn table_line(&mut self, file: &str, n: usize, raw: &str) -> Option<FrCollective> {
        let tab = self.table.as_mut()?;
        let t = raw.trim();
        if t.is_empty() {
            return self.finish();
        }
        if t.bytes().all(|c| c == b'-' || c == b' ') {
            return None;
        }
        if !t.contains('(') {
            return self.finish();
        }
        let _ = (file, n);
        for (i, &s) in tab.starts.iter().enumerate() {
            let end = tab.starts.get(i + 1).copied().unwrap_or(raw.len());
            let cell = raw
                .get(s.min(raw.len())..end.min(raw.len()))
                .unwrap_or("")
                .trim();
            if !cell.is_empty() && tab.cols[i].len() < RANKS_MAX {
                tab.cols[i].push(cell.split('(').next().unwrap_or(cell).to_string());
            }
        }
        None
    }

    /// A row of `id group_id pass_check collective_seq_id collective_name state missing_ranks`.
    fn db_row(&mut self, file: &str, n: usize, t: &str) -> Option<FrCollective> {
        if t.starts_with("---") || t.starts_with("===") {
            self.db = false;
            return None;
        }
        let body = t.split('←').next().unwrap_or(t).trim();
        let (cols, set) = match body.split_once('{') {
            Some((a, b)) => (a, Some(b.split('}').next().unwrap_or(""))),
            None => (body, None),
        };
        let w: Vec<&str> = cols.split_whitespace().collect();
        let set = set?;
        if w.len() < 5 || w[0].parse::<u64>().is_err() {
            return None;
        }
        Some(FrCollective {
            seq: w[3].parse().ok(),
            pg: Some(w[1].to_string()),
            op: Some(w[4].to_string()),
            state: w.get(5).map(|s| s.to_string()),
            missing: rank_set(set),
            at: Some(Quote::new(file, n, t)),
            ..Default::default()
        })
    }
}

fn is_rank_header(t: &str) -> bool {
    let w: Vec<&str> = t.split_whitespace().collect();
    w.len() >= 4
        && w.chunks(2)
            .all(|p| p[0] == "Rank" && p.get(1).is_some_and(|r| r.parse::<u32>().is_ok()))
}

fn header(raw: &str, at: Quote) -> JTable {
    let mut ranks = vec![];
    let mut starts = vec![];
    for (i, _) in raw.match_indices("Rank ") {
        let r = raw[i + 5..]
            .split_whitespace()
            .next()
            .and_then(|r| r.parse().ok());
        if let Some(r) = r {
            ranks.push(r);
            starts.push(i);
        }
    }
    JTable {
        cols: vec![vec![]; ranks.len()],
        ranks,
        starts,
        at,
    }
}

/// The first row where some rank has an entry and another has none: those ranks never made
/// the call the others made at that position.
fn table_gap(t: JTable) -> Option<FrCollective> {
    let most = t.cols.iter().map(Vec::len).max()?;
    let fewest = t.cols.iter().map(Vec::len).min()?;
    if most == fewest {
        return None;
    }
    let missing = t
        .ranks
        .iter()
        .zip(&t.cols)
        .filter(|(_, c)| c.len() == fewest)
        .map(|(r, _)| *r)
        .collect();
    let op = t
        .cols
        .iter()
        .find(|c| c.len() > fewest)
        .map(|c| c[fewest].clone());
    Some(FrCollective {
        // The position in the trace, counted from 1 as the analyzer counts collectives.
        seq: Some(fewest as u64 + 1),
        op,
        missing,
        state: Some(format!(
            "{fewest} entries on the ranks missing it, {most} on the others"
        )),
        at: Some(t.at),
        ..Default::default()
    })
}

/// `Not all ranks joining collective 5 at entry 4`, `..., sequence number: 5`,
/// `Collective 39 at entry 38 errors`.
fn head_seq(t: &str) -> Option<u64> {
    let digits = |s: &str| -> Option<u64> {
        s.trim_start_matches([' ', ':', ','])
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    if let Some(i) = t.find("sequence number") {
        return digits(&t[i + "sequence number".len()..]);
    }
    if let Some(rest) = t.strip_prefix("Not all ranks joining collective") {
        return digits(rest);
    }
    t.strip_prefix("Collective ").and_then(digits)
}

fn rank_set(s: &str) -> Vec<u32> {
    s.split([',', ' ', '{', '}', '[', ']'])
        .filter_map(|x| x.trim().parse().ok())
        .take(RANKS_MAX)
        .collect()
}

fn field(c: &mut FrCollective, t: &str, in_stack: &mut bool) {
    let Some((k, v)) = t.split_once(':') else {
        return;
    };
    let v = v.trim();
    match k.trim() {
        "group info" => c.pg = Some(v.to_string()),
        "collective" => c.op = Some(v.to_string()),
        "missing ranks" => c.missing = rank_set(v),
        "input sizes" => c.input_sizes = Some(v.to_string()),
        "world size" => c.world = v.parse().ok(),
        "expected ranks" => {
            c.world = v
                .parse()
                .ok()
                .or(Some(rank_set(v).len() as u32).filter(|n| *n > 0));
        }
        "collective state" => c.state = Some(v.to_string()),
        "collective stack trace" => *in_stack = true,
        "error msg" => c.culprits = culprits(v),
        _ => {}
    }
}

/// `Culprit rank 22; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[1025]]'
/// does not match found input sizes: '[[262144]]', Culprit rank 110; ...` (maybe cut).
fn culprits(v: &str) -> Vec<Culprit> {
    let quoted = |s: &str, key: &str| -> Option<String> {
        let i = s.find(key)? + key.len();
        let rest = s[i..].trim_start().strip_prefix('\'')?;
        let end = rest.find('\'')?;
        Some(rest[..end].to_string())
    };
    v.split("Culprit rank ")
        .filter_map(|part| {
            let rank = part
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()?;
            let error_type = part
                .split_once("Error type: ")
                .map(|x| {
                    x.1.split([',', ';'])
                        .next()
                        .unwrap_or("")
                        .trim()
                        .to_string()
                })
                .unwrap_or_default();
            Some(Culprit {
                rank,
                error_type,
                expected: quoted(part, "Expected input sizes:")
                    .or_else(|| quoted(part, "Expected")),
                found: quoted(part, "found input sizes:"),
            })
        })
        .take(RANKS_MAX)
        .collect()
}

/// A dump's groups (`pg_config`, `pg_status`) and each group's first pending entry.
pub fn dump_from_json(v: &Json, rank: Option<u32>, q: &Quote) -> Vec<FrPgStatus> {
    let (Some(status), entries) = (v.get("pg_status"), v.get("entries")) else {
        return vec![];
    };
    let version = v.get("version").and_then(Json::str).map(str::to_string);
    let entries = entries.map_or(&[][..], Json::arr);
    let mut out = vec![];
    for (pg, st) in status.obj() {
        let desc = v
            .get("pg_config")
            .and_then(|c| c.get(pg))
            .and_then(|c| c.get("desc"))
            .and_then(Json::str)
            .map(str::to_string);
        let mine: Vec<&Json> = entries
            .iter()
            .filter(|e| {
                e.get("pg_id")
                    .and_then(Json::u64)
                    .map(|x| x.to_string())
                    .as_deref()
                    == Some(pg)
            })
            .collect();
        let pending = mine.iter().find(|e| {
            e.get("state").and_then(Json::str) != Some("completed")
                && e.get("is_p2p").and_then(Json::bool) != Some(true)
        });
        let pending = pending.map(|e| {
            (
                e.get("collective_seq_id").and_then(Json::u64).unwrap_or(0),
                e.get("profiling_name")
                    .and_then(Json::str)
                    .unwrap_or("")
                    .to_string(),
                e.get("input_sizes").map(Json::compact).unwrap_or_default(),
            )
        });
        out.push(FrPgStatus {
            rank,
            pg: pg.clone(),
            desc,
            last_enqueued: st.get("last_enqueued_collective").and_then(Json::i64),
            last_started: st.get("last_started_collective").and_then(Json::i64),
            last_completed: st.get("last_completed_collective").and_then(Json::i64),
            pending,
            entries: mine.len(),
            version: version.clone(),
            at: q.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<FrCollective> {
        let mut f = FrText::default();
        let mut out = vec![];
        for (i, l) in text.lines().enumerate() {
            out.extend(f.line("f", i + 1, l));
        }
        out.extend(f.finish());
        out
    }

    #[test]
    fn fr_analyzer_block_and_cut_culprits() {
        let c = read(
            "Not all ranks joining collective 5 at entry 4\ngroup info: 0:default_pg\ncollective: nccl:all_reduce\nmissing ranks: {1}\nexpected ranks: 2\ncollective stack trace:\n  <module> at /x/crash.py:44\n",
        );
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].seq, c[0].missing.clone()), (Some(5), vec![1]));
        assert_eq!(c[0].world, Some(2));
        assert_eq!(c[0].stack, vec!["<module> at /x/crash.py:44"]);
        let e = read(
            "Collective 39 at entry 38 errors\nerror msg: Culprit rank 22; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[1025]]' does not match found input sizes: '[[262144]]', Culprit rank 110; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[1025]]' does not match found",
        );
        assert_eq!(e[0].culprits.len(), 2);
        assert_eq!(e[0].culprits[0].found.as_deref(), Some("[[262144]]"));
        assert_eq!(e[0].culprits[1].found, None);
        assert_eq!(e[0].culprits[1].expected.as_deref(), Some("[[1025]]"));
    }

    #[test]
    fn fr_side_by_side_and_db_table() {
        let j = read(
            "Rank 0        Rank 1\n------------  ------------\nall_reduce(a)  all_reduce(a)\nbroadcast(b)\n",
        );
        assert_eq!(j[0].missing, vec![1]);
        assert_eq!(j[0].seq, Some(2));
        assert_eq!(j[0].op.as_deref(), Some("broadcast"));
        let d = read(
            "--- Collectives ---\n  id  group_id  pass_check  collective_seq_id  collective_name  collective_state  missing_ranks\n   4  main_comm   True   4   nccl:all_reduce   scheduled   {1}    ← MISMATCH\n",
        );
        assert_eq!(d[0].missing, vec![1]);
        assert_eq!(d[0].seq, Some(4));
    }
}
