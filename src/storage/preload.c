/* preload.c — preload mode: STRATA_SB_DIR=/scratch STRATA_SB_BUDGET=4G
 * LD_PRELOAD=libstrata.so ./app backs every malloc of at least
 * STRATA_SB_MIN bytes with storage; smaller ones stay in the heaps.  The
 * decision is taken at the first big malloc (not at start-up: opening
 * files and installing signal handlers before main is needlessly early).
 */
#include "preload.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../options/options.h"
#include "storage.h"

enum { UNDECIDED = 0, OFF = 1, ON = 2 };
static _Atomic int mode;
static size_t min_size;
static pthread_mutex_t decide_lock = PTHREAD_MUTEX_INITIALIZER;

extern char **environ;

static int decide(void) {
    pthread_mutex_lock(&decide_lock);
    int m = atomic_load(&mode);
    if (m == UNDECIDED) {
        m = OFF;
        for (char **e = environ; e && *e; e++)
            if (!strncmp(*e, "STRATA_SB_DIR=", 14) && (*e)[14]) m = ON;
        if (m == ON) {
            min_size = (size_t)opt(STRATA_OPTION_SB_MIN);
            if (sb_ensure_init() != 0) {
                strata_message("strata: STRATA_SB_DIR is set but storage-backed memory cannot start; "
                               "using ordinary memory\n");
                m = OFF;
            }
        }
        atomic_store_explicit(&mode, m, memory_order_release);
    }
    pthread_mutex_unlock(&decide_lock);
    return m;
}

/* strata_sb_exempt's depth on this thread. */
static __thread __attribute__((tls_model("initial-exec"))) int exempt;

void strata_sb_exempt(int on) {
    if (on) exempt++;
    else if (exempt > 0) exempt--;
}

void *sb_preload_alloc(size_t size, size_t align) {
    int m = atomic_load_explicit(&mode, memory_order_acquire);
    if (m == OFF || exempt) return NULL;
    /* A refusal leaves errno as it was: the caller goes on with ordinary
     * memory, and a malloc that succeeds does not set errno. */
    int saved = errno;
    if (m == UNDECIDED) m = decide();
    void *p = NULL;
    if (m == ON && size >= min_size && !atomic_load_explicit(&sb.forked, memory_order_relaxed))
        p = sb_alloc(size, align > sb.gran ? align : sb.gran, true);
    if (!p) errno = saved;
    return p;
}

bool sb_preload_free(void *p) {
    if (!sb_in_space(p)) return false;
    strata_sb_free(p);
    return true;
}

size_t sb_preload_usable_size(const void *p) {
    return sb_in_space(p) && !sb_in_forked_child(NULL) ? sb_block_size(p) : 0;
}

bool sb_preload_realloc(void *p, size_t size, void **out) {
    if (!sb_in_space(p)) return false;
    *out = strata_sb_realloc(p, size);
    return true;
}
