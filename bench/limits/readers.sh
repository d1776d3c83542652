#!/usr/bin/env bash
# Hostile inputs for the text readers (issue 23 item 4): time and peak RSS of `topo show
# --from` on each. Usage: bench/limits/readers.sh [topo binary]   (from the repository root)
# Writes the inputs to a temporary folder; prints one markdown table row per case.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/topo}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'PY'
import sys
d = sys.argv[1]
def write(name, text):
    open(f"{d}/{name}", "w").write(text)
def square(n, cell):
    t = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\n"
    for i in range(n):
        t += f"GPU{i}\t" + "\t".join("X" if i == j else cell for j in range(n)) + f"\t{i}\t{i}\n"
    return t
# A header of n columns with n one-word rows: rows cost the square of the width.
for n in (2000, 5000):
    cols = [f"GPU{i}" for i in range(n)]
    write(f"wide-{n}.txt", "\t" + "\t".join(cols) + "\n" + "\n".join(cols) + "\n")
write("sys-160.txt", square(160, "SYS"))
write("sys-640.txt", square(640, "SYS"))
write("nic-name-100k.txt", "\tGPU0\tNIC0\nGPU0\tX\tPIX\nNIC0\tPIX\tX\n\nNIC0: " + "m" * 100000 + "\n")
def log(n):
    t = "h:1:1 [0] NCCL INFO === System : maxBw 24.0 totalBw 24.0 ===\nh:1:1 [0] NCCL INFO CPU/0-0 (1/1/1)\n"
    t += "".join(f"h:1:1 [0] NCCL INFO + PCI[24.0] - GPU/0-{i + 0x1000:x} ({i})\n" for i in range(n))
    return t + "h:1:1 [0] NCCL INFO ====================\n"
write("log-20k.log", log(20000))
# Within the caps: 12 hosts of 640 GPUs, 7680 device lines (the block's limit).
t = "h:1:1 [0] NCCL INFO === System : maxBw 24.0 totalBw 24.0 ===\n"
for h in range(12):
    t += f"h:1:1 [0] NCCL INFO CPU/{h:x}-0 (1/1/1)\n"
    t += "".join(f"h:1:1 [0] NCCL INFO + PCI[24.0] - GPU/{h:x}-{i + 0x1000:x} ({i})\n" for i in range(640))
write("log-12x640.log", t + "h:1:1 [0] NCCL INFO ====================\n")
write("log-80k.log", log(80000))
PY
echo "| case | input | exit | time (s) | peak RSS (KiB) | first line |"
echo "|---|---:|---:|---:|---:|---|"
for f in "$work"/*; do
  name=$(basename "$f")
  set +e
  /usr/bin/time -f "%e %M" -o "$work/.t" "$bin" show --from "$f" >/dev/null 2>"$work/.e"
  rc=$?
  set -e
  read -r secs rss < <(tail -1 "$work/.t")
  first=$(grep -m1 -E "^(error|warning)" "$work/.e" | cut -c1-100 || true)
  echo "| $name | $(stat -c %s "$f") B | $rc | $secs | $rss | ${first:-ok} |"
done
