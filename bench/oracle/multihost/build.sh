#!/usr/bin/env bash
# Build the multi-host nccl-oracle (--node-xml per node): stages the shared build.sh
# ($NCCL_ORACLE_DIR/build.sh, default /work/shared/tools/nccl-oracle) next to a copy of this
# folder's src/ in the out dir and runs it there with the same arguments, so no NCCL source
# and no copy of the shared build script is kept here.
#
#   bench/oracle/multihost/build.sh --tag v2.28.9-1 --mirror BARE_GIT_DIR --out DIR
#
# DIR/cuda-include (or DIR/wheels) is reused when present, as by the shared build.sh.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SHARED="${NCCL_ORACLE_DIR:-/work/shared/tools/nccl-oracle}"
[ -f "$SHARED/build.sh" ] || { echo "no build.sh in $SHARED (set NCCL_ORACLE_DIR)" >&2; exit 1; }
OUT=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[$i]}" = "--out" ] && OUT="${args[$((i + 1))]:-}"
done
[ -n "$OUT" ] || { echo "give --out DIR" >&2; exit 1; }
mkdir -p "$OUT"
STAGE="$(cd "$OUT" && pwd)/stage"
rm -rf "$STAGE"; mkdir -p "$STAGE/src"
cp "$SHARED/build.sh" "$STAGE/build.sh"
cp "$HERE"/src/*.cc "$STAGE/src/"
exec bash "$STAGE/build.sh" "$@"
