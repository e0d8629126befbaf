#!/bin/sh
# Runs a command the way a user without Strata would run a program bigger
# than its memory: in a memory cgroup limited to LIMIT, with a swap file to
# page to.  Sets both up and tears both down (also when the command fails).
# cgroup v1 (this machine) or v2.  Needs root.
# usage: in-swap-cgroup.sh LIMIT(e.g. 64M) SWAPFILE_SIZE(e.g. 1G) COMMAND...
set -u
limit=$1 swapsize=$2
shift 2
bytes() { numfmt --from=iec "$1"; }
swapdir=${STRATA_BENCH_SWAPDIR:-/var/tmp}
swap=$swapdir/strata-bench-swap.$$
name=strata-sb-bench.$$
if [ -d /sys/fs/cgroup/memory ]; then
  cg=/sys/fs/cgroup/memory/$name; limfile=memory.limit_in_bytes
else
  cg=/sys/fs/cgroup/$name; limfile=memory.max
fi
cleanup() {
  [ -d "$cg" ] && { cat "$cg/cgroup.procs" 2>/dev/null | while read -r p; do echo "$p" > "$(dirname "$cg")/cgroup.procs" 2>/dev/null; done; rmdir "$cg" 2>/dev/null; }
  swapoff "$swap" 2>/dev/null
  rm -f "$swap"
}
trap cleanup EXIT INT TERM
fallocate -l "$swapsize" "$swap" && chmod 600 "$swap" && mkswap -q "$swap" >/dev/null && swapon "$swap" ||
  { echo "check failed: cannot set up a swap file in $swapdir"; exit 1; }
mkdir "$cg" && echo "$(bytes "$limit")" > "$cg/$limfile" ||
  { echo "check failed: cannot make a memory cgroup"; exit 1; }
[ -f "$cg/memory.swappiness" ] && echo 60 > "$cg/memory.swappiness" 2>/dev/null
# The command runs in the cgroup; this shell stays to tear it down.
sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$@"
