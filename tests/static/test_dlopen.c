/* test_dlopen.c — Strata loaded at run time with dlopen (a plugin, or a
 * language runtime loading it late), not preloaded or linked: its thread-
 * local state must work in a library loaded after start, from the main
 * thread and from threads, with frees across threads.  The program keeps
 * using libc's malloc; Strata is called through the strata_* names.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/check.h"

static void *(*s_malloc)(size_t);
static void (*s_free)(void *);
static int (*s_owns)(const void *);

enum { N = 20000 };
static void *from_main[N];

static void *thread_main(void *arg) {
    (void)arg;
    int bad = 0;
    for (int i = 0; i < N; i++) s_free(from_main[i]);          /* frees of the main thread's blocks */
    for (int i = 0; i < N; i++) {
        char *p = s_malloc((size_t)i % 5000 + 1);
        if (!p || !s_owns(p)) { bad++; continue; }
        memset(p, 7, (size_t)i % 5000 + 1);
        s_free(p);
    }
    return bad ? (void *)1 : NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s path/to/libstrata.so\n", argv[0]); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    s_malloc = (void *(*)(size_t))dlsym(lib, "strata_malloc");
    s_free = (void (*)(void *))dlsym(lib, "strata_free");
    s_owns = (int (*)(const void *))dlsym(lib, "strata_owns");
    if (!s_malloc || !s_free || !s_owns) { fprintf(stderr, "dlsym: %s\n", dlerror()); return 1; }

    for (int i = 0; i < N; i++) {
        from_main[i] = s_malloc((size_t)i % 3000 + 8);
        CHECK(from_main[i] && s_owns(from_main[i]));
        if (!from_main[i]) return 1;
        memset(from_main[i], 1, (size_t)i % 3000 + 8);
    }
    void *mine = malloc(64);                 /* libc's, untouched by the dlopen */
    CHECK(mine && !s_owns(mine));
    free(mine);
    pthread_t t[2];
    void *r0 = NULL, *r1 = NULL;
    CHECK(pthread_create(&t[0], NULL, thread_main, NULL) == 0);
    pthread_join(t[0], &r0);
    for (int i = 0; i < N; i++) { from_main[i] = s_malloc(64); CHECK(from_main[i] != NULL); }
    CHECK(pthread_create(&t[1], NULL, thread_main, NULL) == 0);
    pthread_join(t[1], &r1);
    CHECK(r0 == NULL && r1 == NULL);
    if (check_failures) return check_report("dlopen");
    printf("dlopen: Strata works when loaded at run time\n");
    return 0;
}
