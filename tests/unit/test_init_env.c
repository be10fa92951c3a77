/*
 * frpc_init, one rank alone, under variables that a user's shell or
 * launcher leaves set the way users set them: libfabric's own FI_PROVIDER
 * in its two forms fabrpc must not misread (set to "", which fabrpc.h
 * says counts as unset; an exclusion list "^shm"), and hiding a provider
 * that fabrpc's own list names. Each test is its own
 * forked case, so its setenv stays there, and libfabric, which reads
 * FI_PROVIDER once per process, reads it fresh. Also the store address
 * as fabrpc.h's store_addr describes its failures: rank 1 of 2, whose
 * frpc_init looks for rank 0's store.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "rpc/fabrpc.h"

#include "check_main.h"
#include "other_program.h"

/* A config for rank 0 of 1 whose errors go to err (emptied). */
static void alone_config(frpc_config *c, char *err, size_t errlen)
{
    frpc_config_init(c);
    c->rank = 0;
    c->world_size = 1;
    c->errbuf = err;
    c->errbuf_len = errlen;
    err[0] = '\0';
}

/* frpc_init as rank 0 of 1 with FI_PROVIDER set to fi_provider (and
 * FABRPC_PROVIDER unset): it must succeed. */
static frpc_agent *init_alone_under(const char *fi_provider)
{
    char err[1024] = "";
    frpc_agent *a = NULL;
    frpc_config c;
    setenv("FI_PROVIDER", fi_provider, 1);
    unsetenv("FABRPC_PROVIDER");
    alone_config(&c, err, sizeof(err));
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
    alone_config(&c, err, sizeof(err));
    c.providers = "shm";
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
    alone_config(&c, err, sizeof(err));
    c.strict = 1;
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

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* frpc_init as rank of 2 with the store at addr (config.store_addr, or
 * the environment when NULL) and init_timeout_ms; it must fail with
 * want_rc and a message holding needle. Returns how long it took, ms. */
static long long init_fails(int rank, const char *addr, int init_timeout_ms,
                            int want_rc, const char *needle)
{
    char err[1024] = "";
    frpc_agent *a = NULL;
    frpc_config c;
    frpc_config_init(&c);
    c.rank = rank;
    c.world_size = 2;
    c.store_addr = addr;
    c.init_timeout_ms = init_timeout_ms;
    c.errbuf = err;
    c.errbuf_len = sizeof(err);
    long long t0 = now_ms();
    int rc = frpc_init(&c, &a);
    long long ms = now_ms() - t0;
    ck_assert_msg(rc == want_rc, "%s: %s (%s), not %s", addr ? addr : "env",
                  frpc_err_name(rc), err, frpc_err_name(want_rc));
    ck_assert_ptr_null(a);
    ck_assert_msg(strstr(err, needle), "'%s' not in: %s", needle, err);
    return ms;
}

static long long init_rank1_fails(const char *addr, int init_timeout_ms,
                                  int want_rc, const char *needle)
{
    return init_fails(1, addr, init_timeout_ms, want_rc, needle);
}

/* Before: 60 s of "the bootstrap store did not answer in time". */
START_TEST(another_program_on_the_store_port_fails_init_at_once)
{
    other_program w;
    char addr[32];
    other_program_start(&w);
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)w.port);
    long long ms = init_rank1_fails(addr, 60000, FRPC_EBOOTSTRAP,
                                    "not a fabrpc bootstrap store: its "
                                    "answer began 'HTTP/1.0 200 OK.'");
    ck_assert_int_lt(ms, 30000); /* not its init timeout */
    other_program_stop(&w);
}
END_TEST

/* Rank 0 cannot listen there, and says what holds the port (it said
 * only "Address already in use"). */
START_TEST(another_program_on_the_store_port_is_named_to_rank_0)
{
    other_program w;
    char addr[32];
    other_program_start(&w);
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)w.port);
    long long ms = init_fails(0, addr, 60000, FRPC_EBOOTSTRAP,
                              "not a fabrpc bootstrap store: its answer "
                              "began 'HTTP/1.0 200 OK.'");
    ck_assert_int_lt(ms, 30000); /* not its init timeout */
    init_fails(0, addr, 60000, FRPC_EBOOTSTRAP, "cannot listen on");
    other_program_stop(&w);
}
END_TEST

/* The header and README: a program that accepts and says nothing, or
 * closes each connection, looks like a stopped or ending rank 0 and is
 * waited for until init_timeout_ms, then FRPC_EBOOTSTRAP naming the
 * address; rank 0, which cannot listen there, fails within about a
 * second (not its init timeout, 60 s here). */
START_TEST(a_silent_or_closing_program_on_the_store_port_is_waited_for)
{
    const int hows[2] = {OTHER_SILENT, OTHER_CLOSES};
    for (int i = 0; i < 2; i++) {
        other_program w;
        char addr[32];
        other_program_start_as(&w, hows[i]);
        snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)w.port);
        long long ms = init_fails(1, addr, 1500, FRPC_EBOOTSTRAP, addr);
        ck_assert_msg(ms >= 1400, "%s program: rank 1 failed after %lld "
                      "ms, before its init timeout",
                      i ? "a closing" : "a silent", ms);
        ms = init_fails(0, addr, 60000, FRPC_EBOOTSTRAP, "cannot listen on");
        ck_assert_int_lt(ms, 30000);
        other_program_stop(&w);
    }
}
END_TEST

/* Before: every try's name lookup failed until the init timeout. */
START_TEST(a_store_host_that_is_no_host_fails_init_at_once)
{
    init_rank1_fails("[127.0.0.1:5]:80", 60000, FRPC_EINVAL,
                     "neither a host name nor an IP address");
    setenv("MASTER_ADDR", " node1", 1);
    setenv("MASTER_PORT", "29500", 1);
    unsetenv("FABRPC_STORE_ADDR");
    init_rank1_fails(NULL, 60000, FRPC_EINVAL,
                     "MASTER_ADDR=' node1': ' node1' is neither");
}
END_TEST

/* A well-formed name may resolve later (DNS coming up): tried until
 * init_timeout_ms, then FRPC_EBOOTSTRAP naming the address. ".invalid"
 * never resolves (RFC 2606). */
START_TEST(a_store_name_that_does_not_resolve_is_tried_until_the_timeout)
{
    long long ms = init_rank1_fails("no-such-host.invalid:29500", 1500,
                                    FRPC_EBOOTSTRAP,
                                    "no-such-host.invalid:29500");
    ck_assert_int_ge(ms, 1400);
}
END_TEST

/* An empty element of a provider list names no provider: refused like a
 * typo, naming where the list came from; spaces around a name are not
 * an empty element. */
START_TEST(an_empty_provider_name_is_refused)
{
    const char *bad[] = {"tcp,,shm", "shm,", ",tcp", " , tcp", ","};
    char err[512];
    frpc_agent *a = NULL;
    frpc_config c;
    unsetenv("FI_PROVIDER");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        for (int env = 0; env < 2; env++) {
            alone_config(&c, err, sizeof(err));
            if (env) {
                setenv("FABRPC_PROVIDER", bad[i], 1);
            } else {
                unsetenv("FABRPC_PROVIDER");
                c.providers = bad[i];
            }
            ck_assert_int_eq(frpc_init(&c, &a), FRPC_EINVAL);
            ck_assert_msg(strstr(err, env ? "FABRPC_PROVIDER=" :
                                            "config.providers=") &&
                              strstr(err, "empty provider name"),
                          "\"%s\": errbuf: %s", bad[i], err);
        }
    }
    unsetenv("FABRPC_PROVIDER");
    alone_config(&c, err, sizeof(err));
    c.providers = " tcp , shm ";
    ck_assert_msg(frpc_init(&c, &a) == 0, "\" tcp , shm \": %s", err);
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
        {"another program on the store's port fails frpc_init at once, "
         "quoting its answer",
         another_program_on_the_store_port_fails_init_at_once},
        {"another program on the store port is named to rank 0",
         another_program_on_the_store_port_is_named_to_rank_0},
        {"a silent or closing program on the store port is waited for "
         "until the init timeout; rank 0 fails within a second",
         a_silent_or_closing_program_on_the_store_port_is_waited_for},
        {"a store host that is neither a name nor an address fails "
         "frpc_init at once",
         a_store_host_that_is_no_host_fails_init_at_once},
        {"a store name that does not resolve is tried until the init "
         "timeout",
         a_store_name_that_does_not_resolve_is_tried_until_the_timeout},
        {"an empty provider name is refused", an_empty_provider_name_is_refused},
    };
    return fr_run_tests("init env", tests, sizeof(tests) / sizeof(tests[0]),
                        60);
}
