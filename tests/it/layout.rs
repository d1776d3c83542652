//! The workspace's boundaries, checked on the sources so they cannot erode unnoticed: no
//! cycles between the modules of a crate, no I/O and no forbidden dependency in the pure
//! model, clap only in the binary.

mod imports;
mod vocab_text;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its `#[cfg(test)]` tail and without comment lines.
fn code(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap();
    let s = s.split("#[cfg(test)]").next().unwrap_or("");
    s.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Top-level module of a file under `src` (`paths` for src/paths.rs and src/paths/x.rs).
fn top_module(src: &Path, p: &Path) -> Option<String> {
    let rel = p.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (!matches!(name, "lib" | "main" | "tests")).then(|| name.to_string())
}

/// Edges between a crate's top-level modules, from `crate::m` and `super::m` paths.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = vec![];
    rust_files(src, &mut files);
    let mods: BTreeSet<String> = files.iter().filter_map(|f| top_module(src, f)).collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        if f.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let Some(from) = top_module(src, f) else {
            continue;
        };
        let text = code(f);
        for m in &mods {
            let used = text.contains(&format!("crate::{m}::"))
                || text.contains(&format!("crate::{m};"))
                || text.contains(&format!("crate::{m}}}"))
                || (f.parent() == Some(src) && text.contains(&format!("super::{m}::")));
            if used && *m != from {
                g.entry(from.clone()).or_default().insert(m.clone());
            }
        }
    }
    g
}

fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|s| s == n) {
            return Some(stack[i..].to_vec());
        }
        if !done.insert(n.to_string()) {
            return None;
        }
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    g.keys().find_map(|n| visit(n, g, &mut vec![], &mut done))
}

fn crate_srcs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    v.push(root().join("src"));
    v.sort();
    v
}

#[test]
fn modules_of_every_crate_form_no_cycle() {
    for src in crate_srcs() {
        let g = module_graph(&src);
        assert_eq!(find_cycle(&g), None, "module cycle in {}", src.display());
    }
}

/// The same rule file by file: a file that uses another is never used back by it, directly or
/// through others (see `imports` for what counts as a use).
#[test]
fn no_file_uses_a_file_that_uses_it_back() {
    let mut found = vec![];
    for src in crate_srcs() {
        let (files, g) = imports::graph(&src);
        for c in imports::circles(&g) {
            found.push(format!(
                "a circle of {} files in {}:",
                c.len(),
                src.display()
            ));
            for a in &c {
                for b in g[a].intersection(&c) {
                    let name = |m: &imports::Mod| {
                        files[m].strip_prefix(root()).unwrap().display().to_string()
                    };
                    found.push(format!("  {} -> {}", name(a), name(b)));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The crates that judge and model (the NCCL model, the diagnosis and what it judges, the
/// topology, the vocabulary) do no I/O and link nothing that reads the machine: a finding is a
/// function of the facts handed in (issue 24: the diagnosis no longer pulls the readers in).
#[test]
fn the_model_and_the_judges_do_no_io_and_link_nothing_of_the_machine() {
    for krate in [
        "topo-nccl",
        "topo-diagnose",
        "topo-evidence",
        "topo-model",
        "topo-vocab",
        "topo-documents",
    ] {
        let src = root().join("crates").join(krate).join("src");
        let mut files = vec![];
        rust_files(&src, &mut files);
        assert!(!files.is_empty(), "{krate}");
        for f in files
            .iter()
            .filter(|f| !f.to_string_lossy().ends_with("tests.rs"))
        {
            let text = code(f);
            for bad in [
                "std::env::var",
                "std::fs",
                "std::process",
                "std::net",
                "unsafe ",
            ] {
                assert!(!text.contains(bad), "{} uses {bad}", f.display());
            }
        }
        let manifest =
            std::fs::read_to_string(root().join("crates").join(krate).join("Cargo.toml")).unwrap();
        let deps = manifest
            .split("[dependencies]")
            .nth(1)
            .map_or("", |d| d.split("\n[").next().unwrap_or(""));
        for dep in [
            "clap",
            "libloading",
            "nvml",
            "tar ",
            "flate2",
            "topo-source",
            "topo-runtime",
        ] {
            assert!(!deps.contains(dep), "{krate} depends on {dep}");
        }
    }
}

/// The documents sit just above the vocabulary: a script that reads them links serde and the
/// words, nothing of the model, the readers or the renderers (issue 42 item 4).
#[test]
fn the_documents_depend_on_the_vocabulary_and_serde_only() {
    let manifest =
        std::fs::read_to_string(root().join("crates/topo-documents/Cargo.toml")).unwrap();
    let deps: Vec<&str> = manifest
        .split("[dependencies]")
        .nth(1)
        .map_or("", |d| d.split("\n[").next().unwrap_or(""))
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split(['.', ' ', '=']).next())
        .collect();
    assert_eq!(deps, ["topo-vocab", "serde", "serde_json"]);
}

#[test]
fn clap_lives_only_in_the_binary() {
    for src in crate_srcs()
        .iter()
        .filter(|s| s.starts_with(root().join("crates")))
    {
        let manifest = std::fs::read_to_string(src.parent().unwrap().join("Cargo.toml")).unwrap();
        assert!(
            !manifest.contains("clap"),
            "{} depends on clap",
            src.display()
        );
    }
}

/// No vocabulary word is judged by its text outside parsing and printing (issue 42); see
/// `vocab_text` for what counts and the places allowed.
#[test]
fn no_vocabulary_word_is_compared_as_text_outside_parsing_and_printing() {
    let (bad, stale) = vocab_text::check(&root());
    assert!(
        bad.is_empty(),
        "compared as text where a type exists (parse it at the edge, compare the type):\n{}",
        bad.join("\n")
    );
    assert!(
        stale.is_empty(),
        "allowed comparisons no longer in the code (remove them from vocab_text::ALLOWED):\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_vocabulary_scan_sees_comparisons_and_skips_tests_comments_and_printing() {
    let src = r#"
fn f(t: &str, k: &str) -> bool {
    // t == "Ring" in a comment is not code
    let s = format!("{} == \"NVL\"", t);
    match k {
        "LL128" => true,
        _ => t.starts_with("NET/") || k == "cuda" || matches!(k, "PHB")
    }
}
#[cfg(test)]
mod tests {
    fn g(t: &str) -> bool { t == "Simple" && '{' != '}' }
}
fn h(t: &str) -> bool { t != "allreduce" && t == "unrelated" }
"#;
    let found: Vec<(usize, String)> = vocab_text::comparisons_in(src);
    let lits: Vec<&str> = found.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(
        lits,
        ["LL128", "NET/", "cuda", "PHB", "allreduce"],
        "{found:?}"
    );
    assert_eq!(found[0].0, 6);
    assert_eq!(found[4].0, 14);
}
