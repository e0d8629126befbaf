// cxx_operators.cpp — the C++ operators Strata exports, checked against the
// standard's rules ([new.delete]), built by tests/cxx/run-cxx.sh with g++
// and with clang++ and run with libstrata.so linked, with build/strata.o
// linked in, and with libstrata.so preloaded into a program that does not
// link it.
//
//   cxx_operators            every check below; prints `N passed, N failed`
//   cxx_operators sized-lie  sized delete with a size larger than the block
//                            (run with STRATA_CHECK=1: Strata must report it)
//
// Each of the 20 operators must be Strata's own (the same object as its
// strata_malloc), so that a `new` is not served through the C++ runtime's
// operator and malloc.
#include <dlfcn.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>

extern "C" int strata_owns(const void *p) __attribute__((weak));
extern "C" void *strata_malloc(std::size_t size) __attribute__((weak));
extern "C" std::size_t strata_malloc_usable_size(const void *p) __attribute__((weak));

static int passed, failed;

static void check(bool ok, const char *what)
{
    if (ok)
        passed++;
    else {
        failed++;
        std::printf("FAIL: %s\n", what);
    }
}

template <typename F> static F *strata_fn(F *weak, const char *name)
{
    return weak ? weak : reinterpret_cast<F *>(dlsym(RTLD_DEFAULT, name));
}

static const void *object_of(const void *fn)
{
    Dl_info info;
    if (fn == nullptr || dladdr(fn, &info) == 0)
        return nullptr;
    return info.dli_fbase;
}

// Every operator form, by its declared type, and the object it comes from.
static void check_exported(void)
{
    const void *strata = object_of(reinterpret_cast<const void *>(strata_fn(strata_malloc, "strata_malloc")));
    check(strata != nullptr, "strata_malloc found");
    struct { const char *name; const void *fn; } forms[] = {
#define FORM(type, name) {#name, reinterpret_cast<const void *>(static_cast<type>(name))}
        FORM(void *(*)(std::size_t), &::operator new),
        FORM(void *(*)(std::size_t), &::operator new[]),
        FORM(void *(*)(std::size_t, const std::nothrow_t &) noexcept, &::operator new),
        FORM(void *(*)(std::size_t, const std::nothrow_t &) noexcept, &::operator new[]),
        FORM(void *(*)(std::size_t, std::align_val_t), &::operator new),
        FORM(void *(*)(std::size_t, std::align_val_t), &::operator new[]),
        FORM(void *(*)(std::size_t, std::align_val_t, const std::nothrow_t &) noexcept, &::operator new),
        FORM(void *(*)(std::size_t, std::align_val_t, const std::nothrow_t &) noexcept, &::operator new[]),
        FORM(void (*)(void *) noexcept, &::operator delete),
        FORM(void (*)(void *) noexcept, &::operator delete[]),
        FORM(void (*)(void *, std::size_t) noexcept, &::operator delete),
        FORM(void (*)(void *, std::size_t) noexcept, &::operator delete[]),
        FORM(void (*)(void *, const std::nothrow_t &) noexcept, &::operator delete),
        FORM(void (*)(void *, const std::nothrow_t &) noexcept, &::operator delete[]),
        FORM(void (*)(void *, std::align_val_t) noexcept, &::operator delete),
        FORM(void (*)(void *, std::align_val_t) noexcept, &::operator delete[]),
        FORM(void (*)(void *, std::size_t, std::align_val_t) noexcept, &::operator delete),
        FORM(void (*)(void *, std::size_t, std::align_val_t) noexcept, &::operator delete[]),
        FORM(void (*)(void *, std::align_val_t, const std::nothrow_t &) noexcept, &::operator delete),
        FORM(void (*)(void *, std::align_val_t, const std::nothrow_t &) noexcept, &::operator delete[]),
#undef FORM
    };
    for (auto &f : forms) {
        char what[200];
        std::snprintf(what, sizeof what, "form %d of the 20 is Strata's own", int(&f - forms) + 1);
        check(strata != nullptr && object_of(f.fn) == strata, what);
    }
}

static bool owned(const void *p)
{
    auto owns = strata_fn(strata_owns, "strata_owns");
    return owns && owns(p);
}

static void check_new_zero_and_forms(void)
{
    void *a = ::operator new(0), *b = ::operator new(0);
    check(a && b && a != b && owned(a), "operator new(0): distinct, non-null, Strata's");
    void *c = ::operator new[](0), *d = ::operator new[](0);
    check(c && d && c != d, "operator new[](0): distinct, non-null");
    void *e = ::operator new(0, std::align_val_t(64)), *f = ::operator new(0, std::align_val_t(64));
    check(e && f && e != f && (reinterpret_cast<std::uintptr_t>(e) & 63) == 0, "aligned operator new(0)");
    void *g = ::operator new(0, std::nothrow);
    check(g != nullptr, "nothrow operator new(0) non-null");
    ::operator delete(a);
    ::operator delete(b, std::size_t(0));
    ::operator delete[](c);
    ::operator delete[](d, std::size_t(0));
    ::operator delete(e, std::align_val_t(64));
    ::operator delete(f, std::size_t(0), std::align_val_t(64));
    ::operator delete(g, std::nothrow);
}

struct alignas(256) Wide {
    unsigned char bytes[300];
};

static void check_aligned(void)
{
    bool ok = true;
    for (std::size_t align = 32; align <= (std::size_t(1) << 16); align <<= 1)
        for (std::size_t size : {std::size_t(1), std::size_t(24), align - 1, align, 3 * align + 5, std::size_t(100000)}) {
            auto al = std::align_val_t(align);
            void *p = ::operator new(size, al);
            void *q = ::operator new[](size, al);
            void *r = ::operator new(size, al, std::nothrow);
            void *s = ::operator new[](size, al, std::nothrow);
            for (void *x : {p, q, r, s}) {
                ok = ok && x && (reinterpret_cast<std::uintptr_t>(x) & (align - 1)) == 0 && owned(x);
                if (x)
                    std::memset(x, 0xa5, size);
            }
            ::operator delete(p, size, al);
            ::operator delete[](q, al);
            ::operator delete(r, al, std::nothrow);
            ::operator delete[](s, size, al);
        }
    check(ok, "aligned new (plain, array, nothrow): aligned 32 B to 64 KiB, Strata's, writable");
    Wide *w = new Wide[7];
    Wide *one = new Wide;
    check((reinterpret_cast<std::uintptr_t>(w) & 255) == 0 && (reinterpret_cast<std::uintptr_t>(one) & 255) == 0,
          "new of an over-aligned type (alignas(256)) is aligned");
    delete one;
    delete[] w;
}

static void check_sized_delete(void)
{
    // Many sizes, every sized form: each block reusable afterwards (the
    // allocator's state stays sound).
    bool ok = true;
    for (int round = 0; round < 3; round++)
        for (std::size_t size = 1; size <= 70000; size = size * 3 / 2 + 1) {
            char *p = static_cast<char *>(::operator new(size));
            char *q = static_cast<char *>(::operator new[](size));
            std::memset(p, 1, size);
            std::memset(q, 2, size);
            ok = ok && owned(p) && owned(q);
            ::operator delete(p, size);
            ::operator delete[](q, size);
        }
    struct Obj {
        long v[5];
        ~Obj() { v[0] = 0; }
    };
    Obj *objs = new Obj[33]; // non-trivial destructor: the sized delete[] gets the cookie's size too
    delete[] objs;
    check(ok, "sized delete and sized delete[] of 1 B to 70 KiB");
}

static void check_huge_throws(void)
{
    const std::size_t huge = SIZE_MAX / 2;
    int thrown = 0;
    try { (void)::operator new(huge); } catch (const std::bad_alloc &) { thrown++; }
    try { (void)::operator new[](huge); } catch (const std::bad_alloc &) { thrown++; }
    try { (void)::operator new(huge, std::align_val_t(4096)); } catch (const std::bad_alloc &) { thrown++; }
    try { (void)::operator new[](huge, std::align_val_t(4096)); } catch (const std::bad_alloc &) { thrown++; }
    check(thrown == 4, "a huge size throws std::bad_alloc (plain, array, aligned, aligned array)");
    check(::operator new(huge, std::nothrow) == nullptr && ::operator new[](huge, std::nothrow) == nullptr &&
              ::operator new(huge, std::align_val_t(64), std::nothrow) == nullptr &&
              ::operator new[](huge, std::align_val_t(64), std::nothrow) == nullptr,
          "nothrow new of a huge size returns nullptr");
}

// New-handlers: called once per failed attempt; one that uninstalls itself
// ends the loop with std::bad_alloc (nullptr for nothrow); one that throws is
// caught by the nothrow forms.
static int handler_calls;

static void handler_gives_up(void)
{
    handler_calls++;
    if (handler_calls == 3)
        std::set_new_handler(nullptr);
}

static void handler_throws(void)
{
    handler_calls++;
    throw std::bad_alloc();
}

static void check_new_handler_loop(void)
{
    const std::size_t huge = SIZE_MAX / 2;
    std::set_new_handler(handler_gives_up);
    handler_calls = 0;
    bool thrown = false;
    try { (void)::operator new(huge); } catch (const std::bad_alloc &) { thrown = true; }
    check(thrown && handler_calls == 3, "new: the handler runs on each failure until it uninstalls itself");
    std::set_new_handler(handler_gives_up);
    handler_calls = 0;
    check(::operator new(huge, std::nothrow) == nullptr && handler_calls == 3,
          "nothrow new: the handler loop, then nullptr");
    std::set_new_handler(handler_gives_up);
    handler_calls = 0;
    check(::operator new[](huge, std::align_val_t(128), std::nothrow) == nullptr && handler_calls == 3,
          "aligned nothrow new[]: the handler loop, then nullptr");
    std::set_new_handler(handler_throws);
    handler_calls = 0;
    check(::operator new(huge, std::nothrow) == nullptr && handler_calls == 1,
          "nothrow new: a handler's std::bad_alloc is caught, nullptr returned");
    handler_calls = 0;
    thrown = false;
    try { (void)::operator new[](huge); } catch (const std::bad_alloc &) { thrown = true; }
    check(thrown && handler_calls == 1, "new[]: a handler's std::bad_alloc reaches the caller");
    std::set_new_handler(nullptr);
}

// A handler that frees memory makes the retry succeed: with address space
// capped (RLIMIT_AS), blocks are taken (untouched) until nothrow new fails;
// then new of one more fails until the handler frees one of them.
static void *held[4096];
static int nheld;

static void handler_frees_one(void)
{
    handler_calls++;
    ::operator delete(held[--nheld]);
    std::set_new_handler(nullptr);
}

static std::size_t address_space_now(void)
{
    FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (std::fscanf(f, "%lu", &pages) != 1)
            pages = 0;
        std::fclose(f);
    }
    return pages * 4096;
}

static void check_new_handler_frees(void)
{
    const std::size_t block = std::size_t(64) << 20;
    struct rlimit old;
    getrlimit(RLIMIT_AS, &old);
    struct rlimit cap = old;
    cap.rlim_cur = address_space_now() + 4 * block;
    if (setrlimit(RLIMIT_AS, &cap) != 0) {
        check(false, "setrlimit(RLIMIT_AS)");
        return;
    }
    while (nheld < 4096 && (held[nheld] = ::operator new(block, std::nothrow)) != nullptr)
        nheld++;
    check(nheld > 0 && nheld < 4096, "nothrow new fails once the address space is used up");
    handler_calls = 0;
    int before = nheld;
    std::set_new_handler(handler_frees_one);
    void *again = nullptr;
    try { again = ::operator new(block); } catch (const std::bad_alloc &) { again = nullptr; }
    std::set_new_handler(nullptr);
    check(again != nullptr && handler_calls == 1 && nheld == before - 1,
          "new: a handler that frees memory lets the retry succeed");
    ::operator delete(again, block);
    while (nheld > 0)
        ::operator delete(held[--nheld], block);
    setrlimit(RLIMIT_AS, &old);
}

int main(int argc, char **argv)
{
    if (argc > 1 && std::strcmp(argv[1], "sized-lie") == 0) {
        auto usable = strata_fn(strata_malloc_usable_size, "strata_malloc_usable_size");
        char *p = static_cast<char *>(::operator new(100));
        std::size_t lie = (usable ? usable(p) : 100) + 4096;
        ::operator delete(p, lie);
        std::printf("sized delete with a size past the block went unnoticed\n");
        return 0;
    }
    check_exported();
    check_new_zero_and_forms();
    check_aligned();
    check_sized_delete();
    check_huge_throws();
    check_new_handler_loop();
    check_new_handler_frees();
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
