/*
 * Per-function figures (frpc_get_fn_stats): for each function name, the
 * calls this rank made (timed start to outcome) and the requests its
 * handler answered (timed arrival to answer).
 *
 * Design notes: a figure is bumped on every call's and every answer's
 * path, so finding a name's record takes no lock (a probe of an
 * open-addressed table of the 64-bit function ids the wire carries
 * anyway); only the first sighting of a name takes the table's mutex to
 * add its record. Records are never removed, so a pointer to one stays
 * valid for the table's life. Times go into a log-linear histogram (8
 * steps per power of two), so percentiles cost memory per name, not per
 * call, and stay within 1/16 of the truth.
 */
#ifndef FR_RPC_FNSTATS_H
#define FR_RPC_FNSTATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rpc/fabrpc.h"

/* 8 exact buckets below 8 ns, then 8 per power of two up to 2^40 ns
 * (18 min); longer times share the last bucket. */
#define FR_HIST_SUB_BITS 3
#define FR_HIST_TOP_POW 40
#define FR_HIST_BUCKETS (((FR_HIST_TOP_POW - FR_HIST_SUB_BITS) + 1) << FR_HIST_SUB_BITS)

/* The count is the buckets' sum: one add fewer per time. began and ended
 * count the adds begun and ended, so that a reader knows whether one ran
 * while it read (a seqlock that lets several writers in at once): the
 * figures of a name are read whole, never a time without its count.
 * held: readers that met adds too often and hold new ones back. */
typedef struct fr_hist {
    atomic_uint_fast64_t began, ended;
    atomic_int held;
    atomic_uint_fast64_t failed, total, min, max;
    atomic_uint_fast64_t bucket[FR_HIST_BUCKETS];
} fr_hist;

typedef struct fr_fn_stat {
    uint64_t id;
    fr_hist call;   /* as the caller: bumped under the pending table's lock */
    fr_hist handle; /* as the callee: bumped by any answering thread */
    char name[];
} fr_fn_stat;

/* Slots of the id table: a power of two, twice FRPC_FN_STATS_MAX so that
 * probes stay short when it is full. */
#define FR_FNSTATS_SLOTS (2 * FRPC_FN_STATS_MAX)

typedef struct fr_fnstats {
    pthread_mutex_t lock; /* adders only */
    _Atomic(fr_fn_stat *) slot[FR_FNSTATS_SLOTS];
    fr_fn_stat *order[FRPC_FN_STATS_MAX]; /* first seen first */
    atomic_int count;                     /* of order[], published last */
} fr_fnstats;

void fr_fnstats_init(fr_fnstats *s);
void fr_fnstats_destroy(fr_fnstats *s);

/* The record of name (whose fr_func_id is id), added if new; NULL when
 * FRPC_FN_STATS_MAX names have records already or memory ran out (the
 * figures are then not kept: nothing else depends on them). */
fr_fn_stat *fr_fnstats_get(fr_fnstats *s, uint64_t id, const char *name);

/* Counts one time of ns. exclusive: the caller is the only writer of h
 * (holds a lock all writers take), so plain stores do. */
void fr_hist_add(fr_hist *h, uint64_t ns, int failed, int exclusive);

/* The record of name if it has one, else NULL. */
const fr_fn_stat *fr_fnstats_find(const fr_fnstats *s, const char *name);

/* Fills the public figures from a record (st NULL: zeros): each side's
 * figures as they were between two adds. A reader that keeps meeting
 * adds holds new ones back until it has read; if an add under way does
 * not end within 100 ms (its thread lost its core), it takes its last
 * read made to hold together (count, failures, total, min and max
 * clamped to one another). */
void fr_fnstats_fill(const fr_fn_stat *st, frpc_fn_stats *out);

#endif /* FR_RPC_FNSTATS_H */
