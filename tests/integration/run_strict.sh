#!/bin/bash
# Strict mode fails frpc_init naming each required provider that did not
# come up (verbs has no hardware here), and the error reaches fabrpc-run.
. "$(dirname "$0")/lib.sh"
need_var FABRPC_RUN ITEST

strict_verbs() {
    FABRPC_STRICT=1 EXPECT_MISSING=verbs run_bounded 60 "$FABRPC_RUN" -n 2 \
        --provider verbs --timeout 50 "$ITEST" strict
}
strict_mixed() {
    # tcp comes up, verbs and a made-up name do not: both are named.
    FABRPC_STRICT=1 EXPECT_MISSING=verbs,nosuchprov run_bounded 60 "$FABRPC_RUN" \
        -n 2 --provider tcp,verbs,nosuchprov --timeout 50 "$ITEST" strict
}
not_strict() {
    # Without strict mode the same list falls back to tcp.
    EXPECT_PROVIDER=tcp run_bounded 120 "$FABRPC_RUN" -n 2 \
        --provider verbs,tcp --timeout 100 "$ITEST" backend
}
run_case "strict: verbs missing" strict_verbs
run_case "strict: every missing provider named" strict_mixed
run_case "not strict: falls back to the next provider" not_strict
finish_cases
