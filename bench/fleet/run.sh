#!/usr/bin/env bash
# `topo diagnose --fleet` over N snapshots (issue 28: under 10 s for 1,000 on the 2-vCPU VM).
# Usage: bench/fleet/run.sh [topo binary] [N]   (from the repository root)
# The fleet: N-3 copies of the HGX H100 fixture snapshot as .tar.gz, two with GPU 0's link
# running at x8, one PCIe L40S box. Prints the outliers and the time and peak RSS of 2 runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/topo}
n=${2:-1000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/fleet"
cp -r fixtures/snapshots/hgx-h100-8gpu "$work/src/good"
cp -r fixtures/snapshots/hgx-h100-8gpu "$work/src/bad"
echo 8 > "$work/src/bad/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/current_link_width"
(cd "$work/src/good" && tar czf "$work/good.tar.gz" .)
(cd "$work/src/bad" && tar czf "$work/bad.tar.gz" .)
for i in $(seq 1 $((n - 3))); do cp "$work/good.tar.gz" "$work/fleet/node$(printf %05d "$i").tar.gz"; done
cp "$work/bad.tar.gz" "$work/fleet/node90001.tar.gz"
cp "$work/bad.tar.gz" "$work/fleet/node90002.tar.gz"
(cd fixtures/snapshots/pcie-8gpu && tar czf "$work/fleet/node90003.tar.gz" .)
"$bin" diagnose --fleet "$work/fleet" | grep -E "^(topo|reference|outlier)"
for run in 1 2; do
  /usr/bin/time -f "run $run: %e s, peak RSS %M KiB" "$bin" diagnose --fleet "$work/fleet" >/dev/null
done
