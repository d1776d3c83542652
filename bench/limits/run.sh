#!/usr/bin/env bash
# Time to refusal (or answer) for inputs that used to take minutes: the targets the
# integration tests once asserted with wall clocks, measured here instead, on a release build.
# Usage: bench/limits/run.sh [results.md]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/common.sh
need hyperfine hyperfine
topo_bin
out=${1:-bench/limits/results-vm.md}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'PY'
import sys
d = sys.argv[1]
def wide(hosts, per):
    s = '<system version="1">'
    for h in range(hosts):
        s += f'<cpu numaid="{h}" affinity="ff" arch="x86_64" vendor="GenuineIntel">'
        for i in range(per):
            s += (f'<pci busid="{h:04x}:{(i // 8) % 256:02x}:{i % 8:02x}.0" class="0x030200" '
                  f'vendor="0x10de" device="0x2330"><gpu dev="{i}" sm="90" rank="{i}" gdr="1"/></pci>')
        s += '</cpu>'
    return s + '</system>'
open(f'{d}/wide.xml', 'w').write(wide(1, 60000))
open(f'{d}/two.xml', 'w').write(wide(2, 400))
big = '<system version="1"><cpu numaid="0" affinity="ff" arch="x86_64" vendor="GenuineIntel">'
for i in range(200):
    big += (f'<pci busid="0000:{i + 1:02x}:00.0" class="0x030200" vendor="0x10de" device="0x2330">'
            f'<gpu dev="{i}" sm="90" rank="{i}" gdr="1"/></pci>')
open(f'{d}/big.xml', 'w').write(big + '</cpu></system>')
open(f'{d}/deep.yaml', 'w').write('name: x\ntemplates: ' + '[' * 200000 + ']' * 200000 + '\n')
attrs = ''.join(' a="1"' for _ in range(100000))
open(f'{d}/attrs.xml', 'w').write(f'<system version="1"><cpu numaid="0"{attrs}/></system>')
PY

# name | target seconds | command
cases=(
  "nodes-ceiling|5|show --profile dgx-h100 --nodes 100000"
  "nodes-gpu-budget|10|plan --from $work/big.xml --nodes 4096"
  "xml-512-nodes|30|xml --profile dgx-h100 --nodes 512"
  "deep-yaml|5|show --from $work/deep.yaml"
  "wide-xml-60k-gpus|10|show --from $work/wide.xml"
  "host-over-640|10|show --from $work/two.xml"
  "100k-attributes|10|show --from $work/attrs.xml"
  "dev-zero|5|show --from /dev/zero"
)
{
  echo "# Time to answer hostile or huge inputs ($(date -u +%F), $(nproc) vCPU, release build)"
  echo
  echo "Each must end (usually refused with exit 2) within its target; hyperfine mean of 5 runs."
  echo
  echo "| case | target (s) | mean (s) | max (s) | within |"
  echo "|---|---:|---:|---:|---|"
} >"$out"
for c in "${cases[@]}"; do
  IFS='|' read -r name target cmd <<<"$c"
  # shellcheck disable=SC2086
  hyperfine -N -i -r 5 --export-json "$work/$name.json" "$TOPO_BIN $cmd" >/dev/null
  read -r mean max < <(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results'][0]; print(f\"{r['mean']:.3f} {r['max']:.3f}\")" "$work/$name.json")
  ok=$(python3 -c "print('yes' if $max < $target else 'NO')")
  echo "| $name | $target | $mean | $max | $ok |" >>"$out"
done
cat "$out"
