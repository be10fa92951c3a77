/*
 * Helpers for async.c, peerlost.c and lent.c: failure reports,
 * checked messages, a seeded PRNG, clocks, the agent's start and end, and
 * the stats invariant.
 *
 * A checked message is 8 bytes of seed followed by bytes derived from the
 * seed, so whoever receives one can tell whether every byte is right and
 * which call it belongs to. The "echo" handler answers a message of seed s
 * and length n with the message of seed au_reply_seed(s) and length
 * au_reply_len(s, n).
 *
 * Handlers every mode may register: echo, slow (echo after 0-5 ms), hold
 * (keeps the request), release (answers the held ones late) and fail
 * (answers with remote error 77); and report, for au_sum_at_rank0.
 */
#ifndef FABRPC_ASYNC_UTIL_H
#define FABRPC_ASYNC_UTIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fabrpc.h>

#include "check_fail.h"

#define CALL_TIMEOUT_MS 120000
#define BARRIER_TIMEOUT_MS 240000

static int nranks;
static frpc_agent *agent;

static uint64_t au_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* splitmix64: the next number of the sequence in *state. */
static uint64_t au_rand(uint64_t *state)
{
    *state += 0x2545f4914f6cdd1dull;
    return au_mix(*state);
}

static uint64_t au_word(uint64_t seed, size_t i)
{
    return au_mix(seed ^ ((uint64_t)i * 0xd6e8feb86659fd93ull));
}

/* n bytes (n >= 8): the seed, then its pattern. Never NULL. */
static void *au_msg(uint64_t seed, size_t n)
{
    uint8_t *b = malloc(n);
    CHECK(b && n >= 8, "au_msg: malloc %zu", n);
    memcpy(b, &seed, 8);
    for (size_t i = 8; i < n; i += 8) {
        uint64_t w = au_word(seed, i);
        memcpy(b + i, &w, n - i < 8 ? n - i : 8);
    }
    return b;
}

/* 1 if buf is a whole checked message; its seed goes to *seed. */
static int au_msg_check(const void *buf, size_t n, uint64_t *seed)
{
    const uint8_t *b = buf;
    if (!b || n < 8)
        return 0;
    memcpy(seed, b, 8);
    for (size_t i = 8; i < n; i += 8) {
        uint64_t w = au_word(*seed, i);
        if (memcmp(b + i, &w, n - i < 8 ? n - i : 8) != 0)
            return 0;
    }
    return 1;
}

/* 1 if req's args are a whole checked message; its seed goes to *seed. */
static int au_req_seed(const frpc_request *req, uint64_t *seed)
{
    size_t len = 0;
    const void *args = frpc_request_args(req, &len);
    return au_msg_check(args, len, seed);
}

static uint64_t au_reply_seed(uint64_t seed)
{
    return au_mix(seed ^ 0x5245504c59ull);
}

/* Replies to short args are short (8..1024 B), to long ones up to 64 KiB. */
static size_t au_reply_len(uint64_t seed, size_t arglen)
{
    uint64_t r = au_mix(~seed);
    return 8 + (size_t)(r % (arglen > 1024 ? 65529 : 1017));
}

/* 1 if (data, len) is the echo answer to args of this seed and length. */
static int au_reply_ok(const void *data, size_t len, uint64_t seed,
                       size_t arglen)
{
    uint64_t s;
    return len == au_reply_len(seed, arglen) && au_msg_check(data, len, &s) &&
           s == au_reply_seed(seed);
}

/* A payload length: mostly short (8..1024 B), one in eight up to max. */
static size_t au_len(uint64_t r, size_t max)
{
    return 8 + (size_t)((r & 7) == 0 ? (r >> 8) % (max - 7) : (r >> 8) % 1017);
}

static double au_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void au_sleep_us(unsigned us)
{
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static const char *au_why(int rc, const char *msg)
{
    return msg && *msg ? msg : frpc_strerror(rc);
}

/* frpc_init with cfg (set up by frpc_config_init, then tuned). */
static void au_start_config(frpc_config *cfg)
{
    char err[1024] = "";
    cfg->errbuf = err;
    cfg->errbuf_len = sizeof(err);
    int rc = frpc_init(cfg, &agent);
    CHECK(rc == 0, "frpc_init: %s: %s", frpc_strerror(rc), err);
    me = frpc_rank(agent);
    nranks = frpc_world_size(agent);
}

static void au_start(void)
{
    frpc_config cfg;
    frpc_config_init(&cfg);
    au_start_config(&cfg);
}

static void au_finish(void)
{
    double t0 = au_now_ms();
    int rc = frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, 60000);
    CHECK(rc == 0, "frpc_shutdown: %s", frpc_strerror(rc));
    printf("ok: rank %d shut down in %.0f ms\n", me, au_now_ms() - t0);
}

static void au_register(const char *name, frpc_handler_fn fn, void *user,
                        unsigned flags)
{
    int rc = frpc_register(agent, name, fn, user, flags);
    CHECK(rc == 0, "register %s: %s", name, frpc_strerror(rc));
}

static void au_barrier(void)
{
    int rc = frpc_barrier(agent, BARRIER_TIMEOUT_MS);
    CHECK(rc == 0, "barrier: %s", frpc_strerror(rc));
}

/* Reads the stats at a quiet moment: the calling-side invariant must hold
 * and no call may be in flight. */
static frpc_stats au_quiet_stats(void)
{
    frpc_stats s;
    int rc = frpc_get_stats(agent, &s);
    CHECK(rc == 0, "frpc_get_stats: %s", frpc_strerror(rc));
    CHECK(s.calls_started == s.calls_ok + s.calls_remote_error +
                                 s.calls_timed_out + s.calls_cancelled +
                                 s.calls_failed + s.calls_in_flight,
          "stats invariant: started %llu != ok %llu + remote %llu + timed out "
          "%llu + cancelled %llu + failed %llu + in flight %llu",
          (unsigned long long)s.calls_started, (unsigned long long)s.calls_ok,
          (unsigned long long)s.calls_remote_error,
          (unsigned long long)s.calls_timed_out,
          (unsigned long long)s.calls_cancelled,
          (unsigned long long)s.calls_failed,
          (unsigned long long)s.calls_in_flight);
    CHECK(s.calls_in_flight == 0, "%llu calls in flight at a quiet moment",
          (unsigned long long)s.calls_in_flight);
    return s;
}

/* Starts an async call with a checked message as args. */
static frpc_future *au_async(int dst, const char *fn, uint64_t seed,
                             size_t len, int timeout_ms)
{
    frpc_future *f = NULL;
    void *args = au_msg(seed, len);
    int rc = frpc_call_async(agent, dst, fn, args, len, timeout_ms, &f);
    free(args);
    CHECK(rc == 0 && f, "call_async %s on %d (%zu B): %s", fn, dst, len,
          frpc_strerror(rc));
    return f;
}

/* f completed with status 0 and the echo answer to (seed, arglen). */
static void au_check_echo(const frpc_future *f, uint64_t seed, size_t arglen,
                          const char *what)
{
    const char *msg = NULL;
    size_t len = 0;
    int rc = frpc_future_error(f, NULL, &msg);
    CHECK(rc == 0, "%s: %s", what, au_why(rc, msg));
    const void *data = frpc_future_data(f, &len);
    CHECK(au_reply_ok(data, len, seed, arglen),
          "%s: wrong reply (%zu B) for seed %llx", what, len,
          (unsigned long long)seed);
}

/* f completed (or not: FRPC_EINPROGRESS) with status want. */
static void au_expect_status(const frpc_future *f, int want, const char *what)
{
    int rc = frpc_future_error(f, NULL, NULL);
    CHECK(rc == want, "%s: %s, want %s", what, frpc_err_name(rc),
          frpc_err_name(want));
}

/* A sync call with a checked message as args: returns its status, with
 * the outcome in *res (clear it). */
static int au_call(int dst, const char *fn, uint64_t seed, size_t len,
                   int timeout_ms, frpc_result *res)
{
    void *args = au_msg(seed, len);
    int rc = frpc_call(agent, dst, fn, args, len, timeout_ms, res);
    free(args);
    return rc;
}

/* A sync call that must succeed with the echo answer. */
static void au_sync_echo(int dst, const char *fn, uint64_t seed, size_t len)
{
    frpc_result res;
    int rc = au_call(dst, fn, seed, len, CALL_TIMEOUT_MS, &res);
    CHECK(rc == 0, "call %s on %d (%zu B): %s", fn, dst, len,
          au_why(rc, res.error));
    CHECK(au_reply_ok(res.data, res.len, seed, len),
          "call %s on %d: wrong reply (%zu B)", fn, dst, res.len);
    frpc_result_clear(&res);
}

/* ---- handlers ----------------------------------------------------------- */

/* echo: checks the args, answers with the echo answer. */
static void echo(frpc_request *req, void *user)
{
    size_t len = 0;
    uint64_t seed;
    const void *args = frpc_request_args(req, &len);
    if (!au_msg_check(args, len, &seed)) {
        frpc_respond_error(req, 99, "echo: wrong args bytes");
        return;
    }
    size_t rlen = au_reply_len(seed, len);
    void *reply = au_msg(au_reply_seed(seed), rlen);
    int rc = frpc_respond(req, reply, rlen);
    free(reply);
    /* The caller may be gone (cancelled calls near shutdown). */
    CHECK(rc != FRPC_EINVAL && rc != FRPC_ETOOBIG, "respond: %s",
          frpc_strerror(rc));
}

/* slow: echo after 0-5 ms, a pause derived from the args. */
static void slow(frpc_request *req, void *user)
{
    uint64_t seed;
    if (au_req_seed(req, &seed))
        au_sleep_us((unsigned)(au_mix(seed) % 5001));
    echo(req, user);
}

#define MAX_HELD 64
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static frpc_request *held[MAX_HELD];
static int nheld;

/* hold: keeps the request unanswered (frpc_shutdown releases it). */
static void hold(frpc_request *req, void *user)
{
    pthread_mutex_lock(&held_lock);
    CHECK(nheld < MAX_HELD, "too many held requests");
    held[nheld++] = req;
    pthread_mutex_unlock(&held_lock);
}

/* release: answers the held requests, then itself with their number as a
 * 16-byte message's seed. */
static void release(frpc_request *req, void *user)
{
    pthread_mutex_lock(&held_lock);
    uint64_t n = (uint64_t)nheld;
    for (; nheld > 0; nheld--)
        frpc_respond(held[nheld - 1], "late", 4);
    pthread_mutex_unlock(&held_lock);
    void *rep = au_msg(n, 16);
    frpc_respond(req, rep, 16);
    free(rep);
}

/* fail: answers with remote error 77, "fail SEED". */
static void fail(frpc_request *req, void *user)
{
    uint64_t seed = 0;
    char msg[64];
    CHECK(au_req_seed(req, &seed), "fail: wrong args");
    snprintf(msg, sizeof(msg), "fail %llu", (unsigned long long)seed);
    frpc_respond_error(req, 77, msg);
}

#define AU_SUMS 8
static atomic_uint_fast64_t au_sums[AU_SUMS], au_reports;

/* report: adds a rank's numbers to the sums (rank 0). */
static void report(frpc_request *req, void *user)
{
    size_t len = 0;
    uint64_t v[AU_SUMS];
    const void *args = frpc_request_args(req, &len);
    if (len == 0 || len > sizeof(v) || len % 8) {
        frpc_respond_error(req, 99, "report: bad length");
        return;
    }
    memcpy(v, args, len);
    for (size_t i = 0; i < len / 8; i++)
        atomic_fetch_add(&au_sums[i], v[i]);
    atomic_fetch_add(&au_reports, 1);
    frpc_respond(req, NULL, 0);
}

/*
 * Every rank passes its n (<= AU_SUMS) numbers; at rank 0, v becomes their
 * sums over all ranks. Collective: needs "report" registered everywhere.
 * The barriers keep the reports (calls themselves) out of any stats a rank
 * read before calling this.
 */
static void au_sum_at_rank0(uint64_t *v, size_t n)
{
    frpc_result res;
    CHECK(n > 0 && n <= AU_SUMS, "au_sum_at_rank0: %zu numbers", n);
    au_barrier();
    if (me != 0) {
        int rc = frpc_call(agent, 0, "report", v, n * 8, CALL_TIMEOUT_MS,
                           &res);
        CHECK(rc == 0, "report: %s", au_why(rc, res.error));
        frpc_result_clear(&res);
    }
    au_barrier();
    if (me != 0)
        return;
    CHECK(atomic_load(&au_reports) == (uint64_t)nranks - 1, "%llu reports",
          (unsigned long long)atomic_load(&au_reports));
    for (size_t i = 0; i < n; i++)
        v[i] += atomic_load(&au_sums[i]);
}

#endif /* FABRPC_ASYNC_UTIL_H */
