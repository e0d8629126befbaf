/* fuzz_misuse.c — libFuzzer target: sequences of malloc, free and realloc
 * through the strata_* functions, with misuse planted among them (double
 * frees, interior pointers, pointers into a segment header, realloc of a
 * bad pointer).  Errors are only warned about (STRATA_ON_ERROR=warn); the
 * messages Strata writes to stderr are captured around every operation.
 * Every planted error must give exactly one message of the right kind and
 * every other operation none; after each input the heap must check clean.
 * Any mismatch traps, which libFuzzer reports with the input.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "strata.h"

#define SLOTS 64
enum { EMPTY, LIVE, FREED };
typedef struct { uint8_t *p; size_t size; int state; } slot;

static int capture_fd = -1, saved_fd = -1;
static off_t seen;

static void init_once(void) {
    if (capture_fd >= 0) return;
    capture_fd = memfd_create("strata-messages", 0);
    saved_fd = dup(2);
    strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
}

/* Messages written since the last call: how many, and whether one has want. */
static int messages(const char *want, int *matched) {
    char buf[4096];
    off_t end = lseek(capture_fd, 0, SEEK_END);
    ssize_t n = end > seen ? pread(capture_fd, buf, sizeof buf - 1 < (size_t)(end - seen) ? sizeof buf - 1 : (size_t)(end - seen), seen) : 0;
    seen = end;
    buf[n > 0 ? n : 0] = 0;
    int count = 0;
    *matched = 0;
    for (char *s = buf; (s = strstr(s, "strata: ")) != NULL; s += 8) {
        count++;
        if (want && strstr(s, want) && (!strchr(s, '\n') || strstr(s, want) < strchr(s, '\n'))) *matched = 1;
    }
    return count;
}

static void expect(int planted, const char *want, const char *want2, const char *what) {
    int m1 = 0, m2 = 0;
    dup2(saved_fd, 2);
    int n = messages(want, &m1);
    if (want2 && n == 1) {
        /* re-scan for the second accepted kind: read back the last message */
        char buf[512];
        ssize_t k = pread(capture_fd, buf, sizeof buf - 1, seen > 511 ? seen - 511 : 0);
        buf[k > 0 ? k : 0] = 0;
        m2 = strstr(buf, want2) != NULL;
    }
    if (planted ? (n != 1 || !(m1 || m2)) : n != 0) {
        fprintf(stderr, "fuzz_misuse: %s: %d message(s), want %s\n", what, n, planted ? want : "none");
        __builtin_trap();
    }
}

static void quiet(void) { dup2(capture_fd, 2); }

static void reused(slot *s, const void *q) {   /* q was handed out: a freed slot holding it is live elsewhere */
    for (int i = 0; i < SLOTS; i++)
        if (s[i].state == FREED && s[i].p == q) s[i].state = EMPTY;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init_once();
    slot s[SLOTS];
    memset(s, 0, sizeof s);
    for (size_t i = 0; i + 3 <= size; i += 3) {
        uint8_t op = data[i] % 8;
        slot *x = &s[data[i + 1] % SLOTS];
        size_t sz = 1 + ((size_t)data[i + 2] << (data[i] >> 5));   /* 1 B .. ~32 KiB, some large */
        quiet();
        switch (op) {
        case 0: case 1:                                   /* malloc into the slot */
            if (x->state == LIVE) strata_free(x->p);
            x->p = strata_malloc(sz);
            x->size = sz;
            x->state = LIVE;
            memset(x->p, data[i + 2], sz < 64 ? sz : 64);
            reused(s, x->p);
            x->state = LIVE;
            expect(0, NULL, NULL, "malloc");
            break;
        case 2:                                           /* free */
            if (x->state == LIVE) { strata_free(x->p); x->state = FREED; }
            expect(0, NULL, NULL, "free");
            break;
        case 3:                                           /* realloc */
            if (x->state == LIVE) {
                uint8_t *q = strata_realloc(x->p, sz);
                if (q) { x->p = q; x->size = sz; reused(s, q); x->state = LIVE; }
            }
            expect(0, NULL, NULL, "realloc");
            break;
        case 4:                                           /* planted: double free */
            if (x->state == FREED) {
                strata_free(x->p);
                x->state = EMPTY;                         /* once is enough */
                expect(1, "double free", "invalid pointer", "double free");
            } else expect(0, NULL, NULL, "nothing");
            break;
        case 5:                                           /* planted: interior pointer */
            if (x->state == LIVE && x->size >= 32) {
                strata_free(x->p + 16);
                expect(1, "free(): invalid pointer", NULL, "interior free");
            } else expect(0, NULL, NULL, "nothing");
            break;
        case 6:                                           /* planted: realloc of an interior pointer */
            if (x->state == LIVE && x->size >= 32) {
                void *q = strata_realloc(x->p + 16, sz);
                if (q) __builtin_trap();                 /* warn mode: the call does nothing */
                expect(1, "realloc(): invalid pointer", NULL, "interior realloc");
            } else expect(0, NULL, NULL, "nothing");
            break;
        case 7:                                           /* planted: a segment header */
            if (x->state == LIVE && x->size <= 1024) {
                strata_free((uint8_t *)((uintptr_t)x->p & ~(uintptr_t)((4u << 20) - 1)) + 64);
                expect(1, "free(): invalid pointer", NULL, "header free");
            } else expect(0, NULL, NULL, "nothing");
            break;
        }
    }
    quiet();
    for (int i = 0; i < SLOTS; i++)
        if (s[i].state == LIVE) strata_free(s[i].p);
    size_t problems = strata_heap_check();
    expect(0, NULL, NULL, "cleanup and heap check");
    if (problems) __builtin_trap();
    return 0;
}
