#!/usr/bin/env bash
# User CPU time, wall time and peak RSS of two builds side by side (each command run by one
# build right after the other), for the analysis at scale: `topo plan --profile hgx-h200` and
# `topo show --profile dgx-h100`, --format json, at N nodes. On a shared machine user CPU time
# is the steadier figure; wall time includes waiting for the cores. Prints a markdown table.
#
#   bench/scale/cpu.sh NEW_BIN OLD_BIN [NODES...]     # default nodes: 1 128 1024 2048 4096
set -euo pipefail
new=${1:?usage: bench/scale/cpu.sh NEW_BIN OLD_BIN [NODES...]}
old=${2:?usage: bench/scale/cpu.sh NEW_BIN OLD_BIN [NODES...]}
shift 2
nodes=("$@")
((${#nodes[@]})) || nodes=(1 128 1024 2048 4096)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run BIN ARGS...: "user wall KiB" of one run, output discarded.
run() {
  local bin=$1
  shift
  /usr/bin/time -f '%U %e %M' -o "$tmp/t" "$bin" "$@" >/dev/null 2>&1
  cat "$tmp/t"
}

echo "| command | nodes | GPUs | user s | wall s | peak RSS MiB | before: user s | before: wall s | before: RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for what in plan show; do
  for n in "${nodes[@]}"; do
    if [[ $what == plan ]]; then args=(plan --profile hgx-h200 --nodes "$n" --format json)
    else args=(show --profile dgx-h100 --nodes "$n" --format json); fi
    read -r u w m < <(run "$new" "${args[@]}")
    read -r ub wb mb < <(run "$old" "${args[@]}")
    printf '| `%s` | %d | %d | %s | %s | %.1f | %s | %s | %.1f |\n' \
      "$what" "$n" $((n * 8)) "$u" "$w" "$(echo "$m / 1024" | bc -l)" "$ub" "$wb" "$(echo "$mb / 1024" | bc -l)"
  done
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
