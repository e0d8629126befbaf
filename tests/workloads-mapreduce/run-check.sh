#!/bin/sh
# run-check.sh — runs one workload and judges it the way the bench harness
# does: exit status 0 and a `check ok` line.  Options:
#   --preload LIB     run the command with LD_PRELOAD=LIB (and nothing else)
#   --want REGEX      the output must also match REGEX (repeatable)
#   --expect-fail     the opposite verdict: the command must exit non-zero
#                     and print `check FAILED` (proves the check can fail)
# Usage: run-check.sh [options] -- COMMAND [ARGS...]
set -u
preload=""
expect_fail=0
wants=""
while [ $# -gt 0 ]; do
    case $1 in
    --preload) preload=$2; shift 2 ;;
    --want) wants="$wants
$2"; shift 2 ;;
    --expect-fail) expect_fail=1; shift ;;
    --) shift; break ;;
    *) echo "run-check.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if [ -n "$preload" ]; then
    if [ ! -e "$preload" ]; then
        echo "run-check.sh: $preload does not exist" >&2
        exit 1
    fi
    LD_PRELOAD=$preload "$@" >"$out" 2>&1
else
    "$@" >"$out" 2>&1
fi
status=$?
cat "$out"
if [ $expect_fail -eq 1 ]; then
    if [ $status -ne 0 ] && grep -q '^check FAILED' "$out"; then
        echo "run-check: failed as expected (exit $status)"
        exit 0
    fi
    echo "run-check: expected a failed check and a non-zero exit, got exit $status"
    exit 1
fi
if [ $status -ne 0 ]; then
    echo "run-check: exit status $status"
    exit 1
fi
if ! grep -q '^check ok$' "$out"; then
    echo "run-check: no 'check ok' line"
    exit 1
fi
fail=0
printf '%s\n' "$wants" | while IFS= read -r re; do
    [ -z "$re" ] && continue
    if ! grep -Eq "$re" "$out"; then
        echo "run-check: output does not match: $re"
        exit 1
    fi
done || fail=1
exit $fail
