#!/bin/bash
# One-sided transfers over shm (see rma_cases.sh).
PROV=shm
. "$(dirname "$0")/rma_cases.sh"
