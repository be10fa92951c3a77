/*
 * Internal to the bootstrap store (store_server.c, store_client.c): the
 * wire constants of the protocol described in store.h, little-endian
 * codecs, and the two small helpers both sides need. Not for other files.
 */
#ifndef FR_COMM_STORE_PROTO_H
#define FR_COMM_STORE_PROTO_H

#include <stdarg.h>
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
/* The largest request the server accepts. */
#define FR_STORE_MAX_REQ (FR_STORE_REQ_HDR + FR_STORE_MAX_KEY + FR_STORE_MAX_VALUE)

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

#endif /* FR_COMM_STORE_PROTO_H */
