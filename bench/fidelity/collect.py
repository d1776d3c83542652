#!/usr/bin/env python3
"""Predicted against the published results of the shared set, in place.

For every result of bench/fidelity/sources.yaml whose file is present under the shared set
(default ../shared/realdata/nccl-tests, relative to the repository root), read its nccl-tests
rows (size and out-of-place time), run the real binary (`topo plan` with the entry's machine
arguments at the measured sizes) and write one line per size: what NCCL chose, its cost-model
terms and topo's expected time. fit.py fits on these lines together with bench/fidelity/points.tsv
(the fixtures of fixtures/fidelity/); the files themselves are never copied.

usage: collect.py [--topo target/debug/topo] [SHARED_DIR] > bench/fidelity/results/shared-points.tsv
"""
import json
import os
import re
import shlex
import subprocess
import sys

import yaml

DTYPES = {"float", "half", "bfloat16", "double", "int8", "uint8", "int32", "int64"}
COLUMNS = ["fixture", "source", "fabric", "collective", "topo", "health", "role", "nnodes", "nranks",
           "bytes", "measured_us", "model_us", "choice", "lat_us", "bw_gbps", "expected_us", "gpn",
           "nranks2", "bw2_gbps", "nranks1", "choice1", "lat1_us", "bw1_gbps", "model1_us"]


def rows_of(text):
    """(bytes, out-of-place time us) of each nccl-tests row; prefixes (`0: `, `[1,0]<stdout>:`)
    and the root column of newer nccl-tests handled; rows without a redop column are skipped."""
    out = {}
    for line in text.splitlines():
        line = line.split(">:", 1)[-1]
        toks = line.split()
        idx = [i for i, t in enumerate(toks) if t in DTYPES]
        if not idx:
            continue
        i = idx[0]
        if i < 2 or i + 1 >= len(toks) or toks[i + 1].startswith("#"):
            continue
        try:
            float(toks[i + 1])
            continue  # a figure where the redop goes: a transcription that dropped it
        except ValueError:
            pass
        try:
            size, _ = int(toks[i - 2]), int(toks[i - 1])
        except ValueError:
            continue
        rest = len(toks) - (i + 2)
        t = i + 3 if rest % 4 == 1 else i + 2
        try:
            time_us = float(toks[t])
        except (ValueError, IndexError):
            continue
        if size > 0 and time_us > 0 and size not in out:
            out[size] = time_us
    return sorted(out.items())


def explain_terms(row):
    for line in row.get("explain") or []:
        m = re.match(r"time \S+ = lat (\S+) \+ .*× (\S+) GB/s", line)
        if m:
            return float(m.group(1)), float(m.group(2))
    return float("nan"), float("nan")


def runs(sizes):
    if len(sizes) >= 2:
        f = sizes[1] // sizes[0]
        if f >= 2 and all(b == a * f for a, b in zip(sizes, sizes[1:])):
            return [(sizes[0], sizes[-1], f)]
    return [(s, s, 2) for s in sizes]


def plan(topo, entry, args, extra):
    cmd = [topo, "plan", *args, "--collective", entry.get("collective", "allreduce"), "--format", "json", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, env={"PATH": os.environ.get("PATH", "")})
    if p.returncode != 0:
        raise SystemExit(f"{entry['file']}: {' '.join(cmd)}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def two_nodes(topo, entry, args, nnodes, size, choice):
    """For a Tree or NVLSTree choice above two NCCL nodes, the same plan on two of them
    (`--nodes` scaled: the trays of one NVLink clique stay one node) with the choice forced:
    (its rank count, NCCL's bandwidth there), which fit.py bounds the choice with as measured.rs
    `tree_bound` does; else ("", "")."""
    algo, proto = choice.split("/")
    if int(nnodes) <= 2 or algo not in ("Tree", "NVLSTree") or "--nodes" not in args:
        return "", ""
    args = list(args)
    at = args.index("--nodes") + 1
    args[at] = str(int(args[at]) * 2 // int(nnodes))
    doc = plan(topo, entry, args, ["--env", f"NCCL_ALGO={algo}", "--env", f"NCCL_PROTO={proto}",
                                   "-b", str(size), "-e", str(size)])
    return doc["nranks"], explain_terms(doc["table"][0])[1]


def one_node(topo, entry, args, nnodes, size, choice):
    """For an NVLS or NVLSTree choice above one NCCL node, NCCL node 0 alone (`--nodes`
    scaled to one node's hosts: the trays of one NVLink clique), planned at the same size with
    NCCL's own choice there: its rank count, choice, latency and bandwidth terms and time,
    which fit.py bounds the choice with as measured.rs `one_node_bound` does; else blanks."""
    if int(nnodes) <= 1 or choice.split("/")[0] not in ("NVLS", "NVLSTree") or "--nodes" not in args:
        return ["", "", "", "", ""]
    args = list(args)
    at = args.index("--nodes") + 1
    args[at] = str(int(args[at]) // int(nnodes))
    doc = plan(topo, entry, args, ["-b", str(size), "-e", str(size)])
    row = doc["table"][0]
    lat, bw = explain_terms(row)
    return [doc["nranks"], f"{row['algo']}/{row['proto']}", lat, bw, row["time_us"]]


def predict(topo, entry, sizes):
    args = shlex.split(entry["topo"])
    if "--nccl-version" not in args:
        args += ["--nccl-version", "2.28"]
    out = {}
    for b, e, f in runs(sizes):
        doc = plan(topo, entry, args, ["-b", str(b), "-e", str(e), "-f", str(f)])
        for row in doc["table"]:
            lat, bw = explain_terms(row)
            choice = f"{row['algo']}/{row['proto']}"
            n2, bw2 = two_nodes(topo, entry, args, doc["nnodes"], row["bytes"], choice)
            out[row["bytes"]] = {
                "nnodes": doc["nnodes"], "nranks": doc["nranks"], "model_us": row["time_us"],
                "expected_us": row.get("expected_time_us") or row["time_us"],
                "choice": choice, "lat_us": lat, "bw_gbps": bw, "nranks2": n2, "bw2_gbps": bw2,
                "one": one_node(topo, entry, args, doc["nnodes"], row["bytes"], choice),
            }
    return out


def main():
    argv = sys.argv[1:]
    topo = "target/debug/topo"
    if argv[:1] == ["--topo"]:
        topo, argv = argv[1], argv[2:]
    shared = argv[0] if argv else "../shared/realdata/nccl-tests"
    index = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), "sources.yaml")))["results"]
    print("\t".join(COLUMNS))
    missing = 0
    for entry in index:
        path = os.path.join(shared, entry["file"])
        if not os.path.exists(path):
            missing += 1
            continue
        expect = str(entry.get("expect", ""))
        if entry.get("dup_of") or (expect.startswith("xfail: read") and not entry.get("rows_ok")):
            # Fitted once from its fixture; or read wrongly until the read branch lands (unless
            # what is misread is not the rows this script reads: `rows_ok`).
            continue
        # A machine topo cannot state yet (no profile for it, its fabric not expressible) is
        # predicted from a stand-in: reported, never fitted on nor counted in a band.
        role = "gap" if expect.startswith("xfail: fabric") else "fit"
        if str(entry.get("fit", "")).startswith("no"):
            role = "judge-only"
        rows = rows_of(open(path, errors="replace").read(200_000_000)[:20_000_000])
        if not rows:
            continue
        pred = predict(topo, entry, [s for s, _ in rows])
        health = {"healthy": "ok", "degraded": "degraded"}.get(entry["health"], "unstated")
        for size, t in rows:
            p = pred[min(pred, key=lambda b: abs(b - size))]
            vals = [entry["file"], entry["source"], entry["fabric"], entry.get("collective", "allreduce"),
                    entry["topo"], health, role, p["nnodes"], p["nranks"], size, t, p["model_us"],
                    p["choice"], p["lat_us"], p["bw_gbps"], p["expected_us"], entry["gpn"],
                    p["nranks2"], p["bw2_gbps"], *p["one"]]
            print("\t".join(str(v) for v in vals))
    if missing:
        print(f"collect.py: {missing} result(s) of sources.yaml not under {shared}", file=sys.stderr)


if __name__ == "__main__":
    main()
