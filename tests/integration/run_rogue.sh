#!/bin/bash
# A misbehaving peer (malformed frames, wrong token, stray answers, bad
# rendezvous descriptors) cannot crash or hang a rank, over shm and tcp;
# a rank whose init fails at its last step fails every rank's.
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN ROGUE

rogue() { run_bounded 120 "$FABRPC_RUN" -n 2 --provider "$1" --timeout 100 "$ROGUE"; }
run_case "shm: rogue frames are dropped or refused" rogue shm
run_case "tcp: rogue frames are dropped or refused" rogue tcp
# The last step a rank's frpc_init may fail at (its liveness threads):
# every rank's init fails, none returns 0 (rogue.c).
init_fails() {
    local out st=0
    out=$(ROGUE_FAIL_RANK=$2 run_bounded 120 "$FABRPC_RUN" -n 3 --keep-going \
        --provider "$1" --timeout 100 "$ROGUE" init-fails 2>&1) || st=$?
    echo "$out" | grep -E "ok:|FAIL" | sed 's/^/    /'
    # Each rank exits 0 only once its own frpc_init failed.
    [ $st = 0 ] && [ "$(echo "$out" | grep -c '\] ok: frpc_init failed')" = 3 ] ||
        { echo "$out"; fail "not every rank's frpc_init failed (status $st)"; }
}
run_case "shm: rank 1's init cannot make its threads: every rank's init fails" init_fails shm 1
run_case "tcp: rank 0's init cannot make its threads: every rank's init fails" init_fails tcp 0
finish_cases
