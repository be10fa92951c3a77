/*
 * Unit tests of the public msgpack helpers (frpc_mp_parse, frpc_mp_view_free,
 * frpc_mp_buf_*), and through them of serialization/mp.c: round trips, zero
 * copy, agreement with msgpack_unpack, and rejection of malformed input.
 * Each test is its own Check case; the list of names is at the end.
 */
#include "rpc/fabrpc.h"
#include "serialization/mp.h"

#include <check.h>
#include <stdlib.h>
#include <malloc.h>
#include <string.h>

#include "check_main.h"

static const char str_val[] = "hello, fabrpc";
static const uint8_t bin_val[] = { 0, 1, 2, 0xff, 0xc1 };

/* {"s": "hello, fabrpc", "b": bin, "a": [1, -1, 300, -40000, 2^63, INT64_MIN,
 *  1.5, 0.25f, nil, true, false, {}, []], "m": {"e": ext(-3, "xy"),
 *  "n": [[[7]]]}} */
static void pack_sample(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 4);
    msgpack_pack_str_with_body(pk, "s", 1);
    msgpack_pack_str_with_body(pk, str_val, sizeof str_val - 1);
    msgpack_pack_str_with_body(pk, "b", 1);
    msgpack_pack_bin_with_body(pk, bin_val, sizeof bin_val);
    msgpack_pack_str_with_body(pk, "a", 1);
    msgpack_pack_array(pk, 13);
    msgpack_pack_int(pk, 1);
    msgpack_pack_int(pk, -1);
    msgpack_pack_int(pk, 300);
    msgpack_pack_int(pk, -40000);
    msgpack_pack_uint64(pk, 1ull << 63);
    msgpack_pack_int64(pk, INT64_MIN);
    msgpack_pack_double(pk, 1.5);
    msgpack_pack_float(pk, 0.25f);
    msgpack_pack_nil(pk);
    msgpack_pack_true(pk);
    msgpack_pack_false(pk);
    msgpack_pack_map(pk, 0);
    msgpack_pack_array(pk, 0);
    msgpack_pack_str_with_body(pk, "m", 1);
    msgpack_pack_map(pk, 2);
    msgpack_pack_str_with_body(pk, "e", 1);
    msgpack_pack_ext_with_body(pk, "xy", 2, -3);
    msgpack_pack_str_with_body(pk, "n", 1);
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 1);
    msgpack_pack_int(pk, 7);
}

/* Packs obj and checks the bytes equal want[0..len). */
static void assert_repacks_to(msgpack_object obj, const void *want, size_t len)
{
    frpc_mp_buf out;
    frpc_mp_buf_init(&out);
    ck_assert_int_eq(msgpack_pack_object(&out.pk, obj), 0);
    ck_assert_uint_eq(out.sbuf.size, len);
    ck_assert_mem_eq(out.sbuf.data, want, len);
    frpc_mp_buf_destroy(&out);
}

/* What msgpack_unpack makes of the same bytes (it must accept them). */
static void assert_matches_msgpack(const void *buf, size_t len,
                                   msgpack_object obj)
{
    msgpack_zone z;
    msgpack_object ref;
    size_t off = 0;
    ck_assert(msgpack_zone_init(&z, 1024));
    ck_assert_int_eq(msgpack_unpack(buf, len, &off, &z, &ref),
                     MSGPACK_UNPACK_SUCCESS);
    ck_assert_uint_eq(off, len);
    ck_assert(msgpack_object_equal(ref, obj));
    msgpack_zone_destroy(&z);
}

/* Parses buf[0..len) from an exact-size copy (so ASan sees over-reads). */
static int parse_copy(const void *buf, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    frpc_mp_view v;
    memcpy(p, buf, len);
    int rc = frpc_mp_parse(p, len, &v);
    if (rc == 0)
        frpc_mp_view_free(&v);
    free(p);
    return rc;
}

static const msgpack_object *map_get(msgpack_object m, const char *key)
{
    for (uint32_t i = 0; i < m.via.map.size; i++) {
        msgpack_object k = m.via.map.ptr[i].key;
        if (k.type == MSGPACK_OBJECT_STR && k.via.str.size == strlen(key)
            && memcmp(k.via.str.ptr, key, k.via.str.size) == 0)
            return &m.via.map.ptr[i].val;
    }
    return NULL;
}

START_TEST(nested_round_trip)
{
    frpc_mp_buf b;
    frpc_mp_view v;
    frpc_mp_buf_init(&b);
    pack_sample(&b.pk);
    ck_assert_int_eq(frpc_mp_parse(b.sbuf.data, b.sbuf.size, &v), 0);
    ck_assert_int_eq(v.obj.type, MSGPACK_OBJECT_MAP);
    ck_assert_uint_eq(v.obj.via.map.size, 4);
    const msgpack_object *a = map_get(v.obj, "a");
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(a->type, MSGPACK_OBJECT_ARRAY);
    ck_assert_uint_eq(a->via.array.size, 13);
    ck_assert_int_eq(a->via.array.ptr[3].type, MSGPACK_OBJECT_NEGATIVE_INTEGER);
    ck_assert_int_eq(a->via.array.ptr[3].via.i64, -40000);
    ck_assert_uint_eq(a->via.array.ptr[4].via.u64, 1ull << 63);
    ck_assert_int_eq(a->via.array.ptr[7].type, MSGPACK_OBJECT_FLOAT32);
    const msgpack_object *e = map_get(*map_get(v.obj, "m"), "e");
    ck_assert_int_eq(e->type, MSGPACK_OBJECT_EXT);
    ck_assert_int_eq(e->via.ext.type, -3);
    ck_assert_uint_eq(e->via.ext.size, 2);
    assert_repacks_to(v.obj, b.sbuf.data, b.sbuf.size);
    assert_matches_msgpack(b.sbuf.data, b.sbuf.size, v.obj);
    frpc_mp_view_free(&v);
    frpc_mp_buf_destroy(&b);
}
END_TEST

START_TEST(strings_and_binaries_point_into_the_input)
{
    frpc_mp_buf b;
    frpc_mp_view v;
    frpc_mp_buf_init(&b);
    pack_sample(&b.pk);
    const char *lo = b.sbuf.data, *hi = b.sbuf.data + b.sbuf.size;
    ck_assert_int_eq(frpc_mp_parse(b.sbuf.data, b.sbuf.size, &v), 0);
    const msgpack_object *s = map_get(v.obj, "s"), *bin = map_get(v.obj, "b");
    const msgpack_object *e = map_get(*map_get(v.obj, "m"), "e");
    ck_assert(s->via.str.ptr >= lo && s->via.str.ptr + s->via.str.size <= hi);
    ck_assert_mem_eq(s->via.str.ptr, str_val, sizeof str_val - 1);
    ck_assert(bin->via.bin.ptr >= lo
              && bin->via.bin.ptr + bin->via.bin.size <= hi);
    ck_assert_mem_eq(bin->via.bin.ptr, bin_val, sizeof bin_val);
    ck_assert(e->via.ext.ptr >= lo && e->via.ext.ptr + 2 <= hi);
    frpc_mp_view_free(&v);
    frpc_mp_buf_destroy(&b);
}
END_TEST

START_TEST(every_encoding_decodes_like_msgpack_unpack)
{
    /* One raw encoding of each format byte family. */
    static const struct { uint8_t b[12]; size_t n; } enc[] = {
        { { 0x05 }, 1 }, { { 0xff }, 1 }, { { 0xe0 }, 1 },
        { { 0xcc, 0xfe }, 2 }, { { 0xcd, 1, 2 }, 3 },
        { { 0xce, 0x80, 0, 0, 0 }, 5 }, { { 0xcf, 0xff, 0, 0, 0, 0, 0, 0, 1 }, 9 },
        { { 0xd0, 0x05 }, 2 }, { { 0xd0, 0x80 }, 2 }, { { 0xd1, 0xff, 0xfe }, 3 },
        { { 0xd2, 0x7f, 0xff, 0xff, 0xff }, 5 },
        { { 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0 }, 9 },
        { { 0xca, 0x3f, 0xc0, 0, 0 }, 5 }, { { 0xca, 0xff, 0x80, 0, 0 }, 5 },
        { { 0xcb, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18 }, 9 },
        { { 0xc0 }, 1 }, { { 0xc2 }, 1 }, { { 0xc3 }, 1 },
        { { 0xa2, 'h', 'i' }, 3 }, { { 0xd9, 1, 'x' }, 3 },
        { { 0xda, 0, 1, 'y' }, 4 }, { { 0xdb, 0, 0, 0, 0 }, 5 },
        { { 0xc4, 1, 9 }, 3 }, { { 0xc5, 0, 0 }, 3 }, { { 0xc6, 0, 0, 0, 1, 8 }, 6 },
        { { 0xd4, 0x01, 7 }, 3 }, { { 0xd5, 0xff, 1, 2 }, 4 },
        { { 0xd6, 0x80, 1, 2, 3, 4 }, 6 }, { { 0xc7, 0, 0x05 }, 3 },
        { { 0xc8, 0, 1, 0x05, 9 }, 5 }, { { 0xc9, 0, 0, 0, 0, 0x7f }, 6 },
        { { 0xdc, 0, 2, 1, 2 }, 5 }, { { 0xdd, 0, 0, 0, 1, 0xc0 }, 6 },
        { { 0xde, 0, 1, 1, 2 }, 5 }, { { 0xdf, 0, 0, 0, 0 }, 5 },
        { { 0x81, 0xc0, 0xc0 }, 3 }, { { 0x90 }, 1 },
    };
    for (size_t i = 0; i < sizeof enc / sizeof enc[0]; i++) {
        frpc_mp_view v;
        ck_assert_msg(frpc_mp_parse(enc[i].b, enc[i].n, &v) == 0,
                      "encoding %zu (0x%02x) rejected", i, enc[i].b[0]);
        assert_matches_msgpack(enc[i].b, enc[i].n, v.obj);
        frpc_mp_view_free(&v);
    }
}
END_TEST

START_TEST(trailing_bytes_are_rejected)
{
    static const uint8_t two[] = { 0x01, 0x02 };
    static const uint8_t arr_plus[] = { 0x91, 0x01, 0xc0 };
    frpc_mp_view v;
    ck_assert_int_eq(frpc_mp_parse(two, sizeof two, &v), FRPC_EPROTO);
    ck_assert_int_eq(frpc_mp_parse(arr_plus, sizeof arr_plus, &v), FRPC_EPROTO);
    ck_assert_int_eq(frpc_mp_parse(arr_plus, 2, &v), 0);
    frpc_mp_view_free(&v);
}
END_TEST

START_TEST(every_truncation_is_rejected)
{
    frpc_mp_buf b;
    frpc_mp_buf_init(&b);
    pack_sample(&b.pk);
    ck_assert_int_eq(parse_copy(b.sbuf.data, b.sbuf.size), 0);
    for (size_t cut = 0; cut < b.sbuf.size; cut++)
        ck_assert_msg(parse_copy(b.sbuf.data, cut) == FRPC_EPROTO,
                      "prefix of %zu bytes accepted", cut);
    frpc_mp_buf_destroy(&b);
}
END_TEST

START_TEST(empty_input_is_rejected)
{
    frpc_mp_view v;
    ck_assert_int_eq(frpc_mp_parse("", 0, &v), FRPC_EPROTO);
    ck_assert_int_eq(frpc_mp_parse(NULL, 0, &v), FRPC_EPROTO);
    frpc_mp_view_free(&v); /* a failed view is empty: freeing is harmless */
}
END_TEST

/* n nested containers (arrays, or maps keyed by nil), innermost holding 7. */
static size_t nest(uint8_t *buf, unsigned n, int maps)
{
    size_t len = 0;
    for (unsigned i = 0; i < n; i++) {
        buf[len++] = maps ? 0x81 : 0x91;
        if (maps)
            buf[len++] = 0xc0;
    }
    buf[len++] = 0x07;
    return len;
}

START_TEST(nesting_deeper_than_64_is_rejected)
{
    uint8_t buf[3 * (FR_MP_MAX_DEPTH + 2)];
    ck_assert_uint_eq(FR_MP_MAX_DEPTH, 64);
    for (int maps = 0; maps <= 1; maps++) {
        ck_assert_int_eq(parse_copy(buf, nest(buf, 64, maps)), 0);
        ck_assert_int_eq(parse_copy(buf, nest(buf, 65, maps)), FRPC_EPROTO);
        /* An empty innermost container counts as a level too. */
        size_t n = nest(buf, 63, maps);
        buf[n - 1] = 0x90;
        ck_assert_int_eq(parse_copy(buf, n), 0);
        n = nest(buf, 64, maps);
        buf[n - 1] = 0x90;
        ck_assert_int_eq(parse_copy(buf, n), FRPC_EPROTO);
    }
}
END_TEST

START_TEST(huge_claimed_sizes_are_rejected_without_allocating)
{
    static const uint8_t claims[][6] = {
        { 0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0 }, /* array32 */
        { 0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0 }, /* map32 */
        { 0xdb, 0xff, 0xff, 0xff, 0xff, 0x41 }, /* str32 */
        { 0xc6, 0xff, 0xff, 0xff, 0xff, 0x41 }, /* bin32 */
        { 0xc9, 0xff, 0xff, 0xff, 0xff, 0x01 }, /* ext32 */
        { 0xdc, 0x00, 0x06, 0xc0, 0xc0, 0xc0 }, /* array16 of 6, 3 given */
        { 0x82, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0 }, /* map of 2, 2.5 entries */
    };
    for (size_t i = 0; i < sizeof claims / sizeof claims[0]; i++)
        ck_assert_int_eq(parse_copy(claims[i], sizeof claims[i]), FRPC_EPROTO);
}
END_TEST

START_TEST(reserved_byte_is_rejected)
{
    static const uint8_t c1[] = { 0xc1 }, in_array[] = { 0x92, 0x01, 0xc1 };
    ck_assert_int_eq(parse_copy(c1, 1), FRPC_EPROTO);
    ck_assert_int_eq(parse_copy(in_array, sizeof in_array), FRPC_EPROTO);
}
END_TEST

/* The header's bound: at most 24 bytes per input byte, for the shapes
 * that cost the most (one-byte elements, pairs, nested arrays). */
static size_t heap_in_use(void)
{
    struct mallinfo2 m = mallinfo2(); /* 0 under sanitizers: no check */
    return m.uordblks + m.hblkhd;
}

static void check_parse_memory(const uint8_t *elem, size_t elen, int map)
{
    size_t n = (1u << 20) / elen, len = 5 + n * elen;
    uint8_t *buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    uint32_t count = (uint32_t)n; /* elements, or pairs of a map */
    buf[0] = map ? 0xdf : 0xdd;
    buf[1] = (uint8_t)(count >> 24);
    buf[2] = (uint8_t)(count >> 16);
    buf[3] = (uint8_t)(count >> 8);
    buf[4] = (uint8_t)count;
    for (size_t i = 0; i < n; i++)
        memcpy(buf + 5 + i * elen, elem, elen);
    frpc_mp_view v;
    size_t before = heap_in_use();
    ck_assert_int_eq(frpc_mp_parse(buf, len, &v), 0);
    size_t after = heap_in_use();
    if (after) { /* sanitizers' allocators tell mallinfo2 nothing */
        size_t used = after - before;
        ck_assert_msg(used > 0 && used <= 24 * len + 4096,
                      "%zu B of input took %zu B", len, used);
    }
    frpc_mp_view_free(&v);
    free(buf);
}

START_TEST(parse_memory_is_at_most_24_bytes_per_input_byte)
{
    static const uint8_t nil[] = {0xc0}, empty[] = {0x90},
                         nested[] = {0x91, 0xc0}, pair[] = {0xc0, 0xc0};
    check_parse_memory(nil, 1, 0);
    check_parse_memory(empty, 1, 0);
    check_parse_memory(nested, 2, 0);
    check_parse_memory(pair, 2, 1); /* a map of n pairs */
}
END_TEST

/* The header's floor for short inputs: max(24 x len, 64) bytes, plus at
 * most 32 of the zone's and malloc's bookkeeping. Many views are kept at
 * once, so that chunks malloc keeps from earlier frees (its tcache, which
 * mallinfo2 counts as in use) weigh nothing in the mean. */
START_TEST(short_inputs_take_at_most_64_bytes_and_bookkeeping)
{
    static const struct {
        const char *bytes;
        size_t len;
    } in[] = {
        {"\xc0", 1},                 /* nil: no element in the zone */
        {"\x01", 1},                 /* positive fixint */
        {"\xa1x", 2},                /* fixstr */
        {"\x92\x01\x02", 3},         /* two elements */
        {"\x81\xc0\xc0", 3},         /* one pair */
        {"\x93\xc0\xc0\xc0", 4},     /* three elements: 72 B of tree */
        {"\x91\x91\x91\xc0", 4},     /* nested */
        {"\xcb\0\0\0\0\0\0\0\0", 9}, /* float 64 */
    };
    enum { K = 512 };
    frpc_mp_view *v = malloc(K * sizeof(*v));
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        size_t before = heap_in_use();
        for (int k = 0; k < K; k++)
            ck_assert_int_eq(frpc_mp_parse(in[i].bytes, in[i].len, &v[k]), 0);
        size_t after = heap_in_use();
        if (after) { /* sanitizers' allocators tell mallinfo2 nothing */
            size_t floor = 24 * in[i].len > 64 ? 24 * in[i].len : 64;
            double per_view = (double)(after - before) / K;
            ck_assert_msg(per_view > 0 && per_view <= (double)(floor + 32),
                          "%zu B of input took %.1f B a view (bound %zu)",
                          in[i].len, per_view, floor + 32);
        }
        for (int k = 0; k < K; k++)
            frpc_mp_view_free(&v[k]);
    }
    free(v);
}
END_TEST

START_TEST(null_arguments_are_invalid)
{
    frpc_mp_view v;
    msgpack_object o;
    msgpack_zone z;
    ck_assert_int_eq(frpc_mp_parse("\x01", 1, NULL), FRPC_EINVAL);
    ck_assert_int_eq(frpc_mp_parse(NULL, 1, &v), FRPC_EINVAL);
    ck_assert_int_eq(fr_mp_parse("\x01", 1, NULL, &z), FRPC_EINVAL);
    ck_assert_int_eq(fr_mp_parse("\x01", 1, &o, NULL), FRPC_EINVAL);
    frpc_mp_view_free(NULL);
    frpc_mp_buf_init(NULL);
    frpc_mp_buf_destroy(NULL);
}
END_TEST

START_TEST(free_and_destroy_twice_are_harmless)
{
    frpc_mp_buf b;
    frpc_mp_view v;
    frpc_mp_buf_init(&b);
    msgpack_pack_array(&b.pk, 2);
    msgpack_pack_int(&b.pk, 1);
    msgpack_pack_int(&b.pk, 2);
    ck_assert_int_eq(frpc_mp_parse(b.sbuf.data, b.sbuf.size, &v), 0);
    frpc_mp_view_free(&v);
    frpc_mp_view_free(&v);
    frpc_mp_buf_destroy(&b);
    ck_assert_uint_eq(b.sbuf.size, 0);
    msgpack_pack_nil(&b.pk); /* reusable after destroy */
    ck_assert_uint_eq(b.sbuf.size, 1);
    frpc_mp_buf_destroy(&b);
    frpc_mp_buf_destroy(&b);
}
END_TEST

static uint64_t lcg = 42;
static uint32_t rnd32(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(lcg >> 33);
}

/* Packs a random object at most depth levels deep. */
static void pack_random(msgpack_packer *pk, unsigned depth)
{
    static const char bytes[300] = "random payload";
    static const size_t lens[] = { 0, 1, 31, 32, 255, 256, 300 };
    uint32_t n = rnd32() % 4;
    switch (rnd32() % (depth ? 12 : 10)) {
    case 0: msgpack_pack_nil(pk); break;
    case 1: rnd32() % 2 ? msgpack_pack_true(pk) : msgpack_pack_false(pk); break;
    case 2: msgpack_pack_uint64(pk, (uint64_t)rnd32() << (rnd32() % 33)); break;
    case 3: msgpack_pack_int64(pk, -(int64_t)((uint64_t)rnd32() << (rnd32() % 32))); break;
    case 4: msgpack_pack_float(pk, (float)rnd32() / 7.0f); break;
    case 5: msgpack_pack_double(pk, (double)rnd32() / 3.0); break;
    case 6: msgpack_pack_str_with_body(pk, bytes, lens[rnd32() % 7]); break;
    case 7: msgpack_pack_bin_with_body(pk, bytes, lens[rnd32() % 7]); break;
    case 8: msgpack_pack_ext_with_body(pk, bytes, 1 + rnd32() % 20,
                                       (int8_t)((int)(rnd32() % 256) - 128)); break;
    case 9: msgpack_pack_int(pk, (int)(rnd32() % 256) - 128); break;
    case 10:
        msgpack_pack_array(pk, n);
        while (n--)
            pack_random(pk, depth - 1);
        break;
    default:
        msgpack_pack_map(pk, n);
        while (n--) {
            pack_random(pk, depth - 1);
            pack_random(pk, depth - 1);
        }
        break;
    }
}

START_TEST(random_objects_round_trip_like_msgpack)
{
    for (int i = 0; i < 3000; i++) {
        frpc_mp_buf b;
        frpc_mp_view v;
        frpc_mp_buf_init(&b);
        pack_random(&b.pk, 1 + (unsigned)(i % 6));
        ck_assert_int_eq(frpc_mp_parse(b.sbuf.data, b.sbuf.size, &v), 0);
        assert_repacks_to(v.obj, b.sbuf.data, b.sbuf.size);
        assert_matches_msgpack(b.sbuf.data, b.sbuf.size, v.obj);
        frpc_mp_view_free(&v);
        frpc_mp_buf_destroy(&b);
    }
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        { "nested maps, arrays, str and bin round trip", nested_round_trip },
        { "strings and binaries point into the input",
          strings_and_binaries_point_into_the_input },
        { "every encoding decodes like msgpack_unpack",
          every_encoding_decodes_like_msgpack_unpack },
        { "trailing bytes are rejected", trailing_bytes_are_rejected },
        { "every truncation is rejected", every_truncation_is_rejected },
        { "empty input is rejected", empty_input_is_rejected },
        { "nesting deeper than 64 is rejected",
          nesting_deeper_than_64_is_rejected },
        { "huge claimed sizes are rejected without allocating",
          huge_claimed_sizes_are_rejected_without_allocating },
        { "reserved byte 0xc1 is rejected", reserved_byte_is_rejected },
        { "parse memory: at most 24 bytes per input byte",
          parse_memory_is_at_most_24_bytes_per_input_byte },
        { "parse memory of short inputs: 64 bytes and bookkeeping",
          short_inputs_take_at_most_64_bytes_and_bookkeeping },
        { "null arguments are invalid", null_arguments_are_invalid },
        { "free and destroy twice are harmless",
          free_and_destroy_twice_are_harmless },
        { "random objects round trip like msgpack",
          random_objects_round_trip_like_msgpack },
    };
    return fr_run_tests("mp", tests, sizeof(tests) / sizeof(tests[0]),
                        60);
}
