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
static _Thread_local int resting; /* in fr_hold_poll: not counted busy */
static _Thread_local sigset_t before; /* the mask the outermost hold replaced */
static _Thread_local int masked;      /* pthread_sigmask worked */

/* Held threads outside a wait; whether exit has begun, and on which
 * thread (that one goes on: it runs the exit handlers, among them maybe
 * a program's that shuts an agent down). */
static atomic_int busy, exiting;
static pthread_t exit_thread;

static int busy_here(void)
{
    return depth > 0 && !resting;
}

/* Bounded: what a held thread does between waits ends (libfabric's first
 * fi_getinfo, the longest, takes seconds at worst under sanitizers). A
 * hold of the exiting thread's own is not waited for. */
static void wait_for_busy_at_exit(void)
{
    exit_thread = pthread_self();
    atomic_store(&exiting, 1);
    for (int i = 0; i < 10000 && atomic_load(&busy) > busy_here(); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

/* A fork child has only the forking thread: the others' holds (a
 * frpc_init under way on another thread of the parent) are not its own,
 * and its exit waited 10 s for threads it does not have. */
static void child_forgets_other_threads(void)
{
    atomic_store(&busy, busy_here());
    atomic_store(&exiting, 0);
}

/* At load: an exit that begins before the first frpc_init is seen too.
 * Handlers registered before (a program that loads libfabrpc with dlopen)
 * run after this one: the exiting thread itself never stops. */
__attribute__((constructor)) static void register_exit_wait(void)
{
    atexit(wait_for_busy_at_exit);
    pthread_atfork(NULL, NULL, child_forgets_other_threads);
}

static int another_thread_exits(void)
{
    return atomic_load(&exiting) && !pthread_equal(exit_thread, pthread_self());
}

/* For good: the exiting thread ends the process. */
static void stop(void)
{
    for (;;)
        pause();
}

/* Counted busy, then the flag read (the exit handler sets the flag, then
 * reads the count): one of the two sees the other. */
static void become_busy(void)
{
    atomic_fetch_add(&busy, 1);
    if (another_thread_exits()) {
        atomic_fetch_sub(&busy, 1);
        stop();
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
    /* Another thread may have begun exit meanwhile (it no longer waits
     * for this one: not busy). A handler that just ran exit() here never
     * returns. */
    if (another_thread_exits())
        stop();
}

int fr_hold_poll(struct pollfd *p, nfds_t n, int timeout_ms)
{
    if (depth <= 0 || !masked)
        return poll(p, n, timeout_ms);
    struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    resting = 1;
    atomic_fetch_sub(&busy, 1);
    int rc = ppoll(p, n, timeout_ms < 0 ? NULL : &ts, &before);
    become_busy();
    resting = 0;
    return rc;
}
