#!/bin/bash
# One-sided transfers over tcp with the emulation by messages forced on
# (FABRPC_RMA=emulate): the same suite as run_rma_tcp.sh (see rma_cases.sh).
PROV=tcp
FABRPC_RMA=emulate
export FABRPC_RMA
. "$(dirname "$0")/rma_cases.sh"
