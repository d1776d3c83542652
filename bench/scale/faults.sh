#!/usr/bin/env bash
# Fault plans at 16,384 nodes (issue 43 item 5): user and system CPU time, wall time and peak RSS of
# `topo plan --profile dgx-a100 --nodes 16384 --format json` with no fault, one fault of each
# kind, and a fault on every host, each run by every build given right after the other, and
# whether the builds' outputs are identical. On a shared machine CPU time is the steadier
# figure, and the ratio between builds of one round steadier still. System time is mostly the
# page faults of fresh memory, so it follows the peak.
#
#   bench/scale/faults.sh BEFORE_BIN AFTER_BIN
set -euo pipefail
before=${1:?usage: bench/scale/faults.sh BEFORE_BIN AFTER_BIN}
after=${2:?usage: bench/scale/faults.sh BEFORE_BIN AFTER_BIN}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
every=()
for h in $(seq 0 16383); do every+=(--without "nic:mlx5_7@$h"); done
cases=("" "--without nic:mlx5_7" "--without gpu:5@77" "--without nvlink:GPU3@100"
  "--degrade pcie:0000:07:00.0=gen3x8@9" "--degrade nvlink:GPU1=6@5" "every")
echo "- date: $(date -u +%FT%TZ); load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| faults | before: user s | sys s | wall s | peak MiB | after: user s | sys s | wall s | peak MiB | output |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for c in "${cases[@]}"; do
  if [[ $c == every ]]; then args=("${every[@]}"); else read -ra args <<<"$c"; fi
  row="| ${c:-none} |"
  for b in before after; do
    bin=$before
    [[ $b == after ]] && bin=$after
    /usr/bin/time -f "%U %S %e %M" -o "$tmp/time" "$bin" plan --profile dgx-a100 --nodes 16384 \
      --format json -o "$tmp/$b.json" "${args[@]}" 2>/dev/null
    read -r user sys wall kib <"$tmp/time"
    row+=" $user | $sys | $wall | $((kib / 1024)) |"
  done
  if cmp -s "$tmp/before.json" "$tmp/after.json"; then row+=" identical |"; else row+=" differ |"; fi
  echo "$row"
done
echo
echo "- load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
