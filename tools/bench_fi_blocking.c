/*
 * fabrpc-bench --baseline with --progress blocking: a ping-pong over raw
 * libfabric on fabrpc's provider, both ends sleeping in fi_cq_sread.
 *
 * tcp_pingpong is the kernel's blocking path and fi_pingpong the provider
 * busy-polled; this is the provider's own blocking path, i.e. the floor
 * for fabrpc's blocking mode on that provider. A forked child echoes size
 * bytes; the parent times each round trip. Each process opens its fabric
 * only after the fork (see bench_fi.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "bench.h"
#include "bench_fi.h"

typedef struct side {
    bench_fi fi;              /* the endpoint, and what failed */
    struct fi_context2 send_ctx, recv_ctx; /* FI_CONTEXT2 mode */
    int send_busy, recv_busy;
    uint8_t *sbuf, *rbuf;
    size_t len;
    int no_wait;              /* the CQ has no wait object at all */
} side;

static int fail(side *s, const char *what, long ret)
{
    return bench_fi_fail(&s->fi, what, ret);
}

/* A CQ that fi_cq_sread can sleep on: an fd if the provider has one (as
 * fabrpc asks for), else whatever it has; shm refuses an fd. */
static int open_cq(side *s)
{
    static int noted;
    struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT,
                              .wait_obj = FI_WAIT_FD};
    if (fi_cq_open(s->fi.domain, &attr, &s->fi.cq, NULL) == 0)
        return 0;
    attr.wait_obj = FI_WAIT_UNSPEC;
    int ret = fi_cq_open(s->fi.domain, &attr, &s->fi.cq, NULL);
    if (ret) {
        s->fi.cq = NULL;
        s->no_wait = 1;
        return fail(s, "fi_cq_open (no wait object: FI_WAIT_FD and "
                       "FI_WAIT_UNSPEC refused)", ret);
    }
    /* The provider writes back what it chose. shm 1.17 picks
     * FI_WAIT_YIELD, a sched_yield loop: its rows then measure
     * yield-polling, not a sleep, and the reader should know. */
    if (attr.wait_obj == FI_WAIT_YIELD && !strcmp(s->fi.role, "parent") &&
        !noted++)
        fprintf(stderr, "fabrpc-bench: note: %s has no fd to sleep on; "
                        "fi_blocking_pingpong waits by FI_WAIT_YIELD "
                        "(sched_yield, not a sleep)\n",
                s->fi.info->fabric_attr->prov_name);
    return 0;
}

/* An RDM endpoint with FI_MSG on prov, the hints fabrpc uses (minus RMA)
 * so that the same provider answers. */
static int open_side(side *s, const char *prov)
{
    if (bench_fi_open_msg_domain(&s->fi, prov) || open_cq(s) ||
        bench_fi_open_ep(&s->fi))
        return -1;
    return 0;
}

/* Takes one completion, sleeping in fi_cq_sread when sleep is set, and
 * marks its operation done. Without sleep, none waiting is fine. */
static int reap_one(side *s, int sleep)
{
    struct fi_cq_entry e;
    double deadline = bench_now_us() + BENCH_FI_IO_TIMEOUT_S * 1e6;
    for (;;) {
        ssize_t n = sleep ? fi_cq_sread(s->fi.cq, &e, 1, NULL,
                                        BENCH_FI_IO_TIMEOUT_S * 1000)
                          : fi_cq_read(s->fi.cq, &e, 1);
        if (n == 1) {
            if (e.op_context == &s->send_ctx)
                s->send_busy = 0;
            else
                s->recv_busy = 0;
            return 0;
        }
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry ee = {0};
            fi_cq_readerr(s->fi.cq, &ee, 0);
            return fail(s, "completion", ee.err ? ee.err : FI_EOTHER);
        }
        if (n != -FI_EAGAIN && n != -FI_EINTR)
            return fail(s, sleep ? "fi_cq_sread" : "fi_cq_read", n);
        if (!sleep)
            return 0;
        /* sread may wake early (a signal, a spurious wakeup) */
        if (bench_now_us() > deadline)
            return fail(s, "fi_cq_sread (peer silent for 30 s)",
                        -FI_ETIMEDOUT);
    }
}

/* Sleeps until the send (and, with recv, the receive) completed. */
static int await(side *s, int recv)
{
    while (s->send_busy || (recv && s->recv_busy))
        if (reap_one(s, 1))
            return -1;
    return 0;
}

/* Posts our receive (sending 0) or send. -FI_EAGAIN means the provider's
 * queue is full: reap to let it drain. */
static int post(side *s, int sending)
{
    for (;;) {
        ssize_t ret = sending ? fi_send(s->fi.ep, s->sbuf, s->len, NULL,
                                        s->fi.peer, &s->send_ctx)
                              : fi_recv(s->fi.ep, s->rbuf, s->len, NULL,
                                        FI_ADDR_UNSPEC, &s->recv_ctx);
        if (ret == 0) {
            *(sending ? &s->send_busy : &s->recv_busy) = 1;
            return 0;
        }
        if (ret != -FI_EAGAIN)
            return fail(s, sending ? "fi_send" : "fi_recv", ret);
        if (reap_one(s, 0))
            return -1;
    }
}

static void report(const side *s, const char *prov, size_t size)
{
    fprintf(stderr, "fabrpc-bench: raw libfabric blocking ping-pong over %s "
                    "of %zu B (%s): %s: %s\n",
            prov, size, s->fi.role, s->fi.what ? s->fi.what : "?",
            fi_strerror(s->fi.err));
}

/* The child: receive, repost (before the parent's next message can come),
 * echo; then wait for the parent to hang up before tearing down, so that
 * the last message is not cut off. Exit 0, 1 (failed) or 2 (no wait). */
static void echo_child(int fd, const char *prov, size_t size, long rounds)
{
    side s = {.fi.role = "child", .len = size};
    char c;
    s.sbuf = malloc(size ? size : 1);
    s.rbuf = malloc(size ? size : 1); /* reposted before the echo leaves */
    if (!s.sbuf || !s.rbuf)
        _exit(1);
    memset(s.sbuf, 0xa5, size);
    if (open_side(&s, prov) || post(&s, 0) || bench_fi_swap_names(&s.fi, fd))
        goto out;
    for (long i = 0; i < rounds; i++)
        if (await(&s, 1) || (i + 1 < rounds && post(&s, 0)) ||
            post(&s, 1) || await(&s, 0))
            goto out;
    while (read(fd, &c, 1) < 0 && errno == EINTR)
        ;
    bench_fi_close(&s.fi);
    _exit(0);
out:
    /* The parent says what went wrong unless it was only here. */
    if (!s.no_wait)
        report(&s, prov, size);
    bench_fi_close(&s.fi);
    _exit(s.no_wait ? 2 : 1);
}

int bench_fi_blocking(const char *provider, size_t size, long iters,
                      double *p50, double *p99)
{
    long warm = iters / 10 + 1, rounds = warm + iters;
    double *t = calloc((size_t)iters, sizeof(*t));
    side s = {.fi.role = "parent", .len = size};
    int fd = -1, rc = -1;
    pid_t child = -1;

    /* Single host: keep tcp on loopback unless told otherwise (fabrpc-run
     * sets it too; set it here for both processes before either starts
     * libfabric's providers). */
    setenv("FI_TCP_IFACE", "lo", 0);
    s.sbuf = malloc(size ? size : 1);
    s.rbuf = malloc(size ? size : 1);
    if (!t || !s.sbuf || !s.rbuf) {
        fail(&s, "malloc", -FI_ENOMEM);
        goto out;
    }
    if ((child = bench_fi_fork(&fd)) < 0) {
        fail(&s, "socketpair/fork", errno);
        goto out;
    }
    if (child == 0)
        echo_child(fd, provider, size, rounds);
    memset(s.sbuf, 0x5a, size);
    if (open_side(&s, provider) || post(&s, 0) ||
        bench_fi_swap_names(&s.fi, fd))
        goto out;
    for (long i = 0; i < rounds; i++) {
        double t0 = bench_now_us();
        if (post(&s, 1) || await(&s, 1))
            goto out;
        if (i >= warm)
            t[i - warm] = bench_now_us() - t0;
        if (i + 1 < rounds && post(&s, 0))
            goto out;
    }
    *p50 = bench_quantile(t, iters, 0.5);
    *p99 = bench_quantile(t, iters, 0.99);
    rc = 0;
out:
    if (rc)
        report(&s, provider, size);
    bench_fi_close(&s.fi);
    if (fd >= 0)
        close(fd); /* the child's cue to tear down */
    if (child > 0)
        bench_fi_reap(child, rc != 0);
    free(t);
    free(s.sbuf);
    free(s.rbuf);
    return rc ? (s.no_wait ? 1 : -1) : 0;
}
