#!/bin/bash
# Strict mode fails frpc_init naming each required provider that did not
# come up (verbs has no hardware here), and the error reaches fabrpc-run;
# a name no libfabric provider has fails init in any mode.
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN ITEST

strict_verbs() {
    FABRPC_STRICT=1 EXPECT_MISSING=verbs run_bounded 60 "$FABRPC_RUN" -n 2 \
        --provider verbs --timeout 50 "$ITEST" strict
}
strict_mixed() {
    # tcp comes up, verbs and efa (no hardware here) do not: both named.
    FABRPC_STRICT=1 EXPECT_MISSING=verbs,efa run_bounded 60 "$FABRPC_RUN" \
        -n 2 --provider tcp,verbs,efa --timeout 50 "$ITEST" strict
}
unknown_name() {
    # A typo is not a missing provider: init fails, strict or not.
    EXPECT_UNKNOWN=nosuchprov run_bounded 60 "$FABRPC_RUN" -n 2 \
        --provider nosuchprov,shm --timeout 50 "$ITEST" unknown-provider
}
not_strict() {
    # Without strict mode the same list falls back to tcp.
    EXPECT_PROVIDER=tcp run_bounded 120 "$FABRPC_RUN" -n 2 \
        --provider verbs,tcp --timeout 100 "$ITEST" backend
}
run_case "strict: verbs missing" strict_verbs
run_case "strict: every missing provider named" strict_mixed
run_case "not strict: falls back to the next provider" not_strict
run_case "an unknown provider name fails init, naming what came up" unknown_name
finish_cases
