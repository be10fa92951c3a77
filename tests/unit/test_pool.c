/*
 * Unit tests of the thread pool (rpc/pool.c). Tests that need a worker
 * held still park it on a gate and wait for it to arrive, so no test
 * depends on how fast threads run: they pass on a slow, loaded machine.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "rpc/pool.h"

#include "check_main.h"

/* A counter one thread can wait on: post adds one, wait sleeps until it
 * reaches n. A gate is a signal waited for at 1. */
typedef struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    int n;
} signal_t;

#define SIGNAL_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0}

static void sig_post(signal_t *s)
{
    pthread_mutex_lock(&s->m);
    s->n++;
    pthread_cond_broadcast(&s->c);
    pthread_mutex_unlock(&s->m);
}

static void sig_wait(signal_t *s, int n)
{
    pthread_mutex_lock(&s->m);
    while (s->n < n)
        pthread_cond_wait(&s->c, &s->m);
    pthread_mutex_unlock(&s->m);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* What the tasks below share with their test. */
typedef struct {
    fr_pool *p;
    signal_t entered, open, done;
    atomic_int ran;
    int rc;                 /* a result a task reports */
    int on_worker;          /* fr_pool_is_worker inside the task */
    pthread_t thread;       /* the thread the task ran on */
} ctx_t;

#define CTX_INIT {NULL, SIGNAL_INIT, SIGNAL_INIT, SIGNAL_INIT, 0, 0, 0, 0}

static void count_task(void *arg) { atomic_fetch_add((atomic_int *)arg, 1); }

/* Holds its worker until the test opens the gate. */
static void gate_task(void *arg)
{
    ctx_t *c = arg;
    sig_post(&c->entered);
    sig_wait(&c->open, 1);
}

/* Notes where it ran. */
static void where_task(void *arg)
{
    ctx_t *c = arg;
    c->thread = pthread_self();
    c->on_worker = fr_pool_is_worker(c->p);
    atomic_fetch_add(&c->ran, 1);
    sig_post(&c->done);
}

/* Opens c's gate once fr_pool_destroy has begun on c->p: it probes with
 * submits until one is refused. Each probe accepted (queued or run inline)
 * is counted in accepted, each that ran in ran. Run on its own thread. */
typedef struct {
    ctx_t *c;
    atomic_int accepted, ran;
} opener_t;

static void *open_when_shutting_down(void *arg)
{
    opener_t *o = arg;
    int rc;
    while ((rc = fr_pool_submit(o->c->p, count_task, &o->ran)) >= 0) {
        atomic_fetch_add(&o->accepted, 1);
        sleep_ms(1);
    }
    ck_assert_int_eq(rc, FRPC_ESHUTDOWN);
    sig_post(&o->c->open);
    return NULL;
}

/* Destroys c->p while its one worker is parked on c's gate, opening the
 * gate only once destroy has begun, and checks the probes all ran. */
static void destroy_while_parked(ctx_t *c)
{
    opener_t o = {c, 0, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, open_when_shutting_down, &o), 0);
    fr_pool_destroy(c->p);
    pthread_join(t, NULL);
    ck_assert_int_eq(atomic_load(&o.ran), atomic_load(&o.accepted));
}

#define MANY_TASKS 100000
#define SUBMITTERS 4

typedef struct {
    fr_pool *p;
    atomic_int *hits;
    int first, n;
} submitter_t;

static void *submit_range(void *arg)
{
    submitter_t *s = arg;
    for (int i = s->first; i < s->first + s->n; i++) {
        ck_assert_int_ge(fr_pool_submit(s->p, count_task, &s->hits[i]), 0);
    }
    return NULL;
}

START_TEST(every_task_runs_exactly_once)
{
    fr_pool *p;
    atomic_int *hits = calloc(MANY_TASKS, sizeof(*hits));
    submitter_t s[SUBMITTERS];
    pthread_t t[SUBMITTERS];
    ck_assert_ptr_nonnull(hits);
    ck_assert_int_eq(fr_pool_create(4, 256, &p), 0);
    for (int i = 0; i < SUBMITTERS; i++) {
        s[i] = (submitter_t){p, hits, i * (MANY_TASKS / SUBMITTERS),
                             MANY_TASKS / SUBMITTERS};
        ck_assert_int_eq(pthread_create(&t[i], NULL, submit_range, &s[i]), 0);
    }
    for (int i = 0; i < SUBMITTERS; i++)
        pthread_join(t[i], NULL);
    fr_pool_destroy(p);
    for (int i = 0; i < MANY_TASKS; i++)
        ck_assert_int_eq(atomic_load(&hits[i]), 1);
    free(hits);
}
END_TEST

typedef struct {
    int log[500];
    int n;
} order_t;

typedef struct {
    order_t *order;
    int index;
} order_arg_t;

static void log_task(void *arg)
{
    order_arg_t *a = arg;
    a->order->log[a->order->n++] = a->index; /* one worker: no race */
}

START_TEST(one_worker_runs_tasks_in_fifo_order)
{
    fr_pool *p;
    order_t order = {{0}, 0};
    order_arg_t args[500];
    ck_assert_int_eq(fr_pool_create(1, 1000, &p), 0);
    for (int i = 0; i < 500; i++) {
        args[i] = (order_arg_t){&order, i};
        ck_assert_int_eq(fr_pool_submit(p, log_task, &args[i]), 0);
    }
    fr_pool_destroy(p);
    ck_assert_int_eq(order.n, 500);
    for (int i = 0; i < 500; i++)
        ck_assert_int_eq(order.log[i], i);
}
END_TEST

START_TEST(full_queue_runs_the_task_on_the_submitter)
{
    ctx_t c = CTX_INIT, queued = CTX_INIT, inl = CTX_INIT;
    ck_assert_int_eq(fr_pool_create(1, 4, &c.p), 0);
    queued.p = inl.p = c.p;
    ck_assert_int_eq(fr_pool_submit(c.p, gate_task, &c), 0);
    sig_wait(&c.entered, 1); /* the worker is parked; the queue is empty */
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(fr_pool_submit(c.p, where_task, &queued), 0);
    ck_assert_uint_eq(fr_pool_queued(c.p), 4);
    ck_assert_uint_eq(fr_pool_size(c.p), 1);
    for (int i = 1; i <= 2; i++) {
        ck_assert_int_eq(fr_pool_submit(c.p, where_task, &inl), 1);
        ck_assert_int_eq(atomic_load(&inl.ran), i); /* ran before return */
        ck_assert(pthread_equal(inl.thread, pthread_self()));
        ck_assert_int_eq(inl.on_worker, 0);
    }
    ck_assert_int_eq(atomic_load(&queued.ran), 0);
    sig_post(&c.open);
    fr_pool_destroy(c.p);
    ck_assert_int_eq(atomic_load(&queued.ran), 4);
    ck_assert_int_eq(queued.on_worker, 1);
}
END_TEST

/* Submits two tasks to its own pool (one worker, capacity 1): the first is
 * queued, the second finds the queue full and runs here, on the worker. */
static void submit_twice_task(void *arg)
{
    ctx_t *c = arg;
    ck_assert_int_eq(fr_pool_submit(c->p, count_task, &c->ran), 0);
    c->rc = fr_pool_submit(c->p, where_task, c);
    c->on_worker = fr_pool_is_worker(c->p) && c->on_worker &&
                   pthread_equal(c->thread, pthread_self());
}

START_TEST(worker_submitting_to_a_full_queue_runs_the_task_itself)
{
    ctx_t c = CTX_INIT;
    ck_assert_int_eq(fr_pool_create(1, 1, &c.p), 0);
    ck_assert_int_eq(fr_pool_submit(c.p, submit_twice_task, &c), 0);
    sig_wait(&c.done, 1); /* where_task ran; destroy would refuse it */
    fr_pool_destroy(c.p);
    ck_assert_int_eq(c.rc, 1);
    ck_assert_int_eq(c.on_worker, 1);
    ck_assert_int_eq(atomic_load(&c.ran), 2); /* where_task and count_task */
}
END_TEST

START_TEST(destroy_runs_every_queued_task)
{
    ctx_t c = CTX_INIT;
    atomic_int ran = 0;
    ck_assert_int_eq(fr_pool_create(1, 100, &c.p), 0);
    ck_assert_int_eq(fr_pool_submit(c.p, gate_task, &c), 0);
    sig_wait(&c.entered, 1);
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(fr_pool_submit(c.p, count_task, &ran), 0);
    destroy_while_parked(&c); /* all 50 are still queued when it begins */
    ck_assert_int_eq(atomic_load(&ran), 50);
}
END_TEST

/* Runs while destroy drains: its submit must be refused. */
static void resubmit_task(void *arg)
{
    ctx_t *c = arg;
    c->rc = fr_pool_submit(c->p, count_task, &c->ran);
}

START_TEST(submit_after_destroy_began_is_refused)
{
    ctx_t c = CTX_INIT;
    ck_assert_int_eq(fr_pool_create(1, 8, &c.p), 0);
    ck_assert_int_eq(fr_pool_submit(c.p, gate_task, &c), 0);
    sig_wait(&c.entered, 1);
    c.rc = 12345;
    ck_assert_int_eq(fr_pool_submit(c.p, resubmit_task, &c), 0);
    destroy_while_parked(&c);
    ck_assert_int_eq(c.rc, FRPC_ESHUTDOWN);
    ck_assert_int_eq(atomic_load(&c.ran), 0); /* the refused task never ran */
}
END_TEST

START_TEST(is_worker_only_inside_the_pools_tasks)
{
    ctx_t c = CTX_INIT, other = CTX_INIT;
    fr_pool *q;
    ck_assert_int_eq(fr_pool_create(2, 8, &c.p), 0);
    ck_assert_int_eq(fr_pool_create(2, 8, &q), 0);
    other.p = c.p; /* asks about c.p from a worker of q */
    ck_assert_int_eq(fr_pool_is_worker(c.p), 0);
    ck_assert_int_eq(fr_pool_is_worker(NULL), 0);
    ck_assert_int_eq(fr_pool_submit(c.p, where_task, &c), 0);
    ck_assert_int_eq(fr_pool_submit(q, where_task, &other), 0);
    fr_pool_destroy(q); /* first: its task looks at c.p */
    fr_pool_destroy(c.p);
    ck_assert_int_eq(c.on_worker, 1);
    ck_assert_int_eq(other.on_worker, 0);
}
END_TEST

/* Blocks (reports the result), waits at the gate, unblocks, reports done. */
static void block_then_wait_task(void *arg)
{
    ctx_t *c = arg;
    c->rc = fr_pool_block(c->p);
    sig_post(&c->entered);
    sig_wait(&c->open, 1);
    if (c->rc == 0)
        fr_pool_unblock(c->p);
    sig_post(&c->done);
}

/* Tries to block and, if it may, unblocks at once; reports done. */
static void try_block_task(void *arg)
{
    ctx_t *c = arg;
    c->rc = fr_pool_block(c->p);
    if (c->rc == 0)
        fr_pool_unblock(c->p);
    sig_post(&c->done);
}

START_TEST(block_keeps_one_worker_unblocked)
{
    ctx_t a = CTX_INIT, b = CTX_INIT, again = CTX_INIT;
    fr_pool *one;
    ck_assert_int_eq(fr_pool_create(2, 8, &a.p), 0);
    b.p = again.p = a.p;
    ck_assert_int_eq(fr_pool_submit(a.p, block_then_wait_task, &a), 0);
    sig_wait(&a.entered, 1);
    ck_assert_int_eq(a.rc, 0);
    /* a's worker is parked, so b runs on the other one */
    ck_assert_int_eq(fr_pool_submit(a.p, try_block_task, &b), 0);
    sig_wait(&b.done, 1);
    ck_assert_int_eq(b.rc, FRPC_EAGAIN);
    ck_assert_int_eq(fr_pool_block(a.p), 0); /* a non-worker: always 0 */
    ck_assert_int_eq(fr_pool_block(a.p), 0);
    fr_pool_unblock(a.p);
    fr_pool_unblock(a.p);
    sig_post(&a.open);
    sig_wait(&a.done, 1);
    /* a unblocked, so blocking is allowed again */
    ck_assert_int_eq(fr_pool_submit(a.p, try_block_task, &again), 0);
    sig_wait(&again.done, 1);
    ck_assert_int_eq(again.rc, 0);
    fr_pool_destroy(a.p);

    /* a lone worker may never block */
    ck_assert_int_eq(fr_pool_create(1, 1, &one), 0);
    again.p = one;
    ck_assert_int_eq(fr_pool_submit(one, try_block_task, &again), 0);
    fr_pool_destroy(one);
    ck_assert_int_eq(again.rc, FRPC_EAGAIN);
    ck_assert_int_eq(fr_pool_block(NULL), FRPC_EINVAL);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    fr_pool *p = (fr_pool *)&p;
    atomic_int n = 0;
    ck_assert_int_eq(fr_pool_create(0, 4, &p), FRPC_EINVAL);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(fr_pool_create(FR_POOL_MAX_THREADS + 1, 4, &p),
                     FRPC_EINVAL);
    ck_assert_int_eq(fr_pool_create(1, 0, &p), FRPC_EINVAL);
    ck_assert_int_eq(fr_pool_create(1, FR_POOL_MAX_CAPACITY + 1, &p),
                     FRPC_EINVAL);
    ck_assert_int_eq(fr_pool_create(1, 4, NULL), FRPC_EINVAL);
    ck_assert_int_eq(fr_pool_submit(NULL, count_task, &n), FRPC_EINVAL);
    ck_assert_int_eq(fr_pool_create(1, 4, &p), 0);
    ck_assert_int_eq(fr_pool_submit(p, NULL, &n), FRPC_EINVAL);
    fr_pool_destroy(p);
    fr_pool_destroy(NULL);
    ck_assert_uint_eq(fr_pool_size(NULL), 0);
    ck_assert_uint_eq(fr_pool_queued(NULL), 0);
}
END_TEST

static long cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000L +
           ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

START_TEST(idle_pool_uses_almost_no_cpu)
{
    fr_pool *p;
    atomic_int n = 0;
    ck_assert_int_eq(fr_pool_create(4, 64, &p), 0);
    ck_assert_int_eq(fr_pool_submit(p, count_task, &n), 0); /* wake one */
    sleep_ms(50);
    long before = cpu_us();
    sleep_ms(300);
    long used = cpu_us() - before;
    fr_pool_destroy(p);
    ck_assert_int_eq(atomic_load(&n), 1);
    ck_assert_int_lt(used, 50000);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"every task runs exactly once (100k tasks, 4 submitters)",
         every_task_runs_exactly_once, 120},
        {"one worker runs tasks in FIFO order",
         one_worker_runs_tasks_in_fifo_order},
        {"full queue runs the task on the submitter",
         full_queue_runs_the_task_on_the_submitter},
        {"worker submitting to a full queue runs the task itself",
         worker_submitting_to_a_full_queue_runs_the_task_itself},
        {"destroy runs every queued task", destroy_runs_every_queued_task},
        {"submit after destroy began is refused",
         submit_after_destroy_began_is_refused},
        {"is_worker only inside the pool's tasks",
         is_worker_only_inside_the_pools_tasks},
        {"block keeps one worker unblocked", block_keeps_one_worker_unblocked},
        {"bad arguments are refused", bad_arguments_are_refused},
        {"idle pool uses almost no CPU", idle_pool_uses_almost_no_cpu},
    };
    return fr_run_tests("thread pool", tests,
                        sizeof(tests) / sizeof(tests[0]), 30);
}
