#!/bin/bash
# tools/fabrpc-stress over tcp with send queues of a few entries (libfabric's
# rxm: FI_OFI_RXM_TX_SIZE=4, FI_OFI_RXM_MSG_TX_SIZE=2), so that sends wait
# for room often: every rank calls every rank, itself included, sync and
# async, handlers nesting calls two levels deep. No call may be lost, come
# back wrong or time out. A thread that waited for room used to run
# handlers on top of its unsent frames (comm/fabric.c, fr__backoff): an
# inline handler there that waited for a call held the frames it needed
# back, and both ranks stalled until nested calls timed out (seeds 99 and
# 98: 8 s with no call ending, 3 timeouts each). Slowness alone is not
# judged here (ST_SLOW_MS): a loaded machine is slow. Skipped under the
# sanitizers (FABRPC_TEST_SCALE < 100), where a call may take its 5-8 s.
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN top_builddir
make_tmpdir
STRESS=$top_builddir/tools/fabrpc-stress
[ "${FABRPC_TEST_SCALE:-100}" -ge 100 ] ||
    skip "under a sanitizer every call is slow enough to time out"

small_queues() {
    local seed=$1 out="$TMPD/stress-$1.out" st=0
    [ -x "$STRESS" ] || fail "no $STRESS (make builds it)"
    FI_OFI_RXM_TX_SIZE=4 FI_OFI_RXM_MSG_TX_SIZE=2 ST_BURST_PCT=80 \
        ST_SLOW_MS=600000 FI_TCP_IFACE=lo \
        run_bounded 120 "$FABRPC_RUN" -n 2 --provider tcp --timeout 90 \
        "$STRESS" 8 "$seed" 3 >"$out" 2>&1 || st=$?
    grep -E "^\[[0-9]+\] (FINDING|WATCHDOG)" "$out" | head -20
    grep -E "calls|done" "$out" | tail -4
    [ "$st" -eq 0 ] || fail "fabrpc-stress ended with status $st"
}

for seed in 99 98; do
    run_case "tcp, send queues of 4 entries: stress seed $seed, 2 ranks x 3 threads for 8 s: no call lost, wrong or timed out" small_queues "$seed"
done
finish_cases
