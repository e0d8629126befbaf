#!/usr/bin/env bash
# callgrind-pair.sh [-b BUILD] [-B BASE_LIB] [-a ALLOCS] [SIZES...] — instructions
# per malloc/free pair of one block (the pair-sweep shape), by
# callgrind: exact and load-independent, unlike the timed sweep.  Each figure
# is the difference of two runs (N pairs and none) divided by N, so start-up
# costs drop out; everything the pair executes is in it (the loop's own few
# instructions too, the same for every allocator).
#   bench/shapes/callgrind-pair.sh                        # 8 B .. 1 MiB, all five
#   bench/shapes/callgrind-pair.sh -a strata,tcmalloc 64 4096
#   bench/shapes/callgrind-pair.sh -B old/libstrata.so -a base,strata
set -euo pipefail
build=build base= allocs=glibc,jemalloc,tcmalloc,mimalloc,strata
while getopts b:B:a: o; do
  case $o in
    b) build=$OPTARG ;;
    B) base=$OPTARG ;;
    a) allocs=$OPTARG ;;
    *) echo "usage: $0 [-b build] [-B base_lib] [-a allocs] [sizes...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
sizes=${*:-8 64 256 1024 2048 4096 16384 65536 131072 262144 1048576}
command -v valgrind >/dev/null || { echo "callgrind-pair: valgrind is not installed" >&2; exit 1; }
libdir=/usr/lib/x86_64-linux-gnu
n=${PAIRS:-20000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/pair.c" <<'C'
#include <stdlib.h>
__attribute__((noinline)) static void escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }
int main(int argc, char **argv) {
    size_t size = strtoul(argv[1], 0, 0);
    long n = strtol(argv[2], 0, 0);
    for (long i = 0; i < n; i++) { void *p = malloc(size); escape(p); free(p); }
    return 0;
}
C
cc -O2 -fno-builtin-malloc -fno-builtin-free -o "$work/pair" "$work/pair.c"
lib_of() {
  case $1 in
    glibc) echo "" ;;
    strata) echo "$(cd "$build" && pwd)/libstrata.so" ;;
    base) echo "${base:-/nonexistent}" ;;
    jemalloc) echo "$libdir/libjemalloc.so.2" ;;
    tcmalloc) echo "$libdir/libtcmalloc.so.4" ;;
    mimalloc) echo "$libdir/libmimalloc.so.2" ;;
    *) echo "callgrind-pair: unknown allocator $1" >&2; exit 2 ;;
  esac
}
total() {   # total instructions of the program's run: pre size pairs
  rm -f "$work"/out.*
  valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$work/out.%p" \
    env ${1:+LD_PRELOAD=$1} "$work/pair" "$2" "$3" >/dev/null 2>&1
  awk '/^summary:/ { print $2; exit }' "$(ls -S "$work"/out.* | head -1)"
}
IFS=, read -r -a names <<<"$allocs"
printf "%-9s" size; for a in "${names[@]}"; do printf " %9s" "$a"; done; printf "\n"
for s in $sizes; do
  printf "%-9s" "$s"
  for a in "${names[@]}"; do
    pre=$(lib_of "$a")
    if [ -n "$pre" ] && [ ! -f "$pre" ]; then printf " %9s" -; continue; fi
    t0=$(total "$pre" "$s" 0); t1=$(total "$pre" "$s" "$n")
    printf " %9d" $(((t1 - t0) / n))
  done
  printf "\n"
done
