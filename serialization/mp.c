/*
 * fr_mp_parse: one msgpack object from a byte string, without copying its
 * strings, binaries and extension bodies.
 *
 * Design notes
 *   This is a small strict msgpack reader that builds msgpack-c's own
 *   msgpack_object tree, rather than a call to msgpack_unpack, because the
 *   library's unpacker cannot keep this file's promises on untrusted bytes:
 *   - its container stack is fixed at MSGPACK_EMBED_STACK_SIZE (32) when
 *     libmsgpackc is built, and a deeper object fails as
 *     MSGPACK_UNPACK_NOMEM_ERROR, so depth 64 cannot be accepted and a depth
 *     violation cannot be told from a real allocation failure;
 *   - it allocates count * sizeof(msgpack_object) for an array or map header
 *     before reading any element, so a 5-byte input asks for up to 96 GiB.
 *   The reader makes two passes over the input. The first allocates
 *   nothing: it checks that the bytes are exactly one well-formed object
 *   (no truncation, no reserved byte 0xc1, no trailing bytes, nesting at
 *   most FR_MP_MAX_DEPTH, every length and count within the bytes left) and
 *   sums the memory the containers need. The second, which cannot meet a
 *   malformed byte, builds the tree in one zone chunk of exactly that size.
 *   So the memory used is bounded by a small multiple of the input length,
 *   and recursion by FR_MP_MAX_DEPTH.
 *
 *   The objects built are the ones msgpack_unpack builds for the same bytes
 *   (integer signs, FLOAT32 vs FLOAT64, ext type and body), except that an
 *   empty array or map has a NULL ptr; the fuzz target checks the two agree.
 */
#include "serialization/mp.h"

#include <string.h>

struct rd {
    const uint8_t *p;
    const uint8_t *end;
    msgpack_zone *zone; /* NULL in the checking pass */
    size_t zbytes;      /* checking pass: bytes the containers need */
};

static size_t rd_left(const struct rd *r)
{
    return (size_t)(r->end - r->p);
}

/* Takes n bytes; FRPC_EPROTO if fewer are left. */
static int rd_take(struct rd *r, uint64_t n, const uint8_t **out)
{
    if (n > rd_left(r))
        return FRPC_EPROTO;
    *out = r->p;
    r->p += (size_t)n;
    return 0;
}

static uint64_t get_be(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Reads an n-byte big-endian unsigned integer. */
static int rd_uint(struct rd *r, unsigned n, uint64_t *v)
{
    const uint8_t *p;
    int rc = rd_take(r, n, &p);
    if (rc == 0)
        *v = get_be(p, n);
    return rc;
}

static void set_int(msgpack_object *o, int64_t v)
{
    if (v >= 0) {
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = (uint64_t)v;
    } else {
        o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
        o->via.i64 = v;
    }
}

/* An n-byte two's complement integer, sign-extended without relying on
 * implementation-defined conversions. */
static int64_t to_signed(uint64_t u, unsigned n)
{
    uint64_t sign = (uint64_t)1 << (8 * n - 1);
    if (!(u & sign))
        return (int64_t)u;
    uint64_t mask = sign | (sign - 1);
    return -(int64_t)((~u) & mask & ~sign) - 1;
}

/* str, bin: n bytes (pointed at, not copied). */
static int rd_bytes(struct rd *r, msgpack_object *o, msgpack_object_type t,
                    uint64_t n)
{
    const uint8_t *p;
    if (rd_take(r, n, &p) != 0)
        return FRPC_EPROTO;
    o->type = t;
    o->via.str.size = (uint32_t)n; /* str and bin share one layout */
    o->via.str.ptr = (const char *)p;
    return 0;
}

/* ext: a type byte, then n bytes of body. */
static int rd_ext(struct rd *r, msgpack_object *o, uint64_t n)
{
    const uint8_t *t, *p;
    if (rd_take(r, 1, &t) != 0 || rd_take(r, n, &p) != 0)
        return FRPC_EPROTO;
    o->type = MSGPACK_OBJECT_EXT;
    o->via.ext.type = (int8_t)(t[0] < 128 ? (int)t[0] : (int)t[0] - 256);
    o->via.ext.size = (uint32_t)n;
    o->via.ext.ptr = (const char *)p;
    return 0;
}

static int rd_value(struct rd *r, msgpack_object *o, unsigned depth);

/* An array or map of n entries, itself at nesting level depth + 1. */
static int rd_container(struct rd *r, msgpack_object *o, int is_map,
                        uint64_t n, unsigned depth)
{
    size_t per = is_map ? 2 : 1; /* objects per entry, each >= 1 byte */
    size_t esize = is_map ? sizeof(msgpack_object_kv) : sizeof(msgpack_object);

    if (depth >= FR_MP_MAX_DEPTH)
        return FRPC_EPROTO;
    if (n > rd_left(r) / per)
        return FRPC_EPROTO;
    if (n > SIZE_MAX / esize)
        return FRPC_ENOMEM;
    size_t bytes = (size_t)n * esize;

    void *mem = NULL; /* the entries; stays NULL in the checking pass */
    if (r->zone == NULL) {
        if (r->zbytes > SIZE_MAX - bytes)
            return FRPC_ENOMEM;
        r->zbytes += bytes;
    } else if (n > 0) {
        mem = msgpack_zone_malloc(r->zone, bytes);
        if (mem == NULL)
            return FRPC_ENOMEM;
    }
    msgpack_object_kv *kv = is_map ? mem : NULL;
    msgpack_object *arr = is_map ? NULL : mem;

    for (size_t i = 0; i < (size_t)n; i++) {
        int rc;
        if (is_map) {
            rc = rd_value(r, kv ? &kv[i].key : NULL, depth + 1);
            if (rc == 0)
                rc = rd_value(r, kv ? &kv[i].val : NULL, depth + 1);
        } else {
            rc = rd_value(r, arr ? &arr[i] : NULL, depth + 1);
        }
        if (rc != 0)
            return rc;
    }

    if (is_map) {
        o->type = MSGPACK_OBJECT_MAP;
        o->via.map.size = (uint32_t)n;
        o->via.map.ptr = kv;
    } else {
        o->type = MSGPACK_OBJECT_ARRAY;
        o->via.array.size = (uint32_t)n;
        o->via.array.ptr = arr;
    }
    return 0;
}

/* One value at nesting level depth (the number of enclosing containers).
 * o is NULL in the checking pass. */
static int rd_value(struct rd *r, msgpack_object *o, unsigned depth)
{
    msgpack_object scratch;
    const uint8_t *h;
    uint64_t n;
    int rc;

    if (o == NULL)
        o = &scratch;
    if (rd_take(r, 1, &h) != 0)
        return FRPC_EPROTO;
    unsigned b = h[0];

    if (b <= 0x7f) {
        set_int(o, (int64_t)b);
        return 0;
    }
    if (b >= 0xe0) {
        set_int(o, (int64_t)b - 256);
        return 0;
    }
    if (b <= 0x8f)
        return rd_container(r, o, 1, b & 0x0f, depth);
    if (b <= 0x9f)
        return rd_container(r, o, 0, b & 0x0f, depth);
    if (b <= 0xbf)
        return rd_bytes(r, o, MSGPACK_OBJECT_STR, b & 0x1f);

    switch (b) {
    case 0xc0:
        o->type = MSGPACK_OBJECT_NIL;
        return 0;
    case 0xc2:
    case 0xc3:
        o->type = MSGPACK_OBJECT_BOOLEAN;
        o->via.boolean = (b == 0xc3);
        return 0;
    case 0xc4: case 0xc5: case 0xc6: /* bin 8/16/32 */
        rc = rd_uint(r, 1u << (b - 0xc4), &n);
        return rc ? rc : rd_bytes(r, o, MSGPACK_OBJECT_BIN, n);
    case 0xc7: case 0xc8: case 0xc9: /* ext 8/16/32 */
        rc = rd_uint(r, 1u << (b - 0xc7), &n);
        return rc ? rc : rd_ext(r, o, n);
    case 0xca: { /* float 32 */
        if (rd_uint(r, 4, &n) != 0)
            return FRPC_EPROTO;
        uint32_t bits = (uint32_t)n;
        float f;
        memcpy(&f, &bits, sizeof f);
        o->type = MSGPACK_OBJECT_FLOAT32;
        o->via.f64 = (double)f;
        return 0;
    }
    case 0xcb: /* float 64 */
        if (rd_uint(r, 8, &n) != 0)
            return FRPC_EPROTO;
        memcpy(&o->via.f64, &n, sizeof o->via.f64);
        o->type = MSGPACK_OBJECT_FLOAT64;
        return 0;
    case 0xcc: case 0xcd: case 0xce: case 0xcf: /* uint 8..64 */
        if (rd_uint(r, 1u << (b - 0xcc), &n) != 0)
            return FRPC_EPROTO;
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = n;
        return 0;
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: /* int 8..64 */
        if (rd_uint(r, 1u << (b - 0xd0), &n) != 0)
            return FRPC_EPROTO;
        set_int(o, to_signed(n, 1u << (b - 0xd0)));
        return 0;
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: /* fixext */
        return rd_ext(r, o, 1u << (b - 0xd4));
    case 0xd9: case 0xda: case 0xdb: /* str 8/16/32 */
        rc = rd_uint(r, 1u << (b - 0xd9), &n);
        return rc ? rc : rd_bytes(r, o, MSGPACK_OBJECT_STR, n);
    case 0xdc: case 0xdd: /* array 16/32 */
        rc = rd_uint(r, 2u << (b - 0xdc), &n);
        return rc ? rc : rd_container(r, o, 0, n, depth);
    case 0xde: case 0xdf: /* map 16/32 */
        rc = rd_uint(r, 2u << (b - 0xde), &n);
        return rc ? rc : rd_container(r, o, 1, n, depth);
    default: /* 0xc1: never used */
        return FRPC_EPROTO;
    }
}

int fr_mp_parse(const void *buf, size_t len, msgpack_object *obj,
                msgpack_zone *zone)
{
    if (zone != NULL)
        memset(zone, 0, sizeof *zone);
    if (obj == NULL || zone == NULL || (buf == NULL && len > 0))
        return FRPC_EINVAL;
    if (len == 0)
        return FRPC_EPROTO;

    const uint8_t *start = buf;
    struct rd r = { start, start + len, NULL, 0 };
    int rc = rd_value(&r, NULL, 0);
    if (rc == 0 && r.p != r.end)
        rc = FRPC_EPROTO; /* trailing bytes */
    if (rc != 0)
        return rc;

    /* One chunk holds the whole tree (the floor keeps the zone sane for a
     * scalar, which allocates nothing). */
    if (!msgpack_zone_init(zone, r.zbytes > 64 ? r.zbytes : 64)) {
        memset(zone, 0, sizeof *zone);
        return FRPC_ENOMEM;
    }
    r.p = start;
    r.zone = zone;
    rc = rd_value(&r, obj, 0);
    if (rc != 0) {
        msgpack_zone_destroy(zone);
        memset(zone, 0, sizeof *zone);
    }
    return rc;
}
