#!/bin/sh
# run-workload.sh ok|detect COMMAND ARGS... — runs one benchmark workload for CTest.
#   ok:     it must exit 0 and print `check ok` (its own correctness check passed)
#   detect: it must exit non-zero and not print `check ok` (run under a broken
#           allocator, its check must notice)
# LD_PRELOAD comes from the test's environment.
want=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out" | tail -n 20
printf 'exit status %s\n' "$rc"
case $want in
ok)
  [ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
  printf '%s\n' "$out" | grep -qx 'check ok' || { echo "FAIL: no 'check ok' line"; exit 1; }
  ;;
detect)
  printf '%s\n' "$out" | grep -qx 'check ok' && { echo "FAIL: corruption not detected"; exit 1; }
  [ "$rc" -ne 0 ] || { echo "FAIL: exit status 0 after corruption"; exit 1; }
  printf '%s\n' "$out" | grep -q '^check failed' || echo "note: the workload crashed instead of failing its check"
  ;;
*)
  echo "usage: $0 ok|detect COMMAND ARGS..."; exit 2 ;;
esac
echo PASS
