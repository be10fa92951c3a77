#!/bin/bash
# Sourced by run_async_<provider>.sh with PROV set: asynchronous calls over
# the provider PROV (see async.c for what each mode checks): answers out of
# order, a mixed sync/async stress with the stats adding up (with bursts
# coalesced into one message, and with FABRPC_COALESCE=0), deferred
# answers and a request never answered, nested calls and the nesting limit,
# futures' then/cancel/free racing with answers, wait_any/wait_all,
# callbacks when the pool's queue is full, a
# window refilled between waits (lingers) in each progress mode, and
# sends held back by a rank that polls nothing for 3 s; lent async calls
# (lent.c: answers, callbacks, cancel, a timeout while the callee cannot
# read, futures freed early).
#
# STRESS_CALLS (calls per thread in the stress mode) defaults to 10000,
# STALL_CALLS to 20000; FABRPC_TEST_SCALE (a percentage, default 100)
# shrinks both, e.g. for sanitizer builds.
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN ASYNC LENT PROV

export FABRPC_PROGRESS=adaptive
# scaled N: N calls at FABRPC_TEST_SCALE percent, at least 1.
scaled() {
    local n=$(($1 * ${FABRPC_TEST_SCALE:-100} / 100))
    echo $((n > 0 ? n : 1))
}
STRESS_N=$(scaled "${STRESS_CALLS:-10000}")
STALL_N=$(scaled "${STALL_CALLS:-20000}")

# run_async RANKS SECS MODE: MODE on RANKS ranks, all stopped after SECS.
run_async() {
    run_bounded $(($2 + 20)) "$FABRPC_RUN" -n "$1" --provider "$PROV" \
        --timeout "$2" "$ASYNC" "$3"
}
stress_4() { STRESS_CALLS=$STRESS_N run_async 4 280 stress; }
STRESS_ALONE=$((STRESS_N / 5 + 1))
stress_alone() {
    FABRPC_COALESCE=0 STRESS_CALLS=$STRESS_ALONE run_async 4 280 stress
}
nested_3() { FABRPC_THREADS=2 run_async 3 120 nested; }
# linger_in MODE: the linger checks with FABRPC_PROGRESS=MODE.
linger_in() { FABRPC_PROGRESS=$1 STRESS_CALLS=$STRESS_N run_async 2 200 linger; }
# sockets lost one call of the 20,000 here in two CI runs (it timed out
# after 120 s; 2026-11-26 in distcheck); never reproduced by hand. Its RMA
# stalled the same way (a TCP window it leaves shut, README), which is why
# its one-sided transfers are emulated. Over sockets only, a failed run is
# run once more, and the first run's output stays in the log.
stall_2() { STALL_CALLS=$STALL_N once_more_on sockets run_async 2 240 stall; }
# 16 MiB args at most, 4 MiB when scaled down (sanitizers).
LENT_MAX=$((${FABRPC_TEST_SCALE:-100} < 100 ? 4 << 20 : 16 << 20))
lent_2() {
    LENT_MAX=$LENT_MAX run_bounded 260 "$FABRPC_RUN" -n 2 --provider "$PROV" \
        --timeout 240 "$LENT"
}

run_case "$PROV: 10,000 async calls answered out of order" run_async 2 180 ooo
run_case "$PROV: 4 ranks x 4 threads, $STRESS_N mixed calls each" stress_4
run_case "$PROV: the same, $STRESS_ALONE calls each, every frame alone" stress_alone
run_case "$PROV: deferred answers, a request never answered" run_async 4 120 deferred
run_case "$PROV: nested calls and the nesting limit, 2 threads" nested_3
run_case "$PROV: then/cancel/free races, wait_any/wait_all" run_async 2 180 futures
for m in adaptive busy blocking; do
    run_case "$PROV, $m: a window refilled between waits; calls left behind complete" linger_in $m
done
run_case "$PROV: $STALL_N calls at a rank that polls nothing for 3 s, none failed early" stall_2
run_case "$PROV: pool queue full (threads 1, queue_len 1): callbacks on the completing, cancelling or freeing thread, each once" run_async 2 60 then-full
then_calls_2() { THEN_CALLS=$(scaled 3000) run_async 2 120 then-calls; }
run_case "$PROV: pool queue full: callbacks on the polling thread make calls (nested polls), each once, nothing lost" then_calls_2
run_case "$PROV: a future completes before its callback runs; shutdown waits for the callback" run_async 2 60 then-order
run_case "$PROV: frpc_batch_end to a rank that stopped reading returns by its calls' timeouts" run_async 2 90 batch-bound
run_case "$PROV: a 10 ms timeout added while the agent naps fires on time" run_async 2 60 nap-timeout
if [ "$PROV" = shm ] || [ "$PROV" = tcp ]; then
    run_case "$PROV: an inline handler's nested call returns after the inline handler run on top of its wait" run_async 2 60 stacked
fi
run_case "$PROV: lent async calls: answers, callbacks, cancel, timeout, early free" lent_2
finish_cases
