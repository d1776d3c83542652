#!/usr/bin/env bash
# Issue 47's one device run: the pipelined kernels against the copy ceiling, 8 ranks on one
# GPU, MPS or time slices, the live snapshot. One H100/H200, no network, under 8 minutes.
#
#   bench/cuda/pipeline.sh OUTDIR
#
# Needs: NVIDIA's driver; NVRTC (TOPO_NVRTC, else the nvidia-cuda-nvrtc wheel PyTorch
# installs, found under python3's sys.path); a release topo (TOPO_BIN, else
# target/release/topo, else `cargo build --release --locked --offline` when cargo and the
# dependencies are here). Every step runs under `timeout` with its own limit, cut to what is
# left of BUDGET_S (400 s) + 60 s, and no step starts after BUDGET_S: the whole run ends
# within 460 s of its start; a step that fails or times out is one FAIL line and the others
# still run. Each figure goes into OUTDIR/summary.tsv with its command;
# OUTDIR/env.txt holds the GPU, driver, date and tools. Exit status: 0 when every step ran
# and passed its check, 1 otherwise.
#
# Device invocation (build here, carry the binary):
#   cargo build --release --locked && run command="bench/cuda/pipeline.sh \$OUT/pipeline" \
#     carry=["target/release/topo"] timeout_s=540
set -uo pipefail
out=${1:?usage: bench/cuda/pipeline.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
start=$(date +%s)
budget=${BUDGET_S:-400}
export XDG_CACHE_HOME="$out/cache"
fails=0

say() { printf '%s\n' "$*" | tee -a "$out/log.txt"; }

# --- tools and environment
topo=${TOPO_BIN:-target/release/topo}
if [ ! -x "$topo" ]; then
  if command -v cargo >/dev/null 2>&1; then
    say "building topo (release, offline)"
    timeout -k 5 300 cargo build --release --locked --offline >"$out/build.log" 2>&1 \
      || { say "FAIL build: see build.log"; exit 1; }
  else
    say "FAIL no topo binary at $topo and no cargo to build one"; exit 1
  fi
fi
if [ -z "${TOPO_NVRTC:-}" ]; then
  TOPO_NVRTC=$(python3 - <<'PY' 2>/dev/null
import glob, os, sys
for d in sys.path:
    for pat in ("nvidia/cu13/lib/libnvrtc.so.13", "nvidia/cuda_nvrtc/lib/libnvrtc.so.1[23]"):
        hits = sorted(glob.glob(os.path.join(d, pat)))
        if hits:
            print(hits[0]); sys.exit()
PY
)
  [ -z "$TOPO_NVRTC" ] && TOPO_NVRTC=$(ls /usr/local/cuda/lib64/libnvrtc.so.1[23] 2>/dev/null | head -1)
fi
export TOPO_NVRTC
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "topo: $("$topo" --version 2>&1) ($topo)"
  echo "git: $(git rev-parse HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  echo "TOPO_NVRTC: ${TOPO_NVRTC:-<none>}"
  echo "CUDA_DEVICE_MAX_CONNECTIONS: ${CUDA_DEVICE_MAX_CONNECTIONS:-<unset>}"
  echo "nvidia-cuda-mps-control: $(command -v nvidia-cuda-mps-control || echo '<none>')"
  nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,clocks.max.sm --format=csv 2>&1
  nvidia-smi 2>&1 | head -15
} >"$out/env.txt"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
printf 'step\trc\tseconds\tfigures\tgpu\tdriver\tdate\tcommand\n' >"$out/summary.tsv"

# step NAME LIMIT_S CHECK -- ARGS...: `topo ARGS` under `timeout LIMIT_S`, its JSON and
# stderr kept; CHECK is a python expression over the JSON report `j` (true: PASS).
step() {
  local name=$1 limit=$2 check=$3; shift 4
  if [ $(($(date +%s) - start)) -ge "$budget" ]; then
    printf '%s\tskipped\t0\tbudget of %ss spent\t%s\t%s\t%s\t%s\n' "$name" "$budget" "$gpu" "$driver" "$(date -u +%FT%TZ)" "topo $*" >>"$out/summary.tsv"
    say "SKIP $name (budget)"; fails=$((fails + 1)); return
  fi
  local t0=$(date +%s)
  local left=$((budget + 60 - (t0 - start)))
  [ "$limit" -gt "$left" ] && limit=$left
  timeout -k 5 "$limit" "$topo" "$@" >"$out/$name.out" 2>"$out/$name.err"
  local rc=$?
  local dt=$(($(date +%s) - t0))
  local figs
  figs=$(python3 - "$out/$name.out" "$rc" "$check" <<'PY'
import json, sys
path, rc, check = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    j = json.load(open(path))
except Exception:
    print(("TIMEOUT" if rc in (124, 137) else f"FAIL rc={rc}") + " (no report)"); sys.exit(1)
rows = j.get("results", [])
parts = []
for r in rows:
    if r["bytes"] >= (64 << 20) or len(rows) <= 2:
        s = f'{r["collective"]} {r["proto"]} {r["bytes"]>>20}MiB ch{r["nchannels"]} busbw {r["busbw_gbps"]:.1f}'
        if r.get("ceiling_ratio") is not None:
            s += f' ceiling {r["ceiling_busbw_gbps"]:.1f} ratio {r["ceiling_ratio"]:.3f}'
        parts.append(s)
parts.append(f'rows {len(rows)} wrong {j.get("wrong_total")}')
ok = rc == 0 and eval(check, {"j": j, "rows": rows})
print(("PASS " if ok else "FAIL ") + "; ".join(parts))
sys.exit(0 if ok else 1)
PY
)
  [ $? -eq 0 ] || fails=$((fails + 1))
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$dt" "$figs" "$gpu" "$driver" "$(date -u +%FT%TZ)" "topo $*" >>"$out/summary.tsv"
  say "$name: rc $rc, ${dt}s: $figs"
  [ "$rc" -ne 0 ] && tail -3 "$out/$name.err" | sed 's/^/    /' | tee -a "$out/log.txt"
}

ratio_ok='all(r.get("ceiling_ratio", 0) >= {t} for r in rows if r["bytes"] >= (256 << 20)) and j["wrong_total"] == 0'
v="verify --backend cuda --timeout 20 --format json"
big="--collective allreduce --algo ring -b 256M -e 256M -n 10 -w 3 --copy-ceiling"

# 1. The goals: ring Simple AllReduce at 256 MB, 2 and 4 ranks on one GPU, >= 0.80 of the
#    copy ceiling; LL128 >= 0.5.
step k2-simple-256m 60 "${ratio_ok/\{t\}/0.80}" -- $v --ranks-per-gpu 2 --proto simple $big
step k4-simple-256m 60 "${ratio_ok/\{t\}/0.80}" -- $v --ranks-per-gpu 4 --proto simple $big
step k2-ll128-256m 90 "${ratio_ok/\{t\}/0.50}" -- $v --ranks-per-gpu 2 --proto ll128 $big
step k4-ll128-256m 90 "${ratio_ok/\{t\}/0.50}" -- $v --ranks-per-gpu 4 --proto ll128 $big
# 2. 8 ranks on one GPU, every collective, every protocol, checked (0 wrong), with the queue
#    count topo sets itself (CUDA_DEVICE_MAX_CONNECTIONS unset here unless the caller set it).
for p in simple ll ll128; do
  step k8-all-$p 60 'j["wrong_total"] == 0' -- $v --ranks-per-gpu 8 --collective all --proto $p -b 8 -e 1M -f 8 -n 2 -w 1
done
step k8-simple-256m 60 'j["wrong_total"] == 0' -- $v --ranks-per-gpu 8 --proto simple $big
# 3. The model's refit: busbw per channel at 256 MB with 2 ranks (handshake vs piece).
for ch in 4 8 16 32; do
  step k2-ch$ch 45 'j["wrong_total"] == 0' -- $v --ranks-per-gpu 2 --proto simple --nchannels $ch $big
done
# 4. Processes sharing the GPU: MPS when it can start, else time slices (the note says).
step procs-k2-64m 60 'j["wrong_total"] == 0' -- $v --launch processes --ranks-per-gpu 2 --collective allreduce -b 64M -e 64M -n 5 -w 2
# 5. SHM (FIFOs in pinned host memory, system-scope fences) stays correct.
TOPO_CUDA_TRANSPORT=shm step k2-shm-all 60 'j["wrong_total"] == 0' -- $v --ranks-per-gpu 2 --collective all -b 8 -e 1M -f 8 -n 2 -w 1
# 6. The live snapshot (a fixture candidate) and the kernels' resource usage.
if [ $(($(date +%s) - start)) -lt "$budget" ]; then
  timeout -k 5 60 "$topo" snapshot -o "$out/snapshot" >"$out/snapshot.out" 2>&1
  rc=$?
  printf 'snapshot\t%s\t-\t%s\t%s\t%s\t%s\t%s\n' "$rc" "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" "$gpu" "$driver" "$(date -u +%FT%TZ)" "topo snapshot -o $out/snapshot" >>"$out/summary.tsv"
  [ $rc -eq 0 ] || fails=$((fails + 1))
  say "snapshot: rc $rc"
fi
say "notes of the 2-rank run:"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("note",""))' "$out/k2-simple-256m.out" 2>/dev/null | tr ';' '\n' | sed 's/^/  /' | tee -a "$out/log.txt"
say "done in $(($(date +%s) - start)) s, $fails step(s) failed or skipped"
column -t -s $'\t' "$out/summary.tsv" | cut -c1-220 | tee -a "$out/log.txt"
[ "$fails" -eq 0 ]
