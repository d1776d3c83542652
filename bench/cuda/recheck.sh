#!/usr/bin/env bash
# The third device run of 2026-12-04, after the fixes that gpu-check.sh and diag.sh led to
# (kernels loaded before any rank launches, an occupancy check, 4 loads in flight per
# thread in Simple): the runs that stalled or were slow, once more.
#   bench/cuda/recheck.sh OUTDIR
set -uo pipefail
out=${1:?usage: bench/cuda/recheck.sh OUTDIR}; mkdir -p "$out"
cd "$(dirname "$0")/../.."
topo=${TOPO_BIN:-target/release/topo}
nv=$(find /usr/local/cuda/lib64 /opt/torch/.venv/lib -name 'libnvrtc.so.13' 2>/dev/null | head -1)
export TOPO_NVRTC=${TOPO_NVRTC:-$nv} XDG_CACHE_HOME="$out/cache"
start=$(date +%s); budget=${BUDGET_S:-120}
r() { # NAME ARGS...
  local name=$1; shift
  if [ $(($(date +%s) - start)) -ge "$budget" ]; then printf '%s\tskipped\n' "$name" | tee -a "$out/recheck.tsv"; return; fi
  local t0=$(date +%s)
  timeout -k 5 30 "$topo" verify --backend cuda --timeout 8 --format json "$@" >"$out/$name.json" 2>"$out/$name.err"
  local rc=$?
  python3 - "$out/$name" "$rc" "$(($(date +%s) - t0))" >>"$out/recheck.tsv" <<'PY'
import json, sys
p, rc, t = sys.argv[1:]
try:
    j = json.load(open(p + ".json")); r = j["results"]
    bw = max(x["busbw_gbps"] for x in r); ch = sorted({x["nchannels"] for x in r})
    print(f"{p.split('/')[-1]}\t{rc}\t{t}s\tbusbw {bw:.1f}\twrong {j['wrong_total']}\tch {ch}")
except Exception:
    e = [l for l in open(p + ".err").read().splitlines() if l.startswith("error")]
    print(f"{p.split('/')[-1]}\t{rc}\t{t}s\t{(e or ['?'])[0][:160]}")
PY
  tail -1 "$out/recheck.tsv"
}
r k2-256m --ranks-per-gpu 2 --collective allreduce --algo ring --proto simple -b 256M -e 256M -n 10 -w 3 --copy-ceiling
r k4-256m --ranks-per-gpu 4 --collective allreduce --algo ring --proto simple -b 256M -e 256M -n 10 -w 3
r k8-256m --ranks-per-gpu 8 --collective allreduce --algo ring --proto simple -b 256M -e 256M -n 10 -w 3
for p in simple ll ll128; do
  r k8-$p-a --ranks-per-gpu 8 --collective all --proto $p -b 8 -e 1M -f 8 -n 2 -w 1
done
r k8-simple-b --ranks-per-gpu 8 --collective all --proto simple -b 8 -e 1M -f 8 -n 2 -w 1
r k8-simple-c --ranks-per-gpu 8 --collective all --proto simple -d half -b 8 -e 1M -f 8 -n 2 -w 1
r k4-simple-u8 --ranks-per-gpu 4 --collective all --proto simple -d uint8 -b 8 -e 4M -f 8 -n 2 -w 1
r k4-simple-f64 --ranks-per-gpu 4 --collective all --proto simple -d double -b 8 -e 4M -f 8 -n 2 -w 1
r k2-sweep --ranks-per-gpu 2 --collective allreduce --algo ring --proto simple -b 1M -e 1G -f 4 -n 5 -w 2
r k8-64ch --ranks-per-gpu 8 --collective allreduce --nchannels 64 -b 1M -e 1M -n 1 -w 0
c=$(ls "$out"/cache/topo/kernels/*.cubin 2>/dev/null | head -1)
[ -n "$c" ] && cuobjdump --dump-resource-usage "$c" 2>&1 | grep -i -E 'function|REG' | head -8
echo "done in $(($(date +%s) - start)) s"
