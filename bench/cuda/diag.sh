#!/usr/bin/env bash
# Follow-up of gpu-check.sh on one GPU (2026-12-04): what makes 4 and 8 ranks on one GPU
# stall, and how the 256 MB ring AllReduce scales with channels and protocol.
#   bench/cuda/diag.sh OUTDIR      (TOPO_BIN, TOPO_NVRTC as gpu-check.sh finds them)
# Every step is bounded (topo --timeout 10 inside `timeout 40`); one line per step in
# OUTDIR/diag.tsv: name, exit code, seconds, max busbw, wrong, first error line.
set -uo pipefail
out=${1:?usage: bench/cuda/diag.sh OUTDIR}; mkdir -p "$out"
cd "$(dirname "$0")/../.."
topo=${TOPO_BIN:-target/release/topo}
nv=$(find /usr/local/cuda/lib64 /opt/torch/.venv/lib -name 'libnvrtc.so.13' 2>/dev/null | head -1)
export TOPO_NVRTC=${TOPO_NVRTC:-$nv} XDG_CACHE_HOME="$out/cache"
start=$(date +%s); budget=${BUDGET_S:-200}
d() { # NAME ENV... -- ARGS...
  local name=$1; shift; local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  if [ $(($(date +%s) - start)) -ge "$budget" ]; then printf '%s\tskipped\n' "$name" >>"$out/diag.tsv"; return; fi
  local t0=$(date +%s)
  env "${envs[@]}" timeout -k 5 40 "$topo" verify --backend cuda --timeout 10 --format json "$@" \
    >"$out/$name.json" 2>"$out/$name.err"
  local rc=$?
  python3 - "$out/$name" "$rc" "$(($(date +%s) - t0))" >>"$out/diag.tsv" <<'PY'
import json, sys
p, rc, t = sys.argv[1:]
try:
    j = json.load(open(p + ".json")); r = j["results"]
    bw = max(x["busbw_gbps"] for x in r); ch = sorted({x["nchannels"] for x in r})
    print(f"{p.split('/')[-1]}\t{rc}\t{t}s\tbusbw {bw:.1f}\twrong {j['wrong_total']}\tch {ch}")
except Exception:
    e = [l for l in open(p + ".err").read().splitlines() if l.startswith("error")]
    print(f"{p.split('/')[-1]}\t{rc}\t{t}s\t{(e or ['?'])[0][:150]}")
PY
  tail -1 "$out/diag.tsv"
}
timeout 60 "$topo" verify --backend cuda --ranks-per-gpu 2 -b 8 -e 8 -n 1 -w 0 >/dev/null 2>&1
M=CUDA_DEVICE_MAX_CONNECTIONS=32
# 1. The stalls: same runs with 8 and with 32 hardware queues.
d k8-float-q8 X=1 -- --ranks-per-gpu 8 --collective allreduce -b 8 -e 1M -f 8 -n 2 -w 1
d k8-float-q32 $M -- --ranks-per-gpu 8 --collective allreduce -b 8 -e 1M -f 8 -n 2 -w 1
d k8-all-ll-q32 $M -- --ranks-per-gpu 8 --collective all --proto ll -b 8 -e 1M -f 8 -n 2 -w 1
d k8-all-ll128-q32 $M -- --ranks-per-gpu 8 --collective all --proto ll128 -b 8 -e 1M -f 8 -n 2 -w 1
d k4-256m-q32 $M -- --ranks-per-gpu 4 --collective allreduce --algo ring --proto simple -b 256M -e 256M -n 10 -w 3
d k8-256m-q32 $M -- --ranks-per-gpu 8 --collective allreduce --algo ring --proto simple -b 256M -e 256M -n 10 -w 3
# 2. K=2 at 256 MB: channels and protocols.
for c in 4 8 16 64; do
  d k2-256m-ch$c X=1 -- --ranks-per-gpu 2 --collective allreduce --algo ring --proto simple --nchannels $c -b 256M -e 256M -n 10 -w 3
done
d k2-256m-ll128 X=1 -- --ranks-per-gpu 2 --collective allreduce --algo ring --proto ll128 -b 256M -e 256M -n 10 -w 3
d k2-sweep X=1 -- --ranks-per-gpu 2 --collective allreduce --algo ring --proto simple -b 1M -e 1G -f 4 -n 10 -w 3
# 3. What gpu-check.sh did not reach.
for o in prod min max avg; do
  d op-$o $M -- --ranks-per-gpu 4 --collective allreduce,reducescatter,reduce -o $o -b 8 -e 1M -f 16 -n 2 -w 1
done
d tree-k4 $M -- --ranks-per-gpu 4 --collective allreduce --algo tree -b 8 -e 16M -f 8 -n 2 -w 1
d shm-k2-64m TOPO_CUDA_TRANSPORT=shm -- --ranks-per-gpu 2 --collective allreduce --algo ring --proto simple -b 64M -e 64M -n 5 -w 2
echo "done in $(($(date +%s) - start)) s"
