/*
 * Bootstrap key-value store: a small TCP service run by rank 0 (like torch's
 * TCPStore) through which ranks exchange fabric addresses, the job token,
 * and meet at barriers. Keys are strings (1..255 bytes), values are bytes
 * (up to FR_STORE_MAX_VALUE).
 *
 * Wire protocol (all integers little-endian), one request then one reply
 * per round trip on a client's connection:
 *   request: u8 op, u16 keylen, u32 vallen, i64 arg, key bytes, value bytes
 *   reply:   i32 status (0 or FRPC_E*), i64 num, u32 vallen, value bytes
 *   ops: SET=1 (store value), GET=2 (wait until the key exists or arg ms
 *   pass, arg <= 0: no limit, then return its value), ADD=3 (add arg to the
 *   key's counter, created at 0; returns the new value in num), WAIT_GE=4
 *   (wait until the counter key reaches arg; the value is the timeout as
 *   an i64 of ms, <= 0: no limit; num returns the counter).
 * A counter is a value holding a decimal integer ("42", as torch's
 * TCPStore keeps them): GET of a counter returns that text, a SET of
 * decimal text may be ADDed to, and ADD or WAIT_GE on any other value
 * answers FRPC_EPROTO. A missing counter counts 0.
 * The server validates every length before it buffers anything; a
 * malformed request (unknown op, key of 0 or over FR_STORE_MAX_KEY bytes or
 * holding a NUL, value over FR_STORE_MAX_VALUE, a value on GET or ADD, a
 * WAIT_GE value that is not 8 bytes) closes only that connection. A GET or
 * WAIT_GE that is not ready is parked, not polled: the SET/ADD that makes it
 * ready answers it, or its deadline does with FRPC_ETIMEDOUT.
 *
 * Never hangs: the client bounds every wait on its socket with poll(). The
 * server enforces GET/WAIT_GE deadlines and the client gives up 5 s after
 * them; other replies and all sends are bounded by 60 s. A GET/WAIT_GE with
 * no limit waits as long as the connection lives (TCP keepalive is on). A
 * send/receive failure, such a client-side timeout or a malformed reply
 * closes the client's connection: that call and every later one on it
 * return FRPC_EBOOTSTRAP. FRPC_EINVAL is found before anything is sent and
 * leaves the connection usable.
 *
 * Thread safety: a client is used by one thread at a time (the agent holds
 * a lock around it). The server runs its own thread.
 */
#ifndef FR_COMM_STORE_H
#define FR_COMM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "rpc/fabrpc_errors.h"

#define FR_STORE_MAX_KEY 255u
#define FR_STORE_MAX_VALUE (1u << 20)

typedef struct fr_store_server fr_store_server;
typedef struct fr_store_client fr_store_client;

/*
 * Starts serving on host:port (host NULL or "" means all IPv4 interfaces,
 * "::" all IPv6 ones; port 0 picks a free port, see fr_store_server_port).
 * The socket has SO_REUSEADDR, so a restarted job can take the port back
 * at once. Returns 0 and *out, or FRPC_EBOOTSTRAP (bind/listen failed;
 * errbuf, if not NULL, gets "cannot listen on HOST:PORT: strerror"),
 * FRPC_ENOMEM, FRPC_EINVAL.
 * Does not block beyond setting up the socket; serving runs on a thread.
 */
int fr_store_server_start(const char *host, uint16_t port,
                          fr_store_server **out, char *errbuf,
                          size_t errlen);

/* The port actually bound (0 for NULL). */
uint16_t fr_store_server_port(const fr_store_server *s);

/* Stops serving, closes every connection (clients blocked in GET/WAIT get
 * FRPC_EBOOTSTRAP), joins the thread and frees s. NULL is a no-op. */
void fr_store_server_stop(fr_store_server *s);

/*
 * Connects to host:port (a name, an IPv4 or a bare IPv6 address), retrying
 * with exponential backoff (10 ms doubling to 500 ms) until timeout_ms has
 * passed; timeout_ms <= 0 makes a single attempt (bounded by 1 s). Name
 * lookup failures are retried too. Returns 0 and *out, or
 * FRPC_EBOOTSTRAP with errbuf = "cannot reach bootstrap store at HOST:PORT
 * after N ms: strerror", FRPC_EINVAL, FRPC_ENOMEM. Blocks.
 */
int fr_store_connect(const char *host, uint16_t port, int timeout_ms,
                     fr_store_client **out, char *errbuf, size_t errlen);

/* Closes and frees c. NULL is a no-op. */
void fr_store_close(fr_store_client *c);

/* Sets key to len bytes of value (copied; overwrites; value may be NULL
 * when len is 0). Errors: FRPC_EINVAL (bad key or len), FRPC_EBOOTSTRAP
 * (connection lost), FRPC_ENOMEM (the server is out of memory). */
int fr_store_set(fr_store_client *c, const char *key, const void *value,
                 size_t len);

/* Waits until key exists (at most timeout_ms; <= 0 means no limit) and
 * returns a malloc'ed copy of its value in *value (caller frees; a zero-
 * length value gives a non-NULL 1-byte allocation) and its length.
 * Errors: FRPC_ETIMEDOUT, FRPC_EINVAL, FRPC_EBOOTSTRAP, FRPC_ENOMEM. */
int fr_store_get(fr_store_client *c, const char *key, int timeout_ms,
                 void **value, size_t *len);

/* Atomically adds delta to the counter named key (created at 0) and
 * returns the new value in *result (may be NULL). Errors: FRPC_EINVAL
 * (also: the sum would overflow an i64), FRPC_EBOOTSTRAP, FRPC_EPROTO (key
 * holds a non-counter value). */
int fr_store_add(fr_store_client *c, const char *key, int64_t delta,
                 int64_t *result);

/* Waits until the counter key is >= target, at most timeout_ms (<= 0: no
 * limit). Errors: FRPC_ETIMEDOUT, FRPC_EINVAL, FRPC_EBOOTSTRAP, FRPC_EPROTO
 * (key holds a non-counter value). */
int fr_store_wait_ge(fr_store_client *c, const char *key, int64_t target,
                     int timeout_ms);

/*
 * Barrier for world ranks: adds 1 to the counter key, then waits until it
 * reaches world. The key must be fresh for each barrier (the agent adds a
 * generation number). Errors as fr_store_wait_ge.
 */
int fr_store_barrier(fr_store_client *c, const char *key, int world,
                     int timeout_ms);

#endif /* FR_COMM_STORE_H */
