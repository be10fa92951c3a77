/*
 * The pending table: request id -> the call waiting for its answer.
 *
 * Design notes (the invariant): every call completes exactly once. A call
 * is completed by whoever removes its entry from the table, under the
 * table lock: the response path (fr_pending_complete), its deadline
 * (fr_pending_expire, or a sync waiter giving up in fr_pending_wait), a
 * cancellation (fr_pending_abort), or a failure that ends many calls at
 * once (fr_pending_fail). Whoever removes it fills its result, counts the
 * outcome, and signals its waiter, all under the lock; then, after the
 * lock is dropped, calls its on_done hook (futures: schedule callbacks,
 * drop the table's reference). The others find no entry and drop what
 * they hold; a dropped answer is counted, never delivered to another call.
 * Request ids come from a 64-bit counter and are never reused in the
 * table's life. Entries with a deadline also sit in a min-heap, so expiry
 * costs O(log n) and memory stays bounded by the calls in flight.
 *
 * Adding takes no lock (it is on every call's path; removing happens once
 * per poll for many answers): an adder pushes its entry on its bucket's
 * head with a compare-and-swap, and an entry with a deadline first on an
 * incoming list, which whoever next holds the lock moves into the heap
 * before removing anything. Only lock holders unlink entries or follow
 * chains, so a push (which writes only its own entry) never races an
 * unlink. An adder lowers the published earliest deadline itself; the
 * lock holder that republishes it looks at the incoming list after the
 * store, so one of the two always sees the other's deadline.
 */
#ifndef FR_RPC_PENDING_H
#define FR_RPC_PENDING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/fabrpc.h"

typedef struct fr_pending fr_pending;
typedef void (*fr_pending_done_fn)(fr_pending *p);

struct fr_pending {
    fr_pending *next;      /* hash chain */
    fr_pending *in_next;   /* incoming list (deadline not yet in the heap) */
    fr_pending *done_next; /* private list while on_done hooks are run */
    uint64_t id;
    uint32_t dst;
    int timeout_ms;        /* for the timeout message */
    uint64_t deadline;     /* fr_now_ns clock; UINT64_MAX: none */
    size_t heap_idx;       /* position in the deadline heap, or SIZE_MAX */
    int self_timed;        /* its waiter ends it at its deadline, never
                            * the heap (fr_pending_add_sync) */
    int part;              /* a piece of another entry's operation
                            * (fr_pending_add_counted): its error text
                            * stays as it came, the whole's explains it */
    const char *fname;     /* for error messages; must outlive the entry */
    struct fr_fn_stat *fstat; /* the call's figures (fnstats.h), or NULL */
    uint64_t t0;           /* fr_now_ns at the add, when fstat is set */
    fr_pending_done_fn on_done; /* NULL for sync calls */
    /* Where a small reply goes instead of a malloc (a future's own room),
     * or NULL: fr_pending_add_with_room's. */
    void *reply_room;
    size_t reply_cap;
    pthread_cond_t cond;   /* signalled under the table lock; made by the
                            * first thread to sleep on it (cond_made),
                            * since most calls end without anyone asleep */
    int cond_made;         /* under the table lock */
    atomic_int done;
    frpc_result res;       /* filled by the completer */
};

typedef struct fr_pending_table {
    pthread_mutex_t lock;     /* removal, chain walks, the heap */
    _Atomic(fr_pending *) *bucket; /* heads: pushed without the lock */
    unsigned nbuckets;
    atomic_uint_fast64_t next_id;
    fr_pending **heap;
    size_t heap_len, heap_cap;
    _Atomic(fr_pending *) incoming; /* added with a deadline, not in heap */
    atomic_size_t heap_room;        /* heap_cap, for adders to read */
    /* earliest deadline of the heap and incoming, UINT64_MAX if none */
    atomic_uint_fast64_t next_deadline;
    /* wait_any: completions bump epoch, after the entry is done, and wake
     * any_cond if anyone waits */
    pthread_cond_t any_cond;
    unsigned any_waiters;
    atomic_uint_fast64_t epoch;
    struct {
        /* started: adds that went in (fr_pending_started); refused:
         * those taken back (a close meanwhile) or out of memory */
        atomic_uint_fast64_t started, ok, remote, timed_out, cancelled,
            failed, dropped, refused;
    } st;
    atomic_uint_fast64_t inflight;
    /* Most entries in flight at once (config.max_inflight; 0: none): an
     * add past it is refused, and fr_pending_add_counted's are not. Set
     * once before use. */
    unsigned limit;
    /* Set by fr_pending_close: adders refuse from then on (read after
     * their push, so that the closer's sweep or the adder itself takes
     * every entry: see fr_pending_add_with_room). */
    atomic_int closed;
    /* Called (unlocked) after calls complete, so that threads sleeping
     * elsewhere than on a call's condition variable (on the CQ's fd) look
     * again. Set once before use; NULL: none. */
    void (*wake)(void *ctx);
    void *wake_ctx;
    /* While the thread that keeps deadlines (the progress thread) naps:
     * the deadline it will wake for (fr_pending_nap_plan; 0 while it is
     * awake). An adder whose deadline is earlier calls
     * wake_keeper(wake_ctx) (set once before use; NULL: none), else a
     * 10 ms timeout added during a 100 ms nap fired up to 90 ms late. */
    atomic_uint_fast64_t keeper_wakes_at;
    void (*wake_keeper)(void *ctx);
} fr_pending_table;

int fr_pending_init(fr_pending_table *t);

/* The deadline keeper's nap: fr_pending_nap_plan returns the time (ns,
 * CLOCK_MONOTONIC) to wake at, the earlier of now + max_ns and the next
 * deadline, and publishes it; sleep until then (or less), passing
 * fr_pending_nap_cut to the sleep as its early-return test (1 once an
 * earlier deadline was added: its adder also called wake_keeper); then
 * fr_pending_nap_end. One keeper thread. */
uint64_t fr_pending_nap_plan(fr_pending_table *t, uint64_t now,
                             uint64_t max_ns);
int fr_pending_nap_cut(void *table);
void fr_pending_nap_end(fr_pending_table *t);
void fr_pending_destroy(fr_pending_table *t);

/* 1 once fr_pending_close ran: the agent's end has failed every call. */
static inline int fr_pending_closed(fr_pending_table *t)
{
    return atomic_load(&t->closed);
}

/*
 * Prepares p (zeroes its result) and inserts it under a fresh id, returned
 * in p->id, with the call's deadline (fr_now_ns clock, UINT64_MAX: none).
 * fname and on_done as in the struct. 0, or (p not added, on_done never
 * runs) FRPC_EAGAIN (t->limit entries in flight: the count and the check
 * are one step, so concurrent adders never pass it together),
 * FRPC_ENOMEM or FRPC_ESHUTDOWN (the table is closed). Takes no lock
 * unless the deadline heap must grow (or the table closes under it).
 */
int fr_pending_add(fr_pending_table *t, fr_pending *p, uint32_t dst,
                   const char *fname, int timeout_ms, uint64_t deadline,
                   fr_pending_done_fn on_done);

/* Lets this thread's adds pass the limit (on = 1) or not (0); returns the
 * previous setting, to restore. For fabrpc's own calls that the
 * application's limit must not refuse, whose number the world bounds: a
 * goodbye to each rank (else a rank past the limit takes this one for
 * DEAD), a dropped connection's word. They count in flight all the
 * same. */
int fr_pending_unlimited(int on);

/* fr_pending_add for a part of an operation already admitted (a piece of
 * an emulated transfer): counted in flight, never refused for the
 * limit. */
int fr_pending_add_counted(fr_pending_table *t, fr_pending *p, uint32_t dst,
                           const char *fname, int timeout_ms,
                           uint64_t deadline, fr_pending_done_fn on_done);

/* fr_pending_add for a call whose owner keeps cap bytes at room (which
 * must live as long as p) for a small reply: one that fits lands there
 * instead of in a malloc'ed copy; and whose time to its outcome goes
 * into fstat's figures (NULL: none). */
int fr_pending_add_with_room(fr_pending_table *t, fr_pending *p,
                             uint32_t dst, const char *fname, int timeout_ms,
                             uint64_t deadline, fr_pending_done_fn on_done,
                             void *room, size_t cap,
                             struct fr_fn_stat *fstat);

/* fr_pending_add_with_room (no on_done, no reply room) for an entry
 * whose adder waits for it itself until its deadline, then ends it
 * (fr_progress_wait_call or _posted with give_up, until p->deadline): a
 * sync call or transfer. The entry stays out of the deadline heap, so no
 * other thread expires it; an answer taken after the deadline is still
 * late (FRPC_ETIMEDOUT). Its add and completion skip the heap's locked
 * operations. */
int fr_pending_add_sync(fr_pending_table *t, fr_pending *p, uint32_t dst,
                        const char *fname, int timeout_ms, uint64_t deadline,
                        struct fr_fn_stat *fstat);

/*
 * Completes the call id if it is still waiting and was sent to src: takes
 * ownership of data (malloc'ed, may be NULL) and err (malloc'ed message,
 * may be NULL) into its result with status and remote_code. Returns 1 if a
 * call was completed; 0 if none matched, in which case data and err are
 * freed and the drop is counted.
 */
int fr_pending_complete(fr_pending_table *t, uint64_t id, uint32_t src,
                        int status, int remote_code, void *data, size_t len,
                        char *err);

/* fr_pending_complete with when its completion was taken (as
 * fr_pending_complete_many's taken; 0: read the clock). */
int fr_pending_complete_at(fr_pending_table *t, uint64_t id, uint32_t src,
                           int status, int remote_code, void *data,
                           size_t len, char *err, uint64_t taken);

/* Replies up to this size travel in the answer itself (fr_answer.small)
 * and land in the call's reply_room when it has one. */
#define FR_SMALL_REPLY 64

/* One answer for fr_pending_complete_many: the arguments of
 * fr_pending_complete. data may point to small, which holds len bytes. */
typedef struct fr_answer {
    uint64_t id;
    uint32_t src;
    int status, remote_code;
    void *data;
    size_t len;
    char *err;
    _Alignas(max_align_t) unsigned char small[FR_SMALL_REPLY];
} fr_answer;

/* fr_pending_complete for n answers under one lock, waking sleepers once.
 * A reply in an answer's small goes to its call's reply_room if it fits,
 * else to a malloc'ed copy (FRPC_ENOMEM for the call if that fails).
 * taken: when the answers were taken (fr_now_ns clock, never ahead of
 * it; 0: read it here), for the deadlines and the calls' figures.
 * ans is read only until the completed calls' hooks run (they may poll
 * and refill it). Returns how many completed a call. */
size_t fr_pending_complete_many(fr_pending_table *t, fr_answer *ans,
                                size_t n, uint64_t taken);

/*
 * Sleeps until p is done or until_ns (fr_now_ns clock) passes. Returns 1 if
 * done. When give_up is set and p is not done by then, removes p and
 * completes it with FRPC_ETIMEDOUT (returns 1 then too).
 */
int fr_pending_wait(fr_pending_table *t, fr_pending *p, uint64_t until_ns,
                    int give_up);

/* Sleeps until some call completes after *epoch was read, or until_ns.
 * *epoch is updated to the current value. */
/* Wakes the wait_any sleepers and those asleep on the fabric as a
 * completion would, for something else they wait for (notify.c). */
void fr_pending_kick(fr_pending_table *t);

void fr_pending_wait_any(fr_pending_table *t, uint64_t *epoch,
                         uint64_t until_ns);

/* Removes p if it is still in the table, completing it with status and a
 * copy of msg. Returns 1 if this completed it, 0 if it was done already. */
int fr_pending_abort(fr_pending_table *t, fr_pending *p, int status,
                     const char *msg);

/* Completes every waiting call (to dst, or to any rank when dst is
 * UINT32_MAX) with status and a copy of msg. */
void fr_pending_fail(fr_pending_table *t, uint32_t dst, int status,
                     const char *msg);

/* fr_pending_fail for every rank, and no entry is added from then on:
 * fr_pending_add* returns FRPC_ESHUTDOWN (the agent's end: a callback or
 * a connection's drop that starts a call after it would leave an entry
 * nobody completes, and its owner's memory with it). */
void fr_pending_close(fr_pending_table *t, const char *msg);

/* The ids of the calls in flight to dst, at most max of them into ids;
 * returns how many there are (more than max: call again with room). */
size_t fr_pending_ids_to(fr_pending_table *t, uint32_t dst, uint64_t *ids,
                         size_t max);

/* Completes with FRPC_ETIMEDOUT every call whose deadline is <= now.
 * Cheap when none is due (one atomic load). Any thread. */
void fr_pending_expire(fr_pending_table *t, uint64_t now);
/* The deadline of call id, in flight to dst (UINT64_MAX: none), or 0 if
 * there is no such call (ended, or another rank's id). */
uint64_t fr_pending_deadline_of(fr_pending_table *t, uint64_t id,
                                uint32_t dst);

/* Gives call id, in flight to dst, a fresh id (the next one handed out)
 * and returns it, or 0 if there is no such call (ended, or another rank's
 * id): its answer must then name the new id, and one for the old id finds
 * nothing. For a request sent long after its entry was added (a batch's
 * notification, once its data landed): a callee that drops duplicates
 * takes an id far below the newest it saw as one seen already (dedup.h).
 * Its deadline stays. Any thread. */
uint64_t fr_pending_renew_id(fr_pending_table *t, uint64_t id, uint32_t dst);

/* Calls added so far (adds that went in; a renewed id is none). Never
 * goes down. */
uint64_t fr_pending_started(fr_pending_table *t);

/* Releases what p holds once its caller is done with it (not its result). */
void fr_pending_release(fr_pending *p);

#endif /* FR_RPC_PENDING_H */
