/* Per-function figures: see fnstats.h. */
#include "config.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpc/fnstats.h"
#include "serialization/envelope.h"

void fr_fnstats_init(fr_fnstats *s)
{
    pthread_mutex_init(&s->lock, NULL);
    for (size_t i = 0; i < FR_FNSTATS_SLOTS; i++)
        atomic_init(&s->slot[i], NULL);
    atomic_init(&s->count, 0);
}

void fr_fnstats_destroy(fr_fnstats *s)
{
    int n = atomic_load(&s->count);
    for (int i = 0; i < n; i++)
        free(s->order[i]);
    atomic_store(&s->count, 0);
    for (size_t i = 0; i < FR_FNSTATS_SLOTS; i++)
        atomic_store(&s->slot[i], NULL);
    pthread_mutex_destroy(&s->lock);
}

/* The slot holding id, or the empty one where it would go (the table is
 * never full: it has twice the slots records may take). */
static size_t probe(const fr_fnstats *s, uint64_t id, fr_fn_stat **found)
{
    size_t i = (size_t)(id ^ (id >> 29)) & (FR_FNSTATS_SLOTS - 1);
    for (;;) {
        fr_fn_stat *st = atomic_load_explicit(
            &((fr_fnstats *)s)->slot[i], memory_order_acquire);
        if (!st || st->id == id) {
            *found = st;
            return i;
        }
        i = (i + 1) & (FR_FNSTATS_SLOTS - 1);
    }
}

static void hist_init(fr_hist *h)
{
    memset(h, 0, sizeof(*h));
    atomic_init(&h->min, UINT64_MAX);
}

fr_fn_stat *fr_fnstats_get(fr_fnstats *s, uint64_t id, const char *name)
{
    fr_fn_stat *st;
    probe(s, id, &st);
    if (st)
        return st;
    pthread_mutex_lock(&s->lock);
    size_t i = probe(s, id, &st); /* another adder may have been first */
    if (!st && atomic_load(&s->count) < FRPC_FN_STATS_MAX) {
        size_t nlen = strlen(name) + 1;
        if ((st = malloc(sizeof(*st) + nlen))) {
            st->id = id;
            hist_init(&st->call);
            hist_init(&st->handle);
            memcpy(st->name, name, nlen);
            int n = atomic_load(&s->count);
            s->order[n] = st;
            atomic_store_explicit(&s->slot[i], st, memory_order_release);
            atomic_store_explicit(&s->count, n + 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

const fr_fn_stat *fr_fnstats_find(const fr_fnstats *s, const char *name)
{
    fr_fn_stat *st;
    probe(s, fr_func_id(name), &st);
    /* Ids are unique among the registered names only: a caller's name
     * may share one with another it called. */
    return st && strcmp(st->name, name) == 0 ? st : NULL;
}

static unsigned bucket_of(uint64_t ns)
{
    if (ns < (1u << FR_HIST_SUB_BITS))
        return (unsigned)ns;
    unsigned pow = 63u - (unsigned)__builtin_clzll(ns);
    if (pow >= FR_HIST_TOP_POW)
        return FR_HIST_BUCKETS - 1;
    unsigned sub = (unsigned)(ns >> (pow - FR_HIST_SUB_BITS)) &
                   ((1u << FR_HIST_SUB_BITS) - 1);
    return ((pow - FR_HIST_SUB_BITS + 1) << FR_HIST_SUB_BITS) + sub;
}

/* The middle of bucket b's range: within 1/16 of any time in it. */
static uint64_t bucket_mid(unsigned b)
{
    if (b < (1u << FR_HIST_SUB_BITS))
        return b;
    unsigned pow = (b >> FR_HIST_SUB_BITS) + FR_HIST_SUB_BITS - 1;
    uint64_t sub = b & ((1u << FR_HIST_SUB_BITS) - 1);
    uint64_t width = 1ull << (pow - FR_HIST_SUB_BITS);
    return (((1ull << FR_HIST_SUB_BITS) + sub) * width) + width / 2;
}

/* The stores of an add are releases and a reader's loads acquires: a
 * reader that sees any of an add's stores then sees its began (no fences:
 * ThreadSanitizer does not understand them; on x86 these cost nothing). */
static void bump(atomic_uint_fast64_t *x, uint64_t by, int exclusive)
{
    if (exclusive)
        atomic_store_explicit(
            x, atomic_load_explicit(x, memory_order_relaxed) + by,
            memory_order_release);
    else
        atomic_fetch_add_explicit(x, by, memory_order_release);
}

/* Sets *x to v if below (less: 1) or above (less: 0) it. */
static void extreme(atomic_uint_fast64_t *x, uint64_t v, int less)
{
    uint64_t old = atomic_load_explicit(x, memory_order_relaxed);
    while (less ? v < old : v > old)
        if (atomic_compare_exchange_weak_explicit(
                x, &old, v, memory_order_release, memory_order_relaxed))
            break;
}

void fr_hist_add(fr_hist *h, uint64_t ns, int failed, int exclusive)
{
    /* A reader that kept meeting adds holds new ones back while it reads
     * (a read is a few hundred loads: a microsecond or so). */
    while (atomic_load(&h->held))
        sched_yield();
    bump(&h->began, 1, exclusive);
    if (failed)
        bump(&h->failed, 1, exclusive);
    bump(&h->total, ns, exclusive);
    bump(&h->bucket[bucket_of(ns)], 1, exclusive);
    extreme(&h->min, ns, 1);
    extreme(&h->max, ns, 0);
    bump(&h->ended, 1, exclusive);
}

/* The time under which a share q (per mille) of the counted ones fall,
 * from a copy of the buckets. */
static uint64_t percentile(const uint64_t *bucket, uint64_t counted,
                           unsigned q, uint64_t lo, uint64_t hi)
{
    uint64_t rank = (counted * q + 999) / 1000, seen = 0;
    if (rank == 0)
        return 0;
    for (unsigned b = 0; b < FR_HIST_BUCKETS; b++) {
        seen += bucket[b];
        if (seen >= rank) {
            uint64_t mid = bucket_mid(b);
            return mid < lo ? lo : mid > hi ? hi : mid;
        }
    }
    return hi;
}

/* n, failed, total, min, max of h into out[0..5) and its buckets into
 * bucket[], read field by field; 1 if no add ran meanwhile (whole). */
static int hist_try_read(const fr_hist *h, uint64_t out[5], uint64_t *bucket)
{
    fr_hist *w = (fr_hist *)h; /* atomics are only read */
    memory_order acq = memory_order_acquire;
    uint64_t ended = atomic_load_explicit(&w->ended, acq);
    uint64_t counted = 0;
    for (unsigned b = 0; b < FR_HIST_BUCKETS; b++)
        counted += bucket[b] = atomic_load_explicit(&w->bucket[b], acq);
    out[0] = counted;
    out[1] = atomic_load_explicit(&w->failed, acq);
    out[2] = atomic_load_explicit(&w->total, acq);
    out[3] = atomic_load_explicit(&w->min, acq);
    out[4] = atomic_load_explicit(&w->max, acq);
    /* An add whose stores were seen began before this load: began ==
     * ended means none was under way. */
    return atomic_load_explicit(&w->began, memory_order_relaxed) == ended;
}

/* A read that met adds, made to hold together: min <= max, failures
 * among the counted, the total within count x [min, max]. */
static void hist_settle(uint64_t v[5])
{
    if (v[0] == 0 || v[3] > v[4]) {
        v[0] = v[1] = v[2] = v[3] = v[4] = 0;
        return;
    }
    if (v[1] > v[0])
        v[1] = v[0];
    if (v[2] / v[0] < v[3])
        v[2] = v[0] * v[3];
    else if (v[2] / v[0] > v[4] || (v[2] / v[0] == v[4] && v[2] % v[0]))
        v[2] = v[0] * v[4];
}

/* A reader tries this often before it holds new adds back, and holds
 * them at most this long (then it settles for its last read: only an
 * adder that lost its core mid-add for so long can make it). */
#define FR_HIST_FREE_TRIES 8
#define FR_HIST_HOLD_NS 100000000ull

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* n, failed, total, min, max, p50, p99 of h into out[0..7). */
static void hist_read(const fr_hist *h, uint64_t out[7])
{
    fr_hist *w = (fr_hist *)h; /* only held, never changed */
    uint64_t bucket[FR_HIST_BUCKETS], until = 0;
    int whole = 0;
    for (int i = 0; !whole; i++) {
        if (i == FR_HIST_FREE_TRIES) {
            atomic_fetch_add(&w->held, 1);
            until = mono_ns() + FR_HIST_HOLD_NS;
        } else if (i > FR_HIST_FREE_TRIES) {
            if (mono_ns() > until)
                break;
            sched_yield(); /* an adder mid-add may need this core */
        }
        whole = hist_try_read(h, out, bucket);
    }
    if (until)
        atomic_fetch_sub(&w->held, 1);
    if (out[0] == 0)
        out[1] = out[2] = out[3] = out[4] = 0; /* min starts at UINT64_MAX */
    else if (!whole)
        hist_settle(out);
    out[5] = percentile(bucket, out[0], 500, out[3], out[4]);
    out[6] = percentile(bucket, out[0], 990, out[3], out[4]);
}

void fr_fnstats_fill(const fr_fn_stat *st, frpc_fn_stats *out)
{
    uint64_t c[7] = {0}, h[7] = {0};
    if (st) {
        hist_read(&st->call, c);
        hist_read(&st->handle, h);
    }
    memset(out, 0, sizeof(*out));
    out->calls = c[0];
    out->calls_failed = c[1];
    out->call_ns_total = c[2];
    out->call_ns_min = c[3];
    out->call_ns_max = c[4];
    out->call_ns_p50 = c[5];
    out->call_ns_p99 = c[6];
    out->handled = h[0];
    out->handled_error = h[1];
    out->handle_ns_total = h[2];
    out->handle_ns_min = h[3];
    out->handle_ns_max = h[4];
    out->handle_ns_p50 = h[5];
    out->handle_ns_p99 = h[6];
}
