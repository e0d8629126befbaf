#!/bin/sh
# Runs an MPI benchmark as 4 ranks of Open MPI on this node, plain (the
# ranks page to OS swap when a memory cgroup limits them) or, with
# BENCH_SB_BUDGET set, with every rank's big arrays storage-backed under
# one group budget of that size and libstrata-mpi releasing the memory of
# ranks that wait in MPI (the BDMPI model; docs/storage.md).
# usage: [BENCH_SB_BUDGET=40M] mpi-run.sh BUILD_DIR APP ARGS...
# Environment: BENCH_SB_READ (default aggressive), BENCH_SB_DIR (/var/tmp).
set -u
build=$1
shift
run="mpirun.openmpi --allow-run-as-root --oversubscribe -np 4"
if [ -z "${BENCH_SB_BUDGET:-}" ]; then
  exec $run "$@"
fi
group=bench-mpi-$$
trap 'rm -f /dev/shm/strata-sb-$group' EXIT
$run env LD_PRELOAD="$build/libstrata.so $build/openmpi/libstrata-mpi.so" STRATA_SB_DIR="${BENCH_SB_DIR:-/var/tmp}" \
  STRATA_SB_BUDGET="$BENCH_SB_BUDGET" STRATA_SB_GROUP=$group STRATA_SB_READ="${BENCH_SB_READ:-aggressive}" "$@"
