/*
 * The pending table: request id -> the call waiting for its answer.
 *
 * Design notes (the invariant): every call completes exactly once. A call
 * is completed by whoever removes its entry from the table, under the
 * table lock: the response path (fr_pending_complete), the waiter giving
 * up at its deadline (fr_pending_wait), or a failure that ends many calls
 * at once (fr_pending_fail_all / _fail_dst). Whoever removes it fills its
 * result; the others find no entry and drop what they hold, and a dropped
 * answer is counted, never delivered to another call. Request ids come from
 * a 64-bit counter and are never reused in the table's life.
 */
#ifndef FR_RPC_PENDING_H
#define FR_RPC_PENDING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rpc/fabrpc.h"

typedef struct fr_pending {
    struct fr_pending *next;
    uint64_t id;
    uint32_t dst;
    const char *fname;   /* for error messages; borrowed */
    pthread_cond_t cond; /* signalled under the table lock on completion */
    atomic_int done;
    frpc_result res;     /* filled by the completer */
} fr_pending;

typedef struct fr_pending_table {
    pthread_mutex_t lock;
    fr_pending **bucket;
    unsigned nbuckets;
    uint64_t next_id;
    atomic_uint_fast64_t dropped; /* answers with no waiting call */
    atomic_uint_fast64_t inflight;
} fr_pending_table;

int fr_pending_init(fr_pending_table *t);
void fr_pending_destroy(fr_pending_table *t);

/* Prepares p (zeroes its result) and inserts it under a fresh id, which is
 * returned in p->id. */
void fr_pending_add(fr_pending_table *t, fr_pending *p, uint32_t dst,
                    const char *fname);

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

/*
 * Sleeps until p is done or until_ns (fr_now_ns clock) passes. Returns 1 if
 * done. When give_up is set and p is not done by then, removes p and
 * completes it with FRPC_ETIMEDOUT (returns 1 then too).
 */
int fr_pending_wait(fr_pending_table *t, fr_pending *p, uint64_t until_ns,
                    int give_up);

/* Removes p if it is still in the table, completing it with status and a
 * copy of msg. */
void fr_pending_abort(fr_pending_table *t, fr_pending *p, int status,
                      const char *msg);

/* Completes every waiting call (to dst, or to any rank when dst is
 * UINT32_MAX) with status and a copy of msg. */
void fr_pending_fail(fr_pending_table *t, uint32_t dst, int status,
                     const char *msg);

/* Releases what p holds once its caller is done with it. */
void fr_pending_release(fr_pending *p);

#endif /* FR_RPC_PENDING_H */
