#!/usr/bin/env python3
"""Import circles between module files, per crate: a file that uses another is never used back
by it, directly or through others (issue 27).

The graph has one node per module file (`lib.rs`/`main.rs` the crate root, `a.rs` or `a/mod.rs`
module `a`). File A has an edge to file B when A's code (tests excluded) names B's module:
`crate::x::y` paths, `super::` and `self::` paths, and paths that start with a child module A
declares (`mod child;` then `child::f()` or `use child::X`). Declaring a child (`mod child;`,
`pub mod child;`) is not a use. A path resolves to the deepest module file it names
(`crate::report::show::Ctx` is `report/show.rs`). Test code is left out: files named
`tests.rs` or under a `tests/` folder of a crate's src, files only declared under
`#[cfg(test)]`, and every `#[cfg(test)]` item's braces.

Prints each strongly connected component of more than one file with the edges that close it.
A ratchet like fn_lengths.py: .ci/import-cycles-allowed.txt lists the circles that were there
when the rule came in, one per line as their files; a circle may only shrink (its files a subset
of a listed one), any other fails (exit 1), and a listed one that is gone is reported, to be
taken off. Usage: .ci/import_cycles.py [--list] (from the repository root).
"""
import os
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)
USE_TREE = re.compile(r"\buse\s+([^;]+);", re.S)


def strip_comments_and_strings(text):
    """The code with comments, string and char literals blanked (lines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if text[i] == "\n" else "")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 40]) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_test_items(code):
    """`code` without every item under `#[cfg(test)]` (its braces or up to its `;`)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\((?:test|any\(test[^\]]*)\)\]", code):
        if m.start() < i:
            continue
        out.append(code[i:m.start()])
        j = m.end()
        while j < len(code) and code[j] not in "{;":
            j += 1
        if j < len(code) and code[j] == "{":
            depth = 0
            while j < len(code):
                depth += {"{": 1, "}": -1}.get(code[j], 0)
                j += 1
                if depth == 0:
                    break
        else:
            j += 1
        i = j
    out.append(code[i:])
    return "".join(out)


def test_only_children(code):
    """Child modules declared only under #[cfg(test)]."""
    return set(re.findall(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code))


def crate_files(src):
    """Module path (tuple) -> file, for the crate rooted at `src`."""
    files = {}
    for dirpath, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), src)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("lib", "main") and len(parts) == 1:
                mod = ()
            elif parts[-1] == "mod":
                mod = tuple(parts[:-1])
            else:
                mod = tuple(parts)
            files[mod] = os.path.join(dirpath, name)
    return files


def resolve(path, files):
    """The deepest module file a module path names."""
    for k in range(len(path), -1, -1):
        if tuple(path[:k]) in files:
            return tuple(path[:k])
    return None


def expand_use(tree):
    """`a::{b, c::{d}}` -> ["a::b", "a::c::d"] (enough to find module prefixes)."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [tree]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    return [x for p in parts if p for x in expand_use(prefix + p)]


def reexports(mod, code, files):
    """Names module `mod` re-exports (`pub use child::Name`, `pub use crate::a::Name`) -> the
    module path each comes from, so a path through the re-export names the real file."""
    out = {}
    for tree in re.findall(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code, re.S):
        for ref in expand_use(tree):
            segs = [x for x in re.split(r"::", ref.split(" as ")[0]) if x]
            if len(segs) < 2 or segs[-1] == "*":
                continue
            name = ref.split(" as ")[-1].split("::")[-1]
            head = segs[0]
            if head == "crate":
                base = segs[1:-1]
            elif head in ("super", "self"):
                base = list(mod)
                rest = segs[:-1]
                while rest and rest[0] in ("super", "self"):
                    if rest[0] == "super" and base:
                        base.pop()
                    rest = rest[1:]
                base = base + rest
            else:
                base = list(mod) + segs[:-1]
            if resolve(base, files) is not None:
                out[name] = tuple(base)
    return out


def edges_of(mod, code, files, children, reexported):
    out = set()

    def add(path):
        target = resolve(path, files)
        # `crate::Error` where the root re-exports `error::Error` names error.rs.
        for _ in range(4):
            if target is None or len(path) <= len(target):
                break
            via = reexported.get(target, {}).get(path[len(target)])
            if via is None:
                break
            path = list(via) + list(path[len(target):])
            target = resolve(path, files)
        if target is not None and target != mod:
            out.add(target)

    # `use` trees are expanded whole (a `crate::a::{B, C}` prefix alone would name `a`'s file
    # even when B and C are re-exports of others); other paths are read as they stand.
    refs = [m.group(0) for m in PATH.finditer(USE_TREE.sub(" ", code))]
    for tree in USE_TREE.findall(code):
        refs.extend(expand_use(tree))
    for ref in refs:
        segs = [s for s in ref.split("::") if s]
        if not segs:
            continue
        head, rest = segs[0], segs[1:]
        # A file's own module is `mod`; `super` is the module above it.
        if head == "crate":
            add(rest)
        elif head in ("super", "self"):
            base = list(mod)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super" and base:
                    base.pop()
                segs = segs[1:]
            add(base + segs)
        elif head in children:
            add(list(mod) + segs)
    # A bare `child::x` path in code.
    for child in children:
        if re.search(r"(?<![:\w])" + child + r"::", code):
            add(list(mod) + [child])
    return out


def sccs(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


ALLOWED = os.path.join(os.path.dirname(__file__), "import-cycles-allowed.txt")


def allowed():
    if not os.path.exists(ALLOWED):
        return []
    return [set(line.split()) for line in open(ALLOWED) if line.strip() and not line.startswith("#")]


def check_crate(src):
    files = crate_files(src)
    graph, test_mods = {}, set()
    for mod, path in files.items():
        raw = strip_comments_and_strings(open(path, encoding="utf-8").read())
        test_mods |= {mod + (c,) for c in test_only_children(raw)}
    codes = {}
    for mod, path in files.items():
        codes[mod] = strip_test_items(strip_comments_and_strings(open(path, encoding="utf-8").read()))
    reexported = {mod: reexports(mod, code, files) for mod, code in codes.items()}
    for mod, path in files.items():
        if any(mod[:k] in test_mods for k in range(1, len(mod) + 1)) or (mod and mod[-1] == "tests"):
            continue
        code = codes[mod]
        children = set(MOD_DECL.findall(code))
        found = edges_of(mod, code, files, children, reexported)
        graph[mod] = {t for t in found if t not in test_mods}
    def name(m):
        return os.path.relpath(files[m])

    return [(sorted(name(m) for m in c), c, graph, name) for c in sccs(graph) if len(c) > 1]


def main():
    roots = ["src"] + sorted(
        os.path.join("crates", c, "src") for c in os.listdir("crates") if os.path.isdir(os.path.join("crates", c, "src"))
    )
    found = [c for r in roots for c in check_crate(r)]
    if "--list" in sys.argv:
        for files, *_ in found:
            print(" ".join(files))
        return
    ok = allowed()
    failed = 0
    for files, comp, graph, name in found:
        listed = any(set(files) <= a for a in ok)
        failed += not listed
        print(f"import-cycles: a circle of {len(files)} files{' (listed: may only shrink)' if listed else ''}:")
        members = set(comp)
        for a in sorted(comp, key=name):
            for b in sorted(graph[a] & members, key=name):
                print(f"  {name(a)} -> {name(b)}")
    for a in ok:
        if not any(set(files) <= a for files, *_ in found):
            print(f"import-cycles: a listed circle is gone: take it off {ALLOWED}: {' '.join(sorted(a))}")
    print(f"import-cycles: {len(found)} circle(s) over {len(roots)} crates, {failed} not listed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
