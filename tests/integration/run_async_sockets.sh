#!/bin/bash
# Asynchronous calls over sockets (see async_cases.sh).
PROV=sockets
. "$(dirname "$0")/async_cases.sh"
