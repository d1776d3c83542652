//! Channel 0's tree and its mirror drawn: NCCL's double binary tree puts tree 0 on channels
//! `0..n` and its mirror (tree 1) on `n..2n` (`connectTrees` in src/graph/connect.cc, NCCL
//! 2.28; `topo_nccl::connect`), so the mirror of channel 0 is channel `n` of the plan's `2n`
//! trees. The ranks a node chains together sit side by side in a box labelled with the node;
//! the boxes hang from their parents across the network, one level per hop.

use super::doc::Html;
use crate::svg::{Anchor, Svg};
use topo_nccl::plan::{Plan, TreeOut};

/// Ranks drawn in a tree: up to this many (the rings' bound).
pub(super) const MAX_RANKS_DRAWN: usize = 64;

const BOX_W: f64 = 46.0;
const BOX_H: f64 = 34.0;
const GAP: f64 = 12.0;
/// Between the boxes of two nodes side by side.
const NODE_GAP: f64 = 28.0;
const LEVEL_H: f64 = 96.0;
const TOP: f64 = 66.0;
const LEFT: f64 = 16.0;

const TREE_STYLE: &str = "
text{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;font-size:11px;fill:#222}
.t{font-size:13px;font-weight:bold}.g{font-size:9px;fill:#555}.nl{font-size:10px;fill:#555}
.intra{stroke:#2e7d32;stroke-width:2}
.inter{stroke:#1565c0;stroke-width:3;stroke-dasharray:6 3}
.node{fill:none;stroke:#99a;stroke-dasharray:3 2}
.root{stroke-width:3}
.n0{fill:#e8f5e9;stroke:#2e7d32}.n1{fill:#e3f2fd;stroke:#1565c0}
.n2{fill:#fff3e0;stroke:#ef6c00}.n3{fill:#f3e5f5;stroke:#6a1b9a}
";

/// Each rank's node, from the plan's ranks per node (ranks numbered node by node).
pub(super) fn rank_nodes(plan: &Plan) -> Vec<usize> {
    let mut node_of = vec![0usize; plan.nranks];
    let mut r = 0;
    for (node, &count) in plan.ranks_per_node.iter().enumerate() {
        for slot in node_of.iter_mut().skip(r).take(count) {
            *slot = node;
        }
        r += count;
    }
    node_of
}

/// Channel 0's tree and its mirror, where the job has 2 to [`MAX_RANKS_DRAWN`] ranks.
pub(super) fn render(h: &mut Html, plan: &Plan) {
    let Some(t0) = plan.trees.first() else {
        return;
    };
    if !(2..=MAX_RANKS_DRAWN).contains(&t0.up.len()) {
        return;
    }
    // Each rank's GPU, as NCCL prints it in brackets.
    let mut dev: Vec<Option<i32>> = vec![None; t0.up.len()];
    for p in &plan.transports {
        for (r, d) in [(p.from, p.from_dev), (p.to, p.to_dev)] {
            if let Some(slot) = dev.get_mut(r) {
                *slot = Some(d);
            }
        }
    }
    let nodes = rank_nodes(plan);
    let mirror = plan.trees.len() / 2;
    let mut drawn = vec![(t0, "tree 0 (channel 0)".to_string())];
    if mirror > 0
        && let Some(t1) = plan.trees.get(mirror)
    {
        drawn.push((t1, format!("tree 1, its mirror (channel {})", t1.channel)));
    }
    for (t, title) in drawn {
        if let Some(svg) = picture(t, &title, &nodes, &dev) {
            h.svg("h-tree", &svg);
        }
    }
}

/// A box of ranks one node chains together, and where it is drawn.
struct Part {
    node: usize,
    /// Its ranks, nearest the parent first.
    ranks: Vec<usize>,
    parent: Option<usize>,
    children: Vec<usize>,
    level: usize,
    /// Width of the box, then of the box with everything below it.
    width: f64,
    span: f64,
    x: f64,
}

/// The tree `t` as an SVG; `None` where its parents do not form a tree (a rank that is its
/// own ancestor).
fn picture(t: &TreeOut, title: &str, nodes: &[usize], dev: &[Option<i32>]) -> Option<String> {
    let n = t.up.len();
    let node = |r: usize| nodes.get(r).copied().unwrap_or(0);
    let parent = |r: usize| usize::try_from(t.up[r]).ok().filter(|&p| p < n);
    // A rank's box: the rank reached by climbing while the parent is on the same node.
    let mut top = vec![0usize; n];
    let mut depth = vec![0usize; n];
    for r in 0..n {
        let (mut x, mut steps) = (r, 0);
        while let Some(p) = parent(x).filter(|&p| node(p) == node(x)) {
            x = p;
            steps += 1;
            if steps > n {
                return None;
            }
        }
        top[r] = x;
        depth[r] = steps;
    }
    let mut parts: Vec<Part> = vec![];
    let mut part_of = vec![usize::MAX; n];
    let mut tops: Vec<usize> = (0..n).filter(|&r| top[r] == r).collect();
    tops.sort_by_key(|&r| (node(r), r));
    for &r in &tops {
        part_of[r] = parts.len();
        let mut ranks: Vec<usize> = (0..n).filter(|&x| top[x] == r).collect();
        ranks.sort_by_key(|&x| (depth[x], x));
        let k = ranks.len() as f64;
        parts.push(Part {
            node: node(r),
            ranks,
            parent: None,
            children: vec![],
            level: 0,
            width: k * BOX_W + (k - 1.0) * GAP,
            span: 0.0,
            x: 0.0,
        });
    }
    for i in 0..parts.len() {
        let head = parts[i].ranks[0];
        if let Some(p) = parent(head) {
            let pp = part_of[top[p]];
            parts[i].parent = Some(pp);
            parts[pp].children.push(i);
        }
    }
    // Levels top-down from the roots, in breadth-first order.
    let mut order: Vec<usize> = (0..parts.len())
        .filter(|&i| parts[i].parent.is_none())
        .collect();
    let roots = order.len();
    let mut k = 0;
    while k < order.len() {
        let i = order[k];
        for c in parts[i].children.clone() {
            parts[c].level = parts[i].level + 1;
            order.push(c);
        }
        k += 1;
    }
    if order.len() != parts.len() {
        return None;
    }
    // Spans bottom-up, then positions top-down.
    for &i in order.iter().rev() {
        let below: f64 = parts[i]
            .children
            .iter()
            .map(|&c| parts[c].span)
            .sum::<f64>()
            + NODE_GAP * parts[i].children.len().saturating_sub(1) as f64;
        parts[i].span = parts[i].width.max(below);
    }
    let mut x = LEFT;
    for &i in &order[..roots] {
        parts[i].x = x;
        x += parts[i].span + NODE_GAP;
    }
    for &i in &order {
        let below: f64 = parts[i]
            .children
            .iter()
            .map(|&c| parts[c].span)
            .sum::<f64>()
            + NODE_GAP * parts[i].children.len().saturating_sub(1) as f64;
        let mut cx = parts[i].x + (parts[i].span - below) / 2.0;
        for c in parts[i].children.clone() {
            parts[c].x = cx;
            cx += parts[c].span + NODE_GAP;
        }
    }
    let levels = parts.iter().map(|p| p.level).max().unwrap_or(0) + 1;
    let width = (x - NODE_GAP + LEFT).max(420.0);
    let height = TOP + levels as f64 * LEVEL_H - (LEVEL_H - BOX_H) + 24.0;
    Some(draw(&parts, &part_of, &top, t, title, dev).finish(width, height, TREE_STYLE))
}

/// Where rank `r` of part `p` is drawn: its box's top-left corner.
fn at(p: &Part, r: usize) -> (f64, f64) {
    let i = p.ranks.iter().position(|&x| x == r).unwrap_or(0) as f64;
    let left = p.x + (p.span - p.width) / 2.0;
    (left + i * (BOX_W + GAP), TOP + p.level as f64 * LEVEL_H)
}

fn draw(
    parts: &[Part],
    part_of: &[usize],
    top: &[usize],
    t: &TreeOut,
    title: &str,
    dev: &[Option<i32>],
) -> Svg {
    let mut svg = Svg::new();
    svg.text(LEFT, 22.0, "t", Anchor::Start, title);
    svg.text(
        LEFT,
        40.0,
        "",
        Anchor::Start,
        "a box per node, its ranks in chain order · solid: within a node · dashed: to the parent across the network",
    );
    let place = |r: usize| at(&parts[part_of[top[r]]], r);
    // Edges first, so the boxes cover their ends.
    for (r, &up) in t.up.iter().enumerate() {
        let Some(p) = usize::try_from(up).ok().filter(|&p| p < t.up.len()) else {
            continue;
        };
        let ((x1, y1), (x2, y2)) = (place(p), place(r));
        if top[p] == top[r] {
            svg.line(
                x1 + BOX_W / 2.0,
                y1 + BOX_H / 2.0,
                x2 + BOX_W / 2.0,
                y2 + BOX_H / 2.0,
                "intra",
            );
        } else {
            svg.line(x1 + BOX_W / 2.0, y1 + BOX_H, x2 + BOX_W / 2.0, y2, "inter");
        }
    }
    for p in parts {
        let (x, y) = at(p, p.ranks[0]);
        svg.rect(
            x - 5.0,
            y - 16.0,
            p.width + 10.0,
            BOX_H + 21.0,
            "node",
            None,
        );
        svg.text(
            x + p.width + 3.0,
            y - 5.0,
            "nl",
            Anchor::End,
            &format!("node {}", p.node),
        );
        for &r in &p.ranks {
            let (x, y) = at(p, r);
            let gpu = dev.get(r).copied().flatten().filter(|&d| d >= 0);
            let kids: Vec<String> = t
                .children(r)
                .unwrap_or(&[])
                .iter()
                .filter(|&&c| c >= 0)
                .map(|c| c.to_string())
                .collect();
            let tip = format!(
                "rank {r}{} on node {}; parent: {}; children: {}",
                gpu.map_or(String::new(), |d| format!(" (GPU{d})")),
                p.node,
                if t.up[r] < 0 {
                    "none (root)".to_string()
                } else {
                    t.up[r].to_string()
                },
                if kids.is_empty() {
                    "none".to_string()
                } else {
                    kids.join(", ")
                }
            );
            let class = format!("n{}{}", p.node % 4, if t.up[r] < 0 { " root" } else { "" });
            svg.rect(x, y, BOX_W, BOX_H, &class, Some(&tip));
            svg.text(
                x + BOX_W / 2.0,
                y + 14.0,
                "",
                Anchor::Middle,
                &r.to_string(),
            );
            if let Some(d) = gpu {
                svg.text(
                    x + BOX_W / 2.0,
                    y + 27.0,
                    "g",
                    Anchor::Middle,
                    &format!("GPU{d}"),
                );
            }
        }
    }
    svg
}
