/* forker.c — a parent and a forked child that both allocate, for the test
 * that a child gets a trace file of its own.  The child makes CHILD_N
 * mallocs and frees them; the parent waits for it and prints
 * "child PID" and "expect child_malloc CHILD_N".
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define PARENT_N 300
#define CHILD_N 777

int main(void)
{
    void *volatile keep[PARENT_N];
    for (int i = 0; i < PARENT_N; i++)
        keep[i] = malloc(100 + (size_t)i);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        for (int i = 0; i < CHILD_N; i++) {
            void *volatile p = malloc(5000 + (size_t)i);
            free(p);
        }
        exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    for (int i = 0; i < PARENT_N; i++)
        free(keep[i]);
    printf("child %d\nexpect child_malloc %d\nexpect parent_malloc %d\n", (int)pid, CHILD_N, PARENT_N);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
