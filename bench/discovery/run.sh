#!/usr/bin/env bash
# Times topo's live discovery against hwloc's lstopo on this machine, plus live discovery of
# the synthetic HGX H100 tree, and writes bench/discovery/results-<host>.md.
#
#   bench/discovery/run.sh                 # builds target/release/topo first
#   TOPO_BIN=/path/to/topo BENCH_NOTE="built from …" bench/discovery/run.sh
#
# Needs hyperfine and lstopo-no-graphics; installs them with apt-get when missing (Debian:
# hyperfine, hwloc-nox). Each command writes its full output to /dev/null, so the numbers are
# discovery plus formatting, not terminal speed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source bench/common.sh
need hyperfine hyperfine
need lstopo-no-graphics hwloc-nox

topo_bin
HGX="fixtures/snapshots/hgx-h100-8gpu"

# Refuse to time a binary that fails: hyperfine would time the error path.
"$TOPO_BIN" xml -o /dev/null
"$TOPO_BIN" xml --sysfs-root "$HGX" -o /dev/null

host=$(cat /proc/sys/kernel/hostname)
out="bench/discovery/results-${host}.md"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

hyperfine --warmup 5 --min-runs 50 -N --export-markdown "$tmp/live.md" \
  -n "topo xml (live /)" "$TOPO_BIN xml -o /dev/null" \
  -n "lstopo-no-graphics --of xml" "lstopo-no-graphics -f --of xml /dev/null" \
  -n "lstopo-no-graphics (text)" "lstopo-no-graphics -f --of console /dev/null" >&2

hyperfine --warmup 5 --min-runs 50 -N --export-markdown "$tmp/hgx.md" \
  -n "topo xml --sysfs-root hgx-h100-8gpu" "$TOPO_BIN xml --sysfs-root $HGX -o /dev/null" \
  -n "topo snapshot of hgx-h100-8gpu (.tar.gz)" "$TOPO_BIN snapshot --sysfs-root $HGX -o $tmp/hgx.tar.gz" >&2

{
  echo "# Discovery benchmark: $host"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs, kernel $(uname -r)"
  echo "- topo: $("$TOPO_BIN" --version) ($(git rev-parse --short HEAD 2>/dev/null || echo unknown)), release build"
  if [[ -n "${BENCH_NOTE:-}" ]]; then echo "- note: $BENCH_NOTE"; fi
  echo "- hwloc: $(lstopo-no-graphics --version 2>&1 | head -1)"
  echo "- hyperfine: $(hyperfine --version), --warmup 5 --min-runs 50 -N (no shell)"
  echo "- PCI functions on this machine: $(ls /sys/bus/pci/devices | wc -l); NUMA nodes: $(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l)"
  echo
  echo "## This machine: live discovery against lstopo"
  echo
  cat "$tmp/live.md"
  echo
  echo "## Live discovery of the synthetic HGX H100 tree (8 GPUs, 8 NICs, 4 NVSwitches)"
  echo
  cat "$tmp/hgx.md"
} >"$out"
echo "wrote $out" >&2
