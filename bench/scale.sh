#!/usr/bin/env bash
# Scale benchmark shared by bench/plan/scale.sh and bench/show/scale.sh: one command at
# N = 1, 128, 512, 1024, 2048, 4096 nodes (8 … 32,768 GPUs), timed with /usr/bin/time -v
# (wall time and peak RSS, lowest of R runs) with its output written to a file (its size is
# a column), and, when BEFORE_BIN names another build, that build's run of the same command
# right after it, so both are measured side by side under the same load. The 8-GPU case also
# goes through hyperfine (both binaries in one run). Writes bench/<what>/results-scale-<host>.md.
#
#   bench/scale.sh plan|show
#   BEFORE_BIN=/tmp/topo-main NODES="1 128 1024" FORMATS=json bench/scale.sh plan
#   BIG_RUNS=5 bench/scale.sh show     # lowest of 5 at 2,048 and 4,096 nodes as well
#
# BEFORE_MAX_NODES=N runs the older build only up to N nodes (an older build that is
# quadratic in the node count can take many minutes at 4096); its cells stay empty beyond.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
need hyperfine hyperfine
need /usr/bin/time time
topo_bin

what="${1:?usage: bench/scale.sh plan|show}"
NODES="${NODES:-1 128 512 1024 2048 4096}"
case "$what" in
plan) cmd() { echo "$1 plan --profile hgx-h200 --nodes $2 --nccl-version 2.28 -b 8 -e 8G ${3:-}"; } ;;
show) cmd() { echo "$1 show --profile dgx-h100 --nodes $2 --color never ${3:-}"; } ;;
*) echo "usage: bench/scale.sh plan|show" >&2; exit 2 ;;
esac
# FORMATS=json narrows the run to the JSON document.
if [[ "${FORMATS:-json text}" == json ]]; then formats=("--format json"); else formats=("--format json" ""); fi
host=$(cat /proc/sys/kernel/hostname)
# RESULTS_TAG=x writes results-scale-<host>-x.md (keeps another machine's results beside).
out="bench/$what/results-scale-${host}${RESULTS_TAG:+-$RESULTS_TAG}.md"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# runs N: fewer repetitions where one run takes seconds.
# BIG_RUNS=N takes the lowest of N beyond 1,024 nodes too (default 1).
runs() { if (($1 <= 128)); then echo 5; elif (($1 <= 1024)); then echo 3; else echo "${BIG_RUNS:-1}"; fi; }

# "seconds KiB bytes": lowest wall time and peak RSS of R runs, and the output size.
measure() {
  local bin=$1 n=$2 fmt=$3 best_t="" best_m=""
  for _ in $(seq "$(runs "$n")"); do
    # shellcheck disable=SC2046
    /usr/bin/time -f "%e %M" -o "$tmp/time" $(cmd "$bin" "$n" "$fmt") >"$tmp/out" 2>/dev/null
    read -r t m <"$tmp/time"
    if [[ -z "$best_t" ]] || awk -v a="$t" -v b="$best_t" 'BEGIN { exit !(a < b) }'; then best_t=$t; fi
    if [[ -z "$best_m" || "$m" -lt "$best_m" ]]; then best_m=$m; fi
  done
  echo "$best_t $best_m $(stat -c %s "$tmp/out")"
}

mib() { awk -v k="$1" -v d="$2" 'BEGIN { printf "%.1f", k / d }'; }

rows=()
growth=()
for fmt in "${formats[@]}"; do
  label=${fmt:-"--format text"}
  for n in $NODES; do
    read -r ta ma sa < <(measure "$TOPO_BIN" "$n" "$fmt")
    row="| \`$label\` | $n | $((n * 8)) | $ta | $(mib "$ma" 1024) | $(mib "$sa" 1048576)"
    if [[ -n "${BEFORE_BIN:-}" ]] && ((n <= ${BEFORE_MAX_NODES:-1000000})); then
      read -r tb mb sb < <(measure "$BEFORE_BIN" "$n" "$fmt")
      row="$row | $tb | $(mib "$mb" 1024) | $(mib "$sb" 1048576)"
      growth+=("$label $n $ta $tb")
    else
      row="$row | | |"
      growth+=("$label $n $ta -")
    fi
    rows+=("$row |")
    echo "$row" >&2
  done
done

"$TOPO_BIN" --version >/dev/null
hf=(hyperfine --warmup 3 --min-runs 30 -N --style basic --export-markdown "$tmp/hf.md")
hf+=(-n "this build" "$(cmd "$TOPO_BIN" 1 "--format json")")
if [[ -n "${BEFORE_BIN:-}" ]]; then hf+=(-n "before" "$(cmd "$BEFORE_BIN" 1 "--format json")"); fi
"${hf[@]}" >&2

{
  echo "# topo $what at scale: $host"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs, load average $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
  echo "- this build: $("$TOPO_BIN" --version) ($(git rev-parse --short HEAD 2>/dev/null || echo unknown)), release"
  if [[ -n "${BEFORE_BIN:-}" ]]; then echo "- before: \`$BEFORE_BIN\` ($("$BEFORE_BIN" --version)${BEFORE_NOTE:+, $BEFORE_NOTE})${BEFORE_MAX_NODES:+, run up to $BEFORE_MAX_NODES nodes}"; fi
  if [[ -n "${BENCH_NOTE:-}" ]]; then echo "- note: $BENCH_NOTE"; fi
  echo "- command: \`$(cmd topo N "[--format json]")\`, output to a file"
  echo "- time and peak RSS: /usr/bin/time, lowest of 5 runs (up to 128 nodes), 3 (up to 1024), ${BIG_RUNS:-1} beyond; each build's run right after the other's"
  echo "- target (issue 11): 4,096 nodes × 8 GPUs under 2 s and 500 MB, growth no worse than n log n past 1,024 GPUs"
  echo
  echo "| format | nodes | GPUs | s | peak RSS MiB | output MiB | before: s | before: RSS MiB | before: output MiB |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Growth past 1,024 GPUs (wall time; exponent k in time ∝ GPUs^k between neighbouring rows; n log n from 1,024 to 32,768 GPUs is k ≈ 1.2):"
  echo
  printf '%s\n' "${growth[@]}" | awk '
    function k(t1, t0, n1, n0) { return (t1 > 0 && t0 > 0) ? sprintf("%.2f", log(t1 / t0) / log(n1 / n0)) : "n/a" }
    {
      n = $(NF - 2); ta = $(NF - 1); tb = $NF; fmt = $1 " " $2
      if (n >= 128 && fmt == pf && pn >= 128) {
        line = sprintf("- `%s` %d → %d GPUs (%d×): %.2f → %.2f s, k = %s", fmt, pn * 8, n * 8, n / pn, pa, ta, k(ta, pa, n, pn))
        if (tb != "-") line = line sprintf("; before %.2f → %.2f s, k = %s", pb, tb, k(tb, pb, n, pn))
        print line
      }
      pf = fmt; pn = n; pa = ta; pb = tb
    }'
  echo
  echo "## 8 GPUs (\`--nodes 1 --format json\`), hyperfine"
  echo
  cat "$tmp/hf.md"
} >"$out"
echo "wrote $out" >&2
