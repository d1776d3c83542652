//! `topo verify --format nccl-tests`: the sweep printed exactly as an nccl-tests binary prints
//! it (nccl-tests 2.19.6, src/util.cu `writeBenchmarkLinePreamble`, `writeBenchmarkLineBody`,
//! `writeResultHeader`, `writeResultFooter`, `writeDeviceReport`), one block per collective,
//! so scripts and dashboards that parse nccl-tests read topo's measurements unchanged.
//! Only topo's own facts are printed: the rank lines name the backend, not a device topo did
//! not use, and a figure topo did not measure is `N/A`.

use super::{VerifyReport, VerifyRow};
use crate::types::Collective;
use std::fmt::Write;

/// What nccl-tests' run header states that the report does not hold.
#[derive(Clone, Debug)]
pub struct Header {
    pub step_factor: u64,
    pub warmup_iters: usize,
    pub iters: usize,
    /// `-c`: whether `#wrong` was counted.
    pub check: bool,
    pub hostname: String,
    pub pid: u32,
    /// `# nccl-tests version ...` stands for nccl-tests; topo says what it is instead.
    pub topo_version: String,
}

/// nccl-tests' binary for a collective.
pub fn program(c: Collective) -> &'static str {
    match c {
        Collective::AllReduce => "all_reduce_perf",
        Collective::AllGather => "all_gather_perf",
        Collective::ReduceScatter => "reduce_scatter_perf",
        Collective::Broadcast => "broadcast_perf",
        Collective::Reduce => "reduce_perf",
        Collective::AllToAll => "alltoall_perf",
        Collective::SendRecv => "sendrecv_perf",
    }
}

/// `value` in at most `width` columns the way nccl-tests' `getFloatStr` does: two decimals,
/// else one, else none, else exponent notation (C's `%.1e`: `1.2e+07`).
pub fn float_str(value: f64, width: usize) -> String {
    for prec in [2, 1, 0] {
        let s = format!("{value:>width$.prec$}");
        if s.len() <= width {
            return s;
        }
    }
    let prec = if width >= 7 { 1 } else { 0 };
    let s = format!("{value:.prec$e}");
    // Rust writes `1.2e7`; C writes `1.2e+07`.
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = e.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{:>width$}", format!("{m}e{sign}{:02}", exp.abs()))
}

/// C's `%g` for a count of wrong elements (six significant digits), as nccl-tests' `%6g`
/// writes `#wrong`: a billion reads `1.07374e+09`, which nccl-tests readers must take as a
/// count (topo-source's `nccltests::wrong_count` does).
pub fn g(v: f64) -> String {
    if v.abs() < 1e6 && v.fract() == 0.0 {
        format!("{v}")
    } else {
        let s = format!("{v:.5e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = m.trim_end_matches('0').trim_end_matches('.');
        let exp: i32 = e.parse().unwrap_or(0);
        format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

impl VerifyReport {
    /// The whole sweep in nccl-tests' layout.
    pub fn render_nccl_tests(&self, h: &Header) -> String {
        let mut o = String::new();
        let mut colls: Vec<Collective> = vec![];
        for r in &self.rows {
            if !colls.contains(&r.collective) {
                colls.push(r.collective);
            }
        }
        for c in colls {
            let rows: Vec<&VerifyRow> = self.rows.iter().filter(|r| r.collective == c).collect();
            self.block(&mut o, h, c, &rows);
        }
        o
    }

    fn block(&self, o: &mut String, h: &Header, c: Collective, rows: &[&VerifyRow]) {
        let min = rows.iter().map(|r| r.bytes).min().unwrap_or(0);
        let max = rows.iter().map(|r| r.bytes).max().unwrap_or(0);
        let _ = writeln!(
            o,
            "# topo {} verify, backend {}, transport {}, launch {} (nccl-tests 2.19 layout)",
            h.topo_version,
            self.backend,
            self.transport.name(),
            self.launch
        );
        let _ = writeln!(o, "# Collective test starting: {}", program(c));
        let _ = writeln!(
            o,
            "# nThread 1 nGpus 1 minBytes {min} maxBytes {max} step: {}(factor) warmup iters: {} iters: {} agg iters: 1 validation: {} graph: 0",
            h.step_factor,
            h.warmup_iters,
            h.iters,
            u8::from(h.check)
        );
        o.push_str("#\n# Using devices\n");
        for rank in 0..self.ranks {
            let _ = writeln!(
                o,
                "#  Rank {rank:2} Group  0 Pid {:6} on {:>10} device {rank:2} [n/a] topo {} backend, rank {rank}",
                h.pid, h.hostname, self.backend
            );
        }
        o.push_str("#\n");
        let _ = writeln!(
            o,
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          ",
            "", "", "", "", ""
        );
        let _ = writeln!(
            o,
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} ",
            "size",
            "count",
            "type",
            "redop",
            "root",
            "time",
            "algbw",
            "busbw",
            "#wrong",
            "time",
            "algbw",
            "busbw",
            "#wrong"
        );
        let _ = writeln!(
            o,
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} ",
            "(B)",
            "(elements)",
            "",
            "",
            "",
            "(us)",
            "(GB/s)",
            "(GB/s)",
            "",
            "(us)",
            "(GB/s)",
            "(GB/s)",
            ""
        );
        let (mut sum, mut n, mut wrong) = (0.0, 0usize, 0u64);
        for r in rows {
            let _ = write!(
                o,
                "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}",
                r.bytes,
                r.count,
                r.dtype.name(),
                r.redop.map_or("none", |x| x.name()),
                r.root
            );
            for m in std::iter::once(Some(&r.out_of_place)).chain([r.in_place.as_ref()]) {
                match m {
                    Some(m) => {
                        let _ = write!(
                            o,
                            "  {}  {}  {}",
                            float_str(m.time_us, 7),
                            float_str(m.algbw_gbps, 6),
                            float_str(m.busbw_gbps, 6)
                        );
                        match m.wrong {
                            Some(w) => {
                                let _ = write!(o, "  {:>6}", g(w as f64));
                                wrong += w;
                            }
                            None => o.push_str("    N/A"),
                        }
                        sum += m.busbw_gbps;
                        n += 1;
                    }
                    // An in-place figure topo did not measure.
                    None => {
                        let _ = write!(
                            o,
                            "  {:>7}  {:>6}  {:>6}  {:>6}",
                            "N/A", "N/A", "N/A", "N/A"
                        );
                    }
                }
            }
            o.push('\n');
        }
        let avg = if n > 0 { sum / n as f64 } else { 0.0 };
        let _ = writeln!(
            o,
            "# {:<20} : {wrong} {}",
            "Out of bounds values",
            if wrong > 0 { "FAILED" } else { "OK" }
        );
        let _ = writeln!(o, "# {:<20} : {} ", "Avg bus bandwidth", g6(avg));
        o.push_str("#\n");
        let _ = writeln!(o, "# Collective test concluded: {}", program(c));
        o.push('\n');
    }
}

/// C's `%g` of a bandwidth: six significant digits, trailing zeros dropped.
fn g6(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = (5 - v.abs().log10().floor() as i32).clamp(0, 15) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_fit_their_columns_as_nccl_tests_writes_them() {
        assert_eq!(float_str(215.3, 7), " 215.30");
        assert_eq!(float_str(20299.0, 7), "20299.0");
        assert_eq!(float_str(1234567.0, 7), "1234567");
        assert_eq!(float_str(12345678.0, 7), "1.2e+07");
        assert_eq!(float_str(0.05, 6), "  0.05");
        assert_eq!(float_str(834.57, 6), "834.57");
        assert_eq!(float_str(1234.5, 6), "1234.5");
        assert_eq!(float_str(1234567.0, 6), " 1e+06");
    }

    #[test]
    fn g_formats_as_c_does() {
        assert_eq!(g(0.0), "0");
        assert_eq!(g(12.0), "12");
        assert_eq!(g6(745.53), "745.53");
        assert_eq!(g6(36.548712), "36.5487");
        assert_eq!(g6(0.0), "0");
    }
}
