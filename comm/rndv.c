/*
 * Rendezvous for payloads over the eager limit.
 *
 * Design notes
 * - Sender: the payload is copied into a block registered for remote read
 *   (or, lent or given, registered where it is: no copy), remembered under
 *   a fresh cookie, and announced by an eager frame whose payload is an
 *   fr_rndv_desc. The block is released when the receiver's RNDV_DONE
 *   names the cookie, when the receiver is lost, or when the fabric
 *   closes: back to the cache, freed (given), or the loan returned (lent).
 *   A lent or given payload is registered per transfer, with no cache:
 *   fi_mr_reg + fi_close measured 0.13-0.45 us on shm, tcp, sockets and
 *   udp (tools/mr_reg_cost.c), and a cache keyed by the caller's
 *   addresses would go stale when they are freed.
 * - The receiver sends RNDV_DONE only once none of its reads is under way
 *   (read, refused, or given back by the provider after it gave up): the
 *   sender may free or reuse the bytes then.
 * - A sender's end (fr_fabric_close, or fr_fabric_revoke_loans past its
 *   deadline) frees blocks and returns loans whose reader never said
 *   RNDV_DONE (stopped, say). Over shm's fast path the reader copies from
 *   the sender's memory without its registration, so the sender's
 *   doorbell says first that it ended, and a reader that finds it so after
 *   its last read throws the copy away (it may be torn); elsewhere the
 *   closed registration makes the later reads fail.
 * - Receiver: fi_read pulls the block in chunks of at most rma_chunk bytes
 *   into a block of its own; when the last chunk completes it answers
 *   RNDV_DONE first (so the sender's memory goes early), then delivers the
 *   message with the block owned by the upper layer.
 * - Every incoming transfer is on f->rndv_in until it ends, so a failure,
 *   or close, frees it exactly once.
 * - Bounds: a transfer has one deadline, set when its descriptor arrives:
 *   a request's caller's time left (the request's status, envelope v3),
 *   else FR_FABRIC_ANSWER_MS plus 100 ns a byte (10 MB/s), moved to
 *   FR_FABRIC_ANSWER_MS from now each time one of its reads completes: a
 *   response's caller has its own deadline in rpc/, so the transfer only
 *   ends when it stops moving (udp under TSan and a loaded machine pulled
 *   4 MB/s, and CI lost a 16 MiB reply to a flat 10 MB/s bound); a
 *   response's reads also last at least as long as its call still waits
 *   (cb.call_deadline): on tcp and udp a read progresses only while the
 *   sender polls, and a sender paused 13 s failed a 60 s call after 10 s
 *   (itest late). Posting
 *   its reads waits for room until then; a poll ends
 *   it if its reads have not all completed by then (a forged key that
 *   the provider never answers: a request is refused, a response ends
 *   its call with FRPC_ETIMEDOUT). A lost peer ends it at the next poll
 *   (fr__rndv_end_lost). An ended transfer whose reads the provider still
 *   holds is kept aside (rndv_abandoned), its block freed only when the
 *   last of them completes, or at close: the provider never writes into
 *   freed memory. Refusals and RNDV_DONE are answers: FR_FABRIC_ANSWER_MS
 *   from when they are sent, and never to a lost peer.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/clock.h"
#include "comm/copy_out.h"
#include "comm/fabric_internal.h"
#include "comm/fault.h"

#define FR_RNDV_NS_PER_BYTE 100u /* the slowest pull waited for */
#define FR_RNDV_SCAN_NS 100000000ull /* how often polls look for expiry */

static uint64_t next_requested_key(fr_fabric *f)
{
    return atomic_fetch_add(&f->next_key, 1);
}

int fr__reg_block(fr_fabric *f, void *buf, size_t len, uint64_t access,
                  struct fid_mr **mr)
{
    int ret = fi_mr_reg(f->domain, buf, len, access, 0,
                        next_requested_key(f), 0, mr, NULL);
    if (ret)
        return FRPC_ETRANSPORT;
    if (f->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
        if (fi_mr_bind(*mr, &f->ep->fid, 0) || fi_mr_enable(*mr)) {
            fi_close(&(*mr)->fid);
            *mr = NULL;
            return FRPC_ETRANSPORT;
        }
    }
    return 0;
}

/* Ends an outgoing payload that nobody will read any more: its block back
 * to the cache, its registration closed, a given buffer freed, a loan
 * returned (out stored last: the lender may free the loan after it). */
static void release_out(fr_fabric *f, fr_rndv_out *o)
{
    fr_doorbell_loan_close(f->bell, o->slot); /* before any byte goes */
    if (o->source == FR_RNDV_COPY) {
        fr__block_put(&f->out_cache, &o->blk);
    } else {
        if (o->blk.mr)
            fi_close(&o->blk.mr->fid);
        if (o->source == FR_RNDV_GIVEN) {
            free(o->blk.buf);
        } else if (o->source == FR_RNDV_BLOCK) {
            fr_fabric_release_block(f, o->blk.buf, o->blk.cap);
        } else {
            void (*returned)(void *) = o->loan->returned;
            void *ctx = o->loan->ctx;
            atomic_store(&o->loan->out, 0);
            if (returned)
                returned(ctx);
        }
    }
    free(o);
}

/* Where the payload's bytes will be read from: a copy in a cached block,
 * or the caller's own bytes registered for this transfer. */
static int out_block(fr_fabric *f, fr_rndv_out *o, const void *payload,
                     size_t len)
{
    int rc;
    if (o->source == FR_RNDV_COPY) {
        if ((rc = fr__block_get(f, &f->out_cache, len, &o->blk)))
            return rc;
        /* over shm the peer's core reads it (its process_vm_readv) */
        if (f->rma_by_initiator)
            fr_copy_out(o->blk.buf, payload, len);
        else
            memcpy(o->blk.buf, payload, len);
        return 0;
    }
    o->blk.buf = (void *)payload;
    o->blk.cap = len;
    return fr__reg_block(f, o->blk.buf, len, FI_REMOTE_READ, &o->blk.mr);
}

/*
 * A cookie: a sequence number above COOKIE_SLOT_BITS, and below them the
 * doorbell loan slot + 1 of a loan a reader copies straight from our
 * memory (0: none). The slot holds the cookie's upper part while the
 * loan is out, so that a sync call that timed out can take its args back
 * at once (fr_fabric_revoke_loan) and the reader tell its copy torn
 * (loan_still_out). Under rndv_lock.
 */
#define COOKIE_SLOT_BITS 11
#define COOKIE_SLOT_MASK ((1u << COOKIE_SLOT_BITS) - 1)
_Static_assert(FR_DOORBELL_LOANS < COOKIE_SLOT_MASK, "slot + 1 fits below");
static uint64_t take_cookie(fr_fabric *f, fr_rndv_out *o)
{
    uint64_t tag = f->next_cookie++ << COOKIE_SLOT_BITS;
    if (o->source == FR_RNDV_LENT && f->rma_by_initiator && f->bell)
        o->slot = fr_doorbell_loan_open(f->bell, tag);
    return tag | (uint64_t)(o->slot + 1);
}

/* After a copy straight from src's memory: 1 unless the loan it read was
 * taken back (its slot no longer holds its tag), so the copy may be torn. */
static int loan_still_out(fr_fabric *f, const fr_rndv_in *in)
{
    int slot = (int)(in->desc.cookie & COOKIE_SLOT_MASK) - 1;
    return slot < 0 ||
           fr_doorbell_peer_loan_is(f->bell, in->src, slot,
                                    in->desc.cookie & ~(uint64_t)COOKIE_SLOT_MASK);
}

int fr__rndv_send(fr_fabric *f, uint32_t dst, const fr_env *env,
                  fr_rndv_source source, fr_fabric_loan *loan,
                  const void *payload, size_t len, uint64_t deadline_ns)
{
    fr_rndv_out *o = calloc(1, sizeof(*o));
    uint8_t descbuf[FR_RNDV_DESC_SIZE];
    fr_rndv_desc d;
    fr_env e = *env;
    int rc;

    rc = FRPC_ENOMEM;
    if (o) {
        o->source = source;
        rc = out_block(f, o, payload, len);
    }
    if (rc) {
        if (source == FR_RNDV_GIVEN)
            free((void *)payload);
        else if (source == FR_RNDV_BLOCK)
            fr_fabric_release_block(f, (void *)payload, len);
        else if (source == FR_RNDV_LENT && loan->returned)
            loan->returned(loan->ctx); /* nothing lent: see fabric.h */
        free(o);
        return rc;
    }
    o->dst = dst;
    o->loan = loan;
    o->slot = -1;
    if (loan)
        atomic_store(&loan->out, 1);
    d.addr = f->mr_virt_addr ? (uint64_t)(uintptr_t)o->blk.buf : 0;
    d.key = fi_mr_key(o->blk.mr);
    d.len = len;
    /* Everything read from o happens before it is published: once on the
     * list, the receiver's RNDV_DONE may free it on another thread. */
    fr_spin_lock(&f->rndv_lock);
    o->cookie = d.cookie = take_cookie(f, o);
    o->next = f->rndv_out;
    f->rndv_out = o;
    fr__transfers_add_locked(f, 1);
    fr_spin_unlock(&f->rndv_lock);
    e.flags |= FR_ENV_F_RNDV;
    /* Counted before the frame goes: the receiver may read the payload
     * and end its call before this thread runs again (a call to this
     * rank under TSan read frpc_stats.zerocopy_sent one short). */
    /* zerocopy_sent counts the user's args and replies, not fabrpc's
     * own blocks (an emulated put's pieces) */
    int users = source == FR_RNDV_LENT || source == FR_RNDV_GIVEN;
    atomic_fetch_add(&f->st.rndv_sent, 1);
    if (users)
        atomic_fetch_add(&f->st.rndv_lent, 1);
    rc = fr_rndv_encode(&d, descbuf, sizeof(descbuf));
    if (!rc)
        rc = fr__fabric_send_frame(f, dst, &e, descbuf, sizeof(descbuf),
                                   deadline_ns);
    if (rc) {
        atomic_fetch_sub(&f->st.rndv_sent, 1);
        if (users)
            atomic_fetch_sub(&f->st.rndv_lent, 1);
        fr__rndv_on_done(f, dst, d.cookie); /* nobody will read it */
        return rc;
    }
    return 0;
}

#define ANY_PEER UINT32_MAX

/* Ends the outgoing payloads to peer (ANY_PEER: every one), only the lent
 * ones if lent_only: taken off the list, then released. Returns how many. */
static int end_outs(fr_fabric *f, uint32_t peer, int lent_only)
{
    fr_rndv_out **pp, *gone = NULL;
    int n = 0;
    fr_spin_lock(&f->rndv_lock);
    for (pp = &f->rndv_out; *pp;) {
        fr_rndv_out *o = *pp;
        if ((peer == ANY_PEER || o->dst == peer) &&
            (!lent_only || o->source == FR_RNDV_LENT)) {
            *pp = o->next;
            o->next = gone;
            gone = o;
            fr__transfers_add_locked(f, -1);
        } else {
            pp = &o->next;
        }
    }
    fr_spin_unlock(&f->rndv_lock);
    for (; gone; n++) {
        fr_rndv_out *o = gone;
        gone = o->next;
        release_out(f, o); /* a registration closes before a loan returns */
    }
    return n;
}

void fr__rndv_drop_out(fr_fabric *f, uint32_t peer)
{
    end_outs(f, peer, 0);
}

int fr_fabric_revoke_loans(fr_fabric *f)
{
    if (!f || (f->rma_by_initiator && !f->bell))
        return 0;
    if (f->rma_by_initiator)
        fr_doorbell_end(f->bell); /* before any byte is the lender's */
    return end_outs(f, ANY_PEER, 1);
}

int fr_fabric_payloads_unread(fr_fabric *f)
{
    if (!f)
        return 0;
    fr_spin_lock(&f->rndv_lock);
    int any = f->rndv_out != NULL;
    fr_spin_unlock(&f->rndv_lock);
    return any;
}

/* Takes the first outgoing payload that matches off the list: the one
 * place that unlinks a single one. NULL if none does. */
static fr_rndv_out *take_out(fr_fabric *f,
                             int (*match)(const fr_rndv_out *, const void *),
                             const void *key)
{
    fr_rndv_out **pp, *o = NULL;
    fr_spin_lock(&f->rndv_lock);
    for (pp = &f->rndv_out; *pp; pp = &(*pp)->next) {
        if (match(*pp, key)) {
            o = *pp;
            *pp = o->next;
            fr__transfers_add_locked(f, -1);
            break;
        }
    }
    fr_spin_unlock(&f->rndv_lock);
    return o;
}

/* A loan that can be taken back before the reader said it is done: one
 * it copies straight from our memory (its slot tells it), or one whose
 * connection to the reader dropped since (fr_fabric_loans_dropped). */
static int is_revocable_loan(const fr_rndv_out *o, const void *loan)
{
    return o->loan == loan && (o->slot >= 0 || o->reader_dropped);
}

void fr_fabric_loans_dropped(fr_fabric *f, uint32_t dst)
{
    if (!f)
        return;
    fr_spin_lock(&f->rndv_lock);
    for (fr_rndv_out *o = f->rndv_out; o; o = o->next)
        if (o->dst == dst)
            o->reader_dropped = 1;
    fr_spin_unlock(&f->rndv_lock);
}

int fr_fabric_revoke_loan(fr_fabric *f, fr_fabric_loan *loan)
{
    fr_rndv_out *o = f && loan ? take_out(f, is_revocable_loan, loan) : NULL;
    if (o)
        release_out(f, o); /* its slot closes before the loan returns */
    return o != NULL;
}

typedef struct done_key {
    uint32_t src;
    uint64_t cookie;
} done_key;

/* Only the rank we sent the block to may release it. */
static int is_done_by(const fr_rndv_out *o, const void *arg)
{
    const done_key *k = arg;
    return o->cookie == k->cookie && o->dst == k->src;
}

void fr__rndv_on_done(fr_fabric *f, uint32_t src, uint64_t cookie)
{
    done_key k = {.src = src, .cookie = cookie};
    fr_rndv_out *o = take_out(f, is_done_by, &k);
    if (o)
        release_out(f, o);
}

static void unlink_in_locked(fr_rndv_in **head, fr_rndv_in *in)
{
    if (in->prev)
        in->prev->next = in->next;
    else
        *head = in->next;
    if (in->next)
        in->next->prev = in->prev;
    in->next = in->prev = NULL;
}

static void link_in_locked(fr_rndv_in **head, fr_rndv_in *in)
{
    in->prev = NULL;
    in->next = *head;
    if (in->next)
        in->next->prev = in;
    *head = in;
}

static void unlink_in(fr_fabric *f, fr_rndv_in *in)
{
    fr_spin_lock(&f->rndv_lock);
    fr__transfers_add_locked(f, -1);
    unlink_in_locked(&f->rndv_in, in);
    fr_spin_unlock(&f->rndv_lock);
}

static void free_in(fr_fabric *f, fr_rndv_in *in)
{
    if (in->mr)
        fi_close(&in->mr->fid);
    if (in->buf && in->blk.buf)
        fr__block_put(&f->in_cache, &in->blk);
    else
        free(in->buf);
    free(in->chunk);
    free(in);
}

void fr_fabric_release_block(fr_fabric *f, void *buf, size_t len)
{
    fr_block b = {.buf = buf, .cap = fr__block_class(len), .mr = NULL};
    if (buf)
        fr__block_put(&f->in_cache, &b);
}

void fr_fabric_recycle_reply(fr_fabric *f, void *buf, size_t len)
{
    if (buf && len && fr__block_class(len) == len)
        fr_fabric_release_block(f, buf, len);
    else
        free(buf);
}

void *fr_fabric_take_block(fr_fabric *f, size_t len)
{
    fr_block b;
    return fr__block_get(f, &f->in_cache, len, &b) == 0 ? b.buf : NULL;
}

/* Lets the sender free its block, whether or not we read it. */
static void send_done(fr_fabric *f, const fr_rndv_in *in)
{
    fr_env done = {.kind = FR_ENV_RNDV_DONE, .req_id = in->desc.cookie};
    if (in->desc.cookie && !fr__unsendable(f, in->src))
        fr__fabric_send_frame(f, in->src, &done, NULL, 0,
                              fr_deadline_ms(FR_FABRIC_ANSWER_MS));
}

void fr__rndv_refused(fr_fabric *f, const fr_env *env, const uint8_t *desc)
{
    fr_rndv_in in = {.env = *env, .src = env->src_rank};
    if (fr_rndv_decode(desc, (size_t)env->payload_len, f->opts.max_msg,
                       &in.desc) == FRPC_ETOOBIG)
        send_done(f, &in);
}

/* The transfer could not be completed: tell whoever waits for it (a
 * lost peer's request: nobody). RNDV_DONE goes too, unless the provider
 * still holds reads of it: then the last of them sends it (a sender may
 * free or reuse the bytes once it has RNDV_DONE, and its provider must not
 * be serving a read of them then). */
static void fail_in(fr_fabric *f, fr_rndv_in *in, int code, const char *why)
{
    if (fr__lost(f, in->src)) {
        code = FRPC_EPEERLOST;
        why = "peer lost during a rendezvous transfer";
    }
    if (in->env.kind == FR_ENV_REQUEST) {
        if (code != FRPC_EPEERLOST)
            fr_fabric_refuse(f, &in->env, code, why);
    } else if (code == FRPC_ETRANSPORT && f->opts.cb.on_reply_unreadable) {
        /* A peer that left after answering: not lost yet, maybe. */
        f->opts.cb.on_reply_unreadable(f->opts.cb.ctx, in->src, &in->env);
    } else {
        fr__fabric_local_error(f, &in->env, in->src, code, why);
    }
    if (in->reads_out == 0)
        send_done(f, in);
}

/* Why a finished read's bytes must not be delivered (NULL: they may), and
 * the code the sender is told. */
static const char *read_unusable(fr_fabric *f, const fr_rndv_in *in,
                                 int *code)
{
    if (in->err) {
        *code = in->err == FRPC_ETIMEDOUT ? FRPC_ETIMEDOUT : FRPC_ETRANSPORT;
        return in->err == FRPC_ETIMEDOUT
                   ? "no room to read the rendezvous payload in time"
                   : "rendezvous read of the payload failed";
    }
    if (!f->rma_by_initiator)
        return NULL;
    /* Copied from the sender's memory, which its end may have freed or
     * handed back before we looked (fr_doorbell_end): torn, maybe. */
    if (fr_doorbell_peer_ended(f->bell, in->src)) {
        *code = FRPC_EPEERLOST;
        return "the sender ended during the rendezvous read";
    }
    /* The same for one loan: its call ended and took it back. */
    if (!loan_still_out(f, in)) {
        *code = FRPC_ETIMEDOUT;
        return "the caller's call ended, and took its args back, during "
               "the rendezvous read";
    }
    return NULL;
}

static void finish_in(fr_fabric *f, fr_rndv_in *in)
{
    fr_fabric_msg m = {0};
    const char *why;
    int code;

    unlink_in(f, in);
    if ((why = read_unusable(f, in, &code))) {
        fail_in(f, in, code, why);
        free_in(f, in);
        return;
    }
    send_done(f, in);
    atomic_fetch_add(&f->st.rndv_received, 1);
    m.env = in->env;
    m.env.flags &= (uint16_t)~FR_ENV_F_RNDV;
    m.env.payload_len = in->desc.len;
    m.payload = in->buf;
    m.len = in->desc.len;
    m.owned = in->buf;
    fr__fabric_deliver(f, &m);
    if (m.owned == NULL)
        in->buf = NULL; /* the upper layer kept it */
    free_in(f, in);
}

void fr__rndv_on_read(fr_fabric *f, fr_read_chunk *c, int err)
{
    if (!err && fr_fault_hit(FR_FAULT_READ_EIO))
        err = -FI_EIO;
    fr_rndv_in *in = c->parent;
    fr__tx_give(f);
    fr__rma_ops_add(f, in->src, -1);
    in->reads_out--;
    if (in->abandoned) {
        /* Ended already (lost peer, expired): the last read lets the
         * sender go and frees it. */
        if (in->reads_out == 0) {
            fr_spin_lock(&f->rndv_lock);
            unlink_in_locked(&f->rndv_abandoned, in);
            fr_spin_unlock(&f->rndv_lock);
            send_done(f, in);
            free_in(f, in);
        }
        return;
    }
    /* A failed read says nothing of the peer's life: the descriptor may
     * be forged. Only sends report a peer unreachable. */
    if (err) {
        fr__note_dropped(f, in->src, err);
        /* An FRPC code, never the provider's: -FI_EIO is -5, which is
         * FRPC_ETIMEDOUT, and a killed sender's failed read ended its
         * call "timed out" long before its timeout (sockets). */
        in->err = FRPC_ETRANSPORT;
    } else if (in->moving_deadline) {
        uint64_t next = fr_deadline_ms(FR_FABRIC_ANSWER_MS);
        fr_spin_lock(&f->rndv_lock); /* the expiry scan reads it */
        if (next > in->deadline)
            in->deadline = next;
        fr_spin_unlock(&f->rndv_lock);
    }
    if (++in->chunks_done == in->chunks)
        finish_in(f, in);
}

static int post_reads(fr_fabric *f, fr_rndv_in *in)
{
    uint64_t deadline = in->deadline;
    void *desc = in->mr ? fi_mr_desc(in->mr) : NULL;

    for (unsigned i = 0; i < in->chunks; i++) {
        size_t off = (size_t)i * f->rma_chunk;
        size_t n = in->desc.len - off < f->rma_chunk ? in->desc.len - off
                                                     : f->rma_chunk;
        ssize_t ret;
        int rc = 0;
        in->chunk[i].op.type = FR_OP_READ;
        in->chunk[i].parent = in;
        for (;;) {
            ret = -FI_EAGAIN;
            if (fr__tx_take(f)) {
                fr__rma_ops_add(f, in->src, 1);
                if (f->rma_by_initiator)
                    fr__ledger_add(f, &in->chunk[i].op);
                ret = fi_read(f->ep, in->buf + off, n, desc, f->peer[in->src],
                              in->desc.addr + off, in->desc.key,
                              &in->chunk[i].op.fictx);
                if (ret) {
                    if (f->rma_by_initiator)
                        fr__ledger_drop(f, &in->chunk[i].op);
                    fr__rma_ops_add(f, in->src, -1);
                    fr__tx_give(f);
                }
            }
            if (ret != -FI_EAGAIN || (rc = fr__backoff(f, in->src, deadline)))
                break;
        }
        if (ret == 0) {
            in->reads_out++;
            fr_doorbell_ring(f->bell, in->src); /* it may serve the read */
        }
        if (ret) {
            /* Chunks already posted still complete; count the rest as
             * done-with-error so the transfer ends exactly once. */
            in->err = rc ? rc : FRPC_ETRANSPORT; /* as in on_read */
            in->chunks_done += in->chunks - i;
            return in->chunks_done == in->chunks;
        }
    }
    return 0;
}

/* The deadline of the call a response answers (UINT64_MAX: none, or
 * not known here), or 0 when that call has ended or its deadline has
 * passed: its answer would be dropped once read (the pending table drops
 * one taken after the deadline), so it is not read. Reading it cost a
 * block of its size and the copy: an emulated get whose timeout ended
 * it, with the owner still answering its 4 MiB pieces, had each next
 * get's pieces read into fresh memory. */
static uint64_t answered_call_deadline(fr_fabric *f, const fr_env *env)
{
    if (env->kind == FR_ENV_REQUEST || !f->opts.cb.call_deadline)
        return UINT64_MAX;
    uint64_t d = f->opts.cb.call_deadline(f->opts.cb.ctx, env->src_rank,
                                          env->req_id);
    return d <= fr_coarse_now_ns() ? 0 : d; /* that clock is never ahead */
}

void fr__rndv_on_desc(fr_fabric *f, const fr_env *env, const uint8_t *desc,
                      size_t len)
{
    uint64_t call = answered_call_deadline(f, env);
    if (call == 0) {
        fr_rndv_in late = {.env = *env, .src = env->src_rank};
        if (fr_rndv_decode(desc, len, f->opts.max_msg, &late.desc) == 0) {
            atomic_fetch_add(&f->st.rndv_unread_late, 1);
            send_done(f, &late);
            return;
        }
    }
    fr_rndv_in *in = calloc(1, sizeof(*in));
    int rc;

    if (!in) {
        fr_rndv_in tmp = {.env = *env, .src = env->src_rank};
        fail_in(f, &tmp, FRPC_ENOMEM, "out of memory for a rendezvous payload");
        return;
    }
    in->env = *env;
    in->src = env->src_rank;
    rc = fr_rndv_decode(desc, len, f->opts.max_msg, &in->desc);
    if (rc == 0) {
        /* A request: its caller's time left, if it says; else (and for
         * a response, whose caller's deadline only rpc/ knows) the
         * answer bound and the slowest pull, moved on by each read. */
        if (env->kind == FR_ENV_REQUEST && env->status > 0) {
            in->deadline = fr__answer_deadline(env);
        } else {
            in->deadline = fr_now_ns() + FR_FABRIC_ANSWER_MS * 1000000ull +
                           in->desc.len * FR_RNDV_NS_PER_BYTE;
            in->moving_deadline = 1;
            if (env->kind != FR_ENV_REQUEST && f->opts.cb.call_deadline &&
                call > in->deadline)
                in->deadline = call;
        }
        in->chunks = (unsigned)((in->desc.len + f->rma_chunk - 1) /
                                f->rma_chunk);
        /* A request's args come back through fr_fabric_release_block, so
         * they can come from the cache; a reply goes to the user, who
         * frees it with free(), so it takes a cached block only when that
         * is no larger than the reply (its length a block size), and is
         * malloc'ed to its length otherwise: either way one that
         * fr_fabric_recycle_reply can keep. Fresh memory costs a page
         * fault a page, and an emulated get of 16 MiB, whose 4 MiB
         * pieces got fresh memory each time (glibc gave it back to the
         * kernel between them), moved 0.22 GB/s against 5.4 at 1 MiB. */
        int request = env->kind == FR_ENV_REQUEST;
        if ((request || fr__block_class(in->desc.len) == in->desc.len) &&
            fr__block_get_cached(&f->in_cache, in->desc.len, &in->blk) == 0) {
            in->buf = in->blk.buf;
            atomic_fetch_add(&f->st.rndv_blocks_reused, 1);
        } else if (request) {
            if (fr__block_alloc(f, &f->in_cache, in->desc.len, &in->blk) == 0)
                in->buf = in->blk.buf;
        } else {
            in->buf = malloc(in->desc.len);
        }
        in->chunk = calloc(in->chunks, sizeof(*in->chunk));
        if (!in->buf || !in->chunk)
            rc = FRPC_ENOMEM;
    }
    if (rc == 0 && f->mr_local)
        rc = fr__reg_block(f, in->buf, in->desc.len, FI_READ, &in->mr);
    if (rc) {
        fail_in(f, in, rc == FRPC_ETOOBIG ? FRPC_ETOOBIG : FRPC_ETRANSPORT,
                rc == FRPC_ETOOBIG ? "payload larger than this rank's limit"
                                   : "cannot receive a rendezvous payload");
        free_in(f, in);
        return;
    }
    fr_spin_lock(&f->rndv_lock);
    link_in_locked(&f->rndv_in, in);
    fr__transfers_add_locked(f, 1);
    fr_spin_unlock(&f->rndv_lock);
    in->posting = 1; /* not ended under post_reads' feet */
    rc = post_reads(f, in);
    in->posting = 0;
    if (rc)
        finish_in(f, in);
}

int fr__rndv_end_lost(fr_fabric *f)
{
    int work = atomic_exchange(&f->lost_work, 0) > 0;
    int expiry = 0, n = 0;
    uint64_t now = 0;
    fr_rndv_in *in, *next, *ended = NULL;

    if (atomic_load_explicit(&f->transfers, memory_order_relaxed) > 0) {
        now = fr_now_ns();
        if (now >= f->next_expiry_scan) {
            expiry = 1;
            f->next_expiry_scan = now + FR_RNDV_SCAN_NS;
        }
    }
    if (work)
        n = fr__rma_end_lost(f);
    if (!work && !expiry)
        return n;
    fr_spin_lock(&f->rndv_lock);
    for (in = f->rndv_in; in; in = next) {
        next = in->next;
        if (in->posting ||
            !(fr__lost(f, in->src) || (expiry && now >= in->deadline)))
            continue;
        unlink_in_locked(&f->rndv_in, in);
        fr__transfers_add_locked(f, -1);
        in->next = ended;
        ended = in;
    }
    fr_spin_unlock(&f->rndv_lock);
    for (in = ended; in; in = next, n++) {
        next = in->next;
        fail_in(f, in, FRPC_ETIMEDOUT,
                "rendezvous read of the payload did not complete in time");
        if (in->reads_out > 0) {
            in->abandoned = 1;
            fr_spin_lock(&f->rndv_lock);
            link_in_locked(&f->rndv_abandoned, in);
            fr_spin_unlock(&f->rndv_lock);
        } else {
            free_in(f, in);
        }
    }
    return n;
}

void fr__rndv_free_all(fr_fabric *f, int keep_posted)
{
    while (f->rndv_out) {
        fr_rndv_out *o = f->rndv_out;
        f->rndv_out = o->next;
        release_out(f, o);
    }
    if (keep_posted)
        return;
    fr_rndv_in **lists[2] = {&f->rndv_in, &f->rndv_abandoned};
    for (int i = 0; i < 2; i++)
        while (*lists[i]) {
            fr_rndv_in *in = *lists[i];
            *lists[i] = in->next;
            free_in(f, in);
        }
}
