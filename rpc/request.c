/*
 * The callee's side: incoming frames are dispatched here. Requests go to
 * their handler as an frpc_request that lives until it is answered (now or
 * later, from any thread); responses and errors go to the pending table,
 * which completes the matching call exactly once or drops the answer.
 *
 * Who frees a request (state, agent.h): most handlers answer before they
 * return, so a request goes on the agent's list of unanswered ones (kept
 * for shutdown to free) only when its handler returned without answering.
 * An answer given while the handler runs sends, then moves IN_HANDLER to
 * ANSWERED_IN_HANDLER and touches the request no more; the handler's
 * return frees it. An answer to a KEPT request takes it off the list and
 * frees it. The handler's return, finding it unanswered, lists it and
 * then moves IN_HANDLER to KEPT; if an answer won that race it takes it
 * off again and frees it. So an answered-in-handler call takes no lock
 * here (it took two: list and unlist).
 *
 * Requests with args of up to FR_REQ_RECYCLE_ARGS bytes are recycled
 * rather than freed (agent.h: freed_requests, spare_requests): a request
 * is made in the poll that delivers it, so only the poll owner takes
 * them, and the many threads that free them only push. The agent keeps
 * as many as were ever handled at once, until it is destroyed.
 *
 * Answers a poll reads are set aside (a->answers) and completed together,
 * under one lock of the pending table, when the poll ends or before any
 * handler runs (a handler may wait on one of them), rather than one lock
 * each: with 64 calls in flight a message carries about 15 of them.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/clock.h"
#include "comm/fault.h"
#include "rpc/agent.h"
#include "serialization/mp.h"

/* An answer waits for room at the provider (a peer that does not read
 * for a while) as long as its caller still waits for it: the time left
 * that the request carried, counted from when the answer is given (so a
 * little longer, never shorter). A caller with no limit is waited for
 * until it is lost (the fabric then fails the send at once) or this
 * agent shuts down. */
static void track_locked(frpc_agent *a, frpc_request *r)
{
    r->prev = NULL;
    r->next = a->requests;
    if (r->next)
        r->next->prev = r;
    a->requests = r;
}

static void untrack_locked(frpc_agent *a, frpc_request *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        a->requests = r->next;
    if (r->next)
        r->next->prev = r->prev;
}

#define FR_REQ_RECYCLE_ARGS 256

static void free_request(frpc_request *r)
{
    frpc_agent *a = r->agent;
    /* Once answers are closed the transport may be gone: a block, plain
     * malloc'ed memory (the receive cache registers none), is freed. */
    if (r->args_block && !atomic_load(&a->answers_closed))
        fr_fabric_release_block(a->fab, r->args, r->len);
    else if (r->args_block || r->args_malloced)
        free(r->args);
    if (!r->recycled) {
        free(r);
        return;
    }
    frpc_request *head = atomic_load(&a->freed_requests);
    do
        r->next = head;
    while (!atomic_compare_exchange_weak(&a->freed_requests, &head, r));
}

/* A request with room for copy bytes of args, zeroed but for the args. */
static frpc_request *new_request(frpc_agent *a, size_t copy)
{
    frpc_request *r = NULL;
    int recycle = copy <= FR_REQ_RECYCLE_ARGS && fr_fabric_polling_here(a->fab);
    if (recycle) {
        if (!a->spare_requests)
            a->spare_requests = atomic_exchange(&a->freed_requests, NULL);
        if ((r = a->spare_requests))
            a->spare_requests = r->next;
        else
            r = malloc(sizeof(*r) + FR_REQ_RECYCLE_ARGS);
    } else {
        r = malloc(sizeof(*r) + copy);
    }
    if (r) {
        memset(r, 0, sizeof(*r));
        r->recycled = recycle;
    }
    return r;
}

void fr_agent_free_spare_requests(frpc_agent *a)
{
    frpc_request *lists[2] = {a->spare_requests,
                              atomic_exchange(&a->freed_requests, NULL)};
    a->spare_requests = NULL;
    for (int i = 0; i < 2; i++) {
        while (lists[i]) {
            frpc_request *next = lists[i]->next;
            free(lists[i]);
            lists[i] = next;
        }
    }
}

/* After r's handler returned: free it if it was answered, else keep it
 * on the list until it is (see the notes at the top). */
static void keep_or_free(frpc_agent *a, frpc_request *r)
{
    if (atomic_load(&r->state) == FR_REQ_ANSWERED_IN_HANDLER) {
        free_request(r);
        return;
    }
    pthread_mutex_lock(&a->req_lock);
    track_locked(a, r);
    int in_handler = FR_REQ_IN_HANDLER;
    if (atomic_compare_exchange_strong(&r->state, &in_handler, FR_REQ_KEPT)) {
        pthread_mutex_unlock(&a->req_lock);
        return;
    }
    untrack_locked(a, r); /* answered meanwhile, from another thread */
    pthread_mutex_unlock(&a->req_lock);
    free_request(r);
}

/* r's handler returned (or never ran): no answer comes from it any more
 * but a deferred one. */
static void handler_returned(frpc_agent *a, frpc_request *r)
{
    keep_or_free(a, r);
    atomic_fetch_sub(&a->handling, 1);
}

static void run_handler(void *arg);

void fr_request_run(frpc_request *r)
{
    run_handler(r);
}

/* On a pool thread: a slow function's run is timed, so that quick runs
 * bring it back to the progress thread (fr_standin_pool_ran). r is freed
 * by the run: its function is read first. */
static void run_on_pool(void *arg)
{
    frpc_request *r = arg;
    fr_func *fn = (fr_func *)r->func;
    if (!atomic_load_explicit(&fn->slow, memory_order_relaxed)) {
        run_handler(r);
        return;
    }
    uint64_t t0 = fr_now_ns();
    run_handler(r);
    fr_standin_pool_ran(fn, fr_now_ns() - t0);
}

void fr_request_to_pool(frpc_agent *a, frpc_request *r)
{
    if (fr_pool_submit(a->pool, run_on_pool, r) < 0) {
        /* fabrpc's refusal, not the handler's: the caller gets
         * FRPC_ESHUTDOWN, as from a refusal in on_request, not
         * FRPC_EREMOTE. */
        fr_request_refuse(r, FRPC_ESHUTDOWN, "callee is shutting down");
        handler_returned(a, r);
    }
}

static void run_handler(void *arg)
{
    frpc_request *r = arg;
    r->func->handler(r, r->func->user);
    fr_taken_ns = 0; /* a poll inside it may have left its own */
    handler_returned(r->agent, r);
}

static void complete_answers(frpc_agent *a)
{
    unsigned n = a->nanswers;
    if (n) {
        /* Emptied first: a future's callback run here (the pool's queue
         * full) may make a call, whose poll sets answers aside again;
         * fr_pending_complete_many is done with these before it runs
         * one. A callback run here (run_callback) sets fr_taken_ns to 0. */
        a->nanswers = 0;
        fr_pending_complete_many(&a->pend, a->answers, n, fr_taken_ns);
    }
}

void fr_agent_on_poll_end(void *ctx)
{
    complete_answers(ctx);
}

static void on_request(frpc_agent *a, fr_fabric_msg *m)
{
    const fr_func *fn = fr_registry_find(&a->reg, m->env.func_id);
    frpc_request *r;

    complete_answers(a); /* the handler may wait for one of them */
    if (a->dedup_on &&
        fr_dedup_seen(&a->dedup, m->env.src_rank, m->env.req_id)) {
        atomic_fetch_add(&a->requests_duplicate, 1); /* at most once */
        return;
    }

    if (!fn) {
        char msg[96];
        snprintf(msg, sizeof(msg), "no function with id %016llx on rank %d",
                 (unsigned long long)m->env.func_id, a->set.rank);
        fr_fabric_refuse(a->fab, &m->env, FRPC_ENOFUNC, msg);
        return;
    }
    /* Counted before refusing is read: a shutdown that sets refusing and
     * then finds handling 0 knows no handler of this request will answer
     * after its goodbye. fabrpc's own functions are still taken: a peer's
     * goodbye refused here left that peer DEAD, not LEFT, once its
     * process ended (run_peer_lost, survivors_not_dead after the store's
     * death). */
    atomic_fetch_add(&a->handling, 1);
    if (atomic_load(&a->shutting_down) == FRPC_SHUTDOWN_IMMEDIATE + 1 ||
        (atomic_load(&a->refusing) && !fr_name_reserved(fn->name))) {
        atomic_fetch_sub(&a->handling, 1);
        fr_fabric_refuse(a->fab, &m->env, FRPC_ESHUTDOWN,
                   "callee is shutting down");
        return;
    }
    size_t copy = m->owned ? 0 : m->len;
    if (!(r = new_request(a, copy))) {
        atomic_fetch_sub(&a->handling, 1);
        goto nomem;
    }
    r->agent = a;
    r->func = fn;
    r->req_id = m->env.req_id;
    r->src = m->env.src_rank;
    /* Its arrival: for the figures, and for how long its answer may wait
     * for room (the coarse clock, never ahead, does for that alone). */
    r->t0 = fr_taken_ns           ? fr_taken_ns
            : a->set.fn_stats     ? fr_now_ns()
                                  : fr_coarse_now_ns();
    fr_taken_ns = 0; /* user code may run from here on (comm/clock.h) */
    r->caller_deadline = m->env.status > 0
                             ? r->t0 + (uint64_t)m->env.status * 1000000ull
                             : UINT64_MAX;
    r->len = m->len;
    if (m->owned) {
        r->args = m->owned; /* kept, not copied */
        r->args_block = !m->owned_malloced;
        r->args_malloced = m->owned_malloced;
        m->owned = NULL;
    } else if (copy) {
        r->args = r->in_place;
        memcpy(r->args, m->payload, copy);
    }
    atomic_init(&r->state, FR_REQ_IN_HANDLER);
    atomic_fetch_add(&a->requests_received, 1);
    if (fn->flags & FRPC_INLINE) {
        run_handler(r);
        return;
    }
    if (!fr_standin_take(a, r))
        fr_request_to_pool(a, r);
    return;
nomem:
    fr_fabric_refuse(a->fab, &m->env, FRPC_ENOMEM,
               "callee out of memory for the request");
}

static char *copy_text(const uint8_t *p, size_t len)
{
    char *s = malloc(len + 1);
    if (s) {
        if (len)
            memcpy(s, p, len);
        s[len] = '\0';
    }
    return s;
}

static void on_answer(frpc_agent *a, fr_fabric_msg *m)
{
    fr_answer *x = &a->answers[a->nanswers];
    void *data = NULL;
    char *err = NULL;
    int status = 0, remote_code = 0;

    if (m->env.kind == FR_ENV_RESPONSE) {
        if (m->owned) {
            data = m->owned;
            m->owned = NULL;
        } else if (m->len && m->len <= FR_SMALL_REPLY) {
            data = x->small; /* no malloc: the pending table places it */
            memcpy(data, m->payload, m->len);
        } else if (m->len) {
            if ((data = malloc(m->len)))
                memcpy(data, m->payload, m->len);
            else
                status = FRPC_ENOMEM;
        }
    } else {
        err = copy_text(m->payload, m->len);
        if (m->env.flags & FR_ENV_F_REMOTE) {
            status = FRPC_EREMOTE;
            remote_code = m->env.status;
        } else if (m->env.status == FRPC_ESHUTDOWN &&
                   m->env.src_rank != (uint32_t)a->set.rank) {
            /* The callee refused it in its shutdown: it is leaving, and a
             * call to a rank that shut down ends FRPC_EPEERLOST (the
             * header's "Lost peers"), not with the code of this rank's
             * own shutdown. Its LEFT follows (its goodbye, its end). */
            char buf[96];
            snprintf(buf, sizeof(buf), "rank %u is shutting down: it takes "
                     "no more requests", (unsigned)m->env.src_rank);
            free(err);
            err = strdup(buf);
            status = FRPC_EPEERLOST;
        } else {
            status = m->env.status;
            if (!frpc_err_name(status) ||
                strcmp(frpc_err_name(status), "FRPC_EUNKNOWN") == 0)
                status = FRPC_EPROTO;
        }
    }
    /* data is NULL whenever status is set */
    x->id = m->env.req_id;
    x->src = m->env.src_rank;
    x->status = status;
    x->remote_code = remote_code;
    x->data = data;
    x->len = data ? m->len : 0;
    x->err = err;
    a->nanswers++;
    if (a->nanswers == FR_ANSWERS_PER_LOCK)
        complete_answers(a);
}

void fr_agent_on_msg(void *ctx, fr_fabric_msg *m)
{
    frpc_agent *a = ctx;
    if (m->env.kind == FR_ENV_REQUEST)
        on_request(a, m);
    else
        on_answer(a, m);
}

void fr_agent_on_send_error(void *ctx, uint32_t dst, const fr_env *env,
                            int err)
{
    frpc_agent *a = ctx;
    if (env->kind != FR_ENV_REQUEST)
        return; /* a lost answer ends by the caller's own timeout */
    char msg[128];
    snprintf(msg, sizeof(msg), "sending the request to rank %u failed: %s",
             dst, frpc_strerror(err));
    if (err == FRPC_ETRANSPORT) /* perhaps a dying peer: see liveness.c */
        fr_liveness_suspect(a, dst, env->req_id, FRPC_ETRANSPORT, msg);
    else
        fr_pending_complete(&a->pend, env->req_id, dst, err, 0, NULL, 0,
                            strdup(msg));
}

void fr_agent_on_reply_unreadable(void *ctx, uint32_t src, const fr_env *env)
{
    char msg[128];
    snprintf(msg, sizeof(msg), "reading the reply from rank %u failed: "
             "transport failure", src);
    fr_liveness_suspect(ctx, src, env->req_id, FRPC_ETRANSPORT, msg);
}

void fr_agent_release_requests(frpc_agent *a)
{
    pthread_mutex_lock(&a->req_lock);
    frpc_request *r = a->requests;
    a->requests = NULL;
    pthread_mutex_unlock(&a->req_lock);
    while (r) {
        frpc_request *next = r->next;
        free_request(r);
        r = next;
    }
}

/* ---- the handler's API --------------------------------------------- */

const void *frpc_request_args(const frpc_request *req, size_t *len)
{
    if (len)
        *len = req ? req->len : 0;
    return req && req->len ? req->args : NULL;
}

int frpc_request_take_args(frpc_request *req, void **data, size_t *len)
{
    if (data)
        *data = NULL;
    if (len)
        *len = 0;
    if (!req || !data || !len)
        return FRPC_EINVAL;
    if (req->len == 0)
        return 0;
    if (req->args_block || req->args_malloced) {
        /* A fabric block is a plain malloc'd buffer (comm/blockcache.c),
         * not registered: it leaves the cache for good. */
        *data = req->args;
    } else if (!fr_fault_hit(FR_FAULT_TAKE_NOMEM) &&
               (*data = malloc(req->len))) {
        memcpy(*data, req->args, req->len);
    } else {
        return FRPC_ENOMEM;
    }
    *len = req->len;
    req->args = NULL;
    req->len = 0;
    req->args_block = 0;
    req->args_malloced = 0;
    return 0;
}

int frpc_request_source(const frpc_request *req)
{
    return req ? (int)req->src : FRPC_EINVAL;
}

const char *frpc_request_function(const frpc_request *req)
{
    return req ? req->func->name : NULL;
}

int frpc_request_unpack(const frpc_request *req, frpc_mp_view *view)
{
    if (!req) {
        /* Empty, as frpc_mp_parse leaves a view on every error: callers
         * free the view after any failure (examples/hello.c does). */
        if (view)
            memset(view, 0, sizeof(*view));
        return FRPC_EINVAL;
    }
    return frpc_mp_parse(req->args, req->len, view);
}

/* Counts the answer and hands it to the transport: FRPC_ESHUTDOWN
 * instead in an immediate shutdown; given data is ours and freed. */
static int transmit(frpc_request *req, const fr_env *e, const void *data,
                    size_t len, int given)
{
    frpc_agent *a = req->agent;
    /* Not fr_deadline_ms(time left) from now: a request answered 2 s
     * after it came, to a stopped caller, waited 2 s past the caller's
     * timeout, and every further answer owed to it as long again
     * (stopped.c, respond). */
    uint64_t deadline = req->caller_deadline;
    int rc;

    atomic_fetch_add(&a->requests_answered, 1);
    fr_fn_stat *st = a->set.fn_stats &&
                             !(req->func->flags & FR_FUNC_UNCOUNTED)
                         ? fr_fnstats_get(&a->fnstats, req->func->id,
                                          req->func->name)
                         : NULL;
    if (st) {
        uint64_t now = fr_now_ns();
        fr_hist_add(&st->handle, now > req->t0 ? now - req->t0 : 0,
                    e->kind == FR_ENV_ERROR, 0);
    }
    if (atomic_load(&a->shutting_down) == FRPC_SHUTDOWN_IMMEDIATE + 1) {
        rc = FRPC_ESHUTDOWN;
        if (given)
            free((void *)data);
    } else if (given && len >= a->set.zerocopy_min) {
        rc = fr_fabric_send_given(a->fab, req->src, e, (void *)data, len,
                                  deadline);
    } else {
        rc = fr_fabric_send(a->fab, req->src, e, data, len, deadline);
        if (given)
            free((void *)data);
    }
    return rc;
}

/* Sends the answer frame; req is then gone for the caller, whatever the
 * outcome (freed here, or by its handler's return: see the notes). given:
 * data is the caller's malloc'ed buffer, ours from here on: lent to the
 * caller's rank without a copy when it is long enough, freed either way.
 * Once frpc_shutdown has closed answers nothing is sent (FRPC_ESHUTDOWN)
 * and nothing but req is touched: the transport and the figures may be
 * going. */
static int send_answer(frpc_request *req, const fr_env *e, const void *data,
                       size_t len, int given)
{
    frpc_agent *a = req->agent;
    int rc;

    if (atomic_load(&a->answers_closed)) {
        if (given)
            free((void *)data);
        rc = FRPC_ESHUTDOWN;
    } else {
        rc = transmit(req, e, data, len, given);
    }
    int in_handler = FR_REQ_IN_HANDLER;
    if (atomic_compare_exchange_strong(&req->state, &in_handler,
                                       FR_REQ_ANSWERED_IN_HANDLER))
        return rc; /* its handler's return frees it */
    pthread_mutex_lock(&a->req_lock); /* KEPT: on the list */
    untrack_locked(a, req);
    pthread_mutex_unlock(&a->req_lock);
    free_request(req);
    return rc;
}

/* send_answer with the thread counted inside the agent (fr_agent_enter):
 * an answer may come from any thread, and may wait for room to send until
 * its caller's deadline; frpc_shutdown must not release a kept req nor
 * close the fabric under it (an answer from an application's thread
 * while another shut down). */
static int answer(frpc_request *req, const fr_env *e, const void *data,
                  size_t len, int given)
{
    frpc_agent *a = req->agent;
    fr_agent_enter(a);
    int rc;
    if (atomic_load(&a->requests_released)) {
        /* frpc_shutdown frees req now, not us (agent.c) */
        if (given)
            free((void *)data);
        rc = FRPC_ESHUTDOWN;
    } else {
        rc = send_answer(req, e, data, len, given);
    }
    fr_agent_leave(a);
    return rc;
}

/* frpc_respond and frpc_respond_owned: given says data is the caller's
 * malloc'ed buffer, which is ours (and freed) whatever happens. */
static int respond(frpc_request *req, const void *data, size_t len,
                   int given)
{
    if (len > req->agent->set.max_msg) {
        char msg[128];
        snprintf(msg, sizeof(msg),
                 "reply of %zu bytes exceeds the callee's limit of %zu",
                 len, req->agent->set.max_msg);
        fr_env e = {.kind = FR_ENV_ERROR, .req_id = req->req_id,
                    .func_id = req->func->id, .status = FRPC_ETOOBIG};
        if (given)
            free((void *)data);
        answer(req, &e, msg, strlen(msg), 0);
        return FRPC_ETOOBIG;
    }
    fr_env e = {.kind = FR_ENV_RESPONSE, .req_id = req->req_id,
                .func_id = req->func->id};
    return answer(req, &e, data, len, given);
}

int frpc_respond(frpc_request *req, const void *data, size_t len)
{
    if (!req || (len && !data))
        return FRPC_EINVAL;
    return respond(req, data, len, 0);
}

int frpc_respond_owned(frpc_request *req, void *data, size_t len)
{
    if (!req || (len && !data))
        return FRPC_EINVAL; /* nothing taken */
    if (len == 0) {
        free(data);
        data = NULL;
    }
    return respond(req, data, len, data != NULL);
}

/* An error answer: the handler's (FR_ENV_F_REMOTE: the caller sees
 * FRPC_EREMOTE and code), or fabrpc's own (the caller sees code). */
static int answer_error(frpc_request *req, uint16_t flags, int code,
                        const char *message)
{
    size_t len;
    if (!message)
        message = "";
    len = strlen(message);
    if (len > FR_ENV_MAX_ERRMSG)
        len = FR_ENV_MAX_ERRMSG;
    fr_env e = {.kind = FR_ENV_ERROR, .flags = flags, .req_id = req->req_id,
                .func_id = req->func->id, .status = code};
    return answer(req, &e, message, len, 0);
}

int frpc_respond_error(frpc_request *req, int code, const char *message)
{
    if (!req)
        return FRPC_EINVAL;
    return answer_error(req, FR_ENV_F_REMOTE, code, message);
}

int fr_request_refuse(frpc_request *req, int code, const char *message)
{
    return answer_error(req, 0, code, message);
}
