/*
 * One-sided transfers emulated by messages (rpc/emu.c, rpc/emu_serve.c)
 * on a one-rank agent with config.rma = FRPC_RMA_EMULATE: the owner's
 * functions refuse every request they cannot check through (short args,
 * malformed or foreign descriptors, forged ones with a good check value
 * but a region, key, slice or access the owner does not have, a
 * deregistered region, a put of the wrong length) without touching
 * memory; a transfer larger than a piece moves in pieces (not counted
 * as calls in the per-function figures); a max_msg_size that leaves no
 * room for a piece is FRPC_ETOOBIG; the report says why.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "comm/memdesc.h"
#include "rpc/agent.h"
#include "rpc/emu.h"
#include "rpc/fabrpc.h"

#include "check_main.h"

#define REGION 8192

static frpc_agent *agent;
static uint8_t *region_buf;
static frpc_mem *region; /* read and write for peers */

static void up_with(long long max_msg)
{
    frpc_config cfg;
    char err[512] = "";
    frpc_config_init(&cfg);
    cfg.rank = 0;
    cfg.world_size = 1;
    cfg.rma = FRPC_RMA_EMULATE;
    cfg.max_msg_size = max_msg;
    cfg.errbuf = err;
    cfg.errbuf_len = sizeof(err);
    int rc = frpc_init(&cfg, &agent);
    ck_assert_msg(rc == 0, "frpc_init: %s: %s", frpc_err_name(rc), err);
    region_buf = malloc(REGION);
    ck_assert_ptr_nonnull(region_buf);
    for (int i = 0; i < REGION; i++)
        region_buf[i] = (uint8_t)(i * 7);
    ck_assert_int_eq(frpc_mem_register(agent, region_buf, REGION,
                                       FRPC_MEM_REMOTE_READ |
                                           FRPC_MEM_REMOTE_WRITE,
                                       &region),
                     0);
}

static void up(void) { up_with(FRPC_UNSET); }

static void down(void)
{
    if (region)
        ck_assert_int_eq(frpc_mem_deregister(region, 5000), 0);
    ck_assert_int_eq(frpc_shutdown(agent, FRPC_SHUTDOWN_IMMEDIATE, 5000), 0);
    free(region_buf);
    region = NULL;
    agent = NULL;
}

static const fr_fixture with_agent = {up, down};

/* Calls the owner's function name with args: its code, and the reply's
 * bytes in *res when res is not NULL. As fabrpc itself would: an
 * application may not call its functions (fr_call_own_names). */
static int ask(const char *name, const void *args, size_t len,
               frpc_result *res)
{
    frpc_result r;
    int was = fr_call_own_names(1);
    int rc = frpc_call(agent, 0, name, args, len, 5000, &r);
    fr_call_own_names(was);
    if (res)
        *res = r;
    else
        frpc_result_clear(&r);
    return rc;
}

/* A request's args: desc, then off and len, then n bytes of fill. */
static size_t request(uint8_t *out, const uint8_t *desc, uint64_t off,
                      uint64_t len, size_t n, uint8_t fill)
{
    memcpy(out, desc, FRPC_MEM_DESC_SIZE);
    fr_emu_put64(out + FRPC_MEM_DESC_SIZE, off);
    fr_emu_put64(out + FRPC_MEM_DESC_SIZE + 8, len);
    memset(out + FR_EMU_HDR, fill, n);
    return FR_EMU_HDR + n;
}

/* The region's own descriptor fields, to forge from. */
static fr_memdesc fields(void)
{
    uint8_t d[FRPC_MEM_DESC_SIZE];
    fr_memdesc m;
    ck_assert_int_eq(frpc_mem_describe(region, 0, REGION, d), 0);
    ck_assert_int_eq(fr_memdesc_decode(d, sizeof(d), agent->token, 1, &m),
                     0);
    ck_assert_uint_eq(m.flags, FR_MEMDESC_F_MESSAGES);
    return m;
}

START_TEST(the_owner_refuses_what_it_cannot_check)
{
    uint8_t args[FR_EMU_HDR + 64], d[FRPC_MEM_DESC_SIZE];
    frpc_result res;
    fr_memdesc good = fields(), f;
    ck_assert_int_eq(frpc_mem_describe(region, 100, 200, d), 0);

    /* The good request first: the slice's bytes. */
    size_t n = request(args, d, 10, 16, 0, 0);
    ck_assert_int_eq(ask(FR_EMU_GET_NAME, args, n, &res), 0);
    ck_assert_uint_eq(res.len, 16);
    ck_assert_int_eq(memcmp(res.data, region_buf + 110, 16), 0);
    frpc_result_clear(&res);

    ck_assert_int_eq(ask(FR_EMU_GET_NAME, args, 10, NULL), FRPC_EPROTO);
    memset(args, 0x5a, sizeof(args));
    ck_assert_int_eq(ask(FR_EMU_GET_NAME, args, FR_EMU_HDR, NULL),
                     FRPC_EPROTO);
    fr_memdesc_encode(&good, agent->token ^ 1, d); /* another job's */
    n = request(args, d, 0, 8, 0, 0);
    ck_assert_int_eq(ask(FR_EMU_GET_NAME, args, n, NULL), FRPC_EACCES);
    ck_assert_int_eq(frpc_mem_describe(region, 100, 200, d), 0);
    n = request(args, d, 190, 11, 0, 0); /* past the described slice */
    ck_assert_int_eq(ask(FR_EMU_GET_NAME, args, n, NULL), FRPC_EINVAL);
    n = request(args, d, 0, 8, 7, 1); /* a get with bytes */
    ck_assert_int_eq(ask(FR_EMU_GET_NAME, args, n, NULL), FRPC_EPROTO);
    n = request(args, d, 0, 8, 7, 1); /* a put one byte short */
    ck_assert_int_eq(ask(FR_EMU_PUT_NAME, args, n, NULL), FRPC_EPROTO);

    /* Forged with a good check value: what the owner has decides. */
    const struct {
        const char *what;
        uint64_t region, key, addr, len;
        uint8_t access;
    } forged[] = {
        {"no such region", good.region + 1, good.key + 1, 0, 8, 3},
        {"another key", good.region, good.key + 1, 0, 8, 3},
        {"a slice past the region", good.region, good.key, REGION - 4, 8, 3},
        {"a slice longer than the region", good.region, good.key, 0,
         REGION + 1, 3},
    };
    for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
        f = good;
        f.region = forged[i].region;
        f.key = forged[i].key;
        f.addr = forged[i].addr;
        f.len = forged[i].len;
        f.access = forged[i].access;
        fr_memdesc_encode(&f, agent->token, d);
        n = request(args, d, 0, 8, 0, 0);
        ck_assert_msg(ask(FR_EMU_GET_NAME, args, n, NULL) == FRPC_EACCES,
                      "forged: %s", forged[i].what);
    }
    /* A read-only region: a forged write grant does not open it. */
    frpc_mem *ro;
    ck_assert_int_eq(frpc_mem_register(agent, region_buf, 64,
                                       FRPC_MEM_REMOTE_READ, &ro),
                     0);
    ck_assert_int_eq(frpc_mem_describe(ro, 0, 64, d), 0);
    ck_assert_int_eq(fr_memdesc_decode(d, sizeof(d), agent->token, 1, &f),
                     0);
    f.access = FR_MEMDESC_READ | FR_MEMDESC_WRITE;
    fr_memdesc_encode(&f, agent->token, d);
    uint8_t before = region_buf[0];
    n = request(args, d, 0, 8, 8, (uint8_t)~before);
    ck_assert_int_eq(ask(FR_EMU_PUT_NAME, args, n, NULL), FRPC_EACCES);
    ck_assert_uint_eq(region_buf[0], before);
    /* Deregistered: its id names nothing any more. */
    ck_assert_int_eq(frpc_mem_describe(ro, 0, 64, d), 0);
    ck_assert_int_eq(frpc_mem_deregister(ro, 5000), 0);
    n = request(args, d, 0, 8, 0, 0);
    ck_assert_int_eq(ask(FR_EMU_GET_NAME, args, n, NULL), FRPC_EACCES);
}
END_TEST

START_TEST(a_transfer_larger_than_a_piece_moves_in_pieces)
{
    /* max_msg 1 KiB: a get's pieces answer 1024 bytes, a put's carry
     * 1024 - FR_EMU_HDR (their args hold the header too). */
    enum { N = 6000 };
    uint8_t *buf = calloc(1, N + 16), d[FRPC_MEM_DESC_SIZE];
    frpc_mem *local;
    frpc_stats s0, s1;
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(frpc_mem_register(agent, buf, N + 16, 0, &local), 0);
    ck_assert_int_eq(frpc_mem_describe(region, 0, REGION, d), 0);
    ck_assert_int_eq(frpc_get_stats(agent, &s0), 0);
    ck_assert_int_eq(frpc_get(local, 3, d, sizeof(d), 5, N, 10000), 0);
    ck_assert_int_eq(memcmp(buf + 3, region_buf + 5, N), 0);
    for (int i = 0; i < N; i++)
        buf[3 + i] = (uint8_t)(i ^ 0x33);
    ck_assert_int_eq(frpc_put(local, 3, d, sizeof(d), 1000, N, 10000), 0);
    ck_assert_int_eq(memcmp(buf + 3, region_buf + 1000, N), 0);
    ck_assert_int_eq(frpc_get_stats(agent, &s1), 0);
    /* 2 transfers, the get in 6 pieces, the put in 7 (the pieces are
     * calls too) */
    ck_assert_uint_eq(s1.calls_started - s0.calls_started, 2 + 6 + 7);
    ck_assert_uint_eq(s1.transfer_bytes - s0.transfer_bytes, 2 * N);
    /* "one-sided transfers are not calls and are not counted" in the
     * per-function figures, emulated as natively: neither side's (pre-fix
     * the owner counted each piece as handled by "frpc.get"/"frpc.put") */
    frpc_fn_stats fs;
    const char *names[8];
    ck_assert_int_eq(frpc_get_fn_stats(agent, "frpc.get", &fs), 0);
    ck_assert_uint_eq(fs.calls + fs.handled, 0);
    ck_assert_int_eq(frpc_get_fn_stats(agent, "frpc.put", &fs), 0);
    ck_assert_uint_eq(fs.calls + fs.handled, 0);
    int n = frpc_fn_stats_names(agent, names, 8);
    for (int i = 0; i < n && i < 8; i++)
        ck_assert_msg(strncmp(names[i], "frpc.", 5) != 0, "figures for %s",
                      names[i]);
    ck_assert_int_eq(frpc_mem_deregister(local, 5000), 0);
    free(buf);
}
END_TEST

static void up_small(void) { up_with(1024); }
static const fr_fixture with_small_messages = {up_small, down};

static void up_tiny(void) { up_with(FR_EMU_HDR); }
static const fr_fixture with_tiny_messages = {up_tiny, down};

START_TEST(no_room_for_a_piece_is_etoobig)
{
    uint8_t d[FRPC_MEM_DESC_SIZE];
    ck_assert_int_eq(frpc_mem_describe(region, 0, REGION, d), 0);
    ck_assert_int_eq(frpc_get(region, 0, d, sizeof(d), 64, 8, 5000),
                     FRPC_ETOOBIG);
}
END_TEST

/* frpc_notify: "FRPC_ETOOBIG (len over this rank's ... config.
 * max_msg_size, where one is set below FRPC_NOTIFY_MAX)"; a batch's
 * notification likewise, refused before anything is posted. */
START_TEST(a_notification_over_max_msg_is_etoobig)
{
    uint8_t d[FRPC_MEM_DESC_SIZE], note[FR_EMU_HDR + 1];
    frpc_stats s0, s1;
    memset(note, 'n', sizeof(note));
    ck_assert_int_eq(frpc_mem_describe(region, 0, REGION, d), 0);
    ck_assert_int_eq(frpc_get_stats(agent, &s0), 0);
    ck_assert_int_eq(frpc_notify(agent, 0, note, sizeof(note), 5000),
                     FRPC_ETOOBIG);
    frpc_xfer op = {.op = FRPC_XFER_GET, .local = region, .desc = d,
                    .desc_len = sizeof(d), .len = 0};
    ck_assert_int_eq(frpc_transfer(&op, 1, note, sizeof(note), 5000),
                     FRPC_ETOOBIG);
    ck_assert_int_eq(frpc_get_stats(agent, &s1), 0);
    ck_assert_uint_eq(s1.notifications_sent, s0.notifications_sent);
    ck_assert_uint_eq(s1.transfer_batches, s0.transfer_batches);
    /* Within it, one goes. */
    ck_assert_int_eq(frpc_notify(agent, 0, note, 8, 5000), 0);
}
END_TEST

START_TEST(the_report_says_emulated_and_why)
{
    char rep[1024];
    size_t n = frpc_backend_report(agent, rep, sizeof(rep));
    ck_assert_uint_eq(n, strlen(rep));
    ck_assert_ptr_nonnull(
        strstr(rep, "rma: emulated (forced by config.rma = "
                    "FRPC_RMA_EMULATE)\n"));
    /* Truncated as snprintf does: the needed length stays the same. */
    char small[8];
    ck_assert_uint_eq(frpc_backend_report(agent, small, sizeof(small)), n);
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
    ck_assert_uint_eq(frpc_backend_report(agent, NULL, 0), n);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"the owner refuses requests it cannot check through, touching "
         "nothing",
         the_owner_refuses_what_it_cannot_check, .fixture = &with_agent},
        {"a transfer larger than a piece moves in pieces, in no "
         "per-function figure",
         a_transfer_larger_than_a_piece_moves_in_pieces,
         .fixture = &with_small_messages},
        {"a message limit with no room for a piece is FRPC_ETOOBIG",
         no_room_for_a_piece_is_etoobig, .fixture = &with_tiny_messages},
        {"a notification, alone or a batch's, over max_msg_size is "
         "FRPC_ETOOBIG",
         a_notification_over_max_msg_is_etoobig,
         .fixture = &with_tiny_messages},
        {"frpc_backend_report says emulated and why",
         the_report_says_emulated_and_why, .fixture = &with_agent},
    };
    return fr_run_tests("emu", tests, sizeof(tests) / sizeof(tests[0]), 60);
}
