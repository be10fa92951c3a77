/*
 * The caller's side of a synchronous call: validate, record a pending
 * entry, send, then drive progress until the entry completes. The entry
 * is completed in exactly one place (pending.c); this file only reads the
 * result it was given.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/clock.h"
#include "rpc/agent.h"
#include "serialization/envelope.h"

void frpc_result_clear(frpc_result *res)
{
    if (!res)
        return;
    free(res->data);
    free(res->error);
    memset(res, 0, sizeof(*res));
}

static int set_result(frpc_result *res, int status, char *error)
{
    if (res) {
        memset(res, 0, sizeof(*res));
        res->status = status;
        res->error = error;
    } else {
        free(error);
    }
    return status;
}

static char *fmt(const char *f, const char *name, int dst, const char *x)
{
    char buf[512];
    snprintf(buf, sizeof(buf), f, name, dst, x);
    return strdup(buf);
}

/* Gives the caller a message that names the call for every local error,
 * and keeps the remote one as it came. */
static void explain(fr_pending *p, int dst, int timeout_ms)
{
    char *old = p->res.error;
    char buf[160];
    switch (p->res.status) {
    case 0:
    case FRPC_EREMOTE:
        return;
    case FRPC_ENOFUNC:
        p->res.error = fmt("no function '%s' on rank %d%s", p->fname, dst, "");
        break;
    case FRPC_ETIMEDOUT:
        snprintf(buf, sizeof(buf), " timed out after %d ms", timeout_ms);
        p->res.error = fmt("call to '%s' on rank %d%s", p->fname, dst, buf);
        break;
    default:
        snprintf(buf, sizeof(buf), ": %s%s%s",
                 frpc_strerror(p->res.status), old ? ": " : "",
                 old ? old : "");
        p->res.error = fmt("call to '%s' on rank %d failed%s", p->fname, dst,
                           buf);
        break;
    }
    free(old);
}

int frpc_call(frpc_agent *a, int dst, const char *name, const void *args,
              size_t len, int timeout_ms, frpc_result *res)
{
    fr_pending p;
    uint64_t deadline;
    size_t nlen = name ? strlen(name) : 0;
    int rc;

    if (!a || nlen == 0 || nlen > FR_FUNC_NAME_MAX || (len && !args))
        return set_result(res, FRPC_EINVAL,
                          strdup("frpc_call: agent and name must be given, "
                                 "and args when len > 0"));
    if (dst < 0 || dst >= a->set.world)
        return set_result(res, FRPC_ENORANK,
                          fmt("call to '%s': rank %d does not exist%s", name,
                              dst, " (world size is too small)"));
    if (len > a->set.max_msg)
        return set_result(res, FRPC_ETOOBIG,
                          fmt("call to '%s' on rank %d: args exceed the "
                              "message limit%s",
                              name, dst, ""));
    /* While a graceful shutdown drains, handlers serving other ranks may
     * still call out (they run on the polling thread); nobody else may. */
    int closing = atomic_load(&a->shutting_down);
    if (closing == FRPC_SHUTDOWN_IMMEDIATE + 1 ||
        (closing && !fr_fabric_polling_here(a->fab)))
        return set_result(res, FRPC_ESHUTDOWN,
                          fmt("call to '%s' on rank %d: agent is shutting "
                              "down%s",
                              name, dst, ""));

    deadline = fr_deadline_ms(timeout_ms);
    atomic_fetch_add(&a->calls, 1);
    fr_pending_add(&a->pend, &p, (uint32_t)dst, name);
    fr_env e = {.kind = FR_ENV_REQUEST, .req_id = p.id,
                .func_id = fr_func_id(name)};
    rc = fr_fabric_send(a->fab, (uint32_t)dst, &e, args, len, deadline);
    if (rc)
        fr_pending_abort(&a->pend, &p, rc, NULL);
    else
        fr_progress_wait_call(a, &p, deadline);
    explain(&p, dst, timeout_ms);
    rc = p.res.status;
    if (rc)
        atomic_fetch_add(&a->calls_failed, 1);
    if (res)
        *res = p.res;
    else {
        free(p.res.data);
        free(p.res.error);
    }
    fr_pending_release(&p);
    return rc;
}
