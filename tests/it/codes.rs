//! docs/codes.md is the registry of every code topo emits (issues 24 and 27): its rows are
//! exactly the codes of `topo_vocab::Code`, the one enum every document's code comes from, and
//! each code is emitted somewhere in the source (no stale rows, no unused variant).

use crate::util::fixture;
use std::collections::BTreeSet;
use topo_vocab::Code;

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

/// The code outside tests and outside the enum's own definition.
fn sources() -> String {
    let mut files = vec![];
    rust_files(&fixture("src"), &mut files);
    rust_files(&fixture("crates"), &mut files);
    files
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("/tests") && !p.ends_with("tests.rs"))
        .filter(|p| !p.ends_with("topo-vocab/src/code.rs"))
        .map(|p| std::fs::read_to_string(&p).unwrap())
        .collect()
}

fn listed() -> Vec<String> {
    let doc = std::fs::read_to_string(fixture("docs/codes.md")).unwrap();
    doc.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` |"))
        .map(|(c, _)| c.to_string())
        .collect()
}

#[test]
fn docs_list_exactly_the_codes_of_the_enum() {
    let listed: BTreeSet<String> = listed().into_iter().collect();
    let names: BTreeSet<String> = Code::ALL.iter().map(|c| c.name().to_string()).collect();
    let missing: Vec<_> = names.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&names).collect();
    assert!(
        missing.is_empty(),
        "codes not in docs/codes.md: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "docs/codes.md rows with no code in the enum: {stale:?}"
    );
}

#[test]
fn every_code_is_emitted_somewhere() {
    let src = sources();
    for c in Code::ALL {
        let variant = format!("Code::{c:?}");
        let ends = |i: usize| {
            src[i + variant.len()..]
                .chars()
                .next()
                .is_none_or(|x| !(x.is_alphanumeric() || x == '_'))
        };
        assert!(
            src.match_indices(&variant).any(|(i, _)| ends(i)),
            "`{c}` ({variant}) is emitted nowhere: drop it from the enum and docs/codes.md"
        );
    }
}

/// Each code's severities as docs/codes.md gives them (a code listed in several sections
/// takes the union of its rows).
fn listed_severities() -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let doc = std::fs::read_to_string(fixture("docs/codes.md")).unwrap();
    let mut out = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
    for l in doc.lines() {
        let Some((code, rest)) = l.strip_prefix("| `").and_then(|l| l.split_once("` |")) else {
            continue;
        };
        let column = rest.split('|').next().unwrap_or("");
        let set = out.entry(code.to_string()).or_default();
        for s in column.split([',']).flat_map(|s| s.split(" or ")) {
            set.insert(s.trim().to_string());
        }
    }
    out
}

/// The severity a finding is raised at comes from the code's table
/// (`crates/topo-vocab/src/code.rs`, checked when a finding is made); the documented
/// severities are that table, row by row.
#[test]
fn docs_give_each_code_the_severities_of_its_table() {
    let listed = listed_severities();
    for c in Code::ALL {
        let table: BTreeSet<String> = c.severities().iter().map(|s| s.name().into()).collect();
        assert_eq!(
            listed.get(c.name()),
            Some(&table),
            "docs/codes.md's severity column for `{c}` differs from its table in crates/topo-vocab/src/code.rs"
        );
    }
}
