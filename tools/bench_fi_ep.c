/*
 * The raw libfabric baselines' endpoints, name exchange and child process
 * (see bench_fi.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "bench.h"
#include "bench_fi.h"

#define REAP_LIMIT_US 10e6  /* the child's teardown after a good run */
#define NAME_MAX_LEN 1024

int bench_fi_fail(bench_fi *s, const char *what, long ret)
{
    s->what = what;
    s->err = ret < 0 ? (int)-ret : (int)ret;
    return -1;
}

int bench_fi_open_domain(bench_fi *s, const char *prov, uint64_t caps,
                         uint64_t mr_mode, enum fi_threading threading)
{
    struct fi_info *hints = fi_allocinfo();
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    int ret;

    if (!hints || !(hints->fabric_attr->prov_name = strdup(prov))) {
        fi_freeinfo(hints);
        return bench_fi_fail(s, "fi_allocinfo", -FI_ENOMEM);
    }
    hints->caps = caps;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = (int)mr_mode;
    hints->domain_attr->threading = threading;
    ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &s->info);
    fi_freeinfo(hints); /* frees prov_name too */
    if (ret) {
        s->info = NULL;
        return bench_fi_fail(s, "fi_getinfo", ret);
    }
    if ((ret = fi_fabric(s->info->fabric_attr, &s->fabric, NULL)))
        return s->fabric = NULL, bench_fi_fail(s, "fi_fabric", ret);
    if ((ret = fi_domain(s->fabric, s->info, &s->domain, NULL)))
        return s->domain = NULL, bench_fi_fail(s, "fi_domain", ret);
    if ((ret = fi_av_open(s->domain, &av_attr, &s->av, NULL)))
        return s->av = NULL, bench_fi_fail(s, "fi_av_open", ret);
    return 0;
}

int bench_fi_open_msg_domain(bench_fi *s, const char *prov)
{
    return bench_fi_open_domain(s, prov, FI_MSG,
                                FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                                    FI_MR_PROV_KEY | FI_MR_ENDPOINT,
                                FI_THREAD_UNSPEC);
}

int bench_fi_open_ep(bench_fi *s)
{
    int ret;
    if ((ret = fi_endpoint(s->domain, s->info, &s->ep, NULL)))
        return s->ep = NULL, bench_fi_fail(s, "fi_endpoint", ret);
    if ((ret = fi_ep_bind(s->ep, &s->av->fid, 0)))
        return bench_fi_fail(s, "fi_ep_bind (av)", ret);
    if ((ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV)))
        return bench_fi_fail(s, "fi_ep_bind (cq)", ret);
    if ((ret = fi_enable(s->ep)))
        return bench_fi_fail(s, "fi_enable", ret);
    return 0;
}

int bench_fi_reg(bench_fi *s, void *buf, size_t len, uint64_t access,
                 uint64_t key, struct fid_mr **mr)
{
    int ret = fi_mr_reg(s->domain, buf, len, access, 0, key, 0, mr, NULL);
    if (ret) {
        *mr = NULL;
        return bench_fi_fail(s, "fi_mr_reg", ret);
    }
    if (!(s->info->domain_attr->mr_mode & FI_MR_ENDPOINT))
        return 0;
    if ((ret = fi_mr_bind(*mr, &s->ep->fid, 0)) ||
        (ret = fi_mr_enable(*mr))) {
        fi_close(&(*mr)->fid);
        *mr = NULL;
        return bench_fi_fail(s, "fi_mr_bind/fi_mr_enable", ret);
    }
    return 0;
}

void bench_fi_close(bench_fi *s)
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

int bench_fi_xfer(bench_fi *s, int fd, void *buf, size_t len, int sending,
                  const char *what)
{
    errno = 0; /* EOF sets none */
    if (bench_xfer(fd, buf, len, sending) == 0)
        return 0;
    s->peer_gone = errno == 0 || errno == EPIPE || errno == ECONNRESET;
    /* SO_RCVTIMEO ran out: say so rather than "Resource unavailable" */
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        errno = ETIMEDOUT;
    return bench_fi_fail(s, what, errno ? errno : EPIPE);
}

int bench_fi_swap_names(bench_fi *s, int fd)
{
    static const char sending[] = "sending the endpoint name",
                      reading[] = "reading the peer's endpoint name";
    char mine[NAME_MAX_LEN], theirs[NAME_MAX_LEN];
    size_t ml = sizeof(mine);
    uint32_t len;
    int ret = fi_getname(&s->ep->fid, mine, &ml);
    if (ret)
        return bench_fi_fail(s, "fi_getname", ret);
    len = (uint32_t)ml;
    if (bench_fi_xfer(s, fd, &len, sizeof(len), 1, sending) ||
        bench_fi_xfer(s, fd, mine, ml, 1, sending) ||
        bench_fi_xfer(s, fd, &len, sizeof(len), 0, reading))
        return -1;
    if (len > sizeof(theirs))
        return bench_fi_fail(s, reading, EPROTO);
    if (bench_fi_xfer(s, fd, theirs, len, 0, reading))
        return -1;
    if ((ret = fi_av_insert(s->av, theirs, 1, &s->peer, 0, NULL)) != 1)
        return bench_fi_fail(s, "fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
    return 0;
}

pid_t bench_fi_fork(int *fd)
{
    struct timeval tv = {.tv_sec = BENCH_FI_IO_TIMEOUT_S};
    int sv[2], err;
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return -1;
    if (setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
        setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
        goto fail;
    fflush(NULL); /* nothing buffered twice */
    if ((pid = fork()) < 0)
        goto fail;
    close(sv[pid == 0 ? 0 : 1]);
    *fd = sv[pid == 0 ? 1 : 0];
    return pid;
fail:
    err = errno;
    close(sv[0]);
    close(sv[1]);
    errno = err;
    return -1;
}

int bench_fi_reap(pid_t child, int kill_now)
{
    if (kill_now)
        kill(child, SIGKILL);
    return bench_reap(child, bench_now_us() + REAP_LIMIT_US);
}
