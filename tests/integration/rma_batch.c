/*
 * rma's batch and notify modes (see rma.c for the others).
 *
 *   batch   every rank, to the next one: 1,000 puts of 4 KiB at odd
 *           offsets in one async batch with a notification; the owner,
 *           once it takes the notification, finds every byte there. Then
 *           300 gets and 300 puts in one sync batch (gets checked here,
 *           puts by the owner), a descriptor packed with frpc_mp_pack_mem,
 *           and batches refused whole before anything is posted (a bad
 *           descriptor among good ops, two owners, bad arguments), and
 *           a batch of 20,000 puts with a 1 ms timeout: FRPC_ETIMEDOUT,
 *           only the puts posted before its deadline counted, and the
 *           bytes they moved in transfer_bytes.
 *   notify  per-source order of notifications sent alone and after
 *           batches, to a thread that takes them while the sender goes on
 *           (with FABRPC_NOTIFY_QUEUE small, a sender meets FRPC_EAGAIN
 *           and tries again); a full queue refusing a notification and a
 *           batch's, nothing lost; FRPC_ETOOBIG leaving it queued; the
 *           callback, in order; to itself; bad arguments.
 *   notebig with FABRPC_MAX_MSG=300 on both ranks: a batch whose
 *           notification (512 B) is over this rank's config.max_msg_size
 *           fails FRPC_ETOOBIG before anything is posted (the owner's
 *           bytes untouched, no put counted; async: *out NULL); with one
 *           of 200 B it runs, and the owner takes it with the bytes there;
 *           one with notify set but notify_len 0 sends none.
 *   ownersmall  rank 1 with FABRPC_MAX_MSG=300, rank 0 not: a notification
 *           over 300 B to rank 1, alone or after a batch (whose bytes
 *           land), fails FRPC_ETOOBIG sent back by rank 1; emulated, so
 *           does a get or put whose piece is over it (natively they work),
 *           and a batch of one, whose notification is then not sent.
 *   longbatch  2 ranks: rank 0 puts LONG_OPS (70,000) bytes one by one in
 *           one batch with a notification, more ops than a callee's
 *           window of request ids (rpc/dedup.h): emulated, each op is a
 *           request, and the notification went under the batch's own id,
 *           70,000 below the newest: over udp it was dropped as a
 *           duplicate and the batch timed out. Rank 1 takes it with every
 *           byte there, and has dropped no request as a duplicate.
 *   cycles  RMA_CYCLES (10,000) register / describe / get / deregister of one
 *           buffer: the resident set stays flat (no leak per cycle; not
 *           checked under AddressSanitizer, whose quarantine grows).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_fail.h"
#include "rss.h"
#include "rma.h"

RMA_DUMP_ON_FAILURE

#define MIB ((size_t)1 << 20)

static void stats(frpc_stats *st)
{
    CHECK(frpc_get_stats(agent, st) == 0, "frpc_get_stats");
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- batch ------------------------------------------------------------ */

#define PUTS 1000
#define PUT_LEN 4096
#define PUT_STRIDE 4100 /* and odd starts: 3 + i * stride */
#define MIX 300
#define GET_AT (4 * MIB + 512 * 1024)
#define GET_LEN 5000
#define GET_STRIDE 5003
#define MIXPUT_AT (6 * MIB + 200 * 1024)
#define MIXPUT_LEN 3000

static uint32_t put_seed(int rank) { return 1000u + (uint32_t)rank; }

/* The 1,000 puts to next, async, with a notification naming this rank. */
static frpc_future *put_thousand(frpc_mem *l, const uint8_t *next_desc)
{
    static frpc_xfer ops[PUTS];
    for (size_t i = 0; i < PUTS; i++)
        ops[i] = (frpc_xfer){.op = FRPC_XFER_PUT, .local = l,
                             .local_off = 3 + i * PUT_STRIDE,
                             .desc = next_desc,
                             .desc_len = FRPC_MEM_DESC_SIZE,
                             .remote_off = 3 + i * PUT_STRIDE,
                             .len = PUT_LEN};
    char note[32];
    int n = snprintf(note, sizeof(note), "puts from %d", me);
    frpc_future *f;
    int rc = frpc_transfer_async(ops, PUTS, note, (size_t)n, TIMEOUT_MS, &f);
    CHECK(rc == 0 && f, "async batch of %d puts: %s", PUTS, frpc_strerror(rc));
    return f;
}

/* Takes prev's notification and checks, at once, every byte it put. */
static void take_puts(int prev)
{
    char note[FRPC_NOTIFY_MAX], want[32];
    size_t len;
    int src = -1;
    int rc = frpc_notify_wait(agent, &src, note, sizeof(note), &len,
                              TIMEOUT_MS);
    CHECK(rc == 0, "notification of the puts: %s", frpc_strerror(rc));
    int n = snprintf(want, sizeof(want), "puts from %d", prev);
    CHECK(src == prev && len == (size_t)n && !memcmp(note, want, len),
          "notification from %d: \"%.*s\"", src, (int)len, note);
    for (size_t i = 0; i < PUTS; i++) {
        size_t off = 3 + i * PUT_STRIDE;
        size_t bad = verify(region_buf + off, PUT_LEN, put_seed(prev), off);
        CHECK(bad == PUT_LEN, "put %zu of %d: byte %zu not there when its "
              "notification was taken", i, PUTS, bad);
    }
    printf("ok: %d puts of %d B from rank %d all in place when their "
           "notification was taken\n", PUTS, PUT_LEN, prev);
}

/* 300 gets and 300 puts in one sync batch. */
static void mixed(frpc_mem *l, uint8_t *lbuf, const uint8_t *next_desc,
                  int next)
{
    frpc_xfer ops[2 * MIX];
    fill(lbuf + MIXPUT_AT, MIX * MIXPUT_LEN, 77u + (uint32_t)me, 0);
    memset(lbuf, 0, MIX * GET_STRIDE);
    for (size_t i = 0; i < MIX; i++) {
        ops[2 * i] = (frpc_xfer){.op = FRPC_XFER_GET, .local = l,
                                 .local_off = i * GET_STRIDE,
                                 .desc = next_desc,
                                 .desc_len = FRPC_MEM_DESC_SIZE,
                                 .remote_off = GET_AT + i * GET_STRIDE,
                                 .len = GET_LEN};
        ops[2 * i + 1] = (frpc_xfer){.op = FRPC_XFER_PUT, .local = l,
                                     .local_off = MIXPUT_AT + i * MIXPUT_LEN,
                                     .desc = next_desc,
                                     .desc_len = FRPC_MEM_DESC_SIZE,
                                     .remote_off = MIXPUT_AT + i * MIXPUT_LEN,
                                     .len = MIXPUT_LEN};
    }
    frpc_stats s0, s1;
    stats(&s0);
    int rc = frpc_transfer(ops, 2 * MIX, NULL, 0, TIMEOUT_MS);
    CHECK(rc == 0, "sync batch of %d gets and %d puts: %s", MIX, MIX,
          frpc_strerror(rc));
    stats(&s1);
    CHECK(s1.transfers_get - s0.transfers_get == MIX &&
              s1.transfers_put - s0.transfers_put == MIX &&
              s1.transfer_batches - s0.transfer_batches == 1,
          "counted: %llu gets, %llu puts, %llu batches",
          (unsigned long long)(s1.transfers_get - s0.transfers_get),
          (unsigned long long)(s1.transfers_put - s0.transfers_put),
          (unsigned long long)(s1.transfer_batches - s0.transfer_batches));
    for (size_t i = 0; i < MIX; i++) {
        size_t bad = verify(lbuf + i * GET_STRIDE, GET_LEN, (uint32_t)next,
                            GET_AT + i * GET_STRIDE);
        CHECK(bad == GET_LEN, "get %zu: byte %zu wrong", i, bad);
    }
    owner_check(next, MIXPUT_AT, MIX * MIXPUT_LEN, 77u + (uint32_t)me);
    printf("ok: one batch of %d gets and %d puts (gets and puts checked, "
           "counted)\n", MIX, MIX);
}

/* A packer's write that takes what fits in 8 bytes and refuses the rest,
 * as a buffer that cannot grow does; data counts the bytes taken. */
static int refuse_write(void *data, const char *buf, size_t len)
{
    size_t *written = data;
    (void)buf;
    if (*written + len > 8)
        return -1;
    *written += len;
    return 0;
}

/* A descriptor through msgpack, as a program would send it. */
static void packed_desc(frpc_mem *l, uint8_t *lbuf, int next)
{
    frpc_mp_buf b;
    frpc_mp_view v;
    frpc_mp_buf_init(&b);
    /* Our own region's slice [GET_AT, +4096) */
    CHECK(frpc_mp_pack_mem(&b.pk, region, GET_AT, 4096) == 0, "pack mem");
    CHECK(frpc_mp_parse(b.sbuf.data, b.sbuf.size, &v) == 0, "parse");
    CHECK(v.obj.type == MSGPACK_OBJECT_BIN &&
              v.obj.via.bin.size == FRPC_MEM_DESC_SIZE,
          "a bin of %d bytes", FRPC_MEM_DESC_SIZE);
    memset(lbuf, 0, 4096);
    int rc = frpc_get(l, 0, v.obj.via.bin.ptr, v.obj.via.bin.size, 0, 4096,
                      TIMEOUT_MS);
    CHECK(rc == 0 && verify(lbuf, 4096, (uint32_t)me, GET_AT) == 4096,
          "get through a packed descriptor: %s", frpc_strerror(rc));
    frpc_mp_view_free(&v);
    frpc_mp_buf_destroy(&b);
    expect(frpc_mp_pack_mem(NULL, region, 0, 1), FRPC_EINVAL,
           "frpc_mp_pack_mem without a packer");
    frpc_mp_buf_init(&b);
    expect(frpc_mp_pack_mem(&b.pk, region, region_len, 1), FRPC_EINVAL,
           "frpc_mp_pack_mem of a slice outside the region");
    frpc_mp_buf_destroy(&b);
    /* A packer that cannot take the bytes: FRPC_ENOMEM and nothing
     * written (a bin's header without its bytes would garble what the
     * program packs after it). */
    size_t written = 0;
    msgpack_packer full;
    msgpack_packer_init(&full, &written, refuse_write);
    expect(frpc_mp_pack_mem(&full, region, 0, 1), FRPC_ENOMEM,
           "frpc_mp_pack_mem into a packer that refuses");
    CHECK(written == 0, "%zu bytes written before the refusal", written);
    (void)next;
}

/* Batches refused whole: nothing posted, the refusal counted. */
static void refused(frpc_mem *l, uint8_t *lbuf, const uint8_t *next_desc,
                    int next)
{
    uint8_t junk[FRPC_MEM_DESC_SIZE];
    frpc_xfer ops[3];
    frpc_stats s0, s1;
    size_t at = 7 * MIB + 300 * 1024; /* nobody else writes here */

    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(rand() & 0xff);
    fill(lbuf, 4096, 5u, 0);
    ops[0] = (frpc_xfer){.op = FRPC_XFER_PUT, .local = l, .desc = next_desc,
                         .desc_len = FRPC_MEM_DESC_SIZE, .remote_off = at,
                         .len = 4096};
    ops[1] = ops[0];
    ops[1].desc = junk;
    stats(&s0);
    expect(frpc_transfer(ops, 2, NULL, 0, TIMEOUT_MS), FRPC_EPROTO,
           "a batch with random bytes for one descriptor");
    stats(&s1);
    CHECK(s1.transfers_refused == s0.transfers_refused + 1 &&
              s1.transfers_put == s0.transfers_put,
          "refused and not posted");
    /* The good op before the bad one did not run. */
    memset(lbuf, 0, 4096);
    int rc = frpc_get(l, 0, next_desc, FRPC_MEM_DESC_SIZE, at, 4096,
                      TIMEOUT_MS);
    CHECK(rc == 0 && verify(lbuf, 4096, (uint32_t)next, at) == 4096,
          "the owner's bytes untouched by a refused batch: %s",
          frpc_strerror(rc));
    printf("ok: nothing of a refused batch was posted\n");

    /* A NULL descriptor is a wrong argument, as for frpc_get: not a
     * refused transfer. */
    ops[1] = ops[0];
    ops[1].desc = NULL;
    stats(&s0);
    expect(frpc_transfer(ops, 2, NULL, 0, TIMEOUT_MS), FRPC_EINVAL,
           "a batch with a NULL descriptor");
    stats(&s1);
    CHECK(s1.transfers_refused == s0.transfers_refused &&
              s1.transfers_put == s0.transfers_put,
          "a NULL descriptor counted as refused (%llu -> %llu) or posted",
          (unsigned long long)s0.transfers_refused,
          (unsigned long long)s1.transfers_refused);
    printf("ok: a NULL descriptor in a batch: FRPC_EINVAL, not counted\n");

    ops[1] = ops[0];
    ops[1].desc = mydesc; /* another owner: this rank */
    stats(&s0);
    expect(frpc_transfer(ops, 2, NULL, 0, TIMEOUT_MS), FRPC_EINVAL,
           "a batch to two owners");
    stats(&s1);
    CHECK(s1.transfers_refused == s0.transfers_refused + 1 &&
              s1.transfers_put == s0.transfers_put,
          "a batch to two owners: refused %llu -> %llu, not posted",
          (unsigned long long)s0.transfers_refused,
          (unsigned long long)s1.transfers_refused);
    ops[1] = ops[0];
    ops[1].op = 7;
    expect(frpc_transfer(ops, 2, NULL, 0, TIMEOUT_MS), FRPC_EINVAL,
           "an unknown op");
    ops[1] = ops[0];
    ops[1].local = NULL;
    expect(frpc_transfer(ops, 2, NULL, 0, TIMEOUT_MS), FRPC_EINVAL,
           "a NULL local region");
    ops[1] = ops[0];
    ops[1].remote_off = region_len;
    expect(frpc_transfer(ops, 2, NULL, 0, TIMEOUT_MS), FRPC_EINVAL,
           "a slice outside the owner's");
    char big[FRPC_NOTIFY_MAX + 1] = {0};
    expect(frpc_transfer(ops, 1, big, sizeof(big), TIMEOUT_MS), FRPC_EINVAL,
           "a notification over FRPC_NOTIFY_MAX");
    expect(frpc_transfer(ops, 1, NULL, 4, TIMEOUT_MS), FRPC_EINVAL,
           "a NULL notification of 4 bytes");
    expect(frpc_transfer(ops, 0, NULL, 0, TIMEOUT_MS), FRPC_EINVAL,
           "an empty batch");
    expect(frpc_transfer((const frpc_xfer *)NULL, 1, NULL, 0, TIMEOUT_MS),
           FRPC_EINVAL, "NULL ops");
    expect(frpc_transfer_sized(ops, 1, sizeof(int), NULL, 0, TIMEOUT_MS),
           FRPC_EINVAL, "an op size smaller than any frpc_xfer");
    /* Stepping by it would read outside ops (before: an out-of-bounds
     * read, ASan). */
    expect(frpc_transfer_sized(ops, 2, SIZE_MAX, NULL, 0, TIMEOUT_MS),
           FRPC_EINVAL, "an op size no frpc_xfer will have");
    expect(frpc_transfer_sized(ops, 2, 1025, NULL, 0, TIMEOUT_MS),
           FRPC_EINVAL, "an op size over 1024");
    frpc_future *f = (frpc_future *)1;
    expect(frpc_transfer_async(ops, 0, NULL, 0, TIMEOUT_MS, &f), FRPC_EINVAL,
           "an empty async batch");
    CHECK(f == NULL, "*out NULL on an error");
    expect(frpc_transfer_async_sized(ops, 1, sizeof(*ops), NULL, 0,
                                     TIMEOUT_MS, NULL),
           FRPC_EINVAL, "an async batch without out");
    /* A batch that moves nothing completes at once. */
    ops[0].len = 0;
    frpc_stats before, after;
    frpc_get_stats(agent, &before);
    expect(frpc_transfer(ops, 1, NULL, 0, TIMEOUT_MS), 0,
           "a batch of one op of 0 bytes");
    frpc_get_stats(agent, &after);
    CHECK(after.transfer_batches == before.transfer_batches + 1,
          "a batch of 0 bytes is counted as posted: %llu -> %llu",
          (unsigned long long)before.transfer_batches,
          (unsigned long long)after.transfer_batches);
}

/* A batch whose deadline passes while it posts: posting stops there, and
 * transfers_put counts only the puts posted. In 1 ms no provider here
 * takes 20,000 puts of 4 KiB (80 MB), so fewer than all are posted. */
#define TIMED_OPS 20000

static void timed_out(frpc_mem *l, const uint8_t *next_desc)
{
    frpc_xfer *ops = calloc(TIMED_OPS, sizeof(*ops));
    CHECK(ops, "calloc");
    for (size_t i = 0; i < TIMED_OPS; i++) {
        size_t off = (i % (8 * MIB / PUT_LEN)) * PUT_LEN;
        ops[i] = (frpc_xfer){.op = FRPC_XFER_PUT, .local = l,
                             .local_off = off, .desc = next_desc,
                             .desc_len = FRPC_MEM_DESC_SIZE,
                             .remote_off = off, .len = PUT_LEN};
    }
    frpc_stats s0, s1;
    stats(&s0);
    int rc = frpc_transfer(ops, TIMED_OPS, NULL, 0, 1);
    stats(&s1);
    free(ops);
    CHECK(rc == FRPC_ETIMEDOUT, "a batch of %d puts of %d B with a 1 ms "
          "timeout: %s", TIMED_OPS, PUT_LEN, frpc_err_name(rc));
    uint64_t posted = s1.transfers_put - s0.transfers_put;
    CHECK(posted < TIMED_OPS && s1.transfers_get == s0.transfers_get &&
              s1.transfer_batches - s0.transfer_batches == 1,
          "the timed-out batch counted %llu puts posted (want fewer than "
          "%d), %llu gets, %llu batches", (unsigned long long)posted,
          TIMED_OPS,
          (unsigned long long)(s1.transfers_get - s0.transfers_get),
          (unsigned long long)(s1.transfer_batches - s0.transfer_batches));
    /* Nothing more is posted once it has ended. */
    int drc = frpc_mem_deregister(l, 10000);
    CHECK(drc == 0, "deregister local: %s", frpc_strerror(drc));
    stats(&s1);
    CHECK(s1.transfers_put - s0.transfers_put == posted, "%llu puts "
          "posted after the batch ended",
          (unsigned long long)(s1.transfers_put - s0.transfers_put - posted));
    /* The header (transfer_bytes): what moved counts, also of a batch
     * whose deadline kept ops back. Natively each put posted moves; an
     * emulated one moves if its piece's call ended 0 (one piece each). */
    uint64_t moved = s1.transfer_bytes - s0.transfer_bytes;
    uint64_t want = (rma_emulated() ? s1.calls_ok - s0.calls_ok : posted) *
                    PUT_LEN;
    CHECK(moved == want, "the timed-out batch's transfer_bytes: %llu, want "
          "%llu (%llu posted, %llu pieces ok)", (unsigned long long)moved,
          (unsigned long long)want, (unsigned long long)posted,
          (unsigned long long)(s1.calls_ok - s0.calls_ok));
    printf("ok: a batch of %d puts with a 1 ms timeout: FRPC_ETIMEDOUT, %llu "
           "of them posted and counted, %llu bytes moved counted\n",
           TIMED_OPS, (unsigned long long)posted, (unsigned long long)moved);
}

int mode_batch(void)
{
    start(8 * MIB);
    me = frpc_rank(agent);
    int next = (me + 1) % world, prev = (me + world - 1) % world;
    uint8_t next_desc[FRPC_MEM_DESC_SIZE], *lbuf;
    desc_of(next, next_desc);
    frpc_mem *l = local_region(8 * MIB, &lbuf);

    fill(lbuf, 8 * MIB, put_seed(me), 0);
    frpc_future *f = put_thousand(l, next_desc);
    take_puts(prev);
    int rc = frpc_future_wait(f, TIMEOUT_MS);
    const char *why = NULL;
    frpc_future_error(f, NULL, &why);
    CHECK(rc == 0, "the batch of puts: %s: %s", frpc_err_name(rc),
          why ? why : "");
    CHECK(frpc_future_data(f, NULL) == NULL, "a batch's future has no data");
    frpc_future_free(f);
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");

    mixed(l, lbuf, next_desc, next);
    packed_desc(l, lbuf, next);
    refused(l, lbuf, next_desc, next);
    timed_out(l, next_desc); /* deregisters l */
    free(lbuf);
    finish();
    return 0;
}

/* ---- longbatch -------------------------------------------------------- */

#define LONG_OPS 70000 /* > FR_DEDUP_WINDOW (65,536) */
#define LONG_SEED 77u

int mode_longbatch(void)
{
    start(LONG_OPS);
    me = frpc_rank(agent);
    CHECK(world == 2, "longbatch needs 2 ranks");
    if (me == 0) {
        uint8_t desc[FRPC_MEM_DESC_SIZE], *lbuf;
        desc_of(1, desc);
        frpc_mem *l = local_region(LONG_OPS, &lbuf);
        fill(lbuf, LONG_OPS, LONG_SEED, 0);
        frpc_xfer *ops = calloc(LONG_OPS, sizeof(*ops));
        CHECK(ops, "calloc");
        for (size_t i = 0; i < LONG_OPS; i++)
            ops[i] = (frpc_xfer){.op = FRPC_XFER_PUT, .local = l,
                                 .local_off = i, .desc = desc,
                                 .desc_len = FRPC_MEM_DESC_SIZE,
                                 .remote_off = i, .len = 1};
        frpc_stats before, after;
        stats(&before);
        uint64_t t0 = now_ns();
        int rc = frpc_transfer(ops, LONG_OPS, "long", 4, TIMEOUT_MS);
        stats(&after);
        CHECK(rc == 0, "a batch of %d puts of 1 B with a notification: %s",
              LONG_OPS, frpc_err_name(rc));
        printf("ok: a batch of %d puts of 1 B and its notification in %.0f "
               "ms (%s, %llu calls)\n", LONG_OPS, (double)(now_ns() - t0) / 1e6,
               rma_emulated() ? "emulated" : "native",
               (unsigned long long)(after.calls_started - before.calls_started));
        free(ops);
        CHECK(frpc_mem_deregister(l, 10000) == 0, "deregister local");
        free(lbuf);
    } else {
        char note[8];
        size_t len;
        int src = -1;
        int rc = frpc_notify_wait(agent, &src, note, sizeof(note), &len,
                                  TIMEOUT_MS);
        CHECK(rc == 0 && src == 0 && len == 4 && !memcmp(note, "long", 4),
              "the long batch's notification: %s", frpc_err_name(rc));
        size_t bad = verify(region_buf, LONG_OPS, LONG_SEED, 0);
        CHECK(bad == LONG_OPS, "byte %zu of the long batch not there when "
              "its notification was taken", bad);
        frpc_stats st;
        stats(&st);
        CHECK(st.requests_duplicate == 0, "%llu requests dropped as "
              "duplicates", (unsigned long long)st.requests_duplicate);
        printf("ok: the notification taken with all %d bytes there, no "
               "request dropped as a duplicate\n", LONG_OPS);
    }
    finish();
    return 0;
}

/* ---- notify ----------------------------------------------------------- */

#define ORDERED 300
#define QUEUE 8 /* FABRPC_NOTIFY_QUEUE in the case script */

typedef struct note {
    uint32_t src, seq;
} note;

/* Sends n to dst, trying again while dst's queue is full. */
static void send_note(int dst, note n, frpc_mem *l, const uint8_t *desc)
{
    for (;;) {
        int rc;
        if (n.seq % 2 || !l) {
            rc = frpc_notify(agent, dst, &n, sizeof(n), TIMEOUT_MS);
        } else {
            frpc_xfer op = {.op = FRPC_XFER_PUT, .local = l,
                            .desc = desc, .desc_len = FRPC_MEM_DESC_SIZE,
                            .remote_off = (size_t)me * 64, .len = 64};
            rc = frpc_transfer(&op, 1, &n, sizeof(n), TIMEOUT_MS);
        }
        if (rc == 0)
            return;
        CHECK(rc == FRPC_EAGAIN, "notification %u to %d: %s", n.seq, dst,
              frpc_strerror(rc));
        nap_ms(1);
    }
}

/* Takes `count` notifications from each of `from` ranks; each source's
 * sequence numbers must come 0, 1, 2, ... */
typedef struct taker {
    int count, from;
} taker;

static void *take_ordered(void *arg)
{
    taker *t = arg;
    uint32_t *next_seq = calloc((size_t)world, sizeof(*next_seq));
    CHECK(next_seq, "calloc");
    for (int i = 0; i < t->count * t->from; i++) {
        note n;
        size_t len;
        int src;
        int rc = frpc_notify_wait(agent, &src, &n, sizeof(n), &len,
                                  TIMEOUT_MS);
        CHECK(rc == 0, "take %d: %s", i, frpc_strerror(rc));
        CHECK(len == sizeof(n) && n.src == (uint32_t)src &&
                  src >= 0 && src < world,
              "notification %d: %zu bytes from %d", i, len, src);
        CHECK(n.seq == next_seq[src], "from rank %d: %u came before %u",
              src, n.seq, next_seq[src]);
        next_seq[src]++;
    }
    free(next_seq);
    return NULL;
}

static void ordered(void)
{
    int next = (me + 1) % world, prev = (me + world - 1) % world;
    uint8_t next_desc[FRPC_MEM_DESC_SIZE], *lbuf;
    desc_of(next, next_desc);
    frpc_mem *l = local_region(4096, &lbuf);
    pthread_t th;
    taker t = {.count = ORDERED, .from = 1};
    CHECK(pthread_create(&th, NULL, take_ordered, &t) == 0, "thread");
    for (uint32_t s = 0; s < ORDERED; s++)
        send_note(next, (note){.src = (uint32_t)me, .seq = s}, l, next_desc);
    pthread_join(th, NULL);
    CHECK(frpc_mem_deregister(l, 10000) == 0, "deregister");
    free(lbuf);
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
    printf("ok: %d notifications from rank %d, alone and after batches, "
           "taken in order while the queue of %d filled\n", ORDERED, prev,
           QUEUE);
}

/* Rank 0 fills rank 1's queue; the next notification and a batch's are
 * refused, and rank 1 then finds the first QUEUE, in order. */
static void full_queue(void)
{
    frpc_stats s0, s1;
    stats(&s0);
    /* Everyone's counters read before rank 0 starts (CI: rank 1 read
     * them after the refusals). */
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
    if (me == 0) {
        uint8_t desc1[FRPC_MEM_DESC_SIZE], *lbuf;
        desc_of(1, desc1);
        frpc_mem *l = local_region(4096, &lbuf);
        for (uint32_t s = 0; s < QUEUE; s++) {
            note n = {.src = 0, .seq = s};
            int rc = frpc_notify(agent, 1, &n, sizeof(n), TIMEOUT_MS);
            CHECK(rc == 0, "notification %u: %s", s, frpc_strerror(rc));
        }
        note n = {.src = 0, .seq = QUEUE};
        expect(frpc_notify(agent, 1, &n, sizeof(n), TIMEOUT_MS), FRPC_EAGAIN,
               "a notification to a full queue");
        frpc_xfer op = {.op = FRPC_XFER_PUT, .local = l, .desc = desc1,
                        .desc_len = FRPC_MEM_DESC_SIZE, .len = 64};
        expect(frpc_transfer(&op, 1, &n, sizeof(n), TIMEOUT_MS), FRPC_EAGAIN,
               "a batch's notification to a full queue");
        CHECK(frpc_mem_deregister(l, 10000) == 0, "deregister");
        free(lbuf);
    }
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
    if (me == 1) {
        for (uint32_t s = 0; s < QUEUE; s++) {
            note n;
            size_t len;
            int src;
            int rc = frpc_notify_wait(agent, &src, &n, sizeof(n), &len,
                                      TIMEOUT_MS);
            CHECK(rc == 0 && src == 0 && n.seq == s,
                  "queued %u: %s, seq %u", s, frpc_strerror(rc), n.seq);
        }
        size_t len;
        expect(frpc_notify_wait(agent, NULL, NULL, 0, &len, 100),
               FRPC_ETIMEDOUT, "nothing more: the refused ones never came");
        stats(&s1);
        CHECK(s1.notifications_refused - s0.notifications_refused == 2,
              "refusals counted: %llu",
              (unsigned long long)(s1.notifications_refused -
                                   s0.notifications_refused));
    }
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
}

/* Too small a buffer leaves the notification queued. */
static void too_small(void)
{
    char msg[100], buf[FRPC_NOTIFY_MAX];
    for (size_t i = 0; i < sizeof(msg); i++)
        msg[i] = (char)i;
    if (me == 0)
        CHECK(frpc_notify(agent, 1, msg, sizeof(msg), TIMEOUT_MS) == 0,
              "notify 100 B");
    if (me == 1) {
        size_t len = 0;
        int src = -1;
        expect(frpc_notify_wait(agent, &src, buf, 10, &len, TIMEOUT_MS),
               FRPC_ETOOBIG, "taking 100 B into 10");
        CHECK(len == sizeof(msg), "the length it needs: %zu", len);
        expect(frpc_notify_wait(agent, &src, buf, sizeof(buf), &len,
                                TIMEOUT_MS),
               0, "then into 512");
        CHECK(src == 0 && len == sizeof(msg) && !memcmp(buf, msg, len),
              "the same notification, whole");
    }
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
}

static _Atomic int cb_seen;
static _Atomic int cb_bad;

static void on_note(frpc_agent *a, int src, const void *msg, size_t len,
                    void *user)
{
    note n;
    (void)a;
    if (user != &cb_seen || len != sizeof(n) || src != 0) {
        cb_bad = 1;
        return;
    }
    memcpy(&n, msg, sizeof(n));
    if (n.seq != (uint32_t)cb_seen)
        cb_bad = 1;
    cb_seen++;
}

/* The callback takes them in order; then the queue again. */
static void callback(void)
{
    enum { N = 50 };
    if (me == 1)
        CHECK(frpc_on_notify(agent, on_note, &cb_seen) == 0, "on_notify");
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
    if (me == 0)
        for (uint32_t s = 0; s < N; s++)
            send_note(1, (note){.src = 0, .seq = s}, NULL, NULL);
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
    if (me == 1) {
        CHECK(cb_seen == N && !cb_bad, "callback saw %d of %d (in order: %s)",
              (int)cb_seen, N, cb_bad ? "no" : "yes");
        CHECK(frpc_on_notify(agent, NULL, NULL) == 0, "on_notify NULL");
        printf("ok: the callback took %d notifications in order\n", N);
    }
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
    if (me == 0)
        send_note(1, (note){.src = 0, .seq = 0}, NULL, NULL);
    if (me == 1) {
        note n;
        size_t len;
        int src;
        int rc = frpc_notify_wait(agent, &src, &n, sizeof(n), &len,
                                  TIMEOUT_MS);
        CHECK(rc == 0 && src == 0 && cb_seen == N,
              "queued again once the callback is gone: %s",
              frpc_strerror(rc));
    }
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
}

static _Atomic int slow_in, slow_runs;

/* A callback that takes a while (it spins: a callback must not sleep). */
static void slow_note(frpc_agent *a, int src, const void *msg, size_t len,
                      void *user)
{
    (void)a, (void)src, (void)msg, (void)len, (void)user;
    slow_in = 1;
    slow_runs++;
    uint64_t until = now_ns() + 30 * 1000000ull;
    while (now_ns() < until)
        ;
    slow_in = 0;
}

/* Turns itself off from inside: must not wait for its own run. */
static void once_note(frpc_agent *a, int src, const void *msg, size_t len,
                      void *user)
{
    (void)src, (void)msg, (void)len;
    ++*(_Atomic int *)user;
    CHECK(frpc_on_notify(a, NULL, NULL) == 0, "on_notify NULL in fn");
}

/* Takes what the queue holds now (a barrier made sure all came). */
static int drain_queue(void)
{
    int n = 0;
    note m;
    size_t len;
    while (frpc_notify_wait(agent, NULL, &m, sizeof(m), &len, 1) == 0)
        n++;
    return n;
}

/* frpc_on_notify returns once the old callback is done: a run going on
 * on the polling thread is waited for (its user may be freed next), and
 * from inside the callback it does not wait for itself. Nothing is lost:
 * what the callback did not take is queued. */
static void callback_ends(void)
{
    enum { N = 6 }; /* below QUEUE */
    static _Atomic int once_runs;
    if (me == 1)
        CHECK(frpc_on_notify(agent, slow_note, NULL) == 0, "on_notify");
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
    if (me == 0)
        for (uint32_t s = 0; s < N; s++)
            send_note(1, (note){.src = 0, .seq = s}, NULL, NULL);
    if (me == 1) {
        uint64_t give_up = now_ns() + 20ull * 1000000000ull;
        while (!slow_in && now_ns() < give_up)
            nap_ms(1);
        CHECK(slow_in, "the slow callback never ran");
        CHECK(frpc_on_notify(agent, NULL, NULL) == 0, "on_notify NULL");
        CHECK(!slow_in, "frpc_on_notify returned while the old callback "
                        "still ran");
        int runs = slow_runs;
        CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
        int queued = drain_queue();
        CHECK(slow_runs == runs && runs + queued == N,
              "after frpc_on_notify: %d more runs; %d ran + %d queued of %d",
              (int)slow_runs - runs, runs, queued, N);
        CHECK(frpc_on_notify(agent, once_note, &once_runs) == 0,
              "on_notify");
        printf("ok: frpc_on_notify waited for a running callback "
               "(%d ran, %d queued)\n", runs, queued);
    } else {
        CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
    }
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
    if (me == 0)
        for (uint32_t s = 0; s < 3; s++)
            send_note(1, (note){.src = 0, .seq = s}, NULL, NULL);
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
    if (me == 1) {
        int queued = drain_queue();
        CHECK(once_runs == 1 && queued == 2,
              "a callback that turned itself off ran %d times, %d queued",
              (int)once_runs, queued);
        printf("ok: a callback turned itself off from inside\n");
    }
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
}

static void never_called(frpc_request *req, void *user)
{
    (void)user;
    frpc_respond_error(req, 1, "never registered");
}

static void bad_arguments(void)
{
    char m[FRPC_NOTIFY_MAX + 1] = {0};
    size_t len;
    int src;
    expect(frpc_notify(agent, 0, m, sizeof(m), TIMEOUT_MS), FRPC_EINVAL,
           "a notification of FRPC_NOTIFY_MAX + 1 bytes");
    expect(frpc_notify(agent, 0, NULL, 5, TIMEOUT_MS), FRPC_EINVAL,
           "a NULL notification of 5 bytes");
    expect(frpc_notify(NULL, 0, m, 1, TIMEOUT_MS), FRPC_EINVAL,
           "frpc_notify with no agent");
    expect(frpc_notify(agent, world, m, 1, TIMEOUT_MS), FRPC_ENORANK,
           "a notification to a rank outside the job");
    expect(frpc_notify_wait(agent, &src, m, 1, NULL, 10), FRPC_EINVAL,
           "frpc_notify_wait without len");
    expect(frpc_notify_wait(agent, &src, NULL, 1, &len, 10), FRPC_EINVAL,
           "frpc_notify_wait with a NULL buf of 1 byte");
    expect(frpc_notify_wait(NULL, &src, m, 1, &len, 10), FRPC_EINVAL,
           "frpc_notify_wait with no agent");
    expect(frpc_notify_wait(agent, &src, m, sizeof(m), &len, 50),
           FRPC_ETIMEDOUT, "frpc_notify_wait with nothing coming");
    expect(frpc_on_notify(NULL, on_note, NULL), FRPC_EINVAL,
           "frpc_on_notify with no agent");
    expect(frpc_register(agent, "frpc.mine", never_called, NULL, 0),
           FRPC_EINVAL, "registering a name fabrpc keeps");
    /* To itself, an empty one. */
    expect(frpc_notify(agent, me, NULL, 0, TIMEOUT_MS), 0,
           "an empty notification to itself");
    expect(frpc_notify_wait(agent, &src, NULL, 0, &len, TIMEOUT_MS), 0,
           "taking it");
    CHECK(src == me && len == 0, "from itself, empty");
}

int mode_notify(void)
{
    start(64 * 1024);
    me = frpc_rank(agent);
    CHECK(world >= 2, "notify needs 2 ranks");
    bad_arguments();
    CHECK(frpc_barrier(agent, TIMEOUT_MS) == 0, "barrier");
    ordered();
    full_queue();
    too_small();
    callback();
    callback_ends();
    finish();
    return 0;
}

/* ---- notebig --------------------------------------------------------- */

int mode_notebig(void)
{
    start(64 * 1024);
    me = frpc_rank(agent);
    CHECK(world == 2, "notebig needs 2 ranks");
    if (me == 0) {
        uint8_t desc[FRPC_MEM_DESC_SIZE], *lbuf;
        frpc_mem *l = local_region(4096, &lbuf);
        char note[FRPC_NOTIFY_MAX];
        frpc_stats s0, s1;
        desc_of(1, desc);
        fill(lbuf, 4096, 9u, 0);
        memset(note, 'n', sizeof(note));
        frpc_xfer op = {.op = FRPC_XFER_PUT, .local = l, .desc = desc,
                        .desc_len = FRPC_MEM_DESC_SIZE, .remote_off = 100,
                        .len = 4096};
        stats(&s0);
        expect(frpc_transfer(&op, 1, note, sizeof(note), TIMEOUT_MS),
               FRPC_ETOOBIG, "a batch's notification over this rank's "
               "max_msg_size");
        frpc_future *f = (frpc_future *)1;
        expect(frpc_transfer_async(&op, 1, note, sizeof(note), TIMEOUT_MS,
                                   &f),
               FRPC_ETOOBIG, "the same, async");
        CHECK(f == NULL, "*out NULL on an error");
        stats(&s1);
        CHECK(s1.transfers_put == s0.transfers_put &&
                  s1.transfer_batches == s0.transfer_batches,
              "refused batches posted %llu puts",
              (unsigned long long)(s1.transfers_put - s0.transfers_put));
        int rc = frpc_get(l, 0, desc, FRPC_MEM_DESC_SIZE, 100, 4096,
                          TIMEOUT_MS);
        CHECK(rc == 0 && verify(lbuf, 4096, 1u, 100) == 4096,
              "the owner's bytes untouched by the refused batches: %s",
              frpc_strerror(rc));
        printf("ok: nothing of them was posted\n");
        fill(lbuf, 4096, 9u, 0);
        /* notify_len 0 sends no notification, notify or not (rank 1's
         * last wait finds none but the 200 B one). */
        expect(frpc_transfer(&op, 1, note, 0, TIMEOUT_MS), 0,
               "a batch with notify set but notify_len 0");
        expect(frpc_transfer(&op, 1, note, 200, TIMEOUT_MS), 0,
               "a batch with a 200 B notification");
        CHECK(frpc_mem_deregister(l, 10000) == 0, "deregister");
        free(lbuf);
    } else {
        char note[FRPC_NOTIFY_MAX];
        size_t len;
        int src;
        int rc = frpc_notify_wait(agent, &src, note, sizeof(note), &len,
                                  TIMEOUT_MS);
        CHECK(rc == 0 && src == 0 && len == 200,
              "the 200 B notification: %s, %zu B", frpc_strerror(rc), len);
        CHECK(verify(region_buf + 100, 4096, 9u, 0) == 4096,
              "the batch's bytes there before its notification");
        expect(frpc_notify_wait(agent, &src, note, sizeof(note), &len, 200),
               FRPC_ETIMEDOUT, "no other notification came");
    }
    finish();
    return 0;
}

/* ---- ownersmall ------------------------------------------------------ */

/* Rank 1 runs with FABRPC_MAX_MSG=300, rank 0 with the default: what is
 * over the owner's limit only is refused by the owner, with its code. */
int mode_ownersmall(void)
{
    const char *rank = getenv("FABRPC_RANK"); /* fabrpc-run's */
    if (rank && !strcmp(rank, "1"))
        setenv("FABRPC_MAX_MSG", "300", 1);
    start(64 * 1024);
    me = frpc_rank(agent);
    CHECK(world == 2, "ownersmall needs 2 ranks");
    if (me == 0) {
        uint8_t desc[FRPC_MEM_DESC_SIZE], *lbuf;
        frpc_mem *l = local_region(4096, &lbuf);
        char note[400];
        desc_of(1, desc);
        memset(note, 'n', sizeof(note));
        expect(frpc_notify(agent, 1, note, sizeof(note), TIMEOUT_MS),
               FRPC_ETOOBIG, "a notification over the owner's max_msg_size");
        fill(lbuf, 4096, 21u, 0);
        frpc_xfer op = {.op = FRPC_XFER_PUT, .local = l, .desc = desc,
                        .desc_len = FRPC_MEM_DESC_SIZE, .remote_off = 100,
                        .len = 200};
        expect(frpc_transfer(&op, 1, note, sizeof(note), TIMEOUT_MS),
               FRPC_ETOOBIG, "a batch's notification over the owner's "
               "max_msg_size");
        /* "sent back by the owner once the data has landed" */
        owner_check(1, 100, 200, 21u);
        printf("ok: the batch's bytes landed before the owner refused its "
               "notification\n");
        /* Emulated, a piece of 4096 B is over the owner's limit. */
        int want = rma_emulated() ? FRPC_ETOOBIG : 0;
        expect(frpc_get(l, 0, desc, FRPC_MEM_DESC_SIZE, 0, 4096, TIMEOUT_MS),
               want, "a get of a piece over the owner's max_msg_size");
        expect(frpc_put(l, 0, desc, FRPC_MEM_DESC_SIZE, 0, 4096, TIMEOUT_MS),
               want, "a put of a piece over the owner's max_msg_size");
        /* And in a batch with a notification that fits: emulated, the
         * piece's FRPC_ETOOBIG, and the notification is not sent. */
        op.remote_off = 0;
        op.len = 4096;
        expect(frpc_transfer(&op, 1, note, 100, TIMEOUT_MS), want,
               "a batch of a put over the owner's max_msg_size, with a "
               "100 B notification");
        CHECK(frpc_barrier(agent, 120000) == 0, "the batch's barrier");
        CHECK(frpc_mem_deregister(l, 10000) == 0, "deregister");
        free(lbuf);
    } else {
        /* Rank 0's batch above: its notification came only if its put
         * did (natively); none of the earlier ones, over this rank's
         * limit, was taken. */
        CHECK(frpc_barrier(agent, 120000) == 0, "the batch's barrier");
        char got[FRPC_NOTIFY_MAX];
        size_t len;
        int src;
        if (!rma_emulated()) {
            int rc = frpc_notify_wait(agent, &src, got, sizeof(got), &len,
                                      TIMEOUT_MS);
            CHECK(rc == 0 && src == 0 && len == 100,
                  "the batch's 100 B notification: %s, %zu B",
                  frpc_strerror(rc), len);
        }
        expect(frpc_notify_wait(agent, &src, got, sizeof(got), &len, 200),
               FRPC_ETIMEDOUT, "no other notification came");
        printf("ok: a batch whose piece the owner refused sent no "
               "notification\n");
    }
    finish();
    return 0;
}

/* ---- cycles ----------------------------------------------------------- */

static void cycles(int n, const uint8_t *peer_desc, uint8_t *buf, int peer)
{
    for (int i = 0; i < n; i++) {
        frpc_mem *m;
        uint8_t d[FRPC_MEM_DESC_SIZE];
        int rc = frpc_mem_register(agent, buf, 65536, FRPC_MEM_REMOTE_READ,
                                   &m);
        CHECK(rc == 0, "cycle %d: register: %s", i, frpc_strerror(rc));
        CHECK(frpc_mem_describe(m, 0, 65536, d) == 0, "cycle %d: describe",
              i);
        rc = frpc_get(m, 0, peer_desc, FRPC_MEM_DESC_SIZE, (size_t)i % 4096,
                      4096, TIMEOUT_MS);
        CHECK(rc == 0 && verify(buf, 4096, (uint32_t)peer,
                                (size_t)i % 4096) == 4096,
              "cycle %d: get: %s", i, frpc_strerror(rc));
        rc = frpc_mem_deregister(m, 10000);
        CHECK(rc == 0, "cycle %d: deregister: %s", i, frpc_strerror(rc));
    }
}

int mode_cycles(void)
{
    enum { WARM = 1000 };
    const char *nv = getenv("RMA_CYCLES"); /* slow providers: fewer */
    int N = nv && atoi(nv) > 0 ? atoi(nv) : 10000;
    start(64 * 1024);
    me = frpc_rank(agent);
    int peer = (me + 1) % world;
    uint8_t peer_desc[FRPC_MEM_DESC_SIZE];
    uint8_t *buf = malloc(65536);
    CHECK(buf, "malloc");
    desc_of(peer, peer_desc);
    cycles(WARM, peer_desc, buf, peer);
    long before = rss_kib();
    cycles(N, peer_desc, buf, peer);
    long after = rss_kib();
    frpc_stats st;
    stats(&st);
    CHECK(st.mem_registered == 1, "regions registered at the end: %llu",
          (unsigned long long)st.mem_registered); /* this rank's own */
    if (RSS_CHECKED)
        CHECK(after - before < 4096, "resident set grew %ld KiB over %d "
              "cycles (%ld -> %ld KiB)", after - before, N, before, after);
    printf("ok: %d register/get/deregister cycles: resident %ld -> %ld KiB"
           "%s\n", N, before, after, RSS_CHECKED ? "" : " (not checked)");
    free(buf);
    finish();
    return 0;
}
