#!/bin/sh
# run-mpi.sh MPI PROGRAM LIBSTRATA — runs an MPI program on 2 ranks with
# Strata preloaded into every rank: Open MPI (as root it needs
# --allow-run-as-root; single copy forced to CMA so its large messages go
# by process_vm_readv on Strata's buffers) or MPICH (-genv).  Exits 77
# (skip) when that MPI's mpirun is not installed.
mpi=$1 prog=$2 lib=$3
case $mpi in
openmpi)
    command -v mpirun.openmpi >/dev/null || { echo "skipped: mpirun.openmpi not installed"; exit 77; }
    exec timeout 100 mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 \
        --mca btl_vader_single_copy_mechanism cma -x LD_PRELOAD="$lib" -x STRATA_SHOW_STATS=0 "$prog" ;;
mpich)
    command -v mpirun.mpich >/dev/null || { echo "skipped: mpirun.mpich not installed"; exit 77; }
    exec timeout 100 mpirun.mpich -np 2 -genv LD_PRELOAD "$lib" "$prog" ;;
*)
    echo "run-mpi.sh: unknown MPI \"$mpi\" (openmpi or mpich)" >&2
    exit 2 ;;
esac
