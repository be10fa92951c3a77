#!/bin/bash
# Time-stamps the path of a synchronous 64 KiB call on shm (args lent,
# reply copied by frpc_respond and pulled by the caller) at fixed points
# on both ranks, and prints the median time between consecutive points,
# ROUNDS times with the reply's copy done as usual and with it skipped
# (EXP_SKIP_COPY: the reply's bytes are then garbage; timing only).
# Not part of the build: it patches a throwaway worktree of HEAD.
#   usage: docs/bench/2026-12-01-64k-anatomy/run.sh [ROUNDS]
# The patch applies to d0dbd14 (it may need refreshing on later trees).
set -e
rounds=${1:-3}
here=$(cd "$(dirname "$0")" && pwd)
old="$here/../2026-11-25-anatomy"
work=/tmp/trace
mkdir -p $work
cp "$old"/frtrace.h "$old"/frtrace.c $work/
gcc -O2 -fPIC -shared -o $work/libfrtrace.so $work/frtrace.c
gcc -O2 -o $work/tscfreq "$old"/tscfreq.c
ghz=$($work/tscfreq)
rm -rf $work/src
git worktree add --force $work/src HEAD >/dev/null
(cd $work/src && git apply "$here"/trace.patch && ./autogen.sh >/dev/null 2>&1 &&
 mkdir -p _b && cd _b &&
 ../configure CFLAGS="-O2 -g -include $work/frtrace.h" \
   LDFLAGS="-L$work -Wl,-rpath,$work" LIBS="-lfrtrace" >/dev/null &&
 make -j2 >/dev/null)
for r in $(seq "$rounds"); do
  for mode in copy skip; do
    rm -f $work/out.*
    if [ $mode = skip ]; then export EXP_SKIP_COPY=1; else unset EXP_SKIP_COPY; fi
    echo "== round $r, reply $mode"
    FR_TRACE=1 timeout 120 $work/src/_b/tools/fabrpc-bench latency \
      --provider shm --sizes 64k --iters 20000 --progress busy | grep '^fabrpc'
    python3 "$here"/analyze.py "$ghz"
  done
done
unset EXP_SKIP_COPY
git worktree remove --force $work/src
