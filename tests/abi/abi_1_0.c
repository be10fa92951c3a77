/*
 * A program built against the 1.0 header (tests/abi/1.0: a frozen copy,
 * never edited) and linked with today's library: it must still run. When
 * frpc_config or frpc_stats grow, this program passes the 1.0 sizes, and
 * the library must read and write no byte past them (the guard bytes
 * around each struct are checked). One rank, no launcher.
 *
 * Prints "ok: ..." and exits 0; exits 1 at the first failure.
 */
#include <stdio.h>
#include <string.h>

#include "fabrpc.h" /* tests/abi/1.0/fabrpc.h: the include path says so */

#define FAIL(...)                                                             \
    do {                                                                      \
        fprintf(stderr, "FAIL abi_1_0: " __VA_ARGS__);                       \
        fputc('\n', stderr);                                                  \
        return 1;                                                             \
    } while (0)

static void echo(frpc_request *req, void *user)
{
    size_t len;
    const void *args = frpc_request_args(req, &len);
    frpc_respond(req, args, len);
}

/* A struct with guard bytes on both sides. */
#define GUARD 0xa5
struct guarded_stats {
    unsigned char before[32];
    frpc_stats s;
    unsigned char after[32];
};

static int guards_hold(const unsigned char *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (g[i] != GUARD)
            return 0;
    return 1;
}

int main(void)
{
    struct {
        unsigned char before[32];
        frpc_config c;
        unsigned char after[32];
    } cfg;
    struct guarded_stats st;
    frpc_agent *a = NULL;
    frpc_result r;
    char err[512] = "";
    const char *ver = NULL;
    int rc;

    int lib = frpc_version(&ver);
    if (lib / 10000 != FRPC_VERSION_MAJOR || lib < FRPC_VERSION_NUMBER)
        FAIL("library %s (%d) cannot run a program built for %d.%d", ver,
             lib, FRPC_VERSION_MAJOR, FRPC_VERSION_MINOR);
    memset(&cfg, GUARD, sizeof(cfg));
    frpc_config_init(&cfg.c);
    if (!guards_hold(cfg.before, 32) || !guards_hold(cfg.after, 32))
        FAIL("frpc_config_init wrote outside the 1.0 frpc_config");
    cfg.c.rank = 0;
    cfg.c.world_size = 1;
    cfg.c.errbuf = err;
    cfg.c.errbuf_len = sizeof(err);
    if ((rc = frpc_init(&cfg.c, &a)))
        FAIL("frpc_init: %s: %s", frpc_strerror(rc), err);
    if ((rc = frpc_register(a, "echo", echo, NULL, FRPC_INLINE)))
        FAIL("frpc_register: %s", frpc_strerror(rc));
    if ((rc = frpc_call(a, 0, "echo", "abi", 3, 10000, &r)) ||
        r.len != 3 || memcmp(r.data, "abi", 3) != 0)
        FAIL("frpc_call: %s", frpc_strerror(rc));
    frpc_result_clear(&r);
    memset(&st, GUARD, sizeof(st));
    if ((rc = frpc_get_stats(a, &st.s)))
        FAIL("frpc_get_stats: %s", frpc_strerror(rc));
    if (!guards_hold(st.before, 32) || !guards_hold(st.after, 32))
        FAIL("frpc_get_stats wrote outside the 1.0 frpc_stats");
    if (st.s.calls_ok != 1 || st.s.calls_started != 1)
        FAIL("stats: %llu started, %llu ok, want 1 and 1",
             (unsigned long long)st.s.calls_started,
             (unsigned long long)st.s.calls_ok);
    if ((rc = frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, 10000)))
        FAIL("frpc_shutdown: %s", frpc_strerror(rc));
    printf("ok: a program built against the %d.%d header runs with library "
           "%s\n", FRPC_VERSION_MAJOR, FRPC_VERSION_MINOR, ver);
    return 0;
}
