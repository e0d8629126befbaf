#!/usr/bin/env bash
# Installs, on a Debian/Ubuntu machine, what `make test` or `make bench` needs
# and is missing.  Needs root (or sudo) only when something is missing.
# Prints what it installs and apt's progress, one line per package step.
set -euo pipefail
what=${1:-test}
case $what in test|bench|cluster) ;; *) echo "install-deps: usage: $0 test|bench|cluster" >&2; exit 2 ;; esac

# The fuzzing runtime belongs to whichever clang is installed: its package
# is named after clang's major version, so nothing here names a version.
clang_major() { clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -1; }
fuzzer_present() {
  local f
  for f in /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a \
           /usr/lib/llvm-*/lib/clang/*/lib/x86_64-*/libclang_rt.fuzzer.a; do
    [ -e "$f" ] && return 0
  done
  return 1
}

# Packages by purpose.  Each line: a command or file that proves it is there, then the package.
need_test=(
  "cmake:cmake" "ninja:ninja-build" "gcc:gcc" "g++:g++" "python3:python3" "git:git"
  "sqlite3:sqlite3" "pkg-config:pkg-config" "clang:clang"
  "mpirun:openmpi-bin" "/usr/include/x86_64-linux-gnu/openmpi/mpi.h:libopenmpi-dev"
  "mpirun.mpich:mpich" "/usr/include/x86_64-linux-gnu/mpich/mpi.h:libmpich-dev"
  "qemu-system-x86_64:qemu-system-x86" "/usr/share/doc/busybox-static:busybox-static" "cpio:cpio" "numactl:numactl"
  "unshare:util-linux" "mkswap:util-linux"
)
# The two-node cluster of tests/cluster (make test-cluster, and the cluster_*
# rows of make test): Slurm's daemons and client, munge, and what builds the
# nodes (namespaces, the veth pair, the launch helper).  On a machine with
# systemd the packages also enable their services; the tests start their own
# daemons and use none of them.
need_cluster=(
  "munged:munge" "slurmctld:slurmctld" "slurmd:slurmd" "srun:slurm-client"
  "ip:iproute2" "nsenter:util-linux" "setpriv:util-linux" "python3:python3"
)
need_test+=("${need_cluster[@]}")
need_bench=(
  "${need_test[@]}"
  "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2:libjemalloc2"
  "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4:libgoogle-perftools4"
  "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2:libmimalloc2.0"
  "/usr/lib/python3/dist-packages/matplotlib/__init__.py:python3-matplotlib"
  "/usr/share/doc/python3-venv:python3-venv"
  # mimalloc 3 and snmalloc (scripts/install-peers.sh): pip downloads one,
  # cargo fetches the other's sources, built with CMake and g++
  "cargo:cargo"
  # the heap profiler's benchmark compares with heaptrack
  "heaptrack:heaptrack"
)
case $what in
  bench) list=("${need_bench[@]}") ;;
  cluster) list=("${need_cluster[@]}") ;;
  *) list=("${need_test[@]}") ;;
esac

missing=()
for entry in "${list[@]}"; do
  probe=${entry%%:*}; pkg=${entry#*:}
  if [[ $probe == /* ]]; then [ -e "$probe" ] && continue
  else command -v "$probe" >/dev/null 2>&1 && continue; fi
  missing+=("$pkg")
done

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive

apt_install() {
  echo "install-deps: installing $* (a minute or two on a fresh machine)"
  echo "install-deps: apt-get update"
  $sudo apt-get update -qq
  # One line per download, unpack and configure step, so a slow mirror shows.
  set +o pipefail
  $sudo apt-get install -y --no-install-recommends "$@" 2>&1 |
    grep --line-buffered -E '^(Get:|Unpacking |Setting up |E: )' | sed -u 's/^/install-deps: /'
  local rc=${PIPESTATUS[0]}
  set -o pipefail
  return "$rc"
}
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
[ "$what" = cluster ] && exit 0

# The fuzzer runtime, once clang is there (the fuzz tests skip without it).
if ! fuzzer_present; then
  major=$(clang_major)
  if [ -n "$major" ] && apt-cache show "libclang-rt-$major-dev" >/dev/null 2>&1; then
    apt_install "libclang-rt-$major-dev"
  else
    echo "install-deps: no libclang-rt-${major:-?}-dev package for this clang: the fuzz tests will be skipped"
  fi
fi
# Google's pprof, which tests/prof reads the heap profiles with (.deps/bin).
"$(dirname "$0")/install-pprof.sh" || true
# tests/numa downloads a kernel package (apt-get download): it needs package lists.
if ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; then
  echo "install-deps: apt-get update (package lists, for the NUMA guest's kernel)"
  $sudo apt-get update -qq
fi
# The peers Debian does not package, into bench/.peers (git-ignored).
if [ "$what" = bench ]; then
  "$(dirname "$0")/install-peers.sh"
fi
exit 0
