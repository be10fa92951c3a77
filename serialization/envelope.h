/*
 * The wire envelope: a fixed 48-byte header in front of every message.
 * Encoding and decoding are pure functions over byte strings (no libfabric,
 * no threads, no allocation), so they can be unit-tested and fuzzed alone.
 *
 * Layout (all integers little-endian, no padding):
 *   off size field
 *    0   4   magic        FR_ENV_MAGIC ("FRPC")
 *    4   1   version      FR_ENV_VERSION
 *    5   1   kind         enum fr_env_kind
 *    6   2   flags        FR_ENV_F_* bits; unknown bits are rejected
 *    8   8   req_id       caller's request id (0 is never a valid id)
 *   16   8   func_id      64-bit hash of the function name (requests)
 *   24   4   src_rank     sender's rank
 *   28   4   status       error kinds: the FRPC_E* code; app code for EREMOTE;
 *                         REQUEST: the caller's time left in ms (0: none)
 *   32   8   token        per-job token; frames with a wrong one are dropped
 *   40   8   payload_len  bytes that follow the header
 *
 * A message carries one frame, or several back to back: every frame but
 * the last has FR_ENV_F_MORE (fr_env_frame_len splits them).
 *
 * Invariant of the decoder: any byte string either decodes, with every field
 * valid for its kind and the payload exactly filling the rest of the buffer,
 * or is rejected with FRPC_EPROTO (or FRPC_ETOOBIG for a payload over the
 * limit). It never reads outside [buf, buf+len).
 */
#ifndef FR_SER_ENVELOPE_H
#define FR_SER_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "serialization/fabrpc_errors.h"

#define FR_ENV_MAGIC 0x43505246u /* "FRPC" read as little-endian u32 */
#define FR_ENV_VERSION 5u /* 2: FR_ENV_F_MORE (several frames a message);
                            3: a request's status is its time left;
                            4: FR_ENV_PART (a rank that would drop parts
                               must not join: the store compares it);
                            5: FR_ENV_F_SEVERED */
#define FR_ENV_HDR_SIZE 48u

enum fr_env_kind {
    FR_ENV_REQUEST = 1,   /* payload: the call's args */
    FR_ENV_RESPONSE = 2,  /* payload: the reply */
    FR_ENV_ERROR = 3,     /* status: FRPC_E* code; payload: message text,
                             FR_ENV_F_REMOTE: status is the handler's code */
    FR_ENV_RNDV_DONE = 4, /* rendezvous control: the receiver has pulled the
                             payload named by req_id/func_id (a cookie) and
                             the sender may release it; no payload */
    FR_ENV_PART = 5,      /* one part of a frame too long for one inject
                             (shm): req_id names the whole frame among its
                             sender's, func_id says where this part goes
                             (fr_env_part_*), the payload is that range of
                             the whole frame's bytes, header included */
    FR_ENV_KIND_MAX = 5
};

/* Flags. */
#define FR_ENV_F_RNDV 0x0001u   /* payload is an fr_rndv_desc, not the data */
#define FR_ENV_F_REMOTE 0x0002u /* FR_ENV_ERROR raised by a handler */
#define FR_ENV_F_MORE 0x0004u   /* another frame follows in this message */
/* FR_ENV_ERROR (FRPC_EPEERLOST) to a rank whose request came after the
 * sender marked it lost: the sender drops what it sends, so its calls to
 * the sender could never end otherwise (a host cut off from rank 0, then
 * back); the receiver marks the sender lost in turn. */
#define FR_ENV_F_SEVERED 0x0008u
#define FR_ENV_F_KNOWN                                                        \
    (FR_ENV_F_RNDV | FR_ENV_F_REMOTE | FR_ENV_F_MORE | FR_ENV_F_SEVERED)

/* Longest error message carried by FR_ENV_ERROR. */
#define FR_ENV_MAX_ERRMSG 1024u

typedef struct fr_env {
    uint8_t kind;
    uint16_t flags;
    uint64_t req_id;
    uint64_t func_id;
    uint32_t src_rank;
    int32_t status;
    uint64_t token;
    uint64_t payload_len;
} fr_env;

/* A part's func_id: the whole frame's length in its low 32 bits, the
 * offset of the part's bytes in it in the high 32. */
static inline uint64_t fr_env_part_place(uint32_t off, uint32_t total)
{
    return (uint64_t)off << 32 | total;
}
static inline uint32_t fr_env_part_total(const fr_env *e)
{
    return (uint32_t)(e->func_id & 0xffffffffu);
}
static inline uint32_t fr_env_part_off(const fr_env *e)
{
    return (uint32_t)(e->func_id >> 32);
}

/* Rendezvous descriptor: the payload of an envelope with FR_ENV_F_RNDV.
 * The receiver reads `len` bytes from (addr, key) at the sender and then
 * answers FR_ENV_RNDV_DONE carrying `cookie` in req_id. The real payload
 * length is `len`; it must not be 0 and is checked against the limit. */
#define FR_RNDV_DESC_SIZE 32u
typedef struct fr_rndv_desc {
    uint64_t addr;
    uint64_t key;
    uint64_t len;
    uint64_t cookie;
} fr_rndv_desc;

/*
 * Writes env's header into out[0..FR_ENV_HDR_SIZE). The magic and version
 * are filled in; env->payload_len is written as given. Returns 0, or
 * FRPC_EINVAL if out or env is NULL, outlen < FR_ENV_HDR_SIZE, or env is not
 * valid by the rules fr_env_decode applies (so encode never produces a
 * frame that decode would reject, payload limit aside).
 */
int fr_env_encode(const fr_env *env, void *out, size_t outlen);

/*
 * Decodes a whole frame buf[0..len): header plus exactly payload_len bytes.
 * On success fills *env and sets *payload to buf + FR_ENV_HDR_SIZE (NULL if
 * payload_len is 0). Rejects with FRPC_EPROTO: len < header, bad magic,
 * version or kind, unknown flags, len != header + payload_len, req_id 0,
 * a kind-specific rule broken:
 *   - RNDV only on REQUEST and RESPONSE, with a payload of exactly one valid
 *     descriptor (see fr_rndv_decode);
 *   - REMOTE only on ERROR;
 *   - REQUEST: func_id != 0;
 *   - ERROR: status < 0 unless REMOTE (then any value), message at most
 *     FR_ENV_MAX_ERRMSG bytes;
 *   - RNDV_DONE: no payload;
 *   - REQUEST: status >= 0; every other kind but ERROR: status == 0;
 *   - PART: no flags, a payload of at least one byte, a whole frame longer
 *     than a header, and the part inside it (offset + payload_len <= the
 *     whole's length).
 * Rejects with FRPC_ETOOBIG a payload_len (for a RNDV frame: the
 * descriptor's len) over max_payload; header violations are reported
 * before the limit. A PART is not held to the limit: the frame it belongs
 * to is, once whole (its receiver caps how long a whole may be). FRPC_EINVAL for NULL pointers. Pure; any thread.
 */
int fr_env_decode(const void *buf, size_t len, uint64_t max_payload,
                  fr_env *env, const uint8_t **payload);

/* Decodes only the header (buf must hold at least FR_ENV_HDR_SIZE bytes),
 * with every check that does not need the payload. Same errors. */
int fr_env_decode_header(const void *buf, size_t len, uint64_t max_payload,
                         fr_env *env);

/*
 * The rest of fr_env_decode for a frame whose header env was decoded by
 * fr_env_decode_header (with any limit): the payload limit, the length
 * (len must be header + env->payload_len) and a rendezvous frame's
 * descriptor; sets *payload as fr_env_decode does. So a receiver that
 * looks at the header first decodes it once. Errors as fr_env_decode's;
 * FRPC_EINVAL for NULL pointers or len < FR_ENV_HDR_SIZE. Pure.
 */
int fr_env_decode_rest(const void *buf, size_t len, uint64_t max_payload,
                       const fr_env *env, const uint8_t **payload);

/* fr_env_decode_rest for a frame whose payload body[0..body_len) is not
 * right after its header (a frame put together from parts keeps its
 * header apart, parts.h). Same checks and errors; FRPC_EINVAL for NULL
 * env or payload, or a NULL body with body_len > 0. Pure. */
int fr_env_decode_body(const void *body, size_t body_len,
                       uint64_t max_payload, const fr_env *env,
                       const uint8_t **payload);

/*
 * The length of the frame at the start of msg[0..len) (header plus its
 * payload_len), for splitting a message that carries several. Checks only
 * what splitting needs: the header's magic and version, and that the frame
 * fits: with FR_ENV_F_MORE another header must follow it inside len,
 * without it the frame must end exactly at len. FRPC_EPROTO otherwise;
 * FRPC_EINVAL for NULL pointers. Decode each frame with fr_env_decode.
 * Pure; any thread.
 */
int fr_env_frame_len(const void *msg, size_t len, size_t *frame_len);

/* Sets FR_ENV_F_MORE in an encoded header (hdr: FR_ENV_HDR_SIZE bytes
 * written by fr_env_encode), when another frame is appended after it. */
void fr_env_set_more(void *hdr);

/* Encodes / decodes a rendezvous descriptor (exactly FR_RNDV_DESC_SIZE
 * bytes). decode: FRPC_EPROTO if len is wrong, desc.len is 0 or
 * desc.cookie is 0 (it comes back as RNDV_DONE's req_id, which must not be
 * 0), FRPC_ETOOBIG if desc.len > max_payload (*d is filled then too:
 * the receiver refuses the payload but still names its cookie in the
 * RNDV_DONE that lets the sender free it). encode: FRPC_EINVAL for NULL
 * pointers, outlen < FR_RNDV_DESC_SIZE, len 0 or cookie 0. */
int fr_rndv_encode(const fr_rndv_desc *d, void *out, size_t outlen);
int fr_rndv_decode(const void *buf, size_t len, uint64_t max_payload,
                   fr_rndv_desc *d);

/* 64-bit FNV-1a hash of a function name; never returns 0 (0 is mapped to
 * 1) so that 0 can mean "no function". NULL hashes as "". */
uint64_t fr_func_id(const char *name);

#endif /* FR_SER_ENVELOPE_H */
