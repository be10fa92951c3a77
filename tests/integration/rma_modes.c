/*
 * rma modes: how one-sided transfers move bytes (config.rma, FABRPC_RMA),
 * run by rma_cases.sh (with RMA_MODES=1) through fabrpc-run.
 *
 *   modes     one rank: FABRPC_RMA=bogus and config.rma = 7 fail
 *             frpc_init with FRPC_EINVAL naming them; native where the
 *             provider's test registration fails (a fault armed) fails
 *             with FRPC_ENOBACKEND saying why; native where it works says
 *             "rma: native" and moves bytes; auto where the registration
 *             fails falls back to "rma: emulated (...)" and moves bytes,
 *             a deregistered region's descriptor then getting FRPC_EACCES;
 *             auto where it works says native, but on sockets and udp
 *             emulated saying why (their RMA can stall);
 *             FABRPC_RMA=native says native; FABRPC_RMA=emulate says it
 *             was forced, and moves bytes.
 *   fallback  two ranks, auto: rank 1's test registration fails, so it
 *             emulates while rank 0 stays native; each gets from and puts
 *             into the other (1 B to 9 MiB, pieces of 4 MiB), sync and
 *             async, checked by the owner: the modes work together.
 *             Then rank 1's polling thread is held for 1.5 s: rank 0's
 *             emulated get times out at its 300 ms, a cancelled one ends
 *             at once, and deregistering rank 0's region waits for the
 *             cancelled get's piece; a cancelled get of 6 pieces writes
 *             nothing past its first window (stalled_owner).
 *   dereg-shutdown  two ranks, emulated: rank 1's polling thread is held,
 *             so rank 0's get from it stays out; a thread of rank 0's
 *             deregisters the get's local region (no timeout) and is
 *             still waiting when rank 0's main thread shuts down
 *             (immediate): the get ends FRPC_ESHUTDOWN, the deregister
 *             FRPC_ESHUTDOWN with the region kept (it returned 0 and
 *             freed it), and a deregister after the shutdown frees it.
 *   held-owner  two ranks: rank 1's polling thread is held (an inline
 *             handler sleeping 6 s) while rank 0 gets 4 KiB from it with
 *             a 1 s timeout. The header: natively over tcp the provider
 *             moves the bytes in the owner's polls, so the get ends
 *             FRPC_ETIMEDOUT at its timeout; native shm completes it
 *             without the owner (0, before the stall ends); emulated,
 *             FRPC_ETIMEDOUT on every provider. Either way the agents
 *             keep working: once the stall is over a get succeeds and the
 *             region deregisters.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fabrpc.h>

#include "check_fail.h"
#include "comm/fault.h"
#include "rma.h"

RMA_DUMP_ON_FAILURE

static void report_has(frpc_agent *a, const char *want)
{
    char rep[2048];
    frpc_backend_report(a, rep, sizeof(rep));
    CHECK(strstr(rep, want), "the backend report lacks \"%s\":\n%s", want,
          rep);
    printf("ok: the report says \"%s\"\n", want);
}

/* frpc_init with cfg.rma = rma (and errbuf): its code, err filled. */
static int init(int rma, frpc_agent **a, char *err, size_t errlen)
{
    frpc_config cfg;
    frpc_config_init(&cfg);
    cfg.rma = rma;
    cfg.errbuf = err;
    cfg.errbuf_len = errlen;
    err[0] = '\0';
    return frpc_init(&cfg, a);
}

static void init_fails(int rma, int want, const char *needle,
                       const char *what)
{
    char err[1024];
    frpc_agent *a = NULL;
    int rc = init(rma, &a, err, sizeof(err));
    CHECK(rc == want && !a && strstr(err, needle),
          "%s: %s, \"%s\" (want %s naming \"%s\")", what, frpc_err_name(rc),
          err, frpc_err_name(want), needle);
    printf("ok: %s -> %s: %s\n", what, frpc_err_name(want), err);
}

/* A get and a put of 64 KiB between two regions of this rank's own, the
 * second deregistered afterwards; its descriptor then gets stale_rc (0:
 * not checked). */
static void self_transfers(frpc_agent *a, int stale_rc)
{
    enum { N = 65536 };
    uint8_t *src = malloc(N), *dst = malloc(N);
    uint8_t desc[FRPC_MEM_DESC_SIZE];
    frpc_mem *ms, *md;
    CHECK(src && dst, "malloc");
    fill(src, N, 5, 0);
    memset(dst, 0, N);
    CHECK(frpc_mem_register(a, src, N, FRPC_MEM_REMOTE_READ |
                                           FRPC_MEM_REMOTE_WRITE, &ms) == 0 &&
              frpc_mem_register(a, dst, N, 0, &md) == 0,
          "register");
    CHECK(frpc_mem_describe(ms, 0, N, desc) == 0, "describe");
    int rc = frpc_get(md, 0, desc, sizeof(desc), 0, N, 20000);
    CHECK(rc == 0 && verify(dst, N, 5, 0) == N, "get from itself: %s",
          frpc_strerror(rc));
    fill(dst, N, 6, 0);
    rc = frpc_put(md, 0, desc, sizeof(desc), 0, N, 20000);
    CHECK(rc == 0 && verify(src, N, 6, 0) == N, "put to itself: %s",
          frpc_strerror(rc));
    printf("ok: a get and a put of %d B to itself\n", N);
    CHECK(frpc_mem_deregister(ms, 10000) == 0, "deregister");
    if (stale_rc)
        expect(frpc_get(md, 0, desc, sizeof(desc), 0, 8, 5000), stale_rc,
               "a deregistered region's descriptor");
    CHECK(frpc_mem_deregister(md, 10000) == 0, "deregister");
    free(src);
    free(dst);
}

static void down(frpc_agent *a)
{
    int rc = frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, 30000);
    CHECK(rc == 0, "frpc_shutdown: %s", frpc_strerror(rc));
}

int mode_modes(void)
{
    char err[1024];
    frpc_agent *a;
    me = 0;
    unsetenv("FABRPC_RMA");

    setenv("FABRPC_RMA", "bogus", 1);
    init_fails(FRPC_UNSET, FRPC_EINVAL, "FABRPC_RMA", "FABRPC_RMA=bogus");
    unsetenv("FABRPC_RMA");
    init_fails(7, FRPC_EINVAL, "config.rma", "config.rma = 7");
    fr_fault_arm(FR_FAULT_RMA_PROBE, 1);
    init_fails(FRPC_RMA_NATIVE, FRPC_ENOBACKEND, "refused a test "
               "registration", "native where the provider's RMA fails");
    fr_fault_arm(FR_FAULT_RMA_PROBE, 0);

    int rc = init(FRPC_RMA_NATIVE, &a, err, sizeof(err));
    CHECK(rc == 0, "native: frpc_init: %s: %s", frpc_strerror(rc), err);
    report_has(a, "rma: native");
    self_transfers(a, 0);
    down(a);

    fr_fault_arm(FR_FAULT_RMA_PROBE, 1);
    rc = init(FRPC_RMA_AUTO, &a, err, sizeof(err));
    fr_fault_arm(FR_FAULT_RMA_PROBE, 0);
    CHECK(rc == 0, "auto, RMA failing: frpc_init: %s: %s", frpc_strerror(rc),
          err);
    report_has(a, "rma: emulated (provider ");
    self_transfers(a, FRPC_EACCES);
    down(a);

    /* auto where RMA works: native, but for sockets and udp
     * (rpc/fabrpc.h), whose RMA can stall. */
    rc = init(FRPC_RMA_AUTO, &a, err, sizeof(err));
    CHECK(rc == 0, "auto: frpc_init: %s: %s", frpc_strerror(rc), err);
    const char *prov = getenv("FABRPC_PROVIDER");
    const char *fragile =
        !prov                    ? NULL
        : !strcmp(prov, "sockets") ? "rma: emulated (provider sockets: its "
                                     "RMA can stall"
        : !strcmp(prov, "udp")     ? "rma: emulated (provider udp;ofi_rxd: "
                                     "an RMA its owner refuses"
                                   : NULL;
    report_has(a, fragile ? fragile : "rma: native");
    self_transfers(a, fragile ? FRPC_EACCES : 0);
    down(a);

    setenv("FABRPC_RMA", "native", 1);
    rc = init(FRPC_UNSET, &a, err, sizeof(err));
    CHECK(rc == 0, "FABRPC_RMA=native: frpc_init: %s: %s", frpc_strerror(rc),
          err);
    report_has(a, "rma: native");
    down(a);
    setenv("FABRPC_RMA", "emulate", 1);
    rc = init(FRPC_UNSET, &a, err, sizeof(err));
    CHECK(rc == 0, "emulate: frpc_init: %s: %s", frpc_strerror(rc), err);
    report_has(a, "rma: emulated (forced by FABRPC_RMA=emulate)");
    self_transfers(a, FRPC_EACCES);
    down(a);
    unsetenv("FABRPC_RMA");
    printf("ok: rank %d done\n", me);
    return 0;
}

/* Holds the polling thread of the rank it runs on (FRPC_INLINE) for 6 s:
 * far longer than what stalled_owner does meanwhile, even on a loaded
 * machine (it was 1.5 s). */
static void h_stall(frpc_request *req, void *user)
{
    (void)user;
    struct timespec ts = {6, 0};
    nanosleep(&ts, NULL);
    frpc_respond(req, NULL, 0);
}


/* Starts an inline "stall" call on rank (6 s) and returns once it holds
 * that rank's poll; the caller waits for and frees the future. */
static frpc_future *hold_poll_of(int rank)
{
    frpc_future *stall;
    int rc = frpc_call_async(agent, rank, "stall", NULL, 0, TIMEOUT_MS,
                             &stall);
    CHECK(rc == 0, "stall: %s", frpc_strerror(rc));
    struct timespec ts = {0, 500000000};
    nanosleep(&ts, NULL); /* it holds the rank's poll now */
    return stall;
}

/* Rank 1 serves emulated transfers only when it polls: while its polling
 * thread is held for 6 s, a get with a 300 ms timeout ends
 * FRPC_ETIMEDOUT at its time (3 s allows for a loaded machine and still
 * tells it from the stall's end), a cancelled one FRPC_ECANCELED at once, and
 * deregistering the local region waits for the cancelled one's piece
 * (FRPC_ETIMEDOUT with 1 ms to wait), then succeeds once it came back. */
#define CANCEL_LEN ((20u << 20) + 5) /* 6 emulated pieces of 4 MiB or less */
static void stalled_owner(frpc_mem *local, uint8_t *lbuf,
                          const uint8_t *desc)
{
    frpc_future *stall = hold_poll_of(1), *g;
    double t0 = now_ms();
    int rc = frpc_get(local, 0, desc, FRPC_MEM_DESC_SIZE, 0, 4096, 300);
    double ms = now_ms() - t0;
    CHECK(rc == FRPC_ETIMEDOUT && ms < 3000, "a get from a stalled owner: "
          "%s after %.0f ms", frpc_err_name(rc), ms);
    printf("ok: a get from a stalled owner ended FRPC_ETIMEDOUT after "
           "%.0f ms (300 ms timeout)\n", ms);
    rc = frpc_get_async(local, 0, desc, FRPC_MEM_DESC_SIZE, 0, 4096,
                        TIMEOUT_MS, &g);
    CHECK(rc == 0, "get_async: %s", frpc_strerror(rc));
    CHECK(frpc_future_cancel(g) == 0 &&
              frpc_future_error(g, NULL, NULL) == FRPC_ECANCELED,
          "cancel of a get from a stalled owner");
    frpc_future_free(g);
    printf("ok: a get from a stalled owner cancelled\n");
    expect(frpc_mem_deregister(local, 1), FRPC_ETIMEDOUT,
           "deregistering while the cancelled get's piece is out");
    /* A cancelled get of 6 pieces: only its first window (16 MiB, 4
     * pieces) was sent; the rest must not go once the owner is back, nor
     * write the local region. Before, every piece went, writing it for
     * seconds after the cancel (probe: 5 cancelled 32 MiB gets). */
    const size_t window = (size_t)16 << 20;
    memset(lbuf + window, 0xee, CANCEL_LEN - window);
    frpc_stats s0, s1;
    CHECK(frpc_get_stats(agent, &s0) == 0, "stats");
    rc = frpc_get_async(local, 0, desc, FRPC_MEM_DESC_SIZE, 0, CANCEL_LEN,
                        TIMEOUT_MS, &g);
    CHECK(rc == 0, "get_async of %u B: %s", CANCEL_LEN, frpc_strerror(rc));
    CHECK(frpc_future_cancel(g) == 0, "cancel of a large get");
    frpc_future_free(g);
    CHECK(frpc_future_wait(stall, TIMEOUT_MS) == 0 &&
              frpc_future_error(stall, NULL, NULL) == 0,
          "the stall call");
    frpc_future_free(stall);
    double w0 = now_ms();
    do { /* the pieces out come back */
        CHECK(frpc_get_stats(agent, &s1) == 0, "stats");
        CHECK(now_ms() - w0 < 60000, "%llu calls still in flight",
              (unsigned long long)s1.calls_in_flight);
    } while (s1.calls_in_flight > 0);
    size_t kept = 0;
    while (kept < CANCEL_LEN - window && lbuf[window + kept] == 0xee)
        kept++;
    CHECK(kept == CANCEL_LEN - window, "a cancelled get wrote byte %zu of "
          "the local region, past its first window, after its cancel",
          window + kept);
    printf("ok: a cancelled 6-piece get wrote nothing past its first "
           "window (%llu calls started)\n",
           (unsigned long long)(s1.calls_started - s0.calls_started));
}

int mode_fallback(void)
{
    static const size_t sizes[] = {1, 4097, (9u << 20) + 5};
    const size_t max = CANCEL_LEN + 64;
    int rank = atoi(getenv("FABRPC_RANK") ? getenv("FABRPC_RANK") : "0");
    unsetenv("FABRPC_RMA");
    if (rank == 1)
        fr_fault_arm(FR_FAULT_RMA_PROBE, 1);
    start(max);
    me = frpc_rank(agent);
    CHECK(frpc_register(agent, "stall", h_stall, NULL, FRPC_INLINE) == 0,
          "register stall");
    report_has(agent, me == 1 ? "rma: emulated (provider " : "rma: native");
    int peer = (me + 1) % world;
    uint8_t desc[FRPC_MEM_DESC_SIZE];
    desc_of(peer, desc);
    uint8_t *lbuf = malloc(max);
    frpc_mem *local;
    CHECK(lbuf && frpc_mem_register(agent, lbuf, max, 0, &local) == 0,
          "register the local side");
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t len = sizes[k], roff = 3 + k;
        memset(lbuf, 0, max);
        int rc = frpc_get(local, 11, desc, sizeof(desc), roff, len,
                          TIMEOUT_MS);
        CHECK(rc == 0 && verify(lbuf + 11, len, (uint32_t)peer, roff) == len,
              "get %zu B from rank %d: %s", len, peer, frpc_strerror(rc));
    }
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier"); /* gets done */
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t len = sizes[k], roff = 3 + k;
        uint32_t seed = (uint32_t)(400 + me * 10 + k);
        fill(lbuf, len, seed, 0);
        frpc_future *f;
        int rc = frpc_put_async(local, 0, desc, sizeof(desc), roff, len,
                                TIMEOUT_MS, &f);
        CHECK(rc == 0, "put_async: %s", frpc_strerror(rc));
        CHECK(frpc_future_wait(f, TIMEOUT_MS) == 0 &&
                  frpc_future_error(f, NULL, NULL) == 0,
              "put %zu B to rank %d", len, peer);
        frpc_future_free(f);
        owner_check(peer, roff, len, seed);
    }
    printf("ok: rank %d (%s) got from and put into rank %d (%s)\n", me,
           me == 1 ? "emulated" : "native", peer,
           peer == 1 ? "emulated" : "native");
    if (me == 0)
        stalled_owner(local, lbuf, desc);
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier"); /* stall over */
    CHECK(frpc_mem_deregister(local, 10000) == 0, "deregister local");
    free(lbuf);
    finish();
    return 0;
}

/* 1 MiB: before the fix such a deregister returned 0 (and freed mem);
 * with 4 KiB it happened to see the shutdown first. */
#define DS_LEN (1u << 20)

static frpc_mem *dereg_mem;
static _Atomic int dereg_rc = 1; /* no FRPC_E* code: still waiting */

static void *deregister_thread(void *arg)
{
    (void)arg;
    atomic_store(&dereg_rc, frpc_mem_deregister(dereg_mem, FRPC_TIMEOUT_NONE));
    return NULL;
}

int mode_dereg_shutdown(void)
{
    start(DS_LEN);
    me = frpc_rank(agent);
    CHECK(world == 2, "dereg-shutdown needs 2 ranks");
    CHECK(rma_emulated(), "dereg-shutdown needs FABRPC_RMA=emulate");
    CHECK(frpc_register(agent, "stall", h_stall, NULL, FRPC_INLINE) == 0,
          "register stall");
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    if (me == 1) {
        /* Held by rank 0's stall call (6 s); rank 0 leaves meanwhile. */
        double t0 = now_ms();
        while (frpc_peer_state(agent, 0) == FRPC_PEER_ALIVE) {
            CHECK(now_ms() - t0 < 60000, "rank 0 still here after 60 s");
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
        frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 5000);
        printf("ok: rank 1 done\n");
        return 0;
    }
    uint8_t desc[FRPC_MEM_DESC_SIZE];
    desc_of(1, desc);
    uint8_t *lbuf;
    frpc_mem *local = local_region(DS_LEN, &lbuf);
    frpc_future *stall = hold_poll_of(1), *g;
    int rc = frpc_get_async(local, 0, desc, sizeof(desc), 0, DS_LEN, TIMEOUT_MS,
                        &g);
    CHECK(rc == 0, "get_async: %s", frpc_strerror(rc));
    dereg_mem = local;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, deregister_thread, NULL) == 0,
          "pthread_create");
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    CHECK(atomic_load(&dereg_rc) == 1 && !frpc_future_test(g),
          "before the shutdown: deregister %s, the get %s (want both "
          "waiting: rank 1's poll is held)",
          atomic_load(&dereg_rc) == 1 ? "waiting"
                                      : frpc_err_name(atomic_load(&dereg_rc)),
          frpc_future_test(g) ? "ended" : "out");
    rc = frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 5000);
    CHECK(pthread_join(th, NULL) == 0, "pthread_join");
    printf("shutdown: %s; the deregister waiting in it: %s; the get: %s\n",
           frpc_err_name(rc), frpc_err_name(atomic_load(&dereg_rc)),
           frpc_err_name(frpc_future_error(g, NULL, NULL)));
    CHECK(frpc_future_error(g, NULL, NULL) == FRPC_ESHUTDOWN,
          "the get: %s, want FRPC_ESHUTDOWN",
          frpc_err_name(frpc_future_error(g, NULL, NULL)));
    CHECK(atomic_load(&dereg_rc) == FRPC_ESHUTDOWN,
          "the deregister waiting for it: %s, want FRPC_ESHUTDOWN (mem kept)",
          frpc_err_name(atomic_load(&dereg_rc)));
    rc = frpc_mem_deregister(local, 1000);
    CHECK(rc == 0, "deregister after the shutdown: %s", frpc_err_name(rc));
    printf("ok: a deregister that shutdown ended: FRPC_ESHUTDOWN, then 0 "
           "after it\n");
    frpc_future_free(g);
    frpc_future_free(stall);
    free(lbuf);
    agent = NULL;
    printf("ok: rank 0 done\n");
    return 0;
}

/* What the header says a get from a held owner does (see the top). */
static int held_get_want(void)
{
    if (rma_emulated())
        return FRPC_ETIMEDOUT;
    const char *p = getenv("FABRPC_PROVIDER");
    if (p && !strcmp(p, "shm"))
        return 0;
    if (p && !strcmp(p, "tcp"))
        return FRPC_ETIMEDOUT;
    return -1; /* the header promises nothing here */
}

int mode_held_owner(void)
{
    enum { N = 4096, HELD_TIMEOUT_MS = 1000 };
    start(N);
    me = frpc_rank(agent);
    CHECK(world == 2, "held-owner needs 2 ranks");
    int want = held_get_want();
    CHECK(want != -1, "held-owner: run it on shm or tcp, or emulated");
    CHECK(frpc_register(agent, "stall", h_stall, NULL, FRPC_INLINE) == 0,
          "register stall");
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier"); /* stall known */
    if (me == 0) {
        uint8_t desc[FRPC_MEM_DESC_SIZE];
        desc_of(1, desc);
        uint8_t *lbuf;
        frpc_mem *local = local_region(N, &lbuf);
        frpc_future *stall = hold_poll_of(1);
        double t0 = now_ms();
        int rc = frpc_get(local, 0, desc, sizeof(desc), 0, N, HELD_TIMEOUT_MS);
        double ms = now_ms() - t0;
        int stall_over = frpc_future_test(stall);
        printf("a get from a held owner (%s): %s after %.0f ms (timeout "
               "%d ms); the stall %s\n", rma_emulated() ? "emulated"
                                                        : "native",
               frpc_err_name(rc), ms, HELD_TIMEOUT_MS,
               stall_over ? "over" : "still on");
        /* 4.5 s: well before the 6 s stall ends, so that a get which
         * waited for it is told from one that did not. */
        CHECK(rc == want && ms < 4500 && !stall_over,
              "a get from a held owner: %s after %.0f ms, want %s before "
              "the stall ends", frpc_err_name(rc), ms, frpc_err_name(want));
        if (want == 0)
            CHECK(verify(lbuf, N, 1, 0) == N, "the bytes of that get");
        CHECK(frpc_future_wait(stall, TIMEOUT_MS) == 0 &&
                  frpc_future_error(stall, NULL, NULL) == 0,
              "the stall call");
        frpc_future_free(stall);
        memset(lbuf, 0, N);
        rc = frpc_get(local, 0, desc, sizeof(desc), 0, N, TIMEOUT_MS);
        CHECK(rc == 0 && verify(lbuf, N, 1, 0) == N,
              "a get once the stall is over: %s", frpc_strerror(rc));
        CHECK(frpc_mem_deregister(local, 10000) == 0, "deregister local");
        free(lbuf);
        printf("ok: a get from a held owner: %s, as the header says; after "
               "the stall a get works\n", frpc_err_name(want));
    }
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    finish();
    return 0;
}
