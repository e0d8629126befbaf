/* thread_state.c — whether another thread of this process is blocked in
 * the kernel right now (/proc/self/task/<tid>/stat), and the calling
 * thread's kernel id to ask it by.
 *
 * The core asks it of a heap's thread before it takes over that heap's
 * full pages for a thread that is allocating (src/core/takeover.c): a
 * thread asleep in pthread_join, a condition wait or a read does not
 * allocate from them.  A few microseconds (open, read, close); the core
 * asks at most every quarter millisecond per heap.
 */
#include "os.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

int os_thread_id(void) { return (int)syscall(SYS_gettid); }

bool os_thread_blocked(int tid) {
    if (tid <= 0) return false;
    char path[48], buf[512];
    if (!os_proc_path(path, sizeof path, "/proc/self/task/", (unsigned)tid, "/stat")) return false;
    int saved = errno;   /* called from malloc: a failed open (the thread is gone) must not show */
    size_t got = os_read_file(path, buf, sizeof buf);
    errno = saved;
    if (got == 0) return false;
    /* "<tid> (<comm>) <state> ...": comm may hold spaces and parentheses,
     * so the state follows the last ')'. */
    const char *s = buf + got;
    while (s > buf && *s != ')') s--;
    if (*s != ')' || s[1] != ' ') return false;
    /* S: interruptible sleep (futex, poll, read); D: uninterruptible. */
    return s[2] == 'S' || s[2] == 'D';
}
