//! docs/codes.md is the registry of every code topo emits (issue 24): each code passed as a
//! literal to `Message::new`, `Finding::new` or a verdict's `tag` is listed there, and each
//! listed code is emitted somewhere in the source (no stale rows). Codes held in constants
//! (`topo_model::pcie_judge`) are literals in their one definition, so both checks see them.

use crate::util::fixture;
use std::collections::BTreeSet;

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn sources() -> Vec<(String, String)> {
    let mut files = vec![];
    rust_files(&fixture("src"), &mut files);
    rust_files(&fixture("crates"), &mut files);
    files
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("/tests") && !p.ends_with("tests.rs"))
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

/// The first argument of every `Message::new(`, `Finding::new(` and `.tag(` when it is a
/// string literal, whitespace and line breaks allowed before it.
fn emitted(text: &str) -> Vec<String> {
    let mut out = vec![];
    for call in ["Message::new(", "Finding::new(", ".tag("] {
        for (i, _) in text.match_indices(call) {
            let rest = text[i + call.len()..].trim_start();
            if let Some(lit) = rest.strip_prefix('"')
                && let Some(end) = lit.find('"')
            {
                let code = &lit[..end];
                if !code.is_empty()
                    && code
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                {
                    out.push(code.to_string());
                }
            }
        }
    }
    out
}

fn listed() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(fixture("docs/codes.md")).unwrap();
    doc.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` |"))
        .map(|(c, _)| c.to_string())
        .collect()
}

#[test]
fn every_emitted_code_is_listed_and_every_listed_code_is_emitted() {
    let src = sources();
    let listed = listed();
    let mut found = BTreeSet::new();
    for (path, text) in &src {
        for c in emitted(text) {
            assert!(
                listed.contains(&c),
                "{path}: code `{c}` is not in docs/codes.md"
            );
            found.insert(c);
        }
    }
    assert!(found.len() > 30, "{}", found.len());
    let all: String = src.iter().map(|(_, t)| t.as_str()).collect();
    for c in &listed {
        assert!(
            all.contains(&format!("\"{c}\"")),
            "docs/codes.md lists `{c}`, which no source emits (a stale row, or a renamed code)"
        );
    }
}
