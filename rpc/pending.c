/*
 * The pending table. See pending.h for the invariant: an entry is
 * completed only by the thread that removes it, under t->lock, and its
 * waiter is signalled under the same lock, so a waiter that sees done
 * may free the entry at once.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/clock.h"
#include "rpc/pending.h"

#define FR_PENDING_BUCKETS 4096

int fr_pending_init(fr_pending_table *t)
{
    memset(t, 0, sizeof(*t));
    t->nbuckets = FR_PENDING_BUCKETS;
    t->bucket = calloc(t->nbuckets, sizeof(*t->bucket));
    if (!t->bucket)
        return FRPC_ENOMEM;
    pthread_mutex_init(&t->lock, NULL);
    t->next_id = 1;
    return 0;
}

void fr_pending_destroy(fr_pending_table *t)
{
    if (!t->bucket)
        return;
    free(t->bucket);
    t->bucket = NULL;
    pthread_mutex_destroy(&t->lock);
}

static fr_pending **slot_of(fr_pending_table *t, uint64_t id)
{
    return &t->bucket[id & (t->nbuckets - 1)];
}

/* Unlinks the entry with id (and, if p is given, that very entry). */
static fr_pending *remove_locked(fr_pending_table *t, uint64_t id,
                                 const fr_pending *p)
{
    for (fr_pending **pp = slot_of(t, id); *pp; pp = &(*pp)->next) {
        fr_pending *e = *pp;
        if (e->id == id && (!p || e == p)) {
            *pp = e->next;
            e->next = NULL;
            atomic_fetch_sub(&t->inflight, 1);
            return e;
        }
    }
    return NULL;
}

static void finish_locked(fr_pending *e, int status, int remote_code,
                          void *data, size_t len, char *err)
{
    e->res.status = status;
    e->res.remote_code = remote_code;
    e->res.data = data;
    e->res.len = len;
    e->res.error = err;
    atomic_store(&e->done, 1);
    pthread_cond_signal(&e->cond);
}

void fr_pending_add(fr_pending_table *t, fr_pending *p, uint32_t dst,
                    const char *fname)
{
    pthread_condattr_t ca;
    memset(&p->res, 0, sizeof(p->res));
    p->dst = dst;
    p->fname = fname;
    p->next = NULL;
    atomic_init(&p->done, 0);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&t->lock);
    p->id = t->next_id++;
    fr_pending **s = slot_of(t, p->id);
    p->next = *s;
    *s = p;
    atomic_fetch_add(&t->inflight, 1);
    pthread_mutex_unlock(&t->lock);
}

int fr_pending_complete(fr_pending_table *t, uint64_t id, uint32_t src,
                        int status, int remote_code, void *data, size_t len,
                        char *err)
{
    fr_pending *e = NULL;
    pthread_mutex_lock(&t->lock);
    for (fr_pending *c = *slot_of(t, id); c; c = c->next)
        if (c->id == id) {
            e = c;
            break;
        }
    /* An answer from a rank we did not call is not this call's answer. */
    if (e && e->dst == src) {
        remove_locked(t, id, e);
        finish_locked(e, status, remote_code, data, len, err);
    } else {
        e = NULL;
    }
    pthread_mutex_unlock(&t->lock);
    if (!e) {
        atomic_fetch_add(&t->dropped, 1);
        free(data);
        free(err);
        return 0;
    }
    return 1;
}

int fr_pending_wait(fr_pending_table *t, fr_pending *p, uint64_t until_ns,
                    int give_up)
{
    int done;
    pthread_mutex_lock(&t->lock);
    while (!atomic_load(&p->done)) {
        if (fr_now_ns() >= until_ns)
            break;
        struct timespec ts = fr_ns_to_timespec(until_ns);
        pthread_cond_timedwait(&p->cond, &t->lock, &ts);
    }
    done = atomic_load(&p->done);
    if (!done && give_up && remove_locked(t, p->id, p)) {
        finish_locked(p, FRPC_ETIMEDOUT, 0, NULL, 0, NULL);
        done = 1;
    }
    pthread_mutex_unlock(&t->lock);
    return done;
}

void fr_pending_abort(fr_pending_table *t, fr_pending *p, int status,
                      const char *msg)
{
    pthread_mutex_lock(&t->lock);
    if (remove_locked(t, p->id, p))
        finish_locked(p, status, 0, NULL, 0, msg ? strdup(msg) : NULL);
    pthread_mutex_unlock(&t->lock);
}

void fr_pending_fail(fr_pending_table *t, uint32_t dst, int status,
                     const char *msg)
{
    pthread_mutex_lock(&t->lock);
    for (unsigned i = 0; i < t->nbuckets; i++) {
        fr_pending **pp = &t->bucket[i];
        while (*pp) {
            fr_pending *e = *pp;
            if (dst != UINT32_MAX && e->dst != dst) {
                pp = &e->next;
                continue;
            }
            *pp = e->next;
            e->next = NULL;
            atomic_fetch_sub(&t->inflight, 1);
            finish_locked(e, status, 0, NULL, 0, msg ? strdup(msg) : NULL);
        }
    }
    pthread_mutex_unlock(&t->lock);
}

void fr_pending_release(fr_pending *p)
{
    pthread_cond_destroy(&p->cond);
}
