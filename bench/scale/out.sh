#!/usr/bin/env bash
# The output side of issue 11's scale target, this build beside another, run back to back at
# each size so both see the same load: `topo show --profile dgx-h100 --format json`,
# `topo plan --profile hgx-h200 --format json` and `topo xml --profile hgx-h200` at
# N = 128 … 16384 nodes (1,024 … 131,072 GPUs). User CPU time is the column to compare on a
# shared machine (wall time there mostly measures the other engineers' jobs). A size the
# other build refuses (builds before 2026-12-04 stop at 4,096 nodes) shows `refused` there.
#   BEFORE_BIN=/work/main/target/release/topo TOPO_BIN=target/release/topo bench/scale/out.sh
#   NODES="128 1024" WHAT="show xml" ... (narrower run; WHAT may add plan-nvl72, GB200 trays)
# Prints a markdown table per command on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${TOPO_BIN:?name this build}" "${BEFORE_BIN:?name the build to compare with}"
NODES="${NODES:-128 256 512 1024 2048 4096 8192 16384}"
WHAT="${WHAT:-show plan xml}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmd() { # WHAT BIN N
  case "$1" in
  show) echo "$2 show --profile dgx-h100 --nodes $3 --color never --format json" ;;
  plan) echo "$2 plan --profile hgx-h200 --nodes $3 --color never --format json" ;;
  xml) echo "$2 xml --profile hgx-h200 --nodes $3 --color never" ;;
  plan-nvl72) echo "$2 plan --profile gb200-nvl72 --nodes $3 --color never --format json" ;;
  esac
}

per_node() { # WHAT: GPUs per node
  case "$1" in plan-nvl72) echo 4 ;; *) echo 8 ;; esac
}

# "user wall MiB output-MiB" of one run, or "refused - - -".
measure() {
  # shellcheck disable=SC2046
  if ! /usr/bin/time -f "%U %e %M" -o "$tmp/time" $(cmd "$1" "$2" "$3") >"$tmp/out" 2>/dev/null; then
    echo "refused - - -"
    return
  fi
  read -r u e m <"$tmp/time"
  awk -v u="$u" -v e="$e" -v m="$m" -v s="$(stat -c %s "$tmp/out")" \
    'BEGIN { printf "%s %s %.0f %.1f\n", u, e, m / 1024, s / 1048576 }'
}

echo "- date: $(date -u +%FT%TZ); load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- this build: $TOPO_BIN ($("$TOPO_BIN" --version)); before: $BEFORE_BIN"
for w in $WHAT; do
  echo
  echo "\`$(cmd "$w" topo N)\`"
  echo
  echo "| nodes | GPUs | user s | wall s | peak MiB | output MiB | before: user s | wall s | peak MiB | output MiB |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  growth=()
  for n in $NODES; do
    read -r u e m s < <(measure "$w" "$TOPO_BIN" "$n")
    read -r bu be bm bs < <(measure "$w" "$BEFORE_BIN" "$n")
    echo "| $n | $((n * $(per_node "$w"))) | $u | $e | $m | $s | $bu | $be | $bm | $bs |"
    growth+=("$n $u $bu")
  done
  echo
  echo "Growth of user time, k in time ∝ GPUs^k between neighbouring rows (n log n is k ≈ 1.1):"
  echo
  printf '%s\n' "${growth[@]}" | awk -v g="$(per_node "$w")" 'NR > 1 {
      k = (u + 0 > 0 && $2 + 0 > 0) ? sprintf("%.2f", log($2 / u) / log($1 / n)) : "-"
      kb = (b + 0 > 0 && $3 + 0 > 0) ? sprintf("%.2f", log($3 / b) / log($1 / n)) : "-"
      printf "- %d → %d GPUs: %s → %s s, k = %s; before %s → %s s, k = %s\n", n * g, $1 * g, u, $2, k, b, $3, kb
    } { n = $1; u = $2; b = $3 }'
done
echo
echo "- load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
