#!/bin/sh
# Every point-to-point and collective pattern (sb_mpi_patterns.c), 4 ranks,
# messages from 4 KiB to 4x the storage budget, with every buffer
# storage-backed (preload, STRATA_SB_MIN=4K) under libstrata-mpi: each
# result must match its checksum, no single copy may fail (EFAULT), and the
# job must end (timeout).  Run with a budget of the process's own and with a
# group budget shared by the ranks.
# usage: sb_mpi_patterns.sh openmpi|mpich APP LIBSTRATA LIBSTRATA_MPI
set -u
flavor=$1 app=$2 lib=$3 mpilib=$4
. "$(dirname "$0")/sb_mpi_setup.sh"
budget=8
max=$((4 * budget * 1024 * 1024))
for g in "" $group; do
  out=$(timeout 180 $run env LD_PRELOAD="$lib $mpilib" STRATA_SB_DIR="$d" STRATA_SB_BUDGET=${budget}M \
        STRATA_SB_MIN=4K STRATA_SB_GROUP=$g "$app" $max 2>&1)
  rc=$?
  echo "group '${g}': rc $rc"; echo "$out" | sort | uniq -c | head -20
  [ $rc -eq 124 ] && { echo "FAIL: the job did not end within 180 s"; exit 1; }
  [ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
  echo "$out" | grep -q "^patterns ok" || { echo "FAIL: wrong results"; exit 1; }
  echo "$out" | grep -Eq "Bad address|errno = 14|EFAULT" && { echo "FAIL: a single copy failed"; exit 1; }
  ev=$(echo "$out" | sed -n 's/^evictions //p')
  [ "${ev:-0}" -gt 0 ] || { echo "FAIL: nothing was evicted: not storage-backed?"; exit 1; }
done
echo ok
