#!/usr/bin/env bash
# test-numa.sh BUILD — boots the two-node guest (guest.sh) and runs Strata's
# NUMA checks in it (run-in-guest.sh).  The kernel and initramfs are cached
# in BUILD/numa-guest; the guest's output lands in BUILD/numa-out.
# Exit 77 (skip) when the guest cannot be had.
set -euo pipefail
build=$(cd "${1:?usage: test-numa.sh BUILD}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$build/bin/numa_locality" ] || { echo "test-numa: $build/bin/numa_locality is not built" >&2; exit 1; }
exec "$here/guest.sh" --cache "$build/numa-guest" --out "$build/numa-out" --timeout 240 -- \
  "$here/run-in-guest.sh" "$build"
