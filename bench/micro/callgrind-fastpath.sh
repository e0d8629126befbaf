#!/usr/bin/env bash
# callgrind-fastpath.sh [BUILD] — instructions per malloc and per free call
# (callgrind, inclusive of any slow path the call takes, amortized over
# rounds of 64 mallocs then 64 frees of one size), for glibc, jemalloc,
# tcmalloc, mimalloc and Strata.  Exact and load-independent, unlike time.
#   bench/micro/callgrind-fastpath.sh build            # sizes 16 64 1024 16384
#   SIZES="64 262144" ROUNDS=2000 bench/micro/callgrind-fastpath.sh build
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
command -v valgrind >/dev/null || { echo "callgrind-fastpath: valgrind is not installed" >&2; exit 1; }
lib=$(cd "$build" && pwd)/libstrata.so
[ -f "$lib" ] || { echo "callgrind-fastpath: $lib not found (build first)" >&2; exit 1; }
libdir=/usr/lib/x86_64-linux-gnu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -fno-builtin-malloc -fno-builtin-free -o "$work/driver" "$here/fastpath-driver.c"
rounds=${ROUNDS:-5000}
calls=$((rounds * 64))
printf "%-9s %8s %10s %10s\n" allocator size "malloc Ir" "free Ir"
for size in ${SIZES:-16 64 1024 16384}; do
  for a in glibc jemalloc tcmalloc mimalloc strata; do
    case $a in
      glibc) pre= ;;
      jemalloc) pre=$libdir/libjemalloc.so.2 ;;
      tcmalloc) pre=$libdir/libtcmalloc.so.4 ;;
      mimalloc) pre=$libdir/libmimalloc.so.2 ;;
      strata) pre=$lib ;;
    esac
    if [ -n "$pre" ] && [ ! -f "$pre" ]; then printf "%-9s %8s %10s %10s\n" $a $size - -; continue; fi
    rm -f "$work"/out.*
    valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$work/out.%p" \
      env ${pre:+LD_PRELOAD=$pre} "$work/driver" "$size" "$rounds" >/dev/null 2>&1
    out=$(ls -S "$work"/out.* | head -1)
    # inclusive cost of the functions named malloc and free (whatever library defines them)
    callgrind_annotate --inclusive=yes "$out" 2>/dev/null | awk -v calls=$calls -v a=$a -v size=$size '
      { gsub(",", "", $1) }
      $0 ~ /:malloc \[/ && !m { m = $1 }
      $0 ~ /:free \[/ && !f { f = $1 }
      END { printf "%-9s %8s %10.1f %10.1f\n", a, size, m / calls, f / calls }'
  done
done
