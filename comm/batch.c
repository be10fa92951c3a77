/*
 * Coalescing: several small frames to one peer in one message.
 *
 * Why: on tcp every message is a sendmsg(2) at the sender and a completion
 * at the receiver; with many calls in flight that, not fabrpc, sets the
 * rate. A rank that answers a burst of requests in one poll, or issues a
 * burst of calls, sends one message per peer instead.
 *
 * Rules (never added latency for a lone frame):
 * - The first frame to a peer after a poll goes out at once. Only a frame
 *   to a peer that already had one since the last poll waits in the peer's
 *   batch; the receiver splits the message (FR_ENV_F_MORE).
 * - A frame waits only while a thread is polling (fr_fabric_poller_enter)
 *   or its own sender lingers (below): every poll sends the batches
 *   before and after reading the CQ. The last poller to leave sends what
 *   is left, and a frame added when no thread polls is sent by its own
 *   sender; the add and the leave each write, then read the other's
 *   counter (seq_cst), so one of them sends.
 * - Lingers: a caller refilling a window of async calls between waits is
 *   not polling, so without them each refill went alone (tcp 8 B calls,
 *   64 in flight: 1.0-1.2 frames per message). A thread whose wait ended
 *   lingers until its next poll; its frames to a peer that already had
 *   one wait for that poll. The linger lives in the thread (so a thread
 *   that never comes back is the only one it affects) and ends for all
 *   threads when the fabric's epoch moves (fr_fabric_end_lingers), which
 *   the add re-checks after putting its frame in, as with the pollers.
 * - The thread polling (it holds poll_lock) puts its frames, the answers
 *   of inline handlers mostly, in batches of its own that no other thread
 *   touches, and sends them before it lets go of poll_lock: answering
 *   takes no lock. Other threads share batches under batch_lock.
 * - Frames need not arrive in order (RDM endpoints do not promise it and
 *   the protocol never relies on it), so a batch is sent outside the lock.
 * - A flush gives each batch one try at the provider and never waits for
 *   room: a batch without room (a peer that stops reading) is kept
 *   (f->stalled) and tried again by every later flush, until the latest
 *   deadline among its frames (a call's own; an answer's respond bound);
 *   past that, its frames' calls fail through on_send_error, like a
 *   failed send completion. Waits sleep 1 ms at most meanwhile
 *   (FR_STALL_RETRY_US), and that peer gets no new batch (its frames go
 *   alone). A thread that sends a batch for its own frame
 *   (nobody polls; or the batch is full) waits for room as long as its
 *   own frame may, never longer. (A flush once waited until the batch's
 *   deadline: a frame of a 60 s call held toward a stopped rank kept
 *   every thread that flushed it, a 1 s call's or the progress thread,
 *   waiting 6-8 s, until the rank resumed. Before that the wait was a
 *   flat second, and a peer whose inline handler kept its poll longer
 *   failed calls with 120 s left to run.)
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "comm/clock.h"
#include "comm/fabric_internal.h"

/* The calling thread's linger: on fabric f, valid while f's epoch is
 * epoch. f is only compared, never followed: it may be long closed. */
static _Thread_local struct {
    const fr_fabric *f;
    uint64_t epoch;
} linger FR_TLS_FAST;

static int lingers_here(fr_fabric *f)
{
    return linger.f == f && linger.epoch == atomic_load(&f->linger_epoch);
}

/* Whether a frame added now may wait for a poll. */
static int someone_will_poll(fr_fabric *f)
{
    return atomic_load(&f->pollers) > 0 || lingers_here(f);
}

static int batches_init(fr_batches *set, uint32_t world)
{
    set->per_peer = calloc(world, sizeof(*set->per_peer));
    set->dirty = calloc(world, sizeof(*set->dirty));
    set->ndirty = 0;
    return set->per_peer && set->dirty ? 0 : FRPC_ENOMEM;
}

int fr__batch_init(fr_fabric *f)
{
    f->last_pass = calloc(f->world, sizeof(*f->last_pass));
    f->stalled_to = calloc(f->world, sizeof(*f->stalled_to));
    if (batches_init(&f->shared, f->world) || batches_init(&f->own, f->world) ||
        !f->last_pass || !f->stalled_to)
        return FRPC_ENOMEM;
    for (uint32_t i = 0; i < f->world; i++)
        atomic_init(&f->last_pass[i], UINT64_MAX);
    atomic_init(&f->linger_epoch, fr_now_ns());
    return 0;
}

/* Slots still in batches are freed with all slots by fr_fabric_close. */
void fr__batch_free(fr_fabric *f)
{
    fr_batches *sets[2] = {&f->shared, &f->own};
    for (int i = 0; i < 2; i++) {
        free(sets[i]->per_peer);
        free(sets[i]->dirty);
    }
    free((void *)f->last_pass);
    free((void *)f->stalled_to);
}

/* A batch taken out of its set, to be sent. */
typedef struct taken {
    uint32_t dst;
    fr_send_slot *sl;
    size_t len;
    uint64_t deadline; /* the latest of its frames' */
} taken;

/* Keeps sl (len bytes of frames to dst, due by deadline) for the next
 * flush; counted in stalled_n unless it already was (again). */
static void stall(fr_fabric *f, fr_send_slot *sl, uint32_t dst, size_t len,
                  uint64_t deadline, int again)
{
    sl->dst = dst;
    sl->len = len;
    sl->stall_deadline = deadline;
    pthread_mutex_lock(&f->batch_lock);
    sl->next_free = f->stalled;
    f->stalled = sl;
    pthread_mutex_unlock(&f->batch_lock);
    if (!again) {
        atomic_fetch_add(&f->stalled_to[dst], 1);
        atomic_fetch_add(&f->stalled_n, 1);
    }
}

/* Sends len bytes of frames from sl to dst, waiting for room until
 * wait_until (0: one try). Without room by then a batch whose deadline
 * is still ahead is kept (stall): 1; else 0, sent, or its frames failed
 * and the slot back in the pool. */
static int send_batch(fr_fabric *f, uint32_t dst, fr_send_slot *sl,
                      size_t len, uint64_t deadline, uint64_t wait_until)
{
    int rc;
    if (wait_until > deadline)
        wait_until = deadline;
    sl->raw = 0;
    sl->ctl = 0;
    if (len <= f->inject_max) {
        rc = fr__inject(f, dst, sl->buf, len, wait_until);
    } else {
        sl->len = len;
        rc = fr__post_slot_or_keep(f, sl, dst, len, wait_until);
        if (!rc)
            return 0; /* the provider's until its completion */
    }
    if (rc == FRPC_ETIMEDOUT && fr_now_ns() < deadline)
        return 1;
    if (rc)
        fr__fail_frames(f, dst, sl->buf, len, rc);
    fr__put_slot(f, sl);
    return 0;
}

static void send_or_stall(fr_fabric *f, const taken *t, uint64_t wait_until)
{
    if (t->sl && send_batch(f, t->dst, t->sl, t->len, t->deadline, wait_until))
        stall(f, t->sl, t->dst, t->len, t->deadline, 0);
}

/* Gives each stalled batch one more try. Taken out all at once, so that
 * one kept again waits for the next flush. */
static void retry_stalled(fr_fabric *f)
{
    if (!fr__batches_stalled(f))
        return;
    pthread_mutex_lock(&f->batch_lock);
    fr_send_slot *sl = f->stalled;
    f->stalled = NULL;
    pthread_mutex_unlock(&f->batch_lock);
    while (sl) {
        fr_send_slot *next = sl->next_free;
        uint32_t dst = sl->dst;
        if (send_batch(f, dst, sl, sl->len, sl->stall_deadline, 0)) {
            stall(f, sl, dst, sl->len, sl->stall_deadline, 1);
        } else {
            atomic_fetch_sub(&f->stalled_to[dst], 1);
            atomic_fetch_sub(&f->stalled_n, 1);
        }
        sl = next;
    }
}

/* Takes dst's batch b out into *out; the caller sends it. */
static void take_locked(fr_batch *b, uint32_t dst, taken *out)
{
    *out = (taken){.dst = dst, .sl = b->slot, .len = b->len,
                   .deadline = b->deadline};
    b->slot = NULL;
    b->len = 0;
    b->deadline = 0;
}

/* Takes up to max listed batches out of set. */
static size_t take_dirty_locked(fr_batches *set, taken *out, size_t max)
{
    size_t n = 0;
    while (n < max && set->ndirty > 0) {
        uint32_t dst = set->dirty[--set->ndirty];
        fr_batch *b = &set->per_peer[dst];
        b->dirty = 0;
        take_locked(b, dst, &out[n++]);
    }
    return n;
}

/* One try each (a flush never waits for room). */
static void send_taken(fr_fabric *f, taken *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        send_or_stall(f, &t[i], 0);
}

void fr__batch_flush_own(fr_fabric *f)
{
    taken t[16];
    size_t n;
    while ((n = take_dirty_locked(&f->own, t, 16)) > 0)
        send_taken(f, t, n);
}

/* The shared batches. The poll owner's own go out in its poll
 * (fr__batch_flush_own), so none is ever left to this. */
void fr__batch_flush(fr_fabric *f)
{
    retry_stalled(f);
    while (atomic_load(&f->batched) > 0) {
        taken t[16]; /* batches taken per lock */
        pthread_mutex_lock(&f->batch_lock);
        size_t n = take_dirty_locked(&f->shared, t, 16);
        atomic_fetch_sub(&f->batched, n);
        pthread_mutex_unlock(&f->batch_lock);
        if (n == 0)
            return;
        send_taken(f, t, n);
    }
}

/* Puts the frame (to be sent by deadline) into set's batch for dst: 1
 * if taken, 0 if no slot was free. *full is set to a batch that had no
 * room left, taken out for the caller to send; *listed to 1 if dst's
 * batch was newly listed. */
static int append(fr_fabric *f, fr_batches *set, uint32_t dst,
                  const uint8_t *hdr, const void *payload, size_t len,
                  uint64_t deadline, int *listed, taken *full)
{
    size_t frame = FR_ENV_HDR_SIZE + len;
    fr_batch *b = &set->per_peer[dst];
    if (b->slot && b->len + frame > f->batch_cap)
        take_locked(b, dst, full);
    if (!b->slot) {
        if (!(b->slot = fr__get_slot(f)))
            return 0; /* the direct path waits for one */
        if (!b->dirty) {
            b->dirty = 1;
            set->dirty[set->ndirty++] = dst;
            *listed = 1;
        }
    } else {
        fr_env_set_more(b->slot->buf + b->last_hdr);
        atomic_fetch_add_explicit(&f->st.coalesced, 1, memory_order_relaxed);
    }
    memcpy(b->slot->buf + b->len, hdr, FR_ENV_HDR_SIZE);
    if (len)
        memcpy(b->slot->buf + b->len + FR_ENV_HDR_SIZE, payload, len);
    b->last_hdr = b->len;
    b->len += frame;
    if (deadline > b->deadline)
        b->deadline = deadline;
    return 1;
}

/*
 * Offers a frame (hdr: its encoded header; len bytes of payload; to be
 * sent by deadline, fr_now_ns clock) to dst's batch. Returns 1 if the
 * frame was taken (it will be sent, or its call failed), 0 if the caller
 * must send it itself now.
 */
int fr__batch_add(fr_fabric *f, uint32_t dst, const uint8_t *hdr,
                  const void *payload, size_t len, uint64_t deadline)
{
    size_t frame = FR_ENV_HDR_SIZE + len;
    uint64_t pass = atomic_load_explicit(&f->pass, memory_order_relaxed);
    int owner = 0;

    /* A peer with a batch kept for want of room gets no more: its frames
     * go alone, each sender waiting for room as long as its frame may (a
     * batch kept per pass would take the slots other peers' sends need). */
    if (!f->batch_cap || frame > f->batch_cap ||
        (fr__batches_stalled(f) &&
         atomic_load_explicit(&f->stalled_to[dst], memory_order_relaxed)) ||
        !((owner = fr_fabric_polling_here(f)) || someone_will_poll(f)) ||
        atomic_exchange_explicit(&f->last_pass[dst], pass,
                                 memory_order_relaxed) != pass)
        return 0;

    taken full = {.sl = NULL}, mine = {.sl = NULL};
    int listed = 0, took;
    if (owner) {
        took = append(f, &f->own, dst, hdr, payload, len, deadline, &listed,
                      &full);
    } else {
        pthread_mutex_lock(&f->batch_lock);
        took = append(f, &f->shared, dst, hdr, payload, len, deadline,
                      &listed, &full);
        if (listed)
            atomic_fetch_add(&f->batched, 1);
        /* Nobody will poll for it: we send it now, ourselves (the add
         * and the leave each write, then read the other's counter). */
        if (took && !someone_will_poll(f))
            take_locked(&f->shared.per_peer[dst], dst, &mine);
        pthread_mutex_unlock(&f->batch_lock);
    }
    /* What this thread sends for itself may wait for room as long as its
     * own frame may, never longer (the batch may hold later deadlines):
     * past that, the batch is kept for the next flush. */
    send_or_stall(f, &full, deadline);
    if (mine.sl) {
        send_or_stall(f, &mine, deadline);
        fr__batch_flush(f); /* the other batches: one try each */
    }
    return took;
}

void fr_fabric_poller_enter(fr_fabric *f)
{
    atomic_fetch_add(&f->pollers, 1);
    if (linger.f == f)
        linger.f = NULL; /* our poll sends what our linger held */
}

void fr_fabric_linger_begin(fr_fabric *f)
{
    linger.epoch = atomic_load(&f->linger_epoch);
    linger.f = f;
}

void fr_fabric_linger_end(fr_fabric *f)
{
    if (linger.f != f)
        return;
    linger.f = NULL;
    if (atomic_load(&f->pollers) == 0)
        fr__batch_flush(f);
}

void fr_fabric_end_lingers(fr_fabric *f)
{
    atomic_fetch_add(&f->linger_epoch, 1);
    if (atomic_load(&f->pollers) == 0)
        fr__batch_flush(f);
}

void fr_fabric_send_batched(fr_fabric *f)
{
    fr__batch_flush(f);
}

void fr_fabric_poller_leave(fr_fabric *f)
{
    if (atomic_fetch_sub(&f->pollers, 1) == 1)
        fr__batch_flush(f);
}
