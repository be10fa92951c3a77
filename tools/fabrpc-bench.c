/*
 * fabrpc-bench: measures fabrpc between two ranks.
 *
 *   fabrpc-run -n 2 [--provider P] fabrpc-bench latency [options]
 *
 * Mode latency: rank 0 makes synchronous calls to rank 1, whose handler
 * answers with as many bytes as it was sent; the round trip of each call
 * is timed, and p50/p99 are reported per size. Options:
 *   --sizes LIST     comma list of payload sizes in bytes (suffixes k, m):
 *                    default 8,64,1k,4k,64k,1m,16m
 *   --iters N        timed calls per size (default 10000, fewer for sizes
 *                    over 64 KiB: at most 2 GiB moved per size)
 *   --warmup N       untimed calls first (default iters/10)
 *   --progress MODE  busy, adaptive (default) or blocking
 *   --json           one JSON object per line instead of a table
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fabrpc.h>

#define MAX_SIZES 32

typedef struct opts {
    size_t sizes[MAX_SIZES];
    int nsizes;
    long iters, warmup;
    frpc_progress_mode progress;
    int json;
} opts;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fabrpc-run -n 2 [--provider P] fabrpc-bench latency "
            "[--sizes LIST] [--iters N]\n"
            "                  [--warmup N] [--progress "
            "busy|adaptive|blocking] [--json]\n"
            "Times synchronous round trips from rank 0 to rank 1 (replies "
            "as large as the args)\nand prints p50/p99 per size.\n");
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (*end)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_opts(int argc, char **argv, opts *o)
{
    static const char *defaults = "8,64,1k,4k,64k,1m,16m";
    const char *sizes = defaults;
    memset(o, 0, sizeof(*o));
    o->iters = -1;
    o->warmup = -1;
    if (argc < 2 || strcmp(argv[1], "latency") != 0)
        return -1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (!v)
            return -1;
        i++;
        if (strcmp(a, "--sizes") == 0)
            sizes = v;
        else if (strcmp(a, "--iters") == 0)
            o->iters = atol(v);
        else if (strcmp(a, "--warmup") == 0)
            o->warmup = atol(v);
        else if (strcmp(a, "--progress") == 0) {
            if (strcmp(v, "busy") == 0)
                o->progress = FRPC_PROGRESS_BUSY;
            else if (strcmp(v, "blocking") == 0)
                o->progress = FRPC_PROGRESS_BLOCKING;
            else if (strcmp(v, "adaptive") == 0)
                o->progress = FRPC_PROGRESS_ADAPTIVE;
            else
                return -1;
        } else
            return -1;
    }
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", sizes);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (o->nsizes == MAX_SIZES || parse_size(t, &o->sizes[o->nsizes]))
            return -1;
        o->nsizes++;
    }
    return o->nsizes ? 0 : -1;
}

static void echo(frpc_request *req, void *user)
{
    size_t len;
    const void *args = frpc_request_args(req, &len);
    frpc_respond(req, args, len);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static long iters_for(const opts *o, size_t size)
{
    if (o->iters > 0)
        return o->iters;
    if (size <= 65536)
        return 10000;
    long n = (long)((2ull << 30) / size / 2);
    return n < 20 ? 20 : n > 10000 ? 10000 : n;
}

static int run_size(frpc_agent *a, const opts *o, size_t size, void *buf,
                    double *lat)
{
    long iters = iters_for(o, size);
    long warm = o->warmup >= 0 ? o->warmup : iters / 10;
    for (long i = -warm; i < iters; i++) {
        frpc_result res;
        double t0 = now_us();
        int rc = frpc_call(a, 1, "bench_echo", buf, size, 60000, &res);
        double t1 = now_us();
        if (rc || res.len != size) {
            fprintf(stderr, "fabrpc-bench: call failed: %s\n",
                    res.error ? res.error : frpc_strerror(rc));
            frpc_result_clear(&res);
            return -1;
        }
        frpc_result_clear(&res);
        if (i >= 0)
            lat[i] = t1 - t0;
    }
    qsort(lat, (size_t)iters, sizeof(double), cmp_double);
    double p50 = lat[iters / 2], p99 = lat[(long)(iters * 0.99)];
    double sum = 0;
    for (long i = 0; i < iters; i++)
        sum += lat[i];
    double rate = iters / (sum / 1e6);
    double mbps = 2.0 * (double)size * rate / 1e6;
    if (o->json)
        printf("{\"system\":\"fabrpc\",\"provider\":\"%s\",\"metric\":"
               "\"latency\",\"size\":%zu,\"inflight\":1,\"iters\":%ld,"
               "\"p50_us\":%.2f,\"p99_us\":%.2f,\"calls_per_s\":%.0f,"
               "\"mb_per_s\":%.1f,\"cpu_s\":null}\n",
               frpc_provider(a), size, iters, p50, p99, rate, mbps);
    else
        printf("%-8s %10zu %8ld %10.2f %10.2f %12.0f %10.1f\n",
               frpc_provider(a), size, iters, p50, p99, rate, mbps);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    char err[1024] = "";
    frpc_config cfg;
    frpc_agent *a;
    int rc = 0;

    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (parse_opts(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    frpc_config_init(&cfg);
    cfg.progress = o.progress;
    cfg.errbuf = err;
    cfg.errbuf_len = sizeof(err);
    if ((rc = frpc_init(&cfg, &a))) {
        fprintf(stderr, "fabrpc-bench: %s: %s\n", frpc_strerror(rc), err);
        return 1;
    }
    if (frpc_world_size(a) != 2) {
        fprintf(stderr, "fabrpc-bench: run it with 2 ranks "
                        "(fabrpc-run -n 2 fabrpc-bench ...)\n");
        frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 0);
        return 2;
    }
    frpc_register(a, "bench_echo", echo, NULL, FRPC_INLINE);
    frpc_barrier(a, 60000);
    if (frpc_rank(a) == 0) {
        size_t maxsize = 0;
        long maxiters = 0;
        for (int i = 0; i < o.nsizes; i++) {
            if (o.sizes[i] > maxsize)
                maxsize = o.sizes[i];
            if (iters_for(&o, o.sizes[i]) > maxiters)
                maxiters = iters_for(&o, o.sizes[i]);
        }
        void *buf = calloc(1, maxsize ? maxsize : 1);
        double *lat = malloc(sizeof(double) * (size_t)maxiters);
        if (!buf || !lat)
            rc = 1;
        if (!o.json && !rc)
            printf("%-8s %10s %8s %10s %10s %12s %10s\n", "provider",
                   "size_B", "iters", "p50_us", "p99_us", "calls/s",
                   "MB/s");
        for (int i = 0; i < o.nsizes && !rc; i++)
            rc = run_size(a, &o, o.sizes[i], buf, lat) ? 1 : 0;
        free(buf);
        free(lat);
    }
    if (frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, 60000))
        rc = 1;
    return rc;
}
