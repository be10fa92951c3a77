/*
 * Bootstrap store, client side (protocol in store.h, constants in
 * store_proto.h).
 *
 * Design notes
 * - One blocking TCP socket (TCP_NODELAY, keepalive), one request and one
 *   reply per operation. Every wait on the socket goes through poll() with
 *   a deadline, so a dead or stalled server cannot hang the caller: the
 *   server enforces GET/WAIT_GE deadlines itself, and the client gives up
 *   FR_STORE_GRACE_MS after them; replies to other operations and all
 *   sends are bounded by FR_STORE_IO_TIMEOUT_MS. A GET/WAIT_GE without a
 *   limit waits for as long as the connection lives (keepalive notices a
 *   vanished host).
 * - Any send/receive failure, client-side timeout or malformed reply closes
 *   the connection: the reply stream can no longer be trusted. That call
 *   and every later one return FRPC_EBOOTSTRAP.
 * - Argument errors (FRPC_EINVAL) are found before anything is sent and
 *   leave the connection usable.
 * - Joining is part of connecting: after each TCP connect, HELLO and AUTH
 *   (store.h). The client checks the store's proof before it sends its own
 *   (and sends none to a store that cannot prove the key), so it never
 *   joins a fake store. A refusal that means "a previous run's store"
 *   (FRPC_ESHUTDOWN) or a connection lost mid-handshake is retried like a
 *   refused connect; any other refusal (FRPC_EEXIST: the rank is held by
 *   another live process) ends fr_store_connect with the store's message.
 * - Every failed call leaves a message in err (fr_store_last_error): the
 *   server's, when its reply carried one, else a local description.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "comm/sha256.h"
#include "comm/signal_hold.h"
#include "comm/store_proto.h"
#include "comm/tsan.h"

#define FR_STORE_GRACE_MS 5000
#define FR_STORE_IO_TIMEOUT_MS 60000
#define FR_STORE_SINGLE_ATTEMPT_MS 1000
#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 500

struct held_push {
    struct held_push *next;
    int64_t num;
    size_t len;
    uint8_t value[];
};

struct fr_store_client {
    int fd; /* -1 once the connection is lost */
    /* A second descriptor of the same socket, closed only by
     * fr_store_close, for fr_store_interrupt: fd itself may be closed
     * (and its number reused) by the thread in a call at any moment. */
    int shut_fd;
    bool main; /* joined as a MAIN */
    /* fr_store_cap's deadline (monotonic ms; 0: none) */
    int64_t cap;
    /* Requests whose replies were given up on (the cap passed before a
     * byte of them came): read and dropped before the next reply. */
    unsigned owed;
    /* fr_store_watch sent a WATCH whose answer it has not read (it
     * returned pushed events that came first): the next call reads it. */
    bool watch_out;
    /* The last call's request went out (fr_store_last_sent). */
    bool sent;
    /* The last reply's header was not the store protocol's: what came,
     * printable ('.' for other bytes), for the handshake's message. */
    char garbled[FR_STORE_REP_HDR + 1];
    /* Pushed events another request read past (recv_rep), oldest first:
     * each frame holds only the events after the previous one's, so
     * fr_store_watch takes them before reading the stream. */
    struct held_push *pushes, **pushes_tail;
    char err[FR_STORE_MAX_ERR + 1]; /* the last failed call's message */
};

/* Sets c's message and returns rc. */
__attribute__((format(printf, 3, 4)))
static int fail(fr_store_client *c, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- connect ------------------------------------------------------------ */

static int exchange(fr_store_client *c, uint8_t op, const char *key,
                    int64_t arg, const void *val, size_t len,
                    int64_t deadline, int64_t *num, void **value,
                    size_t *vlen);
static int lost(fr_store_client *c);

/* HELLO and AUTH on c's fresh connection as me (store.h). 0, or a code
 * with c->err set and *retry telling whether fr_store_connect may try
 * again (a stale store's refusal, a connection lost on the way). */
static int handshake(fr_store_client *c, const fr_store_ident *me,
                     bool *retry)
{
    fr_store_hello h = {.proto = FR_STORE_PROTO,
                        .version = me->version,
                        .rank = me->rank,
                        .world = me->world,
                        .role = (uint8_t)me->role,
                        .has_key = me->key_len > 0};
    uint8_t raw[FR_STORE_HELLO_LEN], mine[FR_STORE_MAC_LEN];
    uint8_t want[FR_STORE_MAC_LEN];
    uint8_t *v = NULL;
    size_t vlen = 0;
    int64_t num;
    if (fr_store__nonce(h.nonce) != 0)
        return fail(c, FRPC_EBOOTSTRAP, "getrandom: %s", strerror(errno));
    fr_store__hello_encode(&h, raw);
    int rc = exchange(c, FR_STORE_OP_HELLO, "", 0, raw, sizeof(raw),
                      fr_store__now_ms() + FR_STORE_AUTH_MS, &num,
                      (void **)&v, &vlen);
    *retry = rc == FRPC_ESHUTDOWN || c->fd < 0;
    if (rc != 0 && c->garbled[0]) {
        /* Another program holds the port: it will not turn into a
         * store, so waiting for one is no use. */
        *retry = false;
        return fail(c, FRPC_EPROTO, "not a fabrpc bootstrap store: its "
                    "answer began '%s' (another program on that port?)",
                    c->garbled);
    }
    if (rc != 0)
        return rc;
    if (vlen != FR_STORE_CHALLENGE_LEN || v[0] > 1) {
        free(v);
        lost(c);
        return fail(c, FRPC_EPROTO, "not a fabrpc bootstrap store (bad "
                    "challenge)");
    }
    const uint8_t *nonce_s = v + 1, *proof = v + 1 + FR_STORE_NONCE_LEN;
    bool trusted = !v[0];
    if (me->key_len) {
        fr_store__proof(me->key, me->key_len, true, raw, nonce_s, want);
        trusted = v[0] && fr_ct_equal(proof, want, FR_STORE_MAC_LEN);
        if (trusted)
            fr_store__proof(me->key, me->key_len, false, raw, nonce_s, mine);
    }
    bool server_key = v[0];
    free(v);
    rc = exchange(c, FR_STORE_OP_AUTH, "", 0, mine,
                  trusted && me->key_len ? FR_STORE_MAC_LEN : 0,
                  fr_store__now_ms() + FR_STORE_AUTH_MS, &num, NULL, NULL);
    *retry = trusted &&
             (rc == FRPC_ESHUTDOWN || c->fd < 0);
    if (trusted || rc == FRPC_EACCES) /* the store explained the mismatch */
        return rc;
    return fail(c, FRPC_EACCES, "the bootstrap store %s (key mismatch)",
                !me->key_len ? "has a job key, this rank has none"
                : server_key ? "could not prove it holds the job key"
                             : "has no job key, this rank has one");
}

int fr_store_connect(const char *host, uint16_t port, int timeout_ms,
                     const fr_store_ident *me, fr_store_client **out,
                     char *errbuf, size_t errlen)
{
    return fr_store_connect_how(host, port, timeout_ms, me, out, errbuf,
                                errlen, NULL);
}

int fr_store_connect_how(const char *host, uint16_t port, int timeout_ms,
                         const fr_store_ident *me, fr_store_client **out,
                         char *errbuf, size_t errlen, fr_store_outcome *how)
{
    fr_store_outcome unused;
    if (!how)
        how = &unused;
    *how = FR_STORE_FOREIGN;
    if (out)
        *out = NULL;
    if (!host || !*host || port == 0 || !out || !me || me->world < 1 ||
        me->rank < 0 || (me->key_len && !me->key) ||
        (unsigned)me->role > FR_STORE_ROLE_LAUNCHER) {
        fr_store__errf(errbuf, errlen,
                       "bootstrap store: host, port, out and a valid "
                       "identity are required");
        return FRPC_EINVAL;
    }
    fr_store_client *c = calloc(1, sizeof(*c));
    if (!c)
        return FRPC_ENOMEM;
    c->shut_fd = -1;
    char portstr[8], addr[300];
    snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
    fr_store__fmt_addr(addr, sizeof(addr), host, port);
    int64_t start = fr_store__now_ms();
    int64_t deadline = start + (timeout_ms > 0 ? timeout_ms : 0);
    int64_t backoff = BACKOFF_MIN_MS;
    const char *why = "unknown error";
    /* after a refusal, why the store could not be reached since (its
     * process ended): the refusal's words stay in why */
    const char *gone_why = NULL;
    bool refused = false; /* the last attempt was a stale-store refusal */
    bool retry = true;    /* false: refused for good */
    char whybuf[sizeof(c->err)];
    int rc = FRPC_EBOOTSTRAP;
    for (;;) {
        int64_t now = fr_store__now_ms();
        const char *dial_why = NULL;
        c->fd = fr_store__dial(host, portstr,
                            timeout_ms > 0 ? deadline
                                           : now + FR_STORE_SINGLE_ATTEMPT_MS,
                            me->liveness_ms, &dial_why);
        if (c->fd < 0) {
            if (refused)
                gone_why = dial_why;
            else
                why = dial_why;
        } else {
            gone_why = NULL;
            if (me->role == FR_STORE_ROLE_MAIN)
                fr_store_server_note_own(me->own_server, c->fd);
            /* The handshake too ends by deadline: a store whose process
             * is stopped still has its connections accepted (backlog). */
            fr_store_cap(c, timeout_ms > 0 ? deadline : 0);
            rc = handshake(c, me, &retry);
            fr_store_cap(c, 0);
            if (rc == FRPC_ETIMEDOUT)
                retry = true; /* no answer by deadline: unreachable */
            if (rc == 0 || !retry)
                break;
            /* An attempt cut short by the deadline keeps the reason of
             * the refusals before it. */
            if (rc != FRPC_ETIMEDOUT || !refused) {
                refused = rc == FRPC_ESHUTDOWN;
                snprintf(whybuf, sizeof(whybuf), "%s", c->err);
                why = whybuf;
            }
            rc = FRPC_EBOOTSTRAP;
            lost(c);
        }
        now = fr_store__now_ms();
        if (now >= deadline)
            break;
        int64_t nap = backoff < deadline - now ? backoff : deadline - now;
        fr_hold_poll(NULL, 0, (int)nap); /* a signal cuts it short */
        backoff = backoff * 2 < BACKOFF_MAX_MS ? backoff * 2 : BACKOFF_MAX_MS;
    }
    if (rc == 0) {
        *how = FR_STORE_JOINED;
        c->main = me->role == FR_STORE_ROLE_MAIN;
        c->shut_fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 3);
        *out = c;
        return 0;
    }
    long long ms = (long long)(fr_store__now_ms() - start);
    if (rc == FRPC_EPROTO) /* not a store at all */
        fr_store__errf(errbuf, errlen, "bootstrap store address %s (rank "
                       "%d): %s", addr, me->rank, c->err);
    else if (!retry) { /* refused for good: the store's own words */
        *how = FR_STORE_REFUSED;
        fr_store__errf(errbuf, errlen, "bootstrap store at %s refused rank "
                       "%d: %s", addr, me->rank, c->err);
    } else if (refused && gone_why) {
        /* "still refused ...: Connection refused" told neither */
        *how = FR_STORE_STALE;
        fr_store__errf(errbuf, errlen, "bootstrap store at %s refused rank "
                       "%d (a store from an earlier run?): %s; then it could "
                       "not be reached until %lld ms: %s", addr, me->rank,
                       why, ms, gone_why);
    } else if (refused) {
        *how = FR_STORE_STALE;
        fr_store__errf(errbuf, errlen, "bootstrap store at %s still refused "
                       "rank %d after %lld ms (a store from an earlier run?): "
                       "%s", addr, me->rank, ms, why);
    } else {
        *how = FR_STORE_UNREACHED;
        fr_store__errf(errbuf, errlen, "cannot reach bootstrap store at %s "
                       "after %lld ms: %s", addr, ms, why);
    }
    fr_store_close(c);
    return rc;
}

void fr_store_close(fr_store_client *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    if (c->shut_fd >= 0)
        close(c->shut_fd);
    while (c->pushes) {
        struct held_push *h = c->pushes;
        c->pushes = h->next;
        free(h);
    }
    free(c);
}

void fr_store_interrupt(fr_store_client *c)
{
    if (c && c->shut_fd >= 0)
        shutdown(c->shut_fd, SHUT_RDWR);
}

/* ---- one round trip ----------------------------------------------------- */

static int lost(fr_store_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    return FRPC_EBOOTSTRAP;
}

static int send_all(int fd, struct iovec *iov, int iovcnt, int64_t deadline)
{
    fr_tsan_sent();
    while (iovcnt > 0) {
        if (iov->iov_len == 0) {
            iov++;
            iovcnt--;
            continue;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (fr_store__wait_fd(fd, POLLOUT, deadline) != 0)
                return -1;
            continue;
        }
        if (n <= 0)
            return -1;
        for (size_t done = (size_t)n; done > 0;) {
            size_t k = done < iov->iov_len ? done : iov->iov_len;
            iov->iov_base = (uint8_t *)iov->iov_base + k;
            iov->iov_len -= k;
            done -= k;
            if (iov->iov_len == 0) {
                iov++;
                iovcnt--;
            }
        }
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t len, int64_t deadline)
{
    size_t got = 0;
    while (got < len) {
        if (fr_store__wait_fd(fd, POLLIN, deadline) != 0)
            return -1;
        ssize_t n = recv(fd, (uint8_t *)buf + got, len - got, MSG_DONTWAIT);
        if (n > 0)
            got += (size_t)n;
        else if (n == 0) {
            errno = 0; /* closed by the other side (broken: says so) */
            return -1;
        } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
    }
    fr_tsan_received();
    return 0;
}

/* recv_all for the first bytes of a reply: 1 when deadline passed before
 * any byte came (the stream is still in step: the reply is owed), -1 on
 * any other failure. */
static int recv_reply(int fd, void *buf, size_t len, int64_t deadline)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (fr_store__wait_fd(fd, POLLIN, deadline) != 0) {
        int n = poll(&p, 1, 0); /* it may have come meanwhile */
        if (n == 0)
            return 1;
        if (n < 0)
            return -1;
    }
    return recv_all(fd, buf, len, deadline);
}

/* Reads and drops len bytes of c's stream by deadline: 0, or -1. */
static int skip_bytes(fr_store_client *c, uint32_t len, int64_t deadline)
{
    uint8_t junk[256];
    if (len > FR_STORE_MAX_VALUE)
        return -1;
    while (len) {
        size_t k = len < sizeof(junk) ? len : sizeof(junk);
        if (recv_all(c->fd, junk, k, deadline) != 0)
            return -1;
        len -= (uint32_t)k;
    }
    return 0;
}

/* Reads the value of a pushed frame whose header is rep and keeps it for
 * fr_store_watch: 0, or -1 (broken, or no memory: the stream cannot be
 * trusted to hold every event then). */
static int hold_push(fr_store_client *c, const uint8_t rep[FR_STORE_REP_HDR],
                     int64_t deadline)
{
    uint32_t len = (uint32_t)fr_store__get(rep + 12, 4);
    struct held_push *h;
    if (len > FR_STORE_MAX_VALUE || !(h = malloc(sizeof(*h) + len)))
        return -1;
    h->next = NULL;
    h->num = (int64_t)fr_store__get(rep + 4, 8);
    h->len = len;
    if (recv_all(c->fd, h->value, len, deadline) != 0) {
        free(h);
        return -1;
    }
    if (!c->pushes)
        c->pushes_tail = &c->pushes;
    *c->pushes_tail = h;
    c->pushes_tail = &h->next;
    return 0;
}

/* recv_reply for a reply's header, keeping the events the server pushed
 * ahead of it (store.h, "Pushes") for fr_store_watch: they answer no
 * request. */
static int recv_rep(fr_store_client *c, uint8_t rep[FR_STORE_REP_HDR],
                    int64_t deadline)
{
    for (;;) {
        int r = recv_reply(c->fd, rep, FR_STORE_REP_HDR, deadline);
        if (r || (int32_t)fr_store__get(rep, 4) != FR_STORE_PUSHED)
            return r;
        if (hold_push(c, rep, deadline))
            return -1;
    }
}

/* Reads and drops the replies owed, by deadline: 0, 1 (timed out, some
 * still owed) or -1 (broken). */
static int drop_owed(fr_store_client *c, int64_t deadline)
{
    while (c->owed) {
        uint8_t rep[FR_STORE_REP_HDR];
        int r = recv_rep(c, rep, deadline);
        if (r)
            return r;
        if (skip_bytes(c, (uint32_t)fr_store__get(rep + 12, 4), deadline))
            return -1;
        c->owed--;
    }
    return 0;
}

int64_t fr_store_cap(fr_store_client *c, int64_t deadline_ms)
{
    int64_t old = c ? c->cap : 0;
    if (c)
        c->cap = deadline_ms;
    return old;
}

static bool key_ok(const char *key)
{
    size_t n = key ? strnlen(key, FR_STORE_MAX_KEY + 1) : 0;
    return n >= 1 && n <= FR_STORE_MAX_KEY;
}

/* A short description of a status that came without a message. */
static const char *status_text(int status)
{
    switch (status) {
    case FRPC_ETIMEDOUT:
        return "timed out";
    case FRPC_EPROTO:
        return "the key does not hold a counter";
    case FRPC_ENOMEM:
        return "the bootstrap store is out of memory";
    case FRPC_EINVAL:
        return "refused as invalid by the bootstrap store";
    default:
        return "the bootstrap store refused the request";
    }
}

/*
 * Sends one request and reads its reply by deadline (monotonic ms,
 * INT64_MAX: no limit). Returns the server's status, or FRPC_EBOOTSTRAP
 * when the connection fails (it is then closed), FRPC_ENOMEM; c->err is
 * set on every failure (to the reply's message if it carried one). On
 * status 0, *num gets the reply's number and, if value is not NULL,
 * *value and *vlen its malloc'ed value.
 */
static int exchange_ex(fr_store_client *c, const char *add_key,
                       int64_t *added, uint8_t op, const char *key,
                       int64_t arg, const void *val, size_t len,
                       int64_t deadline, int64_t *num, void **value,
                       size_t *vlen);

static int exchange(fr_store_client *c, uint8_t op, const char *key,
                    int64_t arg, const void *val, size_t len,
                    int64_t deadline, int64_t *num, void **value,
                    size_t *vlen)
{
    return exchange_ex(c, NULL, NULL, op, key, arg, val, len, deadline, num,
                       value, vlen);
}

/* FRPC_ETIMEDOUT for a reply that did not come by the caller's bound. */
static int store_late(fr_store_client *c)
{
    return fail(c, FRPC_ETIMEDOUT, "the bootstrap store did not answer in "
                "time (rank 0, which serves it, stopped or starved, or the "
                "time allowed too short?)");
}

/* Closes c, whose stream failed (errno says how), with the reason. */
static int broken_conn(fr_store_client *c)
{
    /* A keepalive that went unanswered (the store's host down, or the
     * network cut) is not the store's process closing: say which. A
     * reset is what a store that took this rank for lost during a cut
     * answers once the network is back (liveness.c tells it apart). */
    if (errno == ETIMEDOUT || errno == EHOSTUNREACH || errno == ECONNRESET) {
        int e = errno;
        lost(c);
        return fail(c, FRPC_EBOOTSTRAP, "the connection to the bootstrap "
                    "store was lost: %s", strerror(e));
    }
    lost(c);
    return fail(c, FRPC_EBOOTSTRAP,
                "the connection to the bootstrap store was lost");
}

static void req_header(uint8_t hdr[FR_STORE_REQ_HDR], uint8_t op,
                       size_t klen, size_t vlen, int64_t arg)
{
    hdr[0] = op;
    fr_store__put(hdr + 1, (uint16_t)klen, 2);
    fr_store__put(hdr + 3, (uint32_t)vlen, 4);
    fr_store__put(hdr + 7, (uint64_t)arg, 8);
}

/* The reply to the ADD that exchange_ex sent ahead of its request: 0 (its
 * count in *added), 1 (none by the deadline: both replies are owed), 2
 * (the store refused it: *refused is its status, c->err its message; the
 * request's reply is owed), or -1 (broken). */
static int added_reply(fr_store_client *c, int64_t deadline, int64_t *added,
                       int *refused)
{
    uint8_t rep[FR_STORE_REP_HDR];
    int r = recv_rep(c, rep, deadline);
    if (r > 0 && c->cap > 0) {
        c->owed += 2;
        return 1;
    }
    if (r != 0)
        return -1;
    int32_t status = (int32_t)fr_store__get(rep, 4);
    uint32_t rlen = (uint32_t)fr_store__get(rep + 12, 4);
    if (status > 0 || rlen > FR_STORE_MAX_ERR || (status == 0 && rlen))
        return -1;
    if (status == 0) {
        *added = (int64_t)fr_store__get(rep + 4, 8);
        return 0;
    }
    char msg[FR_STORE_MAX_ERR + 1];
    if (recv_all(c->fd, msg, rlen, deadline) != 0)
        return -1;
    msg[rlen] = '\0';
    c->owed++;
    *refused = fail(c, status, "%s", rlen ? msg : status_text(status));
    return 2;
}

/* As exchange, with add_key: an ADD of 1 to add_key goes ahead of the
 * request in the same write, and its count goes to *added (left alone
 * when the ADD was not sent: the stream still owed older replies). */
static int exchange_ex(fr_store_client *c, const char *add_key,
                       int64_t *added, uint8_t op, const char *key,
                       int64_t arg, const void *val, size_t len,
                       int64_t deadline, int64_t *num, void **value,
                       size_t *vlen)
{
    c->sent = false;
    c->garbled[0] = '\0';
    if (c->fd < 0)
        return fail(c, FRPC_EBOOTSTRAP,
                    "the connection to the bootstrap store was lost");
    uint8_t hdr[FR_STORE_REQ_HDR], rep[FR_STORE_REP_HDR];
    size_t klen = strlen(key);
    req_header(hdr, op, klen, len, arg);
    uint8_t add_hdr[FR_STORE_REQ_HDR];
    size_t add_klen = add_key ? strlen(add_key) : 0;
    req_header(add_hdr, FR_STORE_OP_ADD, add_klen, 0, 1);
    struct iovec iov[5] = {{add_hdr, add_key ? sizeof(add_hdr) : 0},
                           {(void *)add_key, add_klen},
                           {hdr, sizeof(hdr)},
                           {(void *)key, klen},
                           {(void *)val, len}};
    int64_t io = fr_store__now_ms() + FR_STORE_IO_TIMEOUT_MS;
    if (c->cap > 0 && c->cap < deadline)
        deadline = c->cap;
    if (c->cap > 0 && c->cap < io)
        io = c->cap;
    if (c->watch_out) { /* a WATCH's answer still to come: not ours */
        c->watch_out = false;
        c->owed++;
    }
    /* LEAVE goes even behind owed replies (the store serves a
     * connection's requests in order), so that a rank whose shutdown
     * ran out of time while rank 0 was stopped is LEFT, not DEAD. */
    int r = op == FR_STORE_OP_LEAVE ? 0 : drop_owed(c, deadline);
    if (r > 0)
        return store_late(c);
    if (r < 0 || send_all(c->fd, iov, 5, io))
        goto broken;
    c->sent = true;
    if (add_key && *added < 0)
        *added = 0; /* sent: counted once the store reads it */
    int refused = 0;
    if (add_key && (r = added_reply(c, deadline, added, &refused)) != 0) {
        if (r < 0)
            goto broken;
        return r == 2 ? refused : store_late(c);
    }
    if (op == FR_STORE_OP_LEAVE && (r = drop_owed(c, deadline)) != 0) {
        if (r < 0)
            goto broken;
        c->owed++;
        return store_late(c);
    }
    r = recv_rep(c, rep, deadline);
    if (r > 0 && c->cap > 0) {
        /* No byte of the reply by the deadline, with the caller bounding
         * its own wait: a stopped or starved store, not a lost one (that
         * closes the connection). Its reply is owed, the connection
         * stays, and the caller decides whether to ask again. */
        c->owed++;
        return store_late(c);
    }
    if (r != 0)
        goto broken;
    int32_t status = (int32_t)fr_store__get(rep, 4);
    uint32_t rlen = (uint32_t)fr_store__get(rep + 12, 4);
    if (status > 0 || rlen > FR_STORE_MAX_VALUE || (rlen && !status && !value) ||
        (status && rlen > FR_STORE_MAX_ERR)) {
        for (size_t i = 0; i < FR_STORE_REP_HDR; i++)
            c->garbled[i] = rep[i] >= 0x20 && rep[i] < 0x7f ? (char)rep[i] : '.';
        c->garbled[FR_STORE_REP_HDR] = '\0';
        errno = 0;
        goto broken;
    }
    *num = (int64_t)fr_store__get(rep + 4, 8);
    if (status != 0) {
        char msg[FR_STORE_MAX_ERR + 1];
        if (recv_all(c->fd, msg, rlen, deadline) != 0)
            goto broken;
        msg[rlen] = '\0';
        return fail(c, status, "%s", rlen ? msg : status_text(status));
    }
    if (!value)
        return 0;
    uint8_t *buf = malloc(rlen ? rlen : 1);
    if (!buf) {
        lost(c); /* the unread value is still in the stream */
        return fail(c, FRPC_ENOMEM, "out of memory");
    }
    if (recv_all(c->fd, buf, rlen, deadline) != 0) {
        free(buf);
        goto broken;
    }
    *value = buf;
    *vlen = rlen;
    return 0;
broken:
    return broken_conn(c);
}

/* exchange() for a request the server may hold wait_ms (0: it answers at
 * once; < 0: no limit); the client gives up FR_STORE_GRACE_MS later. */
static int roundtrip(fr_store_client *c, uint8_t op, const char *key,
                     int64_t arg, const void *val, size_t len, int64_t wait_ms,
                     int64_t *num, void **value, size_t *vlen)
{
    int64_t now = fr_store__now_ms();
    int64_t deadline = wait_ms < 0    ? INT64_MAX
                       : wait_ms == 0 ? now + FR_STORE_IO_TIMEOUT_MS
                                      : now + wait_ms + FR_STORE_GRACE_MS;
    return exchange(c, op, key, arg, val, len, deadline, num, value, vlen);
}

/* ---- operations --------------------------------------------------------- */

const char *fr_store_last_error(const fr_store_client *c)
{
    return c ? c->err : "";
}

int fr_store_last_sent(const fr_store_client *c)
{
    return c && c->sent;
}

int fr_store_set(fr_store_client *c, const char *key, const void *value,
                 size_t len)
{
    int64_t num;
    if (!c || !key_ok(key) || len > FR_STORE_MAX_VALUE || (len && !value))
        return c ? fail(c, FRPC_EINVAL, "invalid argument") : FRPC_EINVAL;
    return roundtrip(c, FR_STORE_OP_SET, key, 0, value, len, 0, &num, NULL,
                     NULL);
}

int fr_store_get(fr_store_client *c, const char *key, int timeout_ms,
                 void **value, size_t *len)
{
    int64_t num;
    if (!c || !key_ok(key) || !value || !len)
        return c ? fail(c, FRPC_EINVAL, "invalid argument") : FRPC_EINVAL;
    *value = NULL;
    *len = 0;
    return roundtrip(c, FR_STORE_OP_GET, key, timeout_ms > 0 ? timeout_ms : 0,
                     NULL, 0, timeout_ms > 0 ? timeout_ms : -1, &num, value,
                     len);
}

int fr_store_add(fr_store_client *c, const char *key, int64_t delta,
                 int64_t *result)
{
    int64_t num = 0;
    if (!c || !key_ok(key))
        return c ? fail(c, FRPC_EINVAL, "invalid argument") : FRPC_EINVAL;
    int rc = roundtrip(c, FR_STORE_OP_ADD, key, delta, NULL, 0, 0, &num, NULL,
                       NULL);
    if (rc == 0 && result)
        *result = num;
    return rc;
}

int fr_store_unarrive(fr_store_client *c, const char *key, int64_t target,
                      int64_t *result)
{
    int64_t num = 0;
    if (!c || !key_ok(key))
        return c ? fail(c, FRPC_EINVAL, "invalid argument") : FRPC_EINVAL;
    int rc = roundtrip(c, FR_STORE_OP_UNARRIVE, key, target, NULL, 0, 0,
                       &num, NULL, NULL);
    if (rc == 0 && result)
        *result = num;
    return rc;
}

/* The 8-byte timeout value of WAIT_GE and WATCH. */
static void put_timeout(uint8_t tmo[8], int timeout_ms)
{
    fr_store__put(tmo, (uint64_t)(timeout_ms > 0 ? timeout_ms : 0), 8);
}

int fr_store_wait_ge(fr_store_client *c, const char *key, int64_t target,
                     int timeout_ms)
{
    int64_t num;
    uint8_t tmo[8];
    if (!c || !key_ok(key))
        return c ? fail(c, FRPC_EINVAL, "invalid argument") : FRPC_EINVAL;
    put_timeout(tmo, timeout_ms);
    return roundtrip(c, FR_STORE_OP_WAIT_GE, key, target, tmo, sizeof(tmo),
                     timeout_ms > 0 ? timeout_ms : -1, &num, NULL, NULL);
}

int fr_store_arrive(fr_store_client *c, const char *key, int64_t target,
                    int timeout_ms, int *added)
{
    int64_t num, count = -1;
    uint8_t tmo[8];
    if (added)
        *added = 0;
    if (!c || !key_ok(key))
        return c ? fail(c, FRPC_EINVAL, "invalid argument") : FRPC_EINVAL;
    put_timeout(tmo, timeout_ms);
    int64_t now = fr_store__now_ms();
    int64_t deadline = timeout_ms > 0 ? now + timeout_ms + FR_STORE_GRACE_MS
                                      : INT64_MAX;
    int rc = exchange_ex(c, key, &count, FR_STORE_OP_WAIT_GE, key, target,
                         tmo, sizeof(tmo), deadline, &num, NULL, NULL);
    if (added)
        *added = count >= 0;
    return rc;
}

int fr_store_barrier(fr_store_client *c, const char *key, int world,
                     int timeout_ms)
{
    if (!c || world < 1)
        return c ? fail(c, FRPC_EINVAL, "invalid argument") : FRPC_EINVAL;
    return fr_store_arrive(c, key, world, timeout_ms, NULL);
}

/* One frame of c's stream by deadline: its status, num and value
 * (malloc'ed and NUL-ended; NULL on an error status, whose message goes
 * to c->err). 0, -1 broken, -2 out of memory. */
static int read_frame(fr_store_client *c, int64_t deadline, int32_t *status,
                      int64_t *num, uint8_t **value, size_t *vlen)
{
    uint8_t rep[FR_STORE_REP_HDR];
    *value = NULL;
    *vlen = 0;
    if (recv_reply(c->fd, rep, sizeof(rep), deadline) != 0)
        return -1;
    *status = (int32_t)fr_store__get(rep, 4);
    *num = (int64_t)fr_store__get(rep + 4, 8);
    uint32_t rlen = (uint32_t)fr_store__get(rep + 12, 4);
    if ((*status > 0 && *status != FR_STORE_PUSHED) ||
        rlen > FR_STORE_MAX_VALUE || (*status < 0 && rlen > FR_STORE_MAX_ERR))
        return -1;
    uint8_t *buf = malloc(rlen + 1);
    if (!buf)
        return -2;
    if (recv_all(c->fd, buf, rlen, deadline) != 0) {
        free(buf);
        return -1;
    }
    buf[rlen] = 0;
    if (*status < 0) {
        fail(c, *status, "%s", rlen ? (char *)buf : status_text(*status));
        free(buf);
        return 0;
    }
    *value = buf;
    *vlen = rlen;
    return 0;
}

static bool readable_now(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* Reads what the server pushed before anything is sent (see store.h): a
 * rank stopped meanwhile gets the events that came after its last answer
 * even when the store has closed since (a request to it would fail
 * first). At most one WATCH of ours is unanswered (watch_out): a call
 * that returned pushed events leaves its answer, already on its way, to
 * the next, which reads and passes over it if it says nothing new. */
int fr_store_watch(fr_store_client *c, uint64_t seen, int timeout_ms,
                   fr_store_event *ev, size_t cap, size_t *n_out,
                   uint64_t *total)
{
    uint8_t hdr[FR_STORE_REQ_HDR], tmo[8];
    if (n_out)
        *n_out = 0;
    if (!c || (cap && !ev) || seen > INT64_MAX)
        return c ? fail(c, FRPC_EINVAL, "invalid argument") : FRPC_EINVAL;
    put_timeout(tmo, timeout_ms);
    req_header(hdr, FR_STORE_OP_WATCH, 0, sizeof(tmo), (int64_t)seen);
    /* Without a limit, no deadline of the client's own: a server that
     * answers late is a stopped or starved rank 0, not a lost one, and
     * giving up would close the connection and take rank 0 for dead. A
     * vanished host is the keepalive's to notice (within liveness_ms,
     * fr_store__tune_socket), and fr_store_interrupt ends the wait when
     * the watcher stops. */
    int64_t deadline = timeout_ms > 0 ? fr_store__now_ms() + timeout_ms +
                                            FR_STORE_GRACE_MS
                                      : INT64_MAX;
    bool mine = false; /* the WATCH unanswered is this call's */
    int r = c->fd < 0 ? 0 : drop_owed(c, deadline);
    if (r > 0)
        return store_late(c);
    if (r < 0)
        return broken_conn(c);
    for (;;) {
        int32_t st = 0;
        int64_t num = 0;
        uint8_t *v;
        size_t vlen, n = 0;
        if (c->pushes) {
            /* held by another request (recv_rep): first, even once the
             * connection is lost */
            struct held_push *h = c->pushes;
            c->pushes = h->next;
            st = FR_STORE_PUSHED;
            num = h->num;
            vlen = h->len;
            v = memmove(h, h->value, h->len); /* owned, as read_frame's */
            r = 0;
        } else {
            if (c->fd < 0)
                return fail(c, FRPC_EBOOTSTRAP,
                            "the connection to the bootstrap store was lost");
            if (!c->watch_out && !readable_now(c->fd)) {
                struct iovec iov[2] = {{hdr, sizeof(hdr)},
                                       {tmo, sizeof(tmo)}};
                if (send_all(c->fd, iov, 2,
                             fr_store__now_ms() + FR_STORE_IO_TIMEOUT_MS))
                    return broken_conn(c);
                c->watch_out = mine = true;
            }
            r = read_frame(c, deadline, &st, &num, &v, &vlen);
        }
        if (r == -2) {
            lost(c); /* the unread value is still in the stream */
            return fail(c, FRPC_ENOMEM, "out of memory");
        }
        if (r)
            return broken_conn(c);
        if (st != FR_STORE_PUSHED) {
            c->watch_out = false; /* the answer to our WATCH */
            if (st != 0 && mine)
                return st;
            if (st != 0)
                continue; /* an earlier call's, timed out */
        }
        if (num >= 0 && (uint64_t)num <= seen) {
            free(v);
            continue; /* nothing this caller has not seen */
        }
        /* The frame holds events num - count .. num - 1 (a page). */
        size_t count = 0;
        r = num < 0 ||
            fr_store__events_decode(v, vlen, 0, NULL, 0, &n, &count) != 0 ||
            count > (uint64_t)num;
        uint64_t from = r ? 0 : (uint64_t)num - count;
        if (!r && from > seen) {
            /* Pushed after events this caller did not take (a smaller
             * cap): the WATCH sent next is answered from seen. */
            free(v);
            continue;
        }
        if (!r && cap)
            r = fr_store__events_decode(v, vlen, (size_t)(seen - from), ev,
                                        cap, &n, &count) != 0;
        free(v);
        if (r) {
            lost(c);
            return fail(c, FRPC_EBOOTSTRAP, "malformed events from the "
                        "bootstrap store");
        }
        if (n_out)
            *n_out = n;
        if (total)
            *total = cap ? seen + n : (uint64_t)num;
        return 0;
    }
}

int fr_store_report_gone(const char *host, uint16_t port, int timeout_ms,
                         const fr_store_ident *launcher, const char *why,
                         int *poisoned, char *errbuf, size_t errlen)
{
    if (poisoned)
        *poisoned = 0;
    if (!launcher || !why) {
        fr_store__errf(errbuf, errlen, "bootstrap store: a launcher and "
                       "its words are required");
        return FRPC_EINVAL;
    }
    fr_store_ident me = *launcher;
    me.role = FR_STORE_ROLE_LAUNCHER;
    me.own_server = NULL;
    fr_store_client *c;
    int rc = fr_store_connect(host, port, timeout_ms, &me, &c, errbuf,
                              errlen);
    if (rc)
        return rc;
    size_t len = strnlen(why, FR_STORE_GONE_MAX);
    int64_t num = 0;
    rc = roundtrip(c, FR_STORE_OP_GONE, "", 0, why, len, 0, &num, NULL,
                   NULL);
    if (rc)
        fr_store__errf(errbuf, errlen, "bootstrap store: %s",
                       fr_store_last_error(c));
    else if (poisoned)
        *poisoned = num == 1;
    fr_store_close(c);
    return rc;
}

int fr_store_leave(fr_store_client *c)
{
    int64_t num;
    if (!c || !c->main)
        return c ? fail(c, FRPC_EINVAL, "only a MAIN connection can leave")
                 : FRPC_EINVAL;
    return roundtrip(c, FR_STORE_OP_LEAVE, "", 0, NULL, 0, 0, &num, NULL,
                     NULL);
}
