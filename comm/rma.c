/*
 * One-sided transfers: registered regions, and gets and puts between a
 * local region and a peer's (rpc/mem.c builds frpc_get/frpc_put on them).
 *
 * Design notes
 * - A transfer is split into chunks of at most rma_chunk bytes, posted
 *   back to back (the provider pipelines them); each chunk's completion
 *   names its chunk, whose parent is the transfer. Posting takes room the
 *   way sends do (tx_cap, fr__backoff), bounded by the op's deadline.
 * - Counters (chunks out, chunks done) change under rndv_lock: a chunk
 *   may complete on the polling thread while the posting thread is still
 *   posting the next ones. `posting` keeps a transfer from ending under
 *   the poster's feet; the poster looks again when it is done.
 * - A transfer ends once: when its last chunk completes, or when its peer
 *   is marked lost (the poll that sees the mark). Ended with chunks still
 *   in the provider's hands, it moves to rma_abandoned and is freed when
 *   the last comes back, or at close: the provider never writes into
 *   freed memory of ours. Its region's memory is the caller's; rpc/mem.c
 *   holds the region while a transfer may touch it.
 * - Puts ask for delivery completion (shm: see rma_write_flags), so a
 *   completed put is in the owner's memory and a call sent after it sees
 *   the bytes.
 * - shm in libfabric 1.17 checks no key on its fast path (process_vm_
 *   readv/writev at the descriptor's address): a stale descriptor would
 *   reach whatever is mapped there now. So there the owner lists its
 *   regions in its doorbell, and a transfer holds each remote region's
 *   listing from before its post until it is freed (every chunk back
 *   from the provider, whichever path copied): one whose region is no
 *   longer listed is refused before anything is posted, and the owner's
 *   deregistration waits for the holds (doorbell.h says why that is
 *   enough).
 * - Transfers in flight count in f->transfers: while there are any, the
 *   progress thread keeps polling. The owner's doorbell is rung after a
 *   post only where its poll serves the transfer (not shm's fast path,
 *   which copies with process_vm_readv/writev from our side: waking an
 *   idle owner for each 8-byte get cost 11 us a round trip on 2 cores),
 *   and whenever a post finds no room.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/clock.h"
#include "comm/fabric_internal.h"
#include "comm/fault.h"
#include "comm/memdesc.h"
#include "comm/zalloc.h"

/* A region's registration lives while its owner holds it or a chunk
 * the provider has not given back uses it (refs: 1 for the owner, 1 per
 * such chunk): providers keep a posted operation's descriptor, and rxm
 * touched a closed one when a dead peer's reads were flushed at close
 * (a segfault in CI after a region was deregistered at once, as the
 * header allows for a lost peer's transfers). Whatever is left when the
 * endpoint has closed is closed then. */
struct fr_fabric_mr {
    fr_fabric *f;
    struct fid_mr *mr;
    uint8_t *buf;
    atomic_int refs;
    struct fr_fabric_mr *next, *prev; /* f->mrs, under rndv_lock */
};

int fr_fabric_mr_reg(fr_fabric *f, void *buf, size_t len, unsigned remote,
                     fr_fabric_mr **out)
{
    uint64_t access = FI_READ | FI_WRITE;
    fr_fabric_mr *m = calloc(1, sizeof(*m));
    int rc;

    if (!m)
        return FRPC_ENOMEM;
    if (remote & FR_MEMDESC_READ)
        access |= FI_REMOTE_READ;
    if (remote & FR_MEMDESC_WRITE)
        access |= FI_REMOTE_WRITE;
    if ((rc = fr__reg_block(f, buf, len, access, &m->mr))) {
        free(m);
        return rc;
    }
    m->f = f;
    m->buf = buf;
    atomic_init(&m->refs, 1);
    fr_spin_lock(&f->rndv_lock);
    m->next = f->mrs;
    if (m->next)
        m->next->prev = m;
    f->mrs = m;
    fr_spin_unlock(&f->rndv_lock);
    *out = m;
    return 0;
}

int fr_fabric_rma_usable(fr_fabric *f, char *why, size_t len)
{
    const uint64_t need = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ |
                          FI_REMOTE_WRITE;
    const char *prov = f->info->fabric_attr->prov_name;
    struct fid_mr *mr = NULL;
    uint64_t caps = f->info->caps;
    if ((caps & need) != need) {
        snprintf(why, len, "provider %s has no %s", prov,
                 (caps & FI_RMA) ? "FI_READ/FI_WRITE (remote) for RMA"
                                 : "FI_RMA");
        return FRPC_ENOBACKEND;
    }
    void *buf = calloc(1, 4096);
    if (!buf)
        return FRPC_ENOMEM;
    int rc = fr_fault_hit(FR_FAULT_RMA_PROBE)
                 ? FRPC_ETRANSPORT
                 : fr__reg_block(f, buf, 4096, need & ~FI_RMA, &mr);
    if (mr)
        fi_close(&mr->fid);
    free(buf);
    if (rc) {
        snprintf(why, len, "provider %s refused a test registration for "
                 "RMA (4 KiB, remote read and write)", prov);
        return FRPC_ENOBACKEND;
    }
    return 0;
}

/*
 * sockets reads its TCP stream by peeking for a whole 24-byte header and
 * leaves a shorter piece in the socket. On loopback one segment can be
 * 64 KiB; a piece of it keeps the whole segment charged to a receive
 * buffer of 128 KiB (tcp_rmem's default, which sockets keeps on the side
 * that connected), leaving less than a segment free, so the kernel
 * advertises a zero window and never reopens it: the sender's zero-window
 * probes back off to minutes. Seen under load in 1 run of 2-60 of 1,000
 * puts, or 300 gets and 300 puts, between 3 ranks (ss: receiver Recv-Q 8
 * or 16 bytes, skmem r78656 of rb131072; sender in persist, backoff 7,
 * 200-530 KB unsent); over messages (emulated) 0 in 180 runs.
 */
int fr_fabric_rma_fragile(fr_fabric *f, char *why, size_t len)
{
    const char *prov = f->info->fabric_attr->prov_name;
    if (prov && strcmp(prov, "sockets") == 0) {
        snprintf(why, len, "provider sockets: its RMA can stall for "
                 "minutes under load (a TCP window it leaves shut)");
        return 1;
    }
    /* udp;ofi_rxd (libfabric 1.17): a read its owner refuses (a stale
     * descriptor's key) is never ended, and every later frame between
     * the two ranks waits behind it: the transfer, then each call, ended
     * at its timeout for ever (rma.c "bad" over udp, 2 ranks, and one). */
    if (prov && strstr(prov, "ofi_rxd")) {
        snprintf(why, len, "provider %s: an RMA its owner refuses (a stale "
                 "descriptor) jams all traffic between the two ranks",
                 prov);
        return 1;
    }
    return 0;
}

uint64_t fr_fabric_mr_addr(const fr_fabric_mr *m, size_t off)
{
    return m->f->mr_virt_addr ? (uint64_t)(uintptr_t)(m->buf + off)
                              : (uint64_t)off;
}

uint64_t fr_fabric_mr_key(const fr_fabric_mr *m)
{
    return fi_mr_key(m->mr);
}

static void close_region(fr_fabric_mr *m)
{
    fr_fabric *f = m->f;
    fr_spin_lock(&f->rndv_lock);
    if (m->prev)
        m->prev->next = m->next;
    else
        f->mrs = m->next;
    if (m->next)
        m->next->prev = m->prev;
    fr_spin_unlock(&f->rndv_lock);
    fi_close(&m->mr->fid);
    free(m);
}

static void region_hold(fr_fabric_mr *m)
{
    atomic_fetch_add(&m->refs, 1);
}

static void region_drop(fr_fabric_mr *m)
{
    if (atomic_fetch_sub(&m->refs, 1) == 1)
        close_region(m);
}

void fr_fabric_mr_close(fr_fabric_mr *m)
{
    if (m)
        region_drop(m);
}

void fr__rma_close_regions(fr_fabric *f)
{
    while (f->mrs) {
        fr_fabric_mr *m = f->mrs;
        f->mrs = m->next;
        fi_close(&m->mr->fid);
        free(m);
    }
}

/* Bytes of a transfer of n chunks and nsegs segments. */
static size_t xfer_size(unsigned n, unsigned nsegs)
{
    return sizeof(fr_rma_xfer) + n * sizeof(fr_rma_chunk) +
           nsegs * sizeof(fr_rma_seg);
}

/* Single-chunk transfers (every small get or put) reuse the one kept in
 * f->rma_spare; any other is malloc'd. */
static int is_single(unsigned n, unsigned nsegs)
{
    return n == 1 && nsegs == 1;
}

static fr_rma_xfer *alloc_xfer(fr_fabric *f, unsigned n, unsigned nsegs)
{
    fr_rma_xfer *x = NULL;
    size_t size = xfer_size(n, nsegs);
    if (is_single(n, nsegs) &&
        (x = atomic_exchange_explicit(&f->rma_spare, NULL,
                                      memory_order_acquire)))
        return memset(x, 0, size);
    return fr_zalloc(size);
}

/* ---- regions listed in the owner's doorbell (fabric.h) ------------- */

int fr_fabric_regions_checked(const fr_fabric *f)
{
    return f->rma_by_initiator && f->bell;
}

uint32_t fr_fabric_region_list(fr_fabric *f, uint64_t id)
{
    int slot = fr_fabric_regions_checked(f)
                   ? fr_doorbell_region_open(f->bell, id)
                   : -1;
    return slot < 0 ? 0 : (uint32_t)slot + 1;
}

void fr_fabric_region_seal(fr_fabric *f, uint32_t slot)
{
    if (slot)
        fr_doorbell_region_seal(f->bell, (int)slot - 1);
}

void fr_fabric_region_unseal(fr_fabric *f, uint32_t slot, uint64_t id)
{
    if (slot)
        fr_doorbell_region_unseal(f->bell, (int)slot - 1, id);
}

void fr_fabric_region_unlist(fr_fabric *f, uint32_t slot)
{
    if (slot)
        fr_doorbell_region_close(f->bell, (int)slot - 1);
}

int fr_fabric_region_listed(fr_fabric *f, uint32_t dst, uint32_t slot,
                            uint64_t id)
{
    return !slot || !f || !fr_fabric_regions_checked(f) || dst >= f->world ||
           fr_doorbell_region_listed(f->bell, dst, (int)slot - 1, id);
}

int fr_fabric_region_held(fr_fabric *f, uint32_t slot)
{
    if (!slot)
        return 0;
    /* A lost peer never gives its holds back (it died holding them); an
     * ended one gave back all it had (fr__rma_free_all). */
    for (uint32_t p = 0; p < f->world; p++)
        if (!fr__lost(f, p) &&
            (p == f->rank || !fr_doorbell_peer_ended(f->bell, p)) &&
            fr_doorbell_region_held_by(f->bell, p, (int)slot - 1))
            return 1;
    return 0;
}

/* Gives back the listings x holds. */
static void release_regions(fr_fabric *f, fr_rma_xfer *x)
{
    if (!x->holds)
        return;
    for (unsigned i = 0; i < x->op.nsegs; i++)
        if (x->seg[i].hold >= 0 && !fr_fault_hit(FR_FAULT_HOLD_KEPT))
            fr_doorbell_region_release(f->bell, x->op.dst, x->seg[i].hold);
    x->holds = 0;
}

/* Holds the owner's listing of each remote region of x: 0, or
 * FRPC_EACCES (one is no longer registered: nothing held then). A run of
 * segments on one region (slot and id: a stale descriptor may name the
 * slot a live region took since) shares the first one's hold. */
static int hold_regions(fr_fabric *f, fr_rma_xfer *x)
{
    uint32_t held_slot = 0;
    uint64_t held_id = 0;
    if (!fr_fabric_regions_checked(f))
        return 0; /* x->holds stays 0: no seg's hold is read */
    for (unsigned i = 0; i < x->op.nsegs; i++) {
        fr_rma_seg *sg = &x->seg[i];
        sg->hold = -1;
        if (!sg->region_slot ||
            (sg->region_slot == held_slot && sg->region_id == held_id))
            continue;
        int h = fr_doorbell_region_hold(f->bell, x->op.dst,
                                        (int)sg->region_slot - 1,
                                        sg->region_id);
        if (h == FR_REGION_GONE) {
            release_regions(f, x);
            return FRPC_EACCES;
        }
        if (h >= 0) {
            sg->hold = h;
            x->holds = 1;
            held_slot = sg->region_slot;
            held_id = sg->region_id;
        }
    }
    return 0;
}

/* Frees x, or keeps it as the spare if it is single and none is kept. */
static void free_xfer(fr_fabric *f, fr_rma_xfer *x)
{
    fr_rma_xfer *none = NULL;
    release_regions(f, x);
    if (is_single(x->chunks, x->op.nsegs) &&
        atomic_compare_exchange_strong_explicit(&f->rma_spare, &none, x,
                                                memory_order_release,
                                                memory_order_relaxed))
        return;
    free(x);
}

static void link_x(fr_rma_xfer **head, fr_rma_xfer *x)
{
    x->prev = NULL;
    x->next = *head;
    if (x->next)
        x->next->prev = x;
    *head = x;
}

static void unlink_x(fr_rma_xfer **head, fr_rma_xfer *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        *head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->next = x->prev = NULL;
}

/* Lists x as under way (rma_active, transfers): rndv_lock held, or
 * taken here. */
static void list_x_locked(fr_fabric *f, fr_rma_xfer *x)
{
    link_x(&f->rma_active, x);
    fr__transfers_add_locked(f, 1);
}

static void list_x(fr_fabric *f, fr_rma_xfer *x)
{
    fr_spin_lock(&f->rndv_lock);
    list_x_locked(f, x);
    fr_spin_unlock(&f->rndv_lock);
}

/* Under rndv_lock, as x ends (its err set): what moved counts, whatever
 * ended the rest (a deadline, a refusal part way, its owner's loss), but
 * for a transport error (frpc_stats). rndv_lock's holders are the only
 * writers: a load and a store, not a locked add. */
static void count_moved_locked(fr_fabric *f, const fr_rma_xfer *x)
{
    if (x->err != FRPC_ETRANSPORT)
        atomic_store_explicit(
            &f->st.rma_bytes,
            atomic_load_explicit(&f->st.rma_bytes, memory_order_relaxed) +
                x->bytes_done,
            memory_order_relaxed);
}

/* Under rndv_lock: ends x if it can end now (not posting, every chunk
 * done, not ended yet). Returns 1 if the caller is to run its done. */
static int end_if_complete_locked(fr_fabric *f, fr_rma_xfer *x)
{
    if (x->posting || x->ended || x->chunks_done < x->chunks)
        return 0;
    x->ended = 1;
    unlink_x(&f->rma_active, x);
    fr__transfers_add_locked(f, -1);
    count_moved_locked(f, x);
    return 1;
}

static void report(fr_rma_xfer *x)
{
    x->op.done(&x->op, x->err, x->err ? x->why : NULL);
}

/* Out of rndv_lock: runs done if the transfer just ended (run), frees it
 * once nothing of it is left with the provider (free_it). */
static void after_unlock(fr_fabric *f, fr_rma_xfer *x, int run, int free_it)
{
    if (run)
        report(x);
    if (free_it)
        free_xfer(f, x);
}

/* Maps a failed chunk's provider error to a code and words. */
static int chunk_error(int err, const char **why)
{
    switch (err < 0 ? -err : err) {
    case -FR_ERR_COPY_FAILED:
        *why = "the provider could not copy the owner's memory (unmapped "
               "there, or the owner gone)";
        return FRPC_EACCES;
    case FI_EACCES:
    case FI_EKEYREJECTED:
    case FI_EINVAL:
    case FI_EPERM:
        *why = "the owner's provider refused the access (a stale or "
               "foreign key, or a slice outside the region)";
        return FRPC_EACCES;
    default:
        /* A dropped connection is no death: liveness decides that. */
        *why = fi_strerror(err < 0 ? -err : err);
        return FRPC_ETRANSPORT;
    }
}

static ssize_t post_chunk_now(fr_fabric *f, fr_rma_xfer *x,
                              fr_rma_chunk *c)
{
    const fr_rma_seg *sg = &x->seg[c->seg];
    uint8_t *local = sg->local->buf + sg->local_off + c->off;
    void *desc = fi_mr_desc(sg->local->mr);
    uint64_t raddr = sg->remote_addr + c->off;
    fi_addr_t peer = f->peer[x->op.dst];

    if (!sg->write)
        return fi_read(f->ep, local, c->len, desc, peer, raddr, sg->key,
                       &c->op.fictx);
    struct iovec iov = {.iov_base = local, .iov_len = c->len};
    struct fi_rma_iov rma = {.addr = raddr, .len = c->len, .key = sg->key};
    struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1,
                             .addr = peer, .rma_iov = &rma,
                             .rma_iov_count = 1, .context = &c->op.fictx};
    return fi_writemsg(f->ep, &msg, FI_COMPLETION | f->rma_write_flags);
}

/* Posts c; while the provider holds it, it holds its region. */
static ssize_t post_chunk(fr_fabric *f, fr_rma_xfer *x, fr_rma_chunk *c)
{
    const fr_rma_seg *sg = &x->seg[c->seg];
    region_hold(sg->local);
    fr__rma_ops_add(f, x->op.dst, 1); /* before: it may complete */
    if (f->rma_by_initiator)
        fr__ledger_add(f, &c->op);
    ssize_t ret = post_chunk_now(f, x, c);
    if (ret) {
        if (f->rma_by_initiator)
            fr__ledger_drop(f, &c->op);
        fr__rma_ops_add(f, x->op.dst, -1);
        region_drop(sg->local);
    }
    return ret;
}

/* A chunk is over (err: how it failed, or 0): counts it, and ends or
 * frees its transfer when it was the last. */
static void chunk_over(fr_fabric *f, fr_rma_chunk *c, int err)
{
    fr_rma_xfer *x = c->parent;
    int run, free_it;

    fr_spin_lock(&f->rndv_lock);
    x->out--;
    x->chunks_done++;
    if (err && !x->err) {
        x->err = chunk_error(err, &x->why);
        x->op.owner_unsure = err == FR_ERR_COPY_FAILED;
    }
    if (!err)
        x->bytes_done += c->len;
    run = end_if_complete_locked(f, x);
    free_it = x->ended && x->out == 0 && !x->posting;
    if (free_it && !run)
        unlink_x(&f->rma_abandoned, x);
    fr_spin_unlock(&f->rndv_lock);
    /* In a poll (handle_now, fail_ledger): fr_taken_ns is this poll's
     * time or 0 (each poll clears it first), never an older poll's. */
    if (run)
        x->op.done_ns = fr_taken_ns;
    after_unlock(f, x, run, free_it);
}

void fr__rma_on_chunk(fr_fabric *f, fr_rma_chunk *c, int err)
{
    /* A dropped connection fails the chunk, not posted again: it may be
     * the one whose stale key made the owner's provider drop it (tcp;
     * ofi_rxm), and each post would drop it again with what else is on it.
     * The upper layer hears of the drop (fr__note_dropped). */
    if (err)
        fr__note_dropped(f, c->parent->op.dst, err);
    fr__tx_give(f);
    fr__rma_ops_add(f, c->parent->op.dst, -1);
    /* Given back: before chunk_over, which may free the transfer. */
    region_drop(c->parent->seg[c->seg].local);
    chunk_over(f, c, err);
}


/* A new transfer for op, its chunks laid out, or NULL (no memory). */
static fr_rma_xfer *new_xfer(fr_fabric *f, const fr_rma *op, unsigned n)
{
    fr_rma_xfer *x = alloc_xfer(f, n, op->nsegs);
    if (!x)
        return NULL;
    x->op = *op;
    x->seg = (fr_rma_seg *)&x->chunk[n];
    memcpy(x->seg, op->segs, op->nsegs * sizeof(x->seg[0]));
    x->op.segs = x->seg;
    x->op.segs_posted = NULL; /* the caller's, read only while it posts */
    x->op.done_ns = 0;
    x->chunks = n;
    unsigned k = 0;
    for (unsigned s = 0; s < op->nsegs; s++)
        for (size_t off = 0; off < op->segs[s].len; off += f->rma_chunk) {
            fr_rma_chunk *c = &x->chunk[k++];
            size_t left = op->segs[s].len - off;
            c->op.type = FR_OP_RMA;
            c->parent = x;
            c->seg = s;
            c->off = off;
            c->len = left < f->rma_chunk ? left : f->rma_chunk;
        }
    return x;
}

/* Posts chunk c, waiting for room up to the deadline: 0, or the code
 * (with the provider's words in *why when it refused). */
static int post_with_room(fr_fabric *f, fr_rma_xfer *x, fr_rma_chunk *c,
                          const char **why)
{
    uint64_t rung = 0;
    for (;;) {
        ssize_t ret = -FI_EAGAIN;
        int rc;
        if (fr__tx_take(f)) {
            ret = post_chunk(f, x, c);
            if (ret)
                fr__tx_give(f);
        }
        if (ret == 0)
            return 0;
        if (ret != -FI_EAGAIN)
            return chunk_error((int)ret, why);
        /* No room: the owner may have to drain its queue first. Once a
         * millisecond is enough: a ring is a syscall, and a batch that
         * waits for room spins here (tcp, 1,000 puts of 4 KiB: every
         * spin rang). */
        uint64_t now = fr_now_ns();
        if (now - rung >= 1000000u) {
            fr_doorbell_ring(f->bell, x->op.dst);
            rung = now;
        }
        if ((rc = fr__backoff(f, x->op.dst, x->op.deadline_ns)))
            return rc;
    }
}

int fr_fabric_rma(fr_fabric *f, const fr_rma *op)
{
    unsigned n = 0, i;
    fr_rma_xfer *x;
    int rc = 0, run, free_it;
    const char *why = NULL;

    if (!op || !op->segs || !op->nsegs || !op->done || op->dst >= f->world)
        return FRPC_EINVAL;
    for (i = 0; i < op->nsegs; i++) {
        if (op->segs[i].len && !op->segs[i].local)
            return FRPC_EINVAL;
        n += (unsigned)((op->segs[i].len + f->rma_chunk - 1) / f->rma_chunk);
    }
    if (!n)
        return FRPC_EINVAL;
    if (fr__lost(f, op->dst))
        return FRPC_EPEERLOST;
    if (!(x = new_xfer(f, op, n)))
        return FRPC_ENOMEM;
    if ((rc = hold_regions(f, x))) {
        free_xfer(f, x);
        return rc;
    }
    x->posting = 1;
    /* Every chunk counts as out before its post: it may complete at once
     * on the polling thread. Those never posted are taken back below. */
    x->out = n;
    /* A single chunk is listed after its post, under the lock that ends
     * the posting: one lock less per small transfer. Meanwhile its
     * completion on a polling thread only counts it (posting), and
     * fr__rma_end_lost skips a posting transfer anyway. Longer ones are
     * listed first: they count as under way (transfers) while they post. */
    int listed = n > 1;
    if (listed)
        list_x(f, x);

    for (i = 0; i < n; i++) {
        /* A batch of thousands posts for milliseconds (over shm each
         * post copies its bytes): not past its deadline. */
        if (i && fr_now_ns() >= op->deadline_ns) {
            rc = FRPC_ETIMEDOUT;
            why = "its deadline passed while it was posted";
            break;
        }
        if ((rc = post_with_room(f, x, &x->chunk[i], &why)))
            break;
    }
    if (i > 0 && !f->rma_by_initiator)
        fr_doorbell_ring(f->bell, op->dst); /* its poll serves the chunks */
    if (op->segs_posted) /* before the lock: x may be gone after it */
        *op->segs_posted = i ? x->chunk[i - 1].seg + 1 : 0;

    fr_spin_lock(&f->rndv_lock);
    if (!listed && i > 0)
        list_x_locked(f, x);
    x->posting = 0;
    if (rc) {
        x->out -= n - i;
        x->chunks_done += n - i; /* never posted: done, with the error */
        if (!x->err) {
            x->err = rc;
            x->why = why ? why
                   : rc == FRPC_ETIMEDOUT
                             ? "no room to post the transfer in time"
                             : rc == FRPC_EPEERLOST ? "peer lost" : NULL;
        }
    }
    if (i == 0) { /* nothing posted: the caller hears it, not done */
        if (listed) {
            unlink_x(&f->rma_active, x);
            fr__transfers_add_locked(f, -1);
        }
        fr_spin_unlock(&f->rndv_lock);
        free_xfer(f, x);
        return rc;
    }
    run = end_if_complete_locked(f, x);
    /* A peer lost while we posted: its poll may have passed us by. */
    if (!run && !x->ended && fr__lost(f, op->dst))
        atomic_fetch_add(&f->lost_work, 1);
    free_it = x->ended && x->out == 0;
    fr_spin_unlock(&f->rndv_lock);
    after_unlock(f, x, run, free_it);
    return 0;
}

int fr__rma_end_lost(fr_fabric *f)
{
    fr_rma_xfer *x, *next, *ended = NULL;
    int n = 0;

    fr_spin_lock(&f->rndv_lock);
    for (x = f->rma_active; x; x = next) {
        next = x->next;
        if (x->posting || !fr__lost(f, x->op.dst))
            continue;
        x->ended = 1;
        unlink_x(&f->rma_active, x);
        fr__transfers_add_locked(f, -1);
        x->err = FRPC_EPEERLOST;
        x->why = "peer lost during a one-sided transfer";
        count_moved_locked(f, x);
        x->next = ended; /* a private list until reported */
        ended = x;
    }
    fr_spin_unlock(&f->rndv_lock);
    for (x = ended; x; x = next, n++) {
        next = x->next;
        report(x);
        fr_spin_lock(&f->rndv_lock);
        int free_it = x->out == 0;
        if (!free_it)
            link_x(&f->rma_abandoned, x);
        fr_spin_unlock(&f->rndv_lock);
        if (free_it)
            free_xfer(f, x);
    }
    return n;
}

void fr__rma_free_all(fr_fabric *f, int keep_posted)
{
    /* A transfer not ended yet (fr_fabric_quiesce ran out of time: its
     * owner stopped, or slow) ends now, once, as fr_fabric_rma promises:
     * its done owns the caller's context (a batch's, rpc/transfer.c),
     * which freeing it alone leaked. The endpoint is closed: no chunk of
     * it comes back any more. */
    for (fr_rma_xfer *x = f->rma_active; x; x = x->next) {
        if (!x->err) {
            x->err = FRPC_ESHUTDOWN;
            x->why = "the endpoint closed before the transfer completed";
        }
        report(x);
    }
    free(atomic_exchange(&f->rma_spare, NULL));
    if (keep_posted)
        return;
    fr_rma_xfer **lists[2] = {&f->rma_active, &f->rma_abandoned};
    for (int i = 0; i < 2; i++)
        while (*lists[i]) {
            fr_rma_xfer *x = *lists[i];
            *lists[i] = x->next;
            release_regions(f, x);
            free(x);
        }
}
