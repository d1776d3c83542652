//! The file-level import graph of a crate, for the rule that a file that uses another is never
//! used back by it, directly or through others (issue 27).
//!
//! One node per module file (`lib.rs`/`main.rs` the crate root, `a.rs` or `a/mod.rs` module
//! `a`). File A has an edge to file B when A's code (tests left out) names B's module:
//! `crate::x::y`, `super::` and `self::` paths, and paths that start with a child A declares
//! (`mod child;` then `child::f()`). Declaring a child is not a use. A path names the deepest
//! module file it reaches (`crate::report::show::Ctx` is report/show.rs), and a name the module
//! re-exports (`pub use child::Name`) names the file it comes from. Test code is left out:
//! files named `tests.rs` or declared only under `#[cfg(test)]`, and every `#[cfg(test)]` item.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside a crate: `[]` for the root, `["report", "show"]`.
pub type Mod = Vec<String>;

/// The crate's module files by module path.
pub fn crate_files(src: &Path) -> BTreeMap<Mod, PathBuf> {
    let mut files = vec![];
    walk(src, &mut files);
    let mut out = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let last = parts.last().cloned().unwrap_or_default();
        if parts.len() == 1 && (last == "lib" || last == "main") || last == "mod" {
            parts.pop();
        }
        out.insert(parts, f);
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `text` with comments, string and char literals blanked; line breaks kept.
pub fn strip_comments_and_strings(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let (mut out, mut i, n) = (String::with_capacity(text.len()), 0, c.len());
    let at = |i: usize, s: &str| s.chars().enumerate().all(|(k, x)| c.get(i + k) == Some(&x));
    let newlines = |from: usize, to: usize| {
        "\n".repeat(c[from..to.min(n)].iter().filter(|&&x| x == '\n').count())
    };
    while i < n {
        if at(i, "//") {
            while i < n && c[i] != '\n' {
                i += 1;
            }
        } else if at(i, "/*") {
            let (start, mut depth) = (i, 0);
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
            out.push_str(&newlines(start, i));
        } else if let Some(end) = raw_string_end(&c, i) {
            out.push_str("\"\"");
            out.push_str(&newlines(i, end));
            i = end;
        } else if c[i] == '"' {
            let start = i;
            i += 1;
            while i < n && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
            out.push_str(&newlines(start, i));
        } else if let Some(len) = char_literal(&c, i) {
            out.push_str("' '");
            i += len;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Where a raw string literal (`r"…"`, `r#"…"#`) starting at `i` ends, if one does.
fn raw_string_end(c: &[char], i: usize) -> Option<usize> {
    if c[i] != 'r' || (i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')) {
        return None;
    }
    let hashes = c[i + 1..].iter().take_while(|&&x| x == '#').count();
    if c.get(i + 1 + hashes) != Some(&'"') {
        return None;
    }
    let close: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    let body = i + 2 + hashes;
    (body..c.len())
        .find(|&j| c[j..].starts_with(&close))
        .map_or(Some(c.len()), |j| Some(j + close.len()))
}

/// The length of a char literal (`'a'`, `'\n'`) at `i`; lifetimes are not literals.
fn char_literal(c: &[char], i: usize) -> Option<usize> {
    if c[i] != '\'' {
        return None;
    }
    match (c.get(i + 1), c.get(i + 2), c.get(i + 3)) {
        (Some('\\'), Some(_), Some('\'')) => Some(4),
        (Some(x), Some('\''), _) if *x != '\\' && *x != '\'' => Some(3),
        _ => None,
    }
}

/// `code` without every item under `#[cfg(test)]` (its braces, or up to its `;`).
pub fn strip_test_items(code: &str) -> String {
    let c: Vec<char> = code.chars().collect();
    let (mut out, mut i) = (String::new(), 0);
    while let Some(at) = next_test_attr(&c, i) {
        out.extend(&c[i..at.0]);
        let mut j = at.1;
        while j < c.len() && c[j] != '{' && c[j] != ';' {
            j += 1;
        }
        if j < c.len() && c[j] == '{' {
            let mut depth = 0i32;
            while j < c.len() {
                depth += match c[j] {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                j += 1;
                if depth == 0 {
                    break;
                }
            }
        } else {
            j += 1;
        }
        i = j;
    }
    out.extend(&c[i.min(c.len())..]);
    out
}

/// The next `#[cfg(test)]` or `#[cfg(any(test, …))]` from `from`: (start, end).
fn next_test_attr(c: &[char], from: usize) -> Option<(usize, usize)> {
    let s: String = c[from.min(c.len())..].iter().collect();
    let k = ["#[cfg(test)]", "#[cfg(any(test"]
        .iter()
        .filter_map(|p| s.find(p))
        .min()?;
    let len = s[k..].find(']').map_or(s.len() - k, |e| e + 1);
    let start = from + s[..k].chars().count();
    Some((start, start + s[k..k + len].chars().count()))
}

/// Children declared as `mod x;` (any visibility), and those declared under `#[cfg(test)]`.
fn children(code: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut all, mut test) = (BTreeSet::new(), BTreeSet::new());
    let mut cfg_test = false;
    for line in code.lines().map(str::trim) {
        if line.starts_with("#[cfg(test)]") {
            cfg_test = true;
            continue;
        }
        let decl = line
            .strip_prefix("pub ")
            .or_else(|| line.strip_prefix("pub(crate) "))
            .or_else(|| line.strip_prefix("pub(super) "))
            .unwrap_or(line);
        if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
            all.insert(name.trim().to_string());
            if cfg_test {
                test.insert(name.trim().to_string());
            }
        }
        if !line.is_empty() && !line.starts_with("#[") {
            cfg_test = false;
        }
    }
    (all, test)
}

/// The trees of every `use` (and `pub use`) in `code`, with whether each is public.
fn use_trees(code: &str) -> Vec<(bool, String)> {
    let mut out = vec![];
    let mut rest = code;
    while let Some(k) = find_word(rest, "use") {
        let before = rest[..k].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let after = &rest[k + 3..];
        let Some(end) = after.find(';') else { break };
        out.push((public, after[..end].to_string()));
        rest = &after[end..];
    }
    out
}

/// The byte offset of `word` standing alone (not inside an identifier).
fn find_word(s: &str, word: &str) -> Option<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(k) = s[from..].find(word).map(|k| k + from) {
        let ok_before = s[..k].chars().next_back().is_none_or(|c| !ident(c));
        let ok_after = s[k + word.len()..].chars().next().is_none_or(|c| !ident(c));
        if ok_before && ok_after {
            return Some(k);
        }
        from = k + word.len();
    }
    None
}

/// `a::{b, c::{d as e}}` -> `a::b`, `a::c::d as e`.
pub fn expand_use(tree: &str) -> Vec<String> {
    let words: Vec<&str> = tree.split_whitespace().collect();
    let tree = words.join(" ").replace(" as ", "@as@").replace(' ', "");
    expand(&tree)
        .into_iter()
        .map(|s| s.replace("@as@", " as "))
        .collect()
}

fn expand(tree: &str) -> Vec<String> {
    let (Some(open), true) = (tree.find('{'), tree.ends_with('}')) else {
        return vec![tree.to_string()];
    };
    let (prefix, inner) = (&tree[..open], &tree[open + 1..tree.len() - 1]);
    let mut parts = vec![String::new()];
    let mut depth = 0;
    for ch in inner.chars() {
        match ch {
            ',' if depth == 0 => parts.push(String::new()),
            _ => {
                depth += i32::from(ch == '{') - i32::from(ch == '}');
                parts.last_mut().unwrap().push(ch);
            }
        }
    }
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand(&format!("{prefix}{p}")))
        .collect()
}

/// The deepest module file `path` names.
fn resolve(path: &[String], files: &BTreeMap<Mod, PathBuf>) -> Option<Mod> {
    (0..=path.len())
        .rev()
        .map(|k| path[..k].to_vec())
        .find(|m| files.contains_key(m))
}

/// `super`/`self`/`crate` at the head of `segs`, applied to `module`: the path it names.
fn absolute(module: &[String], segs: &[String]) -> Option<Vec<String>> {
    match segs.first().map(String::as_str) {
        Some("crate") => Some(segs[1..].to_vec()),
        Some("super" | "self") => {
            let mut base = module.to_vec();
            let mut rest = segs;
            while let Some(h) = rest.first().filter(|h| *h == "super" || *h == "self") {
                if h == "super" {
                    base.pop();
                }
                rest = &rest[1..];
            }
            base.extend_from_slice(rest);
            Some(base)
        }
        _ => None,
    }
}

fn segments(path: &str) -> Vec<String> {
    let path = path.split(" as ").next().unwrap_or(path);
    path.split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Names a module re-exports (`pub use x::Name`) -> the module each comes from.
fn reexports(
    module: &[String],
    code: &str,
    files: &BTreeMap<Mod, PathBuf>,
) -> BTreeMap<String, Mod> {
    let mut out = BTreeMap::new();
    for (_, tree) in use_trees(code).into_iter().filter(|(public, _)| *public) {
        for r in expand_use(&tree) {
            let segs = segments(&r);
            if segs.len() < 2 || segs.last().is_some_and(|s| s == "*") {
                continue;
            }
            let name = r.rsplit(" as ").next().unwrap_or(&r);
            let name = name.rsplit("::").next().unwrap_or(name).to_string();
            let parent = &segs[..segs.len() - 1];
            let base = absolute(module, parent).unwrap_or_else(|| [module, parent].concat());
            if resolve(&base, files).is_some() {
                out.insert(name, base);
            }
        }
    }
    out
}

/// The files one module's code uses.
struct Uses<'a> {
    module: &'a [String],
    files: &'a BTreeMap<Mod, PathBuf>,
    reexported: &'a BTreeMap<Mod, BTreeMap<String, Mod>>,
    out: BTreeSet<Mod>,
}

impl Uses<'_> {
    fn add(&mut self, mut path: Vec<String>) {
        let mut target = resolve(&path, self.files);
        // `crate::Error` where the root re-exports `error::Error` names error.rs.
        for _ in 0..4 {
            let Some(t) = target.as_ref().filter(|t| path.len() > t.len()) else {
                break;
            };
            let Some(via) = self.reexported.get(t).and_then(|r| r.get(&path[t.len()])) else {
                break;
            };
            path = [via.as_slice(), &path[t.len()..]].concat();
            target = resolve(&path, self.files);
        }
        if let Some(t) = target.filter(|t| t.as_slice() != self.module) {
            self.out.insert(t);
        }
    }

    fn path(&mut self, segs: Vec<String>, children: &BTreeSet<String>) {
        if let Some(p) = absolute(self.module, &segs) {
            self.add(p);
        } else if segs.first().is_some_and(|h| children.contains(h)) {
            self.add([self.module, &segs].concat());
        }
    }
}

/// The edges of one module file.
fn edges_of(
    module: &[String],
    code: &str,
    files: &BTreeMap<Mod, PathBuf>,
    reexported: &BTreeMap<Mod, BTreeMap<String, Mod>>,
) -> BTreeSet<Mod> {
    let (children, _) = children(code);
    let mut uses = Uses {
        module,
        files,
        reexported,
        out: BTreeSet::new(),
    };
    for (_, tree) in use_trees(code) {
        for r in expand_use(&tree) {
            uses.path(segments(&r), &children);
        }
    }
    let mut no_uses = code.to_string();
    for (_, tree) in use_trees(code) {
        no_uses = no_uses.replacen(&tree, " ", 1);
    }
    for head in ["crate", "super", "self"] {
        for segs in paths_from(&no_uses, head) {
            uses.path(segs, &children);
        }
    }
    for child in &children {
        if !paths_from(&no_uses, child).is_empty() {
            uses.add([module, std::slice::from_ref(child)].concat());
        }
    }
    uses.out
}

/// Every `head::a::b` path in code (`head` standing alone), as its segments.
fn paths_from(code: &str, head: &str) -> Vec<Vec<String>> {
    let mut out = vec![];
    let mut rest = code;
    while let Some(k) = find_word(rest, head) {
        let before_colon = rest[..k].ends_with(':');
        let tail = &rest[k..];
        let len = tail
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        let path = tail[..len].trim_end_matches(':');
        if !before_colon && path.len() > head.len() && path[head.len()..].starts_with("::") {
            out.push(segments(path));
        }
        rest = &tail[head.len()..];
    }
    out
}

/// The crate's file graph, file -> files it uses, test code left out.
pub fn graph(src: &Path) -> (BTreeMap<Mod, PathBuf>, BTreeMap<Mod, BTreeSet<Mod>>) {
    let files = crate_files(src);
    let mut codes = BTreeMap::new();
    let mut test_mods = BTreeSet::new();
    for (m, p) in &files {
        let raw = strip_comments_and_strings(&std::fs::read_to_string(p).unwrap());
        for c in children(&raw).1 {
            test_mods.insert([m.as_slice(), &[c]].concat());
        }
        codes.insert(m.clone(), strip_test_items(&raw));
    }
    let reexported = codes
        .iter()
        .map(|(m, code)| (m.clone(), reexports(m, code, &files)))
        .collect();
    let is_test = |m: &Mod| {
        m.last().is_some_and(|x| x == "tests") || (1..=m.len()).any(|k| test_mods.contains(&m[..k]))
    };
    let mut g = BTreeMap::new();
    for (m, code) in &codes {
        if is_test(m) {
            continue;
        }
        let found = edges_of(m, code, &files, &reexported);
        g.insert(
            m.clone(),
            found.into_iter().filter(|t| !is_test(t)).collect(),
        );
    }
    (files, g)
}

/// The strongly connected components of more than one node (Tarjan's, iterative by recursion
/// depth of a crate's module tree, which is shallow).
pub fn circles(g: &BTreeMap<Mod, BTreeSet<Mod>>) -> Vec<BTreeSet<Mod>> {
    struct T<'a> {
        g: &'a BTreeMap<Mod, BTreeSet<Mod>>,
        index: BTreeMap<&'a Mod, (usize, usize)>,
        stack: Vec<&'a Mod>,
        out: Vec<BTreeSet<Mod>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a Mod) {
        let (i, g) = (t.index.len(), t.g);
        t.index.insert(v, (i, i));
        t.stack.push(v);
        for w in g.get(v).into_iter().flatten() {
            let Some((w, _)) = g.get_key_value(w) else {
                continue;
            };
            match t.index.get(w).copied() {
                None => {
                    visit(t, w);
                    let low = t.index[w].1.min(t.index[v].1);
                    t.index.get_mut(v).unwrap().1 = low;
                }
                Some((wi, _)) if t.stack.contains(&w) => {
                    let low = wi.min(t.index[v].1);
                    t.index.get_mut(v).unwrap().1 = low;
                }
                Some(_) => {}
            }
        }
        if t.index[v].0 == t.index[v].1 {
            let mut comp = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                comp.insert(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        stack: vec![],
        out: vec![],
    };
    for v in g.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn use_trees_expand_with_renames() {
        assert_eq!(
            expand_use("a::{b, c::{d as e, f}}"),
            s(&["a::b", "a::c::d as e", "a::c::f"])
        );
    }

    #[test]
    fn comments_strings_and_test_items_are_not_code() {
        let code = "use crate::a; // crate::b\nlet s = \"crate::c\"; let r = r#\"crate::d\"#;\n\
                    #[cfg(test)]\nmod t { use crate::e; }\nfn f<'a>(x: &'a str) -> char { 'x' }";
        let code = strip_test_items(&strip_comments_and_strings(code));
        assert!(code.contains("crate::a"));
        for gone in ["crate::b", "crate::c", "crate::d", "crate::e"] {
            assert!(!code.contains(gone), "{gone} in {code}");
        }
        assert!(code.contains("&'a str"));
    }

    #[test]
    fn a_parent_and_child_that_use_each_other_are_a_circle() {
        let files: BTreeMap<Mod, PathBuf> = [vec![], s(&["p"]), s(&["p", "c"]), s(&["q"])]
            .into_iter()
            .map(|m| (m, PathBuf::new()))
            .collect();
        let none = BTreeMap::new();
        let parent = edges_of(
            &s(&["p"]),
            "mod c;\nuse c::X;\npub struct Y;",
            &files,
            &none,
        );
        let child = edges_of(
            &s(&["p", "c"]),
            "use super::Y;\nuse crate::q::Z;",
            &files,
            &none,
        );
        assert_eq!(parent, [s(&["p", "c"])].into_iter().collect());
        assert_eq!(child, [s(&["p"]), s(&["q"])].into_iter().collect());
        let g = [(s(&["p"]), parent), (s(&["p", "c"]), child)]
            .into_iter()
            .collect();
        assert_eq!(
            circles(&g),
            vec![[s(&["p"]), s(&["p", "c"])].into_iter().collect()]
        );
    }

    #[test]
    fn a_reexported_name_names_the_file_it_comes_from() {
        let files: BTreeMap<Mod, PathBuf> =
            [vec![], s(&["n"]), s(&["n", "log"]), s(&["n", "lines"])]
                .into_iter()
                .map(|m| (m, PathBuf::new()))
                .collect();
        let re: BTreeMap<Mod, BTreeMap<String, Mod>> = [(
            s(&["n"]),
            reexports(&s(&["n"]), "pub use log::{Log, Evidence as Ev};", &files),
        )]
        .into_iter()
        .collect();
        let e = edges_of(&s(&["n", "lines"]), "use super::{Log, Ev};", &files, &re);
        assert_eq!(e, [s(&["n", "log"])].into_iter().collect());
    }
}
