/* test_chan_share.c — shared pulls (src/transfer/share.c): a big pulled
 * message is copied by both ends, the receiver pulling pieces and the
 * waiting sender pushing others.  Linked statically to set the module's
 * test hook, which makes the receiver wait until the sender has claimed a
 * piece, so that both sides copy whatever the scheduler does:
 *  - content checked for sizes that are and are not whole pieces, with the
 *    receive buffer's neighbours untouched, and stats.pushed counting every
 *    message the sender helped with;
 *  - with the sender's writes refused (hook 2), its piece is pulled by the
 *    receiver instead and the content is still right;
 *  - with STRATA_CHAN_NO_SHARE the sender never writes.
 */
#include <strata.h>

#include "transfer/chan.h"
#include "xfer.h"

#define PIECE ((size_t)256 << 10)
static const size_t sizes[] = {2 * PIECE, 2 * PIECE + 1, 3 * PIECE - 5, (size_t)4 << 20, ((size_t)16 << 20) + 7,
                               (size_t)64 << 20};
#define NSIZES (sizeof sizes / sizeof *sizes)
#define GUARD 4096

static void run(int hook, unsigned flags, size_t first, size_t end) {
    chan_share_test = hook;
    char name[64];
    snprintf(name, sizeof name, "test-share-%d-%d", (int)getpid(), hook);
    /* Every message of a piece or more by single copy, whatever its pages. */
    strata_chan_opts o = {.cma_min_any = PIECE, .flags = flags};
    strata_chan *c = strata_chan_create(name, &o);
    CHECK(c);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        strata_chan *r = strata_chan_open(name);
        CHECK(r);
        size_t cap = sizes[NSIZES - 1];
        unsigned char *mem = map_bytes(cap + 2 * GUARD), *buf = mem + GUARD;
        for (size_t k = first; k < end; k++) {
            size_t len = 0;
            memset(mem, 0xAB, cap + 2 * GUARD);
            CHECK(strata_chan_recv(r, buf, cap, &len) == 0);
            CHECK(len == sizes[k]);
            size_t bad = pattern_check(buf, 0, len, 100 + k);
            if (bad != SIZE_MAX) {
                fprintf(stderr, "hook %d: a %zu-byte message differs at byte %zu\n", hook, len, bad);
                _exit(1);
            }
            for (size_t i = 0; i < GUARD; i++) CHECK(mem[i] == 0xAB && buf[len + i] == 0xAB);
            unsigned char ok = 1;
            CHECK(strata_chan_send(r, &ok, 1) == 0);
        }
        strata_chan_stats_t st;
        strata_chan_stats(r, &st);
        CHECK(st.received[STRATA_CHAN_PATH_CMA] == end - first);
        strata_chan_close(r);
        _exit(0);
    }
    unsigned char *out = map_bytes(sizes[NSIZES - 1]);
    for (size_t k = first; k < end; k++) {
        pattern_fill(out, 0, sizes[k], 100 + k);
        CHECK(strata_chan_send(c, out, sizes[k]) == 0);
        unsigned char ok = 0;
        size_t len = 0;
        CHECK(strata_chan_recv(c, &ok, 1, &len) == 0 && len == 1 && ok == 1);
    }
    strata_chan_stats_t st;
    strata_chan_stats(c, &st);
    CHECK(st.sent[STRATA_CHAN_PATH_CMA] == end - first);
    /* Hook 1: the sender wrote part of every message; hook 2: none (its
     * one write was refused, the receiver pulled that piece too). */
    if (flags & STRATA_CHAN_NO_SHARE) CHECK(st.pushed == 0);
    else if (hook) CHECK(st.pushed == (hook == 1 ? end - first : 0));
    strata_chan_close(c);
    reap_ok(pid);
    munmap(out, sizes[NSIZES - 1]);
}

int main(void) {
    if (!strata_option_get(STRATA_OPTION_CMA)) {
        printf("transfer_chan_share: skipped: single copy is off (STRATA_CMA=0)\n");
        return 77;
    }
    run(1, 0, 0, NSIZES);
    run(0, 0, 0, NSIZES);
    run(0, STRATA_CHAN_NO_SHARE, 0, NSIZES);
    /* One message: a sender refused once helps no more, and the hook would
     * have the receiver wait for a claim in vain. */
    run(2, 0, 2, 3);
    printf("transfer_chan_share: ok\n");
    return 0;
}
