#!/bin/bash
# One-sided transfers over udp;ofi_rxd, which auto mode emulates: a read
# its owner refuses (a stale descriptor's key) is never ended there, and
# every later frame between the two ranks waits behind it (natively the
# "bad" case's call beside a stale transfer timed out at 60 s). Checked
# here: the choice of mode, bad descriptors refused with the agent going
# on (rma.c, rma_modes.c), and a batch of more pieces than the owner's
# window of request ids with its notification (rxd delivers some
# requests twice: the owner drops ids it saw, rpc/dedup.h). The rest of rma_cases.sh is left to the
# providers that carry bulk data (rxd moves a few MB/s).
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN RMA
PROV=udp

modes_1() { unset FABRPC_RMA; run_bounded 120 "$FABRPC_RUN" -n 1 --provider "$PROV" --timeout 100 "$RMA" modes; }
bad_2() { unset FABRPC_RMA; run_bounded 120 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 100 "$RMA" bad; }
run_case "$PROV: auto emulates, saying why; native and emulate as asked" modes_1
run_case "$PROV: bad descriptors and arguments refused, agent goes on" bad_2
longbatch_2() { unset FABRPC_RMA; run_bounded 300 "$FABRPC_RUN" -n 2 --provider "$PROV" --timeout 260 "$RMA" longbatch; }
run_case "$PROV: a batch of 70,000 puts (more than the owner's window of request ids) and its notification" longbatch_2
finish_cases
