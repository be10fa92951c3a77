/*
 * Progress: who polls the completion queue, and how idle threads sleep.
 *
 * Design notes
 * - A thread waiting for a call polls the CQ itself for the spin window
 *   (it handles whatever it finds: other calls' answers, incoming requests,
 *   expired deadlines), then sleeps itself on the CQ's fd (tcp, sockets)
 *   or, in blocking mode, this rank's doorbell (shm), still counted as
 *   spinning: the message that ends its wait wakes one thread (it) rather
 *   than the progress thread and then it, and a call that another
 *   thread's poll completes wakes it through fr_fabric_wake_sleepers.
 *   Otherwise it sleeps on a condition variable while the progress thread
 *   takes over (see sleeps_itself). The fabric's poll lock decides who
 *   polls; nobody sleeps holding it.
 * - While callers spin, the progress thread stands aside: on two cores a
 *   third spinning thread costs milliseconds of latency.
 * - A thread that is itself inside an inline handler (it holds the poll
 *   lock) never sleeps on a condition variable: nobody else could poll. It
 *   keeps polling, sleeping on the CQ's wait object between polls.
 * - The progress thread spins for the spin window after the last
 *   completion, then blocks: on the CQ's fd where the provider has one
 *   (tcp, sockets), else in a bounded back-off sleep (shm); never past the
 *   next call deadline. Busy mode never sleeps; blocking mode has no spin
 *   window.
 * - Lingers: a caller whose wait ended usually refills its window of async
 *   calls and waits again; while it refills, its frames to a peer that
 *   already had one since the last poll wait for its next poll (they go
 *   as one message: comm/batch.c). Only a caller lingers (not a pool
 *   thread, not an inline handler's nested wait), and only while the
 *   progress thread stands aside. That thread stays aside while callers
 *   spin or one began a linger within FR_ASIDE_NS (else it would step in
 *   during every refill, and its polls would send the refills a few at a
 *   time); it looks every FR_ASIDE_NS, then polls (sending what waits),
 *   and ends every linger before it sleeps any other way. So a frame
 *   waits at most about 2 x FR_ASIDE_NS for a caller that goes off to
 *   compute instead; a lone frame never waits. tcp, 8 B calls, 64 in
 *   flight: 125 k -> 739 k calls/s.
 * - A spinning thread that may have just woken a sleeper (rang a
 *   doorbell that woke a peer's thread, signalled a waiter's condition,
 *   handed a request to a sleeping pool thread, sent over tcp) yields
 *   its CPU once (fr_woke_sleeper): the scheduler
 *   often queues the woken thread on the waker's CPU, where it waited out
 *   the whole spin window. `fabrpc-bench latency --sizes 8 --gap-us
 *   2000` (8 B round trips 2 ms apart), p50: shm 627-636 -> 35-37 us,
 *   tcp 272 -> 72 us; back to back, and rates at W 1 and 64, unchanged.
 * - An adaptive spin on a CQ without an fd (shm) also yields its CPU
 *   every FR_SPIN_YIELD_NS that it finds no work: with more ranks than
 *   cores (4 ranks on 2 cores, or
 *   ranks pinned to one core), the thread a message is for may be queued
 *   on this CPU behind this spin, and waited out the whole spin window,
 *   once each way: an 8 B round trip on shm with both ranks on one core
 *   took 215-221 us (`taskset -c 0 fabrpc-bench latency --sizes 8`).
 *   A yield costs about 0.6 us here, and a spin that ends within the
 *   period (a back-to-back call on shm) makes none.
 * - Nesting guard: a pool thread may wait only while another pool thread
 *   stays free, and an inline handler may nest FRPC_MAX_INLINE_DEPTH deep;
 *   past either, the wait fails with FRPC_EDEADLK instead of deadlocking.
 */
#include "config.h"

#include <sched.h>
#include <time.h>

#include "comm/threads.h"
#include "comm/clock.h"
#include "rpc/agent.h"

#define FR_IDLE_BLOCK_US 100000  /* fd wait: re-check stop this often */
#define FR_BACKOFF_MIN_US 20
#define FR_BACKOFF_MAX_US 1000
#define FR_CALLER_NAP_NS 20000000ull /* re-check the CQ at least this often */
#define FR_ASIDE_NS 1000000ull       /* see stand_aside */
#define FR_TRANSFER_GRACE_NS 50000000ull /* see transfer_spin */
#define FR_SPIN_YIELD_NS 10000ull        /* see the design notes */

static void sleep_us(unsigned us)
{
    struct timespec ts = {.tv_sec = us / 1000000,
                          .tv_nsec = (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Once after this thread woke a sleeper (see fr_woke_sleeper). Not in
 * busy mode: busy ranks never sleep, and over tcp, where every send
 * counts as a wake-up, the yield cost 4% of the calls at W=1. */
static int yield_to_woken(void)
{
    if (!fr_woke_sleeper)
        return 0;
    fr_woke_sleeper = 0;
    return 1;
}

/* How often an adaptive spin that finds no work yields its CPU: every
 * FR_SPIN_YIELD_NS, or never (0) where the CQ has an fd (tcp): there
 * every send already counts as a wake-up (fr_woke_sleeper), and the
 * periodic yields measured no better (two pairs of ranks on 2 cores, 8 B
 * round trips: p50 26-69 us against 30-49). A period of 5 us helped
 * both ranks on one core (8 B p50 17 us against 26) but cost two cores
 * in the machine's slow state (4 KiB p50 8.2 us against 5.6, p99 43
 * against 12: such a round trip outlasts 5 us, so its idle side yielded;
 * 2026-12-06, 20 interleaved rounds). Read once per spin: it is fixed
 * for the agent's life. */
static uint64_t spin_yield_ns(frpc_agent *a)
{
    return fr_fabric_has_fd(a->fab) ? 0 : FR_SPIN_YIELD_NS;
}

/* Whether a spin that found no work since idle_since yields now: once
 * every period ns (*last: its previous yield), never if period is 0. */
static int yield_due(uint64_t period, uint64_t now, uint64_t idle_since,
                     uint64_t *last)
{
    if (!period)
        return 0;
    uint64_t from = *last > idle_since ? *last : idle_since;
    if (now - from < period)
        return 0;
    *last = now;
    return 1;
}

/* One poll of the CQ, then the deadlines that have passed; *now is the
 * time after the poll: the one read when the poll found completions, if
 * no handler ran since (fr_taken_ns), so a busy poll reads the clock
 * once for its answers, its requests and the deadlines. */
static int poll_once(frpc_agent *a, uint64_t *now)
{
    int n = fr_fabric_progress(a->fab);
    *now = fr_taken_ns ? fr_taken_ns : fr_now_ns();
    fr_taken_ns = 0;
    fr_pending_expire(&a->pend, *now);
    return n;
}

/* Microseconds from now to at, rounded up so a sleep ends past it. */
static unsigned us_until(uint64_t at, uint64_t now)
{
    return at <= now ? 0 : (unsigned)((at - now) / 1000) + 1;
}

/* Microseconds the progress thread may sleep: up to max_us, but not past
 * the next call deadline. */

static unsigned sleep_budget_us(frpc_agent *a, unsigned max_us)
{
    uint64_t next = atomic_load(&a->pend.next_deadline), now = fr_now_ns();
    if (next == UINT64_MAX || next >= now + (uint64_t)max_us * 1000)
        return max_us;
    return us_until(next, now);
}

/* The progress thread's idle nap on the CQ's fd or the doorbell: up to
 * FR_IDLE_BLOCK_US, until the next deadline, or until a call is added
 * whose deadline comes earlier (fr_pending_nap_plan). */
static void nap(frpc_agent *a)
{
    uint64_t now = fr_now_ns();
    uint64_t at = fr_pending_nap_plan(&a->pend, now,
                                      (uint64_t)FR_IDLE_BLOCK_US * 1000);
    fr_fabric_wait_unless(a->fab, us_until(at, now), fr_pending_nap_cut,
                          &a->pend);
    fr_pending_nap_end(&a->pend);
}

/* Keep polling past the spin window while rendezvous transfers are under
 * way (a peer may need us to poll for its reads to progress), but only
 * while they make progress: a transfer a dead or lying peer never ends
 * must not keep us spinning. last_work: when we last found work. */
static int transfer_spin(frpc_agent *a, uint64_t last_work)
{
    return fr_fabric_transfers_active(a->fab) &&
           fr_now_ns() - last_work < FR_TRANSFER_GRACE_NS;
}

/* ---- the progress thread ------------------------------------------- */

static int recently_lingered(frpc_agent *a)
{
    return fr_now_ns() - atomic_load_explicit(&a->last_linger,
                                              memory_order_relaxed) <
           FR_ASIDE_NS;
}

/* Waits while callers are spinning on the CQ themselves. A caller that
 * gives up spinning to sleep wakes us at once (caller_stops_spinning); a
 * caller whose call completed does not, since it usually calls again at
 * once: waking us between back-to-back calls would put a third runnable
 * thread on a two-core machine. We look again every FR_ASIDE_NS instead.
 * A caller that lingered within FR_ASIDE_NS keeps us aside too: it is
 * refilling and about to wait again (see the design notes). */
static void stand_aside(frpc_agent *a)
{
    atomic_store(&a->aside, 1);
    pthread_mutex_lock(&a->aside_lock);
    while ((atomic_load(&a->spinning_callers) > 0 || recently_lingered(a)) &&
           !atomic_load(&a->stop)) {
        struct timespec ts = fr_ns_to_timespec(fr_now_ns() + FR_ASIDE_NS);
        pthread_cond_timedwait(&a->aside_cond, &a->aside_lock, &ts);
    }
    pthread_mutex_unlock(&a->aside_lock);
    atomic_store(&a->aside, 0);
}

static void caller_starts_spinning(frpc_agent *a)
{
    atomic_fetch_add(&a->spinning_callers, 1);
}

static void caller_stops_spinning(frpc_agent *a, int needs_progress)
{
    if (needs_progress) /* a recent linger must not keep it aside now */
        atomic_store_explicit(&a->last_linger, 0, memory_order_relaxed);
    if (atomic_fetch_sub(&a->spinning_callers, 1) == 1 && needs_progress) {
        pthread_mutex_lock(&a->aside_lock);
        pthread_cond_signal(&a->aside_cond);
        pthread_mutex_unlock(&a->aside_lock);
    }
}

/* Sleeps (fn) outside the poller bracket: frames waiting to be coalesced
 * must not wait for this thread's sleep. */
#define ASLEEP(a, call)                        \
    do {                                       \
        fr_fabric_poller_leave((a)->fab);      \
        call;                                  \
        fr_fabric_poller_enter((a)->fab);      \
    } while (0)

/* Any other sleep: nobody would send what lingering callers hold. */
#define ASLEEP_ENDING_LINGERS(a, call)         \
    do {                                       \
        fr_fabric_end_lingers((a)->fab);       \
        ASLEEP(a, call);                       \
    } while (0)

/* After polls that may take pool handlers' requests (begun with
 * fr_standin_poll_begin): runs what they took (standin.h), inside the
 * poller bracket: their answers share messages as inline ones do. */
static void run_taken(frpc_agent *a)
{
    fr_standin_poll_end();
    if (fr_standin_has_taken(a)) {
        atomic_store(&a->progress_state, FR_PROGRESS_IN_HANDLERS);
        fr_standin_run(a);
        atomic_store(&a->progress_state, FR_PROGRESS_POLLING);
    }
}

/* Busy mode never sleeps (the header: "never sleep"): 1 if the poller
 * polls again at once, yielding only while a caller polls (n is
 * FRPC_EAGAIN); 0 in the other modes. */
static int busy_goes_on(frpc_agent *a, int n)
{
    if (a->set.progress != FRPC_PROGRESS_BUSY)
        return 0;
    if (n == FRPC_EAGAIN)
        sched_yield();
    return 1;
}

static void *progress_main(void *arg)
{
    frpc_agent *a = arg;
    uint64_t spin_ns = (uint64_t)a->set.spin_us * 1000;
    uint64_t last = fr_now_ns(), yielded = 0, yield_ns = spin_yield_ns(a);
    unsigned backoff = FR_BACKOFF_MIN_US;

    fr_fabric_poller_enter(a->fab);
    while (!atomic_load(&a->stop)) {
        if (atomic_load(&a->spinning_callers) > 0) {
            ASLEEP(a, stand_aside(a));
            last = fr_now_ns();
            continue;
        }
        uint64_t now;
        fr_standin_poll_begin(a);
        int n = poll_once(a, &now);
        run_taken(a);
        if (n > 0) {
            last = now;
            backoff = FR_BACKOFF_MIN_US;
            continue;
        }
        fr_fabric_trim_blocks(a->fab, now);
        if (busy_goes_on(a, n))
            continue;
        if (n == FRPC_EAGAIN) {
            /* A handler's nested wait is polling; stay out of its way. */
            ASLEEP_ENDING_LINGERS(a, sleep_us(FR_BACKOFF_MIN_US));
            continue;
        }
        if (now - last < spin_ns || transfer_spin(a, last)) {
            if (yield_to_woken() | yield_due(yield_ns, now, last, &yielded))
                sched_yield();
            continue;
        }
        if (fr_fabric_can_block(a->fab)) {
            /* the CQ's fd (tcp) or our doorbell (shm) wakes us, and so
             * does a call added with an earlier deadline than we plan
             * to wake for. The doorbell's last look before the sleep is
             * a poll: what it takes runs right after the nap. */
            fr_standin_poll_begin(a);
            ASLEEP_ENDING_LINGERS(a, nap(a));
            run_taken(a);
        } else {
            ASLEEP_ENDING_LINGERS(a, sleep_us(sleep_budget_us(a, backoff)));
            if (backoff < FR_BACKOFF_MAX_US)
                backoff *= 2;
        }
    }
    fr_fabric_end_lingers(a->fab);
    fr_fabric_poller_leave(a->fab);
    atomic_store(&a->progress_state, FR_PROGRESS_ENDED);
    return NULL;
}

int fr_progress_start(frpc_agent *a)
{
    fr_cond_init_monotonic(&a->aside_cond);
    pthread_mutex_init(&a->aside_lock, NULL);
    atomic_store(&a->stop, 0);
    atomic_store(&a->progress_state, FR_PROGRESS_POLLING);
    if (fr_standin_start(a) ||
        fr_thread_create(&a->progress_thread, progress_main, a)) {
        atomic_store(&a->stop, 1);
        fr_standin_stop(a);
        fr_standin_free(a);
        pthread_cond_destroy(&a->aside_cond);
        pthread_mutex_destroy(&a->aside_lock);
        return FRPC_ENOMEM;
    }
    a->aside_made = 1;
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
    /* Asleep on the doorbell or the CQ's fd it would finish its nap
     * (FR_IDLE_BLOCK_US): shutdown(GRACEFUL, 1000) with a late peer took
     * 1103 ms on shm. */
    fr_fabric_wake_all(a->fab);
    fr_standin_stop(a);
    /* Its polling ends at once; a pool handler it runs may wait for what
     * the shutdown ends next (a call in flight): not waited for here
     * (fr_progress_join). */
    int st;
    while ((st = atomic_load(&a->progress_state)) == FR_PROGRESS_POLLING)
        sleep_us(FR_BACKOFF_MIN_US);
    a->progress_started = 0;
    a->progress_join_due = 1;
    if (st == FR_PROGRESS_ENDED)
        fr_progress_join(a);
    /* Not the condition yet: a caller that an immediate shutdown found
     * waiting signals it when it stops spinning (fr_progress_free). */
}

void fr_progress_join(frpc_agent *a)
{
    if (!a->progress_join_due)
        return;
    pthread_join(a->progress_thread, NULL);
    a->progress_join_due = 0;
    fr_standin_free(a);
}

/* ---- the stand-in (standin.h) -------------------------------------- */

void fr_progress_stand_in(frpc_agent *a, int (*busy)(void *), void *arg)
{
    uint64_t spin_ns = (uint64_t)a->set.spin_us * 1000;
    uint64_t last = fr_now_ns();

    fr_fabric_poller_enter(a->fab);
    while (busy(arg) && !atomic_load(&a->stop)) {
        uint64_t now;
        int n = poll_once(a, &now);
        if (n > 0) {
            last = now;
            continue;
        }
        /* Standing in as on its own thread: the stand-in napped 1 ms
         * after spin_us in busy mode too. */
        if (busy_goes_on(a, n))
            continue;
        if (n == FRPC_EAGAIN) { /* a caller polls meanwhile */
            ASLEEP(a, sleep_us(FR_BACKOFF_MIN_US));
            continue;
        }
        if (now - last < spin_ns && a->set.progress != FRPC_PROGRESS_BLOCKING)
            continue;
        /* Bounded: the stuck handler's return is seen within it. */
        if (fr_fabric_can_block(a->fab))
            ASLEEP_ENDING_LINGERS(a, fr_fabric_wait(a->fab,
                                                    FR_BACKOFF_MAX_US));
        else
            ASLEEP_ENDING_LINGERS(a, sleep_us(FR_BACKOFF_MAX_US));
    }
    fr_fabric_poller_leave(a->fab);
}

void fr_progress_free(frpc_agent *a)
{
    if (!a->aside_made)
        return;
    a->aside_made = 0;
    pthread_cond_destroy(&a->aside_cond);
    pthread_mutex_destroy(&a->aside_lock);
}

/* ---- waiting threads ------------------------------------------------ */

int fr_progress_begin_wait(frpc_agent *a)
{
    if (fr_fabric_polling_here(a->fab)) {
        if (a->inline_depth >= FRPC_MAX_INLINE_DEPTH)
            return FRPC_EDEADLK;
        a->inline_depth++;
        fr_notify_callback_waits(a, 1);
        return 0;
    }
    if (fr_pool_block(a->pool))
        return FRPC_EDEADLK;
    fr_liveness_report_waits(a, 1);
    fr_notify_callback_waits(a, 1);
    return 0;
}

void fr_progress_end_wait(frpc_agent *a)
{
    fr_liveness_report_waits(a, -1);
    fr_notify_callback_waits(a, -1);
    if (fr_fabric_polling_here(a->fab))
        a->inline_depth--;
    else if (fr_pool_is_worker(a->pool))
        fr_pool_unblock(a->pool);
}

void fr_progress_posting_begin(frpc_agent *a)
{
    caller_starts_spinning(a);
}

void fr_progress_posting_end(frpc_agent *a)
{
    caller_stops_spinning(a, 0);
}

/* What a waiter waits for, and how it sleeps once its spin window ends. */
typedef struct waiter {
    int (*done)(void *arg);
    void (*nap)(frpc_agent *a, struct waiter *w, uint64_t until);
    void *arg;
    uint64_t epoch; /* for nap_any */
} waiter;

/* Polls until w is done (1), until passes (0), or the spin window ends
 * with nothing to do (-1). *now: the clock's last reading, for the
 * caller (no second read). */
static int spin_polling(frpc_agent *a, waiter *w, uint64_t until,
                        uint64_t *now)
{
    uint64_t spin_ns = (uint64_t)a->set.spin_us * 1000;
    /* The window starts at the first poll's time: a clock read (25 ns
     * under kvm-clock) less for a call its first poll completes. */
    if (w->done(w->arg)) {
        *now = fr_now_ns();
        return 1;
    }
    int n = poll_once(a, now);
    uint64_t spin_end = *now + spin_ns, yielded = 0;
    uint64_t yield_ns = spin_yield_ns(a);

    for (;; n = poll_once(a, now)) {
        if (w->done(w->arg))
            return 1;
        if (*now >= until)
            return 0;
        if (n > 0) {
            spin_end = *now + spin_ns;
            continue;
        }
        if (a->set.progress == FRPC_PROGRESS_BUSY) {
            if (n == FRPC_EAGAIN)
                sched_yield();
            continue;
        }
        if (*now < spin_end || transfer_spin(a, spin_end - spin_ns)) {
            if (n == FRPC_EAGAIN ||
                yield_to_woken() | yield_due(yield_ns, *now,
                                             spin_end - spin_ns, &yielded))
                sched_yield();
            continue;
        }
        return -1;
    }
}

/* After a wait that ended (see the design notes). The linger is begun,
 * then aside read (seq_cst): if the progress thread has left aside, it is
 * sure to end lingers before it sleeps, else we see it gone and end ours. */
static void linger(frpc_agent *a, uint64_t now)
{
    if (fr_agent_runs_handlers(a))
        return;
    fr_fabric_linger_begin(a->fab);
    if (!atomic_load(&a->aside))
        fr_fabric_linger_end(a->fab);
    else
        atomic_store_explicit(&a->last_linger, now, memory_order_relaxed);
}

static int spin(frpc_agent *a, waiter *w, uint64_t until)
{
    uint64_t now;
    fr_fabric_poller_enter(a->fab); /* ends our linger, if any */
    int r = spin_polling(a, w, until, &now);
    if (r == 1)
        linger(a, now);
    fr_fabric_poller_leave(a->fab);
    return r;
}

/* Whether a caller whose spin window ran out sleeps on the CQ's fd or the
 * doorbell itself (see the design notes) rather than handing progress to
 * the progress thread. On shm in the adaptive and busy modes the hand-over
 * measured no slower, and in most pairs faster (8 B calls, 64 in flight,
 * 6 interleaved pairs: median 816 k/s against 795 k/s sleeping itself),
 * so it stays; in blocking mode sleeping itself saves a thread hand-off
 * per call (round trip 39 -> 24 us). */
static int sleeps_itself(frpc_agent *a)
{
    return fr_fabric_has_fd(a->fab) ||
           (fr_fabric_can_block(a->fab) &&
            a->set.progress == FRPC_PROGRESS_BLOCKING);
}

/* spinning: the caller counts as spinning already (it posted under
 * fr_progress_posting_begin): its first spin takes that count over. */
static int wait_for(frpc_agent *a, waiter *w, uint64_t until, int spinning)
{
    unsigned backoff = FR_BACKOFF_MIN_US;

    fr_standin_release(a);

    for (;; spinning = 0) {
        if (!spinning)
            caller_starts_spinning(a);
        int r = spin(a, w, until);
        if (r < 0 && sleeps_itself(a) && !fr_fabric_polling_here(a->fab)) {
            /* Sleep on the CQ's fd or our doorbell ourselves, still counted
             * as spinning so that the progress thread stays aside: the
             * message that ends our wait then wakes one thread, this one,
             * instead of the progress thread and then us. A call completed
             * by another thread wakes us through fr_fabric_wake_sleepers. */
            uint64_t now = fr_now_ns(), end = now + FR_CALLER_NAP_NS;
            if (until < end)
                end = until;
            unsigned us = end > now ? (unsigned)((end - now) / 1000) + 1 : 0;
            fr_fabric_wait_for(a->fab, sleep_budget_us(a, us), w->done,
                               w->arg);
            caller_stops_spinning(a, 0);
            if (w->done(w->arg))
                return 1;
            continue;
        }
        caller_stops_spinning(a, r < 0);
        if (r >= 0)
            return r;
        if (fr_fabric_polling_here(a->fab)) {
            /* Nested inside an inline handler: only we can poll. */
            if (fr_fabric_can_block(a->fab))
                fr_fabric_wait(a->fab, FR_BACKOFF_MAX_US);
            else {
                sleep_us(backoff);
                if (backoff < FR_BACKOFF_MAX_US)
                    backoff *= 2;
            }
            continue;
        }
        uint64_t nap = fr_now_ns() + FR_CALLER_NAP_NS;
        w->nap(a, w, nap < until ? nap : until);
        if (w->done(w->arg))
            return 1;
    }
}

static int pending_done(void *arg)
{
    return atomic_load(&((fr_pending *)arg)->done);
}

static void nap_one(frpc_agent *a, waiter *w, uint64_t until)
{
    fr_pending_wait(&a->pend, w->arg, until, 0);
}

static int wait_call(frpc_agent *a, fr_pending *p, uint64_t until,
                     int give_up, int spinning)
{
    waiter w = {.done = pending_done, .nap = nap_one, .arg = p};
    if (wait_for(a, &w, until, spinning))
        return 1;
    return give_up ? fr_pending_wait(&a->pend, p, 0, 1) : 0;
}

int fr_progress_wait_call(frpc_agent *a, fr_pending *p, uint64_t until,
                          int give_up)
{
    return wait_call(a, p, until, give_up, 0);
}

int fr_progress_wait_posted(frpc_agent *a, fr_pending *p, uint64_t until,
                            int give_up)
{
    return wait_call(a, p, until, give_up, 1);
}

/* The multi-future waits sleep until any call completes. */
static void nap_any(frpc_agent *a, waiter *w, uint64_t until)
{
    fr_pending_wait_any(&a->pend, &w->epoch, until);
}

int fr_progress_wait_until(frpc_agent *a, int (*done)(void *), void *arg,
                           uint64_t until)
{
    waiter w = {.done = done, .nap = nap_any, .arg = arg,
                .epoch = atomic_load(&a->pend.epoch)};
    return wait_for(a, &w, until, 0);
}

/* ---- waits outside the nesting guard -------------------------------- */

void fr_progress_poll_or_nap(frpc_agent *a)
{
    if (fr_fabric_progress(a->fab) <= 0) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

int fr_progress_poll_until(frpc_agent *a, int (*done)(void *), void *arg,
                           uint64_t until_ns)
{
    for (;;) {
        if (done(arg))
            return 1;
        if (fr_now_ns() >= until_ns || fr_pending_closed(&a->pend))
            return 0;
        fr_progress_poll_or_nap(a);
    }
}
