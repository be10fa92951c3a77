/*
 * Requests taken once per source and id (rpc/dedup.h): a second delivery
 * of an id is seen, in any order of arrival within the window, per
 * source; ids far behind the highest are taken as seen; ids jumping far
 * ahead clear the window.
 */
#include <check.h>
#include <stdlib.h>

#include "rpc/dedup.h"

#include "check_main.h"

START_TEST(each_id_is_taken_once_in_any_order)
{
    fr_dedup d;
    ck_assert_int_eq(fr_dedup_init(&d, 3), 0);
    /* 3 sources, ids 1..20000 each, in a shuffled order, then all again. */
    enum { N = 20000 };
    uint64_t *ids = malloc(N * sizeof(*ids));
    for (uint64_t i = 0; i < N; i++)
        ids[i] = i + 1;
    srand(7);
    for (size_t i = N - 1; i > 0; i--) {
        size_t j = (size_t)rand() % (i + 1);
        uint64_t t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < N; i++)
            for (uint32_t s = 0; s < 3; s++)
                ck_assert_int_eq(fr_dedup_seen(&d, s, ids[i]), pass);
    /* A source out of range is never held back. */
    ck_assert_int_eq(fr_dedup_seen(&d, 3, 1), 0);
    ck_assert_int_eq(fr_dedup_seen(&d, 3, 1), 0);
    free(ids);
    fr_dedup_destroy(&d);
}
END_TEST

START_TEST(the_window_moves_with_the_highest_id)
{
    fr_dedup d;
    ck_assert_int_eq(fr_dedup_init(&d, 1), 0);
    ck_assert_int_eq(fr_dedup_seen(&d, 0, 5), 0);
    /* Ahead by less than the window: the ids between are still new. */
    uint64_t top = 5 + FR_DEDUP_WINDOW - 1;
    ck_assert_int_eq(fr_dedup_seen(&d, 0, top), 0);
    ck_assert_int_eq(fr_dedup_seen(&d, 0, 6), 0);
    ck_assert_int_eq(fr_dedup_seen(&d, 0, 6), 1);
    ck_assert_int_eq(fr_dedup_seen(&d, 0, 5), 1); /* seen, still inside */
    /* One further: 5 falls out of the window and counts as seen; the id
     * that shares its bit is new. */
    ck_assert_int_eq(fr_dedup_seen(&d, 0, top + 1), 0);
    ck_assert_int_eq(fr_dedup_seen(&d, 0, 5), 1);
    ck_assert_int_eq(fr_dedup_seen(&d, 0, top + 1), 1);
    /* Far ahead: the whole window is new again below it. */
    uint64_t far = top + 10 * (uint64_t)FR_DEDUP_WINDOW;
    ck_assert_int_eq(fr_dedup_seen(&d, 0, far), 0);
    ck_assert_int_eq(fr_dedup_seen(&d, 0, far - 1), 0);
    ck_assert_int_eq(fr_dedup_seen(&d, 0, far - FR_DEDUP_WINDOW + 1), 0);
    ck_assert_int_eq(fr_dedup_seen(&d, 0, far - FR_DEDUP_WINDOW), 1);
    ck_assert_int_eq(fr_dedup_seen(&d, 0, far - 1), 1);
    fr_dedup_destroy(&d);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"each id of each source is taken once, in any order",
         each_id_is_taken_once_in_any_order},
        {"the window moves with the highest id; older ids count as seen",
         the_window_moves_with_the_highest_id},
    };
    return fr_run_tests("dedup", tests, sizeof(tests) / sizeof(tests[0]), 60);
}
