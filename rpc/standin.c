/*
 * Pool handlers on the progress thread, and the stand-in thread: see
 * standin.h for why and what is promised.
 *
 * Design notes: one mutex guards the taken list (head..n), the serial of
 * the handler running (running, also read without the lock), armed and
 * stop. Only the progress thread appends (from its own poll, never while
 * it runs a taken handler); the progress thread pops, and the stand-in
 * drains what is left once it finds a handler stuck, so every taken
 * request is run exactly once, here or on the pool. The stand-in ticks
 * only while armed: the progress thread arms it (one signal) when a run
 * begins and it is not; it disarms itself after FR_STANDIN_IDLE_NS
 * without a run, so an idle rank has no thread waking.
 */
#include "config.h"

#include <stdlib.h>

#include "comm/threads.h"
#include "comm/clock.h"
#include "rpc/agent.h"
#include "rpc/standin.h"

#define FR_TAKEN_MAX 64 /* requests taken from one poll, at most */

struct fr_standin {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the stand-in's sleep */
    pthread_t thread;
    frpc_request *taken[FR_TAKEN_MAX];
    unsigned head, n;             /* taken[head..n) not yet run */
    atomic_uint_fast64_t running; /* the serial of the run under way, or 0 */
    const fr_func *running_fn;
    uint64_t serial;              /* of the last run begun */
    uint64_t last_run_ns;         /* coarse clock, when it began */
    int armed, stop;
};

/* The agent whose progress thread this is, while it is in polls that
 * fr_standin_run follows at once (only those take: a poll anywhere else
 * on that thread, such as a send's wait for room as it leaves the poller
 * bracket, may be followed by standing aside while a caller spins, and a
 * caller's call to itself then waited out its timeout with its request
 * taken and not run); the agent whose taken handler this thread runs
 * now. */
static _Thread_local frpc_agent *taking_for FR_TLS_FAST;
static _Thread_local const frpc_agent *running_for FR_TLS_FAST;

void fr_standin_poll_begin(frpc_agent *a)
{
    taking_for = a;
}

void fr_standin_poll_end(void)
{
    taking_for = NULL;
}

int fr_standin_here(const frpc_agent *a)
{
    return a && running_for == a;
}

int fr_standin_take(frpc_agent *a, frpc_request *r)
{
    fr_standin *s = a->standin;
    if (!s || taking_for != a || running_for || a->inline_depth ||
        fr_pool_size(a->pool) < 2 || fr_pool_queued(a->pool) ||
        atomic_load_explicit(&r->func->slow, memory_order_relaxed) ||
        atomic_load(&a->shutting_down))
        return 0;
    int took = 0;
    pthread_mutex_lock(&s->lock);
    if (s->n < FR_TAKEN_MAX) {
        s->taken[s->n++] = r;
        took = 1;
    }
    pthread_mutex_unlock(&s->lock);
    return took;
}

/* Under s->lock: what was taken and not run yet goes to the pool. */
static void rest_to_pool(frpc_agent *a, fr_standin *s)
{
    frpc_request *rest[FR_TAKEN_MAX];
    unsigned nrest = 0;
    while (s->head < s->n)
        rest[nrest++] = s->taken[s->head++];
    pthread_mutex_unlock(&s->lock);
    for (unsigned i = 0; i < nrest; i++)
        fr_request_to_pool(a, rest[i]);
    pthread_mutex_lock(&s->lock);
}

void fr_standin_release(frpc_agent *a)
{
    fr_standin *s = a->standin;
    /* Taken and not run, on the progress thread outside a taken run: it
     * is inside the poll that took them. */
    if (!s || taking_for != a || running_for || s->head == s->n)
        return;
    pthread_mutex_lock(&s->lock);
    rest_to_pool(a, s);
    s->head = s->n = 0;
    pthread_mutex_unlock(&s->lock);
}

int fr_standin_has_taken(const frpc_agent *a)
{
    const fr_standin *s = a->standin;
    return s && s->n > 0; /* only this thread appends */
}

/* fn's requests go to the pool (standin.h), counting quick runs there
 * from zero. */
static void mark_slow(fr_func *fn)
{
    if (atomic_exchange(&fn->slow, 1) == 0) {
        atomic_store_explicit(&fn->pool_quick, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&fn->slow_marks, 1, memory_order_relaxed);
    }
}

void fr_standin_pool_ran(fr_func *fn, uint64_t ns)
{
    if (ns >= FR_STANDIN_HEAVY_NS) {
        atomic_store_explicit(&fn->pool_quick, 0, memory_order_relaxed);
        return;
    }
    unsigned marks = atomic_load_explicit(&fn->slow_marks,
                                          memory_order_relaxed);
    unsigned shift = marks > 1 ? marks - 1 : 0;
    if (shift > FR_STANDIN_QUICK_MAX)
        shift = FR_STANDIN_QUICK_MAX;
    if (atomic_fetch_add_explicit(&fn->pool_quick, 1,
                                  memory_order_relaxed) + 1 >=
        FR_STANDIN_QUICK_RUNS << shift)
        atomic_store(&fn->slow, 0);
}

/* Runs r's handler (serial: its run's number here), timing one run in 8
 * and every run of a function whose last timed run was long (two clock
 * reads each): FR_STANDIN_HEAVY_RUNS long ones in a row make its function
 * slow. Only timed runs write the function's tally: other threads read
 * the entry on every request. r is freed by the run: its function is
 * read first. */
static void run_timed(frpc_request *r, uint64_t serial)
{
    fr_func *fn = (fr_func *)r->func;
    if ((serial & 7) != 0 && fn->p_heavy == 0) {
        fr_request_run(r);
        return;
    }
    uint64_t t0 = fr_now_ns();
    fr_request_run(r);
    if (fr_now_ns() - t0 < FR_STANDIN_HEAVY_NS)
        fn->p_heavy = 0;
    else if (++fn->p_heavy >= FR_STANDIN_HEAVY_RUNS)
        mark_slow(fn);
}

void fr_standin_run(frpc_agent *a)
{
    fr_standin *s = a->standin;
    running_for = a;
    /* The poll's own clock read when it has one (per-function figures
     * on): no read of ours per poll. */
    uint64_t began = fr_taken_ns ? fr_taken_ns : fr_now_ns();
    uint64_t began_coarse = fr_coarse_now_ns();
    pthread_mutex_lock(&s->lock);
    while (s->head < s->n) {
        /* Handlers that each return within a tick but together run for
         * a tick or more: the rest run in parallel on the pool, as they
         * did before 1.5 (the pool then busy, the next polls take
         * nothing till it is idle). The coarse clock (steps of up to
         * 4 ms) says when to read the fine one. */
        if (s->head > 0 && fr_coarse_now_ns() != began_coarse &&
            fr_now_ns() - began >= FR_STANDIN_TICK_NS) {
            rest_to_pool(a, s);
            break;
        }
        frpc_request *r = s->taken[s->head++];
        uint64_t serial = ++s->serial;
        atomic_store(&s->running, serial);
        s->running_fn = r->func;
        s->last_run_ns = fr_coarse_now_ns();
        if (!s->armed) {
            s->armed = 1;
            pthread_cond_signal(&s->wake);
        }
        pthread_mutex_unlock(&s->lock);
        atomic_fetch_add_explicit(&a->handlers_on_progress, 1,
                                  memory_order_relaxed);
        run_timed(r, serial);
        pthread_mutex_lock(&s->lock);
    }
    s->head = s->n = 0;
    atomic_store(&s->running, 0);
    pthread_mutex_unlock(&s->lock);
    running_for = NULL;
}

static int still_running(void *arg)
{
    void **p = arg;
    fr_standin *s = p[0];
    return atomic_load(&s->running) == *(uint64_t *)p[1];
}

/* Under s->lock, with a run found stuck: its function goes slow, what was
 * taken after it to the pool, and this thread polls until it returns. */
static void stand_in(frpc_agent *a, fr_standin *s)
{
    uint64_t stuck = atomic_load(&s->running);

    mark_slow((fr_func *)s->running_fn);
    atomic_fetch_add(&a->progress_stand_ins, 1);
    rest_to_pool(a, s);
    pthread_mutex_unlock(&s->lock);
    void *arg[2] = {s, &stuck};
    fr_progress_stand_in(a, still_running, arg);
    pthread_mutex_lock(&s->lock);
}

static void *standin_main(void *arg)
{
    frpc_agent *a = arg;
    fr_standin *s = a->standin;
    uint64_t seen = 0; /* the run under way at the last look */

    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        if (!s->armed) {
            seen = 0;
            pthread_cond_wait(&s->wake, &s->lock);
            continue;
        }
        struct timespec ts = fr_ns_to_timespec(fr_now_ns() +
                                               FR_STANDIN_TICK_NS);
        pthread_cond_timedwait(&s->wake, &s->lock, &ts);
        if (s->stop)
            break;
        uint64_t now_run = atomic_load(&s->running);
        if (now_run && now_run == seen) {
            stand_in(a, s);
            seen = 0;
            continue;
        }
        /* Answers the handlers gave to a peer that had one this pass
         * wait in the shared batches for the next poll: a handler that
         * runs on must not hold them past a tick. Without the lock: a
         * send may wait for room, and the progress thread takes the lock
         * between its handlers. */
        seen = now_run;
        if (now_run) {
            pthread_mutex_unlock(&s->lock);
            fr_fabric_send_batched(a->fab);
            pthread_mutex_lock(&s->lock);
            continue;
        }
        if (fr_coarse_now_ns() - s->last_run_ns > FR_STANDIN_IDLE_NS)
            s->armed = 0;
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int fr_standin_start(frpc_agent *a)
{
    fr_standin *s = calloc(1, sizeof(*s));
    if (!s)
        return FRPC_ENOMEM;
    pthread_mutex_init(&s->lock, NULL);
    fr_cond_init_monotonic(&s->wake);
    atomic_init(&s->running, 0);
    a->standin = s;
    if (fr_thread_create(&s->thread, standin_main, a)) {
        a->standin = NULL;
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return FRPC_ENOMEM;
    }
    return 0;
}

void fr_standin_stop(frpc_agent *a)
{
    fr_standin *s = a->standin;
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
}

void fr_standin_free(frpc_agent *a)
{
    fr_standin *s = a->standin;
    if (!s)
        return;
    a->standin = NULL;
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
