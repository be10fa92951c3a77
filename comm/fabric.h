/*
 * The libfabric transport: one RDM endpoint per agent, its completion queue,
 * and the eager and rendezvous message protocols. It moves envelopes and
 * their payloads between ranks; it knows nothing of functions or futures.
 *
 * Design notes
 * - Small frames (header + payload <= the eager limit) travel in one
 *   message: by fi_inject when they fit the provider's inject size, else
 *   from a send slot that is reused once the send completes. On shm a frame
 *   a little over the inject size (up to opts.split_max) goes as a few
 *   injects instead, FR_ENV_PART frames that the receiver puts together
 *   (parts.h): shm's other way costs a syscall and an answer, and holds
 *   back every later send's completion if its peer dies (slotless in
 *   fabric_internal.h): on shm a frame that goes neither way goes by
 *   rendezvous. Bursts of small frames to one peer are coalesced into one
 *   message (batch.c). Receive buffers of the eager limit are pre-posted
 *   and reposted after use.
 * - Larger payloads go by rendezvous: the sender copies them into a
 *   registered block (or registers the caller's own bytes: a loan, see
 *   fr_fabric_send_lent) and sends the header with FR_ENV_F_RNDV and a
 *   descriptor; the receiver pulls the bytes with fi_read into a block of
 *   its own, answers FR_ENV_RNDV_DONE so the sender frees its block, then
 *   delivers the message. The receiver's block is handed to the upper layer.
 * - Progress: exactly one thread polls the CQ at a time (a try-lock). The
 *   thread that holds it may poll again from inside a delivery callback
 *   (a handler making a nested call): polling is re-entrant.
 * - Back-pressure is not failure: a send with no room at the provider
 *   waits, reading the CQ, until its frame's deadline (a call's own; an
 *   answer's respond bound). When the poll owner waits so, from inside its
 *   own poll, what it reads is held (messages copied, their buffers
 *   posted again at once) and handled by that poll afterwards, so
 *   handlers never nest inside a send.
 * - Every completion error is read and routed: a failed send of a request
 *   comes back to the upper layer through on_send_error with the request's
 *   envelope; a failed rendezvous read of a request is answered to its
 *   sender as an FR_ENV_ERROR; a failed read of a response is delivered as
 *   a local FR_ENV_ERROR with status FRPC_ETRANSPORT. Frames that fail to
 *   decode or carry the wrong job token are dropped and counted.
 * - Strangers: where the provider reports sources we can trust
 *   (FI_SOURCE; in libfabric 1.17 here: tcp;ofi_rxm and sockets),
 *   completions are read with fi_cq_readfrom and a frame whose source is
 *   not the peer[] entry of the src_rank it claims (FI_ADDR_NOTAVAIL: an
 *   address no rank inserted) is dropped as dropped_stranger before its
 *   token is looked at. shm and udp;ofi_rxd offer FI_SOURCE but report
 *   wrong sources (providers.c): there, as with any provider without it,
 *   the job token is the only check. Frames a rank sends itself carry
 *   a token of its own (random, never sent to another process) instead
 *   of the job's and are taken whatever source the provider names:
 *   sockets names none for some of them. The source is the address the
 *   provider ties to the connection or queue, which a process that
 *   forges the provider's own handshake could claim: it stops strangers
 *   that use an endpoint of their own (with a stolen token too), and the
 *   token stays the last line. A message longer than a receive buffer
 *   (truncated: FI_ETRUNC, or a buffer filled to its extra last byte) is
 *   dropped as dropped_oversize and its buffer posted again; a member
 *   never sends one (larger payloads go by rendezvous). shm needs more
 *   (post_recv in fabric.c): its CMA copy spins forever into a short
 *   buffer.
 * - Peers lost: fr_fabric_peer_lost marks a rank (one relaxed load per
 *   send checks it). Everything that waits on that rank ends at once with
 *   FRPC_EPEERLOST: sends waiting for room, batches, rendezvous reads and
 *   the blocks it was to read or release. A connection error from the
 *   provider is reported up through on_peer_unreachable; the upper layer
 *   decides.
 * - No flat bounds: a wait for room to send ends at its frame's deadline
 *   (a call's own; FR_FABRIC_ANSWER_MS for what the transport answers by
 *   itself) or at once when its peer is lost. fr_fabric_refuse (once a
 *   flat second) waits for the caller's time left that the request
 *   carries, else FR_FABRIC_ANSWER_MS. A rendezvous transfer (its reads
 *   were posted under a flat 5 s) has one deadline from the descriptor's
 *   arrival: a request's caller's time left, else (a response, whose
 *   caller rpc/ bounds) FR_FABRIC_ANSWER_MS plus the time of a slow pull,
 *   moved to FR_FABRIC_ANSWER_MS after each read that completes, so a
 *   slow but moving pull is never cut; past it a poll ends the transfer
 *   (refused, or its call ended with FRPC_ETIMEDOUT). A lost peer ends
 *   it at the next poll: the posted reads are abandoned (a response's
 *   call ends with FRPC_EPEERLOST) and their block freed when the
 *   provider gives them back. RNDV_DONE gets FR_FABRIC_ANSWER_MS.
 */
#ifndef FR_COMM_FABRIC_H
#define FR_COMM_FABRIC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

#include "comm/doorbell.h"
#include "serialization/fabrpc_errors.h"
#include "serialization/envelope.h"

typedef struct fr_fabric fr_fabric;

/* A received message, valid for the duration of the on_msg callback. */
typedef struct fr_fabric_msg {
    fr_env env;
    const uint8_t *payload; /* NULL when len is 0 */
    size_t len;
    /* Non-NULL when payload lives in a block the callee may keep (owned ==
     * payload): set owned to NULL to take it. A request's block must then
     * be given back with fr_fabric_release_block, unless owned_malloced;
     * any other is free()d. Otherwise payload is a receive buffer reused
     * after the callback returns. */
    void *owned;
    /* owned came from malloc (a frame put together from parts), a
     * request's too: free() it. */
    int owned_malloced;
} fr_fabric_msg;

typedef struct fr_fabric_callbacks {
    /* Each valid incoming request, response or error. May run on any thread
     * that polls; may poll again (nested call). */
    void (*on_msg)(void *ctx, fr_fabric_msg *msg);
    /* A posted send of env to dst failed after fr_fabric_send returned 0;
     * err is FRPC_ETRANSPORT or FRPC_EPEERLOST. */
    void (*on_send_error)(void *ctx, uint32_t dst, const fr_env *env, int err);
    /* After a poll delivered what it read, on the polling thread; may be
     * NULL. Every on_msg is made by a poll, so one follows each of them:
     * the upper layer may set answers aside until then. */
    void (*on_poll_end)(void *ctx);
    /* The provider says rank is unreachable (a refused or reset connection
     * on tcp, an FI_EADDRNOTAVAIL/EHOSTUNREACH-like CQ error): the upper
     * layer decides to mark it lost. why: static or short text. Runs on
     * the polling thread (after the poll's deliveries, never inside a
     * send); may be NULL. */
    void (*on_peer_unreachable)(void *ctx, uint32_t rank, const char *why);
    /* The connection to rank dropped while the provider may have called
     * sends on it complete: a send or one-sided operation to rank failed
     * as tcp;ofi_rxm fails what was on a connection its peer dropped (rxm's peer
     * drops it when it refuses an RMA key: a stale descriptor), and
     * frames sent on it after that operation never arrived, nor did
     * answers its peer had on it. The upper layer hears of calls that may
     * be lost this way. Runs on the polling thread after the poll's
     * deliveries; may be NULL. */
    void (*on_connection_dropped)(void *ctx, uint32_t rank);
    /* The rendezvous read of a response's payload (env: the response)
     * from src failed in the provider: perhaps src died or left, which
     * the upper layer may not know yet. It ends the call env answers (as
     * for a failed send, it may ask its liveness first). Runs on the
     * polling thread; may be NULL: the call then ends FRPC_ETRANSPORT. */
    void (*on_reply_unreadable)(void *ctx, uint32_t src, const fr_env *env);
    /* How long the call that a response from src answers still waits: its
     * deadline (fr_now_ns clock; UINT64_MAX: none), or 0 if no such call
     * waits. A response's rendezvous read may then take as long as its
     * call allows, not only FR_FABRIC_ANSWER_MS without progress: a peer
     * paused for longer (a stopped process, a loaded machine) must not
     * fail a call that still has time. A response whose call no longer
     * waits is not read at all (its sender is told it may free it).
     * May be NULL. Any thread. */
    uint64_t (*call_deadline)(void *ctx, uint32_t src, uint64_t req_id);
    void *ctx;
} fr_fabric_callbacks;

typedef struct fr_fabric_opts {
    size_t max_msg;       /* largest payload accepted or sent */
    size_t eager_max;     /* largest eager frame, header included */
    unsigned recv_count;  /* pre-posted receive buffers */
    int coalesce;         /* batch bursts of small frames (batch.c) */
    /* Read the clock when a poll finds completions (fr_taken_ns), for
     * the upper layer's per-function figures. */
    int time_completions;
    /* shm: a frame longer than the inject size and at most this long is
     * sent as parts, each an inject, and put together by its receiver
     * (parts.h); 0: never. Capped at FR_PARTS_MAX parts and eager_max.
     * Other providers ignore it. */
    size_t split_max;
    /* Nobody will sleep on the CQ (busy progress): it gets no wait object.
     * tcp's busy round trip is faster without one (fabrpc-bench rate
     * --provider tcp --progress busy --coalesce off --inflight 1: 52-61 k
     * -> 72-74 k calls/s, 3 interleaved pairs; raw libfabric 60-79 k in
     * the same runs). fr_fabric_has_fd and fr_fabric_can_block say 0 then
     * (shm's doorbell stays). */
    int never_sleeps;
    /* shm: a name for the endpoint's shared-memory region, unique to the
     * job (the default is derived from the pid, and a region left behind by
     * a killed process whose pid comes back makes fi_enable fail with
     * EBUSY). NULL: the provider's default. Copied. */
    const char *ep_name;
    fr_fabric_callbacks cb;
} fr_fabric_opts;

/* Counters, read without locking (approximate while traffic flows). */
typedef struct fr_fabric_stats {
    uint64_t sent, received, bytes_sent, bytes_received;
    uint64_t dropped_malformed, dropped_token, send_errors, rndv_sent,
        rndv_received;
    /* rendezvous payloads read into a block used before (the receive
     * cache): see fr_fabric_release_block, fr_fabric_recycle_reply */
    uint64_t rndv_blocks_reused;
    /* responses' rendezvous payloads not read: their call had ended (see
     * fr_fabric_callbacks.call_deadline) */
    uint64_t rndv_unread_late;
    /* cached rendezvous blocks freed unused (fr_fabric_trim_blocks), and
     * the bytes the two caches hold now */
    uint64_t blocks_trimmed, blocks_cached_bytes;
    uint64_t messages;  /* messages posted (a batch is one) */
    uint64_t coalesced; /* frames that rode in another frame's message */
    /* frames whose libfabric source address is not the member rank they
     * claim (FI_SOURCE providers) */
    uint64_t dropped_stranger;
    /* messages larger than a receive buffer (truncated by the provider) */
    uint64_t dropped_oversize;
    /* frames from a rank marked lost */
    uint64_t dropped_lost;
    /* times the provider refused to take a receive buffer back (it is
     * offered again at the next polls; each refusal counts), and how many
     * buffers wait for that now */
    uint64_t recv_repost_failed, recv_unposted;
    /* CQ error entries that name no operation of ours (nothing to end) */
    uint64_t cq_errors_unmatched;
    uint64_t rma_bytes; /* bytes of one-sided transfers completed */
    uint64_t rndv_lent; /* rendezvous payloads sent without a copy (lent or
                           given) */
    uint64_t split_sent;    /* frames sent as parts (parts.h) */
    uint64_t parts_dropped; /* frames in the making dropped: evicted, or a
                               part in conflict (in dropped_malformed too) */
} fr_fabric_stats;

/* How long the transport tries to send what it answers by itself (a
 * refusal, a rendezvous read and its RNDV_DONE): the bound rpc/ gives an
 * answer. A lost peer ends such a wait at once. */
#define FR_FABRIC_ANSWER_MS 10000

/*
 * Opens fabric, domain, CQ (with an fd wait object when the provider has
 * one), AV and endpoint for info (borrowed: duplicated inside), and posts
 * the receive buffers. Errors: FRPC_ETRANSPORT with the call that failed
 * and libfabric's text in errbuf, FRPC_ENOMEM, FRPC_EINVAL.
 */
int fr_fabric_open(const struct fi_info *info, const fr_fabric_opts *opts,
                   fr_fabric **out, char *errbuf, size_t errlen);

/* ---- One-sided transfers (rma.c) ----------------------------------- */

typedef struct fr_fabric_mr fr_fabric_mr;

/* 0 if this endpoint can serve one-sided transfers: the provider gave it
 * FI_RMA, FI_READ, FI_WRITE and the remote ones, and a test registration
 * with remote read and write works. Otherwise FRPC_ENOBACKEND with why
 * (naming the provider and what it lacks), or FRPC_ENOMEM. Any thread. */
int fr_fabric_rma_usable(fr_fabric *f, char *why, size_t len);

/* 1 if the provider's RMA works but can stall (sockets under load, rxd
 * after a refused key), so auto mode emulates it (rpc/emu_serve.c), with
 * why naming the provider and the stall; else 0. Any thread. */
int fr_fabric_rma_fragile(fr_fabric *f, char *why, size_t len);

/* Registers buf[0..len) for this rank's transfers (their local side) and
 * for peers' as remote says (FR_MEMDESC_READ | FR_MEMDESC_WRITE bits).
 * FRPC_ENOMEM, FRPC_ETRANSPORT (the provider refused). Any thread. */
int fr_fabric_mr_reg(fr_fabric *f, void *buf, size_t len, unsigned remote,
                     fr_fabric_mr **out);
/* What a descriptor of the region's byte off carries: the address the
 * provider takes (virtual, or an offset) and the key. */
uint64_t fr_fabric_mr_addr(const fr_fabric_mr *m, size_t off);
uint64_t fr_fabric_mr_key(const fr_fabric_mr *m);
/* Closes the registration and frees m; NULL is a no-op. */
void fr_fabric_mr_close(fr_fabric_mr *m);

/*
 * Regions checked by fabrpc itself, where the provider checks no key:
 * shm's fast path (the initiator copies with process_vm_readv/writev at
 * the descriptor's address). The owner lists each region in its doorbell
 * (comm/doorbell.h) and a transfer holds the listing while the provider
 * has it, so a deregistered region's descriptor is refused and ending a
 * region waits for the transfers that passed the check.
 * fr_fabric_regions_checked: 1 on such a fabric. fr_fabric_region_list:
 * 1 + the slot listing region id (put in its descriptors), or 0 when
 * nothing is listed (not such a fabric, or all slots taken: the caller
 * then has the region served otherwise). Seal before waiting for the
 * holds (fr_fabric_region_held: 1 while a peer not lost nor ended holds
 * it), unseal if the wait ran out, unlist once the region is gone.
 * Any thread; never block. A slot of 0 is ignored by each.
 */
int fr_fabric_regions_checked(const fr_fabric *f);
uint32_t fr_fabric_region_list(fr_fabric *f, uint64_t id);
void fr_fabric_region_seal(fr_fabric *f, uint32_t slot);
void fr_fabric_region_unseal(fr_fabric *f, uint32_t slot, uint64_t id);
void fr_fabric_region_unlist(fr_fabric *f, uint32_t slot);
int fr_fabric_region_held(fr_fabric *f, uint32_t slot);

/* One-sided operations this rank has out to dst (RMA chunks, rendezvous
 * reads) that the provider has not given back. Never blocks. */
int fr_fabric_rma_ops_to(fr_fabric *f, uint32_t dst);
/* 0 if dst's slot no longer lists region id (a stale descriptor: its
 * transfer would be refused), else 1 (also where nothing is checked, or
 * slot is 0). A look before a transfer begins; its hold checks again. */
int fr_fabric_region_listed(fr_fabric *f, uint32_t dst, uint32_t slot,
                            uint64_t id);

struct fr_rma;
/* status: 0 or an FRPC_E* code; why: static text or NULL. op is the
 * fabric's copy of what was posted. */
typedef void (*fr_rma_done_fn)(const struct fr_rma *op, int status,
                               const char *why);

/* One piece of a transfer: a get or a put between a local region and one
 * slice of the owner's. */
typedef struct fr_rma_seg {
    int write;            /* 1: local -> remote (put); 0: get */
    fr_fabric_mr *local;
    size_t local_off;
    uint64_t remote_addr; /* fr_fabric_mr_addr on the owner, plus offset */
    uint64_t key;
    size_t len;           /* 0 is skipped */
    /* The owner's listing of the remote region (fr_fabric_region_list):
     * slot 0 when it has none, or the descriptor said none. */
    uint32_t region_slot;
    uint64_t region_id;
    int hold; /* the fabric's own: the listing held while posted */
} fr_rma_seg;

/* A transfer: one or more segments, all with one owner, ended together. */
typedef struct fr_rma {
    uint32_t dst;             /* the remote regions' owner */
    const fr_rma_seg *segs;   /* copied: the caller's array may go */
    unsigned nsegs;
    uint64_t deadline_ns;     /* how long to wait for room to post */
    fr_rma_done_fn done;
    void *ctx;                /* the caller's, with id */
    uint64_t id;
    /* Set by the fabric for done, with a failure that may as well be the
     * owner's death: shm's failed copy says neither (ledger.c). The
     * caller asks liveness before it believes the status. */
    unsigned char owner_unsure;
    /* If not NULL, set by fr_fabric_rma before it returns 0: how many of
     * segs, from the first, had a chunk posted (the deadline may stop the
     * posting of a long list; those after it were never posted). */
    unsigned *segs_posted;
    /* Set by the fabric for done: when the poll that ended the transfer
     * took its last completion (fr_taken_ns), or 0 (ended elsewhere, or
     * no time taken): the caller's figures need no clock read of their
     * own (one is about 25 ns under kvm-clock, 1% of an 8-byte get). */
    uint64_t done_ns;
} fr_rma;

/*
 * Posts op's segments in chunks the provider takes (fi_read, or
 * fi_writemsg with delivery completion: the bytes are in the owner's
 * memory when it completes), back to back, ringing the owner's doorbell
 * once for them all where its poll serves them. On 0, op->done runs
 * exactly once, from a poll: when every chunk completed (status of the
 * first failure), or once dst is marked lost (FRPC_EPEERLOST; chunks
 * still in the provider's hands are freed when they come back, or at
 * close); or, still in flight then, at fr_fabric_close. Otherwise
 * nothing was posted, done never runs, and the code says why:
 * FRPC_EINVAL (no bytes at all), FRPC_EACCES (a remote region listed by
 * its owner is not registered there now, see fr_fabric_region_list; or
 * the provider refused the access), FRPC_EPEERLOST, FRPC_ETIMEDOUT
 * (no room by the deadline), FRPC_ETRANSPORT, FRPC_ENOMEM. Any thread;
 * waits only for room to post.
 */
int fr_fabric_rma(fr_fabric *f, const fr_rma *op);

/* This endpoint's address (for the store). *len: in, the buffer size; out,
 * the address length. FRPC_EINVAL if the buffer is too small. */
int fr_fabric_getname(fr_fabric *f, void *addr, size_t *len);

/* Inserts peer `rank`'s address; ranks must be inserted before any send to
 * them. Errors: FRPC_EINVAL (rank out of range), FRPC_ETRANSPORT. */
int fr_fabric_set_peer(fr_fabric *f, uint32_t rank, const void *addr,
                       size_t len);

/* Sets this rank, the world size (allocates the peer table) and the job
 * token stamped on and checked against every frame. Call once, before
 * fr_fabric_set_peer. FRPC_EINVAL, FRPC_ENOMEM. */
int fr_fabric_set_identity(fr_fabric *f, uint32_t rank, uint32_t world,
                           uint64_t token);

/*
 * Sends env (kind, flags, ids, status; src_rank, token and lengths are
 * filled in here) with len bytes of payload to rank dst. The payload is
 * copied or sent before return: the caller may reuse it at once. When the
 * provider has no room (FI_EAGAIN) this drives progress and retries until
 * deadline_ns (fr_now_ns clock; UINT64_MAX: no limit).
 * Errors: FRPC_ENORANK, FRPC_ETOOBIG (len > max_msg), FRPC_ETIMEDOUT,
 * FRPC_EPEERLOST (dst is marked lost, also while waiting for room),
 * FRPC_ETRANSPORT, FRPC_ENOMEM. May block only in that retry loop.
 */
int fr_fabric_send(fr_fabric *f, uint32_t dst, const fr_env *env,
                   const void *payload, size_t len, uint64_t deadline_ns);

/*
 * Zero-copy sends: the payload goes by rendezvous whatever its size, read
 * by the receiver straight from the caller's bytes (registered for the
 * time of the loan) instead of from a copy.
 *
 * A loan ends (out drops to 0, then returned(ctx) runs on the thread that
 * saw it end) when the receiver's RNDV_DONE names it (sent only once none
 * of its reads is under way any more: it read the bytes, refused them, or
 * gave up and the provider gave its reads back), when the receiver is
 * marked lost, when the send fails, or at close. Until then the bytes must
 * stay valid and unchanged. ctx must outlive the fabric: the loan itself
 * (often on the lender's stack) may be gone once out is 0. returned(ctx)
 * runs exactly once per fr_fabric_send_lent with a loan, also when that
 * fails before lending anything (then before it returns); but a failed
 * send's loan may end on another thread just after it returns (the
 * receiver marked lost meanwhile), so a lender must not free ctx on the
 * error alone.
 */
typedef struct fr_fabric_loan {
    atomic_int out;              /* 1 while lent */
    void (*returned)(void *ctx); /* may be NULL */
    void *ctx;
} fr_fabric_loan;

/* Lends payload[0..len) (len >= 1) for env to dst: as fr_fabric_send, but
 * the caller keeps owning payload and must keep it valid until loan->out
 * is 0. On an error nothing is lent (out is 0). Same errors. */
int fr_fabric_send_lent(fr_fabric *f, uint32_t dst, const fr_env *env,
                        const void *payload, size_t len, uint64_t deadline_ns,
                        fr_fabric_loan *loan);

/* Gives payload (from malloc, len >= 1) for env to dst: the fabric owns it
 * from this call on, whatever it returns, and frees it once the receiver
 * is done with it (or at once on an error). Same errors. */
int fr_fabric_send_given(fr_fabric *f, uint32_t dst, const fr_env *env,
                         void *payload, size_t len, uint64_t deadline_ns);

/*
 * Answers the request req (as received: its src_rank, req_id, func_id) with
 * an error frame carrying code and text (cut to FR_ENV_MAX_ERRMSG): for a
 * request that cannot be served. Waits for room to send as an answer
 * does: for the caller's time left that the request carries (its status,
 * envelope v3), else FR_FABRIC_ANSWER_MS (fr_fabric_refuse_by: until
 * deadline_ns); FRPC_EPEERLOST at once when the requester is marked
 * lost. Errors as fr_fabric_send.
 */
int fr_fabric_refuse(fr_fabric *f, const fr_env *req, int code,
                     const char *text);
int fr_fabric_refuse_by(fr_fabric *f, const fr_env *req, int code,
                        const char *text, uint64_t deadline_ns);

/*
 * Marks rank lost (idempotent; any thread, also one that is not polling,
 * e.g. a liveness thread, while others poll and send): from then on
 * fr_fabric_send / refuse / send_raw to it fail at once with
 * FRPC_EPEERLOST; a send already waiting for room to it (fr__backoff
 * loops, batch flushes, slot waits) gives up with FRPC_EPEERLOST instead
 * of waiting for its deadline; queued batch frames to it are failed
 * through on_send_error(FRPC_EPEERLOST); rendezvous transfers with it
 * end: an incoming request being read from it is dropped and its block
 * freed, an incoming response being read from it is delivered as a local
 * FR_ENV_ERROR with status FRPC_EPEERLOST (so its call ends), and
 * outgoing blocks waiting for its RNDV_DONE are freed. Frames that still
 * arrive from it afterwards are dropped and counted (dropped_lost).
 * The transfers end in the next poll (this call polls once itself when no
 * other thread does, and wakes sleepers); a block into which reads are
 * still posted is freed when the provider gives them back, never before.
 * 0, FRPC_EINVAL (no such rank). Never blocks on the network.
 */
int fr_fabric_peer_lost(fr_fabric *f, uint32_t rank);
/* rank left the job and will be marked lost once what it sent before is
 * taken (fr_fabric_settle): meanwhile nothing more is sent to it, every
 * send or wait for room to it failing FRPC_EPEERLOST at once (a settle's
 * poll that failed its rendezvous reads waited to tell it so, connection
 * refused after connection refused: 2000 replies held a shutdown for
 * minutes), while its frames are still taken. Idempotent; no-op once
 * lost. FRPC_EINVAL for a rank out of range. Any thread. */
int fr_fabric_peer_departing(fr_fabric *f, uint32_t rank);
/* 1 if rank was marked lost, else 0 (also for a rank out of range). */
int fr_fabric_peer_is_lost(const fr_fabric *f, uint32_t rank);

/*
 * Establishes the connections to every peer ahead of use, for providers
 * that connect on first send (tcp;ofi_rxm, sockets): afterwards no send
 * waits for connection set-up. Call after every fr_fabric_set_peer, while
 * every rank does the same (it sends one small control frame to each peer
 * and drives progress until each completed, or deadline_ns passes). The
 * control frame is an RNDV_DONE naming FR_FABRIC_CONNECT_COOKIE, a
 * cookie no block ever has; peers drop it silently (not counted as
 * received). One thread at a time. 0, FRPC_ETIMEDOUT, FRPC_ETRANSPORT,
 * FRPC_EPEERLOST (a peer refused the connection or is marked lost), or
 * what check returned. Blocks.
 *
 * check (may be NULL) is asked, with ctx, about every
 * FR_FABRIC_CONNECT_CHECK_MS while peers are still to be reached, whether
 * the job is still whole: nonzero (its code) ends the wait at once. A
 * peer that died before answering is not seen by the provider (shm's
 * first send to a peer waits for the peer to map its sender, and never
 * ends): only the caller, who has the bootstrap store, knows.
 */
typedef int (*fr_fabric_check_fn)(void *ctx);
#define FR_FABRIC_CONNECT_CHECK_MS 50
int fr_fabric_connect_peers(fr_fabric *f, uint64_t deadline_ns,
                            fr_fabric_check_fn check, void *ctx);
#define FR_FABRIC_CONNECT_COOKIE UINT64_MAX

/*
 * Polls the CQ if no other thread is polling (or this thread already is),
 * delivering what it finds. Returns the number of completions handled
 * (>= 0), or FRPC_EAGAIN if another thread holds the poll, or
 * FRPC_ETRANSPORT on a CQ failure.
 */
int fr_fabric_progress(fr_fabric *f);

/*
 * Sleeps until the CQ may have work or timeout_us passes. With an fd wait
 * object this is poll(2) after fi_trywait; with a doorbell, a futex wait
 * after one more poll; otherwise a plain sleep of timeout_us (the caller
 * backs off). Returns at once if work is already pending. Any thread.
 */
void fr_fabric_wait(fr_fabric *f, unsigned timeout_us);

/*
 * fr_fabric_wait that also returns at once when done(arg) holds (NULL: no
 * predicate, and no sleep while another thread polls). Any number of
 * threads may sleep in it at once, on the CQ's fd or on the doorbell;
 * fr_fabric_wake_sleepers (void *: a fr_fabric) wakes those that wait with
 * a predicate, and costs one atomic read when none does. Call it after anything that
 * makes a sleeper's done() true without a message (a call completed by
 * another thread's poll). Any thread.
 */
void fr_fabric_wait_for(fr_fabric *f, unsigned timeout_us,
                        int (*done)(void *), void *arg);
/* fr_fabric_wait that also returns at once when early(arg) holds, looked
 * at after the last poll and before the sleep, so that a thread that
 * makes it true and then calls fr_fabric_wake_all is never slept
 * through. Not a waiter: fr_fabric_wake_sleepers does not wake it. */
void fr_fabric_wait_unless(fr_fabric *f, unsigned timeout_us,
                           int (*early)(void *), void *arg);
void fr_fabric_wake_sleepers(void *fab);
/* Wakes the threads asleep in fr_fabric_wait(_for), whatever they wait for
 * (a progress thread told to stop: it would sleep out its timeout). Any
 * thread. */
void fr_fabric_wake_all(fr_fabric *f);
/* fr_fabric_wake_all for a void * (a fr_fabric): how the pending table
 * wakes the thread napping in fr_fabric_wait_unless. */
void fr_fabric_wake_keeper(void *fab);

/* From now on a send that finds no room at the provider fails at once
 * with FRPC_ESHUTDOWN instead of waiting for it (the agent's end: an
 * answer owed to a stopped caller must not hold it). Any thread. */
void fr_fabric_end_waits(fr_fabric *f);

/* The agent's end, past its deadline: ends every loan still out
 * (fr_fabric_send_lent), so that its lender may change or free the bytes,
 * and no read of them completes after that: its registration is closed
 * first; where a reader copies straight from this process's memory without
 * asking the registration (shm's fast path), the doorbell says first that
 * this rank ended (fr_doorbell_end), and the reader throws away a copy it
 * finishes after that. Without a doorbell there it does nothing. Returns
 * the loans ended. Any thread. */
int fr_fabric_revoke_loans(fr_fabric *f);
/* 1 while a payload this rank sent by rendezvous is still to be read: no
 * RNDV_DONE from its reader, which is not lost. frpc_shutdown waits for
 * none before a goodbye that would end the reader's call (an answer read
 * after it was lost). 0 for NULL. Any thread; never blocks beyond the
 * rendezvous lock. */
int fr_fabric_payloads_unread(fr_fabric *f);

/* Ends loan now if a reader that copies straight from this process's
 * memory must still read it (shm's fast path: the doorbell's loan slot,
 * closed first, makes a copy finished after that thrown away), or if the
 * connection to its reader dropped since it was lent
 * (fr_fabric_loans_dropped); returns 1 then, with the loan returned. 0
 * when loan is not out, or is out where neither holds (another provider:
 * a read the provider serves from the bytes may be under way, so they
 * are not taken back). For a
 * sync call that ended (its timeout) while a stopped callee had yet to
 * read its args. Any thread. */
int fr_fabric_revoke_loan(fr_fabric *f, fr_fabric_loan *loan);

/* The connection to dst dropped (on_connection_dropped, or dst said so):
 * the payloads announced to dst before it are read, if at all, over that
 * connection, which serves no read any more (tcp;ofi_rxm fails the reads
 * on it, and the reader posts a failed chunk no more), and the reader's
 * RNDV_DONE for them may have been lost with it: their loans can be taken
 * back from now on (fr_fabric_revoke_loan; the registration is closed
 * first, so a read that still came would be refused, not served). Lent
 * calls over tcp in flight at a stale descriptor's drop were done only
 * when the callee ended (49 s in a probe). Any thread. */
void fr_fabric_loans_dropped(fr_fabric *f, uint32_t dst);

/* 1 if the CQ has an fd wait object (tcp, sockets). */
int fr_fabric_has_fd(const fr_fabric *f);


/*
 * Brackets a stretch in which the calling thread polls again and again
 * (a waiting caller's spin, the progress thread's active loop). While any
 * thread is inside one, a frame to a peer that already had one since the
 * last poll may wait for the next poll and go with others in one message;
 * the last thread to leave sends what waits. Sleeping inside one delays
 * those frames: leave before sleeping. Any thread; never blocks.
 */
void fr_fabric_poller_enter(fr_fabric *f);
void fr_fabric_poller_leave(fr_fabric *f);
/* Sends the frames that wait in the shared batches now, as every poll
 * does first: for a thread inside the bracket that runs handlers between
 * its polls (rpc/standin.h), whose answers would otherwise wait for its
 * next poll. Any thread; never blocks but to send. */
void fr_fabric_send_batched(fr_fabric *f);

/*
 * A linger: the calling thread, whose wait just ended, will likely issue
 * more calls and then wait again (a window being refilled). Until it polls
 * again (fr_fabric_poller_enter ends its linger), or any thread calls
 * fr_fabric_end_lingers, or it calls fr_fabric_linger_end, ITS frames are
 * coalesced as if it were polling: a frame to a peer that already had one
 * since the last poll waits for the next poll. Other threads' frames are
 * not affected. Whoever allows lingers must make sure something polls or
 * ends them soon (the progress thread does both). One linger per thread;
 * beginning one on another fabric drops the first without touching it.
 * Never blocks.
 */
void fr_fabric_linger_begin(fr_fabric *f);
void fr_fabric_linger_end(fr_fabric *f);
/* Ends every thread's linger on f and sends what they left waiting. */
void fr_fabric_end_lingers(fr_fabric *f);

/* 1 if the calling thread is the one polling right now (it is inside a
 * delivery callback): it must not sleep waiting for another poller. */
int fr_fabric_polling_here(fr_fabric *f);

/*
 * Delivers what has already arrived of what the caller waits for:
 * polls until probe(ctx), a count of the deliveries that matter (answers
 * from a peer that leaves, goodbyes), has not moved for 20 ms and three
 * passes by any poller, this thread or another, have begun since it last
 * moved (a provider may need several passes to complete a message
 * already in its socket), or until deadline_ns. Other traffic does not
 * extend the wait. For a peer that leaves: what it answered before it
 * left is taken before it is marked lost (after which its frames are
 * dropped). Not from a polling thread (it returns at once there). Blocks
 * at most until deadline_ns; probe is called from this thread only.
 */
typedef uint64_t (*fr_settle_probe)(void *ctx);
void fr_fabric_settle(fr_fabric *f, uint64_t deadline_ns,
                      fr_settle_probe probe, void *ctx);

/* 1 while rendezvous transfers are under way in either direction: the
 * provider may need this rank to poll for a peer's reads to progress, so
 * pollers should not go to sleep. */
int fr_fabric_transfers_active(fr_fabric *f);

/* 1 if a thread can sleep until work arrives: the CQ has an fd wait
 * object, or a doorbell is attached. */
int fr_fabric_can_block(const fr_fabric *f);

/* Attaches this rank's doorbell (borrowed: it must outlive f's use of it).
 * From then on every message sent to a peer rings the peer's bell, and
 * fr_fabric_wait sleeps on ours when the CQ has no fd. */
void fr_fabric_set_doorbell(fr_fabric *f, fr_doorbell *bell);

/* shm: removes the name of this endpoint's region now, once every peer
 * has mapped it (the mappings stay until the endpoints close), so that
 * nothing is left in /dev/shm if this process is killed. No-op for
 * other providers and when called again. Not thread-safe against
 * fr_fabric_close. */
void fr_fabric_unlink_name(fr_fabric *f);

void fr_fabric_get_stats(const fr_fabric *f, fr_fabric_stats *out);

/* How long a rendezvous block may sit unused in a cache before
 * fr_fabric_trim_blocks frees it. */
#define FR_BLOCK_IDLE_NS (10ull * 1000000000ull)

/* Frees the cached rendezvous blocks unused for FR_BLOCK_IDLE_NS at time
 * now (fr_now_ns or fr_coarse_now_ns), looking at most once a second;
 * cheap otherwise (a load and a compare), so an idle poller calls it
 * every round. Any thread, before fr_fabric_close. */
void fr_fabric_trim_blocks(fr_fabric *f, uint64_t now);

/* Gives back a request's payload block taken from fr_fabric_msg.owned (len:
 * the payload length), to be reused for a later one. Any thread, before
 * fr_fabric_close. */
void fr_fabric_release_block(fr_fabric *f, void *buf, size_t len);

/* Scratch of at least len bytes from the same cache (malloc'ed when it
 * holds none of len's size; NULL when that fails), to be given back with
 * fr_fabric_release_block(f, buf, len), or sent with fr_fabric_send_block:
 * for a large message built in pieces again and again, which fresh memory
 * would make pay a page fault a page each time. Any thread, before
 * fr_fabric_close. */
void *fr_fabric_take_block(fr_fabric *f, size_t len);

/* Sends block[0..len) (len >= 1, block from fr_fabric_take_block(f, len))
 * for env to dst: the fabric owns the block from this call on, whatever
 * it returns. Over the eager size the receiver reads it where it is (no
 * copy), and it goes back to the cache once the receiver is done with it;
 * else it is copied into the frame and goes back at once. Same errors as
 * fr_fabric_send. */
int fr_fabric_send_block(fr_fabric *f, uint32_t dst, const fr_env *env,
                         void *block, size_t len, uint64_t deadline_ns);

/* Frees a reply's payload (frpc_result.data: malloc'ed, len bytes) that
 * the upper layer has read, keeping it for a later receive when its
 * length is a block size (a power of two, 64 KiB or more). Any thread,
 * before fr_fabric_close. */
void fr_fabric_recycle_reply(fr_fabric *f, void *buf, size_t len);

/* Sends len raw bytes (1..eager_max) to dst as one message, with no
 * envelope: for fault tests that play a misbehaving peer. Errors as
 * fr_fabric_send. */
int fr_fabric_send_raw(fr_fabric *f, uint32_t dst, const void *bytes,
                       size_t len, uint64_t deadline_ns);

/* Polls until every message this rank has sent is out of the provider's
 * hands (each slot send completed, and a poll found nothing left to do:
 * tcp;ofi_rxm writes queued sends and injects as it is polled), or
 * deadline_ns: 0 or FRPC_ETIMEDOUT. Frames held for coalescing are sent
 * first. frpc_shutdown calls it before the rank is announced as gone:
 * an answer still queued here when a peer learns of the leaving from the
 * store (a faster path) ended that peer's call FRPC_EPEERLOST instead
 * (tests/integration/peerlost.c under TSan). Any thread that may poll. */
int fr_fabric_flush(fr_fabric *f, uint64_t deadline_ns);

/* Polls until the provider has given back every one-sided operation
 * posted (RMA chunks, rendezvous reads), or deadline_ns: 0 or
 * FRPC_ETIMEDOUT. Before fr_fabric_close: tcp;ofi_rxm (1.17) flushes
 * what it still holds at close as cancelled and then reads freed
 * contexts of its own (a segfault in CI after a peer died during 64 MiB
 * transfers). Any thread that may poll. */
int fr_fabric_quiesce(fr_fabric *f, uint64_t deadline_ns);

/* Closes the endpoint and everything under it; frees rendezvous blocks
 * still held, and ends the one-sided transfers not ended yet (their done
 * runs here, FRPC_ESHUTDOWN unless a chunk failed first). No other thread
 * may use f. NULL is a no-op. */
void fr_fabric_close(fr_fabric *f);

#endif /* FR_COMM_FABRIC_H */
