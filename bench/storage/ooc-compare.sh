#!/bin/sh
# The out-of-core comparison of bench/RESULTS.md (issue 10): each workload
# in a memory cgroup with a swap file (in-swap-cgroup.sh; needs root), OS
# swap (glibc) against Strata's storage-backed variants, interleaved by
# interleave.py, medians of RUNS runs.  With BEFORE_LIB set (another
# build's libstrata.so) a "before" variant runs beside them.
# usage: [RUNS=3] [BEFORE_LIB=/path/libstrata.so] bench/storage/ooc-compare.sh   (from the source tree, after a build)
set -u
RUNS=${RUNS:-3}
S="STRATA_SB_DIR=/var/tmp STRATA_SB_BUDGET=auto"
iv() { python3 bench/storage/interleave.py --runs "$RUNS" --variant glibc= \
  ${BEFORE_LIB:+--variant "before-aggr=$S LD_PRELOAD=$BEFORE_LIB STRATA_SB_READ=aggressive STRATA_SB_WRITE=aggressive"} "$@"; }
uptime
for k in read write readwrite; do
  echo "## ooc $k 256 MiB in 64M"
  iv --variant "sb-aggr=$S STRATA_SB_READ=aggressive" --variant "sb-aggr-aggr=$S STRATA_SB_READ=aggressive STRATA_SB_WRITE=aggressive" \
    -- bench/storage/in-swap-cgroup.sh 64M 1G build/bin/bench-sb-sweep --mib 256 --kind $k --passes 2
done
echo "## ooc readwrite 128 MiB in 32M, lazy read"
python3 bench/storage/interleave.py --runs "$RUNS" --variant glibc= ${BEFORE_LIB:+--variant "before-lazy=$S LD_PRELOAD=$BEFORE_LIB"} \
  --variant "sb-lazy=$S" -- bench/storage/in-swap-cgroup.sh 32M 512M build/bin/bench-sb-sweep --mib 128 --kind readwrite --passes 2
echo "## pagerank"
iv --variant "sb-aggr=$S STRATA_SB_READ=aggressive" \
  -- bench/storage/in-swap-cgroup.sh 40M 1G build/bin/bench-sb-pagerank --vertices 2097152 --degree 16 --iters 3
echo "## kmeans"
iv --variant "sb-aggr=$S STRATA_SB_READ=aggressive" \
  -- bench/storage/in-swap-cgroup.sh 32M 1G build/bin/bench-sb-kmeans --points 2097152 --iters 3
echo "## phases"
iv --variant "sb-aggr=$S STRATA_SB_READ=aggressive" \
  -- bench/storage/in-swap-cgroup.sh 48M 1G build/bin/bench-sb-phases --edges 8388608 --levels 5
echo "## kmeans, 4 MPI ranks sharing one budget (Open MPI)"
python3 bench/storage/interleave.py --runs "$RUNS" --variant glibc= --variant "sb-group-24M=BENCH_SB_BUDGET=24M LD_PRELOAD=" \
  --variant "sb-group-32M=BENCH_SB_BUDGET=32M LD_PRELOAD=" \
  -- bench/storage/in-swap-cgroup.sh 48M 1G bench/storage/mpi-run.sh build build/bin/bench-sb-kmeans-mpi --points 524288 --iters 3
uptime
