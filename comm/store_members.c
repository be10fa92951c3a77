/*
 * Bootstrap store: the server's membership record and the handshake's
 * decisions (interface in store_proto.h, protocol in store.h): the HELLO
 * challenge, the AUTH proof check, and who may join. No I/O.
 *
 * Design notes
 * - AUTH checks the proof first (constant-time compare), then world and
 *   version, then the rank's range, then staleness, then a second MAIN
 *   for a rank (two processes with one rank; but a stale store's, once
 *   its own rank has left). Each failure refuses the process, and poisons
 *   only while some rank has not joined yet (poison_joining): a process
 *   that could never be one of the job cannot end a running one. A key
 *   failure never poisons: it is counted, and its text kept for rank 0's
 *   "never joined" error. A process without the key cannot be told from
 *   a stranger, and a stranger must not end a job, even while it joins
 *   (one keyless HELLO claiming a rank not joined yet had made every
 *   rank's frpc_init fail).
 * - Per rank: joined (a MAIN authenticated once), open (that MAIN is still
 *   connected) and state (alive, DEAD, LEFT). A rank changes state once:
 *   alive -> LEFT (LEAVE) or alive -> DEAD (its MAIN closed without LEAVE);
 *   each change appends one event, so there are at most world events.
 * - The poison text is set once, by the first such failure before every
 *   rank has joined; it never clears. fr_store_members_blocked reports
 *   the poison first, then the first event.
 * - Only the server thread changes the record. The mutex guards `alive`
 *   (the count of other ranks whose MAIN is open and that have not left)
 *   and key_failures, which other threads read; the
 *   condition variable (monotonic clock) is signalled when it drops.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "comm/sha256.h"
#include "comm/store_proto.h"

/* The text of a loss whose first gone rank left (fr_store_lost_by_leave
 * reads it back). */
#define LOST_BY_LEAVE "rank %d left the job"

struct rank_rec {
    bool joined, open;
    bool told; /* a process claiming it was refused for a mismatch */
    uint8_t state; /* 0 alive, FR_STORE_DEAD, FR_STORE_LEFT */
};

struct fr_store_members {
    int self, world;
    uint32_t version;
    uint8_t *key;
    size_t key_len;
    struct rank_rec *ranks;
    int njoined;
    int nreached; /* ranks joined or told (under mu): see reached */
    fr_store_event *ev;
    size_t nev, capev;
    char poison[FR_STORE_MAX_ERR + 1]; /* "" while not poisoned */
    char lost[FR_STORE_MAX_ERR + 1];   /* the first event, as a message */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int alive; /* under mu */
    bool poisoned; /* poison[0], under mu for other threads */
    uint64_t key_failures; /* under mu */
    char key_failure[FR_STORE_MAX_ERR + 1]; /* the last one's text, mu */
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

static void poison(fr_store_members *m, const char *msg)
{
    if (m->poison[0])
        return;
    snprintf(m->poison, sizeof(m->poison), "%s", msg);
    pthread_mutex_lock(&m->mu);
    m->poisoned = true;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* Rank has been heard from: joined, or a process claiming it was told
 * why the job cannot start. A refused world size or protocol version
 * comes from the process launched as that rank (a launcher that gave
 * its ranks different sizes), so rank 0's failed init does not keep
 * the store for it (fr_store_members_wait): rank 0 of 2 with rank 1
 * started for 3 failed after its 3 s linger instead of at once. A rank
 * claimed twice, or out of range, names no rank that was told. */
static void reached(fr_store_members *m, struct rank_rec *r, bool joining)
{
    pthread_mutex_lock(&m->mu);
    if (!r->joined && !r->told)
        m->nreached++;
    if (joining && !r->joined)
        m->njoined++;
    if (!joining)
        r->told = true;
    pthread_mutex_unlock(&m->mu);
}

/* A process that cannot be one of the job ends it while it is still
 * joining (the rank it should have been will never come, or the ranks
 * disagree: every rank fails at once, with msg); once everyone has
 * joined, the job runs on and the process is only refused. */
static void poison_joining(fr_store_members *m, const char *msg)
{
    if (m->njoined < m->world)
        poison(m, msg);
}

/* A MAIN for rank, whose MAIN is still connected. In a store whose own
 * rank has left (its shutdown, or its failed init) it is a previous run's
 * store, still closing: "not up yet" (FRPC_ESHUTDOWN). Otherwise two
 * processes were started as rank: this one is refused for good
 * (FRPC_EEXIST), and while the job is still joining the rank the second
 * was meant to be will never come, so the job is poisoned, as for a rank
 * out of range. */
static int claimed_twice(fr_store_members *m, int rank, char *msg, size_t n)
{
    if (m->ranks[m->self].state) {
        snprintf(msg, n, "rank %d is still connected to this store, whose "
                 "job is ending (a store from an earlier run?)", rank);
        return FRPC_ESHUTDOWN;
    }
    char why[FR_STORE_MAX_ERR + 1];
    snprintf(why, sizeof(why), "rank %d was claimed twice: a second process "
             "started as rank %d was refused (the rank it was meant to be "
             "will never join)", rank, rank);
    poison_joining(m, why);
    snprintf(msg, n, "rank %d is already held by a live member of this job "
             "(two processes were started as rank %d)", rank, rank);
    return FRPC_EEXIST;
}

/* A launcher (store.h, Roles) is refused for a world or version that is
 * not the job's, or a rank out of range; it never poisons the job: it is
 * no rank, and may belong to another job's launcher on this port. */
static int admit_launcher(const fr_store_members *m, const fr_store_hello *h,
                          char *msg, size_t n)
{
    if (h->world != m->world || h->version != m->version) {
        snprintf(msg, n, "a launcher believes in world size %d and fabrpc "
                 "protocol %u, rank %d in %d and %u", (int)h->world,
                 (unsigned)h->version, m->self, m->world,
                 (unsigned)m->version);
        return FRPC_EBOOTSTRAP;
    }
    if (h->rank < 0 || h->rank >= m->world) {
        snprintf(msg, n, "a launcher named rank %d, outside 0..%d",
                 (int)h->rank, m->world - 1);
        return FRPC_ENORANK;
    }
    return 0;
}

/* Who asked, for a refusal's words: a second process as this store's
 * own rank is not "rank 0 ..., rank 0 has one". */
static void asker(char *buf, size_t n, const fr_store_members *m,
                  const fr_store_hello *h)
{
    if (h->rank == m->self)
        snprintf(buf, n, "a second process started as rank %d",
                 (int)h->rank);
    else
        snprintf(buf, n, "rank %d", (int)h->rank);
}

/* Admits an authenticated h: 0, or a refusal code with msg (store.h).
 * other_process: h is known not to come from the serving process. */
static int admit(fr_store_members *m, const fr_store_hello *h,
                 bool other_process, char *msg, size_t n)
{
    if (h->role == FR_STORE_ROLE_LAUNCHER)
        return admit_launcher(m, h, msg, n);
    /* Once everyone has joined, a mismatch too is only refused: it had
     * poisoned every later barrier of a running job. */
    if (h->world != m->world || h->version != m->version) {
        char them[64];
        asker(them, sizeof(them), m, h);
        if (h->world != m->world)
            snprintf(msg, n, "%s was started with world size %d, rank %d "
                     "with %d", them, (int)h->world, m->self, m->world);
        else
            snprintf(msg, n, "%s speaks fabrpc protocol %u, rank %d speaks "
                     "%u", them, (unsigned)h->version, m->self,
                     (unsigned)m->version);
        poison_joining(m, msg);
        if (h->rank >= 0 && h->rank < m->world && h->rank != m->self &&
            h->role == FR_STORE_ROLE_MAIN)
            reached(m, &m->ranks[h->rank], false);
        return FRPC_EBOOTSTRAP;
    }
    if (h->rank < 0 || h->rank >= m->world) {
        snprintf(msg, n, "rank %d is outside 0..%d (world size %d)",
                 (int)h->rank, m->world - 1, m->world);
        /* A member started with a rank its world cannot hold: the rank
         * it should have been will never come. */
        poison_joining(m, msg);
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
    /* The serving rank's own MAIN may not have come yet: a second
     * process claiming it is told apart by the server. */
    if (r->open || (h->rank == m->self && other_process))
        return claimed_twice(m, (int)h->rank, msg, n);
    reached(m, r, true);
    pthread_mutex_lock(&m->mu);
    if (h->rank != m->self)
        m->alive++;
    pthread_mutex_unlock(&m->mu);
    r->joined = r->open = true;
    return 0;
}

/* A connection claiming rank failed the key proof for reason why. */
static void key_failed(fr_store_members *m, int rank, const char *why)
{
    pthread_mutex_lock(&m->mu);
    m->key_failures++;
    snprintf(m->key_failure, sizeof(m->key_failure),
             "a process claiming rank %d failed the job key proof: %s", rank,
             why);
    pthread_mutex_unlock(&m->mu);
}

int fr_store_members_hello(fr_store_members *m, const uint8_t *val,
                           uint32_t vlen, fr_store_hello *h,
                           uint8_t raw[FR_STORE_HELLO_LEN],
                           uint8_t nonce_s[FR_STORE_NONCE_LEN],
                           uint8_t out[FR_STORE_CHALLENGE_LEN], char *msg,
                           size_t n)
{
    uint32_t proto = (uint32_t)fr_store__get(val, 4);
    if (proto != FR_STORE_PROTO) {
        snprintf(msg, n, "a rank speaks bootstrap store protocol %u, rank "
                 "%d speaks %u", (unsigned)proto, m->self,
                 (unsigned)FR_STORE_PROTO);
        return FRPC_EPROTO;
    }
    if (vlen != FR_STORE_HELLO_LEN || !fr_store__hello_decode(val, h) ||
        fr_store__nonce(nonce_s) != 0)
        return FRPC_EINVAL;
    memcpy(raw, val, FR_STORE_HELLO_LEN);
    memset(out, 0, FR_STORE_CHALLENGE_LEN);
    out[0] = m->key_len > 0;
    memcpy(out + 1, nonce_s, FR_STORE_NONCE_LEN);
    if (m->key_len)
        fr_store__proof(m->key, m->key_len, true, raw, nonce_s,
                        out + 1 + FR_STORE_NONCE_LEN);
    return 0;
}

int fr_store_members_auth(fr_store_members *m, const fr_store_hello *h,
                          const uint8_t raw[FR_STORE_HELLO_LEN],
                          const uint8_t nonce_s[FR_STORE_NONCE_LEN],
                          const uint8_t *val, uint32_t vlen,
                          bool other_process, char *msg, size_t n)
{
    uint8_t want[FR_STORE_MAC_LEN];
    bool ok;
    char them[64];
    asker(them, sizeof(them), m, h);
    if (m->key_len) {
        fr_store__proof(m->key, m->key_len, false, raw, nonce_s, want);
        ok = h->has_key && vlen == FR_STORE_MAC_LEN &&
             fr_ct_equal(val, want, FR_STORE_MAC_LEN);
        if (!ok)
            snprintf(msg, n, "%s %s, rank %d has one (key mismatch)", them,
                     h->has_key ? "could not prove the job key"
                                : "has no job key",
                     m->self);
    } else {
        ok = !h->has_key && vlen == 0;
        if (!ok)
            snprintf(msg, n, "%s has a job key, rank %d has none (key "
                     "mismatch)", them, m->self);
    }
    if (!ok) {
        key_failed(m, h->rank, msg);
        return FRPC_EACCES;
    }
    return admit(m, h, other_process, msg, n);
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
            snprintf(m->lost, sizeof(m->lost), LOST_BY_LEAVE, rank);
        else
            snprintf(m->lost, sizeof(m->lost), "rank %d died: %s", rank, why);
    }
}

int fr_store_lost_by_leave(const char *why)
{
    int rank, end = 0;
    return sscanf(why, LOST_BY_LEAVE "%n", &rank, &end) == 1 && end > 0 &&
           why[end] == '\0';
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

bool fr_store_members_gone(fr_store_members *m, int rank, const char *why)
{
    struct rank_rec *r = &m->ranks[rank];
    if (r->joined || r->told || r->state)
        return false;
    char msg[FR_STORE_MAX_ERR + 1];
    snprintf(msg, sizeof(msg), "rank %d ended before it joined the job: %s",
             rank, why);
    reached(m, r, false);
    poison_joining(m, msg);
    return true;
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

/* What fr_store_members_wait waits for (under mu): no other rank's MAIN
 * open, and, with latecomers in a poisoned job, every rank joined (and so
 * told) or told at its refusal (reached). Not "all but the one that never
 * comes": which one that is, the store cannot know (a duplicate may be an
 * extra process, not a misnumbered one), and a rank started a second
 * later found no store and waited its whole init timeout (probe: RANK=1
 * twice, rank 2 late). */
static bool still_to_come(const fr_store_members *m, bool latecomers)
{
    return m->alive > 0 ||
           (latecomers && m->poisoned && m->nreached < m->world);
}

int fr_store_members_wait(fr_store_members *m, int timeout_ms,
                          bool latecomers)
{
    struct timespec dl;
    int rc = 0;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    int64_t ns = (int64_t)dl.tv_nsec + (int64_t)(timeout_ms > 0 ? timeout_ms
                                                                : 0) * 1000000;
    dl.tv_sec += (time_t)(ns / 1000000000);
    dl.tv_nsec = (long)(ns % 1000000000);
    pthread_mutex_lock(&m->mu);
    while (still_to_come(m, latecomers) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&m->cv, &m->mu, &dl);
    rc = still_to_come(m, latecomers) ? FRPC_ETIMEDOUT : 0;
    pthread_mutex_unlock(&m->mu);
    return rc;
}

uint64_t fr_store_members_key_failures(fr_store_members *m, char *last,
                                       size_t n)
{
    pthread_mutex_lock(&m->mu);
    uint64_t count = m->key_failures;
    if (last && n)
        snprintf(last, n, "%s", m->key_failure);
    pthread_mutex_unlock(&m->mu);
    return count;
}
