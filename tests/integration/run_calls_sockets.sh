#!/bin/bash
# All-pairs calls over sockets (see calls_cases.sh).
PROV=sockets
. "$(dirname "$0")/calls_cases.sh"
