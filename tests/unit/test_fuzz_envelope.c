/*
 * Replays a deterministic corpus through the fuzz target
 * (tests/fuzz/fuzz_envelope.c) without libFuzzer, so `make check` exercises
 * its invariants on every build: valid frames, all their truncations, every
 * single-bit flip, and 200,000 pseudo-random buffers from a fixed seed. The
 * target aborts on a violated invariant, which Check reports as an error.
 * Every input is an exact-size heap copy, so ASan builds catch over-reads.
 */
#include "serialization/envelope.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void feed(const uint8_t *buf, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    /* Not ck_assert: each one writes Check's mark to its pipe, a syscall
     * per input (minutes under the sanitizers for 200k inputs). */
    if (!p)
        ck_abort_msg("malloc");
    if (n > 0)
        memcpy(p, buf, n);
    LLVMFuzzerTestOneInput(p, n);
    free(p);
}

/* {"op": "add", "args": [1, -2, 3.5], "blob": bin(3), "deep": [[[{}]]]} */
static const uint8_t mp_args[] = {
    0x84, 0xa2, 'o', 'p', 0xa3, 'a', 'd', 'd',
    0xa4, 'a', 'r', 'g', 's', 0x93, 0x01, 0xfe,
    0xcb, 0x40, 0x0c, 0, 0, 0, 0, 0, 0,
    0xa4, 'b', 'l', 'o', 'b', 0xc4, 3, 0xde, 0xad, 0x00,
    0xa4, 'd', 'e', 'e', 'p', 0x91, 0x91, 0x91, 0x80,
};
static const uint8_t rndv_desc[FR_RNDV_DESC_SIZE] = {
    0, 0x10, 0, 0, 0, 0, 0, 0,  /* addr */
    0x77, 0, 0, 0, 0, 0, 0, 0,  /* key */
    0, 4, 0, 0, 0, 0, 0, 0,     /* len 1024 */
    9, 0, 0, 0, 0, 0, 0, 0,     /* cookie */
};
static const char errmsg[] = "handler failed: no such key";

/* One valid frame of each kind and flag combination, with a payload. */
static const struct seed {
    uint8_t kind;
    uint16_t flags;
    int32_t status;
    const void *payload;
    size_t len;
} seeds[] = {
    { FR_ENV_REQUEST, 0, 0, mp_args, sizeof mp_args },
    { FR_ENV_REQUEST, FR_ENV_F_RNDV, 0, rndv_desc, sizeof rndv_desc },
    { FR_ENV_RESPONSE, 0, 0, mp_args + 1, 3 },
    { FR_ENV_RESPONSE, FR_ENV_F_RNDV, 0, rndv_desc, sizeof rndv_desc },
    { FR_ENV_ERROR, 0, FRPC_ENOFUNC, errmsg, sizeof errmsg - 1 },
    { FR_ENV_ERROR, FR_ENV_F_REMOTE, 17, errmsg, sizeof errmsg - 1 },
    { FR_ENV_RNDV_DONE, 0, 0, NULL, 0 },
};
#define NSEEDS (sizeof seeds / sizeof seeds[0])
#define FRAME_MAX (FR_ENV_HDR_SIZE + 64)

static size_t build(const struct seed *s, uint8_t *out)
{
    fr_env e = { .kind = s->kind, .flags = s->flags, .req_id = 0x1234,
                 .func_id = fr_func_id("kv.put"), .src_rank = 3,
                 .status = s->status, .token = 0xabcdef, .payload_len = s->len };
    if (fr_env_encode(&e, out, FRAME_MAX) != 0)
        ck_abort_msg("a seed's envelope does not encode");
    if (s->len)
        memcpy(out + FR_ENV_HDR_SIZE, s->payload, s->len);
    return FR_ENV_HDR_SIZE + s->len;
}

START_TEST(valid_frames_keep_every_invariant)
{
    uint8_t buf[FRAME_MAX];
    for (size_t i = 0; i < NSEEDS; i++) {
        size_t n = build(&seeds[i], buf);
        fr_env e;
        const uint8_t *pl;
        ck_assert_int_eq(fr_env_decode(buf, n, 1u << 20, &e, &pl), 0);
        feed(buf, n);
    }
    feed(mp_args, sizeof mp_args);
    feed(rndv_desc, sizeof rndv_desc);
    feed(NULL, 0);
}
END_TEST

START_TEST(every_truncation_keeps_every_invariant)
{
    uint8_t buf[FRAME_MAX];
    for (size_t i = 0; i < NSEEDS; i++) {
        size_t n = build(&seeds[i], buf);
        for (size_t cut = 0; cut <= n; cut++)
            feed(buf, cut);
    }
    for (size_t cut = 0; cut <= sizeof mp_args; cut++)
        feed(mp_args, cut);
}
END_TEST

START_TEST(every_bit_flip_keeps_every_invariant)
{
    uint8_t buf[FRAME_MAX];
    for (size_t i = 0; i < NSEEDS; i++) {
        size_t n = build(&seeds[i], buf);
        for (size_t bit = 0; bit < 8 * n; bit++) {
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            feed(buf, n);
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
    }
}
END_TEST

static uint64_t xs = 0x2545f4914f6cdd1dull;
static uint64_t xorshift(void)
{
    return fr_xorshift64(&xs);
}

START_TEST(random_buffers_keep_every_invariant)
{
    /* Bytes msgpack containers and small values are made of, so that
     * random msgpack nests and is sometimes whole. */
    static const uint8_t mp_bytes[] = { 0x91, 0x92, 0x81, 0xdc, 0xa1, 0xc4,
                                        0x00, 0x01, 0x7f, 0xc0, 0xc3, 0xe0,
                                        0x00, 0x01, 0x05, 0xc0, 0xc2, 0xff };
    uint8_t buf[FRAME_MAX + 64];
    for (int i = 0; i < 200000; i++) {
        size_t n = (size_t)(xorshift() % sizeof buf);
        for (size_t j = 0; j < n; j++)
            buf[j] = (uint8_t)xorshift();
        switch (i % 4) {
        case 1: /* a valid frame's header, random payload bytes */
            n = build(&seeds[xorshift() % NSEEDS], buf);
            for (size_t j = FR_ENV_HDR_SIZE; j < n; j++)
                buf[j] = (uint8_t)xorshift();
            break;
        case 2: /* short msgpack-like strings, often one whole object */
            n %= 24;
            for (size_t j = 0; j < n; j++)
                buf[j] = mp_bytes[buf[j] % sizeof mp_bytes];
            break;
        case 3: /* a valid frame with a few random bytes changed */
            n = build(&seeds[xorshift() % NSEEDS], buf);
            for (int k = 0; k < 3; k++)
                buf[xorshift() % n] = (uint8_t)xorshift();
            break;
        default: /* plain random bytes */
            break;
        }
        feed(buf, n);
    }
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        { "valid frames keep every invariant",
          valid_frames_keep_every_invariant },
        { "every truncation keeps every invariant",
          every_truncation_keeps_every_invariant },
        { "every single-bit flip keeps every invariant",
          every_bit_flip_keeps_every_invariant },
        { "200k random buffers keep every invariant",
          random_buffers_keep_every_invariant },
    };
    return fr_run_tests("fuzz_envelope", tests, sizeof(tests) / sizeof(tests[0]),
                        120);
}
