/*
 * The thread pool. See pool.h for the invariant: an accepted task runs
 * exactly once, a refused one never.
 *
 * Design notes: one mutex guards the ring, its count, the stopping flag
 * and the blocked count. The ring is allocated once, at create; a full
 * ring makes the submitter run the task itself, so submit never waits for
 * room. Workers sleep on one condition variable while the ring is empty;
 * each push signals one of them. Destroy sets stopping under the lock and
 * wakes them all; a worker leaves only when stopping is set and the ring
 * is empty, so every queued task runs before the joins return. Worker ids
 * are written while create holds the lock; each worker knows its pool
 * (my_pool) before its first task. A growing pool starts a worker inside
 * fr_pool_block, under the lock, never once stopping is set: destroy
 * then joins a count that no longer changes.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "comm/clock.h" /* FR_TLS_FAST */
#include "comm/threads.h"
#include "rpc/pool.h"

typedef struct fr_task {
    fr_task_fn fn;
    void *arg;
} fr_task;

struct fr_pool {
    pthread_mutex_t lock;
    pthread_cond_t nonempty;  /* signalled on push and on stopping */
    fr_task *ring;            /* capacity slots, allocated once */
    unsigned capacity;
    unsigned head;            /* oldest task */
    atomic_uint count;        /* tasks in the ring; written under lock */
    unsigned blocked;         /* workers counted by fr_pool_block */
    unsigned sleeping;        /* workers in the condition's wait */
    int stopping;             /* destroy has begun */
    unsigned base;            /* workers asked for at create */
    unsigned max_threads;     /* what fr_pool_block may grow it to */
    unsigned nthreads;        /* workers started; written under lock */
    pthread_t worker[];       /* max_threads ids, written under lock */
};

/* The pool whose worker this thread is, or NULL: fr_pool_is_worker is
 * asked on every call's path (a loop over the workers' ids cost about 100
 * instructions each time). A pool's workers are joined before it is
 * freed, so no thread holds a stale one. */
static _Thread_local const fr_pool *my_pool FR_TLS_FAST;

static void *worker_main(void *arg)
{
    fr_pool *p = arg;

    my_pool = p;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        unsigned n = atomic_load_explicit(&p->count, memory_order_relaxed);
        if (n == 0) {
            if (p->stopping)
                break;
            p->sleeping++;
            pthread_cond_wait(&p->nonempty, &p->lock);
            p->sleeping--;
            continue;
        }
        fr_task t = p->ring[p->head];
        p->head = (p->head + 1) % p->capacity;
        atomic_store_explicit(&p->count, n - 1, memory_order_relaxed);
        pthread_mutex_unlock(&p->lock);
        t.fn(t.arg);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Stops and joins the workers started so far and frees p. The queue must
 * be drained by the workers; called by destroy and by a failed create. */
static void stop_and_free(fr_pool *p)
{
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->nonempty);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->worker[i], NULL);
    pthread_cond_destroy(&p->nonempty);
    pthread_mutex_destroy(&p->lock);
    free(p->ring);
    free(p);
}

int fr_pool_create(unsigned nthreads, unsigned capacity, fr_pool **out)
{
    return fr_pool_create_growing(nthreads, nthreads, capacity, out);
}

int fr_pool_create_growing(unsigned nthreads, unsigned max_threads,
                           unsigned capacity, fr_pool **out)
{
    fr_pool *p;

    if (out)
        *out = NULL;
    if (!out || nthreads < 1 || max_threads < nthreads ||
        max_threads > FR_POOL_MAX_THREADS || capacity < 1 ||
        capacity > FR_POOL_MAX_CAPACITY)
        return FRPC_EINVAL;
    p = calloc(1, sizeof(*p) + max_threads * sizeof(p->worker[0]));
    if (!p)
        return FRPC_ENOMEM;
    p->ring = malloc(capacity * sizeof(*p->ring));
    if (!p->ring || pthread_mutex_init(&p->lock, NULL) != 0)
        goto fail_ring;
    if (pthread_cond_init(&p->nonempty, NULL) != 0)
        goto fail_lock;
    p->capacity = capacity;
    p->base = nthreads;
    p->max_threads = max_threads;
    atomic_init(&p->count, 0);

    pthread_mutex_lock(&p->lock);
    for (; p->nthreads < nthreads; p->nthreads++)
        if (fr_thread_create(&p->worker[p->nthreads], worker_main, p))
            break;
    pthread_mutex_unlock(&p->lock);
    if (p->nthreads < nthreads) {
        stop_and_free(p); /* the queue is empty: they leave at once */
        return FRPC_ENOMEM;
    }
    *out = p;
    return 0;

fail_lock:
    pthread_mutex_destroy(&p->lock);
fail_ring:
    free(p->ring);
    free(p);
    return FRPC_ENOMEM;
}

int fr_pool_submit(fr_pool *p, fr_task_fn fn, void *arg)
{
    unsigned n;

    if (!p || !fn)
        return FRPC_EINVAL;
    pthread_mutex_lock(&p->lock);
    if (p->stopping) {
        pthread_mutex_unlock(&p->lock);
        return FRPC_ESHUTDOWN;
    }
    n = atomic_load_explicit(&p->count, memory_order_relaxed);
    if (n == p->capacity) {
        pthread_mutex_unlock(&p->lock);
        fn(arg); /* back-pressure: the submitter does the work */
        return 1;
    }
    p->ring[(p->head + n) % p->capacity] = (fr_task){fn, arg};
    atomic_store_explicit(&p->count, n + 1, memory_order_relaxed);
    pthread_cond_signal(&p->nonempty);
    /* A spinning submitter yields once (rpc/progress.c): the woken
     * worker is often queued on its CPU. */
    if (p->sleeping)
        fr_woke_sleeper = 1;
    pthread_mutex_unlock(&p->lock);
    return 0;
}

int fr_pool_is_worker(const fr_pool *p)
{
    return p && my_pool == p;
}

int fr_pool_block(fr_pool *p)
{
    int rc = 0;

    if (!p)
        return FRPC_EINVAL;
    if (!fr_pool_is_worker(p))
        return 0;
    pthread_mutex_lock(&p->lock);
    if (p->blocked + 1 >= p->nthreads && p->nthreads < p->max_threads &&
        !p->stopping &&
        fr_thread_create(&p->worker[p->nthreads], worker_main, p) == 0)
        p->nthreads++; /* one more to serve the queue while this waits */
    if (p->blocked + 1 < p->nthreads)
        p->blocked++;
    else
        rc = FRPC_EAGAIN;
    pthread_mutex_unlock(&p->lock);
    return rc;
}

void fr_pool_unblock(fr_pool *p)
{
    if (!p || !fr_pool_is_worker(p))
        return;
    pthread_mutex_lock(&p->lock);
    assert(p->blocked > 0);
    if (p->blocked > 0)
        p->blocked--;
    pthread_mutex_unlock(&p->lock);
}

unsigned fr_pool_size(const fr_pool *p)
{
    return p ? p->base : 0;
}

unsigned fr_pool_queued(const fr_pool *p)
{
    return p ? atomic_load_explicit(&p->count, memory_order_relaxed) : 0;
}

void fr_pool_destroy(fr_pool *p)
{
    if (!p)
        return;
    assert(!fr_pool_is_worker(p)); /* a worker cannot join itself */
    stop_and_free(p);
}
