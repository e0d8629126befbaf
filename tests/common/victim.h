/* victim.h — for death-test victims: print the address about to be
 * misused (the test matches it against Strata's message), and hide a
 * pointer from the compiler so it cannot reason about the misuse. */
#ifndef STRATA_TEST_VICTIM_H
#define STRATA_TEST_VICTIM_H

#include <stdio.h>

static inline void say(const void *p) {
    printf("%p\n", p);
    fflush(stdout);
}

static inline void *launder(void *p) {
    __asm__ volatile("" : "+r"(p));
    return p;
}

#endif
