/*
 * fabrpc-bench: each call's own latency in a sliding-window run (rate,
 * bandwidth), and whether a row's own spread says the machine was
 * disturbed while it was measured. See bench.h.
 *
 * Design notes
 * - Cost in the timed loop: one clock read when a call is issued, one
 *   when its completion is seen, and a store into arrays allocated before
 *   the loop (bench_times_init). Nothing else runs per call; sorting and
 *   judging happen after the clock has stopped. A clock read costs
 *   about 45 ns here (vDSO, tsc), against 400 ns a call at 2.5 M
 *   calls/s, so a loop that replaces each completed call at once takes
 *   the completion's read as the replacement's issue time: one read a
 *   call.
 * - A call's latency runs from just before its frpc_call_async to the
 *   moment the loop sees it complete (frpc_wait_any returns it, or a
 *   scan finds it done), so with W in flight it includes the time it
 *   waited behind the others: the latency a caller with that window sees.
 *
 * The rules for "disturbed", and why. Both judge a run by itself, with
 * no reference figures, since this machine's speed varies from run to
 * run; both aim to catch another process taking the CPU (a 2-core
 * machine shared with a CI job), not the transport's own variation.
 * - Round trips one at a time (latency; fabrpc's rma rows with W 1):
 *   p99 over BENCH_TAIL_MAX (10) times p50. A run that had the CPUs to
 *   itself keeps its slowest 1% within a few times the median; a
 *   descheduled rank stalls a call for a scheduler tick, milliseconds
 *   against microseconds, which is far more than 10x. Under
 *   BENCH_TAIL_MIN_CALLS (3) timed calls p99 and p50 are the same call,
 *   so the row says null (not judged).
 * - A window of calls (rate, bandwidth): the timed calls, counted from
 *   the first completion (so that the window's filling is not part of
 *   it), are cut into BENCH_SLICES (5) slices of equal count, and the run
 *   is disturbed when the slowest slice's calls/s is under
 *   BENCH_SLICE_MIN (0.5) times the fastest's. A steady run's slices
 *   agree far better; half the rate for a fifth of the run means that
 *   something else had the machine for at least a tenth of it. The p99
 *   rule would not do here: with W in flight, a call's latency varies
 *   with its place in a burst even on a quiet machine. Completions come
 *   in bursts of up to W, so a slice must hold at least 4 W calls to be
 *   judged; with fewer the row says null (not judged).
 * - Any row timed in this process, fabrpc's and the baselines' (whose
 *   fi_pingpong gives only a mean): the CPU-wait rule. A load that lasts
 *   the whole row slows every call alike, so neither rule above sees it
 *   (a latency run while another program built and ran tests: p50 28.8
 *   us against 2, p99 3.2x p50, "not disturbed"; fi_pingpong 712 us
 *   against 1.6). The
 *   kernel counts the time in which some runnable task waited for a CPU
 *   (/proc/pressure/cpu, "some ... total=" in us). On a quiet machine
 *   the ranks' own threads make that share 0-0.28 of a row's time (49
 *   rows of every mode over shm and tcp and the 29 of a bench-suite
 *   run, 2026-12-06; the highest tcp's 16 MiB calls), beside one
 *   spinning shell 0.47-0.93 (fabrpc's rows), hence BENCH_WAIT_MAX
 *   (0.4). fi_pingpong's rows took 0.13-0.28 there: the mark is taken
 *   before its start-up (fi_getinfo, the connection), in which nothing
 *   waits, so a slowed fi_pingpong row could still pass (8 B on shm at
 *   18-40 us against 1.1, cpu_wait 0.11-0.16).
 * - fi_pingpong's rows: its two processes' own wait (the run-delay
 *   rule). The kernel counts each process's time on a CPU and waiting
 *   for one (/proc/PID/schedstat, read between its end and its reaping);
 *   the share of waiting in their sum is not thinned by start-up or
 *   sleeps, as the machine's share is. 2026-12-06, 2 cores, `latency
 *   --baseline --sizes 8,4k,64k` over shm and tcp: quiet, 18 rows
 *   0.015-0.078; beside one spinning shell, 12 rows 0.19-0.36, hence
 *   BENCH_RUN_DELAY_MAX (0.12). A row under
 *   BENCH_WAIT_MIN_US (100 ms) is not judged by it: there a single stall
 *   of a few ms (one in 12 quiet rows of 35 ms took 0.31) is a large
 *   share, and is the spread rules' to see; a load that lasts slows a
 *   row past 100 ms (20,000 8 B round trips: 35 ms quiet, 520 beside a
 *   spinning shell). Nor are rows where the kernel keeps no such count,
 *   or whose rank 0 may use one CPU only (taskset -c 0: the ranks wait
 *   for it themselves, 100% of the time); cpu_wait is left out there.
 *   It judges the machine, not one process, so it only ever adds
 *   "disturbed": a row it finds quiet keeps what the other rules said,
 *   and a baseline's row, which they do not judge, says false.
 */
#define _GNU_SOURCE
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define BENCH_TAIL_MAX 10.0
/* With fewer timed calls bench_quantile's p99 is p50's call itself (1
 * call: both v[0]; 2: both v[1]), so the tail rule always says "not
 * disturbed": the row says null instead. */
#define BENCH_TAIL_MIN_CALLS 3
#define BENCH_SLICE_MIN 0.5
#define BENCH_WAIT_MAX 0.4
#define BENCH_WAIT_MIN_US 100000.0
#define BENCH_RUN_DELAY_MAX 0.12

int bench_times_init(bench_times *t, long w, long n)
{
    *t = (bench_times){.w = w, .n = n};
    t->issued = calloc((size_t)w, sizeof(double));
    t->lat = calloc((size_t)n, sizeof(double));
    if (!t->issued || !t->lat) {
        bench_times_free(t);
        return FRPC_ENOMEM;
    }
    /* c_k = 1 + k * per_slice completions end cut k (c_5 = n) */
    if ((n - 1) / BENCH_SLICES >= 4 * w)
        t->per_slice = (n - 1) / BENCH_SLICES;
    return 0;
}

void bench_times_free(bench_times *t)
{
    free(t->issued);
    free(t->lat);
    t->issued = t->lat = NULL;
}

void bench_times_issue(bench_times *t, long slot)
{
    if (t)
        t->issued[slot] = bench_now_us();
}

/* The completions that end cut k. */
static long cut_count(const bench_times *t, int k)
{
    return k == BENCH_SLICES ? t->n : 1 + k * t->per_slice;
}

void bench_times_done(bench_times *t, long slot)
{
    if (!t || t->done == t->n)
        return;
    double now = bench_now_us();
    t->lat[t->done++] = now - t->issued[slot];
    t->issued[slot] = now; /* the replacement's, if it follows at once */
    if (t->per_slice && t->k <= BENCH_SLICES &&
        t->done == cut_count(t, t->k))
        t->cut[t->k++] = now;
}

/* "rate W 64" or "latency size 8": which row a warning is about. */
static void warn(const bench_row *r, const char *fmt, double x)
{
    fprintf(stderr, "fabrpc-bench: warning: %s %s size %ld W %ld: ",
            r->system, r->metric, r->size, r->inflight);
    fprintf(stderr, fmt, x);
    fprintf(stderr, ": the machine was busy, the row is disturbed "
                    "(rerun it on a quiet machine)\n");
}

void bench_times_row(bench_times *t, bench_row *r)
{
    double lo = 0, hi = 0;
    if (t->done == 0)
        return;
    r->p50_us = bench_quantile(t->lat, t->done, 0.5);
    r->p99_us = bench_quantile(t->lat, t->done, 0.99);
    r->disturbed = BENCH_UNJUDGED;
    if (!t->per_slice || t->k != BENCH_SLICES + 1)
        return;
    for (int k = 0; k < BENCH_SLICES; k++) {
        double dt = t->cut[k + 1] - t->cut[k];
        if (dt <= 0)
            return; /* a clock too coarse to tell: not judged */
        double rate = (double)(cut_count(t, k + 1) - cut_count(t, k)) / dt;
        lo = k == 0 || rate < lo ? rate : lo;
        hi = rate > hi ? rate : hi;
    }
    r->disturbed = lo < BENCH_SLICE_MIN * hi;
    if (r->disturbed)
        warn(r, "its slowest fifth of the calls went at %.2gx the "
                "fastest fifth's rate (under 0.5x)", lo / hi);
}

void bench_judge_tail(bench_row *r)
{
    if (!(r->p50_us > 0) || !(r->p99_us >= 0))
        return;
    if (r->iters < BENCH_TAIL_MIN_CALLS) {
        r->disturbed = BENCH_UNJUDGED; /* p99 is p50's call: nothing to say */
        return;
    }
    r->disturbed = r->p99_us > BENCH_TAIL_MAX * r->p50_us;
    if (r->disturbed)
        warn(r, "p99 is %.1fx p50 (over 10x)", r->p99_us / r->p50_us);
}

/* The kernel's total of time in which some task waited for a CPU, in us;
 * NAN when it keeps none (no PSI). */
static double cpu_stall_us(void)
{
    return bench_proc_number("/proc/pressure/cpu", "some ", "total=");
}

/* Whether this process may run on two CPUs or more. */
static int several_cpus(void)
{
    cpu_set_t allowed;
    return !sched_getaffinity(0, sizeof(allowed), &allowed) &&
           CPU_COUNT(&allowed) >= 2;
}

bench_wait bench_wait_begin(void)
{
    bench_wait w = {.stall_us = several_cpus() ? cpu_stall_us() : NAN};
    w.at_us = bench_now_us();
    return w;
}

double bench_wait_share(const bench_wait *w)
{
    double now = bench_now_us(), stall = cpu_stall_us();
    if (isnan(w->stall_us) || isnan(stall) ||
        now - w->at_us < BENCH_WAIT_MIN_US)
        return NAN;
    double share = (stall - w->stall_us) / (now - w->at_us);
    return share < 0 ? 0 : share > 1 ? 1 : share;
}

void bench_judge_run_delay(bench_row *r, const bench_proc_time *t, int n)
{
    double cpu = 0, delay = 0;
    if (!several_cpus())
        return;
    for (int i = 0; i < n; i++) {
        if (isnan(t[i].cpu_ns) || isnan(t[i].delay_ns))
            return;
        cpu += t[i].cpu_ns;
        delay += t[i].delay_ns;
    }
    if (!(cpu + delay > 0))
        return;
    r->run_delay = delay / (cpu + delay);
    if (r->run_delay > BENCH_RUN_DELAY_MAX) {
        warn(r, "its processes waited for a CPU during %.0f%% of their "
                "runnable time (over 12%%)",
             r->run_delay * 100);
        r->disturbed = 1;
    } else if (r->disturbed == -1)
        r->disturbed = 0;
}

void bench_judge_wait(bench_row *r, double share)
{
    if (isnan(share))
        return;
    r->cpu_wait = share;
    if (share > BENCH_WAIT_MAX) {
        warn(r, "some task waited for a CPU during %.0f%% of it (over 40%%)",
             share * 100);
        r->disturbed = 1;
    } else if (r->disturbed == -1)
        r->disturbed = 0;
}
