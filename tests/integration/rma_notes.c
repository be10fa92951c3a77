/*
 * rma's noteshut mode (2 ranks): what the header says of notifications
 * around a slow callback, the per-function figures and a shutdown.
 *
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
 */
#include <pthread.h>
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
