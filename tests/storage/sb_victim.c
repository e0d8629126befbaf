/* sb_victim.c — a process for sb_kill.sh to kill: it fills 4x its
 * budget of storage-backed memory in the directory given, says "ready",
 * and keeps touching it until killed. */
#include "sb_util.h"

int main(int argc, char **argv) {
    CHECK(argc == 2);
    strata_sb_config c = {.dir = argv[1], .budget = 2 << 20};
    CHECK(strata_sb_init(&c) == 0);
    size_t len = 8 << 20;
    unsigned char *p = strata_sb_malloc(len);
    CHECK(p);
    for (size_t i = 0; i < len; i += 64) p[i] = (unsigned char)i;
    printf("ready\n");
    fflush(stdout);
    for (uint64_t s = 1;;) p[rng_next(&s) % len]++;
}
