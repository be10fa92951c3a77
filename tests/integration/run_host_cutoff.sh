#!/bin/bash
# A host cut off from rank 0's, then back: three ranks on three "hosts" —
# network and pid namespaces this test makes, joined by a bridge in a fourth,
# addresses only inside them — over tcp. Rank 2's port on the bridge goes
# down silently: ranks 0 and 1 mark rank 2 lost (the store's keepalive),
# rank 2 marks rank 0 lost but cannot learn of rank 1. The port comes
# back; rank 2's call to rank 1 with no timeout must then end
# FRPC_EPEERLOST (rank 1 says it drops what rank 2 sends), where it
# waited until rank 1's process ended. Again with rank 1's
# peer_timeout_ms at 120 s: rank 0's 4 s must decide its verdict on rank 2
# (fabrpc.h). And an outage of 2 s with 6 s is ridden out: nobody is
# lost. Needs root (ip netns); skipped
# otherwise. Cleans up its namespaces.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/byhand.sh"
need_var PEERLOST
make_tmpdir
need_on_host

SW=frcoS_$$ NS=(frco0_$$ frco1_$$ frco2_$$)
cleanup_ns() {
    local ns
    for ns in "${NS[@]}" "$SW"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
}
trap 'cleanup_ns; _cleanup_tmpdir' EXIT
ip netns add "$SW" 2>/dev/null || skip "cannot make network namespaces (not root?)"
ip -n "$SW" link add br0 type bridge || skip "no bridge support"
ip -n "$SW" link set br0 up
for r in 0 1 2; do
    ip netns add "${NS[r]}" || fail "ip netns add"
    ip -n "${NS[r]}" link set lo up
    ip link add "frcv$r" netns "${NS[r]}" type veth peer name "frcb$r" \
        netns "$SW" || fail "cannot make a veth pair"
    ip -n "${NS[r]}" addr add "10.78.0.$((r + 1))/24" dev "frcv$r"
    ip -n "${NS[r]}" link set "frcv$r" up
    ip -n "$SW" link set "frcb$r" master br0
    ip -n "$SW" link set "frcb$r" up
done
carrier() {
    local r
    for r in 0 1 2; do
        ip -n "${NS[r]}" link show "frcv$r" | grep -q LOWER_UP || return 1
    done
}
for _ in $(seq 100); do carrier && break; sleep 0.05; done
carrier || fail "the veth pairs have no carrier after 5 s"

PIDS=()
# start_ranks MODE T0 T1 T2: the three ranks of peerlost MODE, each with
# its FABRPC_PEER_TIMEOUT_MS; returns once all are ready, the cut's time
# written for them.
start_ranks() {
    local mode=$1 port r pt=("$2" "$3" "$4")
    # After an earlier case's cut, the hosts' neighbour caches may still
    # hold the failed lookups ("No route to host" for a few seconds).
    for r in 0 1 2; do ip -n "${NS[r]}" neigh flush all 2>/dev/null; done
    rm -f "$TMPD"/ready.* "$TMPD"/killtime "$TMPD"/healed "$TMPD"/done
    export PEERLOST_DIR=$TMPD
    port=$(free_port)
    for r in 0 1 2; do
        on_host "${NS[r]}" env FABRPC_RANK=$r FABRPC_WORLD_SIZE=3 \
            FABRPC_STORE_ADDR=10.78.0.1:$port FABRPC_PROVIDER=tcp \
            FI_TCP_IFACE=frcv$r FABRPC_PEER_TIMEOUT_MS=${pt[r]} \
            FABRPC_JOB_KEY=cutoff-$$ FABRPC_PROGRESS=adaptive \
            "$PEERLOST" "$mode" >"$TMPD/out.$r" 2>&1 &
        PIDS[r]=$!
    done
    local t0=$SECONDS
    until [ -e "$TMPD/ready.0" ] && [ -e "$TMPD/ready.1" ] &&
        [ -e "$TMPD/ready.2" ]; do
        [ $((SECONDS - t0)) -lt 60 ] || { cat "$TMPD"/out.*; return 1; }
        for r in 0 1 2; do
            pid_alive "${PIDS[r]}" || { cat "$TMPD"/out.*; return 1; }
        done
        sleep 0.1
    done
    # CLOCK_MONOTONIC, as the ranks read it (kill_time_ms)
    python3 -c 'import time; print(time.monotonic_ns())' >"$TMPD/killtime.tmp"
    mv "$TMPD/killtime.tmp" "$TMPD/killtime"
}

# cut_rank2 DOWN_S AFTER_S: rank 2's port on the bridge down for DOWN_S
# seconds (silently: no end sees its link go down), then "healed" AFTER_S
# seconds after it is back; 0 once every rank ended well.
cut_rank2() {
    local r st bad=0
    ip -n "$SW" link set frcb2 down
    sleep "$1"
    ip -n "$SW" link set frcb2 up
    sleep "$2"
    touch "$TMPD/healed"
    for r in 0 1 2; do
        st=0
        wait_bounded 90 "${PIDS[r]}" || st=$?
        sed "s/^/    rank $r: /" "$TMPD/out.$r"
        [ $st = 0 ] || { echo "rank $r ended with status $st"; bad=1; }
    done
    return $bad
}

# cutoff [T0 T1 T2]: each rank's FABRPC_PEER_TIMEOUT_MS (4000 each).
cutoff() {
    start_ranks cutoff "${1:-4000}" "${2:-4000}" "${3:-4000}" || return 1
    # Both sides have had their verdicts once rank 2 sees rank 0 lost
    # (peer_timeout_ms 4 s, plus a margin).
    cut_rank2 9 1 &&
        grep -q "cutoff: the call to rank 1 .*FRPC_EPEERLOST" "$TMPD/out.2"
}
run_case "tcp: a rank cut off from rank 0's host, then back: its calls to the others end" cutoff
# fabrpc.h, peer_timeout_ms: the verdict on any rank but 0 is rank 0's,
# with rank 0's value. Rank 1's own 120 s must not delay its verdict on
# rank 2 (peerlost's cutoff mode allows 20 s; the figure is printed).
unequal() { cutoff 4000 120000 4000; }
run_case "tcp: peer timeouts differ (rank 1: 120 s): rank 1 finds the cut-off rank lost by rank 0's 4 s" unequal
# fabrpc.h, peer_timeout_ms: an outage shorter than peer_timeout_ms - 3 s
# is ridden out. 2 s with 6 s; the verdict is looked at 6 s after the cut.
blip() {
    start_ranks blip 6000 6000 6000 || return 1
    cut_rank2 2 4
}
run_case "tcp: a 2 s outage of a host (peer_timeout_ms 6 s) is ridden out: nobody lost" blip
finish_cases
