/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), small and dependency-
 * free, for the bootstrap store's challenge-response (store_auth.c). Not a
 * general crypto library: no streaming HMAC, no other digests.
 * Pure functions over bytes; any thread.
 */
#ifndef FR_COMM_SHA256_H
#define FR_COMM_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FR_SHA256_LEN 32u
#define FR_SHA256_BLOCK 64u

typedef struct fr_sha256 {
    uint32_t h[8];
    uint64_t total; /* bytes hashed so far */
    uint8_t buf[FR_SHA256_BLOCK];
    size_t blen;
} fr_sha256;

void fr_sha256_init(fr_sha256 *s);
/* Hashes len more bytes of p (p may be NULL when len is 0). */
void fr_sha256_update(fr_sha256 *s, const void *p, size_t len);
/* Writes the 32-byte digest to out; s must be re-initialised to reuse. */
void fr_sha256_final(fr_sha256 *s, uint8_t out[FR_SHA256_LEN]);

/* One-shot SHA-256 of len bytes. */
void fr_sha256_digest(const void *p, size_t len, uint8_t out[FR_SHA256_LEN]);

/* HMAC-SHA256 of the concatenation of n message parts (msg[i], len[i]) under
 * key (any length; key may be NULL when key_len is 0). */
void fr_hmac_sha256(const void *key, size_t key_len, const void *const *msg,
                    const size_t *len, size_t n, uint8_t out[FR_SHA256_LEN]);

/* Whether a and b (n bytes each) are equal, in time that depends on n only. */
bool fr_ct_equal(const void *a, const void *b, size_t n);

#endif /* FR_COMM_SHA256_H */
