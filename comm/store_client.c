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

#include "comm/store_proto.h"

#define FR_STORE_GRACE_MS 5000
#define FR_STORE_IO_TIMEOUT_MS 60000
#define FR_STORE_SINGLE_ATTEMPT_MS 1000
#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 500

struct fr_store_client {
    int fd; /* -1 once the connection is lost */
};

/* Waits until fd is ready for ev or deadline (monotonic ms, INT64_MAX: no
 * limit) passes. Returns 0 when ready, -1 on timeout or error. */
static int wait_fd(int fd, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - fr_store__now_ms();
        int ms = deadline == INT64_MAX ? -1
                 : left <= 0           ? 0
                 : left > 1000000000   ? 1000000000
                                       : (int)left;
        struct pollfd p = {.fd = fd, .events = ev};
        int rc = poll(&p, 1, ms);
        if (rc > 0)
            return 0; /* ready, or an error the next call will report */
        if (rc == 0 || errno != EINTR)
            return -1;
    }
}

/* ---- connect ------------------------------------------------------------ */

static void set_sockopts(int fd)
{
    int one = 1, idle = 30, intvl = 10, cnt = 3;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* One attempt at every address of host:port, each bounded by deadline.
 * Returns a connected blocking socket, or -1 with *why set (static text). */
static int try_connect(const char *host, const char *portstr,
                       int64_t deadline, const char **why)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0) {
        *why = gai_strerror(gai);
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family,
                    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd < 0) {
            *why = strerror(errno);
            continue;
        }
        int err = 0;
        socklen_t el = sizeof(err);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            err = errno;
            if (err == EINPROGRESS) {
                err = ETIMEDOUT;
                if (wait_fd(fd, POLLOUT, deadline) == 0 &&
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
                    err = errno;
            }
        }
        if (err == 0 && fcntl(fd, F_SETFL, 0) != 0)
            err = errno;
        if (err != 0) {
            *why = strerror(err);
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd >= 0)
        set_sockopts(fd);
    return fd;
}

int fr_store_connect(const char *host, uint16_t port, int timeout_ms,
                     fr_store_client **out, char *errbuf, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!host || !*host || port == 0 || !out) {
        fr_store__errf(errbuf, errlen,
                       "bootstrap store: host, port and out are required");
        return FRPC_EINVAL;
    }
    fr_store_client *c = malloc(sizeof(*c));
    if (!c)
        return FRPC_ENOMEM;
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
    int64_t start = fr_store__now_ms();
    int64_t deadline = start + (timeout_ms > 0 ? timeout_ms : 0);
    int64_t backoff = BACKOFF_MIN_MS;
    const char *why = "unknown error";
    for (;;) {
        int64_t now = fr_store__now_ms();
        c->fd = try_connect(host, portstr,
                            timeout_ms > 0 ? deadline
                                           : now + FR_STORE_SINGLE_ATTEMPT_MS,
                            &why);
        now = fr_store__now_ms();
        if (c->fd >= 0 || now >= deadline)
            break;
        int64_t nap = backoff < deadline - now ? backoff : deadline - now;
        struct timespec ts = {.tv_sec = nap / 1000,
                              .tv_nsec = (nap % 1000) * 1000000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        backoff = backoff * 2 < BACKOFF_MAX_MS ? backoff * 2 : BACKOFF_MAX_MS;
    }
    if (c->fd < 0) {
        char addr[300];
        fr_store__fmt_addr(addr, sizeof(addr), host, port);
        fr_store__errf(errbuf, errlen,
                       "cannot reach bootstrap store at %s after %lld ms: %s",
                       addr, (long long)(fr_store__now_ms() - start), why);
        free(c);
        return FRPC_EBOOTSTRAP;
    }
    *out = c;
    return 0;
}

void fr_store_close(fr_store_client *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c);
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
            if (wait_fd(fd, POLLOUT, deadline) != 0)
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
        if (wait_fd(fd, POLLIN, deadline) != 0)
            return -1;
        ssize_t n = recv(fd, (uint8_t *)buf + got, len - got, MSG_DONTWAIT);
        if (n > 0)
            got += (size_t)n;
        else if (n == 0 || (errno != EINTR && errno != EAGAIN &&
                            errno != EWOULDBLOCK))
            return -1;
    }
    return 0;
}

static bool key_ok(const char *key)
{
    size_t n = key ? strnlen(key, FR_STORE_MAX_KEY + 1) : 0;
    return n >= 1 && n <= FR_STORE_MAX_KEY;
}

/*
 * Sends one request and reads its reply. wait_ms is how long the server may
 * hold the request (0: it answers at once; < 0: no limit). Returns the
 * server's status, or FRPC_EBOOTSTRAP when the connection fails (it is then
 * closed), FRPC_ENOMEM. On status 0, *num gets the reply's number and, if
 * value is not NULL, *value and *vlen its malloc'ed value.
 */
static int roundtrip(fr_store_client *c, uint8_t op, const char *key,
                     int64_t arg, const void *val, size_t len, int64_t wait_ms,
                     int64_t *num, void **value, size_t *vlen)
{
    if (c->fd < 0)
        return FRPC_EBOOTSTRAP;
    uint8_t hdr[FR_STORE_REQ_HDR], rep[FR_STORE_REP_HDR];
    size_t klen = strlen(key);
    hdr[0] = op;
    fr_store__put(hdr + 1, (uint16_t)klen, 2);
    fr_store__put(hdr + 3, (uint32_t)len, 4);
    fr_store__put(hdr + 7, (uint64_t)arg, 8);
    struct iovec iov[3] = {{hdr, sizeof(hdr)},
                           {(void *)key, klen},
                           {(void *)val, len}};
    int64_t now = fr_store__now_ms();
    if (send_all(c->fd, iov, 3, now + FR_STORE_IO_TIMEOUT_MS) != 0)
        return lost(c);
    int64_t deadline = wait_ms < 0 ? INT64_MAX
                       : wait_ms == 0
                           ? fr_store__now_ms() + FR_STORE_IO_TIMEOUT_MS
                           : fr_store__now_ms() + wait_ms + FR_STORE_GRACE_MS;
    if (recv_all(c->fd, rep, sizeof(rep), deadline) != 0)
        return lost(c);
    int32_t status = (int32_t)fr_store__get(rep, 4);
    uint32_t rlen = (uint32_t)fr_store__get(rep + 12, 4);
    if (status > 0 || rlen > FR_STORE_MAX_VALUE || (rlen && !value) ||
        (rlen && status))
        return lost(c);
    *num = (int64_t)fr_store__get(rep + 4, 8);
    if (status != 0 || !value)
        return status;
    uint8_t *buf = malloc(rlen ? rlen : 1);
    if (!buf) {
        lost(c); /* the unread value is still in the stream */
        return FRPC_ENOMEM;
    }
    if (recv_all(c->fd, buf, rlen, deadline) != 0) {
        free(buf);
        return lost(c);
    }
    *value = buf;
    *vlen = rlen;
    return 0;
}

/* ---- operations --------------------------------------------------------- */

int fr_store_set(fr_store_client *c, const char *key, const void *value,
                 size_t len)
{
    int64_t num;
    if (!c || !key_ok(key) || len > FR_STORE_MAX_VALUE || (len && !value))
        return FRPC_EINVAL;
    return roundtrip(c, FR_STORE_OP_SET, key, 0, value, len, 0, &num, NULL,
                     NULL);
}

int fr_store_get(fr_store_client *c, const char *key, int timeout_ms,
                 void **value, size_t *len)
{
    int64_t num;
    if (!c || !key_ok(key) || !value || !len)
        return FRPC_EINVAL;
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
        return FRPC_EINVAL;
    int rc = roundtrip(c, FR_STORE_OP_ADD, key, delta, NULL, 0, 0, &num, NULL,
                       NULL);
    if (rc == 0 && result)
        *result = num;
    return rc;
}

int fr_store_wait_ge(fr_store_client *c, const char *key, int64_t target,
                     int timeout_ms)
{
    int64_t num;
    uint8_t tmo[8];
    if (!c || !key_ok(key))
        return FRPC_EINVAL;
    fr_store__put(tmo, (uint64_t)(timeout_ms > 0 ? timeout_ms : 0), 8);
    return roundtrip(c, FR_STORE_OP_WAIT_GE, key, target, tmo, sizeof(tmo),
                     timeout_ms > 0 ? timeout_ms : -1, &num, NULL, NULL);
}

int fr_store_barrier(fr_store_client *c, const char *key, int world,
                     int timeout_ms)
{
    if (world < 1)
        return FRPC_EINVAL;
    int rc = fr_store_add(c, key, 1, NULL);
    return rc ? rc : fr_store_wait_ge(c, key, world, timeout_ms);
}
