/*
 * Unit tests of the bootstrap key-value store (comm/store.h): server and
 * clients in one process, over 127.0.0.1. Each test is its own case (Check
 * forks it) with a timeout; the names are in the table at the end. Timing
 * checks use generous bounds so that a slow, loaded machine passes.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/store.h"

#define HOST "127.0.0.1"
#define LONG_MS 30000 /* a wait that must end by an event, not by time */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static fr_store_server *start_server(uint16_t *port)
{
    fr_store_server *s = NULL;
    char err[256] = "";
    int rc = fr_store_server_start(HOST, 0, &s, err, sizeof(err));
    ck_assert_msg(rc == 0, "server start: %d %s", rc, err);
    *port = fr_store_server_port(s);
    ck_assert_uint_ne(*port, 0);
    return s;
}

static fr_store_client *connect_ok(uint16_t port)
{
    fr_store_client *c = NULL;
    char err[256] = "";
    int rc = fr_store_connect(HOST, port, 10000, &c, err, sizeof(err));
    ck_assert_msg(rc == 0, "connect: %d %s", rc, err);
    return c;
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
    uint16_t port;
    fr_store_server *s = start_server(&port);
    fr_store_client *c = connect_ok(port);
    ck_assert_int_eq(fr_store_set(c, "addr/0", "hello", 5), 0);
    expect_value(c, "addr/0", "hello");
    ck_assert_int_eq(fr_store_set(c, "addr/0", "bye", 3), 0);
    expect_value(c, "addr/0", "bye");
    /* A counter reads back as decimal text. */
    ck_assert_int_eq(fr_store_add(c, "n", -42, NULL), 0);
    expect_value(c, "n", "-42");
    fr_store_close(c);
    fr_store_server_stop(s);
}
END_TEST

struct setter {
    uint16_t port;
    int delay_ms;
    const char *key;
    int rc;
};

static void *set_later(void *arg)
{
    struct setter *t = arg;
    fr_store_client *c = NULL;
    t->rc = fr_store_connect(HOST, t->port, 10000, &c, NULL, 0);
    if (t->rc == 0) {
        sleep_ms(t->delay_ms);
        t->rc = fr_store_set(c, t->key, "late", 4);
    }
    fr_store_close(c);
    return NULL;
}

START_TEST(test_get_waits_for_set)
{
    uint16_t port;
    fr_store_server *s = start_server(&port);
    fr_store_client *c = connect_ok(port);
    struct setter t = {port, 300, "later", -1};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, set_later, &t), 0);
    expect_value(c, "later", "late"); /* waits up to 5 s */
    pthread_join(th, NULL);
    ck_assert_int_eq(t.rc, 0);
    fr_store_close(c);
    fr_store_server_stop(s);
}
END_TEST

START_TEST(test_get_times_out)
{
    uint16_t port;
    fr_store_server *s = start_server(&port);
    fr_store_client *c = connect_ok(port);
    void *v = (void *)1;
    size_t len = 7;
    int64_t t0 = now_ms();
    ck_assert_int_eq(fr_store_get(c, "missing", 300, &v, &len), FRPC_ETIMEDOUT);
    int64_t dt = now_ms() - t0;
    ck_assert_int_ge(dt, 250);
    ck_assert_int_lt(dt, 15000);
    ck_assert_ptr_null(v);
    ck_assert_uint_eq(len, 0);
    t0 = now_ms();
    ck_assert_int_eq(fr_store_wait_ge(c, "cnt", 1, 300), FRPC_ETIMEDOUT);
    ck_assert_int_lt(now_ms() - t0, 15000);
    /* The connection stays usable after a timeout. */
    ck_assert_int_eq(fr_store_set(c, "missing", "x", 1), 0);
    expect_value(c, "missing", "x");
    fr_store_close(c);
    fr_store_server_stop(s);
}
END_TEST

#define NTHREADS 8
#define NADDS 1000

struct adder {
    uint16_t port;
    int rc;
    int64_t got[NADDS];
};

static void *add_many(void *arg)
{
    struct adder *a = arg;
    fr_store_client *c = NULL;
    a->rc = fr_store_connect(HOST, a->port, 10000, &c, NULL, 0);
    for (int i = 0; i < NADDS && a->rc == 0; i++)
        a->rc = fr_store_add(c, "counter", 1, &a->got[i]);
    fr_store_close(c);
    return NULL;
}

START_TEST(test_add_atomic)
{
    uint16_t port;
    fr_store_server *s = start_server(&port);
    static struct adder a[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        a[i].port = port;
        ck_assert_int_eq(pthread_create(&th[i], NULL, add_many, &a[i]), 0);
    }
    static char seen[NTHREADS * NADDS + 1];
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(a[i].rc, 0);
        for (int j = 0; j < NADDS; j++) {
            int64_t v = a[i].got[j];
            ck_assert(v >= 1 && v <= NTHREADS * NADDS);
            ck_assert_msg(!seen[v], "value %lld returned twice", (long long)v);
            seen[v] = 1;
        }
    }
    fr_store_client *c = connect_ok(port);
    int64_t total = 0;
    ck_assert_int_eq(fr_store_add(c, "counter", 0, &total), 0);
    ck_assert_int_eq(total, NTHREADS * NADDS);
    fr_store_close(c);
    fr_store_server_stop(s);
}
END_TEST

struct waiter {
    uint16_t port;
    const char *key;
    int64_t target;
    int timeout_ms;
    int rc;
    int64_t elapsed;
};

static void *wait_counter(void *arg)
{
    struct waiter *w = arg;
    fr_store_client *c = NULL;
    int64_t t0 = now_ms();
    w->rc = fr_store_connect(HOST, w->port, 10000, &c, NULL, 0);
    if (w->rc == 0)
        w->rc = fr_store_wait_ge(c, w->key, w->target, w->timeout_ms);
    w->elapsed = now_ms() - t0;
    fr_store_close(c);
    return NULL;
}

START_TEST(test_wait_ge)
{
    uint16_t port;
    fr_store_server *s = start_server(&port);
    fr_store_client *c = connect_ok(port);
    struct waiter w = {port, "w", 3, LONG_MS, -1, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_counter, &w), 0);
    for (int i = 0; i < 3; i++) {
        sleep_ms(50);
        ck_assert_int_eq(fr_store_add(c, "w", 1, NULL), 0);
    }
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc, 0);
    ck_assert_int_lt(w.elapsed, LONG_MS);
    /* Already reached: answers at once; a missing counter counts 0. */
    ck_assert_int_eq(fr_store_wait_ge(c, "w", 2, 1000), 0);
    ck_assert_int_eq(fr_store_wait_ge(c, "fresh", 0, 1000), 0);
    /* A value that is not a counter. */
    ck_assert_int_eq(fr_store_set(c, "text", "abc", 3), 0);
    ck_assert_int_eq(fr_store_wait_ge(c, "text", 1, 1000), FRPC_EPROTO);
    ck_assert_int_eq(fr_store_add(c, "text", 1, NULL), FRPC_EPROTO);
    fr_store_close(c);
    fr_store_server_stop(s);
}
END_TEST

struct member {
    uint16_t port;
    atomic_int *arrived;
    int rc;
    int seen_arrived;
    int64_t count;
};

static void *barrier_member(void *arg)
{
    struct member *m = arg;
    fr_store_client *c = NULL;
    m->rc = fr_store_connect(HOST, m->port, 10000, &c, NULL, 0);
    atomic_fetch_add(m->arrived, 1);
    if (m->rc == 0)
        m->rc = fr_store_barrier(c, "barrier/1", NTHREADS, LONG_MS);
    m->seen_arrived = atomic_load(m->arrived);
    if (m->rc == 0)
        m->rc = fr_store_add(c, "barrier/1", 0, &m->count);
    fr_store_close(c);
    return NULL;
}

START_TEST(test_barrier)
{
    uint16_t port;
    fr_store_server *s = start_server(&port);
    atomic_int arrived = 0;
    struct member m[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        m[i] = (struct member){.port = port, .arrived = &arrived, .rc = -1};
        ck_assert_int_eq(pthread_create(&th[i], NULL, barrier_member, &m[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(m[i].rc, 0);
        ck_assert_int_eq(m[i].seen_arrived, NTHREADS); /* nobody left early */
        ck_assert_int_eq(m[i].count, NTHREADS);
    }
    fr_store_server_stop(s);
}
END_TEST

START_TEST(test_value_sizes)
{
    uint16_t port;
    fr_store_server *s = start_server(&port);
    fr_store_client *a = connect_ok(port), *b = connect_ok(port);
    void *v = NULL;
    size_t len = 99;
    ck_assert_int_eq(fr_store_set(a, "empty", NULL, 0), 0);
    ck_assert_int_eq(fr_store_get(b, "empty", 5000, &v, &len), 0);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(len, 0);
    free(v);

    uint8_t *big = malloc(FR_STORE_MAX_VALUE);
    ck_assert_ptr_nonnull(big);
    for (size_t i = 0; i < FR_STORE_MAX_VALUE; i++)
        big[i] = (uint8_t)(i * 7 + (i >> 12));
    ck_assert_int_eq(fr_store_set(a, "big", big, FR_STORE_MAX_VALUE), 0);
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(fr_store_get(b, "big", 5000, &v, &len), 0);
        ck_assert_uint_eq(len, FR_STORE_MAX_VALUE);
        ck_assert(memcmp(v, big, len) == 0);
        free(v);
    }
    free(big);
    fr_store_close(a);
    fr_store_close(b);
    fr_store_server_stop(s);
}
END_TEST

START_TEST(test_bad_arguments)
{
    uint16_t port;
    fr_store_server *s = start_server(&port);
    fr_store_client *c = connect_ok(port);
    static uint8_t big[FR_STORE_MAX_VALUE + 1];
    char longkey[FR_STORE_MAX_KEY + 2];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    void *v;
    size_t len;
    ck_assert_int_eq(fr_store_set(c, "k", big, sizeof(big)), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_set(c, longkey, "x", 1), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_set(c, "", "x", 1), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_set(c, NULL, "x", 1), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_set(c, "k", NULL, 1), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_get(c, "k", 10, NULL, &len), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_barrier(c, "b", 0, 10), FRPC_EINVAL);
    longkey[FR_STORE_MAX_KEY] = '\0'; /* exactly the limit is fine */
    ck_assert_int_eq(fr_store_set(c, longkey, "x", 1), 0);
    /* Refusals sent nothing: the connection is still in step. */
    ck_assert_int_eq(fr_store_get(c, longkey, 5000, &v, &len), 0);
    free(v);
    fr_store_close(c);
    fr_store_server_stop(s);
}
END_TEST

/* ---- connecting --------------------------------------------------------- */

START_TEST(test_connect_no_server)
{
    uint16_t port = free_port();
    fr_store_client *c = (fr_store_client *)1;
    char err[256] = "", want[64];
    int64_t t0 = now_ms();
    ck_assert_int_eq(fr_store_connect(HOST, port, 500, &c, err, sizeof(err)),
                     FRPC_EBOOTSTRAP);
    int64_t dt = now_ms() - t0;
    ck_assert_int_ge(dt, 400);
    ck_assert_int_lt(dt, 15000);
    ck_assert_ptr_null(c);
    snprintf(want, sizeof(want), "127.0.0.1:%u", (unsigned)port);
    ck_assert_msg(strstr(err, want) != NULL, "error text: %s", err);
    ck_assert_msg(strstr(err, "bootstrap store") != NULL, "error text: %s", err);
    /* timeout 0: one attempt only. */
    t0 = now_ms();
    ck_assert_int_eq(fr_store_connect(HOST, port, 0, &c, NULL, 0),
                     FRPC_EBOOTSTRAP);
    ck_assert_int_lt(now_ms() - t0, 15000);
    ck_assert_int_eq(fr_store_connect(NULL, port, 0, &c, NULL, 0), FRPC_EINVAL);
    ck_assert_int_eq(fr_store_connect(HOST, 0, 0, &c, NULL, 0), FRPC_EINVAL);
}
END_TEST

struct late {
    uint16_t port;
    fr_store_server *s;
    int rc;
};

static void *start_late(void *arg)
{
    struct late *l = arg;
    sleep_ms(400);
    l->rc = fr_store_server_start(HOST, l->port, &l->s, NULL, 0);
    return NULL;
}

START_TEST(test_connect_retries)
{
    struct late l = {free_port(), NULL, -1};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, start_late, &l), 0);
    fr_store_client *c = NULL;
    char err[256] = "";
    int rc = fr_store_connect(HOST, l.port, 20000, &c, err, sizeof(err));
    pthread_join(th, NULL);
    ck_assert_int_eq(l.rc, 0);
    ck_assert_msg(rc == 0, "connect: %d %s", rc, err);
    ck_assert_int_eq(fr_store_set(c, "k", "v", 1), 0);
    expect_value(c, "k", "v");
    fr_store_close(c);
    fr_store_server_stop(l.s);
}
END_TEST

struct getter {
    fr_store_client *c;
    int rc;
};

static void *get_forever(void *arg)
{
    struct getter *g = arg;
    void *v = NULL;
    size_t len;
    g->rc = fr_store_get(g->c, "never", 60000, &v, &len);
    free(v);
    return NULL;
}

START_TEST(test_stop_wakes_get)
{
    uint16_t port;
    fr_store_server *s = start_server(&port);
    struct getter g = {connect_ok(port), 1};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, get_forever, &g), 0);
    sleep_ms(300);
    int64_t t0 = now_ms();
    fr_store_server_stop(s);
    pthread_join(th, NULL);
    ck_assert_int_lt(now_ms() - t0, 20000);
    ck_assert_int_eq(g.rc, FRPC_EBOOTSTRAP);
    /* The client stays failed. */
    ck_assert_int_eq(fr_store_set(g.c, "k", "v", 1), FRPC_EBOOTSTRAP);
    fr_store_close(g.c);
}
END_TEST

/* ---- hostile peers and many clients ------------------------------------- */

static int raw_connect(uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* A request header: u8 op, u16 keylen, u32 vallen, i64 arg (LE). */
static void raw_send(int fd, uint8_t op, uint16_t klen, uint32_t vlen,
                     const char *tail, size_t tlen)
{
    uint8_t b[15 + 64] = {op, (uint8_t)klen, (uint8_t)(klen >> 8),
                          (uint8_t)vlen, (uint8_t)(vlen >> 8),
                          (uint8_t)(vlen >> 16), (uint8_t)(vlen >> 24)};
    ck_assert_uint_le(tlen, 64);
    memcpy(b + 15, tail, tlen);
    ck_assert_int_eq(send(fd, b, 15 + tlen, MSG_NOSIGNAL), (ssize_t)(15 + tlen));
}

/* True when the server closes fd within a generous bound. */
static int closed_by_server(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char b[64];
    if (poll(&p, 1, 15000) != 1)
        return 0;
    ssize_t n = recv(fd, b, sizeof(b), 0);
    return n <= 0;
}

START_TEST(test_garbage_disconnected)
{
    uint16_t port;
    fr_store_server *s = start_server(&port);
    fr_store_client *good = connect_ok(port);
    ck_assert_int_eq(fr_store_set(good, "k", "v", 1), 0);

    int partial = raw_connect(port); /* half a header, then silence */
    ck_assert_int_eq(send(partial, "\x01\x01", 2, MSG_NOSIGNAL), 2);
    int huge_val = raw_connect(port);
    raw_send(huge_val, 1, 1, 0xFFFFFFFFu, "k", 1);
    int huge_key = raw_connect(port);
    raw_send(huge_key, 2, 0xFFFF, 0, "k", 1);
    int bad_op = raw_connect(port);
    raw_send(bad_op, 0x77, 1, 0, "k", 1);
    int nul_key = raw_connect(port);
    raw_send(nul_key, 2, 2, 0, "a\0", 2);
    int noise = raw_connect(port);
    ck_assert_int_eq(send(noise, "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL), 18);
    int leaver = raw_connect(port); /* parks a GET, then goes away */
    raw_send(leaver, 2, 4, 0, "gone", 4);

    ck_assert(closed_by_server(huge_val));
    ck_assert(closed_by_server(huge_key));
    ck_assert(closed_by_server(bad_op));
    ck_assert(closed_by_server(nul_key));
    ck_assert(closed_by_server(noise));
    close(leaver);
    expect_value(good, "k", "v");
    ck_assert_int_eq(fr_store_set(good, "gone", "x", 1), 0);
    expect_value(good, "gone", "x");
    /* A new client is served while the half-sent request is pending. */
    fr_store_client *late = connect_ok(port);
    expect_value(late, "gone", "x");
    fr_store_close(late);
    close(partial);
    close(huge_val);
    close(huge_key);
    close(bad_op);
    close(nul_key);
    close(noise);
    fr_store_close(good);
    fr_store_server_stop(s);
}
END_TEST

#define NCLIENTS 64

struct peer {
    uint16_t port;
    int id;
    int rc;
};

/* Publishes its key, reads its neighbour's (which may come later: the get
 * parks), then meets every peer at a barrier. */
static void *peer_main(void *arg)
{
    struct peer *p = arg;
    fr_store_client *c = NULL;
    char key[32], mine[32], nkey[32], want[32];
    void *v = NULL;
    size_t len = 0;
    snprintf(key, sizeof(key), "addr/%d", p->id);
    snprintf(mine, sizeof(mine), "rank-%d", p->id);
    snprintf(nkey, sizeof(nkey), "addr/%d", (p->id + 1) % NCLIENTS);
    snprintf(want, sizeof(want), "rank-%d", (p->id + 1) % NCLIENTS);
    p->rc = fr_store_connect(HOST, p->port, 20000, &c, NULL, 0);
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
    uint16_t port;
    fr_store_server *s = start_server(&port);
    static struct peer p[NCLIENTS];
    pthread_t th[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++) {
        p[i] = (struct peer){port, i, -1};
        ck_assert_int_eq(pthread_create(&th[i], NULL, peer_main, &p[i]), 0);
    }
    for (int i = 0; i < NCLIENTS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(p[i].rc == 0, "peer %d: %d", i, p[i].rc);
    }
    fr_store_server_stop(s);
}
END_TEST

START_TEST(test_port_zero)
{
    uint16_t port;
    fr_store_server *s = start_server(&port);
    fr_store_client *c = connect_ok(port);
    ck_assert_int_eq(fr_store_set(c, "k", "v", 1), 0);
    /* The port is taken now: a second server names it in its error. */
    fr_store_server *s2 = (fr_store_server *)1;
    char err[256] = "", want[64];
    ck_assert_int_eq(fr_store_server_start(HOST, port, &s2, err, sizeof(err)),
                     FRPC_EBOOTSTRAP);
    ck_assert_ptr_null(s2);
    snprintf(want, sizeof(want), "cannot listen on 127.0.0.1:%u", (unsigned)port);
    ck_assert_msg(strstr(err, want) != NULL, "error text: %s", err);
    fr_store_close(c);
    fr_store_server_stop(s);
    fr_store_server_stop(NULL);
    fr_store_close(NULL);
}
END_TEST

int main(void)
{
    const struct {
        const char *name;
        const TTest *test;
        int timeout_s;
    } tests[] = {
        {"set then get returns the value", test_set_get, 30},
        {"get waits for a later set", test_get_waits_for_set, 30},
        {"get of a missing key times out", test_get_times_out, 30},
        {"add is atomic across 8 clients", test_add_atomic, 120},
        {"wait_ge wakes when the counter is reached", test_wait_ge, 60},
        {"barrier of 8 clients", test_barrier, 60},
        {"empty and largest values", test_value_sizes, 60},
        {"bad arguments are refused locally", test_bad_arguments, 30},
        {"connect without a server fails naming it", test_connect_no_server, 30},
        {"connect retries until the server starts", test_connect_retries, 60},
        {"server stop wakes a blocked get", test_stop_wakes_get, 60},
        {"malformed requests close only that client", test_garbage_disconnected, 60},
        {"64 clients exchange keys and meet", test_many_clients, 120},
        {"port 0 picks a free port", test_port_zero, 30},
    };
    Suite *su = suite_create("store");
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_set_timeout(tc, tests[i].timeout_s);
        tcase_add_test(tc, tests[i].test);
        suite_add_tcase(su, tc);
    }
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
