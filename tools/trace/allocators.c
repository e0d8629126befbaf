/* allocators.c — which library to preload for an allocator name, and
 * re-executing strata-replay with it (see allocators.h). */
#define _GNU_SOURCE
#include "allocators.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int canonical(char *lib, size_t cap)
{
    char tmp[PATH_MAX];
    if (!realpath(lib, tmp))
        return 0;
    snprintf(lib, cap, "%s", tmp);
    return 1;
}

/* Fills `lib` with the library to preload for `name` ("" for glibc). */
int allocator_library(const char *name, char *lib, size_t cap)
{
    static const struct { const char *name, *path; } known[] = {
        {"jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"},
        {"tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"},
        {"mimalloc", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"},
    };
    /* Peers no distribution packages: scripts/install-peers.sh builds them
     * into the source tree's bench/.peers, or $BENCH_PEERS_DIR, as for the
     * bench harness. */
    static const struct { const char *name, *path; } peers[] = {
        {"mimalloc3", "mimalloc3/libmimalloc.so.3"},
        {"snmalloc", "snmalloc/libsnmallocshim.so"},
    };
    if (strcmp(name, "glibc") == 0 || strcmp(name, "system") == 0) {
        lib[0] = 0;
        return 1;
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(name, known[i].name) == 0) {
            snprintf(lib, cap, "%s", known[i].path);
            return file_exists(lib);
        }
    for (size_t i = 0; i < sizeof peers / sizeof peers[0]; i++)
        if (strcmp(name, peers[i].name) == 0) {
            const char *dir = getenv("BENCH_PEERS_DIR");
            snprintf(lib, cap, "%s/%s", dir && dir[0] ? dir : STRATA_PEERS_DIR, peers[i].path);
            return file_exists(lib) && canonical(lib, cap);
        }
    if (strcmp(name, "strata") == 0) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            self[n] = 0;
            char *dir = dirname(self);
            snprintf(lib, cap, "%s/../libstrata.so", dir);
            if (file_exists(lib))
                return canonical(lib, cap);
            snprintf(lib, cap, "%s/../lib/libstrata.so", dir);
            if (file_exists(lib))
                return canonical(lib, cap);
        }
        snprintf(lib, cap, "%s/libstrata.so", STRATA_INSTALL_LIBDIR);
        return file_exists(lib);
    }
    if (strchr(name, '/')) {
        if (!realpath(name, lib))
            return 0;
        return file_exists(lib);
    }
    snprintf(lib, cap, "%s", name);
    return 0;
}

/* Re-executes with LD_PRELOAD=lib unless that is already in force. */
void allocator_become(const char *name, const char *lib, char **argv)
{
    const char *done = getenv("STRATA_REPLAY_ALLOCATOR");
    if (done && strcmp(done, name) == 0)
        return;
    setenv("STRATA_REPLAY_ALLOCATOR", name, 1);
    /* As the bench harness runs it: mimalloc 3's default transparent huge
     * pages cost whole 2 MiB pages per large block (bench/README.md). */
    if (strcmp(name, "mimalloc3") == 0)
        setenv("MIMALLOC_ALLOW_THP", "0", 0);
    if (lib[0])
        setenv("LD_PRELOAD", lib, 1);
    else
        unsetenv("LD_PRELOAD");
    execv("/proc/self/exe", argv);
    fprintf(stderr, "strata-replay: cannot re-execute with %s: %s\n", name, strerror(errno));
    exit(2);
}

