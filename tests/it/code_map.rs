//! docs/ARCHITECTURE.md's "Code map" is where a reader finds a file's job (issue 42): every
//! source file of every Cargo target is named there, and every path it names exists.
//!
//! A row's first cell holds its paths, each in backticks and from the repository root, in the
//! forms the map uses: a file (`src/main.rs`), a folder that covers all under it
//! (`crates/topo-runtime/src/`), or one brace list of names
//! (`src/cmd/{show,plan,xml,snapshot}.rs`). Unit tests beside their code (`tests.rs`, `tests/`
//! folders) are not mapped: they go with the file they test.

use crate::util::fixture;

/// The folders holding the code of every Cargo target: the binary, each crate's library and
/// examples, the bench programs (examples in Cargo.toml) and the fuzz targets; as
/// .ci/fn_lengths.py reads them.
fn source_roots() -> Vec<String> {
    let mut roots = vec![
        "src".to_string(),
        "bench".to_string(),
        "fuzz/fuzz_targets".to_string(),
    ];
    let mut crates: Vec<String> = std::fs::read_dir(fixture("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    for c in crates {
        for d in ["src", "examples", "benches"] {
            roots.push(format!("crates/{c}/{d}"));
        }
    }
    roots
}

/// Every `.rs` file under `rel` (a path from the repository root), unit tests left out.
fn rust_files(rel: &str, out: &mut Vec<String>) {
    for e in std::fs::read_dir(fixture(rel)).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        let path = format!("{rel}/{name}");
        if e.file_type().unwrap().is_dir() {
            if name != "tests" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

/// The rows of the "Code map" table, as (line number in the file, first cell).
fn map_rows(doc: &str) -> Vec<(usize, &str)> {
    let mut rows = vec![];
    let mut inside = false;
    for (i, line) in doc.lines().enumerate() {
        if line.starts_with("## ") {
            inside = line == "## Code map";
            continue;
        }
        let Some(rest) = line.strip_prefix("| ") else {
            continue;
        };
        if !inside || rest.starts_with("path |") || rest.starts_with("---") {
            continue;
        }
        rows.push((i + 1, rest.split(" | ").next().unwrap_or("")));
    }
    rows
}

/// The paths of a first cell: each backticked item, a brace list expanded.
fn cell_paths(cell: &str) -> Vec<String> {
    let mut out = vec![];
    for item in cell.split('`').skip(1).step_by(2) {
        match (item.find('{'), item.find('}')) {
            (Some(a), Some(b)) if a < b => {
                for name in item[a + 1..b].split(',') {
                    out.push(format!("{}{}{}", &item[..a], name.trim(), &item[b + 1..]));
                }
            }
            _ => out.push(item.to_string()),
        }
    }
    out
}

/// Every mapped path: (line of its row, path).
fn mapped() -> Vec<(usize, String)> {
    let doc = std::fs::read_to_string(fixture("docs/ARCHITECTURE.md")).unwrap();
    let rows = map_rows(&doc);
    assert!(
        rows.len() > 50,
        "docs/ARCHITECTURE.md: no \"## Code map\" table found ({} rows)",
        rows.len()
    );
    rows.into_iter()
        .flat_map(|(line, cell)| {
            let paths = cell_paths(cell);
            assert!(
                !paths.is_empty(),
                "ARCHITECTURE.md:{line}: a row without a path"
            );
            paths.into_iter().map(move |p| (line, p))
        })
        .collect()
}

/// Whether a mapped path names the file: the file itself, or a folder above it.
fn covers(mapped: &str, file: &str) -> bool {
    match mapped.strip_suffix('/') {
        Some(dir) => file.starts_with(dir) && file[dir.len()..].starts_with('/'),
        None => mapped == file,
    }
}

#[test]
fn every_mapped_path_exists() {
    let stale: Vec<String> = mapped()
        .into_iter()
        .filter(|(_, p)| {
            let on_disk = fixture(p);
            if p.ends_with('/') {
                !on_disk.is_dir()
            } else {
                !on_disk.is_file()
            }
        })
        .map(|(line, p)| format!("ARCHITECTURE.md:{line}: {p}"))
        .collect();
    assert!(
        stale.is_empty(),
        "code map paths that do not exist (each is a path from the repository root; a folder \
         ends in `/`):\n{}",
        stale.join("\n")
    );
}

#[test]
fn every_source_file_is_in_the_code_map() {
    let mapped = mapped();
    let mut files = vec![];
    for root in source_roots() {
        if fixture(&root).is_dir() {
            rust_files(&root, &mut files);
        }
    }
    assert!(files.len() > 100, "only {} source files found", files.len());
    files.sort();
    let unmapped: Vec<&String> = files
        .iter()
        .filter(|f| !mapped.iter().any(|(_, m)| covers(m, f)))
        .collect();
    assert!(
        unmapped.is_empty(),
        "source files not in docs/ARCHITECTURE.md's code map (add a row saying what each does, \
         or name it in a row's brace list or folder):\n{}",
        unmapped
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn map_forms_read_as_documented() {
    assert_eq!(
        cell_paths("`src/cmd/{show,plan}.rs`, `crates/x/src/`"),
        ["src/cmd/show.rs", "src/cmd/plan.rs", "crates/x/src/"]
    );
    assert!(covers("crates/x/src/", "crates/x/src/a/b.rs"));
    assert!(!covers("crates/x/src/", "crates/x/srcs/b.rs"));
    assert!(!covers("crates/x/src/a.rs", "crates/x/src/a.rs.bak"));
    let doc = "## Code map\n\n| path | job |\n| --- | --- |\n| `a.rs` | x | y |\n## Next\n| `b.rs` | z |\n";
    assert_eq!(map_rows(doc), [(5, "`a.rs`")]);
}
