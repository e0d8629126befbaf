#!/bin/sh
# run-cxx.sh CXX BUILD_DIR — the C++ operators of libstrata, with one C++
# compiler (g++ or clang++; exit 77, skipped, when it is not installed).
#
# Builds tests/cxx/cxx_operators.cpp three ways — linked with libstrata.so,
# linked with build/strata.o (the static override object), and not linked
# at all but run with libstrata.so preloaded — and runs each: every check of
# the standard's rules must pass, every operator must be Strata's own, and a
# sized delete given a size past its block must reach Strata's sized free
# (reported under STRATA_CHECK=1).  Also: libstrata.so needs no C++ runtime
# (no libstdc++/libc++ in its DT_NEEDED; a C program preloading it maps none).
cxx=$1
build=$(cd "$2" && pwd)
src=$(cd "$(dirname "$0")" && pwd)/cxx_operators.cpp
command -v "$cxx" >/dev/null 2>&1 || { echo "SKIP: no $cxx"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok    $1"; }
bad() { failed=$((failed + 1)); echo "FAIL  $1"; }

if readelf -d "$build/libstrata.so" | grep NEEDED | grep -Eq 'libstdc\+\+|libc\+\+'; then
  bad "libstrata.so needs a C++ runtime: $(readelf -d "$build/libstrata.so" | grep NEEDED | tr -s ' ')"
else
  ok "libstrata.so needs no C++ runtime"
fi
if LD_PRELOAD=$build/libstrata.so cat /proc/self/maps | grep -Eq 'libstdc\+\+|libc\+\+'; then
  bad "a C program preloading libstrata.so maps a C++ runtime"
else
  ok "a C program preloading libstrata.so maps no C++ runtime"
fi

# -O0: a new-expression's allocation may be elided when optimized; the
# sized and aligned forms asked for explicitly (clang before 19 needs it).
flags="-std=c++17 -O0 -fsized-deallocation -faligned-new -Wall -Wextra -Werror"
build_one() { # name, extra arguments
  name=$1
  shift
  if "$cxx" $flags -o "$tmp/$name" "$src" "$@" >"$tmp/$name.log" 2>&1; then
    return 0
  fi
  cat "$tmp/$name.log"
  bad "$cxx: building the $name test"
  return 1
}
run_one() { # how, command...
  how=$1
  shift
  out=$("$@" 2>&1)
  rc=$?
  if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^[0-9]* passed, 0 failed$'; then
    ok "$cxx, $how: $(printf '%s\n' "$out" | tail -1)"
  else
    printf '%s\n' "$out"
    bad "$cxx, $how (exit $rc)"
  fi
}
sized_lie() { # how, command...
  how=$1
  shift
  out=$(STRATA_CHECK=1 "$@" sized-lie 2>&1)
  rc=$?
  if [ $rc -ne 0 ] && printf '%s\n' "$out" | grep -q '^strata: free_sized(): size larger than the block'; then
    ok "$cxx, $how: sized delete reaches Strata's sized free"
  else
    printf '%s\n' "$out"
    bad "$cxx, $how: a sized delete with a wrong size went unreported (exit $rc)"
  fi
}

if build_one linked -L"$build" -lstrata -Wl,-rpath,"$build" -ldl; then
  run_one "linked with libstrata.so" "$tmp/linked"
  sized_lie "linked with libstrata.so" "$tmp/linked"
fi
if build_one object "$build/strata.o" -ldl -pthread; then
  run_one "linked with strata.o" "$tmp/object"
  sized_lie "linked with strata.o" "$tmp/object"
fi
if build_one plain -ldl; then
  run_one "libstrata.so preloaded" env LD_PRELOAD="$build/libstrata.so" "$tmp/plain"
  sized_lie "libstrata.so preloaded" env LD_PRELOAD="$build/libstrata.so" "$tmp/plain"
fi
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
