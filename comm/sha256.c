/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104); interface in sha256.h.
 * Straightforward and unrolled nowhere: the store hashes a few hundred
 * bytes per connection, and every memory descriptor checked (comm/memdesc.c)
 * costs five blocks. Tested against the FIPS and RFC 4231 vectors in
 * tests/unit/test_store.c.
 */
#include <string.h>

#include "comm/sha256.h"

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, h, sizeof(v));
    /* The eight working variables rotate by renaming, not by moving: a
     * memmove per round made a block cost 1.5 us (a descriptor check,
     * five blocks, 7.5 us). */
    uint32_t a = v[0], b = v[1], c = v[2], d = v[3], e = v[4], f = v[5],
             g = v[6], hh = v[7];
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = ror(e, 6) ^ ror(e, 11) ^ ror(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + s1 + ch + K[i] + w[i];
        uint32_t s0 = ror(a, 2) ^ ror(a, 13) ^ ror(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + s0 + maj;
    }
    v[0] = a;
    v[1] = b;
    v[2] = c;
    v[3] = d;
    v[4] = e;
    v[5] = f;
    v[6] = g;
    v[7] = hh;
    for (int i = 0; i < 8; i++)
        h[i] += v[i];
}

void fr_sha256_init(fr_sha256 *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                   0xa54ff53a, 0x510e527f, 0x9b05688c,
                                   0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof(iv));
    s->total = 0;
    s->blen = 0;
}

void fr_sha256_update(fr_sha256 *s, const void *p, size_t len)
{
    const uint8_t *b = p;
    s->total += len;
    while (len > 0) {
        size_t k = FR_SHA256_BLOCK - s->blen;
        if (k > len)
            k = len;
        memcpy(s->buf + s->blen, b, k);
        s->blen += k;
        b += k;
        len -= k;
        if (s->blen == FR_SHA256_BLOCK) {
            block(s->h, s->buf);
            s->blen = 0;
        }
    }
}

void fr_sha256_final(fr_sha256 *s, uint8_t out[FR_SHA256_LEN])
{
    uint64_t bits = s->total * 8;
    uint8_t pad[FR_SHA256_BLOCK + 8] = {0x80};
    size_t padlen = (s->blen < 56 ? 56 : 120) - s->blen;
    for (int i = 0; i < 8; i++)
        pad[padlen + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    fr_sha256_update(s, pad, padlen + 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

void fr_sha256_digest(const void *p, size_t len, uint8_t out[FR_SHA256_LEN])
{
    fr_sha256 s;
    fr_sha256_init(&s);
    fr_sha256_update(&s, p, len);
    fr_sha256_final(&s, out);
}

void fr_hmac_sha256(const void *key, size_t key_len, const void *const *msg,
                    const size_t *len, size_t n, uint8_t out[FR_SHA256_LEN])
{
    uint8_t k[FR_SHA256_BLOCK] = {0}, pad[FR_SHA256_BLOCK];
    uint8_t inner[FR_SHA256_LEN];
    fr_sha256 s;
    if (key_len > FR_SHA256_BLOCK)
        fr_sha256_digest(key, key_len, k);
    else if (key_len)
        memcpy(k, key, key_len);
    for (size_t i = 0; i < FR_SHA256_BLOCK; i++)
        pad[i] = k[i] ^ 0x36;
    fr_sha256_init(&s);
    fr_sha256_update(&s, pad, sizeof(pad));
    for (size_t i = 0; i < n; i++)
        fr_sha256_update(&s, msg[i], len[i]);
    fr_sha256_final(&s, inner);
    for (size_t i = 0; i < FR_SHA256_BLOCK; i++)
        pad[i] = k[i] ^ 0x5c;
    fr_sha256_init(&s);
    fr_sha256_update(&s, pad, sizeof(pad));
    fr_sha256_update(&s, inner, sizeof(inner));
    fr_sha256_final(&s, out);
    memset(k, 0, sizeof(k)); /* not guaranteed to survive the optimiser */
}

bool fr_ct_equal(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}
