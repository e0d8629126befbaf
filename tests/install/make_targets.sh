#!/usr/bin/env bash
# make_targets.sh BUILD_DIR — what `make`, `make install` and `make bench` build.
# `make` builds the target strata-libs: its commands (ninja -t commands) must
# make libstrata.so, libstrata.a, strata.o, libstrata-trace.so and the four
# tools, and compile nothing under tests/ or bench/.  `make bench` builds
# strata-bench-programs: the benchmark programs, still no test.
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR}
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ ! -f "$BUILD/build.ninja" ] || ! command -v ninja >/dev/null; then
  echo "SKIP: $BUILD is not a Ninja build directory"; exit 77
fi
libs=$(ninja -C "$BUILD" -t commands strata-libs)
for out in libstrata.so libstrata.a strata.o libstrata-trace.so bin/strata-trace bin/strata-replay \
           bin/strata-trace-stats bin/strata-tracegen; do
  grep -Eq -- "[ /]${out//./\\.}( |$)" <<<"$libs" || fail "make does not build $out"
done
if grep -E -- "-c [^ ]*/(tests|bench)/" <<<"$libs" | head -3 | grep -q .; then
  fail "make compiles tests or benchmarks: $(grep -E -- "-c [^ ]*/(tests|bench)/" <<<"$libs" | head -3)"
fi
bench=$(ninja -C "$BUILD" -t commands strata-bench-programs)
grep -q -- "bench-launch" <<<"$bench" || fail "make bench does not build the harness's launcher"
grep -E -q -- "-c [^ ]*/bench/" <<<"$bench" || fail "make bench builds no benchmark program"
if grep -E -q -- "-c [^ ]*/tests/" <<<"$bench"; then fail "make bench compiles tests"; fi
echo "ok: make builds $(grep -c . <<<"$libs") steps, none under tests/ or bench/; make bench $(grep -c . <<<"$bench")"
