#!/bin/bash
# Issue 15 part 2: is each bimodal figure fabrpc's or the machine's?
# fabrpc-bench gives each fabrpc row and each fi_pingpong row the
# machine's state just before and after it (core_ns_before/_after: a
# cache line's round trip between the two CPUs, tools/core_rtt.c); each
# invocation repeats its row several times, so one process sees the
# state change. summarize.py groups the rows by that state.
# usage: run.sh BUILD_DIR OUT_DIR ROUNDS   (BUILD_DIR: a built tree)
set -u
B=$1 OUT=$2 N=$3
mkdir -p "$OUT"
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
bench="$B/tools/fabrpc-bench"
for r in $(seq 1 "$N"); do
    {
        "$bench" latency --provider shm --sizes 8,8,8,8,8,8 --iters 20000 --baseline --json
        "$bench" rate --provider tcp --inflight 64,64,64 --json
        "$bench" bandwidth --provider shm --sizes 1m,1m,1m --inflight 1 --lend off --json
        "$bench" bandwidth --provider shm --sizes 1m,1m,1m --inflight 1 --json
        "$bench" rma --provider shm --sizes 1m,1m,1m --inflight 1 --json
    } > "$OUT/round-$r.jsonl" 2>/dev/null
    echo "round $r done $(date +%T)"
done
