#!/bin/bash
# Time-stamps the path of a synchronous 8 B call on shm at fixed points on
# both ranks (rdtsc into a buffer per process, written at exit), then
# prints the median time between consecutive points over 100,000 calls.
# Not part of the build: it patches a throwaway worktree.
#   usage: docs/bench/2026-11-25-anatomy/run.sh   (from the repository root)
# The patch applies to c159e40 (it may need refreshing on later trees).
set -e
here=$(cd "$(dirname "$0")" && pwd)
work=/tmp/trace
mkdir -p $work
cp "$here"/frtrace.h "$here"/frtrace.c $work/
gcc -O2 -fPIC -shared -o $work/libfrtrace.so $work/frtrace.c
gcc -O2 -o $work/tscfreq "$here"/tscfreq.c
rm -rf $work/src
git worktree add --force $work/src HEAD >/dev/null
(cd $work/src && git apply "$here"/call-path-trace.patch && ./autogen.sh >/dev/null 2>&1 &&
 mkdir -p _b && cd _b &&
 ../configure CFLAGS="-O2 -g -include $work/frtrace.h" \
   LDFLAGS="-L$work -Wl,-rpath,$work" LIBS="-lfrtrace" >/dev/null &&
 make -j2 >/dev/null)
rm -f $work/out.*
FI_TCP_IFACE=lo FR_TRACE=1 timeout 120 $work/src/_b/tools/fabrpc-bench latency \
  --provider shm --sizes 8 --iters 100000 | grep '^fabrpc'
python3 "$here"/analyze.py "$($work/tscfreq)"
git worktree remove --force $work/src
