/*
 * libFuzzer target for the decoders of serialization/: fr_env_decode,
 * fr_env_decode_header, fr_env_decode_rest, fr_env_frame_len,
 * fr_rndv_decode and fr_mp_parse. Each input is fed to all of them, and every invariant below is checked; a violation calls
 * abort() so that the fuzzer (or the Check test that replays a corpus,
 * tests/unit/test_fuzz_envelope.c) reports it. See README.md.
 *
 * Invariants
 *   envelope: decode returns 0, FRPC_EPROTO or FRPC_ETOOBIG; a header that
 *     decode_header rejects is rejected by decode with the same code;
 *     decode_header without a limit, then decode_rest, returns what decode
 *     returns, with the same payload pointer (the receiver's one pass); an
 *     accepted frame is exactly header + payload_len bytes, its payload
 *     pointer is right, decode_header agrees on every field, it re-encodes
 *     to the same 48 header bytes, and a rendezvous frame carries a valid
 *     descriptor;
 *   split: frames found by fr_env_frame_len lie inside the input, each
 *     at least a header, MORE on every one but the last;
 *   descriptor: an accepted one is 32 bytes, len and cookie nonzero, within
 *     the limit, and re-encodes to the same bytes;
 *   msgpack: fr_mp_parse returns 0, FRPC_EPROTO or FRPC_ENOMEM; an accepted
 *     object nests at most FR_MP_MAX_DEPTH deep, every str/bin/ext points
 *     inside the input, packing it and parsing the result gives the same
 *     bytes again, and where msgpack_unpack can follow (depth <= 32, its
 *     fixed stack) it accepts the input whole and builds the same object.
 */
#include "serialization/envelope.h"
#include "serialization/mp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "fuzz_envelope: invariant failed: %s (%s:%d)\n", \
                    #cond, __FILE__, __LINE__);                            \
            abort();                                                       \
        }                                                                  \
    } while (0)

/* Depth msgpack_unpack's fixed stack can follow (MSGPACK_EMBED_STACK_SIZE). */
#define MSGPACK_LIB_DEPTH 32u

static int same_env(const fr_env *a, const fr_env *b)
{
    return a->kind == b->kind && a->flags == b->flags
           && a->req_id == b->req_id && a->func_id == b->func_id
           && a->src_rank == b->src_rank && a->status == b->status
           && a->token == b->token && a->payload_len == b->payload_len;
}

static int inside(const char *p, uint32_t n, const char *lo, const char *hi)
{
    return p >= lo && p <= hi && n <= (size_t)(hi - p);
}

/* The nesting depth of o; aborts if a str/bin/ext lies outside [lo, hi). */
static unsigned walk(msgpack_object o, const char *lo, const char *hi)
{
    unsigned d = 0, sub;
    switch (o.type) {
    case MSGPACK_OBJECT_STR:
    case MSGPACK_OBJECT_BIN: /* str and bin share one layout */
        CHECK(inside(o.via.str.ptr, o.via.str.size, lo, hi));
        return 0;
    case MSGPACK_OBJECT_EXT:
        CHECK(inside(o.via.ext.ptr, o.via.ext.size, lo, hi));
        return 0;
    case MSGPACK_OBJECT_ARRAY:
        for (uint32_t i = 0; i < o.via.array.size; i++)
            if ((sub = walk(o.via.array.ptr[i], lo, hi)) > d)
                d = sub;
        return d + 1;
    case MSGPACK_OBJECT_MAP:
        for (uint32_t i = 0; i < o.via.map.size; i++) {
            if ((sub = walk(o.via.map.ptr[i].key, lo, hi)) > d)
                d = sub;
            if ((sub = walk(o.via.map.ptr[i].val, lo, hi)) > d)
                d = sub;
        }
        return d + 1;
    default:
        return 0;
    }
}

static void pack(msgpack_object o, msgpack_sbuffer *sb)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    CHECK(msgpack_pack_object(&pk, o) == 0);
}

static int same_bytes(const msgpack_sbuffer *a, const msgpack_sbuffer *b)
{
    return a->size == b->size && memcmp(a->data, b->data, a->size) == 0;
}

static void check_mp(const uint8_t *data, size_t size)
{
    msgpack_object o, o2;
    msgpack_zone z, z2;
    msgpack_sbuffer s1, s2;

    int rc = fr_mp_parse(data, size, &o, &z);
    CHECK(rc == 0 || rc == FRPC_EPROTO || rc == FRPC_ENOMEM);
    if (rc != 0)
        return;
    unsigned depth = walk(o, (const char *)data, (const char *)data + size);
    CHECK(depth <= FR_MP_MAX_DEPTH);

    /* Packing is canonical: parse(pack(o)) packs to the same bytes. */
    pack(o, &s1);
    CHECK(fr_mp_parse(s1.data, s1.size, &o2, &z2) == 0);
    pack(o2, &s2);
    CHECK(same_bytes(&s1, &s2));
    msgpack_sbuffer_destroy(&s2);
    msgpack_zone_destroy(&z2);

    if (depth <= MSGPACK_LIB_DEPTH) {
        size_t off = 0;
        CHECK(msgpack_zone_init(&z2, 1024));
        CHECK(msgpack_unpack((const char *)data, size, &off, &z2, &o2)
              == MSGPACK_UNPACK_SUCCESS);
        CHECK(off == size);
        pack(o2, &s2);
        CHECK(same_bytes(&s1, &s2));
        msgpack_sbuffer_destroy(&s2);
        msgpack_zone_destroy(&z2);
    }
    msgpack_sbuffer_destroy(&s1);
    msgpack_zone_destroy(&z);
}

static void check_rndv(const uint8_t *data, size_t size, uint64_t max)
{
    fr_rndv_desc d;
    uint8_t out[FR_RNDV_DESC_SIZE];
    int rc = fr_rndv_decode(data, size, max, &d);
    CHECK(rc == 0 || rc == FRPC_EPROTO || rc == FRPC_ETOOBIG);
    if (rc != 0)
        return;
    CHECK(size == FR_RNDV_DESC_SIZE);
    CHECK(d.len != 0 && d.len <= max && d.cookie != 0);
    CHECK(fr_rndv_encode(&d, out, sizeof out) == 0);
    CHECK(memcmp(out, data, sizeof out) == 0);
}

static void check_env(const uint8_t *data, size_t size, uint64_t max)
{
    fr_env e, h;
    const uint8_t *pl = NULL;
    uint8_t hdr[FR_ENV_HDR_SIZE];

    int rc = fr_env_decode(data, size, max, &e, &pl);
    CHECK(rc == 0 || rc == FRPC_EPROTO || rc == FRPC_ETOOBIG);
    int hrc = fr_env_decode_header(data, size, max, &h);
    CHECK(hrc == 0 || hrc == FRPC_EPROTO || hrc == FRPC_ETOOBIG);
    if (hrc != 0)
        CHECK(rc == hrc);
    if (fr_env_decode_header(data, size, UINT64_MAX, &h) == 0) {
        const uint8_t *rest_pl = NULL;
        int rrc = fr_env_decode_rest(data, size, max, &h, &rest_pl);
        CHECK(rrc == rc);
        CHECK(rrc != 0 || rest_pl == pl);
    } else {
        CHECK(rc == FRPC_EPROTO);
    }
    if (rc != 0)
        return;
    CHECK(fr_env_decode_header(data, size, max, &h) == 0);

    CHECK(same_env(&e, &h));
    CHECK(e.payload_len == size - FR_ENV_HDR_SIZE);
    CHECK(pl == (e.payload_len ? data + FR_ENV_HDR_SIZE : NULL));
    CHECK(e.req_id != 0 && e.kind >= FR_ENV_REQUEST
          && e.kind <= FR_ENV_KIND_MAX && !(e.flags & ~FR_ENV_F_KNOWN));
    CHECK(fr_env_encode(&e, hdr, sizeof hdr) == 0);
    CHECK(memcmp(hdr, data, sizeof hdr) == 0);
    if (e.flags & FR_ENV_F_RNDV) {
        fr_rndv_desc d;
        CHECK(fr_rndv_decode(pl, (size_t)e.payload_len, max, &d) == 0);
    } else if (e.kind != FR_ENV_PART) { /* a part's whole is limited */
        CHECK(e.payload_len <= max);
    }
    if (pl != NULL)
        check_mp(pl, (size_t)e.payload_len);
}

/* A message of several frames: every frame the splitter yields lies inside
 * the input, holds at least a header, and all but the last have
 * FR_ENV_F_MORE; a split that reaches the end ends on a frame without it. */
static void check_split(const uint8_t *data, size_t size)
{
    size_t pos = 0, n;
    while (pos < size) {
        int rc = fr_env_frame_len(data + pos, size - pos, &n);
        CHECK(rc == 0 || rc == FRPC_EPROTO);
        if (rc)
            return;
        CHECK(n >= FR_ENV_HDR_SIZE && n <= size - pos);
        int more = (data[pos + 6] & FR_ENV_F_MORE) != 0;
        CHECK(more ? n < size - pos : n == size - pos);
        check_env(data + pos, n, 1u << 20);
        pos += n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (data == NULL) /* size is 0 then; the decoders want a pointer */
        data = (const uint8_t *)"";
    /* A roomy limit, and a small one so that FRPC_ETOOBIG is reached. */
    check_env(data, size, 1u << 20);
    check_env(data, size, 16);
    check_rndv(data, size, UINT64_MAX);
    check_rndv(data, size, 4096);
    check_mp(data, size);
    check_split(data, size);
    return 0;
}
