#!/bin/bash
# Errors reach the caller and can be told apart, over shm and tcp: remote
# handler error, unknown function, invalid rank and arguments, too large
# args and reply, timeout with the late answer dropped, call to self, a
# barrier that runs out (FRPC_ETIMEDOUT at its bound). Ranks with
# different limits: payloads over the receiver's refused at once and let
# go by their sender (lent, copied, owned replies).
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN ITEST
export FABRPC_MAX_MSG=1048576

errors() { run_bounded 240 "$FABRPC_RUN" -n "$1" --provider "$2" --timeout 200 "$ITEST" errors; }
run_case "shm: 2 ranks, errors" errors 2 shm
run_case "tcp: 2 ranks, errors" errors 2 tcp
run_case "tcp: 4 ranks, errors" errors 4 tcp
limits() { (unset FABRPC_MAX_MSG; run_bounded 240 "$FABRPC_RUN" -n 2 --provider "$1" --timeout 200 "$ITEST" limits); }
run_case "shm: 2 ranks, different limits" limits shm
run_case "tcp: 2 ranks, different limits" limits tcp
tiny() { (unset FABRPC_MAX_MSG; run_bounded 120 "$FABRPC_RUN" -n 2 --provider "$1" --timeout 100 "$ITEST" tiny); }
run_case "shm: max_msg_size 64: error answers still reach their callers" tiny shm
run_case "tcp: max_msg_size 64: error answers still reach their callers" tiny tcp
finish_cases
