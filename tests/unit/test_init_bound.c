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
 * it left in /dev/shm. Rank 0 killed while rank 1 opens its second
 * (watch) store connection ends rank 1's frpc_init as soon as it next
 * asks its first connection, not at its init timeout. A rank killed
 * inside its own graceful frpc_shutdown, after the last barrier (rank 0
 * or rank 1, by a fault site), leaves no name in /dev/shm. A rank that
 * joined and then stopped (SIGSTOP, by a fault site) is named in rank 0's
 * message, with the step it never came to, at rank 0's init timeout.
 */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/clock.h"
#include "comm/fault.h"
#include "comm/shm_repair.h"
#include "comm/store.h"
#include "rpc/agent.h"
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

/* frpc_init of one tcp rank of world ranks: its code, time, message. */
static void init_tcp_rank(rank0 *r, int rank, int world, int init_ms)
{
    frpc_config cfg;
    frpc_agent *a = NULL;
    frpc_config_init(&cfg);
    cfg.rank = rank;
    cfg.world_size = world;
    cfg.store_addr = r->addr;
    cfg.providers = "tcp";
    cfg.init_timeout_ms = init_ms;
    cfg.errbuf = r->err;
    cfg.errbuf_len = sizeof(r->err);
    int64_t t0 = now_ms();
    r->rc = frpc_init(&cfg, &a);
    r->ms = now_ms() - t0;
    if (a)
        frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 1000);
}

static void *run_rank0(void *arg)
{
    init_tcp_rank(arg, 0, 2, INIT_MS);
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

/* Rank 0 gives its init up at its timeout (rank 1 never comes) while
 * rank 2, started later with a longer timeout, still waits on the store:
 * rank 0 left, nobody died, and the job did not start, so rank 2's init
 * ends FRPC_EBOOTSTRAP, not FRPC_EPEERLOST (pre-fix: "peer lost: rank 0
 * left the job"). */
#define GIVES_UP_MS 2000 /* rank 0's init timeout */
#define WAITS_MS 30000   /* rank 2's */

static void *run_rank0_of_3(void *arg)
{
    init_tcp_rank(arg, 0, 3, GIVES_UP_MS);
    return NULL;
}

START_TEST(a_rank_giving_up_its_init_ends_the_others_ebootstrap)
{
    rank0 r0 = {.rc = 1}, r2 = {.rc = 1};
    snprintf(r0.addr, sizeof(r0.addr), HOST ":%u", free_port());
    memcpy(r2.addr, r0.addr, sizeof(r2.addr));
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, run_rank0_of_3, &r0), 0);
    sleep_ms(GIVES_UP_MS / 4);
    init_tcp_rank(&r2, 2, 3, WAITS_MS);
    pthread_join(t, NULL);
    fprintf(stderr, "rank 0: %s after %lld ms: %s\nrank 2: %s after %lld "
            "ms: %s\n", frpc_err_name(r0.rc), (long long)r0.ms, r0.err,
            frpc_err_name(r2.rc), (long long)r2.ms, r2.err);
    ck_assert_int_eq(r0.rc, FRPC_EBOOTSTRAP);
    ck_assert_int_eq(r2.rc, FRPC_EBOOTSTRAP);
    ck_assert_msg(r2.ms < WAITS_MS / 2, "rank 2 waited %lld ms",
                  (long long)r2.ms);
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
#define WATCH_REFUSALS 1000000 /* more than any deadline allows */

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

/* One job of 2 shm ranks whose frpc_init a death ends: one rank is a
 * child process, the other runs here. */
typedef struct dying_job {
    const char *what; /* the call of the rank here that is timed */
    char prefix[80]; /* the job's /dev/shm names start so */
    rank0 r;         /* the rank that runs here */
    pid_t child;
} dying_job;

/* Names the job (tag and this pid), picks the store's port and forks
 * rank child_rank, which arms site (FR_FAULT_SITES: none) before its
 * frpc_init, or FR_FAULT_SHUTDOWN_DIES after it, before its graceful
 * frpc_shutdown. */
static void name_job(dying_job *j, const char *tag)
{
    char job[64];
    snprintf(job, sizeof(job), "%s%d", tag, (int)getpid());
    snprintf(j->prefix, sizeof(j->prefix), "fabrpc_%s_", job);
    j->what = "frpc_init";
    setenv("FABRPC_JOB_ID", job, 1);
    j->r.rc = 1;
    snprintf(j->r.addr, sizeof(j->r.addr), HOST ":%u", free_port());
}

static void start_dying_job(dying_job *j, const char *tag, int child_rank,
                            fr_fault_site site)
{
    name_job(j, tag);
    j->child = fork();
    ck_assert_int_ge(j->child, 0);
    if (j->child == 0) {
        frpc_config cfg;
        frpc_agent *a = NULL;
        shm_rank(&cfg, child_rank, j->r.addr);
        /* A death in shutdown needs a whole init first. */
        int in_init = site != FR_FAULT_SITES && site != FR_FAULT_SHUTDOWN_DIES;
        if (in_init)
            fr_fault_arm(site, 1);
        if (frpc_init(&cfg, &a) == 0 && site == FR_FAULT_SHUTDOWN_DIES) {
            fr_fault_arm(site, 1);
            frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, DIES_INIT_MS);
        }
        _exit(3); /* reached only if the call ends before the death */
    }
}

/* frpc_init of the other rank, here, then its frpc_shutdown: graceful
 * and timed when time_shutdown (init must succeed), else immediate. The
 * timed call's code, time and message in j->r. */
static void run_here(dying_job *j, int rank, int time_shutdown)
{
    frpc_config cfg;
    frpc_agent *a = NULL;
    shm_rank(&cfg, rank, j->r.addr);
    cfg.errbuf = j->r.err;
    cfg.errbuf_len = sizeof(j->r.err);
    int64_t t0 = now_ms();
    int rc = frpc_init(&cfg, &a);
    int64_t ms = now_ms() - t0;
    if (time_shutdown) {
        ck_assert_int_eq(rc, 0);
        j->what = "frpc_shutdown";
        t0 = now_ms();
        rc = frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, DIES_INIT_MS);
        ms = now_ms() - t0;
    } else if (a) {
        frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 1000);
    }
    j->r.rc = rc;
    j->r.ms = ms;
}

/* Counts and removes the names the job left, then reaps the child (after
 * the count: a launcher reaps when it looks, so the rank here cleaned
 * while the child was a zombie) and checks the rank here ended well
 * before its init timeout, without a name left. The child's wait status. */
static int end_dying_job(dying_job *j)
{
    int left = unlink_prefixed(j->prefix);
    int status = 0;
    ck_assert_int_eq(waitpid(j->child, &status, 0), j->child);
    fprintf(stderr, "%s: %s after %lld ms (timeout %d ms): %s\n", j->what,
            frpc_err_name(j->r.rc), (long long)j->r.ms, DIES_INIT_MS,
            j->r.err);
    ck_assert_msg(j->r.ms < DIES_BOUND_MS, "%s took %lld ms", j->what,
                  (long long)j->r.ms);
    ck_assert_msg(left == 0, "%d name(s) of the job left in /dev/shm", left);
    return status;
}

START_TEST(a_rank_dying_while_the_ranks_connect_ends_init_at_once)
{
    dying_job j;
    /* Rank 1: a real agent, ended by the fault as it starts to connect. */
    start_dying_job(&j, "initdies", 1, FR_FAULT_CONNECT_DIES);
    run_here(&j, 0, 0);
    int status = end_dying_job(&j);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 9,
                  "rank 1 did not end at the fault (status 0x%x)", status);
    ck_assert_int_eq(j.r.rc, FRPC_EPEERLOST);
    ck_assert_msg(strstr(j.r.err, "rank 1 died"), "message: %s", j.r.err);
}
END_TEST

/* libfabric 1.17's shm reads a sender's region, on its first message,
 * through the mapping the receiver's fi_av_insert made, and dereferences
 * it when that failed: a rank that sent, died and took its region's name
 * with it before the other mapped it killed the other by SIGSEGV (1 of
 * 300 term-in-init jobs of run_peer_lost). Rank 0 here maps late; rank 1
 * dies, with its exit handlers, once its first frames completed. frpc_init
 * keeps every send until every rank mapped every other, so rank 0 sees a
 * death, not a crash. */
/* Rank 1 dies at child_site (exit(9)) while rank 0, here, is made late
 * at late_site: rank 0's frpc_init must end FRPC_EPEERLOST, its message
 * naming rank 1. */
static void late_rank_sees_a_death(const char *tag, fr_fault_site child_site,
                                   fr_fault_site late_site)
{
    dying_job j;
    start_dying_job(&j, tag, 1, child_site);
    fr_fault_arm(late_site, 1); /* FR_FAULT_SITES: none */
    run_here(&j, 0, 0);
    fr_fault_arm(late_site, 0);
    int status = end_dying_job(&j);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 9,
                  "rank 1 did not end at the fault (status 0x%x)", status);
    ck_assert_msg(j.r.rc == FRPC_EPEERLOST, "frpc_init: %s: %s",
                  frpc_err_name(j.r.rc), j.r.err);
    ck_assert_msg(strstr(j.r.err, "rank 1 died"), "message: %s", j.r.err);
}

START_TEST(a_rank_dying_after_its_first_sends_does_not_crash_a_late_mapper)
{
    late_rank_sees_a_death("sentdies", FR_FAULT_CONNECT_SENT_DIES,
                           FR_FAULT_ADDR_LATE);
}
END_TEST

/* The header: a rank other than 0 that dies during init ends the others'
 * frpc_init FRPC_EPEERLOST. One that dies just after the first barrier
 * takes its doorbell's name with it, and a rank that maps the bells after
 * that found one missing: FRPC_ETRANSPORT ("cannot map a peer's
 * doorbell", 5 of 700 term-in-init jobs of run_peer_lost). */
START_TEST(a_rank_dying_after_the_first_barrier_ends_init_epeerlost)
{
    late_rank_sees_a_death("joineddies", FR_FAULT_JOINED_DIES,
                           FR_FAULT_BELLS_LATE);
}
END_TEST

/* libfabric 1.17's shm: a sender takes the receiver's region lock to
 * queue into it, the receiver to read its queue. A rank killed holding
 * one (here rank 1, rank 0's, as the ranks start to connect) left rank 0
 * spinning inside the provider for ever: the repair of such a lock
 * (comm/shm_repair.h) ran only once the liveness thread had started, and
 * frpc_init's deadline cannot end a thread stuck inside the provider. */
START_TEST(a_rank_killed_holding_a_peers_lock_as_the_ranks_connect)
{
    late_rank_sees_a_death("lockdies", FR_FAULT_LOCK_DIES, FR_FAULT_SITES);
}
END_TEST

/* The same after frpc_init, in frpc_shutdown: once rank 0's liveness
 * thread has stopped, rank 1 takes rank 0's region lock and dies; rank 0
 * still polls its region (the quiesce before the fabric closes). Rank 1
 * waits for a byte on go before it does. */
static void start_job_dying_on_go(dying_job *j, int go)
{
    name_job(j, "shutlock");
    j->child = fork();
    ck_assert_int_ge(j->child, 0);
    if (j->child == 0) {
        frpc_config cfg;
        frpc_agent *a = NULL;
        char c, name[128];
        shm_rank(&cfg, 1, j->r.addr);
        if (frpc_init(&cfg, &a) == 0 && read(go, &c, 1) == 1) {
            fr_agent_shm_name(a, 0, name, sizeof(name));
            if (fr_shm_take_lock(name, (int)getppid()) == 0)
                _exit(9);
        }
        _exit(3);
    }
}

typedef struct go_when_shut_late {
    int go;     /* the pipe's write end */
    int sent;   /* 1 once the byte went */
} go_when_shut_late;

static void *send_go_when_shut_late(void *arg)
{
    go_when_shut_late *g = arg;
    int64_t until = now_ms() + DIES_INIT_MS;
    while (atomic_load(&fr__fault_left[FR_FAULT_SHUT_LATE]) > 0 &&
           now_ms() < until)
        sleep_ms(1);
    g->sent = write(g->go, "g", 1) == 1;
    return NULL;
}

START_TEST(a_rank_killed_holding_the_others_lock_in_its_shutdown)
{
    dying_job j;
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    start_job_dying_on_go(&j, go[0]);
    close(go[0]);
    frpc_config cfg;
    frpc_agent *a = NULL;
    shm_rank(&cfg, 0, j.r.addr);
    ck_assert_int_eq(frpc_init(&cfg, &a), 0);
    go_when_shut_late g = {.go = go[1]};
    pthread_t t;
    fr_fault_arm(FR_FAULT_SHUT_LATE, 1);
    ck_assert_int_eq(pthread_create(&t, NULL, send_go_when_shut_late, &g), 0);
    j.what = "frpc_shutdown";
    int64_t t0 = now_ms();
    j.r.rc = frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 5000);
    j.r.ms = now_ms() - t0;
    pthread_join(t, NULL);
    fr_fault_arm(FR_FAULT_SHUT_LATE, 0);
    close(go[1]);
    int status = end_dying_job(&j);
    ck_assert_msg(g.sent, "the shutdown never came to the fault site");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 9,
                  "rank 1 did not die holding the lock (status 0x%x)",
                  status);
    ck_assert_int_eq(j.r.rc, 0); /* immediate: 0 whoever was lost */
}
END_TEST

/* The header: a rank's region has no /dev/shm name once frpc_init has
 * returned, so a rank killed inside its frpc_shutdown leaves nothing,
 * though the other, told at the last barrier that it leaves, does not
 * clean after it. victim dies as it leaves the store, after that
 * barrier. */
static void rank_dying_inside_its_shutdown(int victim)
{
    dying_job j;
    start_dying_job(&j, victim ? "shutdies1_" : "shutdies0_", victim,
                    FR_FAULT_SHUTDOWN_DIES);
    run_here(&j, 1 - victim, 1);
    int status = end_dying_job(&j);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 9,
                  "rank %d did not end at the fault (status 0x%x)", victim,
                  status);
    ck_assert_msg(j.r.rc == 0 || j.r.rc == FRPC_EPEERLOST,
                  "frpc_shutdown: %s", frpc_err_name(j.r.rc));
}

START_TEST(a_rank_killed_inside_its_shutdown_leaves_nothing)
{
    rank_dying_inside_its_shutdown(1);
    rank_dying_inside_its_shutdown(0);
}
END_TEST

/* Kills rank 0 once rank 1 (this process) tries to open its watch
 * connection, each try refused by a fault site as a gone store refuses
 * it. */
typedef struct killer {
    pid_t child;
    int killed; /* 1 once it sent SIGKILL */
} killer;

static void *kill_when_watch_tried(void *arg)
{
    killer *k = arg;
    int64_t until = now_ms() + DIES_INIT_MS;
    while (atomic_load(&fr__fault_left[FR_FAULT_WATCH_REFUSED]) ==
               WATCH_REFUSALS &&
           now_ms() < until)
        sleep_ms(1);
    k->killed = kill(k->child, SIGKILL) == 0;
    return NULL;
}

START_TEST(rank0_dying_while_a_rank_opens_its_watch_ends_its_init_at_once)
{
    dying_job j;
    /* Rank 0: a real agent hosting the store, killed while it waits at
     * the init barrier. */
    start_dying_job(&j, "watchdies", 0, FR_FAULT_SITES);
    killer k = {.child = j.child};
    pthread_t t;
    fr_fault_arm(FR_FAULT_WATCH_REFUSED, WATCH_REFUSALS);
    ck_assert_int_eq(pthread_create(&t, NULL, kill_when_watch_tried, &k), 0);
    run_here(&j, 1, 0);
    fr_fault_arm(FR_FAULT_WATCH_REFUSED, 0);
    pthread_join(t, NULL);
    if (!k.killed)
        kill(j.child, SIGKILL);
    int status = end_dying_job(&j);
    ck_assert_msg(k.killed, "rank 1 never tried its watch connection");
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "rank 0 did not end by the kill (status 0x%x)", status);
    ck_assert_msg(j.r.rc == FRPC_EBOOTSTRAP || j.r.rc == FRPC_EPEERLOST,
                  "frpc_init: %s", frpc_err_name(j.r.rc));
    ck_assert_msg(strstr(j.r.err, "watch connection"), "message: %s",
                  j.r.err);
}
END_TEST

/* A rank that joined the job and then stopped (here: as it would publish
 * its endpoint address) is named by the others' frpc_init when their
 * init timeout runs out, with the step it never came to. */
#define STOPPED_INIT_MS 3000

START_TEST(a_rank_stopped_after_joining_is_named_when_init_times_out)
{
    dying_job j;
    start_dying_job(&j, "addrstops", 1, FR_FAULT_ADDR_STOPS);
    frpc_config cfg;
    frpc_agent *a = NULL;
    shm_rank(&cfg, 0, j.r.addr);
    cfg.init_timeout_ms = STOPPED_INIT_MS;
    cfg.errbuf = j.r.err;
    cfg.errbuf_len = sizeof(j.r.err);
    int64_t t0 = now_ms();
    int rc = frpc_init(&cfg, &a);
    int64_t ms = now_ms() - t0;
    if (a)
        frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 1000);
    int status = 0;
    kill(j.child, SIGKILL);
    ck_assert_int_eq(waitpid(j.child, &status, 0), j.child);
    unlink_prefixed(j.prefix); /* the killed rank's names: nobody's now */
    fprintf(stderr, "frpc_init: %s after %lld ms (timeout %d ms): %s\n",
            frpc_err_name(rc), (long long)ms, STOPPED_INIT_MS, j.r.err);
    ck_assert_int_eq(rc, FRPC_EBOOTSTRAP);
    ck_assert_msg(ms < STOPPED_INIT_MS + SLACK_MS, "took %lld ms",
                  (long long)ms);
    ck_assert_msg(strstr(j.r.err, "endpoint address of rank 1") &&
                      strstr(j.r.err, "went no further"),
                  "message: %s", j.r.err);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"frpc_init ends by one deadline when a rank never reaches the "
         "barrier",
         init_ends_by_one_deadline_when_a_rank_never_reaches_the_barrier},
        {"a rank that gives its init up at its timeout ends the others' "
         "FRPC_EBOOTSTRAP (the job did not start), not FRPC_EPEERLOST",
         a_rank_giving_up_its_init_ends_the_others_ebootstrap},
        {"a rank that dies while the ranks connect ends the others' "
         "frpc_init at once with FRPC_EPEERLOST, not at the init timeout",
         a_rank_dying_while_the_ranks_connect_ends_init_at_once},
        {"a rank that dies just after its first sends, before the other "
         "mapped its region, ends the other's frpc_init FRPC_EPEERLOST, "
         "not by SIGSEGV in libfabric's shm",
         a_rank_dying_after_its_first_sends_does_not_crash_a_late_mapper},
        {"a rank that dies just after frpc_init's first barrier, its "
         "doorbell gone, ends the other's frpc_init FRPC_EPEERLOST, not "
         "FRPC_ETRANSPORT",
         a_rank_dying_after_the_first_barrier_ends_init_epeerlost},
        {"a rank killed holding the other's shm region lock as the ranks "
         "connect ends the other's frpc_init FRPC_EPEERLOST, not a spin "
         "for ever inside libfabric",
         a_rank_killed_holding_a_peers_lock_as_the_ranks_connect},
        {"a rank killed holding the other's shm region lock while the "
         "other shuts down (its liveness thread stopped) does not hang "
         "that shutdown inside libfabric",
         a_rank_killed_holding_the_others_lock_in_its_shutdown},
        {"rank 0 dying while a rank opens its watch connection ends that "
         "rank's frpc_init at once, not at the init timeout",
         rank0_dying_while_a_rank_opens_its_watch_ends_its_init_at_once},
        {"a rank that joined and then stopped is named, with the step it "
         "never came to, when the others' init times out",
         a_rank_stopped_after_joining_is_named_when_init_times_out},
        {"a rank killed inside its frpc_shutdown (after the last barrier) "
         "leaves no name in /dev/shm, and the other's shutdown ends",
         a_rank_killed_inside_its_shutdown_leaves_nothing},
    };
    return fr_run_tests("init bound", tests, sizeof(tests) / sizeof(tests[0]),
                        60);
}
