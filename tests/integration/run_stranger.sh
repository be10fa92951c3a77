#!/bin/bash
# A process outside the job (it has the members' addresses and even the
# stolen job token) sends random bytes, messages larger than the receive
# buffers (64 KiB + 1, 1 MiB, 16 MiB), frames with a wrong or the stolen
# token and forged rendezvous descriptors to a 2-rank job whose members
# keep calling each other, then plain TCP bytes and held connections at
# the members' tcp ports and the bootstrap store's: nothing runs for it,
# the drops are counted, and the members' calls all succeed in time. Over
# shm, tcp, udp and sockets (not at sockets' own port: README).
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN STRANGER

stranger_case() {
    local prov=$1 job i
    make_tmpdir
    export STRANGER_DIR=$TMPD
    run_bounded 150 "$FABRPC_RUN" -n 2 --provider "$prov" --timeout 140 \
        "$STRANGER" >"$TMPD/job.out" 2>&1 &
    job=$!
    echo "$job" >"$TMPD/job.pid"
    for i in $(seq 300); do
        [ -f "$TMPD/ready.0" ] && [ -f "$TMPD/ready.1" ] && break
        pid_alive "$job" || break
        sleep 0.1
    done
    if ! [ -f "$TMPD/ready.0" ] || ! [ -f "$TMPD/ready.1" ]; then
        cat "$TMPD/job.out" >&2
        fail "$prov: the members did not come up"
    fi
    run_bounded 90 "$STRANGER" --stranger "$prov" >"$TMPD/stranger.out" 2>&1 ||
        { cat "$TMPD/stranger.out" >&2; fail "$prov: the stranger failed"; }
    touch "$TMPD/done"
    wait "$job" || { cat "$TMPD/stranger.out" "$TMPD/job.out" >&2;
                     fail "$prov: the job failed"; }
    cat "$TMPD/stranger.out" "$TMPD/job.out"
    expect_grep '^\[0\] ok: rank 0 made' "$TMPD/job.out"
    expect_grep '^\[1\] ok: rank 1 made' "$TMPD/job.out"
}

run_case "shm: a stranger's bytes are dropped and counted, calls go on" stranger_case shm
run_case "tcp: a stranger's bytes are dropped and counted, calls go on" stranger_case tcp
run_case "udp: a stranger's bytes are dropped and counted, calls go on" stranger_case udp
run_case "sockets: a stranger's bytes are dropped and counted, calls go on" stranger_case sockets
finish_cases
