/* error.c — the transfer layer's error reports: one line per failure kept
 * per thread, so a caller that got -1 or an errno value can ask what
 * exactly went wrong (which pid, how many bytes had moved).
 */
#include "transfer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "../options/options.h"

/* Small and fixed: the library's TLS is initial-exec. */
static __thread char last_error[160];

static void record(const char *fmt, va_list ap) {
    int n = snprintf(last_error, sizeof last_error, "strata: ");
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
}

int transfer_fail(int err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    record(fmt, ap);
    va_end(ap);
    return err;
}

int transfer_fault(int err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    record(fmt, ap);
    va_end(ap);
    strata_message("%s\n", last_error);
    return err;
}

const char *strata_transfer_error(void) {
    return last_error;
}

const char *transfer_errno_name(int err) {
    switch (err) {
    case EPERM: return "EPERM";
    case ESRCH: return "ESRCH";
    case EFAULT: return "EFAULT";
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case ENOSYS: return "ENOSYS";
    case EACCES: return "EACCES";
    case EPIPE: return "EPIPE";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EMSGSIZE: return "EMSGSIZE";
    case EPROTO: return "EPROTO";
    case EEXIST: return "EEXIST";
    case ENOENT: return "ENOENT";
    case EBUSY: return "EBUSY";
    default: return "error";
    }
}
