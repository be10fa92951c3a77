/*
 * Internal to the bootstrap store (store_server.c, store_client.c,
 * store_table.c): the wire constants of the protocol described in store.h,
 * little-endian codecs, the small helpers both sides need, and the
 * server's key table. Not for other files.
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
    FR_STORE_OP_WAIT_GE = 4
};

/* request: u8 op, u16 keylen, u32 vallen, i64 arg */
#define FR_STORE_REQ_HDR 15u
/* reply: i32 status, i64 num, u32 vallen */
#define FR_STORE_REP_HDR 16u

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

#endif /* FR_COMM_STORE_PROTO_H */
