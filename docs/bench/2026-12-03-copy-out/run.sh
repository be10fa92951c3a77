#!/bin/bash
# Interleaved rounds of two builds of libfabrpc over shm: sync calls of
# 64 KiB and 1 MiB (args lent, replies copied into a block), and async
# calls of 1 MiB and 16 MiB whose args are copied (--lend off); each row
# carries the machine's state around it (core_ns_before/_after), and
# summarize.py groups the rows by build and state.
# usage: run.sh OLD_LIBDIR NEW_LIBDIR OUTDIR ROUNDS [BUILD_DIR]
#   a LIBDIR holds a copy of BUILD_DIR/rpc/.libs/libfabrpc.so*
set -u
old=$1 new=$2 out=$3 n=$4 b=${5:-_b}
b=$(cd "$b" && pwd); mkdir -p "$out"
run=$b/tools/.libs/fabrpc-run; [ -x "$run" ] || run=$b/tools/fabrpc-run
bench=$b/tools/.libs/fabrpc-bench
for r in $(seq 1 "$n"); do
  for v in old new; do
    lib=$old; [ $v = new ] && lib=$new
    {
      LD_LIBRARY_PATH=$lib timeout 300 "$run" -n 2 --no-prefix "$bench" \
        latency --provider shm --sizes 64k,64k,64k,64k,1m,1m --iters 5000 --json
      LD_LIBRARY_PATH=$lib timeout 300 "$run" -n 2 --no-prefix "$bench" \
        bandwidth --provider shm --sizes 1m,1m,16m --inflight 1 --lend off --json
    } > "$out/$v.$r.jsonl" 2>/dev/null
  done
  echo "round $r done $(date +%T)"
done
