/*
 * fabrpc-bench --baseline: libfabric's own round trip, from fi_pingpong
 * (Debian package libfabric-bin), for the same provider and sizes.
 *
 * For each size a server and a client run on 127.0.0.1 with a fresh port
 * for their control connection. The client's result line has the mean time
 * per transfer ("usec/xfer"); one iteration is a ping and a pong, so the
 * round trip is twice that. Each run is bounded in time. With --progress
 * blocking, the blocking ping-pongs (bench_tcp_pingpong.c,
 * bench_fi_blocking.c) run first.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "free_port.h"

#define PINGPONG "fi_pingpong"
#define RUN_LIMIT_US 120e6    /* one size, server and client */
#define CONNECT_TRIES 50      /* the client may start before the server */

/* Is prog an executable file in PATH? */
static int in_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[4096];
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, n ? path : ".", prog);
        if (access(buf, X_OK) == 0)
            return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

/* Starts argv with stdout and stderr to out_fd (or /dev/null when -1).
 * It stays in our process group, so that fabrpc-run's stopping of this
 * rank stops it too. The child's pid, or -1. */
static pid_t spawn(char *const argv[], int out_fd)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int fd = out_fd >= 0 ? out_fd : open("/dev/null", O_WRONLY);
    dup2(fd, 1);
    dup2(fd, 2);
    execvp(argv[0], argv);
    _exit(127);
}

/* pid's times, readable from its end until it is reaped. */
static bench_proc_time proc_time(pid_t pid)
{
    char path[64];
    unsigned long long cpu, delay;
    bench_proc_time t = {NAN, NAN};
    snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f && fscanf(f, "%llu %llu", &cpu, &delay) == 2)
        t = (bench_proc_time){(double)cpu, (double)delay};
    if (f)
        fclose(f);
    return t;
}

int bench_reap_timed(pid_t pid, double deadline, bench_proc_time *t)
{
    int st;
    if (t)
        *t = (bench_proc_time){NAN, NAN};
    for (;;) {
        /* Ended, not reaped yet (WNOWAIT): its /proc entry still holds
         * its times. */
        siginfo_t si = {0};
        int r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if (r == 0 && si.si_pid == pid) {
            if (t)
                *t = proc_time(pid);
            waitpid(pid, &st, 0);
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        if (r < 0 && errno != EINTR)
            return -1;
        if (bench_now_us() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(10000);
    }
}

int bench_reap(pid_t pid, double deadline)
{
    return bench_reap_timed(pid, deadline, NULL);
}

/* Runs the client with its output into out[0..cap), until deadline. Its
 * exit status, or -1; *t, its times. */
static int run_client(char *const argv[], char *out, size_t cap,
                      double deadline, bench_proc_time *t)
{
    int p[2];
    size_t n = 0;
    if (pipe(p))
        return -1;
    pid_t pid = spawn(argv, p[1]);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return -1;
    }
    for (;;) {
        int left_ms = (int)((deadline - bench_now_us()) / 1e3);
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        if (left_ms <= 0 || poll(&pfd, 1, left_ms) == 0)
            break;
        ssize_t got = read(p[0], out + n, cap - 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
        if (n == cap - 1)
            break;
    }
    out[n] = '\0';
    close(p[0]);
    return bench_reap_timed(pid, deadline, t);
}

/* The round trip in us from fi_pingpong's output: the line after the
 * header that starts with "bytes", column usec/xfer (the 7th). */
static double parse_round_trip(const char *out)
{
    const char *hdr = strstr(out, "bytes");
    const char *line = hdr ? strchr(hdr, '\n') : NULL;
    double usec;
    if (!line || sscanf(line + 1, "%*s %*s %*s %*s %*s %*s %lf", &usec) != 1 ||
        !(usec > 0))
        return NAN;
    return 2.0 * usec;
}

/* One size: the round trip in us, or NAN (then a message was printed);
 * *waited: marked as the client that ran starts; times[0] and [1], the
 * client's and the server's. */
static double pingpong(const char *fi_provider, size_t size, long iters,
                       bench_wait *waited, bench_proc_time times[2])
{
    char port[16], sz[32], it[32], out[8192] = "";
    int portnum = fr_tool_free_port();
    double deadline = bench_now_us() + RUN_LIMIT_US, rt = NAN;
    snprintf(port, sizeof(port), "%d", portnum);
    snprintf(sz, sizeof(sz), "%zu", size);
    snprintf(it, sizeof(it), "%ld", iters);
    char *server[] = {PINGPONG, "-p", (char *)fi_provider, "-e", "rdm",
                      "-I", it, "-S", sz, "-B", port, NULL};
    char *client[] = {PINGPONG, "-p", (char *)fi_provider, "-e", "rdm",
                      "-I", it, "-S", sz, "-P", port, "127.0.0.1", NULL};
    if (portnum < 0) {
        fprintf(stderr, "fabrpc-bench: no free port for " PINGPONG "\n");
        return NAN;
    }
    pid_t srv = spawn(server, -1);
    if (srv < 0) {
        perror("fabrpc-bench: fork");
        return NAN;
    }
    int st = -1;
    for (int i = 0; i < CONNECT_TRIES; i++) {
        usleep(50000); /* let the server listen */
        *waited = bench_wait_begin();
        st = run_client(client, out, sizeof(out), deadline, &times[0]);
        if (st == 0 || !strstr(out, "Connection refused") ||
            waitpid(srv, NULL, WNOHANG) != 0)
            break;
    }
    if (st == 0)
        rt = parse_round_trip(out);
    if (bench_reap_timed(srv, st == 0 ? bench_now_us() + 5e6 : 0,
                         &times[1]) != 0 &&
        st == 0)
        fprintf(stderr, "fabrpc-bench: note: " PINGPONG " server failed\n");
    if (isnan(rt))
        fprintf(stderr,
                "fabrpc-bench: " PINGPONG " -p '%s' -e rdm -S %zu failed "
                "(exit %d); its output:\n%s\n",
                fi_provider, size, st, out);
    return rt;
}

/* A baseline's row for one size (p99: NAN when unknown). */
static bench_row baseline_row(const char *system, const char *provider,
                              size_t size, long iters, double p50,
                              double p99)
{
    bench_row r = bench_row_new(system, provider, "latency");
    r.size = (long)size;
    r.inflight = 1;
    r.iters = iters;
    r.p50_us = p50;
    r.p99_us = p99;
    r.calls_per_s = 1e6 / p50;
    r.mb_per_s = 2.0 * (double)size * r.calls_per_s / 1e6;
    return r;
}

/* Emits r and, unless ratio_of is NULL, sets *ratio_of(kept fabrpc row)
 * to fabrpc's p50 over r's in the fabrpc latency row of r's size. */
static void emit_row(const bench_row *r, double *(*ratio_of)(bench_row *))
{
    int nkept;
    bench_row *kept = bench_kept(&nkept);
    for (int k = 0; ratio_of && k < nkept; k++)
        if (!strcmp(kept[k].system, "fabrpc") &&
            !strcmp(kept[k].metric, "latency") && kept[k].size == r->size)
            *ratio_of(&kept[k]) = kept[k].p50_us / r->p50_us;
    bench_emit(r);
}

/* Emits a baseline's row for one size (p99: NAN when unknown), judged
 * by the CPU wait since waited; ratio_of as emit_row's. */
static void emit_baseline(const char *system, const char *provider,
                          size_t size, long iters, double p50, double p99,
                          const bench_wait *waited,
                          double *(*ratio_of)(bench_row *))
{
    bench_row r = baseline_row(system, provider, size, iters, p50, p99);
    bench_judge_wait(&r, bench_wait_share(waited));
    emit_row(&r, ratio_of);
}

static double *ratio_fi(bench_row *r) { return &r->ratio; }
static double *ratio_tcp(bench_row *r) { return &r->ratio_tcp; }
static double *ratio_fib(bench_row *r) { return &r->ratio_fi_blocking; }

/* --progress blocking: the blocking ping-pongs' rows and ratios, over
 * kernel TCP and over raw libfabric on fabrpc's provider, and a busy TCP
 * ping-pong's row: what two wake-ups cost is the blocking one's p50 less
 * the busy one's. */
static int blocking_baselines(const char *fi_provider, const char *provider,
                              const bench_opts *o)
{
    int rc = 0, fi_skip = 0;
    for (int i = 0; i < o->nsizes; i++) {
        size_t size = o->sizes[i];
        long iters = bench_iters(o, size);
        double p50, p99;
        bench_wait waited = bench_wait_begin();
        if (bench_tcp_pingpong(size, iters, 0, &p50, &p99))
            rc = 3;
        else /* kernel TCP on loopback whatever fabrpc's provider */
            emit_baseline("tcp_pingpong", "loopback", size, iters, p50, p99,
                          &waited, ratio_tcp);
        waited = bench_wait_begin();
        if (bench_tcp_pingpong(size, iters, 1, &p50, &p99))
            rc = 3;
        else
            emit_baseline("tcp_pingpong_busy", "loopback", size, iters, p50,
                          p99, &waited, NULL);
        if (fi_skip)
            continue;
        waited = bench_wait_begin();
        int st = bench_fi_blocking(fi_provider, size, iters, &p50, &p99);
        if (st == 0)
            emit_baseline("fi_blocking_pingpong", provider, size, iters, p50,
                          p99, &waited, ratio_fib);
        else if (st > 0) {
            /* not a failure: this provider cannot sleep on a CQ, so there
             * is no raw blocking path to compare with, at any size */
            fprintf(stderr, "fabrpc-bench: note: %s has no CQ wait object; "
                            "no fi_blocking_pingpong rows\n", fi_provider);
            fi_skip = 1;
        } else
            rc = 3;
    }
    return rc;
}

int bench_baseline(const char *fi_provider, const char *provider,
                   const bench_opts *o)
{
    int rc = 0;
    if (o->progress_set && o->progress == FRPC_PROGRESS_BLOCKING)
        rc = blocking_baselines(fi_provider, provider, o);
    if (!in_path(PINGPONG)) {
        fprintf(stderr, "fabrpc-bench: --baseline: " PINGPONG " is not in "
                        "PATH (install libfabric-bin); no fi_pingpong rows\n");
        return 3;
    }
    for (int i = 0; i < o->nsizes; i++) {
        size_t size = o->sizes[i];
        long iters = bench_iters(o, size);
        double core_before = bench_core_ns(o);
        bench_wait waited = bench_wait_begin();
        bench_proc_time times[2];
        double rt = pingpong(fi_provider, size, iters, &waited, times);
        double wait = bench_wait_share(&waited);
        if (isnan(rt)) {
            rc = 3;
            continue;
        }
        /* rt is a mean: fi_pingpong gives no percentiles */
        bench_row r = baseline_row(PINGPONG, provider, size, iters, rt, NAN);
        bench_judge_wait(&r, wait);
        bench_judge_run_delay(&r, times, 2);
        r.core_ns_before = core_before;
        r.core_ns_after = bench_core_ns(o);
        emit_row(&r, ratio_fi);
    }
    return rc;
}
