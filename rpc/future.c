/*
 * Futures: asynchronous calls.
 *
 * Design notes
 * - A future is a pending entry (pending.c completes it, exactly once)
 *   plus a reference count: one reference for its owner (dropped by
 *   frpc_future_free), one for the pending table (dropped by the entry's
 *   on_done hook, which runs once, after completion), and one while a
 *   callback is scheduled or running. The last reference frees it.
 * - The callback is fired by whichever comes second of "completed" (the
 *   entry's done flag, set before its on_done hook runs) and "callback
 *   registered" (frpc_future_then). No lock: each side publishes its own
 *   fact, then reads the other's, and a compare-and-swap of cb_state from
 *   CB_SET to CB_FIRED picks the one that fires. So the callback runs
 *   exactly once, on the pool when completion comes second, at once on the
 *   registering thread otherwise; the future itself takes no lock.
 * - Cancel and free-while-in-flight are fr_pending_abort: if it wins, the
 *   call completes with FRPC_ECANCELED and a late answer finds no entry.
 * - Lent args (frpc_call_async_lent): the future is done when two facts
 *   are in, the entry's completion and the loan's return (the callee can
 *   no longer read args, or, over shm, the call ended and took them
 *   back: on_done), in either order: gates counts the facts still
 *   awaited and whoever takes it to 0 fires the callback. A future without
 *   a loan has one gate, and its done is the entry's (as before loans).
 *   The loan holds a reference until it is returned, as the fabric calls
 *   back into the future then (at the latest when the agent shuts down).
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "comm/clock.h"
#include "rpc/agent.h"

/* cb_state: NONE -> CLAIMED (one frpc_future_then won, is storing cb)
 * -> SET (cb readable) -> FIRED. */
enum { CB_NONE, CB_CLAIMED, CB_SET, CB_FIRED };

struct frpc_future {
    fr_pending p;
    frpc_agent *agent;
    atomic_int refs;
    atomic_int cb_state;
    frpc_future_fn cb;
    void *cb_user;
    atomic_int gates;      /* see the design notes */
    int lent;              /* args lent: gates started at 2 */
    atomic_int loan_open;  /* 1 until the loan's return is counted */
    fr_fabric_loan loan;
    /* A small reply lands here (pending.h, reply_room): no malloc. */
    _Alignas(max_align_t) unsigned char reply[FR_SMALL_REPLY];
    char name[]; /* for error messages: sized to the name, not zeroed */
};

/* Whether f's reply is in its own room rather than malloc'ed. */
static int reply_inside(const frpc_future *f)
{
    return f->p.res.data == (const void *)f->reply;
}

static void unref(frpc_future *f)
{
    if (atomic_fetch_sub(&f->refs, 1) != 1)
        return;
    if (reply_inside(f))
        f->p.res.data = NULL;
    frpc_result_clear(&f->p.res);
    fr_pending_release(&f->p);
    free(f);
}

static void run_callback(void *arg)
{
    frpc_future *f = arg;
    fr_taken_ns = 0; /* user code: a poll's time is stale after it */
    /* Also on the caller's own thread (frpc_future_then on a done future,
     * cancel or free with the pool full): frpc_shutdown from the callback
     * would free the agent the caller is in. */
    fr_agent_mark_inside(f->agent);
    f->cb(f, f->cb_user);
    fr_agent_unmark_inside();
    unref(f);
}

static void fire(frpc_future *f)
{
    atomic_fetch_add(&f->refs, 1); /* the callback's reference */
    if (fr_pool_submit(f->agent->pool, run_callback, f) < 0)
        run_callback(f); /* the pool is draining: run it here */
}

/* Whether this thread is the one to fire: moves cb_state SET -> FIRED. */
static int claim_firing(frpc_future *f)
{
    int set = CB_SET;
    return atomic_compare_exchange_strong(&f->cb_state, &set, CB_FIRED);
}

/* Whether f is done: for lent args, once both gates passed. */
static int fut_done(const frpc_future *f)
{
    return f->lent ? atomic_load(&f->gates) == 0 : atomic_load(&f->p.done);
}

/* One of f's facts is in; the last one fires the callback, if any. 1 if
 * it was the last (f is done now). */
static int gate_pass(frpc_future *f)
{
    /* done is already visible: a frpc_future_then still storing its
     * callback reads it after publishing CB_SET and fires itself. */
    if (atomic_fetch_sub(&f->gates, 1) != 1)
        return 0;
    if (claim_firing(f))
        fire(f);
    return 1;
}

/* The pending entry's on_done hook: runs once, after completion. */
static void on_done(fr_pending *p)
{
    frpc_future *f = (frpc_future *)p;
    /* Lent args of a call that ended without its answer (its timeout, a
     * cancel, a free, the agent's end): where the loan can be taken back
     * at once (shm: the callee throws away a copy it finishes after
     * that), it is, and the future is done now rather than when a
     * stopped callee next polls. Elsewhere the loan's return waits. */
    if (f->lent && p->res.status != 0 && atomic_load(&f->loan_open))
        fr_fabric_revoke_loan(f->agent->fab, &f->loan);
    /* A lent future is done only now, after the table's epoch moved for
     * the entry: move it again for the waiters that looked in between. */
    if (gate_pass(f) && f->lent)
        fr_pending_kick(&f->agent->pend);
    unref(f); /* the table's reference */
}

/* The loan's return: the fabric's returned callback, which runs once per
 * loan (comm/fabric.h); the exchange only guards against a second. */
static void loan_back(void *arg)
{
    frpc_future *f = arg;
    if (!atomic_exchange(&f->loan_open, 0))
        return;
    gate_pass(f);
    fr_pending_kick(&f->agent->pend); /* waiters on done */
    unref(f); /* the loan's reference */
}

int fr_future_open(frpc_agent *a, const char *name, uint32_t dst,
                   int timeout_ms, fr_fn_stat *fstat, frpc_future **out)
{
    size_t nlen = strlen(name) + 1;
    /* Every field is set here or by fr_pending_add_with_room: no calloc. */
    frpc_future *f = malloc(offsetof(frpc_future, name) + nlen);
    int rc;

    if (!f)
        return FRPC_ENOMEM;
    f->agent = a;
    atomic_init(&f->refs, 2);
    atomic_init(&f->cb_state, CB_NONE);
    f->cb = NULL;
    f->cb_user = NULL;
    atomic_init(&f->gates, 1);
    f->lent = 0;
    atomic_init(&f->loan_open, 0);
    memcpy(f->name, name, nlen);
    timeout_ms = fr_agent_timeout(a, timeout_ms);
    rc = fr_pending_add_with_room(&a->pend, &f->p, dst, f->name, timeout_ms,
                                  fr_deadline_ms(timeout_ms), on_done,
                                  f->reply, sizeof(f->reply), fstat);
    if (rc) {
        free(f);
        return rc;
    }
    *out = f;
    return 0;
}

fr_pending *fr_future_entry(frpc_future *f)
{
    return &f->p;
}

void fr_future_drop_unsent(frpc_future *f)
{
    unref(f);
}

/* Lends args to the call of f: the loan's reference and second gate
 * first, as the fabric may return the loan before the send returns. */
static void lend(frpc_future *f)
{
    f->lent = 1;
    atomic_store(&f->gates, 2);
    atomic_fetch_add(&f->refs, 1);
    atomic_store(&f->loan_open, 1);
    atomic_init(&f->loan.out, 0);
    f->loan.returned = loan_back;
    f->loan.ctx = f;
}

/* frpc_call_async and frpc_call_async_lent (lend_ok: args this long are
 * lent). */
static int start_async(frpc_agent *a, int dst, const char *name,
                       const void *args, size_t len, int timeout_ms,
                       int lend_ok, frpc_future **out)
{
    frpc_future *f;
    char *why = NULL;
    int rc;

    if (!out)
        return FRPC_EINVAL;
    *out = NULL;
    if ((rc = fr_call_check(a, dst, name, args, len, &why))) {
        free(why);
        return rc;
    }
    if ((rc = fr_future_open(a, name, (uint32_t)dst, timeout_ms,
                             fr_agent_fn_stat(a, name), &f)))
        return rc;
    if (lend_ok && len >= a->set.zerocopy_min)
        lend(f);
    rc = fr_call_send(a, &f->p, name, args, len, f->lent ? &f->loan : NULL);
    if (rc) {
        /* The entry completed with rc and its hook dropped the table's
         * reference; the loan's goes when the fabric returns it (perhaps
         * on another thread, a moment later: comm/fabric.h). The caller
         * gets no future. */
        unref(f);
        return rc;
    }
    *out = f;
    return 0;
}

/* start_async with the thread counted inside a (see fr_agent_enter). */
static int start_async_entered(frpc_agent *a, int dst, const char *name,
                               const void *args, size_t len, int timeout_ms,
                               int lend_ok, frpc_future **out)
{
    if (!a)
        return start_async(a, dst, name, args, len, timeout_ms, lend_ok,
                           out);
    fr_agent_enter(a);
    int rc = start_async(a, dst, name, args, len, timeout_ms, lend_ok, out);
    fr_agent_leave(a);
    return rc;
}

int frpc_call_async(frpc_agent *a, int dst, const char *name,
                    const void *args, size_t len, int timeout_ms,
                    frpc_future **out)
{
    return start_async_entered(a, dst, name, args, len, timeout_ms, 0, out);
}

int frpc_call_async_lent(frpc_agent *a, int dst, const char *name,
                         const void *args, size_t len, int timeout_ms,
                         frpc_future **out)
{
    return start_async_entered(a, dst, name, args, len, timeout_ms, 1, out);
}

int frpc_future_test(const frpc_future *f)
{
    return f && fut_done(f);
}

static int status_of(const frpc_future *f)
{
    return fut_done(f) ? f->p.res.status : FRPC_EINPROGRESS;
}

static int lent_done(void *f)
{
    return fut_done(f);
}

int frpc_future_wait(frpc_future *f, int timeout_ms)
{
    if (!f)
        return FRPC_EINVAL;
    if (fut_done(f))
        return f->p.res.status;
    frpc_agent *a = f->agent;
    fr_agent_enter(a);
    int rc = fr_progress_begin_wait(a);
    if (rc) {
        fr_agent_leave(a);
        return rc;
    }
    uint64_t until = fr_agent_deadline(a, timeout_ms);
    if (f->lent) /* woken by the loan's return too (loan_back's kick) */
        fr_progress_wait_until(a, lent_done, f, until);
    else
        fr_progress_wait_call(a, &f->p, until, 0);
    fr_progress_end_wait(a);
    fr_agent_leave(a);
    return fut_done(f) ? f->p.res.status : FRPC_ETIMEDOUT;
}

const void *frpc_future_data(const frpc_future *f, size_t *len)
{
    int ok = f && fut_done(f) && f->p.res.status == 0;
    if (len)
        *len = ok ? f->p.res.len : 0;
    return ok ? f->p.res.data : NULL;
}

int frpc_future_error(const frpc_future *f, int *remote_code,
                      const char **message)
{
    if (!f)
        return FRPC_EINVAL;
    int st = status_of(f);
    if (remote_code)
        *remote_code = st == FRPC_EREMOTE ? f->p.res.remote_code : 0;
    if (message)
        *message = st != FRPC_EINPROGRESS ? f->p.res.error : NULL;
    return st;
}

int frpc_future_take(frpc_future *f, frpc_result *res)
{
    if (!f || !res)
        return FRPC_EINVAL;
    int st = status_of(f);
    if (st == FRPC_EINPROGRESS)
        return st;
    void *data = f->p.res.data;
    if (reply_inside(f)) { /* the result outlives f: give it a copy */
        if (!(data = malloc(f->p.res.len)))
            return FRPC_ENOMEM;
        memcpy(data, f->reply, f->p.res.len);
    }
    *res = f->p.res;
    res->data = data;
    f->p.res.data = NULL;
    f->p.res.len = 0;
    f->p.res.error = NULL;
    return st;
}

int frpc_future_then(frpc_future *f, frpc_future_fn fn, void *user)
{
    int none = CB_NONE;
    if (!f || !fn)
        return FRPC_EINVAL;
    if (!atomic_compare_exchange_strong(&f->cb_state, &none, CB_CLAIMED))
        return FRPC_EEXIST;
    f->cb = fn;
    f->cb_user = user;
    /* Ours: once CB_SET is out, on_done may run the callback on the pool,
     * and the callback may free the future while we still look at it. */
    atomic_fetch_add(&f->refs, 1);
    atomic_store(&f->cb_state, CB_SET);
    /* Completion may have come first (its on_done found no callback):
     * then whichever of us and on_done swaps SET -> FIRED runs it. */
    if (fut_done(f) && claim_firing(f))
        run_callback(f); /* our reference becomes the callback's */
    else
        unref(f);
    return 0;
}

int frpc_future_cancel(frpc_future *f)
{
    if (!f)
        return FRPC_EINVAL;
    /* Completed: answered without the agent, which may be gone (futures
     * outlive frpc_shutdown, and all are complete by then). */
    if (atomic_load(&f->p.done))
        return 1;
    /* Losing the race with completion is not the caller's error. */
    return fr_pending_abort(&f->agent->pend, &f->p, FRPC_ECANCELED, NULL)
               ? 0
               : 1;
}

void frpc_future_free(frpc_future *f)
{
    if (!f)
        return;
    if (!atomic_load(&f->p.done))
        frpc_future_cancel(f);
    unref(f);
}

/* ---- waiting for several -------------------------------------------- */

/* A multi-future wait's state. Its predicate runs on every poll of the
 * wait (twice), so it must not cost a look at every future each time: a
 * window of 256 made frpc_wait_any's scans most of a call's cost. */
typedef struct many {
    frpc_future *const *f;
    size_t n;
    size_t index; /* wait_any: the first done */
    size_t from;  /* wait_all: f[0..from) were seen done (done stays) */
    /* wait_any, once a look found none done and all f share one agent:
     * that agent's table and its epoch before the look. Completions move
     * the epoch after the future is done (future.c, pending.c), so while
     * it has not moved none of f can be done. */
    fr_pending_table *pend;
    uint64_t seen;
} many;

static int all_done(void *arg)
{
    many *m = arg;
    for (; m->from < m->n; m->from++)
        if (m->f[m->from] && !fut_done(m->f[m->from]))
            return 0;
    return 1;
}

static int any_done(void *arg)
{
    many *m = arg;
    if (m->pend && atomic_load(&m->pend->epoch) == m->seen)
        return 0;
    frpc_agent *one = NULL;
    uint64_t epoch = 0;
    int same = 1;
    for (size_t i = 0; i < m->n; i++) {
        frpc_future *f = m->f[i];
        if (!f)
            continue;
        if (!one) {
            /* A done one's agent may be gone (futures outlive it); one in
             * flight has its agent, whose epoch is read before the look
             * below that counts. */
            if (fut_done(f)) {
                m->index = i;
                return 1;
            }
            one = f->agent;
            epoch = atomic_load(&one->pend.epoch);
        } else if (f->agent != one) {
            same = 0;
        }
        if (fut_done(f)) {
            m->index = i;
            return 1;
        }
    }
    if (one && same) {
        m->pend = &one->pend;
        m->seen = epoch;
    }
    return 0;
}

/* The agent of the first future of f[from..n) still in flight, or NULL.
 * Not of a done one: its agent may be gone (futures outlive
 * frpc_shutdown). */
static frpc_agent *agent_of(frpc_future *const *f, size_t from, size_t n)
{
    for (size_t i = from; i < n; i++)
        if (f[i] && !fut_done(f[i]))
            return f[i]->agent;
    return NULL;
}

static int wait_many(frpc_future *const *futures, size_t n, int timeout_ms,
                     int (*done)(void *), many *m)
{
    frpc_agent *a;
    if (done(m))
        return 0;
    /* (wait_all's look left m->from at its first future in flight) */
    if (!(a = agent_of(futures, m->from, n)))
        return done(m) ? 0 : FRPC_EINVAL; /* all done since, or none */
    fr_agent_enter(a);
    int rc = fr_progress_begin_wait(a);
    if (rc) {
        fr_agent_leave(a);
        return rc;
    }
    int ok = fr_progress_wait_until(a, done, m,
                                    fr_agent_deadline(a, timeout_ms));
    fr_progress_end_wait(a);
    fr_agent_leave(a);
    return ok ? 0 : FRPC_ETIMEDOUT;
}

int frpc_wait_all(frpc_future *const *futures, size_t n, int timeout_ms)
{
    many m = {.f = futures, .n = n};
    if (!futures && n)
        return FRPC_EINVAL;
    return wait_many(futures, n, timeout_ms, all_done, &m);
}

int frpc_wait_any(frpc_future *const *futures, size_t n, int timeout_ms,
                  size_t *index)
{
    many m = {.f = futures, .n = n};
    if (!index || (!futures && n))
        return FRPC_EINVAL;
    int rc = wait_many(futures, n, timeout_ms, any_done, &m);
    if (rc == 0)
        *index = m.index;
    return rc;
}
