#!/usr/bin/env python3
"""Summarise a bench/verify run: busbw of topo-runtime and Open MPI per size, medians over the
repeats of each vCPU placement (near: c2c < 100 ns, far: above), and the ratios."""
import re, statistics, sys
from collections import defaultdict

stamp = sys.argv[1]
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)")

def parse(variant):
    reps = []
    try:
        text = open(f"{stamp}-{variant}.txt").read()
    except FileNotFoundError:
        return reps
    for block in text.split("### repeat")[1:]:
        c2c = [float(x) for x in re.findall(r"c2c \w+:.*?: ([\d.]+) ns", block)]
        busy = [int(x) for x in re.findall(r"background CPU busy before start: (\d+)%", block)]
        mode = "far" if c2c and max(c2c) > 100 else "near"
        if c2c and min(c2c) <= 100 < max(c2c):
            mode = "mixed"
        if busy and max(busy) >= 50:
            # Other processes held the CPUs: c2c then measures scheduling, not placement.
            mode = "loaded"
        rows = {}
        for line in block.splitlines():
            m = ROW.match(line)
            if m:
                rows[int(m.group(1))] = (float(m.group(6)), float(m.group(8)), int(m.group(9)))
        ceil = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"(\d+) B copyin=0 .*?busbw ([\d.]+) GB/s", block)}
        reps.append((mode, rows, ceil, c2c))
    return reps

variants = {v: parse(v) for v in ["ours", "ompi-tuned", "ompi-default", "ceiling"]}
if "--placements" in sys.argv[2:]:
    # The quiet placements both ours and Open MPI tuned have a repeat in (run.sh's
    # UNTIL_BOTH loop stops when this prints "near far").
    seen = [{m for m, *_ in variants[v]} for v in ["ours", "ompi-tuned"]]
    print(" ".join(m for m in ["near", "far"] if all(m in s for s in seen)))
    sys.exit(0)
for mode in ["near", "far", "mixed", "loaded"]:
    by = defaultdict(lambda: defaultdict(list))
    n = 0
    for v, reps in variants.items():
        for m, rows, ceil, _ in reps:
            if m != mode:
                continue
            n += 1
            for size, (t, bw, wrong) in rows.items():
                by[v][size].append((t, bw, wrong))
            for size, bw in ceil.items():
                by[v][size].append((0.0, bw, 0))
    if not n:
        continue
    label = "machine loaded by other processes (>= 50% CPU busy before start)" if mode == "loaded" else f"placement {mode}"
    print(f"## {label}: medians over repeats (busbw GB/s; time us at 8 B)")
    print(f"{'size':>11} {'ours':>8} {'ompi-tuned':>10} {'ompi-def':>9} {'ceiling':>8} {'ours/tuned':>10} {'ours/def':>9} {'wrong':>6}")
    sizes = sorted(set().union(*[set(d) for d in by.values()]))
    for s in sizes:
        def med(v, k=1):
            xs = [x[k] for x in by[v].get(s, [])]
            return statistics.median(xs) if xs else None
        o, t, d, c = med("ours"), med("ompi-tuned"), med("ompi-default"), med("ceiling")
        wrong = sum(x[2] for v in by for x in by[v].get(s, []))
        f = lambda x: f"{x:8.2f}" if x is not None else f"{'-':>8}"
        r1 = f"{o / t:10.2f}" if o and t else f"{'-':>10}"
        r2 = f"{o / d:9.2f}" if o and d else f"{'-':>9}"
        print(f"{s:>11} {f(o)} {f(t):>10} {f(d):>9} {f(c)} {r1} {r2} {wrong:>6}")
        if s == 8:
            ot, tt = med("ours", 0), med("ompi-tuned", 0)
            if ot and tt:
                print(f"{'':>11} latency at 8 B: ours {ot:.2f} us, Open MPI tuned {tt:.2f} us, ratio {ot / tt:.2f}")
    print()
