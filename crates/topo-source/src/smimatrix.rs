//! `nvidia-smi topo -m` text as a source: the matrix users paste into tickets.
//!
//! [`parse`] reads the text (spaces or tabs, NIC legend, CPU/NUMA affinity columns) and
//! tolerates damage: cells run together (`NV18NV18`) are split, rows cut short keep the cells
//! they have, and each repair is a warning naming the row and column. [`topology`] builds a
//! model whose PCI tree reproduces every stated class (PIX, PXB, PHB, NODE, SYS) and whose
//! NVLinks reproduce every NV#; what the matrix cannot say (link speeds, the exact switches,
//! GPU models, bus ids) is said in the topology's warnings. Pure: text in, structs out.

use petgraph::graph::NodeIndex;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use topo_model::{
    BusId, Cpu, Gpu, HostId, Net, Nic, NodeKind, NvSwitch, PciSwitch, SourceInfo, Topology, class,
};

/// One stated connection class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Cell {
    SelfCell,
    Nv(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
}

impl Cell {
    fn parse(s: &str) -> Option<Cell> {
        Some(match s {
            "X" => Cell::SelfCell,
            "PIX" => Cell::Pix,
            "PXB" => Cell::Pxb,
            "PHB" => Cell::Phb,
            "NODE" => Cell::Node,
            // Drivers before r396 said SOC for SYS.
            "SYS" | "SOC" => Cell::Sys,
            _ => Cell::Nv(s.strip_prefix("NV")?.parse().ok()?),
        })
    }

    /// PCI distance rank (PIX 0 … SYS 4); `None` for self and NVLink.
    fn rank(self) -> Option<u8> {
        match self {
            Cell::Pix => Some(0),
            Cell::Pxb => Some(1),
            Cell::Phb => Some(2),
            Cell::Node => Some(3),
            Cell::Sys => Some(4),
            _ => None,
        }
    }

    pub fn name(self) -> String {
        match self {
            Cell::SelfCell => "X".into(),
            Cell::Nv(n) => format!("NV{n}"),
            Cell::Pix => "PIX".into(),
            Cell::Pxb => "PXB".into(),
            Cell::Phb => "PHB".into(),
            Cell::Node => "NODE".into(),
            Cell::Sys => "SYS".into(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Row {
    pub label: String,
    /// One per column; `None` where the paste lost it.
    pub cells: Vec<Option<Cell>>,
    pub cpu_affinity: Option<String>,
    pub numa_affinity: Option<i32>,
    /// The NUMA affinity as written when it is not one node (`0-1`: the GPU is as near to
    /// several nodes), kept as read.
    pub numa_span: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Matrix {
    /// `GPU0`, …, `NIC0`, … (or NIC names in old drivers' headers).
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
    /// `NIC0` → `mlx5_0`.
    pub nic_legend: BTreeMap<String, String>,
    pub warnings: Vec<String>,
    /// Column index → index of its row, so a cell lookup is O(1): the builders look up every
    /// pair, and a scan per lookup made a 640-column matrix cubic (287 s).
    #[serde(skip)]
    row_of: Vec<Option<usize>>,
}

/// The most columns a matrix may have: NCCL's per-node capacity ([`crate::MAX_PER_HOST`]);
/// checked on the header before any row is read, since rows cost the square of the width.
pub const MAX_COLUMNS: usize = crate::MAX_PER_HOST;

/// The longest column label or NIC legend name: interface names are at most 15 bytes
/// (IFNAMSIZ) and IB device names 63 (IB_DEVICE_NAME_MAX); 256 leaves room for anything real.
pub const MAX_LABEL: usize = 256;

impl Matrix {
    /// The stated cell between two columns, from either row.
    pub fn cell(&self, a: usize, b: usize) -> Option<Cell> {
        let get = |r: usize, c: usize| {
            self.rows[(*self.row_of.get(r)?)?]
                .cells
                .get(c)
                .copied()
                .flatten()
        };
        get(a, b).or_else(|| get(b, a))
    }

    fn row(&self, col: usize) -> Option<&Row> {
        Some(&self.rows[(*self.row_of.get(col)?)?])
    }
}

fn is_cell_token(s: &str) -> bool {
    Cell::parse(s).is_some()
}

/// Splits `NV18NV18` or `PXBNODE` into known cells; `None` if the token is not all cells.
fn split_run(tok: &str) -> Option<Vec<&str>> {
    const WORDS: [&str; 7] = ["PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "X"];
    let mut out = vec![];
    let mut rest = tok;
    while !rest.is_empty() {
        if let Some(w) = WORDS.iter().find(|w| rest.starts_with(**w)) {
            out.push(&rest[..w.len()]);
            rest = &rest[w.len()..];
        } else if let Some(r) = rest.strip_prefix("NV") {
            let digits = r.chars().take_while(char::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            // `NV1818` cannot be split safely; take at most two digits (NV18 is the most).
            let d = digits.min(2);
            out.push(&rest[..2 + d]);
            rest = &r[d..];
        } else {
            return None;
        }
    }
    Some(out)
}

/// Reads the matrix; `Err` with a reason when the text has no matrix header at all, or a
/// header wider than [`MAX_COLUMNS`] or with a label longer than [`MAX_LABEL`].
pub fn parse(text: &str) -> Result<Matrix, String> {
    let lines: Vec<&str> = text.lines().map(|l| l.trim_end_matches('\r')).collect();
    let hi = lines
        .iter()
        .position(|l| l.split_whitespace().next() == Some("GPU0"))
        .ok_or("no header line starting with GPU0")?;
    let mut m = Matrix {
        columns: header(lines[hi], hi + 1)?,
        ..Matrix::default()
    };
    m.row_of = vec![None; m.columns.len()];
    let mut index: HashMap<&str, Vec<usize>> = HashMap::new();
    // Keyed by the header's own slices (borrowing the text, not `m`).
    for (i, c) in lines[hi]
        .split_whitespace()
        .take(m.columns.len())
        .enumerate()
    {
        index.entry(c).or_default().push(i);
    }
    let tail = lines[hi]
        .split_whitespace()
        .skip(m.columns.len())
        .collect::<Vec<_>>()
        .join(" ");
    let has_cpu = tail.starts_with("CPU");
    for (i, l) in lines.iter().enumerate().skip(hi + 1) {
        let Some(first) = l.split_whitespace().next() else {
            continue;
        };
        if let Some((k, v)) = l.trim().split_once(':')
            && k.starts_with("NIC")
            && !v.trim().is_empty()
        {
            legend(&mut m, k.trim(), v.trim(), i + 1)?;
            continue;
        }
        let Some(cols) = index.get(first) else {
            continue;
        };
        // A repeated row adds nothing the first did not say (cell lookups took the first);
        // keeping it would let rows outnumber columns without bound.
        if m.row_of[cols[0]].is_some() {
            continue;
        }
        let row = parse_row(&mut m, l, i + 1, has_cpu);
        for &c in cols {
            m.row_of[c] = Some(m.rows.len());
        }
        m.rows.push(row);
    }
    if m.rows.is_empty() {
        return Err("the header has no rows under it".into());
    }
    check_diagonal(&mut m);
    Ok(m)
}

/// The header's column labels, refused past [`MAX_COLUMNS`] before they are stored.
fn header(line: &str, n: usize) -> Result<Vec<String>, String> {
    let mut columns = vec![];
    for tok in line.split_whitespace() {
        if tok == "CPU" || tok == "NUMA" || tok == "Affinity" {
            break;
        }
        if columns.len() == MAX_COLUMNS {
            return Err(format!(
                "more than {MAX_COLUMNS} GPUs/NICs in the matrix header (line {n}); NCCL holds at most {MAX_COLUMNS} per node, so pass the matrix of one real machine"
            ));
        }
        check_label(tok, n)?;
        columns.push(tok.to_string());
    }
    Ok(columns)
}

fn check_label(s: &str, n: usize) -> Result<(), String> {
    if s.len() > MAX_LABEL {
        return Err(format!(
            "line {n}: a name of {} bytes, longer than the {MAX_LABEL} any device name can be; fix or cut that line",
            s.len()
        ));
    }
    Ok(())
}

/// One `NIC0: mlx5_0` legend line; at most one entry per column, so the legend stays bounded.
fn legend(m: &mut Matrix, k: &str, v: &str, n: usize) -> Result<(), String> {
    check_label(k, n)?;
    check_label(v, n)?;
    if m.nic_legend.len() < MAX_COLUMNS || m.nic_legend.contains_key(k) {
        m.nic_legend.insert(k.to_string(), v.to_string());
    }
    Ok(())
}

fn parse_row(m: &mut Matrix, line: &str, n: usize, has_cpu: bool) -> Row {
    let mut toks = line.split_whitespace();
    let label = toks.next().unwrap_or("").to_string();
    let ncols = m.columns.len();
    let mut cells = vec![];
    let mut rest = vec![];
    // One warning per row however many tokens ran together: warnings are deduplicated by a
    // scan, so one per token made a wide damaged matrix quadratic.
    let mut run_together: Option<String> = None;
    let mut more = 0usize;
    for tok in toks {
        if cells.len() < ncols && is_cell_token(tok) {
            cells.push(Cell::parse(tok));
        } else if cells.len() < ncols
            && let Some(parts) = split_run(tok)
        {
            if run_together.is_none() {
                run_together = Some(format!(
                    "line {n}, row {label}: cells run together ('{tok}'), read as {}",
                    parts.join(" ")
                ));
            } else {
                more += 1;
            }
            cells.extend(parts.into_iter().map(Cell::parse));
        } else {
            rest.push(tok);
        }
    }
    if let Some(w) = run_together {
        m.warnings.push(match more {
            0 => w,
            k => format!("{w}, and {k} more such cells in the row"),
        });
    }
    if cells.len() < ncols {
        let lost: Vec<&str> = m.columns[cells.len()..]
            .iter()
            .map(String::as_str)
            .collect();
        m.warnings.push(format!(
            "line {n}, row {label}: cut short, no cell for column{} {} (taken from the symmetric cell where there is one)",
            if lost.len() > 1 { "s" } else { "" },
            lost.join(", ")
        ));
        cells.resize(ncols, None);
    }
    cells.truncate(ncols);
    let mut rest = rest.into_iter();
    let cpu_affinity = if has_cpu {
        rest.next().filter(|s| *s != "N/A").map(str::to_string)
    } else {
        None
    };
    let numa_raw = rest.next().filter(|s| *s != "N/A");
    let numa_affinity = numa_raw.and_then(|s| s.parse().ok());
    let numa_span = numa_raw
        .filter(|_| numa_affinity.is_none())
        .map(str::to_string);
    Row {
        label,
        cells,
        cpu_affinity,
        numa_affinity,
        numa_span,
    }
}

fn check_diagonal(m: &mut Matrix) {
    let mut w = vec![];
    for r in &m.rows {
        let Some(i) = m.columns.iter().position(|c| c == &r.label) else {
            continue;
        };
        if let Some(Some(c)) = r.cells.get(i)
            && *c != Cell::SelfCell
        {
            w.push(format!(
                "row {}: column {} should be X, is {} (cells may be shifted)",
                r.label,
                r.label,
                c.name()
            ));
        }
    }
    m.warnings.extend(w);
}

/// Union-find over column indices.
struct Groups(Vec<usize>);

impl Groups {
    fn new(n: usize) -> Groups {
        Groups((0..n).collect())
    }
    fn find(&mut self, x: usize) -> usize {
        let mut r = x;
        while self.0[r] != r {
            r = self.0[r];
        }
        // Full path compression: joins come pair by pair, so chains would otherwise grow.
        let mut y = x;
        while self.0[y] != r {
            let next = self.0[y];
            self.0[y] = r;
            y = next;
        }
        r
    }
    fn join(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.0[ra.max(rb)] = ra.min(rb);
        }
    }
    /// Members of each group, groups in order of their smallest member.
    fn sets(&mut self, members: &[usize]) -> Vec<Vec<usize>> {
        let mut out: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &x in members {
            let r = self.find(x);
            out.entry(r).or_default().push(x);
        }
        out.into_values().collect()
    }
}

/// Devices whose stated PCI rank between them is at most `max`, joined.
fn cluster(m: &Matrix, members: &[usize], max: u8) -> Vec<Vec<usize>> {
    let mut g = Groups::new(m.columns.len());
    for &a in members {
        for &b in members {
            if a < b && m.cell(a, b).and_then(Cell::rank).is_some_and(|r| r <= max) {
                g.join(a, b);
            }
        }
    }
    g.sets(members)
}

fn row_of(m: &Matrix, col: usize) -> Option<&Row> {
    m.row(col)
}

/// NUMA groups: stated NUMA or CPU affinity in common, or anything closer than SYS. Equal
/// affinities are joined through a map, not compared pairwise: an affinity list can be long.
fn numa_groups(m: &Matrix) -> Vec<Vec<usize>> {
    let n = m.columns.len();
    let mut g = Groups::new(n);
    let all: Vec<usize> = (0..n).collect();
    let mut by_numa: HashMap<i32, usize> = HashMap::new();
    let mut by_cpus: HashMap<&str, usize> = HashMap::new();
    for a in 0..n {
        let Some(r) = row_of(m, a) else { continue };
        if let Some(k) = r.numa_affinity {
            let first = *by_numa.entry(k).or_insert(a);
            g.join(first, a);
        }
        if let Some(k) = &r.cpu_affinity {
            let first = *by_cpus.entry(k.as_str()).or_insert(a);
            g.join(first, a);
        }
    }
    for a in 0..n {
        for b in a + 1..n {
            if m.cell(a, b).and_then(Cell::rank).is_some_and(|r| r <= 3) {
                g.join(a, b);
            }
        }
    }
    g.sets(&all)
}

struct Build {
    t: Topology,
    next_bus: u16,
    /// Stated-class group ids per device: (numa, host bridge, pxb, pix).
    place: Vec<(usize, usize, usize, usize)>,
    nodes: Vec<Option<NodeIndex>>,
}

impl Build {
    fn bus(&mut self) -> u8 {
        self.next_bus += 1;
        (self.next_bus & 0xff) as u8
    }
    fn switch(&mut self, parent: NodeIndex, busid: BusId) -> NodeIndex {
        self.t.add_child(
            parent,
            NodeKind::PciSwitch(PciSwitch {
                busid,
                class: class::BRIDGE,
                ..Default::default()
            }),
        )
    }
}

/// The topology the matrix states (one host).
pub fn topology(m: &Matrix, origin: Option<String>) -> Topology {
    let mut b = Build {
        t: Topology::new(SourceInfo {
            kind: topo_model::SourceKind::NvidiaSmi,
            origin,
            ..Default::default()
        }),
        next_bus: 0x0f,
        place: vec![(0, 0, 0, 0); m.columns.len()],
        nodes: vec![None; m.columns.len()],
    };
    let mut ids = (0usize, 0usize, 0usize, 0usize);
    let mut used_numa: Vec<i32> = vec![];
    for numa in numa_groups(m) {
        ids.0 += 1;
        let cpu = add_cpu(&mut b, m, &numa, &mut used_numa);
        for hb in cluster(m, &numa, 2) {
            ids.1 += 1;
            let root_bus = b.bus();
            for (k, pxb) in cluster(m, &hb, 1).into_iter().enumerate() {
                ids.2 += 1;
                let top = b.switch(cpu, BusId::new(0, root_bus, k as u8, 0));
                let pix = cluster(m, &pxb, 0);
                let single = pix.len() == 1;
                for group in pix {
                    ids.3 += 1;
                    let parent = if single {
                        top
                    } else {
                        let bus = b.bus();
                        b.switch(top, BusId::new(0, bus, 0, 0))
                    };
                    for d in group {
                        b.place[d] = ids;
                        add_device(&mut b, m, d, parent);
                    }
                }
            }
        }
    }
    add_nvlinks(&mut b, m);
    b.t.connect_cpus();
    check_classes(&mut b, m);
    numa_span_warning(&mut b, m);
    for w in m.warnings.clone() {
        b.t.warn(w);
    }
    b.t.warn("from an nvidia-smi topo -m matrix: link speeds and widths, the exact PCIe switches, bus ids and GPU models are not in it (bus ids here are placeholders)");
    b.t
}

/// Rows whose NUMA affinity names several nodes (`0-1`): NCCL and topo place a device on one
/// NUMA node, so theirs is shown as unknown, and the warning keeps what the matrix says.
fn numa_span_warning(b: &mut Build, m: &Matrix) {
    let spans: Vec<String> = m
        .rows
        .iter()
        .filter_map(|r| Some(format!("{} {}", r.label, r.numa_span.as_deref()?)))
        .collect();
    if spans.is_empty() {
        return;
    }
    let shown: Vec<&str> = spans.iter().take(8).map(String::as_str).collect();
    b.t.warn(format!(
        "NUMA affinity of more than one node ({}{}): such a device's NUMA node is shown as unknown; the matrix's affinity is kept as stated",
        shown.join(", "),
        if spans.len() > 8 { ", ..." } else { "" }
    ));
}

fn add_cpu(b: &mut Build, m: &Matrix, group: &[usize], used: &mut Vec<i32>) -> NodeIndex {
    let stated = group
        .iter()
        .filter_map(|&d| row_of(m, d).and_then(|r| r.numa_affinity))
        .find(|n| !used.contains(n));
    let numa = stated.unwrap_or(-1);
    used.push(numa);
    let cpus = group
        .iter()
        .find_map(|&d| row_of(m, d).and_then(|r| r.cpu_affinity.clone()));
    b.t.add_node(
        0 as HostId,
        None,
        NodeKind::Cpu(Cpu {
            numa,
            cpus,
            ..Default::default()
        }),
    )
}

fn add_device(b: &mut Build, m: &Matrix, d: usize, parent: NodeIndex) {
    let label = &m.columns[d];
    let bus = b.bus();
    let busid = BusId::new(0, bus, 0, 0);
    let node = if let Some(i) = label
        .strip_prefix("GPU")
        .and_then(|x| x.parse::<i32>().ok())
    {
        b.t.add_child(parent, NodeKind::gpu(Gpu::new(busid, i)))
    } else {
        let name = m.nic_legend.get(label).cloned().unwrap_or(label.clone());
        let ethernet = name.starts_with("eth") || name.starts_with("en");
        let nic = b.t.add_child(
            parent,
            NodeKind::Nic(Nic {
                busid: Some(busid),
                class: if ethernet { class::ETHERNET } else { class::IB },
                ..Default::default()
            }),
        );
        let dev = label
            .strip_prefix("NIC")
            .and_then(|x| x.parse().ok())
            .unwrap_or(d as i32);
        b.t.add_child(
            nic,
            // A matrix says nothing of GPUDirect RDMA or the port's speed: both stay unknown.
            NodeKind::Net(Net {
                name,
                dev,
                port: 1,
                gdr_unstated: true,
                ..Default::default()
            }),
        );
        nic
    };
    b.nodes[d] = Some(node);
}

/// Direct NVLinks per stated NV#, or one NVSwitch when every GPU pair states the same NV#
/// (three or more GPUs: an NVSwitch board reads that way, a bridge pair or a mesh does not).
fn add_nvlinks(b: &mut Build, m: &Matrix) {
    let gpus: Vec<usize> = (0..m.columns.len())
        .filter(|&d| m.columns[d].starts_with("GPU"))
        .collect();
    let mut nv = BTreeMap::new();
    for &a in &gpus {
        for &c in &gpus {
            if a < c
                && let Some(Cell::Nv(k)) = m.cell(a, c)
            {
                nv.insert((a, c), k);
            }
        }
    }
    let pairs = gpus.len() * gpus.len().saturating_sub(1) / 2;
    let lanes: Vec<u32> = nv.values().copied().collect();
    let uniform = gpus.len() >= 3 && nv.len() == pairs && lanes.windows(2).all(|w| w[0] == w[1]);
    if uniform {
        let s =
            b.t.add_node(0, None, NodeKind::NvSwitch(NvSwitch::default()));
        for &g in &gpus {
            if let Some(n) = b.nodes[g] {
                b.t.add_nvlink(n, s, lanes[0]);
            }
        }
        b.t.warn(format!(
            "every GPU pair states NV{}: modelled as one NVSwitch (the matrix does not say how many chips)",
            lanes[0]
        ));
        return;
    }
    for ((a, c), k) in nv {
        if let (Some(x), Some(y)) = (b.nodes[a], b.nodes[c]) {
            b.t.add_nvlink(x, y, k);
            b.t.add_nvlink(y, x, k);
        }
    }
}

/// The most per-cell class warnings shown; the rest are counted in one line (Topology::warn
/// dedups by scanning, and a 640-column matrix has 204 480 cells).
const MAX_CLASS_WARNINGS: usize = 32;

/// Warns where the stated classes are not those of any tree (the model shows another class).
fn check_classes(b: &mut Build, m: &Matrix) {
    let n = m.columns.len();
    let names = ["PIX", "PXB", "PHB", "NODE", "SYS"];
    let mut shown = 0usize;
    let mut missing: Vec<String> = vec![];
    let mut nmissing = 0usize;
    for a in 0..n {
        for c in a + 1..n {
            let cell = m.cell(a, c);
            if cell.is_none() {
                nmissing += 1;
                if missing.len() < 8 {
                    let modelled = names[modelled_rank(b.place[a], b.place[c]) as usize];
                    missing.push(format!("{}-{} {modelled}", m.columns[a], m.columns[c]));
                }
            }
            let Some(stated) = cell.and_then(Cell::rank) else {
                continue;
            };
            let modelled = modelled_rank(b.place[a], b.place[c]);
            if modelled == stated {
                continue;
            }
            shown += 1;
            if shown <= MAX_CLASS_WARNINGS {
                b.t.warn(format!(
                    "row {} column {}: states {} but the other cells put them at {}; shown as {}",
                    m.columns[a],
                    m.columns[c],
                    names[stated as usize],
                    names[modelled as usize],
                    names[modelled as usize]
                ));
            }
        }
    }
    if shown > MAX_CLASS_WARNINGS {
        b.t.warn(format!(
            "{} more cells state a class the other cells contradict (first {MAX_CLASS_WARNINGS} shown)",
            shown - MAX_CLASS_WARNINGS
        ));
    }
    if nmissing > 0 {
        b.t.warn(format!(
            "{nmissing} device pair(s) have no cell in either row (the matrix is cut short or rows are missing); their placement is inferred from the other cells, not stated: {}{}",
            missing.join(", "),
            if nmissing > missing.len() { ", ..." } else { "" }
        ));
    }
}

fn modelled_rank(pa: (usize, usize, usize, usize), pc: (usize, usize, usize, usize)) -> u8 {
    if pa.3 == pc.3 {
        0
    } else if pa.2 == pc.2 {
        1
    } else if pa.1 == pc.1 {
        2
    } else if pa.0 == pc.0 {
        3
    } else {
        4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_together_cells_split() {
        assert_eq!(split_run("NV18NV18"), Some(vec!["NV18", "NV18"]));
        assert_eq!(split_run("PXBNODE"), Some(vec!["PXB", "NODE"]));
        assert_eq!(split_run("0-63"), None);
    }

    #[test]
    fn damaged_rows_warn_and_fill_from_the_other_side() {
        let text = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n\
                    GPU0\t X \tNV4PIX\t0-7\t0\n\
                    GPU1\tNV4\t X \n\
                    NIC0\tPIX\tPHB\t X\n";
        let m = parse(text).unwrap();
        assert!(
            m.warnings
                .iter()
                .any(|w| w.contains("row GPU0") && w.contains("run together"))
        );
        assert!(
            m.warnings
                .iter()
                .any(|w| w.contains("row GPU1") && w.contains("NIC0"))
        );
        assert_eq!(m.cell(1, 2), Some(Cell::Phb));
        let t = topology(&m, None);
        assert_eq!(t.gpus().len(), 2);
    }

    fn square(n: usize, cell: &str) -> String {
        let mut t = String::from("\t");
        t.push_str(
            &(0..n)
                .map(|i| format!("GPU{i}"))
                .collect::<Vec<_>>()
                .join("\t"),
        );
        t.push_str("\tCPU Affinity\tNUMA Affinity\n");
        for i in 0..n {
            t.push_str(&format!("GPU{i}"));
            for j in 0..n {
                t.push('\t');
                t.push_str(if i == j { "X" } else { cell });
            }
            t.push_str(&format!("\t{i}\t{i}\n"));
        }
        t
    }

    #[test]
    fn header_past_640_columns_is_refused_naming_the_header() {
        // 20 000 columns and as many short rows once took 3 GB; refused on the header alone.
        let cols: Vec<String> = (0..20_000).map(|i| format!("GPU{i}")).collect();
        let text = format!("\t{}\n{}\n", cols.join("\t"), cols.join("\n"));
        let e = parse(&text).unwrap_err();
        assert!(
            e.contains("more than 640 GPUs/NICs in the matrix header"),
            "{e}"
        );
        let long = format!(
            "\tGPU0\tNIC0\nGPU0\tX\tPIX\n\nNIC0: {}\n",
            "m".repeat(100_000)
        );
        let e = parse(&long).unwrap_err();
        assert!(e.contains("longer than the 256"), "{e}");
    }

    #[test]
    fn a_640_column_all_sys_matrix_completes() {
        // Was cubic (a row scan per cell lookup): 287 s in release.
        let m = parse(&square(640, "SYS")).unwrap();
        assert_eq!(m.rows.len(), 640);
        let t = topology(&m, None);
        assert_eq!(t.gpus().len(), 640);
        assert_eq!(t.cpus().count(), 640);
    }

    #[test]
    fn repeated_rows_and_run_together_cells_warn_once_per_row() {
        let mut text = square(3, "SYS");
        text.push_str("GPU0\tX\tNV4\tNV4\n");
        let m = parse(&text).unwrap();
        assert_eq!(m.rows.len(), 3);
        assert_eq!(m.cell(0, 1), Some(Cell::Sys));
        let text = "\tGPU0\tGPU1\tGPU2\nGPU0\tXNV4NV4\nGPU1\tNV4\tX\tNV4\nGPU2\tNV4\tNV4\tX\n";
        let m = parse(text).unwrap();
        let w: Vec<_> = m
            .warnings
            .iter()
            .filter(|w| w.contains("run together"))
            .collect();
        assert_eq!(w.len(), 1, "{w:?}");
    }

    #[test]
    fn pairs_in_no_row_are_listed_not_invented_silently() {
        // GPU2's row and the NIC's row are missing; GPU2-NIC0 is in neither.
        let text = "\tGPU0\tGPU1\tGPU2\tNIC0\nGPU0\tX\tPIX\tSYS\tPIX\nGPU1\tPIX\tX\tSYS\tPIX\n";
        let t = topology(&parse(text).unwrap(), None);
        let w: Vec<&String> = t
            .warnings
            .iter()
            .filter(|w| w.contains("no cell in either row"))
            .collect();
        assert_eq!(w.len(), 1, "{:?}", t.warnings);
        assert!(
            w[0].starts_with("1 device pair(s)") && w[0].contains("GPU2-NIC0 SYS"),
            "{w:?}"
        );
        let whole = topology(&parse(&square(3, "SYS")).unwrap(), None);
        assert!(!whole.warnings.iter().any(|w| w.contains("no cell")));
    }

    #[test]
    fn a_numa_affinity_of_several_nodes_is_kept_and_unknown() {
        let text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\tX\tSYS\t0-15\t0-1\nGPU1\tSYS\tX\t16-31\t1\n";
        let m = parse(text).unwrap();
        assert_eq!(m.rows[0].numa_span.as_deref(), Some("0-1"));
        assert_eq!(
            (m.rows[0].numa_affinity, m.rows[1].numa_affinity),
            (None, Some(1))
        );
        let t = topology(&m, None);
        assert!(
            t.warnings.iter().any(|w| w.contains("(GPU0 0-1)")),
            "{:?}",
            t.warnings
        );
    }

    #[test]
    fn not_a_matrix_is_an_error() {
        assert!(parse("hello\nworld\n").is_err());
        assert!(parse("GPU0 GPU1\n").is_err());
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    const B300: &str = include_str!("../../../fixtures/matrices/deepep-590-hgx-b300-cx8-bond.txt");
    const A100: &str =
        include_str!("../../../fixtures/matrices/fastdeploy-8xa100-sxm4-40gb-4numa-3nic.txt");

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn smimatrix_never_panics_on_random_text(s in "\\PC{0,300}") {
            if let Ok(m) = parse(&s) {
                let _ = topology(&m, None);
            }
        }

        #[test]
        fn smimatrix_never_panics_on_random_cells(rows in proptest::collection::vec(
            proptest::collection::vec("(X|NV[0-9]{1,2}|PIX|PXB|PHB|NODE|SYS|N/A|[0-9-]{1,6}|NV18SYS)", 0..12), 0..10)) {
            let mut text = String::from("\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\n");
            for (i, r) in rows.iter().enumerate() {
                let label = if i < 3 { format!("GPU{i}") } else { "NIC0".to_string() };
                text.push_str(&format!("{label}\t{}\n", r.join("\t")));
            }
            if let Ok(m) = parse(&text) {
                let _ = topology(&m, None);
            }
        }

        #[test]
        fn smimatrix_truncated_real_matrices_never_panic(cut in 0usize..3400, which in 0usize..2) {
            let text = [B300, A100][which];
            let mut end = cut.min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            if let Ok(m) = parse(&text[..end]) {
                let _ = topology(&m, None);
            }
        }
    }
}
