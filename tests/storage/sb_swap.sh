#!/bin/sh
# Runs test_sb_swap with swap available: if the node has none, adds a
# 64 MiB swap file for the run and removes it after (needs root; skips,
# 77, where swapon is not allowed).
# usage: sb_swap.sh TEST_SB_SWAP MECH READ WRITE
prog=$1
shift
if [ "$(awk 'NR > 1' /proc/swaps | wc -l)" -gt 0 ]; then
  exec "$prog" "$@"
fi
swap=${TEST_SB_DIR:-/var/tmp}/sb-test-swap.$$
trap 'swapoff "$swap" 2>/dev/null; rm -f "$swap"' EXIT INT TERM
if ! { fallocate -l 64M "$swap" && chmod 600 "$swap" && mkswap -q "$swap" >/dev/null && swapon "$swap"; } 2>/dev/null; then
  echo "SKIP: no swap here and cannot add a swap file (needs root)"
  exit 77
fi
"$prog" "$@"
