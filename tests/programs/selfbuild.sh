#!/usr/bin/env bash
# selfbuild.sh SOURCE_DIR — Strata's own build (cmake configure, then ninja
# compiling and linking the library) with every process under the preload.
# The library built this way must then work: it is preloaded into python3,
# which must print the right answer while Strata reports statistics.
LIBARG=${1:?usage: $0 /path/to/libstrata.so /path/to/strata/source}
SRC=$(readlink -f "${2:?usage: $0 /path/to/libstrata.so /path/to/strata/source}")
source "$(dirname "$0")/common.sh" "$LIBARG"
command -v cmake >/dev/null && command -v ninja >/dev/null || fail "cmake and ninja needed"

# Only the libraries: the tests, tools and benchmarks are built elsewhere.
strata_run "$WORK/err" cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSTRATA_BUILD_TESTS=OFF -DSTRATA_BUILD_TOOLS=OFF -DSTRATA_BUILD_BENCH=OFF > "$WORK/configure.log" \
  || { cat "$WORK/configure.log"; tail -40 "$WORK/err" >&2; fail "cmake configure failed under Strata"; }
strata_run "$WORK/err" ninja -C "$WORK/build" -j 2 > "$WORK/build.log" \
  || { tail -40 "$WORK/build.log"; tail -40 "$WORK/err" >&2; fail "ninja failed under Strata"; }
check_preloaded "$WORK/err" 1000
for f in libstrata.so libstrata.a strata.o; do [ -s "$WORK/build/$f" ] || fail "the build made no $f"; done

# The self-built library works: python3 gives the same answer under it as without it.
: > "$WORK/err2"
code='print(sum(len(str(i) * 3) for i in range(200000)), sorted({str(i): i for i in range(50000)})[-1])'
want=$(/usr/bin/python3 -c "$code")
got=$(LD_PRELOAD="$WORK/build/libstrata.so" STRATA_SHOW_STATS=1 PYTHONMALLOC=malloc /usr/bin/python3 -c "$code" 2>>"$WORK/err2") \
  || { cat "$WORK/err2" >&2; fail "python3 under the self-built library failed"; }
[ "$got" = "$want" ] || fail "python3 under the self-built library printed '$got', want '$want'"
check_preloaded "$WORK/err2" 1000
# ninja shows the compilers' stderr (their reports) in its own output.
n=$(cat "$WORK/err" "$WORK/build.log" | grep -c 'strata: statistics')
[ "$n" -ge 10 ] || fail "only $n processes of the build reported Strata statistics"
echo "self-build: $n processes of cmake, ninja, gcc and ld ran under Strata; the library built works"
