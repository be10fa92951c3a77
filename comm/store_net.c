/*
 * Bootstrap store: the TCP plumbing of both sides (interface in
 * store_proto.h): the server's listening socket, the client's connect
 * attempt, socket tuning, and bounded waits on a socket. No protocol here.
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
#include <sys/socket.h>
#include <unistd.h>

#include "comm/sha256.h"
#include "comm/signal_hold.h"
#include "comm/store_proto.h"

/* Both sides: TCP_NODELAY and keepalive. With TCP_USER_TIMEOUT set,
 * Linux gives a connection up once nothing came from the peer for
 * liveness_ms (default 5 s) while a probe or data is unanswered: the
 * clock starts at the last packet received, not at the outage. So an idle
 * connection is probed every second (idle 1 s, interval 1 s): the last
 * packet is at most a second old when the network goes, and a peer back
 * after an outage answers the next probe within a second (after an ARP
 * lookup that may take another: the neighbour entry may have failed
 * meanwhile). An outage shorter than liveness_ms - 3 s is ridden out
 * (2 s of 6 s: run_host_cutoff.sh); one of liveness_ms is not; between,
 * it depends on the phase (with 5 s: 2.5 s lost a rank 1 of 3 times, 3 s
 * 2 of 3; with idle 2 s, as before, 3 s 4 of 5). Failures are ignored
 * (best effort). */
void fr_store__tune_socket(int fd, int liveness_ms)
{
    int one = 1, idle = 1, intvl = 1;
    if (liveness_ms <= 0)
        liveness_ms = 5000;
    if (liveness_ms < 4000)
        liveness_ms = 4000;
    /* Unanswered probes are counted too, where TCP_USER_TIMEOUT is not
     * known (before Linux 2.6.37): about liveness_ms. */
    int cnt = liveness_ms / 1000 - idle;
    unsigned user_timeout_ms = (unsigned)liveness_ms;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
                     sizeof(user_timeout_ms));
}

/* Waits until fd is ready for ev or deadline (monotonic ms, INT64_MAX: no
 * limit) passes. Returns 0 when ready, -1 on timeout or error. */
int fr_store__wait_fd(int fd, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - fr_store__now_ms();
        int ms = deadline == INT64_MAX ? -1
                 : left <= 0           ? 0
                 : left > 1000000000   ? 1000000000
                                       : (int)left;
        struct pollfd p = {.fd = fd, .events = ev};
        int rc = fr_hold_poll(&p, 1, ms); /* signals held in init come */
        if (rc > 0)
            return 0; /* ready, or an error the next call will report */
        if (rc == 0 || errno != EINTR)
            return -1;
    }
}

/* The port of an IPv4 or IPv6 address. */
static uint16_t port_in(const struct sockaddr_storage *ss)
{
    return ntohs(ss->ss_family == AF_INET6
                     ? ((const struct sockaddr_in6 *)ss)->sin6_port
                     : ((const struct sockaddr_in *)ss)->sin_port);
}

int fr_store__listen(const char *host, uint16_t port, int *lfd,
                     uint16_t *bound, char *errbuf, size_t errlen)
{
    char portstr[8], addr[300];
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;

    fr_store__fmt_addr(addr, sizeof(addr), host, port);
    snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0) {
        fr_store__errf(errbuf, errlen, "cannot listen on %s: %s", addr,
                       gai_strerror(gai));
        return FRPC_EBOOTSTRAP;
    }
    int err = EADDRNOTAVAIL;
    *lfd = -1;
    struct sockaddr_storage ss;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family,
                        ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        ai->ai_protocol);
        int one = 1;
        socklen_t sl = sizeof(ss);
        if (fd >= 0 &&
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
            bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            listen(fd, 1024) == 0 &&
            getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
            *lfd = fd;
            break;
        }
        err = errno;
        if (fd >= 0)
            close(fd);
    }
    freeaddrinfo(res);
    if (*lfd < 0) {
        fr_store__errf(errbuf, errlen, "cannot listen on %s: %s", addr,
                       strerror(err));
        return FRPC_EBOOTSTRAP;
    }
    *bound = port_in(&ss);
    return 0;
}

uint64_t fr_store__end_key(int fd, bool peer)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int rc = peer ? getpeername(fd, (struct sockaddr *)&ss, &sl)
                  : getsockname(fd, (struct sockaddr *)&ss, &sl);
    uint8_t end[2 + 16 + 2], digest[FR_SHA256_LEN];
    size_t n;
    uint64_t key = 0;

    if (rc != 0 || (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
        return 0;
    end[0] = ss.ss_family == AF_INET6 ? 6 : 4;
    end[1] = 0;
    if (ss.ss_family == AF_INET6) {
        memcpy(end + 2, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
        n = 18;
    } else {
        memcpy(end + 2, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        n = 6;
    }
    uint16_t port = port_in(&ss);
    end[n] = (uint8_t)(port >> 8);
    end[n + 1] = (uint8_t)port;
    fr_sha256_digest(end, n + 2, digest);
    for (int i = 0; i < 8; i++)
        key = key << 8 | digest[i];
    return key ? key : 1;
}

/* One attempt at every address of host:port, each bounded by deadline.
 * Returns a connected blocking socket, or -1 with *why set (static text). */
int fr_store__dial(const char *host, const char *portstr,
                       int64_t deadline, int liveness_ms, const char **why)
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
                if (fr_store__wait_fd(fd, POLLOUT, deadline) == 0 &&
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
        fr_store__tune_socket(fd, liveness_ms);
    return fd;
}
