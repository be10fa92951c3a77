/*
 * fr_fabric internals shared by fabric.c (endpoint, eager path, progress)
 * and rndv.c (rendezvous). Not for use outside comm/.
 */
#ifndef FR_COMM_FABRIC_INTERNAL_H
#define FR_COMM_FABRIC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_errno.h>

#include "comm/doorbell.h"
#include "comm/fabric.h"
#include "comm/spin.h"
#include "comm/parts.h"

/* Every operation posted to libfabric carries one of these as its context,
 * so a completion, successful or not, names what it finished. The
 * fi_context2 comes first for providers that need FI_CONTEXT(2) mode. */
enum fr_op_type { FR_OP_RECV = 1, FR_OP_SEND, FR_OP_READ, FR_OP_RMA };

typedef struct fr_op {
    struct fi_context2 fictx;
    int type;
    /* On the ledger (ledger.c) while posted: one-sided reads and writes
     * on a provider that copies as it posts (rma_by_initiator). */
    unsigned char on_ledger;
    struct fr_op *led_prev, *led_next;
} fr_op;

/* What the poll owner read while it waited for room to send, held for
 * the poll it is in to handle (fr__backoff): a copy of a received
 * message (op NULL; its receive buffer went back to the provider at
 * once, so peers are never held back by us), or a read's completion. */
typedef struct fr_held {
    struct fr_held *next;
    fr_op *op;
    size_t len;
    int err;
    fi_addr_t src; /* a message's source (FI_SOURCE), else FI_ADDR_UNSPEC */
    uint8_t data[];
} fr_held;

typedef struct fr_recv_buf {
    fr_op op;
    uint8_t *buf;
    struct fr_recv_buf *next_unposted; /* on fr_fabric.unposted */
} fr_recv_buf;

/* Parted frames one rank sends at once (split_senders): well within
 * what a receiver keeps in the making per source (FR_PARTS_PER_SOURCE). */
#define FR_SPLIT_SENDERS 4

#define FR_SLOT_ORPHAN 0xffffffffu /* fr_send_slot.posted_to */

/* How long a wait sleeps at most while batches are stalled (batch.c). */
#define FR_STALL_RETRY_US 1000u

typedef struct fr_send_slot {
    fr_op op;
    struct fr_send_slot *next_free;
    uint32_t dst;
    size_t len; /* bytes sent: the frames to fail if the send fails */
    int raw;    /* fr_fabric_send_raw: no frames, no call to fail */
    int ctl;    /* fr_fabric_connect_peers' frame: counted in ctl_pending */
    /* A batch kept for want of room (batch.c, f->stalled): the latest of
     * its frames' deadlines, past which they fail. */
    uint64_t stall_deadline;
    /* dst + 1 while with the provider (until its completion), else 0: one
     * word, so fr_fabric_flush reads where it went without reading dst,
     * which the slot's next sender may be writing. FR_SLOT_ORPHAN: posted
     * to a peer since lost (fr_fabric_peer_lost). Whoever swaps a value
     * out of it (completion, failed post, the loss) settles the slot's
     * transmit entry, once. */
    atomic_uint posted_to;
    uint8_t *buf;
} fr_send_slot;

/* Frames waiting to go to one peer in one message (batch.c). */
typedef struct fr_batch {
    fr_send_slot *slot; /* NULL: empty */
    size_t len;         /* bytes of frames in slot->buf */
    size_t last_hdr;    /* offset of the last frame, to mark it MORE */
    int dirty;          /* listed in its fr_batches' dirty */
    uint64_t deadline;  /* the latest of its frames' send deadlines */
} fr_batch;

/* A batch per peer, and the peers whose batch holds frames. */
typedef struct fr_batches {
    fr_batch *per_peer;
    uint32_t *dirty; /* each listed once */
    unsigned ndirty;
} fr_batches;

/* A rendezvous block: memory, its capacity (a size class), and its
 * registration when the provider needs one. */
typedef struct fr_block {
    void *buf;
    size_t cap;
    struct fid_mr *mr;
    uint64_t idle_since; /* in a cache: when it was put back (coarse ns) */
} fr_block;

/* The longest frame sent as one message over ofi_rxm (tcp;ofi_rxm,
 * verbs;ofi_rxm): rxm sends messages over its buffer size (16 KiB unless
 * FI_OFI_RXM_BUFFER_SIZE says otherwise), less its header, in segments,
 * and libfabric 1.17 crashed (in fi_recv, SIGSEGV) in a rank that found
 * such messages from a peer that had left meanwhile: it failed every
 * receive we posted with ENOTCONN, again after each repost, then crashed
 * (run_stopped.sh `answering` over tcp: 16 KiB answers to a caller
 * stopped while rank 0 left; 2 of 3 runs). Longer frames go by our
 * rendezvous, whose reads of a departed peer fail cleanly. */
#define FR_RXM_EAGER_MAX (16384u - 512u)

#define FR_BLOCK_CACHE_SLOTS 32
typedef struct fr_block_cache {
    pthread_mutex_t lock;
    fr_block slot[FR_BLOCK_CACHE_SLOTS];
    unsigned n;
    atomic_size_t bytes; /* changed under lock; read without (stats) */
    uint64_t access; /* registration for cached blocks; 0: none */
} fr_block_cache;

/* Where an outgoing rendezvous payload's bytes are. */
typedef enum {
    FR_RNDV_COPY,  /* a block of out_cache, copied into */
    FR_RNDV_LENT,  /* the caller's, registered for the loan */
    FR_RNDV_GIVEN, /* given from malloc: freed at the end */
    FR_RNDV_BLOCK  /* given from in_cache (fr_fabric_take_block): back to
                      it at the end */
} fr_rndv_source;

/* An outgoing rendezvous payload waiting for the receiver's RNDV_DONE. */
typedef struct fr_rndv_out {
    struct fr_rndv_out *next;
    uint64_t cookie;
    uint32_t dst;
    fr_rndv_source source;
    fr_block blk;          /* LENT, GIVEN, BLOCK: buf and its own mr;
                              cap its length */
    fr_fabric_loan *loan;  /* LENT */
    int slot;              /* its doorbell loan slot, or -1 (rndv.c) */
    int reader_dropped;    /* the connection to dst dropped since it was
                              announced (under rndv_lock; rndv.c) */
} fr_rndv_out;

struct fr_rndv_in;
typedef struct fr_read_chunk {
    fr_op op;
    struct fr_rndv_in *parent;
} fr_read_chunk;

/* An incoming rendezvous payload being pulled with fi_read. */
typedef struct fr_rndv_in {
    struct fr_rndv_in *next, *prev;
    fr_env env;
    fr_rndv_desc desc;
    uint32_t src;
    uint8_t *buf;
    fr_block blk; /* requests: buf comes from the in-cache (blk.buf == buf) */
    struct fid_mr *mr; /* only when the provider wants local registration */
    unsigned chunks, chunks_done;
    unsigned reads_out; /* reads the provider holds until they complete */
    int posting;        /* post_reads is under way */
    int err;
    int abandoned; /* its peer was lost: off the list, freed on the last
                      posted read's completion (or at close) */
    uint64_t deadline; /* for its reads, RNDV_DONE and refusal */
    int moving_deadline; /* each completed read moves deadline on */
    fr_read_chunk *chunk;
} fr_rndv_in;

/* A one-sided transfer (rma.c) and its chunks. */
struct fr_rma_xfer;
typedef struct fr_rma_chunk {
    fr_op op;
    struct fr_rma_xfer *parent;
    unsigned seg;    /* parent->seg[seg] */
    size_t off, len; /* in that segment */
} fr_rma_chunk;

typedef struct fr_rma_xfer {
    struct fr_rma_xfer *next, *prev; /* rma_active or rma_abandoned */
    fr_rma op;
    unsigned chunks, chunks_done; /* under rndv_lock, as the rest */
    unsigned out;                 /* chunks in the provider's hands */
    int posting;                  /* fr_fabric_rma is still posting */
    int ended;                    /* op.done has run or is running */
    int holds;                    /* some seg holds its region's listing */
    int err;
    const char *why;
    size_t bytes_done;
    fr_rma_seg *seg; /* op.segs copied, after the chunks */
    fr_rma_chunk chunk[];
} fr_rma_xfer;

#define FR_CQ_BATCH 16 /* completions read at once */

struct fr_fabric {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    int wait_fd; /* -1 when the CQ has no fd wait object */
    atomic_int waiters; /* threads in fr_fabric_wait_for with a predicate */
    atomic_int waits_ended; /* fr_fabric_end_waits: no more waits for room */
    fr_doorbell *bell; /* shm: how sleeping peers are woken; not owned */
    struct fr_exit_name *exit_name; /* shm: our region's name, removed at
                                     * exit if still open (exit_unlink.h) */

    fr_fabric_opts opts;
    size_t inject_max;
    size_t rma_chunk;
    /* Flags for one-sided writes: FI_DELIVERY_COMPLETE (the bytes are in
     * the owner's memory at completion), but 0 on shm's fast path, which
     * writes with process_vm_writev before it completes anyway; delivery
     * completion would take its slow path, which stops serving the pair's
     * RMA for good once the owner refuses a key (libfabric 1.17). */
    uint64_t rma_write_flags;
    /* shm's fast path (FI_MR_VIRT_ADDR, no RMA ordering asked): the
     * initiator copies, the owner's poll plays no part in a transfer. */
    int rma_by_initiator;
    int mr_virt_addr, mr_prov_key, mr_local;

    uint32_t rank, world;
    uint64_t token;
    uint64_t self_token; /* frames to this rank itself carry it: see
                            handle_frame (fabric.c) */
    fi_addr_t *peer; /* rank -> fi_addr, FI_ADDR_NOTAVAIL until set */
    int check_src;   /* the provider reports sources (FI_SOURCE) */
    /* Per rank: FR_PEER_LOST, FR_PEER_DEPARTING or 0; read relaxed on
     * every send. lost_work: marks whose transfers a poll has yet to end. */
    atomic_uchar *lost;
    atomic_int lost_work;
    /* Per rank, the poll owner's: why the provider said it is unreachable
     * (NULL: it did not), reported after the poll's deliveries. */
    const char **unreach;
    /* Per rank, the poll owner's: its connection dropped under frames the
     * provider may have called sent (see on_connection_dropped), reported
     * with the unreachable ones. */
    unsigned char *dropped;
    int unreach_any; /* something in unreach or dropped */
    /* fr_fabric_connect_peers: control frames not yet completed, and the
     * first error among them. */
    atomic_int ctl_pending, ctl_err;

    fr_recv_buf *recv;
    /* Receive buffers the provider refused to take back: posted again at
     * each poll (poll owner only), so a failure never shrinks the pool. */
    fr_recv_buf *unposted;
    int recv_fi_err; /* the provider's code of the last refusal */
    void *sink;          /* shm: where oversize messages land (fabric.c) */
    unsigned sink_iovs;  /* times the sink follows each receive buffer */

    pthread_mutex_t slot_lock;
    fr_send_slot *free_slots;
    fr_send_slot **all_slots; /* slots_cap entries, nslots used */
    unsigned nslots, max_slots, slots_cap;
    /* Slots posted to peers since lost, not completed: over shm such a
     * send may never complete (nobody reads it), so they do not count
     * against max_slots, or every slot could end up with a dead peer and
     * the sends to live ones wait for ever. */
    unsigned slots_orphaned;

    /* Operations that hold one of the provider's transmit entries until
     * their completion (slot sends, rendezvous reads), counted only when
     * tx_cap is set: udp;ofi_rxd in libfabric 1.17 returns 0 from an
     * fi_send for which it has no entry left, and the message is never
     * sent nor completed (rxd_msg.c; fixed upstream in 2.4). There we
     * keep below its entries, and never inject: an injected message
     * holds an entry until acknowledged, with no completion to count. */
    unsigned tx_cap; /* 0: no cap */
    atomic_uint tx_out;

    /* Progress: one poller at a time; the owner may re-enter. */
    pthread_mutex_t poll_lock;
    _Atomic(pthread_t) poll_owner;
    atomic_int poll_owned;
    /* The poll owner's alone: while it waits for room to send (holding >
     * 0), the completions it reads that would deliver go on this list.
     * A sender that took the poll only to find room (poll_for_room)
     * leaves them there for the next poll, and sets held_left until a
     * poll handled them: a nap on the CQ's fd does not begin meanwhile
     * (what it would wait for was read already). */
    int holding;
    fr_held *held_head, **held_tail;
    atomic_int held_left;
    /* Also the poll owner's: the CQ entries its poll read and has not
     * handled yet. A handler run for one of them may wait (an inline
     * call), and what it waits for may be among the rest: its own polls
     * take them from here before reading the CQ again. */
    struct fi_cq_msg_entry cq_ent[FR_CQ_BATCH];
    fi_addr_t cq_src[FR_CQ_BATCH];
    unsigned cq_n, cq_next;
    /* Likewise the frames of the message being handled that come after
     * the one being handled: a request and the answer its inline handler
     * waits for may share one coalesced message (handle_message). */
    const uint8_t *msg_buf;
    size_t msg_len, msg_pos;
    fi_addr_t msg_src;

    fr_block_cache out_cache, in_cache;
    fr_spin rndv_lock; /* short sections only (spin.h) */
    fr_rndv_out *rndv_out;
    fr_rndv_in *rndv_in;
    fr_rndv_in *rndv_abandoned; /* lost peers' transfers with reads posted */
    fr_rma_xfer *rma_active;    /* one-sided transfers not ended */
    fr_rma_xfer *rma_abandoned; /* ended with chunks still posted */
    /* shm's one-sided operations posted and not completed, and the
     * provider's error reports that named none of them (ledger.c). */
    fr_spin led_lock;
    fr_op *led_head;
    unsigned led_n;
    atomic_uint led_errs;
    /* One freed single-chunk transfer kept for the next (rma.c): a sync
     * 8-byte get spent 165 of its 3,250 instructions on malloc, memset
     * and free. */
    _Atomic(fr_rma_xfer *) rma_spare;
    struct fr_fabric *parked_next; /* fr_fabric_close left it open */
    struct fr_fabric_mr *mrs;   /* every region not yet closed (rma.c),
                                   under rndv_lock */
    uint64_t next_expiry_scan;  /* the poll owner's: when to look again */
    uint64_t next_cookie;
    atomic_uint_fast64_t next_key;
    /* Rendezvous and one-sided transfers under way: while there are
     * any, a peer may need us to poll for its reads to progress. Changed
     * only under rndv_lock (fr__transfers_add_locked), read without. */
    atomic_int transfers;
    /* one-sided operations (RMA chunks, rendezvous reads) posted and not
     * yet given back by the provider (fr_fabric_quiesce), per peer
     * (fr__rma_ops_add); no total: it cost every transfer two locked adds
     * for loops that run only at shutdown */
    atomic_int *rma_ops_to;

    /* Coalescing (batch.c): frames to a peer that already had one since
     * the last poll wait in its batch while a thread is polling, and go
     * as one message at the next poll. */
    size_t batch_cap;    /* bytes in one batch; 0: coalescing off */
    /* Frames over inject_max and up to split_max go as parts, each an
     * inject (shm; 0: never; see parts.h). At most FR_SPLIT_SENDERS
     * parted frames leave at a time: a sender that finds them all taken
     * sends the other way (a slot, or by rendezvous where slotless), so
     * a receiver has few frames in the making from one source, and no
     * thread waits for another's parts. */
    size_t split_max;
    atomic_int split_senders;
    /* shm with initiator RMA (rma_by_initiator): a frame that can go
     * neither as one inject nor in parts goes by rendezvous, never from a
     * slot. A slot's send over the inject size is a CMA send, completed
     * by its receiver's answer, and shm (libfabric 1.17) completes a
     * sender's CMA sends in the order posted: one posted to a peer that
     * died is never answered, and every later one, to any peer, stays
     * posted for ever (the stress tool with a rank killed: all 256 slots
     * with live ranks and this rank itself, calls timed out on both). A
     * rendezvous read on shm is the initiator's own copy, answered by
     * nobody. */
    int slotless;
    atomic_uint_fast64_t next_split; /* ids of parted frames */
    int parts_in;    /* shm: parts from others are put together (parts) */
    fr_parts *parts; /* frames in the making from others */
    pthread_mutex_t batch_lock;
    fr_batches shared;   /* under batch_lock */
    atomic_uint batched; /* == shared.ndirty, read without the lock */
    /* Batches that found no room at the provider, linked by next_free,
     * under batch_lock: every flush tries each once more, until its own
     * deadline. A flush never waits for room, so a thread with a short
     * timeout never waits out another's long one (a call's 60 s held in
     * a batch toward a stopped rank kept a 1 s call, notify, get or
     * shutdown flushing it for 6-8 s). stalled_n counts them, also while
     * a flush has them out to try. */
    fr_send_slot *stalled;
    atomic_uint stalled_n;
    atomic_uint *stalled_to; /* per peer: its batches among them */
    /* Frames added by the thread that holds poll_lock (inline handlers'
     * answers, mostly): only that thread touches these, and it sends
     * them before it lets go of the lock, so they need no lock. */
    fr_batches own;
    atomic_int pollers;  /* threads between poller_enter and _leave */
    atomic_uint_fast64_t pass;       /* polls so far */
    /* A thread's linger (fr_fabric_linger_begin) holds while its epoch is
     * this; fr_fabric_end_lingers bumps it. Starts at the clock so that a
     * fabric at a freed one's address never matches a stale linger. */
    atomic_uint_fast64_t linger_epoch;
    atomic_uint_fast64_t *last_pass; /* per peer: pass of its last frame */

    struct {
        atomic_uint_fast64_t sent, coalesced, messages, received, bytes_sent, bytes_received,
            dropped_malformed, dropped_token, send_errors, rndv_sent,
            rndv_received, dropped_stranger, dropped_oversize, dropped_lost,
            recv_repost_failed, recv_unposted, cq_errors_unmatched,
            rma_bytes, rndv_lent, split_sent, rndv_blocks_reused,
            rndv_unread_late, blocks_trimmed;
    } st;
    atomic_uint_fast64_t blocks_trimmed_at; /* fr_fabric_trim_blocks */
};

/* fabric.c */
int fr__fabric_send_frame(fr_fabric *f, uint32_t dst, const fr_env *env,
                          const void *payload, size_t len,
                          uint64_t deadline_ns);
void fr__fabric_deliver(fr_fabric *f, fr_fabric_msg *msg);
/* The largest payload a frame of kind may carry, sent or received. */
size_t fr__max_payload(const fr_fabric *f, uint8_t kind);
void fr__fabric_local_error(fr_fabric *f, const fr_env *env, uint32_t peer,
                            int code, const char *text);

/* How long to try to answer the frame req: its caller's time left (a
 * request's status, envelope v3), else FR_FABRIC_ANSWER_MS. */
uint64_t fr__answer_deadline(const fr_env *req);
/* 1 if dst is marked lost (one relaxed load). */
/* f->lost[rank]: 0, or marked lost (fr_fabric_peer_lost), or departing
 * (fr_fabric_peer_departing: it left, its last frames are being taken). */
#define FR_PEER_LOST 1
#define FR_PEER_DEPARTING 2
static inline int fr__lost(fr_fabric *f, uint32_t dst)
{
    return atomic_load_explicit(&f->lost[dst], memory_order_relaxed) ==
           FR_PEER_LOST;
}
/* Nothing is sent to dst any more: lost or departing. */
static inline int fr__unsendable(fr_fabric *f, uint32_t dst)
{
    return atomic_load_explicit(&f->lost[dst], memory_order_relaxed) != 0;
}
/* Counts delta transfers under way; rndv_lock held (the only writers):
 * a load and a store, not a locked add. */
static inline void fr__transfers_add_locked(fr_fabric *f, int delta)
{
    atomic_store_explicit(
        &f->transfers,
        atomic_load_explicit(&f->transfers, memory_order_relaxed) + delta,
        memory_order_relaxed);
}

/* Counts delta one-sided operations posted to (or given back from) dst:
 * fr_fabric_quiesce waits for those to ranks not lost. */
static inline void fr__rma_ops_add(fr_fabric *f, uint32_t dst, int delta)
{
    atomic_fetch_add(&f->rma_ops_to[dst], delta);
}
int fr__post_slot(fr_fabric *f, fr_send_slot *sl, uint32_t dst, size_t len,
                  uint64_t deadline_ns);
/* As fr__post_slot, but on any error the slot stays the caller's, its
 * bytes intact (FRPC_ETIMEDOUT: no room by deadline_ns; 0 tries once). */
int fr__post_slot_or_keep(fr_fabric *f, fr_send_slot *sl, uint32_t dst,
                          size_t len, uint64_t deadline_ns);
int fr__inject(fr_fabric *f, uint32_t dst, const void *buf, size_t len,
               uint64_t deadline_ns);
fr_send_slot *fr__get_slot(fr_fabric *f);
void fr__put_slot(fr_fabric *f, fr_send_slot *s);
void fr__fail_frames(fr_fabric *f, uint32_t dst, const uint8_t *buf,
                     size_t len, int err);
/* A moment's wait for the provider to free room for a send to dst:
 * reads the CQ (holding its deliveries when this thread owns the poll, so
 * that handlers never nest inside a send) or yields. FRPC_EPEERLOST once
 * dst is marked lost, FRPC_ETIMEDOUT once deadline_ns (fr_now_ns clock)
 * has passed, else 0. */
int fr__backoff(fr_fabric *f, uint32_t dst, uint64_t deadline_ns);
/* Maps a libfabric error (negative) on an operation with a peer to an
 * FRPC_E* code; *why (if not NULL) is set to static text when the error
 * says the peer is unreachable, else NULL. */
int fr__peer_err(int err, const char **why);
/* The poll owner notes that the provider called dst unreachable. */
void fr__note_unreachable(fr_fabric *f, uint32_t dst, const char *why);
/* The poll owner notes that an operation to dst (a send, a one-sided
 * one) failed as its connection went (err: the provider's code; others
 * are ignored); see on_connection_dropped. */
void fr__note_dropped(fr_fabric *f, uint32_t dst, int err);

/* batch.c */
int fr__batch_init(fr_fabric *f);
void fr__batch_free(fr_fabric *f);
int fr__batch_add(fr_fabric *f, uint32_t dst, const uint8_t *hdr,
                  const void *payload, size_t len, uint64_t deadline);
/* Gives every held batch one try at the provider (never waits for
 * room): those without room are kept (stalled) for the next flush. */
void fr__batch_flush(fr_fabric *f);
/* Batches kept for want of room: while any are, waits sleep briefly. */
static inline unsigned fr__batches_stalled(fr_fabric *f)
{
    return atomic_load_explicit(&f->stalled_n, memory_order_relaxed);
}
/* Sends the batches of the poll owner; the poll owner calls it before it
 * lets go of poll_lock. */
void fr__batch_flush_own(fr_fabric *f);

/* blockcache.c */
size_t fr__block_class(size_t len);
void fr__block_cache_init(fr_block_cache *c, uint64_t access);
int fr__block_get(fr_fabric *f, fr_block_cache *c, size_t len, fr_block *out);
/* A block of len's class only if the cache holds one (FRPC_ENOMEM if
 * not): nothing is allocated. */
int fr__block_get_cached(fr_block_cache *c, size_t len, fr_block *out);
/* A new block of len's class (registered with the cache's access), never
 * a cached one: FRPC_ENOMEM, or the registration's code. */
int fr__block_alloc(fr_fabric *f, fr_block_cache *c, size_t len,
                    fr_block *out);
void fr__block_put(fr_block_cache *c, fr_block *b);
/* Frees the cached blocks put back before idle_before (fr_coarse_now_ns
 * time): returns how many. */
unsigned fr__block_cache_trim(fr_block_cache *c, uint64_t idle_before);
size_t fr__block_cache_bytes(const fr_block_cache *c);
void fr__block_cache_destroy(fr_block_cache *c);

/* rndv.c */
int fr__reg_block(fr_fabric *f, void *buf, size_t len, uint64_t access,
                  struct fid_mr **mr);
int fr__rndv_send(fr_fabric *f, uint32_t dst, const fr_env *env,
                  fr_rndv_source source, fr_fabric_loan *loan,
                  const void *payload, size_t len, uint64_t deadline_ns);
void fr__rndv_on_desc(fr_fabric *f, const fr_env *env, const uint8_t *desc,
                      size_t len);
void fr__rndv_on_done(fr_fabric *f, uint32_t src, uint64_t cookie);
/* A rendezvous frame refused as over this rank's limit (env checked but
 * for that): sends its RNDV_DONE, so that its sender frees the payload
 * (or, lent, gives it back) rather than holding it till either leaves. */
void fr__rndv_refused(fr_fabric *f, const fr_env *env, const uint8_t *desc);
void fr__rndv_on_read(fr_fabric *f, fr_read_chunk *c, int err);
/* Frees every rendezvous transfer at close; with keep_posted, incoming
 * ones (their reads may still be posted) are left to the provider that
 * was not closed (fr_fabric_close). */
void fr__rndv_free_all(fr_fabric *f, int keep_posted);
/* The poll owner ends the incoming transfers whose peer was marked lost
 * or whose deadline passed: returns how many it ended (each delivered or
 * answered). */
int fr__rndv_end_lost(fr_fabric *f);
/* Ends the lost peer's outgoing blocks (any thread). */
void fr__rndv_drop_out(fr_fabric *f, uint32_t peer);

/* rma.c */
void fr__rma_on_chunk(fr_fabric *f, fr_rma_chunk *c, int err);

/* The error the ledger ends its failed ops with: the provider's copy
 * failed, for a reason it did not say (rma.c: owner_unsure). */
#define FR_ERR_COPY_FAILED (-FI_EFAULT)
/* The ledger (ledger.c): what an error report without a context belongs
 * to, on a provider that copies as it posts. add before the post; drop
 * when the post failed or the op's completion came; error for a report
 * naming no op (0 if the ledger is empty: nothing to pin it on); failed
 * detaches the ops now known to have failed, a list by led_next. */
void fr__ledger_add(fr_fabric *f, fr_op *op);
void fr__ledger_drop(fr_fabric *f, fr_op *op);
int fr__ledger_error(fr_fabric *f);
fr_op *fr__ledger_failed(fr_fabric *f);
/* The poll owner ends the one-sided transfers whose peer was marked lost:
 * returns how many. */
int fr__rma_end_lost(fr_fabric *f);
/* Ends every one-sided transfer at close (each reported once) and frees
 * them, but with keep_posted (the endpoint was not closed) not their
 * memory, which chunks posted name as their contexts. */
void fr__rma_free_all(fr_fabric *f, int keep_posted);
/* After the endpoint closed: closes the regions chunks still held. */
void fr__rma_close_regions(fr_fabric *f);

/* Takes a transmit entry for an operation about to be posted: 1, or 0
 * when at the cap (the caller then waits as for FI_EAGAIN). */
static inline int fr__tx_take(fr_fabric *f)
{
    if (!f->tx_cap)
        return 1;
    if (atomic_fetch_add(&f->tx_out, 1) < f->tx_cap)
        return 1;
    atomic_fetch_sub(&f->tx_out, 1);
    return 0;
}

/* Gives one back: the operation completed, or was not posted. */
static inline void fr__tx_give(fr_fabric *f)
{
    if (f->tx_cap)
        atomic_fetch_sub(&f->tx_out, 1);
}

#endif /* FR_COMM_FABRIC_INTERNAL_H */
