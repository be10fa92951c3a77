#!/bin/bash
# One-sided transfers over sockets (see rma_cases.sh).
PROV=sockets
. "$(dirname "$0")/rma_cases.sh"
