/*
 * async: multi-rank tests of asynchronous calls, futures, deferred
 * responses and nested calls, run by run_async_<provider>.sh through
 * fabrpc-run. Usage: async MODE
 *
 *   ooo       2 ranks. Rank 0 makes 10,000 async calls (at most 1000 in
 *             flight) to rank 1's "slow" pool handler, which sleeps 0-5 ms;
 *             half are collected with frpc_wait_any, half oldest first.
 *             Every answer matches its request; answers came out of order.
 *   stress    every rank runs 4 threads of STRESS_CALLS (default 25000)
 *             mixed sync and async calls (windows up to 32) to random ranks,
 *             pool and inline handlers, payloads up to 64 KiB, all checked;
 *             then the stats add up on each rank and across ranks.
 *   deferred  rank 0 keeps each round's pushes and answers them all with
 *             their sum once every worker pushed (3 rounds, answered from
 *             the last handler or from another thread); a request never
 *             answered times out on the caller, and shutdown still ends.
 *   nested    3 ranks, FABRPC_THREADS=2: a pool handler calls other ranks
 *             (sync, async + wait_all, async + then from an inline handler),
 *             an inline handler calls its own rank, and recursive chains on
 *             one rank end with FRPC_EAGAIN at the nesting limit.
 *   futures   then/cancel/free racing with answers under load (every
 *             callback once, cancels won or lost, never another call's
 *             answer), then wait_any/wait_all over success, remote error,
 *             timeout and cancellation.
 *
 * Prints "ok: ..." per check; exits 1 at the first failure.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "async_util.h"

/* ---- handlers shared by the modes ---------------------------------- */

/* echo: checks the args, answers with the reply message (async_util.h). */
static void echo(frpc_request *req, void *user)
{
    size_t len;
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
    CHECK(rc == 0, "respond: %s", frpc_strerror(rc));
}

/* slow: echo after 0-5 ms, a pause derived from the args. */
static void slow(frpc_request *req, void *user)
{
    size_t len;
    uint64_t seed;
    if (au_msg_check(frpc_request_args(req, &len), len, &seed))
        au_sleep_us((unsigned)(au_mix(seed) % 5001));
    echo(req, user);
}

/* A sync call with a checked message; the echo answer is checked. */
static void sync_echo(int dst, const char *fn, uint64_t seed, size_t len)
{
    frpc_result res;
    void *args = au_msg(seed, len);
    int rc = frpc_call(agent, dst, fn, args, len, CALL_TIMEOUT_MS, &res);
    free(args);
    CHECK(rc == 0, "call %s on %d (%zu B): %s", fn, dst, len,
          au_why(rc, res.error));
    CHECK(au_reply_ok(res.data, res.len, seed, len),
          "call %s on %d: wrong reply (%zu B)", fn, dst, res.len);
    frpc_result_clear(&res);
}

/* ---- ooo ------------------------------------------------------------- */

#define OOO_CALLS 10000
#define OOO_WINDOW 1000

static uint64_t ooo_seed(int k) { return au_mix(0x000000100000000ull + k); }
static size_t ooo_len(int k) { return au_len(au_mix(~(uint64_t)k), 70000); }

static int mode_ooo(void)
{
    static frpc_future *win[OOO_WINDOW];
    static int key[OOO_WINDOW];
    au_start();
    CHECK(nranks == 2, "ooo needs 2 ranks");
    au_register("slow", slow, NULL, 0);
    au_barrier();
    if (me == 0) {
        frpc_stats s0 = au_quiet_stats();
        int next = 0, nin = 0, done = 0, early = 0, kept = 0;
        double t0 = au_now_ms();
        /* Half collected with wait_any, the window kept unordered. */
        while (done < OOO_CALLS / 2) {
            while (nin < OOO_WINDOW && next < OOO_CALLS / 2) {
                key[nin] = next;
                win[nin++] = au_async(1, "slow", ooo_seed(next),
                                      ooo_len(next), CALL_TIMEOUT_MS);
                next++;
            }
            size_t idx = OOO_WINDOW;
            int rc = frpc_wait_any(win, (size_t)nin, CALL_TIMEOUT_MS, &idx);
            CHECK(rc == 0 && idx < (size_t)nin, "wait_any: %s",
                  frpc_strerror(rc));
            au_check_echo(win[idx], ooo_seed(key[idx]), ooo_len(key[idx]),
                          "ooo wait_any");
            for (int i = 0; i < nin; i++)
                if (key[i] < key[idx]) {
                    early++; /* done before an older call */
                    break;
                }
            frpc_future_free(win[idx]);
            win[idx] = win[--nin];
            key[idx] = key[nin];
            done++;
        }
        /* The other half collected oldest first (a ring): answers that
         * come before the oldest's wait in their futures. */
        int head = 0;
        while (done < OOO_CALLS) {
            while (nin < OOO_WINDOW && next < OOO_CALLS) {
                int slot = (head + nin++) % OOO_WINDOW;
                key[slot] = next;
                win[slot] = au_async(1, "slow", ooo_seed(next),
                                     ooo_len(next), CALL_TIMEOUT_MS);
                next++;
            }
            for (int i = 1; i < nin; i++)
                if (frpc_future_test(win[(head + i) % OOO_WINDOW])) {
                    kept++;
                    break;
                }
            int rc = frpc_future_wait(win[head], CALL_TIMEOUT_MS);
            CHECK(rc == 0, "wait oldest: %s", frpc_strerror(rc));
            au_check_echo(win[head], ooo_seed(key[head]), ooo_len(key[head]),
                          "ooo oldest");
            frpc_future_free(win[head]);
            head = (head + 1) % OOO_WINDOW;
            nin--;
            done++;
        }
        frpc_stats s1 = au_quiet_stats();
        CHECK(s1.calls_ok - s0.calls_ok == OOO_CALLS, "calls_ok grew by %llu",
              (unsigned long long)(s1.calls_ok - s0.calls_ok));
        CHECK(early > 0 && kept > 0, "answers never out of order (%d, %d)",
              early, kept);
        printf("ok: %d async calls in %.0f ms, all answers match; %d "
               "completed before an older call, %d times a younger one was "
               "done before the oldest\n", OOO_CALLS, au_now_ms() - t0, early,
               kept);
    }
    au_barrier();
    au_finish();
    return 0;
}

/* ---- stress ------------------------------------------------------------ */

#define STRESS_THREADS 4
#define STRESS_WINDOW 32

typedef struct stress_thread {
    pthread_t tid;
    int id;
    long calls;
    uint64_t started, completed, ok, async_calls;
} stress_thread;

typedef struct stress_slot {
    frpc_future *f;
    uint64_t seed;
    size_t len;
} stress_slot;

static void stress_collect(stress_thread *t, stress_slot *s)
{
    if (s->seed & 1) { /* half waited and read in place */
        int rc = frpc_future_wait(s->f, CALL_TIMEOUT_MS);
        CHECK(rc == 0, "stress wait: %s", frpc_strerror(rc));
        au_check_echo(s->f, s->seed, s->len, "stress async");
    } else { /* half taken out of the future */
        frpc_result res = {0};
        int rc = frpc_future_wait(s->f, CALL_TIMEOUT_MS);
        CHECK(rc == 0 && frpc_future_take(s->f, &res) == 0,
              "stress take: %s", au_why(rc, res.error));
        CHECK(au_reply_ok(res.data, res.len, s->seed, s->len),
              "stress take: wrong reply (%zu B)", res.len);
        CHECK(frpc_future_data(s->f, NULL) == NULL, "data left after take");
        frpc_result_clear(&res);
    }
    frpc_future_free(s->f);
    t->completed++;
    t->ok++;
}

static void *stress_main(void *arg)
{
    stress_thread *t = arg;
    stress_slot ring[STRESS_WINDOW];
    uint64_t rs = au_mix(((uint64_t)me << 32) | (uint64_t)t->id);
    int window = 1 + (int)(au_rand(&rs) % STRESS_WINDOW), head = 0, nin = 0;
    for (long i = 0; i < t->calls; i++) {
        uint64_t r = au_rand(&rs);
        int dst = (int)(r % (uint64_t)nranks);
        const char *fn = (r >> 8) & 1 ? "echo" : "echo_inline";
        uint64_t seed = au_rand(&rs);
        size_t len = au_len(au_rand(&rs), 65536);
        t->started++;
        if ((r >> 16) % 3 == 0) {
            sync_echo(dst, fn, seed, len);
            t->completed++;
            t->ok++;
            continue;
        }
        if (nin == window) {
            stress_collect(t, &ring[head]);
            head = (head + 1) % STRESS_WINDOW;
            nin--;
        }
        stress_slot *s = &ring[(head + nin++) % STRESS_WINDOW];
        s->seed = seed;
        s->len = len;
        s->f = au_async(dst, fn, seed, len, CALL_TIMEOUT_MS);
        t->async_calls++;
    }
    for (; nin > 0; nin--, head = (head + 1) % STRESS_WINDOW)
        stress_collect(t, &ring[head]);
    return NULL;
}

static atomic_uint_fast64_t report_ok, report_answered, reports;

/* report (rank 0): adds a rank's calls_ok and requests_answered. */
static void report(frpc_request *req, void *user)
{
    size_t len;
    uint64_t v[2];
    const void *args = frpc_request_args(req, &len);
    if (len != sizeof(v)) {
        frpc_respond_error(req, 99, "report: bad length");
        return;
    }
    memcpy(v, args, sizeof(v));
    atomic_fetch_add(&report_ok, v[0]);
    atomic_fetch_add(&report_answered, v[1]);
    atomic_fetch_add(&reports, 1);
    frpc_respond(req, NULL, 0);
}

static int mode_stress(void)
{
    stress_thread th[STRESS_THREADS];
    const char *env = getenv("STRESS_CALLS");
    long calls = env ? strtol(env, NULL, 10) : 25000;
    au_start();
    au_register("echo", echo, NULL, 0);
    au_register("echo_inline", echo, NULL, FRPC_INLINE);
    au_register("report", report, NULL, 0);
    au_barrier();
    double t0 = au_now_ms();
    for (int i = 0; i < STRESS_THREADS; i++) {
        th[i] = (stress_thread){.id = i, .calls = calls};
        CHECK(pthread_create(&th[i].tid, NULL, stress_main, &th[i]) == 0,
              "pthread_create");
    }
    uint64_t ok = 0, async_calls = 0;
    for (int i = 0; i < STRESS_THREADS; i++) {
        pthread_join(th[i].tid, NULL);
        CHECK(th[i].started == (uint64_t)calls &&
                  th[i].completed == th[i].started,
              "thread %d: %llu started, %llu completed", i,
              (unsigned long long)th[i].started,
              (unsigned long long)th[i].completed);
        ok += th[i].ok;
        async_calls += th[i].async_calls;
    }
    printf("ok: %d threads x %ld calls (%llu async) in %.0f ms, all "
           "checked\n", STRESS_THREADS, calls,
           (unsigned long long)async_calls, au_now_ms() - t0);
    au_barrier(); /* every rank's calls are answered */
    frpc_stats s = au_quiet_stats();
    CHECK(s.calls_ok == ok, "calls_ok %llu, but %llu calls succeeded",
          (unsigned long long)s.calls_ok, (unsigned long long)ok);
    printf("ok: stats add up: %llu calls ok, %llu requests answered\n",
           (unsigned long long)s.calls_ok,
           (unsigned long long)s.requests_answered);
    au_barrier(); /* rank 0 read its stats before the reports come */
    uint64_t v[2] = {s.calls_ok, s.requests_answered};
    if (me != 0) {
        frpc_result res;
        int rc = frpc_call(agent, 0, "report", v, sizeof(v), CALL_TIMEOUT_MS,
                           &res);
        CHECK(rc == 0, "report: %s", au_why(rc, res.error));
        frpc_result_clear(&res);
    }
    au_barrier();
    if (me == 0) {
        uint64_t sum_ok = v[0] + atomic_load(&report_ok);
        uint64_t sum_ans = v[1] + atomic_load(&report_answered);
        CHECK(atomic_load(&reports) == (uint64_t)nranks - 1, "%llu reports",
              (unsigned long long)atomic_load(&reports));
        CHECK(sum_ok == sum_ans, "all ranks: %llu calls ok, %llu answered",
              (unsigned long long)sum_ok, (unsigned long long)sum_ans);
        printf("ok: all ranks: %llu calls ok == %llu requests answered\n",
               (unsigned long long)sum_ok, (unsigned long long)sum_ans);
    }
    au_finish();
    return 0;
}

/* ---- deferred --------------------------------------------------------- */

#define ROUNDS 3
#define ROUND_BASE 1000000u
#define MAX_WORKERS 64

static pthread_mutex_t dlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dcond = PTHREAD_COND_INITIALIZER;
static frpc_request *kept[ROUNDS][MAX_WORKERS];
static int nkept[ROUNDS], handed_off[ROUNDS];
static uint64_t dsum[ROUNDS], dsources[ROUNDS];
static frpc_request *never[MAX_WORKERS]; /* "blackhole": never answered */
static int nnever;

static size_t round_reply_len(int r) { return r == 2 ? 100000 : 64; }
static size_t push_len(int rank, int r) { return 8 + rank * 100 + r * 30000; }

/* Answers every push of round r with a message seeded with their sum. */
static void answer_round(int r)
{
    void *reply = au_msg(dsum[r], round_reply_len(r));
    for (int i = 0; i < nkept[r]; i++) {
        int rc = frpc_respond(kept[r][i], reply, round_reply_len(r));
        CHECK(rc == 0, "deferred respond: %s", frpc_strerror(rc));
    }
    free(reply);
}

/* push: kept until the round is complete; round 1 is answered by another
 * thread, the others by the handler that received the last push. */
static void push(frpc_request *req, void *user)
{
    size_t len;
    uint64_t v;
    int src = frpc_request_source(req), last = 0;
    if (!au_msg_check(frpc_request_args(req, &len), len, &v) ||
        v / ROUND_BASE >= ROUNDS || len != push_len(src, v / ROUND_BASE)) {
        frpc_respond_error(req, 99, "push: wrong args");
        return;
    }
    int r = (int)(v / ROUND_BASE);
    pthread_mutex_lock(&dlock);
    CHECK(!(dsources[r] & (1ull << src)), "two pushes from %d in round %d",
          src, r);
    CHECK(nkept[r] < MAX_WORKERS, "too many pushes");
    dsources[r] |= 1ull << src;
    kept[r][nkept[r]++] = req;
    dsum[r] += v;
    if (nkept[r] == nranks - 1) {
        last = r != 1;
        handed_off[r] = r == 1;
        pthread_cond_broadcast(&dcond);
    }
    pthread_mutex_unlock(&dlock);
    if (last)
        answer_round(r);
}

static void *answerer(void *arg)
{
    pthread_mutex_lock(&dlock);
    while (!handed_off[1])
        pthread_cond_wait(&dcond, &dlock);
    pthread_mutex_unlock(&dlock);
    answer_round(1);
    return NULL;
}

static void blackhole(frpc_request *req, void *user)
{
    pthread_mutex_lock(&dlock);
    CHECK(nnever < MAX_WORKERS, "too many blackhole calls");
    never[nnever++] = req;
    pthread_mutex_unlock(&dlock);
}

static int mode_deferred(void)
{
    pthread_t ans;
    au_start();
    CHECK(nranks >= 2 && nranks <= MAX_WORKERS, "deferred needs 2..64 ranks");
    au_register("push", push, NULL, 0);
    au_register("push_inline", push, NULL, FRPC_INLINE);
    au_register("blackhole", blackhole, NULL, 0);
    if (me == 0)
        CHECK(pthread_create(&ans, NULL, answerer, NULL) == 0, "thread");
    au_barrier();
    if (me != 0) {
        for (int r = 0; r < ROUNDS; r++) {
            uint64_t want = 0;
            for (int w = 1; w < nranks; w++)
                want += (uint64_t)r * ROUND_BASE + (uint64_t)w * 1000 + 7;
            uint64_t v = (uint64_t)r * ROUND_BASE + (uint64_t)me * 1000 + 7;
            void *args = au_msg(v, push_len(me, r));
            frpc_result res;
            int rc = frpc_call(agent, 0, r == 2 ? "push_inline" : "push",
                               args, push_len(me, r), CALL_TIMEOUT_MS, &res);
            free(args);
            CHECK(rc == 0, "push round %d: %s", r, au_why(rc, res.error));
            uint64_t got;
            CHECK(res.len == round_reply_len(r) &&
                      au_msg_check(res.data, res.len, &got) && got == want,
                  "round %d: wrong sum reply (%zu B)", r, res.len);
            frpc_result_clear(&res);
            printf("ok: round %d answered with the sum %llu\n", r,
                   (unsigned long long)want);
        }
        frpc_result res;
        void *args = au_msg(me, 16);
        double t0 = au_now_ms();
        int rc = frpc_call(agent, 0, "blackhole", args, 16, 500, &res);
        CHECK(rc == FRPC_ETIMEDOUT, "never answered: %s, want timeout",
              frpc_err_name(rc));
        frpc_result_clear(&res);
        frpc_future *f = au_async(0, "blackhole", me, 16, 300);
        rc = frpc_future_wait(f, CALL_TIMEOUT_MS);
        CHECK(rc == FRPC_ETIMEDOUT, "async never answered: %s",
              frpc_err_name(rc));
        frpc_future_free(f);
        free(args);
        printf("ok: never answered: sync and async calls timed out "
               "(%.0f ms)\n", au_now_ms() - t0);
    }
    au_barrier();
    if (me == 0) {
        pthread_join(ans, NULL);
        CHECK(nnever == 2 * (nranks - 1), "%d blackhole requests", nnever);
        printf("ok: rank 0 keeps %d requests never answered\n", nnever);
    }
    au_finish(); /* rank 0: releases the requests it kept */
    return 0;
}

/* ---- nested --------------------------------------------------------- */

#define RANK_A 0
#define RANK_B 1
#define RANK_C 2

/* Calls C and A (sync) from a pool handler, then answers like echo. */
static void mid(frpc_request *req, void *user)
{
    size_t len;
    uint64_t seed;
    CHECK(au_msg_check(frpc_request_args(req, &len), len, &seed), "mid args");
    sync_echo(RANK_C, "echo", au_mix(seed + 1), 100);
    sync_echo(RANK_A, "echo", au_mix(seed + 2), 5000);
    echo(req, user);
}

/* The same with async calls and wait_all. */
static void mid_async(frpc_request *req, void *user)
{
    size_t len;
    uint64_t seed;
    CHECK(au_msg_check(frpc_request_args(req, &len), len, &seed), "args");
    frpc_future *f[2] = {
        au_async(RANK_C, "echo", au_mix(seed + 1), 70000, CALL_TIMEOUT_MS),
        au_async(RANK_A, "echo_inline", au_mix(seed + 2), 10,
                 CALL_TIMEOUT_MS)};
    int rc = frpc_wait_all(f, 2, CALL_TIMEOUT_MS);
    CHECK(rc == 0, "mid_async wait_all: %s", frpc_strerror(rc));
    au_check_echo(f[0], au_mix(seed + 1), 70000, "mid_async to C");
    au_check_echo(f[1], au_mix(seed + 2), 10, "mid_async to A");
    frpc_future_free(f[0]);
    frpc_future_free(f[1]);
    echo(req, user);
}

typedef struct then_ctx {
    frpc_request *req;
    uint64_t seed;
} then_ctx;

static void mid_then_done(frpc_future *f, void *user)
{
    then_ctx *c = user;
    au_check_echo(f, au_mix(c->seed + 1), 300, "mid_then's call to C");
    frpc_future_free(f);
    echo(c->req, NULL); /* a deferred answer from the callback */
    free(c);
}

/* Inline: an async call to C whose callback answers the request. */
static void mid_then(frpc_request *req, void *user)
{
    size_t len;
    then_ctx *c = malloc(sizeof(*c));
    CHECK(c && au_msg_check(frpc_request_args(req, &len), len, &c->seed),
          "mid_then args");
    c->req = req;
    frpc_future *f = au_async(RANK_C, "echo", au_mix(c->seed + 1), 300,
                              CALL_TIMEOUT_MS);
    int rc = frpc_future_then(f, mid_then_done, c);
    CHECK(rc == 0, "then: %s", frpc_strerror(rc));
}

/* Inline: calls its own rank's pool and inline echo. */
static void inl_self(frpc_request *req, void *user)
{
    size_t len;
    uint64_t seed;
    CHECK(au_msg_check(frpc_request_args(req, &len), len, &seed), "args");
    sync_echo(me, "echo", au_mix(seed + 3), 2000);
    sync_echo(me, "echo_inline", au_mix(seed + 4), 20);
    echo(req, user);
}

/*
 * deep / ideep (user != NULL: report as remote errors): calls its own rank
 * with depth + 1 until a call fails, and reports what the deepest handler
 * got: a 16-byte message seeded (-status) << 32 | depth, or an error with
 * remote_code = status, passed up unchanged. The args are seeded chain <<
 * 32 | depth: a request of a chain that is over (one a cancelled call left
 * behind) is answered at once, so no stray chain goes on.
 */
static atomic_uint_fast64_t cur_chain;

static void deep(frpc_request *req, void *user)
{
    size_t len;
    uint64_t a;
    char msg[128];
    frpc_result res = {0};
    CHECK(au_msg_check(frpc_request_args(req, &len), len, &a), "deep args");
    uint64_t d = (uint32_t)a;
    int rc = FRPC_EINVAL;
    if (a >> 32 == atomic_load(&cur_chain) && d < 1000) {
        void *args = au_msg(a + 1, 16);
        rc = frpc_call(agent, me, frpc_request_function(req), args, 16,
                       CALL_TIMEOUT_MS, &res);
        free(args);
    }
    if (rc == 0) {
        frpc_respond(req, res.data, res.len); /* the bottom's report */
    } else if (rc == FRPC_EREMOTE) {
        frpc_respond_error(req, res.remote_code, res.error);
    } else if (user) {
        snprintf(msg, sizeof(msg), "depth %llu: %s", (unsigned long long)d,
                 frpc_err_name(rc));
        frpc_respond_error(req, rc, msg);
    } else {
        void *rep = au_msg((uint64_t)(-rc) << 32 | d, 16);
        frpc_respond(req, rep, 16);
        free(rep);
    }
    frpc_result_clear(&res);
}

/* Runs chain number id of fn on this rank; returns the depth where it
 * ended, which must be with FRPC_EAGAIN. */
static int chain(const char *fn, uint64_t id, int want_remote)
{
    frpc_result res;
    uint64_t got;
    void *args = au_msg(id << 32, 16);
    atomic_store(&cur_chain, id);
    int rc = frpc_call(agent, me, fn, args, 16, CALL_TIMEOUT_MS, &res);
    atomic_store(&cur_chain, 0);
    free(args);
    if (want_remote) {
        CHECK(rc == FRPC_EREMOTE && res.remote_code == FRPC_EAGAIN,
              "%s: %s, remote code %s, want FRPC_EREMOTE with FRPC_EAGAIN",
              fn, frpc_err_name(rc), frpc_err_name(res.remote_code));
        unsigned long long d = 0;
        CHECK(res.error && sscanf(res.error, "depth %llu", &d) == 1,
              "message \"%s\"", res.error ? res.error : "");
        frpc_result_clear(&res);
        return (int)d;
    }
    CHECK(rc == 0 && res.len == 16 && au_msg_check(res.data, 16, &got),
          "%s: %s", fn, au_why(rc, res.error));
    CHECK(-(int)(got >> 32) == FRPC_EAGAIN, "%s ended with %s, want "
          "FRPC_EAGAIN", fn, frpc_err_name(-(int)(got >> 32)));
    frpc_result_clear(&res);
    return (int)(uint32_t)got;
}

static int mode_nested(void)
{
    const char *env = getenv("FABRPC_THREADS");
    int threads = env ? atoi(env) : 4;
    au_start();
    CHECK(nranks == 3, "nested needs 3 ranks");
    au_register("echo", echo, NULL, 0);
    au_register("echo_inline", echo, NULL, FRPC_INLINE);
    au_register("mid", mid, NULL, 0);
    au_register("mid_async", mid_async, NULL, 0);
    au_register("mid_then", mid_then, NULL, FRPC_INLINE);
    au_register("inl_self", inl_self, NULL, FRPC_INLINE);
    au_register("deep", deep, NULL, 0);
    au_register("deep_err", deep, "", 0);
    au_register("ideep", deep, NULL, FRPC_INLINE);
    au_barrier();
    if (me == RANK_A) {
        for (int i = 0; i < 20; i++) {
            sync_echo(RANK_B, "mid", 100 + i, 40 + i);
            sync_echo(RANK_B, "mid_async", 200 + i, 3000);
            sync_echo(RANK_B, "mid_then", 300 + i, 8);
        }
        printf("ok: pool handler on B calls C and A (sync, async + "
               "wait_all); inline handler's async call answered by then\n");
        for (int i = 0; i < 20; i++) {
            sync_echo(RANK_B, "inl_self", 400 + i, 64);
            sync_echo(RANK_A, "inl_self", 500 + i, 64);
        }
        printf("ok: inline handler calls its own rank (on B and on A)\n");
        int d = chain("deep", 1, 0);
        CHECK(d == threads - 1, "pool chain ended at depth %d, want %d", d,
              threads - 1);
        d = chain("deep_err", 2, 1);
        CHECK(d == threads - 1, "pool chain (errors) ended at depth %d", d);
        printf("ok: pool chain on one rank ends with FRPC_EAGAIN at depth %d "
               "(%d threads), as status and as remote error\n", d, threads);
        d = chain("ideep", 3, 0);
        CHECK(d >= FRPC_MAX_INLINE_DEPTH - 1 && d <= FRPC_MAX_INLINE_DEPTH,
              "inline chain ended at depth %d, want about %d", d,
              FRPC_MAX_INLINE_DEPTH);
        printf("ok: inline chain ends with FRPC_EAGAIN at depth %d\n", d);
        sync_echo(RANK_B, "mid", 999, 8); /* all still works */
        printf("ok: calls work after the chains\n");
    }
    au_barrier();
    au_finish();
    return 0;
}

/* ---- futures ------------------------------------------------------------ */

#include "async_futures.h"

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(void);
    } modes[] = {{"ooo", mode_ooo},           {"stress", mode_stress},
                 {"deferred", mode_deferred}, {"nested", mode_nested},
                 {"futures", mode_futures}};
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; argc == 2 && i < sizeof(modes) / sizeof(modes[0]); i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            return modes[i].fn();
    fprintf(stderr, "usage: async ooo|stress|deferred|nested|futures\n");
    return 2;
}
