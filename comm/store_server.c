/*
 * Bootstrap store, server side (protocol in store.h, constants in
 * store_proto.h).
 *
 * Design notes
 * - One thread polls the listening socket, a self-pipe (the stop signal)
 *   and every client connection. All sockets are non-blocking; each
 *   connection has its own read buffer (one request at most: the header
 *   names the size, checked against the limits before anything is
 *   allocated) and write buffer (one reply).
 * - Invariant: a connection has at most one request in progress. While its
 *   request is parked (a GET of a missing key, a WAIT_GE not yet reached)
 *   or its reply is not fully sent, no further request of that connection
 *   is parsed. Replies therefore leave in request order and the buffers of
 *   a connection never hold more than one request and one reply. A client
 *   sends behind an unanswered request only once it gave up waiting for
 *   it (a LEAVE behind owed replies, a barrier's next request after a
 *   timed-out one): bytes behind a parked request answer it at once
 *   (FRPC_ETIMEDOUT), so that a rank's LEAVE is read before its end.
 * - A connection goes HELLO -> AUTH -> MEMBER (store.h). Before MEMBER,
 *   header_ok admits only the next handshake op with a small value, so an
 *   unauthenticated peer never makes the server buffer more than RBUF_MIN
 *   bytes, never reaches the table, and is closed at its auth deadline
 *   (FR_STORE_AUTH_MS after accept). A refusal is queued as an error reply
 *   with its message and the connection closes once it is sent (closing).
 * - An admitted MAIN connection (main) stands for its rank: when it dies
 *   the membership record (store_members.c) gets the event. Every change of
 *   that record (an event, poison) re-examines all parked requests
 *   (wake(s, NULL)): a WATCH may now be answered, a GET/WAIT_GE may now be
 *   blocked for ever and is answered with the record's error.
 * - A WATCH connection that has sent a WATCH is sent, unasked, each later
 *   change of the events (a push: status FR_STORE_PUSHED, the same value
 *   as a WATCH's answer) whenever it has no WATCH parked and no reply
 *   under way, so a rank stopped after its WATCH was answered still reads
 *   the events that came next (rank 0 leaving, say) once it resumes, even
 *   if the store has closed by then.
 * - A SET or ADD of key K answers every connection parked on K that is now
 *   ready; a parked request whose deadline passes is answered with
 *   FRPC_ETIMEDOUT. Deadlines (and auth deadlines) use the monotonic clock
 *   and set the poll timeout.
 * - A malformed request (see store.h) closes that connection only; out of
 *   memory while serving a request answers it with FRPC_ENOMEM.
 * - The keys and values are in an fr_store_table (store_table.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, pipe2 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <dirent.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/threads.h"
#include "comm/store_proto.h"

#define RBUF_MIN 4096u
#define BUF_KEEP (64u * 1024u) /* larger buffers are freed once idle */
#define ACCEPT_PAUSE_MS 100
/* Connections accepted in one pass: the dead (dropped strangers) are
 * closed between passes, so a flood never holds more descriptors than the
 * cap below and one pass. */
#define ACCEPT_BATCH 64
/* Connections not yet members at most: every rank's two (it joins with
 * its main and its watch connection at once), and this many more; past
 * it, the oldest is dropped. A stranger that opens connections faster
 * than they expire (FR_STORE_AUTH_MS) holds no more descriptors than
 * that, and a rank, which proves its key within a round trip or two,
 * keeps its place unless strangers open JOINING_SPARE connections
 * meanwhile. */
#define JOINING_SPARE 256
/* Under a low open-files limit the spare shrinks (joining_spare) so that
 * a flood leaves room for what the job itself opens: per rank its two
 * store connections, the provider's connections and a pidfd; and this
 * many for the rest (the provider's own descriptors, the application's).
 * At ulimit -n 256 a spare of 256 let strangers take every descriptor:
 * accept failed EMFILE and a late rank was refused until its init
 * timeout (probe, 4 of 4 runs). Never fewer than JOINING_MIN. */
#define FDS_PER_RANK 6
#define FDS_RESERVED 64
#define JOINING_MIN 16
#define MAX_HELLO 256u /* a HELLO may be longer in a later protocol */

enum phase { PH_HELLO, PH_AUTH, PH_MEMBER };

struct conn {
    int fd;
    bool dead;
    bool parked;
    bool closing; /* close once the queued reply is sent */
    bool main;    /* an admitted MAIN: its rank's liveness */
    bool eof;     /* the peer closed: dies once its requests are served */
    enum phase phase;
    int64_t auth_deadline; /* monotonic ms, before PH_MEMBER */
    int64_t stalled_since; /* its last handshake step: accept, challenge */
    uint64_t accept_pass;  /* the serving pass that accepted it */
    fr_store_hello hello;
    uint8_t hello_raw[FR_STORE_HELLO_LEN];
    uint8_t nonce_s[FR_STORE_NONCE_LEN];
    char why[96]; /* why it closed, for its rank's event */
    uint8_t *rbuf;
    size_t rlen, rcap;
    uint8_t *wbuf;
    size_t wlen, woff, wcap;
    /* The request in progress, while parked. */
    uint8_t op;
    int64_t target;   /* WAIT_GE */
    uint64_t seen;    /* WATCH */
    int64_t deadline; /* monotonic ms; INT64_MAX: none */
    char key[FR_STORE_MAX_KEY + 1];
    /* A WATCH connection that asked once: told how many events it was
     * last sent (a WATCH's answer or a push), pushed the rest unasked. */
    bool watching;
    uint64_t told;
};

struct fr_store_server {
    int lfd;
    int pipefd[2];
    uint16_t port;
    pthread_t thread;
    struct conn **conns;
    size_t nconns, capconns;
    struct pollfd *pfds; /* capconns + 2 */
    fr_store_table *table;
    fr_store_members *members;
    int self_rank;
    bool own_client;         /* fr_store_ident's: see other_process */
    _Atomic uint64_t own_end; /* its own client's end's key, or 0 */
    int liveness_ms; /* fr_store_ident's, for accepted connections */
    size_t max_joining; /* connections not yet members, at most */
    uint64_t pass;      /* serving passes so far */
    bool changed; /* the membership record changed: wake(s, NULL) */
    size_t nparked;
    bool work;                  /* a woken conn waits for a pass */
    int64_t accept_paused_until; /* out of fds: stop accepting a while */
};

/* ---- connections -------------------------------------------------------- */

/* Marks c dead, keeping the first reason. */
static void conn_kill(struct conn *c, const char *why)
{
    if (!c->why[0])
        snprintf(c->why, sizeof(c->why), "%s", why);
    c->dead = true;
}

/* Why c's socket failed: err or its pending error, else EOF. */
static void conn_kill_sock(struct conn *c, int err)
{
    char why[96];
    if (err == 0) {
        socklen_t el = sizeof(err);
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
            err = 0;
    }
    if (err == 0)
        conn_kill(c, "its store connection closed without leaving "
                     "(process died?)");
    snprintf(why, sizeof(why), "its store connection failed: %s (host "
             "down?)", strerror(err));
    conn_kill(c, why);
}

/* Queues one reply. Returns 0, or -1 when it cannot be buffered. */
static int conn_reply(struct conn *c, int32_t status, int64_t num,
                      const void *val, size_t len)
{
    size_t need = FR_STORE_REP_HDR + len;
    if (need > c->wcap) {
        uint8_t *b = realloc(c->wbuf, need);
        if (!b)
            return -1;
        c->wbuf = b;
        c->wcap = need;
    }
    fr_store__put(c->wbuf, (uint32_t)status, 4);
    fr_store__put(c->wbuf + 4, (uint64_t)num, 8);
    fr_store__put(c->wbuf + 12, (uint32_t)len, 4);
    if (len)
        memcpy(c->wbuf + FR_STORE_REP_HDR, val, len);
    c->wlen = need;
    c->woff = 0;
    return 0;
}

/* Queues an error reply carrying msg, and closes c once it is sent. */
static int conn_refuse(struct conn *c, int32_t status, const char *msg)
{
    c->closing = true;
    return conn_reply(c, status, 0, msg, strnlen(msg, FR_STORE_MAX_ERR));
}

static void conn_flush(struct conn *c);

/* Queues the events from number `from` on for c, with status (0: a
 * WATCH's answer; FR_STORE_PUSHED: unasked): 0, or -1 the reply could not
 * be buffered. num is the number of the event after the last one sent.
 * At most as many as fit in FR_STORE_MAX_VALUE (about 10,000 of 101
 * bytes): a job of more ranks that all died or left is told in pages, the
 * next one pushed or asked for by the next WATCH. (One list cut at that
 * size, as before protocol 3, left the rest untold and the watcher asking
 * again at once, for ever.) */
static int send_events(struct fr_store_server *s, struct conn *c,
                       int32_t status, uint64_t from)
{
    const size_t most = 6 + sizeof(((fr_store_event *)0)->reason);
    size_t n, all;
    const fr_store_event *ev = fr_store_members_events(s->members, &all);
    if (from > all)
        from = all;
    n = all - from > FR_STORE_MAX_VALUE / most ? FR_STORE_MAX_VALUE / most
                                               : all - from;
    uint8_t *buf = malloc(n * most + 1);
    if (!buf)
        return status ? 0 : conn_reply(c, FRPC_ENOMEM, 0, NULL, 0);
    size_t len = fr_store__events_encode(ev + from, n, buf);
    int rc = conn_reply(c, status, (int64_t)(from + n), buf, len);
    free(buf);
    if (rc == 0)
        c->told = from + n;
    return rc;
}

/* Answers c's WATCH if the server has more than c->seen events: 1, 0 not
 * ready, -1 the reply could not be buffered. */
static int answer_watch(struct fr_store_server *s, struct conn *c)
{
    size_t n;
    fr_store_members_events(s->members, &n);
    if ((uint64_t)n <= c->seen)
        return 0;
    return send_events(s, c, 0, c->seen) < 0 ? -1 : 1;
}

/* Sends c the events it was not told yet, unasked, if it watches and has
 * nothing else under way (no parked WATCH, no reply being sent): a rank
 * stopped after its WATCH was answered finds the events that came next
 * when it resumes, even once the store is gone. Out of memory, it is told
 * at the next change. */
static void push_events(struct fr_store_server *s, struct conn *c)
{
    size_t n;
    if (!c->watching || c->parked || c->dead || c->closing ||
        c->woff < c->wlen)
        return;
    fr_store_members_events(s->members, &n);
    if ((uint64_t)n > c->told &&
        send_events(s, c, FR_STORE_PUSHED, c->told) == 0)
        conn_flush(c);
}

/* Answers c's GET/WAIT_GE/WATCH if it is ready, or a GET/WAIT_GE that can
 * never be (the job is poisoned or a rank is gone): 1 answered, 0 not
 * ready, -1 the reply could not be buffered. */
static int try_answer(struct fr_store_server *s, struct conn *c)
{
    const uint8_t *val;
    const char *msg;
    size_t len;
    int64_t v;
    int rc;
    if (c->op == FR_STORE_OP_WATCH)
        return answer_watch(s, c);
    if (c->op == FR_STORE_OP_GET) {
        if (fr_store_table_get(s->table, c->key, &val, &len))
            return conn_reply(c, 0, 0, val, len) < 0 ? -1 : 1;
    } else if (fr_store_table_counter(s->table, c->key, &v) != 0) {
        return conn_reply(c, FRPC_EPROTO, 0, NULL, 0) < 0 ? -1 : 1;
    } else if (v >= c->target) {
        return conn_reply(c, 0, v, NULL, 0) < 0 ? -1 : 1;
    }
    rc = fr_store_members_blocked(s->members, &msg);
    if (rc == 0)
        return 0;
    return conn_reply(c, rc, 0, msg, strlen(msg)) < 0 ? -1 : 1;
}

static void unpark(struct fr_store_server *s, struct conn *c)
{
    c->parked = false;
    s->nparked--;
    s->work = true;
}

/* key changed (NULL: the membership record did): answer the connections
 * parked on it that are now ready or blocked. Rank 0 runs the store, and
 * may exit as soon as a barrier releases it (no frpc_shutdown), taking
 * this thread with it: so the other ranks' answers are sent at once,
 * before the reply to the request that woke them, and rank 0's own wait
 * for the next pass of the loop, after the requests it is processing
 * (a rank's barrier arrival is an ADD and a WAIT_GE, back to back). */
static void wake(struct fr_store_server *s, const char *key)
{
    for (size_t i = 0; i < s->nconns && s->nparked; i++) {
        struct conn *c = s->conns[i];
        if (!c->parked || c->dead || (key && strcmp(c->key, key) != 0))
            continue;
        int r = try_answer(s, c);
        if (r != 0)
            unpark(s, c);
        if (r < 0)
            conn_kill(c, "the store ran out of memory serving it");
        else if (r > 0 && c->hello.rank != 0)
            conn_flush(c);
    }
}

/* HELLO: answers with the challenge, or refuses another store protocol. */
static int handle_hello(struct fr_store_server *s, struct conn *c,
                        const uint8_t *val, uint32_t vlen)
{
    char msg[FR_STORE_MAX_ERR + 1];
    uint8_t out[FR_STORE_CHALLENGE_LEN];
    int rc = fr_store_members_hello(s->members, val, vlen, &c->hello,
                                    c->hello_raw, c->nonce_s, out, msg,
                                    sizeof(msg));
    if (rc == FRPC_EPROTO)
        return conn_refuse(c, rc, msg);
    if (rc != 0)
        return -1;
    c->phase = PH_AUTH;
    c->stalled_since = fr_store__now_ms();
    return conn_reply(c, 0, 0, out, sizeof(out));
}

/* Whether c claims to be the serving rank's MAIN from another process
 * than this one: its own client told its end (fr_store_server_note_own)
 * before its HELLO, so a connection from another address or port is not
 * it. The whole end: a rank 0 started twice on two hosts may dial from
 * the same port number. */
static bool other_process(struct fr_store_server *s, const struct conn *c)
{
    if (!s->own_client || c->hello.role != FR_STORE_ROLE_MAIN ||
        c->hello.rank != s->self_rank)
        return false;
    uint64_t own = atomic_load(&s->own_end);
    return own == 0 || own != fr_store__end_key(c->fd, true);
}

void fr_store_server_note_own(fr_store_server *s, int fd)
{
    if (s)
        atomic_store(&s->own_end, fr_store__end_key(fd, false));
}

/* AUTH: a member, or refused (the record may have changed). */
static int handle_auth(struct fr_store_server *s, struct conn *c,
                       const uint8_t *val, uint32_t vlen)
{
    char msg[FR_STORE_MAX_ERR + 1];
    int rc = fr_store_members_auth(s->members, &c->hello, c->hello_raw,
                                   c->nonce_s, val, vlen,
                                   other_process(s, c), msg, sizeof(msg));
    if (rc != 0) {
        s->changed = true;
        return conn_refuse(c, rc, msg);
    }
    c->phase = PH_MEMBER;
    c->main = c->hello.role == FR_STORE_ROLE_MAIN;
    return conn_reply(c, 0, 0, NULL, 0);
}

/* GONE from a launcher: the rank its HELLO named has ended, val its
 * words (made printable: they reach every rank's error text). */
static int handle_gone(struct fr_store_server *s, struct conn *c,
                       const uint8_t *val, uint32_t vlen)
{
    char why[FR_STORE_GONE_MAX + 1];
    for (uint32_t i = 0; i < vlen; i++)
        why[i] = val[i] >= 0x20 && val[i] < 0x7f ? (char)val[i] : '?';
    why[vlen] = '\0';
    bool poisoned = fr_store_members_gone(s->members, c->hello.rank, why);
    if (poisoned)
        s->changed = true;
    return conn_reply(c, 0, poisoned, NULL, 0);
}

/* Handles one well-formed request. Returns 0, or -1 to close c. */
static int handle(struct fr_store_server *s, struct conn *c, uint8_t op,
                  const char *key, const uint8_t *val, uint32_t vlen,
                  int64_t arg)
{
    int64_t v = 0, timeout;
    int rc;

    /* A launcher may say that a rank ended, and nothing else: it is no
     * member, and a GONE from a member would let one rank poison others. */
    if ((c->hello.role == FR_STORE_ROLE_LAUNCHER) !=
        (op == FR_STORE_OP_GONE) && c->phase == PH_MEMBER)
        return conn_reply(c, FRPC_EINVAL, 0, NULL, 0);
    switch (op) {
    case FR_STORE_OP_GONE:
        return handle_gone(s, c, val, vlen);
    case FR_STORE_OP_HELLO:
        return handle_hello(s, c, val, vlen);
    case FR_STORE_OP_AUTH:
        return handle_auth(s, c, val, vlen);
    case FR_STORE_OP_LEAVE:
        if (!c->main)
            return conn_reply(c, FRPC_EINVAL, 0, NULL, 0);
        fr_store_members_leave(s->members, c->hello.rank);
        s->changed = true;
        return conn_reply(c, 0, 0, NULL, 0);
    case FR_STORE_OP_SET:
    case FR_STORE_OP_ADD:
        rc = op == FR_STORE_OP_SET
                 ? fr_store_table_set(s->table, key, val, vlen)
                 : fr_store_table_add(s->table, key, arg, &v);
        if (rc == 0)
            wake(s, key);
        return conn_reply(c, rc, v, NULL, 0);
    case FR_STORE_OP_UNARRIVE: /* nobody waits for a counter to drop */
        rc = fr_store_table_counter(s->table, key, &v);
        if (rc == 0 && v < arg)
            rc = fr_store_table_add(s->table, key, -1, &v);
        return conn_reply(c, rc, v, NULL, 0);
    default: /* GET, WAIT_GE, WATCH */
        if (op == FR_STORE_OP_WATCH && c->hello.role == FR_STORE_ROLE_WATCH)
            c->watching = true;
        c->op = op;
        memcpy(c->key, key, strlen(key) + 1);
        c->target = op == FR_STORE_OP_WAIT_GE ? arg : 0;
        c->seen = (uint64_t)arg;
        timeout = op == FR_STORE_OP_GET ? arg
                                        : (int64_t)fr_store__get(val, 8);
        int64_t now = fr_store__now_ms();
        c->deadline = (timeout <= 0 || timeout > INT64_MAX - now)
                          ? INT64_MAX : now + timeout;
        rc = try_answer(s, c);
        if (rc == 0) {
            c->parked = true;
            s->nparked++;
        }
        return rc < 0 ? -1 : 0;
    }
}

/* Sends what is queued. Errors mark c dead. */
static void conn_flush(struct conn *c)
{
    while (c->woff < c->wlen) {
        ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->woff += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                   c->rlen > 0) {
            /* The client is gone, having sent more first (a LEAVE behind
             * replies it gave up on): the replies are dropped, what it
             * sent is served, then the connection ends as at its EOF. */
            c->wlen = c->woff = 0;
            c->eof = true;
            return;
        } else {
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                conn_kill_sock(c, errno);
            return;
        }
    }
    c->wlen = c->woff = 0;
    if (c->closing)
        conn_kill(c, "it was refused");
    if (c->wcap > BUF_KEEP) {
        free(c->wbuf);
        c->wbuf = NULL;
        c->wcap = 0;
    }
}

static void conn_read(struct conn *c)
{
    while (c->rlen < c->rcap) {
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen,
                         MSG_DONTWAIT);
        if (n > 0)
            c->rlen += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else {
            if (n == 0)
                c->eof = true; /* after the requests already read */
            else if (errno != EAGAIN && errno != EWOULDBLOCK)
                conn_kill_sock(c, errno);
            return;
        }
    }
}

/* Whether a request header is well-formed (see store.h) and its op allowed
 * in phase ph: before PH_MEMBER only the next handshake op. */
static bool header_ok(enum phase ph, uint8_t op, uint16_t klen, uint32_t vlen)
{
    if (ph == PH_HELLO)
        return op == FR_STORE_OP_HELLO && klen == 0 && vlen >= 4 &&
               vlen <= MAX_HELLO;
    if (ph == PH_AUTH)
        return op == FR_STORE_OP_AUTH && klen == 0 &&
               (vlen == 0 || vlen == FR_STORE_MAC_LEN);
    if (op == FR_STORE_OP_WATCH || op == FR_STORE_OP_LEAVE)
        return klen == 0 && vlen == (op == FR_STORE_OP_WATCH ? 8u : 0u);
    if (op == FR_STORE_OP_GONE)
        return klen == 0 && vlen <= FR_STORE_GONE_MAX;
    if (klen < 1 || klen > FR_STORE_MAX_KEY || vlen > FR_STORE_MAX_VALUE)
        return false;
    switch (op) {
    case FR_STORE_OP_SET:
        return true;
    case FR_STORE_OP_GET:
    case FR_STORE_OP_ADD:
    case FR_STORE_OP_UNARRIVE:
        return vlen == 0;
    case FR_STORE_OP_WAIT_GE:
        return vlen == 8;
    default:
        return false;
    }
}

/* Parses and serves c's buffered requests while it is neither parked nor
 * sending. A malformed request marks c dead. */
static void conn_process(struct fr_store_server *s, struct conn *c)
{
    while (!c->dead) {
        if (c->woff < c->wlen) {
            conn_flush(c);
            if (c->woff < c->wlen)
                return;
        }
        /* Bytes behind a parked request: its client gave up waiting for
         * it (its reply is owed, store_client.c) and went on, a LEAVE
         * perhaps, and may be gone by now: answer it, then serve what
         * follows before the connection's end is read. */
        if (c->parked && c->rlen > 0) {
            unpark(s, c);
            if (conn_reply(c, FRPC_ETIMEDOUT, 0, NULL, 0) < 0) {
                conn_kill(c, "the store ran out of memory serving it");
                return;
            }
            continue;
        }
        if (c->parked || c->closing || c->rlen < FR_STORE_REQ_HDR)
            return;
        const uint8_t *p = c->rbuf;
        uint8_t op = p[0];
        uint16_t klen = (uint16_t)fr_store__get(p + 1, 2);
        uint32_t vlen = (uint32_t)fr_store__get(p + 3, 4);
        int64_t arg = (int64_t)fr_store__get(p + 7, 8);
        if (!header_ok(c->phase, op, klen, vlen)) {
            conn_kill(c, "it sent a malformed store request");
            return;
        }
        size_t total = FR_STORE_REQ_HDR + klen + vlen;
        if (c->rlen < total) {
            if (total > c->rcap) {
                uint8_t *b = realloc(c->rbuf, total);
                if (!b) {
                    conn_kill(c, "the store ran out of memory serving it");
                    return;
                }
                c->rbuf = b;
                c->rcap = total;
            }
            return;
        }
        char key[FR_STORE_MAX_KEY + 1];
        memcpy(key, p + FR_STORE_REQ_HDR, klen);
        key[klen] = '\0';
        if (strlen(key) != klen ||
            handle(s, c, op, key, p + FR_STORE_REQ_HDR + klen, vlen, arg) < 0) {
            conn_kill(c, "it sent a malformed store request");
            return;
        }
        c->rlen -= total;
        memmove(c->rbuf, c->rbuf + total, c->rlen);
        if (c->rlen == 0 && c->rcap > BUF_KEEP) {
            uint8_t *b = realloc(c->rbuf, RBUF_MIN);
            if (b) {
                c->rbuf = b;
                c->rcap = RBUF_MIN;
            }
        }
    }
}

static void conn_free(struct conn *c)
{
    close(c->fd);
    free(c->rbuf);
    free(c->wbuf);
    free(c);
}

/* Makes room for one more connection; false when out of memory. */
static bool room_for_conn(struct fr_store_server *s)
{
    if (s->nconns < s->capconns)
        return true;
    size_t n = s->capconns ? 2 * s->capconns : 16;
    struct conn **cs = realloc(s->conns, n * sizeof(*cs));
    if (!cs)
        return false;
    s->conns = cs;
    struct pollfd *pf = realloc(s->pfds, (n + 2) * sizeof(*pf));
    if (!pf)
        return false;
    s->pfds = pf;
    s->capconns = n;
    return true;
}

/* A connection whose handshake has stalled this long (since its accept,
 * or since its challenge) is taken for a stranger's: a rank sends its
 * HELLO as soon as it is connected and answers its challenge within a
 * round trip. */
#define STALL_GRACE_MS 250

/* Which connection not yet a member goes first, lowest first:
 * 0: silent since an earlier pass (a rank's HELLO would have come);
 * 1: stalled past STALL_GRACE_MS (a stranger with a well-formed HELLO
 *    never proves a key);
 * 2: accepted in this pass and silent still (its HELLO may be on its
 *    way: a rank's new connection, accepted just before, was dropped
 *    ahead of 264 stalled strangers under TSan);
 * 3: the rest, whose handshake moves. */
static int drop_order(const struct fr_store_server *s, const struct conn *c,
                      int64_t now)
{
    bool silent = c->phase == PH_HELLO && c->rlen == 0;
    if (silent && c->accept_pass != s->pass)
        return 0;
    if (now - c->stalled_since >= STALL_GRACE_MS)
        return 1;
    return silent ? 2 : 3;
}

/* The live connection not yet a member to drop first (drop_order, then
 * the one stalled longest). */
static struct conn *first_to_drop(struct fr_store_server *s, size_t *joining)
{
    struct conn *pick = NULL;
    int pick_order = 0;
    int64_t now = fr_store__now_ms();
    *joining = 0;
    for (size_t i = 0; i < s->nconns; i++) {
        struct conn *c = s->conns[i];
        if (c->phase == PH_MEMBER || c->dead)
            continue;
        (*joining)++;
        int order = drop_order(s, c, now);
        if (!pick || order < pick_order ||
            (order == pick_order && c->stalled_since < pick->stalled_since)) {
            pick = c;
            pick_order = order;
        }
    }
    return pick;
}

/* Past max_joining connections that are not members yet, drops the
 * excess in drop_order. Dropping the oldest alone dropped ranks'
 * own connections under a flood of silent ones (their HELLO read, not
 * yet answered): 29 in one start, which then failed at its 60 s init
 * timeout (probe, ulimit -n 128, 3 flooding processes). A connection
 * that looks silent is read once more first: its HELLO may have come
 * since the last poll. */
static void drop_excess_joining(struct fr_store_server *s)
{
    size_t joining;
    struct conn *c;
    while ((c = first_to_drop(s, &joining)) && joining > s->max_joining) {
        if (c->phase == PH_HELLO && c->rlen == 0 && !c->eof) {
            conn_read(c);
            if (c->rlen > 0)
                continue; /* not silent after all: pick again */
        }
        conn_kill(c, "too many connections waiting to authenticate: "
                     "one that had not proven its key was dropped");
    }
}

/* Accepts the pending connections, ACCEPT_BATCH at most. */
static void accept_all(struct fr_store_server *s)
{
    for (int k = 0; k < ACCEPT_BATCH; k++) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM)
                s->accept_paused_until = fr_store__now_ms() + ACCEPT_PAUSE_MS;
            return;
        }
        fr_store__tune_socket(fd, s->liveness_ms);
        struct conn *c = room_for_conn(s) ? calloc(1, sizeof(*c)) : NULL;
        uint8_t *rbuf = c ? malloc(RBUF_MIN) : NULL;
        if (!rbuf) { /* out of memory: this client sees EOF */
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->stalled_since = fr_store__now_ms();
        c->auth_deadline = c->stalled_since + FR_STORE_AUTH_MS;
        c->accept_pass = s->pass;
        c->rbuf = rbuf;
        c->rcap = RBUF_MIN;
        s->conns[s->nconns++] = c;
    }
}

/* ---- the serving thread ------------------------------------------------- */

static int poll_timeout(const struct fr_store_server *s, int64_t now)
{
    if (s->work)
        return 0;
    int64_t t = INT64_MAX;
    for (size_t i = 0; i < s->nconns; i++) {
        const struct conn *c = s->conns[i];
        if (c->parked && c->deadline < t)
            t = c->deadline;
        if (c->phase != PH_MEMBER && c->auth_deadline < t)
            t = c->auth_deadline;
    }
    if (s->accept_paused_until > now && s->accept_paused_until < t)
        t = s->accept_paused_until;
    if (t == INT64_MAX)
        return -1;
    if (t <= now)
        return 0;
    return t - now > INT_MAX ? INT_MAX : (int)(t - now);
}

static void *serve(void *arg)
{
    struct fr_store_server *s = arg;

    for (;;) {
        int64_t now = fr_store__now_ms();
        size_t n = s->nconns;
        s->pass++;
        s->pfds[0] = (struct pollfd){.fd = s->pipefd[0], .events = POLLIN};
        s->pfds[1] = (struct pollfd){
            .fd = s->accept_paused_until > now ? -1 : s->lfd,
            .events = POLLIN};
        for (size_t i = 0; i < n; i++) {
            struct conn *c = s->conns[i];
            short ev = c->rlen < c->rcap ? POLLIN : 0;
            if (c->woff < c->wlen)
                ev |= POLLOUT;
            s->pfds[i + 2] = (struct pollfd){.fd = c->fd, .events = ev};
        }
        int rc = poll(s->pfds, n + 2, poll_timeout(s, now));
        if (rc < 0 && errno != EINTR)
            break;
        if (rc > 0 && s->pfds[0].revents)
            break;
        for (size_t i = 0; rc > 0 && i < n; i++) {
            struct conn *c = s->conns[i];
            short re = s->pfds[i + 2].revents;
            if (re & POLLNVAL)
                conn_kill(c, "its store connection failed");
            else if ((re & (POLLIN | POLLHUP | POLLERR)) && c->rlen < c->rcap)
                conn_read(c); /* reads what is left, then sees EOF/error */
            else if (re & (POLLHUP | POLLERR))
                conn_kill_sock(c, 0);
        }
        if (rc > 0 && s->pfds[1].revents) {
            accept_all(s);
            drop_excess_joining(s);
        }

        now = fr_store__now_ms();
        s->work = false;
        for (size_t i = 0; i < s->nconns; i++) {
            struct conn *c = s->conns[i];
            if (c->phase != PH_MEMBER && c->auth_deadline <= now)
                conn_kill(c, "it did not authenticate in time");
            if (c->parked && !c->dead && c->deadline <= now) {
                unpark(s, c);
                if (conn_reply(c, FRPC_ETIMEDOUT, 0, NULL, 0) < 0)
                    conn_kill(c, "the store ran out of memory serving it");
            }
        }
        for (size_t i = 0; i < s->nconns; i++)
            conn_process(s, s->conns[i]);
        for (size_t i = 0; i < s->nconns; i++)
            if (s->conns[i]->eof)
                conn_kill_sock(s->conns[i], 0);
        for (size_t i = 0; i < s->nconns;) {
            struct conn *c = s->conns[i];
            if (!c->dead) {
                i++;
                continue;
            }
            if (c->parked)
                s->nparked--;
            if (c->main) {
                fr_store_members_closed(s->members, c->hello.rank, c->why);
                s->changed = true;
            }
            conn_free(c);
            s->conns[i] = s->conns[--s->nconns];
        }
        if (s->changed) {
            s->changed = false;
            wake(s, NULL);
        }
        for (size_t i = 0; i < s->nconns; i++)
            push_events(s, s->conns[i]);
    }
    /* Closing every connection ends the clients' waits with EOF. */
    for (size_t i = 0; i < s->nconns; i++)
        conn_free(s->conns[i]);
    s->nconns = 0;
    return NULL;
}

/* ---- start / stop ------------------------------------------------------- */

static void server_free(struct fr_store_server *s)
{
    for (size_t i = 0; i < s->nconns; i++)
        conn_free(s->conns[i]);
    fr_store_table_free(s->table);
    fr_store_members_free(s->members);
    if (s->lfd >= 0)
        close(s->lfd);
    for (int i = 0; i < 2; i++)
        if (s->pipefd[i] >= 0)
            close(s->pipefd[i]);
    free(s->conns);
    free(s->pfds);
    free(s);
}

/* Descriptors this process has open now (32 if it cannot tell). */
static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 32;
    long n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 2; /* . and .. (the directory's own fd was in the count) */
}

/* How many connections beyond the ranks' own may wait to authenticate. */
static size_t joining_spare(int world)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return JOINING_SPARE;
    /* A flood holds the cap plus one pass of accepts (ACCEPT_BATCH). */
    long room = (long)rl.rlim_cur - open_fds() -
                (long)FDS_PER_RANK * world - FDS_RESERVED - ACCEPT_BATCH;
    if (room < JOINING_MIN)
        return JOINING_MIN;
    return room < JOINING_SPARE ? (size_t)room : JOINING_SPARE;
}

int fr_store_server_start(const char *host, uint16_t port,
                          const fr_store_ident *self, fr_store_server **out,
                          char *errbuf, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!out || !self || self->world < 1 ||
        self->world > FR_STORE_MAX_WORLD || self->rank < 0 ||
        self->rank >= self->world || (self->key_len && !self->key)) {
        fr_store__errf(errbuf, errlen, "store server: out and a valid self "
                       "(rank in 0..world-1, world in 1..%d) are required",
                       FR_STORE_MAX_WORLD);
        return FRPC_EINVAL;
    }
    struct fr_store_server *s = calloc(1, sizeof(*s));
    if (!s)
        return FRPC_ENOMEM;
    s->lfd = s->pipefd[0] = s->pipefd[1] = -1;
    s->self_rank = self->rank;
    s->own_client = self->own_client;
    s->liveness_ms = self->liveness_ms;
    s->max_joining = 2 * (size_t)self->world + joining_spare(self->world);
    s->table = fr_store_table_new();
    s->members = fr_store_members_new(self);
    s->pfds = malloc(2 * sizeof(*s->pfds));
    if (!s->table || !s->members || !s->pfds) {
        server_free(s);
        return FRPC_ENOMEM;
    }
    int rc = fr_store__listen((host && *host) ? host : "0.0.0.0", port,
                              &s->lfd, &s->port, errbuf, errlen);
    if (rc == 0 && pipe2(s->pipefd, O_NONBLOCK | O_CLOEXEC) != 0) {
        fr_store__errf(errbuf, errlen, "store server: pipe: %s",
                       strerror(errno));
        rc = FRPC_EBOOTSTRAP;
    }
    if (rc == 0 && (errno = fr_thread_create(&s->thread, serve, s)) != 0) {
        fr_store__errf(errbuf, errlen, "store server: thread: %s",
                       strerror(errno));
        rc = FRPC_EBOOTSTRAP;
    }
    if (rc != 0) {
        server_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

uint16_t fr_store_server_port(const fr_store_server *s)
{
    return s ? s->port : 0;
}

uint64_t fr_store_server_key_failures(fr_store_server *s, char *last,
                                      size_t n)
{
    if (!s && last && n)
        last[0] = '\0';
    return s ? fr_store_members_key_failures(s->members, last, n) : 0;
}

int fr_store_server_wait_gone(fr_store_server *s, int timeout_ms)
{
    return s ? fr_store_members_wait(s->members, timeout_ms, false)
             : FRPC_EINVAL;
}

int fr_store_server_wait_told(fr_store_server *s, int timeout_ms)
{
    return s ? fr_store_members_wait(s->members, timeout_ms, true)
             : FRPC_EINVAL;
}

void fr_store_server_stop(fr_store_server *s)
{
    if (!s)
        return;
    char b = 1;
    while (write(s->pipefd[1], &b, 1) < 0 && errno == EINTR)
        ;
    pthread_join(s->thread, NULL);
    server_free(s);
}
