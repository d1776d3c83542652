#!/usr/bin/env bash
# Byte-identity check for the scale work: writes the outputs of one build for every profile
# (plan and show, --nodes 1 2 5, JSON and text), every fixture XML (plan and show, --from) and the
# 1,024-node plan JSON of hgx-h200 and gb200-nvl72, the plan's exports and forced algorithms,
# the diagnosis of every NCCL log fixture (and ../shared/realdata's, where present), and plans
# with faults on copies (one host, several, every host; each kind of part) into a folder, each
# with its stderr and exit status, so that two builds' folders can be compared with diff -r.
#
#   bench/scale/outputs.sh BIN DIR            # write BIN's outputs into DIR
#   bench/scale/outputs.sh BIN DIR REF_DIR    # and diff them against REF_DIR (exit 1 if any differ)
#
# Example: bench/scale/outputs.sh /tmp/topo-main /tmp/ref
#          bench/scale/outputs.sh target/release/topo /tmp/new /tmp/ref
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:?usage: bench/scale/outputs.sh BIN DIR [REF_DIR]}
dir=${2:?usage: bench/scale/outputs.sh BIN DIR [REF_DIR]}
ref=${3:-}
mkdir -p "$dir"
# Run the build as `topo` so that messages naming the binary agree between builds.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$bin" "$work/topo"
bin=$work/topo

# one NAME ARGS...: stdout, stderr and exit status of `BIN ARGS...` under DIR/NAME.*
one() {
  local name=$1
  shift
  local rc=0
  "$bin" "$@" >"$dir/$name.out" 2>"$dir/$name.err" || rc=$?
  echo "$rc" >"$dir/$name.rc"
}

for p in profiles/*.yaml; do
  prof=$(basename "$p" .yaml)
  for n in 1 2 5; do
    for cmd in plan show; do
      one "$cmd-$prof-$n-json" "$cmd" --profile "$prof" --nodes "$n" --format json
      one "$cmd-$prof-$n-text" "$cmd" --profile "$prof" --nodes "$n" --color never
    done
  done
done
while IFS= read -r f; do
  name=$(echo "$f" | tr '/' '_')
  one "plan-xml-$name" plan --from "$f" --color never
  one "show-xml-$name" show --from "$f" --color never
done < <(find fixtures -name '*.xml' | sort)
for prof in hgx-h200 gb200-nvl72; do
  one "plan-$prof-1024-json" plan --profile "$prof" --nodes 1024 --format json
done
# The exports, --algo/--proto in both of NCCL_ALGO's grammars and refused, --nic-speed over and
# beside a stated speed, and the NCCL log reader with the diagnosis over every log at hand.
for prof in dgx-h100 hgx-h200 gb200-nvl72; do
  for n in 1 16; do
    one "plan-$prof-$n-nccl-graph" plan --profile "$prof" --nodes "$n" --format nccl-graph
    one "plan-$prof-$n-tuner-csv" plan --profile "$prof" --nodes "$n" --format tuner-csv
  done
done
one plan-algo-ring-simple plan --profile dgx-h100 --nodes 2 --algo ring --proto simple --color never
one plan-algo-not-tree plan --profile dgx-h100 --nodes 2 --algo '^tree' --proto '^ll128' --color never
one plan-algo-per-function plan --profile dgx-h100 --nodes 2 --algo 'ring;allreduce:nvls,tree' --color never
one plan-algo-bad plan --profile dgx-h100 --algo bogus --color never
one plan-proto-bad plan --profile dgx-h100 --proto 'll;bogus:ll' --color never
one plan-algo-2.21 plan --profile dgx-h100 --nodes 2 --algo 'ring,bogus' --nccl-version 2.21 --color never
one plan-algo-none plan --profile dgx-h100 --algo collnetdirect --color never
one plan-nic-speed-over plan --profile dgx-h100 --nodes 2 --nic-speed 200 --color never
one plan-nic-speed-same plan --profile dgx-h100 --nodes 2 --nic-speed 400 --format json
while IFS= read -r f; do
  name=$(basename "$f")
  one "diagnose-log-$name" diagnose --nccl-log "$f" --color never
  one "diagnose-log-$name-json" diagnose --nccl-log "$f" --format json
done < <(find fixtures/logs ../shared/realdata/nccl-logs -name '*.log' 2>/dev/null | sort)
# Faults on copies (issue 43): one host changed, a few, every host, each kind of part.
every=()
for h in 0 1 2 3 4 5 6 7; do every+=(--without "nic:mlx5_1@$h"); done
faults=(
  "--without nic:mlx5_7" "--without nic:mlx5_2@3" "--without gpu:5@1" "--without nvlink:GPU3@2"
  "--without gpu:0 --without gpu:7@6" "--degrade nvlink:GPU1=6@5"
  "--degrade pcie:0000:07:00.0=gen3x8@7" "--without nic:mlx5_0@0 --degrade nvlink:GPU2=4@7"
  "${every[*]}"
)
for i in "${!faults[@]}"; do
  read -ra f <<<"${faults[$i]}"
  for prof in dgx-a100 hgx-h200 gb200-nvl72; do
    one "plan-fault$i-$prof-8-json" plan --profile "$prof" --nodes 8 --format json "${f[@]}"
    one "plan-fault$i-$prof-8-text" plan --profile "$prof" --nodes 8 --color never "${f[@]}"
  done
  one "plan-fault$i-dgx-a100-256-json" plan --profile dgx-a100 --nodes 256 --format json "${f[@]}"
done

if [[ -n "$ref" ]]; then
  if diff -rq "$ref" "$dir"; then
    echo "identical: $(find "$dir" -type f | wc -l) files"
  else
    echo "outputs differ from $ref" >&2
    exit 1
  fi
fi
