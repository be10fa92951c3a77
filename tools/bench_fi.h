/*
 * The raw libfabric baselines' shared parts (bench_fi_ep.c): a parent and
 * a forked child, each with its own RDM endpoint on fabrpc's provider.
 *
 * libfabric is not fork safe, so each process opens its fabric only after
 * the fork; the endpoint names cross a socketpair made before it. Every
 * wait is bounded by BENCH_FI_IO_TIMEOUT_S, so a stuck peer ends the run
 * instead of hanging it.
 *
 *   bench_fi_blocking.c  blocking ping-pong (latency --progress blocking)
 *   bench_fi_rma.c       fi_read/fi_write loops (rma --baseline)
 */
#ifndef FABRPC_BENCH_FI_H
#define FABRPC_BENCH_FI_H

#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#define BENCH_FI_IO_TIMEOUT_S 30

/* One process's endpoint. Members are NULL until opened; what and err say
 * which call failed and how (err positive, for fi_strerror). */
typedef struct bench_fi {
    const char *role;         /* "parent" or "child", for messages */
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;        /* opened by the caller, between the two */
    struct fid_ep *ep;
    fi_addr_t peer;
    const char *what;
    int err;
    int peer_gone;            /* it failed as the peer hung up: the peer
                               * (or fabrpc-run) says why, not we */
} bench_fi;

/* Records what failed with ret (a negative fi_ code or a positive errno);
 * returns -1. */
int bench_fi_fail(bench_fi *s, const char *what, long ret);

/* fi_getinfo (version 1.17: an RDM endpoint of provider prov with caps,
 * mr_mode and threading, FI_THREAD_UNSPEC for any; FI_CONTEXT and
 * FI_CONTEXT2 mode), fi_fabric, fi_domain and a table AV. 0, or -1 (see
 * s->what). */
int bench_fi_open_domain(bench_fi *s, const char *prov, uint64_t caps,
                         uint64_t mr_mode, enum fi_threading threading);

/* bench_fi_open_domain with the hints of fabrpc's messages, minus RMA
 * (comm/providers.c), so that the same provider answers. 0, or -1. */
int bench_fi_open_msg_domain(bench_fi *s, const char *prov);

/* fi_endpoint bound to s->av and s->cq (transmit and receive), enabled.
 * 0, or -1. */
int bench_fi_open_ep(bench_fi *s);

/* Registers buf[0..len) for access on s's domain (bound to the endpoint
 * and enabled when the provider asks for FI_MR_ENDPOINT). key is the
 * requested key, ignored under FI_MR_PROV_KEY. 0, or -1. */
int bench_fi_reg(bench_fi *s, void *buf, size_t len, uint64_t access,
                 uint64_t key, struct fid_mr **mr);

/* Closes whatever is open (the endpoint first: it holds the others). */
void bench_fi_close(bench_fi *s);

/* Sends (sending) or receives len bytes on the socketpair; 0, or -1 with
 * what failed (peer_gone set when the peer hung up). */
int bench_fi_xfer(bench_fi *s, int fd, void *buf, size_t len, int sending,
                  const char *what);

/* Sends our endpoint name on fd, reads the peer's and inserts it as
 * s->peer. Both ends write first: a name fits in the socket buffer.
 * 0, or -1. */
int bench_fi_swap_names(bench_fi *s, int fd);

/* A socketpair whose reads time out after BENCH_FI_IO_TIMEOUT_S, then
 * fork (stdio flushed first). Sets *fd to this side's end; returns the
 * child's pid in the parent, 0 in the child, -1 with errno on failure.
 * The parent closing its end is the child's cue to end. */
pid_t bench_fi_fork(int *fd);

/* Waits (bounded) for the child, killing it first when kill_now or when
 * it outstays the bound. Its exit status, or -1 when killed or lost. */
int bench_fi_reap(pid_t child, int kill_now);

#endif /* FABRPC_BENCH_FI_H */
