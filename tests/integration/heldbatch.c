/*
 * heldbatch: frames held for coalescing toward a stopped rank must not
 * make anyone else's wait outlast its timeout. 3 ranks over shm.
 *
 * Rank 1 stops itself (SIGSTOP) until rank 0 says resume (a mark file in
 * HELDBATCH_DIR), 30 s at most. Rank 2 fills rank 1's receive queue
 * with calls (5000 B, 5 ms timeout) until one finds no room. Rank 0 then
 * holds frames to rank 1: while its progress thread is kept in an inline
 * handler until then (so no poll pass begins), inside frpc_batch_begin/_end, a call
 * with a 5 ms timeout finds no room (FRPC_ETIMEDOUT) and two calls with
 * HELD_MS (20 s) timeouts are held (they return at once). With rank 1
 * still stopped, rank 0's frpc_batch_end, a 1000 ms call to rank 2, a
 * 1000 ms notification to rank 2, a 1000 ms call to itself and a 1000 ms
 * frpc_future_wait on a call to rank 2 each end within 3 s (each waited
 * for room until the held calls' deadline, 20 s here: 60 s by default,
 * 5.7 s in a run where rank 1 resumed after 6 s). Then rank 1 resumes
 * and both held calls end 0. Each rank prints "ok: rank R" when every
 * check held; a failed check prints "FAIL rank R line L: ..." and exits 1.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fabrpc.h>

#include "check_fail.h"
#include "comm/clock.h"

#define HELD_MS 20000
#define VICTIM_MS 1000
#define VICTIM_BOUND_MS 3000

static long long now_ms(void)
{
    return (long long)(fr_now_ns() / 1000000);
}

static void msleep(int ms)
{
    usleep((useconds_t)ms * 1000);
}

#define FAIL(...) check_failed(__LINE__, __VA_ARGS__)

static void mark_path(const char *name, char *out, size_t len)
{
    const char *dir = getenv("HELDBATCH_DIR");
    snprintf(out, len, "%s/%s", dir ? dir : "/tmp", name);
}

static void mark(const char *name)
{
    char p[512];
    mark_path(name, p, sizeof p);
    FILE *f = fopen(p, "w");
    if (!f)
        FAIL("cannot write %s", p);
    fclose(f);
}

static int marked(const char *name)
{
    char p[512];
    mark_path(name, p, sizeof p);
    return access(p, F_OK) == 0;
}

/* Waits (bounded) for another rank's mark. */
static void wait_mark(const char *name, int bound_ms)
{
    long long t = now_ms();
    while (!marked(name)) {
        if (now_ms() - t > bound_ms)
            FAIL("no \"%s\" after %d ms", name, bound_ms);
        msleep(1);
    }
}

static void h_echo(frpc_request *req, void *u)
{
    (void)u;
    size_t n;
    const void *a = frpc_request_args(req, &n);
    frpc_respond(req, a, n);
}

/* Inline: keeps rank 0's progress thread in its poll until rank 0 holds
 * its frames (10 s at most), so that no poll pass begins meanwhile. */
static atomic_int holding, released; /* _Atomic: plain uses are atomic (TSan) */

static void h_hold(frpc_request *req, void *u)
{
    (void)u;
    holding = 1;
    long long t = now_ms();
    while (!released && now_ms() - t < 10000)
        msleep(1);
    frpc_respond(req, NULL, 0);
}

/* Rank 1: stopped by a child until rank 0 marks "resume" (30 s at most).
 * The child says "stopping" once the stop is sent: the rank itself may be
 * stopped before it could say anything. */
static void stop_until_resumed(void)
{
    pid_t self = getpid();
    if (fork() == 0) {
        kill(self, SIGSTOP);
        mark("stopping");
        long long t = now_ms();
        while (!marked("resume") && now_ms() - t < 30000)
            msleep(5);
        kill(self, SIGCONT);
        _exit(0);
    }
}

/* Rank 2: fills rank 1's queue until a call finds no room for 5 ms. */
static void fill(frpc_agent *a)
{
    static char big[5000];
    int rc = 0, n = 0;
    msleep(200); /* the stop lands */
    while (rc == 0 && n < 200000) {
        frpc_future *f = NULL;
        rc = frpc_call_async(a, 1, "echo", big, sizeof big, 5, &f);
        frpc_future_free(f);
        n++;
    }
    if (rc != FRPC_ETIMEDOUT)
        FAIL("filling rank 1: %s after %d calls", frpc_strerror(rc), n);
    mark("filled");
}

/* One victim: how long op took, checked against the bound. */
#define VICTIM(what, expr)                                                     \
    do {                                                                       \
        long long t_ = now_ms();                                               \
        int rc_ = (expr);                                                      \
        long long ms_ = now_ms() - t_;                                         \
        printf("rank 0: %s: %s in %lld ms\n", what, frpc_strerror(rc_), ms_); \
        if (ms_ > VICTIM_BOUND_MS)                                             \
            FAIL("%s took %lld ms (timeout %d)", what, ms_, VICTIM_MS);        \
        if (rc_ != 0 && rc_ != FRPC_ETIMEDOUT)                                 \
            FAIL("%s: %s", what, frpc_strerror(rc_));                          \
    } while (0)

static int wait_on_call(frpc_agent *a)
{
    frpc_future *f = NULL;
    int rc = frpc_call_async(a, 2, "echo", "w", 1, VICTIM_MS, &f);
    if (rc == 0)
        rc = frpc_future_wait(f, VICTIM_MS);
    frpc_future_free(f);
    return rc;
}

static void hold_and_time(frpc_agent *a)
{
    frpc_future *hold = NULL, *first = NULL, *held[2] = {NULL, NULL};
    char x[8] = "x";
    wait_mark("filled", 30000);
    if (frpc_call_async(a, 0, "hold", NULL, 0, 10000, &hold))
        FAIL("hold");
    long long t = now_ms();
    while (!holding) {
        if (now_ms() - t > 10000)
            FAIL("the inline handler never ran");
        msleep(1);
    }
    frpc_batch_begin(a);
    int rc = frpc_call_async(a, 1, "echo", x, sizeof x, 5, &first);
    if (rc != FRPC_ETIMEDOUT)
        FAIL("a call to rank 1's full queue: %s", frpc_strerror(rc));
    t = now_ms();
    for (int i = 0; i < 2; i++)
        if ((rc = frpc_call_async(a, 1, "echo", x, sizeof x, HELD_MS,
                                  &held[i])))
            FAIL("held call %d: %s", i, frpc_strerror(rc));
    if (now_ms() - t > VICTIM_BOUND_MS)
        FAIL("the calls were not held: they took %lld ms", now_ms() - t);
    released = 1;
    VICTIM("frpc_batch_end", frpc_batch_end(a));
    VICTIM("frpc_call to rank 2",
           frpc_call(a, 2, "echo", x, sizeof x, VICTIM_MS, NULL));
    VICTIM("frpc_notify to rank 2", frpc_notify(a, 2, x, 1, VICTIM_MS));
    VICTIM("frpc_call to itself",
           frpc_call(a, 0, "echo", x, sizeof x, VICTIM_MS, NULL));
    VICTIM("frpc_future_wait on a call to rank 2", wait_on_call(a));
    mark("resume");
    for (int i = 0; i < 2; i++)
        if ((rc = frpc_future_wait(held[i], HELD_MS + 10000)))
            FAIL("held call %d ended %s", i, frpc_strerror(rc));
    frpc_future_wait(hold, 10000);
    frpc_future_free(hold);
    frpc_future_free(first);
    frpc_future_free(held[0]);
    frpc_future_free(held[1]);
}

int main(void)
{
    frpc_agent *a;
    int rc = frpc_init(NULL, &a);
    if (rc)
        FAIL("frpc_init: %s", frpc_strerror(rc));
    me = frpc_rank(a);
    if (frpc_world_size(a) != 3)
        FAIL("needs 3 ranks");
    if (frpc_register(a, "echo", h_echo, NULL, 0) ||
        frpc_register(a, "hold", h_hold, NULL, FRPC_INLINE))
        FAIL("register");
    if ((rc = frpc_barrier(a, 30000)))
        FAIL("barrier: %s", frpc_strerror(rc));
    if (me == 1) {
        stop_until_resumed();
        wait_mark("resume", 60000);
    } else if (me == 2) {
        wait_mark("stopping", 30000);
        fill(a);
        wait_mark("resume", 60000);
    } else {
        hold_and_time(a);
    }
    if ((rc = frpc_barrier(a, 60000)))
        FAIL("last barrier: %s", frpc_strerror(rc));
    if ((rc = frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, 30000)))
        FAIL("shutdown: %s", frpc_strerror(rc));
    printf("ok: rank %d\n", me);
    return 0;
}
