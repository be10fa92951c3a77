/*
 * rma unmapped: two ranks; rank 1 registers 12 MiB of its own mmap'ed
 * memory (three pieces of 4 MiB), hands rank 0 its descriptor, then
 * unmaps it: natively on shm while it is still registered (against the
 * header's rule, as a process dying mid-copy leaves it: a deregistered
 * region is refused before anything is posted there, rma.c "bad"), and
 * it deregisters it at the end; emulated, deregistered first (its owner
 * copies: unmapped memory would kill it). Rank 0's transfers through
 * that descriptor must end FRPC_EACCES long before their timeouts: a 64 B
 * get, a 12 MiB put, an async 12 MiB get waited for without a limit, and
 * a 4 MiB get with FRPC_TIMEOUT_NONE. Natively on shm the provider copies
 * as it posts and reports the failed copy without saying which transfer
 * it was (libfabric 1.17): before the ledger (comm/ledger.c) each ended
 * only at its timeout, never without one, and its local region stayed
 * busy. (The verdict waits about a second for liveness: the same report
 * comes when the owner dies mid-copy, FRPC_EPEERLOST then.) Then the
 * local region deregisters at once, no provider report is left
 * unmatched, and a get from rank 1's good region works.
 * Run on shm (native) and emulated; native tcp has the "told" mode.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <fabrpc.h>

#include "check_fail.h"
#include "rma.h"

RMA_DUMP_ON_FAILURE

#define GONE_LEN ((size_t)12 << 20)
/* Long enough that a transfer which waited for it is told from one that
 * was failed at once, on a loaded machine too. */
#define GONE_TIMEOUT_MS 60000
#define AT_ONCE_MS 30000

static int me;
static void *gone;
static frpc_mem *gone_mem;
static uint8_t gone_desc[FRPC_MEM_DESC_SIZE];

static void h_gone_desc(frpc_request *req, void *user)
{
    (void)user;
    frpc_respond(req, gone_desc, sizeof(gone_desc));
}

static void h_unmap(frpc_request *req, void *user)
{
    (void)user;
    int rc = 0;
    if (rma_emulated()) {
        rc = frpc_mem_deregister(gone_mem, 10000);
        gone_mem = NULL;
    }
    if (rc == 0 && munmap(gone, GONE_LEN) != 0)
        rc = FRPC_EINVAL;
    frpc_respond(req, &rc, sizeof(rc));
}


/* One transfer through the stale descriptor: FRPC_EACCES, long before
 * its timeout (about a second: liveness has its say). */
static void fails_at_once(int rc, double t0, const char *what)
{
    double ms = now_ms() - t0;
    CHECK(rc == FRPC_EACCES && ms < AT_ONCE_MS,
          "%s through a descriptor of unmapped memory: %s after %.0f ms, "
          "want FRPC_EACCES well before the timeout", what, frpc_err_name(rc), ms);
    printf("ok: %s: FRPC_EACCES after %.0f ms\n", what, ms);
}

int mode_unmapped(void)
{
    start(4096);
    me = frpc_rank(agent);
    CHECK(world == 2, "unmapped needs 2 ranks");
    if (me == 1) {
        gone = map_region(GONE_LEN, 0x5a,
                          FRPC_MEM_REMOTE_READ | FRPC_MEM_REMOTE_WRITE,
                          &gone_mem, gone_desc);
    }
    CHECK(frpc_register(agent, "gone_desc", h_gone_desc, NULL, 0) == 0 &&
              frpc_register(agent, "unmap", h_unmap, NULL, 0) == 0,
          "register");
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    if (me == 0) {
        uint8_t stale[FRPC_MEM_DESC_SIZE];
        frpc_result res;
        desc_by(1, "gone_desc", NULL, 0, stale);
        CHECK(frpc_call(agent, 1, "unmap", NULL, 0, TIMEOUT_MS, &res) == 0 &&
                  res.len == sizeof(int) &&
                  *(const int *)res.data == 0,
              "rank 1 deregisters and unmaps");
        frpc_result_clear(&res);

        frpc_stats s0, s1;
        CHECK(frpc_get_stats(agent, &s0) == 0, "stats");
        uint8_t *lbuf;
        frpc_mem *local = local_region(GONE_LEN, &lbuf);
        double t0 = now_ms();
        fails_at_once(frpc_get(local, 0, stale, sizeof(stale), 0, 64,
                               GONE_TIMEOUT_MS), t0, "a 64 B get");
        t0 = now_ms();
        fails_at_once(frpc_put(local, 0, stale, sizeof(stale), 0, GONE_LEN,
                               GONE_TIMEOUT_MS), t0, "a 12 MiB put");
        frpc_future *f;
        int rc;
        t0 = now_ms();
        CHECK(frpc_get_async(local, 0, stale, sizeof(stale), 0, GONE_LEN,
                             FRPC_TIMEOUT_NONE, &f) == 0, "async get");
        rc = frpc_future_wait(f, FRPC_TIMEOUT_NONE);
        CHECK(rc == frpc_future_error(f, NULL, NULL),
              "the wait's status and the future's differ");
        fails_at_once(rc, t0, "an async 12 MiB get without a time limit");
        frpc_future_free(f);
        t0 = now_ms();
        fails_at_once(frpc_get(local, 0, stale, sizeof(stale), 0, 4 << 20,
                               FRPC_TIMEOUT_NONE), t0,
                      "a 4 MiB get without a time limit");
        t0 = now_ms();
        rc = frpc_mem_deregister(local, 10000);
        CHECK(rc == 0, "the local region after those: %s",
              frpc_err_name(rc));
        free(lbuf);
        CHECK(frpc_get_stats(agent, &s1) == 0, "stats");
        CHECK(s1.cq_errors_unmatched == s0.cq_errors_unmatched,
              "%llu provider reports left unmatched",
              (unsigned long long)(s1.cq_errors_unmatched -
                                   s0.cq_errors_unmatched));
        printf("ok: the local region deregistered in %.0f ms; no report "
               "left unmatched\n", now_ms() - t0);

        uint8_t good[FRPC_MEM_DESC_SIZE];
        desc_of(1, good);
        local = local_region(4096, &lbuf);
        rc = frpc_get(local, 0, good, sizeof(good), 0, 4096, TIMEOUT_MS);
        CHECK(rc == 0 && verify(lbuf, 4096, 1, 0) == 4096,
              "a get from rank 1's good region: %s", frpc_strerror(rc));
        CHECK(frpc_mem_deregister(local, 10000) == 0, "deregister local");
        free(lbuf);
        printf("ok: a get from the good region after them\n");
    }
    CHECK(frpc_barrier(agent, 60000) == 0, "barrier");
    if (gone_mem) /* natively: still registered, its memory long gone */
        CHECK(frpc_mem_deregister(gone_mem, 10000) == 0,
              "deregister the unmapped region");
    finish();
    return 0;
}
