/*
 * Progress: who polls the completion queue, and how idle threads sleep.
 *
 * Design notes
 * - A thread waiting for its call polls the CQ itself for the spin window
 *   (it handles whatever it finds, other calls' answers and incoming
 *   requests included), then sleeps on its call's condition variable while
 *   the progress thread takes over. The hand-over is the fabric's poll
 *   lock: whoever holds it polls; nobody sleeps holding it.
 * - A thread that is itself inside a handler (it holds the poll lock)
 *   never sleeps on its condition variable: nobody else could poll. It
 *   keeps polling, sleeping on the CQ's wait object between polls.
 * - The progress thread spins for the spin window after the last
 *   completion, then blocks: on the CQ's fd where the provider has one
 *   (tcp, sockets), else in a bounded back-off sleep (shm). Busy mode never
 *   sleeps; blocking mode has no spin window.
 */
#include "config.h"

#include <sched.h>
#include <time.h>

#include "comm/clock.h"
#include "rpc/agent.h"

#define FR_IDLE_BLOCK_US 100000  /* fd wait: re-check stop this often */
#define FR_BACKOFF_MIN_US 20
#define FR_BACKOFF_MAX_US 1000
#define FR_CALLER_NAP_NS 20000000ull /* re-check the CQ at least this often */
#define FR_ASIDE_NS 1000000ull       /* see stand_aside */

static void sleep_us(unsigned us)
{
    struct timespec ts = {.tv_sec = us / 1000000,
                          .tv_nsec = (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Waits while callers are spinning on the CQ themselves. A caller that
 * gives up spinning to sleep wakes us at once (caller_stops_spinning); a
 * caller whose call completed does not, since it usually calls again at
 * once: waking us between back-to-back calls would put a third runnable
 * thread on a two-core machine. We look again every FR_ASIDE_NS instead. */
static void stand_aside(frpc_agent *a)
{
    pthread_mutex_lock(&a->aside_lock);
    while (atomic_load(&a->spinning_callers) > 0 && !atomic_load(&a->stop)) {
        struct timespec ts = fr_ns_to_timespec(fr_now_ns() + FR_ASIDE_NS);
        pthread_cond_timedwait(&a->aside_cond, &a->aside_lock, &ts);
    }
    pthread_mutex_unlock(&a->aside_lock);
}

static void caller_starts_spinning(frpc_agent *a)
{
    atomic_fetch_add(&a->spinning_callers, 1);
}

static void caller_stops_spinning(frpc_agent *a, int needs_progress)
{
    if (atomic_fetch_sub(&a->spinning_callers, 1) == 1 && needs_progress) {
        pthread_mutex_lock(&a->aside_lock);
        pthread_cond_signal(&a->aside_cond);
        pthread_mutex_unlock(&a->aside_lock);
    }
}

static void *progress_main(void *arg)
{
    frpc_agent *a = arg;
    uint64_t spin_ns = (uint64_t)a->set.spin_us * 1000;
    uint64_t last = fr_now_ns();
    unsigned backoff = FR_BACKOFF_MIN_US;

    while (!atomic_load(&a->stop)) {
        if (atomic_load(&a->spinning_callers) > 0) {
            stand_aside(a);
            last = fr_now_ns();
            continue;
        }
        int n = fr_fabric_progress(a->fab);
        if (n > 0) {
            last = fr_now_ns();
            backoff = FR_BACKOFF_MIN_US;
            continue;
        }
        if (a->set.progress == FRPC_PROGRESS_BUSY) {
            if (n == FRPC_EAGAIN)
                sched_yield();
            continue;
        }
        if (n == FRPC_EAGAIN) {
            /* A caller is polling; stay out of its way. */
            sleep_us(FR_BACKOFF_MIN_US);
            continue;
        }
        if (fr_now_ns() - last < spin_ns)
            continue;
        if (fr_fabric_can_block(a->fab)) {
            fr_fabric_wait(a->fab, FR_IDLE_BLOCK_US);
        } else {
            sleep_us(backoff);
            if (backoff < FR_BACKOFF_MAX_US)
                backoff *= 2;
        }
    }
    return NULL;
}

int fr_progress_start(frpc_agent *a)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->aside_cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&a->aside_lock, NULL);
    atomic_store(&a->stop, 0);
    if (pthread_create(&a->progress_thread, NULL, progress_main, a))
        return FRPC_ENOMEM;
    a->progress_started = 1;
    return 0;
}

void fr_progress_stop(frpc_agent *a)
{
    if (!a->progress_started)
        return;
    atomic_store(&a->stop, 1);
    pthread_mutex_lock(&a->aside_lock);
    pthread_cond_signal(&a->aside_cond);
    pthread_mutex_unlock(&a->aside_lock);
    pthread_join(a->progress_thread, NULL);
    a->progress_started = 0;
    pthread_cond_destroy(&a->aside_cond);
    pthread_mutex_destroy(&a->aside_lock);
}

/* Polls until p is done (1), the deadline passes (0, p completed as timed
 * out), or the spin window ends with nothing to do (-1). */
static int spin_on_call(frpc_agent *a, fr_pending *p, uint64_t deadline)
{
    uint64_t spin_ns = (uint64_t)a->set.spin_us * 1000;
    uint64_t spin_end = fr_now_ns() + spin_ns;

    for (;;) {
        if (atomic_load(&p->done))
            return 1;
        int n = fr_fabric_progress(a->fab);
        if (atomic_load(&p->done))
            return 1;
        uint64_t now = fr_now_ns();
        if (now >= deadline) {
            fr_pending_wait(&a->pend, p, 0, 1); /* complete as timed out */
            return 0;
        }
        if (n > 0) {
            spin_end = now + spin_ns;
            continue;
        }
        if (a->set.progress == FRPC_PROGRESS_BUSY || now < spin_end) {
            if (n == FRPC_EAGAIN)
                sched_yield();
            continue;
        }
        return -1;
    }
}

void fr_progress_wait_call(frpc_agent *a, fr_pending *p, uint64_t deadline)
{
    unsigned backoff = FR_BACKOFF_MIN_US;

    for (;;) {
        caller_starts_spinning(a);
        int r = spin_on_call(a, p, deadline);
        caller_stops_spinning(a, r < 0);
        if (r >= 0)
            return;
        uint64_t now = fr_now_ns();
        if (fr_fabric_polling_here(a->fab)) {
            /* Nested inside a handler: only we can poll. */
            if (fr_fabric_can_block(a->fab))
                fr_fabric_wait(a->fab, FR_BACKOFF_MAX_US);
            else {
                sleep_us(backoff);
                if (backoff < FR_BACKOFF_MAX_US)
                    backoff *= 2;
            }
            continue;
        }
        uint64_t until = now + FR_CALLER_NAP_NS;
        if (fr_pending_wait(&a->pend, p, until < deadline ? until : deadline,
                            0))
            return;
    }
}
