/*
 * One-sided transfers (rpc/fabrpc.h): frpc_get/frpc_put, batches
 * (frpc_transfer), and their async forms, on registered regions (mem.c).
 *
 * Design notes
 * - A transfer or a batch is a pending entry like a call's (same
 *   timeouts, cancel, futures, EPEERLOST when its owner is lost),
 *   completed by the fabric's done callback with the entry's id; one that
 *   outlives its entry (timed out, cancelled) completes into nothing: ids
 *   are never reused.
 * - A batch is one fabric transfer of many segments to one owner: checked
 *   whole before anything is posted, posted back to back, ended once. Its
 *   notification is sent by the done callback, as a request with the
 *   entry's id (notify.c), whose answer then completes the entry.
 * - Every local region of a transfer counts it in busy until the fabric
 *   is done with it (frpc_mem_deregister waits for that).
 * - A single get or put allocates nothing here (the region is the
 *   callback's context); a batch allocates its context once.
 * - Native or emulated: everything here is the same for both but the
 *   post. A transfer goes by messages (emu.c) when this rank's transfers
 *   are emulated (config.rma, or a provider without RMA) or the owner's
 *   descriptor says it serves the region so (FR_MEMDESC_F_MESSAGES);
 *   otherwise by the provider's RMA (comm/rma.c). Both end through the
 *   same done callbacks.
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "comm/clock.h"
#include "comm/memdesc.h"
#include "rpc/emu.h"
#include "rpc/mem.h"

/* How the fabric's done ends an entry: a transport failure may be the
 * owner's death seen first by its connection, and shm's failed copy
 * (owner_unsure) its death as well as unmapped memory, so liveness
 * decides (FRPC_EPEERLOST, or the failure), as for a call whose send
 * failed. */
static void finish(frpc_agent *a, const fr_rma *op, int status,
                   const char *why)
{
    if (status == FRPC_ETRANSPORT || (status && op->owner_unsure))
        fr_liveness_suspect(a, op->dst, op->id, status,
                            why ? why : "transport failure");
    else
        fr_pending_complete_at(&a->pend, op->id, op->dst, status, 0, NULL,
                               0, why ? strdup(why) : NULL, op->done_ns);
}

/* A transfer no longer holds m (frpc_mem_deregister's wait). */
static void release(frpc_mem *m, int status)
{
    if (status == FRPC_ESHUTDOWN)
        atomic_store(&m->shut_ended, 1);
    atomic_fetch_sub(&m->busy, 1);
}

/* A single transfer's done: its context is its local region. */
static void one_done(const fr_rma *op, int status, const char *why)
{
    frpc_mem *m = op->ctx;
    /* No agent: shutdown ended the region, and the transfer's entry
     * before it; its done comes from the fabric's close. */
    if (m->agent)
        finish(m->agent, op, status, why);
    release(m, status);
}

/* A batch in flight: the fabric's context for it. */
typedef struct fr_batch {
    frpc_agent *a;
    uint64_t deadline;  /* for its notification */
    size_t nlocal;
    frpc_mem **local;   /* the regions of the ops that move bytes (once
                           per run of ops on one), after notify */
    size_t notify_len;
    unsigned char notify[];
} fr_batch;

static void batch_done(const fr_rma *op, int status, const char *why)
{
    fr_batch *b = op->ctx;
    if (status == 0 && b->notify_len) {
        /* Under a fresh id: the batch's own is as old as the batch, and
         * a batch of more ops than a callee's dedup window (emulated:
         * each op a request) made the notification look like a
         * duplicate over udp, dropped, and the batch timed out. An entry
         * that ended meanwhile (its deadline) sends nothing: its caller
         * has its answer. */
        uint64_t id = fr_pending_renew_id(&b->a->pend, op->id, op->dst);
        if (id)
            fr_notify_send_for(b->a, op->dst, id, b->deadline, b->notify,
                               b->notify_len);
    } else
        finish(b->a, op, status, why);
    for (size_t i = 0; i < b->nlocal; i++)
        release(b->local[i], status);
    free(b);
}

/* 1 if a transfer with d's owner goes by messages (see the notes). */
static int by_messages(const frpc_agent *a, const fr_memdesc *d)
{
    return a->rma_emulated || (d->flags & FR_MEMDESC_F_MESSAGES);
}

/* Everything checked before anything is posted: FRPC_E* or 0, with the
 * descriptor decoded into *d. desc is not NULL: the callers refuse a NULL
 * themselves, uncounted, before anything here counts a refusal. */
static int check(frpc_mem *local, size_t loff, const void *desc,
                 size_t dlen, size_t roff, size_t len, int write,
                 fr_memdesc *d)
{
    frpc_agent *a = local->agent;
    char *why = NULL;
    int rc;

    /* fencing: closed by a deregistration that timed out (mem.c); the
     * header refuses every transfer with it, of 0 bytes too. */
    if (loff > local->len || len > local->len - loff || local->fencing ||
        (!write && !local->writable)) /* a get into read-only memory */
        return FRPC_EINVAL;
    if ((rc = fr_mem_decode(a, desc, dlen, d)))
        return rc;
    if (!(d->access & (write ? FR_MEMDESC_WRITE : FR_MEMDESC_READ)))
        return FRPC_EACCES;
    if (roff > d->len || len > d->len - roff)
        return FRPC_EINVAL;
    rc = fr_call_check_peer(a, (int)d->rank, write ? "frpc_put" : "frpc_get",
                            &why);
    free(why);
    /* Native shm: a region no longer listed by its owner is refused here,
     * as the other refusals before posting are (no call begun); one
     * deregistered after this look is refused by the hold at posting. A
     * len of 0 does not ask (the header). */
    if (!rc && len && !by_messages(a, d) &&
        !fr_fabric_region_listed(a->fab, d->rank, d->slot, d->region))
        rc = FRPC_EACCES;
    return rc;
}

/* frpc_stats.transfers_refused counts what the descriptor or the slice
 * refused (not max_inflight's FRPC_EAGAIN, not a shutdown). */
static void count_refusal(frpc_agent *a, int rc)
{
    if (rc == FRPC_EPROTO || rc == FRPC_EACCES || rc == FRPC_EINVAL ||
        rc == FRPC_ENORANK)
        atomic_fetch_add(&a->xfer_refused, 1);
}

/* Lays one checked op out for the emulation, which names the slice by
 * its descriptor. */
static void lay_emu(fr_emu_seg *eseg, frpc_mem *local, size_t loff,
                    const void *desc, size_t roff, size_t len, int write)
{
    *eseg = (fr_emu_seg){.write = write, .local = local, .local_off = loff,
                         .remote_off = roff, .len = len};
    memcpy(eseg->desc, desc, FRPC_MEM_DESC_SIZE);
}

/* Lays one checked op out for the provider (*seg) and, unless eseg is
 * NULL (the op is sure to go natively), for the emulation. */
static void lay(frpc_mem *local, size_t loff, const void *desc,
                const fr_memdesc *d, size_t roff, size_t len, int write,
                fr_rma_seg *seg, fr_emu_seg *eseg)
{
    *seg = (fr_rma_seg){.write = write, .local = local->mr,
                        .local_off = loff, .remote_addr = d->addr + roff,
                        .key = d->key, .len = len,
                        .region_slot = d->slot, .region_id = d->region};
    if (eseg)
        lay_emu(eseg, local, loff, desc, roff, len, write);
}

/* Posts op (its segments laid out both ways) natively or by messages:
 * fr_fabric_rma's contract either way. Counts in transfers_get/_put the
 * ops posted (emulated, an op counts as its first piece is sent), not
 * those a deadline kept back. */
static int post(frpc_agent *a, fr_rma *op, const fr_emu_seg *esegs, int emu)
{
    if (emu)
        return fr_emu_rma(a, op, esegs, op->nsegs);
    unsigned posted = 0, writes = 0;
    op->segs_posted = &posted;
    int rc = fr_fabric_rma(a->fab, op);
    if (rc == FRPC_EACCES) /* a stale descriptor (shm: the owner's list) */
        count_refusal(a, rc);
    if (rc)
        return rc;
    for (unsigned i = 0; i < posted; i++)
        writes += op->segs[i].write;
    fr_transfers_count(a, 1, writes);
    fr_transfers_count(a, 0, posted - writes);
    return 0;
}

/* Starts the operation of entry p: 0 once it is under way (it completes
 * p), or the code, nothing under way. */
typedef int (*start_fn)(frpc_agent *a, const fr_pending *p, void *arg);

/* Runs start on a new entry: with out, as a future; else waits for it. */
static int run(frpc_agent *a, const char *name, uint32_t dst, int timeout_ms,
               start_fn start, void *arg, frpc_future **out)
{
    int rc;
    if (out) {
        frpc_future *f;
        if ((rc = fr_future_open(a, name, dst, timeout_ms, NULL, &f)))
            return rc;
        fr_pending *p = fr_future_entry(f);
        if ((rc = start(a, p, arg))) {
            fr_pending_abort(&a->pend, p, rc, NULL);
            fr_future_drop_unsent(f);
            return rc;
        }
        *out = f;
        return 0;
    }
    if (fr_progress_begin_wait(a))
        return FRPC_EDEADLK;
    fr_pending p;
    timeout_ms = fr_agent_timeout(a, timeout_ms);
    rc = fr_pending_add_sync(&a->pend, &p, dst, name, timeout_ms,
                             fr_deadline_ms(timeout_ms), NULL);
    if (rc == 0) {
        fr_progress_posting_begin(a);
        rc = start(a, &p, arg);
        if (rc) {
            fr_progress_posting_end(a);
            fr_pending_abort(&a->pend, &p, rc, NULL);
        } else
            fr_progress_wait_posted(a, &p, p.deadline, 1);
        rc = p.res.status;
        frpc_result_clear(&p.res);
        fr_pending_release(&p);
    }
    fr_progress_end_wait(a);
    return rc;
}

/* For what moves no bytes: done at once. */
static int start_nothing(frpc_agent *a, const fr_pending *p, void *arg)
{
    (void)arg;
    fr_pending_complete(&a->pend, p->id, p->dst, 0, 0, NULL, 0, NULL);
    return 0;
}

/* ---- one get or put ------------------------------------------------- */

typedef struct one_args {
    frpc_mem *local;
    fr_rma_seg seg;
    fr_emu_seg eseg;
    int emu;
} one_args;

static int start_one(frpc_agent *a, const fr_pending *p, void *arg)
{
    one_args *o = arg;
    fr_rma op = {.dst = p->dst, .segs = &o->seg, .nsegs = 1,
                 .deadline_ns = p->deadline, .done = one_done,
                 .ctx = o->local, .id = p->id};
    atomic_fetch_add(&o->local->busy, 1);
    int rc = post(a, &op, &o->eseg, o->emu);
    if (rc)
        atomic_fetch_sub(&o->local->busy, 1);
    return rc;
}

static int transfer(frpc_mem *local, size_t loff, const void *desc,
                    size_t dlen, size_t roff, size_t len, int timeout_ms,
                    int write, frpc_future **out)
{
    fr_memdesc d;
    int rc;

    if (out)
        *out = NULL;
    if (!local || !desc)
        return FRPC_EINVAL;
    frpc_agent *a = local->agent;
    if (!a)
        return FRPC_ESHUTDOWN;
    if ((rc = check(local, loff, desc, dlen, roff, len, write, &d))) {
        count_refusal(a, rc);
        return rc;
    }
    if (len == 0 && !out)
        return 0;
    one_args o; /* not zeroed: eseg (64 bytes and more) only if emu */
    o.local = local;
    o.emu = by_messages(a, &d);
    lay(local, loff, desc, &d, roff, len, write, &o.seg,
        o.emu ? &o.eseg : NULL);
    fr_agent_enter(a);
    rc = run(a, write ? "frpc_put" : "frpc_get", d.rank, timeout_ms,
             len ? start_one : start_nothing, &o, out);
    fr_agent_leave(a);
    return rc;
}

int frpc_get(frpc_mem *local, size_t local_off, const void *desc,
             size_t desc_len, size_t remote_off, size_t len, int timeout_ms)
{
    return transfer(local, local_off, desc, desc_len, remote_off, len,
                    timeout_ms, 0, NULL);
}

int frpc_put(frpc_mem *local, size_t local_off, const void *desc,
             size_t desc_len, size_t remote_off, size_t len, int timeout_ms)
{
    return transfer(local, local_off, desc, desc_len, remote_off, len,
                    timeout_ms, 1, NULL);
}

int frpc_get_async(frpc_mem *local, size_t local_off, const void *desc,
                   size_t desc_len, size_t remote_off, size_t len,
                   int timeout_ms, frpc_future **out)
{
    if (!out)
        return FRPC_EINVAL;
    return transfer(local, local_off, desc, desc_len, remote_off, len,
                    timeout_ms, 0, out);
}

int frpc_put_async(frpc_mem *local, size_t local_off, const void *desc,
                   size_t desc_len, size_t remote_off, size_t len,
                   int timeout_ms, frpc_future **out)
{
    if (!out)
        return FRPC_EINVAL;
    return transfer(local, local_off, desc, desc_len, remote_off, len,
                    timeout_ms, 1, out);
}

/* ---- batches -------------------------------------------------------- */

/* The first frpc_xfer a program can have been built with. */
#define FR_XFER_V1_SIZE (offsetof(frpc_xfer, len) + sizeof(size_t))
_Static_assert(sizeof(frpc_xfer) <= FR_SIZED_MAX, "room to grow");

/* A batch checked and laid out, before it starts. */
typedef struct batch_args {
    fr_rma_seg *segs;
    fr_emu_seg *esegs; /* the same, for the emulation */
    int emu;           /* by messages (by_messages of any op) */
    fr_batch *ctx;  /* its local regions filled in; NULL: moves nothing */
    size_t nsegs;
    const void *notify;
    size_t notify_len;
} batch_args;

static const frpc_xfer *op_at(const frpc_xfer *ops, size_t op_size, size_t i)
{
    return (const frpc_xfer *)((const char *)ops + i * op_size);
}

/* An op's own shape, before its descriptor is looked at: FRPC_E* or 0,
 * the batch's agent set by its first op. */
static int check_op_shape(const frpc_xfer *x, frpc_agent **agent)
{
    if (!x->local || (x->op != FRPC_XFER_GET && x->op != FRPC_XFER_PUT))
        return FRPC_EINVAL;
    if (!x->local->agent)
        return FRPC_ESHUTDOWN;
    if (!*agent)
        *agent = x->local->agent;
    return x->local->agent == *agent ? 0 : FRPC_EINVAL;
}

/* The batch goes by messages (op i is the first that must): its ops
 * are laid out for the emulation too, those before i now. Until then
 * only the provider's layout is made (the emulation's is twice its size,
 * and a native batch of 20,000 ops paid a page fault every 40). */
static int go_by_messages(const frpc_xfer *ops, size_t op_size, size_t i,
                          size_t n, batch_args *b)
{
    if (!(b->esegs = calloc(n, sizeof(*b->esegs))))
        return FRPC_ENOMEM;
    size_t k = 0;
    for (size_t j = 0; j < i; j++) {
        const frpc_xfer *x = op_at(ops, op_size, j);
        if (!x->len)
            continue;
        lay_emu(&b->esegs[k++], x->local, x->local_off, x->desc,
                x->remote_off, x->len, x->op == FRPC_XFER_PUT);
    }
    b->emu = 1;
    return 0;
}

/* Checks every op in order (the first bad one's code, whatever is wrong
 * with it) and lays the batch out in *b: its segments, and its context
 * with the regions that move bytes. *agent and *dst: the batch's. */
static int prepare(const frpc_xfer *ops, size_t n, size_t op_size,
                   const void *notify, size_t notify_len, batch_args *b,
                   frpc_agent **agent, uint32_t *dst)
{
    frpc_agent *a = NULL;
    int rc;

    memset(b, 0, sizeof(*b));
    if (!ops || n == 0 || op_size < FR_XFER_V1_SIZE ||
        op_size > FR_SIZED_MAX ||
        notify_len > FRPC_NOTIFY_MAX || (notify_len && !notify))
        return FRPC_EINVAL;
    if (!(b->segs = calloc(n, sizeof(*b->segs))) ||
        !(b->ctx = calloc(1, sizeof(*b->ctx) + notify_len +
                                 n * sizeof(frpc_mem *) + sizeof(void *)))) {
        rc = FRPC_ENOMEM;
        goto fail;
    }
    /* The region pointers after the notification's bytes, aligned. */
    size_t at = (sizeof(*b->ctx) + notify_len + sizeof(void *) - 1) /
                sizeof(void *) * sizeof(void *);
    b->ctx->local = (frpc_mem **)((char *)b->ctx + at);
    for (size_t i = 0; i < n; i++) {
        const frpc_xfer *x = op_at(ops, op_size, i);
        int write = x->op == FRPC_XFER_PUT;
        fr_memdesc d;
        if ((rc = check_op_shape(x, &a)))
            goto fail;
        if (!x->desc) { /* a NULL, as frpc_get's: no refusal counted */
            rc = FRPC_EINVAL;
            goto fail;
        }
        if ((rc = check(x->local, x->local_off, x->desc, x->desc_len,
                        x->remote_off, x->len, write, &d)))
            goto refused;
        if (i == 0)
            *dst = d.rank;
        else if (d.rank != *dst) {
            rc = FRPC_EINVAL; /* one owner per batch */
            goto refused;
        }
        if (!x->len)
            continue;
        if (!b->emu && by_messages(a, &d) &&
            (rc = go_by_messages(ops, op_size, i, n, b)))
            goto fail;
        lay(x->local, x->local_off, x->desc, &d, x->remote_off, x->len,
            write, &b->segs[b->nsegs], b->emu ? &b->esegs[b->nsegs] : NULL);
        b->nsegs++;
        /* Each region once per run of ops on it: a batch holds it busy
         * once, not once per op (20,000 atomic adds on one line). */
        if (!b->ctx->nlocal || b->ctx->local[b->ctx->nlocal - 1] != x->local)
            b->ctx->local[b->ctx->nlocal++] = x->local;
    }
    /* The notification is a message of this rank's: over its limit it
     * could never be sent, so say so before any data moves. */
    if (notify_len > a->set.max_msg) {
        rc = FRPC_ETOOBIG;
        goto fail;
    }
    b->ctx->a = a;
    b->ctx->notify_len = notify_len;
    if (notify_len)
        memcpy(b->ctx->notify, notify, notify_len);
    b->notify = notify;
    b->notify_len = notify_len;
    *agent = a;
    return 0;
refused:
    count_refusal(a, rc);
fail:
    free(b->segs);
    free(b->esegs);
    free(b->ctx);
    memset(b, 0, sizeof(*b));
    return rc;
}

static int start_batch(frpc_agent *a, const fr_pending *p, void *arg)
{
    batch_args *b = arg;
    fr_batch *ctx = b->ctx;
    if (!b->nsegs) { /* nothing to move: the notification alone */
        atomic_fetch_add(&a->xfer_batches, 1); /* posted all the same */
        if (b->notify_len)
            fr_notify_send_for(a, p->dst, p->id, p->deadline, b->notify,
                               b->notify_len);
        else
            start_nothing(a, p, NULL);
        return 0; /* an entry ended by the send counts as started */
    }
    ctx->deadline = p->deadline;
    fr_rma op = {.dst = p->dst, .segs = b->segs, .nsegs = (unsigned)b->nsegs,
                 .deadline_ns = p->deadline, .done = batch_done, .ctx = ctx,
                 .id = p->id};
    for (size_t i = 0; i < ctx->nlocal; i++)
        atomic_fetch_add(&ctx->local[i]->busy, 1);
    int rc = post(a, &op, b->esegs, b->emu);
    if (rc) {
        for (size_t i = 0; i < ctx->nlocal; i++)
            atomic_fetch_sub(&ctx->local[i]->busy, 1);
        return rc;
    }
    b->ctx = NULL; /* batch_done frees it */
    atomic_fetch_add(&a->xfer_batches, 1);
    return 0;
}

static int batch(const frpc_xfer *ops, size_t n, size_t op_size,
                 const void *notify, size_t notify_len, int timeout_ms,
                 frpc_future **out)
{
    batch_args b;
    frpc_agent *a;
    uint32_t dst = 0;
    int rc = prepare(ops, n, op_size, notify, notify_len, &b, &a, &dst);
    if (rc)
        return rc;
    fr_agent_enter(a);
    rc = run(a, "frpc_transfer", dst, timeout_ms, start_batch, &b, out);
    fr_agent_leave(a);
    free(b.segs);
    free(b.esegs);
    free(b.ctx); /* NULL once the fabric has it */
    return rc;
}

int frpc_transfer_sized(const frpc_xfer *ops, size_t n, size_t op_size,
                        const void *notify, size_t notify_len, int timeout_ms)
{
    return batch(ops, n, op_size, notify, notify_len, timeout_ms, NULL);
}

int frpc_transfer_async_sized(const frpc_xfer *ops, size_t n, size_t op_size,
                              const void *notify, size_t notify_len,
                              int timeout_ms, frpc_future **out)
{
    if (out)
        *out = NULL;
    if (!out)
        return FRPC_EINVAL;
    return batch(ops, n, op_size, notify, notify_len, timeout_ms, out);
}
