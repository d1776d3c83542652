//! The text rendering of a plan: NCCL's own log lines where NCCL has them (channel summary,
//! graphs, rings, trees, TUNING table), then topo's per-size table and verdicts. Every line
//! fits `style.width`: NCCL's lines wrap between their words or split into several lines of
//! NCCL's own format (`Trees`), tables split into blocks of columns.

use crate::Style;
use crate::fit;
use crate::fit::{Cell, Paint};
use crate::util::human_size;
use std::collections::BTreeMap;
use std::fmt::Write;
use topo_model::message::Severity;
use topo_nccl::plan::{Plan, Row};
use topo_nccl::transport::Transport;

fn heading(out: &mut String, style: Style, title: &str) {
    let _ = writeln!(out, "\n{}", style.bold(title));
}

/// Identical rings are listed once with the channels that use them.
fn ring_groups(rings: &[Vec<usize>]) -> Vec<(Vec<usize>, &Vec<usize>)> {
    let mut groups: Vec<(Vec<usize>, &Vec<usize>)> = vec![];
    for (c, r) in rings.iter().enumerate() {
        match groups.iter_mut().find(|(_, g)| *g == r) {
            Some((cs, _)) => cs.push(c),
            None => groups.push((vec![c], r)),
        }
    }
    groups
}

fn channel_list(cs: &[usize]) -> String {
    let mut parts = vec![];
    let mut i = 0;
    while i < cs.len() {
        let mut j = i;
        while j + 1 < cs.len() && cs[j + 1] == cs[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            format!("{:02}", cs[i])
        } else {
            format!("{:02}-{:02}", cs[i], cs[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// One ring as NCCL logs it (`Channel 00/16 : 0 1 2 ...`), every rank listed, wrapped at
/// the width with the ranks continuing under the first one.
fn ring_lines(head: &str, r: &[usize], width: usize) -> Vec<String> {
    let ranks: Vec<String> = r.iter().map(|x| x.to_string()).collect();
    let cont = " ".repeat(fit::fit_len(head).min(width / 2));
    fit::wrap_prefixed(head, &cont, &ranks.join(" "), width)
}

/// NCCL's `Trees [0] a/b/c->r->u [1] ...` line split into as many lines as the width needs,
/// each still starting with `Trees` and holding whole `[channel] down->rank->up` entries, so
/// every line is one NCCL could have printed and `grep Trees` finds them all.
fn trees_lines(indent: &str, line: &str, width: usize) -> Vec<String> {
    let Some(rest) = line.strip_prefix("Trees") else {
        return fit::wrap(&format!("{indent}{line}"), width, 4);
    };
    let entries: Vec<String> = rest
        .split(" [")
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| {
            if e.starts_with('[') {
                e.to_string()
            } else {
                format!("[{e}")
            }
        })
        .collect();
    let mut out: Vec<String> = vec![];
    let mut cur = format!("{indent}Trees");
    let mut n = 0;
    for e in entries {
        if n > 0 && fit::fit_len(&cur) + 1 + fit::fit_len(&e) > width {
            out.push(std::mem::replace(&mut cur, format!("{indent}Trees")));
            n = 0;
        }
        cur.push(' ');
        cur.push_str(&e);
        n += 1;
    }
    out.push(cur);
    out
}

/// The per-size table through comfy-table, numbers aligned right; with `--explain` each
/// row's reasons follow it, indented under the algorithm.
fn table(out: &mut String, style: Style, rows: &[&Row], explain: bool) {
    let mut cells: Vec<Vec<Cell>> = vec![];
    let mut prev = None;
    for r in rows {
        let choice = (r.algo, r.proto);
        let paint = if prev.is_some_and(|p| p != choice) {
            Paint::Cyan
        } else {
            Paint::None
        };
        cells.push(vec![
            r.bytes.to_string().into(),
            r.count.to_string().into(),
            Cell::paint(r.algo.name(), paint),
            Cell::paint(r.proto.name(), paint),
            r.nchannels.to_string().into(),
            format!("{:.2}", r.time_us).into(),
            format!("{:.2}", r.algbw_gbps).into(),
            format!("{:.2}", r.busbw_gbps).into(),
            format!("{:.2}", r.expected_busbw_gbps).into(),
        ]);
        prev = Some(choice);
    }
    let header = [
        "size",
        "count",
        "algo",
        "proto",
        "nch",
        "time(us)",
        "algbw(GB/s)",
        "busbw(GB/s)",
        "expected(GB/s)",
    ];
    let text = fit::table_aligned("  ", &header, &cells, &[0, 1, 4, 5, 6, 7, 8], style);
    let mut lines = text.lines();
    if let Some(h) = lines.next() {
        let _ = writeln!(out, "{h}");
    }
    for (line, r) in lines.zip(rows) {
        let _ = writeln!(out, "{line}");
        if !explain {
            continue;
        }
        let ru = r.runner_up.as_ref().map(|ru| format!("runner-up: {ru}"));
        for e in r.explain.iter().chain(&ru) {
            for l in fit::wrap_prefixed("      ", "        ", e, style.width) {
                let _ = writeln!(out, "{}", style.dim(&l));
            }
        }
    }
}

/// NCCL's TUNING table (rank 0's log lines, as `topo_nccl::tuning::render_tuning_log`
/// writes them) laid out again to fit `style.width`: the same figures, one column per
/// (algorithm, protocol), as many algorithms per block as fit. NCCL's own layout puts three
/// algorithms in every block (160 columns) and prints nine protocol cells over a last
/// block of one algorithm; here each algorithm has its three.
fn cost_table(log: &str, style: Style) -> String {
    struct Algorithm {
        name: String,
        // (row label, three cells): Protocol, Max NThreads, then one row per collective.
        rows: Vec<(String, Vec<String>)>,
    }
    let mut algos: Vec<Algorithm> = vec![];
    let mut block: Vec<usize> = vec![];
    for line in log.lines() {
        let mut parts = line.split('|').map(str::trim);
        let label = parts.next().unwrap_or_default().to_string();
        let cells: Vec<String> = parts
            .filter(|c| !c.is_empty())
            .map(|c| c.split('/').map(str::trim).collect::<Vec<_>>().join("/"))
            .collect();
        if label == "Algorithm" {
            block.clear();
            for name in cells {
                block.push(algos.len());
                algos.push(Algorithm { name, rows: vec![] });
            }
            continue;
        }
        for (k, &a) in block.iter().enumerate() {
            let three: Vec<String> = cells.iter().skip(3 * k).take(3).cloned().collect();
            algos[a].rows.push((label.clone(), three));
        }
    }
    let Some(first) = algos.first() else {
        return String::new();
    };
    let labels: Vec<String> = first.rows.iter().map(|r| r.0.clone()).collect();
    let mut rows: Vec<Vec<Cell>> = vec![];
    let mut head = vec![Cell::paint("Algorithm", Paint::Bold)];
    for a in &algos {
        head.push(Cell::paint(a.name.as_str(), Paint::Bold));
        head.extend([Cell::default(), Cell::default()]);
    }
    rows.push(head);
    for (i, l) in labels.iter().enumerate() {
        let mut r = vec![Cell::paint(l.as_str(), Paint::Bold)];
        for a in &algos {
            let three = a.rows.get(i).map(|x| x.1.clone()).unwrap_or_default();
            for k in 0..3 {
                r.push(three.get(k).cloned().unwrap_or_default().into());
            }
        }
        rows.push(r);
    }
    // Blocks break only between algorithms: group each algorithm's three columns.
    let ncol = rows[0].len();
    let right: Vec<usize> = (1..ncol).collect();
    let w = fit::fit_widths(&rows);
    let gap = 2;
    let fixed = 2 + w[0] + gap;
    let mut blocks: Vec<Vec<usize>> = vec![];
    let mut used = fixed;
    for a in 0..algos.len() {
        let cols: Vec<usize> = (1 + 3 * a..4 + 3 * a).collect();
        let aw: usize = cols.iter().map(|&c| w[c] + gap).sum();
        match blocks.last_mut() {
            Some(b) if used + aw <= style.width + gap => {
                b.extend(cols);
                used += aw;
            }
            _ => {
                blocks.push(cols);
                used = fixed + aw;
            }
        }
    }
    let mut out = String::new();
    for (i, cols) in blocks.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let sel: Vec<usize> = std::iter::once(0).chain(cols.iter().copied()).collect();
        let part: Vec<Vec<Cell>> = rows
            .iter()
            .map(|r| {
                sel.iter()
                    .map(|&c| r.get(c).cloned().unwrap_or_default())
                    .collect()
            })
            .collect();
        let right: Vec<usize> = (1..sel.len()).filter(|c| right.contains(c)).collect();
        out.push_str(&fit::grid("  ", &part, &right, gap, style));
    }
    out
}

/// A node's transport matrix as the model writes it, or in blocks of whole columns that
/// repeat the row labels when it is wider than the terminal.
fn transport_matrix(m: &str, style: Style) -> String {
    if m.lines().all(|l| fit::fit_len(l) + 2 <= style.width) {
        return m.lines().map(|l| format!("  {l}\n")).collect();
    }
    let mut lines = m.lines();
    let mut out = String::new();
    if let Some(h) = lines.next() {
        out.push_str(&format!("  {h}\n"));
    }
    let mut rows: Vec<Vec<Cell>> = vec![];
    if let Some(h) = lines.next() {
        rows.push(
            std::iter::once(String::new())
                .chain(h.split_whitespace().map(str::to_string))
                .map(Cell::new)
                .collect(),
        );
    }
    rows.extend(lines.map(|l| l.split_whitespace().map(Cell::new).collect()));
    out.push_str(&fit::column_blocks("  ", &rows, 1, &[], 2, style));
    out
}

/// The plan's first lines: machine, NCCL version, stated facts, MNNVL, warnings and notes.
fn header(out: &mut String, p: &Plan, style: Style) {
    let origin = p
        .source
        .origin
        .clone()
        .unwrap_or_else(|| p.source.kind.to_string());
    let _ = writeln!(
        out,
        "{} {} ({}): {} rank(s) on {} node(s), {}{}",
        style.bold("topo plan"),
        origin,
        p.source.kind,
        p.nranks,
        p.nnodes,
        p.placement,
        p.gpu.as_ref().map(|g| format!(", {g}")).unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "NCCL {} ({}){}",
        p.nccl_version,
        p.nccl_version_source,
        if p.nccl_version_documented {
            ""
        } else {
            "; constants inherited from the nearest documented version"
        }
    );
    for s in &p.source.stated {
        let _ = writeln!(out, "{} {s}", style.bold("stated:"));
    }
    if let Some(m) = &p.mnnvl {
        let _ = writeln!(
            out,
            "MNNVL: {} host(s) in {} NVLink clique(s) (cliqueId {:#x}, {} GPUs in rank 0's): NCCL counts each clique as one node, P2P runs over NVLink between hosts, NVLS spans the clique",
            m.hosts,
            m.cliques.len(),
            m.clique_id,
            m.clique_size
        );
    }
    // An error-severity message (`fabric-manager-not-ready`, `nccl-init-fails`) reads as one.
    let errors: Vec<&String> = p
        .messages
        .iter()
        .filter(|m| m.severity == Severity::Error)
        .map(|m| &m.text)
        .filter(|t| p.warnings.contains(t))
        .collect();
    for e in &errors {
        let _ = writeln!(out, "{} {e}", style.red("error:"));
    }
    // An info message (`hosts-gpus-differ`) is a note below, not a warning as well.
    let notes: Vec<&String> = p
        .messages
        .iter()
        .filter(|m| m.severity == Severity::Info)
        .map(|m| &m.text)
        .collect();
    let rest: Vec<String> = p
        .warnings
        .iter()
        .filter(|w| !errors.contains(w) && !notes.contains(w))
        .cloned()
        .collect();
    for w in crate::warnings::collapse_warnings(&rest) {
        let _ = writeln!(out, "{} {w}", style.yellow("warning:"));
    }
    for m in p.messages.iter().filter(|m| m.severity == Severity::Info) {
        let _ = writeln!(out, "note: {}", m.text);
    }
}

/// Transports: the summary, the P2P type line, the matrix, one line per reason, anomalies.
fn transports_section(out: &mut String, p: &Plan, style: Style) {
    heading(out, style, "Transports");
    let _ = writeln!(out, "  {}", p.transport_summary.render());
    if let Some(l) = &p.p2p_type {
        let _ = writeln!(out, "  {l}");
    }
    let m = &p.transport_matrix;
    if let Some(first) = &m.first {
        out.push_str(&transport_matrix(first, style));
        if m.others > 0 {
            let _ = writeln!(
                out,
                "  ({} more node(s){})",
                m.others,
                if m.identical {
                    ", identical"
                } else {
                    ", see --format json"
                }
            );
        }
    }
    // One line per distinct reason, with the pairs it covers. Reasons name ranks and NICs, so
    // on many nodes they multiply; the pairs a rank of node 0 sends on show every kind once.
    let node0 = p.ranks_per_node.first().copied().unwrap_or(p.nranks);
    let shown: Vec<_> = p
        .transports
        .iter()
        .filter(|t| p.nnodes <= 1 || t.from < node0)
        .collect();
    if p.nnodes > 1 {
        let _ = writeln!(
            out,
            "  why (pairs sent from node 0; other nodes alike, every pair in --format json):"
        );
    }
    let mut reasons: BTreeMap<(&Transport, &str), Vec<String>> = BTreeMap::new();
    for t in shown {
        reasons
            .entry((&t.transport, &*t.reason))
            .or_default()
            .push(format!("{}->{}", t.from, t.to));
    }
    for ((tr, why), pairs) in &reasons {
        let n = pairs.len();
        let who = if n <= 4 {
            pairs.join(" ")
        } else {
            format!("{n} pairs")
        };
        let _ = writeln!(out, "  {tr} ({who}): {why}");
    }
    let mut anomalies: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &p.transports {
        if let Some(a) = &t.anomaly {
            *anomalies.entry(&**a).or_default() += 1;
        }
    }
    for (a, n) in anomalies {
        let _ = writeln!(out, "  {} {a} ({n} pairs)", style.red("anomaly:"));
    }
}

pub fn render(p: &Plan, style: Style) -> String {
    let mut out = String::new();
    header(&mut out, p, style);

    heading(&mut out, style, "Channels");
    let _ = writeln!(out, "  {}", p.channels.log_line);

    heading(&mut out, style, "Graphs (NCCL's search)");
    for (name, g) in [
        ("ring", Some(&p.graphs.ring)),
        ("tree", Some(&p.graphs.tree)),
    ]
    .into_iter()
    .chain([
        ("nvls", p.graphs.nvls.as_ref()),
        ("collnet", p.graphs.collnet.as_ref()),
    ])
    .chain([("collnet_direct", p.graphs.collnet_direct.as_ref())])
    {
        let Some(g) = g else { continue };
        let _ = writeln!(out, "  {name}:");
        for l in g.log.iter().take(9) {
            let _ = writeln!(out, "    {l}");
        }
        if g.log.len() > 9 {
            let _ = writeln!(out, "    ... ({} more channel lines)", g.log.len() - 9);
        }
    }

    heading(&mut out, style, "Rings");
    let total = p.rings.len();
    for (cs, r) in ring_groups(&p.rings) {
        let head = format!("  Channel {}/{:02} : ", channel_list(&cs), total);
        for l in ring_lines(&head, r, style.width) {
            let _ = writeln!(out, "{l}");
        }
    }
    if let Some(t) = p.log.iter().find(|l| l.starts_with("Trees")) {
        heading(
            &mut out,
            style,
            "Trees (rank 0, as NCCL logs them: down0/down1/down2->rank->up)",
        );
        for l in trees_lines("  ", t, style.width) {
            let _ = writeln!(out, "{l}");
        }
    }

    transports_section(&mut out, p, style);

    heading(
        &mut out,
        style,
        "Cost table (NCCL's TUNING table: latency us / algorithm bandwidth GB/s)",
    );
    out.push_str(&cost_table(&p.tuning_log, style));

    let mut by_func: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    let mut order: Vec<&str> = vec![];
    for r in &p.table {
        let name = r.collective.cli_name();
        if !order.contains(&name) {
            order.push(name);
        }
        by_func.entry(name).or_default().push(r);
    }
    for f in order {
        let rows = &by_func[f];
        heading(
            &mut out,
            style,
            &format!(
                "{f}: {} ranks, {} to {} (NCCL's cost model; expected: calibrated to nccl-tests runs)",
                p.nranks,
                human_size(rows.first().map(|r| r.bytes).unwrap_or(0)),
                human_size(rows.last().map(|r| r.bytes).unwrap_or(0))
            ),
        );
        table(&mut out, style, rows, p.explain);
        let cross: Vec<_> = p.crossovers.iter().filter(|c| c.collective == f).collect();
        if cross.is_empty()
            && let Some(r) = rows.first()
        {
            let _ = writeln!(out, "  {}/{} at every size", r.algo, r.proto);
        }
        for c in cross {
            let _ = writeln!(
                out,
                "  crossover: {} -> {} at {} B ({})",
                c.from,
                c.to,
                c.bytes,
                human_size(c.bytes)
            );
        }
    }

    let env: Vec<_> = p.env.iter().collect();
    if !env.is_empty() {
        heading(&mut out, style, "Environment");
        for e in env {
            let origin = e
                .origin
                .as_deref()
                .map(|o| format!(" ({o})"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {}={}{origin}: {}",
                e.name,
                e.value,
                e.effect
                    .as_deref()
                    .unwrap_or("changed nothing in this plan")
            );
        }
    }
    if p.explain {
        heading(
            &mut out,
            style,
            "Cost cells (rule and constants behind each usable figure)",
        );
        for (f, algos) in &p.costs_explain {
            for (a, protos) in algos {
                for (pr, lines) in protos {
                    let _ = writeln!(out, "  {f} {a} {pr}:");
                    for l in lines {
                        let _ = writeln!(out, "    {l}");
                    }
                }
            }
        }
        heading(&mut out, style, "Predicted NCCL INFO lines");
        for l in &p.log {
            for l in trees_lines("  ", l, style.width) {
                let _ = writeln!(out, "{l}");
            }
        }
    }
    against_section(&mut out, p, style);
    faults_section(&mut out, p, style);
    // Prose and NCCL's other lines wrap between words, continuations indented.
    fit::document(&out, style.width)
}

/// A what-if's changes, one per line, or that nothing changes.
fn changes_lines(out: &mut String, changes: &[String]) {
    if changes.is_empty() {
        let _ = writeln!(
            out,
            "  nothing changes: the same channels, transports, NICs, choices and predicted times"
        );
    }
    for c in changes {
        let _ = writeln!(out, "  {c}");
    }
}

/// `--without`/`--degrade`: what the parts change against the healthy machine.
fn faults_section(out: &mut String, p: &Plan, style: Style) {
    let Some(x) = &p.faults else {
        return;
    };
    heading(
        out,
        style,
        "Failed and degraded parts, against the healthy machine",
    );
    changes_lines(out, &x.changes);
}

/// `--against V`: what the other version changes, and the version data behind it.
fn against_section(out: &mut String, p: &Plan, style: Style) {
    let Some(x) = &p.against else {
        return;
    };
    let title = format!("Against NCCL {} (from {})", x.nccl_version, p.nccl_version);
    heading(out, style, &title);
    changes_lines(out, &x.changes);
    let _ = writeln!(
        out,
        "\n  version data that differs ({} value(s), {} -> {}):",
        x.data_changes.len(),
        p.nccl_version,
        x.nccl_version
    );
    for c in &x.data_changes {
        let _ = writeln!(out, "    {c}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_split_into_lines_nccl_could_print() {
        let t = "Trees [0] 1/-1/-1->0->3 [1] -1/-1/-1->0->1 [2] 1/8/-1->0->-1 [3] 3/-1/-1->0->1";
        let l = trees_lines("  ", t, 40);
        assert!(l.len() > 1);
        for x in &l {
            assert!(x.starts_with("  Trees [") && x.chars().count() <= 40, "{x}");
        }
        let joined: Vec<&str> = l
            .iter()
            .flat_map(|x| x.split_whitespace().skip(1))
            .collect();
        assert_eq!(joined, t.split_whitespace().skip(1).collect::<Vec<_>>());
        assert_eq!(trees_lines("  ", t, 200), vec![format!("  {t}")]);
    }

    #[test]
    fn rings_list_every_rank_and_wrap() {
        let r: Vec<usize> = (0..64).collect();
        let l = ring_lines("  Channel 00/02 : ", &r, 60);
        assert!(l.iter().all(|x| x.chars().count() <= 60));
        assert!(l[1].starts_with(&" ".repeat(18)));
        let ranks: Vec<usize> = l
            .iter()
            .flat_map(|x| x.split(" : ").last().unwrap().split_whitespace())
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(ranks, r);
    }

    #[test]
    fn cost_table_blocks_fit_and_pat_has_three_cells() {
        let log = "  Algorithm   |                            Tree                  |                             PAT                  |\n\
                   \x20 Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |\n\
                   \x20Max NThreads |            512 |            640 |            512 |              0 |              0 |              0 |\n\
                   \x20   AllReduce |    25.2/  11.2 |    48.5/  80.0 |    92.4/  94.4 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |\n";
        let wide = cost_table(log, Style::default());
        assert_eq!(wide.matches("LL128").count(), 2, "{wide}");
        assert!(wide.contains("25.2/11.2") && wide.contains("92.4/94.4"));
        let narrow = cost_table(
            log,
            Style {
                width: 50,
                ..Style::default()
            },
        );
        assert_eq!(narrow.split("\n\n").count(), 2, "{narrow}");
        assert!(narrow.lines().all(|l| l.chars().count() <= 50), "{narrow}");
    }

    #[test]
    fn channel_ranges() {
        assert_eq!(channel_list(&[0, 1, 2, 5, 7, 8]), "00-02,05,07-08");
        let rings = vec![vec![0, 1], vec![0, 1], vec![1, 0]];
        let g = ring_groups(&rings);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].0, vec![0, 1]);
    }
}
