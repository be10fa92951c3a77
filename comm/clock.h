/* Monotonic time helpers shared by comm/ and rpc/. */
#ifndef FR_COMM_CLOCK_H
#define FR_COMM_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Thread-locals read on every poll: one load off the thread pointer
 * rather than a call to __tls_get_addr each time (the general model of a
 * shared library). The few bytes come from the static TLS room glibc keeps
 * for libraries, also when the library is dlopen'ed. */
#if defined(__GNUC__) && defined(__PIC__)
#define FR_TLS_FAST __attribute__((tls_model("initial-exec")))
#else
#define FR_TLS_FAST
#endif

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

/* comm/fabric.c: the clock as this thread's current (or just ended)
 * poll read its CQ with completions in it, or 0. What that read found
 * (answers, requests) is timed by it, with no clock read of its own.
 * Every poll starts it at 0; whoever runs user code (a handler, a
 * callback: it may take long, or poll again) sets it to 0 first, so the
 * time of what comes after is read afresh. */
extern _Thread_local uint64_t fr_taken_ns FR_TLS_FAST;

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
