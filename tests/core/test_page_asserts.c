/* test_page_asserts.c — the debug build (STRATA_DEBUG) asserts a page's
 * state where it changes: a page whose books say more blocks are in use
 * than were carved stops page_collect, and a page not marked full stops
 * page_unfull and page_collect_full (only full pages leave the full queue
 * or are collected by another thread).  Each breakage runs in a child,
 * which must die of SIGABRT naming the condition; the same calls on sound
 * pages must return.  Linked against the debug variant only.
 */
#include "common/expect_abort.h"
#include "core/internal.h"

#if !defined(STRATA_DEBUG)
#error "built with STRATA_DEBUG only"
#endif

static page_t page;

static void collect_overused(void) {
    page.capacity = 4;
    page.used = 5;   /* what a lost update of used would leave */
    page_collect(&page);
}

static void collect_sound(void) {
    page.capacity = 4;
    page.used = 4;
    page_collect(&page);
    page.used = 0;
    page_collect(&page);
}

static void unfull_not_full(void) { page_unfull(NULL, &page); }

static void collect_full_not_full(void) { page_collect_full(NULL, &page); }

int main(void) {
    expect_abort("page_collect, used > capacity", collect_overused, "page->used <= page->capacity");
    expect_clean("page_collect, sound", collect_sound);
    expect_abort("page_unfull, not full", unfull_not_full, "page_flags(page) & PAGE_FULL");
    expect_abort("page_collect_full, not full", collect_full_not_full, "page_flags(page) & PAGE_FULL");
    return check_report("core_page_asserts_debug");
}
