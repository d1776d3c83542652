#!/usr/bin/env python3
"""Fit topo's measured-behaviour constants (crates/topo-nccl/data/measured.yaml) to the points
bench/fidelity/run.sh wrote: for each (GPU generation, algorithm, protocol, one node or several)
that NCCL chose at some measured size, the latency L (us), bandwidth efficiency E and ramp R that make
    expected_time = L + tb / E + R * sqrt(tb),   tb = bytes / (1000 * bw)
closest to the measured time in relative terms (weighted least squares on time / measured - 1),
where bw is NCCL's own algorithm bandwidth for that choice. Only healthy results with role fit
are used; held-out results are reported by run.sh against the fitted constants.

usage: fit.py points.tsv > crates/topo-nccl/data/measured.yaml   (then review the diff)
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


def main():
    rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
    groups = defaultdict(list)
    sources = defaultdict(set)
    ranks = defaultdict(set)
    for r in rows:
        if r["health"] != "ok" or r["role"] != "fit":
            continue
        algo, proto = r["choice"].split("/")
        key = (arch_of(r["topo"]), r["collective"], algo, proto, nodes_of(r["nnodes"]))
        groups[key].append(
            (float(r["bytes"]), float(r["measured_us"]), float(r["bw_gbps"]), float(r["lat_us"]))
        )
        sources[key].add(r["fixture"].removesuffix(".txt"))
        ranks[key].add(int(r["nranks"]))
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
    for key in sorted(groups):
        pts = groups[key]
        lat, eff, ramp = fit(pts)
        arch, coll, algo, proto, nodes = key
        lo, hi = min(p[0] for p in pts), max(p[0] for p in pts)
        print(f"  - {{arch: {arch}, collective: {coll}, algo: {algo}, proto: {proto}, nodes: {nodes}, "
              f"lat_us: {lat:.1f}, bw_efficiency: {eff:.3f}, ramp: {ramp:.3f}, points: {len(pts)}, "
              f"sizes: \"{int(lo)}-{int(hi)}\", ranks: \"{min(ranks[key])}-{max(ranks[key])}\", "
              f"from: [{', '.join(sorted(sources[key]))}]}}")


main()
