/*
 * pending_micro: what the pending table costs alone, without a network
 * (docs/bench/HISTORY.md, "The fast path, counted"). Not built by make:
 *
 *   B=_build   # a built tree
 *   gcc -O2 -I. -I$B -o /tmp/pending_micro tools/pending_micro.c \
 *       $B/rpc/.libs/libfrrpc.a $B/comm/.libs/libfrcomm.a \
 *       $B/serialization/.libs/libfrser.a -lfabric -lmsgpackc -lpthread
 *   /tmp/pending_micro
 *
 * Prints ns per call for (1) one thread adding and completing calls with
 * a deadline, one at a time, and (2) two caller threads, each keeping 64
 * calls in flight, while a third completes them in batches of up to 32
 * (as a poll does). Three repetitions of each.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "comm/clock.h"
#include "rpc/pending.h"

#define ONE_N 2000000
#define MT_N 1000000
#define W 64

static fr_pending_table t;
static fr_pending calls[2][W];
static _Atomic uint64_t posted[2][W]; /* id of each slot's call, 0: none */
static atomic_int stop;

static double since_ns(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a->tv_sec) * 1e9 + (b.tv_nsec - a->tv_nsec);
}

static void one_thread(void)
{
    struct timespec a;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < ONE_N; i++) {
        fr_pending *e = &calls[0][i % W];
        fr_pending_add(&t, e, 1, "f", 1000, fr_now_ns() + 1000000000ull,
                       NULL);
        fr_pending_complete(&t, e->id, 1, 0, 0, NULL, 0, NULL);
    }
    printf("one thread, add + complete: %.1f ns per call\n",
           since_ns(&a) / ONE_N);
}

static void *caller(void *arg)
{
    int c = (int)(intptr_t)arg;
    for (int i = 0; i < MT_N; i++) {
        int s = i % W;
        if (i >= W)
            while (!atomic_load(&calls[c][s].done))
                ;
        fr_pending_add(&t, &calls[c][s], (uint32_t)c, "f", 1000,
                       fr_now_ns() + 1000000000ull, NULL);
        atomic_store(&posted[c][s], calls[c][s].id);
    }
    for (int s = 0; s < W; s++)
        while (!atomic_load(&calls[c][s].done))
            ;
    return NULL;
}

static void *completer(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        fr_answer ans[32];
        size_t n = 0;
        for (int c = 0; c < 2; c++)
            for (int s = 0; s < W && n < 32; s++) {
                uint64_t id = atomic_exchange(&posted[c][s], 0);
                if (id)
                    ans[n++] = (fr_answer){.id = id, .src = (uint32_t)c};
            }
        if (n)
            fr_pending_complete_many(&t, ans, n);
    }
    return NULL;
}

static void two_callers(void)
{
    struct timespec a;
    pthread_t th[3];
    atomic_store(&stop, 0);
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_create(&th[2], NULL, completer, NULL);
    for (int c = 0; c < 2; c++)
        pthread_create(&th[c], NULL, caller, (void *)(intptr_t)c);
    for (int c = 0; c < 2; c++)
        pthread_join(th[c], NULL);
    atomic_store(&stop, 1);
    pthread_join(th[2], NULL);
    printf("two callers, one completer: %.1f ns per call\n",
           since_ns(&a) / (2.0 * MT_N));
}

int main(void)
{
    if (fr_pending_init(&t))
        return 1;
    for (int rep = 0; rep < 3; rep++)
        one_thread();
    for (int rep = 0; rep < 3; rep++)
        two_callers();
    fr_pending_destroy(&t);
    return 0;
}
