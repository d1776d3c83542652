#!/usr/bin/env bash
# Renders topo's SVG pictures in headless Chromium and writes PNGs: proof that a browser
# opens them, and the pictures README shows (docs/img/).
#
# Usage: scripts/render-svg.sh [OUT_DIR]        (default OUT_DIR: docs/img)
# TOPO=path/to/topo picks the binary (default: target/debug/topo, built if missing).
# Needs chromium (Debian: apt-get install -y chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/img}
bin=${TOPO:-target/debug/topo}
[[ -x $bin ]] || cargo build --bin topo
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z $chrome ]]; then
  echo "error: no chromium found; install it (apt-get install -y chromium)" >&2
  exit 3
fi
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# render NAME TOPO-ARGS...: the SVG topo writes, screenshotted at the SVG's own size.
render() {
  local name=$1
  shift
  "$bin" "$@" -o "$tmp/$name.svg"
  local size
  size=$(head -c 400 "$tmp/$name.svg" | tr '\n' ' ' |
    sed -n 's/^<svg[^>]* width="\([0-9.]*\)" height="\([0-9.]*\)".*/\1,\2/p')
  [[ -n $size ]] || { echo "error: $name.svg has no width and height" >&2; exit 1; }
  size=$(echo "$size" | awk -F, '{printf "%d,%d", $1 + 0.999, $2 + 0.999}')
  # --no-sandbox: CI and containers run as root, where Chromium's sandbox refuses to start.
  "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --window-size="$size" --screenshot="$out/$name.png" "file://$tmp/$name.svg" 2>"$tmp/$name.log" ||
    { cat "$tmp/$name.log" >&2; exit 1; }
  [[ -s $out/$name.png ]] || { echo "error: chromium wrote no $out/$name.png" >&2; exit 1; }
  echo "$out/$name.png  ${size/,/x}  topo $*"
}

render show-dgx-h100 show --profile dgx-h100 --format svg
render plan-dgx-h100-2nodes plan --profile dgx-h100 --nodes 2 --format svg --nccl-version 2.28
