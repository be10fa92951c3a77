/*
 * How often, and for how long, the machine takes the CPU from a thread
 * that only spins: the floor under every tail figure (p99) measured here.
 *
 * One thread per core asked for reads the clock in a loop for the given
 * seconds; a gap of more than 3 us between two reads is time the thread
 * did not run (an interrupt, the hypervisor, another task). Prints, per
 * thread, the gaps per second, their p50/p90/p99/max and the share of
 * the time lost. An operation of T us, on each of k threads, is hit by
 * at least one gap with a probability of about 1 - exp(-k * rate * T);
 * where that is over 1%, its p99 carries a gap's length.
 *
 * On the reference machine (2026-12-01, idle): about 1,800 gaps a
 * second, p50 35 us, 6% of the time, with one or two threads. So a tcp
 * round trip of 23 us (two ranks spinning) is hit about 8% of the time,
 * and its p99 is its p50 plus 35-60 us: over 2x its p50 whatever the
 * runtime does.
 *
 * Build: cc -O2 -pthread tools/cpu_stalls.c -o cpu_stalls
 * Run:   ./cpu_stalls [SECONDS (5)] [THREADS (1)]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define GAP_US 3.0
#define MAX_GAPS 10000000L

typedef struct {
    double secs;
    double *gap;
    long n;
} run;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void *spin(void *arg)
{
    run *r = arg;
    double start = now_us(), prev = start, t;
    while ((t = now_us()) - start < r->secs * 1e6) {
        if (t - prev > GAP_US && r->n < MAX_GAPS)
            r->gap[r->n++] = t - prev;
        prev = t;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 5;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (secs <= 0 || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: cpu_stalls [SECONDS > 0] [THREADS 1..64]\n");
        return 2;
    }
    run r[64];
    pthread_t tid[64];
    for (int i = 0; i < threads; i++) {
        r[i] = (run){.secs = secs, .gap = malloc(sizeof(double) * MAX_GAPS)};
        if (!r[i].gap || pthread_create(&tid[i], NULL, spin, &r[i])) {
            fprintf(stderr, "cpu_stalls: no memory or thread\n");
            return 1;
        }
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        long n = r[i].n;
        double lost = 0;
        for (long k = 0; k < n; k++)
            lost += r[i].gap[k];
        qsort(r[i].gap, (size_t)n, sizeof(double), by_value);
        if (n == 0) {
            printf("thread %d: no gap over %.0f us in %.1f s\n", i, GAP_US,
                   secs);
            free(r[i].gap);
            continue;
        }
        printf("thread %d: %ld gaps over %.0f us in %.1f s (%.0f/s); "
               "p50 %.1f p90 %.1f p99 %.1f max %.1f us; %.2f%% of the "
               "time\n",
               i, n, GAP_US, secs, (double)n / secs, r[i].gap[n / 2],
               r[i].gap[n * 9 / 10], r[i].gap[n * 99 / 100], r[i].gap[n - 1],
               100 * lost / (secs * 1e6));
        free(r[i].gap);
    }
    return 0;
}
