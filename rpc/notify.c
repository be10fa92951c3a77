/*
 * Notifications (rpc/fabrpc.h): small messages a rank takes when it is
 * ready, alone (frpc_notify) or after a batch's data (rpc/transfer.c).
 *
 * Design notes
 * - A notification is a request to fabrpc's own inline function
 *   FR_NOTIFY_NAME, answered once the target holds it. So it has what a
 *   call has for free: the sender's timeout, EPEERLOST, the pending table,
 *   futures; and the sender learns of a full queue (FRPC_EAGAIN) instead
 *   of a silent drop.
 * - Order per source: the function is inline, so it runs on the polling
 *   thread as frames arrive, and one source's frames arrive in the order
 *   it sent them (every provider here is reliable and ordered per peer
 *   for messages; a notification is always eager, never a rendezvous).
 * - The queue is bounded (config.notify_queue) so that a rank that never takes
 *   them cannot be filled up by its peers.
 * - Once shutdown begins, a notification with no callback to take it is
 *   refused, and a wait that finds the queue empty ends FRPC_ESHUTDOWN;
 *   both look at shutting_down under notify_lock, so that end is final
 *   and no sender is told 0 for one nobody can take any more.
 * - A taker sleeps as multi-future waits do: a queued notification bumps
 *   the pending table's epoch (fr_pending_kick).
 * - frpc_on_notify promises the old callback is done when it returns, so
 *   a run is counted under notify_lock; the change bumps a generation,
 *   and the runs begun before it (notify_stale) signal as they end.
 *   While a setter waits, a run nested in such a run (its wait polled)
 *   runs the old callback too and counts as stale: the setter may still
 *   give up (FRPC_EDEADLK), and then the new callback must never have
 *   run (pick_callback).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/clock.h"
#include "comm/fault.h"
#include "rpc/agent.h"

typedef struct fr_notice {
    struct fr_notice *next;
    int src;
    size_t len;
    unsigned char data[];
} fr_notice;

/* The callback runs this thread is inside, innermost first: a callback
 * may nest a wait (as an inline handler may), and the poll inside it run
 * the callback again, so one thread can hold several runs of one agent. */
typedef struct cb_run {
    const frpc_agent *a;
    struct cb_run *outer;
    uint64_t gen;         /* notify_gen when it began */
    frpc_notify_fn fn;    /* what it runs, and with which user */
    void *user;
} cb_run;
static _Thread_local cb_run *runs_here FR_TLS_FAST;

static unsigned runs_on_this_thread(const frpc_agent *a)
{
    unsigned n = 0;
    for (const cb_run *r = runs_here; r; r = r->outer)
        n += r->a == a;
    return n;
}

void fr_notify_callback_waits(frpc_agent *a, int delta)
{
    if (!runs_here || !runs_on_this_thread(a))
        return;
    pthread_mutex_lock(&a->notify_lock);
    a->notify_waits += (unsigned)delta;
    pthread_cond_broadcast(&a->notify_done); /* a setter may give up */
    pthread_mutex_unlock(&a->notify_lock);
}

/* Under notify_lock: this thread's innermost run of a's callback that
 * began before the last frpc_on_notify, or NULL. */
static const cb_run *stale_run_here(const frpc_agent *a)
{
    for (const cb_run *r = runs_here; r; r = r->outer)
        if (r->a == a)
            return r->gen != a->notify_gen ? r : NULL;
    return NULL;
}

/* Under notify_lock: which callback a notification taken now goes to
 * (0: none, queue it). Inside a run that began before the last change
 * (its wait polled) while a setter still waits, the one that run runs:
 * the setter may yet give up (FRPC_EDEADLK), and then the new one must
 * never have run. Such a nested run ends before the one it is inside,
 * which the setter waits for anyway. Once no setter waits, the callback
 * set: a setter that returned never sees its old callback called again
 * (one called from inside it, not waiting for its own run, included). */
static int pick_callback(const frpc_agent *a, cb_run *run)
{
    const cb_run *stale = a->notify_setters ? stale_run_here(a) : NULL;
    if (stale) {
        run->gen = stale->gen;
        run->fn = stale->fn;
        run->user = stale->user;
    } else {
        run->gen = a->notify_gen;
        run->fn = a->notify_fn;
        run->user = a->notify_user;
    }
    return run->fn != NULL;
}

/* Runs run's callback, entered and left with notify_lock held; counts
 * the run so that frpc_on_notify can wait for it to end (a stale one as
 * one more of the runs it waits for). */
static void run_callback(frpc_agent *a, cb_run *run, int src,
                         const void *msg, size_t len)
{
    uint64_t gen = run->gen;
    run->a = a;
    run->outer = runs_here;
    a->notify_running++;
    if (gen != a->notify_gen)
        a->notify_stale++;
    pthread_mutex_unlock(&a->notify_lock);
    atomic_fetch_add(&a->notes_received, 1);
    runs_here = run;
    run->fn(a, src, msg, len, run->user);
    runs_here = run->outer;
    pthread_mutex_lock(&a->notify_lock);
    a->notify_running--;
    if (gen != a->notify_gen) {
        a->notify_stale--;
        pthread_cond_broadcast(&a->notify_done);
    }
    pthread_mutex_unlock(&a->notify_lock);
}

/* Takes one notification, on the polling thread (FRPC_INLINE). */
static void take(frpc_request *req, void *user)
{
    frpc_agent *a = user;
    size_t len;
    const void *msg = frpc_request_args(req, &len);
    int src = frpc_request_source(req);
    char why[160];

    if (len > FRPC_NOTIFY_MAX) {
        snprintf(why, sizeof(why), "notification of %zu bytes: at most %d",
                 len, FRPC_NOTIFY_MAX);
        fr_request_refuse(req, FRPC_ETOOBIG, why);
        return;
    }
    pthread_mutex_lock(&a->notify_lock);
    cb_run run;
    if (pick_callback(a, &run)) {
        run_callback(a, &run, src, msg, len);
        frpc_respond(req, NULL, 0);
        return;
    }
    if (atomic_load(&a->shutting_down)) {
        /* Nobody may take it any more: a waiter that found the queue
         * empty once shutdown began has been told so (notify_wait), and
         * what is queued at the end is dropped. Its sender hears it, as
         * from a rank that takes no more requests: FRPC_EPEERLOST
         * ("Lost peers": FRPC_ESHUTDOWN is the caller's own shutdown). */
        pthread_mutex_unlock(&a->notify_lock);
        atomic_fetch_add(&a->notes_refused, 1);
        snprintf(why, sizeof(why), "rank %d is shutting down: it takes no "
                 "more notifications", a->set.rank);
        fr_request_refuse(req, src == a->set.rank ? FRPC_ESHUTDOWN
                                                  : FRPC_EPEERLOST, why);
        return;
    }
    fr_notice *n = NULL;
    int full = atomic_load(&a->notices) >= a->set.notify_queue;
    if (!full && !fr_fault_hit(FR_FAULT_NOTIFY_NOMEM) &&
        (n = malloc(sizeof(*n) + len))) {
        n->next = NULL;
        n->src = src;
        n->len = len;
        if (len)
            memcpy(n->data, msg, len);
        if (a->notice_tail)
            a->notice_tail->next = n;
        else
            a->notice_head = n;
        a->notice_tail = n;
        atomic_fetch_add(&a->notices, 1);
    }
    pthread_mutex_unlock(&a->notify_lock);
    if (!n) {
        atomic_fetch_add(&a->notes_refused, 1);
        if (full)
            snprintf(why, sizeof(why), "rank %d holds %u notifications not "
                     "yet taken (frpc_notify_wait); try again later",
                     a->set.rank, a->set.notify_queue);
        else
            snprintf(why, sizeof(why), "rank %d had no memory to queue a "
                     "notification of %zu bytes; try again later",
                     a->set.rank, len);
        fr_request_refuse(req, FRPC_EAGAIN, why);
        return;
    }
    atomic_fetch_add(&a->notes_received, 1);
    fr_pending_kick(&a->pend);
    frpc_respond(req, NULL, 0);
}

int fr_notify_register(frpc_agent *a)
{
    return fr_registry_add(&a->reg, fr_func_id(FR_NOTIFY_NAME),
                           FR_NOTIFY_NAME, take, a, FRPC_INLINE);
}

void fr_notify_free_all(frpc_agent *a)
{
    fr_notice *n = a->notice_head;
    while (n) {
        fr_notice *next = n->next;
        free(n);
        n = next;
    }
    a->notice_head = a->notice_tail = NULL;
    atomic_store(&a->notices, 0);
}

static int check_message(const void *msg, size_t len)
{
    return (len && !msg) || len > FRPC_NOTIFY_MAX ? FRPC_EINVAL : 0;
}

int frpc_notify(frpc_agent *a, int dst, const void *msg, size_t len,
                int timeout_ms)
{
    if (!a || check_message(msg, len))
        return FRPC_EINVAL;
    frpc_result res;
    fr_agent_enter(a);
    int was = fr_call_own_names(1);
    int rc = frpc_call(a, dst, FR_NOTIFY_NAME, msg, len, timeout_ms, &res);
    fr_call_own_names(was);
    if (rc == 0)
        atomic_fetch_add(&a->notes_sent, 1);
    fr_agent_leave(a);
    frpc_result_clear(&res);
    return rc;
}

void fr_notify_send_for(frpc_agent *a, uint32_t dst, uint64_t id,
                        uint64_t deadline, const void *msg, size_t len)
{
    /* Its answer completes the entry; counted as sent when it is sent. */
    if (fr_call_send_id(a, id, dst, FR_NOTIFY_NAME, deadline, msg, len) == 0)
        atomic_fetch_add(&a->notes_sent, 1);
}

static int queued(void *arg)
{
    frpc_agent *a = arg;
    return atomic_load(&a->shutting_down) || atomic_load(&a->notices) > 0;
}

/* Under notify_lock: takes the oldest into the caller's buffer. */
static int pop_locked(frpc_agent *a, int *src, void *buf, size_t cap,
                      size_t *len)
{
    fr_notice *n = a->notice_head;
    *len = n->len;
    if (n->len > cap)
        return FRPC_ETOOBIG;
    if (src)
        *src = n->src;
    if (n->len)
        memcpy(buf, n->data, n->len);
    a->notice_head = n->next;
    if (!a->notice_head)
        a->notice_tail = NULL;
    atomic_fetch_sub(&a->notices, 1);
    free(n);
    return 0;
}

static int notify_wait(frpc_agent *a, int *src, void *buf, size_t cap,
                       size_t *len, int timeout_ms);

int frpc_notify_wait(frpc_agent *a, int *src, void *buf, size_t cap,
                     size_t *len, int timeout_ms)
{
    if (!a || !len || (cap && !buf))
        return FRPC_EINVAL;
    fr_agent_enter(a);
    int rc = notify_wait(a, src, buf, cap, len, timeout_ms);
    fr_agent_leave(a);
    return rc;
}

static int notify_wait(frpc_agent *a, int *src, void *buf, size_t cap,
                       size_t *len, int timeout_ms)
{
    uint64_t deadline = fr_agent_deadline(a, timeout_ms);
    int waiting = 0, rc;
    for (;;) {
        /* Both under the lock, as take() reads shutting_down: once a
         * wait here finds none queued after shutdown began, none ever
         * will be, so FRPC_ESHUTDOWN is final. */
        pthread_mutex_lock(&a->notify_lock);
        rc = a->notice_head ? pop_locked(a, src, buf, cap, len)
             : atomic_load(&a->shutting_down) ? FRPC_ESHUTDOWN : 1;
        pthread_mutex_unlock(&a->notify_lock);
        if (rc <= 0)
            break;
        if (fr_now_ns() >= deadline) {
            rc = FRPC_ETIMEDOUT;
            break;
        }
        if (!waiting) {
            if ((rc = fr_progress_begin_wait(a)))
                return rc;
            waiting = 1;
        }
        /* Another taker may get there first: then look again. */
        fr_progress_wait_until(a, queued, a, deadline);
    }
    if (waiting)
        fr_progress_end_wait(a);
    return rc;
}

int frpc_on_notify(frpc_agent *a, frpc_notify_fn fn, void *user)
{
    if (!a)
        return FRPC_EINVAL;
    int rc = 0;
    pthread_mutex_lock(&a->notify_lock);
    frpc_notify_fn old_fn = a->notify_fn;
    void *old_user = a->notify_user;
    unsigned old_stale = a->notify_stale;
    a->notify_fn = fn;
    a->notify_user = fn ? user : NULL;
    /* Every run now going began with the old callback: wait for them,
     * but for this thread's own (called from inside the callback, maybe
     * nested in another of its runs): those cannot end before this does. */
    uint64_t gen = ++a->notify_gen;
    a->notify_stale = a->notify_running;
    unsigned mine = runs_on_this_thread(a);
    a->notify_setters++;
    while (a->notify_stale > mine) {
        /* A run waiting in a call may wait for this very handler (it
         * called this rank): give up, and put the old callback back
         * unless another thread has set one since. */
        if (a->notify_waits > 0 && fr_agent_runs_handlers(a)) {
            if (a->notify_gen == gen) {
                a->notify_fn = old_fn;
                a->notify_user = old_user;
                a->notify_stale = old_stale;
                a->notify_gen--;
            }
            rc = FRPC_EDEADLK;
            break;
        }
        pthread_cond_wait(&a->notify_done, &a->notify_lock);
    }
    a->notify_setters--;
    pthread_mutex_unlock(&a->notify_lock);
    if (rc)
        fprintf(stderr, "fabrpc: rank %d: frpc_on_notify from a handler or "
                "callback while a notification callback waits in a call: "
                "FRPC_EDEADLK (the callback may wait for this very "
                "handler; set it from another thread)\n", a->set.rank);
    return rc;
}
