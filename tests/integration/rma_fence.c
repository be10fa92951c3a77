/*
 * The deregistration fence (rpc/fence.c) against what the header promises
 * of frpc_mem_deregister and of frpc_fn_stats ("frpc.fence"), run by
 * rma_cases.sh through fabrpc-run. FENCE_ASKS (0 or 1, set by the script
 * from the provider and FABRPC_RMA) says whether this rank's provider
 * moves the bytes of peers' native transfers itself (tcp, sockets
 * natively): there a deregistration asks its peers. FENCE_TRANSFERS, if
 * set, is how the agent must say it transfers ("native", "native over
 * shm", "emulated").
 *
 *   fence-stopped  3 ranks, FENCE_ASKS=1. Rank 0 stops rank 1 (SIGSTOP)
 *            and deregisters a region peers may read and write with a
 *            300 ms timeout: FRPC_ETIMEDOUT, no sooner, rank 1 still
 *            stopped. The region is then closed but valid: rank 0's own
 *            gets, puts (sync, async) and batches with it as their local
 *            side are refused FRPC_EINVAL and write nothing into it; rank
 *            2's get and put with the descriptor it used before fail
 *            (stale) and write nothing into it either. Rank 1 resumed
 *            (SIGCONT), the region deregisters again: 0. Rank 0's
 *            "frpc.fence" figures counted 2 questions a deregistration,
 *            one of them (to the stopped rank) failed.
 *   fence-none  2 ranks. Rank 0 stops rank 1 and deregisters a region
 *            that gives peers no access, with a 20 s timeout: 0 while
 *            rank 1 is still stopped (asked, it would be FRPC_ETIMEDOUT),
 *            and no "frpc.fence" call counted.
 *   fence-alone  1 rank: regions peers may access (and one they may not)
 *            deregister 0, no "frpc.fence" call counted.
 *   fence-count  3 ranks, each in turn deregistering regions of each
 *            access: with FENCE_ASKS=1 every one peers may access counts
 *            world - 1 calls of "frpc.fence" (none failed) on the rank
 *            that deregisters it and none elsewhere; access 0 none; with
 *            FENCE_ASKS=0 (native shm, emulated) none at all.
 *   fence-in-handler  2 ranks, config.threads 1 (FABRPC_THREADS), where
 *            a pool handler may not wait for futures (FRPC_EDEADLK):
 *            rank 1 calls rank 0's handler that registers a region peers
 *            may read and write and deregisters it, 20 s timeout: 0 (it
 *            was FRPC_ETIMEDOUT at once where the deregistration asks
 *            its peers; frpc_mem_deregister blocks, and names no
 *            FRPC_EDEADLK). Then both ranks at once, each in its one
 *            pool thread's handler (which holds it 300 ms first): 0 on
 *            both, in well under the 20 s (a question answered on the
 *            pool waited for the other rank's pool: FRPC_ETIMEDOUT at
 *            20 s on both).
 *
 * A stopped rank is resumed by rank 0 (also when one of its checks
 * fails) and, should rank 0 die, by a child of its own after 60 s.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fabrpc.h>

#include "check_fail.h"
#include "rma.h"

#define FENCE_LEN 4096
#define FENCE_NAME "frpc.fence"
#define WATCHDOG_S 60

/* The rank this one stopped (0: none): a failed check resumes it. */
static atomic_int stopped_pid;

static void fence_fail_dump(void)
{
    int pid = atomic_load(&stopped_pid);
    if (pid > 0)
        kill(pid, SIGCONT);
    rma_dump_counters();
}

__attribute__((constructor)) static void fence_set_dump(void)
{
    check_fail_dump = fence_fail_dump;
}

static void msleep(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static int fence_asks(void)
{
    const char *v = getenv("FENCE_ASKS");
    CHECK(v && (!strcmp(v, "0") || !strcmp(v, "1")),
          "FENCE_ASKS must be 0 or 1 (rma_cases.sh sets it)");
    int asks = v[0] == '1';
    const char *how = rma_emulated()     ? "emulated"
                      : rma_shm_native() ? "native over shm"
                                         : "native";
    const char *want = getenv("FENCE_TRANSFERS");
    /* The script's word against the agent's own: a provider or mode not
     * the one meant would make the counts below prove nothing. */
    CHECK(!asks || !strcmp(how, "native"), "FENCE_ASKS=1 but transfers "
          "are %s", how);
    CHECK(!want || !*want || !strcmp(how, want),
          "transfers are %s, FENCE_TRANSFERS says %s", how, want);
    printf("ok: rank %d: transfers %s, FENCE_ASKS=%d\n", me, how, asks);
    return asks;
}

static frpc_fn_stats fence_stats(void)
{
    frpc_fn_stats s;
    int rc = frpc_get_fn_stats(agent, FENCE_NAME, &s);
    CHECK(rc == 0, "frpc_get_fn_stats(%s): %s", FENCE_NAME,
          frpc_strerror(rc));
    return s;
}

/* /proc's state letter of pid ('T' stopped), or 0. */
static char proc_state(int pid)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char *p = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
    fclose(f);
    return p && p[1] == ' ' ? p[2] : 0;
}

static void wait_state(int pid, int stopped)
{
    for (double t0 = now_ms(); (proc_state(pid) == 'T') != stopped;
         msleep(2))
        CHECK(now_ms() - t0 < 20000, "rank pid %d not %s after 20 s", pid,
              stopped ? "stopped" : "resumed");
}

static void stop_rank(int pid)
{
    atomic_store(&stopped_pid, pid);
    CHECK(kill(pid, SIGSTOP) == 0, "SIGSTOP %d", pid);
    wait_state(pid, 1);
    printf("ok: rank pid %d stopped\n", pid);
}

static void resume_rank(int pid)
{
    CHECK(kill(pid, SIGCONT) == 0, "SIGCONT %d", pid);
    wait_state(pid, 0);
    atomic_store(&stopped_pid, 0);
    printf("ok: rank pid %d resumed\n", pid);
}

/* A child that resumes this process after WATCHDOG_S, should the rank
 * that stops it die first; it ends with this process. */
static pid_t watchdog_start(void)
{
    pid_t parent = getpid(), c = fork();
    CHECK(c >= 0, "fork");
    if (c == 0) {
        close(1); /* fabrpc-run's pipes: not held past this rank */
        close(2);
        for (int i = 0; i < WATCHDOG_S * 10 && getppid() == parent; i++)
            msleep(100);
        kill(parent, SIGCONT);
        _exit(0);
    }
    return c;
}

static void watchdog_stop(pid_t c)
{
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
}

static void h_pid(frpc_request *req, void *user)
{
    (void)user;
    int pid = getpid();
    frpc_respond(req, &pid, sizeof(pid));
}

static int pid_of(int rank)
{
    frpc_result res;
    int pid = 0, rc = frpc_call(agent, rank, "pid", NULL, 0, TIMEOUT_MS, &res);
    CHECK(rc == 0 && res.len == sizeof(pid), "pid of rank %d: %s", rank,
          frpc_strerror(rc));
    memcpy(&pid, res.data, sizeof(pid));
    frpc_result_clear(&res);
    return pid;
}

/* ---- fence-stopped ------------------------------------------------------ */

static frpc_mem *fenced;     /* rank 0's region under test */
static uint8_t fenced_desc[FRPC_MEM_DESC_SIZE];
static atomic_int phase;     /* 1 once its deregistration timed out */
static atomic_int stale_told;
static int stale_rc[2];      /* rank 2's stale get and put */

#define FENCED_SEED 77u

static void h_fenced_desc(frpc_request *req, void *user)
{
    (void)user;
    frpc_respond(req, fenced_desc, sizeof(fenced_desc));
}

static void h_phase(frpc_request *req, void *user)
{
    (void)user;
    int p = atomic_load(&phase);
    frpc_respond(req, &p, sizeof(p));
}

static void h_stale_done(frpc_request *req, void *user)
{
    size_t len;
    const int *rc = frpc_request_args(req, &len);
    (void)user;
    if (len == sizeof(stale_rc) && !atomic_load(&stale_told)) {
        memcpy(stale_rc, rc, sizeof(stale_rc));
        atomic_store(&stale_told, 1);
    }
    frpc_respond(req, NULL, 0);
}

/* A call to rank 0 that may find the connection a stale transfer of
 * this rank's dropped (native tcp): FRPC_ETRANSPORT is tried again. */
static void call_0(const char *fn, const void *args, size_t len,
                   frpc_result *res)
{
    int rc = FRPC_ETRANSPORT;
    for (int i = 0; i < 5 && rc == FRPC_ETRANSPORT; i++)
        rc = frpc_call(agent, 0, fn, args, len, 30000, res);
    CHECK(rc == 0, "%s on rank 0: %s", fn,
          res->error ? res->error : frpc_strerror(rc));
}

/* Rank 0's own transfers with the closed region as their local side. */
static void own_transfers_refused(const uint8_t *d2)
{
    const size_t dl = FRPC_MEM_DESC_SIZE;
    frpc_future *f = (frpc_future *)&f; /* not NULL: the refusal sets it */
    expect(frpc_get(fenced, 0, d2, dl, 0, FENCE_LEN, 10000), FRPC_EINVAL,
           "a get into the closed region");
    expect(frpc_put(fenced, 0, d2, dl, 0, FENCE_LEN, 10000), FRPC_EINVAL,
           "a put from the closed region");
    /* of 0 bytes too: nothing would be posted, but the region is closed */
    expect(frpc_get(fenced, 0, d2, dl, 0, 0, 10000), FRPC_EINVAL,
           "a get of 0 bytes into the closed region");
    expect(frpc_put(fenced, 0, d2, dl, 0, 0, 10000), FRPC_EINVAL,
           "a put of 0 bytes from the closed region");
    expect(frpc_get_async(fenced, 0, d2, dl, 0, 64, 10000, &f), FRPC_EINVAL,
           "an async get into the closed region");
    CHECK(f == NULL, "a refused async get left *out set");
    f = (frpc_future *)&f;
    expect(frpc_put_async(fenced, 0, d2, dl, 0, 64, 10000, &f), FRPC_EINVAL,
           "an async put from the closed region");
    CHECK(f == NULL, "a refused async put left *out set");
    frpc_xfer op = {.op = FRPC_XFER_GET, .local = fenced, .desc = d2,
                    .desc_len = dl, .len = 64};
    expect(frpc_transfer(&op, 1, NULL, 0, 10000), FRPC_EINVAL,
           "a batch's get into the closed region");
    op.op = FRPC_XFER_PUT;
    expect(frpc_transfer(&op, 1, NULL, 0, 10000), FRPC_EINVAL,
           "a batch's put from the closed region");
}

static void fenced_owner(uint8_t *buf)
{
    uint8_t d2[FRPC_MEM_DESC_SIZE];
    desc_of(2, d2);
    int pid1 = pid_of(1);
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier: rank 2 got once");

    stop_rank(pid1);
    frpc_fn_stats s0 = fence_stats();
    double t0 = now_ms();
    int rc = frpc_mem_deregister(fenced, 300);
    double ms = now_ms() - t0;
    CHECK(rc == FRPC_ETIMEDOUT,
          "deregistering with rank 1 stopped: %s after %.0f ms, want "
          "FRPC_ETIMEDOUT", frpc_err_name(rc), ms);
    /* Not before its deadline (a lower bound: load only delays). */
    CHECK(ms >= 250, "FRPC_ETIMEDOUT after %.0f ms, its timeout 300", ms);
    CHECK(proc_state(pid1) == 'T', "rank 1 resumed meanwhile");
    printf("ok: deregistration with rank 1 stopped -> FRPC_ETIMEDOUT "
           "(%.0f ms)\n", ms);

    own_transfers_refused(d2);
    CHECK(verify(buf, FENCE_LEN, FENCED_SEED, 0) == FENCE_LEN,
          "a refused transfer wrote into the closed region");

    atomic_store(&phase, 1); /* rank 2 tries its old descriptor */
    for (t0 = now_ms(); !atomic_load(&stale_told); msleep(2))
        CHECK(now_ms() - t0 < 90000, "rank 2 never told its stale transfers");
    CHECK(stale_rc[0] != 0 && stale_rc[1] != 0,
          "rank 2's transfers with the old descriptor: get %s, put %s "
          "(stale: both must fail)", frpc_err_name(stale_rc[0]),
          frpc_err_name(stale_rc[1]));
    CHECK(verify(buf, FENCE_LEN, FENCED_SEED, 0) == FENCE_LEN,
          "rank 2's stale put wrote into the closed region");
    printf("ok: rank 2's stale get -> %s, put -> %s, nothing written\n",
           frpc_err_name(stale_rc[0]), frpc_err_name(stale_rc[1]));
    CHECK(proc_state(pid1) == 'T', "rank 1 resumed meanwhile");

    resume_rank(pid1);
    rc = frpc_mem_deregister(fenced, 60000);
    CHECK(rc == 0, "deregistering again, rank 1 resumed: %s",
          frpc_err_name(rc));
    fenced = NULL;
    printf("ok: deregistered again once rank 1 resumed\n");

    /* 2 peers asked by each deregistration; the stopped one's question
     * failed. Each outcome is known by the time the call returned, but
     * the one given up on at its deadline may end a little later. */
    frpc_fn_stats s1 = fence_stats();
    for (t0 = now_ms(); s1.calls < s0.calls + 4 && now_ms() - t0 < 10000;
         msleep(10))
        s1 = fence_stats();
    CHECK(s1.calls - s0.calls == 4 &&
              s1.calls_failed - s0.calls_failed == 1,
          "%s on the asking rank: %llu calls (%llu failed), want 4 (1)",
          FENCE_NAME, (unsigned long long)(s1.calls - s0.calls),
          (unsigned long long)(s1.calls_failed - s0.calls_failed));
    printf("ok: %s counted 4 calls, 1 failed\n", FENCE_NAME);
}

static void stale_peer(void)
{
    uint8_t d[FRPC_MEM_DESC_SIZE], *lbuf;
    frpc_mem *local;
    frpc_result res;
    int rc;

    desc_by(0, "fenced_desc", NULL, 0, d);
    CHECK(frpc_mem_register(agent, lbuf = calloc(1, FENCE_LEN), FENCE_LEN,
                            0, &local) == 0,
          "register the local side");
    rc = frpc_get(local, 0, d, sizeof(d), 0, FENCE_LEN, TIMEOUT_MS);
    CHECK(rc == 0 && verify(lbuf, FENCE_LEN, FENCED_SEED, 0) == FENCE_LEN,
          "a get of rank 0's region before: %s", frpc_strerror(rc));
    printf("ok: the descriptor works before\n");
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");

    for (double t0 = now_ms();; msleep(20)) {
        int p = 0;
        call_0("phase", NULL, 0, &res);
        if (res.len == sizeof(p))
            memcpy(&p, res.data, sizeof(p));
        frpc_result_clear(&res);
        if (p)
            break;
        CHECK(now_ms() - t0 < 60000, "rank 0's deregistration never ended");
    }
    int rcs[2];
    memset(lbuf, 0, FENCE_LEN);
    rcs[0] = frpc_get(local, 0, d, sizeof(d), 0, FENCE_LEN, 10000);
    fill(lbuf, FENCE_LEN, 5, 0);
    rcs[1] = frpc_put(local, 0, d, sizeof(d), 0, FENCE_LEN, 10000);
    call_0("stale_done", rcs, sizeof(rcs), &res);
    frpc_result_clear(&res);
    CHECK(frpc_mem_deregister(local, 60000) == 0, "deregister");
    free(lbuf);
}

int mode_fence_stopped(void)
{
    start(FENCE_LEN);
    me = frpc_rank(agent);
    CHECK(world == 3, "fence-stopped needs 3 ranks");
    CHECK(fence_asks(), "fence-stopped is for tcp and sockets, native");
    CHECK(frpc_register(agent, "pid", h_pid, NULL, 0) == 0 &&
              frpc_register(agent, "fenced_desc", h_fenced_desc, NULL, 0) ==
                  0 &&
              frpc_register(agent, "phase", h_phase, NULL, 0) == 0 &&
              frpc_register(agent, "stale_done", h_stale_done, NULL, 0) == 0,
          "register");
    uint8_t *buf = NULL;
    pid_t dog = 0;
    if (me == 0) {
        buf = malloc(FENCE_LEN);
        CHECK(buf, "malloc");
        fill(buf, FENCE_LEN, FENCED_SEED, 0);
        CHECK(frpc_mem_register(agent, buf, FENCE_LEN,
                                FRPC_MEM_REMOTE_READ | FRPC_MEM_REMOTE_WRITE,
                                &fenced) == 0 &&
                  frpc_mem_describe(fenced, 0, FENCE_LEN, fenced_desc) == 0,
              "register and describe the region");
    } else if (me == 1) {
        dog = watchdog_start();
    }
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier: the region is up");
    if (me == 0)
        fenced_owner(buf);
    else if (me == 2)
        stale_peer();
    else /* rank 1: stopped and resumed by rank 0 meanwhile */
        CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    finish();
    if (dog)
        watchdog_stop(dog);
    free(buf);
    return 0;
}

/* ---- fence-none --------------------------------------------------------- */

int mode_fence_none(void)
{
    start(FENCE_LEN);
    me = frpc_rank(agent);
    CHECK(world == 2, "fence-none needs 2 ranks");
    fence_asks(); /* what the provider is: access 0 asks no one anyway */
    CHECK(frpc_register(agent, "pid", h_pid, NULL, 0) == 0, "register");
    pid_t dog = me == 1 ? watchdog_start() : 0;
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    if (me == 0) {
        uint8_t *buf = calloc(1, FENCE_LEN), d[FRPC_MEM_DESC_SIZE];
        frpc_mem *m;
        CHECK(buf && frpc_mem_register(agent, buf, FENCE_LEN, 0, &m) == 0 &&
                  frpc_mem_describe(m, 0, FENCE_LEN, d) == 0,
              "register a region of access 0");
        int pid1 = pid_of(1);
        stop_rank(pid1);
        frpc_fn_stats s0 = fence_stats();
        double t0 = now_ms();
        /* Asked, the stopped rank would make it FRPC_ETIMEDOUT. */
        int rc = frpc_mem_deregister(m, 20000);
        double ms = now_ms() - t0;
        CHECK(rc == 0, "deregistering a region of access 0 with rank 1 "
              "stopped: %s after %.0f ms", frpc_err_name(rc), ms);
        CHECK(proc_state(pid1) == 'T', "rank 1 resumed meanwhile");
        frpc_fn_stats s1 = fence_stats();
        CHECK(s1.calls == s0.calls && s1.calls_failed == s0.calls_failed,
              "%s counted %llu calls for a region of access 0", FENCE_NAME,
              (unsigned long long)(s1.calls - s0.calls));
        printf("ok: a region of access 0 deregistered with rank 1 stopped "
               "-> 0 (%.0f ms), no %s call\n", ms, FENCE_NAME);
        free(buf);
        resume_rank(pid1);
        CHECK(frpc_barrier(agent, 60000) == 0, "barrier: rank 1 resumed");
        s1 = fence_stats();
        CHECK(s1.calls == s0.calls, "%s counted %llu calls later",
              FENCE_NAME, (unsigned long long)(s1.calls - s0.calls));
    } else {
        CHECK(frpc_barrier(agent, 60000) == 0, "barrier: rank 1 resumed");
    }
    finish();
    if (dog)
        watchdog_stop(dog);
    return 0;
}

/* ---- fence-alone, fence-count ------------------------------------------- */

static const int accesses[] = {
    FRPC_MEM_REMOTE_READ | FRPC_MEM_REMOTE_WRITE, FRPC_MEM_REMOTE_READ,
    FRPC_MEM_REMOTE_WRITE, 0};

static const char *access_name(int access)
{
    switch (access) {
    case FRPC_MEM_REMOTE_READ | FRPC_MEM_REMOTE_WRITE:
        return "read-write";
    case FRPC_MEM_REMOTE_READ:
        return "read";
    case FRPC_MEM_REMOTE_WRITE:
        return "write";
    default:
        return "none";
    }
}

/* Registers a region of access, deregisters it (0): the "frpc.fence"
 * calls that counted meanwhile must be want, none failed. */
static void dereg_counts(int access, uint64_t want)
{
    uint8_t *buf = calloc(1, FENCE_LEN), d[FRPC_MEM_DESC_SIZE];
    frpc_mem *m;
    CHECK(buf && frpc_mem_register(agent, buf, FENCE_LEN, access, &m) == 0 &&
              frpc_mem_describe(m, 0, FENCE_LEN, d) == 0,
          "register a region of access %s", access_name(access));
    frpc_fn_stats s0 = fence_stats();
    int rc = frpc_mem_deregister(m, 60000);
    CHECK(rc == 0, "deregistering a region of access %s: %s",
          access_name(access), frpc_err_name(rc));
    frpc_fn_stats s1 = fence_stats();
    CHECK(s1.calls - s0.calls == want && s1.calls_failed == s0.calls_failed,
          "rank %d's deregistration of a region of access %s: %s counted "
          "%llu calls (%llu failed), want %llu (0)", me, access_name(access),
          FENCE_NAME, (unsigned long long)(s1.calls - s0.calls),
          (unsigned long long)(s1.calls_failed - s0.calls_failed),
          (unsigned long long)want);
    printf("ok: rank %d: access %s: %llu %s calls\n", me,
           access_name(access), (unsigned long long)want, FENCE_NAME);
    free(buf);
}

int mode_fence_alone(void)
{
    start(FENCE_LEN);
    me = frpc_rank(agent);
    CHECK(world == 1, "fence-alone needs 1 rank");
    fence_asks(); /* what the provider is: it asks no one all the same */
    for (size_t i = 0; i < sizeof(accesses) / sizeof(accesses[0]); i++)
        dereg_counts(accesses[i], 0);
    CHECK(fence_stats().calls == 0, "%s calls in a world of one",
          FENCE_NAME);
    finish();
    return 0;
}

int mode_fence_count(void)
{
    start(FENCE_LEN);
    me = frpc_rank(agent);
    CHECK(world >= 2, "fence-count needs 2 ranks or more");
    int asks = fence_asks();
    for (int turn = 0; turn < world; turn++) {
        frpc_fn_stats before = fence_stats();
        CHECK(frpc_barrier(agent, 60000) == 0, "barrier: turn %d", turn);
        if (me == turn)
            for (size_t i = 0; i < sizeof(accesses) / sizeof(accesses[0]);
                 i++)
                dereg_counts(accesses[i],
                             asks && accesses[i] ? (uint64_t)world - 1 : 0);
        CHECK(frpc_barrier(agent, 60000) == 0, "barrier: turn %d", turn);
        frpc_fn_stats after = fence_stats();
        CHECK(me == turn || after.calls == before.calls,
              "rank %d counted %llu %s calls for rank %d's deregistrations",
              me, (unsigned long long)(after.calls - before.calls),
              FENCE_NAME, turn);        /* the peers that answer count nothing for them (the header) */
        CHECK(after.handled == before.handled && after.handled == 0,
              "rank %d counted %llu %s requests handled during rank %d's "
              "deregistrations", me,
              (unsigned long long)(after.handled - before.handled),
              FENCE_NAME, turn);
    }
    const char *names[64];
    int n = frpc_fn_stats_names(agent, names, 64), listed = 0;
    CHECK(n >= 0 && n <= 64, "frpc_fn_stats_names: %d", n);
    for (int i = 0; i < n; i++)
        listed |= !strcmp(names[i], FENCE_NAME);
    CHECK(!asks || listed, "%s counted calls but is not listed", FENCE_NAME);
    printf("ok: rank %d: %s's calls counted where it asked (%s)\n", me,
           FENCE_NAME, asks ? "each peer" : "none");
    finish();
    return 0;
}

/* Registers a region peers may read and write, deregisters it: the
 * code, and how long the deregistration took (ms), as two int32. */
static void h_dereg_here(frpc_request *req, void *user)
{
    (void)user;
    int32_t out[2] = {FRPC_ENOMEM, 0};
    size_t alen;
    const void *args = frpc_request_args(req, &alen);
    if (alen == 1 && *(const uint8_t *)args) /* both at once: overlap */
        msleep(300);
    uint8_t *b = calloc(1, FENCE_LEN);
    frpc_mem *m = NULL;
    if (b && (out[0] = frpc_mem_register(agent, b, FENCE_LEN,
                                         FRPC_MEM_REMOTE_READ |
                                             FRPC_MEM_REMOTE_WRITE,
                                         &m)) == 0) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        out[0] = frpc_mem_deregister(m, 20000);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        out[1] = (int32_t)((t1.tv_sec - t0.tv_sec) * 1000 +
                           (t1.tv_nsec - t0.tv_nsec) / 1000000);
    }
    if (out[0] == 0 || !m)
        free(b);
    frpc_respond(req, out, sizeof(out));
}

int mode_fence_in_handler(void)
{
    setenv("FABRPC_THREADS", "1", 1);
    start(FENCE_LEN);
    me = frpc_rank(agent);
    CHECK(world == 2, "fence-in-handler needs 2 ranks");
    CHECK(frpc_register(agent, "dereg_here", h_dereg_here, NULL, 0) == 0,
          "register");
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier: registered");
    if (me == 1) {
        frpc_result res;
        int rc = frpc_call(agent, 0, "dereg_here", NULL, 0, 60000, &res);
        CHECK(rc == 0 && res.len == 8, "dereg_here: %s (%zu bytes)",
              frpc_strerror(rc), res.len);
        int32_t out[2];
        memcpy(out, res.data, sizeof(out));
        frpc_result_clear(&res);
        CHECK(out[0] == 0, "a deregistration in a pool handler of a pool "
              "of one: %s after %d ms", frpc_strerror(out[0]), (int)out[1]);
        printf("ok: a deregistration in the one pool thread's handler: 0 "
               "after %d ms (%s)\n", (int)out[1],
               fence_asks() ? "its peer asked" : "no peer asked");
    }
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier: one");
    /* each rank has the other deregister in its handler, at once */
    uint8_t both = 1;
    frpc_future *f;
    CHECK(frpc_call_async(agent, 1 - me, "dereg_here", &both, 1, 60000, &f) ==
              0,
          "dereg_here, both at once");
    int rc = frpc_future_wait(f, 60000);
    size_t len = 0;
    const int32_t *got = frpc_future_data(f, &len);
    CHECK(rc == 0 && len == 8, "dereg_here, both at once: %s (%zu bytes)",
          frpc_strerror(rc), len);
    int32_t out2[2];
    memcpy(out2, got, sizeof(out2));
    frpc_future_free(f);
    CHECK(out2[0] == 0 && out2[1] < 10000,
          "rank %d's deregistration in its one pool thread, both ranks at "
          "once: %s after %d ms", 1 - me, frpc_strerror(out2[0]),
          (int)out2[1]);
    printf("ok: rank %d deregistered in its one pool thread while this "
           "rank did too: 0 after %d ms\n", 1 - me, (int)out2[1]);
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier: done");
    finish();
    return 0;
}
