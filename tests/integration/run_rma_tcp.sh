#!/bin/bash
# One-sided transfers over tcp (see rma_cases.sh).
PROV=tcp
. "$(dirname "$0")/rma_cases.sh"
