#!/bin/bash
# Asynchronous calls over shm (see async_cases.sh).
PROV=shm
. "$(dirname "$0")/async_cases.sh"
