/*
 * standin: pool handlers the progress thread runs itself (FRPC_INLINE's
 * note in fabrpc.h, since 1.5), run by run_standin.sh on 2 ranks.
 * Written against rpc/fabrpc.h alone. Usage: standin MODE
 *
 *   block     rank 1's pool handler "wait_go" blocks until rank 0's next
 *             call, "go", has run there; with the pool idle the progress
 *             thread runs wait_go itself, so only the thread standing in
 *             for it can take "go" from the wire. 3 rounds, each with 6
 *             echo calls (pool handlers) sent behind wait_go, answered
 *             before "go" is sent (the requests taken behind a handler
 *             that runs long go to the pool; later ones are polled for by
 *             the stand-in): every call ends 0 with its answer. Round 1's
 *             wait_go ran on the progress thread (the thread that runs
 *             the FRPC_INLINE "where" when rank 1 is idle), rounds 2 and
 *             3's did not (a function found running long is slow: its
 *             later requests go to the pool at once); rank 1's
 *             frpc_stats count handlers on the progress thread and at
 *             least one stand-in.
 *   spread    rank 1's pool handler "work" runs 300 us on the CPU, under
 *             the millisecond that makes a handler slow; rank 0 sends 32
 *             at once. Together they run about 10 ms: some must run off
 *             the progress thread (the rest of a poll's requests go to
 *             the pool once its handlers have run a few ms), and every
 *             call ends 0.
 *   recover   rank 1's pool handler "lazy" sleeps 30 ms on its first run
 *             (setting things up, say), on the progress thread: that
 *             function goes to the pool. Rank 0 then calls it one call at
 *             a time; each run is quick, and after 64 in a row on the pool
 *             it runs on the progress thread again: rank 0 stops at the
 *             first such run after the second call, or fails after
 *             STANDIN_CALLS (3000 unless set; run_standin.sh sets 5000,
 *             more under sanitizers: a run over 100 us starts the count
 *             again, and they make many).
 *   heavy     rank 1's pool handler "steady" runs 300 us on the CPU each
 *             time (over the 100 us that counts as long, under the
 *             millisecond that makes the stand-in step in) and answers
 *             whether it ran on the progress thread; rank 0 calls it 40
 *             times, one at a time, and nothing else runs there. Its runs
 *             on the progress thread come first and number 1 to 10 (one
 *             run in 8 is timed, then each after a long one; three long
 *             in a row send the function to the pool: fabrpc.h's
 *             FRPC_INLINE note), and none after: 300 us is never quick
 *             enough to bring it back.
 *   paced     every rank (4 in run_standin.sh) calls rank (me + i) % n's
 *             pool handler "echo", itself every n-th call, STANDIN_CALLS
 *             times, pausing 0-3 ms after every third so that its progress
 *             thread naps between them: no call may wait out its 3 s
 *             timeout. A request the progress thread took in the poll
 *             before its nap stayed there while the caller spun, a call
 *             to itself never answered (once in about 60,000 calls in
 *             blocking progress).
 *   shutdown  rank 1's pool handler "nest" waits in a call to rank 0's
 *             "hold" (never answered, no timeout) when rank 1's main
 *             thread calls frpc_shutdown(PEERLOST_HOW, 2000) (immediate or
 *             graceful; STANDIN_HOW): it returns within its bound plus
 *             slack, and the nested call ended with an error. (A graceful
 *             shutdown stops the progress thread before it ends the calls
 *             in flight: waiting there for the handler would never end.)
 */
/* Not every helper is used here. */
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "async_util.h"

static atomic_int gone;         /* "go" calls run on rank 1 */
static atomic_int finished;     /* rank 0 said the test is over */
/* Atomic: written by rank 1's handlers, read by its main thread (the
 * order between them runs through rank 0). */
static _Atomic pthread_t progress_thread; /* where "where" ran */
static _Atomic pthread_t wait_go_ran_on[4]; /* round k's wait_go */

/* wait_go(k): blocks until "go" ran k times (30 s at most); answers
 * int32 1 if it did, 0 if the time ran out. */
static void wait_go(frpc_request *req, void *user)
{
    (void)user;
    size_t len;
    const int32_t *k = frpc_request_args(req, &len);
    int32_t want = len == sizeof(*k) ? *k : 1 << 30, got = 0;
    if (want >= 1 && want <= 3)
        wait_go_ran_on[want] = pthread_self();
    for (int i = 0; i < 30000; i++) {
        if (atomic_load(&gone) >= want) {
            got = 1;
            break;
        }
        au_sleep_us(1000);
    }
    frpc_respond(req, &got, sizeof(got));
}

static void go(frpc_request *req, void *user)
{
    (void)user;
    atomic_fetch_add(&gone, 1);
    frpc_respond(req, NULL, 0);
}

/* An FRPC_INLINE handler: runs on the thread that polls, the progress
 * thread while rank 1's main thread waits outside the agent. */
static void where(frpc_request *req, void *user)
{
    (void)user;
    progress_thread = pthread_self();
    frpc_respond(req, NULL, 0);
}

static void finish(frpc_request *req, void *user)
{
    (void)user;
    atomic_store(&finished, 1);
    frpc_respond(req, NULL, 0);
}

/* Rank 1 waits without calling into the agent, so that only its progress
 * thread polls (a waiting caller would poll for it). */
static void wait_finished(void)
{
    for (int i = 0; i < 120000 && !atomic_load(&finished); i++)
        au_sleep_us(1000);
    CHECK(atomic_load(&finished), "rank 0 never said the test is over");
}

/* A two-rank mode whose rank 1 serves the pool handler fn as name,
 * with "where" and "finish"; returns after the barrier. */
static void start_serving(const char *mode, const char *name,
                          frpc_handler_fn fn)
{
    au_start();
    CHECK(nranks == 2, "%s needs 2 ranks", mode);
    au_register(name, fn, NULL, 0);
    au_register("where", where, NULL, FRPC_INLINE);
    au_register("finish", finish, NULL, FRPC_INLINE);
    au_barrier();
}

/* Calls rank 1's name, which answers int32 1 if it ran on the progress
 * thread; returns that. */
static int32_t call_where_ran(const char *name, int i)
{
    frpc_result res;
    int rc = frpc_call(agent, 1, name, NULL, 0, 20000, &res);
    CHECK(rc == 0 && res.len == sizeof(int32_t), "%s %d: %s", name, i,
          au_why(rc, res.error));
    int32_t here;
    memcpy(&here, res.data, sizeof(here));
    frpc_result_clear(&res);
    return here;
}

/* Keeps the CPU busy for ms. */
static void spin_ms(double ms)
{
    double t0 = au_now_ms();
    while (au_now_ms() - t0 < ms)
        ;
}

static int mode_block(void)
{
    au_start();
    CHECK(nranks == 2, "block needs 2 ranks");
    au_register("wait_go", wait_go, NULL, 0);
    au_register("go", go, NULL, 0);
    au_register("echo", echo, NULL, 0);
    au_register("finish", finish, NULL, FRPC_INLINE);
    au_register("where", where, NULL, FRPC_INLINE);
    au_barrier();
    if (me == 1) {
        wait_finished();
        CHECK(pthread_equal(wait_go_ran_on[1], progress_thread),
              "round 1's wait_go did not run on the progress thread (the "
              "pool idle)");
        for (int k = 2; k <= 3; k++)
            CHECK(!pthread_equal(wait_go_ran_on[k], progress_thread),
                  "round %d's wait_go ran on the progress thread: a "
                  "function found running long was not taken for slow", k);
        frpc_stats st;
        CHECK(frpc_get_stats(agent, &st) == 0, "stats");
        printf("rank 1: %llu pool handlers on the progress thread, %llu "
               "stand-ins\n", (unsigned long long)st.handlers_on_progress,
               (unsigned long long)st.progress_stand_ins);
        CHECK(st.handlers_on_progress >= 1 && st.progress_stand_ins >= 1,
              "wait_go did not run on the progress thread, or nobody stood "
              "in for it");
        printf("ok: rank 1 served 3 rounds\n");
        au_barrier();
        au_finish();
        return 0;
    }
    CHECK(frpc_call(agent, 1, "where", NULL, 0, 20000, NULL) == 0, "where");
    for (int32_t k = 1; k <= 3; k++) {
        frpc_future *w, *e[6];
        CHECK(frpc_call_async(agent, 1, "wait_go", &k, sizeof(k), 40000,
                              &w) == 0, "wait_go");
        for (int i = 0; i < 6; i++)
            e[i] = au_async(1, "echo", au_mix(0x5701 + k * 10 + i), 64,
                            40000);
        /* The echoes are answered while wait_go still runs: it cannot
         * end before "go", sent only after them. */
        for (int i = 0; i < 6; i++) {
            CHECK(frpc_future_wait(e[i], 40000) == 0,
                  "round %d: echo %d behind the running wait_go was not "
                  "answered", k, i);
            au_check_echo(e[i], au_mix(0x5701 + k * 10 + i), 64, "echo");
            frpc_future_free(e[i]);
        }
        CHECK(!frpc_future_test(w), "round %d: wait_go ended before go", k);
        double t0 = au_now_ms();
        int rc = frpc_call(agent, 1, "go", NULL, 0, 20000, NULL);
        CHECK(rc == 0, "round %d: go: %s", k, frpc_err_name(rc));
        printf("round %d: 6 echoes answered behind wait_go; go answered "
               "in %.2f ms\n", k, au_now_ms() - t0);
        CHECK(frpc_future_wait(w, 40000) == 0, "wait_go's wait");
        size_t len = 0;
        rc = frpc_future_error(w, NULL, NULL);
        const void *data = frpc_future_data(w, &len);
        CHECK(rc == 0 && len == sizeof(int32_t), "wait_go: %s",
              frpc_err_name(rc));
        int32_t got;
        memcpy(&got, data, sizeof(got));
        CHECK(got == 1, "round %d: wait_go never saw go", k);
        frpc_future_free(w);
    }
    CHECK(frpc_call(agent, 1, "finish", NULL, 0, 20000, NULL) == 0,
          "finish");
    printf("ok: rank 0: 3 rounds of wait_go, go and 6 echoes\n");
    au_barrier();
    au_finish();
    return 0;
}

#define SPREAD_CALLS 32
static _Atomic pthread_t work_ran_on[SPREAD_CALLS];
static atomic_int works;

/* work: 300 us of the CPU, then echo's answer. */
static void work(frpc_request *req, void *user)
{
    (void)user;
    int i = atomic_fetch_add(&works, 1);
    if (i < SPREAD_CALLS)
        work_ran_on[i] = pthread_self();
    spin_ms(0.3);
    echo(req, user);
}

static int mode_spread(void)
{
    start_serving("spread", "work", work);
    if (me == 1) {
        wait_finished();
        int n = atomic_load(&works), off = 0;
        CHECK(n == SPREAD_CALLS, "work ran %d times, want %d", n,
              SPREAD_CALLS);
        for (int i = 0; i < n; i++)
            off += !pthread_equal(work_ran_on[i], progress_thread);
        printf("rank 1: %d of %d work handlers ran off the progress "
               "thread\n", off, n);
        CHECK(off > 0, "all %d work handlers (300 us each) ran one after "
              "the other on the progress thread", n);
        printf("ok: rank 1: work spread\n");
        au_barrier();
        au_finish();
        return 0;
    }
    CHECK(frpc_call(agent, 1, "where", NULL, 0, 20000, NULL) == 0, "where");
    frpc_future *f[SPREAD_CALLS];
    for (int i = 0; i < SPREAD_CALLS; i++)
        f[i] = au_async(1, "work", au_mix(0x5e00 + i), 32, 40000);
    for (int i = 0; i < SPREAD_CALLS; i++) {
        CHECK(frpc_future_wait(f[i], 40000) == 0, "work %d's wait", i);
        au_check_echo(f[i], au_mix(0x5e00 + i), 32, "work");
        frpc_future_free(f[i]);
    }
    CHECK(frpc_call(agent, 1, "finish", NULL, 0, 20000, NULL) == 0,
          "finish");
    printf("ok: rank 0: %d work calls answered\n", SPREAD_CALLS);
    au_barrier();
    au_finish();
    return 0;
}

static atomic_int lazy_runs, lazy_back_at; /* run number, or 0 */

/* lazy: 30 ms on its first run, quick afterwards; answers whether it
 * ran on the progress thread (int32 1 or 0). */
static void lazy(frpc_request *req, void *user)
{
    (void)user;
    int n = atomic_fetch_add(&lazy_runs, 1) + 1;
    if (n == 1)
        au_sleep_us(30000);
    int32_t here = pthread_equal(pthread_self(), progress_thread);
    if (here && n > 1 && atomic_load(&lazy_back_at) == 0)
        atomic_store(&lazy_back_at, n);
    frpc_respond(req, &here, sizeof(here));
}

static int mode_recover(void)
{
    start_serving("recover", "lazy", lazy);
    if (me == 1) {
        wait_finished();
        frpc_stats st;
        CHECK(frpc_get_stats(agent, &st) == 0, "stats");
        printf("rank 1: lazy back on the progress thread at run %d; %llu "
               "stand-ins\n", atomic_load(&lazy_back_at),
               (unsigned long long)st.progress_stand_ins);
        CHECK(st.progress_stand_ins >= 1, "nobody stood in for lazy's "
              "first run");
        printf("ok: rank 1: lazy came back\n");
        au_barrier();
        au_finish();
        return 0;
    }
    CHECK(frpc_call(agent, 1, "where", NULL, 0, 20000, NULL) == 0, "where");
    const char *calls_s = getenv("STANDIN_CALLS");
    int calls = calls_s ? atoi(calls_s) : 3000, back_at = 0;
    for (int i = 1; i <= calls && !back_at; i++) {
        int32_t here = call_where_ran("lazy", i);
        CHECK(i != 1 || here, "lazy's first run was not on the progress "
              "thread (rank 1 idle, its pool too)");
        CHECK(i != 2 || !here, "lazy's second run was on the progress "
              "thread: its first (30 ms there) did not send it to the "
              "pool");
        if (here && i > 2)
            back_at = i;
    }
    CHECK(back_at > 64, "lazy never came back to the progress thread in "
          "%d quick runs (or too soon: %d)", calls, back_at);
    CHECK(frpc_call(agent, 1, "finish", NULL, 0, 20000, NULL) == 0,
          "finish");
    printf("ok: rank 0: lazy back on rank 1's progress thread at call %d\n",
           back_at);
    au_barrier();
    au_finish();
    return 0;
}

/* steady: 300 us of the CPU every run; answers whether it ran on the
 * progress thread (int32 1 or 0). */
static void steady(frpc_request *req, void *user)
{
    (void)user;
    spin_ms(0.3);
    int32_t here = pthread_equal(pthread_self(), progress_thread);
    frpc_respond(req, &here, sizeof(here));
}

#define HEAVY_CALLS 40

static int mode_heavy(void)
{
    start_serving("heavy", "steady", steady);
    if (me == 1) {
        wait_finished();
        frpc_stats st;
        CHECK(frpc_get_stats(agent, &st) == 0, "stats");
        printf("rank 1: %llu pool handlers on the progress thread\n",
               (unsigned long long)st.handlers_on_progress);
        printf("ok: rank 1: steady served\n");
        au_barrier();
        au_finish();
        return 0;
    }
    CHECK(frpc_call(agent, 1, "where", NULL, 0, 20000, NULL) == 0, "where");
    int on_progress = 0, first_off = 0;
    char trace[HEAVY_CALLS + 1];
    for (int i = 1; i <= HEAVY_CALLS; i++) {
        int32_t here = call_where_ran("steady", i);
        trace[i - 1] = here ? 'P' : '.';
        if (!here && !first_off)
            first_off = i;
        on_progress += here != 0;
    }
    trace[HEAVY_CALLS] = 0;
    printf("steady's runs (P: on the progress thread): %s\n", trace);
    CHECK(on_progress >= 1, "no run of steady on the progress thread (rank "
          "1 idle, its pool too)");
    CHECK(on_progress <= 10, "steady ran %d times on the progress thread; "
          "the header says at most 10", on_progress);
    CHECK(first_off == on_progress + 1, "a run on the progress thread "
          "after the function went to the pool: %s", trace);
    CHECK(frpc_call(agent, 1, "finish", NULL, 0, 20000, NULL) == 0,
          "finish");
    printf("ok: rank 0: steady left the progress thread after %d runs "
           "there\n", on_progress);
    au_barrier();
    au_finish();
    return 0;
}

static int mode_paced(void)
{
    const char *calls_s = getenv("STANDIN_CALLS");
    int calls = calls_s ? atoi(calls_s) : 5000, late = 0;
    double worst = 0;
    au_start();
    au_register("echo", echo, NULL, 0);
    au_barrier();
    uint64_t r = au_mix(0x9ace + (uint64_t)me);
    for (int i = 0; i < calls; i++) {
        int dst = (me + i) % nranks;
        frpc_result res;
        double t0 = au_now_ms();
        int rc = au_call(dst, "echo", au_mix(0x9a00 + (uint64_t)i), 16, 3000,
                         &res);
        double ms = au_now_ms() - t0;
        CHECK(rc == 0, "call %d to rank %d%s: %s (%.0f ms)", i, dst,
              dst == me ? " (itself)" : "", au_why(rc, res.error), ms);
        CHECK(au_reply_ok(res.data, res.len, au_mix(0x9a00 + (uint64_t)i),
                          16), "call %d: wrong reply", i);
        frpc_result_clear(&res);
        worst = ms > worst ? ms : worst;
        late += ms > 100;
        if (i % 3 == 0)
            au_sleep_us((unsigned)(au_rand(&r) % 3000));
    }
    printf("rank %d: %d calls, %d over 100 ms, the longest %.1f ms\n", me,
           calls, late, worst);
    printf("ok: rank %d: every paced call answered\n", me);
    au_barrier();
    au_finish();
    return 0;
}

/* shutdown_here: answers with what frpc_shutdown gave on the handler's
 * own thread: FRPC_EDEADLK (it would wait for itself). */
static void shutdown_here(frpc_request *req, void *user)
{
    (void)user;
    int32_t v = frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 1000);
    frpc_respond(req, &v, sizeof(v));
}

static int mode_own(void)
{
    au_start();
    CHECK(nranks == 2, "own needs 2 ranks");
    au_register("shutdown_here", shutdown_here, NULL, 0);
    au_register("finish", finish, NULL, FRPC_INLINE);
    au_register("echo", echo, NULL, 0);
    au_barrier();
    if (me == 1) {
        wait_finished();
        frpc_stats st;
        CHECK(frpc_get_stats(agent, &st) == 0, "stats");
        CHECK(st.handlers_on_progress >= 1,
              "no handler ran on the progress thread");
        printf("ok: rank 1: %llu pool handlers on the progress thread\n",
               (unsigned long long)st.handlers_on_progress);
        au_barrier();
        au_finish();
        return 0;
    }
    for (int i = 0; i < 20; i++) {
        frpc_result res;
        int rc = frpc_call(agent, 1, "shutdown_here", NULL, 0, 20000, &res);
        CHECK(rc == 0 && res.len == sizeof(int32_t), "shutdown_here: %s",
              frpc_err_name(rc));
        int32_t got;
        memcpy(&got, res.data, sizeof(got));
        frpc_result_clear(&res);
        CHECK(got == FRPC_EDEADLK, "frpc_shutdown in a pool handler: %s, "
              "want FRPC_EDEADLK", frpc_err_name(got));
        au_sleep_us(2000); /* rank 1's pool idle, its caller gone */
    }
    frpc_future *f = au_async(1, "echo", au_mix(0x0e), 100, 20000);
    CHECK(frpc_future_wait(f, 20000) == 0, "echo after");
    au_check_echo(f, au_mix(0x0e), 100, "echo after");
    frpc_future_free(f);
    CHECK(frpc_call(agent, 1, "finish", NULL, 0, 20000, NULL) == 0,
          "finish");
    printf("ok: rank 0: frpc_shutdown in rank 1's pool handler: "
           "FRPC_EDEADLK 20 times\n");
    au_barrier();
    au_finish();
    return 0;
}

static atomic_int nesting, nest_rc = 1;

/* nest: waits in a call to rank 0's "hold", which never answers. */
static void nest(frpc_request *req, void *user)
{
    (void)user;
    atomic_store(&nesting, 1);
    int rc = frpc_call(agent, 0, "hold", NULL, 0, FRPC_TIMEOUT_NONE, NULL);
    atomic_store(&nest_rc, rc);
    frpc_respond(req, NULL, 0);
}

static int mode_shutdown(void)
{
    const char *how_s = getenv("STANDIN_HOW");
    int graceful = how_s && strcmp(how_s, "graceful") == 0;
    au_start();
    CHECK(nranks == 2, "shutdown needs 2 ranks");
    au_register("hold", hold, NULL, FRPC_INLINE);
    au_register("nest", nest, NULL, 0);
    au_barrier();
    if (me == 0) {
        frpc_future *f;
        CHECK(frpc_call_async(agent, 1, "nest", NULL, 0, FRPC_TIMEOUT_NONE,
                              &f) == 0, "nest");
        /* Rank 1's shutdown ends it: answered (a graceful one lets the
         * handler answer once its nested call ended), or rank 1 gone. */
        int rc = frpc_future_wait(f, 60000);
        CHECK(rc == 0 || rc == FRPC_ESHUTDOWN || rc == FRPC_EPEERLOST,
              "nest's wait: %s (rank 1's shutdown hung?)", frpc_err_name(rc));
        printf("nest ended: %s\n", frpc_err_name(rc));
        frpc_future_free(f);
        rc = frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 5000);
        CHECK(rc == 0 || rc == FRPC_EPEERLOST, "shutdown: %s",
              frpc_err_name(rc));
        printf("ok: rank 0 done\n");
        return 0;
    }
    for (int i = 0; i < 30000 && !atomic_load(&nesting); i++)
        au_sleep_us(1000);
    CHECK(atomic_load(&nesting), "nest never ran");
    au_sleep_us(20000); /* inside its call; a tick or more */
    double t0 = au_now_ms();
    int rc = frpc_shutdown(agent, graceful ? FRPC_SHUTDOWN_GRACEFUL
                                           : FRPC_SHUTDOWN_IMMEDIATE,
                           2000);
    double ms = au_now_ms() - t0;
    printf("rank 1: %s shutdown: %s in %.0f ms; the nested call: %s\n",
           graceful ? "graceful" : "immediate", frpc_err_name(rc), ms,
           frpc_err_name(atomic_load(&nest_rc)));
    CHECK(ms < 2000 + 3000, "shutdown took %.0f ms", ms);
    CHECK(atomic_load(&nest_rc) < 0, "the nested call did not end with an "
          "error: %d", atomic_load(&nest_rc));
    printf("ok: rank 1 shut down with its handler waiting\n");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 2 && strcmp(argv[1], "block") == 0)
        return mode_block();
    if (argc == 2 && strcmp(argv[1], "shutdown") == 0)
        return mode_shutdown();
    if (argc == 2 && strcmp(argv[1], "own") == 0)
        return mode_own();
    if (argc == 2 && strcmp(argv[1], "spread") == 0)
        return mode_spread();
    if (argc == 2 && strcmp(argv[1], "paced") == 0)
        return mode_paced();
    if (argc == 2 && strcmp(argv[1], "recover") == 0)
        return mode_recover();
    if (argc == 2 && strcmp(argv[1], "heavy") == 0)
        return mode_heavy();
    fprintf(stderr, "usage: standin block|spread|recover|heavy|paced|"
            "shutdown|own\n");
    return 2;
}
