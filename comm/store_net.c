/*
 * Bootstrap store: the TCP plumbing of both sides (interface in
 * store_proto.h): the server's listening socket, the client's connect
 * attempts, socket tuning, and bounded waits on a socket. No protocol here.
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

/* A connect keeps fresh attempts going: a SYN that a full listen queue
 * dropped (strangers flooding the store's port) is sent again by the
 * kernel only 1, 3, 7, 15 s later, and joining ranks waited that long
 * (starts of 4 and 13 s under a flood, probe). A new attempt every
 * DIAL_FRESH_MS gets in soon after the queue has room; the first attempt
 * is kept to the deadline, so a network slower than that still answers
 * it. Without a flood the first attempt connects at once and no other
 * is made. */
#define DIAL_FRESH_MS 250
#define DIAL_SLOTS 4 /* the first attempt and up to 3 fresh ones */

/* Starts a non-blocking connect to ai: the socket, or -1 with *err. */
static int dial_start(const struct addrinfo *ai, int *err)
{
    int fd = socket(ai->ai_family,
                    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS)
        return fd;
    *err = errno;
    close(fd);
    return -1;
}

/* Takes fds[i] out of the n in fds, keeping the others' order. */
static int dial_take(int *fds, int *n, int i)
{
    int fd = fds[i];
    for (int k = i + 1; k < *n; k++)
        fds[k - 1] = fds[k];
    (*n)--;
    return fd;
}

/* Connects to ai by deadline (above): a connected non-blocking socket, or
 * -1 with *err (ETIMEDOUT at the deadline; a refusal as soon as every
 * attempt made was refused). */
static int dial_one(const struct addrinfo *ai, int64_t deadline, int *err)
{
    int fds[DIAL_SLOTS], n = 0, won = -1;
    int64_t next = 0; /* when to start a fresh attempt */
    *err = ETIMEDOUT;
    for (;;) {
        int64_t now = fr_store__now_ms();
        if (now >= next && (n == 0 || now < deadline)) {
            int fd = dial_start(ai, err);
            if (fd >= 0) {
                if (n == DIAL_SLOTS)
                    close(dial_take(fds, &n, 1)); /* the oldest fresh */
                fds[n++] = fd;
            }
            next = now + DIAL_FRESH_MS;
        }
        if (n == 0)
            break;
        struct pollfd p[DIAL_SLOTS];
        for (int i = 0; i < n; i++)
            p[i] = (struct pollfd){.fd = fds[i], .events = POLLOUT};
        int64_t until = next < deadline ? next : deadline;
        int rc = fr_hold_poll(p, (nfds_t)n, until > now ? (int)(until - now)
                                                        : 0);
        if (rc < 0 && errno != EINTR) {
            *err = errno;
            break;
        }
        for (int i = n - 1; rc > 0 && i >= 0; i--) {
            if (!p[i].revents)
                continue;
            int e = 0;
            socklen_t el = sizeof(e);
            if (getsockopt(fds[i], SOL_SOCKET, SO_ERROR, &e, &el) != 0)
                e = errno;
            if (e == 0 && won < 0) {
                won = dial_take(fds, &n, i);
            } else if (e != 0) {
                *err = e;
                close(dial_take(fds, &n, i));
            }
        }
        /* At the deadline the attempts were still polled once. */
        if (won >= 0 || n == 0 || now >= deadline)
            break;
    }
    if (won < 0 && n > 0)
        *err = ETIMEDOUT; /* attempts still under way at the deadline */
    while (n > 0)
        close(dial_take(fds, &n, n - 1));
    return won;
}

/* One connect (dial_one) to every address of host:port in turn, each
 * bounded by deadline. Returns a connected blocking socket, or -1 with
 * *why set (static text). */
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
        int err = 0;
        fd = dial_one(ai, deadline, &err);
        if (fd >= 0 && fcntl(fd, F_SETFL, 0) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
        if (fd < 0)
            *why = strerror(err);
    }
    freeaddrinfo(res);
    if (fd >= 0)
        fr_store__tune_socket(fd, liveness_ms);
    return fd;
}
