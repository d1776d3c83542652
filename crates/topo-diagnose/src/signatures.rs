//! NCCL's messages and what they mean: one catalogue entry per message signature (the source
//! file that prints it, the words that identify it, the versions that print it), the causes it
//! can have with the evidence that tells them apart, the fix for each cause and where a fix
//! cannot apply. A matched WARN becomes the finding itself, quoting its lines; lines that are
//! harmless where they stand (no IB device on one node) become info. docs/diagnose.md renders
//! this table (`signatures::markdown`; a test holds the two equal).

mod table;
mod types;

use super::{Finding, LogInput, Report, quote_some};
use crate::ReportExt;
use topo_evidence::nccllog::{Evidence, NcclLog};
use topo_model::message::Code;

pub use table::CATALOGUE;
pub use types::{Cause, Ctx, Level, Nodes, Signature};

/// The node count the log shows: its `nNodes`, several hosts, or NET connections (NCCL uses
/// the network between nodes only, pods of one machine aside).
pub fn nodes(log: &NcclLog) -> Nodes {
    match log.nnodes() {
        Some(1) => return Nodes::One,
        Some(_) => return Nodes::Many,
        None => {}
    }
    let net = log
        .connections
        .iter()
        .any(|c| c.transport.is_net() || c.direction != topo_evidence::nccllog::Direction::Both);
    if log.hosts.len() > 1 || net {
        Nodes::Many
    } else {
        Nodes::Unknown
    }
}

/// The SHM connections of a log whose local pairs also use P2P: a PCIe host where some
/// pairs are close enough for P2P and others are not.
pub fn mixed_local_pairs(log: &NcclLog) -> Option<Vec<&topo_evidence::nccllog::Connection>> {
    let shm: Vec<&topo_evidence::nccllog::Connection> = log
        .connections
        .iter()
        .filter(|c| c.transport.is_shm())
        .collect();
    let p2p = log.connections.iter().any(|c| c.transport.is_p2p());
    (p2p && !shm.is_empty()).then_some(shm)
}

/// Matches every WARN and kept INFO line against the catalogue; each signature that matched
/// becomes one finding (its first cause that applies). Returns the WARN lines explained.
pub fn run(l: &LogInput, r: &mut Report) -> Vec<usize> {
    let log = l.log;
    let nodes = nodes(log);
    let mut explained = vec![];
    // A line belongs to the first signature that matches it: one line, one meaning.
    let mut claimed = std::collections::HashSet::new();
    for sig in CATALOGUE {
        let pool: Vec<&Evidence> = match sig.level {
            Level::Warn => log.warnings.iter().collect(),
            Level::Info => log.notable.iter().collect(),
            Level::Any => log.warnings.iter().chain(&log.notable).collect(),
        };
        let key = |e: &Evidence| (e.text.contains("NCCL WARN"), e.line);
        let lines: Vec<&Evidence> = pool
            .into_iter()
            .filter(|e| !claimed.contains(&key(e)) && sig.matches(&e.text))
            .collect();
        claimed.extend(lines.iter().map(|e| key(e)));
        if lines.is_empty() {
            continue;
        }
        explained.extend(
            lines
                .iter()
                .filter(|e| e.text.contains("NCCL WARN"))
                .map(|e| e.line),
        );
        let ctx = Ctx {
            log,
            nodes,
            lines: &lines,
        };
        let Some(cause) = sig.causes.iter().find(|c| (c.applies)(&ctx)) else {
            continue;
        };
        let mut ev = quote_some(&l.name, lines.iter().map(|e| (e.line, e.text.as_str())), 3);
        ev.extend(context(l, sig.code, nodes));
        ev.push(format!(
            "catalogue: {} ({}, NCCL {}): {}; cause `{}`: {}",
            sig.code, sig.source, sig.versions, sig.meaning, cause.id, cause.tells
        ));
        r.add(
            Finding::at(sig.code, cause.severity, cause.title)
                .evidence(ev)
                .fix(cause.fix),
        );
    }
    explained
}

/// Lines beside the matched ones that the reader needs to see the cause: the version line
/// against the driver, the interfaces a socket fallback chose, the environment that set it.
fn context(l: &LogInput, code: Code, nodes: Nodes) -> Vec<String> {
    let log = l.log;
    let q = |e: &Evidence| super::quote(&l.name, e.line, &e.text);
    let mut out = vec![];
    let mut notable = |keys: &[&str], n: usize| {
        for e in log
            .notable
            .iter()
            .filter(|e| keys.iter().any(|k| e.text.contains(k)))
            .take(n)
        {
            out.push(q(e));
        }
    };
    match code {
        Code::DriverOlderThanCuda => {
            if let Some(e) = &log.version_line {
                out.push(q(e));
            }
        }
        Code::IbNoDevice | Code::IbVerbsMissing => {
            notable(
                &[
                    "P2P plugin",
                    "Loaded net plugin",
                    "NET/Socket : Using",
                    "dlvsym failed",
                ],
                3,
            );
        }
        Code::SocketOnLoopback => {
            for var in [
                "NCCL_SOCKET_IFNAME",
                "NCCL_IB_DISABLE",
                "NCCL_IBEXT_DISABLE",
            ] {
                if let Some((_, e)) = log.env.get(var) {
                    out.push(q(e));
                }
            }
        }
        Code::NvlsSetupFailed => notable(&["NVLS multicast support is not"], 2),
        _ => {}
    }
    out.push(match nodes {
        Nodes::One => "the job runs on one node (`nNodes 1`)".into(),
        Nodes::Many => {
            "the job spans several nodes (nNodes, hosts or NET connections in the log)".into()
        }
        Nodes::Unknown => "the log does not say how many nodes the job spans".into(),
    });
    out
}

/// The catalogue as docs/diagnose.md shows it: one block per signature, one row per cause.
pub fn markdown() -> String {
    use std::fmt::Write;
    let mut o = String::new();
    for s in CATALOGUE {
        let level = match s.level {
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Any => "INFO or WARN",
        };
        let _ = writeln!(o, "### `{}`\n", s.code);
        let _ = writeln!(
            o,
            "{level} `{}` from `{}`, NCCL {}: {}.\n",
            s.message, s.source, s.versions, s.meaning
        );
        let _ = writeln!(
            o,
            "| cause | told by | severity | finding | fix | not for |"
        );
        let _ = writeln!(o, "| --- | --- | --- | --- | --- | --- |");
        for c in s.causes {
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {} | {} | {} |",
                c.id,
                c.tells,
                c.severity.name(),
                c.title,
                c.fix,
                if c.not_for.is_empty() { "-" } else { c.not_for }
            );
        }
        o.push('\n');
    }
    o
}

#[cfg(test)]
mod tests;
