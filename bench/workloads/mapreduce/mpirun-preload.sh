#!/bin/sh
# mpirun-preload.sh — runs an MPI program on NP local ranks with the caller's
# LD_PRELOAD given to the ranks, not to mpirun: the bench harness sets
# LD_PRELOAD to the allocator it measures, and that allocator belongs in the
# ranks (mpirun and its daemon are not the workload).
# Usage: mpirun-preload.sh NP PROGRAM [ARGS...]
# Extra mpirun options can be passed in MR_MPIRUN_FLAGS.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 NP PROGRAM [ARGS...]" >&2
    exit 2
fi
np=$1
shift
preload=${LD_PRELOAD:-}
unset LD_PRELOAD
# The ranks (and their OpenMP threads) may outnumber the cores: idle OpenMP
# threads must sleep, not spin, or they steal the cores of the busy ones.
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY
set -- -np "$np" --oversubscribe --bind-to none -x OMP_WAIT_POLICY ${MR_MPIRUN_FLAGS:-} "$@"
if [ "$(id -u)" -eq 0 ]; then
    set -- --allow-run-as-root "$@"
fi
if [ -n "$preload" ]; then
    exec mpirun -x "LD_PRELOAD=$preload" "$@"
fi
exec mpirun "$@"
