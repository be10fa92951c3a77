/*
 * The caller's side of a synchronous call: check, record a pending entry
 * (on the stack: a sync call allocates nothing of its own), send, then
 * drive progress until the entry completes. The entry is completed in
 * exactly one place (pending.c); this file only reads the result it got.
 * future.c shares the checks and the send.
 */
#include "config.h"

#include <limits.h>
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

#define FR_STR_(x) #x
#define FR_STR(x) FR_STR_(x)

static char *fmt(const char *f, const char *name, int dst)
{
    char buf[512];
    snprintf(buf, sizeof(buf), f, name ? name : "", dst);
    return strdup(buf);
}

/* Set on the thread in frpc_shutdown while it says goodbye (see
 * fr_call_shutdown_own). */
static _Thread_local int shutdown_own_calls FR_TLS_FAST;

/* Set while fabrpc itself calls one of its own functions. */
static _Thread_local int own_names FR_TLS_FAST;

int fr_call_own_names(int on)
{
    int was = own_names;
    own_names = on;
    return was;
}

int fr_call_check(frpc_agent *a, int dst, const char *name, const void *args,
                  size_t len, char **why)
{
    size_t nlen = name ? strlen(name) : 0;
    if (!a || nlen == 0 || nlen > FR_FUNC_NAME_MAX || (len && !args)) {
        *why = strdup("a call needs an agent, a name of 1..255 bytes, and "
                      "args when len > 0");
        return FRPC_EINVAL;
    }
    if (!own_names && fr_name_reserved(name)) {
        /* Its handler trusts its caller to be fabrpc: a goodbye would
         * mark this live rank LEFT on the callee. */
        *why = fmt("call to '%s' (rank %d): the name is fabrpc's own "
                   "function, not the application's", name, dst);
        return FRPC_EINVAL;
    }
    if (dst >= 0 && dst < a->set.world && len > a->set.max_msg) {
        *why = fmt("call to '%s' on rank %d: args exceed the message limit",
                   name, dst);
        return FRPC_ETOOBIG;
    }
    return fr_call_check_peer(a, dst, name, why);
}

int fr_call_check_peer(frpc_agent *a, int dst, const char *name, char **why)
{
    if (dst < 0 || dst >= a->set.world) {
        *why = fmt("call to '%s': rank %d does not exist", name, dst);
        return FRPC_ENORANK;
    }
    /* While a graceful shutdown drains, handlers serving other ranks may
     * still call out (they run on the polling thread or the pool); nobody
     * else may, but for the shutting-down thread's own calls (its
     * goodbyes, either way). */
    int closing = atomic_load(&a->shutting_down);
    if (closing && !shutdown_own_calls &&
        (closing == FRPC_SHUTDOWN_IMMEDIATE + 1 ||
         !fr_agent_runs_handlers(a))) {
        *why = fmt("call to '%s' on rank %d: the agent is shutting down", name,
                   dst);
        return FRPC_ESHUTDOWN;
    }
    return 0;
}

void fr_call_shutdown_own(int on)
{
    shutdown_own_calls = on;
}

/* Sends the request of entry id: 0 when sent, or when a transport error
 * left it to fr_liveness_suspect (the entry stays in the table and ends
 * FRPC_EPEERLOST or, a moment later, with that error: liveness.c);
 * otherwise the code, with *lost_why set for FRPC_EPEERLOST. Ends
 * nothing itself. args are copied, lent (loan), or, when block is set,
 * are that block of the fabric's cache, the fabric's from here on. */
static int send_request(frpc_agent *a, uint64_t id, uint32_t dst,
                        const char *name, uint64_t fid, int time_left_ms,
                        uint64_t deadline, const void *args, size_t len,
                        fr_fabric_loan *loan, void *block,
                        const char **lost_why)
{
    /* The request carries its caller's time left (envelope status, ms;
     * 0: no limit), so that the callee's answer waits for room no longer
     * than the caller waits for it. */
    fr_env e = {.kind = FR_ENV_REQUEST, .req_id = id,
                .func_id = fid,
                .status = time_left_ms > 0 ? time_left_ms : 0};
    /* After the add: a loss marked before this load is seen here, one
     * marked after it finds the entry in the table (liveness.c). */
    if ((*lost_why = fr_agent_call_refused_why(a, dst, name))) {
        if (loan && loan->returned) /* once per loan (comm/fabric.h) */
            loan->returned(loan->ctx);
        fr_fabric_release_block(a->fab, block, len);
        return FRPC_EPEERLOST;
    }
    int rc = block  ? fr_fabric_send_block(a->fab, dst, &e, block, len,
                                           deadline)
             : loan ? fr_fabric_send_lent(a->fab, dst, &e, args, len,
                                          deadline, loan)
                    : fr_fabric_send(a->fab, dst, &e, args, len, deadline);
    if (rc == FRPC_ETRANSPORT) {
        char msg[96];
        snprintf(msg, sizeof(msg), "sending the request to rank %u failed: "
                 "transport failure", dst);
        fr_liveness_suspect(a, dst, id, FRPC_ETRANSPORT, msg);
        return 0;
    }
    return rc;
}

int fr_call_send(frpc_agent *a, fr_pending *p, const char *name,
                 const void *args, size_t len, fr_fabric_loan *loan)
{
    const char *lost = NULL;
    /* The call's whole timeout as its time left: it was added just now
     * (no clock read on the call's path). */
    /* The name's figures know its id: no second hash of the name. */
    uint64_t fid = p->fstat ? p->fstat->id : fr_func_id(name);
    int rc = send_request(a, p->id, p->dst, name, fid, p->timeout_ms,
                          p->deadline, args, len, loan, NULL, &lost);
    if (rc)
        fr_pending_abort(&a->pend, p, rc, lost);
    return rc;
}

static int send_id(frpc_agent *a, uint64_t id, uint32_t dst,
                   const char *name, uint64_t deadline, const void *args,
                   size_t len, void *block)
{
    const char *lost = NULL;
    int left_ms = 0;
    if (deadline != UINT64_MAX) {
        uint64_t now = fr_now_ns();
        uint64_t ms = deadline > now ? (deadline - now) / 1000000u : 0;
        left_ms = ms < 1 ? 1 : ms > INT_MAX ? INT_MAX : (int)ms;
    }
    int rc = send_request(a, id, dst, name, fr_func_id(name), left_ms,
                          deadline, args, len, NULL, block, &lost);
    if (rc)
        fr_pending_complete(&a->pend, id, dst, rc, 0, NULL, 0,
                            lost ? strdup(lost) : NULL);
    return rc;
}

int fr_call_send_id(frpc_agent *a, uint64_t id, uint32_t dst,
                    const char *name, uint64_t deadline, const void *args,
                    size_t len)
{
    return send_id(a, id, dst, name, deadline, args, len, NULL);
}

int fr_call_send_block_id(frpc_agent *a, uint64_t id, uint32_t dst,
                          const char *name, uint64_t deadline, void *block,
                          size_t len)
{
    return send_id(a, id, dst, name, deadline, block, len, block);
}

static int fail_early(frpc_result *res, int status, char *why)
{
    if (res) {
        memset(res, 0, sizeof(*res));
        res->status = status;
        res->error = why;
    } else {
        free(why);
    }
    return status;
}

static int loan_returned(void *loan)
{
    return atomic_load(&((fr_fabric_loan *)loan)->out) == 0;
}

static void kick_waiters(void *table)
{
    fr_pending_kick(table);
}

static int call(frpc_agent *a, int dst, const char *name, const void *args,
                size_t len, int timeout_ms, frpc_result *res);

/* Why the pending table refused the call's entry (rc). */
static char *add_refused_why(const frpc_agent *a, int rc, const char *name,
                             int dst)
{
    char buf[160];
    if (rc == FRPC_ESHUTDOWN)
        return fmt("call to '%s' on rank %d: the agent is shutting down",
                   name, dst);
    if (rc != FRPC_EAGAIN)
        return strdup("out of memory");
    snprintf(buf, sizeof(buf),
             "call to '%.64s' on rank %d: %u calls in flight already "
             "(config.max_inflight)",
             name, dst, a->set.max_inflight);
    return strdup(buf);
}

int frpc_call(frpc_agent *a, int dst, const char *name, const void *args,
              size_t len, int timeout_ms, frpc_result *res)
{
    if (!a)
        return call(a, dst, name, args, len, timeout_ms, res);
    fr_agent_enter(a);
    int rc = call(a, dst, name, args, len, timeout_ms, res);
    fr_agent_leave(a);
    return rc;
}

static int call(frpc_agent *a, int dst, const char *name, const void *args,
                size_t len, int timeout_ms, frpc_result *res)
{
    fr_fabric_loan loan, *lend = &loan;
    fr_pending p;
    char *why = NULL;
    int rc = fr_call_check(a, dst, name, args, len, &why);

    if (rc)
        return fail_early(res, rc, why);
    atomic_init(&loan.out, 0);
    loan.returned = kick_waiters;
    loan.ctx = &a->pend;
    if (fr_progress_begin_wait(a))
        return fail_early(res, FRPC_EDEADLK,
                          fr_fabric_polling_here(a->fab)
                              ? fmt("call to '%s' on rank %d: nesting limit "
                                    "reached (inline handlers nest "
                                    FR_STR(FRPC_MAX_INLINE_DEPTH)
                                    " deep at most)",
                                    name, dst)
                              : fmt("call to '%s' on rank %d: nesting limit "
                                    "reached (every pool thread would "
                                    "wait)",
                                    name, dst));
    timeout_ms = fr_agent_timeout(a, timeout_ms);
    rc = fr_pending_add_sync(&a->pend, &p, (uint32_t)dst, name, timeout_ms,
                             fr_deadline_ms(timeout_ms),
                             fr_agent_fn_stat(a, name));
    if (rc) {
        fr_progress_end_wait(a);
        return fail_early(res, rc, add_refused_why(a, rc, name, dst));
    }
    /* fabrpc's own calls (a notification, a goodbye) copy their few
     * bytes: a lent call can outlast its timeout ("Timeouts"), and the
     * header promises them theirs. */
    if (len < a->set.zerocopy_min || own_names)
        lend = NULL;
    if (fr_call_send(a, &p, name, args, len, lend) == 0)
        fr_progress_wait_call(a, &p, p.deadline, 1);
    /* Lent args: the callee may still be reading them (the call ended by
     * its timeout first: a stopped callee). They are the caller's again
     * once it has read them, refused them or is lost, or at once where
     * the loan can be taken back safely (shm: the callee throws away a
     * copy it finishes after that); elsewhere the provider may be serving
     * a read of them, so the wait goes on. */
    if (lend && atomic_load(&lend->out) &&
        !fr_fabric_revoke_loan(a->fab, lend))
        fr_progress_wait_until(a, loan_returned, lend, UINT64_MAX);
    fr_progress_end_wait(a);
    rc = p.res.status;
    if (res)
        *res = p.res;
    else
        frpc_result_clear(&p.res);
    fr_pending_release(&p);
    return rc;
}
