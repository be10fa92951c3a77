/*
 * Unit tests of fr_copy_out (comm/copy_out.c): whatever the length and
 * the alignment of either side, the destination holds the source's bytes
 * and not one byte around it changes (the streaming loop's head, body
 * and tail, on both sides of its 4096-byte threshold).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "comm/copy_out.h"

#include "check_main.h"

#define GUARD 64
#define FILL 0xa5

/* Copies len bytes from src + soff to dst + doff in buffers with guard
 * bytes around, and checks the copy and the guards. */
static void one(size_t len, size_t soff, size_t doff, uint64_t *seed)
{
    unsigned char *src = malloc(len + soff + 1);
    unsigned char *dst = malloc(len + doff + 2 * GUARD);
    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(dst);
    for (size_t i = 0; i < len + soff + 1; i++)
        src[i] = (unsigned char)fr_xorshift64(seed);
    memset(dst, FILL, len + doff + 2 * GUARD);
    fr_copy_out(dst + GUARD + doff, src + soff, len);
    ck_assert_msg(memcmp(dst + GUARD + doff, src + soff, len) == 0,
                  "len %zu, src +%zu, dst +%zu: bytes differ", len, soff,
                  doff);
    for (size_t i = 0; i < GUARD + doff; i++)
        ck_assert_msg(dst[i] == FILL, "len %zu: byte %zu before changed",
                      len, GUARD + doff - i);
    for (size_t i = GUARD + doff + len; i < len + doff + 2 * GUARD; i++)
        ck_assert_msg(dst[i] == FILL, "len %zu: byte %zu after changed",
                      len, i - (GUARD + doff + len));
    free(src);
    free(dst);
}

START_TEST(small_and_around_threshold)
{
    uint64_t seed = 1;
    static const size_t lens[] = {0,    1,    15,   16,   17,   63,
                                  64,   65,   4095, 4096, 4097, 4111,
                                  4159, 4160, 8191, 8192, 8193};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        for (size_t soff = 0; soff < 17; soff++)
            for (size_t doff = 0; doff < 17; doff++)
                one(lens[i], soff, doff, &seed);
}
END_TEST

START_TEST(large)
{
    uint64_t seed = 2;
    static const size_t lens[] = {65536, 65536 + 48, 1 << 20,
                                  (1 << 20) + 13, 16u << 20};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        one(lens[i], 0, 0, &seed);
        one(lens[i], 3, 9, &seed);
    }
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"every length near the threshold, every alignment",
         small_and_around_threshold},
        {"large blocks, aligned and not", large},
    };
    return fr_run_tests("copy_out", tests, sizeof(tests) / sizeof(tests[0]),
                        60);
}
