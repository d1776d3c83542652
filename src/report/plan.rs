//! The text rendering of a plan: NCCL's own log lines where NCCL has them (channel summary,
//! graphs, rings, trees, TUNING table), then topo's per-size table and verdicts.

use crate::util::{Style, human_size};
use std::collections::BTreeMap;
use std::fmt::Write;
use topo_nccl::plan::{Plan, Row};

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

fn ranks_line(r: &[usize]) -> String {
    const MAX: usize = 32;
    let shown: Vec<String> = r.iter().take(MAX).map(|x| x.to_string()).collect();
    if r.len() > MAX {
        format!("{} ... ({} ranks)", shown.join(" "), r.len())
    } else {
        shown.join(" ")
    }
}

fn size_col(b: u64) -> String {
    format!("{b:>12}")
}

fn table(out: &mut String, style: Style, rows: &[&Row], explain: bool) {
    let _ = writeln!(
        out,
        "  {:>12} {:>12}  {:<8} {:<6} {:>3} {:>11} {:>11} {:>11}",
        "size", "count", "algo", "proto", "nch", "time(us)", "algbw(GB/s)", "busbw(GB/s)"
    );
    let mut prev: Option<(&str, &str)> = None;
    for r in rows {
        let choice = (r.algo.as_str(), r.proto.as_str());
        let algo = format!("{:<8}", r.algo);
        let proto = format!("{:<6}", r.proto);
        let (algo, proto) = if prev.is_some_and(|p| p != choice) {
            (style.cyan(&algo), style.cyan(&proto))
        } else {
            (algo, proto)
        };
        let _ = writeln!(
            out,
            "  {} {:>12}  {} {} {:>3} {:>11.2} {:>11.2} {:>11.2}",
            size_col(r.bytes),
            r.count,
            algo,
            proto,
            r.nchannels,
            r.time_us,
            r.algbw_gbps,
            r.busbw_gbps
        );
        if explain {
            for e in &r.explain {
                let _ = writeln!(out, "  {:>12}   {}", "", style.dim(e));
            }
            if let Some(ru) = &r.runner_up {
                let _ = writeln!(
                    out,
                    "  {:>12}   {}",
                    "",
                    style.dim(&format!("runner-up: {ru}"))
                );
            }
        }
        prev = Some(choice);
    }
}

pub fn render(p: &Plan, style: Style) -> String {
    let mut out = String::new();
    let origin = p
        .source
        .origin
        .clone()
        .unwrap_or_else(|| p.source.kind.clone());
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
    for w in &p.warnings {
        let _ = writeln!(out, "{} {w}", style.yellow("warning:"));
    }

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
        let _ = writeln!(
            out,
            "  Channel {}/{:02} : {}",
            channel_list(&cs),
            total,
            ranks_line(r)
        );
    }
    if let Some(t) = p.log.iter().find(|l| l.starts_with("Trees")) {
        heading(
            &mut out,
            style,
            "Trees (rank 0, as NCCL logs them: down0/down1/down2->rank->up)",
        );
        let short: String = t.chars().take(400).collect();
        let _ = writeln!(out, "  {short}{}", if t.len() > 400 { " ..." } else { "" });
    }

    heading(&mut out, style, "Transports");
    let _ = writeln!(out, "  {}", p.transport_summary.render());
    if let Some(l) = &p.p2p_type {
        let _ = writeln!(out, "  {l}");
    }
    if let Some(m) = p.transport_matrix.first() {
        for l in m.lines() {
            let _ = writeln!(out, "  {l}");
        }
        if p.transport_matrix.len() > 1 {
            // The cells, without the host line, the header and the row labels (ranks differ).
            fn body(x: &str) -> Vec<Vec<&str>> {
                x.lines()
                    .skip(2)
                    .map(|l| l.split_whitespace().skip(1).collect())
                    .collect()
            }
            let same = p.transport_matrix.iter().all(|x| body(x) == body(m));
            let _ = writeln!(
                out,
                "  ({} more node(s){})",
                p.transport_matrix.len() - 1,
                if same {
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
    let mut reasons: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    for t in shown {
        reasons
            .entry((t.transport.as_str(), t.reason.as_str()))
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
            *anomalies.entry(a.as_str()).or_default() += 1;
        }
    }
    for (a, n) in anomalies {
        let _ = writeln!(out, "  {} {a} ({n} pairs)", style.red("anomaly:"));
    }

    heading(
        &mut out,
        style,
        "Cost table (NCCL TUNING log layout: latency us / algorithm bandwidth GB/s)",
    );
    for l in p.tuning_log.lines() {
        let _ = writeln!(out, "  {l}");
    }

    let mut by_func: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    let mut order: Vec<&str> = vec![];
    for r in &p.table {
        if !order.contains(&r.collective.as_str()) {
            order.push(&r.collective);
        }
        by_func.entry(&r.collective).or_default().push(r);
    }
    for f in order {
        let rows = &by_func[f];
        heading(
            &mut out,
            style,
            &format!(
                "{f}: {} ranks, {} to {} (predicted, busbw as nccl-tests computes it)",
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
            let _ = writeln!(out, "  {l}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ranges() {
        assert_eq!(channel_list(&[0, 1, 2, 5, 7, 8]), "00-02,05,07-08");
        let rings = vec![vec![0, 1], vec![0, 1], vec![1, 0]];
        let g = ring_groups(&rings);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].0, vec![0, 1]);
    }
}
