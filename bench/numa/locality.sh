#!/usr/bin/env bash
# locality.sh BUILD PROGRAM ARGS...
# locality.sh BUILD --each NAME 'PROGRAM ARGS' [NAME 'PROGRAM ARGS']...
#
# Runs workloads inside the two-node qemu guest (tests/numa/guest.sh) under
# the allocator the harness preloaded (its LD_PRELOAD, taken off this script
# and qemu and given to the workloads only), with the locality probe in front
# of it.  STRATA_* variables (a suite's #variant) go along.  Timings under
# TCG emulation say nothing about real speed: only placement is measured.
#
# One PROGRAM: its output, with the probe's `metric local_pct`, comes back
# on stdout.  --each: the workloads run one after the other in a single boot
# of the guest (the boot is most of a run's time); each one's probe metrics
# come back as `metric local_pct_NAME` and `metric samples_NAME`, then
# `metric local_pct`, the lowest of them, and `check ok` if every workload
# passed its own check.
set -euo pipefail
build=$(cd "${1:?usage: locality.sh BUILD PROGRAM ARGS... | BUILD --each NAME 'PROGRAM ARGS'...}" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
probe="$build/libstrata-locality-probe.so"
[ -e "$probe" ] || { echo "locality.sh: $probe is not built" >&2; exit 1; }
alloc=${LD_PRELOAD:-}
unset LD_PRELOAD
envs=(LD_PRELOAD="$probe${alloc:+ $alloc}")
while IFS='=' read -r name value; do
  case "$name" in STRATA_*) envs+=("$name=$value") ;; esac
done < <(env)
out=$(mktemp -d "$build/numa-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT
guest() { "$here/../../tests/numa/guest.sh" --cache "$build/numa-guest" --out "$out" --timeout 280 -- "$@"; }

if [ "${1:-}" != --each ]; then
  set +e
  guest env "${envs[@]}" "$@"
  rc=$?
  set -e
  [ $rc -eq 77 ] && echo "check failed: no two-node guest here (see above)"
  exit $rc
fi

shift
[ $# -ge 2 ] && [ $(($# % 2)) -eq 0 ] || { echo "locality.sh: --each wants NAME 'PROGRAM ARGS' pairs" >&2; exit 2; }
# The guest runs a script (written into the shared output folder) that runs
# each workload with the probe and the allocator preloaded; the script's own
# shell is not, so only the workloads are sampled.
names=()
{
  while [ $# -gt 0 ]; do
    [[ $1 =~ ^[A-Za-z0-9_]+$ ]] || { echo "locality.sh: bad workload name '$1'" >&2; exit 2; }
    names+=("$1")
    # The command is word-split here, as the suite's own line would be.
    printf 'env %s%s > %q 2>&1; echo $? > %q\n' "$(printf '%q ' "${envs[@]}")" "$2" "$out/$1.log" "$out/$1.rc"
    shift 2
  done
} > "$out/each.sh"
set +e
guest bash "$out/each.sh"
rc=$?
set -e
[ $rc -eq 77 ] && { echo "check failed: no two-node guest here (see above)"; exit 77; }
ok=1 low=""
for n in "${names[@]}"; do
  log="$out/$n.log"
  if [ "$(cat "$out/$n.rc" 2>/dev/null)" != 0 ] || ! grep -q '^check ok' "$log" 2>/dev/null; then
    ok=0
    echo "locality.sh: $n failed (exit $(cat "$out/$n.rc" 2>/dev/null || echo '?')); its output ends:"
    tail -5 "$log" 2>/dev/null | sed 's/^/  /'
    continue
  fi
  pct=$(awk '$1 == "metric" && $2 == "local_pct" {v = $3} END {print v}' "$log")
  samples=$(awk '$1 == "metric" && $2 == "samples" {v = $3} END {print v}' "$log")
  [ -n "$pct" ] || { ok=0; echo "locality.sh: $n printed no local_pct (probe not loaded?)"; continue; }
  echo "metric local_pct_$n $pct"
  echo "metric samples_$n $samples"
  low=$(awk -v a="$pct" -v b="$low" 'BEGIN {print (b == "" || a + 0 < b + 0) ? a : b}')
done
[ -n "$low" ] && echo "metric local_pct $low"
[ $ok = 1 ] && [ $rc -eq 0 ] && { echo "check ok"; exit 0; }
exit 1
