//! Every text a source read (host names, XML attribute values, NIC names, profile strings,
//! file names, warnings) with its control characters made visible, for text output.
//!
//! Done once on the whole topology rather than at each place a renderer prints a field, so
//! a field added later is covered too: node kinds and hosts are walked through their serde
//! form, which reaches every string they hold. JSON and YAML documents are rendered from the
//! untouched topology, escaped the way serde does.

use serde::{Serialize, de::DeserializeOwned};
use topo_model::{NodeKind, Topology};

/// Escapes control characters in every string of `topo` (see [`escape_controls`]).
pub fn topology(topo: &mut Topology) {
    for node in topo.graph.node_weights_mut() {
        escape_value::<NodeKind>(&mut node.kind);
    }
    for host in &mut topo.hosts {
        escape_value(host);
    }
    for w in &mut topo.warnings {
        escape_string(w);
    }
    if let Some(o) = &mut topo.source.origin {
        escape_string(o);
    }
}

fn escape_string(s: &mut String) {
    if let std::borrow::Cow::Owned(e) = escape_controls(s) {
        *s = e;
    }
}

/// Rewrites `v` only when one of its strings holds a control character; a value whose
/// serde form does not read back (none should) is left as it was rather than lost.
fn escape_value<T: Serialize + DeserializeOwned>(v: &mut T) {
    let Ok(mut json) = serde_json::to_value(&*v) else {
        return;
    };
    if escape_json(&mut json)
        && let Ok(back) = serde_json::from_value(json)
    {
        *v = back;
    }
}

/// Escapes every string and map key in place; whether anything changed.
fn escape_json(v: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            let before = s.len();
            escape_string(s);
            s.len() != before
        }
        Value::Array(a) => a.iter_mut().fold(false, |c, x| escape_json(x) | c),
        Value::Object(m) => {
            let changed_key = m.keys().any(|k| k.chars().any(needs_escape));
            if changed_key {
                let old = std::mem::take(m);
                for (k, x) in old {
                    m.insert(escape_controls(&k).into_owned(), x);
                }
            }
            m.values_mut().fold(changed_key, |c, x| escape_json(x) | c)
        }
        _ => false,
    }
}

/// Text that came from input, safe to print on a terminal and on one line: every control
/// character (C0 including ESC and newlines, DEL, C1) is written as a visible escape (`\x1b`,
/// `\n`, `\u{9b}`), so a file cannot retitle the terminal, clear the screen or forge an
/// extra `error:` line. The bidirectional controls (U+200E, U+200F, U+202A-U+202E,
/// U+2066-U+2069) are escaped too (`\u{202e}`): they reorder what a terminal shows, so a
/// name could display as another. Everything else, backslashes included, is left as it is.
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    out.into()
}

/// A control character or a bidirectional formatting character (Unicode's Trojan Source
/// set, CVE-2021-42574).
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

pub fn push_escaped(out: &mut String, c: char) {
    use std::fmt::Write;
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 && c.is_control() => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if needs_escape(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_model::{Host, Net, SourceInfo};

    #[test]
    fn every_string_is_escaped_and_the_rest_kept() {
        let mut t = Topology::new(SourceInfo {
            kind: topo_model::SourceKind::Xml,
            origin: Some("a\x1b[2J.xml".into()),
            ..Default::default()
        });
        t.hosts[0] = Host {
            name: Some("box\x1b]0;owned\x07".into()),
            env: [("NCCL_X\n".to_string(), "1\r".to_string())].into(),
            ..Host::default()
        };
        let cpu = t.add_node(0, None, NodeKind::Cpu(Default::default()));
        let net = t.add_child(
            cpu,
            NodeKind::Net(Net {
                name: "mlx5_0\nerror: forged".into(),
                dev: 3,
                speed_mbps: Some(400_000),
                ..Net::default()
            }),
        );
        t.warn("bad value 'x\x1b[31m'");
        topology(&mut t);
        assert_eq!(t.source.origin.as_deref(), Some("a\\x1b[2J.xml"));
        assert_eq!(t.hosts[0].name.as_deref(), Some("box\\x1b]0;owned\\x07"));
        assert_eq!(
            t.hosts[0].env.get("NCCL_X\\n").map(String::as_str),
            Some("1\\r")
        );
        assert_eq!(t.warnings, ["bad value 'x\\x1b[31m'"]);
        assert_eq!(
            escape_controls("gpu\u{202e}0cod.exe\u{2066}\u{200f}"),
            "gpu\\u{202e}0cod.exe\\u{2066}\\u{200f}"
        );
        let NodeKind::Net(n) = &t.node(net).kind else {
            panic!("not a net")
        };
        assert_eq!(
            (n.name.as_str(), n.dev, n.speed_mbps),
            ("mlx5_0\\nerror: forged", 3, Some(400_000))
        );
    }
}
