/*
 * The pending table. See pending.h for the invariant and for why adding
 * takes no lock: an entry is completed only by the thread that removes
 * it, under t->lock; its waiter is signalled under the same lock, and
 * done is set after every other touch of the entry, so a waiter that sees
 * done (with or without the lock) may free the entry at once. on_done
 * hooks run after the lock is dropped; an entry with a hook is kept alive
 * by its owner until the hook has run.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/clock.h"
#include "comm/threads.h"
#include "rpc/fnstats.h"
#include "rpc/pending.h"

#define FR_PENDING_BUCKETS 4096

int fr_pending_init(fr_pending_table *t)
{
    memset(t, 0, sizeof(*t));
    t->nbuckets = FR_PENDING_BUCKETS;
    t->bucket = calloc(t->nbuckets, sizeof(*t->bucket));
    if (!t->bucket)
        return FRPC_ENOMEM;
    pthread_mutex_init(&t->lock, NULL);
    fr_cond_init_monotonic(&t->any_cond);
    atomic_init(&t->next_deadline, UINT64_MAX);
    atomic_init(&t->keeper_wakes_at, 0);
    atomic_init(&t->next_id, 1);
    atomic_init(&t->incoming, NULL);
    atomic_init(&t->heap_room, 0);
    return 0;
}

void fr_pending_destroy(fr_pending_table *t)
{
    if (!t->bucket)
        return;
    free(t->bucket);
    free(t->heap);
    t->bucket = NULL;
    pthread_cond_destroy(&t->any_cond);
    pthread_mutex_destroy(&t->lock);
}

/* ---- the deadline heap (all under t->lock) --------------------------- */

static void heap_set(fr_pending_table *t, size_t i, fr_pending *p)
{
    t->heap[i] = p;
    p->heap_idx = i;
}

static void heap_up(fr_pending_table *t, size_t i)
{
    fr_pending *p = t->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (t->heap[parent]->deadline <= p->deadline)
            break;
        heap_set(t, i, t->heap[parent]);
        i = parent;
    }
    heap_set(t, i, p);
}

static void heap_down(fr_pending_table *t, size_t i)
{
    fr_pending *p = t->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= t->heap_len)
            break;
        if (c + 1 < t->heap_len &&
            t->heap[c + 1]->deadline < t->heap[c]->deadline)
            c++;
        if (t->heap[c]->deadline >= p->deadline)
            break;
        heap_set(t, i, t->heap[c]);
        i = c;
    }
    heap_set(t, i, p);
}

/* Moves every entry added with a deadline into the heap; room for them
 * was reserved by their adders (reserve_heap). */
static void drain_incoming_locked(fr_pending_table *t)
{
    fr_pending *p = atomic_exchange(&t->incoming, NULL);
    while (p) {
        fr_pending *next = p->in_next;
        heap_set(t, t->heap_len++, p);
        heap_up(t, p->heap_idx);
        p = next;
    }
}

/* Publishes the heap's top. The look at incoming after the store is what
 * keeps an adder's deadline from being overwritten: an adder pushes, then
 * lowers next_deadline, so it either lowers after this store or was
 * pushed before the look, and then is drained and published here. */
static void publish_next_deadline_locked(fr_pending_table *t)
{
    for (;;) {
        atomic_store(&t->next_deadline,
                     t->heap_len ? t->heap[0]->deadline : UINT64_MAX);
        if (!atomic_load(&t->incoming))
            return;
        drain_incoming_locked(t);
    }
}

static void heap_remove(fr_pending_table *t, fr_pending *p)
{
    size_t i = p->heap_idx;
    if (i == SIZE_MAX)
        return;
    p->heap_idx = SIZE_MAX;
    fr_pending *last = t->heap[--t->heap_len];
    if (i < t->heap_len) {
        heap_set(t, i, last);
        heap_up(t, i);
        heap_down(t, last->heap_idx);
    }
    publish_next_deadline_locked(t);
}

/* Makes the heap hold at least need entries. An adder counts itself in
 * inflight first and, if it has a deadline, checks the heap has room for
 * that many: so every entry that got past the check has its place, and
 * moving it into the heap later (under the lock, by another thread)
 * cannot fail. */
static int reserve_heap(fr_pending_table *t, size_t need)
{
    if (need <= atomic_load(&t->heap_room))
        return 0;
    int rc = 0;
    pthread_mutex_lock(&t->lock);
    if (t->heap_cap < need) {
        size_t cap = t->heap_cap ? t->heap_cap * 2 : 256;
        if (cap < need)
            cap = need;
        fr_pending **h = realloc(t->heap, cap * sizeof(*h));
        if (h) {
            t->heap = h;
            t->heap_cap = cap;
            atomic_store(&t->heap_room, cap);
        } else {
            rc = FRPC_ENOMEM;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

static void lower_next_deadline(fr_pending_table *t, uint64_t deadline)
{
    uint64_t cur = atomic_load(&t->next_deadline);
    while (deadline < cur &&
           !atomic_compare_exchange_weak(&t->next_deadline, &cur, deadline))
        ;
    /* After the store (both sequentially consistent, against the
     * keeper's publish then look in fr_pending_nap_cut): the keeper sees
     * the new deadline before it sleeps, or we see its plan and wake it. */
    if (deadline < cur && deadline < atomic_load(&t->keeper_wakes_at) &&
        t->wake_keeper)
        t->wake_keeper(t->wake_ctx);
}

uint64_t fr_pending_nap_plan(fr_pending_table *t, uint64_t now,
                             uint64_t max_ns)
{
    uint64_t next = atomic_load(&t->next_deadline);
    uint64_t at = next < now + max_ns ? next : now + max_ns;
    atomic_store(&t->keeper_wakes_at, at);
    return at;
}

int fr_pending_nap_cut(void *table)
{
    fr_pending_table *t = table;
    return atomic_load(&t->next_deadline) < atomic_load(&t->keeper_wakes_at);
}

void fr_pending_nap_end(fr_pending_table *t)
{
    atomic_store(&t->keeper_wakes_at, 0);
}

/* ---- table ----------------------------------------------------------- */

static _Atomic(fr_pending *) *slot_of(fr_pending_table *t, uint64_t id)
{
    return &t->bucket[id & (t->nbuckets - 1)];
}

/* Pushes p on its id's chain: a compare-and-swap on the head, with or
 * without the lock (adders push without it). */
static void push_on_chain(fr_pending_table *t, fr_pending *p)
{
    _Atomic(fr_pending *) *head = slot_of(t, p->id);
    fr_pending *h = atomic_load_explicit(head, memory_order_relaxed);
    /* Sequentially consistent on success: an adder's look at closed
     * after it is ordered after the push (see insert). */
    do
        p->next = h;
    while (!atomic_compare_exchange_weak_explicit(
        head, &h, p, memory_order_seq_cst, memory_order_relaxed));
}

/* Unlinks p from its chain. Adders may push on the head meanwhile: the
 * head moves only by compare-and-swap, and links past it only under the
 * lock. */
static int unlink_locked(fr_pending_table *t, fr_pending *p)
{
    _Atomic(fr_pending *) *head = slot_of(t, p->id);
    fr_pending *h = atomic_load_explicit(head, memory_order_acquire);
    if (h == p && atomic_compare_exchange_strong(head, &h, p->next))
        return 1;
    for (fr_pending *c = h; c; c = c->next) {
        if (c->next == p) {
            c->next = p->next;
            return 1;
        }
    }
    return 0;
}

/* Unlinks p (found by its id) from the chain and the heap. 1 if it was
 * there. */
static int remove_locked(fr_pending_table *t, fr_pending *p)
{
    if (!unlink_locked(t, p))
        return 0;
    p->next = NULL;
    /* An entry is on incoming before it is on its chain: drain, so that
     * an entry with a deadline is in the heap now. */
    if (p->deadline != UINT64_MAX && p->heap_idx == SIZE_MAX &&
        !p->self_timed)
        drain_incoming_locked(t);
    heap_remove(t, p);
    atomic_fetch_sub(&t->inflight, 1);
    return 1;
}

static fr_pending *find_locked(fr_pending_table *t, uint64_t id)
{
    fr_pending *c = atomic_load_explicit(slot_of(t, id), memory_order_acquire);
    for (; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

uint64_t fr_pending_deadline_of(fr_pending_table *t, uint64_t id,
                                uint32_t dst)
{
    pthread_mutex_lock(&t->lock);
    fr_pending *p = find_locked(t, id);
    uint64_t d = p && p->dst == dst && !atomic_load(&p->done) ? p->deadline
                                                             : 0;
    pthread_mutex_unlock(&t->lock);
    return d;
}

/* The message the caller reads for a local error (not 0 or EREMOTE, whose
 * text stays as it came): names the call. Runs once, before done is set. */
static void explain(fr_pending *p)
{
    char buf[600];
    const char *name = p->fname ? p->fname : "?";
    char *old = p->res.error;
    switch (p->res.status) {
    case FRPC_ENOFUNC:
        snprintf(buf, sizeof(buf), "no function '%s' on rank %u", name,
                 p->dst);
        break;
    case FRPC_ETIMEDOUT:
        /* With a text, the transport gave up before the caller's time
         * ran out: say why, not the caller's timeout. */
        if (old)
            snprintf(buf, sizeof(buf), "call to '%s' on rank %u timed out: "
                     "%s", name, p->dst, old);
        else
            snprintf(buf, sizeof(buf), "call to '%s' on rank %u timed out "
                     "after %d ms", name, p->dst, p->timeout_ms);
        break;
    case FRPC_ECANCELED:
        snprintf(buf, sizeof(buf), "call to '%s' on rank %u was cancelled",
                 name, p->dst);
        break;
    default:
        snprintf(buf, sizeof(buf), "call to '%s' on rank %u failed: %s%s%s",
                 name, p->dst, frpc_strerror(p->res.status), old ? ": " : "",
                 old ? old : "");
        break;
    }
    p->res.error = strdup(buf);
    free(old);
}

/* One more of c, under the table lock (the only writer of the outcome
 * counts and of epoch): a load and a store, not a locked add; readers
 * load it. Released (a plain store on x86): a reader of the new epoch
 * sees what was done before it. */
static void bump_locked(atomic_uint_fast64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_release);
}

static void count_locked(fr_pending_table *t, int status)
{
    switch (status) {
    case 0: bump_locked(&t->st.ok); break;
    case FRPC_EREMOTE: bump_locked(&t->st.remote); break;
    case FRPC_ETIMEDOUT: bump_locked(&t->st.timed_out); break;
    case FRPC_ECANCELED: bump_locked(&t->st.cancelled); break;
    default: bump_locked(&t->st.failed); break;
    }
}

/* Fills p's result, wakes its waiter and wait_any waiters, and chains p on
 * *hooks if it has an on_done hook to run after unlock. */
static void finish_locked(fr_pending_table *t, fr_pending *p, int status,
                          int remote_code, void *data, size_t len, char *err,
                          fr_pending **hooks, uint64_t now)
{
    p->res.status = status;
    p->res.remote_code = remote_code;
    p->res.data = data;
    p->res.len = len;
    p->res.error = err;
    /* Kept as they came: 0 and EREMOTE; and a part's, which the whole
     * operation's own entry explains (once, not twice over). */
    if (status != 0 && status != FRPC_EREMOTE && !p->part)
        explain(p);
    count_locked(t, status);
    if (p->fstat) { /* under the lock: the only writer of these figures */
        if (!now)
            now = fr_now_ns();
        fr_hist_add(&p->fstat->call, now > p->t0 ? now - p->t0 : 0,
                    status != 0, 1);
    }
    if (p->on_done) {
        p->done_next = *hooks;
        *hooks = p;
    }
    if (p->cond_made) {
        pthread_cond_signal(&p->cond);
        fr_woke_sleeper = 1;
    }
    /* Last of p: a spinning waiter reads done without the lock and may
     * free p (a sync call's entry is on its stack) as soon as it sees it.
     * A release store: whoever sees done sees the result written before
     * it; nothing pairs it with a look at another variable (a sleeper's
     * cond_made is read under the lock above). An exchange here, and a
     * locked add for epoch, were two of an 8-byte get's atomic steps. */
    atomic_store_explicit(&p->done, 1, memory_order_release);
    /* After done: a waiter that reads the new epoch without the lock then
     * sees p done (wait_any's look, and its nap, rely on it): the store
     * releases done with it. Only under the lock (here, fr_pending_kick):
     * a load and a store, not a locked add. */
    bump_locked(&t->epoch);
    if (t->any_waiters) {
        pthread_cond_broadcast(&t->any_cond);
        fr_woke_sleeper = 1;
    }
}

static void wake_sleepers(fr_pending_table *t)
{
    if (t->wake)
        t->wake(t->wake_ctx);
}

static void run_hooks(fr_pending *hooks)
{
    while (hooks) {
        fr_pending *next = hooks->done_next;
        hooks->on_done(hooks); /* may free hooks */
        hooks = next;
    }
}

/* Removes p, just added, if nobody completed it yet: 1 if so (it counts
 * as refused, never as started). */
static int take_back(fr_pending_table *t, fr_pending *p)
{
    pthread_mutex_lock(&t->lock);
    int removed = remove_locked(t, p);
    pthread_mutex_unlock(&t->lock);
    if (removed)
        atomic_fetch_add(&t->st.refused, 1);
    return removed;
}

int fr_pending_add(fr_pending_table *t, fr_pending *p, uint32_t dst,
                   const char *fname, int timeout_ms, uint64_t deadline,
                   fr_pending_done_fn on_done)
{
    return fr_pending_add_with_room(t, p, dst, fname, timeout_ms, deadline,
                                    on_done, NULL, 0, NULL);
}

/* Set while fabrpc itself starts calls the limit must not refuse
 * (fr_pending_unlimited). */
static _Thread_local int unlimited FR_TLS_FAST;

int fr_pending_unlimited(int on)
{
    int was = unlimited;
    unlimited = on;
    return was;
}

/* Counts one more entry in flight unless t->limit are already (or this
 * thread is unlimited): the check and the count are one
 * compare-and-swap, so adders racing at the limit cannot all pass it.
 * The new count, or 0 when refused. */
static size_t take_slot(fr_pending_table *t)
{
    if (unlimited)
        return (size_t)atomic_fetch_add(&t->inflight, 1) + 1;
    uint_fast64_t cur = atomic_load(&t->inflight);
    do
        if (t->limit && cur >= t->limit)
            return 0;
    while (!atomic_compare_exchange_weak(&t->inflight, &cur, cur + 1));
    return (size_t)cur + 1;
}

/* What an entry is, for insert: a call or transfer ended by the deadline
 * heap, one whose waiter ends it itself, or a part of another's. */
enum { KIND_CALL, KIND_SELF_TIMED, KIND_PART };

/* Inserts p, already counted in flight (counted: the count with it). */
static int insert(fr_pending_table *t, fr_pending *p, uint32_t dst,
                  const char *fname, int timeout_ms, uint64_t deadline,
                  fr_pending_done_fn on_done, void *room, size_t cap,
                  struct fr_fn_stat *fstat, size_t counted, int kind)
{
    memset(&p->res, 0, sizeof(p->res));
    p->reply_room = room;
    p->reply_cap = room ? cap : 0;
    p->dst = dst;
    p->fname = fname;
    p->fstat = fstat;
    /* The deadline was just made from the clock: the call's start costs
     * no second read of it. */
    p->t0 = !fstat ? 0
            : deadline != UINT64_MAX && timeout_ms > 0
                ? deadline - (uint64_t)timeout_ms * 1000000ull
                : fr_now_ns();
    p->timeout_ms = timeout_ms;
    p->deadline = deadline;
    p->heap_idx = SIZE_MAX;
    p->self_timed = kind == KIND_SELF_TIMED;
    p->part = kind == KIND_PART;
    p->on_done = on_done;
    p->next = p->done_next = p->in_next = NULL;
    p->cond_made = 0;
    atomic_init(&p->done, 0);
    p->id = atomic_fetch_add(&t->next_id, 1);
    if (deadline != UINT64_MAX && !p->self_timed) {
        if (reserve_heap(t, counted)) {
            atomic_fetch_sub(&t->inflight, 1);
            atomic_fetch_add(&t->st.refused, 1);
            return FRPC_ENOMEM;
        }
        fr_pending *in = atomic_load(&t->incoming);
        do
            p->in_next = in;
        while (!atomic_compare_exchange_weak(&t->incoming, &in, p));
        lower_next_deadline(t, deadline);
    }
    push_on_chain(t, p); /* last: from here a completer may find p */
    /* Closed meanwhile? The closer stores closed, then sweeps the chains
     * (loading their heads); we pushed, then look at closed: all four
     * sequentially consistent, as in Dekker's (the push a seq_cst
     * compare-and-swap, so no fence: an mfence each add), so its sweep
     * found p, or we see closed and take p back. */
    if (atomic_load(&t->closed) && take_back(t, p))
        return FRPC_ESHUTDOWN;
    /* Counted once it cannot be taken back: a counter never goes down
     * (one made of the ids handed out less those refused and renewed,
     * three loads, could: a renewal between them). Its outcome may be
     * counted a moment before (a completer found p already). */
    atomic_fetch_add(&t->st.started, 1);
    return 0;
}

/* Takes a slot in flight (refused past the limit), then inserts p. */
static int add_in_slot(fr_pending_table *t, fr_pending *p, uint32_t dst,
                       const char *fname, int timeout_ms, uint64_t deadline,
                       fr_pending_done_fn on_done, void *room, size_t cap,
                       struct fr_fn_stat *fstat, int kind)
{
    if (atomic_load_explicit(&t->closed, memory_order_relaxed))
        return FRPC_ESHUTDOWN;
    size_t counted = take_slot(t);
    if (!counted)
        return FRPC_EAGAIN;
    return insert(t, p, dst, fname, timeout_ms, deadline, on_done, room, cap,
                  fstat, counted, kind);
}

int fr_pending_add_with_room(fr_pending_table *t, fr_pending *p,
                             uint32_t dst, const char *fname, int timeout_ms,
                             uint64_t deadline, fr_pending_done_fn on_done,
                             void *room, size_t cap,
                             struct fr_fn_stat *fstat)
{
    return add_in_slot(t, p, dst, fname, timeout_ms, deadline, on_done, room,
                       cap, fstat, KIND_CALL);
}

int fr_pending_add_sync(fr_pending_table *t, fr_pending *p, uint32_t dst,
                        const char *fname, int timeout_ms, uint64_t deadline,
                        struct fr_fn_stat *fstat)
{
    return add_in_slot(t, p, dst, fname, timeout_ms, deadline, NULL, NULL, 0,
                       fstat, KIND_SELF_TIMED);
}

int fr_pending_add_counted(fr_pending_table *t, fr_pending *p, uint32_t dst,
                           const char *fname, int timeout_ms,
                           uint64_t deadline, fr_pending_done_fn on_done)
{
    if (atomic_load_explicit(&t->closed, memory_order_relaxed))
        return FRPC_ESHUTDOWN;
    size_t counted = atomic_fetch_add(&t->inflight, 1) + 1;
    return insert(t, p, dst, fname, timeout_ms, deadline, on_done, NULL, 0,
                  NULL, counted, KIND_PART);
}

/* Where e's small reply goes: its reply room, or a copy of its own. */
static void *place_small(fr_pending *e, const fr_answer *x)
{
    void *to = e->reply_room && x->len <= e->reply_cap ? e->reply_room
                                                       : malloc(x->len);
    if (to)
        memcpy(to, x->small, x->len);
    return to;
}

size_t fr_pending_complete_many(fr_pending_table *t, fr_answer *ans,
                                size_t n, uint64_t taken)
{
    fr_pending *hooks = NULL;
    size_t completed = 0, late = 0;
    /* An answer taken only after its call's deadline is late, whenever it
     * reached this rank (a caller stopped or starved past the deadline
     * polls its answers before its deadlines): the call ends
     * FRPC_ETIMEDOUT and the answer is dropped, as fr_pending_expire
     * would have had it. One time serves the whole batch, and the calls'
     * figures (fnstats.h) too; without one, the coarse clock (never
     * ahead) keeps the check off the round trip's cost, and a call with
     * figures reads the fine one (finish_locked). */
    uint64_t now = taken ? taken : fr_coarse_now_ns();
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < n; i++) {
        fr_answer *x = &ans[i];
        fr_pending *e = find_locked(t, x->id);
        /* An answer from a rank we did not call is not this call's answer. */
        if (e && e->dst == x->src && remove_locked(t, e)) {
            if (e->deadline <= now) {
                finish_locked(t, e, FRPC_ETIMEDOUT, 0, NULL, 0, NULL, &hooks,
                              taken);
                late++;
                continue;
            }
            int status = x->status;
            void *data = x->data;
            if (data == x->small && !(data = place_small(e, x))) {
                status = FRPC_ENOMEM;
                x->len = 0;
            }
            finish_locked(t, e, status, x->remote_code, data, x->len, x->err,
                          &hooks, taken);
            x->data = NULL;
            x->err = NULL;
            completed++;
        }
    }
    pthread_mutex_unlock(&t->lock);
    /* ans is not read past this point: a hook may run a future's callback
     * on this polling thread, and a call it makes polls, whose answers
     * fill the caller's array again (request.c). */
    if (completed < n) { /* dropped answers: taken ones are NULL now */
        atomic_fetch_add(&t->st.dropped, n - completed);
        for (size_t i = 0; i < n; i++) {
            if (ans[i].data != ans[i].small)
                free(ans[i].data);
            free(ans[i].err);
        }
    }
    run_hooks(hooks);
    if (completed || late)
        wake_sleepers(t);
    return completed + late;
}

int fr_pending_complete(fr_pending_table *t, uint64_t id, uint32_t src,
                        int status, int remote_code, void *data, size_t len,
                        char *err)
{
    return fr_pending_complete_at(t, id, src, status, remote_code, data, len,
                                  err, 0);
}

int fr_pending_complete_at(fr_pending_table *t, uint64_t id, uint32_t src,
                           int status, int remote_code, void *data,
                           size_t len, char *err, uint64_t taken)
{
    /* Field by field: an initializer would zero small, which a single
     * answer never uses (its data is the caller's). */
    fr_answer x;
    x.id = id;
    x.src = src;
    x.status = status;
    x.remote_code = remote_code;
    x.data = data;
    x.len = len;
    x.err = err;
    return (int)fr_pending_complete_many(t, &x, 1, taken);
}

int fr_pending_wait(fr_pending_table *t, fr_pending *p, uint64_t until_ns,
                    int give_up)
{
    fr_pending *hooks = NULL;
    int done;
    pthread_mutex_lock(&t->lock);
    while (!atomic_load(&p->done)) {
        if (fr_now_ns() >= until_ns)
            break;
        if (!p->cond_made) {
            fr_cond_init_monotonic(&p->cond);
            p->cond_made = 1;
        }
        struct timespec ts = fr_ns_to_timespec(until_ns);
        pthread_cond_timedwait(&p->cond, &t->lock, &ts);
    }
    done = atomic_load(&p->done);
    if (!done && give_up && remove_locked(t, p)) {
        finish_locked(t, p, FRPC_ETIMEDOUT, 0, NULL, 0, NULL, &hooks, 0);
        done = 1;
    }
    pthread_mutex_unlock(&t->lock);
    run_hooks(hooks);
    return done;
}

void fr_pending_kick(fr_pending_table *t)
{
    pthread_mutex_lock(&t->lock);
    bump_locked(&t->epoch);
    if (t->any_waiters) {
        pthread_cond_broadcast(&t->any_cond);
        fr_woke_sleeper = 1;
    }
    pthread_mutex_unlock(&t->lock);
    wake_sleepers(t);
}

void fr_pending_wait_any(fr_pending_table *t, uint64_t *epoch,
                         uint64_t until_ns)
{
    pthread_mutex_lock(&t->lock);
    t->any_waiters++;
    while (atomic_load(&t->epoch) == *epoch && fr_now_ns() < until_ns) {
        struct timespec ts = fr_ns_to_timespec(until_ns);
        pthread_cond_timedwait(&t->any_cond, &t->lock, &ts);
    }
    t->any_waiters--;
    *epoch = atomic_load(&t->epoch);
    pthread_mutex_unlock(&t->lock);
}

int fr_pending_abort(fr_pending_table *t, fr_pending *p, int status,
                     const char *msg)
{
    fr_pending *hooks = NULL;
    int removed;
    pthread_mutex_lock(&t->lock);
    removed = remove_locked(t, p);
    if (removed)
        finish_locked(t, p, status, 0, NULL, 0, msg ? strdup(msg) : NULL,
                      &hooks, 0);
    pthread_mutex_unlock(&t->lock);
    run_hooks(hooks);
    if (removed)
        wake_sleepers(t);
    return removed;
}

void fr_pending_fail(fr_pending_table *t, uint32_t dst, int status,
                     const char *msg)
{
    fr_pending *hooks = NULL;
    pthread_mutex_lock(&t->lock);
    for (unsigned i = 0; i < t->nbuckets; i++) {
        fr_pending *e = atomic_load(&t->bucket[i]);
        while (e) {
            fr_pending *next = e->next;
            if ((dst == UINT32_MAX || e->dst == dst) && remove_locked(t, e))
                finish_locked(t, e, status, 0, NULL, 0,
                              msg ? strdup(msg) : NULL, &hooks, 0);
            e = next;
        }
    }
    pthread_mutex_unlock(&t->lock);
    run_hooks(hooks);
    wake_sleepers(t);
}

void fr_pending_close(fr_pending_table *t, const char *msg)
{
    atomic_store(&t->closed, 1); /* before the sweep: see the adder */
    fr_pending_fail(t, UINT32_MAX, FRPC_ESHUTDOWN, msg);
}

size_t fr_pending_ids_to(fr_pending_table *t, uint32_t dst, uint64_t *ids,
                         size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&t->lock);
    for (unsigned i = 0; i < t->nbuckets; i++)
        for (fr_pending *e = atomic_load(&t->bucket[i]); e; e = e->next)
            if (e->dst == dst) {
                if (n < max)
                    ids[n] = e->id;
                n++;
            }
    pthread_mutex_unlock(&t->lock);
    return n;
}

void fr_pending_expire(fr_pending_table *t, uint64_t now)
{
    fr_pending *hooks = NULL;
    if (atomic_load(&t->next_deadline) > now)
        return;
    int expired = 0;
    pthread_mutex_lock(&t->lock);
    drain_incoming_locked(t);
    while (t->heap_len && t->heap[0]->deadline <= now) {
        fr_pending *p = t->heap[0];
        /* Its adder is between the incoming list and the chain: it is
         * back in an instant, and next_deadline stays due till then. */
        if (!remove_locked(t, p))
            break;
        finish_locked(t, p, FRPC_ETIMEDOUT, 0, NULL, 0, NULL, &hooks, 0);
        expired = 1;
    }
    publish_next_deadline_locked(t);
    pthread_mutex_unlock(&t->lock);
    run_hooks(hooks);
    if (expired)
        wake_sleepers(t);
}

uint64_t fr_pending_renew_id(fr_pending_table *t, uint64_t id, uint32_t dst)
{
    uint64_t fresh = 0;
    pthread_mutex_lock(&t->lock);
    fr_pending *p = find_locked(t, id);
    /* Off its chain and back on under its new id; the deadline heap keeps
     * it by position, not id. */
    if (p && p->dst == dst && !atomic_load(&p->done) && unlink_locked(t, p)) {
        p->id = fresh = atomic_fetch_add(&t->next_id, 1);
        push_on_chain(t, p);
    }
    pthread_mutex_unlock(&t->lock);
    return fresh;
}

uint64_t fr_pending_started(fr_pending_table *t)
{
    return atomic_load(&t->st.started);
}

void fr_pending_release(fr_pending *p)
{
    /* The owner calls this after done: the sleeper that made the
     * condition variable has left it (it woke under the table lock). */
    if (p->cond_made)
        pthread_cond_destroy(&p->cond);
}
