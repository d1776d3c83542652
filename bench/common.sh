# Shared by the bench scripts: `source bench/common.sh` from the repository root.

# need CMD PACKAGE: installs the Debian PACKAGE when CMD is missing.
need() {
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "installing $2 (for $1)" >&2
    apt-get install -y "$2" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "$2" >/dev/null; }
  fi
}

# Sets TOPO_BIN to a release build of topo unless the caller named one.
topo_bin() {
  if [[ -z "${TOPO_BIN:-}" ]]; then
    cargo build --release --bin topo >&2
    TOPO_BIN="$PWD/target/release/topo"
  fi
}
