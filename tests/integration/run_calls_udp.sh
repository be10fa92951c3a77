#!/bin/bash
# All-pairs calls over udp (see calls_cases.sh).
PROV=udp
. "$(dirname "$0")/calls_cases.sh"
