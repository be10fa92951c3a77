/*
 * stranger: a process outside the job, with the job's addresses and even
 * its stolen token, sends the members what it likes while they call each
 * other. Members must run nothing on its behalf, count what they drop,
 * and keep answering each other at the usual pace.
 *
 * Members: fabrpc-run -n 2 [--provider P] stranger
 *   Each rank writes its fabric address to $STRANGER_DIR/addr.R, rank 0
 *   the job token to $STRANGER_DIR/token; then both call each other
 *   ("echo", small and rendezvous-sized args, every answer checked) until
 *   $STRANGER_DIR/done appears, call a little more, and check that no
 *   handler ran for the stranger, that every call succeeded in time, and
 *   that the drop counters (fr_fabric_get_stats) account for what the
 *   stranger's report ($STRANGER_DIR/report) says it sent.
 * Stranger: stranger --stranger PROVIDER (not under fabrpc-run)
 *   Opens endpoints of its own on PROVIDER, takes the members' addresses
 *   and token from the files, and sends each member: random bytes of many
 *   sizes; raw messages of 64 KiB + 1, 1 MiB and 16 MiB (over the receive
 *   buffers); well-formed requests with a wrong token; requests, answers
 *   and RNDV_DONEs with the stolen token claiming to be rank 1; forged
 *   rendezvous descriptors. Then, below libfabric, plain TCP connections
 *   to the members' listening ports (tcp) and to the bootstrap store's
 *   (every provider): random bytes of many sizes, and 20 connections held
 *   open. Then writes the report.
 *
 * Links the layers' internals (raw fabric, the agent's token).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "comm/clock.h"
#include "comm/fabric_internal.h"
#include "comm/fault.h"
#include "comm/providers.h"
#include "rpc/agent.h"
#include "serialization/envelope.h"

#include "check_fail.h"

#define TIMEOUT_MS 20000
#define SLOW_MS 10000 /* a member call slower than this fails the test */
#define ATTACK_MAX_S 100
#define BIG_ARGS (256u << 10) /* rendezvous-sized member calls */
#define MEMBER_EAGER (64u << 10)
#define ADDR_MAX 256

static atomic_int handled_member, handled_stranger;

/* ---- files --------------------------------------------------------- */

static const char *dir(void)
{
    const char *d = getenv("STRANGER_DIR");
    CHECK(d && *d, "STRANGER_DIR is not set");
    return d;
}

static void write_file(const char *name, const void *data, size_t len)
{
    char path[512], tmp[520];
    snprintf(path, sizeof(path), "%s/%s", dir(), name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *fp = fopen(tmp, "wb");
    CHECK(fp && fwrite(data, 1, len, fp) == len && fclose(fp) == 0,
          "write %s", tmp);
    CHECK(rename(tmp, path) == 0, "rename %s", path);
}

/* Reads name into buf (up to cap bytes), waiting up to wait_ms for it to
 * appear: its length, or -1. */
static long read_file(const char *name, void *buf, size_t cap, int wait_ms)
{
    char path[512];
    uint64_t deadline = fr_deadline_ms(wait_ms);
    snprintf(path, sizeof(path), "%s/%s", dir(), name);
    for (;;) {
        FILE *fp = fopen(path, "rb");
        if (fp) {
            size_t n = fread(buf, 1, cap, fp);
            fclose(fp);
            return (long)n;
        }
        if (fr_now_ns() >= deadline)
            return -1;
        usleep(20000);
    }
}

static int file_exists(const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir(), name);
    return stat(path, &st) == 0;
}

/* ---- members ------------------------------------------------------- */

static void echo(frpc_request *req, void *user)
{
    size_t len;
    const char *args = frpc_request_args(req, &len);
    (void)user;
    if (len >= 6 && memcmp(args, "member", 6) == 0 &&
        (frpc_request_source(req) == 0 || frpc_request_source(req) == 1))
        atomic_fetch_add(&handled_member, 1);
    else
        atomic_fetch_add(&handled_stranger, 1);
    frpc_respond(req, args, len);
}

typedef struct member_stats {
    long calls, big_calls;
    double max_ms;
} member_stats;

static void call_peer(frpc_agent *a, long i, uint8_t *big, member_stats *ms)
{
    char small[64];
    frpc_result res;
    const void *args = small;
    size_t len;

    if (i % 16 == 15) { /* every 16th: rendezvous-sized */
        snprintf((char *)big, 64, "member %d call %ld", me, i);
        for (size_t j = 64; j < BIG_ARGS; j++)
            big[j] = (uint8_t)(j * 31 + (size_t)i);
        args = big;
        len = BIG_ARGS;
        ms->big_calls++;
    } else {
        len = (size_t)snprintf(small, sizeof(small), "member %d call %ld", me,
                               i);
    }
    uint64_t t0 = fr_now_ns();
    int rc = frpc_call(a, 1 - me, "echo", args, len, TIMEOUT_MS, &res);
    double ms_taken = (double)(fr_now_ns() - t0) / 1e6;
    CHECK(rc == 0, "call %ld to rank %d: %s", i, 1 - me,
          res.error ? res.error : frpc_strerror(rc));
    CHECK(res.len == len && memcmp(res.data, args, len) == 0,
          "call %ld: a wrong answer (%zu bytes for %zu)", i, res.len, len);
    CHECK(ms_taken < SLOW_MS, "call %ld took %.0f ms", i, ms_taken);
    if (ms_taken > ms->max_ms)
        ms->max_ms = ms_taken;
    ms->calls++;
    frpc_result_clear(&res);
}

/* The stranger's report: "name count" lines. */
static long report_count(const char *report, const char *name)
{
    char key[64];
    snprintf(key, sizeof(key), "%s ", name);
    const char *p = strstr(report, key);
    return p ? atol(p + strlen(key)) : 0;
}

static void check_drops(frpc_agent *a, const char *report)
{
    fr_fabric_stats st;
    fr_fabric_get_stats(a->fab, &st);
    printf("rank %d drops: stranger %llu oversize %llu malformed %llu "
           "token %llu lost %llu; source check %s\n",
           me, (unsigned long long)st.dropped_stranger,
           (unsigned long long)st.dropped_oversize,
           (unsigned long long)st.dropped_malformed,
           (unsigned long long)st.dropped_token,
           (unsigned long long)st.dropped_lost,
           a->fab->check_src ? "on" : "off (token only)");
    long frames = report_count(report, "random") +
                  report_count(report, "wrong_token") +
                  report_count(report, "stolen_token") +
                  report_count(report, "forged_rndv");
    long oversize = report_count(report, "oversize");
    CHECK(frames > 0, "the stranger sent nothing: %s", report);
    if (a->fab->check_src) {
        CHECK(st.dropped_stranger > 0, "no frame counted as a stranger's");
    } else {
        CHECK(st.dropped_malformed > 0 && st.dropped_token > 0,
              "token-only provider: malformed %llu, token %llu",
              (unsigned long long)st.dropped_malformed,
              (unsigned long long)st.dropped_token);
    }
    if (oversize > 0)
        CHECK(st.dropped_oversize > 0,
              "%ld oversize messages sent, none counted", oversize);
    CHECK(st.dropped_lost == 0, "frames from a lost rank with none lost");
    /* What a user sees: frpc_stats's frames_* say the same (read after
     * the transport's own counters, so at least as many). */
    frpc_stats ps;
    CHECK(frpc_get_stats(a, &ps) == 0, "frpc_get_stats");
    CHECK(ps.frames_stranger >= st.dropped_stranger &&
              ps.frames_oversize >= st.dropped_oversize &&
              ps.frames_malformed >= st.dropped_malformed &&
              ps.frames_bad_token >= st.dropped_token &&
              ps.frames_from_lost == 0,
          "frpc_stats: stranger %llu oversize %llu malformed %llu token "
          "%llu lost %llu",
          (unsigned long long)ps.frames_stranger,
          (unsigned long long)ps.frames_oversize,
          (unsigned long long)ps.frames_malformed,
          (unsigned long long)ps.frames_bad_token,
          (unsigned long long)ps.frames_from_lost);
    CHECK(ps.frames_stranger + ps.frames_malformed + ps.frames_bad_token > 0,
          "frpc_stats counted none of the stranger's frames");
    CHECK(ps.bytes_sent > 0 && ps.bytes_received > 0 && ps.messages_sent > 0,
          "frpc_stats after calls: %llu bytes sent, %llu received, %llu "
          "messages", (unsigned long long)ps.bytes_sent,
          (unsigned long long)ps.bytes_received,
          (unsigned long long)ps.messages_sent);
}

static int member(void)
{
    char err[1024] = "";
    frpc_config cfg;
    frpc_agent *a;
    member_stats ms = {0};
    uint8_t *big = malloc(BIG_ARGS);
    char addr[ADDR_MAX], name[32];
    size_t alen = sizeof(addr);

    setvbuf(stdout, NULL, _IOLBF, 0);
    frpc_config_init(&cfg);
    cfg.errbuf = err;
    cfg.errbuf_len = sizeof(err);
    CHECK(big, "malloc");
    /* Over shm a rank's region has no name once frpc_init returns, and
     * the stranger could not reach it at all: keep it, so that what it
     * sends is refused by the members themselves. */
    fr_fault_arm(FR_FAULT_SHM_NAME_KEPT, 1);
    int rc = frpc_init(&cfg, &a);
    CHECK(rc == 0, "init: %s", err);
    me = frpc_rank(a);
    CHECK(frpc_world_size(a) == 2, "run with 2 ranks");
    CHECK(frpc_register(a, "echo", echo, NULL, 0) == 0, "register");
    CHECK(fr_fabric_getname(a->fab, addr, &alen) == 0, "getname");
    snprintf(name, sizeof(name), "addr.%d", me);
    write_file(name, addr, alen);
    if (me == 0) {
        write_file("token", &a->token, sizeof(a->token));
        const char *store = getenv("FABRPC_STORE_ADDR");
        if (store)
            write_file("store", store, strlen(store));
    }
    CHECK(frpc_barrier(a, TIMEOUT_MS) == 0, "barrier");
    snprintf(name, sizeof(name), "ready.%d", me);
    write_file(name, "1", 1);

    uint64_t end = fr_deadline_ms(ATTACK_MAX_S * 1000);
    long i = 0;
    while (!file_exists("done")) {
        CHECK(fr_now_ns() < end, "no end of the attack after %d s",
              ATTACK_MAX_S);
        call_peer(a, i++, big, &ms);
        usleep(500); /* leave the stranger a core */
    }
    long during = ms.calls;
    for (int k = 0; k < 50; k++)
        call_peer(a, i++, big, &ms);
    CHECK(frpc_barrier(a, TIMEOUT_MS) == 0, "barrier after");

    char report[4096] = "";
    long n = read_file("report", report, sizeof(report) - 1, 1000);
    CHECK(n > 0, "no report from the stranger");
    report[n] = '\0';
    CHECK(atomic_load(&handled_stranger) == 0,
          "%d handler runs for the stranger", atomic_load(&handled_stranger));
    CHECK(during > 0, "no member call ran while the stranger sent");
    printf("ok: rank %d made %ld calls (%ld during the attack, %ld by "
           "rendezvous), slowest %.1f ms, served %d, none for the "
           "stranger\n",
           me, ms.calls, during, ms.big_calls, ms.max_ms,
           atomic_load(&handled_member));
    check_drops(a, report);
    CHECK(frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, TIMEOUT_MS) == 0,
          "shutdown");
    free(big);
    return 0;
}

/* ---- the stranger -------------------------------------------------- */


static atomic_long stranger_got; /* anything a member sent us */

static void stranger_on_msg(void *ctx, fr_fabric_msg *m)
{
    (void)ctx;
    (void)m;
    atomic_fetch_add(&stranger_got, 1);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static fr_fabric *open_stranger(const fr_backend *b, size_t eager,
                                const char *tag, uint64_t token,
                                const char addrs[2][ADDR_MAX],
                                const size_t alen[2])
{
    char err[512] = "", name[64];
    fr_fabric *f;
    fr_fabric_opts o = {.max_msg = 32u << 20,
                        .eager_max = eager,
                        .recv_count = 1,
                        .cb = {.on_msg = stranger_on_msg}};
    if (strcmp(b->name, "shm") == 0) {
        snprintf(name, sizeof(name), "fabrpc_stranger_%s_%d", tag,
                 (int)getpid());
        o.ep_name = name;
    }
    int rc = fr_fabric_open(b->info, &o, &f, err, sizeof(err));
    CHECK(rc == 0, "stranger open: %s", err);
    /* It claims rank 1 and stamps the stolen token. */
    CHECK(fr_fabric_set_identity(f, 1, 2, token) == 0, "identity");
    for (uint32_t r = 0; r < 2; r++)
        CHECK(fr_fabric_set_peer(f, r, addrs[r], alen[r]) == 0, "set peer");
    return f;
}

/* Gives the stranger's sends time to go (rendezvous and large messages
 * need its progress). */
static void drain(fr_fabric *f, int ms)
{
    uint64_t end = fr_deadline_ms(ms);
    while (fr_now_ns() < end) {
        fr_fabric_progress(f);
        usleep(200);
    }
}

static int raw(fr_fabric *f, uint32_t dst, const void *b, size_t len)
{
    return fr_fabric_send_raw(f, dst, b, len, fr_deadline_ms(3000)) == 0;
}

static size_t header(uint8_t *buf, uint8_t kind, uint16_t flags,
                     uint64_t req_id, uint64_t token, uint64_t payload_len)
{
    fr_env e = {.kind = kind, .flags = flags, .req_id = req_id,
                .func_id = kind == FR_ENV_REQUEST ? fr_func_id("echo") : 0,
                .src_rank = 1, .token = token, .payload_len = payload_len};
    CHECK(fr_env_encode(&e, buf, FR_ENV_HDR_SIZE) == 0, "encode");
    return FR_ENV_HDR_SIZE;
}

/* The TCP port in a member's fabric address (tcp, sockets: a sockaddr),
 * or 0. */
static int addr_port(const void *addr, size_t len)
{
    struct sockaddr_storage ss = {0};
    memcpy(&ss, addr, len < sizeof(ss) ? len : sizeof(ss));
    if (ss.ss_family == AF_INET && len >= sizeof(struct sockaddr_in))
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return 0;
}

static int connect_local(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

#define RAW_HELD 20

/* Below libfabric: TCP connections to port that send random bytes of many
 * sizes and close, and RAW_HELD that stay open a while, half of them
 * after a few bytes. Returns the connections made. */
static long raw_tcp(int port, uint8_t *junk, size_t cap)
{
    static const size_t sizes[] = {1, 7, 64, 200, 4096, 70000};
    int held[RAW_HELD];
    long made = 0;
    for (int round = 0; round < 5; round++)
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            int fd = connect_local(port);
            if (fd < 0)
                continue;
            for (size_t k = 0; k < sizes[i] && k < cap; k++)
                junk[k] = (uint8_t)next_rand();
            ssize_t w = send(fd, junk, sizes[i] < cap ? sizes[i] : cap,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
            close(fd);
            made++;
        }
    for (int i = 0; i < RAW_HELD; i++) {
        held[i] = connect_local(port);
        if (held[i] >= 0 && i % 2) {
            for (size_t k = 0; k < 50; k++)
                junk[k] = (uint8_t)next_rand();
            ssize_t w = send(held[i], junk, 1 + i, MSG_NOSIGNAL);
            (void)w;
        }
        made += held[i] >= 0;
    }
    usleep(2000000); /* the members keep calling meanwhile */
    for (int i = 0; i < RAW_HELD; i++)
        if (held[i] >= 0)
            close(held[i]);
    return made;
}

static int stranger(const char *provider)
{
    char addrs[2][ADDR_MAX];
    size_t alen[2];
    uint64_t token;
    fr_backends bs;
    long sent_random = 0, sent_oversize = 0, sent_wrong = 0, sent_stolen = 0,
         sent_rndv = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int r = 0; r < 2; r++) {
        char name[32];
        snprintf(name, sizeof(name), "addr.%d", r);
        long n = read_file(name, addrs[r], ADDR_MAX, 30000);
        CHECK(n > 0, "no %s", name);
        alen[r] = (size_t)n;
    }
    CHECK(read_file("token", &token, sizeof(token), 30000) ==
              (long)sizeof(token),
          "no token");
    CHECK(fr_backends_discover(&bs, provider) == 0, "discover");
    const fr_backend *b = fr_backends_find(&bs, provider);
    CHECK(b && b->up, "provider %s is not up here", provider);

    fr_fabric *f = open_stranger(b, MEMBER_EAGER, "small", token, addrs, alen);
    uint8_t *buf = malloc(MEMBER_EAGER);
    CHECK(buf, "malloc");

    for (uint32_t dst = 0; dst < 2; dst++) {
        /* Random bytes, 1 B to a whole receive buffer. */
        for (int i = 0; i < 60; i++) {
            size_t len = i < 20   ? 1 + next_rand() % 64
                         : i < 50 ? 1 + next_rand() % 4096
                                  : 1 + next_rand() % MEMBER_EAGER;
            for (size_t j = 0; j < len; j++)
                buf[j] = (uint8_t)next_rand();
            if (i % 3 == 0 && len >= 8) { /* looks right */
                memcpy(buf, "FRPC\x00\x01\x00\x00", 8);
                buf[4] = FR_ENV_VERSION;
            }
            sent_random += raw(f, dst, buf, len);
        }
        /* Well-formed requests with a wrong token. */
        for (int i = 0; i < 20; i++) {
            size_t n = header(buf, FR_ENV_REQUEST, 0, 1000 + (uint64_t)i,
                              token ^ 0x5a5a5a5a5a5a5a5aull, 8);
            memcpy(buf + n, "stranger", 8);
            sent_wrong += raw(f, dst, buf, n + 8);
        }
        /* The stolen token, claiming to be rank 1: requests, answers to
         * calls members may have in flight, releases of their blocks.
         * Where the provider reports no sources the token is the only
         * proof of membership (fabric.h), so a thief is a member there:
         * not tried. */
        for (int i = 0; i < 20 && f->check_src; i++) {
            fr_env e = {.kind = FR_ENV_REQUEST, .req_id = 2000 + (uint64_t)i,
                        .func_id = fr_func_id("echo")};
            sent_stolen += fr_fabric_send(f, dst, &e, "stranger stolen", 15,
                                          fr_deadline_ms(3000)) == 0;
        }
        for (uint64_t id = 1; id <= 100 && f->check_src; id++) {
            size_t n = header(buf, FR_ENV_RESPONSE, 0, id, token, 8);
            memcpy(buf + n, "stranger", 8);
            sent_stolen += raw(f, dst, buf, n + 8);
            n = header(buf, FR_ENV_RNDV_DONE, 0, id, token, 0);
            sent_stolen += raw(f, dst, buf, n);
        }
        /* Forged rendezvous: requests and answers whose descriptors point
         * at nothing (or at the stranger's own garbage). */
        for (int i = 0; i < 10 && f->check_src; i++) {
            fr_rndv_desc d = {.addr = next_rand(), .key = next_rand(),
                              .len = 1 + next_rand() % (4u << 20),
                              .cookie = 1 + (uint64_t)i};
            size_t n = header(buf, i % 2 ? FR_ENV_RESPONSE : FR_ENV_REQUEST,
                              FR_ENV_F_RNDV, 1 + (uint64_t)i, token,
                              FR_RNDV_DESC_SIZE);
            CHECK(fr_rndv_encode(&d, buf + n, FR_RNDV_DESC_SIZE) == 0,
                  "rndv encode");
            sent_rndv += raw(f, dst, buf, n + FR_RNDV_DESC_SIZE);
        }
        drain(f, 200);
    }
    drain(f, 1000);

    /* Messages larger than the members' receive buffers, from an
     * endpoint whose own buffers are that large. */
    static const size_t sizes[3] = {MEMBER_EAGER + 1, 1u << 20, 16u << 20};
    fr_fabric *fb = open_stranger(b, (16u << 20) + 64, "big", token, addrs,
                                  alen);
    uint8_t *huge = malloc(16u << 20);
    CHECK(huge, "malloc");
    for (size_t j = 0; j < (16u << 20); j++)
        huge[j] = (uint8_t)(j * 7);
    for (uint32_t dst = 0; dst < 2; dst++)
        for (int i = 0; i < 3; i++) {
            int ok = raw(fb, dst, huge, sizes[i]);
            printf("stranger: %zu raw bytes to rank %u: %s\n", sizes[i], dst,
                   ok ? "sent" : "not sent");
            sent_oversize += ok;
            drain(fb, 300);
        }
    drain(fb, 2000);

    /* tcp and sockets listen on a TCP port, and rank 0's store on
     * another: bytes that are not libfabric's or the store's protocol. */
    long sent_raw = 0;
    /* Not at sockets' own port: libfabric 1.17's sockets provider stalls
     * every transfer of the rank for good once a connection to it sends
     * bytes that are not its protocol (all calls time out; README, "The
     * sockets provider"). Its store port is attacked all the same. */
    for (int r = 0; r < 2 && strcmp(provider, "sockets") != 0; r++) {
        int port = addr_port(addrs[r], alen[r]);
        if (port)
            sent_raw += raw_tcp(port, huge, 16u << 20);
    }
    char store[128] = "";
    long sn = read_file("store", store, sizeof(store) - 1, 0);
    const char *colon = sn > 0 ? strrchr(store, ':') : NULL;
    if (colon)
        sent_raw += raw_tcp(atoi(colon + 1), huge, 16u << 20);
    printf("stranger: %ld raw TCP connections (the store's port, and the "
           "members' on tcp)\n", sent_raw);

    fr_fabric_stats st;
    fr_fabric_get_stats(f, &st);
    char report[512];
    int n = snprintf(report, sizeof(report),
                     "random %ld\nwrong_token %ld\nstolen_token %ld\n"
                     "forged_rndv %ld\noversize %ld\nanswers_to_stranger %ld\n",
                     sent_random, sent_wrong, sent_stolen, sent_rndv,
                     sent_oversize, atomic_load(&stranger_got));
    write_file("report", report, (size_t)n);
    printf("stranger report:\n%s", report);
    fr_fabric_close(fb);
    fr_fabric_close(f);
    fr_backends_free(&bs);
    free(huge);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--stranger") == 0)
        return stranger(argv[2]);
    return member();
}
