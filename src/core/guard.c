/* guard.c — the hardened build's guard pages say why the process stops.
 * An access to one (an overflow off the end of a segment or of a large
 * block) is a SIGSEGV the kernel raises before Strata can speak; a handler
 * installed at start names it — "strata: heap overflow into a guard page
 * <address>" — and then lets the default action end the process (the same
 * signal, a core), so nothing else about the crash changes.  Installed only
 * where the program has no handler yet; one it installs later replaces it,
 * and storage-backed memory's handler chains to it (src/storage/fault.c).
 * Faults anywhere else are not touched: the default action, as before.
 */
#include "internal.h"

#include <signal.h>
#include <string.h>

#include "../segmap/segmap.h"

#if defined(STRATA_SECURE)
/* What a fault at a says about the heap, or NULL if a is none of Strata's. */
static const char *guard_fault_what(const void *a) {
    segmap_kind kind = segmap_lookup(a);
    if (kind == SEGMAP_SEGMENT) {
        const segment_t *seg = segment_of(a);
        if ((uintptr_t)a - (uintptr_t)seg >= seg->extent - SEGMENT_GUARD_SIZE) return "heap overflow into a guard page";
        return "fault in the heap";
    }
    if (kind == SEGMAP_LARGE) return "fault in a large block's guard page or freed memory";
    return NULL;
}

static void guard_fault(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    const char *what = guard_fault_what(si->si_addr);
    if (what) strata_message("strata: %s %p\n", what, si->si_addr);
    /* Default from now on: returning runs the access again, which ends the
     * process as if no handler had been there (also when chained to). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
}

void guard_handler_install(void) {
    struct sigaction cur;
    if (sigaction(SIGSEGV, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = guard_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
}
#endif
