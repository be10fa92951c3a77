#!/bin/bash
# Frames held for coalescing toward a stopped rank, over shm: nobody
# else's wait outlasts its timeout (see heldbatch.c). Each trial about
# 3 s; 3 trials. shm only: there one receive queue serves every sender,
# so a third rank can fill it; over tcp each connection has its own.
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN HELDBATCH
make_tmpdir
export FABRPC_PROGRESS=adaptive

trial() {
    local dir=$TMPD/trial-$1 out=$TMPD/out-$1 st=0 r
    mkdir -p "$dir"
    HELDBATCH_DIR=$dir run_bounded 90 "$FABRPC_RUN" -n 3 --provider shm \
        --timeout 80 "$HELDBATCH" >"$out" 2>&1 || st=$?
    grep -E 'rank 0: |FAIL' "$out" | sed 's/^/    /'
    for r in 0 1 2; do
        grep -Eq "^\[$r\] ok: rank $r\$" "$out" || {
            head -c 4000 "$out" >&2
            fail "rank $r did not pass (fabrpc-run status $st)"
        }
    done
}

for t in 1 2 3; do
    run_case "shm, trial $t: held calls to a stopped rank; a 1000 ms call, notify, call to itself, future wait and batch_end each end within 3 s; the held calls end 0 once it resumes" \
        trial "$t"
done
finish_cases
