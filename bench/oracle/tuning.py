#!/usr/bin/env python3
"""TUNING tables and per-size choices of generated machines against NCCL's code.

    bench/oracle/tuning.py --oracle BIN --topo BIN --nccl-version 2.XX --count N --work DIR

For seeds 1..N, takes each machine as `oracle_sweep --show SEED --reuse` wrote it into DIR (run
the sweep first: bench/oracle/sweep.rs), with its variables and node count, and runs the
oracle's compare.py on it (the oracle with its tuning replay against `topo plan --collective
all`). Prints the cells and choices equal per tag and the seeds that differ or that a tool
refused. Run from the repository root after `cargo build --release --features bench --example oracle_sweep`.
"""
import argparse
import ast
import os
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--oracle", required=True)
ap.add_argument("--topo", required=True)
ap.add_argument("--nccl-version", required=True)
ap.add_argument("--count", type=int, default=200)
ap.add_argument("--work", required=True)
ap.add_argument("--compare", default="../shared/tools/nccl-oracle/compare.py")
a = ap.parse_args()
sweep = "target/release/examples/oracle_sweep"
if not os.path.exists(a.compare):
    a.compare = "/work/shared/tools/nccl-oracle/compare.py"

cells, choices, equal, compared, refused, differ = [0, 0], [0, 0], 0, 0, [], []
for seed in range(1, a.count + 1):
    shown = subprocess.run(
        [sweep, "--oracle", a.oracle, "--nccl-version", a.nccl_version, "--seed", str(seed),
         "--count", "1", "--work", a.work, "--reuse", "--show", str(seed)],
        capture_output=True, text=True).stdout
    m = re.search(r"^seed \d+: (.*); env (\[.*\]); xml (\S+)$", shown, re.M)
    if not m:  # the oracle refused it (the sweep says why)
        refused.append(seed)
        continue
    summary, env, xml = m.group(1), ast.literal_eval(m.group(2)), m.group(3)
    nodes = "2" if " x2" in summary else "1"
    cmd = ["python3", a.compare, "--oracle", a.oracle, "--topo", a.topo,
           "--nccl-version", a.nccl_version, "--nodes", nodes]
    for k, v in env:
        cmd += ["--env", "%s=%s" % (k, v)]
    out = subprocess.run(cmd + [xml], capture_output=True, text=True).stdout.strip().splitlines()
    last = out[-1] if out else ""
    c = re.search(r"cells (\d+) of (\d+)", last)
    ch = re.search(r"choices (\d+) of (\d+)", last)
    bad = re.search(r"refused/skipped/failed: (\d+)", last)
    if not c or not ch or (bad and bad.group(1) != "0"):
        refused.append(seed)
        continue
    compared += 1
    x = list(map(int, c.groups())) + list(map(int, ch.groups()))
    cells = [cells[0] + x[0], cells[1] + x[1]]
    choices = [choices[0] + x[2], choices[1] + x[3]]
    if x[0] == x[1] and x[2] == x[3]:
        equal += 1
    else:
        differ.append(seed)

print("NCCL %s: %d compared, %d with every cell and choice equal; TUNING cells %d of %d, "
      "per-size choices %d of %d" % (a.nccl_version, compared, equal, cells[0], cells[1],
                                     choices[0], choices[1]))
print("differ: %s" % differ)
print("refused: %s" % refused)
sys.exit(1 if differ else 0)
