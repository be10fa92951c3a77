/*
 * Internal to the bootstrap store (store_server.c, store_client.c,
 * store_table.c, store_wire.c, store_members.c): the wire constants of the
 * protocol described in store.h, little-endian codecs, the small helpers
 * both sides need, the handshake's codecs and proofs, the server's key
 * table and its membership record. Not for other files.
 */
#ifndef FR_COMM_STORE_PROTO_H
#define FR_COMM_STORE_PROTO_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "comm/clock.h"
#include "comm/store.h"

enum fr_store_op {
    FR_STORE_OP_SET = 1,
    FR_STORE_OP_GET = 2,
    FR_STORE_OP_ADD = 3,
    FR_STORE_OP_WAIT_GE = 4,
    FR_STORE_OP_HELLO = 5,
    FR_STORE_OP_AUTH = 6,
    FR_STORE_OP_WATCH = 7,
    FR_STORE_OP_LEAVE = 8,
    FR_STORE_OP_GONE = 9,
    FR_STORE_OP_UNARRIVE = 10
};

/* request: u8 op, u16 keylen, u32 vallen, i64 arg */
#define FR_STORE_REQ_HDR 15u
/* reply: i32 status, i64 num, u32 vallen */
#define FR_STORE_REP_HDR 16u

#define FR_STORE_NONCE_LEN 32u
#define FR_STORE_MAC_LEN 32u
/* HELLO value: u32 store proto, u32 version, i32 rank, i32 world, u8 role,
 * u8 has_key, nonce[32] */
#define FR_STORE_HELLO_LEN (18u + FR_STORE_NONCE_LEN)
/* HELLO reply value: u8 has_key, nonce[32], proof[32] (zeros: no key) */
#define FR_STORE_CHALLENGE_LEN (1u + FR_STORE_NONCE_LEN + FR_STORE_MAC_LEN)
/* An error reply's value (its message) is at most this long. */
#define FR_STORE_MAX_ERR 255u
/* The server closes a connection that has not authenticated by then. */
#define FR_STORE_AUTH_MS 3000
/* The largest world size the server accepts. */
#define FR_STORE_MAX_WORLD (1 << 20)

/* ---- TCP plumbing of both sides (store_net.c) ---------------------------- */

/* TCP_NODELAY and keepalive on a connected socket: a peer that vanishes is
 * noticed within about liveness_ms (fr_store_ident; see store_net.c).
 * Best effort. */
void fr_store__tune_socket(int fd, int liveness_ms);

/* A non-blocking listening socket on host:port (SO_REUSEADDR) in *lfd and
 * the port bound in *bound. 0, or FRPC_EBOOTSTRAP with errbuf = "cannot
 * listen on HOST:PORT: reason". */
int fr_store__listen(const char *host, uint16_t port, int *lfd,
                     uint16_t *bound, char *errbuf, size_t errlen);

/* One attempt at every address of host:port (portstr), each bounded by
 * deadline (monotonic ms). A connected, blocking, tuned socket, or -1 with
 * *why set (static text). */
int fr_store__dial(const char *host, const char *portstr, int64_t deadline,
                   int liveness_ms, const char **why);

/* A key for connected socket fd's own end, or its peer's: its address
 * family, address and port, hashed to 64 bits (never 0); 0 if it cannot
 * be read. One end seen from both sides (getsockname on one socket,
 * getpeername on the other) gives one key; two ends that differ in
 * address or port give two (but for a 2^-64 chance). */
uint64_t fr_store__end_key(int fd, bool peer);

/* Waits until fd is ready for ev or deadline (monotonic ms, INT64_MAX: no
 * limit) passes. 0 when ready (or in error: the next call reports it), -1
 * on timeout or a poll error. */
int fr_store__wait_fd(int fd, short ev, int64_t deadline);

/* n-byte little-endian integers (n <= 8). */
static inline void fr_store__put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t fr_store__get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Monotonic clock in milliseconds. */
static inline int64_t fr_store__now_ms(void)
{
    return (int64_t)(fr_now_ns() / 1000000u);
}

/* "host:port", or "[host]:port" when host is an IPv6 literal. */
static inline void fr_store__fmt_addr(char *buf, size_t n, const char *host,
                                      uint16_t port)
{
    if (strchr(host, ':'))
        snprintf(buf, n, "[%s]:%u", host, (unsigned)port);
    else
        snprintf(buf, n, "%s:%u", host, (unsigned)port);
}

/* Formats a message into errbuf (if not NULL and errlen > 0). */
__attribute__((format(printf, 3, 4)))
static inline void fr_store__errf(char *errbuf, size_t errlen,
                                  const char *fmt, ...)
{
    va_list ap;
    if (!errbuf || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}

/*
 * The server's key table (store_table.c). Keys are C strings, values byte
 * strings; a counter is a value holding a decimal integer. Not thread-safe:
 * the server thread alone uses it.
 */
typedef struct fr_store_table fr_store_table;

/* An empty table, or NULL when out of memory. Free with fr_store_table_free
 * (NULL is a no-op there). */
fr_store_table *fr_store_table_new(void);
void fr_store_table_free(fr_store_table *t);

/* true and key's value (owned by the table, valid until the key is next
 * set) in *val and *len, or false when the key is missing. */
bool fr_store_table_get(const fr_store_table *t, const char *key,
                        const uint8_t **val, size_t *len);

/* Sets key to a copy of len bytes of val. 0 or FRPC_ENOMEM (unchanged). */
int fr_store_table_set(fr_store_table *t, const char *key, const void *val,
                       size_t len);

/* The counter key in *v (0 when missing). 0, or FRPC_EPROTO when the value
 * is not a decimal integer. */
int fr_store_table_counter(const fr_store_table *t, const char *key,
                           int64_t *v);

/* Adds delta to the counter key and returns the new value in *result.
 * 0, FRPC_EPROTO (not a counter), FRPC_EINVAL (i64 overflow), FRPC_ENOMEM;
 * the key is unchanged on error. */
int fr_store_table_add(fr_store_table *t, const char *key, int64_t delta,
                       int64_t *result);

/* ---- the handshake and the events (store_wire.c) ------------------------ */

/* A HELLO's fields. */
typedef struct fr_store_hello {
    uint32_t proto;   /* FR_STORE_PROTO of the sender */
    uint32_t version; /* fabrpc protocol version */
    int32_t rank, world;
    uint8_t role;    /* fr_store_role */
    uint8_t has_key; /* 0 or 1 */
    uint8_t nonce[FR_STORE_NONCE_LEN];
} fr_store_hello;

void fr_store__hello_encode(const fr_store_hello *h,
                            uint8_t out[FR_STORE_HELLO_LEN]);
/* false when a field is out of its domain (role, has_key). */
bool fr_store__hello_decode(const uint8_t in[FR_STORE_HELLO_LEN],
                            fr_store_hello *h);

/* A proof of the key: HMAC-SHA256(key, label || hello || server nonce),
 * the label naming the side ("server" or "client") so one side's proof is
 * never valid as the other's. hello is the client's encoded HELLO (it holds
 * the client's nonce and its claimed identity). */
void fr_store__proof(const uint8_t *key, size_t key_len, bool server,
                     const uint8_t hello[FR_STORE_HELLO_LEN],
                     const uint8_t nonce_s[FR_STORE_NONCE_LEN],
                     uint8_t out[FR_STORE_MAC_LEN]);

/* Fills out with fresh random bytes (getrandom). 0 or -1. */
int fr_store__nonce(uint8_t out[FR_STORE_NONCE_LEN]);

/* Encodes events ev[0..n) as the WATCH reply value (each: i32 rank, u8
 * state, u8 reason length, reason bytes) into out (at least n * 102
 * bytes); returns the bytes written. */
size_t fr_store__events_encode(const fr_store_event *ev, size_t n,
                               uint8_t *out);
/* Decodes a WATCH value: passes over its first skip events, copies up to
 * cap of the next into ev (*n: how many); *count gets the number of
 * events the value holds. -1 when the value is malformed. */
int fr_store__events_decode(const uint8_t *p, size_t len, size_t skip,
                            fr_store_event *ev, size_t cap, size_t *n,
                            size_t *count);

/* ---- the server's membership record (store_members.c) ------------------- */

/*
 * Who has joined, who is connected (MAIN), who died or left, the events,
 * the poison text, the count of key failures. Used by the server thread;
 * fr_store_members_wait may be called from any thread (an internal
 * mutex guards what it reads).
 */
typedef struct fr_store_members fr_store_members;

/* A record for self's job (world, version, key copied), or NULL when out of
 * memory. Free with fr_store_members_free (NULL is a no-op). */
fr_store_members *fr_store_members_new(const fr_store_ident *self);
void fr_store_members_free(fr_store_members *m);

/* A HELLO's value val (vlen >= 4 bytes): 0 with h, raw (its bytes) and
 * nonce_s (fresh) filled in and the challenge to send in out;
 * FRPC_EPROTO with msg (another store protocol: refuse); FRPC_EINVAL
 * (malformed, or no randomness: close). */
int fr_store_members_hello(fr_store_members *m, const uint8_t *val,
                           uint32_t vlen, fr_store_hello *h,
                           uint8_t raw[FR_STORE_HELLO_LEN],
                           uint8_t nonce_s[FR_STORE_NONCE_LEN],
                           uint8_t out[FR_STORE_CHALLENGE_LEN], char *msg,
                           size_t n);

/* An AUTH's proof val (vlen bytes) for the HELLO h: 0, the connection is a
 * member (a MAIN now stands for its rank), or a refusal code with its
 * message in msg: FRPC_EACCES (key mismatch; it poisons the job while not
 * every rank has joined), FRPC_EBOOTSTRAP (world or version mismatch: the
 * job is poisoned), FRPC_ENORANK (rank out of range), FRPC_ESHUTDOWN (a
 * rank that died or left, or whose MAIN is still connected once rank 0
 * left: a stale store), FRPC_EEXIST (the rank's MAIN is still connected:
 * a second process with that rank, or a MAIN for the serving rank itself
 * with other_process, which the server knows is not its own process's
 * client; it poisons the job while not every rank has joined). */
int fr_store_members_auth(fr_store_members *m, const fr_store_hello *h,
                          const uint8_t raw[FR_STORE_HELLO_LEN],
                          const uint8_t nonce_s[FR_STORE_NONCE_LEN],
                          const uint8_t *val, uint32_t vlen,
                          bool other_process, char *msg, size_t n);

/* rank's MAIN sent LEAVE (an event, LEFT), or its MAIN closed without
 * LEAVE (an event, DEAD, with reason why) or after it (nothing). */
void fr_store_members_leave(fr_store_members *m, int rank);
void fr_store_members_closed(fr_store_members *m, int rank, const char *why);

/* The launcher saw rank's process end, why (its words): true when rank
 * had not joined (nor been refused as a mismatch), and so never will:
 * the job is poisoned, naming it. false when its MAIN came (its closing
 * tells the others), or it was already heard of. */
bool fr_store_members_gone(fr_store_members *m, int rank, const char *why);

/* Why a wait that is not satisfied can never be: 0 (it may still be),
 * FRPC_EBOOTSTRAP (the job is poisoned) or FRPC_EPEERLOST (a rank died or
 * left), with the message in *msg (owned by m). */
int fr_store_members_blocked(const fr_store_members *m, const char **msg);

/* The events so far: *n and a pointer owned by m (valid until the next
 * event). */
const fr_store_event *fr_store_members_events(const fr_store_members *m,
                                              size_t *n);

/* fr_store_server_wait_gone (latecomers false) and
 * fr_store_server_wait_told (true). Any thread. */
int fr_store_members_wait(fr_store_members *m, int timeout_ms,
                          bool latecomers);

/* See fr_store_server_key_failures. Any thread. */
uint64_t fr_store_members_key_failures(fr_store_members *m, char *last,
                                       size_t n);

#endif /* FR_COMM_STORE_PROTO_H */
