/*
 * fabrpc-bench's timeouts mode: how late a call's timeout fires. Rank 0
 * calls rank 1's bench_sleep, a pool handler that answers only after
 * BENCH_SLEEP_MS, with a timeout of --sizes ms (default 10): each call must end
 * with FRPC_ETIMEDOUT, and its lateness is when it ended less when its
 * timeout was due. Rows: "timeout_sync" (one frpc_call after another) and
 * "timeout_async" (the calls started together, each future's end taken by
 * frpc_future_then on the pool), p50/p99/max of the lateness in us, and
 * how many did not end with FRPC_ETIMEDOUT (not_timed_out, want 0). The
 * promise it checks: a timeout fires within +50 ms on an idle machine, in
 * every progress mode.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench.h"

static void sleeper(frpc_request *req, void *user)
{
    (void)user;
    usleep(BENCH_SLEEP_MS * 1000);
    frpc_respond(req, NULL, 0);
}

int bench_register_timeouts(frpc_agent *a)
{
    return frpc_register(a, "bench_sleep", sleeper, NULL, 0);
}

typedef struct ended {
    double due_us;       /* when the timeout was due */
    double late_us;      /* filled by on_end */
    atomic_int done;
} ended;

static void on_end(frpc_future *f, void *user)
{
    ended *e = user;
    e->late_us = bench_now_us() - e->due_us;
    atomic_store(&e->done, 1);
    (void)f;
}

/* The row of n calls; late[] holds the lateness of those that timed out
 * (n - bad of them, first): an answered call has none. */
static void emit(const char *provider, const char *metric, long tmo,
                 long n, long inflight, double *late, long bad)
{
    bench_row r = bench_row_new("fabrpc", provider, metric);
    long m = n - bad;
    double max = m ? late[0] : 0;
    for (long i = 1; i < m; i++)
        max = fmax(max, late[i]);
    r.size = tmo;
    r.inflight = inflight;
    r.iters = n;
    r.p50_us = m ? bench_quantile(late, m, 0.5) : 0;
    r.p99_us = m ? bench_quantile(late, m, 0.99) : 0;
    r.max_us = max;
    r.not_timed_out = (double)bad;
    bench_emit(&r);
}

/* One size: its calls in turn, then all at once. */
static int run_one(frpc_agent *a, const char *prov, long tmo, long n)
{
    double *late = calloc((size_t)n, sizeof(*late));
    ended *e = calloc((size_t)n, sizeof(*e));
    frpc_future **f = calloc((size_t)n, sizeof(*f));
    long bad = 0;
    int rc = 0;

    if (!late || !e || !f) {
        rc = 1;
        goto out;
    }
    for (long i = 0; i < n; i++) {
        double t0 = bench_now_us();
        int s = frpc_call(a, 1, "bench_sleep", NULL, 0, (int)tmo, NULL);
        if (s == FRPC_ETIMEDOUT)
            late[i - bad] = bench_now_us() - (t0 + (double)tmo * 1000);
        else
            bad++;
    }
    emit(prov, "timeout_sync", tmo, n, 1, late, bad);
    bad = 0;
    for (long i = 0; i < n; i++) {
        e[i].due_us = bench_now_us() + (double)tmo * 1000;
        if (frpc_call_async(a, 1, "bench_sleep", NULL, 0, (int)tmo, &f[i]) ||
            frpc_future_then(f[i], on_end, &e[i])) {
            fprintf(stderr, "fabrpc-bench: timeouts: call %ld not started\n",
                    i);
            rc = 1;
            n = i + (f[i] != NULL);
            break;
        }
    }
    for (long i = 0; i < n; i++)
        frpc_future_wait(f[i], FRPC_TIMEOUT_NONE);
    for (long i = 0; i < n; i++) {
        while (!atomic_load(&e[i].done)) /* its callback may still run */
            usleep(100);
        if (frpc_future_error(f[i], NULL, NULL) == FRPC_ETIMEDOUT)
            late[i - bad] = e[i].late_us;
        else
            bad++;
        frpc_future_free(f[i]);
    }
    if (!rc)
        emit(prov, "timeout_async", tmo, n, n, late, bad);
    /* Let rank 1's pool finish the sleeps before the next size. */
    usleep((useconds_t)(BENCH_SLEEP_MS * 1000 * (1 + n / 4)));
out:
    free(late);
    free(e);
    free(f);
    return rc;
}

int bench_run_timeouts(frpc_agent *a, const bench_opts *o)
{
    long n = o->iters > 0 ? o->iters : 200;
    for (int s = 0; s < o->nsizes; s++)
        if (run_one(a, frpc_provider(a), (long)o->sizes[s], n))
            return 1;
    return 0;
}
