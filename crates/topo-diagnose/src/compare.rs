//! A log against the plan: NCCL's logged channel counts, ring order and transports next to
//! what the model predicts for the same machine, environment and version (through
//! `nccl::analyze`, the entry point `topo plan` uses).

use super::{Comparison, Input, LogInput, Report, TransportRow};
use crate::ReportExt;
use std::collections::BTreeMap;
use topo_evidence::nccllog::NcclLog;
use topo_model::message::Code;
use topo_model::{NvlinkInfo, Topology};
use topo_nccl::analyze::{self, Analysis, Request, RuntimeFacts};
use topo_nccl::transport::{PairTransport, RankPlacement};
use topo_nccl::version::{DEFAULT_VERSION, NcclVersion};

pub fn run(l: &LogInput, input: &Input, r: &mut Report) {
    let check = format!("log {} against plan", l.name);
    let Some(topo) = input.topo else {
        r.skip(
            check,
            "no machine to model: pass --from (snapshot, XML, matrix) or --profile, or a log with its `=== System` block (NCCL_DEBUG_SUBSYS=INIT,GRAPH)",
        );
        return;
    };
    if let Err(why) = plannable(topo) {
        r.skip(check, why);
        return;
    }
    let (version, vnote) = match version_of(l.log, input) {
        Ok(v) => v,
        Err(why) => {
            r.skip(check, why);
            return;
        }
    };
    let topo = scaled(topo, l.log);
    let gpus = topo.gpus().len();
    if let Some(n) = l.log.nranks()
        && n as usize != gpus
    {
        r.skip(
            check,
            format!("the log has {n} ranks but the machine model {gpus} GPUs, so ranks cannot be matched; pass a topology of the GPUs the job used"),
        );
        return;
    }
    let env = env_of(l.log, input);
    let req = Request {
        topo: &topo,
        env: env.clone(),
        version,
        placement: placement_of(l.log),
        facts: RuntimeFacts {
            cuda_driver_version: l.log.cuda_driver_version,
        },
    };
    let a = match analyze::analyze(&req) {
        Ok(a) => a,
        Err(e) => {
            r.skip(check, format!("the model failed: {}", e.message));
            return;
        }
    };
    r.model.get_or_insert(vnote);
    r.checked(check);
    counts(l, &a, r);
    transports(l, &a, r);
}

fn plannable(topo: &Topology) -> Result<(), String> {
    let gpus = topo.gpus();
    if gpus.is_empty() {
        return Err("the machine has no GPU to model".into());
    }
    for g in gpus {
        if let Some(gpu) = topo.gpu(g)
            && let NvlinkInfo::Unknown(why) = &gpu.nvlink
        {
            return Err(format!("NVLink is unknown in the topology ({why})"));
        }
    }
    Ok(())
}

/// The log's NCCL version when topo models it, else `--nccl-version`, else the version its
/// wording implies, else the default; `Err` when the log is older than topo models.
fn version_of(log: &NcclLog, input: &Input) -> Result<(NcclVersion, String), String> {
    if let Some(v) = &log.version {
        return match NcclVersion::parse(v) {
            Ok(nv) => Ok((nv, format!("NCCL {v} (from the log)"))),
            Err(_) => Err(format!(
                "the log's NCCL {v} is not a version topo models (2.18-2.30)"
            )),
        };
    }
    if let Some(Ok(v)) = input.version.as_deref().map(NcclVersion::parse) {
        return Ok((v, format!("NCCL {v} (--nccl-version)")));
    }
    match super::logversion::model_version(log)? {
        Some(v) => {
            let nv = NcclVersion::parse(v).map_err(|e| e.message)?;
            Ok((
                nv,
                format!("NCCL {v} (the latest the log's wording allows)"),
            ))
        }
        None => Ok((
            DEFAULT_VERSION,
            format!("the log names no version; compared with NCCL {DEFAULT_VERSION}"),
        )),
    }
}

/// A one-host topology replicated to the log's node count (ranks are node-major).
fn scaled(topo: &Topology, log: &NcclLog) -> Topology {
    let per_host = topo
        .gpus()
        .iter()
        .filter(|&&g| topo.node(g).host == 0)
        .count()
        .max(1) as u32;
    let nodes = log
        .nnodes()
        .or_else(|| log.nranks().map(|n| n.div_ceil(per_host)))
        .unwrap_or(1)
        .clamp(1, 64) as usize;
    if topo.host_count() == 1 && nodes > 1 {
        topo.replicate(nodes)
    } else {
        topo.clone()
    }
}

/// What the job ran with: the process/snapshot environment, then what the log says NCCL read.
fn env_of(log: &NcclLog, input: &Input) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = input.env.clone().into_iter().collect();
    for (k, (v, _)) in &log.launch_env {
        if let Some(v) = v {
            env.push((k.clone(), v.clone()));
        }
    }
    for (k, (v, _)) in &log.env {
        env.push((k.clone(), v.clone()));
    }
    env
}

/// One process per GPU unless the log shows one pid driving several ranks of a host, or
/// one-GPU containers counted as separate nodes.
fn placement_of(log: &NcclLog) -> RankPlacement {
    let mut per_pid: BTreeMap<(Option<&String>, Option<u64>), usize> = BTreeMap::new();
    for r in log.ranks.values() {
        *per_pid.entry((r.host.as_ref(), r.pid)).or_default() += 1;
    }
    let one_gpu_each = log.ranks.len() > 1
        && log.ranks.values().all(|r| r.cuda_dev == Some(0))
        && log
            .ranks
            .values()
            .any(|r| r.nvml_dev.is_some_and(|d| d > 0));
    if one_gpu_each {
        return RankPlacement::ContainerPerGpu {
            common_host_id: log.env.contains_key("NCCL_HOSTID"),
            shared_shm: false,
        };
    }
    if per_pid.values().any(|&n| n > 1) {
        return RankPlacement::ProcessPerHost;
    }
    // Without Init lines: one pid printing the lines of several sending ranks (P2P and SHM
    // lines are printed by the sender's threads).
    let mut ranks_of: BTreeMap<u64, std::collections::BTreeSet<u32>> = BTreeMap::new();
    for c in log
        .connections
        .iter()
        .filter(|c| c.direction == topo_evidence::nccllog::Direction::Both)
    {
        if let Some(pid) = c.pid {
            ranks_of.entry(pid).or_default().insert(c.from);
        }
    }
    if log.ranks.is_empty() && ranks_of.values().any(|r| r.len() > 1) {
        return RankPlacement::ProcessPerHost;
    }
    RankPlacement::ProcessPerGpu
}

fn cmp(l: &LogInput, r: &mut Report, what: &str, observed: String, expected: String) {
    r.comparisons.push(Comparison {
        log: l.name.clone(),
        what: what.into(),
        differs: observed != expected,
        observed,
        expected,
    });
}

fn counts(l: &LogInput, a: &Analysis, r: &mut Report) {
    let log = l.log;
    if let Some(nn) = log.nnodes() {
        cmp(l, r, "nodes", nn.to_string(), a.nnodes.to_string());
    }
    if let Some(c) = &log.channels {
        let e = &a.counts;
        cmp(
            l,
            r,
            "coll channels",
            c.coll.to_string(),
            e.coll.to_string(),
        );
        if let Some(n) = c.nvls {
            cmp(l, r, "nvls channels", n.to_string(), e.nvls.to_string());
        }
        cmp(l, r, "p2p channels", c.p2p.to_string(), e.p2p.to_string());
        cmp(
            l,
            r,
            "p2p channels per peer",
            c.p2p_per_peer.to_string(),
            e.p2p_per_peer.to_string(),
        );
    }
    if let Some(t) = log.trees.get(&0) {
        if log.trees_cut.contains(&0) {
            // NCCL cut the line: the log says "at least", which the model may exceed.
            r.comparisons.push(Comparison {
                log: l.name.clone(),
                what: "tree channels (rank 0)".into(),
                differs: a.counts.coll < t.len(),
                observed: format!("{}+ (line cut)", t.len()),
                expected: e_coll(a),
            });
        } else {
            cmp(
                l,
                r,
                "tree channels (rank 0)",
                t.len().to_string(),
                e_coll(a),
            );
        }
    }
    if !log.nvls_heads.is_empty() {
        // One row per head index: every rank prints every head.
        cmp(
            l,
            r,
            "NVLS heads",
            log.nvls_heads.len().to_string(),
            a.connection.nvls_heads.len().to_string(),
        );
    }
    rings(l, a, r);
    trees(l, a, r);
}

fn order_text(v: &[u32]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Two ring orders as table cells: whole up to 16 ranks, else 12 ranks from just before the
/// first difference (a 512-rank ring is not a cell).
fn order_pair(got: &[u32], want: &[u32]) -> (String, String) {
    if got.len() <= 16 {
        return (order_text(got), order_text(want));
    }
    let d = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
    let from = d.saturating_sub(4);
    let cut = |v: &[u32]| {
        let to = (from + 12).min(v.len());
        let head = if from > 0 {
            format!("[{from}..] ")
        } else {
            String::new()
        };
        let tail = if to < v.len() { " …" } else { "" };
        format!("{head}{}{tail}", order_text(&v[from..to]))
    };
    (cut(got), cut(want))
}

/// Every ring the log prints (rank 0's order per channel, and each rank's `Ring NN : prev ->
/// me -> next` GRAPH line) against the model's ring of that channel.
fn rings(l: &LogInput, a: &Analysis, r: &mut Report) {
    let log = l.log;
    let (mut same, mut all, mut first_diff) = (0usize, 0usize, None);
    for (&c, order) in &log.rings {
        let expected = ring_order(a, c);
        // NCCL 2.23+ cuts the line at 128 characters: compare what was printed.
        if expected.is_empty() || order.len() > expected.len() {
            continue;
        }
        all += 1;
        if expected[..order.len()] == order[..] {
            same += 1;
        } else if first_diff.is_none() {
            first_diff = Some((c, order.clone(), expected[..order.len()].to_vec()));
        }
    }
    if let Some((c, got, want)) = first_diff {
        cmp(
            l,
            r,
            &format!("ring {c} order"),
            order_pair(&got, &want).0,
            order_pair(&got, &want).1,
        );
    } else if let Some(order) = log.rings.get(&0).filter(|_| all > 0) {
        let (g, w) = order_pair(order, order);
        cmp(l, r, "ring 0 order", g, w);
    }
    if all > 1 {
        cmp(
            l,
            r,
            "rings as the model (channels)",
            format!("{same}/{all}"),
            format!("{all}/{all}"),
        );
    }
    let (mut same, mut all) = (0usize, 0usize);
    for (&(c, me), &(prev, next)) in &log.ring_links {
        let Some(src) = channel_src(a, c) else {
            continue;
        };
        let (Some(p), Some(n)) = (
            a.connection.prev.get(src).and_then(|v| v.get(me as usize)),
            a.connection.next.get(src).and_then(|v| v.get(me as usize)),
        ) else {
            continue;
        };
        all += 1;
        same += usize::from(*p == i64::from(prev) && *n == i64::from(next));
    }
    if all > 0 {
        cmp(
            l,
            r,
            "ring links as the model (GRAPH lines)",
            format!("{same}/{all}"),
            format!("{all}/{all}"),
        );
    }
}

/// Every `Trees [c] d/d/d->me->up` entry in the log against the model's tree of that channel.
fn trees(l: &LogInput, a: &Analysis, r: &mut Report) {
    let (mut same, mut all) = (0usize, 0usize);
    for link in l.log.trees.values().flatten() {
        let Some(src) = channel_src(a, link.channel) else {
            continue;
        };
        let Some(t) = usize::try_from(link.rank)
            .ok()
            .and_then(|me| a.connection.trees.get(src)?.get(me))
        else {
            continue;
        };
        all += 1;
        let down_log: std::collections::BTreeSet<i64> = link
            .down
            .iter()
            .map(|&d| i64::from(d))
            .filter(|&d| d >= 0)
            .collect();
        let down_model: std::collections::BTreeSet<i64> =
            t.down.iter().copied().filter(|&d| d >= 0).collect();
        same += usize::from(t.up == i64::from(link.up) && down_log == down_model);
    }
    if all > 0 {
        cmp(
            l,
            r,
            "tree links as the model (channels × ranks)",
            format!("{same}/{all}"),
            format!("{all}/{all}"),
        );
    }
}

/// The connected channel (index into the model's prev/next/trees) that final channel `c` is.
fn channel_src(a: &Analysis, c: u32) -> Option<usize> {
    a.connection.channel_src.get(c as usize).copied()
}

fn e_coll(a: &Analysis) -> String {
    a.counts.coll.to_string()
}

/// The rank order of ring channel `c` as rank 0 prints it, from the model's `next` table.
fn ring_order(a: &Analysis, c: u32) -> Vec<u32> {
    let Some(next) = channel_src(a, c).and_then(|s| a.connection.next.get(s)) else {
        return vec![];
    };
    let mut out = vec![0u32];
    let mut cur = 0usize;
    for _ in 0..next.len() {
        let n = next.get(cur).copied().unwrap_or(-1);
        if n < 0 || n as usize == 0 {
            break;
        }
        cur = n as usize;
        out.push(cur as u32);
    }
    out
}

fn transports(l: &LogInput, a: &Analysis, r: &mut Report) {
    let intra: BTreeMap<(usize, usize), &PairTransport> = a
        .transports
        .iter()
        .filter(|t| !t.inter_node)
        .map(|t| ((t.from, t.to), t))
        .collect();
    let mut inter: BTreeMap<usize, &PairTransport> = BTreeMap::new();
    for t in a.transports.iter().filter(|t| t.inter_node) {
        inter.entry(t.from).or_insert(t);
    }
    let per_host = (a.nranks / a.nnodes.max(1)).max(1);
    for ((from, to), observed) in l.log.transport_pairs() {
        let (f, t) = (from as usize, to as usize);
        let expected = if f / per_host == t / per_host {
            intra.get(&(f, t)).copied()
        } else {
            inter.get(&f).copied()
        };
        let differs =
            expected.is_some_and(|e| observed.iter().any(|o| !o.same_family(&e.transport)));
        r.transports.push(TransportRow {
            log: l.name.clone(),
            from,
            to,
            observed,
            expected: expected.map(|e| e.transport.clone()),
            differs,
            reason: expected.map(|e| e.reason.to_string()),
        });
    }
}

/// One finding for the logged counts and structures that differ from the model's: each `!`
/// of the comparison table is at least a warning, so the verdict never reads clean beside one.
pub fn count_differences(r: &mut Report) {
    let rows: Vec<String> = r
        .comparisons
        .iter()
        .filter(|c| c.differs)
        .map(|c| {
            format!(
                "{}: {}: log {}, model {}",
                c.log, c.what, c.observed, c.expected
            )
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let f = super::Finding::at(
        Code::LogDiffersFromPlan,
        super::Severity::Warning,
        format!(
            "{} logged count(s) or structure(s) differ from what the model predicts for this machine",
            rows.len()
        ),
    )
    .evidence(rows)
    .fix("the other findings say why when one applies (NVLS off, P2P refused, environment); otherwise the log came from another machine, NCCL version or environment than the one modelled: pass the machine it ran on (--from snapshot) and its NCCL_* settings (--env)");
    r.add(f);
}

/// One finding for the pairs whose transport kind differs from the model's.
pub fn differences(r: &mut Report) {
    let rows: Vec<&TransportRow> = r.transports.iter().filter(|t| t.differs).collect();
    if rows.is_empty() {
        return;
    }
    let ev: Vec<String> = rows
        .iter()
        .take(4)
        .map(|t| {
            format!(
                "{}: rank {} -> {}: {} ({})",
                t.log,
                t.from,
                t.to,
                t.log_against_model(),
                t.reason.as_deref().unwrap_or("")
            )
        })
        .chain((rows.len() > 4).then(|| format!("... and {} more pairs", rows.len() - 4)))
        .collect();
    let f = super::Finding::at(
        Code::TransportDiffersFromPlan,
        super::Severity::Warning,
        format!(
            "{} rank pair(s) use another kind of transport than the model predicts for this machine",
            rows.len()
        ),
    )
    .evidence(ev)
    .fix("the other findings say why; if none does, compare the machine the log came from with the one passed to --from");
    r.add(f);
}

#[cfg(test)]
mod tests {
    use super::order_pair;

    #[test]
    fn long_rings_are_shown_around_their_first_difference() {
        let want: Vec<u32> = (0..64).collect();
        let mut got = want.clone();
        got.swap(40, 41);
        let (g, w) = order_pair(&got, &want);
        assert_eq!(g, "[36..] 36 37 38 39 41 40 42 43 44 45 46 47 …");
        assert_eq!(w, "[36..] 36 37 38 39 40 41 42 43 44 45 46 47 …");
        assert_eq!(order_pair(&want, &want).0, order_pair(&want, &want).1);
        assert_eq!(order_pair(&[0, 2, 1], &[0, 1, 2]).0, "0 2 1");
    }
}
