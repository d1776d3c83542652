#!/usr/bin/env bash
# Builds the release `topo` binary so that it starts on glibc 2.17 and later (RHEL/CentOS 7,
# RHEL 8, Ubuntu 18.04+): cargo-zigbuild links against glibc 2.17's symbol versions with zig as
# the linker. Then reads the binary's dynamic symbol versions and fails if any needs a newer
# glibc, and lists what it links against.
#
# Usage: scripts/release.sh [OUT_DIR]     (from anywhere; default OUT_DIR: target/dist)
# Needs python3 (for the ziglang and cargo-zigbuild wheels, installed into target/zig-venv)
# and objdump (binutils).
set -euo pipefail
cd "$(dirname "$0")/.."
GLIBC=${GLIBC:-2.17}
arch=$(uname -m)
target="$arch-unknown-linux-gnu"
out=${1:-target/dist}
venv=target/zig-venv

if [[ ! -x $venv/bin/cargo-zigbuild ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'ziglang==0.17.*' 'cargo-zigbuild==0.24.*'
fi
export PATH="$PWD/$venv/bin:$PATH"
command -v rustup >/dev/null && rustup target add "$target" >/dev/null 2>&1 || true

cargo zigbuild --release --locked --bin topo --target "$target.$GLIBC"
bin="target/$target/release/topo"

need=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -u -V | tail -1)
echo "highest glibc symbol version: $need"
if [[ "$(printf '%s\n' "GLIBC_$GLIBC" "$need" | sort -V | tail -1)" != "GLIBC_$GLIBC" ]]; then
  echo "error: $bin needs $need, newer than glibc $GLIBC" >&2
  exit 1
fi
echo "needed libraries: $(objdump -p "$bin" | awk '/NEEDED/ {print $2}' | tr '\n' ' ')"
mkdir -p "$out"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
dest="$out/topo-$version-$arch-linux-glibc$GLIBC"
cp "$bin" "$dest"
(cd "$out" && sha256sum "$(basename "$dest")" >"$(basename "$dest").sha256")
echo "wrote $dest ($(du -h "$dest" | cut -f1))"
