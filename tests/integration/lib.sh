#!/bin/bash
# Shared helpers for the integration tests; source it, do not run it.
#
#   need_var NAME...        each variable must be set and non-empty (make
#                           check sets FABRPC_RUN, ITEST, HELLO), else fail
#   run_bounded SECS CMD... run CMD, killed after SECS (KILL 5 s later);
#                           returns its status (124: it timed out)
#   fail MSG...             print "FAIL: MSG" to stderr and exit 1
#   skip REASON...          print "SKIP: REASON" and exit 77 (automake skip)
#   expect_grep PAT FILE    fail unless FILE has a line matching PAT (ERE)
#   pid_alive PID           true while PID is a live process (not a zombie)
#   make_tmpdir             set TMPD to a new directory, removed at exit;
#                           the pids in any TMPD/*.pid file are killed then
#   run_case NAME FUNC ARGS...  run FUNC ARGS in a subshell (so fail ends only that
#                           case), print "PASS: NAME (S s)" or "FAIL: NAME (S s)"
#                           (FABRPC_CASES=REGEX, by hand: only the matching cases)
#   finish_cases            print each failed case's last lines again, then
#                           "N passed, M failed"; exit 1 if M > 0
#   once_more_on PROVS CMD...  run CMD; if it fails and $PROV is one of the
#                           space-separated PROVS, say so and run it once
#                           more (for a provider's own known stall: the
#                           calling script says which, with the evidence)
#
# Scripts run under bash with set -u. Exit 77 is automake's "skipped".

set -u

# Single host: keep libfabric's tcp provider on loopback.
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

skip() {
    echo "SKIP: $*"
    exit 77
}

need_var() {
    local name
    for name in "$@"; do
        [ -n "${!name:-}" ] ||
            fail "$name is not set (make check sets it; export it to run by hand)"
    done
}

run_bounded() {
    local secs=$1
    shift
    timeout -k 5 "$secs" "$@"
}

expect_grep() {
    local pat=$1 file=$2
    if ! grep -Eq -e "$pat" "$file"; then
        echo "--- $file:" >&2
        head -c 4000 "$file" >&2
        fail "expected /$pat/ in $file"
    fi
}

pid_alive() {
    local st
    [ -r "/proc/$1/stat" ] || return 1
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
    [ -n "$st" ] && [ "$st" != Z ]
}

make_tmpdir() {
    TMPD=$(mktemp -d "${TMPDIR:-/tmp}/fabrpc-itest.XXXXXX") ||
        fail "mktemp -d failed"
    trap _cleanup_tmpdir EXIT
}

_cleanup_tmpdir() {
    local f pid
    for f in "$TMPD"/*.pid; do
        [ -f "$f" ] || continue
        for pid in $(cat "$f"); do
            kill -KILL "$pid" 2>/dev/null
        done
    done
    rm -rf "$TMPD"
}

CASES_PASSED=0
CASES_FAILED=0
CASES_RECAP=""
RECAP_LINES=20

run_case() {
    local name=$1 fn=$2 t0 out verdict=PASS
    shift 2
    # FABRPC_CASES=REGEX (by hand): only the cases whose name matches.
    if [ -n "${FABRPC_CASES:-}" ] && ! grep -qE -- "$FABRPC_CASES" <<<"$name"; then
        return 0
    fi
    t0=$(date +%s%N)
    # The case's output goes to a file, then to the log: a failed case's
    # last lines are told again by finish_cases, so a log cut short in the
    # middle (CI shows its head and tail) still says what failed and why.
    # A file, not a pipe: a process a case leaves behind would hold a pipe
    # open and stall the script.
    out=$(mktemp "${TMPDIR:-/tmp}/fabrpc-case.XXXXXX") || fail "mktemp failed"
    ( "$fn" "$@" ) > "$out" 2>&1 || verdict=FAIL
    cat "$out"
    echo "$verdict: $name ($(case_seconds "$t0") s)"
    if [ $verdict = PASS ]; then
        CASES_PASSED=$((CASES_PASSED + 1))
    else
        CASES_FAILED=$((CASES_FAILED + 1))
        CASES_RECAP+="FAIL: $name, its last $RECAP_LINES lines:"$'\n'
        CASES_RECAP+=$(tail -n "$RECAP_LINES" "$out")$'\n'
    fi
    rm -f "$out"
}

# case_seconds T0: seconds since T0 (date +%s%N), one decimal: every case
# says what it cost, so the suite's time can be read from its logs.
case_seconds() {
    local ms=$((($(date +%s%N) - $1) / 1000000))
    echo "$((ms / 1000)).$((ms % 1000 / 100))"
}

once_more_on() {
    local provs=" $1 "
    shift
    "$@" && return 0
    case "$provs" in *" ${PROV:-} "*) ;; *) return 1 ;; esac
    echo "note: $PROV: failed once (output above); running it again"
    "$@"
}

finish_cases() {
    if [ "$CASES_FAILED" -gt 0 ]; then
        echo "---- the failed cases again ----"
        printf '%s' "$CASES_RECAP"
        echo "--------------------------------"
    fi
    echo "$CASES_PASSED passed, $CASES_FAILED failed"
    [ "$CASES_FAILED" -eq 0 ]
    exit $?
}
