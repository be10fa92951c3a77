/*
 * A connection that dropped under frames (comm/fabric.h,
 * on_connection_dropped): tcp;ofi_rxm's peer drops it when it refuses an
 * RMA key (a stale descriptor), and what was on it in either direction
 * may be lost, though each side's provider may have called it sent.
 *
 * Design notes
 * - Neither side knows which frames were lost, and running a call twice
 *   is worse than failing it, so nothing is sent again: each call in
 *   flight to that rank is suspected (fr_liveness_suspect). Answered
 *   within about a second it ends well; else with FRPC_ETRANSPORT, saying
 *   it may or may not have run. Never at its own timeout.
 * - Lent args count as read over that connection too: the reader's word
 *   that it is done (RNDV_DONE) may have gone onto the dying connection,
 *   and a lent call's future, done only when its loan is back, was then
 *   done only when the callee ended. The loans to that rank can be taken
 *   back from the drop on (fr_fabric_loans_dropped), so such a call ends
 *   with the others.
 * - Only the side whose operation failed sees the drop, so it tells the
 *   other with a call to FR_DROPPED_NAME, whose handler suspects that
 *   side's calls in turn. The first telling, sent as the drop is seen,
 *   often goes onto the dying connection and is lost with it (tcp: every
 *   time in a probe, and the other side's calls then ended at their own
 *   timeouts). So it is sent again while it ends FRPC_ETRANSPORT or
 *   FRPC_ETIMEDOUT, at most FR_DROPPED_TRIES times, with a timeout that
 *   starts short (the other side should know within about a second) and
 *   doubles (a loaded peer may answer slowly). Told twice, the other side
 *   only suspects again what it suspects already.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "rpc/agent.h"

#define FR_DROPPED_NAME FR_RESERVED_PREFIX "dropped"
#define FR_DROPPED_TRIES 7
#define FR_DROPPED_FIRST_TIMEOUT_MS 100 /* then 200, 400, ... 6400 */

static void suspect_calls_to(frpc_agent *a, uint32_t rank)
{
    uint64_t some[64], *ids = some;
    /* Before the calls end: a lent call ending FRPC_ETRANSPORT takes its
     * args back then, its reader's RNDV_DONE perhaps lost with the
     * connection. */
    fr_fabric_loans_dropped(a->fab, rank);
    size_t n = fr_pending_ids_to(&a->pend, rank, some, 64);
    if (n > 64) { /* ids added meanwhile are newer: left out */
        ids = malloc(n * sizeof(*ids));
        n = ids ? fr_pending_ids_to(&a->pend, rank, ids, n) : 64;
        if (!ids)
            ids = some;
    }
    char msg[128];
    snprintf(msg, sizeof(msg),
             "the connection to rank %u dropped in flight (an operation "
             "on it failed): it may or may not have run",
             rank);
    for (size_t i = 0; i < n; i++)
        fr_liveness_suspect(a, rank, ids[i], FRPC_ETRANSPORT, msg);
    if (ids != some)
        free(ids);
}

typedef struct telling {
    frpc_agent *a;
    uint32_t rank;
    int tries;
} telling;

static void tell(telling *t);

static void told(frpc_future *f, void *user)
{
    telling *t = user;
    int rc = frpc_future_error(f, NULL, NULL);
    frpc_future_free(f);
    if ((rc == FRPC_ETRANSPORT || rc == FRPC_ETIMEDOUT) &&
        t->tries < FR_DROPPED_TRIES)
        tell(t);
    else
        free(t);
}

static void tell(telling *t)
{
    frpc_future *f;
    t->tries++;
    int was = fr_call_own_names(1), was_unlimited = fr_pending_unlimited(1);
    int rc = frpc_call_async(t->a, (int)t->rank, FR_DROPPED_NAME, NULL, 0,
                             FR_DROPPED_FIRST_TIMEOUT_MS << (t->tries - 1),
                             &f);
    fr_pending_unlimited(was_unlimited);
    fr_call_own_names(was);
    if (rc != 0 || frpc_future_then(f, told, t) != 0)
        free(t); /* shutting down, lost, or no memory: nobody to tell */
}

void fr_agent_on_connection_dropped(void *ctx, uint32_t rank)
{
    frpc_agent *a = ctx;
    suspect_calls_to(a, rank);
    telling *t = calloc(1, sizeof(*t));
    if (!t)
        return;
    *t = (telling){.a = a, .rank = rank};
    tell(t);
}

static void on_told(frpc_request *req, void *user)
{
    frpc_agent *a = user;
    int src = frpc_request_source(req);
    frpc_respond(req, NULL, 0);
    suspect_calls_to(a, (uint32_t)src);
}

int fr_dropped_register(frpc_agent *a)
{
    return fr_registry_add(&a->reg, fr_func_id(FR_DROPPED_NAME),
                           FR_DROPPED_NAME, on_told, a, FRPC_INLINE);
}
