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
#include <unwind.h>

static uintptr_t self_lo, self_hi;   /* the library's text, when it is its own object */

typedef struct {
    uintptr_t *pcs;
    int n, max;
    bool in_self;
} walk_t;

static _Unwind_Reason_Code walk_frame(struct _Unwind_Context *ctx, void *arg) {
    walk_t *w = arg;
    uintptr_t pc = (uintptr_t)_Unwind_GetIP(ctx);
    if (!pc) return _URC_END_OF_STACK;
    if (w->in_self) {
        if (pc >= self_lo && pc < self_hi) return _URC_NO_REASON;
        w->in_self = false;
    }
    w->pcs[w->n++] = pc;
    return w->n == w->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

int prof_backtrace(uintptr_t *pcs, int max) {
    walk_t w = {pcs, 0, max, self_hi != 0};
    _Unwind_Backtrace(walk_frame, &w);
    return w.n;
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
    uintptr_t warm[8];
    prof_backtrace(warm, 8);
}
