/* Monotonic time helpers shared by comm/ and rpc/. */
#ifndef FR_COMM_CLOCK_H
#define FR_COMM_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
static inline uint64_t fr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC as of the kernel's last tick (a few ms old at most,
 * never ahead of fr_now_ns), for a cheap "has this deadline surely
 * passed" on a hot path. */
static inline uint64_t fr_coarse_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Deadline timeout_ms from now; UINT64_MAX when timeout_ms <= 0 (none). */
static inline uint64_t fr_deadline_ms(int timeout_ms)
{
    if (timeout_ms <= 0)
        return UINT64_MAX;
    return fr_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

/* The deadline as a CLOCK_REALTIME timespec for pthread_cond_timedwait
 * (callers using a CLOCK_MONOTONIC condattr pass the monotonic value). */
static inline struct timespec fr_ns_to_timespec(uint64_t ns)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    return ts;
}

/* A condition variable whose timed waits take fr_now_ns deadlines. */
static inline void fr_cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

#endif /* FR_COMM_CLOCK_H */
