/* main.c — a program built against an installed Strata (through pkg-config
 * or find_package(strata)).  It checks the installed header's version and
 * that Strata serves malloc, including libc's own internal allocations.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strata.h>

int main(void) {
    char *p = malloc(32);
    char *s = strdup("installed");
    if (!p || !s) return 1;
    memset(p, 0, 32);
    int ok = strata_owns(p) && strata_owns(s) && STRATA_VERSION >= 100;
    strata_stats_t st;
    strata_stats_get(&st);
    ok = ok && st.small_allocated >= 2;
    free(s);
    free(p);
    printf("%s: Strata %d.%d.%d %s\n", ok ? "ok" : "FAIL", STRATA_VERSION_MAJOR, STRATA_VERSION_MINOR,
           STRATA_VERSION_PATCH, ok ? "serves malloc" : "does not serve malloc");
    return ok ? 0 : 1;
}
