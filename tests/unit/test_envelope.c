/*
 * Unit tests of the wire envelope (serialization/envelope.c): round trips,
 * the exact byte layout, and every way a frame can be malformed. Each test
 * is its own Check case with a timeout; the list of readable names is at
 * the end of the file.
 */
#include "serialization/envelope.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"

#define MAXP 4096u /* max_payload used unless a test says otherwise */

/* Field offsets in the header (envelope.h). */
enum { OFF_MAGIC = 0, OFF_VERSION = 4, OFF_KIND = 5, OFF_FLAGS = 6,
       OFF_REQ = 8, OFF_FUNC = 16, OFF_STATUS = 28, OFF_LEN = 40 };

static void patch(uint8_t *p, unsigned off, unsigned size, uint64_t v)
{
    for (unsigned i = 0; i < size; i++, v >>= 8)
        p[off + i] = (uint8_t)v;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    return fr_xorshift64(&rng_state);
}

/* A valid envelope of that kind and flags, with distinctive field values
 * (extremes included) and the payload length its kind requires. */
static fr_env mk(uint8_t kind, uint16_t flags)
{
    fr_env e = {
        .kind = kind, .flags = flags, .req_id = 0x0102030405060708ull,
        .func_id = 0xfedcba9876543210ull, .src_rank = 0xffffffffu,
        .status = 0, .token = ~0ull, .payload_len = 5,
    };
    if (flags & FR_ENV_F_RNDV)
        e.payload_len = FR_RNDV_DESC_SIZE;
    if (kind == FR_ENV_ERROR)
        e.status = (flags & FR_ENV_F_REMOTE) ? 42 : INT32_MIN;
    if (kind == FR_ENV_RNDV_DONE)
        e.payload_len = 0;
    if (kind == FR_ENV_PART) /* the last 5 bytes of a 4149-byte frame */
        e.func_id = fr_env_part_place(4144, 4149);
    return e;
}

/* Writes header + a payload fitting e into out; returns the frame length. */
static size_t frame(const fr_env *e, uint8_t *out)
{
    ck_assert_int_eq(fr_env_encode(e, out, FR_ENV_HDR_SIZE), 0);
    uint8_t *body = out + FR_ENV_HDR_SIZE;
    if (e->flags & FR_ENV_F_RNDV) {
        fr_rndv_desc d = { 0x1000, 0x77, 1000, 9 };
        ck_assert_int_eq(fr_rndv_encode(&d, body, FR_RNDV_DESC_SIZE), 0);
    } else {
        for (uint64_t i = 0; i < e->payload_len; i++)
            body[i] = (uint8_t)('a' + i % 26);
    }
    return FR_ENV_HDR_SIZE + (size_t)e->payload_len;
}

static int decode(const uint8_t *buf, size_t len)
{
    fr_env e;
    const uint8_t *pl;
    return fr_env_decode(buf, len, MAXP, &e, &pl);
}

/* Encodes a valid request, applies one patch, returns decode's answer. */
static int decode_patched(uint8_t kind, uint16_t flags, unsigned off,
                          unsigned size, uint64_t v)
{
    uint8_t buf[FR_ENV_HDR_SIZE + 64];
    fr_env e = mk(kind, flags);
    size_t n = frame(&e, buf);
    patch(buf, off, size, v);
    return decode(buf, n);
}

static const struct { uint8_t kind; uint16_t flags; } valid_combos[] = {
    { FR_ENV_REQUEST, 0 }, { FR_ENV_REQUEST, FR_ENV_F_RNDV },
    { FR_ENV_RESPONSE, 0 }, { FR_ENV_RESPONSE, FR_ENV_F_RNDV },
    { FR_ENV_ERROR, 0 }, { FR_ENV_ERROR, FR_ENV_F_REMOTE },
    { FR_ENV_ERROR, FR_ENV_F_SEVERED },
    { FR_ENV_RNDV_DONE, 0 }, { FR_ENV_PART, 0 },
};
#define NCOMBOS (sizeof valid_combos / sizeof valid_combos[0])

START_TEST(roundtrip_every_kind_and_flag)
{
    int ok = 0;
    for (uint8_t kind = FR_ENV_REQUEST; kind <= FR_ENV_KIND_MAX; kind++) {
        for (uint16_t flags = 0; flags <= FR_ENV_F_KNOWN; flags++) {
            uint8_t buf[FR_ENV_HDR_SIZE + 64];
            fr_env e = mk(kind, flags), d;
            const uint8_t *pl = (const uint8_t *)"x";
            int valid = 0;
            for (size_t i = 0; i < NCOMBOS; i++)
                valid |= valid_combos[i].kind == kind
                         && valid_combos[i].flags ==
                                (flags & ~FR_ENV_F_MORE)
                         && !(kind == FR_ENV_PART && flags);
            if (!valid) {
                ck_assert_int_eq(fr_env_encode(&e, buf, sizeof buf),
                                 FRPC_EINVAL);
                continue;
            }
            size_t n = frame(&e, buf);
            ck_assert_int_eq(fr_env_decode(buf, n, MAXP, &d, &pl), 0);
            ck_assert_uint_eq(d.kind, e.kind);
            ck_assert_uint_eq(d.flags, e.flags);
            ck_assert_uint_eq(d.req_id, e.req_id);
            ck_assert_uint_eq(d.func_id, e.func_id);
            ck_assert_uint_eq(d.src_rank, e.src_rank);
            ck_assert_int_eq(d.status, e.status);
            ck_assert_uint_eq(d.token, e.token);
            ck_assert_uint_eq(d.payload_len, e.payload_len);
            ck_assert_ptr_eq(pl, e.payload_len ? buf + FR_ENV_HDR_SIZE : NULL);
            ok++;
        }
    }
    /* each with and without MORE, but a PART, which stands alone */
    ck_assert_int_eq(ok, 2 * (int)NCOMBOS - 1);
}
END_TEST

START_TEST(header_bytes_are_little_endian_at_documented_offsets)
{
    fr_env e = { .kind = FR_ENV_ERROR, .flags = FR_ENV_F_REMOTE,
                 .req_id = 0x1122334455667788ull, .func_id = 0x0102ull,
                 .src_rank = 0xa0b0c0d0u, .status = -2, .token = 0x99ull,
                 .payload_len = 3 };
    static const uint8_t want[FR_ENV_HDR_SIZE] = {
        'F', 'R', 'P', 'C', FR_ENV_VERSION, 3, 0x02, 0x00,
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        0x02, 0x01, 0, 0, 0, 0, 0, 0,
        0xd0, 0xc0, 0xb0, 0xa0, 0xfe, 0xff, 0xff, 0xff,
        0x99, 0, 0, 0, 0, 0, 0, 0,
        3, 0, 0, 0, 0, 0, 0, 0,
    };
    uint8_t buf[FR_ENV_HDR_SIZE];
    ck_assert_int_eq(fr_env_encode(&e, buf, sizeof buf), 0);
    ck_assert_mem_eq(buf, want, sizeof want);
    /* Every byte of the 64-bit fields. */
    static const uint8_t le64[8] = { 8, 7, 6, 5, 4, 3, 2, 1 };
    e = (fr_env){ .kind = FR_ENV_RESPONSE, .req_id = 1,
                  .token = 0x0102030405060708ull,
                  .payload_len = 0x0102030405060708ull };
    ck_assert_int_eq(fr_env_encode(&e, buf, sizeof buf), 0);
    ck_assert_mem_eq(buf + 32, le64, 8);
    ck_assert_mem_eq(buf + 40, le64, 8);
}
END_TEST

START_TEST(every_truncation_is_rejected)
{
    for (size_t c = 0; c < NCOMBOS; c++) {
        uint8_t buf[FR_ENV_HDR_SIZE + 64];
        fr_env e = mk(valid_combos[c].kind, valid_combos[c].flags);
        size_t n = frame(&e, buf);
        for (size_t cut = 0; cut < n; cut++) {
            /* A copy of exactly cut bytes, so ASan sees any over-read. */
            uint8_t *p = malloc(cut ? cut : 1);
            memcpy(p, buf, cut);
            ck_assert_msg(decode(p, cut) == FRPC_EPROTO,
                          "combo %zu cut %zu accepted", c, cut);
            free(p);
        }
    }
}
END_TEST

/* Each of vals written in turn at byte off of a valid frame is rejected. */
static void reject_each(unsigned off, const uint8_t *vals, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(decode_patched(FR_ENV_RESPONSE, 0, off, 1, vals[i])
                      == FRPC_EPROTO, "byte %u = %u accepted", off, vals[i]);
}

START_TEST(bad_magic_and_version_are_rejected)
{
    static const uint8_t lower_f[] = { 'f' }, versions[] = {
        0, FR_ENV_VERSION - 1, FR_ENV_VERSION + 1, 255 };
    for (unsigned i = 0; i < 4; i++)
        reject_each(OFF_MAGIC + i, lower_f, sizeof lower_f);
    reject_each(OFF_VERSION, versions, sizeof versions);
}
END_TEST

START_TEST(bad_kind_is_rejected)
{
    static const uint8_t kinds[] = { 0, 5, 255 };
    reject_each(OFF_KIND, kinds, sizeof kinds);
}
END_TEST

START_TEST(unknown_flags_are_rejected)
{
    for (unsigned bit = 0; bit < 16; bit++) {
        uint16_t f = (uint16_t)(1u << bit);
        if (f & FR_ENV_F_KNOWN)
            continue;
        ck_assert_int_eq(decode_patched(FR_ENV_REQUEST, 0, OFF_FLAGS, 2, f),
                         FRPC_EPROTO);
        fr_env e = mk(FR_ENV_REQUEST, 0);
        uint8_t buf[FR_ENV_HDR_SIZE];
        e.flags = f;
        ck_assert_int_eq(fr_env_encode(&e, buf, sizeof buf), FRPC_EINVAL);
    }
}
END_TEST

START_TEST(request_id_zero_is_rejected)
{
    for (size_t c = 0; c < NCOMBOS; c++)
        ck_assert_int_eq(decode_patched(valid_combos[c].kind,
                                        valid_combos[c].flags, OFF_REQ, 8, 0),
                         FRPC_EPROTO);
}
END_TEST

START_TEST(length_disagreement_is_rejected)
{
    uint8_t buf[FR_ENV_HDR_SIZE + 64] = { 0 };
    fr_env e = mk(FR_ENV_REQUEST, 0);
    size_t n = frame(&e, buf);
    ck_assert_int_eq(decode(buf, n), 0);
    ck_assert_int_eq(decode(buf, n + 1), FRPC_EPROTO); /* extra byte */
    ck_assert_int_eq(decode(buf, n - 1), FRPC_EPROTO); /* missing byte */
    patch(buf, OFF_LEN, 8, e.payload_len + 1);
    ck_assert_int_eq(decode(buf, n), FRPC_EPROTO);
    patch(buf, OFF_LEN, 8, e.payload_len - 1);
    ck_assert_int_eq(decode(buf, n), FRPC_EPROTO);
    patch(buf, OFF_LEN, 8, UINT64_MAX); /* no wrap-around */
    fr_env d;
    const uint8_t *pl;
    ck_assert_int_eq(fr_env_decode(buf, n, UINT64_MAX, &d, &pl), FRPC_EPROTO);
}
END_TEST

START_TEST(payload_over_the_limit_is_too_big)
{
    uint8_t buf[FR_ENV_HDR_SIZE + 64];
    fr_env e = mk(FR_ENV_RESPONSE, 0), d;
    const uint8_t *pl;
    e.payload_len = 40;
    size_t n = frame(&e, buf);
    ck_assert_int_eq(fr_env_decode(buf, n, 40, &d, &pl), 0);
    ck_assert_int_eq(fr_env_decode(buf, n, 39, &d, &pl), FRPC_ETOOBIG);
    ck_assert_int_eq(fr_env_decode_header(buf, n, 39, &d), FRPC_ETOOBIG);
    /* Declared far over the limit and truncated: the limit is reported. */
    patch(buf, OFF_LEN, 8, 1ull << 40);
    ck_assert_int_eq(fr_env_decode(buf, n, MAXP, &d, &pl), FRPC_ETOOBIG);
    /* A rendezvous frame is limited by the descriptor's len. */
    e = mk(FR_ENV_REQUEST, FR_ENV_F_RNDV); /* desc len 1000 */
    n = frame(&e, buf);
    ck_assert_int_eq(fr_env_decode(buf, n, 1000, &d, &pl), 0);
    ck_assert_int_eq(fr_env_decode(buf, n, 999, &d, &pl), FRPC_ETOOBIG);
    /* ... and not by its own 32-byte payload. */
    patch(buf, FR_ENV_HDR_SIZE + 16, 8, 8);
    ck_assert_int_eq(fr_env_decode(buf, n, 8, &d, &pl), 0);
}
END_TEST

START_TEST(rendezvous_descriptor_rules)
{
    uint8_t buf[FR_ENV_HDR_SIZE + 64];
    fr_rndv_desc d = { 0xdead0000beefull, 0x1234, 1u << 20, 77 }, r;
    ck_assert_int_eq(fr_rndv_encode(&d, buf, FR_RNDV_DESC_SIZE), 0);
    ck_assert_int_eq(fr_rndv_decode(buf, FR_RNDV_DESC_SIZE, 1u << 20, &r), 0);
    ck_assert_mem_eq(&r, &d, sizeof d);
    ck_assert_int_eq(fr_rndv_decode(buf, FR_RNDV_DESC_SIZE, (1u << 20) - 1,
                                    &r), FRPC_ETOOBIG);
    ck_assert_int_eq(fr_rndv_decode(buf, FR_RNDV_DESC_SIZE - 1, MAXP << 10, &r),
                     FRPC_EPROTO);
    ck_assert_int_eq(fr_rndv_decode(buf, FR_RNDV_DESC_SIZE + 1, MAXP << 10, &r),
                     FRPC_EPROTO);
    patch(buf, 16, 8, 0); /* len 0 */
    ck_assert_int_eq(fr_rndv_decode(buf, FR_RNDV_DESC_SIZE, MAXP, &r),
                     FRPC_EPROTO);
    patch(buf, 16, 8, 8);
    patch(buf, 24, 8, 0); /* cookie 0 */
    ck_assert_int_eq(fr_rndv_decode(buf, FR_RNDV_DESC_SIZE, MAXP, &r),
                     FRPC_EPROTO);
    d.len = 0;
    ck_assert_int_eq(fr_rndv_encode(&d, buf, sizeof buf), FRPC_EINVAL);
    d.len = 1;
    ck_assert_int_eq(fr_rndv_encode(&d, buf, FR_RNDV_DESC_SIZE - 1),
                     FRPC_EINVAL);

    /* In an envelope: exactly one valid descriptor, only on data kinds. */
    static const uint64_t bad_len[] = { 0, 31, 33 };
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_eq(decode_patched(FR_ENV_REQUEST, FR_ENV_F_RNDV, OFF_LEN,
                                        8, bad_len[i]), FRPC_EPROTO);
    ck_assert_int_eq(decode_patched(FR_ENV_RESPONSE, FR_ENV_F_RNDV,
                                    FR_ENV_HDR_SIZE + 16, 8, 0), FRPC_EPROTO);
    ck_assert_int_eq(decode_patched(FR_ENV_ERROR, 0, OFF_FLAGS, 2,
                                    FR_ENV_F_RNDV), FRPC_EPROTO);
    ck_assert_int_eq(decode_patched(FR_ENV_RNDV_DONE, 0, OFF_FLAGS, 2,
                                    FR_ENV_F_RNDV), FRPC_EPROTO);
}
END_TEST

START_TEST(error_and_kind_rules)
{
    /* ERROR: a negative code unless REMOTE, where any code goes. */
    ck_assert_int_eq(decode_patched(FR_ENV_ERROR, 0, OFF_STATUS, 4, 0),
                     FRPC_EPROTO);
    ck_assert_int_eq(decode_patched(FR_ENV_ERROR, 0, OFF_STATUS, 4, 7),
                     FRPC_EPROTO);
    ck_assert_int_eq(decode_patched(FR_ENV_ERROR, 0, OFF_STATUS, 4,
                                    (uint32_t)FRPC_ENOFUNC), 0);
    ck_assert_int_eq(decode_patched(FR_ENV_ERROR, FR_ENV_F_REMOTE, OFF_STATUS,
                                    4, 0), 0);
    ck_assert_int_eq(decode_patched(FR_ENV_ERROR, FR_ENV_F_REMOTE, OFF_STATUS,
                                    4, 0xffffffffu), 0);
    /* Status on other kinds, REMOTE off ERROR, DONE with a payload, a
     * request without a function. */
    ck_assert_int_eq(decode_patched(FR_ENV_RESPONSE, 0, OFF_STATUS, 4, 1),
                     FRPC_EPROTO);
    ck_assert_int_eq(decode_patched(FR_ENV_REQUEST, 0, OFF_FLAGS, 2,
                                    FR_ENV_F_REMOTE), FRPC_EPROTO);
    ck_assert_int_eq(decode_patched(FR_ENV_REQUEST, 0, OFF_FUNC, 8, 0),
                     FRPC_EPROTO);
    ck_assert_int_eq(decode_patched(FR_ENV_RESPONSE, 0, OFF_FUNC, 8, 0), 0);

    uint8_t done[FR_ENV_HDR_SIZE + 1] = { 0 };
    fr_env e = mk(FR_ENV_RNDV_DONE, 0);
    frame(&e, done);
    patch(done, OFF_LEN, 8, 1);
    ck_assert_int_eq(decode(done, sizeof done), FRPC_EPROTO);

    /* The error message is limited to FR_ENV_MAX_ERRMSG bytes. */
    static uint8_t big[FR_ENV_HDR_SIZE + FR_ENV_MAX_ERRMSG + 1];
    e = mk(FR_ENV_ERROR, FR_ENV_F_REMOTE);
    e.payload_len = FR_ENV_MAX_ERRMSG;
    ck_assert_uint_eq(frame(&e, big), sizeof big - 1);
    ck_assert_int_eq(decode(big, sizeof big - 1), 0);
    patch(big, OFF_LEN, 8, FR_ENV_MAX_ERRMSG + 1);
    ck_assert_int_eq(decode(big, sizeof big), FRPC_EPROTO);
}
END_TEST

/* A part lies inside the whole frame it names, carries a byte at least,
 * stands alone, and is not held to the payload limit (its whole is). */
static int decode_part(uint32_t off, uint32_t total, uint64_t len,
                       uint16_t flags, int32_t status, uint64_t limit)
{
    static uint8_t buf[FR_ENV_HDR_SIZE + 4096];
    fr_env e = mk(FR_ENV_PART, 0), d;
    const uint8_t *pl;
    e.payload_len = 1;
    frame(&e, buf); /* a valid header to patch */
    patch(buf, OFF_FUNC, 8, fr_env_part_place(off, total));
    patch(buf, OFF_LEN, 8, len);
    patch(buf, OFF_FLAGS, 2, flags);
    patch(buf, OFF_STATUS, 4, (uint32_t)status);
    return fr_env_decode(buf, FR_ENV_HDR_SIZE + (size_t)len, limit, &d, &pl);
}

START_TEST(part_rules)
{
    ck_assert_int_eq(decode_part(0, 4200, 4048, 0, 0, MAXP), 0);
    ck_assert_int_eq(decode_part(4048, 4200, 152, 0, 0, MAXP), 0);
    ck_assert_int_eq(decode_part(4048, 4200, 152, 0, 0, 10), 0); /* limit */
    ck_assert_int_eq(decode_part(4048, 4200, 153, 0, 0, MAXP), FRPC_EPROTO);
    ck_assert_int_eq(decode_part(4200, 4200, 1, 0, 0, MAXP), FRPC_EPROTO);
    ck_assert_int_eq(decode_part(0, 4200, 0, 0, 0, MAXP), FRPC_EPROTO);
    ck_assert_int_eq(decode_part(0, FR_ENV_HDR_SIZE, 1, 0, 0, MAXP),
                     FRPC_EPROTO);
    ck_assert_int_eq(decode_part(0xffffffffu, 4200, 1, 0, 0, MAXP),
                     FRPC_EPROTO);
    ck_assert_int_eq(decode_part(0, 4200, 10, FR_ENV_F_MORE, 0, MAXP),
                     FRPC_EPROTO);
    ck_assert_int_eq(decode_part(0, 4200, 10, FR_ENV_F_RNDV, 0, MAXP),
                     FRPC_EPROTO);
    ck_assert_int_eq(decode_part(0, 4200, 10, 0, 3, MAXP), FRPC_EPROTO);
    fr_env e = mk(FR_ENV_PART, 0);
    uint8_t hdr[FR_ENV_HDR_SIZE];
    e.func_id = fr_env_part_place(10, 10);
    ck_assert_int_eq(fr_env_encode(&e, hdr, sizeof hdr), FRPC_EINVAL);
    ck_assert_uint_eq(fr_env_part_off(&(fr_env){
                          .func_id = fr_env_part_place(7, 9)}), 7);
    ck_assert_uint_eq(fr_env_part_total(&(fr_env){
                          .func_id = fr_env_part_place(7, 9)}), 9);
}
END_TEST

START_TEST(encode_refuses_invalid_envelopes)
{
    uint8_t buf[FR_ENV_HDR_SIZE];
    fr_env e = mk(FR_ENV_REQUEST, 0), bad;
    ck_assert_int_eq(fr_env_encode(NULL, buf, sizeof buf), FRPC_EINVAL);
    ck_assert_int_eq(fr_env_encode(&e, NULL, sizeof buf), FRPC_EINVAL);
    ck_assert_int_eq(fr_env_encode(&e, buf, sizeof buf - 1), FRPC_EINVAL);
    bad = e; bad.kind = 0;
    ck_assert_int_eq(fr_env_encode(&bad, buf, sizeof buf), FRPC_EINVAL);
    bad = e; bad.kind = FR_ENV_KIND_MAX + 1;
    ck_assert_int_eq(fr_env_encode(&bad, buf, sizeof buf), FRPC_EINVAL);
    bad = e; bad.req_id = 0;
    ck_assert_int_eq(fr_env_encode(&bad, buf, sizeof buf), FRPC_EINVAL);
    bad = e; bad.func_id = 0;
    ck_assert_int_eq(fr_env_encode(&bad, buf, sizeof buf), FRPC_EINVAL);
    bad = mk(FR_ENV_ERROR, 0); bad.status = 3;
    ck_assert_int_eq(fr_env_encode(&bad, buf, sizeof buf), FRPC_EINVAL);
    /* A request's status is its caller's time left: never negative. */
    bad = e; bad.status = -1;
    ck_assert_int_eq(fr_env_encode(&bad, buf, sizeof buf), FRPC_EINVAL);
    bad = e; bad.status = 5000;
    ck_assert_int_eq(fr_env_encode(&bad, buf, sizeof buf), 0);
    bad = mk(FR_ENV_RESPONSE, 0); bad.status = 5000;
    ck_assert_int_eq(fr_env_encode(&bad, buf, sizeof buf), FRPC_EINVAL);
    bad = mk(FR_ENV_ERROR, 0); bad.payload_len = FR_ENV_MAX_ERRMSG + 1;
    ck_assert_int_eq(fr_env_encode(&bad, buf, sizeof buf), FRPC_EINVAL);
    bad = mk(FR_ENV_REQUEST, FR_ENV_F_RNDV); bad.payload_len = 8;
    ck_assert_int_eq(fr_env_encode(&bad, buf, sizeof buf), FRPC_EINVAL);
    bad = mk(FR_ENV_RNDV_DONE, 0); bad.payload_len = 1;
    ck_assert_int_eq(fr_env_encode(&bad, buf, sizeof buf), FRPC_EINVAL);
    /* No limit on encode: any payload_len of a data frame is written. */
    e.payload_len = UINT64_MAX;
    ck_assert_int_eq(fr_env_encode(&e, buf, sizeof buf), 0);
}
END_TEST

START_TEST(null_arguments_are_invalid)
{
    uint8_t buf[FR_ENV_HDR_SIZE + 64];
    fr_env e = mk(FR_ENV_REQUEST, 0);
    fr_rndv_desc d;
    const uint8_t *pl;
    size_t n = frame(&e, buf);
    ck_assert_int_eq(fr_env_decode(NULL, n, MAXP, &e, &pl), FRPC_EINVAL);
    ck_assert_int_eq(fr_env_decode(buf, n, MAXP, NULL, &pl), FRPC_EINVAL);
    ck_assert_int_eq(fr_env_decode(buf, n, MAXP, &e, NULL), FRPC_EINVAL);
    ck_assert_int_eq(fr_env_decode_header(NULL, n, MAXP, &e), FRPC_EINVAL);
    ck_assert_int_eq(fr_env_decode_header(buf, n, MAXP, NULL), FRPC_EINVAL);
    ck_assert_int_eq(fr_rndv_decode(NULL, 32, MAXP, &d), FRPC_EINVAL);
    ck_assert_int_eq(fr_rndv_decode(buf, 32, MAXP, NULL), FRPC_EINVAL);
    ck_assert_int_eq(fr_rndv_encode(NULL, buf, 32), FRPC_EINVAL);
}
END_TEST

START_TEST(header_decodes_without_its_payload)
{
    uint8_t buf[FR_ENV_HDR_SIZE + 64];
    fr_env e = mk(FR_ENV_REQUEST, 0), d;
    frame(&e, buf);
    /* The header alone, or with more bytes than the payload: both fine. */
    ck_assert_int_eq(fr_env_decode_header(buf, FR_ENV_HDR_SIZE, MAXP, &d), 0);
    ck_assert_int_eq(fr_env_decode_header(buf, sizeof buf, MAXP, &d), 0);
    ck_assert_uint_eq(d.payload_len, e.payload_len);
    ck_assert_int_eq(fr_env_decode_header(buf, FR_ENV_HDR_SIZE - 1, MAXP, &d),
                     FRPC_EPROTO);
}
END_TEST

/* A payload kept apart from its header (a whole from parts) decodes as
 * if it followed it: the same checks, the payload where it lies. */
START_TEST(a_payload_apart_from_its_header_decodes_the_same)
{
    uint8_t buf[FR_ENV_HDR_SIZE + 64], apart[64];
    fr_env e = mk(FR_ENV_REQUEST, 0), d;
    const uint8_t *pl = NULL;
    size_t n = frame(&e, buf);
    memcpy(apart, buf + FR_ENV_HDR_SIZE, n - FR_ENV_HDR_SIZE);
    ck_assert_int_eq(fr_env_decode_header(buf, FR_ENV_HDR_SIZE, MAXP, &d), 0);
    ck_assert_int_eq(fr_env_decode_body(apart, n - FR_ENV_HDR_SIZE, MAXP, &d,
                                        &pl), 0);
    ck_assert_ptr_eq(pl, apart);
    /* a length that disagrees, a payload over the limit */
    ck_assert_int_eq(fr_env_decode_body(apart, n - FR_ENV_HDR_SIZE - 1, MAXP,
                                        &d, &pl), FRPC_EPROTO);
    ck_assert_int_eq(fr_env_decode_body(apart, n - FR_ENV_HDR_SIZE,
                                        d.payload_len - 1, &d, &pl),
                     FRPC_ETOOBIG);
    /* NULL: the body only when it is empty */
    ck_assert_int_eq(fr_env_decode_body(NULL, 1, MAXP, &d, &pl), FRPC_EINVAL);
    ck_assert_int_eq(fr_env_decode_body(apart, n - FR_ENV_HDR_SIZE, MAXP,
                                        NULL, &pl), FRPC_EINVAL);
    ck_assert_int_eq(fr_env_decode_body(apart, n - FR_ENV_HDR_SIZE, MAXP, &d,
                                        NULL), FRPC_EINVAL);
    fr_env done = mk(FR_ENV_RNDV_DONE, 0);
    pl = apart;
    ck_assert_int_eq(fr_env_decode_body(NULL, 0, MAXP, &done, &pl), 0);
    ck_assert_ptr_null(pl);
    /* fr_env_decode_rest, which it serves: a frame shorter than a header */
    ck_assert_int_eq(fr_env_decode_rest(buf, FR_ENV_HDR_SIZE - 1, MAXP, &d,
                                        &pl), FRPC_EINVAL);
}
END_TEST

START_TEST(function_id_is_fnv1a_stable_and_nonzero)
{
    /* Published FNV-1a 64 test vectors. */
    ck_assert_uint_eq(fr_func_id(""), 0xcbf29ce484222325ull);
    ck_assert_uint_eq(fr_func_id("a"), 0xaf63dc4c8601ec8cull);
    ck_assert_uint_eq(fr_func_id("foobar"), 0x85944171f73967e8ull);
    ck_assert_uint_eq(fr_func_id(NULL), fr_func_id(""));
    ck_assert_uint_eq(fr_func_id("echo"), fr_func_id("echo"));
    ck_assert_uint_ne(fr_func_id("echo"), fr_func_id("echO"));
    char name[32];
    for (int i = 0; i < 100000; i++) {
        snprintf(name, sizeof name, "fn.%d", i);
        ck_assert_uint_ne(fr_func_id(name), 0);
    }
}
END_TEST

START_TEST(random_bytes_never_crash)
{
    uint8_t buf[FR_ENV_HDR_SIZE + 80], hdr[FR_ENV_HDR_SIZE];
    int accepted = 0;
    for (int i = 0; i < 100000; i++) {
        size_t n = (size_t)(rnd() % sizeof buf);
        for (size_t j = 0; j < n; j++)
            buf[j] = (uint8_t)rnd();
        if (i % 2 && n >= FR_ENV_HDR_SIZE) {
            /* Plausible frames: right magic, version, length; small kinds,
             * flags and status so that some are accepted. */
            patch(buf, OFF_MAGIC, 4, FR_ENV_MAGIC);
            buf[OFF_VERSION] = FR_ENV_VERSION;
            buf[OFF_KIND] = (uint8_t)(rnd() % 6);
            patch(buf, OFF_FLAGS, 2, rnd() % 5);
            patch(buf, OFF_STATUS, 4, (uint32_t)((int)(rnd() % 3) - 1));
            patch(buf, OFF_LEN, 8, n - FR_ENV_HDR_SIZE);
        }
        uint8_t *p = malloc(n ? n : 1); /* exact size for ASan */
        memcpy(p, buf, n);
        fr_env e;
        const uint8_t *pl;
        int rc = fr_env_decode(p, n, MAXP, &e, &pl);
        ck_assert(rc == 0 || rc == FRPC_EPROTO || rc == FRPC_ETOOBIG);
        if (rc == 0) {
            accepted++;
            ck_assert_int_eq(fr_env_encode(&e, hdr, sizeof hdr), 0);
            ck_assert_mem_eq(hdr, p, FR_ENV_HDR_SIZE);
        }
        free(p);
    }
    ck_assert_int_gt(accepted, 100);
}
END_TEST

/* Appends a frame of kind/payload to msg at *off; returns its offset. */
static size_t append(uint8_t *msg, size_t *off, uint8_t kind, size_t plen)
{
    fr_env e = mk(kind, 0);
    e.payload_len = kind == FR_ENV_RNDV_DONE ? 0 : plen;
    size_t at = *off;
    *off += frame(&e, msg + at);
    return at;
}

START_TEST(frames_of_a_message_split_and_decode)
{
    uint8_t msg[3 * FR_ENV_HDR_SIZE + 16];
    size_t off = 0, at[3];
    at[0] = append(msg, &off, FR_ENV_REQUEST, 7);
    at[1] = append(msg, &off, FR_ENV_RNDV_DONE, 0);
    at[2] = append(msg, &off, FR_ENV_RESPONSE, 9);
    fr_env_set_more(msg + at[0]);
    fr_env_set_more(msg + at[1]);

    size_t pos = 0, n, count = 0;
    while (pos < off) {
        ck_assert_int_eq(fr_env_frame_len(msg + pos, off - pos, &n), 0);
        ck_assert_uint_eq(pos, at[count]);
        fr_env e;
        const uint8_t *pl;
        ck_assert_int_eq(fr_env_decode(msg + pos, n, MAXP, &e, &pl), 0);
        ck_assert_uint_eq((e.flags & FR_ENV_F_MORE) != 0, count < 2);
        pos += n;
        count++;
    }
    ck_assert_uint_eq(count, 3);
    ck_assert_uint_eq(pos, off);
}
END_TEST

START_TEST(frame_split_rejects_what_does_not_fit)
{
    uint8_t msg[2 * FR_ENV_HDR_SIZE + 16];
    size_t off = 0, n;
    append(msg, &off, FR_ENV_REQUEST, 5);
    size_t one = off;
    /* One frame, no MORE: exactly the message. */
    ck_assert_int_eq(fr_env_frame_len(msg, one, &n), 0);
    ck_assert_uint_eq(n, one);
    /* Trailing bytes without MORE. */
    ck_assert_int_eq(fr_env_frame_len(msg, one + 1, &n), FRPC_EPROTO);
    /* MORE on the last frame, or fewer than a header after it. */
    fr_env_set_more(msg);
    ck_assert_int_eq(fr_env_frame_len(msg, one, &n), FRPC_EPROTO);
    ck_assert_int_eq(fr_env_frame_len(msg, one + FR_ENV_HDR_SIZE - 1, &n),
                     FRPC_EPROTO);
    ck_assert_int_eq(fr_env_frame_len(msg, one + FR_ENV_HDR_SIZE, &n), 0);
    ck_assert_uint_eq(n, one);
    /* A payload length past the end, including one that would wrap. */
    patch(msg, OFF_LEN, 8, 6);
    ck_assert_int_eq(fr_env_frame_len(msg, one, &n), FRPC_EPROTO);
    patch(msg, OFF_LEN, 8, UINT64_MAX - 10);
    ck_assert_int_eq(fr_env_frame_len(msg, sizeof msg, &n), FRPC_EPROTO);
    /* Short, bad magic, bad version, NULLs. */
    patch(msg, OFF_LEN, 8, 5);
    ck_assert_int_eq(fr_env_frame_len(msg, FR_ENV_HDR_SIZE - 1, &n),
                     FRPC_EPROTO);
    patch(msg, OFF_VERSION, 1, FR_ENV_VERSION + 1);
    ck_assert_int_eq(fr_env_frame_len(msg, sizeof msg, &n), FRPC_EPROTO);
    patch(msg, OFF_VERSION, 1, FR_ENV_VERSION);
    patch(msg, OFF_MAGIC, 1, 0);
    ck_assert_int_eq(fr_env_frame_len(msg, sizeof msg, &n), FRPC_EPROTO);
    ck_assert_int_eq(fr_env_frame_len(NULL, 10, &n), FRPC_EINVAL);
    ck_assert_int_eq(fr_env_frame_len(msg, 10, NULL), FRPC_EINVAL);
}
END_TEST

START_TEST(random_messages_split_within_bounds)
{
    uint8_t buf[4 * FR_ENV_HDR_SIZE + 64];
    for (int i = 0; i < 50000; i++) {
        size_t n = (size_t)(rnd() % sizeof buf);
        for (size_t j = 0; j < n; j++)
            buf[j] = (uint8_t)rnd();
        for (size_t at = 0; at + FR_ENV_HDR_SIZE <= n && rnd() % 4;
             at += FR_ENV_HDR_SIZE + rnd() % 16) {
            patch(buf + at, OFF_MAGIC, 4, FR_ENV_MAGIC);
            buf[at + OFF_VERSION] = FR_ENV_VERSION;
            patch(buf + at, OFF_LEN, 8, rnd() % 24);
        }
        uint8_t *p = malloc(n ? n : 1); /* exact size for ASan */
        memcpy(p, buf, n);
        size_t pos = 0, fl;
        while (pos < n && fr_env_frame_len(p + pos, n - pos, &fl) == 0) {
            ck_assert_uint_ge(fl, FR_ENV_HDR_SIZE);
            ck_assert_uint_le(fl, n - pos);
            pos += fl;
        }
        ck_assert_uint_le(pos, n);
        free(p);
    }
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        { "round trip of every kind and flag", roundtrip_every_kind_and_flag },
        { "header bytes are little-endian at documented offsets",
          header_bytes_are_little_endian_at_documented_offsets },
        { "every truncation is rejected", every_truncation_is_rejected },
        { "bad magic and version are rejected",
          bad_magic_and_version_are_rejected },
        { "bad kind is rejected", bad_kind_is_rejected },
        { "unknown flags are rejected", unknown_flags_are_rejected },
        { "request id zero is rejected", request_id_zero_is_rejected },
        { "length disagreement is rejected", length_disagreement_is_rejected },
        { "payload over the limit is too big",
          payload_over_the_limit_is_too_big },
        { "rendezvous descriptor rules", rendezvous_descriptor_rules },
        { "error and kind rules", error_and_kind_rules },
        { "a part lies inside its whole and stands alone", part_rules },
        { "encode refuses invalid envelopes",
          encode_refuses_invalid_envelopes },
        { "null arguments are invalid", null_arguments_are_invalid },
        { "header decodes without its payload",
          header_decodes_without_its_payload },
        { "a payload apart from its header decodes the same",
          a_payload_apart_from_its_header_decodes_the_same },
        { "function id is FNV-1a, stable and nonzero",
          function_id_is_fnv1a_stable_and_nonzero },
        { "random bytes never crash", random_bytes_never_crash },
        { "frames of a message split and decode",
          frames_of_a_message_split_and_decode },
        { "frame split rejects what does not fit",
          frame_split_rejects_what_does_not_fit },
        { "random messages split within bounds",
          random_messages_split_within_bounds },
    };
    return fr_run_tests("envelope", tests, sizeof(tests) / sizeof(tests[0]),
                        60);
}
