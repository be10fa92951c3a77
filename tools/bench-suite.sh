#!/bin/bash
# bench-suite.sh: runs every measurement behind docs/PERFORMANCE.md's
# targets, RUNS times (default 3), one JSON-lines file per run:
#   OUTDIR/run-N.jsonl
# Then prints the median over the runs of each target figure (issues 4
# and 15: coalescing off against Mercury, 1 and 16 MiB calls, tcp p99),
# each run's figure marked with the machine's state in its row (f fast,
# s slow, ! disturbed: see the summary's code),
# an 8 B call to a handler on the pool against an inline one, and an 8 B
# round trip with both ranks on one core (taskset -c 0).
#
# usage: tools/bench-suite.sh BUILDDIR OUTDIR [RUNS]
# BUILDDIR: a built tree (it has tools/fabrpc-bench and tools/fabrpc-run).
# RUNS=0 only summarizes the OUTDIR/run-*.jsonl already there.
# Run it on an otherwise idle machine: with two cores, anything else
# running changes the figures. tcp stays on loopback (FI_TCP_IFACE=lo).
set -euo pipefail

case "${1:-}" in -h|--help) echo "usage: $0 BUILDDIR OUTDIR [RUNS]"; exit 0 ;; esac
if [ $# -lt 2 ]; then
    echo "usage: $0 BUILDDIR OUTDIR [RUNS]" >&2
    exit 2
fi
build=$1 out=$2 runs=${3:-3}
bench=$build/tools/fabrpc-bench run=$build/tools/fabrpc-run
[ -x "$bench" ] && [ -x "$run" ] || {
    echo "$0: no fabrpc-bench/fabrpc-run under $build/tools" >&2
    exit 1
}
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
mkdir -p "$out"

one_run() {
    local f=$1
    : >"$f"
    for p in shm tcp; do
        "$bench" latency --baseline --json --provider $p --sizes 8,64
        "$bench" latency --json --provider $p --sizes 8 --handler pool
        "$bench" rate --json --provider $p --inflight 1,16,64,256
        "$bench" rate --json --provider $p --inflight 1,16,64,256 \
            --coalesce off
        "$bench" rate --batch --json --provider $p --inflight 1,16,64,256
        "$bench" latency --baseline --progress blocking --json --provider $p \
            --sizes 8 --iters 5000
        "$bench" bandwidth --json --provider $p --sizes 1m,16m --inflight 1
        "$bench" bandwidth --json --provider $p --sizes 1m,16m --inflight 1 \
            --lend off
        "$bench" idle --json --seconds 3 --provider $p
    done 2>>"$f.err" | sed -e 's/^[^{]*{/{/' | grep '^{' >>"$f"
    # More ranks than cores: both ranks on one CPU, the default (adaptive)
    # mode. The rows say so ("one_core"); rows without it had two.
    for p in shm tcp; do
        taskset -c 0 "$bench" latency --json --provider $p --sizes 8 \
            --iters 500
    done 2>>"$f.err" | sed -e 's/^[^{]*{/{/' | grep '^{' |
        sed -e 's/^{/{"one_core":true,/' >>"$f"
    # In a build tree fabrpc-bench is libtool's wrapper script, which
    # costs each of the 32 ranks about 130 ms of CPU before it starts (a
    # shell, sed, ls): libtool runs the program it wraps instead, as an
    # installed fabrpc-bench would start.
    local exec=()
    if [ -x "$build/libtool" ] && ! head -c 4 "$bench" | grep -q ELF; then
        exec=("$build/libtool" --mode=execute)
    fi
    "${exec[@]}" "$run" -n 32 "$bench" init --json 2>>"$f.err" |
        sed -e 's/^[^{]*{/{/' | grep '^{' >>"$f"
}

for i in $(seq 1 "$runs"); do
    echo "run $i of $runs -> $out/run-$i.jsonl" >&2
    one_run "$out/run-$i.jsonl"
done

# One line per target: the figure of each run and their median.
awk '
function field(name,   m, re) {
    re = "\"" name "\":(\"[^\"]*\"|[-0-9.eE]+|null|true|false)"
    if (!match($0, re)) return ""
    m = substr($0, RSTART + length(name) + 3, RLENGTH - length(name) - 3)
    gsub(/"/, "", m)
    return m
}
# Each figure carries the state its row ran in (fabrpc-bench --help: the
# machine'"'"'s state): "f" fast, "s" slow (a cache line round trip between
# the two CPUs under, or from, 300 ns, before the row), "!" disturbed.
# Rows of different states differ 2x and more: compare like with like.
function add(key, v) {
    if (v != "" && v != "null") vals[key] = vals[key] " " v tag
}
{
    sys = field("system"); prov = field("provider"); met = field("metric")
    size = field("size"); w = field("inflight")
    core = field("core_ns_before")
    tag = (core == "" || core == "null") ? "" : (core + 0 < 300 ? "f" : "s")
    if (field("disturbed") == "true") tag = tag "!"
    # The blocking ping-pongs come after the fabrpc row of their run.
    if (FNR == 1) cur = ""
    if (sys == "tcp_pingpong" && size == 8) tcp_blk[FILENAME, cur] = field("p50_us")
    if (sys == "tcp_pingpong_busy" && size == 8) tcp_busy[FILENAME, cur] = field("p50_us")
    if (sys != "fabrpc") next
    if (field("one_core") == "true") {
        add("latency " prov " both ranks on one core, adaptive: p50 us",
            field("p50_us"))
        next
    }
    # Handlers on the pool (frpc_register flags 0) against inline ones,
    # the row above (no target: what a user who keeps the default gets).
    if (field("handler") == "pool") {
        if (met == "latency" && size == 8 && (FILENAME, prov) in awake) {
            add("latency " prov " handler pool: p50 us", field("p50_us"))
            add("latency " prov " handler pool: p99 us", field("p99_us"))
            add("latency " prov " handler pool: p50 / inline p50",
                sprintf("%.2f", field("p50_us") / awake[FILENAME, prov]))
        }
        next
    }
    if (met == "latency" && size == 8 && field("ratio_to_tcp_pingpong") != "") {
        cur = prov
        add("blocking " prov ": ratio to tcp_pingpong (target 1.2)",
            field("ratio_to_tcp_pingpong"))
    } else if (met == "latency" && size == 8) {
        awake[FILENAME, prov] = field("p50_us")
        add("latency " prov ": ratio to fi_pingpong (target shm 1.2, tcp 1.15)",
            field("ratio_to_fi_pingpong"))
    }
    if (met == "rate" && w == 64 && field("coalesce") != "false")
        add("rate " prov " W=64 calls/s (target shm 1.3M, tcp 130k)",
            field("calls_per_s"))
    # Issue 15: coalescing off against Mercury 2.4.1 on this machine
    # (ofi+shm W=64 1.40M; tcp W=1 57k, W=16 124k, W=64 135k, W=256 134k).
    if (met == "rate" && field("coalesce") == "false") {
        merc = ""
        if (prov == "tcp" && w == 1) merc = " (Mercury 57k)"
        if (prov == "tcp" && w == 16) merc = " (Mercury 124k)"
        if (prov == "tcp" && w == 64) merc = " (Mercury 135k)"
        if (prov == "tcp" && w == 256) merc = " (Mercury 134k)"
        if (prov == "shm" && w == 64) merc = " (Mercury 1.40M)"
        add(sprintf("rate %s coalescing off W=%3d calls/s%s", prov, w, merc),
            field("calls_per_s"))
    }
    if (met == "latency" && size == 8 && field("ratio_to_tcp_pingpong") == "" &&
        prov == "tcp")
        add("latency tcp: p99 / p50 (target 2)",
            sprintf("%.2f", field("p99_us") / field("p50_us")))
    # Args lent (frpc_call_async_lent, the default since 1.3) or copied
    # (--lend off; rows from before 1.3 have no lent key: copied).
    how = field("lent") == "true" ? "lent" : "copied"
    if (met == "bandwidth" && size == 1048576)
        add("1 MiB " prov " " how " MB/s (target shm 5500, tcp 3000 every run)",
            field("mb_per_s"))
    if (met == "rate_batched" && w == 64)
        add("rate --batch " prov " W=64 calls/s", field("calls_per_s"))
    if (met == "bandwidth" && size == 16777216)
        add("16 MiB " prov " " how " MB/s (target shm 5500, tcp 3000 every run)",
            field("mb_per_s"))
    if (met == "idle")
        add("idle " prov " cpu_s per 3 s (target < 0.03)", field("cpu_s"))
    if (met == "init") {
        add("init 32 ranks: p99 frpc_init to ready, s (target 3)",
            field("p99_us") / 1e6)
        add("init 32 ranks: exec to last ready, s", field("job_s"))
        add("init 32 ranks: largest RSS MB (target 64)", field("rss_mb"))
    }
}
END {
    # The least any mode that sleeps once per message could take: fabrpc
    # awake (its own round trip), plus what two wake-ups cost (the blocking TCP
    # ping-pong less the busy one), as a ratio to the blocking ping-pong.
    for (k in awake) {
        if (!(k in tcp_blk) || !(k in tcp_busy) || tcp_blk[k] <= 0) continue
        split(k, rp, SUBSEP)
        add("blocking " rp[2] ": floor ratio, awake p50 + 2 wake-ups",
            sprintf("%.2f", (awake[k] + tcp_blk[k] - tcp_busy[k]) / tcp_blk[k]))
    }
    for (k in vals) {
        n = split(substr(vals[k], 2), a, " ")
        for (i = 1; i <= n; i++)           # insertion sort: n is small
            for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
                t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
            }
        med = n % 2 ? a[(n + 1) / 2] + 0 : (a[n / 2] + a[n / 2 + 1]) / 2
        printf "%-62s median %-10s (%s)\n", k, med, substr(vals[k], 2)
    }
}' "$out"/run-*.jsonl | sort
