/*
 * Unit tests of rank/world/store-address resolution (comm/bootenv.h). Each
 * test is its own case (Check forks it, so setenv stays in that process),
 * and a fixture clears every variable the resolver reads before each test.
 */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bootenv.h"

#include "check_main.h"

static const char *const all_vars[] = {
    "FABRPC_RANK", "FABRPC_WORLD_SIZE", "RANK", "WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "FABRPC_STORE_ADDR",
    "MASTER_ADDR", "MASTER_PORT"};

/* The rank/world pairs in priority order, each set to a distinct value. */
static const struct {
    const char *rank, *world, *rval, *wval, *source;
    int r, w;
} pairs[] = {
    {"FABRPC_RANK", "FABRPC_WORLD_SIZE", "1", "2", "FABRPC", 1, 2},
    {"RANK", "WORLD_SIZE", "2", "3", "torchrun", 2, 3},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "3", "4", "mpirun", 3, 4},
    {"PMI_RANK", "PMI_SIZE", "4", "5", "pmi", 4, 5},
    {"SLURM_PROCID", "SLURM_NTASKS", "5", "6", "slurm", 5, 6},
};
#define NPAIRS (sizeof(pairs) / sizeof(pairs[0]))

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof(all_vars) / sizeof(all_vars[0]); i++)
        unsetenv(all_vars[i]);
}

/* Every test starts from an environment without any of all_vars. */
static const fr_fixture clean_env = {clear_env, NULL};

/* Sets pairs[from..] so that every lower-priority source is present too. */
static void set_pairs_from(size_t from)
{
    for (size_t i = from; i < NPAIRS; i++) {
        setenv(pairs[i].rank, pairs[i].rval, 1);
        setenv(pairs[i].world, pairs[i].wval, 1);
    }
}

static fr_bootenv resolve_ok(int cfg_rank, int cfg_world, const char *addr)
{
    fr_bootenv be;
    char err[256] = "";
    int rc = fr_bootenv_resolve(cfg_rank, cfg_world, addr, &be, err,
                                sizeof(err));
    ck_assert_msg(rc == 0, "resolve: %d %s", rc, err);
    return be;
}

/* Resolving fails with FRPC_EINVAL and a message holding both needles. */
static void resolve_fails(int cfg_rank, int cfg_world, const char *addr,
                          const char *needle1, const char *needle2)
{
    fr_bootenv be;
    char err[256] = "";
    ck_assert_int_eq(fr_bootenv_resolve(cfg_rank, cfg_world, addr, &be, err,
                                        sizeof(err)), FRPC_EINVAL);
    ck_assert_msg(strstr(err, needle1), "'%s' not in: %s", needle1, err);
    ck_assert_msg(strstr(err, needle2), "'%s' not in: %s", needle2, err);
}

static void expect_rank(const fr_bootenv *be, int rank, int world,
                        const char *source)
{
    ck_assert_int_eq(be->rank, rank);
    ck_assert_int_eq(be->world_size, world);
    ck_assert_str_eq(be->source, source);
}

static void expect_store(const fr_bootenv *be, const char *host,
                         unsigned port, const char *source)
{
    ck_assert_str_eq(be->store_host, host);
    ck_assert_uint_eq(be->store_port, port);
    ck_assert_str_eq(be->store_source, source);
}

START_TEST(test_default)
{
    fr_bootenv be = resolve_ok(-1, -1, NULL);
    expect_rank(&be, 0, 1, "default");
    expect_store(&be, "127.0.0.1", 29500, "default");
    be = resolve_ok(-1, -1, ""); /* "" is "not given" */
    ck_assert_str_eq(be.store_source, "default");
}
END_TEST

START_TEST(test_config_wins)
{
    set_pairs_from(0);
    setenv("FABRPC_STORE_ADDR", "envhost:1", 1);
    fr_bootenv be = resolve_ok(6, 8, "cfghost:4242");
    expect_rank(&be, 6, 8, "config");
    expect_store(&be, "cfghost", 4242, "config");
}
END_TEST

/* Source _i wins over all the sources after it in the list. */
START_TEST(test_env_priority)
{
    set_pairs_from((size_t)_i);
    fr_bootenv be = resolve_ok(-1, -1, NULL);
    expect_rank(&be, pairs[_i].r, pairs[_i].w, pairs[_i].source);
    expect_store(&be, "127.0.0.1", 29500, "default");
}
END_TEST

START_TEST(test_empty_is_unset)
{
    set_pairs_from(4);
    setenv("RANK", "", 1);
    setenv("WORLD_SIZE", "", 1);
    setenv("FABRPC_STORE_ADDR", "", 1);
    fr_bootenv be = resolve_ok(-1, -1, NULL);
    expect_rank(&be, 5, 6, "slurm");
    expect_store(&be, "127.0.0.1", 29500, "default");
}
END_TEST

START_TEST(test_store_addr_sources)
{
    setenv("MASTER_ADDR", "master0", 1);
    setenv("MASTER_PORT", "29400", 1);
    /* torchrun's own store has MASTER_PORT: ours takes the next one */
    fr_bootenv be = resolve_ok(-1, -1, NULL);
    expect_store(&be, "master0", 29401, "MASTER_ADDR");

    setenv("MASTER_ADDR", "[fd00::7]", 1); /* brackets optional there */
    be = resolve_ok(-1, -1, NULL);
    expect_store(&be, "fd00::7", 29401, "MASTER_ADDR");
    setenv("MASTER_ADDR", "fd00::8", 1);
    be = resolve_ok(-1, -1, NULL);
    expect_store(&be, "fd00::8", 29401, "MASTER_ADDR");
    setenv("MASTER_PORT", "65535", 1);
    resolve_fails(-1, -1, NULL, "MASTER_PORT=65535", "MASTER_PORT+1");
    setenv("MASTER_PORT", "29400", 1);

    setenv("FABRPC_STORE_ADDR", "[::1]:29501", 1); /* wins over MASTER_* */
    be = resolve_ok(-1, -1, NULL);
    expect_store(&be, "::1", 29501, "FABRPC_STORE_ADDR");
}
END_TEST

START_TEST(test_bad_values)
{
    static const struct {
        const char *var, *val, *expect;
    } bad[] = {
        {"FABRPC_RANK", "abc", "FABRPC_RANK='abc' is not a decimal integer"},
        {"FABRPC_RANK", "-1", "FABRPC_RANK=-1 is out of range"},
        {"FABRPC_RANK", " 1", "FABRPC_RANK=' 1'"},
        {"FABRPC_RANK", "1 ", "FABRPC_RANK='1 '"},
        {"FABRPC_RANK", "+1", "FABRPC_RANK='+1'"},
        {"FABRPC_RANK", "-", "FABRPC_RANK='-'"},
        {"FABRPC_RANK", "0x1", "FABRPC_RANK='0x1'"},
        {"FABRPC_RANK", "4", "FABRPC_RANK=4 is not below FABRPC_WORLD_SIZE=4"},
        {"FABRPC_WORLD_SIZE", "0", "FABRPC_WORLD_SIZE=0 is out of range"},
        {"FABRPC_WORLD_SIZE", "65537",
         "FABRPC_WORLD_SIZE=65537 is out of range"},
        {"FABRPC_WORLD_SIZE", "99999999999999999999999",
         "FABRPC_WORLD_SIZE=99999999999999999999999 is out of range"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("FABRPC_RANK", "0", 1);
        setenv("FABRPC_WORLD_SIZE", "4", 1);
        setenv(bad[i].var, bad[i].val, 1);
        resolve_fails(-1, -1, NULL, bad[i].expect, bad[i].var);
    }
    clear_env();
    /* The largest world is fine. */
    setenv("SLURM_PROCID", "65535", 1);
    setenv("SLURM_NTASKS", "65536", 1);
    fr_bootenv be = resolve_ok(-1, -1, NULL);
    expect_rank(&be, 65535, 65536, "slurm");
    setenv("MASTER_ADDR", "h", 1);
    setenv("MASTER_PORT", "0", 1);
    resolve_fails(-1, -1, NULL, "MASTER_PORT=0", "out of range");
    setenv("MASTER_PORT", "65536", 1);
    resolve_fails(-1, -1, NULL, "MASTER_PORT=65536", "out of range");
    setenv("MASTER_PORT", "http", 1);
    resolve_fails(-1, -1, NULL, "MASTER_PORT='http'", "decimal");
}
END_TEST

START_TEST(test_bad_config)
{
    resolve_fails(4, 4, NULL, "config rank=4", "config world_size=4");
    resolve_fails(0, 0, NULL, "config world_size=0", "out of range");
    resolve_fails(0, 65537, NULL, "config world_size=65537", "out of range");
    resolve_fails(2, -1, NULL, "config rank=2 is set", "config world_size");
    resolve_fails(-1, 3, NULL, "config world_size=3 is set", "config rank");
    resolve_fails(0, 1, "nohostport", "config store_addr", "nohostport");
}
END_TEST

/* Only one half of pair _i is set: the rank half on even runs (_i / 2). */
START_TEST(test_half_set_pair)
{
    size_t p = (size_t)_i / 2;
    bool rank_half = _i % 2 == 0;
    set_pairs_from(p + 1); /* complete lower-priority sources do not help */
    setenv(rank_half ? pairs[p].rank : pairs[p].world,
           rank_half ? pairs[p].rval : pairs[p].wval, 1);
    resolve_fails(-1, -1, NULL, pairs[p].rank, pairs[p].world);
    resolve_fails(-1, -1, NULL, "is set but", "is not");
}
END_TEST

/* SLURM_PROCID alone: the message names both variables a world size may
 * come from. */
START_TEST(test_slurm_rank_alone_names_ntasks_and_nprocs)
{
    setenv("SLURM_PROCID", "0", 1);
    resolve_fails(-1, -1, NULL, "SLURM_NTASKS (or SLURM_NPROCS) is not",
                  "SLURM_PROCID=0 is set");
}
END_TEST

START_TEST(test_slurm_nprocs_stands_in_for_ntasks)
{
    setenv("SLURM_PROCID", "2", 1);
    setenv("SLURM_NPROCS", "3", 1); /* sbatch without -n: no SLURM_NTASKS */
    fr_bootenv be = resolve_ok(-1, -1, NULL);
    expect_rank(&be, 2, 3, "slurm");
    setenv("SLURM_NTASKS", "4", 1); /* SLURM_NTASKS wins when set */
    be = resolve_ok(-1, -1, NULL);
    expect_rank(&be, 2, 4, "slurm");
    unsetenv("SLURM_NTASKS");
    unsetenv("SLURM_NPROCS");
    resolve_fails(-1, -1, NULL, "SLURM_PROCID=2 is set", "SLURM_NTASKS");
}
END_TEST

START_TEST(test_half_set_master)
{
    setenv("MASTER_ADDR", "node3", 1);
    resolve_fails(-1, -1, NULL, "MASTER_ADDR=node3 is set", "MASTER_PORT");
    unsetenv("MASTER_ADDR");
    setenv("MASTER_PORT", "29500", 1);
    resolve_fails(-1, -1, NULL, "MASTER_PORT=29500 is set", "MASTER_ADDR");
}
END_TEST

START_TEST(test_addr_syntax)
{
    static const struct {
        const char *text, *host;
        unsigned port;
    } good[] = {
        {"node1:80", "node1", 80},
        {"10.1.2.3:65535", "10.1.2.3", 65535},
        {"[::1]:29500", "::1", 29500},
        {"[fe80::1%eth0]:1", "fe80::1%eth0", 1},
        {"[node2]:7", "node2", 7},
    };
    static const struct {
        const char *text, *expect;
    } bad[] = {
        {"::1:29500", "needs brackets"},
        {"fe80::1", "needs brackets"},
        {"node1", "not host:port"},
        {"node1:", "not host:port"},
        {"node1:0", "port=0 is out of range"},
        {"node1:65536", "port=65536 is out of range"},
        {"node1:-5", "port=-5 is out of range"},
        {"node1:x80", "port='x80'"},
        {"[::1]", "not host:port"},
        {"[::1]29500", "not host:port"},
        {"[::1:29500", "not host:port"},
        {":80", "host is empty"},
        {"[]:80", "host is empty"},
        {"a]b:80", "not host:port"},
        {" node1:80", "neither a host name nor an IP address"},
        {"node1 :80", "neither a host name nor an IP address"},
        {"no/de:80", "neither a host name nor an IP address"},
        {"[::1%]:80", "neither a host name nor an IP address"},
        {"[::1%e th]:80", "neither a host name nor an IP address"},
        {"[1:2]:80", "neither a host name nor an IP address"},
        {"[127.0.0.1:5]:80", "neither a host name nor an IP address"},
        {"", "not host:port"},
    };
    char host[FR_BOOTENV_MAX_HOST + 1], err[256];
    uint16_t port;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        ck_assert_int_eq(fr_bootenv_parse_addr("A", good[i].text, host,
                                               sizeof(host), &port, err,
                                               sizeof(err)), 0);
        ck_assert_str_eq(host, good[i].host);
        ck_assert_uint_eq(port, good[i].port);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ck_assert_int_eq(fr_bootenv_parse_addr("A", bad[i].text, host,
                                               sizeof(host), &port, err,
                                               sizeof(err)), FRPC_EINVAL);
        ck_assert_msg(strstr(err, bad[i].expect) && strncmp(err, "A", 1) == 0,
                      "'%s': %s", bad[i].text, err);
    }
    /* Hosts of 255 bytes fit, of 256 do not. */
    char longaddr[400];
    memset(longaddr, 'h', 255);
    strcpy(longaddr + 255, ":80");
    ck_assert_int_eq(fr_bootenv_parse_addr("A", longaddr, host, sizeof(host),
                                           &port, NULL, 0), 0);
    ck_assert_uint_eq(strlen(host), 255);
    memset(longaddr, 'h', 256);
    strcpy(longaddr + 256, ":80");
    ck_assert_int_eq(fr_bootenv_parse_addr("A", longaddr, host, sizeof(host),
                                           &port, err, sizeof(err)),
                     FRPC_EINVAL);
    ck_assert_msg(strstr(err, "longer than 255 bytes"), "%s", err);
    /* MASTER_ADDR's host is checked alike, at once: not by name
     * resolution failing until the init timeout. */
    static const char *const bad_master[] = {"127.0.0.1:5", "[::1", " node1",
                                             "node1\n", "::1]"};
    setenv("MASTER_PORT", "29500", 1);
    for (size_t i = 0; i < sizeof(bad_master) / sizeof(bad_master[0]); i++) {
        setenv("MASTER_ADDR", bad_master[i], 1);
        resolve_fails(-1, -1, NULL, "MASTER_ADDR=",
                      "neither a host name nor an IP address");
    }
    static const char *const good_master[] = {"::1", "[::1]", "node-3.cluster",
                                              "10.0.0.7"};
    for (size_t i = 0; i < sizeof(good_master) / sizeof(good_master[0]); i++) {
        setenv("MASTER_ADDR", good_master[i], 1);
        fr_bootenv be = resolve_ok(-1, -1, NULL);
        ck_assert_uint_eq(be.store_port, 29501);
    }
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    /* Through the environment. */
    setenv("FABRPC_STORE_ADDR", "::1:29500", 1);
    resolve_fails(-1, -1, NULL, "FABRPC_STORE_ADDR='::1:29500'", "brackets");
}
END_TEST

START_TEST(test_getenv_long)
{
    long v = 7;
    int found = -1;
    char err[128] = "";
    ck_assert_int_eq(fr_bootenv_getenv_long("FABRPC_RANK", 0, 10, &v, &found,
                                            err, sizeof(err)), 0);
    ck_assert_int_eq(found, 0);
    ck_assert_int_eq(v, 7);
    setenv("FABRPC_RANK", "-3", 1);
    ck_assert_int_eq(fr_bootenv_getenv_long("FABRPC_RANK", -5, 10, &v, &found,
                                            err, sizeof(err)), 0);
    ck_assert_int_eq(found, 1);
    ck_assert_int_eq(v, -3);
    ck_assert_int_eq(fr_bootenv_getenv_long("FABRPC_RANK", 0, 10, &v, &found,
                                            err, sizeof(err)), FRPC_EINVAL);
    ck_assert_str_eq(err, "FABRPC_RANK=-3 is out of range (0..10)");
    ck_assert_int_eq(fr_bootenv_parse_long("X", "-9223372036854775808",
                                           -9223372036854775807L - 1, 0, &v,
                                           NULL, 0), 0);
    ck_assert(v == -9223372036854775807L - 1);
    ck_assert_int_eq(fr_bootenv_parse_long("X", "9223372036854775808", 0,
                                           9223372036854775807L, &v, NULL, 0),
                     FRPC_EINVAL);
    ck_assert_int_eq(fr_bootenv_parse_long("X", NULL, 0, 1, &v, NULL, 0),
                     FRPC_EINVAL);
    ck_assert_int_eq(fr_bootenv_resolve(0, 1, NULL, NULL, NULL, 0),
                     FRPC_EINVAL);
}
END_TEST

/* A rank not below its world size still fails, but its rank, world and
 * store are filled, so that frpc_init can tell the job (and only then). */
START_TEST(test_rank_outside_keeps_the_store)
{
    fr_bootenv be;
    char err[256] = "";
    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "4000", 1);
    ck_assert_int_eq(fr_bootenv_resolve(-1, -1, NULL, &be, err, sizeof(err)),
                     FRPC_EINVAL);
    ck_assert_str_eq(err, "RANK=2 is not below WORLD_SIZE=2");
    ck_assert_int_eq(be.rank_outside, 1);
    ck_assert_int_eq(be.rank, 2);
    ck_assert_int_eq(be.world_size, 2);
    expect_store(&be, "127.0.0.1", 4001, "MASTER_ADDR");
    setenv("MASTER_PORT", "0", 1); /* no store to tell: not outside */
    ck_assert_int_eq(fr_bootenv_resolve(-1, -1, NULL, &be, err, sizeof(err)),
                     FRPC_EINVAL);
    ck_assert_int_eq(be.rank_outside, 0);
    ck_assert_str_eq(err, "RANK=2 is not below WORLD_SIZE=2");
    setenv("RANK", "-1", 1);
    ck_assert_int_eq(fr_bootenv_resolve(-1, -1, NULL, &be, err, sizeof(err)),
                     FRPC_EINVAL);
    ck_assert_int_eq(be.rank_outside, 0);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"nothing set: rank 0 of 1 at 127.0.0.1:29500", test_default},
        {"config values win over the environment", test_config_wins},
        {"each env source wins over the later ones", test_env_priority,
         .loop_end = (int)NPAIRS},
        {"an empty variable counts as unset", test_empty_is_unset},
        {"store address from MASTER_* and FABRPC_STORE_ADDR",
         test_store_addr_sources},
        {"bad values are refused naming the variable", test_bad_values},
        {"bad config values are refused", test_bad_config},
        {"a half-set pair is refused", test_half_set_pair,
         .loop_end = 2 * (int)NPAIRS},
        {"MASTER_ADDR without MASTER_PORT is refused", test_half_set_master},
        {"SLURM_NPROCS stands in for SLURM_NTASKS",
         test_slurm_nprocs_stands_in_for_ntasks},
        {"SLURM_PROCID alone names SLURM_NTASKS and SLURM_NPROCS",
         test_slurm_rank_alone_names_ntasks_and_nprocs},
        {"host:port and [v6addr]:port syntax", test_addr_syntax},
        {"integer helpers are strict", test_getenv_long},
        {"a rank not below its world size keeps the store to tell",
         test_rank_outside_keeps_the_store},
    };
    return fr_run_tests_with_fixture("bootenv", tests,
                                     sizeof(tests) / sizeof(tests[0]), 10,
                                     &clean_env);
}
