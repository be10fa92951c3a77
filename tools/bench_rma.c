/*
 * fabrpc-bench rma: one-sided gets and puts between rank 0 and rank 1's
 * registered region (rank 1's handlers never run for them).
 *
 * For each size and window W: metric "get" and "put" rows. W == 1 times
 * one synchronous transfer after another (p50/p99 of the round trip); a
 * larger W keeps W async transfers in flight (each completed one is
 * replaced). mb_per_s is the bytes moved per second either way.
 */
#include <pthread.h>
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

static int transfer(frpc_mem *m, const void *desc, size_t size, int put)
{
    return put ? frpc_put(m, 0, desc, FRPC_MEM_DESC_SIZE, 0, size,
                          RMA_TIMEOUT_MS)
               : frpc_get(m, 0, desc, FRPC_MEM_DESC_SIZE, 0, size,
                          RMA_TIMEOUT_MS);
}

/* W in flight: n transfers, each completed one replaced. */
static int window(frpc_mem *m, const void *desc, size_t size, long w, long n,
                  int put)
{
    frpc_future **f = calloc((size_t)w, sizeof(*f));
    long started = 0, done = 0;
    int rc = 0;
    if (!f)
        return FRPC_ENOMEM;
    for (long j = 0; j < w && started < n && !rc; j++, started++)
        rc = (put ? frpc_put_async : frpc_get_async)(
            m, 0, desc, FRPC_MEM_DESC_SIZE, 0, size, RMA_TIMEOUT_MS, &f[j]);
    while (!rc && done < started) {
        size_t i;
        if ((rc = frpc_wait_any(f, (size_t)w, RMA_TIMEOUT_MS, &i)))
            break;
        rc = frpc_future_error(f[i], NULL, NULL);
        frpc_future_free(f[i]);
        f[i] = NULL;
        done++;
        if (!rc && started < n) {
            rc = (put ? frpc_put_async : frpc_get_async)(
                m, 0, desc, FRPC_MEM_DESC_SIZE, 0, size, RMA_TIMEOUT_MS,
                &f[i]);
            started++;
        }
    }
    for (long j = 0; j < w; j++)
        frpc_future_free(f[j]);
    free(f);
    return rc;
}

static int row(frpc_agent *a, const bench_opts *o, frpc_mem *m,
               const void *desc, size_t size, long w, int put, double *lat)
{
    long iters = bench_iters(o, size);
    long warm = o->warmup >= 0 ? o->warmup : iters / 10;
    const char *name = put ? "put" : "get";
    bench_row r = bench_row_new("fabrpc", frpc_provider(a), name);
    double secs;
    int rc;

    if (w == 1) {
        double sum = 0;
        for (long i = -warm; i < iters; i++) {
            double t0 = bench_now_us();
            if ((rc = transfer(m, desc, size, put)))
                return failed(name, rc);
            if (i >= 0)
                sum += (lat[i] = bench_now_us() - t0);
        }
        r.p50_us = bench_quantile(lat, iters, 0.5);
        r.p99_us = bench_quantile(lat, iters, 0.99);
        secs = sum / 1e6;
    } else {
        if ((rc = window(m, desc, size, w, warm < w ? w : warm, put)))
            return failed(name, rc);
        double t0 = bench_now_us();
        if ((rc = window(m, desc, size, w, iters, put)))
            return failed(name, rc);
        secs = (bench_now_us() - t0) / 1e6;
    }
    r.size = (long)size;
    r.inflight = w;
    r.iters = iters;
    r.calls_per_s = (double)iters / secs;
    r.mb_per_s = (double)size * r.calls_per_s / 1e6;
    bench_emit(&r);
    return 0;
}

static int measure(frpc_agent *a, const bench_opts *o, frpc_mem *m)
{
    frpc_result res;
    unsigned char desc[FRPC_MEM_DESC_SIZE];
    long maxiters = 1;
    int rc = frpc_call(a, 1, "bench_rma_desc", NULL, 0, RMA_TIMEOUT_MS, &res);
    if (rc || res.len != sizeof(desc)) {
        frpc_result_clear(&res);
        return failed("rank 1's descriptor", rc ? rc : FRPC_EPROTO);
    }
    memcpy(desc, res.data, sizeof(desc));
    frpc_result_clear(&res);
    for (int i = 0; i < o->nsizes; i++)
        if (bench_iters(o, o->sizes[i]) > maxiters)
            maxiters = bench_iters(o, o->sizes[i]);
    double *lat = malloc(sizeof(double) * (size_t)maxiters);
    if (!lat)
        return failed("latencies", FRPC_ENOMEM);
    rc = 0;
    for (int put = 0; put < 2 && !rc; put++)
        for (int s = 0; s < o->nsizes && !rc; s++)
            for (int w = 0; w < o->ninflight && !rc; w++)
                rc = row(a, o, m, desc, o->sizes[s], o->inflight[w], put,
                         lat);
    free(lat);
    return rc;
}

int bench_run_rma(frpc_agent *a, const bench_opts *o)
{
    size_t max = 1;
    int rc;
    for (int i = 0; i < o->nsizes; i++)
        max = o->sizes[i] > max ? o->sizes[i] : max;
    void *buf = calloc(1, max);
    if (!buf)
        return failed("region", FRPC_ENOMEM);
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
