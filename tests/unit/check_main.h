/*
 * The main() of every Check unit test: a table of readable test names, one
 * Check case per test (forked, with a timeout), run with CK_NORMAL so Check
 * prints "100%: Checks: N, Failures: 0, Errors: 0". Header-only; each test
 * file ends with a main that holds its table and one call:
 *
 *     int main(void)
 *     {
 *         const fr_test_case tests[] = {
 *             {"late response after timeout is dropped", late_response},
 *             {"store get waits for a set", get_waits, 30, &server},
 *             {"each source wins over later ones", priority, .loop_end = 5},
 *         };
 *         return fr_run_tests("suite", tests, sizeof(tests) / sizeof(tests[0]),
 *                             60);
 *     }
 *
 * Also here: fr_xorshift64, for tests that feed pseudo-random input.
 *
 * The table cannot be static: START_TEST makes each test a pointer variable,
 * which is not a constant expression.
 */
#ifndef FR_TESTS_CHECK_MAIN_H
#define FR_TESTS_CHECK_MAIN_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

/* A checked fixture: run in the forked test process, around the test.
 * Either function may be NULL. */
typedef struct {
    SFun setup;
    SFun teardown;
} fr_fixture;

/* One test. Only name and test are required; a field left zero takes the
 * default (the suite's timeout, no fixture, a plain test). */
typedef struct {
    const char *name;          /* readable; Check reports it as the case */
    const TTest *test;         /* the START_TEST name */
    int timeout_s;             /* > 0: overrides fr_run_tests's timeout_s */
    const fr_fixture *fixture; /* NULL: none */
    int loop_end;              /* > 0: a loop test, _i in [0, loop_end) */
} fr_test_case;

/* Runs the n cases as the suite suite_name, each as its own Check case with
 * a timeout of timeout_s seconds unless the case sets its own. Each case
 * gets the fixture every_case first if it is not NULL, then its own. Returns
 * 0 if every test passed, else 1 (an exit status for main). Blocks until
 * all have run; call it once, from main. */
static inline int fr_run_tests_with_fixture(const char *suite_name,
                                            const fr_test_case *cases,
                                            size_t n, int timeout_s,
                                            const fr_fixture *every_case)
{
    Suite *su = suite_create(suite_name);
    for (size_t i = 0; i < n; i++) {
        const fr_test_case *c = &cases[i];
        TCase *tc = tcase_create(c->name);
        tcase_set_timeout(tc, c->timeout_s > 0 ? c->timeout_s : timeout_s);
        if (every_case)
            tcase_add_checked_fixture(tc, every_case->setup,
                                      every_case->teardown);
        if (c->fixture)
            tcase_add_checked_fixture(tc, c->fixture->setup,
                                      c->fixture->teardown);
        if (c->loop_end > 0)
            tcase_add_loop_test(tc, c->test, 0, c->loop_end);
        else
            tcase_add_test(tc, c->test);
        suite_add_tcase(su, tc);
    }
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

/* fr_run_tests_with_fixture without a suite-wide fixture. */
static inline int fr_run_tests(const char *suite_name,
                               const fr_test_case *cases, size_t n,
                               int timeout_s)
{
    return fr_run_tests_with_fixture(suite_name, cases, n, timeout_s, NULL);
}

/* The next number of a xorshift64 sequence: deterministic random inputs for
 * tests, the same on every run. *state must start nonzero. */
static inline uint64_t fr_xorshift64(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

#endif /* FR_TESTS_CHECK_MAIN_H */
