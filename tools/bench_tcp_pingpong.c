/*
 * fabrpc-bench --baseline with --progress blocking: a blocking TCP
 * ping-pong over 127.0.0.1, the yardstick for fabrpc's blocking mode.
 *
 * Both ends sleep in recv(2) between messages, so each message wakes a
 * sleeping thread, as in fabrpc's blocking mode; fi_pingpong busy-polls
 * and is the yardstick for the other modes. A forked child echoes size
 * bytes; the parent times each round trip.
 *
 * The busy variant spins on non-blocking recv(2) instead. The difference
 * between the two is what two wake-ups cost on this machine: a floor
 * under any blocking mode that sleeps once per message, fabrpc's
 * included, over and above its busy-polling round trip.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define IO_TIMEOUT_S 30 /* a stuck peer ends the run instead of hanging */

int bench_xfer(int fd, void *buf, size_t len, int sending)
{
    uint8_t *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t n = sending ? send(fd, p + done, len - done, MSG_NOSIGNAL)
                            : recv(fd, p + done, len - done, 0);
        if (n > 0)
            done += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            return -1;
    }
    return 0;
}

static void tune(int fd)
{
    int one = 1;
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* As bench_xfer when receiving, but spinning on a non-blocking recv(2)
 * instead of sleeping; gives up (-1, errno ETIMEDOUT) after IO_TIMEOUT_S. */
static int recv_spin(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    size_t done = 0;
    time_t give_up = time(NULL) + IO_TIMEOUT_S;
    for (unsigned spins = 0; done < len; spins++) {
        ssize_t n = recv(fd, p + done, len - done, MSG_DONTWAIT);
        if (n > 0)
            done += (size_t)n;
        else if (n == 0 || (errno != EAGAIN && errno != EINTR))
            return -1;
        else if ((spins & 0xffff) == 0 && time(NULL) > give_up) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
    return 0;
}

static int recv_msg(int fd, void *buf, size_t len, int busy)
{
    return busy ? recv_spin(fd, buf, len) : bench_xfer(fd, buf, len, 0);
}

/* The child: accept one connection, echo rounds messages of len bytes. */
static void echo_child(int lfd, size_t len, long rounds, int busy)
{
    uint8_t *buf = malloc(len ? len : 1);
    int fd = accept(lfd, NULL, NULL);
    if (!buf || fd < 0)
        _exit(1);
    tune(fd);
    for (long i = 0; i < rounds; i++)
        if (recv_msg(fd, buf, len, busy) || bench_xfer(fd, buf, len, 1))
            _exit(1);
    _exit(0);
}

int bench_tcp_pingpong(size_t size, long iters, int busy, double *p50,
                       double *p99)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    long warm = iters / 10 + 1, rounds = warm + iters;
    double *t = calloc((size_t)iters, sizeof(*t));
    uint8_t *buf = malloc(size ? size : 1);
    int lfd = socket(AF_INET, SOCK_STREAM, 0), fd = -1, rc = -1;
    pid_t child = -1;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!t || !buf || lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sl) ||
        listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&sa, &sl))
        goto out;
    if ((child = fork()) < 0)
        goto out;
    if (child == 0)
        echo_child(lfd, size, rounds, busy);
    if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
        connect(fd, (struct sockaddr *)&sa, sl))
        goto out;
    tune(fd);
    memset(buf, 0x5a, size);
    for (long i = 0; i < rounds; i++) {
        double t0 = bench_now_us();
        if (bench_xfer(fd, buf, size, 1) || recv_msg(fd, buf, size, busy))
            goto out;
        if (i >= warm)
            t[i - warm] = bench_now_us() - t0;
    }
    *p50 = bench_quantile(t, iters, 0.5);
    *p99 = bench_quantile(t, iters, 0.99);
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "fabrpc-bench: %s TCP ping-pong of %zu B failed: "
                        "%s\n", busy ? "busy" : "blocking", size,
                strerror(errno));
    if (fd >= 0)
        close(fd);
    if (lfd >= 0)
        close(lfd);
    if (child > 0) {
        if (rc)
            kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    free(t);
    free(buf);
    return rc;
}
