/*
 * fabrpc-bench rma --baseline: the rma rows over raw libfabric and, on
 * shm, a memcpy (the physical limit).
 *
 * What frpc_get and frpc_put come to on the wire, without fabrpc: the same
 * provider and hints, transfers split into the same chunks, writes with
 * the same completion flags (comm/fabric.c). A forked child (bench_fi.h)
 * registers a region of the largest size and keeps its endpoint
 * progressing, as fabrpc's rank 1 does, until the parent hangs up; the
 * parent busy-polls its CQ. bench_rma.c times and prints the rows, as it
 * does fabrpc's.
 *
 * Design notes: a transfer holds one slot of the window; its chunks'
 * contexts are the slot's run of ctx[], so a completion names its slot by
 * its address, and the slot is free again when its last chunk completes.
 * Every wait is bounded: BENCH_FI_IO_TIMEOUT_S without a completion ends
 * the run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "bench.h"
#include "bench_fi.h"

#define SYSTEM "fi_rma"
#define CHUNK_MAX (4u << 20) /* fabrpc's rma_chunk */
#define CQ_BATCH 16
#define CHILD_SREAD_MS 10    /* the child's longest sleep between checks */
#define CHILD_NAP_US 50      /* its nap when the CQ has no wait object */
#define CHILD_KEY 1          /* requested keys, where the provider's own */
#define PARENT_KEY 2         /* are not asked for (no FI_MR_PROV_KEY) */

/* fabrpc's hints (comm/providers.c), and FI_MR_LOCAL: a local descriptor
 * is passed anyway. */
#define RMA_CAPS (FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | \
                  FI_REMOTE_WRITE)
#define RMA_MR_MODE (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | \
                     FI_MR_PROV_KEY | FI_MR_ENDPOINT)

/* The child's region as the parent addresses it: a virtual address, or 0
 * where the provider takes offsets. */
typedef struct region {
    uint64_t addr, key;
} region;

typedef struct raw {
    bench_fi fi;
    const char *prov;         /* libfabric's name, for messages */
    uint8_t *buf;             /* local, the largest size */
    struct fid_mr *mr;
    void *desc;
    region peer;
    size_t chunk;
    uint64_t write_flags;
    struct fi_context2 *ctx;  /* slot i's chunks: ctx[i * nchunks ...] */
    unsigned *left;           /* per slot, chunks not completed yet */
    long *free_slot, nfree;   /* a stack of the free slots */
    unsigned nchunks;         /* per transfer, of the size being timed */
} raw;

/* What timed out, by direction (read 0, write 1). */
static const char *const refused[2] = {"fi_read (-FI_EAGAIN for 30 s)",
                                       "fi_writemsg (-FI_EAGAIN for 30 s)"};
static const char *const silent[2] = {"fi_read (no completion for 30 s)",
                                      "fi_writemsg (no completion for "
                                      "30 s)"};

/* A mover's context: the run and which way it moves. */
typedef struct dir {
    raw *r;
    int write;
} dir;

static void report(const bench_fi *s, const char *prov)
{
    fprintf(stderr, "fabrpc-bench: --baseline: raw libfabric RMA over %s "
                    "(%s): %s: %s\n",
            prov, s->role, s->what ? s->what : "?", fi_strerror(s->err));
}

/* fabrpc's choice (comm/fabric.c, rma_write_flags): on shm's fast path
 * (FI_MR_VIRT_ADDR, no RMA ordering) the initiator copies the data itself
 * before the write completes, and delivery completion would take the slow
 * path; elsewhere a write completes only once delivered. */
static uint64_t write_flags(const struct fi_info *info)
{
    const uint64_t order = FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS |
                           FI_ORDER_WAR | FI_ORDER_WAW | FI_ORDER_WAS |
                           FI_ORDER_SAR | FI_ORDER_SAW;
    int by_initiator = !strcmp(info->fabric_attr->prov_name, "shm") &&
                       (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) &&
                       !(info->tx_attr->msg_order & order);
    return by_initiator ? 0 : FI_DELIVERY_COMPLETE;
}

/* The CQ: with an fd wait object when sleepy and the provider has one
 * (*sleepy says whether it did), else none, for fi_cq_read. */
static int open_cq(bench_fi *s, int *sleepy)
{
    struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT,
                              .wait_obj = *sleepy ? FI_WAIT_FD
                                                  : FI_WAIT_NONE};
    int ret = fi_cq_open(s->domain, &attr, &s->cq, NULL);
    if (ret && *sleepy) {
        attr.wait_obj = FI_WAIT_NONE;
        *sleepy = 0;
        ret = fi_cq_open(s->domain, &attr, &s->cq, NULL);
    }
    if (ret) {
        s->cq = NULL;
        return bench_fi_fail(s, "fi_cq_open", ret);
    }
    return 0;
}

static int open_side(bench_fi *s, const char *prov, int *sleepy)
{
    if (bench_fi_open_domain(s, prov, RMA_CAPS, RMA_MR_MODE,
                             FI_THREAD_SAFE) ||
        open_cq(s, sleepy) || bench_fi_open_ep(s))
        return -1;
    return 0;
}

/* The error entry behind -FI_EAVAIL, recorded as what failed. */
static int cq_error(bench_fi *s, const char *what)
{
    struct fi_cq_err_entry ee = {0};
    ssize_t ret = fi_cq_readerr(s->cq, &ee, 0);
    return bench_fi_fail(s, what, ret < 0 ? ret : ee.err ? ee.err : FI_EOTHER);
}

/* Until the parent sends a byte or hangs up, the child sleeps in
 * fi_cq_sread or naps between fi_cq_reads: either drives the provider's
 * progress, which serves the parent's transfers where the target takes
 * part (rxm over tcp). None complete here. 0, or -1. */
static int progress_until_hangup(bench_fi *s, int fd, int sleepy)
{
    struct fi_cq_entry e;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, 0);
        if (ready > 0 || (ready < 0 && errno != EINTR))
            return 0;
        ssize_t n = sleepy ? fi_cq_sread(s->cq, &e, 1, NULL, CHILD_SREAD_MS)
                           : fi_cq_read(s->cq, &e, 1);
        if (n == -FI_EAVAIL)
            return cq_error(s, "completion");
        if (n < 0 && n != -FI_EAGAIN && n != -FI_EINTR && n != -FI_ETIMEDOUT)
            return bench_fi_fail(s, sleepy ? "fi_cq_sread" : "fi_cq_read", n);
        if (!sleepy)
            usleep(CHILD_NAP_US);
    }
}

/* The child: a region of len bytes open to the parent's reads and writes.
 * Exits 0, or 1 (it printed why unless the parent hung up first). */
static void serve(int fd, const char *prov, size_t len)
{
    bench_fi s = {.role = "child"};
    uint8_t *buf = malloc(len);
    struct fid_mr *mr = NULL;
    region reg;
    int sleepy = 1, rc = -1;

    if (!buf) {
        bench_fi_fail(&s, "malloc", -FI_ENOMEM);
        goto out;
    }
    memset(buf, 0x5b, len); /* real pages, as fabrpc's rows */
    if (open_side(&s, prov, &sleepy) ||
        bench_fi_reg(&s, buf, len, FI_REMOTE_READ | FI_REMOTE_WRITE,
                     CHILD_KEY, &mr) ||
        bench_fi_swap_names(&s, fd))
        goto out;
    reg.addr = s.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR
                   ? (uint64_t)(uintptr_t)buf
                   : 0;
    reg.key = fi_mr_key(mr);
    if (bench_fi_xfer(&s, fd, &reg, sizeof(reg), 1, "sending the region"))
        goto out;
    rc = progress_until_hangup(&s, fd, sleepy);
out:
    if (rc && !s.peer_gone)
        report(&s, prov);
    if (mr)
        fi_close(&mr->fid); /* before the endpoint it is bound to */
    bench_fi_close(&s);
    _exit(rc ? 1 : 0);
}

/* Takes the completions there are; a transfer's last chunk frees its
 * slot and counts in *done. How many were taken, or -1. */
static int take(raw *r, int write, long *done)
{
    struct fi_cq_entry e[CQ_BATCH];
    ssize_t n = fi_cq_read(r->fi.cq, e, CQ_BATCH);
    if (n == -FI_EAGAIN)
        return 0;
    if (n == -FI_EAVAIL)
        return cq_error(&r->fi, write ? "fi_writemsg (its completion)"
                                      : "fi_read (its completion)");
    if (n < 0)
        return bench_fi_fail(&r->fi, "fi_cq_read", n);
    for (ssize_t i = 0; i < n; i++) {
        long slot = ((struct fi_context2 *)e[i].op_context - r->ctx) /
                    r->nchunks;
        if (--r->left[slot] == 0) {
            r->free_slot[r->nfree++] = slot;
            (*done)++;
        }
    }
    return (int)n;
}

/* Takes completions (see take); the deadline moves on with each, and
 * once past it with none, fails as what. 0, or -1. */
static int take_bounded(raw *r, int write, long *done, double *deadline,
                        const char *what)
{
    int got = take(r, write, done);
    if (got < 0)
        return -1;
    if (got > 0)
        *deadline = bench_now_us() + BENCH_FI_IO_TIMEOUT_S * 1e6;
    else if (bench_now_us() > *deadline)
        return bench_fi_fail(&r->fi, what, -FI_ETIMEDOUT);
    return 0;
}

/* As comm/rma.c posts a chunk: fi_read, or fi_writemsg with its flags. */
static ssize_t post_chunk(raw *r, int write, size_t off, size_t len,
                          void *ctx)
{
    uint8_t *local = r->buf + off;
    uint64_t raddr = r->peer.addr + off;
    struct iovec iov = {.iov_base = local, .iov_len = len};
    struct fi_rma_iov rma = {.addr = raddr, .len = len, .key = r->peer.key};
    struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &r->desc,
                             .iov_count = 1, .addr = r->fi.peer,
                             .rma_iov = &rma, .rma_iov_count = 1,
                             .context = ctx};
    if (!write)
        return fi_read(r->fi.ep, local, len, r->desc, r->fi.peer, raddr,
                       r->peer.key, ctx);
    return fi_writemsg(r->fi.ep, &msg, FI_COMPLETION | r->write_flags);
}

/* Posts a transfer of size bytes in slot's chunks. -FI_EAGAIN (a full
 * queue; rxm: a connection not yet up) is retried after taking the
 * completions there are, which also drives progress. 0, or -1. */
static int start(raw *r, int write, long slot, size_t size, long *done,
                 double *deadline)
{
    r->left[slot] = r->nchunks;
    for (unsigned c = 0; c < r->nchunks; c++) {
        size_t off = (size_t)c * r->chunk;
        size_t len = size - off < r->chunk ? size - off : r->chunk;
        for (;;) {
            ssize_t ret = post_chunk(r, write, off, len,
                                     &r->ctx[slot * r->nchunks + c]);
            if (ret == 0)
                break;
            if (ret != -FI_EAGAIN)
                return bench_fi_fail(&r->fi, write ? "fi_writemsg"
                                                   : "fi_read", ret);
            if (take_bounded(r, write, done, deadline, refused[write]))
                return -1;
        }
    }
    return 0;
}

/* n transfers of size bytes, w in flight, each completed one replaced;
 * back when all are done. 0, or -1. */
static int run(raw *r, int write, size_t size, long w, long n)
{
    long started = 0, done = 0;
    double deadline = bench_now_us() + BENCH_FI_IO_TIMEOUT_S * 1e6;

    r->nchunks = (unsigned)((size + r->chunk - 1) / r->chunk);
    r->nfree = 0;
    for (long i = w - 1; i >= 0; i--)
        r->free_slot[r->nfree++] = i;
    while (done < n) {
        while (r->nfree > 0 && started < n) {
            if (start(r, write, r->free_slot[--r->nfree], size, &done,
                      &deadline))
                return -1;
            started++;
        }
        if (take_bounded(r, write, &done, &deadline, silent[write]))
            return -1;
    }
    return 0;
}

static int raw_window(void *ctx, size_t size, long w, long n)
{
    dir *d = ctx;
    if (run(d->r, d->write, size, w, n) == 0)
        return 0;
    report(&d->r->fi, d->r->prov);
    return 1;
}

static int raw_one(void *ctx, size_t size)
{
    return raw_window(ctx, size, 1, 1);
}

/* n transfers as batches of w: all of a batch posted, then all reaped. */
static int raw_batches(void *ctx, size_t size, long w, long n)
{
    for (long done = 0; done < n; done += w)
        if (raw_window(ctx, size, w, n - done < w ? n - done : w))
            return 1;
    return 0;
}

/* The parent's endpoint, its buffer registered, the child's region known,
 * and room for maxw transfers of max bytes in flight. 0, or -1. */
static int open_parent(raw *r, int fd, size_t max, long maxw)
{
    int sleepy = 0; /* busy polling, as fabrpc's busy progress */
    if (!(r->buf = malloc(max)))
        return bench_fi_fail(&r->fi, "malloc", -FI_ENOMEM);
    memset(r->buf, 0x5a, max); /* real pages, as fabrpc's rows (bench_rma.c) */
    if (open_side(&r->fi, r->prov, &sleepy) ||
        bench_fi_reg(&r->fi, r->buf, max, FI_READ | FI_WRITE, PARENT_KEY,
                     &r->mr) ||
        bench_fi_swap_names(&r->fi, fd) ||
        bench_fi_xfer(&r->fi, fd, &r->peer, sizeof(r->peer), 0,
                      "reading the child's region"))
        return -1;
    r->desc = fi_mr_desc(r->mr);
    r->write_flags = write_flags(r->fi.info);
    /* fabrpc's chunks: at most 4 MiB, and no more than the provider
     * takes in one message */
    r->chunk = CHUNK_MAX;
    if (r->fi.info->ep_attr->max_msg_size &&
        r->fi.info->ep_attr->max_msg_size < r->chunk)
        r->chunk = r->fi.info->ep_attr->max_msg_size;
    size_t maxchunks = (max + r->chunk - 1) / r->chunk;
    r->ctx = calloc((size_t)maxw * maxchunks, sizeof(*r->ctx));
    r->left = calloc((size_t)maxw, sizeof(*r->left));
    r->free_slot = calloc((size_t)maxw, sizeof(*r->free_slot));
    if (!r->ctx || !r->left || !r->free_slot)
        return bench_fi_fail(&r->fi, "calloc", -FI_ENOMEM);
    return 0;
}

/* The raw_read and raw_write rows, with a child to read and write. 0, or
 * 3 (a message was printed). */
static int raw_rows(const char *fi_provider, const char *provider,
                    const bench_opts *o, size_t max, long maxw)
{
    static const char *const metric[2] = {"raw_read", "raw_write"};
    static const char *const batch_metric[2] = {"raw_read_batch",
                                                "raw_write_batch"};
    raw r = {.fi.role = "parent", .prov = fi_provider};
    dir d[2] = {{&r, 0}, {&r, 1}};
    bench_mover mv[2] = {{raw_one, raw_window, &d[0]},
                         {raw_one, raw_window, &d[1]}};
    bench_mover bmv[2] = {{raw_one, raw_batches, &d[0]},
                          {raw_one, raw_batches, &d[1]}};
    int fd = -1, rc = 3, st;
    pid_t child = bench_fi_fork(&fd);

    if (child == 0)
        serve(fd, fi_provider, max);
    if (child < 0)
        bench_fi_fail(&r.fi, "socketpair/fork", errno);
    if (child < 0 || open_parent(&r, fd, max, maxw)) {
        if (!r.fi.peer_gone) /* else the child said why */
            report(&r.fi, fi_provider);
    } else /* a failed row says why itself */
        rc = bench_rma_rows(o, SYSTEM, provider, metric, mv) ||
                     bench_rma_batch_rows(o, SYSTEM, provider, batch_metric,
                                          bmv)
                 ? 3
                 : 0;
    if (r.mr)
        fi_close(&r.mr->fid); /* before the endpoint it is bound to */
    bench_fi_close(&r.fi);
    if (fd >= 0)
        close(fd); /* the child's cue to end */
    /* The child exits 1 once it has said why; killed, it could not. */
    if (child > 0 && (st = bench_fi_reap(child, 0)) != 0) {
        if (st < 0)
            fprintf(stderr, "fabrpc-bench: --baseline: the raw libfabric "
                            "RMA target did not end; killed\n");
        rc = 3;
    }
    free(r.ctx);
    free(r.left);
    free(r.free_slot);
    free(r.buf);
    return rc;
}

/* memcpy rows: what moving the bytes costs with no transport at all. */
typedef struct copy {
    uint8_t *src, *dst;
} copy;

static int copy_one(void *ctx, size_t size)
{
    copy *c = ctx;
    memcpy(c->dst, c->src, size);
    return 0;
}

static int memcpy_rows(const char *provider, const bench_opts *o,
                       size_t max)
{
    copy c = {malloc(max), malloc(max)};
    bench_mover mv = {copy_one, NULL, &c};
    int rc = 0;
    if (!c.src || !c.dst) {
        fprintf(stderr, "fabrpc-bench: --baseline: memcpy: out of memory\n");
        rc = 3;
    } else { /* touched, so that no page fault is timed */
        memset(c.src, 0x5a, max);
        memset(c.dst, 0xa5, max);
    }
    for (int s = 0; s < o->nsizes && !rc; s++)
        rc = bench_rma_row(o, "memcpy", provider, "memcpy", &mv,
                           o->sizes[s], 1) ? 3 : 0;
    free(c.src);
    free(c.dst);
    return rc;
}

int bench_fi_rma(const char *fi_provider, const char *provider,
                 const bench_opts *o)
{
    size_t max = 1;
    long maxw = 1;
    for (int i = 0; i < o->nsizes; i++)
        max = o->sizes[i] > max ? o->sizes[i] : max;
    for (int i = 0; i < o->ninflight; i++)
        maxw = o->inflight[i] > maxw ? o->inflight[i] : maxw;
    for (int i = 0; i < o->nsizes; i++) /* the batch rows' */
        if (o->sizes[i] <= BENCH_RMA_BATCH_SIZE_MAX && maxw < BENCH_RMA_BATCH)
            maxw = BENCH_RMA_BATCH;
    /* Single host: keep tcp on loopback unless told otherwise (fabrpc-run
     * sets it too), for both processes before either opens a fabric. */
    setenv("FI_TCP_IFACE", "lo", 0);
    int rc = raw_rows(fi_provider, provider, o, max, maxw);
    if (!strcmp(provider, "shm") && memcpy_rows(provider, o, max))
        rc = 3;
    return rc;
}
