#!/usr/bin/env bash
# Times `topo plan --profile hgx-h200 --nodes N --nccl-version 2.28 -b 8 -e 8G` for N = 1 … 128
# (8 … 1024 GPUs), text and JSON, with hyperfine (wall time) and /usr/bin/time -v (peak RSS),
# and writes bench/plan/results-<host>.md.
#
#   bench/plan/run.sh                         # builds target/release/topo first
#   TOPO_BIN=/path/to/topo BENCH_NOTE="…" bench/plan/run.sh
#   NODES="1 8 128" RUNS=10 bench/plan/run.sh # a subset, fewer runs
#
# Needs hyperfine and GNU time; installs them with apt-get when missing. Output goes to
# /dev/null (the JSON size column is measured separately), so the numbers are topology
# replication + analysis + rendering. No NCCL library is loaded: --nccl-version is given.
set -euo pipefail
cd "$(dirname "$0")/../.."

source bench/common.sh
need hyperfine hyperfine
need /usr/bin/time time

topo_bin
NODES="${NODES:-1 2 4 8 16 32 64 128}"
RUNS="${RUNS:-20}"

host=$(cat /proc/sys/kernel/hostname)
out="bench/plan/results-${host}.md"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

plan() { echo "$TOPO_BIN plan --profile hgx-h200 --nodes $1 --nccl-version 2.28 -b 8 -e 8G $2"; }

# "mean ± σ|min" in ms from hyperfine's JSON export.
stats() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(f"{r['mean']*1e3:.1f} ± {r['stddev']*1e3:.1f}|{r['min']*1e3:.1f}")
PY
}

# Peak RSS in MiB (best of 3, the allocator's high-water mark barely moves).
rss() {
  local best=""
  for _ in 1 2 3; do
    # shellcheck disable=SC2046
    /usr/bin/time -v $(plan "$1" "$2") >/dev/null 2>"$tmp/time.txt"
    local kb
    kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time.txt")
    if [[ -z "$best" || "$kb" -lt "$best" ]]; then best=$kb; fi
  done
  awk -v kb="$best" 'BEGIN { printf "%.1f", kb / 1024 }'
}

rows=()
mins=()
for n in $NODES; do
  # Refuse to time a failing command.
  # shellcheck disable=SC2046
  $(plan "$n" "") >"$tmp/plan.txt"
  # shellcheck disable=SC2046
  $(plan "$n" "--format json") >"$tmp/plan.json"
  jsize=$(stat -c %s "$tmp/plan.json")
  hyperfine --warmup 2 --min-runs "$RUNS" -N --style basic \
    --export-json "$tmp/t$n.json" -n "plan nodes=$n text" "$(plan "$n" "")" >&2
  hyperfine --warmup 2 --min-runs "$RUNS" -N --style basic \
    --export-json "$tmp/j$n.json" -n "plan nodes=$n json" "$(plan "$n" "--format json")" >&2
  t=$(stats "$tmp/t$n.json")
  j=$(stats "$tmp/j$n.json")
  mins+=("$n ${t#*|} ${j#*|}")
  rt=$(rss "$n" "")
  rj=$(rss "$n" "--format json")
  rows+=("| $n | $((n * 8)) | ${t%|*} | ${t#*|} | $rt | ${j%|*} | ${j#*|} | $rj | $(awk -v b="$jsize" 'BEGIN { printf "%.2f", b / 1048576 }') |")
done

{
  echo "# topo plan benchmark: $host"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs, kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- topo: $("$TOPO_BIN" --version) ($(git rev-parse --short HEAD 2>/dev/null || echo unknown)), release build"
  if [[ -n "${BENCH_NOTE:-}" ]]; then echo "- note: $BENCH_NOTE"; fi
  echo "- command: \`$(plan N "[--format json]" | sed "s|$TOPO_BIN|topo|")\`, output to /dev/null"
  echo "- hyperfine: $(hyperfine --version), --warmup 2 --min-runs $RUNS -N; peak RSS: /usr/bin/time -v, lowest of 3 runs"
  echo "- targets (issue 3): 8 GPUs in a few milliseconds; 1024 GPUs (--nodes 128) under 2 s"
  echo
  echo "| nodes | GPUs | text ms (mean ± σ) | text min ms | text peak RSS MiB | json ms (mean ± σ) | json min ms | json peak RSS MiB | JSON MiB |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Growth (min times, text): per GPU and against the smallest run"
  echo
  printf '%s\n' "${mins[@]}" | awk '
    NR == 1 { n0 = $1; t0 = $2 }
    { printf "- %d GPUs: %.1f ms, %.3f ms per GPU, %.1f× the time of %d GPUs for %d× the GPUs\n", $1 * 8, $2, $2 / ($1 * 8), $2 / t0, n0 * 8, $1 / n0 }'
} >"$out"
echo "wrote $out" >&2
