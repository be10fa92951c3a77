/*
 * A raw libfabric shm ping-pong (run.sh beside it): each way either one
 * inject of S bytes, or S bytes as two injects of 4096 and S - 4096 + 96
 * bytes, the sizes of fabrpc's parts of a call with S bytes of args (the
 * second part carries two 48-byte headers). The receiver copies each
 * message out of its receive buffer, as a program would. Prints the round
 * trip's p50 over ITERS (after 1,000 warm-up round trips).
 * usage: raw_parts_pingpong S SPLIT(0|1) ITERS
 */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x)                                                          \
    do {                                                                  \
        int r_ = (x);                                                     \
        if (r_) {                                                         \
            fprintf(stderr, "%s: %s\n", #x, fi_strerror(-r_));            \
            exit(1);                                                      \
        }                                                                 \
    } while (0)
#define NRX 64
#define RXLEN 8192

static struct fid_ep *ep;
static struct fid_cq *cq;
static char rxbuf[NRX][RXLEN];

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void post(int i)
{
    while (fi_recv(ep, rxbuf[i], RXLEN, NULL, FI_ADDR_UNSPEC,
                   (void *)(long)(i + 1)) == -FI_EAGAIN)
        fi_cq_read(cq, NULL, 0);
}

static void inject(const void *buf, size_t len, fi_addr_t to)
{
    ssize_t r;
    while ((r = fi_inject(ep, buf, len, to)) == -FI_EAGAIN)
        fi_cq_read(cq, NULL, 0);
    CHECK((int)r);
}

/* Waits for one message and copies it to out: its receive buffer goes
 * back at once. */
static void take(void *out, size_t len)
{
    struct fi_cq_entry e;
    ssize_t n;
    while ((n = fi_cq_read(cq, &e, 1)) == -FI_EAGAIN)
        ;
    if (n != 1) {
        fprintf(stderr, "fi_cq_read: %zd\n", n);
        exit(1);
    }
    int i = (int)(long)e.op_context - 1;
    memcpy(out, rxbuf[i], len);
    post(i);
}

static void xfer(int fd_out, int fd_in, void *bytes, size_t *len)
{
    if (write(fd_out, len, sizeof(*len)) != sizeof(*len) ||
        write(fd_out, bytes, *len) != (ssize_t)*len ||
        read(fd_in, len, sizeof(*len)) != sizeof(*len) ||
        read(fd_in, bytes, *len) != (ssize_t)*len)
        exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    size_t S = strtoul(argv[1], NULL, 10);
    int split = atoi(argv[2]), iters = atoi(argv[3]);
    if (S < 4096 && split)
        return 2;
    size_t a = split ? 4096 : S, b = split ? S - 4096 + 96 : 0;
    if (a > 4096 || b > 4096 || iters <= 0)
        return 2;
    int up[2], down[2];
    if (pipe(up) || pipe(down))
        return 1;
    int child = fork() == 0;
    int fd_out = child ? up[1] : down[1], fd_in = child ? down[0] : up[0];

    struct fi_info *hints = fi_allocinfo(), *info;
    struct fid_fabric *fab;
    struct fid_domain *dom;
    struct fid_av *av;
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG;
    hints->fabric_attr->prov_name = strdup("shm");
    CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
    CHECK(fi_fabric(info->fabric_attr, &fab, NULL));
    CHECK(fi_domain(fab, info, &dom, NULL));
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT, .size = 1024};
    CHECK(fi_cq_open(dom, &cqa, &cq, NULL));
    struct fi_av_attr ava = {.type = FI_AV_MAP};
    CHECK(fi_av_open(dom, &ava, &av, NULL));
    CHECK(fi_endpoint(dom, info, &ep, NULL));
    CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    CHECK(fi_ep_bind(ep, &av->fid, 0));
    CHECK(fi_enable(ep));

    char name[256];
    size_t len = sizeof(name);
    fi_addr_t peer;
    CHECK(fi_getname(&ep->fid, name, &len));
    xfer(fd_out, fd_in, name, &len);
    if (fi_av_insert(av, name, 1, &peer, 0, NULL) != 1)
        return 1;
    for (int i = 0; i < NRX; i++)
        post(i);

    static char tx[8192], rx[8192];
    double *t = malloc(sizeof(double) * (size_t)iters);
    memset(tx, 7, sizeof(tx));
    len = 1;
    xfer(fd_out, fd_in, name, &len); /* both ready */
    for (int it = -1000; it < iters; it++) {
        double t0 = now_us();
        if (child) {
            take(rx, a);
            if (b)
                take(rx + a, b);
        }
        inject(tx, a, peer);
        if (b)
            inject(tx + a, b, peer);
        if (!child) {
            take(rx, a);
            if (b)
                take(rx + a, b);
            if (it >= 0)
                t[it] = now_us() - t0;
        }
    }
    if (!child) {
        qsort(t, (size_t)iters, sizeof(double), cmp);
        printf("raw S=%zu %s p50 %.2f us\n", S,
               split ? "two injects" : "one inject", t[iters / 2]);
    }
    xfer(fd_out, fd_in, name, &len); /* both done before either closes */
    /* Closed, so that shm removes its region's name from /dev/shm. */
    fi_close(&ep->fid);
    fi_close(&av->fid);
    fi_close(&cq->fid);
    fi_close(&dom->fid);
    fi_close(&fab->fid);
    fi_freeinfo(info);
    fi_freeinfo(hints);
    free(t);
    if (!child)
        wait(NULL);
    return 0;
}
