/*
 * fabrpc-bench rma: one-sided gets and puts between rank 0 and rank 1's
 * registered region (rank 1's handlers never run for them).
 *
 * For each size and window W: metric "get" and "put" rows. W == 1 times
 * one synchronous transfer after another (p50/p99 of the round trip); a
 * larger W keeps W async transfers in flight (each completed one is
 * replaced). mb_per_s is the bytes moved per second either way. Then,
 * for sizes up to 64 KiB, "get_batch" and "put_batch": the same
 * transfers as batches of 1,000 (frpc_transfer, one after another).
 *
 * The timing and the rows (bench_rma_row, bench_rma_rows) take the way of
 * moving bytes as a bench_mover, so that --baseline's raw libfabric loop
 * (bench_fi_rma.c) is timed and printed exactly as fabrpc is.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define RMA_TIMEOUT_MS 120000

/* Rank 1's descriptor, set before the barrier that lets rank 0 ask. */
static struct {
    pthread_mutex_t lock;
    unsigned char desc[FRPC_MEM_DESC_SIZE];
    frpc_mem *mem;
    void *buf;
} region = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void give_desc(frpc_request *req, void *user)
{
    unsigned char d[FRPC_MEM_DESC_SIZE];
    (void)user;
    pthread_mutex_lock(&region.lock);
    memcpy(d, region.desc, sizeof(d));
    pthread_mutex_unlock(&region.lock);
    frpc_respond(req, d, sizeof(d));
}

int bench_register_rma(frpc_agent *a)
{
    return frpc_register(a, "bench_rma_desc", give_desc, NULL, FRPC_INLINE);
}

static int failed(const char *what, int rc)
{
    fprintf(stderr, "fabrpc-bench: %s: %s\n", what, frpc_strerror(rc));
    return 1;
}

/* What the fabrpc movers act on: rank 0's region and rank 1's
 * descriptor. */
typedef struct fab_ctx {
    frpc_mem *m;
    const unsigned char *desc;
    int put;
} fab_ctx;

static int fab_one(void *ctx, size_t size)
{
    const fab_ctx *c = ctx;
    int rc = c->put ? frpc_put(c->m, 0, c->desc, FRPC_MEM_DESC_SIZE, 0, size,
                               RMA_TIMEOUT_MS)
                    : frpc_get(c->m, 0, c->desc, FRPC_MEM_DESC_SIZE, 0, size,
                               RMA_TIMEOUT_MS);
    return rc ? failed(c->put ? "put" : "get", rc) : 0;
}

static int start(const fab_ctx *c, size_t size, frpc_future **f)
{
    return (c->put ? frpc_put_async : frpc_get_async)(
        c->m, 0, c->desc, FRPC_MEM_DESC_SIZE, 0, size, RMA_TIMEOUT_MS, f);
}

/* W in flight: n transfers, each completed one replaced. */
static int fab_window(void *ctx, size_t size, long w, long n)
{
    const fab_ctx *c = ctx;
    frpc_future **f = calloc((size_t)w, sizeof(*f));
    long started = 0, done = 0;
    int rc = 0;
    if (!f)
        return failed("futures", FRPC_ENOMEM);
    for (long j = 0; j < w && started < n && !rc; j++, started++)
        rc = start(c, size, &f[j]);
    while (!rc && done < started) {
        size_t i;
        if ((rc = frpc_wait_any(f, (size_t)w, RMA_TIMEOUT_MS, &i)))
            break;
        rc = frpc_future_error(f[i], NULL, NULL);
        frpc_future_free(f[i]);
        f[i] = NULL;
        done++;
        if (!rc && started < n) {
            rc = start(c, size, &f[i]);
            started++;
        }
    }
    for (long j = 0; j < w; j++)
        frpc_future_free(f[j]);
    free(f);
    return rc ? failed(c->put ? "put" : "get", rc) : 0;
}

int bench_rma_row(const bench_opts *o, const char *system,
                  const char *provider, const char *metric,
                  const bench_mover *mv, size_t size, long w)
{
    long iters = bench_iters(o, size);
    long warm = o->warmup >= 0 ? o->warmup : iters / 10;
    bench_row r = bench_row_new(system, provider, metric);
    double secs;
    /* not around the raw baselines' rows: their forked peer busy-polls */
    int fabrpc = !strcmp(system, "fabrpc");
    if (fabrpc)
        r.core_ns_before = bench_core_ns(o);
    bench_wait waited = bench_wait_begin();

    if (w == 1) {
        double sum = 0, *lat = calloc((size_t)iters, sizeof(double));
        if (!lat)
            return failed("latencies", FRPC_ENOMEM);
        for (long i = -warm; i < iters; i++) {
            double t0 = bench_now_us();
            if (mv->one(mv->ctx, size)) {
                free(lat);
                return 1;
            }
            if (i >= 0)
                sum += (lat[i] = bench_now_us() - t0);
        }
        r.p50_us = bench_quantile(lat, iters, 0.5);
        r.p99_us = bench_quantile(lat, iters, 0.99);
        free(lat);
        secs = sum / 1e6;
    } else {
        if (mv->window(mv->ctx, size, w, warm < w ? w : warm))
            return 1;
        double t0 = bench_now_us();
        if (mv->window(mv->ctx, size, w, iters))
            return 1;
        secs = (bench_now_us() - t0) / 1e6;
    }
    double wait = bench_wait_share(&waited);
    r.size = (long)size;
    r.inflight = w;
    r.iters = iters;
    r.calls_per_s = (double)iters / secs;
    r.mb_per_s = (double)size * r.calls_per_s / 1e6;
    if (fabrpc) { /* not the raw baselines' rows */
        r.core_ns_after = bench_core_ns(o);
        r.coalesce = o->coalesce;
        if (w == 1)
            bench_judge_tail(&r);
    }
    bench_judge_wait(&r, wait);
    bench_emit(&r);
    return 0;
}

/* The rows of sizes up to max_size, for each window of windows[0..n). */
static int rows_for(const bench_opts *o, const char *system,
                    const char *provider, const char *const metric[2],
                    const bench_mover mv[2], size_t max_size,
                    const long *windows, int n)
{
    int rc = 0;
    for (int put = 0; put < 2 && !rc; put++)
        for (int s = 0; s < o->nsizes && !rc; s++)
            for (int w = 0; w < n && !rc && o->sizes[s] <= max_size; w++)
                rc = bench_rma_row(o, system, provider, metric[put], &mv[put],
                                   o->sizes[s], windows[w]);
    return rc;
}

int bench_rma_rows(const bench_opts *o, const char *system,
                   const char *provider, const char *const metric[2],
                   const bench_mover mv[2])
{
    return rows_for(o, system, provider, metric, mv, SIZE_MAX, o->inflight,
                    o->ninflight);
}

int bench_rma_batch_rows(const bench_opts *o, const char *system,
                         const char *provider, const char *const metric[2],
                         const bench_mover mv[2])
{
    static const long batch = BENCH_RMA_BATCH;
    return rows_for(o, system, provider, metric, mv, BENCH_RMA_BATCH_SIZE_MAX,
                    &batch, 1);
}

/* n transfers as batches of w (frpc_transfer), one batch at a time. */
static int fab_batches(void *ctx, size_t size, long w, long n)
{
    const fab_ctx *c = ctx;
    frpc_xfer *ops = calloc((size_t)w, sizeof(*ops));
    int rc = 0;
    if (!ops)
        return failed("batch", FRPC_ENOMEM);
    for (long i = 0; i < w; i++)
        ops[i] = (frpc_xfer){.op = c->put ? FRPC_XFER_PUT : FRPC_XFER_GET,
                             .local = c->m, .desc = c->desc,
                             .desc_len = FRPC_MEM_DESC_SIZE, .len = size};
    for (long done = 0; done < n && !rc; done += w)
        rc = frpc_transfer(ops, (size_t)(n - done < w ? n - done : w), NULL,
                           0, RMA_TIMEOUT_MS);
    free(ops);
    return rc ? failed(c->put ? "put batch" : "get batch", rc) : 0;
}

static int measure(frpc_agent *a, const bench_opts *o, frpc_mem *m)
{
    static const char *const metric[2] = {"get", "put"};
    static const char *const batch_metric[2] = {"get_batch", "put_batch"};
    frpc_result res;
    unsigned char desc[FRPC_MEM_DESC_SIZE];
    fab_ctx ctx[2] = {{m, desc, 0}, {m, desc, 1}};
    bench_mover mv[2] = {{fab_one, fab_window, &ctx[0]},
                         {fab_one, fab_window, &ctx[1]}};
    int rc = frpc_call(a, 1, "bench_rma_desc", NULL, 0, RMA_TIMEOUT_MS, &res);
    if (rc || res.len != sizeof(desc)) {
        frpc_result_clear(&res);
        return failed("rank 1's descriptor", rc ? rc : FRPC_EPROTO);
    }
    memcpy(desc, res.data, sizeof(desc));
    frpc_result_clear(&res);
    bench_mover bmv[2] = {{fab_one, fab_batches, &ctx[0]},
                          {fab_one, fab_batches, &ctx[1]}};
    return bench_rma_rows(o, "fabrpc", frpc_provider(a), metric, mv) ||
           bench_rma_batch_rows(o, "fabrpc", frpc_provider(a), batch_metric,
                                bmv);
}

int bench_run_rma(frpc_agent *a, const bench_opts *o)
{
    size_t max = 1;
    int rc;
    for (int i = 0; i < o->nsizes; i++)
        max = o->sizes[i] > max ? o->sizes[i] : max;
    void *buf = malloc(max);
    if (!buf)
        return failed("region", FRPC_ENOMEM);
    /* Written before it is timed, as Mercury's hg_bw fills its buffers:
     * an untouched region reads as the kernel's one zero page, not
     * memory. */
    memset(buf, 0x5a + frpc_rank(a), max);
    int access = FRPC_MEM_REMOTE_READ | FRPC_MEM_REMOTE_WRITE;
    frpc_mem *m;
    if ((rc = frpc_mem_register(a, buf, max, frpc_rank(a) ? access : 0, &m))) {
        free(buf);
        return failed("frpc_mem_register", rc);
    }
    pthread_mutex_lock(&region.lock);
    if (frpc_rank(a) == 1)
        rc = frpc_mem_describe(m, 0, max, region.desc);
    region.mem = m;
    region.buf = buf;
    pthread_mutex_unlock(&region.lock);
    if (rc)
        return failed("frpc_mem_describe", rc);
    if ((rc = frpc_barrier(a, RMA_TIMEOUT_MS)))
        return failed("barrier", rc);
    return frpc_rank(a) == 0 ? measure(a, o, m) : 0;
}

void bench_rma_end(void)
{
    pthread_mutex_lock(&region.lock);
    if (region.mem && frpc_mem_deregister(region.mem, RMA_TIMEOUT_MS) == 0) {
        free(region.buf);
        region.mem = NULL;
        region.buf = NULL;
    }
    pthread_mutex_unlock(&region.lock);
}
