/*
 * peerlost: multi-rank tests of lost peers, shutdown bounds and init
 * checks, run by run_peer_lost.sh (through fabrpc-run --keep-going, and
 * with ranks started by hand) and run_jobcheck.sh. Usage: peerlost MODE
 * Written against rpc/fabrpc.h alone ("Timeouts", "Lost peers",
 * "Membership", frpc_init, frpc_shutdown, frpc_peer_state,
 * frpc_on_peer_lost).
 *
 * A rank that kills itself first writes its CLOCK_MONOTONIC time in ns to
 * $PEERLOST_DIR/killtime, so that the others can print how long after the
 * death each of their calls ended.
 *
 *   kill          4 ranks. Ranks 0-2 start 100 async calls each to rank
 *                 3's "hold" (never answered; half with a 60 s timeout,
 *                 half with none) and async echo calls to each other; rank
 *                 3 SIGKILLs itself once it holds all 300. On the
 *                 survivors every call to 3 ends FRPC_EPEERLOST (< 20 s
 *                 after the kill), new calls to 3 fail at once, its state is
 *                 DEAD, frpc_on_peer_lost reported it once (and no other
 *                 rank), survivor calls succeed before and after, and
 *                 graceful shutdown returns FRPC_EPEERLOST in bounded time.
 *   die-in-handler 3 ranks. Rank 2 calls rank 0's pool handler "relay",
 *                 which calls rank 1's "die" (it SIGKILLs its process)
 *                 with no timeout and answers with the status it got:
 *                 FRPC_EPEERLOST.
 *   rndv-death    2 ranks. Rank 0 sends 64 MiB args to rank 1 in a loop,
 *                 by frpc_call and frpc_call_async_lent in turn (both lend
 *                 them), while rank 1 kills itself 10-200 ms after a
 *                 barrier: every call succeeds or ends FRPC_EPEERLOST,
 *                 none hangs, and no call is in flight at the end.
 *   rma-death     2 ranks. Rank 0 gets and puts 64 MiB from and into
 *                 rank 1's region, no timeout, while rank 1 kills itself
 *                 10-200 ms after a barrier: each succeeds or ends
 *                 FRPC_EPEERLOST within the bound, the next at once, and
 *                 the local region deregisters at once.
 *                 PEERLOST_RMA_LEN=N moves N bytes each instead.
 *   store-death   4 ranks. Rank 0 (it serves the bootstrap store) kills
 *                 itself after a barrier: calls to it end FRPC_EPEERLOST,
 *                 calls among 1-3 succeed, their shutdown ends in bounded
 *                 time.
 *   barrier-death 3 ranks. Rank PEERLOST_DEAD (2 unless set) dies while
 *                 the others wait in frpc_barrier (no timeout): it ends
 *                 FRPC_EPEERLOST (FRPC_EBOOTSTRAP for rank 0, the
 *                 store), and the next barrier fails at once.
 *   barrier-queue 3 ranks. Rank 1 shuts down gracefully with one
 *                 thread's barrier in the store and another's waiting its
 *                 turn: both end FRPC_ESHUTDOWN; the first's entry counts
 *                 for ranks 0 and 2, the second entered nothing.
 *   stuck-sends   3 ranks. Rank 0 stops rank 1 (SIGSTOP) and starts calls
 *                 of 65,000 B args to it until one cannot start, then
 *                 kills it: once rank 1 is DEAD, 320 such calls to rank 2
 *                 (more than the 256 send buffers) start at once and are
 *                 answered. Over shm such a frame once took a send buffer
 *                 until read: every buffer stayed with the dead rank, and
 *                 then, with that fixed, the sends to rank 2 were never
 *                 completed behind the dead rank's.
 *   storm         the last rank dies 30-150 ms after a barrier while the
 *                 others flood it with calls (2 threads of sync calls and
 *                 async windows, no timeouts): every call ends, no thread
 *                 hangs (a watchdog names a hung call after 20 s).
 *   init-death    3 ranks. Rank 2 kills itself 0-300 ms after starting
 *                 frpc_init on another thread. Ranks 0 and 1 (run with
 *                 FABRPC_INIT_TIMEOUT_MS=8000) either fail frpc_init in
 *                 bounded time or see rank 2 DEAD in bounded time.
 *                 PEERLOST_DIE_MS=N makes the moment N ms.
 *   late-shutdown 2 ranks. Rank 1 waits 4 s before frpc_shutdown: rank 0's
 *                 frpc_shutdown(GRACEFUL, 1000) ends FRPC_ETIMEDOUT within
 *                 1.5 s; rank 1's ends too.
 *   reinit        2 ranks: init, a call each way, graceful shutdown, 20
 *                 times in one process, at once.
 *   first-call    4 ranks: right after init (and a barrier for the
 *                 registrations), each rank calls every other one with a
 *                 10 ms timeout, sync and async; frpc_call_async returns in
 *                 < 5 ms. All succeed, or a second call to the same peer
 *                 misses the bound too (a loaded machine: said, not
 *                 failed).
 *   default-timeout 2 ranks, FABRPC_TIMEOUT_MS=300: FRPC_TIMEOUT_DEFAULT
 *                 to a handler that never answers ends FRPC_ETIMEDOUT after
 *                 about 300 ms (sync and async); then with config
 *                 timeout_ms = -1 it is still in flight after 1 s.
 *   left-in-shutdown 3 or more ranks. Rank 1 is in
 *                 frpc_shutdown(GRACEFUL, 20 s) when rank 0 (the store)
 *                 dies: its shutdown ends FRPC_EPEERLOST in bounded time,
 *                 and each other rank sees rank 1 LEFT, never DEAD (rank 1
 *                 said goodbye itself: to every rank, also with
 *                 FABRPC_MAX_INFLIGHT below their number).
 *   bye-bound     3 ranks. Rank 0 dies; rank 1 keeps rank 2's polling
 *                 thread busy (an inline handler that naps 2 s), then
 *                 frpc_shutdown(IMMEDIATE, 50): its goodbye to rank 2
 *                 goes unanswered, and shutdown still returns within
 *                 450 ms (2 s under a sanitizer: BYE_BOUND_MS).
 *   answers-before-bye 3 ranks. Rank 0 dies; rank 2 starts its graceful
 *                 shutdown while a pool handler of its own holds rank 1's
 *                 call until rank 1 saw a call refused: the answer comes
 *                 before rank 2's goodbye (which ends calls to it), so
 *                 the call ends 0, its answer whole (PEERLOST_ABYE_BYTES
 *                 long, 0 by default: 256 KiB goes by rendezvous); calls
 *                 made while it runs are answered, then refused (they end
 *                 FRPC_EPEERLOST, the slow call's answer still to come);
 *                 a call after the goodbye ends FRPC_EPEERLOST. With
 *                 PEERLOST_ABYE_NAP_MS past 1500 the handler naps that
 *                 long instead: the goodbye goes after half a second, and
 *                 the slow call ends FRPC_EPEERLOST 500 ms before the
 *                 nap's end or sooner.
 *   replay-order  4 ranks. Rank 3 dies, then rank 2; ranks 0 and 1 set
 *                 frpc_on_peer_lost only afterwards: the two reports come
 *                 in the order found, 3 then 2.
 *   drain         every rank starts 408 async calls to each other rank
 *                 (echo inline, most held to coalesce; 8 to a pool
 *                 handler that naps 0-5 ms) and at once calls
 *                 frpc_shutdown(GRACEFUL): it returns 0, and every future
 *                 has ended 0 with its echo, its callback run once.
 *   leave-answers 4 ranks. Rank 3 dies after a barrier; ranks 1 and 2
 *                 keep 32 async calls each in flight to rank 0's inline
 *                 "seq" (no timeout); rank 0, after serving 3000 of them,
 *                 shuts down gracefully (its barrier fails at once) and
 *                 writes the seqs it answered (frpc_respond 0) to
 *                 $PEERLOST_DIR/answered.R. No call that rank 0 answered
 *                 may end FRPC_EPEERLOST on its caller (frpc_shutdown:
 *                 "an answer it sent is not overtaken by the news").
 *   peer-fn       4 ranks, FABRPC_THREADS=2. Ranks 2 and 3 hold 20 calls
 *                 from each survivor and die at the same moment. On the
 *                 survivors each is reported once, DEAD, only after all
 *                 its calls ended FRPC_EPEERLOST, on one thread that is
 *                 neither main, a pool thread nor one that ran an inline
 *                 handler, one report at a time (each naps 200 ms); the
 *                 report calls the other survivor and gets FRPC_EDEADLK
 *                 from frpc_shutdown; on shm it comes < 3 s after
 *                 frpc_peer_state says DEAD. Setting a new fn and user,
 *                 then the same again, replays both losses each time in
 *                 the order found, to the new user only.
 *   notify-lost   3 ranks. Rank 1, the only sender, dies 500 ms into rank
 *                 0's frpc_notify_wait(5000): it ends FRPC_ETIMEDOUT at
 *                 5 s (the loss was reported during it); then
 *                 notifications from rank 2 and from itself, and calls,
 *                 work, and nothing else is queued.
 *   fn-in-shutdown 3 ranks. Rank 2 leaves at once (immediate shutdown);
 *                 rank 0's frpc_on_peer_lost function, told of it, calls
 *                 rank 1's "hold" (never answered) with no timeout, and
 *                 rank 0 shuts down meanwhile (PEERLOST_HOW immediate, or
 *                 graceful with a 1000 ms timeout): the shutdown returns,
 *                 and the function's call ends FRPC_ESHUTDOWN (pre-fix the
 *                 shutdown joined the liveness thread before it ended the
 *                 calls in flight, and waited for ever).
 *   fn-replace    2 ranks; rank 1 dies. Rank 0's function sets itself
 *                 again from inside its first report (that returns: it
 *                 does not wait for its own run), then naps 1 s; rank 0's
 *                 main thread sets NULL during the nap: that returns only
 *                 once the report has returned (pre-fix at once, while it
 *                 still ran: freeing its user then was a use after free),
 *                 and the report replayed by the first set never comes.
 *   inflight-race FABRPC_MAX_INFLIGHT=4: on each rank, 4 threads start
 *                 async calls to its own "hold" at once, 300 rounds:
 *                 exactly 4 are accepted, the rest fail FRPC_EAGAIN, and
 *                 once answered all complete and none stays in flight.
 *   fn-set-in-handler 2 ranks; rank 1 dies. Rank 0's report calls rank 0's
 *                 pool handler "set_fn", which calls frpc_on_peer_lost:
 *                 FRPC_EDEADLK at once (pre-fix it waited for the report,
 *                 which waited for it, until the call's 10 s timeout); the
 *                 old function stays set, and a set from main works.
 *   abort         2 ranks; rank 1 calls abort() after the first barrier:
 *                 it must die by SIGABRT (the launcher reports 134), not
 *                 by exit(1) from libinfinipath's handler, which Debian's
 *                 libfabric loads (rpc/signals.c). Rank 0's barrier ends
 *                 FRPC_EPEERLOST.
 *   term-in-init  2 ranks; rank 1 sends itself SIGTERM PEERLOST_TERM_MS
 *                 after it starts, during or after its frpc_init: it must
 *                 die by SIGTERM at once (before the fix it could hang in
 *                 libfabric's destructor until SIGKILL). Rank 0 ends by
 *                 the loss or its init timeout. PEERLOST_TERM_EXIT=process
 *                 or =main: rank 1 has a SIGTERM handler that calls
 *                 exit(7), and the signal goes to the process or to the
 *                 thread in frpc_init: it must exit 7 (it hung in
 *                 libfabric's destructor when the signal came during the
 *                 first fi_getinfo, and later in its free() when the
 *                 signal came inside malloc in frpc_init).
 *                 PEERLOST_TERM_AT=shutdown: the signal comes
 *                 PEERLOST_TERM_US microseconds into rank 1's graceful
 *                 frpc_shutdown, after a barrier: it must exit 7 too, and
 *                 rank 0's shutdown ends 0 or FRPC_EPEERLOST.
 *   init-only     frpc_init, print its status, error text and duration
 *                 ("init: rc=NAME ms=N err=TEXT"), shut down if it worked.
 *                 Exits 0 when init failed, 3 when it worked.
 *
 * Prints "ok: ..." per check and the measured figures; exits 1 at the
 * first failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/stat.h>

/* Not every helper of async_util.h is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "async_util.h"
#pragma GCC diagnostic pop

#define BOUND_MS 20000.0  /* detection, shutdown: generous on a loaded box */
#define AT_ONCE_MS 2000.0    /* "at once" on a loaded box */
#define SHUTDOWN_MS 10000

/* ---- common ------------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* buf = "$PEERLOST_DIR/" followed by fmt's text: the files through which
 * the ranks and the script meet. */
__attribute__((format(printf, 3, 4))) static void dir_path(char *buf,
                                                           size_t len,
                                                           const char *fmt,
                                                           ...)
{
    const char *dir = getenv("PEERLOST_DIR");
    CHECK(dir && *dir, "PEERLOST_DIR is not set");
    int n = snprintf(buf, len, "%s/", dir);
    CHECK(n > 0 && (size_t)n < len, "PEERLOST_DIR is too long");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, len - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Creates "$PEERLOST_DIR/name" (empty). */
static void touch_dir_file(const char *name)
{
    char path[600];
    dir_path(path, sizeof(path), "%s", name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    fclose(f);
}

static const char *kill_path(void)
{
    static char path[512];
    dir_path(path, sizeof(path), "killtime");
    return path;
}

/* Writes the time of death, then dies. */
__attribute__((noreturn)) static void die_now(void)
{
    char tmp[600], buf[32];
    const char *path = kill_path();
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)now_ns());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        if (write(fd, buf, (size_t)n) != n)
            fprintf(stderr, "rank %d: short write of %s\n", me, tmp);
        close(fd);
        rename(tmp, path);
    }
    fprintf(stderr, "rank %d: raising SIGKILL\n", me);
    fflush(stdout);
    fflush(stderr);
    raise(SIGKILL);
    _exit(99); /* not reached */
}

/* The time of death in ms on au_now_ms's clock (waits for the file). */
static double kill_time_ms(void)
{
    double t0 = au_now_ms();
    for (;;) {
        FILE *f = fopen(kill_path(), "r");
        unsigned long long ns = 0;
        if (f) {
            int ok = fscanf(f, "%llu", &ns) == 1;
            fclose(f);
            if (ok)
                return (double)ns / 1e6;
        }
        CHECK(au_now_ms() - t0 < BOUND_MS, "no %s after %.0f ms", kill_path(),
              BOUND_MS);
        au_sleep_us(1000);
    }
}

/* cfg with the "unset" values and err as its errbuf. */
static void config_with_errbuf(frpc_config *cfg, char *err, size_t len)
{
    frpc_config_init(cfg);
    err[0] = '\0';
    cfg->errbuf = err;
    cfg->errbuf_len = len;
}

static uint64_t rand_seed(void)
{
    return now_ns() ^ ((uint64_t)getpid() << 32);
}

/* Waits (polling, bounded) until *v >= want. */
static int wait_count(atomic_int *v, int want, double bound_ms)
{
    double t0 = au_now_ms();
    while (atomic_load(v) < want) {
        if (au_now_ms() - t0 > bound_ms)
            return 0;
        au_sleep_us(1000);
    }
    return 1;
}

/* hold: keeps the request and never answers it (frpc_shutdown frees it). */
#define MAX_KEPT 4096
static frpc_request *kept[MAX_KEPT];
static atomic_int nkept;

static void hold_forever(frpc_request *req, void *user)
{
    int i = atomic_fetch_add(&nkept, 1);
    CHECK(i < MAX_KEPT, "too many held requests");
    kept[i] = req;
}

/* ready: the survivors' rendezvous (barriers fail once a rank is lost). */
static atomic_int nready;

static void ready(frpc_request *req, void *user)
{
    atomic_fetch_add(&nready, 1);
    frpc_respond(req, NULL, 0);
}

/* Every rank in ranks[0..n) (this one among them) calls this once per
 * round: returns when all have. */
static void survivors_meet(const int *ranks, int n)
{
    static int round;
    frpc_result res;
    round++;
    for (int i = 0; i < n; i++) {
        if (ranks[i] == me)
            continue;
        int rc = frpc_call(agent, ranks[i], "ready", NULL, 0, CALL_TIMEOUT_MS,
                           &res);
        CHECK(rc == 0, "ready on %d: %s", ranks[i], au_why(rc, res.error));
        frpc_result_clear(&res);
    }
    CHECK(wait_count(&nready, round * (n - 1), 60000),
          "survivors' rendezvous: %d of %d", atomic_load(&nready),
          round * (n - 1));
}

/* frpc_on_peer_lost reports, per rank and state. */
#define MAX_RANKS 16
static atomic_int lost_dead[MAX_RANKS], lost_left[MAX_RANKS], lost_other;
static double lost_at_ms[MAX_RANKS];
static atomic_int lost_order[MAX_RANKS]; /* the ranks reported, in order */
static atomic_int nlost_order;   /* slots taken */
static atomic_int nlost_written; /* slots written (after nlost_order) */

/* When rank was reported lost (au_now_ms), or 0: read after its count,
 * which on_lost bumps after writing the time, so the two are ordered. */
static double lost_ms(int rank)
{
    return atomic_load(&lost_dead[rank]) || atomic_load(&lost_left[rank])
               ? lost_at_ms[rank]
               : 0.0;
}

static void on_lost(frpc_agent *a, int rank, int state, const char *why,
                    void *user)
{
    printf("peer lost: rank %d state %d (%s) at %.0f ms\n", rank, state,
           why ? why : "(null)", au_now_ms());
    if (rank < 0 || rank >= MAX_RANKS) {
        atomic_fetch_add(&lost_other, 1);
        return;
    }
    lost_at_ms[rank] = au_now_ms();
    int k = atomic_fetch_add(&nlost_order, 1);
    if (k < MAX_RANKS)
        atomic_store(&lost_order[k], rank);
    atomic_fetch_add(&nlost_written, 1);
    if (state == FRPC_PEER_DEAD)
        atomic_fetch_add(&lost_dead[rank], 1);
    else if (state == FRPC_PEER_LEFT)
        atomic_fetch_add(&lost_left[rank], 1);
    else
        atomic_fetch_add(&lost_other, 1);
}

/* Exactly one report, DEAD, for rank dead; none for any other rank. */
static void check_reports(int dead)
{
    for (int r = 0; r < nranks && r < MAX_RANKS; r++) {
        int d = atomic_load(&lost_dead[r]), l = atomic_load(&lost_left[r]);
        CHECK(d == (r == dead) && l == 0,
              "frpc_on_peer_lost for rank %d: %d DEAD, %d LEFT reports", r, d,
              l);
    }
    CHECK(atomic_load(&lost_other) == 0, "%d odd peer-lost reports",
          atomic_load(&lost_other));
    printf("ok: frpc_on_peer_lost reported rank %d once (DEAD), no other\n",
           dead);
}

/* Waits (bounded) until rank is DEAD; returns how long it took. */
static double wait_dead(int rank)
{
    double t0 = au_now_ms();
    int st;
    while ((st = frpc_peer_state(agent, rank)) != FRPC_PEER_DEAD) {
        CHECK(st == FRPC_PEER_ALIVE, "frpc_peer_state(%d) = %d, want DEAD",
              rank, st);
        CHECK(au_now_ms() - t0 < BOUND_MS, "rank %d not DEAD after %.0f ms",
              rank, BOUND_MS);
        au_sleep_us(1000);
    }
    return au_now_ms() - t0;
}

/* A watchdog for a thread that may hang in a call to a lost rank: if
 * watchdog_done is not called within secs, the process reports what hung
 * and exits 1 (rather than waiting for fabrpc-run's --timeout). */
static atomic_int wd_done;
static const char *wd_what;
static double wd_secs;

static void *watchdog_main(void *arg)
{
    double t0 = au_now_ms();
    while (!atomic_load(&wd_done)) {
        if (au_now_ms() - t0 > wd_secs * 1000) {
            fprintf(stderr, "FAIL rank %d: HUNG: %s has not returned after "
                    "%.0f s\n", me, wd_what, wd_secs);
            fflush(stderr);
            _exit(1);
        }
        au_sleep_us(10000);
    }
    return NULL;
}

static void watchdog_start(const char *what, double secs)
{
    pthread_t t;
    wd_what = what;
    wd_secs = secs;
    atomic_store(&wd_done, 0);
    CHECK(pthread_create(&t, NULL, watchdog_main, NULL) == 0, "thread");
    pthread_detach(t);
}

static void watchdog_done(void) { atomic_store(&wd_done, 1); }

/* Graceful shutdown: returns its status; prints it and its duration. */
static int timed_shutdown(int timeout_ms, double *ms)
{
    double t0 = au_now_ms();
    int rc = frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, timeout_ms);
    *ms = au_now_ms() - t0;
    printf("shutdown(GRACEFUL, %d): %s in %.0f ms\n", timeout_ms,
           frpc_err_name(rc), *ms);
    agent = NULL;
    return rc;
}

/* New calls to a lost rank: sync and async, with and without timeouts,
 * all FRPC_EPEERLOST at once. */
static void check_new_calls_fail(int dead)
{
    static const int tmo[] = {60000, FRPC_TIMEOUT_NONE, FRPC_TIMEOUT_DEFAULT,
                              10};
    double worst = 0;
    for (size_t i = 0; i < sizeof(tmo) / sizeof(tmo[0]); i++) {
        frpc_result res;
        double t0 = au_now_ms();
        int rc = au_call(dead, "echo", 1000 + i, 64, tmo[i], &res);
        double ms = au_now_ms() - t0;
        CHECK(rc == FRPC_EPEERLOST, "new sync call to lost rank %d "
              "(timeout %d): %s (%s), want FRPC_EPEERLOST", dead, tmo[i],
              frpc_err_name(rc), au_why(rc, res.error));
        CHECK(ms < AT_ONCE_MS, "new sync call to lost rank %d took %.0f ms",
              dead, ms);
        frpc_result_clear(&res);
        worst = ms > worst ? ms : worst;

        frpc_future *f = NULL;
        void *args = au_msg(2000 + i, 64);
        t0 = au_now_ms();
        rc = frpc_call_async(agent, dead, "echo", args, 64, tmo[i], &f);
        free(args);
        if (rc == 0) {
            rc = frpc_future_wait(f, 60000);
            if (rc != FRPC_ETIMEDOUT || frpc_future_test(f))
                rc = frpc_future_error(f, NULL, NULL);
            frpc_future_free(f);
        }
        ms = au_now_ms() - t0;
        CHECK(rc == FRPC_EPEERLOST, "new async call to lost rank %d "
              "(timeout %d): %s, want FRPC_EPEERLOST", dead, tmo[i],
              frpc_err_name(rc));
        CHECK(ms < AT_ONCE_MS, "new async call to lost rank %d took %.0f ms",
              dead, ms);
        worst = ms > worst ? ms : worst;
    }
    printf("ok: new calls to lost rank %d (sync and async, timeouts 60 s, "
           "none, default, 10 ms) failed FRPC_EPEERLOST, slowest %.2f ms\n",
           dead, worst);
}

static void start_lost(void)
{
    au_start();
    CHECK(nranks <= MAX_RANKS, "too many ranks");
    const char *job = getenv("FABRPC_JOB_ID");
    printf("job id: %s provider: %s\n", job ? job : "(none)",
           frpc_provider(agent));
    au_register("echo", echo, NULL, FRPC_INLINE);
    au_register("hold", hold_forever, NULL, 0);
    au_register("ready", ready, NULL, FRPC_INLINE);
    int rc = frpc_on_peer_lost(agent, on_lost, NULL);
    CHECK(rc == 0, "frpc_on_peer_lost: %s", frpc_strerror(rc));
}

/* ---- kill ------------------------------------------------------------- */

#define KILL_HOLDS 100
#define KILL_ECHOS 50 /* to each other survivor */

/* A completion time per future, set by its frpc_future_then callback. */
struct done_at {
    double ms;
};
static atomic_int ndone;

static void mark_done(frpc_future *f, void *user)
{
    ((struct done_at *)user)->ms = au_now_ms();
    atomic_fetch_add(&ndone, 1);
}

static int mode_kill(void)
{
    static frpc_future *holds[KILL_HOLDS], *echos[2 * KILL_ECHOS];
    static struct done_at at[KILL_HOLDS];
    start_lost();
    CHECK(nranks == 4, "kill needs 4 ranks");
    au_barrier();
    if (me == 3) {
        int want = 3 * KILL_HOLDS;
        int all = wait_count(&nkept, want, 30000);
        printf("rank 3 holds %d of %d requests%s\n", atomic_load(&nkept),
               want, all ? "" : " (gave up waiting)");
        die_now();
    }
    int others[2], no = 0;
    for (int r = 0; r < 3; r++)
        if (r != me)
            others[no++] = r;
    /* Holds and echoes interleaved. */
    int ne = 0;
    for (int i = 0; i < KILL_HOLDS; i++) {
        holds[i] = au_async(3, "hold", au_mix(me * 1000 + i), 64,
                            i % 2 ? 60000 : FRPC_TIMEOUT_NONE);
        int rc = frpc_future_then(holds[i], mark_done, &at[i]);
        CHECK(rc == 0, "frpc_future_then: %s", frpc_strerror(rc));
        if (i % 2 == 0) {
            for (int k = 0; k < 2; k++, ne++)
                echos[ne] = au_async(others[k], "echo",
                                     au_mix(0xec0000 + me * 1000 + ne),
                                     64 + (size_t)ne * 13, CALL_TIMEOUT_MS);
        }
    }
    CHECK(ne == 2 * KILL_ECHOS, "echo count");
    int rc = frpc_wait_all(echos, (size_t)ne, 60000);
    if (rc != 0) {
        int done[2] = {0, 0};
        for (int i = 0; i < ne; i++)
            done[i % 2] += frpc_future_test(echos[i]);
        CHECK(0, "echo calls to the survivors: wait_all %s after 60 s; "
              "%d of %d to rank %d and %d of %d to rank %d completed; rank 3 "
              "lost: %d", frpc_err_name(rc), done[0], ne / 2, others[0],
              done[1], ne / 2, others[1], frpc_peer_state(agent, 3));
    }
    for (int i = 0; i < ne; i++) {
        au_check_echo(echos[i], au_mix(0xec0000 + me * 1000 + i),
                      64 + (size_t)i * 13, "survivor echo (around the kill)");
        frpc_future_free(echos[i]);
    }
    printf("ok: %d async echo calls to the other survivors succeeded\n", ne);

    rc = frpc_wait_all(holds, KILL_HOLDS, 60000);
    CHECK(rc == 0, "calls to the killed rank 3: %s after 60 s (%d ended)",
          frpc_err_name(rc), atomic_load(&ndone));
    CHECK(wait_count(&ndone, KILL_HOLDS, BOUND_MS), "%d of %d callbacks ran",
          atomic_load(&ndone), KILL_HOLDS);
    double tk = kill_time_ms(), worst = -1e9, first = 1e18;
    for (int i = 0; i < KILL_HOLDS; i++) {
        const char *msg = NULL;
        rc = frpc_future_error(holds[i], NULL, &msg);
        CHECK(rc == FRPC_EPEERLOST, "call %d to the killed rank 3 (timeout "
              "%s): %s (%s), want FRPC_EPEERLOST", i, i % 2 ? "60 s" : "none",
              frpc_err_name(rc), au_why(rc, msg));
        double lat = at[i].ms - tk;
        worst = lat > worst ? lat : worst;
        first = lat < first ? lat : first;
    }
    printf("detection: %d calls to rank 3 ended FRPC_EPEERLOST %.1f .. %.1f "
           "ms after the kill\n", KILL_HOLDS, first, worst);
    CHECK(worst < BOUND_MS, "a call to rank 3 ended %.0f ms after the kill",
          worst);
    printf("ok: every call to rank 3 (60 s timeout or none) ended "
           "FRPC_EPEERLOST, the last %.1f ms after the kill\n", worst);

    int st = frpc_peer_state(agent, 3);
    CHECK(st == FRPC_PEER_DEAD, "frpc_peer_state(3) = %d, want DEAD", st);
    for (int k = 0; k < 2; k++) {
        st = frpc_peer_state(agent, others[k]);
        CHECK(st == FRPC_PEER_ALIVE, "frpc_peer_state(%d) = %d, want ALIVE",
              others[k], st);
    }
    printf("ok: frpc_peer_state(3) is DEAD, the survivors ALIVE\n");
    check_new_calls_fail(3);

    CHECK(wait_count(&lost_dead[3], 1, BOUND_MS),
          "frpc_on_peer_lost never reported rank 3");
    printf("report: rank 3 reported %.1f ms after the kill\n",
           lost_at_ms[3] - tk);
    /* More survivor calls after the death, sync and async. */
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 20; i++) {
            au_sync_echo(others[k], "echo", au_mix(0xaf7e0000 + i), 100 + i);
            frpc_future *f = au_async(others[k], "echo",
                                      au_mix(0xaf7f0000 + i), 2000 + i,
                                      CALL_TIMEOUT_MS);
            rc = frpc_future_wait(f, CALL_TIMEOUT_MS);
            CHECK(rc == 0, "async echo after the death: %s",
                  frpc_err_name(rc));
            au_check_echo(f, au_mix(0xaf7f0000 + i), 2000 + i,
                          "async echo after the death");
            frpc_future_free(f);
        }
    printf("ok: 80 survivor calls after the death succeeded\n");
    int surv[3] = {0, 1, 2};
    survivors_meet(surv, 3);
    check_reports(3);
    /* A rank that starts frpc_shutdown is LEFT for the others: none may
     * before every survivor has checked its reports. */
    survivors_meet(surv, 3);

    double ms;
    rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(rc == FRPC_EPEERLOST, "shutdown with rank 3 lost: %s, want "
          "FRPC_EPEERLOST", frpc_err_name(rc));
    CHECK(ms < SHUTDOWN_MS + 2000, "shutdown took %.0f ms", ms);
    for (int i = 0; i < KILL_HOLDS; i++)
        frpc_future_free(holds[i]);
    printf("ok: rank %d survivor checks passed (shutdown FRPC_EPEERLOST in "
           "%.0f ms)\n", me, ms);
    return 0;
}

/* ---- die-in-handler ----------------------------------------------------- */

static atomic_int relayed;

static void die(frpc_request *req, void *user)
{
    die_now();
}

/* relay: calls rank 1's "die" with no timeout, answers with its status. */
static void relay(frpc_request *req, void *user)
{
    frpc_result res;
    double t0 = au_now_ms();
    int32_t rc = frpc_call(agent, 1, "die", NULL, 0, FRPC_TIMEOUT_NONE, &res);
    printf("relay: call to rank 1's die: %s (%s) after %.1f ms\n",
           frpc_err_name(rc), res.error ? res.error : "", au_now_ms() - t0);
    frpc_result_clear(&res);
    int r = frpc_respond(req, &rc, sizeof(rc));
    CHECK(r == 0, "relay: respond: %s", frpc_strerror(r));
    atomic_fetch_add(&relayed, 1);
}

static int mode_die_in_handler(void)
{
    start_lost();
    CHECK(nranks == 3, "die-in-handler needs 3 ranks");
    au_register("die", die, NULL, 0);
    au_register("relay", relay, NULL, 0);
    au_barrier();
    double ms;
    if (me == 1) {
        au_sleep_us(60 * 1000000);
        CHECK(0, "rank 1 is still alive after 60 s");
    }
    if (me == 2) {
        frpc_result res;
        double t0 = au_now_ms();
        int rc = frpc_call(agent, 0, "relay", NULL, 0, FRPC_TIMEOUT_NONE,
                           &res);
        double took = au_now_ms() - t0;
        CHECK(rc == 0, "relay: %s (%s)", frpc_err_name(rc),
              au_why(rc, res.error));
        int32_t got = 0;
        CHECK(res.len == sizeof(got), "relay answer of %zu bytes", res.len);
        memcpy(&got, res.data, sizeof(got));
        frpc_result_clear(&res);
        double lat = au_now_ms() - kill_time_ms();
        CHECK(got == FRPC_EPEERLOST, "the relay's call to the dying rank 1 "
              "ended %s, want FRPC_EPEERLOST", frpc_err_name(got));
        CHECK(took < BOUND_MS, "relay took %.0f ms", took);
        printf("ok: the handler waiting on the dead rank 1 was released: "
               "FRPC_EPEERLOST relayed in %.1f ms (%.1f ms after the kill)\n",
               took, lat);
    } else {
        CHECK(wait_count(&relayed, 1, 60000), "relay never answered");
    }
    CHECK(wait_dead(1) < BOUND_MS, "rank 1 not DEAD");
    int rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(rc == FRPC_EPEERLOST, "shutdown with rank 1 lost: %s, want "
          "FRPC_EPEERLOST", frpc_err_name(rc));
    CHECK(ms < SHUTDOWN_MS + 2000, "shutdown took %.0f ms", ms);
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- rndv-death --------------------------------------------------------- */

/* Rank 1 kills itself 10-200 ms from now; the others return at once. */
static void rank1_dies_soon(void)
{
    if (me != 1)
        return;
    uint64_t s = rand_seed();
    unsigned delay = 10 + (unsigned)(au_rand(&s) % 191);
    printf("rank 1 dies in %u ms\n", delay);
    au_sleep_us(delay * 1000);
    die_now();
}

#define RNDV_LEN (64u << 20)

static void sink(frpc_request *req, void *user)
{
    size_t len = 0;
    frpc_request_args(req, &len);
    frpc_respond(req, &len, sizeof(len));
}

/* One 64 MiB call to rank 1's sink, with no timeout: by frpc_call, or
 * (async) by frpc_call_async_lent and a wait. Its status; res is set. */
static int call_big(int async, const uint8_t *big, frpc_result *res)
{
    frpc_future *f = NULL;
    if (!async)
        return frpc_call(agent, 1, "sink", big, RNDV_LEN, FRPC_TIMEOUT_NONE,
                         res);
    memset(res, 0, sizeof(*res));
    int rc = frpc_call_async_lent(agent, 1, "sink", big, RNDV_LEN,
                                  FRPC_TIMEOUT_NONE, &f);
    if (rc)
        return rc;
    rc = frpc_future_wait(f, FRPC_TIMEOUT_NONE);
    CHECK(frpc_future_test(f) == 1, "lent call not done after its wait");
    frpc_future_take(f, res);
    frpc_future_free(f);
    return rc;
}

static int mode_rndv_death(void)
{
    start_lost();
    CHECK(nranks == 2, "rndv-death needs 2 ranks");
    au_register("sink", sink, NULL, 0);
    uint8_t *big = NULL;
    if (me == 0) { /* filled before the barrier: rank 1 dies soon after */
        big = malloc(RNDV_LEN);
        CHECK(big, "malloc 64 MiB");
        memset(big, 0x5a, RNDV_LEN);
    }
    au_barrier();
    rank1_dies_soon();
    int ok = 0, rc = 0;
    double t0 = au_now_ms(), slowest = 0;
    while (au_now_ms() - t0 < 60000) {
        frpc_result res;
        double c0 = au_now_ms();
        rc = call_big(ok % 2, big, &res);
        double ms = au_now_ms() - c0;
        slowest = ms > slowest ? ms : slowest;
        CHECK(rc == 0 || rc == FRPC_EPEERLOST, "64 MiB call %d: %s (%s)", ok,
              frpc_err_name(rc), au_why(rc, res.error));
        CHECK(ms < BOUND_MS, "64 MiB call took %.0f ms", ms);
        frpc_result_clear(&res);
        if (rc == FRPC_EPEERLOST)
            break;
        ok++;
    }
    CHECK(rc == FRPC_EPEERLOST, "rank 1 never lost in 60 s (%d calls)", ok);
    double lat = au_now_ms() - kill_time_ms();
    printf("detection: %d calls of 64 MiB succeeded, then FRPC_EPEERLOST "
           "%.1f ms after the kill; slowest call %.1f ms\n", ok, lat, slowest);
    frpc_stats before;
    CHECK(frpc_get_stats(agent, &before) == 0, "frpc_get_stats");
    for (int async = 0; async < 2; async++) {
        frpc_result res;
        double c0 = au_now_ms();
        rc = call_big(async, big, &res);
        CHECK(rc == FRPC_EPEERLOST && au_now_ms() - c0 < AT_ONCE_MS,
              "64 MiB call (%s) after the death: %s in %.0f ms",
              async ? "lent async" : "sync", frpc_err_name(rc),
              au_now_ms() - c0);
        frpc_result_clear(&res);
    }
    free(big);
    frpc_stats s;
    rc = frpc_get_stats(agent, &s);
    CHECK(rc == 0, "frpc_get_stats: %s", frpc_strerror(rc));
    CHECK(s.calls_in_flight == 0, "%llu calls in flight at the end",
          (unsigned long long)s.calls_in_flight);
    /* The header: refused for a lost destination, a call is begun and
     * failed. */
    CHECK(s.calls_started - before.calls_started == 2 &&
              s.calls_failed - before.calls_failed == 2,
          "2 calls refused for a lost rank: started +%llu, failed +%llu",
          (unsigned long long)(s.calls_started - before.calls_started),
          (unsigned long long)(s.calls_failed - before.calls_failed));
    printf("ok: no call in flight (started %llu ok %llu failed %llu)\n",
           (unsigned long long)s.calls_started,
           (unsigned long long)s.calls_ok,
           (unsigned long long)s.calls_failed);
    double ms;
    rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(rc == FRPC_EPEERLOST, "shutdown with rank 1 lost: %s",
          frpc_err_name(rc));
    CHECK(ms < SHUTDOWN_MS + 2000, "shutdown took %.0f ms", ms);
    printf("ok: rank 0 done\n");
    return 0;
}

/* ---- rma-death ---------------------------------------------------------- */

/* This rank's region's descriptor, which "desc" gives (rma-death,
 * max-inflight). */
static uint8_t rma_desc[FRPC_MEM_DESC_SIZE];

static void give_desc(frpc_request *req, void *user)
{
    (void)user;
    frpc_respond(req, rma_desc, sizeof(rma_desc));
}

static int mode_rma_death(void)
{
    start_lost();
    CHECK(nranks == 2, "rma-death needs 2 ranks");
    /* PEERLOST_RMA_LEN=64: a tight loop of small transfers, many of them
     * posted between the owner's death and its mark (shm's failed copies:
     * FRPC_EPEERLOST, never FRPC_EACCES). */
    const char *len_env = getenv("PEERLOST_RMA_LEN");
    size_t len = len_env ? (size_t)strtoul(len_env, NULL, 10) : RNDV_LEN;
    CHECK(len > 0 && len <= RNDV_LEN, "PEERLOST_RMA_LEN %zu", len);
    uint8_t *buf = malloc(RNDV_LEN);
    frpc_mem *mem;
    CHECK(buf, "malloc 64 MiB");
    memset(buf, 0x5a, RNDV_LEN);
    int rc = frpc_mem_register(agent, buf, RNDV_LEN,
                               me == 1 ? FRPC_MEM_REMOTE_READ |
                                             FRPC_MEM_REMOTE_WRITE
                                       : 0,
                               &mem);
    CHECK(rc == 0, "frpc_mem_register: %s", frpc_strerror(rc));
    if (me == 1) /* described before the handler is registered */
        CHECK(frpc_mem_describe(mem, 0, RNDV_LEN, rma_desc) == 0, "describe");
    au_register("desc", give_desc, NULL, 0);
    au_barrier();
    frpc_result res = {0};
    if (me == 0) {
        rc = frpc_call(agent, 1, "desc", NULL, 0, FRPC_TIMEOUT_NONE, &res);
        CHECK(rc == 0 && res.len == FRPC_MEM_DESC_SIZE, "desc: %s",
              frpc_err_name(rc));
    }
    au_barrier(); /* rank 0 holds the descriptor: now rank 1 may die */
    rank1_dies_soon();
    int ok = 0;
    {
        uint8_t desc[FRPC_MEM_DESC_SIZE];
        memcpy(desc, res.data, sizeof(desc));
        frpc_result_clear(&res);
        double t0 = au_now_ms(), slowest = 0;
        while (au_now_ms() - t0 < 60000) {
            double c0 = au_now_ms();
            rc = ok % 2 ? frpc_put(mem, 0, desc, sizeof(desc), 0, len,
                                   FRPC_TIMEOUT_NONE)
                        : frpc_get(mem, 0, desc, sizeof(desc), 0, len,
                                   FRPC_TIMEOUT_NONE);
            double ms = au_now_ms() - c0;
            slowest = ms > slowest ? ms : slowest;
            CHECK(rc == 0 || rc == FRPC_EPEERLOST, "%zu B transfer %d: %s",
                  len, ok, frpc_err_name(rc));
            CHECK(ms < BOUND_MS, "%zu B transfer took %.0f ms", len, ms);
            if (rc == FRPC_EPEERLOST)
                break;
            ok++;
        }
        CHECK(rc == FRPC_EPEERLOST, "rank 1 never lost in 60 s (%d ok)", ok);
        printf("detection: %d transfers of %zu B succeeded, then "
               "FRPC_EPEERLOST %.1f ms after the kill; slowest %.1f ms\n",
               ok, len, au_now_ms() - kill_time_ms(), slowest);
        double c0 = au_now_ms();
        rc = frpc_get(mem, 0, desc, sizeof(desc), 0, 4096, FRPC_TIMEOUT_NONE);
        CHECK(rc == FRPC_EPEERLOST && au_now_ms() - c0 < AT_ONCE_MS,
              "a get after the death: %s in %.0f ms", frpc_err_name(rc),
              au_now_ms() - c0);
    }
    /* Transfers to a lost rank are not waited for. */
    double d0 = au_now_ms();
    rc = frpc_mem_deregister(mem, 5000);
    CHECK(rc == 0 && au_now_ms() - d0 < AT_ONCE_MS,
          "deregister after the death: %s in %.0f ms", frpc_err_name(rc),
          au_now_ms() - d0);
    free(buf);
    frpc_stats st;
    /* Emulated, a piece the progress thread was sending as the death was
     * found ends a moment after the transfer's own FRPC_EPEERLOST (its
     * send fails then): give it a second (ASan: once 1 in flight). */
    double s0 = au_now_ms();
    do {
        CHECK(frpc_get_stats(agent, &st) == 0, "frpc_get_stats");
        if (st.calls_in_flight == 0)
            break;
        au_sleep_us(1000);
    } while (au_now_ms() - s0 < 1000);
    CHECK(st.calls_in_flight == 0 && st.mem_registered == 0,
          "%llu in flight, %llu regions at the end",
          (unsigned long long)st.calls_in_flight,
          (unsigned long long)st.mem_registered);
    printf("ok: no transfer in flight, region freed (%d transfers ok)\n", ok);
    double ms;
    rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(rc == FRPC_EPEERLOST, "shutdown with rank 1 lost: %s",
          frpc_err_name(rc));
    printf("ok: rank 0 done\n");
    return 0;
}

/* ---- store-death -------------------------------------------------------- */

static int mode_store_death(void)
{
    start_lost();
    CHECK(nranks == 4, "store-death needs 4 ranks");
    au_barrier();
    if (me == 0) {
        au_sleep_us(100 * 1000);
        die_now();
    }
    int n = 0, rc;
    double t0 = au_now_ms();
    watchdog_start("the calls to rank 0 (no timeout)", BOUND_MS / 1000);
    for (;; n++) {
        frpc_result res;
        rc = au_call(0, "echo", au_mix(0x5700 + n), 64, FRPC_TIMEOUT_NONE,
                     &res);
        CHECK(rc == 0 || rc == FRPC_EPEERLOST, "call %d to rank 0: %s (%s)",
              n, frpc_err_name(rc), au_why(rc, res.error));
        frpc_result_clear(&res);
        if (rc)
            break;
        CHECK(au_now_ms() - t0 < 30000, "rank 0 still answers after 30 s");
    }
    watchdog_done();
    double lat = au_now_ms() - kill_time_ms();
    printf("detection: %d calls to rank 0 succeeded, then FRPC_EPEERLOST "
           "%.1f ms after the kill\n", n, lat);
    CHECK(lat < BOUND_MS, "rank 0's death noticed after %.0f ms", lat);
    double dead_ms = wait_dead(0);
    printf("ok: rank 0 DEAD (%.1f ms after the failed call)\n", dead_ms);
    check_new_calls_fail(0);
    for (int r = 1; r < 4; r++)
        if (r != me)
            for (int i = 0; i < 20; i++)
                au_sync_echo(r, "echo", au_mix(0x5800 + i), 64 + i);
    printf("ok: 40 calls to the other survivors succeeded\n");
    int surv[3] = {1, 2, 3};
    survivors_meet(surv, 3);
    CHECK(wait_count(&lost_dead[0], 1, BOUND_MS),
          "frpc_on_peer_lost never reported rank 0");
    check_reports(0);
    survivors_meet(surv, 3); /* see mode_kill */
    double ms;
    rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(ms < SHUTDOWN_MS + 2000, "shutdown took %.0f ms", ms);
    printf("ok: rank %d done (shutdown %s in %.0f ms)\n", me,
           frpc_err_name(rc), ms);
    return 0;
}

/* ---- barrier-death ---------------------------------------------------- */

/* 3 ranks; rank PEERLOST_DEAD (default 2) dies while the others wait in
 * frpc_barrier without a timeout (fabrpc.h, frpc_barrier): their barrier
 * ends FRPC_EPEERLOST, or FRPC_EBOOTSTRAP when the dead rank is 0 (the
 * store is lost), within the bound; a barrier entered once the loss is
 * known fails at once with FRPC_EPEERLOST. */
static int mode_barrier_death(void)
{
    const char *d = getenv("PEERLOST_DEAD");
    int dead = d && *d ? atoi(d) : 2;
    start_lost();
    CHECK(nranks == 3 && dead >= 0 && dead < 3, "barrier-death: 3 ranks");
    au_barrier();
    if (me == dead) {
        au_sleep_us(300 * 1000); /* the others are in their barrier */
        die_now();
    }
    watchdog_start("a barrier with a rank dying (no timeout)",
                   BOUND_MS / 1000);
    int rc = frpc_barrier(agent, FRPC_TIMEOUT_NONE);
    watchdog_done();
    double lat = au_now_ms() - kill_time_ms();
    int want = dead == 0 ? FRPC_EBOOTSTRAP : FRPC_EPEERLOST;
    CHECK(rc == want, "the barrier rank %d died in: %s, want %s", dead,
          frpc_err_name(rc), frpc_err_name(want));
    CHECK(lat < BOUND_MS, "the barrier ended %.0f ms after the death", lat);
    printf("ok: the barrier rank %d died in ended %s, %.0f ms after the "
           "death\n", dead, frpc_err_name(rc), lat);
    wait_dead(dead);
    double t0 = au_now_ms();
    rc = frpc_barrier(agent, FRPC_TIMEOUT_NONE);
    double ms = au_now_ms() - t0;
    CHECK(rc == FRPC_EPEERLOST, "a barrier after rank %d is DEAD: %s, want "
          "FRPC_EPEERLOST", dead, frpc_err_name(rc));
    CHECK(ms < AT_ONCE_MS, "a barrier after the loss took %.0f ms", ms);
    printf("ok: a barrier entered once rank %d was DEAD failed "
           "FRPC_EPEERLOST in %.2f ms\n", dead, ms);
    frpc_stats st;
    /* At least the dead one (the other survivor may have left by now). */
    CHECK(frpc_get_stats(agent, &st) == 0 && st.peers_lost >= 1 &&
              st.peers_lost <= 2,
          "frpc_stats.peers_lost %llu, rank %d DEAD",
          (unsigned long long)st.peers_lost, dead);

    double sms;
    rc = timed_shutdown(SHUTDOWN_MS, &sms);
    CHECK(sms < SHUTDOWN_MS + 2000, "shutdown took %.0f ms", sms);
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- stuck-sends ------------------------------------------------------ */

/* A rank's pid, for rank 0 to stop and kill it. */
static void pid_of(frpc_request *req, void *user)
{
    (void)user;
    int32_t pid = (int32_t)getpid();
    frpc_respond(req, &pid, sizeof(pid));
}

/* Args of 65,000 B: over shm such a frame is past what goes as injected
 * parts (64,768 B) and within the eager size (64 KiB), so it takes a
 * send buffer (a slot) until the receiver has read it. */
#define STUCK_GROUP 16
#define STUCK_ARGS 65000
#define STUCK_MAX_GROUPS 40
#define STUCK_LIVE_GROUPS 20 /* 320 calls: more than the 256 send buffers */

/* STUCK_GROUP async echo calls to dst (timeout_ms each) into f (NULL
 * where a call did not start); returns how long starting them took, in
 * ms, or -1 if one could not start: with every send buffer taken a
 * call's send waits for one until its deadline (FRPC_ETIMEDOUT), which
 * only calls to the stopped rank may. */
static double stuck_group(int dst, int timeout_ms, uint64_t tag,
                          frpc_future **f)
{
    double t0 = au_now_ms();
    int failed = 0;
    for (int i = 0; i < STUCK_GROUP; i++) {
        void *args = au_msg(au_mix(tag + (uint64_t)i), STUCK_ARGS);
        int rc = frpc_call_async(agent, dst, "echo", args, STUCK_ARGS,
                                 timeout_ms, &f[i]);
        free(args);
        CHECK(rc == 0 || (dst == 1 && rc == FRPC_ETIMEDOUT),
              "call_async to rank %d: %s", dst, frpc_err_name(rc));
        failed |= rc != 0;
    }
    return failed ? -1 : au_now_ms() - t0;
}

/* 3 ranks. Rank 0 stops rank 1 (SIGSTOP) and sends it calls of 65,000 B
 * args until starting one waits (every send buffer is with rank 1, never
 * read) or STUCK_MAX_GROUPS groups; then kills it (SIGKILL). Once rank 1
 * is DEAD, the same calls to rank 2 must leave at once and be answered:
 * before the fix, over shm, the sends to the dead rank never completed
 * and held every send buffer, so rank 0's sends to everyone waited until
 * their deadlines (the stress tool with a rank killed: 8-30 s). */
static int mode_stuck_sends(void)
{
    start_lost();
    au_register("pid", pid_of, NULL, 0);
    CHECK(nranks == 3, "stuck-sends needs 3 ranks");
    au_barrier();
    static const int survivors[] = {0, 2};
    while (me == 1) /* until rank 0 stops, then kills it */
        au_sleep_us(100000);
    if (me == 0) {
        frpc_result res;
        int rc = frpc_call(agent, 1, "pid", NULL, 0, CALL_TIMEOUT_MS, &res);
        CHECK(rc == 0 && res.len == sizeof(int32_t), "pid of rank 1: %s",
              au_why(rc, res.error));
        int32_t pid;
        memcpy(&pid, res.data, sizeof(pid));
        frpc_result_clear(&res);
        CHECK(kill(pid, SIGSTOP) == 0, "SIGSTOP rank 1");
        frpc_future **f = calloc(STUCK_MAX_GROUPS * STUCK_GROUP, sizeof(*f));
        CHECK(f, "calloc");
        int groups = 0;
        double took = 0;
        while (groups < STUCK_MAX_GROUPS && took >= 0) {
            took = stuck_group(1, 1000, 0x5700000u + groups * 64u,
                               f + groups * STUCK_GROUP);
            groups++;
        }
        printf("%d groups of %d calls to the stopped rank 1 (%s)\n", groups,
               STUCK_GROUP,
               took < 0 ? "the last call's send waited out its deadline"
                        : "all started");
        CHECK(kill(pid, SIGKILL) == 0, "SIGKILL rank 1");
        double t0 = au_now_ms();
        while (frpc_peer_state(agent, 1) == FRPC_PEER_ALIVE) {
            CHECK(au_now_ms() - t0 < BOUND_MS, "rank 1 not seen dead");
            au_sleep_us(1000);
        }
        printf("rank 1 seen %s after %.0f ms\n",
               frpc_peer_state(agent, 1) == FRPC_PEER_DEAD ? "DEAD" : "lost",
               au_now_ms() - t0);
        /* Calls to rank 1 end, as they may: answered before the stop, or
         * FRPC_ETIMEDOUT, or FRPC_EPEERLOST. */
        size_t n = (size_t)groups * STUCK_GROUP;
        CHECK(frpc_wait_all(f, n, (int)BOUND_MS) == 0,
              "calls to rank 1 ended");
        for (size_t i = 0; i < n; i++) {
            if (!f[i])
                continue;
            int st = frpc_future_error(f[i], NULL, NULL);
            CHECK(st == 0 || st == FRPC_ETIMEDOUT || st == FRPC_EPEERLOST,
                  "a call to rank 1: %s", frpc_err_name(st));
            frpc_future_free(f[i]);
        }
        /* Now rank 2: more calls than there are send buffers (256),
         * each group must leave at once and be answered. Over shm a send
         * by CMA to rank 1 that it never read held back the completion
         * of every later one (libfabric 1.17 completes them in order):
         * from a slot, the 257th call waited out its deadline. */
        double worst = 0, t1 = au_now_ms();
        for (int g = 0; g < STUCK_LIVE_GROUPS; g++) {
            double ms = stuck_group(2, 10000, 0x6700000u + g * 64u, f);
            worst = ms > worst ? ms : worst;
            CHECK(frpc_wait_all(f, STUCK_GROUP, CALL_TIMEOUT_MS) == 0,
                  "group %d to rank 2 answered", g);
            for (int i = 0; i < STUCK_GROUP; i++)
                au_check_echo(f[i], au_mix(0x6700000u + g * 64u + i),
                              STUCK_ARGS, "call to rank 2");
            for (int i = 0; i < STUCK_GROUP; i++)
                frpc_future_free(f[i]);
        }
        printf("%d groups of calls to rank 2 answered in %.0f ms (the "
               "slowest group took %.0f ms to start)\n", STUCK_LIVE_GROUPS,
               au_now_ms() - t1, worst);
        /* 5 s: a loaded machine's pause, well below the 10 s deadline a
         * send that waits for a buffer would wait out. */
        CHECK(worst < 5000, "calls to rank 2 waited %.0f ms to start",
              worst);
        free(f);
        printf("ok: sends to a rank stopped then killed did not hold back "
               "the sends to a live one\n");
    }
    survivors_meet(survivors, 2);
    double ms;
    timed_shutdown(SHUTDOWN_MS, &ms);
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- storm -------------------------------------------------------------- */

/* One survivor thread: sync calls to the doomed rank until one fails. */
static void *storm_sync(void *arg)
{
    int dead = nranks - 1, n = 0, rc;
    for (;; n++) {
        frpc_result res;
        rc = au_call(dead, "echo", au_mix(0x5707 + n), 64 + n % 200,
                     FRPC_TIMEOUT_NONE, &res);
        CHECK(rc == 0 || rc == FRPC_EPEERLOST, "sync call %d to rank %d: %s "
              "(%s)", n, dead, frpc_err_name(rc), au_why(rc, res.error));
        frpc_result_clear(&res);
        if (rc)
            break;
    }
    *(int *)arg = n;
    return NULL;
}

/*
 * storm: the last rank dies 30-150 ms after a barrier while every other
 * rank sends to it as fast as it can (two threads of sync calls and a
 * window of async ones, no timeouts): on shm the victim is likely to die
 * inside its own progress, its queue locked. Every call must still end.
 */
static int mode_storm(void)
{
    start_lost();
    int dead = nranks - 1;
    au_barrier();
    if (me == dead) {
        uint64_t s = rand_seed();
        unsigned delay = 30 + (unsigned)(au_rand(&s) % 121);
        printf("rank %d dies in %u ms\n", me, delay);
        au_sleep_us(delay * 1000);
        die_now();
    }
    watchdog_start("a call to the dying rank (no timeout)", BOUND_MS / 1000);
    pthread_t t[2];
    int nsync[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, storm_sync, &nsync[i]) == 0,
              "thread");
    int nasync = 0, rc = 0;
    while (rc == 0) {
        enum { W = 16 };
        frpc_future *w[W] = {NULL};
        for (int i = 0; i < W && rc == 0; i++) {
            /* Once the rank is known lost, the call is refused at once
             * (FRPC_EPEERLOST, no future): frpc_call_async's contract. */
            void *args = au_msg(au_mix(0xa5700 + nasync + i), 64);
            rc = frpc_call_async(agent, dead, "echo", args, 64,
                                 FRPC_TIMEOUT_NONE, &w[i]);
            free(args);
            CHECK(rc == 0 || (rc == FRPC_EPEERLOST && !w[i]),
                  "call_async to rank %d: %s", dead, frpc_err_name(rc));
        }
        int refused = rc;
        rc = frpc_wait_all(w, W, FRPC_TIMEOUT_NONE);
        CHECK(rc == 0, "wait_all: %s", frpc_err_name(rc));
        for (int i = 0; i < W && w[i]; i++) {
            int st = frpc_future_error(w[i], NULL, NULL);
            CHECK(st == 0 || st == FRPC_EPEERLOST, "async call to rank %d: "
                  "%s", dead, frpc_err_name(st));
            if (st)
                rc = st;
            else
                nasync++;
            frpc_future_free(w[i]);
        }
        rc = rc ? rc : refused;
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    watchdog_done();
    double lat = au_now_ms() - kill_time_ms();
    printf("detection: %d + %d sync and %d async calls to rank %d "
           "succeeded; all threads had FRPC_EPEERLOST %.1f ms after the "
           "kill\n", nsync[0], nsync[1], nasync, dead, lat);
    CHECK(lat < BOUND_MS, "the last call ended %.0f ms after the kill", lat);
    double ms;
    rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(ms < SHUTDOWN_MS + 2000, "shutdown took %.0f ms", ms);
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- init-death --------------------------------------------------------- */

static void *init_thread(void *arg)
{
    char err[1024];
    frpc_config cfg;
    frpc_agent *a = NULL;
    config_with_errbuf(&cfg, err, sizeof(err));
    int rc = frpc_init(&cfg, &a);
    printf("rank 2: frpc_init %s %s\n", frpc_err_name(rc), err);
    return NULL;
}

static int mode_init_death(void)
{
    const char *r = getenv("FABRPC_RANK");
    int rank = r ? atoi(r) : -1;
    if (rank == 2) {
        me = 2;
        uint64_t s = rand_seed();
        unsigned delay = (unsigned)(au_rand(&s) % 301);
        const char *d = getenv("PEERLOST_DIE_MS"); /* to try one moment */
        if (d && *d)
            delay = (unsigned)atoi(d);
        printf("rank 2 dies %u ms after starting frpc_init\n", delay);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, init_thread, NULL) == 0, "thread");
        au_sleep_us(delay * 1000);
        die_now();
    }
    char err[1024];
    frpc_config cfg;
    config_with_errbuf(&cfg, err, sizeof(err));
    me = rank;
    double t0 = au_now_ms();
    int rc = frpc_init(&cfg, &agent);
    double ms = au_now_ms() - t0;
    if (rc != 0) {
        printf("init: failed %s in %.0f ms: %s\n", frpc_err_name(rc), ms, err);
        CHECK(ms < BOUND_MS, "frpc_init took %.0f ms", ms);
        printf("ok: rank %d: frpc_init failed in bounded time\n", rank);
        return 0;
    }
    nranks = frpc_world_size(agent);
    printf("init: succeeded in %.0f ms\n", ms);
    double dead = wait_dead(2);
    printf("ok: rank %d: rank 2 DEAD %.1f ms after init returned\n", rank,
           dead);
    rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(ms < SHUTDOWN_MS + 2000, "shutdown took %.0f ms", ms);
    printf("ok: rank %d done\n", rank);
    return 0;
}

/* ---- late-shutdown ------------------------------------------------------ */

static int mode_late_shutdown(void)
{
    au_start();
    CHECK(nranks == 2, "late-shutdown needs 2 ranks");
    au_barrier();
    double ms;
    if (me == 1) {
        au_sleep_us(4000000);
        int rc = timed_shutdown(SHUTDOWN_MS, &ms);
        CHECK(ms < SHUTDOWN_MS + 2000, "rank 1's shutdown took %.0f ms", ms);
        printf("ok: rank 1's late shutdown returned %s in %.0f ms\n",
               frpc_err_name(rc), ms);
        return 0;
    }
    int rc = timed_shutdown(1000, &ms);
    CHECK(rc == FRPC_ETIMEDOUT, "shutdown(GRACEFUL, 1000) with rank 1 4 s "
          "late: %s, want FRPC_ETIMEDOUT", frpc_err_name(rc));
    /* The promise is 1000 ms plus the shutdown's own work on an idle
     * machine (the figure printed below); a loaded one gets more. */
    CHECK(ms < 3500, "shutdown(GRACEFUL, 1000) took %.0f ms (> 1000 + 2500)",
          ms);
    printf("ok: rank 0's shutdown(GRACEFUL, 1000) ended FRPC_ETIMEDOUT in "
           "%.0f ms\n", ms);
    return 0;
}

/* ---- reinit ------------------------------------------------------------- */

static int mode_reinit(void)
{
    double worst = 0, init_ms = 0, shut_ms = 0, t_all = au_now_ms();
    for (int k = 0; k < 20; k++) {
        double t0 = au_now_ms();
        au_start();
        CHECK(nranks == 2, "reinit needs 2 ranks");
        init_ms += au_now_ms() - t0;
        au_register("echo", echo, NULL, FRPC_INLINE);
        au_barrier();
        au_sync_echo(1 - me, "echo", au_mix(0x4e17 + k), 100 + k);
        au_barrier();
        double t1 = au_now_ms();
        int rc = frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, 30000);
        CHECK(rc == 0, "round %d: frpc_shutdown: %s", k, frpc_err_name(rc));
        shut_ms += au_now_ms() - t1;
        double ms = au_now_ms() - t0;
        worst = ms > worst ? ms : worst;
    }
    printf("rounds: 20 in %.0f ms: init %.0f ms, shutdown %.0f ms on "
           "average, slowest round %.0f ms\n", au_now_ms() - t_all,
           init_ms / 20, shut_ms / 20, worst);
    printf("ok: rank %d: 20 rounds of init, a call each way, shutdown\n", me);
    return 0;
}

/* ---- first-call --------------------------------------------------------- */

/* One echo call of 64 bytes to p with a 10 ms timeout, sync or async: its
 * status; *ms its duration, *start_ms how long frpc_call_async itself
 * took (async). */
static int call_10ms(int p, int async, uint64_t seed, double *ms,
                     double *start_ms)
{
    double t0 = au_now_ms();
    int rc;
    *start_ms = 0;
    if (!async) {
        frpc_result res;
        rc = au_call(p, "echo", seed, 64, 10, &res);
        if (rc == 0)
            CHECK(au_reply_ok(res.data, res.len, seed, 64), "wrong reply");
        frpc_result_clear(&res);
    } else {
        frpc_future *f = NULL;
        void *args = au_msg(seed, 64);
        rc = frpc_call_async(agent, p, "echo", args, 64, 10, &f);
        *start_ms = au_now_ms() - t0;
        free(args);
        CHECK(rc == 0, "call_async to %d: %s", p, frpc_err_name(rc));
        rc = frpc_future_wait(f, 20000);
        if (rc == 0)
            au_check_echo(f, seed, 64, "async first call");
        frpc_future_free(f);
    }
    *ms = au_now_ms() - t0;
    return rc;
}

/* The first call to each peer must cost no more than the next one (no
 * connection set-up on the way): with a 10 ms timeout it succeeds, and
 * frpc_call_async returns within 5 ms. A first call that misses either
 * bound is judged by a second call to the same peer: if that one is not
 * well inside the bound too, the machine is too loaded to tell (said, not
 * failed); if it is, the first call paid for something the second did
 * not. A cost of connection set-up is paid on the way to every peer, so
 * one peer that shows it is noise (CI under TSan: both callers of one
 * rank waited 11 and 16 ms inside frpc_call_async, as when shm's lock on
 * that rank's region is held by a descheduled thread): it takes two
 * peers of this rank to convict. */
static int mode_first_call(void)
{
    au_start();
    au_register("echo", echo, NULL, FRPC_INLINE);
    au_barrier();
    double worst_start = 0, worst[2] = {0, 0};
    int unclear = 0, convicted = 0;
    char why[2][256] = {"", ""};
    for (int p = 0; p < nranks; p++) {
        if (p == me)
            continue;
        /* Half the peers first see a sync call, half an async one. */
        int async = ((p - me + nranks) % nranks) % 2;
        double ms, start_ms, ms2, start2;
        int rc = call_10ms(p, async, au_mix(0xf125700 + me * 100 + p), &ms,
                           &start_ms);
        worst[async] = ms > worst[async] ? ms : worst[async];
        worst_start = start_ms > worst_start ? start_ms : worst_start;
        if (rc == 0 && start_ms < 5)
            continue;
        CHECK(rc == 0 || rc == FRPC_ETIMEDOUT, "first %s call to %d: %s",
              async ? "async" : "sync", p, frpc_err_name(rc));
        int rc2 = call_10ms(p, async, au_mix(0xf125800 + me * 100 + p), &ms2,
                            &start2);
        /* Only a second call well inside the bound (half of it) shows
         * that the first paid for something: one that just made it
         * (CI once: 10.21 ms then 9.78 ms) is the machine's noise. */
        int clearly_fast = rc2 == 0 && ms2 < 5 && start2 < 5;
        if (clearly_fast) {
            snprintf(why[convicted % 2], sizeof(why[0]),
                     "first %s call to %d: %s in %.2f ms (call_async %.3f "
                     "ms), but a second one: %s in %.2f ms (call_async "
                     "%.3f ms)",
                     async ? "async" : "sync", p, frpc_err_name(rc), ms,
                     start_ms, frpc_err_name(rc2), ms2, start2);
            printf("note: %s\n", why[convicted % 2]);
            convicted++;
            CHECK(convicted < 2, "two peers' first calls paid for "
                  "something later ones did not: %s; %s", why[0], why[1]);
            continue;
        }
        printf("note: first call to %d missed its bound (%s in %.2f ms) and "
               "a second one was not clearly faster (%s in %.2f ms): too "
               "loaded to tell\n", p, frpc_err_name(rc), ms,
               frpc_err_name(rc2), ms2);
        unclear++;
    }
    printf("first calls: slowest sync %.2f ms, async completion %.2f ms, "
           "frpc_call_async itself %.3f ms%s\n", worst[0], worst[1],
           worst_start, unclear || convicted ? " (some unclear: machine "
                                               "loaded)" : "");
    printf("ok: rank %d's first calls with a 10 ms timeout to every rank "
           "cost no more than later ones\n", me);
    au_barrier();
    au_finish();
    return 0;
}

/* ---- vanish ------------------------------------------------------------- */

/* Writes $PEERLOST_DIR/ready.<me>: the script cuts the link once both
 * ranks wrote theirs. */
static void say_ready(void)
{
    char name[32];
    snprintf(name, sizeof(name), "ready.%d", me);
    touch_dir_file(name);
}

/* PEERLOST_VANISH_BULK: while the link goes down, each rank also loops
 * 16 MiB gets from the other's region and 16 MiB calls (rendezvous) to
 * its sink, with no timeout: they must end FRPC_EPEERLOST, and the
 * shutdown after must not crash (it did, in libfabric's fi_close of the
 * endpoint, while the provider still held a read to the vanished host). */
#define VANISH_BULK (16u << 20)
static uint8_t *vanish_buf;
static frpc_mem *vanish_mem;
static uint8_t vanish_peer_desc[FRPC_MEM_DESC_SIZE];

static void *vanish_bulk_main(void *arg)
{
    int gets = arg != NULL, rc, n = 0;
    uint8_t *args = gets ? NULL : calloc(1, VANISH_BULK);
    CHECK(gets || args, "malloc");
    do {
        frpc_result res = {0};
        rc = gets ? frpc_get(vanish_mem, 0, vanish_peer_desc,
                             sizeof(vanish_peer_desc), 0, VANISH_BULK,
                             FRPC_TIMEOUT_NONE)
                  : frpc_call(agent, 1 - me, "sink", args, VANISH_BULK,
                              FRPC_TIMEOUT_NONE, &res);
        frpc_result_clear(&res);
        n += rc == 0;
    } while (rc == 0);
    CHECK(rc == FRPC_EPEERLOST, "16 MiB %s to the vanished rank: %s",
          gets ? "get" : "call", frpc_err_name(rc));
    printf("vanish: %d 16 MiB %s, then FRPC_EPEERLOST\n", n,
           gets ? "gets" : "calls");
    free(args);
    return NULL;
}

/* Two ranks on two hosts (network namespaces, run_host_vanish.sh) call
 * each other's "hold" with no timeout; the script then takes the link
 * down, silently (no reset), and writes the time as killtime. Each call
 * must end FRPC_EPEERLOST (the store's keepalive, config.peer_timeout_ms),
 * and each rank see the other lost. */
static int mode_vanish(void)
{
    au_start();
    CHECK(nranks == 2, "vanish needs 2 ranks");
    au_register("hold", hold_forever, NULL, 0);
    int bulk = getenv("PEERLOST_VANISH_BULK") != NULL;
    pthread_t bulk_t[2];
    if (bulk) {
        CHECK((vanish_buf = calloc(1, VANISH_BULK)), "malloc");
        CHECK(frpc_mem_register(agent, vanish_buf, VANISH_BULK,
                                FRPC_MEM_REMOTE_READ, &vanish_mem) == 0,
              "frpc_mem_register");
        CHECK(frpc_mem_describe(vanish_mem, 0, VANISH_BULK, rma_desc) == 0,
              "describe");
        au_register("desc", give_desc, NULL, 0);
        au_register("sink", sink, NULL, 0);
    }
    au_barrier();
    if (bulk) {
        frpc_result res;
        int rc = frpc_call(agent, 1 - me, "desc", NULL, 0, 30000, &res);
        CHECK(rc == 0 && res.len == FRPC_MEM_DESC_SIZE, "desc: %s",
              frpc_err_name(rc));
        memcpy(vanish_peer_desc, res.data, sizeof(vanish_peer_desc));
        frpc_result_clear(&res);
        au_barrier(); /* both hold the other's descriptor */
        CHECK(pthread_create(&bulk_t[0], NULL, vanish_bulk_main, "gets") == 0,
              "thread");
        CHECK(pthread_create(&bulk_t[1], NULL, vanish_bulk_main, NULL) == 0,
              "thread");
    }
    say_ready();
    frpc_result res;
    int rc = frpc_call(agent, 1 - me, "hold", NULL, 0, FRPC_TIMEOUT_NONE,
                       &res);
    double lat = au_now_ms() - kill_time_ms();
    CHECK(rc == FRPC_EPEERLOST, "call to the vanished rank %d: %s (%s)",
          1 - me, frpc_err_name(rc), au_why(rc, res.error));
    printf("vanish: the call to rank %d ended FRPC_EPEERLOST %.0f ms after "
           "the link went down (%s)\n", 1 - me, lat, res.error);
    frpc_result_clear(&res);
    CHECK(lat < BOUND_MS, "noticed after %.0f ms", lat);
    CHECK(frpc_peer_state(agent, 1 - me) == FRPC_PEER_DEAD,
          "rank %d not DEAD", 1 - me);
    if (bulk) {
        for (int i = 0; i < 2; i++)
            pthread_join(bulk_t[i], NULL);
        /* Transfers to a lost rank are not waited for. */
        CHECK(frpc_mem_deregister(vanish_mem, 5000) == 0, "deregister");
        free(vanish_buf);
    }
    double ms;
    rc = timed_shutdown(SHUTDOWN_MS, &ms);
    printf("ok: rank %d saw rank %d vanish; shutdown %s in %.0f ms\n", me,
           1 - me, frpc_err_name(rc), ms);
    return 0;
}

/* ---- cutoff ------------------------------------------------------------- */

/* 1 once $PEERLOST_DIR/name exists; waits up to BOUND_MS for it. */
static void wait_file(const char *name)
{
    char path[600];
    dir_path(path, sizeof(path), "%s", name);
    double t0 = au_now_ms();
    while (access(path, F_OK) != 0) {
        CHECK(au_now_ms() - t0 < 3 * BOUND_MS, "no %s after %.0f ms", name,
              3 * BOUND_MS);
        au_sleep_us(10000);
    }
}

/* Three ranks on three hosts (run_host_cutoff.sh): rank 2's host is cut
 * off (silently), so ranks 0 and 1 mark it lost through the store, but
 * rank 2 learns only of rank 0 (its store connection times out). Once
 * the network is back, rank 2's call to rank 1, with no timeout, must
 * end FRPC_EPEERLOST (rank 1 tells it that it drops what it sends), and
 * rank 2 then see rank 1 lost. Before: the call waited until rank 1's
 * process ended. */
/* The start of run_host_cutoff.sh's modes: three ranks, one per host,
 * each ready (the script cuts the network once all are). */
static void start_on_three_hosts(const char *mode)
{
    au_start();
    CHECK(nranks == 3, "%s needs 3 ranks", mode);
    au_register("ready", ready, NULL, FRPC_INLINE);
    au_barrier();
    say_ready();
}

static int mode_cutoff(void)
{
    start_on_three_hosts("cutoff");
    if (me != 2) {
        wait_dead(2);
        printf("cutoff: rank 2 DEAD here %.0f ms after the cut\n",
               au_now_ms() - kill_time_ms());
        wait_file("done");
    } else {
        wait_dead(0);
        CHECK(frpc_peer_state(agent, 1) == FRPC_PEER_ALIVE,
              "rank 1 already lost before the network is back");
        wait_file("healed");
        double t0 = au_now_ms();
        frpc_result res;
        int rc = frpc_call(agent, 1, "ready", NULL, 0, FRPC_TIMEOUT_NONE,
                           &res);
        double ms = au_now_ms() - t0;
        printf("cutoff: the call to rank 1 after the network came back: %s "
               "in %.0f ms (%s)\n", frpc_err_name(rc), ms,
               au_why(rc, res.error));
        CHECK(rc == FRPC_EPEERLOST, "call to rank 1: %s",
              frpc_err_name(rc));
        CHECK(res.error && strstr(res.error, "marked this rank lost"),
              "its error does not say why: %s", au_why(rc, res.error));
        frpc_result_clear(&res);
        CHECK(ms < BOUND_MS, "it took %.0f ms", ms);
        printf("cutoff: rank 1 DEAD here %.0f ms later\n", wait_dead(1));
        touch_dir_file("done");
    }
    double ms;
    int rc = timed_shutdown(SHUTDOWN_MS, &ms);
    printf("ok: rank %d: shutdown %s in %.0f ms\n", me, frpc_err_name(rc),
           ms);
    return 0;
}

/* Rank 2's host cut off for less than peer_timeout_ms - 3 s
 * (run_host_cutoff.sh, fabrpc.h's peer_timeout_ms): nobody is taken for
 * lost, and once the network is back (and peer_timeout_ms has passed
 * since the cut) every rank calls every other. */
static int mode_blip(void)
{
    start_on_three_hosts("blip");
    wait_file("healed");
    for (int r = 0; r < nranks; r++) {
        if (r == me)
            continue;
        CHECK(frpc_peer_state(agent, r) == FRPC_PEER_ALIVE,
              "rank %d taken for lost after a short outage", r);
        frpc_result res;
        int rc = frpc_call(agent, r, "ready", NULL, 0, 20000, &res);
        CHECK(rc == 0, "the call to rank %d after the outage: %s", r,
              au_why(rc, res.error));
        frpc_result_clear(&res);
    }
    au_barrier();
    double ms;
    int rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(rc == 0, "shutdown: %s", frpc_err_name(rc));
    printf("ok: rank %d: nobody lost after the outage; shutdown in %.0f "
           "ms\n", me, ms);
    return 0;
}

/* ---- late-callback ------------------------------------------------------ */

/* frpc_on_peer_lost's promises about when it is set: a loss found before
 * the function was set is reported right after it is set; a NULL
 * function stops the reports. 4 ranks: rank 3 dies first, rank 0 sets its
 * function only once it sees 3 DEAD; then it sets NULL and has rank 2 die
 * (a call to its "die"): no report for 2 may come. */
static int mode_late_callback(void)
{
    au_start();
    CHECK(nranks == 4, "late-callback needs 4 ranks");
    au_register("die", die, NULL, FRPC_INLINE);
    au_barrier();
    if (me == 3)
        die_now();
    if (me == 0) {
        wait_dead(3);
        CHECK(frpc_on_peer_lost(agent, on_lost, NULL) == 0, "on_peer_lost");
        double t0 = au_now_ms();
        while (atomic_load(&lost_dead[3]) == 0) {
            CHECK(au_now_ms() - t0 < BOUND_MS, "no report for rank 3, lost "
                  "before the function was set");
            au_sleep_us(1000);
        }
        printf("ok: rank 3, lost before the function was set, reported "
               "%.1f ms after it was set\n", au_now_ms() - t0);
        CHECK(frpc_on_peer_lost(agent, NULL, NULL) == 0, "NULL fn");
        frpc_result res;
        int rc = frpc_call(agent, 2, "die", NULL, 0, FRPC_TIMEOUT_NONE, &res);
        CHECK(rc == FRPC_EPEERLOST, "call to the dying rank 2: %s",
              frpc_err_name(rc));
        frpc_result_clear(&res);
        wait_dead(2);
        au_sleep_us(300000); /* a report would come within this */
        CHECK(atomic_load(&lost_dead[2]) == 0 &&
                  atomic_load(&lost_dead[3]) == 1,
              "reports after NULL: rank 2 %d, rank 3 %d",
              atomic_load(&lost_dead[2]), atomic_load(&lost_dead[3]));
        printf("ok: after a NULL function, rank 2's death was not "
               "reported\n");
    } else if (me == 1) {
        wait_dead(3);
        wait_dead(2);
    } else { /* rank 2: serves until rank 0's call kills it */
        au_sleep_us((useconds_t)(BOUND_MS * 1000));
        CHECK(0, "rank 2 was never told to die");
    }
    double ms;
    timed_shutdown(SHUTDOWN_MS, &ms);
    printf("ok: rank %d done\n", me);
    return 0;
}

/* The last step of a survivor of a loss: its graceful shutdown says so. */
static void shutdown_after_loss(void)
{
    double ms;
    int rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(rc == FRPC_EPEERLOST, "shutdown: %s, want FRPC_EPEERLOST",
          frpc_err_name(rc));
    printf("ok: rank %d done\n", me);
}

/* ---- fn-replace --------------------------------------------------------- */

static atomic_int fr_running, fr_runs, fr_inner_rc = 1;

static void fr_fn(frpc_agent *a, int rank, int state, const char *why,
                  void *user)
{
    (void)why;
    printf("peer lost: rank %d state %d, report %d\n", rank, state,
           atomic_load(&fr_runs) + 1);
    /* From inside: must not wait for us. Before the main thread may set
     * NULL (it waits for fr_running), or this would set fn after it. */
    if (atomic_load(&fr_runs) == 0)
        atomic_store(&fr_inner_rc, frpc_on_peer_lost(a, fr_fn, user));
    atomic_store(&fr_running, 1);
    au_sleep_us(1000000);
    atomic_fetch_add(&fr_runs, 1);
    atomic_store(&fr_running, 0);
}

static int mode_fn_replace(void)
{
    au_start();
    CHECK(nranks == 2, "fn-replace needs 2 ranks");
    CHECK(frpc_on_peer_lost(agent, fr_fn, NULL) == 0, "on_peer_lost");
    au_barrier();
    if (me == 1)
        die_now();
    double t0 = au_now_ms();
    while (!atomic_load(&fr_running)) {
        CHECK(au_now_ms() - t0 < BOUND_MS, "rank 1's death not reported");
        au_sleep_us(1000);
    }
    int rc = frpc_on_peer_lost(agent, NULL, NULL);
    int running = atomic_load(&fr_running), runs = atomic_load(&fr_runs);
    CHECK(rc == 0, "frpc_on_peer_lost(NULL): %s", frpc_err_name(rc));
    /* runs is 1, or 2 if this thread was so late that the replay the
     * inner set asked for began before NULL was set. */
    CHECK(!running && runs >= 1, "frpc_on_peer_lost(NULL) returned while "
          "the report still ran (running %d, %d reports done)", running,
          runs);
    CHECK(atomic_load(&fr_inner_rc) == 0, "frpc_on_peer_lost from inside "
          "the report: %s", frpc_err_name(atomic_load(&fr_inner_rc)));
    au_sleep_us(500000); /* a report after NULL would come within this */
    CHECK(atomic_load(&fr_runs) == runs, "%d reports after NULL was set, "
          "want %d", atomic_load(&fr_runs), runs);
    printf("ok: frpc_on_peer_lost returned after the old function's "
           "report, and no report came after NULL\n");
    shutdown_after_loss();
    return 0;
}

/* ---- fn-set-in-handler ---------------------------------------------------- */

/* The report calls this rank's pool handler "set_fn", which sets another
 * function: waiting for the report, which waits for this very handler,
 * would never end (pre-fix it ended only at the report's call timeout). */
#define SH_CALL_MS 10000

static atomic_int sh_call_rc = 1, sh_set_rc = 1, sh_other_runs;
static atomic_int sh_reports;
static _Atomic double sh_call_ms;

static void sh_other(frpc_agent *a, int rank, int state, const char *why,
                     void *user)
{
    (void)a, (void)rank, (void)state, (void)why, (void)user;
    atomic_fetch_add(&sh_other_runs, 1);
}

static void sh_set_fn(frpc_request *req, void *user)
{
    int rc = frpc_on_peer_lost(agent, sh_other, NULL);
    frpc_respond(req, &rc, sizeof(rc));
}

static void sh_fn(frpc_agent *a, int rank, int state, const char *why,
                  void *user)
{
    (void)state, (void)why, (void)user;
    if (atomic_load(&sh_reports) == 0) {
        frpc_result res;
        double t0 = au_now_ms();
        int rc = frpc_call(a, me, "set_fn", NULL, 0, SH_CALL_MS, &res);
        atomic_store(&sh_call_ms, au_now_ms() - t0);
        if (rc == 0 && res.len == sizeof(int))
            atomic_store(&sh_set_rc, *(int *)res.data);
        atomic_store(&sh_call_rc, rc);
        frpc_result_clear(&res);
    }
    printf("peer lost: rank %d, reported\n", rank);
    atomic_fetch_add(&sh_reports, 1);
}

static int mode_fn_set_in_handler(void)
{
    au_start();
    CHECK(nranks == 2, "fn-set-in-handler needs 2 ranks");
    au_register("set_fn", sh_set_fn, NULL, 0);
    CHECK(frpc_on_peer_lost(agent, sh_fn, NULL) == 0, "on_peer_lost");
    au_barrier();
    if (me == 1)
        die_now();
    CHECK(wait_count(&sh_reports, 1, BOUND_MS + SH_CALL_MS),
          "rank 1's death not reported");
    int rc = atomic_load(&sh_call_rc), set = atomic_load(&sh_set_rc);
    CHECK(rc == 0, "the report's call to set_fn: %s after %.0f ms (the "
          "handler waited for the report that waited for it)",
          frpc_err_name(rc), atomic_load(&sh_call_ms));
    CHECK(set == FRPC_EDEADLK, "frpc_on_peer_lost in the handler the "
          "report waits on: %s, want FRPC_EDEADLK", frpc_err_name(set));
    CHECK(atomic_load(&sh_call_ms) < AT_ONCE_MS, "FRPC_EDEADLK came after "
          "%.0f ms", atomic_load(&sh_call_ms));
    printf("ok: frpc_on_peer_lost in a handler the report waits on: "
           "FRPC_EDEADLK after %.0f ms\n", atomic_load(&sh_call_ms));
    au_sleep_us(300000); /* a replay to sh_other would come within this */
    CHECK(atomic_load(&sh_other_runs) == 0 && atomic_load(&sh_reports) == 1,
          "the refused function was set: %d reports to it, %d to the old",
          atomic_load(&sh_other_runs), atomic_load(&sh_reports));
    rc = frpc_on_peer_lost(agent, sh_other, NULL);
    CHECK(rc == 0, "frpc_on_peer_lost from main: %s", frpc_err_name(rc));
    CHECK(wait_count(&sh_other_runs, 1, BOUND_MS),
          "no replay to the new function");
    printf("ok: the old function stayed set; set from main, the new one "
           "got the replay\n");
    shutdown_after_loss();
    return 0;
}

/* ---- left-in-shutdown ----------------------------------------------------- */

static int mode_left_in_shutdown(void)
{
    au_start();
    CHECK(nranks >= 3, "left-in-shutdown needs 3 ranks or more");
    CHECK(frpc_on_peer_lost(agent, on_lost, NULL) == 0, "on_peer_lost");
    au_barrier();
    if (me == 0) {
        au_sleep_us(1000000); /* rank 1 is in its shutdown's barrier */
        die_now();
    }
    if (me == 1) {
        double ms;
        int rc = timed_shutdown(20000, &ms);
        CHECK(rc == FRPC_EPEERLOST, "shutdown with rank 0 lost in it: %s, "
              "want FRPC_EPEERLOST", frpc_err_name(rc));
        CHECK(ms < BOUND_MS, "shutdown took %.0f ms", ms);
        printf("ok: rank 1's shutdown ended FRPC_EPEERLOST when rank 0 "
               "died in it\n");
        printf("ok: rank 1 done\n");
        return 0;
    }
    wait_dead(0);
    double t0 = au_now_ms();
    int st;
    while ((st = frpc_peer_state(agent, 1)) == FRPC_PEER_ALIVE) {
        CHECK(au_now_ms() - t0 < BOUND_MS, "rank 1 still ALIVE");
        au_sleep_us(1000);
    }
    CHECK(st == FRPC_PEER_LEFT, "rank 1, which called frpc_shutdown, is "
          "%d, want LEFT (2)", st);
    au_sleep_us(300000); /* a second report would come within this */
    CHECK(atomic_load(&lost_left[1]) == 1 && atomic_load(&lost_dead[1]) == 0,
          "rank 1 reported %d LEFT, %d DEAD", atomic_load(&lost_left[1]),
          atomic_load(&lost_dead[1]));
    printf("ok: rank %d sees rank 1 LEFT after rank 0 died in its "
           "shutdown\n", me);
    double ms;
    timed_shutdown(SHUTDOWN_MS, &ms);
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- bye-bound ----------------------------------------------------------- */

/* shutdown(IMMEDIATE, 50) with a goodbye unanswered: well under the
 * goodbye's own cap (500 ms), which it must not wait for. Under a
 * sanitizer the rest of the shutdown (closing tcp's endpoint, freeing its
 * pools) took 483 ms by itself (TSan, CI): there the bound only says the
 * shutdown ends. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define BYE_BOUND_MS 2000
#else
#define BYE_BOUND_MS 450
#endif

/* A barrier, then rank 0 (the store) dies; the others return once they
 * see it DEAD. */
static void store_dies_after_barrier(void)
{
    au_barrier();
    if (me == 0) {
        au_sleep_us(500000); /* the others have left the barrier it serves */
        die_now();
    }
    wait_dead(0);
}

static void nap(frpc_request *req, void *user)
{
    au_sleep_us(2000000);
    frpc_respond(req, NULL, 0);
}

static int mode_bye_bound(void)
{
    au_start();
    CHECK(nranks == 3, "bye-bound needs 3 ranks");
    au_register("nap", nap, NULL, FRPC_INLINE);
    store_dies_after_barrier();
    if (me == 1) {
        frpc_future *f = NULL;
        int rc = frpc_call_async(agent, 2, "nap", NULL, 0, 10000, &f);
        CHECK(rc == 0, "nap: %s", frpc_err_name(rc));
        au_sleep_us(100000); /* rank 2's polling thread is in it */
        double t0 = au_now_ms();
        rc = frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 50);
        double ms = au_now_ms() - t0;
        agent = NULL;
        printf("shutdown(IMMEDIATE, 50): %s in %.0f ms\n",
               frpc_err_name(rc), ms);
        CHECK(ms < BYE_BOUND_MS, "shutdown(IMMEDIATE, 50) took %.0f ms "
              "(its goodbye is bounded by the timeout)", ms);
        frpc_future_free(f);
        printf("ok: rank 1's goodbye kept to shutdown's timeout\n");
    } else {
        au_sleep_us(3000000); /* the nap, and rank 1's end */
        double ms;
        timed_shutdown(SHUTDOWN_MS, &ms);
    }
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- answers-before-bye --------------------------------------------------- */

static atomic_int slow_started, abye_shutting;

/* The answer's size: PEERLOST_ABYE_BYTES (0 by default; 256 KiB goes by
 * rendezvous, read by the caller after the handler returned). */
static size_t abye_bytes(void)
{
    const char *s = getenv("PEERLOST_ABYE_BYTES");
    return s ? (size_t)strtoull(s, NULL, 10) : 0;
}

static uint8_t abye_byte(size_t i) { return (uint8_t)(i * 7 + 3); }

/* PEERLOST_ABYE_NAP_MS: with a value past 1500, slow_answer naps that
 * long once rank 2's shutdown has begun, past the half second after
 * which its goodbye goes anyway. Without it (0), slow_answer answers as
 * soon as rank 1 has seen a call refused ($PEERLOST_DIR/abye_refused):
 * a fixed nap (300 ms, once) left about 200 ms on either side, which a
 * loaded machine took (the refusal not yet begun when the nap ended, or
 * the answer sent after the half second). */
static long abye_nap_ms(void)
{
    const char *s = getenv("PEERLOST_ABYE_NAP_MS");
    return s ? atol(s) : 0;
}

/* How long slow_answer waits for rank 1's word that a call was refused:
 * past it, it answers anyway and rank 1's checks say what went wrong. */
#define ABYE_REFUSAL_WAIT_MS 5000.0

static void quick_answer(frpc_request *req, void *user)
{
    (void)user;
    frpc_respond(req, NULL, 0);
}

static void slow_answer(frpc_request *req, void *user)
{
    (void)user;
    size_t n = abye_bytes();
    uint8_t *b = n ? malloc(n) : NULL;
    for (size_t i = 0; b && i < n; i++)
        b[i] = abye_byte(i);
    atomic_store(&slow_started, 1);
    double t0 = au_now_ms();
    while (!atomic_load(&abye_shutting) && au_now_ms() - t0 < BOUND_MS)
        au_sleep_us(1000);
    if (abye_nap_ms() > 0) {
        au_sleep_us(abye_nap_ms() * 1000);
    } else {
        char path[600];
        dir_path(path, sizeof(path), "abye_refused");
        t0 = au_now_ms();
        while (access(path, F_OK) != 0 &&
               au_now_ms() - t0 < ABYE_REFUSAL_WAIT_MS)
            au_sleep_us(1000);
    }
    frpc_respond(req, b, b ? n : 0);
    free(b);
}

/* 1 if res holds the answer slow_answer sends. */
static int abye_answer_whole(const frpc_result *res)
{
    size_t n = abye_bytes();
    if (res->len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (((const uint8_t *)res->data)[i] != abye_byte(i))
            return 0;
    return 1;
}

static int mode_answers_before_bye(void)
{
    au_start();
    CHECK(nranks == 3, "answers-before-bye needs 3 ranks");
    au_register("slow", slow_answer, NULL, 0); /* on the pool */
    au_register("quick", quick_answer, NULL, FRPC_INLINE);
    store_dies_after_barrier();
    if (me == 1) {
        frpc_result res;
        frpc_future *slow = NULL;
        double t0 = au_now_ms();
        int rc = frpc_call_async(agent, 2, "slow", NULL, 0, CALL_TIMEOUT_MS,
                                 &slow);
        CHECK(rc == 0, "slow: %s", frpc_err_name(rc));
        /* Calls made while its handler runs: answered until rank 2's
         * shutdown refuses them, then FRPC_EPEERLOST, its answer to slow
         * still to come. */
        int answered = 0, refused_ms = -1;
        while (!frpc_future_test(slow)) {
            rc = frpc_call(agent, 2, "quick", NULL, 0, CALL_TIMEOUT_MS, &res);
            if (rc == FRPC_EPEERLOST && !frpc_future_test(slow) &&
                strstr(res.error, "is shutting down")) {
                refused_ms = (int)(au_now_ms() - t0);
                frpc_result_clear(&res);
                touch_dir_file("abye_refused"); /* slow may answer now */
                break;
            }
            CHECK(rc == 0 || frpc_future_test(slow), "quick, while slow "
                  "runs: %s, want 0 or a refusal", au_why(rc, res.error));
            answered += rc == 0;
            frpc_result_clear(&res);
            au_sleep_us(2000);
        }
        long nap = abye_nap_ms();
        rc = frpc_future_wait(slow, CALL_TIMEOUT_MS);
        CHECK(frpc_future_take(slow, &res) == rc, "future_take");
        frpc_future_free(slow);
        double took = au_now_ms() - t0;
        if (nap > 1500) {
            /* Past the half second its goodbye goes: the call ends well
             * before the handler's nap. */
            CHECK(rc == FRPC_EPEERLOST && took < nap - 500,
                  "slow, its handler napping %ld ms: %s after %.0f ms, "
                  "want FRPC_EPEERLOST by its goodbye, at most %ld ms",
                  nap, au_why(rc, res.error), took, nap - 500);
            frpc_result_clear(&res);
            printf("ok: a handler napping %ld ms: its goodbye ended the "
                   "call after %.0f ms (refused from %d ms on)\n", nap, took,
                   refused_ms);
        } else {
            CHECK(rc == 0, "the call rank 2 answered in its shutdown: %s, "
                  "want 0 (its goodbye overtook its answer?)",
                  au_why(rc, res.error));
            CHECK(abye_answer_whole(&res), "the answer: %zu bytes, want %zu "
                  "as sent", res.len, abye_bytes());
            frpc_result_clear(&res);
            printf("ok: rank 2 answered in its shutdown, before its goodbye "
                   "(%zu bytes, %.0f ms)\n", abye_bytes(), took);
        }
        CHECK(refused_ms >= 0, "no call was refused while slow ran "
              "(%d answered)", answered);
        printf("ok: a call while its handler ran ended FRPC_EPEERLOST "
               "(refused, %d ms in; %d answered before)\n", refused_ms,
               answered);
        /* A new call once it said goodbye: refused, or it is lost. */
        t0 = au_now_ms();
        while (frpc_peer_state(agent, 2) == FRPC_PEER_ALIVE) {
            CHECK(au_now_ms() - t0 < BOUND_MS, "rank 2 still ALIVE");
            au_sleep_us(1000);
        }
        rc = frpc_call(agent, 2, "slow", NULL, 0, CALL_TIMEOUT_MS, &res);
        CHECK(rc == FRPC_EPEERLOST, "a call after rank 2's goodbye: %s",
              au_why(rc, res.error));
        frpc_result_clear(&res);
        printf("ok: a call after its goodbye ends FRPC_EPEERLOST\n");
    } else {
        double t0 = au_now_ms();
        while (!atomic_load(&slow_started)) {
            CHECK(au_now_ms() - t0 < BOUND_MS, "rank 1's call never came");
            au_sleep_us(1000);
        }
        /* Its handler waits from now (for rank 1's refusal, or
         * abye_nap_ms): shutdown starts while it runs. */
        atomic_store(&abye_shutting, 1);
    }
    double ms;
    timed_shutdown(SHUTDOWN_MS, &ms);
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- fn-in-shutdown ------------------------------------------------------ */

static atomic_int fn_calling, fn_rc = 1;

/* The report of rank 2's leaving: a call to rank 1's "hold" that only the
 * shutdown can end. */
static void call_in_report(frpc_agent *a, int rank, int state,
                           const char *why, void *user)
{
    (void)rank, (void)state, (void)why, (void)user;
    if (atomic_exchange(&fn_calling, 1))
        return;
    atomic_store(&fn_rc, frpc_call(a, 1, "hold", NULL, 0, FRPC_TIMEOUT_NONE,
                                   NULL));
}

static int mode_fn_in_shutdown(void)
{
    const char *how_s = getenv("PEERLOST_HOW");
    int graceful = how_s && strcmp(how_s, "graceful") == 0;
    au_start();
    CHECK(nranks == 3, "fn-in-shutdown needs 3 ranks");
    au_register("hold", hold_forever, NULL, 0);
    CHECK(frpc_on_peer_lost(agent, me == 0 ? call_in_report : NULL, NULL) ==
              0,
          "frpc_on_peer_lost");
    au_barrier();
    if (me == 2) {
        frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, SHUTDOWN_MS);
        agent = NULL;
        printf("ok: rank 2 done\n");
        return 0;
    }
    if (me == 1) {
        CHECK(wait_count(&nkept, 1, BOUND_MS), "rank 0's report never "
              "called");
        double t0 = au_now_ms();
        while (frpc_peer_state(agent, 0) == FRPC_PEER_ALIVE) {
            CHECK(au_now_ms() - t0 < BOUND_MS, "rank 0 still there after "
                  "%.0f ms: its shutdown waits for its report's call",
                  BOUND_MS);
            au_sleep_us(10000);
        }
        frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, SHUTDOWN_MS);
        agent = NULL;
        printf("ok: rank 1 done\n");
        return 0;
    }
    double t0 = au_now_ms();
    while (!atomic_load(&fn_calling)) {
        CHECK(au_now_ms() - t0 < BOUND_MS, "rank 2's leaving never "
              "reported");
        au_sleep_us(1000);
    }
    au_sleep_us(200000); /* the report's call is out */
    t0 = au_now_ms();
    int rc = frpc_shutdown(agent, graceful ? FRPC_SHUTDOWN_GRACEFUL
                                           : FRPC_SHUTDOWN_IMMEDIATE,
                           1000);
    double ms = au_now_ms() - t0;
    agent = NULL;
    printf("shutdown(%s, 1000) during the report's call: %s in %.0f ms\n",
           graceful ? "GRACEFUL" : "IMMEDIATE", frpc_err_name(rc), ms);
    /* graceful: the drain ran out of time, and rank 2 is lost */
    CHECK(rc == (graceful ? FRPC_EPEERLOST : 0), "shutdown: %s",
          frpc_err_name(rc));
    CHECK(atomic_load(&fn_rc) == FRPC_ESHUTDOWN, "the report's call: %s, "
          "want FRPC_ESHUTDOWN", frpc_err_name(atomic_load(&fn_rc)));
    printf("ok: rank 0: %s shutdown ended the report's call\n",
           graceful ? "graceful" : "immediate");
    return 0;
}

/* ---- replay-order -------------------------------------------------------- */

static int mode_replay_order(void)
{
    au_start();
    CHECK(nranks == 4, "replay-order needs 4 ranks");
    au_register("die", die, NULL, FRPC_INLINE);
    au_register("ready", ready, NULL, FRPC_INLINE);
    au_barrier();
    if (me == 3)
        die_now();
    if (me == 2) { /* serves until rank 0's call kills it */
        au_sleep_us((useconds_t)(BOUND_MS * 1000));
        CHECK(0, "rank 2 was never told to die");
    }
    wait_dead(3);
    static const int two[] = {0, 1};
    survivors_meet(two, 2); /* ranks 0 and 1 have found 3 lost */
    if (me == 0) {
        frpc_result res;
        int rc = frpc_call(agent, 2, "die", NULL, 0, FRPC_TIMEOUT_NONE, &res);
        CHECK(rc == FRPC_EPEERLOST, "call to the dying rank 2: %s",
              frpc_err_name(rc));
        frpc_result_clear(&res);
    }
    wait_dead(2);
    CHECK(frpc_on_peer_lost(agent, on_lost, NULL) == 0, "on_peer_lost");
    double t0 = au_now_ms();
    while (atomic_load(&nlost_written) < 2) {
        CHECK(au_now_ms() - t0 < BOUND_MS, "%d reports after the function "
              "was set, want 2", atomic_load(&nlost_written));
        au_sleep_us(1000);
    }
    int first = atomic_load(&lost_order[0]), second = atomic_load(&lost_order[1]);
    CHECK(first == 3 && second == 2, "reports in the order %d, %d; found 3, "
          "then 2", first, second);
    printf("ok: losses before frpc_on_peer_lost reported in the order "
           "found: 3, 2\n");
    double ms;
    timed_shutdown(SHUTDOWN_MS, &ms);
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- peer-fn ------------------------------------------------------------ */

/* frpc_on_peer_lost's promises about each report (fabrpc.h): once for each
 * lost rank, after every call to it has ended with FRPC_EPEERLOST, on the
 * agent's liveness thread (one thread, neither a pool thread, a polling
 * one nor the application's), one loss at a time; fn may call the
 * survivors, and frpc_shutdown there is FRPC_EDEADLK; a second
 * frpc_on_peer_lost reports every loss so far again to the new fn and
 * user, in the order found, and so does a third with the same fn and
 * user. 4 ranks, FABRPC_THREADS=2: ranks 2 and 3 hold PF_HOLDS calls from
 * each survivor (no timeout) and kill themselves at the same moment. */
#define PF_HOLDS 20
#define PF_TIDS 64

static pthread_t pf_main;
static pthread_mutex_t pf_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t pf_pool[PF_TIDS], pf_poll[PF_TIDS], pf_fn_tid;
static int pf_npool, pf_npoll, pf_fn_tid_set;
static frpc_future *pf_holds[MAX_RANKS][PF_HOLDS];
static atomic_int pf_inside, pf_overlaps, pf_calls_ok, pf_deadlk;
static atomic_int pf_reports_a[MAX_RANKS], pf_reports_b[MAX_RANKS];
static atomic_int pf_order_a[2], pf_order_b[4], pf_na, pf_nb;
static double pf_report_ms[MAX_RANKS];
static int pf_user_a, pf_user_b; /* their addresses are the user values */

static int pf_seen(const pthread_t *set, int n, pthread_t t)
{
    for (int i = 0; i < n; i++)
        if (pthread_equal(set[i], t))
            return 1;
    return 0;
}

static void pf_note(pthread_t *set, int *n)
{
    pthread_t t = pthread_self();
    pthread_mutex_lock(&pf_lock);
    if (!pf_seen(set, *n, t) && *n < PF_TIDS)
        set[(*n)++] = t;
    pthread_mutex_unlock(&pf_lock);
}

/* echo, noting each thread that runs it (inline: the polling threads)
 * until the deaths; not after, as a report's own call to a survivor may
 * poll (and so run this) on the liveness thread. */
static atomic_int pf_noting = 1;

static void pf_echo(frpc_request *req, void *user)
{
    if (atomic_load(&pf_noting))
        pf_note(pf_poll, &pf_npoll);
    echo(req, user);
}

/* pool_meet: two requests meet here, so both pool threads are noted. */
static atomic_int pf_met;

static void pf_pool_meet(frpc_request *req, void *user)
{
    pf_note(pf_pool, &pf_npool);
    atomic_fetch_add(&pf_met, 1);
    CHECK(wait_count(&pf_met, 2, 20000), "pool_meet: the other pool thread "
          "never came");
    frpc_respond(req, NULL, 0);
}

/* Whatever thread runs a report: always the same one, none of the
 * others. */
static void pf_check_thread(int rank)
{
    pthread_t t = pthread_self();
    pthread_mutex_lock(&pf_lock);
    if (!pf_fn_tid_set) {
        pf_fn_tid = t;
        pf_fn_tid_set = 1;
    }
    int same = pthread_equal(t, pf_fn_tid);
    int pool = pf_seen(pf_pool, pf_npool, t);
    int poll = pf_seen(pf_poll, pf_npoll, t);
    pthread_mutex_unlock(&pf_lock);
    CHECK(same, "the report of rank %d ran on another thread than the "
          "first report", rank);
    CHECK(!pthread_equal(t, pf_main) && !pool && !poll, "the report of "
          "rank %d ran on %s", rank, pthread_equal(t, pf_main)
              ? "the main thread" : pool ? "a pool thread"
              : "a thread that ran an inline handler (a polling thread)");
}

static void pf_fn_a(frpc_agent *a, int rank, int state, const char *why,
                    void *user)
{
    pf_report_ms[rank & (MAX_RANKS - 1)] = au_now_ms();
    if (atomic_fetch_add(&pf_inside, 1) != 0)
        atomic_fetch_add(&pf_overlaps, 1);
    printf("peer lost: rank %d state %d (%s) at %.0f ms\n", rank, state,
           why ? why : "(null)", au_now_ms());
    CHECK(a == agent && user == &pf_user_a, "report with agent %p user %p",
          (void *)a, user);
    CHECK((rank == 2 || rank == 3) && state == FRPC_PEER_DEAD, "report of "
          "rank %d state %d, want 2 or 3, DEAD", rank, state);
    pf_check_thread(rank);
    /* Every call to the rank has ended, with FRPC_EPEERLOST. */
    for (int i = 0; i < PF_HOLDS; i++) {
        frpc_future *f = pf_holds[rank][i];
        CHECK(frpc_future_test(f) == 1, "report of rank %d while its call "
              "%d is still in flight", rank, i);
        int rc = frpc_future_error(f, NULL, NULL);
        CHECK(rc == FRPC_EPEERLOST, "report of rank %d: its call %d ended "
              "%s, want FRPC_EPEERLOST", rank, i, frpc_err_name(rc));
    }
    int k = atomic_fetch_add(&pf_na, 1);
    if (k < 2)
        atomic_store(&pf_order_a[k], rank);
    /* Calls to the survivor go on from here; shutdown may not. */
    frpc_result res;
    int rc = au_call(1 - me, "echo", au_mix(0x9f00 + rank), 300, 20000, &res);
    CHECK(rc == 0 && au_reply_ok(res.data, res.len, au_mix(0x9f00 + rank),
                                 300),
          "a call to survivor %d from the report: %s", 1 - me,
          au_why(rc, res.error));
    frpc_result_clear(&res);
    atomic_fetch_add(&pf_calls_ok, 1);
    rc = frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 100);
    CHECK(rc == FRPC_EDEADLK, "frpc_shutdown from the report: %s, want "
          "FRPC_EDEADLK", frpc_err_name(rc));
    atomic_fetch_add(&pf_deadlk, 1);
    au_sleep_us(200000); /* the other loss, if reported now, would overlap */
    atomic_fetch_add(&pf_reports_a[rank & (MAX_RANKS - 1)], 1);
    atomic_fetch_sub(&pf_inside, 1);
}

static void pf_fn_b(frpc_agent *a, int rank, int state, const char *why,
                    void *user)
{
    if (atomic_fetch_add(&pf_inside, 1) != 0)
        atomic_fetch_add(&pf_overlaps, 1);
    CHECK(user == &pf_user_b && (rank == 2 || rank == 3) &&
              state == FRPC_PEER_DEAD,
          "replayed report: rank %d state %d user %p", rank, state, user);
    pf_check_thread(rank);
    int k = atomic_fetch_add(&pf_nb, 1);
    if (k < 4)
        atomic_store(&pf_order_b[k], rank);
    atomic_fetch_add(&pf_reports_b[rank], 1);
    atomic_fetch_sub(&pf_inside, 1);
}

static int mode_peer_fn(void)
{
    au_start();
    CHECK(nranks == 4, "peer-fn needs 4 ranks");
    pf_main = pthread_self();
    au_register("echo", pf_echo, NULL, FRPC_INLINE);
    au_register("hold", hold_forever, NULL, FRPC_INLINE);
    au_register("ready", ready, NULL, FRPC_INLINE);
    au_register("pool_meet", pf_pool_meet, NULL, 0);
    CHECK(frpc_on_peer_lost(agent, pf_fn_a, &pf_user_a) == 0, "on_peer_lost");
    au_barrier();
    if (me < 2) {
        /* Both pool threads (FABRPC_THREADS=2) noted. */
        frpc_future *m[2] = {au_async(me, "pool_meet", au_mix(1), 8, 30000),
                             au_async(me, "pool_meet", au_mix(2), 8, 30000)};
        CHECK(frpc_wait_all(m, 2, 30000) == 0, "pool_meet");
        CHECK(pf_npool == 2, "%d pool threads noted, want 2 "
              "(FABRPC_THREADS=2)", pf_npool);
        frpc_future_free(m[0]);
        frpc_future_free(m[1]);
        for (int r = 2; r < 4; r++)
            for (int i = 0; i < PF_HOLDS; i++)
                pf_holds[r][i] = au_async(r, "hold", au_mix(r * 100 + i), 16,
                                          FRPC_TIMEOUT_NONE);
        au_sync_echo(1 - me, "echo", au_mix(0x77), 64); /* polling noted */
    }
    au_barrier();
    atomic_store(&pf_noting, 0);
    if (me >= 2) {
        CHECK(wait_count(&nkept, 2 * PF_HOLDS, 30000), "rank %d holds %d "
              "calls, want %d", me, atomic_load(&nkept), 2 * PF_HOLDS);
        au_barrier(); /* ranks 2 and 3 die at the same moment */
        die_now();
    }
    au_barrier();
    /* When each loss shows in frpc_peer_state, against its report. */
    double state_ms[MAX_RANKS] = {0}, t0 = au_now_ms();
    while (!state_ms[2] || !state_ms[3]) {
        for (int r = 2; r < 4; r++) {
            int st = frpc_peer_state(agent, r);
            if (!state_ms[r] && st != FRPC_PEER_ALIVE) {
                CHECK(st == FRPC_PEER_DEAD, "rank %d state %d", r, st);
                state_ms[r] = au_now_ms();
            }
        }
        CHECK(au_now_ms() - t0 < BOUND_MS, "ranks 2 and 3 not both DEAD "
              "after %.0f ms", BOUND_MS);
        au_sleep_us(200);
    }
    CHECK(wait_count(&pf_reports_a[2], 1, BOUND_MS) &&
              wait_count(&pf_reports_a[3], 1, BOUND_MS),
          "reports: rank 2 %d, rank 3 %d", atomic_load(&pf_reports_a[2]),
          atomic_load(&pf_reports_a[3]));
    for (int r = 2; r < 4; r++) {
        double lag = pf_report_ms[r] - state_ms[r];
        printf("report: rank %d reported %.1f ms after frpc_peer_state "
               "said DEAD\n", r, lag);
        /* fabrpc.h: "on shm, up to about 300 ms" (10 times that here, a
         * loaded box); other providers: the detection bound. */
        CHECK(lag < (strcmp(frpc_provider(agent), "shm") ? BOUND_MS : 3000),
              "rank %d reported %.0f ms after its state said DEAD", r, lag);
    }
    au_sleep_us(500000); /* a second report would come within this */
    for (int r = 0; r < 4; r++)
        CHECK(atomic_load(&pf_reports_a[r]) == (r >= 2), "rank %d reported "
              "%d times", r, atomic_load(&pf_reports_a[r]));
    CHECK(atomic_load(&pf_overlaps) == 0, "%d reports ran while another "
          "did", atomic_load(&pf_overlaps));
    CHECK(atomic_load(&pf_calls_ok) == 2 && atomic_load(&pf_deadlk) == 2,
          "calls from the reports %d, FRPC_EDEADLK %d",
          atomic_load(&pf_calls_ok), atomic_load(&pf_deadlk));
    int first = atomic_load(&pf_order_a[0]), second = atomic_load(&pf_order_a[1]);
    printf("ok: ranks 2 and 3 reported once each (%d first), after their %d "
           "calls each ended FRPC_EPEERLOST, on one thread that is no pool, "
           "polling or main thread, one at a time; calls from the report "
           "worked, frpc_shutdown there FRPC_EDEADLK\n", first, PF_HOLDS);

    /* A new fn and user: both losses again, to them, in the order found;
     * then the same fn and user once more: again. */
    for (int round = 1; round <= 2; round++) {
        CHECK(frpc_on_peer_lost(agent, pf_fn_b, &pf_user_b) == 0,
              "on_peer_lost");
        CHECK(wait_count(&pf_nb, 2 * round, BOUND_MS), "%d replayed reports "
              "after setting fn %d times, want %d", atomic_load(&pf_nb),
              round, 2 * round);
        CHECK(atomic_load(&pf_order_b[2 * round - 2]) == first &&
                  atomic_load(&pf_order_b[2 * round - 1]) == second,
              "replay %d in the order %d, %d; found %d, %d", round,
              atomic_load(&pf_order_b[2 * round - 2]),
              atomic_load(&pf_order_b[2 * round - 1]), first, second);
    }
    au_sleep_us(300000);
    CHECK(atomic_load(&pf_reports_b[2]) == 2 &&
              atomic_load(&pf_reports_b[3]) == 2 &&
              atomic_load(&pf_reports_a[2]) == 1 &&
              atomic_load(&pf_reports_a[3]) == 1,
          "after two replays: new fn %d, %d; old fn %d, %d",
          atomic_load(&pf_reports_b[2]), atomic_load(&pf_reports_b[3]),
          atomic_load(&pf_reports_a[2]), atomic_load(&pf_reports_a[3]));
    printf("ok: a new fn and user, then the same again, each got both "
           "losses once more in the order found (%d, %d); the old fn none\n",
           first, second);
    for (int r = 2; r < 4; r++)
        for (int i = 0; i < PF_HOLDS; i++)
            frpc_future_free(pf_holds[r][i]);
    /* The other survivor's shutdown makes it LEFT: not for these fns. */
    CHECK(frpc_on_peer_lost(agent, NULL, NULL) == 0, "on_peer_lost NULL");
    static const int two[] = {0, 1};
    survivors_meet(two, 2);
    double ms;
    int rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(rc == FRPC_EPEERLOST, "shutdown: %s, want FRPC_EPEERLOST",
          frpc_err_name(rc));
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- notify-lost --------------------------------------------------------- */

/* frpc_notify_wait: "The wait is for any sender, so a lost rank does not
 * end it". 3 ranks. Rank 1, the only sender, sends one notification to
 * rank 0, then kills itself NL_DIE_MS into rank 0's next
 * frpc_notify_wait(NL_WAIT_MS) (rank 0 makes $PEERLOST_DIR/nl_waiting
 * just before it): that wait ends FRPC_ETIMEDOUT at its
 * timeout (not early, not FRPC_EPEERLOST, not hanging), though rank 1 was
 * found lost during it; then notifications from rank 2 and from rank 0
 * itself, and calls, still work, and nothing else is queued. */
#define NL_WAIT_MS 5000
#define NL_DIE_MS 500

static void nl_expect_note(int want_src, uint64_t seed, int timeout_ms)
{
    char buf[256];
    size_t len = 0;
    int src = -1;
    int rc = frpc_notify_wait(agent, &src, buf, sizeof(buf), &len,
                              timeout_ms);
    uint64_t got = 0;
    CHECK(rc == 0, "frpc_notify_wait for rank %d's notification: %s",
          want_src, frpc_err_name(rc));
    CHECK(src == want_src && au_msg_check(buf, len, &got) && got == seed &&
              len == 100,
          "notification from %d (%zu B, seed %llx), want from %d, 100 B, "
          "seed %llx", src, len, (unsigned long long)got, want_src,
          (unsigned long long)seed);
}

static void nl_notify(int dst, uint64_t seed)
{
    void *m = au_msg(seed, 100);
    int rc = frpc_notify(agent, dst, m, 100, 20000);
    free(m);
    CHECK(rc == 0, "frpc_notify to %d: %s", dst, frpc_err_name(rc));
}

static int mode_notify_lost(void)
{
    start_lost();
    CHECK(nranks == 3, "notify-lost needs 3 ranks");
    au_barrier();
    if (me == 1) {
        nl_notify(0, au_mix(0x401)); /* returns once rank 0 has it */
        /* Rank 0 says it is about to wait (a loaded machine may delay
         * it past NL_DIE_MS after the notification). */
        wait_file("nl_waiting");
        au_sleep_us(NL_DIE_MS * 1000);
        die_now();
    }
    static const int survivors[] = {0, 2};
    if (me == 2) {
        wait_dead(1);
        survivors_meet(survivors, 2);
        nl_notify(0, au_mix(0x402));
        survivors_meet(survivors, 2);
        double ms;
        timed_shutdown(SHUTDOWN_MS, &ms);
        printf("ok: rank 2 done\n");
        return 0;
    }
    nl_expect_note(1, au_mix(0x401), CALL_TIMEOUT_MS);
    char buf[256];
    size_t len = 0;
    int src = -1;
    double t0 = au_now_ms();
    touch_dir_file("nl_waiting");
    int rc = frpc_notify_wait(agent, &src, buf, sizeof(buf), &len,
                              NL_WAIT_MS);
    double t1 = au_now_ms(), tk = kill_time_ms();
    printf("notify_wait(%d) with its only sender killed %.0f ms into it: "
           "%s after %.0f ms; rank 1 reported lost %.0f ms into it\n",
           NL_WAIT_MS, tk - t0, frpc_err_name(rc), t1 - t0,
           lost_ms(1) ? lost_ms(1) - t0 : -1.0);
    CHECK(rc == FRPC_ETIMEDOUT, "frpc_notify_wait(%d) while its only sender "
          "died: %s, want FRPC_ETIMEDOUT", NL_WAIT_MS, frpc_err_name(rc));
    CHECK(t1 - t0 >= NL_WAIT_MS - 20 && t1 - t0 < NL_WAIT_MS + 3000,
          "frpc_notify_wait(%d) returned after %.0f ms", NL_WAIT_MS, t1 - t0);
    /* The loss happened, and was known, during the wait (else the test
     * proved nothing). */
    CHECK(tk > t0 && tk < t1 && atomic_load(&lost_dead[1]) == 1 &&
              lost_ms(1) < t1,
          "rank 1 died %.0f ms and was reported %.0f ms into the %.0f ms "
          "wait: not during it", tk - t0, lost_ms(1) - t0, t1 - t0);
    printf("ok: frpc_notify_wait(%d) ran to its timeout (%.0f ms) though "
           "its only sender died %.0f ms into it\n", NL_WAIT_MS, t1 - t0,
           tk - t0);
    survivors_meet(survivors, 2);
    nl_expect_note(2, au_mix(0x402), CALL_TIMEOUT_MS);
    nl_notify(0, au_mix(0x403));
    nl_expect_note(0, au_mix(0x403), CALL_TIMEOUT_MS);
    au_sync_echo(2, "echo", au_mix(0x404), 500);
    rc = frpc_notify_wait(agent, &src, buf, sizeof(buf), &len, 200);
    CHECK(rc == FRPC_ETIMEDOUT, "a last frpc_notify_wait(200): %s, want "
          "FRPC_ETIMEDOUT (nothing queued)", frpc_err_name(rc));
    printf("ok: after the loss, notifications from rank 2 and from itself, "
           "and calls, work; nothing else was queued\n");
    survivors_meet(survivors, 2);
    double ms;
    rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(rc == FRPC_EPEERLOST, "shutdown: %s, want FRPC_EPEERLOST",
          frpc_err_name(rc));
    printf("ok: rank 0 done\n");
    return 0;
}

/* ---- max-inflight ------------------------------------------------------- */

/* FABRPC_MAX_INFLIGHT=8: 8 calls to a handler that holds them are in
 * flight; the 9th, sync or async, fails at once with FRPC_EAGAIN and says
 * why; once one ends, a call may start again. */
static uint8_t inflight_buf[4096];

/* Transfers and notifications share max_inflight with calls: each form
 * fails at once with FRPC_EAGAIN, posts nothing, and is not counted as a
 * refused transfer (transfers_refused counts bad descriptors only). */
static void transfers_refused_at_max(frpc_mem *local)
{
    frpc_stats s0, s1;
    CHECK(frpc_get_stats(agent, &s0) == 0, "stats");
    const size_t n = 64;
    int rc = frpc_get(local, 0, rma_desc, sizeof(rma_desc), 0, n,
                      1000);
    CHECK(rc == FRPC_EAGAIN, "get at max_inflight: %s", frpc_err_name(rc));
    rc = frpc_put(local, 0, rma_desc, sizeof(rma_desc), 0, n, 1000);
    CHECK(rc == FRPC_EAGAIN, "put at max_inflight: %s", frpc_err_name(rc));
    frpc_future *g = (frpc_future *)1;
    rc = frpc_get_async(local, 0, rma_desc, sizeof(rma_desc), 0, n,
                        1000, &g);
    CHECK(rc == FRPC_EAGAIN && !g, "async get at max_inflight: %s",
          frpc_err_name(rc));
    g = (frpc_future *)1;
    rc = frpc_put_async(local, 0, rma_desc, sizeof(rma_desc), 0, n,
                        1000, &g);
    CHECK(rc == FRPC_EAGAIN && !g, "async put at max_inflight: %s",
          frpc_err_name(rc));
    frpc_xfer ops[2] = {
        {.op = FRPC_XFER_GET, .local = local, .desc = rma_desc,
         .desc_len = sizeof(rma_desc), .len = n},
        {.op = FRPC_XFER_PUT, .local = local, .local_off = n,
         .desc = rma_desc, .desc_len = sizeof(rma_desc),
         .remote_off = n, .len = n}};
    rc = frpc_transfer(ops, 2, "b", 1, 1000);
    CHECK(rc == FRPC_EAGAIN, "batch at max_inflight: %s", frpc_err_name(rc));
    g = (frpc_future *)1;
    rc = frpc_transfer_async(ops, 2, NULL, 0, 1000, &g);
    CHECK(rc == FRPC_EAGAIN && !g, "async batch at max_inflight: %s",
          frpc_err_name(rc));
    rc = frpc_notify(agent, 1, "n", 1, 1000);
    CHECK(rc == FRPC_EAGAIN, "notify at max_inflight: %s", frpc_err_name(rc));
    CHECK(frpc_get_stats(agent, &s1) == 0, "stats");
    CHECK(s1.transfers_refused == s0.transfers_refused,
          "FRPC_EAGAIN counted as refused: %llu -> %llu",
          (unsigned long long)s0.transfers_refused,
          (unsigned long long)s1.transfers_refused);
    CHECK(s1.transfers_get == s0.transfers_get &&
              s1.transfers_put == s0.transfers_put &&
              s1.transfer_batches == s0.transfer_batches &&
              s1.calls_started == s0.calls_started,
          "a transfer refused at max_inflight was counted as posted");
    printf("ok: gets, puts, batches and notifications failed at once with "
           "FRPC_EAGAIN, not counted as refused\n");
}

static int mode_max_inflight(void)
{
    au_start();
    CHECK(nranks == 2, "max-inflight needs 2 ranks");
    au_register("hold", hold_forever, NULL, 0);
    au_register("echo", echo, NULL, FRPC_INLINE);
    au_register("desc", give_desc, NULL, FRPC_INLINE);
    frpc_mem *region = NULL;
    int rc = frpc_mem_register(agent, inflight_buf, sizeof(inflight_buf),
                               FRPC_MEM_REMOTE_READ | FRPC_MEM_REMOTE_WRITE,
                               &region);
    CHECK(rc == 0, "register: %s", frpc_err_name(rc));
    rc = frpc_mem_describe(region, 0, sizeof(inflight_buf), rma_desc);
    CHECK(rc == 0, "describe: %s", frpc_err_name(rc));
    au_barrier();
    if (me == 0) {
        frpc_result dres;
        rc = frpc_call(agent, 1, "desc", NULL, 0, 10000, &dres);
        CHECK(rc == 0 && dres.len == sizeof(rma_desc), "desc: %s",
              frpc_err_name(rc));
        memcpy(rma_desc, dres.data, sizeof(rma_desc));
        frpc_result_clear(&dres);
        frpc_future *f[8];
        for (int i = 0; i < 8; i++)
            f[i] = au_async(1, "hold", au_mix(0x3a + i), 16, 60000);
        transfers_refused_at_max(region);
        frpc_future *g = NULL;
        rc = frpc_call_async(agent, 1, "echo", "x", 1, 1000, &g);
        CHECK(rc == FRPC_EAGAIN && !g, "9th async call: %s",
              frpc_err_name(rc));
        frpc_result res;
        rc = frpc_call(agent, 1, "echo", "x", 1, 1000, &res);
        CHECK(rc == FRPC_EAGAIN && res.error &&
                  strstr(res.error, "max_inflight"),
              "9th sync call: %s (%s)", frpc_err_name(rc),
              res.error ? res.error : "");
        printf("ok: the 9th call failed at once: %s\n", res.error);
        frpc_result_clear(&res);
        /* The limit is the rank's, over every destination: with 8 held
         * at rank 1, a call to itself is refused too. */
        rc = frpc_call(agent, 0, "echo", "x", 1, 1000, &res);
        CHECK(rc == FRPC_EAGAIN, "a 9th call, to itself: %s",
              frpc_err_name(rc));
        frpc_result_clear(&res);
        printf("ok: the limit counts calls to every rank\n");
        CHECK(frpc_future_cancel(f[0]) == 0, "cancel");
        rc = au_call(1, "echo", au_mix(0x3b), 16, 10000, &res);
        CHECK(rc == 0, "a call after one ended: %s", frpc_err_name(rc));
        frpc_result_clear(&res);
        rc = frpc_get(region, 0, rma_desc, sizeof(rma_desc), 0, 64,
                      10000);
        CHECK(rc == 0, "a get after one ended: %s", frpc_err_name(rc));
        for (int i = 0; i < 8; i++)
            frpc_future_free(f[i]);
        printf("ok: max_inflight holds and frees\n");
    }
    au_barrier();
    rc = frpc_mem_deregister(region, 10000);
    CHECK(rc == 0, "deregister: %s", frpc_err_name(rc));
    au_finish();
    return 0;
}

/* ---- inflight-race ------------------------------------------------------ */

/* FABRPC_MAX_INFLIGHT=4 (the limit is read from it): 4 threads start
 * async calls to this rank's "hold" at the same moment. Exactly the limit
 * is accepted and the rest fail FRPC_EAGAIN; once the main thread answers
 * the held requests, every accepted call completes 0 and none stays in
 * flight, so the next round is accepted again. Pre-fix the limit was
 * checked before the call was counted: threads that passed the check
 * together all got in, past the limit. */
#define IR_THREADS 4
#define IR_TRIES 4
#define IR_ROUNDS 300

static pthread_barrier_t ir_go;

typedef struct {
    frpc_future *f[IR_TRIES];
    int again;
} ir_starter;

static void *ir_start_calls(void *arg)
{
    ir_starter *s = arg;
    pthread_barrier_wait(&ir_go);
    for (int i = 0; i < IR_TRIES; i++) {
        int rc = frpc_call_async(agent, me, "hold", "x", 1, CALL_TIMEOUT_MS,
                                 &s->f[i]);
        CHECK(rc == 0 || rc == FRPC_EAGAIN, "racing call: %s",
              frpc_err_name(rc));
        s->again += rc == FRPC_EAGAIN;
    }
    return NULL;
}

/* Answers the n requests "hold" keeps, once all have arrived. */
static void ir_release(int n)
{
    double t0 = au_now_ms();
    for (;;) {
        pthread_mutex_lock(&held_lock);
        int arrived = nheld;
        pthread_mutex_unlock(&held_lock);
        if (arrived >= n)
            break;
        CHECK(au_now_ms() - t0 < BOUND_MS, "%d of %d held calls arrived",
              arrived, n);
        au_sleep_us(200);
    }
    pthread_mutex_lock(&held_lock);
    for (; nheld > 0; nheld--)
        CHECK(frpc_respond(held[nheld - 1], "ok", 2) == 0, "respond");
    pthread_mutex_unlock(&held_lock);
}

/* One round: returns how many calls were accepted past the limit. */
static int ir_round(int limit)
{
    ir_starter s[IR_THREADS];
    pthread_t t[IR_THREADS];
    frpc_future *accepted[IR_THREADS * IR_TRIES];
    int n = 0, again = 0;

    memset(s, 0, sizeof(s));
    for (int i = 0; i < IR_THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, ir_start_calls, &s[i]) == 0,
              "pthread_create");
    for (int i = 0; i < IR_THREADS; i++) {
        pthread_join(t[i], NULL);
        again += s[i].again;
        for (int k = 0; k < IR_TRIES; k++)
            if (s[i].f[k])
                accepted[n++] = s[i].f[k];
    }
    CHECK(n + again == IR_THREADS * IR_TRIES, "%d accepted + %d refused",
          n, again);
    CHECK(n >= limit, "only %d of %d accepted under max_inflight %d", n,
          IR_THREADS * IR_TRIES, limit);
    ir_release(n);
    int rc = frpc_wait_all(accepted, (size_t)n, CALL_TIMEOUT_MS);
    CHECK(rc == 0, "wait for the released calls: %s", frpc_err_name(rc));
    for (int i = 0; i < n; i++) {
        au_expect_status(accepted[i], 0, "a released call");
        frpc_future_free(accepted[i]);
    }
    au_quiet_stats();
    return n - limit;
}

static int mode_inflight_race(void)
{
    const char *v = getenv("FABRPC_MAX_INFLIGHT");
    int limit = v ? atoi(v) : 0;
    CHECK(limit > 0 && limit < IR_THREADS * IR_TRIES,
          "inflight-race needs FABRPC_MAX_INFLIGHT below %d",
          IR_THREADS * IR_TRIES);
    au_start();
    au_register("hold", hold, NULL, 0);
    au_barrier();
    pthread_barrier_init(&ir_go, NULL, IR_THREADS);
    int over = 0, worst = 0;
    for (int r = 0; r < IR_ROUNDS; r++) {
        int past = ir_round(limit);
        over += past > 0;
        worst = past > worst ? past : worst;
    }
    pthread_barrier_destroy(&ir_go);
    CHECK(over == 0, "%d of %d rounds accepted more than max_inflight %d "
          "(up to %d more)", over, IR_ROUNDS, limit, worst);
    printf("ok: %d rounds of %d threads: exactly %d accepted each time, the "
           "rest FRPC_EAGAIN, all released and none left in flight\n",
           IR_ROUNDS, IR_THREADS, limit);
    au_barrier();
    au_finish();
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- drain -------------------------------------------------------------- */

#define DRAIN_CALLS 400 /* to each other rank: most are held to coalesce */
#define DRAIN_SLOW 8    /* to each other rank, pool handlers of 0-5 ms */

static atomic_int drain_callbacks;

static void count_callback(frpc_future *f, void *user)
{
    (void)f;
    (void)user;
    atomic_fetch_add(&drain_callbacks, 1);
}

/* Every rank starts its calls and shuts down at once, without waiting for
 * any: graceful shutdown must finish every call in flight (each future
 * ends 0 with its echo, each callback runs once before shutdown returns)
 * while serving the others' calls, which are in flight to it meanwhile. */
static int mode_drain(void)
{
    au_start();
    CHECK(nranks <= MAX_RANKS, "drain: at most %d ranks", MAX_RANKS);
    au_register("echo", echo, NULL, FRPC_INLINE);
    au_register("slow", slow, NULL, 0);
    au_barrier();
    size_t per = (size_t)(DRAIN_CALLS + DRAIN_SLOW);
    size_t n = per * (size_t)(nranks - 1), k = 0;
    frpc_future **f = calloc(n, sizeof(*f));
    uint64_t *seed = calloc(n, sizeof(*seed));
    size_t *len = calloc(n, sizeof(*len));
    CHECK(f && seed && len, "out of memory");
    for (int i = 0; i < DRAIN_CALLS + DRAIN_SLOW; i++)
        for (int dst = 0; dst < nranks; dst++) {
            if (dst == me)
                continue;
            seed[k] = au_mix(0xd0000u + (uint64_t)me * 100000u + k);
            len[k] = au_len(seed[k], 2000);
            f[k] = au_async(dst, i < DRAIN_CALLS ? "echo" : "slow", seed[k],
                            len[k], 60000);
            CHECK(frpc_future_then(f[k], count_callback, NULL) == 0, "then");
            k++;
        }
    double t0 = au_now_ms();
    int rc = frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, 60000);
    CHECK(rc == 0, "frpc_shutdown: %s", frpc_strerror(rc));
    printf("ok: rank %d shut down in %.0f ms with %zu calls just started\n",
           me, au_now_ms() - t0, n);
    CHECK(atomic_load(&drain_callbacks) == (int)n,
          "%d of %zu callbacks ran before frpc_shutdown returned",
          atomic_load(&drain_callbacks), n);
    for (k = 0; k < n; k++) {
        au_check_echo(f[k], seed[k], len[k], "a call in flight at shutdown");
        frpc_future_free(f[k]);
    }
    free(f);
    free(seed);
    free(len);
    printf("ok: rank %d: all %zu calls in flight at graceful shutdown ended "
           "with their answers, each callback once\n", me, n);
    return 0;
}

/* ---- own-threads, inside ----------------------------------------------- */

/* Answers with the code frpc_shutdown (or frpc_barrier) gave on the
 * handler's own thread. */
static void answer_code(frpc_request *req, int rc)
{
    int32_t v = rc;
    frpc_respond(req, &v, sizeof(v));
}

static void shutdown_here(frpc_request *req, void *user)
{
    (void)user;
    answer_code(req, frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 1000));
}

static void barrier_here(frpc_request *req, void *user)
{
    (void)user;
    answer_code(req, frpc_barrier(agent, 1000));
}

static void expect_code(int dst, const char *fn, int want)
{
    frpc_result res;
    int rc = frpc_call(agent, dst, fn, NULL, 0, 20000, &res);
    CHECK(rc == 0 && res.len == sizeof(int32_t), "%s on %d: %s", fn, dst,
          frpc_err_name(rc));
    int32_t got;
    memcpy(&got, res.data, sizeof(got));
    frpc_result_clear(&res);
    CHECK(got == want, "%s on rank %d: %s, want %s", fn, dst,
          frpc_err_name(got), frpc_err_name(want));
}

static atomic_int then_code = 1;

/* "gated" keeps its request until "open_gate" answers it: a future's
 * callback registered before then runs on the pool, never on the thread
 * that registers it (an answer come first would run it there). */
static _Atomic(frpc_request *) gated_req;

static void gated(frpc_request *req, void *user)
{
    (void)user;
    atomic_store(&gated_req, req);
}

static void open_gate(frpc_request *req, void *user)
{
    (void)user;
    frpc_request *kept = atomic_exchange(&gated_req, NULL);
    int32_t v = kept ? 0 : 1;
    if (kept)
        frpc_respond(kept, NULL, 0);
    frpc_respond(req, &v, sizeof(v));
}

static void shutdown_in_callback(frpc_future *f, void *user)
{
    (void)f;
    (void)user;
    atomic_store(&then_code,
                 frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 1000));
}

/* frpc_shutdown from the agent's own threads (a pool handler, an inline
 * one, a future's callback) refuses with FRPC_EDEADLK instead of waiting
 * for itself, and so does frpc_barrier on the polling thread; the agent
 * goes on working. */
static int mode_own_threads(void)
{
    au_start();
    CHECK(nranks == 2, "own-threads needs 2 ranks");
    au_register("echo", echo, NULL, FRPC_INLINE);
    au_register("shutdown_pool", shutdown_here, NULL, 0);
    au_register("shutdown_inline", shutdown_here, NULL, FRPC_INLINE);
    au_register("barrier_inline", barrier_here, NULL, FRPC_INLINE);
    au_register("barrier_pool", barrier_here, NULL, 0);
    au_register("gated", gated, NULL, FRPC_INLINE);
    au_register("open_gate", open_gate, NULL, FRPC_INLINE);
    au_barrier();
    int peer = 1 - me;
    expect_code(peer, "shutdown_pool", FRPC_EDEADLK);
    expect_code(peer, "shutdown_inline", FRPC_EDEADLK);
    expect_code(peer, "barrier_inline", FRPC_EDEADLK);
    /* run with FABRPC_THREADS=1: the only pool thread would wait */
    expect_code(peer, "barrier_pool", FRPC_EDEADLK);
    frpc_future *f;
    CHECK(frpc_call_async(agent, peer, "gated", NULL, 0, 20000, &f) == 0,
          "gated");
    CHECK(frpc_future_then(f, shutdown_in_callback, NULL) == 0, "then");
    /* Until the request is kept there, the gate finds none: ask again. */
    for (int i = 0; i < 2000; i++) {
        frpc_result res;
        CHECK(frpc_call(agent, peer, "open_gate", NULL, 0, 20000, &res) == 0 &&
                  res.len == sizeof(int32_t),
              "open_gate");
        int32_t none;
        memcpy(&none, res.data, sizeof(none));
        frpc_result_clear(&res);
        if (!none)
            break;
        au_sleep_us(1000);
    }
    CHECK(frpc_future_wait(f, 20000) == 0, "the gated call");
    for (int i = 0; i < 20000 && atomic_load(&then_code) == 1; i++)
        au_sleep_us(1000);
    CHECK(atomic_load(&then_code) == FRPC_EDEADLK,
          "frpc_shutdown in a future's callback: %s, want FRPC_EDEADLK",
          frpc_err_name(atomic_load(&then_code)));
    frpc_future_free(f);
    au_sync_echo(peer, "echo", au_mix(0x52), 100);
    printf("ok: rank %d: frpc_shutdown on the agent's own threads and "
           "frpc_barrier inline refused with FRPC_EDEADLK\n", me);
    au_barrier();
    au_finish();
    return 0;
}

/* What rank 0's threads got, each inside a call when shutdown began. */
enum {
    IN_NOTIFY, IN_BARRIER, IN_CALL, IN_FUTURE, IN_SELF, IN_BARRIER2, IN_N
};
static const char *const in_what[IN_N] = {
    "frpc_notify_wait", "frpc_barrier", "frpc_call", "frpc_future_wait",
    "frpc_call to itself (its own shutdown: FRPC_ESHUTDOWN, not "
    "FRPC_EPEERLOST)", "a second frpc_barrier (500 ms)"};
static atomic_int in_code[IN_N], in_started;
static double in_ms[IN_N];

static void *inside_main(void *arg)
{
    int which = (int)(intptr_t)arg, rc;
    double t0 = au_now_ms();
    atomic_fetch_add(&in_started, 1);
    if (which == IN_NOTIFY) {
        char buf[16];
        size_t len;
        rc = frpc_notify_wait(agent, NULL, buf, sizeof(buf), &len,
                              FRPC_TIMEOUT_NONE);
    } else if (which == IN_BARRIER) {
        rc = frpc_barrier(agent, FRPC_TIMEOUT_NONE);
    } else if (which == IN_BARRIER2) {
        au_sleep_us(200000); /* behind IN_BARRIER's, for the store */
        t0 = au_now_ms();
        rc = frpc_barrier(agent, 500);
    } else if (which == IN_CALL) {
        rc = frpc_call(agent, 1, "hold", NULL, 0, FRPC_TIMEOUT_NONE, NULL);
    } else if (which == IN_SELF) {
        rc = frpc_call(agent, me, "hold", NULL, 0, FRPC_TIMEOUT_NONE, NULL);
    } else {
        frpc_future *f = NULL;
        rc = frpc_call_async(agent, 1, "hold", NULL, 0, FRPC_TIMEOUT_NONE,
                             &f);
        if (rc == 0) {
            rc = frpc_future_wait(f, FRPC_TIMEOUT_NONE);
            frpc_future_free(f);
        }
    }
    in_ms[which] = au_now_ms() - t0;
    atomic_store(&in_code[which], rc);
    return NULL;
}

/* Rank 0's threads wait inside the agent (a notification, a barrier rank
 * 1 never joins, calls rank 1 never answers) when its main thread shuts
 * down (PEERLOST_HOW: immediate or graceful, with rank 1 shutting down
 * the same way): each wait ends, the second barrier at its own 500 ms,
 * the others FRPC_ESHUTDOWN, frpc_shutdown returns 0 (graceful: its
 * barrier is not confused with the unfinished one), and it frees the
 * agent only after they have all left it (ASan would see it). */
static int mode_inside(void)
{
    const char *how_s = getenv("PEERLOST_HOW");
    int graceful = how_s && strcmp(how_s, "graceful") == 0;
    au_start();
    CHECK(nranks == 2, "inside needs 2 ranks");
    au_register("hold", hold_forever, NULL, FRPC_INLINE);
    au_register("ready", ready, NULL, FRPC_INLINE);
    au_barrier();
    if (me == 1) {
        /* Rank 0 says when its shutdown is over; then this one ends. */
        for (int i = 0; i < 60000 && atomic_load(&nready) == 0; i++)
            au_sleep_us(1000);
        CHECK(atomic_load(&nready) == 1, "rank 0 never said it was done");
        /* Graceful: its barrier meets rank 0's shutdown, not the
         * application's barrier rank 0 left unfinished. Immediate: after
         * rank 0's (else rank 0's barrier could end FRPC_EPEERLOST). */
        for (int i = 0; !graceful && i < 60000 &&
                        frpc_peer_state(agent, 0) == FRPC_PEER_ALIVE; i++)
            au_sleep_us(1000);
        int rc = frpc_shutdown(agent, graceful ? FRPC_SHUTDOWN_GRACEFUL
                                               : FRPC_SHUTDOWN_IMMEDIATE,
                               20000);
        CHECK(rc == 0, "shutdown: %s", frpc_err_name(rc));
        printf("ok: rank 1 done\n");
        return 0;
    }
    int n = graceful ? IN_CALL : IN_N; /* graceful drains calls first */
    pthread_t th[IN_N];
    for (int i = 0; i < n; i++) {
        atomic_store(&in_code[i], 1);
        CHECK(pthread_create(&th[i], NULL, inside_main, (void *)(intptr_t)i)
                  == 0, "thread");
    }
    while (atomic_load(&in_started) < n)
        au_sleep_us(1000);
    au_sleep_us(1000000); /* each thread is inside its call by now */
    for (int i = 0; i < n && i < IN_BARRIER2; i++)
        CHECK(atomic_load(&in_code[i]) == 1, "%s ended before shutdown: %s",
              in_what[i], frpc_err_name(atomic_load(&in_code[i])));
    if (!graceful)
        for (int i = 0; i < 30000 && atomic_load(&in_code[IN_BARRIER2]) == 1;
             i++)
            au_sleep_us(1000);
    /* Rank 1 shuts down too once told (graceful: the two meet). */
    frpc_result res;
    int rc = frpc_call(agent, 1, "ready", NULL, 0, 20000, &res);
    CHECK(rc == 0, "ready: %s", frpc_err_name(rc));
    frpc_result_clear(&res);
    double t0 = au_now_ms();
    rc = frpc_shutdown(agent, graceful ? FRPC_SHUTDOWN_GRACEFUL
                                       : FRPC_SHUTDOWN_IMMEDIATE, 5000);
    double ms = au_now_ms() - t0;
    CHECK(rc == 0, "shutdown: %s", frpc_err_name(rc));
    CHECK(ms < 5000 + AT_ONCE_MS, "shutdown took %.0f ms", ms);
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        int want = i == IN_BARRIER2 ? FRPC_ETIMEDOUT : FRPC_ESHUTDOWN;
        CHECK(atomic_load(&in_code[i]) == want, "%s: %s, want %s",
              in_what[i], frpc_err_name(atomic_load(&in_code[i])),
              frpc_err_name(want));
    }
    if (!graceful)
        CHECK(in_ms[IN_BARRIER2] < 500 + AT_ONCE_MS,
              "a second barrier waited %.0f ms behind the first, past its "
              "500 ms", in_ms[IN_BARRIER2]);
    printf("ok: rank 0: %s shutdown (%s in %.0f ms) ended the %d calls "
           "inside the agent, then freed it\n", graceful ? "graceful" :
           "immediate", frpc_err_name(rc), ms, n);
    return 0;
}

/* ---- barrier-queue ---------------------------------------------------- */

/* Rank 1's two barrier threads: the first in the store, the second
 * waiting its turn behind it, when rank 1's graceful shutdown begins. */
static atomic_int bq_code[2] = {1, 1};
static double bq_end_ms[2], bq_shutdown_ms; /* the shutdown's start */

static void *bq_main(void *arg)
{
    int which = (int)(intptr_t)arg;
    int rc = frpc_barrier(agent, FRPC_TIMEOUT_NONE);
    bq_end_ms[which] = au_now_ms();
    atomic_store(&bq_code[which], rc);
    return NULL;
}

/* Rank 1, once both threads ended: they must have ended FRPC_ESHUTDOWN
 * within 100 ms of the shutdown's start (AT_ONCE_MS on a loaded box);
 * then tells the others by a file (it can call nobody, shutting down). */
static void *bq_watch(void *arg)
{
    pthread_t *th = arg;
    double t0 = bq_shutdown_ms;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        CHECK(atomic_load(&bq_code[i]) == FRPC_ESHUTDOWN,
              "rank 1's %s barrier: %s, want FRPC_ESHUTDOWN",
              i ? "queued" : "first", frpc_err_name(atomic_load(&bq_code[i])));
        CHECK(bq_end_ms[i] - t0 < 100 + AT_ONCE_MS, "rank 1's %s barrier "
              "ended %.0f ms into the shutdown", i ? "queued" : "first",
              bq_end_ms[i] - t0);
    }
    printf("ok: rank 1's barriers ended FRPC_ESHUTDOWN %.0f and %.0f ms "
           "into its graceful shutdown (the first in the store, the second "
           "waiting its turn)\n", bq_end_ms[0] - t0, bq_end_ms[1] - t0);
    fflush(stdout);
    touch_dir_file("bq-ended");
    return NULL;
}

/* 3 ranks. Rank 1 has a barrier (no limit) in the store and another
 * thread's behind it when it shuts down gracefully: both end
 * FRPC_ESHUTDOWN (fabrpc.h, frpc_barrier). Ranks 0 and 2 then find that
 * the first one's entry counts (their barrier completes, rank 1 still in
 * its shutdown) and that the queued one entered nothing (their next
 * barrier runs out); then all three shutdowns meet. */
static int mode_barrier_queue(void)
{
    start_lost();
    CHECK(nranks == 3, "barrier-queue needs 3 ranks");
    au_barrier();
    if (me == 1) {
        pthread_t th[2], w;
        for (int i = 0; i < 2; i++) {
            CHECK(pthread_create(&th[i], NULL, bq_main, (void *)(intptr_t)i)
                      == 0, "thread");
            au_sleep_us(300 * 1000); /* the first is in the store by then */
        }
        bq_shutdown_ms = au_now_ms();
        CHECK(pthread_create(&w, NULL, bq_watch, th) == 0, "thread");
        double sms;
        int rc = timed_shutdown(SHUTDOWN_MS * 3, &sms);
        CHECK(rc == 0, "rank 1's shutdown: %s", frpc_err_name(rc));
        pthread_join(w, NULL);
        printf("ok: rank 1 done (shutdown in %.0f ms)\n", sms);
        return 0;
    }
    wait_file("bq-ended");
    double t0 = au_now_ms();
    int rc = frpc_barrier(agent, 20000);
    CHECK(rc == 0, "the barrier rank 1's first thread entered: %s, want 0 "
          "(its entry counts)", frpc_err_name(rc));
    printf("ok: rank %d: the barrier rank 1 entered before its shutdown "
           "completed in %.0f ms\n", me, au_now_ms() - t0);
    t0 = au_now_ms();
    rc = frpc_barrier(agent, 1500);
    CHECK(rc == FRPC_ETIMEDOUT, "the barrier rank 1's queued thread waited "
          "for: %s, want FRPC_ETIMEDOUT (it entered nothing)",
          frpc_err_name(rc));
    printf("ok: rank %d: the next one ran out after %.0f ms: rank 1's "
           "queued barrier entered nothing\n", me, au_now_ms() - t0);
    double sms;
    rc = timed_shutdown(SHUTDOWN_MS * 3, &sms);
    CHECK(rc == 0, "shutdown: %s", frpc_err_name(rc));
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- default-timeout ---------------------------------------------------- */

static int mode_default_timeout(void)
{
    au_start();
    CHECK(nranks == 2, "default-timeout needs 2 ranks");
    au_register("hold", hold_forever, NULL, 0);
    au_barrier();
    if (me == 0) {
        frpc_result res;
        double t0 = au_now_ms();
        int rc = au_call(1, "hold", 1, 64, FRPC_TIMEOUT_DEFAULT, &res);
        double ms = au_now_ms() - t0;
        frpc_result_clear(&res);
        CHECK(rc == FRPC_ETIMEDOUT, "sync call, default timeout: %s",
              frpc_err_name(rc));
        CHECK(ms >= 250 && ms < 10000, "sync call, default timeout (300 ms) "
              "ended after %.0f ms", ms);
        frpc_future *f = au_async(1, "hold", 2, 64, FRPC_TIMEOUT_DEFAULT);
        rc = frpc_future_wait(f, 20000);
        double ams = au_now_ms() - t0 - ms;
        CHECK(rc == FRPC_ETIMEDOUT, "async call, default timeout: %s",
              frpc_err_name(rc));
        CHECK(ams >= 250 && ams < 10000, "async call, default timeout "
              "(300 ms) ended after %.0f ms", ams);
        frpc_future_free(f);
        printf("ok: FRPC_TIMEOUT_DEFAULT with FABRPC_TIMEOUT_MS=300 ended "
               "FRPC_ETIMEDOUT after %.0f ms (sync), %.0f ms (async)\n", ms,
               ams);
    }
    au_barrier();
    au_finish();

    /* Again, rank 0 with config.timeout_ms = -1: the default is no limit. */
    char err[1024];
    frpc_config cfg;
    config_with_errbuf(&cfg, err, sizeof(err));
    if (me == 0)
        cfg.timeout_ms = -1;
    int rc = frpc_init(&cfg, &agent);
    CHECK(rc == 0, "frpc_init: %s: %s", frpc_strerror(rc), err);
    au_register("hold", hold_forever, NULL, 0);
    au_barrier();
    if (me == 0) {
        frpc_future *f = au_async(1, "hold", 3, 64, FRPC_TIMEOUT_DEFAULT);
        rc = frpc_future_wait(f, 1000);
        CHECK(rc == FRPC_ETIMEDOUT && !frpc_future_test(f),
              "call with the default timeout under "
              "config.timeout_ms = -1: %s after 1 s, want still in flight",
              frpc_err_name(rc));
        rc = frpc_future_cancel(f);
        CHECK(rc == 0, "cancel: %s", frpc_err_name(rc));
        au_expect_status(f, FRPC_ECANCELED, "cancelled call");
        frpc_future_free(f);
        printf("ok: with config.timeout_ms = -1 a FRPC_TIMEOUT_DEFAULT call "
               "is still in flight after 1 s\n");
    }
    au_barrier();
    au_finish();
    return 0;
}

/* ---- init-only ---------------------------------------------------------- */

static int mode_init_only(void)
{
    char err[1024];
    frpc_config cfg;
    config_with_errbuf(&cfg, err, sizeof(err));
    const char *r = getenv("FABRPC_RANK");
    me = r ? atoi(r) : -1;
    double t0 = au_now_ms();
    int rc = frpc_init(&cfg, &agent);
    double ms = au_now_ms() - t0;
    printf("init: rc=%s ms=%.0f err=%s\n", frpc_err_name(rc), ms, err);
    if (rc != 0)
        return 0;
    double sms;
    timed_shutdown(5000, &sms);
    return 3;
}


/* ---- abort, term-in-init ----------------------------------------------- */

static int mode_abort(void)
{
    start_lost();
    if (me == 1) {
        fprintf(stderr, "rank 1: calling abort()\n");
        fflush(NULL);
        abort();
    }
    int rc = frpc_barrier(agent, FRPC_TIMEOUT_NONE);
    CHECK(rc == FRPC_EPEERLOST, "barrier with rank 1 aborted: %s",
          frpc_err_name(rc));
    double ms;
    timed_shutdown(SHUTDOWN_MS, &ms);
    printf("ok: rank %d done\n", me);
    return 0;
}

static pthread_t term_main;
static int term_at_main;

/* Stays after sending: a process-directed signal that the thread it
 * chose blocks at that moment (rank 1 entering frpc_shutdown's hold) is
 * handed to a thread that takes it, maybe this one, whose handler must
 * then run. Under ThreadSanitizer, which defers a handler to the thread's
 * next interceptor, a thread that ended meanwhile took the signal with it
 * (4 of 90 jobs hung until the launcher's timeout). */
static void *term_later(void *arg)
{
    au_sleep_us(*(unsigned *)arg);
    if (term_at_main)
        pthread_kill(term_main, SIGTERM);
    else
        kill(getpid(), SIGTERM);
    for (;;)
        pause();
    return NULL;
}

/* What many programs do on SIGTERM (not async-signal-safe, but common). */
static void term_exit_7(int sig)
{
    (void)sig;
    exit(7);
}

/* Rank 1 is sent SIGTERM us microseconds from now. */
static void term_in(unsigned *us)
{
    pthread_t t;
    term_main = pthread_self();
    CHECK(pthread_create(&t, NULL, term_later, us) == 0, "thread");
    pthread_detach(t); /* the process ends before it could be joined */
}

static int mode_term_in_init(void)
{
    static unsigned term_us;
    const char *r = getenv("FABRPC_RANK"), *d = getenv("PEERLOST_TERM_MS");
    const char *at = getenv("PEERLOST_TERM_AT");
    int in_shutdown = at && strcmp(at, "shutdown") == 0;
    me = r ? atoi(r) : -1;
    if (me == 1) {
        const char *how = getenv("PEERLOST_TERM_EXIT");
        if (how) { /* "process" or "main": where the SIGTERM is aimed */
            signal(SIGTERM, term_exit_7);
            term_at_main = strcmp(how, "main") == 0;
        }
        if (in_shutdown) /* PEERLOST_TERM_US into frpc_shutdown */
            d = getenv("PEERLOST_TERM_US");
        term_us = d ? (unsigned)atoi(d) * (in_shutdown ? 1u : 1000u) : 0;
        if (!in_shutdown)
            term_in(&term_us);
    }
    char err[1024];
    frpc_config cfg;
    config_with_errbuf(&cfg, err, sizeof(err));
    int rc = frpc_init(&cfg, &agent);
    if (me == 1 && !in_shutdown)
        for (;;)
            pause(); /* only the SIGTERM ends this rank */
    printf("init: %s %s\n", frpc_err_name(rc), err);
    if (rc == 0) {
        rc = frpc_barrier(agent, FRPC_TIMEOUT_NONE);
        printf("barrier: %s\n", frpc_err_name(rc));
        if (me == 1 && in_shutdown) {
            term_in(&term_us);
            (void)frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, SHUTDOWN_MS);
            for (;;)
                pause(); /* the SIGTERM came in it, or comes now */
        }
        double ms;
        rc = timed_shutdown(SHUTDOWN_MS, &ms);
        CHECK(!in_shutdown || rc == 0 || rc == FRPC_EPEERLOST,
              "shutdown beside a rank ended in its own: %s",
              frpc_err_name(rc));
    }
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- answer-then-leave --------------------------------------------------- */

/* The header: "Before the others learn that it left, it polls until ...
 * their callers have read large answers from this rank ... at most half a
 * second whatever timeout_ms". Rank 1 answers a 16 MB call from an inline
 * handler and at once shuts down, gracefully with a 1 ms timeout (its
 * barrier fails: rank 0 is still in its call); rank 0's call must get
 * the answer, not FRPC_EPEERLOST (before: 20 of 20 over tcp, 6 of 10 over
 * shm). */
static atomic_int atl_answered;

/* The answer's size: PEERLOST_ATL_BYTES, else 16 MiB. The wait before
 * the goodbye is bounded (half a second): a build under a sanitizer,
 * slower, sets a smaller one. */
static size_t atl_bytes(void)
{
    const char *s = getenv("PEERLOST_ATL_BYTES");
    return s && *s ? (size_t)strtoull(s, NULL, 10) : (size_t)16 << 20;
}

static void atl_big(frpc_request *req, void *user)
{
    (void)user;
    void *reply = au_msg(77, atl_bytes());
    int rc = frpc_respond_owned(req, reply, atl_bytes());
    CHECK(rc == 0, "answer: %s", frpc_err_name(rc));
    atomic_store(&atl_answered, 1);
}

static int mode_answer_then_leave(void)
{
    start_lost();
    CHECK(nranks == 2, "answer-then-leave needs 2 ranks");
    au_register("big", atl_big, NULL, FRPC_INLINE);
    au_barrier();
    double ms;
    if (me == 1) {
        CHECK(wait_count(&atl_answered, 1, BOUND_MS), "never called");
        int rc = frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, 1);
        agent = NULL;
        CHECK(rc == FRPC_ETIMEDOUT || rc == 0, "shutdown(GRACEFUL, 1): %s",
              frpc_err_name(rc));
        printf("ok: rank 1 answered and left: %s\n", frpc_err_name(rc));
        return 0;
    }
    frpc_result res;
    int rc = frpc_call(agent, 1, "big", NULL, 0, 60000, &res);
    uint64_t seed = 0;
    CHECK(rc == 0, "the call answered before its callee left: %s (%s)",
          frpc_err_name(rc), au_why(rc, res.error));
    CHECK(res.len == atl_bytes() && au_msg_check(res.data, res.len, &seed) &&
              seed == 77,
          "the answer's %zu bytes", res.len);
    printf("ok: rank 0 got the %zu-byte answer of a rank that left at "
           "once\n", res.len);
    frpc_result_clear(&res);
    rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(rc == 0 || rc == FRPC_EPEERLOST, "shutdown: %s",
          frpc_err_name(rc));
    return 0;
}

/* ---- leave-answers ------------------------------------------------------ */

#define LA_WINDOW 32
#define LA_SERVE 3000
#define LA_MAXSEQ (1 << 20)
static unsigned char *la_answered[MAX_RANKS];
static atomic_int la_served;
/* Per caller: rank 0 leaves only once both callers are well under way (a
 * caller descheduled until then would see its first calls refused, as
 * they should be, to a rank that has left: CI, TSan). */
static atomic_int la_served_by[MAX_RANKS];

static void la_seq(frpc_request *req, void *user)
{
    uint64_t seq;
    size_t len;
    const void *a = frpc_request_args(req, &len);
    int src = frpc_request_source(req);
    CHECK(a && len == sizeof(seq) && src > 0 && src < MAX_RANKS, "seq args");
    memcpy(&seq, a, sizeof(seq));
    if (frpc_respond(req, &seq, sizeof(seq)) == 0 && seq < LA_MAXSEQ)
        la_answered[src][seq] = 1;
    atomic_fetch_add(&la_served, 1);
    atomic_fetch_add(&la_served_by[src], 1);
}

static void la_path(char *buf, size_t len, int rank, const char *suffix)
{
    dir_path(buf, len, "answered.%d%s", rank, suffix);
}

static int mode_leave_answers(void)
{
    start_lost();
    CHECK(nranks == 4, "leave-answers needs 4 ranks");
    for (int r = 0; r < nranks; r++) {
        la_answered[r] = calloc(LA_MAXSEQ, 1);
        CHECK(la_answered[r], "calloc");
    }
    au_register("seq", la_seq, NULL, FRPC_INLINE);
    au_barrier();
    if (me == 3)
        die_now();
    wait_dead(3);
    char path[600], tmp[600];
    if (me == 0) {
        for (int r = 1; r <= 2; r++)
            CHECK(wait_count(&la_served_by[r], LA_SERVE, BOUND_MS),
                  "served rank %d %d calls", r, atomic_load(&la_served_by[r]));
        double ms;
        int rc = timed_shutdown(SHUTDOWN_MS, &ms);
        CHECK(rc == FRPC_EPEERLOST, "shutdown: %s", frpc_err_name(rc));
        for (int r = 1; r <= 2; r++) {
            la_path(path, sizeof(path), r, "");
            la_path(tmp, sizeof(tmp), r, ".tmp");
            FILE *f = fopen(tmp, "w");
            CHECK(f, "cannot write %s", tmp);
            for (size_t q = 0; q < LA_MAXSEQ; q++)
                if (la_answered[r][q])
                    fprintf(f, "%zu\n", q);
            CHECK(fclose(f) == 0 && rename(tmp, path) == 0, "%s", path);
        }
        printf("ok: rank 0 served %d calls, left\n", atomic_load(&la_served));
        printf("ok: rank 0 done\n");
        return 0;
    }
    static frpc_future *f[LA_WINDOW];
    static uint64_t seqs[LA_WINDOW];
    static unsigned char *lost;
    lost = calloc(LA_MAXSEQ, 1);
    CHECK(lost, "calloc");
    uint64_t seq = 0;
    int live = 0, nlost = 0, stop = 0;
    for (int i = 0; i < LA_WINDOW; i++) {
        seqs[i] = ++seq;
        int rc = frpc_call_async(agent, 0, "seq", &seqs[i], sizeof(seqs[i]),
                                 FRPC_TIMEOUT_NONE, &f[i]);
        CHECK(rc == 0, "call_async: %s", frpc_err_name(rc));
        live++;
    }
    watchdog_start("leave-answers' calls to rank 0", BOUND_MS / 1000);
    while (live) {
        size_t i;
        int rc = frpc_wait_any(f, LA_WINDOW, CALL_TIMEOUT_MS, &i);
        CHECK(rc == 0, "wait_any: %s", frpc_err_name(rc));
        int st = frpc_future_error(f[i], NULL, NULL);
        frpc_future_free(f[i]);
        f[i] = NULL;
        live--;
        CHECK(st == 0 || st == FRPC_EPEERLOST, "seq %llu: %s",
              (unsigned long long)seqs[i], frpc_err_name(st));
        if (st == FRPC_EPEERLOST) {
            stop = 1;
            nlost++;
            if (seqs[i] < LA_MAXSEQ)
                lost[seqs[i]] = 1;
        }
        if (!stop) {
            seqs[i] = ++seq;
            rc = frpc_call_async(agent, 0, "seq", &seqs[i], sizeof(seqs[i]),
                                 FRPC_TIMEOUT_NONE, &f[i]);
            if (rc == 0)
                live++;
            else {
                CHECK(rc == FRPC_EPEERLOST, "call_async: %s",
                      frpc_err_name(rc));
                f[i] = NULL;
                stop = 1;
            }
        }
    }
    watchdog_done();
    /* Leave first: rank 0, serving the store, waits for us to leave
     * before it returns and writes its record. */
    double ms;
    timed_shutdown(SHUTDOWN_MS, &ms);
    /* rank 0's record of what it answered */
    la_path(path, sizeof(path), me, "");
    double t0 = au_now_ms();
    FILE *in;
    while (!(in = fopen(path, "r"))) {
        CHECK(au_now_ms() - t0 < BOUND_MS, "no %s", path);
        au_sleep_us(1000);
    }
    size_t q;
    int overtaken = 0;
    while (fscanf(in, "%zu", &q) == 1)
        if (q < LA_MAXSEQ && lost[q]) {
            fprintf(stderr, "rank %d: seq %zu answered by rank 0, ended "
                    "FRPC_EPEERLOST here\n", me, q);
            overtaken++;
        }
    fclose(in);
    CHECK(overtaken == 0, "%d answered calls ended FRPC_EPEERLOST (the "
          "answer was overtaken by the news that rank 0 left)", overtaken);
    printf("ok: %llu calls, %d ended FRPC_EPEERLOST, none of them answered\n",
           (unsigned long long)seq, nlost);
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- futures-mixed ------------------------------------------------------ */

/* Rank 1 calls exit(0) inside its 20th "dawdle" handler while rank 0 has
 * FM_CALLS async calls in flight to it and as many to rank 2, each with a
 * callback. The header: an exited rank is lost, every call to it ends
 * FRPC_EPEERLOST (or was answered); a callback runs exactly once; futures
 * outlive frpc_shutdown, complete, and may be read, waited for,
 * cancelled (1) and freed. */
#define FM_CALLS 200
#define FM_EXIT_AT 20

static atomic_int fm_seen;
static atomic_int fm_runs[2 * FM_CALLS];

static void dawdle(frpc_request *req, void *user)
{
    (void)user;
    if (me == 1 && atomic_fetch_add(&fm_seen, 1) + 1 == FM_EXIT_AT) {
        fflush(stdout);
        exit(0);
    }
    au_sleep_us(2000);
    frpc_respond(req, "ok", 2);
}

static void fm_count(frpc_future *f, void *user)
{
    (void)f;
    atomic_fetch_add(&fm_runs[(intptr_t)user], 1);
}

static int mode_futures_mixed(void)
{
    start_lost();
    CHECK(nranks == 3, "futures-mixed needs 3 ranks");
    au_register("dawdle", dawdle, NULL, 0);
    au_barrier();
    if (me == 1) {
        au_sleep_us(60 * 1000000);
        CHECK(0, "rank 1 did not exit in its handler within 60 s");
    }
    double ms;
    if (me == 2) {
        int rc = timed_shutdown(SHUTDOWN_MS + 5000, &ms);
        CHECK(rc == FRPC_EPEERLOST, "shutdown with rank 1 lost: %s, want "
              "FRPC_EPEERLOST", frpc_err_name(rc));
        printf("ok: rank %d done\n", me);
        return 0;
    }
    frpc_future *f[2 * FM_CALLS];
    for (int i = 0; i < 2 * FM_CALLS; i++) {
        int rc = frpc_call_async(agent, 1 + i % 2, "dawdle", "x", 1,
                                 FRPC_TIMEOUT_NONE, &f[i]);
        if (rc == FRPC_EPEERLOST && i % 2 == 0) { /* rank 1 already gone */
            f[i] = NULL;
            atomic_store(&fm_runs[i], 1);
            continue;
        }
        CHECK(rc == 0, "call %d to rank %d: %s", i, 1 + i % 2,
              frpc_err_name(rc));
        CHECK(frpc_future_then(f[i], fm_count, (void *)(intptr_t)i) == 0,
              "then %d", i);
    }
    /* The first wait_any returns a completed future; then all of them. */
    size_t ix = SIZE_MAX;
    CHECK(frpc_wait_any(f, 2 * FM_CALLS, FRPC_TIMEOUT_NONE, &ix) == 0 &&
          ix < 2 * FM_CALLS && frpc_future_test(f[ix]), "wait_any");
    double t0 = au_now_ms();
    int rc = frpc_wait_all(f, 2 * FM_CALLS, BOUND_MS);
    CHECK(rc == 0, "wait_all with rank 1 gone: %s after %.0f ms",
          frpc_err_name(rc), au_now_ms() - t0);
    int answered = 0, lost = 0;
    for (int i = 0; i < 2 * FM_CALLS; i++) {
        if (!f[i])
            continue;
        int st = frpc_future_error(f[i], NULL, NULL);
        if (i % 2)
            CHECK(st == 0, "call %d to the live rank 2: %s", i,
                  frpc_err_name(st));
        else if (st == 0)
            answered++;
        else {
            CHECK(st == FRPC_EPEERLOST, "call %d to the exited rank 1: %s, "
                  "want FRPC_EPEERLOST", i, frpc_err_name(st));
            lost++;
        }
    }
    /* Its other handlers may answer while exit runs (at least the one
     * that called exit never does). */
    CHECK(lost > 0, "rank 1 answered all %d calls", answered);
    rc = timed_shutdown(SHUTDOWN_MS, &ms);
    CHECK(rc == FRPC_EPEERLOST, "shutdown with rank 1 lost: %s, want "
          "FRPC_EPEERLOST", frpc_err_name(rc));
    for (int i = 0; i < 2 * FM_CALLS; i++) {
        if (!f[i])
            continue;
        int st = frpc_future_error(f[i], NULL, NULL);
        CHECK(frpc_future_test(f[i]) == 1, "future %d in flight after "
              "shutdown", i);
        CHECK(frpc_future_wait(f[i], 10) == st, "future %d's wait after "
              "shutdown", i);
        CHECK(frpc_future_cancel(f[i]) == 1, "future %d's cancel after "
              "shutdown", i);
        frpc_future_free(f[i]);
        CHECK(atomic_load(&fm_runs[i]) == 1, "future %d's callback ran %d "
              "times", i, atomic_load(&fm_runs[i]));
    }
    printf("ok: rank 1 exited in a handler: %d of its calls answered, %d "
           "FRPC_EPEERLOST, rank 2's %d answered, each callback once; "
           "futures read, waited, cancelled (1) after shutdown\n",
           answered, lost, FM_CALLS);
    printf("ok: rank %d done\n", me);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(void);
    } modes[] = {{"kill", mode_kill},
                 {"die-in-handler", mode_die_in_handler},
                 {"rndv-death", mode_rndv_death},
                 {"rma-death", mode_rma_death},
                 {"store-death", mode_store_death},
                 {"barrier-death", mode_barrier_death},
                 {"storm", mode_storm},
                 {"init-death", mode_init_death},
                 {"late-shutdown", mode_late_shutdown},
                 {"reinit", mode_reinit},
                 {"first-call", mode_first_call},
                 {"default-timeout", mode_default_timeout},
                 {"init-only", mode_init_only},
                 {"abort", mode_abort},
                 {"term-in-init", mode_term_in_init},
                 {"vanish", mode_vanish},
                 {"cutoff", mode_cutoff},
                 {"blip", mode_blip},
                 {"max-inflight", mode_max_inflight},
                 {"inflight-race", mode_inflight_race},
                 {"late-callback", mode_late_callback},
                 {"left-in-shutdown", mode_left_in_shutdown},
                 {"bye-bound", mode_bye_bound},
                 {"answers-before-bye", mode_answers_before_bye},
                 {"answer-then-leave", mode_answer_then_leave},
                 {"replay-order", mode_replay_order},
                 {"drain", mode_drain},
                 {"own-threads", mode_own_threads},
                 {"inside", mode_inside},
                 {"barrier-queue", mode_barrier_queue},
                 {"leave-answers", mode_leave_answers},
                 {"peer-fn", mode_peer_fn},
                 {"notify-lost", mode_notify_lost},
                 {"fn-in-shutdown", mode_fn_in_shutdown},
                 {"fn-replace", mode_fn_replace},
                 {"fn-set-in-handler", mode_fn_set_in_handler},
                 {"stuck-sends", mode_stuck_sends},
                 {"futures-mixed", mode_futures_mixed}};
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; argc == 2 && i < sizeof(modes) / sizeof(modes[0]); i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            return modes[i].fn();
    fprintf(stderr, "usage: peerlost MODE (see peerlost.c)\n");
    return 2;
}
