#include "config.h"

#include <string.h>

#include "comm/memdesc.h"
#include "comm/sha256.h"

static const uint8_t magic[4] = {'F', 'R', 'M', 'D'};
#define CHECKED_BYTES 56

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void check_value(const uint8_t *bytes, uint64_t token,
                        uint8_t out[8])
{
    uint8_t key[8], mac[FR_SHA256_LEN];
    const void *msg[1] = {bytes};
    size_t len[1] = {CHECKED_BYTES};
    put64(key, token);
    fr_hmac_sha256(key, sizeof(key), msg, len, 1, mac);
    memcpy(out, mac, 8);
}

void fr_memdesc_encode(const fr_memdesc *d, uint64_t token,
                       uint8_t out[FR_MEMDESC_SIZE])
{
    memset(out, 0, FR_MEMDESC_SIZE);
    memcpy(out, magic, 4);
    out[4] = FR_MEMDESC_VERSION;
    out[5] = d->access;
    out[6] = d->flags;
    put64(out + 8, (uint64_t)d->slot << 32 | d->rank);
    put64(out + 16, d->addr);
    put64(out + 24, d->key);
    put64(out + 32, d->len);
    put64(out + 40, d->region);
    check_value(out, token, out + CHECKED_BYTES);
}

int fr_memdesc_decode(const void *in, size_t len, uint64_t token,
                      uint32_t world, fr_memdesc *d)
{
    const uint8_t *b = in;
    uint8_t want[8];
    static const uint8_t zero[8];

    if (!in || len != FR_MEMDESC_SIZE || memcmp(b, magic, 4) != 0 ||
        b[4] != FR_MEMDESC_VERSION ||
        (b[5] & ~(FR_MEMDESC_READ | FR_MEMDESC_WRITE)) ||
        (b[6] & ~FR_MEMDESC_F_MESSAGES) || b[7] ||
        memcmp(b + 48, zero, 8) != 0)
        return FRPC_EPROTO;
    check_value(b, token, want);
    if (!fr_ct_equal(want, b + CHECKED_BYTES, 8))
        return FRPC_EACCES;
    uint64_t rank = get64(b + 8) & UINT32_MAX;
    if (rank >= world)
        return FRPC_ENORANK;
    d->rank = (uint32_t)rank;
    d->access = b[5];
    d->flags = b[6];
    d->addr = get64(b + 16);
    d->key = get64(b + 24);
    d->len = get64(b + 32);
    d->region = get64(b + 40);
    d->slot = (uint32_t)(get64(b + 8) >> 32);
    return 0;
}
