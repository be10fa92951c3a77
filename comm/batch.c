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
 * - Frames need not arrive in order (RDM endpoints do not promise it and
 *   the protocol never relies on it), so a batch is sent outside the lock.
 * - A batch that cannot be sent fails the calls of each of its frames
 *   through on_send_error, like a failed send completion.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "comm/clock.h"
#include "comm/fabric_internal.h"

#define FR_BATCH_SEND_MS 1000 /* room to send a batch: then its calls fail */

/* The calling thread's linger: on fabric f, valid while f's epoch is
 * epoch. f is only compared, never followed: it may be long closed. */
static _Thread_local struct {
    const fr_fabric *f;
    uint64_t epoch;
} linger;

static int lingers_here(fr_fabric *f)
{
    return linger.f == f && linger.epoch == atomic_load(&f->linger_epoch);
}

/* Whether a frame added now may wait for a poll. */
static int someone_will_poll(fr_fabric *f)
{
    return atomic_load(&f->pollers) > 0 || lingers_here(f);
}

int fr__batch_init(fr_fabric *f)
{
    f->batch = calloc(f->world, sizeof(*f->batch));
    f->dirty = calloc(f->world, sizeof(*f->dirty));
    f->last_pass = calloc(f->world, sizeof(*f->last_pass));
    if (!f->batch || !f->dirty || !f->last_pass)
        return FRPC_ENOMEM;
    for (uint32_t i = 0; i < f->world; i++)
        atomic_init(&f->last_pass[i], UINT64_MAX);
    atomic_init(&f->linger_epoch, fr_now_ns());
    return 0;
}

/* Slots still in batches are freed with all slots by fr_fabric_close. */
void fr__batch_free(fr_fabric *f)
{
    free(f->batch);
    free(f->dirty);
    free((void *)f->last_pass);
}

/* Sends len bytes of frames from sl (taken out of a batch) to dst. */
static void send_batch(fr_fabric *f, uint32_t dst, fr_send_slot *sl,
                       size_t len)
{
    uint64_t deadline = fr_deadline_ms(FR_BATCH_SEND_MS);
    int rc;
    if (len <= f->inject_max) {
        rc = fr__inject(f, dst, sl->buf, len, deadline);
        if (rc)
            fr__fail_frames(f, dst, sl->buf, len, rc);
        fr__put_slot(f, sl);
        return;
    }
    sl->len = len;
    sl->raw = 0;
    /* On failure the slot is back in the pool but its bytes intact until
     * the next get: fail the frames before anyone can take it. */
    rc = fr__post_slot(f, sl, dst, len, deadline);
    if (rc)
        fr__fail_frames(f, dst, sl->buf, len, rc);
}

/* Takes dst's batch out; the caller sends it. */
static fr_send_slot *take_locked(fr_batch *b, size_t *len)
{
    fr_send_slot *sl = b->slot;
    *len = b->len;
    b->slot = NULL;
    b->len = 0;
    return sl;
}

void fr__batch_flush(fr_fabric *f)
{
    while (atomic_load(&f->batched) > 0) {
        pthread_mutex_lock(&f->batch_lock);
        if (f->ndirty == 0) {
            pthread_mutex_unlock(&f->batch_lock);
            return;
        }
        uint32_t dst = f->dirty[--f->ndirty];
        atomic_fetch_sub(&f->batched, 1);
        fr_batch *b = &f->batch[dst];
        size_t len;
        b->dirty = 0;
        fr_send_slot *sl = take_locked(b, &len);
        pthread_mutex_unlock(&f->batch_lock);
        if (sl)
            send_batch(f, dst, sl, len);
    }
}

/*
 * Offers a frame (hdr: its encoded header; len bytes of payload) to dst's
 * batch. Returns 1 if the frame was taken (it will be sent, or its call
 * failed), 0 if the caller must send it itself now.
 */
int fr__batch_add(fr_fabric *f, uint32_t dst, const uint8_t *hdr,
                  const void *payload, size_t len)
{
    size_t frame = FR_ENV_HDR_SIZE + len;
    uint64_t pass = atomic_load_explicit(&f->pass, memory_order_relaxed);

    if (!f->batch_cap || frame > f->batch_cap || !someone_will_poll(f) ||
        atomic_exchange_explicit(&f->last_pass[dst], pass,
                                 memory_order_relaxed) != pass)
        return 0;

    fr_send_slot *full = NULL;
    size_t full_len = 0;
    pthread_mutex_lock(&f->batch_lock);
    fr_batch *b = &f->batch[dst];
    if (b->slot && b->len + frame > f->batch_cap)
        full = take_locked(b, &full_len);
    if (!b->slot) {
        if (!(b->slot = fr__get_slot(f))) {
            pthread_mutex_unlock(&f->batch_lock);
            if (full)
                send_batch(f, dst, full, full_len);
            return 0; /* no slot free: the direct path waits for one */
        }
        if (!b->dirty) {
            b->dirty = 1;
            f->dirty[f->ndirty++] = dst;
            atomic_fetch_add(&f->batched, 1);
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
    pthread_mutex_unlock(&f->batch_lock);

    if (full)
        send_batch(f, dst, full, full_len);
    if (!someone_will_poll(f))
        fr__batch_flush(f); /* nobody polls: do not leave it waiting */
    return 1;
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

void fr_fabric_poller_leave(fr_fabric *f)
{
    if (atomic_fetch_sub(&f->pollers, 1) == 1)
        fr__batch_flush(f);
}
