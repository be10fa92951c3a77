/*
 * A registered region (mem.c), as the transfers (transfer.c) use it.
 */
#ifndef FR_RPC_MEM_H
#define FR_RPC_MEM_H

#include "rpc/agent.h"

struct frpc_mem {
    frpc_agent *agent; /* NULL once frpc_shutdown ended the registration */
    frpc_mem *next, *prev;
    fr_fabric_mr *mr;
    uint8_t *buf;
    size_t len;
    unsigned access; /* FRPC_MEM_REMOTE_* */
    atomic_int busy;
};

#endif /* FR_RPC_MEM_H */
