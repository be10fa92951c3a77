/*
 * Resident set of rank 0 across N operations to the other ranks (2026-12-07,
 * see README.md): MODE sync (frpc_call, no args), async (frpc_call_async,
 * wait, free) or reg (register 64 KiB readable by peers, deregister). A
 * warm-up of 2,000 first. Build against a build tree B:
 *   cc -O2 -Irpc -Iserialization -IB/rpc -Itests/integration \
 *      docs/bench/2026-12-07-tcp-ring/calls_rss.c -o calls_rss \
 *      -LB/rpc/.libs -lfabrpc -Wl,-rpath,B/rpc/.libs
 * Run: tools/fabrpc-run -n 2 --provider tcp ./calls_rss sync 300000
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fabrpc.h>

#include "rss.h" /* tests/integration: rss_kib */

static void echo(frpc_request *req, void *user)
{
    (void)user;
    frpc_respond(req, NULL, 0);
}

/* One operation of mode to dst: 0, or the code. */
static int one(frpc_agent *a, const char *mode, int dst)
{
    static char buf[65536];
    int rc;
    if (!strcmp(mode, "sync")) {
        frpc_result r;
        rc = frpc_call(a, dst, "echo", NULL, 0, 5000, &r);
        frpc_result_clear(&r);
    } else if (!strcmp(mode, "async")) {
        frpc_future *f;
        if ((rc = frpc_call_async(a, dst, "echo", NULL, 0, 5000, &f)) == 0) {
            rc = frpc_future_wait(f, 5000);
            frpc_future_free(f);
        }
    } else {
        frpc_mem *m;
        if ((rc = frpc_mem_register(a, buf, sizeof(buf),
                                    FRPC_MEM_REMOTE_READ, &m)) == 0)
            rc = frpc_mem_deregister(m, 5000);
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    const char *mode = argv[1];
    int n = atoi(argv[2]), failed = 0;
    frpc_config cfg;
    frpc_agent *a;
    frpc_config_init(&cfg);
    if (frpc_init(&cfg, &a))
        return 1;
    frpc_register(a, "echo", echo, NULL, 0);
    frpc_barrier(a, 60000);
    int world = frpc_world_size(a);
    if (frpc_rank(a) == 0 && world > 1) {
        for (int pass = 0; pass < 2 && !failed; pass++) {
            int count = pass ? n : 2000;
            long before = rss_kib();
            struct mallinfo2 m0 = mallinfo2();
            for (int i = 0; i < count && !failed; i++) {
                int rc = one(a, mode, 1 + i % (world - 1));
                if (rc) {
                    printf("%s %d: %s\n", mode, i, frpc_strerror(rc));
                    failed = 1;
                }
            }
            struct mallinfo2 m1 = mallinfo2();
            long after = rss_kib();
            if (pass && !failed)
                printf("%s x %d: resident %ld -> %ld KiB (%.1f B each), "
                       "malloc'ed in use %+ld B\n", mode, n, before, after,
                       (after - before) * 1024.0 / n,
                       (long)(m1.uordblks - m0.uordblks));
        }
    }
    frpc_barrier(a, FRPC_TIMEOUT_NONE);
    frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, 10000);
    return failed;
}
