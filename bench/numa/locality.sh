#!/usr/bin/env bash
# locality.sh BUILD PROGRAM ARGS... — runs one workload inside the two-node
# qemu guest (tests/numa/guest.sh) under the allocator the harness preloaded
# (its LD_PRELOAD, taken off this script and qemu and given to the workload
# only), with the locality probe in front of it.  The workload's output,
# with the probe's `metric local_pct`, comes back on stdout.  STRATA_*
# variables (a suite's #variant) go along.  Timings under TCG emulation say
# nothing about real speed: only placement is measured.
set -euo pipefail
build=$(cd "${1:?usage: locality.sh BUILD PROGRAM ARGS...}" && pwd)
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
set +e
"$here/../../tests/numa/guest.sh" --cache "$build/numa-guest" --out "$out" --timeout 280 -- env "${envs[@]}" "$@"
rc=$?
set -e
[ $rc -eq 77 ] && echo "check failed: no two-node guest here (see above)"
exit $rc
