#!/usr/bin/env bash
# Output equivalence for the scale work on the binary's output side (show, plan, xml):
# writes every document a change to crates/topo-report, src/cmd or the XML writer could alter,
# for one binary, into a folder; with two folders, diffs them.
#   bench/scale/diff-outputs-out.sh write BIN DIR     # e.g. main's release binary -> /tmp/ref
#   bench/scale/diff-outputs-out.sh diff DIR_A DIR_B  # exit 0 when byte-identical
# Covers every profile at --nodes 1, 2, 5 (show: every view as text and JSON, YAML; plan:
# text and JSON; xml), every fixture XML (--from F, same set at one
# node), and the 1,024-node show and plan JSON (left out with SMALL=1).
set -euo pipefail
cd "$(dirname "$0")/../.."
export COLUMNS=100 NO_COLOR=1

write_one() { # BIN DIR NAME ARGS...
  local bin=$1 dir=$2 name=$3; shift 3
  local rc=0
  "$bin" "$@" --color never >"$dir/$name.out" 2>"$dir/$name.err" || rc=$?
  echo "$rc" >"$dir/$name.rc"
}

write_source() { # BIN DIR TAG SOURCE-ARGS...
  local bin=$1 dir=$2 tag=$3; shift 3
  for view in summary matrix pci paths dot; do
    write_one "$bin" "$dir" "$tag.show.$view.txt" show "$@" --view "$view"
    write_one "$bin" "$dir" "$tag.show.$view.json" show "$@" --view "$view" --format json
  done
  write_one "$bin" "$dir" "$tag.show.yaml" show "$@" --format yaml
  write_one "$bin" "$dir" "$tag.plan.txt" plan "$@"
  write_one "$bin" "$dir" "$tag.plan.json" plan "$@" --format json
  write_one "$bin" "$dir" "$tag.xml" xml "$@"
}

write_all() {
  local bin=$1 dir=$2
  mkdir -p "$dir"
  for p in profiles/*.yaml; do
    local name
    name=$(basename "$p" .yaml)
    for n in 1 2 5; do
      write_source "$bin" "$dir" "$name.n$n" --profile "$name" --nodes "$n"
    done
  done
  while IFS= read -r f; do
    write_source "$bin" "$dir" "fx.$(echo "$f" | tr '/' '_')" --from "$f"
  done < <(find fixtures -name '*.xml' | sort)
  # SMALL=1: leave these out (a quick check with a debug build).
  [ -n "${SMALL:-}" ] && return 0
  write_one "$bin" "$dir" dgx-h100.n1024.show.json show --profile dgx-h100 --nodes 1024 --format json
  write_one "$bin" "$dir" hgx-h200.n1024.show.json show --profile hgx-h200 --nodes 1024 --format json
  write_one "$bin" "$dir" hgx-h200.n1024.plan.json plan --profile hgx-h200 --nodes 1024 --format json
  write_one "$bin" "$dir" dgx-h100.n1024.plan.json plan --profile dgx-h100 --nodes 1024 --format json
}

case "${1:-}" in
  write) write_all "$(realpath "$2")" "$3"; echo "wrote $(ls "$3" | wc -l) files to $3" ;;
  diff)
    if diff -rq ${SMALL:+-x '*.n1024.*'} "$2" "$3"; then echo "identical: $(ls "$2" | wc -l) files"; else exit 1; fi ;;
  *) echo "usage: $0 write BIN DIR | diff DIR_A DIR_B" >&2; exit 2 ;;
esac
