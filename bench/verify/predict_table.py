#!/usr/bin/env python3
"""Predicted against measured busbw from bench/verify/predict.sh's results.

    python3 bench/verify/predict_table.py bench/verify/results/<stamp>-predict

Per mode (threads, processes), collective and size: the fastest out-of-place time over the
repeats (min-of-repeats), its busbw, the prediction topo verify printed for it (priced by
the calibration fit of the placement verify probed around that repeat, `pooled` where it has
none), their ratio, and the placement with the probes' c2c latency. Last line: the verdict,
how many sizes >= 1 MiB are within 25 %; the line above it counts every repeat's row by
placement (not only the fastest), which says whether the misses are one placement's.
"""
import glob
import json
import sys

TOL = 0.25
MIN_BYTES = 1 << 20


def load(prefix, mode):
    runs = []
    for path in sorted(glob.glob(f"{prefix}-{mode}-*.json")):
        try:
            with open(path) as f:
                runs.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"# skipped {path}: {e}")
    return runs


def best(runs):
    """(collective, bytes) -> the fastest out-of-place row over the repeats."""
    out = {}
    for run in runs:
        for r in run["results"]:
            key = (r["collective"], r["bytes"])
            if key not in out or r["time_us"] < out[key]["time_us"]:
                out[key] = r
    return out


def main():
    prefix = sys.argv[1]
    try:
        with open(prefix + "-env.txt") as f:
            sys.stdout.write(f.read())
    except OSError:
        pass
    try:
        with open(prefix + "-calibrate.json") as f:
            cal = json.load(f)
        print("# link               mode       place alpha us  beta cache  beta mem  knee MiB  worst err >= 1 MiB")
        for l in cal["links"]:
            print(f"#  {l['link']:<18} {l.get('mode', '-'):<10} {l.get('placement', 'all'):<5} "
                  f"{l['alpha_us']:>8.2f} {l['beta_gbps']:>11.2f} "
                  f"{l['beta_mem_gbps']:>9.2f} {l['knee_bytes'] / 2**20:>9.1f}  {100 * l['max_rel_err_1mb']:>6.1f}%")
    except (OSError, ValueError, KeyError):
        print("# no calibration file")
    verdict = {}
    wrong = 0
    for mode in ("threads", "processes"):
        runs = load(prefix, mode)
        if not runs:
            continue
        rows = best(runs)
        print(f"#\n# {mode}: {len(runs)} repeats, fastest per size")
        print(f"# {'collective':<13} {'size':>10} {'algo':>6} {'time us':>11} {'busbw':>7} "
              f"{'pred us':>11} {'p.busbw':>7} {'meas/pred':>9}  within {int(TOL * 100)}%"
              f"  {'place':<7} {'fit':<7} c2c ns")
        for (coll, size), r in sorted(rows.items()):
            wrong += sum((x.get("wrong") or 0) for x in [r, r.get("in_place") or {}])
            p = r.get("predicted_busbw_gbps")
            q = r["busbw_gbps"] / p if p else None
            ok = q is not None and abs(q - 1) <= TOL
            if size >= MIN_BYTES and q is not None:
                n, k = verdict.get(mode, (0, 0))
                verdict[mode] = (n + ok, k + 1)
            pt = r.get("predicted_time_us")
            print(f"  {coll:<13} {size:>10} {r['algo']:>6} {r['time_us']:>11.1f} {r['busbw_gbps']:>7.2f} "
                  f"{pt if pt is None else f'{pt:11.1f}':>11} {p if p is None else f'{p:7.2f}':>7} "
                  f"{'-' if q is None else f'{q:9.2f}':>9}  {'yes' if ok else 'NO':<10}"
                  f"  {r.get('placement') or '-':<7} {r.get('predicted_for') or '-':<7} "
                  f"{'/'.join(str(int(c)) for c in r.get('c2c_ns') or []) or '-'}")
        by_place = {}
        for run in runs:
            for x in run["results"]:
                p = x.get("predicted_busbw_gbps")
                if x["bytes"] < MIN_BYTES or not p:
                    continue
                k = x.get("placement") or "-"
                n, m = by_place.get(k, (0, 0))
                by_place[k] = (n + (abs(x["busbw_gbps"] / p - 1) <= TOL), m + 1)
        print(f"# {mode}, every repeat's rows >= 1 MiB within {int(TOL * 100)}% by placement: "
              + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(by_place.items())))
    within = sum(v[0] for v in verdict.values())
    total = sum(v[1] for v in verdict.values())
    parts = ", ".join(f"{m} {v[0]}/{v[1]}" for m, v in verdict.items())
    print(f"# wrong results: {wrong}")
    print(f"verdict: {within} of {total} sizes >= 1 MiB within {int(TOL * 100)}% of predicted busbw ({parts})")


if __name__ == "__main__":
    main()
