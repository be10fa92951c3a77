/*
 * Enough open files for the job's world before frpc_init connects.
 *
 * Rank 0 serves the bootstrap store: two connections from every rank
 * (its own and its liveness watch). Every rank holds a handle on each
 * same-host peer's process (pidfd) and, over tcp, a socket per peer.
 * Measured (4 per rank on rank 0, 2 elsewhere, about 20 besides), the
 * common soft limit of 1024 runs out on rank 0 near 250 ranks; it then
 * cannot accept a rank's connection, and ranks failed at the init
 * timeout with "the bootstrap store did not answer in time". So the
 * soft limit is raised toward the hard one when the world needs more,
 * and where even the hard one is short the rank says so on stderr before
 * anything fails.
 */
#include "config.h"

#include <stdio.h>
#include <sys/resource.h>

#include "rpc/agent.h"

/* Open files a rank may need in a world of world ranks (generous). */
static rlim_t files_needed(int world, int rank)
{
    rlim_t per_rank = rank == 0 ? 4 : 2;
    return 64 + per_rank * (rlim_t)world;
}

void fr_fd_limit_for_world(int world, int rank)
{
    struct rlimit rl;
    rlim_t need = files_needed(world, rank);
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur >= need)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need
                      ? need
                      : rl.rlim_max;
    if (rl.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &rl))
        rl.rlim_cur = was;
    if (rl.rlim_cur < need)
        fprintf(stderr, "fabrpc: rank %d: at most %llu open files (ulimit -n; "
                "hard limit %llu), and a world of %d ranks may need about "
                "%llu here%s: frpc_init may fail or wait for its timeout\n",
                rank, (unsigned long long)rl.rlim_cur,
                (unsigned long long)rl.rlim_max, world,
                (unsigned long long)need,
                rank == 0 ? " (rank 0 serves every rank's store connections)"
                          : "");
}
