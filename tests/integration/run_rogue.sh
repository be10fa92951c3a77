#!/bin/bash
# A misbehaving peer (malformed frames, wrong token, stray answers, bad
# rendezvous descriptors) cannot crash or hang a rank, over shm and tcp.
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN ROGUE

rogue() { run_bounded 120 "$FABRPC_RUN" -n 2 --provider "$1" --timeout 100 "$ROGUE"; }
run_case "shm: rogue frames are dropped or refused" rogue shm
run_case "tcp: rogue frames are dropped or refused" rogue tcp
finish_cases
