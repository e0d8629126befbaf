#!/usr/bin/env bash
# pair-compare.sh [-b BUILD] [-B BASE_LIB] [-r ROUNDS] [-a ALLOCS] -- PROGRAM ARGS...
# Runs one workload under several allocators interleaved (strata, glibc,
# tcmalloc, mimalloc, jemalloc, then again, ROUNDS times), so a machine
# shared with other jobs loads them alike, and prints the median of every
# `metric NAME VALUE` line per allocator, one column each, with the load
# average before and after.  For the pair and producer-consumer
# targets on a busy machine (-B names another libstrata.so, the allocator
# `base` in ALLOCS: a before/after comparison in the same run):
#   bench/shapes/pair-compare.sh -r 5 -- build/bin/bench-pair-sweep -n 100000
#   bench/shapes/pair-compare.sh -r 5 -- build/bin/bench-prodcons -p
set -euo pipefail
build=build base= rounds=5 allocs=strata,glibc,tcmalloc,mimalloc,jemalloc
while getopts b:B:r:a: o; do
  case $o in
    b) build=$OPTARG ;;
    B) base=$OPTARG ;;
    r) rounds=$OPTARG ;;
    a) allocs=$OPTARG ;;
    *) echo "usage: $0 [-b build] [-r rounds] [-a allocs] -- program args..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift
[ $# -ge 1 ] || { echo "$0: no program given" >&2; exit 2; }
libdir=/usr/lib/x86_64-linux-gnu
lib_of() {
  case $1 in
    glibc) echo "" ;;
    strata) echo "$(cd "$build" && pwd)/libstrata.so" ;;
    base) echo "${base:-/nonexistent}" ;;
    tcmalloc) echo "$libdir/libtcmalloc.so.4" ;;
    mimalloc) echo "$libdir/libmimalloc.so.2" ;;
    jemalloc) echo "$libdir/libjemalloc.so.2" ;;
    *) echo "$0: unknown allocator $1" >&2; exit 2 ;;
  esac
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "load before: $(uptime)"
IFS=, read -r -a names <<<"$allocs"
for ((r = 0; r < rounds; r++)); do
  for a in "${names[@]}"; do
    pre=$(lib_of "$a")
    if [ -n "$pre" ] && [ ! -f "$pre" ]; then continue; fi
    env ${pre:+LD_PRELOAD=$pre} "$@" 2>/dev/null | awk -v a="$a" '$1 == "metric" { print a, $2, $3 }' >>"$work/all"
  done
done
echo "load after:  $(uptime)"
# median per allocator and metric; columns in the order given
awk -v order="$allocs" '
  { k = $2; v[$1, k, ++n[$1, k]] = $3; if (!(k in seen)) { seen[k] = ++nk; keys[nk] = k } }
  END {
    na = split(order, al, ",")
    printf "%-22s", "metric"; for (i = 1; i <= na; i++) printf " %10s", al[i]; printf "\n"
    for (j = 1; j <= nk; j++) {
      k = keys[j]; printf "%-22s", k
      for (i = 1; i <= na; i++) {
        c = n[al[i], k]
        if (!c) { printf " %10s", "-"; continue }
        for (x = 1; x <= c; x++) s[x] = v[al[i], k, x]
        for (x = 1; x <= c; x++) for (y = x + 1; y <= c; y++) if (s[y] + 0 < s[x] + 0) { t = s[x]; s[x] = s[y]; s[y] = t }
        printf " %10s", (c % 2) ? s[(c + 1) / 2] : sprintf("%.3g", (s[c / 2] + s[c / 2 + 1]) / 2)
      }
      printf "\n"
    }
  }' "$work/all"
