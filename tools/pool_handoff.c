/*
 * What a hand-off to a sleeping pool thread costs: rank 0 makes 3,000
 * sync calls (after 200 untimed) to rank 1's pool function "slow", whose
 * handler spins 150 us, so the progress thread gives every request to
 * the pool (a function that runs 100 us or more leaves the progress
 * thread, fabrpc.h "Registry and handlers") and the pool thread has gone
 * back to sleep between calls. Prints the round trip less the 150 us,
 * p50/p90/p99.
 * Build: cc -O2 tools/pool_handoff.c -o pool_handoff $(pkg-config --cflags
 *        --libs fabrpc)   (or -I/-L into a build tree)
 * Run:   fabrpc-run -n 2 --provider shm ./pool_handoff   (or tcp)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <fabrpc.h>

#define SPIN_US 150
#define CALLS 3000
#define WARMUP 200

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void slow(frpc_request *req, void *user)
{
    (void)user;
    double until = now_us() + SPIN_US;
    while (now_us() < until)
        ;
    frpc_respond(req, "ok", 2);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int measure(frpc_agent *a)
{
    static double d[CALLS];
    for (int i = 0; i < CALLS + WARMUP; i++) {
        double t = now_us();
        frpc_result r;
        int rc = frpc_call(a, 1, "slow", "x", 1, 5000, &r);
        frpc_result_clear(&r);
        if (rc) {
            fprintf(stderr, "call %d: %s\n", i, frpc_strerror(rc));
            return 1;
        }
        if (i >= WARMUP)
            d[i - WARMUP] = now_us() - t - SPIN_US;
    }
    qsort(d, CALLS, sizeof(d[0]), by_value);
    printf("round trip less the handler's %d us: p50 %.1f p90 %.1f p99 "
           "%.1f us\n", SPIN_US, d[CALLS / 2], d[CALLS * 9 / 10],
           d[CALLS * 99 / 100]);
    return 0;
}

int main(void)
{
    frpc_agent *a;
    int rc = frpc_init(NULL, &a);
    if (rc) {
        fprintf(stderr, "frpc_init: %s\n", frpc_strerror(rc));
        return 1;
    }
    if (frpc_world_size(a) != 2) {
        fprintf(stderr, "pool_handoff needs 2 ranks\n");
        frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 1000);
        return 2;
    }
    rc = frpc_register(a, "slow", slow, NULL, 0);
    if (!rc)
        rc = frpc_barrier(a, 10000);
    if (!rc && frpc_rank(a) == 0)
        rc = measure(a);
    int b = frpc_barrier(a, 60000);
    frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, 10000);
    return rc || b ? 1 : 0;
}
