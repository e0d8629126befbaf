#!/usr/bin/env bash
# Installs the allocators `make bench` compares with that Debian does not
# package: mimalloc 3 (the shared library shipped in the cmeel-mimalloc wheel
# on PyPI) and snmalloc (its C++ sources ship in the snmalloc-sys crate on
# crates.io; libsnmallocshim.so is built here with CMake, Release).
#
#   scripts/install-peers.sh [DIR]     default DIR: bench/.peers (git-ignored)
#
# Leaves DIR/mimalloc3/libmimalloc.so.3 and DIR/snmalloc/libsnmallocshim.so,
# each with a VERSION file the bench report reads.  Idempotent: a library
# whose VERSION names the pinned version is kept as it is.  Nothing goes into
# the system's Python or Cargo directories: pip only downloads the wheel into
# DIR, and Cargo runs with CARGO_HOME inside DIR.  Needs python3 with pip (or
# the venv module), cargo, cmake, ninja and a C++ compiler (scripts/install-deps.sh
# bench installs them first).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/bench/.peers}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

MIMALLOC_WHEEL_VERSION=3.4.3     # cmeel-mimalloc on PyPI
SNMALLOC_SYS_VERSION=0.7.6       # snmalloc-sys on crates.io

say() { echo "install-peers: $*"; }
have_version() { [ -f "$1/VERSION" ] && [ -f "$1/$2" ] && grep -qx "$3" "$1/VERSION"; }

# A pip that can download: python3's own, else one in a venv inside DIR
# (Debian's python3 may come without pip).
pip_cmd() {
  if python3 -m pip --version >/dev/null 2>&1; then
    echo "python3 -m pip"
    return
  fi
  if [ ! -x "$dir/pip-venv/bin/pip" ]; then
    python3 -m venv "$dir/pip-venv" >/dev/null
  fi
  echo "$dir/pip-venv/bin/pip"
}

install_mimalloc3() {
  local dest=$dir/mimalloc3
  if have_version "$dest" libmimalloc.so.3 "$MIMALLOC_WHEEL_VERSION"; then
    return 0
  fi
  say "mimalloc $MIMALLOC_WHEEL_VERSION: downloading the cmeel-mimalloc wheel from PyPI"
  rm -rf "$dir/wheels" "$dest.tmp"
  mkdir -p "$dir/wheels" "$dest.tmp"
  $(pip_cmd) download --no-deps --only-binary=:all: --disable-pip-version-check --progress-bar off \
    -d "$dir/wheels" "cmeel-mimalloc==$MIMALLOC_WHEEL_VERSION" | sed -u 's/^/install-peers: /'
  # A wheel is a zip; its shared library is cmeel.prefix/lib/libmimalloc.so.3*.
  python3 - "$dir/wheels" "$dest.tmp" <<'EOF'
import glob, os, sys, zipfile
wheels, dest = sys.argv[1], sys.argv[2]
whl = glob.glob(os.path.join(wheels, "cmeel_mimalloc-*.whl"))
if len(whl) != 1:
    sys.exit("install-peers: expected one cmeel_mimalloc wheel in %s, found %d" % (wheels, len(whl)))
with zipfile.ZipFile(whl[0]) as z:
    libs = sorted((n for n in z.namelist() if os.path.basename(n).startswith("libmimalloc.so.3")),
                  key=len, reverse=True)
    if not libs:
        sys.exit("install-peers: no libmimalloc.so.3 in %s" % whl[0])
    with z.open(libs[0]) as src, open(os.path.join(dest, "libmimalloc.so.3"), "wb") as out:
        out.write(src.read())
EOF
  echo "$MIMALLOC_WHEEL_VERSION" >"$dest.tmp/VERSION"
  rm -rf "$dest" "$dir/wheels"
  mv "$dest.tmp" "$dest"
  say "mimalloc $MIMALLOC_WHEEL_VERSION: $dest/libmimalloc.so.3"
}

install_snmalloc() {
  local dest=$dir/snmalloc
  if have_version "$dest" libsnmallocshim.so "$SNMALLOC_SYS_VERSION"; then
    return 0
  fi
  say "snmalloc: fetching the snmalloc-sys $SNMALLOC_SYS_VERSION crate from crates.io with cargo"
  # A throwaway crate that depends on snmalloc-sys: `cargo vendor` puts the
  # dependency's sources (snmalloc's own tree under upstream/) in one place.
  # Without its default features it has no dependencies of its own (cc and
  # cmake are its Rust build's), so an older Cargo resolves nothing newer.
  local work=$dir/snmalloc-src
  rm -rf "$work"
  mkdir -p "$work/fetch/src"
  cat >"$work/fetch/Cargo.toml" <<EOF
[package]
name = "strata-peer-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
snmalloc-sys = { version = "=$SNMALLOC_SYS_VERSION", default-features = false }
EOF
  : >"$work/fetch/src/lib.rs"
  (cd "$work/fetch" && CARGO_HOME=$dir/cargo-home cargo vendor --quiet --versioned-dirs "$work/vendor" >/dev/null)
  local src=$work/vendor/snmalloc-sys-$SNMALLOC_SYS_VERSION/upstream
  [ -f "$src/CMakeLists.txt" ] || { say "no snmalloc sources in $src"; exit 1; }
  say "snmalloc: building libsnmallocshim.so (CMake, Release; a minute or two)"
  cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSNMALLOC_BUILD_TESTING=OFF \
    >"$work/cmake.log" 2>&1 || { tail -20 "$work/cmake.log"; exit 1; }
  cmake --build "$work/build" --target snmallocshim >"$work/build.log" 2>&1 ||
    { tail -20 "$work/build.log"; exit 1; }
  rm -rf "$dest.tmp"
  mkdir -p "$dest.tmp"
  cp "$work/build/libsnmallocshim.so" "$dest.tmp/"
  echo "$SNMALLOC_SYS_VERSION" >"$dest.tmp/VERSION"
  rm -rf "$dest" "$work" "$dir/cargo-home"
  mv "$dest.tmp" "$dest"
  say "snmalloc (snmalloc-sys $SNMALLOC_SYS_VERSION): $dest/libsnmallocshim.so"
}

install_mimalloc3
install_snmalloc
