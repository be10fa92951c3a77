/*
 * A parameter server on fabrpc's data plane: rank 0 holds the parameters
 * (P floats) and one gradient slot per worker, both registered; every
 * other rank is a worker. Each step a worker reads the parameters
 * straight from rank 0's memory (frpc_get), computes its gradient, writes
 * it into its slot (a batch of one put) with a notification that rank 0
 * takes only once the bytes are there. Rank 0 averages the slots, updates
 * the parameters and tells each worker to go on (frpc_notify). No handler
 * of rank 0 runs for the data: one call at the start hands each worker
 * the two descriptors.
 *
 * Worker r pulls every parameter towards its own target r + (i % 13) / 4;
 * with learning rate 1/2 each step halves the parameters' distance to the
 * workers' mean target, and the program fails (exit 1) if it did not: a
 * gradient read before its bytes landed, or a step's parameters read
 * before the update, would show.
 *
 *   fabrpc-run -n 4 ./examples/paramserver [floats [steps]]
 *
 * floats: 1 to 2^26 (MAX_FLOATS: 256 MiB a buffer), default 2^20; steps:
 * 1 to INT_MAX, default 20. Anything else is the usage message, exit 2.
 *
 * Every wait has a bound: rank 0 notices a worker that dies while it
 * waits for gradients (frpc_peer_state), a worker notices rank 0's death
 * (its transfers end FRPC_EPEERLOST), and the program says so and exits 1
 * rather than hang.
 */
/* clock_gettime under -std=c11, as a user may build it */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fabrpc.h>

#define WAIT_MS 30000 /* every wait's bound: generous, for loaded machines */
#define LR 0.5f

typedef struct step_note {
    int32_t step; /* the step whose gradient landed, or to go on to */
} step_note;

/* What "ps.layout" hands a worker: where to read and where to write. */
typedef struct layout {
    uint8_t params[FRPC_MEM_DESC_SIZE]; /* rank 0's parameters, readable */
    uint8_t slot[FRPC_MEM_DESC_SIZE];   /* the worker's gradient slot */
} layout;

typedef struct server {
    frpc_mem *params_mem, *grads_mem;
    size_t bytes; /* of the parameters, and of each slot */
} server;

static float target(int rank, size_t i)
{
    return (float)rank + (float)(i % 13) * 0.25f;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "paramserver: %s: %s (%s)\n", what, frpc_strerror(rc),
            frpc_err_name(rc));
    return 1;
}

/* rank 0: a worker asks for its descriptors (no args). */
static void ps_layout(frpc_request *req, void *user)
{
    const server *s = user;
    int src = frpc_request_source(req);
    layout l;
    int rc = frpc_mem_describe(s->params_mem, 0, s->bytes, l.params);
    if (!rc)
        rc = frpc_mem_describe(s->grads_mem, (size_t)(src - 1) * s->bytes,
                               s->bytes, l.slot);
    if (src < 1 || rc)
        frpc_respond_error(req, 1, "no slot for this rank");
    else
        frpc_respond(req, &l, sizeof l);
}

/* Takes a step note from one of the ranks r with awaited[r] set (world
 * entries), into *note and *src. A notification wait is for any sender,
 * so a lost one does not end it: the wait goes in slices, and between
 * them the awaited ranks are looked at. 0, or 1 (said on stderr). */
static int wait_note(frpc_agent *a, const char *awaited, int *src,
                     step_note *note)
{
    int world = frpc_world_size(a);
    double until = now_s() + WAIT_MS / 1000.0;
    for (;;) {
        size_t len;
        int rc = frpc_notify_wait(a, src, note, sizeof *note, &len, 200);
        if (rc == 0 && (len != sizeof *note || !awaited[*src])) {
            fprintf(stderr, "paramserver: an unexpected note from rank %d\n",
                    *src);
            return 1;
        }
        if (rc == 0)
            return 0;
        if (rc != FRPC_ETIMEDOUT || now_s() > until)
            return fail("waiting for a step note", rc);
        for (int r = 0; r < world; r++)
            if (awaited[r] && frpc_peer_state(a, r) != FRPC_PEER_ALIVE) {
                fprintf(stderr, "paramserver: rank %d %s while rank %d "
                        "waited for it\n", r,
                        frpc_peer_state(a, r) == FRPC_PEER_DEAD ? "died"
                                                                : "left",
                        frpc_rank(a));
                return 1;
            }
    }
}

/* rank 0: waits for every worker's gradient of step, then averages them
 * into the parameters. */
static int server_step(frpc_agent *a, float *params, const float *grads,
                       size_t n, int workers, int step)
{
    char awaited[workers + 1];
    memset(awaited, 1, sizeof awaited);
    awaited[0] = 0;
    for (int got = 0; got < workers; got++) {
        step_note note;
        int src;
        if (wait_note(a, awaited, &src, &note))
            return 1;
        if (note.step != step) {
            fprintf(stderr, "paramserver: rank %d sent step %d, want %d\n",
                    src, note.step, step);
            return 1;
        }
        awaited[src] = 0; /* one note per worker and step */
    }
    for (size_t i = 0; i < n; i++) {
        float sum = 0;
        for (int w = 0; w < workers; w++)
            sum += grads[(size_t)w * n + i];
        params[i] -= LR * sum / (float)workers;
    }
    step_note go = {.step = step + 1};
    for (int w = 1; w <= workers; w++) {
        int rc = frpc_notify(a, w, &go, sizeof go, WAIT_MS);
        if (rc) {
            fprintf(stderr, "paramserver: telling rank %d to go on: %s "
                    "(%s)\n", w, frpc_strerror(rc), frpc_err_name(rc));
            return 1;
        }
    }
    return 0;
}

/* The largest distance of the parameters from the workers' mean target. */
static double distance(const float *params, size_t n, int workers)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double mean = (1.0 + workers) / 2.0 + (double)(i % 13) * 0.25;
        double d = (double)params[i] - mean;
        d = d < 0 ? -d : d;
        worst = d > worst ? d : worst;
    }
    return worst;
}

static int run_server(frpc_agent *a, size_t n, int steps)
{
    int workers = frpc_world_size(a) - 1;
    float *params = calloc(n, sizeof(float));
    float *grads = calloc(n * (size_t)workers, sizeof(float));
    server s = {.bytes = n * sizeof(float)};
    int rc, failed = 1;

    if (!params || !grads) {
        fprintf(stderr, "paramserver: out of memory\n");
        goto out;
    }
    if ((rc = frpc_mem_register(a, params, s.bytes, FRPC_MEM_REMOTE_READ,
                                &s.params_mem)) ||
        (rc = frpc_mem_register(a, grads, s.bytes * (size_t)workers,
                                FRPC_MEM_REMOTE_WRITE, &s.grads_mem)) ||
        (rc = frpc_register(a, "ps.layout", ps_layout, &s, 0)) ||
        (rc = frpc_barrier(a, WAIT_MS))) {
        fail("setting up rank 0", rc);
        goto out;
    }
    printf("%d workers, %zu parameters (%.1f MiB), %d steps, provider %s\n",
           workers, n, (double)s.bytes / (1 << 20), steps, frpc_provider(a));
    double d0 = distance(params, n, workers), t0 = now_s();
    for (int step = 1; step <= steps; step++) {
        if (server_step(a, params, grads, n, workers, step))
            goto out;
        if (step == 1 || (step <= 20 && step % 5 == 0) ||
            step % 10000 == 0 || step == steps)
            printf("step %d: distance to the mean target %.6f\n", step,
                   distance(params, n, workers));
    }
    double took = now_s() - t0;
    /* Each step moves the parameters to every worker and a gradient back. */
    double moved = 2.0 * (double)s.bytes * workers * steps;
    printf("%d steps in %.3f s: %.1f MiB moved, %.2f GB/s\n", steps, took,
           moved / (1 << 20), moved / took / 1e9);
    /* Each step halves the distance (LR 1/2), floats' rounding aside. */
    double d = distance(params, n, workers), want = d0;
    for (int i = 0; i < steps && want > 0; i++)
        want *= 0.5;
    failed = !(d <= want * 1.01 + 1e-4);
    if (failed)
        fprintf(stderr, "paramserver: did not converge: distance %g after "
                "%d steps, want %g\n", d, steps, want);
out:
    /* Deregistered only once every worker is done with the descriptors
     * (a failed rank does not wait: it leaves at once). */
    if (!failed && (rc = frpc_barrier(a, WAIT_MS)))
        failed = fail("the last barrier", rc);
    if (s.params_mem && (rc = frpc_mem_deregister(s.params_mem, WAIT_MS)))
        failed |= fail("deregistering the parameters", rc);
    if (s.grads_mem && (rc = frpc_mem_deregister(s.grads_mem, WAIT_MS)))
        failed |= fail("deregistering the gradients", rc);
    free(params);
    free(grads);
    return failed;
}

static int run_worker(frpc_agent *a, size_t n, int steps)
{
    int me = frpc_rank(a), rc, failed = 1;
    size_t bytes = n * sizeof(float);
    float *params = malloc(bytes), *grad = malloc(bytes);
    frpc_mem *params_mem = NULL, *grad_mem = NULL;
    frpc_result res = {0};
    layout l;
    char from_server[frpc_world_size(a)]; /* only rank 0's notes */
    memset(from_server, 0, sizeof from_server);
    from_server[0] = 1;

    if (!params || !grad) {
        fprintf(stderr, "paramserver: out of memory\n");
        goto out;
    }
    /* Local sides only: no peer reads or writes these. */
    if ((rc = frpc_mem_register(a, params, bytes, 0, &params_mem)) ||
        (rc = frpc_mem_register(a, grad, bytes, 0, &grad_mem)) ||
        (rc = frpc_barrier(a, WAIT_MS))) {
        fail("setting up a worker", rc);
        goto out;
    }
    rc = frpc_call(a, 0, "ps.layout", NULL, 0, WAIT_MS, &res);
    if (rc || res.len != sizeof l) {
        fprintf(stderr, "paramserver: ps.layout: %s: %s\n",
                frpc_strerror(rc), res.error ? res.error : "wrong size");
        goto out;
    }
    memcpy(&l, res.data, sizeof l);
    for (int step = 1; step <= steps; step++) {
        if ((rc = frpc_get(params_mem, 0, l.params, sizeof l.params, 0, bytes,
                           WAIT_MS))) {
            fail("reading the parameters from rank 0", rc);
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            grad[i] = params[i] - target(me, i);
        /* The note reaches rank 0 only once the gradient is in its slot. */
        frpc_xfer put = {.op = FRPC_XFER_PUT, .local = grad_mem,
                         .desc = l.slot, .desc_len = sizeof l.slot,
                         .len = bytes};
        step_note note = {.step = step}, go;
        int src;
        if ((rc = frpc_transfer(&put, 1, &note, sizeof note, WAIT_MS))) {
            fail("writing the gradient to rank 0", rc);
            goto out;
        }
        if (wait_note(a, from_server, &src, &go))
            goto out;
        if (go.step != step + 1) {
            fprintf(stderr, "paramserver: rank %d said go to %d, want %d\n",
                    src, go.step, step + 1);
            goto out;
        }
    }
    failed = 0;
out:
    if (!failed && (rc = frpc_barrier(a, WAIT_MS)))
        failed = fail("the last barrier", rc);
    frpc_result_clear(&res);
    if (params_mem && (rc = frpc_mem_deregister(params_mem, WAIT_MS)))
        failed |= fail("deregistering", rc);
    if (grad_mem && (rc = frpc_mem_deregister(grad_mem, WAIT_MS)))
        failed |= fail("deregistering", rc);
    free(params);
    free(grad);
    return failed;
}

/* The most parameters: 256 MiB of floats. Rank 0 holds them and a
 * gradient slot of as many per worker, each worker two buffers of them. */
#define MAX_FLOATS (1ul << 26)

/* A whole decimal (or 0x hex) number from 1 to max into *out, else -1:
 * no sign, nothing after it, no overflow. */
static int parse_count(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    if (*s < '0' || *s > '9') /* strtoul would take "-5" as a huge one */
        return -1;
    errno = 0;
    unsigned long v = strtoul(s, &end, 0);
    if (errno || *end || v < 1 || v > max)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    unsigned long n = 1ul << 20, steps = 20;
    char err[512];
    frpc_config cfg;
    frpc_agent *a;

    setvbuf(stdout, NULL, _IOLBF, 0); /* each step's line as it comes */
    if (argc > 3 || (argc > 1 && parse_count(argv[1], MAX_FLOATS, &n)) ||
        (argc > 2 && parse_count(argv[2], INT_MAX, &steps))) {
        fprintf(stderr, "usage: %s [floats (1 to %lu, default 1048576) "
                "[steps (1 to %d, default 20)]]\n", argv[0], MAX_FLOATS,
                INT_MAX);
        return 2;
    }
    frpc_config_init(&cfg);
    cfg.errbuf = err;
    cfg.errbuf_len = sizeof err;
    int rc = frpc_init(&cfg, &a);
    if (rc) {
        fprintf(stderr, "init: %s: %s\n", frpc_strerror(rc), err);
        return 1;
    }
    if (frpc_world_size(a) < 2) {
        fprintf(stderr, "paramserver: needs 2 ranks or more (rank 0 serves, "
                "the others work): fabrpc-run -n 4 %s\n", argv[0]);
        frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 0);
        return 2;
    }
    int failed = frpc_rank(a) == 0 ? run_server(a, n, (int)steps)
                                   : run_worker(a, n, (int)steps);
    /* A failed rank leaves at once; the others' waits end by their
     * timeouts or by its loss. */
    rc = frpc_shutdown(a, failed ? FRPC_SHUTDOWN_IMMEDIATE
                                 : FRPC_SHUTDOWN_GRACEFUL, WAIT_MS);
    return failed || rc ? 1 : 0;
}
