/*
 * Fences a region's deregistration against peers' transfers that the
 * owner's provider still serves from its memory.
 *
 * Where the owner's CPU moves the bytes of a peer's native transfer
 * (tcp;ofi_rxm, sockets), the provider checks the key when the request
 * arrives and then sends a get's bytes from the region as the socket
 * takes them, or writes a put's as they come in: closing the
 * registration refuses new requests but not those already taken. So a
 * deregistration that returned after the close let a peer's 256 MiB get
 * end 0 with bytes written after it, and a region unmapped then made the
 * provider fail its socket (every call between the two ranks timed out
 * afterwards).
 *
 * After the close, a call to FR_FENCE_NAME on each peer, answered once
 * that peer has no one-sided operation out to us: each of those was
 * either taken before the close (and is over, its bytes moved) or comes
 * after it (refused). A call's answer alone proves nothing: over
 * tcp;ofi_rxm it overtook 256 MiB of get answers queued before it. A
 * peer whose answer does not come by the deadline (stopped, or its
 * transfers to us held) makes the deregistration FRPC_ETIMEDOUT, as a
 * stopped peer's hold does over shm; one lost, or whose connection
 * dropped (which ends what was queued on it), does not hold it. An older
 * peer without the function answers FRPC_ENOFUNC at once: it is not
 * waited for.
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>

#include "comm/clock.h"
#include "rpc/agent.h"

/* Inline, on the thread that polls: answered at once when this rank has
 * no one-sided operation out to the caller (the usual case), else once
 * those are given back, polling (nested in the poll that ran it) until
 * the caller's deadline, and answered either way (the caller's own
 * timeout decides). Not on the pool: a pool of one busy in a handler
 * that deregisters, on two ranks at once, left each rank's question
 * unanswered until its timeout (for ever with none). */
static int no_ops_to_caller(void *req)
{
    frpc_request *r = req;
    return fr_fabric_rma_ops_to(r->agent->fab, r->src) == 0;
}

static void on_fence(frpc_request *req, void *user)
{
    frpc_agent *a = user;
    fr_progress_poll_until(a, no_ops_to_caller, req, req->caller_deadline);
    frpc_respond(req, NULL, 0);
}

typedef struct asked {
    frpc_future **f;
    int n;
} asked;

static int all_answered(void *arg)
{
    const asked *q = arg;
    for (int i = 0; i < q->n; i++)
        if (!frpc_future_test(q->f[i]))
            return 0;
    return 1;
}

int fr_fence_register(frpc_agent *a)
{
    return fr_registry_add(&a->reg, fr_func_id(FR_FENCE_NAME), FR_FENCE_NAME,
                           on_fence, a, FRPC_INLINE | FR_FUNC_UNCOUNTED);
}

int fr_fence_peers(frpc_agent *a, uint64_t deadline)
{
    int world = a->set.world, n = 0, rc = 0;
    uint64_t now = fr_now_ns();
    if (world == 1)
        return 0;
    /* At least 1 ms: a call past its deadline is still sent. None for
     * no deadline (the cast made some number of a 584-year one). */
    uint64_t left = deadline > now ? (deadline - now + 999999) / 1000000 : 1;
    int ms = deadline == UINT64_MAX ? FRPC_TIMEOUT_NONE
             : left > INT_MAX        ? INT_MAX
                                     : (int)left;
    frpc_future **f = calloc((size_t)world, sizeof(*f));
    if (!f)
        return FRPC_ENOMEM;
    int was = fr_call_own_names(1), was_unlimited = fr_pending_unlimited(1);
    for (int r = 0; r < world && !rc; r++) {
        if (r == a->set.rank ||
            fr_agent_call_refused_why(a, (uint32_t)r, FR_FENCE_NAME))
            continue;
        int s = frpc_call_async(a, r, FR_FENCE_NAME, NULL, 0, ms, &f[n]);
        if (s == 0)
            n++;
        else if (s == FRPC_ESHUTDOWN || s == FRPC_ENOMEM)
            rc = s;
    }
    fr_pending_unlimited(was_unlimited);
    fr_call_own_names(was);
    /* A thread that may not wait so (the one pool thread of threads 1, an
     * inline handler past the nesting limit) polls instead, as the rest
     * of a deregistration does: frpc_mem_deregister blocks, and gave up
     * at once, FRPC_ETIMEDOUT, from such a handler. */
    if (frpc_wait_all(f, (size_t)n, ms) == FRPC_EDEADLK)
        fr_progress_poll_until(a, all_answered, &(asked){f, n}, deadline);
    for (int i = 0; i < n; i++) {
        int s = frpc_future_error(f[i], NULL, NULL);
        if (s == FRPC_EINPROGRESS)
            s = FRPC_ETIMEDOUT;
        if (!rc && (s == FRPC_ETIMEDOUT || s == FRPC_ESHUTDOWN))
            rc = s;
        frpc_future_free(f[i]);
    }
    free(f);
    return rc;
}
