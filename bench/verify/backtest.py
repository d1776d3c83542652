#!/usr/bin/env python3
"""Replay committed predict runs under the host model, with and without the fit's residual.

For every `results/<stamp>-predict-calibrate.json` with verify runs beside it, price each
size >= 1 MiB of the fastest repeat (per mode, as predict_table.py takes it) by the link fit
that verify would choose (the placement's own where calibration has one, else the mode's
pooled fit) in two ways, and count the sizes within 25 % of the measured busbw:

  fit       the fit alone (LinkFit::time_at; the model before the residual)
  residual  the fit times its residual at that footprint (LinkFit::priced)

It mirrors crates/topo-runtime/src/hostmodel.rs (traffic, schedule_bytes, time_at,
residual with cross_points, link_at) for DIRECT rows over shared memory, every collective;
other rows are skipped and counted. Calibrations from before `cross_points` existed are
replayed without them, as topo reads such a cache.

    python3 bench/verify/backtest.py            # every committed run
    python3 bench/verify/backtest.py -v         # and each size
"""
import glob
import json
import math
import os
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
MIB = 1 << 20
BANDWIDTH_MIN = 256 << 10


def miss_share(footprint, knee):
    if not knee or knee != knee or knee <= 0 or footprint <= knee:
        return 0.0
    return min(1.0, max(0.0, math.log2(footprint / knee)))


def in_regime(link, size):
    return link.get("below_regime_gbps") is None or size >= link.get("regime_min_bytes", 0)


def time_on(link, dynamic, latencies, moved, footprint):
    below = link.get("below_regime_gbps")
    if below and not dynamic and below > 0:
        return latencies * link["alpha_us"] + moved / below / 1e3
    m = miss_share(footprint, link["knee_bytes"])
    inv = (1 - m) / link["beta_gbps"] + m / link["beta_mem_gbps"]
    return latencies * link["alpha_us"] + moved * inv / 1e3


def residual(link, size, footprint):
    if size < BANDWIDTH_MIN:
        return 1.0
    side = in_regime(link, size)
    own = [p for p in link["points"] if in_regime(link, p[0]) == side]
    cross = [p for p in link.get("cross_points", []) if in_regime(link, p[0]) != side]
    pts = []
    for s, t in own + cross:
        if s < BANDWIDTH_MIN or t <= 0:
            continue
        fp = link["footprint_per_byte"] * s
        pts.append((fp, t / time_on(link, side, 1.0, link["moved_per_byte"] * s, fp)))
    pts.sort()
    if not pts:
        return 1.0
    if footprint <= pts[0][0]:
        return pts[0][1]
    if footprint >= pts[-1][0]:
        return pts[-1][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= footprint <= x1:
            w = math.log(footprint / x0) / math.log(x1 / x0) if x1 > x0 else 0.0
            return math.exp(math.log(y0) * (1 - w) + math.log(y1) * w)
    return 1.0


# hostmodel::traffic for DIRECT over shared memory: (link, total moved, footprint) per byte.
DIRECT = {
    "allreduce": ("shm-direct-reduce", lambda n: 2 * n, lambda n: 2 * n),
    "reduce": ("shm-direct-reduce", lambda n: n + 1, lambda n: n + 1),
    "reducescatter": ("shm-direct-reduce", lambda n: n + 1, lambda n: n + 1),
    "allgather": ("shm-direct", lambda n: 2 * n, lambda n: n + 1),
    "broadcast": ("shm-direct", lambda n: 2 * n, lambda n: n + 1),
    "alltoall": ("shm-direct", lambda n: 2 * n, lambda n: 2 * n),
    "sendrecv": ("shm-direct", lambda n: 2 * n, lambda n: 2 * n),
}
BLOCKS = ("allgather", "reducescatter", "alltoall")


def price(cal, mode, r, n, use_residual):
    """(fit time, fit x residual time) of one verify row, or None when not a DIRECT row."""
    if r["algo"] != "DIRECT" or r["collective"] not in DIRECT:
        return None
    name, total, foot = DIRECT[r["collective"]]
    link = link_at(cal, name, mode, r.get("placement"))
    if link is None:
        return None
    s = r["bytes"]
    par = max(1, min(n, cal.get("cpus", 2)))
    moved, fp = total(n) / par * s, foot(n) * s
    at = s // n if r["collective"] in BLOCKS else s
    fit = time_on(link, in_regime(link, at), 1.0, moved, fp)
    return fit, fit * residual(link, at, fp)


def link_at(cal, name, mode, placement):
    links = cal["links"]
    if placement in ("near", "far"):
        for l in links:
            if l["link"] == name and l.get("mode", "any") == mode and l.get("placement") == placement:
                return l
    pooled = [l for l in links if l["link"] == name and l.get("placement") is None]
    for m in (mode, "any"):
        for l in pooled:
            if l.get("mode", "any") == m:
                return l
    return pooled[0] if pooled else None


def load(path):
    """A verify document, or {} while its run is still writing it."""
    try:
        return json.load(open(path))
    except ValueError:
        return {}


def run_ranks(stamp):
    """Ranks per mode, from the verify documents."""
    out = {}
    for f in glob.glob(os.path.join(HERE, f"{stamp}-predict-*-*.json")):
        d = load(f)
        if "ranks" in d and "launch" in d:
            out[d["launch"]] = d["ranks"]
    return out


def fastest_rows(stamp, mode):
    best = {}
    for f in sorted(glob.glob(os.path.join(HERE, f"{stamp}-predict-{mode}-*.json"))):
        for r in load(f).get("results", []):
            if r["bytes"] < MIB:
                continue
            key = (r["collective"], r["bytes"])
            if key not in best or r["time_us"] < best[key]["time_us"]:
                best[key] = r
    return [best[k] for k in sorted(best)]


def main():
    verbose = "-v" in sys.argv
    stamps = sorted({os.path.basename(f)[:16] for f in glob.glob(os.path.join(HERE, "*-predict-calibrate.json"))})
    total = {"fit": 0, "residual": 0, "rows": 0, "skipped": 0}
    print(f"# {'run':<17} {'mode':<10} {'fit':>6} {'residual':>9}")
    for stamp in stamps:
        try:
            cal = json.load(open(os.path.join(HERE, f"{stamp}-predict-calibrate.json")))
        except ValueError:
            print(f"  {stamp:<17} (calibration unreadable: a run still going on?)")
            continue
        ranks = run_ranks(stamp)
        for mode in ("threads", "processes"):
            rows = fastest_rows(stamp, mode)
            ok = {"fit": 0, "residual": 0}
            n = 0
            for r in rows:
                priced = price(cal, mode, r, ranks.get(mode, 2), True)
                if priced is None:
                    total["skipped"] += 1
                    continue
                fit, res = priced
                n += 1
                for k, p in (("fit", fit), ("residual", res)):
                    ok[k] += abs(p / r["time_us"] - 1.0) <= 0.25
                if verbose:
                    print(f"  {stamp} {mode:<9} {r['collective']:<13} {r['bytes'] >> 20:>4} MiB "
                          f"{r.get('placement', '-'):<6} measured {r['time_us']:9.1f} us  "
                          f"fit {fit:9.1f}  residual {res:9.1f}")
            if n:
                print(f"  {stamp:<17} {mode:<10} {ok['fit']:>2}/{n:<3} {ok['residual']:>5}/{n}")
                total["rows"] += n
                total["fit"] += ok["fit"]
                total["residual"] += ok["residual"]
    print(f"# within 25 %, sizes >= 1 MiB: fit {total['fit']}/{total['rows']}, "
          f"fit x residual {total['residual']}/{total['rows']} ({total['skipped']} rows skipped)")


if __name__ == "__main__":
    main()
