/*
 * Unit tests of the error texts and names (serialization/errors.c) against
 * the one table they come from, FRPC_ERROR_TABLE in
 * serialization/fabrpc_errors.h: every code has its own text and its own
 * name, 0 is success, and any other number is unknown, never NULL. Each
 * test is its own Check case; the names are in the table at the end.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "serialization/fabrpc_errors.h"

#include "check_main.h"

/* The table as data: the enum value, its name without "FRPC_", its text. */
static const struct {
    int code;
    const char *name;
    const char *text;
} codes[] = {
#define ROW(name, value, text) {FRPC_##name, #name, text},
    FRPC_ERROR_TABLE(ROW)
#undef ROW
};
#define NCODES (sizeof(codes) / sizeof(codes[0]))

/* The code just past the most negative one in the table. */
static int past_the_table(void)
{
    int min = 0;
    for (size_t i = 0; i < NCODES; i++)
        if (codes[i].code < min)
            min = codes[i].code;
    return min - 1;
}

START_TEST(codes_are_negative_and_distinct)
{
    for (size_t i = 0; i < NCODES; i++) {
        ck_assert_msg(codes[i].code < 0, "FRPC_%s = %d", codes[i].name,
                      codes[i].code);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(codes[i].code != codes[j].code,
                          "FRPC_%s and FRPC_%s are both %d", codes[i].name,
                          codes[j].name, codes[i].code);
    }
}
END_TEST

START_TEST(every_code_has_its_table_text)
{
    for (size_t i = 0; i < NCODES; i++) {
        const char *t = frpc_strerror(codes[i].code);
        ck_assert_ptr_nonnull(t);
        ck_assert_msg(strcmp(t, codes[i].text) == 0, "FRPC_%s: '%s'",
                      codes[i].name, t);
        ck_assert_msg(t[0] != '\0', "FRPC_%s has an empty text",
                      codes[i].name);
        ck_assert_str_ne(t, "success");
        ck_assert_str_ne(t, "unknown error");
    }
}
END_TEST

START_TEST(texts_are_distinct)
{
    for (size_t i = 0; i < NCODES; i++)
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(frpc_strerror(codes[i].code),
                                 frpc_strerror(codes[j].code)) != 0,
                          "FRPC_%s and FRPC_%s share the text '%s'",
                          codes[i].name, codes[j].name,
                          frpc_strerror(codes[i].code));
}
END_TEST

START_TEST(every_name_is_frpc_and_the_code_name)
{
    for (size_t i = 0; i < NCODES; i++) {
        char want[64];
        snprintf(want, sizeof(want), "FRPC_%s", codes[i].name);
        const char *n = frpc_err_name(codes[i].code);
        ck_assert_ptr_nonnull(n);
        ck_assert_str_eq(n, want);
        ck_assert_str_ne(n, "FRPC_EUNKNOWN");
    }
}
END_TEST

START_TEST(zero_is_success)
{
    ck_assert_int_eq(FRPC_OK, 0);
    ck_assert_str_eq(frpc_err_name(0), "FRPC_OK");
    ck_assert_str_eq(frpc_strerror(0), "success");
}
END_TEST

START_TEST(unknown_codes_are_named_unknown)
{
    const int unknown[] = {1, 17, INT_MAX, past_the_table(), -9999, INT_MIN};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        const char *t = frpc_strerror(unknown[i]);
        ck_assert_msg(t != NULL, "frpc_strerror(%d) is NULL", unknown[i]);
        ck_assert_str_eq(t, "unknown error");
        ck_assert_str_eq(frpc_err_name(unknown[i]), "FRPC_EUNKNOWN");
    }
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"codes are negative and distinct", codes_are_negative_and_distinct},
        {"every code has its table text", every_code_has_its_table_text},
        {"texts are distinct", texts_are_distinct},
        {"every name is FRPC_ and the code name",
         every_name_is_frpc_and_the_code_name},
        {"0 is FRPC_OK, success", zero_is_success},
        {"unknown codes are FRPC_EUNKNOWN, unknown error",
         unknown_codes_are_named_unknown},
    };
    return fr_run_tests("errors", tests, sizeof(tests) / sizeof(tests[0]), 10);
}
