#!/usr/bin/env python3
"""Replay committed predict runs under the host model, with and without the fit's residual.

For every `results/<stamp>-predict-calibrate.json` with verify runs beside it, price each
size >= 1 MiB of the fastest repeat (per mode, as predict_table.py takes it) by the link fit
that verify would choose (the placement's own where calibration has one, else the mode's
pooled fit) in two ways, and count the sizes within 25 % of the measured busbw:

  fit       the fit alone (LinkFit::time_at; the model before the residual)
  residual  the fit times its residual at that footprint (LinkFit::priced)

It mirrors crates/topo-runtime/src/hostmodel.rs (time_at, residual, link_at) for the rows
predict.sh produces: 2-rank DIRECT AllReduce; other rows are skipped and counted.

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


def time_at(link, size, latencies, moved, footprint):
    below = link.get("below_regime_gbps")
    if below and size < link.get("regime_min_bytes", 0) and below > 0:
        return latencies * link["alpha_us"] + moved / below / 1e3
    m = miss_share(footprint, link["knee_bytes"])
    inv = (1 - m) / link["beta_gbps"] + m / link["beta_mem_gbps"]
    return latencies * link["alpha_us"] + moved * inv / 1e3


def in_regime(link, size):
    return link.get("below_regime_gbps") is None or size >= link.get("regime_min_bytes", 0)


def residual(link, size, footprint):
    if size < BANDWIDTH_MIN:
        return 1.0
    side = in_regime(link, size)
    pts = []
    for s, t in link["points"]:
        if s < BANDWIDTH_MIN or t <= 0 or in_regime(link, s) != side:
            continue
        fp = link["footprint_per_byte"] * s
        pts.append((fp, t / time_at(link, s, 1.0, link["moved_per_byte"] * s, fp)))
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


def fastest_rows(stamp, mode):
    best = {}
    for f in sorted(glob.glob(os.path.join(HERE, f"{stamp}-predict-{mode}-*.json"))):
        for r in json.load(open(f))["results"]:
            if r["bytes"] < MIB:
                continue
            if r["bytes"] not in best or r["time_us"] < best[r["bytes"]]["time_us"]:
                best[r["bytes"]] = r
    return [best[s] for s in sorted(best)]


def main():
    verbose = "-v" in sys.argv
    stamps = sorted({os.path.basename(f)[:16] for f in glob.glob(os.path.join(HERE, "*-predict-calibrate.json"))})
    total = {"fit": 0, "residual": 0, "rows": 0, "skipped": 0}
    print(f"# {'run':<17} {'mode':<10} {'fit':>6} {'residual':>9}")
    for stamp in stamps:
        cal = json.load(open(os.path.join(HERE, f"{stamp}-predict-calibrate.json")))
        for mode in ("threads", "processes"):
            rows = fastest_rows(stamp, mode)
            ok = {"fit": 0, "residual": 0}
            n = 0
            for r in rows:
                if r["collective"] != "allreduce" or r["algo"] != "DIRECT":
                    total["skipped"] += 1
                    continue
                link = link_at(cal, "shm-direct-reduce", mode, r.get("placement"))
                if link is None:
                    total["skipped"] += 1
                    continue
                s = r["bytes"]
                # 2-rank DIRECT AllReduce on 2 CPUs: 2 bytes moved per worker, 4 of footprint.
                moved, fp = 2.0 * s, 4.0 * s
                fit = time_at(link, s, 1.0, moved, fp)
                res = fit * residual(link, s, fp)
                n += 1
                for k, p in (("fit", fit), ("residual", res)):
                    ok[k] += abs(p / r["time_us"] - 1.0) <= 0.25
                if verbose:
                    print(f"  {stamp} {mode:<9} {s >> 20:>4} MiB {r.get('placement', '-'):<6} "
                          f"measured {r['time_us']:9.1f} us  fit {fit:9.1f}  residual {res:9.1f}")
            if n:
                print(f"  {stamp:<17} {mode:<10} {ok['fit']:>2}/{n:<3} {ok['residual']:>5}/{n}")
                total["rows"] += n
                total["fit"] += ok["fit"]
                total["residual"] += ok["residual"]
    print(f"# within 25 %, sizes >= 1 MiB: fit {total['fit']}/{total['rows']}, "
          f"fit x residual {total['residual']}/{total['rows']} ({total['skipped']} rows skipped)")


if __name__ == "__main__":
    main()
