//! What each environment variable changed: the plan is computed again without the variable
//! (a differential run; the analysis is pure and deterministic) and the two plans are
//! compared on what a user acts on — channel counts, transports by class, NICs used, the
//! algorithm/protocol per planned size, and predicted time and busbw. A variable "changed
//! nothing" only when the two plans agree on all of these.
//!
//! Variables the model does not read are still listed: known NCCL variables as "not
//! modelled" with what NCCL uses them for, unknown `NCCL_` names with the nearest known
//! name (`data/env_vars.yaml`).

use crate::analyze::{self, Analysis, Request, RuntimeFacts};
use crate::env::{EnvEntry, VARIABLES};
use crate::error::Result;
use crate::plan::{Plan, PlanRequest};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use topo_model::Topology;
use topo_model::message::Code;
use topo_model::message::{Finding, Severity};

/// One NCCL variable topo knows of but does not model, with what NCCL uses it for.
#[derive(Clone, Debug, Deserialize)]
pub struct KnownVar {
    pub name: String,
    pub r#use: String,
}

#[derive(Debug, Deserialize)]
struct KnownVars {
    variables: Vec<KnownVar>,
}

/// The variables NCCL reads (documented list plus `NCCL_PARAM`s of src/, NCCL 2.28), as data.
pub fn known_vars() -> &'static [KnownVar] {
    static VARS: OnceLock<Vec<KnownVar>> = OnceLock::new();
    VARS.get_or_init(|| {
        yaml_serde::from_str::<KnownVars>(include_str!("../data/env_vars.yaml"))
            .map(|k| k.variables)
            .unwrap_or_default()
    })
}

/// Levenshtein distance (small strings).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The nearest name NCCL reads, when it is close enough to be a misspelling.
pub fn did_you_mean(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    let mut best: Option<(usize, &'static str)> = None;
    let names = VARIABLES
        .iter()
        .copied()
        .chain(known_vars().iter().map(|k| k.name.as_str()));
    for n in names {
        let d = distance(&upper, n);
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, n));
        }
    }
    // At most a third of the name, and never more than 3 edits.
    best.filter(|(d, _)| *d <= 3 && *d * 3 <= name.len())
        .map(|(_, n)| n)
}

/// NCCL_* names that container images set as labels, not settings: NVIDIA's CUDA and
/// framework images (nvidia/cuda, NGC PyTorch) export `NCCL_VERSION` for the NCCL they ship.
/// NCCL reads none of them, and they are no misspelling to warn about.
pub const CONTAINER_LABELS: &[&str] = &["NCCL_VERSION"];

/// How a plan classifies a variable it was given.
pub fn classify(name: &str) -> Option<EnvEntry> {
    if VARIABLES.contains(&name) || CONTAINER_LABELS.contains(&name) {
        return None;
    }
    if let Some(k) = known_vars().iter().find(|k| k.name == name) {
        return Some(EnvEntry {
            name: name.into(),
            value: String::new(),
            effect: Some(format!("not modelled: NCCL uses it for {}", k.r#use)),
            status: "not_modelled".into(),
            changes: vec![],
            origin: None,
        });
    }
    if !name.starts_with("NCCL_") {
        return None;
    }
    let hint = match did_you_mean(name) {
        Some(n) => format!("; did you mean {n}?"),
        None => String::new(),
    };
    Some(EnvEntry {
        name: name.into(),
        value: String::new(),
        effect: Some(format!("unknown: NCCL does not read {name}{hint}")),
        status: "unknown".into(),
        changes: vec![],
        origin: None,
    })
}

fn nics(p: &Plan) -> BTreeSet<String> {
    // Each distinct name copied once: a 16,384-host plan has a million pairs.
    // Runs of one name inserted once: neighbouring pairs mostly share their NIC, and
    // collecting a million names to sort them was most of the comparison.
    let mut names: BTreeSet<&str> = BTreeSet::new();
    let mut last = None;
    for nic in p.transports.iter().filter_map(|t| t.nic()) {
        if last != Some(nic) {
            names.insert(nic);
            last = Some(nic);
        }
    }
    names.into_iter().map(String::from).collect()
}

/// The NETs a ring or tree channel enters and leaves by, where they differ, as NCCL's graph
/// print names them (`NET/1-0`: the NIC names repeat on every host of a fused node). A
/// different channel count is reported with the channels.
fn graph_nets(without: &Plan, with: &Plan) -> Vec<String> {
    let pairs = [
        ("ring", &without.graphs.ring, &with.graphs.ring),
        ("tree", &without.graphs.tree, &with.graphs.tree),
    ];
    let ends = |e: &Option<(String, String)>| e.as_ref().map(|(a, b)| format!("{a} -> {b}"));
    let mut out = vec![];
    for (name, a, b) in pairs {
        if a.nchannels != b.nchannels || a.net_ends.len() != b.net_ends.len() {
            continue;
        }
        let moved: Vec<(String, String)> = a
            .net_ends
            .iter()
            .zip(&b.net_ends)
            .filter_map(|(x, y)| Some((ends(x)?, ends(y)?)))
            .filter(|(x, y)| x != y)
            .collect();
        if let Some((x, y)) = moved.first() {
            out.push(format!(
                "{name} graph NETs: {} of {} channels change (e.g. {x} becomes {y})",
                moved.len(),
                a.nchannels
            ));
        }
    }
    out
}

fn gb(v: f64) -> String {
    format!("{v:.1}")
}

/// What differs from `without` (the plan with the variable removed) to `with`, one line each.
pub fn compare(without: &Plan, with: &Plan) -> Vec<String> {
    let mut out = vec![];
    let (a, b) = (&without.channels, &with.channels);
    let counts = [
        ("coll", a.coll, b.coll),
        ("nvls", a.nvls, b.nvls),
        ("collnet", a.collnet, b.collnet),
        ("p2p", a.p2p, b.p2p),
        ("p2p per peer", a.p2p_per_peer, b.p2p_per_peer),
    ];
    let ch: Vec<String> = counts
        .iter()
        .filter(|(_, x, y)| x != y)
        .map(|(n, x, y)| format!("{n} {x} -> {y}"))
        .collect();
    if !ch.is_empty() {
        out.push(format!("channels: {}", ch.join(", ")));
    }
    if without.rings != with.rings && !ch.iter().any(|c| c.starts_with("coll ")) {
        out.push("ring orders changed".into());
    }
    let (ta, tb) = (
        &without.transport_summary.counts,
        &with.transport_summary.counts,
    );
    if ta != tb {
        let fmt = |m: &BTreeMap<crate::transport::Transport, usize>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(format!("transports: {} -> {}", fmt(ta), fmt(tb)));
    } else if without
        .transports
        .iter()
        .map(|t| &t.log_form)
        .ne(with.transports.iter().map(|t| &t.log_form))
    {
        let g = |p: &Plan| p.transport_summary.gdr;
        let r = |p: &Plan| p.transport_summary.read;
        let x = |p: &Plan| p.transport_summary.pxn;
        let mut d = vec![];
        if g(without) != g(with) {
            d.push(format!("GDRDMA {} -> {}", g(without), g(with)));
        }
        if r(without) != r(with) {
            d.push(format!("P2P read {} -> {}", r(without), r(with)));
        }
        if x(without) != x(with) {
            d.push(format!("PXN {} -> {}", x(without), x(with)));
        }
        if d.is_empty() {
            d.push("connection details".into());
        }
        out.push(format!("transports: {}", d.join(", ")));
    }
    out.extend(graph_nets(without, with));
    let (na, nb) = (nics(without), nics(with));
    if na != nb {
        let list = |s: &BTreeSet<String>| {
            if s.is_empty() {
                "none".to_string()
            } else {
                s.iter().cloned().collect::<Vec<_>>().join(" ")
            }
        };
        out.push(format!(
            "NICs used: {} ({}) -> {} ({})",
            na.len(),
            list(&na),
            nb.len(),
            list(&nb)
        ));
    }
    for (ra, rb) in without.table.iter().zip(&with.table) {
        let mut d = vec![];
        if (&ra.algo, &ra.proto) != (&rb.algo, &rb.proto) {
            d.push(format!(
                "{}/{} -> {}/{}",
                ra.algo, ra.proto, rb.algo, rb.proto
            ));
        }
        if ra.nchannels != rb.nchannels {
            d.push(format!("{} -> {} channels", ra.nchannels, rb.nchannels));
        }
        if gb(ra.busbw_gbps) != gb(rb.busbw_gbps) || (ra.time_us - rb.time_us).abs() >= 0.05 {
            d.push(format!(
                "{:.1} -> {:.1} us, busbw {} -> {} GB/s",
                ra.time_us,
                rb.time_us,
                gb(ra.busbw_gbps),
                gb(rb.busbw_gbps)
            ));
        }
        if !d.is_empty() {
            out.push(format!(
                "{} {}: {}",
                ra.collective.cli_name(),
                human(ra.bytes),
                d.join(", ")
            ));
        }
    }
    if without.table.len() != with.table.len() {
        out.push("planned rows differ".into());
    }
    out
}

fn human(b: u64) -> String {
    const U: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (s, n) in U {
        if b >= s && b.is_multiple_of(s) {
            return format!("{}{n}", b / s);
        }
    }
    format!("{b}B")
}

/// The sentence for a variable whose differential run changed nothing, with the reasons the
/// model recorded (`notes`, e.g. "ignored: …") or the default it equals.
pub fn unchanged(notes: &[String], default: Option<String>) -> String {
    let mut why: Vec<String> = notes.to_vec();
    if let Some(d) = default {
        why.push(d);
    }
    if why.is_empty() {
        "changed nothing in this plan (without it: same channels, transports, NICs, choices and predicted times)".into()
    } else {
        format!("changed nothing in this plan: {}", why.join("; "))
    }
}

/// The VM artefacts of `topo` as messages, and what they caused: a differential run on the
/// same topology with them repaired (`vm::repaired`), compared as an environment variable's
/// run is.
pub(crate) fn vm_effects(
    topo: &Topology,
    req: &PlanRequest,
    facts: &RuntimeFacts,
    plan: &mut Plan,
) {
    let a = crate::vm::find(topo);
    let mut msgs = crate::vm::messages(topo, &a);
    if a.repairable() {
        let fixed = crate::vm::repaired(topo, &a);
        let what = "the same machine with its bridges at their devices' link and its GPU links at their generation's";
        let (severity, text) = match plan_on(&fixed, req, facts) {
            Ok(bare) => {
                let changes = compare(&bare, plan);
                if changes.is_empty() {
                    (
                        Severity::Info,
                        format!(
                            "the VM artefacts changed nothing in this plan: {what} plans the same channels, transports, NICs, choices and predicted times"
                        ),
                    )
                } else {
                    (
                        Severity::Warning,
                        format!(
                            "what the VM artefacts caused, against {what}: {}",
                            changes.join("; ")
                        ),
                    )
                }
            }
            Err(e) => (
                Severity::Warning,
                format!("{what} cannot be planned ({e}), so what the VM caused is unknown"),
            ),
        };
        msgs.push(Finding::at(Code::VmCaused, severity, text));
    }
    // v1's `warnings[]` holds warnings only; notes are in `messages[]` (and the text's `note:`).
    plan.warnings.extend(
        msgs.iter()
            .filter(|m| m.severity >= Severity::Warning)
            .map(|m| m.text.clone()),
    );
    plan.messages.extend(msgs);
}

/// Whether some network port's GPUDirect RDMA is left unstated by the source.
pub(crate) fn gdr_unknown(topo: &Topology) -> bool {
    // One copy's ports answer for its unchanged copies (`Topology::asked_nodes`).
    topo.asked_nodes()
        .into_iter()
        .any(|n| topo.net(n).is_some_and(|x| x.gdr_unstated))
}

/// Whether some network port's speed is left unstated by the source.
pub(crate) fn speed_unknown(topo: &Topology) -> bool {
    topo.asked_nodes()
        .into_iter()
        .any(|n| topo.net(n).is_some_and(|x| x.speed_mbps.is_none()))
}

/// The speed the other outcome of an unknown port speed is planned at: the fastest NIC port
/// shipped in GPU servers today (ConnectX-7/8 at 400 Gb/s), where the plan itself assumed the
/// XML reader's slow default; between them lies every speed a real port can report.
const FAST_PORT_MBPS: u64 = 400_000;

/// A plan that took a default for a fact its source leaves out also gives the other outcome,
/// so the assumption is never silently decisive: ports without `gdr` were planned without (ports topo assumed: with)
/// GPUDirect RDMA, and the same machine with it is planned too (`net-gdr-unknown`); ports
/// without a speed were planned at NCCL's slow default, and the same machine at
/// FAST_PORT_MBPS is planned too (`net-speed-unknown`). Each message then says what the
/// other outcome changes, or that it changes nothing.
pub(crate) fn unknown_effects(
    topo: &Topology,
    req: &PlanRequest,
    facts: &RuntimeFacts,
    plan: &mut Plan,
) {
    use topo_model::stated::Stated;
    // The other outcome of an unknown GDR is the one the plan did not price: without it
    // where every unknown port is one topo assumed (priced with it), else with it.
    let gdr_priced_on = crate::plan::gdr_unknown_kinds(topo) == (true, false);
    let gdr = Stated {
        gdr: Some(!gdr_priced_on),
        ..Default::default()
    };
    let gdr_label = if gdr_priced_on {
        "Without GPUDirect RDMA on those ports"
    } else {
        "With GPUDirect RDMA on those ports"
    };
    let speed = Stated {
        nic_speed_mbps: Some(FAST_PORT_MBPS),
        ..Default::default()
    };
    let fast = format!("With {} Gb/s on those ports", FAST_PORT_MBPS / 1000);
    let cases = [
        (gdr_unknown(topo), gdr, Code::NetGdrUnknown, gdr_label),
        (
            speed_unknown(topo),
            speed,
            Code::NetSpeedUnknown,
            fast.as_str(),
        ),
    ];
    for (unknown, stated, code, label) in cases {
        if unknown {
            let outcome = other_outcome(topo, &stated, req, facts, plan, label);
            append_to(plan, code, &outcome);
        }
    }
}

/// What the plan of `topo` with `stated` applied changes against `plan`, in one sentence
/// that starts with `label`.
fn other_outcome(
    topo: &Topology,
    stated: &topo_model::stated::Stated,
    req: &PlanRequest,
    facts: &RuntimeFacts,
    plan: &Plan,
    label: &str,
) -> String {
    let mut with = topo.clone();
    stated.apply(&mut with);
    match plan_on(&with, req, facts) {
        Ok(p) => {
            let changes = compare(plan, &p);
            if changes.is_empty() {
                format!("{label} the plan is the same")
            } else {
                format!("{label}: {}", changes.join("; "))
            }
        }
        Err(e) => format!("{label} the plan fails ({e})"),
    }
}

/// Appends `text` to every message of `code`, and to the v1 warning that mirrors it.
fn append_to(plan: &mut Plan, code: Code, text: &str) {
    for m in plan.messages.iter_mut().filter(|m| m.code == code) {
        let old = m.text.clone();
        m.text = format!("{old}. {text}");
        for w in plan.warnings.iter_mut().filter(|w| **w == old) {
            *w = m.text.clone();
        }
    }
}

/// The plan of `topo` for `req` (no what-if runs of its own).
fn plan_on(topo: &Topology, req: &PlanRequest, facts: &RuntimeFacts) -> Result<Plan> {
    let mut a = analyze::analyze(&Request {
        topo,
        env: req.env.clone(),
        version: req.version,
        placement: req.placement.clone(),
        facts: facts.clone(),
    })?;
    crate::plan::build(&mut a, req)
}

/// The plan with every pair naming `var` removed from the environment.
fn plan_without(
    topo: &Topology,
    req: &PlanRequest,
    facts: &RuntimeFacts,
    var: &str,
) -> Result<Plan> {
    let mut r = req.clone();
    r.env.retain(|(k, _)| k != var);
    let mut a = analyze::analyze(&Request {
        topo,
        env: r.env.clone(),
        version: r.version,
        placement: r.placement.clone(),
        facts: facts.clone(),
    })?;
    crate::plan::build(&mut a, &r)
}

/// What the version does when `var` is unset, where a value equal to it explains "nothing".
fn default_of(a: &Analysis, var: &str) -> Option<i64> {
    let d = &a.data.defaults;
    Some(match var {
        "NCCL_NVLS_ENABLE" => d.nvls_enable,
        "NCCL_CUMEM_ENABLE" => d.cumem_enable,
        "NCCL_CROSS_NIC" => d.cross_nic,
        "NCCL_COLLNET_ENABLE" => d.collnet_enable,
        "NCCL_PAT_ENABLE" => d.pat_enable?,
        "NCCL_P2P_DISABLE"
        | "NCCL_SHM_DISABLE"
        | "NCCL_IB_DISABLE"
        | "NCCL_PXN_DISABLE"
        | "NCCL_NVB_DISABLE"
        | "NCCL_NET_DISABLE_INTRA"
        | "NCCL_P2P_DIRECT_DISABLE"
        | "NCCL_P2P_USE_CUDA_MEMCPY"
        | "NCCL_IGNORE_DISABLED_P2P" => 0,
        _ => return None,
    })
}

/// Fills `plan.env`: each modelled variable with what it changed (a differential run without
/// it, `compare`), then variables NCCL reads that topo does not model, then unknown
/// `NCCL_` names with the nearest known one (also a warning).
pub(crate) fn env_effects(
    topo: &Topology,
    req: &PlanRequest,
    facts: &RuntimeFacts,
    a: &Analysis,
    plan: &mut Plan,
) {
    let mut env = std::mem::take(&mut plan.env);
    for e in env.iter_mut() {
        let notes = a.env.notes(&e.name);
        match plan_without(topo, req, facts, &e.name) {
            Ok(without) => {
                let changes = compare(&without, plan);
                if changes.is_empty() {
                    let default = default_of(a, &e.name)
                        .filter(|d| e.value.trim().parse::<i64>().ok() == Some(*d))
                        .map(|d| format!("{}={d} is NCCL {}'s default", e.name, a.version.short()));
                    e.status = "unchanged".into();
                    e.effect = Some(unchanged(&notes, default));
                } else {
                    e.status = "changed".into();
                    let mut text = changes.join("; ");
                    if !notes.is_empty() {
                        text = format!("{text} ({})", notes.join("; "));
                    }
                    e.effect = Some(text);
                    e.changes = changes;
                }
            }
            Err(err) => {
                e.status = "changed".into();
                e.effect = Some(format!(
                    "without it the plan cannot be computed: {}",
                    err.message
                ));
            }
        }
    }
    plan.env = env;
    // The latest value of each other variable, in the order given.
    let mut others: Vec<(String, String)> = vec![];
    for (k, v) in &req.env {
        match others.iter_mut().find(|(n, _)| n == k) {
            Some(slot) => slot.1 = v.clone(),
            None => others.push((k.clone(), v.clone())),
        }
    }
    let mut unknown = vec![];
    for (k, v) in others {
        let Some(mut e) = classify(&k) else {
            continue;
        };
        e.value = v;
        if e.status == "unknown" {
            unknown.push(e);
        } else {
            plan.env.push(e);
        }
    }
    for e in plan.env.iter_mut().chain(unknown.iter_mut()) {
        e.origin = req.env_origin.get(&e.name).cloned();
    }
    for e in unknown {
        let text = format!(
            "{}={}: {}",
            e.name,
            e.value,
            e.effect.as_deref().unwrap_or("")
        );
        plan.warnings.push(text.clone());
        plan.messages.push(Finding::at(
            Code::EnvUnknown,
            topo_model::message::Severity::Warning,
            text,
        ));
        plan.env.push(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspelling_is_matched() {
        assert_eq!(did_you_mean("NCCL_P2P_LEVL"), Some("NCCL_P2P_LEVEL"));
        assert_eq!(did_you_mean("NCCL_NVLS_ENABEL"), Some("NCCL_NVLS_ENABLE"));
        assert_eq!(did_you_mean("NCCL_COMPLETELY_DIFFERENT_THING"), None);
    }

    #[test]
    fn known_unmodelled_is_listed() {
        let e = classify("NCCL_IB_QPS_PER_CONNECTION").unwrap();
        assert_eq!(e.status, "not_modelled");
        assert!(e.effect.unwrap().contains("queue pairs"));
        let u = classify("NCCL_P2P_LEVL").unwrap();
        assert_eq!(u.status, "unknown");
        assert!(u.effect.unwrap().contains("did you mean NCCL_P2P_LEVEL?"));
        assert!(classify("NCCL_P2P_LEVEL").is_none());
        assert!(classify("HOME").is_none());
    }

    #[test]
    fn data_parses() {
        assert!(known_vars().len() > 40);
        for k in known_vars() {
            assert!(k.name.starts_with("NCCL_"), "{}", k.name);
            assert!(
                !VARIABLES.contains(&k.name.as_str()),
                "{} is modelled",
                k.name
            );
        }
    }
}
