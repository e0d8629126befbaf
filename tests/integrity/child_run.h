/* child_run.h — one run of a randomized integrity test in a child process:
 * its stderr and stdout go to temporary files, read back into err and out
 * (NUL-terminated) once it ended.  The child runs child(arg) and must end
 * by _exit.  Returns the wait status, or -1 if the files could not be made.
 */
#ifndef STRATA_TESTS_CHILD_RUN_H
#define STRATA_TESTS_CHILD_RUN_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int child_run(void (*child)(int), int arg, char *err, size_t err_size, char *out, size_t out_size) {
    char efile[] = "/tmp/strata-child-err-XXXXXX", ofile[] = "/tmp/strata-child-out-XXXXXX";
    int efd = mkstemp(efile), ofd = mkstemp(ofile);
    if (efd < 0 || ofd < 0) {
        perror("mkstemp");
        return -1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(efd, 2);
        dup2(ofd, 1);
        child(arg);
        _exit(0);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    ssize_t n = pread(efd, err, err_size - 1, 0);
    err[n > 0 ? n : 0] = 0;
    n = pread(ofd, out, out_size - 1, 0);
    out[n > 0 ? n : 0] = 0;
    close(efd);
    close(ofd);
    unlink(efile);
    unlink(ofile);
    return status;
}

#endif
