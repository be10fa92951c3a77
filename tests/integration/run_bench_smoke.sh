#!/bin/bash
# Every fabrpc-bench mode in a short form, over shm and tcp: the output must
# be well formed (one flat JSON object per line with the 11 keys, or the
# table). No thresholds: the machine may be busy.
. "$(dirname "$0")/lib.sh"
need_var FABRPC_BENCH FABRPC_RUN top_srcdir
make_tmpdir

KEYS="system provider metric size inflight iters p50_us p99_us calls_per_s mb_per_s cpu_s"

# check_json FILE METRIC MIN_ROWS: every line of FILE is a flat JSON object
# (string, number, null or boolean values) with each of KEYS once, metric
# METRIC, and there are at least MIN_ROWS lines.
check_json() {
    local file=$1 metric=$2 min=$3
    awk -v keys="$KEYS" -v metric="$metric" -v min="$min" '
    function bad(msg) {
        if (!err)
            printf "line %d: %s: %s\n", NR, msg, $0 > "/dev/stderr"
        err = 1
        return 0
    }
    # Reads "key":value, then , or }; 0 at the end or on error.
    function pair(  k) {
        if (!match(s, /^"[a-z0-9_]+":/))
            return bad("expected \"key\":")
        k = substr(s, 2, RLENGTH - 3)
        s = substr(s, RLENGTH + 1)
        if (k in seen)
            return bad("duplicate key " k)
        seen[k] = 1
        if (!match(s, /^("[^"\\]*"|-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|null|true|false)/))
            return bad("bad value for " k)
        val[k] = substr(s, 1, RLENGTH)
        s = substr(s, RLENGTH + 1)
        if (s ~ /^,/) {
            s = substr(s, 2)
            return 1
        }
        if (s != "}")
            bad("expected , or } after " k)
        return 0
    }
    {
        split("", seen)
        split("", val)
        if (substr($0, 1, 1) != "{") {
            bad("not a JSON object")
            next
        }
        s = substr($0, 2)
        while (pair())
            ;
        n = split(keys, K, " ")
        for (i = 1; i <= n; i++)
            if (!(K[i] in seen))
                bad("missing key " K[i])
        if (val["metric"] != "\"" metric "\"")
            bad("metric is not " metric)
        rows++
    }
    END {
        if (!err && rows < min) {
            printf "%d rows, expected at least %d\n", rows, min > "/dev/stderr"
            err = 1
        }
        exit err
    }' "$file" || { echo "--- $file:" >&2; head -c 4000 "$file" >&2; return 1; }
}

# every_row ERE FILE: each line of FILE matches ERE (and there is one).
every_row() {
    [ -s "$2" ] && ! grep -Evq -- "$1" "$2" ||
        { echo "a row of $2 does not match $1:" >&2; cat "$2" >&2; return 1; }
}

# bench NAME ARGS...: run fabrpc-bench alone (it starts its own 2 ranks),
# output to $TMPD/NAME.out, stderr to $TMPD/NAME.err.
bench() {
    local name=$1
    shift
    if ! run_bounded 60 "$FABRPC_BENCH" "$@" >"$TMPD/$name.out" \
        2>"$TMPD/$name.err"; then
        cat "$TMPD/$name.out" "$TMPD/$name.err" >&2
        return 1
    fi
}

# Whether a row was disturbed is a judgement of the run, not checked
# here: only that it is given.
JUDGED='"disturbed":(true|false)[,}]'
WINDOWED='"p50_us":[0-9.]+,"p99_us":[0-9.]+,.*"disturbed":(true|false|null)[,}]'
mode_latency() {
    bench lat-$1 latency --provider $1 --sizes 8,4k --iters 20 --json &&
        check_json "$TMPD/lat-$1.out" latency 2 &&
        expect_grep '"provider":"'$1'"' "$TMPD/lat-$1.out" &&
        every_row "$JUDGED" "$TMPD/lat-$1.out" &&
        every_row '"handler":"inline"[,}]' "$TMPD/lat-$1.out" &&
        every_row '"progress":"adaptive"[,}]' "$TMPD/lat-$1.out" &&
        bench latb-$1 latency --provider $1 --sizes 8 --iters 20 --json \
            --progress blocking &&
        every_row '"progress":"blocking"[,}]' "$TMPD/latb-$1.out"
}
# --handler pool: the callee's handlers registered with flags 0, and the
# rows say so (latency, rate and bandwidth).
mode_handler_pool() {
    bench hpool-$1 latency --provider $1 --sizes 8 --iters 20 --json \
        --handler pool &&
        check_json "$TMPD/hpool-$1.out" latency 1 &&
        every_row '"handler":"pool"[,}]' "$TMPD/hpool-$1.out" &&
        bench hpoolr-$1 rate --provider $1 --inflight 4 --iters 50 --json \
            --handler pool &&
        check_json "$TMPD/hpoolr-$1.out" rate 1 &&
        every_row '"handler":"pool"[,}]' "$TMPD/hpoolr-$1.out" &&
        bench hpoolb-$1 bandwidth --provider $1 --sizes 4k --inflight 1 \
            --iters 20 --json --handler pool &&
        check_json "$TMPD/hpoolb-$1.out" bandwidth 1 &&
        every_row '"handler":"pool"[,}]' "$TMPD/hpoolb-$1.out"
}
# Rate and bandwidth rows say whether coalescing was on (fabrpc's
# default: on), the p50 and p99 of each call's latency, and whether the
# run looked disturbed (null with too few calls a slice: W 4 here,
# unless the CPU-wait rule saw another process: true).
mode_rate() {
    bench rate-$1 rate --provider $1 --inflight 1,4 --iters 50 --json &&
        check_json "$TMPD/rate-$1.out" rate 2 &&
        expect_grep '"inflight":4,' "$TMPD/rate-$1.out" &&
        every_row '"coalesce":true[,}]' "$TMPD/rate-$1.out" &&
        every_row "$WINDOWED" "$TMPD/rate-$1.out" &&
        expect_grep '"inflight":1,.*'"$JUDGED" "$TMPD/rate-$1.out" &&
        expect_grep '"inflight":4,.*"disturbed":(null|true)' "$TMPD/rate-$1.out"
}
# --coalesce off reaches rank 0's agent: every frame goes alone.
# Uncoalesced, with the raw libfabric rows of the same windows (fi_msg,
# with their own p50 and p99) and each fabrpc row's ratio to its window's.
mode_rate_uncoalesced() {
    local f=$TMPD/rateu-$1
    bench rateu-$1 rate --provider $1 --inflight 1,16 --iters 200 \
        --coalesce off --baseline --json &&
        grep '"system":"fabrpc"' "$f.out" >"$f.fabrpc" &&
        grep '"system":"fi_msg"' "$f.out" >"$f.raw" &&
        check_json "$f.fabrpc" rate 2 &&
        check_json "$f.raw" rate 2 &&
        every_row '"coalesce":false[,}]' "$f.fabrpc" &&
        every_row '"frames_per_message":1\.00[,}]' "$f.fabrpc" &&
        every_row '"ratio_to_fi_msg":[0-9]' "$f.fabrpc" &&
        expect_grep '"inflight":16,.*"calls_per_s":[0-9]' "$f.raw" &&
        every_row "$WINDOWED" "$f.raw"
}
mode_rate_batched() {
    bench rateb-$1 rate --provider $1 --inflight 1,16 --iters 200 --batch \
        --json &&
        check_json "$TMPD/rateb-$1.out" rate_batched 2 &&
        expect_grep '"inflight":16,' "$TMPD/rateb-$1.out" &&
        every_row "$WINDOWED" "$TMPD/rateb-$1.out"
}
mode_bandwidth() {
    bench bw-$1 bandwidth --provider $1 --sizes 64k,1m --inflight 2 \
        --iters 8 --json &&
        check_json "$TMPD/bw-$1.out" bandwidth 2 &&
        expect_grep '"mb_per_s":[0-9]' "$TMPD/bw-$1.out" &&
        every_row '"coalesce":true[,}]' "$TMPD/bw-$1.out" &&
        every_row "$WINDOWED" "$TMPD/bw-$1.out"
}
# rma: get and put rows per size and window, sync (W 1, with p50) and
# async (W 2), batches of 1,000; with --baseline the raw libfabric rows
# (and memcpy on shm) follow.
mode_rma() {
    local f=$TMPD/rma-$1
    bench rma-$1 rma --provider $1 --sizes 8,64k --inflight 1,2 --iters 20 \
        --baseline --json &&
        grep '"metric":"get"' "$f.out" >"$f.get" &&
        grep '"metric":"put"' "$f.out" >"$f.put" &&
        grep '"metric":"put_batch"' "$f.out" >"$f.put_batch" &&
        grep '"metric":"raw_read"' "$f.out" >"$f.raw_read" &&
        grep '"metric":"raw_write_batch"' "$f.out" >"$f.raw_wb" &&
        check_json "$f.get" get 4 &&
        check_json "$f.put" put 4 &&
        check_json "$f.put_batch" put_batch 2 &&
        check_json "$f.raw_read" raw_read 4 &&
        check_json "$f.raw_wb" raw_write_batch 2 &&
        expect_grep '"inflight":1000,' "$f.put_batch" &&
        if [ "$1" = shm ]; then
            grep '"metric":"memcpy"' "$f.out" >"$f.memcpy" &&
                check_json "$f.memcpy" memcpy 2
        fi &&
        expect_grep '"size":65536,"inflight":1,.*"p50_us":[0-9].*"mb_per_s":[0-9]' "$f.get" &&
        expect_grep '"size":65536,"inflight":1,.*"coalesce":true.*'"$JUDGED" "$f.get" &&
        expect_grep '"size":65536,"inflight":2,.*"mb_per_s":[0-9]' "$f.put"
}
# latency with --gap-us: the ranks idle before each call; rows say so.
mode_gap() {
    bench gap-$1 latency --provider $1 --sizes 8 --iters 20 --warmup 2 \
        --gap-us 2000 --json &&
        check_json "$TMPD/gap-$1.out" latency 1 &&
        expect_grep '"p50_us":[0-9].*"gap_us":2000[,}]' "$TMPD/gap-$1.out"
}
mode_idle() {
    bench idle-$1 idle --provider $1 --seconds 0.2 --json &&
        check_json "$TMPD/idle-$1.out" idle 2 &&
        expect_grep '"cpu_s":[0-9]' "$TMPD/idle-$1.out"
}
# Every call of the timeouts mode must end FRPC_ETIMEDOUT (not_timed_out
# 0); how late is a figure, not a threshold here.
mode_timeouts() {
    bench tmo-$1 timeouts --provider $1 --iters 20 --json || return 1
    grep '"metric":"timeout_sync"' "$TMPD/tmo-$1.out" >"$TMPD/tmo-$1.sync" &&
        grep '"metric":"timeout_async"' "$TMPD/tmo-$1.out" \
            >"$TMPD/tmo-$1.async" &&
        check_json "$TMPD/tmo-$1.sync" timeout_sync 1 &&
        check_json "$TMPD/tmo-$1.async" timeout_async 1 &&
        expect_grep '"not_timed_out":0.*$' "$TMPD/tmo-$1.sync" &&
        expect_grep '"max_us":[0-9].*"not_timed_out":0' "$TMPD/tmo-$1.async"
}
# init under fabrpc-run with 3 ranks (the launcher's path, rank tags on).
mode_init() {
    local out="$TMPD/init-$1.out"
    run_bounded 60 "$FABRPC_RUN" -n 3 --provider $1 "$FABRPC_BENCH" init \
        --json >"$out.raw" 2>&1 || { cat "$out.raw" >&2; return 1; }
    sed -n 's/^\[0\] //p' "$out.raw" >"$out"
    check_json "$out" init 1 &&
        expect_grep '"size":3,.*"rss_mb":[0-9]' "$out"
}
# fabrpc's rows with a ratio, then fi_pingpong's; without fi_pingpong, the
# fabrpc rows and exit status 3 with a message naming libfabric-bin.
baseline() {
    local out="$TMPD/base-$1.out" st=0
    run_bounded 90 "$FABRPC_BENCH" latency --provider $1 --sizes 8 \
        --iters 50 --baseline --json >"$out" 2>"$out.err" || st=$?
    if ! command -v fi_pingpong >/dev/null; then
        echo "note: fi_pingpong not installed; checking the message only"
        [ $st = 3 ] || { cat "$out.err" >&2; return 1; }
        expect_grep 'libfabric-bin' "$out.err"
        check_json "$out" latency 1
        return
    fi
    [ $st = 0 ] || { cat "$out" "$out.err" >&2; return 1; }
    check_json "$out" latency 2 &&
        expect_grep '^\{"system":"fi_pingpong","provider":"'$1'".*"size":8,' "$out" &&
        expect_grep '^\{"system":"fabrpc",.*"ratio_to_fi_pingpong":[0-9]' "$out" ||
        return 1
    # its processes' wait for a CPU, judged where rank 0 has two CPUs
    [ "$(nproc)" -lt 2 ] ||
        expect_grep '^\{"system":"fi_pingpong",.*"run_delay":[01]\.[0-9]{3}[,}]' "$out"
}
# The machine's state around each fabrpc and fi_pingpong row: given when
# rank 0 may use two CPUs and its agent does not busy-poll (a cache line's
# round trip between two CPUs: a positive whole number of ns, with no upper
# bound: under ThreadSanitizer on a loaded machine it was 106 us);
# left out with --progress busy.
STATE='"core_ns_before":[1-9][0-9]*,"core_ns_after":[1-9][0-9]*[,}]'
core_state() {
    local out="$TMPD/state-$1.out"
    bench state-$1 latency --provider $1 --sizes 8 --iters 20 --json \
        --baseline || [ -s "$out" ] || return 1
    check_json "$out" latency 1 || return 1
    if [ "$(nproc)" -ge 2 ]; then
        every_row "$STATE" "$out"
    else
        echo "note: one CPU here; checking that the state is left out"
        ! grep -q '"core_ns_' "$out"
    fi &&
        bench stateb-$1 latency --provider $1 --sizes 8 --iters 20 --json \
            --progress busy &&
        check_json "$TMPD/stateb-$1.out" latency 1 &&
        ! grep -q '"core_ns_' "$TMPD/stateb-$1.out"
}
# --progress blocking adds the rows and ratios of a blocking TCP ping-pong
# and of a blocking ping-pong over raw libfabric on the same provider, and
# a busy TCP ping-pong's row (they need no fi_pingpong; exit 3 only says
# fi_pingpong is missing).
baseline_blocking() {
    local out="$TMPD/baseb-$1.out" st=0
    run_bounded 90 "$FABRPC_BENCH" latency --provider $1 --sizes 8 \
        --iters 50 --baseline --progress blocking --json >"$out" \
        2>"$out.err" || st=$?
    [ $st = 0 ] || { [ $st = 3 ] && ! command -v fi_pingpong >/dev/null; } ||
        { cat "$out" "$out.err" >&2; return 1; }
    check_json "$out" latency 2 &&
        expect_grep '^\{"system":"tcp_pingpong","provider":"loopback".*"size":8,' "$out" &&
        expect_grep '^\{"system":"tcp_pingpong_busy","provider":"loopback".*"size":8,.*"p50_us":[0-9]' "$out" &&
        expect_grep '^\{"system":"fabrpc",.*"ratio_to_tcp_pingpong":[0-9]' "$out" ||
        return 1
    # A provider with no CQ wait object has no blocking path to measure:
    # fabrpc-bench says so and prints no rows (not a failure).
    if grep -q 'no fi_blocking_pingpong rows' "$out.err"; then
        echo "note: $1 has no CQ wait object; no raw libfabric rows"
        return
    fi
    expect_grep '^\{"system":"fi_blocking_pingpong","provider":"'$1'".*"size":8,.*"p50_us":[0-9].*"p99_us":[0-9]' "$out" &&
        expect_grep '^\{"system":"fabrpc",.*"ratio_to_fi_blocking":[0-9]' "$out"
}
table() {
    bench table rate --inflight 2 --iters 20 &&
        expect_grep '^system +provider +metric +size +inflight +iters +p50_us +p99_us +calls/s +MB/s +cpu_s +coalesce$' "$TMPD/table.out" &&
        expect_grep '^fabrpc +[a-z]+ +rate +8 +2 +20 .* on( |$)' "$TMPD/table.out" &&
        expect_grep '^fabrpc +[a-z]+ +rate +8 +2 +20 +[0-9.]+ +[0-9.]+ ' "$TMPD/table.out"
}
help_lists_all() {
    local w
    "$FABRPC_BENCH" --help >"$TMPD/help.out" || return 1
    for w in latency rate bandwidth rma idle init timeouts --provider --sizes --inflight \
        --iters --warmup --progress --seconds --gap-us --ranks --json --baseline \
        --batch --coalesce --lend --handler; do
        expect_grep "^ +$w " "$TMPD/help.out"
    done
    # rma's batch rows are named with the mode (they were not: "metrics
    # get, put" only).
    expect_grep 'metrics$' "$TMPD/help.out" &&
        expect_grep 'get_batch, put_batch' "$TMPD/help.out"
}
# usage_error ERE ARGS...: fabrpc-bench ARGS exits 2 with ERE on stderr.
usage_error() {
    local want=$1 st=0
    shift
    "$FABRPC_BENCH" "$@" >/dev/null 2>"$TMPD/usage.err" || st=$?
    [ $st = 2 ] && expect_grep "$want" "$TMPD/usage.err"
}
bad_usage() {
    usage_error 'unknown mode' nosuchmode
}
# fault-figures.sh with no built tree (or --help): usage and exit 2 at
# once. It used to run its 2 x 10 rounds of every fault against missing
# binaries and print a table of dashes with status 0.
fault_figures_usage() {
    local st=0 arg
    for arg in --help "$TMPD/no-such-build"; do
        st=0
        run_bounded 20 bash "$top_srcdir/tools/fault-figures.sh" "$arg" \
            >"$TMPD/ff.out" 2>&1 || st=$?
        cat "$TMPD/ff.out"
        [ $st = 2 ] || { echo "fault-figures.sh $arg: status $st, want 2"; return 1; }
        expect_grep '^usage: .*fault-figures.sh BUILD_DIR' "$TMPD/ff.out" || return 1
        if grep -q 'median' "$TMPD/ff.out"; then
            echo "fault-figures.sh $arg ran its rounds"; return 1
        fi
    done
}
# Counts past what a row can hold, wrapped or empty: usage errors. An
# --iters of 2^61+1 wrapped the time table's size to 8 bytes (SIGSEGV), a
# size of 2^44 MiB wrapped to 1 MiB, an empty --seconds read as 0.
bad_counts() {
    usage_error 'bad --iters' latency --iters 2305843009213693953 &&
        usage_error 'bad --warmup' rate --warmup 100000001 &&
        usage_error 'bad item "17592186044417m"' latency --sizes 17592186044417m &&
        usage_error 'bad --seconds' idle --seconds '' &&
        usage_error 'bad --gap-us' latency --gap-us ''
}
# A window over the calls fabrpc keeps in flight says so (it said
# "resource temporarily unavailable").
window_over_the_limit() {
    local st=0
    FABRPC_MAX_INFLIGHT=64 run_bounded 60 "$FABRPC_BENCH" rate --iters 3 \
        --inflight 128 --warmup 0 >/dev/null 2>"$TMPD/win.err" || st=$?
    cat "$TMPD/win.err"
    [ $st = 1 ] && expect_grep 'a window of 128 is more than fabrpc keeps in flight' "$TMPD/win.err"
}
bad_gap() {
    usage_error 'bad --gap-us' latency --gap-us -1 &&
        usage_error 'gap-us goes with' rate --gap-us 100
}
bad_handler() {
    usage_error 'bad --handler' latency --handler worker &&
        usage_error 'handler goes with' idle --handler pool
}
bad_coalesce() {
    usage_error 'bad --coalesce' rate --coalesce yes &&
        usage_error 'coalesce goes with' idle --coalesce off
}
# Refused before any rank starts: a padded or empty provider name (it
# came up as "shm" and was then refused as not what was asked), a window
# fabrpc-bench cannot allocate, a number named by its option.
bad_values() {
    usage_error "bad --provider" latency --provider ' shm' &&
        usage_error "bad --provider" latency --provider '' &&
        usage_error "bad --provider" latency --provider 'shm,,tcp' &&
        usage_error "--inflight above 1048576" rate --inflight 4294967296 &&
        usage_error "bad --iters \\(1\\.\\.100000000\\): 0" rate --iters 0
}

# Three spinning shells beside the two ranks: some task waits for a CPU
# nearly all the time, so a row timed for 100 ms or more says so (cpu_wait
# over 0.4, disturbed, a warning naming the wait) though its calls are
# alike slow (the spread rules do not see it). Not checked where the
# kernel keeps no CPU pressure figure (/proc/pressure/cpu).
cpu_wait_rule() {
    if ! grep -qs '^some .*total=' /proc/pressure/cpu; then
        echo "note: no /proc/pressure/cpu here; not checked"
        return 0
    fi
    local spinners="" rc=0 i out=$TMPD/loaded-$1
    for i in 1 2 3; do
        timeout 120 sh -c 'while :; do :; done' &
        spinners="$spinners $!"
    done
    # a row of 100 ms or more however much the spinners slow the ranks
    # (under AddressSanitizer a loaded tcp round trip once took 75 us, and
    # 1,000 of them were too short to be judged): 1,000 calls, each after
    # a sleep of 200 us, which the row's time counts
    bench loaded-$1 latency --provider $1 --sizes 8 --iters 1000 \
        --gap-us 200 --warmup 10 --json || rc=1
    # fi_pingpong's processes wait for a CPU too: its row is judged by
    # their own wait (run_delay), whatever its length and start-up
    local base=$TMPD/loaded-base-$1
    if [ $rc = 0 ] && command -v fi_pingpong >/dev/null; then
        bench loaded-base-$1 latency --provider $1 --sizes 8 --iters 200 \
            --warmup 10 --baseline --json || rc=1
    fi
    kill $spinners 2>/dev/null
    wait $spinners 2>/dev/null
    [ $rc = 0 ] && check_json "$out.out" latency 1 &&
        every_row '"disturbed":true,"cpu_wait":(0\.[4-9][0-9]*|1\.000)[,}]' \
            "$out.out" &&
        expect_grep 'some task waited for a CPU during [0-9]+% of it' \
            "$out.err" || return 1
    command -v fi_pingpong >/dev/null || return 0
    expect_grep '^\{"system":"fi_pingpong",.*"disturbed":true,.*"run_delay":(0\.[1-9][0-9]*|1\.000)[,}]' \
        "$base.out" &&
        expect_grep 'fi_pingpong latency size 8 W 1: its processes waited for a CPU during [0-9]+% of their runnable time' \
            "$base.err"
}

for prov in shm tcp; do
    run_case "latency, $prov: JSON rows" mode_latency $prov
    run_case "rate, $prov: JSON rows" mode_rate $prov
    run_case "--handler pool, $prov: rows say so" mode_handler_pool $prov
    run_case "rate with --batch, $prov: JSON rows" mode_rate_batched $prov
    run_case "rate with --coalesce off, $prov: one frame a message, raw baseline" \
        mode_rate_uncoalesced $prov
    run_case "bandwidth, $prov: JSON rows" mode_bandwidth $prov
    run_case "rma (get, put, batches, raw baseline), $prov: JSON rows" mode_rma $prov
    run_case "latency with --gap-us, $prov: rows say gap_us" mode_gap $prov
    run_case "idle, $prov: a row per rank" mode_idle $prov
    run_case "init, 3 ranks under fabrpc-run, $prov" mode_init $prov
    run_case "timeouts, $prov: every call times out" mode_timeouts $prov
    run_case "baseline against fi_pingpong, $prov" baseline $prov
    run_case "the machine's state around rows, $prov" core_state $prov
    run_case "blocking baselines (TCP, raw libfabric), $prov" baseline_blocking $prov
    run_case "a machine loaded all through a row: disturbed by the CPU wait, $prov" \
        cpu_wait_rule $prov
done
run_case "table output has the header and rows" table
run_case "--help names every mode and option" help_lists_all
run_case "unknown mode is a usage error" bad_usage
run_case "a bad --coalesce is a usage error" bad_coalesce
run_case "a bad --handler is a usage error" bad_handler
run_case "a bad --gap-us is a usage error" bad_gap
run_case "counts too large, wrapped or empty are usage errors" bad_counts
run_case "a window over max_inflight says so" window_over_the_limit
run_case "a bad --provider, --inflight or --iters is a usage error" bad_values
run_case "fault-figures.sh without a built tree is a usage error" fault_figures_usage
finish_cases
