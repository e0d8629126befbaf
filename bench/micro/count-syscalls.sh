#!/bin/sh
# count-syscalls.sh — counts the memory system calls (madvise, mmap, munmap,
# mprotect, brk) a program makes under each allocator, with strace, one run
# each.  Too slow for the timed bench (strace stops the program at every
# call); the bench's programs print their system time and page faults instead
# (metric sys_s, minflt).
#
# usage: bench/micro/count-syscalls.sh [-b BUILD] [-a glibc,jemalloc,...] [-- COMMAND ARGS...]
# Default command: BUILD/bin/bench-map-churn -r 2 (the C++ map churn).
# Prints one table row per allocator: calls of each, and the run's wall time
# under strace.
set -eu
build=build
allocs=glibc,jemalloc,tcmalloc,mimalloc,strata
while [ $# -gt 0 ]; do
  case $1 in
  -b) build=$2; shift 2 ;;
  -a) allocs=$2; shift 2 ;;
  --) shift; break ;;
  -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "count-syscalls.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v strace >/dev/null || { echo "count-syscalls.sh: strace is not installed" >&2; exit 2; }
[ $# -gt 0 ] || set -- "$build/bin/bench-map-churn" -r 2
lib=/usr/lib/x86_64-linux-gnu
calls="madvise mmap munmap mprotect brk"
printf '| allocator | %s | wall s (under strace) |\n' "$(echo $calls | sed 's/ / | /g')"
printf '|---|%s---:|\n' "$(for c in $calls; do printf -- '---:|'; done)"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for a in $(echo "$allocs" | tr , ' '); do
  case $a in
  glibc) so= ;;
  jemalloc) so=$lib/libjemalloc.so.2 ;;
  tcmalloc) so=$lib/libtcmalloc.so.4 ;;
  mimalloc) so=$lib/libmimalloc.so.2 ;;
  strata) so=$build/libstrata.so ;;
  *) echo "count-syscalls.sh: unknown allocator $a" >&2; exit 2 ;;
  esac
  if [ -n "$so" ] && [ ! -e "$so" ]; then
    echo "| $a | not found: $so |"
    continue
  fi
  t0=$(date +%s.%N)
  # -E sets the preload in the traced program only, not in strace itself.
  if ! strace -f -c -U calls,name -e trace=$(echo $calls | tr ' ' ,) -o "$tmp" \
       ${so:+-E LD_PRELOAD=$so} "$@" >/dev/null 2>&1; then
    echo "| $a | the command failed |"
    continue
  fi
  t1=$(date +%s.%N)
  row="| $a |"
  for c in $calls; do
    n=$(awk -v c="$c" '$2 == c { print $1 }' "$tmp")
    row="$row ${n:-0} |"
  done
  printf '%s %s |\n' "$row" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')"
done
