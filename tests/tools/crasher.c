/* crasher.c — allocates N blocks, then ends the way argv[1] says (exit,
 * _exit, abort, term, segv, or exec: runs itself again with "exit"), for the
 * test that the recorder flushes its buffers on every way out.  The blocks
 * stay live: they must be in the trace.
 */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 5000

void *volatile keep[N];   /* global: the compiler cannot drop the mallocs */

int main(int argc, char **argv)
{
    for (int i = 0; i < N; i++)
        keep[i] = malloc(48);
    const char *how = argc > 1 ? argv[1] : "exit";
    if (strcmp(how, "_exit") == 0)
        _exit(3);
    if (strcmp(how, "abort") == 0)
        abort();
    if (strcmp(how, "term") == 0)
        raise(SIGTERM);
    if (strcmp(how, "exec") == 0) {
        char *args[] = {argv[0], "exit", NULL};
        execv(argv[0], args);
        return 1;
    }
    if (strcmp(how, "segv") == 0)
        *(volatile int *)(uintptr_t)8 = 1;
    return 0;
}
