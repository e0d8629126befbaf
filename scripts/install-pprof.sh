#!/usr/bin/env bash
# Installs Google's pprof (the tool tests/prof checks the heap profiles
# against) into .deps/bin of the source tree, with `go install` through the
# Go module proxy; installs Debian's Go first if there is none.  Called by
# install-deps.sh; the test is skipped (77) when this could not install it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.deps/bin
[ -x "$dest/pprof" ] && exit 0
if ! command -v go >/dev/null 2>&1; then
  for g in /usr/local/go/bin/go /usr/lib/go/bin/go; do [ -x "$g" ] && PATH=$(dirname "$g"):$PATH; done
fi
if ! command -v go >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-pprof: installing golang-go"
  $sudo apt-get install -y --no-install-recommends golang-go >/dev/null || { echo "install-pprof: no Go: pprof not installed"; exit 0; }
fi
mkdir -p "$dest"
echo "install-pprof: go install github.com/google/pprof@latest into $dest"
if ! GOBIN=$dest GOFLAGS=-mod=mod go install github.com/google/pprof@latest; then
  echo "install-pprof: go install failed: the pprof test will be skipped"
fi
exit 0
