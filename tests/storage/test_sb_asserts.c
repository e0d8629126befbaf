/* test_sb_asserts.c — the debug build (STRATA_DEBUG) asserts the
 * storage-backed memory's accounting where it changes: giving back more
 * resident granules or pins than are counted, a granule state that is
 * pinned or dirty without being resident (or resident outside a live
 * block), and a group member giving back more than it took all stop the
 * process.  Each breakage runs in a child, which must die of SIGABRT naming
 * the condition; the sound sequences must run through.  Linked against the
 * debug variant only (the internals, without an initialised space).
 */
#include <stdlib.h>

#include "common/expect_abort.h"
#include "storage/storage.h"

#if !defined(STRATA_DEBUG)
#error "built with STRATA_DEBUG only"
#endif

static _Atomic(uint8_t) states[4];
static char group[64];

static void give_unheld(void) { sb_budget_give(1); }

static void unpin_unheld(void) { sb_unpinned(1); }

static void counts_sound(void) {
    atomic_store(&sb.resident, 2);
    atomic_store(&sb.pinned, 1);
    sb_unpinned(1);
    sb_budget_give(2);
}

static void pin_outside_block(void) {
    sb.st = states;
    sb_unlock(0, ST_PIN);
}

static void pin_not_resident(void) {
    sb.st = states;
    sb_unlock(0, ST_ALLOC | ST_PIN);
}

static void states_sound(void) {
    sb.st = states;
    sb_unlock(0, ST_ALLOC | ST_HEAD);
    sb_unlock(1, ST_ALLOC | ST_RES | ST_DIRTY | ST_PIN);
    sb_unlock(2, ST_ALLOC | ST_FILE);
    sb_unlock(3, 0);
}

static void group_gives_unheld(void) {
    REQUIRE(sb_group_join(group, 1 << 20) == 0);
    sb_group_add(4096);
    sb_group_add(-8192);
}

static void group_sound(void) {
    REQUIRE(sb_group_join(group, 1 << 20) == 0);
    sb_group_add(4096);
    sb_group_add(-4096);
    sb_group_leave();
}

int main(void) {
    snprintf(group, sizeof group, "asserts-%d", (int)getpid());
    expect_abort("budget give, none held", give_unheld, "resident >= n");
    expect_abort("unpin, none pinned", unpin_unheld, "pinned >= n");
    expect_clean("counts, sound", counts_sound);
    expect_abort("pin outside a block", pin_outside_block, "(state & ST_ALLOC)");
    expect_abort("pin, not resident", pin_not_resident, "(state & ST_RES)");
    expect_clean("states, sound", states_sound);
    expect_abort("group give, more than taken", group_gives_unheld, "mine >= (uint64_t)-bytes");
    expect_clean("group, sound", group_sound);
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/strata-sb-%s", group);
    unlink(path);   /* (the aborted child left the table) */
    return check_report("sb_asserts_debug");
}
