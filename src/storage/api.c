/* api.c — the strata_sb_* functions: blocks (malloc, calloc, realloc,
 * free), the range operations (acquire, unpin, release, discard) and the
 * statistics.  A block's disk space is reserved when it is allocated
 * (fallocate), so a full disk shows as malloc returning NULL, not as a
 * write-back that cannot happen later.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>

#include "../options/options.h"
#include "../os/os.h"
#include "../os/os_storage.h"
#include "storage.h"

#define RUN_MAX 512   /* granules handled per locked run */

static inline off_t file_off(size_t g) { return (off_t)(g << sb.gran_shift); }

/* Disk space is reserved only once the live blocks outgrow the budget:
 * before that, memory holds everything and nothing needs the disk (a
 * release writes back without a reservation, and a full disk then keeps
 * the data in memory, as with STRATA_SB_NO_RESERVE).  At the crossing
 * every live block is reserved, and from then on each new one; a group
 * (whose budget other members share) reserves from the start.  Returns 0
 * or the errno of the failed reservation of [g, g+n) or of a block before. */
static int reserve(size_t g, size_t n, size_t allocated) {
    if (sb.flags & STRATA_SB_NO_RESERVE) return 0;
    if (!atomic_load_explicit(&sb.reserving, memory_order_acquire)) {
        if (allocated <= (sb.budget_pages << sb.gran_shift)) return 0;
        if (!atomic_exchange(&sb.reserving, true)) {
            /* The live blocks before this one: heads up to the high-water mark. */
            size_t hi = atomic_load(&sb.hiwater);
            for (size_t h = 0; h < hi; h++) {
                if ((sb_peek(h) & (ST_ALLOC | ST_HEAD)) != (ST_ALLOC | ST_HEAD) || h == g) continue;
                size_t len = sb_block_size(sb_addr(h));
                int e = len ? os_file_reserve(sb.fd, file_off(h), (off_t)len) : 0;
                if (e && e != EOPNOTSUPP) return e;
                if (len) h += (len >> sb.gran_shift) - 1;
            }
        }
    }
    int e = os_file_reserve(sb.fd, file_off(g), (off_t)(n << sb.gran_shift));
    return e == EOPNOTSUPP ? 0 : e;
}

static _Atomic int no_room_said;

/* No room for a block: preload mode says so once (it goes on with
 * ordinary memory, which would otherwise pass the budget unseen); the API
 * returns ENOMEM and says so with STRATA_VERBOSE. */
static void *no_room(size_t size, bool preload, int e) {
    if ((preload && !atomic_exchange(&no_room_said, 1)) || opt(STRATA_OPTION_VERBOSE))
        strata_message("strata: storage-backed malloc(%zu): no room in %s: %s%s\n", size, sb.dir, strerror(e),
                       preload ? " (blocks that do not fit use ordinary memory)" : "");
    errno = ENOMEM;
    return NULL;
}

void *sb_alloc(size_t size, size_t align, bool preload) {
    if (size == 0) size = 1;
    if (size > sb.space || align > sb.space) return no_room(size, preload, ENOMEM);
    size_t rounded = (size + sb.gran - 1) & ~(sb.gran - 1);
    size_t usable = 0, allocated = 0;
    pthread_mutex_lock(&sb.lock);
    uint8_t *p = arena_alloc(&sb.arena, rounded, align, &usable, NULL);
    if (p) allocated = sb.allocated += usable;
    pthread_mutex_unlock(&sb.lock);
    if (!p) return no_room(size, preload, ENOMEM);
    size_t g = sb_index(p), n = usable >> sb.gran_shift;
    if (allocated > (sb.budget_pages << sb.gran_shift)) {
        atomic_store(&sb.outgrown, true);
        sb_cleaner_start();
    }
    /* Reads ahead can start (from the file: once evictions have begun). */
    if (atomic_load_explicit(&sb.outgrown, memory_order_relaxed)) sb_ra_reader_start();
    int e = reserve(g, n, allocated);
    if (e) {
        (void)os_file_punch(sb.fd, file_off(g), (off_t)usable);
        pthread_mutex_lock(&sb.lock);
        arena_free(&sb.arena, p, NULL);
        sb.allocated -= usable;
        pthread_mutex_unlock(&sb.lock);
        return no_room(size, preload, e);
    }
    /* STRATA_NUMA: pages filled later (by whichever thread touches them)
     * follow the range's policy, so the block stays on the allocating
     * thread's node under local (docs/numa.md). */
    os_numa_place(p, usable, -1, (int)opt(STRATA_OPTION_NUMA));
    for (size_t i = 0; i < n; i++)
        atomic_store_explicit(&sb.st[g + i], (uint8_t)(ST_ALLOC | (i == 0 ? ST_HEAD : 0)), memory_order_release);
    size_t hi = atomic_load(&sb.hiwater);
    while (hi < g + n && !atomic_compare_exchange_weak(&sb.hiwater, &hi, g + n)) {
    }
    return p;
}

size_t sb_block_size(const void *p) {
    if (!sb_in_space(p)) return 0;
    pthread_mutex_lock(&sb.lock);
    size_t n = arena_usable(&sb.arena, p);
    pthread_mutex_unlock(&sb.lock);
    return n;
}

/* Drops the granules [g, g+n) from memory and from the file and gives them
 * the state `keep` (0 for a free, ALLOC|HEAD bits for a discard).
 *
 * A free punches the file once, over the whole block, after the last
 * run: a punch waits for every direct I/O in flight on the file (the
 * cleaner's write-backs, the reads ahead), so punching run by run (2 MiB)
 * made freeing a 100 MiB block wait fifty times (the graph contraction
 * spent 0.4 s of its 0.9 in such waits).  Nothing can load the freed
 * granules meanwhile (they are no longer part of a block).  A discard
 * punches run by run, before it unlocks: its granules stay part of a live
 * block, and a write there after the unlock must not be punched away. */
static void drop_range(size_t g, size_t n, bool freeing) {
    bool punch_all = false;
    for (size_t i = 0; i < n;) {
        uint8_t states[RUN_MAX];
        size_t k = 0, resident = 0;
        while (k < RUN_MAX && i + k < n) {
            states[k] = sb_lock(g + i + k);
            if (states[k] & ST_RES) resident++;
            k++;
        }
        uint8_t *a = sb_addr(g + i);
        size_t len = k << sb.gran_shift;
        if (sb.mech == STRATA_SB_MECH_MPROTECT) (void)os_sb_protect(a, len, OS_PROT_NONE);
        (void)os_sb_drop(a, len);
        /* Disk space is held by a reservation or by data written back. */
        bool on_disk = atomic_load_explicit(&sb.reserving, memory_order_relaxed);
        for (size_t j = 0; j < k && !on_disk; j++) on_disk = (states[j] & ST_FILE) != 0;
        if (on_disk && freeing) punch_all = true;
        else if (on_disk && os_file_punch(sb.fd, file_off(g + i), (off_t)len) == 0)
            atomic_store_explicit(&sb.stalled_until, 0, memory_order_relaxed);
        if (resident) sb_budget_give(resident);
        size_t pins = 0;
        for (size_t j = 0; j < k; j++) {
            pins += (states[j] & ST_PIN) != 0;
            sb_unlock(g + i + j, freeing ? 0 : (uint8_t)(states[j] & (ST_ALLOC | ST_HEAD)));
        }
        sb_unpinned(pins);
        i += k;
    }
    if (punch_all && os_file_punch(sb.fd, file_off(g), (off_t)(n << sb.gran_shift)) == 0)
        atomic_store_explicit(&sb.stalled_until, 0, memory_order_relaxed);
}

void sb_free_block(void *p) {
    size_t size = sb_block_size(p);
    if (size == 0) {
        strata_error("sb_free(): invalid pointer", p);
        return;
    }
    drop_range(sb_index(p), size >> sb.gran_shift, true);
    pthread_mutex_lock(&sb.lock);
    int r = arena_free(&sb.arena, p, NULL);
    if (r == ARENA_OK) sb.allocated -= size;
    pthread_mutex_unlock(&sb.lock);
    if (r != ARENA_OK) strata_error("sb_free(): double free", p);
}

void *strata_sb_malloc(size_t size) {
    if (sb_in_forked_child("strata_sb_malloc()") || sb_ensure_init()) {
        errno = ENOMEM;
        return NULL;
    }
    return sb_alloc(size, sb.gran, false);
}

void *strata_sb_calloc(size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return strata_sb_malloc(total);   /* new blocks read as zero */
}

void strata_sb_free(void *p) {
    if (!p || sb_in_forked_child(NULL)) return;   /* the child's copy goes with it */
    if (!sb_in_space(p)) {
        strata_error("sb_free(): not a storage-backed block", p);
        return;
    }
    sb_free_block(p);
}

size_t strata_sb_usable_size(const void *p) { return sb_in_forked_child(NULL) ? 0 : sb_block_size(p); }

int strata_sb_owns(const void *p) { return sb_in_space(p) && (sb_peek(sb_index(p)) & ST_ALLOC); }

void *strata_sb_realloc(void *p, size_t size) {
    if (!p) return strata_sb_malloc(size);
    if (sb_in_forked_child("strata_sb_realloc()")) {
        errno = ENOMEM;
        return NULL;
    }
    if (size == 0) {
        strata_sb_free(p);
        return NULL;
    }
    size_t old = sb_block_size(p);
    if (old == 0) {
        strata_error("sb_realloc(): invalid pointer", p);
        return NULL;
    }
    if (size <= old) return p;
    /* Grow in place into free space after the block: no copy, and the
     * new granules read as zero like any fresh ones. */
    size_t rounded = (size + sb.gran - 1) & ~(sb.gran - 1), usable = 0;
    pthread_mutex_lock(&sb.lock);
    bool grown = rounded >= size && arena_resize(&sb.arena, p, rounded, &usable);
    if (grown) sb.allocated += usable - old;
    pthread_mutex_unlock(&sb.lock);
    if (grown) {
        size_t g = sb_index(p) + (old >> sb.gran_shift), n = (usable - old) >> sb.gran_shift;
        pthread_mutex_lock(&sb.lock);
        size_t allocated = sb.allocated;
        pthread_mutex_unlock(&sb.lock);
        if (allocated > (sb.budget_pages << sb.gran_shift)) {
            atomic_store(&sb.outgrown, true);
            sb_cleaner_start();
            sb_ra_reader_start();
        }
        (void)reserve(g, n, allocated);
        for (size_t i = 0; i < n; i++) atomic_store(&sb.st[g + i], (uint8_t)ST_ALLOC);
        size_t hi = atomic_load(&sb.hiwater);
        while (hi < g + n && !atomic_compare_exchange_weak(&sb.hiwater, &hi, g + n)) {
        }
        return p;
    }
    void *q = sb_alloc(size, sb.gran, false);
    if (!q) return NULL;
    memcpy(q, p, old);
    sb_free_block(p);
    return q;
}

/* The granules [*g0, *g1) covering [p, p+len), all in live blocks: 0, or
 * EINVAL with the error reported as `what`. */
static int range_of(const void *p, size_t len, const char *what, size_t *g0, size_t *g1) {
    const uint8_t *a = p;
    if (sb_in_forked_child(what)) return EPERM;
    if (!p || len == 0 || !sb_in_space(p) || len > (size_t)(sb.base + sb.space - a)) goto bad;
    *g0 = sb_index(a);
    *g1 = sb_index(a + len - 1) + 1;
    for (size_t g = *g0; g < *g1; g++)
        if (!(sb_peek(g) & ST_ALLOC)) goto bad;
    return 0;
bad:
    strata_message("strata: %s: %p (+%zu bytes) is not storage-backed memory\n", what, p, len);
    return EINVAL;
}

/* Counts want more granules as pinned if all pinned together stay within
 * the budget (what eviction can never touch must leave it room). */
static bool pin_count(size_t want) {
    size_t cur = atomic_load_explicit(&sb.pinned, memory_order_relaxed);
    do {
        if (cur + want > sb.budget_pages) return false;
    } while (!atomic_compare_exchange_weak_explicit(&sb.pinned, &cur, cur + want, memory_order_acq_rel,
                                                    memory_order_relaxed));
    return true;
}

int strata_sb_acquire(void *p, size_t len, int mode) {
    size_t g0, g1;
    int bad = range_of(p, len, "strata_sb_acquire()", &g0, &g1);
    if (bad) return bad;
    size_t want = 0, pinned = 0;
    for (size_t g = g0; g < g1; g++) want += !(sb_peek(g) & ST_PIN);
    /* Counted in the total pinned before any load, so two acquires that
     * each fit cannot pin more than the budget between them. */
    if (mode & STRATA_SB_OVER) atomic_fetch_add_explicit(&sb.pinned, want, memory_order_acq_rel);
    else if (!pin_count(want)) {
        strata_message("strata: strata_sb_acquire(): %zu bytes would pin more than the budget (%zu KiB pinned "
                       "already)\n", len, (atomic_load(&sb.pinned) << sb.gran_shift) >> 10);
        return ENOMEM;
    }
    bool write = (mode & STRATA_SB_WRITE) != 0;
    int r = 0;
    for (size_t g = g0; g < g1 && !r; g++) {
        /* Load (as on a fault), then pin. */
        for (;;) {
            uint8_t s = sb_lock(g);
            if ((s & ST_RES) && (!write || (s & ST_DIRTY) || sb.mech != STRATA_SB_MECH_MPROTECT)) {
                pinned += !(s & ST_PIN);
                sb_unlock(g, (uint8_t)(s | ST_PIN));
                break;
            }
            sb_unlock(g, s);
            if (sb_fault(g, write) != 0) {
                r = EINVAL;   /* freed meanwhile */
                break;
            }
        }
    }
    /* What was counted but found pinned by another acquire (or freed). */
    if (pinned != want) atomic_fetch_add_explicit(&sb.pinned, pinned - want, memory_order_relaxed);
    return r;
}

int strata_sb_unpin(void *p, size_t len) {
    size_t g0, g1;
    int bad = range_of(p, len, "strata_sb_unpin()", &g0, &g1);
    if (bad) return bad;
    size_t pins = 0;
    for (size_t g = g0; g < g1; g++) {
        uint8_t s = sb_lock(g);
        pins += (s & ST_PIN) != 0;
        sb_unlock(g, (uint8_t)(s & ~ST_PIN));
    }
    sb_unpinned(pins);
    return 0;
}

int strata_sb_release(void *p, size_t len) {
    size_t g0, g1;
    int bad = range_of(p, len, "strata_sb_release()", &g0, &g1);
    if (bad) return bad;
    sb_ra_settle_all();   /* reads in flight hold granules: installed, they can go */
    sb_evict_range(g0, g1, true);
    for (size_t g = g0; g < g1; g++)
        if (sb_peek(g) & ST_RES) return EIO;   /* a write-back failed: the data stayed */
    return 0;
}

size_t strata_sb_release_all(void) {
    if (!atomic_load_explicit(&sb.ready, memory_order_acquire) || sb_in_forked_child(NULL)) return 0;
    sb_ra_settle_all();   /* reads in flight hold granules: installed, they can go */
    return sb_evict_range(0, atomic_load(&sb.hiwater), false) << sb.gran_shift;
}

int strata_sb_discard(void *p, size_t len) {
    size_t g0, g1;
    int bad = range_of(p, len, "strata_sb_discard()", &g0, &g1);
    if (bad) return bad;
    /* Only granules wholly inside the range: the bytes around it keep their data. */
    const uint8_t *a = p;
    if (a != sb_addr(g0)) g0++;
    if (a + len != sb_addr(g1)) g1--;
    if (g1 > g0) drop_range(g0, g1 - g0, false);
    return 0;
}

static uint64_t count_dirty(void) {
    size_t hi = atomic_load(&sb.hiwater), dirty = 0;
    bool scan = sb.wp_async && sb.write_policy == STRATA_SB_LAZY;
    for (size_t g = 0; g < hi; g++) {
        uint8_t s = sb_peek(g);
        if ((s & ST_RES) && (s & ST_DIRTY)) dirty += sb.gran;
    }
    if (scan && hi) {
        /* Written pages the state does not know yet: ask without re-arming. */
        enum { CAP = 64 };
        uintptr_t runs[2 * CAP];
        uintptr_t start = (uintptr_t)sb.base, end = (uintptr_t)sb_addr(hi);
        for (;;) {
            long k = os_pagemap_written(sb.pagemap_fd, start, end, runs, CAP, false);
            if (k <= 0) break;
            for (long r = 0; r < k; r++)
                for (uintptr_t x = runs[2 * r]; x < runs[2 * r + 1]; x += sb.gran)
                    if (!(sb_peek(sb_index((void *)x)) & ST_DIRTY)) dirty += sb.gran;
            if (k < CAP) break;
            start = runs[2 * CAP - 1];
        }
    }
    return dirty;
}

void strata_sb_stats(strata_sb_stats_t *out) {
    memset(out, 0, sizeof *out);
    if (!atomic_load_explicit(&sb.ready, memory_order_acquire) || sb_in_forked_child(NULL)) return;
    out->budget = (uint64_t)(sb.budget_pages + sb.ra_pages) << sb.gran_shift;   /* buffers included */
    out->granularity = sb.gran;
    pthread_mutex_lock(&sb.lock);
    out->allocated = sb.allocated;
    pthread_mutex_unlock(&sb.lock);
    out->resident = (uint64_t)atomic_load(&sb.resident) << sb.gran_shift;
    out->dirty = count_dirty();
    out->bytes_written = atomic_load(&sb.bytes_written);
    out->bytes_read = atomic_load(&sb.bytes_read);
    out->faults = atomic_load(&sb.faults);
    out->prefetches = atomic_load(&sb.prefetches);
    out->write_faults = atomic_load(&sb.write_faults);
    out->evictions = atomic_load(&sb.evictions);
    out->io_ns = atomic_load(&sb.io_ns);
    out->over_budget = atomic_load(&sb.over_budget);
    out->pinned = (uint64_t)atomic_load(&sb.pinned) << sb.gran_shift;
    out->writeback_failures = atomic_load(&sb.writeback_failures);
    out->mechanism = sb.mech;
    out->wp_async = sb.wp_async;
    out->group_members = sb_group_members();
    out->group_budget = sb_group_budget();
    out->group_resident = sb_group_total();
}

/* Bytes as the statistics print them (like src/stats: B, KiB, MiB, GiB). */
static const char *human(char *buf, size_t size, uint64_t v) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double d = (double)v;
    while (d >= 1024 && u < 4) {
        d /= 1024;
        u++;
    }
    if (u == 0) snprintf(buf, size, "%llu B", (unsigned long long)v);
    else snprintf(buf, size, "%.1f %s", d, unit[u]);
    return buf;
}

void sb_stats_print_at_exit(void) {
    if (!atomic_load_explicit(&sb.ready, memory_order_acquire) || sb_in_forked_child(NULL)) return;
    strata_sb_stats_t st;
    strata_sb_stats(&st);
    char out[2048], a[32], b[32], c[32], d[32], e[32], f[32], r[32];
    int n = snprintf(out, sizeof out,
                     "strata: storage-backed memory (%s%s, page %s, read %s, write %s):\n"
                     "  sb_budget      %10s   resident bytes at most%s\n"
                     "  sb_allocated   %10s   bytes in live storage-backed blocks\n"
                     "  sb_resident    %10s   resident now (dirty %s)\n"
                     "  sb_written     %10s   written back to the file, cumulative\n"
                     "  sb_read        %10s   read back from the file, cumulative\n"
                     "  sb_faults      %10llu   loads on access (prefetches %llu, write faults %llu)\n"
                     "  sb_evictions   %10llu   storage pages dropped to make room\n"
                     "  sb_io_ms       %10llu   time in file reads and writes\n"
                     "  sb_over_budget %10llu   loads that found nothing evictable (write-back failures %llu)\n"
                     "  sb_ahead       %10llu   runs the reader thread installed ahead (waits for reads %llu ms, "
                     "evicting in loads %llu ms)\n",
                     st.mechanism == STRATA_SB_MECH_UFFD ? "userfaultfd" : "mprotect",
                     st.wp_async ? " with PAGEMAP_SCAN" : "", human(a, sizeof a, st.granularity),
                     sb.read_policy ? "aggressive" : "lazy", sb.write_policy ? "aggressive" : "lazy",
                     human(b, sizeof b, st.budget), st.group_members ? " (of the group)" : "",
                     human(c, sizeof c, st.allocated), human(d, sizeof d, st.resident), human(e, sizeof e, st.dirty),
                     human(f, sizeof f, st.bytes_written), human(r, sizeof r, st.bytes_read),
                     (unsigned long long)st.faults, (unsigned long long)st.prefetches,
                     (unsigned long long)st.write_faults, (unsigned long long)st.evictions,
                     (unsigned long long)(st.io_ns / 1000000), (unsigned long long)st.over_budget,
                     (unsigned long long)st.writeback_failures, (unsigned long long)atomic_load(&sb.ra_ahead),
                     (unsigned long long)(atomic_load(&sb.ra_wait_ns) / 1000000),
                     (unsigned long long)(atomic_load(&sb.take_evict_ns) / 1000000));
    if (n > 0 && st.group_members)
        n += snprintf(out + n, sizeof out - (size_t)n, "  sb_group       %10d   live members, %s of the group's %s resident\n",
                      st.group_members, human(a, sizeof a, st.group_resident), human(b, sizeof b, st.group_budget));
    size_t len = n < 0 ? 0 : (size_t)n < sizeof out ? (size_t)n : sizeof out - 1;
    for (size_t done = 0; done < len;) {
        ssize_t w = write(STDERR_FILENO, out + done, len - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
}
