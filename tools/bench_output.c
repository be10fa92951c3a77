/*
 * fabrpc-bench's rows on stdout: a table, or one JSON object per line
 * (--json). Rank 0 only. See bench.h.
 */
#include <math.h>
#include <stdio.h>

#include "bench.h"
#include "core_rtt.h"

#define MAX_KEPT 128

static struct {
    int json, header_done, defer, nkept;
    bench_row kept[MAX_KEPT];
    const char *progress; /* fabrpc's rows say it */
} out;

bench_row bench_row_new(const char *system, const char *provider,
                        const char *metric)
{
    bench_row r = {.system = system, .metric = metric, .size = -1,
                   .inflight = -1, .iters = -1, .p50_us = NAN,
                   .p99_us = NAN, .calls_per_s = NAN, .mb_per_s = NAN,
                   .cpu_s = NAN, .rank = -1, .rss_mb = NAN, .ratio = NAN,
                   .ratio_tcp = NAN, .ratio_fi_blocking = NAN, .ratio_fi_msg = NAN,
                   .frames_per_msg = NAN, .max_us = NAN,
                   .not_timed_out = NAN, .coalesce = -1, .lent = -1, .disturbed = -1,
                   .job_s = NAN, .seconds = NAN, .gap_us = NAN, .core_ns_before = NAN,
                   .core_ns_after = NAN, .cpu_wait = NAN,
                   .run_delay = NAN};
    snprintf(r.provider, sizeof(r.provider), "%s", provider);
    return r;
}

/* JSON: ,"key":value or null. Table: the value in width w, or "-".
 * NAN (not measured) and infinities (nothing to divide by) are null. */
static void put_num(const char *key, double v, int w, int prec)
{
    if (!isfinite(v))
        v = NAN;
    if (out.json && isnan(v))
        printf(",\"%s\":null", key);
    else if (out.json)
        printf(",\"%s\":%.*f", key, prec, v);
    else if (isnan(v))
        printf(" %*s", w, "-");
    else
        printf(" %*.*f", w, prec, v);
}

static void put_long(const char *key, long v, int w)
{
    put_num(key, v < 0 ? NAN : (double)v, w, 0);
}

/* Extra keys, printed only when set (in the table as key=value). */
static void put_extra(const char *key, double v, int prec)
{
    if (!isfinite(v))
        return;
    if (out.json)
        printf(",\"%s\":%.*f", key, prec, v);
    else
        printf(" %s=%.*f", key, prec, v);
}

/* A yes/no: v 0 or 1 is JSON false or true, and in the table no or yes
 * (col: in a column of width w, on or off, "-" when v < 0); v -1 is
 * left out of JSON, BENCH_UNJUDGED is null there (and out of the
 * table). */
static void put_bool(const char *key, int v, int col, int w)
{
    if (out.json && v == BENCH_UNJUDGED)
        printf(",\"%s\":null", key);
    else if (out.json && v >= 0)
        printf(",\"%s\":%s", key, v ? "true" : "false");
    else if (!out.json && col)
        printf(" %*s", w, v < 0 ? "-" : v ? "on" : "off");
    else if (!out.json && v >= 0)
        printf(" %s=%s", key, v ? "yes" : "no");
}

/* An extra string key, printed only when set. */
static void put_str(const char *key, const char *v)
{
    if (v && out.json)
        printf(",\"%s\":\"%s\"", key, v);
    else if (v)
        printf(" %s=%s", key, v);
}

static void print_row(const bench_row *r)
{
    if (out.json)
        printf("{\"system\":\"%s\",\"provider\":\"%s\",\"metric\":\"%s\"",
               r->system, r->provider, r->metric);
    else {
        if (!out.header_done)
            printf("%-11s %-8s %-9s %10s %8s %8s %10s %10s %11s %9s %8s "
                   "%8s\n", "system", "provider", "metric", "size",
                   "inflight", "iters", "p50_us", "p99_us", "calls/s", "MB/s",
                   "cpu_s", "coalesce");
        out.header_done = 1;
        printf("%-11s %-8s %-9s", r->system, r->provider, r->metric);
    }
    put_long("size", r->size, 10);
    put_long("inflight", r->inflight, 8);
    put_long("iters", r->iters, 8);
    put_num("p50_us", r->p50_us, 10, 2);
    put_num("p99_us", r->p99_us, 10, 2);
    put_num("calls_per_s", r->calls_per_s, 11, 0);
    put_num("mb_per_s", r->mb_per_s, 9, 1);
    put_num("cpu_s", r->cpu_s, 8, 3);
    put_bool("coalesce", r->coalesce, 1, 8);
    put_extra("rank", r->rank < 0 ? NAN : (double)r->rank, 0);
    put_extra("seconds", r->seconds, 3);
    put_extra("gap_us", r->gap_us, 0);
    put_extra("rss_mb", r->rss_mb, 1);
    put_extra("job_s", r->job_s, 3);
    put_extra("ratio_to_fi_pingpong", r->ratio, 4);
    put_extra("ratio_to_tcp_pingpong", r->ratio_tcp, 4);
    put_extra("ratio_to_fi_blocking", r->ratio_fi_blocking, 4);
    put_extra("ratio_to_fi_msg", r->ratio_fi_msg, 4);
    put_extra("frames_per_message", r->frames_per_msg, 2);
    put_extra("max_us", r->max_us, 1);
    put_extra("not_timed_out", r->not_timed_out, 0);
    put_bool("lent", r->lent, 0, 0);
    put_str("handler", r->handler);
    put_str("reply", r->reply);
    if (!strcmp(r->system, "fabrpc"))
        put_str("progress", out.progress);
    put_bool("disturbed", r->disturbed, 0, 0);
    put_extra("cpu_wait", r->cpu_wait, 3);
    put_extra("run_delay", r->run_delay, 3);
    put_extra("core_ns_before", r->core_ns_before, 0);
    put_extra("core_ns_after", r->core_ns_after, 0);
    printf(out.json ? "}\n" : "\n");
    fflush(stdout);
}

double bench_core_ns(const bench_opts *o)
{
    return o->progress_busy ? NAN : core_rtt_ns(BENCH_CORE_MS);
}

void bench_emit(const bench_row *row)
{
    if (out.defer && out.nkept < MAX_KEPT)
        out.kept[out.nkept++] = *row;
    else
        print_row(row);
}

void bench_defer(void)
{
    out.defer = 1;
}

bench_row *bench_kept(int *n)
{
    *n = out.nkept;
    return out.kept;
}

void bench_flush(void)
{
    for (int i = 0; i < out.nkept; i++)
        print_row(&out.kept[i]);
    out.nkept = out.defer = 0;
}

void bench_output_json(int on)
{
    out.json = on;
}

void bench_output_progress(const char *mode)
{
    out.progress = mode;
}
