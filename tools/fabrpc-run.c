/*
 * fabrpc-run — start N ranks of a program on this host with the fabrpc
 * bootstrap environment, tag their output, forward signals, and end the job
 * as a whole when one rank fails.
 *
 * Design notes
 * - One thread, one poll() loop. The handlers of SIGCHLD, SIGINT, SIGTERM
 *   and SIGHUP only set a flag and write a byte to a self-pipe, so the loop
 *   sleeps in poll() (no CPU) until a rank writes, exits or a deadline
 *   (--timeout, the kill grace) comes.
 * - Each rank leads its own process group and every signal we send goes to
 *   the group, so what a rank started goes with it; a terminal's Ctrl-C
 *   reaches fabrpc-run alone and is forwarded once.
 * - A dead rank is seen with waitid(WNOWAIT) and what is left of its group
 *   is SIGKILLed before the zombie is reaped, while the group id cannot be
 *   reused. So no rank and nothing a rank started outlives the job (except
 *   a process that left its group on purpose, e.g. with setsid).
 * - The loop ends when every rank is reaped and every output pipe closed.
 *   Stopping is always SIGTERM (or the forwarded signal) to every group
 *   still running, then SIGKILL GRACE_S seconds later.
 * - The ranks' output is tagged line by line in run_output.c.
 * - A rank that ends while others run is reported to rank 0's store
 *   (comm/store.h, GONE) from a short-lived thread of its own, all
 *   signals blocked there: one that died before it joined would keep the
 *   others waiting for it until their init timeout (60 s), and the loop
 *   cannot wait for a store that may not be up yet. Once rank 0 itself
 *   has ended, a stand-in store on its port (the store code's own
 *   thread) tells the ranks still starting.
 *
 * Exit status (also in --help), the first that applies of: 124 on
 * --timeout, 128+SIG when fabrpc-run got a signal, the first failure.
 * In full: 0 when every rank exits 0; the status of
 * the first rank that failed (S for "exit S", 128+SIG for a signal, 127
 * when PROG cannot be executed); 124 on --timeout; 128+SIG when
 * fabrpc-run itself got SIGINT/SIGTERM/SIGHUP (it forwards it first);
 * 1 on an internal error (fork, pipe); 2 on bad usage.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include "comm/store.h"
#include "serialization/envelope.h"

#include "free_port.h"
#include "run_output.h"

#define MAX_RANKS 1024
#define GRACE_S 3.0      /* SIGTERM -> SIGKILL */
#define DRAIN_S 1.0      /* all ranks gone -> close pipes still open */

struct rank {
    pid_t pid; /* 0 when not started or reaped */
    struct run_stream out, err;
};

static struct {
    int n, prefix;
    struct rank *ranks;
    int nalive, nopen;
    double timeout, t_start, t_kill, t_drain; /* seconds; 0 = none */
    int stopping, stop_sig, killed, timed_out, got_signal;
    int fail_code;    /* exit status of the first failure; 0 = none */
    int keep_going;   /* --keep-going: a failed rank does not stop the job */
    char job_id[64];
    long port;           /* rank 0's store */
    int init_timeout_ms; /* the ranks' (FABRPC_INIT_TIMEOUT_MS) */
    struct rlimit nofile; /* restored in the ranks */
    pid_t launcher;       /* our pid: the ranks' parent */
} J;

static int self_pipe[2] = {-1, -1};
static volatile sig_atomic_t pending[NSIG];

static const char usage_text[] =
    "usage: fabrpc-run -n N [--provider P] [--timeout S] [--port PORT]\n"
    "                  [--no-prefix] [--keep-going] [--] PROG [ARGS...]\n"
    "\n"
    "Start N ranks of PROG on this host (PROG is looked up in PATH) and\n"
    "wait for them. Each output line of rank i is printed with \"[i] \"\n"
    "(its stdout to stdout, its stderr to stderr). If a rank fails, the\n"
    "others are stopped: SIGTERM, then SIGKILL after 3 s (unless\n"
    "--keep-going). A rank that ends before it joined the job is told to\n"
    "rank 0's bootstrap store, so the others' frpc_init fails at once\n"
    "naming it rather than at their init timeout. When a rank ends, what\n"
    "it left running in its process group is killed (SIGKILL). When every\n"
    "rank has ended, what the job's ranks left in /dev/shm under fabrpc's\n"
    "names for this job (a killed rank's region) is removed; other files\n"
    "there are not touched.\n"
    "\n"
    "options:\n"
    "  -n N            number of ranks, 1 to 1024 (required)\n"
    "  --provider P    set FABRPC_PROVIDER=P (e.g. shm, tcp, \"shm,tcp\")\n"
    "  --timeout S     stop all ranks after S seconds (may be fractional,\n"
    "                  at most 1e9) and exit 124; default: no limit\n"
    "  --port PORT     port of the bootstrap store; default: a free port\n"
    "  --no-prefix     pass the ranks' output through unchanged\n"
    "  --keep-going    a rank that fails does not stop the others: they\n"
    "                  learn of it (FRPC_EPEERLOST; a barrier already\n"
    "                  waiting when rank 0, which serves the bootstrap\n"
    "                  store, dies fails FRPC_EBOOTSTRAP, one begun once\n"
    "                  its death is known FRPC_EPEERLOST) and go on or end\n"
    "                  as they choose\n"
    "  -h, --help      print this help and exit 0\n"
    "\n"
    "environment of rank i:\n"
    "  FABRPC_RANK=i  FABRPC_LOCAL_RANK=i  FABRPC_WORLD_SIZE=N\n"
    "  FABRPC_STORE_ADDR=127.0.0.1:PORT  (served by rank 0)\n"
    "  FABRPC_JOB_ID=<pid>-<time>        (the same for all ranks of a job)\n"
    "  FABRPC_JOB_KEY=<64 hex digits>    a new random secret per job (kept\n"
    "                                    if already set and not empty):\n"
    "                                    proves membership\n"
    "  FABRPC_PROVIDER=P                 (with --provider)\n"
    "  FI_TCP_IFACE=lo, FI_SOCKETS_IFACE=lo  (each only if it was unset)\n"
    "Rank 0 reads fabrpc-run's stdin unless it is a terminal; the other\n"
    "ranks read /dev/null.\n"
    "\n"
    "signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and\n"
    "SIGALRM are forwarded to every rank's process group (the rank and\n"
    "what it started, unless that left the group: setsid); SIGKILL\n"
    "follows 3 s later. Signals that come while the ranks are being\n"
    "stopped are not forwarded again; one that was ignored when\n"
    "fabrpc-run started (nohup) stays ignored. fabrpc-run killed by\n"
    "SIGKILL takes the ranks' processes with it (their parent-death\n"
    "signal; not what they started: a rank run through sh -c leaves its\n"
    "program).\n"
    "\n"
    "exit status (the first that applies: --timeout, then a signal to\n"
    "fabrpc-run, then the first rank that failed):\n"
    "  0        every rank exited 0\n"
    "  S        the first rank that failed exited with status S\n"
    "           (127: PROG could not be executed)\n"
    "  128+SIG  the first rank that failed was killed by signal SIG, or\n"
    "           fabrpc-run itself got SIG (SIGINT: 130, SIGTERM: 143)\n"
    "  124      --timeout passed\n"
    "  1        internal error (fork, pipe), or every rank exited 0 but\n"
    "           writing their output failed (a full disk; not a reader\n"
    "           that left: | head)\n"
    "  2        bad usage\n";

/* One line saying what is wrong (getopt has said it when msg is NULL),
 * and where the rest is: the whole help would bury the line. */
static int usage_error(const char *msg)
{
    if (msg)
        fprintf(stderr, "fabrpc-run: %s\n", msg);
    fputs("see 'fabrpc-run --help'\n", stderr);
    return 2;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *sig_name(int sig)
{
    static const struct { int sig; const char *name; } t[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
        {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
        {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
        {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
        {SIGXCPU, "SIGXCPU"}, {SIGSYS, "SIGSYS"},
    };
    static char other[24];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].sig == sig)
            return t[i].name;
    snprintf(other, sizeof other, "signal %d", sig);
    return other;
}

/* Parses all of s as an integer in [lo, hi]; 0 on success, -1 if not. */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static void stream_close(struct run_stream *s)
{
    if (s->fd >= 0) {
        run_stream_close(s);
        J.nopen--;
    }
}


static void on_signal(int sig)
{
    int saved = errno;
    pending[sig] = 1;
    if (write(self_pipe[1], "", 1) < 0) {
        /* pipe full: a wakeup is already pending */
    }
    errno = saved;
}

/* SIGCHLD first; the others are forwarded to the ranks, and end the job:
 * any signal whose default would end fabrpc-run without a word to the
 * ranks, which sit in process groups of their own (Ctrl-\ left them
 * running). */
static const int caught[] = {SIGCHLD, SIGINT,  SIGTERM, SIGHUP,
                             SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};

static int setup_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal,
                           .sa_flags = SA_RESTART | SA_NOCLDSTOP};
    if (pipe2(self_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < sizeof caught / sizeof caught[0]; k++) {
        struct sigaction old;
        /* A signal ignored by whoever started us (nohup, a background
         * job) stays ignored, here and in the ranks. */
        if (k > 0 && sigaction(caught[k], NULL, &old) == 0 &&
            old.sa_handler == SIG_IGN)
            continue;
        if (sigaction(caught[k], &sa, NULL) < 0)
            return -1;
    }
    signal(SIGPIPE, SIG_IGN); /* a closed stdout must not kill us */
    return 0;
}

/* In the child after fork: become rank i and exec argv; never returns. */
static void exec_rank(int i, char **argv, int out, int err,
                      const sigset_t *mask)
{
    char num[16];
    int saved_err = fcntl(2, F_DUPFD_CLOEXEC, 3);
    for (size_t k = 0; k < sizeof caught / sizeof caught[0]; k++) {
        struct sigaction cur;
        if (sigaction(caught[k], NULL, &cur) == 0 &&
            cur.sa_handler == on_signal)
            signal(caught[k], SIG_DFL);
    }
    signal(SIGPIPE, SIG_DFL);
    /* fabrpc-run killed (SIGKILL: no handler) takes the rank with it; had
     * it died before this line, the rank's parent is another already. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() != J.launcher)
        _exit(127);
    sigprocmask(SIG_SETMASK, mask, NULL);
    setrlimit(RLIMIT_NOFILE, &J.nofile);
    setpgid(0, 0);
    if (i != 0 || isatty(0)) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd > 0) {
            dup2(fd, 0);
            close(fd);
        }
    }
    dup2(out, 1);
    dup2(err, 2);
    snprintf(num, sizeof num, "%d", i);
    setenv("FABRPC_RANK", num, 1);
    setenv("FABRPC_LOCAL_RANK", num, 1);
    execvp(argv[0], argv);
    int e = errno;
    if (saved_err >= 0)
        dprintf(saved_err, "fabrpc-run: rank %d: cannot execute %s: %s\n", i,
                argv[0], strerror(e));
    _exit(127);
}

static int spawn(int i, char **argv)
{
    int out[2], err[2];
    sigset_t all, old;
    if (pipe2(out, O_CLOEXEC) < 0)
        return -1;
    if (pipe2(err, O_CLOEXEC) < 0) {
        close(out[0]), close(out[1]);
        return -1;
    }
    /* No handler of ours may run in the child before exec. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t pid = fork();
    if (pid == 0)
        exec_rank(i, argv, out[1], err[1], &old);
    int e = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(out[1]), close(err[1]);
    if (pid < 0) {
        close(out[0]), close(err[0]);
        errno = e;
        return -1;
    }
    setpgid(pid, pid); /* also here, so kill(-pid) works at once */
    J.ranks[i].pid = pid;
    run_stream_init(&J.ranks[i].out, i, out[0], 1, J.prefix);
    run_stream_init(&J.ranks[i].err, i, err[0], 2, J.prefix);
    J.nalive++, J.nopen += 2;
    return 0;
}

static void signal_ranks(int sig)
{
    for (int i = 0; i < J.n; i++)
        if (J.ranks[i].pid > 0)
            kill(-J.ranks[i].pid, sig);
}

/* Sends sig to every rank still running; SIGKILL follows after GRACE_S. */
static void stop(int sig)
{
    if (J.stopping)
        return;
    J.stopping = 1;
    J.stop_sig = sig;
    J.t_kill = now_s() + GRACE_S;
    signal_ranks(sig);
}

static void kill_all(void)
{
    for (int i = 0; i < J.n; i++)
        if (J.ranks[i].pid > 0)
            fprintf(stderr, "fabrpc-run: rank %d still running; sending "
                            "SIGKILL\n", i);
    signal_ranks(SIGKILL);
    J.killed = 1;
}

/* Reports how rank i ended. A failure while the job runs is reported and
 * stops the job; once stopping, only deaths we did not cause are told. */
static void rank_ended(int i, int st)
{
    int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    int code = sig ? 128 + sig : WEXITSTATUS(st);
    if (code == 0)
        return;
    if (J.stopping && (!sig || sig == J.stop_sig || sig == SIGKILL))
        return;
    if (sig)
        fprintf(stderr, "fabrpc-run: rank %d killed by signal %s%s\n", i,
                sig_name(sig), WCOREDUMP(st) ? " (core dumped)" : "");
    else
        fprintf(stderr, "fabrpc-run: rank %d exited with status %d\n", i,
                code);
    if (!J.fail_code)
        J.fail_code = code;
    if (!J.keep_going)
        stop(SIGTERM);
}

/* What report_gone needs, its own copy (the job key is in the
 * environment, which no thread changes once ranks run). */
struct gone_report {
    int rank;
    char why[64];
};

/* Rank's identity in this job, as the store knows the job (the key the
 * ranks were given, from the environment: set before the first rank). */
static fr_store_ident job_ident(int rank)
{
    const char *key = getenv("FABRPC_JOB_KEY");
    return (fr_store_ident){.rank = rank, .world = J.n,
                            .version = FR_ENV_VERSION,
                            .key = (const uint8_t *)key,
                            .key_len = key ? strlen(key) : 0};
}

static void *report_gone(void *arg)
{
    struct gone_report *g = arg;
    fr_store_ident me = job_ident(g->rank);
    char err[320];
    /* Quiet either way: the ranks say what it meant, and a store already
     * closed (the job ending) is no failure of the job's. */
    fr_store_report_gone("127.0.0.1", (uint16_t)J.port, J.init_timeout_ms,
                         &me, g->why, NULL, err, sizeof err);
    free(g);
    return NULL;
}

/* Rank 0 ended while others run: its store went with it, and a rank
 * still starting would look for it until its init timeout. A stand-in
 * on its port, serving until fabrpc-run exits, hears that rank 0 ended
 * and says so to each of them. 0, or -1 when it cannot listen there. */
static int stand_in_for_rank_0(void)
{
    static fr_store_server *standin;
    if (standin)
        return 0;
    fr_store_ident self = job_ident(0);
    return fr_store_server_start("127.0.0.1", (uint16_t)J.port, &self,
                                 &standin, NULL, 0) == 0 ? 0 : -1;
}

/* Rank i ended with wait status st while the job runs: rank 0's store
 * (or its stand-in) hears of it (Design notes). */
static void tell_store(int i, int st)
{
    if (i == 0 && stand_in_for_rank_0() != 0)
        return;
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    struct gone_report *g = malloc(sizeof *g);
    if (!g || pthread_attr_init(&attr) != 0) {
        free(g);
        return;
    }
    g->rank = i;
    if (WIFSIGNALED(st))
        snprintf(g->why, sizeof g->why, "killed by signal %s (fabrpc-run)",
                 sig_name(WTERMSIG(st)));
    else
        snprintf(g->why, sizeof g->why, "exited with status %d (fabrpc-run)",
                 WEXITSTATUS(st));
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* inherited by the thread */
    if (pthread_create(&t, &attr, report_gone, g) != 0)
        free(g);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}

static void reap(void)
{
    for (;;) {
        siginfo_t si = {0};
        int st;
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 ||
            si.si_pid == 0)
            return;
        pid_t pid = si.si_pid;
        kill(-pid, SIGKILL); /* what the rank left in its group */
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        for (int i = 0; i < J.n; i++)
            if (J.ranks[i].pid == pid) {
                J.ranks[i].pid = 0;
                J.nalive--;
                rank_ended(i, st);
                if (!J.stopping && J.nalive > 0)
                    tell_store(i, st);
            }
    }
}

static void handle_signals(void)
{
    char buf[64];
    while (read(self_pipe[0], buf, sizeof buf) > 0)
        ;
    if (pending[SIGCHLD]) {
        pending[SIGCHLD] = 0;
        reap();
    }
    for (size_t k = 1; k < sizeof caught / sizeof caught[0]; k++) {
        int sig = caught[k]; /* caught[0] is SIGCHLD */
        if (!pending[sig])
            continue;
        pending[sig] = 0;
        if (!J.got_signal)
            J.got_signal = sig;
        stop(sig); /* once stopping, SIGKILL comes at its time anyway */
    }
}

/* Keeps in *next the earliest deadline (0 = none yet). */
static void earliest(double *next, double t)
{
    if (*next == 0 || t < *next)
        *next = t;
}

/* Acts on the deadlines that have passed; returns the poll() timeout in
 * ms until the next one, or -1 if there is none. */
static int check_deadlines(void)
{
    double now = now_s(), next = 0;
    if (J.timeout > 0 && !J.stopping) {
        if (now >= J.t_start + J.timeout) {
            fprintf(stderr, "fabrpc-run: timeout after %g s; ranks still "
                            "running:", J.timeout);
            for (int i = 0; i < J.n; i++)
                if (J.ranks[i].pid > 0)
                    fprintf(stderr, " %d", i);
            fputc('\n', stderr);
            J.timed_out = 1;
            stop(SIGTERM);
        } else {
            earliest(&next, J.t_start + J.timeout);
        }
    }
    if (J.stopping && !J.killed && J.nalive > 0) {
        if (now >= J.t_kill)
            kill_all();
        else
            earliest(&next, J.t_kill);
    }
    if (J.nalive == 0 && J.nopen > 0) { /* a process escaped its group */
        if (J.t_drain == 0)
            J.t_drain = now + DRAIN_S;
        if (now >= J.t_drain) {
            for (int i = 0; i < J.n; i++) {
                stream_close(&J.ranks[i].out);
                stream_close(&J.ranks[i].err);
            }
        } else {
            earliest(&next, J.t_drain);
        }
    }
    if (next == 0)
        return -1;
    return (int)((next - now) * 1000.0) + 1; /* +1: never wake too early */
}

/* Last resort when the loop cannot go on: SIGKILL every rank, reap all. */
static int abort_job(const char *what)
{
    perror(what);
    signal_ranks(SIGKILL);
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;
    return -1;
}

/* A fresh secret for the job, unless the user gave one: only processes
 * that hold it may join (see fabrpc.h, "Membership"). */
static int set_job_key(void)
{
    unsigned char k[32];
    char hex[2 * sizeof k + 1];
    const char *given = getenv("FABRPC_JOB_KEY");
    if (given && *given)
        return 0;
    if (getrandom(k, sizeof k, 0) != (ssize_t)sizeof k)
        return -1;
    for (size_t i = 0; i < sizeof k; i++)
        snprintf(hex + 2 * i, 3, "%02x", k[i]);
    return setenv("FABRPC_JOB_KEY", hex, 1);
}

/* Removes what the job's ranks left in /dev/shm: a rank that was killed
 * cannot remove its own shared-memory segments. fabrpc names them with
 * the job id (rpc/agent.c), and so does libfabric's shm provider after
 * fabrpc's endpoint name. */
static void remove_leftovers(void)
{
    char pat[96];
    int n = 0;
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    if (!d)
        return;
    snprintf(pat, sizeof pat, "fabrpc_%s_", J.job_id);
    while ((e = readdir(d)))
        if (strstr(e->d_name, pat) && unlinkat(dirfd(d), e->d_name, 0) == 0)
            n++;
    closedir(d);
    if (n && J.fail_code)
        fprintf(stderr, "fabrpc-run: removed %d shared-memory segment%s "
                        "left by the job from /dev/shm\n",
                n, n == 1 ? "" : "s");
}

static int run_loop(void)
{
    int rc = 0;
    struct pollfd *pfd = calloc((size_t)(1 + 2 * J.n), sizeof *pfd);
    struct run_stream **map = calloc((size_t)(1 + 2 * J.n), sizeof *map);
    if (!pfd || !map)
        rc = abort_job("fabrpc-run: calloc");
    while (rc == 0 && (J.nalive > 0 || J.nopen > 0)) {
        int ms = check_deadlines(), k = 1;
        if (J.nalive == 0 && J.nopen == 0)
            break;
        pfd[0] = (struct pollfd){.fd = self_pipe[0], .events = POLLIN};
        for (int i = 0; i < J.n; i++) {
            struct run_stream *two[2] = {&J.ranks[i].out, &J.ranks[i].err};
            for (int j = 0; j < 2; j++)
                if (two[j]->fd >= 0) {
                    map[k] = two[j];
                    pfd[k++] = (struct pollfd){.fd = two[j]->fd,
                                               .events = POLLIN};
                }
        }
        if (poll(pfd, (nfds_t)k, ms) < 0 && errno != EINTR) {
            rc = abort_job("fabrpc-run: poll");
            break;
        }
        if (pfd[0].revents)
            handle_signals();
        for (int j = 1; j < k; j++)
            if (pfd[j].revents && run_stream_read(map[j]) == 1)
                stream_close(map[j]);
    }
    free(pfd), free(map);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"provider", required_argument, NULL, 'p'},
        {"timeout", required_argument, NULL, 't'},
        {"port", required_argument, NULL, 'P'},
        {"no-prefix", no_argument, NULL, 'x'},
        {"keep-going", no_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *provider = NULL;
    long n = 0, port = 0;
    char *end, buf[64];
    int c;
    J.prefix = 1;
    for (int fd = 0; fd < 3; fd++) /* a closed 0-2 would be reused */
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
            return 1;
    opterr = 0; /* its messages name the path we were run by: ours below */
    while ((c = getopt_long(argc, argv, "+n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (parse_int(optarg, 1, MAX_RANKS, &n) < 0)
                return usage_error("-n must be a number from 1 to 1024");
            break;
        case 'p':
            if (!*optarg)
                return usage_error("--provider needs a provider name");
            provider = optarg;
            break;
        case 't':
            errno = 0;
            J.timeout = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(J.timeout > 0) ||
                J.timeout > 1e9)
                return usage_error("--timeout must be a number of seconds "
                                   "> 0 and at most 1e9");
            break;
        case 'P':
            if (parse_int(optarg, 1, 65535, &port) < 0)
                return usage_error("--port must be a number from 1 to 65535");
            break;
        case 'x':
            J.prefix = 0;
            break;
        case 'k':
            J.keep_going = 1;
            break;
        case 'h':
            /* Written in full, or exit 1 (`--help >/dev/full`). */
            if (fputs(usage_text, stdout) < 0 || fflush(stdout) != 0) {
                perror("fabrpc-run: cannot write the help");
                return 1;
            }
            return 0;
        default:
            fprintf(stderr, "fabrpc-run: %s: %s\n",
                    optopt == 'n' ? "missing value for"
                                  : "unknown option or missing value",
                    argv[optind - 1]);
            return usage_error(NULL);
        }
    }
    if (n == 0)
        return usage_error("-n N is required");
    if (optind >= argc)
        return usage_error("no program given");
    /* Held for the job's life: another job's or test's port check
     * finds it taken, while rank 0's store listens there (it took such a
     * port between this check and its listen once: "Address already in
     * use", make check -j2 under ASan). */
    int held = -1;
    if (port == 0 && (port = fr_tool_reserve_port(&held)) < 0) {
        perror("fabrpc-run: cannot find a free port");
        return 1;
    }

    /* The environment every rank shares; rank numbers are set per child. */
    snprintf(buf, sizeof buf, "%ld", n);
    setenv("FABRPC_WORLD_SIZE", buf, 1);
    snprintf(buf, sizeof buf, "127.0.0.1:%ld", port);
    setenv("FABRPC_STORE_ADDR", buf, 1);
    J.port = port;
    const char *it = getenv("FABRPC_INIT_TIMEOUT_MS");
    long itm;
    J.init_timeout_ms =
        it && parse_int(it, 1, 86400000, &itm) == 0 ? (int)itm : 60000;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(buf, sizeof buf, "%ld-%lld.%09ld", (long)getpid(),
             (long long)ts.tv_sec, (long)ts.tv_nsec);
    setenv("FABRPC_JOB_ID", buf, 1);
    snprintf(J.job_id, sizeof J.job_id, "%s", buf);
    if (set_job_key() < 0) {
        perror("fabrpc-run: cannot make a job key");
        return 1;
    }
    if (provider)
        setenv("FABRPC_PROVIDER", provider, 1);
    /* One host: tcp and sockets otherwise take the first interface's
     * address, not loopback's. */
    setenv("FI_TCP_IFACE", "lo", 0);
    setenv("FI_SOCKETS_IFACE", "lo", 0);

    /* 2 pipes a rank may pass the usual soft limit of 1024 descriptors. */
    getrlimit(RLIMIT_NOFILE, &J.nofile);
    struct rlimit raised = J.nofile;
    raised.rlim_cur = raised.rlim_max;
    setrlimit(RLIMIT_NOFILE, &raised);

    J.n = (int)n;
    J.launcher = getpid();
    J.ranks = calloc((size_t)n, sizeof *J.ranks);
    if (!J.ranks || setup_signals() < 0) {
        perror("fabrpc-run");
        return 1;
    }
    J.t_start = now_s();
    for (int i = 0; i < J.n; i++)
        J.ranks[i].out.fd = J.ranks[i].err.fd = -1;
    for (int i = 0; i < J.n && !J.stopping; i++)
        if (spawn(i, argv + optind) < 0) {
            fprintf(stderr, "fabrpc-run: cannot start rank %d: %s\n", i,
                    strerror(errno));
            J.fail_code = 1;
            stop(SIGTERM);
        }
    int looped = run_loop();
    if (held >= 0)
        close(held);
    remove_leftovers();
    if (looped < 0)
        return 1;
    if (J.timed_out)
        return 124;
    if (J.got_signal)
        return 128 + J.got_signal;
    for (int fd = 1; fd <= 2; fd++)
        if (run_output_lost(fd) && J.fail_code == 0) {
            /* the ranks succeeded, but what they wrote is gone */
            fprintf(stderr, "fabrpc-run: writing the ranks' %s failed: %s\n",
                    fd == 1 ? "stdout" : "stderr",
                    strerror(run_output_lost(fd)));
            return 1;
        }
    return J.fail_code;
}
