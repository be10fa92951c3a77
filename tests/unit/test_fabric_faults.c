/*
 * The transport's error paths, forced with comm/fault.h on two endpoints
 * of one process over shm: a receive buffer the provider refuses at open
 * fails fr_fabric_open with the provider's own words (not an fabrpc code
 * read as an errno); one it refuses back after a message is posted again
 * at the next polls, so the pool never shrinks and later messages all
 * arrive; a CQ error entry without a context is counted; over tcp, a
 * frame an endpoint sends itself arrives though its completion names no
 * source (sockets' habit), while another endpoint's is a stranger's.
 * Also frames sent in parts (comm/parts.h) over shm: whole and exact, from
 * threads at once; and forged parts dropped, counted, nothing else lost.
 * And a batch of frames held (comm/batch.c) toward a peer with no room
 * to receive: a flush never waits for it (it waited until the batch's
 * deadline, whatever the flushing thread's own), it goes once the peer
 * reads, and its frames fail at their deadline or with the peer's loss.
 * A rendezvous reply whose call has ended is not read (a block and a copy
 * for an answer dropped at once), though its sender is told it may free it.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/clock.h"
#include "comm/fabric.h"
#include "comm/fault.h"
#include "comm/providers.h"

#include "check_main.h"

#define RECVS 8
#define TOKEN 0x5eed5eedull

static atomic_int received, corrupt;

/* The frame on_msg or on_send_error watch for (req_id), and what came. */
static atomic_ullong watched;
static atomic_int watched_in, watched_failed, watched_err;

/* Frames of this function carry pattern_byte(req_id, i) at i. */
#define PATTERN_FUNC 77

static uint8_t pattern_byte(uint64_t req_id, size_t i)
{
    return (uint8_t)(i * 13u + req_id);
}

/* Frames of this function are kept by on_msg when their payload is a
 * block, and given back at once, as the agent does with a request's args
 * (fr_fabric_release_block) or an emulated get's answer
 * (fr_fabric_recycle_reply). */
#define BLOCK_FUNC 78
static fr_fabric *polled;
static atomic_int blocks_seen, blocks_malloced, blocks_wrong;

static void take_and_give_back(fr_fabric_msg *m)
{
    if (!m->owned || m->owned_malloced) {
        atomic_fetch_add(&blocks_malloced, 1);
    } else {
        uint8_t *b = m->owned;
        m->owned = NULL;
        for (size_t i = 0; i < m->len; i++)
            if (b[i] != pattern_byte(m->env.req_id, i)) {
                atomic_fetch_add(&blocks_wrong, 1);
                break;
            }
        if (m->env.kind == FR_ENV_REQUEST)
            fr_fabric_release_block(polled, b, m->len);
        else
            fr_fabric_recycle_reply(polled, b, m->len);
    }
    atomic_fetch_add(&blocks_seen, 1);
}

static void on_msg(void *ctx, fr_fabric_msg *m)
{
    (void)ctx;
    if (m->env.func_id == BLOCK_FUNC) {
        take_and_give_back(m);
        return;
    }
    if (m->env.func_id == PATTERN_FUNC)
        for (size_t i = 0; i < m->len; i++)
            if (m->payload[i] != pattern_byte(m->env.req_id, i)) {
                atomic_fetch_add(&corrupt, 1);
                break;
            }
    if (m->env.req_id == atomic_load(&watched))
        atomic_fetch_add(&watched_in, 1);
    atomic_fetch_add(&received, 1);
}

/* Responses with these req_ids answer calls that have ended (the agent's
 * pending table would say 0; the odd ones, calls whose deadline has
 * passed but that have not expired yet: a deadline long gone); the rest,
 * calls with 10 s left. */
#define ENDED_FIRST 900u
#define ENDED_COUNT 100u

static uint64_t call_deadline(void *ctx, uint32_t src, uint64_t req_id)
{
    (void)ctx;
    (void)src;
    if (req_id - ENDED_FIRST < ENDED_COUNT)
        return req_id % 2; /* 0, or 1 ns after the clock's start */
    return fr_deadline_ms(10000);
}

static void on_send_error(void *ctx, uint32_t dst, const fr_env *env,
                          int err)
{
    (void)ctx;
    (void)dst;
    if (env->req_id == atomic_load(&watched)) {
        atomic_store(&watched_err, err);
        atomic_fetch_add(&watched_failed, 1);
    }
}

/* The eager limit, the parts limit and coalescing of the endpoints
 * open_one opens. */
static size_t eager = 4096, split = 0;
static int coalesce = 0;

/* shm's first send to a peer waits for the peer's progress: the receiver
 * is polled by a thread of its own, as an agent's would be. */
static atomic_int stop_polling;
static pthread_t poller;

static void *poll_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_polling)) {
        fr_fabric_progress(polled);
        usleep(50);
    }
    return NULL;
}

static void start_polling(fr_fabric *b)
{
    polled = b;
    atomic_store(&stop_polling, 0);
    ck_assert_int_eq(pthread_create(&poller, NULL, poll_main, NULL), 0);
}

static void stop_polling_now(void)
{
    atomic_store(&stop_polling, 1);
    pthread_join(poller, NULL);
}

static fr_backends bs;

/* Opens an endpoint named after tag; its open's code, errbuf filled. */
static int open_one(const char *tag, fr_fabric **out, char *err, size_t len)
{
    char name[64];
    const fr_backend *b = fr_backends_find(&bs, "shm");
    ck_assert_msg(b && b->up, "shm is not up here");
    /* Unique beyond the pid: a run that was killed leaves its segments in
     * /dev/shm, and pids come round again (CI once met a name left by an
     * earlier run: fi_enable failed with EBUSY). */
    snprintf(name, sizeof(name), "fabrpc_faults_%s_%d_%llx", tag,
             (int)getpid(), (unsigned long long)fr_now_ns());
    fr_fabric_opts o = {.max_msg = 1 << 20,
                        .eager_max = eager,
                        .split_max = split,
                        .recv_count = RECVS,
                        .coalesce = coalesce,
                        .ep_name = name,
                        .cb = {.on_msg = on_msg,
                               .on_send_error = on_send_error,
                               .call_deadline = call_deadline}};
    return fr_fabric_open(b->info, &o, out, err, len);
}

static void setup(void)
{
    ck_assert_int_eq(fr_backends_discover(&bs, "shm"), 0);
}

static void teardown(void)
{
    for (int s = 0; s < FR_FAULT_SITES; s++)
        fr_fault_arm((fr_fault_site)s, 0);
    fr_backends_free(&bs);
}

static const fr_fixture shm = {setup, teardown};

/* Makes two open endpoints know each other as ranks 0 and 1, and starts
 * polling the second (rank 1) on its thread. */
static void introduce(fr_fabric *f[2])
{
    char addr[2][256];
    size_t alen[2];
    for (int i = 0; i < 2; i++) {
        alen[i] = sizeof(addr[i]);
        ck_assert_int_eq(fr_fabric_getname(f[i], addr[i], &alen[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(fr_fabric_set_identity(f[i], (uint32_t)i, 2, TOKEN),
                         0);
        for (uint32_t r = 0; r < 2; r++)
            ck_assert_int_eq(fr_fabric_set_peer(f[i], r, addr[r], alen[r]),
                             0);
    }
    start_polling(f[1]);
}

/* Two shm endpoints, introduced. */
static void pair(fr_fabric *f[2])
{
    char err[512] = "";
    for (int i = 0; i < 2; i++) {
        int rc = open_one(i ? "b" : "a", &f[i], err, sizeof(err));
        ck_assert_msg(rc == 0, "open: %s", err);
    }
    introduce(f);
}

static void unpair(fr_fabric *f[2])
{
    stop_polling_now();
    fr_fabric_close(f[0]);
    fr_fabric_close(f[1]);
}

/* b's counters once done(them) holds, or after 5 s. */
static fr_fabric_stats stats_when(fr_fabric *b,
                                  int (*done)(const fr_fabric_stats *))
{
    fr_fabric_stats st;
    uint64_t end = fr_deadline_ms(5000);
    for (;;) {
        fr_fabric_get_stats(b, &st);
        if (done(&st) || fr_now_ns() >= end)
            return st;
        usleep(1000);
    }
}

static int all_posted(const fr_fabric_stats *st)
{
    return st->recv_unposted == 0;
}

static int all_unposted(const fr_fabric_stats *st)
{
    return st->recv_unposted >= RECVS;
}

static int three_unmatched(const fr_fabric_stats *st)
{
    return st->cq_errors_unmatched >= 3;
}

/* Sends n one-way frames from a to rank 1 (polled by its thread) and
 * waits until they are all in or 10 s pass; returns how many arrived. */
static int push(fr_fabric *a, int n)
{
    int before = atomic_load(&received);
    for (int i = 0; i < n; i++) {
        fr_env e = {.kind = FR_ENV_REQUEST, .req_id = (uint64_t)i + 1,
                    .func_id = 42};
        int rc = fr_fabric_send(a, 1, &e, "x", 1, fr_deadline_ms(10000));
        ck_assert_msg(rc == 0, "send %d: %s", i, frpc_err_name(rc));
        fr_fabric_progress(a);
    }
    uint64_t end = fr_deadline_ms(10000);
    while (atomic_load(&received) - before < n && fr_now_ns() < end) {
        fr_fabric_progress(a);
        usleep(100);
    }
    return atomic_load(&received) - before;
}

START_TEST(a_refused_receive_at_open_says_why)
{
    char err[512] = "";
    fr_fabric *f = NULL;
    fr_fault_arm(FR_FAULT_RECV_POST, 1);
    int rc = open_one("open", &f, err, sizeof(err));
    ck_assert_int_eq(rc, FRPC_ETRANSPORT);
    ck_assert_ptr_null(f);
    /* The provider's text for its code (-FI_EOTHER), not an fabrpc code
     * read as an errno ("Bad file descriptor" was -9, FRPC_ETRANSPORT). */
    ck_assert_msg(strstr(err, "fi_recv") && strstr(err, fi_strerror(FI_EOTHER))
                      && !strstr(err, "Bad file descriptor"),
                  "errbuf: \"%s\"", err);
}
END_TEST

START_TEST(refused_reposts_come_back_and_nothing_is_lost)
{
    fr_fabric *f[2];
    fr_fabric_stats st;
    pair(f);
    ck_assert_int_eq(push(f[0], 4), 4);
    /* The next 3 buffers given back are refused, once each. */
    fr_fault_arm(FR_FAULT_RECV_POST, 3);
    ck_assert_int_eq(push(f[0], 3), 3);
    /* The poller gives a buffer back after it delivers: the last refusal
     * may come just after push saw the message (TSan, a loaded box). A
     * refusal may also hit a buffer offered again at a later poll: every
     * refusal counts, so exactly the 3 armed are seen. */
    uint64_t end = fr_deadline_ms(10000);
    do {
        fr_fabric_get_stats(f[1], &st);
    } while (st.recv_repost_failed < 3 && fr_now_ns() < end &&
             usleep(1000) == 0);
    ck_assert_uint_eq(st.recv_repost_failed, 3);
    /* Many more messages than the pool holds: all arrive, and every
     * refused buffer is back in the provider's hands. */
    ck_assert_int_eq(push(f[0], RECVS * 20), RECVS * 20);
    fr_fabric_get_stats(f[1], &st);
    ck_assert_uint_eq(st.recv_unposted, 0);
    ck_assert_uint_eq(st.recv_repost_failed, 3);
    unpair(f);
}
END_TEST

START_TEST(a_refused_repost_waits_for_the_next_poll)
{
    fr_fabric *f[2];
    fr_fabric_stats st;
    pair(f);
    /* Every repost fails for a while: buffers pile up unposted, and come
     * back once the provider takes them again. */
    fr_fault_arm(FR_FAULT_RECV_POST, 1000000);
    /* The whole pool used and refused back: with a pool that shrank on
     * each refusal, nothing more could ever arrive. */
    ck_assert_int_eq(push(f[0], RECVS), RECVS);
    /* The last refusal may come just after push saw its message (the
     * buffer is given back after the delivery). */
    st = stats_when(f[1], all_unposted);
    ck_assert_uint_eq(st.recv_unposted, RECVS);
    fr_fault_arm(FR_FAULT_RECV_POST, 0);
    st = stats_when(f[1], all_posted); /* the poller's next passes */
    ck_assert_uint_eq(st.recv_unposted, 0);
    ck_assert_int_eq(push(f[0], RECVS * 4), RECVS * 4);
    unpair(f);
}
END_TEST

START_TEST(a_cq_error_without_context_is_counted)
{
    fr_fabric *f[2];
    fr_fabric_stats st;
    pair(f);
    ck_assert_int_eq(push(f[0], 2), 2);
    fr_fabric_get_stats(f[1], &st);
    ck_assert_uint_eq(st.cq_errors_unmatched, 0);
    /* Three error entries that name nothing of ours: each counted, the
     * endpoint goes on. */
    fr_fault_arm(FR_FAULT_CQ_NO_CONTEXT, 3);
    st = stats_when(f[1], three_unmatched);
    ck_assert_uint_eq(st.cq_errors_unmatched, 3);
    ck_assert_int_eq(push(f[0], RECVS * 2), RECVS * 2);
    unpair(f);
}
END_TEST

/* Two endpoints over tcp;ofi_rxm, which reports sources (the check is
 * on): what sockets did to a rank's messages to itself, forced. */
static int open_tcp_pair_as(fr_fabric *f[2], int never_sleeps)
{
    char err[512] = "";
    fr_backends tb;
    if (fr_backends_discover(&tb, "tcp"))
        return -1;
    const fr_backend *b = fr_backends_find(&tb, "tcp");
    if (!b || !b->up) {
        fr_backends_free(&tb);
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        fr_fabric_opts o = {.max_msg = 1 << 20, .eager_max = 4096,
                            .recv_count = RECVS,
                            .never_sleeps = never_sleeps,
                            .cb = {.on_msg = on_msg}};
        int rc = fr_fabric_open(b->info, &o, &f[i], err, sizeof(err));
        ck_assert_msg(rc == 0, "open tcp: %s", err);
    }
    fr_backends_free(&tb);
    introduce(f);
    return 0;
}

static int open_tcp_pair(fr_fabric *f[2])
{
    return open_tcp_pair_as(f, 0);
}

START_TEST(a_name_the_provider_refuses_fails_open_cleanly)
{
    char err[512] = "";
    fr_backends tb;
    fr_fabric *f = NULL;
    ck_assert_int_eq(fr_backends_discover(&tb, "tcp"), 0);
    const fr_backend *b = fr_backends_find(&tb, "tcp");
    if (!b || !b->up) {
        fr_backends_free(&tb);
        fprintf(stderr, "tcp is not up here: skipped\n");
        return;
    }
    /* tcp takes no endpoint name: open fails, saying so, and closes
     * what it had opened (it crashed in rxm's close once). */
    fr_fabric_opts o = {.max_msg = 1 << 20, .eager_max = 4096,
                        .recv_count = RECVS, .ep_name = "not-for-tcp",
                        .cb = {.on_msg = on_msg}};
    int rc = fr_fabric_open(b->info, &o, &f, err, sizeof(err));
    ck_assert_int_eq(rc, FRPC_ETRANSPORT);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err, "fi_setname"), "errbuf: %s", err);
    fr_backends_free(&tb);
}
END_TEST

/* Sends one frame from a to rank dst and polls a for up to 5 s (dst's
 * own thread polls it); 1 if it arrived. */
static int one_frame(fr_fabric *a, uint32_t dst)
{
    int before = atomic_load(&received);
    fr_env e = {.kind = FR_ENV_REQUEST, .req_id = 7, .func_id = 42};
    int rc = fr_fabric_send(a, dst, &e, "x", 1, fr_deadline_ms(10000));
    ck_assert_msg(rc == 0, "send: %s", frpc_err_name(rc));
    uint64_t end = fr_deadline_ms(5000);
    while (atomic_load(&received) == before && fr_now_ns() < end) {
        fr_fabric_progress(a);
        usleep(100);
    }
    return atomic_load(&received) - before;
}

START_TEST(a_message_to_oneself_without_a_source_still_counts)
{
    fr_fabric *f[2];
    fr_fabric_stats st;
    if (open_tcp_pair(f)) {
        fprintf(stderr, "tcp is not up here: skipped\n");
        return;
    }
    ck_assert_int_eq(one_frame(f[0], 0), 1); /* connected to itself */
    ck_assert_int_eq(one_frame(f[0], 1), 1);
    /* Every completion names no source: a frame to itself still
     * arrives (it carries this endpoint's own token), one to rank 1 is
     * a stranger's there. */
    fr_fault_arm(FR_FAULT_CQ_NO_SOURCE, 1000000);
    ck_assert_int_eq(one_frame(f[0], 0), 1);
    fr_fabric_get_stats(f[0], &st);
    ck_assert_uint_eq(st.dropped_stranger, 0);
    ck_assert_int_eq(one_frame(f[0], 1), 0);
    fr_fault_arm(FR_FAULT_CQ_NO_SOURCE, 0);
    fr_fabric_get_stats(f[1], &st);
    ck_assert_uint_eq(st.dropped_stranger, 1);
    ck_assert_int_eq(one_frame(f[0], 1), 1); /* and it goes on */
    unpair(f);
}
END_TEST

/* Busy progress: the CQ has no wait object (nobody could sleep on it)
 * and frames still arrive, both ways. */
START_TEST(a_fabric_that_never_sleeps_has_no_fd_and_delivers)
{
    fr_fabric *f[2];
    if (open_tcp_pair(f)) {
        fprintf(stderr, "tcp is not up here: skipped\n");
        return;
    }
    ck_assert_int_eq(fr_fabric_has_fd(f[0]), 1); /* the default: an fd */
    unpair(f);
    ck_assert_int_eq(open_tcp_pair_as(f, 1), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(fr_fabric_has_fd(f[i]), 0);
        ck_assert_int_eq(fr_fabric_can_block(f[i]), 0);
    }
    ck_assert_int_eq(one_frame(f[0], 1), 1); /* introduce polls f[1] */
    stop_polling_now();
    start_polling(f[0]);
    ck_assert_int_eq(one_frame(f[1], 0), 1);
    unpair(f); /* stops f[0]'s poller */
}
END_TEST

/* Sends a pattern frame of len bytes from a to rank 1 with id req_id. */
static void send_pattern(fr_fabric *a, uint64_t req_id, size_t len)
{
    uint8_t *b = malloc(len);
    for (size_t i = 0; i < len; i++)
        b[i] = pattern_byte(req_id, i);
    fr_env e = {.kind = FR_ENV_REQUEST, .req_id = req_id,
                .func_id = PATTERN_FUNC};
    int rc = fr_fabric_send(a, 1, &e, b, len, fr_deadline_ms(10000));
    ck_assert_msg(rc == 0, "send %zu B: %s", len, frpc_err_name(rc));
    free(b);
}

static int wait_received(fr_fabric *a, int n)
{
    uint64_t end = fr_deadline_ms(10000);
    while (atomic_load(&received) < n && fr_now_ns() < end) {
        fr_fabric_progress(a);
        usleep(100);
    }
    return atomic_load(&received);
}

static void parted_pair(fr_fabric *f[2])
{
    eager = 16384;
    split = 16384;
    atomic_store(&received, 0);
    atomic_store(&corrupt, 0);
    pair(f);
}

/* Around the parts' boundaries (up to 4048 bytes of frame a part, the
 * 48-byte header in the first): each arrives once, exact; those over the
 * inject size and within split_max went as parts, the others did not. */
START_TEST(frames_over_the_inject_size_arrive_whole_as_parts)
{
    static const size_t sizes[] = {4000, 4048, 4049, 4096, 8048, 8049,
                                   12000, 16336, 16337, 1};
    fr_fabric *f[2];
    fr_fabric_stats st;
    parted_pair(f);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        send_pattern(f[0], i + 1, sizes[i]);
    int n = (int)(sizeof(sizes) / sizeof(sizes[0]));
    ck_assert_int_eq(wait_received(f[0], n), n);
    ck_assert_int_eq(atomic_load(&corrupt), 0);
    fr_fabric_get_stats(f[0], &st);
    ck_assert_uint_eq(st.split_sent, 6); /* 4049 B to 16336 B of payload */
    fr_fabric_get_stats(f[1], &st);
    ck_assert_uint_eq(st.dropped_malformed, 0);
    ck_assert_uint_eq(st.parts_dropped, 0);
    unpair(f);
}
END_TEST

static fr_fabric *sender;

static void *send_many(void *arg)
{
    uint64_t base = (uint64_t)(uintptr_t)arg * 1000;
    for (uint64_t i = 1; i <= 200; i++)
        send_pattern(sender, base + i, 4049 + (size_t)(i * 37 % 8000));
    return NULL;
}

/* Four threads send at once: one parted frame leaves at a time, the
 * others go the usual way meanwhile, and every frame arrives exact. */
START_TEST(threads_sending_at_once_lose_and_mix_nothing)
{
    fr_fabric *f[2];
    fr_fabric_stats st;
    pthread_t t[4];
    parted_pair(f);
    sender = f[0];
    for (uintptr_t i = 0; i < 4; i++)
        ck_assert_int_eq(
            pthread_create(&t[i], NULL, send_many, (void *)(i + 1)), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(wait_received(f[0], 800), 800);
    ck_assert_int_eq(atomic_load(&corrupt), 0);
    fr_fabric_get_stats(f[0], &st);
    ck_assert_uint_gt(st.split_sent, 0);
    fr_fabric_get_stats(f[1], &st);
    ck_assert_uint_eq(st.parts_dropped, 0);
    unpair(f);
}
END_TEST

/* Sends a raw part: bytes [off, off + n) of the frame whole (total
 * bytes), as part id, with token tok. */
static void raw_part(fr_fabric *a, uint64_t id, const uint8_t *whole,
                     size_t total, size_t off, size_t n, uint64_t tok)
{
    uint8_t msg[4096];
    fr_env e = {.kind = FR_ENV_PART, .req_id = id, .src_rank = 0,
                .token = tok, .payload_len = n,
                .func_id = fr_env_part_place((uint32_t)off,
                                             (uint32_t)total)};
    ck_assert_int_eq(fr_env_encode(&e, msg, sizeof(msg)), 0);
    memcpy(msg + FR_ENV_HDR_SIZE, whole + off, n);
    ck_assert_int_eq(fr_fabric_send_raw(a, 1, msg, FR_ENV_HDR_SIZE + n,
                                        fr_deadline_ms(10000)),
                     0);
}

/* A whole frame of len payload bytes in out (header from rank src). */
static size_t whole_frame(uint8_t *out, uint8_t kind, uint32_t src,
                          uint64_t req_id, size_t len)
{
    fr_env e = {.kind = kind, .req_id = req_id, .src_rank = src,
                .token = TOKEN, .payload_len = len,
                .func_id = kind == FR_ENV_PART
                               ? fr_env_part_place(0, (uint32_t)len + 48)
                               : PATTERN_FUNC};
    ck_assert_int_eq(fr_env_encode(&e, out, FR_ENV_HDR_SIZE), 0);
    for (size_t i = 0; i < len; i++)
        out[FR_ENV_HDR_SIZE + i] = pattern_byte(req_id, i);
    return FR_ENV_HDR_SIZE + len;
}

static int malformed_at_least(const fr_fabric_stats *st)
{
    return st->dropped_malformed >= 5 && st->dropped_token >= 1;
}

/* A member's broken parts: each is dropped and counted, no frame comes
 * of them, and a good frame after them arrives. */
START_TEST(forged_parts_are_dropped_and_counted)
{
    static uint8_t w[20000];
    fr_fabric *f[2];
    fr_fabric_stats st;
    parted_pair(f);
    /* 1: a whole that claims another rank */
    size_t n = whole_frame(w, FR_ENV_REQUEST, 1, 5, 5000);
    raw_part(f[0], 1, w, n, 0, 4000, TOKEN);
    raw_part(f[0], 1, w, n, 4000, n - 4000, TOKEN);
    /* 2: a whole that is a part itself */
    n = whole_frame(w, FR_ENV_PART, 0, 6, 5000);
    raw_part(f[0], 2, w, n, 0, 4000, TOKEN);
    raw_part(f[0], 2, w, n, 4000, n - 4000, TOKEN);
    /* 3: a whole over the receiver's eager limit */
    n = whole_frame(w, FR_ENV_REQUEST, 0, 7, 17000);
    raw_part(f[0], 3, w, n, 0, 4000, TOKEN);
    /* 4: overlapping parts whose bytes add up */
    n = whole_frame(w, FR_ENV_REQUEST, 0, 8, 5000);
    raw_part(f[0], 4, w, n, 0, 4000, TOKEN);
    raw_part(f[0], 4, w, n, 3000, n - 3000, TOKEN);
    /* 5: another job's part; 6: a first part whose rest never comes */
    n = whole_frame(w, FR_ENV_REQUEST, 0, 9, 5000);
    raw_part(f[0], 5, w, n, 0, 4000, TOKEN ^ 1);
    raw_part(f[0], 6, w, n, 0, 4000, TOKEN);
    st = stats_when(f[1], malformed_at_least);
    ck_assert_uint_eq(st.dropped_malformed, 5); /* 4: two, at its end */
    ck_assert_uint_eq(st.dropped_token, 1);
    ck_assert_int_eq(atomic_load(&received), 0);
    send_pattern(f[0], 10, 6000);
    ck_assert_int_eq(wait_received(f[0], 1), 1);
    ck_assert_int_eq(atomic_load(&corrupt), 0);
    unpair(f);
}
END_TEST

/* Held batches: a (rank 0) sends to b (rank 1), which stops reading. */

/* Plain ints, for readable assertion messages. */
static int failed_count(void)
{
    return atomic_load(&watched_failed);
}

static int in_count(void)
{
    return atomic_load(&watched_in);
}

static int failed_err(void)
{
    return atomic_load(&watched_err);
}

/* Sends one 1-byte frame (req_id id) from a to rank 1 by deadline. */
static int frame_to_b(fr_fabric *a, uint64_t id, uint64_t deadline)
{
    fr_env e = {.kind = FR_ENV_REQUEST, .req_id = id, .func_id = 42};
    return fr_fabric_send(a, 1, &e, "x", 1, deadline);
}

/* Coalescing pair whose rank 1 is polled until its first frame is in
 * (shm's first send waits for the receiver), then no more: a's frames
 * fill its queue until one finds no room for 5 ms. */
static void stopped_reader(fr_fabric *f[2])
{
    coalesce = 1;
    pair(f);
    ck_assert_int_eq(one_frame(f[0], 1), 1);
    stop_polling_now();
    int rc = 0;
    for (uint64_t i = 0; i < 100000 && rc == 0; i++)
        rc = frame_to_b(f[0], 1000 + i, fr_deadline_ms(5));
    ck_assert_msg(rc == FRPC_ETIMEDOUT, "filling: %s", frpc_err_name(rc));
}

/* Holds frame id (to be sent by deadline) in a's batch for rank 1: a
 * poller is in (so it may wait), and rank 1 already had a frame in this
 * pass (the one that found no room). Returns once the poller left,
 * which flushes; how long that took, in ms. */
static uint64_t hold_and_flush(fr_fabric *a, uint64_t id, uint64_t deadline)
{
    atomic_store(&watched, id);
    fr_fabric_poller_enter(a);
    ck_assert_int_eq(frame_to_b(a, 1, fr_deadline_ms(5)), FRPC_ETIMEDOUT);
    ck_assert_int_eq(frame_to_b(a, id, deadline), 0); /* held */
    uint64_t t0 = fr_now_ns();
    fr_fabric_poller_leave(a); /* the last poller sends what is held */
    return (fr_now_ns() - t0) / 1000000;
}

START_TEST(a_flush_never_waits_for_room_a_held_frame_goes_once_read)
{
    fr_fabric *f[2];
    stopped_reader(f);
    uint64_t ms = hold_and_flush(f[0], 7777, fr_deadline_ms(60000));
    /* It waited for room until the held frame's deadline: 60 s. */
    ck_assert_msg(ms < 20000, "the flush took %llu ms",
                  (unsigned long long)ms);
    uint64_t t0 = fr_now_ns();
    for (int i = 0; i < 100; i++)
        fr_fabric_progress(f[0]);
    ck_assert_uint_lt((fr_now_ns() - t0) / 1000000, 20000);
    /* Kept, not lost, not failed: a flush of the fabric waits for it. */
    ck_assert_int_eq(fr_fabric_flush(f[0], fr_deadline_ms(50)),
                     FRPC_ETIMEDOUT);
    /* No more batches for that peer meanwhile: the frame a pass would
     * have held goes alone, and finds no room. */
    fr_fabric_poller_enter(f[0]);
    ck_assert_int_eq(frame_to_b(f[0], 2, fr_deadline_ms(5)), FRPC_ETIMEDOUT);
    ck_assert_int_eq(frame_to_b(f[0], 3, fr_deadline_ms(5)), FRPC_ETIMEDOUT);
    fr_fabric_poller_leave(f[0]);
    ck_assert_int_eq(failed_count(), 0);
    ck_assert_int_eq(in_count(), 0);
    start_polling(f[1]); /* it reads again */
    uint64_t end = fr_deadline_ms(20000);
    while (atomic_load(&watched_in) == 0 && fr_now_ns() < end) {
        fr_fabric_progress(f[0]);
        usleep(200);
    }
    ck_assert_int_eq(in_count(), 1);
    ck_assert_int_eq(failed_count(), 0);
    ck_assert_int_eq(fr_fabric_flush(f[0], fr_deadline_ms(20000)), 0);
    unpair(f);
}
END_TEST

/* Polls a until the watched frame failed, 20 s at most. */
static int wait_watched_failed(fr_fabric *a)
{
    uint64_t end = fr_deadline_ms(20000);
    while (atomic_load(&watched_failed) == 0 && fr_now_ns() < end) {
        fr_fabric_progress(a);
        usleep(200);
    }
    return atomic_load(&watched_failed);
}

START_TEST(a_held_frame_without_room_fails_at_its_deadline_once)
{
    fr_fabric *f[2];
    stopped_reader(f);
    uint64_t t0 = fr_now_ns();
    hold_and_flush(f[0], 8888, fr_deadline_ms(300));
    ck_assert_int_eq(failed_count(), 0);
    ck_assert_int_eq(wait_watched_failed(f[0]), 1);
    ck_assert_uint_ge(fr_now_ns() - t0, 300 * 1000000ull);
    ck_assert_int_eq(failed_err(), FRPC_ETIMEDOUT);
    /* Nothing kept: the fabric's flush is done at once. */
    ck_assert_int_eq(fr_fabric_flush(f[0], fr_deadline_ms(5000)), 0);
    for (int i = 0; i < 10; i++)
        fr_fabric_progress(f[0]);
    ck_assert_int_eq(failed_count(), 1);
    start_polling(f[1]);
    unpair(f);
}
END_TEST

START_TEST(a_held_frame_to_a_lost_peer_fails_peer_lost)
{
    fr_fabric *f[2];
    stopped_reader(f);
    hold_and_flush(f[0], 9999, fr_deadline_ms(60000));
    ck_assert_int_eq(failed_count(), 0);
    ck_assert_int_eq(fr_fabric_peer_lost(f[0], 1), 0);
    ck_assert_int_eq(wait_watched_failed(f[0]), 1);
    ck_assert_int_eq(failed_err(), FRPC_EPEERLOST);
    ck_assert_int_eq(fr_fabric_flush(f[0], fr_deadline_ms(5000)), 0);
    start_polling(f[1]);
    unpair(f);
}
END_TEST

START_TEST(rendezvous_blocks_given_back_are_read_into_again)
{
    /* A rendezvous payload handed up is a block (owned_malloced 0): the
     * agent gives a request's back to the cache by that flag, and once
     * it came uninitialized, so every request's args were freed and the
     * next one's read into fresh memory (a page fault a page: emulated
     * puts of 16 MiB moved 0.3 GB/s). A reply whose length is a block
     * size is read into a cached block too. */
    enum { EACH = 8 };
    const size_t len = 256u << 10; /* over eager (4096); a block size */
    fr_fabric *f[2];
    fr_fabric_stats st;
    pair(f);
    uint8_t *buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    for (int i = 0; i < 2 * EACH; i++) {
        fr_env e = {.kind = i < EACH ? FR_ENV_REQUEST : FR_ENV_RESPONSE,
                    .req_id = 500 + (uint64_t)i, .func_id = BLOCK_FUNC};
        for (size_t k = 0; k < len; k++)
            buf[k] = pattern_byte(e.req_id, k);
        ck_assert_int_eq(fr_fabric_send(f[0], 1, &e, buf, len,
                                        fr_deadline_ms(10000)), 0);
        uint64_t end = fr_deadline_ms(10000);
        while (atomic_load(&blocks_seen) <= i && fr_now_ns() < end) {
            fr_fabric_progress(f[0]); /* the sender's RNDV_DONE */
            usleep(200);
        }
        ck_assert_int_eq(atomic_load(&blocks_seen), i + 1);
    }
    ck_assert_int_eq(atomic_load(&blocks_malloced), 0);
    ck_assert_int_eq(atomic_load(&blocks_wrong), 0);
    fr_fabric_get_stats(f[1], &st);
    ck_assert_uint_eq(st.rndv_received, 2 * EACH);
    /* all but the first: each found the one given back before it */
    ck_assert_uint_eq(st.rndv_blocks_reused, 2 * EACH - 1);
    free(buf);
    unpair(f);
}
END_TEST

static int rndv_all_done(fr_fabric *sender)
{
    return !fr_fabric_payloads_unread(sender);
}

START_TEST(a_reply_to_a_call_that_ended_is_not_read)
{
    /* Reading it cost a block of its size and the copy, for an answer
     * dropped at once: an emulated get that timed out, its 4 MiB pieces
     * still answered, had the next get's pieces read into fresh memory
     * (0.2-0.9 s past a 10 ms timeout beside a test suite). Its sender
     * is told it may free the payload all the same; a later reply to a
     * call still waiting is read as before. */
    enum { LATE = 3 };
    const size_t len = 256u << 10;
    fr_fabric *f[2];
    fr_fabric_stats st;
    pair(f);
    uint8_t *buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    for (int i = 0; i <= LATE; i++) {
        fr_env e = {.kind = FR_ENV_RESPONSE, .func_id = BLOCK_FUNC,
                    .req_id = i < LATE ? ENDED_FIRST + (uint64_t)i : 42};
        for (size_t k = 0; k < len; k++)
            buf[k] = pattern_byte(e.req_id, k);
        ck_assert_int_eq(fr_fabric_send(f[0], 1, &e, buf, len,
                                        fr_deadline_ms(10000)), 0);
    }
    uint64_t end = fr_deadline_ms(10000);
    while ((atomic_load(&blocks_seen) < 1 || !rndv_all_done(f[0])) &&
           fr_now_ns() < end) {
        fr_fabric_progress(f[0]); /* the sender's RNDV_DONEs */
        usleep(200);
    }
    ck_assert_msg(rndv_all_done(f[0]), "a payload's sender was never told");
    ck_assert_int_eq(atomic_load(&blocks_seen), 1); /* the waited-for one */
    ck_assert_int_eq(atomic_load(&blocks_wrong), 0);
    fr_fabric_get_stats(f[1], &st);
    ck_assert_uint_eq(st.rndv_unread_late, LATE);
    ck_assert_uint_eq(st.rndv_received, 1);
    ck_assert_uint_eq(st.rndv_blocks_reused, 0); /* nothing came back */
    free(buf);
    unpair(f);
}
END_TEST

/* Fills block b (len bytes, from fr_fabric_take_block) with request id's
 * pattern, sends it to f[1] with fr_fabric_send_block and polls until the
 * receiver has seen it and f is told it may reuse the block. */
static void send_block_and_see_it_read(fr_fabric *f, uint8_t *b, size_t len,
                                       uint64_t id, uint32_t func)
{
    fr_env e = {.kind = FR_ENV_REQUEST, .req_id = id, .func_id = func};
    atomic_store(&watched, e.req_id);
    for (size_t k = 0; k < len; k++)
        b[k] = pattern_byte(e.req_id, k);
    int before = atomic_load(&blocks_seen) + atomic_load(&watched_in);
    ck_assert_int_eq(
        fr_fabric_send_block(f, 1, &e, b, len, fr_deadline_ms(10000)), 0);
    uint64_t end = fr_deadline_ms(10000);
    while ((atomic_load(&blocks_seen) + atomic_load(&watched_in) == before ||
            fr_fabric_payloads_unread(f)) &&
           fr_now_ns() < end) {
        fr_fabric_progress(f);
        usleep(200);
    }
    ck_assert_int_eq(atomic_load(&blocks_seen) + atomic_load(&watched_in),
                     before + 1);
    ck_assert(!fr_fabric_payloads_unread(f));
}

START_TEST(a_block_sent_is_read_where_it_is_and_comes_back)
{
    /* fr_fabric_send_block: an emulated put's piece, built in a block,
     * went through a second block and a second copy before. Large, the
     * receiver reads the block itself and the sender's cache has it back
     * after RNDV_DONE; small, it is copied into the frame and back at
     * once. Neither counts as the user's zero-copy args. */
    const size_t sizes[2] = {256u << 10, 100};
    fr_fabric *f[2];
    fr_fabric_stats st;
    pair(f);
    for (int i = 0; i < 2; i++) {
        size_t len = sizes[i];
        uint8_t *b = fr_fabric_take_block(f[0], len);
        ck_assert_ptr_nonnull(b);
        send_block_and_see_it_read(f[0], b, len, 700 + (uint64_t)i,
                                   i == 0 ? BLOCK_FUNC : PATTERN_FUNC);
        /* the cache's block of that size is the one sent */
        uint8_t *again = fr_fabric_take_block(f[0], len);
        ck_assert_ptr_eq(again, b);
        fr_fabric_release_block(f[0], again, len);
    }
    ck_assert_int_eq(atomic_load(&blocks_wrong), 0);
    ck_assert_int_eq(atomic_load(&corrupt), 0);
    fr_fabric_get_stats(f[0], &st);
    ck_assert_uint_eq(st.rndv_sent, 1);
    ck_assert_uint_eq(st.rndv_lent, 0);
    unpair(f);
}
END_TEST

START_TEST(blocks_unused_for_a_while_are_freed)
{
    /* After a burst of large payloads the caches kept up to 128 MiB each,
     * registered, for good. A block put back is kept while it may serve
     * again soon, and freed once unused for FR_BLOCK_IDLE_NS. */
    const size_t len = 1u << 20;
    fr_fabric *f[2];
    fr_fabric_stats st;
    pair(f);
    uint8_t *b[3];
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(b[i] = fr_fabric_take_block(f[0], len));
    for (int i = 0; i < 3; i++)
        fr_fabric_release_block(f[0], b[i], len);
    fr_fabric_get_stats(f[0], &st);
    ck_assert_uint_eq(st.blocks_cached_bytes, 3 * len);

    uint64_t now = fr_coarse_now_ns();
    fr_fabric_trim_blocks(f[0], now + FR_BLOCK_IDLE_NS / 2); /* recent */
    fr_fabric_get_stats(f[0], &st);
    ck_assert_uint_eq(st.blocks_cached_bytes, 3 * len);
    ck_assert_uint_eq(st.blocks_trimmed, 0);

    /* one taken and given back later is newer than the other two */
    uint8_t *kept = fr_fabric_take_block(f[0], len);
    ck_assert_ptr_nonnull(kept);
    uint64_t taken = fr_coarse_now_ns();
    while (fr_coarse_now_ns() < taken + 20000000ull) /* 20 ms, coarse */
        usleep(1000);
    fr_fabric_release_block(f[0], kept, len);
    uint64_t t2 = taken + 10000000ull + FR_BLOCK_IDLE_NS;
    fr_fabric_trim_blocks(f[0], t2);
    fr_fabric_get_stats(f[0], &st);
    ck_assert_uint_eq(st.blocks_trimmed, 2);
    ck_assert_uint_eq(st.blocks_cached_bytes, len);
    ck_assert_ptr_eq(fr_fabric_take_block(f[0], len), kept); /* still kept */
    fr_fabric_release_block(f[0], kept, len);

    /* looked at less than a second ago: not looked at again, though kept
     * would be old enough by then */
    fr_fabric_trim_blocks(f[0], t2 + 500000000ull);
    fr_fabric_get_stats(f[0], &st);
    ck_assert_uint_eq(st.blocks_cached_bytes, len);

    fr_fabric_trim_blocks(f[0], t2 + 2 * FR_BLOCK_IDLE_NS);
    fr_fabric_get_stats(f[0], &st);
    ck_assert_uint_eq(st.blocks_trimmed, 3);
    ck_assert_uint_eq(st.blocks_cached_bytes, 0);

    /* the caches serve as before: a large payload still goes and is read */
    uint8_t *p = fr_fabric_take_block(f[0], len);
    ck_assert_ptr_nonnull(p);
    send_block_and_see_it_read(f[0], p, len, 800, BLOCK_FUNC);
    ck_assert_int_eq(atomic_load(&corrupt), 0);
    unpair(f);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"a receive refused at open fails with the provider's text",
         a_refused_receive_at_open_says_why},
        {"receive buffers refused back are posted again: none lost",
         refused_reposts_come_back_and_nothing_is_lost},
        {"while reposts fail, buffers wait; the next poll posts them",
         a_refused_repost_waits_for_the_next_poll},
        {"a CQ error entry without a context is counted",
         a_cq_error_without_context_is_counted},
        {"a name the provider refuses fails open with its words, no crash",
         a_name_the_provider_refuses_fails_open_cleanly},
        {"a message to oneself that names no source still arrives; "
         "another's is a stranger's",
         a_message_to_oneself_without_a_source_still_counts},
        {"a fabric that never sleeps has no CQ fd and delivers both ways",
         a_fabric_that_never_sleeps_has_no_fd_and_delivers},
        {"frames over shm's inject size arrive whole and exact, as parts",
         frames_over_the_inject_size_arrive_whole_as_parts},
        {"threads sending parted frames at once lose and mix nothing",
         threads_sending_at_once_lose_and_mix_nothing},
        {"forged parts are dropped and counted; later frames arrive",
         forged_parts_are_dropped_and_counted},
        {"a flush never waits for room; a held frame goes once read; no "
         "more are held for that peer meanwhile",
         a_flush_never_waits_for_room_a_held_frame_goes_once_read, 120},
        {"a held frame without room fails at its deadline, once",
         a_held_frame_without_room_fails_at_its_deadline_once, 120},
        {"a held frame to a peer lost fails FRPC_EPEERLOST",
         a_held_frame_to_a_lost_peer_fails_peer_lost, 120},
        {"rendezvous payloads handed up are blocks, and one given back is "
         "read into again (requests; replies of a block's size)",
         rendezvous_blocks_given_back_are_read_into_again},
        {"cached blocks unused for a while are freed; the caches serve on",
         blocks_unused_for_a_while_are_freed},
        {"a reply whose call has ended is not read; its sender may free "
         "it; a reply to a call that waits is read",
         a_reply_to_a_call_that_ended_is_not_read},
        {"a block sent is read where it is (large) or copied (small), "
         "and comes back to the cache",
         a_block_sent_is_read_where_it_is_and_comes_back},
    };
    return fr_run_tests_with_fixture("fabric faults", tests,
                                     sizeof(tests) / sizeof(tests[0]), 60,
                                     &shm);
}
