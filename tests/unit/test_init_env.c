/*
 * frpc_init, one rank alone, under variables that a user's shell or
 * launcher leaves set the way users set them: libfabric's own FI_PROVIDER
 * in its two forms fabrpc must not misread (set to "", which fabrpc.h
 * says counts as unset; an exclusion list "^shm"), and hiding a provider
 * that fabrpc's own list names. Each test is its own
 * forked case, so its setenv stays there, and libfabric, which reads
 * FI_PROVIDER once per process, reads it fresh.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/fabrpc.h"

#include "check_main.h"

/* frpc_init as rank 0 of 1 with FI_PROVIDER set to fi_provider (and
 * FABRPC_PROVIDER unset): it must succeed. */
static frpc_agent *init_alone_under(const char *fi_provider)
{
    char err[1024] = "";
    frpc_agent *a = NULL;
    frpc_config c;
    setenv("FI_PROVIDER", fi_provider, 1);
    unsetenv("FABRPC_PROVIDER");
    frpc_config_init(&c);
    c.rank = 0;
    c.world_size = 1;
    c.errbuf = err;
    c.errbuf_len = sizeof(err);
    int rc = frpc_init(&c, &a);
    ck_assert_msg(rc == 0, "FI_PROVIDER=\"%s\": %s: %s", fi_provider,
                  frpc_err_name(rc), err);
    return a;
}

/* libfabric reads FI_PROVIDER="" as a list of no providers: init failed
 * with every provider "not available ... these came up: none". */
START_TEST(fi_provider_set_to_empty_counts_as_unset)
{
    frpc_agent *a = init_alone_under("");
    ck_assert_int_eq(frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 5000), 0);
}
END_TEST

/* "^shm" is libfabric's way to hide shm: fabrpc must run on what is
 * left, not refuse the list ("malformed provider list \"^shm\""). */
START_TEST(fi_provider_exclusions_leave_the_automatic_order)
{
    frpc_agent *a = init_alone_under("^shm");
    ck_assert_str_ne(frpc_provider(a), "shm");
    ck_assert_int_eq(frpc_has_backend(a, "shm"), 0);
    ck_assert_int_eq(frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 5000), 0);
}
END_TEST

/* FABRPC_PROVIDER (here config.providers) names shm, but an exported
 * FI_PROVIDER=tcp makes libfabric hide it from every caller: init fails,
 * and must say so, not "libfabric has no usable RDM endpoint for it". */
START_TEST(a_provider_hidden_by_fi_provider_is_named_so)
{
    char err[1024] = "";
    frpc_agent *a = NULL;
    frpc_config c;
    setenv("FI_PROVIDER", "tcp", 1);
    frpc_config_init(&c);
    c.rank = 0;
    c.world_size = 1;
    c.providers = "shm";
    c.errbuf = err;
    c.errbuf_len = sizeof(err);
    ck_assert_int_eq(frpc_init(&c, &a), FRPC_ENOBACKEND);
    ck_assert_msg(strstr(err, "shm: not available: hidden by FI_PROVIDER="
                              "\"tcp\"") && strstr(err, "add shm"),
                  "errbuf: %s", err);
}
END_TEST

/* Strict mode checks a list: with none it fails FRPC_EINVAL, and says
 * where a list may come from, FI_PROVIDER's included (with which strict
 * runs), though not its exclusion form. */
START_TEST(strict_without_a_list_is_refused_naming_each_source)
{
    char err[1024] = "";
    frpc_agent *a = NULL;
    frpc_config c;
    unsetenv("FABRPC_PROVIDER");
    setenv("FI_PROVIDER", "^udp", 1);
    frpc_config_init(&c);
    c.rank = 0;
    c.world_size = 1;
    c.strict = 1;
    c.errbuf = err;
    c.errbuf_len = sizeof(err);
    ck_assert_int_eq(frpc_init(&c, &a), FRPC_EINVAL);
    ck_assert_msg(strstr(err, "strict mode needs a provider list") &&
                      strstr(err, "FABRPC_PROVIDER") &&
                      strstr(err, "FI_PROVIDER;"),
                  "errbuf: %s", err);
    setenv("FI_PROVIDER", "tcp", 1);
    ck_assert_msg(frpc_init(&c, &a) == 0, "strict under FI_PROVIDER=tcp: "
                  "%s", err);
    ck_assert_str_eq(frpc_provider(a), "tcp");
    ck_assert_int_eq(frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 5000), 0);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"FI_PROVIDER set to \"\" counts as unset (libfabric's would hide "
         "every provider)",
         fi_provider_set_to_empty_counts_as_unset},
        {"FI_PROVIDER=^shm: the automatic order among what libfabric "
         "leaves",
         fi_provider_exclusions_leave_the_automatic_order},
        {"a provider FI_PROVIDER hides is named so when init fails",
         a_provider_hidden_by_fi_provider_is_named_so},
        {"strict without a provider list is refused, naming each source",
         strict_without_a_list_is_refused_naming_each_source},
    };
    return fr_run_tests("init env", tests, sizeof(tests) / sizeof(tests[0]),
                        60);
}
