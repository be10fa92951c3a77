/*
 * fabrpc-bench --baseline with --progress blocking: a ping-pong over raw
 * libfabric on fabrpc's provider, both ends sleeping in fi_cq_sread.
 *
 * tcp_pingpong is the kernel's blocking path and fi_pingpong the provider
 * busy-polled; this is the provider's own blocking path, i.e. the floor
 * for fabrpc's blocking mode on that provider. A forked child echoes size
 * bytes; the parent times each round trip. Each process opens its fabric
 * only after the fork (libfabric is not fork safe); the endpoint names
 * cross a socketpair made before it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "bench.h"

#define IO_TIMEOUT_S 30  /* a stuck peer ends the run instead of hanging */
#define REAP_LIMIT_US 10e6 /* the child's teardown after a good run */
#define NAME_MAX_LEN 1024

typedef struct side {
    const char *role;         /* "parent" or "child", for messages */
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    fi_addr_t peer;
    struct fi_context2 send_ctx, recv_ctx; /* FI_CONTEXT2 mode */
    int send_busy, recv_busy;
    uint8_t *sbuf, *rbuf;
    size_t len;
    const char *what;         /* the call that failed */
    int err;                  /* its error, positive (fi_strerror) */
    int no_wait;              /* the CQ has no wait object at all */
} side;

static int fail(side *s, const char *what, long ret)
{
    s->what = what;
    s->err = ret < 0 ? (int)-ret : (int)ret;
    return -1;
}

/* A CQ that fi_cq_sread can sleep on: an fd if the provider has one (as
 * fabrpc asks for), else whatever it has; shm refuses an fd. */
static int open_cq(side *s)
{
    static int noted;
    struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT,
                              .wait_obj = FI_WAIT_FD};
    if (fi_cq_open(s->domain, &attr, &s->cq, NULL) == 0)
        return 0;
    attr.wait_obj = FI_WAIT_UNSPEC;
    int ret = fi_cq_open(s->domain, &attr, &s->cq, NULL);
    if (ret) {
        s->cq = NULL;
        s->no_wait = 1;
        return fail(s, "fi_cq_open (no wait object: FI_WAIT_FD and "
                       "FI_WAIT_UNSPEC refused)", ret);
    }
    /* The provider writes back what it chose. shm 1.17 picks
     * FI_WAIT_YIELD, a sched_yield loop: its rows then measure
     * yield-polling, not a sleep, and the reader should know. */
    if (attr.wait_obj == FI_WAIT_YIELD && !strcmp(s->role, "parent") &&
        !noted++)
        fprintf(stderr, "fabrpc-bench: note: %s has no fd to sleep on; "
                        "fi_blocking_pingpong waits by FI_WAIT_YIELD "
                        "(sched_yield, not a sleep)\n",
                s->info->fabric_attr->prov_name);
    return 0;
}

/* fi_getinfo .. fi_enable for an RDM endpoint with FI_MSG on prov, the
 * hints fabrpc uses (minus RMA) so that the same provider answers. */
static int open_side(side *s, const char *prov)
{
    struct fi_info *hints = fi_allocinfo();
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    int ret;

    if (!hints || !(hints->fabric_attr->prov_name = strdup(prov))) {
        fi_freeinfo(hints);
        return fail(s, "fi_allocinfo", -FI_ENOMEM);
    }
    hints->caps = FI_MSG;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                                  FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &s->info);
    fi_freeinfo(hints); /* frees prov_name too */
    if (ret) {
        s->info = NULL;
        return fail(s, "fi_getinfo", ret);
    }
    if ((ret = fi_fabric(s->info->fabric_attr, &s->fabric, NULL)))
        return s->fabric = NULL, fail(s, "fi_fabric", ret);
    if ((ret = fi_domain(s->fabric, s->info, &s->domain, NULL)))
        return s->domain = NULL, fail(s, "fi_domain", ret);
    if ((ret = fi_av_open(s->domain, &av_attr, &s->av, NULL)))
        return s->av = NULL, fail(s, "fi_av_open", ret);
    if (open_cq(s))
        return -1;
    if ((ret = fi_endpoint(s->domain, s->info, &s->ep, NULL)))
        return s->ep = NULL, fail(s, "fi_endpoint", ret);
    if ((ret = fi_ep_bind(s->ep, &s->av->fid, 0)))
        return fail(s, "fi_ep_bind (av)", ret);
    if ((ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV)))
        return fail(s, "fi_ep_bind (cq)", ret);
    if ((ret = fi_enable(s->ep)))
        return fail(s, "fi_enable", ret);
    return 0;
}

/* Endpoint first: it holds references to the AV and the CQ. */
static void close_side(side *s)
{
    struct fid *fids[] = {s->ep ? &s->ep->fid : NULL,
                          s->cq ? &s->cq->fid : NULL,
                          s->av ? &s->av->fid : NULL,
                          s->domain ? &s->domain->fid : NULL,
                          s->fabric ? &s->fabric->fid : NULL};
    for (size_t i = 0; i < sizeof(fids) / sizeof(fids[0]); i++)
        if (fids[i])
            fi_close(fids[i]);
    if (s->info)
        fi_freeinfo(s->info);
}

/* Sends our endpoint name on fd, reads the peer's and inserts it. Both
 * ends write first: a name fits in the socket buffer. */
static int swap_names(side *s, int fd)
{
    char mine[NAME_MAX_LEN], theirs[NAME_MAX_LEN];
    size_t ml = sizeof(mine);
    uint32_t len;
    int ret = fi_getname(&s->ep->fid, mine, &ml);
    if (ret)
        return fail(s, "fi_getname", ret);
    len = (uint32_t)ml;
    errno = 0; /* EOF sets none */
    if (bench_xfer(fd, &len, sizeof(len), 1) || bench_xfer(fd, mine, ml, 1))
        return fail(s, "sending the endpoint name", errno ? errno : EPIPE);
    if (bench_xfer(fd, &len, sizeof(len), 0) || len > sizeof(theirs) ||
        bench_xfer(fd, theirs, len, 0))
        return fail(s, "reading the peer's endpoint name",
                    errno ? errno : EPIPE);
    if ((ret = fi_av_insert(s->av, theirs, 1, &s->peer, 0, NULL)) != 1)
        return fail(s, "fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
    return 0;
}

/* Takes one completion, sleeping in fi_cq_sread when sleep is set, and
 * marks its operation done. Without sleep, none waiting is fine. */
static int reap_one(side *s, int sleep)
{
    struct fi_cq_entry e;
    double deadline = bench_now_us() + IO_TIMEOUT_S * 1e6;
    for (;;) {
        ssize_t n = sleep ? fi_cq_sread(s->cq, &e, 1, NULL,
                                        IO_TIMEOUT_S * 1000)
                          : fi_cq_read(s->cq, &e, 1);
        if (n == 1) {
            if (e.op_context == &s->send_ctx)
                s->send_busy = 0;
            else
                s->recv_busy = 0;
            return 0;
        }
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry ee = {0};
            fi_cq_readerr(s->cq, &ee, 0);
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
        ssize_t ret = sending ? fi_send(s->ep, s->sbuf, s->len, NULL, s->peer,
                                        &s->send_ctx)
                              : fi_recv(s->ep, s->rbuf, s->len, NULL,
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
            prov, size, s->role, s->what ? s->what : "?",
            fi_strerror(s->err));
}

/* The child: receive, repost (before the parent's next message can come),
 * echo; then wait for the parent to hang up before tearing down, so that
 * the last message is not cut off. Exit 0, 1 (failed) or 2 (no wait). */
static void echo_child(int fd, const char *prov, size_t size, long rounds)
{
    side s = {.role = "child", .len = size};
    char c;
    s.sbuf = malloc(size ? size : 1);
    s.rbuf = malloc(size ? size : 1); /* reposted before the echo leaves */
    if (!s.sbuf || !s.rbuf)
        _exit(1);
    memset(s.sbuf, 0xa5, size);
    if (open_side(&s, prov) || post(&s, 0) || swap_names(&s, fd))
        goto out;
    for (long i = 0; i < rounds; i++)
        if (await(&s, 1) || (i + 1 < rounds && post(&s, 0)) ||
            post(&s, 1) || await(&s, 0))
            goto out;
    while (read(fd, &c, 1) < 0 && errno == EINTR)
        ;
    close_side(&s);
    _exit(0);
out:
    /* The parent says what went wrong unless it was only here. */
    if (!s.no_wait)
        report(&s, prov, size);
    close_side(&s);
    _exit(s.no_wait ? 2 : 1);
}

/* After a good run the child exits as soon as it sees our hang-up. */
static void reap_child(pid_t child, int kill_now)
{
    double deadline = bench_now_us() + REAP_LIMIT_US;
    if (kill_now)
        kill(child, SIGKILL);
    while (waitpid(child, NULL, WNOHANG) == 0) {
        if (bench_now_us() > deadline) {
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
            return;
        }
        usleep(1000);
    }
}

int bench_fi_blocking(const char *provider, size_t size, long iters,
                      double *p50, double *p99)
{
    long warm = iters / 10 + 1, rounds = warm + iters;
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    double *t = calloc((size_t)iters, sizeof(*t));
    side s = {.role = "parent", .len = size};
    int sv[2] = {-1, -1}, rc = -1;
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
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) ||
        setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
        setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
        fail(&s, "socketpair", errno);
        goto out;
    }
    fflush(NULL); /* nothing buffered twice */
    if ((child = fork()) < 0) {
        fail(&s, "fork", errno);
        goto out;
    }
    if (child == 0) {
        close(sv[0]);
        echo_child(sv[1], provider, size, rounds);
    }
    close(sv[1]);
    sv[1] = -1;
    memset(s.sbuf, 0x5a, size);
    if (open_side(&s, provider) || post(&s, 0) || swap_names(&s, sv[0]))
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
    close_side(&s);
    for (int i = 0; i < 2; i++)
        if (sv[i] >= 0)
            close(sv[i]); /* the child's cue to tear down */
    if (child > 0)
        reap_child(child, rc != 0);
    free(t);
    free(s.sbuf);
    free(s.rbuf);
    return rc ? (s.no_wait ? 1 : -1) : 0;
}
