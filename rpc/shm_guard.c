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
    int rank;             /* this rank, for the message */
    int n;                /* same-host ranks, this one included */
    uint32_t *ranks;      /* [n]: their ranks */
    char (*names)[128];   /* [n]: their regions' names */
    fr_shm_region_ref *refs; /* [n]: names and pids, for the repair */
    struct pollfd *p;     /* [n + 1]: the stop eventfd, then the pidfds */
};

static void guard_free(fr_shm_guard *g)
{
    if (!g)
        return;
    for (int i = 0; g->p && i <= g->n; i++)
        if (g->p[i].fd >= 0)
            close(g->p[i].fd);
    free(g->ranks);
    free(g->names);
    free(g->refs);
    free(g->p);
    free(g);
}

void fr_shm_repair_after(int rank, uint32_t dead,
                         const fr_shm_region_ref *regions, int n)
{
    int released = fr_shm_release_stuck(regions, n, FR_SHM_STUCK_MS);
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
        int k = poll(g->p, (nfds_t)g->n + 1, -1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 || g->p[0].revents)
            return NULL; /* stopped */
        for (int i = 1; i <= g->n; i++)
            if (g->p[i].fd >= 0 && g->p[i].revents) {
                close(g->p[i].fd);
                g->p[i].fd = -1; /* poll skips it from now on */
                fr_shm_repair_after(g->rank, g->ranks[i - 1], g->refs, g->n);
                /* As the liveness thread does: a killed rank's names are
                 * removed by the rank that finds it dead (fabrpc.h). */
                fr_agent_unlink_names_of(g->a, g->ranks[i - 1]);
            }
    }
}

int fr_shm_guard_start(frpc_agent *a, const fr_peer_info *peers,
                        fr_shm_guard **out)
{
    int world = a->set.world, n = 0, watched = 0;
    *out = NULL;
    if (!peers || world < 2 || strcmp(a->provider, "shm") != 0)
        return 0;
    fr_shm_guard *g = calloc(1, sizeof(*g));
    if (!g || !(g->ranks = calloc((size_t)world, sizeof(*g->ranks))) ||
        !(g->names = calloc((size_t)world, sizeof(*g->names))) ||
        !(g->refs = calloc((size_t)world, sizeof(*g->refs))) ||
        !(g->p = calloc((size_t)world + 1, sizeof(*g->p)))) {
        guard_free(g);
        return FRPC_ENOMEM;
    }
    g->a = a;
    g->rank = a->set.rank;
    for (int i = 0; i <= world; i++)
        g->p[i].fd = -1;
    for (int r = 0; r < world; r++) {
        int self = r == a->set.rank;
        if (!self && (!peers[r].same_host || peers[r].pid <= 0))
            continue;
        g->ranks[n] = (uint32_t)r;
        fr_agent_shm_name(a, (uint32_t)r, g->names[n], sizeof(g->names[n]));
        g->refs[n].name = g->names[n];
        g->refs[n].pid = self ? (int)getpid() : peers[r].pid;
        /* A pidfd that cannot be had (an old kernel, a peer gone and
         * reaped already) is not watched: the connect's store checks end
         * the wait if nothing spins. */
        g->p[n + 1] = (struct pollfd){
            .fd = self ? -1 : fr_pidfd_open(peers[r].pid), .events = POLLIN};
        watched += g->p[n + 1].fd >= 0;
        n++;
    }
    g->n = n;
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
