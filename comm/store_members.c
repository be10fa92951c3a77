/*
 * Bootstrap store: the server's membership record (interface in
 * store_proto.h, protocol in store.h).
 *
 * Design notes
 * - Per rank: joined (a MAIN authenticated once), open (that MAIN is still
 *   connected) and state (alive, DEAD, LEFT). A rank changes state once:
 *   alive -> LEFT (LEAVE) or alive -> DEAD (its MAIN closed without LEAVE);
 *   each change appends one event, so there are at most world events.
 * - The poison text is set once, by the first world/version mismatch of an
 *   authenticated member or the first key failure before every rank has
 *   joined; it never clears. fr_store_members_blocked reports the poison
 *   first, then the first event.
 * - Only the server thread changes the record. The mutex guards `alive`
 *   (the count of other ranks whose MAIN is open and that have not left),
 *   which fr_store_members_wait_gone reads from another thread; the
 *   condition variable (monotonic clock) is signalled when it drops.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "comm/store_proto.h"

struct rank_rec {
    bool joined, open;
    uint8_t state; /* 0 alive, FR_STORE_DEAD, FR_STORE_LEFT */
};

struct fr_store_members {
    int self, world;
    uint32_t version;
    uint8_t *key;
    size_t key_len;
    struct rank_rec *ranks;
    int njoined;
    fr_store_event *ev;
    size_t nev, capev;
    char poison[FR_STORE_MAX_ERR + 1]; /* "" while not poisoned */
    char lost[FR_STORE_MAX_ERR + 1];   /* the first event, as a message */
    uint64_t key_failures;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int alive; /* under mu */
};

fr_store_members *fr_store_members_new(const fr_store_ident *self)
{
    fr_store_members *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->self = self->rank;
    m->world = self->world;
    m->version = self->version;
    m->ranks = calloc((size_t)self->world, sizeof(*m->ranks));
    m->key_len = self->key ? self->key_len : 0;
    m->key = m->key_len ? malloc(m->key_len) : NULL;
    pthread_condattr_t ca;
    bool ok = m->ranks && (m->key || !m->key_len) &&
              pthread_condattr_init(&ca) == 0;
    if (ok) {
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        ok = pthread_cond_init(&m->cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (!ok || pthread_mutex_init(&m->mu, NULL) != 0) {
        if (ok)
            pthread_cond_destroy(&m->cv);
        free(m->ranks);
        free(m->key);
        free(m);
        return NULL;
    }
    if (m->key_len)
        memcpy(m->key, self->key, m->key_len);
    return m;
}

void fr_store_members_free(fr_store_members *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    if (m->key)
        memset(m->key, 0, m->key_len);
    free(m->key);
    free(m->ranks);
    free(m->ev);
    free(m);
}

const uint8_t *fr_store_members_key(const fr_store_members *m, size_t *len)
{
    *len = m->key_len;
    return m->key;
}

static void poison(fr_store_members *m, const char *msg)
{
    if (!m->poison[0])
        snprintf(m->poison, sizeof(m->poison), "%s", msg);
}

int fr_store_members_admit(fr_store_members *m, const fr_store_hello *h,
                           char *msg, size_t n)
{
    if (h->world != m->world) {
        snprintf(msg, n, "rank %d was started with world size %d, rank %d "
                 "with %d", (int)h->rank, (int)h->world, m->self, m->world);
        poison(m, msg);
        return FRPC_EBOOTSTRAP;
    }
    if (h->version != m->version) {
        snprintf(msg, n, "rank %d speaks fabrpc protocol %u, rank %d speaks "
                 "%u", (int)h->rank, (unsigned)h->version, m->self,
                 (unsigned)m->version);
        poison(m, msg);
        return FRPC_EBOOTSTRAP;
    }
    if (h->rank < 0 || h->rank >= m->world) {
        snprintf(msg, n, "rank %d is outside 0..%d (world size %d)",
                 (int)h->rank, m->world - 1, m->world);
        return FRPC_ENORANK;
    }
    struct rank_rec *r = &m->ranks[h->rank];
    if (r->state) {
        snprintf(msg, n, "rank %d already %s this job's store (a store from "
                 "an earlier run?)", (int)h->rank,
                 r->state == FR_STORE_LEFT ? "left" : "died in");
        return FRPC_ESHUTDOWN;
    }
    if (h->role != FR_STORE_ROLE_MAIN)
        return 0;
    if (r->open) {
        snprintf(msg, n, "rank %d is already connected to this store (a "
                 "store from an earlier run, or two processes with one "
                 "rank?)", (int)h->rank);
        return FRPC_EEXIST;
    }
    if (!r->joined)
        m->njoined++;
    r->joined = r->open = true;
    if (h->rank != m->self) {
        pthread_mutex_lock(&m->mu);
        m->alive++;
        pthread_mutex_unlock(&m->mu);
    }
    return 0;
}

void fr_store_members_key_failed(fr_store_members *m, int rank,
                                 const char *why)
{
    m->key_failures++;
    if (rank >= 0 && rank < m->world && m->njoined < m->world)
        poison(m, why);
}

/* rank's state becomes st (an event) unless it already changed. */
static void change(fr_store_members *m, int rank, uint8_t st,
                   const char *why)
{
    struct rank_rec *r = &m->ranks[rank];
    if (r->state)
        return;
    r->state = st;
    if (rank != m->self) {
        pthread_mutex_lock(&m->mu);
        m->alive--;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
    }
    if (m->nev == m->capev) {
        size_t cap = m->capev ? 2 * m->capev : 8;
        fr_store_event *ev = realloc(m->ev, cap * sizeof(*ev));
        if (!ev)
            return; /* the state is kept; only the event list is short */
        m->ev = ev;
        m->capev = cap;
    }
    fr_store_event *e = &m->ev[m->nev++];
    e->rank = rank;
    e->state = st;
    snprintf(e->reason, sizeof(e->reason), "%s", why);
    if (!m->lost[0]) {
        if (st == FR_STORE_LEFT)
            snprintf(m->lost, sizeof(m->lost), "rank %d left the job", rank);
        else
            snprintf(m->lost, sizeof(m->lost), "rank %d died: %s", rank, why);
    }
}

void fr_store_members_leave(fr_store_members *m, int rank)
{
    change(m, rank, FR_STORE_LEFT, "it left the job");
}

void fr_store_members_closed(fr_store_members *m, int rank, const char *why)
{
    m->ranks[rank].open = false;
    change(m, rank, FR_STORE_DEAD, why);
}

int fr_store_members_blocked(const fr_store_members *m, const char **msg)
{
    if (m->poison[0]) {
        *msg = m->poison;
        return FRPC_EBOOTSTRAP;
    }
    if (m->lost[0]) {
        *msg = m->lost;
        return FRPC_EPEERLOST;
    }
    return 0;
}

const fr_store_event *fr_store_members_events(const fr_store_members *m,
                                              size_t *n)
{
    *n = m->nev;
    return m->ev;
}

int fr_store_members_wait_gone(fr_store_members *m, int timeout_ms)
{
    struct timespec dl;
    int rc = 0;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    int64_t ns = (int64_t)dl.tv_nsec + (int64_t)(timeout_ms > 0 ? timeout_ms
                                                                : 0) * 1000000;
    dl.tv_sec += (time_t)(ns / 1000000000);
    dl.tv_nsec = (long)(ns % 1000000000);
    pthread_mutex_lock(&m->mu);
    while (m->alive > 0 && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&m->cv, &m->mu, &dl);
    rc = m->alive > 0 ? FRPC_ETIMEDOUT : 0;
    pthread_mutex_unlock(&m->mu);
    return rc;
}

uint64_t fr_store_members_key_failures(const fr_store_members *m)
{
    return m->key_failures;
}
