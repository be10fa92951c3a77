/*
 * Unit tests of the shm doorbell (comm/doorbell.c): a sleeper wakes when
 * rung, does not sleep when its re-check finds work, and a bell left
 * unrung only costs the timeout; a loan's slot is seen by a peer until
 * closed; a region's listing is held by peers' transfers and a sealed
 * one refuses new holds. Threads of one process stand in for
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

/* Two ranks' bells, b connected to a (the owner). */
static void two_bells(fr_doorbell **a, fr_doorbell **b)
{
    const char *tok = test_base();
    ck_assert_int_eq(fr_doorbell_open(tok, 0, 2, a, NULL, 0), 0);
    ck_assert_int_eq(fr_doorbell_open(tok, 1, 2, b, NULL, 0), 0);
    ck_assert_int_eq(fr_doorbell_connect(*b, 0), 0);
    ck_assert_int_eq(fr_doorbell_connect(*b, 1), 0);
    /* Mapped: the names can go now, so that a failed check (its process
     * ends without closing them) leaves nothing in /dev/shm. */
    fr_doorbell_unlink(*a);
    fr_doorbell_unlink(*b);
}

/* A loan's slot: the peer sees its tag until the lender closes it; every
 * slot can be held at once, and the one past them is refused. */
START_TEST(loan_slots_open_close_and_run_out)
{
    fr_doorbell *a, *b;
    two_bells(&a, &b);
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

/* A hold is taken only on a slot listing the region's tag; the owner
 * sees it until it is given back; a sealed slot refuses holds, and
 * unsealed takes them again; a closed slot refuses them. */
START_TEST(region_holds_seal_and_close)
{
    fr_doorbell *a, *b;
    two_bells(&a, &b);
    ck_assert_int_eq(fr_doorbell_region_open(a, 0), -1);
    ck_assert_int_eq(fr_doorbell_region_open(a, UINT64_MAX), -1);
    ck_assert_int_eq(fr_doorbell_region_open(NULL, 5), -1);
    int s = fr_doorbell_region_open(a, 0xabc);
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(fr_doorbell_region_hold(b, 0, s, 0xabd),
                     FR_REGION_GONE);
    ck_assert_int_eq(fr_doorbell_region_hold(b, 0, -1, 0xabc),
                     FR_REGION_GONE);
    ck_assert_int_eq(fr_doorbell_region_hold(b, 0, FR_DOORBELL_REGIONS,
                                             0xabc), FR_REGION_GONE);
    ck_assert_int_eq(fr_doorbell_region_hold(b, 5, s, 0xabc),
                     FR_REGION_UNCHECKED);
    ck_assert_uint_eq(fr_doorbell_region_held_by(a, 1, s), 0);
    int h1 = fr_doorbell_region_hold(b, 0, s, 0xabc);
    int h2 = fr_doorbell_region_hold(b, 0, s, 0xabc);
    ck_assert_int_ge(h1, 0);
    ck_assert_int_eq(h2, h1); /* one entry counts both */
    ck_assert_uint_eq(fr_doorbell_region_held_by(a, 1, s), 2);
    ck_assert_uint_eq(fr_doorbell_region_held_by(a, 0, s), 0);
    fr_doorbell_region_seal(a, s);
    ck_assert_int_eq(fr_doorbell_region_hold(b, 0, s, 0xabc),
                     FR_REGION_GONE);
    ck_assert_uint_eq(fr_doorbell_region_held_by(a, 1, s), 2);
    fr_doorbell_region_release(b, 0, h1);
    fr_doorbell_region_release(b, 0, h2);
    ck_assert_uint_eq(fr_doorbell_region_held_by(a, 1, s), 0);
    fr_doorbell_region_unseal(a, s, 0xabc);
    int h3 = fr_doorbell_region_hold(b, 0, s, 0xabc);
    ck_assert_int_ge(h3, 0);
    fr_doorbell_region_release(b, 0, h3);
    fr_doorbell_region_close(a, s);
    ck_assert_int_eq(fr_doorbell_region_hold(b, 0, s, 0xabc),
                     FR_REGION_GONE);
    ck_assert_uint_eq(fr_doorbell_region_held_by(a, 1, s), 0);
    s = fr_doorbell_region_open(a, 0xdef);
    ck_assert_int_ge(s, 0);
    /* A rank's own regions: its row in its own bell. */
    int h4 = fr_doorbell_region_hold(a, 0, s, 0xdef);
    ck_assert_int_ge(h4, 0);
    ck_assert_uint_eq(fr_doorbell_region_held_by(a, 0, s), 1);
    fr_doorbell_region_release(a, 0, h4);
    ck_assert_uint_eq(fr_doorbell_region_held_by(a, 0, s), 0);
    fr_doorbell_close(b);
    fr_doorbell_close(a);
}
END_TEST

/* More slots held at once than a row has entries: the rest go to the
 * catch-all, which every slot's wait counts; all given back, nothing is
 * held. Every slot can be listed, and the one past them is refused. */
START_TEST(region_holds_past_the_row_use_the_catch_all)
{
    fr_doorbell *a, *b;
    two_bells(&a, &b);
    enum { N = 40 };
    int slot[N], hold[N];
    for (int i = 0; i < N; i++) {
        slot[i] = fr_doorbell_region_open(a, 100 + (uint64_t)i);
        ck_assert_int_ge(slot[i], 0);
        hold[i] = fr_doorbell_region_hold(b, 0, slot[i], 100 + (uint64_t)i);
        ck_assert_int_ge(hold[i], 0);
    }
    int unrelated = fr_doorbell_region_open(a, 7);
    ck_assert_int_ge(unrelated, 0);
    /* The catch-all holds every slot, the unrelated one too. */
    ck_assert_uint_ge(fr_doorbell_region_held_by(a, 1, unrelated), 1);
    for (int i = 0; i < N; i++)
        ck_assert_uint_ge(fr_doorbell_region_held_by(a, 1, slot[i]), 1);
    for (int i = 0; i < N; i++)
        fr_doorbell_region_release(b, 0, hold[i]);
    for (int i = 0; i < N; i++)
        ck_assert_uint_eq(fr_doorbell_region_held_by(a, 1, slot[i]), 0);
    ck_assert_uint_eq(fr_doorbell_region_held_by(a, 1, unrelated), 0);
    for (int i = N + 1; i < FR_DOORBELL_REGIONS; i++)
        ck_assert_int_ge(fr_doorbell_region_open(a, 1000 + (uint64_t)i), 0);
    ck_assert_int_eq(fr_doorbell_region_open(a, 99999), -1);
    fr_doorbell_close(b);
    fr_doorbell_close(a);
}
END_TEST

/* Threads of a peer taking and giving holds on a few slots at once,
 * while the owner seals one: once sealed and seen unheld, no thread's
 * hold on it succeeds any more; all given back, every count is 0. */
typedef struct holder {
    fr_doorbell *b;
    int slot[3];
    uint64_t tag[3];
    atomic_int *stop;
    atomic_int *after_seal; /* holds that succeeded on slot 0 after */
    atomic_int *sealed_unheld;
} holder;

static void *hold_loop(void *arg)
{
    holder *h = arg;
    unsigned k = 0;
    while (!atomic_load(h->stop)) {
        int i = (int)(k++ % 3);
        int seen_unheld = atomic_load(h->sealed_unheld);
        int x = fr_doorbell_region_hold(h->b, 0, h->slot[i], h->tag[i]);
        if (x >= 0) {
            if (i == 0 && seen_unheld)
                atomic_fetch_add(h->after_seal, 1);
            fr_doorbell_region_release(h->b, 0, x);
        }
    }
    return NULL;
}

START_TEST(region_holds_from_threads_and_a_seal)
{
    fr_doorbell *a, *b;
    two_bells(&a, &b);
    atomic_int stop = 0, after = 0, unheld = 0;
    holder h = {.b = b, .stop = &stop, .after_seal = &after,
                .sealed_unheld = &unheld};
    for (int i = 0; i < 3; i++) {
        h.tag[i] = 0x1000 + (uint64_t)i;
        h.slot[i] = fr_doorbell_region_open(a, h.tag[i]);
        ck_assert_int_ge(h.slot[i], 0);
    }
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, hold_loop, &h), 0);
    usleep(50000);
    fr_doorbell_region_seal(a, h.slot[0]);
    while (fr_doorbell_region_held_by(a, 1, h.slot[0]))
        ;
    atomic_store(&unheld, 1);
    usleep(50000);
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(atomic_load(&after), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(fr_doorbell_region_held_by(a, 1, h.slot[i]), 0);
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
        {"region holds, seal and close", region_holds_seal_and_close},
        {"region holds past the row use the catch-all",
         region_holds_past_the_row_use_the_catch_all},
        {"region holds from threads and a seal",
         region_holds_from_threads_and_a_seal},
    };
    return fr_run_tests("doorbell", tests, sizeof(tests) / sizeof(tests[0]),
                        60);
}
