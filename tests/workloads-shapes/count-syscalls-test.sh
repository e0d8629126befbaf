#!/bin/sh
# count-syscalls-test.sh BUILD MAP_CHURN — runs bench/micro/count-syscalls.sh
# on a small map churn under glibc and Strata: each must get a table row of
# five call counts and a wall time, and glibc must show some mmap calls.
build=$1
exe=$2
script=$(dirname "$0")/../../bench/micro/count-syscalls.sh
out=$("$script" -b "$build" -a glibc,strata -- "$exe" -t 2 -n 5000 -r 2 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
for a in glibc strata; do
  printf '%s\n' "$out" | grep -Eq "^\| $a \|( [0-9]+ \|){5} [0-9.]+ \|$" ||
    { echo "FAIL: no complete row for $a"; exit 1; }
done
mmaps=$(printf '%s\n' "$out" | awk -F'|' '$2 ~ /glibc/ { print $4 + 0 }')
[ "${mmaps:-0}" -gt 0 ] || { echo "FAIL: no mmap counted under glibc"; exit 1; }
echo PASS
