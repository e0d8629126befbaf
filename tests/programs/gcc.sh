#!/usr/bin/env bash
# gcc.sh — gcc (driver, cc1, as, collect2, ld, all preloaded) compiles a
# small program with and without Strata; the object files must be identical
# and the program, run under Strata too, must print the known answer.
source "$(dirname "$0")/common.sh"
command -v gcc >/dev/null || fail "gcc missing (apt-get install gcc)"

cat > "$WORK/prog.c" <<'CEOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void *a, const void *b) { return (*(const long *)a > *(const long *)b) - (*(const long *)a < *(const long *)b); }
int main(void) {
    enum { N = 100000 };
    long *a = malloc(N * sizeof *a);
    char *sieve = calloc(N, 1);
    if (!a || !sieve) return 1;
    for (long i = 0; i < N; i++) a[i] = (i * 7919) % N;
    qsort(a, N, sizeof *a, cmp);
    long primes = 0, sum = 0;
    for (long i = 2; i < N; i++) {
        if (sieve[i]) continue;
        primes++;
        for (long j = i * i; j < N; j += i) sieve[j] = 1;
    }
    for (long i = 0; i < N; i++) sum += a[i] == i;
    char *s = strdup("strata");
    printf("%ld primes below %d, %ld in place, %s\n", primes, N, sum, s);
    free(s); free(sieve); free(a);
    return 0;
}
CEOF
WANT="9592 primes below 100000, 100000 in place, strata"

mkdir -p "$WORK/plain" "$WORK/strata"
(cd "$WORK/plain" && gcc -O2 -c ../prog.c -o prog.o && gcc prog.o -o prog) || fail "gcc failed without Strata"
(cd "$WORK/strata" && strata_run "$WORK/err" gcc -O2 -c ../prog.c -o prog.o && strata_run "$WORK/err" gcc prog.o -o prog) \
  || { cat "$WORK/err" >&2; fail "gcc failed under Strata"; }
cmp "$WORK/plain/prog.o" "$WORK/strata/prog.o" || fail "object files differ with and without Strata"
got=$("$WORK/strata/prog")
[ "$got" = "$WANT" ] || fail "program printed '$got', want '$WANT'"
got=$(LD_PRELOAD="$LIB" "$WORK/strata/prog")
[ "$got" = "$WANT" ] || fail "program under Strata printed '$got', want '$WANT'"
check_preloaded "$WORK/err" 1000
echo "gcc: identical object, program prints: $got"
