#!/bin/bash
# The README's demo: 4 ranks say hello to each other, over shm and tcp.
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN HELLO top_srcdir
make_tmpdir

hello() {
    local prov=$1 out="$TMPD/hello-$1.out"
    run_bounded 120 "$FABRPC_RUN" -n 4 --provider "$prov" --timeout 100 \
        "$HELLO" >"$out" 2>&1 || { cat "$out"; return 1; }
    expect_grep "over provider $prov" "$out"
    local a b
    for a in 0 1 2 3; do
        for b in 0 1 2 3; do
            [ $a = $b ] && continue
            expect_grep "^\[$a\] rank $a called rank $b: hello from rank $b to rank $a\$" "$out"
        done
        # Per-function figures: 3 calls made and 3 answered by each rank.
        expect_grep "^\[$a\] rank $a: 'hello' called 3 times \(p50 [0-9.]+ us, max [0-9.]+ us\), answered 3\$" "$out"
    done
}
add_example() {
    local out="$TMPD/add.out"
    run_bounded 120 "$FABRPC_RUN" -n 2 --provider "$1" --timeout 100 \
        "$(dirname "$HELLO")/add" >"$out" 2>&1 || { cat "$out"; return 1; }
    expect_grep '^\[0\] 40 \+ 2 = 42$' "$out"
    expect_grep '^\[0\] add of 1 numbers: FRPC_EREMOTE: add wants \[a, b\] of integers$' "$out"
}
readme_matches_example() {
    awk '/^```c$/{f=1;next} /^```$/{if(f){exit}} f' "$top_srcdir/README.md" |
        diff -u - "$top_srcdir/examples/add.c"
}
alone() {
    # No rank anywhere: rank 0 of 1, and frpc_init says so on stderr.
    local out="$TMPD/alone.out" err="$TMPD/alone.err"
    env -u FABRPC_RANK -u FABRPC_WORLD_SIZE -u RANK -u WORLD_SIZE \
        -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMI_RANK \
        -u PMI_SIZE -u SLURM_PROCID -u SLURM_NTASKS \
        timeout 60 "$HELLO" >"$out" 2>"$err" || { cat "$out" "$err"; return 1; }
    expect_grep "^1 ranks over provider" "$out"
    expect_grep "^fabrpc: no rank set .*running as rank 0 of 1$" "$err"
}
run_case "hello alone, no launcher: rank 0 of 1, said on stderr" alone
run_case "hello, 4 ranks, shm" hello shm
run_case "hello, 4 ranks, tcp" hello tcp
run_case "README example runs (shm)" add_example shm
run_case "README example runs (tcp)" add_example tcp
run_case "README example is examples/add.c" readme_matches_example
finish_cases
