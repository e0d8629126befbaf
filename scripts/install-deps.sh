#!/usr/bin/env bash
# Installs, on a Debian/Ubuntu machine, what `make test` or `make bench` needs
# and is missing.  Needs root (or sudo) only when something is missing.
set -euo pipefail
what=${1:-test}

# Packages by purpose.  Each line: a command or file that proves it is there, then the package.
need_test=(
  "cmake:cmake" "ninja:ninja-build" "gcc:gcc" "python3:python3" "git:git"
  "sqlite3:sqlite3" "pkg-config:pkg-config" "clang:clang" "/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a:libclang-rt-14-dev"
  "mpirun:openmpi-bin" "/usr/include/x86_64-linux-gnu/openmpi/mpi.h:libopenmpi-dev"
  "mpicc.mpich:mpich" "/usr/include/x86_64-linux-gnu/mpich/mpi.h:libmpich-dev"
  "unshare:util-linux" "mkswap:util-linux"
)
need_bench=(
  "${need_test[@]}"
  "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2:libjemalloc2"
  "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4:libgoogle-perftools4"
  "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2:libmimalloc2.0"
  "/usr/lib/python3/dist-packages/matplotlib/__init__.py:python3-matplotlib"
  "/usr/share/doc/python3-venv:python3-venv"
)
if [ "$what" = bench ]; then list=("${need_bench[@]}"); else list=("${need_test[@]}"); fi

missing=()
for entry in "${list[@]}"; do
  probe=${entry%%:*}; pkg=${entry#*:}
  if [[ $probe == /* ]]; then [ -e "$probe" ] && continue
  else command -v "$probe" >/dev/null 2>&1 && continue; fi
  missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
