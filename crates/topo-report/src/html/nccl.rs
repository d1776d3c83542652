//! NCCL's plan: transports per GPU pair of the first node as a coloured matrix (the reason on
//! hover), the transport classes of the whole job, channels and graphs, rings and trees, the
//! per-size choice and the busbw plot.

use super::doc::{Html, Input, MAX_ROWS};
use topo_diagnose::results::{gbps, size_label};
use topo_nccl::plan::Plan;
use topo_nccl::transport::PairTransport;
use topo_vocab::Transport;

/// Ranks whose ring or tree is written out; a larger job shows its first ranks.
const MAX_RANKS_LISTED: usize = 64;
/// Channels whose ring and tree are written out.
const MAX_CHANNELS_LISTED: usize = 4;
/// GPUs of the first node drawn in the pair matrix (NVL72 trays have 4, a DGX 8; a box of 16
/// is the largest one host holds).
const MAX_MATRIX: usize = 72;

pub(super) fn render(h: &mut Html, input: &Input) -> crate::Result<()> {
    h.section("plan", "NCCL's plan");
    let Some(plan) = input.plan else {
        h.el(
            "p",
            "h-note",
            input
                .plan_note
                .as_deref()
                .unwrap_or("No plan: the machine is unknown."),
        );
        h.end_section();
        return Ok(());
    };
    h.el(
        "p",
        "",
        &format!(
            "NCCL {} ({}) · {} ranks on {} node{} · placement {}",
            plan.nccl_version,
            plan.nccl_version_source,
            plan.nranks,
            plan.nnodes,
            if plan.nnodes == 1 { "" } else { "s" },
            plan.placement
        ),
    );
    pair_matrix(h, plan);
    classes(h, plan);
    channels(h, plan);
    rings_and_trees(h, plan);
    choices(h, plan);
    if !input.panels.is_empty() {
        h.el("h3", "", "busbw against message size");
        let title = crate::svg::plot::title(plan);
        h.svg("h-plot", &crate::svg::plot::render(&title, input.panels)?);
    }
    h.end_section();
    Ok(())
}

fn kind_class(t: &Transport) -> (&'static str, &'static str) {
    match t {
        Transport::P2p(_) => ("h-p2p", "P2P"),
        Transport::Shm => ("h-shm", "SHM"),
        Transport::Net(_) => ("h-net", "NET"),
        _ => ("h-other", "?"),
    }
}

/// The first node's GPU pairs: one row per sender, one column per receiver.
fn pair_matrix(h: &mut Html, plan: &Plan) {
    let n = plan.ranks_per_node.first().copied().unwrap_or(0);
    h.el("h3", "", "Transport per GPU pair (first node)");
    if n < 2 {
        h.el("p", "h-note", "One GPU on the node: no pair.");
        return;
    }
    if n > MAX_MATRIX {
        h.el(
            "p",
            "h-note",
            &format!("{n} GPUs on the node: the classes below list the pairs."),
        );
        return;
    }
    let mut cells: Vec<Option<&PairTransport>> = vec![None; n * n];
    let mut devs: Vec<Option<i32>> = vec![None; n];
    for p in &plan.transports {
        if p.from < n && p.to < n {
            cells[p.from * n + p.to] = Some(p);
            devs[p.from] = Some(p.from_dev);
            devs[p.to] = Some(p.to_dev);
        }
    }
    let name = |r: usize| match devs[r] {
        Some(d) if d >= 0 => format!("rank {r} (GPU{d})"),
        _ => format!("rank {r}"),
    };
    h.raw("<div class=\"h-wide\"><table class=\"h-matrix h-pairs\"><thead><tr><th>from \\ to</th>");
    for r in 0..n {
        h.el("th", "", &r.to_string());
    }
    h.raw("</tr></thead>\n<tbody>\n");
    for a in 0..n {
        h.raw("<tr>");
        h.raw(&format!(
            "<th title=\"{}\">{a}</th>",
            super::doc::esc(&name(a))
        ));
        for b in 0..n {
            match cells[a * n + b] {
                _ if a == b => h.raw("<td class=\"h-self\">X</td>"),
                Some(p) => {
                    let (class, word) = kind_class(&p.transport);
                    let class = if p.anomaly.is_some() { "h-bad" } else { class };
                    let mut title = format!(
                        "{} → {}: {}{}; {}",
                        name(a),
                        name(b),
                        p.transport,
                        p.path.map(|x| format!(" over {x}")).unwrap_or_default(),
                        p.reason
                    );
                    if let Some(an) = &p.anomaly {
                        title.push_str(&format!("; anomaly: {an}"));
                    }
                    h.raw(&format!(
                        "<td class=\"{class}\" title=\"{}\">{word}</td>",
                        super::doc::esc(&title)
                    ));
                }
                None => h.raw("<td class=\"h-other\" title=\"not modelled\">-</td>"),
            }
        }
        h.raw("</tr>\n");
    }
    h.raw("</tbody></table></div>\n<p class=\"h-legend\">");
    for (c, t) in [
        ("h-p2p", "P2P"),
        ("h-shm", "SHM: through host memory"),
        ("h-net", "NET"),
        ("h-bad", "NVLink not used as such"),
    ] {
        h.el("span", c, t);
    }
    h.raw("</p>\n");
}

/// Every connection of the job grouped by transport, path, reason and NIC.
fn classes(h: &mut Html, plan: &Plan) {
    h.el("h3", "", "Connections of the whole job, by class");
    h.el("p", "", &plan.transport_summary.render());
    h.raw("<table class=\"h-classes\">");
    h.head(&["transport", "path", "NIC", "pairs", "e.g.", "reason"]);
    h.raw("<tbody>\n");
    for c in plan.transport_classes.iter().take(MAX_ROWS) {
        let (class, _) = kind_class(&c.transport);
        let class = if c.anomaly.is_some() { "h-bad" } else { class };
        h.raw(&format!("<tr class=\"{class}\">"));
        let mut reason = plan.reasons.get(c.reason).cloned().unwrap_or_default();
        if let Some(a) = &c.anomaly {
            reason.push_str(&format!(" Anomaly: {a}"));
        }
        for cell in [
            c.transport.to_string(),
            c.path.map_or("-".into(), |p| p.to_string()),
            c.nic.clone().unwrap_or_else(|| "-".into()),
            c.count.to_string(),
            c.pairs
                .first()
                .map_or(String::new(), |p| format!("{} → {}", p[0], p[1])),
            reason,
        ] {
            h.el("td", "", &cell);
        }
        h.raw("</tr>\n");
    }
    h.raw("</tbody></table>\n");
    h.more(MAX_ROWS, plan.transport_classes.len(), "classes");
}

fn channels(h: &mut Html, plan: &Plan) {
    let c = &plan.channels;
    h.el("h3", "", "Channels and graphs");
    h.raw("<pre>");
    h.text(&c.log_line);
    h.raw("</pre>\n<table class=\"h-graphs\">");
    h.head(&[
        "graph",
        "pattern",
        "channels",
        "bw intra GB/s",
        "bw inter GB/s",
        "type intra",
        "type inter",
    ]);
    h.raw("<tbody>\n");
    let g = &plan.graphs;
    for (name, x) in [
        ("ring", Some(&g.ring)),
        ("tree", Some(&g.tree)),
        ("nvls", g.nvls.as_ref()),
        ("collnet", g.collnet.as_ref()),
        ("collnet direct", g.collnet_direct.as_ref()),
    ] {
        let Some(x) = x else { continue };
        h.row(&[
            name.into(),
            x.pattern.clone(),
            x.nchannels.to_string(),
            gbps(x.bw_intra),
            gbps(x.bw_inter),
            x.type_intra.to_string(),
            x.type_inter.to_string(),
        ]);
    }
    h.raw("</tbody></table>\n");
    h.el(
        "p",
        "h-note",
        &format!(
            "coll {} · nvls {} · collnet {} · p2p {} ({} per peer)",
            c.coll, c.nvls, c.collnet, c.p2p, c.p2p_per_peer
        ),
    );
}

/// Rank order per ring channel and each tree's parent per rank, for the first channels and
/// ranks (a 16,384-node job has hundreds of thousands of ranks per channel).
fn rings_and_trees(h: &mut Html, plan: &Plan) {
    h.el("h3", "", "Rings and trees");
    let cut = |n: usize| {
        if n > MAX_RANKS_LISTED {
            format!(" … ({} ranks)", n)
        } else {
            String::new()
        }
    };
    h.raw("<pre>");
    for (i, ring) in plan.rings.iter().take(MAX_CHANNELS_LISTED).enumerate() {
        let order: Vec<String> = ring
            .iter()
            .take(MAX_RANKS_LISTED)
            .map(|r| r.to_string())
            .collect();
        h.text(&format!(
            "ring channel {i}: {}{}\n",
            order.join(" → "),
            cut(ring.len())
        ));
    }
    for t in plan.trees.iter().take(MAX_CHANNELS_LISTED) {
        let parents: Vec<String> =
            t.up.iter()
                .take(MAX_RANKS_LISTED)
                .enumerate()
                .map(|(r, p)| {
                    if *p < 0 {
                        format!("{r}:root")
                    } else {
                        format!("{r}←{p}")
                    }
                })
                .collect();
        h.text(&format!(
            "tree channel {} (rank←parent): {}{}\n",
            t.channel,
            parents.join(" "),
            cut(t.up.len())
        ));
    }
    h.raw("</pre>\n");
    if let Some(ring) = plan.rings.first() {
        ring_picture(h, plan, ring);
    }
    super::trees::render(h, plan);
    let more = plan.rings.len().max(plan.trees.len());
    h.more(MAX_CHANNELS_LISTED, more, "channels");
}

/// Ranks drawn on a ring: up to this many (the trees' bound).
const MAX_RANKS_DRAWN: usize = super::trees::MAX_RANKS_DRAWN;

const RING_STYLE: &str = "
text{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;font-size:11px;fill:#222}
.t{font-size:13px;font-weight:bold}
.intra{stroke:#2e7d32;stroke-width:2}
.inter{stroke:#1565c0;stroke-width:3;stroke-dasharray:6 3}
.n0{fill:#e8f5e9;stroke:#2e7d32}.n1{fill:#e3f2fd;stroke:#1565c0}
.n2{fill:#fff3e0;stroke:#ef6c00}.n3{fill:#f3e5f5;stroke:#6a1b9a}
";

/// Channel 0's ring as NCCL walks it: ranks placed around a circle in ring order, so each
/// edge joins neighbours, solid within a node and dashed where it crosses the network.
fn ring_picture(h: &mut Html, plan: &Plan, ring: &[usize]) {
    let n = ring.len();
    if !(2..=MAX_RANKS_DRAWN).contains(&n) {
        return;
    }
    let node_of = super::trees::rank_nodes(plan);
    let node = |rank: usize| node_of.get(rank).copied().unwrap_or(0);
    let (cx, cy) = (260.0, 250.0);
    let radius = 180.0;
    let at = |k: usize| {
        let a = std::f64::consts::TAU * k as f64 / n as f64 - std::f64::consts::FRAC_PI_2;
        (cx + radius * a.cos(), cy + radius * a.sin())
    };
    let mut svg = crate::svg::Svg::new();
    svg.text(
        16.0,
        22.0,
        "t",
        crate::svg::Anchor::Start,
        "ring channel 0, clockwise in NCCL's order",
    );
    svg.text(
        16.0,
        40.0,
        "",
        crate::svg::Anchor::Start,
        "solid: within a node · dashed: across the network · colour: node",
    );
    for k in 0..n {
        let (a, b) = (ring[k], ring[(k + 1) % n]);
        let ((x1, y1), (x2, y2)) = (at(k), at((k + 1) % n));
        let class = if node(a) == node(b) { "intra" } else { "inter" };
        svg.line(x1, y1, x2, y2, class);
    }
    for (k, &rank) in ring.iter().enumerate() {
        let (x, y) = at(k);
        let tip = format!(
            "rank {rank} on node {}; next: rank {}",
            node(rank),
            ring[(k + 1) % n]
        );
        svg.rect(
            x - 15.0,
            y - 11.0,
            30.0,
            22.0,
            &format!("n{}", node(rank) % 4),
            Some(&tip),
        );
        svg.text(
            x,
            y + 4.0,
            "",
            crate::svg::Anchor::Middle,
            &rank.to_string(),
        );
    }
    h.svg("h-ring", &svg.finish(520.0, 470.0, RING_STYLE));
}

/// The per-size choice: algorithm, protocol, channels, NCCL's time and the expected busbw with
/// its band.
fn choices(h: &mut Html, plan: &Plan) {
    h.el("h3", "", "Algorithm and protocol per size");
    h.raw("<table class=\"h-choices\">");
    h.head(&[
        "collective",
        "size",
        "algorithm",
        "protocol",
        "channels",
        "NCCL time µs",
        "busbw GB/s",
        "expected GB/s",
        "band GB/s",
    ]);
    h.raw("<tbody>\n");
    for r in plan.table.iter().take(MAX_ROWS * 4) {
        let band = match (r.expected_busbw_low_gbps, r.expected_busbw_high_gbps) {
            (Some(l), Some(hi)) => format!("{}–{}", gbps(l), gbps(hi)),
            _ => "none".into(),
        };
        h.row(&[
            r.collective.name().to_string(),
            size_label(r.bytes),
            r.algo.name().to_string(),
            r.proto.name().to_string(),
            r.nchannels.to_string(),
            format!("{:.1}", r.time_us),
            gbps(r.busbw_gbps),
            gbps(r.expected_busbw_gbps),
            band,
        ]);
    }
    h.raw("</tbody></table>\n");
    h.more(MAX_ROWS * 4, plan.table.len(), "rows");
}
