/*
 * rma's modes on what the header says of notifications (2 ranks each;
 * see rma_batch.c for the batch and notify modes).
 *
 *   noteshut  around a slow callback, the per-function figures and a
 *           shutdown:
 *   1. frpc_notify waits until the receiver's callback returned: with
 *      rank 1's fn taking 400 ms, rank 0's frpc_notify(100 ms) ends
 *      FRPC_ETIMEDOUT, and rank 1's fn has the notification all the same.
 *   2. "frpc.notify" figures: frpc_notify counts on both sides (a call on
 *      the sender, a request handled on the receiver); a batch's
 *      notification on the receiver only.
 *   3. Once rank 1's graceful shutdown begins, it refuses notifications
 *      (rank 0 gets FRPC_EPEERLOST, rank 1 counts them refused), and a
 *      thread of rank 1 waiting in frpc_notify_wait takes every one rank 0
 *      was told 0 for, in order, then gets FRPC_ESHUTDOWN, again on the
 *      next wait: nothing told 0 is left behind. A batch's notification
 *      to it is refused the same way (the batch ends FRPC_EPEERLOST), its
 *      put having landed. Then rank 1, still in its shutdown, sets an
 *      frpc_on_notify fn: that fn gets the notifications sent from then
 *      on, a batch's too, their senders told 0.
 *   notezero  with FABRPC_NOTIFY_QUEUE=2: a batch whose every op moves 0
 *           bytes still sends its notification once done, sync and async
 *           (rank 1 takes both, from rank 0, their bytes whole); with
 *           rank 1's queue full, such a batch ends FRPC_EAGAIN, sync and
 *           async (its future), and nothing of it is queued; without a
 *           notification it ends 0 at once, queue full or not.
 *   notefail  an op failing, the batch ends with the first failure and
 *           sends nothing: a good put and a put to a region rank 1 has
 *           deregistered, with a notification, end FRPC_EACCES (natively
 *           elsewhere than shm: FRPC_EACCES or FRPC_ETRANSPORT, tcp
 *           dropping the connection), sync and async; rank 0 counts no
 *           notification sent, rank 1 none received and takes none in
 *           500 ms; natively on shm the good put did not land either.
 *   notewait  with FABRPC_TIMEOUT_MS=1500: frpc_notify_wait's timeout 0
 *           is the agent's default (it waits 1.5 s: at least 1400 ms),
 *           not a poll; 1 ends FRPC_ETIMEDOUT at once (under 1 s). Then
 *           a thread of each rank waits with FRPC_TIMEOUT_NONE while its
 *           rank's frpc_shutdown begins: the wait ends FRPC_ESHUTDOWN,
 *           and the shutdown returns 0 within its 20 s.
 *   notemulti  3 threads of rank 1 wait at once while rank 0 sends 600
 *           notifications (then an end mark for each): each is taken
 *           once, by one waiter, and each waiter's come in the order sent
 *           (a take is the oldest).
 *   notestats  each rank reads frpc_get_stats for 3 s while its other
 *           threads make calls and async batches with notifications to
 *           the other: no counter ever goes down (calls_started did: a
 *           batch's notification renews its entry's id, and the count was
 *           made of ids less renewals, read apart).
 *   noteorder  rounds of two async batches in flight at once, a big one
 *           started first and a small one: rank 1 takes their
 *           notifications in the order their futures completed (told by
 *           rank 0 after both, where frpc_wait_any tells them apart).
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>

#include "check_fail.h"
#include "rma.h"

RMA_DUMP_ON_FAILURE

#define SLOW_FN_MS 400
#define SHORT_NOTIFY_MS 100
#define REFUSED_MORE 3 /* sent after the first refusal, all refused too */

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void barrier(const char *what)
{
    int rc = frpc_barrier(agent, 120000);
    CHECK(rc == 0, "barrier (%s): %s", what, frpc_strerror(rc));
}

static frpc_fn_stats notify_figures(void)
{
    frpc_fn_stats st;
    CHECK(frpc_get_fn_stats(agent, "frpc.notify", &st) == 0,
          "frpc_get_fn_stats");
    return st;
}

/* ---- 1. a slow callback ------------------------------------------------ */

static atomic_int slow_got;

static void slow_note(frpc_agent *a, int src, const void *msg, size_t len,
                      void *user)
{
    (void)a;
    (void)user;
    nap_ms(SLOW_FN_MS);
    if (src == 0 && len == 4 && !memcmp(msg, "slow", 4))
        atomic_store(&slow_got, 1);
}

static void slow_callback(void)
{
    if (me == 1)
        CHECK(frpc_on_notify(agent, slow_note, NULL) == 0, "on_notify");
    barrier("callback set");
    if (me == 0)
        expect(frpc_notify(agent, 1, "slow", 4, SHORT_NOTIFY_MS),
               FRPC_ETIMEDOUT, "a notification whose receiver's fn takes "
               "400 ms, waited for 100 ms");
    barrier("notified");
    if (me == 1) {
        /* Waits for a run of fn still going. */
        CHECK(frpc_on_notify(agent, NULL, NULL) == 0, "on_notify NULL");
        CHECK(atomic_load(&slow_got), "fn did not get the notification "
              "whose sender timed out");
        /* Answered once fn returned: counted then, fn's run in its time. */
        frpc_fn_stats st = notify_figures();
        for (int i = 0; i < 10000 && !st.handled; i++) {
            nap_ms(1);
            st = notify_figures();
        }
        CHECK(st.handled == 1 &&
              st.handle_ns_max >= (uint64_t)SLOW_FN_MS * 1000000u,
              "frpc.notify on rank 1: %llu handled, the longest in %llu ns",
              (unsigned long long)st.handled,
              (unsigned long long)st.handle_ns_max);
        printf("ok: rank 0's frpc_notify ended FRPC_ETIMEDOUT while rank "
               "1's fn had it (answered after %.0f ms)\n",
               st.handle_ns_max / 1e6);
    }
}

/* ---- 2. "frpc.notify" figures ------------------------------------------ */

static void take_one(const char *want)
{
    char got[FRPC_NOTIFY_MAX];
    size_t len;
    int src;
    int rc = frpc_notify_wait(agent, &src, got, sizeof(got), &len,
                              TIMEOUT_MS);
    CHECK(rc == 0 && src == 0 && len == strlen(want) &&
          !memcmp(got, want, len), "notification \"%s\": %s, %zu B from %d",
          want, frpc_strerror(rc), len, src);
}

static void figures(void)
{
    frpc_fn_stats before = notify_figures();
    barrier("figures read");
    if (me == 0) {
        expect(frpc_notify(agent, 1, "alone", 5, TIMEOUT_MS), 0,
               "a notification alone");
        frpc_fn_stats mid = notify_figures();
        CHECK(mid.calls == before.calls + 1, "frpc_notify counted %llu "
              "calls of frpc.notify, want 1",
              (unsigned long long)(mid.calls - before.calls));
        uint8_t desc[FRPC_MEM_DESC_SIZE], *lbuf;
        frpc_mem *l = local_region(64, &lbuf);
        fill(lbuf, 64, 31u, 0);
        desc_of(1, desc);
        frpc_xfer op = {.op = FRPC_XFER_PUT, .local = l, .desc = desc,
                        .desc_len = FRPC_MEM_DESC_SIZE, .remote_off = 0,
                        .len = 64};
        expect(frpc_transfer(&op, 1, "batch", 5, TIMEOUT_MS), 0,
               "a batch of one put with a notification");
        frpc_fn_stats after = notify_figures();
        CHECK(after.calls == mid.calls && after.handled == before.handled,
              "a batch's notification counted on its sender: calls %llu -> "
              "%llu, handled %llu -> %llu",
              (unsigned long long)mid.calls, (unsigned long long)after.calls,
              (unsigned long long)before.handled,
              (unsigned long long)after.handled);
        CHECK(frpc_mem_deregister(l, 10000) == 0, "deregister");
        free(lbuf);
        barrier("both sent"); /* both answered: counted on rank 1 */
    } else {
        barrier("both sent");
        take_one("alone");
        take_one("batch");
        frpc_fn_stats after = notify_figures();
        CHECK(after.handled == before.handled + 2 && after.calls ==
              before.calls, "the receiver counted %llu handled (want 2) "
              "and %llu calls (want 0) of frpc.notify",
              (unsigned long long)(after.handled - before.handled),
              (unsigned long long)(after.calls - before.calls));
        CHECK(verify(region_buf, 64, 31u, 0) == 64, "the batch's bytes");
        printf("ok: frpc.notify counts a notification alone on both sides, "
               "a batch's on the receiver only\n");
    }
    barrier("figures");
}

/* ---- 3. refused once shutdown begins ----------------------------------- */

typedef struct {
    uint32_t taken;       /* by the waiting thread, in order */
    int32_t first_end;    /* its wait's code that ended the taking */
    int32_t next_end;     /* the next wait's */
    uint32_t put_ok;      /* the refused batch's put landed */
    uint64_t refused;     /* frpc_stats.notifications_refused since */
    int32_t fn_set;       /* frpc_on_notify's code, after the report */
} taker_report;

#define LATE_PUT_LEN 64
#define LATE_PUT_SEED 37u
#define FN_NOTES 3 /* alone, to rank 1's fn in its shutdown; then a batch */

/* Rank 1's fn, set in its shutdown: counts what arrives, in order. */
static atomic_int fn_got, fn_in_order = 1;

static void late_note(frpc_agent *a, int src, const void *msg, size_t len,
                      void *user)
{
    (void)a;
    (void)user;
    int n = atomic_fetch_add(&fn_got, 1);
    char want[16];
    snprintf(want, sizeof(want), "late%d", n);
    if (src != 0 || len != strlen(want) || memcmp(msg, want, len))
        atomic_store(&fn_in_order, 0);
}

static taker_report report;
static uint64_t refused_before;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t report_done = PTHREAD_COND_INITIALIZER;
static int taker_done;

static void *taker(void *arg)
{
    (void)arg;
    uint32_t seq;
    size_t len;
    int rc;
    while ((rc = frpc_notify_wait(agent, NULL, &seq, sizeof(seq), &len,
                                  TIMEOUT_MS)) == 0) {
        CHECK(len == sizeof(seq) && seq == report.taken, "took #%u of %zu "
              "B, want #%u", seq, len, report.taken);
        report.taken++;
    }
    report.first_end = rc;
    report.next_end = frpc_notify_wait(agent, NULL, &seq, sizeof(seq), &len,
                                       200);
    pthread_mutex_lock(&report_lock);
    taker_done = 1;
    pthread_cond_broadcast(&report_done);
    pthread_mutex_unlock(&report_lock);
    return NULL;
}

/* Rank 0 asks, once refused: answers the report when the taker is done
 * (it is, soon after the shutdown began). */
static void h_report(frpc_request *req, void *user)
{
    (void)user;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&report_lock);
    while (!taker_done &&
           pthread_cond_timedwait(&report_done, &report_lock, &until) == 0)
        ;
    int done = taker_done;
    pthread_mutex_unlock(&report_lock);
    if (!done) {
        frpc_respond_error(req, 1, "the taker did not end in 60 s");
        return;
    }
    frpc_stats st;
    if (frpc_get_stats(agent, &st) == 0)
        report.refused = st.notifications_refused - refused_before;
    report.put_ok = verify(region_buf, LATE_PUT_LEN, LATE_PUT_SEED, 0) ==
                    LATE_PUT_LEN;
    /* From a handler, in the shutdown: notifications go to fn again. */
    report.fn_set = frpc_on_notify(agent, late_note, NULL);
    frpc_respond(req, &report, sizeof(report));
}

static void refused_in_shutdown(void)
{
    pthread_t t;
    if (me == 1) {
        frpc_stats st;
        CHECK(frpc_get_stats(agent, &st) == 0, "stats");
        refused_before = st.notifications_refused;
        CHECK(frpc_register(agent, "noteshut_report", h_report, NULL, 0) ==
              0, "register");
        CHECK(pthread_create(&t, NULL, taker, NULL) == 0, "thread");
    }
    barrier("shutdown next");
    if (me == 1) {
        /* The region stays registered: rank 0's batch puts into it while
         * rank 1 shuts down (which ends the registration). */
        nap_ms(200); /* rank 0's first ones are taken, then the turn */
        int rc = frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, 120000);
        agent = NULL; /* freed: no counters to dump on a failure */
        CHECK(rc == 0, "frpc_shutdown: %s", frpc_strerror(rc));
        pthread_join(t, NULL);
        CHECK(frpc_mem_deregister(region, 0) == 0, "deregister after the "
              "shutdown");
        CHECK(atomic_load(&fn_got) == FN_NOTES + 1 &&
              atomic_load(&fn_in_order), "fn set in the shutdown got %d "
              "notifications (want %d, in order: %s)", atomic_load(&fn_got),
              FN_NOTES + 1, atomic_load(&fn_in_order) ? "yes" : "no");
        printf("ok: rank 1 took %u, then FRPC_ESHUTDOWN; its fn, set in "
               "the shutdown, got %d\n", report.taken, FN_NOTES + 1);
        free(region_buf);
        return;
    }
    uint32_t told0 = 0, refused = 0;
    int rc;
    struct timespec from, now;
    clock_gettime(CLOCK_MONOTONIC, &from);
    while (refused <= REFUSED_MORE) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        CHECK(now.tv_sec - from.tv_sec < 30, "rank 1, shutting down, took "
              "notifications for 30 s");
        rc = frpc_notify(agent, 1, &told0, sizeof(told0), TIMEOUT_MS);
        if (rc == 0) {
            CHECK(!refused, "rank 1 took #%u after refusing one", told0);
            told0++;
            nap_ms(1);
        } else {
            CHECK(rc == FRPC_EPEERLOST, "notification #%u to a rank in its "
                  "shutdown: %s, want FRPC_EPEERLOST", told0,
                  frpc_err_name(rc));
            refused++;
        }
    }
    /* A batch's notification is refused as one alone, its put landed. */
    uint8_t desc[FRPC_MEM_DESC_SIZE], *lbuf;
    frpc_mem *l = local_region(LATE_PUT_LEN, &lbuf);
    fill(lbuf, LATE_PUT_LEN, LATE_PUT_SEED, 0);
    desc_of(1, desc);
    frpc_xfer op = {.op = FRPC_XFER_PUT, .local = l, .desc = desc,
                    .desc_len = FRPC_MEM_DESC_SIZE, .remote_off = 0,
                    .len = LATE_PUT_LEN};
    expect(frpc_transfer(&op, 1, "refused", 7, TIMEOUT_MS), FRPC_EPEERLOST,
           "a batch with a notification to a rank in its shutdown");
    refused++;
    frpc_result res;
    rc = frpc_call(agent, 1, "noteshut_report", NULL, 0, TIMEOUT_MS, &res);
    CHECK(rc == 0 && res.len == sizeof(taker_report), "noteshut_report: %s",
          frpc_strerror(rc));
    memcpy(&report, res.data, sizeof(report));
    frpc_result_clear(&res);
    CHECK(report.taken == told0, "rank 1 took %u notifications; %u were "
          "told 0", report.taken, told0);
    CHECK(report.first_end == FRPC_ESHUTDOWN &&
          report.next_end == FRPC_ESHUTDOWN, "rank 1's waits ended %s, "
          "then %s; want FRPC_ESHUTDOWN twice",
          frpc_err_name(report.first_end), frpc_err_name(report.next_end));
    CHECK(report.refused == refused, "rank 1 counted %llu refused, rank 0 "
          "was refused %u", (unsigned long long)report.refused, refused);
    CHECK(report.put_ok, "the put of the batch whose notification was "
          "refused did not land");
    printf("ok: rank 1 took all %u notifications told 0, refused %u in its "
           "shutdown (FRPC_EPEERLOST; a batch's too, its put landed), its "
           "waits then FRPC_ESHUTDOWN\n", told0, refused);
    /* Rank 1 set an fn in its shutdown: that fn takes them. */
    CHECK(report.fn_set == 0, "frpc_on_notify in rank 1's shutdown: %s",
          frpc_err_name(report.fn_set));
    char late[16];
    for (int i = 0; i < FN_NOTES; i++) {
        snprintf(late, sizeof(late), "late%d", i);
        expect(frpc_notify(agent, 1, late, strlen(late), TIMEOUT_MS), 0,
               "a notification to an fn set in the receiver's shutdown");
    }
    snprintf(late, sizeof(late), "late%d", FN_NOTES);
    expect(frpc_transfer(&op, 1, late, strlen(late), TIMEOUT_MS), 0,
           "a batch's notification to an fn set in the owner's shutdown");
    CHECK(frpc_mem_deregister(l, 10000) == 0, "deregister");
    free(lbuf);
    CHECK(frpc_mem_deregister(region, 10000) == 0, "deregister");
    rc = frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, 120000);
    agent = NULL;
    CHECK(rc == 0, "frpc_shutdown: %s", frpc_strerror(rc));
    free(region_buf);
}

int mode_noteshut(void)
{
    start(64 * 1024);
    me = frpc_rank(agent);
    CHECK(world == 2, "noteshut needs 2 ranks");
    slow_callback();
    figures();
    refused_in_shutdown();
    printf("ok: rank %d done\n", me);
    return 0;
}

/* ---- helpers of the modes below ---------------------------------------- */

static frpc_stats stats_now(void)
{
    frpc_stats st;
    CHECK(frpc_get_stats(agent, &st) == 0, "frpc_get_stats");
    return st;
}

/* A put of len bytes from l's off to the same off of desc's slice. */
static frpc_xfer put_op(frpc_mem *l, const uint8_t *desc, size_t off,
                        size_t len)
{
    return (frpc_xfer){.op = FRPC_XFER_PUT, .local = l, .local_off = off,
                       .desc = desc, .desc_len = FRPC_MEM_DESC_SIZE,
                       .remote_off = off, .len = len};
}

/* The batch ops[0..n) with the notification note, async: the code
 * frpc_transfer_async returned (its *out then NULL), else its future's. */
static int async_outcome(const frpc_xfer *ops, size_t n, const char *note)
{
    frpc_future *f = (frpc_future *)1;
    int rc = frpc_transfer_async(ops, n, note, strlen(note), TIMEOUT_MS, &f);
    if (rc) {
        CHECK(f == NULL, "*out NULL on an error");
        return rc;
    }
    rc = frpc_future_wait(f, TIMEOUT_MS);
    frpc_future_free(f);
    return rc;
}

/* This rank's counters, read before rank 0 began (pair_mode). */
static frpc_stats before;

typedef void (*sender_fn)(frpc_mem *l, uint8_t *lbuf, const uint8_t *desc);

/* A mode of rank 0 sending to rank 1: start(len) on 2 ranks, setup (if
 * not NULL) on each, counters read, a barrier; then rank 0 runs sender
 * with a local region of len bytes and rank 1's descriptor, rank 1 runs
 * owner; finish(). */
static int pair_mode(const char *name, size_t len, void (*setup)(void),
                     sender_fn sender, void (*owner)(void))
{
    start(len);
    me = frpc_rank(agent);
    CHECK(world == 2, "%s needs 2 ranks", name);
    if (setup)
        setup();
    before = stats_now();
    barrier("counters read");
    if (me == 0) {
        uint8_t desc[FRPC_MEM_DESC_SIZE], *lbuf;
        frpc_mem *l = local_region(len, &lbuf);
        desc_of(1, desc);
        sender(l, lbuf, desc);
        CHECK(frpc_mem_deregister(l, 10000) == 0, "deregister");
        free(lbuf);
    } else {
        owner();
    }
    finish();
    return 0;
}

/* ---- notezero ---------------------------------------------------------- */

#define ZERO_QUEUE 2 /* FABRPC_NOTIFY_QUEUE in the case */

static void zero_sender(frpc_mem *l, uint8_t *lbuf, const uint8_t *desc)
{
    (void)lbuf;
    frpc_xfer ops[2] = {put_op(l, desc, 0, 0), put_op(l, desc, 8, 0)};
    ops[1].op = FRPC_XFER_GET;
    expect(frpc_transfer(ops, 2, "zero sync", 9, TIMEOUT_MS), 0,
           "a batch of 0 bytes with a notification");
    expect(async_outcome(ops, 2, "zero async"), 0,
           "an async batch of 0 bytes with a notification");
    frpc_stats s1 = stats_now();
    CHECK(s1.notifications_sent - before.notifications_sent == 2, "batches "
          "of 0 bytes counted %llu notifications sent, want 2",
          (unsigned long long)(s1.notifications_sent -
                               before.notifications_sent));
    barrier("sent");
    barrier("taken");
    for (int i = 0; i < ZERO_QUEUE; i++) {
        char note[8];
        snprintf(note, sizeof(note), "fill%d", i);
        expect(frpc_notify(agent, 1, note, strlen(note), TIMEOUT_MS), 0,
               "a notification filling rank 1's queue");
    }
    expect(frpc_transfer(ops, 2, "refused", 7, TIMEOUT_MS), FRPC_EAGAIN,
           "a batch of 0 bytes with a notification to a full queue");
    expect(async_outcome(ops, 2, "refused async"), FRPC_EAGAIN,
           "an async batch of 0 bytes with a notification to a full queue");
    expect(frpc_transfer(ops, 2, NULL, 0, TIMEOUT_MS), 0,
           "a batch of 0 bytes without a notification, the queue full");
    printf("ok: batches of 0 bytes with a notification: 0 sync and async; "
           "to a full queue FRPC_EAGAIN, sync and async\n");
    barrier("refused");
}

static void zero_owner(void)
{
    barrier("sent");
    take_one("zero sync");
    take_one("zero async");
    printf("ok: rank 1 took the notifications of batches of 0 bytes, sync "
           "then async\n");
    barrier("taken");
    barrier("refused");
    for (int i = 0; i < ZERO_QUEUE; i++) {
        char note[8];
        snprintf(note, sizeof(note), "fill%d", i);
        take_one(note);
    }
    size_t len;
    expect(frpc_notify_wait(agent, NULL, NULL, 0, &len, 200), FRPC_ETIMEDOUT,
           "nothing of the refused batches queued");
    frpc_stats s1 = stats_now();
    CHECK(s1.notifications_received - before.notifications_received ==
              2 + ZERO_QUEUE &&
              s1.notifications_refused - before.notifications_refused == 2,
          "rank 1 counted %llu received (want %d), %llu refused (want 2)",
          (unsigned long long)(s1.notifications_received -
                               before.notifications_received),
          2 + ZERO_QUEUE,
          (unsigned long long)(s1.notifications_refused -
                               before.notifications_refused));
    printf("ok: rank 1 refused both batches' notifications, its queue of "
           "%d full\n", ZERO_QUEUE);
}

int mode_notezero(void)
{
    return pair_mode("notezero", 4096, NULL, zero_sender, zero_owner);
}

/* ---- notefail ---------------------------------------------------------- */

#define FAIL_LEN 64
#define FAIL_SEED 43u

static uint8_t stale_buf[4096];

/* Answers a descriptor of stale_buf, deregistered before the answer. */
static void h_stale_desc(frpc_request *req, void *user)
{
    (void)user;
    uint8_t d[FRPC_MEM_DESC_SIZE];
    frpc_mem *m;
    int rc = frpc_mem_register(agent, stale_buf, sizeof(stale_buf),
                               FRPC_MEM_REMOTE_READ | FRPC_MEM_REMOTE_WRITE,
                               &m);
    if (rc == 0) {
        rc = frpc_mem_describe(m, 0, sizeof(stale_buf), d);
        int drc = frpc_mem_deregister(m, 10000);
        rc = rc ? rc : drc;
    }
    if (rc)
        frpc_respond_error(req, rc, frpc_strerror(rc));
    else
        frpc_respond(req, d, sizeof(d));
}

/* The header (frpc_get): a deregistered region's descriptor is refused
 * FRPC_EACCES natively on shm and emulated; natively elsewhere by the
 * owner's provider, FRPC_EACCES or FRPC_ETRANSPORT. */
static void failed_as_stale(int rc, const char *what)
{
    if (rma_shm_native() || rma_emulated())
        expect(rc, FRPC_EACCES, what);
    else
        CHECK(rc == FRPC_EACCES || rc == FRPC_ETRANSPORT, "%s: %s, want "
              "FRPC_EACCES or FRPC_ETRANSPORT", what, frpc_err_name(rc));
}

static void fail_sender(frpc_mem *l, uint8_t *lbuf, const uint8_t *good)
{
    uint8_t stale[FRPC_MEM_DESC_SIZE];
    desc_by(1, "stale_desc", NULL, 0, stale);
    fill(lbuf, FAIL_LEN, FAIL_SEED, 0);
    frpc_xfer ops[2] = {put_op(l, good, 0, FAIL_LEN),
                        put_op(l, stale, 0, FAIL_LEN)};
    int rc = frpc_transfer(ops, 2, "failed", 6, TIMEOUT_MS);
    failed_as_stale(rc, "a good put and a put to a deregistered region, "
                    "with a notification");
    int arc = async_outcome(ops, 2, "failed async");
    failed_as_stale(arc, "the same, async");
    frpc_stats s1 = stats_now();
    CHECK(s1.notifications_sent == before.notifications_sent, "failed batches "
          "counted %llu notifications sent",
          (unsigned long long)(s1.notifications_sent -
                               before.notifications_sent));
    printf("ok: a batch with a put to a deregistered region failed, %s "
           "sync, %s async, no notification sent\n", frpc_err_name(rc),
           frpc_err_name(arc));
    barrier("failed");
}

static void fail_owner(void)
{
    barrier("failed");
    char got[FRPC_NOTIFY_MAX];
    size_t len;
    expect(frpc_notify_wait(agent, NULL, got, sizeof(got), &len, 500),
           FRPC_ETIMEDOUT, "a notification of a failed batch");
    frpc_stats s1 = stats_now();
    CHECK(s1.notifications_received == before.notifications_received,
          "rank 1 counted %llu notifications received of failed batches",
          (unsigned long long)(s1.notifications_received -
                               before.notifications_received));
    /* "if one is bad, nothing is posted": natively on shm the listing
     * refuses the stale one before the good put is posted. */
    if (rma_shm_native())
        CHECK(verify(region_buf, FAIL_LEN, 1u, 0) == FAIL_LEN,
              "natively on shm the good put of a refused batch landed");
    printf("ok: rank 1 got no notification of the failed batches%s\n",
           rma_shm_native() ? ", nor the good put" : "");
}

static void serve_stale_desc(void)
{
    CHECK(frpc_register(agent, "stale_desc", h_stale_desc, NULL, 0) == 0,
          "register");
}

int mode_notefail(void)
{
    return pair_mode("notefail", 4096, serve_stale_desc, fail_sender,
                     fail_owner);
}

/* ---- notewait ---------------------------------------------------------- */

#define DEFAULT_MS 1500 /* FABRPC_TIMEOUT_MS in the case */
#define SHUTDOWN_MS 20000

/* frpc_notify_wait with timeout, nothing coming: FRPC_ETIMEDOUT; its
 * time in ms. */
static double timed_wait(int timeout)
{
    char got[FRPC_NOTIFY_MAX];
    size_t len;
    double t0 = now_ms();
    int rc = frpc_notify_wait(agent, NULL, got, sizeof(got), &len, timeout);
    double ms = now_ms() - t0;
    CHECK(rc == FRPC_ETIMEDOUT, "frpc_notify_wait(timeout %d), nothing "
          "coming: %s after %.0f ms", timeout, frpc_err_name(rc), ms);
    return ms;
}

static void default_timeout(void)
{
    double dflt = timed_wait(0);
    CHECK(dflt >= DEFAULT_MS - 100 && dflt < 10 * DEFAULT_MS,
          "frpc_notify_wait(timeout 0) ended after %.0f ms; the agent's "
          "default is %d", dflt, DEFAULT_MS);
    double one = timed_wait(1);
    CHECK(one < 1000, "frpc_notify_wait(timeout 1) took %.0f ms", one);
    printf("ok: rank %d: frpc_notify_wait(0) waited the default, %.0f ms "
           "(FABRPC_TIMEOUT_MS=%d); (1) %.1f ms\n", me, dflt, DEFAULT_MS,
           one);
}

typedef struct {
    atomic_int in;
    int rc;
    double end_ms;
} waiter;

static void *wait_forever(void *arg)
{
    waiter *w = arg;
    char got[FRPC_NOTIFY_MAX];
    size_t len;
    atomic_store(&w->in, 1);
    w->rc = frpc_notify_wait(agent, NULL, got, sizeof(got), &len,
                             FRPC_TIMEOUT_NONE);
    w->end_ms = now_ms();
    return NULL;
}

static void shutdown_ends_wait(void)
{
    waiter w = {.rc = 1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_forever, &w) == 0, "thread");
    while (!atomic_load(&w.in))
        nap_ms(1);
    barrier("waiting");
    nap_ms(200); /* into its wait */
    CHECK(frpc_mem_deregister(region, 10000) == 0, "deregister");
    double t0 = now_ms();
    int rc = frpc_shutdown(agent, FRPC_SHUTDOWN_GRACEFUL, SHUTDOWN_MS);
    double ms = now_ms() - t0;
    agent = NULL; /* freed: no counters to dump on a failure */
    CHECK(rc == 0, "frpc_shutdown with a thread in frpc_notify_wait("
          "FRPC_TIMEOUT_NONE): %s after %.0f ms", frpc_err_name(rc), ms);
    CHECK(pthread_join(t, NULL) == 0, "join");
    CHECK(w.rc == FRPC_ESHUTDOWN && w.end_ms >= t0, "frpc_notify_wait("
          "FRPC_TIMEOUT_NONE) while its rank shut down: %s, %.0f ms after "
          "the shutdown began", frpc_err_name(w.rc), w.end_ms - t0);
    printf("ok: rank %d: a wait with no limit ended FRPC_ESHUTDOWN %.0f ms "
           "after the shutdown began, which returned in %.0f ms\n", me,
           w.end_ms - t0, ms);
    free(region_buf);
}

int mode_notewait(void)
{
    start(4096);
    me = frpc_rank(agent);
    CHECK(world == 2, "notewait needs 2 ranks");
    default_timeout();
    shutdown_ends_wait();
    return 0;
}

/* ---- noteorder --------------------------------------------------------- */

#define ORDER_ROUNDS 20 /* to the queue */
#define ORDER_KNOWN 10  /* to fn: rounds where one future completed first */
#define ORDER_ROUNDS_MAX 100
#define ORDER_FN_MS 100 /* fn's nap for each batch's notification */
#define ORDER_OPS 64    /* the big batch's puts, of ORDER_OP_LEN */
#define ORDER_OP_LEN 65536
#define ORDER_SMALL_AT ((size_t)ORDER_OPS * ORDER_OP_LEN)
#define ORDER_LEN (ORDER_SMALL_AT + 64)

enum { BIG, SMALL, TOLD, LAST };

typedef struct {
    uint32_t round;
    uint32_t which; /* BIG, SMALL: the batches'; TOLD, LAST: rank 0's */
    int32_t first;  /* TOLD: the batch whose future completed first, or -1
                       if both had when frpc_wait_any returned */
} order_note;

/* Starts the round's two batches, big first; the one that completed first
 * (or -1). */
static int order_round(frpc_mem *l, const uint8_t *desc, uint32_t round)
{
    static frpc_xfer big[ORDER_OPS];
    for (size_t i = 0; i < ORDER_OPS; i++)
        big[i] = put_op(l, desc, i * ORDER_OP_LEN, ORDER_OP_LEN);
    frpc_xfer small = put_op(l, desc, ORDER_SMALL_AT, 64);
    order_note n0 = {round, BIG, 0}, n1 = {round, SMALL, 0};
    frpc_future *f[2];
    CHECK(frpc_transfer_async(big, ORDER_OPS, &n0, sizeof(n0), TIMEOUT_MS,
                              &f[BIG]) == 0 &&
              frpc_transfer_async(&small, 1, &n1, sizeof(n1), TIMEOUT_MS,
                                  &f[SMALL]) == 0,
          "round %u: start the batches", round);
    size_t i;
    CHECK(frpc_wait_any(f, 2, TIMEOUT_MS, &i) == 0, "frpc_wait_any");
    /* The lowest completed: SMALL means BIG had not. */
    int first = i == SMALL ? SMALL : frpc_future_test(f[SMALL]) ? -1 : BIG;
    for (int k = 0; k < 2; k++) {
        int rc = frpc_future_wait(f[k], TIMEOUT_MS);
        CHECK(rc == 0, "round %u, batch %d: %s", round, k, frpc_err_name(rc));
        frpc_future_free(f[k]);
    }
    return first;
}

static void tell_owner(order_note n)
{
    expect(frpc_notify(agent, 1, &n, sizeof(n), TIMEOUT_MS), 0,
           "telling rank 1");
}

/* Rounds, each told to rank 1, then LAST: ORDER_ROUNDS, or with known set
 * until that many told which future completed first. */
static void order_rounds(frpc_mem *l, const uint8_t *desc, int known)
{
    uint32_t r;
    int told = 0;
    for (r = 0; known ? told < known && r < ORDER_ROUNDS_MAX
                      : r < ORDER_ROUNDS;
         r++) {
        int first = order_round(l, desc, r);
        told += first >= 0;
        tell_owner((order_note){r, TOLD, first});
    }
    tell_owner((order_note){r, LAST, 0});
}

/* What rank 1 got, in order, up to LAST. */
static order_note order_log[3 * ORDER_ROUNDS_MAX + 1];
static atomic_int order_logged;

static void log_order_note(int src, const void *msg, size_t len)
{
    int n = atomic_load(&order_logged);
    CHECK(src == 0 && len == sizeof(order_note) && n < 3 * ORDER_ROUNDS_MAX
          + 1, "notification %d: %zu B from %d", n, len, src);
    memcpy(&order_log[n], msg, len);
    atomic_store(&order_logged, n + 1);
}

/* Rank 1's fn: slow for the batches', so their futures complete
 * ORDER_FN_MS apart at least. */
static void slow_order_note(frpc_agent *a, int src, const void *msg,
                            size_t len, void *user)
{
    (void)a;
    (void)user;
    log_order_note(src, msg, len);
    if (order_log[atomic_load(&order_logged) - 1].which < TOLD)
        nap_ms(ORDER_FN_MS);
}

/* Checks the log's rounds: the batch told first came first. Returns the
 * rounds where one was told first; *overtaken, those where SMALL was. */
static int check_order_log(const char *how, int *overtaken)
{
    int n = atomic_load(&order_logged), known = 0;
    *overtaken = 0;
    CHECK(n % 3 == 1 && order_log[n - 1].which == LAST, "%s: %d "
          "notifications, the last of %u", how, n, order_log[n - 1].which);
    for (int i = 0; i + 1 < n; i += 3) {
        order_note *a = &order_log[i], *b = a + 1, *told = a + 2;
        uint32_t r = (uint32_t)i / 3;
        CHECK(a->round == r && b->round == r && told->round == r &&
                  a->which + b->which == BIG + SMALL && told->which == TOLD,
              "%s: round %u: notifications %u/%u, %u/%u, %u/%u", how, r,
              a->round, a->which, b->round, b->which, told->round,
              told->which);
        if (told->first < 0)
            continue;
        CHECK(a->which == (uint32_t)told->first, "%s: round %u: batch %d's "
              "future completed first, batch %u's notification came first",
              how, r, told->first, a->which);
        known++;
        *overtaken += told->first == SMALL;
    }
    printf("ok: %s: %d rounds of two async batches: in the %d where one "
           "future completed first, its notification came first (the one "
           "started second finished first %d times)\n", how, (n - 1) / 3,
           known, *overtaken);
    return known;
}

static void order_owner(void)
{
    int overtaken;
    order_note n;
    size_t len;
    int src;
    do {
        int rc = frpc_notify_wait(agent, &src, &n, sizeof(n), &len,
                                  TIMEOUT_MS);
        CHECK(rc == 0, "notification %d: %s", atomic_load(&order_logged),
              frpc_err_name(rc));
        log_order_note(src, &n, len);
    } while (n.which != LAST);
    check_order_log("taken from the queue", &overtaken);
    atomic_store(&order_logged, 0);
    CHECK(frpc_on_notify(agent, slow_order_note, NULL) == 0, "on_notify");
    barrier("fn set");
    double until = now_ms() + TIMEOUT_MS;
    int got;
    while ((got = atomic_load(&order_logged)) == 0 ||
           order_log[got - 1].which != LAST) {
        CHECK(now_ms() < until, "fn got %d notifications in %d s", got,
              TIMEOUT_MS / 1000);
        nap_ms(10);
    }
    CHECK(frpc_on_notify(agent, NULL, NULL) == 0, "on_notify NULL");
    int known = check_order_log("to a slow fn", &overtaken);
    CHECK(known == ORDER_KNOWN, "frpc_wait_any told which future completed "
          "first in %d rounds, want %d", known, ORDER_KNOWN);
}

static void order_sender(frpc_mem *l, uint8_t *lbuf, const uint8_t *desc)
{
    (void)lbuf;
    order_rounds(l, desc, 0);
    barrier("fn set");
    order_rounds(l, desc, ORDER_KNOWN);
}

int mode_noteorder(void)
{
    return pair_mode("noteorder", ORDER_LEN, NULL, order_sender,
                     order_owner);
}

/* ---- notemulti --------------------------------------------------------- */

#define MULTI_WAITERS 3
#define MULTI_N 600

static atomic_int multi_seen[MULTI_N];

typedef struct {
    pthread_t t;
    int took;
    int rc;         /* the first error, or 0 */
    char bad[160];  /* what broke the oldest-first order, if anything */
} multi_waiter;

/* Takes notifications until an end mark (UINT32_MAX): each sequence
 * number counted once in multi_seen, and increasing (each take is the
 * rank's oldest, and rank 0 sent them in order). */
static void *multi_wait(void *arg)
{
    multi_waiter *w = arg;
    int64_t last = -1;
    for (;;) {
        uint32_t seq;
        size_t len;
        int src;
        int rc = frpc_notify_wait(agent, &src, &seq, sizeof(seq), &len,
                                  TIMEOUT_MS);
        if (rc || len != sizeof(seq) || src != 0) {
            w->rc = rc ? rc : FRPC_EPROTO;
            return NULL;
        }
        if (seq == UINT32_MAX)
            return NULL;
        if (seq >= MULTI_N) {
            w->rc = FRPC_EPROTO;
            return NULL;
        }
        if ((int64_t)seq <= last && !w->bad[0])
            snprintf(w->bad, sizeof(w->bad), "took %u after %lld", seq,
                     (long long)last);
        last = seq;
        atomic_fetch_add(&multi_seen[seq], 1);
        w->took++;
    }
}

static void multi_sender(frpc_mem *l, uint8_t *lbuf, const uint8_t *desc)
{
    (void)l;
    (void)lbuf;
    (void)desc;
    int full = 0;
    for (uint32_t seq = 0; seq < MULTI_N + MULTI_WAITERS;) {
        uint32_t v = seq < MULTI_N ? seq : UINT32_MAX;
        int rc = frpc_notify(agent, 1, &v, sizeof(v), TIMEOUT_MS);
        if (rc == FRPC_EAGAIN) { /* the queue is full: nothing lost */
            full++;
            nap_ms(1);
            continue;
        }
        CHECK(rc == 0, "notification %u: %s", seq, frpc_err_name(rc));
        seq++;
    }
    printf("ok: rank 0 sent %d notifications and %d end marks (%d times "
           "the queue was full)\n", MULTI_N, MULTI_WAITERS, full);
}

static void multi_owner(void)
{
    multi_waiter w[MULTI_WAITERS] = {0};
    for (int i = 0; i < MULTI_WAITERS; i++)
        CHECK(pthread_create(&w[i].t, NULL, multi_wait, &w[i]) == 0,
              "thread");
    int took = 0;
    for (int i = 0; i < MULTI_WAITERS; i++) {
        pthread_join(w[i].t, NULL);
        CHECK(w[i].rc == 0, "waiter %d: %s", i, frpc_err_name(w[i].rc));
        CHECK(!w[i].bad[0], "waiter %d did not take the oldest: %s", i,
              w[i].bad);
        took += w[i].took;
    }
    for (int s = 0; s < MULTI_N; s++)
        CHECK(atomic_load(&multi_seen[s]) == 1, "notification %d taken %d "
              "times", s, atomic_load(&multi_seen[s]));
    printf("ok: %d waiters took %d notifications, each once, each "
           "waiter's in the order sent (%d / %d / %d)\n", MULTI_WAITERS,
           took, w[0].took, w[1].took, w[2].took);
}

int mode_notemulti(void)
{
    return pair_mode("notemulti", 4096, NULL, multi_sender, multi_owner);
}

/* ---- notestats --------------------------------------------------------- */

#define STATS_MS 3000

static atomic_int stats_stop;

static void drop_note(frpc_agent *a, int src, const void *msg, size_t len,
                      void *user)
{
    (void)a;
    (void)src;
    (void)msg;
    (void)len;
    (void)user;
}

/* Async batches of one put, each with a notification, to the peer: each
 * renews its entry's id when its data has landed (pending.c). */
static void *stats_batches(void *arg)
{
    (void)arg;
    uint8_t desc[FRPC_MEM_DESC_SIZE], *lbuf;
    frpc_mem *l = local_region(4096, &lbuf);
    desc_of(1 - me, desc);
    frpc_xfer op = put_op(l, desc, 0, 64);
    while (!atomic_load(&stats_stop)) {
        frpc_future *f;
        CHECK(frpc_transfer_async(&op, 1, "n", 1, TIMEOUT_MS, &f) == 0,
              "a batch");
        CHECK(frpc_future_wait(f, TIMEOUT_MS) == 0, "the batch's end");
        frpc_future_free(f);
    }
    CHECK(frpc_mem_deregister(l, 10000) == 0, "deregister");
    free(lbuf);
    return NULL;
}

static void *stats_calls(void *arg)
{
    (void)arg;
    while (!atomic_load(&stats_stop))
        CHECK(frpc_call(agent, 1 - me, "desc", NULL, 0, TIMEOUT_MS, NULL) ==
                  0,
              "a call");
    return NULL;
}

/* The header: "Counters since frpc_init": none of them goes down while
 * calls, transfers and notifications run on other threads (fields read
 * one by one may disagree with each other, never with their past). */
int mode_notestats(void)
{
    start(4096);
    me = frpc_rank(agent);
    CHECK(world == 2, "notestats needs 2 ranks");
    CHECK(frpc_on_notify(agent, drop_note, NULL) == 0, "on_notify");
    barrier("fn set");
    pthread_t tb, tc;
    CHECK(pthread_create(&tb, NULL, stats_batches, NULL) == 0 &&
              pthread_create(&tc, NULL, stats_calls, NULL) == 0,
          "threads");
    frpc_stats p = stats_now(), q;
    long reads = 0;
    double until = now_ms() + STATS_MS;
    while (now_ms() < until) {
        q = stats_now();
        reads++;
#define MONOTONIC(f)                                                          \
    CHECK(q.f >= p.f, "read %ld: " #f " went down: %llu -> %llu", reads,      \
          (unsigned long long)p.f, (unsigned long long)q.f)
        MONOTONIC(calls_started);
        MONOTONIC(calls_ok);
        MONOTONIC(calls_failed);
        MONOTONIC(requests_received);
        MONOTONIC(requests_answered);
        MONOTONIC(messages_sent);
        MONOTONIC(bytes_sent);
        MONOTONIC(bytes_received);
        MONOTONIC(transfers_put);
        MONOTONIC(transfer_bytes);
        MONOTONIC(transfer_batches);
        MONOTONIC(notifications_sent);
        MONOTONIC(notifications_received);
#undef MONOTONIC
        p = q;
        if (reads % 64 == 0)
            sched_yield(); /* the other threads need the cores too */
    }
    atomic_store(&stats_stop, 1);
    pthread_join(tb, NULL);
    pthread_join(tc, NULL);
    printf("ok: rank %d: %ld reads of frpc_get_stats while calls and "
           "notifying batches ran: no counter went down (%llu calls "
           "started)\n", me, reads, (unsigned long long)p.calls_started);
    barrier("threads done");
    CHECK(frpc_on_notify(agent, NULL, NULL) == 0, "on_notify NULL");
    finish();
    return 0;
}
