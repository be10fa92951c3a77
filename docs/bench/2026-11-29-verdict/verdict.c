/* docs/bench/2026-11-29-verdict/README.md says how it is run. */
#define _DEFAULT_SOURCE
/* Time from rank 0's SIGKILL to rank 2's verdict of it, while rank 1
 * calls rank 2 every 3 ms (the traffic that kept settle's spell open). */
#include <fabrpc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static atomic_int lost0;
static double lost_at;
static void on_lost(frpc_agent *a, int rank, int state, const char *why,
                    void *u)
{
    (void)a, (void)state, (void)why, (void)u;
    if (rank == 0 && !atomic_load(&lost0)) {
        lost_at = now_ms();
        atomic_store(&lost0, 1);
    }
}
static void quick(frpc_request *r, void *u)
{
    (void)u;
    frpc_respond(r, NULL, 0);
}
int main(void)
{
    frpc_config cfg;
    frpc_agent *a;
    frpc_config_init(&cfg);
    if (frpc_init(&cfg, &a))
        return 1;
    int me = frpc_rank(a);
    frpc_register(a, "quick", quick, NULL, FRPC_INLINE);
    frpc_on_peer_lost(a, on_lost, NULL);
    frpc_barrier(a, 30000);
    if (me == 0) {
        usleep(300000);
        FILE *f = fopen("/tmp/verdict/kill_t", "w");
        fprintf(f, "%.3f\n", now_ms());
        fclose(f);
        raise(SIGKILL);
    }
    double t0 = now_ms();
    while (!atomic_load(&lost0) && now_ms() - t0 < 5000) {
        if (me == 1)
            frpc_call(a, 2, "quick", NULL, 0, 1000, NULL);
        usleep(3000);
    }
    if (me == 2) {
        usleep(100000);
        FILE *f = fopen("/tmp/verdict/kill_t", "r");
        double k = 0;
        if (f && fscanf(f, "%lf", &k) == 1)
            printf("rank 2: verdict on rank 0 %.1f ms after its kill\n",
                   lost_at - k);
        if (f)
            fclose(f);
    }
    if (me == 1)
        usleep(200000);
    frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 2000);
    return 0;
}
