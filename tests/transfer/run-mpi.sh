#!/bin/sh
# run-mpi.sh MPI PROGRAM LIBSTRATA — runs an MPI program on 2 ranks with
# Strata preloaded into every rank: Open MPI (as root it needs
# --allow-run-as-root; single copy forced to CMA so its large messages go
# by process_vm_readv on Strata's buffers) or MPICH (-genv).  Passes when
# the program says "mpi_prog: ok" and every rank printed Strata's
# statistics (STRATA_SHOW_STATS=1: the check docs/mpi.md recommends).
# Exits 77 (skip) when that MPI's mpirun is not installed.
mpi=$1 prog=$2 lib=$3
case $mpi in
openmpi)
    command -v mpirun.openmpi >/dev/null || { echo "skipped: mpirun.openmpi not installed"; exit 77; }
    out=$(timeout 100 mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 \
        --mca btl_vader_single_copy_mechanism cma -x LD_PRELOAD="$lib" -x STRATA_SHOW_STATS=1 "$prog" 2>&1) ;;
mpich)
    command -v mpirun.mpich >/dev/null || { echo "skipped: mpirun.mpich not installed"; exit 77; }
    out=$(timeout 100 mpirun.mpich -np 2 -genv LD_PRELOAD "$lib" -genv STRATA_SHOW_STATS 1 "$prog" 2>&1) ;;
*)
    echo "run-mpi.sh: unknown MPI \"$mpi\" (openmpi or mpich)" >&2
    exit 2 ;;
esac
rc=$?
printf '%s\n' "$out" | grep -v '^  '          # the statistics' detail lines are long
[ $rc -eq 0 ] || { echo "run-mpi.sh: mpirun exited with $rc"; exit 1; }
printf '%s\n' "$out" | grep -q '^mpi_prog: ok$' || { echo "run-mpi.sh: the program did not finish"; exit 1; }
# Counted anywhere in the output: mpirun forwards the ranks' stderr in
# chunks, so two ranks' statistics may share a line.
ranks=$(printf '%s\n' "$out" | grep -o 'strata: statistics [^(]*(pid [0-9]*' | sort -u | wc -l)
[ "$ranks" -ge 2 ] || { echo "run-mpi.sh: $ranks process(es) printed Strata's statistics, expected one per rank"; exit 1; }
echo "run-mpi.sh: ok, $ranks processes ran Strata"
