#!/usr/bin/env bash
# The on-GPU check of the CUDA backend (issue 12), unattended, within 5 minutes on one GPU.
#
#   scripts/gpu-check.sh OUTDIR
#
# Writes into OUTDIR: env.txt (nvidia-smi, driver, libraries found); show.txt, plan.txt,
# topo.xml and snapshot/ (live discovery; snapshot/ is a fixture: copy it under
# fixtures/snapshots/); nccl-topo.xml and nccl-init.log (NCCL's own NCCL_TOPO_DUMP_FILE and
# INFO log from a one-rank torch.distributed init on GPU 0, where PyTorch is present) and
# xml-compare.txt; one <step>.json/.out/.err per step; summary.txt (also printed last).
# It downloads nothing and needs no network: the machine needs the NVIDIA driver, NVRTC (the
# CUDA toolkit or the nvidia-cuda-nvrtc wheel) and, for --compare nccl, libnccl.so.2.
#
# Every step runs under `timeout`, a failing step does not stop the others, and the script
# stops starting steps after BUDGET_S seconds (default 270). Without a GPU (or without
# PyTorch) the steps that need one are listed as skipped with the reason, and the script
# exits 0. It exits 2 only when there is no topo binary at all.
#
# The topo binary: $TOPO_BIN, else target/release/topo, else target/debug/topo, else it is
# built with `cargo build --release --offline` (which needs the crates vendored: build here
# and carry the binary instead). From a development machine with the `run` device tool:
#
#   cargo build --release                    # on the development machine
#   run(command="bash scripts/gpu-check.sh \"$OUT\"", carry=["target/release/topo"], timeout_s=420)
#
# then copy the files that come back under bench/cuda/results/<date>-<gpu>/ and commit them.
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
start=$(date +%s)
budget=${BUDGET_S:-270}
summary="$out/summary.tsv"
: >"$summary"

elapsed() { echo $(($(date +%s) - start)); }
log() { echo "[$(elapsed)s] $*" | tee -a "$out/log.txt"; }

# ---------------------------------------------------------------- the binary
topo=${TOPO_BIN:-}
for c in target/release/topo target/debug/topo; do
  [ -z "$topo" ] && [ -x "$c" ] && topo=$c
done
if [ -z "$topo" ]; then
  if command -v cargo >/dev/null 2>&1; then
    log "building topo (cargo build --release --offline)"
    cargo build --release --offline >"$out/build.txt" 2>&1 && topo=target/release/topo
  fi
fi
if [ -z "$topo" ] || [ ! -x "$topo" ]; then
  echo "gpu-check: every step skipped: no topo binary (build it on the development machine and carry target/release/topo)" | tee "$out/summary.txt"
  exit 2
fi
if ! "$topo" verify --help 2>/dev/null | grep -q -- '--ranks-per-gpu'; then
  echo "gpu-check: every step skipped: $topo has no CUDA backend (a stale build?): rebuild it with cargo build --release" | tee "$out/summary.txt"
  exit 2
fi

# ---------------------------------------------------------------- libraries (no download)
# NVRTC and NCCL from the toolkit or the Python wheels, named explicitly so the report says
# which one ran. An already set TOPO_NVRTC / TOPO_NCCL wins.
site_dirs=$(python3 - 2>/dev/null <<'EOF'
import site, sys
dirs = set(getattr(site, "getsitepackages", lambda: [])())
dirs.add(site.getusersitepackages())
dirs.update(p for p in sys.path if p.endswith("-packages"))
print("\n".join(sorted(d for d in dirs if d)))
EOF
)
find_lib() { # pattern...
  local d f
  for d in /usr/local/cuda/lib64 $site_dirs; do
    for pat in "$@"; do
      f=$(find "$d" -maxdepth 5 -name "$pat" 2>/dev/null | sort -r | head -1)
      [ -n "$f" ] && { echo "$f"; return; }
    done
  done
}
[ -z "${TOPO_NVRTC:-}" ] && TOPO_NVRTC=$(find_lib 'libnvrtc.so.13' 'libnvrtc.so.12')
[ -z "${TOPO_NCCL:-}" ] && TOPO_NCCL=$(find_lib 'libnccl.so.2')
export TOPO_NVRTC TOPO_NCCL
[ -z "$TOPO_NVRTC" ] && unset TOPO_NVRTC
# NVRTC loads its builtins library by name from its own folder's neighbours.
[ -n "${TOPO_NVRTC:-}" ] && export LD_LIBRARY_PATH="$(dirname "$TOPO_NVRTC")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -z "$TOPO_NCCL" ] && unset TOPO_NCCL
# Ranks that share a GPU need a hardware queue each, plus one for the default stream; the
# driver gives 8 unless told (topo refuses 8 ranks per GPU without this).
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
# Each run compiles its kernel into this cache once (XDG_CACHE_HOME is honoured by topo).
export XDG_CACHE_HOME="$out/cache"

{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  echo "topo: $topo ($("$topo" --version 2>&1))"
  echo "TOPO_NVRTC=${TOPO_NVRTC:-<not found>}"
  echo "TOPO_NCCL=${TOPO_NCCL:-<not found>}"
  timeout 30 nvidia-smi 2>&1 | head -40
  timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv 2>&1
  timeout 30 nvidia-smi topo -m 2>&1
  nproc; free -g
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  ldconfig -p 2>/dev/null | grep -E 'libcuda\.|libnvidia-ml|libnvrtc|libnccl' | head -20
} >"$out/env.txt" 2>&1
timeout 30 nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1
timeout 30 nvidia-smi topo -m >"$out/nvidia-smi-topo-m.txt" 2>&1
ngpu=$(timeout 30 nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
[ "$ngpu" -ge 1 ] || ngpu=1
log "GPUs: $ngpu; nvrtc: ${TOPO_NVRTC:-none}; nccl: ${TOPO_NCCL:-none}"

# ---------------------------------------------------------------- steps
# step NAME TIMEOUT NEED CMD...: run CMD under `timeout`, stdout to NAME.out (or $STEP_OUT),
# stderr to NAME.err, one line in the summary. NEED is none, gpu or torch: a step whose need
# is not met is listed as skipped with the reason, so a run without a GPU still says why.
step() {
  local name=$1 to=$2 need=$3; shift 3
  local why=""
  case $need in
    gpu) why=$no_gpu ;;
    torch) why=$no_torch ;;
  esac
  if [ -n "$why" ]; then
    printf '%s\tskipped\t-\t%s\n' "$name" "$why" >>"$summary"
    echo "[$(elapsed)s] $name: skipped ($why)" >>"$out/log.txt"
    return
  fi
  if [ "$(elapsed)" -ge "$budget" ]; then
    printf '%s\tskipped\t-\ttime budget of %ss spent\n' "$name" "$budget" >>"$summary"
    log "$name: skipped (time budget spent)"
    return
  fi
  local t0 rc
  t0=$(date +%s)
  timeout --kill-after=5 "$to" "$@" >"${STEP_OUT:-$out/$name.out}" 2>"$out/$name.err"
  rc=$?
  [ "$rc" -eq 124 ] && echo "timed out after ${to}s" >>"$out/$name.err"
  printf '%s\t%s\t%ss\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" "${*:2}" >>"$summary"
  log "$name: rc $rc ($(($(date +%s) - t0)) s)"
}

# run NAME ARGS...: one topo verify --backend cuda (JSON to NAME.json), bounded to 60 s.
run() {
  local name=$1; shift
  STEP_OUT="$out/$name.json" step "$name" 60 gpu "$topo" verify --backend cuda --timeout 20 --format json "$@"
}

# ---------------------------------------------------------------- what is here
# Whether topo's CUDA backend can run: its own answer (exit 3 and one line naming what is
# missing: libcuda.so.1, a visible GPU, NVRTC).
no_gpu=""
probe_err=$(timeout 120 "$topo" verify --backend cuda --ranks-per-gpu 2 -b 8 -e 8 -n 1 -w 0 2>&1 >/dev/null)
probe_rc=$?
printf '%s\n' "$probe_err" >"$out/probe.err"
if [ "$probe_rc" -ne 0 ]; then
  line=$(printf '%s\n' "$probe_err" | grep -m1 '^error:' | sed 's/^error: //')
  no_gpu="no usable GPU: ${line:-topo verify --backend cuda exited $probe_rc}"
fi
no_torch=""
torch_info=$(timeout 90 python3 -c 'import torch; assert torch.cuda.is_available(), "torch.cuda.is_available() is False"; print(torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1)
if [ $? -ne 0 ]; then
  no_torch="no PyTorch with CUDA here ($(printf '%s\n' "$torch_info" | tail -1 | cut -c1-80))"
fi
log "cuda backend: ${no_gpu:-ready}; pytorch: ${no_torch:-$torch_info}"

# ---------------------------------------------------------------- 1. live discovery
# These run everywhere (a machine without GPUs is a valid model); on the GPU box they are
# the fixture: show/plan/xml of the live machine and its snapshot folder.
step show 60 none "$topo" show
step plan 60 none "$topo" plan
STEP_OUT="$out/topo.xml" step xml 60 none "$topo" xml
rm -rf "$out/snapshot"
step snapshot 60 none "$topo" snapshot -o "$out/snapshot"
step snapshot-replay 60 none "$topo" show --from "$out/snapshot"

# NCCL's own topology of the same machine: a one-rank communicator on GPU 0 (world size 1,
# file:// rendezvous, no network needed) with NCCL_TOPO_DUMP_FILE, and its INFO log.
cat >"$out/nccl-dump.py" <<'PYEOF'
import os, sys, tempfile
import torch, torch.distributed as dist
store = os.path.join(tempfile.mkdtemp(), "store")
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1)
t = torch.ones(1 << 20, device="cuda:0")
dist.all_reduce(t)
torch.cuda.synchronize()
dist.destroy_process_group()
print("nccl", ".".join(map(str, torch.cuda.nccl.version())), "torch", torch.__version__)
PYEOF
NCCL_TOPO_DUMP_FILE="$out/nccl-topo.xml" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV,TUNING \
  STEP_OUT="$out/nccl-init.log" step nccl-topo-dump 90 torch python3 "$out/nccl-dump.py"
if [ -s "$out/topo.xml" ] && [ -s "$out/nccl-topo.xml" ]; then
  python3 - "$out/topo.xml" "$out/nccl-topo.xml" >"$out/xml-compare.txt" 2>&1 <<'PYEOF'
import sys, collections, xml.etree.ElementTree as ET
def facts(path):
    root = ET.parse(path).getroot()
    tags = collections.Counter(e.tag for e in root.iter())
    gpus = sorted((e.get("dev"), e.get("sm"), e.get("rank")) for e in root.iter("gpu"))
    pcis = sorted((e.get("busid"), e.get("link_speed"), e.get("link_width")) for e in root.iter("pci"))
    nvl = sorted((e.get("target"), e.get("count")) for e in root.iter("nvlink"))
    return tags, gpus, pcis, nvl
a, b = facts(sys.argv[1]), facts(sys.argv[2])
print("element counts (topo / nccl):")
for t in sorted(set(a[0]) | set(b[0])):
    mark = "" if a[0][t] == b[0][t] else "   <- differs"
    print(f"  {t:10} {a[0][t]:4} {b[0][t]:4}{mark}")
for what, x, y in (("gpu (dev, sm, rank)", a[1], b[1]), ("pci (busid, speed, width)", a[2], b[2]), ("nvlink (target, count)", a[3], b[3])):
    print(f"{what}: {'same' if x == y else 'DIFFERENT'}")
    if x != y:
        print("  topo:", x)
        print("  nccl:", y)
PYEOF
  log "xml compare: $(grep -c differs "$out/xml-compare.txt") element kinds differ (xml-compare.txt)"
fi
# NCCL's dump and log read back by topo: the same machine through NCCL's eyes.
if [ -s "$out/nccl-topo.xml" ]; then
  step show-nccl-xml 60 none "$topo" show --from "$out/nccl-topo.xml"
  step plan-nccl-xml 60 none "$topo" plan --from "$out/nccl-topo.xml"
fi

# ---------------------------------------------------------------- 1b. live diagnose
# Which checks ran on the live machine and what they found; a healthy box exits 0.
step diagnose 60 none "$topo" diagnose
STEP_OUT="$out/diagnose.json" step diagnose-json 60 none "$topo" diagnose --format json
if [ -s "$out/nccl-init.log" ]; then
  step diagnose-nccl-log 60 none "$topo" diagnose --nccl-log "$out/nccl-init.log"
fi

# ---------------------------------------------------------------- 2. the headline figure
# Ring Simple AllReduce at 256 MB with K ranks on the GPU, the copy ceiling measured in the
# same run (the byte arithmetic is in the summary).
for k in 2 4 8; do
  run "perf-allreduce-simple-k$k" --ranks-per-gpu "$k" --collective allreduce --algo ring \
    --proto simple -b 256M -e 256M -n 20 -w 5 -c 1 --copy-ceiling
done

# ---------------------------------------------------------------- 3. processes
# Two ranks as two processes on the one GPU: cuMem fds over the rendezvous socket
# (P2P/CUMEM), then legacy IPC handles, then pinned host memory (SHM).
run "procs-cumem-k2" --launch processes --ranks 2 --ranks-per-gpu 2 --collective all \
  -b 8 -e 16M -f 8 -n 2 -w 1
TOPO_CUDA_TRANSPORT=ipc run "procs-ipc-k2" --launch processes --ranks 2 --ranks-per-gpu 2 \
  --collective allreduce,allgather -b 8 -e 16M -f 8 -n 2 -w 1
TOPO_CUDA_TRANSPORT=shm run "procs-shm-k2" --launch processes --ranks 2 --ranks-per-gpu 2 \
  --collective allreduce -b 8 -e 16M -f 8 -n 2 -w 1
run "procs-perf-k2" --launch processes --ranks 2 --ranks-per-gpu 2 --collective allreduce \
  --algo ring --proto simple -b 256M -e 256M -n 10 -w 3

# ---------------------------------------------------------------- 4. correctness sweep
types="float half bfloat16 double int32 int64 uint8"
# Warm the kernel cache: one tiny run per type (sum) and per operator (float), in parallel,
# so NVRTC compiles them at once instead of one after another.
if [ -z "$no_gpu" ]; then
  log "warming the kernel cache"
  for d in $types; do
    timeout 120 "$topo" verify --backend cuda --ranks-per-gpu 2 -b 8 -e 8 -n 1 -w 0 -d "$d" \
      >/dev/null 2>"$out/warm-$d.err" &
  done
  for o in prod min max avg; do
    timeout 120 "$topo" verify --backend cuda --ranks-per-gpu 2 -b 8 -e 8 -n 1 -w 0 -o "$o" \
      >/dev/null 2>"$out/warm-$o.err" &
  done
  wait
  log "kernel cache warm"
fi
# Every collective x protocol x type, 2/4/8 ranks on the GPU, 8 B .. 1 MiB by 8x.
for k in 2 4 8; do
  for p in simple ll ll128; do
    for d in $types; do
      run "check-k$k-$p-$d" --ranks-per-gpu "$k" --collective all --proto "$p" -d "$d" \
        -b 8 -e 1M -f 8 -n 2 -w 1
    done
  done
done
for o in prod min max avg; do
  run "check-op-$o" --ranks-per-gpu 4 --collective allreduce,reducescatter,reduce -o "$o" \
    -b 8 -e 1M -f 16 -n 2 -w 1
done
run "check-tree-k4" --ranks-per-gpu 4 --collective allreduce --algo tree -b 8 -e 16M -f 8 -n 2 -w 1
# SHM fallback cost on one GPU (FIFOs in pinned host memory), threads.
TOPO_CUDA_TRANSPORT=shm run "perf-allreduce-shm-k2" --ranks-per-gpu 2 --collective allreduce \
  --algo ring --proto simple -b 64M -e 64M -n 5 -w 2

# ---------------------------------------------------------------- 5. against NCCL
if [ "$ngpu" -ge 2 ]; then
  run "nccl-allreduce-g$ngpu" --collective allreduce --compare nccl -b 8 -e 1G -f 4 -n 10 -w 3
  run "nccl-all-g$ngpu" --collective all --compare nccl -b 1M -e 256M -f 16 -n 5 -w 2
  run "procs-g$ngpu" --launch processes --collective allreduce -b 1M -e 1G -f 8 -n 5 -w 2
else
  printf '%s\tskipped\t-\t%s\n' "nccl-compare" "${no_gpu:-one GPU: NCCL refuses two ranks on one GPU; the copy ceiling is the reference}" >>"$summary"
fi

# ---------------------------------------------------------------- summary (last)
python3 - "$out" >"$out/summary.txt" 2>&1 <<'PYEOF'
import json, os, sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "summary.tsv")) if l.strip()]
ran = [r for r in rows if r[1] != "skipped"]
ok = sum(1 for r in ran if r[1] == "0")
print(f"# gpu-check: {ok}/{len(ran)} steps exited 0, {len(rows) - len(ran)} skipped")
print(f"{'step':26} {'rc':>7} {'time':>5} {'wrong':>6} {'busbw':>7}  note")
skipped = {}
for name, rc, t, *rest in rows:
    if rc == "skipped":
        skipped.setdefault(rest[-1] if rest else "", []).append(name)
        continue
    wrong, bw, note = "-", "-", ""
    try:
        j = json.load(open(os.path.join(out, name + ".json")))
        if not isinstance(j, dict) or "results" not in j:
            raise ValueError("not a verify document")
        wrong = str(j.get("wrong_total"))
        bw = f"{max((r['busbw_gbps'] for r in j['results']), default=0):.1f}"
        note = f"{j.get('transport')} {j.get('launch')}"
        n = j.get("note") or ""
        if "via " in n:
            note += " via " + n.split("via ")[1].split(";")[0]
        for c in j.get("nccl", []):
            note += f"; nccl {c['collective']} {c['bytes']}B {c['busbw_gbps']:.1f} GB/s ratio {c['ratio']:.2f}"
    except Exception:
        try:
            lines = open(os.path.join(out, name + ".err")).read().strip().splitlines()
            errs = [l for l in lines if l.startswith("error:") or "timed out" in l]
            note = ((errs or lines or [""])[-1])[:100]
        except Exception:
            note = rest[-1][:100] if rest else ""
    print(f"{name:26} {rc:>7} {t:>5} {wrong:>6} {bw:>7}  {note}")
for why, names in skipped.items():
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    print(f"skipped ({why}): {shown}")
# Done means (issue 12): ring Simple AllReduce at 256 MB moves data at >= 80% of the copy
# ceiling. With K ranks on one GPU, per rank and per byte of busbw the kernels read 1.5 and
# write 1.5 bytes of HBM (reduce-scatter: own chunk + received slot read, peer slot written;
# all-gather: slot read, output + peer slot written; busbw counts 2(K-1)/K of the buffer), so
# the GPU's HBM moves 3 x K x busbw bytes/s. A device-to-device copy of C bytes/s moves 2 x C.
print()
why = {r[0]: r[-1] for r in rows if r[1] == "skipped"}
for k in (2, 4, 8):
    name = f"perf-allreduce-simple-k{k}"
    if name in why:
        print(f"K={k}: not measured: {name} skipped ({why[name]})")
        continue
    try:
        j = json.load(open(os.path.join(out, name + ".json")))
        bw = j["results"][0]["busbw_gbps"]
        n = j.get("note") or ""
        cp = float(n.split("cuMemcpyDtoD ")[1].split(" GB/s")[0])
        kern = float(n.split("topo_copy ")[1].split(" GB/s")[0])
        traffic, ceiling = 3 * k * bw, 2 * cp
        verdict = "PASS" if traffic >= 0.8 * ceiling else "FAIL"
        print(f"K={k}: busbw {bw:.1f} GB/s -> HBM 3*{k}*{bw:.1f} = {traffic:.0f} GB/s; "
              f"copy ceiling 2*{cp:.0f} = {ceiling:.0f} GB/s (topo_copy {kern:.0f}); "
              f"ratio {traffic / ceiling:.2f}, target >= 0.80: {verdict}")
    except Exception as e:
        print(f"K={k}: no figure ({name}: {type(e).__name__}: {e})")
cmp = os.path.join(out, "xml-compare.txt")
if os.path.exists(cmp):
    print()
    print("topo xml vs NCCL_TOPO_DUMP_FILE:")
    print(open(cmp).read().rstrip())
PYEOF
cat "$out/summary.txt"
log "done"
exit 0
