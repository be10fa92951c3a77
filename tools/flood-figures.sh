#!/bin/bash
# How a flood of connections to the bootstrap store delays a job's start:
# runs examples/hello (3 ranks over tcp, fabrpc-run) N times per open-files
# limit, alone and while 3 processes (fabrpc-store-flood) open connections
# to the store's port as fast as they can, sending nothing. Prints, per
# case, the job's wall time (median and range, ms) and how many runs
# failed. Not a test (no thresholds): run it on an idle machine.
#
#   tools/flood-figures.sh BUILD_DIR [N] [LIMITS]
#   e.g. tools/flood-figures.sh _build 5 "128 1024"
set -u
usage() {
    echo "usage: $0 BUILD_DIR [N] [LIMITS]  (BUILD_DIR: a built tree)" >&2
    exit 2
}
[ $# -ge 1 ] && [ -x "$1/tools/fabrpc-run" ] || usage
B=$(cd "$1" && pwd)
N=${2:-5}
LIMITS=${3:-128 1024}
FLOOD=${FLOOD:-$B/tools/fabrpc-store-flood} # may be another build's
[ -x "$FLOOD" ] || make -C "$B/tools" fabrpc-store-flood >/dev/null
export FI_TCP_IFACE=lo
floods=()
trap 'kill "${floods[@]}" 2>/dev/null' EXIT

# One job: its wall time in ms, or "fail".
one_job() { # LIMIT FLOODERS
    local port t0 t1 rc
    port=$("$FLOOD" port) || return 1
    floods=()
    for _ in $(seq "$2"); do
        "$FLOOD" "$port" 100 2>/dev/null &
        floods+=($!)
    done
    [ "$2" -gt 0 ] && sleep 0.5 # the flood is under way first
    t0=$(date +%s%N)
    (ulimit -n "$1" && timeout 90 "$B/tools/fabrpc-run" -n 3 \
        --provider tcp --port "$port" --timeout 80 "$B/examples/hello" \
        >/dev/null 2>&1)
    rc=$?
    t1=$(date +%s%N)
    [ ${#floods[@]} -gt 0 ] && kill "${floods[@]}" 2>/dev/null
    wait 2>/dev/null
    if [ $rc -eq 0 ]; then echo $(((t1 - t0) / 1000000)); else echo fail; fi
}

summary() { # LABEL TIMES...
    local label=$1
    shift
    local ok fails
    ok=$(printf '%s\n' "$@" | grep -v fail | sort -n)
    fails=$(printf '%s\n' "$@" | grep -c fail)
    if [ -n "$ok" ]; then
        local n med
        n=$(echo "$ok" | wc -l)
        med=$(echo "$ok" | sed -n "$(((n + 1) / 2))p")
        printf '%-28s median %6s ms  range %s-%s ms  failed %d of %d\n' \
            "$label" "$med" "$(echo "$ok" | head -1)" \
            "$(echo "$ok" | tail -1)" "$fails" $#
    else
        printf '%-28s failed %d of %d\n' "$label" "$fails" $#
    fi
}

for lim in $LIMITS; do
    for flooders in 0 3; do
        times=()
        for _ in $(seq "$N"); do times+=("$(one_job "$lim" "$flooders")"); done
        summary "ulimit -n $lim, $flooders flooders" "${times[@]}"
    done
done
