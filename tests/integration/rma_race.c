/*
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
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fabrpc.h>

#include "check_fail.h"
#include "rma.h"

RMA_DUMP_ON_FAILURE

#define RACE_LEN ((size_t)1 << 20)
#define ROUNDS 20

static int me;
static uint8_t *owned;     /* rank 1's memory, registered each round */
static frpc_mem *owned_mem;
static uint8_t round_byte; /* what the round's region holds */

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
    if (rc)
        frpc_respond_error(req, rc, "arm");
    else
        frpc_respond(req, d, sizeof(d));
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
            CHECK(frpc_call(agent, 1, "race_arm", NULL, 0, TIMEOUT_MS,
                            &res) == 0 && res.len == sizeof(desc),
                  "round %d: arm", round);
            memcpy(desc, res.data, sizeof(desc));
            frpc_result_clear(&res);
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
