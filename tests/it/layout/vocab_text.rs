//! The vocabulary's rule (issue 42): no transport, algorithm, protocol, collective, data type,
//! path type or verify backend/launch is judged by its text outside parsing and printing.
//! Parsed at the edge (the vocabulary's `FromStr`, the log and file readers), such a word is a
//! type below it, so code compares enums.
//!
//! What counts as judging by text: a string literal whose first word is one of [`WORDS`]
//! (any case), compared with `==`/`!=`, as a `match` arm or `matches!` pattern, or given to
//! `starts_with`, `ends_with`, `contains`, `strip_prefix`, `strip_suffix`, `split_once`,
//! `find` or `eq_ignore_ascii_case`. The grep it replaces, for the record:
//!
//! ```text
//! grep -rnE '(==|!=) *"|(starts_with|ends_with|contains|strip_prefix|eq_ignore_ascii_case)\("|"[^"]*" *(=>|\|)' \
//!   src crates/*/src | grep -iE '"(P2P|SHM|NET|IB|Socket|CUMEM|IPC|Ring|Tree|NVLS|CollNet|PAT|LL|Simple|all_?reduce|...)'
//! ```
//!
//! Code under `#[cfg(test)]`, unit-test files and comments are left out. [`ALLOWED`] lists the
//! places that parse or print, each by file and literal, so a new comparison in the same file
//! still fails, and an entry nothing matches any more fails too.

use std::collections::BTreeSet;
use std::path::Path;

/// First words of the vocabulary's names, lowercase.
#[rustfmt::skip]
const WORDS: &[&str] = &[
    // transports
    "p2p", "shm", "net", "ib", "socket", "cumem", "ipc", "collnet", "tcp",
    // algorithms
    "ring", "tree", "nvls", "nvlstree", "collnetdirect", "collnetchain", "pat", "direct",
    // protocols
    "ll", "ll128", "simple",
    // collectives
    "allreduce", "all_reduce", "allgather", "all_gather", "reducescatter", "reduce_scatter",
    "broadcast", "bcast", "reduce", "alltoall", "sendrecv",
    // data types
    "float", "half", "double", "bf16", "bfloat16", "int8", "uint8", "int32", "uint32", "int64",
    "uint64", "fp8", "fp16", "fp32", "f16", "f32", "f64",
    // path types
    "loc", "nvl", "nvb", "c2c", "pix", "pxb", "p2c", "pxn", "phb", "sys",
    // verify's backends and launches
    "host", "cuda", "threads", "processes",
];

/// Where such a comparison is parsing at the edge or printing: (file, literal).
const ALLOWED: &[(&str, &str)] = &[
    // The vocabulary's own parsers.
    ("crates/topo-vocab/src/collective.rs", "bcast"),
    ("crates/topo-vocab/src/data.rs", "bf16"),
    ("crates/topo-vocab/src/data.rs", "bfloat16"),
    ("crates/topo-vocab/src/data.rs", "double"),
    ("crates/topo-vocab/src/data.rs", "f16"),
    ("crates/topo-vocab/src/data.rs", "f32"),
    ("crates/topo-vocab/src/data.rs", "f64"),
    ("crates/topo-vocab/src/data.rs", "float"),
    ("crates/topo-vocab/src/data.rs", "fp16"),
    ("crates/topo-vocab/src/data.rs", "fp32"),
    ("crates/topo-vocab/src/data.rs", "half"),
    ("crates/topo-vocab/src/data.rs", "int32"),
    ("crates/topo-vocab/src/data.rs", "int64"),
    ("crates/topo-vocab/src/data.rs", "uint8"),
    ("crates/topo-vocab/src/fabric.rs", "ib"),
    ("crates/topo-vocab/src/fabric.rs", "socket"),
    ("crates/topo-vocab/src/transport.rs", "COLLNET"),
    ("crates/topo-vocab/src/transport.rs", "IB"),
    ("crates/topo-vocab/src/transport.rs", "NET/"),
    ("crates/topo-vocab/src/transport.rs", "P2P"),
    ("crates/topo-vocab/src/transport.rs", "P2P/"),
    ("crates/topo-vocab/src/transport.rs", "SHM"),
    ("crates/topo-vocab/src/transport.rs", "Socket"),
    // The NCCL log reader: lines recognised by their words, transports by NCCL's names.
    ("crates/topo-evidence/src/nccllog/dump.rs", "NET"),
    ("crates/topo-evidence/src/nccllog/lines.rs", "CollNet"),
    ("crates/topo-evidence/src/nccllog/lines.rs", "CollNet "),
    ("crates/topo-evidence/src/nccllog/lines.rs", "COLLNET"),
    ("crates/topo-evidence/src/nccllog/lines.rs", "CUMEM"),
    ("crates/topo-evidence/src/nccllog/lines.rs", "IPC"),
    ("crates/topo-evidence/src/nccllog/lines.rs", "NET/"),
    ("crates/topo-evidence/src/nccllog/lines.rs", "NVLS Head"),
    (
        "crates/topo-evidence/src/nccllog/lines.rs",
        "NVLS multicast support is",
    ),
    (
        "crates/topo-evidence/src/nccllog/lines.rs",
        "P2P is disabled between",
    ),
    (
        "crates/topo-evidence/src/nccllog/lines.rs",
        "P2P is disabled between ",
    ),
    ("crates/topo-evidence/src/nccllog/lines.rs", "P2P/"),
    ("crates/topo-evidence/src/nccllog/lines.rs", "Ring "),
    ("crates/topo-evidence/src/nccllog/lines.rs", "SHM"),
    ("crates/topo-evidence/src/nccllog/lines.rs", "Tree "),
    (
        "crates/topo-evidence/src/nccllog/lines.rs",
        "collnet channels",
    ),
    ("crates/topo-evidence/src/nccllog/lines.rs", "cuda"),
    ("crates/topo-evidence/src/nccllog/lines.rs", "direct"),
    (
        "crates/topo-evidence/src/nccllog/lines.rs",
        "direct shared memory",
    ),
    ("crates/topo-evidence/src/nccllog/lines.rs", "nvls channels"),
    ("crates/topo-evidence/src/nccllog/lines.rs", "p2p channels"),
    (
        "crates/topo-evidence/src/nccllog/lines.rs",
        "p2p channels per peer",
    ),
    // The `=== System` dump's link type, as printed.
    ("crates/topo-evidence/src/nccllog/system.rs", "NVL"),
    // Hang reports: lines recognised by their words.
    ("crates/topo-evidence/src/hang/net.rs", "NET/"),
    ("crates/topo-evidence/src/hang/net.rs", "Net : "),
    (
        "crates/topo-evidence/src/hang/ras.rs",
        "CUDA runtime version",
    ),
    // nccl-tests' names: its test binaries and the element sizes of the types the vocabulary
    // does not run (int8, fp8, the unsigned ones).
    ("crates/topo-evidence/src/nccltests/mod.rs", "all_gather"),
    ("crates/topo-evidence/src/nccltests/mod.rs", "all_reduce"),
    ("crates/topo-evidence/src/nccltests/mod.rs", "alltoall"),
    ("crates/topo-evidence/src/nccltests/mod.rs", "broadcast"),
    ("crates/topo-evidence/src/nccltests/mod.rs", "int8"),
    ("crates/topo-evidence/src/nccltests/mod.rs", "reduce"),
    (
        "crates/topo-evidence/src/nccltests/mod.rs",
        "reduce_scatter",
    ),
    ("crates/topo-evidence/src/nccltests/mod.rs", "sendrecv"),
    ("crates/topo-evidence/src/nccltests/mod.rs", "uint32"),
    ("crates/topo-evidence/src/nccltests/mod.rs", "uint64"),
    // Readers of files: NCCL's XML element names, a profile's fabric words, nvidia-smi's cells.
    ("crates/topo-source/src/ncclxml.rs", "c2c"),
    ("crates/topo-source/src/ncclxml.rs", "net"),
    ("crates/topo-source/src/profile.rs", "ib"),
    ("crates/topo-source/src/smimatrix.rs", "PHB"),
    ("crates/topo-source/src/smimatrix.rs", "PIX"),
    ("crates/topo-source/src/smimatrix.rs", "PXB"),
    ("crates/topo-source/src/smimatrix.rs", "SYS"),
    // Variables read once where the runtime starts (`TOPO_*`).
    ("crates/topo-runtime/src/cuda/device.rs", "ipc"),
    ("crates/topo-runtime/src/cuda/device.rs", "shm"),
    ("crates/topo-runtime/src/job.rs", "cuda"),
    ("crates/topo-runtime/src/launch.rs", "tcp"),
    // Printing: a cell's colour or class from the text it shows; show's JSON view names.
    ("crates/topo-report/src/html/machine.rs", "PHB"),
    ("crates/topo-report/src/html/machine.rs", "PIX"),
    ("crates/topo-report/src/html/machine.rs", "PXB"),
    ("crates/topo-report/src/html/machine.rs", "SYS"),
    ("crates/topo-report/src/show/doc.rs", "p2p"),
    ("crates/topo-report/src/show/matrix.rs", "PIX"),
    ("crates/topo-report/src/show/matrix.rs", "PXB"),
    ("crates/topo-report/src/show/matrix.rs", "SYS"),
    // The diagnosis reads NCCL's notable lines as kept text (`NcclLog::notable`): NCCL prints
    // these messages with no field a reader could type.
    (
        "crates/topo-diagnose/src/logchecks.rs",
        "P2P is disabled between",
    ),
    ("crates/topo-diagnose/src/loggdr.rs", "NET/Socket"),
];

/// Methods whose literal argument is text compared.
const METHODS: &[&str] = &[
    "starts_with(",
    "ends_with(",
    "contains(",
    "contains(&",
    "strip_prefix(",
    "strip_suffix(",
    "split_once(",
    "find(",
    "eq_ignore_ascii_case(",
];

/// `text` with comments blanked (line breaks kept), and the same text with string and char
/// literals' contents blanked too, char for char, to find structure in.
fn blank(text: &str) -> (Vec<char>, Vec<char>) {
    let c: Vec<char> = text.chars().collect();
    let (mut code, mut shape) = (c.clone(), c.clone());
    let n = c.len();
    let at = |i: usize, s: &str| s.chars().enumerate().all(|(k, x)| c.get(i + k) == Some(&x));
    let mut i = 0;
    let wipe = |v: &mut Vec<char>, from: usize, to: usize| {
        for x in &mut v[from..to.min(n)] {
            if *x != '\n' {
                *x = ' ';
            }
        }
    };
    while i < n {
        if at(i, "//") {
            let s = i;
            while i < n && c[i] != '\n' {
                i += 1;
            }
            wipe(&mut code, s, i);
            wipe(&mut shape, s, i);
        } else if at(i, "/*") {
            let (s, mut depth) = (i, 0);
            while i < n {
                if at(i, "/*") {
                    depth += 1;
                    i += 2;
                } else if at(i, "*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            wipe(&mut code, s, i);
            wipe(&mut shape, s, i);
        } else if c[i] == 'r'
            && (at(i, "r\"") || at(i, "r#"))
            && (i == 0 || !c[i - 1].is_alphanumeric())
        {
            let hashes = c[i + 1..].iter().take_while(|&&x| x == '#').count();
            let open = i + 1 + hashes;
            if c.get(open) != Some(&'"') {
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"')
                .chain("#".repeat(hashes).chars())
                .collect();
            let mut j = open + 1;
            while j < n && !at(j, &close) {
                j += 1;
            }
            wipe(&mut shape, open + 1, j);
            i = j + close.len();
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < n && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            wipe(&mut shape, i + 1, j);
            i = j + 1;
        } else if c[i] == '\'' {
            let len = match (c.get(i + 1), c.get(i + 2), c.get(i + 3)) {
                (Some('\\'), _, _) => c[i + 3..].iter().position(|&x| x == '\'').map(|p| p + 4),
                (Some(_), Some('\''), _) => Some(3),
                _ => None,
            };
            match len {
                Some(l) => {
                    wipe(&mut shape, i + 1, i + l - 1);
                    i += l;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    (code, shape)
}

/// `code` without the items under `#[cfg(test)]` (or `#[cfg(any(test, ...))]`), found in
/// `shape`, which is ASCII (everything else sits in blanked comments and literals), so its
/// byte offsets are char offsets; line breaks kept.
fn without_tests(code: &mut [char], shape: &[char]) {
    let s: String = shape.iter().collect();
    let mut from = 0;
    while let Some(start) = ["#[cfg(test)]", "#[cfg(any(test"]
        .iter()
        .filter_map(|p| s[from..].find(p).map(|k| k + from))
        .min()
    {
        let mut j = start;
        while j < shape.len() && shape[j] != '{' && shape[j] != ';' {
            j += 1;
        }
        if j < shape.len() && shape[j] == '{' {
            let mut depth = 0i32;
            while j < shape.len() {
                depth += match shape[j] {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                j += 1;
                if depth == 0 {
                    break;
                }
            }
        }
        let end = j.min(shape.len());
        for x in &mut code[start..end] {
            if *x != '\n' {
                *x = ' ';
            }
        }
        from = end.max(start + 1);
    }
}

/// The literals compared as text in `code` (its `shape` locates them): (line, literal). In
/// `shape` every literal's quotes are its only ones, so they pair up over the whole file.
fn compared(code: &[char], shape: &[char]) -> Vec<(usize, String)> {
    let mut out = vec![];
    let mut i = 0;
    while i < shape.len() {
        if shape[i] != '"' {
            i += 1;
            continue;
        }
        let Some(len) = shape[i + 1..].iter().position(|&x| x == '"') else {
            break;
        };
        let end = i + 1 + len;
        let line_start = shape[..i]
            .iter()
            .rposition(|&x| x == '\n')
            .map_or(0, |p| p + 1);
        let line_end = shape[end..]
            .iter()
            .position(|&x| x == '\n')
            .map_or(shape.len(), |p| end + p);
        let lit: String = code[i + 1..end].iter().collect();
        let before: String = shape[line_start..i].iter().collect();
        let after: String = shape[end + 1..line_end.max(end + 1)].iter().collect();
        let (before, after) = (before.trim_end(), after.trim_start());
        let b = before.strip_suffix("Some(").unwrap_or(before).trim_end();
        let cmp = b.ends_with("==")
            || b.ends_with("!=")
            || METHODS.iter().any(|m| before.ends_with(m))
            || (before.contains("matches!(") && before.ends_with(','))
            || after.starts_with("==")
            || after.starts_with("!=")
            || after.starts_with("=>")
            || (after.starts_with('|') && !after.starts_with("||"));
        let first = lit
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<String>()
            .to_ascii_lowercase();
        if cmp && WORDS.contains(&first.as_str()) {
            let line = 1 + shape[..i].iter().filter(|&&x| x == '\n').count();
            out.push((line, lit));
        }
        i = end + 1;
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if name != "tests" {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs")
            && !matches!(
                name.as_str(),
                "tests.rs" | "testing.rs" | "testgen.rs" | "differential.rs"
            )
        {
            out.push(p);
        }
    }
}

/// Every (file, line, literal) compared as text in the workspace's sources.
pub fn comparisons(root: &Path) -> Vec<(String, usize, String)> {
    let mut files = vec![];
    rust_files(&root.join("src"), &mut files);
    for e in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        if e.path().join("src").is_dir() {
            rust_files(&e.path().join("src"), &mut files);
        }
    }
    files.sort();
    let mut out = vec![];
    for f in files {
        let rel = f
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&f).unwrap();
        out.extend(
            comparisons_in(&text)
                .into_iter()
                .map(|(line, lit)| (rel.clone(), line, lit)),
        );
    }
    out
}

/// (line, literal) of every comparison in one file's text.
pub fn comparisons_in(text: &str) -> Vec<(usize, String)> {
    let (mut code, shape) = blank(text);
    without_tests(&mut code, &shape);
    let mut shape = shape;
    // Test items are gone from the shape too, so their literals are not looked at.
    for (s, c) in shape.iter_mut().zip(&code) {
        if *c == ' ' {
            *s = ' ';
        }
    }
    compared(&code, &shape)
}

/// Comparisons not in [`ALLOWED`], and entries of it nothing matches.
pub fn check(root: &Path) -> (Vec<String>, Vec<String>) {
    let found = comparisons(root);
    let mut used = BTreeSet::new();
    let mut bad = vec![];
    for (f, line, lit) in &found {
        match ALLOWED.iter().position(|(af, al)| af == f && al == lit) {
            Some(i) => {
                used.insert(i);
            }
            None => bad.push(format!("{f}:{line}: \"{lit}\"")),
        }
    }
    let stale = ALLOWED
        .iter()
        .enumerate()
        .filter(|(i, _)| !used.contains(i))
        .map(|(_, (f, l))| format!("{f}: \"{l}\""))
        .collect();
    (bad, stale)
}
