//! Whether an nccl-tests result's figures are ones nccl-tests can have printed: each row's
//! algbw is its size over its time, its busbw that algbw times the collective's bus factor
//! (nccl-tests src/*.cu `GetBw`, 2.19.6), and no busbw of a run over several ranks beyond
//! any link. A row that fails is edited, merged from two runs or corrupted: it is named in
//! an error and left out of the verdict, never judged "above band".

use super::types::{Measured, RefusedRow, ResultsInput};
use crate::ReportExt;
use crate::{Finding, Report};
use std::collections::HashSet;
use topo_model::message::Code;
use topo_vocab::Collective;

/// The most busbw a run over several ranks may state, in GB/s: 100 TB/s, over fifty times
/// the 1.8 TB/s of NVLink 5 per GPU. One rank is not bounded: its broadcast or in-place
/// all-reduce moves nothing and prints whatever size over launch time gives.
pub const MAX_BUSBW_GBPS: f64 = 1e5;

/// The rows quoted in the finding; the rest are counted.
const QUOTED: usize = 4;

/// Slack on top of the print rounding: nccl-tests divides the same time it prints.
const SLACK: f64 = 0.01;

/// Adds the error for impossible rows (refused by the reader or failing a check here) and
/// returns their lines, which the verdict leaves out.
pub fn check(input: &ResultsInput, r: &mut Report) -> HashSet<usize> {
    let coll = Collective::parse(&input.collective);
    let mut bad: Vec<(usize, &str, String)> = input
        .refused
        .iter()
        .map(|x: &RefusedRow| (x.line, x.text.as_str(), x.why.clone()))
        .collect();
    for m in &input.rows {
        if let Some(why) = row_fault(m, coll, input.nranks) {
            bad.push((m.line, m.text.as_str(), why));
        }
    }
    if bad.is_empty() {
        return HashSet::new();
    }
    bad.sort_by_key(|b| b.0);
    let mut evidence: Vec<String> = bad
        .iter()
        .take(QUOTED)
        .map(|(line, text, why)| format!("{}: {why}", crate::quote(&input.name, *line, text)))
        .collect();
    if bad.len() > QUOTED {
        evidence.push(format!("and {} more rows", bad.len() - QUOTED));
    }
    r.add(
        Finding::new(Code::NcclTestsImpossibleRows, format!(
                "{}: {} row{} with figures nccl-tests cannot print ({}); left out of the verdict",
                input.name,
                bad.len(),
                if bad.len() == 1 { "" } else { "s" },
                bad[0].2
            ))
        .evidence(evidence)
        .fix("pass the whole output of one nccl-tests run as it printed it: a row whose figures disagree was edited, merged from two runs or corrupted; rerun the test"),
    );
    bad.into_iter().map(|b| b.0).collect()
}

/// Whether a printed algbw is `bytes` over a printed time, both as rounded in print.
pub(super) fn algbw_is(bytes: u64, time_us: f64, algbw: f64) -> bool {
    let (lo, hi) = algbw_range(bytes, time_us);
    let ua = half_ulp(algbw, 6);
    algbw + ua >= lo && algbw - ua <= hi
}

fn row_fault(m: &Measured, coll: Option<Collective>, nranks: usize) -> Option<String> {
    for &[time, algbw, busbw] in &m.groups {
        if nranks > 1 && busbw > MAX_BUSBW_GBPS {
            return Some(format!(
                "busbw {} GB/s, beyond any link (at most {} GB/s)",
                fig(busbw),
                fig(MAX_BUSBW_GBPS)
            ));
        }
        let Some(c) = coll else { continue };
        let ua = half_ulp(algbw, 6);
        if !algbw_is(m.bytes, time, algbw) {
            return Some(format!(
                "algbw {} GB/s is not size / time ({} B / {} us = {} GB/s)",
                fig(algbw),
                m.bytes,
                fig(time),
                fig(m.bytes as f64 / (time * 1e3))
            ));
        }
        let f = c.bus_factor(nranks);
        let want = algbw * f;
        let tol = half_ulp(busbw, 6) + f * ua + SLACK * want;
        if (busbw - want).abs() > tol {
            return Some(format!(
                "busbw {} GB/s is not algbw x {f:.4} ({} on {nranks} ranks) = {} GB/s",
                fig(busbw),
                c.cli_name(),
                fig(want)
            ));
        }
    }
    None
}

/// A figure in a reason: as printed when ordinary, in exponent form when huge or tiny, so
/// a forged `1e308` is not written out as 309 digits.
fn fig(v: f64) -> String {
    if v != 0.0 && !(1e-3..1e9).contains(&v.abs()) {
        format!("{v:.4e}")
    } else {
        format!("{}", (v * 1e4).round() / 1e4)
    }
}

/// The algbw a size and a printed time allow, the time being rounded as printed.
pub(super) fn algbw_range(bytes: u64, time_us: f64) -> (f64, f64) {
    let ut = half_ulp(time_us, 7);
    let b = bytes as f64 / 1e3;
    let lo = b / (time_us + ut) * (1.0 - SLACK);
    let hi = if time_us > ut {
        b / (time_us - ut) * (1.0 + SLACK)
    } else {
        f64::INFINITY
    };
    (lo, hi)
}

/// Half the last printed digit of `v` in a field of `width`, as nccl-tests' `getFloatStr`
/// (src/util.cu, 2.19.6) prints it: two decimals, else one, else none, else `%.1e` (width 7)
/// or `%.0e`. Older nccl-tests printed `%6.2f`, finer, so this bound holds for them too.
pub(super) fn half_ulp(v: f64, width: i32) -> f64 {
    let v = v.abs();
    let power = if v < 1.0 {
        0
    } else {
        v.log10().floor() as i32 + 1
    };
    let exp = if power < width - 2 {
        -2
    } else if power < width - 1 {
        -1
    } else if power < width + 1 {
        0
    } else if width >= 7 {
        power - 2
    } else {
        power - 1
    };
    0.5 * 10f64.powi(exp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_rounding_follows_get_float_str() {
        assert_eq!(half_ulp(215.3, 7), 0.005);
        assert_eq!(half_ulp(20299.0, 7), 0.05);
        assert_eq!(half_ulp(1234567.0, 7), 0.5);
        assert_eq!(half_ulp(12345678.0, 7), 0.5e6);
        assert_eq!(half_ulp(834.57, 6), 0.005);
        assert_eq!(half_ulp(1234.5, 6), 0.05);
        assert_eq!(half_ulp(1234567.0, 6), 0.5e6);
    }

    fn row(bytes: u64, g: [f64; 3]) -> Measured {
        Measured {
            bytes,
            time_us: g[0],
            busbw_gbps: g[2],
            in_place_busbw_gbps: None,
            wrong: Some(0),
            line: 7,
            text: "row".into(),
            groups: vec![g],
        }
    }

    #[test]
    fn printed_rows_pass_and_forged_ones_name_the_figure() {
        let ar = Some(Collective::AllReduce);
        // all_reduce_perf on 16 ranks, H100 (fixtures/fidelity/h100-2x8-ib-default-issue290.txt).
        assert_eq!(
            row_fault(&row(8388608, [114.9, 73.01, 136.89]), ar, 16),
            None
        );
        assert_eq!(row_fault(&row(8, [9.52, 0.00, 0.00]), ar, 16), None);
        let busbw = row_fault(&row(8388608, [114.9, 73.01, 1e308]), ar, 16).unwrap();
        assert!(busbw.contains("beyond any link"), "{busbw}");
        let algbw = row_fault(&row(8388608, [114.9, 173.01, 324.39]), ar, 16).unwrap();
        assert!(algbw.contains("not size / time"), "{algbw}");
        let factor = row_fault(&row(8388608, [114.9, 73.01, 100.0]), ar, 16).unwrap();
        assert!(factor.contains("algbw x 1.8750"), "{factor}");
        // A time of 1e-300 us makes any algbw impossible but infinity.
        let tiny = row_fault(&row(1 << 30, [1e-300, 5.0, 9.37]), ar, 16).unwrap();
        assert!(tiny.contains("not size / time"), "{tiny}");
    }
}
