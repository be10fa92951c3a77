#!/bin/bash
# bench-zerocopy.sh: what zero-copy calls do to a call's round trip. For
# each provider, in one run, interleaved: fabrpc-bench latency with
# FABRPC_ZEROCOPY_MIN=0 (every payload copied), with the default (args of
# 64 KiB and more lent) and with 1 (every args lent), each with --baseline
# (fi_pingpong of the same sizes in the same run). Rows are fabrpc-bench's
# JSON with "zerocopy_min" added (null for fi_pingpong's rows), RUNS times
# (default 3), one file per run: OUTDIR/run-N.jsonl. Then prints, per
# provider, size and setting, the median p50 and its ratio to fi_pingpong.
#
# usage: tools/bench-zerocopy.sh BUILDDIR OUTDIR [RUNS]
# Run it on an otherwise idle machine. tcp stays on loopback.
set -euo pipefail
case "${1:-}" in -h|--help) echo "usage: $0 BUILDDIR OUTDIR [RUNS]"; exit 0 ;; esac
if [ $# -lt 2 ]; then
    echo "usage: $0 BUILDDIR OUTDIR [RUNS]" >&2
    exit 2
fi
build=$1 out=$2 runs=${3:-3}
bench=$build/tools/fabrpc-bench
[ -x "$bench" ] || { echo "$0: no $bench" >&2; exit 1; }
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
: "${SIZES:=4k,64k,1m,16m}"
mkdir -p "$out"
for r in $(seq 1 "$runs"); do
    f=$out/run-$r.jsonl
    : >"$f"
    for p in shm tcp; do
        for z in 0 default 1; do
            if [ $z = default ]; then unset FABRPC_ZEROCOPY_MIN; tag=65536
            else export FABRPC_ZEROCOPY_MIN=$z; tag=$z; fi
            "$bench" latency --baseline --json --provider $p --sizes "$SIZES" \
                2>>"$f.err" | sed -e 's/^[^{]*{/{/' | grep '^{' |
                sed -e "/\"system\": *\"fabrpc\"/s/^{/{\"zerocopy_min\": $tag, /" \
                    -e "/\"zerocopy_min\"/!s/^{/{\"zerocopy_min\": null, /" >>"$f"
        done
    done
    unset FABRPC_ZEROCOPY_MIN
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
rows = [json.loads(l) for f in sorted(glob.glob(sys.argv[1] + "/run-*.jsonl"))
        for l in open(f) if l.strip()]
by = {}
for d in rows:
    if d["system"] == "fabrpc":
        key = (d["provider"], d["size"], d["zerocopy_min"])
        by.setdefault(key, []).append((d["p50_us"], d.get("ratio_to_fi_pingpong")))
# The ratio is each row's own (fi_pingpong ran in the same invocation, in
# the same state of the machine); medians over the runs.
print("provider size zerocopy_min p50_us ratio_to_fi_pingpong  (per run: p50/ratio)")
for (p, s, z), v in sorted(by.items()):
    ratios = [r for _, r in v if r is not None]
    print(f"{p} {s} {z} {statistics.median(x for x, _ in v):.1f} "
          f"{statistics.median(ratios) if ratios else float('nan'):.2f}  ("
          + ", ".join(f"{x:.1f}/{r if r is not None else float('nan'):.2f}" for x, r in v) + ")")
PY
