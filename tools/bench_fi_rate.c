/*
 * fabrpc-bench rate --baseline: the rate rows over raw libfabric.
 *
 * What an RPC layer that added nothing would manage: a forked child
 * answers every 8-byte message with an 8-byte message, and the parent
 * keeps w messages in flight, sending a new one for each answer, as the
 * rate mode keeps w calls in flight, and times each round trip as that
 * mode times each call (bench_spread.c), so the rows' p50 and p99 compare
 * too: whether fabrpc's cost is in every call or in its tail. The same provider and hints as
 * fabrpc's messages (FI_MSG on an RDM endpoint), sends by fi_inject as
 * fabrpc sends small frames, both sides busy-polling their CQ. So the
 * fabrpc row's ratio to this one is its own cost, and a change of the
 * machine's state moves both rows of the same run.
 *
 * Design notes: each side keeps RECV_SLOTS(w) receives posted, one buffer
 * each, named by their context's index. A receive whose repost or an
 * answer whose inject met -FI_EAGAIN is owed, and retried after the next
 * CQ read (which drives the provider's progress), never dropped. Every
 * wait is bounded: BENCH_FI_IO_TIMEOUT_S without a completion ends the
 * run. Each process opens its fabric only after the fork (bench_fi.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <poll.h>
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

#define SYSTEM "fi_msg"
#define MSG_LEN 8              /* the rate mode's args and replies */
#define CQ_BATCH 32
#define HANGUP_CHECK 4096      /* the child's empty CQ reads between looks */
#define RECV_SLOTS(w) (2 * (w) + 16) /* room for a window and stragglers */

typedef struct side {
    bench_fi fi;
    long nslots;
    uint8_t (*buf)[MSG_LEN];  /* slot i's receive buffer */
    struct fi_context2 *ctx;  /* slot i's context */
    long *unposted, nunposted; /* slots whose repost met -FI_EAGAIN */
    uint8_t out[MSG_LEN];
    long owed;                /* sends that met -FI_EAGAIN, to retry */
} side;

static void report(const side *s, const char *prov)
{
    fprintf(stderr, "fabrpc-bench: --baseline: raw libfabric messages over "
                    "%s (%s): %s: %s\n",
            prov, s->fi.role, s->fi.what ? s->fi.what : "?",
            fi_strerror(s->fi.err));
}

static int open_cq(side *s)
{
    struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT,
                              .wait_obj = FI_WAIT_NONE};
    int ret = fi_cq_open(s->fi.domain, &attr, &s->fi.cq, NULL);
    if (ret) {
        s->fi.cq = NULL;
        return bench_fi_fail(&s->fi, "fi_cq_open", ret);
    }
    return 0;
}

/* fabrpc's message hints (comm/providers.c) without RMA, as
 * bench_fi_blocking.c asks; room for nslots receives. 0, or -1. */
static int open_side(side *s, const char *prov, long nslots)
{
    s->nslots = nslots;
    s->buf = calloc((size_t)nslots, sizeof(*s->buf));
    s->ctx = calloc((size_t)nslots, sizeof(*s->ctx));
    s->unposted = calloc((size_t)nslots, sizeof(*s->unposted));
    memset(s->out, 0x5a, sizeof(s->out));
    if (!s->buf || !s->ctx || !s->unposted)
        return bench_fi_fail(&s->fi, "calloc", -FI_ENOMEM);
    if (bench_fi_open_msg_domain(&s->fi, prov) || open_cq(s) ||
        bench_fi_open_ep(&s->fi))
        return -1;
    return 0;
}

static void free_side(side *s)
{
    bench_fi_close(&s->fi);
    free(s->buf);
    free(s->ctx);
    free(s->unposted);
}

/* Posts slot i's receive, or owes it when the provider has no room. */
static int post_recv(side *s, long i)
{
    ssize_t ret = fi_recv(s->fi.ep, s->buf[i], MSG_LEN, NULL, FI_ADDR_UNSPEC,
                          &s->ctx[i]);
    if (ret == -FI_EAGAIN) {
        s->unposted[s->nunposted++] = i;
        return 0;
    }
    return ret ? bench_fi_fail(&s->fi, "fi_recv", ret) : 0;
}

/* Retries the owed reposts; 0, or -1. */
static int repost_owed(side *s)
{
    long n = s->nunposted;
    s->nunposted = 0;
    for (long k = 0; k < n; k++)
        if (post_recv(s, s->unposted[k]))
            return -1;
    return 0;
}

/* One message to the peer: 1 sent, 0 no room now (-FI_EAGAIN), -1. */
static int send_one(side *s)
{
    ssize_t ret = fi_inject(s->fi.ep, s->out, MSG_LEN, s->fi.peer);
    if (ret == -FI_EAGAIN)
        return 0;
    return ret ? bench_fi_fail(&s->fi, "fi_inject", ret) : 1;
}

/* Reads the CQ once: each receive completed is reposted (or owed) and
 * counted in *got, and timed in t unless it is NULL (answers come in the
 * order of their messages, so the k-th is message k's, of slot k % w).
 * How many completions were read, or -1. */
static int take(side *s, long *got, bench_times *t)
{
    struct fi_cq_entry e[CQ_BATCH];
    ssize_t n = fi_cq_read(s->fi.cq, e, CQ_BATCH);
    if (n == -FI_EAGAIN)
        return 0;
    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry ee = {0};
        ssize_t r = fi_cq_readerr(s->fi.cq, &ee, 0);
        return bench_fi_fail(&s->fi, "completion",
                             r < 0 ? r : ee.err ? ee.err : FI_EOTHER);
    }
    if (n < 0)
        return bench_fi_fail(&s->fi, "fi_cq_read", n);
    for (ssize_t k = 0; k < n; k++) {
        long i = (struct fi_context2 *)e[k].op_context - s->ctx;
        if (i < 0 || i >= s->nslots) /* not ours: a send's, if any */
            continue;
        if (t)
            bench_times_done(t, *got % t->w);
        (*got)++;
        if (post_recv(s, i))
            return -1;
    }
    return (int)n;
}

/* The child: every message answered, until the parent hangs up. Exits
 * 0, or 1 (it printed why unless the parent hung up first). */
static void answer(int fd, const char *prov, long nslots)
{
    side s = {.fi.role = "child"};
    long idle = 0;
    int rc = -1;
    if (open_side(&s, prov, nslots))
        goto out;
    for (long i = 0; i < nslots; i++)
        if (post_recv(&s, i))
            goto out;
    if (bench_fi_swap_names(&s.fi, fd))
        goto out;
    for (;;) {
        int n = take(&s, &s.owed, NULL), sent = 1;
        if (n < 0)
            goto out;
        while (s.owed > 0 && (sent = send_one(&s)) == 1)
            s.owed--;
        if (s.owed > 0 && sent < 0)
            goto out;
        if (repost_owed(&s))
            goto out;
        if (n > 0 || ++idle < HANGUP_CHECK)
            continue;
        idle = 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, 0);
        if (ready > 0 || (ready < 0 && errno != EINTR)) {
            rc = 0;
            goto out;
        }
    }
out:
    if (rc && !s.fi.peer_gone)
        report(&s, prov);
    free_side(&s);
    _exit(rc ? 1 : 0);
}

/* n round trips with w in flight, each answer replaced by a new message;
 * each timed in t (NULL: not timed) as the rate mode times fabrpc's calls:
 * a replacement's issue time is its answer's. 0, or -1. */
static int run(side *s, long w, long n, bench_times *t)
{
    long sent = 0, done = 0;
    double deadline = bench_now_us() + BENCH_FI_IO_TIMEOUT_S * 1e6;
    while (done < n) {
        while (sent < n && sent - done < w) {
            if (sent < w)
                bench_times_issue(t, sent);
            int r = send_one(s);
            if (r < 0)
                return -1;
            if (r == 0)
                break;
            sent++;
        }
        int got = take(s, &done, t);
        if (got < 0 || repost_owed(s))
            return -1;
        if (got > 0)
            deadline = bench_now_us() + BENCH_FI_IO_TIMEOUT_S * 1e6;
        else if (bench_now_us() > deadline)
            return bench_fi_fail(&s->fi, "an answer (none for 30 s)",
                                 -FI_ETIMEDOUT);
    }
    return 0;
}

/* One row per window of o's, as the rate mode times its own; sets the
 * kept fabrpc rows' ratio to it. 0, or -1. */
static int rows(side *s, const char *provider, const bench_opts *o)
{
    long iters = bench_iters(o, MSG_LEN);
    int nkept;
    bench_row *kept = bench_kept(&nkept);
    for (int k = 0; k < o->ninflight; k++) {
        long w = o->inflight[k];
        long warm = o->warmup >= 0 ? o->warmup : iters / 10;
        if (warm < w)
            warm = w;
        if (run(s, w, warm, NULL))
            return -1;
        bench_times t;
        if (bench_times_init(&t, w, iters))
            return bench_fi_fail(&s->fi, "malloc", -FI_ENOMEM);
        bench_wait waited = bench_wait_begin();
        double t0 = bench_now_us();
        if (run(s, w, iters, &t)) {
            bench_times_free(&t);
            return -1;
        }
        double secs = (bench_now_us() - t0) / 1e6;
        double wait = bench_wait_share(&waited);
        bench_row r = bench_row_new(SYSTEM, provider, "rate");
        r.size = MSG_LEN;
        r.inflight = w;
        r.iters = iters;
        r.calls_per_s = (double)iters / secs;
        bench_times_row(&t, &r);
        bench_times_free(&t);
        bench_judge_wait(&r, wait);
        for (int i = 0; i < nkept; i++)
            if (!strcmp(kept[i].system, "fabrpc") &&
                !strcmp(kept[i].metric, "rate") && kept[i].inflight == w)
                kept[i].ratio_fi_msg = kept[i].calls_per_s / r.calls_per_s;
        bench_emit(&r);
    }
    return 0;
}

int bench_fi_rate(const char *fi_provider, const char *provider,
                  const bench_opts *o)
{
    long maxw = 1;
    for (int i = 0; i < o->ninflight; i++)
        maxw = o->inflight[i] > maxw ? o->inflight[i] : maxw;
    side s = {.fi.role = "parent"};
    int fd = -1, rc = 3, st;

    /* Single host: keep tcp and sockets on loopback unless told otherwise
     * (fabrpc-run sets them too), before either process opens a fabric. */
    setenv("FI_TCP_IFACE", "lo", 0);
    setenv("FI_SOCKETS_IFACE", "lo", 0);
    pid_t child = bench_fi_fork(&fd);
    if (child == 0)
        answer(fd, fi_provider, RECV_SLOTS(maxw));
    if (child < 0)
        bench_fi_fail(&s.fi, "socketpair/fork", errno);
    else if (open_side(&s, fi_provider, RECV_SLOTS(maxw)) == 0) {
        int ok = 1;
        for (long i = 0; i < s.nslots && ok; i++)
            ok = post_recv(&s, i) == 0;
        if (ok && bench_fi_swap_names(&s.fi, fd) == 0 &&
            rows(&s, provider, o) == 0)
            rc = 0;
    }
    if (rc && !s.fi.peer_gone) /* else the child said why */
        report(&s, fi_provider);
    free_side(&s);
    if (fd >= 0)
        close(fd); /* the child's cue to end */
    if (child > 0 && (st = bench_fi_reap(child, 0)) != 0) {
        if (st < 0)
            fprintf(stderr, "fabrpc-bench: --baseline: the raw libfabric "
                            "answerer did not end; killed\n");
        rc = 3;
    }
    return rc;
}
