/*
 * The machine's own state over time, without libfabric or fabrpc: the
 * mean round trip of a cache line bounced between the first two CPUs this
 * process may use (core_rtt.h), window after window.
 *
 * On the reference machine (2 vCPUs of an AMD EPYC under KVM) it sits at
 * about 50, or 110-160 ns for seconds at a time, then at about 510-600 ns
 * (the host has put the two vCPUs on cores that share no cache), and back:
 * the machine's fast and slow states. A small call's round trip on shm,
 * fabrpc's or fi_pingpong's, follows it (docs/bench/2026-12-03-bimodal).
 *
 * Build: cc -O2 -pthread tools/core_pingpong.c tools/core_rtt.c -lm \
 *            -o core_pingpong
 * Run:   ./core_pingpong [SECONDS (5)] [WINDOW_MS (50)]
 * Prints one line per window, "ms_since_start mean_round_trip_ns", then
 * "# windows N median_ns M min_ns A max_ns B". Exit 1 on bad arguments
 * or when it cannot measure (fewer than two usable CPUs).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core_rtt.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 5;
    double window_ms = argc > 2 ? atof(argv[2]) : 50;
    if (!(seconds > 0) || !(window_ms > 0) || window_ms > seconds * 1000) {
        fprintf(stderr, "usage: core_pingpong [SECONDS] [WINDOW_MS]\n");
        return 1;
    }
    size_t cap = (size_t)(seconds * 1000 / window_ms) + 1, n = 0;
    double *means = malloc(cap * sizeof(double));
    if (!means)
        return 1;
    double start = now_ms();
    while (n < cap && now_ms() - start < seconds * 1000) {
        double ns = core_rtt_ns(window_ms);
        if (isnan(ns)) {
            fprintf(stderr, "core_pingpong: cannot measure (needs two "
                            "usable CPUs)\n");
            free(means);
            return 1;
        }
        printf("%.0f %.1f\n", now_ms() - start, ns);
        means[n++] = ns;
    }
    qsort(means, n, sizeof(double), cmp_double);
    printf("# windows %zu median_ns %.1f min_ns %.1f max_ns %.1f\n", n,
           means[n / 2], means[0], means[n - 1]);
    free(means);
    return 0;
}
