/*
 * fabrpc-stress: a randomized hunter of hangs and lost calls, by hand
 * (built, not installed, not run by the test suite).
 *
 *   fabrpc-run -n N [--provider shm|tcp] --timeout S tools/fabrpc-stress SECS [SEED] [CALLERS]
 *
 * Each rank runs CALLERS threads (2-3, at most 8) for SECS seconds that
 * call every rank, itself included, sync and async (bursts of 32-64
 * ended by frpc_wait_all, frpc_wait_any or in order), 0 B-256 KiB of
 * checked args, with pauses; the handlers, inline and pool, echo, sleep
 * 0-5 ms, spin, answer later from another thread, or nest calls two
 * levels deep. A call that fails where the header says it cannot, takes
 * over 2 s, or brings a wrong answer is a finding; a watchdog names calls
 * stuck over 3 s. Exit status 1 if any rank found one. Vary
 * FABRPC_PROGRESS, FABRPC_COALESCE and FABRPC_THREADS between runs.
 * 2026-11-29: 79 runs of 25 s (8.7 M calls) found none but one stall on
 * a machine at load average 14 (not reproduced).
 *
 * Env knobs read here (besides fabrpc's own FABRPC_*):
 *   ST_BURST_PCT   percent of ops that are bursts (default 12)
 *   ST_DIE_RANK=r  rank r kills itself (SIGKILL) ST_DIE_AT_MS after the
 *                  first barrier (default 3000), in the middle of its
 *                  calls (run with fabrpc-run --keep-going; ranks on one
 *                  host). Survivors then accept FRPC_EPEERLOST for calls
 *                  to r (and FRPC_EREMOTE with remote_code FRPC_EPEERLOST
 *                  for nested calls that reached r), but a finding is a
 *                  call to r that ends otherwise, succeeds once r was
 *                  seen lost, or ends over ST_LOST_MS after r's death
 *                  (or its own start, if later); r not seen DEAD within
 *                  ST_LOST_MS; a loss of any other rank. They meet by
 *                  calls instead of the final barrier (which must fail
 *                  FRPC_EPEERLOST), and shutdown must say FRPC_EPEERLOST
 *   ST_DIE_AT_MS   see ST_DIE_RANK
 *   ST_FNS         comma list of function indexes allowed at top level
 *   ST_LOST_MS     see ST_DIE_RANK (default 2000: "at once", loaded box)
 *   ST_NOLARGE=1   cap sizes at 4 KiB
 *   ST_SERVERS=k   the k highest ranks make no calls of their own
 *   ST_SLOW_MS     a call slower than this is a finding (default 2000)
 *
 * Findings are printed as lines starting with "FINDING".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fabrpc.h>

#define TOP_TIMEOUT_MS 8000
#define NEST_TIMEOUT_MS 5000
/* A call slower than this is a finding (ST_SLOW_MS, 2000 by default; the
 * test suite sets it high: on a loaded machine slow is not wrong). */
static uint64_t SLOW_NS = 2000000000ull;
#define MAXB 64

static frpc_agent *A;
static int R, W;
static uint64_t T0;
static uint64_t SEED;
static int nolarge, burst_pct = 12;
static int allowed[32], nallowed;
/* ST_DIE_RANK: the rank that dies (-1: none), when (T_DIE, this rank's
 * clock, set at the first barrier), and when this rank first saw it lost */
static int die_rank = -1, die_at_ms = 3000;
static uint64_t LOST_NS = 2000000000ull, T_DIE;
static _Atomic uint64_t t_lost;
static atomic_int work_done; /* this rank's callers have ended */
static atomic_int busy;      /* handlers running, answers deferred */
static atomic_int met[3];    /* st_meet calls received, by phase */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}
static double tms(void) { return (now_ns() - T0) / 1e6; }
static void wall(char *b, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    snprintf(b, n, "%02d:%02d:%02d.%03ld", tm.tm_hour, tm.tm_min, tm.tm_sec,
             ts.tv_nsec / 1000000);
}

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int findings; /* lines said that begin "FINDING" */
static void say(const char *fmt, ...)
{
    if (strncmp(fmt, "FINDING", 7) == 0)
        atomic_fetch_add(&findings, 1);
    char w[32];
    wall(w, sizeof w);
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&out_lock);
    printf("%s t=%.1fms ", w, tms());
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
    va_end(ap);
}

/* ---- rng ---- */
typedef struct { uint64_t s; } rng_t;
static inline uint64_t rnd(rng_t *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline unsigned rn(rng_t *r, unsigned n) { return n ? rnd(r) % n : 0; }
static __thread rng_t hrng;
static __thread int hrng_init;
static atomic_uint hrng_ctr;
static rng_t *hr(void)
{
    if (!hrng_init) {
        hrng.s = SEED * 1000003ull + 7777 + atomic_fetch_add(&hrng_ctr, 1);
        hrng_init = 1;
    }
    return &hrng;
}

/* ---- payload ---- */
static inline uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static void fill(uint8_t *b, size_t len, uint32_t seed)
{
    if (len < 4) {
        for (size_t i = 0; i < len; i++)
            b[i] = (uint8_t)(0x11 * (i + 1));
        return;
    }
    memcpy(b, &seed, 4);
    for (size_t i = 4; i < len; i += 8) {
        uint64_t v = mix(((uint64_t)seed << 32) ^ i);
        size_t k = len - i < 8 ? len - i : 8;
        memcpy(b + i, &v, k);
    }
}
static int verify_args(const uint8_t *b, size_t len)
{
    if (len < 4) {
        for (size_t i = 0; i < len; i++)
            if (b[i] != (uint8_t)(0x11 * (i + 1)))
                return 0;
        return 1;
    }
    uint32_t seed;
    memcpy(&seed, b, 4);
    for (size_t i = 4; i < len; i += 8) {
        uint64_t v = mix(((uint64_t)seed << 32) ^ i);
        size_t k = len - i < 8 ? len - i : 8;
        if (memcmp(b + i, &v, k))
            return 0;
    }
    return 1;
}
static int check_reply(const uint8_t *args, size_t alen, const uint8_t *rep,
                       size_t rlen)
{
    if (alen != rlen)
        return 0;
    for (size_t i = 0; i < alen; i++)
        if ((uint8_t)(args[i] ^ 0x5a) != rep[i])
            return 0;
    return 1;
}

/* ---- counters ---- */
static atomic_ulong c_calls, c_ok, c_fail, c_slow, c_to, c_wrong,
    c_edl_top, c_edl_pool, c_edl_inline, c_edl_inline_shallow, c_nested,
    c_nested_ok, c_nested_fail, c_remote, c_deferred, c_hcalls, c_bad_args;
static atomic_ulong c_lost, c_lost_remote, c_lost_nested, c_lost_answer;

static const char *ename(int rc)
{
    return rc ? frpc_strerror(rc) : "ok";
}

/* ---- ST_DIE_RANK ---- */
/* 1 if dst is the dying rank and this rank sees it lost (noted in t_lost) */
static int is_lost(int dst)
{
    if (die_rank < 0 || dst != die_rank)
        return 0;
    if (atomic_load(&t_lost))
        return 1;
    if (frpc_peer_state(A, dst) == FRPC_PEER_ALIVE)
        return 0;
    uint64_t z = 0;
    atomic_compare_exchange_strong(&t_lost, &z, now_ns());
    return 1;
}

/* A call to the dying rank, started at t0 (seen lost then: pre), ended
 * with rc at end (end_known 0: by end at the latest): NULL if the header
 * allows it or the usual checks judge it, else what is wrong. */
static const char *lost_verdict(int rc, int pre, uint64_t t0, uint64_t end,
                                int end_known)
{
    if (rc == FRPC_EDEADLK)
        return NULL; /* refused before sending */
    if (rc == 0)
        return pre ? "OK-AFTER-LOSS" : NULL;
    if (rc != FRPC_EPEERLOST)
        return pre ? "NOT-PEERLOST" : NULL;
    uint64_t from = t0 > T_DIE ? t0 : T_DIE;
    if (end_known && end > from + LOST_NS)
        return "LATE-PEERLOST";
    if (end + 1000000000ull < T_DIE)
        return "EARLY-PEERLOST";
    return NULL;
}

/* ---- functions ---- */
enum { F_ECHO_I, F_ECHO_P, F_SLEEP_P, F_SPIN_P, F_SPIN_I, F_DEFER_P,
       F_DEFER_I, F_NEST_P, F_NEST_I, F_NEST2_P, F_NEST2_I, F_N };
static const char *fname[F_N] = {"echo_i", "echo_p", "sleep_p", "spin_p",
                                 "spin_i", "defer_p", "defer_i", "nest_p",
                                 "nest_i", "nest2_p", "nest2_i"};
static const int finline[F_N] = {1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1};
static int fast_fn(int f)
{
    return f == F_ECHO_I || f == F_ECHO_P || f == F_SPIN_I ||
           f == F_DEFER_I || f == F_DEFER_P;
}

static __thread int h_depth; /* our handlers on this thread's stack */
static __thread int h_inline_depth;

static void spin_for(uint64_t ns)
{
    uint64_t e = now_ns() + ns;
    while (now_ns() < e)
        ;
}

static int do_reply(frpc_request *req)
{
    size_t len;
    const uint8_t *a = frpc_request_args(req, &len);
    int src = frpc_request_source(req);
    if (!verify_args(a, len)) {
        atomic_fetch_add(&c_bad_args, 1);
        say("FINDING BADARGS rank=%d fn=%s len=%zu src=%d", R,
            frpc_request_function(req), len, frpc_request_source(req));
        return frpc_respond_error(req, 77, "bad args");
    }
    if (len == 0)
        return frpc_respond(req, NULL, 0);
    uint8_t *o = malloc(len);
    for (size_t i = 0; i < len; i++)
        o[i] = a[i] ^ 0x5a;
    int rc;
    uint64_t t = now_ns();
    if (rn(hr(), 2)) {
        rc = frpc_respond_owned(req, o, len);
    } else {
        rc = frpc_respond(req, o, len);
        free(o);
    }
    if (rc && die_rank >= 0 && src == die_rank &&
        (rc == FRPC_EPEERLOST || rc == FRPC_ETRANSPORT))
        atomic_fetch_add(&c_lost_answer, 1); /* the caller is gone */
    else if (rc)
        say("FINDING RESPOND rank=%d rc=%s src=%d len=%zu el=%.1fms "
            "depth=%d idepth=%d", R, frpc_strerror(rc), src, len,
            (now_ns() - t) / 1e6, h_depth, h_inline_depth);
    return rc;
}

/* deferred answers */
typedef struct dq { struct dq *next; frpc_request *req; uint64_t due; } dq;
static dq *dq_head, *dq_tail;
static pthread_mutex_t dq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dq_cond = PTHREAD_COND_INITIALIZER;
static int dq_stop;

static void defer(frpc_request *req)
{
    dq *e = malloc(sizeof *e);
    e->req = req;
    e->next = NULL;
    e->due = now_ns() + rn(hr(), 3000) * 1000ull;
    atomic_fetch_add(&busy, 1);
    pthread_mutex_lock(&dq_lock);
    if (dq_tail)
        dq_tail->next = e;
    else
        dq_head = e;
    dq_tail = e;
    pthread_cond_signal(&dq_cond);
    pthread_mutex_unlock(&dq_lock);
    atomic_fetch_add(&c_deferred, 1);
}

static void *responder(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&dq_lock);
    for (;;) {
        if (!dq_head) {
            if (dq_stop)
                break;
            pthread_cond_wait(&dq_cond, &dq_lock);
            continue;
        }
        dq *e = dq_head;
        uint64_t n = now_ns();
        if (e->due > n && !dq_stop) {
            pthread_mutex_unlock(&dq_lock);
            struct timespec ts = {0, (long)(e->due - n)};
            nanosleep(&ts, NULL);
            pthread_mutex_lock(&dq_lock);
            continue;
        }
        dq_head = e->next;
        if (!dq_head)
            dq_tail = NULL;
        pthread_mutex_unlock(&dq_lock);
        do_reply(e->req);
        atomic_fetch_sub(&busy, 1);
        free(e);
        pthread_mutex_lock(&dq_lock);
    }
    pthread_mutex_unlock(&dq_lock);
    return NULL;
}

/* A nested call from a handler. Returns 0 ok, or an error to pass on
 * (FRPC_EDEADLK counted, not passed). */
static int nested(int self_fn, int level)
{
    rng_t *r = hr();
    int dst = rn(r, W);
    int f;
    if (level >= 2)
        f = (int)rn(r, 7); /* leaf */
    else
        f = rn(r, 3) == 0 ? (rn(r, 2) ? F_NEST_P : F_NEST_I) : (int)rn(r, 7);
    size_t len = rn(r, 4) == 0 ? rn(r, 70000) : rn(r, 256);
    uint8_t *a = malloc(len ? len : 1);
    fill(a, len, (uint32_t)rnd(r));
    int async = rn(r, 2);
    frpc_result res = {0};
    int pre = is_lost(dst);
    uint64_t t = now_ns();
    int rc;
    atomic_fetch_add(&c_nested, 1);
    if (async) {
        frpc_future *fu = NULL;
        rc = frpc_call_async(A, dst, fname[f], a, len, NEST_TIMEOUT_MS, &fu);
        if (rc == 0) {
            rc = frpc_future_wait(fu, NEST_TIMEOUT_MS + 2000);
            if (rc == FRPC_EDEADLK) {
                /* cannot wait here: let it go */
                frpc_future_free(fu);
            } else if (rc == FRPC_ETIMEDOUT && !frpc_future_test(fu)) {
                frpc_future_free(fu);
            } else {
                frpc_future_take(fu, &res);
                rc = res.status;
                frpc_future_free(fu);
            }
        }
    } else {
        rc = frpc_call(A, dst, fname[f], a, len, NEST_TIMEOUT_MS, &res);
    }
    uint64_t el = now_ns() - t;
    int ret = 0;
    const char *v = die_rank == dst ? lost_verdict(rc, pre, t, t + el, 1)
                                    : NULL;
    if (v) {
        atomic_fetch_add(&c_nested_fail, 1);
        say("FINDING NESTED-%s rank=%d in=%s depth=%d -> dst=%d fn=%s %s "
            "len=%zu rc=%s el=%.1fms since_death=%.1fms err=%s",
            v, R, fname[self_fn], h_depth, dst, fname[f],
            async ? "async" : "sync", len, ename(rc), el / 1e6,
            ((double)t + el - T_DIE) / 1e6, res.error ? res.error : "");
        ret = rc ? rc : FRPC_EPROTO;
    } else if (rc == FRPC_EPEERLOST && die_rank == dst) {
        atomic_fetch_add(&c_lost_nested, 1);
        ret = rc; /* the caller sees FRPC_EREMOTE, remote_code this */
    } else if (rc == FRPC_EREMOTE && res.remote_code == FRPC_EPEERLOST) {
        ret = FRPC_EPEERLOST; /* pass the cause on */
    } else if (rc == FRPC_EDEADLK) {
        if (finline[self_fn]) {
            atomic_fetch_add(&c_edl_inline, 1);
            if (h_inline_depth < 6) {
                atomic_fetch_add(&c_edl_inline_shallow, 1);
                say("NOTE EDEADLK-inline-shallow rank=%d in=%s depth=%d "
                    "idepth=%d -> dst=%d fn=%s %s err=%s",
                    R, fname[self_fn], h_depth, h_inline_depth, dst,
                    fname[f], async ? "async" : "sync",
                    res.error ? res.error : "");
            }
        } else {
            atomic_fetch_add(&c_edl_pool, 1);
        }
    } else if (rc == FRPC_EREMOTE) {
        ret = rc; /* callee reported already */
    } else if (rc) {
        atomic_fetch_add(&c_nested_fail, 1);
        say("FINDING NESTED rank=%d in=%s depth=%d -> dst=%d fn=%s %s "
            "len=%zu rc=%s el=%.1fms err=%s",
            R, fname[self_fn], h_depth, dst, fname[f],
            async ? "async" : "sync", len, frpc_strerror(rc), el / 1e6,
            res.error ? res.error : "");
        ret = rc;
    } else if (!check_reply(a, len, res.data, res.len)) {
        atomic_fetch_add(&c_wrong, 1);
        say("FINDING NESTED-WRONG rank=%d in=%s -> dst=%d fn=%s len=%zu "
            "got=%zu", R, fname[self_fn], dst, fname[f], len, res.len);
        ret = FRPC_EPROTO;
    } else {
        atomic_fetch_add(&c_nested_ok, 1);
        if (el > SLOW_NS)
            say("FINDING NESTED-SLOW rank=%d in=%s -> dst=%d fn=%s %s "
                "len=%zu el=%.1fms",
                R, fname[self_fn], dst, fname[f], async ? "async" : "sync",
                len, el / 1e6);
    }
    frpc_result_clear(&res);
    free(a);
    return ret;
}

static void handler(frpc_request *req, void *user)
{
    int f = (int)(intptr_t)user;
    rng_t *r = hr();
    atomic_fetch_add(&busy, 1);
    h_depth++;
    if (finline[f])
        h_inline_depth++;
    atomic_fetch_add(&c_hcalls, 1);
    switch (f) {
    case F_ECHO_I:
    case F_ECHO_P:
        do_reply(req);
        break;
    case F_SLEEP_P: {
        int before = rn(r, 3) == 0;
        if (before)
            do_reply(req);
        usleep(rn(r, 5001));
        if (!before)
            do_reply(req);
        break;
    }
    case F_SPIN_P:
        spin_for(rn(r, 2000001));
        do_reply(req);
        break;
    case F_SPIN_I:
        spin_for(rn(r, 30001));
        do_reply(req);
        break;
    case F_DEFER_P:
    case F_DEFER_I:
        defer(req);
        break;
    case F_NEST_P:
    case F_NEST_I:
    case F_NEST2_P:
    case F_NEST2_I: {
        int level = (f == F_NEST2_P || f == F_NEST2_I) ? 1 : 2;
        int n = 1 + rn(r, 2);
        int rc = 0;
        for (int i = 0; i < n && rc == 0; i++)
            rc = nested(f, level);
        if (rc)
            frpc_respond_error(req, rc, "nested failed");
        else
            do_reply(req);
        break;
    }
    }
    if (finline[f])
        h_inline_depth--;
    h_depth--;
    atomic_fetch_sub(&busy, 1);
}

/* ---- callers ---- */
typedef struct {
    int id;
    rng_t r;
    uint64_t end;
    /* watchdog view */
    _Atomic uint64_t cur_start;
    uint64_t reported;
    char cur_desc[160];
    unsigned long ncalls;
} caller_t;

static caller_t *callers;
static int ncallers;
static atomic_int stop_watch;

static size_t pick_size(rng_t *r, int burst)
{
    unsigned p = rn(r, 100);
    if (nolarge)
        return p < 50 ? rn(r, 65) : rn(r, 4097);
    if (burst && p >= 95)
        return 4096 + rn(r, 60000);
    if (p < 40)
        return rn(r, 65);
    if (p < 65)
        return 65 + rn(r, 4032);
    if (p < 85 || burst)
        return 4097 + rn(r, 61440);
    return 65536 + rn(r, 196609);
}

static int pick_fn(rng_t *r, int burst)
{
    int f;
    do {
        f = allowed[rn(r, nallowed)];
        if (burst && !fast_fn(f) && rn(r, 10) != 0)
            continue;
        return f;
    } while (1);
}


static void report(caller_t *c, unsigned long num, int dst, int f,
                   const char *mode, size_t len, int rc, uint64_t el,
                   const char *err, const char *what)
{
    say("FINDING %s rank=%d thread=%d call=%lu dst=%d fn=%s mode=%s len=%zu "
        "rc=%s el=%.1fms err=%s",
        what, R, c->id, num, dst, fname[f], mode, len, ename(rc), el / 1e6,
        err ? err : "");
}

/* outcome of one call; returns 1 if finding */
static void outcome(caller_t *c, unsigned long num, int dst, int f,
                    const char *mode, const uint8_t *a, size_t len, int rc,
                    const void *data, size_t dlen, int rcode, const char *err,
                    uint64_t el, uint64_t t0, int pre, int end_known)
{
    atomic_fetch_add(&c_calls, 1);
    if (die_rank >= 0 && dst == die_rank) {
        const char *v = lost_verdict(rc, pre, t0, t0 + el, end_known);
        if (v) {
            atomic_fetch_add(&c_fail, 1);
            say("FINDING %s rank=%d thread=%d call=%lu dst=%d fn=%s mode=%s "
                "len=%zu rc=%s el=%.1fms since_death=%.1fms pre=%d err=%s",
                v, R, c->id, num, dst, fname[f], mode, len, ename(rc),
                el / 1e6, ((double)t0 + el - T_DIE) / 1e6, pre,
                err ? err : "");
            return;
        }
        if (rc == FRPC_EPEERLOST) {
            atomic_fetch_add(&c_lost, 1);
            return;
        }
    }
    if (die_rank >= 0 && rc == FRPC_EREMOTE && rcode == FRPC_EPEERLOST &&
        f >= F_NEST_P) {
        /* a nested call reached the dying rank (checked there) */
        atomic_fetch_add(&c_lost_remote, 1);
        return;
    }
    if (rc == 0) {
        if (!check_reply(a, len, data, dlen)) {
            atomic_fetch_add(&c_wrong, 1);
            report(c, num, dst, f, mode, len, rc, el, "wrong reply", "WRONG");
            return;
        }
        atomic_fetch_add(&c_ok, 1);
        if (el > SLOW_NS) {
            atomic_fetch_add(&c_slow, 1);
            report(c, num, dst, f, mode, len, rc, el, err, "SLOW");
        }
        return;
    }
    if (rc == FRPC_EREMOTE && rcode != 77 && (f >= F_NEST_P)) {
        /* nested failure, reported at the callee */
        atomic_fetch_add(&c_remote, 1);
        if (el > SLOW_NS)
            report(c, num, dst, f, mode, len, rc, el, err, "SLOW-REMOTE");
        return;
    }
    if (rc == FRPC_EDEADLK) {
        atomic_fetch_add(&c_edl_top, 1);
        report(c, num, dst, f, mode, len, rc, el, err, "EDEADLK-TOP");
        return;
    }
    atomic_fetch_add(&c_fail, 1);
    if (rc == FRPC_ETIMEDOUT)
        atomic_fetch_add(&c_to, 1);
    report(c, num, dst, f, mode, len, rc, el, err,
           rc == FRPC_ETIMEDOUT ? "TIMEOUT" : "ERROR");
}

static void setcur(caller_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->cur_desc, sizeof c->cur_desc, fmt, ap);
    va_end(ap);
    atomic_store(&c->cur_start, now_ns());
}

static void *caller_main(void *arg)
{
    caller_t *c = arg;
    rng_t *r = &c->r;
    unsigned long num = 0;
    uint8_t *bufs[MAXB];
    size_t lens[MAXB];
    int dsts[MAXB], fns[MAXB];
    frpc_future *fs[MAXB];
    uint64_t t0s[MAXB];
    int pres[MAXB], known[MAXB];
    for (int i = 0; i < MAXB; i++)
        bufs[i] = malloc(262144 + 8);

    while (now_ns() < c->end) {
        unsigned op = rn(r, 100);
        if (op >= (unsigned)(100 - burst_pct)) {
            /* burst */
            int n = 32 + rn(r, 33);
            int how = rn(r, 3); /* 0 wait_all 1 wait_any 2 in order */
            const char *mode = how == 0 ? "burst-all" : how == 1 ? "burst-any"
                                                              : "burst-seq";
            int started = 0;
            unsigned long first = num;
            setcur(c, "%s n=%d first=%lu", mode, n, first);
            for (int i = 0; i < n; i++) {
                lens[i] = pick_size(r, 1);
                dsts[i] = rn(r, W);
                fns[i] = pick_fn(r, 1);
                fill(bufs[i], lens[i], (uint32_t)rnd(r));
                pres[i] = is_lost(dsts[i]);
                known[i] = how == 1; /* wait_any sees each end */
                t0s[i] = now_ns();
                int rc;
                if (lens[i] >= 65536 && rn(r, 2))
                    rc = frpc_call_async_lent(A, dsts[i], fname[fns[i]],
                                              bufs[i], lens[i],
                                              TOP_TIMEOUT_MS, &fs[i]);
                else
                    rc = frpc_call_async(A, dsts[i], fname[fns[i]], bufs[i],
                                         lens[i], TOP_TIMEOUT_MS, &fs[i]);
                num++;
                if (rc) {
                    fs[i] = NULL;
                    outcome(c, first + i, dsts[i], fns[i], mode, bufs[i],
                            lens[i], rc, NULL, 0, 0, "async start", 0,
                            t0s[i], pres[i], 1);
                }
                started++;
            }
            uint64_t done_at[MAXB];
            for (int i = 0; i < n; i++)
                done_at[i] = 0;
            if (how == 0) {
                int rc = frpc_wait_all(fs, n, TOP_TIMEOUT_MS + 4000);
                uint64_t t = now_ns();
                if (rc)
                    say("FINDING WAITALL rank=%d thread=%d first=%lu rc=%s",
                        R, c->id, first, ename(rc));
                for (int i = 0; i < n; i++)
                    done_at[i] = t;
            } else if (how == 1) {
                frpc_future *live[MAXB];
                memcpy(live, fs, sizeof(fs[0]) * n);
                int left = 0;
                for (int i = 0; i < n; i++)
                    left += live[i] != NULL;
                while (left > 0) {
                    size_t idx;
                    int rc = frpc_wait_any(live, n, TOP_TIMEOUT_MS + 4000,
                                           &idx);
                    if (rc) {
                        say("FINDING WAITANY rank=%d thread=%d first=%lu "
                            "rc=%s left=%d", R, c->id, first, ename(rc),
                            left);
                        break;
                    }
                    done_at[idx] = now_ns();
                    live[idx] = NULL;
                    left--;
                }
            } else {
                for (int i = 0; i < n; i++) {
                    if (!fs[i])
                        continue;
                    int rc;
                    known[i] = !frpc_future_test(fs[i]);
                    if (rn(r, 4) == 0) {
                        /* short waits in a loop */
                        uint64_t lim = now_ns() + (TOP_TIMEOUT_MS + 4000) *
                                                      1000000ull;
                        while ((rc = frpc_future_wait(fs[i], 1 + rn(r, 3))) ==
                                   FRPC_ETIMEDOUT &&
                               !frpc_future_test(fs[i]) && now_ns() < lim)
                            ;
                    } else {
                        rc = frpc_future_wait(fs[i], TOP_TIMEOUT_MS + 4000);
                    }
                    done_at[i] = now_ns();
                    if (!frpc_future_test(fs[i]))
                        say("FINDING FWAIT rank=%d thread=%d call=%lu "
                            "rc=%s", R, c->id, first + i, ename(rc));
                }
            }
            for (int i = 0; i < n; i++) {
                if (!fs[i])
                    continue;
                frpc_result res = {0};
                int st = frpc_future_test(fs[i]) ? frpc_future_take(fs[i], &res)
                                                 : FRPC_EINPROGRESS;
                uint64_t el = (done_at[i] ? done_at[i] : now_ns()) - t0s[i];
                /* for wait_all, elapsed is the burst's: count SLOW only
                 * via the burst */
                outcome(c, first + i, dsts[i], fns[i], mode, bufs[i], lens[i],
                        st, res.data, res.len, res.remote_code, res.error,
                        el, t0s[i], pres[i], known[i]);
                frpc_result_clear(&res);
                frpc_future_free(fs[i]);
            }
            (void)started;
        } else {
            size_t len = pick_size(r, 0);
            int dst = rn(r, W);
            int f = pick_fn(r, 0);
            fill(bufs[0], len, (uint32_t)rnd(r));
            frpc_result res = {0};
            int rc;
            uint64_t t = now_ns();
            const char *mode;
            unsigned long my = num++;
            int pre = is_lost(dst);
            if (op < 50) {
                mode = "sync";
                setcur(c, "%s call=%lu dst=%d fn=%s len=%zu", mode, my, dst,
                       fname[f], len);
                rc = frpc_call(A, dst, fname[f], bufs[0], len, TOP_TIMEOUT_MS,
                               &res);
            } else {
                frpc_future *fu = NULL;
                int lent = len >= 65536 && rn(r, 2);
                mode = lent ? "async-lent" : "async";
                setcur(c, "%s call=%lu dst=%d fn=%s len=%zu", mode, my, dst,
                       fname[f], len);
                rc = lent ? frpc_call_async_lent(A, dst, fname[f], bufs[0],
                                                 len, TOP_TIMEOUT_MS, &fu)
                          : frpc_call_async(A, dst, fname[f], bufs[0], len,
                                            TOP_TIMEOUT_MS, &fu);
                if (rc == 0) {
                    if (rn(r, 5) == 0) {
                        mode = lent ? "async-lent-spinwait" : "async-spinwait";
                        while (!frpc_future_test(fu) &&
                               now_ns() - t < (TOP_TIMEOUT_MS + 4000) *
                                                  1000000ull)
                            frpc_future_wait(fu, 1 + rn(r, 2));
                    } else {
                        frpc_future_wait(fu, TOP_TIMEOUT_MS + 4000);
                    }
                    rc = frpc_future_test(fu) ? frpc_future_take(fu, &res)
                                              : FRPC_EINPROGRESS;
                    frpc_future_free(fu);
                }
            }
            uint64_t el = now_ns() - t;
            outcome(c, my, dst, f, mode, bufs[0], len, rc, res.data, res.len,
                    res.remote_code, res.error, el, t, pre, 1);
            frpc_result_clear(&res);
        }
        atomic_store(&c->cur_start, 0);
        c->ncalls = num;
        unsigned p = rn(r, 100);
        if (p < 33) {
            usleep(rn(r, 3001));
        }
    }
    for (int i = 0; i < MAXB; i++)
        free(bufs[i]);
    return NULL;
}

static void *watchdog(void *arg)
{
    (void)arg;
    int undetected = 0;
    while (!atomic_load(&stop_watch)) {
        usleep(250000);
        uint64_t n = now_ns();
        if (die_rank >= 0 && die_rank != R && !undetected &&
            !is_lost(die_rank) && n > T_DIE + LOST_NS) {
            undetected = 1;
            say("FINDING UNDETECTED rank=%d sees rank %d alive %.0fms after "
                "its death", R, die_rank, ((double)n - T_DIE) / 1e6);
        }
        for (int i = 0; i < ncallers; i++) {
            uint64_t s = atomic_load(&callers[i].cur_start);
            if (s && s < n && n - s > 3000000000ull && callers[i].reported != s) {
                callers[i].reported = s;
                frpc_stats st;
                frpc_get_stats(A, &st);
                say("WATCHDOG rank=%d thread=%d stuck %.0fms in: %s "
                    "[inflight=%llu recv=%llu answered=%llu onprog=%llu "
                    "standins=%llu]",
                    R, i, (n - s) / 1e6, callers[i].cur_desc,
                    (unsigned long long)st.calls_in_flight,
                    (unsigned long long)st.requests_received,
                    (unsigned long long)st.requests_answered,
                    (unsigned long long)st.handlers_on_progress,
                    (unsigned long long)st.progress_stand_ins);
                if (getenv("ST_SS")) {
                    char cmd[512];
                    snprintf(cmd, sizeof cmd,
                             "(date; ss -tnmi; cat /proc/%d/status | grep -i ctxt) "
                             "> /tmp/stress/logs/ss.%d.%d.%llu.txt 2>&1",
                             (int)getpid(), R, i,
                             (unsigned long long)(n / 1000000));
                    if (system(cmd) != 0)
                        say("ss failed");
                }
                if (getenv("ST_GDB")) {
                    char cmd[512];
                    const char *script = getenv("ST_GDB_X");
                    snprintf(cmd, sizeof cmd,
                             "timeout 60 gdb -p %d -batch -ex 'thread apply "
                             "all bt' %s%s > "
                             "/tmp/stress/logs/gdb.%d.%d.%llu.txt 2>&1",
                             (int)getpid(), script ? "-x " : "",
                             script ? script : "", R, i,
                             (unsigned long long)(n / 1000000));
                    if (system(cmd) != 0)
                        say("gdb failed");
                }
            }
        }
    }
    return NULL;
}

/* ---- ST_DIE_RANK: the death, what survivors see, how they meet ---- */
static void *killer(void *arg)
{
    (void)arg;
    struct timespec ts = {(time_t)(T_DIE / 1000000000ull),
                          (long)(T_DIE % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
        ;
    say("DIE rank=%d %.1fms past its moment", R,
        ((double)now_ns() - T_DIE) / 1e6);
    raise(SIGKILL);
    return NULL;
}

static void on_lost(frpc_agent *a, int rank, int state, const char *why,
                    void *user)
{
    (void)a;
    (void)user;
    double since = ((double)now_ns() - T_DIE) / 1e6;
    if (rank == die_rank && state == FRPC_PEER_DEAD) {
        is_lost(rank);
        say("NOTE LOST rank=%d: rank %d DEAD, told %.1fms after its death, "
            "seen %.1fms (%s)", R, rank, since,
            ((double)atomic_load(&t_lost) - T_DIE) / 1e6, why);
    } else if (rank == die_rank || !atomic_load(&work_done)) {
        say("FINDING LOST-OTHER rank=%d: rank %d %s at %.1fms after the "
            "death (%s)", R, rank, state == FRPC_PEER_DEAD ? "DEAD" : "LEFT",
            since, why);
    }
}

static void meet_fn(frpc_request *req, void *user)
{
    (void)user;
    size_t len;
    const uint8_t *a = frpc_request_args(req, &len);
    if (len == 1 && a[0] < 3)
        atomic_fetch_add(&met[a[0]], 1);
    frpc_respond(req, NULL, 0);
}

/* The survivors' barrier: tell each, then wait for each (all but R and
 * die_rank). */
static void meet(int phase)
{
    uint8_t b = (uint8_t)phase;
    int want = 0;
    for (int d = 0; d < W; d++) {
        if (d == R || d == die_rank)
            continue;
        want++;
        frpc_result res = {0};
        int rc = frpc_call(A, d, "st_meet", &b, 1, 30000, &res);
        if (rc)
            say("FINDING MEET rank=%d phase=%d dst=%d rc=%s err=%s", R, phase,
                d, ename(rc), res.error ? res.error : "");
        frpc_result_clear(&res);
    }
    uint64_t t = now_ns();
    while (atomic_load(&met[phase]) < want) {
        if (now_ns() - t > 120000000000ull) {
            say("FINDING MEET-WAIT rank=%d phase=%d met=%d of %d", R, phase,
                atomic_load(&met[phase]), want);
            return;
        }
        usleep(5000);
    }
}

/* Survivors, their callers done: the barrier fails, they meet, wait for
 * their handlers (the dead rank's requests' too), meet again. */
static void survivor_end(void)
{
    atomic_store(&work_done, 1);
    while (!is_lost(die_rank) && now_ns() < T_DIE + LOST_NS + 1000000000ull)
        usleep(5000);
    uint64_t tb = now_ns();
    int rc = frpc_barrier(A, 10000);
    if (rc != FRPC_EPEERLOST || now_ns() - tb > LOST_NS)
        say("FINDING BARRIER-LOST rank=%d rc=%s el=%.1fms", R, ename(rc),
            ((double)now_ns() - tb) / 1e6);
    meet(1);
    uint64_t t = now_ns(), quiet = 0;
    while (now_ns() - t < 60000000000ull) {
        if (atomic_load(&busy)) {
            quiet = 0;
        } else if (!quiet) {
            quiet = now_ns();
        } else if (now_ns() - quiet > 200000000ull) {
            break;
        }
        usleep(5000);
    }
    if (atomic_load(&busy))
        say("FINDING BUSY rank=%d handlers still busy=%d after 60 s", R,
            atomic_load(&busy));
    meet(2);
    say("LOSTSUMMARY rank=%d lost=%lu lost_remote=%lu lost_nested=%lu "
        "lost_answers=%lu seen_lost=%.1fms", R, c_lost, c_lost_remote,
        c_lost_nested, c_lost_answer,
        ((double)atomic_load(&t_lost) - T_DIE) / 1e6);
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 20;
    uint64_t base = argc > 2 && atoll(argv[2]) ? (uint64_t)atoll(argv[2])
                                                : (uint64_t)time(NULL);
    ncallers = argc > 3 ? atoi(argv[3]) : 2 + (int)(base % 2);
    if (ncallers < 0 || ncallers > 8) {
        fprintf(stderr, "CALLERS: 0 to 8\n");
        return 2;
    }
    T0 = now_ns();
    if (getenv("ST_NOLARGE"))
        nolarge = atoi(getenv("ST_NOLARGE"));
    if (getenv("ST_SLOW_MS"))
        SLOW_NS = strtoull(getenv("ST_SLOW_MS"), NULL, 10) * 1000000ull;
    if (getenv("ST_BURST_PCT"))
        burst_pct = atoi(getenv("ST_BURST_PCT"));
    if (getenv("ST_DIE_RANK") && *getenv("ST_DIE_RANK"))
        die_rank = atoi(getenv("ST_DIE_RANK"));
    if (getenv("ST_DIE_AT_MS") && *getenv("ST_DIE_AT_MS"))
        die_at_ms = atoi(getenv("ST_DIE_AT_MS"));
    if (getenv("ST_LOST_MS"))
        LOST_NS = strtoull(getenv("ST_LOST_MS"), NULL, 10) * 1000000ull;
    if (getenv("ST_FNS") && *getenv("ST_FNS")) {
        char *s = strdup(getenv("ST_FNS")), *tok, *sp;
        for (tok = strtok_r(s, ",", &sp); tok; tok = strtok_r(NULL, ",", &sp))
            allowed[nallowed++] = atoi(tok);
    } else {
        for (int i = 0; i < F_N; i++)
            allowed[nallowed++] = i;
    }

    frpc_config cfg;
    frpc_config_init(&cfg);
    char eb[1024];
    cfg.errbuf = eb;
    cfg.errbuf_len = sizeof eb;
    int rc = frpc_init(&cfg, &A);
    if (rc) {
        fprintf(stderr, "init: %s: %s\n", frpc_strerror(rc), eb);
        return 2;
    }
    R = frpc_rank(A);
    W = frpc_world_size(A);
    if (die_rank >= W || die_at_ms < 0) {
        fprintf(stderr, "ST_DIE_RANK: 0 to %d; ST_DIE_AT_MS >= 0\n", W - 1);
        return 2;
    }
    SEED = base * 7919 + (uint64_t)R * 104729;
    say("START rank=%d/%d seed_base=%llu rank_seed=%llu callers=%d secs=%d "
        "provider=%s progress=%s threads=%s coalesce=%s burst=%d",
        R, W, (unsigned long long)base, (unsigned long long)SEED, ncallers,
        secs, frpc_provider(A), getenv("FABRPC_PROGRESS") ?: "-",
        getenv("FABRPC_THREADS") ?: "-", getenv("FABRPC_COALESCE") ?: "-",
        burst_pct);
    for (int f = 0; f < F_N; f++) {
        rc = frpc_register(A, fname[f], handler, (void *)(intptr_t)f,
                           finline[f] ? FRPC_INLINE : 0);
        if (rc) {
            fprintf(stderr, "register %s: %s\n", fname[f], frpc_strerror(rc));
            return 2;
        }
    }
    pthread_t resp, wd;
    pthread_create(&resp, NULL, responder, NULL);
    if (die_rank >= 0) {
        rc = frpc_register(A, "st_meet", meet_fn, NULL, FRPC_INLINE);
        if (rc == 0 && die_rank != R)
            rc = frpc_on_peer_lost(A, on_lost, NULL);
        if (rc) {
            fprintf(stderr, "st_meet, on_peer_lost: %s\n", frpc_strerror(rc));
            return 2;
        }
    }
    rc = frpc_barrier(A, 60000);
    if (rc) {
        say("barrier1: %s", frpc_strerror(rc));
        return 2;
    }
    if (die_rank >= 0) {
        T_DIE = now_ns() + (uint64_t)die_at_ms * 1000000ull;
        say("DIE-PLAN rank %d dies in %dms", die_rank, die_at_ms);
        pthread_t k;
        if (die_rank == R)
            pthread_create(&k, NULL, killer, NULL);
    }
    if (getenv("ST_SERVERS") && R >= W - atoi(getenv("ST_SERVERS")))
        ncallers = 0; /* serve only: the progress thread polls */
    callers = calloc(ncallers ? ncallers : 1, sizeof *callers);
    pthread_t th[8];
    uint64_t end = now_ns() + (uint64_t)secs * 1000000000ull;
    for (int i = 0; i < ncallers; i++) {
        callers[i].id = i;
        callers[i].r.s = SEED * 31 + i * 1299709;
        callers[i].end = end;
        pthread_create(&th[i], NULL, caller_main, &callers[i]);
    }
    pthread_create(&wd, NULL, watchdog, NULL);
    for (int i = 0; i < ncallers; i++)
        pthread_join(th[i], NULL);
    if (die_rank == R)
        for (;;)
            pause(); /* until its death */
    if (die_rank >= 0) {
        survivor_end();
    } else {
        uint64_t tb = now_ns();
        rc = frpc_barrier(A, 120000);
        if (rc)
            say("FINDING BARRIER rank=%d rc=%s", R, frpc_strerror(rc));
        if (now_ns() - tb > 30000000000ull)
            say("NOTE final barrier took %.0fms", (now_ns() - tb) / 1e6);
    }
    atomic_store(&stop_watch, 1);
    pthread_join(wd, NULL);
    pthread_mutex_lock(&dq_lock);
    dq_stop = 1;
    pthread_cond_signal(&dq_cond);
    pthread_mutex_unlock(&dq_lock);
    pthread_join(resp, NULL);
    frpc_stats st;
    frpc_get_stats(A, &st);
    say("SUMMARY rank=%d calls=%lu ok=%lu fail=%lu timeout=%lu slow=%lu "
        "wrong=%lu remote=%lu edl_top=%lu edl_pool=%lu edl_inline=%lu "
        "(shallow %lu) nested=%lu nested_ok=%lu nested_fail=%lu deferred=%lu "
        "handled=%lu badargs=%lu | onprog=%llu standins=%llu coalesced=%llu "
        "dropped=%llu",
        R, c_calls, c_ok, c_fail, c_to, c_slow, c_wrong, c_remote,
        c_edl_top, c_edl_pool, c_edl_inline, c_edl_inline_shallow, c_nested,
        c_nested_ok, c_nested_fail, c_deferred, c_hcalls, c_bad_args,
        (unsigned long long)st.handlers_on_progress,
        (unsigned long long)st.progress_stand_ins,
        (unsigned long long)st.frames_coalesced,
        (unsigned long long)st.answers_dropped);
    uint64_t ts = now_ns();
    rc = frpc_shutdown(A, FRPC_SHUTDOWN_GRACEFUL, 60000);
    if (die_rank >= 0 ? rc != FRPC_EPEERLOST : rc != 0)
        say("FINDING SHUTDOWN rank=%d rc=%s", R, ename(rc));
    if (now_ns() - ts > 10000000000ull)
        say("NOTE shutdown took %.0fms", (now_ns() - ts) / 1e6);
    say("END rank=%d findings=%d", R, atomic_load(&findings));
    return atomic_load(&findings) ? 1 : 0;
}
