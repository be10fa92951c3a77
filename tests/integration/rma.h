/*
 * What rma.c's modes share with rma_batch.c's: this rank's agent and
 * region (read and write for peers, filled with pattern(rank, i)), and the
 * helpers around them. CHECK's `me` is per file: set it after start().
 */
#ifndef FR_TEST_RMA_H
#define FR_TEST_RMA_H

#include <stddef.h>
#include <stdint.h>

#include <fabrpc.h>

#define TIMEOUT_MS 120000

extern frpc_agent *agent;
extern int world;
extern frpc_mem *region;
extern uint8_t *region_buf;
extern size_t region_len;
extern uint8_t mydesc[FRPC_MEM_DESC_SIZE];

uint8_t pattern(uint32_t seed, size_t i);
void fill(uint8_t *b, size_t n, uint32_t seed, size_t from);
/* Index of the first byte of b[0..n) that is not pattern(seed, from + i),
 * or n. */
size_t verify(const uint8_t *b, size_t n, uint32_t seed, size_t from);
/* frpc_init, then this rank's region of len bytes, registered and
 * described, and the "desc" and "check" functions; a barrier. */
void start(size_t len);
/* 1 if this rank's transfers are emulated (frpc_backend_report). */
int rma_emulated(void);
/* 1 if this rank's transfers go natively over shm (fabrpc's listing of
 * regions checks its peers' descriptors). */
int rma_shm_native(void);
void desc_of(int rank, uint8_t out[FRPC_MEM_DESC_SIZE]);
/* The descriptor rank's function fn answers for args. */
void desc_by(int rank, const char *fn, const void *args, size_t alen,
             uint8_t out[FRPC_MEM_DESC_SIZE]);
/* A zeroed local region of len bytes for this rank's transfers (*buf:
 * the caller's to free once the region is deregistered). */
frpc_mem *local_region(size_t len, uint8_t **buf);
/* Rank rank checks that its region's [off, off + len) holds seed's
 * pattern (from 0). */
void owner_check(int rank, size_t off, size_t len, uint32_t seed);
/* A barrier, the region deregistered, a graceful shutdown. */
void finish(void);
uint8_t *map_region(size_t len, int fill, int access, frpc_mem **mem,
                    uint8_t desc[FRPC_MEM_DESC_SIZE]);
void expect(int rc, int want, const char *what);
/* CLOCK_MONOTONIC in milliseconds. */
double now_ms(void);
/* Prints the agent's transport and transfer counters to stderr (for a
 * failure: what a timed-out transfer left behind). */
void rma_dump_counters(void);

/* Each file's CHECK (check_fail.h) dumps the counters on failure. */
#define RMA_DUMP_ON_FAILURE                                                   \
    __attribute__((constructor)) static void rma_set_dump(void)               \
    {                                                                         \
        check_fail_dump = rma_dump_counters;                                  \
    }

int mode_batch(void);
int mode_longbatch(void);
int mode_notify(void);
int mode_cycles(void);
int mode_notebig(void);
int mode_ownersmall(void);
int mode_modes(void);
int mode_fallback(void);
int mode_dereg_shutdown(void);
int mode_held_owner(void);
int mode_unmapped(void);
int mode_noteshut(void);
int mode_race(void);
int mode_held_listing(void);
int mode_held_shutdown(void);
int mode_held_lost(void);
int mode_listing_full(void);
int mode_slot_reuse(void);
int mode_notezero(void);
int mode_notefail(void);
int mode_notewait(void);
int mode_noteorder(void);
int mode_notemulti(void);
int mode_notestats(void);
int mode_fence_stopped(void);
int mode_fence_none(void);
int mode_fence_alone(void);
int mode_fence_count(void);
int mode_fence_in_handler(void);

#endif /* FR_TEST_RMA_H */
