#!/bin/sh
# The MPI versions of the storage benchmarks (bench/storage/sb-*-mpi.c),
# 4 ranks of Open MPI with every array storage-backed under one group
# budget smaller than the data (libstrata-mpi preloaded), compute the same
# `result` line as the single-process programs: PageRank bit for bit, the
# graph contraction's edge counts per level and total weight.  Small sizes.
# usage: sb_mpi_bench.sh BINDIR LIBSTRATA LIBSTRATA_MPI
set -u
bin=$1 lib=$2 mpilib=$3
run="mpirun.openmpi --allow-run-as-root --oversubscribe -np 4"
[ -x "$bin/bench-sb-pagerank-mpi" ] && [ -x "$bin/bench-sb-phases-mpi" ] && [ -f "$mpilib" ] ||
  { echo "SKIP: the MPI benchmarks are not built (no mpicc.openmpi)"; exit 77; }
d=$(mktemp -d) || exit 1
group=sbmpib-$$
trap 'rm -rf "$d"; rm -f /dev/shm/strata-sb-$group' EXIT
check() {   # name, single-process command, MPI command
  one=$($2 | grep '^result') || { echo "FAIL: $1: the single-process run failed"; exit 1; }
  out=$(timeout 200 $run env LD_PRELOAD="$lib $mpilib" STRATA_SB_DIR="$d" STRATA_SB_BUDGET=4M STRATA_SB_MIN=64K \
        STRATA_SB_GROUP=$group STRATA_SB_READ=aggressive STRATA_SHOW_STATS=1 $3 2>&1) ||
    { echo "FAIL: $1: the storage-backed MPI run failed (rc $?; 124: the 200 s timeout): $out"; exit 1; }
  four=$(echo "$out" | grep '^result')
  echo "$1 single: $one"
  echo "$1 4 ranks: $four"
  [ -n "$one" ] && [ "$one" = "$four" ] || { echo "FAIL: $1: results differ"; exit 1; }
  # Storage-backed for real: some rank wrote pages back and read them again.
  echo "$out" | grep -q 'sb_read  *[1-9]' || { echo "FAIL: $1: nothing was read back"; exit 1; }
}
check pagerank "$bin/bench-sb-pagerank --vertices 65536 --degree 8 --iters 3" \
  "$bin/bench-sb-pagerank-mpi --vertices 65536 --degree 8 --iters 3"
check phases "$bin/bench-sb-phases --edges 262144 --levels 4 --parts 4" "$bin/bench-sb-phases-mpi --edges 262144 --levels 4"
echo ok
