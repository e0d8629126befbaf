/* victim.c — prints NAME=VALUE for each option named on the command line,
 * as Strata read it from the environment, and nothing else; with --json,
 * strata_stats_json() instead. */
#include <stdio.h>
#include <stdlib.h>
#include <strata.h>
#include <string.h>

int main(int argc, char **argv) {
    free(malloc(16));   /* Strata is initialised, the environment read */
    if (argc > 1 && !strcmp(argv[1], "--json")) {
        static char buf[1 << 16];
        strata_stats_json(buf, sizeof buf);
        puts(buf);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        long v = -99;
        for (int o = 0; o < STRATA_OPTION_COUNT; o++)
            if (!strcmp(strata_option_name((strata_option_t)o), argv[i])) v = strata_option_get((strata_option_t)o);
        printf("%s=%ld\n", argv[i], v);
    }
    return 0;
}
