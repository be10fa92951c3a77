#!/bin/bash
# All-pairs calls over tcp (see calls_cases.sh).
PROV=tcp
. "$(dirname "$0")/calls_cases.sh"
