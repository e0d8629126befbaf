/* cxx_operators.c — every replaceable C++ operator new and delete (plain,
 * array, nothrow, sized, aligned and their combinations, C++98 to C++17),
 * exported under their Itanium-mangled names, so a C++ program's `new`
 * reaches Strata directly instead of through the C++ runtime's operator and
 * its own new-handler loop, and a sized delete keeps the size it is given.
 *
 * Written in C so that libstrata never depends on the C++ runtime: a C
 * program loads no libstdc++.  What only the C++ runtime can do — read the
 * new-handler, throw std::bad_alloc, catch what a handler throws — is reached
 * through weak references, resolved from the program's own C++ runtime when
 * it has one (any program that calls operator new links one):
 *   - the throwing forms loop as the standard says: allocate; on failure call
 *     std::get_new_handler()'s handler and retry, or throw std::bad_alloc
 *     (libstdc++'s or libc++'s __throw_bad_alloc) when there is none;
 *   - the nothrow forms return NULL on failure when no handler is installed;
 *     with one, the standard wants the handler loop with any std::bad_alloc
 *     caught, which C cannot do: the C++ runtime's own nothrow operator
 *     (the next definition, RTLD_NEXT) does exactly that around the throwing
 *     operator, which is this file's.  Both only on the failure path.
 * The exception unwinds through these frames, so the file is compiled with
 * unwind tables (-fexceptions; cmake/StrataLibrary.cmake).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "../../include/strata.h"
#include "../options/options.h"

#if !defined(STRATA_NO_OVERRIDE)

#define STRATA_EXPORT __attribute__((visibility("default")))
#define unlikely(x) __builtin_expect(!!(x), 0)

typedef void (*new_handler_fn)(void);

/* The C++ runtime's, when the program has one: std::get_new_handler() and
 * std::__throw_bad_alloc() of libstdc++ or of libc++. */
extern new_handler_fn _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));
extern void _ZNSt3__117__throw_bad_allocEv(void) __attribute__((weak, noreturn));

static new_handler_fn current_new_handler(void)
{
    return _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
}

__attribute__((noreturn, cold)) static void throw_bad_alloc(size_t size)
{
    if (_ZSt17__throw_bad_allocv)
        _ZSt17__throw_bad_allocv();
    if (_ZNSt3__117__throw_bad_allocEv)
        _ZNSt3__117__throw_bad_allocEv();
    /* Only a program that calls operator new without any C++ runtime. */
    strata_message("strata: operator new(%zu): out of memory, and no C++ runtime to throw std::bad_alloc\n", size);
    abort();
}

/* The throwing forms after a failed allocation: the handler loop.  Each call
 * of the handler must make memory available, install another handler or
 * none, or throw: the loop ends when the allocation succeeds or no handler
 * is left (every round is a fresh allocation attempt, as the standard says). */
__attribute__((noinline, cold)) static void *new_retry(size_t size, size_t align)
{
    for (;;) {
        new_handler_fn h = current_new_handler();
        if (!h)
            throw_bad_alloc(size);
        h();
        void *p = align ? strata_aligned_alloc(align, size) : strata_malloc(size);
        if (p)
            return p;
    }
}

/* The nothrow forms after a failed allocation (see the top of the file). */
__attribute__((noinline, cold)) static void *new_nothrow_retry(const char *name, size_t size, size_t align,
                                                               const void *tag)
{
    if (!current_new_handler())
        return NULL;
    void *next = dlsym(RTLD_NEXT, name);
    if (!next)
        return NULL;
    if (align)
        return ((void *(*)(size_t, size_t, const void *))next)(size, align, tag);
    return ((void *(*)(size_t, const void *))next)(size, tag);
}

/* operator new(0) must return a distinct pointer: strata_malloc(0) does
 * (a block of the smallest class), and so does an aligned request of 0. */
static inline void *new_plain(size_t size)
{
    void *p = strata_malloc(size);
    if (unlikely(!p))
        return new_retry(size, 0);
    return p;
}

static inline void *new_aligned(size_t size, size_t align)
{
    void *p = strata_aligned_alloc(align, size);
    if (unlikely(!p))
        return new_retry(size, align);
    return p;
}

/* ---- operator new -------------------------------------------------------- */

STRATA_EXPORT void *_Znwm(size_t size) { return new_plain(size); }
STRATA_EXPORT void *_Znam(size_t size) { return new_plain(size); }
STRATA_EXPORT void *_ZnwmSt11align_val_t(size_t size, size_t align) { return new_aligned(size, align); }
STRATA_EXPORT void *_ZnamSt11align_val_t(size_t size, size_t align) { return new_aligned(size, align); }

/* The nothrow forms: NULL on failure, never an exception. */
#define NOTHROW_NEW(name)                                                                                    \
    STRATA_EXPORT void *name(size_t size, const void *tag)                                                   \
    {                                                                                                        \
        void *p = strata_malloc(size);                                                                       \
        return unlikely(!p) ? new_nothrow_retry(#name, size, 0, tag) : p;                                    \
    }
#define NOTHROW_NEW_ALIGNED(name)                                                                            \
    STRATA_EXPORT void *name(size_t size, size_t align, const void *tag)                                     \
    {                                                                                                        \
        void *p = strata_aligned_alloc(align, size);                                                         \
        return unlikely(!p) ? new_nothrow_retry(#name, size, align, tag) : p;                                \
    }
NOTHROW_NEW(_ZnwmRKSt9nothrow_t)
NOTHROW_NEW(_ZnamRKSt9nothrow_t)
NOTHROW_NEW_ALIGNED(_ZnwmSt11align_val_tRKSt9nothrow_t)
NOTHROW_NEW_ALIGNED(_ZnamSt11align_val_tRKSt9nothrow_t)

/* ---- operator delete ------------------------------------------------------- */

/* Plain and nothrow deletes: the block's own size is in its page. */
STRATA_EXPORT void _ZdlPv(void *p) { strata_free(p); }
STRATA_EXPORT void _ZdaPv(void *p) { strata_free(p); }
STRATA_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *tag) { (void)tag; strata_free(p); }
STRATA_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *tag) { (void)tag; strata_free(p); }
STRATA_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t align) { (void)align; strata_free(p); }
STRATA_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t align) { (void)align; strata_free(p); }
STRATA_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align, const void *tag)
{
    (void)align;
    (void)tag;
    strata_free(p);
}
STRATA_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align, const void *tag)
{
    (void)align;
    (void)tag;
    strata_free(p);
}

/* Sized deletes (C++14) pass the size the program allocated with to the
 * sized free, which checks it in check mode; aligned ones their alignment too. */
STRATA_EXPORT void _ZdlPvm(void *p, size_t size) { strata_free_sized(p, size); }
STRATA_EXPORT void _ZdaPvm(void *p, size_t size) { strata_free_sized(p, size); }
STRATA_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t size, size_t align)
{
    strata_free_aligned_sized(p, align, size);
}
STRATA_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t size, size_t align)
{
    strata_free_aligned_sized(p, align, size);
}

#endif /* !STRATA_NO_OVERRIDE */
