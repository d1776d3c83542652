//! Measured against expected: an nccl-tests result judged size by size against the busbw topo
//! expects for the same machine, collective, node count and settings, with the band healthy
//! published results fall in (`topo-nccl/src/measured.rs`). Below the band it says which sizes,
//! how far, and the likely causes ranked by the evidence the rest of the diagnosis found.

use crate::ReportExt;
use crate::{Finding, Report, Severity};
use topo_model::message::Code;
use topo_nccl::plan::Row as PlanRow;
use topo_vocab::Net;

pub mod infer;
mod ranks;
mod sense;
mod types;
pub use sense::MAX_BUSBW_GBPS;
pub use types::{JudgedRow, Measured, RefusedRow, ResultsInput, ResultsReport, Verdict};

/// Judges `input` against the plan rows of the same sizes and adds the verdict findings.
pub fn judge(input: &ResultsInput, plan: &[PlanRow], r: &mut Report) -> ResultsReport {
    for n in &input.notes {
        r.add(n.clone());
    }
    let impossible = sense::check(input, r);
    let by_size: std::collections::HashMap<u64, &PlanRow> =
        plan.iter().rev().map(|p| (p.bytes, p)).collect();
    let mut rows: Vec<JudgedRow> = input
        .rows
        .iter()
        .filter(|m| !impossible.contains(&m.line))
        .filter_map(|m| {
            let p = *by_size.get(&m.bytes)?;
            (m.time_us > 0.0 && p.expected_time_us > 0.0).then(|| judged(m, p))
        })
        .collect();
    mark_isolated(&mut rows);
    r.checked(format!(
        "{}: {} sizes of {} against the expected band",
        input.name,
        rows.len(),
        input.collective
    ));
    // Unjudged sizes under NCCL's model still get the causes the evidence names (the run's
    // own NCCL_NET=Socket first), as context rather than a verdict.
    let short = |x: &JudgedRow| {
        x.verdict == Verdict::Below || (x.verdict == Verdict::NotJudged && x.ratio < 1.0)
    };
    let causes = if rows.iter().any(short) {
        causes(input, &rows, r)
    } else {
        vec![]
    };
    findings(input, &rows, &causes, r);
    ResultsReport {
        name: input.name.clone(),
        program: input.program.clone(),
        collective: input.collective.clone(),
        collective_basis: input.collective_basis.clone(),
        nranks: input.nranks,
        nnodes: input.nnodes,
        machine: input.machine.clone(),
        rows,
        causes,
    }
}

fn judged(m: &Measured, p: &PlanRow) -> JudgedRow {
    // measured busbw / expected busbw, from the times (same bytes, same bus factor).
    let ratio = p.expected_time_us / m.time_us;
    let band = p.expected_busbw_low_gbps.zip(p.expected_busbw_high_gbps);
    let (lo, hi) = match band {
        Some((lo, hi)) if p.expected_busbw_gbps > 0.0 => {
            (lo / p.expected_busbw_gbps, hi / p.expected_busbw_gbps)
        }
        _ => (1.0, 1.0),
    };
    let verdict = if band.is_none() {
        Verdict::NotJudged
    } else if ratio < lo {
        Verdict::Below
    } else if ratio > hi {
        Verdict::Above
    } else {
        Verdict::InBand
    };
    JudgedRow {
        bytes: m.bytes,
        measured_busbw_gbps: if m.busbw_gbps > 0.0 {
            m.busbw_gbps
        } else {
            p.expected_busbw_gbps * ratio
        },
        in_place_busbw_gbps: m.in_place_busbw_gbps,
        expected_busbw_gbps: p.expected_busbw_gbps,
        low_gbps: p.expected_busbw_low_gbps,
        high_gbps: p.expected_busbw_high_gbps,
        choice: format!("{}/{}", p.algo, p.proto),
        verdict,
        ratio,
        expected_basis: p.expected_basis.clone(),
        band_basis: p.expected_band_basis.clone(),
    }
}

/// A verdict needs more than one row out of band. A shortfall at one size between two that
/// are not short is not the machine, at any size: it is where NCCL switches algorithm or
/// protocol (a crossover), which the model can place one size off the real NCCL's (its
/// tuning moves between versions), or one row's timing noise. At the ends of the table a
/// lone row counts as before: under 16 MB it is noise (the first size carries launch
/// overhead), at 16 MB and up it is the bandwidth the run peaks at, which users quote. Two
/// short sizes in a row are the machine. A table of one or two sizes has no neighbours to
/// tell noise by, so its shortfalls count.
fn mark_isolated(rows: &mut [JudgedRow]) {
    if rows.len() < 3 {
        return;
    }
    let below: Vec<bool> = rows.iter().map(|r| r.verdict == Verdict::Below).collect();
    for i in 0..rows.len() {
        let prev = i > 0 && below[i - 1];
        let next = i + 1 < rows.len() && below[i + 1];
        let interior = i > 0 && i + 1 < rows.len();
        if below[i] && !prev && !next && (interior || rows[i].bytes < LARGE) {
            rows[i].verdict = Verdict::Isolated;
        }
    }
}

pub use topo_vocab::size_label;

/// A busbw to three significant figures (`0.0123`, `4.56`, `437.9`).
pub fn gbps(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.1}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

const LARGE: u64 = 16 << 20;
const SMALL: u64 = 64 << 10;

fn findings(input: &ResultsInput, rows: &[JudgedRow], causes: &[String], r: &mut Report) {
    wrong_results(input, r);
    let below: Vec<&JudgedRow> = rows
        .iter()
        .filter(|x| x.verdict == Verdict::Below)
        .collect();
    let above = rows.iter().filter(|x| x.verdict == Verdict::Above).count();
    let isolated = rows
        .iter()
        .filter(|x| x.verdict == Verdict::Isolated)
        .count();
    if rows.is_empty() {
        r.skip(
            format!("{}: measured against expected", input.name),
            "no measured size is one the plan could price",
        );
        return;
    }
    let unjudged = rows
        .iter()
        .filter(|x| x.verdict == Verdict::NotJudged)
        .count();
    if unjudged == rows.len() {
        let last = &rows[rows.len() - 1];
        let title = format!(
            "{} not judged: {}; at {} it measured {} GB/s where NCCL's model gives {}",
            input.collective,
            last.band_basis.trim_start_matches("no band: "),
            size_label(last.bytes),
            gbps(last.measured_busbw_gbps),
            gbps(last.expected_busbw_gbps)
        );
        r.add(
            Finding::new(Code::NcclTestsNotJudged, title)
                .fix(causes.first().cloned().unwrap_or_default()),
        );
        return;
    }
    if below.is_empty() {
        let mut title = format!(
            "{} of {} sizes in the expected band",
            rows.len() - above - isolated - unjudged,
            rows.len()
        );
        if unjudged > 0 {
            title.push_str(&format!(", {unjudged} not judged (no band)"));
        }
        if isolated > 0 {
            title.push_str(&format!(
                ", {isolated} alone below it (a crossover size or one row's timing noise)"
            ));
        }
        if above > 0 {
            title.push_str(&format!(", {above} above it (faster than topo expects: the model is pessimistic there, not the machine at fault)"));
        }
        r.add(Finding::new(Code::NcclTestsInBand, title));
        return;
    }
    let worst = below
        .iter()
        .min_by(|a, b| a.ratio.total_cmp(&b.ratio))
        .expect("below is not empty");
    let large = below.iter().any(|x| x.bytes >= LARGE);
    let severity = if large {
        Severity::Error
    } else {
        Severity::Warning
    };
    let title = format!(
        "{} busbw is below the expected band at {} of {} sizes ({}); worst at {}: {} GB/s, expected {} ({}-{}), {:.0}% under",
        input.collective,
        below.len(),
        rows.len(),
        ranges(rows),
        size_label(worst.bytes),
        gbps(worst.measured_busbw_gbps),
        gbps(worst.expected_busbw_gbps),
        gbps(worst.low_gbps.unwrap_or(0.0)),
        gbps(worst.high_gbps.unwrap_or(0.0)),
        (1.0 - worst.ratio) * 100.0
    );
    let evidence = input
        .rows
        .iter()
        .filter(|m| below.iter().any(|b| b.bytes == m.bytes))
        .take(4)
        .map(|m| crate::quote(&input.name, m.line, &m.text))
        .collect::<Vec<_>>();
    r.add(
        Finding::at(Code::NcclTestsBelowBand, severity, title)
            .evidence(evidence)
            .fix(causes.first().cloned().unwrap_or_default()),
    );
}

/// `8M-64M, 1G`: the runs of consecutive measured sizes below the band.
fn ranges(rows: &[JudgedRow]) -> String {
    let mut out: Vec<String> = vec![];
    for run in rows.chunk_by(|a, b| (a.verdict == Verdict::Below) == (b.verdict == Verdict::Below))
    {
        if run[0].verdict != Verdict::Below {
            continue;
        }
        let (first, last) = (run[0].bytes, run[run.len() - 1].bytes);
        out.push(if first == last {
            size_label(first)
        } else {
            format!("{}-{}", size_label(first), size_label(last))
        });
    }
    out.join(", ")
}

fn wrong_results(input: &ResultsInput, r: &mut Report) {
    let wrong: Vec<&Measured> = input
        .rows
        .iter()
        .filter(|m| m.wrong.is_some_and(|w| w > 0))
        .collect();
    let oob = input.out_of_bounds.filter(|n| *n > 0);
    if wrong.is_empty() && oob.is_none() {
        return;
    }
    let mut evidence: Vec<String> = wrong
        .iter()
        .take(4)
        .map(|m| crate::quote(&input.name, m.line, &m.text))
        .collect();
    if let Some(n) = oob {
        evidence.push(format!(
            "{}: # Out of bounds values : {n} FAILED",
            input.name
        ));
    }
    r.add(
        Finding::new(Code::NcclTestsWrongResults, format!(
                "nccl-tests found wrong values ({} sizes with #wrong > 0): the collective corrupts data, whatever its speed",
                wrong.len()
            ),
        )
        .evidence(evidence)
        .fix("rerun with NCCL_DEBUG=INFO and -c 1; check GPU memory errors (nvidia-smi -q -d ECC,ROW_REMAPPER), NVLink errors (nvidia-smi nvlink -e) and the NIC firmware; disable transports one at a time (NCCL_P2P_DISABLE=1, NCCL_NET_GDR_LEVEL=LOC) to find the one that corrupts"),
    );
}

/// The codes of this check's own findings (not causes of a shortfall).
fn is_results_code(c: Code) -> bool {
    matches!(
        c,
        Code::NcclTestsBelowBand
            | Code::NcclTestsInBand
            | Code::NcclTestsNotJudged
            | Code::NcclTestsWrongResults
            | Code::NcclTestsImpossibleRows
            | Code::NcclTestsRanksDisagree
            | Code::NcclTestsSettingIgnored
            | Code::NcclTestsSizeFromCount
    )
}

/// Likely causes, most likely first: what the diagnosis already proved, then the run's own
/// settings, then what the shape of the shortfall points at.
fn causes(input: &ResultsInput, rows: &[JudgedRow], r: &Report) -> Vec<String> {
    let forced = input
        .env
        .iter()
        .any(|(k, _)| k == "NCCL_ALGO" || k == "NCCL_PROTO");
    // The most specific evidence first: the same run carried the other choices' rates.
    let mut out: Vec<String> = choice_cause(rows, input.nnodes > 1)
        .filter(|_| !forced)
        .into_iter()
        .collect();
    out.extend(
        r.findings
            .iter()
            .filter(|f| f.severity >= Severity::Warning && !is_results_code(f.code))
            .map(|f| format!("{} ({}): {}", f.code, f.severity.name(), f.text)),
    );
    out.extend(setting_causes(&input.env));
    out.extend(magnitude_cause(input, rows));
    out.push(shape_cause(input, rows));
    out
}

/// A shortfall that follows NCCL's choice: every size under the band is one where NCCL picks
/// one algorithm and protocol, no size under another choice is under it, some are judged in
/// band or above, the choice is not the one of the largest size (a bandwidth shortfall
/// reaches the largest sizes whatever the choice) and a size above 64 KB is short (below
/// that it is latency). The run's links carried the other choices'
/// rates, so what is slow is that choice on this machine: NCCL's model prices it for a fabric
/// or plugin it does not measure. Seen in the shared set on ALCF Polaris: NCCL 2.21 picks
/// Ring/LL at 256 KB-4 MB on 8 nodes and takes 1-2 ms a call, where 2.18 on the same nodes and
/// settings picks Tree/Simple and takes 0.25-1 ms.
fn choice_cause(table: &[JudgedRow], multi_node: bool) -> Option<String> {
    // By size: an excerpt may list its rows out of order.
    let mut rows: Vec<&JudgedRow> = table.iter().collect();
    rows.sort_by_key(|x| x.bytes);
    let below: Vec<&JudgedRow> = rows
        .iter()
        .copied()
        .filter(|x| x.verdict == Verdict::Below)
        .collect();
    let c = below.first()?.choice.as_str();
    // Only small sizes short is latency (`shape_cause`), whatever protocol carries them.
    let latency = below.iter().all(|x| x.bytes <= SMALL);
    if latency || below.iter().any(|x| x.choice != c) || rows.last()?.choice == c {
        return None;
    }
    let good = |x: &JudgedRow| matches!(x.verdict, Verdict::InBand | Verdict::Above);
    let first = rows.iter().position(|x| x.choice == c)?;
    let last = rows.iter().rposition(|x| x.choice == c)?;
    // The nearest in-band size under another choice, above the choice's sizes first (the
    // choice NCCL takes next as sizes grow), else below them.
    let next = rows[last + 1..]
        .iter()
        .chain(rows[..first].iter().rev())
        .copied()
        .find(|x| x.choice != c && good(x))?;
    let (algo, proto) = c.split_once('/')?;
    let (n_algo, n_proto) = next.choice.split_once('/')?;
    let force = if n_algo != algo {
        format!("NCCL_ALGO={n_algo}")
    } else {
        format!("NCCL_PROTO={n_proto}")
    };
    let span = |keep: &dyn Fn(&JudgedRow) -> bool| {
        let r: Vec<f64> = rows.iter().filter(|x| keep(x)).map(|x| x.ratio).collect();
        let (lo, hi) = r
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        format!("{:.0}-{:.0}%", lo * 100.0, hi * 100.0)
    };
    Some(format!(
        "NCCL's choice of {algo}/{proto}: the sizes under the band ({}) are {} of the {} where NCCL picks it, which run at {} of the expected rate, where every size judged under another choice is in band or above ({}; {} at {}): the links carry the rate, {algo}/{proto} is what is slow on this machine (NCCL's model prices it {}, and its choices move between NCCL versions); rerun with {force} to compare (`topo plan --env {force}` gives what topo expects of it)",
        ranges(table),
        below.len(),
        rows.iter().filter(|x| x.choice == c).count(),
        span(&|x| x.choice == c),
        span(&|x| x.choice != c && good(x)),
        next.choice,
        size_label(next.bytes),
        if multi_node {
            "for a fabric or net plugin it does not measure"
        } else {
            "from the links' bandwidths, not from a measurement of this box"
        },
    ))
}

/// What the depth of a shortfall at 16 MB and up points at, most likely first: each layer
/// between two nodes caps the rate at its own fraction, so the fraction ranks the candidates.
/// From the shared set's published results: NCCL's TCP socket transport on Slingshot nodes
/// reaches 9-26% of what the libfabric plugin reaches on the same nodes (ALCF Polaris setups 1-2
/// against 3-5), host-staged RoCE without GPUDirect about 20% of the line rate (gt-violet); a
/// NIC list with 4 good rails of 8 reaches 50% (the misconfigured Together B200 pair), ACS on
/// the NIC path about half (nccl-tests#112); VMs with passed-through NICs 56-83% of the same
/// machines bare (nccl-tests#380, #156, nccl#2171). On one node: P2P through host memory under
/// 35%, else NVLink or PCIe lanes. The median ratio of the large sizes below the band decides;
/// a shortfall only under 16 MB is latency, left to `shape_cause`.
fn magnitude_cause(input: &ResultsInput, rows: &[JudgedRow]) -> Option<String> {
    let mut large: Vec<f64> = rows
        .iter()
        .filter(|x| x.bytes >= LARGE && x.verdict == Verdict::Below)
        .map(|x| x.ratio)
        .collect();
    if large.is_empty() {
        return None;
    }
    large.sort_by(f64::total_cmp);
    let r = large[large.len() / 2];
    let at = format!("at {:.0}% of the expected rate", r * 100.0);
    let text = match (input.nnodes > 1, r) {
        (true, r) if r < 0.15 => format!(
            "fabric: {at} the data most likely did not travel over RDMA: NCCL's TCP socket transport (no net plugin for EFA or Slingshot loaded: NCCL_NET, the aws-ofi-nccl plugin; NCCL_IB_DISABLE=1; no verbs device) reaches a few GB/s; then GPUDirect RDMA off; NCCL_DEBUG=INFO's `via NET/` lines name the transport"
        ),
        (true, r) if r < 0.35 => format!(
            "fabric or GPUDirect RDMA: {at}, what the socket transport or host-staged copies reach (GPUDirect RDMA off: nvidia-peermem not loaded, NCCL_NET_GDR_LEVEL, ACS redirecting peer traffic); NCCL_DEBUG=INFO's `via NET/` lines and `GDRDMA` tags say which; then a part of the rails"
        ),
        (true, r) if r < 0.75 => format!(
            "rails, ACS or a VM on the network path: {at}, a part of the rails carries the traffic (NICs left out or wrong in NCCL_IB_HCA, ports trained down: ibstat's rate), ACS on the NIC's PCIe path (halves it), or NICs passed into a VM (56-83% of the same machine bare); `ibstat` on every node and NCCL_DEBUG=INFO's `NET/IB` device list"
        ),
        (true, _) => format!(
            "a VM or the network: {at}, every rail runs but under its rate: NICs passed into a VM, adaptive routing off, one QP per connection (NCCL_IB_QPS_PER_CONNECTION), an oversubscribed spine; ib_write_bw between two nodes"
        ),
        (false, r) if r < 0.35 => format!(
            "P2P through the host: {at} on one node, GPU pairs copy through host memory (P2P disabled or refused, a VM without P2P, ACS on the PCIe switches)"
        ),
        (false, _) => format!(
            "NVLink or PCIe lanes: {at} on one node, some links run under their width or speed (`nvidia-smi nvlink -s`, `lspci -vv` LnkSta)"
        ),
    };
    Some(text)
}

fn setting_causes(env: &[(String, String)]) -> Vec<String> {
    let get = |k: &str| {
        env.iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let mut out = vec![];
    let net = get("NCCL_NET").map(|v| (v, Net::from_nccl_net(v)));
    if let Some((v, _)) = net.as_ref().filter(|(_, n)| matches!(n, Net::Plugin(_))) {
        out.push(format!("NCCL_NET={v}: the run went through a net plugin (EFA, Slingshot or another fabric), which the expected value prices as the machine's own NICs unless the fabric is stated"));
    }
    if let Some(v) = get("NCCL_IB_HCA") {
        out.push(format!("NCCL_IB_HCA={v} chooses the NICs NCCL uses: a NIC missing from it, or one listed that is slower (a port trained down, an Ethernet port in an InfiniBand list), caps every rail; compare it with `ibstat` on each node"));
    }
    if net.as_ref().is_some_and(|(_, n)| *n == Net::Socket) || get("NCCL_IB_DISABLE") == Some("1") {
        out.push("the run used NCCL's socket transport (NCCL_NET=Socket or NCCL_IB_DISABLE=1): it copies through host memory and TCP, and the expected value assumes the NICs' RDMA rate, which sockets do not reach; use the IB/RoCE plugin".to_string());
    }
    for (k, why) in [
        (
            "NCCL_P2P_DISABLE",
            "P2P is off: GPU pairs go through host memory (SHM)",
        ),
        (
            "NCCL_SHM_DISABLE",
            "SHM is off: pairs without P2P go through the network",
        ),
        (
            "NCCL_NET_GDR_LEVEL",
            "GPUDirect RDMA is limited by NCCL_NET_GDR_LEVEL",
        ),
        ("NCCL_MAX_NCHANNELS", "channels are capped"),
        ("NCCL_MAX_CTAS", "CTAs (channels) are capped"),
        (
            "NCCL_MIN_CTAS",
            "NCCL_MIN_CTAS forces more CTAs than NCCL picks, which costs latency at small sizes",
        ),
        (
            "NCCL_NCHANNELS_PER_NET_PEER",
            "channels per network peer are set",
        ),
        ("NCCL_ALGO", "the algorithm is forced"),
        ("NCCL_PROTO", "the protocol is forced"),
    ] {
        if let Some(v) = get(k) {
            out.push(format!(
                "{k}={v} is set: {why}; rerun without it to compare"
            ));
        }
    }
    out
}

fn shape_cause(input: &ResultsInput, rows: &[JudgedRow]) -> String {
    let below = |f: &dyn Fn(u64) -> bool| {
        rows.iter()
            .filter(|x| f(x.bytes))
            .any(|x| x.verdict == Verdict::Below)
    };
    let (small, large) = (below(&|b| b <= SMALL), below(&|b| b >= LARGE));
    match (small, large, input.nnodes > 1) {
        (_, true, true) => "large sizes under the band on several nodes: the network side (NIC link rate, GPUDirect RDMA off, NIC-to-GPU rail mapping, RoCE/IB congestion control, a slow or flapping port); run the same test on one node: in band there puts it on the network".into(),
        (_, true, false) => "large sizes under the band on one node: the GPU interconnect (NVLink down or degraded, P2P through the CPU, PCIe downtrained or behind a virtual bridge, SHM instead of P2P); `topo show` and `nvidia-smi topo -m` on the machine, `nvidia-smi nvlink -s`".into(),
        (true, false, _) => "only small sizes under the band: latency, not bandwidth (CPU binding of the ranks, launch overhead, a proxy thread on a busy core, fewer protocols allowed); check numactl/taskset of the ranks and NCCL_PROTO".into(),
        _ => "mid sizes under the band: the pipeline does not fill (few channels, a protocol switch later than NCCL's model); compare NCCL_DEBUG=INFO's channel count with `topo plan`".into(),
    }
}

#[cfg(test)]
mod tests;
