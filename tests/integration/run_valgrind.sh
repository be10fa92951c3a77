#!/bin/bash
# Valgrind's memcheck on 2-rank runs of the examples over shm and tcp: no
# invalid access, no use of uninitialised memory, no leak. Skipped where
# valgrind is missing and in sanitizer builds (the two cannot share a
# process).
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN HELLO ITEST
command -v valgrind >/dev/null || skip "valgrind is not installed"
ex_dir=$(dirname "$HELLO")
for bin in "$ex_dir/hello" "$ex_dir/.libs/hello"; do
    [ -f "$bin" ] && grep -q -a -E '__(a|t)san_init' "$bin" &&
        skip "sanitizer build"
done
make_tmpdir

# libtool's wrapper scripts run the real binaries under valgrind.
LIBTOOL=$(dirname "$ex_dir")/libtool
# LEAK_KINDS: what counts as a leak (definite,indirect unless set); PROG
# a path (else an example's name).
memcheck() {
    local prov=$1 prog=$2 out="$TMPD/vg-$1-$(basename "$2").out"
    local kinds=${LEAK_KINDS:-definite,indirect}
    shift 2
    case $prog in /*) ;; *) prog=$ex_dir/$prog ;; esac
    run_bounded 300 "$FABRPC_RUN" -n 2 --provider "$prov" --timeout 280 \
        "$LIBTOOL" --mode=execute valgrind -q --error-exitcode=99 \
        --leak-check=full --errors-for-leak-kinds="$kinds" \
        --show-leak-kinds="$kinds" "$prog" "$@" >"$out" 2>&1 ||
        { cat "$out"; return 1; }
    # valgrind reports errors on stderr prefixed with ==pid==
    if grep -E '^\[[0-9]+\] ==[0-9]+==' "$out"; then
        cat "$out"
        return 1
    fi
}
run_case "memcheck: hello over shm" memcheck shm hello
run_case "memcheck: hello over tcp" memcheck tcp hello
run_case "memcheck: add over shm" memcheck shm add
run_case "memcheck: add over tcp" memcheck tcp add
# Args between the inject size and zerocopy_min go through cached send
# and receive blocks (itest take: 1 B to 1 MiB): their registrations were
# closed after the domain, which then stayed open (fi_fabric's and
# fi_domain's memory "possibly lost" at exit: 16 and 27 records).
LEAK_KINDS=definite,indirect,possible run_case \
    "memcheck: args of every size over shm, nothing possibly lost" \
    memcheck shm "$ITEST" take
LEAK_KINDS=definite,indirect,possible run_case \
    "memcheck: args of every size over tcp, nothing possibly lost" \
    memcheck tcp "$ITEST" take
finish_cases
