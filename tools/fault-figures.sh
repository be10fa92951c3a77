#!/bin/bash
# The figures of issue 12's faults: runs each fault of the peerlost test
# binary N times per provider and prints, per fault, the median and the
# range of what it measured. Not a test (no thresholds): run it on an idle
# machine.
#
#   tools/fault-figures.sh BUILD_DIR [N] [PROVIDERS]
#   e.g. tools/fault-figures.sh _build 10 "shm tcp"
#
# Figures, in ms:
#   kill        a rank holding 300 calls (60 s timeout or none) is killed:
#               when the last of them ended FRPC_EPEERLOST (max over the 3
#               survivors), and how long their graceful shutdown took
#   handler     a rank dies in a handler a nested call waits on: when the
#               relayed FRPC_EPEERLOST came back
#   rndv        a rank dies during 64 MiB calls: when the call ended
#   store       rank 0 (the store) dies: when a call to it ended
#   storm       a rank dies flooded from 3 threads per rank: when the last
#               thread's call ended
#   late        shutdown(GRACEFUL, 1000) with a peer 4 s late
#   reinit      init + shutdown, average of 20 rounds in one process
#   mismatch    two ranks with different world sizes: frpc_init's failure
set -u
usage() {
    echo "usage: $0 BUILD_DIR [N] [PROVIDERS]  (BUILD_DIR: a built tree," \
         "with tools/fabrpc-run)" >&2
    exit 2
}
[ $# -ge 1 ] && [ -x "$1/tools/fabrpc-run" ] || usage
B=$1
N=${2:-10}
PROVS=${3:-shm tcp}
B=$(cd "$B" && pwd)
RUN=$B/tools/fabrpc-run
PL=$B/tests/integration/peerlost
[ -x "$PL" ] || make -C "$B/tests" integration/peerlost >/dev/null
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FABRPC_PROGRESS=adaptive
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export PEERLOST_DIR=$T

# med FILE: "median (min..max, n)" of the numbers in FILE, one a line.
med() {
    sort -g "$1" | awk '{v[NR]=$1} END {
        if (!NR) { print "-"; exit }
        m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2
        printf "%.1f (%.1f..%.1f, n=%d)", m, v[1], v[NR], NR }'
}

# job RANKS MODE: one run of MODE; its output in $T/out.
job() {
    rm -f "$T/killtime"
    timeout 120 "$RUN" -n "$1" --keep-going --timeout 100 "$PL" "$2" \
        >"$T/out" 2>&1
}

# pick REGEX FIELD-SED: the largest number the sed expression extracts.
pick() {
    sed -n "$1" "$T/out" | sort -g | tail -1
}

for P in $PROVS; do
    export FABRPC_PROVIDER=$P
    rm -f "$T"/*.v
    for _ in $(seq "$N"); do
        job 4 kill
        pick 's/.*detection: .* \.\. \([0-9.]*\) ms after the kill/\1/p' >>"$T/kill.v"
        pick 's/.*shutdown(GRACEFUL, 10000): FRPC_EPEERLOST in \([0-9.]*\) ms/\1/p' >>"$T/kshut.v"
        job 3 die-in-handler
        pick 's/.*relayed in [0-9.]* ms (\([0-9.]*\) ms after the kill.*/\1/p' >>"$T/handler.v"
        job 2 rndv-death
        pick 's/.*then FRPC_EPEERLOST \([0-9.]*\) ms after the kill.*/\1/p' >>"$T/rndv.v"
        job 4 store-death
        pick 's/.*then FRPC_EPEERLOST \([0-9.]*\) ms after the kill.*/\1/p' >>"$T/store.v"
        job 3 storm
        pick 's/.*FRPC_EPEERLOST \([0-9.]*\) ms after the kill.*/\1/p' >>"$T/storm.v"
        job 2 late-shutdown
        pick 's/.*ended FRPC_ETIMEDOUT in \([0-9.]*\) ms.*/\1/p' >>"$T/late.v"
        job 2 reinit
        sed -n 's/.*init \([0-9.]*\) ms, shutdown \([0-9.]*\) ms on average.*/\1 \2/p' \
            "$T/out" | head -1 | awk '{print $1 + $2}' >>"$T/reinit.v"
        port=$((20000 + RANDOM % 10000))
        for r in 0 1; do
            FABRPC_RANK=$r FABRPC_WORLD_SIZE=$((2 + r)) \
                FABRPC_STORE_ADDR=127.0.0.1:$port FABRPC_INIT_TIMEOUT_MS=20000 \
                timeout 30 "$PL" init-only >"$T/mm.$r" 2>&1 &
        done
        wait
        sed -n 's/^init: rc=[A-Z_]* ms=\([0-9]*\) .*/\1/p' "$T/mm.0" "$T/mm.1" |
            sort -g | tail -1 >>"$T/mismatch.v"
    done
    echo "provider $P, $N runs each: median (min..max) in ms"
    printf '  %-9s %s\n' \
        kill "$(med "$T/kill.v")" \
        kill-shut "$(med "$T/kshut.v")" \
        handler "$(med "$T/handler.v")" \
        rndv "$(med "$T/rndv.v")" \
        store "$(med "$T/store.v")" \
        storm "$(med "$T/storm.v")" \
        late "$(med "$T/late.v")" \
        reinit "$(med "$T/reinit.v")" \
        mismatch "$(med "$T/mismatch.v")"
done
