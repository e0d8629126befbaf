# common.sh — sourced by the real-program tests.  Usage of a test script:
#   <script>.sh /path/to/libstrata.so
# Each script runs a real program twice — plainly and under
# LD_PRELOAD=libstrata.so — and compares what they print.  Under the preload
# STRATA_SHOW_STATS=1 is set, so each process prints Strata's report at exit:
# that proves the preload was in effect and that Strata served allocations.
set -euo pipefail

LIB=$(readlink -f "${1:?usage: $0 /path/to/libstrata.so}")
[ -f "$LIB" ] || { echo "no library at $LIB"; exit 1; }
WORK=$(mktemp -d /tmp/strata-prog-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# strata_run ERRFILE cmd...: runs cmd under the preload, stderr appended to ERRFILE.
strata_run() {
  local err=$1; shift
  LD_PRELOAD="$LIB" STRATA_SHOW_STATS=1 "$@" 2>>"$err"
}

# check_preloaded ERRFILE [MIN]: Strata printed its report at exit and served
# at least MIN (default 1000) small blocks in one of the processes; no Strata
# error message appeared.
check_preloaded() {
  local err=$1 min=${2:-1000}
  grep -q '^strata: statistics' "$err" || fail "no Strata statistics on stderr: the preload was not in effect"
  local most
  most=$(awk '$1 == "small_allocated" { if ($2 + 0 > m) m = $2 + 0 } END { print m + 0 }' "$err")
  [ "$most" -ge "$min" ] || fail "Strata served only $most small blocks (want >= $min)"
  if grep -E '^strata: .*(invalid pointer|double free|fatal|internal)' "$err"; then
    fail "Strata reported an error"
  fi
  echo "preload in effect: up to $most small blocks served by Strata in one process"
}

# same FILE1 FILE2 WHAT: the two runs printed the same.
same() {
  cmp -s "$1" "$2" || { diff "$1" "$2" | head -20 >&2; fail "$3 differs with and without Strata"; }
}
