/*
 * Registered memory and one-sided transfers (rpc/fabrpc.h): frpc_mem
 * handles, descriptors, frpc_get/frpc_put and their async forms.
 *
 * Design notes
 * - A transfer is a pending entry like a call's (same timeouts, cancel,
 *   futures, EPEERLOST when its owner is lost), completed by the fabric's
 *   done callback with the entry's id. A transfer that outlives its entry
 *   (timed out, cancelled) completes into nothing: the id is never
 *   reused.
 * - busy counts the transfers the provider may still touch the region
 *   through; frpc_mem_deregister waits for it to reach 0. The fabric ends
 *   a lost peer's transfers at once (done with FRPC_EPEERLOST), so a dead
 *   rank never holds a region.
 * - Every descriptor is checked here before anything is posted (comm/
 *   memdesc.c: format, the job-keyed check value, the rank), then its
 *   access and bounds; the owner's provider checks the key itself.
 * - Shutdown ends every registration before the fabric closes; the
 *   handles stay, with no agent, for frpc_mem_deregister to free.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/memdesc.h"
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

int frpc_mem_register(frpc_agent *a, void *buf, size_t len, int access,
                      frpc_mem **out)
{
    frpc_mem *m;
    int rc;

    if (out)
        *out = NULL;
    if (!a || !buf || !out || len == 0 ||
        (access & ~(FRPC_MEM_REMOTE_READ | FRPC_MEM_REMOTE_WRITE)))
        return FRPC_EINVAL;
    if (atomic_load(&a->shutting_down) || !a->fab)
        return FRPC_ESHUTDOWN;
    if (!(m = calloc(1, sizeof(*m))))
        return FRPC_ENOMEM;
    if ((rc = fr_fabric_mr_reg(a->fab, buf, len, (unsigned)access, &m->mr))) {
        free(m);
        return rc;
    }
    m->agent = a;
    m->buf = buf;
    m->len = len;
    m->access = (unsigned)access;
    atomic_init(&m->busy, 0);
    pthread_mutex_lock(&a->mem_lock);
    m->next = a->mems;
    if (a->mems)
        a->mems->prev = m;
    a->mems = m;
    pthread_mutex_unlock(&a->mem_lock);
    atomic_fetch_add(&a->mem_registered, 1);
    *out = m;
    return 0;
}

static void unlink_locked(frpc_agent *a, frpc_mem *m)
{
    if (m->prev)
        m->prev->next = m->next;
    else
        a->mems = m->next;
    if (m->next)
        m->next->prev = m->prev;
    m->next = m->prev = NULL;
}

int frpc_mem_deregister(frpc_mem *m, int timeout_ms)
{
    if (!m)
        return FRPC_EINVAL;
    frpc_agent *a = m->agent;
    if (!a) { /* shutdown ended it */
        free(m);
        return 0;
    }
    uint64_t deadline = fr_agent_deadline(a, timeout_ms);
    while (atomic_load(&m->busy) > 0) {
        if (fr_now_ns() >= deadline)
            return FRPC_ETIMEDOUT;
        /* The transfers end in polls: make one, or let the poller. */
        if (fr_fabric_progress(a->fab) <= 0) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    pthread_mutex_lock(&a->mem_lock);
    unlink_locked(a, m);
    pthread_mutex_unlock(&a->mem_lock);
    fr_fabric_mr_close(m->mr);
    atomic_fetch_sub(&a->mem_registered, 1);
    free(m);
    return 0;
}

void fr_mem_end_all(frpc_agent *a)
{
    pthread_mutex_lock(&a->mem_lock);
    while (a->mems) {
        frpc_mem *m = a->mems;
        unlink_locked(a, m);
        fr_fabric_mr_close(m->mr);
        m->mr = NULL;
        m->agent = NULL;
    }
    pthread_mutex_unlock(&a->mem_lock);
    atomic_store(&a->mem_registered, 0);
}

int frpc_mem_describe(const frpc_mem *m, size_t offset, size_t len,
                      void *out)
{
    fr_memdesc d;
    if (!m || !out || len == 0 || offset > m->len || len > m->len - offset)
        return FRPC_EINVAL;
    if (!m->agent)
        return FRPC_ESHUTDOWN;
    d.rank = (uint32_t)m->agent->set.rank;
    d.access = (uint8_t)m->access;
    d.addr = fr_fabric_mr_addr(m->mr, offset);
    d.key = fr_fabric_mr_key(m->mr);
    d.len = len;
    d.region = d.key;
    fr_memdesc_encode(&d, m->agent->token, out);
    return 0;
}

/* The fabric's done: completes the transfer's entry, if it still waits.
 * A transport failure may be the owner's death seen first by its
 * connection: liveness decides within a second (FRPC_EPEERLOST, or the
 * transport failure then), as for a call whose send failed. */
static void transfer_done(const fr_rma *op, int status, const char *why)
{
    frpc_mem *m = op->ctx;
    frpc_agent *a = m->agent;
    if (status == FRPC_ETRANSPORT)
        fr_liveness_suspect(a, op->dst, op->id,
                            why ? why : "transport failure");
    else
        fr_pending_complete(&a->pend, op->id, op->dst, status, 0, NULL, 0,
                            why ? strdup(why) : NULL);
    atomic_fetch_sub(&m->busy, 1);
}

/* Everything checked before a transfer is posted: FRPC_E* or 0 with the
 * descriptor decoded into *d. */
static int check(frpc_mem *local, size_t loff, const void *desc,
                 size_t dlen, size_t roff, size_t len, int write,
                 fr_memdesc *d)
{
    frpc_agent *a = local->agent;
    char *why = NULL;
    int rc;

    if (loff > local->len || len > local->len - loff)
        return FRPC_EINVAL;
    if ((rc = fr_memdesc_decode(desc, dlen, a->token,
                                (uint32_t)a->set.world, d)))
        return rc;
    if (!(d->access & (write ? FR_MEMDESC_WRITE : FR_MEMDESC_READ)))
        return FRPC_EACCES;
    if (roff > d->len || len > d->len - roff)
        return FRPC_EINVAL;
    rc = fr_call_check(a, (int)d->rank, write ? "frpc_put" : "frpc_get",
                       NULL, 0, &why);
    free(why);
    return rc;
}

static int post(frpc_mem *local, size_t loff, const fr_memdesc *d,
                size_t roff, size_t len, int write, const fr_pending *p)
{
    frpc_agent *a = local->agent;
    fr_rma op = {.write = write, .dst = d->rank, .local = local->mr,
                 .local_off = loff, .remote_addr = d->addr + roff,
                 .key = d->key, .len = len, .deadline_ns = p->deadline,
                 .done = transfer_done, .ctx = local, .id = p->id};
    atomic_fetch_add(&local->busy, 1);
    int rc = fr_fabric_rma(a->fab, &op);
    if (rc) {
        atomic_fetch_sub(&local->busy, 1);
        return rc;
    }
    atomic_fetch_add(write ? &a->xfer_put : &a->xfer_get, 1);
    return 0;
}

static int transfer(frpc_mem *local, size_t loff, const void *desc,
                    size_t dlen, size_t roff, size_t len, int timeout_ms,
                    int write, frpc_future **out)
{
    const char *name = write ? "frpc_put" : "frpc_get";
    fr_memdesc d;
    int rc;

    if (out)
        *out = NULL;
    if (!local || !desc)
        return FRPC_EINVAL;
    frpc_agent *a = local->agent;
    if (!a)
        return FRPC_ESHUTDOWN;
    if ((rc = check(local, loff, desc, dlen, roff, len, write, &d))) {
        atomic_fetch_add(&a->xfer_refused, 1);
        return rc;
    }
    if (out) {
        frpc_future *f;
        if ((rc = fr_future_open(a, name, d.rank, timeout_ms, &f)))
            return rc;
        fr_pending *p = fr_future_entry(f);
        if (len == 0) {
            fr_pending_complete(&a->pend, p->id, d.rank, 0, 0, NULL, 0, NULL);
        } else if ((rc = post(local, loff, &d, roff, len, write, p))) {
            fr_pending_abort(&a->pend, p, rc, NULL);
            fr_future_drop_unsent(f);
            return rc;
        }
        *out = f;
        return 0;
    }
    if (len == 0)
        return 0;
    if (fr_progress_begin_wait(a))
        return FRPC_EDEADLK;
    fr_pending p;
    timeout_ms = fr_agent_timeout(a, timeout_ms);
    rc = fr_pending_add(&a->pend, &p, d.rank, name, timeout_ms,
                        fr_deadline_ms(timeout_ms), NULL);
    if (rc) {
        fr_progress_end_wait(a);
        return rc;
    }
    if ((rc = post(local, loff, &d, roff, len, write, &p)))
        fr_pending_abort(&a->pend, &p, rc, NULL);
    else
        fr_progress_wait_call(a, &p, p.deadline, 1);
    fr_progress_end_wait(a);
    rc = p.res.status;
    frpc_result_clear(&p.res);
    fr_pending_release(&p);
    return rc;
}

int frpc_get(frpc_mem *local, size_t local_off, const void *desc,
             size_t desc_len, size_t remote_off, size_t len, int timeout_ms)
{
    return transfer(local, local_off, desc, desc_len, remote_off, len,
                    timeout_ms, 0, NULL);
}

int frpc_put(frpc_mem *local, size_t local_off, const void *desc,
             size_t desc_len, size_t remote_off, size_t len, int timeout_ms)
{
    return transfer(local, local_off, desc, desc_len, remote_off, len,
                    timeout_ms, 1, NULL);
}

int frpc_get_async(frpc_mem *local, size_t local_off, const void *desc,
                   size_t desc_len, size_t remote_off, size_t len,
                   int timeout_ms, frpc_future **out)
{
    if (!out)
        return FRPC_EINVAL;
    return transfer(local, local_off, desc, desc_len, remote_off, len,
                    timeout_ms, 0, out);
}

int frpc_put_async(frpc_mem *local, size_t local_off, const void *desc,
                   size_t desc_len, size_t remote_off, size_t len,
                   int timeout_ms, frpc_future **out)
{
    if (!out)
        return FRPC_EINVAL;
    return transfer(local, local_off, desc, desc_len, remote_off, len,
                    timeout_ms, 1, out);
}
