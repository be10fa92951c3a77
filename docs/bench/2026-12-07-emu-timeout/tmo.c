/*
 * How late an emulated 256 MiB get or put returns with timeout_ms 10
 * (the header's "Timeouts" figures, 2026-12-07): rank 1 registers 256
 * MiB its peer may read and write and answers "desc" with its
 * descriptor; rank 0 makes SETS x 15 gets, then 15 puts, into and from
 * 256 MiB of its own, and prints each time. Build against a build tree B:
 *   cc -O2 -Irpc -Iserialization -IB/rpc \
 *      docs/bench/2026-12-07-emu-timeout/tmo.c -o tmo \
 *      -LB/rpc/.libs -lfabrpc -Wl,-rpath,B/rpc/.libs
 * Run: FABRPC_RMA=emulate tools/fabrpc-run -n 2 --provider shm ./tmo 6
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <fabrpc.h>

#define LEN ((size_t)256 << 20)
#define RUNS 15

static frpc_mem *region;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void on_desc(frpc_request *req, void *user)
{
    (void)user;
    unsigned char d[FRPC_MEM_DESC_SIZE];
    if (frpc_mem_describe(region, 0, LEN, d) == 0)
        frpc_respond(req, d, sizeof(d));
    else
        frpc_respond_error(req, 1, "describe failed");
}

/* SETS sets of RUNS gets then RUNS puts; 1 if any failed otherwise. */
static int measure(frpc_agent *a, int sets)
{
    frpc_result res;
    int rc = frpc_call(a, 1, "desc", NULL, 0, 10000, &res);
    if (rc || res.len != FRPC_MEM_DESC_SIZE) {
        printf("desc: %s\n", frpc_strerror(rc));
        frpc_result_clear(&res);
        return 1;
    }
    void *buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    frpc_mem *local = NULL;
    if (buf == MAP_FAILED || frpc_mem_register(a, buf, LEN, 0, &local)) {
        frpc_result_clear(&res);
        return 1;
    }
    memset(buf, 0x5a, LEN);
    int bad = 0;
    for (int set = 0; set < sets; set++)
        for (int put = 0; put < 2; put++) {
            printf("set %d %s:", set, put ? "put" : "get");
            for (int i = 0; i < RUNS; i++) {
                double t = now_ms();
                rc = put ? frpc_put(local, 0, res.data, res.len, 0, LEN, 10)
                         : frpc_get(local, 0, res.data, res.len, 0, LEN, 10);
                printf(" %.1f", now_ms() - t);
                bad |= rc != FRPC_ETIMEDOUT && rc != 0;
            }
            printf(" ms\n");
        }
    frpc_result_clear(&res);
    bad |= frpc_mem_deregister(local, 60000) != 0;
    munmap(buf, LEN);
    return bad;
}

int main(int argc, char **argv)
{
    int sets = argc > 1 ? atoi(argv[1]) : 1, bad = 0;
    frpc_config cfg;
    frpc_agent *a;
    frpc_config_init(&cfg);
    if (frpc_init(&cfg, &a))
        return 1;
    void *mine = NULL;
    if (frpc_rank(a) == 1) {
        mine = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        bad = mine == MAP_FAILED ||
              frpc_mem_register(a, mine, LEN,
                                FRPC_MEM_REMOTE_READ | FRPC_MEM_REMOTE_WRITE,
                                &region) != 0;
    }
    frpc_register(a, "desc", on_desc, NULL, 0);
    frpc_barrier(a, 60000);
    if (frpc_rank(a) == 0 && !bad)
        bad = measure(a, sets);
    frpc_barrier(a, FRPC_TIMEOUT_NONE);
    if (region)
        frpc_mem_deregister(region, 60000);
    frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, 10000);
    return bad;
}
