#!/bin/sh
# An MPI program (4 ranks) with libstrata-mpi preloaded computes the same
# result as without it, while its 32 MiB of arrays live under a group
# budget of 8 MiB (they are evicted and come back).
# usage: sb_mpi.sh openmpi|mpich APP LIBSTRATA LIBSTRATA_MPI
set -u
flavor=$1 app=$2 lib=$3 mpilib=$4
. "$(dirname "$0")/sb_mpi_setup.sh"
plain=$(timeout 120 $run "$app") || { echo "FAIL: plain run: $plain"; exit 1; }
backed=$(timeout 120 $run env LD_PRELOAD="$lib $mpilib" STRATA_SB_DIR="$d" STRATA_SB_BUDGET=8M \
         STRATA_SB_GROUP=$group "$app") || { echo "FAIL: storage-backed run: $backed"; exit 1; }
echo "without: $plain" | tr '\n' ' '; echo
echo "with:    $backed" | tr '\n' ' '; echo
r1=$(echo "$plain" | grep '^result') r2=$(echo "$backed" | grep '^result')
[ -n "$r1" ] && [ "$r1" = "$r2" ] || { echo "FAIL: results differ"; exit 1; }
ev=$(echo "$backed" | sed -n 's/^evictions //p')
[ "${ev:-0}" -gt 0 ] || { echo "FAIL: nothing was evicted: not storage-backed?"; exit 1; }
echo ok
