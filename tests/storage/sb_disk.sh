#!/bin/sh
# Runs test_sb_disk on an 8 MiB tmpfs and a read-only tmpfs mounted in a
# private mount namespace (nothing is mounted outside it), then the same
# small disk in preload mode.  Skips (77)
# where mounts are not allowed.
# usage: sb_disk.sh TEST_SB_DISK MECH
if ! unshare -m true 2>/dev/null; then
  echo "SKIP: needs a private mount namespace (unshare -m) to mount a small tmpfs"
  exit 77
fi
exec unshare -m sh -c '
  d=$(mktemp -d) || exit 1
  mkdir "$d/small" "$d/ro"
  if ! mount -t tmpfs -o size=8m tmpfs "$d/small" || ! mount -t tmpfs -o ro,size=1m tmpfs "$d/ro"; then
    echo "SKIP: cannot mount a tmpfs"; exit 77
  fi
  "$0" "$d/small" "$d/ro" "$1"; rc=$?
  # Preload mode on the full disk (the first run left it empty).
  if [ $rc -eq 0 ]; then
    STRATA_SB_DIR="$d/small" STRATA_SB_BUDGET=2M STRATA_SB_MECHANISM=$1 "$0" --preload; rc=$?
  fi
  umount "$d/small" "$d/ro"; rmdir "$d/small" "$d/ro" "$d"
  exit $rc' "$1" "$2"
