/*
 * The agent's internals, shared by the files of rpc/. One agent per rank;
 * no global state: everything the library keeps lives here.
 */
#ifndef FR_RPC_AGENT_H
#define FR_RPC_AGENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/clock.h"
#include "comm/fabric.h"
#include "comm/providers.h"
#include "comm/shm_repair.h"
#include "comm/store.h"
#include "rpc/fabrpc.h"
#include "rpc/dedup.h"
#include "rpc/fnstats.h"
#include "rpc/pending.h"
#include "rpc/pool.h"
#include "rpc/registry.h"
#include "rpc/standin.h"

/* Answers set aside in one poll before one lock completes them. */
#define FR_ANSWERS_PER_LOCK 32

/* Settings after the config, the environment and the defaults are merged. */
typedef struct fr_liveness fr_liveness;

typedef struct fr_settings {
    int rank, world;
    int alone_by_default; /* no rank anywhere: 0 of 1 was assumed */
    int rank_outside; /* with FRPC_EINVAL from fr_settings_resolve: the
                         rank is not below the world size, and everything
                         else resolved (the store may be told of it) */
    char store_host[256];
    uint16_t store_port;
    char store_at[264]; /* for messages: "host:port", "[v6addr]:port" */
    const char *store_source; /* fr_bootenv's: "default", "MASTER_ADDR"... */
    const char *rank_name;    /* fr_bootenv's: "FABRPC_RANK", "RANK"... */
    char providers[256]; /* "" = automatic */
    int strict;
    int coalesce;
    int fn_stats; /* keep per-function figures (fnstats.h) */
    size_t max_msg;
    int init_timeout_ms;
    int timeout_ms; /* FRPC_TIMEOUT_DEFAULT's meaning; < 0: no limit */
    int peer_timeout_ms;
    char job_key[256];
    size_t job_key_len; /* 0: none */
    frpc_progress_mode progress;
    unsigned spin_us;
    unsigned threads, queue_len, max_inflight, notify_queue;
    size_t zerocopy_min; /* args or replies this long are lent; SIZE_MAX:
                            none */
    frpc_rma_mode rma;
    int rma_from_env; /* rma came from FABRPC_RMA, not the config */
    size_t shm_split_max; /* FABRPC_SHM_SPLIT_MAX: fr_fabric_opts.split_max */
} fr_settings;

/* frpc_request.state (request.c): a request is on the agent's list only
 * once its handler returned without answering it. */
enum { FR_REQ_IN_HANDLER, FR_REQ_ANSWERED_IN_HANDLER, FR_REQ_KEPT };

struct frpc_request {
    struct frpc_request *next, *prev; /* agent's list of unanswered ones */
    atomic_int state;                 /* FR_REQ_* */
    frpc_agent *agent;
    const fr_func *func;
    uint64_t req_id;
    uint32_t src;
    /* When the caller's call ends by its timeout, on our clock: its time
     * left when it sent (0: none) counted from the request's arrival, not
     * from the answer, so that an answer given late (deferred, or queued
     * to the pool) still waits for room only until then (frpc_respond);
     * UINT64_MAX for none. */
    uint64_t caller_deadline;
    uint64_t t0;       /* fr_now_ns when it arrived (frpc_fn_stats) */
    void *args; /* a fabric block, a malloc'd whole, or in_place */
    size_t len;
    int args_block; /* args is a fabric block: give it back, not free() */
    int args_malloced; /* args is a whole from parts: free() it */
    int recycled;   /* FR_REQ_RECYCLE_ARGS of room: back to the agent */
    /* Eager args live here, in the request's own allocation: one malloc
     * per request rather than two. */
    _Alignas(max_align_t) unsigned char in_place[];
};

typedef struct fr_shm_guard fr_shm_guard; /* shm_guard.c */

struct frpc_agent {
    fr_settings set;
    fr_backends backends;
    char provider[FR_BACKEND_NAME];
    char provider_full[64];
    uint64_t token;

    fr_fabric *fab;
    fr_doorbell *bell; /* shm only: see comm/doorbell.h */
    fr_store_server *store_srv; /* rank 0 only */
    fr_store_client *store;
    pthread_mutex_t store_lock; /* a store client is single-threaded */
    fr_shm_guard *shm_guard; /* while the liveness thread does not run */
    uint64_t barrier_gen;
    int barrier_kept; /* a timed-out barrier's entry stayed (take_back) */

    fr_registry reg;
    fr_pending_table pend;
    fr_pool *pool;
    fr_standin *standin; /* standin.h: pool handlers on the progress thread */
    atomic_int progress_state; /* FR_PROGRESS_POLLING, _IN_HANDLERS, _ENDED */
    int progress_join_due;     /* stopped in handlers: joined later */
    int inline_depth; /* nested waits on the polling thread (only it
                         touches this) */

    pthread_mutex_t req_lock;
    frpc_request *requests; /* handed to handlers, not yet answered */
    /* Requests for recycling (request.c): whoever frees a small request
     * pushes it on freed_requests; the poll owner, who makes every
     * request, takes them all at once into spare_requests, which only it
     * touches. */
    _Atomic(frpc_request *) freed_requests;
    frpc_request *spare_requests;

    /* Answers a poll read, completed together when it ends (request.c);
     * only the polling thread touches these. */
    fr_answer answers[FR_ANSWERS_PER_LOCK];
    unsigned nanswers;

    /* Callers spinning on the CQ: while there are any, the progress thread
     * stands aside (on two cores, a third spinning thread costs ms). */
    atomic_int spinning_callers;
    atomic_int batch_depth; /* frpc_batch_begin not yet ended */
    /* The progress thread is standing aside and will look again within
     * FR_ASIDE_NS: only then may a caller linger (progress.c). */
    atomic_int aside;
    /* fr_now_ns when a caller last began a linger: the progress thread
     * stays aside for FR_ASIDE_NS after it, since the caller is likely
     * refilling and about to wait again (progress.c). */
    atomic_uint_fast64_t last_linger;
    /* Made by fr_progress_start (aside_made), destroyed by
     * fr_progress_free: callers signal them until they leave the agent. */
    pthread_mutex_t aside_lock;
    pthread_cond_t aside_cond;
    int aside_made;

    pthread_t progress_thread;
    int progress_started;
    atomic_int stop;
    atomic_int shutting_down; /* 0, FRPC_SHUTDOWN_GRACEFUL+1, or ..._IMMEDIATE+1 */
    /* A graceful shutdown about to say goodbye itself (rank 0 lost): new
     * requests are refused, and the goodbye waits until no handler runs
     * (handling), so that no answer is sent after it: the goodbye ends
     * the others' calls to this rank (agent.c, quiet_before_goodbye). */
    atomic_int refusing;
    atomic_int handling; /* requests taken whose handler has not returned */
    /* Application threads inside a call that may wait on this agent
     * (fr_agent_enter): frpc_shutdown frees nothing before they left. */
    atomic_int users;
    /* Set by frpc_shutdown once the transport is about to close: an
     * answer to a kept request fails FRPC_ESHUTDOWN from then on and
     * touches nothing but the request (request.c), which frpc_shutdown
     * frees last. */
    atomic_int answers_closed;
    /* Set by frpc_shutdown just before it frees the kept requests: an
     * answer that enters after it touches no request (request.c). */
    atomic_int requests_released;

    atomic_uint_fast64_t requests_received, requests_answered;
    /* frpc_stats' (standin.c) */
    atomic_uint_fast64_t handlers_on_progress, progress_stand_ins;
    fr_fnstats fnstats; /* frpc_get_fn_stats */
    /* Over udp only (dedup.h): request ids taken, per source. */
    int dedup_on;
    fr_dedup dedup;
    atomic_uint_fast64_t requests_duplicate;

    fr_liveness *live; /* liveness.c */

    /* Registered regions (mem.c): ended at shutdown, before the fabric. */
    pthread_mutex_t mem_lock;
    frpc_mem *mems;
    atomic_uint_fast64_t xfer_get, xfer_put, xfer_refused, mem_registered,
        xfer_batches;
    /* One-sided transfers by messages (emu.c, emu_serve.c): this rank's
     * own go that way when set (fr_emu_choose says why); regions get ids
     * never reused in the agent's life, by which the owner finds them. */
    int rma_emulated;
    char rma_why[200];
    atomic_uint_fast64_t emu_bytes, next_region_id;

    /* Notifications taken from peers (notify.c), oldest first. */
    pthread_mutex_t notify_lock;
    struct fr_notice *notice_head, *notice_tail;
    atomic_uint notices; /* on the list: read without the lock */
    frpc_notify_fn notify_fn;
    void *notify_user;
    /* Callbacks running now, and those of them begun before the last
     * frpc_on_notify (it waits for these: notify.c). */
    unsigned notify_running, notify_stale;
    /* frpc_on_notify calls waiting for such runs: meanwhile a run nested
     * in one of them runs the callback it runs (notify.c). */
    unsigned notify_setters;
    /* Waits in a call (fr_progress_begin_wait) by running callbacks. */
    unsigned notify_waits;
    uint64_t notify_gen;
    pthread_cond_t notify_done;
    atomic_uint_fast64_t notes_sent, notes_received, notes_refused;
};

/* 1 if the calling thread is one the agent runs handlers on: the one
 * polling (inline handlers), a pool worker, or the progress thread while
 * it runs a pool handler (standin.h). */
static inline int fr_agent_runs_handlers(frpc_agent *a)
{
    return fr_fabric_polling_here(a->fab) || fr_pool_is_worker(a->pool) ||
           fr_standin_here(a);
}

/* ---- timeouts (see "Timeouts" in fabrpc.h) -------------------------- */

/* timeout_ms with FRPC_TIMEOUT_DEFAULT resolved: > 0 ms, < 0 no limit. */
static inline int fr_agent_timeout(const frpc_agent *a, int timeout_ms)
{
    return timeout_ms == FRPC_TIMEOUT_DEFAULT ? a->set.timeout_ms
                                              : timeout_ms;
}

static inline uint64_t fr_agent_deadline(const frpc_agent *a, int timeout_ms)
{
    return fr_deadline_ms(fr_agent_timeout(a, timeout_ms));
}

/* ---- threads inside the agent (see frpc_shutdown) ------------------ */

/* The agents this thread is inside (fr_agent_enter not yet left, a
 * callback or peer-lost function running), innermost last: a thread
 * inside a call on an agent (a callback run by its wait) must not shut
 * that agent down; another agent it may (two agents in one process). The
 * first FR_INSIDE_KNOWN are named; deeper, any agent counts as inside. */
#define FR_INSIDE_KNOWN 8
extern _Thread_local int fr_agent_inside FR_TLS_FAST;
extern _Thread_local frpc_agent *fr_agent_inside_of[FR_INSIDE_KNOWN]
    FR_TLS_FAST;

static inline void fr_agent_mark_inside(frpc_agent *a)
{
    if (fr_agent_inside < FR_INSIDE_KNOWN)
        fr_agent_inside_of[fr_agent_inside] = a;
    fr_agent_inside++;
}

static inline void fr_agent_unmark_inside(void)
{
    fr_agent_inside--;
}

static inline int fr_agent_is_inside(const frpc_agent *a)
{
    if (fr_agent_inside > FR_INSIDE_KNOWN)
        return 1;
    for (int i = 0; i < fr_agent_inside; i++)
        if (fr_agent_inside_of[i] == a)
            return 1;
    return 0;
}

/* Around every public call that may wait: frpc_shutdown waits for the
 * threads inside to leave before it frees the agent (their waits end, as
 * calls in flight fail and shutting_down is seen). fr_agent_leave must be
 * the thread's last touch of a. */
static inline void fr_agent_enter(frpc_agent *a)
{
    atomic_fetch_add(&a->users, 1);
    fr_agent_mark_inside(a);
}

static inline void fr_agent_leave(frpc_agent *a)
{
    fr_agent_unmark_inside();
    atomic_fetch_sub(&a->users, 1);
}

/* Counts n one-sided ops posted (frpc_stats.transfers_put or _get). */
static inline void fr_transfers_count(frpc_agent *a, int write, unsigned n)
{
    if (n)
        atomic_fetch_add(write ? &a->xfer_put : &a->xfer_get, n);
}

/* ---- lost peers (liveness.c) --------------------------------------- */

/* Why rank is lost (owned by the agent, valid till it is destroyed), or
 * NULL while it is alive. One atomic load: it is on every call's path. */
const char *fr_agent_peer_lost_why(const frpc_agent *a, uint32_t rank);

/* signals.c: puts SIGINT, SIGTERM, SIGABRT, SIGSEGV, SIGILL and SIGBUS
 * back to their defaults where libinfinipath (under Debian's libfabric)
 * took them; other handlers stay. Also run when the library loads. */
void fr_signals_default(void);

/* fdlimit.c: raises the soft limit of open files (RLIMIT_NOFILE), up to
 * the hard one, to what a rank of a world of world ranks may need; says
 * so on stderr if even the hard one is short. */
void fr_fd_limit_for_world(int world, int rank);

/* Marks rank lost with state (FRPC_PEER_DEAD or _LEFT) and why (copied),
 * once: the first mark wins, later ones are ignored. The winner tells the
 * fabric (sends to it fail, transfers with it end), ends every call to it
 * with FRPC_EPEERLOST, and queues the report for frpc_on_peer_lost's
 * function. Any thread; never blocks on the network. A rank that said
 * goodbye (liveness.c) is marked LEFT but its process may still run: the
 * fabric is told, and calls to it ended, again when its end is noticed. */
void fr_agent_mark_lost(frpc_agent *a, uint32_t rank, int state,
                        const char *why);

/* Why a call named fname may not go to rank, or NULL if it may: the rank
 * is lost, unless it only said goodbye and fname is the goodbye (leaving
 * ranks still tell each other). */
const char *fr_agent_call_refused_why(const frpc_agent *a, uint32_t rank,
                                      const char *fname);

/* The request id to dst failed in a way dst's death would explain too
 * (a send's FRPC_ETRANSPORT; shm's failed copy, FRPC_EACCES): it ends
 * FRPC_EPEERLOST if dst is found lost within a second (or, its process
 * ended by then, once it is marked), else status, with msg (copied) for
 * words. Any thread; never blocks. */
void fr_liveness_suspect(frpc_agent *a, uint32_t dst, uint64_t id,
                         int status, const char *msg);

/* This rank's identity for the store (agent.c): who it is, the job it
 * believes in, how soon a vanished peer is given up. */
fr_store_ident fr_agent_store_ident(const frpc_agent *a, fr_store_role role);

/* The name of rank's shared-memory endpoint (shm provider), which is also
 * the name of the region libfabric makes in /dev/shm. */
void fr_agent_shm_name(const frpc_agent *a, uint32_t rank, char *buf,
                       size_t len);

/* During frpc_init, whether the job is still whole (ctx: the agent):
 * FRPC_EPEERLOST when the store has seen a rank die or leave,
 * FRPC_EBOOTSTRAP when the store itself is gone (rank 0 died), else 0.
 * A store round trip (at most about a millisecond more). Waits the
 * provider or the store cannot end by themselves ask it now and then: a
 * rank killed while the ranks connect (shm: the first send to it never
 * ends), rank 0 killed while a rank opens its second store connection
 * (refused until the init timeout). */
int fr_agent_job_whole(void *ctx);

/* Removes the names a dead same-host rank may have left in /dev/shm: its
 * endpoint's region and its doorbell (mappings of them stay valid). Only
 * for the shm provider, once the job's token is known; else a no-op. */
void fr_agent_unlink_names_of(const frpc_agent *a, uint32_t rank);

/* The fabric's on_peer_unreachable: marks the rank DEAD. */
void fr_agent_on_peer_unreachable(void *ctx, uint32_t rank, const char *why);

/* Per rank, what the liveness mechanisms need to know of the others,
 * gathered at bootstrap. */
typedef struct fr_peer_info {
    int pid;       /* 0: unknown */
    int same_host; /* same boot and pid namespace: its pid can be watched */
} fr_peer_info;

/* A pidfd of this host's process pid (readable once it ends, also
 * before its parent reaps it), or -1 with errno (ESRCH: gone and reaped;
 * ENOSYS: an old kernel). */
int fr_pidfd_open(int pid);

/* A shm lock held this long after a death is held by the dead (see
 * comm/shm_repair.h): live holders keep it for microseconds. */
#define FR_SHM_STUCK_MS 250

/* Watches the same-host ranks' processes (peers[rank], pid > 0 and
 * same_host) while the liveness thread does not: from frpc_init's first
 * shm send until that thread runs, and in shutdown from its stop until
 * the fabric closes. When one ends, the shm region locks of this host's
 * ranks that no live process holds are released (a rank killed holding
 * one left the others spinning inside libfabric for ever: shm_guard.c).
 * *out is NULL when there is nothing to watch (not shm, one rank, no
 * same-host peer whose pidfd could be had). 0, or FRPC_ENOMEM (no
 * memory, no thread). Does not block. */
int fr_shm_guard_start(frpc_agent *a, const fr_peer_info *peers,
                       fr_shm_guard **out);
/* Stops the guard's thread and frees it (NULL: nothing). Blocks while a
 * repair is under way: up to FR_SHM_STUCK_MS for each region whose lock
 * stays held. Before the fabric closes: a repair reads the regions
 * through this process's mappings. */
void fr_shm_guard_stop(fr_shm_guard *g);

/* This host's shm regions that a repair looks at, in rank order. */
typedef struct fr_shm_regions {
    int n;
    uint32_t *ranks;          /* [n] */
    char (*names)[128];       /* [n]: the regions' names */
    fr_shm_region_ref *refs;  /* [n]: names and pids */
} fr_shm_regions;

/* Fills *out with the region of each rank r for which pid_of(ctx, r)
 * gives a pid (> 0; 0 leaves r out). The one builder of such lists, for
 * the guard and the liveness thread's repair. 0, or FRPC_ENOMEM (*out
 * empty). fr_shm_regions_free frees what it holds. */
int fr_shm_regions_make(const frpc_agent *a, int (*pid_of)(void *, uint32_t),
                        void *ctx, fr_shm_regions *out);
void fr_shm_regions_free(fr_shm_regions *r);

/* Releases the locks of these regions that a dead rank held
 * (fr_shm_release_stuck, FR_SHM_STUCK_MS) and says so on stderr as rank
 * rank. Blocks up to FR_SHM_STUCK_MS a region whose lock stays held. */
void fr_shm_repair_after(int rank, uint32_t dead, const fr_shm_regions *r);

/* The peers the liveness thread watched and had not found lost, for the
 * guard to watch once it has stopped (a copy the caller frees), or NULL
 * (no memory, no liveness state). */
fr_peer_info *fr_liveness_unlost_peers(const frpc_agent *a);

/* Allocates the agent's liveness state (before the transport opens: the
 * fabric's callbacks may mark ranks). FRPC_ENOMEM. */
int fr_liveness_create(frpc_agent *a);
/* Takes note of which peers share this host, before any thread but the
 * caller may mark a rank lost (before the progress thread starts). */
void fr_liveness_set_peers(frpc_agent *a, const fr_peer_info *peers);

/* ended[i] = 1 if this host's process pid[i] has ended (reaped by its
 * parent or not yet), waiting up to wait_ms for those still running to
 * end (a death the store reports when the process's sockets close comes
 * a moment before its end); 0 for one still running, pid <= 0, or no
 * memory. A pid reused since counts as running (liveness.c). */
void fr_processes_ended(const int *pid, size_t n, int wait_ms,
                        unsigned char *ended);
/* Opens what liveness watches: the pids of same-host peers (peers[rank])
 * and, with more than one rank, a second store connection for its
 * events, connected by deadline (frpc_init's). Before the init barrier:
 * a rank that cannot get them fails with the others, not after they
 * returned. 0, or FRPC_EBOOTSTRAP / FRPC_ENOMEM with err set. */
int fr_liveness_connect(frpc_agent *a, const fr_peer_info *peers,
                        uint64_t deadline, char *err, size_t errlen);
/* Makes the threads that watch them, waiting until fr_liveness_open:
 * before the init's last meeting, like fr_liveness_connect. 0 or
 * FRPC_ENOMEM. */
int fr_liveness_start(frpc_agent *a);
/* Lets them watch (init succeeded); cannot fail. */
void fr_liveness_open(frpc_agent *a);
/* Registers the handler of other ranks' goodbyes (at init). */
int fr_liveness_register(frpc_agent *a);
/* When rank 0 (and the store's LEAVE) is gone: tells every other rank
 * not known lost that this one leaves, so that its end is not taken for
 * a death, once. Unheard (some rank may not hear of the LEAVE from the
 * store: it missed the shutdown barrier, or an immediate shutdown held
 * none, and, stopped, may resume after the store closed), with rank 0
 * not lost: only announces it (such a
 * rank's later verdict of death becomes LEFT; calls are not ended).
 * Waits up to half a second, never past deadline (shutdown's), but
 * sends even past it. */
void fr_liveness_say_goodbye_by(frpc_agent *a, uint64_t deadline,
                                int unheard);
/* Around each wait of a thread's (fr_progress_begin_wait / _end_wait):
 * on the thread running a peer-lost report, notes that the report waits
 * (delta 1, then -1), so that a handler this agent runs meanwhile does
 * not wait for the report (frpc_on_peer_lost: FRPC_EDEADLK). Elsewhere
 * a no-op. */
void fr_liveness_report_waits(frpc_agent *a, int delta);
/* The same for a notification callback running on this thread
 * (notify.c): frpc_on_notify from a handler then fails FRPC_EDEADLK. */
void fr_notify_callback_waits(frpc_agent *a, int delta);
/* Stops the liveness threads (reports still queued are dropped). */
void fr_liveness_stop(frpc_agent *a);
/* Once the liveness threads stopped, at an agent's end: marks lost the
 * ranks on this host whose process ended since (their pidfd) or whose end
 * waited for the store's word, which returns what was lent to them. A
 * thread whose sync call lent args waits for that (rpc/call.c): a callee
 * killed after the liveness thread stopped would hold the end for ever.
 * Only the ending thread; never blocks. */
void fr_liveness_reap_ended(frpc_agent *a);
void fr_liveness_destroy(frpc_agent *a);
/* Writes "fabrpc: rank R: <what> without rank N: <why>" to stderr for
 * each lost rank, once per agent; returns how many ranks are lost. */
int fr_liveness_report_lost(frpc_agent *a, const char *what);

/* config.c: merges cfg, environment and defaults. FRPC_EINVAL with a
 * message naming the bad value. */
/* cfg (NULL: all unset) as this library's frpc_config in *full: fields
 * past cfg->size unset. FRPC_EINVAL if cfg->size is not a size
 * frpc_config_init of this or an older header gives. */
int fr_config_adopt(const frpc_config *cfg, frpc_config *full);

int fr_settings_resolve(const frpc_config *cfg, fr_settings *s, char *err,
                        size_t errlen);

/* request.c: the fabric's delivery callbacks. */
void fr_agent_on_msg(void *ctx, fr_fabric_msg *msg);
void fr_agent_on_send_error(void *ctx, uint32_t dst, const fr_env *env,
                            int err);
/* fr_fabric_callbacks.on_reply_unreadable: the call is judged by liveness
 * (FRPC_EPEERLOST if src turns out lost, else FRPC_ETRANSPORT). */
void fr_agent_on_reply_unreadable(void *ctx, uint32_t src, const fr_env *env);
void fr_agent_on_poll_end(void *ctx);
/* dropped.c: the fabric's on_connection_dropped (each call in flight to
 * rank ends as after a transport error unless answered within about a
 * second, and rank is told to do the same), and the function that
 * hears it (registered at init). */
void fr_agent_on_connection_dropped(void *ctx, uint32_t rank);
int fr_dropped_register(frpc_agent *a);
/* Frees every request never answered (shutdown). */
void fr_agent_release_requests(frpc_agent *a);
/* Frees the recycled requests; at destroy, once no request is left. */
void fr_agent_free_spare_requests(frpc_agent *a);

/* call.c: the checks every call passes before it is sent (FRPC_EINVAL,
 * ENORANK, ETOOBIG, ESHUTDOWN), with a message in *why (malloc'ed). */
int fr_call_check(frpc_agent *a, int dst, const char *name, const void *args,
                  size_t len, char **why);
/* The part of fr_call_check that is about dst and this agent (ENORANK,
 * ESHUTDOWN), for fabrpc's own operations whose name is not the caller's
 * (one-sided transfers): name only words *why. */
int fr_call_check_peer(frpc_agent *a, int dst, const char *name, char **why);
/* On the thread in frpc_shutdown (on = 1, then 0): its own calls pass
 * fr_call_check's shutdown refusal meanwhile (its goodbye or
 * announcement to the others, fr_liveness_say_goodbye_by); other
 * threads' still fail with FRPC_ESHUTDOWN. */
void fr_call_shutdown_own(int on);
/* 1 if name is one of fabrpc's own functions ("frpc." names and the
 * goodbye's): frpc_register refuses them, and so does fr_call_check
 * unless the calling thread is inside fr_call_own_names(1). */
int fr_name_reserved(const char *name);
/* Lets this thread's calls name fabrpc's own functions (on = 1) or not
 * (0); returns the previous setting, to restore. For fabrpc's own calls
 * made through the public entry points (notify, goodbyes, drops). */
int fr_call_own_names(int on);
/* Sends the request of the pending entry p: 0 when sent (or when a
 * transport error left it to fr_liveness_suspect: it stays in the table
 * and ends later); otherwise the error, and p has ended with it. With a
 * loan, args go without a copy (fr_fabric_send_lent) and must stay valid
 * until loan->out is 0. */
int fr_call_send(frpc_agent *a, fr_pending *p, const char *name,
                 const void *args, size_t len, fr_fabric_loan *loan);

/* future.c: a future in the pending table for an operation named name
 * (copied) to dst, as frpc_call_async makes (FRPC_ENOMEM), its time to
 * its outcome counted in fstat (NULL: not a call); its entry; and
 * the owner's reference dropped when the operation was never started
 * (after fr_pending_abort ended the entry). */
int fr_future_open(frpc_agent *a, const char *name, uint32_t dst,
                   int timeout_ms, fr_fn_stat *fstat, frpc_future **out);

/* The figures of calls to name (fnstats.h), or NULL. */
static inline fr_fn_stat *fr_agent_fn_stat(frpc_agent *a, const char *name)
{
    return a->set.fn_stats ? fr_fnstats_get(&a->fnstats, fr_func_id(name),
                                            name)
                           : NULL;
}
fr_pending *fr_future_entry(frpc_future *f);
void fr_future_drop_unsent(frpc_future *f);

/* request.c: answers req (from fabrpc's own handlers) with fabrpc's code
 * (< 0), which the caller gets as is, not as FRPC_EREMOTE. */
int fr_request_refuse(frpc_request *req, int code, const char *message);
/* request.c: runs req's handler on this thread, as the pool would; hands
 * req to the pool (refused FRPC_ESHUTDOWN once the pool is closing). */
void fr_request_run(frpc_request *req);
void fr_request_to_pool(frpc_agent *a, frpc_request *req);

/* notify.c: the internal function that takes notifications (registered
 * at init), what frees those never taken (destroy), and the request that
 * carries a batch's notification once its data landed: with id (its
 * entry's, which the answer completes), time left to deadline. On an
 * error the entry id is completed with it. */
/* No struct the program passes with its size (frpc_stats, frpc_fn_stats,
 * frpc_xfer) will be this large: a larger size is not one the macro
 * passed but garbage, and writing or stepping by it would go far outside
 * the caller's memory. */
#define FR_SIZED_MAX 1024

#define FR_RESERVED_PREFIX "frpc." /* frpc_register refuses these names */
#define FR_NOTIFY_NAME FR_RESERVED_PREFIX "notify"
int fr_notify_register(frpc_agent *a);

/* fence.c: after a region's registration was closed, a call to every
 * peer not lost, whose answers come behind what the provider still
 * served from the region (see there). */
#define FR_FENCE_NAME FR_RESERVED_PREFIX "fence"
int fr_fence_register(frpc_agent *a);
/* 0 once each peer answered, was lost or dropped; FRPC_ETIMEDOUT (one
 * did not answer by deadline), FRPC_ESHUTDOWN, FRPC_ENOMEM. Blocks. */
int fr_fence_peers(frpc_agent *a, uint64_t deadline);
void fr_notify_free_all(frpc_agent *a);
void fr_notify_send_for(frpc_agent *a, uint32_t dst, uint64_t id,
                        uint64_t deadline, const void *msg, size_t len);

/* call.c: sends a request for the entry id (name's function, args), not
 * tied to an fr_pending the caller holds: 0 when sent or left to
 * liveness, else the code, and the entry has ended with it. */
int fr_call_send_id(frpc_agent *a, uint64_t id, uint32_t dst,
                    const char *name, uint64_t deadline, const void *args,
                    size_t len);
/* As fr_call_send_id, the args a block from fr_fabric_take_block(a->fab,
 * len), the fabric's from this call on whatever it returns (read by the
 * callee where it is: fr_fabric_send_block). */
int fr_call_send_block_id(frpc_agent *a, uint64_t id, uint32_t dst,
                          const char *name, uint64_t deadline, void *block,
                          size_t len);

/* mem.c: ends every region still registered (shutdown): their handles
 * stay for frpc_mem_deregister to free. */
void fr_mem_end_all(frpc_agent *a);

/* progress.c */
enum { FR_PROGRESS_POLLING, FR_PROGRESS_IN_HANDLERS, FR_PROGRESS_ENDED };
int fr_progress_start(frpc_agent *a);
/* Ends the progress thread's polling and the stand-in thread. Callers
 * still waiting poll for themselves. A progress thread running pool
 * handlers (standin.h) is not waited for: it ends when they return, and
 * fr_progress_join joins it. */
void fr_progress_stop(frpc_agent *a);
/* After fr_progress_stop: waits for the progress thread to end (the
 * handlers it runs to return, as the pool's are waited for). */
void fr_progress_join(frpc_agent *a);
/* The stand-in (standin.c): polls as the progress thread would while
 * busy(arg) is true and a->stop is not set. */
void fr_progress_stand_in(frpc_agent *a, int (*busy)(void *), void *arg);
/* After fr_progress_stop, once no thread is inside the agent (a caller
 * that stops spinning signals the progress thread's condition). */
void fr_progress_free(frpc_agent *a);

/* Nesting guard (see frpc_call): 0 and the thread may wait (pair with
 * fr_progress_end_wait), or FRPC_EDEADLK past the limit. */
int fr_progress_begin_wait(frpc_agent *a);
void fr_progress_end_wait(frpc_agent *a);

/* Brackets the posting of what this thread waits for next: the progress
 * thread stays aside meanwhile, as while a caller spins, so that it does
 * not reap the completions of the posts as they are made, contending with
 * them (the poster's own backoff polls when the provider has no room). */
void fr_progress_posting_begin(frpc_agent *a);
void fr_progress_posting_end(frpc_agent *a);

/* Drives progress until p completes or until_ns passes; with give_up, p is
 * then completed with FRPC_ETIMEDOUT. Spins for the spin window, then
 * sleeps. Returns 1 if p is done. */
int fr_progress_wait_call(frpc_agent *a, fr_pending *p, uint64_t until_ns,
                          int give_up);
/* fr_progress_wait_call right after fr_progress_posting_begin, in place
 * of fr_progress_posting_end: the posting's count as a spinning caller
 * becomes the wait's (two atomic operations less per sync transfer). */
int fr_progress_wait_posted(frpc_agent *a, fr_pending *p, uint64_t until_ns,
                            int give_up);

/* One step of a wait outside the nesting guard (a deregistration's): a
 * poll, or a nap of 0.1 ms when it found nothing (another thread polls).
 * Any thread, the polling one too. */
void fr_progress_poll_or_nap(frpc_agent *a);
/* Polls or naps (fr_progress_poll_or_nap) until done(arg), until_ns, or
 * the agent's end (the pending table closed). Returns 1 if done. */
int fr_progress_poll_until(frpc_agent *a, int (*done)(void *), void *arg,
                           uint64_t until_ns);

/* Drives progress until done(arg) is true or until_ns passes. Returns 1 if
 * done. Used by the multi-future waits. */
int fr_progress_wait_until(frpc_agent *a, int (*done)(void *), void *arg,
                           uint64_t until_ns);

#endif /* FR_RPC_AGENT_H */
