/* See signal_hold.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* ppoll */
#endif
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "comm/signal_hold.h"
#include "comm/threads.h"

static _Thread_local int depth;
static _Thread_local sigset_t before; /* the mask the outermost hold replaced */
static _Thread_local int masked;      /* pthread_sigmask worked */

/* Held threads outside a wait, and whether some thread has begun exit. */
static atomic_int busy, exiting;

/* Bounded: what a held thread does between waits ends (libfabric's first
 * fi_getinfo, the longest, takes seconds at worst under sanitizers). */
static void wait_for_busy_at_exit(void)
{
    atomic_store(&exiting, 1);
    for (int i = 0; i < 10000 && atomic_load(&busy) > 0; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

/* At load: an exit that begins before the first frpc_init is seen too. */
__attribute__((constructor)) static void register_exit_wait(void)
{
    atexit(wait_for_busy_at_exit);
}

/* Counted busy, then the flag read (the exit handler sets the flag, then
 * reads the count): one of the two sees the other. A thread that sees
 * the process exiting stops for good: the exiting thread ends it. */
static void become_busy(void)
{
    atomic_fetch_add(&busy, 1);
    if (atomic_load(&exiting)) {
        atomic_fetch_sub(&busy, 1);
        for (;;)
            pause();
    }
}

void fr_hold_begin(void)
{
    if (depth++ > 0)
        return;
    sigset_t hold;
    fr_async_signals(&hold);
    masked = pthread_sigmask(SIG_BLOCK, &hold, &before) == 0;
    become_busy();
}

void fr_hold_end(void)
{
    if (depth <= 0 || --depth > 0)
        return;
    atomic_fetch_sub(&busy, 1);
    if (masked)
        pthread_sigmask(SIG_SETMASK, &before, NULL);
    /* A handler that just ran may have begun exit (the exit handler
     * does not wait for this thread: it was not busy). */
    if (atomic_load(&exiting))
        for (;;)
            pause();
}

int fr_hold_poll(struct pollfd *p, nfds_t n, int timeout_ms)
{
    if (depth <= 0 || !masked)
        return poll(p, n, timeout_ms);
    struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    atomic_fetch_sub(&busy, 1);
    int rc = ppoll(p, n, timeout_ms < 0 ? NULL : &ts, &before);
    become_busy();
    return rc;
}
