#!/bin/sh
# Runs test_sb_disk on an 8 MiB tmpfs and a read-only tmpfs mounted in a
# private mount namespace (nothing is mounted outside it).  Skips (77)
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
  umount "$d/small" "$d/ro"; rmdir "$d/small" "$d/ro" "$d"
  exit $rc' "$1" "$2"
