#!/usr/bin/env python3
"""Functions longer than 150 lines, counted from `fn` to its closing brace, outside tests.

A ratchet: .ci/fn-lengths-allowed.txt lists the functions that were already longer when the
rule came in, with their length then. The check fails when a function not listed passes 150
lines or a listed one grows; a listed one that shrank under the limit is reported, to be
taken off the list. Usage: .ci/fn_lengths.py [--list] (from the repository root).
"""
import os
import re
import sys

LIMIT = 150
FN = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?((const|async|unsafe|extern\s+"C")\s+)*fn\s+(\w+)')
TEST_MOD = re.compile(r'^\s*#\[cfg\((test|any\(test)')


def strip(line, state):
    """The line without comments, strings and char literals; `state` carries a block comment
    or a string across lines."""
    out, i, n = [], 0, len(line)
    while i < n:
        if state["block"]:
            j = line.find("*/", i)
            if j < 0:
                return "".join(out)
            state["block"], i = False, j + 2
            continue
        if state["raw"] is not None:
            j = line.find(state["raw"], i)
            if j < 0:
                return "".join(out)
            i, state["raw"] = j + len(state["raw"]), None
            continue
        if state["str"]:
            if line[i] == "\\":
                i += 2
                continue
            if line[i] == '"':
                state["str"] = False
            i += 1
            continue
        c = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"], i = True, i + 2
            continue
        m = re.match(r'(b?r)(#*)"', line[i:])
        if m and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == "_")):
            state["raw"], i = '"' + m.group(2), i + len(m.group(0))
            continue
        if c == '"':
            state["str"], i = True, i + 1
            continue
        m = re.match(r"'(\\.|[^'\\])'", line[i:])
        if c == "'" and m:
            i += len(m.group(0))
            continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(path):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    state = {"block": False, "raw": None, "str": False}
    code = [strip(l, state) for l in lines]
    out, skip_until = [], -1
    for i, l in enumerate(lines):
        if i <= skip_until:
            continue
        if TEST_MOD.match(l):
            # Skip the test module (or item) that follows: to its closing brace.
            end = close(code, i + 1)
            if end is not None:
                skip_until = end
            continue
        m = FN.match(code[i])
        if not m:
            continue
        end = close(code, i)
        if end is not None:
            out.append((m.group(5), i + 1, end - i + 1))
    return out


def close(code, start):
    """The line where the first brace block opened at or after `start` closes; None for a
    declaration that ends with `;` first."""
    depth, opened = 0, False
    for j in range(start, len(code)):
        for c in code[j]:
            if c == "{":
                depth, opened = depth + 1, True
            elif c == "}":
                depth -= 1
                if opened and depth == 0:
                    return j
            elif c == ";" and not opened and depth == 0:
                return None
    return None


def sources():
    """Every Cargo target's code outside tests: the binary, each crate's library (its test
    generators included) and examples, the bench programs and the fuzz targets."""
    roots = ["src", "bench", os.path.join("fuzz", "fuzz_targets")]
    for c in sorted(os.listdir("crates")):
        roots += [os.path.join("crates", c, d) for d in ("src", "examples", "benches")]
    for root in roots:
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x not in ("tests", "target"))
            for f in sorted(files):
                if f.endswith(".rs") and f not in ("tests.rs", "testing.rs"):
                    yield os.path.join(d, f)


def main():
    allowed = {}
    path = ".ci/fn-lengths-allowed.txt"
    if os.path.exists(path):
        for l in open(path):
            l = l.split("#")[0].strip()
            if l:
                name, n = l.rsplit(" ", 1)
                allowed[name] = int(n)
    long = []
    for f in sources():
        for name, line, n in functions(f):
            if n > LIMIT:
                long.append((f"{f}::{name}", n, line))
    if "--list" in sys.argv:
        for key, n, _ in sorted(long):
            print(f"{key} {n}")
        return 0
    bad = [(k, n, l) for k, n, l in long if n > allowed.get(k, LIMIT)]
    seen = {k for k, _, _ in long}
    for k in sorted(set(allowed) - seen):
        print(f"fn-lengths: {k} is now within {LIMIT} lines: take it off {path}")
    for k, n, l in bad:
        was = allowed.get(k)
        why = f"grew from {was}" if was else f"over {LIMIT}"
        print(f"fn-lengths: {k} (line {l}) has {n} lines, {why}: split it along its phases")
    print(f"fn-lengths: {len(long)} function(s) over {LIMIT} lines ({len(allowed)} allowed, shrinking)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
