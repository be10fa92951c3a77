#!/bin/bash
# Asynchronous calls over tcp (see async_cases.sh).
PROV=tcp
. "$(dirname "$0")/async_cases.sh"
