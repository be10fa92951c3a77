/*
 * The store's WATCH traffic when a job ends: N ranks each with a MAIN and
 * a WATCH connection to one store (as every rank's liveness watcher
 * has), a thread per watcher in a WATCH loop; ranks 1..N-1 then leave one
 * after another, or with "together" all at once, each from a thread of
 * its own (as a job's ranks reaching frpc_shutdown). Prints the time until every watcher has been told all
 * N-1 leaves, the answers the watchers read and the events they carried
 * (each watcher needs each event once). Built against a build tree's
 * comm/.libs/libfrcomm.a (run.sh); not part of the library or its tests.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/store.h"

static int world;
static fr_store_client **watchers;
static long answers, events;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *watch_loop(void *arg)
{
    fr_store_client *c = watchers[(long)arg];
    fr_store_event *ev = calloc((size_t)world, sizeof(*ev));
    uint64_t seen = 0;
    while (ev && seen < (uint64_t)world - 1) {
        size_t n = 0;
        uint64_t total = 0;
        int rc = fr_store_watch(c, seen, 60000, ev, (size_t)world, &n,
                                &total);
        if (rc) {
            fprintf(stderr, "watcher %ld: %d\n", (long)arg, rc);
            break;
        }
        pthread_mutex_lock(&count_lock);
        answers++;
        events += (long)n;
        pthread_mutex_unlock(&count_lock);
        seen = total;
    }
    free(ev);
    return NULL;
}

static void *leave_one(void *c)
{
    if (fr_store_leave(c))
        fprintf(stderr, "a leave failed\n");
    return NULL;
}

int main(int argc, char **argv)
{
    char err[256];
    world = argc > 1 ? atoi(argv[1]) : 256;
    int together = argc > 2 && strcmp(argv[2], "together") == 0;
    if (world < 2)
        return 2;
    fr_store_ident id = {.rank = 0, .world = world, .version = 1,
                         .role = FR_STORE_ROLE_MAIN};
    fr_store_server *srv;
    if (fr_store_server_start("127.0.0.1", 0, &id, &srv, err, sizeof(err))) {
        fprintf(stderr, "server: %s\n", err);
        return 1;
    }
    uint16_t port = fr_store_server_port(srv);
    fr_store_client **mains = calloc((size_t)world, sizeof(*mains));
    watchers = calloc((size_t)world, sizeof(*watchers));
    pthread_t *th = calloc((size_t)world, sizeof(*th));
    pthread_t *leavers = calloc((size_t)world, sizeof(*leavers));
    for (int r = 0; r < world; r++) {
        id.rank = r;
        id.role = FR_STORE_ROLE_MAIN;
        if (fr_store_connect("127.0.0.1", port, 10000, &id, &mains[r], err,
                             sizeof(err)) ||
            (id.role = FR_STORE_ROLE_WATCH,
             fr_store_connect("127.0.0.1", port, 10000, &id, &watchers[r],
                              err, sizeof(err)))) {
            fprintf(stderr, "rank %d: %s\n", r, err);
            return 1;
        }
    }
    for (long r = 0; r < world; r++)
        pthread_create(&th[r], NULL, watch_loop, (void *)r);
    nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
    double t0 = now_s();
    if (together) {
        for (long r = 1; r < world; r++)
            pthread_create(&leavers[r], NULL, leave_one, mains[r]);
        for (int r = 1; r < world; r++)
            pthread_join(leavers[r], NULL);
    } else {
        for (int r = 1; r < world; r++)
            leave_one(mains[r]);
    }
    for (int r = 0; r < world; r++)
        pthread_join(th[r], NULL);
    printf("N=%d%s all watchers told in %.3f s; %ld answers carrying %ld "
           "events (%.1f per watcher per rank)\n",
           world, together ? " together" : "", now_s() - t0, answers, events,
           (double)events / world / (world - 1));
    for (int r = 0; r < world; r++) {
        fr_store_close(mains[r]);
        fr_store_close(watchers[r]);
    }
    fr_store_server_stop(srv);
    return 0;
}
