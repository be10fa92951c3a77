/*
 * fabrpc-bench: measures fabrpc between the ranks of a job.
 *
 *   fabrpc-bench MODE [options]      (starts its own ranks with fabrpc-run)
 *   fabrpc-run -n 2 --no-prefix [--provider P] fabrpc-bench MODE [options]
 *
 * This file: options, self-launch and main; bench_output.c prints the
 * rows (a table, or one JSON object per line). The modes are in
 * bench_modes.c, the baselines in bench_baseline.c (latency) and
 * bench_fi_rma.c (rma); --help says what each does.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static const char usage_text[] =
    "usage: fabrpc-bench MODE [options]   (starts its own ranks)\n"
    "       fabrpc-run -n 2 --no-prefix [--provider P] fabrpc-bench MODE "
    "[options]\n"
    "\n"
    "Rank 0 measures and prints; rank 1 answers (handlers run inline on\n"
    "its progress thread). Run without a launcher's environment (no\n"
    "FABRPC_RANK, RANK, ...), fabrpc-bench runs itself under fabrpc-run\n"
    "(found next to it, else in PATH; rank tags off) and exits with its\n"
    "status. Under fabrpc-run without --no-prefix each line comes tagged\n"
    "\"[0] \", which is not JSON: --json lines need --no-prefix there.\n"
    "\n"
    "modes:\n"
    "  latency    synchronous round trips, replies as large as the args:\n"
    "             p50/p99 per size (default sizes 8,64,1k,4k,64k,1m,16m)\n"
    "  rate       asynchronous calls per second with 8-byte args and\n"
    "             replies, keeping W calls in flight (a sliding window:\n"
    "             each completed call is replaced), per W of --inflight\n"
    "             (default 1,16,64,256); p50/p99 of each call's own\n"
    "             latency, from just before its frpc_call_async to the\n"
    "             loop seeing it complete (the tail under load)\n"
    "  bandwidth  MB/s of args carried by calls (8-byte replies), with a\n"
    "             window of W calls in flight (default sizes 1m,16m, W 4);\n"
    "             p50/p99 of each call's latency, as rate's\n"
    "  rma        one-sided frpc_get and frpc_put of rank 1's registered\n"
    "             region into rank 0's (metrics get, put) per size (default\n"
    "             8,4k,64k,1m,16m) and W of --inflight (default 1,8): W 1\n"
    "             is sync, p50/p99 of the round trip; larger W keeps W\n"
    "             async transfers in flight; MB/s either way. Sizes up\n"
    "             to 64k also as batches of 1,000 (frpc_transfer; metrics\n"
    "             get_batch, put_batch, W 1000)\n"
    "  idle       CPU seconds each rank uses while idle for --seconds after\n"
    "             init and a barrier: one row per rank (cpu_s)\n"
    "  init       time for N ranks to be ready: from just before frpc_init\n"
    "             to the end of the first barrier, p50/p99 over ranks;\n"
    "             size = N; job_s = first rank's start (exec) to last rank\n"
    "             ready; rss_mb = largest VmRSS. Any N: fabrpc-run -n N, or\n"
    "             --ranks N (up to 1024) when fabrpc-bench starts its\n"
    "             own ranks\n"
    "  timeouts   how late a call's timeout fires: --iters calls\n"
    "             (default 200) with a timeout of each --sizes value in ms\n"
    "             (default 10; below 100) to a handler that answers after\n"
    "             100 ms,\n"
    "             one after another (timeout_sync) and all at once\n"
    "             (timeout_async): p50/p99/max_us of the lateness, and\n"
    "             not_timed_out (calls that did not end FRPC_ETIMEDOUT)\n"
    "\n"
    "options:\n"
    "  --provider P     use provider P (shm, tcp, ...; sets FABRPC_PROVIDER,\n"
    "                   or fabrpc-run's --provider); fails if fabrpc comes\n"
    "                   up on another one. A comma list (\"shm,tcp\") is a\n"
    "                   preference order; names without spaces, none empty\n"
    "  --sizes LIST     comma list of sizes in bytes, suffixes k and m\n"
    "                   (latency, bandwidth, rma; timeouts: ms), no empty\n"
    "                   items\n"
    "  --inflight LIST  comma list of windows W (rate, bandwidth, rma), each\n"
    "                   at most 1048576 (fabrpc itself keeps at most\n"
    "                   max_inflight calls in flight, FABRPC_MAX_INFLIGHT,\n"
    "                   65536 unless set; a window above --iters is filled\n"
    "                   by --iters calls at most)\n"
    "  --iters N        timed calls per row, 1..100000000 (latency, rate,\n"
    "                   bandwidth, rma, timeouts; default: latency and rma\n"
    "                   10000, fewer over 64 KiB; rate 50000; bandwidth\n"
    "                   ~512 MiB/size; rma's batch rows count single\n"
    "                   transfers)\n"
    "  --warmup N       untimed calls first, 0..100000000 (latency, rate,\n"
    "                   bandwidth, rma;\n"
    "                   default iters/10; rate and bandwidth warm up with\n"
    "                   at least W calls, whatever N)\n"
    "  --batch          rate, bandwidth: take every call found complete,\n"
    "                   then refill the window between frpc_batch_begin\n"
    "                   and frpc_batch_end (metric rate_batched or\n"
    "                   bandwidth_batched)\n"
    "  --progress M     busy, adaptive or blocking (default: fabrpc's,\n"
    "                   i.e. FABRPC_PROGRESS or adaptive)\n"
    "  --coalesce on|off\n"
    "                   latency, rate, bandwidth, rma: turns fabrpc's\n"
    "                   coalescing (a burst of small frames to one rank\n"
    "                   sent as one transport message) on or off on every\n"
    "                   rank, by frpc_config.coalesce (default: fabrpc's,\n"
    "                   i.e. FABRPC_COALESCE, else on). fabrpc's rows of\n"
    "                   these modes say which was used: key coalesce (true\n"
    "                   or false), column coalesce (on or off)\n"
    "  --lend on|off    bandwidth: args lent to the callee, which reads\n"
    "                   them straight from the caller's buffer\n"
    "                   (frpc_call_async_lent; args from zerocopy_min,\n"
    "                   64 KiB unless FABRPC_ZEROCOPY_MIN says otherwise),\n"
    "                   or copied before each call leaves\n"
    "                   (frpc_call_async). Default on. Rows say which: key\n"
    "                   lent (the option: args under zerocopy_min are\n"
    "                   copied whatever it says)\n"
    "  --handler inline|pool\n"
    "                   latency, rate, bandwidth: the callee runs its\n"
    "                   handlers on its polling thread (inline, registered\n"
    "                   FRPC_INLINE: the default) or in its pool (pool:\n"
    "                   flags 0, frpc_register's default, which a handler\n"
    "                   that may block needs). Rows say which: key handler\n"
    "  --reply copied|given\n"
    "                   latency, rate, bandwidth: the callee's echo answers\n"
    "                   with frpc_respond (copied: fabrpc copies the reply,\n"
    "                   the default) or takes its args and answers with them\n"
    "                   (given: frpc_request_take_args, then\n"
    "                   frpc_respond_owned: a long reply is read by the\n"
    "                   caller straight from it). Rows say which: key reply\n"
    "  --seconds S      idle: how long to stay idle (default 5)\n"
    "  --gap-us N       latency: sleep N us before each call, so both ranks\n"
    "                   are idle when it starts (how long a call takes to\n"
    "                   wake a rank that went to sleep); rows say gap_us\n"
    "                   (when N > 0)\n"
    "  --ranks N        ranks to start when run alone (default 2; latency,\n"
    "                   rate, bandwidth, rma and timeouts need 2). Under a\n"
    "                   launcher its -n counts, and --ranks is ignored with\n"
    "                   a warning\n"
    "  --json           one JSON object per line instead of a table (under\n"
    "                   fabrpc-run: with its --no-prefix), with\n"
    "                   keys system, provider, metric, size, inflight, iters,\n"
    "                   p50_us, p99_us, calls_per_s, mb_per_s, cpu_s (null\n"
    "                   when not measured), and where they apply rank,\n"
    "                   seconds, gap_us, rss_mb, job_s, ratio_to_fi_pingpong,\n"
    "                   ratio_to_tcp_pingpong, ratio_to_fi_blocking,\n"
    "                   ratio_to_fi_msg,\n"
    "                   frames_per_message (rate, bandwidth: rank 0's\n"
    "                   frames per transport message), coalesce (see\n"
    "                   --coalesce), progress (fabrpc's rows: busy,\n"
    "                   adaptive or blocking), disturbed, cpu_wait and\n"
    "                   run_delay (see below),\n"
    "                   core_ns_before and core_ns_after (the machine's\n"
    "                   state, below). mb_per_s is in MB of 10^6 bytes:\n"
    "                   latency counts args and reply, bandwidth the args,\n"
    "                   rma the bytes moved\n"
    "  --baseline       latency, rate or rma. latency: after fabrpc's rows,\n"
    "                   rank 0 runs libfabric's fi_pingpong (package\n"
    "                   libfabric-bin) over the same provider, sizes and\n"
    "                   iterations on 127.0.0.1, prints its rows (system\n"
    "                   \"fi_pingpong\"; p50_us is its mean round trip, twice\n"
    "                   its usec/xfer) and adds ratio_to_fi_pingpong (fabrpc\n"
    "                   p50 / fi_pingpong round trip) to fabrpc's rows.\n"
    "                   With --progress blocking it also runs a blocking\n"
    "                   TCP ping-pong on 127.0.0.1 (system \"tcp_pingpong\",\n"
    "                   both ends sleep in recv) and adds\n"
    "                   ratio_to_tcp_pingpong, and a blocking ping-pong over\n"
    "                   raw libfabric on the same provider (system\n"
    "                   \"fi_blocking_pingpong\", both ends wait in\n"
    "                   fi_cq_sread: on an fd where the provider has one,\n"
    "                   else by its own means, sched_yield for shm; none\n"
    "                   if it has no CQ wait object) and adds\n"
    "                   ratio_to_fi_blocking, and a busy TCP ping-pong\n"
    "                   (system \"tcp_pingpong_busy\", both ends spin on a\n"
    "                   non-blocking recv; no ratio: the blocking one's p50\n"
    "                   less this one's is what two wake-ups cost).\n"
    "                   rate: after fabrpc's rows, rank 0 keeps each window\n"
    "                   of 8-byte messages in flight over raw libfabric on\n"
    "                   the same provider (system \"fi_msg\": a forked\n"
    "                   process answers each by fi_inject, both busy-poll;\n"
    "                   p50/p99 of each message's round trip, timed as\n"
    "                   fabrpc's calls are) and adds ratio_to_fi_msg\n"
    "                   (fabrpc calls/s / raw round trips/s) to fabrpc's\n"
    "                   rows of that window.\n"
    "                   rma: after fabrpc's rows, rank 0 times the same\n"
    "                   transfers over raw libfabric on the same provider\n"
    "                   (system \"fi_rma\", metrics raw_read and raw_write,\n"
    "                   rows as get's and put's): a forked process's region\n"
    "                   read by fi_read and written by fi_writemsg, split\n"
    "                   into fabrpc's chunks, with the same hints and write\n"
    "                   flags, the CQ busy-polled; sizes up to 64k also\n"
    "                   as batches of 1,000 (metrics raw_read_batch,\n"
    "                   raw_write_batch, W 1000), as fabrpc's. On shm\n"
    "                   also a memcpy of each size between two buffers\n"
    "                   (system and metric \"memcpy\", W 1 only): the\n"
    "                   physical limit\n"
    "  -h, --help       print this help\n"
    "\n"
    "disturbed rows: rank 0 judges each row of latency, rate and bandwidth\n"
    "(and fabrpc's rma rows with W 1) by its own spread, and warns on\n"
    "stderr when the machine was busy while it ran (key disturbed: true,\n"
    "false, or null when too few calls to judge; disturbed=yes|no in the\n"
    "table). One round trip at a time: disturbed when p99 > 10x p50 (an\n"
    "undisturbed tail stays within a few times the median; a descheduled\n"
    "rank costs milliseconds); null under 3 timed calls (p99 is then\n"
    "p50's call). A window (rate, bandwidth): the timed calls, from the\n"
    "first completion on, are cut into 5 slices of equal count;\n"
    "disturbed when the slowest slice's calls/s is < 0.5x the fastest's\n"
    "(something else had the machine for a tenth of the run or more);\n"
    "null when a slice would hold fewer than 4 W calls (completions come in\n"
    "bursts of up to W). A machine busy all through a row slows its calls\n"
    "alike, which no spread shows: every row timed for 100 ms or more,\n"
    "the baselines' too, is also judged by the kernel's count of the time\n"
    "in which some runnable task waited for a CPU (/proc/pressure/cpu):\n"
    "disturbed when that is over 40% of the row's time (key cpu_wait, the\n"
    "share from 0 to 1; left out where the kernel keeps no such count,\n"
    "and when rank 0 may use one CPU only: its ranks then wait for it).\n"
    "fi_pingpong's share counts its start-up too, in which nothing waits,\n"
    "so its rows are also judged by its two processes' own wait: the\n"
    "share of their runnable time (on a CPU or waiting for one, from\n"
    "/proc/PID/schedstat) that they waited; disturbed over 12% (key\n"
    "run_delay; left out when rank 0 may use one CPU only).\n"
    "\n"
    "the machine's state: rank 0 gives fabrpc's rows of latency, rate,\n"
    "bandwidth and rma, and fi_pingpong's rows, the round trip of a cache\n"
    "line between the first two CPUs it may use, measured over 20 ms just\n"
    "before and just after the row (keys core_ns_before, core_ns_after;\n"
    "left out with a busy-polling agent, whose threads would share the\n"
    "CPUs, or with fewer than two CPUs). A small call's round trip moves\n"
    "with it: on the reference machine it is about 50, 120 or 530 ns, as\n"
    "the host places its two vCPUs, and an 8 B shm round trip, fabrpc's or\n"
    "fi_pingpong's, is about 2.5x slower at 530 (docs/bench/\n"
    "2026-12-03-bimodal). Compare figures taken in the same state.\n"
    "\n"
    "An option given with a mode it does not go with (those named above;\n"
    "--provider, --progress, --ranks and --json go with all) is refused.\n"
    "\n"
    "exit status: 0 ok; 1 a measurement failed, or fabrpc could not come\n"
    "up (a provider libfabric knows but that is not available here, such\n"
    "as verbs without hardware; no fabrpc-run to start the ranks); 2 bad\n"
    "usage (also a value fabrpc's frpc_init refuses: a --provider name no\n"
    "libfabric provider has, a bad FABRPC_* variable); 3 --baseline could\n"
    "not run fi_pingpong, or a raw libfabric run failed (fabrpc's rows are\n"
    "still printed).\n";

/* ---------------------------------------------------------------- */
/* Options                                                           */
/* ---------------------------------------------------------------- */

static const struct {
    const char *name, *sizes, *inflight;
    bench_mode mode;
} modes[] = {
    {"latency", "8,64,1k,4k,64k,1m,16m", "1", BENCH_LATENCY},
    {"rate", "8", "1,16,64,256", BENCH_RATE},
    {"bandwidth", "1m,16m", "4", BENCH_BANDWIDTH},
    {"idle", "8", "1", BENCH_IDLE},
    {"init", "8", "1", BENCH_INIT},
    {"timeouts", "10", "1", BENCH_TIMEOUTS},
    {"rma", "8,4k,64k,1m,16m", "1,8", BENCH_RMA},
};

/* A count with an optional k or m suffix (x1024, x1048576), > 0. */
static int parse_count(const char *s, unsigned long long *val)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    unsigned shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10, end++;
    else if (*end == 'm' || *end == 'M')
        shift = 20, end++;
    if (v > (ULLONG_MAX >> shift)) /* "17592186044417m" wrapped to 1 MiB */
        return -1;
    v <<= shift;
    if (*end || v == 0 || v > LONG_MAX)
        return -1;
    *val = v;
    return 0;
}

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fabrpc-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

/* A comma list of counts into v (sizes or windows): their number, or -1
 * after saying what is wrong (opt: the option that gave it). */
static int parse_list(const char *opt, const char *s, unsigned long long *v)
{
    int n = 0;
    for (const char *p = s;; n++) {
        char item[32];
        size_t len = strcspn(p, ",");
        if (len == 0)
            return bad("%s: an empty item (a comma at an end, or two in a "
                       "row): \"%s\"", opt, s);
        if (n == BENCH_MAX_LIST)
            return bad("%s: more than %d items: %s", opt, BENCH_MAX_LIST, s);
        snprintf(item, sizeof(item), "%.*s", (int)len, p);
        if (len >= sizeof(item) || parse_count(item, &v[n]))
            return bad("%s: bad item \"%.*s\" (a count > 0, suffix k or m "
                       "allowed): %s", opt, (int)len, p, s);
        if (!p[len])
            return n + 1;
        p += len + 1;
    }
}

/* --progress's names, as config.c reads FABRPC_PROGRESS; both ways. */
static const struct {
    const char *name;
    frpc_progress_mode mode;
} progress_names[] = {{"busy", FRPC_PROGRESS_BUSY},
                      {"adaptive", FRPC_PROGRESS_ADAPTIVE},
                      {"blocking", FRPC_PROGRESS_BLOCKING}};
#define N_PROGRESS (sizeof(progress_names) / sizeof(progress_names[0]))

static int parse_progress(const char *v, frpc_progress_mode *p)
{
    for (size_t i = 0; i < N_PROGRESS; i++)
        if (!strcmp(v, progress_names[i].name)) {
            *p = progress_names[i].mode;
            return 0;
        }
    return -1;
}

static const char *progress_name(frpc_progress_mode m)
{
    for (size_t i = 0; i < N_PROGRESS; i++)
        if (progress_names[i].mode == m)
            return progress_names[i].name;
    return "adaptive"; /* config.c's default */
}

static int parse_on_off(const char *v, int *on)
{
    if (strcmp(v, "on") && strcmp(v, "off"))
        return -1;
    *on = !strcmp(v, "on");
    return 0;
}

/* The modes an option goes with (a bit per bench_mode), as the help says;
 * given with another mode it is refused. The options not here (--provider,
 * --progress, --ranks, --json) go with every mode. */
#define MODE(m) (1u << (m))
static const struct {
    const char *name;
    unsigned modes;
} option_modes[] = {
    {"--sizes", MODE(BENCH_LATENCY) | MODE(BENCH_BANDWIDTH) |
                    MODE(BENCH_TIMEOUTS) | MODE(BENCH_RMA)},
    {"--inflight", MODE(BENCH_RATE) | MODE(BENCH_BANDWIDTH) | MODE(BENCH_RMA)},
    {"--iters", MODE(BENCH_LATENCY) | MODE(BENCH_RATE) |
                    MODE(BENCH_BANDWIDTH) | MODE(BENCH_TIMEOUTS) |
                    MODE(BENCH_RMA)},
    {"--warmup", MODE(BENCH_LATENCY) | MODE(BENCH_RATE) |
                     MODE(BENCH_BANDWIDTH) | MODE(BENCH_RMA)},
    {"--batch", MODE(BENCH_RATE) | MODE(BENCH_BANDWIDTH)},
    {"--coalesce", MODE(BENCH_LATENCY) | MODE(BENCH_RATE) |
                       MODE(BENCH_BANDWIDTH) | MODE(BENCH_RMA)},
    {"--lend", MODE(BENCH_BANDWIDTH)},
    {"--handler", MODE(BENCH_LATENCY) | MODE(BENCH_RATE) |
                      MODE(BENCH_BANDWIDTH)},
    {"--reply", MODE(BENCH_LATENCY) | MODE(BENCH_RATE) |
                    MODE(BENCH_BANDWIDTH)},
    {"--seconds", MODE(BENCH_IDLE)},
    {"--gap-us", MODE(BENCH_LATENCY)},
    {"--baseline", MODE(BENCH_LATENCY) | MODE(BENCH_RATE) | MODE(BENCH_RMA)},
};
#define NOPTION_MODES (sizeof(option_modes) / sizeof(option_modes[0]))
#define NMODES (sizeof(modes) / sizeof(modes[0]))

/* Refuses option k of option_modes given with mode m (of modes[]), with
 * "--lend goes with the bandwidth mode, not latency". */
static int wrong_mode(size_t k, size_t m)
{
    char with[128] = "";
    size_t len = 0, n = 0, left = 0;
    for (size_t j = 0; j < NMODES; j++)
        left += (option_modes[k].modes & MODE(modes[j].mode)) != 0;
    for (size_t j = 0; j < NMODES; j++)
        if (option_modes[k].modes & MODE(modes[j].mode))
            len += (size_t)snprintf(with + len, sizeof(with) - len, "%s%s",
                                    n++ == 0 ? "" : n == left ? " or " : ", ",
                                    modes[j].name);
    return bad("%s goes with the %s mode%s, not %s", option_modes[k].name,
               with, left > 1 ? "s" : "", modes[m].name);
}

/* A window fabrpc-bench allocates for; fabrpc caps what is in flight
 * (max_inflight) well below. */
#define BENCH_MAX_WINDOW 1048576

/* Names separated by single commas: an empty or padded name would be
 * refused by frpc_init or not match the provider that came up. */
static int provider_list_ok(const char *list)
{
    if (!*list || *list == ',' || list[strlen(list) - 1] == ',' ||
        strstr(list, ",,"))
        return 0;
    for (const char *p = list; *p; p++)
        if (isspace((unsigned char)*p))
            return 0;
    return 1;
}

/* 0, 1 when -h or --help asks for the help, or -1 (bad usage, said). */
static int parse_opts(int argc, char **argv, bench_opts *o)
{
    const char *sizes = NULL, *inflight = NULL;
    unsigned given = 0; /* options given, a bit per option_modes entry */
    unsigned long long v[BENCH_MAX_LIST];
    size_t m = 0;

    memset(o, 0, sizeof(*o));
    o->iters = o->warmup = o->coalesce = -1;
    o->lend = 1;
    o->seconds = 5;
    o->ranks = 2;
    if (argc < 2)
        return bad("no MODE given");
    while (m < NMODES && strcmp(argv[1], modes[m].name))
        m++;
    if (m == NMODES)
        return bad("unknown mode: %s", argv[1]);
    o->mode = modes[m].mode;
    o->mode_name = modes[m].name;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        for (size_t k = 0; k < NOPTION_MODES; k++)
            if (!strcmp(a, option_modes[k].name))
                given |= 1u << k;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return 1;
        int *flag = !strcmp(a, "--json")       ? &o->json
                    : !strcmp(a, "--baseline") ? &o->baseline
                    : !strcmp(a, "--batch")    ? &o->batch
                                               : NULL;
        if (flag) {
            *flag = 1;
            continue;
        }
        if (!val)
            return bad("unknown option or missing value: %s", a);
        i++;
        errno = 0;
        if (!strcmp(a, "--sizes"))
            sizes = val;
        else if (!strcmp(a, "--inflight"))
            inflight = val;
        else if (!strcmp(a, "--provider")) {
            if (!provider_list_ok(val))
                return bad("bad --provider (provider names separated by "
                           "single commas, no spaces): '%s'", val);
            o->provider = val;
        }
        else if (!strcmp(a, "--iters") || !strcmp(a, "--warmup") ||
                 !strcmp(a, "--ranks")) {
            long n = strtol(val, &end, 10);
            /* a bound, so that a row's per-call times fit in memory */
            long max = a[2] == 'r' ? 1024 : BENCH_ITERS_MAX; /* fabrpc-run's */
            if (errno || *end || end == val || n < (a[2] == 'w' ? 0 : 1) ||
                n > max)
                return bad("bad %s (%s..%ld): %s", a,
                           a[2] == 'w' ? "0" : "1", max, val);
            if (a[2] == 'r') {
                o->ranks = (int)n;
                o->ranks_set = 1;
            }
            else
                *(a[2] == 'i' ? &o->iters : &o->warmup) = n;
        } else if (!strcmp(a, "--gap-us")) {
            o->gap_us = strtol(val, &end, 10);
            if (errno || *end || end == val || o->gap_us < 0 ||
                o->gap_us > 10000000)
                return bad("bad --gap-us (0..10000000): %s", val);
        } else if (!strcmp(a, "--seconds")) {
            o->seconds = strtod(val, &end);
            if (errno || *end || end == val ||
                !(o->seconds >= 0 && o->seconds < 1e6))
                return bad("bad --seconds: %s", val);
        } else if (!strcmp(a, "--progress")) {
            if (parse_progress(val, &o->progress))
                return bad("bad --progress: %s", val);
            o->progress_set = 1;
        } else if (!strcmp(a, "--coalesce")) {
            if (parse_on_off(val, &o->coalesce))
                return bad("bad --coalesce (on or off): %s", val);
        } else if (!strcmp(a, "--lend")) {
            if (parse_on_off(val, &o->lend))
                return bad("bad --lend (on or off): %s", val);
        } else if (!strcmp(a, "--handler")) {
            if (strcmp(val, "inline") && strcmp(val, "pool"))
                return bad("bad --handler (inline or pool): %s", val);
            o->handler_pool = !strcmp(val, "pool");
        } else if (!strcmp(a, "--reply")) {
            if (strcmp(val, "copied") && strcmp(val, "given"))
                return bad("bad --reply (copied or given): %s", val);
            o->reply_given = !strcmp(val, "given");
        } else
            return bad("unknown option: %s", a);
    }
    for (size_t k = 0; k < NOPTION_MODES; k++)
        if ((given & 1u << k) && !(option_modes[k].modes & MODE(o->mode)))
            return wrong_mode(k, m);
    if ((o->nsizes = parse_list("--sizes", sizes ? sizes : modes[m].sizes,
                                v)) < 0)
        return -1;
    for (int i = 0; i < o->nsizes; i++)
        o->sizes[i] = (size_t)v[i];
    if ((o->ninflight = parse_list("--inflight",
                                   inflight ? inflight : modes[m].inflight,
                                   v)) < 0)
        return -1;
    for (int i = 0; i < o->ninflight; i++) {
        if (v[i] > BENCH_MAX_WINDOW)
            return bad("--inflight above %d: %llu", BENCH_MAX_WINDOW, v[i]);
        o->inflight[i] = (long)v[i];
    }
    for (int i = 0; o->mode == BENCH_TIMEOUTS && i < o->nsizes; i++)
        if (o->sizes[i] >= BENCH_SLEEP_MS) /* a timeout that cannot fire */
            return bad("timeouts: --sizes are timeouts in ms below %d (the "
                       "handler's answer time): %s", BENCH_SLEEP_MS, sizes);
    return 0;
}

/* ---------------------------------------------------------------- */
/* Self-launch                                                       */
/* ---------------------------------------------------------------- */

/* Did a launcher give us a rank (the variables frpc_init reads)? */
static int launched(void)
{
    static const char *const vars[] = {
        "FABRPC_RANK", "FABRPC_WORLD_SIZE", "RANK", "WORLD_SIZE",
        "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) /* empty is unset, as frpc_init reads it */
            return 1;
    }
    return 0;
}

/* Runs this program again as the ranks of fabrpc-run -n o->ranks (found
 * next to our binary, or its parent directory when libtool put us in
 * .libs, else in PATH). Returns only on failure. */
static int self_launch(const bench_opts *o, int argc, char **argv)
{
    char self[PATH_MAX], run[PATH_MAX + 32], n[16];
    const char *prog = "fabrpc-run";
    char **args = calloc((size_t)argc + 8, sizeof(char *));
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    int k = 0;

    if (!args || len <= 0) {
        fprintf(stderr, "fabrpc-bench: cannot find my own binary\n");
        free(args);
        return 1;
    }
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    snprintf(run, sizeof(run), "%s/fabrpc-run", self);
    if (access(run, X_OK) == 0)
        prog = run;
    else if (slash - self >= 6 && !strcmp(slash - 6, "/.libs")) {
        snprintf(run, sizeof(run), "%.*s/fabrpc-run",
                 (int)(slash - 6 - self), self);
        if (access(run, X_OK) == 0)
            prog = run;
    }
    *slash = '/';
    snprintf(n, sizeof(n), "%d", o->ranks);
    args[k++] = (char *)prog;
    args[k++] = "-n";
    args[k++] = n;
    if (o->provider) {
        args[k++] = "--provider";
        args[k++] = (char *)o->provider;
    }
    args[k++] = "--no-prefix"; /* only rank 0 prints rows */
    args[k++] = "--";
    args[k++] = self;
    for (int i = 1; i < argc; i++)
        args[k++] = argv[i];
    args[k] = NULL;
    execvp(prog, args);
    fprintf(stderr, "fabrpc-bench: cannot run %s: %s (run it under "
                    "fabrpc-run -n 2 instead)\n", prog, strerror(errno));
    free(args);
    return 1;
}

/* ---------------------------------------------------------------- */

/* Is name one of the comma list's entries? */
static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0' ||
                                     p[n] == ';'))
            return 1;
    return 0;
}

/*
 * Whether this rank's agent coalesces, once frpc_init has succeeded.
 * fabrpc has no getter for it (nor does frpc_backend_report say it), so
 * it is what the agent was configured with: --coalesce, which main put
 * in frpc_config.coalesce, else FABRPC_COALESCE as rpc/config.c reads it
 * (unset or empty: the default, on). frpc_init fails on any value of
 * FABRPC_COALESCE but a decimal 0 or 1, so once it has succeeded strtol
 * is all the parsing left, and no rule of config.c is repeated here.
 */
static int coalesce_used(const bench_opts *o)
{
    const char *v = getenv("FABRPC_COALESCE");
    if (o->coalesce >= 0)
        return o->coalesce;
    return v && *v ? strtol(v, NULL, 10) != 0 : 1;
}

/*
 * Whether this rank's agent busy-polls, once frpc_init has succeeded: as
 * coalesce_used, --progress, else FABRPC_PROGRESS (config.c takes only
 * its exact names, so once frpc_init has succeeded "busy" is busy).
 */
/* The progress mode the agents run in: --progress, else FABRPC_PROGRESS
 * (frpc_init has accepted it), else fabrpc's default. */
static frpc_progress_mode progress_used(const bench_opts *o)
{
    const char *v = getenv("FABRPC_PROGRESS");
    frpc_progress_mode m = FRPC_PROGRESS_ADAPTIVE;
    if (o->progress_set)
        return o->progress;
    if (v && *v)
        parse_progress(v, &m);
    return m;
}

/*
 * frpc_init failed with rc. FRPC_EINVAL is a value in the options or the
 * environment that fabrpc refuses (an unknown --provider, a bad
 * FABRPC_COALESCE, ...): bad usage, exit 2; anything else, 1. Every rank
 * finds the same bad value, so under fabrpc-run (FABRPC_RANK set) the
 * ranks but rank 0 first wait for fabrpc-run to end them once rank 0 has
 * said it and exited (it stops the others when one fails), and say it
 * themselves only if that does not come within USAGE_QUIET_S (ranks
 * started by hand, --keep-going): said once, never lost.
 */
#define USAGE_QUIET_S 3
static int init_failed(int rc, const char *err)
{
    const char *rank = getenv("FABRPC_RANK");
    if (rc == FRPC_EINVAL && rank && strcmp(rank, "0"))
        sleep(USAGE_QUIET_S);
    fprintf(stderr, "fabrpc-bench: %s: %s\n", frpc_strerror(rc), err);
    return rc == FRPC_EINVAL ? 2 : 1;
}

static int world_ok(frpc_agent *a, const bench_opts *o)
{
    int world = frpc_world_size(a);
    if (o->mode == BENCH_IDLE || o->mode == BENCH_INIT || world == 2)
        return 1;
    if (frpc_rank(a) == 0)
        fprintf(stderr, "fabrpc-bench: %s needs 2 ranks, not %d (fabrpc-run "
                        "-n 2 fabrpc-bench ...)\n", o->mode_name, world);
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts o;
    char err[1024] = "", prov[32], prov_full[64];
    frpc_config cfg;
    frpc_agent *a;
    int rc;

    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage_text, stdout);
        return 0;
    }
    if ((rc = parse_opts(argc, argv, &o)) > 0) { /* MODE ... --help */
        fputs(usage_text, stdout);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "%.*s(fabrpc-bench --help for modes and options)\n",
                (int)(strstr(usage_text, "\n\n") + 1 - usage_text),
                usage_text);
        return 2;
    }
    if (!launched())
        return self_launch(&o, argc, argv);
    bench_output_json(o.json);
    if (o.provider)
        setenv("FABRPC_PROVIDER", o.provider, 1);
    frpc_config_init(&cfg);
    if (o.progress_set)
        cfg.progress = o.progress;
    if (o.coalesce >= 0) /* every rank parses the same options */
        cfg.coalesce = o.coalesce;
    cfg.errbuf = err;
    cfg.errbuf_len = sizeof(err);
    double t_start = bench_now_us();
    if ((rc = frpc_init(&cfg, &a)))
        return init_failed(rc, err);
    o.coalesce = coalesce_used(&o);
    frpc_progress_mode mode = progress_used(&o);
    o.progress_busy = mode == FRPC_PROGRESS_BUSY;
    bench_output_progress(progress_name(mode));
    snprintf(prov, sizeof(prov), "%s", frpc_provider(a));
    snprintf(prov_full, sizeof(prov_full), "%s", frpc_provider_full(a));
    if (o.provider && !in_list(o.provider, prov)) {
        fprintf(stderr, "fabrpc-bench: asked for provider %s, but fabrpc "
                        "came up on %s\n", o.provider, prov);
        frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 0);
        return 1;
    }
    if (o.ranks_set && o.ranks != frpc_world_size(a) && frpc_rank(a) == 0)
        fprintf(stderr, "fabrpc-bench: warning: --ranks %d ignored under a "
                        "launcher: %d ranks here (the launcher's -n)\n",
                o.ranks, frpc_world_size(a));
    if (!world_ok(a, &o)) {
        frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 0);
        return 2;
    }
    int rank = frpc_rank(a);
    if ((rc = bench_register(a, frpc_world_size(a), &o))) {
        fprintf(stderr, "fabrpc-bench: register: %s\n", frpc_strerror(rc));
        frpc_shutdown(a, FRPC_SHUTDOWN_IMMEDIATE, 0);
        return 1;
    }
    /* latency's and rate's baselines add ratios to fabrpc's rows: keep
     * them */
    if (o.baseline && rank == 0 &&
        (o.mode == BENCH_LATENCY || o.mode == BENCH_RATE))
        bench_defer();
    rc = bench_run(a, &o, t_start);
    if (frpc_shutdown(a, FRPC_SHUTDOWN_GRACEFUL, 60000))
        rc = 1;
    if (o.baseline && rank == 0 && !rc)
        rc = o.mode == BENCH_RMA    ? bench_fi_rma(prov_full, prov, &o)
             : o.mode == BENCH_RATE ? bench_fi_rate(prov_full, prov, &o)
                                    : bench_baseline(prov_full, prov, &o);
    bench_flush();
    return rc;
}
