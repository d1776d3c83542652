#!/usr/bin/env python3
"""Fit topo's measured-behaviour constants (crates/topo-nccl/data/measured.yaml) to the points
bench/fidelity/run.sh wrote: for each (GPU generation, algorithm, protocol, one node or several)
that NCCL chose at some measured size, the latency L (us), bandwidth efficiency E and ramp R that make
    expected_time = L + tb / E + R * sqrt(tb),   tb = bytes / (1000 * bw)
closest to the measured time in relative terms (weighted least squares on time / measured - 1),
where bw is NCCL's own algorithm bandwidth for that choice. Only healthy results with role fit
are used; held-out results are reported by run.sh against the fitted constants.

usage: fit.py points.tsv > crates/topo-nccl/data/measured.yaml   (then review the diff)
       fit.py --report points.tsv   (the leave-one-source-out table of bench/fidelity/loso.md)
"""
import csv
import math
import sys
from collections import defaultdict

ARCH = {"dgx-a100": "sm80", "dgx-h100": "sm90", "hgx-h200": "sm90", "dgx-b200": "sm100", "gb200-nvl72": "sm100"}


def arch_of(topo):
    for prof, sm in ARCH.items():
        if prof in topo:
            return sm
    raise SystemExit(f"no architecture known for `{topo}`")


def nodes_of(nnodes):
    """NCCL's node count as the plan reports it: the trays of one NVLink clique (GB200 NVL72)
    are one node to NCCL, so a full rack is "single" and two racks "multi"."""
    return "multi" if int(nnodes) > 1 else "single"


def solve(a, b):
    """Gaussian elimination with partial pivoting; None if singular."""
    n = len(b)
    m = [a[i][:] + [b[i]] for i in range(n)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if abs(m[c][c]) < 1e-300:
            return None
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def lsq(points, feats, fixed=0.0):
    """Weighted least squares on relative error: minimise sum((fixed + sum c_i f_i(s, bw)) / t - 1)^2."""
    k = len(feats)
    a = [[0.0] * k for _ in range(k)]
    b = [0.0] * k
    for s, t, bw, _ in points:
        x = [f(s, bw) / t for f in feats]
        y = 1.0 - fixed / t
        for i in range(k):
            b[i] += x[i] * y
            for j in range(k):
                a[i][j] += x[i] * x[j]
    return solve(a, b)


def tb(s, bw):
    """NCCL's bandwidth term of the time, us."""
    return s / (1000.0 * bw)


# Below this size the latency is visible in the time; a rule fitted only above it has no
# information on latency, so it keeps NCCL's own (a fitted constant there stands for the ramp
# and would be wrong by 10x at small sizes, where NCCL makes the same choice on NVL72).
LAT_VISIBLE_BYTES = 16 << 20


def fit(points):
    """(lat_us, bw_efficiency, ramp) of expected = lat + tb / eff + ramp * sqrt(tb).

    The three-term form when the sizes span at least 16x and every term comes out physical
    (non-negative latency and ramp, positive efficiency); else the same without the ramp; else
    NCCL's bandwidth with a fitted latency alone. A rule whose smallest size is at least
    LAT_VISIBLE_BYTES keeps NCCL's latency and fits the other two terms."""
    sizes = [p[0] for p in points]
    span = max(sizes) / min(sizes)
    one, lin, root = (lambda s, bw: 1.0), tb, (lambda s, bw: math.sqrt(tb(s, bw)))
    if min(sizes) >= LAT_VISIBLE_BYTES:
        lat = sum(p[3] for p in points) / len(points)
        if len(points) >= 3 and span >= 4:
            c = lsq(points, [lin, root], fixed=lat)
            if c and c[0] > 0 and c[1] >= 0:
                return lat, 1.0 / c[0], c[1]
        c = lsq(points, [lin], fixed=lat)
        return lat, 1.0 / c[0], 0.0
    if len(points) >= 4 and span >= 16:
        c = lsq(points, [one, lin, root])
        if c and c[0] >= 0 and c[1] > 0 and c[2] >= 0:
            return c[0], 1.0 / c[1], c[2]
    if len(points) >= 3 and span >= 4:
        c = lsq(points, [one, lin])
        if c and c[0] >= 0 and c[1] > 0:
            return c[0], 1.0 / c[1], 0.0
    lat = sum((t - tb(s, bw)) / t for s, t, bw, _ in points) / sum(1.0 / t for s, t, bw, _ in points)
    return max(lat, 0.0), 1.0, 0.0


def key_of(r):
    algo, proto = r["choice"].split("/")
    return (arch_of(r["topo"]), r["collective"], algo, proto, nodes_of(r["nnodes"]))


def rules_from(rows):
    """The fitted rules of the healthy, role-fit rows: key -> dict."""
    groups = defaultdict(list)
    sources = defaultdict(set)
    ranks = defaultdict(set)
    for r in rows:
        if r["health"] != "ok" or r["role"] != "fit":
            continue
        key = key_of(r)
        groups[key].append(
            (float(r["bytes"]), float(r["measured_us"]), float(r["bw_gbps"]), float(r["lat_us"]))
        )
        sources[key].add(r["fixture"].removesuffix(".txt"))
        ranks[key].add(int(r["nranks"]))
    out = {}
    for key, pts in groups.items():
        lat, eff, ramp = fit(pts)
        out[key] = {"lat": lat, "eff": eff, "ramp": ramp, "points": len(pts),
                    "lo": min(p[0] for p in pts), "hi": max(p[0] for p in pts),
                    "rlo": min(ranks[key]), "rhi": max(ranks[key]), "from": sorted(sources[key])}
    return out


# measured.rs's coverage: a rule fitted only from LAT_VISIBLE_BYTES up applies from a quarter of
# its smallest size, and every rule to rank counts within 2x of those it was fitted on.
BELOW_FITTED, RANK_SPAN = 4, 2


def expected_us(rules, r):
    """(expected time, True when a rule gave it) as measured.rs computes it; the rule's constants
    are the file's rounded ones, so a held-out prediction equals the binary's."""
    rule = rules.get(key_of(r))
    s, n, bw = float(r["bytes"]), int(r["nranks"]), float(r["bw_gbps"])
    if rule is None or bw <= 0:
        return float(r["model_us"]), False
    size_ok = rule["lo"] < LAT_VISIBLE_BYTES or s * BELOW_FITTED >= rule["lo"]
    ranks_ok = n * RANK_SPAN >= rule["rlo"] and n <= rule["rhi"] * RANK_SPAN
    if not (size_ok and ranks_ok):
        return float(r["model_us"]), False
    lat, eff, ramp = round(rule["lat"], 1), round(rule["eff"], 3), round(rule["ramp"], 3)
    t = tb(s, bw)
    return lat + t / eff + ramp * math.sqrt(t), True


def size_band(b):
    b = float(b)
    return "small" if b <= 65536 else ("large" if b >= 16 << 20 else "mid")


def held_out(rows):
    """Leave one source out: for every healthy result, its points predicted by the rules fitted
    on every other source (a held-out fixture is never fitted on, so it is its own case).
    Yields (row, measured busbw / expected busbw, whether a rule gave the expected)."""
    healthy = [r for r in rows if r["health"] == "ok"]
    for fx in sorted({r["fixture"] for r in healthy}):
        rules = rules_from([r for r in rows if r["fixture"] != fx])
        for r in (r for r in healthy if r["fixture"] == fx):
            e, ruled = expected_us(rules, r)
            yield r, e / float(r["measured_us"]), ruled


def quantile(xs, q):
    xs = sorted(xs)
    i = q * (len(xs) - 1)
    lo = int(math.floor(i))
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (i - lo)


# The band keeps the middle BAND_SHARE of held-out ratios; never narrower than MIN_HALF_WIDTH
# each side (run-to-run spread of nccl-tests itself), and a cell with fewer than MIN_POINTS
# held-out points takes the pooled band of its basis, widened by WIDEN.
BAND_SHARE, MIN_HALF_WIDTH, MIN_POINTS, WIDEN = 0.8, 0.10, 8, 1.5


def band_of(qs):
    tail = (1 - BAND_SHARE) / 2
    lo, hi = quantile(qs, tail), quantile(qs, 1 - tail)
    return min(lo, 1 - MIN_HALF_WIDTH), max(hi, 1 + MIN_HALF_WIDTH)


def bands(rows):
    cells = defaultdict(list)
    for r, q, ruled in held_out(rows):
        cells[("rule" if ruled else "nccl", size_band(r["bytes"]))].append((q, r["fixture"]))
    out = []
    for basis in ("rule", "nccl"):
        pooled = [q for (b, _), v in cells.items() if b == basis for q, _ in v]
        for sb in ("small", "mid", "large"):
            v = cells.get((basis, sb), [])
            qs = [q for q, _ in v]
            if len(qs) >= MIN_POINTS:
                lo, hi = band_of(qs)
                how = "held-out points"
            elif len(pooled) >= MIN_POINTS:
                lo, hi = band_of(pooled)
                lo, hi = 1 - (1 - lo) * WIDEN, 1 + (hi - 1) * WIDEN
                how = f"pooled over sizes, widened x{WIDEN} (only {len(qs)} points here)"
            else:
                lo, hi = 0.5, 1.5
                how = "no held-out data: +-50%"
            out.append({"basis": basis, "sizes": sb, "lo": lo, "hi": hi, "points": len(qs),
                        "sources": len({f for _, f in v}), "how": how})
    return out


def report(rows):
    """Markdown: the held-out error per size range, the band coverage, the worst points."""
    pts = list(held_out(rows))
    bs = {(b["basis"], b["sizes"]): b for b in bands(rows)}
    print("| sizes | held-out points | sources | median abs error | worst | points in band |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for sb, label in (("small", "<= 64 KB"), ("mid", "64 KB - 16 MB"), ("large", ">= 16 MB")):
        v = [(r, q, ruled) for r, q, ruled in pts if size_band(r["bytes"]) == sb]
        if not v:
            continue
        errs = [1 / q - 1 for _, q, _ in v]
        inside = sum(1 for r, q, ruled in v
                     if bs[("rule" if ruled else "nccl", sb)]["lo"] <= q <= bs[("rule" if ruled else "nccl", sb)]["hi"])
        worst = max(errs, key=abs)
        print(f"| {label} | {len(v)} | {len({r['fixture'] for r, _, _ in v})} | "
              f"{quantile([abs(e) for e in errs], 0.5):.1%} | {worst:+.1%} | {inside}/{len(v)} ({inside / len(v):.0%}) |")
    print()
    print("Per source (held out: predicted by the rules fitted without it):")
    print()
    print("| source | points | with a rule | median abs error | worst |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for fx in sorted({r["fixture"] for r, _, _ in pts}):
        v = [(r, q, ruled) for r, q, ruled in pts if r["fixture"] == fx]
        errs = [1 / q - 1 for _, q, _ in v]
        print(f"| {fx} | {len(v)} | {sum(1 for *_, ru in v if ru)} | "
              f"{quantile([abs(e) for e in errs], 0.5):.1%} | {max(errs, key=abs):+.1%} |")


def main():
    rows = list(csv.DictReader(open(sys.argv[-1]), delimiter="\t"))
    if "--report" in sys.argv:
        report(rows)
        return
    print("# topo's measured-behaviour layer: corrections of NCCL's cost-model time to what")
    print("# nccl-tests measures, per (GPU generation, collective, algorithm, protocol, one node or several).")
    print("#   expected_time_us = lat_us + tb / bw_efficiency + ramp * sqrt(tb),  tb = bytes / (1000 * bw)")
    print("# with bw NCCL's own algorithm bandwidth for the chosen pair (tuning.rs), so tb is NCCL's")
    print("# bandwidth term in us; ramp (sqrt-us) models the pipeline ramp-up of mid sizes. NCCL's choice")
    print("# is not changed. Written by bench/fidelity/fit.py from bench/fidelity/points.tsv (healthy,")
    print("# role: fit fixtures of fixtures/fidelity/); `from` names the fixtures of each rule.")
    print("# A rule fitted only at sizes >= 16 MB keeps NCCL's latency as lat_us (no measurement sees it);")
    print("# measured.rs applies it from a quarter of its smallest size up, and every rule to rank counts")
    print("# within 2x of `ranks`, the rank counts it was fitted on.")
    print("# Sizes no rule matches keep NCCL's time. NCCL versions are not told apart: the fixtures")
    print("# span 2.18 to 2.26 and too few of each to fit per version.")
    print("rules:")
    rules = rules_from(rows)
    for key in sorted(rules):
        r = rules[key]
        arch, coll, algo, proto, nodes = key
        print(f"  - {{arch: {arch}, collective: {coll}, algo: {algo}, proto: {proto}, nodes: {nodes}, "
              f"lat_us: {r['lat']:.1f}, bw_efficiency: {r['eff']:.3f}, ramp: {r['ramp']:.3f}, points: {r['points']}, "
              f"sizes: \"{int(r['lo'])}-{int(r['hi'])}\", ranks: \"{r['rlo']}-{r['rhi']}\", "
              f"from: [{', '.join(r['from'])}]}}")
    print("# The band a healthy measurement falls in: measured busbw / expected busbw between lo and hi,")
    print("# per basis (a rule gave the expected value, or NCCL's own time) and size range (small <= 64 KB,")
    print("# large >= 16 MB), from leave-one-source-out residuals: every healthy result predicted by the")
    print(f"# rules fitted without it; the middle {BAND_SHARE:.0%} of them, at least +-{MIN_HALF_WIDTH:.0%}.")
    print("bands:")
    for b in bands(rows):
        print(f"  - {{basis: {b['basis']}, sizes: {b['sizes']}, lo: {b['lo']:.3f}, hi: {b['hi']:.3f}, "
              f"points: {b['points']}, sources: {b['sources']}, how: \"{b['how']}\"}}")


if __name__ == "__main__":
    main()
