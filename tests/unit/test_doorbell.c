/*
 * Unit tests of the shm doorbell (comm/doorbell.c): a sleeper wakes when
 * rung, does not sleep when its re-check finds work, and a bell left
 * unrung only costs the timeout; a loan's slot is seen by a peer until
 * closed. Threads of one process stand in for
 * ranks: the bell is shared memory either way.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "comm/doorbell.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *test_base(void)
{
    static char b[64];
    snprintf(b, sizeof(b), "fabrpc_test_%llx",
             (unsigned long long)(((uint64_t)getpid() << 20) ^
                                  (uint64_t)(now_s() * 1e6)));
    return b;
}

static atomic_int work;
static int recheck_work(void *arg) { return atomic_load(&work); }

typedef struct ringer {
    fr_doorbell *bell;
    uint32_t peer;
} ringer;

static void *ring_later(void *arg)
{
    ringer *r = arg;
    usleep(200000);
    fr_doorbell_ring(r->bell, r->peer);
    return NULL;
}

START_TEST(a_ring_wakes_the_sleeper)
{
    fr_doorbell *a, *b;
    const char *tok = test_base();
    ck_assert_int_eq(fr_doorbell_open(tok, 0, 2, &a, NULL, 0), 0);
    ck_assert_int_eq(fr_doorbell_open(tok, 1, 2, &b, NULL, 0), 0);
    ck_assert_int_eq(fr_doorbell_connect(b, 0), 0);
    atomic_store(&work, 0);
    ringer r = {.bell = b, .peer = 0};
    pthread_t t;
    pthread_create(&t, NULL, ring_later, &r);
    double t0 = now_s();
    fr_doorbell_sleep(a, 30000000, recheck_work, NULL); /* 30 s */
    double slept = now_s() - t0;
    pthread_join(t, NULL);
    ck_assert_msg(slept < 20.0, "slept %.2f s: the ring did not wake it",
                  slept);
    fr_doorbell_close(b);
    fr_doorbell_close(a);
}
END_TEST

/* Seconds one sleep on a fresh bell took, with the re-check finding work
 * or not. */
static double sleep_once(int has_work, unsigned timeout_us)
{
    fr_doorbell *a;
    ck_assert_int_eq(fr_doorbell_open(test_base(), 0, 1, &a, NULL, 0), 0);
    atomic_store(&work, has_work);
    double t0 = now_s();
    fr_doorbell_sleep(a, timeout_us, recheck_work, NULL);
    double slept = now_s() - t0;
    fr_doorbell_close(a);
    return slept;
}

START_TEST(work_found_on_recheck_means_no_sleep)
{
    double slept = sleep_once(1, 30000000); /* 30 s */
    ck_assert_msg(slept < 20.0, "slept %.2f s although work was found",
                  slept);
}
END_TEST

START_TEST(an_unrung_bell_sleeps_for_the_timeout)
{
    double slept = sleep_once(0, 100000); /* 100 ms */
    ck_assert_msg(slept >= 0.09, "woke after %.3f s, before the timeout",
                  slept);
}
END_TEST

START_TEST(connect_needs_the_peer_and_unlink_keeps_mappings)
{
    fr_doorbell *a, *b;
    const char *tok = test_base();
    ck_assert_int_eq(fr_doorbell_open(tok, 0, 2, &a, NULL, 0), 0);
    ck_assert_int_eq(fr_doorbell_connect(a, 1), FRPC_ETRANSPORT);
    ck_assert_int_eq(fr_doorbell_connect(a, 2), FRPC_EINVAL);
    ck_assert_int_eq(fr_doorbell_open(tok, 1, 2, &b, NULL, 0), 0);
    ck_assert_int_eq(fr_doorbell_connect(a, 1), 0);
    fr_doorbell_unlink(b);
    /* the name is gone, a second bell of that name can be made... */
    fr_doorbell *c;
    ck_assert_int_eq(fr_doorbell_open(tok, 1, 2, &c, NULL, 0), 0);
    fr_doorbell_close(c);
    /* ...and ringing through the old mapping still works (no crash) */
    fr_doorbell_ring(a, 1);
    char err[128] = "";
    ck_assert_int_eq(fr_doorbell_open(tok, 0, 2, &c, err, sizeof(err)),
                     FRPC_ETRANSPORT); /* rank 0's name still exists */
    ck_assert_ptr_nonnull(strstr(err, "doorbell"));
    fr_doorbell_close(b);
    fr_doorbell_close(a);
}
END_TEST

/* A loan's slot: the peer sees its tag until the lender closes it; every
 * slot can be held at once, and the one past them is refused. */
START_TEST(loan_slots_open_close_and_run_out)
{
    fr_doorbell *a, *b;
    const char *tok = test_base();
    ck_assert_int_eq(fr_doorbell_open(tok, 0, 2, &a, NULL, 0), 0);
    ck_assert_int_eq(fr_doorbell_open(tok, 1, 2, &b, NULL, 0), 0);
    ck_assert_int_eq(fr_doorbell_connect(b, 0), 0);
    int s = fr_doorbell_loan_open(a, 0x500);
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(fr_doorbell_peer_loan_is(b, 0, s, 0x500), 1);
    ck_assert_int_eq(fr_doorbell_peer_loan_is(b, 0, s, 0x600), 0);
    ck_assert_int_eq(fr_doorbell_peer_loan_is(b, 1, s, 0x500), 0);
    ck_assert_int_eq(fr_doorbell_peer_loan_is(b, 0, -1, 0x500), 0);
    ck_assert_int_eq(fr_doorbell_peer_loan_is(b, 0, FR_DOORBELL_LOANS,
                                              0x500), 0);
    ck_assert_int_eq(fr_doorbell_loan_open(a, 0), -1);
    ck_assert_int_eq(fr_doorbell_loan_open(NULL, 1), -1);
    for (int i = 1; i < FR_DOORBELL_LOANS; i++)
        ck_assert_int_ge(fr_doorbell_loan_open(a, 0x500 + (uint64_t)i), 0);
    ck_assert_int_eq(fr_doorbell_loan_open(a, 0x9999), -1);
    fr_doorbell_loan_close(a, s);
    ck_assert_int_eq(fr_doorbell_peer_loan_is(b, 0, s, 0x500), 0);
    ck_assert_int_eq(fr_doorbell_loan_open(a, 0x700), s); /* reused */
    ck_assert_int_eq(fr_doorbell_peer_loan_is(b, 0, s, 0x700), 1);
    fr_doorbell_loan_close(a, -1); /* no-ops */
    fr_doorbell_loan_close(NULL, s);
    fr_doorbell_close(b);
    fr_doorbell_close(a);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"a ring wakes the sleeper", a_ring_wakes_the_sleeper},
        {"work found on recheck means no sleep",
         work_found_on_recheck_means_no_sleep},
        {"an unrung bell sleeps for the timeout",
         an_unrung_bell_sleeps_for_the_timeout},
        {"connect needs the peer and unlink keeps mappings",
         connect_needs_the_peer_and_unlink_keeps_mappings},
        {"loan slots open, close and run out",
         loan_slots_open_close_and_run_out},
    };
    return fr_run_tests("doorbell", tests, sizeof(tests) / sizeof(tests[0]),
                        60);
}
