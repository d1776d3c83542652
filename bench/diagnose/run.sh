#!/usr/bin/env bash
# Times reading a 100 MB, 512-rank NCCL_DEBUG=INFO log (issue 9's target: under 2 s, release
# build): `topo diagnose --nccl-log` (read + parse + every log check) and `topo show --from`
# (read + parse + the topology its Init lines imply). Writes bench/diagnose/results-<host>.md.
#
#   bench/diagnose/run.sh                      # builds target/release/topo first
#   TOPO_BIN=/path/to/topo SIZE_MB=100 RUNS=5 bench/diagnose/run.sh
#
# Needs hyperfine (installed with apt-get when missing) and python3 for the generator.
set -euo pipefail
cd "$(dirname "$0")/../.."

source bench/common.sh
need hyperfine hyperfine

topo_bin
RUNS="${RUNS:-5}"
SIZE_MB="${SIZE_MB:-100}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log="$tmp/job-512.log"
SIZE_MB="$SIZE_MB" python3 bench/diagnose/gen_log.py >"$log"
bytes=$(stat -c %s "$log")
lines=$(wc -l <"$log")

# Refuse to time a failing command.
"$TOPO_BIN" diagnose --nccl-log "$log" --format json -o /dev/null
"$TOPO_BIN" show --from "$log" -o /dev/null

hyperfine --warmup 1 --min-runs "$RUNS" -N --style basic --export-markdown "$tmp/t.md" --export-json "$tmp/t.json" \
  -n "topo diagnose --nccl-log (${SIZE_MB} MB)" "$TOPO_BIN diagnose --nccl-log $log --format json -o /dev/null" \
  -n "topo show --from (${SIZE_MB} MB)" "$TOPO_BIN show --from $log -o /dev/null" \
  -n "wc -l (reading the file once)" "wc -l $log" >&2

host=$(cat /proc/sys/kernel/hostname)
out="bench/diagnose/results-${host}.md"
{
  echo "# NCCL log reading benchmark: $host"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- topo: $("$TOPO_BIN" --version) ($(git rev-parse --short HEAD 2>/dev/null || echo unknown)), release build"
  echo "- input: \`gen_log.py\`, 512 ranks (64 hosts x 8 GPUs), $bytes bytes, $lines lines"
  echo "- hyperfine: --warmup 1 --min-runs $RUNS -N; output to /dev/null"
  echo "- target (issue 9): parsing a 100 MB log of 512 ranks in under 2 s"
  echo
  cat "$tmp/t.md"
  echo
  echo "CPU time (the machine is shared, so wall time includes waiting for a core):"
  echo
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print("| Command | user [s] | system [s] | user+system [s] |")
print("|:---|---:|---:|---:|")
for r in d["results"]:
    print("| `%s` | %.3f | %.3f | %.3f |" % (r["command"], r["user"], r["system"], r["user"] + r["system"]))' "$tmp/t.json"
} >"$out"
echo "wrote $out" >&2
