#!/bin/sh
# kill -9 leaves no file: the backing file is never visible in the
# directory (O_TMPFILE, or unlinked at creation), during the run or after.
# usage: sb_kill.sh TEST_SB_VICTIM
set -u
d=$(mktemp -d) || exit 1
out=$d.out
"$1" "$d" >"$out" 2>&1 &
pid=$!
i=0
while ! grep -q ready "$out" 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 300 ] || ! kill -0 $pid 2>/dev/null; then echo "victim did not start:"; cat "$out"; exit 1; fi
  sleep 0.1
done
fail=0
if [ -n "$(ls -A "$d")" ]; then echo "FAIL: files visible while running:"; ls -la "$d"; fail=1; fi
# The process does hold a file in that directory.
if ! ls -l /proc/$pid/fd 2>/dev/null | grep -q "$d"; then echo "FAIL: no open backing file in $d"; fail=1; fi
kill -9 $pid
wait $pid 2>/dev/null
if [ -n "$(ls -A "$d")" ]; then echo "FAIL: files left after kill -9:"; ls -la "$d"; fail=1; fi
rm -rf "$d" "$out"
[ $fail -eq 0 ] && echo ok
exit $fail
