#!/bin/bash
# Bootstrap: ranks started by other launchers' environments (torchrun,
# mpirun, srun) find each other, and a store nobody serves or a rank that
# never comes fails init with a clear error, in bounded time.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/byhand.sh"
need_var HELLO
make_tmpdir
unset FABRPC_RANK FABRPC_WORLD_SIZE FABRPC_STORE_ADDR RANK WORLD_SIZE \
    MASTER_ADDR MASTER_PORT OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE \
    PMI_RANK PMI_SIZE SLURM_PROCID SLURM_NTASKS
export FABRPC_PROVIDER=tcp

# free_port (byhand.sh) checks its port by binding it, but another test's
# store may take it before ours does: a start that fails with "Address
# already in use" is retried on a new port.
# Starts 2 ranks by hand; $1 is a function that prints rank r's variables.
two_ranks() {
    local envfn=$1 r pids=() rc=0
    for r in 0 1; do
        # shellcheck disable=SC2046
        env $($envfn $r) timeout -k 5 60 "$HELLO" >"$TMPD/r$r.out" 2>&1 &
        pids+=($!)
        echo "$!" >>"$TMPD/ranks.pid"
    done
    for r in 0 1; do wait "${pids[$r]}" || rc=1; done
    cat "$TMPD/r0.out" "$TMPD/r1.out"
    [ $rc = 0 ] || return 1
    expect_grep "^rank 0 called rank 1: hello from rank 1 to rank 0$" "$TMPD/r0.out"
    expect_grep "^rank 1 called rank 0: hello from rank 0 to rank 1$" "$TMPD/r1.out"
}

PORT=$(free_port)
torchrun_env() { echo "RANK=$1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT"; }
mpirun_env() { echo "OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_SIZE=2 FABRPC_STORE_ADDR=127.0.0.1:$PORT"; }
slurm_env() { echo "SLURM_PROCID=$1 SLURM_NTASKS=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT"; }
pmi_env() { echo "PMI_RANK=$1 PMI_SIZE=2 FABRPC_STORE_ADDR=[::1]:$PORT"; }

# two_ranks on a fresh port, up to 3 ports if the store's was taken.
on_free_port() {
    local try
    for try in 1 2 3; do
        PORT=$(free_port)
        rm -f "$TMPD/r0.out" "$TMPD/r1.out"
        two_ranks "$1" && return 0
        grep -q "Address already in use" "$TMPD/r0.out" "$TMPD/r1.out" ||
            return 1
        echo "note: port $PORT was taken; again on another"
    done
    return 1
}
torchrun() { on_free_port torchrun_env; }
mpirun() { on_free_port mpirun_env; }
slurm() { on_free_port slurm_env; }
pmi_ipv6() {
    [ -e /proc/net/if_inet6 ] || skip "no IPv6"
    on_free_port pmi_env
}

no_store() {
    local port start end
    port=$(free_port)
    start=$(date +%s)
    if FABRPC_RANK=1 FABRPC_WORLD_SIZE=2 FABRPC_STORE_ADDR=127.0.0.1:$port \
        FABRPC_INIT_TIMEOUT_MS=1500 run_bounded 30 "$HELLO" >"$TMPD/ns.out" 2>&1; then
        fail "init succeeded without a store"
    fi
    end=$(date +%s)
    cat "$TMPD/ns.out"
    expect_grep "127\.0\.0\.1:$port" "$TMPD/ns.out"
    [ $((end - start)) -lt 20 ] || fail "took $((end - start)) s"
}

# An unreachable store whose address the user did not set, or set as
# MASTER_PORT (the store is one above), says so: under srun or mpirun on
# several hosts the default 127.0.0.1:29500 is the mistake to point at.
# The default case runs in a network namespace of its own (unshare -rn),
# so that no store of another job on this machine's 29500 answers.
master_port_hint() {
    local port
    port=$(free_port)
    if RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        FABRPC_INIT_TIMEOUT_MS=1500 run_bounded 30 "$HELLO" >"$TMPD/mp.out" 2>&1; then
        fail "init succeeded without a store"
    fi
    cat "$TMPD/mp.out"
    expect_grep "127\.0\.0\.1:$((port + 1)).*MASTER_PORT\+1" "$TMPD/mp.out"
}

default_store_hint() {
    unshare -rn true 2>/dev/null || {
        echo "note: unshare -rn is not allowed here; not run"
        return 0
    }
    # shellcheck disable=SC2016  # $0 expands in the namespace's shell
    if FABRPC_RANK=1 FABRPC_WORLD_SIZE=2 FABRPC_INIT_TIMEOUT_MS=1500 \
        run_bounded 30 unshare -rn sh -c 'ip link set lo up 2>/dev/null; exec "$0"' \
        "$HELLO" >"$TMPD/ds.out" 2>&1; then
        fail "init succeeded without a store"
    fi
    cat "$TMPD/ds.out"
    expect_grep "127\.0\.0\.1:29500.*default store address.*FABRPC_STORE_ADDR" "$TMPD/ds.out"
}

missing_rank() {
    local port
    port=$(free_port)
    if FABRPC_RANK=0 FABRPC_WORLD_SIZE=2 FABRPC_STORE_ADDR=127.0.0.1:$port \
        FABRPC_INIT_TIMEOUT_MS=1500 run_bounded 30 "$HELLO" >"$TMPD/mr.out" 2>&1; then
        fail "init succeeded with a rank missing"
    fi
    cat "$TMPD/mr.out"
    expect_grep "rank 1 of 2 never joined the store at 127\.0\.0\.1:$port" "$TMPD/mr.out"
    # An IPv6 store's address is written as it is given, in brackets
    # (before: "the store at ::1:PORT").
    if FABRPC_RANK=0 FABRPC_WORLD_SIZE=2 FABRPC_STORE_ADDR="[::1]:$port" \
        FABRPC_INIT_TIMEOUT_MS=1500 run_bounded 30 "$HELLO" >"$TMPD/mr6.out" 2>&1; then
        fail "init succeeded with a rank missing"
    fi
    cat "$TMPD/mr6.out"
    expect_grep "rank 1 of 2 never joined the store at \[::1\]:$port" "$TMPD/mr6.out"
}

# Rank 0 only shm, rank 1 only tcp: both fail, and the message names the
# odd rank's list (rank 0's used to say only "rank 0 has "shm", this rank
# has "shm"", pointing at nobody).
no_common_provider() {
    local port r p pids=()
    port=$(free_port)
    for r in 0 1; do
        p=shm
        [ $r = 1 ] && p=tcp
        FABRPC_RANK=$r FABRPC_WORLD_SIZE=2 FABRPC_STORE_ADDR=127.0.0.1:$port \
            FABRPC_PROVIDER=$p FABRPC_INIT_TIMEOUT_MS=20000 \
            run_bounded 30 "$HELLO" >"$TMPD/nc.$r" 2>&1 &
        pids+=($!)
        echo "$!" >>"$TMPD/nc.pid"
    done
    for r in 0 1; do
        if wait "${pids[$r]}"; then fail "rank $r: init succeeded"; fi
        cat "$TMPD/nc.$r"
        expect_grep 'no provider is common to all 2 ranks \(rank 0 has "shm", rank 1 "tcp"\)' "$TMPD/nc.$r"
    done
}

bad_env() {
    # A store address of its own: the rank looks for a store to tell of
    # its mistake, and must not find another job's at the default port.
    if FABRPC_RANK=2 FABRPC_WORLD_SIZE=2 FABRPC_STORE_ADDR=127.0.0.1:$(free_port) \
        run_bounded 30 "$HELLO" >"$TMPD/be.out" 2>&1; then
        fail "init accepted rank 2 of 2"
    fi
    cat "$TMPD/be.out"
    expect_grep "FABRPC_RANK" "$TMPD/be.out"
    # A world of one has no store and nobody to tell: it fails without
    # looking for one (before: 5 s, "could not tell the other ranks
    # through the store at 127.0.0.1:29500").
    if FABRPC_RANK=1 FABRPC_WORLD_SIZE=1 \
        run_bounded 30 "$HELLO" >"$TMPD/be1.out" 2>&1; then
        fail "init accepted rank 1 of 1"
    fi
    cat "$TMPD/be1.out"
    expect_grep "FABRPC_RANK=1 is not below FABRPC_WORLD_SIZE=1" "$TMPD/be1.out"
    if grep -q "store" "$TMPD/be1.out"; then
        fail "a world of one looked for a store"
    fi
}

# Ranks 0, 1, D of 3 (D = 1 or 0): the store refuses the second rank D at
# once (FRPC_EINVAL, naming the rank and its variable), and, as rank 2
# will never come, fails the others' init at once too, saying why;
# before, every process waited for its whole init timeout. Which rank 1
# comes second is the machine's choice; the second rank 0 starts a
# second later (it cannot listen at the store's address, finds the job's
# store there and is refused by it; before: "Address already in use",
# and the others waited for their init timeout). A second rank 0 that
# asks the store before the first's own connection joined is the one
# refused too: test_store's "the serving rank claimed by another process
# before its own connection". Two rank 0s started at once, rank 1 half a
# second later: rank 0's failed init keeps the store up for it (at most
# 3 s), so that it learns why at once rather than finding no store until
# its init timeout.
rank_claimed_twice() {
    local d=$1 late=${2:-} port i r pids=() start end dup=0 who order="0 1 2"
    port=$(free_port)
    start=$(date +%s)
    # Process 2 is the second one started as rank d; with late, rank 0 is
    # started twice at once and rank 1 (process 1) late seconds after.
    [ -n "$late" ] && order="0 2 1"
    for i in $order; do
        r=$((i > 0))
        if [ $i = 2 ]; then
            r=$d
            [ "$d" = 0 ] && [ -z "$late" ] && sleep 1
        fi
        [ $i = 1 ] && [ -n "$late" ] && sleep "$late"
        FABRPC_RANK=$r FABRPC_WORLD_SIZE=3 FABRPC_STORE_ADDR=127.0.0.1:$port \
            FABRPC_INIT_TIMEOUT_MS=40000 run_bounded 60 "$HELLO" \
            >"$TMPD/dup.$i" 2>&1 &
        pids[$i]=$!
        echo "$!" >>"$TMPD/dup.pid"
    done
    for i in 0 1 2; do
        if wait "${pids[$i]}"; then fail "process $i: init succeeded"; fi
    done
    end=$(date +%s)
    for i in 0 1 2; do
        cat "$TMPD/dup.$i"
        if grep -q "already held" "$TMPD/dup.$i"; then
            expect_grep "^frpc_init: invalid argument: .*rank $d is already held by a live member.*FABRPC_RANK=$d" "$TMPD/dup.$i"
            dup=$((dup + 1))
            who=$i
        else
            expect_grep "rank $d was claimed twice" "$TMPD/dup.$i"
        fi
    done
    [ $dup = 1 ] || fail "$dup processes were refused as the second rank $d"
    # Started at once, either rank 0 may be the second.
    [ -z "$late" ] && [ "$who" = 0 ] && fail "the first rank 0 was refused"
    # Well before the 40 s init timeout, on a loaded machine too.
    [ $((end - start)) -lt 25 ] || fail "took $((end - start)) s"
}

# Rank 1 started twice as an extra process (not a misnumbered one), rank
# 2 half a second after the second: rank 0's failed init keeps the store
# for every rank not there yet (up to 3 s), so rank 2 is told why at once.
# Before, the store waited for all ranks but one, closed with ranks 0 and
# 1 told, and rank 2 found no store until its init timeout.
rank_twice_then_late() {
    local port i r pids=() start end
    port=$(free_port)
    start=$(date +%s)
    for i in 0 1 2 3; do
        r=$i
        [ $i = 2 ] && { r=1; sleep 0.5; }
        [ $i = 3 ] && { r=2; sleep 0.5; }
        FABRPC_RANK=$r FABRPC_WORLD_SIZE=3 FABRPC_STORE_ADDR=127.0.0.1:$port \
            FABRPC_INIT_TIMEOUT_MS=40000 run_bounded 60 "$HELLO" \
            >"$TMPD/late.$i" 2>&1 &
        pids[$i]=$!
        echo "$!" >>"$TMPD/late.pid"
    done
    for i in 0 1 2 3; do
        if wait "${pids[$i]}"; then fail "process $i: init succeeded"; fi
    done
    end=$(date +%s)
    for i in 0 1 2 3; do cat "$TMPD/late.$i"; done
    expect_grep "rank 1 was claimed twice" "$TMPD/late.3"
    # Well before the 40 s init timeout, on a loaded machine too.
    [ $((end - start)) -lt 25 ] || fail "took $((end - start)) s"
}

run_case "torchrun variables" torchrun
run_case "mpirun variables" mpirun
run_case "srun variables" slurm
run_case "PMI variables, IPv6 store" pmi_ipv6
run_case "unreachable store names its address" no_store
run_case "unreachable MASTER_ADDR store says it is MASTER_PORT+1" master_port_hint
run_case "unreachable default store says it is the default" default_store_hint
run_case "a rank that never comes fails init" missing_rank
run_case "no provider in common: each rank's init names the odd rank's" no_common_provider
run_case "invalid rank is refused" bad_env
run_case "a rank started twice: refused, and every init fails at once" rank_claimed_twice 1
run_case "rank 0 started twice: the second refused, every init fails at once" rank_claimed_twice 0
run_case "rank 0 started twice at once, rank 1 later: it fails at once too" rank_claimed_twice 0 0.5
run_case "rank 1 started twice, rank 2 later: rank 2 is told why at once" rank_twice_then_late
finish_cases
