#!/usr/bin/env bash
# install.sh BUILD_DIR CONSUMER_DIR — `make install PREFIX=<tmp>` (which is
# `cmake --install BUILD_DIR --prefix <tmp>`), then build and run a program
# against the installed files twice: with pkg-config, and as the CMake project
# of docs/examples/cmake-consumer using find_package(strata) and the
# strata::strata / strata::strata_static targets.  Both must run as a user
# would run them: with no LD_LIBRARY_PATH.
set -euo pipefail
BUILD=$(readlink -f "${1:?usage: $0 BUILD_DIR CONSUMER_DIR}")
CONSUMER=$(readlink -f "${2:?usage: $0 BUILD_DIR CONSUMER_DIR}")
PREFIX=$(mktemp -d /tmp/strata-install-XXXXXX)
trap 'rm -rf "$PREFIX"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$BUILD" --prefix "$PREFIX" > "$PREFIX.log" 2>&1 || { cat "$PREFIX.log"; rm -f "$PREFIX.log"; fail "cmake --install failed"; }
rm -f "$PREFIX.log"
[ -f "$PREFIX/include/strata.h" ] || fail "strata.h not installed"
pc=$(find "$PREFIX" -name strata.pc | head -1)
[ -n "$pc" ] || fail "no strata.pc installed"
LIBDIR=$(dirname "$(dirname "$pc")")
for f in libstrata.so libstrata.a strata.o cmake/strata/strataConfig.cmake cmake/strata/strataConfigVersion.cmake; do
  [ -e "$LIBDIR/$f" ] || fail "$LIBDIR/$f not installed"
done
echo "installed into $PREFIX (libraries in ${LIBDIR#$PREFIX/})"

# pkg-config, dynamic.
command -v pkg-config >/dev/null || fail "pkg-config missing (apt-get install pkg-config)"
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
flags=$(pkg-config --cflags --libs strata) || fail "pkg-config does not know strata"
[ "$(pkg-config --modversion strata)" = 0.1.0 ] || fail "pkg-config version $(pkg-config --modversion strata)"
cc "$CONSUMER/main.c" $flags -o "$PREFIX/prog_pc" || fail "build with pkg-config flags ($flags) failed"
out=$(env -u LD_LIBRARY_PATH "$PREFIX/prog_pc") || fail "pkg-config program (no LD_LIBRARY_PATH: the .pc file's rpath): $out"
loaded() { env -u LD_LIBRARY_PATH ldd "$1" | awk '$1 ~ /^libstrata\.so/ { print $3 }' | xargs -r readlink -f; }
[ "$(loaded "$PREFIX/prog_pc")" = "$(readlink -f "$LIBDIR/libstrata.so")" ] \
  || fail "the pkg-config program does not load the installed libstrata.so: $(loaded "$PREFIX/prog_pc")"
echo "pkg-config ($flags): $out"
# pkg-config, static (libstrata.a and its private libraries).
cc -static "$CONSUMER/main.c" $(pkg-config --cflags strata) "$LIBDIR/strata.o" $(pkg-config --static --libs-only-l strata | sed 's/-lstrata//') \
  -o "$PREFIX/prog_static" || fail "static build with the installed strata.o failed"
out=$("$PREFIX/prog_static") || fail "static program: $out"
echo "static with installed strata.o: $out"

# CMake find_package.
cmake -S "$CONSUMER" -B "$PREFIX/consumer-build" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" > "$PREFIX/cfg.log" 2>&1 \
  || { cat "$PREFIX/cfg.log"; fail "find_package(strata) project did not configure"; }
cmake --build "$PREFIX/consumer-build" > "$PREFIX/build.log" 2>&1 || { cat "$PREFIX/build.log"; fail "find_package(strata) project did not build"; }
out=$(env -u LD_LIBRARY_PATH "$PREFIX/consumer-build/consumer") || fail "strata::strata program: $out"
echo "find_package, strata::strata: $out"
out=$("$PREFIX/consumer-build/consumer_static") || fail "strata::strata_static program: $out"
echo "find_package, strata::strata_static: $out"
[ "$(loaded "$PREFIX/consumer-build/consumer")" = "$(readlink -f "$LIBDIR/libstrata.so")" ] || fail "consumer is not linked with the installed libstrata.so"
