#!/usr/bin/env bash
# Differential sweep: random machines through NCCL's own graph code and through topo.
#
#   bench/oracle/run.sh [--seed S] [--count N] [--corpus-count M] [--jobs J] [--no-corpus]
#                       [--nccl-version 2.26|2.27|2.28|2.29|2.30] [--nodes N]
#
# Builds nccl-oracle (../shared/tools/nccl-oracle/build.sh at the release's checked tag, into
# /tmp) unless NCCL_ORACLE names a binary, builds the oracle_sweep example in release, runs
# seeds S..S+N-1 (J processes over consecutive slices) at that release and node count (the
# generator's 1 or 2 unless --nodes), and writes bench/oracle/results-vm.md (for 2.28 on the
# generator's nodes; results-vm-2.XX[-nN].md otherwise). For 2.28 on the generator's nodes it
# also rewrites fixtures/oracle/corpus.jsonl from the first M machines whose graph search takes
# at most CORPUS_MAX_STEPS (default 40000) steps (unless --no-corpus). Needs a mirror of github:NVIDIA/nccl in NCCL_MIRROR
# for the oracle build. WORK (default /tmp/topo-oracle-sweep) keeps each machine's XML and
# the oracle's answer; a rerun reuses an answer whose XML is unchanged, so after a change to
# topo only topo's side runs again (SWEEP_NOTE adds a line to the results; FIRST_COUNT=N makes
# job 0's slice N machines long, to balance jobs when its answers are cached). Run from the
# repository root.
set -euo pipefail
SEED=1; COUNT=1000; CORPUS_COUNT=250; JOBS=2; CORPUS=1; VERSION=2.28; NODES=
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) SEED="$2"; shift 2;;
    --count) COUNT="$2"; shift 2;;
    --corpus-count) CORPUS_COUNT="$2"; shift 2;;
    --jobs) JOBS="$2"; shift 2;;
    --no-corpus) CORPUS=0; shift;;
    --nccl-version) VERSION="$2"; shift 2;;
    --nodes) NODES="$2"; shift 2;;
    -h|--help) sed -n 2,16p "$0"; exit 0;;
    *) echo "unknown argument $1" >&2; exit 1;;
  esac
done
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
case "$VERSION" in
  2.26) TAG=v2.26.6-1;; 2.27) TAG=v2.27.7-1;; 2.28) TAG=v2.28.9-1;;
  2.29) TAG=v2.29.7-1;; 2.30) TAG=v2.30.7-1;;
  *) echo "--nccl-version: the oracle is checked at 2.26 to 2.30, not $VERSION" >&2; exit 2;;
esac
SUFFIX=""
[ "$VERSION" != 2.28 ] && SUFFIX="-$VERSION"
[ -n "$NODES" ] && SUFFIX="$SUFFIX-n$NODES"
# The corpus in fixtures/ is 2.28's on the generator's nodes; --reuse keys answers by XML alone,
# so each release and node count keeps its own work folder.
[ -n "$SUFFIX" ] && CORPUS=0
WORK="${WORK:-${TMPDIR:-/tmp}/topo-oracle-sweep}$SUFFIX"
mkdir -p "$WORK"

if [ -z "${NCCL_ORACLE:-}" ]; then
  TOOL="$ROOT/../shared/tools/nccl-oracle"
  [ -d "$TOOL" ] || TOOL=/work/shared/tools/nccl-oracle
  [ -n "${NCCL_MIRROR:-}" ] || { echo "set NCCL_MIRROR to a mirror of github:NVIDIA/nccl, or NCCL_ORACLE to a built nccl-oracle" >&2; exit 2; }
  "$TOOL/build.sh" --tag "$TAG" --mirror "$NCCL_MIRROR" --out "${TMPDIR:-/tmp}/nccl-oracle-build-$VERSION" >&2
  NCCL_ORACLE="${TMPDIR:-/tmp}/nccl-oracle-build-$VERSION/nccl-oracle"
fi
cargo build --release --features bench --example oracle_sweep >&2
BIN="$ROOT/target/release/examples/oracle_sweep"

start=$(date +%s)
per=$(( (COUNT + JOBS - 1) / JOBS ))
# FIRST_COUNT gives job 0 a slice of its own length (the others share the rest): with job 0's
# answers cached from an earlier run, a longer first slice balances the oracle's work.
first=${FIRST_COUNT:-$per}
[ "$JOBS" -gt 1 ] && [ -n "${FIRST_COUNT:-}" ] && per=$(( (COUNT - first + JOBS - 2) / (JOBS - 1) ))
pids=()
for j in $(seq 0 $((JOBS - 1))); do
  if [ "$j" = 0 ]; then s=$SEED; n=$first; else s=$(( SEED + first + (j - 1) * per )); n=$per; fi
  [ $(( s + n )) -gt $(( SEED + COUNT )) ] && n=$(( SEED + COUNT - s ))
  [ "$n" -le 0 ] && continue
  args=(--oracle "$NCCL_ORACLE" --seed "$s" --count "$n" --work "$WORK/$j" --report "$WORK/report-$j.txt" --reuse --nccl-version "$VERSION")
  [ -n "$NODES" ] && args+=(--nodes "$NODES")
  if [ "$j" = 0 ] && [ "$CORPUS" = 1 ]; then args+=(--corpus "$WORK/corpus.jsonl" --corpus-count "$CORPUS_COUNT" --corpus-max-steps "${CORPUS_MAX_STEPS:-40000}"); fi
  "$BIN" "${args[@]}" > "$WORK/log-$j.txt" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
secs=$(( $(date +%s) - start ))
[ "$CORPUS" = 1 ] && cp "$WORK/corpus.jsonl" fixtures/oracle/corpus.jsonl

NODES_SHOWN="${NODES:-1 or 2 (the generator)}"
python3 - "$WORK" "$JOBS" "$secs" "$SEED" "$COUNT" "$TAG" "$NODES_SHOWN" > "bench/oracle/results-vm$SUFFIX.md" <<'PY'
import glob, os, re, subprocess, sys, datetime, platform
work, jobs, secs, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
tag, nodes = sys.argv[6], sys.argv[7]
stops = []
fields = {}
gen = cmp_ = diff = oref = tref = 0
kinds = {}
refused = []
for j in range(jobs):
    p = os.path.join(work, "report-%d.txt" % j)
    if not os.path.exists(p):
        continue
    for line in open(p):
        m = re.match(r"seeds \S+: (\d+) generated, (\d+) compared \((\d+) with a difference\), oracle refused (\d+), topo refused (\d+)", line)
        if m:
            a = list(map(int, m.groups())); gen += a[0]; cmp_ += a[1]; diff += a[2]; oref += a[3]; tref += a[4]
        m = re.match(r"agreement: (.*)", line)
        if m:
            for part in m.group(1).split(", "):
                name, frac = part.rsplit(" ", 1)
                e, n = map(int, frac.split("/"))
                x = fields.setdefault(name, [0, 0]); x[0] += e; x[1] += n
        if line.startswith("  where NCCL stops") or line.startswith("topo says NCCL stops"):
            stops.append(line.strip())
            continue
        m = re.match(r"  (.+): (\d+) \[(.*)\]", line)
        if m:
            k = kinds.setdefault(m.group(1), [0, []]); k[0] += int(m.group(2)); k[1] += [s for s in m.group(3).split(", ") if s]
        if line.startswith("oracle refused:") or line.startswith("topo refused:"):
            refused.append(line.strip())
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
cpu = ""
try:
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
except Exception:
    pass
print("# Differential sweep: topo against NCCL %s's own graph code\n" % tag[1:].rsplit("-", 1)[0])
print("Generated by `bench/oracle/run.sh --seed %d --count %d` on %s UTC." % (seed, count, datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")))
print("Machine: %s, %d CPUs (shared with other builds), load average %.2f; topo commit %s; oracle NCCL %s; nodes: %s.\n" % (cpu, os.cpu_count(), os.getloadavg()[0], commit, tag, nodes))
print("| machines generated | compared | with a difference | oracle refused | topo refused | time |")
print("|---|---|---|---|---|---|")
print("| %d | %d | %d | %d | %d | %d s (%d processes) |\n" % (gen, cmp_, diff, oref, tref, secs, jobs))
if os.environ.get("SWEEP_NOTE"):
    print(os.environ["SWEEP_NOTE"] + "\n")
print("| field | equal | compared |")
print("|---|---|---|")
for name, (e, n) in fields.items():
    print("| %s | %d | %d |" % (name, e, n))
print("\nMachines with a difference, by kind (docs/differential.md, \"Remaining differences\"):\n")
for k, (n, seeds) in sorted(kinds.items(), key=lambda x: -x[1][0]):
    if k.startswith("kind "):
        print("- %s: %d (seeds %s)" % (k[5:], n, ", ".join(seeds[:12])))
print("\nDifferences by field (machines; first seeds):\n")
for k, (n, seeds) in sorted(kinds.items(), key=lambda x: -x[1][0]):
    if not k.startswith("kind "):
        print("- %s: %d (seeds %s)" % (k, n, ", ".join(seeds[:8])))
for r in refused:
    print("- %s" % r)
for r in stops:
    print("- %s" % r)
PY
cat "bench/oracle/results-vm$SUFFIX.md"
