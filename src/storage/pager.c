/* pager.c — moving runs of granules between memory and the backing file.
 * A run is contiguous in memory and in the file (the file offset is the
 * distance from the space's start), so each stretch of dirty granules is
 * one write and each stretch of stored granules one read.  Granules the
 * file has never held are filled with zeros, never read.
 *
 * Eviction first makes the run read-only, so no write can slip in between
 * the write-back and the drop (a writer faults and waits on the granule's
 * lock); then it writes back what is dirty, then drops the pages.  A write
 * that fails (ENOSPC, EIO, a short write that cannot finish) leaves every
 * granule of the run resident and dirty: its data is never lost.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "../options/options.h"
#include "../os/os.h"
#include "../os/os_storage.h"
#include "storage.h"

static int scratch_claim(void) {
    for (;;) {
        uint32_t used = atomic_load_explicit(&sb.scratch_used, memory_order_relaxed);
        for (int i = 0; i < SB_SCRATCH_SLOTS; i++) {
            if (used & (1u << i)) continue;
            if (atomic_compare_exchange_weak_explicit(&sb.scratch_used, &used, used | (1u << i),
                                                      memory_order_acquire, memory_order_relaxed))
                return i;
            break;   /* used changed: look again */
        }
        if (used == (1u << SB_SCRATCH_SLOTS) - 1) sched_yield();
    }
}

static void scratch_put(int slot) {
    atomic_fetch_and_explicit(&sb.scratch_used, ~(1u << slot), memory_order_release);
}

/* strerror is not async-signal-safe (locales); the reasons I/O can give. */
static const char *reason(int e) {
    switch (e) {
    case ENOSPC: return "No space left on device";
    case EDQUOT: return "Disk quota exceeded";
    case EIO: return "Input/output error";
    case EFBIG: return "File too large";
    case EROFS: return "Read-only file system";
    case EBADF: return "Bad file descriptor";
    case EFAULT: return "Bad address";
    default: return "I/O error";
    }
}

static inline off_t file_off(const void *p) { return (off_t)((const uint8_t *)p - sb.base); }

/* Writes are tracked (only written granules go back) in lazy-write mode
 * when the mechanism can see writes. */
static inline bool tracking_writes(void) {
    return sb.write_policy == STRATA_SB_LAZY && (sb.mech == STRATA_SB_MECH_MPROTECT || sb.wp_async);
}

void sb_read_failed(int e, const void *addr) {
    strata_message("strata: storage-backed read failed: %s at %p (the data cannot be brought back)\n", reason(e),
                   addr);
    abort();
}

static void fill(uint8_t *dst, size_t len, bool from_file, bool wp) {
    bool uffd = sb.mech == STRATA_SB_MECH_UFFD;
    if (!from_file && !uffd) return;           /* a dropped page reads as zero */
    if (!from_file && !sb.zero_copy) {
        /* The zero page: no copy, no memory until written, and never
         * counted as written by PAGEMAP_SCAN. */
        int e = os_uffd_zeropage(sb.uffd, dst, len);
        if (e && e != EEXIST) sb_read_failed(e, dst);
        return;
    }
    int slot = from_file ? scratch_claim() : -1;
    uint8_t *buf = from_file ? sb.scratch + (size_t)slot * sb.scratch_size : sb.zeros;
    size_t step = from_file ? sb.scratch_size : sb.zeros_size;
    for (size_t off = 0; off < len; off += step) {
        size_t chunk = len - off < step ? len - off : step;
        int e = 0;
        if (from_file) {
            uint64_t t0 = os_now_ns();
            e = os_pread_all(sb.fd, buf, chunk, file_off(dst + off));
            atomic_fetch_add_explicit(&sb.io_ns, os_now_ns() - t0, memory_order_relaxed);
            if (e) sb_read_failed(e, dst + off);
            atomic_fetch_add_explicit(&sb.bytes_read, chunk, memory_order_relaxed);
        }
        if (uffd) e = os_uffd_copy(sb.uffd, dst + off, buf, chunk, wp);
        else e = os_mem_write(sb.mem_fd, dst + off, buf, chunk);
        if (e && e != EEXIST) sb_read_failed(e, dst + off);
    }
    if (slot >= 0) scratch_put(slot);
}

static void load_part(size_t g, size_t n, uint8_t *states, bool write) {
    bool track = tracking_writes();
    /* uffd: a page installed without write-protection counts as written. */
    bool wp = track && sb.mech == STRATA_SB_MECH_UFFD && !write;
    for (size_t i = 0; i < n;) {
        bool from_file = states[i] & ST_FILE;
        size_t j = i + 1;
        while (j < n && !!(states[j] & ST_FILE) == from_file) j++;
        uint8_t *dst = sb_addr(g + i);
        size_t len = (j - i) << sb.gran_shift;
        fill(dst, len, from_file, wp);
        if (sb.mech == STRATA_SB_MECH_MPROTECT)
            (void)os_sb_protect(dst, len, write || !track ? OS_PROT_RW : OS_PROT_READ);
        i = j;
    }
    /* Dirty at load: everything when writes are not tracked; in mprotect
     * mode the run loaded writable.  Userfaultfd's write tracking needs no
     * help: a page installed writable, or a zero page written since, is
     * what PAGEMAP_SCAN reports. */
    bool dirty = !track || (write && sb.mech == STRATA_SB_MECH_MPROTECT);
    for (size_t i = 0; i < n; i++) states[i] |= (uint8_t)(ST_RES | (dirty ? ST_DIRTY : 0));
}

void sb_install_run(size_t g, size_t n, uint8_t *states, const uint8_t *buf) {
    bool track = tracking_writes(), uffd = sb.mech == STRATA_SB_MECH_UFFD;
    uint8_t *dst = sb_addr(g);
    size_t len = n << sb.gran_shift;
    /* As load_part for a read: clean (write-protected) where writes are tracked. */
    int e = uffd ? os_uffd_copy(sb.uffd, dst, buf, len, track) : os_mem_write(sb.mem_fd, dst, buf, len);
    if (e && e != EEXIST) sb_read_failed(e, dst);
    if (!uffd) (void)os_sb_protect(dst, len, track ? OS_PROT_READ : OS_PROT_RW);
    for (size_t i = 0; i < n; i++) states[i] |= (uint8_t)(ST_RES | (track ? 0 : ST_DIRTY));
}

void sb_load_run(size_t g, size_t n, uint8_t *states, bool write) {
    /* A write that loads a run (aggressive read, a stream, fresh memory
     * filled ahead), where writes are tracked: only the granule written is
     * installed writable and dirty; the rest of the run comes clean
     * (write-protected, read-only with mprotect) and goes back only if the
     * program writes it.  Loading the whole run dirty wrote back 670 MiB
     * (1.4 GiB with mprotect) for 1,000 one-word writes at random, 170
     * times what lazy read wrote; the price is a write fault per page of a
     * write sweep (docs/notes/storage.md). */
    if (n > 1 && write && tracking_writes()) {
        load_part(g, 1, states, true);
        load_part(g + 1, n - 1, states + 1, false);
        return;
    }
    load_part(g, n, states, write);
}

/* Adds to states[] the granules PAGEMAP_SCAN finds written, re-protecting
 * them.  False when the scan failed (then everything counts as dirty). */
static bool scan_written(size_t g, size_t n, uint8_t *states) {
    uintptr_t start = (uintptr_t)sb_addr(g), end = (uintptr_t)sb_addr(g + n);
    enum { CAP = 32 };
    uintptr_t runs[2 * CAP];
    for (;;) {
        long k = os_pagemap_written(sb.pagemap_fd, start, end, runs, CAP, true);
        if (k < 0) return false;
        for (long r = 0; r < k; r++) {
            size_t a = sb_index((void *)runs[2 * r]) - g;
            size_t b = sb_index((void *)(runs[2 * r + 1] - 1)) - g;
            for (size_t i = a; i <= b && i < n; i++) states[i] |= ST_DIRTY;
        }
        if (k < CAP) return true;
        start = runs[2 * CAP - 1];
    }
}

static _Atomic int failure_reported;

/* Freeze, find what is dirty, write it back.  0 or errno (then the run is
 * writable again where it was and every granule keeps its data). */
static int write_back(size_t g, size_t n, uint8_t *states) {
    uint8_t *a = sb_addr(g);
    size_t len = n << sb.gran_shift;
    (void)os_sb_protect(a, len, OS_PROT_READ);
    if (!tracking_writes() || (sb.mech == STRATA_SB_MECH_UFFD && !scan_written(g, n, states)))
        for (size_t i = 0; i < n; i++) states[i] |= ST_DIRTY;
    int err = 0;
    for (size_t i = 0; i < n && !err;) {
        if (!(states[i] & ST_DIRTY)) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < n && (states[j] & ST_DIRTY)) j++;
        uint8_t *src = sb_addr(g + i);
        size_t bytes = (j - i) << sb.gran_shift;
        uint64_t t0 = os_now_ns();
        err = os_pwrite_all(sb.fd, src, bytes, file_off(src));
        atomic_fetch_add_explicit(&sb.io_ns, os_now_ns() - t0, memory_order_relaxed);
        if (!err) {
            atomic_fetch_add_explicit(&sb.bytes_written, bytes, memory_order_relaxed);
            for (size_t k = i; k < j; k++) states[k] = (uint8_t)((states[k] & ~ST_DIRTY) | ST_FILE);
        }
        i = j;
    }
    if (!err) return 0;
    /* Undo the freeze: dirty granules become writable again (uffd: all,
     * the write-protect bits the scan set keep tracking writes). */
    atomic_fetch_add_explicit(&sb.writeback_failures, 1, memory_order_relaxed);
    /* Every other run would fail the same way: faults go over budget
     * without trying for a while (a free gives disk space back at once). */
    atomic_store_explicit(&sb.stalled_until, os_now_ms() + SB_STALL_MS, memory_order_relaxed);
    if (sb.mech == STRATA_SB_MECH_UFFD || !tracking_writes()) {
        (void)os_sb_protect(a, len, OS_PROT_RW);
    } else {
        for (size_t i = 0; i < n; i++)
            if (states[i] & ST_DIRTY) (void)os_sb_protect(sb_addr(g + i), sb.gran, OS_PROT_RW);
    }
    if (!atomic_exchange(&failure_reported, 1))
        strata_message("strata: storage-backed write-back failed: %s (the data stays in memory, over budget)\n",
                       reason(err));
    return err;
}

int sb_evict_run(size_t g, size_t n, uint8_t *states) {
    int err = write_back(g, n, states);
    if (err) return err;
    uint8_t *a = sb_addr(g);
    size_t len = n << sb.gran_shift;
    if (sb.mech == STRATA_SB_MECH_MPROTECT) {
        (void)os_sb_protect(a, len, OS_PROT_NONE);
        (void)os_sb_drop(a, len);
    } else {
        /* Dropped pages are missing: the next touch faults to userfaultfd. */
        (void)os_sb_drop(a, len);
        (void)os_sb_protect(a, len, OS_PROT_RW);
    }
    size_t pins = 0;
    for (size_t i = 0; i < n; i++) {
        pins += (states[i] & ST_PIN) != 0;
        states[i] &= (uint8_t)~(ST_RES | ST_DIRTY | ST_PIN);
    }
    sb_unpinned(pins);
    sb_budget_give(n);
    atomic_fetch_add_explicit(&sb.evictions, n, memory_order_relaxed);
    return 0;
}
