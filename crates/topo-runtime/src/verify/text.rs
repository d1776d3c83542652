//! `topo verify`'s text: nccl-tests' table (its column names, order and units, the
//! out-of-place and in-place halves under their titles), followed by topo's columns (the
//! algorithm, protocol and channels it ran, the predicted time and busbw, measured/predicted;
//! on the CUDA backend with `--copy-ceiling` and every rank on one GPU, the copy ceiling in
//! busbw and measured/ceiling, a group the other backends' text does not have).
//!
//! The whole row is about 165 columns. When it does not fit the width, each collective's
//! table is split into blocks of whole column groups: the first block is nccl-tests' own left
//! part (size, count, type, redop, root and the out-of-place figures), every further block
//! repeats the size column so that its rows can be matched. Comment lines wrap under `#`.

use super::{MODEL_MIN_BYTES, MODEL_TOLERANCE, Measured, VerifyReport, VerifyRow};
use crate::hostmodel::{NEAR_MAX_NS, PLACEMENT_MAX_NS, Placement};
use std::fmt::Write;

/// One group of columns: the title printed above it, the spaces before it, and its columns
/// as (name, unit, width).
struct Group {
    title: &'static str,
    gap: usize,
    cols: &'static [(&'static str, &'static str, usize)],
}

const MEASURED: &[(&str, &str, usize)] = &[
    ("time", "(us)", 8),
    ("algbw", "(GB/s)", 7),
    ("busbw", "(GB/s)", 7),
    ("#wrong", "", 6),
];

/// The row's identity (nccl-tests' first five columns), the size alone for later blocks, and
/// the groups that follow it, in nccl-tests' order then topo's.
const KEY: Group = Group {
    title: "",
    gap: 0,
    cols: &[
        ("size", "(B)", 11),
        ("count", "(elements)", 12),
        ("type", "", 8),
        ("redop", "", 6),
        ("root", "", 5),
    ],
};
const SIZE: Group = Group {
    title: "",
    gap: 0,
    cols: &[("size", "(B)", 11)],
};
const GROUPS: [Group; 5] = [
    Group {
        title: "out-of-place",
        gap: 2,
        cols: MEASURED,
    },
    Group {
        title: "in-place",
        gap: 2,
        cols: MEASURED,
    },
    Group {
        title: "topo ran",
        gap: 2,
        cols: &[("algo", "", 6), ("proto", "", 6), ("ch", "", 2)],
    },
    Group {
        title: "topo predicted",
        gap: 2,
        cols: &[
            ("pred", "(us)", 8),
            ("p.busbw", "(GB/s)", 7),
            ("ratio", "m/p", 6),
            ("place", "", 6),
        ],
    },
    Group {
        title: "copy ceiling",
        gap: 2,
        cols: &[("ceiling", "(GB/s)", 7), ("ratio", "m/c", 5)],
    },
];

/// The index of the copy-ceiling group in [`GROUPS`].
const CEILING: usize = 4;

/// The groups `rows` have: all but the copy ceiling's unless a row has one.
fn present(rows: &[VerifyRow]) -> Vec<usize> {
    (0..GROUPS.len())
        .filter(|&g| g != CEILING || rows.iter().any(|r| r.ceiling_busbw_gbps.is_some()))
        .collect()
}

impl Group {
    /// Columns the group takes after the line's first character with its columns `w` wide,
    /// its gap included unless it leads the line.
    fn width_of(&self, w: &[usize], leading: bool) -> usize {
        let cols: usize = w.iter().sum::<usize>() + w.len() - 1;
        cols + if leading { 0 } else { self.gap }
    }

    /// [`width_of`](Self::width_of) at the columns' own widths.
    #[cfg(test)]
    fn width(&self, leading: bool) -> usize {
        self.width_of(&self.own(), leading)
    }

    fn own(&self) -> Vec<usize> {
        self.cols.iter().map(|c| c.2).collect()
    }

    /// The columns' widths, widened to the widest of `cells` (a slow run's time can take
    /// more than nccl-tests' eight columns).
    fn fit(&self, cells: impl Iterator<Item = Vec<String>>) -> Vec<usize> {
        let mut w = self.own();
        for row in cells {
            for (x, c) in w.iter_mut().zip(row) {
                *x = (*x).max(c.len());
            }
        }
        w
    }
}

/// Column widths of the key and of each of [`GROUPS`] over `rows`.
fn widths(rows: &[VerifyRow]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let key = KEY.fit(rows.iter().map(|r| cells(r, None)));
    let groups = (0..GROUPS.len())
        .map(|g| GROUPS[g].fit(rows.iter().map(|r| cells(r, Some(g)))))
        .collect();
    (key, groups)
}

/// The cells of `r` for group `g` of [`GROUPS`] (or the key with `None`).
fn cells(r: &VerifyRow, g: Option<usize>) -> Vec<String> {
    let measured = |m: Option<Measured>| match m {
        Some(m) => vec![
            format!("{:.2}", m.time_us),
            format!("{:.2}", m.algbw_gbps),
            format!("{:.2}", m.busbw_gbps),
            m.wrong.map_or("N/A".to_string(), |w| w.to_string()),
        ],
        None => vec!["N/A".into(); 4],
    };
    match g {
        None => vec![
            r.bytes.to_string(),
            r.count.to_string(),
            r.dtype.name().to_string(),
            r.redop.map_or("none", |o| o.name()).to_string(),
            r.root.to_string(),
        ],
        Some(0) => measured(Some(r.out_of_place)),
        Some(1) => measured(r.in_place),
        Some(2) => vec![
            r.algo.macro_name().to_string(),
            r.proto.macro_name().to_string(),
            r.nchannels.to_string(),
        ],
        Some(CEILING) => match r.ceiling_busbw_gbps {
            Some(c) if c > 0.0 => vec![
                format!("{c:.2}"),
                format!("{:.2}", r.out_of_place.busbw_gbps / c),
            ],
            _ => vec!["-".into(); 2],
        },
        _ => {
            let mut v = match (r.predicted_time_us, r.predicted_busbw_gbps) {
                (Some(t), Some(b)) => vec![
                    format!("{t:.2}"),
                    format!("{b:.2}"),
                    format!("{:.2}", r.out_of_place.time_us / t),
                ],
                _ => vec!["-".into(); 3],
            };
            v.push(place_cell(r));
            v
        }
    }
}

/// The placement the probes saw, `*` after it when calibration had no fit of it (the pooled
/// fit priced the row); `-` where it is not probed.
fn place_cell(r: &VerifyRow) -> String {
    match r.placement {
        Some(p) if unmatched(r) => format!("{}*", p.name()),
        Some(p) => p.name().to_string(),
        None => "-".into(),
    }
}

/// A near or far row priced by the pooled fit: calibration has no fit of that placement.
fn unmatched(r: &VerifyRow) -> bool {
    r.predicted_time_us.is_some()
        && r.priced_as.is_none()
        && r.placement.is_some_and(|p| Placement::FITTED.contains(&p))
}

/// The groups of [`GROUPS`] in each block: as many whole groups as fit after the key (the
/// first block, 80 columns with the out-of-place group) or the size column (the others); at
/// least one group in every block but the first.
fn blocks(
    width: usize,
    key: &[usize],
    groups: &[Vec<usize>],
    present: &[usize],
) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = vec![];
    let mut cur = vec![];
    let mut used = 1 + KEY.width_of(key, true);
    for &i in present {
        let w = GROUPS[i].width_of(&groups[i], false);
        if (out.is_empty() || !cur.is_empty()) && used + w > width {
            out.push(std::mem::take(&mut cur));
            used = 1 + SIZE.width_of(&key[..1], true);
        }
        cur.push(i);
        used += w;
    }
    out.push(cur);
    out
}

/// One line: `lead` (`#` for the header, a space for a row), then each group's cells right
/// aligned to its columns.
/// A block's groups with their column widths.
type Parts<'a> = [(&'a Group, &'a [usize])];

fn line(lead: char, parts: &Parts, cells: &[Vec<String>]) -> String {
    let mut s = String::from(lead);
    for (i, ((g, w), cells)) in parts.iter().zip(cells).enumerate() {
        if i > 0 {
            s.push_str(&" ".repeat(g.gap));
        }
        for (j, (c, w)) in cells.iter().zip(w.iter()).enumerate() {
            if j > 0 {
                s.push(' ');
            }
            let _ = write!(s, "{c:>w$}");
        }
    }
    s.trim_end().to_string()
}

/// The title line above a block (`out-of-place` over its columns, as nccl-tests prints it).
fn titles(parts: &Parts) -> String {
    let mut s = String::from("#");
    for (i, (g, w)) in parts.iter().enumerate() {
        let w = g.width_of(w, i == 0);
        let _ = write!(s, "{:>w$}", g.title);
    }
    s.trim_end().to_string()
}

/// `text` after `# `, wrapped at spaces to `width` with `#   ` before every further line.
fn comment(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut cur = String::from("#");
    let mut fresh = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if !fresh && cur.len() + 1 + word.len() > width {
            out.push_str(&cur);
            out.push('\n');
            cur = String::from("#  ");
        }
        cur.push(' ');
        cur.push_str(word);
        fresh = false;
    }
    out.push_str(&cur);
    out.push('\n');
    out
}

/// One block of a collective's table: titles, names, units, then a line per size.
fn block(s: &mut String, rows: &[VerifyRow], parts: &Parts, groups: &[usize]) {
    let head = |f: fn(&(&str, &str, usize)) -> String| -> String {
        let cells: Vec<Vec<String>> = parts
            .iter()
            .map(|(g, w)| g.cols.iter().take(w.len()).map(f).collect())
            .collect();
        line('#', parts, &cells)
    };
    let _ = writeln!(s, "{}", titles(parts));
    let _ = writeln!(s, "{}", head(|c| c.0.to_string()));
    let _ = writeln!(s, "{}", head(|c| c.1.to_string()));
    let nkey = parts[0].1.len();
    for r in rows {
        let mut key_cells = cells(r, None);
        key_cells.truncate(nkey);
        let row: Vec<Vec<String>> = std::iter::once(key_cells)
            .chain(groups.iter().map(|&g| cells(r, Some(g))))
            .collect();
        let _ = writeln!(s, "{}", line(' ', parts, &row));
    }
}

impl VerifyReport {
    /// nccl-tests style text on one line per size (about 165 columns): a header, one line per
    /// size, `# Avg bus bandwidth` last.
    pub fn render_text(&self) -> String {
        self.render_text_fit(usize::MAX)
    }

    /// [`render_text`](Self::render_text) fitted to `width` columns: the table split into
    /// blocks of column groups where the whole row does not fit, comments wrapped.
    pub fn render_text_fit(&self, width: usize) -> String {
        let mut s = String::new();
        s.push_str(&comment(
            &format!(
                "topo verify: backend {}, transport {}, launch {}, {} ranks",
                self.backend,
                self.transport.name(),
                self.launch,
                self.ranks
            ),
            width,
        ));
        if let Some(m) = &self.foreign_machine {
            s.push_str(&comment(
                &format!(
                    "schedule of {m} run on this host: the timings are this host's, not that machine's"
                ),
                width,
            ));
        }
        for n in &self.notes {
            s.push_str(&comment(n, width));
        }
        let (key_w, group_w) = widths(&self.rows);
        let layout = blocks(width, &key_w, &group_w, &present(&self.rows));
        let mut start = 0;
        while start < self.rows.len() {
            let coll = self.rows[start].collective;
            let end = self.rows[start..]
                .iter()
                .position(|r| r.collective != coll)
                .map_or(self.rows.len(), |k| start + k);
            let _ = writeln!(s, "#\n# collective: {}", coll.cli_name());
            for (b, groups) in layout.iter().enumerate() {
                if b > 0 {
                    s.push_str("#\n");
                }
                let key = if b == 0 {
                    (&KEY, &key_w[..])
                } else {
                    (&SIZE, &key_w[..1])
                };
                let parts: Vec<(&Group, &[usize])> = std::iter::once(key)
                    .chain(groups.iter().map(|&g| (&GROUPS[g], &group_w[g][..])))
                    .collect();
                block(&mut s, &self.rows[start..end], &parts, groups);
            }
            start = end;
        }
        if self.rows.iter().any(|r| r.placement.is_some()) {
            s.push_str(&comment(&self.placement_note(), width));
        }
        if let Some((within, total, worst)) = self.model_agreement(MODEL_MIN_BYTES, MODEL_TOLERANCE)
        {
            s.push_str(&comment(
                &format!(
                    "Model: {within} of {total} rows >= 1 MiB within {:.0}% of the predicted busbw (worst: measured/predicted busbw {worst:.2})",
                    MODEL_TOLERANCE * 100.0
                ),
                width,
            ));
        }
        let wrong = self.wrong_total();
        let _ = writeln!(
            s,
            "# Out of bounds values : {} {}",
            wrong,
            if wrong == 0 { "OK" } else { "FAILED" }
        );
        let _ = writeln!(s, "# Avg bus bandwidth    : {:.4} ", self.avg_busbw_gbps());
        self.nccl_comparison(&mut s);
        s
    }

    /// What the place column means, and which placements calibration had no fit of.
    fn placement_note(&self) -> String {
        let mut s = format!(
            "place: the ranks' cache-to-cache latency before and after the out-of-place loop, both below {NEAR_MAX_NS:.0} ns (near: cores sharing a cache) or both {NEAR_MAX_NS:.0}-{PLACEMENT_MAX_NS:.0} ns (far), loaded when either is more (the ranks did not run at once: another process held a CPU, and the time measures the scheduler), else mixed; a near or far row is predicted by calibration's fit of that placement, a mixed or loaded one by the fit of every placement."
        );
        let missing: std::collections::BTreeSet<&str> = self
            .rows
            .iter()
            .filter(|r| unmatched(r))
            .filter_map(|r| r.placement.map(|p| p.name()))
            .collect();
        if !missing.is_empty() {
            let m: Vec<&str> = missing.into_iter().collect();
            let _ = write!(
                s,
                " *: calibration measured too little in the {} placement for a fit of its own; those rows are predicted by the fit of every placement.",
                m.join(" or ")
            );
        }
        s
    }

    /// `--compare nccl`: NCCL's out-of-place figures beside topo's (68 columns).
    fn nccl_comparison(&self, s: &mut String) {
        if self.nccl.is_empty() {
            return;
        }
        let _ = writeln!(s, "#\n# --compare nccl (out-of-place busbw, GB/s)");
        let _ = writeln!(
            s,
            "#{:>13} {:>12} {:>10} {:>10} {:>10} {:>7}",
            "collective", "size", "nccl us", "nccl bw", "topo bw", "ratio"
        );
        for c in &self.nccl {
            let topo = self
                .rows
                .iter()
                .find(|r| r.collective == c.collective && r.bytes == c.bytes)
                .map_or(0.0, |r| r.out_of_place.busbw_gbps);
            let _ = writeln!(
                s,
                " {:>13} {:>12} {:>10.2} {:>10.2} {:>10.2} {:>7.2}",
                c.collective.cli_name(),
                c.bytes,
                c.time_us,
                c.busbw_gbps,
                topo,
                c.ratio
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole row fits 165 columns; 100 splits after the out-of-place half, 80 once more,
    /// and every block but the first leads with the size.
    #[test]
    fn blocks_follow_the_width() {
        let key = KEY.own();
        let g: Vec<Vec<usize>> = GROUPS.iter().map(Group::own).collect();
        let old = [0, 1, 2, 3];
        let blocks = |w| blocks(w, &key, &g, &old);
        assert_eq!(blocks(usize::MAX), vec![vec![0, 1, 2, 3]]);
        assert_eq!(blocks(165), vec![vec![0, 1, 2, 3]]);
        assert_eq!(blocks(160), vec![vec![0, 1, 2], vec![3]]);
        assert_eq!(blocks(100), vec![vec![0], vec![1, 2, 3]]);
        assert_eq!(blocks(80), vec![vec![0], vec![1, 2], vec![3]]);
        assert_eq!(blocks(40).first(), Some(&vec![]));
        // A wide time widens its column, and the split follows.
        let mut wide = g.clone();
        wide[0][0] = 10;
        assert_eq!(
            super::blocks(80, &key, &wide, &old),
            vec![vec![], vec![0, 1], vec![2, 3]]
        );
        assert_eq!(1 + KEY.width(true) + GROUPS[0].width(false), 80);
        let all = 1 + KEY.width(true) + old.iter().map(|&g| GROUPS[g].width(false)).sum::<usize>();
        assert!(all <= 165, "{all}");
        // The copy ceiling's group, where rows have it, goes last and on a block of its own
        // when the rest fills the line.
        let five = [0, 1, 2, 3, CEILING];
        assert_eq!(
            super::blocks(usize::MAX, &key, &g, &five),
            vec![vec![0, 1, 2, 3, 4]]
        );
        assert_eq!(
            super::blocks(165, &key, &g, &five),
            vec![vec![0, 1, 2, 3], vec![4]]
        );
    }

    /// How the CUDA backend's text looks with `--copy-ceiling` on one GPU (issue 47), shown
    /// here because no GPU runs in CI: the ceiling and measured/ceiling after the prediction,
    /// the README's 2-rank figures (179 GB/s against 2 x 2076 / (3 x 2) = 692 GB/s: 0.26).
    #[test]
    fn the_copy_ceiling_follows_each_gpu_row() {
        use crate::transport::TransportKind;
        use crate::types::{Algorithm, Collective, DataType, Protocol, Reduction};
        let row = |bytes: usize, busbw: f64| VerifyRow {
            collective: Collective::AllReduce,
            bytes,
            count: bytes / 4,
            dtype: DataType::F32,
            redop: Some(Reduction::Sum),
            root: -1,
            algo: Algorithm::Ring,
            proto: Protocol::Simple,
            nchannels: 22,
            out_of_place: Measured {
                time_us: bytes as f64 / (busbw * 1e3),
                algbw_gbps: busbw,
                busbw_gbps: busbw,
                wrong: Some(0),
            },
            in_place: None,
            predicted_time_us: None,
            predicted_busbw_gbps: None,
            c2c_ns: None,
            placement: None,
            priced_as: None,
            ceiling_busbw_gbps: Some(crate::cuda::model::ceiling_busbw(
                2076.0,
                Collective::AllReduce,
                2,
            )),
        };
        let mut rep = VerifyReport {
            backend: "cuda".into(),
            launch: "threads".into(),
            transport: TransportKind::CudaP2p,
            ranks: 2,
            rows: vec![row(1 << 20, 20.0), row(256 << 20, 179.0)],
            foreign_machine: None,
            notes: vec![],
            nccl: vec![],
        };
        let text = rep.render_text();
        let tail: Vec<&str> = text
            .lines()
            .skip(3)
            .map(|l| &l[l.len().saturating_sub(46)..])
            .collect();
        assert_eq!(
            tail[..5],
            [
                "                 topo predicted   copy ceiling",
                "     pred p.busbw  ratio  place  ceiling ratio",
                "     (us)  (GB/s)    m/p          (GB/s)   m/c",
                "        -       -      -      -   692.00  0.03",
                "        -       -      -      -   692.00  0.26",
            ],
            "{text}"
        );
        // At 80 columns the group joins the in-place block after the size.
        let narrow = rep.render_text_fit(80);
        assert!(narrow.contains("ceiling ratio\n"), "{narrow}");
        assert!(narrow.contains("  692.00  0.26\n"), "{narrow}");
        assert!(narrow.lines().all(|l| l.len() <= 80), "{narrow}");
        // Without a ceiling (the host backend, several GPUs) the text has no such group.
        for r in &mut rep.rows {
            r.ceiling_busbw_gbps = None;
        }
        assert!(!rep.render_text().contains("ceiling"));
    }

    #[test]
    fn comments_wrap_under_the_hash() {
        let c = comment(
            "Model: 3 of 4 rows >= 1 MiB within 25% of the predicted busbw (worst: measured/predicted busbw 0.85)",
            60,
        );
        assert!(
            c.lines().all(|l| l.len() <= 60 && l.starts_with('#')),
            "{c}"
        );
        assert!(c.lines().nth(1).unwrap().starts_with("#   "), "{c}");
        assert_eq!(comment("short", 60), "# short\n");
    }
}
