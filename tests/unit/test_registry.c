/*
 * Unit tests of the function registry (rpc/registry.c) and of the
 * provider choice (comm/providers.c), which need no network.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/providers.h"
#include "rpc/registry.h"
#include "serialization/envelope.h"

#include "check_main.h"

static void h1(frpc_request *r, void *u) { (void)r; (void)u; }
static void h2(frpc_request *r, void *u) { (void)r; (void)u; }

START_TEST(add_then_find_returns_the_entry)
{
    fr_registry r;
    int user;
    ck_assert_int_eq(fr_registry_init(&r), 0);
    ck_assert_int_eq(fr_registry_add(&r, fr_func_id("a"), "a", h1, &user, 0), 0);
    const fr_func *f = fr_registry_find(&r, fr_func_id("a"));
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(f->name, "a");
    ck_assert(f->handler == h1);
    ck_assert_ptr_eq(f->user, &user);
    ck_assert_ptr_null(fr_registry_find(&r, fr_func_id("b")));
    fr_registry_destroy(&r);
}
END_TEST

START_TEST(duplicate_name_is_refused)
{
    fr_registry r;
    fr_registry_init(&r);
    ck_assert_int_eq(fr_registry_add(&r, fr_func_id("a"), "a", h1, NULL, 0), 0);
    ck_assert_int_eq(fr_registry_add(&r, fr_func_id("a"), "a", h2, NULL, 0),
                     FRPC_EEXIST);
    /* the same name under another id is still the same name */
    ck_assert_int_eq(fr_registry_add(&r, 12345, "a", h2, NULL, 0), FRPC_EEXIST);
    ck_assert(fr_registry_find(&r, fr_func_id("a"))->handler == h1);
    fr_registry_destroy(&r);
}
END_TEST

START_TEST(id_collision_is_refused)
{
    fr_registry r;
    fr_registry_init(&r);
    ck_assert_int_eq(fr_registry_add(&r, 777, "first", h1, NULL, 0), 0);
    ck_assert_int_eq(fr_registry_add(&r, 777, "second", h2, NULL, 0),
                     FRPC_EEXIST);
    ck_assert_str_eq(fr_registry_find(&r, 777)->name, "first");
    fr_registry_destroy(&r);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    fr_registry r;
    char longname[FR_FUNC_NAME_MAX + 2];
    fr_registry_init(&r);
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    ck_assert_int_eq(fr_registry_add(&r, 1, "", h1, NULL, 0), FRPC_EINVAL);
    ck_assert_int_eq(fr_registry_add(&r, 1, NULL, h1, NULL, 0), FRPC_EINVAL);
    ck_assert_int_eq(fr_registry_add(&r, 1, "n", NULL, NULL, 0), FRPC_EINVAL);
    ck_assert_int_eq(fr_registry_add(&r, 0, "n", h1, NULL, 0), FRPC_EINVAL);
    ck_assert_int_eq(fr_registry_add(&r, 2, longname, h1, NULL, 0),
                     FRPC_EINVAL);
    longname[FR_FUNC_NAME_MAX] = '\0';
    ck_assert_int_eq(fr_registry_add(&r, 2, longname, h1, NULL, 0), 0);
    fr_registry_destroy(&r);
}
END_TEST

START_TEST(many_functions_survive_growth)
{
    fr_registry r;
    char name[32];
    fr_registry_init(&r);
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "fn_%d", i);
        ck_assert_int_eq(fr_registry_add(&r, fr_func_id(name), name, h1,
                                         (void *)(intptr_t)i, 0), 0);
    }
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "fn_%d", i);
        const fr_func *f = fr_registry_find(&r, fr_func_id(name));
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq((int)(intptr_t)f->user, i);
    }
    fr_registry_destroy(&r);
}
END_TEST

/* Lookups take no lock: readers racing a writer that grows the table
 * find every entry added before they looked, and nothing else. */
#define RACE_FUNCS 3000
static fr_registry race_reg;
static atomic_int race_added; /* entries 0..race_added-1 are in */

static uint64_t race_id(int i)
{
    char name[32];
    snprintf(name, sizeof(name), "race_%d", i);
    return fr_func_id(name);
}

static void *race_reader(void *arg)
{
    long misses = 0;
    (void)arg;
    while (atomic_load(&race_added) < RACE_FUNCS) {
        int n = atomic_load(&race_added);
        for (int i = n - 1; i >= 0 && i > n - 64; i--) {
            const fr_func *f = fr_registry_find(&race_reg, race_id(i));
            if (!f || f->id != race_id(i) || (int)(intptr_t)f->user != i)
                misses++;
        }
        if (fr_registry_find(&race_reg, race_id(RACE_FUNCS + 1)))
            misses++;
    }
    return (void *)misses;
}

START_TEST(lookups_race_growth)
{
    pthread_t th[3];
    char name[32];
    fr_registry_init(&race_reg);
    atomic_store(&race_added, 0);
    for (int t = 0; t < 3; t++)
        ck_assert_int_eq(pthread_create(&th[t], NULL, race_reader, NULL), 0);
    for (int i = 0; i < RACE_FUNCS; i++) {
        snprintf(name, sizeof(name), "race_%d", i);
        ck_assert_int_eq(fr_registry_add(&race_reg, race_id(i), name, h1,
                                         (void *)(intptr_t)i, 0), 0);
        atomic_store(&race_added, i + 1);
    }
    for (int t = 0; t < 3; t++) {
        void *misses;
        pthread_join(th[t], &misses);
        ck_assert_msg(misses == NULL, "reader %d: %ld wrong lookups", t,
                      (long)(intptr_t)misses);
    }
    fr_registry_destroy(&race_reg);
}
END_TEST

START_TEST(provider_list_parsing)
{
    char n[FR_BACKEND_MAX][FR_BACKEND_NAME];
    ck_assert_int_eq(fr_backends_parse(" shm , tcp;ofi_rxm,shm,^udp", n,
                                       FR_BACKEND_MAX), 2);
    ck_assert_str_eq(n[0], "shm");
    ck_assert_str_eq(n[1], "tcp");
    ck_assert_int_eq(fr_backends_parse("", n, FR_BACKEND_MAX), FRPC_EINVAL);
    ck_assert_int_eq(fr_backends_parse(",,", n, FR_BACKEND_MAX), FRPC_EINVAL);
    ck_assert_int_eq(fr_backends_parse(
                         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", n,
                         FR_BACKEND_MAX), FRPC_EINVAL);
    /* A name past the 16th distinct one is not dropped unread (a typo
     * there passed frpc_init unnoticed): the list is refused. Repeats
     * past it are no new name. */
    char list[512] = "";
    for (int i = 0; i < FR_BACKEND_MAX; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "p%d,",
                 i);
    char repeated[600];
    snprintf(repeated, sizeof(repeated), "%sp0,P1", list);
    ck_assert_int_eq(fr_backends_parse(repeated, n, FR_BACKEND_MAX),
                     FR_BACKEND_MAX);
    strcat(list, "typo");
    ck_assert_int_eq(fr_backends_parse(list, n, FR_BACKEND_MAX), FRPC_ETOOBIG);
}
END_TEST

START_TEST(choice_is_first_common_provider_in_rank0_order)
{
    const char *lists[] = {"shm,verbs,tcp", "shm,tcp", "tcp,shm"};
    char out[32];
    ck_assert_int_eq(fr_backends_choose(lists[0], lists, 3, 1, out,
                                        sizeof(out)), 0);
    ck_assert_str_eq(out, "shm");
    /* shm only when every rank is on one host */
    ck_assert_int_eq(fr_backends_choose(lists[0], lists, 3, 0, out,
                                        sizeof(out)), 0);
    ck_assert_str_eq(out, "tcp");
    const char *none[] = {"shm", "tcp"};
    ck_assert_int_eq(fr_backends_choose(none[0], none, 2, 1, out,
                                        sizeof(out)), FRPC_ENOBACKEND);
    /* a name must match a whole list element, not a prefix */
    const char *pre[] = {"tcpx", "tcp"};
    ck_assert_int_eq(fr_backends_choose("tcp", pre, 2, 1, out, sizeof(out)),
                     FRPC_ENOBACKEND);
}
END_TEST

START_TEST(strict_check_names_each_missing_provider)
{
    fr_backends bs;
    char err[1024];
    ck_assert_int_eq(fr_backends_discover(&bs, "tcp,verbs,nosuchprov"), 0);
    ck_assert_int_eq(bs.n, 3);
    ck_assert_int_eq(fr_backends_check_strict(&bs, err, sizeof(err)),
                     FRPC_ENOBACKEND);
    ck_assert_ptr_nonnull(strstr(err, "verbs did not come up"));
    ck_assert_ptr_nonnull(strstr(err, "nosuchprov did not come up"));
    ck_assert_ptr_null(strstr(err, "tcp did not come up"));
    char rep[1024];
    size_t need = fr_backends_report(&bs, "tcp", rep, sizeof(rep));
    ck_assert_uint_eq(need, strlen(rep));
    ck_assert_ptr_nonnull(strstr(rep, "tcp: up (active)"));
    ck_assert_ptr_nonnull(strstr(rep, "verbs: not available"));
    fr_backends_free(&bs);
}
END_TEST

/* len 1 has room for the NUL alone: the report must still end there. */
START_TEST(report_is_terminated_at_every_length)
{
    fr_backends bs;
    char rep[1024];
    ck_assert_int_eq(fr_backends_discover(&bs, "tcp,nosuchprov"), 0);
    size_t need = fr_backends_report(&bs, "tcp", NULL, 0);
    ck_assert_uint_gt(need, 1);
    for (size_t len = 1; len <= need + 1; len++) {
        memset(rep, 'x', sizeof(rep));
        ck_assert_uint_eq(fr_backends_report(&bs, "tcp", rep, len), need);
        ck_assert_uint_eq(strlen(rep), len - 1 < need ? len - 1 : need);
    }
    fr_backends_free(&bs);
}
END_TEST

/* A reason fills its whole buffer (FI_PROVIDER hiding a provider names
 * FI_PROVIDER and every provider that came up): its line is reported
 * whole, and the length returned is what was written. */
START_TEST(report_keeps_a_long_reason_whole)
{
    fr_backends bs;
    char rep[2048];
    ck_assert_int_eq(fr_backends_discover(&bs, "tcp,nosuchprov"), 0);
    fr_backend *b = &bs.b[1];
    memset(b->reason, 'r', sizeof(b->reason) - 1);
    b->reason[sizeof(b->reason) - 1] = '\0';
    size_t need = fr_backends_report(&bs, "tcp", rep, sizeof(rep));
    ck_assert_uint_eq(need, strlen(rep));
    ck_assert_ptr_nonnull(strstr(rep, b->reason));
    ck_assert_uint_eq(fr_backends_report(&bs, "tcp", NULL, 0), need);
    fr_backends_free(&bs);
}
END_TEST

/* What in a user's list names no provider is kept, named, as an
 * unknown provider (frpc_init fails naming it): not dropped ("tcp,^udp"
 * ran on tcp) nor failing the list without saying which. Case is
 * libfabric's: any. */
START_TEST(user_list_keeps_what_is_no_name_as_unknown)
{
    fr_backends bs;
    ck_assert_int_eq(
        fr_backends_discover(&bs, "TCP,^udp, ;rxm,"
                                  "averyveryverylongtypoprovidernamexyz"),
        0);
    ck_assert_int_eq(bs.n, 4);
    ck_assert_str_eq(bs.b[0].name, "tcp");
    ck_assert_int_eq(bs.b[0].unknown, 0);
    const char *bad[3] = {"'^udp'", "';rxm'", "'averyveryverylongtypoprovide...'"};
    for (int i = 1; i < 4; i++) {
        ck_assert_int_eq(bs.b[i].unknown, 1);
        ck_assert_int_eq(bs.b[i].up, 0);
        ck_assert_msg(strstr(bs.b[i].reason, bad[i - 1]) &&
                          strstr(bs.b[i].reason, "unknown provider"),
                      "reason: %s", bs.b[i].reason);
    }
    ck_assert_ptr_nonnull(strstr(bs.b[1].reason, "FI_PROVIDER's"));
    fr_backends_free(&bs);
    /* fabrpc's own lists (rank 0's order) still skip them. */
    char n[FR_BACKEND_MAX][FR_BACKEND_NAME];
    ck_assert_int_eq(fr_backends_parse("SHM,^udp,;rxm", n, FR_BACKEND_MAX), 1);
    ck_assert_str_eq(n[0], "shm");
}
END_TEST

/* FI_PROVIDER as libfabric reads it: "tcp, shm" hides shm (" shm" is
 * not a name libfabric has), and the reason says so; fabrpc trimmed the
 * space and blamed no one. In a child of its own: libfabric reads
 * FI_PROVIDER once, at its first use in a process. */
START_TEST(fi_provider_names_are_read_as_written)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("FI_PROVIDER", "tcp, shm", 1);
        fr_backends bs;
        int ok = fr_backends_discover(&bs, "shm") == 0 && bs.n == 1 &&
                 !bs.b[0].up && !bs.b[0].unknown &&
                 strstr(bs.b[0].reason, "hidden by FI_PROVIDER=\"tcp, shm\"") &&
                 strstr(bs.b[0].reason, "spaces included");
        if (!ok)
            fprintf(stderr, "shm: up %d, reason: %s\n", bs.b[0].up,
                    bs.b[0].reason);
        fr_backends_free(&bs);
        _exit(ok ? 0 : 1);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"add then find returns the entry", add_then_find_returns_the_entry},
        {"a user's provider list keeps what is no name as unknown",
         user_list_keeps_what_is_no_name_as_unknown},
        {"FI_PROVIDER's names are read as libfabric reads them",
         fi_provider_names_are_read_as_written},
        {"duplicate name is refused", duplicate_name_is_refused},
        {"id collision is refused", id_collision_is_refused},
        {"bad arguments are refused", bad_arguments_are_refused},
        {"many functions survive growth", many_functions_survive_growth},
        {"lookups race growth", lookups_race_growth},
        {"provider list parsing", provider_list_parsing},
        {"choice is first common provider in rank 0 order",
         choice_is_first_common_provider_in_rank0_order},
        {"strict check names each missing provider",
         strict_check_names_each_missing_provider},
        {"report is terminated at every length",
         report_is_terminated_at_every_length},
        {"report keeps a long reason whole",
         report_keeps_a_long_reason_whole},
    };
    return fr_run_tests("registry and providers", tests,
                        sizeof(tests) / sizeof(tests[0]), 30);
}
