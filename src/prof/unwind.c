/* unwind.c — the call stack of a sampled allocation, from the unwind
 * tables (.eh_frame), so programs built without frame pointers still give
 * whole stacks.  libgcc's unwinder is linked into the library statically
 * (and hidden), so it adds no runtime dependency.  With glibc 2.35 or later
 * it finds a PC's tables through _dl_find_object, which takes no lock and
 * never allocates; older glibc goes through dl_iterate_phdr, which takes
 * the loader's lock (a sample taken while another thread is in dlopen
 * waits for it).  prof_unwind_init walks once at start, so whatever the
 * unwinder sets up on first use happens there, not inside malloc or a
 * signal handler.  The allocator's own frames (every frame in the object
 * that holds this file, when it is a shared library) are dropped from the
 * top of the stack.
 */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <link.h>
#include <string.h>
#include <unwind.h>

static uintptr_t self_lo, self_hi;   /* the library's text, when it is its own object */

typedef struct {
    uintptr_t *pcs;
    int n, max;
    bool learn;
} walk_t;

static _Unwind_Reason_Code walk_frame(struct _Unwind_Context *ctx, void *arg) {
    walk_t *w = arg;
    uintptr_t pc = (uintptr_t)_Unwind_GetIP(ctx);
    if (!pc) return _URC_END_OF_STACK;
    if (w->learn) prof_rules_learn(pc, (uintptr_t)_Unwind_GetCFA(ctx), (uintptr_t)_Unwind_GetGR(ctx, 6));
    w->pcs[w->n++] = pc;
    return w->n == w->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

/* Drops the library's own frames from the top of the stack. */
static int drop_self(uintptr_t *pcs, int n) {
    int k = 0;
    if (self_hi)
        while (k < n && pcs[k] >= self_lo && pcs[k] < self_hi) k++;
    if (k) memmove(pcs, pcs + k, (size_t)(n - k) * sizeof *pcs);
    return n - k;
}

/* The fast walk when every address on the stack has a checked rule
 * (unwind_cache.c), else libgcc's, which teaches the rules.  This function
 * keeps a frame pointer so the walk knows its caller's registers. */
#if defined(__x86_64__) && !defined(__clang__)
#define FAST_WALK 1
__attribute__((noinline, optimize("no-omit-frame-pointer")))
#else
__attribute__((noinline))
#endif
int prof_backtrace(uintptr_t *pcs, int max) {
    int n = -1;
#if defined(FAST_WALK)
    const uintptr_t *fp = __builtin_frame_address(0);
    n = prof_rules_walk(pcs, max, fp[1], (uintptr_t)(fp + 2), fp[0]);
#endif
    if (n < 0) {
        walk_t w = {pcs, 0, max, prof_rules_learning(true)};
        _Unwind_Backtrace(walk_frame, &w);
        if (w.learn) {
            prof_rules_learn_last(w.n < max);   /* (an outermost rule is all it can confirm) */
            prof_rules_learning(false);
        }
        n = w.n;
    }
    return drop_self(pcs, n);
}

typedef struct {
    uintptr_t pc;
    uintptr_t lo, hi;
} self_find_t;

static bool holds(const struct dl_phdr_info *info, uintptr_t pc) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && pc >= lo && pc < lo + ph->p_memsz) return true;
    }
    return false;
}

/* The object holding pc, unless it is the program itself (static link:
 * then nothing is dropped by address; the first object listed is the
 * program). */
static int find_self(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    self_find_t *f = arg;
    if (!holds(info, f->pc)) return 0;
    if (!info->dlpi_name || !info->dlpi_name[0]) return 1;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (!f->lo || lo < f->lo) f->lo = lo;
        if (hi > f->hi) f->hi = hi;
    }
    return 1;
}

void prof_unwind_init(void) {
    self_find_t f = {(uintptr_t)prof_unwind_init, 0, 0};
    dl_iterate_phdr(find_self, &f);
    self_lo = f.lo;
    self_hi = f.hi;
    prof_rules_init();
    uintptr_t warm[PROF_MAX_DEPTH];
    prof_backtrace(warm, PROF_MAX_DEPTH);
}
