/*
 * Reassembly of parted frames (comm/parts.h): a frame comes out whole and
 * byte for byte, from parts in any order and interleaved with other
 * frames, its header last; a part that contradicts its frame, lies outside it or names a
 * frame too long is refused with its frame; a source that starts more
 * frames than it may have in the making loses the oldest, counted; and
 * random streams of good and bad parts never crash it or leak a frame.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "comm/parts.h"
#include "serialization/fabrpc_errors.h"

#include "check_main.h"

#define MAXF 16384
/* The head the fabric gives (its envelope's header): a whole has it last. */
#define HEAD 48

static uint8_t frame_byte(uint64_t id, size_t i)
{
    return (uint8_t)(i * 31u + id * 7u);
}

/* Adds bytes [off, off+len) of frame id (total bytes) from src. */
static int add(fr_parts *p, uint32_t src, uint64_t id, size_t total,
               size_t off, size_t len, uint8_t **whole)
{
    uint8_t *b = malloc(len ? len : 1);
    for (size_t i = 0; i < len; i++)
        b[i] = frame_byte(id, off + i);
    int rc = fr_parts_add(p, src, id, total, off, b, len, whole);
    free(b);
    return rc;
}

/* The frame's byte at w[j] of a whole laid out with its first head bytes
 * last (parts.h). */
static size_t frame_index(size_t j, size_t total, size_t head)
{
    return j < total - head ? j + head : j - (total - head);
}

static void assert_whole_head(const uint8_t *w, uint64_t id, size_t total,
                              size_t head)
{
    ck_assert_ptr_nonnull(w);
    /* One assertion for the frame: each ck_assert writes Check's mark to
     * its pipe, and a byte-by-byte check made this test 4 minutes long
     * under TSan. */
    size_t j = 0;
    while (j < total && w[j] == frame_byte(id, frame_index(j, total, head)))
        j++;
    ck_assert_msg(j == total, "byte %zu of frame %llu", j,
                  (unsigned long long)id);
}

static void assert_whole(const uint8_t *w, uint64_t id, size_t total)
{
    assert_whole_head(w, id, total, HEAD);
}

START_TEST(parts_in_any_order_make_the_frame)
{
    fr_parts *p = fr_parts_new(4, MAXF, HEAD);
    uint8_t *w = NULL;
    /* in order */
    ck_assert_int_eq(add(p, 1, 7, 5000, 0, 4048, &w), 0);
    ck_assert_uint_eq(fr_parts_pending(p), 1);
    ck_assert_int_eq(add(p, 1, 7, 5000, 4048, 952, &w), 1);
    assert_whole(w, 7, 5000);
    free(w);
    /* backwards, three parts */
    w = NULL;
    ck_assert_int_eq(add(p, 2, 8, 9000, 8096, 904, &w), 0);
    ck_assert_int_eq(add(p, 2, 8, 9000, 4048, 4048, &w), 0);
    ck_assert_int_eq(add(p, 2, 8, 9000, 0, 4048, &w), 1);
    assert_whole(w, 8, 9000);
    free(w);
    /* two frames of one source interleaved, and the same id from another
     * source kept apart */
    uint8_t *w1 = NULL, *w2 = NULL, *w3 = NULL;
    ck_assert_int_eq(add(p, 0, 1, 6000, 0, 3000, &w1), 0);
    ck_assert_int_eq(add(p, 0, 2, 7000, 0, 3500, &w2), 0);
    ck_assert_int_eq(add(p, 3, 1, 6000, 3000, 3000, &w3), 0);
    ck_assert_int_eq(add(p, 0, 2, 7000, 3500, 3500, &w2), 1);
    ck_assert_int_eq(add(p, 0, 1, 6000, 3000, 3000, &w1), 1);
    ck_assert_int_eq(add(p, 3, 1, 6000, 0, 3000, &w3), 1);
    assert_whole(w1, 1, 6000);
    assert_whole(w2, 2, 7000);
    assert_whole(w3, 1, 6000);
    free(w1);
    free(w2);
    free(w3);
    ck_assert_uint_eq(fr_parts_pending(p), 0);
    ck_assert_uint_eq(fr_parts_dropped(p), 0);
    fr_parts_free(p);
}
END_TEST

START_TEST(a_part_in_conflict_drops_its_frame)
{
    fr_parts *p = fr_parts_new(2, MAXF, HEAD);
    uint8_t *w = NULL;
    /* another total */
    ck_assert_int_eq(add(p, 0, 1, 6000, 0, 3000, &w), 0);
    ck_assert_int_eq(add(p, 0, 1, 6001, 3000, 3000, &w), FRPC_EPROTO);
    ck_assert_uint_eq(fr_parts_pending(p), 0);
    /* an overlap: the bytes would add up with a hole left */
    ck_assert_int_eq(add(p, 0, 2, 6000, 0, 3000, &w), 0);
    ck_assert_int_eq(add(p, 0, 2, 6000, 2999, 3000, &w), FRPC_EPROTO);
    ck_assert_int_eq(add(p, 0, 2, 6000, 3000, 3000, &w), 0); /* anew */
    ck_assert_uint_eq(fr_parts_pending(p), 1);
    /* outside the whole, or the whole over the limit */
    ck_assert_int_eq(add(p, 0, 2, 6000, 5999, 2, &w), FRPC_EPROTO);
    ck_assert_uint_eq(fr_parts_pending(p), 0);
    ck_assert_int_eq(add(p, 0, 3, MAXF + 1, 0, 100, &w), FRPC_EPROTO);
    ck_assert_int_eq(add(p, 0, 3, 100, 100, 1, &w), FRPC_EPROTO);
    ck_assert_int_eq(add(p, 2, 3, 100, 0, 10, &w), FRPC_EPROTO); /* src */
    ck_assert_uint_eq(fr_parts_dropped(p), 3);
    /* too many parts */
    for (unsigned i = 0; i < FR_PARTS_MAX; i++)
        ck_assert_int_eq(add(p, 1, 9, HEAD + 2 * FR_PARTS_MAX, i, 1, &w), 0);
    ck_assert_int_eq(add(p, 1, 9, HEAD + 2 * FR_PARTS_MAX, FR_PARTS_MAX, 1,
                         &w), FRPC_EPROTO);
    ck_assert_uint_eq(fr_parts_dropped(p), 4);
    /* a whole shorter than its head: no frame is */
    ck_assert_int_eq(add(p, 1, 10, HEAD - 1, 0, 10, &w), FRPC_EPROTO);
    ck_assert_uint_eq(fr_parts_pending(p), 0);
    ck_assert_ptr_null(w);
    /* bad arguments */
    ck_assert_int_eq(fr_parts_add(NULL, 0, 1, 10, 0, "x", 1, &w),
                     FRPC_EINVAL);
    ck_assert_int_eq(fr_parts_add(p, 0, 1, 10, 0, "x", 0, &w), FRPC_EINVAL);
    ck_assert_int_eq(fr_parts_add(p, 0, 1, 10, 0, NULL, 1, &w), FRPC_EINVAL);
    ck_assert_ptr_null(fr_parts_new(0, 10, 0));
    ck_assert_ptr_null(fr_parts_new(1, 0, 0));
    ck_assert_ptr_null(fr_parts_new(1, 10, 11)); /* head over the limit */
    fr_parts_free(p);
}
END_TEST

START_TEST(too_many_frames_in_the_making_evict_the_oldest)
{
    fr_parts *p = fr_parts_new(2, MAXF, HEAD);
    uint8_t *w = NULL;
    for (uint64_t id = 1; id <= FR_PARTS_PER_SOURCE; id++)
        ck_assert_int_eq(add(p, 0, id, 200, 0, 100, &w), 0);
    ck_assert_int_eq(add(p, 0, 1, 200, 100, 50, &w), 0); /* 1 is fresh */
    ck_assert_int_eq(add(p, 0, 100, 200, 0, 100, &w), 0); /* evicts 2 */
    ck_assert_uint_eq(fr_parts_dropped(p), 1);
    ck_assert_uint_eq(fr_parts_pending(p), FR_PARTS_PER_SOURCE);
    ck_assert_int_eq(add(p, 0, 1, 200, 150, 50, &w), 1);
    assert_whole(w, 1, 200);
    free(w);
    w = NULL;
    /* 2's second half starts a frame anew: not whole */
    ck_assert_int_eq(add(p, 0, 2, 200, 100, 100, &w), 0);
    /* another source is not affected; a lost source's frames go quietly */
    ck_assert_int_eq(add(p, 1, 5, 200, 0, 100, &w), 0);
    fr_parts_drop_source(p, 0);
    ck_assert_uint_eq(fr_parts_pending(p), 1);
    ck_assert_uint_eq(fr_parts_dropped(p), 1);
    ck_assert_int_eq(add(p, 1, 5, 200, 100, 100, &w), 1);
    assert_whole(w, 5, 200);
    free(w);
    fr_parts_drop_source(p, 7); /* out of range: nothing */
    fr_parts_free(p);
}
END_TEST

/* The head moves to the end whichever parts carry it, also a part that
 * holds part of it and part of the rest; head 0 keeps the frame as it is;
 * a frame of its head alone is whole. */
START_TEST(the_head_goes_last)
{
    fr_parts *p = fr_parts_new(1, MAXF, HEAD);
    uint8_t *w = NULL;
    ck_assert_int_eq(add(p, 0, 1, 5000, 100, 4900, &w), 0);
    ck_assert_int_eq(add(p, 0, 1, 5000, 30, 70, &w), 0); /* across it */
    ck_assert_int_eq(add(p, 0, 1, 5000, 0, 30, &w), 1);
    assert_whole_head(w, 1, 5000, HEAD);
    /* the payload starts the buffer: the frame's byte HEAD */
    ck_assert_uint_eq(w[0], frame_byte(1, HEAD));
    ck_assert_uint_eq(w[5000 - HEAD], frame_byte(1, 0));
    free(w);
    w = NULL;
    ck_assert_int_eq(add(p, 0, 2, HEAD, 0, HEAD, &w), 1);
    assert_whole_head(w, 2, HEAD, HEAD);
    free(w);
    fr_parts_free(p);

    p = fr_parts_new(1, MAXF, 0);
    w = NULL;
    ck_assert_int_eq(add(p, 0, 3, 5000, 4048, 952, &w), 0);
    ck_assert_int_eq(add(p, 0, 3, 5000, 0, 4048, &w), 1);
    assert_whole_head(w, 3, 5000, 0);
    free(w);
    fr_parts_free(p);
}
END_TEST

/* Random parts, some from frames cut right, some wrong, shuffled: every
 * frame cut right and not evicted comes out whole and exact; the table
 * ends empty once each frame is finished or dropped. */
START_TEST(random_parts_never_crash_or_leak)
{
    uint64_t seed = 0x1234567ull + (uint64_t)_i;
    enum { FRAMES = 12, MAXP = 8 };
    struct { uint32_t src; uint64_t id; size_t total, off, len; } part[FRAMES * MAXP];
    size_t n = 0;
    fr_parts *p = fr_parts_new(3, MAXF, HEAD);
    for (uint64_t f = 1; f <= FRAMES; f++) {
        size_t total = 49 + fr_xorshift64(&seed) % (MAXF - 48);
        unsigned k = 1 + (unsigned)(fr_xorshift64(&seed) % MAXP);
        size_t off = 0;
        for (unsigned i = 0; i < k && off < total; i++) {
            size_t len = i + 1 == k ? total - off
                                    : 1 + fr_xorshift64(&seed) % (total - off);
            if (fr_xorshift64(&seed) % 10 == 0) /* a broken part */
                len += fr_xorshift64(&seed) % 3;
            part[n].src = (uint32_t)(f % 3);
            part[n].id = f;
            part[n].total = total;
            part[n].off = off;
            part[n].len = len ? len : 1;
            n++;
            off += len;
        }
    }
    for (size_t i = n; i > 1; i--) { /* shuffle */
        size_t j = fr_xorshift64(&seed) % i;
        __typeof__(part[0]) t = part[i - 1];
        part[i - 1] = part[j];
        part[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t *w = NULL;
        int rc = add(p, part[i].src, part[i].id, part[i].total, part[i].off,
                     part[i].len, &w);
        ck_assert(rc == 0 || rc == 1 || rc == FRPC_EPROTO);
        if (rc == 1) {
            assert_whole(w, part[i].id, part[i].total);
            free(w);
        }
    }
    for (uint32_t s = 0; s < 3; s++)
        fr_parts_drop_source(p, s);
    ck_assert_uint_eq(fr_parts_pending(p), 0);
    fr_parts_free(p);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"parts in any order, interleaved, make their frames byte for byte",
         parts_in_any_order_make_the_frame},
        {"a part in conflict with its frame, outside it or too long drops "
         "the frame",
         a_part_in_conflict_drops_its_frame},
        {"a source with too many frames in the making loses the oldest, "
         "counted",
         too_many_frames_in_the_making_evict_the_oldest},
        {"a whole has its head last, the rest first", the_head_goes_last},
        {"random and broken parts never crash or leak",
         random_parts_never_crash_or_leak, .loop_end = 200},
    };
    return fr_run_tests("parts", tests, sizeof(tests) / sizeof(tests[0]), 60);
}
