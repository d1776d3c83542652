#!/usr/bin/env bash
# Times `topo show` (summary, matrix, pci, JSON) on the 8-GPU inputs in the repository, and
# live `topo show` side by side with hwloc's lstopo-no-graphics on this machine's own topology.
# Writes bench/show/results-<host>.md.
#
#   bench/show/run.sh                         # builds target/release/topo first
#   TOPO_BIN=/path/to/topo BENCH_NOTE="…" bench/show/run.sh
#   RUNS=20 bench/show/run.sh                 # fewer runs (default: at least 50 per command)
#
# Needs hyperfine and lstopo-no-graphics; installs them with apt-get when missing (Debian:
# hyperfine, hwloc-nox). Every command writes its output to /dev/null, so the numbers are
# loading + model + rendering, not terminal speed. `-N`: no intermediate shell.
set -euo pipefail
cd "$(dirname "$0")/../.."

source bench/common.sh
need hyperfine hyperfine
need lstopo-no-graphics hwloc-nox

topo_bin
RUNS="${RUNS:-50}"
HF=(hyperfine --warmup 5 --min-runs "$RUNS" -N --style basic)

# name|source arguments: the 8-GPU inputs this checkout has.
inputs=(
  "profile hgx-h200|--profile hgx-h200"
  "profile dgx-h100|--profile dgx-h100"
  "xml ibm-cloud-gx3d-h100-topo.xml|--from fixtures/xml/ibm-cloud-gx3d-h100-topo.xml"
)
if [[ -d fixtures/snapshots/hgx-h100-8gpu ]]; then
  inputs+=("snapshot hgx-h100-8gpu|--from fixtures/snapshots/hgx-h100-8gpu")
fi

views=("summary|" "matrix|--view matrix" "pci|--view pci" "json|--format json")

# Refuse to time a command that fails: hyperfine would time the error path.
for inp in "${inputs[@]}"; do
  src="${inp#*|}"
  for v in "${views[@]}"; do
    # shellcheck disable=SC2086
    "$TOPO_BIN" show $src ${v#*|} --color never >/dev/null
  done
done
"$TOPO_BIN" show --color never >/dev/null

host=$(cat /proc/sys/kernel/hostname)
out="bench/show/results-${host}.md"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

i=0
for inp in "${inputs[@]}"; do
  name="${inp%%|*}"
  src="${inp#*|}"
  args=()
  for v in "${views[@]}"; do
    args+=(-n "${v%%|*}" "$TOPO_BIN show $src ${v#*|} --color never")
  done
  "${HF[@]}" --export-markdown "$tmp/in$i.md" "${args[@]}" >&2
  i=$((i + 1))
done

# The peer: hwloc on the same live machine, in the same hyperfine run.
"${HF[@]}" --export-markdown "$tmp/live.md" \
  -n "topo show (live)" "$TOPO_BIN show --color never" \
  -n "topo show --format json (live)" "$TOPO_BIN show --format json --color never" \
  -n "lstopo-no-graphics (console)" "lstopo-no-graphics -f --of console /dev/null" \
  -n "lstopo-no-graphics --of xml" "lstopo-no-graphics -f --of xml /dev/null" >&2

gpus=$( (ls /proc/driver/nvidia/gpus 2>/dev/null || true) | wc -l)
{
  echo "# topo show benchmark: $host"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs, kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- topo: $("$TOPO_BIN" --version) ($(git rev-parse --short HEAD 2>/dev/null || echo unknown)), release build"
  if [[ -n "${BENCH_NOTE:-}" ]]; then echo "- note: $BENCH_NOTE"; fi
  echo "- hwloc: $(lstopo-no-graphics --version 2>&1 | head -1)"
  echo "- hyperfine: $(hyperfine --version), --warmup 5 --min-runs $RUNS -N (no shell); output to /dev/null"
  echo "- target (issue 2): \`topo show\` of an 8-GPU input well under 50 ms"
  echo
  i=0
  for inp in "${inputs[@]}"; do
    echo "## 8 GPUs: ${inp%%|*} (\`topo show ${inp#*|}\`)"
    echo
    cat "$tmp/in$i.md"
    echo
    i=$((i + 1))
  done
  echo "## This machine, live: topo against lstopo-no-graphics"
  echo
  if [[ "$gpus" -eq 0 ]]; then
    echo "This machine has no NVIDIA GPU (no /proc/driver/nvidia/gpus), so live \`topo show\` walks"
    echo "sysfs and procfs and finds no NVML library. Both tools read the same machine"
    echo "($(ls /sys/bus/pci/devices | wc -l) PCI functions, $(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l) NUMA node(s)); lstopo also builds its cache/core/PU tree, topo"
    echo "reads only what its model needs. Both include process start-up."
  else
    echo "This machine has $gpus NVIDIA GPU(s); live \`topo show\` includes NVML queries."
  fi
  echo
  cat "$tmp/live.md"
} >"$out"
echo "wrote $out" >&2
