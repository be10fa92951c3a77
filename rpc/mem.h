/*
 * A registered region (mem.c), as the transfers (transfer.c) use it.
 */
#ifndef FR_RPC_MEM_H
#define FR_RPC_MEM_H

#include "comm/memdesc.h"
#include "rpc/agent.h"

struct frpc_mem {
    frpc_agent *agent; /* NULL once frpc_shutdown ended the registration */
    frpc_mem *next, *prev;
    fr_fabric_mr *mr;   /* NULL when this rank's transfers are emulated */
    uint8_t *buf;
    size_t len;
    unsigned access; /* FRPC_MEM_REMOTE_* */
    int writable;    /* this process may write it (a get's destination) */
    atomic_int busy;
    /* A transfer using it ended FRPC_ESHUTDOWN: a deregistration that
     * waited for it says so, as it does for one still in the provider's
     * hands (emulated ones end wholly at the shutdown's sweep). */
    atomic_int shut_ended;
    uint64_t id;         /* never reused in the agent's life */
    atomic_int serving;  /* peers' emulated requests using it now */
    /* 1 + its slot in the doorbell where the provider checks no key (shm:
     * fr_fabric_region_list), or 0 */
    uint32_t slot;
    /* its descriptors say it is served by messages: emulated here (mr
     * NULL), or not listed where it had to be (every slot taken) */
    int by_messages;
    /* Its registration is closed and peers are being fenced (fence.c): a
     * deregistration timed out there, and the next one goes on from it. */
    int fencing;
};

/* What a descriptor of m's byte off carries: the provider's address and
 * key when peers reach m through the provider, else (by_messages) the
 * offset and m's id. */
uint64_t fr_mem_addr(const frpc_mem *m, size_t off);
uint64_t fr_mem_key(const frpc_mem *m);

/* fr_memdesc_decode under a's token and world, through a small cache per
 * thread of the descriptors that passed (the same codes). */
/* mapped.c: what this process may do with every byte of buf[0..len):
 * FR_RANGE_READ and/or FR_RANGE_WRITE, 0 where a byte is not mapped,
 * would raise SIGBUS (a file's page past its end, [vvar]) or the range
 * wraps (both when it cannot tell: no /proc). */
#define FR_RANGE_READ 1u
#define FR_RANGE_WRITE 2u
unsigned fr_range_perms(const void *buf, size_t len);

int fr_mem_decode(const frpc_agent *a, const void *desc, size_t dlen,
                  fr_memdesc *d);

#endif /* FR_RPC_MEM_H */
