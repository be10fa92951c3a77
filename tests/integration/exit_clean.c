/*
 * Ranks that end without frpc_shutdown, started by hand (no fabrpc-run to
 * clean after them): run_exit_clean.sh checks what they leave in /dev/shm.
 *
 *   exit_clean exit    init, a barrier, a call to the next rank, then
 *                      exit(0)
 *   exit_clean fork    the same, but first a child made by fork exits
 *                      (exit(0), its atexit handlers run): a call to the
 *                      other rank must still work after it; rank 0 ends
 *                      after it finds rank 1 ended
 *   exit_clean killed  rank 1 kills itself (SIGKILL) after the barrier;
 *                      rank 0 waits until it finds it dead, then exits
 *   exit_clean allkilled  every rank kills itself after the barrier and
 *                      the call (also a world of 1: it calls itself)
 *
 * Each rank prints how many names of its own it finds in /dev/shm once
 * frpc_init has returned (none: its region's name goes then, the
 * mappings stay).
 * Prints what it saw; exits 0 when it saw what it should.
 */
#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fabrpc.h>

#define TIMEOUT_MS 20000

static atomic_int served; /* requests this rank answered */

static void echo(frpc_request *req, void *user)
{
    size_t len;
    const void *args = frpc_request_args(req, &len);
    (void)user;
    frpc_respond(req, args, len);
    atomic_fetch_add(&served, 1);
}

/* How many names in /dev/shm are this job's and this rank's region. */
static int own_regions(int rank)
{
    const char *job = getenv("FABRPC_JOB_ID");
    char pre[96], suf[16];
    int n = 0;
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    if (!d || !job)
        return d ? (closedir(d), -1) : -1;
    snprintf(pre, sizeof(pre), "fabrpc_%s_", job);
    snprintf(suf, sizeof(suf), "_%d", rank);
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name), sl = strlen(suf);
        if (strncmp(e->d_name, pre, strlen(pre)) == 0 && len > sl &&
            strcmp(e->d_name + len - sl, suf) == 0)
            n++;
    }
    closedir(d);
    return n;
}

static int fork_and_exit_child(frpc_agent *a, int me)
{
    pid_t c = fork();
    int st;
    if (c < 0) {
        perror("fork");
        return 1;
    }
    if (c == 0)
        exit(0); /* atexit handlers run here, in the child */
    if (waitpid(c, &st, 0) != c || !WIFEXITED(st)) {
        printf("rank %d: the child did not exit\n", me);
        return 1;
    }
    int n = own_regions(me);
    printf("rank %d: own regions in /dev/shm after the child's exit: %d\n",
           me, n);
    /* Rank 0 calls first; rank 1 calls once it has answered, then ends
     * (rank 0 waits for that): neither calls a rank that has ended. */
    for (int i = 0; me == 1 && atomic_load(&served) < 2 && i < TIMEOUT_MS;
         i++) /* rank 0's call after the barrier, then this one */
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    frpc_result res;
    int rc = frpc_call(a, 1 - me, "echo", "abc", 3, TIMEOUT_MS, &res);
    int ok = rc == 0 && res.len == 3 && memcmp(res.data, "abc", 3) == 0;
    printf("rank %d: call after the fork: %s\n", me,
           ok ? "ok" : frpc_strerror(rc));
    frpc_result_clear(&res);
    return n == 0 && ok ? 0 : 1;
}

static int wait_dead(frpc_agent *a, int rank)
{
    for (int i = 0; i < TIMEOUT_MS / 10; i++) {
        if (frpc_peer_state(a, rank) == FRPC_PEER_DEAD) {
            printf("rank 0: rank %d is dead\n", rank);
            return 0;
        }
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    printf("rank 0: rank %d not found dead in %d ms\n", rank, TIMEOUT_MS);
    return 1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    frpc_agent *a;
    int rc;
    if (strcmp(mode, "exit") && strcmp(mode, "fork") &&
        strcmp(mode, "killed") && strcmp(mode, "allkilled")) {
        fprintf(stderr, "usage: exit_clean exit|fork|killed|allkilled\n");
        return 2;
    }
    if ((rc = frpc_init(NULL, &a))) {
        fprintf(stderr, "frpc_init: %s\n", frpc_strerror(rc));
        return 1;
    }
    int me = frpc_rank(a);
    rc = frpc_register(a, "echo", echo, NULL, FRPC_INLINE);
    if (!rc)
        rc = frpc_barrier(a, TIMEOUT_MS);
    if (rc) {
        fprintf(stderr, "rank %d: %s\n", me, frpc_strerror(rc));
        return 1;
    }
    /* The next rank's region (this one's in a world of 1) is in use. */
    int next = (me + 1) % frpc_world_size(a);
    frpc_result res;
    if ((rc = frpc_call(a, next, "echo", "abc", 3, TIMEOUT_MS, &res))) {
        fprintf(stderr, "rank %d: call to rank %d: %s\n", me, next,
                frpc_strerror(rc));
        return 1;
    }
    frpc_result_clear(&res);
    /* Nobody ends before every rank's call is answered. */
    if ((rc = frpc_barrier(a, TIMEOUT_MS))) {
        fprintf(stderr, "rank %d: second barrier: %s\n", me,
                frpc_strerror(rc));
        return 1;
    }
    printf("rank %d: own regions in /dev/shm: %d\n", me, own_regions(me));
    fflush(stdout);
    if (strcmp(mode, "allkilled") == 0)
        raise(SIGKILL);
    if (strcmp(mode, "fork") == 0) {
        rc = fork_and_exit_child(a, me);
        if (!rc && me == 0)
            rc = wait_dead(a, 1);
    } else if (strcmp(mode, "killed") == 0) {
        if (me == 1)
            raise(SIGKILL);
        rc = wait_dead(a, 1);
    }
    printf("rank %d: exits without frpc_shutdown (%d)\n", me, rc);
    fflush(stdout);
    exit(rc ? 1 : 0);
}
