/* test_storm.c — four threads pass blocks around through shared slots and now
 * and then free a block without taking it out of its slot, so it is freed
 * again later, by whichever thread meets it (double frees across threads,
 * at random, racing with everything else).  The allocator must stop the
 * process with its message within 10 seconds: never hang, never crash
 * without a word.  The parent runs the storm in a child and judges it.
 * With "warn" the storm runs under STRATA_ON_ERROR=warn for 3 seconds: it
 * must report and go on — no crash, no hang — until the alarm ends it.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "strata.h"

#define SLOTS 4096
#define THREADS 4

static _Atomic(void *) slots[SLOTS];

static void *storm(void *arg) {
    uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
    for (;;) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t i = x % SLOTS;
        if ((x >> 20) % 2048 == 0) {                 /* planted: free, leave it in the slot */
            void *p = atomic_load(&slots[i]);
            if (p) free(p);
            continue;
        }
        void *p = atomic_exchange(&slots[i], NULL);
        if (p) {
            free(p);
        } else {
            size_t size = 16 + (x >> 32) % 512;
            p = malloc(size);
            if (!p) abort();
            memset(p, (int)(x & 0xff), size < 64 ? size : 64);
            void *old = atomic_exchange(&slots[i], p);
            if (old) free(old);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int warn = argc > 1 && !strcmp(argv[1], "warn");
    char efile[] = "/tmp/strata-storm-XXXXXX";
    int efd = mkstemp(efile);
    if (efd < 0) { perror("mkstemp"); return 2; }
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        dup2(efd, 2);
        if (warn) strata_option_set(STRATA_OPTION_ON_ERROR, STRATA_ON_ERROR_WARN);
        alarm(warn ? 3 : 10);
        pthread_t t[THREADS];
        for (uintptr_t k = 0; k < THREADS; k++) pthread_create(&t[k], NULL, storm, (void *)(k + 1));
        for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    char err[8192];
    ssize_t n = pread(efd, err, sizeof err - 1, 0);
    err[n > 0 ? n : 0] = 0;
    close(efd);
    unlink(efile);
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    int said = strstr(err, "strata: free(): double free 0x") || strstr(err, "strata: malloc(): corrupted free list 0x") ||
               strstr(err, "strata: free(): corrupted free list 0x") || strstr(err, "strata: free(): invalid pointer 0x");
    if (warn) {
        if (sig == SIGALRM && said) {
            printf("storm in warn mode reported and went on for 3 s\n1 passed, 0 failed\n");
            return 0;
        }
        fprintf(stderr, "FAIL: warn-mode storm ended with %s %d (want SIGALRM after messages); stderr:\n%.2000s\n",
                sig ? "signal" : "exit", sig ? sig : WEXITSTATUS(status), err);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    if (sig == SIGABRT && said) {
        printf("storm ended as it should: %.*s", (int)(strchr(strstr(err, "strata: "), '\n') - strstr(err, "strata: ") + 1),
               strstr(err, "strata: "));
        printf("1 passed, 0 failed\n");
        return 0;
    }
    fprintf(stderr, "FAIL: storm ended with %s %d (want SIGABRT and a strata message); stderr:\n%s\n",
            sig ? "signal" : "exit", sig ? sig : WEXITSTATUS(status), err);
    printf("0 passed, 1 failed\n");
    return 1;
}
