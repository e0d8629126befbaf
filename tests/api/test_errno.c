/* test_errno.c — sizes that cannot be served: every allocating function
 * returns NULL (or ENOMEM for posix_memalign) with errno = ENOMEM, never
 * crashes, and calloc/reallocarray catch multiplication overflow.
 */
#include "api/testutil.h"
#include <stddef.h>

#define EXPECT_ENOMEM(call) do { errno = 0; void *r_ = (call); \
    CHECKF(r_ == NULL && alloc_errno() == ENOMEM, "%s = %p, errno %d", #call, r_, errno); \
    if (r_) F(free)(r_); } while (0)

int main(void) {
    require_strata_in_use();
    const size_t huge[] = { SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4096, SIZE_MAX / 2, (size_t)PTRDIFF_MAX + 1,
                            (size_t)PTRDIFF_MAX, (size_t)PTRDIFF_MAX - 65536 };
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        size_t n = opaque(huge[i]);
        EXPECT_ENOMEM(F(malloc)(n));
        EXPECT_ENOMEM(F(calloc)(1, n));
        EXPECT_ENOMEM(F(calloc)(n, 1));
        EXPECT_ENOMEM(F(realloc)(NULL, n));
        EXPECT_ENOMEM(F(aligned_alloc)(64, n));
        EXPECT_ENOMEM(F(aligned_alloc)(1u << 20, n));
        EXPECT_ENOMEM(F(memalign)(4096, n));
        EXPECT_ENOMEM(F(valloc)(n));
        EXPECT_ENOMEM(F(pvalloc)(n));
        void *p = (void *)0x1234;
        int rc = F(posix_memalign)(&p, 64, n);
        CHECKF(rc == ENOMEM, "posix_memalign(&p, 64, %zu) = %d", n, rc);
        if (rc == 0) F(free)(p);
    }
    /* Multiplication overflow in calloc and reallocarray. */
    EXPECT_ENOMEM(F(calloc)(opaque(SIZE_MAX / 2 + 1), opaque(2)));
    EXPECT_ENOMEM(F(calloc)(opaque((size_t)1 << 32), opaque((size_t)1 << 32)));
    EXPECT_ENOMEM(F(calloc)(opaque(SIZE_MAX), opaque(SIZE_MAX)));
    EXPECT_ENOMEM(F(calloc)(opaque(3), opaque(SIZE_MAX / 3 + 1)));
    EXPECT_ENOMEM(F(reallocarray)(NULL, opaque(SIZE_MAX / 2 + 1), opaque(2)));
    EXPECT_ENOMEM(F(reallocarray)(NULL, opaque((size_t)1 << 33), opaque((size_t)1 << 31)));
    /* A product that fits is served. */
    void *ok = F(calloc)((size_t)1 << 10, (size_t)1 << 10);
    CHECK(ok != NULL);
    F(free)(ok);
    /* Memory beyond the machine (and beyond what overcommit lets one mapping have). */
    EXPECT_ENOMEM(F(malloc)(opaque((size_t)1 << 50)));
    /* After all the failures the allocator still works. */
    for (int i = 0; i < 1000; i++) { void *p = F(malloc)((size_t)i * 13 + 1); REQUIRE(p); F(free)(p); }
    return test_report("api_errno");
}
