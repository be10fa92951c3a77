#!/bin/bash
# Tests of fabrpc-run itself, with small shell scripts as the ranks:
# environment, output prefixes, exit statuses, signals, timeouts, cleanup.
# Uses FABRPC_RUN (make check sets it), else ../../tools/fabrpc-run.
# shellcheck disable=SC2016  # rank scripts in '' expand in the rank
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

: "${FABRPC_RUN:=$here/../../tools/fabrpc-run}"
[ -x "$FABRPC_RUN" ] || fail "fabrpc-run not found at $FABRPC_RUN (build it)"
make_tmpdir

# prog NAME <<'EOF' ... EOF: writes an executable sh script $TMPD/NAME.
prog() {
    { echo '#!/bin/sh'; cat; } >"$TMPD/$1"
    chmod +x "$TMPD/$1"
}

# frun SECS ARGS...: fabrpc-run bounded by SECS, output in $TMPD/out, err.
frun() {
    local secs=$1
    shift
    run_bounded "$secs" "$FABRPC_RUN" "$@" >"$TMPD/out" 2>"$TMPD/err"
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# expect_status GOT WANT: fail (showing stderr) unless equal.
expect_status() {
    [ "$1" -eq "$2" ] && return 0
    head -c 2000 "$TMPD/err" >&2
    fail "exit status $1, expected $2"
}

# expect_gone FILE...: every pid in the files is gone within 2 s.
expect_gone() {
    local f pid
    for f in "$@"; do
        [ -s "$f" ] || fail "no pid in $f"
        pid=$(cat "$f")
        for _ in $(seq 20); do
            pid_alive "$pid" || continue 2
            sleep 0.1
        done
        fail "process $pid (from $f) is still running"
    done
}

# wait_files N GLOB: wait up to 10 s until N files match GLOB.
wait_files() {
    local n=$1 glob=$2 have=0
    for _ in $(seq 100); do
        have=$(compgen -G "$glob" | wc -l)
        [ "$have" -ge "$n" ] && return 0
        sleep 0.1
    done
    fail "only $have of $n files $glob appeared"
}

prog env.sh <<'EOF'
echo "rank=$FABRPC_RANK local=$FABRPC_LOCAL_RANK size=$FABRPC_WORLD_SIZE store=$FABRPC_STORE_ADDR job=$FABRPC_JOB_ID iface=$FI_TCP_IFACE sockets_iface=$FI_SOCKETS_IFACE prov=${FABRPC_PROVIDER:-none}"
echo "err from $FABRPC_RANK" >&2
EOF

t_prefix_and_env() {
    # Unset here: fabrpc-run sets both to lo.
    (unset FI_TCP_IFACE FI_SOCKETS_IFACE; frun 30 -n 4 "$TMPD/env.sh")
    expect_status $? 0
    local i
    for i in 0 1 2 3; do
        expect_grep "^\[$i\] rank=$i local=$i size=4 store=127\.0\.0\.1:[0-9]+ job=[^ ]+ iface=lo sockets_iface=lo prov=none\$" "$TMPD/out"
        expect_grep "^\[$i\] err from $i\$" "$TMPD/err"
    done
    [ "$(wc -l <"$TMPD/out")" -eq 4 ] || fail "expected 4 stdout lines"
    grep -q "err from" "$TMPD/out" && fail "stderr lines reached stdout"
    [ "$(grep -o 'store=[^ ]*' "$TMPD/out" | sort -u | wc -l)" -eq 1 ] ||
        fail "ranks got different store addresses"
    [ "$(grep -o 'job=[^ ]*' "$TMPD/out" | sort -u | wc -l)" -eq 1 ] ||
        fail "ranks got different job ids"
    # Below the kernel's ephemeral range, where no outgoing connection can
    # take it before rank 0 listens (tools/fabrpc-run.c, pick_port).
    local port lo
    port=$(grep -o 'store=127\.0\.0\.1:[0-9]*' "$TMPD/out" | head -1 | sed 's/.*://')
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)
    if [ "$lo" -gt 21000 ]; then
        [ "$port" -ge 20000 ] && [ "$port" -lt "$lo" ] ||
            fail "store port $port: not in 20000..$((lo - 1))"
    fi
}

t_provider_port_iface() {
    FI_TCP_IFACE=eth9 frun 30 -n 2 --provider tcp --port 41234 "$TMPD/env.sh"
    expect_status $? 0
    expect_grep '^\[1\] rank=1 .* store=127\.0\.0\.1:41234 .* iface=eth9 sockets_iface=lo prov=tcp$' "$TMPD/out"
}

# The store's port is kept from other port pickers while the job runs
# (another job's store took it between fabrpc-run's check and rank 0's
# listen once), yet the store, which sets SO_REUSEADDR, listens there.
t_port_held_for_the_store() {
    prog held.sh <<'EOF'
exec python3 - <<'PY'
import os, socket
p = int(os.environ["FABRPC_STORE_ADDR"].rsplit(":", 1)[1])
s = socket.socket()
try:
    s.bind(("127.0.0.1", p))
    print("plain bind: taken by another")
except OSError:
    print("plain bind: refused")
r = socket.socket()
r.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
r.bind(("127.0.0.1", p))
r.listen(1)
print("store listen: ok")
PY
EOF
    frun 30 -n 1 --no-prefix "$TMPD/held.sh"
    expect_status $? 0
    expect_grep '^plain bind: refused$' "$TMPD/out"
    expect_grep '^store listen: ok$' "$TMPD/out"
}

t_all_zero_exit_0() {
    frun 30 -n 3 true
    expect_status $? 0
    [ -s "$TMPD/err" ] && fail "unexpected stderr: $(cat "$TMPD/err")"
    return 0
}

t_failing_rank_stops_others() {
    # Ranks 0 and 1 wait for a background sleep; rank 3 runs it in the
    # foreground, where only a signal to its process group ends it at once.
    prog fail3.sh <<EOF
echo \$\$ >"$TMPD/rank.\$FABRPC_RANK.pid"
case \$FABRPC_RANK in
2) sleep 0.5; exit 3 ;;
3) trap 'exit 0' TERM; sleep 60 ;;
*) sleep 60 & echo \$! >"$TMPD/child.\$FABRPC_RANK.pid"; wait ;;
esac
EOF
    local t0 rc
    t0=$(now_ms)
    frun 30 -n 4 "$TMPD/fail3.sh"
    rc=$?
    [ "$rc" -ne 0 ] || fail "exit status 0 after a rank failed"
    expect_status "$rc" 3
    expect_grep '^fabrpc-run: rank 2 exited with status 3$' "$TMPD/err"
    grep -q SIGKILL "$TMPD/err" && fail "SIGTERM was not enough: $(cat "$TMPD/err")"
    # SIGTERM, not the SIGKILL after its 3 s grace, is checked above; a
    # rank never stopped runs into frun's 30 s.
    [ $(($(now_ms) - t0)) -lt 10000 ] || fail "the other ranks took too long to stop"
    expect_gone "$TMPD"/rank.[013].pid "$TMPD"/child.[01].pid
}

# Rank $1 dies before it joins the job: the others' frpc_init fails at
# once naming it (fabrpc-run tells rank 0's store, or, rank 0 dead, a
# stand-in on its port), not at their init timeout (here 120 s), also
# with --keep-going.
t_rank_dead_before_joining() {
    local dead=$1 t0 rc r
    [ -n "${HELLO:-}" ] || fail "HELLO (examples/hello) is not set"
    prog early.sh <<EOF
[ "\$FABRPC_RANK" = $dead ] && exit 3
exec "$HELLO"
EOF
    t0=$(now_ms)
    FABRPC_INIT_TIMEOUT_MS=120000 frun 200 -n 3 --keep-going --provider shm "$TMPD/early.sh"
    rc=$?
    expect_status "$rc" 3
    [ $(($(now_ms) - t0)) -lt 60000 ] || fail "the ranks waited for the dead one: $(cat "$TMPD/err")"
    for r in 0 1 2; do
        [ "$r" = "$dead" ] && continue
        expect_grep "^\[$r\] .*rank $dead ended before it joined the job: exited with status 3 \\(fabrpc-run\\)" "$TMPD/err"
        expect_grep "^fabrpc-run: rank $r exited with status 1$" "$TMPD/err"
    done
}

t_leftover_process_killed() {
    # The rank exits 0 at once; its background sleep holds the output pipe.
    prog leave.sh <<EOF
sleep 60 &
echo \$! >"$TMPD/left.pid"
EOF
    local t0
    t0=$(now_ms)
    frun 30 -n 1 "$TMPD/leave.sh"
    expect_status $? 0
    # Waiting for it would take its 60 s (30, frun's bound); 10 s leaves
    # room for a loaded machine (own CI: over 900 ms beside 4 busy ranks).
    [ $(($(now_ms) - t0)) -lt 10000 ] || fail "waited for the leftover process"
    expect_gone "$TMPD/left.pid"
}

t_rank_killed_by_signal() {
    prog killed.sh <<'EOF'
if [ "$FABRPC_RANK" = 1 ]; then sleep 0.3; kill -KILL $$; fi
sleep 60
EOF
    frun 30 -n 3 "$TMPD/killed.sh"
    expect_status $? 137
    expect_grep '^fabrpc-run: rank 1 killed by signal SIGKILL$' "$TMPD/err"
}

t_term_ignored_gets_kill() {
    prog stubborn.sh <<EOF
if [ "\$FABRPC_RANK" = 1 ]; then sleep 0.3; exit 1; fi
trap '' TERM
echo \$\$ >"$TMPD/stubborn.pid"
sleep 60
EOF
    local t0 dt
    t0=$(now_ms)
    frun 30 -n 2 "$TMPD/stubborn.sh"
    expect_status $? 1
    dt=$(($(now_ms) - t0))
    expect_grep '^fabrpc-run: rank 0 still running; sending SIGKILL$' "$TMPD/err"
    if [ "$dt" -lt 3000 ] || [ "$dt" -ge 10000 ]; then
        fail "took $dt ms, expected 3 to 10 s"
    fi
    expect_gone "$TMPD/stubborn.pid"
}

t_timeout() {
    local t0
    t0=$(now_ms)
    frun 30 -n 2 --timeout 0.5 sleep 60
    expect_status $? 124
    expect_grep '^fabrpc-run: timeout after 0\.5 s; ranks still running: 0 1$' "$TMPD/err"
    [ $(($(now_ms) - t0)) -lt 10000 ] || fail "timeout took too long"
}

# The help's order: --timeout comes before a rank that failed earlier
# (with --keep-going the others run on into the timeout).
t_timeout_before_a_failure() {
    frun 30 -n 2 --keep-going --timeout 1 sh -c \
        '[ "$FABRPC_RANK" = 1 ] && exit 5; sleep 60'
    expect_status $? 124
    expect_grep '^fabrpc-run: rank 1 exited with status 5' "$TMPD/err"
}

# signal_forwarded SIG STATUS: SIG sent to fabrpc-run (its default
# restored: a background job starts with SIGINT and SIGQUIT ignored, which
# fabrpc-run keeps) reaches the 3 ranks, and fabrpc-run exits STATUS.
signal_forwarded() {
    local sig=$1 want=$2 bg rc
    env --default-signal="$sig" true 2>/dev/null || return 0
    # Files of this signal's own: the cases share $TMPD, and another
    # signal's files, there already, were taken for this one's.
    prog "trap.$sig.sh" <<EOF
trap 'echo got >"$TMPD/got.$sig.\$FABRPC_RANK"; exit 0' $sig
echo \$PPID >"$TMPD/ready.$sig.\$FABRPC_RANK.tmp"
mv "$TMPD/ready.$sig.\$FABRPC_RANK.tmp" "$TMPD/ready.$sig.\$FABRPC_RANK"
sleep 60 &
wait
EOF
    env --default-signal="$sig" "$FABRPC_RUN" -n 3 --timeout 30 \
        "$TMPD/trap.$sig.sh" >"$TMPD/out" 2>"$TMPD/err" &
    bg=$!
    wait_files 3 "$TMPD/ready.$sig.[0-9]"
    kill -"$sig" "$(cat "$TMPD/ready.$sig.0")"
    wait "$bg"
    rc=$?
    expect_status "$rc" "$want"
    wait_files 3 "$TMPD/got.$sig.*"
}

t_sigterm_forwarded() { signal_forwarded TERM 143; }
# Any signal that would end fabrpc-run ends the job: SIGQUIT (Ctrl-\\)
# left the ranks running, in process groups of their own.
t_sigquit_forwarded() { signal_forwarded QUIT 131; }

# fabrpc-run killed (SIGKILL, no handler) takes its ranks with it.
t_killed_launcher_takes_the_ranks() {
    prog orphan.sh <<EOF
echo \$\$ >"$TMPD/orphan.\$FABRPC_RANK.pid"
exec sleep 60
EOF
    "$FABRPC_RUN" -n 2 "$TMPD/orphan.sh" >"$TMPD/out" 2>"$TMPD/err" &
    local bg=$!
    wait_files 2 "$TMPD/orphan.*.pid"
    kill -KILL "$bg"
    wait "$bg" 2>/dev/null
    expect_gone "$TMPD"/orphan.*.pid
}

# Output that could not be written (a full disk) is not a success.
t_lost_output_is_an_error() {
    [ -w /dev/full ] || return 0
    run_bounded 30 "$FABRPC_RUN" -n 2 sh -c 'echo out; echo err >&2' \
        >/dev/full 2>"$TMPD/err"
    expect_status $? 1
    expect_grep "^fabrpc-run: writing the ranks' stdout failed: No space left on device$" "$TMPD/err"
}

t_sigint_forwarded() { signal_forwarded INT 130; }

t_help() {
    frun 10 --help
    expect_status $? 0
    expect_grep '--timeout' "$TMPD/out"
    expect_grep 'FABRPC_STORE_ADDR' "$TMPD/out"
    expect_grep '124' "$TMPD/out"
}

t_bad_usage() {
    local args
    for args in "" "-n" "-n 0 true" "-n 1025 true" "-n x true" "-n 2" \
        "--bogus -n 2 true" "-n 2 --timeout abc true" "-n 2 --timeout -1 true" \
        "-n 2 --port 70000 true" "-n 2 --provider= true"; do
        # shellcheck disable=SC2086  # split the argument list
        frun 10 $args
        expect_status $? 2
        # One line saying what is wrong, one pointing at --help.
        [ "$(wc -l <"$TMPD/err")" -eq 2 ] ||
            fail "'fabrpc-run $args' printed $(wc -l <"$TMPD/err") lines: $(cat "$TMPD/err")"
        expect_grep "^fabrpc-run: " "$TMPD/err"
        expect_grep "^see 'fabrpc-run --help'$" "$TMPD/err"
    done
    frun 10 --help
    expect_status $? 0
    expect_grep '^usage: fabrpc-run' "$TMPD/out"
}

t_cannot_execute() {
    frun 10 -n 2 "$TMPD/no/such/prog"
    expect_status $? 127
    expect_grep "^fabrpc-run: rank [01]: cannot execute $TMPD/no/such/prog: No such file or directory\$" "$TMPD/err"
    frun 10 -n 1 fabrpc-no-such-program-in-path
    expect_status $? 127
    expect_grep '^fabrpc-run: rank 0: cannot execute fabrpc-no-such-program-in-path: ' "$TMPD/err"
}

t_partial_last_line() {
    frun 10 -n 2 sh -c 'printf "line\npartial-$FABRPC_RANK"; printf "e-partial" >&2'
    expect_status $? 0
    expect_grep '^\[0\] line$' "$TMPD/out"
    expect_grep '^\[0\] partial-0$' "$TMPD/out"
    expect_grep '^\[1\] partial-1$' "$TMPD/out"
    expect_grep '^\[1\] e-partial$' "$TMPD/err"
}

t_no_prefix_passes_bytes() {
    head -c 100000 /dev/urandom >"$TMPD/bin"
    frun 10 -n 1 --no-prefix cat "$TMPD/bin"
    expect_status $? 0
    cmp -s "$TMPD/bin" "$TMPD/out" || fail "--no-prefix changed the bytes"
}

t_long_and_binary_lines() {
    frun 20 -n 2 sh -c 'head -c 300000 /dev/zero | tr "\0" x; echo; head -c 100000 /dev/urandom'
    expect_status $? 0
    [ "$(LC_ALL=C awk 'length($0) == 300004 && /^\[[01]\] xx*$/ { c++ }
        END { print c + 0 }' "$TMPD/out")" -eq 2 ] ||
        fail "the 300000-byte lines did not come out whole with a prefix"
    [ "$(wc -c <"$TMPD/out")" -ge 800000 ] || fail "output was lost"
}

t_stdin_to_rank_0() {
    echo hello | run_bounded 10 "$FABRPC_RUN" -n 2 cat >"$TMPD/out" 2>"$TMPD/err"
    expect_status $? 0
    [ "$(cat "$TMPD/out")" = "[0] hello" ] || fail "stdin: got '$(cat "$TMPD/out")'"
}

# `fabrpc-run ... | head`: once the reader is gone, ranks that keep
# writing end by SIGPIPE, as in a shell pipeline (before: fabrpc-run read
# and dropped their output for ever, at 99% of a core).
t_reader_gone_ends_the_job() {
    local st
    run_bounded 20 "$FABRPC_RUN" -n 2 sh -c 'while :; do echo x; done' \
        2>"$TMPD/err" | head -2 >"$TMPD/out"
    st=${PIPESTATUS[0]}
    expect_status "$st" 141
    [ "$(wc -l <"$TMPD/out")" -eq 2 ] || fail "expected 2 lines"
    expect_grep '^fabrpc-run: rank [01] killed by signal SIGPIPE$' "$TMPD/err"
}

t_idle_uses_no_cpu() {
    local TIMEFORMAT='%U %S' t max=0.3
    # A sanitizer build's fabrpc-run spends more starting and stopping.
    [ "${FABRPC_TEST_SCALE:-100}" -lt 100 ] && max=1.0
    t=$( { time "$FABRPC_RUN" -n 4 sleep 2 >/dev/null 2>&1; } 2>&1 )
    awk -v t="$t" -v max="$max" 'BEGIN { split(t, a, " "); exit !(a[1] + a[2] < max) }' ||
        fail "used $t s of CPU (user sys) while the ranks slept 2 s (at most $max)"
}

t_many_ranks() {
    frun 60 -n 64 sh -c 'echo "r$FABRPC_RANK"'
    expect_status $? 0
    [ "$(grep -c '^\[[0-9]*\] r[0-9]*$' "$TMPD/out")" -eq 64 ] || fail "expected 64 lines"
    expect_grep '^\[63\] r63$' "$TMPD/out"
}

run_case "output of 4 ranks is prefixed; env and store address agree" t_prefix_and_env
run_case "--provider, --port and a set FI_TCP_IFACE reach the ranks" t_provider_port_iface
run_case "the store's port is held from other pickers, free for the store" t_port_held_for_the_store
run_case "all ranks exit 0 -> exit 0" t_all_zero_exit_0
run_case "a rank exiting 3 -> status 3, the others stopped" t_failing_rank_stops_others
run_case "a rank dead before it joins ends the others' frpc_init at once, named" t_rank_dead_before_joining 2
run_case "the same for rank 0, which serves the store" t_rank_dead_before_joining 0
run_case "what a rank leaves running is killed when it exits" t_leftover_process_killed
run_case "a rank killed by SIGKILL is named, status 137" t_rank_killed_by_signal
run_case "a rank ignoring SIGTERM gets SIGKILL after the grace" t_term_ignored_gets_kill
run_case "--timeout -> exit 124 with a message" t_timeout
run_case "--timeout's 124 comes before an earlier rank's failure" t_timeout_before_a_failure
run_case "SIGTERM to fabrpc-run reaches every rank" t_sigterm_forwarded
run_case "SIGINT to fabrpc-run reaches every rank" t_sigint_forwarded
run_case "SIGQUIT to fabrpc-run reaches every rank, status 131" t_sigquit_forwarded
run_case "fabrpc-run killed by SIGKILL takes its ranks with it" t_killed_launcher_takes_the_ranks
run_case "output lost to a full disk: status 1 and a message" t_lost_output_is_an_error
run_case "--help exits 0 and documents the options" t_help
run_case "bad usage exits 2 with one line and a pointer to --help" t_bad_usage
run_case "a program that cannot run -> cannot execute, 127" t_cannot_execute
run_case "a partial last line is printed with its prefix" t_partial_last_line
run_case "--no-prefix passes binary output unchanged" t_no_prefix_passes_bytes
run_case "long lines and binary output survive" t_long_and_binary_lines
run_case "rank 0 reads stdin" t_stdin_to_rank_0
run_case "the reader of stdout gone: ranks end by SIGPIPE, status 141" t_reader_gone_ends_the_job
run_case "no CPU is used while ranks run" t_idle_uses_no_cpu
run_case "64 ranks" t_many_ranks
finish_cases
