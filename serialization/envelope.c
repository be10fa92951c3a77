/*
 * The wire envelope: encode and decode of the 48-byte header and of the
 * rendezvous descriptor (layout in envelope.h).
 *
 * Design notes
 *   One function, env_check, holds every rule about which headers are
 *   valid; encode and decode both call it, so encode can never produce a
 *   header that decode rejects. Integers are little-endian on the wire,
 *   read and written without regard to alignment (see put_le), so the code
 *   does not depend on the host's byte order or alignment. Every read is
 *   bounded by a length checked before it.
 *
 *   Rules beyond those listed in envelope.h (decided here, see env_check):
 *   - REMOTE is only valid on ERROR; RNDV only on REQUEST and RESPONSE;
 *   - a REQUEST has a nonzero func_id (0 means "no function");
 *   - status is 0 on every kind but ERROR and REQUEST;
 *   - the payload limit applies to the data a frame stands for: payload_len
 *     for an eager frame, the descriptor's len for a rendezvous frame;
 *   - a rendezvous cookie is nonzero, since RNDV_DONE carries it in req_id;
 *   - a PART stands alone in its message (no MORE) and lies inside the
 *     whole frame it names.
 *   Errors are ordered: protocol violations (FRPC_EPROTO) of the header are
 *   found before the payload limit (FRPC_ETOOBIG), which is checked before
 *   anything that needs the payload.
 */
#include "serialization/envelope.h"

#include <string.h>

/* ---- little-endian byte packing ---------------------------------------- */

/* On a little-endian host the bytes are the integer's own: one unaligned
 * load or store (memcpy of a constant size compiles to one). The loops
 * byte by byte were not inlined nor merged by gcc -O2: about 330
 * instructions per header decoded and 250 per header encoded, a good part
 * of a call's own cost on shm (callgrind, fabrpc-bench latency --sizes 8
 * in blocking mode). Elsewhere, byte by byte. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FR_HOST_LE 1
#else
#define FR_HOST_LE 0
#endif

static inline void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    if (FR_HOST_LE) {
        memcpy(p, &v, n);
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        p[i] = (uint8_t)(v & 0xffu);
        v >>= 8;
    }
}

static inline uint64_t get_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    if (FR_HOST_LE) {
        memcpy(&v, p, n);
        return v;
    }
    for (unsigned i = n; i > 0; i--)
        v = (v << 8) | p[i - 1];
    return v;
}

/* uint32 <-> int32 without implementation-defined conversions. */
static uint32_t i32_to_u32(int32_t s)
{
    return (uint32_t)s; /* well defined: modulo 2^32 */
}

static int32_t u32_to_i32(uint32_t u)
{
    if (u <= (uint32_t)INT32_MAX)
        return (int32_t)u;
    return -(int32_t)(~u) - 1;
}

/* ---- validation ---------------------------------------------------------- */

/* Every rule that does not need the payload bytes. */
static int env_check(const fr_env *e, uint64_t max_payload)
{
    if (e->kind < FR_ENV_REQUEST || e->kind > FR_ENV_KIND_MAX)
        return FRPC_EPROTO;
    if (e->flags & ~FR_ENV_F_KNOWN)
        return FRPC_EPROTO;
    if (e->req_id == 0)
        return FRPC_EPROTO;
    if ((e->flags & FR_ENV_F_SEVERED) &&
        (e->kind != FR_ENV_ERROR || (e->flags & FR_ENV_F_REMOTE)))
        return FRPC_EPROTO;

    int rndv = (e->flags & FR_ENV_F_RNDV) != 0;
    int remote = (e->flags & FR_ENV_F_REMOTE) != 0;

    switch (e->kind) {
    case FR_ENV_REQUEST:
    case FR_ENV_RESPONSE:
        if (remote || e->status < 0 ||
            (e->kind == FR_ENV_RESPONSE && e->status != 0))
            return FRPC_EPROTO;
        if (e->kind == FR_ENV_REQUEST && e->func_id == 0)
            return FRPC_EPROTO;
        if (rndv && e->payload_len != FR_RNDV_DESC_SIZE)
            return FRPC_EPROTO;
        break;
    case FR_ENV_ERROR:
        if (rndv)
            return FRPC_EPROTO;
        if (!remote && e->status >= 0)
            return FRPC_EPROTO;
        if (e->payload_len > FR_ENV_MAX_ERRMSG)
            return FRPC_EPROTO;
        break;
    case FR_ENV_PART:
        if (e->flags || e->status != 0 || e->payload_len == 0 ||
            fr_env_part_total(e) <= FR_ENV_HDR_SIZE ||
            fr_env_part_off(e) >= fr_env_part_total(e) ||
            e->payload_len > fr_env_part_total(e) - fr_env_part_off(e))
            return FRPC_EPROTO;
        return 0; /* the whole is held to the limit, not its parts */
    default: /* FR_ENV_RNDV_DONE */
        if (rndv || remote || e->status != 0 || e->payload_len != 0)
            return FRPC_EPROTO;
        break;
    }

    /* A rendezvous frame's own payload is the fixed-size descriptor; its
     * len is checked against the limit once the payload is at hand. */
    if (!rndv && e->payload_len > max_payload)
        return FRPC_ETOOBIG;
    return 0;
}

/* ---- envelope ------------------------------------------------------------ */

int fr_env_encode(const fr_env *env, void *out, size_t outlen)
{
    if (env == NULL || out == NULL || outlen < FR_ENV_HDR_SIZE)
        return FRPC_EINVAL;
    if (env_check(env, UINT64_MAX) != 0)
        return FRPC_EINVAL;

    uint8_t *p = out;
    put_le(p + 0, FR_ENV_MAGIC, 4);
    p[4] = (uint8_t)FR_ENV_VERSION;
    p[5] = env->kind;
    put_le(p + 6, env->flags, 2);
    put_le(p + 8, env->req_id, 8);
    put_le(p + 16, env->func_id, 8);
    put_le(p + 24, env->src_rank, 4);
    put_le(p + 28, i32_to_u32(env->status), 4);
    put_le(p + 32, env->token, 8);
    put_le(p + 40, env->payload_len, 8);
    return 0;
}

/* A whole header is there, with our magic and version. */
static int header_present(const uint8_t *p, size_t len)
{
    return len >= FR_ENV_HDR_SIZE && get_le(p, 4) == FR_ENV_MAGIC &&
           p[4] == FR_ENV_VERSION;
}

int fr_env_decode_header(const void *buf, size_t len, uint64_t max_payload,
                         fr_env *env)
{
    if (buf == NULL || env == NULL)
        return FRPC_EINVAL;
    const uint8_t *p = buf;
    if (!header_present(p, len))
        return FRPC_EPROTO;

    fr_env e;
    e.kind = p[5];
    e.flags = (uint16_t)get_le(p + 6, 2);
    e.req_id = get_le(p + 8, 8);
    e.func_id = get_le(p + 16, 8);
    e.src_rank = (uint32_t)get_le(p + 24, 4);
    e.status = u32_to_i32((uint32_t)get_le(p + 28, 4));
    e.token = get_le(p + 32, 8);
    e.payload_len = get_le(p + 40, 8);

    int rc = env_check(&e, max_payload);
    if (rc != 0)
        return rc;
    *env = e;
    return 0;
}

int fr_env_decode_body(const void *body, size_t body_len,
                       uint64_t max_payload, const fr_env *env,
                       const uint8_t **payload)
{
    if ((body == NULL && body_len) || env == NULL || payload == NULL)
        return FRPC_EINVAL;
    /* The limit before the length: fr_env_decode's order. A rendezvous
     * frame's limit is its descriptor's, a part's its whole's. */
    if (!(env->flags & FR_ENV_F_RNDV) && env->kind != FR_ENV_PART &&
        env->payload_len > max_payload)
        return FRPC_ETOOBIG;
    if ((uint64_t)body_len != env->payload_len)
        return FRPC_EPROTO;

    if (env->flags & FR_ENV_F_RNDV) {
        fr_rndv_desc d;
        int rc = fr_rndv_decode(body, body_len, max_payload, &d);
        if (rc != 0)
            return rc;
    }
    *payload = env->payload_len ? (const uint8_t *)body : NULL;
    return 0;
}

int fr_env_decode_rest(const void *buf, size_t len, uint64_t max_payload,
                       const fr_env *env, const uint8_t **payload)
{
    if (buf == NULL || len < FR_ENV_HDR_SIZE)
        return FRPC_EINVAL;
    return fr_env_decode_body((const uint8_t *)buf + FR_ENV_HDR_SIZE,
                              len - FR_ENV_HDR_SIZE, max_payload, env,
                              payload);
}

int fr_env_decode(const void *buf, size_t len, uint64_t max_payload,
                  fr_env *env, const uint8_t **payload)
{
    if (buf == NULL || env == NULL || payload == NULL)
        return FRPC_EINVAL;

    fr_env e;
    int rc = fr_env_decode_header(buf, len, max_payload, &e);
    if (rc == 0)
        rc = fr_env_decode_rest(buf, len, max_payload, &e, payload);
    if (rc == 0)
        *env = e;
    return rc;
}

int fr_env_frame_len(const void *msg, size_t len, size_t *frame_len)
{
    if (msg == NULL || frame_len == NULL)
        return FRPC_EINVAL;
    const uint8_t *p = msg;
    if (!header_present(p, len))
        return FRPC_EPROTO;
    uint64_t payload = get_le(p + 40, 8);
    uint64_t room = (uint64_t)(len - FR_ENV_HDR_SIZE);
    if (payload > room)
        return FRPC_EPROTO;
    uint64_t frame = FR_ENV_HDR_SIZE + payload;
    int more = (get_le(p + 6, 2) & FR_ENV_F_MORE) != 0;
    if (more ? len - frame < FR_ENV_HDR_SIZE : frame != len)
        return FRPC_EPROTO;
    *frame_len = (size_t)frame;
    return 0;
}

void fr_env_set_more(void *hdr)
{
    uint8_t *p = hdr;
    put_le(p + 6, get_le(p + 6, 2) | FR_ENV_F_MORE, 2);
}

/* ---- rendezvous descriptor ----------------------------------------------- */

int fr_rndv_encode(const fr_rndv_desc *d, void *out, size_t outlen)
{
    if (d == NULL || out == NULL || outlen < FR_RNDV_DESC_SIZE)
        return FRPC_EINVAL;
    if (d->len == 0 || d->cookie == 0)
        return FRPC_EINVAL;

    uint8_t *p = out;
    put_le(p + 0, d->addr, 8);
    put_le(p + 8, d->key, 8);
    put_le(p + 16, d->len, 8);
    put_le(p + 24, d->cookie, 8);
    return 0;
}

int fr_rndv_decode(const void *buf, size_t len, uint64_t max_payload,
                   fr_rndv_desc *d)
{
    if (buf == NULL || d == NULL)
        return FRPC_EINVAL;
    if (len != FR_RNDV_DESC_SIZE)
        return FRPC_EPROTO;

    const uint8_t *p = buf;
    fr_rndv_desc r;
    r.addr = get_le(p + 0, 8);
    r.key = get_le(p + 8, 8);
    r.len = get_le(p + 16, 8);
    r.cookie = get_le(p + 24, 8);
    if (r.len == 0 || r.cookie == 0)
        return FRPC_EPROTO;
    *d = r; /* also when too big: its cookie lets the sender go */
    return r.len > max_payload ? FRPC_ETOOBIG : 0;
}

/* ---- function ids -------------------------------------------------------- */

#define FNV64_OFFSET 0xcbf29ce484222325ull
#define FNV64_PRIME 0x100000001b3ull

uint64_t fr_func_id(const char *name)
{
    uint64_t h = FNV64_OFFSET;
    if (name != NULL) {
        for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
            h ^= *s;
            h *= FNV64_PRIME;
        }
    }
    return h ? h : 1;
}
