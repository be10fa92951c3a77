#!/bin/bash
# All-pairs calls over shm (see calls_cases.sh).
PROV=shm
. "$(dirname "$0")/calls_cases.sh"
