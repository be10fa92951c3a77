/*
 * Unit tests of the bootstrap key-value store (comm/store.h): server and
 * clients in one process, over 127.0.0.1. Each test is its own case (Check
 * forks it) with a timeout; the names are in the table at the end. Most
 * cases get a fixture: a server on a free port (srv, port) and a connected
 * client (cli). Timing checks use generous bounds so that a slow, loaded
 * two-core machine passes.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/clock.h"
#include "comm/store.h"

#include "check_main.h"

#define HOST "127.0.0.1"
#define LONG_MS 30000 /* a wait that must end by an event, not by time */
#define NTHREADS 8
#define NADDS 1000
#define NCLIENTS 64

static fr_store_server *srv; /* fixture: set in the forked test process */
static uint16_t port;
static fr_store_client *cli;

static int64_t now_ms(void)
{
    return (int64_t)(fr_now_ns() / 1000000u);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static fr_store_client *connect_ok(void)
{
    fr_store_client *c = NULL;
    char err[256] = "";
    int rc = fr_store_connect(HOST, port, 10000, &c, err, sizeof(err));
    ck_assert_msg(rc == 0, "connect: %d %s", rc, err);
    return c;
}

static void server_setup(void)
{
    char err[256] = "";
    int rc = fr_store_server_start(HOST, 0, &srv, err, sizeof(err));
    ck_assert_msg(rc == 0, "server start: %d %s", rc, err);
    port = fr_store_server_port(srv);
    ck_assert_uint_ne(port, 0);
    cli = connect_ok();
}

static void server_teardown(void)
{
    fr_store_close(cli);
    fr_store_server_stop(srv);
}

/* A server on a free port and a connected client before the test. */
static const fr_fixture server = {server_setup, server_teardown};

/* For a thread: a client of the fixture's server, or NULL with *rc set. */
static fr_store_client *thread_client(int *rc)
{
    fr_store_client *c = NULL;
    *rc = fr_store_connect(HOST, port, 20000, &c, NULL, 0);
    return c;
}

static pthread_t spawn(void *(*fn)(void *), void *arg)
{
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, fn, arg), 0);
    return th;
}

/* Runs fn on n threads at once, the i-th on base + i * size; joins all. */
static void run_threads(void *(*fn)(void *), void *base, size_t size, int n)
{
    pthread_t th[NCLIENTS];
    ck_assert_int_le(n, NCLIENTS);
    for (int i = 0; i < n; i++)
        th[i] = spawn(fn, (char *)base + (size_t)i * size);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

/* A port that was free a moment ago (nothing listens on it). */
static uint16_t free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static void expect_value(fr_store_client *c, const char *key, const char *want)
{
    void *v = NULL;
    size_t len = 0;
    ck_assert_int_eq(fr_store_get(c, key, 5000, &v, &len), 0);
    ck_assert_uint_eq(len, strlen(want));
    ck_assert(memcmp(v, want, len) == 0);
    free(v);
}

/* ---- basic operations --------------------------------------------------- */

START_TEST(test_set_get)
{
    ck_assert_int_eq(fr_store_set(cli, "addr/0", "hello", 5), 0);
    expect_value(cli, "addr/0", "hello");
    ck_assert_int_eq(fr_store_set(cli, "addr/0", "bye", 3), 0);
    expect_value(cli, "addr/0", "bye");
    /* A counter reads back as decimal text. */
    ck_assert_int_eq(fr_store_add(cli, "n", -42, NULL), 0);
    expect_value(cli, "n", "-42");
}
END_TEST

static void *set_later(void *arg)
{
    int *rc = arg;
    fr_store_client *c = thread_client(rc);
    sleep_ms(300);
    if (*rc == 0)
        *rc = fr_store_set(c, "later", "late", 4);
    fr_store_close(c);
    return NULL;
}

START_TEST(test_get_waits_for_set)
{
    int rc = -1;
    pthread_t th = spawn(set_later, &rc);
    expect_value(cli, "later", "late"); /* parks up to 5 s */
    pthread_join(th, NULL);
    ck_assert_int_eq(rc, 0);
}
END_TEST

START_TEST(test_get_times_out)
{
    void *v = (void *)1;
    size_t len = 7;
    int64_t t0 = now_ms();
    ck_assert_int_eq(fr_store_get(cli, "missing", 300, &v, &len),
                     FRPC_ETIMEDOUT);
    int64_t dt = now_ms() - t0;
    ck_assert_int_ge(dt, 250);
    ck_assert_int_lt(dt, 15000);
    ck_assert_ptr_null(v);
    ck_assert_uint_eq(len, 0);
    t0 = now_ms();
    ck_assert_int_eq(fr_store_wait_ge(cli, "cnt", 1, 300), FRPC_ETIMEDOUT);
    ck_assert_int_lt(now_ms() - t0, 15000);
    /* The connection stays usable after a timeout. */
    ck_assert_int_eq(fr_store_set(cli, "missing", "x", 1), 0);
    expect_value(cli, "missing", "x");
}
END_TEST

struct adder {
    int rc;
    int64_t got[NADDS];
};

static void *add_many(void *arg)
{
    struct adder *a = arg;
    fr_store_client *c = thread_client(&a->rc);
    for (int i = 0; i < NADDS && a->rc == 0; i++)
        a->rc = fr_store_add(c, "counter", 1, &a->got[i]);
    fr_store_close(c);
    return NULL;
}

START_TEST(test_add_atomic)
{
    static struct adder a[NTHREADS];
    static char seen[NTHREADS * NADDS + 1];
    run_threads(add_many, a, sizeof(a[0]), NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        ck_assert_int_eq(a[i].rc, 0);
        for (int j = 0; j < NADDS; j++) {
            int64_t v = a[i].got[j];
            ck_assert(v >= 1 && v <= NTHREADS * NADDS);
            ck_assert_msg(!seen[v], "value %lld returned twice", (long long)v);
            seen[v] = 1;
        }
    }
    int64_t total = 0;
    ck_assert_int_eq(fr_store_add(cli, "counter", 0, &total), 0);
    ck_assert_int_eq(total, NTHREADS * NADDS);
}
END_TEST

static void *wait_for_3(void *arg)
{
    int *rc = arg;
    fr_store_client *c = thread_client(rc);
    if (*rc == 0)
        *rc = fr_store_wait_ge(c, "w", 3, LONG_MS);
    fr_store_close(c);
    return NULL;
}

START_TEST(test_wait_ge)
{
    int rc = -1;
    pthread_t th = spawn(wait_for_3, &rc);
    for (int i = 0; i < 3; i++) {
        sleep_ms(50);
        ck_assert_int_eq(fr_store_add(cli, "w", 1, NULL), 0);
    }
    int64_t t0 = now_ms();
    pthread_join(th, NULL);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_lt(now_ms() - t0, LONG_MS / 2);
    /* Already reached: answers at once; a missing counter counts 0. */
    ck_assert_int_eq(fr_store_wait_ge(cli, "w", 2, 1000), 0);
    ck_assert_int_eq(fr_store_wait_ge(cli, "fresh", 0, 1000), 0);
    /* A value that is not a counter. */
    ck_assert_int_eq(fr_store_set(cli, "text", "abc", 3), 0);
    ck_assert_int_eq(fr_store_wait_ge(cli, "text", 1, 1000), FRPC_EPROTO);
    ck_assert_int_eq(fr_store_add(cli, "text", 1, NULL), FRPC_EPROTO);
}
END_TEST

static atomic_int arrived;

struct member {
    int rc;
    int seen_arrived;
    int64_t count;
};

static void *barrier_member(void *arg)
{
    struct member *m = arg;
    fr_store_client *c = thread_client(&m->rc);
    atomic_fetch_add(&arrived, 1);
    if (m->rc == 0)
        m->rc = fr_store_barrier(c, "barrier/1", NTHREADS, LONG_MS);
    m->seen_arrived = atomic_load(&arrived);
    if (m->rc == 0)
        m->rc = fr_store_add(c, "barrier/1", 0, &m->count);
    fr_store_close(c);
    return NULL;
}

START_TEST(test_barrier)
{
    struct member m[NTHREADS];
    memset(m, 0, sizeof(m));
    run_threads(barrier_member, m, sizeof(m[0]), NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        ck_assert_int_eq(m[i].rc, 0);
        ck_assert_int_eq(m[i].seen_arrived, NTHREADS); /* nobody left early */
        ck_assert_int_eq(m[i].count, NTHREADS);
    }
}
END_TEST

START_TEST(test_value_sizes)
{
    fr_store_client *b = connect_ok();
    void *v = NULL;
    size_t len = 99;
    ck_assert_int_eq(fr_store_set(cli, "empty", NULL, 0), 0);
    ck_assert_int_eq(fr_store_get(b, "empty", 5000, &v, &len), 0);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(len, 0);
    free(v);

    uint8_t *big = malloc(FR_STORE_MAX_VALUE);
    ck_assert_ptr_nonnull(big);
    for (size_t i = 0; i < FR_STORE_MAX_VALUE; i++)
        big[i] = (uint8_t)(i * 7 + (i >> 12));
    ck_assert_int_eq(fr_store_set(cli, "big", big, FR_STORE_MAX_VALUE), 0);
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(fr_store_get(b, "big", 5000, &v, &len), 0);
        ck_assert_uint_eq(len, FR_STORE_MAX_VALUE);
        ck_assert(memcmp(v, big, len) == 0);
        free(v);
    }
    free(big);
    fr_store_close(b);
}
END_TEST

START_TEST(test_bad_arguments)
{
    static uint8_t big[FR_STORE_MAX_VALUE + 1];
    char longkey[FR_STORE_MAX_KEY + 2];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    void *v;
    size_t len;
    ck_assert_int_eq(fr_store_set(cli, "k", big, sizeof(big)), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_set(cli, longkey, "x", 1), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_set(cli, "", "x", 1), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_set(cli, NULL, "x", 1), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_set(cli, "k", NULL, 1), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_get(cli, "k", 10, NULL, &len), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_barrier(cli, "b", 0, 10), FRPC_EINVAL);
    longkey[FR_STORE_MAX_KEY] = '\0'; /* exactly the limit is fine */
    ck_assert_int_eq(fr_store_set(cli, longkey, "x", 1), 0);
    /* Refusals sent nothing: the connection is still in step. */
    ck_assert_int_eq(fr_store_get(cli, longkey, 5000, &v, &len), 0);
    free(v);
}
END_TEST

/* ---- connecting and stopping -------------------------------------------- */

START_TEST(test_connect_no_server)
{
    uint16_t p = free_port();
    fr_store_client *c = (fr_store_client *)1;
    char err[256] = "", want[64];
    int64_t t0 = now_ms();
    ck_assert_int_eq(fr_store_connect(HOST, p, 500, &c, err, sizeof(err)),
                     FRPC_EBOOTSTRAP);
    int64_t dt = now_ms() - t0;
    ck_assert_int_ge(dt, 400);
    ck_assert_int_lt(dt, 15000);
    ck_assert_ptr_null(c);
    snprintf(want, sizeof(want), "bootstrap store at 127.0.0.1:%u",
             (unsigned)p);
    ck_assert_msg(strstr(err, want) != NULL, "error text: %s", err);
    /* timeout 0: one attempt only. */
    t0 = now_ms();
    ck_assert_int_eq(fr_store_connect(HOST, p, 0, &c, NULL, 0),
                     FRPC_EBOOTSTRAP);
    ck_assert_int_lt(now_ms() - t0, 15000);
    ck_assert_int_eq(fr_store_connect(NULL, p, 0, &c, NULL, 0), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_connect(HOST, 0, 0, &c, NULL, 0), FRPC_EINVAL);
}
END_TEST

static void *start_late(void *arg)
{
    int *rc = arg;
    sleep_ms(400);
    *rc = fr_store_server_start(HOST, port, &srv, NULL, 0);
    return NULL;
}

START_TEST(test_connect_retries)
{
    int rc = -1;
    port = free_port();
    pthread_t th = spawn(start_late, &rc);
    fr_store_client *c = NULL;
    char err[256] = "";
    int crc = fr_store_connect(HOST, port, 20000, &c, err, sizeof(err));
    pthread_join(th, NULL);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(crc == 0, "connect: %d %s", crc, err);
    ck_assert_int_eq(fr_store_set(c, "k", "v", 1), 0);
    expect_value(c, "k", "v");
    fr_store_close(c);
    fr_store_server_stop(srv);
}
END_TEST

static void *get_forever(void *arg)
{
    int *rc = arg;
    void *v = NULL;
    size_t len;
    *rc = fr_store_get(cli, "never", 60000, &v, &len);
    free(v);
    return NULL;
}

START_TEST(test_stop_wakes_get)
{
    int rc = 1;
    pthread_t th = spawn(get_forever, &rc);
    sleep_ms(300);
    int64_t t0 = now_ms();
    fr_store_server_stop(srv);
    srv = NULL;
    pthread_join(th, NULL);
    ck_assert_int_lt(now_ms() - t0, 20000);
    ck_assert_int_eq(rc, FRPC_EBOOTSTRAP);
    /* The client stays failed. */
    ck_assert_int_eq(fr_store_set(cli, "k", "v", 1), FRPC_EBOOTSTRAP);
}
END_TEST

/* ---- hostile peers and many clients ------------------------------------- */

static int raw_connect(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* A request header, u8 op, u16 keylen, u32 vallen, i64 arg (0), then tail. */
static int raw_request(uint8_t op, uint16_t klen, uint32_t vlen,
                       const char *tail, size_t tlen)
{
    uint8_t b[15 + 64] = {op, (uint8_t)klen, (uint8_t)(klen >> 8),
                          (uint8_t)vlen, (uint8_t)(vlen >> 8),
                          (uint8_t)(vlen >> 16), (uint8_t)(vlen >> 24)};
    int fd = raw_connect();
    ck_assert_uint_le(tlen, 64);
    memcpy(b + 15, tail, tlen);
    ck_assert_int_eq(send(fd, b, 15 + tlen, MSG_NOSIGNAL),
                     (ssize_t)(15 + tlen));
    return fd;
}

/* True when the server closes fd within a generous bound. */
static bool closed_by_server(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char b[64];
    bool closed = poll(&p, 1, 15000) == 1 && recv(fd, b, sizeof(b), 0) <= 0;
    close(fd);
    return closed;
}

START_TEST(test_garbage_disconnected)
{
    ck_assert_int_eq(fr_store_set(cli, "k", "v", 1), 0);
    int partial = raw_connect(); /* half a header, then silence */
    ck_assert_int_eq(send(partial, "\x01\x01", 2, MSG_NOSIGNAL), 2);
    int huge_val = raw_request(1, 1, 0xFFFFFFFFu, "k", 1);
    int huge_key = raw_request(2, 0xFFFF, 0, "k", 1);
    int bad_op = raw_request(0x77, 1, 0, "k", 1);
    int nul_key = raw_request(2, 2, 0, "a\0", 2);
    int get_val = raw_request(2, 1, 1, "kv", 2);
    int noise = raw_connect();
    ck_assert_int_eq(send(noise, "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL),
                     18);
    int leaver = raw_request(2, 4, 0, "gone", 4); /* parks, then leaves */

    ck_assert(closed_by_server(huge_val));
    ck_assert(closed_by_server(huge_key));
    ck_assert(closed_by_server(bad_op));
    ck_assert(closed_by_server(nul_key));
    ck_assert(closed_by_server(get_val));
    ck_assert(closed_by_server(noise));
    close(leaver);
    expect_value(cli, "k", "v");
    ck_assert_int_eq(fr_store_set(cli, "gone", "x", 1), 0);
    expect_value(cli, "gone", "x");
    /* A new client is served while the half-sent request is pending. */
    fr_store_client *late = connect_ok();
    expect_value(late, "gone", "x");
    fr_store_close(late);
    close(partial);
}
END_TEST

struct peer {
    int id;
    int rc;
};

/* Publishes its key, reads its neighbour's (which may come later: the get
 * parks), then meets every peer at a barrier. */
static void *peer_run(void *arg)
{
    struct peer *p = arg;
    char key[32], mine[32], nkey[32], want[32];
    void *v = NULL;
    size_t len = 0;
    snprintf(key, sizeof(key), "addr/%d", p->id);
    snprintf(mine, sizeof(mine), "rank-%d", p->id);
    snprintf(nkey, sizeof(nkey), "addr/%d", (p->id + 1) % NCLIENTS);
    snprintf(want, sizeof(want), "rank-%d", (p->id + 1) % NCLIENTS);
    fr_store_client *c = thread_client(&p->rc);
    if (p->rc == 0)
        p->rc = fr_store_set(c, key, mine, strlen(mine));
    if (p->rc == 0)
        p->rc = fr_store_get(c, nkey, LONG_MS, &v, &len);
    if (p->rc == 0 && (len != strlen(want) || memcmp(v, want, len) != 0))
        p->rc = -100;
    if (p->rc == 0)
        p->rc = fr_store_barrier(c, "all", NCLIENTS, LONG_MS);
    free(v);
    fr_store_close(c);
    return NULL;
}

START_TEST(test_many_clients)
{
    static struct peer p[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++)
        p[i] = (struct peer){i, -1};
    run_threads(peer_run, p, sizeof(p[0]), NCLIENTS);
    for (int i = 0; i < NCLIENTS; i++)
        ck_assert_msg(p[i].rc == 0, "peer %d: %d", i, p[i].rc);
}
END_TEST

START_TEST(test_port_zero)
{
    /* The fixture's server asked for port 0 and got a real one. */
    ck_assert_uint_ne(port, 0);
    ck_assert_int_eq(fr_store_set(cli, "k", "v", 1), 0);
    /* The port is taken now: a second server names it in its error. */
    fr_store_server *s2 = (fr_store_server *)1;
    char err[256] = "", want[64];
    ck_assert_int_eq(fr_store_server_start(HOST, port, &s2, err, sizeof(err)),
                     FRPC_EBOOTSTRAP);
    ck_assert_ptr_null(s2);
    snprintf(want, sizeof(want), "cannot listen on 127.0.0.1:%u",
             (unsigned)port);
    ck_assert_msg(strstr(err, want) != NULL, "error text: %s", err);
    fr_store_server_stop(NULL);
    fr_store_close(NULL);
}
END_TEST

int main(void)
{
    const fr_test_case tests[] = {
        {"set then get returns the value", test_set_get, 30, &server},
        {"get waits for a later set", test_get_waits_for_set, 30, &server},
        {"get of a missing key times out", test_get_times_out, 30, &server},
        {"add is atomic across 8 clients", test_add_atomic, 120, &server},
        {"wait_ge wakes when the counter is reached", test_wait_ge, 60,
         &server},
        {"barrier of 8 clients", test_barrier, 60, &server},
        {"empty and largest values", test_value_sizes, 60, &server},
        {"bad arguments are refused locally", test_bad_arguments, 30,
         &server},
        {"connect without a server fails naming it", test_connect_no_server,
         30},
        {"connect retries until the server starts", test_connect_retries,
         60},
        {"server stop wakes a blocked get", test_stop_wakes_get, 60, &server},
        {"malformed requests close only that client",
         test_garbage_disconnected, 60, &server},
        {"64 clients exchange keys and meet", test_many_clients, 120,
         &server},
        {"port 0 picks a free port", test_port_zero, 30, &server},
    };
    return fr_run_tests("store", tests, sizeof(tests) / sizeof(tests[0]), 30);
}
