/*
 * fabrpc-bench internals: the options, the result rows and the modes.
 *
 *   fabrpc-bench.c   options, self-launch, main
 *   bench_output.c   the rows on stdout (table or JSON)
 *   bench_modes.c    the measurements: latency, rate, bandwidth, idle, init
 *   bench_baseline.c fi_pingpong runs for --baseline
 *   bench_tcp_pingpong.c, bench_fi_blocking.c  the blocking baselines
 *   bench_rma.c      the rma mode, and its rows for any way of moving bytes
 *   bench_spread.c   per-call latency in a window; the "disturbed" rules
 *   bench_fi_rma.c   rma --baseline: raw fi_read/fi_write, memcpy on shm
 *   bench_fi_rate.c  rate --baseline: raw 8-byte messages, w in flight
 *   bench_fi_ep.c    the raw libfabric baselines' endpoints (bench_fi.h)
 *
 * Rank 0 measures and prints; the other ranks serve, and send rank 0 their
 * own numbers where a mode measures every rank (idle, init).
 */
#ifndef FABRPC_BENCH_H
#define FABRPC_BENCH_H

#include <stddef.h>
#include <sys/types.h>

#include <fabrpc.h>

#define BENCH_MAX_LIST 32
/* --iters and --warmup: each timed call keeps its time (8 bytes) */
#define BENCH_ITERS_MAX 100000000L

typedef enum bench_mode {
    BENCH_LATENCY,
    BENCH_RATE,
    BENCH_BANDWIDTH,
    BENCH_IDLE,
    BENCH_INIT,
    BENCH_TIMEOUTS,
    BENCH_RMA
} bench_mode;

typedef struct bench_opts {
    bench_mode mode;
    const char *mode_name;
    size_t sizes[BENCH_MAX_LIST];
    int nsizes;
    long inflight[BENCH_MAX_LIST];
    int ninflight;
    long iters, warmup;       /* -1: the mode's default */
    int progress_set;
    frpc_progress_mode progress;
    const char *provider;     /* NULL: whatever fabrpc picks */
    double seconds;           /* idle: how long to stay idle */
    long gap_us;              /* latency: sleep before each call (0) */
    int ranks;                /* ranks to start when run alone */
    int ranks_set;            /* --ranks given */
    int json, baseline;
    int batch;                /* rate, bandwidth: refill in a batch */
    /* --coalesce: 1 on, 0 off, -1 not given; once frpc_init has
     * succeeded, main sets it to what the agent uses (0 or 1) */
    int coalesce;
    /* --lend: 1 on, 0 off; bandwidth's calls use frpc_call_async_lent
     * when on (the default) */
    int lend;
    /* --handler: 1 when rank 1's bench_echo and bench_sink run in the
     * agent's pool (flags 0, what frpc_register users get by default),
     * 0 when FRPC_INLINE (the default: the fast path) */
    int handler_pool;
    /* --reply: 1 when bench_echo takes its args and answers with them
     * (frpc_request_take_args + frpc_respond_owned), 0 when it answers
     * with frpc_respond (the default: fabrpc copies the reply) */
    int reply_given;
    /* set by main once frpc_init has succeeded: rank 0's agent busy-polls
     * (--progress busy, or FABRPC_PROGRESS=busy), so its spinning
     * threads would share the CPUs with bench_core_ns's measurement */
    int progress_busy;
} bench_opts;

/*
 * One result row. Doubles set to NAN and longs set to -1 print as null;
 * the extra keys (after cpu_s) are printed only when set.
 */
typedef struct bench_row {
    const char *system;       /* "fabrpc", or a baseline's name */
    char provider[32];
    const char *metric;       /* the mode's name */
    long size, inflight, iters;
    double p50_us, p99_us, calls_per_s, mb_per_s, cpu_s;
    int rank;                 /* extra "rank" when >= 0 */
    /* extras, NAN when not set: rss_mb, ratio_to_fi_pingpong, job_s
     * (init: first rank's exec to last rank ready), seconds (idle) */
    double rss_mb, ratio, job_s, seconds;
    double gap_us;            /* latency: --gap-us, NAN when 0 */
    double ratio_tcp;         /* ratio_to_tcp_pingpong */
    double ratio_fi_blocking; /* ratio_to_fi_blocking */
    double ratio_fi_msg;      /* rate: ratio_to_fi_msg (bench_fi_rate.c) */
    /* rate, bandwidth: frames rank 0 sent per transport message in the
     * timed window (1: none coalesced) */
    double frames_per_msg;
    /* timeouts: the latest lateness, and calls that did not time out */
    double max_us, not_timed_out;
    /* fabrpc's rows of latency, rate, bandwidth and rma: whether rank 0's
     * agent coalesced (0 or 1); -1 for other rows (not printed) */
    int coalesce;
    /* bandwidth: whether args were lent (frpc_call_async_lent, 1) or
     * copied (frpc_call_async, 0); -1 for other rows (not printed) */
    int lent;
    /* fabrpc's rows of latency, rate and bandwidth: where the callee ran
     * the handler, "inline" or "pool"; NULL for other rows (not printed) */
    const char *handler;
    /* the same rows: how bench_echo answered, "copied" or "given" */
    const char *reply;
    /* latency, rate, bandwidth, fabrpc's rma W 1: whether the row's own
     * spread says the machine was disturbed (bench_spread.c): 0 or 1,
     * BENCH_UNJUDGED (too few calls: null), -1 on other rows (left out) */
    int disturbed;
    /* the share of the row's time in which some runnable task waited for
     * a CPU (the kernel's pressure figure, /proc/pressure/cpu "some");
     * NAN when not measured (left out) */
    double cpu_wait;
    /* fi_pingpong's rows: the share of its two processes' runnable time
     * (on a CPU or waiting for one) that they waited; NAN elsewhere */
    double run_delay;
    /* the machine's state around the row: a cache line's round trip
     * between two CPUs just before and just after it (bench_core_ns); NAN
     * when not measured (left out) */
    double core_ns_before, core_ns_after;
} bench_row;

#define BENCH_UNJUDGED (-2)

/* A row with every value null and the system/provider/metric given. */
bench_row bench_row_new(const char *system, const char *provider,
                        const char *metric);

/* Rows as JSON lines (on) or a table (off, the default). */
void bench_output_json(int on);
/* The progress mode fabrpc's rows name (key progress); borrowed. */
void bench_output_progress(const char *mode);

/* Prints row now (table or JSON line, per opts), or keeps it for
 * bench_flush when rows are deferred. Rank 0 only. */
void bench_emit(const bench_row *row);
/* Keep rows from now on (--baseline adds a ratio to them later). */
void bench_defer(void);
/* The kept rows, to amend before bench_flush prints them (and stops
 * keeping). */
bench_row *bench_kept(int *n);
void bench_flush(void);

double bench_now_us(void);

/* The machine's state now (core_rtt.h): a cache line's round trip between
 * the first two usable CPUs, over BENCH_CORE_MS; NAN when o's agent
 * busy-polls or it cannot be measured. Blocks about BENCH_CORE_MS. */
#define BENCH_CORE_MS 20
double bench_core_ns(const bench_opts *o);

/* The number after key on the first line of the file at path that
 * starts with line_start and holds key; NAN when there is none. */
double bench_proc_number(const char *path, const char *line_start,
                         const char *key);

/* The q-quantile (0..1) of v[0..n), n > 0; sorts v (bench_modes.c). */
double bench_quantile(double *v, long n, double q);

/*
 * Each call's own latency in a sliding-window run, and the completion
 * times that cut it into BENCH_SLICES slices (bench_spread.c, which says
 * why). Allocate before the timed loop; then bench_times_issue just
 * before each frpc_call_async (slot: the call's place in the window) and
 * bench_times_done when the loop sees it complete: one clock read each.
 * bench_times_done also takes its time as the issue time of the slot's
 * next call, so a call started right after it needs no
 * bench_times_issue. Both do nothing when t is NULL (warm-up).
 */
#define BENCH_SLICES 5
typedef struct bench_times {
    double *issued;           /* [w]: when each slot's call was issued */
    double *lat;              /* [n]: each call's us, completion order */
    long w, n, done;
    long per_slice;           /* calls a slice; 0: too few to judge */
    int k;                    /* cuts taken */
    double cut[BENCH_SLICES + 1];
} bench_times;

/* 0 or FRPC_ENOMEM (nothing to free then). */
int bench_times_init(bench_times *t, long w, long n);
void bench_times_free(bench_times *t);
void bench_times_issue(bench_times *t, long slot);
void bench_times_done(bench_times *t, long slot);
/* Sets r's p50_us and p99_us from the calls done, and disturbed by the
 * slice rule (with a warning on stderr when it is). */
void bench_times_row(bench_times *t, bench_row *r);
/*
 * The CPU-wait rule (bench_spread.c says why): mark with bench_wait_begin
 * just before a row's timed part, take bench_wait_share just after it,
 * and give the share to bench_judge_wait once the row is built.
 */
typedef struct bench_wait {
    double stall_us; /* the pressure total at the mark; NAN: none here */
    double at_us;    /* bench_now_us at the mark */
} bench_wait;
bench_wait bench_wait_begin(void);
/* The share (0..1) of the time since w in which some task waited for a
 * CPU; NAN when the kernel gives no figure or too little time passed. */
double bench_wait_share(const bench_wait *w);
/* Sets r->cpu_wait to share, and r->disturbed to 1 (with a warning on
 * stderr) when it is over BENCH_WAIT_MAX; a row the other rules leave
 * out (-1) gets 0 when it is not. NAN: r is left as it is. */
void bench_judge_wait(bench_row *r, double share);

/* Sets r->disturbed by the tail rule (p99 over 10x p50) from its
 * p50_us and p99_us, with a warning on stderr when it is; BENCH_UNJUDGED
 * when r->iters is under 3 (p99 is then p50's call). */
void bench_judge_tail(bench_row *r);

/* Default timed calls of a mode for one size (or window), --iters first. */
long bench_iters(const bench_opts *o, size_t size);

/* Registers the handlers every mode uses. Every rank, before the first
 * barrier. */
int bench_register(frpc_agent *a, int world, const bench_opts *o);

/* Runs o->mode on this rank (rank 0 measures, the others serve) and ends
 * with a barrier that has no time limit. t_start_us: bench_now_us() taken
 * just before frpc_init (init mode). Returns 0 or 1 (a message was
 * printed). */
int bench_run(frpc_agent *a, const bench_opts *o, double t_start_us);

/* bench_timeouts.c: the timeouts mode's handler (every rank), which
 * answers after BENCH_SLEEP_MS (so a timeout must be shorter to fire), and
 * its measurement (rank 0). */
#define BENCH_SLEEP_MS 100
int bench_register_timeouts(frpc_agent *a);
int bench_run_timeouts(frpc_agent *a, const bench_opts *o);

/* rma (bench_rma.c): the descriptor handler (every rank, with the
 * others); every rank registers its region and rank 0 measures; after
 * the final barrier, bench_rma_end deregisters it. */
int bench_register_rma(frpc_agent *a);
int bench_run_rma(frpc_agent *a, const bench_opts *o);
void bench_rma_end(void);

/*
 * A way to move size bytes one-sidedly, for the rma rows. one moves size
 * bytes and returns when they have arrived; window moves them n times,
 * keeping w transfers in flight (each completed one replaced), and
 * returns when all n are done. Both return 0, or 1 after printing why.
 */
typedef struct bench_mover {
    int (*one)(void *ctx, size_t size);
    int (*window)(void *ctx, size_t size, long w, long n);
    void *ctx;
} bench_mover;

/* Times and emits one rma row (bench_rma.c): window w == 1 times one()
 * after one() (p50/p99 of each), a larger w times window(); warm-up and
 * iterations as --warmup/--iters say. Rank 0; 0 or 1 (a message was
 * printed). */
int bench_rma_row(const bench_opts *o, const char *system,
                  const char *provider, const char *metric,
                  const bench_mover *mv, size_t size, long w);

/* Batch rows: ops of each size up to BENCH_RMA_BATCH_SIZE_MAX, moved
 * BENCH_RMA_BATCH at a time (a window() with that w posts them all, then
 * waits for them all), metric[0] reads and metric[1] writes; inflight
 * says the batch's length. 0 or 1. */
#define BENCH_RMA_BATCH 1000
#define BENCH_RMA_BATCH_SIZE_MAX 65536
int bench_rma_batch_rows(const bench_opts *o, const char *system,
                         const char *provider, const char *const metric[2],
                         const bench_mover mv[2]);

/* Every rma row: metric[0] with mv[0] (reads) for each size and window,
 * then metric[1] with mv[1] (writes). Stops at the first failure; 0 or
 * 1. */
int bench_rma_rows(const bench_opts *o, const char *system,
                   const char *provider, const char *const metric[2],
                   const bench_mover mv[2]);

/*
 * Runs fi_pingpong (server and client on 127.0.0.1) over fi_provider
 * (libfabric's name, e.g. "tcp;ofi_rxm") for each of o's sizes, with the
 * iterations the latency mode used, emits a "fi_pingpong" row per size
 * labelled provider, and sets ratio_to_fi_pingpong in the kept fabrpc
 * latency rows. Call it with no agent alive (rank 0, after shutdown).
 * Returns 0, or 3 when fi_pingpong is missing or a run failed (the reason
 * is on stderr; the sizes that worked have rows).
 */
int bench_baseline(const char *fi_provider, const char *provider,
                   const bench_opts *o);

/* Waits for child process pid until deadline (bench_now_us clock), then
 * kills it (bench_baseline.c). Its exit status, or -1 when killed or
 * lost. */
int bench_reap(pid_t pid, double deadline);

/* A process's time on a CPU and waiting for one, in ns (the kernel's
 * /proc/PID/schedstat); NAN when unknown. */
typedef struct bench_proc_time {
    double cpu_ns, delay_ns;
} bench_proc_time;
/* bench_reap, reading *t just before the process that ended is reaped
 * (NAN there when it was killed, or the kernel keeps no figure). */
int bench_reap_timed(pid_t pid, double deadline, bench_proc_time *t);
/* The run-delay rule (bench_spread.c): sets r->run_delay from the
 * processes' times, and r->disturbed to 1 (with a warning) when they
 * waited for a CPU too much of their runnable time. Nothing when a time
 * is unknown, or this process may use one CPU only. */
void bench_judge_run_delay(bench_row *r, const bench_proc_time *t, int n);

/*
 * A TCP ping-pong on 127.0.0.1 (bench_tcp_pingpong.c): size bytes each
 * way, iters timed round trips after iters/10 untimed ones, both ends
 * sleeping in recv(2), or with busy spinning on a non-blocking recv(2).
 * Sets *p50 and *p99 in us; returns 0, or -1 with a message on stderr.
 * Bounded: a silent peer ends it after 30 s.
 */
int bench_tcp_pingpong(size_t size, long iters, int busy, double *p50,
                       double *p99);

/* Sends (sending) or receives exactly len bytes on a blocking socket,
 * retrying on EINTR; 0, or -1 on EOF or an error (errno says which). */
int bench_xfer(int fd, void *buf, size_t len, int sending);

/*
 * A blocking ping-pong over raw libfabric (bench_fi_blocking.c): an RDM
 * endpoint with FI_MSG on provider (libfabric's name, e.g. "tcp;ofi_rxm"
 * or "shm"), size bytes each way, iters timed round trips after iters/10
 * untimed ones, both ends sleeping in fi_cq_sread (an fd wait object, else
 * the provider's own). Sets FI_TCP_IFACE=lo if unset. Sets *p50 and *p99
 * in us; returns 0, -1 with a message on stderr, or 1 when the provider
 * has no CQ wait object to sleep on (nothing to measure; the caller says
 * so). Bounded: a silent peer ends it after 30 s.
 */
int bench_fi_blocking(const char *provider, size_t size, long iters,
                      double *p50, double *p99);

/*
 * rma --baseline (bench_fi_rma.c): the rma rows over raw libfabric on
 * fi_provider (libfabric's name, e.g. "tcp;ofi_rxm"), labelled provider:
 * a forked child registers a region of the largest size and rank 0 times
 * fi_read and fi_writemsg into it (system "fi_rma", metrics raw_read and
 * raw_write), and on shm a memcpy between two buffers (system and metric
 * "memcpy", W 1). Call it with no agent alive (rank 0, after shutdown).
 * Returns 0, or 3 when a step failed (one line on stderr says which call
 * and why; the rows before it were printed). Bounded in time.
 */
int bench_fi_rma(const char *fi_provider, const char *provider,
                 const bench_opts *o);

/*
 * rate --baseline (bench_fi_rate.c): for each window of o's, a forked
 * child answers 8-byte messages over raw libfabric on fi_provider and
 * rank 0 keeps w in flight (system "fi_msg", metric "rate", labelled
 * provider), and the kept fabrpc rate rows of that window get
 * ratio_to_fi_msg. Call it with no agent alive (rank 0, after shutdown).
 * Returns 0, or 3 when a step failed (one line on stderr says which call
 * and why). Bounded in time.
 */
int bench_fi_rate(const char *fi_provider, const char *provider,
                  const bench_opts *o);

#endif /* FABRPC_BENCH_H */
