#!/bin/bash
# Sourced by run_calls_<provider>.sh with PROV set: all pairs call all pairs
# (self included) with 0 B..16 MiB payloads whose bytes are checked, with
# 2 and 4 ranks; handlers that call other ranks and their own; 4 threads
# per rank calling at once, also in blocking progress (where waiting
# threads sleep and one thread's poll completes another's call); and the
# active provider is the one asked for. Zero-copy calls (args lent,
# replies given) up to ZC_MAX with every size lent, with the default
# threshold, and with lending off. A callee that pauses while its large
# reply is read does not fail the call before its timeout. On shm, the
# threads' calls also with frames never sent in parts. Handlers that take
# their args keep every promise of frpc_request_take_args.
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN ITEST PROV

calls_2() { run_bounded 240 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 200 "$ITEST" calls; }
calls_4() { run_bounded 400 "$FABRPC_RUN" -n 4 --provider "$PROV" --timeout 360 "$ITEST" calls; }
# Up to 4 relays (one per rank) can meet at one rank, each waiting in a
# pool thread for its nested calls; the nesting guard keeps one pool thread
# free, so they need 5. With the default 4 the 4th would be refused with
# FRPC_EDEADLK, as documented (CI saw it once): give the pool 6.
nested_4() { FABRPC_THREADS=6 run_bounded 240 "$FABRPC_RUN" -n 4 --provider "$PROV" --timeout 200 "$ITEST" nested; }
# udp;ofi_rxd (libfabric 1.17) stalled one of these cases twice in CI
# under make check -j2: two ranks each had a call unanswered for over 60 s
# while the other two finished theirs, so a graceful shutdown timed out.
# Not reproduced here in about 400 runs, also with 2-20% of datagrams
# dropped (an LD_PRELOAD shim) and ranks stopped for up to 3 s; no other
# provider has shown it. itest's watchdog prints the stalled calls and the
# counters after 20 s without an answer. Over udp only, a failed run is
# run once more, and the first run's output stays in the log.
threads_4() { once_more_on udp run_bounded 300 "$FABRPC_RUN" -n 4 --provider "$PROV" --timeout 260 "$ITEST" threads; }
threads_blocking() { FABRPC_PROGRESS=blocking threads_4; }
# shm sends frames of 4 KiB to 64 KiB as parts (comm/parts.h): a third
# of the threads' calls are that long. With parts off they go as before.
threads_no_parts() { FABRPC_SHM_SPLIT_MAX=0 threads_4; }
# 128 MiB args and replies, 32 MiB when scaled down (sanitizers) and on
# udp (rxd pulls a few MB/s under TSan); ZC_MAX overrides.
if [ -z "${ZC_MAX:-}" ]; then
    if [ "$PROV" = udp ] || [ "${FABRPC_TEST_SCALE:-100}" -lt 100 ]; then
        ZC_MAX=$((32 << 20))
    else
        ZC_MAX=$((128 << 20))
    fi
fi
# sockets (libfabric's older TCP provider) stalled here once in make
# check -j2 (2026-11-28): rank 1 stopped in its own calls of up to 128
# MiB, and rank 0's first call to it, of 0 B, got no answer in 120 s: the
# provider's stall under load that the README describes ("Prefer tcp to
# sockets"). Over sockets only, a failed run is run once more, and the
# first run's output stays in the log.
zc() { FABRPC_MAX_MSG=$((ZC_MAX + 1)) ZC_MAX=$ZC_MAX once_more_on sockets run_bounded 400 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 360 "$ITEST" zerocopy; }
zc_all() { FABRPC_ZEROCOPY_MIN=1 ZC_EXPECT_MIN=1 zc; }
zc_default() { ZC_EXPECT_MIN=65536 zc; }
zc_off() { FABRPC_ZEROCOPY_MIN=0 ZC_EXPECT_MIN=0 zc; }
# With coalescing off the answer leaves before the handler's pause.
late() { FABRPC_COALESCE=0 run_bounded 120 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 100 "$ITEST" late; }
fnstats() { run_bounded 120 "$FABRPC_RUN" -n "$1" --provider "$PROV" --timeout 100 "$ITEST" fnstats; }
fnstats_off() { FABRPC_FN_STATS=0 run_bounded 120 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 100 "$ITEST" fnstats-off; }
# Handlers take their args (frpc_request_take_args): from these sizes on
# the header promises them without a copy (shm: about 4 KiB, its frames
# of 4-64 KiB come in parts; tcp and verbs: 15.5 KiB; sockets and udp:
# 64 KiB), also with lending off.
case "$PROV" in
shm) TAKE_GIVEN_MIN=8192 ;;
tcp | verbs) TAKE_GIVEN_MIN=20000 ;;
*) TAKE_GIVEN_MIN=65535 ;;
esac
take() { TAKE_GIVEN_MIN=$TAKE_GIVEN_MIN run_bounded 120 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 100 "$ITEST" take; }
take_unlent() { FABRPC_ZEROCOPY_MIN=0 take; }
barrier_turns() { run_bounded 120 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 100 "$ITEST" barrier-turns; }
barrier_retry() {
    local f rc
    f=$(mktemp) && truncate -s 4096 "$f" || return 1
    BARRIER_FILE=$f run_bounded 120 "$FABRPC_RUN" -n 3 --provider "$PROV" --timeout 100 "$ITEST" barrier-retry
    rc=$?
    rm -f "$f"
    return $rc
}
backend() { EXPECT_PROVIDER=$PROV run_bounded 120 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 100 "$ITEST" backend; }

run_case "$PROV: 2 ranks, all pairs, all sizes" calls_2
run_case "$PROV: 4 ranks, all pairs, all sizes" calls_4
run_case "$PROV: 4 ranks, handlers make nested calls" nested_4
run_case "$PROV: 4 ranks x 4 threads calling at once" threads_4
run_case "$PROV: the same in blocking progress (waiters sleep)" threads_blocking
if [ "$PROV" = shm ]; then
    run_case "shm: the same with frames never sent in parts" threads_no_parts
fi
run_case "$PROV: a peer pausing 13 s while its 1 MiB reply is read: the call (60 s) succeeds" late
run_case "$PROV: active provider reported" backend
run_case "$PROV: per-function figures, 2 ranks" fnstats 2
run_case "$PROV: per-function figures, 3 ranks" fnstats 3
run_case "$PROV: per-function figures off (FABRPC_FN_STATS=0)" fnstats_off
run_case "$PROV: zero-copy calls, every size lent, up to $((ZC_MAX >> 20)) MiB" zc_all
run_case "$PROV: zero-copy calls from the default threshold" zc_default
run_case "$PROV: zero-copy off: every payload copied" zc_off
run_case "$PROV: handlers take their args: copied up to 1 KiB, handed over from $TAKE_GIVEN_MIN B" take
run_case "$PROV: the same with lending off" take_unlent
run_case "$PROV: a 20 ms barrier behind another thread's ends by its own timeout, entering nothing" barrier_turns
run_case "$PROV: 20 ms barriers retried while a rank comes late: none times out once another rank passed it" barrier_retry
finish_cases
