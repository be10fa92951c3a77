/*
 * Requests a provider may deliver twice. Over udp, libfabric 1.17's
 * ofi_rxd delivered one request twice under bursts from several ranks,
 * and its handler ran twice (a probe: up to 641 times in a run of
 * 30,000 calls). Calls are at most once: the callee takes each request
 * id of a source once. Ids are the caller's, one counter per agent, so
 * they rise; a window of FR_DEDUP_WINDOW ids below the highest seen is
 * remembered, and an id older than that is taken as seen (its call, far
 * behind the others, ends by its timeout rather than run twice).
 */
#ifndef FR_RPC_DEDUP_H
#define FR_RPC_DEDUP_H

#include <pthread.h>
#include <stdint.h>

#define FR_DEDUP_WINDOW 65536u /* ids; 8 KiB per source that sends any */

typedef struct fr_dedup_src fr_dedup_src;

typedef struct fr_dedup {
    uint32_t world;
    pthread_mutex_t lock;
    fr_dedup_src **src; /* per rank, made at its first request */
} fr_dedup;

/* 0, or FRPC_ENOMEM. */
int fr_dedup_init(fr_dedup *d, uint32_t world);
/* 1 if src's request id was taken already (or is too old to tell), else
 * records it and returns 0. Also 0 when out of memory: a request is
 * never lost to this check. Any thread. */
int fr_dedup_seen(fr_dedup *d, uint32_t src, uint64_t id);
void fr_dedup_destroy(fr_dedup *d);

#endif /* FR_RPC_DEDUP_H */
