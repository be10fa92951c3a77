/*
 * A fixed-size thread pool with a bounded FIFO queue and caller-runs
 * back-pressure. A pool is a long-lived handle: created once, destroyed
 * once, by a thread that is not one of its workers.
 *
 * Design notes (the invariant): every task that fr_pool_submit accepts
 * runs exactly once; a task it refuses never runs. Accepted means queued
 * (returns 0, run later by a worker, in submission order) or run inline by
 * the submitter because the queue was full (returns 1). Refused means an
 * error (FRPC_EINVAL, or FRPC_ESHUTDOWN once destroy has begun). Destroy
 * runs every task queued before it began, so nothing accepted is lost.
 *
 * The pool keeps no global state: everything lives in the fr_pool.
 */
#ifndef FR_RPC_POOL_H
#define FR_RPC_POOL_H

#include "serialization/fabrpc_errors.h"

#define FR_POOL_MAX_THREADS 256u
#define FR_POOL_MAX_CAPACITY (1u << 20)

typedef void (*fr_task_fn)(void *arg);

typedef struct fr_pool fr_pool; /* opaque */

/*
 * Starts nthreads workers (1..FR_POOL_MAX_THREADS) and a queue of capacity
 * tasks (1..FR_POOL_MAX_CAPACITY); stores the pool in *out. Errors:
 * FRPC_EINVAL (a count out of range, out NULL), FRPC_ENOMEM (memory or a
 * thread could not be had; nothing is left running). On error *out is set
 * to NULL when out is not. Blocks while the threads start. Any thread.
 */
int fr_pool_create(unsigned nthreads, unsigned capacity, fr_pool **out);

/*
 * fr_pool_create, for a pool that may grow to max_threads workers
 * (nthreads..FR_POOL_MAX_THREADS): fr_pool_block starts a worker when the
 * one asking would otherwise leave none unblocked, so that a worker's
 * wait never stops the queue from being served (a burst of handlers that
 * each make a nested call). Workers added stay until fr_pool_destroy.
 * Errors and blocking as fr_pool_create.
 */
int fr_pool_create_growing(unsigned nthreads, unsigned max_threads,
                           unsigned capacity, fr_pool **out);

/*
 * Queues fn(arg) to run on a worker, in FIFO order, and returns 0. When
 * the queue is full the calling thread runs fn(arg) itself before
 * returning and the result is 1: the submitter is slowed by exactly the
 * work it adds. arg is the caller's; the pool never frees it. Errors:
 * FRPC_EINVAL (p or fn NULL), FRPC_ESHUTDOWN (fr_pool_destroy has begun);
 * on error fn is never called. Never blocks except to run the task, so the
 * caller must not hold a lock that fn takes. Any thread, workers included.
 */
int fr_pool_submit(fr_pool *p, fr_task_fn fn, void *arg);

/* 1 if the calling thread is one of p's workers, else 0 (0 for NULL p).
 * Does not block. Any thread. */
int fr_pool_is_worker(const fr_pool *p);

/*
 * Nesting guard, for a worker about to block on something other workers
 * may have to do. From a worker: returns 0 and counts the worker as
 * blocked if at least one other worker would stay unblocked (in a growing
 * pool below its max_threads, by starting one), else FRPC_EAGAIN
 * (nothing counted; the caller should do the work itself or fail rather
 * than wait). Every 0 a worker gets must be paired with one
 * fr_pool_unblock from the same worker. A non-worker always gets 0 and is
 * not counted (its unblock is a no-op). FRPC_EINVAL for NULL p. Takes the
 * pool lock briefly; does not block otherwise. Any thread.
 */
int fr_pool_block(fr_pool *p);

/* Ends what a 0 from fr_pool_block began; call it on the same worker.
 * A no-op for NULL and for non-workers. Takes the pool lock briefly. */
void fr_pool_unblock(fr_pool *p);

/* The number of workers it was created with (not those a growing pool
 * added); 0 for NULL. Any thread. */
unsigned fr_pool_size(const fr_pool *p);

/* The number of tasks queued and not yet started, at some recent moment
 * (approximate: it may change before the caller looks). 0 for NULL. */
unsigned fr_pool_queued(const fr_pool *p);

/*
 * Stops accepting tasks (submit returns FRPC_ESHUTDOWN from now on), lets
 * the workers run every task already queued, joins them and frees p. Tasks
 * still running may call fr_pool_submit (they get FRPC_ESHUTDOWN) and the
 * other pool functions. Must not be called from one of p's workers, nor
 * twice; p must not be used once it returns. NULL is a no-op. Blocks until
 * the queue is drained.
 */
void fr_pool_destroy(fr_pool *p);

#endif /* FR_RPC_POOL_H */
