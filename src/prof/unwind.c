/* unwind.c — the call stack of a sampled allocation, from the unwind
 * tables (.eh_frame), so programs built without frame pointers still give
 * whole stacks.  A stack whose return addresses all have a checked rule is
 * walked by unwind_cache.c; any other by libgcc's unwinder, which teaches
 * the rules.  libgcc_s is loaded when profiling starts (dlopen, in the
 * constructor: it is already there in any C++ program), so the library
 * needs it only then and links nothing more.  Neither walk calls malloc.
 * With glibc 2.35 or later libgcc finds a PC's tables through
 * _dl_find_object, which takes no lock; older glibc goes through
 * dl_iterate_phdr, which takes the loader's lock (a sample taken while
 * another thread is in dlopen waits for it).  prof_unwind_init walks once,
 * so whatever the unwinder sets up on first use happens there, not inside
 * malloc.  The allocator's own frames (every frame in the object that holds
 * this file, when it is a shared library) are dropped from the top.
 */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <unwind.h>

static uintptr_t self_lo, self_hi;   /* the library's text, when it is its own object */

/* libgcc_s's unwinder, loaded by prof_unwind_init. */
static _Unwind_Reason_Code (*u_backtrace)(_Unwind_Trace_Fn, void *);
static _Unwind_Ptr (*u_get_ip)(struct _Unwind_Context *);
static _Unwind_Word (*u_get_cfa)(struct _Unwind_Context *);
static _Unwind_Word (*u_get_gr)(struct _Unwind_Context *, int);
const void *(*prof_find_fde)(void *pc, void *bases);

typedef struct {
    uintptr_t *pcs;
    int n, max;
    bool learn;
} walk_t;

static _Unwind_Reason_Code walk_frame(struct _Unwind_Context *ctx, void *arg) {
    walk_t *w = arg;
    uintptr_t pc = (uintptr_t)u_get_ip(ctx);
    if (!pc) return _URC_END_OF_STACK;
    if (w->learn) prof_rules_learn(pc, (uintptr_t)u_get_cfa(ctx), (uintptr_t)u_get_gr(ctx, 6));
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
        u_backtrace(walk_frame, &w);
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

bool prof_unwind_init(void) {
    void *h = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return false;
    *(void **)&u_backtrace = dlsym(h, "_Unwind_Backtrace");
    *(void **)&u_get_ip = dlsym(h, "_Unwind_GetIP");
    *(void **)&u_get_cfa = dlsym(h, "_Unwind_GetCFA");
    *(void **)&u_get_gr = dlsym(h, "_Unwind_GetGR");
    *(void **)&prof_find_fde = dlsym(h, "_Unwind_Find_FDE");
    if (!u_backtrace || !u_get_ip || !u_get_cfa || !u_get_gr) return false;
    self_find_t f = {(uintptr_t)prof_unwind_init, 0, 0};
    dl_iterate_phdr(find_self, &f);
    self_lo = f.lo;
    self_hi = f.hi;
    prof_rules_init();
    uintptr_t warm[PROF_MAX_DEPTH];
    prof_backtrace(warm, PROF_MAX_DEPTH);
    return true;
}
