#!/usr/bin/env bash
# bench/verify/run.sh - topo's host runtime against Open MPI, side by side in one run.
#
#   bash bench/verify/run.sh              # 3 repeats, about 3-5 minutes on a quiet 2-vCPU box
#   REPEATS=1 MAXBYTES=64M bash bench/verify/run.sh   # quicker
#   UNTIL_BOTH=1 MAX_REPEATS=8 MINBYTES=1M MAXBYTES=4M bash bench/verify/run.sh
#       # repeat (up to MAX_REPEATS) until both vCPU placements, near and far, have a quiet
#       # repeat of ours and of Open MPI tuned: both figures from the same run
#
# The placement (whether the host runs the two vCPUs on cores that share a cache) is the
# hypervisor's, not something taskset inside the guest can choose: ranks are pinned to cpu0
# and cpu1 and each variant's c2c latency before and after classifies its repeat (near < 100
# ns < far); summarize.py reports each placement separately.
#
# Each repeat interleaves, on the same load and vCPU placement (c2c recorded before and after
# each): topo-runtime (2 processes over the memfd arena, DIRECT single-copy AllReduce,
# pinned to cpu0/cpu1), Open MPI 4.1 tuned (glibc THP/keep settings) and default
# (vader/CMA, both --mca pml ob1 --mca btl self,vader, ranks bound to cores), and the
# single-copy ceiling probe ar_ceiling. Results: results/<stamp>-*.txt and a summary.
# Needs: cargo, gcc, make, openmpi-bin + libopenmpi-dev (installed with apt-get if missing).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PEERS=${PEERS:-$ROOT/../shared/bench/peers}
[ -d "$PEERS" ] || PEERS=/work/shared/bench/peers
STAMP=${STAMP:-$(date -u +%Y%m%dT%H%M%SZ)}
OUT=${OUT:-$HERE/results}
REPEATS=${REPEATS:-3}
MAXBYTES=${MAXBYTES:-256M}
MINBYTES=${MINBYTES:-8}
UNTIL_BOTH=${UNTIL_BOTH:-0}
MAX_REPEATS=${MAX_REPEATS:-8}
QUIET_PCT=${QUIET_PCT:-15}
QUIET_MAX=${QUIET_MAX:-20}
log() { printf '[verify-bench %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

need=()
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v mpicc >/dev/null || need+=(libopenmpi-dev)
command -v mpirun >/dev/null || need+=(openmpi-bin)
if ((${#need[@]})); then
  log "installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev gcc make >/dev/null
fi
BUILD=$(mktemp -d)
cp "$PEERS"/Makefile "$PEERS"/*.c "$BUILD"/
make -s -C "$BUILD" all
log "building topo-runtime's verify driver (release)"
(cd "$ROOT/crates/topo-runtime" && cargo build --release --features bench --example verify -q)
TARGET=$(cd "$ROOT/crates/topo-runtime" && cargo metadata --format-version 1 --no-deps 2>/dev/null | python3 -c 'import sys,json;print(json.load(sys.stdin)["target_directory"])')
OURS=$TARGET/release/examples/verify
mkdir -p "$OUT"
P="$OUT/$STAMP"

bg_busy() {
  local a b
  a=$(awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
  sleep 0.5
  b=$(awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN{split(a,x," "); split(b,y," "); t=y[2]-x[2]; printf "%d", (t > 0) ? 100*(y[1]-x[1])/t : 0}'
}
wait_quiet() {
  local waited=0 busy
  busy=$(bg_busy)
  while ((busy >= QUIET_PCT && waited < QUIET_MAX)); do
    sleep 1.5
    waited=$((waited + 2))
    busy=$(bg_busy)
  done
  echo "# background CPU busy before start: ${busy}% (waited ${waited}s for < ${QUIET_PCT}%)"
}
c2c() { "$BUILD"/membw -c | sed "s/^# c2c/# c2c $1:/"; }

MPI=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 --mca btl self,vader)
TUNED="glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736:glibc.malloc.hugetlb=1"
{
  echo "# verify bench $STAMP on $(hostname), $(date -u)"
  echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc)"
  echo "# mpirun: $(mpirun --version 2>&1 | head -1)"
  echo "# ours: $OURS ($(cd "$ROOT" && git rev-parse --short HEAD))"
  echo "# THP: enabled=$(cat /sys/kernel/mm/transparent_hugepage/enabled) shmem=$(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled)"
  "$BUILD"/membw -r 5 | tail -12
} >"$P-env.txt" 2>&1
r=0
while :; do
  r=$((r + 1))
  if ((UNTIL_BOTH)); then
    ((r > MAX_REPEATS)) && break
    if ((r > 1)) && [ "$(python3 "$HERE/summarize.py" "$P" --placements)" = "near far" ]; then break; fi
  else
    ((r > REPEATS)) && break
  fi
  log "repeat $r"
  for v in ours ompi-tuned ompi-default ceiling; do
    {
      echo "### repeat $r variant $v"
      wait_quiet
      c2c before
      case $v in
        ours)
          if [ "$MINBYTES" = 8 ]; then
            timeout 300 "$OURS" --ranks 2 --launch processes --pin 1 --in-place 0 -b 8 -e 64K -f 2 -n 2000 -w 50 || echo "# FAILED"
            timeout 300 "$OURS" --ranks 2 --launch processes --pin 1 --in-place 0 -b 128K -e "$MAXBYTES" -f 2 -n 20 -w 3 | grep -v '^#' || echo "# FAILED"
          else
            timeout 300 "$OURS" --ranks 2 --launch processes --pin 1 --in-place 0 -b "$MINBYTES" -e "$MAXBYTES" -f 2 -n 200 -w 10 || echo "# FAILED"
          fi
          ;;
        ompi-tuned)
          (cd "$BUILD" && timeout 300 "${MPI[@]}" -x GLIBC_TUNABLES="$TUNED" ./mpi_coll -o allreduce -b "$MINBYTES" -e "$MAXBYTES" -f 2 -n 2000 -w 5 -T 0.05 -m 3 -p 0 -c 1) || echo "# FAILED"
          ;;
        ompi-default)
          (cd "$BUILD" && timeout 300 "${MPI[@]}" ./mpi_coll -o allreduce -b "$MINBYTES" -e "$MAXBYTES" -f 2 -n 2000 -w 5 -T 0.05 -m 3 -p 0 -c 1) || echo "# FAILED"
          ;;
        ceiling)
          for s in 16777216 67108864 268435456; do
            if (($(numfmt --from=iec "$MAXBYTES") >= s)); then "$BUILD"/ar_ceiling $s 10; fi
          done
          ;;
      esac
      c2c after
    } >>"$P-$v.txt" 2>&1
  done
done
python3 "$HERE/summarize.py" "$P" | tee "$P-summary.txt"
rm -rf "$BUILD"
