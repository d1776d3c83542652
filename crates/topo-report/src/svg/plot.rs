//! `topo plan --format svg`: predicted busbw against message size, one panel per collective,
//! sizes on a log axis as nccl-tests sweeps them. Every (algorithm, protocol) the model
//! could use is a line (colour per algorithm, dash per protocol); the one NCCL picks at each
//! size is a wide grey band with black dots under them. [`Panel::measured`] is where
//! `topo verify`'s measurements go (crosses on the same axes), so measured against predicted
//! is one picture.

use super::xml_safe;
use crate::{Error, Result};
use plotters::prelude::*;
use std::collections::BTreeMap;
use topo_nccl::analyze::Analysis;
use topo_nccl::plan::Plan;
use topo_nccl::tuning::{self, OpContext};
use topo_nccl::types::{Algorithm, Collective, Protocol};

/// One curve: busbw (GB/s) per message size (bytes).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(u64, f64)>,
}

/// One collective's plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    pub title: String,
    /// Every usable (algorithm, protocol), in NCCL's scan order.
    pub predicted: Vec<Series>,
    /// NCCL's choice per size (the plan's table).
    pub chosen: Series,
    /// Measured series (`topo verify`), drawn as points; empty for a plan.
    pub measured: Vec<Series>,
    /// The busbw a healthy machine measures in at each size, `(bytes, low, high)`, drawn as a
    /// shaded area under the measurements (`topo report` with nccl-tests); empty for a plan,
    /// whose picture is then what it was without it.
    pub band: Vec<(u64, f64, f64)>,
}

const WIDTH: u32 = 1000;
const PANEL_H: u32 = 560;
const HEAD_H: u32 = 56;

/// The plan's panels: for each collective, each (algorithm, protocol)'s busbw at every
/// planned size from the model's own time (`CostTable::select`'s `considered`, the same
/// times the choice was made from), and the chosen one from the plan's table.
pub fn panels(
    analysis: &Analysis,
    plan: &Plan,
) -> std::result::Result<Vec<Panel>, topo_nccl::Error> {
    let mut by_func: Vec<(Collective, Vec<&topo_nccl::plan::Row>)> = vec![];
    for r in &plan.table {
        match by_func.iter_mut().find(|(c, _)| *c == r.collective) {
            Some((_, v)) => v.push(r),
            None => by_func.push((r.collective, vec![r])),
        }
    }
    let op = OpContext::default();
    let mut out = vec![];
    for (f, rows) in by_func {
        // Keyed by scan position so the legend keeps NCCL's order.
        let mut series: BTreeMap<(usize, String), Vec<(u64, f64)>> = BTreeMap::new();
        for r in &rows {
            let c = analysis.costs.select(f, r.bytes, &op)?;
            for (i, (a, p, t)) in c.considered.iter().enumerate() {
                let label = format!("{}/{}", a.name(), p.name());
                let bw = tuning::busbw_gbps(f, analysis.nranks, r.bytes, *t);
                let key = series
                    .keys()
                    .find(|k| k.1 == label)
                    .cloned()
                    .unwrap_or((i, label));
                series.entry(key).or_default().push((r.bytes, bw));
            }
        }
        let chosen = Series {
            label: "NCCL's choice".into(),
            points: rows.iter().map(|r| (r.bytes, r.busbw_gbps)).collect(),
        };
        out.push(Panel {
            title: format!(
                "{} · {} ranks on {} node{}",
                f.name(),
                plan.nranks,
                plan.nnodes,
                if plan.nnodes == 1 { "" } else { "s" }
            ),
            predicted: series
                .into_iter()
                .map(|((_, label), points)| Series { label, points })
                .collect(),
            chosen,
            measured: vec![],
            band: vec![],
        });
    }
    Ok(out)
}

/// The heading: machine, NCCL version.
pub fn title(plan: &Plan) -> String {
    let gpu = plan.gpu.as_deref().unwrap_or("GPUs");
    let origin = plan
        .source
        .origin
        .as_deref()
        .map(|o| format!(" {}", super::clip(o, 60)))
        .unwrap_or_default();
    format!(
        "topo plan: predicted busbw · {}{origin} · {} × {} · NCCL {}",
        plan.source.kind,
        plan.nranks,
        super::clip(gpu, 40),
        plan.nccl_version
    )
}

/// The SVG document: a heading and one panel per collective.
pub fn render(title: &str, panels: &[Panel]) -> Result<String> {
    let height = HEAD_H + PANEL_H * panels.len().max(1) as u32;
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (head, body) = root.split_vertically(HEAD_H);
        head.draw_text(
            &xml_safe(title),
            &TextStyle::from(("sans-serif", 20).into_font()).color(&BLACK),
            (16, 14),
        )
        .map_err(plot_error)?;
        let measured = if panels.iter().any(|p| !p.measured.is_empty()) {
            " · crosses: measured"
        } else {
            ""
        };
        head.draw_text(
            &format!("lines: every algorithm/protocol the model can use · grey band and dots: NCCL's choice per size{measured}"),
            &TextStyle::from(("sans-serif", 13).into_font()).color(&RGBColor(90, 90, 90)),
            (16, 38),
        )
        .map_err(plot_error)?;
        let areas = body.split_evenly((panels.len().max(1), 1));
        for (area, p) in areas.iter().zip(panels) {
            panel(area, p)?;
        }
        root.present().map_err(plot_error)?;
    }
    Ok(buf)
}

fn plot_error<E: std::fmt::Display>(e: E) -> Error {
    Error::Plot(e.to_string())
}

/// `8 B`, `64 KiB`, `1 GiB`: the nccl-tests size column in binary units.
fn size_label(b: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (u, v) in UNITS {
        if b >= v && b.is_multiple_of(v) {
            return format!("{} {u}", b / v);
        }
    }
    format!("{b} B")
}

/// Colours for the predicted lines, one per series in order; chosen is black.
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// A colour per algorithm and a dash per protocol (Simple solid, LL128 dashed, LL dotted),
/// so a curve looks the same in every panel; an unknown label takes a colour by position.
fn line_style(label: &str, i: usize) -> (RGBColor, Option<(u32, u32)>) {
    let (algo, proto) = label.split_once('/').unwrap_or((label, ""));
    let colour = match Algorithm::from_name(algo) {
        Some(Algorithm::Ring) => 0,
        Some(Algorithm::Tree) => 1,
        Some(Algorithm::Nvls) => 2,
        Some(Algorithm::NvlsTree) => 3,
        Some(Algorithm::CollnetDirect) => 4,
        Some(Algorithm::CollnetChain) => 5,
        Some(Algorithm::Pat) => 6,
        _ => 7 + i,
    };
    let dash = match Protocol::from_name(proto) {
        Some(Protocol::Ll) => Some((2, 4)),
        Some(Protocol::Ll128) => Some((8, 4)),
        _ => None,
    };
    (COLOURS[colour % COLOURS.len()], dash)
}

fn finite(points: &[(u64, f64)]) -> Vec<(f64, f64)> {
    points
        .iter()
        .filter(|(b, y)| *b > 0 && y.is_finite() && *y >= 0.0)
        .map(|&(b, y)| (b as f64, y))
        .collect()
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    p: &Panel,
) -> Result<()> {
    let all: Vec<(f64, f64)> = p
        .predicted
        .iter()
        .chain(std::iter::once(&p.chosen))
        .chain(&p.measured)
        .flat_map(|s| finite(&s.points))
        .chain(
            p.band
                .iter()
                .map(|&(b, _, h)| (b as f64, h))
                .filter(|x| x.0 > 0.0 && x.1.is_finite()),
        )
        .collect();
    let lo = all.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = all.iter().map(|p| p.0).fold(0.0, f64::max);
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo, hi)
    } else if lo.is_finite() {
        (lo / 2.0, lo * 2.0)
    } else {
        (1.0, 2.0)
    };
    let ymax = all.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-3) * 1.08;
    let ticks = key_sizes(lo as u64, hi as u64);
    let mut chart = ChartBuilder::on(area)
        .caption(xml_safe(&p.title), ("sans-serif", 17))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d((lo..hi).log_scale().with_key_points(ticks), 0.0..ymax)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes, as nccl-tests' size column)")
        .y_desc("busbw (GB/s)")
        .x_label_formatter(&|x| size_label(x.round() as u64))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(RGBColor(246, 246, 246))
        .draw()
        .map_err(plot_error)?;
    band(&mut chart, &p.band)?;
    // The choice as a wide translucent band under the coloured lines, so the line it follows
    // at each size stays visible.
    let chosen = finite(&p.chosen.points);
    let band = RGBColor(0, 0, 0).mix(0.22).stroke_width(9);
    chart
        .draw_series(LineSeries::new(chosen.clone(), band))
        .map_err(plot_error)?
        .label(xml_safe(&p.chosen.label))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], band));
    for (i, s) in p.predicted.iter().enumerate() {
        let (c, dash) = line_style(&s.label, i);
        let style = c.stroke_width(2);
        let pts = finite(&s.points);
        let drawn = match dash {
            Some((on, off)) => chart.draw_series(DashedLineSeries::new(pts, on, off, style)),
            None => chart.draw_series(LineSeries::new(pts, style)),
        };
        drawn
            .map_err(plot_error)?
            .label(xml_safe(&s.label))
            .legend(move |(x, y)| {
                // The plot's own dash in the legend: LL dotted and LL128 dashed must be told
                // apart there too. A solid line is one dash as long as the key.
                let (on, off) = dash.unwrap_or((20, 1));
                plotters::element::DashedPathElement::new(vec![(x, y), (x + 20, y)], on, off, style)
            });
    }
    chart
        .draw_series(chosen.iter().map(|&pt| Circle::new(pt, 3, BLACK.filled())))
        .map_err(plot_error)?;
    for (i, s) in p.measured.iter().enumerate() {
        let c = COLOURS[(i + 3) % COLOURS.len()];
        chart
            .draw_series(PointSeries::of_element(
                finite(&s.points),
                5,
                c,
                &|pt, size, st| EmptyElement::at(pt) + Cross::new((0, 0), size, st.stroke_width(2)),
            ))
            .map_err(plot_error)?
            .label(xml_safe(&s.label))
            .legend(move |(x, y)| Cross::new((x + 10, y), 5, c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(plot_error)?;
    Ok(())
}

/// The expected band as one shaded polygon: the highs left to right, the lows back.
fn band<DB: DrawingBackend, X, Y>(
    chart: &mut ChartContext<DB, Cartesian2d<X, Y>>,
    band: &[(u64, f64, f64)],
) -> Result<()>
where
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    let pts: Vec<(u64, f64, f64)> = band
        .iter()
        .copied()
        .filter(|(b, l, h)| *b > 0 && l.is_finite() && h.is_finite() && *l >= 0.0 && h >= l)
        .collect();
    if pts.is_empty() {
        return Ok(());
    }
    let outline: Vec<(f64, f64)> = pts
        .iter()
        .map(|&(b, _, h)| (b as f64, h))
        .chain(pts.iter().rev().map(|&(b, l, _)| (b as f64, l)))
        .collect();
    let fill = RGBColor(46, 125, 50).mix(0.18);
    chart
        .draw_series(std::iter::once(Polygon::new(outline, fill.filled())))
        .map_err(plot_error)?
        .label("expected band (healthy machines)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], fill.filled()));
    Ok(())
}

/// Powers of two between `lo` and `hi`, thinned to about ten ticks.
fn key_sizes(lo: u64, hi: u64) -> Vec<f64> {
    let mut v = vec![];
    let mut s: u64 = 1;
    while s <= hi.max(1) {
        if s >= lo {
            v.push(s);
        }
        match s.checked_mul(2) {
            Some(n) => s = n,
            None => break,
        }
    }
    let step = v.len().div_ceil(11).max(1);
    v.into_iter().step_by(step).map(|x| x as f64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_label_like_nccl_tests() {
        assert_eq!(size_label(8), "8 B");
        assert_eq!(size_label(1024), "1 KiB");
        assert_eq!(size_label(3 << 20), "3 MiB");
        assert_eq!(size_label(1000), "1000 B");
        assert_eq!(key_sizes(8, 64), vec![8.0, 16.0, 32.0, 64.0]);
        assert!(key_sizes(8, 8 << 30).len() <= 11);
    }
}
