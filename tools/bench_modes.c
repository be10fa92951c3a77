/*
 * fabrpc-bench's measurements. See bench.h.
 *
 * Design notes
 * - Rank 0 makes every timed call; rank 1 only answers, with handlers
 *   registered FRPC_INLINE (the fast path), and waits in a final barrier
 *   with no time limit, so that a long run on rank 0 never meets a
 *   shutdown timeout on rank 1.
 * - Modes that measure every rank (idle, init) send rank 0 a
 *   bench_report with one synchronous call before that final barrier; the
 *   barrier's end tells rank 0 that every report is in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define CALL_TIMEOUT_MS 60000
#define SINK_REPLY 8          /* bandwidth: bytes of each reply */

/* What a rank tells rank 0 (all ranks share a host and an ABI). */
typedef struct bench_report {
    int32_t rank;
    double cpu_s;             /* idle */
    double t_start_us;        /* init: just before frpc_init */
    double t_ready_us;        /* init: after the first barrier */
    double t_exec_us;         /* init: the process's start */
    double rss_mb;            /* init */
} bench_report;

static struct {
    pthread_mutex_t lock;
    bench_report *r;          /* world entries, rank 0 only */
    int world;
} reports = {.lock = PTHREAD_MUTEX_INITIALIZER};

double bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Sleeps us microseconds (latency's --gap-us: the ranks go idle). */
static void bench_sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

long bench_iters(const bench_opts *o, size_t size)
{
    long n;
    if (o->iters > 0)
        return o->iters;
    switch (o->mode) {
    case BENCH_RATE:
        return 50000;
    case BENCH_BANDWIDTH: /* about 512 MiB of args per size */
        n = (long)((512ull << 20) / (size ? size : 1));
        return n < 16 ? 16 : n > 20000 ? 20000 : n;
    default: /* latency: at most 2 GiB moved per size */
        if (size <= 65536)
            return 10000;
        n = (long)((2ull << 30) / size / 2);
        return n < 20 ? 20 : n > 10000 ? 10000 : n;
    }
}

/* ---------------------------------------------------------------- */
/* Handlers                                                          */
/* ---------------------------------------------------------------- */

/* Answers with the args it was sent. */
static void echo(frpc_request *req, void *user)
{
    size_t len;
    const void *args = frpc_request_args(req, &len);
    frpc_respond(req, args, len);
}

/* Answers with the args it was sent, taken from the request: a long
 * reply is not copied (--reply given). */
static void echo_given(frpc_request *req, void *user)
{
    void *args;
    size_t len;
    if (frpc_request_take_args(req, &args, &len)) {
        frpc_respond_error(req, 1, "no memory for the args");
        return;
    }
    frpc_respond_owned(req, args, len);
}

/* Answers any args with SINK_REPLY bytes. */
static void sink(frpc_request *req, void *user)
{
    static const char reply[SINK_REPLY];
    frpc_respond(req, reply, sizeof(reply));
}

/* Keeps a rank's bench_report (rank 0). */
static void report(frpc_request *req, void *user)
{
    size_t len;
    const bench_report *r = frpc_request_args(req, &len);
    if (!r || len != sizeof(*r) || r->rank < 0 || r->rank >= reports.world) {
        frpc_respond_error(req, 1, "bad bench_report");
        return;
    }
    pthread_mutex_lock(&reports.lock);
    reports.r[r->rank] = *r;
    pthread_mutex_unlock(&reports.lock);
    frpc_respond(req, NULL, 0);
}

/* The handler of fabrpc's latency, rate and bandwidth rows. */
static const char *handler_name(const bench_opts *o)
{
    return o->handler_pool ? "pool" : "inline";
}

int bench_register(frpc_agent *a, int world, const bench_opts *o)
{
    int rc;
    unsigned flags = o->handler_pool ? 0 : FRPC_INLINE;
    reports.world = world;
    if (!(reports.r = calloc((size_t)world, sizeof(*reports.r))))
        return FRPC_ENOMEM;
    if ((rc = frpc_register(a, "bench_echo", o->reply_given ? echo_given : echo,
                            NULL, flags)) ||
        (rc = frpc_register(a, "bench_sink", sink, NULL, flags)) ||
        (rc = frpc_register(a, "bench_report", report, NULL, FRPC_INLINE)) ||
        (rc = bench_register_timeouts(a)) || (rc = bench_register_rma(a)))
        return rc;
    return 0;
}

/* Rank 0 keeps its own report; the others send theirs. */
static int send_report(frpc_agent *a, bench_report *r)
{
    frpc_result res = {0};
    r->rank = frpc_rank(a);
    if (r->rank == 0) {
        pthread_mutex_lock(&reports.lock);
        reports.r[0] = *r;
        pthread_mutex_unlock(&reports.lock);
        return 0;
    }
    int rc = frpc_call(a, 0, "bench_report", r, sizeof(*r), CALL_TIMEOUT_MS,
                       &res);
    if (rc)
        fprintf(stderr, "fabrpc-bench: rank %d: report to rank 0: %s\n",
                r->rank, res.error ? res.error : frpc_strerror(rc));
    frpc_result_clear(&res);
    return rc ? 1 : 0;
}

/* ---------------------------------------------------------------- */
/* latency                                                           */
/* ---------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_proc_number(const char *path, const char *line_start,
                         const char *key)
{
    char line[256];
    double v = NAN;
    FILE *f = fopen(path, "r");
    if (!f)
        return NAN;
    while (fgets(line, sizeof(line), f)) {
        char *k = strstr(line, key);
        if (!strncmp(line, line_start, strlen(line_start)) && k) {
            v = strtod(k + strlen(key), NULL);
            break;
        }
    }
    fclose(f);
    return v;
}

double bench_quantile(double *v, long n, double q)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    long i = (long)((double)n * q);
    return v[i < n ? i : n - 1];
}

static int call_failed(int rc, frpc_result *res, size_t len, size_t want)
{
    if (!rc && len == want)
        return 0;
    fprintf(stderr, "fabrpc-bench: call failed: %s\n",
            rc ? (res && res->error ? res->error : frpc_strerror(rc))
               : "reply of the wrong size");
    return 1;
}

static int latency_size(frpc_agent *a, const bench_opts *o, size_t size,
                        void *buf, double *lat)
{
    long iters = bench_iters(o, size);
    long warm = o->warmup >= 0 ? o->warmup : iters / 10;
    double sum = 0, core_before = bench_core_ns(o);
    bench_wait waited = bench_wait_begin();
    for (long i = -warm; i < iters; i++) {
        frpc_result res = {0};
        if (o->gap_us > 0)
            bench_sleep_us(o->gap_us);
        double t0 = bench_now_us();
        int rc = frpc_call(a, 1, "bench_echo", buf, size, CALL_TIMEOUT_MS,
                           &res);
        double t1 = bench_now_us();
        int bad = call_failed(rc, &res, res.len, size);
        frpc_result_clear(&res);
        if (bad)
            return 1;
        if (i >= 0)
            sum += (lat[i] = t1 - t0);
    }
    double wait = bench_wait_share(&waited);
    bench_row r = bench_row_new("fabrpc", frpc_provider(a), "latency");
    r.core_ns_before = core_before;
    r.core_ns_after = bench_core_ns(o);
    r.size = (long)size;
    r.inflight = 1;
    r.iters = iters;
    r.p50_us = bench_quantile(lat, iters, 0.5);
    r.p99_us = bench_quantile(lat, iters, 0.99);
    r.calls_per_s = (double)iters / (sum / 1e6);
    r.mb_per_s = 2.0 * (double)size * r.calls_per_s / 1e6;
    r.coalesce = o->coalesce;
    r.handler = handler_name(o);
    r.reply = o->reply_given ? "given" : "copied";
    if (o->gap_us > 0)
        r.gap_us = (double)o->gap_us;
    bench_judge_tail(&r);
    bench_judge_wait(&r, wait);
    bench_emit(&r);
    return 0;
}

static int run_latency(frpc_agent *a, const bench_opts *o)
{
    size_t maxsize = 1;
    long maxiters = 1;
    int rc = 0;
    for (int i = 0; i < o->nsizes; i++) {
        if (o->sizes[i] > maxsize)
            maxsize = o->sizes[i];
        if (bench_iters(o, o->sizes[i]) > maxiters)
            maxiters = bench_iters(o, o->sizes[i]);
    }
    void *buf = calloc(1, maxsize);
    double *lat = calloc((size_t)maxiters, sizeof(double));
    if (!buf || !lat) {
        fprintf(stderr, "fabrpc-bench: out of memory\n");
        rc = 1;
    }
    for (int i = 0; i < o->nsizes && !rc; i++)
        rc = latency_size(a, o, o->sizes[i], buf, lat);
    free(buf);
    free(lat);
    return rc;
}

/* ---------------------------------------------------------------- */
/* rate and bandwidth: a sliding window of async calls               */
/* ---------------------------------------------------------------- */

/* Checks and frees the completed call in *slot; returns 0 or nonzero
 * (a message was printed). */
static int reap(frpc_future **slot, size_t want)
{
    size_t got = 0;
    const char *msg = NULL;
    int rc = frpc_future_error(*slot, NULL, &msg);
    if (rc == 0)
        frpc_future_data(*slot, &got);
    if (call_failed(rc, NULL, got, want)) {
        if (msg)
            fprintf(stderr, "fabrpc-bench: %s\n", msg);
        rc = rc ? rc : 1;
    }
    frpc_future_free(*slot);
    *slot = NULL;
    return rc;
}

/* frpc_call_async or frpc_call_async_lent. */
typedef int (*start_fn)(frpc_agent *, int, const char *, const void *,
                        size_t, int, frpc_future **);

/* Starts calls into the empty slots of f[0..w) until n have started
 * (their times in t, unless NULL); with batch, inside one
 * frpc_batch_begin/end. Returns 0 or an FRPC_E*. */
static int fill(frpc_agent *a, start_fn start, frpc_future **f, long w,
                const char *name, const void *buf, size_t len, long n,
                long *started, int batch, bench_times *t)
{
    int rc = 0;
    if (batch)
        frpc_batch_begin(a);
    for (long j = 0; j < w && !rc && *started < n; j++)
        if (!f[j]) {
            bench_times_issue(t, j);
            rc = start(a, 1, name, buf, len, CALL_TIMEOUT_MS, &f[j]);
            ++*started;
        }
    if (batch)
        frpc_batch_end(a);
    return rc;
}

/*
 * Makes n calls of name with len bytes of args, keeping up to w in flight:
 * each call that completes is replaced by the next. Every reply must have
 * want bytes. With batch, every call found complete is reaped at once and
 * the window refilled between frpc_batch_begin and frpc_batch_end.
 * Each call's issue and completion times go to t, unless it is NULL.
 * The calls are started by start. Returns 0 or 1 (a message was printed).
 */
static int run_window(frpc_agent *a, start_fn start, const char *name,
                      const void *buf, size_t len, long w, long n,
                      size_t want, int batch, bench_times *t)
{
    frpc_future **f = calloc((size_t)w, sizeof(*f));
    long started = 0, done = 0;
    int rc;
    if (!f) {
        fprintf(stderr, "fabrpc-bench: out of memory\n");
        return 1;
    }
    rc = fill(a, start, f, w, name, buf, len, n, &started, batch, t);
    while (!rc && done < n) {
        size_t i = (size_t)(done % w);
        /* One at a time, the oldest call first: they were started in slot
         * order and each is replaced in its slot, so slot done % w holds
         * the oldest, and the transport answers in order. A wait for it
         * costs what one call's wait does; frpc_wait_any must look for
         * the lowest done slot, up to w looks a call. */
        if (!batch && f[i]) {
            rc = frpc_future_wait(f[i], CALL_TIMEOUT_MS);
            if (frpc_future_test(f[i]))
                rc = 0; /* its status is reap's to judge */
        } else {
            rc = frpc_wait_any(f, (size_t)w, CALL_TIMEOUT_MS, &i);
        }
        if (rc)
            break;
        bench_times_done(t, (long)i);
        rc = reap(&f[i], want);
        done++;
        if (!batch) { /* replace the one call: no scan of the window */
            if (!rc && started < n) { /* issued when i was seen done */
                rc = start(a, 1, name, buf, len, CALL_TIMEOUT_MS, &f[i]);
                started++;
            }
            continue;
        }
        for (long j = 0; !rc && j < w; j++)
            if (f[j] && frpc_future_test(f[j])) {
                bench_times_done(t, j);
                rc = reap(&f[j], want);
                done++;
            }
        if (!rc)
            rc = fill(a, start, f, w, name, buf, len, n, &started, batch,
                      t);
    }
    if (rc == FRPC_EAGAIN)
        fprintf(stderr, "fabrpc-bench: a window of %ld is more than fabrpc "
                "keeps in flight (%ld of %ld calls done; config.max_inflight,"
                " FABRPC_MAX_INFLIGHT, 65536 unless set)\n", w, done, n);
    else if (rc && rc != 1)
        fprintf(stderr, "fabrpc-bench: %s (%ld of %ld calls done)\n",
                frpc_strerror(rc), done, n);
    for (long i = 0; i < w; i++)
        frpc_future_free(f[i]);
    free(f);
    return rc ? 1 : 0;
}

/* One row of rate or bandwidth: size bytes of args, window w. */
static int window_row(frpc_agent *a, const bench_opts *o, const char *name,
                      size_t size, long w, const void *buf, size_t want)
{
    long iters = bench_iters(o, size);
    long warm = o->warmup >= 0 ? o->warmup : iters / 10;
    bench_times t;
    int lend = o->mode == BENCH_BANDWIDTH && o->lend;
    start_fn start = lend ? frpc_call_async_lent : frpc_call_async;
    if (warm < w)
        warm = w;
    if (bench_times_init(&t, w, iters)) {
        fprintf(stderr, "fabrpc-bench: out of memory\n");
        return 1;
    }
    frpc_stats s0, s1;
    /* before the warm-up, which then leads straight into the timed run */
    double core_before = bench_core_ns(o);
    if (run_window(a, start, name, buf, size, w, warm, want, o->batch,
                   NULL)) {
        bench_times_free(&t);
        return 1;
    }
    frpc_get_stats(a, &s0);
    bench_wait waited = bench_wait_begin();
    double t0 = bench_now_us();
    if (run_window(a, start, name, buf, size, w, iters, want, o->batch,
                   &t)) {
        bench_times_free(&t);
        return 1;
    }
    double secs = (bench_now_us() - t0) / 1e6;
    double wait = bench_wait_share(&waited);
    frpc_get_stats(a, &s1);
    double core_after = bench_core_ns(o);
    bench_row r = bench_row_new("fabrpc", frpc_provider(a),
                                o->batch ? (o->mode == BENCH_RATE
                                                ? "rate_batched"
                                                : "bandwidth_batched")
                                         : o->mode_name);
    r.size = (long)size;
    r.inflight = w;
    r.iters = iters;
    r.core_ns_before = core_before;
    r.core_ns_after = core_after;
    r.coalesce = o->coalesce;
    r.handler = handler_name(o);
    r.reply = o->reply_given ? "given" : "copied";
    if (o->mode == BENCH_BANDWIDTH)
        r.lent = lend;
    r.calls_per_s = (double)iters / secs;
    uint64_t msgs = s1.messages_sent - s0.messages_sent;
    if (msgs)
        r.frames_per_msg =
            (double)(msgs + s1.frames_coalesced - s0.frames_coalesced) /
            (double)msgs;
    if (o->mode == BENCH_BANDWIDTH)
        r.mb_per_s = (double)size * r.calls_per_s / 1e6;
    bench_times_row(&t, &r);
    bench_times_free(&t);
    bench_judge_wait(&r, wait);
    bench_emit(&r);
    return 0;
}

/* rate: 8-byte args and replies; bandwidth: large args, 8-byte replies. */
static int run_windows(frpc_agent *a, const bench_opts *o)
{
    int rate = o->mode == BENCH_RATE, rc = 0;
    size_t maxsize = 8;
    for (int i = 0; i < o->nsizes && !rate; i++)
        if (o->sizes[i] > maxsize)
            maxsize = o->sizes[i];
    void *buf = calloc(1, maxsize);
    if (!buf) {
        fprintf(stderr, "fabrpc-bench: out of memory\n");
        return 1;
    }
    for (int s = 0; s < (rate ? 1 : o->nsizes) && !rc; s++)
        for (int w = 0; w < o->ninflight && !rc; w++)
            rc = rate ? window_row(a, o, "bench_echo", 8, o->inflight[w],
                                   buf, 8)
                      : window_row(a, o, "bench_sink", o->sizes[s],
                                   o->inflight[w], buf, SINK_REPLY);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- */
/* idle and init: every rank measures itself                         */
/* ---------------------------------------------------------------- */

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int measure_idle(frpc_agent *a, const bench_opts *o)
{
    bench_report r = {0};
    struct timespec ts = {(time_t)o->seconds,
                          (long)((o->seconds - (double)(time_t)o->seconds) *
                                 1e9)};
    double c0 = cpu_seconds();
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    r.cpu_s = cpu_seconds() - c0;
    return send_report(a, &r);
}

static void emit_idle(const char *provider, const bench_opts *o)
{
    for (int i = 0; i < reports.world; i++) {
        bench_row r = bench_row_new("fabrpc", provider, "idle");
        r.cpu_s = reports.r[i].cpu_s;
        r.rank = i;
        r.seconds = o->seconds;
        bench_emit(&r);
    }
}

/* The resident set in MB (VmRSS in /proc/self/status), NAN if unknown. */
static double rss_mb(void)
{
    return bench_proc_number("/proc/self/status", "VmRSS:", "VmRSS:") /
           1024.0;
}

/* When this process started, on bench_now_us's clock (from the start time
 * in /proc/self/stat, in clock ticks since boot): NAN if unknown. */
static double exec_time_us(void)
{
    char buf[1024];
    unsigned long long ticks;
    struct timespec boot;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    /* After "pid (comm)": state is field 3, starttime field 22. */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                            "%*u %*u %*d %*d %*d %*d %*d %*d %llu",
                     &ticks) != 1)
        return NAN;
    clock_gettime(CLOCK_BOOTTIME, &boot);
    double age_us = (double)boot.tv_sec * 1e6 + (double)boot.tv_nsec / 1e3 -
                    (double)ticks * 1e6 / (double)sysconf(_SC_CLK_TCK);
    return bench_now_us() - age_us;
}

static void emit_init(const char *provider)
{
    int n = reports.world;
    double *t = malloc(sizeof(double) * (size_t)n);
    bench_row r = bench_row_new("fabrpc", provider, "init");
    double first = INFINITY, last = -INFINITY, rss = 0;
    if (!t)
        return;
    for (int i = 0; i < n; i++) {
        const bench_report *p = &reports.r[i];
        t[i] = p->t_ready_us - p->t_start_us;
        first = fmin(first, isnan(p->t_exec_us) ? p->t_start_us
                                                : p->t_exec_us);
        last = fmax(last, p->t_ready_us);
        rss = fmax(rss, p->rss_mb);
    }
    r.size = n;
    r.p50_us = bench_quantile(t, n, 0.5);
    r.p99_us = bench_quantile(t, n, 0.99);
    r.rss_mb = rss;
    r.job_s = (last - first) / 1e6;
    bench_emit(&r);
    free(t);
}

/* ---------------------------------------------------------------- */

int bench_run(frpc_agent *a, const bench_opts *o, double t_start_us)
{
    int rank = frpc_rank(a), rc;
    bench_report init = {.t_start_us = t_start_us};

    if ((rc = frpc_barrier(a, CALL_TIMEOUT_MS))) {
        fprintf(stderr, "fabrpc-bench: rank %d: barrier: %s\n", rank,
                frpc_strerror(rc));
        return 1;
    }
    switch (o->mode) {
    case BENCH_INIT:
        init.t_ready_us = bench_now_us();
        init.t_exec_us = exec_time_us();
        init.rss_mb = rss_mb();
        rc = send_report(a, &init);
        break;
    case BENCH_IDLE:
        rc = measure_idle(a, o);
        break;
    case BENCH_LATENCY:
        rc = rank == 0 ? run_latency(a, o) : 0;
        break;
    case BENCH_TIMEOUTS:
        rc = rank == 0 ? bench_run_timeouts(a, o) : 0;
        break;
    case BENCH_RMA:
        rc = bench_run_rma(a, o);
        break;
    default:
        rc = rank == 0 ? run_windows(a, o) : 0;
        break;
    }
    /* Rank 0 may take long: the others wait here, serving, without a
     * limit (fabrpc-run ends the job if rank 0 dies). */
    int brc = frpc_barrier(a, FRPC_TIMEOUT_NONE);
    if (brc) {
        fprintf(stderr, "fabrpc-bench: rank %d: final barrier: %s\n", rank,
                frpc_strerror(brc));
        rc = 1;
    }
    if (o->mode == BENCH_RMA)
        bench_rma_end();
    pthread_mutex_lock(&reports.lock);
    if (rank == 0 && !rc && o->mode == BENCH_IDLE)
        emit_idle(frpc_provider(a), o);
    if (rank == 0 && !rc && o->mode == BENCH_INIT)
        emit_init(frpc_provider(a));
    pthread_mutex_unlock(&reports.lock);
    return rc;
}
