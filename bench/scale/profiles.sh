#!/usr/bin/env bash
# Issue 28's bounds on every profile at the largest node count topo admits for it (16,384, or
# what the device-pair limit allows): `topo plan` (JSON and text) and `topo show` (JSON and
# text), each run once by this build and, when BEFORE_BIN is set, by that build right after,
# so both see the same load. Columns: user CPU s, wall s, peak RSS MiB, output MB (10^6
# bytes, the bound's unit) and which bound the run misses (5 s user, 1.5 GB = 1,430.5 MiB
# peak, 256 MB = 256,000,000 bytes of JSON). REPEAT=N runs each command N times and keeps the
# run of median user time: on a shared VM one run of the same command varies by a fifth.
#   TOPO_BIN=target/release/topo [BEFORE_BIN=...] [PROFILES="gb200-nvl72 aws-p5"] \
#     [NODES=16384] [REPEAT=3] [WHAT="plan json"] bench/scale/profiles.sh > table.md
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${TOPO_BIN:?name this build}"
NODES="${NODES:-16384}"
REPEAT="${REPEAT:-1}"
WHAT="${WHAT:-plan json,plan text,show json,show text}"
PROFILES="${PROFILES:-$(ls profiles | sed -n 's/\.yaml$//p')}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The node count BIN admits for PROFILE: NODES, or the `--nodes` its refusal hints.
nodes_for() { # BIN PROFILE
  local hint
  if "$1" show --profile "$2" --nodes "$NODES" --color never -o /dev/null 2>"$tmp/err"; then
    echo "$NODES"
  else
    hint=$(sed -n 's/^hint: pass --nodes \([0-9]*\) or fewer.*/\1/p' "$tmp/err")
    echo "${hint:-0}"
  fi
}

# REPEAT runs: the one of median user time.
run() { # BIN CMD FORMAT PROFILE N
  local i
  for ((i = 0; i < REPEAT; i++)); do run_once "$@"; done | sort -n | sed -n "$(((REPEAT + 1) / 2))p"
}

# One run: "user wall MiB MB" or "refused - - -".
run_once() { # BIN CMD FORMAT PROFILE N
  local out="$tmp/out"
  rm -f "$out"
  if ! /usr/bin/time -f "%U %e %M" -o "$tmp/time" "$1" "$2" --profile "$4" --nodes "$5" \
    --color never --format "$3" -o "$out" 2>/dev/null; then
    echo "refused - - -"
    return
  fi
  local bytes=0
  [[ -f $out ]] && bytes=$(stat -c %s "$out")
  read -r user wall kib <"$tmp/time"
  awk -v u="$user" -v w="$wall" -v k="$kib" -v b="$bytes" -v f="$3" 'BEGIN {
    mb = (f == "json") ? sprintf("%.1f", b / 1e6) : "-";
    printf "%s %s %d %s\n", u, w, k / 1024, mb }'
}

over() { # "user wall MiB MB"
  awk -v s="$1" 'BEGIN { split(s, a, " "); o = "";
    if (a[1] == "refused") { print "refused"; exit }
    if (a[1] > 5) o = o "time ";
    if (a[3] * 1048576 > 1.5e9) o = o "memory ";
    if (a[4] != "-" && a[4] * 1e6 > 256e6) o = o "JSON";
    print (o == "" ? "met" : o) }'
}

echo "- date: $(date -u +%FT%TZ); load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- this build: $TOPO_BIN ($("$TOPO_BIN" --version))${BEFORE_BIN:+; before: $BEFORE_BIN}; runs each: $REPEAT"
echo
head="| profile | nodes | command | user s | wall s | peak MiB | JSON MB | bounds |"
rule="|---|---:|---|---:|---:|---:|---:|---|"
if [[ -n ${BEFORE_BIN:-} ]]; then
  head="$head before: user s | wall s | peak MiB | JSON MB |"
  rule="$rule---:|---:|---:|---:|"
fi
echo "$head"
echo "$rule"
for p in $PROFILES; do
  n=$(nodes_for "$TOPO_BIN" "$p")
  IFS=, read -ra commands <<<"$WHAT"
  for c in "${commands[@]}"; do
    read -r cmd fmt <<<"$c"
    now=$(run "$TOPO_BIN" "$cmd" "$fmt" "$p" "$n")
    row="| $p | $n | $cmd $fmt | ${now// / | } | $(over "$now") |"
    if [[ -n ${BEFORE_BIN:-} ]]; then
      was=$(run "$BEFORE_BIN" "$cmd" "$fmt" "$p" "$n")
      row="$row ${was// / | } |"
    fi
    echo "$row"
  done
done
echo
echo "- load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
