/*
 * itest: the multi-rank integration test program, run by the scripts in
 * this directory through fabrpc-run. Usage: itest MODE
 *
 *   calls    every rank calls every rank (itself included) with payloads of
 *            0 B, 1 B, 4 KiB, 1 MiB and 16 MiB; both directions' bytes are
 *            checked against a pattern derived from (caller, callee, size).
 *   errors   remote error code and message, unknown function (its name in
 *            the error), invalid rank, bad arguments, args and replies over
 *            the limit, timeout with the late answer dropped, duplicate
 *            registration; a normal call still works after each.
 *   nested   a handler calls the next rank and its own rank before it
 *            answers; every rank calls every rank's such handler.
 *   threads  4 threads per rank call random ranks (payloads up to 70 KB,
 *            eager and rendezvous) at once; every reply is checked.
 *   strict   frpc_init must fail with FRPC_ENOBACKEND naming every provider
 *            in FABRPC_PROVIDER that did not come up (EXPECT_MISSING).
 *   backend  the active provider is EXPECT_PROVIDER.
 *   late     (2 ranks, coalescing off) rank 1 answers 1 MiB and then
 *            holds its poll 13 s; rank 0's call (60 s) must still succeed.
 *   zerocopy calls as in "calls" with payloads up to ZC_MAX (16 MiB unless
 *            set), answered with frpc_respond_owned, every byte checked;
 *            ZC_EXPECT_MIN (the zerocopy_min in force) says which args
 *            and replies must have gone without a copy, and
 *            frpc_stats.zerocopy_sent must count exactly those. A lent
 *            buffer is freed at once after a call that timed out.
 *   fnstats  per-function figures (frpc_get_fn_stats) on both sides,
 *            against the calls made and timed by the test itself.
 *   fnstats-off  (FABRPC_FN_STATS=0) calls and answers go on; no figures.
 *   barrier-turns  (2 ranks) a barrier behind another thread's ends by
 *            its own short timeout, entering nothing.
 *   barrier-retry  (3 ranks) ranks 0 and 1 retry 20 ms barriers, rank 2
 *            comes about 20 ms late: none returns FRPC_ETIMEDOUT from a
 *            barrier another rank has passed (BARRIER_FILE: a file of
 *            4096 zero bytes the ranks share).
 *   take     handlers take their args (frpc_request_take_args) and answer
 *            with them: every promise checked on the live request; args
 *            of TAKE_GIVEN_MIN bytes or more must come without a copy.
 *
 * Prints "ok: ..." per check; exits 1 at the first failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <malloc.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <fabrpc.h>

#include "check_fail.h"
#include "rss.h"

#define CALL_TIMEOUT_MS 120000


static uint8_t pattern(uint32_t seed, size_t i)
{
    return (uint8_t)(seed * 131u + i * 7u + (i >> 9));
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pattern(seed, i);
}

/* Index of the first wrong byte, or n. */
static size_t verify(const uint8_t *b, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pattern(seed, i))
            return i;
    return n;
}

static uint32_t seed_of(int caller, int callee, size_t size, int reply)
{
    return (uint32_t)(caller * 7919 + callee * 104729 + size * 13 + reply);
}

/* echo: checks the args against the caller's pattern, answers with the
 * reply pattern of the same size, or an error naming the bad byte. With a
 * non-NULL user, the reply is given with frpc_respond_owned (no copy). */
static void echo(frpc_request *req, void *user)
{
    size_t len;
    const uint8_t *args = frpc_request_args(req, &len);
    int src = frpc_request_source(req);
    size_t bad = verify(args, len, seed_of(src, me, len, 0));
    if (bad != len) {
        char msg[128];
        snprintf(msg, sizeof(msg), "args byte %zu of %zu is wrong", bad, len);
        frpc_respond_error(req, 99, msg);
        return;
    }
    uint8_t *out = len ? malloc(len) : NULL;
    if (len && !out) {
        frpc_respond_error(req, 98, "out of memory");
        return;
    }
    fill(out, len, seed_of(src, me, len, 1));
    if (!user) {
        frpc_respond(req, out, len);
        free(out);
        return;
    }
    int rc = frpc_respond_owned(req, out, len); /* out is fabrpc's now */
    if (rc)
        fprintf(stderr, "FAIL: frpc_respond_owned: %s\n", frpc_strerror(rc));
}

static void slow_handler(frpc_request *req, void *user)
{
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    frpc_respond(req, NULL, 0);
}

/* frpc_init with max_msg_size max_msg (0: unset), or the test fails. */
static frpc_agent *start_with_limit(long long max_msg)
{
    char err[1024] = "";
    frpc_config cfg;
    frpc_agent *a;
    frpc_config_init(&cfg);
    cfg.errbuf = err;
    cfg.errbuf_len = sizeof(err);
    if (max_msg > 0)
        cfg.max_msg_size = max_msg;
    int rc = frpc_init(&cfg, &a);
    CHECK(rc == 0, "frpc_init: %s: %s", frpc_strerror(rc), err);
    me = frpc_rank(a);
    return a;
}

static frpc_agent *start(void)
{
    return start_with_limit(0);
}

static void finish(frpc_agent *a)
{
    int rc = frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, 60000);
    CHECK(rc == 0, "frpc_shutdown: %s", frpc_strerror(rc));
    printf("ok: rank %d done\n", me);
}

static int mode_calls(void)
{
    static const size_t sizes[] = {0, 1, 4096, 1u << 20, 16u << 20};
    frpc_agent *a = start();
    int n = frpc_world_size(a);
    CHECK(frpc_register(a, "echo", echo, NULL, 0) == 0, "register echo");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    uint8_t *buf = malloc(16u << 20);
    CHECK(buf, "malloc");
    for (int k = 0; k < n; k++) {
        int dst = (me + k) % n; /* spread the load: not all at rank 0 */
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            size_t len = sizes[s];
            frpc_result res;
            fill(buf, len, seed_of(me, dst, len, 0));
            int rc = frpc_call(a, dst, "echo", buf, len, CALL_TIMEOUT_MS,
                               &res);
            CHECK(rc == 0, "call %d -> %d, %zu B: %s", me, dst, len,
                  res.error ? res.error : frpc_strerror(rc));
            CHECK(res.len == len, "reply length %zu, want %zu", res.len, len);
            CHECK(verify(res.data, len, seed_of(me, dst, len, 1)) == len,
                  "reply bytes from %d (%zu B) are wrong", dst, len);
            frpc_result_clear(&res);
        }
        printf("ok: rank %d -> rank %d, all sizes\n", me, dst);
    }
    free(buf);
    finish(a);
    return 0;
}

static size_t env_size(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? (size_t)strtoull(v, NULL, 10) : dflt;
}

static uint64_t zerocopy_sent(frpc_agent *a)
{
    frpc_stats st;
    CHECK(frpc_get_stats(a, &st) == 0, "frpc_get_stats");
    return st.zerocopy_sent;
}

static int mode_zerocopy(void)
{
    size_t max = env_size("ZC_MAX", 16u << 20);
    size_t zmin = env_size("ZC_EXPECT_MIN", 65536); /* 0: none lent */
    size_t sizes[] = {0, 1, 4096, 65536, 1u << 20, 16u << 20, max};
    size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
    frpc_agent *a = start();
    int n = frpc_world_size(a);
    uint64_t lent = 0, base = zerocopy_sent(a);

    static int given = 1;
    CHECK(frpc_register(a, "echo_owned", echo, &given, 0) == 0,
          "register echo_owned");
    CHECK(frpc_register(a, "slow", slow_handler, NULL, 0) == 0,
          "register slow");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    for (size_t s = 0; s < nsizes; s++)
        if (sizes[s] > max)
            sizes[s] = max;
    uint8_t *buf = malloc(max ? max : 1);
    CHECK(buf, "malloc %zu", max);
    for (int k = 0; k < n; k++) {
        int dst = (me + k) % n;
        for (size_t s = 0; s < nsizes; s++) {
            size_t len = sizes[s];
            frpc_result res;
            fill(buf, len, seed_of(me, dst, len, 0));
            int rc = frpc_call(a, dst, "echo_owned", buf, len,
                               CALL_TIMEOUT_MS, &res);
            CHECK(rc == 0, "call %d -> %d, %zu B: %s", me, dst, len,
                  res.error ? res.error : frpc_strerror(rc));
            CHECK(res.len == len, "reply length %zu, want %zu", res.len, len);
            CHECK(verify(res.data, len, seed_of(me, dst, len, 1)) == len,
                  "reply bytes from %d (%zu B) are wrong", dst, len);
            /* The args are ours again: the callee must have read them. */
            CHECK(verify(buf, len, seed_of(me, dst, len, 0)) == len,
                  "args changed under the call");
            frpc_result_clear(&res);
            lent += zmin && len >= zmin; /* our args, and its reply */
        }
        printf("ok: rank %d -> rank %d, sizes up to %zu B\n", me, dst, max);
    }
    /* A call that times out while its lent args are still its own: once
     * it returns, freeing them must be safe (ASan would see a read). */
    size_t big = max > (1u << 20) ? 1u << 20 : max;
    uint8_t *tmp = malloc(big ? big : 1);
    CHECK(tmp, "malloc");
    memset(tmp, 7, big);
    int dst = (me + 1) % n;
    frpc_result res;
    int rc = frpc_call(a, dst, "slow", tmp, big, 50, &res);
    CHECK(rc == FRPC_ETIMEDOUT, "slow call: %s, want FRPC_ETIMEDOUT",
          frpc_strerror(rc));
    frpc_result_clear(&res);
    free(tmp);
    lent += zmin && big >= zmin;
    printf("ok: rank %d: a timed-out call's lent args freed at once\n", me);
    CHECK(frpc_barrier(a, 120000) == 0, "barrier");
    /* Every rank made the same calls, so each gave as many replies as it
     * lent args. A reply is counted just after its send: allow a moment. */
    uint64_t want = 2 * lent - (zmin && big >= zmin), got = 0;
    for (int i = 0; i < 200 && (got = zerocopy_sent(a) - base) < want; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    CHECK(got == want, "zerocopy_sent %llu, want %llu (zerocopy_min %zu)",
          (unsigned long long)got, (unsigned long long)want, zmin);
    printf("ok: rank %d: %llu args and replies went without a copy\n", me,
           (unsigned long long)got);
    /* Wait for the slow handlers before leaving. */
    CHECK(frpc_barrier(a, 120000) == 0, "barrier");
    free(buf);
    finish(a);
    return 0;
}

/* ---- take ----------------------------------------------------------- */

/* Takes its args and checks every promise of frpc_request_take_args on
 * the live request: NULL data or len take nothing; the take hands over
 * the bytes that arrived; the request keeps none (args, unpack and a
 * second take see nothing). Answers with the taken buffer itself, filled
 * with the reply pattern, its first byte saying whether the buffer was
 * the one frpc_request_args pointed at (1: handed over) or a copy (0). */
static void take_handler(frpc_request *req, void *user)
{
    (void)user;
    size_t len, l2 = 7;
    const uint8_t *seen = frpc_request_args(req, &len);
    int src = frpc_request_source(req);
    void *data = (void *)1;
    const char *broke = NULL;
    frpc_mp_view view;
    memset(&view, 0, sizeof(view));
    if (frpc_request_take_args(req, NULL, &l2) != FRPC_EINVAL || l2 != 0 ||
        frpc_request_take_args(req, &data, NULL) != FRPC_EINVAL || data ||
        frpc_request_args(req, &l2) != seen || l2 != len)
        broke = "a take with a NULL output took something";
    else if (verify(seen, len, seed_of(src, me, len, 0)) != len)
        broke = "args arrived wrong";
    else if (frpc_request_take_args(req, &data, &l2) != 0 || l2 != len ||
             (len && !data) || (!len && data))
        broke = "the take did not give the args";
    else if (len && verify(data, len, seed_of(src, me, len, 0)) != len)
        broke = "the taken bytes are not the args";
    else if (len && malloc_usable_size(data) >
                        (len < 32768 ? 65536 : 2 * len) + 4096)
        broke = "the taken buffer is longer than the header allows";
    else if (frpc_request_args(req, &l2) != NULL || l2 != 0 ||
             frpc_request_unpack(req, &view) != FRPC_EPROTO)
        broke = "the request still has args after the take";
    else {
        void *again = (void *)1;
        if (frpc_request_take_args(req, &again, &l2) != 0 || again ||
            l2 != 0)
            broke = "a second take gave something";
    }
    frpc_mp_view_free(&view); /* left empty on its error: a no-op */
    if (broke) {
        free(data == (void *)1 ? NULL : data);
        frpc_respond_error(req, 97, broke);
        return;
    }
    uint8_t given = len && data == (const void *)seen;
    if (len > 1024) { /* a block of its own: realloc gives back the rest */
        void *kept = realloc(data, len);
        if (!kept || malloc_usable_size(kept) > len + 8192) {
            free(kept ? kept : data);
            frpc_respond_error(req, 96, "realloc kept the buffer's length");
            return;
        }
        data = kept;
    }
    if (len) {
        fill(data, len, seed_of(src, me, len, 1));
        ((uint8_t *)data)[0] = given;
    }
    int rc = frpc_respond_owned(req, data, len);
    if (rc)
        fprintf(stderr, "FAIL: frpc_respond_owned: %s\n", frpc_strerror(rc));
}

/* Every rank calls every rank's take_handler with args of 0 B to 16 MiB.
 * Args of at least TAKE_GIVEN_MIN bytes (the provider's eager limit, or
 * zerocopy_min) must be handed over without a copy, those of at most 1
 * KiB copied (they arrive inside the request's own frame). */
static int mode_take(void)
{
    static const size_t sizes[] = {0,        1,         1024,     4000,
                                   8192,     20000,     40000,    65535,
                                   65536,    200000,    1u << 20, 16u << 20};
    size_t given_min = env_size("TAKE_GIVEN_MIN", 65536);
    frpc_agent *a = start();
    int n = frpc_world_size(a);
    CHECK(frpc_register(a, "take", take_handler, NULL, 0) == 0,
          "register take");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    uint8_t *buf = malloc(16u << 20), *want = malloc(16u << 20);
    CHECK(buf && want, "malloc");
    for (int k = 0; k < n; k++) {
        int dst = (me + k) % n;
        char kinds[sizeof(sizes) / sizeof(sizes[0]) + 1] = "";
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            size_t len = sizes[s];
            frpc_result res;
            fill(buf, len, seed_of(me, dst, len, 0));
            int rc = frpc_call(a, dst, "take", buf, len, CALL_TIMEOUT_MS,
                               &res);
            CHECK(rc == 0, "call %d -> %d, %zu B: %s", me, dst, len,
                  res.error ? res.error : frpc_strerror(rc));
            CHECK(res.len == len, "reply length %zu, want %zu", res.len, len);
            if (len == 0) {
                kinds[s] = '-';
                frpc_result_clear(&res);
                continue;
            }
            fill(want, len, seed_of(me, dst, len, 1));
            const uint8_t *got = res.data;
            CHECK(memcmp(got + 1, want + 1, len - 1) == 0,
                  "reply bytes from %d (%zu B) are wrong", dst, len);
            CHECK(got[0] <= 1, "reply flag %d", got[0]);
            kinds[s] = got[0] ? 'g' : 'c';
            CHECK(len < given_min || got[0] == 1,
                  "%zu B args to rank %d were copied, want handed over "
                  "(from %zu B)", len, dst, given_min);
            CHECK(len > 1024 || got[0] == 0,
                  "%zu B args to rank %d were handed over, want a copy",
                  len, dst);
            frpc_result_clear(&res);
        }
        printf("ok: rank %d -> rank %d: taken args, by size (c copied, "
               "g given): %s\n", me, dst, kinds);
    }
    free(buf);
    free(want);
    finish(a);
    return 0;
}

/* ---- barrier-turns ---------------------------------------------------- */

static double now_msf(void);

static frpc_agent *turns_agent;
static atomic_int turns_go;          /* rank 1: rank 0 says "enter now" */
static atomic_int turns_first_rc = 1; /* rank 0: the held barrier's code */

static void turns_go_handler(frpc_request *req, void *user)
{
    (void)user;
    atomic_store(&turns_go, 1);
    frpc_respond(req, NULL, 0);
}

static void *turns_hold(void *arg)
{
    (void)arg;
    atomic_store(&turns_first_rc, frpc_barrier(turns_agent, 120000));
    return NULL;
}

/* Two threads' barriers take turns, and the second waits for the first
 * no longer than its own timeout, entering nothing (fabrpc.h,
 * frpc_barrier). 2 ranks: rank 0's first thread waits in a barrier
 * that rank 1 holds back; rank 0's main thread tries 20 ms barriers
 * meanwhile: each FRPC_ETIMEDOUT, the quickest well under the 100 ms
 * slice it once waited whole. Then rank 1 enters: the held barrier
 * completes, and the next one pairs too (nothing was entered). */
static int mode_barrier_turns(void)
{
    turns_agent = start();
    CHECK(frpc_world_size(turns_agent) == 2, "run with 2 ranks");
    CHECK(frpc_register(turns_agent, "go", turns_go_handler, NULL, 0) == 0,
          "register go");
    CHECK(frpc_barrier(turns_agent, 60000) == 0, "first barrier");
    if (me == 1) {
        for (int i = 0; i < 120000 && !atomic_load(&turns_go); i++)
            usleep(1000);
        CHECK(atomic_load(&turns_go), "rank 0 never said go");
        CHECK(frpc_barrier(turns_agent, 60000) == 0, "the held barrier");
    } else {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, turns_hold, NULL) == 0, "thread");
        usleep(300000); /* the thread holds the store by now */
        double best = 1e9;
        for (int i = 0; i < 5; i++) {
            double t0 = now_msf();
            int rc = frpc_barrier(turns_agent, 20);
            double ms = now_msf() - t0;
            CHECK(rc == FRPC_ETIMEDOUT, "a 20 ms barrier behind another "
                  "thread's: %s", frpc_strerror(rc));
            best = ms < best ? ms : best;
        }
        CHECK(best < 80, "a 20 ms barrier behind another thread's took "
              "%.1f ms at best in 5 tries", best);
        printf("ok: rank 0: 20 ms barriers behind another thread's ended "
               "FRPC_ETIMEDOUT, the quickest in %.1f ms\n", best);
        CHECK(atomic_load(&turns_first_rc) == 1, "the held barrier ended "
              "early: %s", frpc_strerror(atomic_load(&turns_first_rc)));
        CHECK(frpc_call(turns_agent, 1, "go", NULL, 0, 60000, NULL) == 0,
              "call go");
        pthread_join(t, NULL);
        CHECK(atomic_load(&turns_first_rc) == 0, "the held barrier: %s",
              frpc_strerror(atomic_load(&turns_first_rc)));
    }
    CHECK(frpc_barrier(turns_agent, 60000) == 0,
          "the barrier after: the timed-out ones entered something");
    printf("ok: rank %d: the held barrier and the next one paired\n", me);
    finish(turns_agent);
    return 0;
}

/* ---- barrier-retry ---------------------------------------------------- */

/* "if the others all arrived while it was taken back, the barrier
 * completed and returns 0" (fabrpc.h, frpc_barrier): two ranks whose
 * barriers ran out as the last one arrived took their entries back at
 * once, and the second saw the count below complete: FRPC_ETIMEDOUT
 * from a barrier the late rank had passed (1-9 of 100 here). Each rank
 * writes the barriers it passed into a shared file; a timeout is checked
 * against the others' counts. */
static int mode_barrier_retry(void)
{
    const int iters = 60, ms = 20;
    frpc_agent *a = start();
    int n = frpc_world_size(a), timeouts = 0;
    CHECK(n == 3, "run with 3 ranks");
    const char *path = getenv("BARRIER_FILE");
    CHECK(path, "BARRIER_FILE unset");
    FILE *f = fopen(path, "r+");
    CHECK(f, "open %s", path);
    _Atomic int *passed = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                               MAP_SHARED, fileno(f), 0);
    CHECK(passed != MAP_FAILED, "mmap %s", path);
    fclose(f);
    CHECK(frpc_barrier(a, 60000) == 0, "first barrier");
    srand((unsigned)me * 7 + 1);
    for (int i = 1; i <= iters; i++) {
        int rc;
        if (me == n - 1) {
            usleep((useconds_t)(ms * 1000 - 2000 + rand() % 4000));
            rc = frpc_barrier(a, 60000);
        } else {
            while ((rc = frpc_barrier(a, ms)) == FRPC_ETIMEDOUT) {
                timeouts++;
                for (int r = 0; r < n; r++)
                    CHECK(r == me || atomic_load(&passed[r]) < i,
                          "barrier %d: FRPC_ETIMEDOUT, but rank %d had "
                          "passed it", i, r);
            }
        }
        CHECK(rc == 0, "barrier %d: %s", i, frpc_strerror(rc));
        atomic_store(&passed[me], i);
        for (int r = 0; r < n; r++)
            CHECK(atomic_load(&passed[r]) >= i - 1, "barrier %d passed "
                  "while rank %d had passed only %d", i, r,
                  atomic_load(&passed[r]));
    }
    printf("ok: rank %d: %d barriers, %d timed out and retried, none after "
           "another rank had passed it\n", me, iters, timeouts);
    munmap((void *)passed, 4096);
    finish(a);
    return 0;
}

/* ---- errors --------------------------------------------------------- */

static frpc_request *parked; /* a request answered late, on purpose */

static void fail_handler(frpc_request *req, void *user)
{
    char msg[64];
    snprintf(msg, sizeof(msg), "boom from rank %d", me);
    frpc_respond_error(req, 42, msg);
}

static void park_handler(frpc_request *req, void *user)
{
    parked = req; /* answered by "unpark" after the caller gave up */
}

static void unpark_handler(frpc_request *req, void *user)
{
    if (parked) {
        frpc_respond(parked, "late", 4);
        parked = NULL;
    }
    frpc_respond(req, "unparked", 8);
}

static void big_reply_handler(frpc_request *req, void *user)
{
    size_t max = (size_t)(uintptr_t)user;
    char *b = calloc(1, max + 1);
    int rc = frpc_respond(req, b, max + 1);
    free(b);
    if (rc != FRPC_ETOOBIG)
        fprintf(stderr, "FAIL: respond over the limit gave %d\n", rc);
}

static void expect_call(frpc_agent *a, int dst, const char *fn,
                        const void *args, size_t len, int timeout, int want,
                        const char *want_text)
{
    frpc_result res;
    int rc = frpc_call(a, dst, fn, args, len, timeout, &res);
    CHECK(rc == want, "call %s on %d: got %s (%s), want %s", fn, dst,
          frpc_err_name(rc), res.error ? res.error : "", frpc_err_name(want));
    CHECK(res.status == rc, "result status %d != return %d", res.status, rc);
    if (want_text)
        CHECK(res.error && strstr(res.error, want_text),
              "error text \"%s\" lacks \"%s\"", res.error ? res.error : "",
              want_text);
    frpc_result_clear(&res);
}

static int mode_errors(void)
{
    frpc_agent *a = start();
    int n = frpc_world_size(a), peer = (me + 1) % n;
    size_t max = (size_t)strtoull(getenv("FABRPC_MAX_MSG") ?
                                  getenv("FABRPC_MAX_MSG") : "0", NULL, 10);
    CHECK(max > 0, "the errors test needs FABRPC_MAX_MSG");
    CHECK(frpc_register(a, "echo", echo, NULL, 0) == 0, "register");
    CHECK(frpc_register(a, "fail", fail_handler, NULL, 0) == 0, "register");
    CHECK(frpc_register(a, "park", park_handler, NULL, 0) == 0, "register");
    CHECK(frpc_register(a, "unpark", unpark_handler, NULL, 0) == 0, "reg");
    CHECK(frpc_register(a, "bigreply", big_reply_handler,
                        (void *)(uintptr_t)max, 0) == 0, "register");
    CHECK(frpc_register(a, "echo", echo, NULL, 0) == FRPC_EEXIST,
          "duplicate registration refused");
    CHECK(frpc_register(a, "", echo, NULL, 0) == FRPC_EINVAL, "empty name");
    CHECK(frpc_register(a, "x", NULL, NULL, 0) == FRPC_EINVAL, "no handler");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    printf("ok: registry errors\n");

    char msg[64];
    snprintf(msg, sizeof(msg), "boom from rank %d", peer);
    frpc_result res;
    int rc = frpc_call(a, peer, "fail", NULL, 0, CALL_TIMEOUT_MS, &res);
    CHECK(rc == FRPC_EREMOTE && res.remote_code == 42 && res.error &&
              strcmp(res.error, msg) == 0,
          "remote error: rc %d code %d msg %s", rc, res.remote_code,
          res.error ? res.error : "(null)");
    frpc_result_clear(&res);
    printf("ok: remote error code and message\n");

    expect_call(a, peer, "no_such_fn", NULL, 0, CALL_TIMEOUT_MS,
                FRPC_ENOFUNC, "no_such_fn");
    expect_call(a, me, "no_such_fn", NULL, 0, CALL_TIMEOUT_MS, FRPC_ENOFUNC,
                "no_such_fn");
    printf("ok: unknown function names the function\n");

    expect_call(a, n, "echo", NULL, 0, 1000, FRPC_ENORANK, NULL);
    expect_call(a, -1, "echo", NULL, 0, 1000, FRPC_ENORANK, NULL);
    expect_call(a, peer, NULL, NULL, 0, 1000, FRPC_EINVAL, NULL);
    expect_call(a, peer, "echo", NULL, 5, 1000, FRPC_EINVAL, NULL);
    CHECK(frpc_call(NULL, 0, "echo", NULL, 0, 1000, NULL) == FRPC_EINVAL,
          "NULL agent");
    printf("ok: invalid rank and arguments\n");

    char *big = calloc(1, max + 1);
    CHECK(big, "calloc");
    expect_call(a, peer, "echo", big, max + 1, CALL_TIMEOUT_MS, FRPC_ETOOBIG,
                NULL);
    free(big);
    expect_call(a, peer, "bigreply", NULL, 0, CALL_TIMEOUT_MS, FRPC_ETOOBIG,
                "limit");
    printf("ok: too large args and reply\n");

    expect_call(a, peer, "park", NULL, 0, 300, FRPC_ETIMEDOUT, "timed out");
    /* The late answer to "park" arrives now and must be dropped, not taken
     * as the answer to "unpark". */
    frpc_result ures;
    rc = frpc_call(a, peer, "unpark", NULL, 0, CALL_TIMEOUT_MS, &ures);
    CHECK(rc == 0 && ures.len == 8 && memcmp(ures.data, "unparked", 8) == 0,
          "unpark: %s", frpc_strerror(rc));
    frpc_result_clear(&ures);
    printf("ok: timeout, late answer dropped\n");

    uint8_t b[3];
    fill(b, 3, seed_of(me, me, 3, 0));
    rc = frpc_call(a, me, "echo", b, 3, CALL_TIMEOUT_MS, &res);
    CHECK(rc == 0 && res.len == 3, "call to self");
    frpc_result_clear(&res);
    printf("ok: call to self\n");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");

    /* A barrier that runs out: FRPC_ETIMEDOUT at its bound, like every
     * wait, and its entry taken back: rank 0's tries again (a loop of
     * short barriers) pair with the late ranks' first, and the next
     * barrier works for all (pre-fix: each try left an entry, the late
     * ranks' barriers completed at once and the next one never did). */
    if (me == 0) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = frpc_barrier(a, 300);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        /* 0 is the header's other end: the others all arrived while the
         * entry was taken back (a store starved of CPU for the second
         * they are late: 1148 ms on a loaded machine, CI 2026-12-06). */
        CHECK((rc == FRPC_ETIMEDOUT || rc == 0) && ms >= 290 && ms < 5000,
              "barrier(300) with the others late: %s after %.0f ms",
              frpc_err_name(rc), ms);
        printf("ok: barrier(300) with the others 1 s late: %s after %.0f "
               "ms\n", frpc_err_name(rc), ms);
        int tries = 1;
        while (rc && (rc = frpc_barrier(a, 200)) == FRPC_ETIMEDOUT &&
               tries < 300)
            tries++;
        CHECK(rc == 0, "barrier(200) tried %d times: %s", tries,
              frpc_err_name(rc));
        printf("ok: the same barrier tried again, %d times, met the late "
               "ranks'\n", tries);
    } else {
        usleep(1000 * 1000);
        CHECK(frpc_barrier(a, 60000) == 0, "the late ranks' barrier");
    }
    CHECK(frpc_barrier(a, 60000) == 0, "barrier after a timed-out one");
    finish(a);
    return 0;
}

/* ---- per-function figures ------------------------------------------ */

static double now_msf(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static frpc_fn_stats fn_stats(frpc_agent *a, const char *name)
{
    frpc_fn_stats st;
    memset(&st, 0xa5, sizeof(st));
    int rc = frpc_get_fn_stats(a, name, &st);
    CHECK(rc == 0, "frpc_get_fn_stats(%s): %s", name, frpc_strerror(rc));
    return st;
}

/* Each side's figures hold together: min <= p50 <= p99 <= max, the total
 * between n * min and n * max, failures among the counted. */
static void check_shape(const char *name, const char *side, uint64_t n,
                        uint64_t failed, uint64_t total, uint64_t min,
                        uint64_t max, uint64_t p50, uint64_t p99)
{
    CHECK(failed <= n, "%s %s: %llu failed of %llu", name, side,
          (unsigned long long)failed, (unsigned long long)n);
    if (n == 0) {
        CHECK(total == 0 && min == 0 && max == 0 && p50 == 0 && p99 == 0,
              "%s %s: times without a count", name, side);
        return;
    }
    CHECK(min > 0 && min <= p50 && p50 <= p99 && p99 <= max,
          "%s %s: min %llu p50 %llu p99 %llu max %llu", name, side,
          (unsigned long long)min, (unsigned long long)p50,
          (unsigned long long)p99, (unsigned long long)max);
    CHECK(total >= n * min && total <= n * max,
          "%s %s: total %llu outside n x [min, max]", name, side,
          (unsigned long long)total);
}

static void check_fn(const char *name, const frpc_fn_stats *st)
{
    check_shape(name, "calls", st->calls, st->calls_failed,
                st->call_ns_total, st->call_ns_min, st->call_ns_max,
                st->call_ns_p50, st->call_ns_p99);
    check_shape(name, "handled", st->handled, st->handled_error,
                st->handle_ns_total, st->handle_ns_min, st->handle_ns_max,
                st->handle_ns_p50, st->handle_ns_p99);
}

static int has_name(frpc_agent *a, const char *name)
{
    const char *names[FRPC_FN_STATS_MAX];
    int n = frpc_fn_stats_names(a, names, FRPC_FN_STATS_MAX);
    CHECK(n >= 0 && n <= FRPC_FN_STATS_MAX, "frpc_fn_stats_names: %d", n);
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

#define FN_SYNC 200
#define FN_ASYNC 100
#define FN_FAILS 20

/* Every rank calls the next (a ring: each is called by one rank) and
 * checks the figures against what it did and timed itself, on both
 * sides; then the argument checks and the struct's size handling. */
static int mode_fnstats(void)
{
    frpc_agent *a = start();
    int n = frpc_world_size(a), peer = (me + 1) % n;
    CHECK(frpc_register(a, "echo", echo, NULL, 0) == 0, "register");
    CHECK(frpc_register(a, "echo_async", echo, NULL, 0) == 0, "register");
    CHECK(frpc_register(a, "fail", fail_handler, NULL, 0) == 0, "register");
    CHECK(frpc_register(a, "park", park_handler, NULL, 0) == 0, "register");
    CHECK(frpc_register(a, "unpark", unpark_handler, NULL, 0) == 0, "reg");
    /* Registered, not yet called: listed, all zeros. */
    CHECK(has_name(a, "echo") && has_name(a, "park"), "registered names listed");
    frpc_fn_stats st = fn_stats(a, "echo");
    CHECK(st.calls == 0 && st.handled == 0 && st.call_ns_max == 0,
          "a name before any call has zeros");
    st = fn_stats(a, "never_seen");
    CHECK(st.calls == 0 && st.handled == 0 && st.handle_ns_p99 == 0,
          "an unknown name has zeros");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");

    /* Sync calls, timed here around each: the library's start and end lie
     * within them, so its times are no longer than ours. */
    double sum_ms = 0, max_ms = 0;
    uint8_t b[100];
    for (int i = 0; i < FN_SYNC; i++) {
        size_t len = (size_t)(i % 100);
        frpc_result res;
        fill(b, len, seed_of(me, peer, len, 0));
        double t0 = now_msf();
        int rc = frpc_call(a, peer, "echo", b, len, CALL_TIMEOUT_MS, &res);
        double ms = now_msf() - t0;
        CHECK(rc == 0, "echo: %s", frpc_strerror(rc));
        frpc_result_clear(&res);
        sum_ms += ms;
        if (ms > max_ms)
            max_ms = ms;
    }
    st = fn_stats(a, "echo");
    check_fn("echo", &st);
    CHECK(st.calls == FN_SYNC && st.calls_failed == 0,
          "echo: %llu calls (%llu failed), made %d",
          (unsigned long long)st.calls, (unsigned long long)st.calls_failed,
          FN_SYNC);
    CHECK((double)st.call_ns_total <= sum_ms * 1e6 &&
              (double)st.call_ns_max <= max_ms * 1e6,
          "echo: total %llu ns, max %llu ns; timed around the calls: "
          "%.0f ns, %.0f ns", (unsigned long long)st.call_ns_total,
          (unsigned long long)st.call_ns_max, sum_ms * 1e6, max_ms * 1e6);
    printf("ok: echo x%d: p50 %llu ns, p99 %llu ns, max %llu ns (timed "
           "around: mean %.0f ns)\n", FN_SYNC,
           (unsigned long long)st.call_ns_p50,
           (unsigned long long)st.call_ns_p99,
           (unsigned long long)st.call_ns_max, sum_ms * 1e6 / FN_SYNC);

    /* Async calls count the same way, under their own name. */
    frpc_future *fs[FN_ASYNC];
    for (int i = 0; i < FN_ASYNC; i++)
        CHECK(frpc_call_async(a, peer, "echo_async", NULL, 0, CALL_TIMEOUT_MS,
                              &fs[i]) == 0, "call_async");
    CHECK(frpc_wait_all(fs, FN_ASYNC, CALL_TIMEOUT_MS) == 0, "wait_all");
    for (int i = 0; i < FN_ASYNC; i++)
        frpc_future_free(fs[i]);
    st = fn_stats(a, "echo_async");
    check_fn("echo_async", &st);
    CHECK(st.calls == FN_ASYNC && st.calls_failed == 0,
          "echo_async: %llu calls", (unsigned long long)st.calls);

    /* Failures: remote errors, an unknown function, a timeout. */
    for (int i = 0; i < FN_FAILS; i++) {
        frpc_result res;
        CHECK(frpc_call(a, peer, "fail", NULL, 0, CALL_TIMEOUT_MS, &res) ==
                  FRPC_EREMOTE, "fail");
        frpc_result_clear(&res);
    }
    st = fn_stats(a, "fail");
    check_fn("fail", &st);
    CHECK(st.calls == FN_FAILS && st.calls_failed == FN_FAILS,
          "fail: %llu calls, %llu failed", (unsigned long long)st.calls,
          (unsigned long long)st.calls_failed);
    CHECK(frpc_call(a, peer, "no_such_fn", NULL, 0, CALL_TIMEOUT_MS, NULL) ==
              FRPC_ENOFUNC, "no_such_fn");
    st = fn_stats(a, "no_such_fn");
    CHECK(st.calls == 1 && st.calls_failed == 1 && st.handled == 0,
          "no_such_fn: %llu calls, %llu failed",
          (unsigned long long)st.calls, (unsigned long long)st.calls_failed);
    CHECK(has_name(a, "no_such_fn"), "a called name is listed");
    /* The callee's check below wants its handler held 250 ms or more:
     * a park timeout of 1 s leaves 750 ms for a late poll there. */
    const int park_timeout_ms = 1000;
    double t0 = now_msf();
    CHECK(frpc_call(a, peer, "park", NULL, 0, park_timeout_ms, NULL) ==
              FRPC_ETIMEDOUT,
          "park times out");
    double park_ms = now_msf() - t0;
    CHECK(frpc_call(a, peer, "unpark", NULL, 0, CALL_TIMEOUT_MS, NULL) == 0,
          "unpark");
    st = fn_stats(a, "park");
    check_fn("park", &st);
    CHECK(st.calls == 1 && st.calls_failed == 1 &&
              st.call_ns_min >= park_timeout_ms * 1000000ull &&
              (double)st.call_ns_max <= park_ms * 1e6,
          "park: %llu calls, %llu failed, %llu ns (timed around: %.0f ms)",
          (unsigned long long)st.calls, (unsigned long long)st.calls_failed,
          (unsigned long long)st.call_ns_min, park_ms);
    printf("ok: caller figures: counts, failures, timeout of %d ms "
           "counted as %.1f ms\n", park_timeout_ms,
           (double)st.call_ns_min / 1e6);

    /* The callee's side: each rank was called by one, exactly as it
     * called its peer. */
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    st = fn_stats(a, "echo");
    check_fn("echo", &st);
    CHECK(st.handled == FN_SYNC && st.handled_error == 0,
          "echo handled %llu (%llu errors), want %d",
          (unsigned long long)st.handled,
          (unsigned long long)st.handled_error, FN_SYNC);
    st = fn_stats(a, "echo_async");
    CHECK(st.handled == FN_ASYNC, "echo_async handled %llu",
          (unsigned long long)st.handled);
    st = fn_stats(a, "fail");
    CHECK(st.handled == FN_FAILS && st.handled_error == FN_FAILS,
          "fail handled %llu, errors %llu", (unsigned long long)st.handled,
          (unsigned long long)st.handled_error);
    st = fn_stats(a, "park");
    check_fn("park", &st);
    /* Answered once the caller, 1 s after its start, asked: less here, by
     * how much later this rank began to handle "park" than it came. */
    CHECK(st.handled == 1 && st.handle_ns_min >= 250 * 1000000ull,
          "park handled %llu in %llu ns: the answer came after the "
          "caller's 1 s", (unsigned long long)st.handled,
          (unsigned long long)st.handle_ns_min);
    st = fn_stats(a, "no_such_fn");
    CHECK(st.handled == 0, "an unknown function is handled by none");
    printf("ok: callee figures: handled, errors, a parked request's time\n");

    /* Listing: the count alone, and a short array. */
    int count = frpc_fn_stats_names(a, NULL, 0);
    CHECK(count >= 6, "names: %d", count);
    const char *two[2] = {NULL, NULL};
    CHECK(frpc_fn_stats_names(a, two, 2) == count && two[0] && two[1],
          "names into 2 slots");

    /* Arguments and sizes. */
    char longname[300];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    CHECK(frpc_get_fn_stats(NULL, "echo", &st) == FRPC_EINVAL &&
              frpc_get_fn_stats(a, NULL, &st) == FRPC_EINVAL &&
              frpc_get_fn_stats(a, "", &st) == FRPC_EINVAL &&
              frpc_get_fn_stats(a, longname, &st) == FRPC_EINVAL &&
              frpc_get_fn_stats_sized(a, "echo", NULL, sizeof(st)) ==
                  FRPC_EINVAL &&
              frpc_get_fn_stats_sized(a, "echo", &st, 8) == FRPC_EINVAL &&
              frpc_fn_stats_names(NULL, NULL, 0) == FRPC_EINVAL &&
              frpc_fn_stats_names(a, NULL, 1) == FRPC_EINVAL &&
              frpc_fn_stats_names(a, two, -1) == FRPC_EINVAL,
          "bad arguments: FRPC_EINVAL");
    struct {
        frpc_fn_stats st;
        uint64_t later[4]; /* a newer program's fields */
    } big;
    memset(&big, 0xff, sizeof(big));
    CHECK(frpc_get_fn_stats_sized(a, "echo", &big.st, sizeof(big)) == 0 &&
              big.later[0] == 0 && big.later[3] == 0 &&
              big.st.handled == FN_SYNC,
          "a larger struct: the unknown fields zeroed");
    printf("ok: arguments and struct sizes\n");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    finish(a);
    return 0;
}

/* FABRPC_FN_STATS=0: calls, errors and timeouts work as ever, and no name
 * has figures. */
static int mode_fnstats_off(void)
{
    frpc_agent *a = start();
    int peer = (me + 1) % frpc_world_size(a);
    CHECK(frpc_register(a, "echo", echo, NULL, 0) == 0, "register");
    CHECK(frpc_register(a, "fail", fail_handler, NULL, 0) == 0, "register");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    for (int i = 0; i < 50; i++)
        CHECK(frpc_call(a, peer, "echo", NULL, 0, CALL_TIMEOUT_MS, NULL) == 0,
              "echo");
    CHECK(frpc_call(a, peer, "fail", NULL, 0, CALL_TIMEOUT_MS, NULL) ==
              FRPC_EREMOTE, "fail");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    frpc_fn_stats st = fn_stats(a, "echo");
    CHECK(st.calls == 0 && st.handled == 0 && st.call_ns_max == 0 &&
              st.handle_ns_max == 0, "echo has no figures");
    CHECK(frpc_fn_stats_names(a, NULL, 0) == 0, "no name has figures");
    frpc_stats all;
    CHECK(frpc_get_stats(a, &all) == 0 && all.calls_ok >= 50 &&
              all.requests_answered >= 51, "frpc_stats still counts");
    printf("ok: fn_stats off: calls work, no figures\n");
    finish(a);
    return 0;
}

/* ---- nested calls and threads -------------------------------------- */

static frpc_agent *g_agent;

/* relay: a handler that calls the next rank and its own rank before it
 * answers (a nested call from the progress path). */
static void relay(frpc_request *req, void *user)
{
    int n = frpc_world_size(g_agent), next = (me + 1) % n;
    uint8_t b[16];
    int targets[2] = {next, me};
    for (int i = 0; i < 2; i++) {
        frpc_result res;
        fill(b, sizeof(b), seed_of(me, targets[i], sizeof(b), 0));
        int rc = frpc_call(g_agent, targets[i], "echo", b, sizeof(b),
                           CALL_TIMEOUT_MS, &res);
        if (rc || verify(res.data, res.len, seed_of(me, targets[i],
                                                   sizeof(b), 1)) != 16) {
            frpc_respond_error(req, 7, res.error ? res.error : "bad reply");
            frpc_result_clear(&res);
            return;
        }
        frpc_result_clear(&res);
    }
    frpc_respond(req, "relayed", 7);
}

/* Ranks with different limits: rank 0 takes at most LIMITS_SMALL bytes,
 * rank 1 its default. Payloads over the receiver's limit are refused
 * with FRPC_ETOOBIG at once, and their sender lets go of them (the
 * refusal names the rendezvous payload, so it is freed or, lent, given
 * back): a lent call ends well before its timeout, and 100 refused
 * payloads of 2 MB, copied args (rank 1's) or owned replies (rank 0's),
 * leave neither sender's resident set 200 MB larger. */
#define LIMITS_SMALL 100000u
#define LIMITS_BIG (2u << 20)

static long rss_mb(void)
{
    return rss_kib() / 1024;
}

/* 100 refused payloads of 2 MB must not have stayed (see mode_limits). */
static void check_let_go(long before_mb, const char *what)
{
    long after = rss_mb();
    CHECK(!RSS_CHECKED || after - before_mb < 100,
          "100 refused 2 MB %s: resident %ld -> %ld MB", what, before_mb,
          after);
    printf("ok: refused %s let go (resident %ld -> %ld MB)\n", what,
           before_mb, after);
}

static double since_ms(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 +
           (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void owned_big_reply(frpc_request *req, void *user)
{
    (void)user;
    uint8_t *b = calloc(1, LIMITS_BIG);
    if (!b || frpc_respond_owned(req, b, LIMITS_BIG) != 0)
        frpc_respond_error(req, 97, "could not answer");
}

/* ---- tiny ------------------------------------------------------------ */

#define TINY_LIMIT 64u
#define TINY_TEXT 900u /* an error text over the limit, under 1024 */

static void long_error(frpc_request *req, void *user)
{
    (void)user;
    char text[TINY_TEXT + 1];
    memset(text, 'e', TINY_TEXT);
    text[TINY_TEXT] = '\0';
    frpc_respond_error(req, 7, text);
}

static void echo_as_is(frpc_request *req, void *user)
{
    (void)user;
    size_t len;
    const void *args = frpc_request_args(req, &len);
    frpc_respond(req, args, len);
}

static void big_reply(frpc_request *req, void *user)
{
    (void)user;
    uint8_t reply[4 * TINY_LIMIT] = {0};
    frpc_respond(req, reply, sizeof(reply));
}

/* Both ranks with max_msg_size 64: errors still reach their callers whole
 * (a 900-byte text; the FRPC_ETOOBIG of a reply over the callee's limit;
 * the refusal of args over it), at once, not by the call's timeout. */
static int mode_tiny(void)
{
    frpc_agent *a = start_with_limit(TINY_LIMIT);
    int rc, peer = 1 - me;
    CHECK(frpc_register(a, "long_error", long_error, NULL, 0) == 0, "reg");
    CHECK(frpc_register(a, "big_reply", big_reply, NULL, 0) == 0, "reg");
    CHECK(frpc_register(a, "echo", echo_as_is, NULL, 0) == 0, "reg");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    frpc_result res;
    rc = frpc_call(a, peer, "long_error", NULL, 0, 30000, &res);
    CHECK(rc == FRPC_EREMOTE && res.remote_code == 7 && res.error &&
              strlen(res.error) == TINY_TEXT,
          "a %u-byte error text under a %u-byte limit: %s (%zu bytes)",
          TINY_TEXT, TINY_LIMIT, frpc_err_name(rc),
          res.error ? strlen(res.error) : 0);
    frpc_result_clear(&res);
    expect_call(a, peer, "big_reply", NULL, 0, 30000, FRPC_ETOOBIG, NULL);
    uint8_t args[2 * TINY_LIMIT] = {0};
    expect_call(a, peer, "echo", args, sizeof(args), 30000, FRPC_ETOOBIG,
                NULL);
    expect_call(a, peer, "echo", args, TINY_LIMIT / 2, 30000, 0, NULL);
    double ms = since_ms(&t0);
    CHECK(ms < 15000, "the errors took %.0f ms (timeouts 30 s)", ms);
    printf("ok: rank %d: errors under a %u-byte limit reached the caller "
           "whole in %.0f ms\n", me, TINY_LIMIT, ms);
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    rc = frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, 60000);
    CHECK(rc == 0, "frpc_shutdown: %s", frpc_strerror(rc));
    return 0;
}

static int mode_limits(void)
{
    const char *r = getenv("FABRPC_RANK");
    frpc_agent *a = start_with_limit(r && atoi(r) == 0 ? LIMITS_SMALL : 0);
    int rc;
    CHECK(frpc_world_size(a) == 2, "the limits test takes 2 ranks");
    CHECK(frpc_register(a, "echo", echo, NULL, 0) == 0, "register");
    CHECK(frpc_register(a, "owned_big", owned_big_reply, NULL, 0) == 0,
          "register");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");

    if (me == 1) {
        size_t len = 5 * LIMITS_SMALL; /* lent: over zerocopy_min */
        uint8_t *big = calloc(1, LIMITS_BIG);
        CHECK(big, "calloc");
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        expect_call(a, 0, "echo", big, len, 30000, FRPC_ETOOBIG, "limit");
        double ms = since_ms(&t0);
        CHECK(ms < 15000, "lent args over the callee's limit took %.0f ms",
              ms);

        frpc_future *f = NULL;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = frpc_call_async_lent(a, 0, "echo", big, len, 30000, &f);
        CHECK(rc == 0, "lent async: %s", frpc_strerror(rc));
        rc = frpc_future_wait(f, 20000);
        CHECK(rc == FRPC_ETOOBIG, "lent async over the limit: %s after "
              "%.0f ms", frpc_strerror(rc), since_ms(&t0));
        frpc_future_free(f);
        printf("ok: lent args over the callee's limit refused at once\n");

        long before = rss_mb();
        for (int i = 0; i < 100; i++) {
            rc = frpc_call_async(a, 0, "echo", big, LIMITS_BIG, 30000, &f);
            CHECK(rc == 0, "async %d: %s", i, frpc_strerror(rc));
            rc = frpc_future_wait(f, 20000);
            CHECK(rc == FRPC_ETOOBIG, "copied args %d: %s", i,
                  frpc_strerror(rc));
            frpc_future_free(f);
        }
        check_let_go(before, "copied args");
        free(big);
    }
    /* Owned replies of 2 MB from rank 1, over rank 0's limit: rank 1
     * frees each once rank 0 refused it. */
    long before = rss_mb();
    CHECK(frpc_barrier(a, 120000) == 0, "barrier");
    if (me == 0)
        for (int i = 0; i < 100; i++)
            expect_call(a, 1, "owned_big", NULL, 0, 30000, FRPC_ETOOBIG,
                        "limit");
    CHECK(frpc_barrier(a, 120000) == 0, "barrier");
    if (me == 1)
        check_let_go(before, "owned replies");
    finish(a);
    return 0;
}

static int mode_nested(void)
{
    frpc_agent *a = start();
    g_agent = a;
    int n = frpc_world_size(a);
    CHECK(frpc_register(a, "echo", echo, NULL, 0) == 0, "register");
    CHECK(frpc_register(a, "relay", relay, NULL, 0) == 0, "register");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    for (int k = 0; k < n; k++) {
        int dst = (me + k) % n;
        frpc_result res;
        int rc = frpc_call(a, dst, "relay", NULL, 0, CALL_TIMEOUT_MS, &res);
        CHECK(rc == 0 && res.len == 7 && memcmp(res.data, "relayed", 7) == 0,
              "relay via %d: %s", dst, res.error ? res.error : "");
        frpc_result_clear(&res);
    }
    printf("ok: nested calls through every rank\n");
    finish(a);
    return 0;
}

#define THREADS 4
#define THREAD_CALLS 300 /* ITEST_THREAD_CALLS overrides (stress by hand) */
static int g_thread_calls = THREAD_CALLS;
#define WATCH_QUIET_S 20 /* no call ended for this long: say what is stuck */

/* What each caller thread is doing, for the watchdog (written by the
 * thread, read by the watchdog: a diagnostic, relaxed). */
static struct caller_state {
    _Atomic int i, dst;
    _Atomic size_t len;
    _Atomic long started_ms;
} g_callers[THREADS];
static _Atomic long g_last_end_ms;
static _Atomic int g_callers_done;

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void *caller_thread(void *arg)
{
    frpc_agent *a = g_agent;
    int id = (int)(uintptr_t)arg;
    struct caller_state *st = &g_callers[id];
    unsigned seed = (unsigned)id * 2654435761u + (unsigned)me;
    int n = frpc_world_size(a);
    uint8_t *buf = malloc(70000);
    for (int i = 0; i < g_thread_calls && buf; i++) {
        seed = seed * 1103515245u + 12345u;
        int dst = (int)((seed >> 8) % (unsigned)n);
        size_t len = (seed >> 4) % 3 == 0 ? (seed >> 12) % 70000
                                          : (seed >> 12) % 512;
        frpc_result res;
        fill(buf, len, seed_of(me, dst, len, 0));
        st->i = i;
        st->dst = dst;
        st->len = len;
        st->started_ms = now_ms();
        int rc = frpc_call(a, dst, "echo", buf, len, CALL_TIMEOUT_MS, &res);
        st->started_ms = 0;
        g_last_end_ms = now_ms();
        CHECK(rc == 0 && res.len == len &&
                  verify(res.data, len, seed_of(me, dst, len, 1)) == len,
              "thread call %d -> %d (%zu B): %s", me, dst, len,
              res.error ? res.error : frpc_strerror(rc));
        frpc_result_clear(&res);
    }
    free(buf);
    return NULL;
}

/* When no call has ended for WATCH_QUIET_S, prints each unfinished call
 * (which rank, how big, for how long) and the agent's counters, once: a
 * stall in CI then says where it was. */
static void *watchdog(void *arg)
{
    frpc_agent *a = arg;
    while (!g_callers_done) {
        sleep(1);
        long now = now_ms();
        if (now - g_last_end_ms < WATCH_QUIET_S * 1000L)
            continue;
        for (int t = 0; t < THREADS; t++)
            if (g_callers[t].started_ms)
                printf("note: stalled: thread %d call %d -> rank %d (%zu B) "
                       "waiting %ld ms\n", t, g_callers[t].i, g_callers[t].dst,
                       (size_t)g_callers[t].len,
                       now - g_callers[t].started_ms);
        frpc_stats s;
        if (frpc_get_stats(a, &s) == 0)
            printf("note: stalled: started %llu ok %llu in flight %llu "
                   "received %llu answered %llu dropped answers %llu "
                   "messages sent %llu repost failed %llu cq errors "
                   "unmatched %llu peers lost %llu\n",
                   (unsigned long long)s.calls_started,
                   (unsigned long long)s.calls_ok,
                   (unsigned long long)s.calls_in_flight,
                   (unsigned long long)s.requests_received,
                   (unsigned long long)s.requests_answered,
                   (unsigned long long)s.answers_dropped,
                   (unsigned long long)s.messages_sent,
                   (unsigned long long)s.recv_repost_failed,
                   (unsigned long long)s.cq_errors_unmatched,
                   (unsigned long long)s.peers_lost);
        fflush(stdout);
        return NULL;
    }
    return NULL;
}

static int mode_threads(void)
{
    pthread_t t[THREADS], w;
    frpc_agent *a = start();
    g_agent = a;
    CHECK(frpc_register(a, "echo", echo, NULL, 0) == 0, "register");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    if (getenv("ITEST_THREAD_CALLS"))
        g_thread_calls = atoi(getenv("ITEST_THREAD_CALLS"));
    g_last_end_ms = now_ms();
    CHECK(pthread_create(&w, NULL, watchdog, a) == 0, "pthread_create");
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, caller_thread,
                             (void *)(uintptr_t)i) == 0, "pthread_create");
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    g_callers_done = 1;
    pthread_join(w, NULL);
    printf("ok: %d threads x %d calls\n", THREADS, g_thread_calls);
    finish(a);
    return 0;
}

/* ---- a late peer ---------------------------------------------------- */

#define LATE_LEN (1u << 20) /* over the eager size: read by rendezvous */
#define LATE_HOLD_S 13      /* longer than a reply read waits unprogressed */

/* Answers LATE_LEN bytes, then holds the poll for LATE_HOLD_S (an inline
 * handler: nobody else polls here), as a stopped or starved process
 * would: the caller's read of the reply cannot progress meanwhile. */
static void late_big(frpc_request *req, void *user)
{
    (void)user;
    uint8_t *out = malloc(LATE_LEN);
    int src = frpc_request_source(req);
    if (!out) {
        frpc_respond_error(req, 12, "out of memory");
        return;
    }
    fill(out, LATE_LEN, seed_of(me, src, LATE_LEN, 1));
    frpc_respond(req, out, LATE_LEN);
    free(out);
    sleep(LATE_HOLD_S);
}

/* A peer that pauses while the caller reads its large reply: the call
 * still has time (60 s), so it must succeed, not fail when the reply's
 * read has made no progress for a while. Run with coalescing off, so the
 * answer leaves before the pause. */
static int mode_late(void)
{
    frpc_agent *a = start();
    CHECK(frpc_world_size(a) == 2, "late: needs 2 ranks");
    CHECK(frpc_register(a, "late_big", late_big, NULL, FRPC_INLINE) == 0,
          "register");
    CHECK(frpc_barrier(a, 60000) == 0, "barrier");
    if (me == 0) {
        frpc_result res;
        long t0 = now_ms();
        int rc = frpc_call(a, 1, "late_big", NULL, 0, 60000, &res);
        long took = now_ms() - t0;
        CHECK(rc == 0, "late reply: %s (after %ld ms)",
              res.error ? res.error : frpc_strerror(rc), took);
        CHECK(res.len == LATE_LEN &&
                  verify(res.data, res.len, seed_of(1, 0, LATE_LEN, 1)) ==
                      LATE_LEN,
              "late reply: %zu bytes, content wrong", res.len);
        frpc_result_clear(&res);
        printf("ok: a 1 MiB reply from a peer that paused %d s arrived "
               "(%ld ms)\n", LATE_HOLD_S, took);
    }
    finish(a);
    return 0;
}

static int mode_strict(void)
{
    char err[2048] = "";
    frpc_config cfg;
    frpc_agent *a = NULL;
    const char *missing = getenv("EXPECT_MISSING");
    frpc_config_init(&cfg);
    cfg.errbuf = err;
    cfg.errbuf_len = sizeof(err);
    int rc = frpc_init(&cfg, &a);
    CHECK(rc == FRPC_ENOBACKEND, "strict init gave %s, want FRPC_ENOBACKEND",
          frpc_err_name(rc));
    CHECK(a == NULL, "no agent on failure");
    for (const char *p = missing; p && *p;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        char name[64];
        snprintf(name, sizeof(name), "provider %.*s did not come up", (int)l,
                 p);
        CHECK(strstr(err, name), "message \"%s\" lacks \"%s\"", err, name);
        p = c ? c + 1 : p + l;
    }
    printf("ok: strict init failed: %s\n", err);
    return 0;
}

/* A provider name no libfabric provider has (FABRPC_PROVIDER): frpc_init
 * fails at once with FRPC_EINVAL, calling it unknown and listing what
 * came up, even with a good name after it. */
static int mode_unknown_provider(void)
{
    char err[2048] = "";
    frpc_config cfg;
    frpc_agent *a = NULL;
    const char *name = getenv("EXPECT_UNKNOWN");
    char want[96];
    frpc_config_init(&cfg);
    cfg.errbuf = err;
    cfg.errbuf_len = sizeof(err);
    int rc = frpc_init(&cfg, &a);
    CHECK(rc == FRPC_EINVAL && a == NULL, "init gave %s, want FRPC_EINVAL",
          frpc_err_name(rc));
    snprintf(want, sizeof(want), "unknown provider '%s'", name ? name : "");
    CHECK(strstr(err, want) && strstr(err, "came up here: ") &&
              strstr(err, "shm"),
          "message \"%s\" lacks \"%s\" or what came up", err, want);
    printf("ok: %s\n", err);
    return 0;
}

static int mode_backend(void)
{
    frpc_agent *a = start();
    const char *want = getenv("EXPECT_PROVIDER");
    char rep[1024];
    frpc_backend_report(a, rep, sizeof(rep));
    CHECK(want && strcmp(frpc_provider(a), want) == 0,
          "active provider %s, want %s", frpc_provider(a), want ? want : "?");
    CHECK(frpc_require_backend(a, want) == 0, "require_backend(%s)", want);
    CHECK(frpc_require_backend(a, "no-such") == FRPC_ENOBACKEND,
          "require_backend of a missing provider");
    CHECK(frpc_has_backend(a, want) == 1, "has_backend(%s)", want);
    CHECK(strstr(rep, "(active)"), "report marks the active one: %s", rep);
    printf("ok: provider %s (%s)\n", frpc_provider(a), frpc_provider_full(a));
    finish(a);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: itest calls|errors|nested|threads|late|strict|backend|unknown-provider|zerocopy|fnstats\n");
        return 2;
    }
    if (strcmp(argv[1], "calls") == 0)
        return mode_calls();
    if (strcmp(argv[1], "errors") == 0)
        return mode_errors();
    if (strcmp(argv[1], "limits") == 0)
        return mode_limits();
    if (strcmp(argv[1], "tiny") == 0)
        return mode_tiny();
    if (strcmp(argv[1], "nested") == 0)
        return mode_nested();
    if (strcmp(argv[1], "threads") == 0)
        return mode_threads();
    if (strcmp(argv[1], "strict") == 0)
        return mode_strict();
    if (strcmp(argv[1], "backend") == 0)
        return mode_backend();
    if (strcmp(argv[1], "unknown-provider") == 0)
        return mode_unknown_provider();
    if (strcmp(argv[1], "late") == 0)
        return mode_late();
    if (strcmp(argv[1], "zerocopy") == 0)
        return mode_zerocopy();
    if (strcmp(argv[1], "fnstats") == 0)
        return mode_fnstats();
    if (strcmp(argv[1], "barrier-turns") == 0)
        return mode_barrier_turns();
    if (strcmp(argv[1], "barrier-retry") == 0)
        return mode_barrier_retry();
    if (strcmp(argv[1], "take") == 0)
        return mode_take();
    if (strcmp(argv[1], "fnstats-off") == 0)
        return mode_fnstats_off();
    fprintf(stderr, "itest: unknown mode %s\n", argv[1]);
    return 2;
}
