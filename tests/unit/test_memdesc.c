/*
 * Unit tests of memory descriptors (comm/memdesc.c): what one rank encodes
 * another of the same job decodes to the same fields; every byte of the
 * format and the check value is checked, so truncated, padded, random,
 * tampered and other jobs' bytes are refused with their own codes, and a
 * rank outside the job is FRPC_ENORANK.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "comm/memdesc.h"

#include "check_main.h"

#define TOKEN 0x5eed5eed12345678ull

static const fr_memdesc sample = {.rank = 3, .access = FR_MEMDESC_READ,
                                  .addr = 0x7f0012345000ull, .key = 42,
                                  .len = 1u << 20, .region = 42,
                                  .slot = 0x0102};

START_TEST(round_trip)
{
    uint8_t b[FR_MEMDESC_SIZE];
    fr_memdesc d;
    fr_memdesc_encode(&sample, TOKEN, b);
    ck_assert_int_eq(fr_memdesc_decode(b, sizeof(b), TOKEN, 4, &d), 0);
    ck_assert_uint_eq(d.rank, 3);
    ck_assert_uint_eq(d.access, FR_MEMDESC_READ);
    ck_assert_uint_eq(d.addr, sample.addr);
    ck_assert_uint_eq(d.key, 42);
    ck_assert_uint_eq(d.len, 1u << 20);
    ck_assert_uint_eq(d.region, 42);
    ck_assert_uint_eq(d.slot, 0x0102);
    ck_assert_uint_eq(d.flags, 0);
}
END_TEST

/* The flag "served by messages" (emulated transfers) travels; a flag
 * bit no version knows is a format error. */
START_TEST(the_messages_flag_round_trips_unknown_flags_are_eproto)
{
    uint8_t b[FR_MEMDESC_SIZE];
    fr_memdesc d, emu = sample;
    emu.flags = FR_MEMDESC_F_MESSAGES;
    fr_memdesc_encode(&emu, TOKEN, b);
    ck_assert_int_eq(fr_memdesc_decode(b, sizeof(b), TOKEN, 4, &d), 0);
    ck_assert_uint_eq(d.flags, FR_MEMDESC_F_MESSAGES);
    emu.flags = 2;
    fr_memdesc_encode(&emu, TOKEN, b);
    ck_assert_int_eq(fr_memdesc_decode(b, sizeof(b), TOKEN, 4, &d),
                     FRPC_EPROTO);
}
END_TEST

START_TEST(wrong_sizes_are_eproto)
{
    uint8_t b[FR_MEMDESC_SIZE + 1];
    fr_memdesc d;
    fr_memdesc_encode(&sample, TOKEN, b);
    ck_assert_int_eq(fr_memdesc_decode(b, FR_MEMDESC_SIZE - 1, TOKEN, 4, &d),
                     FRPC_EPROTO);
    ck_assert_int_eq(fr_memdesc_decode(b, FR_MEMDESC_SIZE + 1, TOKEN, 4, &d),
                     FRPC_EPROTO);
    ck_assert_int_eq(fr_memdesc_decode(b, 0, TOKEN, 4, &d), FRPC_EPROTO);
    ck_assert_int_eq(fr_memdesc_decode(NULL, FR_MEMDESC_SIZE, TOKEN, 4, &d),
                     FRPC_EPROTO);
}
END_TEST

/* Every format byte (magic, version, access, reserved) changed alone is
 * EPROTO; every other byte changed alone fails the check value. */
START_TEST(every_byte_counts)
{
    uint8_t good[FR_MEMDESC_SIZE], b[FR_MEMDESC_SIZE];
    fr_memdesc d;
    fr_memdesc_encode(&sample, TOKEN, good);
    for (int i = 0; i < FR_MEMDESC_SIZE; i++) {
        memcpy(b, good, sizeof(b));
        b[i] ^= 0x80;
        int rc = fr_memdesc_decode(b, sizeof(b), TOKEN, 4, &d);
        int format = i < 8 || (i >= 48 && i < 56);
        ck_assert_msg(rc == (format ? FRPC_EPROTO : FRPC_EACCES),
                      "byte %d flipped: %d", i, rc);
    }
}
END_TEST

/* The header: in bytes 0-7 and 48-55, a bit no descriptor sets is
 * FRPC_EPROTO; the access and flag bits a descriptor may carry are
 * covered by the check value, so flipping one is FRPC_EACCES. */
START_TEST(every_fixed_bit_counts_access_and_flag_bits_by_the_check)
{
    uint8_t good[FR_MEMDESC_SIZE], b[FR_MEMDESC_SIZE];
    fr_memdesc d;
    fr_memdesc_encode(&sample, TOKEN, good);
    int bytes[16], n = 0;
    for (int i = 0; i < 8; i++)
        bytes[n++] = i;
    for (int i = 48; i < 56; i++)
        bytes[n++] = i;
    for (int k = 0; k < n; k++) {
        for (int bit = 0; bit < 8; bit++) {
            int i = bytes[k];
            memcpy(b, good, sizeof(b));
            b[i] ^= (uint8_t)(1u << bit);
            int carried = (i == 5 && (1u << bit) & (FR_MEMDESC_READ |
                                                     FR_MEMDESC_WRITE)) ||
                          (i == 6 && (1u << bit) == FR_MEMDESC_F_MESSAGES);
            int rc = fr_memdesc_decode(b, sizeof(b), TOKEN, 4, &d);
            ck_assert_msg(rc == (carried ? FRPC_EACCES : FRPC_EPROTO),
                          "byte %d bit %d flipped: %d", i, bit, rc);
        }
    }
}
END_TEST

START_TEST(another_jobs_is_eacces)
{
    uint8_t b[FR_MEMDESC_SIZE];
    fr_memdesc d;
    fr_memdesc_encode(&sample, TOKEN + 1, b);
    ck_assert_int_eq(fr_memdesc_decode(b, sizeof(b), TOKEN, 4, &d),
                     FRPC_EACCES);
}
END_TEST

START_TEST(rank_outside_the_job_is_enorank)
{
    uint8_t b[FR_MEMDESC_SIZE];
    fr_memdesc d, far = sample;
    far.rank = 4;
    fr_memdesc_encode(&far, TOKEN, b);
    ck_assert_int_eq(fr_memdesc_decode(b, sizeof(b), TOKEN, 4, &d),
                     FRPC_ENORANK);
    ck_assert_int_eq(fr_memdesc_decode(b, sizeof(b), TOKEN, 5, &d), 0);
}
END_TEST

START_TEST(random_bytes_never_decode)
{
    uint8_t b[FR_MEMDESC_SIZE];
    fr_memdesc d;
    srand(7);
    for (int n = 0; n < 10000; n++) {
        for (int i = 0; i < FR_MEMDESC_SIZE; i++)
            b[i] = (uint8_t)rand();
        if (n % 2) /* half with the right magic, to reach the check */
            memcpy(b, "FRMD\1\1\0\0", 8);
        ck_assert_int_ne(fr_memdesc_decode(b, sizeof(b), TOKEN, 4, &d), 0);
    }
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"encode then decode gives the fields", round_trip},
        {"the messages flag round-trips; unknown flags are FRPC_EPROTO",
         the_messages_flag_round_trips_unknown_flags_are_eproto},
        {"wrong sizes are FRPC_EPROTO", wrong_sizes_are_eproto},
        {"every byte is format or checked", every_byte_counts},
        {"every bit of the fixed bytes is FRPC_EPROTO but the access and "
         "flag bits, which the check covers",
         every_fixed_bit_counts_access_and_flag_bits_by_the_check},
        {"another job's descriptor is FRPC_EACCES", another_jobs_is_eacces},
        {"a rank outside the job is FRPC_ENORANK",
         rank_outside_the_job_is_enorank},
        {"random bytes never decode", random_bytes_never_decode},
    };
    return fr_run_tests("memdesc", tests, sizeof(tests) / sizeof(tests[0]),
                        30);
}
