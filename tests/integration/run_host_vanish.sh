#!/bin/bash
# A host that vanishes without closing anything (power, a cut cable): two
# ranks on two "hosts" — network and pid namespaces this test makes,
# joined by a veth pair, addresses only inside them — call each other with no
# timeout; then the link goes down silently (no reset reaches anyone).
# Each call must end FRPC_EPEERLOST within config.peer_timeout_ms plus a
# margin (FABRPC_PEER_TIMEOUT_MS=4000 here; the figure is printed), over
# tcp; again with 16 MiB gets and rendezvous calls under way, after which
# the shutdown crashed inside libfabric (fi_close of the endpoint). Needs root (ip netns); skipped otherwise. Cleans up its namespaces.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/byhand.sh"
need_var PEERLOST
make_tmpdir
need_on_host

NS0=frhv0_$$ NS1=frhv1_$$ V0=frv0_$$ V1=frv1_$$
cleanup_ns() {
    ip netns pids "$NS0" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns pids "$NS1" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$NS0" 2>/dev/null
    ip netns del "$NS1" 2>/dev/null
}
trap 'cleanup_ns; _cleanup_tmpdir' EXIT
ip netns add "$NS0" 2>/dev/null || skip "cannot make network namespaces (not root?)"
ip netns add "$NS1" || fail "ip netns add $NS1"
ip link add "$V0" netns "$NS0" type veth peer name "$V1" netns "$NS1" ||
    fail "cannot make a veth pair"
ip -n "$NS0" addr add 10.77.0.1/24 dev "$V0"
ip -n "$NS1" addr add 10.77.0.2/24 dev "$V1"
for ns in "$NS0" "$NS1"; do ip -n "$ns" link set lo up; done
ip -n "$NS0" link set "$V0" up
ip -n "$NS1" link set "$V1" up
# The pair carries traffic once both ends have a carrier (LOWER_UP): a
# rank started before may fail its first connection.
link_ready() {
    ip -n "$NS0" link show "$V0" | grep -q LOWER_UP &&
        ip -n "$NS1" link show "$V1" | grep -q LOWER_UP
}
link_up() { # again after a case took it down
    ip -n "$NS1" link set "$V1" up
    for _ in $(seq 100); do link_ready && return 0; sleep 0.05; done
    echo "the veth pair has no carrier after 5 s"
    return 1
}
link_up || fail "no link"

vanish() {
    local port pids=() r st
    link_up || return 1
    rm -f "$TMPD"/ready.* "$TMPD"/killtime
    export PEERLOST_DIR=$TMPD
    port=$(free_port)
    for r in 0 1; do
        local ns=$NS0 dev=$V0
        [ $r = 1 ] && ns=$NS1 dev=$V1
        on_host "$ns" env FABRPC_RANK=$r FABRPC_WORLD_SIZE=2 \
            FABRPC_STORE_ADDR=10.77.0.1:$port FABRPC_PROVIDER=tcp \
            FI_TCP_IFACE=$dev FABRPC_PEER_TIMEOUT_MS=4000 \
            FABRPC_JOB_KEY=vanish-$$ FABRPC_PROGRESS=adaptive \
            "$PEERLOST" vanish >"$TMPD/out.$r" 2>&1 &
        pids[r]=$!
    done
    local t0=$SECONDS
    until [ -e "$TMPD/ready.0" ] && [ -e "$TMPD/ready.1" ]; do
        [ $((SECONDS - t0)) -lt 60 ] || { cat "$TMPD"/out.*; return 1; }
        pid_alive "${pids[0]}" && pid_alive "${pids[1]}" ||
            { cat "$TMPD"/out.*; return 1; }
        sleep 0.1
    done
    sleep 0.2 # both calls are on their way
    python3 -c 'import time; print(time.monotonic_ns())' >"$TMPD/killtime.tmp"
    mv "$TMPD/killtime.tmp" "$TMPD/killtime"
    ip -n "$NS1" link set "$V1" down
    for r in 0 1; do
        st=0
        wait_bounded 60 "${pids[r]}" || st=$?
        sed "s/^/    rank $r: /" "$TMPD/out.$r"
        [ $st = 0 ] || fail "rank $r ended with status $st"
    done
    grep -q "ended FRPC_EPEERLOST" "$TMPD/out.0" "$TMPD/out.1" || return 1
    # Rank 0's process did not die: its host became unreachable.
    grep -q "rank 0 unreachable: the connection to the bootstrap store" \
        "$TMPD/out.1" || { echo "rank 1's message does not say unreachable"; return 1; }
}
run_case "tcp: a host that vanishes silently is lost within peer_timeout_ms" vanish
vanish_bulk() { PEERLOST_VANISH_BULK=1 vanish; }
run_case "tcp: the same with 16 MiB gets and calls in flight; shutdown after" vanish_bulk
finish_cases
