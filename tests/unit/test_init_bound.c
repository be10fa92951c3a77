/*
 * frpc_init's bound (fabrpc.h, config.init_timeout_ms): the whole of
 * frpc_init, bootstrap and the barriers after it, ends by one deadline.
 * Rank 0 is a real agent on a thread of this process (tcp over
 * 127.0.0.1); rank 1 is played through the bootstrap store's own API
 * (comm/store.h): it joins late, publishes what the bootstrap reads (rank
 * 0's own address stands for its endpoint), and never comes to the init
 * barrier. Bounds are generous: a slow, loaded two-core machine passes.
 * And a rank that dies while the ranks connect (a real rank 1 in a child
 * process over shm, ended by a fault site) ends rank 0's frpc_init with
 * FRPC_EPEERLOST long before its init timeout, and rank 0 removes what
 * it left in /dev/shm.
 */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/clock.h"
#include "comm/fault.h"
#include "comm/store.h"
#include "rpc/fabrpc.h"
#include "serialization/envelope.h"

#include "check_main.h"

#define HOST "127.0.0.1"
/* Rank 1 has INIT_MS - LATE_MS for its four store operations before rank
 * 0 gives up (1.5 s was thin beside a sanitizer build); a second deadline
 * (LATE_MS + INIT_MS) stays past INIT_MS + SLACK_MS. */
#define INIT_MS 8000 /* rank 0's init_timeout_ms */
#define LATE_MS 4000 /* rank 1 joins the store this late */
#define SLACK_MS 3500 /* what a loaded machine may add to INIT_MS */

typedef struct rank0 {
    char addr[64];
    int rc;
    int64_t ms; /* how long frpc_init took */
    char err[1024];
} rank0;

static int64_t now_ms(void) { return (int64_t)(fr_now_ns() / 1000000u); }

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *run_rank0(void *arg)
{
    rank0 *r = arg;
    frpc_config cfg;
    frpc_agent *a = NULL;
    frpc_config_init(&cfg);
    cfg.rank = 0;
    cfg.world_size = 2;
    cfg.store_addr = r->addr;
    cfg.providers = "tcp";
    cfg.init_timeout_ms = INIT_MS;
    cfg.errbuf = r->err;
    cfg.errbuf_len = sizeof(r->err);
    int64_t t0 = now_ms();
    r->rc = frpc_init(&cfg, &a);
    r->ms = now_ms() - t0;
    if (a)
        frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 1000);
    return NULL;
}

/* A free port on 127.0.0.1 (bound, read, released). */
static uint16_t free_port(void)
{
    fr_store_server *s = NULL;
    fr_store_ident self = {.rank = 0, .world = 1, .version = FR_ENV_VERSION,
                           .role = FR_STORE_ROLE_MAIN};
    ck_assert_int_eq(fr_store_server_start(HOST, 0, &self, &s, NULL, 0), 0);
    uint16_t port = fr_store_server_port(s);
    fr_store_server_stop(s);
    return port;
}

START_TEST(init_ends_by_one_deadline_when_a_rank_never_reaches_the_barrier)
{
    rank0 r = {.rc = 1};
    pthread_t t;
    uint16_t port = free_port();
    snprintf(r.addr, sizeof(r.addr), HOST ":%u", port);
    ck_assert_int_eq(pthread_create(&t, NULL, run_rank0, &r), 0);

    /* Rank 1, LATE_MS into rank 0's init: what agree_provider and
     * exchange_addresses read of it, then nothing. */
    sleep_ms(LATE_MS);
    fr_store_ident me = {.rank = 1, .world = 2, .version = FR_ENV_VERSION,
                         .role = FR_STORE_ROLE_MAIN};
    fr_store_client *c = NULL;
    char err[256] = "";
    int rc = fr_store_connect(HOST, port, 5000, &me, &c, err, sizeof(err));
    ck_assert_msg(rc == 0, "rank 1's store connection: %d %s", rc, err);
    char info[128], host[64] = "h";
    gethostname(host, sizeof(host) - 1);
    snprintf(info, sizeof(info), "tcp\n%s\nnot-this-host\n%d", host,
             (int)getpid());
    ck_assert_int_eq(fr_store_set(c, "info/1", info, strlen(info)), 0);
    void *addr = NULL;
    size_t len = 0;
    rc = fr_store_get(c, "addr/0", INIT_MS, &addr, &len);
    ck_assert_msg(rc == 0, "rank 0's address: %d", rc);
    ck_assert_int_eq(fr_store_set(c, "addr/1", addr, len), 0);
    free(addr);

    pthread_join(t, NULL);
    fprintf(stderr, "frpc_init: %s after %lld ms (init_timeout_ms %d): %s\n",
            frpc_err_name(r.rc), (long long)r.ms, INIT_MS, r.err);
    ck_assert_int_eq(r.rc, FRPC_EBOOTSTRAP);
    /* Before one deadline: the barrier's own INIT_MS after LATE_MS. */
    ck_assert_msg(r.ms < INIT_MS + SLACK_MS,
                  "frpc_init took %lld ms, init_timeout_ms %d",
                  (long long)r.ms, INIT_MS);
    fr_store_close(c);
}
END_TEST

/* Removes the /dev/shm names that start with prefix (what a killed rank
 * may leave: its endpoint's region, its doorbell): how many there were. */
static int unlink_prefixed(const char *prefix)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int n = 0;
    if (!d)
        return 0;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            char name[300];
            snprintf(name, sizeof(name), "/%s", e->d_name);
            fprintf(stderr, "left in /dev/shm: %s\n", e->d_name);
            shm_unlink(name);
            n++;
        }
    closedir(d);
    return n;
}

#define DIES_INIT_MS 30000 /* rank 0 would wait this long for a dead rank */
#define DIES_BOUND_MS 15000 /* it must end well before */

/* One of 2 ranks over shm, meeting at the store at addr. */
static void shm_rank(frpc_config *cfg, int rank, const char *addr)
{
    frpc_config_init(cfg);
    cfg->rank = rank;
    cfg->world_size = 2;
    cfg->store_addr = addr;
    cfg->providers = "shm";
    cfg->init_timeout_ms = DIES_INIT_MS;
}

START_TEST(a_rank_dying_while_the_ranks_connect_ends_init_at_once)
{
    char job[64], prefix[80];
    snprintf(job, sizeof(job), "initdies%d", (int)getpid());
    snprintf(prefix, sizeof(prefix), "fabrpc_%s_", job);
    setenv("FABRPC_JOB_ID", job, 1);
    rank0 r = {.rc = 1};
    uint16_t port = free_port();
    snprintf(r.addr, sizeof(r.addr), HOST ":%u", port);

    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        /* Rank 1: a real agent, ended as it starts to connect. */
        frpc_config cfg;
        frpc_agent *a = NULL;
        shm_rank(&cfg, 1, r.addr);
        fr_fault_arm(FR_FAULT_CONNECT_DIES, 1);
        frpc_init(&cfg, &a);
        _exit(3); /* not reached: the fault ends the process */
    }
    frpc_config cfg;
    frpc_agent *a = NULL;
    shm_rank(&cfg, 0, r.addr);
    cfg.errbuf = r.err;
    cfg.errbuf_len = sizeof(r.err);
    int64_t t0 = now_ms();
    r.rc = frpc_init(&cfg, &a);
    r.ms = now_ms() - t0;
    if (a)
        frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 1000);
    /* Rank 0 removed what rank 1 left, its process ended but not reaped
     * yet (a launcher reaps when it looks). */
    int left = unlink_prefixed(prefix);
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    fprintf(stderr, "frpc_init: %s after %lld ms (init_timeout_ms %d): %s\n",
            frpc_err_name(r.rc), (long long)r.ms, DIES_INIT_MS, r.err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 9,
                  "rank 1 did not end at the fault (status 0x%x)", status);
    ck_assert_int_eq(r.rc, FRPC_EPEERLOST);
    ck_assert_msg(strstr(r.err, "rank 1 died"), "message: %s", r.err);
    ck_assert_msg(r.ms < DIES_BOUND_MS, "frpc_init took %lld ms",
                  (long long)r.ms);
    ck_assert_msg(left == 0, "%d name(s) of the job left in /dev/shm", left);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"frpc_init ends by one deadline when a rank never reaches the "
         "barrier",
         init_ends_by_one_deadline_when_a_rank_never_reaches_the_barrier},
        {"a rank that dies while the ranks connect ends the others' "
         "frpc_init at once with FRPC_EPEERLOST, not at the init timeout",
         a_rank_dying_while_the_ranks_connect_ends_init_at_once},
    };
    return fr_run_tests("init bound", tests, sizeof(tests) / sizeof(tests[0]),
                        60);
}
