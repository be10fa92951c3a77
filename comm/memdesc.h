/*
 * Memory descriptors: the plain bytes that name a slice of a registered
 * region to peers (rpc/fabrpc.h, frpc_mem_describe).
 *
 * Design notes
 * - Fixed 64 bytes, little-endian, no pointers: they travel inside call
 *   args and replies, and a receiver decodes them without trusting them.
 * - The last 8 bytes are an HMAC-SHA256 of the first 56 keyed with the job
 *   token, so only ranks of this job make descriptors that pass: a
 *   stranger's bytes, another job's descriptor or a flipped bit fail
 *   before anything is posted. (The key check of the owner's provider
 *   still guards the memory itself.)
 *
 *   0 "FRMD"  4 version  5 access  6 flags  7 reserved  8 rank(4)
 *   12 slot(4)
 *   16 addr  24 key  32 len  40 region  48 reserved  56 check   (8 each)
 */
#ifndef FR_COMM_MEMDESC_H
#define FR_COMM_MEMDESC_H

#include <stddef.h>
#include <stdint.h>

#include "serialization/fabrpc_errors.h"

#define FR_MEMDESC_SIZE 64
#define FR_MEMDESC_VERSION 1
#define FR_MEMDESC_READ 1u  /* = FRPC_MEM_REMOTE_READ */
#define FR_MEMDESC_WRITE 2u /* = FRPC_MEM_REMOTE_WRITE */
/* flags: the owner serves the region by messages (rpc/emu_serve.c), not
 * by its provider's RMA: addr is an offset in the region, key its id. */
#define FR_MEMDESC_F_MESSAGES 1u

typedef struct fr_memdesc {
    uint32_t rank;   /* the owner */
    uint8_t access;  /* FR_MEMDESC_READ | FR_MEMDESC_WRITE */
    uint8_t flags;   /* FR_MEMDESC_F_* */
    uint64_t addr;   /* what the owner's provider takes as the slice's
                        first byte: a virtual address or an offset */
    uint64_t key;    /* the owner's registration key */
    uint64_t len;    /* bytes in the slice */
    uint64_t region; /* the owner's region id, for messages */
    uint32_t slot;   /* 1 + the region's slot in the owner's doorbell
                        (comm/doorbell.h, shm's fast path), or 0 */
} fr_memdesc;

/* Writes d's 64 bytes, checked under token, into out. */
void fr_memdesc_encode(const fr_memdesc *d, uint64_t token,
                       uint8_t out[FR_MEMDESC_SIZE]);

/* Decodes len bytes at in into *d. FRPC_EPROTO: not 64 bytes, or not the
 * format (magic, version, reserved bytes, unknown access bits);
 * FRPC_EACCES: the check value does not match under token (tampered, or
 * another job's); FRPC_ENORANK: a rank >= world. *d is set only on 0. */
int fr_memdesc_decode(const void *in, size_t len, uint64_t token,
                      uint32_t world, fr_memdesc *d);

#endif /* FR_COMM_MEMDESC_H */
