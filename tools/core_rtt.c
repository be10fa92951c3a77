/* See core_rtt.h. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "core_rtt.h"

/* Each on its own line: only the bounce itself crosses between cores. */
static struct {
    _Alignas(64) atomic_long ping;
    _Alignas(64) atomic_long pong;
    _Alignas(64) atomic_int stop;
} line;

/* One measurement at a time: the lines above are shared. */
static pthread_mutex_t one_at_a_time = PTHREAD_MUTEX_INITIALIZER;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int pin(pthread_t t, int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(t, sizeof(set), &set);
}

static void *echo(void *arg)
{
    (void)arg;
    long last = 0;
    while (!atomic_load_explicit(&line.stop, memory_order_relaxed)) {
        long v = atomic_load_explicit(&line.ping, memory_order_acquire);
        if (v != last) {
            last = v;
            atomic_store_explicit(&line.pong, v, memory_order_release);
        }
    }
    return NULL;
}

/* The first two CPUs in this process's affinity mask; 0 or -1. */
static int two_cpus(int cpus[2])
{
    cpu_set_t allowed;
    int n = 0;
    if (sched_getaffinity(0, sizeof(allowed), &allowed))
        return -1;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    return n == 2 ? 0 : -1;
}

static double bounce(double window_ms)
{
    double start = now_ns(), end = start + window_ms * 1e6, t1 = start;
    long n = 0, seq = atomic_load(&line.ping);
    do {
        seq++;
        atomic_store_explicit(&line.ping, seq, memory_order_release);
        while (atomic_load_explicit(&line.pong, memory_order_acquire) != seq)
            ;
        /* the clock only every 256 round trips: it costs about as much */
        if ((++n & 255) == 0)
            t1 = now_ns();
    } while (t1 < end);
    return (t1 - start) / (double)n;
}

double core_rtt_ns(double window_ms)
{
    int cpus[2];
    double rtt = NAN;
    if (!(window_ms > 0) || two_cpus(cpus))
        return NAN;
    pthread_t self = pthread_self(), t;
    cpu_set_t saved;
    if (pthread_getaffinity_np(self, sizeof(saved), &saved))
        return NAN;
    pthread_mutex_lock(&one_at_a_time);
    atomic_store(&line.stop, 0);
    atomic_store(&line.pong, atomic_load(&line.ping));
    if (pthread_create(&t, NULL, echo, NULL)) {
        pthread_mutex_unlock(&one_at_a_time);
        return NAN;
    }
    if (pin(t, cpus[1]) == 0 && pin(self, cpus[0]) == 0)
        rtt = bounce(window_ms);
    atomic_store(&line.stop, 1);
    pthread_join(t, NULL);
    pthread_setaffinity_np(self, sizeof(saved), &saved);
    pthread_mutex_unlock(&one_at_a_time);
    return rtt;
}
