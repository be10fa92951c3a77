/*
 * The guard over shm's locks while the liveness thread does not run
 * (agent.h, fr_shm_guard_*).
 *
 * libfabric 1.17's shm keeps a spin lock in each rank's region; a rank
 * killed holding one (a peer's, sending; its own, receiving) leaves every
 * thread that next takes it spinning inside the provider for ever, where
 * no deadline of ours reaches (comm/shm_repair.h). While the liveness
 * thread runs, it repairs such a lock after a same-host death (liveness.c,
 * clean_after). Before it starts (frpc_init's first sends, from the
 * ranks' connect on) and after it stops (shutdown's last polls, until the
 * fabric closes), this guard does: it sleeps in poll(2) on the same-host
 * peers' pidfds and, when one's process ends, releases the locks of this
 * host's regions that nobody alive holds, and removes the dead rank's
 * names from /dev/shm. Without it, a rank killed there
 * hung the others' frpc_init or frpc_shutdown (test_init_bound: the fault
 * site FR_FAULT_LOCK_DIES).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "comm/shm_repair.h"
#include "comm/threads.h"
#include "rpc/agent.h"

struct fr_shm_guard {
    pthread_t thread;
    const frpc_agent *a;  /* for the dead rank's names */
    fr_shm_regions reg;   /* this host's ranks', this one's included */
    struct pollfd *p;     /* [reg.n + 1]: the stop eventfd, then pidfds */
};

int fr_shm_regions_make(const frpc_agent *a, int (*pid_of)(void *, uint32_t),
                        void *ctx, fr_shm_regions *out)
{
    size_t world = (size_t)a->set.world;
    *out = (fr_shm_regions){0};
    if (!(out->ranks = calloc(world, sizeof(*out->ranks))) ||
        !(out->names = calloc(world, sizeof(*out->names))) ||
        !(out->refs = calloc(world, sizeof(*out->refs)))) {
        fr_shm_regions_free(out);
        return FRPC_ENOMEM;
    }
    for (uint32_t r = 0; r < (uint32_t)world; r++) {
        int pid = pid_of(ctx, r), i = out->n;
        if (pid <= 0)
            continue;
        out->ranks[i] = r;
        fr_agent_shm_name(a, r, out->names[i], sizeof(out->names[i]));
        out->refs[i] = (fr_shm_region_ref){.name = out->names[i], .pid = pid};
        out->n++;
    }
    return 0;
}

void fr_shm_regions_free(fr_shm_regions *r)
{
    free(r->ranks);
    free(r->names);
    free(r->refs);
    *r = (fr_shm_regions){0};
}

static void guard_free(fr_shm_guard *g)
{
    if (!g)
        return;
    for (int i = 0; g->p && i <= g->reg.n; i++)
        if (g->p[i].fd >= 0)
            close(g->p[i].fd);
    fr_shm_regions_free(&g->reg);
    free(g->p);
    free(g);
}

void fr_shm_repair_after(int rank, uint32_t dead, const fr_shm_regions *r)
{
    int released = fr_shm_release_stuck(r->refs, r->n, FR_SHM_STUCK_MS);
    if (released)
        fprintf(stderr,
                "fabrpc: rank %d: released %d shared-memory lock%s that "
                "rank %u held when it died\n",
                rank, released, released == 1 ? "" : "s", dead);
}

static void *guard_main(void *arg)
{
    fr_shm_guard *g = arg;
    for (;;) {
        int k = poll(g->p, (nfds_t)g->reg.n + 1, -1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 || g->p[0].revents)
            return NULL; /* stopped */
        for (int i = 1; i <= g->reg.n; i++)
            if (g->p[i].fd >= 0 && g->p[i].revents) {
                uint32_t dead = g->reg.ranks[i - 1];
                close(g->p[i].fd);
                g->p[i].fd = -1; /* poll skips it from now on */
                fr_shm_repair_after(g->a->set.rank, dead, &g->reg);
                /* As the liveness thread does: a killed rank's names are
                 * removed by the rank that finds it dead (fabrpc.h). */
                fr_agent_unlink_names_of(g->a, dead);
            }
    }
}

typedef struct {
    const frpc_agent *a;
    const fr_peer_info *peers;
} guard_pids;

static int guarded_pid(void *ctx, uint32_t r)
{
    const guard_pids *c = ctx;
    if (r == (uint32_t)c->a->set.rank)
        return (int)getpid();
    return c->peers[r].same_host ? c->peers[r].pid : 0;
}

int fr_shm_guard_start(frpc_agent *a, const fr_peer_info *peers,
                        fr_shm_guard **out)
{
    int watched = 0;
    guard_pids ctx = {a, peers};
    *out = NULL;
    if (!peers || a->set.world < 2 || strcmp(a->provider, "shm") != 0)
        return 0;
    fr_shm_guard *g = calloc(1, sizeof(*g));
    if (!g || fr_shm_regions_make(a, guarded_pid, &ctx, &g->reg) ||
        !(g->p = calloc((size_t)g->reg.n + 1, sizeof(*g->p)))) {
        guard_free(g);
        return FRPC_ENOMEM;
    }
    g->a = a;
    for (int i = 0; i < g->reg.n; i++) {
        int self = g->reg.ranks[i] == (uint32_t)a->set.rank;
        /* A pidfd that cannot be had (an old kernel, a peer gone and
         * reaped already) is not watched: the connect's store checks end
         * the wait if nothing spins. */
        g->p[i + 1] = (struct pollfd){
            .fd = self ? -1 : fr_pidfd_open(g->reg.refs[i].pid),
            .events = POLLIN};
        watched += g->p[i + 1].fd >= 0;
    }
    g->p[0] = (struct pollfd){
        .fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), .events = POLLIN};
    if (!watched) { /* nothing can end here, as far as we can see */
        guard_free(g);
        return 0;
    }
    if (g->p[0].fd < 0 || fr_thread_create(&g->thread, guard_main, g)) {
        guard_free(g);
        return FRPC_ENOMEM;
    }
    *out = g;
    return 0;
}

void fr_shm_guard_stop(fr_shm_guard *g)
{
    uint64_t one = 1;
    if (!g)
        return;
    while (write(g->p[0].fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
    pthread_join(g->thread, NULL);
    guard_free(g);
}
