#!/bin/bash
# Pool handlers the progress thread runs itself (since 1.5; standin.c for
# what each mode checks), over shm and tcp: a handler there that blocks
# until another request has run (only the thread standing in for the
# progress thread can take it from the wire), handlers of 300 us that
# together run 10 ms (some go to the pool), one such handler called one
# at a time (it leaves the progress thread after 1 to 10 runs there, and
# does not come back), and a shutdown, immediate
# and graceful, while such a handler waits in a call that only the
# shutdown ends. Each job is bounded (fabrpc-run --timeout); rounds' and
# shutdowns' times are printed.
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN STANDIN
make_tmpdir
export FABRPC_PROGRESS=adaptive

# job NAME SECS MODE [VAR=VALUE...]: MODE on $RANKS ranks (2 unless set)
# of $PROV; output in
# $TMPD/$PROV-NAME.{out,err}, shown with the figures; fails unless every
# rank exited 0 and said "ok".
job() {
    local name=$1 secs=$2 mode=$3 st=0
    shift 3
    local out=$TMPD/$PROV-$name
    (
        [ $# -gt 0 ] && export "$@"
        run_bounded $((secs + 20)) "$FABRPC_RUN" -n "${RANKS:-2}" --provider "$PROV" \
            --timeout "$secs" "$STANDIN" "$mode" >"$out.out" 2>"$out.err"
    ) || st=$?
    grep -hE 'round|shutdown|stand-ins|ended|progress thread|longest' "$out.out" | sed 's/^/    /'
    if [ $st -ne 0 ] || ! grep -q '^\[0\] ok: ' "$out.out" ||
        ! grep -q '^\[1\] ok: ' "$out.out"; then
        echo "--- stdout:"; cat "$out.out"; echo "--- stderr:"; cat "$out.err"
        fail "$mode: fabrpc-run exited $st, or a rank did not say ok"
    fi
}

for PROV in shm tcp; do
    run_case "$PROV: a pool handler the progress thread runs blocks until the next request ran: a stand-in takes it, 3 rounds" \
        job block 90 block
    run_case "$PROV: the same with 2 pool threads" job block2 90 block FABRPC_THREADS=2
    run_case "$PROV: 32 handlers of 300 us at once: not all one after the other on the progress thread" \
        job spread 60 spread
    run_case "$PROV: immediate shutdown while such a handler waits in a call: returns within its bound" \
        job shut-imm 60 shutdown STANDIN_HOW=immediate
    run_case "$PROV: graceful shutdown, the same" job shut-grace 60 shutdown STANDIN_HOW=graceful
    run_case "$PROV: frpc_shutdown in a pool handler the progress thread runs: FRPC_EDEADLK" job own 60 own
    run_case "$PROV: a function sent to the pool comes back to the progress thread after quick runs there" \
        job recover 120 recover \
        STANDIN_CALLS=$((5000 * 100 / ${FABRPC_TEST_SCALE:-100}))
    run_case "$PROV: a pool function of 300 us a run, called one at a time, leaves the progress thread after 1 to 10 runs there, for good" \
        job heavy 60 heavy
    # Scaled down under sanitizers (FABRPC_TEST_SCALE): each call is slower.
    run_case "$PROV: 4 ranks call each other and themselves with pauses, blocking progress: none waits out its timeout" \
        job paced 240 paced RANKS=4 FABRPC_PROGRESS=blocking \
        STANDIN_CALLS=$((5000 * ${FABRPC_TEST_SCALE:-100} / 100))
done
finish_cases
