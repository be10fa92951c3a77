#!/bin/bash
# One-sided transfers over shm with the emulation by messages forced on
# (FABRPC_RMA=emulate): the same suite as run_rma_shm.sh (see rma_cases.sh).
PROV=shm
FABRPC_RMA=emulate
export FABRPC_RMA
. "$(dirname "$0")/rma_cases.sh"
