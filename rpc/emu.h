/*
 * One-sided transfers emulated by messages: what transfer.c, mem.c and
 * agent.c need of emu.c (the side that asks) and emu_serve.c (the owner's
 * side, and the choice between native and emulated at init).
 */
#ifndef FR_RPC_EMU_H
#define FR_RPC_EMU_H

#include <stddef.h>
#include <stdint.h>

#include "rpc/agent.h"

/* fabrpc's own functions (FRPC_INLINE) that serve the emulation. */
#define FR_EMU_GET_NAME FR_RESERVED_PREFIX "get"
#define FR_EMU_PUT_NAME FR_RESERVED_PREFIX "put"

/* A request's args: the descriptor as the caller got it, the offset in
 * the described slice and the length, little-endian; a put's bytes
 * follow. */
#define FR_EMU_HDR (FRPC_MEM_DESC_SIZE + 16)

/* The largest piece of a transfer one request moves, and how much of a
 * transfer is in flight at once (at least one piece): big enough that a
 * piece costs one rendezvous of the call path, small enough that 256 MiB
 * never sits in buffers at once. */
#define FR_EMU_CHUNK (4u << 20)
#define FR_EMU_WINDOW_BYTES (16u << 20)
#define FR_EMU_WINDOW_CHUNKS 64u

/* One segment of an emulated transfer: fr_rma_seg's counterpart, naming
 * the remote slice by its descriptor (the owner checks it again). */
typedef struct fr_emu_seg {
    int write;          /* 1: put; 0: get */
    frpc_mem *local;    /* held busy by the caller until done runs */
    size_t local_off;
    uint64_t remote_off; /* in the descriptor's slice */
    size_t len;
    uint8_t desc[FRPC_MEM_DESC_SIZE];
} fr_emu_seg;

/*
 * emu.c: fr_fabric_rma's contract, by requests to the owner: op gives the
 * owner (dst), the deadline (for every request: past it they end with
 * FRPC_ETIMEDOUT), done, ctx and id (op->segs is not read); segs[0..n)
 * are copied. On 0, op->done runs exactly once with a copy of op (from
 * whichever thread ends the last request; possibly before this returns),
 * with the first failure's code and words, or 0 once every byte moved.
 * Otherwise nothing was sent and done never runs: FRPC_EINVAL (no bytes),
 * FRPC_EPEERLOST, FRPC_ETOOBIG (max_msg leaves no room for a piece),
 * FRPC_ENOMEM. Any thread; never waits for the network except for room
 * to send.
 */
int fr_emu_rma(frpc_agent *a, const fr_rma *op, const fr_emu_seg *segs,
               unsigned n);

/* emu_serve.c: registers the owner's functions (at init). */
int fr_emu_register(frpc_agent *a);

/*
 * emu_serve.c: decides, once the transport is open, whether this rank's
 * transfers are native or emulated (config.rma; auto: native when the
 * provider's endpoint has RMA and a test registration works), and keeps
 * the reason for frpc_backend_report. FRPC_ENOBACKEND (rma native and the
 * provider cannot), with err set.
 */
int fr_emu_choose(frpc_agent *a, char *err, size_t errlen);

/* emu_serve.c: the report's line ("rma: native\n", "rma: emulated
 * (why)\n") into buf as snprintf would (a NULL agent's: ""). */
int fr_emu_report(const frpc_agent *a, char *buf, size_t len);

static inline void fr_emu_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t fr_emu_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#endif /* FR_RPC_EMU_H */
