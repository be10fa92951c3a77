#!/bin/bash
# Sourced by run_rma_<provider>.sh with PROV set: one-sided transfers (see
# rma.c): gets and puts of 1 B..RMA_MAX between 2 ranks with odd offsets
# and the owner checking what was put; 4 ranks x 4 threads getting from
# every rank while putting into disjoint slices of rank 0's region (also
# in blocking progress); bad descriptors and arguments refused, a
# deregistered region's descriptor failing, the agent working on;
# batches and notifications (rma_batch.c, rma_notes.c); the
# deregistration's questions to peers, "frpc.fence" (rma_fence.c). With
# FABRPC_RMA=emulate (run_rma_emulated_*.sh) the same cases run on the
# emulation by messages, and two more check the choice of mode
# (rma_modes.c).
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN RMA PROV

# 256 MiB, or 64 MiB when the suite runs scaled down (sanitizer builds,
# FABRPC_TEST_SCALE < 100); RMA_MAX overrides both.
: "${RMA_MAX:=$(( ${FABRPC_TEST_SCALE:-100} >= 100 ? 256 << 20 : 64 << 20 ))}"
export RMA_MAX
# rma_2 MODE: the rma test's MODE on 2 ranks of $PROV, bounded.
rma_2() { run_bounded 200 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 160 "$RMA" "$1"; }
sizes_2() { run_bounded 400 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 360 "$RMA" sizes; }
threads_4() { run_bounded 300 "$FABRPC_RUN" -n 4 --provider "$PROV" --timeout 260 "$RMA" threads; }
threads_blocking() { FABRPC_PROGRESS=blocking threads_4; }
bad_2() { rma_2 bad; }
batch_3() { run_bounded 300 "$FABRPC_RUN" -n 3 --provider "$PROV" --timeout 260 "$RMA" batch; }
# sockets takes milliseconds a get here; sanitizers slow everything.
if [ "$PROV" = sockets ] || [ "${FABRPC_TEST_SCALE:-100}" -lt 100 ]; then
    : "${RMA_CYCLES:=2000}"
fi
export RMA_CYCLES
notify_blocking() { FABRPC_PROGRESS=blocking notify_3; }
cycles_2() { run_bounded 300 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 260 "$RMA" cycles; }
notify_3() { FABRPC_NOTIFY_QUEUE=8 run_bounded 300 "$FABRPC_RUN" -n 3 --provider "$PROV" --timeout 260 "$RMA" notify; }

run_case "$PROV: get and put, 1 B..$((RMA_MAX >> 20)) MiB, 2 ranks" sizes_2
run_case "$PROV: 4 ranks x 4 threads, gets and disjoint puts at once" threads_4
run_case "$PROV: the same in blocking progress" threads_blocking
run_case "$PROV: bad descriptors and arguments refused, agent goes on" bad_2
run_case "$PROV: batches (1,000 puts, gets and puts mixed) and their notifications" batch_3
longbatch_2() { run_bounded 300 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 260 "$RMA" longbatch; }
run_case "$PROV: a batch of 70,000 puts (more than a callee's window of request ids) and its notification" longbatch_2
run_case "$PROV: notifications: order per source, full queue, callback and its end" notify_3
run_case "$PROV: the same in blocking progress" notify_blocking
noteshut_2() { rma_2 noteshut; }
run_case "$PROV: notifications: a slow callback, their figures, refused once the receiver's shutdown began" noteshut_2
notebig_2() { FABRPC_MAX_MSG=300 rma_2 notebig; }
run_case "$PROV: a batch's notification over max_msg_size refused before posting" notebig_2
# Notifications of batches and frpc_notify_wait (rma_notes.c): each case
# sets the environment its mode counts on.
notezero_2() { FABRPC_NOTIFY_QUEUE=2 rma_2 notezero; }
run_case "$PROV: a batch of 0 bytes with a notification delivers it, sync and async; to a full queue FRPC_EAGAIN" notezero_2
notefail_2() { rma_2 notefail; }
run_case "$PROV: a batch with a put to a deregistered region fails and sends no notification" notefail_2
notewait_2() { FABRPC_TIMEOUT_MS=1500 rma_2 notewait; }
notewait_blocking() { FABRPC_PROGRESS=blocking notewait_2; }
run_case "$PROV: frpc_notify_wait: timeout 0 is the default, not a poll; with no limit, ended FRPC_ESHUTDOWN by the shutdown" notewait_2
run_case "$PROV: frpc_notify_wait's timeouts and shutdown in blocking progress" notewait_blocking
noteorder_2() { rma_2 noteorder; }
run_case "$PROV: two async batches in flight: their notifications come in the order their futures completed" noteorder_2
notemulti_2() { FABRPC_NOTIFY_QUEUE=8 rma_2 notemulti; }
run_case "$PROV: 3 threads waiting at once: each notification taken once, each waiter's in the order sent" notemulti_2
notestats_2() { rma_2 notestats; }
run_case "$PROV: frpc_get_stats read while calls and notifying batches run: no counter goes down" notestats_2
ownersmall_2() { rma_2 ownersmall; }
run_case "$PROV: over the owner's max_msg_size only: refused by the owner, FRPC_ETOOBIG" ownersmall_2
run_case "$PROV: ${RMA_CYCLES:-10000} register/get/deregister cycles, resident set flat" cycles_2
# Natively over tcp a stale descriptor's get drops the connection, and
# only the getter sees it: it must tell the owner.
told_2() { rma_2 told; }
# The same with 2 calls in flight allowed, both taken on the rank that
# saw the drop: its word to the other is fabrpc's own and passes the
# limit (refused, the other's call ended at its 5 s timeout).
told_limited_2() { FABRPC_MAX_INFLIGHT=2 rma_2 told; }
# Lent args being read when the connection drops: their reader's word
# that it is done is lost with it.
told_lent_2() { rma_2 told-lent; }
dereg_in_flight_2() { rma_2 dereg-in-flight; }
run_case "$PROV: a region deregistered (and unmapped) while a peer's get of it is in flight: the get ends with its bytes or fails, calls go on" dereg_in_flight_2
if [ "$PROV" = tcp ] && [ "${FABRPC_RMA:-}" != emulate ]; then
    run_case "$PROV: a call in flight to the rank that saw the connection drop ends FRPC_ETRANSPORT, not at its timeout" told_2
    run_case "$PROV: the same with FABRPC_MAX_INFLIGHT=2: the word that the connection dropped passes the limit" told_limited_2
    run_case "$PROV: lent calls in flight when the connection drops end within seconds, not when the callee ends" told_lent_2
fi
# The choice of mode (rma_modes.c), once per provider, with the emulated
# suite: the cases set FABRPC_RMA themselves.
modes_1() { unset FABRPC_RMA; run_bounded 200 "$FABRPC_RUN" -n 1 --provider "$PROV" --timeout 160 "$RMA" modes; }
fallback_2() { unset FABRPC_RMA; run_bounded 200 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 160 "$RMA" fallback; }
if [ "${FABRPC_RMA:-}" = emulate ] || [ "$PROV" = sockets ]; then
    run_case "$PROV: FABRPC_RMA bogus, native, auto with RMA failing, emulate" modes_1
fi
if [ "${FABRPC_RMA:-}" = emulate ]; then
    run_case "$PROV: auto, one rank's RMA failing: native and emulated ranks together" fallback_2
fi
# Emulated, a get stays out while its owner's poll is held: the
# deregister waiting for it when the shutdown ends it.
dereg_shutdown_2() { rma_2 dereg-shutdown; }
if [ "${FABRPC_RMA:-}" = emulate ]; then
    run_case "$PROV: a deregister waiting for a transfer that frpc_shutdown ends: FRPC_ESHUTDOWN, mem kept, freed after" dereg_shutdown_2
fi
# A get from an owner whose poll is held (the header, "Native or
# emulated"): it waits for that poll natively over tcp and emulated, not
# on native shm. Emulated, every provider's transfers are the same
# calls: shm and tcp stand for them.
held_owner_2() { rma_2 held-owner; }
if [ "$PROV" = shm ] || [ "$PROV" = tcp ]; then
    run_case "$PROV: a get from an owner whose poll an inline handler holds: FRPC_ETIMEDOUT where the owner's poll moves it, 0 on native shm" held_owner_2
fi
# A descriptor of memory its owner unmapped: natively on shm the provider
# names no transfer in its report (comm/ledger.c); emulated, the owner
# looks the region up.
unmapped_2() { rma_2 unmapped; }
if [ "$PROV" = shm ] || [ "${FABRPC_RMA:-}" = emulate ]; then
    run_case "$PROV: a descriptor of memory its owner unmapped: gets and puts end FRPC_EACCES within seconds, no time limit too; the local region free at once" unmapped_2
fi
# A deregistration racing gets and puts: none reads the memory's next
# use nor writes into it (native shm: fabrpc's listing; others: the key).
race_2() { run_bounded 300 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 260 "$RMA" race; }
# Native tcp refuses a stale key by dropping the connection (the "told"
# case), which this race would do over and over.
if [ "$PROV" != tcp ] || [ "${FABRPC_RMA:-}" = emulate ]; then
    run_case "$PROV: a deregistration racing gets and puts: each whole or refused, none after it returned" race_2
fi
# Native shm's listing: a hold kept by a peer, and more regions than
# listed (comm/doorbell.h).
held_listing_2() { rma_2 held-listing; }
held_shutdown_2() { rma_2 held-shutdown; }
# Rank 0 kills itself: fabrpc-run --keep-going ends 137, rank 1 says ok.
held_lost_2() {
    local out st=0
    out=$(mktemp "${TMPDIR:-/tmp}/fabrpc-held.XXXXXX") || return 1
    run_bounded 200 "$FABRPC_RUN" -n 2 --provider "$PROV" --keep-going \
        --timeout 160 "$RMA" held-lost > "$out" 2>&1 || st=$?
    cat "$out"
    if [ $st -ne 137 ] || ! grep -q "ok: rank 1: a lost peer's hold" "$out"; then
        echo "held-lost: fabrpc-run status $st (want 137), rank 1's ok above or not"
        rm -f "$out"
        return 1
    fi
    rm -f "$out"
}
listing_full_2() { rma_2 listing-full; }
slot_reuse_2() { rma_2 slot-reuse; }
if [ "$PROV" = shm ] && [ "${FABRPC_RMA:-}" != emulate ]; then
    run_case "$PROV: a peer keeping its hold on a region's listing: the deregistration ends FRPC_ETIMEDOUT, the region still serves" held_listing_2
    run_case "$PROV: the owner's frpc_shutdown while a live peer keeps its hold: waits a second, no more" held_shutdown_2
    run_case "$PROV: the peer keeping its hold killed: the owner's deregistration does not wait for it" held_lost_2
    run_case "$PROV: 1030 regions registered: those past the 1024 listed are served by messages; a freed slot lists the next" listing_full_2
    run_case "$PROV: a stale descriptor on the slot a live region took since, in a batch after it: refused, no byte moved" slot_reuse_2
fi
# The deregistration's questions to peers (rma_fence.c, rpc/fence.c):
# asked where the owner's provider moves the bytes of peers' native
# transfers itself (tcp, sockets natively; auto emulates sockets, so
# FABRPC_RMA=native there), never on native shm nor emulated.
# FENCE_TRANSFERS: how the agents must say they transfer (rma_fence.c
# checks it: a count of 0 in another mode would prove nothing).
if [ "${FABRPC_RMA:-}" != emulate ] && { [ "$PROV" = tcp ] || [ "$PROV" = sockets ]; }; then
    FENCE_RMA=native FENCE_ASKS=1 FENCE_TRANSFERS=native
elif [ "${FABRPC_RMA:-}" = emulate ]; then
    FENCE_RMA=emulate FENCE_ASKS=0 FENCE_TRANSFERS=emulated
else
    FENCE_RMA=${FABRPC_RMA:-auto} FENCE_ASKS=0 FENCE_TRANSFERS=
    [ "$PROV" != shm ] || FENCE_TRANSFERS="native over shm"
fi
# fence_n N MODE: the rma test's MODE on N ranks of $PROV, bounded, in
# the transfer mode whose fence is checked.
fence_n() {
    FABRPC_RMA=$FENCE_RMA FENCE_ASKS=$FENCE_ASKS FENCE_TRANSFERS=$FENCE_TRANSFERS \
        run_bounded 200 "$FABRPC_RUN" -n "$1" --provider "$PROV" --timeout 160 "$RMA" "$2"
}
fence_stopped_3() { fence_n 3 fence-stopped; }
fence_none_2() { fence_n 2 fence-none; }
fence_alone_1() { fence_n 1 fence-alone; }
fence_count_3() { fence_n 3 fence-count; }
fence_in_handler_2() { fence_n 2 fence-in-handler; }
if [ "$FENCE_ASKS" = 1 ]; then
    run_case "$PROV: a region peers may access deregistered while a peer is stopped: FRPC_ETIMEDOUT, closed (own transfers FRPC_EINVAL, a peer's descriptor stale), deregistered again once it resumes" fence_stopped_3
    run_case "$PROV: each deregistration of a region peers may access counts world - 1 frpc.fence calls on the rank that asks, none for access 0 (3 ranks)" fence_count_3
else
    run_case "$PROV ($FENCE_RMA): deregistrations ask no peer: no frpc.fence call counted (3 ranks)" fence_count_3
fi
run_case "$PROV: a deregistration in a pool handler of a pool of one (which may not wait for futures): 0, not FRPC_ETIMEDOUT at once; on both ranks at once: 0, neither waits for the other" fence_in_handler_2
run_case "$PROV: a region of access 0 deregistered while a peer is stopped: 0, asking no one (no frpc.fence call)" fence_none_2
run_case "$PROV: a world of one: a region peers may access deregisters 0, asking no one (no frpc.fence call)" fence_alone_1
finish_cases
