/*
 * One-sided transfers emulated by messages, the side that asks: a
 * transfer (one get or put, or a batch's segments) becomes requests to
 * the owner's FR_EMU_GET_NAME / FR_EMU_PUT_NAME (emu_serve.c), at most
 * FR_EMU_CHUNK bytes each, and ends once as fr_fabric_rma's do, so that
 * transfer.c runs the same code above either.
 *
 * Design notes
 * - Each piece is a request with a pending entry of its own (malloc'ed,
 *   with an on_done hook), so it has what a call has: the transfer's
 *   deadline (past it, FRPC_ETIMEDOUT), FRPC_EPEERLOST when the owner is
 *   lost, FRPC_ESHUTDOWN at shutdown, a transport failure judged by
 *   liveness. Pieces count as calls in frpc_stats, as notifications do.
 * - A window keeps memory bounded and the owner busy: pieces are sent
 *   while fewer than FR_EMU_WINDOW_CHUNKS are out and their bytes stay
 *   within FR_EMU_WINDOW_BYTES (one at least), and each piece that ends
 *   sends the next ones. One thread sends at a time (pumping); a piece
 *   that ends meanwhile (on the polling thread, or at once when its send
 *   failed) asks it to look again (again) instead of nesting.
 * - A transfer ends once, when no piece is out and none is left to send,
 *   or none will be sent (the first failure stops the sending): its done
 *   then runs with the first failure. A get's piece lands in the local
 *   region in its on_done; the region stays busy (the caller holds it)
 *   until done has run, so frpc_mem_deregister waits for every piece,
 *   also those of a transfer whose own wait ended (timeout, cancel).
 *   Once that wait has ended no more pieces are sent: the sender looks
 *   at the transfer's entry before each (one lookup per piece).
 */
#include "config.h"

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "comm/clock.h"
#include "comm/copy_out.h"
#include "comm/zalloc.h"
#include "rpc/emu.h"
#include "rpc/mem.h"

typedef struct emu_xfer emu_xfer;

/* A piece lives until both its sender and its entry's end let go of it
 * (refs): the entry may end on another thread (a lost peer, a deadline
 * already past) while the sender still reads it. */
typedef struct emu_piece {
    fr_pending p; /* first: on_done gets &p */
    emu_xfer *x;
    unsigned seg;
    size_t off, len;
    atomic_int refs;
} emu_piece;

static void piece_unref(emu_piece *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1) {
        fr_pending_release(&c->p);
        free(c);
    }
}

struct emu_xfer {
    frpc_agent *a;
    fr_rma op;          /* what done gets */
    int timeout_ms;     /* for the pieces' timeout messages */
    size_t chunk;       /* a piece's most bytes on the wire */
    pthread_mutex_t lock;
    unsigned seg_next;  /* the next piece to send: segment, offset */
    size_t off_next;
    unsigned out;       /* pieces sent, not ended */
    size_t bytes_out;
    size_t bytes_done;
    int pumping, again, ended;
    int err;
    char *why;          /* the first failure's words (malloc'ed) */
    unsigned nsegs;
    fr_emu_seg segs[];
};

/* Under x->lock: the next piece to send, if the window has room. */
static int next_piece_locked(emu_xfer *x, emu_piece *c)
{
    while (x->seg_next < x->nsegs &&
           x->off_next >= x->segs[x->seg_next].len) {
        x->seg_next++;
        x->off_next = 0;
    }
    if (x->err || x->seg_next == x->nsegs)
        return 0;
    /* A put's piece carries its header too: within the chunk, so that
     * its args fill a block of FR_EMU_CHUNK exactly (4 MiB and 80 bytes
     * took an 8 MiB block at both ends, and twice the page faults when
     * the caches ran dry); a get's answer is the bytes alone. */
    size_t chunk = x->chunk - (x->segs[x->seg_next].write ? FR_EMU_HDR : 0);
    size_t left = x->segs[x->seg_next].len - x->off_next;
    size_t len = left < chunk ? left : chunk;
    if (x->out >= FR_EMU_WINDOW_CHUNKS ||
        (x->out && x->bytes_out + len > FR_EMU_WINDOW_BYTES))
        return 0;
    c->seg = x->seg_next;
    c->off = x->off_next;
    c->len = len;
    x->off_next += len;
    x->out++;
    x->bytes_out += len;
    return 1;
}

static void pump_locked(emu_xfer *x);

/* A piece is over with status (why: its malloc'ed words, taken). The
 * count and the pump are one hold of x->lock: once out may read 0, the
 * thread pumping may end and free x, so nothing here may touch x after
 * the lock is let go (two pieces ending on two threads, the second
 * ending x while the first was between its count and its pump, locked
 * a destroyed mutex: TSan, run_rma_emulated_tcp). */
static void piece_over(emu_xfer *x, size_t len, int status, char *why)
{
    pthread_mutex_lock(&x->lock);
    x->out--;
    x->bytes_out -= len;
    if (!status)
        x->bytes_done += len;
    else if (!x->err) {
        x->err = status;
        x->why = why;
        why = NULL;
    }
    pump_locked(x);
    free(why);
}

/* A piece's entry ended: its answer, or its failure. */
static void piece_done(fr_pending *p)
{
    emu_piece *c = (emu_piece *)p;
    emu_xfer *x = c->x;
    const fr_emu_seg *s = &x->segs[c->seg];
    int status = p->res.status;
    char *why = p->res.error;
    p->res.error = NULL;
    if (status == 0 && !s->write) {
        if (p->res.len == c->len) {
            memcpy(s->local->buf + s->local_off + c->off, p->res.data,
                   c->len);
            /* kept for the next piece's answer: see send_piece */
            fr_fabric_recycle_reply(x->a->fab, p->res.data, p->res.len);
            p->res.data = NULL;
        } else {
            status = FRPC_EPROTO;
            free(why);
            why = strdup("emulated get: the owner answered with a slice "
                         "of another length");
        }
    }
    size_t len = c->len;
    frpc_result_clear(&p->res);
    piece_unref(c);
    piece_over(x, len, status, why);
}

/* Sends piece c (its entry made here); ends it through piece_done if
 * that fails. c may be gone when this returns (it is let go of here). */
static void send_piece(emu_xfer *x, emu_piece *c)
{
    frpc_agent *a = x->a;
    const fr_emu_seg *s = &x->segs[c->seg];
    const char *name = s->write ? FR_EMU_PUT_NAME : FR_EMU_GET_NAME;
    uint8_t hdr[FR_EMU_HDR], *args = hdr;
    size_t alen = FR_EMU_HDR + (s->write ? c->len : 0);

    c->x = x;
    atomic_init(&c->refs, 2);
    int rc = fr_pending_add_counted(&a->pend, &c->p, x->op.dst, name,
                                    x->timeout_ms, x->op.deadline_ns,
                                    piece_done);
    if (rc) { /* FRPC_ENOMEM, or FRPC_ESHUTDOWN */
        size_t len = c->len;
        free(c);
        piece_over(x, len, rc, NULL);
        return;
    }
    /* A put's piece is built in a block of the fabric's cache, which the
     * owner reads where it is (and the cache gets back), and a get's
     * answer is read into one and given back in piece_done: fresh
     * memory for each piece of MiBs cost a page fault a page, and a 16
     * MiB transfer moved 0.22-0.29 GB/s against 5.2-5.4 at 1 MiB (shm,
     * W 1). */
    if (s->write && !(args = fr_fabric_take_block(a->fab, alen))) {
        fr_pending_abort(&a->pend, &c->p, FRPC_ENOMEM, "out of memory");
        piece_unref(c);
        return;
    }
    memcpy(args, s->desc, FRPC_MEM_DESC_SIZE);
    fr_emu_put64(args + FRPC_MEM_DESC_SIZE, s->remote_off + c->off);
    fr_emu_put64(args + FRPC_MEM_DESC_SIZE + 8, c->len);
    /* On an error the entry has ended with it (piece_done ran). */
    if (s->write) {
        /* streamed past this core's cache: the owner's core reads it */
        fr_copy_out(args + FR_EMU_HDR, s->local->buf + s->local_off + c->off,
                    c->len);
        fr_call_send_block_id(a, c->p.id, x->op.dst, name,
                              x->op.deadline_ns, args, alen);
    } else {
        fr_call_send_id(a, c->p.id, x->op.dst, name, x->op.deadline_ns, args,
                        alen);
    }
    piece_unref(c);
}

/* Ends x: its done, then it is freed. */
static void end(emu_xfer *x)
{
    if (x->err != FRPC_ETRANSPORT) /* as native ones (comm/rma.c) */
        atomic_fetch_add(&x->a->emu_bytes, x->bytes_done);
    x->op.done(&x->op, x->err, x->err ? x->why : NULL);
    free(x->why);
    pthread_mutex_destroy(&x->lock);
    free(x);
}

/* Under x->lock, which it lets go of: sends what the window allows;
 * ends x when nothing is out and nothing more will be sent. */
static void pump_locked(emu_xfer *x)
{
    if (x->pumping) {
        x->again = 1;
        pthread_mutex_unlock(&x->lock);
        return;
    }
    x->pumping = 1;
    do {
        x->again = 0;
        emu_piece next = {.x = x}, *c;
        while (next_piece_locked(x, &next)) {
            pthread_mutex_unlock(&x->lock);
            if (fr_now_ns() >= x->op.deadline_ns) {
                /* Past the deadline, though the transfer's entry may not
                 * have expired yet: this runs inside a poll, whose
                 * expiry comes after it, and a poll that sent a piece
                 * for each answer it took found more answers, and so
                 * on: batches of 20,000 pieces with a 5 ms timeout
                 * returned after 14-20 ms. */
                piece_over(x, next.len, FRPC_ETIMEDOUT, NULL);
            } else if (!fr_pending_deadline_of(&x->a->pend, x->op.id,
                                               x->op.dst)) {
                /* The transfer's own entry ended (cancel, timeout): no
                 * more pieces; those out end as they come. A cancelled
                 * 32 MiB get went on moving all its pieces, writing
                 * the local region for 2 s after the cancel. */
                piece_over(x, next.len, FRPC_ECANCELED, NULL);
            } else if ((c = malloc(sizeof(*c)))) {
                *c = next;
                if (!next.off) /* an op's first piece: the op is posted */
                    fr_transfers_count(x->a, x->segs[next.seg].write, 1);
                send_piece(x, c);
            } else {
                piece_over(x, next.len, FRPC_ENOMEM, NULL);
            }
            pthread_mutex_lock(&x->lock);
        }
    } while (x->again);
    x->pumping = 0;
    int done = !x->ended && x->out == 0;
    if (done)
        x->ended = 1;
    pthread_mutex_unlock(&x->lock);
    if (done)
        end(x);
}

int fr_emu_rma(frpc_agent *a, const fr_rma *op, const fr_emu_seg *segs,
               unsigned n)
{
    size_t bytes = 0;
    if (!op || !segs || !n || !op->done || op->dst >= (uint32_t)a->set.world)
        return FRPC_EINVAL;
    for (unsigned i = 0; i < n; i++) {
        if (segs[i].len && !segs[i].local)
            return FRPC_EINVAL;
        bytes += segs[i].len;
    }
    if (!bytes)
        return FRPC_EINVAL;
    if (fr_agent_peer_lost_why(a, op->dst))
        return FRPC_EPEERLOST;
    if (a->set.max_msg <= FR_EMU_HDR)
        return FRPC_ETOOBIG;
    emu_xfer *x = fr_zalloc(sizeof(*x) + n * sizeof(x->segs[0]));
    if (!x)
        return FRPC_ENOMEM;
    x->a = a;
    x->op = *op;
    x->op.segs = NULL;
    x->op.nsegs = 0;
    x->op.done_ns = 0; /* ended by a call's answer: its time is not kept */
    x->chunk = a->set.max_msg < FR_EMU_CHUNK ? a->set.max_msg : FR_EMU_CHUNK;
    x->timeout_ms = -1;
    if (op->deadline_ns != UINT64_MAX) {
        uint64_t now = fr_now_ns();
        uint64_t ms = op->deadline_ns > now
                          ? (op->deadline_ns - now + 999999u) / 1000000u
                          : 1;
        x->timeout_ms = ms > INT_MAX ? INT_MAX : (int)ms;
    }
    pthread_mutex_init(&x->lock, NULL);
    memcpy(x->segs, segs, n * sizeof(segs[0]));
    x->nsegs = n;
    pthread_mutex_lock(&x->lock);
    pump_locked(x); /* done may run in here: the caller expects that */
    return 0;
}
