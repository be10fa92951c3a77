#!/bin/bash
# Ranks that do not belong together must not start a job: two ranks
# started by hand (no fabrpc-run) that disagree on the world size, on the
# job key, or where only one has a key, or where one was given a rank its
# world size cannot hold. frpc_init must fail on both, within
# 2 s (not at the init timeout), with a message that says why (fabrpc.h,
# frpc_init and "Membership"); but a rank without the job's key fails at
# once alone, and rank 0 at its init timeout, naming it: such a process
# cannot be told from a stranger, who must not end a starting job. Uses peerlost's init-only mode, which
# prints "init: rc=NAME ms=N err=TEXT". Init times are printed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/byhand.sh"
need_var PEERLOST FABRPC_RUN
make_tmpdir

# The promise is "at once": 2 s on an idle machine, against the 20 s init
# timeout of the rank that is checked. The check allows for a loaded
# machine (5 s: rank 1 took 3.2-3.7 s at load average 25-30, rank 0,
# started beside it, slow to open the store) and for the sanitizer builds (FABRPC_TEST_SCALE
# set: 8 s); the times are printed.
if [ "${FABRPC_TEST_SCALE:-100}" -lt 100 ]; then BOUND=8000; else BOUND=5000; fi

# pair NAME WS0 WS1 KEY0 KEY1 [RANK1]: ranks 0 and 1 of one job, with these
# world sizes and keys ("-" for none), the second started as rank RANK1 (1
# if not given), each bounded by 30 s; outputs in $TMPD/NAME.{0,1}; both
# must exit 0 (init-only's "init failed"). Init timeouts: 20 s, or
# PAIR_INIT0_MS for rank 0.
pair() {
    local name=$1 port i st pids=()
    local ws=("$2" "$3") key=("$4" "$5") rank=(0 "${6:-1}")
    port=$(free_port)
    for i in 0 1; do
        (
            export FABRPC_RANK=${rank[i]} FABRPC_WORLD_SIZE=${ws[i]} \
                FABRPC_STORE_ADDR=127.0.0.1:$port FABRPC_PROVIDER=${PROV:-tcp} \
                FABRPC_INIT_TIMEOUT_MS=20000
            [ "$i" = 1 ] || FABRPC_INIT_TIMEOUT_MS=${PAIR_INIT0_MS:-20000}
            unset FABRPC_JOB_KEY
            [ "${key[i]}" = - ] || export FABRPC_JOB_KEY=${key[i]}
            exec "$PEERLOST" init-only
        ) >"$TMPD/$name.$i" 2>&1 &
        pids[i]=$!
        echo $! >>"$TMPD/$name.pid"
    done
    for i in 0 1; do
        st=0
        wait_bounded 30 "${pids[i]}" || st=$?
        sed "s/^/    rank $i: /" "$TMPD/$name.$i"
        case $st in
        0) ;;
        3) fail "rank $i: frpc_init succeeded" ;;
        124) fail "rank $i: still in frpc_init after 30 s" ;;
        *) fail "rank $i ended with status $st" ;;
        esac
    done
}

# within NAME MS [RANKS]: each rank's (of RANKS, default "0 1") init
# failed in under MS ms.
within() {
    local i ms
    for i in ${3:-0 1}; do
        ms=$(sed -n 's/^init: rc=[A-Z_]* ms=\([0-9]*\) .*/\1/p' "$TMPD/$1.$i")
        [ -n "$ms" ] || fail "rank $i: no init line"
        [ "$ms" -lt "$2" ] || fail "rank $i: frpc_init failed after $ms ms, want < $2 ms"
    done
}

# says NAME ERE...: each rank's message matches every ERE (case-blind).
says() {
    local name=$1 i pat
    shift
    for i in 0 1; do
        for pat in "$@"; do
            grep -Eiq -e "$pat" "$TMPD/$name.$i" ||
                fail "rank $i's message does not match /$pat/"
        done
    done
}

# codes NAME RC0 RC1: the code each rank's frpc_init returned. On a key
# mismatch the rank whose key is not the job's gets FRPC_EACCES at once,
# rank 0 (whose key is the job's) FRPC_EBOOTSTRAP at its init timeout
# (fabrpc.h, frpc_init's errors): a process without the key cannot be told
# from a stranger, who must not end a starting job.
codes() {
    local name=$1 i rc
    shift
    for i in 0 1; do
        rc=$(sed -n 's/^init: rc=\([A-Z_]*\) .*/\1/p' "$TMPD/$name.$i")
        [ "$rc" = "$1" ] || fail "rank $i: frpc_init returned ${rc:-nothing}, want $1"
        shift
    done
}

world_mismatch() {
    pair ws 2 3 - -
    within ws $BOUND
    says ws 'world' '(^|[^0-9])2([^0-9]|$)' '(^|[^0-9])3([^0-9]|$)'
}

# The keyless or wrong-keyed rank fails at once (its init timeout 20 s);
# rank 0 at its 4 s init timeout, naming the refusal.
key_mismatch() {
    PAIR_INIT0_MS=4000 pair key 2 2 "key-a-$$" "key-b-$$"
    within key $BOUND 1
    within key $((BOUND + 4000)) 0
    says key 'key'
    grep -q "never joined.*claiming rank 1 failed the job key proof" \
        "$TMPD/key.0" || fail "rank 0 does not name the refused rank 1"
    codes key FRPC_EBOOTSTRAP FRPC_EACCES
}

key_one_side() {
    PAIR_INIT0_MS=4000 pair onekey 2 2 "key-a-$$" -
    within onekey $BOUND 1
    within onekey $((BOUND + 4000)) 0
    says onekey 'key'
    codes onekey FRPC_EBOOTSTRAP FRPC_EACCES
}

# job_starts PID0 PID1 NAME0 NAME1: the two members' inits (outputs in
# $TMPD/NAME0, NAME1) both work (init-only's status 3), within 60 s each.
job_starts() {
    local r st
    for r in "$1" "$2"; do
        st=0
        wait_bounded 60 "$r" || st=$?
        [ $st -eq 3 ] || { cat "$TMPD/$3" "$TMPD/$4"; fail "a member's init failed (status $st; 3: it worked)"; }
    done
}

# A stranger without the key claims rank 1 while rank 0 waits for it: it
# is refused, and the real rank 1, started after, joins: the job starts
# (one keyless process had made every rank's init fail).
stranger_while_joining() {
    local r0
    port=$(free_port)
    start_keyed st0 0 2 30000 "key-$$"
    r0=$!
    sleep 1
    start_keyed st1x 1 2 30000 -
    wait_bounded 30 $! >/dev/null || true
    sed "s/^/    stranger: /" "$TMPD/st1x"
    grep -q 'rc=FRPC_EACCES' "$TMPD/st1x" ||
        fail "the keyless process was not refused with FRPC_EACCES"
    start_keyed st1 1 2 30000 "key-$$"
    job_starts "$r0" $! st0 st1
    sed "s/^/    rank 0: /" "$TMPD/st0"
}

# A second process started as rank 0 (it cannot listen at the store's
# address, so it asks the store there) with another key, then with none:
# each is refused as a keyless rank 1 is, FRPC_EACCES naming the key (it
# got FRPC_EBOOTSTRAP "cannot listen ... Address already in use", the
# store's answer dropped), and the job still starts.
second_rank0_keyless() {
    local r0 k
    port=$(free_port)
    start_keyed sk0 0 2 30000 "key-$$"
    r0=$!
    sleep 1
    for k in "other-$$" -; do
        start_keyed sk0x 0 2 30000 "$k"
        wait_bounded 30 $! >/dev/null || true
        sed "s/^/    second rank 0 (key $k): /" "$TMPD/sk0x"
        grep -q 'rc=FRPC_EACCES .*second process started as rank 0.*key mismatch' \
            "$TMPD/sk0x" ||
            fail "a second rank 0 with key $k: want FRPC_EACCES naming the key"
    done
    start_keyed sk1 1 2 30000 "key-$$"
    job_starts "$r0" $! sk0 sk1
}

# A second process started as rank 0 with another world size: refused
# with the store's words (it got "cannot listen ... Address already in
# use"); the job, still joining, fails at once too (fabrpc.h, frpc_init).
second_rank0_world() {
    port=$(free_port)
    start_keyed sw0 0 2 30000 "key-$$"
    local r0=$!
    sleep 1
    start_keyed sw0x 0 3 30000 "key-$$"
    wait_bounded 30 $! >/dev/null || true
    sed "s/^/    second rank 0 (world size 3): /" "$TMPD/sw0x"
    grep -q 'rc=FRPC_EBOOTSTRAP .*second process started as rank 0 was started with world size 3, rank 0 with 2' \
        "$TMPD/sw0x" || fail "a second rank 0 of world size 3: want the store's refusal naming both sizes"
    wait_bounded 30 "$r0" >/dev/null || true
    grep -q 'rc=FRPC_EBOOTSTRAP' "$TMPD/sw0" || fail "the joining job's rank 0 did not fail"
}

# RANK=2 WORLD_SIZE=2 where rank 1 was meant: that rank fails at once
# (FRPC_EINVAL) and tells the store, so rank 0 does not wait for a rank 1
# until its init timeout (it used to: "rank 1 of 2 never joined").
rank_outside() {
    pair outside 2 2 "key-$$" "key-$$" 2
    within outside $BOUND
    says outside 'rank[ =]2' 'outside|not below'
    codes outside FRPC_EBOOTSTRAP FRPC_EINVAL
}

# start_keyed NAME RANK WS INIT_MS KEY: init-only as RANK of WS on the store
# at $port, FABRPC_JOB_KEY set to KEY ("-": none), in the background;
# output in $TMPD/NAME, pid in $!.
start_keyed() {
    (
        export FABRPC_RANK=$2 FABRPC_WORLD_SIZE=$3 \
            FABRPC_STORE_ADDR=127.0.0.1:$port FABRPC_PROVIDER=${PROV:-tcp} \
            FABRPC_INIT_TIMEOUT_MS=$4
        unset FABRPC_JOB_KEY
        [ "$5" = - ] || export FABRPC_JOB_KEY=$5
        exec "$PEERLOST" init-only
    ) >"$TMPD/$1" 2>&1 &
    echo $! >>"$TMPD/$1.pid"
}

# start_rank NAME RANK WS INIT_MS: start_keyed with no key.
start_rank() { start_keyed "$1" "$2" "$3" "$4" -; }

# stopped_member NAME: rank 1 of 3, started after rank 0, stopped once it
# holds a connection to the store (it never leaves it); its pid in $held.
stopped_member() {
    local n=0
    start_rank "$1" 1 3 60000
    held=$!
    until ss -tnpH state established "( dport = :$port )" 2>/dev/null |
        grep -q "pid=$held,"; do
        [ $n -lt 200 ] || fail "rank 1 did not connect to the store in 20 s"
        sleep 0.1
        n=$((n + 1))
    done
    sleep 0.5 # its hello, which makes it a member, follows at once
    kill -STOP "$held"
}

# rank0_ms NAME: rank 0's init time from its init-only line in $ms, once
# it failed (within 90 s). Then rank 1 resumes and ends by itself.
rank0_ms() {
    local st=0
    wait_bounded 90 "$r0" || st=$?
    kill -CONT "$held"
    wait_bounded 60 "$held" >/dev/null
    sed "s/^/    rank 0: /" "$TMPD/$1"
    [ $st -eq 0 ] || fail "rank 0 ended with status $st"
    ms=$(sed -n 's/^init: rc=[A-Z_]* ms=\([0-9]*\) .*/\1/p' "$TMPD/$1")
    [ -n "$ms" ] || fail "rank 0: no init line"
    echo "    rank 0 failed after $ms ms"
}

# Rank 0's init fails at once (a rank outside the world tells the store)
# while rank 1, stopped, stays connected: rank 0 keeps the store for it
# 3 s at most, not up to its 60 s init timeout.
linger_cap() {
    port=$(free_port)
    start_rank linger0 0 3 60000
    r0=$!
    stopped_member linger1
    start_rank linger3 3 3 60000
    wait_bounded 30 $! >/dev/null
    rank0_ms linger0
    [ "$ms" -lt 15000 ] ||
        fail "rank 0 kept the store $ms ms for a stopped rank, want < 3 s + start-up"
}

# Rank 0's init fails at its 3 s init timeout (rank 2 never comes) with
# rank 1 stopped and connected: it keeps the store no longer (its init
# returns within the timeout and the second a failed init may take more,
# plus a second for a loaded machine; 3 s more would be 6 s).
linger_deadline() {
    port=$(free_port)
    start_rank deadline0 0 3 3000
    r0=$!
    stopped_member deadline1
    rank0_ms deadline0
    grep -q 'rc=FRPC_EBOOTSTRAP' "$TMPD/deadline0" ||
        fail "rank 0: want FRPC_EBOOTSTRAP (a rank did not join)"
    [ "$ms" -lt 5000 ] ||
        fail "rank 0's failed init took $ms ms with a 3000 ms init timeout"
}

# A job short of open files (ulimit -n 32: rank 0 cannot accept every
# rank's store connections): every rank's init works or none does
# (before, one rank's returned 0 while the others failed: 6 of 9 runs),
# and each rank says on stderr that the limit is short.
few_files() {
    local n ok
    (
        ulimit -n 32
        FABRPC_INIT_TIMEOUT_MS=5000 run_bounded 60 "$FABRPC_RUN" -n 6 \
            --keep-going --provider tcp "$PEERLOST" init-only
    ) >"$TMPD/files.out" 2>"$TMPD/files.err" || true
    cat "$TMPD/files.out" "$TMPD/files.err" >&2
    n=$(grep -c 'init: rc=' "$TMPD/files.out")
    ok=$(grep -c 'init: rc=FRPC_OK' "$TMPD/files.out")
    [ "$n" -eq 6 ] || fail "$n of 6 ranks said how their init ended"
    [ "$ok" -eq 0 ] || [ "$ok" -eq 6 ] ||
        fail "$ok of 6 ranks' init worked: all or none"
    [ "$(grep -c 'at most 32 open files' "$TMPD/files.err")" -eq 6 ] ||
        fail "not every rank said that 32 open files may be too few"
}

run_case "tcp: 6 ranks with 32 open files each: all inits fail or all work, each says the limit is short" few_files

for PROV in shm tcp; do
    run_case "$PROV: world sizes 2 and 3: both ranks' init fails at once, naming both" world_mismatch
    run_case "$PROV: different job keys: rank 1's init fails at once, rank 0's at its timeout naming it" key_mismatch
    run_case "$PROV: a job key on one rank only: the same" key_one_side
    run_case "$PROV: a keyless stranger claiming rank 1 while the job joins is refused; the job starts" stranger_while_joining
    run_case "$PROV: a second rank 0 with another key or none is refused FRPC_EACCES; the job starts" second_rank0_keyless
    run_case "$PROV: a second rank 0 of another world size is refused naming both sizes" second_rank0_world
    run_case "$PROV: rank 2 of world size 2: both ranks' init fails at once, naming it" rank_outside
    run_case "$PROV: rank 0's failed init keeps the store for a stopped rank 3 s at most" linger_cap
    run_case "$PROV: ... and never past its init deadline" linger_deadline
done
finish_cases
