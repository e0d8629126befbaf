/* xthread.c — blocks made on one thread and let go on another, for the
 * replay-ordering test.  A producer mallocs blocks and hands them through a
 * mutex-protected queue to a consumer, which reallocs every fourth one and
 * frees them all.  Prints "expect cross COUNT" (frees and reallocs of a block
 * made on the other thread) and "expect blocks COUNT".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 20000
#define QCAP 64

static void *queue[QCAP];
static int head, tail, count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t nonempty = PTHREAD_COND_INITIALIZER, nonfull = PTHREAD_COND_INITIALIZER;

static void *producer(void *arg)
{
    (void)arg;
    for (int i = 0; i < N; i++) {
        size_t s = 8 + (size_t)(i * 131 % 2000);
        char *p = malloc(s);
        memset(p, i & 0xff, s);
        pthread_mutex_lock(&lock);
        while (count == QCAP)
            pthread_cond_wait(&nonfull, &lock);
        queue[tail] = p;
        tail = (tail + 1) % QCAP;
        count++;
        pthread_cond_signal(&nonempty);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    unsigned long *sum = arg;
    for (int i = 0; i < N; i++) {
        pthread_mutex_lock(&lock);
        while (count == 0)
            pthread_cond_wait(&nonempty, &lock);
        char *p = queue[head];
        head = (head + 1) % QCAP;
        count--;
        pthread_cond_signal(&nonfull);
        pthread_mutex_unlock(&lock);
        *sum += (unsigned char)p[0];
        if (i % 4 == 0)
            p = realloc(p, 4096);   /* cross-thread realloc: the old block goes */
        free(p);
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    unsigned long sum = 0;
    pthread_create(&b, NULL, consumer, &sum);
    pthread_create(&a, NULL, producer, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("expect cross %d\nexpect blocks %d\nchecksum %lu\n", N, N + N / 4, sum);
    return 0;
}
