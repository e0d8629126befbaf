#!/bin/sh
# The out-of-core comparison of docs/notes/storage.md: each workload
# in a memory cgroup with a swap file (in-swap-cgroup.sh; needs root), OS
# swap (glibc) against Strata's storage-backed variants (lazy read, the
# default, and aggressive read), interleaved by interleave.py, medians of
# RUNS runs; the MPI workloads as 4 ranks of Open MPI sharing one group
# budget (mpi-run.sh).  With BEFORE_LIB set (another build's libstrata.so)
# a "before" variant (aggressive read) runs beside them.
# usage: [RUNS=3] [BEFORE_LIB=/path/libstrata.so] [ONLY=regex] bench/storage/ooc-compare.sh
#        (from the source tree, after a build)
set -u
RUNS=${RUNS:-3}
ONLY=${ONLY:-.}
S="STRATA_SB_DIR=/var/tmp STRATA_SB_BUDGET=auto"
iv() { python3 bench/storage/interleave.py --runs "$RUNS" --variant glibc= \
  ${BEFORE_LIB:+--variant "before-aggr=$S LD_PRELOAD=$BEFORE_LIB STRATA_SB_READ=aggressive"} \
  --variant "sb-lazy=$S" --variant "sb-aggr=$S STRATA_SB_READ=aggressive" "$@"; }
want() { echo "$1" | grep -Eq "$ONLY"; }
uptime
for k in read write readwrite; do
  want "sweep-$k" || continue
  echo "## ooc $k 256 MiB in 64M"
  iv -- bench/storage/in-swap-cgroup.sh 64M 1G build/bin/bench-sb-sweep --mib 256 --kind $k --passes 2
done
if want pagerank; then
  echo "## pagerank"
  iv -- bench/storage/in-swap-cgroup.sh 40M 1G build/bin/bench-sb-pagerank --vertices 2097152 --degree 16 --iters 3
fi
if want kmeans; then
  echo "## kmeans"
  iv -- bench/storage/in-swap-cgroup.sh 32M 1G build/bin/bench-sb-kmeans --points 2097152 --iters 3
fi
if want phases; then
  echo "## phases"
  iv -- bench/storage/in-swap-cgroup.sh 48M 1G build/bin/bench-sb-phases --edges 8388608 --levels 5
fi
mpi() {   # name, cgroup limit, group budget, program and arguments
  name=$1 lim=$2 budget=$3
  shift 3
  want "mpi-$name" || return 0
  echo "## $name, 4 MPI ranks sharing one budget (Open MPI)"
  python3 bench/storage/interleave.py --runs "$RUNS" --variant glibc= --variant "sb-group-$budget=BENCH_SB_BUDGET=$budget LD_PRELOAD=" \
    -- bench/storage/in-swap-cgroup.sh "$lim" 1G bench/storage/mpi-run.sh build "$@"
}
mpi kmeans 48M 32M build/bin/bench-sb-kmeans-mpi --points 524288 --iters 3
mpi pagerank 56M 40M build/bin/bench-sb-pagerank-mpi --vertices 524288 --degree 64 --iters 3
mpi phases 56M 40M build/bin/bench-sb-phases-mpi --edges 8388608 --levels 5
uptime
