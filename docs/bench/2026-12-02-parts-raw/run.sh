#!/bin/bash
# What sending a frame as two injects costs shm itself, against what it
# costs a fabrpc call: per round, raw libfabric ping-pongs of one 4000-byte
# inject a way and of 4096 bytes as two injects (4096 + 96, as fabrpc's
# parts of a 4096-byte call), then fabrpc-bench's 4000 and 4096-byte calls.
# usage: run.sh BUILD_DIR ROUNDS   (BUILD_DIR: a configured fabrpc build)
set -eu
B=$1; R=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
cc -O2 "$here/raw_parts_pingpong.c" -o /tmp/raw_parts_pingpong -lfabric
for r in $(seq 1 "$R"); do
    echo "round $r"
    /tmp/raw_parts_pingpong 4000 0 30000
    /tmp/raw_parts_pingpong 4096 1 30000
    "$B/tools/fabrpc-bench" latency --provider shm --sizes 4000,4096 \
        --iters 30000 --json | python3 -c '
import sys, json
for l in sys.stdin:
    j = json.loads(l)
    print("fabrpc S=%d p50 %.2f us" % (j["size"], j["p50_us"]))'
done
