/*
 * Lent async calls (frpc_call_async_lent), 2 ranks: rank 0 calls rank 1,
 * whose handlers check every byte of the args they get (a wrong byte is
 * counted at rank 1 and must stay 0). Phases, in one run:
 *
 *   window    LENT_CALLS calls (default 200) of 100 B (copied) to
 *             LENT_MAX (16 MiB) args, 4 in flight through frpc_wait_any;
 *             each answer checked, its args overwritten the moment its
 *             future is done; frpc_stats.zerocopy_sent grows by exactly
 *             the number of args at or over zerocopy_min.
 *   then      callbacks on lent futures run once each, and see them done.
 *   cancel    lent calls cancelled at once end done, 0 or FRPC_ECANCELED.
 *   timeout   rank 1's progress thread sleeps in an inline handler for
 *             HOLD_MS: lent calls with a 100 ms timeout end
 *             FRPC_ETIMEDOUT. Over shm they are done at their timeout
 *             (the args taken back; rank 1 throws away late copies, so
 *             its check sees no byte written over them after); elsewhere
 *             they are not done (test 0, error FRPC_EINPROGRESS; a
 *             cancel is 1 and changes nothing) while rank 1 cannot have
 *             read their args, and done once it polls again. Up to 3 tries: the hold's own
 *             answer may leave only when the handler returns (coalesced
 *             with another frame of that poll), and then there is no hold
 *             left to judge (a CI run once saw the calls answered).
 *   free      lent futures freed at once, their args kept until shutdown
 *             (sanitizers and valgrind see any late touch).
 *   shutdown  rank 0 shuts down at once while rank 1 holds its poll with a
 *             lent call of rank 0's unread: the call's callback runs once,
 *             before frpc_shutdown returns, with FRPC_ESHUTDOWN.
 */
/* Not every helper is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "async_util.h"
#pragma GCC diagnostic pop

#define W 4
#define HOLD_MS 3000
#define SMALL_TIMEOUT_MS 100

static atomic_uint_fast64_t wrong_args; /* rank 1 */
static size_t lent_min;                 /* zerocopy_min in force */

/* ---- rank 1 ------------------------------------------------------------ */

/* echo, counting args that fail the check (their answer may be dropped:
 * a cancelled or timed-out call). */
static void checked_echo(frpc_request *req, void *user)
{
    uint64_t seed;
    if (!au_req_seed(req, &seed))
        atomic_fetch_add(&wrong_args, 1);
    echo(req, user);
}

/* Inline: answers at once, then keeps this rank's progress thread (and so
 * every poll of this rank) for HOLD_MS. */
static void hold_poll(frpc_request *req, void *user)
{
    (void)user;
    frpc_respond(req, NULL, 0);
    au_sleep_us(HOLD_MS * 1000);
}

/* ---- rank 0 ------------------------------------------------------------ */

typedef struct lent_call {
    frpc_future *f;
    void *args;
    size_t len;
    uint64_t seed;
} lent_call;

static void start(lent_call *c, uint64_t seed, size_t len, int timeout_ms)
{
    c->seed = seed;
    c->len = len;
    c->args = au_msg(seed, len);
    int rc = frpc_call_async_lent(agent, 1, "checked_echo", c->args, len,
                                  timeout_ms, &c->f);
    CHECK(rc == 0 && c->f, "call_async_lent (%zu B): %s", len,
          frpc_strerror(rc));
}

/* After c's future is done: the args are the caller's again. */
static void end(lent_call *c)
{
    CHECK(frpc_future_test(c->f) == 1, "ended before done");
    memset(c->args, 0xa5, c->len); /* a read from now on would see this */
    free(c->args);
    frpc_future_free(c->f);
    c->f = NULL;
}

static uint64_t zerocopy_sent(void)
{
    frpc_stats st;
    CHECK(frpc_get_stats(agent, &st) == 0, "frpc_get_stats");
    return st.zerocopy_sent;
}

static size_t window_len(long k, size_t max)
{
    if (k % 5 == 0)
        return 100; /* copied */
    uint64_t r = au_mix((uint64_t)k);
    return lent_min + (size_t)(r % (max - lent_min + 1)) + (size_t)(k % 7);
}

static void phase_window(long calls, size_t max)
{
    lent_call c[W] = {0};
    frpc_future *f[W] = {0};
    uint64_t base = zerocopy_sent(), lent = 0;
    long started = 0, done = 0;

    while (done < calls) {
        for (int j = 0; j < W && started < calls; j++)
            if (!c[j].f) {
                size_t len = window_len(started, max);
                lent += len >= lent_min;
                start(&c[j], 0x4c454e5400000000ull + (uint64_t)started, len,
                      CALL_TIMEOUT_MS);
                f[j] = c[j].f;
                started++;
            }
        size_t i;
        int rc = frpc_wait_any(f, W, CALL_TIMEOUT_MS, &i);
        CHECK(rc == 0, "wait_any: %s", frpc_strerror(rc));
        au_check_echo(c[i].f, c[i].seed, c[i].len, "lent call");
        end(&c[i]);
        f[i] = NULL;
        done++;
    }
    /* counted when the callee's RNDV_DONE arrives: give it a moment */
    uint64_t got = 0;
    for (int i = 0; i < 200 && (got = zerocopy_sent() - base) < lent; i++)
        au_sleep_us(10000);
    CHECK(got == lent, "zerocopy_sent grew by %llu, want %llu",
          (unsigned long long)got, (unsigned long long)lent);
    printf("ok: %ld lent async calls up to %zu B (%llu lent)\n", calls, max,
           (unsigned long long)lent);
}

static atomic_int then_ran, then_bad;

static void on_then(frpc_future *f, void *user)
{
    lent_call *c = user;
    if (c->f != f || frpc_future_test(f) != 1 ||
        frpc_future_error(f, NULL, NULL) != 0)
        atomic_fetch_add(&then_bad, 1);
    atomic_fetch_add(&then_ran, 1);
}

static void phase_then(void)
{
    enum { N = 8 };
    lent_call c[N];
    frpc_future *f[N];
    for (int i = 0; i < N; i++) {
        start(&c[i], 0x5448454e00000000ull + (uint64_t)i, lent_min + 4093u * i,
              CALL_TIMEOUT_MS);
        f[i] = c[i].f;
        CHECK(frpc_future_then(f[i], on_then, &c[i]) == 0, "then");
    }
    CHECK(frpc_wait_all(f, N, CALL_TIMEOUT_MS) == 0, "wait_all");
    for (int i = 0; i < 2000 && atomic_load(&then_ran) < N; i++)
        au_sleep_us(1000); /* the pool may still be running the last */
    CHECK(atomic_load(&then_ran) == N && atomic_load(&then_bad) == 0,
          "callbacks: %d ran, %d saw their future not done or failed",
          atomic_load(&then_ran), atomic_load(&then_bad));
    for (int i = 0; i < N; i++)
        end(&c[i]);
    printf("ok: %d callbacks on lent futures, each saw it done\n", N);
}

static void phase_cancel(void)
{
    enum { N = 16 };
    lent_call c[N];
    frpc_future *f[N];
    int cancelled = 0;
    for (int i = 0; i < N; i++) {
        start(&c[i], 0x43414e4300000000ull + (uint64_t)i, (1u << 20) + 1,
              CALL_TIMEOUT_MS);
        f[i] = c[i].f;
        int rc = frpc_future_cancel(f[i]);
        CHECK(rc == 0 || rc == 1, "cancel: %s", frpc_strerror(rc));
        cancelled += rc == 0;
    }
    CHECK(frpc_wait_all(f, N, CALL_TIMEOUT_MS) == 0, "wait_all");
    for (int i = 0; i < N; i++) {
        int st = frpc_future_error(f[i], NULL, NULL);
        CHECK(st == 0 || st == FRPC_ECANCELED, "cancelled call: %s",
              frpc_err_name(st));
        end(&c[i]);
    }
    printf("ok: %d lent calls cancelled at once (%d before their answer), "
           "all done\n", N, cancelled);
}

/* One try of the timeout phase: 1 if it was judged, 0 if the hold's
 * answer came late. An inline handler's answer may wait for it to return
 * (it can share a message with the poll's other answers to us: the header's
 * FRPC_INLINE), and then the hold is over before our calls start and they
 * may well be answered in time: nothing to judge, the caller tries again. */
static int try_timeout(void)
{
    enum { N = 4 };
    lent_call c[N];
    frpc_future *f[N];
    double t0 = au_now_ms();
    int rc = frpc_call(agent, 1, "hold_poll", NULL, 0, CALL_TIMEOUT_MS, NULL);
    CHECK(rc == 0, "hold_poll: %s", frpc_strerror(rc));
    double held = au_now_ms(); /* rank 1 polls nothing till held + HOLD_MS */
    for (int i = 0; i < N; i++) {
        start(&c[i], 0x484f4c4400000000ull + (uint64_t)i, (1u << 20) + 3,
              SMALL_TIMEOUT_MS);
        f[i] = c[i].f;
    }
    int judged = held - t0 < HOLD_MS / 4;
    /* Over shm a call that timed out takes its args back at once (the
     * callee copies them itself and throws away a late copy): done at its
     * timeout. Elsewhere the provider may serve a read of them: not done
     * until the callee polls again. */
    int shm = strcmp(frpc_provider(agent), "shm") == 0;
    au_sleep_us((SMALL_TIMEOUT_MS + 400) * 1000);
    /* The look only while well inside the hold (a loaded machine may not
     * be). */
    double looked = au_now_ms();
    if (judged && looked - held < HOLD_MS / 2) {
        for (int i = 0; i < N; i++) {
            if (shm) {
                CHECK(frpc_future_test(f[i]) == 1,
                      "over shm, a lent call not done past its timeout");
                au_expect_status(f[i], FRPC_ETIMEDOUT, "lent call timed out");
                continue;
            }
            CHECK(frpc_future_test(f[i]) == 0,
                  "lent call done while the callee could not have read it");
            au_expect_status(f[i], FRPC_EINPROGRESS, "lent call in the hold");
            /* fabrpc.h: cancel is 1 once the call ended (its timeout
             * stands), and the future still waits for its args. */
            int cr = frpc_future_cancel(f[i]);
            CHECK(cr == 1, "cancel of a lent call past its timeout: %d, "
                  "want 1", cr);
            CHECK(frpc_future_test(f[i]) == 0,
                  "a lent call done by a cancel while the callee could "
                  "not have read it");
        }
    }
    CHECK(frpc_wait_all(f, N, CALL_TIMEOUT_MS) == 0, "wait_all");
    double done = au_now_ms();
    for (int i = 0; i < N; i++) {
        int st = frpc_future_error(f[i], NULL, NULL);
        CHECK(st == FRPC_ETIMEDOUT || (!judged && st == 0),
              "lent call %d past its timeout: %s, want FRPC_ETIMEDOUT (hold "
              "answered after %.0f ms, not-done looked at %.0f ms and done "
              "%.0f ms after it)", i, frpc_err_name(st), held - t0,
              looked - held, done - held);
        end(&c[i]);
    }
    if (!judged) {
        printf("note: the hold's answer came after %.0f ms; not judged, "
               "trying again\n", held - t0);
        return 0;
    }
    CHECK(shm || done - held >= HOLD_MS - 100,
          "lent calls done %.0f ms into a %d ms hold", done - held, HOLD_MS);
    printf("ok: %d lent calls timed out, done %.0f ms later (hold %d ms)\n",
           N, done - held - SMALL_TIMEOUT_MS, HOLD_MS);
    return 1;
}

static void phase_timeout(void)
{
    for (int i = 0; i < 3; i++)
        if (try_timeout())
            return;
    printf("note: the hold's answer came late 3 times; timeout not judged\n");
}

static atomic_int last_ran, last_status;

static void on_last(frpc_future *f, void *user)
{
    (void)user;
    atomic_store(&last_status, frpc_future_test(f)
                                   ? frpc_future_error(f, NULL, NULL)
                                   : FRPC_EINPROGRESS);
    atomic_fetch_add(&last_ran, 1);
}

/* The end of rank 0: see "shutdown" above. */
static void phase_shutdown(void)
{
    lent_call c;
    int rc = frpc_call(agent, 1, "hold_poll", NULL, 0, CALL_TIMEOUT_MS, NULL);
    CHECK(rc == 0, "hold_poll: %s", frpc_strerror(rc));
    start(&c, 0x53485554ull, (1u << 20) + 7, CALL_TIMEOUT_MS);
    CHECK(frpc_future_then(c.f, on_last, &c) == 0, "then");
    rc = frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 5000);
    CHECK(atomic_load(&last_ran) == 1, "callback ran %d times by the end "
          "of frpc_shutdown (%s)", atomic_load(&last_ran), frpc_strerror(rc));
    CHECK(atomic_load(&last_status) == FRPC_ESHUTDOWN,
          "callback saw %s, want FRPC_ESHUTDOWN",
          frpc_err_name(atomic_load(&last_status)));
    frpc_future_free(c.f); /* allowed after frpc_shutdown */
    free(c.args);
    printf("ok: immediate shutdown with a lent call unread: its callback "
           "ran once, FRPC_ESHUTDOWN\n");
}

static void *kept_args[4];

static void phase_free(void)
{
    for (int i = 0; i < 4; i++) {
        lent_call c;
        start(&c, 0x4652454500000000ull + (uint64_t)i, (1u << 20) + 5,
              CALL_TIMEOUT_MS);
        frpc_future_free(c.f); /* not done: args stay the call's */
        kept_args[i] = c.args;
    }
    printf("ok: 4 lent futures freed before done\n");
}

int main(void)
{
    long calls = 200 * (long)(getenv("FABRPC_TEST_SCALE")
                                  ? atoi(getenv("FABRPC_TEST_SCALE"))
                                  : 100) / 100;
    size_t max = getenv("LENT_MAX") ? strtoull(getenv("LENT_MAX"), NULL, 0)
                                    : (size_t)16 << 20;
    const char *zc = getenv("FABRPC_ZEROCOPY_MIN");
    lent_min = zc ? strtoull(zc, NULL, 0) : 65536;
    if (calls < 10)
        calls = 10;

    au_start();
    CHECK(nranks == 2, "run with 2 ranks");
    CHECK(lent_min > 0 && lent_min < max, "zerocopy_min %zu", lent_min);
    au_register("checked_echo", checked_echo, NULL, 0);
    au_register("hold_poll", hold_poll, NULL, FRPC_INLINE);
    au_register("report", report, NULL, 0);
    au_barrier();
    if (me == 0) {
        phase_window(calls, max);
        phase_then();
        phase_cancel();
        phase_timeout();
        phase_free();
    }
    uint64_t wrong = atomic_load(&wrong_args);
    au_sum_at_rank0(&wrong, 1);
    if (me == 0) {
        CHECK(wrong == 0, "rank 1 saw %llu args with a wrong byte",
              (unsigned long long)wrong);
        phase_shutdown();
    } else {
        /* Rank 0 leaves at once, during our hold: we may see it gone. */
        int rc = frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, 60000);
        CHECK(rc == 0 || rc == FRPC_EPEERLOST, "frpc_shutdown: %s",
              frpc_strerror(rc));
        printf("ok: rank 1 shut down: %s\n", frpc_strerror(rc));
    }
    for (int i = 0; i < 4; i++)
        free(kept_args[i]);
    return 0;
}
