//! NCCL's messages and what they mean: one catalogue entry per message signature (the source
//! file that prints it, the words that identify it, the versions that print it), the causes it
//! can have with the evidence that tells them apart, the fix for each cause and where a fix
//! cannot apply. A matched WARN becomes the finding itself, quoting its lines; lines that are
//! harmless where they stand (no IB device on one node) become info. docs/diagnose.md renders
//! this table (`signatures::markdown`; a test holds the two equal).

mod table;

use super::{Finding, LogInput, Report, Severity, quote_some};
use topo_evidence::nccllog::{Evidence, NcclLog};
use topo_model::message::Code;

pub use table::CATALOGUE;

/// How many nodes the job spans, as far as the log says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nodes {
    One,
    Many,
    Unknown,
}

/// What a cause's test may look at: the log and the lines the signature matched.
pub struct Ctx<'a> {
    pub log: &'a NcclLog,
    pub nodes: Nodes,
    pub lines: &'a [&'a Evidence],
}

impl Ctx<'_> {
    /// Whether any matched line contains `s`.
    pub fn matched(&self, s: &str) -> bool {
        self.lines.iter().any(|e| e.text.contains(s))
    }
    /// Whether any INFO line kept for quoting (or any WARN) contains `s`.
    pub fn logged(&self, s: &str) -> bool {
        self.log
            .notable
            .iter()
            .chain(&self.log.warnings)
            .any(|e| e.text.contains(s))
    }
    /// Whether NCCL logged the variable as set (`NCCL_X set by environment to v`).
    pub fn env_is(&self, var: &str, val: &str) -> bool {
        self.log.env.get(var).is_some_and(|(v, _)| v == val)
    }
    /// The version as (minor, patch) when the log names a 2.x version.
    pub fn minor_patch(&self) -> Option<(u32, u32)> {
        let v = self.log.version.as_deref()?;
        let mut it = v.split('.');
        (it.next()? == "2").then_some(())?;
        let minor = it.next()?.parse().ok()?;
        let patch = it.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        Some((minor, patch))
    }
    /// Whether the hosts' names look like containers or pods (a hex id, `name-<hash>`).
    pub fn container_host(&self) -> bool {
        self.log.hosts.iter().any(|h| {
            (h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit()))
                || h.rsplit('-').next().is_some_and(|t| {
                    t.len() >= 4 && t.bytes().any(|b| b.is_ascii_digit()) && h.contains('-')
                })
        })
    }
}

/// One cause of a signature: when it applies, what it means and what to do.
pub struct Cause {
    /// A short name tests and docs use (`fm-restarted`).
    pub id: &'static str,
    /// The evidence that tells this cause from the others, in words (docs).
    pub tells: &'static str,
    pub applies: fn(&Ctx) -> bool,
    pub severity: Severity,
    pub title: &'static str,
    pub fix: &'static str,
    /// Where the fix does not apply (docs; also said in the fix where it matters).
    pub not_for: &'static str,
}

/// The level NCCL prints a signature at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Warn,
    Info,
}

/// One message NCCL prints.
pub struct Signature {
    pub code: Code,
    /// The NCCL source file that prints it (paths as of the versions named).
    pub source: &'static str,
    pub level: Level,
    /// The message as NCCL formats it (printf style), for the docs.
    pub message: &'static str,
    /// Words every matching line contains.
    pub all: &'static [&'static str],
    /// Words of which a matching line contains at least one (none: no such condition).
    pub any: &'static [&'static str],
    pub versions: &'static str,
    pub meaning: &'static str,
    /// In order: the first that applies is the finding; the last applies always.
    pub causes: &'static [Cause],
}

impl Signature {
    pub fn matches(&self, text: &str) -> bool {
        let level_ok = match self.level {
            Level::Warn => text.contains("NCCL WARN"),
            Level::Info => !text.contains("NCCL WARN"),
        };
        level_ok
            && self.all.iter().all(|w| text.contains(w))
            && (self.any.is_empty() || self.any.iter().any(|w| text.contains(w)))
    }
}

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

/// Matches every WARN and kept INFO line against the catalogue; each signature that matched
/// becomes one finding (its first cause that applies). Returns the WARN lines explained.
pub fn run(l: &LogInput, r: &mut Report) -> Vec<usize> {
    let log = l.log;
    let nodes = nodes(log);
    let mut explained = vec![];
    // A line belongs to the first signature that matches it: one line, one meaning.
    let mut claimed = std::collections::HashSet::new();
    for sig in CATALOGUE {
        let pool = match sig.level {
            Level::Warn => &log.warnings,
            Level::Info => &log.notable,
        };
        let lines: Vec<&Evidence> = pool
            .iter()
            .filter(|e| {
                !claimed.contains(&(sig.level == Level::Warn, e.line)) && sig.matches(&e.text)
            })
            .collect();
        claimed.extend(lines.iter().map(|e| (sig.level == Level::Warn, e.line)));
        if lines.is_empty() {
            continue;
        }
        if sig.level == Level::Warn {
            explained.extend(lines.iter().map(|e| e.line));
        }
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
            Finding::new(sig.code, cause.severity, cause.title)
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
