/*
 * Bootstrap store: the codecs and proofs of the HELLO/AUTH handshake and
 * the WATCH event list (interface in store_proto.h, protocol in store.h).
 * No I/O besides getrandom; both the server and the client use them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sys/random.h>

#include "comm/sha256.h"
#include "comm/store_proto.h"

static const char server_label[] = "fabrpc store v1 server proof";
static const char client_label[] = "fabrpc store v1 client proof";

void fr_store__hello_encode(const fr_store_hello *h,
                            uint8_t out[FR_STORE_HELLO_LEN])
{
    fr_store__put(out, h->proto, 4);
    fr_store__put(out + 4, h->version, 4);
    fr_store__put(out + 8, (uint32_t)h->rank, 4);
    fr_store__put(out + 12, (uint32_t)h->world, 4);
    out[16] = h->role;
    out[17] = h->has_key;
    memcpy(out + 18, h->nonce, FR_STORE_NONCE_LEN);
}

bool fr_store__hello_decode(const uint8_t in[FR_STORE_HELLO_LEN],
                            fr_store_hello *h)
{
    h->proto = (uint32_t)fr_store__get(in, 4);
    h->version = (uint32_t)fr_store__get(in + 4, 4);
    h->rank = (int32_t)(uint32_t)fr_store__get(in + 8, 4);
    h->world = (int32_t)(uint32_t)fr_store__get(in + 12, 4);
    h->role = in[16];
    h->has_key = in[17];
    memcpy(h->nonce, in + 18, FR_STORE_NONCE_LEN);
    return h->role <= FR_STORE_ROLE_LAUNCHER && h->has_key <= 1;
}

void fr_store__proof(const uint8_t *key, size_t key_len, bool server,
                     const uint8_t hello[FR_STORE_HELLO_LEN],
                     const uint8_t nonce_s[FR_STORE_NONCE_LEN],
                     uint8_t out[FR_STORE_MAC_LEN])
{
    const void *parts[3] = {server ? server_label : client_label, hello,
                            nonce_s};
    const size_t lens[3] = {server ? sizeof(server_label) - 1
                                   : sizeof(client_label) - 1,
                            FR_STORE_HELLO_LEN, FR_STORE_NONCE_LEN};
    fr_hmac_sha256(key, key_len, parts, lens, 3, out);
}

int fr_store__nonce(uint8_t out[FR_STORE_NONCE_LEN])
{
    size_t got = 0;
    while (got < FR_STORE_NONCE_LEN) {
        ssize_t n = getrandom(out + got, FR_STORE_NONCE_LEN - got, 0);
        if (n > 0)
            got += (size_t)n;
        else if (n < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

size_t fr_store__events_encode(const fr_store_event *ev, size_t n,
                               uint8_t *out)
{
    uint8_t *p = out;
    for (size_t i = 0; i < n; i++) {
        size_t rl = strnlen(ev[i].reason, sizeof(ev[i].reason) - 1);
        fr_store__put(p, (uint32_t)ev[i].rank, 4);
        p[4] = (uint8_t)ev[i].state;
        p[5] = (uint8_t)rl;
        memcpy(p + 6, ev[i].reason, rl);
        p += 6 + rl;
    }
    return (size_t)(p - out);
}

int fr_store__events_decode(const uint8_t *p, size_t len, size_t skip,
                            fr_store_event *ev, size_t cap, size_t *n,
                            size_t *count)
{
    size_t k = 0, all = 0;
    while (len > 0) {
        if (len < 6)
            return -1;
        size_t rl = p[5];
        int32_t rank = (int32_t)(uint32_t)fr_store__get(p, 4);
        if (rl >= sizeof(ev->reason) || len < 6 + rl || rank < 0 ||
            (p[4] != FR_STORE_DEAD && p[4] != FR_STORE_LEFT))
            return -1;
        if (all++ >= skip && k < cap) {
            ev[k].rank = rank;
            ev[k].state = p[4];
            memcpy(ev[k].reason, p + 6, rl);
            ev[k].reason[rl] = '\0';
            k++;
        }
        p += 6 + rl;
        len -= 6 + rl;
    }
    *n = k;
    *count = all;
    return 0;
}
