/* options.h — Strata's options (read from STRATA_* variables before libc is
 * ready, settable by API) and its error reporting.  Depends only on the OS
 * layer; every other part may include it.
 */
#ifndef STRATA_OPTIONS_H
#define STRATA_OPTIONS_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include "../../include/strata.h"

/* Current value; options_init() must have run (the allocator's init does it).
 * Relaxed atomics: strata_option_set() may change one while others read it;
 * a relaxed load costs what a plain load does. */
extern _Atomic long strata_options[STRATA_OPTION_COUNT];
static inline long opt(strata_option_t o) { return atomic_load_explicit(&strata_options[o], memory_order_relaxed); }

/* Reads the environment (from environ, no malloc).  Idempotent and
 * thread-safe: concurrent first callers wait for the one that reads. */
void options_init(void);
/* fn(option) runs after strata_option_set changed one (the allocator
 * refreshes what it caches from it). */
void options_on_change(void (*fn)(int o));
/* Prints the options in force, one per line, to stderr. */
void options_print(void);

/* ---- Messages and errors ----------------------------------------------
 * All output goes through write(2) from a stack buffer: safe inside malloc. */
void strata_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Bad input from the program: prints "strata: <what> <address>" and aborts,
 * or with STRATA_ON_ERROR=warn only prints.  what is e.g. "free(): invalid pointer". */
void strata_error(const char *what, const void *addr);
/* The same, naming the call: "strata: <call>: <what> <address> (<detail>)",
 * e.g. strata_report("realloc()", "invalid pointer", p, "inside a block");
 * detail may be NULL. */
void strata_report(const char *call, const char *what, const void *addr, const char *detail);
/* Internal invariant broken: always prints and aborts. */
__attribute__((noreturn)) void strata_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Copies n bytes of in to out (size >= 5) with control characters, bytes
 * of no valid UTF-8, C1 controls and the backslash escaped (\n, \xNN...);
 * returns the bytes written.  strata_message applies it to every message. */
size_t strata_escape(const char *in, size_t n, char *out, size_t size);

/* Parses a size ("128k", "4MiB", "1g", "4096") into *out; false if malformed. */
bool options_parse_size(const char *s, long *out);

#endif
