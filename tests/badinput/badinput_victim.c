/* badinput_victim.c — does one wrong thing with the allocator, chosen by
 * argv[1], after printing the address it is about to misuse (so the test
 * can match it against Strata's message).  Run by badinput_test in a child
 * process; "option NAME" just prints an option's value.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "strata.h"
#include "common/victim.h"


int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *mode = argv[1];
    int on_stack = 42;
    if (!strcmp(mode, "stack")) {
        say(&on_stack);
        free(launder(&on_stack));
    } else if (!strcmp(mode, "foreign")) {          /* memory Strata never saw */
        void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return 2;
        say(m);
        free(launder(m));
    } else if (!strcmp(mode, "wild")) {             /* not even mapped */
        void *w = (void *)(uintptr_t)0x10000040;
        say(w);
        free(launder(w));
    } else if (!strcmp(mode, "realloc_stack")) {
        say(&on_stack);
        void *r = realloc(launder(&on_stack), 100);
        (void)r;                                    /* warn mode: whatever it returned is not ours to free */
    } else if (!strcmp(mode, "middle")) {           /* inside a live block */
        char *p = malloc(64);
        say(p + 8);
        free(launder(p + 8));
    } else if (!strcmp(mode, "double")) {           /* twice in a row */
        void *p = malloc(64);
        say(p);
        free(p);
        free(launder(p));
    } else if (!strcmp(mode, "double_later")) {     /* twice, another free in between */
        void *p = malloc(64), *q = malloc(64);
        say(p);
        free(p);
        free(q);
        free(launder(p));
    } else if (!strcmp(mode, "double_medium")) {
        void *p = malloc(20000), *q = malloc(20000);
        say(p);
        free(p);
        free(q);
        free(launder(p));
    } else if (!strcmp(mode, "double_large")) {
        void *p = malloc(1 << 20);
        say(p);
        free(p);
        free(launder(p));
    } else if (!strcmp(mode, "option") && argc > 2) {
        for (int o = 0; o < STRATA_OPTION_COUNT; o++)
            if (!strcmp(strata_option_name((strata_option_t)o), argv[2])) {
                printf("%ld\n", strata_option_get((strata_option_t)o));
                return 0;
            }
        return 3;
    } else {
        return 2;
    }
    /* Reached only when the error was ignored (STRATA_ON_ERROR=warn). */
    for (int i = 0; i < 1000; i++) free(malloc((size_t)i + 1));
    printf("survived\n");
    return 0;
}
