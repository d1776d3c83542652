#!/usr/bin/env bash
# The on-GPU check of the CUDA backend (issue 12), unattended, within 5 minutes on one GPU.
#
#   scripts/gpu-check.sh OUTDIR
#
# Writes into OUTDIR: env.txt (nvidia-smi, driver, libraries found), show.txt, plan.txt, topo.xml,
# snapshot.tar.gz (live discovery), nccl-topo.xml (NCCL_TOPO_DUMP_FILE, when NCCL runs),
# one verify-*.json/.txt/.err per topo verify run, and summary.txt (also printed last).
# It downloads nothing and needs no network: the machine needs the NVIDIA driver, NVRTC (the
# CUDA toolkit or the nvidia-cuda-nvrtc wheel) and, for --compare nccl, libnccl.so.2.
#
# The topo binary: $TOPO_BIN, else target/release/topo, else target/debug/topo, else it is
# built with `cargo build --release --offline` (which needs the crates vendored: build here
# and carry the binary instead). From a development machine with the `run` device tool:
#
#   cargo build --release                    # on the development machine
#   run(command="bash scripts/gpu-check.sh \"$OUT\"", carry=["target/release/topo"], timeout_s=420)
#
# then copy the files that come back under bench/cuda/results/<date>-<gpu>/ and commit them.
# Each run is bounded (timeout 60 s, --timeout 20 inside); the whole script stops starting
# new runs after BUDGET_S seconds (default 270) and says what it skipped.
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUTDIR}
mkdir -p "$out"
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
  echo "no topo binary: build it on the development machine and carry target/release/topo" | tee "$out/summary.txt"
  exit 2
fi
if ! "$topo" verify --help 2>/dev/null | grep -q -- '--ranks-per-gpu'; then
  echo "$topo has no CUDA backend (a stale build?): rebuild it with cargo build --release" | tee "$out/summary.txt"
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
[ -z "$TOPO_NCCL" ] && unset TOPO_NCCL
# Each run compiles its kernel into this cache once (XDG_CACHE_HOME is honoured by topo).
export XDG_CACHE_HOME="$out/cache"

{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  echo "topo: $topo ($("$topo" --version 2>&1))"
  echo "TOPO_NVRTC=${TOPO_NVRTC:-<not found>}"
  echo "TOPO_NCCL=${TOPO_NCCL:-<not found>}"
  nvidia-smi 2>&1 | head -40
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv 2>&1
  nvidia-smi topo -m 2>&1
  nproc; free -g
} >"$out/env.txt" 2>&1
ngpu=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
[ "$ngpu" -ge 1 ] || ngpu=1
log "GPUs: $ngpu; nvrtc: ${TOPO_NVRTC:-none}; nccl: ${TOPO_NCCL:-none}"

# ---------------------------------------------------------------- live discovery
"$topo" show >"$out/show.txt" 2>"$out/show.err"; log "topo show: rc $?"
"$topo" plan >"$out/plan.txt" 2>"$out/plan.err"; log "topo plan: rc $?"
"$topo" xml >"$out/topo.xml" 2>"$out/xml.err"; log "topo xml: rc $?"
"$topo" snapshot -o "$out/snapshot.tar.gz" >"$out/snapshot.txt" 2>&1; log "topo snapshot: rc $?"

# ---------------------------------------------------------------- verify runs
# run NAME ARGS...: one topo verify --backend cuda, JSON to NAME.json, its rc in the summary.
run() {
  local name=$1; shift
  if [ "$(elapsed)" -ge "$budget" ]; then
    printf '%s\tskipped\t-\ttime budget of %ss spent\n' "$name" "$budget" >>"$summary"
    return
  fi
  local t0=$(date +%s)
  timeout 60 "$topo" verify --backend cuda --timeout 20 --format json "$@" \
    >"$out/$name.json" 2>"$out/$name.err"
  local rc=$?
  printf '%s\t%s\t%ss\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" "$*" >>"$summary"
  log "$name: rc $rc ($(($(date +%s) - t0)) s)"
}

types="float half bfloat16 double int32 int64 uint8"
# Warm the kernel cache: one tiny run per type (sum) and per operator (float), in parallel,
# so NVRTC compiles them at once instead of one after another.
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

# 1. The headline: ring Simple AllReduce at 256 MB against the copy ceiling, 2/4/8 ranks.
for k in 2 4 8; do
  run "perf-allreduce-simple-k$k" --ranks-per-gpu "$k" --collective allreduce --algo ring \
    --proto simple -b 256M -e 256M -n 20 -w 5 -c 1 --copy-ceiling
done

# 2. Correctness: every collective x protocol x type, 2/4/8 ranks on the GPU, small sizes
#    (odd counts included: 8 B .. 1 MiB by 8x, plus 3 B-aligned sizes through -f).
for k in 2 4 8; do
  for p in simple ll ll128; do
    for d in $types; do
      run "check-k$k-$p-$d" --ranks-per-gpu "$k" --collective all --proto "$p" -d "$d" \
        -b 8 -e 1M -f 8 -n 2 -w 1
    done
  done
done
# Operators other than sum, and trees.
for o in prod min max avg; do
  run "check-op-$o" --ranks-per-gpu 4 --collective allreduce,reducescatter,reduce -o "$o" \
    -b 8 -e 1M -f 16 -n 2 -w 1
done
run "check-tree-k4" --ranks-per-gpu 4 --collective allreduce --algo tree -b 8 -e 16M -f 8 -n 2 -w 1
# SHM fallback cost on one GPU (FIFOs in pinned host memory).
export TOPO_CUDA_TRANSPORT=shm
run "perf-allreduce-shm-k2" --ranks-per-gpu 2 --collective allreduce \
  --algo ring --proto simple -b 64M -e 64M -n 5 -w 2
unset TOPO_CUDA_TRANSPORT

# 3. Across GPUs and against NCCL (one rank per GPU); on one GPU a one-rank NCCL run still
#    initialises NCCL, which dumps its topology for the fixture.
export NCCL_TOPO_DUMP_FILE="$out/nccl-topo.xml"
if [ "$ngpu" -ge 2 ]; then
  run "nccl-allreduce-g$ngpu" --collective allreduce --compare nccl -b 8 -e 1G -f 4 -n 10 -w 3
  run "nccl-all-g$ngpu" --collective all --compare nccl -b 1M -e 256M -f 16 -n 5 -w 2
else
  run "nccl-g1" --ranks 1 --collective allreduce --compare nccl -b 1M -e 64M -f 8 -n 5 -w 2
fi
unset NCCL_TOPO_DUMP_FILE

# ---------------------------------------------------------------- summary (last)
python3 - "$out" >"$out/summary.txt" 2>&1 <<'EOF'
import json, os, sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "summary.tsv")) if l.strip()]
ok = sum(1 for r in rows if r[1] == "0")
print(f"# gpu-check: {ok}/{len(rows)} runs exited 0")
print(f"{'run':34} {'rc':>7} {'time':>5} {'wrong':>7} {'busbw':>8}  note")
for name, rc, t, *rest in rows:
    wrong, bw, note = "-", "-", ""
    try:
        j = json.load(open(os.path.join(out, name + ".json")))
        wrong = str(j.get("wrong_total"))
        bw = f"{max((r['busbw_gbps'] for r in j['results']), default=0):.1f}"
        n = j.get("note") or ""
        if "copy ceiling" in n:
            note = n[n.index("copy ceiling"):].split(";")[0]
        for c in j.get("nccl", []):
            note += f" nccl {c['collective']} {c['bytes']}B {c['busbw_gbps']:.1f} GB/s ratio {c['ratio']:.2f};"
    except Exception:
        try:
            lines = open(os.path.join(out, name + ".err")).read().strip().splitlines()
            errs = [l for l in lines if l.startswith("error:")]
            note = (errs or lines)[-1][:110]
        except Exception:
            note = rest[-1] if rest else ""
    print(f"{name:34} {rc:>7} {t:>5} {wrong:>7} {bw:>8}  {note}")
# The done-means arithmetic for ring Simple AllReduce with K ranks on one GPU: per rank and
# per byte of busbw, the kernels read 2 and write 1 (reduce-scatter: slot + input -> peer
# slot; all-gather: slot -> output + peer slot), so HBM moves 3 x K x busbw bytes/s; a copy
# moves 2 x copy (read + write).
print()
for k in (2, 4, 8):
    try:
        j = json.load(open(os.path.join(out, f"perf-allreduce-simple-k{k}.json")))
        bw = j["results"][0]["busbw_gbps"]
        n = j.get("note") or ""
        cp = float(n.split("cuMemcpyDtoD ")[1].split(" GB/s")[0])
        traffic = 3 * k * bw
        print(f"K={k}: busbw {bw:.1f} GB/s -> HBM traffic 3*{k}*{bw:.1f} = {traffic:.0f} GB/s; "
              f"copy ceiling 2*{cp:.0f} = {2*cp:.0f} GB/s; ratio {traffic/(2*cp):.2f} (target >= 0.80)")
    except Exception as e:
        print(f"K={k}: no figure ({e})")
EOF
cat "$out/summary.txt"
log "done"
