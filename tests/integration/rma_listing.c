/*
 * What makes a deregistered region's descriptor fail, and how it ends.
 *
 * rma race: a deregistration racing peers' transfers. Two ranks, rounds
 * of: rank 1 fills 1 MiB with the round's byte, registers it and hands
 * rank 0 its descriptor; rank 0's two threads get the whole slice and put
 * into it again and again; meanwhile rank 1 deregisters the region and
 * at once writes its next use (another byte) into the same memory. A get
 * that returned 0 must hold the round's byte throughout, never a byte of
 * the next use; every transfer after the deregistration returned is
 * refused (FRPC_EACCES); after the round the memory holds the next use
 * only (no put landed after the deregistration). The header's promise
 * ("Peers' descriptors of mem become stale: their transfers fail", and
 * frpc_mem_deregister's wait) on native shm, whose provider checks no
 * key (fabrpc's listing, comm/doorbell.h), and on every provider.
 *
 * rma held-listing (native shm): a peer's transfer that keeps its hold
 * on the listing (a fault: as a peer stalled before its provider gave
 * the transfer back) makes the owner's frpc_mem_deregister end
 * FRPC_ETIMEDOUT, twice; the region stays registered and listed
 * meanwhile and after: the peer's gets from it still work, and bytes
 * are right. The agent's end frees it.
 *
 * rma held-shutdown (native shm): the owner's frpc_shutdown while a
 * live peer keeps its hold: it waits that second (at most), returns 0.
 *
 * rma held-lost (native shm): the peer keeping its hold is killed; once
 * the owner finds it dead, the owner's frpc_mem_deregister returns 0: a
 * lost peer's hold is not waited for.
 *
 * rma listing-full (native shm): with more regions registered at once
 * than a rank lists (1024), the ones past them are served by messages
 * (their bytes arrive as frames: the getter's bytes_received grows by
 * them, a listed region's do not); correct, and stale once deregistered
 * (FRPC_EACCES from the owner); once listed regions go, new ones are
 * listed again.
 *
 * rma slot-reuse (native shm): a stale descriptor whose listing slot a
 * live region took since, in a batch after an op on that live region:
 * the batch is refused (FRPC_EACCES), gets and puts alike, and neither
 * region's bytes nor the local ones change. (A batch shared one hold
 * among ops naming the same slot, whatever their regions: the stale op
 * read and wrote the deregistered memory; found by an audit.)
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fabrpc.h>

#include "check_fail.h"
#include "comm/fault.h"
#include "rma.h"

RMA_DUMP_ON_FAILURE

#define RACE_LEN ((size_t)1 << 20)
#define ROUNDS 20

static int me;
static uint8_t *owned;     /* rank 1's memory, registered each round */
static frpc_mem *owned_mem;
static uint8_t round_byte; /* what the round's region holds */

/* Answers a handler's descriptor d, or rc as its error (what: which). */
static void respond_desc(frpc_request *req, int rc, const uint8_t *d,
                         size_t len, const char *what)
{
    if (rc)
        frpc_respond_error(req, rc, what);
    else
        frpc_respond(req, d, len);
}

static void h_arm(frpc_request *req, void *user)
{
    (void)user;
    uint8_t d[FRPC_MEM_DESC_SIZE];
    memset(owned, round_byte, RACE_LEN);
    int rc = frpc_mem_register(agent, owned, RACE_LEN,
                               FRPC_MEM_REMOTE_READ | FRPC_MEM_REMOTE_WRITE,
                               &owned_mem);
    if (!rc)
        rc = frpc_mem_describe(owned_mem, 0, RACE_LEN, d);
    respond_desc(req, rc, d, sizeof(d), "arm");
}

/* Deregisters and writes the next use at once: the byte after the
 * round's. Answers the deregistration's code. */
static void h_drop(frpc_request *req, void *user)
{
    (void)user;
    int rc = frpc_mem_deregister(owned_mem, 30000);
    if (rc == 0) {
        memset(owned, (uint8_t)(round_byte + 1), RACE_LEN);
        owned_mem = NULL;
    }
    frpc_respond(req, &rc, sizeof(rc));
}

/* The memory after the round: the next use only. */
static void h_look(frpc_request *req, void *user)
{
    (void)user;
    size_t bad = RACE_LEN;
    for (size_t i = 0; i < RACE_LEN && bad == RACE_LEN; i++)
        if (owned[i] != (uint8_t)(round_byte + 1))
            bad = i;
    round_byte += 2;
    frpc_respond(req, &bad, sizeof(bad));
}

typedef struct racer {
    pthread_t t;
    int id;
    const uint8_t *desc;
    uint8_t want;
    atomic_int *dropped; /* the deregistration returned */
    int ok, refused, after_drop_ok;
    char torn[160];
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    uint8_t *buf;
    frpc_mem *local = local_region(RACE_LEN, &buf);
    for (int n = 0; n < 100000; n++) {
        int dropped = atomic_load(r->dropped);
        int put = r->id == 1 && (n & 1);
        if (put)
            memset(buf, r->want, RACE_LEN);
        int rc = put ? frpc_put(local, 0, r->desc, FRPC_MEM_DESC_SIZE, 0,
                                RACE_LEN, TIMEOUT_MS)
                     : frpc_get(local, 0, r->desc, FRPC_MEM_DESC_SIZE, 0,
                                RACE_LEN, TIMEOUT_MS);
        if (rc == FRPC_EACCES) {
            r->refused++;
            if (dropped)
                break;
            continue;
        }
        if (rc != 0) {
            snprintf(r->torn, sizeof(r->torn), "a %s ended %s",
                     put ? "put" : "get", frpc_err_name(rc));
            break;
        }
        r->ok++;
        r->after_drop_ok += dropped;
        for (size_t i = 0; !put && i < RACE_LEN; i++)
            if (buf[i] != r->want) {
                snprintf(r->torn, sizeof(r->torn),
                         "a get returned 0 with byte %zu = 0x%02x, not the "
                         "region's 0x%02x", i, buf[i], r->want);
                break;
            }
        if (r->torn[0])
            break;
    }
    CHECK(frpc_mem_deregister(local, 30000) == 0, "deregister local");
    free(buf);
    return NULL;
}

int mode_race(void)
{
    start(4096);
    me = frpc_rank(agent);
    CHECK(world == 2, "race needs 2 ranks");
    owned = malloc(RACE_LEN);
    CHECK(owned != NULL, "malloc");
    round_byte = 0x10;
    CHECK(frpc_register(agent, "race_arm", h_arm, NULL, 0) == 0 &&
              frpc_register(agent, "race_drop", h_drop, NULL, 0) == 0 &&
              frpc_register(agent, "race_look", h_look, NULL, 0) == 0,
          "register");
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    if (me == 0) {
        int ok = 0, refused = 0;
        uint8_t want = 0x10;
        for (int round = 0; round < ROUNDS; round++, want += 2) {
            uint8_t desc[FRPC_MEM_DESC_SIZE];
            frpc_result res;
            desc_by(1, "race_arm", NULL, 0, desc);
            atomic_int dropped = 0;
            racer r[2];
            for (int i = 0; i < 2; i++) {
                r[i] = (racer){.id = i, .desc = desc, .want = want,
                               .dropped = &dropped};
                CHECK(pthread_create(&r[i].t, NULL, race, &r[i]) == 0,
                      "thread");
            }
            /* Let them start: the deregistration lands amid them. */
            struct timespec ts = {0, (long)(1 + round % 5) * 1000000L};
            nanosleep(&ts, NULL);
            CHECK(frpc_call(agent, 1, "race_drop", NULL, 0, TIMEOUT_MS,
                            &res) == 0 && res.len == sizeof(int) &&
                      *(const int *)res.data == 0,
                  "round %d: the deregistration", round);
            frpc_result_clear(&res);
            atomic_store(&dropped, 1);
            for (int i = 0; i < 2; i++) {
                pthread_join(r[i].t, NULL);
                CHECK(!r[i].torn[0], "round %d, thread %d: %s", round, i,
                      r[i].torn);
                CHECK(r[i].after_drop_ok == 0,
                      "round %d, thread %d: %d transfers succeeded after "
                      "the deregistration returned", round, i,
                      r[i].after_drop_ok);
                ok += r[i].ok;
                refused += r[i].refused;
            }
            CHECK(frpc_call(agent, 1, "race_look", NULL, 0, TIMEOUT_MS,
                            &res) == 0 && res.len == sizeof(size_t),
                  "round %d: look", round);
            size_t bad = *(const size_t *)res.data;
            frpc_result_clear(&res);
            CHECK(bad == RACE_LEN, "round %d: byte %zu of the next use "
                  "changed after the deregistration (a put landed)", round,
                  bad);
        }
        CHECK(refused >= ROUNDS, "only %d transfers were refused", refused);
        printf("ok: %d rounds: %d transfers whole, %d refused after the "
               "deregistration began, none torn nor landed after it\n",
               ROUNDS, ok, refused);
    }
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    finish();
    free(owned);
    return 0;
}

/* ---- held-listing ------------------------------------------------- */

#define HELD_LEN 4096

static void h_try_drop(frpc_request *req, void *user)
{
    (void)user;
    int rc = frpc_mem_deregister(owned_mem, 500);
    if (rc == 0)
        owned_mem = NULL;
    frpc_respond(req, &rc, sizeof(rc));
}

static int try_drop(void)
{
    frpc_result res;
    CHECK(frpc_call(agent, 1, "try_drop", NULL, 0, TIMEOUT_MS, &res) == 0 &&
              res.len == sizeof(int),
          "try_drop");
    int rc = *(const int *)res.data;
    frpc_result_clear(&res);
    return rc;
}

/* A get of the whole region at rank 1 into a fresh local one: its code,
 * and whether every byte was want. */
static int get_whole(const uint8_t *desc, size_t len, uint8_t want,
                     int *whole)
{
    uint8_t *buf;
    frpc_mem *local = local_region(len, &buf);
    int rc = frpc_get(local, 0, desc, FRPC_MEM_DESC_SIZE, 0, len,
                      TIMEOUT_MS);
    *whole = 1;
    for (size_t i = 0; i < len; i++)
        *whole &= buf[i] == want;
    CHECK(frpc_mem_deregister(local, 30000) == 0, "deregister local");
    free(buf);
    return rc;
}

static atomic_int held_go; /* rank 1: rank 0 holds the listing */

static void h_held_go(frpc_request *req, void *user)
{
    (void)user;
    atomic_store(&held_go, 1);
    frpc_respond(req, NULL, 0);
}

/* Both ranks: the agent, rank 1's region armed for rank 0. Rank 0 gets
 * from it once as usual, then once keeping its hold on the listing (a
 * fault: as a peer stalled before its provider gave the transfer back),
 * and answers the descriptor in desc. */
static void held_start(uint8_t desc[FRPC_MEM_DESC_SIZE])
{
    start(4096);
    me = frpc_rank(agent);
    CHECK(world == 2, "the held modes need 2 ranks");
    owned = malloc(RACE_LEN); /* h_arm registers it whole */
    CHECK(owned != NULL, "malloc");
    round_byte = 0x33;
    CHECK(frpc_register(agent, "race_arm", h_arm, NULL, 0) == 0 &&
              frpc_register(agent, "try_drop", h_try_drop, NULL, 0) == 0 &&
              frpc_register(agent, "held_go", h_held_go, NULL, 0) == 0,
          "register");
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    if (me != 0)
        return;
    desc_by(1, "race_arm", NULL, 0, desc);
    int whole, rc = get_whole(desc, HELD_LEN, 0x33, &whole);
    CHECK(rc == 0 && whole, "a get before: %s", frpc_err_name(rc));
    fr_fault_arm(FR_FAULT_HOLD_KEPT, 1);
    rc = get_whole(desc, HELD_LEN, 0x33, &whole);
    CHECK(rc == 0 && whole, "the get that keeps its hold: %s",
          frpc_err_name(rc));
}

/* Rank 1: until rank 0 said it holds the listing. */
static void wait_held_go(void)
{
    double t0 = now_ms();
    while (!atomic_load(&held_go)) {
        CHECK(now_ms() - t0 < TIMEOUT_MS, "rank 0 never said it holds");
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Until rank's state is want (rank 1 ending, rank 0 dying). */
static void wait_state(int rank, int want)
{
    double t0 = now_ms();
    while (frpc_peer_state(agent, rank) != want) {
        CHECK(now_ms() - t0 < TIMEOUT_MS, "rank %d's state stayed %d, "
              "want %d", rank, frpc_peer_state(agent, rank), want);
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
}

/* A file that rank 1 makes once its frpc_shutdown returned: rank 0's
 * own end would end the wait under test (an ended peer gave its holds
 * back), and rank 0 learns that rank 1 left as soon as it began leaving. */
static void ended_mark(char *path, size_t n)
{
    const char *job = getenv("FABRPC_JOB_ID"), *dir = getenv("TMPDIR");
    snprintf(path, n, "%s/fabrpc-held-%s", dir && *dir ? dir : "/tmp",
             job ? job : "nojob");
}

/* After the agent's end: what it left for the application to free. */
static void held_free(void)
{
    if (owned_mem)
        CHECK(frpc_mem_deregister(owned_mem, 0) == 0,
              "free the region after the end");
    CHECK(frpc_mem_deregister(region, 0) == 0, "free the rank's region");
    free(owned);
    free(region_buf);
}

int mode_held_listing(void)
{
    uint8_t desc[FRPC_MEM_DESC_SIZE];
    held_start(desc);
    if (me == 0) {
        for (int round = 0; round < 2; round++) {
            int whole, rc = try_drop();
            CHECK(rc == FRPC_ETIMEDOUT, "round %d: deregistering while a "
                  "peer holds the listing: %s, want FRPC_ETIMEDOUT", round,
                  frpc_err_name(rc));
            rc = get_whole(desc, HELD_LEN, 0x33, &whole);
            CHECK(rc == 0 && whole, "round %d: a get after the "
                  "deregistration timed out: %s%s", round,
                  frpc_err_name(rc), whole ? "" : ", bytes wrong");
        }
        printf("ok: a hold kept by a peer: the deregistration ends "
               "FRPC_ETIMEDOUT, twice; the region still serves gets\n");
    }
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    finish(); /* the end frees the region still held */
    if (owned_mem)
        CHECK(frpc_mem_deregister(owned_mem, 0) == 0,
              "free the region after the end");
    free(owned);
    return 0;
}

/* The header ("Native shm"): frpc_shutdown waits for peers' holds on the
 * rank's regions, at most a second. Rank 1 ends (immediate: rank 0 stays
 * in its job) while rank 0, alive and not ending, keeps its hold: the end
 * takes that second, no more than a few, and returns 0. Rank 0 ends once
 * rank 1's frpc_shutdown returned (ended_mark). */
int mode_held_shutdown(void)
{
    uint8_t desc[FRPC_MEM_DESC_SIZE];
    char mark[512];
    ended_mark(mark, sizeof(mark));
    held_start(desc);
    if (me == 0) {
        /* Rank 1 begins its immediate end as soon as its handler ran,
         * which may fail this call before its answer left (TSan CI:
         * FRPC_EPEERLOST, "peers lost 1"): rank 1 had the request all
         * the same, and what is under test is its end. */
        int rc = frpc_call(agent, 1, "held_go", NULL, 0, TIMEOUT_MS, NULL);
        CHECK(rc == 0 || rc == FRPC_EPEERLOST, "held_go: %s",
              frpc_err_name(rc));
        wait_state(1, FRPC_PEER_LEFT);
        double t0 = now_ms();
        while (access(mark, F_OK) != 0) {
            CHECK(now_ms() - t0 < TIMEOUT_MS, "no %s from rank 1", mark);
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
        unlink(mark);
    } else {
        wait_held_go();
        double t0 = now_ms();
        int rc = frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 60000);
        double ms = now_ms() - t0;
        printf("rank 1: frpc_shutdown with a peer's hold kept: %s after "
               "%.0f ms\n", frpc_err_name(rc), ms);
        FILE *f = fopen(mark, "w");
        CHECK(f != NULL && fclose(f) == 0, "make %s", mark);
        CHECK(rc == 0, "frpc_shutdown: %s", frpc_err_name(rc));
        /* Its own steps take milliseconds here: the second is the wait. */
        CHECK(ms >= 990, "frpc_shutdown returned after %.0f ms: it did not "
              "wait for the peer's hold", ms);
        CHECK(ms < 10000, "frpc_shutdown took %.0f ms with a peer's hold "
              "kept: the wait is at most a second", ms);
        printf("ok: rank 1: its end waited a second for the hold, no "
               "more\n");
    }
    if (me == 0) {
        int rc = frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 60000);
        CHECK(rc == 0, "rank 0's frpc_shutdown: %s", frpc_err_name(rc));
    }
    held_free();
    printf("ok: rank %d done\n", me);
    return 0;
}

/* The header (frpc_mem_deregister): a peer marked lost is not waited for.
 * Rank 0 keeps its hold and kills itself; once rank 1 finds it dead, its
 * deregistration of the held region returns 0 (before its timeout: it
 * would end FRPC_ETIMEDOUT if it waited for the dead rank's hold). */
int mode_held_lost(void)
{
    uint8_t desc[FRPC_MEM_DESC_SIZE];
    held_start(desc);
    if (me == 0) {
        CHECK(frpc_call(agent, 1, "held_go", NULL, 0, TIMEOUT_MS, NULL) == 0,
              "held_go");
        fprintf(stderr, "rank 0: raising SIGKILL, holding rank 1's "
                "listing\n");
        fflush(NULL);
        raise(SIGKILL);
        _exit(99); /* not reached */
    }
    wait_held_go();
    wait_state(0, FRPC_PEER_DEAD);
    double t0 = now_ms();
    int rc = frpc_mem_deregister(owned_mem, 5000);
    double ms = now_ms() - t0;
    printf("rank 1: deregistering the region a dead peer held: %s after "
           "%.0f ms\n", frpc_err_name(rc), ms);
    CHECK(rc == 0, "deregistering the region a dead peer held: %s, want 0",
          frpc_err_name(rc));
    owned_mem = NULL;
    rc = frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 60000);
    CHECK(rc == 0, "frpc_shutdown: %s", frpc_err_name(rc));
    held_free();
    printf("ok: rank 1: a lost peer's hold is not waited for\n");
    return 0;
}

/* ---- listing-full ------------------------------------------------- */

#define FULL_N 1030 /* past the 1024 a rank lists, its own region included */
#define FULL_LEN ((size_t)16 << 10)

static uint8_t *full_buf[FULL_N];
static frpc_mem *full_mem[FULL_N];

static uint8_t full_byte(int i) { return (uint8_t)(0x40 + i % 64); }

static int full_register(int i)
{
    memset(full_buf[i], full_byte(i), FULL_LEN);
    return frpc_mem_register(agent, full_buf[i], FULL_LEN,
                             FRPC_MEM_REMOTE_READ, &full_mem[i]);
}

static int arg_index(frpc_request *req)
{
    size_t len;
    const void *a = frpc_request_args(req, &len);
    int i = -1;
    if (len == sizeof(i))
        memcpy(&i, a, sizeof(i));
    return i >= 0 && i < FULL_N ? i : -1;
}

static void h_full_desc(frpc_request *req, void *user)
{
    (void)user;
    uint8_t d[FRPC_MEM_DESC_SIZE];
    int i = arg_index(req);
    int rc = i < 0 ? FRPC_EINVAL
                   : frpc_mem_describe(full_mem[i], 0, FULL_LEN, d);
    respond_desc(req, rc, d, sizeof(d), "full_desc");
}

/* Deregisters region i, or (a second time) registers it afresh. */
static void h_full_flip(frpc_request *req, void *user)
{
    (void)user;
    int i = arg_index(req), rc = FRPC_EINVAL;
    if (i >= 0 && full_mem[i]) {
        rc = frpc_mem_deregister(full_mem[i], 30000);
        if (rc == 0)
            full_mem[i] = NULL;
    } else if (i >= 0)
        rc = full_register(i);
    frpc_respond(req, &rc, sizeof(rc));
}

static void full_call(const char *fn, int i, void *out, size_t len)
{
    frpc_result res;
    int rc = frpc_call(agent, 1, fn, &i, sizeof(i), TIMEOUT_MS, &res);
    CHECK(rc == 0 && res.len == len, "%s %d: %s", fn, i,
          res.error ? res.error : frpc_strerror(rc));
    memcpy(out, res.data, len);
    frpc_result_clear(&res);
}

/* A get of region i: its code; *frames, the bytes that came as frames
 * meanwhile (bytes_received). */
static int full_get(int i, uint64_t *frames)
{
    uint8_t desc[FRPC_MEM_DESC_SIZE];
    frpc_stats s0, s1;
    int whole;
    desc_by(1, "full_desc", &i, sizeof(i), desc);
    CHECK(frpc_get_stats(agent, &s0) == 0, "stats");
    int rc = get_whole(desc, FULL_LEN, full_byte(i), &whole);
    CHECK(frpc_get_stats(agent, &s1) == 0, "stats");
    *frames = s1.bytes_received - s0.bytes_received;
    CHECK(rc != 0 || whole, "region %d: a get returned 0, bytes wrong", i);
    return rc;
}

int mode_listing_full(void)
{
    start(4096);
    me = frpc_rank(agent);
    CHECK(world == 2, "listing-full needs 2 ranks");
    if (me == 1)
        for (int i = 0; i < FULL_N; i++) {
            full_buf[i] = malloc(FULL_LEN);
            CHECK(full_buf[i] && full_register(i) == 0, "region %d", i);
        }
    CHECK(frpc_register(agent, "full_desc", h_full_desc, NULL, 0) == 0 &&
              frpc_register(agent, "full_flip", h_full_flip, NULL, 0) == 0,
          "register");
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    if (me == 0) {
        const int last = FULL_N - 1, listed = 5;
        uint64_t frames;
        int rc = full_get(listed, &frames);
        CHECK(rc == 0 && frames < FULL_LEN, "a listed region: %s, %llu "
              "bytes as frames", frpc_err_name(rc),
              (unsigned long long)frames);
        rc = full_get(last, &frames);
        CHECK(rc == 0 && frames >= FULL_LEN, "a region past the listing: "
              "%s, %llu bytes as frames (want its %zu served by messages)",
              frpc_err_name(rc), (unsigned long long)frames, FULL_LEN);
        printf("ok: the region past the 1024 listed is served by messages "
               "(%llu bytes as frames), a listed one natively\n",
               (unsigned long long)frames);
        uint8_t stale[FRPC_MEM_DESC_SIZE];
        desc_by(1, "full_desc", &last, sizeof(last), stale);
        full_call("full_flip", last, &rc, sizeof(rc));
        CHECK(rc == 0, "deregister the unlisted region: %s",
              frpc_err_name(rc));
        int whole;
        rc = get_whole(stale, FULL_LEN, full_byte(last), &whole);
        expect(rc, FRPC_EACCES, "a get from the unlisted region, "
               "deregistered");
        /* A listed region goes: the next one registered is listed. */
        full_call("full_flip", listed, &rc, sizeof(rc));
        CHECK(rc == 0, "deregister a listed region");
        full_call("full_flip", last, &rc, sizeof(rc));
        CHECK(rc == 0, "register the last again");
        rc = full_get(last, &frames);
        CHECK(rc == 0 && frames < FULL_LEN, "a region registered once a "
              "slot was free: %s, %llu bytes as frames (want it listed)",
              frpc_err_name(rc), (unsigned long long)frames);
        printf("ok: once a listed region went, the next is listed\n");
    }
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    if (me == 1)
        for (int i = 0; i < FULL_N; i++) {
            if (full_mem[i])
                CHECK(frpc_mem_deregister(full_mem[i], 30000) == 0,
                      "deregister %d", i);
            free(full_buf[i]);
        }
    finish();
    return 0;
}

/* ---- slot-reuse ----------------------------------------------------- */

#define REUSE_LEN 4096

static uint8_t reuse_x[REUSE_LEN], reuse_y[REUSE_LEN];
static frpc_mem *reuse_y_mem;

/* The listing slot a descriptor carries (comm/memdesc.h: bytes 12-15). */
static uint32_t desc_slot(const uint8_t *d)
{
    return (uint32_t)d[12] | (uint32_t)d[13] << 8 | (uint32_t)d[14] << 16 |
           (uint32_t)d[15] << 24;
}

/* X registered, described, deregistered and reused (0x99); then regions
 * registered until one (Y, 0x22) takes X's slot. Answers X's and Y's
 * descriptors. */
static void h_reuse_arm(frpc_request *req, void *user)
{
    (void)user;
    uint8_t d[2][FRPC_MEM_DESC_SIZE];
    frpc_mem *m;
    int rc;
    memset(reuse_x, 0x11, REUSE_LEN);
    memset(reuse_y, 0x22, REUSE_LEN);
    if ((rc = frpc_mem_register(agent, reuse_x, REUSE_LEN, 3, &m)) ||
        (rc = frpc_mem_describe(m, 0, REUSE_LEN, d[0])) ||
        (rc = frpc_mem_deregister(m, 30000))) {
        frpc_respond_error(req, rc, "X");
        return;
    }
    memset(reuse_x, 0x99, REUSE_LEN);
    for (int n = 0; n < 4096 && !rc; n++) {
        if ((rc = frpc_mem_register(agent, reuse_y, REUSE_LEN, 3, &m)) ||
            (rc = frpc_mem_describe(m, 0, REUSE_LEN, d[1])))
            break;
        if (desc_slot(d[1]) == desc_slot(d[0])) {
            reuse_y_mem = m;
            break;
        }
        rc = frpc_mem_deregister(m, 30000);
    }
    respond_desc(req, reuse_y_mem ? 0 : rc ? rc : FRPC_EINVAL,
                 &d[0][0], sizeof(d), "no region took X's slot");
}

/* 0 when X still holds its next use and Y its bytes. */
static void h_reuse_look(frpc_request *req, void *user)
{
    (void)user;
    int bad = 0;
    for (size_t i = 0; i < REUSE_LEN; i++)
        bad += (reuse_x[i] != 0x99) + (reuse_y[i] != 0x22);
    frpc_respond(req, &bad, sizeof(bad));
}

int mode_slot_reuse(void)
{
    start(4096);
    me = frpc_rank(agent);
    CHECK(world == 2, "slot-reuse needs 2 ranks");
    CHECK(frpc_register(agent, "reuse_arm", h_reuse_arm, NULL, 0) == 0 &&
              frpc_register(agent, "reuse_look", h_reuse_look, NULL, 0) == 0,
          "register");
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    if (me == 0) {
        frpc_result res;
        uint8_t d[2][FRPC_MEM_DESC_SIZE];
        CHECK(frpc_call(agent, 1, "reuse_arm", NULL, 0, TIMEOUT_MS, &res) ==
                      0 && res.len == sizeof(d),
              "arm: %s", res.error ? res.error : "");
        memcpy(d, res.data, sizeof(d));
        frpc_result_clear(&res);
        CHECK(desc_slot(d[0]) != 0, "X was listed");
        uint8_t *buf;
        frpc_mem *local = local_region(2 * REUSE_LEN, &buf);
        for (int op = FRPC_XFER_GET; op <= FRPC_XFER_PUT; op++) {
            memset(buf, op == FRPC_XFER_PUT ? 0x55 : 0, 2 * REUSE_LEN);
            frpc_xfer o[2] = {
                {.op = op, .local = local, .desc = d[1],
                 .desc_len = FRPC_MEM_DESC_SIZE, .len = REUSE_LEN},
                {.op = op, .local = local, .local_off = REUSE_LEN,
                 .desc = d[0], .desc_len = FRPC_MEM_DESC_SIZE,
                 .len = REUSE_LEN}};
            expect(frpc_transfer(o, 2, NULL, 0, TIMEOUT_MS), FRPC_EACCES,
                   op == FRPC_XFER_GET
                       ? "a batch of gets [live Y, stale X on Y's slot]"
                       : "a batch of puts [live Y, stale X on Y's slot]");
            for (size_t i = 0; op == FRPC_XFER_GET && i < 2 * REUSE_LEN; i++)
                CHECK(buf[i] == 0, "byte %zu of the refused gets' local "
                      "region changed: 0x%02x", i, buf[i]);
        }
        CHECK(frpc_call(agent, 1, "reuse_look", NULL, 0, TIMEOUT_MS, &res) ==
                      0 && res.len == sizeof(int),
              "look");
        int bad = *(const int *)res.data;
        frpc_result_clear(&res);
        CHECK(bad == 0, "%d bytes of X or Y changed by refused batches",
              bad);
        CHECK(frpc_mem_deregister(local, 30000) == 0, "deregister local");
        free(buf);
        printf("ok: a stale descriptor on a live region's slot: batches "
               "refused, no byte moved\n");
    }
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    if (reuse_y_mem)
        CHECK(frpc_mem_deregister(reuse_y_mem, 30000) == 0, "deregister Y");
    finish();
    return 0;
}
