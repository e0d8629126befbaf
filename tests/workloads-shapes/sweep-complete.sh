#!/bin/sh
# sweep-complete.sh COMMAND ARGS... — runs bench-pair-sweep for CTest: it must
# pass its check and report every size from 8 B to 1 MiB (18 powers of two),
# untouched (ns@SIZE) and touched (ns_touch@SIZE), each a positive number.
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out" | tail -n 8
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
printf '%s\n' "$out" | grep -qx 'check ok' || { echo "FAIL: no 'check ok' line"; exit 1; }
size=8
while [ "$size" -le 1048576 ]; do
  for base in ns ns_touch; do
    printf '%s\n' "$out" | grep -Eq "^metric $base@$size [0-9.e+-]+$" ||
      { echo "FAIL: no 'metric $base@$size' line"; exit 1; }
    printf '%s\n' "$out" | grep -Eq "^metric $base@$size (0|0\.0*)$" &&
      { echo "FAIL: $base@$size is zero"; exit 1; }
  done
  size=$((size * 2))
done
echo PASS
